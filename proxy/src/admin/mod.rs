//! The admin socket (`stats socket`): HAProxy's runtime API over unix or TCP sockets, served on
//! the control thread. Parsing, permissions and every reply's bytes live in
//! `portcullis-runtime-api`; this module only feeds it snapshots and applies what it decides.

pub mod snapshot;

use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use portcullis_runtime_api::cli::{
    self, AdminOp, CliSession, Conn, HealthOp, Level, PortSpec, Runtime, SrvRef,
};
use portcullis_runtime_api::model::Snapshot;
use portcullis_runtime_api::ssl::{
    AbortCertError, CertDetails, CertList, CommitCertError, SetCertError, SetCertOk,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::check::fsm::{OpState, Transition};
use crate::config::model::CliLevel;
use crate::engine::control;
use crate::engine::worker::Shared;
use crate::model::{ADMIN_DRAIN, ADMIN_MAINT, Proxy, Server};

/// HAProxy's default `stats timeout`.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// A command line longer than this is refused (HAProxy's buffer is 16 kB).
const MAX_LINE: usize = 16 * 1024;
/// A `<<` payload larger than this drops the connection (HAProxy's is bounded by its buffer
/// too; certificate bundles with a chain fit easily).
const MAX_PAYLOAD: usize = 1024 * 1024;

/// The runtime API's view of the running process.
pub struct AdminRuntime {
    pub shared: Arc<Shared>,
    pub threads: usize,
}

impl AdminRuntime {
    /// The server a command resolved (by id: `add server`/`del server` move indices).
    fn target(&self, r: SrvRef) -> Option<(&Arc<Proxy>, Arc<Server>)> {
        let be = self.shared.model.proxies.get(r.proxy)?;
        let srv = be
            .pool()
            .servers
            .iter()
            .find(|s| s.id == r.server_id)
            .cloned()?;
        Some((be, srv))
    }

    fn transition(&self, be: &Proxy, srv: &Server, tr: Option<Transition>, was_usable: bool) {
        match tr {
            Some(tr) => control::apply(&self.shared, be, srv, tr, None, was_usable),
            None => {
                srv.apply_state();
                be.rebuild_lb();
                be.note_state(self.shared.model.started.elapsed().as_secs());
            }
        }
    }
}

fn fsm(srv: &Server) -> std::sync::MutexGuard<'_, crate::check::fsm::CheckState> {
    srv.check.lock().unwrap_or_else(|p| p.into_inner())
}

impl Runtime for AdminRuntime {
    fn snapshot(&self) -> Snapshot {
        snapshot::take(
            &self.shared.model,
            self.threads,
            self.shared.stopping.load(Ordering::Relaxed),
        )
    }

    fn set_admin_state(&mut self, r: SrvRef, op: AdminOp) {
        let Some((be, srv)) = self.target(r) else {
            return;
        };
        let srv = &*srv;
        let was_usable = srv.is_usable();
        let admin_before = srv.admin();
        let tr = match op {
            // As HAProxy's srv_adm_set_maint/set_drain: each state clears the other.
            AdminOp::Maint => {
                srv.admin.fetch_or(ADMIN_MAINT, Ordering::AcqRel);
                srv.admin.fetch_and(!ADMIN_DRAIN, Ordering::AcqRel);
                fsm(srv).enter_maint()
            }
            AdminOp::Drain => {
                let before = srv.admin.fetch_or(ADMIN_DRAIN, Ordering::AcqRel);
                srv.admin.fetch_and(!ADMIN_MAINT, Ordering::AcqRel);
                if before & ADMIN_MAINT != 0 {
                    fsm(srv).leave_maint()
                } else {
                    None
                }
            }
            AdminOp::Ready => {
                let before = srv
                    .admin
                    .fetch_and(!(ADMIN_MAINT | ADMIN_DRAIN), Ordering::AcqRel);
                // Still without an address: the resolution maintenance stays.
                if before & crate::model::ADMIN_RMAINT != 0 {
                    None
                } else {
                    fsm(srv).leave_maint()
                }
            }
        };
        self.transition(be, srv, tr, was_usable);
        // HAProxy restarts `lastchg` on any admin state change (drain included), not only when
        // the server goes UP or DOWN.
        if srv.admin() != admin_before {
            let now = self.shared.model.started.elapsed().as_secs();
            let since = srv.last_change.swap(now, Ordering::AcqRel);
            if srv.oper() == crate::model::Oper::Stopped {
                srv.down_time
                    .fetch_add(now.saturating_sub(since), Ordering::Relaxed);
            }
        }
    }

    fn set_health(&mut self, r: SrvRef, op: HealthOp) {
        let Some((be, srv)) = self.target(r) else {
            return;
        };
        let srv = &*srv;
        let was_usable = srv.is_usable();
        let op = match op {
            HealthOp::Up => OpState::Running,
            HealthOp::Stopping => OpState::Stopping,
            HealthOp::Down => OpState::Stopped,
        };
        let tr = fsm(srv).force_health(op);
        self.transition(be, srv, tr, was_usable);
    }

    fn set_agent(&mut self, _r: SrvRef, _up: bool) {}

    fn set_weight(&mut self, r: SrvRef, weight: u32) {
        let Some((be, srv)) = self.target(r) else {
            return;
        };
        let srv = &*srv;
        srv.uweight.store(weight, Ordering::Release);
        srv.apply_state();
        be.rebuild_lb();
        be.note_state(self.shared.model.started.elapsed().as_secs());
    }

    fn set_addr(&mut self, r: SrvRef, addr: Option<IpAddr>, port: Option<PortSpec>) {
        let Some((be, srv)) = self.target(r) else {
            return;
        };
        let cur = srv.addr();
        let ip = addr.unwrap_or(cur.ip());
        let port = match port {
            Some(PortSpec::Fixed(p)) | Some(PortSpec::Mapped(p)) => p,
            None => cur.port(),
        };
        // Nothing to change: only the resolution maintenance ends.
        let new =
            (addr.is_some() || port != cur.port()).then(|| std::net::SocketAddr::new(ip, port));
        // New connections use it at once; pooled ones to the old address simply age out.
        control::address_found(&self.shared, be, &srv, new);
    }

    fn set_check_addr(&mut self, r: SrvRef, addr: IpAddr, port: Option<u16>) {
        let Some((_, srv)) = self.target(r) else {
            return;
        };
        let mut t = srv.check_target.lock().unwrap_or_else(|p| p.into_inner());
        t.0 = Some(addr);
        if port.is_some() {
            t.1 = port;
        }
    }

    fn set_check_port(&mut self, r: SrvRef, port: u16) {
        let Some((_, srv)) = self.target(r) else {
            return;
        };
        srv.check_target.lock().unwrap_or_else(|p| p.into_inner()).1 = Some(port);
    }

    fn set_agent_addr(&mut self, _r: SrvRef, _addr: IpAddr, _port: Option<u16>) {}
    fn set_agent_port(&mut self, _r: SrvRef, _port: u16) {}
    fn set_agent_send(&mut self, _r: SrvRef, _text: &str) {}

    fn set_check_enabled(&mut self, r: SrvRef, on: bool) {
        let Some((_, srv)) = self.target(r) else {
            return;
        };
        srv.check_enabled
            .store(on && srv.check_spec.is_some(), Ordering::Release);
    }

    fn set_agent_enabled(&mut self, _r: SrvRef, _on: bool) {}

    fn set_maxconn_server(&mut self, r: SrvRef, maxconn: u32) {
        let Some((be, srv)) = self.target(r) else {
            return;
        };
        let srv = &*srv;
        srv.maxconn.store(
            if maxconn == u32::MAX { 0 } else { maxconn },
            Ordering::Release,
        );
        // Streams queued for a slot may fit now.
        be.queue.notify_waiters();
    }

    fn clear_counters(&mut self, all: bool) {
        let model = &self.shared.model;
        for p in &model.proxies {
            p.counters.clear(all);
            p.fe_counters.clear(all);
            for s in p.pool().servers.iter() {
                s.counters.clear(all);
                if all {
                    let mut st = fsm(s);
                    st.chkfail = 0;
                    st.chkdown = 0;
                    s.down_trans.store(0, Ordering::Relaxed);
                }
            }
        }
        // `show info`'s maxima; its cumulated totals survive even `all`, as in HAProxy.
        model.totals.clear(false);
    }

    fn shutdown_sessions(&mut self, r: SrvRef) {
        if let Some((_, srv)) = self.target(r) {
            srv.shutdown_sessions(b'K');
        }
    }

    fn ssl_cert_list(&self) -> CertList {
        self.shared.certs.list()
    }

    fn ssl_cert_details(&self, name: &str) -> Option<CertDetails> {
        self.shared.certs.details(name)
    }

    fn ssl_cert_set(&mut self, file: &str, payload: &str) -> Result<SetCertOk, SetCertError> {
        self.shared.certs.set(file, payload)
    }

    fn ssl_cert_commit(&mut self, file: &str) -> Result<usize, CommitCertError> {
        self.shared.certs.commit(file)
    }

    fn ssl_cert_abort(&mut self, file: &str) -> Result<(), AbortCertError> {
        self.shared.certs.abort(file)
    }

    fn ssl_cert_new(&mut self, file: &str) -> Result<(), String> {
        self.shared.certs.new_cert(file)
    }

    fn show_table(&self, args: &[&str], dump: bool) -> String {
        let m = &self.shared.model;
        crate::stick::show::show_table(&m.stick, args, dump, m.now_ms())
    }

    fn show_resolvers(&self, only: Option<&str>) -> Result<String, String> {
        self.shared
            .model
            .resolvers
            .show(only)
            .map_err(str::to_string)
    }

    fn show_peers(&self, args: &[&str]) -> Result<String, String> {
        let m = &self.shared.model;
        let now_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(0));
        let off = crate::log::sink::local_utc_offset(now_us / 1_000_000);
        crate::peers::status::show_peers(&m.peers, args, m.now_ms(), off)
    }

    fn clear_table(&mut self, args: &[&str], allowed: bool) -> String {
        let m = &self.shared.model;
        crate::stick::show::clear_table(&m.stick, args, allowed, m.now_ms())
    }

    fn set_table(&mut self, args: &[&str], allowed: bool) -> String {
        let m = &self.shared.model;
        crate::stick::show::set_table(&m.stick, args, allowed, m.now_ms())
    }

    fn add_server(
        &mut self,
        backend: usize,
        name: &str,
        addr: &str,
        kws: &[String],
    ) -> Result<(), String> {
        let model = &self.shared.model;
        let Some(be) = model.proxies.get(backend) else {
            return Err("No such backend.".into());
        };
        let mut line = vec![addr.to_string()];
        line.extend(kws.iter().cloned());
        let srv = crate::model::dynamic::build(model, be, name, &line)?;
        let srv = crate::model::dynamic::insert(be, srv);
        let now = model.started.elapsed().as_secs();
        srv.last_change.store(now, Ordering::Release);
        be.note_state(now);
        // Its check task idles until `enable health` (checks start disabled, as HAProxy).
        if srv.check_spec.is_some() {
            control::spawn_check(&self.shared, be, &srv, Duration::ZERO);
        }
        Ok(())
    }

    fn show_errors(&mut self, args: &[String], out: &mut portcullis_runtime_api::reply::Reply) {
        let proxies: Vec<(String, u32, usize)> = self
            .shared
            .model
            .proxies
            .iter()
            .map(|p| (p.name.clone(), p.cfg.id, p.index))
            .collect();
        crate::model::error_snapshots::store().show(&proxies, args, out);
    }

    fn sessions_command(
        &mut self,
        verb: &str,
        args: &[String],
        out: &mut portcullis_runtime_api::reply::Reply,
    ) {
        crate::model::sessions::sessions().command(verb, args, &self.shared.model.proxies, out);
    }

    fn ssl_store_command(
        &mut self,
        verb: &str,
        what: &str,
        args: &[String],
        payload: Option<&str>,
        out: &mut portcullis_runtime_api::reply::Reply,
    ) {
        match what {
            "ca-file" => crate::tls::cafile::store().command(verb, args, payload, out),
            _ => self.shared.certs.crt_list_command(verb, args, payload, out),
        }
    }

    fn map_command(
        &mut self,
        verb: &str,
        what: &str,
        args: &[String],
        payload: Option<&str>,
        out: &mut portcullis_runtime_api::reply::Reply,
    ) {
        let what = crate::map::cli::What::from_word(what);
        crate::map::cli::run(crate::map::registry(), verb, what, args, payload, out);
    }

    fn set_dynamic_cookie(&mut self, proxy: usize, enable: Option<bool>, key: Option<&str>) {
        if let Some(be) = self.shared.model.proxies.get(proxy) {
            be.set_dynamic_cookie(enable, key);
        }
    }

    fn set_maxconn_frontend(&mut self, proxy: usize, maxconn: u32) {
        let model = &self.shared.model;
        if let Some(fe) = model.proxies.get(proxy) {
            // 0: back to the default, the process limit.
            let v = if maxconn == 0 {
                model.actconn.max()
            } else {
                maxconn
            };
            fe.feconn.set_max(v);
        }
    }

    fn set_frontend_paused(&mut self, proxy: usize, paused: bool) {
        if let Some(fe) = self.shared.model.proxies.get(proxy) {
            fe.feconn.set_paused(paused);
        }
    }

    fn set_rate_limit(&mut self, which: portcullis_runtime_api::limits::RateLimit, value: u32) {
        use portcullis_runtime_api::limits::RateLimit;
        let l = &self.shared.model.rate_limits;
        let slot = match which {
            RateLimit::Connections => &l.conn,
            RateLimit::Sessions => &l.sess,
            RateLimit::HttpCompression => &l.comp_bps,
        };
        slot.store(value, Ordering::Relaxed);
    }

    fn shutdown_frontend(&mut self, proxy: usize) {
        let Some(fe) = self.shared.model.proxies.get(proxy) else {
            return;
        };
        if fe.feconn.stop() {
            return;
        }
        let be = if fe.is_backend() {
            fe.counters.stot.load(Ordering::Relaxed)
        } else {
            0
        };
        let line = format!(
            "Proxy {} stopped (cumulated conns: FE: {}, BE: {be}).",
            fe.name,
            fe.fe_counters.conn_tot.load(Ordering::Relaxed)
        );
        // HAProxy's `stop_proxy`: a warning on stderr and in the proxy's logs.
        self.shared.log.event(fe, 4, &line, &line);
    }

    fn set_maxconn_global(&mut self, maxconn: u32) {
        self.shared.model.actconn.set_max(maxconn);
    }

    fn del_server(&mut self, r: SrvRef) {
        if let Some((be, srv)) = self.target(r) {
            be.remove_server(&srv);
            be.note_state(self.shared.model.started.elapsed().as_secs());
        }
    }
}

fn level(l: CliLevel) -> Level {
    match l {
        CliLevel::User => Level::User,
        CliLevel::Operator => Level::Operator,
        CliLevel::Admin => Level::Admin,
    }
}

/// Serves one admin-socket connection: a line, its reply, and HAProxy's framing rules
/// (non-interactive: close once idle; `prompt`: stay; `quit`: close now). `timeout` is `stats
/// timeout`: a silent client is dropped, and never blocks anyone else.
///
/// `getsocks` is the connection's descriptor when its socket has `expose-fd listeners` (and is a
/// unix socket): `_getsocks` then sends the listening sockets over it (`engine::handover`).
pub async fn serve<S>(
    stream: S,
    lvl: CliLevel,
    rt: &mut AdminRuntime,
    timeout: Duration,
    getsocks: Option<std::os::fd::RawFd>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let (rd, mut wr) = tokio::io::split(stream);
    let mut rd = BufReader::new(rd);
    let mut session = CliSession::new(level(lvl));
    let mut line = Vec::new();
    loop {
        line.clear();
        let read = tokio::time::timeout(
            timeout,
            (&mut rd)
                .take(MAX_LINE as u64 + 1)
                .read_until(b'\n', &mut line),
        )
        .await;
        let n = match read {
            Ok(Ok(n)) => n,
            _ => return,
        };
        if n == 0 || line.len() > MAX_LINE {
            return;
        }
        let text = String::from_utf8_lossy(&line).into_owned();
        let text = text.trim_end_matches(['\n', '\r']);
        // HAProxy 2.6 answers `_getsocks` with the sockets only, at any level, and without
        // `expose-fd listeners` with nothing at all; the connection ends either way.
        let first = text.split(';').next().unwrap_or_default();
        // portcullis' own: the server state for the next process (`engine::state`), where the
        // sockets may be taken too.
        if first.split_whitespace().next() == Some("_getstate") && getsocks.is_some() {
            let st = crate::engine::state::capture(&rt.shared.model);
            let _ = wr.write_all(&crate::engine::state::encode(&st)).await;
            let _ = wr.shutdown().await;
            return;
        }
        if first.split_whitespace().next() == Some("_getsocks") {
            if let Some(fd) = getsocks
                && let Err(e) = rt.shared.handover.send(fd)
            {
                tracing::warn!("_getsocks: {e}");
            }
            return;
        }
        let out = match portcullis_runtime_api::ssl::payload_command(text) {
            // A portcullis extension, answered here so that the HAProxy command table (and its
            // help and keyword dumps) stays HAProxy's. Framed as `show info` is.
            None if matches!(text.trim(), "show splice" | "show xdp") => {
                let body = if text.trim() == "show xdp" {
                    crate::kernel::xdp::show_xdp()
                } else {
                    crate::kernel::show_splice()
                };
                let mut data = format!("{body}\n");
                if session.prompt {
                    data.push_str("> ");
                }
                cli::Output {
                    data,
                    conn: if session.prompt {
                        Conn::KeepOpen
                    } else {
                        Conn::CloseIfIdle
                    },
                }
            }
            None => cli::execute(text, &mut session, rt),
            Some(cmd) => {
                // The payload runs up to the first empty line; interactive sessions see HAProxy's
                // `+ ` prompt before each of its lines. A client leaving mid-payload runs nothing.
                let mut payload = String::new();
                loop {
                    if session.prompt && wr.write_all(b"+ ").await.is_err() {
                        return;
                    }
                    line.clear();
                    let read = tokio::time::timeout(
                        timeout,
                        (&mut rd)
                            .take(MAX_LINE as u64 + 1)
                            .read_until(b'\n', &mut line),
                    )
                    .await;
                    match read {
                        Ok(Ok(n)) if n > 0 && line.len() <= MAX_LINE => {}
                        _ => return,
                    }
                    let l = String::from_utf8_lossy(&line);
                    let l = l.trim_end_matches(['\n', '\r']);
                    if l.is_empty() {
                        break;
                    }
                    if payload.len() + l.len() >= MAX_PAYLOAD {
                        return;
                    }
                    payload.push_str(l);
                    payload.push('\n');
                }
                cli::execute_with_payload(cmd, Some(&payload), &mut session, rt)
            }
        };
        if wr.write_all(out.data.as_bytes()).await.is_err() {
            return;
        }
        match out.conn {
            Conn::KeepOpen => {}
            Conn::Close => break,
            // Lines already buffered are still served, as HAProxy does, then the connection ends.
            Conn::CloseIfIdle => {
                if rd.buffer().is_empty() {
                    break;
                }
            }
        }
    }
    let _ = wr.shutdown().await;
}

/// A bound admin socket, created before the threads start (its errors stop the start).
pub struct AdminListener {
    pub sock: socket2::Socket,
    pub unix: bool,
    pub level: CliLevel,
    /// `expose-fd listeners`: `_getsocks` hands the listening sockets over.
    pub expose_fd: bool,
}

/// Binds every `stats socket` of the global section.
pub fn bind_all(cfg: &crate::config::model::Global) -> Result<Vec<AdminListener>, String> {
    use crate::config::model::BindAddr;
    use crate::engine::listen;
    let mut out = Vec::new();
    for s in &cfg.stats_sockets {
        let fail = |kind: &str, e: std::io::Error| {
            let msg = e.to_string();
            let msg = msg.split(" (os error").next().unwrap_or(&msg).to_string();
            format!(
                "Starting proxy GLOBAL: cannot bind {kind}socket ({msg}) [{}]",
                listen::describe(&s.addr)
            )
        };
        let (sock, unix) = match &s.addr {
            BindAddr::Unix(path) => (
                listen::unix(path, 16, s.mode).map_err(|e| fail("UNIX ", e))?,
                true,
            ),
            BindAddr::Abns(n) => (listen::abns(n, 16).map_err(|e| fail("UNIX ", e))?, true),
            BindAddr::Inet(a) => (listen::inet(*a, 16).map_err(|e| fail("", e))?, false),
            BindAddr::Fd(n) => {
                let sock = listen::inherited(*n).map_err(|e| fail("", e))?;
                let unix = sock.local_addr().map(|a| a.is_unix()).unwrap_or(false);
                (sock, unix)
            }
        };
        out.push(AdminListener {
            sock,
            unix,
            level: s.level,
            expose_fd: s.expose_fd_listeners,
        });
    }
    Ok(out)
}

/// Accepts admin clients on one socket until the process stops; each client is its own task.
pub async fn accept_loop(l: AdminListener, shared: Arc<Shared>, threads: usize) {
    let timeout = shared
        .model
        .cfg
        .global
        .stats_timeout
        .unwrap_or(DEFAULT_TIMEOUT);
    let level = l.level;
    let expose_fd = l.expose_fd;
    // HAProxy counts CLI connections in `CumConns` and `CumReq`, but its stats listeners are
    // "unlimited" ones, left out of the connection and session rates.
    let totals = Arc::clone(&shared);
    let count = move || {
        let t = &totals.model.totals;
        t.conn_tot.fetch_add(1, Ordering::Relaxed);
        t.req_tot.fetch_add(1, Ordering::Relaxed);
    };
    let rt = move || AdminRuntime {
        shared: Arc::clone(&shared),
        threads,
    };
    if l.unix {
        let std = std::os::unix::net::UnixListener::from(std::os::fd::OwnedFd::from(l.sock));
        let Ok(listener) = tokio::net::UnixListener::from_std(std) else {
            return;
        };
        while let Ok((s, _)) = listener.accept().await {
            count();
            let mut r = rt();
            let fd = expose_fd.then(|| std::os::fd::AsRawFd::as_raw_fd(&s));
            tokio::task::spawn_local(async move { serve(s, level, &mut r, timeout, fd).await });
        }
    } else {
        let std: std::net::TcpListener = l.sock.into();
        let Ok(listener) = tokio::net::TcpListener::from_std(std) else {
            return;
        };
        while let Ok((s, _)) = listener.accept().await {
            count();
            let mut r = rt();
            tokio::task::spawn_local(async move { serve(s, level, &mut r, timeout, None).await });
        }
    }
}
