//! One HTTP/2 stream as the L7 transaction's client side, with no HTTP/1 text either way: the
//! request head is built from the stream's fields (as the HTTP/1 parser would build it, checked
//! by the same rules), its body read as DATA payload; the response head goes out as HEADERS, the
//! body's payload (the server's HTTP/1 framing found by the transaction's body decoder) as DATA,
//! chunked trailers as a trailing HEADERS frame. Reads and writes go through the connection's
//! core ([`H2Io`]); a stream waits on its own signal for data, its end, or window.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::sync::Arc;

use tokio::sync::Notify;

use super::front::{Front, Part};
use super::h2::{H2Io, OUT_HIGH};
use crate::http::errors::Page;
use crate::http::field::FieldValue;
use crate::http::h1::{self, BodyDecoder, BodyFraming, H1Error, Limits, Payload};
use crate::http::h2::frame::code;
use crate::http::h2::request::RequestFields;
use crate::http::h2::server::{Body, Gone};
use crate::http::head::{Header, Headers, RequestHead, ResponseHead, Version};
use crate::tls::stream::TlsInfo;

/// Where the response stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Resp {
    /// No final head sent yet (interim ones may have been).
    Head,
    Body,
    Done,
}

/// One stream as the transaction's [`Front`].
pub struct H2Front {
    io: Rc<H2Io>,
    id: u32,
    /// Signalled when the stream's state changed.
    notify: Rc<Notify>,
    /// The request head for the transaction (taken once), or the status refusing it.
    head: RefCell<Option<Result<RequestHead, u16>>>,
    /// The request's trailers, once its body was read to the end.
    trailers: RefCell<Option<Headers>>,
    resp: Cell<Resp>,
    tls: Option<Arc<TlsInfo>>,
    /// `timeout client`: how long a response may wait for the client's window or for the
    /// connection's output to drain (HAProxy's connection timeout while it cannot send).
    send_timeout: Option<std::time::Duration>,
    /// The request's pseudo-header fields, for the log line.
    pseudo: RequestFields,
    /// HAProxy's request line for the log (`GET https://host/path HTTP/2.0`), built when a log
    /// line asks for it.
    log_line: std::cell::OnceCell<String>,
    first: bool,
}

fn gone(g: Gone) -> io::Error {
    match g {
        Gone::Reset(c) => io::Error::new(
            io::ErrorKind::ConnectionReset,
            format!("stream reset ({c})"),
        ),
        Gone::Closed => io::ErrorKind::BrokenPipe.into(),
    }
}

impl H2Front {
    /// The front of a stream just accepted (`first`: its connection's first).
    pub(super) fn new(
        io: Rc<H2Io>,
        id: u32,
        notify: Rc<Notify>,
        mut req: RequestFields,
        (tls, send_timeout): (Option<Arc<TlsInfo>>, Option<std::time::Duration>),
        first: bool,
    ) -> H2Front {
        // Only the pseudo-header fields stay in `req` (the others are moved into the head).
        let head = build_head(&mut req);
        H2Front {
            head: RefCell::new(Some(head)),
            pseudo: req,
            log_line: std::cell::OnceCell::new(),
            io,
            id,
            notify,
            trailers: RefCell::new(None),
            resp: Cell::new(Resp::Head),
            tls,
            send_timeout,
            first,
        }
    }

    /// Waits until `f` gives a value; `f` runs again each time the stream is signalled.
    async fn wait<T>(&self, mut f: impl FnMut(&Self) -> Option<T>) -> T {
        loop {
            let signal = self.notify.notified();
            tokio::pin!(signal);
            signal.as_mut().enable();
            if let Some(v) = f(self) {
                return v;
            }
            signal.await;
        }
    }

    /// Waits while the connection holds too much unsent output.
    async fn room(&self) {
        loop {
            let drained = self.io.drained.notified();
            tokio::pin!(drained);
            drained.as_mut().enable();
            if self.io.core.borrow().output_len() < OUT_HIGH {
                return;
            }
            drained.await;
        }
    }

    /// Sends a final head (`end`: no body follows).
    fn start(&self, head: &ResponseHead, end: bool) -> io::Result<()> {
        if self.resp.get() != Resp::Head {
            self.resp.set(Resp::Done);
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let r = self.send_head(head, end);
        self.resp.set(if r.is_ok() && !end {
            Resp::Body
        } else {
            Resp::Done
        });
        r
    }

    fn send_head(&self, head: &ResponseHead, end: bool) -> io::Result<()> {
        // A 101 (an upgrade the server accepted) becomes the 200 that opens an h2 tunnel.
        let status = if head.status == 101 { 200 } else { head.status };
        let r = self
            .io
            .core
            .borrow_mut()
            .send_head(self.id, status, h2_fields(&head.headers), end);
        self.io.flush.notify_one();
        r.map_err(gone)
    }

    /// Sends `data` as flow control allows (`end`: the response ends with it); a client that
    /// opens no window (or reads nothing) for `timeout client` ends it.
    async fn send_data(&self, mut data: &[u8], end: bool) -> io::Result<()> {
        loop {
            let step = async {
                self.room().await;
                self.wait(
                    |s| match s.io.core.borrow_mut().send_data(s.id, data, end) {
                        Ok(0) if !data.is_empty() => None,
                        r => Some(r),
                    },
                )
                .await
            };
            let sent = match self.send_timeout {
                Some(d) => tokio::time::timeout(d, step)
                    .await
                    .map_err(|_| io::Error::from(io::ErrorKind::TimedOut))?,
                None => step.await,
            };
            let n = sent.map_err(gone)?;
            self.io.flush.notify_one();
            data = &data[n..];
            if data.is_empty() {
                return Ok(());
            }
        }
    }

    /// Sends `part`'s payload, then its trailers or the end.
    async fn body(&self, part: &Part<'_>) -> io::Result<()> {
        let trailers = part.trailers.as_ref().filter(|t| !t.0.is_empty());
        let ends_in_data = part.end && trailers.is_none();
        let n = part.payload.len();
        for (i, r) in part.payload.iter().enumerate() {
            let data = part.wire.get(r.clone()).unwrap_or_default();
            self.send_data(data, ends_in_data && i + 1 == n).await?;
        }
        if !part.end {
            return Ok(());
        }
        match trailers {
            Some(t) => {
                let r = self
                    .io
                    .core
                    .borrow_mut()
                    .send_trailers(self.id, h2_fields(t));
                self.io.flush.notify_one();
                r.map_err(gone)
            }
            None if n == 0 => self.send_data(&[], true).await,
            None => Ok(()),
        }
    }

    /// Ends the stream at once (RST_STREAM).
    fn reset(&self, code: u32) {
        self.resp.set(Resp::Done);
        self.io.core.borrow_mut().reset(self.id, code);
        self.io.flush.notify_one();
    }
}

impl Drop for H2Front {
    fn drop(&mut self) {
        self.io.release(self.id);
    }
}

impl crate::engine::conn::Duplex for H2Front {
    /// The request body's payload (a tunnel's bytes from the client); Ok(0) once it ended.
    async fn read(&self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        let next = self
            .wait(|s| match s.io.core.borrow_mut().recv_body(s.id) {
                Body::Pending => None,
                b => Some(b),
            })
            .await;
        match next {
            Body::Data(d) => {
                // The piece was acknowledged (WINDOW_UPDATE) as it was taken.
                self.io.flush.notify_one();
                buf.extend_from_slice(&d);
                (Ok(d.len()), buf)
            }
            Body::End => {
                // A trailing HEADERS frame, if any, is kept for the transaction (the last
                // chunk towards the server).
                let t = self.io.core.borrow_mut().take_trailers(self.id);
                if let Some(t) = t {
                    *self.trailers.borrow_mut() = Some(Headers(t));
                }
                (Ok(0), buf)
            }
            Body::Reset(c) => (Err(gone(Gone::Reset(c))), buf),
            Body::Pending => (Err(io::ErrorKind::WouldBlock.into()), buf),
        }
    }

    /// A tunnel's bytes to the client, as DATA.
    async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        if self.resp.get() != Resp::Body {
            return (Err(io::ErrorKind::BrokenPipe.into()), buf);
        }
        let r = self.send_data(&buf, false).await;
        if r.is_err() {
            self.reset(code::CANCEL);
        }
        (r, buf)
    }

    /// The transaction is done sending: ends a body left open (until-close, tunnel); a stream
    /// with no response head is reset.
    async fn shutdown_write(&self) -> io::Result<()> {
        match self.resp.replace(Resp::Done) {
            Resp::Body => {
                let _ = self.io.core.borrow_mut().send_data(self.id, &[], true);
                self.io.flush.notify_one();
            }
            Resp::Head => self.reset(code::CANCEL),
            Resp::Done => {}
        }
        Ok(())
    }

    fn abort(&self, _rst: bool) {
        self.reset(code::CANCEL);
    }
}

impl Front for H2Front {
    fn tls(&self) -> Option<&Arc<TlsInfo>> {
        self.tls.as_ref()
    }

    fn later_stream(&self) -> bool {
        !self.first
    }

    fn take_head(&self) -> Option<Result<RequestHead, u16>> {
        self.head.borrow_mut().take()
    }

    fn log_line(&self) -> Option<&str> {
        Some(self.log_line.get_or_init(|| log_line(&self.pseudo)))
    }

    fn take_trailers(&self) -> Option<Headers> {
        self.trailers.borrow_mut().take()
    }

    fn payload(&self) -> bool {
        true
    }

    async fn send_page(&self, page: &Page) -> io::Result<()> {
        let mut payload = Payload::new();
        if page.chunked() {
            BodyDecoder::new(BodyFraming::Chunked)
                .advance_payload(&page.body, &mut payload)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.reason()))?;
        } else if !page.body.is_empty() {
            payload.push(0..page.body.len());
        }
        let end = payload.is_empty();
        self.start(&page.head, end)?;
        let n = payload.len();
        for (i, r) in payload.iter().enumerate() {
            let data = page.body.get(r.clone()).unwrap_or_default();
            if let Err(e) = self.send_data(data, i + 1 == n).await {
                self.reset(code::CANCEL);
                return Err(e);
            }
        }
        self.resp.set(Resp::Done);
        Ok(())
    }

    async fn send_interim(&self, head: &ResponseHead, _wire: Vec<u8>) -> io::Result<()> {
        // An interim response is advice: one the client cannot be given is dropped.
        if self.resp.get() == Resp::Head && head.status != 101 {
            let _ = self.send_head(head, false);
        }
        Ok(())
    }

    async fn send_part(&self, part: Part<'_>) -> (io::Result<()>, Vec<u8>) {
        match part.head {
            Some(h) => {
                let bodyless = part.payload.is_empty() && part.trailers.is_none();
                let end = part.end && bodyless;
                if let Err(e) = self.start(h, end) {
                    return (Err(e), part.wire);
                }
                if end {
                    return (Ok(()), part.wire);
                }
            }
            None if self.resp.get() != Resp::Body => {
                return (Err(io::ErrorKind::BrokenPipe.into()), part.wire);
            }
            None => {}
        }
        let r = self.body(&part).await;
        if r.is_err() || part.end {
            self.resp.set(Resp::Done);
        }
        (r, part.wire)
    }
}

/// Fields of an HTTP/1 message that have no place in h2 (RFC 9113 §8.2.2), `te` included;
/// by length first (this runs for every field of every response).
fn connection_specific(name: &str) -> bool {
    let is = |n: &str| name.eq_ignore_ascii_case(n);
    match name.len() {
        2 => is("te"),
        7 => is("upgrade"),
        10 => is("connection") || is("keep-alive"),
        16 => is("proxy-connection"),
        17 => is("transfer-encoding"),
        _ => false,
    }
}

/// The h2 form of a head's fields: no connection-specific field; names in their HTTP/1 case
/// (the HPACK encoder writes them lowercase).
fn h2_fields(headers: &Headers) -> impl Iterator<Item = (&str, &[u8])> {
    headers
        .0
        .iter()
        .filter(|h| !connection_specific(&h.name))
        .map(|h| (h.name.as_str(), h.value.as_slice()))
}

/// A scheme as RFC 3986 §3.1 spells one.
fn valid_scheme(s: &[u8]) -> bool {
    s.first().is_some_and(u8::is_ascii_alphabetic)
        && s.iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'))
}

/// The request head as `h1::parse_request_head` would make it from the HTTP/1.1 form of the
/// stream (origin-form, `host` from `:authority`, lowercase names, split cookies joined), checked
/// by the same head-level rules and limits; Err: the status refusing it (400 for a method or
/// scheme HTTP/1 could not carry, as HAProxy 2.6 answers them). The fields are moved out of
/// `req` (no copy: each is already the head's field type); its pseudo-header fields stay.
///
/// An extended CONNECT (RFC 8441, `:protocol`) becomes, as in HAProxy 2.6, a bodyless `GET` of
/// its `:path` with `upgrade: <protocol>` and `connection: upgrade`; for a WebSocket, a
/// generated `sec-websocket-key` last, which the server's 101 must answer (HAProxy's H1 mux;
/// it spells the name `Sec-Websocket-Key`, which only differs in case).
fn build_head(req: &mut RequestFields) -> Result<RequestHead, u16> {
    let limits = Limits::default();
    let protocol = req.protocol.as_deref().map(text);
    let (method, end) = match protocol {
        Some(_) => (Cow::Borrowed("GET"), true),
        None => (text(&req.method), req.end_stream),
    };
    let authority = req.authority.as_deref().map(text);
    let connect = req.method == b"CONNECT" && protocol.is_none();
    let target = if connect {
        authority.clone().unwrap_or_default()
    } else {
        req.path.as_deref().map_or(Cow::Borrowed("/"), text)
    };
    let bad_target = target.is_empty()
        || !target
            .bytes()
            .all(|b| matches!(b, b'!'..=b'~') && b != b'#');
    let bad_scheme = req.scheme.as_deref().is_some_and(|s| !valid_scheme(s));
    if bad_target || bad_scheme || !method.bytes().all(h1::is_tchar) {
        return Err(H1Error::BadTarget.status());
    }
    let line = method.len() + target.len() + 12;
    if line > limits.max_head {
        return Err(H1Error::UriTooLong.status());
    }
    let mut fields = Vec::with_capacity(req.fields.len() + 2);
    if let Some(p) = &protocol {
        // HAProxy 2.6's order: these two right after the request line, the key last.
        fields.push(Header::new("upgrade", p.as_ref()));
        fields.push(Header::new("connection", "upgrade"));
    }
    let own = fields.len();
    h1_fields(
        std::mem::take(&mut req.fields),
        authority.as_deref(),
        end,
        &mut fields,
    );
    // The checks and the size are the stream's own fields' (the upgrade ones are ours).
    let (mut size, mut bad) = (line, false);
    for h in &mut fields[own..] {
        // The parser trims OWS and refuses control bytes.
        let value = h1::trim_ows(&h.value);
        bad |= !value.iter().all(|&b| h1::is_field_byte(b));
        if value.len() != h.value.len() {
            h.value = FieldValue::copy_from(value);
        }
        size += h.name.len() + h.value.len() + 4;
    }
    if let Some(p) = &protocol
        && p.eq_ignore_ascii_case("websocket")
    {
        fields.push(Header::new("sec-websocket-key", websocket_key()?));
    }
    if bad {
        return Err(H1Error::BadHeaderValue.status());
    }
    if size + 2 > limits.max_head || fields.len() > limits.max_headers {
        return Err(H1Error::HeadTooLarge.status());
    }
    let mut head = RequestHead {
        method: method.into_owned(),
        target: target.into_owned(),
        version: Version::Http11,
        headers: Headers(fields),
    };
    h1::check_request(&mut head).map_err(|e| e.status())?;
    Ok(head)
}

/// A random WebSocket handshake key (16 bytes, base64), as HAProxy's H1 mux makes one for a
/// request without; Err (500) when no randomness is available.
fn websocket_key() -> Result<String, u16> {
    use base64::Engine;
    use ring::rand::SecureRandom;
    let mut key = [0u8; 16];
    ring::rand::SystemRandom::new()
        .fill(&mut key)
        .map_err(|_| 500u16)?;
    Ok(base64::engine::general_purpose::STANDARD.encode(key))
}

/// Bytes as text: borrowed when they are UTF-8 (the usual case, checked at `from_utf8`'s speed),
/// lossily converted otherwise (as the HTTP/1 text form of them would read).
fn text(b: &[u8]) -> Cow<'_, str> {
    match std::str::from_utf8(b) {
        Ok(s) => Cow::Borrowed(s),
        Err(_) => String::from_utf8_lossy(b),
    }
}

/// The request line HAProxy logs for a stream (`GET https://host/path HTTP/2.0`); an extended
/// CONNECT is logged as the GET it stands for.
fn log_line(req: &RequestFields) -> String {
    let method = match req.protocol {
        Some(_) => Cow::Borrowed("GET"),
        None => text(&req.method),
    };
    let path = req.path.as_deref().map_or(Cow::Borrowed("/"), text);
    let authority = req.authority.as_deref().map(text);
    if method == "CONNECT" {
        return format!("CONNECT {} HTTP/2.0", authority.unwrap_or_default());
    }
    match (req.scheme.as_deref().map(text), authority) {
        (Some(s), Some(a)) => format!("{method} {s}://{a}{path} HTTP/2.0"),
        _ => format!("{method} {path} HTTP/2.0"),
    }
}

/// Appends to `out` a stream's header fields as HTTP/1.1 carries them, in order: `host` from
/// `:authority`, the request's own fields (the core refused connection-specific ones), split
/// cookies joined again, and `transfer-encoding: chunked` for a body of unknown length
/// (returns whether). The fields are moved, not copied.
fn h1_fields(
    fields: Vec<Header>,
    authority: Option<&str>,
    end: bool,
    out: &mut Vec<Header>,
) -> bool {
    match authority {
        Some(a) => out.push(Header::new("host", a)),
        // No authority to convey (RFC 9113 §8.3.1 allows it, HAProxy accepts it): HTTP/1.1
        // then carries an empty Host (RFC 9112 §3.2).
        None if !fields.iter().any(|h| h.name == "host") => out.push(Header::new("host", "")),
        None => {}
    }
    let mut cookies: Vec<FieldValue> = Vec::new();
    let mut has_length = false;
    for h in fields {
        match h.name.as_str() {
            "host" if authority.is_some() => continue,
            // RFC 9113 §8.2.3: split cookie fields are joined again for HTTP/1.1.
            "cookie" => {
                cookies.push(h.value);
                continue;
            }
            "content-length" => has_length = true,
            _ => {}
        }
        out.push(h);
    }
    if !cookies.is_empty() {
        out.push(Header::new("cookie", cookies.join(&b"; "[..])));
    }
    let chunked = !end && !has_length;
    if chunked {
        out.push(Header::new("transfer-encoding", "chunked"));
    }
    chunked
}

#[cfg(test)]
mod tests;
