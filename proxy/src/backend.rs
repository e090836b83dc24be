//! Server choice and connection establishment for a backend: LB pick, connect with `timeout
//! connect`, `retries` and `option redispatch` with HAProxy's semantics (compat §7).

pub mod h2;
mod h2conv;
mod h2io;
pub mod h2stream;
pub mod srvconn;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::clock;

use crate::engine::io::{Backend as IoBackend, Stream};
use crate::model::{Counters, Proxy, Server};

/// HAProxy's default `timeout connect` is infinite; a connect still ends when the kernel gives up.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(1);

/// How the server connection was obtained, for logs (`%Tc`, `%rc`) and counters.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnectInfo {
    pub retries: u32,
    pub redispatched: bool,
    /// Time spent waiting for a server slot (`Tw`).
    pub queue: Duration,
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
    /// Every usable server was full (`maxconn`) for `timeout queue` (503, `sQ`).
    QueueTimeout,
    /// The server's sessions were shut down (`on-marked-down shutdown-sessions`) while this one
    /// was still connecting or waiting to retry (503, `DC`; `UC` for a backup's).
    Killed(u8),
}

impl ConnectError {
    /// Termination state (`%ts`) of a stream that failed this way.
    pub fn term(self) -> [u8; 2] {
        match self {
            ConnectError::NoServer | ConnectError::Refused => *b"SC",
            ConnectError::Timeout => *b"sC",
            ConnectError::QueueTimeout => *b"sQ",
            ConnectError::Killed(cause) => [cause, b'C'],
        }
    }
}

/// Takes a connection slot on `srv` if its `maxconn` allows it.
fn acquire(srv: &Server) -> bool {
    let max = Some(srv.maxconn.load(Ordering::Relaxed)).filter(|m| *m > 0);
    let prev = srv.cur_conns.fetch_add(1, Ordering::AcqRel);
    if max.is_some_and(|m| prev >= m) {
        srv.cur_conns.fetch_sub(1, Ordering::AcqRel);
        return false;
    }
    srv.counters.smax.update(prev + 1);
    true
}

/// Gives back the slot taken by [`take_server`] or a successful [`connect`], and wakes one stream
/// queued on the backend.
pub fn release(be: &Proxy, srv: &Server) {
    srv.cur_conns.fetch_sub(1, Ordering::AcqRel);
    if be.queued.load(Ordering::Acquire) > 0 {
        be.queue.notify_one();
    }
}

/// Picks a server and takes a slot on it; when every usable server is full, waits in the
/// backend's queue for `timeout queue` (default: `timeout connect`). Returns the time queued.
pub async fn take_server(
    be: &Proxy,
    key: Option<u32>,
    stuck: Option<Arc<Server>>,
) -> Result<(Arc<Server>, Duration), ConnectError> {
    take_server_forced(be, key, stuck, false).await
}

/// [`take_server`]; `force`: the stuck server is taken even stopped (a persistence cookie
/// already checked against `option persist` and `force-persist`).
pub async fn take_server_forced(
    be: &Proxy,
    key: Option<u32>,
    stuck: Option<Arc<Server>>,
    force: bool,
) -> Result<(Arc<Server>, Duration), ConnectError> {
    let start = clock::now();
    // A `stick match` (or persistence cookie) server goes first if running, even drained (as
    // HAProxy, which only passes over a stopped one), and if it has a slot.
    // `option persist` sends to a stopped one all the same.
    let persist = force || be.cfg.options.persist;
    if let Some(s) = stuck.filter(|s| persist || s.usable.load(Ordering::Acquire))
        && acquire(&s)
    {
        crate::model::sessions::note_server(be, &s);
        return Ok((s, Duration::ZERO));
    }
    let limit = be.cfg.timeouts.queue.or(be.cfg.timeouts.connect);
    let deadline = limit.map(|l| start + l);
    let mut queued = false;
    let out = loop {
        let notified = be.queue.notified();
        if let Some(s) = pick_server(be, key, None) {
            if acquire(&s) {
                break Ok((s, clock::since(start)));
            }
            continue;
        }
        let pool = be.pool();
        if !pool.lb.has_usable(&pool.view()) {
            break Err(ConnectError::NoServer);
        }
        if !queued {
            queued = true;
            let q = be.queued.fetch_add(1, Ordering::AcqRel) + 1;
            be.counters.qmax.update(q);
        }
        let woke = match deadline {
            Some(d) => tokio::time::timeout_at(d, notified).await.is_ok(),
            None => {
                notified.await;
                true
            }
        };
        if !woke {
            break Err(ConnectError::QueueTimeout);
        }
    };
    if queued {
        be.queued.fetch_sub(1, Ordering::AcqRel);
    }
    if let Ok((s, _)) = &out {
        crate::model::sessions::note_server(be, s);
    }
    out
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

/// `stick match` / `stick on`: the first server a matched entry names that is running (any,
/// stopped included, with `option persist` or `force`), as HAProxy's `process_sticking_rules`
/// assigns it (by `server_id`).
pub fn stuck_server(
    be: &Proxy,
    plan: &crate::ana::sticking::StickPlan,
    force: bool,
) -> Option<Arc<Server>> {
    let pool = be.pool();
    let persist = force || be.cfg.options.persist;
    plan.servers.iter().find_map(|id| {
        pool.servers
            .iter()
            .find(|s| s.id == *id && (persist || s.usable.load(Ordering::Acquire)))
            .cloned()
    })
}

/// Picks a usable server with the backend's algorithm; `key` is the stream's balancing key
/// ([`crate::lb::Lb::key`]). `exclude` is the server a redispatch moves away from (ignored when
/// it is the only usable one).
pub fn pick_server(
    be: &Proxy,
    key: Option<u32>,
    exclude: Option<&Arc<Server>>,
) -> Option<Arc<Server>> {
    let pool = be.pool();
    let ex = exclude.and_then(|x| pool.servers.iter().position(|s| Arc::ptr_eq(s, x)));
    let idx = pool
        .lb
        .pick_excluding(&be.lb_cursor, &pool.view(), key, ex)?;
    pool.servers.get(idx).cloned()
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
    let pool = be.pool();
    let active = pool
        .servers
        .iter()
        .filter(|s| !s.cfg.opts.backup && s.is_usable())
        .count();
    let hash_based = pool.lb.is_hash_based();
    matches || (active > 1 && !hash_based)
}

/// What a PROXY protocol header sent to a server tells of the client connection (HAProxy's
/// "remote" connection): its addresses (those an `accept-proxy` bind received, if so), its TLS
/// facts, and the header it arrived with.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientSide<'a> {
    pub addrs: Option<(SocketAddr, SocketAddr)>,
    pub tls: Option<&'a crate::tls::info::TlsInfo>,
    pub received: Option<&'a crate::proxy_proto::Header>,
    /// The stream's unique id (`proxy-v2-options unique-id`).
    pub unique_id: Option<&'a str>,
}

/// The header `server … send-proxy*` / `proxy-v2-options` writes first on a connection: v2
/// with a `send-proxy-v2*` keyword, else v1; empty when the server sends none. TLVs as HAProxy
/// 2.6 sends them: the client's ALPN always, the authority (the received one, else the SNI),
/// the unique id, the SSL TLV (TLS version, cipher), a CRC32C.
pub fn proxy_header(pp: &crate::config::model::SendProxy, c: &ClientSide<'_>) -> Vec<u8> {
    use crate::proxy_proto as ppr;
    let mut out = Vec::new();
    if !pp.enabled() {
        return out;
    }
    if !pp.v2 {
        ppr::encode_v1(c.addrs, &mut out);
        return out;
    }
    let sni = c.tls.and_then(|t| t.sni.as_deref()).map(str::as_bytes);
    let authority = c.received.and_then(|h| h.authority.as_deref()).or(sni);
    let ssl = pp.ssl.then(|| match c.tls {
        Some(t) => ppr::Ssl {
            client: ppr::CLIENT_SSL,
            version: Some(t.protocol.as_bytes().to_vec()),
            cipher: pp.ssl_cipher.then(|| t.cipher.as_bytes().to_vec()),
            ..ppr::Ssl::default()
        },
        None => ppr::Ssl::default(),
    });
    let tlvs = ppr::Tlvs {
        alpn: c.tls.and_then(|t| t.alpn.as_deref()).map(str::as_bytes),
        authority: authority.filter(|_| pp.authority),
        unique_id: c.unique_id.map(str::as_bytes).filter(|_| pp.unique_id),
        ssl: ssl.as_ref(),
        crc32c: pp.crc32c,
    };
    ppr::encode_v2(c.addrs, &tlvs, &mut out);
    out
}

/// Connects to a server of `be`, retrying per `retries`/`redispatch`.
/// `chosen` is a server the caller already took with [`take_server`] (picking twice would skew
/// the LB). On success the returned server holds a slot the caller gives back with [`release`];
/// on failure no slot is held. A server with `send-proxy*` gets its PROXY protocol header about
/// `client` right after the TCP connect (before TLS, before any byte of the stream); a failed
/// write is a failed attempt.
pub async fn connect(
    io: IoBackend,
    be: &Proxy,
    key: Option<u32>,
    chosen: Option<Arc<Server>>,
    client: &ClientSide<'_>,
) -> Result<Connected, Failed> {
    connect_retrying(io, be, key, chosen, client, true).await
}

/// [`connect`]; without `retry` (the client has closed and sent nothing) a failed attempt ends
/// it, its retry counted but not made and no connection error counted, as HAProxy abandons a
/// stream whose client is gone instead of retrying.
pub async fn connect_retrying(
    io: IoBackend,
    be: &Proxy,
    key: Option<u32>,
    chosen: Option<Arc<Server>>,
    client: &ClientSide<'_>,
    retry: bool,
) -> Result<Connected, Failed> {
    let start = clock::now();
    let mut info = ConnectInfo::default();
    let mut srv = match chosen {
        Some(s) => s,
        None => match take_server(be, key, None).await {
            Ok((s, q)) => {
                info.queue = q;
                s
            }
            Err(error) => {
                return Err(Failed {
                    server: None,
                    error,
                    info,
                });
            }
        },
    };
    Counters::add(&srv.counters.lbtot, 1);
    Counters::add(&be.counters.lbtot, 1);
    let timeout = be.cfg.timeouts.connect;
    loop {
        Counters::add(&srv.counters.connect, 1);
        Counters::add(&be.counters.connect, 1);
        // HAProxy counts a server session per connection attempt.
        srv.counters.session(crate::model::clock_ms());
        let addr = srv.addr();
        // HAProxy's shutdown-sessions also ends the streams still connecting to the server.
        let epoch = srv.kill_epoch();
        let known = srv.has_addr.load(Ordering::Acquire);
        let header = proxy_header(&srv.cfg.opts.send_proxy, client);
        let open = async {
            let s = match &srv.cfg.unix {
                Some(u) => Stream::connect_unix_server(io, u)?,
                None => Stream::connect(io, addr).await?,
            };
            if be.cfg.options.srvtcpka {
                s.set_keepalive();
            }
            if !header.is_empty() {
                s.write_all(header).await.0?;
            }
            Ok::<_, std::io::Error>(s)
        };
        let connect = async {
            if !known {
                // No address yet: HAProxy fails the connection attempt at once.
                return Err(ConnectError::Refused);
            }
            match timeout {
                Some(t) => match tokio::time::timeout(t, open).await {
                    Ok(r) => r.map_err(|_| ConnectError::Refused),
                    Err(_) => Err(ConnectError::Timeout),
                },
                None => open.await.map_err(|_| ConnectError::Refused),
            }
        };
        let attempt = tokio::select! {
            biased;
            _ = srv.killed(epoch) => Err(ConnectError::Killed(srv.kill_cause())),
            r = connect => r,
        };
        if let Err(error @ ConnectError::Killed(_)) = attempt {
            info.connect_time = clock::since(start);
            release(be, &srv);
            return Err(Failed {
                server: Some(srv),
                error,
                info,
            });
        }
        match attempt {
            Ok(stream) => {
                info.connect_time = clock::since(start);
                return Ok(Connected {
                    server: srv,
                    stream,
                    info,
                });
            }
            Err(error) => {
                if !retry {
                    info.retries += 1;
                    Counters::add(&srv.counters.retries, 1);
                    Counters::add(&be.counters.retries, 1);
                    info.connect_time = clock::since(start);
                    release(be, &srv);
                    return Err(Failed {
                        server: Some(srv),
                        error,
                        info,
                    });
                }
                if info.retries >= be.cfg.retries {
                    Counters::add(&srv.counters.errors_conn, 1);
                    Counters::add(&be.counters.errors_conn, 1);
                    info.connect_time = clock::since(start);
                    release(be, &srv);
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
                    pick_server(be, key, Some(&srv))
                } else {
                    None
                };
                if let Some(other) = other.filter(|o| !Arc::ptr_eq(o, &srv) && acquire(o)) {
                    release(be, &srv);
                    info.redispatched = true;
                    Counters::add(&srv.counters.redispatches, 1);
                    Counters::add(&be.counters.redispatches, 1);
                    Counters::add(&other.counters.lbtot, 1);
                    Counters::add(&be.counters.lbtot, 1);
                    srv = other;
                    continue;
                }
                if error == ConnectError::Refused {
                    let delay = timeout.map_or(MAX_RETRY_DELAY, |t| t.min(MAX_RETRY_DELAY));
                    let epoch = srv.kill_epoch();
                    let killed = tokio::select! {
                        biased;
                        _ = srv.killed(epoch) => true,
                        _ = tokio::time::sleep(delay) => false,
                    };
                    if killed {
                        info.connect_time = clock::since(start);
                        release(be, &srv);
                        return Err(Failed {
                            error: ConnectError::Killed(srv.kill_cause()),
                            server: Some(srv),
                            info,
                        });
                    }
                }
            }
        }
    }
}
