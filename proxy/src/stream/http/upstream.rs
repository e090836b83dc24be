//! The server side of a transaction behind [`Upstream`]: the server the balancer (or a stick
//! rule) picks, then the stream's own connection to it, an idle pooled one (`http-reuse`), or a
//! new one (queue, retries, redispatch, `send-proxy`, TLS to the server). [`Servers`] is the real
//! one; the transaction's unit tests script their own.

use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;

use crate::ana::sample::SampleCtx;
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
}

impl Facts {
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
}

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

    /// Keeps `conn`, reusable, for the stream's next request.
    fn keep(&mut self, srv: Arc<Server>, conn: Rc<Self::Conn>);

    /// The stream ends: the connection it kept goes to the worker's pool unless `reuse` is
    /// `never` or the process is `stopping`.
    fn end(&mut self, reuse: HttpReuse, stopping: bool);
}

/// The real servers: the backend's balancer, the worker's idle pool, `backend::connect`.
#[derive(Default)]
pub struct Servers {
    /// The server connection the stream used last (kept for its next request).
    own: Option<(Arc<Server>, Rc<Conn>)>,
}

impl Upstream for Servers {
    type Conn = Conn;

    async fn conn(
        &mut self,
        side: Side<'_>,
        be: &Proxy,
        first: bool,
        key: Option<u32>,
        log: &mut SessionLog,
    ) -> ServerConn<Conn> {
        let model = &side.shared.model;
        let src = side.facts.peer.map(|p| p.ip());
        // Without stick rules, neither the clock nor the tables are read.
        let sticky = !be.cfg.stick_rules.is_empty();
        let now = if sticky { model.now_ms() } else { 0 };
        let stuck = sticky
            .then(|| backend::stuck_server(&model.stick, be, src, now))
            .flatten();
        let (srv, queued) = backend::take_server(be, key, stuck)
            .await
            .map_err(|e| (e, None))?;
        log.queue = Some(queued);
        if let Some(conn) = idle_conn(&mut self.own, be.cfg.http_reuse, &srv, first) {
            if sticky {
                backend::stick_store(&model.stick, be, src, &srv, now);
            }
            Counters::add(&srv.counters.lbtot, 1);
            Counters::add(&be.counters.lbtot, 1);
            srv.counters.session(model.now_ms());
            return Ok((srv, conn, true));
        }
        connect_new(side, be, key, srv, log, (src, sticky.then_some(now))).await
    }

    fn keep(&mut self, srv: Arc<Server>, conn: Rc<Conn>) {
        self.own = Some((srv, conn));
    }

    fn end(&mut self, reuse: HttpReuse, stopping: bool) {
        if let Some((srv, conn)) = self.own.take()
            // Stopping: nothing will take it again (the worker has emptied its pools).
            && reuse != HttpReuse::Never
            && !stopping
            && !srv.cfg.opts.send_proxy.enabled()
        {
            pool::put(&*srv, conn);
        }
    }
}

/// A new connection (`backend::connect`: queue, retries, redispatch from `picked`), then TLS if
/// the server asks for it. `stick.1`: when the stick rules' clock reading, if they apply.
async fn connect_new(
    side: Side<'_>,
    be: &Proxy,
    key: Option<u32>,
    picked: Arc<Server>,
    log: &mut SessionLog,
    stick: (Option<IpAddr>, Option<u64>),
) -> ServerConn<Conn> {
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
            if let (src, Some(now)) = stick {
                backend::stick_store(&side.shared.model.stick, be, src, &c.server, now);
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
            Ok((c.server, Rc::new(conn), false))
        }
        Err(f) => {
            log.server = f.server.as_ref().map(|s| s.name.clone());
            log.retries = f.info.retries;
            log.redispatched = f.info.redispatched;
            Err((f.error, f.server))
        }
    }
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
    own: &mut Option<(Arc<Server>, Rc<Conn>)>,
    reuse: HttpReuse,
    srv: &Arc<Server>,
    first: bool,
) -> Option<Rc<Conn>> {
    // A connection the server closed after its last response is not reused (HAProxy notices
    // the close on the idle connection): the request goes on a new one.
    if let Some((own_srv, conn)) = own.take().filter(|(_, c)| c.idle_usable()) {
        if Arc::ptr_eq(&own_srv, srv) {
            return Some(conn);
        }
        // A connection that began with this client's PROXY header is never shared.
        if reuse != HttpReuse::Never && !own_srv.cfg.opts.send_proxy.enabled() {
            pool::put(&*own_srv, conn);
        }
    }
    let may_share = match reuse {
        _ if srv.cfg.opts.send_proxy.enabled() => false,
        HttpReuse::Never => false,
        HttpReuse::Safe => !first,
        HttpReuse::Always | HttpReuse::Aggressive => true,
    };
    // Not taken at all unless it may be used: a take-then-drop would close it.
    may_share.then(|| pool::take(&**srv)).flatten()
}
