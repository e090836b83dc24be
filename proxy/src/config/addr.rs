//! Addresses as `bind`, `server`, `stats socket` and `log` write them (HAProxy's `str2sa_range`
//! rules): `[ipv4@|ipv6@]host:port`, `*:port`, `:::port`, `[v6]:port`, `unix@path`, bare paths,
//! `fd@N`. Host names go through the caller's resolver. Errors are HAProxy's texts.

use super::model::BindAddr;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

pub type Resolver<'a> = &'a dyn Fn(&str) -> Option<IpAddr>;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Any,
    V4,
    V6,
}

/// Splits `host:port` on the last colon (so `::1:80` is `::1` port 80), or `[v6]:port`.
fn split_host_port(s: &str) -> (&str, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[')
        && let Some((host, after)) = rest.split_once(']')
    {
        return (host, after.strip_prefix(':'));
    }
    match s.rsplit_once(':') {
        Some((h, p)) => (h, Some(p)),
        None => (s, None),
    }
}

fn parse_host(host: &str, fam: Family, whole: &str, resolve: Resolver) -> Result<IpAddr, String> {
    let ip = if host.is_empty() || host == "*" {
        if fam == Family::V6 {
            IpAddr::V6(Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(Ipv4Addr::UNSPECIFIED)
        }
    } else if let Ok(ip) = host.parse::<IpAddr>() {
        ip
    } else {
        resolve(host).ok_or_else(|| format!("invalid address: '{host}' in '{whole}'"))?
    };
    match (fam, ip) {
        (Family::V4, IpAddr::V6(_)) | (Family::V6, IpAddr::V4(_)) => {
            Err(format!("invalid address: '{host}' in '{whole}'"))
        }
        _ => Ok(ip),
    }
}

/// Port or `lo-hi` range; 0 is refused when `allow_zero` is false.
fn parse_ports(p: &str, whole: &str, allow_zero: bool) -> Result<(u16, u16), String> {
    if let Some(c) = p.chars().find(|c| !c.is_ascii_digit() && *c != '-') {
        return Err(format!(
            "invalid character '{c}' in port number '{p}' in '{whole}'"
        ));
    }
    let one = |s: &str| -> Result<u16, String> {
        match s.parse::<u32>() {
            Ok(n) if n <= 65535 && (allow_zero || n > 0) => Ok(n as u16),
            _ => Err(format!("invalid port '{s}'")),
        }
    };
    match p.split_once('-') {
        Some((lo, hi)) => {
            let (lo, hi) = (one(lo)?, one(hi)?);
            if lo > hi {
                return Err(format!("invalid port range '{p}'"));
            }
            Ok((lo, hi))
        }
        None => {
            let n = one(p)?;
            Ok((n, n))
        }
    }
}

fn strip_family(s: &str) -> (Family, &str) {
    if let Some(r) = s.strip_prefix("ipv4@") {
        (Family::V4, r)
    } else if let Some(r) = s.strip_prefix("ipv6@") {
        (Family::V6, r)
    } else if let Some(r) = s.strip_prefix("tcp4@") {
        (Family::V4, r)
    } else if let Some(r) = s.strip_prefix("tcp6@") {
        (Family::V6, r)
    } else if let Some(r) = s.strip_prefix("tcp@") {
        (Family::Any, r)
    } else {
        (Family::Any, s)
    }
}

/// One `bind` argument: a comma-separated list of addresses, each possibly a port range.
pub fn parse_bind(arg: &str, resolve: Resolver) -> Result<Vec<BindAddr>, String> {
    let mut out = Vec::new();
    for one in arg.split(',') {
        if let Some(path) = one.strip_prefix("unix@") {
            out.push(BindAddr::Unix(path.to_string()));
            continue;
        }
        if let Some(name) = one.strip_prefix("abns@") {
            if name.len() > MAX_ABNS_NAME {
                return Err(format!(
                    "socket path '{one}' too long (max {MAX_ABNS_NAME})"
                ));
            }
            out.push(BindAddr::Abns(name.to_string()));
            continue;
        }
        if one.starts_with('/') {
            out.push(BindAddr::Unix(one.to_string()));
            continue;
        }
        if let Some(fd) = one.strip_prefix("fd@") {
            let n = fd.parse::<i32>().ok().filter(|n| *n >= 0).ok_or_else(|| {
                format!("file descriptor '{fd}' is not a valid integer in '{one}'")
            })?;
            out.push(BindAddr::Fd(n));
            continue;
        }
        let (fam, rest) = strip_family(one);
        if let Some((proto, _)) = rest.split_once('@') {
            return Err(format!(
                "address family '{proto}@' not supported in '{one}'"
            ));
        }
        let (host, port) = split_host_port(rest);
        let Some(port) = port else {
            return Err(format!("missing port specification in '{one}'"));
        };
        let ip = parse_host(host, fam, one, resolve)?;
        let (lo, hi) = parse_ports(port, one, false)?;
        if usize::from(hi - lo) >= 1024 {
            return Err(format!(
                "invalid port range '{port}' (more than 1024 ports)"
            ));
        }
        for p in lo..=hi {
            out.push(BindAddr::Inet(SocketAddr::new(ip, p)));
        }
    }
    Ok(out)
}

/// A server reached over a unix stream socket: `unix@<path>`, a bare absolute path, or
/// `abns@<name>` (Linux's abstract namespace).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum UnixAddr {
    Path(String),
    Abstract(String),
}

/// HAProxy's limits (str2sa_range): a path leaves room for the `.<pid>.tmp` suffix a bind
/// uses while it replaces a socket; an abstract name only for the leading NUL.
const MAX_UNIX_PATH: usize = 97;
const MAX_ABNS_NAME: usize = 107;

/// A `server` address naming a unix socket, or `None` for an inet one. `Err` is HAProxy's
/// message (with its trailing newline, which HAProxy prints as an empty line).
pub fn parse_unix_server(arg: &str) -> Option<Result<UnixAddr, String>> {
    let (addr, len, max) = if let Some(n) = arg.strip_prefix("abns@") {
        (UnixAddr::Abstract(n.to_string()), n.len(), MAX_ABNS_NAME)
    } else if let Some(p) = arg.strip_prefix("unix@") {
        (UnixAddr::Path(p.to_string()), p.len(), MAX_UNIX_PATH)
    } else if arg.starts_with('/') {
        (UnixAddr::Path(arg.to_string()), arg.len(), MAX_UNIX_PATH)
    } else {
        return None;
    };
    if len > max {
        return Some(Err(format!("socket path '{arg}' too long (max {max})\n")));
    }
    Some(Ok(addr))
}

/// A `server` address: `host[:port]` (no port = the port the client connected to, kept as 0).
pub fn parse_server(arg: &str, resolve: Resolver) -> Result<SocketAddr, String> {
    if parse_unix_server(arg).is_some() {
        return Err(format!(
            "unix socket addresses are not supported here ('{arg}')"
        ));
    }
    let (fam, rest) = strip_family(arg);
    let (host, port) = split_host_port(rest);
    let port = match port {
        None | Some("") => 0,
        Some(p) if p.starts_with(['+', '-']) => {
            return Err(format!("port offsets are not supported ('{arg}')"));
        }
        Some(p) => parse_ports(p, arg, true).and_then(|(lo, hi)| {
            if lo == hi {
                Ok(lo)
            } else {
                Err(format!("port ranges not allowed in '{arg}'"))
            }
        })?,
    };
    let ip = match parse_host(host, fam, arg, resolve) {
        Ok(ip) => ip,
        Err(_) if !host.is_empty() && host.parse::<IpAddr>().is_err() => {
            return Err(format!("could not resolve address '{host}'"));
        }
        Err(e) => return Err(e),
    };
    Ok(SocketAddr::new(ip, port))
}

/// A `server` line's address, its name left for later: `(ip:port, None)` for an IP, or
/// `(0.0.0.0:port, Some(name))` for a host name (`init-addr` and `resolvers` decide its address).
pub fn parse_server_spec(arg: &str) -> Result<(SocketAddr, Option<String>), String> {
    let (_, rest) = strip_family(arg);
    let (host, _) = split_host_port(rest);
    let is_name = !host.is_empty() && host.parse::<IpAddr>().is_err() && host != "*";
    let unspec = |_: &str| Some(IpAddr::from([0, 0, 0, 0]));
    let never = |_: &str| None;
    let a = parse_server(arg, if is_name { &unspec } else { &never })?;
    Ok((a, is_name.then(|| host.to_string())))
}

/// A plain IP address (`addr` server option, `option forwardfor except`).
pub fn parse_ip(s: &str) -> Option<IpAddr> {
    s.parse().ok()
}

/// `<ip>[/<mask>]` where mask is a prefix length or a dotted IPv4 netmask.
pub fn parse_net(s: &str) -> Option<(IpAddr, u8)> {
    let (ip, mask) = match s.split_once('/') {
        Some((i, m)) => (i, Some(m)),
        None => (s, None),
    };
    let ip: IpAddr = ip.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = match mask {
        None => max,
        Some(m) => match m.parse::<u8>() {
            Ok(n) if n <= max => n,
            Ok(_) => return None,
            Err(_) => {
                let m: Ipv4Addr = m.parse().ok()?;
                let bits = u32::from(m);
                if bits.leading_ones() + bits.trailing_zeros() != 32 || !ip.is_ipv4() {
                    return None;
                }
                bits.leading_ones() as u8
            }
        },
    };
    Some((ip, len))
}

/// A `log` target address: `ip[:port]` (port 514 by default), with optional `udp@`-style
/// prefixes.
pub fn parse_log_inet(arg: &str, resolve: Resolver) -> Result<SocketAddr, String> {
    let body = ["udp@", "udp4@", "udp6@", "ipv4@", "ipv6@"]
        .iter()
        .find_map(|p| arg.strip_prefix(p))
        .unwrap_or(arg);
    let fam = if arg.starts_with("udp6@") || arg.starts_with("ipv6@") {
        Family::V6
    } else if arg.starts_with("udp4@") || arg.starts_with("ipv4@") {
        Family::V4
    } else {
        Family::Any
    };
    // A bare IPv6 address has colons but no port.
    let (host, port) = if body.parse::<Ipv6Addr>().is_ok() {
        (body, None)
    } else {
        split_host_port(body)
    };
    let ip = parse_host(host, fam, arg, resolve)?;
    let port = match port {
        None => 514,
        Some(p) => parse_ports(p, arg, false).and_then(|(lo, hi)| {
            if lo == hi {
                Ok(lo)
            } else {
                Err(format!("port ranges not allowed in '{arg}'"))
            }
        })?,
    };
    Ok(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn res(h: &str) -> Option<IpAddr> {
        (h == "localhost").then_some(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    fn inet(s: &str) -> BindAddr {
        BindAddr::Inet(s.parse().unwrap())
    }

    #[test]
    fn unix_server_forms() {
        let u = |s: &str| parse_unix_server(s).map(|r| r.unwrap());
        assert_eq!(u("/run/a.sock"), Some(UnixAddr::Path("/run/a.sock".into())));
        assert_eq!(
            u("unix@/run/a.sock"),
            Some(UnixAddr::Path("/run/a.sock".into()))
        );
        assert_eq!(
            u("abns@ingress"),
            Some(UnixAddr::Abstract("ingress".into()))
        );
        assert_eq!(u("127.0.0.1:80"), None);
        assert_eq!(u("relative.sock"), None);
        let long = format!("/{}", "a".repeat(97));
        assert_eq!(
            parse_unix_server(&long).unwrap().unwrap_err(),
            format!("socket path '{long}' too long (max 97)\n")
        );
        assert!(
            parse_unix_server(&format!("abns@{}", "a".repeat(107)))
                .unwrap()
                .is_ok()
        );
        assert!(
            parse_unix_server(&format!("abns@{}", "a".repeat(108)))
                .unwrap()
                .is_err()
        );
        // Where only inet addresses make sense (peers, nameservers) a socket is refused.
        assert!(parse_server("/run/a.sock", &res).is_err());
    }

    #[test]
    fn bind_forms() {
        assert_eq!(parse_bind("*:80", &res).unwrap(), [inet("0.0.0.0:80")]);
        assert_eq!(parse_bind(":80", &res).unwrap(), [inet("0.0.0.0:80")]);
        assert_eq!(parse_bind(":::80", &res).unwrap(), [inet("[::]:80")]);
        assert_eq!(parse_bind("ipv6@:80", &res).unwrap(), [inet("[::]:80")]);
        assert_eq!(parse_bind("[::1]:80", &res).unwrap(), [inet("[::1]:80")]);
        assert_eq!(parse_bind("::1:80", &res).unwrap(), [inet("[::1]:80")]);
        assert_eq!(
            parse_bind("ipv4@127.0.0.1:8080", &res).unwrap(),
            [inet("127.0.0.1:8080")]
        );
        assert_eq!(
            parse_bind("localhost:81", &res).unwrap(),
            [inet("127.0.0.1:81")]
        );
        assert_eq!(
            parse_bind("unix@/run/x.sock", &res).unwrap(),
            [BindAddr::Unix("/run/x.sock".into())]
        );
        assert_eq!(
            parse_bind("/run/y.sock", &res).unwrap(),
            [BindAddr::Unix("/run/y.sock".into())]
        );
        assert_eq!(parse_bind("fd@3", &res).unwrap(), [BindAddr::Fd(3)]);
        assert_eq!(
            parse_bind(":80,:81-82", &res).unwrap(),
            [inet("0.0.0.0:80"), inet("0.0.0.0:81"), inet("0.0.0.0:82")]
        );
    }

    #[test]
    fn bind_errors() {
        let e = |s: &str| parse_bind(s, &res).unwrap_err();
        assert_eq!(e("1.2.3.4"), "missing port specification in '1.2.3.4'");
        assert_eq!(e(":99999"), "invalid port '99999'");
        assert_eq!(e(":0"), "invalid port '0'");
        assert_eq!(e(":80-70"), "invalid port range '80-70'");
        assert_eq!(e(":x"), "invalid character 'x' in port number 'x' in ':x'");
        assert_eq!(
            e("foo.invalid:8000"),
            "invalid address: 'foo.invalid' in 'foo.invalid:8000'"
        );
        assert_eq!(e("ipv4@::1:80"), "invalid address: '::1' in 'ipv4@::1:80'");
        assert_eq!(
            e("fd@x"),
            "file descriptor 'x' is not a valid integer in 'fd@x'"
        );
    }

    #[test]
    fn server_and_log_forms() {
        assert_eq!(
            parse_server("10.0.0.1:8080", &res).unwrap(),
            "10.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(parse_server("10.0.0.1", &res).unwrap().port(), 0);
        assert_eq!(
            parse_server("[::1]:80", &res).unwrap(),
            "[::1]:80".parse().unwrap()
        );
        assert_eq!(
            parse_server("localhost:80", &res).unwrap(),
            "127.0.0.1:80".parse().unwrap()
        );
        assert_eq!(
            parse_server("nope.invalid:80", &res).unwrap_err(),
            "could not resolve address 'nope.invalid'"
        );
        assert_eq!(
            parse_server("1.2.3.4:99999", &res).unwrap_err(),
            "invalid port '99999'"
        );
        assert_eq!(
            parse_log_inet("10.1.1.1", &res).unwrap(),
            "10.1.1.1:514".parse().unwrap()
        );
        assert_eq!(
            parse_log_inet("udp@10.1.1.1:1514", &res).unwrap(),
            "10.1.1.1:1514".parse().unwrap()
        );
        assert_eq!(
            parse_log_inet("::1", &res).unwrap(),
            "[::1]:514".parse().unwrap()
        );
        assert_eq!(
            parse_net("10.0.0.0/8"),
            Some(("10.0.0.0".parse().unwrap(), 8))
        );
        assert_eq!(
            parse_net("10.0.0.0/255.255.0.0"),
            Some(("10.0.0.0".parse().unwrap(), 16))
        );
        assert_eq!(parse_net("1.2.3.4"), Some(("1.2.3.4".parse().unwrap(), 32)));
        assert_eq!(parse_net("1.2.3.4/99"), None);
    }
}
