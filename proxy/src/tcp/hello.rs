//! What `tcp-request content` inspection reads from the first bytes of a TCP stream: the TLS
//! handshake type, the ClientHello's SNI, ALPN and version (`req.ssl_hello_type`, `req.ssl_sni`,
//! `req.ssl_alpn`, `req.ssl_ver`). Pure: no I/O; the bytes are never consumed or modified.
//!
//! Each answer is three-way, as HAProxy's fetches are: found, "need more bytes" (the buffer is a
//! valid prefix, so the rule waits for `inspect-delay`) or invalid (not TLS, or malformed: more
//! bytes cannot help). A handshake message fragmented over several TLS records is reassembled
//! (HAProxy 2.6 only reads the first record, so it misses an SNI past it).

use std::borrow::Cow;

/// Three-way result of peeking at a stream's first bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Peek<T> {
    /// The bytes so far may still become a match.
    NeedMore,
    /// Not TLS, or malformed: waiting for more cannot change the answer.
    Invalid,
    Found(T),
}

impl<T> Peek<T> {
    pub fn found(self) -> Option<T> {
        match self {
            Peek::Found(t) => Some(t),
            _ => None,
        }
    }
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> Peek<U> {
        match self {
            Peek::Found(t) => Peek::Found(f(t)),
            Peek::NeedMore => Peek::NeedMore,
            Peek::Invalid => Peek::Invalid,
        }
    }
}

const REC_HANDSHAKE: u8 = 0x16;
/// Largest plaintext fragment (RFC 8446 §5.1), plus the 2048 bytes HAProxy tolerates for
/// compressed/encrypted records.
const MAX_RECORD: usize = (1 << 14) + 2048;
const HS_CLIENT_HELLO: u8 = 1;
const EXT_SERVER_NAME: u16 = 0;
const EXT_ALPN: u16 = 16;

/// The facts a ClientHello gives to the content fetches. Strings borrow from the buffer when the
/// message sits in one record.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientHello<'a> {
    /// `legacy_version` of the ClientHello body (0x0303 for TLS 1.2 and 1.3 clients).
    pub version: u16,
    /// The first `host_name` of the server_name extension, as sent (not lowercased: HAProxy
    /// returns it verbatim, so `-i` is what makes a match case-insensitive).
    pub sni: Option<Cow<'a, str>>,
    /// The ALPN protocol names, in the client's order.
    pub alpn: Vec<Cow<'a, str>>,
}

/// One record header at `buf[off..]`: (content type, version major, fragment length).
fn record_at(buf: &[u8], off: usize) -> Peek<(u8, u8, usize)> {
    let Some(h) = buf.get(off..off + 5) else {
        // A partial header still has to look like a record to be worth waiting for.
        let part = buf.get(off..).unwrap_or(&[]);
        return match part {
            [t, ..] if *t != REC_HANDSHAKE => Peek::Invalid,
            [_, v, ..] if *v != 3 => Peek::Invalid,
            _ => Peek::NeedMore,
        };
    };
    let (typ, major) = (h[0], h[1]);
    let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
    if typ != REC_HANDSHAKE || major != 3 || len == 0 || len > MAX_RECORD {
        return Peek::Invalid;
    }
    Peek::Found((typ, major, len))
}

/// The first handshake message at the start of the stream (type and body), reassembled from as
/// many handshake records as it spans. Borrowed when it fits in the first record.
pub fn handshake(buf: &[u8]) -> Peek<(u8, Cow<'_, [u8]>)> {
    let first_len = match record_at(buf, 0) {
        Peek::Found((_, _, len)) => len,
        Peek::NeedMore => return Peek::NeedMore,
        Peek::Invalid => return Peek::Invalid,
    };
    let avail = buf.get(5..(5 + first_len).min(buf.len())).unwrap_or(&[]);
    let Some(hdr) = avail.get(..4) else {
        // The 4-byte handshake header itself may be split across records: reassemble.
        return reassemble(buf);
    };
    let body_len = usize::from(hdr[1]) << 16 | usize::from(hdr[2]) << 8 | usize::from(hdr[3]);
    if 4 + body_len <= first_len {
        return match avail.get(4..4 + body_len) {
            Some(body) => Peek::Found((hdr[0], Cow::Borrowed(body))),
            None => Peek::NeedMore,
        };
    }
    reassemble(buf)
}

/// Concatenates handshake fragments record after record until the first message is whole.
fn reassemble(buf: &[u8]) -> Peek<(u8, Cow<'_, [u8]>)> {
    let mut msg: Vec<u8> = Vec::new();
    let mut off = 0;
    loop {
        let len = match record_at(buf, off) {
            Peek::Found((_, _, len)) => len,
            Peek::NeedMore => return Peek::NeedMore,
            Peek::Invalid => return Peek::Invalid,
        };
        let frag_end = (off + 5 + len).min(buf.len());
        msg.extend_from_slice(buf.get(off + 5..frag_end).unwrap_or(&[]));
        if let [typ, a, b, c, ..] = msg[..] {
            let body_len = usize::from(a) << 16 | usize::from(b) << 8 | usize::from(c);
            // No ClientHello legitimately needs more than a few records; this bounds the work
            // a hostile peer can ask for.
            if body_len > 4 * MAX_RECORD {
                return Peek::Invalid;
            }
            if msg.len() >= 4 + body_len {
                msg.truncate(4 + body_len);
                msg.drain(..4);
                return Peek::Found((typ, Cow::Owned(msg)));
            }
        }
        if frag_end < off + 5 + len {
            return Peek::NeedMore;
        }
        off += 5 + len;
    }
}

/// `req.ssl_hello_type`: the type of the first handshake message (1 = ClientHello, 2 =
/// ServerHello), once the whole message is there.
pub fn hello_type(buf: &[u8]) -> Peek<u8> {
    handshake(buf).map(|(t, _)| t)
}

/// The ClientHello at the start of the stream (`req.ssl_sni`, `req.ssl_alpn`).
pub fn client_hello(buf: &[u8]) -> Peek<ClientHello<'_>> {
    match handshake(buf) {
        Peek::Found((HS_CLIENT_HELLO, Cow::Borrowed(body))) => match parse_client_hello(body) {
            Some(h) => Peek::Found(h),
            None => Peek::Invalid,
        },
        Peek::Found((HS_CLIENT_HELLO, Cow::Owned(body))) => match parse_client_hello(&body) {
            Some(h) => Peek::Found(h.into_owned()),
            None => Peek::Invalid,
        },
        Peek::Found(_) | Peek::Invalid => Peek::Invalid,
        Peek::NeedMore => Peek::NeedMore,
    }
}

impl ClientHello<'_> {
    pub fn into_owned(self) -> ClientHello<'static> {
        ClientHello {
            version: self.version,
            sni: self.sni.map(|s| Cow::Owned(s.into_owned())),
            alpn: self
                .alpn
                .into_iter()
                .map(|s| Cow::Owned(s.into_owned()))
                .collect(),
        }
    }
}

/// `req.ssl_ver`: the protocol version the client announces, as HAProxy encodes it
/// (`major << 16 | minor`, so TLS 1.2's 3.3 is 196611). For a TLS record this is the version in
/// the handshake body (not the record's), read once the whole first record is there; an SSLv2
/// ClientHello is also recognized.
pub fn ssl_ver(buf: &[u8]) -> Peek<i64> {
    let Some(&first) = buf.first() else {
        return Peek::NeedMore;
    };
    if (0x14..=0x17).contains(&first) || first == 0xff {
        let Some(h) = buf.get(..11) else {
            return match buf.get(1) {
                Some(v) if *v < 3 => Peek::Invalid,
                _ => Peek::NeedMore,
            };
        };
        let len = usize::from(u16::from_be_bytes([h[3], h[4]]));
        if h[1] < 3 || !(6..=MAX_RECORD).contains(&len) {
            return Peek::Invalid;
        }
        if buf.len() < 5 + len {
            return Peek::NeedMore;
        }
        return Peek::Found(i64::from(h[9]) << 16 | i64::from(h[10]));
    }
    sslv2_ver(buf)
}

/// SSLv2-compatible ClientHello (2- or 3-byte header, msg type 1).
fn sslv2_ver(buf: &[u8]) -> Peek<i64> {
    let (rlen, pad, hlen) = match buf {
        [a, b, ..] if a & 0x80 != 0 => ((usize::from(a & 0x7f) << 8) | usize::from(*b), 0, 2),
        [a, b, p, ..] if a & 0x80 == 0 => (
            (usize::from(a & 0x3f) << 8) | usize::from(*b),
            usize::from(*p),
            3,
        ),
        _ => return Peek::NeedMore,
    };
    match buf.get(hlen) {
        None => return Peek::NeedMore,
        Some(1) => {}
        Some(_) => return Peek::Invalid,
    }
    let Some(f) = buf.get(hlen + 1..hlen + 9) else {
        return Peek::NeedMore;
    };
    let version = i64::from(f[0]) << 16 | i64::from(f[1]);
    let cilen = usize::from(u16::from_be_bytes([f[2], f[3]]));
    let silen = usize::from(u16::from_be_bytes([f[4], f[5]]));
    let chlen = usize::from(u16::from_be_bytes([f[6], f[7]]));
    if cilen % 3 != 0
        || (silen != 0 && silen != 16)
        || !(16..=32).contains(&chlen)
        || rlen != 9 + cilen + silen + chlen
    {
        return Peek::Invalid;
    }
    if buf.len() < hlen + 9 + cilen + silen + chlen + pad {
        return Peek::NeedMore;
    }
    Peek::Found(version)
}

/// A cursor over a handshake body; every read is bounds-checked.
struct Rd<'a>(&'a [u8]);

impl<'a> Rd<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (a, b) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take(1).map(|b| b[0])
    }
    fn u16(&mut self) -> Option<u16> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]))
    }
    /// A vector with a `width`-byte length prefix.
    fn vec(&mut self, width: usize) -> Option<&'a [u8]> {
        let n = match width {
            1 => usize::from(self.u8()?),
            _ => usize::from(self.u16()?),
        };
        self.take(n)
    }
}

/// The ClientHello body (after the 4-byte handshake header). None if malformed.
fn parse_client_hello(body: &[u8]) -> Option<ClientHello<'_>> {
    let mut r = Rd(body);
    let version = r.u16()?;
    // HAProxy requires at least TLS 1.0 (3.1) in the hello body.
    if version >> 8 < 3 || version & 0xff < 1 {
        return None;
    }
    r.take(32)?;
    let sid = r.vec(1)?;
    if sid.len() > 32 {
        return None;
    }
    let suites = r.vec(2)?;
    if suites.len() < 2 || suites.len() % 2 != 0 {
        return None;
    }
    if r.vec(1)?.is_empty() {
        return None;
    }
    let mut hello = ClientHello {
        version,
        ..Default::default()
    };
    if r.0.is_empty() {
        return Some(hello);
    }
    let mut exts = Rd(r.vec(2)?);
    while !exts.0.is_empty() {
        let typ = exts.u16()?;
        let data = exts.vec(2)?;
        match typ {
            EXT_SERVER_NAME if hello.sni.is_none() => hello.sni = server_name(data)?,
            EXT_ALPN if hello.alpn.is_empty() => hello.alpn = alpn(data)?,
            _ => {}
        }
    }
    Some(hello)
}

/// The first `host_name` entry of a server_name extension; Some(None) if there is none.
fn server_name(data: &[u8]) -> Option<Option<Cow<'_, str>>> {
    let mut list = Rd(Rd(data).vec(2)?);
    while !list.0.is_empty() {
        let typ = list.u8()?;
        let name = list.vec(2)?;
        if typ == 0 {
            if name.is_empty() {
                return None;
            }
            return std::str::from_utf8(name)
                .ok()
                .map(|s| Some(Cow::Borrowed(s)));
        }
    }
    Some(None)
}

fn alpn(data: &[u8]) -> Option<Vec<Cow<'_, str>>> {
    let mut list = Rd(Rd(data).vec(2)?);
    let mut out = Vec::new();
    while !list.0.is_empty() {
        let p = list.vec(1)?;
        if p.is_empty() {
            return None;
        }
        out.push(Cow::Borrowed(std::str::from_utf8(p).ok()?));
    }
    Some(out)
}

#[cfg(test)]
/// A real ClientHello from rustls (TLS 1.2 + 1.3, X25519, ALPN as given).
pub(crate) fn test_hello(sni: Option<&str>, alpn: &[&str]) -> Vec<u8> {
    let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(rustls::RootCertStore::empty())
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|a| a.as_bytes().to_vec()).collect();
    // An IP address as server name makes rustls omit SNI.
    cfg.enable_sni = sni.is_some();
    let name =
        rustls_pki_types::ServerName::try_from(sni.unwrap_or("127.0.0.1").to_string()).unwrap();
    let mut conn = rustls::ClientConnection::new(std::sync::Arc::new(cfg), name).unwrap();
    let mut out = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut out).unwrap();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    use super::test_hello as rustls_hello;

    /// Re-frames a single-record handshake into records of at most `n` bytes each.
    fn fragment(rec: &[u8], n: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for chunk in rec[5..].chunks(n) {
            out.extend_from_slice(&[0x16, 3, 1]);
            out.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
            out.extend_from_slice(chunk);
        }
        out
    }

    #[test]
    fn rustls_client_hello() {
        let h = rustls_hello(Some("Api.Example.COM"), &["h2", "http/1.1"]);
        assert_eq!(hello_type(&h), Peek::Found(1));
        let ch = client_hello(&h).found().unwrap();
        // Verbatim: HAProxy does not lowercase either.
        assert_eq!(ch.sni.as_deref(), Some("Api.Example.COM"));
        assert!(matches!(ch.sni, Some(Cow::Borrowed(_))));
        assert_eq!(ch.alpn, ["h2", "http/1.1"]);
        assert_eq!(ch.version, 0x0303);
        assert_eq!(ssl_ver(&h), Peek::Found(0x30003));
    }

    #[test]
    fn no_sni() {
        let h = rustls_hello(None, &[]);
        assert_eq!(hello_type(&h), Peek::Found(1));
        let ch = client_hello(&h).found().unwrap();
        assert_eq!(ch.sni, None);
        assert!(ch.alpn.is_empty());
    }

    #[test]
    fn sni_kept_as_sent() {
        // Patched in place, so the ClientHello is otherwise byte-identical.
        let h = rustls_hello(Some("abc.example"), &[]);
        let pos = h.windows(11).position(|w| w == b"abc.example").unwrap();
        let mut m = h.clone();
        m[pos..pos + 3].copy_from_slice(b"AbC");
        assert_eq!(
            client_hello(&m).found().unwrap().sni.as_deref(),
            Some("AbC.example")
        );
    }

    #[test]
    fn every_prefix_needs_more() {
        let h = rustls_hello(Some("a.example"), &["h2"]);
        for n in 0..h.len() {
            assert_eq!(client_hello(&h[..n]), Peek::NeedMore, "prefix {n}");
            assert_eq!(hello_type(&h[..n]), Peek::NeedMore, "prefix {n}");
        }
        // Trailing bytes (the next record, early data) do not matter.
        let mut more = h.clone();
        more.extend_from_slice(b"\x17\x03\x03\x00\x01x");
        assert_eq!(
            client_hello(&more).found().unwrap().sni.as_deref(),
            Some("a.example")
        );
    }

    #[test]
    fn split_across_records() {
        let h = rustls_hello(Some("frag.example"), &["h2"]);
        for n in [1, 2, 3, 5, 40, 100, 200] {
            let f = fragment(&h, n);
            let ch = client_hello(&f)
                .found()
                .unwrap_or_else(|| panic!("records of {n}"));
            assert_eq!(ch.sni.as_deref(), Some("frag.example"), "records of {n}");
            assert_eq!(ch.alpn, ["h2"]);
            assert_eq!(hello_type(&f), Peek::Found(1));
            for cut in 0..f.len() {
                assert_eq!(client_hello(&f[..cut]), Peek::NeedMore, "{n}/{cut}");
            }
        }
    }

    #[test]
    fn not_tls() {
        for s in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"SSH-2.0-OpenSSH",
            b"\x16\x02",
            b"\x17\x03\x03\x00\x10",
            b"\x16\x03\x01\x00\x00",
            b"\x16\x03\x01\xff\xff",
        ] {
            assert_eq!(client_hello(s), Peek::Invalid, "{s:?}");
            assert_eq!(hello_type(s), Peek::Invalid, "{s:?}");
        }
        assert_eq!(ssl_ver(b"GET / HTTP/1.1\r\n"), Peek::Invalid);
    }

    #[test]
    fn server_hello_type() {
        let mut sh = vec![0x16, 3, 3, 0, 8, 2, 0, 0, 4, 3, 3, 0, 0];
        assert_eq!(hello_type(&sh), Peek::Found(2));
        assert_eq!(client_hello(&sh), Peek::Invalid);
        sh.truncate(12);
        assert_eq!(hello_type(&sh), Peek::NeedMore);
    }

    #[test]
    fn sslv2_hello_version() {
        // 2-byte header, msg 1, version 3.1, 3 bytes of ciphers, no session id, 16 challenge.
        let mut v2 = vec![0x80, 9 + 3 + 16, 1, 3, 1, 0, 3, 0, 0, 0, 16];
        v2.extend_from_slice(&[0; 3 + 16]);
        assert_eq!(ssl_ver(&v2), Peek::Found(0x30001));
        assert_eq!(ssl_ver(&v2[..v2.len() - 1]), Peek::NeedMore);
        assert_eq!(hello_type(&v2), Peek::Invalid);
    }

    /// Every single-byte corruption at every offset, and every truncation of each: no panic, and
    /// an answer of the right kind.
    #[test]
    fn corrupt_every_offset() {
        let h = rustls_hello(Some("x.example"), &["h2", "http/1.1"]);
        let f = fragment(&h, 50);
        for base in [&h, &f] {
            for i in 0..base.len() {
                for v in [0x00, 0x01, 0x7f, 0x80, 0xff] {
                    let mut m = base.clone();
                    m[i] = v;
                    let _ = client_hello(&m);
                    let _ = hello_type(&m);
                    let _ = ssl_ver(&m);
                    let _ = client_hello(&m[..i]);
                }
            }
        }
        // Length fields pointing past the end: lengths of the session id, ciphers, compression,
        // extensions, SNI list and name.
        let mut m = h.clone();
        m[5 + 4 + 2 + 32] = 33;
        assert_eq!(client_hello(&m), Peek::Invalid);
    }

    #[test]
    fn oversized_message_is_invalid() {
        // Handshake header announcing 16 MB.
        let b = [0x16, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff];
        assert_eq!(client_hello(&b), Peek::Invalid);
    }
}
