//! One `mode tcp` session: `tcp-request` rules, backend choice, server connect (retries,
//! redispatch), relay, log line.
//!
//! Content inspection peeks at the client's first bytes (they stay in the socket, so the server
//! receives them unmodified through the relay) and evaluates the rules as HAProxy does: at once,
//! then on every arrival; a rule whose fetch needs more bytes waits until `inspect-delay`
//! expires, the client closes, or the buffer is full, and is then evaluated on what is there.

use crate::engine::service::Origin;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use crate::ana::capture::Captured;
use crate::ana::last_rule::LastRule;
use crate::ana::rules::apply_tcp_rules;
use crate::ana::sample::SampleCtx;
use crate::ana::tcp::{base_ctx, route};
use crate::ana::vars::{SessVars, Vars};
use crate::config::model::{RelayEngine, TcpRequestAction};
use crate::engine::conn::Conn;
use crate::engine::io::{Peeker, Stream};
use crate::stick::StkCtrs;

use super::end::{End, finish};
use crate::backend;
use crate::engine::Shared;
use crate::log::SessionLog;
use crate::model::{Counters, Proxy, stats};

use crate::tcp::relay::{RelayTimeouts, SpliceDirs, relay};

/// HAProxy's request buffer (`tune.bufsize` 16384) less the rewrite reserve (`tune.maxrewrite`
/// 1024): once that much is waiting, inspection is final.
pub const INSPECT_MAX: usize = 16384 - 1024;

/// What a session's rules read and record besides its addresses: the stick counters it
/// tracks, its captures and variables, its last final rule.
#[derive(Clone, Copy)]
struct RuleState<'a> {
    sess: &'a StkCtrs,
    caps: Option<&'a Captured>,
    vars: Option<&'a Vars>,
    last: &'a LastRule,
}

impl<'a> RuleState<'a> {
    fn fill(self, base: &mut SampleCtx<'a>) {
        base.captures = self.caps;
        base.vars = self.vars;
        base.last_rule = Some(self.last);
    }
}

/// Runs the `tcp-request content` rules over the client's first bytes, copied into `buf`;
/// returns the verdict and how many bytes were looked at.
async fn inspect(
    px: &Proxy,
    client: &Stream,
    base: SampleCtx<'_>,
    start: Instant,
    buf: &mut [u8],
) -> (TcpRequestAction, usize, bool) {
    let delay = px.cfg.tcp_inspect_delay.filter(|d| !d.is_zero());
    let deadline = delay.map(|d| start + d);
    let peeker = Peeker::new(client).ok();
    // What came with the connection counts from the first evaluation on, as in HAProxy.
    let mut len = peeker
        .as_ref()
        .and_then(|p| p.try_peek(buf).ok())
        .unwrap_or(0);
    let mut closed = peeker.is_none();
    loop {
        let expired = deadline.is_none_or(|d| Instant::now() >= d);
        let partial = !(expired || closed || len >= buf.len());
        let ctx = SampleCtx {
            payload: Some(buf.get(..len).unwrap_or(&[])),
            partial,
            ..base
        };
        if let Some(verdict) = apply_tcp_rules(&px.rules.tcp_content, &ctx) {
            return (verdict, len, closed && len == 0);
        }
        let (Some(p), Some(d)) = (&peeker, deadline) else {
            return (TcpRequestAction::Accept, len, closed && len == 0);
        };
        match tokio::time::timeout_at(d, p.peek(buf)).await {
            Ok(Ok((n, c))) => {
                len = n;
                closed = c;
            }
            Ok(Err(_)) => closed = true,
            // Expired: the next pass is final.
            Err(_) => {}
        }
    }
}

/// `portcullis-relay`: the userspace relay if the frontend or the backend asks for it or the
/// kernel path is not loaded, else the kernel splice from the start if either asks for it, else
/// `auto`; the splice's `max-unacked` and `bulk-rate` (each the backend's, else the
/// frontend's, else the default).
fn relay_choice(fe: &Proxy, be: &Proxy) -> (RelayEngine, u64, u64) {
    let (f, b) = (fe.cfg.relay, be.cfg.relay);
    let asks = |e| f.engine == Some(e) || b.engine == Some(e);
    let engine = if asks(RelayEngine::Userspace) || crate::kernel::loaded().is_none() {
        RelayEngine::Userspace
    } else if asks(RelayEngine::Kernel) {
        RelayEngine::Kernel
    } else {
        RelayEngine::Auto
    };
    let max = b
        .max_unacked
        .or(f.max_unacked)
        .unwrap_or(crate::kernel::DEFAULT_MAX_UNACKED);
    let bulk = b
        .bulk_rate
        .or(f.bulk_rate)
        .unwrap_or(crate::kernel::DEFAULT_BULK_RATE);
    (engine, max, bulk)
}

/// Which directions may move to splice(2): not with `global nosplice`, nor a direction that the
/// frontend or the backend turned off (`no option splice-auto|splice-request|splice-response`).
fn splice_dirs(nosplice: bool, fe: &Proxy, be: &Proxy) -> SpliceDirs {
    let (f, b) = (&fe.cfg.options, &be.cfg.options);
    SpliceDirs {
        c2s: !nosplice && !f.no_splice_request && !b.no_splice_request,
        s2c: !nosplice && !f.no_splice_response && !b.no_splice_response,
    }
}

/// One side of a session: a plain socket (which the kernel path can splice) or a TLS connection.
enum Side {
    Plain(Rc<Stream>),
    Tls(Rc<Conn>),
}

impl Side {
    fn of(c: Conn) -> Side {
        match c {
            Conn::Plain(s) => Side::Plain(Rc::new(s)),
            other => Side::Tls(Rc::new(other)),
        }
    }
}

/// Runs a `mode tcp` session on an accepted connection (TLS already terminated for `bind … ssl`).
pub async fn run(
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    conn: Conn,
    peer: Option<std::net::SocketAddr>,
) {
    let origin = Origin::of(&conn, peer);
    run_tracked(
        shared,
        fe,
        conn,
        origin,
        Rc::new(StkCtrs::default()),
        SessVars::default(),
    )
    .await
}

/// [`run`] for a session whose `tcp-request connection` rules tracked counters in `sess`. Its
/// phases, in HAProxy's order: content inspection, backend choice, server connection, relay;
/// each exit fills the end-of-stream record that [`finish`] releases, counts and logs.
pub async fn run_tracked(
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    conn: Conn,
    origin: Origin,
    sess: Rc<StkCtrs>,
    vars: SessVars,
) {
    let accept_at = std::time::SystemTime::now();
    let start = Instant::now();
    let (peer, local) = (origin.peer, origin.local);
    let tls = conn.tls().cloned();
    let client = Side::of(conn);
    let mut log = SessionLog::new(&fe, peer, local, accept_at);
    log.unix_listener = origin.unix_listener();
    log.req_counter = shared.model.streams.fetch_add(1, Ordering::Relaxed);
    log.ssl = tls.is_some();
    log.tls = tls;
    log.proxied = origin.proxied.clone();
    log.actconn = shared.model.actconn.current();
    log.feconn = fe.feconn.current();
    // What `tcp-request session` rules set lives on (rules and the log line read it).
    if !fe.rules.tcp_session.is_empty() {
        log.vars = Some(Vars::new(vars));
    }
    shared.log.connect(&fe, &log);
    let end = stream(&shared, &fe, client, (peer, local), &sess, start, log).await;
    let (bin, bout) = (end.log.bytes_in, end.log.bytes_out);
    crate::stick::count_end([Some(&sess), None], None, bin, bout, || {
        shared.model.now_ms()
    });
    finish(&shared, &fe, end);
}

/// What the content inspection found before the server connection: when the session
/// started, how long inspection took, whether the client closed without sending anything; and
/// the session's stick counters (for the response's rules).
struct Inspected<'a> {
    start: Instant,
    took: std::time::Duration,
    gone: bool,
    sess: &'a StkCtrs,
}

/// The session's phases up to its end-of-stream record.
async fn stream(
    shared: &Shared,
    fe: &Arc<Proxy>,
    client: Side,
    (peer, local): (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
    sess: &StkCtrs,
    start: Instant,
    mut log: SessionLog,
) -> End {
    let Some((be, took, fe_gone)) =
        inspect_and_route(shared, fe, &client, (peer, local), sess, start, &mut log).await
    else {
        log.term = *b"PR";
        log.total = start.elapsed();
        return End::log_only(log);
    };
    log.backend = Some(be.name.clone());
    let n = be.beconn.fetch_add(1, Ordering::Relaxed) + 1;
    be.counters.smax.update(n);
    be.counters.session(shared.model.now_ms());
    let be_gone = match enter_backend(shared, fe, &be, &client, (peer, local), sess, &mut log).await
    {
        Ok(gone) => gone,
        Err(len) => {
            // Its bytes count in the frontend's and the backend's `bin`.
            log.bytes_in = len as u64;
            log.term = *b"PR";
            log.total = start.elapsed();
            return End {
                count_bytes: true,
                ..End::on(log, &be)
            };
        }
    };
    let insp = Inspected {
        start,
        took,
        gone: fe_gone || be_gone,
        sess,
    };
    connect_phase(shared, fe, be, client, (peer, local), insp, log).await
}

/// The backend's own `tcp-request content` rules (variables made for its rules first): Ok with
/// whether the client closed without sending anything, Err with the bytes read on a reject.
async fn enter_backend(
    shared: &Shared,
    fe: &Proxy,
    be: &Proxy,
    client: &Side,
    (peer, local): (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
    sess: &StkCtrs,
    log: &mut SessionLog,
) -> Result<bool, usize> {
    let rules_here = !be.rules.tcp_content.is_empty() || !be.rules.tcp_response.is_empty();
    if log.vars.is_none() && rules_here {
        log.vars = Some(Vars::new(SessVars::default()));
    }
    let (caps, vars) = (log.captures.clone(), log.vars.clone());
    let last = log.last_rule.clone();
    let state = RuleState {
        sess,
        caps: caps.as_deref(),
        vars: vars.as_deref(),
        last: &last,
    };
    let be_inspecting = backend_inspect_phase(
        shared,
        fe,
        be,
        client,
        (peer, local, log.proxied.as_deref()),
        state,
    );
    let be_inspected = be_inspecting.await;
    log.last_rule = last;
    be_inspected
}

/// The server connection (stick rules, balancing, retries), then the relay. A client that
/// closed during inspection without sending anything is not retried for: HAProxy abandons the
/// stream after the first failed attempt and logs it `--`.
async fn connect_phase(
    shared: &Shared,
    fe: &Arc<Proxy>,
    be: Arc<Proxy>,
    client: Side,
    (peer, local): (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
    insp: Inspected<'_>,
    mut log: SessionLog,
) -> End {
    let tls = log.tls.clone();
    let proxied = log.proxied.clone();
    // `unique-id-format` (for the PROXY v2 `unique-id` TLV and `%ID`): made at connect time.
    log.unique_id = shared.log.unique_id(fe, &log);
    let uid = log.unique_id.clone();
    let side = backend::ClientSide {
        addrs: peer.zip(local),
        tls: tls.as_deref(),
        received: proxied.as_deref(),
        unique_id: uid.as_deref(),
    };
    // What the client sent so far, for `balance hash|rdp-cookie` and the stick patterns.
    let rdp = be.cfg.extra.rdp_persist.as_deref();
    let wanted = be.pool().lb.hash_expr().is_some() || !be.rules.stick.is_empty() || rdp.is_some();
    let pending = if wanted {
        pending_bytes(&client)
    } else {
        Vec::new()
    };
    let key = lb_key(fe, &be, (peer, local), proxied.as_deref(), &pending);
    let plan = stick_plan(shared, fe, &be, (peer, local), proxied.as_deref(), &pending);
    // `persist rdp-cookie` assigns the server before the stick rules, as HAProxy.
    let persisted = rdp.and_then(|name| rdp_server(&be, &pending, name));
    let chosen = match persisted.or_else(|| {
        plan.as_ref()
            .and_then(|p| backend::stuck_server(&be, p, false))
    }) {
        Some(s) => backend::take_server(&be, key, Some(s))
            .await
            .ok()
            .map(|(s, _)| s),
        None => None,
    };
    let connecting = backend::connect_retrying(shared.io, &be, key, chosen, &side, !insp.gone);
    match connecting.await {
        Err(f) => {
            log.server = f.server.as_ref().map(|s| s.name.clone());
            log.retries = f.info.retries;
            log.redispatched = f.info.redispatched;
            log.queue = Some(insp.took + f.info.queue);
            log.term = if insp.gone { *b"--" } else { f.error.term() };
            // HAProxy had read what the client sent: its close is a plain one.
            log.bytes_in = discard_pending(&client).await;
            log.total = insp.start.elapsed();
            End::on(log, &be)
        }
        Ok(c) => {
            if let Some(plan) = &plan {
                stick_store(shared, fe, &be, (peer, local), plan, &c.server);
            }
            log.server = Some(c.server.name.clone());
            log.retries = c.info.retries;
            log.redispatched = c.info.redispatched;
            log.connect = Some(c.info.connect_time);
            // HAProxy's Tw counts from the end of the handshake: inspection time included.
            log.queue = Some(insp.took + c.info.queue);
            connected(shared, fe, &be, client, c, &insp, log).await
        }
    }
}

/// Reads away what a plain client has sent and nobody will relay (closing a socket with unread
/// bytes would reset the connection); how many there were.
async fn discard_pending(client: &Side) -> u64 {
    let Side::Plain(c) = client else { return 0 };
    let mut probe = vec![0; INSPECT_MAX];
    let n = Peeker::new(c)
        .ok()
        .and_then(|p| p.try_peek(&mut probe).ok())
        .unwrap_or(0);
    if n == 0 {
        return 0;
    }
    let (r, _) = c.read(Vec::with_capacity(n)).await;
    r.map_or(0, |n| n as u64)
}

/// Content inspection, then the backend choice (None: the session is refused, `PR`), and how
/// long the inspection took.
async fn inspect_and_route(
    shared: &Shared,
    fe: &Arc<Proxy>,
    client: &Side,
    (peer, local): (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
    sess: &StkCtrs,
    start: Instant,
    log: &mut SessionLog,
) -> Option<(Arc<Proxy>, std::time::Duration, bool)> {
    log.captures = crate::ana::capture::Captured::start(&fe.cfg.captures);
    // Variables only where rules may set them (no allocation for a plain relay).
    if log.vars.is_none() && !fe.rules.tcp_content.is_empty() {
        log.vars = Some(Vars::new(SessVars::default()));
    }
    let (caps, vars) = (log.captures.clone(), log.vars.clone());
    let last = LastRule::default();
    let state = RuleState {
        sess,
        caps: caps.as_deref(),
        vars: vars.as_deref(),
        last: &last,
    };
    let inspecting = inspect_phase(
        shared,
        fe,
        client,
        (peer, local, log.proxied.as_deref()),
        state,
        start,
    );
    let inspected = inspecting.await;
    log.last_rule.merge(&last);
    let (peeked, gone) = match inspected {
        Ok(p) => p,
        Err(len) => {
            log.bytes_in = len as u64;
            return None;
        }
    };
    let inspected = start.elapsed();
    let payload = (!fe.rules.tcp_content.is_empty()).then_some(&peeked[..]);
    let proxied = log.proxied.clone();
    let be = route(
        &shared.model,
        fe,
        (peer, local),
        proxied.as_deref(),
        payload,
    )?;
    Some((be, inspected, gone))
}

/// The keys the request's store rules kept, then those of `stick store-response` (evaluated
/// once connected, without response bytes), stick to the server the session got.
fn stick_store(
    shared: &Shared,
    fe: &Proxy,
    be: &Proxy,
    (peer, local): (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
    plan: &crate::ana::sticking::StickPlan,
    srv: &crate::model::Server,
) {
    use crate::ana::sticking;
    let now = shared.model.now_ms();
    sticking::store(&plan.stores, srv.id, &srv.name, now);
    let ctx = crate::ana::sample::SampleCtx {
        backend: Some(&be.name),
        server: Some(&srv.name),
        ..crate::ana::tcp::base_ctx(fe, peer, local)
    };
    let keys = sticking::on_response(&be.rules.stick, &shared.model.stick, &ctx);
    sticking::store(&keys, srv.id, &srv.name, now);
}

/// The backend's `stick on|match|store-request` rules on the session's addresses and the bytes
/// its client sent so far; without stick rules, neither the clock nor the tables are read.
fn stick_plan(
    shared: &Shared,
    fe: &Proxy,
    be: &Proxy,
    (peer, local): (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
    proxied: Option<&crate::proxy_proto::Header>,
    pending: &[u8],
) -> Option<crate::ana::sticking::StickPlan> {
    if be.rules.stick.is_empty() {
        return None;
    }
    let ctx = backend_ctx(fe, be, (peer, local), proxied, pending);
    let now = shared.model.now_ms();
    Some(crate::ana::sticking::on_request(
        &be.rules.stick,
        &shared.model.stick,
        &ctx,
        now,
    ))
}

/// What the backend's stick rules and `balance hash` see of a TCP session: its addresses, PROXY
/// header and the bytes its client sent so far.
fn backend_ctx<'a>(
    fe: &'a Proxy,
    be: &'a Proxy,
    (peer, local): (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
    proxied: Option<&'a crate::proxy_proto::Header>,
    pending: &'a [u8],
) -> SampleCtx<'a> {
    SampleCtx {
        proxied,
        backend: Some(&be.name),
        payload: Some(pending),
        req_len: pending.len(),
        ..crate::ana::tcp::base_ctx(fe, peer, local)
    }
}

/// `persist rdp-cookie(<name>)`: the server whose IPv4 address and port the client's RDP cookie
/// names (`<addr>.<port>.`), if running (any with `option persist`), as HAProxy's
/// `tcp_persist_rdp_cookie`.
fn rdp_server(be: &Proxy, pending: &[u8], name: &str) -> Option<Arc<crate::model::Server>> {
    let crate::ana::rdp::Rdp::Cookie(v) = crate::ana::rdp::cookie(pending, Some(name)) else {
        return None;
    };
    let want = crate::ana::rdp::persist_addr(v)?;
    let pool = be.pool();
    pool.servers
        .iter()
        .find(|s| {
            s.addr() == std::net::SocketAddr::V4(want)
                && (be.cfg.options.persist || s.usable.load(std::sync::atomic::Ordering::Acquire))
        })
        .cloned()
}

/// The client's bytes waiting now (what `tcp-request content` inspected), peeked, never
/// taken; none behind TLS.
fn pending_bytes(client: &Side) -> Vec<u8> {
    let Side::Plain(s) = client else {
        return Vec::new();
    };
    let Ok(p) = Peeker::new(s) else {
        return Vec::new();
    };
    let mut buf = vec![0; INSPECT_MAX];
    let n = p.try_peek(&mut buf).unwrap_or(0);
    buf.truncate(n);
    buf
}

/// The session's balancing key for `be`: `balance hash` on what a TCP session has, its addresses
/// and PROXY header.
fn lb_key(
    fe: &Proxy,
    be: &Proxy,
    (peer, local): (Option<std::net::SocketAddr>, Option<std::net::SocketAddr>),
    proxied: Option<&crate::proxy_proto::Header>,
    pending: &[u8],
) -> Option<u32> {
    let pool = be.pool();
    match pool.lb.hash_expr() {
        Some(expr) => {
            let ctx = backend_ctx(fe, be, (peer, local), proxied, pending);
            expr.eval(&ctx).map(|v| pool.lb.key_of(&v.to_bytes()))
        }
        None => pool.lb.key(peer.map(|p| p.ip()), None),
    }
}

/// Content inspection (`tcp-request content`): the bytes looked at and whether the client
/// closed without sending any, or Err with their count when a rule rejected the session (they
/// then count in `bin` and `%U`, the session in `dreq`).
async fn inspect_phase(
    shared: &Shared,
    fe: &Proxy,
    client: &Side,
    (peer, local, proxied): (
        Option<std::net::SocketAddr>,
        Option<std::net::SocketAddr>,
        Option<&crate::proxy_proto::Header>,
    ),
    state: RuleState<'_>,
    start: Instant,
) -> Result<(Vec<u8>, bool), usize> {
    let mut peeked = Vec::new();
    // Content inspection peeks at the socket: plain connections only (a TLS frontend with
    // `tcp-request content` rules is refused at start).
    let (false, Side::Plain(client)) = (fe.rules.tcp_content.is_empty(), client) else {
        return Ok((peeked, false));
    };
    peeked.resize(INSPECT_MAX, 0);
    let mut base = base_ctx(fe, peer, local).with_proxied(proxied);
    let now = shared.model.now_ms();
    base.stick = shared.model.stick_view(fe, Some(state.sess), None, now);
    state.fill(&mut base);
    let (verdict, len, gone) = inspect(fe, client, base, start, &mut peeked).await;
    peeked.truncate(len);
    if verdict == TcpRequestAction::Reject {
        // HAProxy had read the bytes: they count in `bin`, and the close is a plain one.
        if len > 0 {
            let _ = client.read(Vec::with_capacity(len)).await;
        }
        Counters::add(&fe.fe_counters.denied_req, 1);
        Counters::add(&fe.fe_counters.bytes_in, len as u64);
        return Err(len);
    }
    Ok((peeked, gone))
}

/// The backend's `tcp-request content` rules, once it is chosen (HAProxy's `AN_REQ_INSPECT_BE`):
/// its own `inspect-delay`, counted from now. A `listen` section's rules ran as the frontend's.
/// Ok with whether the client closed without sending anything; Err with the bytes read when a
/// rule rejected the session (`dreq` on the frontend only, as in HAProxy).
async fn backend_inspect_phase(
    shared: &Shared,
    fe: &Proxy,
    be: &Proxy,
    client: &Side,
    (peer, local, proxied): (
        Option<std::net::SocketAddr>,
        Option<std::net::SocketAddr>,
        Option<&crate::proxy_proto::Header>,
    ),
    state: RuleState<'_>,
) -> Result<bool, usize> {
    if be.rules.tcp_content.is_empty() || be.index == fe.index {
        return Ok(false);
    }
    let mut base = base_ctx(fe, peer, local).with_proxied(proxied);
    base.backend = Some(&be.name);
    base.stick = shared
        .model
        .stick_view(be, Some(state.sess), None, shared.model.now_ms());
    state.fill(&mut base);
    let (verdict, len, gone) = match client {
        Side::Plain(client) => {
            let mut buf = vec![0; INSPECT_MAX];
            inspect(be, client, base, Instant::now(), &mut buf).await
        }
        // Behind TLS there is no socket to peek at: the rules see no payload, at once final.
        Side::Tls(_) => {
            let ctx = SampleCtx {
                payload: Some(&[]),
                partial: false,
                ..base
            };
            let v = apply_tcp_rules(&be.rules.tcp_content, &ctx);
            (v.unwrap_or(TcpRequestAction::Accept), 0, false)
        }
    };
    if verdict == TcpRequestAction::Reject {
        if let (true, Side::Plain(client)) = (len > 0, client) {
            let _ = client.read(Vec::with_capacity(len)).await;
        }
        Counters::add(&fe.fe_counters.denied_req, 1);
        return Err(len);
    }
    Ok(gone)
}

/// A server connection is up (its slot taken): TLS to the server if asked, then the relay.
async fn connected(
    shared: &Shared,
    fe: &Proxy,
    be: &Arc<Proxy>,
    client: Side,
    c: backend::Connected,
    insp: &Inspected<'_>,
    mut log: SessionLog,
) -> End {
    let start = insp.start;
    let srv = c.server;
    let epoch = srv.kill_epoch();
    let server = match server_side(be, &srv, c.stream).await {
        Some(s) => s,
        None => {
            // The server slot goes first; the line shows no `srvconn` (as before).
            backend::release(be, &srv);
            log.term = *b"SC";
            log.total = start.elapsed();
            return End::on(log, be);
        }
    };
    // `option logasap`: the line goes out now that the server is connected (HAProxy's
    // `sess_establish`), with what is known so far.
    if fe.cfg.options.logasap {
        crate::log::asap_counts(&mut log, start, be, &srv);
        shared.log.asap(fe, &mut log);
    }
    let sides = (&client, &server);
    let Ok(early) = response_phase(shared, fe, (be, &srv, insp.sess), sides, &mut log).await else {
        log.total = start.elapsed();
        return End {
            srv: Some(srv),
            count_bytes: true,
            ..End::on(log, be)
        };
    };
    let kill = srv.killed(epoch);
    let stats = relay_phase(shared, fe, be, client, server, kill).await;
    log.bytes_in = stats.c2s + early;
    log.bytes_out = stats.s2c;
    log.term = match stats.end {
        crate::tcp::End::Killed => [srv.kill_cause(), b'D'],
        other => other.codes(),
    };
    // `option dontlognull`: nothing came from the client.
    log.null = log.bytes_in == 0;
    log.total = start.elapsed();
    // TCP has no response time: HAProxy's rtime stays 0.
    let times = stats::Sample {
        queue: stats::ms(c.info.queue),
        connect: stats::ms(c.info.connect_time),
        response: 0,
        total: stats::ms(log.total),
    };
    End {
        srv: Some(srv),
        count_bytes: true,
        times: Some((false, times)),
        ..End::on(log, be)
    }
}

/// The server side of a connected session: TLS to the server if asked (None: the handshake
/// failed, counted as a connection error).
async fn server_side(be: &Proxy, srv: &crate::model::Server, stream: Stream) -> Option<Side> {
    let Some(x) = srv.tls.as_ref().filter(|x| x.traffic) else {
        return Some(Side::Plain(Rc::new(stream)));
    };
    let name = crate::tls::client::server_name(None, srv.addr().ip());
    let hs = crate::tls::stream::TlsStream::connect(
        stream,
        Arc::clone(&x.config),
        name,
        be.cfg.timeouts.connect,
    );
    match hs.await {
        Ok(s) => Some(Side::Tls(Rc::new(Conn::Tls(Box::new(s))))),
        Err(e) => {
            tracing::debug!("{}/{}: TLS handshake failed: {e}", be.name, srv.name);
            Counters::add(&srv.counters.errors_conn, 1);
            Counters::add(&be.counters.errors_conn, 1);
            None
        }
    }
}

/// The backend's `tcp-response content` rules on the server's first bytes (`tcp_response`):
/// Ok with the client bytes forwarded meanwhile, for the relay to go on; Err when a rule ended
/// the session: `reject` closes both sides (the server's with a RST) and logs `PD`, counted
/// in `dresp`; `close` forwards what the server sent, then closes both. Behind TLS on either
/// side nothing is peeked: the rules see no payload, at once final.
async fn response_phase(
    shared: &Shared,
    fe: &Proxy,
    (be, srv, sess): (&Proxy, &crate::model::Server, &StkCtrs),
    (client, server): (&Side, &Side),
    log: &mut SessionLog,
) -> Result<u64, ()> {
    if be.rules.tcp_response.is_empty() {
        return Ok(0);
    }
    let mut base = base_ctx(fe, log.client, log.frontend_addr).with_proxied(log.proxied.as_deref());
    base.backend = Some(&be.name);
    base.server = Some(&srv.name);
    base.captures = log.captures.as_deref();
    base.vars = log.vars.as_deref();
    base.last_rule = Some(&log.last_rule);
    base.stick = shared
        .model
        .stick_view(be, Some(sess), None, shared.model.now_ms());
    let peekable = |s: &Side| match s {
        Side::Plain(s) => Some(Rc::clone(s)),
        Side::Tls(_) => None,
    };
    let done = match (peekable(client), peekable(server)) {
        (c, Some(s)) => {
            let mut buf = vec![0; INSPECT_MAX];
            crate::stream::tcp_response::inspect(be, c.as_deref(), &s, base, &mut buf).await
        }
        (_, None) => {
            let ctx = SampleCtx {
                res_payload: Some(&[]),
                ..base
            };
            let verdict = apply_tcp_rules(&be.rules.tcp_response, &ctx);
            crate::stream::tcp_response::Inspected {
                verdict: verdict.unwrap_or(TcpRequestAction::Accept),
                len: 0,
                c2s: 0,
            }
        }
    };
    log.bytes_in = done.c2s;
    match done.verdict {
        TcpRequestAction::Reject => {
            abort(server, true);
            abort(client, false);
            log.term = *b"PD";
            // HAProxy had received the bytes looked at.
            log.bytes_out = done.len as u64;
            Counters::add(&fe.fe_counters.denied_resp, 1);
            Counters::add(&be.counters.denied_resp, 1);
            Counters::add(&srv.counters.denied_resp, 1);
            Err(())
        }
        TcpRequestAction::Close => {
            log.bytes_out = flush_and_close(client, server, done.len).await;
            Err(())
        }
        _ => Ok(done.c2s),
    }
}

/// Closes one side now (with a RST when `rst`).
fn abort(side: &Side, rst: bool) {
    match side {
        Side::Plain(s) => s.abort(rst),
        Side::Tls(c) => crate::engine::conn::Duplex::abort(&**c, rst),
    }
}

/// `tcp-response content close`: the `len` server bytes inspected go to the client, then both
/// connections close. Returns the bytes sent.
async fn flush_and_close(client: &Side, server: &Side, len: usize) -> u64 {
    use crate::engine::conn::Duplex;
    let mut sent = 0;
    if len > 0 {
        let (r, data) = match server {
            Side::Plain(s) => s.read(Vec::with_capacity(len)).await,
            Side::Tls(s) => s.read(Vec::with_capacity(len)).await,
        };
        if let Ok(n) = r {
            sent = n as u64;
            let _ = match client {
                Side::Plain(c) => c.write_all(data).await.0,
                Side::Tls(c) => c.write_all(data).await.0,
            };
        }
    }
    abort(server, false);
    match client {
        Side::Plain(c) => {
            let _ = Stream::shutdown_write(c);
        }
        Side::Tls(c) => {
            let _ = c.shutdown_write().await;
        }
    }
    sent
}

/// Relays both directions until the session ends: the kernel splice, `auto`, or the userspace
/// copy, as [`relay_choice`] says.
async fn relay_phase(
    shared: &Shared,
    fe: &Proxy,
    be: &Proxy,
    client: Side,
    server: Side,
    kill: impl std::future::Future<Output = ()>,
) -> crate::tcp::RelayStats {
    let t = RelayTimeouts {
        client: fe.cfg.timeouts.client,
        server: be.cfg.timeouts.server,
        tunnel: be.cfg.timeouts.tunnel,
        client_fin: fe.cfg.timeouts.client_fin,
        server_fin: be.cfg.timeouts.server_fin,
    };
    let (engine, max_unacked, bulk_rate) = relay_choice(fe, be);
    let sp = splice_dirs(shared.model.cfg.global.nosplice, fe, be);
    match (client, server) {
        (Side::Plain(client), Side::Plain(server)) if engine == RelayEngine::Kernel => {
            let spliced = crate::tcp::splice::relay(
                client.clone(),
                server.clone(),
                t,
                max_unacked,
                bulk_rate,
                kill,
                None,
            );
            match spliced.await {
                Ok(stats) => stats,
                // A failed attach has taken the sockets out of the SOCKHASH again, but
                // whatever a verdict may have queued in their psock in between is only
                // seen by recv: the copy path.
                Err(kill) => relay(client, server, Vec::new(), t, SpliceDirs::NONE, kill).await,
            }
        }
        (Side::Plain(client), Side::Plain(server)) if engine == RelayEngine::Auto => {
            crate::tcp::auto::run(client, server, t, sp, max_unacked, bulk_rate, kill).await
        }
        (Side::Plain(client), Side::Plain(server)) => {
            relay(client, server, Vec::new(), t, sp, kill).await
        }
        (Side::Plain(client), Side::Tls(server)) => {
            relay(client, server, Vec::new(), t, sp, kill).await
        }
        (Side::Tls(client), Side::Plain(server)) => {
            relay(client, server, Vec::new(), t, sp, kill).await
        }
        (Side::Tls(client), Side::Tls(server)) => {
            relay(client, server, Vec::new(), t, sp, kill).await
        }
    }
}
