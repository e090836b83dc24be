//! Load-balancing algorithms (pure): roundrobin (smooth weighted), leastconn, first, source.
//!
//! The shape follows the thread-per-core engine: an [`Lb`] is immutable and cheap to rebuild, so
//! the caller keeps it behind an `ArcSwap` per backend and swaps in [`Lb::rebuild`] whenever a
//! server's state or effective weight changes. The only shared mutable input is one `AtomicU64`
//! cursor per backend, advanced with `fetch_add` (no locks); everything live (usable or not,
//! current connections, effective weight) is read through [`ServerView`], which the model backs
//! with its atomics.
//!
//! Server indices are positions in the `servers` slice given to [`Lb::new`] (configuration
//! order); the view must answer for each of them.
//!
//! Rules shared by every algorithm, as in HAProxy:
//! - A server is *eligible* when the view says it is usable and its effective weight is > 0
//!   (weight 0 = drain: never chosen by balancing).
//! - Active servers are used while at least one is eligible. Otherwise backups: all eligible ones
//!   balanced with `option allbackups`, else only the first eligible backup in configuration order.
//! - A server at its `maxconn` (`conns >= maxconn`, 0 = unlimited) is skipped. When every eligible
//!   server of the group in use is full, `pick` returns `None` (HAProxy queues in the backend; use
//!   [`Lb::has_usable`] to tell "full" from "no server").
//! - `exclude` (redispatch) is a preference: another server is chosen when one can be, else the
//!   excluded one is returned if it is still eligible and not full (HAProxy's "avoided" server).

mod table;

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::config::model::{Balance, Server};

/// HAProxy's largest server weight.
pub const MAX_WEIGHT: u32 = 256;

/// The static part of a server that balancing needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LbServer {
    /// `id` (HAProxy's puid): the order `balance first` walks.
    pub id: u32,
    /// The weight the table is built from (clamped to [`MAX_WEIGHT`]; 0 leaves it out).
    pub weight: u32,
    pub backup: bool,
    /// `None` or `Some(0)`: unlimited.
    pub maxconn: Option<u32>,
}

impl LbServer {
    pub fn from_config(server: &Server) -> LbServer {
        LbServer {
            id: server.id,
            weight: server.opts.weight,
            backup: server.opts.backup,
            maxconn: server.opts.maxconn,
        }
    }
}

/// Live server state, read at pick time (the model implements it over its atomics).
pub trait ServerView {
    /// Operationally up and not in maintenance.
    fn usable(&self, idx: usize) -> bool;
    /// Connections currently on the server (HAProxy's `served`, plus queued ones if queued per
    /// server), compared with `maxconn` and used by leastconn.
    fn conns(&self, idx: usize) -> u32;
    /// Current effective weight (0 = drain).
    fn weight(&self, idx: usize) -> u32;
}

/// One balancing group (the active servers or the backups).
#[derive(Clone, Debug, Default)]
struct Group {
    /// Servers with weight > 0, in configuration order.
    members: Box<[usize]>,
    /// The same in id order (`first` only).
    by_id: Box<[usize]>,
    /// One period of the smooth weighted sequence (roundrobin, static-rr, source only).
    table: Box<[usize]>,
}

impl Group {
    fn build(servers: &[LbServer], backup: bool, algo: &Balance) -> Group {
        let members: Vec<(usize, u32)> = servers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.backup == backup && s.weight > 0)
            .map(|(i, s)| (i, s.weight.min(MAX_WEIGHT)))
            .collect();
        let table = match algo {
            Balance::Roundrobin | Balance::StaticRr | Balance::Source => table::smooth(&members),
            Balance::Leastconn | Balance::First => Vec::new(),
        };
        let members: Box<[usize]> = members.into_iter().map(|(i, _)| i).collect();
        let mut by_id = Vec::new();
        if *algo == Balance::First {
            by_id = members.to_vec();
            by_id.sort_by_key(|&i| (servers.get(i).map_or(u32::MAX, |s| s.id), i));
        }
        Group {
            members,
            by_id: by_id.into_boxed_slice(),
            table: table.into_boxed_slice(),
        }
    }

    fn slot(&self, n: u64) -> Option<usize> {
        let len = u64::try_from(self.table.len()).ok().filter(|&l| l > 0)?;
        let at = usize::try_from(n % len).ok()?;
        self.table.get(at).copied()
    }
}

/// Where a pick happens once the group in use is known.
enum Target<'a> {
    Group(&'a Group),
    /// The first eligible backup, without `option allbackups`.
    Single(usize),
}

/// A backend's balancing state, immutable between rebuilds.
#[derive(Clone, Debug)]
pub struct Lb {
    algo: Balance,
    allbackups: bool,
    servers: Box<[LbServer]>,
    active: Group,
    backup: Group,
}

impl Lb {
    /// Builds from `servers` (configuration order) at their given weights.
    pub fn new(algo: &Balance, servers: &[LbServer], allbackups: bool) -> Lb {
        Lb {
            algo: algo.clone(),
            allbackups,
            servers: servers.into(),
            active: Group::build(servers, false, algo),
            backup: Group::build(servers, true, algo),
        }
    }

    /// The same backend rebuilt from live state: each server's weight becomes its effective
    /// weight, or 0 when not usable, so the tables hold exactly the servers in service.
    pub fn rebuild(&self, view: &impl ServerView) -> Lb {
        let servers: Vec<LbServer> = self
            .servers
            .iter()
            .enumerate()
            .map(|(i, s)| LbServer {
                weight: if view.usable(i) { view.weight(i) } else { 0 },
                ..*s
            })
            .collect();
        Lb::new(&self.algo, &servers, self.allbackups)
    }

    /// The same algorithm over another server list (servers added or removed at run time);
    /// [`Lb::rebuild`] then applies the live state.
    pub fn with_servers(&self, servers: &[LbServer]) -> Lb {
        Lb::new(&self.algo, servers, self.allbackups)
    }

    pub fn algo(&self) -> &Balance {
        &self.algo
    }

    /// Hash-based: redispatch does not re-balance on the plain "more than one server" rule.
    pub fn is_hash_based(&self) -> bool {
        self.algo == Balance::Source
    }

    /// Some server (active or backup) is eligible: when `pick` returns `None` while this holds,
    /// every candidate is at its maxconn (HAProxy would queue) rather than down.
    pub fn has_usable(&self, view: &impl ServerView) -> bool {
        self.target(view).is_some()
    }

    /// Chooses a server, or `None` when none is eligible or all candidates are full. `src` is
    /// the client address, used by `balance source` (without one it falls back to roundrobin).
    pub fn pick(
        &self,
        cursor: &AtomicU64,
        view: &impl ServerView,
        src: Option<IpAddr>,
    ) -> Option<usize> {
        self.pick_excluding(cursor, view, src, None)
    }

    /// [`Lb::pick`] avoiding `exclude` (the server that just failed, for `option redispatch`).
    pub fn pick_excluding(
        &self,
        cursor: &AtomicU64,
        view: &impl ServerView,
        src: Option<IpAddr>,
        exclude: Option<usize>,
    ) -> Option<usize> {
        let pick = Pick {
            lb: self,
            view,
            exclude,
        };
        match (&self.algo, src) {
            (Balance::Source, Some(ip)) => pick.hash(hash_ip(ip)),
            (Balance::Roundrobin | Balance::StaticRr | Balance::Source, _) => pick.rr(cursor),
            (Balance::Leastconn, _) => pick.with_target(|g| pick.leastconn(g, cursor)),
            (Balance::First, _) => pick.with_target(|g| pick.first(g)),
        }
    }

    /// The group in use: actives while one is eligible, else backups per `allbackups`.
    fn target(&self, view: &impl ServerView) -> Option<Target<'_>> {
        if self.active.members.iter().any(|&i| eligible(view, i)) {
            Some(Target::Group(&self.active))
        } else if self.allbackups {
            let any = self.backup.members.iter().any(|&i| eligible(view, i));
            any.then_some(Target::Group(&self.backup))
        } else {
            let first = self
                .backup
                .members
                .iter()
                .copied()
                .find(|&i| eligible(view, i));
            first.map(Target::Single)
        }
    }
}

fn eligible(view: &impl ServerView, i: usize) -> bool {
    view.usable(i) && view.weight(i) > 0
}

/// One pick's inputs, so the per-algorithm helpers stay small.
struct Pick<'a, V> {
    lb: &'a Lb,
    view: &'a V,
    exclude: Option<usize>,
}

impl<V: ServerView> Pick<'_, V> {
    fn has_room(&self, i: usize) -> bool {
        match self.lb.servers.get(i).and_then(|s| s.maxconn) {
            None | Some(0) => true,
            Some(max) => self.view.conns(i) < max,
        }
    }

    /// Eligible, not full and not excluded.
    fn fits(&self, i: usize) -> bool {
        Some(i) != self.exclude && eligible(self.view, i) && self.has_room(i)
    }

    /// The excluded server when nothing else in `g` fits but it still does.
    fn avoided(&self, g: &Group) -> Option<usize> {
        let e = self.exclude?;
        (g.members.contains(&e) && eligible(self.view, e) && self.has_room(e)).then_some(e)
    }

    fn with_target(&self, f: impl FnOnce(&Group) -> Option<usize>) -> Option<usize> {
        match self.lb.target(self.view)? {
            Target::Group(g) => f(g),
            Target::Single(i) => self.has_room(i).then_some(i),
        }
    }

    /// Roundrobin over the table with the shared cursor. A slot whose server does not fit is
    /// consumed and the next one taken, so skipped servers' turns spread over the others in
    /// table proportion: the sequence behaves as if they were not in it.
    fn rr(&self, cursor: &AtomicU64) -> Option<usize> {
        let mut n = cursor.fetch_add(1, Ordering::Relaxed);
        // Fast path: a fitting active server proves the active group is in use.
        if let Some(i) = self.lb.active.slot(n)
            && self.fits(i)
        {
            return Some(i);
        }
        self.with_target(|g| {
            if !g.members.iter().any(|&i| self.fits(i)) {
                return self.avoided(g);
            }
            // `n` is reused so that, when the backups are in use, every cursor value still
            // lands on their table exactly once.
            for _ in 0..g.table.len() {
                if let Some(i) = g.slot(n)
                    && self.fits(i)
                {
                    return Some(i);
                }
                n = cursor.fetch_add(1, Ordering::Relaxed);
            }
            // Only reachable if state changed under us: stay correct, fairness aside.
            g.members.iter().copied().find(|&i| self.fits(i))
        })
    }

    /// Map-based hash: the table slot at `hash % len`. A slot whose server does not fit falls
    /// through to the next slots, so only that server's clients move.
    fn hash(&self, hash: u64) -> Option<usize> {
        if let Some(i) = self.lb.active.slot(hash)
            && self.fits(i)
        {
            return Some(i);
        }
        self.with_target(|g| {
            let len = g.table.len();
            let start = usize::try_from(hash % u64::try_from(len).ok()?.max(1)).ok()?;
            (0..len)
                .filter_map(|off| g.table.get((start + off) % len).copied())
                .find(|&i| self.fits(i))
                .or_else(|| self.avoided(g))
        })
    }

    /// Lowest `conns / weight`; ties share turns through the cursor.
    fn leastconn(&self, g: &Group, cursor: &AtomicU64) -> Option<usize> {
        // (conns, weight) of the best so far; compared by cross-multiplication, no division.
        let load = |i: usize| {
            (
                u64::from(self.view.conns(i)),
                u64::from(self.view.weight(i).clamp(1, MAX_WEIGHT)),
            )
        };
        let lighter = |(c1, w1): (u64, u64), (c2, w2): (u64, u64)| c1 * w2 < c2 * w1;
        let same = |(c1, w1): (u64, u64), (c2, w2): (u64, u64)| c1 * w2 == c2 * w1;
        let mut best: Option<(usize, (u64, u64))> = None;
        let mut ties = 0u64;
        for &i in g.members.iter().filter(|&&i| self.fits(i)) {
            let l = load(i);
            match best {
                Some((_, b)) if same(l, b) => ties += 1,
                Some((_, b)) if !lighter(l, b) => {}
                _ => {
                    best = Some((i, l));
                    ties = 1;
                }
            }
        }
        let Some((first, key)) = best else {
            return self.avoided(g);
        };
        if ties < 2 {
            return Some(first);
        }
        let nth = cursor.fetch_add(1, Ordering::Relaxed) % ties;
        // Counts may have moved since the first pass; then the first lightest one will do.
        g.members
            .iter()
            .copied()
            .filter(|&i| self.fits(i) && same(load(i), key))
            .nth(usize::try_from(nth).unwrap_or(0))
            .or(Some(first))
    }

    /// The first server in id order that is below its maxconn.
    fn first(&self, g: &Group) -> Option<usize> {
        g.by_id
            .iter()
            .copied()
            .find(|&i| self.fits(i))
            .or_else(|| self.avoided(g))
    }
}

/// Stable across processes and reloads (no random seed), so a client keeps its server. An
/// IPv4-mapped IPv6 address hashes as the IPv4 one: same client on a dual-stack socket.
fn hash_ip(ip: IpAddr) -> u64 {
    let bits: u128 = match ip {
        IpAddr::V4(v4) => u128::from(u32::from(v4)),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => u128::from(u32::from(v4)),
            None => u128::from(v6),
        },
    };
    // Truncations intended: the two halves are mixed separately.
    let (hi, lo) = ((bits >> 64) as u64, bits as u64);
    mix64(lo ^ mix64(hi))
}

/// The splitmix64 finalizer: every input bit reaches every output bit.
fn mix64(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests;
