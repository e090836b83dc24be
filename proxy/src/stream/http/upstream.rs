//! The server side of a transaction behind [`Upstream`]: the server the balancer (or a stick
//! rule) picks, then the stream's own connection to it, an idle pooled one (`http-reuse`), or a
//! new one (queue, retries, redispatch, `send-proxy`, TLS to the server). [`Servers`] is the real
//! one; the transaction's unit tests script their own.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use crate::ana::sample::SampleCtx;
use crate::backend::h2::Link;
use crate::backend::srvconn::SrvConn;
use crate::backend::{self, ConnectError};
use crate::config::model::HttpReuse;
use crate::engine::Shared;
use crate::engine::conn::{Conn, Duplex};
use crate::engine::io::Stream;
use crate::engine::pool;
use crate::log::SessionLog;
use crate::model::{Counters, Proxy, Server};
use crate::tls::stream::TlsInfo;

/// A server connection for a transaction, holding a connection slot on its server (released by
/// the transaction), and whether it was reused; or why there is none (and the server that
/// failed, if one was tried).
pub type ServerConn<C> = Result<(Arc<Server>, Rc<C>, bool), (ConnectError, Option<Arc<Server>>)>;

/// The client's facts a server connection may need: its addresses, TLS and PROXY header.
#[derive(Clone, Default)]
pub struct Facts {
    pub peer: Option<SocketAddr>,
    pub local: Option<SocketAddr>,
    /// The frontend TLS connection's facts (None: plain).
    pub tls: Option<Arc<TlsInfo>>,
    /// The PROXY protocol header of an `accept-proxy` bind (`fc_pp_*`, sent on by `send-proxy`).
    pub proxied: Option<Arc<crate::proxy_proto::Header>>,
    /// Which `bind` line of the frontend accepted the connection.
    pub bind: u32,
}

impl Facts {
    /// A unix-socket client: its listener's id (logged as HAProxy logs such clients).
    pub fn unix_listener(&self) -> Option<u32> {
        self.peer.is_none().then(|| self.bind.saturating_add(1))
    }

    /// The sample context every rule and expression of the stream starts from.
    pub fn sample<'a>(&'a self, frontend: &'a str) -> SampleCtx<'a> {
        let zero = || SocketAddr::from(([0, 0, 0, 0], 0));
        SampleCtx::new(
            self.peer.unwrap_or_else(zero),
            self.local.unwrap_or_else(zero),
            frontend,
        )
        .with_tls(self.tls.as_deref())
        .with_proxied(self.proxied.as_deref())
    }
}

/// The stream a server connection is asked for.
pub struct Side<'a> {
    pub shared: &'a Shared,
    pub fe: &'a Proxy,
    pub facts: &'a Facts,
    /// The server the client's persistence cookie names: tried before the balancer.
    pub persist: Option<&'a Arc<Server>>,
    /// A `force-persist` rule matched: a stopped `stick match` server is used all the same.
    pub force_persist: bool,
    /// What the backend's `stick` rules found on the request.
    pub stick: Option<&'a crate::ana::sticking::StickPlan>,
    /// The request can be sent again on a new connection if a reused one turns out closed
    /// (bodiless, first attempt): the stream's own connection, fresh from its last response,
    /// is then reused without the close check's system call.
    pub replayable: bool,
}

/// How long after its last response an HTTP/1 connection (the stream's own, or one of the
/// worker's pool) is reused for a replayable request without checking it for a close: a close
/// the server sent meanwhile is caught by the replay, and stray bytes from a server come with
/// its idle timeout, not within this.
const FRESH_MS: u64 = 1000;

/// Where a transaction gets its server connections.
#[allow(async_fn_in_trait)]
pub trait Upstream {
    type Conn: Duplex;

    /// A connection to a server of `be` for a request with balancing key `key`: the stream's
    /// own if the balancer picked its server again, an idle pooled one (per `http-reuse`;
    /// `first` keeps `safe` off shared connections), or a new one. Fills the log record's queue
    /// and connect times, retries, redispatch, and the server that failed.
    async fn conn(
        &mut self,
        side: Side<'_>,
        be: &Proxy,
        first: bool,
        key: Option<u32>,
        log: &mut SessionLog,
    ) -> ServerConn<Self::Conn>;

    /// Keeps `conn`, reusable, for the stream's next request; `reuse` is its backend's;
    /// `private`: bound to this client (connection-based authentication), never shared.
    fn keep(&mut self, srv: Arc<Server>, conn: Rc<Self::Conn>, reuse: HttpReuse, private: bool);

    /// The stream ends: the connection it kept goes to the worker's pool unless its backend's
    /// `http-reuse` is `never` or the process is `stopping`.
    fn end(&mut self, stopping: bool);

    /// The stream waits lean for its next request: the connection it kept goes to the worker's
    /// pool if other streams may use it (not under `never`, not after a PROXY header, not
    /// private) and the process is not `stopping`, where its next request finds it unless
    /// another stream took it first.
    fn release_idle(&mut self, stopping: bool);
}

/// The server connection a stream used last, kept for its next request.
struct Kept {
    srv: Arc<Server>,
    conn: Rc<SrvConn>,
    /// When its last response ended (`clock::coarse_ms`).
    at: u64,
    /// Its backend's `http-reuse`.
    reuse: HttpReuse,
    /// Bound to this client (see [`Upstream::keep`]).
    private: bool,
}

impl Kept {
    /// Others may use it: not under `never`, not after this client's PROXY header, not private.
    fn shareable(&self) -> bool {
        self.reuse != HttpReuse::Never && !self.private && !self.srv.cfg.opts.send_proxy.enabled()
    }
}

/// The real servers: the backend's balancer, the worker's idle pool, `backend::connect`.
#[derive(Default)]
pub struct Servers {
    /// The server connection the stream used last. Boxed: a session parked between requests
    /// holds this field, empty (`engine::readiness`), and 24 bytes less keep it within a
    /// smaller allocation.
    own: Option<Box<Kept>>,
}

impl Upstream for Servers {
    type Conn = SrvConn;

    async fn conn(
        &mut self,
        side: Side<'_>,
        be: &Proxy,
        first: bool,
        key: Option<u32>,
        log: &mut SessionLog,
    ) -> ServerConn<SrvConn> {
        let model = &side.shared.model;
        // A persistence cookie wins over the stick rules (HAProxy assigns its server first).
        let stuck = match (side.persist, side.stick) {
            (Some(s), _) => Some(Arc::clone(s)),
            (None, Some(plan)) => backend::stuck_server(be, plan, side.force_persist),
            (None, None) => None,
        };
        let (srv, queued) = backend::take_server_forced(
            be,
            key,
            stuck,
            side.persist.is_some() || side.force_persist,
        )
        .await
        .map_err(|e| (e, None))?;
        log.queue = Some(queued);
        let reuse = be.cfg.http_reuse;
        let mut idle = idle_conn(&mut self.own, reuse, &srv, (first, side.replayable));
        // A shared h2 connection to the server is being opened: its streams are for this
        // request too (HAProxy makes a new connection available at once).
        let shared_h2 = shares_h2(&srv, reuse);
        if idle.is_none()
            && shared_h2
            && let Some(n) = pool::connecting(&*srv)
        {
            let wait = be.cfg.timeouts.connect.unwrap_or(CONNECTING_WAIT);
            let _ = tokio::time::timeout(wait.min(CONNECTING_WAIT), n.notified()).await;
            idle = idle_conn(&mut self.own, reuse, &srv, (first, side.replayable));
        }
        if let Some(conn) = idle {
            if let Some(plan) = side.stick {
                crate::ana::sticking::store(&plan.stores, srv.id, &srv.name, model.now_ms());
            }
            Counters::add(&srv.counters.lbtot, 1);
            Counters::add(&be.counters.lbtot, 1);
            srv.counters.session(model.now_ms());
            return Ok((srv, conn, true));
        }
        let _opening = shared_h2.then(|| pool::Connecting::start(&*srv));
        // Boxed: the connect's state (retries, TLS, PROXY header) is most of this future's
        // size, and every transaction's future carries it (moved into its box per request),
        // while a keep-alive stream mostly reuses its connection.
        Box::pin(connect_new(side, be, key, srv, log)).await
    }

    fn keep(&mut self, srv: Arc<Server>, conn: Rc<SrvConn>, reuse: HttpReuse, private: bool) {
        let at = crate::clock::coarse_ms();
        self.own = Some(Box::new(Kept {
            srv,
            conn,
            at,
            reuse,
            private,
        }));
    }

    fn end(&mut self, stopping: bool) {
        // Stopping: nothing will take it again (the worker has emptied its pools).
        if let Some(k) = self.own.take()
            && k.shareable()
            && !stopping
        {
            give_back(&k.srv, k.conn, k.at);
        }
    }

    fn release_idle(&mut self, stopping: bool) {
        // HAProxy puts such a connection in its server's idle list as soon as the response is
        // done; a stream that keeps it holds a server socket and its state per idle client (a
        // new client then opens another one, none being idle in the pool). Stopping: the
        // worker has emptied its pools for good; the stream's end closes it.
        if !stopping
            && self.own.as_deref().is_some_and(Kept::shareable)
            && let Some(k) = self.own.take()
        {
            give_back(&k.srv, k.conn, k.at);
        }
    }
}

/// An idle connection (idle since `at`, `clock::coarse_ms`) goes to the worker's pool; for h2,
/// its connection does (unless it is already there, shared).
fn give_back(srv: &Server, conn: Rc<SrvConn>, at: u64) {
    match conn.link() {
        None => pool::put(srv, conn, at),
        Some(l) if !l.shared.get() && l.usable() => pool::put_link(srv, Rc::clone(l)),
        Some(_) => {}
    }
}

/// How long a request waits for the shared h2 connection being opened before opening its own.
const CONNECTING_WAIT: std::time::Duration = std::time::Duration::from_secs(1);

/// h2 connections to `srv` are shared by concurrent streams: HAProxy 2.6 puts a multiplexed
/// server connection in its server's list of available ones under any `http-reuse` but
/// `never` (a `safe` first request only takes one that other streams are using).
fn shares_h2(srv: &Server, reuse: HttpReuse) -> bool {
    reuse != HttpReuse::Never && !srv.cfg.opts.send_proxy.enabled() && speaks_h2(srv)
}

/// The server's traffic may be HTTP/2: `proto h2`, or `h2` offered by ALPN.
fn speaks_h2(srv: &Server) -> bool {
    let o = &srv.cfg.opts;
    o.proto.as_deref() == Some("h2")
        || (o.ssl && o.alpn.as_ref().is_some_and(|a| a.iter().any(|p| p == "h2")))
}

/// A new connection (`backend::connect`: queue, retries, redispatch from `picked`), then TLS if
/// the server asks for it; the request's `stick store-request` keys go to the server it got.
async fn connect_new(
    side: Side<'_>,
    be: &Proxy,
    key: Option<u32>,
    picked: Arc<Server>,
    log: &mut SessionLog,
) -> ServerConn<SrvConn> {
    let uid = log.unique_id.clone();
    let facts = side.facts;
    let client = backend::ClientSide {
        addrs: facts.peer.zip(facts.local),
        tls: facts.tls.as_deref(),
        received: facts.proxied.as_deref(),
        unique_id: uid.as_deref(),
    };
    match backend::connect(side.shared.io, be, key, Some(picked), &client).await {
        Ok(c) => {
            if let Some(plan) = side.stick {
                let now = side.shared.model.now_ms();
                crate::ana::sticking::store(&plan.stores, c.server.id, &c.server.name, now);
            }
            log.retries = c.info.retries;
            log.redispatched = c.info.redispatched;
            log.connect = Some(c.info.connect_time);
            let conn = match c.server.tls.as_ref().filter(|t| t.traffic) {
                None => Conn::Plain(c.stream),
                Some(t) => match server_handshake(&side, be, &c.server, t, c.stream).await {
                    Some(conn) => conn,
                    None => {
                        backend::release(be, &c.server);
                        log.server = Some(c.server.name.clone());
                        return Err((ConnectError::Refused, Some(c.server)));
                    }
                },
            };
            match server_conn(be, &c.server, conn).await {
                Some(conn) => Ok((c.server, conn, false)),
                None => {
                    backend::release(be, &c.server);
                    log.server = Some(c.server.name.clone());
                    Err((ConnectError::Refused, Some(c.server)))
                }
            }
        }
        Err(f) => {
            log.server = f.server.as_ref().map(|s| s.name.clone());
            log.retries = f.info.retries;
            log.redispatched = f.info.redispatched;
            Err((f.error, f.server))
        }
    }
}

/// The transaction's connection on a new `conn`: HTTP/1, or a stream of a new h2 connection
/// (`proto h2`, or ALPN chose `h2`), which `http-reuse always` shares at once as HAProxy does.
async fn server_conn(be: &Proxy, srv: &Server, conn: Conn) -> Option<Rc<SrvConn>> {
    let alpn_h2 = conn.tls().is_some_and(|t| t.alpn.as_deref() == Some("h2"));
    if srv.cfg.opts.proto.as_deref() != Some("h2") && !alpn_h2 {
        return Some(Rc::new(SrvConn::H1(conn)));
    }
    let link = match Link::handshake(conn).await {
        Ok(l) => l,
        Err(e) => {
            tracing::debug!("{}/{}: h2 handshake failed: {e}", be.name, srv.name);
            Counters::add(&srv.counters.errors_conn, 1);
            Counters::add(&be.counters.errors_conn, 1);
            return None;
        }
    };
    if shares_h2(srv, be.cfg.http_reuse) {
        *link.home.borrow_mut() = Some(pool::Key::from(srv));
        link.shared.set(true);
        pool::put_link(srv, Rc::clone(&link));
    }
    Some(SrvConn::h2(link))
}

/// TLS towards a `server … ssl`, within `timeout connect`. A failed handshake counts as a
/// connection error on the server (HAProxy: `SC`, `econ`).
async fn server_handshake(
    side: &Side<'_>,
    be: &Proxy,
    srv: &Server,
    tls: &crate::tls::client::ServerTls,
    sock: Stream,
) -> Option<Conn> {
    let sni = tls.sni.as_ref().and_then(|e| {
        e.eval(&side.facts.sample(&side.fe.name))
            .map(|v| v.to_str().into_owned())
    });
    let name = crate::tls::client::server_name(sni.as_deref(), srv.addr().ip());
    let connect = be.cfg.timeouts.connect;
    let config = Arc::clone(&tls.config);
    match crate::tls::stream::TlsStream::connect(sock, config, name, connect).await {
        Ok(t) => Some(Conn::Tls(Box::new(t))),
        Err(e) => {
            tracing::debug!("{}/{}: TLS handshake failed: {e}", be.name, srv.name);
            Counters::add(&srv.counters.errors_conn, 1);
            Counters::add(&be.counters.errors_conn, 1);
            None
        }
    }
}

/// An idle connection to `srv` the stream may use: its own (`own`, taken) if it is to `srv` and
/// still usable, else one from the worker's pool when `reuse` allows sharing. The stream's own
/// connection to another server goes back to the pool.
fn idle_conn(
    own: &mut Option<Box<Kept>>,
    reuse: HttpReuse,
    srv: &Arc<Server>,
    (first, replayable): (bool, bool),
) -> Option<Rc<SrvConn>> {
    // A connection the server closed after its last response is not reused (HAProxy notices
    // the close on the idle connection): the request goes on a new one. A fresh HTTP/1 one,
    // the stream's or the pool's, is not checked for a replayable request (see `FRESH_MS`).
    let fresh = |c: &SrvConn, at: u64| {
        replayable
            && matches!(c, SrvConn::H1(_))
            && crate::clock::coarse_ms().saturating_sub(at) < FRESH_MS
    };
    let own = own
        .take()
        .filter(|k| fresh(&k.conn, k.at) || k.conn.idle_usable());
    if let Some(k) = own {
        if Arc::ptr_eq(&k.srv, srv) {
            let conn = k.conn;
            match conn.link() {
                None => return Some(conn),
                // The next request is a new stream on the same h2 connection.
                Some(l) if l.has_room(srv.cfg.opts.max_reuse) => {
                    return Some(SrvConn::h2(Rc::clone(l)));
                }
                Some(_) => {}
            }
        } else if k.shareable() {
            // A connection that began with this client's PROXY header is never shared.
            give_back(&k.srv, k.conn, k.at);
        }
    }
    // `safe`: a session's first request may join an h2 connection other streams are using,
    // never one gone idle (HAProxy's available list, not its idle ones).
    let busy_only = first && reuse == HttpReuse::Safe;
    if shares_h2(srv, reuse)
        && let Some(l) = pool::take_link(&**srv, srv.cfg.opts.max_reuse, busy_only)
    {
        return Some(SrvConn::h2(l));
    }
    let may_share = match reuse {
        _ if srv.cfg.opts.send_proxy.enabled() => false,
        HttpReuse::Never => false,
        HttpReuse::Safe => !first,
        HttpReuse::Always | HttpReuse::Aggressive => true,
    };
    // Not taken at all unless it may be used: a take-then-drop would close it. One idled less
    // than `FRESH_MS` ago goes unchecked, as the stream's own.
    may_share.then(|| pool::take(&**srv, fresh)).flatten()
}
