//! Stick tables (`stick-table type ip|ipv6 … store conn_rate(…),conn_cur,http_req_rate(…)`):
//! per-source counters shared by every worker, the stick counters a session tracks
//! (`track-sc0 src`), and `show table` / `clear table` in HAProxy 2.6's format.
//!
//! A table is sharded: each shard is a mutex over a hash map, so workers tracking different
//! sources rarely meet, and a proxy without a table costs nothing. Clock-free: callers pass the
//! time in milliseconds (`model::clock_ms`), except a tracker's release on drop, which reads the
//! table's clock.

pub mod freq;
pub mod show;

use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::config::model::{Config, StickKey, StickStore, StickTable};
pub use freq::FreqCtr;

/// Stick counters a session may track (`sc0`..`sc2`, HAProxy's `MAX_SESS_STKCTR`).
pub const MAX_SC: usize = 3;

const SHARDS: usize = 16;

/// A stored data type a fetch reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum StickData {
    ConnCnt,
    ConnCur,
    ConnRate,
    SessCnt,
    SessRate,
    HttpReqCnt,
    HttpReqRate,
}

impl StickData {
    pub const ALL: [StickData; 7] = [
        StickData::ConnCnt,
        StickData::ConnRate,
        StickData::ConnCur,
        StickData::SessCnt,
        StickData::SessRate,
        StickData::HttpReqCnt,
        StickData::HttpReqRate,
    ];
    /// HAProxy's name (`conn_rate`).
    pub fn name(self) -> &'static str {
        match self {
            StickData::ConnCnt => "conn_cnt",
            StickData::ConnCur => "conn_cur",
            StickData::ConnRate => "conn_rate",
            StickData::SessCnt => "sess_cnt",
            StickData::SessRate => "sess_rate",
            StickData::HttpReqCnt => "http_req_cnt",
            StickData::HttpReqRate => "http_req_rate",
        }
    }
    pub fn from_name(name: &str) -> Option<StickData> {
        StickData::ALL.into_iter().find(|d| d.name() == name)
    }
}

/// Which data a table stores; rates with their period in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Store {
    pub conn_cnt: bool,
    pub conn_cur: bool,
    pub conn_rate: Option<u64>,
    pub sess_cnt: bool,
    pub sess_rate: Option<u64>,
    pub http_req_cnt: bool,
    pub http_req_rate: Option<u64>,
}

impl Store {
    pub fn from_cfg(store: &[StickStore]) -> Store {
        let mut s = Store::default();
        let ms = |d: &std::time::Duration| Some((d.as_millis() as u64).max(1));
        for st in store {
            match st {
                StickStore::ConnCnt => s.conn_cnt = true,
                StickStore::ConnCur => s.conn_cur = true,
                StickStore::ConnRate(d) => s.conn_rate = ms(d),
                StickStore::SessCnt => s.sess_cnt = true,
                StickStore::SessRate(d) => s.sess_rate = ms(d),
                StickStore::HttpReqCnt => s.http_req_cnt = true,
                StickStore::HttpReqRate(d) => s.http_req_rate = ms(d),
            }
        }
        s
    }
    pub fn has(&self, d: StickData) -> bool {
        match d {
            StickData::ConnCnt => self.conn_cnt,
            StickData::ConnCur => self.conn_cur,
            StickData::ConnRate => self.conn_rate.is_some(),
            StickData::SessCnt => self.sess_cnt,
            StickData::SessRate => self.sess_rate.is_some(),
            StickData::HttpReqCnt => self.http_req_cnt,
            StickData::HttpReqRate => self.http_req_rate.is_some(),
        }
    }
    /// The period of a rate type.
    pub fn period(&self, d: StickData) -> Option<u64> {
        match d {
            StickData::ConnRate => self.conn_rate,
            StickData::SessRate => self.sess_rate,
            StickData::HttpReqRate => self.http_req_rate,
            _ => None,
        }
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
    pub conn_cnt: u32,
    pub conn_cur: u32,
    pub conn_rate: FreqCtr,
    pub sess_cnt: u32,
    pub sess_rate: FreqCtr,
    pub http_req_cnt: u32,
    pub http_req_rate: FreqCtr,
    /// `stick` rules: the server the key sticks to (`server_id`, `server_key`).
    pub server: Option<(u32, Arc<str>)>,
}

impl Entry {
    fn new(id: u64, now: u64) -> Entry {
        Entry {
            id,
            refs: 0,
            expire_at: now,
            upd: 0,
            conn_cnt: 0,
            conn_cur: 0,
            conn_rate: FreqCtr::new(now),
            sess_cnt: 0,
            sess_rate: FreqCtr::new(now),
            http_req_cnt: 0,
            http_req_rate: FreqCtr::new(now),
            server: None,
        }
    }

    /// The value of `d` at `now` (whether the table stores it is the caller's business).
    pub fn value(&self, store: &Store, d: StickData, now: u64) -> u64 {
        let p = store.period(d).unwrap_or(1);
        match d {
            StickData::ConnCnt => u64::from(self.conn_cnt),
            StickData::ConnCur => u64::from(self.conn_cur),
            StickData::ConnRate => u64::from(self.conn_rate.read(now, p)),
            StickData::SessCnt => u64::from(self.sess_cnt),
            StickData::SessRate => u64::from(self.sess_rate.read(now, p)),
            StickData::HttpReqCnt => u64::from(self.http_req_cnt),
            StickData::HttpReqRate => u64::from(self.http_req_rate.read(now, p)),
        }
    }
}

type Shard = HashMap<IpAddr, Entry>;

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

    /// HAProxy's key for `ip`: a `type ip` table takes IPv4 (and IPv4-mapped IPv6) only; a
    /// `type ipv6` table maps IPv4 into `::ffff:a.b.c.d`.
    pub fn key_of(&self, ip: IpAddr) -> Option<IpAddr> {
        match (self.key, ip) {
            (StickKey::Ip, IpAddr::V4(_)) => Some(ip),
            (StickKey::Ip, IpAddr::V6(v6)) => v6.to_ipv4_mapped().map(IpAddr::V4),
            (StickKey::Ipv6, IpAddr::V4(v4)) => Some(IpAddr::V6(v4.to_ipv6_mapped())),
            (StickKey::Ipv6, IpAddr::V6(_)) => Some(ip),
        }
    }

    fn shard(&self, key: &IpAddr) -> &Mutex<Shard> {
        let h = match key {
            IpAddr::V4(v4) => u64::from(u32::from(*v4)),
            IpAddr::V6(v6) => {
                let n = u128::from(*v6);
                (n as u64) ^ ((n >> 64) as u64)
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
            .map(|(k, _)| *k);
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
                .map(|(k, _)| *k);
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
    fn with_entry<R>(&self, key: IpAddr, now: u64, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let mut shard = lock(self.shard(&key));
        if let Some(e) = shard.get_mut(&key) {
            if self.expired(e, now) {
                *e = Entry::new(self.next_id.fetch_add(0x48, Ordering::Relaxed), now);
            }
            return Some(f(e));
        }
        if !self.make_room(&mut shard, now) {
            return None;
        }
        let mut e = Entry::new(self.next_id.fetch_add(0x48, Ordering::Relaxed), now);
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
    pub fn changed_since(&self, since: u64, now: u64) -> Vec<(IpAddr, Entry)> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let shard = lock(s);
            out.extend(
                shard
                    .iter()
                    .filter(|(_, e)| e.upd > since && !self.expired(e, now))
                    .map(|(k, e)| (*k, e.clone())),
            );
        }
        out.sort_by_key(|(_, e)| e.upd);
        out
    }

    /// Stores what a peer says about `key` (`f` sets the counters), with its remaining
    /// lifetime or the table's. Not a local change: it is not pushed back to peers.
    pub fn apply_remote(
        &self,
        key: IpAddr,
        expire_ms: Option<u64>,
        now: u64,
        f: impl FnOnce(&mut Entry),
    ) {
        let Some(key) = self.key_of(key) else {
            return;
        };
        let life = expire_ms.or(self.expire_ms);
        self.with_entry(key, now, |e| {
            f(e);
            if let Some(x) = life {
                e.expire_at = now.saturating_add(x);
            }
            e.upd = 0;
        });
    }

    /// `track-scN`: holds `ip`'s entry and counts a connection on it (`conn_cnt`, `conn_cur`,
    /// `conn_rate`), as HAProxy's `stream_track_stkctr`. None when `ip` is no key of this table
    /// or the table is full.
    pub fn track(self: &Arc<Self>, ip: IpAddr, now: u64) -> Option<Tracked> {
        let key = self.key_of(ip)?;
        let store = self.store;
        self.with_entry(key, now, |e| {
            e.refs += 1;
            e.conn_cur = e.conn_cur.saturating_add(1);
            e.conn_cnt = e.conn_cnt.saturating_add(1);
            if let Some(p) = store.conn_rate {
                e.conn_rate.hit(now, p);
            }
            self.touch(e, now);
        })?;
        Some(Tracked {
            table: Arc::clone(self),
            key,
        })
    }

    /// The value of `d` for `ip` without creating an entry (`src_conn_rate`): 0 for an unknown
    /// source, None if the table does not store `d`.
    pub fn peek(&self, ip: IpAddr, d: StickData, now: u64) -> Option<u64> {
        if !self.store.has(d) {
            return None;
        }
        let Some(key) = self.key_of(ip) else {
            return Some(0);
        };
        let shard = lock(self.shard(&key));
        Some(match shard.get(&key) {
            Some(e) if !self.expired(e, now) => e.value(&self.store, d, now),
            _ => 0,
        })
    }

    /// The server `ip` sticks to (`stick match`), without creating an entry.
    pub fn stuck_server(&self, ip: IpAddr, now: u64) -> Option<(u32, Arc<str>)> {
        let key = self.key_of(ip)?;
        let shard = lock(self.shard(&key));
        match shard.get(&key) {
            Some(e) if !self.expired(e, now) => e.server.clone(),
            _ => None,
        }
    }

    /// `stick store-*`: `ip` sticks to server `id` (`name`) from now on; the entry's expiry is
    /// renewed. False when the table is full.
    pub fn stick(&self, ip: IpAddr, id: u32, name: &str, now: u64) -> bool {
        let Some(key) = self.key_of(ip) else {
            return false;
        };
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
    pub fn contains(&self, key: IpAddr, now: u64) -> bool {
        let shard = lock(self.shard(&key));
        shard.get(&key).is_some_and(|e| !self.expired(e, now))
    }

    /// A copy of every live entry, sorted by key (expired ones are dropped on the way).
    pub fn entries(&self, now: u64) -> Vec<(IpAddr, Entry)> {
        let mut out = Vec::new();
        for s in self.shards.iter() {
            let mut shard = lock(s);
            let before = shard.len();
            shard.retain(|_, e| !self.expired(e, now));
            self.used
                .fetch_sub((before - shard.len()) as u32, Ordering::Relaxed);
            out.extend(shard.iter().map(|(k, e)| (*k, e.clone())));
        }
        out.sort_by_key(|(k, _)| *k);
        out
    }

    /// Removes the entries `keep` rejects, except those in use (`clear table`).
    pub fn remove_where(&self, now: u64, mut remove: impl FnMut(&IpAddr, &Entry) -> bool) {
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
    key: IpAddr,
}

impl std::fmt::Debug for Tracked {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Tracked({}:{})", self.table.name, self.key)
    }
}

impl Tracked {
    pub fn table(&self) -> &Arc<Table> {
        &self.table
    }
    pub fn key(&self) -> IpAddr {
        self.key
    }
    fn with<R>(&self, f: impl FnOnce(&mut Entry) -> R) -> Option<R> {
        let mut shard = lock(self.table.shard(&self.key));
        shard.get_mut(&self.key).map(f)
    }
    /// The value of `d`, if the table stores it.
    pub fn read(&self, d: StickData, now: u64) -> Option<u64> {
        if !self.table.store.has(d) {
            return None;
        }
        self.with(|e| e.value(&self.table.store, d, now))
    }
    /// One HTTP request (`http_req_cnt`, `http_req_rate`).
    pub fn count_http_req(&self, now: u64) {
        let store = self.table.store;
        let t = Arc::clone(&self.table);
        self.with(|e| {
            e.http_req_cnt = e.http_req_cnt.saturating_add(1);
            if let Some(p) = store.http_req_rate {
                e.http_req_rate.hit(now, p);
            }
            t.mark(e);
        });
    }
    /// One session (`sess_cnt`, `sess_rate`).
    pub fn count_session(&self, now: u64) {
        let store = self.table.store;
        let t = Arc::clone(&self.table);
        self.with(|e| {
            e.sess_cnt = e.sess_cnt.saturating_add(1);
            if let Some(p) = store.sess_rate {
                e.sess_rate.hit(now, p);
            }
            t.mark(e);
        });
    }
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let now = (self.table.clock)();
        let t = Arc::clone(&self.table);
        self.with(|e| {
            e.refs = e.refs.saturating_sub(1);
            e.conn_cur = e.conn_cur.saturating_sub(1);
            t.touch(e, now);
        });
    }
}

/// The stick counters of a session or a stream: each set at most once (`track-scN` is ignored
/// for a counter already tracked), released together when dropped.
#[derive(Debug, Default)]
pub struct StkCtrs([OnceLock<Tracked>; MAX_SC]);

impl StkCtrs {
    pub fn get(&self, sc: usize) -> Option<&Tracked> {
        self.0.get(sc).and_then(OnceLock::get)
    }
    pub fn is_set(&self, sc: usize) -> bool {
        self.get(sc).is_some()
    }
    /// Tracks `ip` in `table` as counter `sc` unless already tracked; true if this call did.
    pub fn track(&self, sc: usize, table: &Arc<Table>, ip: IpAddr, now: u64) -> bool {
        let Some(slot) = self.0.get(sc) else {
            return false;
        };
        if slot.get().is_some() {
            return false;
        }
        match table.track(ip, now) {
            Some(t) => slot.set(t).is_ok(),
            None => false,
        }
    }
    pub fn iter(&self) -> impl Iterator<Item = &Tracked> {
        self.0.iter().filter_map(OnceLock::get)
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
        let t = self.tracked(sc)?;
        match table {
            Some(n) if n != t.table().name => self.tables.find(n)?.peek(t.key(), d, self.now_ms),
            _ => t.read(d, self.now_ms),
        }
    }
    /// `src_<data>([table])`.
    pub fn src_value(&self, src: IpAddr, table: Option<&str>, d: StickData) -> Option<u64> {
        self.table(table)?.peek(src, d, self.now_ms)
    }
}

/// An address as `show table` prints a key.
pub fn key_text(ip: &IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => fmt_v6(v6),
    }
}

fn fmt_v6(v6: &Ipv6Addr) -> String {
    v6.to_string()
}

#[cfg(test)]
mod tests;
