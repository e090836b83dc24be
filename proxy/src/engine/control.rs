//! The control thread: health checks (one task per checked server) and, with the admin-socket
//! slice, the runtime API. It runs a plain tokio (epoll) runtime of its own so a slow check or
//! client never touches a worker; what it changes reaches the workers through the model's
//! atomics, the LB table swap and the servers' kill epochs.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::check::fsm::{self, LogCtx, OpState, Transition};
use crate::check::probe;
use crate::model::{Oper, Proxy, Server};

use super::Shared;

/// Starts the control thread; it ends when the process stops.
pub fn spawn<S: super::Service>(
    shared: Arc<Shared>,
    admin: Vec<crate::admin::AdminListener>,
    threads: usize,
    service: Arc<S>,
) -> std::io::Result<std::thread::JoinHandle<()>> {
    // The background tasks bind their sockets as they are created (the peers listeners): the
    // caller waits for that before it lets an old process go.
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<()>();
    let h = std::thread::Builder::new()
        .name("control".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    tracing::error!("control thread: cannot start its runtime: {e}");
                    return;
                }
            };
            let local = tokio::task::LocalSet::new();
            local.block_on(&rt, async move {
                for task in service.background(&shared) {
                    tokio::task::spawn_local(task);
                }
                let _ = ready_tx.send(());
                run(shared, admin, threads).await
            });
        })?;
    let _ = ready_rx.recv_timeout(std::time::Duration::from_secs(5));
    Ok(h)
}

async fn run(shared: Arc<Shared>, admin: Vec<crate::admin::AdminListener>, threads: usize) {
    for l in admin {
        tokio::task::spawn_local(crate::admin::accept_loop(l, Arc::clone(&shared), threads));
    }
    for be in shared.model.proxies.iter().filter(|p| p.is_backend()) {
        let pool = be.pool();
        let checked: Vec<&Arc<Server>> = pool
            .servers
            .iter()
            .filter(|s| s.check_spec.is_some())
            .collect();
        let n = checked.len();
        for (i, srv) in checked.into_iter().enumerate() {
            // First checks spread over the first interval, as HAProxy does.
            let first = fsm::first_check_offset(i, n, srv.cfg.opts.inter);
            spawn_check(&shared, be, srv, first);
        }
    }
    tokio::task::spawn_local(warmup_ticker(Arc::clone(&shared)));
    let mut stop = shared.stop_tx.subscribe();
    while !*stop.borrow() {
        if stop.changed().await.is_err() {
            break;
        }
    }
    // The peers tasks hand the stick tables to the next process from this thread: ending
    // here would cancel them.
    let until = tokio::time::Instant::now() + Duration::from_secs(6);
    while crate::peers::handover_pending() && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Steps the `slowstart` ramps once a second (HAProxy's server_warmup: its weight formula
/// counts whole seconds): weights of starting servers are recomputed and their LB tables
/// rebuilt; a ramp that is over leaves the server RUNNING.
async fn warmup_ticker(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        if shared.stopping.load(Ordering::Acquire) {
            return;
        }
        let now = crate::clock::clock_ms();
        for be in shared.model.proxies.iter().filter(|p| p.is_backend()) {
            let pool = be.pool();
            let mut changed = false;
            for srv in pool.servers.iter().filter(|s| s.oper() == Oper::Starting) {
                if srv.warm_step(now).is_none() {
                    srv.end_warmup();
                    let _ = srv.oper.compare_exchange(
                        Oper::Starting as u8,
                        Oper::Running as u8,
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    );
                }
                srv.apply_state();
                changed = true;
            }
            if changed {
                be.rebuild_lb();
            }
        }
    }
}

/// Starts the check task of `srv` (on the control thread's local set), its first check after
/// `first`; it ends with the process or when the server is deleted.
pub fn spawn_check(shared: &Arc<Shared>, be: &Arc<Proxy>, srv: &Arc<Server>, first: Duration) {
    tokio::task::spawn_local(check_loop(
        Arc::clone(shared),
        Arc::clone(be),
        Arc::clone(srv),
        first,
    ));
}

async fn check_loop(shared: Arc<Shared>, be: Arc<Proxy>, srv: Arc<Server>, first: Duration) {
    let Some(spec) = srv.check_spec.clone() else {
        return;
    };
    tokio::time::sleep(first).await;
    loop {
        if shared.stopping.load(Ordering::Acquire) || srv.removed.load(Ordering::Acquire) {
            return;
        }
        let started = {
            let mut st = lock(&srv);
            if st.is_maint() || !srv.check_enabled.load(Ordering::Acquire) {
                None
            } else {
                st.start();
                Some(st.is_stopped())
            }
        };
        if let Some(stopped) = started {
            let target = {
                let (addr, port) = *srv.check_target.lock().unwrap_or_else(|p| p.into_inner());
                let base = srv.addr();
                std::net::SocketAddr::new(addr.unwrap_or(base.ip()), port.unwrap_or(base.port()))
            };
            let state = spec.wants_state().then(|| server_state(&shared, &be, &srv));
            let outcome = probe::run(
                &spec,
                target,
                stopped,
                srv.tls.as_ref(),
                state.as_deref(),
                srv.cfg.unix.as_ref(),
            )
            .await;
            let (update, was_usable) = {
                let mut st = lock(&srv);
                let was = st.is_usable();
                (st.on_result(outcome), was)
            };
            if let Some(tr) = update.transition {
                let last = lock(&srv).last().clone();
                apply(&shared, &be, &srv, tr, Some(&last), was_usable);
            }
            if update.report && be.cfg.options.log_health_checks {
                let st = lock(&srv).clone();
                let drain = srv.admin() & crate::model::ADMIN_DRAIN != 0;
                let line = fsm::fmt_health_check(&log_ctx(&be, &srv), &st, drain);
                shared.log.event(&be, fsm::LOG_NOTICE, &line, &line);
            }
        }
        let next = lock(&srv).next_interval();
        tokio::time::sleep(next).await;
    }
}

/// `X-Haproxy-Server-State` (HAProxy's httpchk_build_status_header): the state word, then
/// address, port, names, node, effective weight over the backend's usable total, sessions and
/// queue.
fn server_state(shared: &Shared, be: &Proxy, srv: &Server) -> String {
    let word = lock(srv).state_word(srv.check_enabled.load(Ordering::Acquire));
    let addr = srv.addr();
    let pool = be.pool();
    let total: u32 = pool
        .servers
        .iter()
        .filter(|s| s.is_usable())
        .map(|s| s.weight.load(Ordering::Relaxed))
        .sum();
    let node = shared
        .model
        .cfg
        .global
        .process
        .node
        .clone()
        .unwrap_or_else(|| {
            nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default()
        });
    let queued = be.queued.load(Ordering::Relaxed);
    format!(
        "{word}; address={}; port={}; name={}/{}; node={node}; weight={}/{total}; scur={}/{}; qcur={}",
        addr.ip(),
        addr.port(),
        be.name,
        srv.name,
        srv.weight.load(Ordering::Relaxed),
        srv.cur_conns.load(Ordering::Relaxed),
        be.beconn.load(Ordering::Relaxed).saturating_sub(queued),
        0
    )
}

fn lock(srv: &Server) -> std::sync::MutexGuard<'_, fsm::CheckState> {
    // A panic while holding it cannot leave the FSM half-updated in a way that matters more than
    // stopping the checks of that server would.
    srv.check.lock().unwrap_or_else(|p| p.into_inner())
}

fn log_ctx<'a>(be: &'a Proxy, srv: &'a Server) -> LogCtx<'a> {
    let pool = be.pool();
    let active = pool
        .servers
        .iter()
        .filter(|s| !s.cfg.opts.backup && s.is_usable())
        .count() as u32;
    let backups = pool
        .servers
        .iter()
        .filter(|s| s.cfg.opts.backup && s.is_usable())
        .count() as u32;
    LogCtx {
        proxy: &be.name,
        server: &srv.name,
        backup: srv.cfg.opts.backup,
        active,
        backups,
        sessions: srv.cur_conns.load(Ordering::Relaxed),
        requeued: 0,
        queued: 0,
        hostname: srv.host().unwrap_or_default(),
    }
}

/// Applies a transition decided by the FSM to what the workers read, then logs it and, for a
/// server going down with `on-marked-down shutdown-sessions`, ends its sessions everywhere.
/// A server got an address (a resolver's answer, `set server … addr`): it leaves the
/// resolution maintenance, and goes into service unless forced into maintenance.
pub fn address_found(
    shared: &Shared,
    be: &Proxy,
    srv: &Server,
    addr: Option<std::net::SocketAddr>,
) {
    use crate::model::{ADMIN_MAINT, ADMIN_RMAINT};
    if let Some(addr) = addr {
        if srv.addr() != addr {
            srv.addr.store(std::sync::Arc::new(addr));
        }
        srv.has_addr.store(true, Ordering::Release);
    }
    let before = srv.admin.fetch_and(!ADMIN_RMAINT, Ordering::AcqRel);
    if before & ADMIN_RMAINT == 0 {
        return;
    }
    let was_usable = srv.is_usable();
    let tr = if before & ADMIN_MAINT == 0 {
        lock(srv).leave_maint().map(|_| Transition::Resolved)
    } else {
        None
    };
    match tr {
        Some(tr) => apply(shared, be, srv, tr, None, was_usable),
        None => {
            srv.apply_state();
            be.rebuild_lb();
        }
    }
}

/// A server lost its address (no IP for it in the answer, or a failed resolution past its
/// hold): it enters the resolution maintenance for `cause`, its address cleared.
pub fn address_lost(shared: &Shared, be: &Proxy, srv: &Server, cause: fsm::MaintCause) {
    use crate::model::{ADMIN_MAINT, ADMIN_RMAINT};
    let before = srv.admin.fetch_or(ADMIN_RMAINT, Ordering::AcqRel);
    if before & ADMIN_RMAINT != 0 {
        return;
    }
    srv.has_addr.store(false, Ordering::Release);
    let was_usable = srv.is_usable();
    let tr = if before & ADMIN_MAINT == 0 {
        lock(srv).enter_maint_for(cause)
    } else {
        None
    };
    match tr {
        Some(tr) => apply(shared, be, srv, tr, None, was_usable),
        None => {
            srv.apply_state();
            be.rebuild_lb();
        }
    }
}

pub fn apply(
    shared: &Shared,
    be: &Proxy,
    srv: &Server,
    tr: Transition,
    check: Option<&fsm::CheckOutcome>,
    was_usable: bool,
) {
    let op = lock(srv).op();
    let mut oper = match op {
        OpState::Running => Oper::Running,
        OpState::Stopping => Oper::Stopping,
        OpState::Stopped => Oper::Stopped,
    };
    // `slowstart`: a server coming back into service ramps its weight up (HAProxy's
    // SRV_ST_STARTING), for the algorithms whose weights can change at run time.
    if oper == Oper::Running
        && !was_usable
        && matches!(
            tr,
            Transition::Up | Transition::Ready | Transition::Resolved
        )
        && be.cfg.balance.dynamic_weights(&be.cfg.hash_type)
        && srv.start_warmup(crate::clock::clock_ms())
    {
        oper = Oper::Starting;
    } else if oper != Oper::Running {
        srv.end_warmup();
    }
    let now = shared.model.started.elapsed().as_secs();
    let prev = srv.oper.swap(oper as u8, Ordering::AcqRel);
    if prev != oper as u8 {
        let since = srv.last_change.swap(now, Ordering::AcqRel);
        // Leaving maintenance does not add the maintenance period to `downtime` (seen on 2.6:
        // it shows while in MAINT, then drops back).
        if prev == Oper::Stopped as u8 && !matches!(tr, Transition::Ready | Transition::Resolved) {
            srv.down_time
                .fetch_add(now.saturating_sub(since), Ordering::Relaxed);
        }
    }
    let going_down = matches!(tr, Transition::Down | Transition::Maint { .. });
    if going_down && was_usable {
        srv.down_trans.fetch_add(1, Ordering::Relaxed);
    }
    srv.apply_state();
    be.rebuild_lb();
    be.note_state(now);
    let ctx = log_ctx(be, srv);
    let line = fsm::fmt_transition(
        &ctx,
        tr,
        check.filter(|_| !be.cfg.options.log_health_checks),
    );
    shared
        .log
        .event(be, fsm::transition_level(tr, was_usable), &line, &line);
    if going_down && srv.cfg.opts.on_marked_down_shutdown_sessions {
        srv.shutdown_sessions(b'D');
    }
    // An active server back in service takes over from the backups that asked for it.
    if tr == Transition::Up && !srv.cfg.opts.backup && srv.is_usable() {
        for b in be
            .pool()
            .servers
            .iter()
            .filter(|b| b.cfg.opts.backup && b.cfg.opts.on_marked_up_shutdown_backup_sessions)
        {
            b.shutdown_sessions(b'U');
        }
    }
    if going_down && was_usable && ctx.active == 0 && ctx.backups == 0 {
        shared.log.event(
            be,
            fsm::LOG_EMERG,
            &fsm::fmt_no_server(&be.name),
            &fsm::fmt_no_server_stderr(&be.name),
        );
    }
}
