//! Message body length (RFC 9112 §6) and the repairs applied before forwarding a head.

use super::conn::{connection_has_token, is_h2_upgrade_token, retain_list_elements};
use super::{BodyFraming, H1Error, is_token, list_elements, trim_ows};
use crate::http::head::{Headers, RequestHead, ResponseHead, Version};

/// `1*DIGIT` without overflow; leading zeros are fine (the value is what matters).
fn parse_decimal(s: &[u8]) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.iter().try_fold(0u64, |acc, &b| {
        if !b.is_ascii_digit() {
            return None;
        }
        acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
    })
}

/// The Content-Length of a message, all fields and list elements agreeing (RFC 9110 §8.6);
/// `Ok(None)` when absent. An empty element is an error, as in HAProxy since CVE-2023-40225.
fn content_length(headers: &Headers) -> Result<Option<u64>, H1Error> {
    let mut found = None;
    for value in headers.get_all("content-length") {
        for e in list_elements(value) {
            let n = parse_decimal(e).ok_or(H1Error::BadContentLength)?;
            if found.is_some_and(|f| f != n) {
                return Err(H1Error::BadContentLength);
            }
            found = Some(n);
        }
    }
    Ok(found)
}

/// What a Transfer-Encoding list says (empty elements ignored, RFC 9110 §5.6.1).
struct Codings {
    chunked: usize,
    last_is_chunked: bool,
    other: bool,
}

fn transfer_codings(headers: &Headers) -> Result<Codings, H1Error> {
    let mut c = Codings {
        chunked: 0,
        last_is_chunked: false,
        other: false,
    };
    let mut any = false;
    for e in headers
        .get_all("transfer-encoding")
        .flat_map(list_elements)
        .filter(|e| !e.is_empty())
    {
        any = true;
        let mut parts = e.splitn(2, |&b| b == b';');
        let name = trim_ows(parts.next().unwrap_or_default());
        let has_params = parts.next().is_some();
        if !is_token(name) {
            return Err(H1Error::BadTransferEncoding);
        }
        let is_chunked = name.eq_ignore_ascii_case(b"chunked");
        if is_chunked {
            if has_params {
                return Err(H1Error::BadTransferEncoding);
            }
            c.chunked += 1;
        } else {
            c.other = true;
        }
        c.last_is_chunked = is_chunked;
    }
    if !any {
        return Err(H1Error::BadTransferEncoding);
    }
    Ok(c)
}

/// Body framing of a request (RFC 9112 §6.1–6.3), refusing everything that lets two parsers
/// disagree: TE not ending in one `chunked` (400) or with codings we cannot decode (501),
/// conflicting or malformed Content-Length. Transfer-Encoding wins over Content-Length, also
/// in HTTP/1.0, as HAProxy 2.6 does (RFC 9112 §6.1 allows it): [`normalize_request`] drops the
/// Content-Length and [`framing_forces_close`] closes the connection after the response, so
/// bytes a Content-Length-trusting hop would have read as body never become a request.
pub fn request_framing(head: &RequestHead) -> Result<BodyFraming, H1Error> {
    let headers = &head.headers;
    if headers.contains("transfer-encoding") {
        let c = transfer_codings(headers)?;
        if !c.last_is_chunked || c.chunked > 1 {
            return Err(H1Error::BadTransferEncoding);
        }
        if c.other {
            return Err(H1Error::UnsupportedTransferCoding);
        }
        return Ok(BodyFraming::Chunked);
    }
    Ok(match content_length(headers)? {
        Some(n) => BodyFraming::Length(n),
        None => BodyFraming::None,
    })
}

/// Whether a message's framing is ambiguous enough that the client connection must close after
/// the exchange (RFC 9112 §6.1, HAProxy's `H1_MF_CONN_CLO`): Transfer-Encoding with
/// Content-Length, or in HTTP/1.0. Call it before [`normalize_request`] /
/// [`normalize_response`], which remove the Content-Length.
pub fn framing_forces_close(version: Version, h: &Headers) -> bool {
    h.contains("transfer-encoding") && (h.contains("content-length") || version == Version::Http10)
}

/// Body framing of a response to a `req_method` request (RFC 9112 §6.3). `Tunnel` for 101 and
/// for a 2xx to CONNECT (the caller checks the request really asked for it); `None` for HEAD,
/// 1xx, 204 and 304; chunked for `Transfer-Encoding: chunked` (also in HTTP/1.0, and over a
/// Content-Length, which [`normalize_response`] drops; [`framing_forces_close`] then closes
/// the client connection), else Content-Length, else until close. Like HAProxy 2.6, any other
/// transfer coding makes the response unusable: errors mean answer 502 and close the server
/// connection.
pub fn response_framing(head: &ResponseHead, req_method: &str) -> Result<BodyFraming, H1Error> {
    let status = head.status;
    if status == 101 {
        return Ok(BodyFraming::Tunnel);
    }
    if req_method == "CONNECT" && (200..300).contains(&status) {
        return Ok(BodyFraming::Tunnel);
    }
    if req_method == "HEAD" || status < 200 || status == 204 || status == 304 {
        return Ok(BodyFraming::None);
    }
    let headers = &head.headers;
    if headers.contains("transfer-encoding") {
        let c = transfer_codings(headers)?;
        if c.chunked > 1 || (c.chunked == 1 && !c.last_is_chunked) {
            return Err(H1Error::BadTransferEncoding);
        }
        if c.other {
            return Err(H1Error::UnsupportedTransferCoding);
        }
        return Ok(BodyFraming::Chunked);
    }
    Ok(match content_length(headers)? {
        Some(n) => BodyFraming::Length(n),
        None => BodyFraming::UntilClose,
    })
}

/// Replaces every `name` field by one with `value`, at the place of the first.
fn replace_with_one(headers: &mut Headers, name: &str, value: &[u8]) {
    let mut seen = false;
    headers.0.retain_mut(|h| {
        if !h.name.eq_ignore_ascii_case(name) {
            return true;
        }
        if seen {
            return false;
        }
        seen = true;
        if h.value != value {
            h.value = value.into();
        }
        true
    });
}

/// Collapses a Content-Length list or repeated fields to one value.
fn normalize_content_length(headers: &mut Headers, n: u64) {
    let single = {
        let mut fields = headers.get_all("content-length");
        let first = fields.next();
        fields.next().is_none() && first.is_some_and(|v| !v.contains(&b','))
    };
    if !single {
        replace_with_one(headers, "content-length", n.to_string().as_bytes());
    }
}

/// Repairs what the strict rules accept but a server could misread, given the `framing` that
/// [`request_framing`] returned:
/// - one `Content-Length` for a duplicated or listed one;
/// - `Transfer-Encoding: chunked` exactly (e.g. for `chunked,`);
/// - no `Upgrade` on a request with a body (nghttpx CVE-2026-58055 shape);
/// - no `h2c`/`h2` upgrade nor `HTTP2-Settings`: an h2c tunnel would bypass every rule.
pub fn normalize_request(head: &mut RequestHead, framing: &BodyFraming) {
    let headers = &mut head.headers;
    match *framing {
        BodyFraming::Length(n) => normalize_content_length(headers, n),
        BodyFraming::Chunked => {
            headers.remove("content-length");
            let exact = {
                let mut te = headers.get_all("transfer-encoding");
                let first = te.next();
                te.next().is_none() && first.is_some_and(|v| v.eq_ignore_ascii_case(b"chunked"))
            };
            if !exact {
                replace_with_one(headers, "transfer-encoding", b"chunked");
            }
        }
        _ => {}
    }
    let has_body = matches!(*framing, BodyFraming::Chunked)
        || matches!(*framing, BodyFraming::Length(n) if n > 0);
    let mut dropped = if has_body && headers.contains("upgrade") {
        headers.remove("upgrade");
        true
    } else {
        retain_list_elements(headers, "upgrade", |p| !is_h2_upgrade_token(p))
    };
    if headers.contains("http2-settings") || connection_has_token(headers, "http2-settings") {
        headers.remove("http2-settings");
        retain_list_elements(headers, "connection", |t| {
            !t.eq_ignore_ascii_case(b"http2-settings")
        });
        dropped = true;
    }
    let upgrade_left = headers
        .get_all("upgrade")
        .flat_map(list_elements)
        .any(|p| !p.is_empty());
    if dropped && !upgrade_left {
        headers.remove("upgrade");
        retain_list_elements(headers, "connection", |t| {
            !t.eq_ignore_ascii_case(b"upgrade")
        });
    }
}

/// Repairs a response before forwarding it: a `Content-Length` next to `Transfer-Encoding` is
/// removed (RFC 9112 §6.3 item 3), a duplicated one collapsed.
pub fn normalize_response(head: &mut ResponseHead, framing: &BodyFraming) {
    let headers = &mut head.headers;
    match *framing {
        BodyFraming::Length(n) => normalize_content_length(headers, n),
        BodyFraming::Chunked | BodyFraming::UntilClose if headers.contains("transfer-encoding") => {
            headers.remove("content-length");
        }
        _ => {}
    }
}
