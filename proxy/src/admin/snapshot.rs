//! The model as the runtime API sees it: a point-in-time copy of every proxy and server with
//! the numbers `show stat`, `show servers state` and `show info` print.

use std::sync::atomic::Ordering;

use portcullis_runtime_api::model as api;

use crate::config::model::{BindAddr, Mode};
use crate::model::{self, ADMIN_DRAIN, ADMIN_MAINT, Model, Oper, Proxy, Server};

/// The counters of one row at `now_ms`; `http` sizes the time averages' window by requests
/// rather than LB picks, as HAProxy does.
fn counters(c: &model::Counters, now_ms: u64, http: bool) -> api::Counters {
    let g = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let samples = if http { g(&c.req_tot) } else { g(&c.lbtot) };
    let avg = c.times.averages(samples);
    api::Counters {
        qmax: c.qmax.get(),
        smax: c.smax.get(),
        rate: c.sess_rate.read(now_ms),
        rate_max: c.sess_rate_max.get(),
        req_rate: c.req_rate.read(now_ms),
        req_rate_max: c.req_rate_max.get(),
        conn_rate: c.conn_rate.read(now_ms),
        conn_rate_max: c.conn_rate_max.get(),
        conn_tot: g(&c.conn_tot),
        lastsess_secs: c.last_sess.ago(now_ms),
        qtime: avg.queue,
        ctime: avg.connect,
        rtime: avg.response,
        ttime: avg.total,
        qtime_max: c.times.q_max.get(),
        ctime_max: c.times.c_max.get(),
        rtime_max: c.times.r_max.get(),
        ttime_max: c.times.t_max.get(),
        stot: g(&c.stot),
        bin: g(&c.bytes_in),
        bout: g(&c.bytes_out),
        dreq: g(&c.denied_req),
        dresp: g(&c.denied_resp),
        dcon: g(&c.denied_conn),
        dses: g(&c.denied_sess),
        ereq: g(&c.errors_req),
        econ: g(&c.errors_conn),
        eresp: g(&c.errors_resp),
        wretr: g(&c.retries),
        wredis: g(&c.redispatches),
        lbtot: g(&c.lbtot),
        hrsp: [
            g(&c.hrsp[0]),
            g(&c.hrsp[1]),
            g(&c.hrsp[2]),
            g(&c.hrsp[3]),
            g(&c.hrsp[4]),
            g(&c.hrsp[5]),
        ],
        req_tot: g(&c.req_tot),
        cli_abrt: g(&c.cli_aborts),
        srv_abrt: g(&c.srv_aborts),
        connect: g(&c.connect),
        reuse: g(&c.reuse),
        intercepted: g(&c.intercepted),
        comp_in: g(&c.comp_in),
        comp_out: g(&c.comp_out),
        comp_byp: g(&c.comp_byp),
        comp_rsp: g(&c.comp_rsp),
        ..Default::default()
    }
}

fn status(s: crate::check::fsm::Status) -> api::CheckStatus {
    use api::CheckStatus as C;
    // Both tables carry HAProxy's numbers (`show servers state` srv_check_status).
    const ALL: [C; 21] = [
        C::Unknown,
        C::Ini,
        C::Start,
        C::Checked,
        C::Hana,
        C::SockErr,
        C::L4Ok,
        C::L4Tout,
        C::L4Con,
        C::L6Ok,
        C::L6Tout,
        C::L6Rsp,
        C::L7Tout,
        C::L7Rsp,
        C::L57Data,
        C::L7Ok,
        C::L7Okc,
        C::L7Sts,
        C::ProcErr,
        C::ProcTout,
        C::ProcOk,
    ];
    ALL.get(s.num() as usize).copied().unwrap_or(C::Unknown)
}

fn server(model: &Model, srv: &Server, http: bool) -> api::ServerSnap {
    let st = srv
        .check
        .lock()
        .map(|g| g.clone())
        .unwrap_or_else(|p| p.into_inner().clone());
    let admin = srv.admin();
    let mut flags = 0;
    if admin & ADMIN_MAINT != 0 {
        flags |= api::AdminFlags::FMAINT;
    }
    if admin & ADMIN_DRAIN != 0 {
        flags |= api::AdminFlags::FDRAIN;
    }
    if admin & crate::model::ADMIN_RMAINT != 0 {
        flags |= api::AdminFlags::RMAINT;
    }
    if admin & crate::model::ADMIN_HMAINT != 0 {
        flags |= api::AdminFlags::HMAINT;
    }
    let addr = srv.addr();
    let (check_addr, check_port) = *srv.check_target.lock().unwrap_or_else(|p| p.into_inner());
    let last = st.last();
    let configured = srv.check_spec.is_some();
    let now = model.started.elapsed().as_secs();
    let changed = srv.last_change.load(Ordering::Relaxed);
    let mut down = srv.down_time.load(Ordering::Relaxed);
    if srv.oper() == Oper::Stopped {
        down += now.saturating_sub(changed);
    }
    let mut c = counters(&srv.counters, model.now_ms(), http);
    c.scur = srv.cur_conns.load(Ordering::Relaxed);
    api::ServerSnap {
        name: srv.name.clone(),
        id: srv.id,
        // `id` on an `add server` line (configured servers keep HAProxy's 0 here for now).
        forced_id: srv
            .dynamic
            .as_ref()
            .is_some_and(|d| d.line.iter().any(|w| w == "id")),
        backup: srv.cfg.opts.backup,
        op_state: match srv.oper() {
            Oper::Stopped => api::OpState::Stopped,
            Oper::Starting => api::OpState::Starting,
            Oper::Running => api::OpState::Running,
            Oper::Stopping => api::OpState::Stopping,
        },
        admin: api::AdminFlags(flags),
        // `-` until an address is known (`init-addr none`, unresolvable names).
        addr: (srv.has_addr.load(Ordering::Acquire) && srv.cfg.unix.is_none()).then_some(addr.ip()),
        port: addr.port(),
        unix: srv.cfg.unix.is_some(),
        uweight: srv.uweight.load(Ordering::Relaxed),
        iweight: srv.cfg.opts.weight,
        // HAProxy 2.6 keeps a drained server's effective weight (`weight` column): drain only
        // takes it out of the LB. That is the user weight, scaled during a slow start.
        eweight: srv.warm_weight(crate::clock::clock_ms()),
        throttle_pct: (srv.oper() == Oper::Starting && admin & ADMIN_DRAIN == 0)
            .then(|| srv.throttle_pct(crate::clock::clock_ms()))
            .flatten(),
        maxconn: srv.maxconn.load(Ordering::Relaxed),
        maxqueue: srv.cfg.opts.maxqueue.unwrap_or(0),
        check: api::CheckSnap {
            configured,
            enabled: configured && srv.check_enabled.load(Ordering::Relaxed),
            paused: st.is_paused(),
            in_progress: st.in_progress(),
            // HAProxy initialises every server's check status to INI, checked or not
            // (`show servers state` srv_check_status 1); `show stat` hides it without a check.
            status: if configured {
                status(last.status)
            } else {
                api::CheckStatus::Ini
            },
            code: last.code.map_or(0, u32::from),
            duration_ms: last.duration.as_millis() as u64,
            desc: last.info.clone(),
            rise: st.rise(),
            fall: st.fall(),
            health: st.health(),
            port: check_port.unwrap_or(0),
            addr: check_addr,
            failed: st.chkfail,
            down_trans: st.chkdown,
        },
        // 2.6 reports the configured check `port` as the agent's too (`srv_agent_port`): it
        // copies it there when no agent port is set.
        agent: api::CheckSnap {
            // The `addr` keyword sets the agent's address too (`srv_agent_addr`).
            addr: srv.cfg.opts.check_addr,
            port: srv
                .check_spec
                .as_ref()
                .and_then(|c| c.check_port)
                .unwrap_or(0),
            ..Default::default()
        },
        last_change_secs: now.saturating_sub(changed) as u32,
        downtime_secs: down as u32,
        counters: c,
        fqdn: srv.host(),
        srvrecord: srv.srv_record().map(str::to_string),
        ..Default::default()
    }
}

/// HAProxy's default `fullconn`: a tenth of the `maxconn` of the frontends that can reach it.
fn fullconn(model: &Model, be: &Proxy) -> u32 {
    let total: u32 = model
        .proxies
        .iter()
        .filter(|fe| fe.is_frontend())
        .filter(|fe| {
            fe.index == be.index
                || fe.rules.default_backend == Some(be.index)
                || fe.rules.use_backends.iter().any(|(i, _)| *i == be.index)
        })
        .map(|fe| fe.feconn.max())
        .sum();
    total / 10
}

fn proxy(model: &Model, p: &Proxy, stopping: bool) -> api::ProxySnap {
    let http = p.cfg.mode == Mode::Http;
    let now_ms = model.now_ms();
    let frontend = p.is_frontend().then(|| {
        let mut c = counters(&p.fe_counters, now_ms, http);
        c.scur = p.feconn.current();
        api::FrontendSnap {
            state: if stopping || p.feconn.is_stopped() {
                api::FrontendState::Stop
            } else if p.feconn.is_paused() {
                api::FrontendState::Paused
            } else {
                api::FrontendState::Open
            },
            maxconn: p.feconn.max(),
            rate_limit: 0,
            counters: c,
        }
    });
    let listeners = p
        .cfg
        .binds
        .iter()
        .enumerate()
        .map(|(i, b)| api::ListenerSnap {
            name: b.name.clone().unwrap_or_else(|| format!("sock-{}", i + 1)),
            id: i as u32 + 1,
            state: api::ListenerState::Open,
            maxconn: b.maxconn.unwrap_or(p.feconn.max()),
            addr: match &b.addr {
                BindAddr::Inet(a) => a.to_string(),
                _ => "unix".into(),
            },
            counters: api::Counters::default(),
        })
        .collect();
    let now = now_ms / 1000;
    let backend = p.is_backend().then(|| {
        let mut c = counters(&p.counters, now_ms, http);
        c.scur = p.beconn.load(Ordering::Relaxed);
        c.qcur = p.queued.load(Ordering::Relaxed);
        api::BackendSnap {
            fullconn: fullconn(model, p),
            algo: p.cfg.balance.as_str().into(),
            // HAProxy's BE_LB_PROP_DYN decides both `set weight` and `add server`.
            dynamic_weights: p.cfg.balance.dynamic_weights(&p.cfg.hash_type),
            dynamic_servers: p.cfg.balance.dynamic_weights(&p.cfg.hash_type),
            all_backups: p.cfg.options.allbackups,
            cookie: None,
            down_trans: p.be_state.down_trans.load(Ordering::Relaxed),
            last_change_secs: now.saturating_sub(p.be_state.last_change.load(Ordering::Relaxed))
                as u32,
            downtime_secs: p.be_state.downtime(now) as u32,
            counters: c,
        }
    });
    api::ProxySnap {
        name: p.name.clone(),
        id: p.cfg.id,
        forced_id: false,
        mode: match p.cfg.mode {
            Mode::Http => api::ProxyMode::Http,
            Mode::Tcp => api::ProxyMode::Tcp,
        },
        disabled: p.cfg.disabled,
        frontend,
        socket_stats: p.cfg.options.socket_stats,
        listeners,
        backend,
        servers: p
            .pool()
            .servers
            .iter()
            .map(|s| server(model, s, http))
            .collect(),
    }
}

/// Raises the soft `RLIMIT_NOFILE` to `want` (bounded by the hard limit) as HAProxy does for
/// its `Maxsock`; never lowers it (the pools of idle server connections need room beyond
/// HAProxy's count). Returns the limit now in force.
pub fn raise_nofile(want: u32) -> u32 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read or write the struct they are given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) != 0 {
            return 0;
        }
        // As HAProxy: both limits to `want` first (privileged), else the soft one up to the
        // hard one.
        let both = libc::rlimit {
            rlim_cur: libc::rlim_t::from(want),
            rlim_max: libc::rlim_t::from(want).max(r.rlim_max),
        };
        if libc::rlim_t::from(want) > r.rlim_cur && libc::setrlimit(libc::RLIMIT_NOFILE, &both) == 0
        {
            return want;
        }
        let target = libc::rlim_t::from(want).min(r.rlim_max);
        if target > r.rlim_cur {
            let next = libc::rlimit {
                rlim_cur: target,
                rlim_max: r.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &next) == 0 {
                r.rlim_cur = target;
            }
        }
    }
    u32::try_from(r.rlim_cur).unwrap_or(u32::MAX)
}

/// The soft `RLIMIT_NOFILE` (`Ulimit-n`).
fn nofile_limit() -> u32 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 0;
    }
    u32::try_from(r.rlim_cur).unwrap_or(u32::MAX)
}

/// HAProxy's `Maxsock` for a configured `maxconn`: two sockets per connection, one poller and a
/// wake-up pipe per thread, one per listener (stats sockets included) and per health check, and
/// 20 reserved (checked against 2.6 with 1 and 2 threads, 1 to 3 listeners, 0 to 5 checks).
pub fn maxsock(model: &Model, maxconn: u32, threads: u32) -> u32 {
    let proxies = model.proxies.iter().filter(|p| !p.cfg.disabled);
    let listeners: usize = proxies.clone().map(|p| p.cfg.binds.len()).sum::<usize>()
        + model.cfg.global.stats_sockets.len();
    // A check `port` also counts once more: 2.6 copies it to the agent, whose socket is then
    // reserved too.
    let checks: usize = proxies
        .map(|p| {
            p.pool()
                .servers
                .iter()
                .filter_map(|s| s.check_spec.as_ref())
                .map(|c| 1 + usize::from(c.check_port.is_some()))
                .sum::<usize>()
        })
        .sum();
    maxconn
        .saturating_mul(2)
        .saturating_add(3 * threads)
        .saturating_add((listeners + checks) as u32)
        .saturating_add(20)
}

/// `show info`'s `Maxsock` for this process: the reserved sockets with a global `maxconn`,
/// else the descriptor limit. `threads` as the engine counts them (`nbthread`, else the cores).
pub fn reported_maxsock(model: &Model, threads: u32) -> u32 {
    if model.cfg.global.maxconn.is_some() {
        maxsock(model, model.actconn.hard(), threads)
    } else {
        nofile_limit()
    }
}

/// The whole snapshot; `threads` and `stopping` describe the process.
pub fn take(model: &Model, threads: usize, stopping: bool) -> api::Snapshot {
    let uptime = model.started.elapsed().as_secs() as u32;
    let start = model
        .started_at
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32);
    let t = &model.totals;
    let now_ms = model.now_ms();
    let maxconn = model.actconn.max();
    let ulimit = nofile_limit();
    // Sockets are reserved at start for the hard limit; `set maxconn global` leaves them.
    let maxsock = if model.cfg.global.maxconn.is_some() {
        maxsock(model, model.actconn.hard(), threads as u32)
    } else {
        ulimit
    };
    api::Snapshot {
        info: api::ProcessInfo {
            name: "portcullis".into(),
            version: concat!(env!("CARGO_PKG_VERSION"), " (portcullis)").into(),
            release_date: "-".into(),
            nbthread: threads as u32,
            pid: std::process::id(),
            uptime_secs: uptime,
            maxconn,
            hard_maxconn: model.actconn.hard(),
            curr_conns: model.actconn.current(),
            cum_conns: t.conn_tot.load(Ordering::Relaxed) as u32,
            cum_req: t.req_tot.load(Ordering::Relaxed) as u32,
            conn_rate: t.conn_rate.read(now_ms),
            max_conn_rate: t.conn_rate_max.get(),
            sess_rate: t.sess_rate.read(now_ms),
            max_sess_rate: t.sess_rate_max.get(),
            conn_rate_limit: model.rate_limits.conn.load(Ordering::Relaxed),
            sess_rate_limit: model.rate_limits.sess.load(Ordering::Relaxed),
            compress_bps_rate_lim: model.rate_limits.comp_bps.load(Ordering::Relaxed),
            compress_bps_in: model.rate_limits.comp_in.read(now_ms),
            compress_bps_out: model.rate_limits.comp_out.read(now_ms),
            ulimit_n: ulimit,
            maxsock,
            stopping,
            node: nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            start_time_sec: start,
            ..Default::default()
        },
        proxies: model
            .proxies
            .iter()
            .map(|p| proxy(model, p, stopping))
            .collect(),
    }
}
