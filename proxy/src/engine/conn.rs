//! A client connection: a plain engine stream or TLS over one, behind the same owned-buffer
//! interface so that the HTTP session does not care which.

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use super::io::{SpliceFd, Stream};
use crate::http::h2::H2Pipe;
use crate::tls::stream::{TlsInfo, TlsStream};

pub enum Conn {
    Plain(Stream),
    Tls(Box<TlsStream>),
    /// One HTTP/2 stream, seen as an HTTP/1.1 connection (see `http::h2`).
    H2(Box<H2Pipe>),
}

impl Conn {
    /// Reads into the spare capacity of `buf`; Ok(0) is end of stream.
    pub async fn read(&self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        match self {
            Conn::Plain(s) => s.read(buf).await,
            Conn::Tls(t) => t.read(buf).await,
            Conn::H2(p) => p.read(buf).await,
        }
    }

    pub async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        match self {
            Conn::Plain(s) => s.write_all(buf).await,
            Conn::Tls(t) => t.write_all(buf).await,
            Conn::H2(p) => p.write_all(buf).await,
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
            Conn::H2(p) => p.shutdown_write().await,
        }
    }

    pub fn abort(&self, rst: bool) {
        match self {
            Conn::H2(p) => p.abort(),
            _ => {
                if let Some(s) = self.socket() {
                    s.abort(rst)
                }
            }
        }
    }

    /// The socket under the connection (none for an h2 stream).
    pub fn socket(&self) -> Option<&Stream> {
        match self {
            Conn::Plain(s) => Some(s),
            Conn::Tls(t) => Some(t.socket()),
            Conn::H2(_) => None,
        }
    }

    pub fn raw_fd(&self) -> Option<RawFd> {
        self.socket().map(Stream::raw_fd)
    }

    /// Whether an idle server connection can carry a new request: nothing arrived on it since
    /// its last response — neither the server's close (a FIN or RST it sent while idle) nor
    /// stray bytes. One non-blocking peek; no read is ever in flight on an idle connection.
    pub fn idle_usable(&self) -> bool {
        let Some(fd) = self.raw_fd() else {
            return true;
        };
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
        match self {
            Conn::H2(p) => p.local_addr(),
            _ => self.socket().and_then(Stream::local_addr),
        }
    }

    /// The handshake's facts, shared (sessions and h2 streams keep a reference, no copy).
    pub fn tls(&self) -> Option<&std::sync::Arc<TlsInfo>> {
        match self {
            Conn::Plain(_) => None,
            Conn::Tls(t) => Some(t.info()),
            Conn::H2(p) => p.tls(),
        }
    }

    /// An h2 stream that is not its connection's first.
    pub fn h2_later_stream(&self) -> bool {
        matches!(self, Conn::H2(p) if !p.first_stream())
    }

    /// For an h2 stream, its request head when the h2 layer could build it without text (taken
    /// once; the session then skips the HTTP/1 parser).
    pub fn take_h2_head(&self) -> Option<crate::http::head::RequestHead> {
        match self {
            Conn::H2(p) => p.take_parsed_head(),
            _ => None,
        }
    }

    /// For an h2 stream, the request line HAProxy logs (`GET https://host/ HTTP/2.0`).
    pub fn h2_log_line(&self) -> Option<&str> {
        match self {
            Conn::H2(p) => Some(p.log_line()),
            _ => None,
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
}
