//! The client side of an HTTP stream, as the L7 transaction sees it: where the request comes
//! from and where the response goes, structured — a response head and its body's parts, a page
//! the proxy made — plus the facts it logs and routes on. One implementation is an HTTP/1
//! connection ([`Conn`]), which serialises what it is given; an HTTP/2 stream is the other
//! ([`super::h2front::H2Front`]), which sends it as frames. The byte interface ([`Duplex`]) carries the
//! request's bytes (HTTP/1: as received; HTTP/2: the body's payload) and a tunnel's.

use std::io;
use std::ops::Range;
use std::sync::Arc;

use crate::engine::conn::{Conn, Duplex};
use crate::http::errors::Page;
use crate::http::h1;
use crate::http::head::{Headers, RequestHead, ResponseHead};
use crate::tls::stream::TlsInfo;

/// One piece of a forwarded response.
pub struct Part<'a> {
    /// The response head, with the first piece only (the HTTP/1 `connection` header included;
    /// an HTTP/2 front drops the connection-specific fields).
    pub head: Option<&'a ResponseHead>,
    /// Body bytes as the server framed them (forwarded verbatim to an HTTP/1 client).
    pub wire: Vec<u8>,
    /// Where the payload lies in `wire` (the body decoder's ranges: no chunk framing).
    pub payload: &'a [Range<usize>],
    /// The trailer fields, with the last piece of a chunked body (kept for HTTP/2 only).
    pub trailers: Option<Headers>,
    /// The response ends with this piece.
    pub end: bool,
    /// The connection closes after this piece (HTTP/1: sent with the close, one send on TLS).
    pub close: bool,
}

/// What the L7 transaction needs from the client side.
#[allow(async_fn_in_trait)]
pub trait Front: Duplex {
    /// The handshake's facts, shared (the stream keeps a reference, no copy). None: plain.
    fn tls(&self) -> Option<&Arc<TlsInfo>>;

    /// Not its connection's first request although it is the stream's first (an h2 stream after
    /// the first): it may use an idle server connection under `http-reuse safe`.
    fn later_stream(&self) -> bool {
        false
    }

    /// A request head the front already holds, built without text (taken once; the transaction
    /// then skips the HTTP/1 parser), or the status refusing it.
    fn take_head(&self) -> Option<Result<RequestHead, u16>> {
        None
    }

    /// The request line HAProxy logs when it is not the HTTP/1 one (h2: `GET https://… HTTP/2.0`).
    fn log_line(&self) -> Option<&str> {
        None
    }

    /// Reads give the request body's payload (HTTP/2 DATA), not HTTP/1 framing; the response
    /// body's payload ranges and trailers are what it sends.
    fn payload(&self) -> bool {
        false
    }

    /// The request's trailer fields, once a payload body has been read to its end (HTTP/2: the
    /// trailing HEADERS frame; sent on in the last chunk).
    fn take_trailers(&self) -> Option<Headers> {
        None
    }

    /// A read between keep-alive requests: the front may wait for the client's bytes before it
    /// gives them room (`want` bytes when `buf` has none).
    async fn read_idle(&self, buf: Vec<u8>, want: usize) -> (io::Result<usize>, Vec<u8>) {
        self.read(crate::engine::io::reserve(buf, want)).await
    }

    /// A response the proxy made, whole.
    async fn send_page(&self, page: &Page) -> io::Result<()>;

    /// An interim (1xx) response from the server; `wire`: as it was received.
    async fn send_interim(&self, head: &ResponseHead, wire: Vec<u8>) -> io::Result<()>;

    /// A piece of a forwarded response; gives `part.wire` back.
    async fn send_part(&self, part: Part<'_>) -> (io::Result<()>, Vec<u8>);
}

/// HTTP/1: the connection itself, parsed by the transaction's h1 codec.
impl Front for Conn {
    fn tls(&self) -> Option<&Arc<TlsInfo>> {
        Conn::tls(self)
    }

    // Conn's own future, not one wrapping it: it is an idle connection's state.
    fn read_idle(
        &self,
        buf: Vec<u8>,
        want: usize,
    ) -> impl std::future::Future<Output = (io::Result<usize>, Vec<u8>)> {
        Conn::read_idle(self, buf, want)
    }

    async fn send_page(&self, page: &Page) -> io::Result<()> {
        self.write_all(page.wire()).await.0
    }

    async fn send_interim(&self, _head: &ResponseHead, wire: Vec<u8>) -> io::Result<()> {
        self.write_all(wire).await.0
    }

    async fn send_part(&self, part: Part<'_>) -> (io::Result<()>, Vec<u8>) {
        // The head goes out with the body bytes already read, in one write as HAProxy does.
        let (buf, body) = match part.head {
            Some(h) => {
                let mut out = Vec::with_capacity(1024 + part.wire.len());
                h1::write_response_head(h, &mut out);
                out.extend_from_slice(&part.wire);
                (out, Some(part.wire))
            }
            None => (part.wire, None),
        };
        let (r, back) = if part.close {
            Conn::write_all_close(self, buf).await
        } else {
            self.write_all(buf).await
        };
        (r, body.unwrap_or(back))
    }
}
