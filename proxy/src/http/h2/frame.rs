//! HTTP/2 frames (RFC 9113 §4, §6): the 9-byte header, the frame types and flags, and writers
//! for the frames a server sends. Pure: bytes in, bytes out.

/// The client's connection preface (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
pub const HEADER_LEN: usize = 9;

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const PRIORITY: u8 = 0x2;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

/// Error codes (RFC 9113 §7).
pub mod code {
    pub const NO_ERROR: u32 = 0x0;
    pub const PROTOCOL_ERROR: u32 = 0x1;
    pub const INTERNAL_ERROR: u32 = 0x2;
    pub const FLOW_CONTROL_ERROR: u32 = 0x3;
    pub const STREAM_CLOSED: u32 = 0x5;
    pub const FRAME_SIZE_ERROR: u32 = 0x6;
    pub const REFUSED_STREAM: u32 = 0x7;
    pub const CANCEL: u32 = 0x8;
    pub const COMPRESSION_ERROR: u32 = 0x9;
    pub const ENHANCE_YOUR_CALM: u32 = 0xb;
}

/// Setting identifiers (RFC 9113 §6.5.2, RFC 8441 §3).
pub mod setting {
    pub const HEADER_TABLE_SIZE: u16 = 0x1;
    pub const ENABLE_PUSH: u16 = 0x2;
    pub const MAX_CONCURRENT_STREAMS: u16 = 0x3;
    pub const INITIAL_WINDOW_SIZE: u16 = 0x4;
    pub const MAX_FRAME_SIZE: u16 = 0x5;
    pub const MAX_HEADER_LIST_SIZE: u16 = 0x6;
    pub const ENABLE_CONNECT_PROTOCOL: u16 = 0x8;
}

/// Largest flow-control window (RFC 9113 §6.9.1).
pub const MAX_WINDOW: i64 = (1 << 31) - 1;
/// The default SETTINGS_MAX_FRAME_SIZE and its ceiling.
pub const DEFAULT_FRAME_SIZE: u32 = 16_384;
pub const MAX_FRAME_SIZE_LIMIT: u32 = (1 << 24) - 1;

/// A frame's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Head {
    pub len: usize,
    pub kind: u8,
    pub flags: u8,
    pub stream: u32,
}

impl Head {
    /// The header at the start of `b`, if 9 bytes are there (the reserved bit is ignored).
    pub fn parse(b: &[u8]) -> Option<Head> {
        let h: &[u8; HEADER_LEN] = b.get(..HEADER_LEN)?.try_into().ok()?;
        Some(Head {
            len: (usize::from(h[0]) << 16) | (usize::from(h[1]) << 8) | usize::from(h[2]),
            kind: h[3],
            flags: h[4],
            stream: u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff,
        })
    }

    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }
}

/// A frame header's bytes.
pub fn head_bytes(len: usize, kind: u8, flags: u8, stream: u32) -> [u8; HEADER_LEN] {
    let l = len as u32;
    let s = (stream & 0x7fff_ffff).to_be_bytes();
    [
        (l >> 16) as u8,
        (l >> 8) as u8,
        l as u8,
        kind,
        flags,
        s[0],
        s[1],
        s[2],
        s[3],
    ]
}

/// Appends a frame header.
pub fn put_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&head_bytes(len, kind, flags, stream));
}

/// A SETTINGS frame with `(identifier, value)` pairs.
pub fn put_settings(out: &mut Vec<u8>, pairs: &[(u16, u32)]) {
    put_head(out, pairs.len() * 6, SETTINGS, 0, 0);
    for (id, v) in pairs {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
}

pub fn put_settings_ack(out: &mut Vec<u8>) {
    put_head(out, 0, SETTINGS, ACK, 0);
}

pub fn put_ping_ack(out: &mut Vec<u8>, opaque: &[u8]) {
    put_head(out, opaque.len(), PING, ACK, 0);
    out.extend_from_slice(opaque);
}

pub fn put_window_update(out: &mut Vec<u8>, stream: u32, increment: u32) {
    put_head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&(increment & 0x7fff_ffff).to_be_bytes());
}

pub fn put_rst(out: &mut Vec<u8>, stream: u32, code: u32) {
    put_head(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

pub fn put_goaway(out: &mut Vec<u8>, last: u32, code: u32) {
    put_head(out, 8, GOAWAY, 0, 0);
    out.extend_from_slice(&(last & 0x7fff_ffff).to_be_bytes());
    out.extend_from_slice(&code.to_be_bytes());
}

/// A header block as HEADERS then CONTINUATION frames of at most `max` bytes each.
pub fn put_header_block(
    out: &mut Vec<u8>,
    stream: u32,
    block: &[u8],
    end_stream: bool,
    max: usize,
) {
    let max = max.max(1);
    let mut chunks = block.chunks(max);
    let first = chunks.next().unwrap_or(&[]);
    let more = block.len() > first.len();
    let mut flags = if end_stream { END_STREAM } else { 0 };
    if !more {
        flags |= END_HEADERS;
    }
    put_head(out, first.len(), HEADERS, flags, stream);
    out.extend_from_slice(first);
    let mut rest = chunks.peekable();
    while let Some(c) = rest.next() {
        let last = rest.peek().is_none();
        put_head(
            out,
            c.len(),
            CONTINUATION,
            if last { END_HEADERS } else { 0 },
            stream,
        );
        out.extend_from_slice(c);
    }
}

/// A DATA frame carrying `data`.
pub fn put_data(out: &mut Vec<u8>, stream: u32, data: &[u8], end_stream: bool) {
    put_head(
        out,
        data.len(),
        DATA,
        if end_stream { END_STREAM } else { 0 },
        stream,
    );
    out.extend_from_slice(data);
}

/// The payload of a padded frame without its padding (RFC 9113 §6.1); None: the padding is
/// longer than the frame.
pub fn unpad(head: &Head, payload: &[u8]) -> Option<(usize, usize)> {
    if !head.has(PADDED) {
        return Some((0, payload.len()));
    }
    let pad = usize::from(*payload.first()?);
    let end = payload.len().checked_sub(pad)?;
    (end >= 1).then_some((1, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_round_trip() {
        let mut b = Vec::new();
        put_head(&mut b, 0x01_02_03, HEADERS, END_HEADERS, 0x8000_0005);
        assert_eq!(
            Head::parse(&b),
            Some(Head {
                len: 0x01_02_03,
                kind: HEADERS,
                flags: END_HEADERS,
                stream: 5
            })
        );
        assert_eq!(Head::parse(&b[..8]), None);
    }

    #[test]
    fn header_blocks_split_into_continuations() {
        let mut b = Vec::new();
        put_header_block(&mut b, 3, &[7u8; 10], true, 4);
        let kinds: Vec<(u8, u8, usize)> = {
            let mut v = Vec::new();
            let mut rest = &b[..];
            while let Some(h) = Head::parse(rest) {
                v.push((h.kind, h.flags, h.len));
                rest = &rest[HEADER_LEN + h.len..];
            }
            v
        };
        assert_eq!(
            kinds,
            [
                (HEADERS, END_STREAM, 4),
                (CONTINUATION, 0, 4),
                (CONTINUATION, END_HEADERS, 2)
            ]
        );
        let mut one = Vec::new();
        put_header_block(&mut one, 1, &[], false, 16384);
        assert_eq!(
            Head::parse(&one).map(|h| (h.flags, h.len)),
            Some((END_HEADERS, 0))
        );
    }

    #[test]
    fn padding_is_checked() {
        let h = Head {
            len: 4,
            kind: DATA,
            flags: PADDED,
            stream: 1,
        };
        assert_eq!(unpad(&h, &[2, b'a', 0, 0]), Some((1, 2)));
        assert_eq!(unpad(&h, &[4, b'a', 0, 0]), None);
        assert_eq!(unpad(&h, &[]), None);
        let plain = Head { flags: 0, ..h };
        assert_eq!(unpad(&plain, b"abcd"), Some((0, 4)));
    }
}
