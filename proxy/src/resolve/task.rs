//! The I/O shell of the resolvers: one task per `resolvers` section on the control thread, a
//! connected UDP socket per nameserver (or, for `tcp@` ones, a TCP stream with DNS's 2-byte
//! length framing, opened on the first query and again after the server closed it), the pure
//! [`Resolution`] steps driven by responses and timers, and the outcome applied to the servers through the control plane (address,
//! resolution maintenance, SRV port and weight), logged in HAProxy 2.6's words.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::net::UdpSocket;
use tokio::sync::mpsc;

use super::answer::{Owner, Pick, Prefs};
use super::counters::{C, Section};
use super::resolution::{Holds, Resolution, Status, Step, Timing};
use super::wire::{self, Answer, Qtype, SrvRec, Verdict};
use crate::check::fsm::{LOG_NOTICE, MaintCause};
use crate::config::model::Resolvers;
use crate::engine::Shared;
use crate::engine::control;
use crate::engine::service::SessionFuture;
use crate::model::{ADMIN_HMAINT, ADMIN_RMAINT, Proxy, Server};

/// How queries reach one nameserver.
enum Transport {
    Udp(Arc<UdpSocket>),
    /// Queries for the nameserver's TCP task (see [`tcp_stream`]).
    Tcp(mpsc::UnboundedSender<Vec<u8>>),
}

/// The tasks of every section some server uses.
pub fn tasks(shared: &Arc<Shared>) -> Vec<SessionFuture> {
    shared
        .model
        .cfg
        .resolvers
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let reqs = requesters(shared, &r.name);
            (!reqs.is_empty() && !r.nameservers.is_empty())
                .then(|| Box::pin(run(Arc::clone(shared), i, reqs)) as SessionFuture)
        })
        .collect()
}

/// A server resolved by a section.
#[derive(Clone)]
struct Req {
    be: Arc<Proxy>,
    srv: Arc<Server>,
    owner: Owner,
    prefs: Prefs,
}

fn requesters(shared: &Shared, section: &str) -> Vec<Req> {
    let mut out = Vec::new();
    let mut id = 0;
    for be in shared.model.proxies.iter().filter(|p| p.is_backend()) {
        for srv in be.pool().servers.iter() {
            id += 1;
            let r = &srv.cfg.opts.resolve;
            if srv.cfg.fqdn.is_none() || r.resolvers.as_deref() != Some(section) {
                continue;
            }
            out.push(Req {
                be: Arc::clone(be),
                srv: Arc::clone(srv),
                owner: Owner {
                    id,
                    proxy: be.index,
                },
                prefs: Prefs {
                    prefer_ipv4: r.prefer_ipv4,
                    nets: r.nets.clone(),
                    allow_dup_ip: r.allow_dup_ip,
                },
            });
        }
    }
    out
}

/// What a resolution resolves for.
enum Kind {
    /// A/AAAA of a server's own name.
    Addr,
    /// A/AAAA of an SRV target, for the server holding that SRV record (created on demand).
    Target,
    /// The SRV records of a `server-template` name: `slots[i]` is the record `reqs[i]` holds;
    /// `free` the empty slots in the order HAProxy reuses them (a slot emptied goes last);
    /// `seen` the records in HAProxy's answer-tree order.
    Srv {
        slots: Vec<Option<(String, u16)>>,
        free: Vec<usize>,
        seen: Vec<(SrvRec, u64)>,
    },
}

struct Res {
    r: Resolution,
    reqs: Vec<Req>,
    kind: Kind,
}

struct Ctx {
    shared: Arc<Shared>,
    name: String,
    timing: Timing,
    holds: Holds,
    obsolete: u64,
    payload: u16,
    socks: Vec<Option<Transport>>,
    started: tokio::time::Instant,
    rng: u64,
}

impl Ctx {
    fn now(&self) -> u64 {
        // Never 0, so "never" and "at the start" differ.
        self.started.elapsed().as_millis() as u64 + 1
    }

    fn counters(&self) -> Option<&Section> {
        self.shared.model.resolvers.section(&self.name)
    }

    fn bump(&self, ns: usize, c: C) {
        if let Some(n) = self.counters().and_then(|s| s.nameservers.get(ns)) {
            n.bump(c);
        }
    }

    fn ns_name(&self, ns: usize) -> String {
        self.counters()
            .and_then(|s| s.nameservers.get(ns))
            .map(|n| n.name.clone())
            .unwrap_or_default()
    }

    /// A query id no running resolution holds (xorshift: ids need not be secret here, only
    /// distinct; the answer must also carry the right question).
    fn qid(&mut self, all: &[Res]) -> u16 {
        loop {
            self.rng ^= self.rng << 13;
            self.rng ^= self.rng >> 7;
            self.rng ^= self.rng << 17;
            let id = (self.rng >> 16) as u16;
            if id != 0 && !all.iter().any(|r| r.r.running() && r.r.qid == id) {
                return id;
            }
        }
    }

    /// Sends the query to every nameserver; the resolution learns how many went out.
    fn send(&self, r: &mut Resolution, qt: Qtype, now: u64) {
        let mut n = 0;
        if let Some(q) = wire::query(r.qid, &r.name, qt, self.payload) {
            for (i, s) in self.socks.iter().enumerate() {
                // A direct send: tokio's try_send refuses until the socket was once polled
                // writable, and a UDP send does not wait anyway.
                let sent = match s {
                    Some(Transport::Udp(s)) => socket2::SockRef::from(&**s).send(&q).is_ok(),
                    Some(Transport::Tcp(tx)) => tx.send(q.clone()).is_ok(),
                    None => false,
                };
                if sent {
                    n += 1;
                    self.bump(i, C::Sent);
                } else {
                    self.bump(i, C::SndError);
                }
            }
        }
        r.sent(n, now);
    }
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

async fn run(shared: Arc<Shared>, index: usize, reqs: Vec<Req>) {
    let Some(cfg) = shared.model.cfg.resolvers.get(index).cloned() else {
        return;
    };
    let (tx, mut rx) = mpsc::unbounded_channel::<(usize, Vec<u8>)>();
    let mut socks = Vec::new();
    for (i, (name, addr)) in cfg.nameservers.iter().enumerate() {
        if cfg.tcp.contains(name) {
            let (qtx, qrx) = mpsc::unbounded_channel();
            tokio::task::spawn_local(tcp_stream(*addr, i, qrx, tx.clone()));
            socks.push(Some(Transport::Tcp(qtx)));
            continue;
        }
        let sock = open(*addr).await.ok().map(Arc::new);
        if let Some(s) = &sock {
            tokio::task::spawn_local(receive(Arc::clone(s), i, tx.clone()));
        }
        socks.push(sock.map(Transport::Udp));
    }
    drop(tx);
    let mut ctx = Ctx {
        timing: timing(&cfg),
        holds: Holds {
            nx: ms(cfg.hold_nx),
            timeout: ms(cfg.hold_timeout),
            refused: ms(cfg.hold_refused),
            other: ms(cfg.hold_other),
        },
        obsolete: ms(cfg.hold_obsolete),
        payload: cfg.accepted_payload_size,
        name: cfg.name.clone(),
        socks,
        started: tokio::time::Instant::now(),
        rng: seed(),
        shared,
    };
    let mut all = group(reqs);
    let mut stop = ctx.shared.stop_tx.subscribe();
    loop {
        if ctx.shared.stopping.load(Ordering::Acquire) {
            return;
        }
        let now = ctx.now();
        for i in 0..all.len() {
            step_timers(&mut ctx, &mut all, i, now);
        }
        all.retain(|r| !(matches!(r.kind, Kind::Target) && r.reqs.is_empty()));
        let wake = all
            .iter()
            .filter_map(|r| r.r.next_wake(&ctx.timing))
            .min()
            .unwrap_or(now + ctx.timing.resolve)
            .max(now + 1);
        let sleep = tokio::time::sleep(Duration::from_millis(wake - now));
        tokio::select! {
            m = rx.recv() => match m {
                Some((ns, buf)) => on_datagram(&mut ctx, &mut all, ns, &buf),
                None => tokio::time::sleep(Duration::from_millis(wake - now)).await,
            },
            _ = sleep => {}
            r = stop.changed() => if r.is_err() || *stop.borrow() { return },
        }
    }
}

async fn open(ns: SocketAddr) -> std::io::Result<UdpSocket> {
    let local: SocketAddr = if ns.is_ipv4() {
        (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
    } else {
        (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
    };
    let s = UdpSocket::bind(local).await?;
    s.connect(ns).await?;
    Ok(s)
}

async fn receive(sock: Arc<UdpSocket>, ns: usize, tx: mpsc::UnboundedSender<(usize, Vec<u8>)>) {
    let mut buf = vec![0u8; 65535];
    loop {
        match sock.recv(&mut buf).await {
            Ok(n) => {
                if tx.send((ns, buf.get(..n).unwrap_or(&[]).to_vec())).is_err() {
                    return;
                }
            }
            // ICMP port unreachable and the like: the retry timer covers it.
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// DNS over TCP to one nameserver: each query goes out as `<length:u16 BE><message>` on one
/// connection, opened when a query comes and none is up (a failed connect or write drops the
/// query: the resolution's retry timer sends it again); responses come back framed the same way
/// and join the UDP ones.
async fn tcp_stream(
    addr: SocketAddr,
    ns: usize,
    mut queries: mpsc::UnboundedReceiver<Vec<u8>>,
    tx: mpsc::UnboundedSender<(usize, Vec<u8>)>,
) {
    use tokio::io::AsyncWriteExt;
    let mut conn: Option<(
        tokio::net::tcp::OwnedWriteHalf,
        Arc<std::sync::atomic::AtomicBool>,
    )> = None;
    while let Some(q) = queries.recv().await {
        let Ok(len) = u16::try_from(q.len()) else {
            continue;
        };
        let mut frame = Vec::with_capacity(q.len() + 2);
        frame.extend_from_slice(&len.to_be_bytes());
        frame.extend_from_slice(&q);
        // The reader saw the server close: reconnect.
        if conn
            .as_ref()
            .is_some_and(|(_, up)| !up.load(Ordering::Acquire))
        {
            conn = None;
        }
        if conn.is_none() {
            let Ok(Ok(s)) =
                tokio::time::timeout(Duration::from_secs(1), tokio::net::TcpStream::connect(addr))
                    .await
            else {
                continue;
            };
            let _ = s.set_nodelay(true);
            let (rd, wr) = s.into_split();
            let up = Arc::new(std::sync::atomic::AtomicBool::new(true));
            tokio::task::spawn_local(tcp_responses(rd, ns, tx.clone(), Arc::clone(&up)));
            conn = Some((wr, up));
        }
        if let Some((wr, _)) = conn.as_mut()
            && wr.write_all(&frame).await.is_err()
        {
            conn = None;
        }
    }
}

/// Reads framed responses until the connection ends, then marks it down.
async fn tcp_responses(
    mut rd: tokio::net::tcp::OwnedReadHalf,
    ns: usize,
    tx: mpsc::UnboundedSender<(usize, Vec<u8>)>,
    up: Arc<std::sync::atomic::AtomicBool>,
) {
    use tokio::io::AsyncReadExt;
    loop {
        let mut len = [0u8; 2];
        if rd.read_exact(&mut len).await.is_err() {
            break;
        }
        let mut buf = vec![0u8; usize::from(u16::from_be_bytes(len))];
        if rd.read_exact(&mut buf).await.is_err() || tx.send((ns, buf)).is_err() {
            break;
        }
    }
    up.store(false, Ordering::Release);
}

fn seed() -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(1);
    (t ^ u64::from(std::process::id()).rotate_left(32)) | 1
}

fn timing(r: &Resolvers) -> Timing {
    Timing {
        resolve: ms(r.timeout_resolve),
        retry: ms(r.timeout_retry),
        retries: r.resolve_retries.max(1),
    }
}

/// One resolution per name and preferred type, its servers in configuration order.
fn group(reqs: Vec<Req>) -> Vec<Res> {
    let mut all: Vec<Res> = Vec::new();
    for q in reqs {
        let Some(fqdn) = q.srv.cfg.fqdn.as_deref() else {
            continue;
        };
        let name = wire::normalize(fqdn);
        let prefer = if name.starts_with('_') {
            Qtype::Srv
        } else if q.prefs.prefer_ipv4 {
            Qtype::A
        } else {
            Qtype::Aaaa
        };
        match all
            .iter_mut()
            .find(|r| r.r.name == name && r.r.prefer == prefer)
        {
            Some(r) => {
                if let Kind::Srv { slots, free, .. } = &mut r.kind {
                    free.push(slots.len());
                    slots.push(None);
                }
                r.reqs.push(q);
            }
            None => {
                let kind = if prefer == Qtype::Srv {
                    Kind::Srv {
                        slots: vec![None],
                        free: vec![0],
                        seen: Vec::new(),
                    }
                } else {
                    Kind::Addr
                };
                all.push(Res {
                    r: Resolution::new(name, prefer),
                    reqs: vec![q],
                    kind,
                });
            }
        }
    }
    all
}

fn step_timers(ctx: &mut Ctx, all: &mut Vec<Res>, i: usize, now: u64) {
    if all.get(i).is_some_and(|r| r.r.due(now, &ctx.timing)) {
        let qid = ctx.qid(all);
        if let Some(res) = all.get_mut(i) {
            let qt = res.r.start(qid, &ctx.timing);
            ctx.send(&mut res.r, qt, now);
        }
        return;
    }
    let Some(res) = all.get_mut(i) else { return };
    let step = res.r.tick(now, &ctx.timing);
    apply_step(ctx, all, i, None, step, now);
}

fn apply_step(
    ctx: &mut Ctx,
    all: &mut Vec<Res>,
    i: usize,
    ns: Option<usize>,
    step: Step,
    now: u64,
) {
    match step {
        Step::Send(qt) => {
            if let Some(res) = all.get_mut(i) {
                ctx.send(&mut res.r, qt, now);
            }
        }
        Step::Success(a) => on_success(ctx, all, i, ns.unwrap_or(0), a, now),
        Step::Failure => on_failure(ctx, all, i, now),
        Step::Nothing => {}
    }
}

fn on_datagram(ctx: &mut Ctx, all: &mut Vec<Res>, ns: usize, buf: &[u8]) {
    let now = ctx.now();
    if buf.len() > usize::from(ctx.payload) {
        ctx.bump(ns, C::TooBig);
        return;
    }
    let Some(id) = wire::response_id(buf) else {
        ctx.bump(ns, C::Invalid);
        return;
    };
    let Some(i) = all.iter().position(|r| r.r.running() && r.r.qid == id) else {
        // No resolution waits for it: a late answer to a finished query.
        ctx.bump(ns, C::Outdated);
        return;
    };
    let Some(res) = all.get_mut(i) else { return };
    let v = wire::validate(buf, &res.r.name, res.r.query_type);
    ctx.bump(
        ns,
        match &v {
            Verdict::Valid(_) => C::Valid,
            Verdict::Invalid | Verdict::QueryCountError | Verdict::WrongName => C::Invalid,
            Verdict::NxDomain => C::Nx,
            Verdict::Refused => C::Refused,
            Verdict::AncountZero => C::AnyErr,
            Verdict::CnameError => C::CnameError,
            Verdict::Truncated => C::Truncated,
            Verdict::NoExpectedRecord | Verdict::Error => C::Other,
        },
    );
    let step = res.r.on_response(v, now);
    apply_step(ctx, all, i, Some(ns), step, now);
}

fn log_notice(ctx: &Ctx, be: &Proxy, line: &str) {
    ctx.shared.log.event(be, LOG_NOTICE, line, line);
}

/// The server takes `ip` (its port unchanged): HAProxy's `srv_update_addr` line.
fn set_ip(ctx: &Ctx, q: &Req, ip: IpAddr, port: Option<u16>, updater: &str) {
    let cur = q.srv.addr();
    let had = q.srv.has_addr.load(Ordering::Acquire);
    let port = port.unwrap_or(cur.port());
    if had && cur.ip() == ip && cur.port() == port {
        return;
    }
    if !had || cur.ip() != ip {
        let old = if had {
            cur.ip().to_string()
        } else {
            "(none)".into()
        };
        log_notice(
            ctx,
            &q.be,
            &format!(
                "{}/{} changed its IP from {old} to {ip} by {updater}.",
                q.be.name, q.srv.name
            ),
        );
    }
    q.srv.addr.store(Arc::new(SocketAddr::new(ip, port)));
    q.srv.has_addr.store(true, Ordering::Release);
}

/// `snr_update_srv_status` after a valid answer.
fn valid_status(ctx: &Ctx, q: &Req, has_no_ip: bool) {
    let rmaint = q.srv.admin.load(Ordering::Acquire) & ADMIN_RMAINT != 0;
    if has_no_ip {
        if !rmaint {
            control::address_lost(&ctx.shared, &q.be, &q.srv, MaintCause::NoIp);
        }
        return;
    }
    if rmaint {
        control::address_found(&ctx.shared, &q.be, &q.srv, None);
        log_notice(
            ctx,
            &q.be,
            &format!(
                "Server {}/{} administratively READY thanks to valid DNS answer.",
                q.be.name, q.srv.name
            ),
        );
    }
}

fn on_success(ctx: &mut Ctx, all: &mut Vec<Res>, i: usize, ns: usize, a: Answer, now: u64) {
    if all
        .get(i)
        .is_some_and(|r| matches!(r.kind, Kind::Srv { .. }))
    {
        on_srv_success(ctx, all, i, a, now);
        return;
    }
    let Some(res) = all.get_mut(i) else { return };
    res.r.answers.merge(&a.addrs, now);
    res.r.answers.expire(now, ctx.obsolete);
    let updater = format!("{}/{}", ctx.name, ctx.ns_name(ns));
    for (n, q) in res.reqs.iter().enumerate() {
        if q.srv.removed.load(Ordering::Acquire) {
            continue;
        }
        let current = q
            .srv
            .has_addr
            .load(Ordering::Acquire)
            .then(|| q.srv.addr().ip());
        match res.r.answers.pick(&q.prefs, current, q.owner) {
            Pick::Keep => valid_status(ctx, q, false),
            Pick::New(ip) => {
                // Only the first server's update is the nameserver's; the others come from
                // the same answer, HAProxy's "DNS cache".
                let by = if n == 0 {
                    ctx.bump(ns, C::Update);
                    updater.as_str()
                } else {
                    "DNS cache"
                };
                set_ip(ctx, q, ip, None, by);
                valid_status(ctx, q, false);
            }
            Pick::NoIp => valid_status(ctx, q, true),
        }
    }
}

/// SRV records fill the template's free slots in order; a slot whose record left the answer
/// (past `hold obsolete`) is emptied and its server goes to maintenance; an address from the
/// additional records is used at once, otherwise the target is resolved on its own.
fn on_srv_success(ctx: &mut Ctx, all: &mut Vec<Res>, i: usize, a: Answer, now: u64) {
    let mut targets: Vec<(Req, Option<String>)> = Vec::new();
    {
        let Some(res) = all.get_mut(i) else { return };
        let Kind::Srv { slots, free, seen } = &mut res.kind else {
            return;
        };
        for rec in a.srv {
            match seen
                .iter_mut()
                .find(|(s, _)| s.target == rec.target && s.port == rec.port)
            {
                Some(e) => *e = (rec, now),
                None => seen.push((rec, now)),
            }
        }
        seen.retain(|(_, t)| t.saturating_add(ctx.obsolete) >= now);
        // Stable: records of equal keys keep their arrival order, as eb32 duplicates do.
        seen.sort_by_key(|(s, _)| srv_key(&s.target));
        for (idx, (slot, q)) in slots.iter_mut().zip(&res.reqs).enumerate() {
            if let Some(k) = slot
                && !seen.iter().any(|(s, _)| s.target == k.0 && s.port == k.1)
            {
                *slot = None;
                free.push(idx);
                targets.push((q.clone(), None));
                srv_removed(ctx, q);
            }
        }
        for (rec, _) in seen.iter() {
            let key = (rec.target.clone(), rec.port);
            if slots.iter().any(|s| s.as_ref() == Some(&key)) || free.is_empty() {
                continue;
            }
            let idx = free.remove(0);
            if let (Some(slot), Some(q)) = (slots.get_mut(idx), res.reqs.get(idx)) {
                *slot = Some(key);
                // The slot's host name is now the record's target (`srv_update_fqdn`).
                q.srv.set_host(Some(rec.target.clone()));
                q.srv.admin.fetch_or(ADMIN_HMAINT, Ordering::AcqRel);
            }
        }
        for (slot, q) in slots.iter().zip(&res.reqs) {
            let Some((target, port)) = slot else { continue };
            let Some((rec, _)) = seen
                .iter()
                .find(|(s, _)| s.target == *target && s.port == *port)
            else {
                continue;
            };
            if !q.srv.cfg.opts.resolve.ignore_weight {
                let w = u32::from(rec.weight).div_ceil(256);
                if q.srv.uweight.swap(w, Ordering::AcqRel) != w {
                    q.srv.apply_state();
                    q.be.rebuild_lb();
                }
            }
            match rec.addr {
                Some(ip) => {
                    set_ip(ctx, q, ip, Some(*port), "DNS additional record");
                    targets.push((q.clone(), None));
                    if q.srv.admin.load(Ordering::Acquire) & ADMIN_RMAINT != 0 {
                        control::address_found(&ctx.shared, &q.be, &q.srv, None);
                    }
                }
                None => {
                    let cur = q.srv.addr();
                    q.srv.addr.store(Arc::new(SocketAddr::new(cur.ip(), *port)));
                    targets.push((q.clone(), Some(target.clone())));
                }
            }
        }
    }
    // Target resolutions follow the slots: a server leaves the one of its former target and
    // joins (or starts) the one of its new target.
    for (q, target) in targets {
        for r in all.iter_mut().filter(|r| matches!(r.kind, Kind::Target)) {
            if target.as_deref() != Some(r.r.name.as_str()) {
                r.reqs.retain(|x| x.owner.id != q.owner.id);
                r.r.answers.detach(q.owner.id);
            }
        }
        let Some(t) = target else { continue };
        let prefer = if q.prefs.prefer_ipv4 {
            Qtype::A
        } else {
            Qtype::Aaaa
        };
        match all
            .iter_mut()
            .find(|r| matches!(r.kind, Kind::Target) && r.r.name == t && r.r.prefer == prefer)
        {
            Some(r) => {
                if !r.reqs.iter().any(|x| x.owner.id == q.owner.id) {
                    r.reqs.push(q);
                }
            }
            None => all.push(Res {
                r: Resolution::new(t, prefer),
                reqs: vec![q],
                kind: Kind::Target,
            }),
        }
    }
}

/// `resolv_srvrq_cleanup_srv`: the record went away, so do the server's address, port and
/// host name.
fn srv_removed(ctx: &Ctx, q: &Req) {
    if q.srv.admin.load(Ordering::Acquire) & ADMIN_RMAINT == 0 {
        control::address_lost(&ctx.shared, &q.be, &q.srv, MaintCause::SrvRemoved);
    }
    q.srv.set_host(None);
    let ip = q.srv.addr().ip();
    q.srv.addr.store(Arc::new(SocketAddr::new(ip, 0)));
    q.srv.has_addr.store(false, Ordering::Release);
}

/// An SRV item's eb32 key: XXH32 of the target in DNS label form (what HAProxy's
/// `resolv_read_name` returns, without the root label), seeded with the SRV type.
fn srv_key(target: &str) -> u32 {
    let mut wire = Vec::with_capacity(target.len() + 1);
    for label in target.split('.').filter(|l| !l.is_empty()) {
        wire.push(label.len().min(63) as u8);
        wire.extend_from_slice(label.as_bytes());
    }
    crate::resolve::answer::xxh32(&wire, u32::from(Qtype::Srv.code()))
}

fn on_failure(ctx: &mut Ctx, all: &mut [Res], i: usize, now: u64) {
    let Some(res) = all.get_mut(i) else { return };
    let expired = res.r.hold_expired(now, &ctx.holds);
    let cause = match res.r.status {
        Status::Nx => MaintCause::DnsNx,
        Status::Timeout => MaintCause::DnsTimeout,
        Status::Refused => MaintCause::DnsRefused,
        Status::Valid => MaintCause::NoIp,
        _ => MaintCause::DnsOther,
    };
    if !expired {
        return;
    }
    if let Kind::Srv { slots, free, .. } = &mut res.kind {
        for (idx, (slot, q)) in slots.iter_mut().zip(&res.reqs).enumerate() {
            if slot.take().is_some() {
                free.push(idx);
                srv_removed(ctx, q);
            }
        }
        return;
    }
    let mut keep = false;
    for q in &res.reqs {
        if q.srv.admin.load(Ordering::Acquire) & ADMIN_RMAINT != 0 {
            keep = true;
            continue;
        }
        control::address_lost(&ctx.shared, &q.be, &q.srv, cause);
        res.r.answers.detach(q.owner.id);
    }
    if !keep {
        res.r.answers.purge();
    }
}
