//! The two I/O backends behind one owned-buffer interface: io_uring (tokio-uring) and epoll (tokio).
//!
//! Both run on a current-thread runtime per worker, so streams are `!Send` and shared between the
//! two directions of a session by `Rc`. The interface is io_uring's: the buffer is moved into the
//! operation and handed back with the result, which costs the epoll side nothing.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, RawFd};
use std::path::Path;

use tokio_uring::buf::BoundedBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    Uring,
    Epoll,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Uring => "io_uring",
            Backend::Epoll => "epoll",
        }
    }
}

/// Whether io_uring can be used here (kernel support, not blocked by seccomp or sysctl): try to
/// set up a tiny ring.
pub fn uring_available() -> Result<(), String> {
    match tokio_uring::uring_builder().build(4) {
        Ok(_) => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Runs `fut` to completion on a fresh current-thread runtime of the given backend. Tasks started
/// with [`spawn`] inside it run on the same thread.
pub fn block_on<F: std::future::Future>(backend: Backend, fut: F) -> io::Result<F::Output> {
    match backend {
        Backend::Uring => {
            // COOP_TASKRUN: completions are run when the worker next enters the kernel instead
            // of interrupting it with an IPI (the worker is always about to enter it anyway).
            let mut ring = tokio_uring::uring_builder();
            ring.setup_coop_taskrun();
            Ok(tokio_uring::builder()
                .entries(1024)
                .uring_builder(&ring)
                .start(fut))
        }
        Backend::Epoll => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let local = tokio::task::LocalSet::new();
            Ok(local.block_on(&rt, fut))
        }
    }
}

/// Spawns a `!Send` task on the current worker (both backends run a LocalSet).
pub fn spawn<F: std::future::Future + 'static>(fut: F) -> tokio::task::JoinHandle<F::Output> {
    tokio::task::spawn_local(fut)
}

/// A non-blocking unix stream socket connected to `target`: a local listener takes the
/// connection into its backlog at once or refuses it (EAGAIN when the backlog is full).
pub fn unix_socket(
    target: &crate::config::addr::UnixAddr,
) -> io::Result<std::os::unix::net::UnixStream> {
    use crate::config::addr::UnixAddr;
    let addr = match target {
        UnixAddr::Path(p) => socket2::SockAddr::unix(p)?,
        UnixAddr::Abstract(n) => abns_addr(n)?,
    };
    let s = socket2::Socket::new(socket2::Domain::UNIX, socket2::Type::STREAM.cloexec(), None)?;
    s.set_nonblocking(true)?;
    s.connect(&addr)?;
    Ok(s.into())
}

/// HAProxy's `abns@` address: a leading NUL, the name, and NULs up to the end of `sun_path`,
/// with the full structure's length — so the name matches HAProxy's own abstract sockets
/// (and programs that pad the same way), not the shorter unpadded name.
pub(crate) fn abns_addr(name: &str) -> io::Result<socket2::SockAddr> {
    // SAFETY: an all-zero sockaddr_un is valid.
    let mut sun: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    let room = sun.sun_path.len() - 1;
    if name.len() > room {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "abns name too long",
        ));
    }
    sun.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in sun.sun_path[1..].iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    let len = std::mem::size_of::<libc::sockaddr_un>();
    // SAFETY: the storage is at least as large as a sockaddr_un, and `len` is its size.
    let ((), addr) = unsafe {
        socket2::SockAddr::try_init(|storage, l| {
            std::ptr::copy_nonoverlapping(
                (&sun as *const libc::sockaddr_un).cast::<u8>(),
                storage.cast::<u8>(),
                len,
            );
            *l = len as libc::socklen_t;
            Ok(())
        })
    }?;
    Ok(addr)
}

pub enum Stream {
    /// The registration for idle waits comes first: fields drop in order, and it must leave
    /// the epoll set before the socket is closed (tokio-uring closes it synchronously).
    UringTcp(IdleFd, tokio_uring::net::TcpStream),
    UringUnix(IdleFd, tokio_uring::net::UnixStream),
    Tcp(tokio::net::TcpStream),
    Unix(tokio::net::UnixStream),
    /// An epoll-engine TCP socket out of tokio's reactor while its session is parked
    /// ([`Stream::detach`]): tokio's registration (a 256-byte `ScheduledIo`) given back, the
    /// socket in the worker's own epoll instance as an io_uring one is. No I/O until
    /// [`Stream::reattach`]; the socket is None only within those two.
    Detached(IdleFd, Option<std::net::TcpStream>),
}

impl Stream {
    /// Adopts a connected std socket into the given backend.
    pub fn from_std_tcp(backend: Backend, s: std::net::TcpStream) -> io::Result<Stream> {
        s.set_nonblocking(true)?;
        Ok(match backend {
            Backend::Uring => {
                Stream::UringTcp(IdleFd::default(), tokio_uring::net::TcpStream::from_std(s))
            }
            Backend::Epoll => Stream::Tcp(tokio::net::TcpStream::from_std(s)?),
        })
    }

    pub fn from_std_unix(
        backend: Backend,
        s: std::os::unix::net::UnixStream,
    ) -> io::Result<Stream> {
        s.set_nonblocking(true)?;
        Ok(match backend {
            Backend::Uring => {
                Stream::UringUnix(IdleFd::default(), tokio_uring::net::UnixStream::from_std(s))
            }
            Backend::Epoll => Stream::Unix(tokio::net::UnixStream::from_std(s)?),
        })
    }

    /// Connects to a server. The socket is created non-blocking; the connect itself goes through
    /// the backend (an io_uring connect op, or epoll readiness).
    pub async fn connect(backend: Backend, addr: SocketAddr) -> io::Result<Stream> {
        let s = match backend {
            Backend::Uring => Stream::UringTcp(
                IdleFd::default(),
                tokio_uring::net::TcpStream::connect(addr).await?,
            ),
            Backend::Epoll => Stream::Tcp(tokio::net::TcpStream::connect(addr).await?),
        };
        s.set_nodelay(true)?;
        Ok(s)
    }

    /// Connects to a unix-socket server. The connect is non-blocking: a local listener either
    /// takes it into its backlog at once or refuses it (EAGAIN when the backlog is full).
    pub fn connect_unix_server(
        backend: Backend,
        target: &crate::config::addr::UnixAddr,
    ) -> io::Result<Stream> {
        Stream::from_std_unix(backend, unix_socket(target)?)
    }

    pub async fn connect_unix(backend: Backend, path: &Path) -> io::Result<Stream> {
        Ok(match backend {
            Backend::Uring => Stream::UringUnix(
                IdleFd::default(),
                tokio_uring::net::UnixStream::connect(path).await?,
            ),
            Backend::Epoll => Stream::Unix(tokio::net::UnixStream::connect(path).await?),
        })
    }

    /// Reads into the spare capacity of `buf` (appending after `buf.len()`); reserves some if
    /// there is none. Ok(0) is end of stream.
    pub async fn read(&self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        if buf.capacity() == buf.len() {
            buf.reserve(16 * 1024);
        }
        let (len, cap) = (buf.len(), buf.capacity());
        match self {
            Stream::UringTcp(_, s) => {
                let (r, slice) = s.read(buf.slice(len..cap)).await;
                (r, slice.into_inner())
            }
            Stream::UringUnix(_, s) => {
                let (r, slice) = s.read(buf.slice(len..cap)).await;
                (r, slice.into_inner())
            }
            Stream::Tcp(s) => epoll_read(s, buf, cap - len).await,
            Stream::Unix(s) => epoll_read(s, buf, cap - len).await,
            Stream::Detached(..) => (Err(detached()), buf),
        }
    }

    /// A read for a connection that may stay idle for long (a keep-alive connection between
    /// requests): it waits for the socket's readiness holding no buffer, and only then reserves
    /// `want` bytes (if `buf` has no room) and reads. An io_uring read would hold its buffer in
    /// the kernel for as long as the client stays silent, and could not be abandoned without
    /// losing what it reads; a readiness wait holds nothing and can be dropped at any time.
    pub fn read_idle(&self, buf: Vec<u8>, want: usize) -> ReadIdle<'_> {
        let src = match self {
            Stream::UringTcp(idle, s) => idle.get(s.as_raw_fd()).map(IdleSrc::Uring),
            Stream::UringUnix(idle, s) => idle.get(s.as_raw_fd()).map(IdleSrc::Uring),
            Stream::Tcp(s) => Ok(IdleSrc::Tcp(s)),
            Stream::Unix(s) => Ok(IdleSrc::Unix(s)),
            Stream::Detached(..) => Err(detached()),
        };
        match src {
            Ok(src) => ReadIdle::Wait(IdleRead {
                src,
                had: buf.capacity(),
                buf,
                want,
            }),
            // No epoll registration to be had: an io_uring read, as between requests before.
            Err(_) => ReadIdle::Boxed(Box::pin(self.read(reserve(buf, want)))),
        }
    }

    /// Whether a session idle on this socket can park (see [`Stream::idle_ticket`]; an epoll
    /// engine's TCP socket once detached, [`Stream::detach`]).
    pub fn parks(&self) -> bool {
        matches!(
            self,
            Stream::UringTcp(..) | Stream::UringUnix(..) | Stream::Tcp(_)
        )
    }

    /// What parks a session idle on this socket ([`super::readiness::Ticket::park`]): only a
    /// socket in the worker's own epoll instance has a slot — an io_uring one, or an epoll
    /// engine's once detached (tokio's registrations wake tasks only).
    pub fn idle_ticket(&self) -> Option<super::readiness::Ticket> {
        match self {
            Stream::UringTcp(idle, s) => idle.get(s.as_raw_fd()).ok().map(|r| r.ticket()),
            Stream::UringUnix(idle, s) => idle.get(s.as_raw_fd()).ok().map(|r| r.ticket()),
            Stream::Detached(idle, Some(s)) => idle.get(s.as_raw_fd()).ok().map(|r| r.ticket()),
            Stream::Tcp(_) | Stream::Unix(_) | Stream::Detached(_, None) => None,
        }
    }

    /// Takes an epoll engine's TCP socket out of tokio's reactor, for its session to park in
    /// the worker's epoll instance ([`Stream::idle_ticket`] then gives the ticket): a parked
    /// connection then holds a 24-byte slot instead of tokio's 256-byte registration, as on
    /// io_uring. Two `epoll_ctl`s now and two at [`Stream::reattach`], paid only while the
    /// process waits lean. Other streams are left as they are (false).
    pub fn detach(&mut self) -> bool {
        let Stream::Tcp(_) = self else {
            return false;
        };
        let Stream::Tcp(s) = std::mem::replace(self, Stream::Detached(IdleFd::default(), None))
        else {
            unreachable!("matched as Tcp just above");
        };
        match s.into_std() {
            Ok(std) => {
                *self = Stream::Detached(IdleFd::default(), Some(std));
                true
            }
            // Left detached without a socket: its reads and writes fail, and the session ends.
            Err(_) => false,
        }
    }

    /// Gives a detached socket back to tokio's reactor (out of the worker's epoll instance
    /// first); anything else stays as it is. An error ends the session (its I/O fails).
    pub fn reattach(&mut self) -> io::Result<()> {
        let Stream::Detached(_, Some(_)) = self else {
            return Ok(());
        };
        let Stream::Detached(idle, Some(std)) =
            std::mem::replace(self, Stream::Detached(IdleFd::default(), None))
        else {
            unreachable!("matched as detached with its socket just above");
        };
        drop(idle);
        *self = Stream::Tcp(tokio::net::TcpStream::from_std(std)?);
        Ok(())
    }

    /// Writes all of `buf`.
    pub async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        match self {
            Stream::UringTcp(_, s) => s.write_all(buf).await,
            Stream::UringUnix(_, s) => s.write_all(buf).await,
            Stream::Tcp(s) => epoll_write_all(s, buf).await,
            Stream::Unix(s) => epoll_write_all(s, buf).await,
            Stream::Detached(..) => (Err(detached()), buf),
        }
    }

    /// Half-close: no more data from us (FIN).
    pub fn shutdown_write(&self) -> io::Result<()> {
        shutdown_fd(self.raw_fd(), libc::SHUT_WR)
    }

    /// Closes both directions now; with `rst`, the close sends a RST (SO_LINGER 0), as HAProxy
    /// does when it aborts a server connection.
    pub fn abort(&self, rst: bool) {
        if rst {
            self.reset_on_close();
        }
        let _ = shutdown_fd(self.raw_fd(), libc::SHUT_RDWR);
    }

    /// Makes the coming close send a RST (SO_LINGER 0) without shutting down first.
    pub fn reset_on_close(&self) {
        if let Some(sock) = self.sock() {
            let _ = sock.set_linger(Some(std::time::Duration::ZERO));
        }
    }

    /// SO_KEEPALIVE (`option clitcpka|srvtcpka|tcpka`), with the kernel's timings.
    pub fn set_keepalive(&self) {
        if matches!(
            self,
            Stream::UringTcp(..) | Stream::Tcp(_) | Stream::Detached(..)
        ) && let Some(sock) = self.sock()
        {
            let _ = sock.set_keepalive(true);
        }
    }

    /// The socket, borrowed for its options (None: a detached stream that lost it).
    fn sock(&self) -> Option<std::mem::ManuallyDrop<socket2::Socket>> {
        let fd = self.raw_fd();
        // SAFETY: `fd` is this stream's open socket for as long as the borrow of `self`; the
        // ManuallyDrop keeps the Socket from closing it.
        (fd >= 0).then(|| std::mem::ManuallyDrop::new(unsafe { socket2::Socket::from_raw_fd(fd) }))
    }

    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        match self {
            Stream::UringTcp(_, s) => s.set_nodelay(on),
            Stream::Tcp(s) => s.set_nodelay(on),
            _ => Ok(()),
        }
    }

    pub fn raw_fd(&self) -> RawFd {
        match self {
            Stream::UringTcp(_, s) => s.as_raw_fd(),
            Stream::UringUnix(_, s) => s.as_raw_fd(),
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
            Stream::Detached(_, s) => s.as_ref().map_or(-1, |s| s.as_raw_fd()),
        }
    }

    /// Local address of a TCP stream (`dst`/`%fi:%fp`), from the socket itself.
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.sock()?.local_addr().ok().and_then(|a| a.as_socket())
    }
}

/// What I/O on a detached stream gets (none is made: a session reattaches its socket first).
fn detached() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "socket detached for parking")
}

/// The readiness calls of tokio's TCP and unix streams, which share no trait for them.
trait Readiness {
    async fn readable(&self) -> io::Result<()>;
    fn poll_read_ready(&self, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<()>>;
    async fn writable(&self) -> io::Result<()>;
    fn try_read_buf(&self, buf: &mut Vec<u8>) -> io::Result<usize>;
    fn try_write(&self, buf: &[u8]) -> io::Result<usize>;
    /// Drops the cached read readiness.
    fn clear_readable(&self);
}

macro_rules! readiness {
    ($($t:ty),*) => {$(
        impl Readiness for $t {
            async fn readable(&self) -> io::Result<()> {
                <$t>::readable(self).await
            }
            fn poll_read_ready(
                &self,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<io::Result<()>> {
                <$t>::poll_read_ready(self, cx)
            }
            async fn writable(&self) -> io::Result<()> {
                <$t>::writable(self).await
            }
            fn try_read_buf(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
                <$t>::try_read_buf(self, buf)
            }
            fn try_write(&self, buf: &[u8]) -> io::Result<usize> {
                <$t>::try_write(self, buf)
            }
            fn clear_readable(&self) {
                let _ = <$t>::try_io(self, tokio::io::Interest::READABLE, || {
                    Err::<(), _>(io::ErrorKind::WouldBlock.into())
                });
            }
        }
    )*};
}

readiness!(tokio::net::TcpStream, tokio::net::UnixStream);

/// The readiness registration of an io_uring socket ([`super::readiness`]), made at its first
/// [`Stream::read_idle`] (a connection that never waits idle never pays the `epoll_ctl`) and
/// removed when the stream drops, before the socket closes.
#[derive(Default)]
pub struct IdleFd(std::cell::OnceCell<super::readiness::Registration>);

impl IdleFd {
    fn get(&self, fd: RawFd) -> io::Result<&super::readiness::Registration> {
        if let Some(r) = self.0.get() {
            return Ok(r);
        }
        // `fd` is the socket of the stream this registration sits beside in its `Stream`
        // variant; declared before it, the registration drops first, so the descriptor stays
        // open and the same for the registration's whole life.
        let r = super::readiness::Registration::new(fd)?;
        Ok(self.0.get_or_init(|| r))
    }
}

/// A read's outcome and its buffer.
pub type ReadOut = (io::Result<usize>, Vec<u8>);

/// [`Stream::read_idle`]'s future, written by hand: it is what an idle connection holds while
/// it waits, and an `async fn` over tokio's `readable()` carried a waiter node and every
/// argument twice (200 bytes; this is 64).
pub enum ReadIdle<'a> {
    Wait(IdleRead<'a>),
    /// A read that cannot wait for readiness (TLS, or no epoll registration): rare, boxed.
    Boxed(std::pin::Pin<Box<dyn std::future::Future<Output = ReadOut> + 'a>>),
}

pub struct IdleRead<'a> {
    src: IdleSrc<'a>,
    buf: Vec<u8>,
    want: usize,
    /// The buffer's capacity when the read began (0: it is given back on a stale readiness).
    had: usize,
}

impl std::future::Future for ReadIdle<'_> {
    type Output = ReadOut;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<ReadOut> {
        match self.get_mut() {
            ReadIdle::Boxed(f) => f.as_mut().poll(cx),
            ReadIdle::Wait(r) => r.poll_read(cx).map(|res| (res, std::mem::take(&mut r.buf))),
        }
    }
}

/// What an idle read waits on: the epoll registration beside an io_uring socket, or tokio's
/// own stream.
enum IdleSrc<'a> {
    Uring(&'a super::readiness::Registration),
    Tcp(&'a tokio::net::TcpStream),
    Unix(&'a tokio::net::UnixStream),
}

impl IdleRead<'_> {
    /// [`Stream::read_idle`]'s steps: readiness (the task's waker kept in the registration's
    /// reader slot), then a non-blocking recv with `want` bytes of room, until one gives an
    /// outcome. Readiness is cleared once a read drained the socket: nothing can come between
    /// the two, as the worker thread that reads is also the one that learns of events (from its
    /// epoll instance, [`super::readiness`], or tokio's reactor).
    fn poll_read(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<io::Result<usize>> {
        use std::task::{Poll, ready};
        let (buf, want, had) = (&mut self.buf, self.want, self.had);
        loop {
            let out = match &self.src {
                IdleSrc::Uring(reg) => {
                    ready!(reg.poll_read_ready(cx));
                    let (out, drained) = idle_step(buf, want, had, |b| recv_into(reg.fd(), b));
                    if drained {
                        reg.clear_ready();
                    }
                    out
                }
                IdleSrc::Tcp(s) => ready!(poll_tokio_step(*s, cx, buf, want, had))?,
                IdleSrc::Unix(s) => ready!(poll_tokio_step(*s, cx, buf, want, had))?,
            };
            if let Some(r) = out {
                return Poll::Ready(r);
            }
        }
    }
}

/// [`IdleRead::poll_read`]'s step on one of tokio's streams: Ready(Ok(None)) when the readiness
/// was stale.
fn poll_tokio_step(
    s: &impl Readiness,
    cx: &mut std::task::Context<'_>,
    buf: &mut Vec<u8>,
    want: usize,
    had: usize,
) -> std::task::Poll<io::Result<Option<io::Result<usize>>>> {
    std::task::ready!(s.poll_read_ready(cx))?;
    let (out, drained) = idle_step(buf, want, had, |b| s.try_read_buf(b));
    if drained {
        s.clear_readable();
    }
    std::task::Poll::Ready(Ok(out))
}

/// One read once the socket was readable: its outcome (None: the readiness was stale, wait
/// again, the buffer given back if the read began with none: `had == 0`) and whether it
/// drained the socket (its readiness is then cleared).
fn idle_step(
    buf: &mut Vec<u8>,
    want: usize,
    had: usize,
    read: impl FnOnce(&mut Vec<u8>) -> io::Result<usize>,
) -> (Option<io::Result<usize>>, bool) {
    *buf = reserve(std::mem::take(buf), want);
    let room = buf.capacity() - buf.len();
    match read(buf) {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
            if had == 0 && buf.is_empty() {
                *buf = Vec::new();
            }
            (None, true)
        }
        // A short read drained the socket (see `epoll_read`).
        Ok(n) if n > 0 && n < room => (Some(Ok(n)), true),
        r => (Some(r), false),
    }
}

/// One non-blocking recv into the spare capacity of `buf`.
fn recv_into(fd: RawFd, buf: &mut Vec<u8>) -> io::Result<usize> {
    let room = buf.capacity() - buf.len();
    // SAFETY: recv writes at most `room` bytes into the spare capacity of `buf`, and only the
    // bytes it reports are then counted as initialised.
    let n = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr().add(buf.len()).cast(),
            room,
            libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    // SAFETY: the kernel initialised `n <= room` bytes after `len`.
    unsafe { buf.set_len(buf.len() + n) };
    Ok(n)
}

/// `buf` with room for `want` more bytes.
pub fn reserve(mut buf: Vec<u8>, want: usize) -> Vec<u8> {
    if buf.capacity() - buf.len() < want {
        buf.reserve(want);
    }
    buf
}

/// `Stream::read` on epoll: `room` is the spare capacity of `buf`.
async fn epoll_read(
    s: &impl Readiness,
    mut buf: Vec<u8>,
    room: usize,
) -> (io::Result<usize>, Vec<u8>) {
    loop {
        if let Err(e) = s.readable().await {
            return (Err(e), buf);
        }
        match s.try_read_buf(&mut buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Ok(n) if n > 0 && n < room => {
                // A short read drained the socket: drop the cached readiness now rather than
                // learn it from an EAGAIN on the next read (one syscall saved per read; a new
                // edge sets it again).
                s.clear_readable();
                return (Ok(n), buf);
            }
            r => return (r, buf),
        }
    }
}

/// `Stream::write_all` on epoll.
async fn epoll_write_all(s: &impl Readiness, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
    let mut off = 0;
    while off < buf.len() {
        if let Err(e) = s.writable().await {
            return (Err(e), buf);
        }
        match s.try_write(&buf[off..]) {
            Ok(0) => return (Err(io::ErrorKind::WriteZero.into()), buf),
            Ok(n) => off += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => return (Err(e), buf),
        }
    }
    (Ok(()), buf)
}

fn shutdown_fd(fd: RawFd, how: libc::c_int) -> io::Result<()> {
    // SAFETY: plain syscall on a descriptor we own for the call's duration.
    if unsafe { libc::shutdown(fd, how) } == 0 {
        Ok(())
    } else {
        let e = io::Error::last_os_error();
        if e.raw_os_error() == Some(libc::ENOTCONN) {
            Ok(())
        } else {
            Err(e)
        }
    }
}

/// A listening socket adopted by one worker's backend.
pub enum Listener {
    UringTcp(tokio_uring::net::TcpListener),
    Tcp(tokio::net::TcpListener),
    /// Unix listeners use readiness on both backends (tokio-uring cannot adopt one); accepted
    /// streams are then moved to the worker's backend.
    Unix(tokio::net::UnixListener),
    /// A TCP listener of an io_uring worker accepted through readiness instead: dropping its
    /// pending accept leaves nothing queued in the kernel, so a listener handed over to a new
    /// process can stop being accepted from without a shutdown (see `engine::handover`).
    UringReady(tokio::io::unix::AsyncFd<std::net::TcpListener>),
}

/// What `accept` returns: the stream and the client address (None for unix sockets).
pub struct Accepted {
    pub stream: Stream,
    pub peer: Option<SocketAddr>,
    /// What the client connected to (`dst`): filled by the accept loop, from the listener's own
    /// address when it is a specific one (no `getsockname` per connection), else the socket's.
    pub local: Option<SocketAddr>,
}

impl Listener {
    /// Adopts a bound, listening std socket (created by `engine::listen`).
    pub fn from_socket(
        backend: Backend,
        sock: socket2::Socket,
        unix: bool,
    ) -> io::Result<Listener> {
        sock.set_nonblocking(true)?;
        if unix {
            let l = std::os::unix::net::UnixListener::from(std::os::fd::OwnedFd::from(sock));
            return Ok(Listener::Unix(tokio::net::UnixListener::from_std(l)?));
        }
        // Accepted sockets inherit TCP_NODELAY from the listener (Linux copies `nonagle` into
        // the child): set here once, not per connection. A socket handed over by an older
        // process or named by `fd@` may not have it yet.
        sock.set_nodelay(true)?;
        let l: std::net::TcpListener = sock.into();
        Ok(match backend {
            Backend::Uring => Listener::UringTcp(tokio_uring::net::TcpListener::from_std(l)),
            Backend::Epoll => Listener::Tcp(tokio::net::TcpListener::from_std(l)?),
        })
    }

    /// [`Listener::from_socket`], with an accept that can be dropped at any time without losing
    /// a connection (an io_uring accept op, once submitted, takes the next connection even when
    /// nobody waits for it any more).
    pub fn from_socket_cancellable(
        backend: Backend,
        sock: socket2::Socket,
        unix: bool,
    ) -> io::Result<Listener> {
        if unix || backend == Backend::Epoll {
            return Listener::from_socket(backend, sock, unix);
        }
        sock.set_nonblocking(true)?;
        sock.set_nodelay(true)?;
        let l: std::net::TcpListener = sock.into();
        // SAFETY: the listener owns its descriptor and is never closed or replaced while the
        // AsyncFd holds it.
        Ok(Listener::UringReady(unsafe {
            tokio::io::unix::AsyncFd::register(l)?
        }))
    }

    /// Whether dropping an `accept` future is safe (see [`Listener::from_socket_cancellable`]).
    pub fn cancellable(&self) -> bool {
        !matches!(self, Listener::UringTcp(_))
    }

    pub async fn accept(&self, backend: Backend) -> io::Result<Accepted> {
        match self {
            Listener::UringReady(l) => loop {
                let mut ready = l.readable().await?;
                if let Ok(r) = ready.try_io(|l| l.get_ref().accept()) {
                    let (s, peer) = r?;
                    return Ok(Accepted {
                        stream: Stream::UringTcp(
                            IdleFd::default(),
                            tokio_uring::net::TcpStream::from_std(s),
                        ),
                        peer: Some(peer),
                        local: None,
                    });
                }
            },
            Listener::UringTcp(l) => {
                let (s, peer) = l.accept().await?;
                Ok(Accepted {
                    stream: Stream::UringTcp(IdleFd::default(), s),
                    peer: Some(peer),
                    local: None,
                })
            }
            Listener::Tcp(l) => {
                let (s, peer) = l.accept().await?;
                Ok(Accepted {
                    stream: Stream::Tcp(s),
                    peer: Some(peer),
                    local: None,
                })
            }
            Listener::Unix(l) => {
                let (s, _) = l.accept().await?;
                let stream = match backend {
                    Backend::Epoll => Stream::Unix(s),
                    Backend::Uring => {
                        let std = s.into_std()?;
                        Stream::UringUnix(
                            IdleFd::default(),
                            tokio_uring::net::UnixStream::from_std(std),
                        )
                    }
                };
                Ok(Accepted {
                    stream,
                    peer: None,
                    local: None,
                })
            }
        }
    }

    /// The address every connection it accepts is addressed to, when the listener is bound to
    /// a specific one (None: a wildcard address, or a unix socket).
    pub fn fixed_local(&self) -> Option<SocketAddr> {
        // SAFETY: borrowed for the call; the listener keeps the descriptor open.
        let sock =
            std::mem::ManuallyDrop::new(unsafe { socket2::Socket::from_raw_fd(self.raw_fd()) });
        let a = sock.local_addr().ok()?.as_socket()?;
        (!a.ip().is_unspecified()).then_some(a)
    }

    pub fn raw_fd(&self) -> RawFd {
        match self {
            Listener::UringTcp(l) => l.as_raw_fd(),
            Listener::Tcp(l) => l.as_raw_fd(),
            Listener::Unix(l) => l.as_raw_fd(),
            Listener::UringReady(l) => l.as_raw_fd(),
        }
    }
}

/// Wakes every accept pending on a listening socket (Linux returns EINVAL to a blocked or queued
/// accept once the listener is shut down), so stopping never waits for a client and never leaves
/// an io_uring accept whose descriptor would leak.
pub fn stop_listening(fd: RawFd) {
    let _ = shutdown_fd(fd, libc::SHUT_RD);
}

/// Duplicates a descriptor (close-on-exec), so each worker owns its copy of a shared listener.
pub fn dup_socket(fd: RawFd) -> io::Result<socket2::Socket> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor we then own.
    let n = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(unsafe { socket2::Socket::from_raw_fd(n) })
}

/// Takes ownership of a raw descriptor as a socket (for `fd@N`).
///
/// # Safety
/// `fd` must be an open socket descriptor not owned by anything else.
pub unsafe fn socket_from_raw(fd: RawFd) -> socket2::Socket {
    unsafe { socket2::Socket::from_raw_fd(fd) }
}

pub fn into_raw(s: socket2::Socket) -> RawFd {
    s.into_raw_fd()
}

/// Looks at what a client has sent without consuming it (`MSG_PEEK`), for `tcp-request content`
/// inspection: the bytes stay in the socket for the relay, so a wait abandoned when
/// `inspect-delay` expires loses nothing (an io_uring read cannot be cancelled that safely).
///
/// Readiness comes from tokio's reactor (tokio-uring runs one too) through a duplicate of the
/// descriptor: its own registration, so clearing its readiness after each peek (the unread
/// bytes would otherwise keep it set) leaves the stream's own readiness untouched for the relay.
pub struct Peeker {
    fd: tokio::io::unix::AsyncFd<socket2::Socket>,
}

impl Peeker {
    pub fn new(stream: &Stream) -> io::Result<Peeker> {
        let dup = dup_socket(stream.raw_fd())?;
        // SAFETY: the duplicate is owned by the AsyncFd, which deregisters it before closing it.
        let fd = unsafe {
            tokio::io::unix::AsyncFd::register_with_interest(dup, tokio::io::Interest::READABLE)?
        };
        Ok(Peeker { fd })
    }

    /// Copies the pending bytes into `buf` at once, without waiting (0 if none yet).
    pub fn try_peek(&self, buf: &mut [u8]) -> io::Result<usize> {
        match peek_fd(self.fd.as_raw_fd(), buf) {
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Ok(0),
            other => other,
        }
    }

    /// Waits until bytes arrive that were not there at the previous call (or the client
    /// closes), then copies everything pending into `buf`. Returns the byte count and whether
    /// the client has closed its side (no more will come). Cancel-safe.
    pub async fn peek(&self, buf: &mut [u8]) -> io::Result<(usize, bool)> {
        let fd = self.fd.as_raw_fd();
        loop {
            let mut g = self.fd.readable().await?;
            let closed = g.ready().is_read_closed();
            // The peek reports WouldBlock so the readiness is cleared and the next wait is for
            // new bytes; the readiness tick taken before it keeps a later arrival from being
            // cleared with it.
            let mut got = None;
            let _ = g.try_io(|_| {
                got = Some(peek_fd(fd, buf));
                Err::<(), _>(io::ErrorKind::WouldBlock.into())
            });
            match got {
                Some(Ok(n)) => return Ok((n, closed || n == 0)),
                Some(Err(e)) if e.kind() != io::ErrorKind::WouldBlock => return Err(e),
                _ => {}
            }
        }
    }
}

impl Peeker {
    /// Takes `n` bytes that a peek has shown pending out of the socket (a PROXY protocol
    /// header), so that what follows is the stream's first byte. Fails if fewer are pending.
    pub fn consume(&self, n: usize) -> io::Result<()> {
        let mut buf = vec![0u8; n];
        let mut done = 0;
        while done < n {
            // SAFETY: recv into a buffer we own, bounded by its length.
            let r = unsafe {
                libc::recv(
                    self.fd.as_raw_fd(),
                    buf[done..].as_mut_ptr().cast(),
                    n - done,
                    libc::MSG_DONTWAIT,
                )
            };
            match r {
                r if r < 0 => return Err(io::Error::last_os_error()),
                0 => return Err(io::ErrorKind::UnexpectedEof.into()),
                r => done += r as usize,
            }
        }
        Ok(())
    }
}

fn peek_fd(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: recv into a buffer we own, bounded by its length.
    let n = unsafe {
        libc::recv(
            fd,
            buf.as_mut_ptr().cast(),
            buf.len(),
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// How the relay can reach a TCP socket for splice(2) (see `tcp::pipe`).
#[derive(Clone, Copy)]
pub enum SpliceFd<'a> {
    /// An epoll stream: splices wait on the stream's own readiness.
    Tokio(&'a tokio::net::TcpStream),
    /// An io_uring stream: readiness needs a duplicate registered with tokio's reactor (which
    /// tokio-uring runs too), as [`Peeker`] does.
    Uring(RawFd),
}

impl Stream {
    /// The socket for splice(2): TCP streams only (a unix stream keeps the copy path).
    pub fn splice_fd(&self) -> Option<SpliceFd<'_>> {
        match self {
            Stream::Tcp(s) => Some(SpliceFd::Tokio(s)),
            Stream::UringTcp(_, s) => Some(SpliceFd::Uring(s.as_raw_fd())),
            _ => None,
        }
    }
}

/// A socket's readiness for splice(2) calls. For an io_uring stream it owns a duplicate of the
/// descriptor: one per socket, shared by both directions (a descriptor is registered once), and
/// dropped before the session resets or closes the socket, so the duplicate neither keeps it
/// open nor delays its RST.
pub enum SpliceSock<'a> {
    Tokio(&'a tokio::net::TcpStream),
    Dup(tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>),
}

impl<'a> SpliceSock<'a> {
    pub fn new(fd: SpliceFd<'a>) -> io::Result<SpliceSock<'a>> {
        match fd {
            SpliceFd::Tokio(s) => Ok(SpliceSock::Tokio(s)),
            SpliceFd::Uring(raw) => {
                let dup = std::os::fd::OwnedFd::from(dup_socket(raw)?);
                // splice(2) blocks on a blocking socket whatever its flags say; io_uring still
                // waits (poll-arms) on a non-blocking socket, so this changes nothing for its
                // reads and writes. The flag is the shared file description's.
                // SAFETY: fcntl on a descriptor we own.
                let fl = unsafe { libc::fcntl(dup.as_raw_fd(), libc::F_GETFL) };
                if fl < 0
                    || unsafe { libc::fcntl(dup.as_raw_fd(), libc::F_SETFL, fl | libc::O_NONBLOCK) }
                        < 0
                {
                    return Err(io::Error::last_os_error());
                }
                // SAFETY: the duplicate is owned by the AsyncFd, which deregisters it before
                // closing it.
                Ok(SpliceSock::Dup(unsafe {
                    tokio::io::unix::AsyncFd::register_with_interest(
                        dup,
                        tokio::io::Interest::READABLE | tokio::io::Interest::WRITABLE,
                    )?
                }))
            }
        }
    }

    pub fn raw_fd(&self) -> RawFd {
        match self {
            SpliceSock::Tokio(s) => s.as_raw_fd(),
            SpliceSock::Dup(a) => a.as_raw_fd(),
        }
    }

    /// Runs the non-blocking `f` once the socket is ready for `write` (else for reading), again
    /// after each WouldBlock (which clears the readiness). Cancel-safe.
    pub async fn io<R>(&self, write: bool, mut f: impl FnMut() -> io::Result<R>) -> io::Result<R> {
        use tokio::io::Interest;
        let interest = if write {
            Interest::WRITABLE
        } else {
            Interest::READABLE
        };
        loop {
            match self {
                SpliceSock::Tokio(s) => {
                    s.ready(interest).await?;
                    match s.try_io(interest, &mut f) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                        r => return r,
                    }
                }
                SpliceSock::Dup(a) => {
                    let mut g = a.ready(interest).await?;
                    if let Ok(r) = g.try_io(|_| f()) {
                        return r;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::time::Duration;

    /// An idle read given up (a keep-alive timeout, a soft stop) must lose nothing: the bytes
    /// that come later are read whole by the next one — unlike an io_uring read, which would
    /// complete into its orphaned buffer.
    fn abandoned_idle_read_loses_nothing(backend: Backend) {
        let (ours, mut peer) = std::os::unix::net::UnixStream::pair().expect("socketpair");
        block_on(backend, async move {
            let s = Stream::from_std_unix(backend, ours).expect("adopt");
            let wait = s.read_idle(Vec::new(), 1024);
            let gave_up = tokio::time::timeout(Duration::from_millis(20), wait).await;
            assert!(gave_up.is_err(), "nothing was sent yet");
            peer.write_all(b"GET / HTTP/1.1\r\n\r\n").expect("write");
            let next = s.read_idle(Vec::new(), 1024);
            let (n, buf) = tokio::time::timeout(Duration::from_secs(10), next)
                .await
                .expect("the bytes sent after the abandoned read are read");
            assert_eq!(n.expect("read"), 18);
            assert_eq!(&buf[..], b"GET / HTTP/1.1\r\n\r\n");
            assert!(buf.capacity() >= 1024, "room for a head once bytes came");
            drop(peer);
            let (n, _) = s.read_idle(Vec::new(), 1024).await;
            assert_eq!(n.expect("end of stream"), 0);
        })
        .expect("runtime");
    }

    #[test]
    fn abandoned_idle_read_loses_nothing_on_io_uring() {
        abandoned_idle_read_loses_nothing(Backend::Uring);
    }

    #[test]
    fn abandoned_idle_read_loses_nothing_on_epoll() {
        abandoned_idle_read_loses_nothing(Backend::Epoll);
    }

    /// Accepted connections have TCP_NODELAY (small responses leave at once) through the
    /// listener, which each way of adopting one sets, even on a socket that came without it (a
    /// handed-over or `fd@` socket): no `setsockopt` per connection.
    #[test]
    fn accepted_connections_inherit_tcp_nodelay() {
        for backend in [Backend::Uring, Backend::Epoll] {
            for cancellable in [false, true] {
                let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                    .expect("socket");
                let any: std::net::SocketAddr = "127.0.0.1:0".parse().expect("addr");
                sock.bind(&any.into()).expect("bind");
                sock.listen(8).expect("listen");
                assert!(!sock.nodelay().expect("getsockopt"), "starts without");
                let addr = sock.local_addr().expect("addr").as_socket().expect("inet");
                block_on(backend, async move {
                    let l = match cancellable {
                        true => Listener::from_socket_cancellable(backend, sock, false),
                        false => Listener::from_socket(backend, sock, false),
                    }
                    .expect("adopt");
                    let _client = std::net::TcpStream::connect(addr).expect("connect");
                    let acc = tokio::time::timeout(Duration::from_secs(10), l.accept(backend))
                        .await
                        .expect("accepted in time")
                        .expect("accept");
                    let fd = acc.stream.raw_fd();
                    // SAFETY: borrowed only for this read; `acc` keeps the descriptor open.
                    let s = std::mem::ManuallyDrop::new(unsafe {
                        <socket2::Socket as std::os::fd::FromRawFd>::from_raw_fd(fd)
                    });
                    assert!(
                        s.nodelay().expect("getsockopt"),
                        "{backend:?} {cancellable}"
                    );
                })
                .expect("runtime");
            }
        }
    }

    /// An epoll engine's TCP socket detached for parking: out of tokio's reactor, readable
    /// through the worker's epoll instance (its ticket), refusing I/O without a panic; bytes
    /// that came meanwhile are read whole once it is back in tokio's reactor. Other streams
    /// (io_uring, unix sockets) do not detach.
    #[test]
    fn an_epoll_tcp_stream_detaches_for_parking_and_comes_back() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let mut peer = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("conn");
        let (ours, _) = l.accept().expect("accept");
        block_on(Backend::Epoll, async move {
            let mut s = Stream::from_std_tcp(Backend::Epoll, ours).expect("adopt");
            assert!(
                s.idle_ticket().is_none(),
                "tokio's registration has no slot"
            );
            assert!(s.detach(), "detached");
            assert!(matches!(s, Stream::Detached(_, Some(_))));
            let ticket = s
                .idle_ticket()
                .expect("a slot in the worker's epoll instance");
            assert!(ticket.may_park(), "nothing to read yet");
            let (r, _) = s.read(Vec::with_capacity(64)).await;
            assert_eq!(r.expect_err("no I/O").kind(), io::ErrorKind::NotConnected);
            assert!(s.local_addr().is_some(), "its options still reachable");
            peer.write_all(b"GET / HTTP/1.1\r\n\r\n").expect("write");
            s.reattach().expect("back in tokio's reactor");
            assert!(matches!(s, Stream::Tcp(_)));
            let next = s.read_idle(Vec::new(), 1024);
            let (n, buf) = tokio::time::timeout(Duration::from_secs(10), next)
                .await
                .expect("the bytes sent while detached are read");
            assert_eq!(
                (n.expect("read"), &buf[..]),
                (18, &b"GET / HTTP/1.1\r\n\r\n"[..])
            );
            s.reattach()
                .expect("a stream in the reactor stays as it is");
        })
        .expect("runtime");
        let (ours, _peer) = std::os::unix::net::UnixStream::pair().expect("socketpair");
        block_on(Backend::Epoll, async move {
            let mut s = Stream::from_std_unix(Backend::Epoll, ours).expect("adopt");
            assert!(!s.detach(), "a unix socket waits in its task");
        })
        .expect("runtime");
    }

    /// On io_uring the idle read's readiness must not go stale: bytes read by io_uring reads
    /// in between (a transaction's) leave readiness set, and the next idle read must still wait
    /// for new bytes rather than return with nothing.
    #[test]
    fn idle_read_after_io_uring_reads_waits_for_new_bytes() {
        let (ours, mut peer) = std::os::unix::net::UnixStream::pair().expect("socketpair");
        block_on(Backend::Uring, async move {
            let s = Stream::from_std_unix(Backend::Uring, ours).expect("adopt");
            peer.write_all(b"one").expect("write");
            let (n, _) = s.read_idle(Vec::new(), 64).await;
            assert_eq!(n.expect("read"), 3);
            peer.write_all(b"two").expect("write");
            let (n, buf) = s.read(Vec::with_capacity(64)).await;
            assert_eq!((n.expect("read"), &buf[..]), (3, &b"two"[..]));
            let wait = s.read_idle(Vec::new(), 64);
            assert!(
                tokio::time::timeout(Duration::from_millis(20), wait)
                    .await
                    .is_err(),
                "no new bytes: the idle read waits"
            );
            peer.write_all(b"three").expect("write");
            let next = s.read_idle(Vec::new(), 64);
            let (n, buf) = tokio::time::timeout(Duration::from_secs(10), next)
                .await
                .expect("the new bytes are read");
            assert_eq!((n.expect("read"), &buf[..]), (5, &b"three"[..]));
        })
        .expect("runtime");
    }
}
