//! The I/O shell of a `peers` section: listens on the local peer's address, connects to every
//! remote peer (again after a failure), runs one [`Session`] per connection, pushes the local
//! changes of the synced stick tables and applies the remote ones. Runs on the control thread.

use std::cell::RefCell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio::sync::Notify;

use super::session::{Event, LocalTable, Session};
use super::status::{PeerState, SectionStatus};
use super::wire::{self, EntryData, Value};
use crate::config::model::{PeersSection, StickKey};
use crate::engine::Shared;
use crate::engine::service::SessionFuture;
use crate::stick::{Entry, FreqCtr, Key, SERVER_ID, StickData, Table, Val};

/// HAProxy's PEER_HEARTBEAT_TIMEOUT and PEER_RECONNECT_TIMEOUT.
const HEARTBEAT: Duration = Duration::from_secs(3);
const RECONNECT: Duration = Duration::from_secs(5);
/// How often local changes are looked for and pushed.
const PUSH_EVERY: Duration = Duration::from_millis(100);

/// Sections whose tables still have to be handed to the next process: a soft stop waits for
/// this to reach 0 (bounded by [`HANDOVER_LIMIT`]), as HAProxy's old process teaches the new
/// one through the local peer before it leaves.
static HANDOVER_PENDING: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
const HANDOVER_LIMIT: Duration = Duration::from_secs(5);
/// How long a stopping process keeps pushing what its last sessions change.
const DRAIN_LIMIT: Duration = Duration::from_secs(4);

/// True while a stopping process is still handing its stick tables over.
pub fn handover_pending() -> bool {
    HANDOVER_PENDING.load(Ordering::Acquire) > 0
}

/// One task per active `peers` section that syncs at least one table.
pub fn tasks(shared: &Arc<Shared>) -> Vec<SessionFuture> {
    let cfg = &shared.model.cfg;
    cfg.peers
        .iter()
        .filter(|s| s.active)
        .filter_map(|s| {
            let tables = synced_tables(shared, s);
            let si = shared
                .model
                .peers
                .sections
                .iter()
                .position(|x| x.name == s.name)?;
            if tables.is_empty() {
                return None;
            }
            // A section whose TLS cannot be set up does not run (never in clear instead).
            let tls = match PeerTls::build(shared, s) {
                Ok(t) => t,
                Err(e) => {
                    tracing::error!("peers '{}': TLS: {e}; the section is not started", s.name);
                    return None;
                }
            };
            Some({
                let sec = Rc::new(SectionRt::new(
                    Arc::clone(shared),
                    si,
                    s.clone(),
                    tables,
                    tls,
                ));
                // Bound now, before the old process is told to stop (a reload): it hands its
                // tables over to this address as it leaves.
                let listener = s.bind.and_then(|addr| match listen(addr) {
                    Ok(l) => Some((l, Pending::new(addr))),
                    Err(e) => {
                        tracing::error!("peers '{}': cannot listen on {addr}: {e}", s.name);
                        None
                    }
                });
                Box::pin(run(Arc::clone(shared), sec, listener)) as SessionFuture
            })
        })
        .collect()
}

/// The tables a section syncs, as (table id, name on the wire): proxies' `stick-table … peers
/// <section>` (named after the proxy) and the section's own `table` lines (`<section>/<name>`,
/// sent as `<name>`).
pub fn table_ids(cfg: &crate::config::model::Config, s: &PeersSection) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for px in &cfg.proxies {
        if let Some(t) = &px.stick_table
            && t.peers.as_deref() == Some(s.name.as_str())
        {
            out.push((px.name.clone(), px.name.clone()));
        }
    }
    for (n, _) in &s.tables {
        out.push((format!("{}/{n}", s.name), n.clone()));
    }
    out
}

fn synced_tables(shared: &Shared, s: &PeersSection) -> Vec<(Arc<Table>, LocalTable)> {
    let stick = &shared.model.stick;
    table_ids(&shared.model.cfg, s)
        .into_iter()
        .filter_map(|(id, wire)| {
            let rt = stick.find(&id)?;
            Some((Arc::clone(rt), local_table(&wire, rt)))
        })
        .collect()
}

fn local_table(name: &str, t: &Table) -> LocalTable {
    let st = &t.store;
    let periods = st
        .types()
        .filter(|d| !d.is_array())
        .filter_map(|d| Some((d.id(), st.period(d)?)))
        .collect();
    // An array announces its size, and a rate array its period too (HAProxy 2.6's
    // `peer_prepare_switchmsg`).
    let arrays = st
        .types()
        .filter(|d| d.is_array())
        .map(|d| {
            let mut ps = vec![u64::from(st.count(d))];
            ps.extend(st.period(d));
            (d.id(), ps)
        })
        .collect();
    // HAProxy's sample type and `key_size` (a string's counts its final NUL).
    let (key_type, key_len) = match t.key {
        StickKey::Ip => (wire::KEY_IPV4, 4),
        StickKey::Ipv6 => (wire::KEY_IPV6, 16),
        StickKey::Integer => (wire::KEY_SINT, 4),
        StickKey::String(n) => (wire::KEY_STR, u64::from(n) + 1),
        StickKey::Binary(n) => (wire::KEY_BIN, u64::from(n)),
    };
    LocalTable {
        name: name.to_string(),
        key_type,
        key_len,
        data: u64::from(st.mask()),
        periods,
        arrays,
        expire_ms: t.expire_ms.unwrap_or(0),
    }
}

/// An entry as an update carries it: every type the table stores, in number order (an
/// array's elements in a row).
pub(super) fn entry_data(t: &Table, key: &Key, e: &Entry, now: u64) -> EntryData {
    let key = key.wire();
    let st = &t.store;
    let mut values = Vec::new();
    if st.has_server_id() {
        let id = e.server.as_ref().map_or(0, |(id, _)| *id);
        values.push((SERVER_ID, Value::Int(u64::from(id))));
    }
    for d in st.types() {
        for idx in 0..st.count(d) {
            let v = match e.raw_at(st, d, idx) {
                Some(Val::Freq(f)) => {
                    let (tick, curr, prev) = f.parts();
                    Value::Freq {
                        age_ms: u32::try_from(now.saturating_sub(tick)).unwrap_or(u32::MAX),
                        curr,
                        prev,
                    }
                }
                Some(Val::Int(i)) => Value::Int(i),
                None => Value::Int(0),
            };
            values.push((d.id(), v));
        }
    }
    EntryData { key, values }
}

fn entry_key(t: &Table, d: &EntryData) -> Option<Key> {
    crate::stick::key::from_wire(t.key, &d.key)
}

/// A received value as stored (a rate's period start is rebuilt from its age).
fn to_val(v: &Value, now: u64) -> Val {
    match *v {
        Value::Freq { age_ms, curr, prev } => Val::Freq(FreqCtr::from_parts(
            now.saturating_sub(u64::from(age_ms)),
            curr,
            prev,
        )),
        Value::Int(i) => Val::Int(i),
    }
}

/// The server id an update carries, to store if it differs.
fn apply_server_id(e: &mut Entry, v: &Value) {
    // A stick rule's server, known by its id (HAProxy sends the name apart).
    if let Value::Int(id) = *v
        && let Ok(id) = u32::try_from(id)
        && id != 0
        && e.server.as_ref().is_none_or(|(i, _)| *i != id)
    {
        e.server = Some((id, Arc::from("")));
    }
}

/// The XDP per-source map mirrors a table's `conn_rate`: it gets what a peer taught.
fn seed_xdp(t: &Table, d: &EntryData, now: u64) {
    if !t.store.has(StickData::ConnRate) {
        return;
    }
    if let Some(key @ Key::Ip(ip)) = entry_key(t, d)
        && let Some(Val::Freq(f)) = t.raw(&key, StickData::ConnRate, now)
    {
        crate::kernel::xdp::seed_conn_rate(&t.name, ip, &f, now);
    }
}

/// Applies what a peer sent about one entry: the types both sides store, except `conn_cur`
/// (this process' connections only, HAProxy's `is_local`).
pub(super) fn apply(table: &Table, d: &EntryData, expire: Option<u32>, now: u64) {
    let Some(key) = entry_key(table, d) else {
        return;
    };
    let st = table.store;
    table.apply_remote(key, expire.map(u64::from), now, |e| {
        for (dt, idx, v) in wire::indexed(&d.values) {
            if dt == SERVER_ID {
                apply_server_id(e, v);
                continue;
            }
            let Some(data) = StickData::from_id(dt).filter(|x| *x != StickData::ConnCur) else {
                continue;
            };
            // An array's elements up to this table's size, as HAProxy.
            e.set_raw_at(&st, data, idx, to_val(v, now));
        }
    });
}

/// Applies an update from the previous process during a reload, which counts on while this
/// one does: counters take what it counted since its last update for the key (`last`) on top
/// of this process' own counts, so no request of either is lost. An entry this process has
/// not counted on yet simply takes the values.
pub(super) fn apply_handover(
    table: &Table,
    d: &EntryData,
    expire: Option<u32>,
    now: u64,
    last: &mut HashMap<Vec<u8>, EntryData>,
) {
    let Some(key) = entry_key(table, d) else {
        return;
    };
    let prev = last.insert(d.key.clone(), d.clone());
    table.apply_merge(key, expire.map(u64::from), now, |e, st, local| {
        for (dt, idx, v) in wire::indexed(&d.values) {
            if dt == SERVER_ID {
                apply_server_id(e, v);
                continue;
            }
            let Some(data) = StickData::from_id(dt).filter(|x| *x != StickData::ConnCur) else {
                continue;
            };
            let before = prev
                .as_ref()
                .and_then(|p| wire::indexed(&p.values).find(|(t, i, _)| *t == dt && *i == idx))
                .map(|(_, _, v)| to_val(v, now));
            if prev.is_none() && !local {
                e.set_raw_at(st, data, idx, to_val(v, now));
                continue;
            }
            let p = st.period(data).unwrap_or(1);
            match (to_val(v, now), before) {
                // A tag: the previous process' new value, if it changed it.
                (Val::Int(x), b) if matches!(data, StickData::Gpt0 | StickData::Gpt) => {
                    if b != Some(Val::Int(x)) {
                        e.set_raw_at(st, data, idx, Val::Int(x));
                    }
                }
                (Val::Int(x), b) => {
                    let base = match b {
                        Some(Val::Int(y)) => y,
                        _ => 0,
                    };
                    e.add_at(st, data, idx, x.saturating_sub(base));
                }
                (Val::Freq(f), b) => {
                    let base = match b {
                        Some(Val::Freq(g)) => g.read(now, p),
                        _ => 0,
                    };
                    let n = f.read(now, p).saturating_sub(base);
                    if n > 0 {
                        e.hit_at(st, data, idx, now, u64::from(n));
                    }
                }
            }
        }
    });
}

/// What the section's connections share (single-threaded: the control thread's local set).
struct SectionRt {
    shared: Arc<Shared>,
    /// The section's index in the `show peers` registry.
    si: usize,
    cfg: PeersSection,
    local: String,
    tables: Vec<(Arc<Table>, LocalTable)>,
    /// Per remote peer: the generation of its current session (0: none) and how to end it.
    slots: RefCell<HashMap<String, Slot>>,
    next_gen: std::cell::Cell<u64>,
    /// A full resync was obtained (or is no longer expected) / a peer is teaching us now.
    resynced: std::cell::Cell<bool>,
    learning: std::cell::Cell<u64>,
    /// TLS of the listener (`bind … ssl crt`) and towards each peer with `ssl`.
    tls: PeerTls,
}

/// The TLS settings of a section, built once.
#[derive(Default)]
struct PeerTls {
    acceptor: Option<tokio_rustls::TlsAcceptor>,
    /// Per remote peer name.
    connectors: HashMap<String, Arc<rustls::ClientConfig>>,
    /// Towards this process' own listener (a reload's hand-over): no verification, the
    /// certificate is our own.
    own: Option<Arc<rustls::ClientConfig>>,
}

impl PeerTls {
    fn build(shared: &Shared, cfg: &PeersSection) -> Result<PeerTls, String> {
        let mut t = PeerTls::default();
        if let Some(b) = &cfg.bind_ssl {
            let sc = crate::tls::server_config(b).map_err(|e| e.to_string())?;
            t.acceptor = Some(tokio_rustls::TlsAcceptor::from(Arc::new(sc)));
            let own = crate::config::model::ServerOpts {
                ssl: true,
                verify_set: true,
                verify_none: true,
                ..Default::default()
            };
            t.own = Some(client_config(shared, cfg, "local", &own)?);
        }
        for p in cfg.peers.iter().filter(|p| !p.local) {
            if let Some(o) = &p.ssl {
                t.connectors
                    .insert(p.name.clone(), client_config(shared, cfg, &p.name, o)?);
            }
        }
        Ok(t)
    }
}

fn client_config(
    shared: &Shared,
    cfg: &PeersSection,
    name: &str,
    opts: &crate::config::model::ServerOpts,
) -> Result<Arc<rustls::ClientConfig>, String> {
    let srv = crate::config::model::Server {
        name: name.to_string(),
        addr: SocketAddr::from(([0, 0, 0, 0], 0)),
        fqdn: None,
        unix: None,
        unresolved: false,
        id: 0,
        opts: opts.clone(),
        loc: cfg.loc.clone(),
    };
    match crate::tls::client::server_tls(&shared.model.cfg.global, &srv)? {
        Some(t) => Ok(t.config),
        None => Err(format!("peer '{name}': no TLS settings")),
    }
}

/// A peer connection, plain or TLS.
trait PeerIo: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin> PeerIo for T {}

/// Connects to `addr`, over TLS when `tls` is set; the stream and its (peer, local) addresses.
async fn dial(
    addr: SocketAddr,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> std::io::Result<(Box<dyn PeerIo>, Option<(SocketAddr, SocketAddr)>)> {
    let s = TcpStream::connect(addr).await?;
    let _ = s.set_nodelay(true);
    let ends = s.peer_addr().ok().zip(s.local_addr().ok());
    let Some(cfg) = tls else {
        return Ok((Box::new(s), ends));
    };
    let name = crate::tls::client::server_name(None, addr.ip());
    let t = tokio_rustls::TlsConnector::from(Arc::clone(cfg))
        .connect(name, s)
        .await?;
    Ok((Box::new(t), ends))
}

#[derive(Default)]
struct Slot {
    generation: u64,
    kill: Rc<Notify>,
}

impl SectionRt {
    fn new(
        shared: Arc<Shared>,
        si: usize,
        cfg: PeersSection,
        tables: Vec<(Arc<Table>, LocalTable)>,
        tls: PeerTls,
    ) -> SectionRt {
        let local = cfg
            .peers
            .iter()
            .find(|p| p.local)
            .map(|p| p.name.clone())
            .unwrap_or_default();
        SectionRt {
            shared,
            si,
            cfg,
            local,
            tables,
            slots: RefCell::new(HashMap::new()),
            next_gen: std::cell::Cell::new(1),
            resynced: std::cell::Cell::new(false),
            learning: std::cell::Cell::new(0),
            tls,
        }
    }

    /// Updates what `show peers` says about `peer`.
    fn status(&self, peer: &str, f: impl FnOnce(&mut PeerState)) {
        if let Some(p) = self
            .shared
            .model
            .peers
            .sections
            .get(self.si)
            .and_then(|s| s.peer(peer))
        {
            f(&mut p.state());
        }
    }

    fn section_status(&self) -> Option<&SectionStatus> {
        self.shared.model.peers.sections.get(self.si)
    }

    /// Makes a new session the one of `peer`, ending the previous one (HAProxy keeps the
    /// newest connection of a peer).
    fn claim(&self, peer: &str) -> (u64, Rc<Notify>) {
        let g = self.next_gen.get();
        self.next_gen.set(g + 1);
        let mut slots = self.slots.borrow_mut();
        let slot = slots.entry(peer.to_string()).or_default();
        if slot.generation != 0 {
            slot.kill.notify_one();
            self.status(peer, |st| st.coll += 1);
        }
        let kill = Rc::new(Notify::new());
        slot.generation = g;
        slot.kill = Rc::clone(&kill);
        (g, kill)
    }

    fn release(&self, peer: &str, generation: u64) {
        if let Some(s) = self.slots.borrow_mut().get_mut(peer)
            && s.generation == generation
        {
            s.generation = 0;
        }
        if self.learning.get() == generation {
            self.learning.set(0);
        }
    }

    fn busy(&self, peer: &str) -> bool {
        self.slots
            .borrow()
            .get(peer)
            .is_some_and(|s| s.generation != 0)
    }

    fn table_defs(&self) -> Vec<LocalTable> {
        self.tables.iter().map(|(_, l)| l.clone()).collect()
    }
}

async fn run(
    shared: Arc<Shared>,
    sec: Rc<SectionRt>,
    listener: Option<(tokio::net::TcpListener, Pending)>,
) {
    let mut tasks = Vec::new();
    let mut bound = None;
    if let Some((l, pending)) = listener {
        bound = Some(pending);
        tasks.push(tokio::task::spawn_local(accept_loop(
            Arc::clone(&shared),
            Rc::clone(&sec),
            l,
        )));
    }
    for p in sec.cfg.peers.iter().filter(|p| !p.local) {
        if let Some(addr) = p.addr.filter(|a| a.port() != 0) {
            tasks.push(tokio::task::spawn_local(connect_loop(
                Arc::clone(&shared),
                Rc::clone(&sec),
                p.name.clone(),
                addr,
            )));
        }
    }
    let mut stop = shared.stop_tx.subscribe();
    while !*stop.borrow() {
        if stop.changed().await.is_err() {
            break;
        }
    }
    // Stop listening (the next process' listener takes the address), end the sessions, then
    // teach the next process everything through the local peer's address.
    for t in &tasks {
        t.abort();
    }
    for slot in sec.slots.borrow().values() {
        slot.kill.notify_one();
    }
    tokio::time::sleep(Duration::from_millis(20)).await;
    if let Some(p) = &bound {
        let _ = tokio::time::timeout(HANDOVER_LIMIT, hand_over(&sec, p.0)).await;
    }
}

/// Counts a section in [`HANDOVER_PENDING`] while it lives, even if its task is cancelled.
struct Pending(SocketAddr);

impl Pending {
    fn new(addr: SocketAddr) -> Pending {
        HANDOVER_PENDING.fetch_add(1, Ordering::AcqRel);
        Pending(addr)
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        HANDOVER_PENDING.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The old process' side of a reload: connects to its own peer address (now the new
/// process'), pushes every entry and waits for the confirm of its "resync finished".
async fn hand_over(sec: &SectionRt, addr: SocketAddr) {
    // The new process may still be starting its listener.
    let mut stream = None;
    for _ in 0..20 {
        match dial(addr, sec.tls.own.as_ref()).await {
            Ok((s, _)) => {
                stream = Some(s);
                break;
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
    let Some(mut stream) = stream else {
        return;
    };
    let mut s = Session::connect(&sec.local, &sec.local, std::process::id(), sec.table_defs());
    let mut buf = vec![0u8; 4096];
    let mut pushed = vec![0u64; sec.tables.len()];
    let mut taught = false;
    loop {
        if s.has_output() && stream.write_all(&s.take_output()).await.is_err() {
            return;
        }
        if s.is_closed() {
            return;
        }
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        for ev in s.receive(&buf[..n]) {
            match ev {
                Event::Established(_) if !taught => {
                    taught = true;
                    teach_all(sec, &mut s, &mut pushed, crate::clock::clock_ms());
                    // The sessions still running here count on: push what they change until
                    // they are done (bounded), then say the resync is over.
                    let until = tokio::time::Instant::now() + DRAIN_LIMIT;
                    loop {
                        if s.has_output() && stream.write_all(&s.take_output()).await.is_err() {
                            return;
                        }
                        let drained = sec.shared.sessions.load(Ordering::Acquire) == 0;
                        push_changes(sec, &mut s, &mut pushed, crate::clock::clock_ms());
                        if drained || tokio::time::Instant::now() >= until {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(20)).await;
                    }
                    s.resync_finished();
                }
                Event::ResyncConfirm => {
                    let _ = stream.write_all(&s.take_output()).await;
                    let _ = stream.shutdown().await;
                    return;
                }
                Event::Closed(_) => return,
                _ => {}
            }
        }
    }
}

fn listen(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let s = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    s.set_reuseaddr(true)?;
    // A new process binds the address while the old one still listens (reload).
    s.set_reuseport(true)?;
    s.bind(addr)?;
    s.listen(64)
}

async fn accept_loop(shared: Arc<Shared>, sec: Rc<SectionRt>, l: tokio::net::TcpListener) {
    loop {
        let Ok((stream, _)) = l.accept().await else {
            tokio::time::sleep(Duration::from_millis(100)).await;
            continue;
        };
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        let known: Vec<String> = sec.cfg.peers.iter().map(|p| p.name.clone()).collect();
        let session = Session::accept(&sec.local, known, sec.table_defs());
        let _ = stream.set_nodelay(true);
        let ends = stream.peer_addr().ok().zip(stream.local_addr().ok());
        let sec = Rc::clone(&sec);
        tokio::task::spawn_local(async move {
            let io: Box<dyn PeerIo> = match &sec.tls.acceptor {
                None => Box::new(stream),
                Some(a) => match tokio::time::timeout(RECONNECT, a.accept(stream)).await {
                    Ok(Ok(t)) => Box::new(t),
                    _ => return,
                },
            };
            converse(sec, io, ends, session, None).await;
        });
    }
}

/// A small pseudo-random delay (HAProxy waits 50 ms to 2 s after a collision, so two peers
/// connecting to each other at once do not keep killing each other's sessions).
fn jitter() -> Duration {
    let n = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    Duration::from_millis(50 + u64::from(n % 2000))
}

async fn connect_loop(shared: Arc<Shared>, sec: Rc<SectionRt>, peer: String, addr: SocketAddr) {
    loop {
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        if sec.busy(&peer) {
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        sec.status(&peer, |st| {
            st.statuscode = 100;
            st.new_conn += 1;
        });
        let tls = sec.tls.connectors.get(&peer).cloned();
        let conn = tokio::time::timeout(RECONNECT, dial(addr, tls.as_ref())).await;
        match conn {
            Ok(Ok((stream, ends))) => {
                sec.status(&peer, |st| st.statuscode = 110);
                let pid = std::process::id();
                let session = Session::connect(&sec.local, &peer, pid, sec.table_defs());
                let claim = sec.claim(&peer);
                converse(Rc::clone(&sec), stream, ends, session, Some(claim)).await;
                let delay = jitter();
                let at = crate::clock::clock_ms() + delay.as_millis() as u64;
                sec.status(&peer, |st| st.reconnect = Some(at));
                tokio::time::sleep(delay).await;
            }
            _ => {
                let at = crate::clock::clock_ms() + RECONNECT.as_millis() as u64;
                sec.status(&peer, |st| st.reconnect = Some(at));
                tokio::time::sleep(RECONNECT).await
            }
        }
    }
}

/// Runs one connection until it ends (closed, dead, protocol error, or replaced).
async fn converse(
    sec: Rc<SectionRt>,
    mut stream: Box<dyn PeerIo>,
    ends: Option<(SocketAddr, SocketAddr)>,
    mut s: Session,
    mut claim: Option<(u64, Rc<Notify>)>,
) {
    let peer = s.peer().map(str::to_string);
    // Change numbers already pushed, per table: 0 pushes every local change at first.
    let mut pushed = vec![0u64; sec.tables.len()];
    // Per table, the last values the previous process of a reload sent per key.
    let mut handover_last: HashMap<usize, HashMap<Vec<u8>, EntryData>> = HashMap::new();
    let mut buf = vec![0u8; 16384];
    let mut tick = tokio::time::interval(PUSH_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let mut last_rx = tokio::time::Instant::now();
    let mut last_hb = tokio::time::Instant::now();
    let never = Rc::new(Notify::new());
    'conn: loop {
        if s.has_output() && stream.write_all(&s.take_output()).await.is_err() {
            break;
        }
        if s.is_closed() {
            break;
        }
        let kill = claim
            .as_ref()
            .map_or(Rc::clone(&never), |(_, k)| Rc::clone(k));
        tokio::select! {
            r = stream.read(&mut buf) => {
                let n = match r {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                last_rx = tokio::time::Instant::now();
                let now = crate::clock::clock_ms();
                for ev in s.receive(&buf[..n]) {
                    match ev {
                        Event::Established(name) => {
                            let accepted = claim.is_none();
                            if accepted {
                                claim = Some(sec.claim(&name));
                            }
                            sec.status(&name, |st| {
                                st.active = true;
                                if accepted {
                                    st.accepted = ends;
                                } else {
                                    st.statuscode = 200;
                                    st.last_hdshk = Some(now);
                                    st.accepted = None;
                                }
                                st.heartbeat = Some(now + HEARTBEAT.as_millis() as u64);
                                st.reconnect = Some(now + RECONNECT.as_millis() as u64);
                            });
                            // A process that starts learns everything from the first peer.
                            if !sec.resynced.get() && sec.learning.get() == 0 {
                                if let Some((g, _)) = &claim {
                                    sec.learning.set(*g);
                                }
                                s.resync_request();
                            }
                        }
                        Event::Update { table, expire, entry } => {
                            if let Some((t, _)) = sec.tables.get(table) {
                                // The previous process of a reload (our own name).
                                if s.peer() == Some(sec.local.as_str()) {
                                    let last = handover_last.entry(table).or_default();
                                    apply_handover(t, &entry, expire, now, last);
                                } else {
                                    apply(t, &entry, expire, now);
                                }
                                seed_xdp(t, &entry, now);
                            }
                        }
                        Event::ResyncRequest => {
                            teach_all(&sec, &mut s, &mut pushed, now);
                            s.resync_finished();
                        }
                        Event::ResyncFinished | Event::ResyncPartial => {
                            sec.resynced.set(true);
                            sec.learning.set(0);
                            if let Some(ss) = sec.section_status() {
                                ss.resynced.store(true, Ordering::Relaxed);
                            }
                        }
                        Event::Refused(code) => {
                            if let Some(p) = &peer {
                                sec.status(p, |st| {
                                    st.statuscode = code;
                                    st.last_hdshk = Some(now);
                                });
                            }
                        }
                        Event::Closed(why) => {
                            // Protocol errors, sent or received (not a refused hello).
                            if why.contains("message")
                                && let Some(p) = s.peer()
                            {
                                sec.status(p, |st| st.proto_err += 1);
                            }
                            tracing::debug!("peers '{}': session with {:?} closed: {why}", sec.cfg.name, peer);
                        }
                        _ => {}
                    }
                }
            }
            _ = tick.tick() => {
                if let Some(ss) = sec.section_status() {
                    ss.task_calls.fetch_add(1, Ordering::Relaxed);
                }
                if !s.is_established() {
                    if last_rx.elapsed() > RECONNECT {
                        break 'conn;
                    }
                    continue;
                }
                let now = crate::clock::clock_ms();
                push_changes(&sec, &mut s, &mut pushed, now);
                if last_hb.elapsed() >= HEARTBEAT {
                    last_hb = tokio::time::Instant::now();
                    s.heartbeat();
                }
                if let Some(name) = s.peer().map(str::to_string) {
                    let tables: Vec<_> = (0..sec.tables.len())
                        .map(|i| {
                            let (last_pushed, last_acked) = s.tx_state(i).unwrap_or_default();
                            let (remote_id, remote_data, last_get) =
                                s.rx_state(i).unwrap_or_default();
                            super::status::TableState {
                                remote_id,
                                remote_data,
                                last_acked,
                                last_pushed,
                                last_get,
                            }
                        })
                        .collect();
                    let (tx, rx) = (s.tx_heartbeats, s.rx_heartbeats);
                    let since_hb = last_hb.elapsed().as_millis() as u64;
                    let since_rx = last_rx.elapsed().as_millis() as u64;
                    sec.status(&name, |st| {
                        st.tables = tables;
                        st.tx_hbt = tx;
                        st.rx_hbt = rx;
                        // Sent at the first tick past the period.
                        let hb = (HEARTBEAT + PUSH_EVERY).as_millis() as u64;
                        st.heartbeat = Some(now + hb.saturating_sub(since_hb));
                        st.reconnect = Some(now + (RECONNECT.as_millis() as u64).saturating_sub(since_rx));
                    });
                }
                // Nothing heard for two reconnect periods: the peer is gone.
                if last_rx.elapsed() > 2 * RECONNECT {
                    break 'conn;
                }
            }
            _ = kill.notified() => break,
        }
    }
    let _ = stream.shutdown().await;
    if let (Some((g, _)), Some(name)) = (&claim, s.peer()) {
        sec.release(name, *g);
        // Only the session that still owns the peer says it is gone.
        if !sec.busy(name) {
            sec.status(name, |st| st.active = false);
        }
    }
}

/// Pushes the entries changed locally since the change numbers in `pushed`.
fn push_changes(sec: &SectionRt, s: &mut Session, pushed: &mut [u64], now: u64) {
    for (i, (t, _)) in sec.tables.iter().enumerate() {
        let Some(done) = pushed.get_mut(i) else {
            continue;
        };
        let mark = t.seq();
        if mark <= *done {
            continue;
        }
        for (k, e) in t.changed_since(*done, now) {
            s.push_update(i, &entry_data(t, &k, &e, now), None);
        }
        *done = mark;
    }
}

/// A full resync for the remote peer: every live entry of every table, with its remaining
/// lifetime (HAProxy's teaching stages use timed updates).
fn teach_all(sec: &SectionRt, s: &mut Session, pushed: &mut [u64], now: u64) {
    for (i, (t, _)) in sec.tables.iter().enumerate() {
        let mark = t.seq();
        for (k, e) in t.entries(now) {
            let life = t
                .expire_ms
                .map(|_| u32::try_from(e.expire_at.saturating_sub(now)).unwrap_or(u32::MAX));
            s.push_update(i, &entry_data(t, &k, &e, now), life);
        }
        if let Some(p) = pushed.get_mut(i) {
            *p = mark;
        }
    }
}
