//! One `mode tcp` session: backend choice, server connect (retries, redispatch), relay, log line.

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use tokio::time::Instant;

use crate::backend;
use crate::engine::io::Accepted;
use crate::engine::worker::Shared;
use crate::log::SessionLog;
use crate::model::{Counters, Proxy, stats};

use super::relay::{RelayTimeouts, relay};

/// The backend a frontend sends a session to (`use_backend` conditions evaluated on what is
/// known of a TCP session: addresses).
pub fn route(
    shared: &Shared,
    fe: &Arc<Proxy>,
    src: Option<std::net::SocketAddr>,
    dst: Option<std::net::SocketAddr>,
) -> Option<Arc<Proxy>> {
    let zero = || std::net::SocketAddr::from(([0, 0, 0, 0], 0));
    let ctx = crate::http::sample::SampleCtx::new(
        src.unwrap_or_else(zero),
        dst.unwrap_or_else(zero),
        &fe.name,
    );
    let idx = crate::http::rules::route(&fe.rules, fe.index, fe.is_backend(), &ctx)?;
    shared.model.proxies.get(idx).cloned()
}

/// `portcullis-relay`: the userspace relay if the frontend or the backend asks for it, and the
/// splice's `max-unacked` (the backend's, else the frontend's, else the default).
fn relay_choice(fe: &Proxy, be: &Proxy) -> (bool, u64) {
    let (f, b) = (fe.cfg.relay, be.cfg.relay);
    let userspace = f.userspace || b.userspace || crate::kernel::loaded().is_none();
    let max = b
        .max_unacked
        .or(f.max_unacked)
        .unwrap_or(crate::kernel::DEFAULT_MAX_UNACKED);
    (userspace, max)
}

pub async fn run(shared: Arc<Shared>, fe: Arc<Proxy>, acc: Accepted) {
    let accept_at = std::time::SystemTime::now();
    let start = Instant::now();
    let client = Rc::new(acc.stream);
    let local = client.local_addr();
    let mut log = SessionLog::new(&fe, acc.peer, local, accept_at);
    log.actconn = shared.model.actconn.current();
    log.feconn = fe.feconn.current();
    shared.log.connect(&fe, &log);
    let Some(be) = route(&shared, &fe, acc.peer, local) else {
        log.term = *b"PR";
        log.total = start.elapsed();
        shared.log.session(&fe, &log);
        return;
    };
    log.backend = Some(be.name.clone());
    let n = be.beconn.fetch_add(1, Ordering::Relaxed) + 1;
    be.counters.smax.update(n);
    be.counters.session(shared.model.now_ms());
    let src = acc.peer.map(|p| p.ip());
    let connected = backend::connect(shared.io, &be, src, None).await;
    match connected {
        Err(f) => {
            log.server = f.server.as_ref().map(|s| s.name.clone());
            log.retries = f.info.retries;
            log.redispatched = f.info.redispatched;
            log.term = f.error.term();
            log.total = start.elapsed();
            be.beconn.fetch_sub(1, Ordering::Relaxed);
            // HAProxy releases the backend slot before logging.
            log.beconn = be.beconn.load(Ordering::Relaxed);
            shared.log.session(&fe, &log);
        }
        Ok(c) => {
            let srv = c.server;
            log.server = Some(srv.name.clone());
            log.retries = c.info.retries;
            log.redispatched = c.info.redispatched;
            log.connect = Some(c.info.connect_time);
            let t = RelayTimeouts {
                client: fe.cfg.timeouts.client,
                server: be.cfg.timeouts.server,
                tunnel: be.cfg.timeouts.tunnel,
                client_fin: fe.cfg.timeouts.client_fin,
                server_fin: be.cfg.timeouts.server_fin,
            };
            let epoch = srv.kill_epoch();
            let server = Rc::new(c.stream);
            let kill = srv.killed(epoch);
            let (userspace, max_unacked) = relay_choice(&fe, &be);
            let stats = if userspace {
                relay(client, server, Vec::new(), t, kill).await
            } else {
                match super::splice::relay(client.clone(), server.clone(), t, max_unacked, kill)
                    .await
                {
                    Ok(stats) => stats,
                    Err(kill) => relay(client, server, Vec::new(), t, kill).await,
                }
            };
            for c in [&fe.fe_counters, &be.counters, &srv.counters] {
                Counters::add(&c.bytes_in, stats.c2s);
                Counters::add(&c.bytes_out, stats.s2c);
            }
            log.bytes_in = stats.c2s;
            log.bytes_out = stats.s2c;
            log.term = match stats.end {
                crate::tcp::End::Killed => [srv.kill_cause(), b'D'],
                other => other.codes(),
            };
            // `option dontlognull`: nothing came from the client.
            log.null = stats.c2s == 0;
            log.total = start.elapsed();
            // TCP has no response time: HAProxy's rtime stays 0.
            let times = stats::Sample {
                queue: stats::ms(c.info.queue),
                connect: stats::ms(c.info.connect_time),
                response: 0,
                total: stats::ms(log.total),
            };
            be.counters.times(false, times);
            srv.counters.times(false, times);
            backend::release(&be, &srv);
            be.beconn.fetch_sub(1, Ordering::Relaxed);
            // HAProxy releases the backend and server slots before logging.
            log.beconn = be.beconn.load(Ordering::Relaxed);
            log.srvconn = srv.cur_conns.load(Ordering::Relaxed);
            shared.log.session(&fe, &log);
        }
    }
}
