//! A resolution's answer items and how a server picks its address among them, as HAProxy
//! 2.6's `resolv_get_ip_from_response`: items are ordered by the XXH32 key of their data
//! (HAProxy's eb32 tree), each remembers which servers use it, and a server scores every
//! address — 8 for the preferred family, 4 for a `resolve-net`, 2 when no other server of its
//! backend uses it (without `allow-dup-ip` a used one is skipped), 1 for its current address —
//! and takes the best. A server whose item is still answered keeps it. Pure.

use std::net::IpAddr;

/// Who asks: a server, by an id stable for the resolution's life, and its backend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Owner {
    pub id: usize,
    pub proxy: usize,
}

#[derive(Clone, Debug)]
struct Item {
    key: u32,
    seq: u64,
    ip: IpAddr,
    last_seen: u64,
    attached: Vec<Owner>,
}

/// What a server should do with the latest answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pick {
    /// Its current address is (still) the one.
    Keep,
    /// Take this address.
    New(IpAddr),
    /// Nothing for it in the answer.
    NoIp,
}

/// A server's `resolve-prefer`, `resolve-net` and `resolve-opts allow-dup-ip`.
#[derive(Clone, Debug, Default)]
pub struct Prefs {
    pub prefer_ipv4: bool,
    pub nets: Vec<(IpAddr, u8)>,
    pub allow_dup_ip: bool,
}

#[derive(Clone, Debug, Default)]
pub struct Answers {
    items: Vec<Item>,
    seq: u64,
}

impl Answers {
    /// Addresses of a valid response received at `now` (ms): known ones are seen again, new
    /// ones are inserted at their key's place.
    pub fn merge(&mut self, ips: &[IpAddr], now: u64) {
        for &ip in ips {
            if let Some(it) = self.items.iter_mut().find(|it| it.ip == ip) {
                it.last_seen = now;
                continue;
            }
            let key = key_of(ip);
            self.seq += 1;
            let item = Item {
                key,
                seq: self.seq,
                ip,
                last_seen: now,
                attached: Vec::new(),
            };
            let at = self
                .items
                .partition_point(|it| (it.key, it.seq) < (item.key, item.seq));
            self.items.insert(at, item);
        }
    }

    /// Drops the items not seen for longer than `hold_obsolete` (HAProxy: strictly older);
    /// their servers lose them.
    pub fn expire(&mut self, now: u64, hold_obsolete: u64) {
        self.items
            .retain(|it| it.last_seen.saturating_add(hold_obsolete) >= now);
    }

    /// A failed resolution that no server keeps: everything goes.
    pub fn purge(&mut self) {
        self.items.clear();
    }

    /// `owner` no longer uses any item (its address was cleared).
    pub fn detach(&mut self, owner: usize) {
        for it in &mut self.items {
            it.attached.retain(|o| o.id != owner);
        }
    }

    /// The address `owner` should use, given its `current` one.
    pub fn pick(&mut self, prefs: &Prefs, current: Option<IpAddr>, owner: Owner) -> Pick {
        if self
            .items
            .iter()
            .any(|it| it.attached.iter().any(|o| o.id == owner.id))
        {
            return Pick::Keep;
        }
        let mut best: Option<(usize, i32, bool)> = None;
        for (i, it) in self.items.iter().enumerate() {
            let mut score = 0;
            if it.ip.is_ipv4() == prefs.prefer_ipv4 {
                score += 8;
            }
            if prefs.nets.iter().any(|&(net, len)| in_net(it.ip, net, len)) {
                score += 4;
            }
            let used = it
                .attached
                .iter()
                .any(|o| o.id != owner.id && o.proxy == owner.proxy);
            if used {
                if !prefs.allow_dup_ip {
                    continue;
                }
            } else {
                score += 2;
            }
            let is_current = current == Some(it.ip);
            if is_current {
                score += 1;
            }
            if best.is_none_or(|(_, s, _)| score > s) {
                if score == 15 {
                    self.attach(i, owner);
                    return Pick::Keep;
                }
                best = Some((i, score, is_current));
            }
        }
        let Some((i, _, is_current)) = best else {
            return Pick::NoIp;
        };
        self.attach(i, owner);
        match self.items.get(i) {
            Some(it) if !is_current => Pick::New(it.ip),
            _ => Pick::Keep,
        }
    }

    fn attach(&mut self, i: usize, owner: Owner) {
        self.detach(owner.id);
        if let Some(it) = self.items.get_mut(i) {
            it.attached.push(owner);
        }
    }

    /// The addresses in HAProxy's order (for tests and dumps).
    pub fn addrs(&self) -> Vec<IpAddr> {
        self.items.iter().map(|it| it.ip).collect()
    }
}

fn in_net(ip: IpAddr, net: IpAddr, len: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let m = u32::MAX
                .checked_shl(32 - u32::from(len.min(32)))
                .unwrap_or(0);
            u32::from(a) & m == u32::from(n) & m
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let m = u128::MAX
                .checked_shl(128 - u32::from(len.min(128)))
                .unwrap_or(0);
            u128::from(a) & m == u128::from(n) & m
        }
        _ => false,
    }
}

/// The eb32 key HAProxy gives an address record: XXH32 of its data, seeded with its type.
fn key_of(ip: IpAddr) -> u32 {
    match ip {
        IpAddr::V4(a) => xxh32(&a.octets(), 1),
        IpAddr::V6(a) => xxh32(&a.octets(), 28),
    }
}

const P1: u32 = 2_654_435_761;
const P2: u32 = 2_246_822_519;
const P3: u32 = 3_266_489_917;
const P4: u32 = 668_265_263;
const P5: u32 = 374_761_393;

fn lane(b: &[u8]) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[..4]);
    u32::from_le_bytes(w)
}

/// XXH32 (the xxHash 32-bit function HAProxy keys its answer items with).
pub fn xxh32(data: &[u8], seed: u32) -> u32 {
    let round = |v: u32, l: u32| {
        v.wrapping_add(l.wrapping_mul(P2))
            .rotate_left(13)
            .wrapping_mul(P1)
    };
    let mut rest = data;
    let mut h = if data.len() >= 16 {
        let mut v = [
            seed.wrapping_add(P1).wrapping_add(P2),
            seed.wrapping_add(P2),
            seed,
            seed.wrapping_sub(P1),
        ];
        while rest.len() >= 16 {
            for (i, v) in v.iter_mut().enumerate() {
                *v = round(*v, lane(&rest[i * 4..]));
            }
            rest = &rest[16..];
        }
        v[0].rotate_left(1)
            .wrapping_add(v[1].rotate_left(7))
            .wrapping_add(v[2].rotate_left(12))
            .wrapping_add(v[3].rotate_left(18))
    } else {
        seed.wrapping_add(P5)
    };
    h = h.wrapping_add(data.len() as u32);
    while rest.len() >= 4 {
        h = h
            .wrapping_add(lane(rest).wrapping_mul(P3))
            .rotate_left(17)
            .wrapping_mul(P4);
        rest = &rest[4..];
    }
    for &b in rest {
        h = h
            .wrapping_add(u32::from(b).wrapping_mul(P5))
            .rotate_left(11)
            .wrapping_mul(P1);
    }
    h ^= h >> 15;
    h = h.wrapping_mul(P2);
    h ^= h >> 13;
    h = h.wrapping_mul(P3);
    h ^ (h >> 16)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    const A: Owner = Owner { id: 1, proxy: 0 };
    const B: Owner = Owner { id: 2, proxy: 0 };
    const C: Owner = Owner { id: 3, proxy: 0 };

    #[test]
    fn xxh32_reference_values() {
        assert_eq!(xxh32(b"", 0), 0x02CC_5D05);
        assert_eq!(xxh32(b"a", 0), 0x550D_7456);
        assert_eq!(xxh32(b"abc", 0), 0x32D1_53FF);
        assert_eq!(
            xxh32(b"Nobody inspects the spammish repetition", 0),
            0xE229_3B2F
        );
    }

    #[test]
    fn servers_of_one_backend_take_distinct_addresses() {
        let mut t = Answers::default();
        let ips = [ip("127.0.0.11"), ip("127.0.0.12")];
        t.merge(&ips, 10);
        let v4 = Prefs {
            prefer_ipv4: true,
            ..Prefs::default()
        };
        let a = t.pick(&v4, None, A);
        let b = t.pick(&v4, None, B);
        let (Pick::New(x), Pick::New(y)) = (a, b) else {
            panic!("{a:?} {b:?}");
        };
        assert_ne!(x, y);
        // The first in key order goes to the first server.
        assert_eq!(x, t.addrs()[0]);
        // A third server finds nothing free.
        assert_eq!(t.pick(&v4, None, C), Pick::NoIp);
        // Seen again: each keeps its own.
        t.merge(&ips, 20);
        t.expire(20, 0);
        assert_eq!(t.pick(&v4, Some(x), A), Pick::Keep);
        assert_eq!(t.pick(&v4, Some(y), B), Pick::Keep);
        // One address leaves the answer: its server moves to nothing, the other stays.
        t.merge(&[x], 30);
        t.expire(30, 0);
        assert_eq!(t.pick(&v4, Some(x), A), Pick::Keep);
        assert_eq!(t.pick(&v4, Some(y), B), Pick::NoIp);
        // allow-dup-ip shares it.
        let dup = Prefs {
            allow_dup_ip: true,
            ..v4.clone()
        };
        assert_eq!(t.pick(&dup, Some(y), B), Pick::New(x));
    }

    #[test]
    fn obsolete_items_wait_for_hold_obsolete() {
        let mut t = Answers::default();
        t.merge(&[ip("10.0.0.1")], 100);
        t.expire(1100, 1000);
        assert_eq!(t.addrs().len(), 1);
        t.expire(1101, 1000);
        assert!(t.addrs().is_empty());
    }

    #[test]
    fn preferences_score_family_then_network_then_current() {
        let mut t = Answers::default();
        t.merge(&[ip("10.0.0.1"), ip("fd00::1"), ip("192.168.1.5")], 1);
        // Default: IPv6 first.
        assert_eq!(t.pick(&Prefs::default(), None, A), Pick::New(ip("fd00::1")));
        let net = Prefs {
            prefer_ipv4: true,
            nets: vec![(ip("192.168.0.0"), 16)],
            allow_dup_ip: false,
        };
        assert_eq!(t.pick(&net, None, B), Pick::New(ip("192.168.1.5")));
        // The current address wins a tie.
        let v4 = Prefs {
            prefer_ipv4: true,
            ..Prefs::default()
        };
        t.detach(B.id);
        assert_eq!(t.pick(&v4, Some(ip("10.0.0.1")), B), Pick::Keep);
    }
}
