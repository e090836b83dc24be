//! Starting and stopping the workers: listeners per worker, accept loops gated by `maxconn`, and
//! signal handling on the main thread (SIGINT/SIGTERM: hard stop; SIGUSR1: soft stop, wait for
//! sessions up to `hard-stop-after`).

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::conn::Conn;
use super::handover::{self, Meta, Received, Slot};
use super::io::{Accepted, Listener, spawn};
use super::listen;
use super::service::{Origin, Service, SessionGuard};
use crate::config::model::BindAddr;
use crate::model::{Model, Proxy};

pub use super::shared::Shared;

/// One worker's listening sockets: (proxy index, socket, unix, bind index).
type WorkerListeners = Vec<(usize, socket2::Socket, bool, usize)>;

/// Creates every listener for every worker. Errors are HAProxy's start-up alerts.
pub fn bind_all(model: &Model, workers: usize) -> Result<Vec<WorkerListeners>, String> {
    bind_all_adopting(model, workers, Vec::new()).map(|(l, _)| l)
}

/// The listeners of one bind line as the handover registry describes them.
fn meta(p: &Proxy, b: &crate::config::model::Bind, worker: usize, sock: &socket2::Socket) -> Meta {
    let addr = sock.local_addr().ok();
    let family = match addr.as_ref().map(|a| a.domain()) {
        Some(socket2::Domain::IPV4) => "ipv4",
        Some(socket2::Domain::IPV6) => "ipv6",
        _ => "unix",
    };
    Meta {
        worker: worker as u32,
        family: family.into(),
        addr: listen::describe(&b.addr),
        frontend: p.name.clone(),
        bind: b.loc.to_string(),
    }
}

/// [`bind_all`], reusing the sockets received from an old process (`-x`) where a bind line
/// matches their address; the received sockets nothing matches are closed. Also returns what a
/// later `_getsocks` hands over: every worker's socket of every bind line (a unix one once).
pub fn bind_all_adopting(
    model: &Model,
    workers: usize,
    received: Vec<Received>,
) -> Result<(Vec<WorkerListeners>, handover::Exported), String> {
    let mut out: Vec<WorkerListeners> = (0..workers).map(|_| Vec::new()).collect();
    let mut registry: handover::Exported = Vec::new();
    let fronts: Vec<(&Arc<Proxy>, &crate::config::model::Bind, usize)> = model
        .proxies
        .iter()
        .filter(|p| p.is_frontend() && !p.cfg.disabled)
        .flat_map(|p| p.cfg.binds.iter().enumerate().map(move |(i, b)| (p, b, i)))
        .collect();
    // Received sockets: usable ones become offers, the rest are closed here.
    let mut offered: Vec<Option<OwnedFd>> = Vec::new();
    let mut offers = Vec::new();
    for r in received {
        // A socket bound in a namespace or to an interface matches no bind line of ours.
        let plain = r.record.namespace.is_empty() && r.record.iface.is_empty();
        if let Some(key) = handover::offer_key(&r.fd).filter(|_| plain) {
            offers.push(handover::Offer {
                key,
                worker: r.record.meta.as_ref().map(|m| m.worker),
                frontend: r.record.meta.map(|m| m.frontend),
            });
            offered.push(Some(r.fd));
        }
    }
    let wants: Vec<handover::Want> = fronts
        .iter()
        .map(|(p, b, _)| handover::Want {
            key: match &b.addr {
                BindAddr::Inet(a) => handover::Key::Inet(*a),
                BindAddr::Unix(path) => handover::Key::Unix(path.clone()),
                // Abstract sockets are not handed over (nor by HAProxy): bound anew.
                BindAddr::Abns(_) => handover::Key::Unix(String::new()),
                // Inherited descriptors are the caller's business, never matched.
                BindAddr::Fd(_) => handover::Key::Unix(String::new()),
            },
            frontend: p.name.clone(),
        })
        .collect();
    let (plans, _unused) = handover::assign(&wants, &offers, workers);
    for ((p, b, bidx), plan) in fronts.iter().zip(plans) {
        let bidx = *bidx;
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
        let unix_bind = matches!(b.addr, BindAddr::Unix(_) | BindAddr::Abns(_));
        let adopted = |i: usize, offered: &mut Vec<Option<OwnedFd>>, dup: bool| {
            let fd = offered.get_mut(i).and_then(|o| match dup {
                true => o.as_ref().and_then(|f| f.try_clone().ok()),
                false => o.take(),
            });
            let sock = socket2::Socket::from(
                fd.ok_or_else(|| fail(std::io::Error::from(std::io::ErrorKind::NotFound)))?,
            );
            // The new backlog applies to the socket (listen again only resizes the queue).
            sock.listen(backlog).map_err(fail)?;
            sock.set_nonblocking(true).map_err(fail)?;
            Ok::<_, String>(sock)
        };
        let any_adopted = plan.slots.iter().any(|s| *s != Slot::Bind);
        if any_adopted || !plan.extra.is_empty() {
            // Dups read the offer, so take the adopted ones after them.
            let mut socks: Vec<Option<socket2::Socket>> = Vec::new();
            for slot in &plan.slots {
                socks.push(match slot {
                    Slot::Dup(i) => Some(adopted(*i, &mut offered, true)?),
                    _ => None,
                });
            }
            for (w, slot) in plan.slots.iter().enumerate() {
                let sock = match slot {
                    Slot::Adopt(i) => adopted(*i, &mut offered, false)?,
                    Slot::Dup(_) => match socks.get_mut(w).and_then(Option::take) {
                        Some(s) => s,
                        None => continue,
                    },
                    Slot::Bind => match &b.addr {
                        BindAddr::Inet(a) => listen::inet(*a, backlog).map_err(fail)?,
                        _ => continue,
                    },
                };
                if !(unix_bind && w > 0) {
                    registry.push((dup_owned(&sock).map_err(fail)?, meta(p, b, w, &sock)));
                }
                out[w].push((p.index, sock, unix_bind, bidx));
            }
            for (w, i) in plan.extra {
                let sock = adopted(i, &mut offered, false)?;
                registry.push((dup_owned(&sock).map_err(fail)?, meta(p, b, w, &sock)));
                out[w].push((p.index, sock, unix_bind, bidx));
            }
            continue;
        }
        match &b.addr {
            BindAddr::Inet(a) => {
                for (w, l) in out.iter_mut().enumerate() {
                    let sock = listen::inet(*a, backlog).map_err(fail)?;
                    registry.push((dup_owned(&sock).map_err(fail)?, meta(p, b, w, &sock)));
                    l.push((p.index, sock, false, bidx));
                }
            }
            BindAddr::Unix(_) | BindAddr::Abns(_) => {
                let s = match &b.addr {
                    BindAddr::Abns(name) => listen::abns(name, backlog),
                    BindAddr::Unix(path) => listen::unix(path, backlog, None),
                    _ => Err(std::io::ErrorKind::Unsupported.into()),
                }
                .map_err(fail)?;
                registry.push((dup_owned(&s).map_err(fail)?, meta(p, b, 0, &s)));
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
                registry.push((dup_owned(&s).map_err(fail)?, meta(p, b, 0, &s)));
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
    // What is left of the received sockets (addresses gone from the configuration) closes here.
    drop(offered);
    Ok((out, registry))
}

fn dup_owned(s: &socket2::Socket) -> std::io::Result<OwnedFd> {
    super::io::dup_socket(s.as_raw_fd()).map(OwnedFd::from)
}

fn strip_os_error(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// Runs the workers until a stop signal. Returns when every worker has ended.
pub fn run<S: Service>(
    shared: Arc<Shared>,
    service: Arc<S>,
    listeners: Vec<WorkerListeners>,
) -> Result<(), String> {
    run_with(shared, service, listeners, || {})
}

/// [`run`], calling `started` once every worker thread runs (`-sf`/`-st` then signal the old
/// process: the sockets are listening since they were bound, and now accepted from).
pub fn run_with<S: Service>(
    shared: Arc<Shared>,
    service: Arc<S>,
    listeners: Vec<WorkerListeners>,
    started: impl FnOnce(),
) -> Result<(), String> {
    let fds: Vec<RawFd> = listeners
        .iter()
        .flatten()
        .map(|(_, s, _, _)| s.as_raw_fd())
        .collect();
    let mut threads = Vec::new();
    for (i, ls) in listeners.into_iter().enumerate() {
        let sh = Arc::clone(&shared);
        let svc = Arc::clone(&service);
        let t = std::thread::Builder::new()
            .name(format!("worker-{i}"))
            .spawn(move || worker_main(sh, svc, ls))
            .map_err(|e| format!("cannot start worker thread: {e}"))?;
        threads.push(t);
    }
    started();
    let soft = wait_for_stop_signal();
    shared.stopping.store(true, Ordering::SeqCst);
    let _ = shared.stop_tx.send(true);
    // Listeners handed over are shared with the new process: a shutdown would stop its accepts
    // too, so they are only closed (the accept loops drop theirs, cancellable as they are).
    if !shared.handover.exported.load(Ordering::SeqCst) {
        for fd in &fds {
            super::io::stop_listening(*fd);
        }
    }
    shared.handover.close_all();
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
    // A soft stop also waits for the stick tables to reach the next process (peers).
    while std::time::Instant::now() < deadline
        && (threads.iter().any(|t| !t.is_finished()) || (soft && crate::peers::handover_pending()))
    {
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

fn worker_main<S: Service>(shared: Arc<Shared>, service: Arc<S>, listeners: WorkerListeners) {
    // This thread's Lua state, before the first connection (not Send: one per worker thread).
    crate::lua::warm();
    // Sessions parked between requests resume when the process stops.
    super::readiness::watch_stop(shared.stop_tx.subscribe());
    let io = shared.io;
    let sh = Arc::clone(&shared);
    let res = super::io::block_on(io, async move {
        let mut loops = Vec::new();
        // Listeners that may be handed over must stop being accepted from without a shutdown.
        let handover = sh.handover.exportable.load(Ordering::SeqCst);
        for (pidx, sock, unix, bidx) in listeners {
            let fe = Arc::clone(&sh.model.proxies[pidx]);
            let tls = sh
                .tls
                .get(pidx)
                .and_then(|b| b.get(bidx))
                .cloned()
                .flatten();
            let l = match handover {
                true => Listener::from_socket_cancellable(io, sock, unix),
                false => Listener::from_socket(io, sock, unix),
            };
            match l {
                Ok(l) => loops.push(spawn(accept_loop(
                    Arc::clone(&sh),
                    Arc::clone(&service),
                    fe,
                    l,
                    (tls, bidx),
                ))),
                Err(e) => tracing::error!("proxy {}: cannot adopt listener: {e}", pidx),
            }
        }
        let purge = spawn(async {
            loop {
                tokio::time::sleep(super::pool::PURGE_DELAY).await;
                super::pool::purge();
                super::boxpool::purge();
            }
        });
        for l in loops {
            let _ = l.await;
        }
        purge.abort();
        super::pool::clear();
        // Soft stop: let this worker's sessions finish; the main thread enforces hard-stop-after.
        while sh.sessions.load(Ordering::Acquire) > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    if let Err(e) = res {
        tracing::error!("worker runtime failed: {e}");
    }
}

/// Takes the frontend's and the process' `maxconn` slots if both are free now.
fn take_slots(shared: &Shared, fe: &Proxy) -> bool {
    if !fe.feconn.try_take() {
        return false;
    }
    if !shared.model.actconn.try_take() {
        fe.feconn.leave();
        return false;
    }
    true
}

/// An established connection (PROXY header read, TLS handshake done) becomes a session: the
/// `tcp-request session` rules (`Service::establish`), the session counted, then served.
/// `embryonic`: the accept date of a connection that waited for a header or a handshake; a
/// refusal then logs it as HAProxy's `session_kill_embryonic` does, with no error (`Success`):
/// a null connection for `option dontlognull`.
fn begin<S: Service>(
    svc: &S,
    conn: Conn,
    origin: Origin,
    mut admitted: S::Admitted,
    guard: SessionGuard,
    embryonic: Option<std::time::SystemTime>,
) {
    let (sh, fe) = (Arc::clone(&guard.shared), Arc::clone(&guard.fe));
    if !svc.establish(&sh, &fe, &conn, &origin, &mut admitted) {
        if let Some(accept_date) = embryonic {
            let name = listener_name(&fe, origin.bind);
            sh.log
                .embryonic(&fe, origin.peer, accept_date, &name, "Success", true);
        }
        return;
    }
    // A session counts once established, as HAProxy's `session_count_new`.
    let now = sh.model.now_ms();
    for c in [&fe.fe_counters, &sh.model.totals] {
        c.session(now);
    }
    svc.serve(sh, fe, conn, origin, admitted, guard);
}

/// A listener's accept loop; `(tls, bidx)`: the settings of its `bind … ssl` line, if any, and
/// the line's index in the frontend.
async fn accept_loop<S: Service>(
    shared: Arc<Shared>,
    service: Arc<S>,
    fe: Arc<Proxy>,
    listener: Listener,
    (tls, bidx): (Option<Arc<rustls::ServerConfig>>, usize),
) {
    let mut stop = shared.stop_tx.subscribe();
    // The process' stop and `shutdown frontend`, each watched by one future for the loop's
    // life: made per accept, they would register with the stop channel and the gate (a lock
    // each) for every connection. Each ends the loop when it resolves, never polled again.
    let process_stop = stop.changed();
    let mut process_stop = std::pin::pin!(process_stop);
    let fe_stop = fe.feconn.wait_stopped();
    let mut fe_stop = std::pin::pin!(fe_stop);
    // Whether the last accept failed for want of descriptors or memory (logged once).
    let mut limited = false;
    let fixed_local = listener.fixed_local();
    loop {
        if shared.stopping.load(Ordering::Acquire) {
            break;
        }
        // maxconn: stop accepting (the kernel queues) while the frontend or the process is full.
        let room = async {
            fe.feconn.wait_room().await;
            shared.model.actconn.wait_room().await;
        };
        // The usual outcome first: a stop future polled while it waits takes its channel's
        // lock each time (the flags above catch a stop whichever way this select goes).
        tokio::select! {
            biased;
            _ = room => {}
            _ = &mut process_stop => break,
        }
        // `shutdown frontend`: the socket stops listening (shut down, as other descriptors of
        // it may be kept for a reload's handover; that also wakes a pending io_uring accept).
        // SAFETY: shutdown on the listener's own descriptor, open while `listener` lives.
        let stop_listening = || unsafe { libc::shutdown(listener.raw_fd(), libc::SHUT_RD) };
        if fe.feconn.is_stopped() {
            stop_listening();
            break;
        }
        let accepted = if listener.cancellable() {
            tokio::select! {
                biased;
                r = listener.accept(shared.io) => r,
                _ = &mut process_stop => break,
                _ = &mut fe_stop => {
                    stop_listening();
                    break;
                }
            }
        } else {
            let accept = listener.accept(shared.io);
            let mut accept = std::pin::pin!(accept);
            tokio::select! {
                biased;
                _ = &mut fe_stop => {
                    stop_listening();
                    let _ = accept.await;
                    break;
                }
                r = &mut accept => r,
            }
        };
        match accepted {
            Ok(mut acc) => {
                limited = false;
                acc.local = fixed_local.or_else(|| acc.stream.local_addr());
                // `set rate-limit`: an accepted connection waits for its turn (checked after
                // the accept, so that workers blocked in accept cannot pass the limit).
                let m = &shared.model;
                m.rate_limits.wait(&m.totals, || m.now_ms()).await;
                let now = shared.model.now_ms();
                for c in [&fe.fe_counters, &shared.model.totals] {
                    c.connection(now);
                }
                // Refused at accept (`tcp-request connection reject`): counted in `dcon`,
                // never a session, not logged, closed with a reset (as HAProxy).
                if fe.cfg.options.clitcpka {
                    acc.stream.set_keepalive();
                }
                let Some(admitted) = service.admit(&shared, &fe, &acc, now) else {
                    fe.fe_counters.denied_conn.fetch_add(1, Ordering::Relaxed);
                    acc.stream.reset_on_close();
                    continue;
                };
                let proxied = fe.cfg.binds.get(bidx).is_some_and(|b| b.accept_proxy)
                    || service.expects_proxy(&admitted);
                let origin = Origin {
                    peer: acc.peer,
                    local: acc.local,
                    proxied: None,
                    bind: bidx,
                };
                // A plain connection whose slots are free (the usual case) becomes a session
                // here: its setup has nothing to wait for, and needs no task of its own.
                if tls.is_none() && !proxied && take_slots(&shared, &fe) {
                    let guard = SessionGuard::taken(&shared, &fe);
                    begin(
                        &*service,
                        Conn::Plain(acc.stream),
                        origin,
                        admitted,
                        guard,
                        None,
                    );
                    continue;
                }
                let sh = Arc::clone(&shared);
                let fe2 = Arc::clone(&fe);
                let tls = tls.clone();
                let svc = Arc::clone(&service);
                // The accept task ends once the session starts in a task of its own
                // (`spawn_session`): an idle connection holds none of this task's state.
                spawn(async move {
                    // Another worker may have taken the last slot since we checked.
                    fe2.feconn.enter().await;
                    sh.model.actconn.enter().await;
                    let guard = SessionGuard::taken(&sh, &fe2);
                    let mut origin = origin;
                    let accept_date = std::time::SystemTime::now();
                    let handshake_first = proxied || tls.is_some();
                    // Each stage is boxed: a task holds its future inline, sized for the largest
                    // of them, and a connection that only waited for a slot would carry the TLS
                    // handshake's room.
                    if proxied {
                        match Box::pin(proxy_header(&sh, &fe2, &acc, bidx)).await {
                            Some(h) => origin = origin.proxied(h),
                            None => return,
                        }
                    }
                    let conn = match tls {
                        None => Conn::Plain(acc.stream),
                        Some(cfg) => match Box::pin(handshake(&sh, &fe2, acc, bidx, cfg)).await {
                            Some(c) => c,
                            None => return,
                        },
                    };
                    let embryonic = handshake_first.then_some(accept_date);
                    begin(&*svc, conn, origin, admitted, guard, embryonic);
                });
            }
            Err(e) => {
                if shared.stopping.load(Ordering::Acquire) {
                    break;
                }
                // Out of descriptors or memory: the listener pauses 100 ms and tries again, as
                // HAProxy's transient accept error; said once until an accept succeeds again.
                if !limited {
                    limited = true;
                    let threads = shared.model.cfg.global.nbthread.map_or_else(
                        || std::thread::available_parallelism().map_or(1, |n| n.get() as u32),
                        |n| n.max(1),
                    );
                    let maxsock = crate::admin::snapshot::reported_maxsock(&shared.model, threads);
                    match accept_limit_message(&fe.name, e.raw_os_error(), maxsock) {
                        Some(m) => shared.log.event(&fe, 0, &m, &m),
                        None => tracing::warn!("accept on {}: {e}", fe.name),
                    }
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// HAProxy's words (`sock_accept_conn`) for an accept that failed for want of resources; None
/// for other errors.
fn accept_limit_message(proxy: &str, errno: Option<i32>, maxsock: u32) -> Option<String> {
    let what = match errno? {
        libc::EMFILE => "process FD limit",
        libc::ENFILE => "system FD limit",
        libc::ENOBUFS | libc::ENOMEM => "system memory limit",
        _ => return None,
    };
    let advice = if what == "process FD limit" {
        "Please check 'ulimit-n' and restart."
    } else {
        "Please check system tunables."
    };
    Some(format!(
        "Proxy {proxy} reached {what} (maxsock={maxsock}). {advice}"
    ))
}

/// HAProxy names a listener by its `name`, else by its number in the frontend.
fn listener_name(fe: &Proxy, bidx: usize) -> String {
    fe.cfg
        .binds
        .get(bidx)
        .and_then(|b| b.name.clone())
        .unwrap_or_else(|| (bidx + 1).to_string())
}

/// The PROXY protocol header an `accept-proxy` bind expects before anything else (before TLS),
/// bounded by `timeout client`. It is peeked at and only its own bytes are taken from the
/// socket. A failure is logged as HAProxy logs it (a connection that sent nothing is "null" for
/// `option dontlognull`) and ends the connection silently.
async fn proxy_header(
    shared: &Shared,
    fe: &Proxy,
    acc: &Accepted,
    bidx: usize,
) -> Option<crate::proxy_proto::Header> {
    use crate::proxy_proto::{self as pp, Failure, Parsed};
    let accept_date = std::time::SystemTime::now();
    // Bytes seen so far: a timeout after some is a truncated header, as HAProxy says.
    let seen = std::cell::Cell::new(0usize);
    let read = async {
        let peeker = super::io::Peeker::new(&acc.stream).map_err(|_| (Failure::Aborted, 0))?;
        // Room for a v1 line and the common v2 headers; a longer v2 header grows it.
        let mut buf = vec![0u8; 256];
        let aborted = |n: usize| move |_| (Failure::Aborted, n);
        let mut n = peeker.try_peek(&mut buf).map_err(aborted(0))?;
        let mut closed = false;
        loop {
            seen.set(n);
            match pp::parse(&buf[..n]) {
                // HAProxy 2.6 calls fewer than 16 bytes that are no header a truncated one.
                Err(pp::Error::NotHeader) if n < 16 => {
                    return Err((Failure::Closed { truncated: true }, n));
                }
                Err(e) => return Err((Failure::Parse(e), n)),
                Ok(Parsed::Done(h, used)) => {
                    peeker.consume(used).map_err(aborted(n))?;
                    return Ok(*h);
                }
                Ok(Parsed::NeedMore) => {}
            }
            let want = pp::wanted(&buf[..n]);
            if want > buf.len() {
                let full = n == buf.len();
                buf.resize(want, 0);
                if full {
                    n = peeker.try_peek(&mut buf).map_err(aborted(n))?;
                    continue;
                }
            }
            if closed {
                return Err((Failure::Closed { truncated: n > 0 }, n));
            }
            let (m, c) = peeker.peek(&mut buf).await.map_err(aborted(n))?;
            (n, closed) = (m, c);
        }
    };
    let res = match fe.cfg.timeouts.client {
        Some(d) => tokio::time::timeout(d, read).await.unwrap_or_else(|_| {
            let n = seen.get();
            match n {
                0 => Err((Failure::Timeout, 0)),
                n => Err((Failure::Closed { truncated: true }, n)),
            }
        }),
        None => read.await,
    };
    match res {
        Ok(h) => Some(h),
        Err((f, n)) => {
            tracing::debug!("{}: PROXY protocol header: {}", fe.name, f.message());
            let null = n == 0;
            let name = listener_name(fe, bidx);
            shared
                .log
                .embryonic(fe, acc.peer, accept_date, &name, f.message(), null);
            None
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
            let listener = listener_name(fe, bidx);
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
