//! The PROXY protocol (haproxy.org's `proxy-protocol.txt`): the header a proxy in front of us
//! sends before the client's bytes (`bind … accept-proxy`), and the one we send to a server
//! (`server … send-proxy|send-proxy-v2`). Pure: no I/O, no clock.
//!
//! [`parse`] auto-detects version 1 (a text line, `PROXY TCP4 …\r\n`, at most 107 bytes) and
//! version 2 (a 16-byte binary prefix, addresses, then TLVs). It is incremental the way the
//! HTTP/1 codec is: the caller feeds every byte received so far and gets
//! [`Parsed::NeedMore`] (a valid prefix), [`Parsed::Done`] with the header and the number of
//! bytes it took (the rest belongs to the client's stream), or an [`Error`] (more bytes cannot
//! help). The receiver reads nothing past the header, so the caller may read exactly
//! [`wanted`] bytes and leave a TLS ClientHello in the socket.
//!
//! Compatibility: what HAProxy 2.6 accepts is accepted, what it rejects is rejected: a v2 `LOCAL`
//! command, an `AF_UNSPEC` or `AF_UNIX` block and v1 `UNKNOWN` keep the connection's own
//! addresses; a CRC32C TLV must match; an authority longer than 255 bytes or a unique id longer
//! than 128 bytes is an invalid header. The encoder writes what HAProxy 2.6 writes: TCP4 when
//! both ends are IPv4, else TCP6 with IPv4-mapped addresses, else `UNKNOWN` / `LOCAL`.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// The 12 bytes a version 2 header starts with.
pub const V2_SIG: [u8; 12] = *b"\r\n\r\n\0\r\nQUIT\n";
/// The longest version 1 line, CRLF included.
pub const V1_MAX: usize = 107;
const V1_PREFIX: &[u8] = b"PROXY ";
const V2_FIXED: usize = 16;
/// `PP2_TYPE_*` TLV types.
pub const TLV_ALPN: u8 = 0x01;
pub const TLV_AUTHORITY: u8 = 0x02;
pub const TLV_CRC32C: u8 = 0x03;
pub const TLV_NOOP: u8 = 0x04;
pub const TLV_UNIQUE_ID: u8 = 0x05;
pub const TLV_SSL: u8 = 0x20;
pub const SUBTLV_SSL_VERSION: u8 = 0x21;
pub const SUBTLV_SSL_CN: u8 = 0x22;
pub const SUBTLV_SSL_CIPHER: u8 = 0x23;
pub const SUBTLV_SSL_SIG_ALG: u8 = 0x24;
pub const SUBTLV_SSL_KEY_ALG: u8 = 0x25;
pub const TLV_NETNS: u8 = 0x30;
/// `PP2_CLIENT_*` bits of the SSL TLV's `client` byte.
pub const CLIENT_SSL: u8 = 0x01;
pub const CLIENT_CERT_CONN: u8 = 0x02;
pub const CLIENT_CERT_SESS: u8 = 0x04;
/// HAProxy's limits on the values it keeps.
pub const AUTHORITY_MAX: usize = 255;
pub const UNIQUE_ID_MAX: usize = 128;

/// Where the proxied connection came from and went to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Addresses {
    /// v1 `UNKNOWN`, v2 `LOCAL` or `AF_UNSPEC`: the connection keeps its own addresses.
    #[default]
    Unknown,
    Inet {
        src: SocketAddr,
        dst: SocketAddr,
    },
    /// v2 `AF_UNIX`: paths as sent (NUL-padded to 108 bytes on the wire, trimmed here).
    /// HAProxy 2.6 keeps the connection's own addresses for these.
    Unix {
        src: Vec<u8>,
        dst: Vec<u8>,
    },
}

impl Addresses {
    /// The (source, destination) pair a session should use instead of the socket's, if any.
    pub fn inet(&self) -> Option<(SocketAddr, SocketAddr)> {
        match self {
            Addresses::Inet { src, dst } => Some((*src, *dst)),
            _ => None,
        }
    }
}

/// The SSL TLV (`PP2_TYPE_SSL`) and its sub-TLVs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ssl {
    /// `CLIENT_SSL | CLIENT_CERT_CONN | CLIENT_CERT_SESS` bits.
    pub client: u8,
    /// 0 when the client certificate was verified (or none was presented).
    pub verify: u32,
    pub version: Option<Vec<u8>>,
    pub cn: Option<Vec<u8>>,
    pub cipher: Option<Vec<u8>>,
    pub sig_alg: Option<Vec<u8>>,
    pub key_alg: Option<Vec<u8>>,
}

/// A received header.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Header {
    /// 1 or 2.
    pub version: u8,
    /// The v2 `LOCAL` command (a health check from the proxy, not a relayed client).
    pub local: bool,
    pub addrs: Addresses,
    pub alpn: Option<Vec<u8>>,
    /// `PP2_TYPE_AUTHORITY`: the host name the client asked for (its SNI).
    pub authority: Option<Vec<u8>>,
    pub unique_id: Option<Vec<u8>>,
    /// A CRC32C TLV was present (and matched: a mismatch is an error).
    pub crc32c: bool,
    pub ssl: Option<Ssl>,
    pub netns: Option<Vec<u8>>,
    /// TLVs of other types, in order (`NOOP` excluded).
    pub other: Vec<(u8, Vec<u8>)>,
}

/// Progress of [`parse`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// The bytes so far are a valid prefix of a header.
    NeedMore,
    /// A complete header, and how many bytes of the input it took.
    Done(Box<Header>, usize),
}

/// Why a header is refused; [`Error::message`] is HAProxy's connection error text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Error {
    /// Neither `PROXY ` nor the v2 signature.
    NotHeader,
    /// Malformed: bad field, v1 line without CRLF within 107 bytes, bad TLV, CRC mismatch.
    BadHeader,
    /// A v1 protocol other than `TCP4`, `TCP6` or `UNKNOWN`.
    BadProto,
}

/// Why no header arrived, for the connection error log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    Parse(Error),
    /// The client closed (or reset) before a complete header: `truncated` if it sent some.
    Closed {
        truncated: bool,
    },
    Aborted,
    Timeout,
}

impl Failure {
    /// HAProxy 2.6's text for the connection error (`conn_err_code_str`).
    pub fn message(self) -> &'static str {
        match self {
            Failure::Parse(Error::NotHeader) => {
                "Received something which does not look like a PROXY protocol header"
            }
            Failure::Parse(Error::BadHeader) => "Received an invalid PROXY protocol header",
            Failure::Parse(Error::BadProto) => {
                "Received an unhandled protocol in the PROXY protocol header"
            }
            Failure::Closed { truncated: true } => "Truncated PROXY protocol header received",
            Failure::Closed { truncated: false } => {
                "Connection closed while waiting for PROXY protocol header"
            }
            Failure::Aborted => "Connection error while waiting for PROXY protocol header",
            Failure::Timeout => "Timeout while waiting for PROXY protocol header",
        }
    }
}

/// How many bytes of `buf` a reader should have before calling [`parse`] again: for v2, the
/// whole header once its length is known; otherwise one more than `buf` holds (a v1 line is
/// read a byte past what is there until its CRLF, up to [`V1_MAX`]). Never past the header.
pub fn wanted(buf: &[u8]) -> usize {
    if buf.len() >= V2_FIXED && buf.starts_with(&V2_SIG) {
        return V2_FIXED + usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    }
    if buf.len() < V2_FIXED && !buf.is_empty() && V2_SIG.starts_with(&buf[..buf.len().min(12)]) {
        return V2_FIXED;
    }
    (buf.len() + 1).min(V1_MAX).max(V1_PREFIX.len())
}

/// Parses the header at the start of `buf` (v1 or v2, auto-detected).
pub fn parse(buf: &[u8]) -> Result<Parsed, Error> {
    let n = buf.len().min(V2_SIG.len());
    if V2_SIG.starts_with(&buf[..n]) && !buf.is_empty() {
        return parse_v2(buf);
    }
    let n = buf.len().min(V1_PREFIX.len());
    if V1_PREFIX.starts_with(&buf[..n]) {
        return parse_v1(buf);
    }
    Err(Error::NotHeader)
}

/// Whether the start of a v1 line's protocol word can still be `TCP4`, `TCP6` or `UNKNOWN`
/// (HAProxy decides on the first four bytes).
fn v1_proto_ok(word: &[u8]) -> bool {
    let w = &word[..word.len().min(4)];
    [&b"TCP4"[..], b"TCP6", b"UNKN"]
        .iter()
        .any(|p| p.starts_with(w))
}

fn parse_v1(buf: &[u8]) -> Result<Parsed, Error> {
    let window = &buf[..buf.len().min(V1_MAX)];
    if window.len() > V1_PREFIX.len() && !v1_proto_ok(&window[V1_PREFIX.len()..]) {
        return Err(Error::BadProto);
    }
    let Some(cr) = window.windows(2).position(|w| w == b"\r\n") else {
        // A lone CR not followed by LF, or a line already too long, cannot become valid.
        if window.len() >= V1_MAX {
            return Err(Error::BadHeader);
        }
        if let Some(i) = window.iter().position(|&b| b == b'\r')
            && i + 1 < window.len()
        {
            return Err(Error::BadHeader);
        }
        if window.len() > V1_PREFIX.len() && window.contains(&b'\n') {
            return Err(Error::BadHeader);
        }
        return Ok(Parsed::NeedMore);
    };
    if cr < V1_PREFIX.len() {
        return Err(Error::NotHeader);
    }
    let line = &buf[V1_PREFIX.len()..cr];
    let consumed = cr + 2;
    let mut header = Header {
        version: 1,
        ..Header::default()
    };
    if line == b"UNKNOWN" || line.starts_with(b"UNKNOWN ") {
        return Ok(Parsed::Done(Box::new(header), consumed));
    }
    let line = std::str::from_utf8(line).map_err(|_| Error::BadHeader)?;
    let mut f = line.split(' ');
    let proto = f.next().ok_or(Error::BadHeader)?;
    let (src, dst, sp, dp) = (f.next(), f.next(), f.next(), f.next());
    let (Some(src), Some(dst), Some(sp), Some(dp), None) = (src, dst, sp, dp, f.next()) else {
        return Err(Error::BadHeader);
    };
    let (src, dst): (IpAddr, IpAddr) = match proto {
        "TCP4" => (
            IpAddr::V4(src.parse().map_err(|_| Error::BadHeader)?),
            IpAddr::V4(dst.parse().map_err(|_| Error::BadHeader)?),
        ),
        "TCP6" => (
            IpAddr::V6(src.parse().map_err(|_| Error::BadHeader)?),
            IpAddr::V6(dst.parse().map_err(|_| Error::BadHeader)?),
        ),
        _ => return Err(Error::BadProto),
    };
    header.addrs = Addresses::Inet {
        src: SocketAddr::new(src, v1_port(sp)?),
        dst: SocketAddr::new(dst, v1_port(dp)?),
    };
    Ok(Parsed::Done(Box::new(header), consumed))
}

/// A v1 port: 1 to 5 decimal digits, at most 65535.
fn v1_port(s: &str) -> Result<u16, Error> {
    if s.is_empty() || s.len() > 5 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(Error::BadHeader);
    }
    s.parse().map_err(|_| Error::BadHeader)
}

fn parse_v2(buf: &[u8]) -> Result<Parsed, Error> {
    if buf.len() < V2_FIXED {
        // The version nibble can be checked as soon as it arrives.
        if buf.len() > 12 && buf[12] >> 4 != 2 {
            return Err(Error::NotHeader);
        }
        return Ok(Parsed::NeedMore);
    }
    let ver_cmd = buf[12];
    let fam = buf[13];
    if ver_cmd >> 4 != 2 {
        return Err(Error::NotHeader);
    }
    let len = usize::from(u16::from_be_bytes([buf[14], buf[15]]));
    let total = V2_FIXED + len;
    if buf.len() < total {
        return Ok(Parsed::NeedMore);
    }
    let whole = &buf[..total];
    let body = &whole[V2_FIXED..];
    let mut header = Header {
        version: 2,
        ..Header::default()
    };
    match ver_cmd & 0x0f {
        // LOCAL: the addresses and TLVs are ignored.
        0x0 => {
            header.local = true;
            return Ok(Parsed::Done(Box::new(header), total));
        }
        0x1 => {}
        _ => return Err(Error::BadHeader),
    }
    let ip = |a: &[u8]| -> IpAddr {
        match a.len() {
            4 => IpAddr::V4(Ipv4Addr::new(a[0], a[1], a[2], a[3])),
            _ => {
                let mut o = [0u8; 16];
                o.copy_from_slice(&a[..16]);
                IpAddr::V6(Ipv6Addr::from(o))
            }
        }
    };
    let port = |a: &[u8]| u16::from_be_bytes([a[0], a[1]]);
    let tlv_start = match fam {
        // TCP or UDP over IPv4.
        0x11 | 0x12 => {
            let a = body.get(..12).ok_or(Error::BadHeader)?;
            header.addrs = Addresses::Inet {
                src: SocketAddr::new(ip(&a[0..4]), port(&a[8..10])),
                dst: SocketAddr::new(ip(&a[4..8]), port(&a[10..12])),
            };
            12
        }
        0x21 | 0x22 => {
            let a = body.get(..36).ok_or(Error::BadHeader)?;
            header.addrs = Addresses::Inet {
                src: SocketAddr::new(ip(&a[0..16]), port(&a[32..34])),
                dst: SocketAddr::new(ip(&a[16..32]), port(&a[34..36])),
            };
            36
        }
        0x31 | 0x32 => {
            let a = body.get(..216).ok_or(Error::BadHeader)?;
            let path = |p: &[u8]| p[..p.iter().position(|&b| b == 0).unwrap_or(p.len())].to_vec();
            header.addrs = Addresses::Unix {
                src: path(&a[..108]),
                dst: path(&a[108..216]),
            };
            216
        }
        // Unsupported family or transport: keep the connection's addresses, skip the rest.
        _ => return Ok(Parsed::Done(Box::new(header), total)),
    };
    tlvs(whole, V2_FIXED + tlv_start, &mut header)?;
    Ok(Parsed::Done(Box::new(header), total))
}

/// Iterates the TLVs of `b`: (type, value, offset of the value in `b`).
fn each_tlv(
    b: &[u8],
    mut f: impl FnMut(u8, &[u8], usize) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut i = 0;
    while i < b.len() {
        let hdr = b.get(i..i + 3).ok_or(Error::BadHeader)?;
        let len = usize::from(u16::from_be_bytes([hdr[1], hdr[2]]));
        let v = b.get(i + 3..i + 3 + len).ok_or(Error::BadHeader)?;
        f(hdr[0], v, i + 3)?;
        i += 3 + len;
    }
    Ok(())
}

fn tlvs(whole: &[u8], start: usize, h: &mut Header) -> Result<(), Error> {
    let mut crc_at = None;
    each_tlv(&whole[start..], |t, v, off| {
        match t {
            TLV_ALPN => h.alpn = Some(v.to_vec()),
            TLV_AUTHORITY => {
                if v.len() > AUTHORITY_MAX {
                    return Err(Error::BadHeader);
                }
                h.authority = Some(v.to_vec());
            }
            TLV_CRC32C => {
                if v.len() != 4 {
                    return Err(Error::BadHeader);
                }
                crc_at = Some(start + off);
            }
            TLV_NOOP => {}
            TLV_UNIQUE_ID => {
                if v.len() > UNIQUE_ID_MAX {
                    return Err(Error::BadHeader);
                }
                h.unique_id = Some(v.to_vec());
            }
            TLV_SSL => h.ssl = Some(ssl(v)?),
            TLV_NETNS => h.netns = Some(v.to_vec()),
            _ => h.other.push((t, v.to_vec())),
        }
        Ok(())
    })?;
    if let Some(at) = crc_at {
        let sent = u32::from_be_bytes([whole[at], whole[at + 1], whole[at + 2], whole[at + 3]]);
        if crc32c_zeroed(whole, at) != sent {
            return Err(Error::BadHeader);
        }
        h.crc32c = true;
    }
    Ok(())
}

fn ssl(v: &[u8]) -> Result<Ssl, Error> {
    let fixed = v.get(..5).ok_or(Error::BadHeader)?;
    let mut s = Ssl {
        client: fixed[0],
        verify: u32::from_be_bytes([fixed[1], fixed[2], fixed[3], fixed[4]]),
        ..Ssl::default()
    };
    each_tlv(&v[5..], |t, v, _| {
        let v = Some(v.to_vec());
        match t {
            SUBTLV_SSL_VERSION => s.version = v,
            SUBTLV_SSL_CN => s.cn = v,
            SUBTLV_SSL_CIPHER => s.cipher = v,
            SUBTLV_SSL_SIG_ALG => s.sig_alg = v,
            SUBTLV_SSL_KEY_ALG => s.key_alg = v,
            _ => {}
        }
        Ok(())
    })?;
    Ok(s)
}

/// CRC32C (Castagnoli) lookup table, reflected polynomial 0x82F63B78.
const CRC32C_TABLE: [u32; 256] = {
    let mut t = [0u32; 256];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                (c >> 1) ^ 0x82F6_3B78
            } else {
                c >> 1
            };
            k += 1;
        }
        t[i] = c;
        i += 1;
    }
    t
};

/// CRC32C of `b`.
pub fn crc32c(b: &[u8]) -> u32 {
    crc32c_zeroed(b, usize::MAX)
}

/// CRC32C of `b` with the four bytes at `zero..zero + 4` taken as zeros (the checksum field).
fn crc32c_zeroed(b: &[u8], zero: usize) -> u32 {
    let mut c = !0u32;
    for (i, &byte) in b.iter().enumerate() {
        let byte = if i >= zero && i - zero < 4 { 0 } else { byte };
        c = CRC32C_TABLE[((c ^ u32::from(byte)) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// The pair as one family: both IPv4, else both IPv6 (IPv4 ones mapped), as HAProxy sends them.
fn same_family(src: SocketAddr, dst: SocketAddr) -> (SocketAddr, SocketAddr, bool) {
    let v6 = |a: SocketAddr| match a.ip() {
        IpAddr::V4(v4) => SocketAddr::new(IpAddr::V6(v4.to_ipv6_mapped()), a.port()),
        IpAddr::V6(_) => a,
    };
    match (src.ip(), dst.ip()) {
        (IpAddr::V4(_), IpAddr::V4(_)) => (src, dst, true),
        _ => (v6(src), v6(dst), false),
    }
}

/// Appends a version 1 line: `PROXY TCP4|TCP6 src dst sport dport\r\n`, or `PROXY UNKNOWN\r\n`
/// without addresses.
pub fn encode_v1(addrs: Option<(SocketAddr, SocketAddr)>, out: &mut Vec<u8>) {
    use std::io::Write;
    let Some((src, dst)) = addrs else {
        out.extend_from_slice(b"PROXY UNKNOWN\r\n");
        return;
    };
    let (src, dst, v4) = same_family(src, dst);
    let _ = write!(
        out,
        "PROXY {} {} {} {} {}\r\n",
        if v4 { "TCP4" } else { "TCP6" },
        src.ip(),
        dst.ip(),
        src.port(),
        dst.port()
    );
}

/// The optional TLVs of a version 2 header we send.
#[derive(Clone, Debug, Default)]
pub struct Tlvs<'a> {
    pub alpn: Option<&'a [u8]>,
    pub authority: Option<&'a [u8]>,
    pub unique_id: Option<&'a [u8]>,
    pub ssl: Option<&'a Ssl>,
    /// Append a CRC32C TLV (computed over the whole header).
    pub crc32c: bool,
}

fn put_tlv(out: &mut Vec<u8>, t: u8, v: &[u8]) {
    // Values longer than a TLV holds are cut (callers bound them well below).
    let v = &v[..v.len().min(usize::from(u16::MAX) - 8)];
    out.push(t);
    out.extend_from_slice(&(v.len() as u16).to_be_bytes());
    out.extend_from_slice(v);
}

/// Appends a version 2 header: the `PROXY` command with the addresses (TCP over IPv4 when both
/// are IPv4, else over IPv6), or `LOCAL` with `AF_UNSPEC` without them; then the TLVs.
pub fn encode_v2(addrs: Option<(SocketAddr, SocketAddr)>, tlvs: &Tlvs<'_>, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&V2_SIG);
    match addrs.map(|(s, d)| same_family(s, d)) {
        None => out.extend_from_slice(&[0x20, 0x00, 0, 0]),
        Some((src, dst, v4)) => {
            out.extend_from_slice(&[0x21, if v4 { 0x11 } else { 0x21 }, 0, 0]);
            for a in [src, dst] {
                match a.ip() {
                    IpAddr::V4(ip) => out.extend_from_slice(&ip.octets()),
                    IpAddr::V6(ip) => out.extend_from_slice(&ip.octets()),
                }
            }
            out.extend_from_slice(&src.port().to_be_bytes());
            out.extend_from_slice(&dst.port().to_be_bytes());
        }
    }
    // HAProxy's order: the checksum first (filled in last), then ALPN, authority, unique id, SSL.
    let crc_at = tlvs.crc32c.then(|| {
        put_tlv(out, TLV_CRC32C, &[0; 4]);
        out.len() - 4
    });
    if let Some(v) = tlvs.alpn {
        put_tlv(out, TLV_ALPN, v);
    }
    if let Some(v) = tlvs.authority {
        put_tlv(out, TLV_AUTHORITY, &v[..v.len().min(AUTHORITY_MAX)]);
    }
    if let Some(v) = tlvs.unique_id {
        put_tlv(out, TLV_UNIQUE_ID, &v[..v.len().min(UNIQUE_ID_MAX)]);
    }
    if let Some(s) = tlvs.ssl {
        let mut v = Vec::with_capacity(64);
        v.push(s.client);
        v.extend_from_slice(&s.verify.to_be_bytes());
        for (t, sub) in [
            (SUBTLV_SSL_VERSION, &s.version),
            (SUBTLV_SSL_CN, &s.cn),
            (SUBTLV_SSL_CIPHER, &s.cipher),
            (SUBTLV_SSL_SIG_ALG, &s.sig_alg),
            (SUBTLV_SSL_KEY_ALG, &s.key_alg),
        ] {
            if let Some(sub) = sub {
                put_tlv(&mut v, t, sub);
            }
        }
        put_tlv(out, TLV_SSL, &v);
    }
    let len = (out.len() - start - V2_FIXED) as u16;
    out[start + 14..start + 16].copy_from_slice(&len.to_be_bytes());
    if let Some(at) = crc_at {
        let c = crc32c(&out[start..]);
        out[at..at + 4].copy_from_slice(&c.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    fn done(b: &[u8]) -> (Header, usize) {
        match parse(b) {
            Ok(Parsed::Done(h, n)) => (*h, n),
            other => panic!("{other:?} for {b:?}"),
        }
    }

    /// Every strict prefix of a valid header needs more; the whole parses to the same header
    /// with trailing bytes left alone.
    fn every_prefix(b: &[u8]) -> Header {
        for i in 0..b.len() {
            assert_eq!(parse(&b[..i]), Ok(Parsed::NeedMore), "prefix {i} of {b:?}");
            assert!(wanted(&b[..i]) <= b.len(), "wanted past the header at {i}");
            assert!(wanted(&b[..i]) > i);
        }
        let mut more = b.to_vec();
        more.extend_from_slice(b"\x16\x03\x01GET / HTTP/1.1\r\n");
        let (h, n) = done(&more);
        assert_eq!(n, b.len());
        assert_eq!(done(b), (h.clone(), b.len()));
        h
    }

    #[test]
    fn v1_tcp4_tcp6_unknown() {
        let h = every_prefix(b"PROXY TCP4 192.168.0.1 10.0.0.2 56324 443\r\n");
        assert_eq!(h.version, 1);
        assert_eq!(
            h.addrs.inet(),
            Some((sa("192.168.0.1:56324"), sa("10.0.0.2:443")))
        );
        let h = every_prefix(b"PROXY TCP6 2001:db8::1 ::1 1 65535\r\n");
        assert_eq!(
            h.addrs.inet(),
            Some((sa("[2001:db8::1]:1"), sa("[::1]:65535")))
        );
        let h = every_prefix(b"PROXY UNKNOWN\r\n");
        assert_eq!(h.addrs, Addresses::Unknown);
        // UNKNOWN ignores the rest of the line, even at the worst-case length.
        let mut l = b"PROXY UNKNOWN ".to_vec();
        l.resize(V1_MAX - 2, b'f');
        l.extend_from_slice(b"\r\n");
        assert_eq!(l.len(), V1_MAX);
        assert_eq!(every_prefix(&l).addrs, Addresses::Unknown);
    }

    #[test]
    fn v1_refused() {
        for bad in [
            &b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n"[..],
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n",
            b"PROXY TCP4 ::1 ::1 1 2\r\n",
            b"PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 -1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 +1 2\r\n",
            b"PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n",
            b"PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n",
            b"PROXY TCP4 1.2.3.4 5.6.7.8 1 2\rx",
            b"PROXY UNKNOWNX\r\n",
        ] {
            assert_eq!(
                parse(bad),
                Err(Error::BadHeader),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        for bad in [
            &b"GET / HTTP/1.1\r\n"[..],
            b"PROXX",
            b"proxy ",
            b"\x16\x03\x01",
            b"P\r\n",
        ] {
            assert_eq!(parse(bad), Err(Error::NotHeader), "{bad:?}");
        }
    }

    #[test]
    fn v1_too_long() {
        let mut l = b"PROXY UNKNOWN ".to_vec();
        l.resize(V1_MAX - 1, b'f');
        assert_eq!(parse(&l), Ok(Parsed::NeedMore));
        l.push(b'f');
        assert_eq!(parse(&l), Err(Error::BadHeader));
        // The CRLF one byte too late.
        l.extend_from_slice(b"\r\n");
        assert_eq!(parse(&l), Err(Error::BadHeader));
    }

    fn v2(ver_cmd: u8, fam: u8, body: &[u8]) -> Vec<u8> {
        let mut b = V2_SIG.to_vec();
        b.push(ver_cmd);
        b.push(fam);
        b.extend_from_slice(&(body.len() as u16).to_be_bytes());
        b.extend_from_slice(body);
        b
    }

    #[test]
    fn v2_inet_and_tlvs() {
        let mut body = vec![127, 0, 0, 9, 127, 0, 0, 1, 0x30, 0x39, 0, 80];
        put_tlv(&mut body, TLV_AUTHORITY, b"www.example.com");
        put_tlv(&mut body, TLV_NOOP, b"");
        put_tlv(&mut body, TLV_UNIQUE_ID, b"abc-123");
        put_tlv(&mut body, 0xE0, b"custom");
        let mut ssl = vec![CLIENT_SSL | CLIENT_CERT_CONN, 0, 0, 0, 0];
        put_tlv(&mut ssl, SUBTLV_SSL_VERSION, b"TLSv1.3");
        put_tlv(&mut ssl, SUBTLV_SSL_CN, b"client");
        put_tlv(&mut ssl, 0x2f, b"ignored");
        put_tlv(&mut body, TLV_SSL, &ssl);
        let h = every_prefix(&v2(0x21, 0x11, &body));
        assert_eq!(h.version, 2);
        assert!(!h.local);
        assert_eq!(
            h.addrs.inet(),
            Some((sa("127.0.0.9:12345"), sa("127.0.0.1:80")))
        );
        assert_eq!(h.authority.as_deref(), Some(&b"www.example.com"[..]));
        assert_eq!(h.unique_id.as_deref(), Some(&b"abc-123"[..]));
        assert_eq!(h.other, vec![(0xE0, b"custom".to_vec())]);
        let s = h.ssl.unwrap();
        assert_eq!(s.client, 3);
        assert_eq!(s.version.as_deref(), Some(&b"TLSv1.3"[..]));
        assert_eq!(s.cn.as_deref(), Some(&b"client"[..]));
        assert!(!h.crc32c);
    }

    #[test]
    fn v2_inet6_unix_local_unspec() {
        let mut body = Vec::new();
        body.extend_from_slice(&"2001:db8::7".parse::<Ipv6Addr>().unwrap().octets());
        body.extend_from_slice(&Ipv6Addr::LOCALHOST.octets());
        body.extend_from_slice(&[0, 1, 0, 2]);
        let h = every_prefix(&v2(0x21, 0x21, &body));
        assert_eq!(h.addrs.inet(), Some((sa("[2001:db8::7]:1"), sa("[::1]:2"))));
        let mut body = vec![0u8; 216];
        body[..4].copy_from_slice(b"/a/b");
        body[108..110].copy_from_slice(b"/c");
        let h = every_prefix(&v2(0x21, 0x31, &body));
        assert_eq!(
            h.addrs,
            Addresses::Unix {
                src: b"/a/b".to_vec(),
                dst: b"/c".to_vec()
            }
        );
        assert_eq!(h.addrs.inet(), None);
        // LOCAL ignores whatever follows, even garbage TLVs.
        let h = every_prefix(&v2(0x20, 0x11, &[1, 2, 3, 4, 5]));
        assert!(h.local);
        assert_eq!(h.addrs, Addresses::Unknown);
        let h = every_prefix(&v2(0x21, 0x00, &[]));
        assert_eq!(h.addrs, Addresses::Unknown);
    }

    #[test]
    fn v2_refused() {
        // Version 1 in the v2 frame is not a header; an unknown command is invalid.
        assert_eq!(parse(&v2(0x11, 0x11, &[0; 12])), Err(Error::NotHeader));
        assert_eq!(
            parse(&v2(0x11, 0x11, &[0; 12])[..13]),
            Err(Error::NotHeader)
        );
        assert_eq!(parse(&v2(0x22, 0x11, &[0; 12])), Err(Error::BadHeader));
        // Address blocks shorter than the family needs.
        assert_eq!(parse(&v2(0x21, 0x11, &[0; 11])), Err(Error::BadHeader));
        assert_eq!(parse(&v2(0x21, 0x21, &[0; 35])), Err(Error::BadHeader));
        assert_eq!(parse(&v2(0x21, 0x31, &[0; 215])), Err(Error::BadHeader));
        // A TLV overrunning the header, a TLV header cut short.
        let mut body = vec![0u8; 12];
        body.extend_from_slice(&[TLV_AUTHORITY, 0, 5, b'a']);
        assert_eq!(parse(&v2(0x21, 0x11, &body)), Err(Error::BadHeader));
        let mut body = vec![0u8; 12];
        body.extend_from_slice(&[TLV_AUTHORITY, 0]);
        assert_eq!(parse(&v2(0x21, 0x11, &body)), Err(Error::BadHeader));
        // Values over HAProxy's limits.
        let mut body = vec![0u8; 12];
        put_tlv(&mut body, TLV_AUTHORITY, &[b'a'; 256]);
        assert_eq!(parse(&v2(0x21, 0x11, &body)), Err(Error::BadHeader));
        let mut body = vec![0u8; 12];
        put_tlv(&mut body, TLV_UNIQUE_ID, &[b'a'; 129]);
        assert_eq!(parse(&v2(0x21, 0x11, &body)), Err(Error::BadHeader));
        let mut body = vec![0u8; 12];
        put_tlv(&mut body, TLV_UNIQUE_ID, &[b'a'; 128]);
        assert!(parse(&v2(0x21, 0x11, &body)).is_ok());
        // An SSL TLV shorter than its fixed part; a CRC32C TLV of the wrong size.
        let mut body = vec![0u8; 12];
        put_tlv(&mut body, TLV_SSL, &[1, 0, 0, 0]);
        assert_eq!(parse(&v2(0x21, 0x11, &body)), Err(Error::BadHeader));
        let mut body = vec![0u8; 12];
        put_tlv(&mut body, TLV_CRC32C, &[0; 3]);
        assert_eq!(parse(&v2(0x21, 0x11, &body)), Err(Error::BadHeader));
        // A damaged signature.
        let mut b = v2(0x21, 0x11, &[0; 12]);
        b[5] = b'X';
        assert_eq!(parse(&b), Err(Error::NotHeader));
        assert_eq!(parse(&b[..6]), Err(Error::NotHeader));
    }

    #[test]
    fn crc32c_known_answer_and_check() {
        assert_eq!(crc32c(b"123456789"), 0xE306_9283);
        let addrs = Some((sa("127.0.0.2:4000"), sa("127.0.0.1:443")));
        let mut b = Vec::new();
        let t = Tlvs {
            authority: Some(b"example.org"),
            crc32c: true,
            ..Tlvs::default()
        };
        encode_v2(addrs, &t, &mut b);
        let h = every_prefix(&b);
        assert!(h.crc32c);
        assert_eq!(h.authority.as_deref(), Some(&b"example.org"[..]));
        // Any flipped bit past the signature fails the check (or the parse).
        for i in 12..b.len() {
            let mut c = b.clone();
            c[i] ^= 0x01;
            match parse(&c) {
                Ok(Parsed::Done(h, n)) => {
                    assert!(
                        n != c.len() || !h.crc32c || i == 12,
                        "byte {i} flipped: {h:?}"
                    );
                }
                Ok(Parsed::NeedMore) | Err(_) => {}
            }
        }
    }

    #[test]
    fn encode_round_trips() {
        let cases = [
            (
                Some((sa("127.0.0.9:5000"), sa("127.0.0.1:80"))),
                "PROXY TCP4 127.0.0.9 127.0.0.1 5000 80\r\n",
            ),
            (
                Some((sa("[2001:db8::1]:1"), sa("127.0.0.1:80"))),
                "PROXY TCP6 2001:db8::1 ::ffff:127.0.0.1 1 80\r\n",
            ),
            (None, "PROXY UNKNOWN\r\n"),
        ];
        for (addrs, line) in cases {
            let mut b = Vec::new();
            encode_v1(addrs, &mut b);
            assert_eq!(String::from_utf8(b.clone()).unwrap(), line);
            let h = every_prefix(&b);
            let mut v2b = Vec::new();
            encode_v2(addrs, &Tlvs::default(), &mut v2b);
            let h2 = every_prefix(&v2b);
            assert_eq!(h.addrs, h2.addrs);
            assert_eq!(h2.local, addrs.is_none());
        }
        let ssl = Ssl {
            client: CLIENT_SSL,
            verify: 0,
            version: Some(b"TLSv1.2".to_vec()),
            cn: Some(b"cn".to_vec()),
            ..Ssl::default()
        };
        let t = Tlvs {
            alpn: Some(b"h2"),
            authority: Some(b"a.example"),
            unique_id: Some(b"id-1"),
            ssl: Some(&ssl),
            crc32c: true,
        };
        let mut b = Vec::new();
        encode_v2(Some((sa("127.0.0.9:5000"), sa("127.0.0.1:80"))), &t, &mut b);
        let h = every_prefix(&b);
        assert_eq!(h.alpn.as_deref(), Some(&b"h2"[..]));
        assert_eq!(h.unique_id.as_deref(), Some(&b"id-1"[..]));
        assert_eq!(h.ssl, Some(ssl));
        assert!(h.crc32c);
    }
}
