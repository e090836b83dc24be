//! A stick table's key (`type ip|ipv6|integer|string [len <n>]|binary [len <n>]`): what a
//! sample becomes to look an entry up (HAProxy's `smp_to_stkey` after its sample casts), how
//! `show table` prints it (`dump_text`, `dump_binary`) and how the CLI reads one.

use std::net::{IpAddr, Ipv4Addr};

use crate::config::model::StickKey;

/// One entry's key. Ordered as HAProxy's trees walk them (`show table`'s order): addresses and
/// integers by value, strings and binaries byte by byte.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Key {
    Ip(IpAddr),
    Int(u32),
    /// A string (cut at its first NUL and at the table's `len`) or a binary (exactly `len`
    /// bytes, zero-padded).
    Bytes(Box<[u8]>),
}

impl Key {
    /// The key's bytes as the peers protocol carries them (an integer in network order).
    pub fn wire(&self) -> Vec<u8> {
        match self {
            Key::Ip(IpAddr::V4(v4)) => v4.octets().to_vec(),
            Key::Ip(IpAddr::V6(v6)) => v6.octets().to_vec(),
            Key::Int(i) => i.to_be_bytes().to_vec(),
            Key::Bytes(b) => b.to_vec(),
        }
    }
}

/// An address in a table of type `kind`, cast as HAProxy casts an address sample: `ip` keeps
/// IPv4 and IPv4-mapped IPv6 as IPv4, `ipv6` maps IPv4 in, `integer` takes an IPv4 as its
/// number, `string` its text, `binary` its octets. None when the cast fails (IPv6 into
/// `integer`, a plain IPv6 into `ip`).
pub fn from_ip(kind: StickKey, ip: IpAddr) -> Option<Key> {
    Some(Key::Ip(match (kind, ip) {
        (StickKey::Ipv6, IpAddr::V4(v4)) => IpAddr::V6(v4.to_ipv6_mapped()),
        (StickKey::Ipv6, v6) => v6,
        (StickKey::Ip, IpAddr::V4(v4)) => IpAddr::V4(v4),
        (StickKey::Ip, IpAddr::V6(v6)) => IpAddr::V4(v6.to_ipv4_mapped()?),
        (StickKey::Integer, IpAddr::V4(v4)) => return Some(Key::Int(u32::from(v4))),
        (StickKey::Integer, IpAddr::V6(_)) => return None,
        (StickKey::String(_), ip) => return from_bytes(kind, ip.to_string().as_bytes()),
        (StickKey::Binary(_), IpAddr::V4(v4)) => return from_bytes(kind, &v4.octets()),
        (StickKey::Binary(_), IpAddr::V6(v6)) => return from_bytes(kind, &v6.octets()),
    }))
}

/// Bytes as a key of a `string` table (cut at the first NUL and at `len`) or of a `binary` one
/// (cut or zero-padded to `len`); None for the other types.
pub fn from_bytes(kind: StickKey, b: &[u8]) -> Option<Key> {
    match kind {
        StickKey::String(len) => {
            let b = b.split(|c| *c == 0).next().unwrap_or(&[]);
            Some(Key::Bytes(b[..b.len().min(len as usize)].into()))
        }
        StickKey::Binary(len) => {
            let mut k = vec![0u8; len as usize];
            let n = b.len().min(k.len());
            k[..n].copy_from_slice(&b[..n]);
            Some(Key::Bytes(k.into()))
        }
        _ => None,
    }
}

/// A key of a table of type `kind` rebuilt from what a peer sent (None when it cannot be one).
pub fn from_wire(kind: StickKey, b: &[u8]) -> Option<Key> {
    match kind {
        StickKey::Ip => <[u8; 4]>::try_from(b)
            .ok()
            .map(|a| Key::Ip(IpAddr::from(a))),
        StickKey::Ipv6 => <[u8; 16]>::try_from(b)
            .ok()
            .map(|a| Key::Ip(IpAddr::from(a))),
        StickKey::Integer => <[u8; 4]>::try_from(b)
            .ok()
            .map(|a| Key::Int(u32::from_be_bytes(a))),
        StickKey::String(_) | StickKey::Binary(_) => from_bytes(kind, b),
    }
}

/// The key as `show table` prints it: an address, a decimal, `dump_text`'s escapes for a
/// string, upper-case hexadecimal for a binary.
pub fn text(kind: StickKey, k: &Key) -> String {
    match k {
        Key::Ip(ip) => ip.to_string(),
        Key::Int(i) => i.to_string(),
        Key::Bytes(b) if matches!(kind, StickKey::String(_)) => text_str(b),
        Key::Bytes(b) => b.iter().map(|c| format!("{c:02X}")).collect(),
    }
}

/// `dump_text`: printable ASCII as is, `\` before a space, `=`, `\`, and the C escapes for
/// tab, newline, return and escape; `\xHH` for anything else.
pub fn text_str(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for &c in b {
        match c {
            b'\\' | b' ' | b'=' => {
                out.push('\\');
                out.push(c as char);
            }
            b'\t' => out.push_str("\\t"),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            0x1b => out.push_str("\\e"),
            0x21..=0x7e => out.push(c as char),
            _ => out.push_str(&format!("\\x{c:02X}")),
        }
    }
    out
}

/// What a CLI `key <k>` word means in a table of type `kind`, or HAProxy's reply: an IPv4
/// table ignores a key it cannot parse (`Ok(None)`), an integer must be an unsigned 32-bit
/// decimal (what `strtoul` reads first), a binary key is not supported (`what` words the
/// action: "Showing keys from", "Inserting keys into").
pub fn parse_cli(kind: StickKey, k: &str, what: &str) -> Result<Option<Key>, String> {
    match kind {
        StickKey::Ip => Ok(k.parse::<Ipv4Addr>().ok().map(|a| Key::Ip(IpAddr::V4(a)))),
        StickKey::Ipv6 => match k.parse::<std::net::Ipv6Addr>() {
            Ok(v6) => Ok(Some(Key::Ip(IpAddr::V6(v6)))),
            Err(_) => Err("Invalid key\n".into()),
        },
        StickKey::Integer => {
            let t = k.trim_start();
            let digits = t.bytes().take_while(u8::is_ascii_digit).count();
            match t[..digits].parse::<u64>() {
                Ok(v) if !t.starts_with('-') => match u32::try_from(v) {
                    Ok(v) => Ok(Some(Key::Int(v))),
                    Err(_) => Err("Invalid key\n".into()),
                },
                _ => Err("Invalid key\n".into()),
            }
        }
        StickKey::String(_) => Ok(from_bytes(kind, k.as_bytes())),
        StickKey::Binary(_) => Err(format!(
            "{what} tables of type other than ip, ipv6, string and integer is not supported\n"
        )),
    }
}
