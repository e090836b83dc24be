//! A transaction's connection to a server: HTTP/1 bytes on a connection of its own, or one
//! stream of a (possibly shared) HTTP/2 connection bridged to the same byte interface.

use std::io;
use std::rc::Rc;

use super::h2::Link;
use super::h2stream::H2Stream;
use crate::engine::conn::{Conn, Duplex};
use crate::engine::io::SpliceFd;

pub enum SrvConn {
    H1(Conn),
    H2(H2Stream),
}

impl SrvConn {
    /// A new stream on `link`.
    pub fn h2(link: Rc<Link>) -> Rc<SrvConn> {
        Rc::new(SrvConn::H2(H2Stream::new(link)))
    }

    /// Whether an idle connection can carry a new request (for h2: a new stream).
    pub fn idle_usable(&self) -> bool {
        match self {
            SrvConn::H1(c) => c.idle_usable(),
            SrvConn::H2(s) => s.link().usable(),
        }
    }

    /// The HTTP/2 connection under a stream.
    pub fn link(&self) -> Option<&Rc<Link>> {
        match self {
            SrvConn::H1(_) => None,
            SrvConn::H2(s) => Some(s.link()),
        }
    }
}

impl Duplex for SrvConn {
    async fn read(&self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        match self {
            SrvConn::H1(c) => c.read(buf).await,
            SrvConn::H2(s) => s.read(buf).await,
        }
    }
    async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        match self {
            SrvConn::H1(c) => c.write_all(buf).await,
            SrvConn::H2(s) => s.write_all(buf).await,
        }
    }
    async fn shutdown_write(&self) -> io::Result<()> {
        match self {
            SrvConn::H1(c) => c.shutdown_write().await,
            SrvConn::H2(s) => s.shutdown_write().await,
        }
    }
    fn abort(&self, rst: bool) {
        match self {
            SrvConn::H1(c) => c.abort(rst),
            SrvConn::H2(s) => s.abort(rst),
        }
    }
    fn splice_fd(&self) -> Option<SpliceFd<'_>> {
        match self {
            SrvConn::H1(c) => Duplex::splice_fd(c),
            SrvConn::H2(_) => None,
        }
    }
    fn htx_surplus(&self) -> u64 {
        match self {
            SrvConn::H1(_) => 0,
            SrvConn::H2(s) => s.htx_surplus(),
        }
    }
}
