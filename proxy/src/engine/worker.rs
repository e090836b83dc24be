//! Starting and stopping the workers: listeners per worker, accept loops gated by `maxconn`, and
//! signal handling on the main thread (SIGINT/SIGTERM: hard stop; SIGUSR1: soft stop, wait for
//! sessions up to `hard-stop-after`).

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use super::conn::Conn;
use super::io::{Accepted, Backend as IoBackend, Listener, spawn};
use super::listen;
use crate::config::model::{BindAddr, Mode};
use crate::model::{Model, Proxy};

/// What every worker shares.
pub struct Shared {
    pub model: Arc<Model>,
    pub io: IoBackend,
    pub stopping: AtomicBool,
    /// Sessions alive across all workers (soft stop waits for 0).
    pub sessions: AtomicUsize,
    pub stop_tx: watch::Sender<bool>,
    pub log: crate::log::Logger,
    /// TLS settings of each `bind … ssl` line: `[proxy index][bind index]`.
    pub tls: Vec<Vec<Option<Arc<rustls::ServerConfig>>>>,
    /// The certificates behind `tls`, replaceable through the admin socket.
    pub certs: Arc<crate::tls::CertStore>,
}

/// One worker's listening sockets: (proxy index, socket, unix, bind index).
type WorkerListeners = Vec<(usize, socket2::Socket, bool, usize)>;

/// Creates every listener for every worker. Errors are HAProxy's start-up alerts.
pub fn bind_all(model: &Model, workers: usize) -> Result<Vec<WorkerListeners>, String> {
    let mut out: Vec<WorkerListeners> = (0..workers).map(|_| Vec::new()).collect();
    for p in model
        .proxies
        .iter()
        .filter(|p| p.is_frontend() && !p.cfg.disabled)
    {
        for (bidx, b) in p.cfg.binds.iter().enumerate() {
            let backlog = b
                .maxconn
                .or(p.cfg.maxconn)
                .map_or(listen::DEFAULT_BACKLOG, |m| m.min(65535) as i32);
            let fail = |e: std::io::Error| {
                format!(
                    "Starting {} {}: cannot bind socket ({}) [{}]",
                    if p.is_backend() { "proxy" } else { "frontend" },
                    p.name,
                    strip_os_error(&e),
                    listen::describe(&b.addr)
                )
            };
            match &b.addr {
                BindAddr::Inet(a) => {
                    for w in out.iter_mut() {
                        w.push((
                            p.index,
                            listen::inet(*a, backlog).map_err(fail)?,
                            false,
                            bidx,
                        ));
                    }
                }
                BindAddr::Unix(path) => {
                    let s = listen::unix(path, backlog, None).map_err(fail)?;
                    for w in out.iter_mut() {
                        w.push((
                            p.index,
                            super::io::dup_socket(s.as_raw_fd()).map_err(fail)?,
                            true,
                            bidx,
                        ));
                    }
                }
                BindAddr::Fd(n) => {
                    let s = listen::inherited(*n).map_err(fail)?;
                    let unix = s.local_addr().map(|a| a.is_unix()).unwrap_or(false);
                    for w in out.iter_mut() {
                        w.push((
                            p.index,
                            super::io::dup_socket(s.as_raw_fd()).map_err(fail)?,
                            unix,
                            bidx,
                        ));
                    }
                }
            }
        }
    }
    Ok(out)
}

fn strip_os_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Runs the workers until a stop signal. Returns when every worker has ended.
pub fn run(shared: Arc<Shared>, listeners: Vec<WorkerListeners>) -> Result<(), String> {
    let fds: Vec<RawFd> = listeners
        .iter()
        .flatten()
        .map(|(_, s, _, _)| s.as_raw_fd())
        .collect();
    let mut threads = Vec::new();
    for (i, ls) in listeners.into_iter().enumerate() {
        let sh = Arc::clone(&shared);
        let t = std::thread::Builder::new()
            .name(format!("worker-{i}"))
            .spawn(move || worker_main(sh, ls))
            .map_err(|e| format!("cannot start worker thread: {e}"))?;
        threads.push(t);
    }
    let soft = wait_for_stop_signal();
    shared.stopping.store(true, Ordering::SeqCst);
    let _ = shared.stop_tx.send(true);
    for fd in &fds {
        super::io::stop_listening(*fd);
    }
    let limit = if soft {
        shared
            .model
            .cfg
            .global
            .hard_stop_after
            .unwrap_or(Duration::from_secs(3600 * 24 * 365))
    } else {
        Duration::from_millis(500)
    };
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline && threads.iter().any(|t| !t.is_finished()) {
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// Blocks SIGINT/SIGTERM/SIGUSR1 in every thread (the workers inherit the mask) so that only
/// `wait_for_stop_signal` sees them. Call before starting any thread.
pub fn block_stop_signals() {
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGUSR1);
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
}

/// Waits for a stop signal; true for a soft stop (SIGUSR1).
fn wait_for_stop_signal() -> bool {
    use nix::sys::signal::{SigSet, Signal};
    let mut set = SigSet::empty();
    set.add(Signal::SIGINT);
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGUSR1);
    loop {
        match set.wait() {
            Ok(Signal::SIGUSR1) => return true,
            Ok(_) => return false,
            Err(_) => continue,
        }
    }
}

fn worker_main(shared: Arc<Shared>, listeners: WorkerListeners) {
    let io = shared.io;
    let sh = Arc::clone(&shared);
    let res = super::io::block_on(io, async move {
        let mut loops = Vec::new();
        for (pidx, sock, unix, bidx) in listeners {
            let fe = Arc::clone(&sh.model.proxies[pidx]);
            let tls = sh
                .tls
                .get(pidx)
                .and_then(|b| b.get(bidx))
                .cloned()
                .flatten();
            match Listener::from_socket(io, sock, unix) {
                Ok(l) => loops.push(spawn(accept_loop(Arc::clone(&sh), fe, l, tls, bidx))),
                Err(e) => tracing::error!("proxy {}: cannot adopt listener: {e}", pidx),
            }
        }
        for l in loops {
            let _ = l.await;
        }
        // Soft stop: let this worker's sessions finish; the main thread enforces hard-stop-after.
        while sh.sessions.load(Ordering::Acquire) > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    if let Err(e) = res {
        tracing::error!("worker runtime failed: {e}");
    }
}

/// Releases the maxconn slots of a session when it ends, however it ends.
pub struct SessionGuard {
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        self.fe.feconn.leave();
        self.shared.model.actconn.leave();
        self.shared.sessions.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn accept_loop(
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    listener: Listener,
    tls: Option<Arc<rustls::ServerConfig>>,
    bidx: usize,
) {
    let mut stop = shared.stop_tx.subscribe();
    loop {
        if shared.stopping.load(Ordering::Acquire) {
            break;
        }
        // maxconn: stop accepting (the kernel queues) while the frontend or the process is full.
        let room = async {
            fe.feconn.wait_room().await;
            shared.model.actconn.wait_room().await;
        };
        tokio::select! {
            _ = room => {}
            _ = stop.changed() => break,
        }
        match listener.accept(shared.io).await {
            Ok(acc) => {
                let now = shared.model.now_ms();
                for c in [&fe.fe_counters, &shared.model.totals] {
                    c.connection(now);
                }
                // `tcp-request connection reject`: counted in `dcon`, never a session, not
                // logged, closed with a reset (as HAProxy).
                if crate::tcp::session::connection_rejected(&fe, &acc) {
                    fe.fe_counters.denied_conn.fetch_add(1, Ordering::Relaxed);
                    acc.stream.reset_on_close();
                    continue;
                }
                for c in [&fe.fe_counters, &shared.model.totals] {
                    c.session(now);
                }
                let sh = Arc::clone(&shared);
                let fe2 = Arc::clone(&fe);
                let tls = tls.clone();
                spawn(async move {
                    // Another worker may have taken the last slot since we checked.
                    fe2.feconn.enter().await;
                    sh.model.actconn.enter().await;
                    fe2.fe_counters.smax.update(fe2.feconn.current());
                    sh.sessions.fetch_add(1, Ordering::AcqRel);
                    let _guard = SessionGuard {
                        shared: Arc::clone(&sh),
                        fe: Arc::clone(&fe2),
                    };
                    match fe2.cfg.mode {
                        Mode::Tcp => crate::tcp::session::run(sh, fe2, acc).await,
                        Mode::Http => {
                            let peer = acc.peer;
                            let conn = match tls {
                                None => Conn::Plain(acc.stream),
                                Some(cfg) => match handshake(&sh, &fe2, acc, bidx, cfg).await {
                                    Some(c) => c,
                                    None => return,
                                },
                            };
                            if conn.tls().and_then(|t| t.alpn.as_deref()) == Some("h2") {
                                crate::http::h2::serve(sh, fe2, conn, peer).await
                            } else {
                                crate::http::proxy::run(sh, fe2, conn, peer).await
                            }
                        }
                    }
                });
            }
            Err(e) => {
                if shared.stopping.load(Ordering::Acquire) {
                    break;
                }
                // EMFILE/ENFILE/ENOBUFS: back off instead of spinning.
                tracing::warn!("accept on {}: {e}", fe.name);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// The TLS handshake of an accepted connection, bounded by `timeout client` as HAProxy bounds
/// an embryonic session. A failure is logged as HAProxy logs it and ends the connection.
async fn handshake(
    shared: &Shared,
    fe: &Proxy,
    acc: Accepted,
    bidx: usize,
    cfg: Arc<rustls::ServerConfig>,
) -> Option<Conn> {
    let accept_date = std::time::SystemTime::now();
    match crate::tls::stream::TlsStream::accept(acc.stream, cfg, fe.cfg.timeouts.client).await {
        Ok(t) => Some(Conn::Tls(Box::new(t))),
        Err((e, received)) => {
            tracing::debug!("{}: TLS handshake failed: {e}", fe.name);
            // HAProxy names the listener by its `name`, else by its number in the frontend.
            let listener = fe
                .cfg
                .binds
                .get(bidx)
                .and_then(|b| b.name.clone())
                .unwrap_or_else(|| (bidx + 1).to_string());
            shared.log.embryonic(
                fe,
                acc.peer,
                accept_date,
                &listener,
                e.log_message(),
                !received,
            );
            None
        }
    }
}
