//! Starting and stopping the workers: listeners per worker, accept loops gated by `maxconn`, and
//! signal handling on the main thread (SIGINT/SIGTERM: hard stop; SIGUSR1: soft stop, wait for
//! sessions up to `hard-stop-after`).

use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use tokio::sync::watch;

use super::io::{Backend as IoBackend, Listener, spawn};
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
}

/// One worker's listening sockets: (proxy index, socket).
type WorkerListeners = Vec<(usize, socket2::Socket, bool)>;

/// Creates every listener for every worker. Errors are HAProxy's start-up alerts.
pub fn bind_all(model: &Model, workers: usize) -> Result<Vec<WorkerListeners>, String> {
    let mut out: Vec<WorkerListeners> = (0..workers).map(|_| Vec::new()).collect();
    for p in model
        .proxies
        .iter()
        .filter(|p| p.is_frontend() && !p.cfg.disabled)
    {
        for b in &p.cfg.binds {
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
                        w.push((p.index, listen::inet(*a, backlog).map_err(fail)?, false));
                    }
                }
                BindAddr::Unix(path) => {
                    let s = listen::unix(path, backlog, None).map_err(fail)?;
                    for w in out.iter_mut() {
                        w.push((
                            p.index,
                            super::io::dup_socket(s.as_raw_fd()).map_err(fail)?,
                            true,
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
        .map(|(_, s, _)| s.as_raw_fd())
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
        for (pidx, sock, unix) in listeners {
            let fe = Arc::clone(&sh.model.proxies[pidx]);
            match Listener::from_socket(io, sock, unix) {
                Ok(l) => loops.push(spawn(accept_loop(Arc::clone(&sh), fe, l))),
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

async fn accept_loop(shared: Arc<Shared>, fe: Arc<Proxy>, listener: Listener) {
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
                        Mode::Http => crate::http::proxy::run(sh, fe2, acc).await,
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
