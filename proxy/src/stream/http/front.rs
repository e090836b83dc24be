//! The client side of an HTTP stream, as the L7 transaction sees it: a byte stream it reads
//! requests from and writes responses to ([`Duplex`]), plus the facts it logs and routes on.
//! One implementation is an HTTP/1 connection ([`Conn`]); an HTTP/2 stream is the other
//! ([`super::h2`]).

use std::io;
use std::sync::Arc;

use crate::engine::conn::{Conn, Duplex};
use crate::http::head::RequestHead;
use crate::tls::stream::TlsInfo;

/// What the L7 transaction needs from the client side. `Duplex` carries the bytes (an upgrade
/// hands the same front to the relay); the rest are the front's own facts.
#[allow(async_fn_in_trait)]
pub trait Front: Duplex {
    /// `write_all` then `shutdown_write` (one send on TLS).
    async fn write_all_close(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>);

    /// The handshake's facts, shared (the stream keeps a reference, no copy). None: plain.
    fn tls(&self) -> Option<&Arc<TlsInfo>>;

    /// Not its connection's first request although it is the stream's first (an h2 stream after
    /// the first): it may use an idle server connection under `http-reuse safe`.
    fn later_stream(&self) -> bool {
        false
    }

    /// A request head the front already holds, built without text (taken once; the transaction
    /// then skips the HTTP/1 parser).
    fn take_head(&self) -> Option<RequestHead> {
        None
    }

    /// The request line HAProxy logs when it is not the HTTP/1 one (h2: `GET https://… HTTP/2.0`).
    fn log_line(&self) -> Option<&str> {
        None
    }
}

/// HTTP/1: the connection itself, parsed by the transaction's h1 codec.
impl Front for Conn {
    async fn write_all_close(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        Conn::write_all_close(self, buf).await
    }

    fn tls(&self) -> Option<&Arc<TlsInfo>> {
        Conn::tls(self)
    }
}
