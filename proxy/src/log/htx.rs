//! `%B` as HAProxy 2.6 really counts it: not wire bytes but the size of the response in its
//! internal HTX form. Checked against HAProxy 2.6.12 (tests/differential.rs):
//!
//! - start line: a 20-byte descriptor plus the version, the 3 status digits and the reason;
//! - each header: name length + value length (no `: `, no CRLF); the `connection` header is
//!   parsed away by the H1 mux (its `close`/`keep-alive` tokens dropped, the field dropped when
//!   nothing is left), and the one the mux adds on output is not counted;
//! - 1 byte for the end of headers;
//! - the body's data bytes (chunk framing removed); a chunked body adds its trailer fields
//!   (name + value) and 1 byte for the end of trailers, even when there are none.
//!
//! Errors the H1 mux answers itself (bad request, `timeout http-request`) count 0.

use crate::http::head::{RequestHead, ResponseHead};

/// `struct htx_sl`: flags, info, and the three part lengths.
const START_LINE: u64 = 20;
/// An end-of-headers or end-of-trailers block.
const END_BLOCK: u64 = 1;

/// A `connection` value as HTX keeps it: without `close` and `keep-alive`; None when empty.
fn connection_rest(value: &[u8]) -> Option<u64> {
    let kept: Vec<&[u8]> = value
        .split(|&b| b == b',')
        .map(<[u8]>::trim_ascii)
        .filter(|t| {
            !t.is_empty()
                && !t.eq_ignore_ascii_case(b"close")
                && !t.eq_ignore_ascii_case(b"keep-alive")
        })
        .collect();
    if kept.is_empty() {
        return None;
    }
    let joined: usize = kept.iter().map(|t| t.len()).sum::<usize>() + 2 * (kept.len() - 1);
    Some(joined as u64)
}

fn field_size(name: &[u8], value: &[u8]) -> u64 {
    if name.eq_ignore_ascii_case(b"connection") {
        return connection_rest(value).map_or(0, |v| name.len() as u64 + v);
    }
    (name.len() + value.len()) as u64
}

/// HTX size of a response head (start line, headers, end of headers).
pub fn head_size(head: &ResponseHead) -> u64 {
    let fields: u64 = head
        .headers
        .0
        .iter()
        .map(|h| field_size(h.name.as_bytes(), &h.value))
        .sum();
    START_LINE
        + head.version.as_str().len() as u64
        + 3
        + head.reason.len() as u64
        + fields
        + END_BLOCK
}

/// HTX size of a request head as received (`%U`, `bin`): the start line's three parts, the
/// fields, the end of headers (checked against 2.6.12's `bin`).
pub fn request_head_size(head: &RequestHead) -> u64 {
    let fields: u64 = head
        .headers
        .0
        .iter()
        .map(|h| field_size(h.name.as_bytes(), &h.value))
        .sum();
    START_LINE
        + head.method.len() as u64
        + head.target.len() as u64
        + head.version.as_str().len() as u64
        + fields
        + END_BLOCK
}

/// HTX size of a complete response the proxy generated itself (deny, redirect, return, 5xx),
/// given as the bytes sent: head plus whatever body follows it.
pub fn reply_size(wire: &[u8]) -> u64 {
    let Some(end) = wire.windows(4).position(|w| w == b"\r\n\r\n") else {
        return wire.len() as u64;
    };
    let (head, body) = wire.split_at(end + 4);
    let mut lines = head.split(|&b| b == b'\n').map(|l| l.trim_ascii_end());
    let start = lines.next().unwrap_or_default();
    // `HTTP/1.1 503 Service Unavailable`: the two spaces are not stored.
    let mut size = START_LINE + start.len().saturating_sub(2) as u64 + END_BLOCK;
    let mut chunked = false;
    for line in lines.filter(|l| !l.is_empty()) {
        if let Some(colon) = line.iter().position(|&b| b == b':') {
            let (name, value) = line.split_at(colon);
            let value = value.get(1..).unwrap_or_default().trim_ascii();
            size += field_size(name, value);
            chunked |= name.eq_ignore_ascii_case(b"transfer-encoding")
                && value.eq_ignore_ascii_case(b"chunked");
        }
    }
    // A chunked reply (a Lua service's) stores its data, not the chunk framing, and no
    // end-of-trailers block (the H1 mux makes one only when it parses a chunked message).
    if chunked {
        return size + BodySize::new(true).feed(body).saturating_sub(END_BLOCK);
    }
    size + body.len() as u64
}

/// [`reply_size`] of a response the proxy made, from its head and body (chunked when its
/// head says so).
pub fn page_size(page: &crate::http::errors::Page) -> u64 {
    let size = head_size(&page.head);
    // A chunked reply (a Lua service's, the stats page) stores its data, not the framing.
    if page.chunked() {
        return size
            + BodySize::new(true)
                .feed(&page.body)
                .saturating_sub(END_BLOCK);
    }
    size + page.body.len() as u64
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Chunk {
    Size,
    /// Rest of the chunk-size line (extensions), up to LF.
    SizeLine,
    Data,
    /// CRLF after the data.
    DataEnd,
    Trailers,
    Done,
}

/// Counts the HTX size of a response body as its (already validated) bytes are forwarded.
#[derive(Clone, Debug)]
pub struct BodySize {
    chunked: bool,
    state: Chunk,
    size: u64,
    /// The trailer line being read (bounded by the decoder's trailer limit).
    line: Vec<u8>,
}

impl BodySize {
    pub fn new(chunked: bool) -> Self {
        BodySize {
            chunked,
            state: Chunk::Size,
            size: 0,
            line: Vec::new(),
        }
    }

    /// The HTX bytes `bytes` (the next piece of the body as sent on the wire) add.
    pub fn feed(&mut self, bytes: &[u8]) -> u64 {
        if !self.chunked {
            return bytes.len() as u64;
        }
        let mut added = 0;
        let mut i = 0;
        while let Some(&b) = bytes.get(i) {
            match self.state {
                Chunk::Data => {
                    let take = usize::try_from(self.size)
                        .unwrap_or(usize::MAX)
                        .min(bytes.len() - i);
                    added += take as u64;
                    self.size -= take as u64;
                    i += take;
                    if self.size == 0 {
                        self.state = Chunk::DataEnd;
                    }
                    continue;
                }
                Chunk::Size => match char::from(b).to_digit(16) {
                    Some(d) => self.size = self.size.saturating_mul(16) + u64::from(d),
                    None if b == b'\n' => self.end_size_line(),
                    None => self.state = Chunk::SizeLine,
                },
                Chunk::SizeLine => {
                    if b == b'\n' {
                        self.end_size_line();
                    }
                }
                Chunk::DataEnd => {
                    if b == b'\n' {
                        self.state = Chunk::Size;
                    }
                }
                Chunk::Trailers => {
                    if b == b'\n' {
                        let line = std::mem::take(&mut self.line);
                        let line = line.trim_ascii_end();
                        if line.is_empty() {
                            added += END_BLOCK;
                            self.state = Chunk::Done;
                        } else if let Some(c) = line.iter().position(|&b| b == b':') {
                            let (name, value) = line.split_at(c);
                            let value = value.get(1..).unwrap_or_default().trim_ascii();
                            added += (name.len() + value.len()) as u64;
                        }
                    } else {
                        self.line.push(b);
                    }
                }
                Chunk::Done => return added,
            }
            i += 1;
        }
        added
    }

    fn end_size_line(&mut self) {
        self.state = if self.size == 0 {
            Chunk::Trailers
        } else {
            Chunk::Data
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::head::{Headers, Version};

    fn head(headers: &[(&str, &str)]) -> ResponseHead {
        let mut h = Headers::default();
        for (n, v) in headers {
            h.append(*n, *v);
        }
        ResponseHead {
            version: Version::Http11,
            status: 200,
            reason: "OK".into(),
            headers: h,
        }
    }

    // The expected values are what HAProxy 2.6.12 logged for the same responses.
    #[test]
    fn heads_match_haproxy() {
        assert_eq!(head_size(&head(&[("content-length", "2")])) + 2, 51);
        assert_eq!(head_size(&head(&[])) + 6, 40);
        assert_eq!(
            head_size(&head(&[
                ("content-length", "2"),
                ("keep-alive", "timeout=5"),
                ("connection", "keep-alive, x-foo"),
                ("x-foo", "1"),
            ])) + 2,
            91
        );
        assert_eq!(
            head_size(&head(&[("content-length", "2"), ("connection", "close")])),
            49
        );
    }

    // HAProxy 2.6.12's FRONTEND `bin` after each of these requests.
    #[test]
    fn request_heads_match_haproxy() {
        let parse = |raw: &str| {
            crate::http::h1::parse_request_head(raw.as_bytes(), &Default::default())
                .unwrap()
                .unwrap()
                .0
        };
        let r = parse("GET /f.txt HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n");
        assert_eq!(request_head_size(&r), 43);
        let r = parse(
            "GET /f.txt HTTP/1.1\r\nHost: a\r\nX-Long-Header: aaaaaaaaaaaaaaaaaaaa\r\nConnection: close\r\n\r\n",
        );
        assert_eq!(request_head_size(&r), 76);
        assert_eq!(request_head_size(&parse("GET /f.txt HTTP/1.0\r\n\r\n")), 38);
    }

    #[test]
    fn chunked_bodies_match_haproxy() {
        let h = head_size(&head(&[("transfer-encoding", "chunked")]));
        let mut b = BodySize::new(true);
        assert_eq!(h + b.feed(b"3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n"), 64);
        let mut b = BodySize::new(true);
        assert_eq!(h + b.feed(b"3\r\nabc\r\n0\r\nx-t: 12\r\n\r\n"), 67);
        // Any split gives the same total.
        let body = b"a;ext=1\r\n0123456789\r\n0\r\nx-t: 12\r\n\r\n";
        let mut whole = BodySize::new(true);
        let total = whole.feed(body);
        assert_eq!(total, 10 + 5 + 1);
        for cut in 0..body.len() {
            let mut b = BodySize::new(true);
            let (x, y) = body.split_at(cut);
            assert_eq!(b.feed(x) + b.feed(y), total, "cut at {cut}");
        }
        assert_eq!(BodySize::new(false).feed(b"abc"), 3);
    }

    #[test]
    fn replies_match_haproxy() {
        let redirect = b"HTTP/1.1 301 Moved Permanently\r\ncontent-length: 0\r\nlocation: https://example.com/x?y=1\r\nconnection: close\r\n\r\n";
        assert_eq!(reply_size(redirect), 97);
        let ret = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\ncontent-type: text/plain\r\n\r\nok";
        assert_eq!(reply_size(ret), 73);
        let page = crate::http::errors::error_response(503);
        assert_eq!(reply_size(page), 217);
        let page = crate::http::errors::deny_response(403, true);
        assert_eq!(reply_size(&page), 192);
        // A Lua service's chunked answer (HAProxy 2.6.12 logged 125 for it, tests/lua.rs).
        let svc = b"HTTP/1.1 201 Made\r\nx-svc: GET\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n23\r\nhello /a b=1 h.test\nfrom 127.0.0.1\n\r\n0\r\n\r\n";
        assert_eq!(reply_size(svc), 125);
    }
}
