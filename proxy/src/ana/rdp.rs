//! The RDP cookie of a Remote Desktop client's first packet (`Cookie: mstshash=<user>\r\n`
//! after the 11 bytes of TPKT and X.224 headers), read as HAProxy 2.6's
//! `fetch_rdp_cookie_name`: `req.rdp_cookie`, `balance rdp-cookie`, `persist rdp-cookie`.

/// What the request buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rdp<'a> {
    /// The value of the cookie asked for (the first cookie without a name).
    Cookie(&'a [u8]),
    /// Not enough bytes yet to tell.
    TooShort,
    NotCookie,
}

/// The cookie named `name` (any name when None, case-insensitive) in `buf`.
pub fn cookie<'a>(buf: &'a [u8], name: Option<&str>) -> Rdp<'a> {
    if buf.len() <= 11 {
        return Rdp::TooShort;
    }
    let mut d = &buf[11..];
    if d.len() <= 7 {
        return Rdp::TooShort;
    }
    if !d[..7].eq_ignore_ascii_case(b"Cookie:") {
        return Rdp::NotCookie;
    }
    d = &d[7..];
    while let [b' ', rest @ ..] = d {
        d = rest;
    }
    match name {
        Some(n) => {
            let n = n.as_bytes();
            if d.len() <= n.len() {
                return Rdp::TooShort;
            }
            if d[n.len()] != b'=' || !d[..n.len()].eq_ignore_ascii_case(n) {
                return Rdp::NotCookie;
            }
            d = &d[n.len() + 1..];
        }
        None => {
            let Some(eq) = d.iter().position(|c| matches!(c, b'=' | b'\r' | b'\n')) else {
                return Rdp::TooShort;
            };
            if d[eq] != b'=' {
                return Rdp::NotCookie;
            }
            d = &d[eq + 1..];
        }
    }
    let end = d.iter().position(|c| *c == b'\r').unwrap_or(d.len());
    match d.get(end..end + 2) {
        None => Rdp::TooShort,
        Some(b"\r\n") => Rdp::Cookie(&d[..end]),
        Some(_) => Rdp::NotCookie,
    }
}

/// `persist rdp-cookie`: the server address HAProxy's load balancer wrote into the cookie
/// (`<addr>.<port>.0000`: the IPv4 address as the decimal of its bytes read in host order
/// on little-endian, and the port likewise byte-swapped).
pub fn persist_addr(v: &[u8]) -> Option<std::net::SocketAddrV4> {
    let s = std::str::from_utf8(v).ok()?;
    let mut it = s.split('.');
    let addr: u32 = it.next()?.parse().ok()?;
    let port: u32 = it.next()?.parse().ok()?;
    // HAProxy wants a '.' after the port.
    it.next()?;
    let ip = std::net::Ipv4Addr::from(addr.to_le_bytes());
    let port = u16::try_from(port).ok()?.swap_bytes();
    Some(std::net::SocketAddrV4::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PKT: &[u8] =
        b"\x03\x00\x00\x2a\x25\xe0\x00\x00\x00\x00\x00Cookie: mstshash=alice\r\n\x01\x00\x08\x00";

    #[test]
    fn reads_the_cookie_as_haproxy() {
        assert_eq!(cookie(PKT, None), Rdp::Cookie(b"alice"));
        assert_eq!(cookie(PKT, Some("MSTSHASH")), Rdp::Cookie(b"alice"));
        assert_eq!(cookie(PKT, Some("msts")), Rdp::NotCookie);
        assert_eq!(cookie(&PKT[..30], None), Rdp::TooShort);
        assert_eq!(cookie(&PKT[..11], None), Rdp::TooShort);
        assert_eq!(
            cookie(
                b"\x03\x00\x00\x2a\x25\xe0\x00\x00\x00\x00\x00GET / HTTP/1.1\r\n",
                None
            ),
            Rdp::NotCookie
        );
        // 127.0.0.2:3389 as HAProxy writes it.
        let a = persist_addr(b"33554559.15629.0000").unwrap();
        assert_eq!(a.to_string(), "127.0.0.2:3389");
    }
}
