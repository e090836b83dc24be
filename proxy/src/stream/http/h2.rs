//! HTTP/2 on the frontend (ALPN `h2`). The `h2` crate runs the protocol (flow control, HPACK,
//! limits, rapid-reset and CONTINUATION-flood defences); each stream is bridged to one HTTP/1.1
//! transaction run by the same L7 session code as an HTTP/1 client's — as HAProxy 1.8's h2 mux
//! did — so rules, routing, server pools, shutdown-sessions and logs are shared.
//!
//! The bridge is a [`H2Pipe`]: reading it yields the request serialised as HTTP/1.1 (origin-form,
//! `host` from `:authority`, lowercase names as HAProxy sends them); what the session writes back
//! is parsed as an HTTP/1.1 response and re-framed as HEADERS and DATA.

use crate::engine::service::Origin;
use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use h2::server::SendResponse;

use crate::stick::StkCtrs;
use h2::{RecvStream, SendStream};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::engine::Shared;
use crate::engine::conn::Conn;
use crate::engine::io::spawn;
use crate::http::h1::{self, BodyFraming, Limits};
use crate::http::head::{Header, Headers, RequestHead, Version};
use crate::model::Proxy;
use crate::tls::stream::TlsInfo;

/// HAProxy's `tune.h2.max-concurrent-streams` default.
const MAX_CONCURRENT_STREAMS: u32 = 100;
/// Largest header list accepted (HAProxy's is bounded by `tune.bufsize`, 16 KiB, per block; a
/// little more room here, still far from a CONTINUATION flood's).
const MAX_HEADER_LIST: u32 = 64 * 1024;
/// Bytes buffered towards the socket before the writer is made to wait.
const WBUF_MAX: usize = 64 * 1024;

type ReadFut = Pin<Box<dyn Future<Output = (io::Result<usize>, Vec<u8>)>>>;
type WriteFut = Pin<Box<dyn Future<Output = (io::Result<()>, Vec<u8>)>>>;
type ShutFut = Pin<Box<dyn Future<Output = io::Result<()>>>>;

/// Poll-based I/O over a client connection's owned-buffer interface, for the `h2` crate.
struct H2Io {
    conn: Rc<Conn>,
    rbuf: Vec<u8>,
    rpos: usize,
    reading: Option<ReadFut>,
    wbuf: Vec<u8>,
    spare: Vec<u8>,
    writing: Option<WriteFut>,
    shut: Option<ShutFut>,
}

impl H2Io {
    fn new(conn: Rc<Conn>) -> H2Io {
        H2Io {
            conn,
            rbuf: Vec::with_capacity(16 * 1024),
            rpos: 0,
            reading: None,
            wbuf: Vec::with_capacity(16 * 1024),
            spare: Vec::new(),
            writing: None,
            shut: None,
        }
    }

    /// Drives the write in flight; Ready once none is.
    fn poll_writing(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(f) = self.writing.as_mut() {
            let (r, mut b) = std::task::ready!(f.as_mut().poll(cx));
            self.writing = None;
            b.clear();
            self.spare = b;
            r?;
        }
        Poll::Ready(Ok(()))
    }

    fn start_write(&mut self) {
        let next = std::mem::take(&mut self.spare);
        let b = std::mem::replace(&mut self.wbuf, next);
        let c = Rc::clone(&self.conn);
        self.writing = Some(Box::pin(async move { c.write_all(b).await }));
    }
}

impl AsyncRead for H2Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.rpos < this.rbuf.len() {
                let n = out.remaining().min(this.rbuf.len() - this.rpos);
                out.put_slice(&this.rbuf[this.rpos..this.rpos + n]);
                this.rpos += n;
                return Poll::Ready(Ok(()));
            }
            if this.reading.is_none() {
                let mut b = std::mem::take(&mut this.rbuf);
                b.clear();
                this.rpos = 0;
                let c = Rc::clone(&this.conn);
                this.reading = Some(Box::pin(async move { c.read(b).await }));
            }
            let Some(f) = this.reading.as_mut() else {
                continue;
            };
            let (r, b) = std::task::ready!(f.as_mut().poll(cx));
            this.reading = None;
            this.rbuf = b;
            this.rpos = 0;
            match r {
                Ok(0) => return Poll::Ready(Ok(())),
                Ok(_) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for H2Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.writing.is_some() {
            match this.poll_writing(cx) {
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending if this.wbuf.len() >= WBUF_MAX => return Poll::Pending,
                _ => {}
            }
        }
        this.wbuf.extend_from_slice(data);
        if this.writing.is_none() && this.wbuf.len() >= WBUF_MAX {
            this.start_write();
        }
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            std::task::ready!(this.poll_writing(cx))?;
            if this.wbuf.is_empty() {
                return Poll::Ready(Ok(()));
            }
            this.start_write();
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.as_mut().poll_flush(cx))?;
        let this = self.get_mut();
        let f = this.shut.get_or_insert_with(|| {
            let c = Rc::clone(&this.conn);
            Box::pin(async move { c.shutdown_write().await })
        });
        f.as_mut().poll(cx)
    }
}

/// Serves an HTTP/2 client connection until it closes, the client goes idle, or the process
/// stops (GOAWAY, then the streams in flight finish).
/// Serves an HTTP/2 connection: one L7 transaction per stream. `sess` holds the counters the
/// connection's `tcp-request connection` rules tracked (every stream sees them).
pub async fn serve_tracked(
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    conn: Conn,
    origin: Origin,
    sess: Rc<StkCtrs>,
) {
    let conn = Rc::new(conn);
    let (client, idle) = {
        let t = fe.cfg.timeouts;
        (t.client, t.http_keep_alive.or(t.client))
    };
    let streams = H2Conn {
        tls: conn.tls().cloned(),
        shared,
        fe,
        origin,
        sess,
        active: Rc::new(Cell::new(0)),
        ended: Rc::new(tokio::sync::Notify::new()),
    };
    let Some(mut h2c) = handshake(Rc::clone(&conn), client).await else {
        return;
    };
    let mut count = 0u64;
    let mut stop = streams.shared.stop_tx.subscribe();
    let mut stopping = *stop.borrow_and_update();
    if stopping {
        h2c.graceful_shutdown();
    }
    loop {
        let idle_timer = async {
            match idle {
                Some(d) if streams.active.get() == 0 => tokio::time::sleep(d).await,
                _ => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            r = h2c.accept() => match r {
                Some(Ok((req, respond))) => {
                    count += 1;
                    streams.spawn(req, respond, count == 1);
                }
                Some(Err(e)) => {
                    tracing::debug!("{}: h2 connection error: {e}", streams.fe.name);
                    drop(h2c);
                    linger(&conn).await;
                    return;
                }
                None => break,
            },
            r = stop.changed(), if !stopping => {
                if r.is_ok() && *stop.borrow_and_update() {
                    stopping = true;
                    h2c.graceful_shutdown();
                }
            }
            _ = streams.ended.notified() => {}
            _ = idle_timer => {
                h2c.graceful_shutdown();
                if streams.active.get() == 0 {
                    // Lets the GOAWAY out before the connection is dropped.
                    let _ = tokio::time::timeout(
                        std::time::Duration::from_millis(100),
                        std::future::poll_fn(|cx| h2c.poll_closed(cx)),
                    )
                    .await;
                    break;
                }
            }
        }
    }
}

/// The server side of the HTTP/2 preface and SETTINGS, within `timeout client`.
async fn handshake(
    conn: Rc<Conn>,
    client: Option<std::time::Duration>,
) -> Option<h2::server::Connection<H2Io, Bytes>> {
    let io = H2Io::new(conn);
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .max_header_list_size(MAX_HEADER_LIST);
    let hs = builder.handshake::<_, Bytes>(io);
    match client {
        Some(d) => tokio::time::timeout(d, hs).await.ok()?.ok(),
        None => hs.await.ok(),
    }
}

/// What every stream of one HTTP/2 connection shares, and how many are running.
struct H2Conn {
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    origin: Origin,
    tls: Option<Arc<TlsInfo>>,
    sess: Rc<StkCtrs>,
    active: Rc<Cell<usize>>,
    /// Signalled when the last running stream ends (the idle timer then starts).
    ended: Rc<tokio::sync::Notify>,
}

impl H2Conn {
    /// Runs a new stream (`first`: the connection's first) in a task of its own.
    fn spawn(&self, req: http::Request<RecvStream>, respond: SendResponse<Bytes>, first: bool) {
        self.active.set(self.active.get() + 1);
        let (active, ended) = (Rc::clone(&self.active), Rc::clone(&self.ended));
        // Boxed: the task then holds a pointer, not the whole session's future, which the
        // runtime would otherwise copy around (about 8 KiB) per stream.
        let fut = Box::pin(stream(
            Arc::clone(&self.shared),
            Arc::clone(&self.fe),
            req,
            respond,
            (self.origin.clone(), first),
            self.tls.clone(),
            Rc::clone(&self.sess),
        ));
        spawn(async move {
            fut.await;
            let left = active.get().saturating_sub(1);
            active.set(left);
            // Only the idle timer waits for this, and only once none is left.
            if left == 0 {
                ended.notify_one();
            }
        });
    }
}

/// After a connection error (GOAWAY sent): what the client still sends is read and dropped
/// for a moment before the close, since closing on unread bytes sends a RST, which can destroy
/// the GOAWAY before the client reads it (e.g. in the middle of a rapid-reset burst).
async fn linger(conn: &Conn) {
    const LINGER: std::time::Duration = std::time::Duration::from_millis(500);
    const LINGER_MAX: usize = 1 << 20;
    let drain = async {
        let (mut buf, mut total) = (Vec::with_capacity(16 * 1024), 0usize);
        while total < LINGER_MAX {
            buf.clear();
            let (r, b) = conn.read(buf).await;
            buf = b;
            match r {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}

/// One stream: the request as HTTP/1.1 into a fresh L7 session, its response back as h2. Not
/// async itself, so that the future is only the session's (no request parts kept beside it).
fn stream(
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    req: http::Request<RecvStream>,
    respond: SendResponse<Bytes>,
    (origin, first): (Origin, bool),
    tls: Option<Arc<TlsInfo>>,
    sess: Rc<StkCtrs>,
) -> impl Future<Output = ()> {
    let (parts, body) = req.into_parts();
    let end = body.is_end_stream();
    // The head as the session's parser would make it, else (anything unusual) as text for it.
    let (parsed, head, chunked) = match direct_head(&parts, end) {
        Some((h, chunked)) => (Some(h), None, chunked),
        None => {
            let (text, chunked) = request_head(&parts, end);
            (None, Some(text), chunked)
        }
    };
    let pipe = H2Pipe {
        parsed: RefCell::new(parsed),
        head: RefCell::new(head),
        body: RefCell::new(if end { None } else { Some(body) }),
        chunked,
        resp: RefCell::new(Resp::Head {
            respond,
            buf: Vec::new(),
        }),
        head_request: parts.method == http::Method::HEAD,
        done: Cell::new(false),
        done_notify: tokio::sync::Notify::new(),
        tls,
        log_line: std::cell::OnceCell::new(),
        method: parts.method,
        uri: parts.uri,
        first,
    };
    super::run_tracked(shared, fe, pipe, origin, sess)
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

/// What [`request_head`]'s text gives through `h1::parse_request_head`, built without the
/// text; None when the parser could refuse it or change it (bytes it rejects, OWS to trim,
/// limits, head-level rules), which then go the text way to get its exact answer.
fn direct_head(parts: &http::request::Parts, end: bool) -> Option<(RequestHead, bool)> {
    let limits = Limits::default();
    let method = parts.method.as_str();
    let authority = parts.uri.authority().map(|a| a.as_str());
    let target = if parts.method == http::Method::CONNECT {
        authority.unwrap_or("")
    } else {
        parts.uri.path_and_query().map_or("/", |p| p.as_str())
    };
    if target.is_empty()
        || !target
            .bytes()
            .all(|b| matches!(b, b'!'..=b'~') && b != b'#')
        || !method.bytes().all(h1::is_tchar)
    {
        return None;
    }
    // Same order and joins as the text.
    let mut fields = Vec::with_capacity(parts.headers.len() + 2);
    let mut size = method.len() + target.len() + 12;
    let chunked = h1_fields(parts, authority, end, |name, value| {
        size += name.len() + value.len() + 4;
        fields.push(Header {
            name: name.to_owned(),
            value: value.to_vec(),
        });
    });
    let plain = |v: &[u8]| {
        v.iter().all(|&b| h1::is_field_byte(b))
            && !matches!(v.first(), Some(b' ' | b'\t'))
            && !matches!(v.last(), Some(b' ' | b'\t'))
    };
    if size + 2 > limits.max_head
        || fields.len() > limits.max_headers
        || !fields.iter().all(|h| plain(&h.value))
    {
        return None;
    }
    let mut head = RequestHead {
        method: method.to_owned(),
        target: target.to_owned(),
        version: Version::Http11,
        headers: Headers(fields),
    };
    h1::check_request(&mut head).ok()?;
    Some((head, chunked))
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
            "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade"
            | "te" => continue,
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

/// The HTTP/1.1 request head for a stream, and whether its body goes chunked.
fn request_head(parts: &http::request::Parts, end: bool) -> (Vec<u8>, bool) {
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

/// Where the response written by the session stands.
enum Resp {
    /// Collecting the head (interim responses are forwarded as they come).
    Head {
        respond: SendResponse<Bytes>,
        buf: Vec<u8>,
    },
    Body {
        send: SendStream<Bytes>,
        framing: Framing,
    },
    /// Taken while an await is in progress.
    Busy,
    Done,
}

enum Framing {
    Length(u64),
    Chunked(Dechunk),
    UntilClose,
}

/// A response head taken from the session, ready for HEADERS.
struct Converted {
    status: u16,
    response: http::Response<()>,
    /// None: no body follows.
    framing: Option<Framing>,
    /// Bytes of the head in the input.
    used: usize,
}

/// Fields of an HTTP/1 response that have no place in h2 (RFC 9113 §8.2.2).
fn connection_specific(name: &[u8]) -> bool {
    [
        &b"connection"[..],
        b"keep-alive",
        b"proxy-connection",
        b"transfer-encoding",
        b"upgrade",
        b"te",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

/// The response head at the start of `data` (None while incomplete), as h2 parts and framing.
fn convert_head(data: &[u8], head_request: bool) -> io::Result<Option<Converted>> {
    match fast_head(data, head_request) {
        Some(c) => Ok(Some(c)),
        None => slow_head(data, head_request),
    }
}

/// The heads the session writes (its own serialisation of a head it already validated): one
/// pass, no intermediate `ResponseHead`, the values sharing one buffer. Anything unusual —
/// incomplete, over the limits, obs-fold, a coding other than chunked, an odd Content-Length —
/// is left to [`slow_head`], which decides as before.
fn fast_head(data: &[u8], head_request: bool) -> Option<Converted> {
    // The head ends at the first empty line; `block` keeps each line's CRLF.
    let end = memchr::memmem::find(data, b"\r\n\r\n")? + 2;
    let used = end + 2;
    let limits = Limits::default();
    if used > limits.max_head {
        return None;
    }
    let block = Bytes::copy_from_slice(data.get(..end)?);
    let mut from = 0;
    let mut lines = memchr::memchr_iter(b'\n', &block).map(|nl| {
        let line = block.get(from..nl).unwrap_or_default();
        from = nl + 1;
        // A bare LF is the parser's to refuse.
        line.strip_suffix(b"\r")
    });
    let (status, http11) = status_line(lines.next()??)?;
    let mut headers = http::HeaderMap::new();
    let (mut chunked, mut length, mut count) = (false, None::<u64>, 0usize);
    for line in lines {
        let line = line?;
        count += 1;
        if count > limits.max_headers {
            return None;
        }
        let colon = line.iter().position(|&b| b == b':')?;
        let (name, value) = (line.get(..colon)?, line.get(colon + 1..)?);
        let start = value.iter().position(|&b| b != b' ' && b != b'\t');
        let stop = value.iter().rposition(|&b| b != b' ' && b != b'\t');
        let value = match (start, stop) {
            (Some(a), Some(b)) => value.get(a..=b)?,
            _ => &[][..],
        };
        if name.eq_ignore_ascii_case(b"transfer-encoding") {
            // Only the plain single coding; lists and HTTP/1.0 go the slow way.
            if chunked || !http11 || !value.eq_ignore_ascii_case(b"chunked") {
                return None;
            }
            chunked = true;
        }
        if connection_specific(name) {
            continue;
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let plain = !value.is_empty()
                && value.len() <= 18
                && value.iter().all(u8::is_ascii_digit)
                && (value.len() == 1 || value.first() != Some(&b'0'));
            if length.is_some() || !plain {
                return None;
            }
            length = Some(value.iter().fold(0u64, |n, d| n * 10 + u64::from(d - b'0')));
        }
        let name = http::HeaderName::from_bytes(name).ok()?;
        let value = http::HeaderValue::from_maybe_shared(block.slice_ref(value)).ok()?;
        headers.append(name, value);
    }
    let framing = if head_request || status < 200 || status == 204 || status == 304 {
        None
    } else if chunked {
        Some(Framing::Chunked(Dechunk::default()))
    } else {
        match length {
            Some(0) => None,
            Some(n) => Some(Framing::Length(n)),
            None => Some(Framing::UntilClose),
        }
    };
    let mut response = http::Response::new(());
    *response.status_mut() = http::StatusCode::from_u16(status).ok()?;
    *response.headers_mut() = headers;
    Some(Converted {
        status,
        response,
        framing,
        used,
    })
}

/// A plain status line (`HTTP/1.1 200 OK`): its status and whether it is HTTP/1.1.
fn status_line(line: &[u8]) -> Option<(u16, bool)> {
    let rest = line
        .strip_prefix(b"HTTP/1.1 ")
        .or_else(|| line.strip_prefix(b"HTTP/1.0 "))?;
    let http11 = line.starts_with(b"HTTP/1.1");
    let code = rest.get(..3)?;
    let reason = match rest.get(3..) {
        Some([]) => &[][..],
        Some([b' ', reason @ ..]) => reason,
        _ => return None,
    };
    let plain = |b: &u8| *b == b'\t' || (*b >= 0x20 && *b != 0x7f);
    if !code.iter().all(u8::is_ascii_digit) || !reason.iter().all(plain) {
        return None;
    }
    let status = code.iter().fold(0u16, |n, d| n * 10 + u16::from(d - b'0'));
    (100..600).contains(&status).then_some((status, http11))
}

/// Any response head, through the HTTP/1 parser.
fn slow_head(data: &[u8], head_request: bool) -> io::Result<Option<Converted>> {
    let parsed = h1::parse_response_head(data, &Limits::default())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.reason()))?;
    let Some((head, used)) = parsed else {
        return Ok(None);
    };
    let mut resp = http::Response::builder().status(head.status);
    for h in &head.headers.0 {
        if connection_specific(h.name.as_bytes()) {
            continue;
        }
        resp = resp.header(h.name.to_ascii_lowercase(), h.value.as_slice());
    }
    let response = resp
        .body(())
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
    let framing = if (100..200).contains(&head.status) {
        None
    } else {
        let method = if head_request { "HEAD" } else { "GET" };
        let framing = h1::response_framing(&head, method)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.reason()))?;
        match framing {
            BodyFraming::None | BodyFraming::Length(0) => None,
            BodyFraming::Length(n) => Some(Framing::Length(n)),
            BodyFraming::Chunked => Some(Framing::Chunked(Dechunk::default())),
            BodyFraming::UntilClose | BodyFraming::Tunnel => Some(Framing::UntilClose),
        }
    };
    Ok(Some(Converted {
        status: head.status,
        response,
        framing,
        used,
    }))
}

/// The client side of an L7 session: a connection, or one HTTP/2 stream seen as one.
/// One stream seen by the L7 session as an HTTP/1.1 client connection.
pub struct H2Pipe {
    /// The request head for the session, when it could be built without text.
    parsed: RefCell<Option<RequestHead>>,
    /// Else the request head as text, for the session's parser.
    head: RefCell<Option<Vec<u8>>>,
    body: RefCell<Option<RecvStream>>,
    chunked: bool,
    resp: RefCell<Resp>,
    head_request: bool,
    done: Cell<bool>,
    done_notify: tokio::sync::Notify,
    tls: Option<Arc<TlsInfo>>,
    /// Built on demand from `method` and `uri` (only a log line reads it).
    log_line: std::cell::OnceCell<String>,
    method: http::Method,
    uri: http::Uri,
    first: bool,
}

impl H2Pipe {
    fn finish(&self) {
        self.done.set(true);
        self.done_notify.notify_one();
    }

    /// The request, then its body; once both are delivered, waits for the response to end and
    /// reports end of stream (the session then ends without logging anything more).
    pub async fn read(&self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        if let Some(h) = self.head.borrow_mut().take() {
            buf.extend_from_slice(&h);
            return (Ok(h.len()), buf);
        }
        let body = self.body.borrow_mut().take();
        if let Some(mut rs) = body {
            loop {
                match rs.data().await {
                    Some(Ok(data)) if data.is_empty() => continue,
                    Some(Ok(data)) => {
                        let _ = rs.flow_control().release_capacity(data.len());
                        let before = buf.len();
                        if self.chunked {
                            buf.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
                            buf.extend_from_slice(&data);
                            buf.extend_from_slice(b"\r\n");
                        } else {
                            buf.extend_from_slice(&data);
                        }
                        *self.body.borrow_mut() = Some(rs);
                        return (Ok(buf.len() - before), buf);
                    }
                    Some(Err(e)) => return (Err(io::Error::other(e)), buf),
                    None => {
                        if self.chunked {
                            buf.extend_from_slice(b"0\r\n\r\n");
                            return (Ok(5), buf);
                        }
                        break;
                    }
                }
            }
        }
        while !self.done.get() {
            self.done_notify.notified().await;
        }
        (Ok(0), buf)
    }

    /// Takes HTTP/1.1 response bytes from the session.
    pub async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        let r = self.take_response(&buf).await;
        if r.is_err() {
            self.abort();
        }
        (r, buf)
    }

    async fn take_response(&self, input: &[u8]) -> io::Result<()> {
        let state = std::mem::replace(&mut *self.resp.borrow_mut(), Resp::Busy);
        match state {
            Resp::Head { respond, buf } => self.take_head(respond, buf, input).await,
            Resp::Body { send, framing } => self.take_body(send, framing, input).await,
            // Nothing more is expected once the response ended.
            Resp::Busy | Resp::Done => {
                *self.resp.borrow_mut() = state;
                Ok(())
            }
        }
    }

    /// The response head (interim ones are forwarded and the next awaited), then whatever body
    /// bytes came with it.
    async fn take_head(
        &self,
        mut respond: SendResponse<Bytes>,
        mut held: Vec<u8>,
        input: &[u8],
    ) -> io::Result<()> {
        // The common case: the whole head in one write, nothing held from an earlier one.
        let joined = if held.is_empty() {
            None
        } else {
            held.extend_from_slice(input);
            Some(held)
        };
        let data = joined.as_deref().unwrap_or(input);
        let Some(head) = convert_head(data, self.head_request)? else {
            let held = joined.unwrap_or_else(|| input.to_vec());
            *self.resp.borrow_mut() = Resp::Head { respond, buf: held };
            return Ok(());
        };
        let rest = data.get(head.used..).unwrap_or_default();
        if (100..200).contains(&head.status) {
            if head.status != 101 {
                let _ = respond.send_informational(head.response);
            }
            *self.resp.borrow_mut() = Resp::Head {
                respond,
                buf: Vec::new(),
            };
            if rest.is_empty() {
                return Ok(());
            }
            return Box::pin(self.take_response(rest)).await;
        }
        let send = respond
            .send_response(head.response, head.framing.is_none())
            .map_err(io::Error::other)?;
        match head.framing {
            None => {
                *self.resp.borrow_mut() = Resp::Done;
                self.finish();
                Ok(())
            }
            Some(framing) if rest.is_empty() => {
                *self.resp.borrow_mut() = Resp::Body { send, framing };
                Ok(())
            }
            Some(framing) => self.take_body(send, framing, rest).await,
        }
    }

    async fn take_body(
        &self,
        mut send: SendStream<Bytes>,
        mut framing: Framing,
        input: &[u8],
    ) -> io::Result<()> {
        let mut payload: Vec<(usize, usize)> = Vec::new();
        let end = match &mut framing {
            Framing::Length(left) => {
                let n = usize::try_from(*left).map_or(input.len(), |l| l.min(input.len()));
                payload.push((0, n));
                *left -= n as u64;
                *left == 0
            }
            Framing::UntilClose => {
                payload.push((0, input.len()));
                false
            }
            Framing::Chunked(d) => d
                .feed(input, &mut payload)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunked body"))?,
        };
        let total: usize = payload.iter().map(|(_, n)| n).sum();
        let mut sent = 0;
        for (off, n) in payload {
            sent += n;
            send_data(&mut send, &input[off..off + n], end && sent == total).await?;
        }
        if end && total == 0 {
            send.send_data(Bytes::new(), true)
                .map_err(io::Error::other)?;
        }
        if end {
            *self.resp.borrow_mut() = Resp::Done;
            self.finish();
        } else {
            *self.resp.borrow_mut() = Resp::Body { send, framing };
        }
        Ok(())
    }

    /// The session is done sending: ends an until-close body; a response left unfinished
    /// resets the stream.
    pub async fn shutdown_write(&self) -> io::Result<()> {
        let state = std::mem::replace(&mut *self.resp.borrow_mut(), Resp::Done);
        match state {
            Resp::Body {
                mut send,
                framing: Framing::UntilClose,
            } => {
                let _ = send.send_data(Bytes::new(), true);
            }
            Resp::Body { mut send, .. } => send.send_reset(h2::Reason::INTERNAL_ERROR),
            Resp::Head { mut respond, .. } => respond.send_reset(h2::Reason::CANCEL),
            Resp::Busy | Resp::Done => {}
        }
        self.finish();
        Ok(())
    }

    /// Ends the stream at once (RST_STREAM).
    pub fn abort(&self) {
        let state = std::mem::replace(&mut *self.resp.borrow_mut(), Resp::Done);
        match state {
            Resp::Body { mut send, .. } => send.send_reset(h2::Reason::CANCEL),
            Resp::Head { mut respond, .. } => respond.send_reset(h2::Reason::CANCEL),
            Resp::Busy | Resp::Done => {}
        }
        self.finish();
    }
}

impl crate::engine::conn::Duplex for H2Pipe {
    async fn read(&self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        H2Pipe::read(self, buf).await
    }
    async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        H2Pipe::write_all(self, buf).await
    }
    async fn shutdown_write(&self) -> io::Result<()> {
        H2Pipe::shutdown_write(self).await
    }
    fn abort(&self, _rst: bool) {
        H2Pipe::abort(self)
    }
}

/// An HTTP/2 stream as the transaction's front (still through HTTP/1 text for its body).
impl super::Front for H2Pipe {
    async fn write_all_close(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        let (r, buf) = H2Pipe::write_all(self, buf).await;
        if r.is_err() {
            return (r, buf);
        }
        (H2Pipe::shutdown_write(self).await, buf)
    }

    fn tls(&self) -> Option<&Arc<TlsInfo>> {
        self.tls.as_ref()
    }

    fn later_stream(&self) -> bool {
        !self.first
    }

    fn take_head(&self) -> Option<RequestHead> {
        self.parsed.borrow_mut().take()
    }

    fn log_line(&self) -> Option<&str> {
        Some(
            self.log_line
                .get_or_init(|| log_line(&self.method, &self.uri)),
        )
    }
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

/// Extracts the payload of a chunked body the session already validated.
#[derive(Default)]
struct Dechunk {
    state: DState,
    left: u64,
}

#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum DState {
    /// In the chunk-size line (size digits, then extensions up to LF).
    #[default]
    Size,
    SizeExt,
    Data,
    /// CRLF after a chunk's data.
    DataEnd,
    /// Trailer section after the last chunk: up to an empty line.
    Trailer {
        line_empty: bool,
    },
    Done,
}

struct BadChunk;

impl Dechunk {
    /// Feeds `input`; pushes the (offset, length) of payload pieces; true once the body ended.
    fn feed(&mut self, input: &[u8], out: &mut Vec<(usize, usize)>) -> Result<bool, BadChunk> {
        let mut i = 0;
        while i < input.len() {
            match self.state {
                DState::Size => {
                    let b = input[i];
                    match (b as char).to_digit(16) {
                        Some(d) => {
                            self.left = self
                                .left
                                .checked_mul(16)
                                .and_then(|v| v.checked_add(u64::from(d)))
                                .ok_or(BadChunk)?;
                        }
                        None if b == b'\n' => self.end_size_line(),
                        None => self.state = DState::SizeExt,
                    }
                    i += 1;
                }
                DState::SizeExt => {
                    if input[i] == b'\n' {
                        self.end_size_line();
                    }
                    i += 1;
                }
                DState::Data => {
                    let n = usize::try_from(self.left)
                        .map_or(input.len() - i, |l| l.min(input.len() - i));
                    out.push((i, n));
                    self.left -= n as u64;
                    i += n;
                    if self.left == 0 {
                        self.state = DState::DataEnd;
                    }
                }
                DState::DataEnd => {
                    if input[i] == b'\n' {
                        self.state = DState::Size;
                    }
                    i += 1;
                }
                DState::Trailer { line_empty } => {
                    match input[i] {
                        b'\n' if line_empty => self.state = DState::Done,
                        b'\n' => self.state = DState::Trailer { line_empty: true },
                        b'\r' => {}
                        _ => self.state = DState::Trailer { line_empty: false },
                    }
                    i += 1;
                }
                DState::Done => return Ok(true),
            }
        }
        Ok(self.state == DState::Done)
    }

    fn end_size_line(&mut self) {
        self.state = if self.left == 0 {
            DState::Trailer { line_empty: true }
        } else {
            DState::Data
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dechunk_all(input: &[u8], step: usize) -> (Vec<u8>, bool) {
        let mut d = Dechunk::default();
        let mut out = Vec::new();
        let mut done = false;
        for piece in input.chunks(step) {
            let mut p = Vec::new();
            done = d.feed(piece, &mut p).ok().unwrap_or(false);
            for (o, n) in p {
                out.extend_from_slice(&piece[o..o + n]);
            }
        }
        (out, done)
    }

    #[test]
    fn dechunk_any_split() {
        let body = b"5;ext=1\r\nhello\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nx-t: 1\r\n\r\n";
        for step in 1..body.len() {
            let (out, done) = dechunk_all(body, step);
            assert_eq!(out, b"helloabcdefghijklmnopqrstuvwxyz", "step {step}");
            assert!(done, "step {step}");
        }
        let (out, done) = dechunk_all(b"3\r\nabc\r\n", 4);
        assert_eq!(out, b"abc");
        assert!(!done);
        let (_, done) = dechunk_all(b"0\r\n\r\n", 1);
        assert!(done);
    }

    #[test]
    fn dechunk_refuses_huge_size() {
        let mut d = Dechunk::default();
        let mut p = Vec::new();
        assert!(d.feed(b"fffffffffffffffffffff\r\n", &mut p).is_err());
    }

    fn describe(c: &Converted) -> String {
        let mut out = format!("{} used={} ", c.status, c.used);
        for (n, v) in c.response.headers() {
            out.push_str(&format!("{}={:?};", n, v));
        }
        out.push_str(match &c.framing {
            None => " none",
            Some(Framing::Length(n)) => return format!("{out} len {n}"),
            Some(Framing::Chunked(_)) => " chunked",
            Some(Framing::UntilClose) => " close",
        });
        out
    }

    #[test]
    fn fast_head_matches_parser() {
        let cases: &[(&[u8], bool, &str)] = &[
            (
                b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\ncontent-length: 2\r\n\
                  connection: keep-alive\r\nx-m: a\r\nx-m:  b \t\r\n\r\nok",
                false,
                "200 used=107 content-type=\"text/plain\";content-length=\"2\";x-m=\"a\";\
                 x-m=\"b\"; len 2",
            ),
            (
                b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nok\r\n",
                false,
                "200 used=47  chunked",
            ),
            (
                b"HTTP/1.1 204 No Content\r\ncontent-length: 5\r\n\r\n",
                false,
                "204 used=46 content-length=\"5\"; none",
            ),
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\n",
                true,
                "200 used=39 content-length=\"10\"; none",
            ),
            (
                b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n",
                false,
                "200 used=38 content-length=\"0\"; none",
            ),
            (b"HTTP/1.0 200\r\n\r\n", false, "200 used=16  close"),
            (
                b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\n\r\n",
                false,
                "100 used=25  none",
            ),
        ];
        for (input, head_request, want) in cases {
            let fast = fast_head(input, *head_request).expect("fast path");
            let slow = slow_head(input, *head_request).unwrap().unwrap();
            assert_eq!(describe(&fast), *want, "{}", String::from_utf8_lossy(input));
            assert_eq!(describe(&slow), *want, "{}", String::from_utf8_lossy(input));
        }
        // Left to the parser, which decides as before.
        let odd: &[&[u8]] = &[
            b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\n\r\n",
            b"HTTP/1.0 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 01\r\n\r\n",
            b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nx-a: 1\r\n  folded\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nx-a: 1\nx-b: 2\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nbad name: 1\r\n\r\n",
            b"HTTP/1.1 099 Odd\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nx-a: 1\r\n",
        ];
        for input in odd {
            assert!(
                fast_head(input, false).is_none(),
                "{}",
                String::from_utf8_lossy(input)
            );
        }
        // Codings but chunked are refused (HAProxy 2.6); chunked HTTP/1.0 is taken.
        assert!(slow_head(odd[0], false).is_err());
        assert!(slow_head(odd[1], false).unwrap().is_some());
        assert!(slow_head(odd[8], false).unwrap().is_none());
    }

    fn parts(method: &str, uri: &str, fields: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::builder().method(method).uri(uri);
        for (n, v) in fields {
            b = b.header(*n, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    #[test]
    fn direct_head_matches_parser() {
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
        ];
        for (i, p) in cases.iter().enumerate() {
            for end in [true, false] {
                let (direct, chunked) = direct_head(p, end).unwrap_or_else(|| panic!("case {i}"));
                let (text, chunked_text) = request_head(p, end);
                let (parsed, used) = h1::parse_request_head(&text, &Limits::default())
                    .unwrap()
                    .unwrap();
                assert_eq!(used, text.len());
                assert_eq!(chunked, chunked_text);
                assert_eq!(direct, parsed, "case {i} end {end}");
            }
        }
        let (h, _) = direct_head(&cases[1], false).unwrap();
        assert_eq!(h.target, "/p?q=1");
        assert_eq!(
            h.headers.get_all("cookie").collect::<Vec<_>>(),
            [b"a=1; b=2"]
        );
    }

    #[test]
    fn direct_head_leaves_the_unusual_to_the_parser() {
        let many: Vec<(String, String)> =
            (0..101).map(|i| (format!("x-{i}"), "v".into())).collect();
        let many: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
        let odd = [
            // OWS the parser would trim.
            parts("GET", "https://example.local/", &[("x-a", " v")]),
            parts("GET", "https://example.local/", &many),
            parts(
                "GET",
                "https://example.local/",
                &[("x-big", &"v".repeat(17000))],
            ),
        ];
        for (i, p) in odd.iter().enumerate() {
            assert!(direct_head(p, true).is_none(), "case {i}");
        }
        // No :authority: HTTP/1.1 gets an empty Host, by both paths.
        let bare = parts("GET", "/", &[]);
        let (text, _) = request_head(&bare, true);
        let (head, _) = h1::parse_request_head(&text, &Limits::default())
            .expect("parses")
            .expect("whole");
        assert_eq!(head.headers.get_all("host").next(), Some(&b""[..]));
        let (fast, _) = direct_head(&bare, true).expect("fast path");
        assert_eq!(fast.headers.get_all("host").next(), Some(&b""[..]));
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
