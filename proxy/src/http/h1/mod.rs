//! Strict, sans-I/O HTTP/1.1 codec (RFC 9112/9110).
//!
//! The proxy session drives it in this order, for each message on a connection:
//! 1. [`parse_request_head`] (or [`parse_response_head`]) over the bytes read so far;
//! 2. [`request_framing`] (or [`response_framing`]) to learn how the body is delimited;
//! 3. [`normalize_request`] / [`normalize_response`] to repair what the strict rules allow
//!    (duplicate Content-Length, `chunked,`, h2c upgrades...), then the header rules, then
//!    [`remove_hop_by_hop`] or [`strip_close_keepalive`], then [`write_request_head`];
//! 4. a [`BodyDecoder`] over the following bytes: it validates the body and says how many bytes
//!    belong to this message, which the caller forwards verbatim.
//!
//! Nothing here reads a socket or a clock; every function is pure over the bytes it is given.
//! Errors carry the status HAProxy answers with ([`H1Error::status`]).

mod body;
mod conn;
mod framing;
mod parse;
mod write;

#[cfg(test)]
mod corpus_tests;
#[cfg(test)]
mod tests;

pub use body::{BodyDecoder, BodyProgress, Payload};
pub use conn::{
    connection_has_token, is_upgrade, is_websocket_upgrade, remove_hop_by_hop, restrict_te,
    set_connection_mode, strip_close_keepalive, wants_close, websocket_accept, websocket_accept_ok,
};
pub use framing::{
    framing_forces_close, normalize_request, normalize_response, request_framing, response_framing,
};
pub(crate) use parse::check_request;
pub use parse::{parse_request_head, parse_response_head};
pub use write::{write_reply_head, write_request_head, write_response_head};

/// Where a refused head stops parsing (`show errors`' "error at position"): the last byte of
/// the shortest prefix the parser refuses (a prefix is refused as soon as it cannot start a
/// valid head); found by bisection, the head being bounded by `max_head`.
pub fn error_offset(buf: &[u8], response: bool) -> usize {
    let limits = Limits::default();
    let refused = |b: &[u8]| {
        if response {
            parse_response_head(b, &limits).is_err()
        } else {
            parse_request_head(b, &limits).is_err()
        }
    };
    if !refused(buf) {
        return buf.len();
    }
    // buf[..hi] is refused, buf[..lo] is not (the empty prefix never is).
    let (mut lo, mut hi) = (0usize, buf.len());
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if refused(buf.get(..mid).unwrap_or(buf)) {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let at = hi.saturating_sub(1);
    // A line refused at its end (no colon…) is refused at its CR, as HAProxy reports it.
    match (at.checked_sub(1).and_then(|p| buf.get(p)), buf.get(at)) {
        (Some(b'\r'), Some(b'\n')) => at - 1,
        _ => at,
    }
}

/// Size limits for one message head.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Largest head (start line, fields, final CRLF, leading empty lines) in bytes; HAProxy's
    /// `tune.bufsize` plays this role.
    pub max_head: usize,
    /// Most header fields in one head (HAProxy's `tune.http.maxhdr`).
    pub max_headers: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_head: 16384,
            max_headers: 101,
        }
    }
}

/// How a message body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body at all.
    None,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked transfer coding, up to the last chunk and trailer section.
    Chunked,
    /// Responses only: everything until the server closes.
    UntilClose,
    /// Responses only (101, 2xx to CONNECT): the connection becomes a byte tunnel.
    Tunnel,
}

impl BodyFraming {
    /// No body byte follows the head: no framing, or `Content-Length: 0`.
    pub fn bodyless(self) -> bool {
        matches!(self, BodyFraming::None | BodyFraming::Length(0))
    }
}

/// Why a message was refused. [`H1Error::status`] is the status to answer a client with; a
/// response from a server that fails to parse is answered 502 by the proxy instead.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum H1Error {
    /// LF not preceded by CR.
    BareLf,
    /// CR not followed by LF.
    BareCr,
    BadRequestLine,
    BadStatusLine,
    /// Not `HTTP/1.x`, or malformed version.
    BadVersion,
    /// Request-target with forbidden bytes or the wrong form for the method.
    BadTarget,
    /// The request line alone does not fit in `max_head`.
    UriTooLong,
    HeadTooLarge,
    TooManyHeaders,
    /// A field line starting with SP/HTAB (obsolete line folding).
    ObsFold,
    BadHeaderName,
    /// Whitespace between a field name and its colon.
    SpaceBeforeColon,
    MissingColon,
    /// CTL or NUL in a field value.
    BadHeaderValue,
    MissingHost,
    DuplicateHost,
    BadHost,
    /// WebSocket handshake with a missing or malformed Sec-WebSocket-Key.
    BadWebSocketKey,
    /// Transfer-Encoding that is not a valid list ending in a single `chunked`.
    BadTransferEncoding,
    /// A transfer coding other than chunked, which we cannot decode (HAProxy: 422 for a
    /// request, 502 for a response).
    UnsupportedTransferCoding,
    BadContentLength,
    BadChunkSize,
    BadChunkExtension,
    /// Chunk data not followed by CRLF.
    BadChunkEnd,
    /// Chunk-size line or trailer section larger than `max_head`.
    ChunkLineTooLong,
    BadTrailer,
    /// The peer closed before the body was complete.
    Truncated,
}

impl H1Error {
    /// Status to answer the client with (HAProxy 2.6 uses 400 for a head that does not fit its
    /// buffer; 3.1+ answers 414 for an overlong request line, as we do).
    pub fn status(&self) -> u16 {
        match self {
            H1Error::UriTooLong => 414,
            H1Error::UnsupportedTransferCoding => 422,
            _ => 400,
        }
    }

    /// Short text for logs and traces.
    pub fn reason(&self) -> &'static str {
        match self {
            H1Error::BareLf => "bare LF line ending",
            H1Error::BareCr => "bare CR",
            H1Error::BadRequestLine => "malformed request line",
            H1Error::BadStatusLine => "malformed status line",
            H1Error::BadVersion => "unsupported or malformed HTTP version",
            H1Error::BadTarget => "invalid request-target",
            H1Error::UriTooLong => "request-target too long",
            H1Error::HeadTooLarge => "message head too large",
            H1Error::TooManyHeaders => "too many header fields",
            H1Error::ObsFold => "obsolete line folding",
            H1Error::BadHeaderName => "invalid header field name",
            H1Error::SpaceBeforeColon => "whitespace before header colon",
            H1Error::MissingColon => "header line without colon",
            H1Error::BadHeaderValue => "invalid character in header value",
            H1Error::MissingHost => "missing Host header",
            H1Error::DuplicateHost => "duplicate Host header",
            H1Error::BadHost => "invalid Host header",
            H1Error::BadWebSocketKey => "invalid Sec-WebSocket-Key",
            H1Error::BadTransferEncoding => "invalid Transfer-Encoding",
            H1Error::UnsupportedTransferCoding => "unsupported transfer coding",
            H1Error::BadContentLength => "invalid Content-Length",
            H1Error::BadChunkSize => "invalid chunk size",
            H1Error::BadChunkExtension => "invalid chunk extension",
            H1Error::BadChunkEnd => "chunk data not followed by CRLF",
            H1Error::ChunkLineTooLong => "chunk line or trailers too long",
            H1Error::BadTrailer => "invalid trailer field",
            H1Error::Truncated => "message truncated by connection close",
        }
    }
}

impl std::fmt::Display for H1Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.reason())
    }
}

impl std::error::Error for H1Error {}

/// RFC 9110 tchar.
pub(crate) fn is_tchar(b: u8) -> bool {
    TCHAR[usize::from(b)]
}

const fn tchar(b: u8) -> bool {
    matches!(b,
        b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`'
        | b'|' | b'~' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z')
}

const fn field_byte(b: u8) -> bool {
    matches!(b, b'\t' | b' '..=b'~' | 0x80..=0xff)
}

/// A byte class as a table (0: tchar, 1: field byte): one load per byte on the parser's hot
/// loops.
const fn class(which: u8) -> [bool; 256] {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = if which == 0 {
            tchar(i as u8)
        } else {
            field_byte(i as u8)
        };
        i += 1;
    }
    t
}

static TCHAR: [bool; 256] = class(0);
static FIELD_BYTE: [bool; 256] = class(1);

pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// field-vchar, SP or HTAB: what a field value may hold (obs-text included).
pub(crate) fn is_field_byte(b: u8) -> bool {
    FIELD_BYTE[usize::from(b)]
}

pub(crate) fn trim_ows(mut s: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = s {
        s = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = s {
        s = rest;
    }
    s
}

/// Elements of a comma-separated field list, OWS-trimmed; empty elements are kept so callers
/// can decide whether they are an error.
pub(crate) fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(trim_ows)
}
