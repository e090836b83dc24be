//! The responses HAProxy 2.6 generates itself: canned error pages, redirects, `http-request
//! return` replies and reason phrases, built as [`Page`]s (a structured head and its body),
//! which each client side sends in its own protocol. Pure. Their HTTP/1 text ([`Page::wire`])
//! is held byte for byte against HAProxy's captures in the tests.
//!
//! Captured from HAProxy 2.6.12 on 127.0.0.1 with raw sockets (the tests hold the bytes):
//!
//! - Every canned page has one shape: `HTTP/1.1 <code> <page reason>`, then `content-length`,
//!   `cache-control: no-cache`, `content-type: text/html`, a blank line and
//!   `<html><body><h1><code> <page reason></h1>\n<message>\n</body></html>\n`. Header names are
//!   lowercase because the H1 mux rewrites them. All 18 pages (200 400 401 403 404 405 407 408 410
//!   413 421 425 429 500 501 502 503 504) were captured through `http-request deny deny_status N`;
//!   401 (`http-request auth`), 500 (failed header rewrite, and `tarpit`), 502 (garbage from the
//!   server), 503 (refused connect with `retries 0`, and a backend without servers) and 504
//!   (`timeout server`) were also caught live and are byte-identical. `deny_status` with any other
//!   code is a config error: `status code '418' not handled by default with 'default-errorfiles'
//!   argument.`
//! - The page reason is not always [`reason`]: 400 `Bad request`, 407 `Unauthorized`, 413 `Payload
//!   Too Large`, 502 `Bad Gateway` (reason() says `Bad Request`, `Proxy Authentication Required`,
//!   `Request Entity Too Large`, `Bad Gateway or Proxy Error`). The 501 message starts with a dot.
//! - 400 on a parse error and 408 on `timeout http-request` come straight from the H1 mux, unlike
//!   the others: header names keep their case (`Content-length`, `Cache-Control`, `Connection:
//!   close`, `Content-Type`) and the connection is always closed. A 408 is sent even when the
//!   client sent nothing on a fresh connection; an idle kept-alive connection is closed silently.
//!   Through `deny_status 400/408` the lowercase page gets `connection: close` last, and closes.
//! - Everything else keeps an HTTP/1.1 connection open: deny 403, 429, 500, 502, 503, 504, auth
//!   401, redirects and `return` all answered a second request on the same connection, with no
//!   `connection` header. The header is added last by the mux: `connection: close` when the client
//!   asked for close, or sent HTTP/1.0 without keep-alive; `connection: keep-alive` when an HTTP/1.0
//!   client sent `Connection: keep-alive` (the connection then stays open).
//! - A redirect on a request with a body (`Content-Length: 5`, or chunked) gets `connection: close`
//!   and the connection is closed; deny and `return` keep it open in the same case.
//! - Redirects: `content-length: 0`, `location`, then `cache-control: no-cache` for 302, 303 and
//!   307 only. Status lines: 301 `Moved Permanently`, 302 `Found`, 303 `See Other`, 307
//!   `Temporary Redirect`, 308 `Permanent Redirect`.
//! - `http-request return`: `content-length` then `content-type` (when given); no canned page, so
//!   `return status 404` without a body is `content-length: 0`. 204 has no `content-length` at
//!   all; 304 has `content-length: 0`; a body with either is a config error (`No body expected for
//!   204 responses.`). Headers added with `hdr` come before `content-length` (not modelled here).
//! - HEAD: same headers (the `content-length` of the page) and no body.

use crate::http::head::{Headers, ResponseHead, Version};

/// A canned page: code, the reason on its status line and `<h1>`, and its message line.
const PAGES: [(u16, &str, &str); 19] = [
    (200, "OK", "Service ready."),
    (400, "Bad request", "Your browser sent an invalid request."),
    (
        401,
        "Unauthorized",
        "You need a valid user and password to access this content.",
    ),
    (
        403,
        "Forbidden",
        "Request forbidden by administrative rules.",
    ),
    (404, "Not Found", "The resource could not be found."),
    (
        405,
        "Method Not Allowed",
        "A request was made of a resource using a request method not supported by that resource",
    ),
    (
        407,
        "Unauthorized",
        "You need a valid user and password to access this content.",
    ),
    (
        408,
        "Request Time-out",
        "Your browser didn't send a complete request in time.",
    ),
    (
        410,
        "Gone",
        "The resource is no longer available and will not be available again.",
    ),
    (
        413,
        "Payload Too Large",
        "The request entity exceeds the maximum allowed.",
    ),
    (
        421,
        "Misdirected Request",
        "Request sent to a non-authoritative server.",
    ),
    (
        422,
        "Unprocessable Content",
        "The server cannot process the contained instructions.",
    ),
    (425, "Too Early", "Your browser sent early data."),
    (
        429,
        "Too Many Requests",
        "You have sent too many requests in a given amount of time.",
    ),
    (
        500,
        "Internal Server Error",
        "An internal server error occurred.",
    ),
    (
        501,
        "Not Implemented",
        ".The server does not support the functionality required to fulfill the request.",
    ),
    (
        502,
        "Bad Gateway",
        "The server returned an invalid or incomplete response.",
    ),
    (
        503,
        "Service Unavailable",
        "No server is available to handle this request.",
    ),
    (
        504,
        "Gateway Time-out",
        "The server didn't respond in time.",
    ),
];

/// HAProxy answers codes without a page of their own with the 500 page.
const FALLBACK: u16 = 500;

/// Built once: the keep-alive form of each page, plus the mux forms of 400 and 408 (their
/// HTTP/1 text, which the tests hold against HAProxy's captures).
#[cfg(test)]
struct Built {
    pages: Vec<(u16, Vec<u8>)>,
    mux_400: Vec<u8>,
    mux_408: Vec<u8>,
}

#[cfg(test)]
static BUILT: std::sync::LazyLock<Built> = std::sync::LazyLock::new(|| Built {
    pages: PAGES
        .iter()
        .map(|&(code, why, msg)| (code, page(code, why, msg, false)))
        .collect(),
    mux_400: mux_page(400),
    mux_408: mux_page(408),
});

fn body(code: u16, why: &str, msg: &str) -> String {
    format!("<html><body><h1>{code} {why}</h1>\n{msg}\n</body></html>\n")
}

/// A response the proxy makes itself, whole: its head (names as HAProxy writes them) and its
/// body as HTTP/1 frames it (chunked for the stats page and Lua services, else as is). An
/// HTTP/1 client gets [`Page::wire`]; an HTTP/2 one the head and the body's payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    pub head: ResponseHead,
    pub body: Vec<u8>,
}

impl Page {
    /// An HTTP/1.1 head with `status` and `why`, no field, no body.
    pub fn new(status: u16, why: &str) -> Page {
        Page {
            head: ResponseHead {
                version: Version::Http11,
                status,
                reason: why.to_owned(),
                headers: Headers::default(),
            },
            body: Vec::new(),
        }
    }

    /// Appends a field; CR, LF and NUL are dropped so a value cannot split the head.
    pub fn field(&mut self, name: &str, value: &[u8]) {
        let clean: Vec<u8> = value
            .iter()
            .copied()
            .filter(|b| !matches!(b, b'\r' | b'\n' | 0))
            .collect();
        self.head.headers.append(name, clean);
    }

    /// A response made as HTTP/1 text (an errorfile, the stats page, a Lua service): the
    /// head's lines as written, the rest as its body. None without a whole head.
    pub fn parse(wire: &[u8]) -> Option<Page> {
        let end = header_end(wire)?;
        let mut lines = wire.get(..end - 4)?.split(|&b| b == b'\n');
        let start = lines.next()?;
        let start = start.strip_suffix(b"\r").unwrap_or(start);
        let version = match start.get(..9)? {
            b"HTTP/1.0 " => Version::Http10,
            _ => Version::Http11,
        };
        let status = std::str::from_utf8(start.get(9..12)?).ok()?.parse().ok()?;
        let reason = start.get(13..).unwrap_or_default();
        let mut head = ResponseHead {
            version,
            status,
            reason: String::from_utf8_lossy(reason).into_owned(),
            headers: Headers::default(),
        };
        for l in lines {
            let l = l.strip_suffix(b"\r").unwrap_or(l);
            let colon = l.iter().position(|&b| b == b':')?;
            let name = std::str::from_utf8(l.get(..colon)?).ok()?;
            let value = l.get(colon + 1..)?.trim_ascii();
            head.headers.append(name, value);
        }
        Some(Page {
            head,
            body: wire.get(end..).unwrap_or_default().to_vec(),
        })
    }

    /// The bytes an HTTP/1 client gets.
    pub fn wire(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(256 + self.body.len());
        crate::http::h1::write_reply_head(&self.head, &mut out);
        out.extend_from_slice(&self.body);
        out
    }

    /// `conn`'s header, last (the H1 mux adds it).
    pub fn set_connection(&mut self, conn: ConnHeader) {
        match conn {
            ConnHeader::None => {}
            ConnHeader::Close => self.head.headers.append("connection", "close"),
            ConnHeader::KeepAlive => self.head.headers.append("connection", "keep-alive"),
        }
    }

    /// The answer to a HEAD request: the same head, no body.
    pub fn head_only(&mut self) {
        self.body = Vec::new();
    }

    /// Its body is chunked on HTTP/1.
    pub fn chunked(&self) -> bool {
        self.head
            .headers
            .get_all("transfer-encoding")
            .any(|v| v.eq_ignore_ascii_case(b"chunked"))
    }
}

fn page_of(code: u16, why: &str, msg: &str, close: bool) -> Page {
    let body = body(code, why, msg);
    let mut p = Page::new(code, why);
    p.field("content-length", body.len().to_string().as_bytes());
    p.field("cache-control", b"no-cache");
    p.field("content-type", b"text/html");
    if close {
        p.field("connection", b"close");
    }
    p.body = body.into_bytes();
    p
}

#[cfg(test)]
fn page(code: u16, why: &str, msg: &str, close: bool) -> Vec<u8> {
    page_of(code, why, msg, close).wire()
}

/// The form the H1 mux writes itself (parse errors, request timeout): HAProxy's raw
/// `http_err_msgs`, original header case; only 400 and 408 carry `Connection: close` there
/// (the mux closes after any of them).
fn mux_page_of(code: u16) -> Page {
    let (code, why, msg) = entry(code);
    let body = body(code, why, msg);
    let mut p = Page::new(code, why);
    p.field("Content-length", body.len().to_string().as_bytes());
    p.field("Cache-Control", b"no-cache");
    if matches!(code, 400 | 408) {
        p.field("Connection", b"close");
    }
    p.field("Content-Type", b"text/html");
    p.body = body.into_bytes();
    p
}

#[cfg(test)]
fn mux_page(code: u16) -> Vec<u8> {
    mux_page_of(code).wire()
}

/// What the H1 mux sends for a message it could not parse with `status` (413, 422, 501…):
/// the raw page, then it closes.
#[cfg(test)]
pub fn mux_response(status: u16) -> Vec<u8> {
    mux_page(status)
}

/// What the H1 mux sends for a message it could not parse with `status` (400, 408, 413,
/// 422, 501…): HAProxy's raw page, header names in their case; the connection then closes.
pub fn mux_page_for(status: u16) -> Page {
    mux_page_of(status)
}

fn entry(status: u16) -> (u16, &'static str, &'static str) {
    let found = PAGES.iter().find(|p| p.0 == status);
    let fallback = PAGES.iter().find(|p| p.0 == FALLBACK);
    found.or(fallback).copied().unwrap_or((500, "", ""))
}

/// Whether HAProxy has a canned page for `status`, i.e. whether `deny_status`/`errorfile`-less
/// use of it is accepted by the config parser.
pub fn has_error_page(status: u16) -> bool {
    PAGES.iter().any(|p| p.0 == status)
}

/// The exact bytes HAProxy sends for its own `status` error on a connection it keeps open.
/// 400 and 408 are the H1 mux forms (parse error, `timeout http-request`), which always close
/// and carry `Connection: close`. A status without a page gives the 500 page.
#[cfg(test)]
pub fn error_response(status: u16) -> &'static [u8] {
    let built = &*BUILT;
    match status {
        400 => &built.mux_400,
        408 => &built.mux_408,
        _ => {
            let code = if has_error_page(status) {
                status
            } else {
                FALLBACK
            };
            built
                .pages
                .iter()
                .find(|p| p.0 == code)
                .map_or(&[][..], |p| p.1.as_slice())
        }
    }
}

/// The canned page as sent through the stream (`http-request deny [deny_status N]`, `tarpit`,
/// 5xx), with `connection: close` last when `close`. 400 and 408 always close, as in HAProxy.
#[cfg(test)]
pub fn deny_response(status: u16, close: bool) -> Vec<u8> {
    let (code, why, msg) = entry(status);
    page(code, why, msg, close || code == 400 || code == 408)
}

/// The 401 of `http-request auth realm <realm>`: the 401 page plus `www-authenticate` last.
#[cfg(test)]
pub fn auth_response(realm: &str, close: bool) -> Vec<u8> {
    auth_page(realm, close).wire()
}

/// The 401 of `http-request auth realm <realm>`: the 401 page plus `www-authenticate` last.
pub fn auth_page(realm: &str, close: bool) -> Page {
    let (code, why, msg) = entry(401);
    let mut p = page_of(code, why, msg, false);
    let mut v = b"Basic realm=\"".to_vec();
    v.extend_from_slice(realm.as_bytes());
    v.push(b'"');
    p.field("www-authenticate", &v);
    if close {
        p.field("connection", b"close");
    }
    p
}

/// An `http-request redirect ... code <code>` reply. HAProxy only accepts 301, 302, 303, 307 and
/// 308; other codes are rendered like 302 with [`reason`]. CR, LF and NUL are dropped from
/// `location` so a bad value cannot split the header block.
#[cfg(test)]
pub fn redirect_response(code: u16, location: &str, close: bool) -> Vec<u8> {
    redirect_page(code, location, close).wire()
}

/// An `http-request redirect ... code <code>` reply (301, 302, 303, 307, 308; another code is
/// rendered like 302 with [`reason`]); CR, LF and NUL are dropped from `location`.
pub fn redirect_page(code: u16, location: &str, close: bool) -> Page {
    let why = match code {
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        _ => reason(code),
    };
    let mut p = Page::new(code, why);
    p.field("content-length", b"0");
    p.field("location", location.as_bytes());
    // Permanent redirects may be cached; the others are marked no-cache.
    if !matches!(code, 301 | 308) {
        p.field("cache-control", b"no-cache");
    }
    if close {
        p.field("connection", b"close");
    }
    p
}

/// An `http-request return status <status> [content-type <ct>] [string|file ...]` reply. The body
/// is dropped for 204 (which has no `content-length`) and 304, where HAProxy refuses one.
pub fn return_response(
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
    close: bool,
) -> Vec<u8> {
    return_page(status, content_type, body, &[], close).wire()
}

/// [`return_response`] with `hdr` lines, which HAProxy places first.
#[cfg(test)]
pub fn return_response_with(
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
    headers: &[(String, String)],
    close: bool,
) -> Vec<u8> {
    return_page(status, content_type, body, headers, close).wire()
}

/// An `http-request return status <status> [content-type <ct>] [hdr …] [string|file ...]`
/// reply: `hdr` lines first; no body for 204 (which has no `content-length`) and 304.
pub fn return_page(
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
    headers: &[(String, String)],
    close: bool,
) -> Page {
    let body = if matches!(status, 204 | 304) {
        &[][..]
    } else {
        body
    };
    let mut p = Page::new(status, reason(status));
    for (n, v) in headers {
        let name: String = n
            .chars()
            .filter(|c| !matches!(c, '\r' | '\n' | '\0'))
            .collect();
        p.field(&name, v.as_bytes());
    }
    if status != 204 {
        p.field("content-length", body.len().to_string().as_bytes());
    }
    if let Some(ct) = content_type {
        p.field("content-type", ct.as_bytes());
    }
    if close {
        p.field("connection", b"close");
    }
    p.body = body.to_vec();
    p
}

/// The `connection` header the H1 mux adds last to a response it generates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnHeader {
    /// HTTP/1.1 kept alive: no header.
    None,
    /// `connection: close`; the connection is closed after the response.
    Close,
    /// `connection: keep-alive`, for an HTTP/1.0 client that asked for keep-alive.
    KeepAlive,
}

impl ConnHeader {
    /// The header for a response on a connection that HAProxy closes after it (`closing`), or
    /// else keeps, given the request's version and whether it asked for keep-alive.
    pub fn for_reply(http10: bool, client_keep_alive: bool, closing: bool) -> Self {
        if closing || (http10 && !client_keep_alive) {
            ConnHeader::Close
        } else if http10 {
            ConnHeader::KeepAlive
        } else {
            ConnHeader::None
        }
    }
}

/// `resp` with `conn`'s header inserted last in its header block. Meant for the lowercase
/// responses built here (not the mux 400/408 of `error_response`, which already close).
/// Bytes without a header block end are returned unchanged.
#[cfg(test)]
pub fn with_connection(resp: &[u8], conn: ConnHeader) -> Vec<u8> {
    let line: &[u8] = match conn {
        ConnHeader::None => b"",
        ConnHeader::Close => b"connection: close\r\n",
        ConnHeader::KeepAlive => b"connection: keep-alive\r\n",
    };
    match header_end(resp) {
        // Insert before the blank line that ends the header block.
        Some(end) => match resp.split_at_checked(end - 2) {
            Some((head, rest)) => [head, line, rest].concat(),
            None => resp.to_vec(),
        },
        None => resp.to_vec(),
    }
}

/// A configured page (`errorfile`, `errorloc*`, `errorfiles`) as HAProxy 2.6's H1 mux sends
/// it: the status line as written, header names lowercased, the file's `connection` headers
/// dropped and the mux's own added last, then the body. Returns the bytes and whether the
/// connection must close after them: asked to, the page says `Connection: close`, or it has no
/// `content-length` (its body then ends at the close). An empty file sends nothing and closes.
///
/// Captured from HAProxy 2.6.12: Debian's `503.http` (HTTP/1.0, `Connection: close`, no length)
/// goes out as `HTTP/1.0 503 Service Unavailable\r\ncache-control: no-cache\r\ncontent-type:
/// text/html\r\n\r\n<body>` and closes; an HTTP/1.0 page with a length to an HTTP/1.1 client
/// kept alive gets `connection: keep-alive`; `errorloc302` goes out as `HTTP/1.1 302 Found`,
/// `cache-control`, `content-length: 0`, `location`, kept alive.
pub fn custom_page(raw: &[u8], conn: ConnHeader) -> (Vec<u8>, bool) {
    let Some(end) = raw
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i + 1, i + 2))
        .into_iter()
        .chain(
            raw.windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|i| (i + 2, i + 4)),
        )
        .min_by_key(|(head, _)| *head)
    else {
        return (Vec::new(), true);
    };
    let (head_end, body_at) = end;
    let head = raw.get(..head_end).unwrap_or_default();
    let body = raw.get(body_at..).unwrap_or_default();
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l))
        .filter(|l| !l.is_empty());
    let status_line = lines.next().unwrap_or_default();
    let v10 = status_line.starts_with(b"HTTP/1.0");
    let status: u16 = std::str::from_utf8(status_line.get(9..12).unwrap_or_default())
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let mut out = status_line.to_vec();
    out.extend_from_slice(b"\r\n");
    let mut has_len = matches!(status, 204 | 304);
    // The page's own `Connection: close` makes the mux close after it.
    let mut page_close = false;
    for l in lines {
        let Some(colon) = l.iter().position(|&b| b == b':') else {
            continue;
        };
        let name = l[..colon].trim_ascii().to_ascii_lowercase();
        let value = l[colon + 1..].trim_ascii();
        if name == b"connection" {
            page_close |= value.to_ascii_lowercase().windows(5).any(|w| w == b"close");
            continue;
        }
        has_len |= name == b"content-length";
        out.extend_from_slice(&name);
        out.extend_from_slice(b": ");
        out.extend_from_slice(value);
        out.extend_from_slice(b"\r\n");
    }
    let close = conn == ConnHeader::Close || !has_len || page_close;
    let line: &[u8] = match (v10, close) {
        (true, false) => b"connection: keep-alive\r\n",
        (true, true) => b"",
        (false, true) => b"connection: close\r\n",
        (false, false) if conn == ConnHeader::KeepAlive => b"connection: keep-alive\r\n",
        (false, false) => b"",
    };
    out.extend_from_slice(line);
    out.extend_from_slice(b"\r\n");
    out.extend_from_slice(body);
    (out, close)
}

/// The reply for an error HAProxy generates: the first configured page among `pages` (the
/// backend's, then the frontend's, as HAProxy looks them up), else the canned page. Returns the
/// bytes and whether the connection must close after them.
#[cfg(test)]
pub fn reply_for(
    pages: &[&crate::config::model::ProxyExtra],
    status: u16,
    conn: ConnHeader,
) -> (Vec<u8>, bool) {
    if let Some(raw) = pages.iter().find_map(|p| p.error_page(status)) {
        return custom_page(raw, conn);
    }
    match status {
        400 | 408 => (error_response(status).to_vec(), true),
        _ => (
            with_connection(error_response(status), conn),
            conn == ConnHeader::Close,
        ),
    }
}

/// The reply for an error HAProxy generates: the first configured page among `pages` (the
/// backend's, then the frontend's, as HAProxy looks them up), else the canned page, with
/// `conn`'s header; and whether the connection must close after it. None when the configured
/// page is empty (nothing is sent).
pub fn reply_page_for(
    pages: &[&crate::config::model::ProxyExtra],
    status: u16,
    conn: ConnHeader,
) -> (Option<Page>, bool) {
    if let Some(raw) = pages.iter().find_map(|p| p.error_page(status)) {
        let (wire, close) = custom_page(raw, conn);
        return (Page::parse(&wire), close);
    }
    match status {
        400 | 408 => (Some(mux_page_of(status)), true),
        _ => {
            let (code, why, msg) = entry(status);
            let mut p = page_of(code, why, msg, false);
            p.set_connection(conn);
            (Some(p), conn == ConnHeader::Close)
        }
    }
}

/// The reply to a HEAD request: the same head (including `content-length`), no body.
#[cfg(test)]
pub fn head_only(resp: &[u8]) -> &[u8] {
    match header_end(resp) {
        Some(end) => resp.get(..end).unwrap_or(resp),
        None => resp,
    }
}

/// HAProxy's reason phrase for `status` (as in `http-request return` and its logs).
pub fn reason(status: u16) -> &'static str {
    if let Some(known) = known_reason(status) {
        return known;
    }
    match status {
        100..=199 => "Informational",
        200..=299 => "Success",
        300..=399 => "Redirection",
        400..=499 => "Client Error",
        500..=599 => "Server Error",
        _ => "Other",
    }
}

fn known_reason(status: u16) -> Option<&'static str> {
    Some(match status {
        100 => "Continue",
        101 => "Switching Protocols",
        102 => "Processing",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        203 => "Non-Authoritative Information",
        204 => "No Content",
        205 => "Reset Content",
        206 => "Partial Content",
        207 => "Multi-Status",
        210 => "Content Different",
        226 => "IM Used",
        300 => "Multiple Choices",
        301 => "Moved Permanently",
        302 => "Moved Temporarily",
        303 => "See Other",
        304 => "Not Modified",
        305 => "Use Proxy",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        310 => "Too many Redirects",
        400 => "Bad Request",
        401 => "Unauthorized",
        402 => "Payment Required",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        407 => "Proxy Authentication Required",
        408 => "Request Time-out",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Request Entity Too Large",
        414 => "Request-URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Requested range unsatisfiable",
        417 => "Expectation failed",
        418 => "I'm a teapot",
        421 => "Misdirected Request",
        422 => "Unprocessable Content",
        423 => "Locked",
        424 => "Method failure",
        425 => "Too Early",
        426 => "Upgrade Required",
        428 => "Precondition Required",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        449 => "Retry With",
        450 => "Blocked by Windows Parental Controls",
        451 => "Unavailable For Legal Reasons",
        456 => "Unrecoverable Error",
        499 => "client has closed connection",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway or Proxy Error",
        503 => "Service Unavailable",
        504 => "Gateway Time-out",
        505 => "HTTP Version not supported",
        506 => "Variant also negotiate",
        507 => "Insufficient storage",
        508 => "Loop detected",
        509 => "Bandwidth Limit Exceeded",
        510 => "Not extended",
        511 => "Network authentication required",
        520 => "Web server is returning an unknown error",
        _ => return None,
    })
}

/// Offset just past the `\r\n\r\n` that ends the header block.
fn header_end(resp: &[u8]) -> Option<usize> {
    resp.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

#[cfg(test)]
mod tests {

    /// Bytes HAProxy 2.6.12 sent on 127.0.0.1 for these error files (see `custom_page`).
    #[test]
    fn configured_pages_as_haproxys_mux_sends_them() {
        let debian = b"HTTP/1.0 503 Service Unavailable\r\nCache-Control: no-cache\r\nConnection: close\r\nContent-Type: text/html\r\n\r\n<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this request.\n</body></html>\n\n";
        let (b, close) = custom_page(debian, ConnHeader::None);
        assert_eq!(
            b,
            b"HTTP/1.0 503 Service Unavailable\r\ncache-control: no-cache\r\ncontent-type: text/html\r\n\r\n<html><body><h1>503 Service Unavailable</h1>\nNo server is available to handle this request.\n</body></html>\n\n"
        );
        assert!(close);
        let (b, close) = custom_page(
            b"HTTP/1.0 503 Oops\r\nContent-Length: 3\r\n\r\nabc",
            ConnHeader::None,
        );
        assert_eq!(
            b,
            b"HTTP/1.0 503 Oops\r\ncontent-length: 3\r\nconnection: keep-alive\r\n\r\nabc"
        );
        assert!(!close);
        let (b, close) = custom_page(
            b"HTTP/1.1 302 Found\r\nCache-Control: no-cache\r\nContent-length: 0\r\nLocation: http://example.com/x\r\n\r\n",
            ConnHeader::None,
        );
        assert_eq!(
            b,
            b"HTTP/1.1 302 Found\r\ncache-control: no-cache\r\ncontent-length: 0\r\nlocation: http://example.com/x\r\n\r\n"
        );
        assert!(!close);
        assert_eq!(custom_page(b"", ConnHeader::None), (Vec::new(), true));
    }
    use super::*;

    // Raw bytes captured from HAProxy 2.6.12 (see the module doc for the configs used).
    // MUX_*: malformed request / `timeout http-request`; DENY_*: `http-request deny deny_status N`
    // with `GET /a?b=1 HTTP/1.1` + `Host: h.example:8080` unless the name says otherwise.
    const MUX_400: &[u8] = b"HTTP/1.1 400 Bad request\r\n\
        Content-length: 90\r\n\
        Cache-Control: no-cache\r\n\
        Connection: close\r\n\
        Content-Type: text/html\r\n\
        \r\n\
        <html><body><h1>400 Bad request</h1>\n\
        Your browser sent an invalid request.\n\
        </body></html>\n";
    const MUX_408: &[u8] = b"HTTP/1.1 408 Request Time-out\r\n\
        Content-length: 110\r\n\
        Cache-Control: no-cache\r\n\
        Connection: close\r\n\
        Content-Type: text/html\r\n\
        \r\n\
        <html><body><h1>408 Request Time-out</h1>\n\
        Your browser didn't send a complete request in time.\n\
        </body></html>\n";
    const DENY_200: &[u8] = b"HTTP/1.1 200 OK\r\n\
        content-length: 58\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>200 OK</h1>\n\
        Service ready.\n\
        </body></html>\n";
    const DENY_400: &[u8] = b"HTTP/1.1 400 Bad request\r\n\
        content-length: 90\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        connection: close\r\n\
        \r\n\
        <html><body><h1>400 Bad request</h1>\n\
        Your browser sent an invalid request.\n\
        </body></html>\n";
    const DENY_401: &[u8] = b"HTTP/1.1 401 Unauthorized\r\n\
        content-length: 112\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>401 Unauthorized</h1>\n\
        You need a valid user and password to access this content.\n\
        </body></html>\n";
    const DENY_403: &[u8] = b"HTTP/1.1 403 Forbidden\r\n\
        content-length: 93\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>403 Forbidden</h1>\n\
        Request forbidden by administrative rules.\n\
        </body></html>\n";
    const DENY_404: &[u8] = b"HTTP/1.1 404 Not Found\r\n\
        content-length: 83\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>404 Not Found</h1>\n\
        The resource could not be found.\n\
        </body></html>\n";
    const DENY_405: &[u8] = b"HTTP/1.1 405 Method Not Allowed\r\n\
        content-length: 146\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>405 Method Not Allowed</h1>\n\
        A request was made of a resource using a request method not supported by that resource\n\
        </body></html>\n";
    const DENY_407: &[u8] = b"HTTP/1.1 407 Unauthorized\r\n\
        content-length: 112\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>407 Unauthorized</h1>\n\
        You need a valid user and password to access this content.\n\
        </body></html>\n";
    const DENY_408: &[u8] = b"HTTP/1.1 408 Request Time-out\r\n\
        content-length: 110\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        connection: close\r\n\
        \r\n\
        <html><body><h1>408 Request Time-out</h1>\n\
        Your browser didn't send a complete request in time.\n\
        </body></html>\n";
    const DENY_410: &[u8] = b"HTTP/1.1 410 Gone\r\n\
        content-length: 114\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>410 Gone</h1>\n\
        The resource is no longer available and will not be available again.\n\
        </body></html>\n";
    const DENY_413: &[u8] = b"HTTP/1.1 413 Payload Too Large\r\n\
        content-length: 106\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>413 Payload Too Large</h1>\n\
        The request entity exceeds the maximum allowed.\n\
        </body></html>\n";
    const DENY_421: &[u8] = b"HTTP/1.1 421 Misdirected Request\r\n\
        content-length: 104\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>421 Misdirected Request</h1>\n\
        Request sent to a non-authoritative server.\n\
        </body></html>\n";
    const DENY_425: &[u8] = b"HTTP/1.1 425 Too Early\r\n\
        content-length: 80\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>425 Too Early</h1>\n\
        Your browser sent early data.\n\
        </body></html>\n";
    const DENY_429: &[u8] = b"HTTP/1.1 429 Too Many Requests\r\n\
        content-length: 117\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>429 Too Many Requests</h1>\n\
        You have sent too many requests in a given amount of time.\n\
        </body></html>\n";
    const DENY_500: &[u8] = b"HTTP/1.1 500 Internal Server Error\r\n\
        content-length: 97\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>500 Internal Server Error</h1>\n\
        An internal server error occurred.\n\
        </body></html>\n";
    const DENY_501: &[u8] = b"HTTP/1.1 501 Not Implemented\r\n\
        content-length: 136\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>501 Not Implemented</h1>\n\
        .The server does not support the functionality required to fulfill the request.\n\
        </body></html>\n";
    const DENY_502: &[u8] = b"HTTP/1.1 502 Bad Gateway\r\n\
        content-length: 107\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>502 Bad Gateway</h1>\n\
        The server returned an invalid or incomplete response.\n\
        </body></html>\n";
    const DENY_503: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
        content-length: 107\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>503 Service Unavailable</h1>\n\
        No server is available to handle this request.\n\
        </body></html>\n";
    const DENY_504: &[u8] = b"HTTP/1.1 504 Gateway Time-out\r\n\
        content-length: 92\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n\
        <html><body><h1>504 Gateway Time-out</h1>\n\
        The server didn't respond in time.\n\
        </body></html>\n";
    const AUTH_401: &[u8] = b"HTTP/1.1 401 Unauthorized\r\n\
        content-length: 112\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        www-authenticate: Basic realm=\"test\"\r\n\
        \r\n\
        <html><body><h1>401 Unauthorized</h1>\n\
        You need a valid user and password to access this content.\n\
        </body></html>\n";
    const REDIR_301: &[u8] = b"HTTP/1.1 301 Moved Permanently\r\n\
        content-length: 0\r\n\
        location: https://h.example:8080/a?b=1\r\n\
        \r\n";
    const REDIR_302: &[u8] = b"HTTP/1.1 302 Found\r\n\
        content-length: 0\r\n\
        location: /new\r\n\
        cache-control: no-cache\r\n\
        \r\n";
    const REDIR_303: &[u8] = b"HTTP/1.1 303 See Other\r\n\
        content-length: 0\r\n\
        location: /new\r\n\
        cache-control: no-cache\r\n\
        \r\n";
    const REDIR_307: &[u8] = b"HTTP/1.1 307 Temporary Redirect\r\n\
        content-length: 0\r\n\
        location: /new\r\n\
        cache-control: no-cache\r\n\
        \r\n";
    const REDIR_308: &[u8] = b"HTTP/1.1 308 Permanent Redirect\r\n\
        content-length: 0\r\n\
        location: https://x.example/a?b=1\r\n\
        \r\n";
    const REDIR_301_HTTP10: &[u8] = b"HTTP/1.1 301 Moved Permanently\r\n\
        content-length: 0\r\n\
        location: https://h.example:8080/a?b=1\r\n\
        connection: close\r\n\
        \r\n";
    const REDIR_301_HTTP10_KA: &[u8] = b"HTTP/1.1 301 Moved Permanently\r\n\
        content-length: 0\r\n\
        location: https://h.example:8080/a?b=1\r\n\
        connection: keep-alive\r\n\
        \r\n";
    const REDIR_302_BODY: &[u8] = b"HTTP/1.1 302 Found\r\n\
        content-length: 0\r\n\
        location: /new\r\n\
        cache-control: no-cache\r\n\
        connection: close\r\n\
        \r\n";
    const RETURN_HELLO: &[u8] = b"HTTP/1.1 200 OK\r\n\
        content-length: 5\r\n\
        content-type: text/plain\r\n\
        \r\n\
        hello";
    const RETURN_HELLO_CLOSE: &[u8] = b"HTTP/1.1 200 OK\r\n\
        content-length: 5\r\n\
        content-type: text/plain\r\n\
        connection: close\r\n\
        \r\n\
        hello";
    const RETURN_404_EMPTY: &[u8] = b"HTTP/1.1 404 Not Found\r\n\
        content-length: 0\r\n\
        \r\n";
    const RETURN_503_JSON: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\n\
        content-length: 2\r\n\
        content-type: application/json\r\n\
        \r\n\
        {}";
    const DENY_403_HTTP10: &[u8] = b"HTTP/1.1 403 Forbidden\r\n\
        content-length: 93\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        connection: close\r\n\
        \r\n\
        <html><body><h1>403 Forbidden</h1>\n\
        Request forbidden by administrative rules.\n\
        </body></html>\n";
    const DENY_403_HTTP10_KA: &[u8] = b"HTTP/1.1 403 Forbidden\r\n\
        content-length: 93\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        connection: keep-alive\r\n\
        \r\n\
        <html><body><h1>403 Forbidden</h1>\n\
        Request forbidden by administrative rules.\n\
        </body></html>\n";
    const HEAD_403: &[u8] = b"HTTP/1.1 403 Forbidden\r\n\
        content-length: 93\r\n\
        cache-control: no-cache\r\n\
        content-type: text/html\r\n\
        \r\n";

    const DENIED: [(u16, &[u8]); 18] = [
        (200, DENY_200),
        (400, DENY_400),
        (401, DENY_401),
        (403, DENY_403),
        (404, DENY_404),
        (405, DENY_405),
        (407, DENY_407),
        (408, DENY_408),
        (410, DENY_410),
        (413, DENY_413),
        (421, DENY_421),
        (425, DENY_425),
        (429, DENY_429),
        (500, DENY_500),
        (501, DENY_501),
        (502, DENY_502),
        (503, DENY_503),
        (504, DENY_504),
    ];

    fn show(b: &[u8]) -> String {
        String::from_utf8_lossy(b).into_owned()
    }

    #[test]
    fn mux_errors_match_capture() {
        assert_eq!(show(error_response(400)), show(MUX_400));
        assert_eq!(show(error_response(408)), show(MUX_408));
    }

    #[test]
    fn keep_alive_pages_match_capture() {
        for (code, raw) in DENIED {
            if code == 400 || code == 408 {
                continue;
            }
            assert_eq!(show(error_response(code)), show(raw), "status {code}");
            assert_eq!(
                show(&deny_response(code, false)),
                show(raw),
                "status {code}"
            );
        }
    }

    #[test]
    fn deny_400_and_408_always_close() {
        assert_eq!(show(&deny_response(400, false)), show(DENY_400));
        assert_eq!(show(&deny_response(408, false)), show(DENY_408));
        assert_eq!(show(&deny_response(408, true)), show(DENY_408));
    }

    #[test]
    fn deny_close_and_http10_keep_alive() {
        assert_eq!(show(&deny_response(403, true)), show(DENY_403_HTTP10));
        let ka = with_connection(error_response(403), ConnHeader::KeepAlive);
        assert_eq!(show(&ka), show(DENY_403_HTTP10_KA));
        let close = with_connection(error_response(403), ConnHeader::Close);
        assert_eq!(show(&close), show(DENY_403_HTTP10));
        let none = with_connection(error_response(403), ConnHeader::None);
        assert_eq!(show(&none), show(DENY_403));
    }

    #[test]
    fn unknown_status_gets_500_page() {
        assert!(!has_error_page(418));
        assert!(has_error_page(425));
        assert_eq!(show(error_response(418)), show(DENY_500));
        assert_eq!(show(&deny_response(0, false)), show(DENY_500));
    }

    #[test]
    fn auth_matches_capture() {
        assert_eq!(show(&auth_response("test", false)), show(AUTH_401));
        let with_cr = auth_response("te\r\nst", false);
        assert_eq!(show(&with_cr), show(AUTH_401));
    }

    #[test]
    fn redirects_match_capture() {
        let abs = "https://h.example:8080/a?b=1";
        assert_eq!(show(&redirect_response(301, abs, false)), show(REDIR_301));
        assert_eq!(
            show(&redirect_response(302, "/new", false)),
            show(REDIR_302)
        );
        assert_eq!(
            show(&redirect_response(303, "/new", false)),
            show(REDIR_303)
        );
        assert_eq!(
            show(&redirect_response(307, "/new", false)),
            show(REDIR_307)
        );
        let prefixed = "https://x.example/a?b=1";
        assert_eq!(
            show(&redirect_response(308, prefixed, false)),
            show(REDIR_308)
        );
        assert_eq!(
            show(&redirect_response(301, abs, true)),
            show(REDIR_301_HTTP10)
        );
        let ka = with_connection(&redirect_response(301, abs, false), ConnHeader::KeepAlive);
        assert_eq!(show(&ka), show(REDIR_301_HTTP10_KA));
        assert_eq!(
            show(&redirect_response(302, "/new", true)),
            show(REDIR_302_BODY)
        );
    }

    #[test]
    fn redirect_location_cannot_split_headers() {
        let r = redirect_response(302, "/x\r\nset-cookie: a=b", false);
        assert_eq!(
            show(&r),
            "HTTP/1.1 302 Found\r\ncontent-length: 0\r\nlocation: /xset-cookie: a=b\r\n\
             cache-control: no-cache\r\n\r\n"
        );
    }

    #[test]
    fn returns_match_capture() {
        let hello = return_response(200, Some("text/plain"), b"hello", false);
        assert_eq!(show(&hello), show(RETURN_HELLO));
        let closing = return_response(200, Some("text/plain"), b"hello", true);
        assert_eq!(show(&closing), show(RETURN_HELLO_CLOSE));
        assert_eq!(
            show(&return_response(404, None, b"", false)),
            show(RETURN_404_EMPTY)
        );
        let json = return_response(503, Some("application/json"), b"{}", false);
        assert_eq!(show(&json), show(RETURN_503_JSON));
    }

    #[test]
    fn return_without_body_statuses() {
        // Captured: `return status 204` / `status 304` / `status 429`.
        assert_eq!(
            show(&return_response(204, None, b"x", false)),
            "HTTP/1.1 204 No Content\r\n\r\n"
        );
        assert_eq!(
            show(&return_response(304, None, b"x", false)),
            "HTTP/1.1 304 Not Modified\r\ncontent-length: 0\r\n\r\n"
        );
        assert_eq!(
            show(&return_response(429, None, b"", false)),
            "HTTP/1.1 429 Too Many Requests\r\ncontent-length: 0\r\n\r\n"
        );
    }

    #[test]
    fn head_drops_body_only() {
        assert_eq!(show(head_only(error_response(403))), show(HEAD_403));
        assert_eq!(head_only(b"no header end"), b"no header end");
        assert_eq!(
            with_connection(b"junk", ConnHeader::Close),
            b"junk".to_vec()
        );
    }

    #[test]
    fn conn_header_rules() {
        assert_eq!(ConnHeader::for_reply(false, true, false), ConnHeader::None);
        assert_eq!(ConnHeader::for_reply(false, true, true), ConnHeader::Close);
        assert_eq!(ConnHeader::for_reply(true, false, false), ConnHeader::Close);
        assert_eq!(
            ConnHeader::for_reply(true, true, false),
            ConnHeader::KeepAlive
        );
        assert_eq!(ConnHeader::for_reply(true, true, true), ConnHeader::Close);
    }

    #[test]
    fn reasons_match_capture() {
        // From `http-request return status N` for N in 200..=599.
        let cases = [
            (200, "OK"),
            (208, "Success"),
            (210, "Content Different"),
            (226, "IM Used"),
            (302, "Moved Temporarily"),
            (306, "Redirection"),
            (310, "Too many Redirects"),
            (400, "Bad Request"),
            (407, "Proxy Authentication Required"),
            (413, "Request Entity Too Large"),
            (416, "Requested range unsatisfiable"),
            (418, "I'm a teapot"),
            (419, "Client Error"),
            (499, "client has closed connection"),
            (502, "Bad Gateway or Proxy Error"),
            (504, "Gateway Time-out"),
            (520, "Web server is returning an unknown error"),
            (599, "Server Error"),
            (101, "Switching Protocols"),
            (103, "Informational"),
            (42, "Other"),
            (600, "Other"),
        ];
        for (code, why) in cases {
            assert_eq!(reason(code), why, "status {code}");
        }
    }

    #[test]
    fn pages_declare_their_length() {
        for (code, _, _) in PAGES {
            let page = error_response(code);
            let end = header_end(page).unwrap();
            let head = show(&page[..end]).to_ascii_lowercase();
            let len = page.len() - end;
            assert!(
                head.contains(&format!("content-length: {len}\r\n")),
                "{code}"
            );
        }
    }
}
