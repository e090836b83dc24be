//! Message heads: start line and field section, validated with offsets before any allocation.

use super::conn::is_websocket_upgrade;
use super::{H1Error, Limits, is_field_byte, is_tchar, is_token, trim_ows};
use crate::http::head::{FieldName, Header, Headers, RequestHead, ResponseHead, Version};

/// Offsets of one validated field line: name, then the value without its OWS.
struct FieldSpan {
    name: (usize, usize),
    value: (usize, usize),
}

struct RawHead {
    start: StartLine,
    fields: Vec<FieldSpan>,
    /// Bytes consumed, final CRLF included.
    end: usize,
}

/// The start line as the scan parsed it (offsets in the head): parsed once, not again when the
/// head is built.
enum StartLine {
    Request {
        method: (usize, usize),
        target: (usize, usize),
        version: Version,
    },
    Response {
        version: Version,
        status: u16,
        reason: (usize, usize),
    },
}

enum Scan {
    Complete(RawHead),
    /// Need more bytes; `in_start_line` tells which limit error to raise if none can come.
    Incomplete {
        in_start_line: bool,
    },
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Request,
    Response,
}

/// Parses a request head at the start of `buf`.
///
/// `Ok(None)`: the head is not complete yet (and still fits in `limits.max_head`). On success,
/// the `usize` is the number of bytes of `buf` the head used, leading empty lines included.
/// Besides syntax, this enforces the head-level rules: request-target form, exactly one valid
/// Host in HTTP/1.1, and a well-formed WebSocket key. For an absolute-form target the Host
/// field is replaced by the target's authority (RFC 9112 §3.2.2).
pub fn parse_request_head(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<(RequestHead, usize)>, H1Error> {
    let raw = match scan_limited(buf, limits, Kind::Request)? {
        Some(raw) => raw,
        None => return Ok(None),
    };
    let StartLine::Request {
        method,
        target,
        version,
    } = raw.start
    else {
        return Err(H1Error::BadRequestLine);
    };
    let mut head = RequestHead {
        method: ascii_string(slice(buf, method)).ok_or(H1Error::BadRequestLine)?,
        target: ascii_string(slice(buf, target)).ok_or(H1Error::BadTarget)?,
        version,
        headers: build_headers(buf, &raw.fields)?,
    };
    check_request(&mut head)?;
    Ok(Some((head, raw.end)))
}

/// Parses a response head at the start of `buf`; same contract as [`parse_request_head`].
/// Interim (1xx) responses are returned like any other: the caller forwards them and parses
/// the next head.
pub fn parse_response_head(
    buf: &[u8],
    limits: &Limits,
) -> Result<Option<(ResponseHead, usize)>, H1Error> {
    let raw = match scan_limited(buf, limits, Kind::Response)? {
        Some(raw) => raw,
        None => return Ok(None),
    };
    let StartLine::Response {
        version,
        status,
        reason,
    } = raw.start
    else {
        return Err(H1Error::BadStatusLine);
    };
    let head = ResponseHead {
        version,
        status,
        reason: String::from_utf8_lossy(slice(buf, reason)).into_owned(),
        headers: build_headers(buf, &raw.fields)?,
    };
    Ok(Some((head, raw.end)))
}

fn slice(buf: &[u8], (s, e): (usize, usize)) -> &[u8] {
    buf.get(s..e).unwrap_or_default()
}

fn ascii_string(b: &[u8]) -> Option<String> {
    std::str::from_utf8(b).ok().map(str::to_owned)
}

fn build_headers(buf: &[u8], fields: &[FieldSpan]) -> Result<Headers, H1Error> {
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        // Tokens (checked by the scan): ASCII, no UTF-8 validation needed.
        let name = FieldName::from_ascii(slice(buf, f.name)).ok_or(H1Error::BadHeaderName)?;
        out.push(Header {
            name,
            value: slice(buf, f.value).into(),
        });
    }
    Ok(Headers(out))
}

/// Scans at most `max_head` bytes; a head that cannot complete within them is an error.
fn scan_limited(buf: &[u8], limits: &Limits, kind: Kind) -> Result<Option<RawHead>, H1Error> {
    let window = buf.get(..limits.max_head).unwrap_or(buf);
    match scan(window, limits, kind)? {
        Scan::Complete(raw) => Ok(Some(raw)),
        Scan::Incomplete { in_start_line } if buf.len() >= limits.max_head => {
            Err(if in_start_line && kind == Kind::Request {
                H1Error::UriTooLong
            } else {
                H1Error::HeadTooLarge
            })
        }
        Scan::Incomplete { .. } => Ok(None),
    }
}

/// A partial line may end with the CR of its CRLF.
fn strip_cr(partial: &[u8]) -> &[u8] {
    partial.strip_suffix(b"\r").unwrap_or(partial)
}

/// Index of the CR of the CRLF ending the line that starts at `start`, if it has arrived.
fn find_line_end(buf: &[u8], start: usize) -> Result<Option<usize>, H1Error> {
    let rest = buf.get(start..).unwrap_or_default();
    let Some(i) = memchr::memchr2(b'\r', b'\n', rest) else {
        return Ok(None);
    };
    let b = rest[i];
    if b == b'\n' {
        return Err(H1Error::BareLf);
    }
    match rest.get(i + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some(start + i)),
        Some(_) => Err(H1Error::BareCr),
    }
}

fn scan(w: &[u8], limits: &Limits, kind: Kind) -> Result<Scan, H1Error> {
    let mut pos = 0;
    // RFC 9112 §2.2: a server SHOULD ignore empty lines received before the request-line.
    if kind == Kind::Request {
        loop {
            match (w.get(pos), w.get(pos + 1)) {
                (Some(b'\r'), Some(b'\n')) => pos += 2,
                (Some(b'\r'), None) => {
                    return Ok(Scan::Incomplete {
                        in_start_line: false,
                    });
                }
                (Some(b'\r'), Some(_)) => return Err(H1Error::BareCr),
                (Some(b'\n'), _) => return Err(H1Error::BareLf),
                _ => break,
            }
        }
    }
    let start = pos;
    let Some(cr) = find_line_end(w, start)? else {
        // Refuse garbage (e.g. a TLS hello) now instead of waiting for a CRLF.
        let partial = strip_cr(w.get(start..).unwrap_or_default());
        let ok = match kind {
            Kind::Request => partial.iter().all(|&b| matches!(b, b' '..=b'~')),
            Kind::Response => partial.iter().all(|&b| is_field_byte(b)),
        };
        if !ok {
            return Err(match kind {
                Kind::Request => H1Error::BadRequestLine,
                Kind::Response => H1Error::BadStatusLine,
            });
        }
        // Only empty lines so far is not an overlong URI.
        return Ok(Scan::Incomplete {
            in_start_line: start < w.len(),
        });
    };
    // Report errors in line order: the start line before any field.
    let line = w.get(start..cr).unwrap_or_default();
    // Where a part of the line is in `w` (an empty part: nowhere, an empty range).
    let at = |part: &[u8]| match part.as_ptr().addr().checked_sub(w.as_ptr().addr()) {
        Some(o) if !part.is_empty() => (o, o + part.len()),
        _ => (0, 0),
    };
    let start_line = match kind {
        Kind::Request => {
            let (method, target, version) = parse_request_line(line)?;
            StartLine::Request {
                method: at(method),
                target: at(target),
                version,
            }
        }
        Kind::Response => {
            let (version, status, reason) = parse_status_line(line)?;
            StartLine::Response {
                version,
                status,
                reason: at(reason),
            }
        }
    };
    pos = cr + 2;
    // Room for a usual head's fields at once: growing from empty reallocated twice per
    // response head (callgrind: ≈ 400 instructions per request, both heads).
    let mut fields = Vec::with_capacity(16);
    loop {
        match (w.get(pos), w.get(pos + 1)) {
            (None, _) | (Some(b'\r'), None) => {
                return Ok(Scan::Incomplete {
                    in_start_line: false,
                });
            }
            (Some(b'\r'), Some(b'\n')) => {
                return Ok(Scan::Complete(RawHead {
                    start: start_line,
                    fields,
                    end: pos + 2,
                }));
            }
            (Some(b'\r'), Some(_)) => return Err(H1Error::BareCr),
            (Some(b'\n'), _) => return Err(H1Error::BareLf),
            (Some(b' ' | b'\t'), _) => return Err(H1Error::ObsFold),
            _ => {}
        }
        if let Some(f) = plain_field_line(w, pos) {
            fields.push(FieldSpan {
                name: (pos, pos + f.name_len),
                value: (pos + f.value.0, pos + f.value.1),
            });
            if fields.len() > limits.max_headers {
                return Err(H1Error::TooManyHeaders);
            }
            pos += f.cr + 2;
            continue;
        }
        match find_line_end(w, pos)? {
            None => {
                check_field_line(strip_cr(w.get(pos..).unwrap_or_default()), false)?;
                return Ok(Scan::Incomplete {
                    in_start_line: false,
                });
            }
            Some(cr) => {
                let line = w.get(pos..cr).unwrap_or_default();
                if let Some((name_end, (vs, ve))) = check_field_line(line, true)? {
                    fields.push(FieldSpan {
                        name: (pos, pos + name_end),
                        value: (pos + vs, pos + ve),
                    });
                }
                if fields.len() > limits.max_headers {
                    return Err(H1Error::TooManyHeaders);
                }
                pos = cr + 2;
            }
        }
    }
}

/// A complete field line of the usual kind, found in one pass.
struct PlainField {
    name_len: usize,
    /// The value without its surrounding whitespace, as offsets in the line.
    value: (usize, usize),
    /// Offset of the line's CR (its LF follows).
    cr: usize,
}

/// The field line at `pos` when it is the usual kind: a token, a colon, a value of printable
/// ASCII and spaces, CRLF — what [`find_line_end`] and [`check_field_line`] would accept and
/// split the same way, in one pass, the value's bytes eight at a time. `None` for anything else
/// (a tab or obs-text in the value, no CRLF yet, any error): those take the general path, which
/// also names the error.
fn plain_field_line(w: &[u8], pos: usize) -> Option<PlainField> {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let line = w.get(pos..)?;
    let name_len = line.iter().position(|&b| !super::is_tchar(b))?;
    if name_len == 0 || line[name_len] != b':' {
        return None;
    }
    let mut j = name_len + 1;
    while line.get(j) == Some(&b' ') {
        j += 1;
    }
    let start = j;
    loop {
        if let Some(c) = line.get(j..j + 8) {
            let mut b = [0u8; 8];
            b.copy_from_slice(c);
            let x = u64::from_le_bytes(b);
            // Some byte < 0x20 (CR among them), some byte >= 0x7f: see `all_field_bytes`.
            let low = x.wrapping_sub(0x20 * ONES) & !x & HIGH;
            let high = (((x & !HIGH) + ONES) | x) & HIGH;
            if low | high == 0 {
                j += 8;
                continue;
            }
            // The lowest byte flagged is a true one (a borrow only flags bytes after it): the
            // line's CR, usually; skip the bytes before it at once.
            j += ((low | high).trailing_zeros() / 8) as usize;
        }
        match line.get(j)? {
            b' '..=b'~' => j += 1,
            b'\r' if line.get(j + 1) == Some(&b'\n') => break,
            _ => return None,
        }
    }
    let mut end = j;
    while end > start && line[end - 1] == b' ' {
        end -= 1;
    }
    Some(PlainField {
        name_len,
        value: (start, end),
        cr: j,
    })
}

/// Validates `name ":" OWS value OWS` (without CRLF). Returns the name length and the value's
/// offsets within `line`; `None` when a partial line is valid so far.
#[allow(clippy::type_complexity)]
fn check_field_line(
    line: &[u8],
    complete: bool,
) -> Result<Option<(usize, (usize, usize))>, H1Error> {
    let Some(i) = line.iter().position(|&b| !is_tchar(b)) else {
        return if complete {
            Err(H1Error::MissingColon)
        } else {
            Ok(None)
        };
    };
    match line[i] {
        b':' if i == 0 => Err(H1Error::BadHeaderName),
        b':' => {
            let value = line.get(i + 1..).unwrap_or_default();
            if !all_field_bytes(value) {
                return Err(H1Error::BadHeaderValue);
            }
            if !complete {
                return Ok(None);
            }
            let lead = value.len() - value.trim_ascii_start().len();
            let trimmed = trim_ows(&value[lead..]);
            let vs = i + 1 + lead;
            Ok(Some((i, (vs, vs + trimmed.len()))))
        }
        b' ' | b'\t' => {
            let after = trim_ows(line.get(i..).unwrap_or_default());
            if after.first() == Some(&b':') {
                Err(H1Error::SpaceBeforeColon)
            } else if complete && !after.contains(&b':') {
                Err(H1Error::MissingColon)
            } else {
                Err(H1Error::BadHeaderName)
            }
        }
        _ => Err(H1Error::BadHeaderName),
    }
}

/// Whether every byte of `v` may be in a field value: eight at a time where all are printable
/// ASCII (the usual case), byte by byte where one might not be.
fn all_field_bytes(v: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        let mut w = [0u8; 8];
        w.copy_from_slice(c);
        let x = u64::from_le_bytes(w);
        // Some byte < 0x20 (no false negative), some byte >= 0x7f (exact).
        let low = x.wrapping_sub(0x20 * ONES) & !x & HIGH;
        let high = (((x & !HIGH) + ONES) | x) & HIGH;
        if low | high != 0 && !c.iter().all(|&b| is_field_byte(b)) {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| is_field_byte(b))
}

fn parse_version(v: &[u8]) -> Result<Version, H1Error> {
    match v {
        [b'H', b'T', b'T', b'P', b'/', b'1', b'.', minor] if minor.is_ascii_digit() => {
            // RFC 9112 §2.3: a higher 1.x minor is processed as the highest we support.
            Ok(if *minor == b'0' {
                Version::Http10
            } else {
                Version::Http11
            })
        }
        _ => Err(H1Error::BadVersion),
    }
}

fn parse_request_line(line: &[u8]) -> Result<(&[u8], &[u8], Version), H1Error> {
    let mut parts = line.splitn(3, |&b| b == b' ');
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next())
    else {
        return Err(H1Error::BadRequestLine);
    };
    if !is_token(method) || target.is_empty() || version.contains(&b' ') {
        return Err(H1Error::BadRequestLine);
    }
    // VCHAR except '#': HAProxy also lets `{|}` and friends through, and real clients send them.
    if !target
        .iter()
        .all(|&b| matches!(b, b'!'..=b'~') && b != b'#')
    {
        return Err(H1Error::BadTarget);
    }
    Ok((method, target, parse_version(version)?))
}

fn parse_status_line(line: &[u8]) -> Result<(Version, u16, &[u8]), H1Error> {
    let version = parse_version(line.get(..8).ok_or(H1Error::BadStatusLine)?)?;
    let (code, reason) = match line.get(8..) {
        Some([b' ', a, b, c]) => ([*a, *b, *c], &[][..]),
        Some([b' ', a, b, c, b' ', reason @ ..]) => ([*a, *b, *c], reason),
        _ => return Err(H1Error::BadStatusLine),
    };
    if !code.iter().all(u8::is_ascii_digit) || code[0] == b'0' {
        return Err(H1Error::BadStatusLine);
    }
    if !reason.iter().all(|&b| is_field_byte(b)) {
        return Err(H1Error::BadStatusLine);
    }
    let status = code
        .iter()
        .fold(0u16, |acc, d| acc * 10 + u16::from(d - b'0'));
    Ok((version, status, reason))
}

fn is_unreserved_or_sub_delim(b: u8) -> bool {
    HOST_BYTE[usize::from(b)]
}

const fn unreserved_or_sub_delim(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || matches!(
            b,
            b'-' | b'.'
                | b'_'
                | b'~'
                | b'!'
                | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
        )
}

/// The class as a table: one load per byte of every request's Host (it was a chain of
/// comparisons, ≈ 20 instructions a byte).
static HOST_BYTE: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = unreserved_or_sub_delim(i as u8);
        i += 1;
    }
    t
};

/// `uri-host [":" port]` (RFC 9110 §7.2); `require_port` for CONNECT's authority-form.
pub(crate) fn is_valid_host(v: &[u8], require_port: bool) -> bool {
    if v.is_empty() {
        return !require_port;
    }
    let (host_ok, rest) = if v.first() == Some(&b'[') {
        match v.iter().position(|&b| b == b']') {
            Some(close) => {
                let inner = v.get(1..close).unwrap_or_default();
                let ok = !inner.is_empty()
                    && inner
                        .iter()
                        .all(|&b| b == b':' || is_unreserved_or_sub_delim(b));
                (ok, v.get(close + 1..).unwrap_or_default())
            }
            None => return false,
        }
    } else {
        let end = v.iter().position(|&b| b == b':').unwrap_or(v.len());
        let host = v.get(..end).unwrap_or_default();
        (
            !host.is_empty() && is_reg_name(host),
            v.get(end..).unwrap_or_default(),
        )
    };
    if !host_ok {
        return false;
    }
    match rest {
        [] => !require_port,
        [b':', port @ ..] => {
            port.iter().all(u8::is_ascii_digit) && !(require_port && port.is_empty())
        }
        _ => false,
    }
}

fn is_reg_name(host: &[u8]) -> bool {
    let mut i = 0;
    while let Some(&b) = host.get(i) {
        if b == b'%' {
            let hex = host.get(i + 1..i + 3).unwrap_or_default();
            if hex.len() != 2 || !hex.iter().all(u8::is_ascii_hexdigit) {
                return false;
            }
            i += 3;
        } else if is_unreserved_or_sub_delim(b) {
            i += 1;
        } else {
            return false;
        }
    }
    true
}

/// Head-level request rules that need the whole head (also applied to h2 requests built
/// without text, see `http::h2`).
pub(crate) fn check_request(head: &mut RequestHead) -> Result<(), H1Error> {
    let target = head.target.as_bytes();
    let mut authority: Option<String> = None;
    if head.method == "CONNECT" {
        if !is_valid_host(target, true) {
            return Err(H1Error::BadTarget);
        }
    } else if target == b"*" {
        if head.method != "OPTIONS" {
            return Err(H1Error::BadTarget);
        }
    } else if target.first() != Some(&b'/') {
        authority = absolute_form_authority(target)?;
    }

    {
        let mut hosts = head.headers.get_all("host");
        let first = hosts.next();
        if hosts.next().is_some() {
            return Err(H1Error::DuplicateHost);
        }
        match first {
            Some(v) if !is_valid_host(v, false) => return Err(H1Error::BadHost),
            Some(_) => {}
            None if head.version == Version::Http10 => {}
            None => return Err(H1Error::MissingHost),
        }
    }
    if let Some(auth) = authority {
        // The target's authority wins over a disagreeing Host (cache-key/vhost confusion).
        match head
            .headers
            .0
            .iter_mut()
            .find(|h| h.name.eq_ignore_ascii_case("host"))
        {
            Some(h) => {
                if h.value != auth.as_bytes() {
                    h.value = auth.into();
                }
            }
            None => head.headers.append("Host", auth),
        }
    }

    if is_websocket_upgrade(head) {
        let mut keys = head.headers.get_all("sec-websocket-key");
        let key = keys.next();
        if keys.next().is_some() || !key.is_some_and(is_websocket_key) {
            return Err(H1Error::BadWebSocketKey);
        }
    }
    Ok(())
}

/// For `scheme ":" ...` targets: checks the scheme and, for http(s), returns the authority.
fn absolute_form_authority(target: &[u8]) -> Result<Option<String>, H1Error> {
    let colon = target
        .iter()
        .position(|&b| b == b':')
        .ok_or(H1Error::BadTarget)?;
    let scheme = target.get(..colon).unwrap_or_default();
    let scheme_ok = scheme.first().is_some_and(u8::is_ascii_alphabetic)
        && scheme
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    if !scheme_ok {
        return Err(H1Error::BadTarget);
    }
    let http = scheme.eq_ignore_ascii_case(b"http") || scheme.eq_ignore_ascii_case(b"https");
    if !http {
        return Ok(None);
    }
    let rest = target
        .get(colon + 1..)
        .and_then(|r| r.strip_prefix(b"//"))
        .ok_or(H1Error::BadTarget)?;
    let end = rest
        .iter()
        .position(|&b| b == b'/' || b == b'?')
        .unwrap_or(rest.len());
    let auth = rest.get(..end).unwrap_or_default();
    // userinfo is deprecated and a phishing vector (RFC 9110 §4.2.4): refuse it.
    if auth.is_empty() || !is_valid_host(auth, false) {
        return Err(H1Error::BadTarget);
    }
    ascii_string(auth).map(Some).ok_or(H1Error::BadTarget)
}

/// RFC 6455 §4.1: base64 of 16 bytes, i.e. 22 base64 digits then "==".
fn is_websocket_key(key: &[u8]) -> bool {
    key.len() == 24
        && key.ends_with(b"==")
        && key
            .iter()
            .take(22)
            .all(|&b| b.is_ascii_alphanumeric() || b == b'+' || b == b'/')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The word-at-a-time check says what the byte-by-byte one says, for every byte at every
    /// position of a value longer than two words.
    #[test]
    fn field_bytes_word_check_matches_the_byte_check() {
        for b in 0..=255u8 {
            for at in 0..17 {
                let mut v = *b"Mon, 06 Dec 2026 ";
                v[at] = b;
                assert_eq!(
                    all_field_bytes(&v),
                    v.iter().all(|&b| is_field_byte(b)),
                    "{b:#x} at {at}"
                );
            }
        }
        assert!(all_field_bytes(b""));
        assert!(all_field_bytes(b"\ttab\tand \x80\xff obs-text"));
    }

    /// The one-pass field line agrees with the general path (`find_line_end`, then
    /// `check_field_line`) wherever it answers, on every byte at every position of lines with
    /// leading and trailing spaces, and it answers for the usual lines.
    #[test]
    fn plain_field_lines_split_as_the_general_path_does() {
        let general = |w: &[u8]| -> Option<(usize, (usize, usize), usize)> {
            let cr = find_line_end(w, 0).ok()??;
            let (n, v) = check_field_line(&w[..cr], true).ok()??;
            Some((n, v, cr))
        };
        let base: &[u8] = b"X-Some-Name:  value with, spaces  and 12345678 more  \r\nNext: 1\r\n";
        let mut answered = 0;
        for b in 0..=255u8 {
            for at in 0..base.len() {
                let mut w = base.to_vec();
                w[at] = b;
                for cut in [w.len(), at + 1, at + 2] {
                    let w = &w[..cut.min(w.len())];
                    if let Some(f) = plain_field_line(w, 0) {
                        answered += 1;
                        assert_eq!(
                            Some((f.name_len, f.value, f.cr)),
                            general(w),
                            "{b:#x} at {at}, {cut} bytes"
                        );
                    }
                }
            }
        }
        assert!(
            answered > 10_000,
            "the usual lines take the one pass ({answered})"
        );
        assert_eq!(
            plain_field_line(b"Host: a\r\n", 0).map(|f| (f.name_len, f.value, f.cr)),
            Some((4, (6, 7), 7))
        );
        assert!(plain_field_line(b"A:\r\n", 0).is_some_and(|f| f.value == (2, 2)));
        for other in [
            &b"A: \tb\r\n"[..],
            b"A: b\r",
            b"A: b",
            b"A : b\r\n",
            b": b\r\n",
            b"A: \x80\r\n",
        ] {
            assert!(plain_field_line(other, 0).is_none(), "{other:?}");
        }
    }
}
