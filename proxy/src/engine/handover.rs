//! Hitless reload: the listening sockets handed from the old process to the new one over the
//! admin socket (`_getsocks`, what HAProxy's `-x` and `expose-fd listeners` do).
//!
//! The wire format is HAProxy 2.6's, so that either side may be HAProxy: after the `_getsocks`
//! line the old process sends the number of sockets as a native-endian `int`, then batches of at
//! most [`MAX_SEND_FD`] descriptors (SCM_RIGHTS) whose data holds, per socket, a namespace length
//! byte and name, an interface length byte and name, and 4 zero bytes (listener options before
//! HAProxy 2.3). The receiver acks every batch with an `int`; the sender waits for that ack after
//! each full batch. HAProxy reads the records only, so portcullis appends after the last record a
//! trailer it ignores: `portcullis-getsocks 1 <n>\n`, then per socket a tab-separated line with
//! the worker index, family, address, frontend and bind location.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// At most this many descriptors per message, as HAProxy (its receiver sizes buffers for it).
pub const MAX_SEND_FD: usize = 253;
const TRAILER_MAGIC: &str = "portcullis-getsocks";
const TRAILER_VERSION: u32 = 1;
/// How long either side waits for the other during a transfer (HAProxy's receiver waits 1 s; a
/// loaded 2-core machine deserves more).
const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// What portcullis tells about a socket beside the descriptor itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// The worker thread that accepts on it.
    pub worker: u32,
    /// `ipv4`, `ipv6` or `unix`.
    pub family: String,
    pub addr: String,
    pub frontend: String,
    /// `file:line` of the bind line.
    pub bind: String,
}

/// One socket's record as received (HAProxy's fields, plus portcullis' trailer when present).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Record {
    pub namespace: String,
    pub iface: String,
    pub meta: Option<Meta>,
}

/// The per-socket records of `n` sockets bound in no namespace and to no interface.
pub fn encode_records(n: usize) -> Vec<u8> {
    [0u8, 0, 0, 0, 0, 0].repeat(n)
}

fn clean(s: &str) -> String {
    s.replace(['\t', '\n', '\r'], " ")
}

pub fn encode_trailer(metas: &[Meta]) -> Vec<u8> {
    let mut out = format!("{TRAILER_MAGIC} {TRAILER_VERSION} {}\n", metas.len());
    for m in metas {
        out.push_str(&format!(
            "{}\t{}\t{}\t{}\t{}\n",
            m.worker,
            clean(&m.family),
            clean(&m.addr),
            clean(&m.frontend),
            clean(&m.bind)
        ));
    }
    out.into_bytes()
}

/// Whether the data after the records is complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trailer {
    /// No trailer (HAProxy as the old process): nothing more to wait for.
    Absent,
    /// A trailer whose end has not arrived yet.
    Incomplete,
    Complete,
}

const INCONSISTENT: &str = "Inconsistency while transferring sockets";

/// Parses the data of a transfer of `n` sockets. A trailer of another version is ignored (the
/// sockets are then matched by address only).
pub fn decode(data: &[u8], n: usize) -> Result<(Vec<Record>, Trailer), String> {
    let mut out = Vec::with_capacity(n);
    let mut off = 0usize;
    let field = |off: &mut usize| -> Result<String, String> {
        let len = *data.get(*off).ok_or(INCONSISTENT)? as usize;
        let bytes = data.get(*off + 1..*off + 1 + len).ok_or(INCONSISTENT)?;
        *off += 1 + len;
        Ok(String::from_utf8_lossy(bytes).into_owned())
    };
    for _ in 0..n {
        let namespace = field(&mut off)?;
        let iface = field(&mut off)?;
        if data.len() < off + 4 {
            return Err(INCONSISTENT.into());
        }
        off += 4;
        out.push(Record {
            namespace,
            iface,
            meta: None,
        });
    }
    let rest = data.get(off..).unwrap_or_default();
    if rest.is_empty() {
        return Ok((out, Trailer::Absent));
    }
    let Some(nl) = rest.iter().position(|&b| b == b'\n') else {
        return Ok((out, Trailer::Incomplete));
    };
    let header = String::from_utf8_lossy(&rest[..nl]);
    let mut words = header.split(' ');
    if words.next() != Some(TRAILER_MAGIC) {
        return Ok((out, Trailer::Absent));
    }
    let version = words.next().and_then(|v| v.parse::<u32>().ok());
    let count = words.next().and_then(|v| v.parse::<usize>().ok());
    if version != Some(TRAILER_VERSION) || count != Some(n) {
        return Ok((out, Trailer::Complete));
    }
    let body = &rest[nl + 1..];
    let lines: Vec<&[u8]> = body.split(|&b| b == b'\n').collect();
    // `split` yields the (possibly empty) tail after the last newline: n full lines need n+1.
    if lines.len() <= n {
        return Ok((out, Trailer::Incomplete));
    }
    for (rec, line) in out.iter_mut().zip(lines) {
        let line = String::from_utf8_lossy(line);
        let f: Vec<&str> = line.split('\t').collect();
        if let [worker, family, addr, frontend, bind] = f[..]
            && let Ok(worker) = worker.parse()
        {
            rec.meta = Some(Meta {
                worker,
                family: family.into(),
                addr: addr.into(),
                frontend: frontend.into(),
                bind: bind.into(),
            });
        }
    }
    Ok((out, Trailer::Complete))
}

/// A listening address, as bound and as `getsockname` tells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    Inet(SocketAddr),
    Unix(String),
}

/// A socket offered by the old process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Offer {
    pub key: Key,
    /// The old process' worker for it (portcullis only).
    pub worker: Option<u32>,
    pub frontend: Option<String>,
}

/// A bind line of the new configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Want {
    pub key: Key,
    pub frontend: String,
}

/// What one worker gets for one bind line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// The offered socket of that index.
    Adopt(usize),
    /// A duplicate of that offered socket (a unix socket has one listener for all workers).
    Dup(usize),
    /// None matched: bind a new one.
    Bind,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Assign {
    /// One slot per worker.
    pub slots: Vec<Slot>,
    /// Offered sockets beyond the worker count, as (worker, offer): accepted from as well, since
    /// closing them would reset the connections queued on them.
    pub extra: Vec<(usize, usize)>,
}

/// Matches the offered sockets to the bind lines: by address, preferring the same frontend and
/// keeping the old worker order. Returns one [`Assign`] per want and the offers nothing takes
/// (to be closed: their address is gone from the configuration).
pub fn assign(wants: &[Want], offers: &[Offer], workers: usize) -> (Vec<Assign>, Vec<usize>) {
    let workers = workers.max(1);
    let mut taken = vec![false; offers.len()];
    let mut found: Vec<Vec<usize>> = vec![Vec::new(); wants.len()];
    // First the offers naming the same frontend, then any left at the same address.
    for same_frontend in [true, false] {
        for (w, want) in wants.iter().enumerate() {
            if !same_frontend && !found[w].is_empty() {
                continue;
            }
            for (i, o) in offers.iter().enumerate() {
                if taken[i] || o.key != want.key {
                    continue;
                }
                if same_frontend && o.frontend.as_deref() != Some(want.frontend.as_str()) {
                    continue;
                }
                taken[i] = true;
                found[w].push(i);
            }
        }
    }
    let plans = wants
        .iter()
        .zip(found)
        .map(|(want, mut cands)| {
            cands.sort_by_key(|&i| (offers[i].worker.unwrap_or(u32::MAX), i));
            let unix = matches!(want.key, Key::Unix(_));
            let slots = (0..workers)
                .map(|w| match (cands.get(w), cands.first()) {
                    (Some(&i), _) => Slot::Adopt(i),
                    (None, Some(&first)) if unix => Slot::Dup(first),
                    _ => Slot::Bind,
                })
                .collect();
            let extra = cands
                .iter()
                .skip(workers)
                .enumerate()
                .map(|(k, &i)| (k % workers, i))
                .collect();
            Assign { slots, extra }
        })
        .collect();
    let unused = (0..offers.len()).filter(|&i| !taken[i]).collect();
    (plans, unused)
}

/// Listening sockets with what `_getsocks` tells about them.
pub type Exported = Vec<(OwnedFd, Meta)>;

/// The sockets this process may hand over, with their metadata.
#[derive(Default)]
pub struct Registry {
    socks: Mutex<Exported>,
    /// Set once a `_getsocks` sent them: stopping then closes them instead of shutting them down
    /// (a shutdown acts on the socket itself, so also on the new process' copy).
    pub exported: AtomicBool,
    /// Some admin socket has `expose-fd listeners`: the listeners must then be accepted from in
    /// a way that can stop without a shutdown.
    pub exportable: AtomicBool,
}

impl Registry {
    pub fn new(socks: Exported) -> Registry {
        Registry {
            socks: Mutex::new(socks),
            exported: AtomicBool::new(false),
            exportable: AtomicBool::new(false),
        }
    }

    /// Closes this process' references (at stop).
    pub fn close_all(&self) {
        self.socks.lock().unwrap_or_else(|p| p.into_inner()).clear();
    }

    /// Sends every socket over the connected unix socket `fd` (the `_getsocks` command).
    pub fn send(&self, fd: RawFd) -> Result<(), String> {
        let socks = self.socks.lock().unwrap_or_else(|p| p.into_inner());
        let fds: Vec<RawFd> = socks.iter().map(|(f, _)| f.as_raw_fd()).collect();
        let metas: Vec<Meta> = socks.iter().map(|(_, m)| m.clone()).collect();
        if fds.is_empty() {
            return Ok(());
        }
        // Set before the first descriptor leaves: the new process may signal us as soon as it
        // has them, before this thread is back from the transfer. A failed transfer keeps it set,
        // which costs nothing: every listener here is then closed rather than shut down, and no
        // accept of them is left pending in the kernel (see `Listener::from_socket_cancellable`).
        self.exported.store(true, Ordering::SeqCst);
        with_blocking(fd, || send_sockets(fd, &fds, &metas))
    }
}

/// Runs `f` with `fd` in blocking mode and I/O timeouts, as HAProxy does for the transfer.
fn with_blocking<T>(fd: RawFd, f: impl FnOnce() -> T) -> T {
    // SAFETY: fcntl on a descriptor the caller keeps open for the call.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags >= 0 {
        unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) };
    }
    let sock = std::mem::ManuallyDrop::new(unsafe { socket2::Socket::from_raw_fd(fd) });
    let _ = sock.set_read_timeout(Some(IO_TIMEOUT));
    let _ = sock.set_write_timeout(Some(IO_TIMEOUT));
    let out = f();
    if flags >= 0 {
        unsafe { libc::fcntl(fd, libc::F_SETFL, flags) };
    }
    out
}

fn send_sockets(fd: RawFd, fds: &[RawFd], metas: &[Meta]) -> Result<(), String> {
    use nix::sys::socket::{ControlMessage, MsgFlags, sendmsg};
    use std::io::IoSlice;
    let count = i32::try_from(fds.len()).map_err(|_| "too many sockets".to_string())?;
    write_all(fd, &count.to_ne_bytes())
        .map_err(|e| format!("Failed to send the number of sockets to send ({e})"))?;
    let batches: Vec<&[RawFd]> = fds.chunks(MAX_SEND_FD).collect();
    for (b, batch) in batches.iter().enumerate() {
        let mut data = encode_records(batch.len());
        if b + 1 == batches.len() {
            data.extend_from_slice(&encode_trailer(metas));
        }
        let cmsg = [ControlMessage::ScmRights(batch)];
        let mut sent = 0;
        while sent < data.len() {
            let iov = [IoSlice::new(&data[sent..])];
            // The descriptors go with the first bytes only.
            let cm: &[ControlMessage] = if sent == 0 { &cmsg } else { &[] };
            match sendmsg::<()>(fd, &iov, cm, MsgFlags::MSG_NOSIGNAL, None) {
                Ok(n) => sent += n,
                Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(format!("Failed to transfer sockets ({e})")),
            }
        }
        // Wait for the ack: after a full batch the receiver must have room for the next one,
        // and after the last, closing with its ack unread would reset the connection under it.
        let mut ack = [0u8; 4];
        if let Err(e) = read_exact(fd, &mut ack)
            && b + 1 < batches.len()
        {
            return Err(format!("Unexpected error while transferring sockets ({e})"));
        }
    }
    Ok(())
}

fn write_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: send from a live buffer on an open descriptor.
        let n = unsafe { libc::send(fd, buf.as_ptr().cast(), buf.len(), libc::MSG_NOSIGNAL) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = buf.get(n as usize..).unwrap_or_default();
    }
    Ok(())
}

fn read_exact(fd: RawFd, buf: &mut [u8]) -> io::Result<()> {
    let mut off = 0;
    while off < buf.len() {
        let rest = &mut buf[off..];
        // SAFETY: recv into a live buffer on an open descriptor.
        let n = unsafe { libc::recv(fd, rest.as_mut_ptr().cast(), rest.len(), 0) };
        match n {
            0 => return Err(io::ErrorKind::UnexpectedEof.into()),
            n if n < 0 => {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(e);
                }
            }
            n => off += n as usize,
        }
    }
    Ok(())
}

/// A socket received from the old process.
pub struct Received {
    pub fd: OwnedFd,
    pub record: Record,
}

/// Fetches every listening socket of the process serving the admin socket `path` (`-x`).
/// Errors are HAProxy's warnings.
pub fn fetch(path: &std::path::Path) -> Result<Vec<Received>, String> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::io::IoSliceMut;
    let connect_err = || {
        format!(
            "Failed to connect to the old process socket '{}'",
            path.display()
        )
    };
    let sock = std::os::unix::net::UnixStream::connect(path).map_err(|_| connect_err())?;
    sock.set_read_timeout(Some(IO_TIMEOUT))
        .map_err(|_| connect_err())?;
    sock.set_write_timeout(Some(IO_TIMEOUT))
        .map_err(|_| connect_err())?;
    let fd = sock.as_raw_fd();
    const COUNT_ERR: &str = "Failed to get the number of sockets to be transferred !";
    write_all(fd, b"_getsocks\n").map_err(|_| COUNT_ERR.to_string())?;
    let mut count = [0u8; 4];
    read_exact(fd, &mut count).map_err(|_| COUNT_ERR.to_string())?;
    let n = usize::try_from(i32::from_ne_bytes(count)).map_err(|_| COUNT_ERR.to_string())?;
    let mut fds: Vec<OwnedFd> = Vec::with_capacity(n);
    let mut data: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 64 * 1024];
    let mut cmsg = nix::cmsg_space!([RawFd; MAX_SEND_FD]);
    loop {
        if fds.len() >= n {
            match decode(&data, n)?.1 {
                Trailer::Incomplete => {}
                _ => break,
            }
        }
        let (len, got) = {
            let mut iov = [IoSliceMut::new(&mut buf)];
            let msg = match recvmsg::<()>(fd, &mut iov, Some(&mut cmsg), MsgFlags::MSG_CMSG_CLOEXEC)
            {
                Ok(m) => m,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => {
                    // The sockets are all here: a trailer cut short only loses metadata.
                    if fds.len() >= n {
                        break;
                    }
                    return Err(format!(
                        "We didn't get the expected number of sockets (expecting {n} got {}) ({e})",
                        fds.len()
                    ));
                }
            };
            let mut got = Vec::new();
            if let Ok(cmsgs) = msg.cmsgs() {
                for c in cmsgs {
                    if let ControlMessageOwned::ScmRights(v) = c {
                        got.extend(v);
                    }
                }
            }
            (msg.bytes, got)
        };
        // SAFETY: SCM_RIGHTS hands us new descriptors that nothing else owns.
        fds.extend(got.into_iter().map(|f| unsafe { OwnedFd::from_raw_fd(f) }));
        if fds.len() > n {
            return Err("Got to many sockets !".into());
        }
        if len == 0 {
            if fds.len() >= n {
                break;
            }
            return Err(format!(
                "We didn't get the expected number of sockets (expecting {n} got {})",
                fds.len()
            ));
        }
        data.extend_from_slice(buf.get(..len).unwrap_or_default());
        let ack = i32::try_from(fds.len()).unwrap_or(i32::MAX);
        let _ = write_all(fd, &ack.to_ne_bytes());
    }
    let (records, _) = decode(&data, n)?;
    Ok(fds
        .into_iter()
        .zip(records)
        .map(|(fd, record)| Received { fd, record })
        .collect())
}

/// The address a received socket listens on, if it is a listening stream socket we can use.
pub fn offer_key(fd: &OwnedFd) -> Option<Key> {
    let s = socket2::SockRef::from(fd);
    if s.r#type().ok()? != socket2::Type::STREAM {
        return None;
    }
    let mut val: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt into a correctly sized int.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&mut val as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if rc != 0 || val == 0 {
        return None;
    }
    let a = s.local_addr().ok()?;
    if let Some(sa) = a.as_socket() {
        return Some(Key::Inet(sa));
    }
    a.as_pathname()
        .map(|p| Key::Unix(p.to_string_lossy().into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(w: u32, fe: &str) -> Meta {
        Meta {
            worker: w,
            family: "ipv4".into(),
            addr: "127.0.0.1:80".into(),
            frontend: fe.into(),
            bind: "a.cfg:12".into(),
        }
    }

    #[test]
    fn records_are_haproxys() {
        // HAProxy 2.6 sent exactly this for two sockets (seen with socat).
        assert_eq!(encode_records(2), vec![0u8; 12]);
        let (r, t) = decode(&[0u8; 12], 2).unwrap();
        assert_eq!(t, Trailer::Absent);
        assert_eq!(r, vec![Record::default(), Record::default()]);
    }

    #[test]
    fn namespace_and_interface_fields() {
        let data = [2, b'n', b's', 3, b'e', b't', b'h', 0, 0, 0, 0];
        let (r, _) = decode(&data, 1).unwrap();
        assert_eq!(r[0].namespace, "ns");
        assert_eq!(r[0].iface, "eth");
        assert_eq!(
            decode(&data[..6], 1).unwrap_err(),
            "Inconsistency while transferring sockets"
        );
        assert!(decode(&[0, 0, 0], 1).is_err());
    }

    #[test]
    fn trailer_round_trip_and_partial() {
        let metas = vec![meta(0, "fe"), meta(1, "fe\tx")];
        let mut data = encode_records(2);
        let trailer = encode_trailer(&metas);
        assert_eq!(
            String::from_utf8_lossy(&trailer),
            "portcullis-getsocks 1 2\n0\tipv4\t127.0.0.1:80\tfe\ta.cfg:12\n1\tipv4\t127.0.0.1:80\tfe x\ta.cfg:12\n"
        );
        data.extend_from_slice(&trailer[..trailer.len() - 3]);
        assert_eq!(decode(&data, 2).unwrap().1, Trailer::Incomplete);
        data.extend_from_slice(&trailer[trailer.len() - 3..]);
        let (r, t) = decode(&data, 2).unwrap();
        assert_eq!(t, Trailer::Complete);
        assert_eq!(r[0].meta, Some(meta(0, "fe")));
        assert_eq!(
            r[1].meta.as_ref().map(|m| m.frontend.as_str()),
            Some("fe x")
        );
    }

    #[test]
    fn foreign_trailer_is_ignored() {
        let mut data = encode_records(1);
        data.extend_from_slice(b"something else\n");
        let (r, t) = decode(&data, 1).unwrap();
        assert_eq!((r[0].meta.clone(), t), (None, Trailer::Absent));
        let mut data = encode_records(1);
        data.extend_from_slice(b"portcullis-getsocks 2 1\nwhatever\n");
        assert_eq!(decode(&data, 1).unwrap().1, Trailer::Complete);
    }

    fn inet(port: u16) -> Key {
        Key::Inet(SocketAddr::from(([127, 0, 0, 1], port)))
    }

    fn offer(k: Key, w: Option<u32>, fe: Option<&str>) -> Offer {
        Offer {
            key: k,
            worker: w,
            frontend: fe.map(Into::into),
        }
    }

    fn want(k: Key, fe: &str) -> Want {
        Want {
            key: k,
            frontend: fe.into(),
        }
    }

    #[test]
    fn same_worker_count_adopts_in_worker_order() {
        let offers = vec![
            offer(inet(80), Some(1), Some("a")),
            offer(inet(80), Some(0), Some("a")),
            offer(inet(81), Some(0), Some("b")),
        ];
        let (plans, unused) = assign(&[want(inet(80), "a")], &offers, 2);
        assert_eq!(plans[0].slots, vec![Slot::Adopt(1), Slot::Adopt(0)]);
        assert!(plans[0].extra.is_empty());
        assert_eq!(unused, vec![2]);
    }

    #[test]
    fn fewer_workers_keep_the_extra_sockets() {
        let offers: Vec<Offer> = (0..4)
            .map(|w| offer(inet(80), Some(w), Some("a")))
            .collect();
        let (plans, unused) = assign(&[want(inet(80), "a")], &offers, 1);
        assert_eq!(plans[0].slots, vec![Slot::Adopt(0)]);
        assert_eq!(plans[0].extra, vec![(0, 1), (0, 2), (0, 3)]);
        assert!(unused.is_empty());
    }

    #[test]
    fn more_workers_bind_the_rest_and_unix_is_shared() {
        let u = Key::Unix("/run/x.sock".into());
        // HAProxy sends one socket per bind and no metadata.
        let offers = vec![offer(inet(80), None, None), offer(u.clone(), None, None)];
        let (plans, unused) = assign(&[want(inet(80), "a"), want(u, "a")], &offers, 3);
        assert_eq!(plans[0].slots, vec![Slot::Adopt(0), Slot::Bind, Slot::Bind]);
        assert_eq!(
            plans[1].slots,
            vec![Slot::Adopt(1), Slot::Dup(1), Slot::Dup(1)]
        );
        assert!(unused.is_empty());
    }

    #[test]
    fn same_address_prefers_same_frontend() {
        let offers = vec![
            offer(inet(80), Some(0), Some("b")),
            offer(inet(80), Some(0), Some("a")),
        ];
        let (plans, _) = assign(&[want(inet(80), "a"), want(inet(80), "b")], &offers, 1);
        assert_eq!(plans[0].slots, vec![Slot::Adopt(1)]);
        assert_eq!(plans[1].slots, vec![Slot::Adopt(0)]);
        // A renamed frontend still takes the sockets of its address.
        let (plans, _) = assign(&[want(inet(80), "renamed")], &offers, 2);
        assert_eq!(plans[0].slots, vec![Slot::Adopt(0), Slot::Adopt(1)]);
    }

    #[test]
    fn transfer_in_batches_with_acks() {
        // More than one batch: the sender waits for the ack between them and the trailer comes
        // with the last one.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let n = MAX_SEND_FD + 7;
        let socks: Exported = (0..n)
            .map(|w| {
                let fd = OwnedFd::from(l.try_clone().unwrap());
                (fd, meta(w as u32, "fe"))
            })
            .collect();
        let reg = Registry::new(socks);
        let dir = std::env::temp_dir().join(format!("pc-handover-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let path = dir.join("admin.sock");
        let _ = std::fs::remove_file(&path);
        let server = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let t = std::thread::spawn(move || {
            let (mut c, _) = server.accept().unwrap();
            let mut line = [0u8; 10];
            std::io::Read::read_exact(&mut c, &mut line).unwrap();
            assert_eq!(&line, b"_getsocks\n");
            reg.send(c.as_raw_fd()).unwrap();
            reg.exported.load(Ordering::SeqCst)
        });
        let got = fetch(&path).unwrap();
        assert!(t.join().unwrap());
        assert_eq!(got.len(), n);
        for (w, r) in got.iter().enumerate() {
            assert_eq!(r.record.meta.as_ref().map(|m| m.worker), Some(w as u32));
            assert_eq!(offer_key(&r.fd), Some(Key::Inet(addr)));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
