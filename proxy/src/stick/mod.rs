//! Stick tables (`stick-table type ip|ipv6 … store conn_rate(…),conn_cur,http_req_rate(…)`):
//! per-source counters shared by every worker, the stick counters a session tracks
//! (`track-sc0 src`), and `show table` / `clear table` in HAProxy 2.6's format.
//!
//! A table is sharded: each shard is a mutex over a hash map, so workers tracking different
//! sources rarely meet, and a proxy without a table costs nothing. Clock-free: callers pass the
//! time in milliseconds (`model::clock_ms`), except a tracker's release on drop, which reads the
//! table's clock.

pub mod freq;
pub mod key;
pub mod show;

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::config::model::{Config, StickKey, StickStore, StickTable};
pub use freq::FreqCtr;
pub use key::Key;

/// Stick counters a session may track (`sc0`..`sc2`, HAProxy's `MAX_SESS_STKCTR`).
pub const MAX_SC: usize = 3;

const SHARDS: usize = 16;

/// What a stick fetch does with its data type.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StickOp {
    /// `sc0_conn_cnt`, `sc0_get_gpc0`.
    Read,
    /// `sc0_inc_gpc0`: increments, returns the new value.
    Inc,
    /// `sc0_clr_gpc0`: resets, returns the previous value.
    Clr,
    /// `sc0_kbytes_in`: the byte counter in kilobytes.
    Kbytes,
}

/// A stored data type, numbered as HAProxy 2.6's `STKTABLE_DT_*` (what the peers protocol
/// carries). `server_id` is kept apart, in [`Entry::server`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum StickData {
    Gpt0 = 1,
    Gpc0 = 2,
    Gpc0Rate = 3,
    ConnCnt = 4,
    ConnRate = 5,
    ConnCur = 6,
    SessCnt = 7,
    SessRate = 8,
    HttpReqCnt = 9,
    HttpReqRate = 10,
    HttpErrCnt = 11,
    HttpErrRate = 12,
    BytesInCnt = 13,
    BytesInRate = 14,
    BytesOutCnt = 15,
    BytesOutRate = 16,
    Gpc1 = 17,
    Gpc1Rate = 18,
    HttpFailCnt = 20,
    HttpFailRate = 21,
    /// The arrays (`gpt(<n>)`, `gpc(<n>)`, `gpc_rate(<n>,<p>)`): `n` elements each.
    Gpt = 22,
    Gpc = 23,
    GpcRate = 24,
}

/// HAProxy's data type number of `server_id`.
pub const SERVER_ID: u32 = 0;

impl StickData {
    /// In HAProxy's data type order (the order of `show table`'s columns).
    pub const ALL: [StickData; 23] = [
        StickData::Gpt0,
        StickData::Gpc0,
        StickData::Gpc0Rate,
        StickData::ConnCnt,
        StickData::ConnRate,
        StickData::ConnCur,
        StickData::SessCnt,
        StickData::SessRate,
        StickData::HttpReqCnt,
        StickData::HttpReqRate,
        StickData::HttpErrCnt,
        StickData::HttpErrRate,
        StickData::BytesInCnt,
        StickData::BytesInRate,
        StickData::BytesOutCnt,
        StickData::BytesOutRate,
        StickData::Gpc1,
        StickData::Gpc1Rate,
        StickData::HttpFailCnt,
        StickData::HttpFailRate,
        StickData::Gpt,
        StickData::Gpc,
        StickData::GpcRate,
    ];
    /// HAProxy's name (`conn_rate`).
    pub fn name(self) -> &'static str {
        match self {
            StickData::Gpt0 => "gpt0",
            StickData::Gpc0 => "gpc0",
            StickData::Gpc0Rate => "gpc0_rate",
            StickData::ConnCnt => "conn_cnt",
            StickData::ConnCur => "conn_cur",
            StickData::ConnRate => "conn_rate",
            StickData::SessCnt => "sess_cnt",
            StickData::SessRate => "sess_rate",
            StickData::HttpReqCnt => "http_req_cnt",
            StickData::HttpReqRate => "http_req_rate",
            StickData::HttpErrCnt => "http_err_cnt",
            StickData::HttpErrRate => "http_err_rate",
            StickData::BytesInCnt => "bytes_in_cnt",
            StickData::BytesInRate => "bytes_in_rate",
            StickData::BytesOutCnt => "bytes_out_cnt",
            StickData::BytesOutRate => "bytes_out_rate",
            StickData::Gpc1 => "gpc1",
            StickData::Gpc1Rate => "gpc1_rate",
            StickData::HttpFailCnt => "http_fail_cnt",
            StickData::HttpFailRate => "http_fail_rate",
            StickData::Gpt => "gpt",
            StickData::Gpc => "gpc",
            StickData::GpcRate => "gpc_rate",
        }
    }
    pub fn from_name(name: &str) -> Option<StickData> {
        StickData::ALL.into_iter().find(|d| d.name() == name)
    }
    /// HAProxy's number (`STKTABLE_DT_*`).
    pub fn id(self) -> u32 {
        self as u32
    }
    pub fn from_id(id: u32) -> Option<StickData> {
        StickData::ALL.into_iter().find(|d| d.id() == id)
    }
    /// A frequency counter over a period (`*_rate`).
    pub fn is_rate(self) -> bool {
        matches!(
            self,
            StickData::Gpc0Rate
                | StickData::ConnRate
                | StickData::SessRate
                | StickData::HttpReqRate
                | StickData::HttpErrRate
                | StickData::BytesInRate
                | StickData::BytesOutRate
                | StickData::Gpc1Rate
                | StickData::HttpFailRate
                | StickData::GpcRate
        )
    }
    /// An array type (`gpt`, `gpc`, `gpc_rate`).
    pub fn is_array(self) -> bool {
        matches!(self, StickData::Gpt | StickData::Gpc | StickData::GpcRate)
    }
    /// An unsigned long long (`bytes_*_cnt`); the other counters are 32-bit.
    pub fn is_u64(self) -> bool {
        matches!(self, StickData::BytesInCnt | StickData::BytesOutCnt)
    }
}

/// One stored value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Val {
    Int(u64),
    Freq(FreqCtr),
}

/// Which data a table stores; rates with their period in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Store {
    /// Bit n: data type n is stored (HAProxy's numbering; bit 0 is `server_id`).
    mask: u32,
    periods: [u64; 25],
    /// How many values each stored type has (1, or an array's size).
    counts: [u8; 25],
}

impl Store {
    pub fn from_cfg(store: &[StickStore]) -> Store {
        let mut s = Store::default();
        let ms = |d: &std::time::Duration| (d.as_millis() as u64).max(1);
        for st in store {
            let (d, p) = match st {
                StickStore::ServerId => {
                    s.mask |= 1 << SERVER_ID;
                    continue;
                }
                StickStore::Gpt0 => (StickData::Gpt0, None),
                StickStore::Gpc0 => (StickData::Gpc0, None),
                StickStore::Gpc0Rate(d) => (StickData::Gpc0Rate, Some(d)),
                StickStore::ConnCnt => (StickData::ConnCnt, None),
                StickStore::ConnCur => (StickData::ConnCur, None),
                StickStore::ConnRate(d) => (StickData::ConnRate, Some(d)),
                StickStore::SessCnt => (StickData::SessCnt, None),
                StickStore::SessRate(d) => (StickData::SessRate, Some(d)),
                StickStore::HttpReqCnt => (StickData::HttpReqCnt, None),
                StickStore::HttpReqRate(d) => (StickData::HttpReqRate, Some(d)),
                StickStore::HttpErrCnt => (StickData::HttpErrCnt, None),
                StickStore::HttpErrRate(d) => (StickData::HttpErrRate, Some(d)),
                StickStore::BytesInCnt => (StickData::BytesInCnt, None),
                StickStore::BytesInRate(d) => (StickData::BytesInRate, Some(d)),
                StickStore::BytesOutCnt => (StickData::BytesOutCnt, None),
                StickStore::BytesOutRate(d) => (StickData::BytesOutRate, Some(d)),
                StickStore::Gpc1 => (StickData::Gpc1, None),
                StickStore::Gpc1Rate(d) => (StickData::Gpc1Rate, Some(d)),
                StickStore::HttpFailCnt => (StickData::HttpFailCnt, None),
                StickStore::HttpFailRate(d) => (StickData::HttpFailRate, Some(d)),
                StickStore::Gpt(n) | StickStore::Gpc(n) | StickStore::GpcRate(n, _) => {
                    let (d, p) = match st {
                        StickStore::Gpt(_) => (StickData::Gpt, None),
                        StickStore::Gpc(_) => (StickData::Gpc, None),
                        StickStore::GpcRate(_, p) => (StickData::GpcRate, Some(p)),
                        _ => continue,
                    };
                    s.counts[d.id() as usize] = (*n).clamp(1, 100) as u8;
                    (d, p)
                }
            };
            s.mask |= 1 << d.id();
            let c = &mut s.counts[d.id() as usize];
            *c = (*c).max(1);
            if let Some(p) = p {
                s.periods[d.id() as usize] = ms(p);
            }
        }
        s
    }
    pub fn has(&self, d: StickData) -> bool {
        self.mask & (1 << d.id()) != 0
    }
    /// `store server_id`.
    pub fn has_server_id(&self) -> bool {
        self.mask & (1 << SERVER_ID) != 0
    }
    /// The types stored, HAProxy's bits (what a peers table definition announces).
    pub fn mask(&self) -> u32 {
        self.mask
    }
    /// The period of a stored rate type.
    pub fn period(&self, d: StickData) -> Option<u64> {
        (d.is_rate() && self.has(d)).then(|| self.periods[d.id() as usize])
    }
    /// The stored types, in order.
    pub fn types(&self) -> impl Iterator<Item = StickData> + '_ {
        StickData::ALL.into_iter().filter(|d| self.has(*d))
    }
    /// How many values `d` has (0: not stored; an array's size).
    pub fn count(&self, d: StickData) -> u32 {
        if self.has(d) {
            u32::from(self.counts[d.id() as usize].max(1))
        } else {
            0
        }
    }
    /// Where element `idx` of `d` sits in an entry's values (types are kept in their number
    /// order, an array's elements in a row).
    fn slot_at(&self, d: StickData, idx: u32) -> Option<usize> {
        if idx >= self.count(d) {
            return None;
        }
        let below: u32 = StickData::ALL
            .iter()
            .filter(|x| x.id() < d.id())
            .map(|x| self.count(*x))
            .sum();
        Some((below + idx) as usize)
    }
    /// Where a fetch or an action on `d` (element `idx` of an array) lands, as HAProxy 2.6
    /// falls back: `gpt0` on `gpt[0]`, `gpc0`/`gpc1` (and their rates) on the `gpc` array's
    /// element 0/1 when the table stores the array instead.
    pub fn locate(&self, d: StickData, idx: u32) -> Option<(StickData, u32)> {
        use StickData as D;
        let fallback = match d {
            D::Gpt0 => Some((D::Gpt, 0)),
            D::Gpc0 => Some((D::Gpc, 0)),
            D::Gpc1 => Some((D::Gpc, 1)),
            D::Gpc0Rate => Some((D::GpcRate, 0)),
            D::Gpc1Rate => Some((D::GpcRate, 1)),
            _ => None,
        };
        if d.is_array() {
            return (idx < self.count(d)).then_some((d, idx));
        }
        if self.has(d) {
            return Some((d, 0));
        }
        fallback.filter(|(a, i)| *i < self.count(*a))
    }
    fn blank(&self, now: u64) -> Vec<Val> {
        self.types()
            .flat_map(|d| {
                let v = if d.is_rate() {
                    Val::Freq(FreqCtr::new(now))
                } else {
                    Val::Int(0)
                };
                std::iter::repeat_n(v, self.count(d) as usize)
            })
            .collect()
    }
}

/// One key's counters.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Stands for HAProxy's entry address in `show table` (stable while the entry lives).
    pub id: u64,
    /// Trackers holding the entry (`use=`): it does not expire while held.
    pub refs: u32,
    /// When it expires (ms), if the table has `expire`.
    pub expire_at: u64,
    /// The table's change number of its last local change (0: none, or learnt from a peer):
    /// what the peers task pushes.
    pub upd: u64,
    /// The stored values, one per stored type in number order ([`Store::slot`]).
    vals: Vec<Val>,
    /// `stick` rules: the server the key sticks to (`server_id`, `server_key`; the name is
    /// empty when only the id was learnt from a peer).
    pub server: Option<(u32, Arc<str>)>,
}

impl Entry {
    fn new(store: &Store, id: u64, now: u64) -> Entry {
        Entry {
            id,
            refs: 0,
            expire_at: now,
            upd: 0,
            vals: store.blank(now),
            server: None,
        }
    }

    /// The value of `d` at `now` (0 when the table does not store it; an array's first).
    pub fn value(&self, store: &Store, d: StickData, now: u64) -> u64 {
        self.value_at(store, d, 0, now)
    }

    /// The value of element `idx` of `d` at `now` (0 when not stored).
    pub fn value_at(&self, store: &Store, d: StickData, idx: u32, now: u64) -> u64 {
        match store.slot_at(d, idx).and_then(|i| self.vals.get(i)) {
            Some(Val::Int(v)) => *v,
            Some(Val::Freq(f)) => u64::from(f.read(now, store.period(d).unwrap_or(1))),
            None => 0,
        }
    }

    /// The stored value of `d`, raw (what the peers protocol carries).
    pub fn raw(&self, store: &Store, d: StickData) -> Option<Val> {
        self.raw_at(store, d, 0)
    }

    /// [`Entry::raw`] of element `idx` (an array's).
    pub fn raw_at(&self, store: &Store, d: StickData, idx: u32) -> Option<Val> {
        store
            .slot_at(d, idx)
            .and_then(|i| self.vals.get(i))
            .copied()
    }

    /// Replaces the stored value of `d` (a peer's, or `set table`): ignored when the table does
    /// not store `d` or the kind differs.
    pub fn set_raw(&mut self, store: &Store, d: StickData, v: Val) {
        self.set_raw_at(store, d, 0, v);
    }

    /// [`Entry::set_raw`] of element `idx` (ignored past the table's array size).
    pub fn set_raw_at(&mut self, store: &Store, d: StickData, idx: u32, v: Val) {
        if let Some(slot) = store.slot_at(d, idx).and_then(|i| self.vals.get_mut(i)) {
            match (slot, v) {
                (Val::Int(a), Val::Int(b)) => *a = clamp(d, b),
                (Val::Freq(a), Val::Freq(b)) => *a = b,
                _ => {}
            }
        }
    }

    /// Adds `n` to counter `d` (32-bit counters saturate as HAProxy's unsigned int would not
    /// wrap in practice); false if not stored.
    pub fn add(&mut self, store: &Store, d: StickData, n: u64) -> bool {
        self.add_at(store, d, 0, n)
    }

    /// [`Entry::add`] on element `idx`.
    pub fn add_at(&mut self, store: &Store, d: StickData, idx: u32, n: u64) -> bool {
        match store.slot_at(d, idx).and_then(|i| self.vals.get_mut(i)) {
            Some(Val::Int(v)) => {
                *v = clamp(d, v.saturating_add(n));
                true
            }
            _ => false,
        }
    }

    /// Counts `n` events on rate `d` at `now`; the events of its current period, if stored.
    pub fn hit(&mut self, store: &Store, d: StickData, now: u64, n: u64) -> Option<u32> {
        self.hit_at(store, d, 0, now, n)
    }

    /// [`Entry::hit`] on element `idx`.
    pub fn hit_at(
        &mut self,
        store: &Store,
        d: StickData,
        idx: u32,
        now: u64,
        n: u64,
    ) -> Option<u32> {
        let p = store.period(d)?;
        match store.slot_at(d, idx).and_then(|i| self.vals.get_mut(i)) {
            Some(Val::Freq(f)) => Some(f.hit_n(now, p, u32::try_from(n).unwrap_or(u32::MAX))),
            _ => None,
        }
    }

    /// Sets counter `d` to `v`; the previous value, if stored.
    pub fn set(&mut self, store: &Store, d: StickData, v: u64) -> Option<u64> {
        self.set_at(store, d, 0, v)
    }

    /// [`Entry::set`] on element `idx`.
    pub fn set_at(&mut self, store: &Store, d: StickData, idx: u32, v: u64) -> Option<u64> {
        match store.slot_at(d, idx).and_then(|i| self.vals.get_mut(i)) {
            Some(Val::Int(x)) => Some(std::mem::replace(x, clamp(d, v))),
            _ => None,
        }
    }
}

fn clamp(d: StickData, v: u64) -> u64 {
    if d.is_u64() {
        v
    } else {
        v.min(u64::from(u32::MAX))
    }
}

type Shard = HashMap<Key, Entry>;

/// One stick table (named after its proxy).
pub struct Table {
    pub name: String,
    pub key: StickKey,
    pub size: u32,
    pub expire_ms: Option<u64>,
    pub store: Store,
    shards: Box<[Mutex<Shard>]>,
    used: AtomicU32,
    next_id: AtomicU64,
    /// The last change number given to an entry (see [`Entry::upd`]).
    seq: AtomicU64,
    /// The clock a tracker released on drop reads (the process clock; tests set their own).
    clock: fn() -> u64,
}

impl std::fmt::Debug for Table {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Table({})", self.name)
    }
}

fn lock(m: &Mutex<Shard>) -> MutexGuard<'_, Shard> {
    // A panic while holding a shard leaves plain counters behind: still usable.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Table {
    pub fn new(name: &str, cfg: &StickTable) -> Table {
        Table::with_clock(name, cfg, crate::model::clock_ms)
    }

    pub fn with_clock(name: &str, cfg: &StickTable, clock: fn() -> u64) -> Table {
        Table {
            name: name.to_string(),
            key: cfg.key,
            size: cfg.size,
            expire_ms: cfg.expire.map(|d| d.as_millis() as u64),
            store: Store::from_cfg(&cfg.store),
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            used: AtomicU32::new(0),
            // Looks like the heap addresses HAProxy prints.
            next_id: AtomicU64::new(0x5580_0000_1000),
            seq: AtomicU64::new(0),
            clock,
        }
    }

    /// HAProxy's key for `ip` (`src_*`): see [`key::from_ip`].
    pub fn key_of(&self, ip: IpAddr) -> Option<Key> {
        key::from_ip(self.key, ip)
    }

    fn shard(&self, key: &Key) -> &Mutex<Shard> {
        let h = match key {
            Key::Ip(IpAddr::V4(v4)) => u64::from(u32::from(*v4)),
            Key::Ip(IpAddr::V6(v6)) => {
                let n = u128::from(*v6);
                (n as u64) ^ ((n >> 64) as u64)
            }
            Key::Int(i) => u64::from(*i),
            Key::Bytes(b) => {
                let mut h = std::collections::hash_map::DefaultHasher::new();
                b.hash(&mut h);
                h.finish()
            }
        };
        let i = (h.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 60) as usize % SHARDS;
        // `i` < SHARDS = shards.len().
        &self.shards[i]
    }

    fn expired(&self, e: &Entry, now: u64) -> bool {
        e.refs == 0 && self.expire_ms.is_some() && e.expire_at <= now
    }

    /// Entries in use now.
    pub fn used(&self) -> u32 {
        self.used.load(Ordering::Relaxed)
    }

    /// Makes room for one entry when the table is full: drops expired entries, then the oldest
    /// unreferenced ones of `held` (the shard being inserted into) and of the other shards that
    /// are free right now. False if every entry is held.
    fn make_room(&self, held: &mut Shard, now: u64) -> bool {
        if self.used() < self.size {
            return true;
        }
        let before = held.len();
        held.retain(|_, e| !self.expired(e, now));
        self.used
            .fetch_sub((before - held.len()) as u32, Ordering::Relaxed);
        if self.used() < self.size {
            return true;
        }
        let oldest = held
            .iter()
            .filter(|(_, e)| e.refs == 0)
            .min_by_key(|(_, e)| e.expire_at)
            .map(|(k, _)| k.clone());
        if let Some(k) = oldest {
            held.remove(&k);
            self.used.fetch_sub(1, Ordering::Relaxed);
            return true;
        }
        for s in self.shards.iter() {
            // Never wait for another shard while holding one (no lock order to respect).
            let Ok(mut other) = s.try_lock() else {
                continue;
            };
            let oldest = other
                .iter()
                .filter(|(_, e)| e.refs == 0)
                .min_by_key(|(_, e)| e.expire_at)
                .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                other.remove(&k);
                self.used.fetch_sub(1, Ordering::Relaxed);
                return true;
            }
        }
        false
    }

    /// Runs `f` on `key`'s entry, created if missing (None when the table is full of held
    /// entries, as HAProxy gives up tracking then).
    fn with_entry<R>(&self, key: Key, now: u64, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let mut shard = lock(self.shard(&key));
        if let Some(e) = shard.get_mut(&key) {
            if self.expired(e, now) {
                *e = Entry::new(
                    &self.store,
                    self.next_id.fetch_add(0x48, Ordering::Relaxed),
                    now,
                );
            }
            return Some(f(e));
        }
        if !self.make_room(&mut shard, now) {
            return None;
        }
        let mut e = Entry::new(
            &self.store,
            self.next_id.fetch_add(0x48, Ordering::Relaxed),
            now,
        );
        let r = f(&mut e);
        shard.insert(key, e);
        self.used.fetch_add(1, Ordering::Relaxed);
        Some(r)
    }

    fn touch(&self, e: &mut Entry, now: u64) {
        if let Some(x) = self.expire_ms {
            e.expire_at = now.saturating_add(x);
        }
        self.mark(e);
    }

    /// Records a local change without touching the expiry. Called with the entry's shard
    /// held, so numbers grow in the order changes land.
    fn mark(&self, e: &mut Entry) {
        e.upd = self.seq.fetch_add(1, Ordering::Relaxed) + 1;
    }

    /// The last change number given (an entry changed later has a greater one).
    pub fn seq(&self) -> u64 {
        self.seq.load(Ordering::Relaxed)
    }

    /// The live entries changed locally after change number `since`, oldest change first.
    pub fn changed_since(&self, since: u64, now: u64) -> Vec<(Key, Entry)> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let shard = lock(s);
            out.extend(
                shard
                    .iter()
                    .filter(|(_, e)| e.upd > since && !self.expired(e, now))
                    .map(|(k, e)| (k.clone(), e.clone())),
            );
        }
        out.sort_by_key(|(_, e)| e.upd);
        out
    }

    /// Stores what a peer says about `key` (`f` sets the counters), with its remaining
    /// lifetime or the table's. Not a local change: it is not pushed back to peers.
    pub fn apply_remote(
        &self,
        key: Key,
        expire_ms: Option<u64>,
        now: u64,
        f: impl FnOnce(&mut Entry),
    ) {
        let life = expire_ms.or(self.expire_ms);
        self.with_entry(key, now, |e| {
            f(e);
            if let Some(x) = life {
                e.expire_at = now.saturating_add(x);
            }
            e.upd = 0;
        });
    }

    /// Runs `f` on `key`'s entry, created if missing, as a local change that renews its expiry
    /// (`src_inc_gpc0`, `set table`). None when the table is full.
    pub fn update<R>(
        &self,
        key: Key,
        now: u64,
        f: impl FnOnce(&mut Entry, &Store) -> R,
    ) -> Option<R> {
        self.with_entry(key, now, |e| {
            let r = f(e, &self.store);
            self.touch(e, now);
            r
        })
    }

    /// Runs `f` on `key`'s live entry (already a key of this table) as a local change that
    /// renews its expiry; None without such an entry.
    pub fn modify_existing<R>(
        &self,
        key: &Key,
        now: u64,
        f: impl FnOnce(&mut Entry, &Store) -> R,
    ) -> Option<R> {
        let mut shard = lock(self.shard(key));
        let e = shard.get_mut(key).filter(|e| !self.expired(e, now))?;
        let r = f(e, &self.store);
        self.touch(e, now);
        Some(r)
    }

    /// Merges what the previous process (a reload's local peer) says about `key` into the
    /// entry this process may already count on: `f` gets the entry and whether it changed
    /// locally; the result is a local change (pushed to remote peers).
    pub fn apply_merge(
        &self,
        key: Key,
        expire_ms: Option<u64>,
        now: u64,
        f: impl FnOnce(&mut Entry, &Store, bool),
    ) {
        let life = expire_ms.or(self.expire_ms);
        self.with_entry(key, now, |e| {
            f(e, &self.store, e.upd > 0);
            if let Some(x) = life {
                e.expire_at = e.expire_at.max(now.saturating_add(x));
            }
            self.mark(e);
        });
    }

    /// `track-scN`: holds `key`'s entry and counts a connection on it (`conn_cnt`, `conn_cur`,
    /// `conn_rate`), as HAProxy's `stream_track_stkctr`. None when the table is full.
    pub fn track(self: &Arc<Self>, key: Key, now: u64) -> Option<Tracked> {
        let st = &self.store;
        self.with_entry(key.clone(), now, |e| {
            e.refs += 1;
            e.add(st, StickData::ConnCur, 1);
            e.add(st, StickData::ConnCnt, 1);
            e.hit(st, StickData::ConnRate, now, 1);
            self.touch(e, now);
        })?;
        Some(Tracked {
            table: Arc::clone(self),
            key,
        })
    }

    /// The value of `d` for `key` without creating an entry (`src_conn_rate`): 0 for an
    /// unknown key (or none), None if the table does not store `d`.
    pub fn peek(&self, key: Option<&Key>, d: StickData, now: u64) -> Option<u64> {
        self.peek_at(key, d, 0, now)
    }

    /// [`Table::peek`] of element `idx`, where [`Store::locate`] finds it.
    pub fn peek_at(&self, key: Option<&Key>, d: StickData, idx: u32, now: u64) -> Option<u64> {
        let (d, i) = self.store.locate(d, idx)?;
        let Some(key) = key else {
            return Some(0);
        };
        let shard = lock(self.shard(key));
        Some(match shard.get(key) {
            Some(e) if !self.expired(e, now) => e.value_at(&self.store, d, i, now),
            _ => 0,
        })
    }

    /// The stored value of `d` for `key`'s live entry, raw, without creating one.
    pub fn raw(&self, key: &Key, d: StickData, now: u64) -> Option<Val> {
        let shard = lock(self.shard(key));
        shard
            .get(key)
            .filter(|e| !self.expired(e, now))
            .and_then(|e| e.raw(&self.store, d))
    }

    /// The server `key` sticks to (`stick match`), without creating an entry.
    pub fn stuck_server(&self, key: &Key, now: u64) -> Option<(u32, Arc<str>)> {
        let shard = lock(self.shard(key));
        match shard.get(key) {
            Some(e) if !self.expired(e, now) => e.server.clone(),
            _ => None,
        }
    }

    /// `stick store-*`: `key` sticks to server `id` (`name`) from now on; the entry's expiry
    /// is renewed. False when the table is full.
    pub fn stick(&self, key: Key, id: u32, name: &str, now: u64) -> bool {
        self.with_entry(key, now, |e| {
            if e.server
                .as_ref()
                .is_none_or(|(i, n)| *i != id || **n != *name)
            {
                e.server = Some((id, Arc::from(name)));
            }
            self.touch(e, now);
        })
        .is_some()
    }

    /// Whether `key` (already a key of this table) has a live entry (`in_table`).
    pub fn contains(&self, key: &Key, now: u64) -> bool {
        let shard = lock(self.shard(key));
        shard.get(key).is_some_and(|e| !self.expired(e, now))
    }

    /// A copy of every live entry, sorted by key (expired ones are dropped on the way).
    pub fn entries(&self, now: u64) -> Vec<(Key, Entry)> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let mut shard = lock(s);
            let before = shard.len();
            shard.retain(|_, e| !self.expired(e, now));
            self.used
                .fetch_sub((before - shard.len()) as u32, Ordering::Relaxed);
            out.extend(shard.iter().map(|(k, e)| (k.clone(), e.clone())));
        }
        out.sort_by(|(a, _), (b, _)| a.cmp(b));
        out
    }

    /// Removes the entries `keep` rejects, except those in use (`clear table`).
    pub fn remove_where(&self, now: u64, mut remove: impl FnMut(&Key, &Entry) -> bool) {
        for s in self.shards.iter() {
            let mut shard = lock(s);
            let before = shard.len();
            shard.retain(|k, e| !self.expired(e, now) && (e.refs > 0 || !remove(k, e)));
            self.used
                .fetch_sub((before - shard.len()) as u32, Ordering::Relaxed);
        }
    }
}

/// A held stick-table entry (`track-scN`): released when dropped (`conn_cur` goes down and the
/// expiry restarts, as when HAProxy stores a stream's counters).
pub struct Tracked {
    table: Arc<Table>,
    key: Key,
}

impl std::fmt::Debug for Tracked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tracked({}:{:?})", self.table.name, self.key)
    }
}

impl Tracked {
    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }
    pub fn key(&self) -> &Key {
        &self.key
    }
    fn with<R>(&self, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let mut shard = lock(self.table.shard(&self.key));
        shard.get_mut(&self.key).map(f)
    }
    /// The value of `d`, if the table stores it.
    pub fn read(&self, d: StickData, now: u64) -> Option<u64> {
        self.read_at(d, 0, now)
    }
    /// The value of `d` (element `idx` of an array), where [`Store::locate`] finds it.
    pub fn read_at(&self, d: StickData, idx: u32, now: u64) -> Option<u64> {
        let (d, i) = self.table.store.locate(d, idx)?;
        self.with(|e| e.value_at(&self.table.store, d, i, now))
    }
    /// Runs `f` on the entry and records a local change (what peers are pushed); `renew`
    /// restarts the expiry too (HAProxy's `stktable_touch_local` after a gpc/gpt change).
    fn change<R>(&self, renew: bool, f: impl FnOnce(&mut Entry, &Store) -> R) -> Option<R> {
        let t = &self.table;
        let now = (t.clock)();
        self.with(|e| {
            let r = f(e, &t.store);
            if renew {
                t.touch(e, now);
            } else {
                t.mark(e);
            }
            r
        })
    }
    /// One HTTP request (`http_req_cnt`, `http_req_rate`).
    pub fn count_http_req(&self, now: u64) {
        self.change(false, |e, st| {
            e.add(st, StickData::HttpReqCnt, 1);
            e.hit(st, StickData::HttpReqRate, now, 1);
        });
    }
    /// One session (`sess_cnt`, `sess_rate`).
    pub fn count_session(&self, now: u64) {
        self.change(false, |e, st| {
            e.add(st, StickData::SessCnt, 1);
            e.hit(st, StickData::SessRate, now, 1);
        });
    }
    /// What a transaction or a `mode tcp` stream leaves when it ends: its bytes each way
    /// (`bytes_*`) and, for a response status, a 4xx as an error (`http_err_*`) and a 5xx
    /// other than 501 and 505 as a failure (`http_fail_*`), as HAProxy counts them.
    pub fn count_end(&self, status: Option<u16>, bytes_in: u64, bytes_out: u64, now: u64) {
        let st = self.table.store;
        let err = status.is_some_and(|s| (400..500).contains(&s));
        let fail = status.is_some_and(|s| (500..600).contains(&s) && s != 501 && s != 505);
        let bytes = bytes_in > 0 || bytes_out > 0;
        let any = |ds: &[StickData]| ds.iter().any(|d| st.has(*d));
        use StickData as D;
        if !(err && any(&[D::HttpErrCnt, D::HttpErrRate])
            || fail && any(&[D::HttpFailCnt, D::HttpFailRate])
            || bytes
                && any(&[
                    D::BytesInCnt,
                    D::BytesInRate,
                    D::BytesOutCnt,
                    D::BytesOutRate,
                ]))
        {
            return;
        }
        self.change(false, |e, st| {
            if err {
                e.add(st, D::HttpErrCnt, 1);
                e.hit(st, D::HttpErrRate, now, 1);
            }
            if fail {
                e.add(st, D::HttpFailCnt, 1);
                e.hit(st, D::HttpFailRate, now, 1);
            }
            if bytes_in > 0 {
                e.add(st, D::BytesInCnt, bytes_in);
                e.hit(st, D::BytesInRate, now, bytes_in);
            }
            if bytes_out > 0 {
                e.add(st, D::BytesOutCnt, bytes_out);
                e.hit(st, D::BytesOutRate, now, bytes_out);
            }
        });
    }
    /// `sc-inc-gpc0|1`, `sc-inc-gpc(<idx>)`, `sc_inc_gpc*`: see [`inc_gpc`]; `cnt` is
    /// `Gpc0`, `Gpc1` or `Gpc` (element `idx`).
    pub fn inc_gpc(&self, cnt: StickData, idx: u32, now: u64) -> u64 {
        let st = &self.table.store;
        if st.locate(cnt, idx).is_none() && st.locate(rate_of(cnt), idx).is_none() {
            return 0;
        }
        self.change(true, |e, st| inc_gpc(e, st, cnt, idx, now))
            .unwrap_or(0)
    }
    /// `sc_clr_gpc*`: see [`clr_gpc`].
    pub fn clr_gpc(&self, cnt: StickData, idx: u32) -> Option<u64> {
        self.change(true, |e, st| clr_gpc(e, st, cnt, idx))
            .flatten()
    }
    /// `sc-set-gpt0` (`d`: `Gpt0`) / `sc-set-gpt(<idx>)` (`d`: `Gpt`): false if the table does
    /// not store it.
    pub fn set_gpt(&self, d: StickData, idx: u32, v: u64) -> bool {
        let Some((d, i)) = self.table.store.locate(d, idx) else {
            return false;
        };
        self.change(true, |e, st| e.set_at(st, d, i, v)).is_some()
    }
}

/// The rate counted with general purpose counter type `cnt`.
fn rate_of(cnt: StickData) -> StickData {
    match cnt {
        StickData::Gpc0 => StickData::Gpc0Rate,
        StickData::Gpc1 => StickData::Gpc1Rate,
        _ => StickData::GpcRate,
    }
}

/// Increments a general purpose counter and counts one event on its rate, as HAProxy's
/// `smp_fetch_sc_inc_gpc*`: the new counter, else the rate's current period, else 0.
pub fn inc_gpc(e: &mut Entry, st: &Store, cnt: StickData, idx: u32, now: u64) -> u64 {
    let mut out = 0;
    if let Some((r, i)) = st.locate(rate_of(cnt), idx)
        && let Some(n) = e.hit_at(st, r, i, now, 1)
    {
        out = u64::from(n);
    }
    if let Some((c, i)) = st.locate(cnt, idx)
        && e.add_at(st, c, i, 1)
    {
        out = e.value_at(st, c, i, now);
    }
    out
}

/// Resets a general purpose counter, returning its previous value (None when not stored), as
/// HAProxy's `smp_fetch_sc_clr_gpc*` (the rate is left alone).
pub fn clr_gpc(e: &mut Entry, st: &Store, cnt: StickData, idx: u32) -> Option<u64> {
    let (c, i) = st.locate(cnt, idx)?;
    e.set_at(st, c, i, 0)
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let now = (self.table.clock)();
        let t = Arc::clone(&self.table);
        self.with(|e| {
            e.refs = e.refs.saturating_sub(1);
            if let Some(Val::Int(c)) = e.raw(&t.store, StickData::ConnCur) {
                e.set(&t.store, StickData::ConnCur, c.saturating_sub(1));
            }
            t.touch(e, now);
        });
    }
}

/// The stick counters of a session or a stream: each set at most once (`track-scN` is ignored
/// for a counter already tracked), released together when dropped. Boxed: every connection
/// has these, few track anything, and an idle connection should not carry three empty entries.
#[derive(Debug, Default)]
pub struct StkCtrs([OnceLock<Box<Tracked>>; MAX_SC]);

impl StkCtrs {
    pub fn get(&self, sc: usize) -> Option<&Tracked> {
        self.0.get(sc).and_then(OnceLock::get).map(|t| &**t)
    }
    pub fn is_set(&self, sc: usize) -> bool {
        self.get(sc).is_some()
    }
    /// Tracks `key` in `table` as counter `sc` unless already tracked; true if this call did.
    pub fn track(&self, sc: usize, table: &Arc<Table>, key: Key, now: u64) -> bool {
        let Some(slot) = self.0.get(sc) else {
            return false;
        };
        if slot.get().is_some() {
            return false;
        }
        match table.track(key, now) {
            Some(t) => slot.set(Box::new(t)).is_ok(),
            None => false,
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = &Tracked> {
        self.0.iter().filter_map(OnceLock::get).map(|t| &**t)
    }
}

/// What an ended transaction or `mode tcp` stream leaves on the counters it tracked (see
/// [`Tracked::count_end`]): for each of `sc0`..`sc2`, the stream's counter, else the session's,
/// as HAProxy's `stream_inc_http_err_ctr` and `stream_process_counters`. `now` is read only
/// when something is tracked (most streams track nothing: no clock read for them).
pub fn count_end(
    [sess, strm]: [Option<&StkCtrs>; 2],
    status: Option<u16>,
    bytes_in: u64,
    bytes_out: u64,
    now: impl FnOnce() -> u64,
) {
    let tracked = |c: Option<&StkCtrs>| c.is_some_and(|c| c.iter().next().is_some());
    if !tracked(sess) && !tracked(strm) {
        return;
    }
    let now = now();
    for sc in 0..MAX_SC {
        let t = strm
            .and_then(|s| s.get(sc))
            .or_else(|| sess.and_then(|s| s.get(sc)));
        if let Some(t) = t {
            t.count_end(status, bytes_in, bytes_out, now);
        }
    }
}

/// Every stick table of the configuration, in declaration order.
#[derive(Debug, Default)]
pub struct Tables(Vec<Arc<Table>>);

impl Tables {
    pub fn build(cfg: &Config) -> Tables {
        let own = cfg.proxies.iter().filter_map(|p| {
            p.stick_table
                .as_ref()
                .map(|t| Arc::new(Table::new(&p.name, t)))
        });
        // `table <name>` lines of `peers` sections are known as `<section>/<name>`.
        let peers = cfg.peers.iter().flat_map(|s| {
            s.tables
                .iter()
                .map(|(n, t)| Arc::new(Table::new(&format!("{}/{n}", s.name), t)))
        });
        Tables(own.chain(peers).collect())
    }
    pub fn from_tables(t: Vec<Arc<Table>>) -> Tables {
        Tables(t)
    }
    pub fn find(&self, name: &str) -> Option<&Arc<Table>> {
        self.0.iter().find(|t| t.name == name)
    }
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Arc<Table>> {
        self.0.iter()
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// What the stick fetches read for one evaluation (carried by `SampleCtx`).
#[derive(Clone, Copy)]
pub struct StickView<'a> {
    pub now_ms: u64,
    /// Counters tracked by the session (`tcp-request connection`).
    pub sess: Option<&'a StkCtrs>,
    /// Counters tracked by the stream (`http-request`, `tcp-request content`).
    pub strm: Option<&'a StkCtrs>,
    /// The proxy's own table (default of `src_*` and `track-sc`).
    pub own: Option<&'a Arc<Table>>,
    pub tables: &'a Tables,
}

impl std::fmt::Debug for StickView<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StickView(now={})", self.now_ms)
    }
}

impl<'a> StickView<'a> {
    /// Counter `sc`: the stream's, else the session's (as HAProxy's `smp_fetch_sc_stkctr`).
    pub fn tracked(&self, sc: usize) -> Option<&'a Tracked> {
        self.strm
            .and_then(|s| s.get(sc))
            .or_else(|| self.sess.and_then(|s| s.get(sc)))
    }
    /// A table by name, or the proxy's own.
    pub fn table(&self, name: Option<&str>) -> Option<&'a Arc<Table>> {
        match name {
            Some(n) => self.tables.find(n),
            None => self.own,
        }
    }
    /// `sc_<data>(sc[,table])`: None when the counter is not tracked or its table lacks `d`.
    pub fn sc_value(&self, sc: usize, table: Option<&str>, d: StickData) -> Option<u64> {
        self.sc_value_at(sc, table, d, 0)
    }
    fn sc_value_at(&self, sc: usize, table: Option<&str>, d: StickData, idx: u32) -> Option<u64> {
        let t = self.tracked(sc)?;
        match table {
            Some(n) if n != t.table().name => {
                self.tables
                    .find(n)?
                    .peek_at(Some(t.key()), d, idx, self.now_ms)
            }
            _ => t.read_at(d, idx, self.now_ms),
        }
    }
    /// `src_<data>([table])`.
    pub fn src_value(&self, src: IpAddr, table: Option<&str>, d: StickData) -> Option<u64> {
        let t = self.table(table)?;
        t.peek(t.key_of(src).as_ref(), d, self.now_ms)
    }
    /// `sc_<op>_<data>(sc[,table])` (`sc_<op>_gpc(idx,sc[,table])` on element `idx` of an
    /// array): reads, or increments/clears a general purpose counter of the tracked entry (in
    /// another table: its entry for the same key, if any).
    pub fn sc_op(
        &self,
        sc: usize,
        table: Option<&str>,
        op: StickOp,
        (d, idx): (StickData, u32),
    ) -> Option<u64> {
        let now = self.now_ms;
        match op {
            StickOp::Read => self.sc_value_at(sc, table, d, idx),
            StickOp::Kbytes => self.sc_value(sc, table, d).map(|v| v >> 10),
            StickOp::Inc | StickOp::Clr => {
                let t = self.tracked(sc)?;
                match table {
                    Some(n) if n != t.table().name => {
                        let other = self.tables.find(n)?;
                        match other.modify_existing(t.key(), now, |e, st| match op {
                            StickOp::Inc => Some(inc_gpc(e, st, d, idx, now)),
                            _ => clr_gpc(e, st, d, idx),
                        }) {
                            Some(r) => r,
                            None => Some(0),
                        }
                    }
                    _ if op == StickOp::Inc => Some(t.inc_gpc(d, idx, now)),
                    _ => t.clr_gpc(d, idx),
                }
            }
        }
    }
    /// `src_<op>_<data>([table])`: `inc`/`clr` create the source's entry, as HAProxy does.
    pub fn src_op(
        &self,
        src: IpAddr,
        table: Option<&str>,
        op: StickOp,
        (d, idx): (StickData, u32),
    ) -> Option<u64> {
        let now = self.now_ms;
        let t = self.table(table)?;
        match op {
            StickOp::Read => t.peek_at(t.key_of(src).as_ref(), d, idx, now),
            StickOp::Kbytes => self.src_value(src, table, d).map(|v| v >> 10),
            StickOp::Inc => t.update(t.key_of(src)?, now, |e, st| inc_gpc(e, st, d, idx, now)),
            StickOp::Clr => t.update(t.key_of(src)?, now, |e, st| clr_gpc(e, st, d, idx))?,
        }
    }
}

/// A data type HAProxy 2.6 knows that [`StickData`] does not list (`set table`'s "not
/// stored" rather than "unknown").
pub fn is_haproxy_type(name: &str) -> bool {
    matches!(name, "server_id" | "server_key" | "server_name")
}

#[cfg(test)]
mod tests;
