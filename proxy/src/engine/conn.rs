//! A connection: a plain engine stream or TLS over one, behind the same owned-buffer interface
//! so that the sessions do not care which.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use super::io::{SpliceFd, Stream};
use crate::tls::stream::{TlsInfo, TlsStream};

pub enum Conn {
    Plain(Stream),
    Tls(Box<TlsStream>),
}

impl Conn {
    /// Reads into the spare capacity of `buf`; Ok(0) is end of stream.
    pub async fn read(&self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        match self {
            Conn::Plain(s) => s.read(buf).await,
            Conn::Tls(t) => t.read(buf).await,
        }
    }

    /// [`Stream::read_idle`]: waits for bytes holding no buffer, then reads with `want` bytes
    /// of room. TLS reads as usual (rustls may already hold plaintext, and keeps its own
    /// buffers whatever this does), boxed: an idle plain connection's state is not sized for it.
    pub fn read_idle(&self, buf: Vec<u8>, want: usize) -> super::io::ReadIdle<'_> {
        match self {
            Conn::Plain(s) => s.read_idle(buf, want),
            Conn::Tls(t) => {
                super::io::ReadIdle::Boxed(Box::pin(t.read(super::io::reserve(buf, want))))
            }
        }
    }

    /// Whether a session idle on this connection can park (see [`Conn::idle_ticket`]).
    pub fn parks(&self) -> bool {
        matches!(self, Conn::Plain(s) if s.parks())
    }

    /// What parks a session idle on this connection, if it can park: a plain one (rustls may
    /// hold plaintext that no readiness announces).
    pub fn idle_ticket(&self) -> Option<super::readiness::Ticket> {
        match self {
            Conn::Plain(s) => s.idle_ticket(),
            Conn::Tls(_) => None,
        }
    }

    /// [`Stream::detach`] for a plain connection (false for TLS and unix sockets).
    pub fn detach(&mut self) -> bool {
        match self {
            Conn::Plain(s) => s.detach(),
            Conn::Tls(_) => false,
        }
    }

    /// [`Stream::reattach`]: back in tokio's reactor if it was detached.
    pub fn reattach(&mut self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.reattach(),
            Conn::Tls(_) => Ok(()),
        }
    }

    pub async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        match self {
            Conn::Plain(s) => s.write_all(buf).await,
            Conn::Tls(t) => t.write_all(buf).await,
        }
    }

    /// `write_all` then `shutdown_write`: on TLS the data and close_notify leave in one send.
    pub async fn write_all_close(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        match self {
            Conn::Tls(t) => t.write_all_close(buf).await,
            _ => {
                let (r, buf) = self.write_all(buf).await;
                if r.is_err() {
                    return (r, buf);
                }
                (self.shutdown_write().await, buf)
            }
        }
    }

    /// No more data from us: FIN (after close_notify on TLS).
    pub async fn shutdown_write(&self) -> io::Result<()> {
        match self {
            Conn::Plain(s) => s.shutdown_write(),
            Conn::Tls(t) => t.shutdown_write().await,
        }
    }

    pub fn abort(&self, rst: bool) {
        self.socket().abort(rst)
    }

    /// The socket under the connection.
    pub fn socket(&self) -> &Stream {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(t) => t.socket(),
        }
    }

    pub fn raw_fd(&self) -> RawFd {
        self.socket().raw_fd()
    }

    /// Whether an idle server connection can carry a new request: nothing arrived on it since
    /// its last response — neither the server's close (a FIN or RST it sent while idle) nor
    /// stray bytes. One non-blocking peek; no read is ever in flight on an idle connection.
    pub fn idle_usable(&self) -> bool {
        let fd = self.raw_fd();
        let mut b = [0u8; 1];
        // SAFETY: recv into a one-byte buffer we own.
        let n = unsafe {
            libc::recv(
                fd,
                b.as_mut_ptr().cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        n < 0 && io::Error::last_os_error().kind() == io::ErrorKind::WouldBlock
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.socket().local_addr()
    }

    /// The handshake's facts, shared (sessions and h2 streams keep a reference, no copy).
    pub fn tls(&self) -> Option<&std::sync::Arc<TlsInfo>> {
        match self {
            Conn::Plain(_) => None,
            Conn::Tls(t) => Some(t.info()),
        }
    }
}

/// What a relay needs of either side of a session (futures stay on the worker thread).
#[allow(async_fn_in_trait)]
pub trait Duplex {
    async fn read(&self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>);
    async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>);
    async fn shutdown_write(&self) -> io::Result<()>;
    fn abort(&self, rst: bool);
    /// The socket for the relay's splice(2) path; None keeps the copy path (TLS, unix, h2).
    fn splice_fd(&self) -> Option<SpliceFd<'_>> {
        None
    }
    /// `%B` bytes the HTTP/1 form of the last response read holds that HAProxy's HTX form of
    /// it does not (an HTTP/2 response bridged to HTTP/1: its `transfer-encoding`).
    fn htx_surplus(&self) -> u64 {
        0
    }
}

impl Duplex for Stream {
    async fn read(&self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        Stream::read(self, buf).await
    }
    async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        Stream::write_all(self, buf).await
    }
    async fn shutdown_write(&self) -> io::Result<()> {
        Stream::shutdown_write(self)
    }
    fn abort(&self, rst: bool) {
        Stream::abort(self, rst)
    }
    fn splice_fd(&self) -> Option<SpliceFd<'_>> {
        Stream::splice_fd(self)
    }
}

impl Duplex for Conn {
    async fn read(&self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        Conn::read(self, buf).await
    }
    async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        Conn::write_all(self, buf).await
    }
    async fn shutdown_write(&self) -> io::Result<()> {
        Conn::shutdown_write(self).await
    }
    fn abort(&self, rst: bool) {
        Conn::abort(self, rst)
    }
    fn splice_fd(&self) -> Option<SpliceFd<'_>> {
        match self {
            Conn::Plain(s) => s.splice_fd(),
            _ => None,
        }
    }
}

impl<T: Duplex> Duplex for std::rc::Rc<T> {
    async fn read(&self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        (**self).read(buf).await
    }
    async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        (**self).write_all(buf).await
    }
    async fn shutdown_write(&self) -> io::Result<()> {
        (**self).shutdown_write().await
    }
    fn abort(&self, rst: bool) {
        (**self).abort(rst)
    }
    fn splice_fd(&self) -> Option<SpliceFd<'_>> {
        (**self).splice_fd()
    }
    fn htx_surplus(&self) -> u64 {
        (**self).htx_surplus()
    }
}
