//! A sample as a stick-table key (HAProxy's `smp_to_stkey` after its sample casts):
//! `track-sc`, `stick on|match|store-*`, the `table_*` converters and the `src_*` fetches.

use std::net::{IpAddr, Ipv4Addr};

use super::sample::SampleValue;
use crate::config::model::StickKey;
use crate::stick::key::{self, Key};

/// HAProxy's `read_int64` over a string (`c_str2int`): an optional sign then the leading
/// digits; no sample for an empty string.
fn str2int(s: &[u8]) -> Option<i64> {
    if s.is_empty() {
        return None;
    }
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: u64 = 0;
    for c in digits.iter().take_while(|c| c.is_ascii_digit()) {
        v = v.saturating_mul(10).saturating_add(u64::from(c - b'0'));
    }
    Some(if neg {
        0i64.checked_sub_unsigned(v).unwrap_or(i64::MIN)
    } else {
        i64::try_from(v).unwrap_or(i64::MAX)
    })
}

/// The key a sample gives in a table of type `kind` (None: the sample cannot be cast, and
/// nothing is tracked or looked up, as in HAProxy).
pub fn from_sample(kind: StickKey, v: &SampleValue<'_>) -> Option<Key> {
    use SampleValue as S;
    match kind {
        StickKey::Ip | StickKey::Ipv6 => {
            let ip = match v {
                // c_int2ip: the integer is the IPv4 address.
                S::Int(i) => IpAddr::V4(Ipv4Addr::from(*i as u32)),
                other => other.to_ip()?,
            };
            key::from_ip(kind, ip)
        }
        StickKey::Integer => {
            let i = match v {
                S::Int(i) => *i,
                S::Bool(b) => i64::from(*b),
                S::Str(s) => str2int(s.as_bytes())?,
                S::Ip(ip) => return key::from_ip(kind, *ip),
                S::Bin(_) => return None,
            };
            // The table keeps the low 32 bits.
            Some(Key::Int(i as u32))
        }
        StickKey::String(_) | StickKey::Binary(_) if matches!(v, S::Ip(_)) => {
            key::from_ip(kind, v.to_ip()?)
        }
        StickKey::String(_) => key::from_bytes(kind, &v.to_bytes()),
        StickKey::Binary(_) => match v {
            // c_int2bin / c_bool2bin: 8 bytes in network order.
            S::Int(i) => key::from_bytes(kind, &i.to_be_bytes()),
            S::Bool(b) => key::from_bytes(kind, &i64::from(*b).to_be_bytes()),
            other => key::from_bytes(kind, &other.to_bytes()),
        },
    }
}
