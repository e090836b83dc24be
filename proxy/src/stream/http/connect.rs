//! The server connection of a transaction: the server the balancer (or a stick rule) picks, then
//! the stream's own connection to it, an idle pooled one (`http-reuse`), or a new one (queue,
//! retries, redispatch, `send-proxy`, TLS to the server).

use std::net::IpAddr;
use std::rc::Rc;
use std::sync::Arc;

use super::{Front, Session};
use crate::backend::{self, ConnectError};
use crate::config::model::HttpReuse;
use crate::engine::conn::Conn;
use crate::engine::io::Stream;
use crate::engine::pool;
use crate::http::head::RequestHead;
use crate::log::SessionLog;
use crate::model::{Counters, Proxy, Server};

/// A server connection for a transaction (and whether it was reused), or why there is none
/// (and the server that failed, if one was tried).
pub(super) type ServerConn =
    Result<(Arc<Server>, Rc<Conn>, bool), (ConnectError, Option<Arc<Server>>)>;

impl<F: Front> Session<F> {
    /// The request's balancing key for `be` (`balance hash` evaluates its expression here).
    pub(super) fn lb_key(&self, be: &Proxy, req: &RequestHead) -> Option<u32> {
        let pool = be.pool();
        let Some(expr) = pool.lb.hash_expr() else {
            return pool.lb.key(self.peer.map(|p| p.ip()), Some(req));
        };
        let mut ctx = self.sample_base();
        ctx.req = Some(req);
        ctx.backend = Some(&be.name);
        let v = expr.eval(&ctx)?;
        Some(pool.lb.key_of(&v.to_bytes()))
    }

    /// Gets a server connection for `be`: the session's own if the LB picked the same server,
    /// else an idle pooled one (per `http-reuse`), else a new one (with retries).
    pub(super) async fn server_conn(
        &mut self,
        be: &Proxy,
        first: bool,
        log: &mut SessionLog,
        key: Option<u32>,
    ) -> ServerConn {
        let src = self.peer.map(|p| p.ip());
        let now = self.shared.model.now_ms();
        let stuck = backend::stuck_server(&self.shared.model.stick, be, src, now);
        let (srv, queued) = backend::take_server(be, key, stuck)
            .await
            .map_err(|e| (e, None))?;
        log.queue = Some(queued);
        if let Some(conn) = idle_conn(&mut self.own, be.cfg.http_reuse, &srv, first) {
            backend::stick_store(&self.shared.model.stick, be, src, &srv, now);
            Counters::add(&srv.counters.lbtot, 1);
            Counters::add(&be.counters.lbtot, 1);
            srv.counters.session(self.shared.model.now_ms());
            return Ok((srv, conn, true));
        }
        self.connect_new(be, key, srv, log, (src, now)).await
    }

    /// A new connection (`backend::connect`: queue, retries, redispatch from `picked`), then
    /// TLS if the server asks for it.
    async fn connect_new(
        &mut self,
        be: &Proxy,
        key: Option<u32>,
        picked: Arc<Server>,
        log: &mut SessionLog,
        (src, now): (Option<IpAddr>, u64),
    ) -> ServerConn {
        let uid = log.unique_id.clone();
        let side = backend::ClientSide {
            addrs: self.peer.zip(self.local),
            tls: self.tls.as_deref(),
            received: self.proxied.as_deref(),
            unique_id: uid.as_deref(),
        };
        match backend::connect(self.shared.io, be, key, Some(picked), &side).await {
            Ok(c) => {
                backend::stick_store(&self.shared.model.stick, be, src, &c.server, now);
                log.retries = c.info.retries;
                log.redispatched = c.info.redispatched;
                log.connect = Some(c.info.connect_time);
                let conn = match c.server.tls.as_ref().filter(|t| t.traffic) {
                    None => Conn::Plain(c.stream),
                    Some(t) => match self.server_handshake(be, &c.server, t, c.stream).await {
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
        &self,
        be: &Proxy,
        srv: &Server,
        tls: &crate::tls::client::ServerTls,
        sock: Stream,
    ) -> Option<Conn> {
        let sni = tls
            .sni
            .as_ref()
            .and_then(|e| e.eval(&self.sample_base()).map(|v| v.to_str().into_owned()));
        let name = crate::tls::client::server_name(sni.as_deref(), srv.addr().ip());
        match crate::tls::stream::TlsStream::connect(
            sock,
            Arc::clone(&tls.config),
            name,
            be.cfg.timeouts.connect,
        )
        .await
        {
            Ok(t) => Some(Conn::Tls(Box::new(t))),
            Err(e) => {
                tracing::debug!("{}/{}: TLS handshake failed: {e}", be.name, srv.name);
                Counters::add(&srv.counters.errors_conn, 1);
                Counters::add(&be.counters.errors_conn, 1);
                None
            }
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
