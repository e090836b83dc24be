//! Load-balancing algorithms (pure): roundrobin (smooth weighted), leastconn, first, random, and
//! the hash-based ones (source, uri, url_param, hdr) with HAProxy 2.6's exact server choice:
//! `hash-type map-based` indexes HAProxy's weighted map (`recalc_server_map`) with `hash %
//! total weight`, `consistent` looks the hash up on HAProxy's ring (each server has `weight × 16`
//! points at `full_hash(id × 4096 + n)`, the nearest point wins), so a key picks the same server
//! as an HAProxy with the same server list.
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

use crate::ana::conv::{crc32, djb2, full_hash, sdbm, wt6};
use crate::config::model::{Balance, HashFn, HashType, Server};
use crate::http::head::RequestHead;

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
    /// What roundrobin walks: one period of the smooth weighted sequence (roundrobin), HAProxy's
    /// map (static-rr), or the map or the ring (hash-based algorithms, for a stream without a
    /// key).
    table: Box<[usize]>,
    /// `hash-type map-based`: HAProxy's server map, one slot per unit of effective weight.
    map: Box<[usize]>,
    /// `hash-type consistent` and `random`: HAProxy's ring, `(point, server)` sorted by point.
    ring: Box<[(u32, usize)]>,
    /// Per member in configuration order: `(server, cumulative weight before it, weight)` in
    /// ring units (weight × 16), for `hash-balance-factor`.
    shares: Box<[(usize, u64, u64)]>,
}

impl Group {
    fn build(servers: &[LbServer], backup: bool, shape: &Shape) -> Group {
        let members: Vec<(usize, u32)> = servers
            .iter()
            .enumerate()
            .filter(|(_, s)| s.backup == backup && s.weight > 0)
            .map(|(i, s)| (i, s.weight.min(MAX_WEIGHT)))
            .collect();
        let algo = &shape.algo;
        let mut table = match algo {
            Balance::Roundrobin => table::smooth(&members),
            _ => Vec::new(),
        };
        let mut map = Vec::new();
        let mut ring = Vec::new();
        let on_map = *algo == Balance::StaticRr || (algo.is_hash() && !shape.hash.consistent);
        if on_map {
            // HAProxy's map weights: the configured ones divided by their GCD (rounded up).
            let wmult = shape.wmult.max(1);
            let ew: Vec<(usize, u32)> = members
                .iter()
                .map(|&(i, w)| (i, w.div_ceil(wmult)))
                .collect();
            // Without `allbackups` HAProxy sizes the backup map by the first backup alone.
            let tot = match ew.first() {
                Some(&(_, first)) if backup && !shape.allbackups => first,
                _ => ew.iter().map(|&(_, w)| w).sum(),
            };
            map = haproxy_map(&ew, tot);
        } else if algo.is_hash() || matches!(algo, Balance::Random { .. }) {
            for &(i, w) in &members {
                let id = servers.get(i).map_or(0, |s| s.id);
                for node in 0..w * 16 {
                    ring.push((full_hash(id.wrapping_mul(4096).wrapping_add(node)), i));
                }
            }
            // Stable: equal points keep server order, as the tree keeps insertion order.
            ring.sort_by_key(|&(k, _)| k);
        }
        // A stream without a key goes round the map (HAProxy's map_get_server_rr) or the ring
        // in point order (chash_get_next_server).
        if *algo == Balance::StaticRr {
            // static-rr walks HAProxy's map in order (map_get_server_rr).
            table = std::mem::take(&mut map);
        } else if algo.is_hash() {
            table = if shape.hash.consistent {
                ring.iter().map(|&(_, i)| i).collect()
            } else {
                map.clone()
            };
        }
        let mut cum = 0u64;
        let shares: Box<[(usize, u64, u64)]> = members
            .iter()
            .map(|&(i, w)| {
                let ew = u64::from(w) * 16;
                cum += ew;
                (i, cum - ew, ew)
            })
            .collect();
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
            map: map.into_boxed_slice(),
            ring: ring.into_boxed_slice(),
            shares,
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

/// What the groups are built from besides the servers.
#[derive(Clone, Debug)]
struct Shape {
    algo: Balance,
    hash: HashType,
    allbackups: bool,
    /// HAProxy's `wmult` for map-based hashing: the GCD of the configured weights, fixed when
    /// the server list is set (weights changed at run time keep dividing by it).
    wmult: u32,
    /// `balance hash <expr>`, compiled.
    expr: Option<std::sync::Arc<crate::ana::sample::SampleExpr>>,
    /// `hash-balance-factor` (0: unbounded).
    balance_factor: u32,
}

/// A backend's balancing state, immutable between rebuilds.
#[derive(Clone, Debug)]
pub struct Lb {
    shape: Shape,
    servers: Box<[LbServer]>,
    active: Group,
    backup: Group,
}

impl Lb {
    /// Builds from `servers` (configuration order) at their given weights, map-based hashing.
    pub fn new(algo: &Balance, servers: &[LbServer], allbackups: bool) -> Lb {
        Lb::with_hash(algo, HashType::default(), servers, allbackups)
    }

    /// [`Lb::new`] with the backend's `hash-type`.
    pub fn with_hash(algo: &Balance, hash: HashType, servers: &[LbServer], allbackups: bool) -> Lb {
        let wmult = servers
            .iter()
            .map(|s| s.weight.min(MAX_WEIGHT))
            .filter(|&w| w > 0)
            .fold(0, gcd);
        let expr = match algo {
            Balance::Hash(e) => crate::ana::sample::parse_sample(e)
                .ok()
                .map(std::sync::Arc::new),
            _ => None,
        };
        Lb::build(
            Shape {
                algo: algo.clone(),
                hash,
                allbackups,
                wmult: wmult.max(1),
                expr,
                balance_factor: 0,
            },
            servers,
        )
    }

    fn build(shape: Shape, servers: &[LbServer]) -> Lb {
        Lb {
            active: Group::build(servers, false, &shape),
            backup: Group::build(servers, true, &shape),
            servers: servers.into(),
            shape,
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
        Lb::build(self.shape.clone(), &servers)
    }

    /// The same algorithm over another server list (servers added or removed at run time);
    /// [`Lb::rebuild`] then applies the live state.
    pub fn with_servers(&self, servers: &[LbServer]) -> Lb {
        let s = &self.shape;
        Lb::with_hash(&s.algo, s.hash, servers, s.allbackups).with_balance_factor(s.balance_factor)
    }

    /// `hash-balance-factor`: on the consistent ring, a server serving more than `factor`% of
    /// its weighted share passes the stream on (HAProxy's bounded loads).
    pub fn with_balance_factor(mut self, factor: u32) -> Lb {
        self.shape.balance_factor = factor;
        self
    }

    pub fn algo(&self) -> &Balance {
        &self.shape.algo
    }

    /// Hash-based: redispatch does not re-balance on the plain "more than one server" rule.
    pub fn is_hash_based(&self) -> bool {
        self.shape.algo.is_hash()
    }

    /// `balance hash`'s expression: the caller evaluates it on the stream, then [`Lb::key_of`].
    pub fn hash_expr(&self) -> Option<&crate::ana::sample::SampleExpr> {
        self.shape.expr.as_deref()
    }

    /// The key of `balance hash`: the sample's bytes through the hash function.
    pub fn key_of(&self, sample: &[u8]) -> u32 {
        let ht = &self.shape.hash;
        let h = gen_hash(ht.func, sample);
        if ht.avalanche { full_hash(h) } else { h }
    }

    /// The hash a hash-based algorithm looks up for this stream (HAProxy's `get_server_sh`,
    /// `_uh`, `_ph`, `_hh` up to the lookup), or `None`: no key (then roundrobin, as HAProxy).
    pub fn key(&self, src: Option<IpAddr>, req: Option<&RequestHead>) -> Option<u32> {
        let ht = &self.shape.hash;
        let h = match &self.shape.algo {
            Balance::Source => source_hash(src?),
            Balance::Uri {
                len,
                depth,
                whole,
                path_only,
            } => {
                let req = req?;
                let uri = if *path_only {
                    uri_path(&req.target)
                } else {
                    req.target.as_str()
                };
                gen_hash(ht.func, uri_key(uri.as_bytes(), *len, *depth, *whole))
            }
            Balance::UrlParam { name, .. } => {
                gen_hash(ht.func, url_param(req?.target.as_bytes(), name.as_bytes())?)
            }
            Balance::Hdr { name, domain_only } => {
                let v = header_value(req?, name)?;
                if *domain_only {
                    gen_hash(ht.func, main_domain(v))
                } else {
                    gen_hash(ht.func, v)
                }
            }
            _ => return None,
        };
        Some(if ht.avalanche { full_hash(h) } else { h })
    }

    /// `balance url_param <name>`: the key of a POST whose query string lacks the parameter,
    /// from the body's first bytes (HAProxy's `get_server_ph_post`, on the body it waited
    /// for); None: not such a backend, or no such parameter (then roundrobin).
    pub fn post_key(&self, body: &[u8]) -> Option<u32> {
        let Balance::UrlParam { name, .. } = &self.shape.algo else {
            return None;
        };
        let ht = &self.shape.hash;
        let h = gen_hash(ht.func, post_param(body, name.as_bytes())?);
        Some(if ht.avalanche { full_hash(h) } else { h })
    }

    /// Some server (active or backup) is eligible: when `pick` returns `None` while this holds,
    /// every candidate is at its maxconn (HAProxy would queue) rather than down.
    pub fn has_usable(&self, view: &impl ServerView) -> bool {
        self.target(view).is_some()
    }

    /// Chooses a server, or `None` when none is eligible or all candidates are full. `key` is
    /// the stream's [`Lb::key`], used by the hash-based algorithms (without one they fall back
    /// to roundrobin).
    pub fn pick(
        &self,
        cursor: &AtomicU64,
        view: &impl ServerView,
        key: Option<u32>,
    ) -> Option<usize> {
        self.pick_excluding(cursor, view, key, None)
    }

    /// [`Lb::pick`] avoiding `exclude` (the server that just failed, for `option redispatch`).
    pub fn pick_excluding(
        &self,
        cursor: &AtomicU64,
        view: &impl ServerView,
        key: Option<u32>,
        exclude: Option<usize>,
    ) -> Option<usize> {
        let pick = Pick {
            lb: self,
            view,
            exclude,
        };
        match (&self.shape.algo, key) {
            (Balance::Random { draws }, _) => pick.random(*draws),
            (a, Some(h)) if a.is_hash() => pick.hash(h),
            (Balance::Leastconn, _) => pick.with_target(|g| pick.leastconn(g, cursor)),
            (Balance::First, _) => pick.with_target(|g| pick.first(g)),
            _ => pick.rr(cursor),
        }
    }

    /// The group in use: actives while one is eligible, else backups per `allbackups`.
    fn target(&self, view: &impl ServerView) -> Option<Target<'_>> {
        if self.active.members.iter().any(|&i| eligible(view, i)) {
            Some(Target::Group(&self.active))
        } else if self.shape.allbackups {
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

    /// A hash-based pick: the map slot at `hash % total weight` (map-based) or the nearest ring
    /// point (consistent). A server that does not fit passes to the next slots or points, so
    /// only its own clients move.
    fn hash(&self, hash: u32) -> Option<usize> {
        let consistent = self.lb.shape.hash.consistent;
        match self.lb.target(self.view)? {
            Target::Single(i) if consistent => self.has_room(i).then_some(i),
            // HAProxy hashes nothing with one server in use (hash 0) and, without
            // `allbackups`, indexes the backup map by the first backup's weight.
            Target::Single(_) => self.walk_map(&self.lb.backup, 0),
            Target::Group(g) if consistent => self
                .ring_walk(g, hash, |i| self.fits(i) && self.within_bound(g, i))
                .or_else(|| self.ring_walk(g, hash, |i| self.fits(i)))
                .or_else(|| self.avoided(g)),
            Target::Group(g) => self.walk_map(g, hash),
        }
    }

    fn walk_map(&self, g: &Group, hash: u32) -> Option<usize> {
        let len = g.map.len();
        if len == 0 {
            return None;
        }
        let start = usize::try_from(hash).ok()? % len;
        (0..len)
            .filter_map(|off| g.map.get((start + off) % len).copied())
            .find(|&i| self.fits(i))
            .or_else(|| self.avoided(g))
    }

    /// `chash_get_server_hash`: the point nearest to `hash` (the one before on a tie), then the
    /// following points until `ok` accepts a server.
    fn ring_walk(&self, g: &Group, hash: u32, ok: impl Fn(usize) -> bool) -> Option<usize> {
        let ring = &g.ring;
        let len = ring.len();
        if len == 0 {
            return None;
        }
        let mut next = ring.partition_point(|&(k, _)| k < hash);
        if next == len {
            next = 0;
        }
        let prev = if next == 0 { len - 1 } else { next - 1 };
        let (pk, _) = ring[prev];
        let (nk, _) = ring[next];
        let start = if hash.wrapping_sub(pk) <= nk.wrapping_sub(hash) {
            prev
        } else {
            next
        };
        (0..len)
            .filter_map(|off| ring.get((start + off) % len).map(|&(_, i)| i))
            .find(|&i| ok(i))
    }

    /// `chash_server_is_eligible`: server `i` serves fewer streams than its slots, the
    /// backend's streams (plus this one) × factor / 100 spread by weight. Always true without
    /// a factor.
    fn within_bound(&self, g: &Group, i: usize) -> bool {
        let factor = u64::from(self.lb.shape.balance_factor);
        if factor == 0 {
            return true;
        }
        let Some(&(_, cumw, ew)) = g.shares.iter().find(|&&(s, _, _)| s == i) else {
            return true;
        };
        let tot: u64 = g.shares.iter().map(|&(_, _, w)| w).sum();
        if tot == 0 {
            return true;
        }
        let served: u64 = (0..self.lb.servers.len())
            .map(|s| u64::from(self.view.conns(s)))
            .sum();
        let tot_slots = ((served + 1) * factor).div_ceil(100);
        let (per, rem) = (tot_slots / tot, tot_slots % tot);
        let slots = (ew * per + ((cumw + ew) * rem) / tot - (cumw * rem) / tot).max(1);
        u64::from(self.view.conns(i)) < slots
    }

    /// `balance random(<draws>)`: the least loaded (per weight) of `draws` random ring
    /// lookups; a full server leaves the stream to the backend queue.
    fn random(&self, draws: u32) -> Option<usize> {
        let g = match self.lb.target(self.view)? {
            Target::Single(i) => return self.has_room(i).then_some(i),
            Target::Group(g) => g,
        };
        let usable = |i: usize| Some(i) != self.exclude && eligible(self.view, i);
        let bounded = |i: usize| usable(i) && self.within_bound(g, i);
        let load = |i: usize| {
            (
                u64::from(self.view.conns(i)),
                u64::from(self.view.weight(i).max(1)),
            )
        };
        let mut curr: Option<usize> = None;
        for _ in 0..draws.max(1) {
            let prev = curr;
            let h = random_u32();
            let Some(c) = self
                .ring_walk(g, h, bounded)
                .or_else(|| self.ring_walk(g, h, usable))
                .or_else(|| self.avoided(g))
            else {
                break;
            };
            curr = Some(c);
            if let Some(p) = prev
                && p != c
            {
                let ((cc, cw), (pc, pw)) = (load(c), load(p));
                if cc * pw > pc * cw {
                    curr = Some(p);
                }
            }
        }
        curr.filter(|&i| self.has_room(i))
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

/// `get_server_sh`: the address's 32-bit big-endian words XORed (IPv6 as it is, a v4-mapped
/// one included, as HAProxy hashes `sin6_addr`).
fn source_hash(ip: IpAddr) -> u32 {
    match ip {
        IpAddr::V4(v4) => u32::from(v4),
        IpAddr::V6(v6) => v6
            .octets()
            .chunks_exact(4)
            .map(|w| u32::from_be_bytes([w[0], w[1], w[2], w[3]]))
            .fold(0, |h, w| h ^ w),
    }
}

fn gen_hash(f: HashFn, key: &[u8]) -> u32 {
    match f {
        HashFn::Sdbm => sdbm(key),
        HashFn::Djb2 => djb2(key),
        HashFn::Wt6 => wt6(key),
        HashFn::Crc32 => crc32(key),
    }
}

/// `balance uri`'s key: at most `len` bytes (0: all), cut before the `depth`-th slash after
/// the first (0: no limit) and, without `whole`, before the query string.
fn uri_key(uri: &[u8], len: u32, depth: u32, whole: bool) -> &[u8] {
    let max = if len > 0 {
        uri.len().min(usize::try_from(len).unwrap_or(usize::MAX))
    } else {
        uri.len()
    };
    let mut slashes = 0;
    let mut end = 0;
    while end < max {
        match uri[end] {
            b'/' => {
                slashes += 1;
                if depth > 0 && slashes == depth + 1 {
                    break;
                }
            }
            b'?' if !whole => break,
            _ => {}
        }
        end += 1;
    }
    &uri[..end]
}

/// `http_parse_path`: an absolute-form target without its scheme and authority (query kept);
/// empty for `*` and authority-form.
fn uri_path(target: &str) -> &str {
    if target.starts_with('/') {
        return target;
    }
    match target.find("://") {
        Some(i) => target[i + 3..]
            .find('/')
            .map_or("", |j| &target[i + 3 + j..]),
        None => "",
    }
}

/// `get_server_ph`: the value of the first `name=` parameter of the query string.
fn url_param<'a>(uri: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let q = uri.iter().position(|&c| c == b'?')?;
    let mut params = &uri[q + 1..];
    let plen = name.len();
    while params.len() > plen {
        if params[plen] == b'=' && &params[..plen] == name {
            let v = &params[plen + 1..];
            let end = v.iter().position(|&c| c == b'&').unwrap_or(v.len());
            return Some(&v[..end]);
        }
        let amp = params.iter().position(|&c| c == b'&')?;
        params = &params[amp + 1..];
    }
    None
}

/// `get_server_ph_post`'s value of `name` in a form-encoded body: as the query string's,
/// except that a value whose first byte is not a token character is refused (None: the body
/// holds no parameters), or empty when that byte is a blank or a line end.
fn post_param<'a>(body: &'a [u8], name: &[u8]) -> Option<&'a [u8]> {
    let mut params = body;
    let plen = name.len();
    while params.len() > plen {
        if params[plen] == b'=' && &params[..plen] == name {
            let v = &params[plen + 1..];
            let end = v.iter().position(|&c| c == b'&').unwrap_or(v.len());
            // HAProxy looks at the value's first byte on each step, never the next ones.
            return match v.first() {
                Some(&c) if end > 0 && !crate::http::h1::is_tchar(c) => {
                    matches!(c, b' ' | b'\t' | b'\r' | b'\n').then_some(&v[..0])
                }
                _ => Some(&v[..end]),
            };
        }
        let amp = params.iter().position(|&c| c == b'&')?;
        params = &params[amp + 1..];
    }
    None
}

/// `get_server_hh`'s value: the first comma-separated value of the first occurrence, without
/// surrounding blanks; `None` when absent or empty.
fn header_value<'a>(req: &'a RequestHead, name: &'a str) -> Option<&'a [u8]> {
    let raw = req.headers.get_first(name)?;
    let first = raw.split(|&c| c == b',').next().unwrap_or(raw);
    let is_blank = |c: &u8| *c == b' ' || *c == b'\t';
    let start = first
        .iter()
        .position(|c| !is_blank(c))
        .unwrap_or(first.len());
    let end = first
        .iter()
        .rposition(|c| !is_blank(c))
        .map_or(start, |e| e + 1);
    let v = first.get(start..end.max(start))?;
    (!v.is_empty()).then_some(v)
}

/// `use_domain_only`: the label before the last dot ("www.example.com" → "example"); the whole
/// value when it has no dot, as HAProxy's backward scan.
fn main_domain(v: &[u8]) -> &[u8] {
    let Some(last) = v.iter().rposition(|&c| c == b'.') else {
        return v;
    };
    let start = v[..last]
        .iter()
        .rposition(|&c| c == b'.')
        .map_or(0, |d| d + 1);
    &v[start..last]
}

/// HAProxy's `recalc_server_map`: `tot` slots, each to the member whose accumulated score,
/// divided by `tot`, is highest (the first on ties), which then pays `tot` back.
fn haproxy_map(members: &[(usize, u32)], tot: u32) -> Vec<usize> {
    let tot_i = i64::from(tot);
    let mut score = vec![0i64; members.len()];
    let mut map = Vec::with_capacity(usize::try_from(tot).unwrap_or(0));
    for _ in 0..tot {
        let mut best: Option<(usize, i64)> = None;
        for (k, &(_, w)) in members.iter().enumerate() {
            if tot == 1 {
                best = Some((k, 0));
                break;
            }
            score[k] += i64::from(w);
            let v = (score[k] + tot_i) / tot_i;
            if best.is_none_or(|(_, max)| v > max) {
                best = Some((k, v));
            }
        }
        let Some((k, _)) = best else { break };
        if let (Some(&(idx, _)), Some(sc)) = (members.get(k), score.get_mut(k)) {
            map.push(idx);
            *sc -= tot_i;
        }
    }
    map
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A per-thread xorshift (HAProxy's `statistical_prng`): random enough to spread, not secret.
pub(crate) fn random_u32() -> u32 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u32> = Cell::new({
            let mut seed = [0u8; 4];
            let _ = ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut seed);
            u32::from_ne_bytes(seed) | 1
        });
    }
    STATE.with(|s| {
        let mut x = s.get();
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        s.set(x);
        x
    })
}

#[cfg(test)]
mod tests;
