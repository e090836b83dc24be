//! Server choice and connection establishment for a backend: LB pick, connect with `timeout
//! connect`, `retries` and `option redispatch` with HAProxy's semantics (compat §7).

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine::io::{Backend as IoBackend, Stream};
use crate::model::{Counters, LiveView, Proxy, Server};

/// HAProxy's default `timeout connect` is infinite; a connect still ends when the kernel gives up.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(1);

/// How the server connection was obtained, for logs (`%Tc`, `%rc`) and counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnectInfo {
    pub retries: u32,
    pub redispatched: bool,
    /// Time from the first attempt to the established connection (`Tc`).
    pub connect_time: Duration,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectError {
    /// No usable server in the backend (503, `SC`, `<NOSRV>`).
    NoServer,
    /// The last attempt was refused or reset (503, `SC`).
    Refused,
    /// The last attempt timed out (503, `sC`).
    Timeout,
}

pub struct Connected {
    pub server: Arc<Server>,
    pub stream: Stream,
    pub info: ConnectInfo,
}

pub struct Failed {
    pub server: Option<Arc<Server>>,
    pub error: ConnectError,
    pub info: ConnectInfo,
}

/// Picks a usable server with the backend's algorithm. `exclude` is the server a redispatch moves
/// away from (ignored when it is the only usable one).
pub fn pick_server(
    be: &Proxy,
    src: Option<IpAddr>,
    exclude: Option<&Arc<Server>>,
) -> Option<Arc<Server>> {
    let view = LiveView(&be.servers);
    let ex = exclude.and_then(|x| be.servers.iter().position(|s| Arc::ptr_eq(s, x)));
    let idx = be.lb.load().pick_excluding(&be.lb_cursor, &view, src, ex)?;
    be.servers.get(idx).cloned()
}

/// Whether HAProxy's `stream_choose_redispatch` would move retry number `attempt` (1-based count
/// of retries done so far, the current one included) away from `srv`.
fn should_redispatch(be: &Proxy, srv: &Server, attempt: u32) -> bool {
    let Some(rd) = be.cfg.options.redispatch else {
        return false;
    };
    if !srv.is_usable() {
        return true;
    }
    let retries = be.cfg.retries as i64;
    let remaining = retries - attempt as i64;
    let interval = rd.interval as i64;
    let matches = if interval > 0 {
        retries % interval == remaining % interval
    } else if interval < 0 {
        let m = retries + 1 + interval;
        m > 0 && retries % m == remaining % m
    } else {
        false
    };
    let active = be
        .servers
        .iter()
        .filter(|s| !s.cfg.opts.backup && s.is_usable())
        .count();
    let hash_based = be.lb.load().is_hash_based();
    matches || (active > 1 && !hash_based)
}

/// Connects to a server of `be`, retrying per `retries`/`redispatch`.
/// `chosen` is a server the caller already picked with the LB (picking twice would skew it).
pub async fn connect(
    io: IoBackend,
    be: &Proxy,
    src: Option<IpAddr>,
    chosen: Option<Arc<Server>>,
) -> Result<Connected, Failed> {
    let start = Instant::now();
    let mut info = ConnectInfo::default();
    let Some(mut srv) = chosen.or_else(|| pick_server(be, src, None)) else {
        return Err(Failed {
            server: None,
            error: ConnectError::NoServer,
            info,
        });
    };
    Counters::add(&srv.counters.lbtot, 1);
    let timeout = be.cfg.timeouts.connect;
    loop {
        Counters::add(&srv.counters.connect, 1);
        Counters::add(&be.counters.connect, 1);
        let addr = srv.addr();
        let attempt = match timeout {
            Some(t) => match tokio::time::timeout(t, Stream::connect(io, addr)).await {
                Ok(r) => r.map_err(|_| ConnectError::Refused),
                Err(_) => Err(ConnectError::Timeout),
            },
            None => Stream::connect(io, addr)
                .await
                .map_err(|_| ConnectError::Refused),
        };
        match attempt {
            Ok(stream) => {
                info.connect_time = start.elapsed();
                return Ok(Connected {
                    server: srv,
                    stream,
                    info,
                });
            }
            Err(error) => {
                if info.retries >= be.cfg.retries {
                    Counters::add(&srv.counters.errors_conn, 1);
                    Counters::add(&be.counters.errors_conn, 1);
                    info.connect_time = start.elapsed();
                    return Err(Failed {
                        server: Some(srv),
                        error,
                        info,
                    });
                }
                info.retries += 1;
                Counters::add(&srv.counters.retries, 1);
                Counters::add(&be.counters.retries, 1);
                let other = if should_redispatch(be, &srv, info.retries) {
                    pick_server(be, src, Some(&srv))
                } else {
                    None
                };
                if let Some(other) = other.filter(|o| !Arc::ptr_eq(o, &srv)) {
                    info.redispatched = true;
                    Counters::add(&srv.counters.redispatches, 1);
                    Counters::add(&be.counters.redispatches, 1);
                    Counters::add(&other.counters.lbtot, 1);
                    srv = other;
                    continue;
                }
                if error == ConnectError::Refused {
                    let delay = timeout.map_or(MAX_RETRY_DELAY, |t| t.min(MAX_RETRY_DELAY));
                    tokio::time::sleep(delay).await;
                }
            }
        }
    }
}
