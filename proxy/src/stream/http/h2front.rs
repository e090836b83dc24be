//! One HTTP/2 stream as the L7 transaction's client side, with no HTTP/1 text either way: the
//! request head is built from the stream's fields (as the HTTP/1 parser would build it, checked
//! by the same rules), its body read as DATA payload; the response head goes out as HEADERS, the
//! body's payload (the server's HTTP/1 framing found by the transaction's body decoder) as DATA,
//! chunked trailers as a trailing HEADERS frame.

use std::cell::RefCell;
use std::io;
use std::sync::Arc;

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{RecvStream, SendStream};

use super::front::{Front, Part};
use crate::http::errors::Page;
use crate::http::h1::{self, BodyDecoder, BodyFraming, H1Error, Limits, Payload};
use crate::http::head::{Header, Headers, RequestHead, ResponseHead, Version};
use crate::tls::stream::TlsInfo;

/// Where the response stands.
enum Resp {
    /// No final head sent yet (interim ones may have been).
    Head(SendResponse<Bytes>),
    Body(SendStream<Bytes>),
    /// Taken while an await is in progress.
    Busy,
    Done,
}

/// One stream as the transaction's [`Front`].
pub struct H2Front {
    /// The request head for the transaction (taken once), or the status refusing it.
    head: RefCell<Option<Result<RequestHead, u16>>>,
    body: RefCell<Option<RecvStream>>,
    /// The request's trailers, once its body was read to the end.
    trailers: RefCell<Option<Headers>>,
    resp: RefCell<Resp>,
    tls: Option<Arc<TlsInfo>>,
    /// Built on demand from `method` and `uri` (only a log line reads it).
    log_line: std::cell::OnceCell<String>,
    method: http::Method,
    uri: http::Uri,
    first: bool,
}

impl H2Front {
    /// The front of a stream just accepted (`first`: its connection's first).
    pub fn new(
        req: http::Request<RecvStream>,
        respond: SendResponse<Bytes>,
        tls: Option<Arc<TlsInfo>>,
        first: bool,
    ) -> H2Front {
        let (parts, body) = req.into_parts();
        let end = body.is_end_stream();
        let head = build_head(&parts, end);
        // An extended CONNECT goes on as the GET upgrade it stands for (and is logged so).
        let method = match parts.extensions.get::<h2::ext::Protocol>() {
            Some(_) => http::Method::GET,
            None => parts.method,
        };
        H2Front {
            head: RefCell::new(Some(head)),
            body: RefCell::new((!end).then_some(body)),
            trailers: RefCell::new(None),
            resp: RefCell::new(Resp::Head(respond)),
            tls,
            log_line: std::cell::OnceCell::new(),
            method,
            uri: parts.uri,
            first,
        }
    }

    fn take_resp(&self) -> Resp {
        std::mem::replace(&mut *self.resp.borrow_mut(), Resp::Busy)
    }

    fn put_resp(&self, r: Resp) {
        *self.resp.borrow_mut() = r;
    }

    /// Sends a final head; Some(stream) when a body follows (`end`: none does).
    fn start(&self, head: &ResponseHead, end: bool) -> io::Result<Option<SendStream<Bytes>>> {
        let Resp::Head(mut respond) = self.take_resp() else {
            self.put_resp(Resp::Done);
            return Err(io::ErrorKind::BrokenPipe.into());
        };
        let resp = match response(head) {
            Ok(r) => r,
            Err(e) => {
                respond.send_reset(h2::Reason::INTERNAL_ERROR);
                self.put_resp(Resp::Done);
                return Err(e);
            }
        };
        match respond.send_response(resp, end) {
            Ok(send) if !end => Ok(Some(send)),
            Ok(_) => {
                self.put_resp(Resp::Done);
                Ok(None)
            }
            Err(e) => {
                self.put_resp(Resp::Done);
                Err(io::Error::other(e))
            }
        }
    }

    /// Sends `part` on an open body; the stream back unless the response ended.
    async fn body(
        &self,
        mut send: SendStream<Bytes>,
        part: &Part<'_>,
    ) -> io::Result<Option<SendStream<Bytes>>> {
        let trailers = part.trailers.as_ref().map(trailer_map).transpose()?;
        let ends_in_data = part.end && trailers.as_ref().is_none_or(|t| t.is_empty());
        let n = part.payload.len();
        for (i, r) in part.payload.iter().enumerate() {
            let data = part.wire.get(r.clone()).unwrap_or_default();
            send_data(&mut send, data, ends_in_data && i + 1 == n).await?;
        }
        if !part.end {
            return Ok(Some(send));
        }
        match trailers.filter(|t| !t.is_empty()) {
            Some(t) => send.send_trailers(t).map_err(io::Error::other)?,
            None if n == 0 => send
                .send_data(Bytes::new(), true)
                .map_err(io::Error::other)?,
            None => {}
        }
        Ok(None)
    }

    /// Ends the stream at once (RST_STREAM).
    fn reset(&self, reason: h2::Reason) {
        match std::mem::replace(&mut *self.resp.borrow_mut(), Resp::Done) {
            Resp::Body(mut send) => send.send_reset(reason),
            Resp::Head(mut respond) => respond.send_reset(reason),
            Resp::Busy | Resp::Done => {}
        }
    }
}

impl crate::engine::conn::Duplex for H2Front {
    /// The request body's payload (a tunnel's bytes from the client); Ok(0) once it ended.
    async fn read(&self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        let Some(mut rs) = self.body.borrow_mut().take() else {
            return (Ok(0), buf);
        };
        loop {
            match rs.data().await {
                Some(Ok(data)) if data.is_empty() => continue,
                Some(Ok(data)) => {
                    let _ = rs.flow_control().release_capacity(data.len());
                    buf.extend_from_slice(&data);
                    *self.body.borrow_mut() = Some(rs);
                    return (Ok(data.len()), buf);
                }
                Some(Err(e)) => return (Err(io::Error::other(e)), buf),
                None => {
                    // The body ended: a trailing HEADERS frame, if any, is kept for the
                    // transaction (the last chunk towards the server).
                    if let Ok(Some(t)) = rs.trailers().await {
                        let fields = t
                            .iter()
                            .map(|(n, v)| Header::new(n.as_str(), v.as_bytes()))
                            .collect();
                        *self.trailers.borrow_mut() = Some(Headers(fields));
                    }
                    return (Ok(0), buf);
                }
            }
        }
    }

    /// A tunnel's bytes to the client, as DATA.
    async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        let Resp::Body(mut send) = self.take_resp() else {
            self.put_resp(Resp::Done);
            return (Err(io::ErrorKind::BrokenPipe.into()), buf);
        };
        let r = send_data(&mut send, &buf, false).await;
        match &r {
            Ok(()) => self.put_resp(Resp::Body(send)),
            Err(_) => send.send_reset(h2::Reason::CANCEL),
        }
        (r, buf)
    }

    /// The transaction is done sending: ends a body left open (until-close, tunnel); a stream
    /// with no response head is reset.
    async fn shutdown_write(&self) -> io::Result<()> {
        match std::mem::replace(&mut *self.resp.borrow_mut(), Resp::Done) {
            Resp::Body(mut send) => {
                let _ = send.send_data(Bytes::new(), true);
            }
            Resp::Head(mut respond) => respond.send_reset(h2::Reason::CANCEL),
            Resp::Busy | Resp::Done => {}
        }
        Ok(())
    }

    fn abort(&self, _rst: bool) {
        self.reset(h2::Reason::CANCEL);
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
        Some(
            self.log_line
                .get_or_init(|| log_line(&self.method, &self.uri)),
        )
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
        let Some(mut send) = self.start(&page.head, end)? else {
            return Ok(());
        };
        let n = payload.len();
        for (i, r) in payload.iter().enumerate() {
            let data = page.body.get(r.clone()).unwrap_or_default();
            if let Err(e) = send_data(&mut send, data, i + 1 == n).await {
                send.send_reset(h2::Reason::CANCEL);
                return Err(e);
            }
        }
        self.put_resp(Resp::Done);
        Ok(())
    }

    async fn send_interim(&self, head: &ResponseHead, _wire: Vec<u8>) -> io::Result<()> {
        let mut state = self.take_resp();
        // An interim response is advice: one the client cannot be given is dropped.
        if let Resp::Head(respond) = &mut state
            && head.status != 101
            && let Ok(r) = response(head)
        {
            let _ = respond.send_informational(r);
        }
        self.put_resp(state);
        Ok(())
    }

    async fn send_part(&self, part: Part<'_>) -> (io::Result<()>, Vec<u8>) {
        let send = match part.head {
            Some(h) => {
                let bodyless = part.payload.is_empty() && part.trailers.is_none();
                match self.start(h, part.end && bodyless) {
                    Ok(Some(s)) => s,
                    Ok(None) => return (Ok(()), part.wire),
                    Err(e) => return (Err(e), part.wire),
                }
            }
            None => match self.take_resp() {
                Resp::Body(s) => s,
                other => {
                    self.put_resp(other);
                    return (Err(io::ErrorKind::BrokenPipe.into()), part.wire);
                }
            },
        };
        let r = match self.body(send, &part).await {
            Ok(Some(s)) => {
                self.put_resp(Resp::Body(s));
                Ok(())
            }
            Ok(None) => {
                self.put_resp(Resp::Done);
                Ok(())
            }
            Err(e) => {
                self.put_resp(Resp::Done);
                Err(e)
            }
        };
        (r, part.wire)
    }
}

/// Fields of an HTTP/1 response that have no place in h2 (RFC 9113 §8.2.2), `te` included.
fn connection_specific(name: &str) -> bool {
    crate::http::head::h2_forbidden(name) || name.eq_ignore_ascii_case("te")
}

/// The h2 form of a response head: lowercase names, no connection-specific field. A 101 (an
/// upgrade the server accepted) becomes the 200 that opens an h2 tunnel.
fn response(head: &ResponseHead) -> io::Result<http::Response<()>> {
    let status = if head.status == 101 { 200 } else { head.status };
    let mut resp = http::Response::new(());
    *resp.status_mut() = http::StatusCode::from_u16(status)
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    *resp.headers_mut() = field_map(&head.headers)?;
    Ok(resp)
}

fn field_map(headers: &Headers) -> io::Result<http::HeaderMap> {
    let mut map = http::HeaderMap::with_capacity(headers.0.len());
    for h in headers.0.iter().filter(|h| !connection_specific(&h.name)) {
        let name = http::HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let value = http::HeaderValue::from_bytes(&h.value)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        map.append(name, value);
    }
    Ok(map)
}

fn trailer_map(t: &Headers) -> io::Result<http::HeaderMap> {
    field_map(t)
}

/// The request head as `h1::parse_request_head` would make it from the HTTP/1.1 form of the
/// stream (origin-form, `host` from `:authority`, lowercase names, split cookies joined), checked
/// by the same head-level rules and limits; Err: the status refusing it.
///
/// An extended CONNECT (RFC 8441, `:protocol`) becomes, as in HAProxy 2.6, a bodyless `GET` of
/// its `:path` with `upgrade: <protocol>` and `connection: upgrade`; for a WebSocket, a
/// generated `sec-websocket-key` last, which the server's 101 must answer (HAProxy's H1 mux;
/// it spells the name `Sec-Websocket-Key`, which only differs in case).
fn build_head(parts: &http::request::Parts, end: bool) -> Result<RequestHead, u16> {
    let limits = Limits::default();
    let protocol = parts.extensions.get::<h2::ext::Protocol>();
    let (method, end) = match protocol {
        Some(_) => ("GET", true),
        None => (parts.method.as_str(), end),
    };
    let authority = parts.uri.authority().map(|a| a.as_str());
    let target = if parts.method == http::Method::CONNECT && protocol.is_none() {
        authority.unwrap_or("")
    } else {
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    };
    let bad_target = target.is_empty()
        || !target
            .bytes()
            .all(|b| matches!(b, b'!'..=b'~') && b != b'#');
    if bad_target || !method.bytes().all(h1::is_tchar) {
        return Err(H1Error::BadTarget.status());
    }
    let line = method.len() + target.len() + 12;
    if line > limits.max_head {
        return Err(H1Error::UriTooLong.status());
    }
    let mut fields = Vec::with_capacity(parts.headers.len() + 2);
    let (mut size, mut bad) = (line, false);
    h1_fields(parts, authority, end, |name, value| {
        // The parser trims OWS and refuses control bytes.
        let value = h1::trim_ows(value);
        bad |= !value.iter().all(|&b| h1::is_field_byte(b));
        size += name.len() + value.len() + 4;
        fields.push(Header {
            name: name.to_owned(),
            value: value.to_vec(),
        });
    });
    if let Some(p) = protocol {
        // HAProxy 2.6's order: these two right after the request line, the key last.
        let p = p.as_str();
        fields.splice(
            0..0,
            [
                Header::new("upgrade", p),
                Header::new("connection", "upgrade"),
            ],
        );
        if p.eq_ignore_ascii_case("websocket") {
            fields.push(Header::new("sec-websocket-key", websocket_key()?));
        }
    }
    if bad {
        return Err(H1Error::BadHeaderValue.status());
    }
    if size + 2 > limits.max_head || fields.len() > limits.max_headers {
        return Err(H1Error::HeadTooLarge.status());
    }
    let mut head = RequestHead {
        method: method.to_owned(),
        target: target.to_owned(),
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

/// The request line HAProxy logs for a stream (`GET https://host/path HTTP/2.0`).
fn log_line(method: &http::Method, uri: &http::Uri) -> String {
    let path = uri.path_and_query().map_or("/", |p| p.as_str());
    let authority = uri.authority().map(|a| a.as_str());
    match (uri.scheme_str(), authority) {
        (Some(s), Some(a)) if method != http::Method::CONNECT => {
            format!("{method} {s}://{a}{path} HTTP/2.0")
        }
        (_, a) if method == http::Method::CONNECT => {
            format!("{method} {} HTTP/2.0", a.unwrap_or(""))
        }
        _ => format!("{method} {path} HTTP/2.0"),
    }
}

/// Hands `field` a stream's header fields as HTTP/1.1 carries them, in order: `host` from
/// `:authority`, the request's own fields without the connection-specific ones, split cookies
/// joined again, and `transfer-encoding: chunked` for a body of unknown length (returns whether).
fn h1_fields(
    parts: &http::request::Parts,
    authority: Option<&str>,
    end: bool,
    mut field: impl FnMut(&str, &[u8]),
) -> bool {
    match authority {
        Some(a) => field("host", a.as_bytes()),
        // No authority to convey (RFC 9113 §8.3.1 allows it, HAProxy accepts it): HTTP/1.1
        // then carries an empty Host (RFC 9112 §3.2).
        None if !parts.headers.contains_key("host") => field("host", b""),
        None => {}
    }
    let mut cookies: Vec<&[u8]> = Vec::new();
    let mut has_length = false;
    for (name, value) in &parts.headers {
        match name.as_str() {
            "host" if authority.is_some() => continue,
            // Connection-specific fields are illegal in h2 (the crate refuses them already).
            "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade" => {
                continue;
            }
            // `te: trailers` is the one TE h2 allows (RFC 9113 §8.2.2); HAProxy passes it on,
            // and gRPC servers require it.
            "te" if value.as_bytes() != b"trailers" => continue,
            // RFC 9113 §8.2.3: split cookie fields are joined again for HTTP/1.1.
            "cookie" => {
                cookies.push(value.as_bytes());
                continue;
            }
            "content-length" => has_length = true,
            _ => {}
        }
        field(name.as_str(), value.as_bytes());
    }
    if !cookies.is_empty() {
        field("cookie", &cookies.join(&b"; "[..]));
    }
    let chunked = !end && !has_length;
    if chunked {
        field("transfer-encoding", b"chunked");
    }
    chunked
}

/// Sends `data` as flow control allows.
async fn send_data(send: &mut SendStream<Bytes>, mut data: &[u8], end: bool) -> io::Result<()> {
    while !data.is_empty() {
        send.reserve_capacity(data.len());
        let cap = match std::future::poll_fn(|cx| send.poll_capacity(cx)).await {
            Some(Ok(c)) => c,
            Some(Err(e)) => return Err(io::Error::other(e)),
            None => return Err(io::ErrorKind::BrokenPipe.into()),
        };
        if cap == 0 {
            continue;
        }
        let n = cap.min(data.len());
        send.send_data(Bytes::copy_from_slice(&data[..n]), end && n == data.len())
            .map_err(io::Error::other)?;
        data = &data[n..];
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The HTTP/1.1 request head for a stream, and whether its body goes chunked.
    pub(super) fn request_head(parts: &http::request::Parts, end: bool) -> (Vec<u8>, bool) {
        let method = parts.method.as_str();
        let path = parts.uri.path_and_query().map_or("/", |p| p.as_str());
        let authority = parts.uri.authority().map(|a| a.as_str());
        let target = if parts.method == http::Method::CONNECT {
            authority.unwrap_or("")
        } else {
            path
        };
        let mut out = Vec::with_capacity(256);
        out.extend_from_slice(method.as_bytes());
        out.push(b' ');
        out.extend_from_slice(target.as_bytes());
        out.extend_from_slice(b" HTTP/1.1\r\n");
        let chunked = h1_fields(parts, authority, end, |name, value| {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        });
        out.extend_from_slice(b"\r\n");
        (out, chunked)
    }

    fn parts(method: &str, uri: &str, fields: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::builder().method(method).uri(uri);
        for (n, v) in fields {
            b = b.header(*n, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn build_head_matches_parser() {
        let cases = [
            parts("GET", "https://example.local/", &[("user-agent", "h2load")]),
            parts(
                "POST",
                "https://example.local/p?q=1",
                &[("cookie", "a=1"), ("x-y", "z\u{7e}"), ("cookie", "b=2")],
            ),
            parts(
                "PUT",
                "https://example.local:8443/x",
                &[("content-length", "3"), ("host", "other")],
            ),
            parts("CONNECT", "example.local:443", &[]),
            parts("DELETE", "http://example.local/a%20b", &[("x-a", "1\t2")]),
            // OWS the parser trims.
            parts("GET", "https://example.local/", &[("x-a", " v\t")]),
            // No :authority: HTTP/1.1 gets an empty Host.
            parts("GET", "/", &[]),
        ];
        for (i, p) in cases.iter().enumerate() {
            for end in [true, false] {
                let built = build_head(p, end).unwrap_or_else(|s| panic!("case {i}: {s}"));
                let (text, _) = request_head(p, end);
                let (parsed, used) = h1::parse_request_head(&text, &Limits::default())
                    .unwrap()
                    .unwrap();
                assert_eq!(used, text.len());
                assert_eq!(built, parsed, "case {i} end {end}");
            }
        }
        let h = build_head(&cases[1], false).unwrap();
        assert_eq!(h.target, "/p?q=1");
        assert_eq!(
            h.headers.get_all("cookie").collect::<Vec<_>>(),
            [b"a=1; b=2"]
        );
        assert_eq!(
            h.headers.get_last("transfer-encoding"),
            Some(&b"chunked"[..])
        );
        let bare = build_head(&cases[6], true).unwrap();
        assert_eq!(bare.headers.get_all("host").next(), Some(&b""[..]));
    }

    #[test]
    fn build_head_refuses_what_the_parser_refuses() {
        let many: Vec<(String, String)> =
            (0..101).map(|i| (format!("x-{i}"), "v".into())).collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let big = "v".repeat(17000);
        let odd = [
            parts("GET", "https://example.local/", &many),
            parts("GET", "https://example.local/", &[("x-big", &big)]),
        ];
        for (i, p) in odd.iter().enumerate() {
            assert_eq!(build_head(p, true), Err(400), "case {i}");
            let (text, _) = request_head(p, true);
            assert!(h1::parse_request_head(&text, &Limits::default()).is_err());
        }
    }

    #[test]
    fn extended_connect_is_a_get_upgrade_with_a_key() {
        let p = http::Request::builder()
            .method("CONNECT")
            .uri("http://127.0.0.1/chat")
            .extension(h2::ext::Protocol::from("websocket"))
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let h = build_head(&p, false).unwrap();
        assert_eq!((h.method.as_str(), h.target.as_str()), ("GET", "/chat"));
        let names: Vec<&str> = h.headers.0.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            ["upgrade", "connection", "host", "sec-websocket-key"]
        );
        assert_eq!(h.headers.get_last("upgrade"), Some(&b"websocket"[..]));
        assert_eq!(
            h.headers.get_last("sec-websocket-key").map(<[u8]>::len),
            Some(24)
        );
        assert!(h1::is_websocket_upgrade(&h));
        assert_eq!(
            log_line(&http::Method::GET, &p.uri),
            "GET http://127.0.0.1/chat HTTP/2.0"
        );
    }

    #[test]
    fn response_heads_lose_connection_fields() {
        let mut h = Headers::default();
        h.append("Content-Type", "text/plain");
        h.append("Connection", "close");
        h.append("Transfer-Encoding", "chunked");
        h.append("X-A", "1");
        let head = ResponseHead {
            version: Version::Http11,
            status: 101,
            reason: "Switching Protocols".into(),
            headers: h,
        };
        let r = response(&head).unwrap();
        assert_eq!(r.status(), 200);
        let names: Vec<&str> = r.headers().keys().map(|k| k.as_str()).collect();
        assert_eq!(names, ["content-type", "x-a"]);
    }

    #[test]
    fn request_head_from_h2() {
        let req = http::Request::builder()
            .method("POST")
            .uri("https://example.local/p?q=1")
            .header("cookie", "a=1")
            .header("x-y", "z")
            .header("cookie", "b=2")
            .body(())
            .unwrap();
        let (parts, _) = req.into_parts();
        let (head, chunked) = request_head(&parts, false);
        assert_eq!(
            log_line(&parts.method, &parts.uri),
            "POST https://example.local/p?q=1 HTTP/2.0"
        );
        assert!(chunked);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "POST /p?q=1 HTTP/1.1\r\nhost: example.local\r\nx-y: z\r\ncookie: a=1; b=2\r\n\
             transfer-encoding: chunked\r\n\r\n"
        );
        let req = http::Request::builder()
            .method("GET")
            .uri("https://example.local/")
            .header("host", "other")
            .header("content-length", "0")
            .body(())
            .unwrap();
        let (parts, _) = req.into_parts();
        let (head, chunked) = request_head(&parts, true);
        let connect = http::Uri::from_static("example.local:443");
        assert_eq!(
            log_line(&http::Method::CONNECT, &connect),
            "CONNECT example.local:443 HTTP/2.0"
        );
        let origin = http::Uri::from_static("/x?y");
        assert_eq!(log_line(&http::Method::GET, &origin), "GET /x?y HTTP/2.0");
        assert!(!chunked);
        assert_eq!(
            String::from_utf8(head).unwrap(),
            "GET / HTTP/1.1\r\nhost: example.local\r\ncontent-length: 0\r\n\r\n"
        );
    }
}
