//! The runtime model built from the configuration: proxies (frontends/backends), servers and the
//! state every worker shares. Hot-path state is atomics; what changes rarely (an address, the LB
//! table) is swapped whole with `ArcSwap`. Counters are summed when read (`show stat`).

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};

use arc_swap::ArcSwap;

use crate::config::model as cfg;

pub mod dynamic;
pub mod error_snapshots;
pub mod rate_limits;
pub mod sessions;
pub mod state_file;
pub mod stats;

/// Connection-count gate for `maxconn` (global, frontend). Accept loops wait until the gate has
/// room without reserving a slot (an accept pending on an idle listener must not hold one: each
/// worker has its own listener), then the accepted session takes a slot, waiting if another
/// worker took the last one meanwhile. Sessions running never exceed `max`.
pub struct Gate {
    cur: AtomicU32,
    /// Changed by `set maxconn frontend|global`.
    max: AtomicU32,
    /// The limit the process started with (`Hard_maxconn`; `set maxconn global` cannot pass it).
    hard: u32,
    /// `disable frontend`: accepting waits (connections stay in the kernel's backlog).
    paused: AtomicBool,
    /// `shutdown frontend`: the listeners are closed for good.
    stopped: AtomicBool,
    waiters: tokio::sync::Notify,
    /// Tasks in `wait_until`'s slow path: a release wakes `waiters` only when some wait (every
    /// `notify_waiters` takes the Notify's lock, and a release ends every connection).
    waiting: AtomicU32,
    /// Woken only by `stop`, so that accept loops watching it are not woken by every release.
    stop_waiters: tokio::sync::Notify,
}

impl Gate {
    pub fn new(max: u32) -> Gate {
        Gate {
            cur: AtomicU32::new(0),
            max: AtomicU32::new(max.max(1)),
            hard: max.max(1),
            paused: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            waiters: tokio::sync::Notify::new(),
            waiting: AtomicU32::new(0),
            stop_waiters: tokio::sync::Notify::new(),
        }
    }
    /// Sessions holding a slot now (`actconn`, `feconn`, `scur`).
    pub fn current(&self) -> u32 {
        self.cur.load(Ordering::Relaxed)
    }
    pub fn max(&self) -> u32 {
        self.max.load(Ordering::Relaxed)
    }
    pub fn hard(&self) -> u32 {
        self.hard
    }
    pub fn is_paused(&self) -> bool {
        self.paused.load(Ordering::Acquire)
    }
    pub fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }
    /// Stops accepting for good (`shutdown frontend`); the previous state.
    pub fn stop(&self) -> bool {
        let was = self.stopped.swap(true, Ordering::AcqRel);
        self.waiters.notify_waiters();
        self.stop_waiters.notify_waiters();
        was
    }
    /// Resolves once the gate is stopped.
    pub async fn wait_stopped(&self) {
        loop {
            let notified = self.stop_waiters.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.is_stopped() {
                return;
            }
            notified.await;
        }
    }
    /// Pauses or resumes accepting; the previous state.
    pub fn set_paused(&self, paused: bool) -> bool {
        let was = self.paused.swap(paused, Ordering::AcqRel);
        self.waiters.notify_waiters();
        was
    }
    /// A new limit; sessions waiting for room re-check it (a lower one lets the running ones
    /// finish).
    pub fn set_max(&self, max: u32) {
        self.max.store(max.max(1), Ordering::Relaxed);
        self.waiters.notify_waiters();
    }
    /// Takes a slot if one is free.
    pub fn try_enter(&self) -> bool {
        let mut cur = self.cur.load(Ordering::Relaxed);
        loop {
            if cur >= self.max() {
                return false;
            }
            match self
                .cur
                .compare_exchange_weak(cur, cur + 1, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => return true,
                Err(c) => cur = c,
            }
        }
    }
    /// Waits until `check` holds, re-checking whenever a slot is released.
    async fn wait_until(&self, check: impl Fn() -> bool) {
        // The usual case, room: no waiter registered, no lock taken.
        if check() {
            return;
        }
        // Counted before the checks below (and `leave` reads the count after its release, both
        // behind SeqCst fences): either the release sees this waiter, or the check sees the
        // release.
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let _counted = Waiting(&self.waiting);
        std::sync::atomic::fence(Ordering::SeqCst);
        loop {
            let notified = self.waiters.notified();
            let mut notified = std::pin::pin!(notified);
            // Registered before the check, so a release in between is not missed.
            notified.as_mut().enable();
            if check() {
                return;
            }
            notified.await;
        }
    }
    /// Waits until a slot is free, without taking it.
    pub async fn wait_room(&self) {
        self.wait_until(|| {
            self.is_stopped()
                || (!self.is_paused() && self.cur.load(Ordering::Acquire) < self.max())
        })
        .await;
    }
    /// Takes a slot if one is free and the gate is not paused: what [`Gate::enter`] does when
    /// it need not wait.
    pub fn try_take(&self) -> bool {
        !self.is_paused() && self.try_enter()
    }
    /// Waits for a free slot and takes it; while paused, a connection accepted anyway (an
    /// accept that was already waiting) is held here, unserved, as the kernel's backlog would.
    pub async fn enter(&self) {
        self.wait_until(|| self.try_take()).await;
    }
    /// Gives a slot back.
    pub fn leave(&self) {
        self.cur.fetch_sub(1, Ordering::AcqRel);
        std::sync::atomic::fence(Ordering::SeqCst);
        if self.waiting.load(Ordering::Relaxed) > 0 {
            self.waiters.notify_waiters();
        }
    }
}

/// A task counted in [`Gate::wait_until`]'s slow path, uncounted however the wait ends.
struct Waiting<'a>(&'a AtomicU32);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Per-object traffic counters (summed across workers by being shared atomics; contention is low
/// at these rates and `show stat` needs no aggregation pass).
#[derive(Default)]
pub struct Counters {
    pub stot: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub req_tot: AtomicU64,
    pub denied_req: AtomicU64,
    /// Responses refused by `http-response deny` (`dresp`).
    pub denied_resp: AtomicU64,
    /// Connections refused by `tcp-request connection` (`dcon`).
    pub denied_conn: AtomicU64,
    /// Sessions refused by `tcp-request session` (`dses`).
    pub denied_sess: AtomicU64,
    pub errors_req: AtomicU64,
    pub errors_conn: AtomicU64,
    pub errors_resp: AtomicU64,
    pub retries: AtomicU64,
    pub redispatches: AtomicU64,
    pub cli_aborts: AtomicU64,
    pub srv_aborts: AtomicU64,
    pub lbtot: AtomicU64,
    /// hrsp_1xx..hrsp_5xx, hrsp_other
    pub hrsp: [AtomicU64; 6],
    pub connect: AtomicU64,
    pub reuse: AtomicU64,
    /// Requests answered by an applet (stats page, exporter).
    pub intercepted: AtomicU64,
    /// Body bytes into the compressor, out of it, passed through `identity` (HAProxy's
    /// "bypass"), and the compressed responses (frontends and backends).
    pub comp_in: AtomicU64,
    pub comp_out: AtomicU64,
    pub comp_byp: AtomicU64,
    pub comp_rsp: AtomicU64,
    /// Highest `scur` / `qcur` seen.
    pub smax: stats::Max,
    pub qmax: stats::Max,
    /// Sessions per second (`rate`, `SessRate`) and their max.
    pub sess_rate: stats::Freq,
    pub sess_rate_max: stats::Max,
    /// Accepted connections (frontend `conn_tot`, `CumConns`) and their rate.
    pub conn_tot: AtomicU64,
    pub conn_rate: stats::Freq,
    pub conn_rate_max: stats::Max,
    /// HTTP requests per second (frontend `req_rate`).
    pub req_rate: stats::Freq,
    pub req_rate_max: stats::Max,
    pub last_sess: stats::LastSess,
    /// qtime/ctime/rtime/ttime (backends and servers).
    pub times: stats::Timings,
}

impl Counters {
    pub fn add(c: &AtomicU64, n: u64) {
        c.fetch_add(n, Ordering::Relaxed);
    }
    pub fn count_status(&self, status: u16) {
        let i = match status {
            100..=199 => 0,
            200..=299 => 1,
            300..=399 => 2,
            400..=499 => 3,
            500..=599 => 4,
            _ => 5,
        };
        self.hrsp[i].fetch_add(1, Ordering::Relaxed);
    }
    /// A session starts on this object (`stot`, `rate`, `lastsess`); `now_ms` since the start.
    pub fn session(&self, now_ms: u64) {
        self.stot.fetch_add(1, Ordering::Relaxed);
        self.sess_rate_max.update(self.sess_rate.hit(now_ms));
        self.last_sess.touch(now_ms);
    }
    /// A connection was accepted (`conn_tot`, `conn_rate`).
    pub fn connection(&self, now_ms: u64) {
        self.conn_tot.fetch_add(1, Ordering::Relaxed);
        self.conn_rate_max.update(self.conn_rate.hit(now_ms));
    }
    /// An HTTP request was received, valid or not (`req_tot`, `req_rate`).
    pub fn request(&self, now_ms: u64) {
        self.req_tot.fetch_add(1, Ordering::Relaxed);
        self.req_rate_max.update(self.req_rate.hit(now_ms));
    }
    /// Bytes of a finished stream (`bin`, `bout`).
    pub fn bytes(&self, bin: u64, bout: u64) {
        self.bytes_in.fetch_add(bin, Ordering::Relaxed);
        self.bytes_out.fetch_add(bout, Ordering::Relaxed);
    }
    /// `clear counters`: every maximum; `all`: every counter too (HAProxy keeps the current
    /// rates either way: they are not counters but windows).
    pub fn clear(&self, all: bool) {
        for m in [
            &self.smax,
            &self.qmax,
            &self.sess_rate_max,
            &self.conn_rate_max,
            &self.req_rate_max,
        ] {
            m.reset();
        }
        self.times.clear(all);
        if !all {
            return;
        }
        let totals = [
            &self.stot,
            &self.bytes_in,
            &self.bytes_out,
            &self.req_tot,
            &self.denied_req,
            &self.denied_resp,
            &self.denied_conn,
            &self.denied_sess,
            &self.errors_req,
            &self.errors_conn,
            &self.errors_resp,
            &self.retries,
            &self.redispatches,
            &self.cli_aborts,
            &self.srv_aborts,
            &self.lbtot,
            &self.connect,
            &self.reuse,
            &self.conn_tot,
        ];
        for c in totals.into_iter().chain(self.hrsp.iter()) {
            c.store(0, Ordering::Relaxed);
        }
        self.last_sess.reset();
    }
    /// Times of a finished stream; the window is sized by the requests (HTTP) or LB picks (TCP).
    pub fn times(&self, http: bool, s: stats::Sample) {
        let count = if http { &self.req_tot } else { &self.lbtot };
        self.times.record(count.load(Ordering::Relaxed), s);
    }
}

/// Server admin-state flags (HAProxy's `srv_admin`): forced maintenance and forced drain, set by
/// the config (`disabled`) or the admin socket.
pub const ADMIN_MAINT: u8 = 1;
pub const ADMIN_DRAIN: u8 = 2;
/// Maintenance for want of an address (HAProxy's RMAINT): `init-addr none`, or a name no
/// resolver answered yet; a resolved address or `set server … addr` clears it.
pub const ADMIN_RMAINT: u8 = 4;
/// The host name came from outside the configuration (an SRV record; HAProxy's HMAINT): only
/// reported, it is no maintenance.
pub const ADMIN_HMAINT: u8 = 8;
/// Any maintenance bit.
pub const ADMIN_ANY_MAINT: u8 = ADMIN_MAINT | ADMIN_RMAINT;

/// Server operational states (HAProxy's `srv_state`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Oper {
    Stopped = 0,
    Starting = 1,
    Running = 2,
    /// Up but taking no new LB traffic (`NOLB`: `health stopping`, 404 with disable-on-404).
    Stopping = 3,
}

impl Oper {
    fn from_u8(v: u8) -> Oper {
        match v {
            0 => Oper::Stopped,
            1 => Oper::Starting,
            3 => Oper::Stopping,
            _ => Oper::Running,
        }
    }
}

pub struct Server {
    pub name: String,
    pub id: u32,
    pub cfg: cfg::Server,
    /// Changes with `set server … addr` without a reload.
    pub addr: ArcSwap<SocketAddr>,
    /// False while the server has no address (its `addr` is a placeholder no one connects to).
    pub has_addr: AtomicBool,
    /// Established + connecting sessions on this server (`scur`, leastconn).
    pub cur_conns: AtomicU32,
    /// Operationally usable for new traffic (UP and not in maintenance). Checks and the admin
    /// socket flip it; without `check` a server is always usable unless `disabled`.
    pub usable: AtomicBool,
    /// Effective weight (drain = 0).
    pub weight: AtomicU32,
    /// User weight (`set weight`); the initial one is `cfg.opts.weight`.
    pub uweight: AtomicU32,
    /// `ADMIN_*` flags.
    pub admin: std::sync::atomic::AtomicU8,
    /// `Oper` as u8.
    pub oper: std::sync::atomic::AtomicU8,
    /// When the server last went UP or DOWN (`lastchg`), in seconds since the process started.
    pub last_change: AtomicU64,
    /// Seconds spent DOWN before the current state (`downtime`).
    pub down_time: AtomicU64,
    /// UP→DOWN transitions (`chkdown`).
    pub down_trans: AtomicU64,
    /// The health FSM (driven by the control thread's checks and by the admin socket).
    pub check: std::sync::Mutex<crate::check::fsm::CheckState>,
    /// What a check sends and expects; `None` without `check`.
    pub check_spec: Option<crate::check::probe::CheckSpec>,
    /// `disable health` / `enable health`.
    pub check_enabled: AtomicBool,
    /// `set server … check-addr|check-port`: replaces the configured check target.
    pub check_target: std::sync::Mutex<(Option<std::net::IpAddr>, Option<u16>)>,
    /// `maxconn` (0 = unlimited), changed by `set maxconn server`.
    pub maxconn: AtomicU32,
    /// The persistence cookie value: `cookie <value>`, or the dynamic one (`cookie … dynamic`,
    /// changed by the CLI's `dynamic-cookie` commands).
    pub cookie: arc_swap::ArcSwapOption<String>,
    /// The address the dynamic cookie was computed from (None: no dynamic cookie): a new
    /// address (`set server addr`, a resolver) gets it computed again.
    pub cookie_addr: arc_swap::ArcSwapOption<SocketAddr>,
    /// `ssl` / `check-ssl`: the TLS client settings.
    pub tls: Option<crate::tls::client::ServerTls>,
    pub counters: Counters,
    /// Bumped by `shutdown_sessions`: sessions remember it when they take the server and end
    /// when it moves (`on-marked-down shutdown-sessions`, reaching every worker).
    kill_epoch: AtomicU64,
    kill: tokio::sync::Notify,
    /// Termination cause of the last kill: `D` (marked DOWN) or `U` (a backup's sessions when
    /// an active server came UP, `on-marked-up shutdown-backup-sessions`).
    kill_cause: std::sync::atomic::AtomicU8,
    /// Added at run time (`add server`): its `server` line is handed over on a reload.
    pub dynamic: Option<dynamic::Origin>,
    /// Set by `del server`: its check task ends.
    pub removed: AtomicBool,
    /// `slowstart` in progress: `clock_ms() + 1` when the server came back UP (0: none).
    warm_start: AtomicU64,
    /// The name the server resolves now: the configured one, or for a `server-template` slot
    /// of an SRV record the target its record gave (none while the slot is free).
    host: std::sync::Mutex<Option<String>>,
}

impl Server {
    /// The runtime server for configuration line `s` of proxy `p`; `Err` is the text of the
    /// check or TLS settings error. A `dynamic` server starts in maintenance with its checks
    /// disabled, as HAProxy's `add server` does.
    pub fn new(
        global: &cfg::Global,
        p: &cfg::Proxy,
        s: &cfg::Server,
        dynamic: Option<dynamic::Origin>,
    ) -> Result<Server, String> {
        let check_spec = crate::check::probe::CheckSpec::from_config(p, s)?;
        let tls = crate::tls::client::server_tls(global, s)?;
        let maint = s.opts.disabled || dynamic.is_some();
        let check = if dynamic.is_some() {
            crate::check::fsm::CheckState::dynamic(&s.opts)
        } else {
            // Without an address the checks wait in maintenance, as for `disabled`.
            let mut o = s.opts.clone();
            o.disabled |= s.unresolved;
            crate::check::fsm::CheckState::new(&o)
        };
        let mut admin = if maint { ADMIN_MAINT } else { 0 };
        // `enabled` on an `add server` line: in service at once.
        if dynamic.as_ref().is_some_and(|d| d.enabled) {
            admin = 0;
        }
        if s.unresolved {
            admin |= ADMIN_RMAINT;
        }
        let running = admin == 0;
        Ok(Server {
            tls,
            check: std::sync::Mutex::new(check),
            check_enabled: AtomicBool::new(check_spec.is_some() && dynamic.is_none()),
            check_target: std::sync::Mutex::new((
                check_spec.as_ref().and_then(|c| c.check_addr),
                check_spec.as_ref().and_then(|c| c.check_port),
            )),
            maxconn: AtomicU32::new(s.opts.maxconn.unwrap_or(0)),
            check_spec,
            name: s.name.clone(),
            id: s.id,
            cookie: arc_swap::ArcSwapOption::from(
                crate::http::cookie::server_cookie(s, p).map(Arc::new),
            ),
            cookie_addr: arc_swap::ArcSwapOption::from(
                (s.opts.cookie.is_none() && crate::http::cookie::server_cookie(s, p).is_some())
                    .then(|| Arc::new(s.addr)),
            ),
            cfg: s.clone(),
            addr: ArcSwap::from_pointee(s.addr),
            has_addr: AtomicBool::new(!s.unresolved),
            cur_conns: AtomicU32::new(0),
            usable: AtomicBool::new(running),
            weight: AtomicU32::new(s.opts.weight),
            uweight: AtomicU32::new(s.opts.weight),
            admin: std::sync::atomic::AtomicU8::new(admin),
            oper: std::sync::atomic::AtomicU8::new(
                if (dynamic.is_some() || s.unresolved) && !running {
                    Oper::Stopped as u8
                } else {
                    Oper::Running as u8
                },
            ),
            last_change: AtomicU64::new(0),
            down_time: AtomicU64::new(0),
            down_trans: AtomicU64::new(0),
            counters: Counters::default(),
            kill_epoch: AtomicU64::new(0),
            kill: tokio::sync::Notify::new(),
            kill_cause: std::sync::atomic::AtomicU8::new(b'D'),
            dynamic,
            removed: AtomicBool::new(false),
            warm_start: AtomicU64::new(0),
            host: std::sync::Mutex::new(s.fqdn.clone().filter(|f| !f.starts_with('_'))),
        })
    }

    /// The host name it resolves (`srv_fqdn`).
    pub fn host(&self) -> Option<String> {
        self.host.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
    pub fn set_host(&self, host: Option<String>) {
        *self.host.lock().unwrap_or_else(|p| p.into_inner()) = host;
    }
    /// The SRV record a `server-template` follows (`srvrecord`), if any.
    pub fn srv_record(&self) -> Option<&str> {
        self.cfg.fqdn.as_deref().filter(|f| f.starts_with('_'))
    }

    pub fn addr(&self) -> SocketAddr {
        **self.addr.load()
    }
    pub fn oper(&self) -> Oper {
        Oper::from_u8(self.oper.load(Ordering::Acquire))
    }
    pub fn admin(&self) -> u8 {
        self.admin.load(Ordering::Acquire)
    }
    /// Recomputes what the data path reads (`usable`, effective `weight`) from the admin and
    /// operational states; the caller then rebuilds the backend's LB table.
    pub fn apply_state(&self) {
        let admin = self.admin();
        let usable =
            admin & ADMIN_ANY_MAINT == 0 && matches!(self.oper(), Oper::Running | Oper::Starting);
        let weight = if admin & ADMIN_DRAIN != 0 {
            0
        } else {
            self.warm_weight(crate::clock::clock_ms())
        };
        self.weight.store(weight, Ordering::Release);
        self.usable.store(usable, Ordering::Release);
    }

    /// Starts a `slowstart` ramp (the server just came back UP); `false` without one.
    pub fn start_warmup(&self, now_ms: u64) -> bool {
        if self.cfg.opts.slowstart.is_none() {
            return false;
        }
        self.warm_start.store(now_ms + 1, Ordering::Release);
        true
    }

    /// HAProxy's server_recalc_eweight during a slow start: the step, out of 16
    /// (BE_WEIGHT_SCALE), that `now_ms` has reached (`(16·elapsed + ss) / ss`, whole seconds);
    /// `None` once the ramp is over or without one.
    pub fn warm_step(&self, now_ms: u64) -> Option<u32> {
        let start = self.warm_start.load(Ordering::Acquire).checked_sub(1)?;
        let ss = self.cfg.opts.slowstart?.as_secs().max(1);
        let elapsed = now_ms.saturating_sub(start) / 1000;
        if elapsed >= ss {
            return None;
        }
        u32::try_from((16 * elapsed + ss) / ss).ok()
    }

    /// The user weight scaled by the slow-start step, rounded up as HAProxy shows it.
    pub fn warm_weight(&self, now_ms: u64) -> u32 {
        let uw = self.uweight.load(Ordering::Acquire);
        match self.warm_step(now_ms) {
            Some(w) if uw > 0 => (uw * w).div_ceil(16).max(1),
            _ => uw,
        }
    }

    /// `throttle` (show stat) while ramping: HAProxy's server_throttle_rate,
    /// `(100·eweight + 15) / (16·uweight)` with `eweight = uweight·step` (so 1/16 reads 6 %).
    pub fn throttle_pct(&self, now_ms: u64) -> Option<u32> {
        let uw = self.uweight.load(Ordering::Acquire);
        let w = self.warm_step(now_ms)?;
        if uw == 0 {
            return Some(100);
        }
        Some((100 * uw * w + 15) / (16 * uw))
    }

    /// Ends the ramp (reached full weight, or the server went down again).
    pub fn end_warmup(&self) {
        self.warm_start.store(0, Ordering::Release);
    }
    /// The epoch a session records when it starts using this server.
    pub fn kill_epoch(&self) -> u64 {
        self.kill_epoch.load(Ordering::Acquire)
    }
    /// Ends every session that uses this server now; they log `cause` (`D` or `U`).
    pub fn shutdown_sessions(&self, cause: u8) {
        self.kill_cause.store(cause, Ordering::Release);
        self.kill_epoch.fetch_add(1, Ordering::AcqRel);
        self.kill.notify_waiters();
    }
    /// Termination cause for a session this server's kill ended.
    pub fn kill_cause(&self) -> u8 {
        self.kill_cause.load(Ordering::Acquire)
    }
    /// Resolves once `shutdown_sessions` has been called after `epoch` was read.
    pub async fn killed(&self, epoch: u64) {
        loop {
            let notified = self.kill.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.kill_epoch() != epoch {
                return;
            }
            notified.await;
        }
    }
    pub fn is_usable(&self) -> bool {
        self.usable.load(Ordering::Acquire) && self.weight.load(Ordering::Relaxed) > 0
    }
}

pub struct Proxy {
    pub index: usize,
    pub name: String,
    pub cfg: cfg::Proxy,
    pub feconn: Gate,
    pub beconn: AtomicU32,
    /// The servers and their LB table, swapped together (`add server`/`del server` change the
    /// indices the table holds).
    pool: ArcSwap<Pool>,
    /// Serialises the writers of `pool` (the control thread, the stats page's actions).
    pool_write: std::sync::Mutex<()>,
    pub rules: crate::http::rules::ProxyRules,
    /// Streams waiting for a server slot (`maxconn` reached everywhere): `qcur`, `%bq`.
    pub queued: AtomicU32,
    /// Woken when a server slot frees up.
    pub queue: tokio::sync::Notify,
    pub lb_cursor: AtomicU64,
    /// The backend role's counters (BACKEND row).
    pub counters: Counters,
    /// The frontend role's (FRONTEND row): a `listen` section has both rows, counted apart.
    pub fe_counters: Counters,
    /// The backend as a whole (BACKEND row `chkdown`, `lastchg`, `downtime`).
    pub be_state: BackendState,
    /// The proxy's `stick-table` (also in `Model::stick`).
    pub table: Option<Arc<crate::stick::Table>>,
    /// `cookie … dynamic` on (the CLI turns it on and off) and `dynamic-cookie-key`.
    pub dyn_cookie: std::sync::Mutex<(bool, Option<String>)>,
}

/// Whether a backend has a server to send traffic to, and its history: times it lost the last
/// one, when it last went DOWN or UP, seconds spent DOWN before that (seconds since the start).
pub struct BackendState {
    up: AtomicBool,
    pub down_trans: AtomicU64,
    pub last_change: AtomicU64,
    pub down_time: AtomicU64,
}

impl BackendState {
    pub fn is_up(&self) -> bool {
        self.up.load(Ordering::Relaxed)
    }
    /// Seconds DOWN in total at `now` (seconds since the start).
    pub fn downtime(&self, now: u64) -> u64 {
        let mut d = self.down_time.load(Ordering::Relaxed);
        if !self.is_up() {
            d += now.saturating_sub(self.last_change.load(Ordering::Relaxed));
        }
        d
    }
}

/// The live server state as the LB core sees it.
pub struct LiveView<'a>(pub &'a [Arc<Server>]);

impl crate::lb::ServerView for LiveView<'_> {
    fn usable(&self, idx: usize) -> bool {
        self.0
            .get(idx)
            .is_some_and(|s| s.usable.load(Ordering::Acquire))
    }
    fn conns(&self, idx: usize) -> u32 {
        self.0
            .get(idx)
            .map_or(0, |s| s.cur_conns.load(Ordering::Relaxed))
    }
    fn weight(&self, idx: usize) -> u32 {
        self.0
            .get(idx)
            .map_or(0, |s| s.weight.load(Ordering::Relaxed))
    }
}

/// A backend's servers (configuration order, then those added at run time) and the LB table
/// whose indices are positions in `servers`.
pub struct Pool {
    pub servers: Vec<Arc<Server>>,
    pub lb: crate::lb::Lb,
}

impl Pool {
    pub fn view(&self) -> LiveView<'_> {
        LiveView(&self.servers)
    }
}

impl Proxy {
    /// `enable|disable dynamic-cookie backend` and `set dynamic-cookie-key backend`: the
    /// servers without a `cookie` of their own get their dynamic one again, or none once off
    /// (HAProxy's `srv_set_dyncookie`; without a key they keep what they have).
    pub fn set_dynamic_cookie(&self, enable: Option<bool>, key: Option<&str>) {
        let mut st = self.dyn_cookie.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = enable {
            st.0 = e;
        }
        if let Some(k) = key {
            st.1 = Some(k.to_string());
        }
        for s in self
            .pool()
            .servers
            .iter()
            .filter(|s| s.cfg.opts.cookie.is_none())
        {
            match (st.0, &st.1) {
                (false, _) => {
                    s.cookie.store(None);
                    s.cookie_addr.store(None);
                }
                (true, Some(k)) => {
                    let addr = **s.addr.load();
                    let c = crate::http::cookie::dynamic_cookie(k, addr);
                    s.cookie.store(Some(Arc::new(c)));
                    s.cookie_addr.store(Some(Arc::new(addr)));
                }
                (true, None) => {}
            }
        }
    }

    /// The current servers and LB table (one consistent pair).
    pub fn pool(&self) -> arc_swap::Guard<Arc<Pool>> {
        self.pool.load()
    }

    /// Replaces the pool with `f(current)`'s servers, the LB table rebuilt from live state.
    fn update_pool(&self, f: impl FnOnce(&Pool) -> Vec<Arc<Server>>) {
        let _w = self.pool_write.lock().unwrap_or_else(|p| p.into_inner());
        let cur = self.pool.load();
        let servers = f(&cur);
        let lb_servers: Vec<crate::lb::LbServer> = servers
            .iter()
            .map(|s| crate::lb::LbServer::from_config(&s.cfg))
            .collect();
        let lb = cur
            .lb
            .with_servers(&lb_servers)
            .rebuild(&LiveView(&servers));
        self.pool.store(Arc::new(Pool { servers, lb }));
    }

    /// Rebuilds the LB table after a state or weight change.
    pub fn rebuild_lb(&self) {
        self.update_pool(|p| p.servers.clone());
    }

    /// Appends a server added at run time.
    pub fn push_server(&self, srv: Arc<Server>) {
        self.update_pool(|p| {
            let mut v = p.servers.clone();
            v.push(srv);
            v
        });
    }

    /// Takes a server out (`del server`); streams holding it finish with their own `Arc`.
    pub fn remove_server(&self, srv: &Arc<Server>) {
        srv.removed.store(true, Ordering::Release);
        self.update_pool(|p| {
            p.servers
                .iter()
                .filter(|s| !Arc::ptr_eq(s, srv))
                .cloned()
                .collect()
        });
    }

    /// Records whether the backend still has a usable server after a state change, at `now`
    /// (seconds since the start); HAProxy counts the backend DOWN when it has none.
    pub fn note_state(&self, now: u64) {
        let pool = self.pool();
        let up = pool.servers.is_empty() || pool.servers.iter().any(|s| s.is_usable());
        let st = &self.be_state;
        if st.up.swap(up, Ordering::Relaxed) == up {
            return;
        }
        let since = st.last_change.swap(now, Ordering::Relaxed);
        if up {
            st.down_time
                .fetch_add(now.saturating_sub(since), Ordering::Relaxed);
        } else {
            st.down_trans.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn is_frontend(&self) -> bool {
        self.cfg.cap.frontend
    }
    pub fn is_backend(&self) -> bool {
        self.cfg.cap.backend
    }
}

pub struct Model {
    /// When the process started (`show info` Uptime, `lastchg`).
    pub started: std::time::Instant,
    pub started_at: std::time::SystemTime,
    pub cfg: cfg::Config,
    pub proxies: Vec<Arc<Proxy>>,
    pub actconn: Gate,
    /// `set rate-limit … global`.
    pub rate_limits: rate_limits::RateLimits,
    /// Streams started so far (HAProxy's `global.req_count`: `%rt`, the stream's number).
    pub streams: AtomicU64,
    /// Process-wide counters for `show info`: `stot`/`sess_rate` are sessions (`CumConns`,
    /// `SessRate`), `conn_rate` connections, `req_tot` requests (`CumReq`).
    pub totals: Counters,
    /// Every stick table, shared by all workers.
    pub stick: crate::stick::Tables,
    /// Whether any proxy has `stats admin`: only then is a small POST body read before the rules.
    pub stats_admin: bool,
    /// The `resolvers` sections' nameserver counters (`show resolvers`).
    pub resolvers: crate::resolve::counters::Counters,
    /// The `peers` sections' state (`show peers`).
    pub peers: crate::peers::status::Registry,
}

pub use crate::clock::clock_ms;

fn peers_registry(cfg: &cfg::Config) -> crate::peers::status::Registry {
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(0));
    let mut r = crate::peers::status::Registry::from_config(&cfg.peers, now_us);
    for s in &mut r.sections {
        if let Some(c) = cfg.peers.iter().find(|p| p.name == s.name) {
            s.tables = crate::peers::task::table_ids(cfg, c)
                .into_iter()
                .map(|(id, _)| id)
                .collect();
        }
    }
    r
}

/// HAProxy's default global maxconn when none is set and no ulimit forces another value.
pub const DEFAULT_MAXCONN: u32 = 4096;

impl Model {
    /// Builds the model; rule compilation errors come back with their file:line.
    pub fn build(
        cfg: cfg::Config,
        maxconn_override: Option<u32>,
    ) -> Result<Model, Vec<crate::config::Diag>> {
        clock_ms();
        let mut rules = crate::http::rules::compile(&cfg)?.into_iter();
        let mut spec_errors = Vec::new();
        let global_max = cfg.global.maxconn.unwrap_or(DEFAULT_MAXCONN);
        let stick = crate::stick::Tables::build(&cfg);
        let proxies: Vec<Arc<Proxy>> = cfg
            .proxies
            .iter()
            .enumerate()
            .map(|(index, p)| {
                let lb_servers: Vec<crate::lb::LbServer> = p
                    .servers
                    .iter()
                    .map(crate::lb::LbServer::from_config)
                    .collect();
                let lb = crate::lb::Lb::with_hash(
                    &p.balance,
                    p.hash_type,
                    &lb_servers,
                    p.options.allbackups,
                )
                .with_balance_factor(p.hash_balance_factor);
                let servers: Vec<Arc<Server>> = p
                    .servers
                    .iter()
                    .filter_map(|s| match Server::new(&cfg.global, p, s, None) {
                        Ok(srv) => Some(Arc::new(srv)),
                        Err(e) => {
                            spec_errors.push(crate::config::Diag::alert(
                                &s.loc.file,
                                s.loc.line,
                                e,
                            ));
                            None
                        }
                    })
                    .collect();
                // HAProxy: a frontend's maxconn defaults to the global one (-N sets the default).
                let fe_max = p.maxconn.or(maxconn_override).unwrap_or(global_max);
                Arc::new(Proxy {
                    index,
                    name: p.name.clone(),
                    cfg: p.clone(),
                    feconn: Gate::new(fe_max),
                    beconn: AtomicU32::new(0),
                    pool: ArcSwap::from_pointee(Pool { servers, lb }),
                    pool_write: std::sync::Mutex::new(()),
                    rules: rules.next().unwrap_or_default(),
                    queued: AtomicU32::new(0),
                    queue: tokio::sync::Notify::new(),
                    lb_cursor: AtomicU64::new(0),
                    counters: Counters::default(),
                    fe_counters: Counters::default(),
                    be_state: BackendState {
                        up: AtomicBool::new(
                            p.servers.is_empty()
                                || p.servers
                                    .iter()
                                    .any(|s| !s.opts.disabled && s.opts.weight > 0),
                        ),
                        down_trans: AtomicU64::new(0),
                        last_change: AtomicU64::new(0),
                        down_time: AtomicU64::new(0),
                    },
                    table: p
                        .stick_table
                        .as_ref()
                        .and_then(|_| stick.find(&p.name).cloned()),
                    dyn_cookie: std::sync::Mutex::new((
                        p.extra.cookie.as_ref().is_some_and(|c| c.dynamic),
                        p.extra.dynamic_cookie_key.clone(),
                    )),
                })
            })
            .collect();
        if !spec_errors.is_empty() {
            return Err(spec_errors);
        }
        let stats_admin = proxies.iter().any(|p| p.rules.stats_admin.is_some());
        Ok(Model {
            stats_admin,
            resolvers: crate::resolve::counters::Counters::from_config(&cfg.resolvers),
            peers: peers_registry(&cfg),
            started: std::time::Instant::now(),
            started_at: std::time::SystemTime::now(),
            proxies,
            actconn: Gate::new(global_max),
            rate_limits: rate_limits::RateLimits::new(cfg.global.maxcomprate.unwrap_or(0)),
            streams: AtomicU64::new(0),
            totals: Counters::default(),
            stick,
            cfg,
        })
    }

    /// Milliseconds on the counters' clock.
    pub fn now_ms(&self) -> u64 {
        clock_ms()
    }

    /// What the stick fetches and `track-sc` rules of proxy `px` see at `now`.
    pub fn stick_view<'a>(
        &'a self,
        px: &'a Proxy,
        sess: Option<&'a crate::stick::StkCtrs>,
        strm: Option<&'a crate::stick::StkCtrs>,
        now: u64,
    ) -> Option<crate::stick::StickView<'a>> {
        if self.stick.is_empty() {
            return None;
        }
        Some(crate::stick::StickView {
            now_ms: now,
            sess,
            strm,
            own: px.table.as_ref(),
            tables: &self.stick,
        })
    }

    pub fn proxy(&self, name: &str) -> Option<&Arc<Proxy>> {
        self.proxies.iter().find(|p| p.name == name)
    }
    pub fn backend(&self, name: &str) -> Option<&Arc<Proxy>> {
        self.proxies
            .iter()
            .find(|p| p.is_backend() && p.name == name)
    }
}

impl crate::ana::sample::Counts for Model {
    fn be_conn(&self, backend: &str) -> Option<i64> {
        let p = self.proxy(backend)?;
        Some(i64::from(p.beconn.load(Ordering::Relaxed)))
    }

    fn srv_conn(&self, backend: &str, server: &str) -> Option<i64> {
        let pool = self.proxy(backend)?.pool();
        let s = pool.servers.iter().find(|s| s.name == server)?;
        Some(i64::from(s.cur_conns.load(Ordering::Relaxed)))
    }

    fn gauge(&self, g: crate::ana::sample::Gauge, proxy: &str, server: &str) -> Option<i64> {
        use crate::ana::sample::Gauge;
        let p = self.proxy(proxy)?;
        let now = self.now_ms();
        Some(i64::from(match g {
            Gauge::FeConn => p.feconn.current(),
            Gauge::FeSessRate => p.fe_counters.sess_rate.read(now),
            Gauge::FeReqRate => p.fe_counters.req_rate.read(now),
            Gauge::BeSessRate => p.counters.sess_rate.read(now),
            Gauge::SrvSessRate => {
                let pool = p.pool();
                let s = pool.servers.iter().find(|s| s.name == server)?;
                s.counters.sess_rate.read(now)
            }
        }))
    }

    fn nbsrv(&self, backend: &str) -> Option<i64> {
        let p = self.proxy(backend)?;
        let pool = p.pool();
        let count = |backup: bool| {
            pool.servers
                .iter()
                .filter(|s| s.cfg.opts.backup == backup && s.is_usable())
                .count() as i64
        };
        Some(match count(false) {
            0 if p.cfg.options.allbackups => count(true),
            0 => count(true).min(1),
            n => n,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clear_counters_resets_maxima_then_everything() {
        let c = Counters::default();
        c.session(1_000);
        c.request(1_000);
        c.smax.update(3);
        c.count_status(200);
        c.times(
            true,
            stats::Sample {
                queue: 0,
                connect: 1,
                response: 2,
                total: 9,
            },
        );
        c.clear(false);
        assert_eq!(
            (c.smax.get(), c.sess_rate_max.get(), c.req_rate_max.get()),
            (0, 0, 0)
        );
        assert_eq!(c.times.t_max.get(), 0);
        assert_eq!(c.times.averages(1).total, 9);
        assert_eq!(c.stot.load(Ordering::Relaxed), 1);
        c.clear(true);
        assert_eq!(c.stot.load(Ordering::Relaxed), 0);
        assert_eq!(c.hrsp[1].load(Ordering::Relaxed), 0);
        assert_eq!(c.times.averages(1).total, 0);
        assert_eq!(c.last_sess.ago(2_000), None);
        // The current rate is a window, not a counter: it stays.
        assert_eq!(c.sess_rate.read(1_500), 1);
    }

    /// A release wakes a session waiting for a slot (a release takes the Notify's lock only
    /// when a waiter is counted: the count must never miss one).
    #[test]
    fn a_release_wakes_a_waiter() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let g = std::sync::Arc::new(Gate::new(1));
            assert!(g.try_take());
            let waiter = {
                let g = std::sync::Arc::clone(&g);
                tokio::spawn(async move { g.enter().await })
            };
            // Let the waiter register and find the gate full.
            for _ in 0..10 {
                tokio::task::yield_now().await;
            }
            assert!(!waiter.is_finished());
            assert_eq!(g.waiting.load(Ordering::SeqCst), 1);
            g.leave();
            tokio::time::timeout(std::time::Duration::from_secs(10), waiter)
                .await
                .expect("woken")
                .expect("joined");
            assert_eq!(g.current(), 1, "the waiter took the slot");
            assert_eq!(g.waiting.load(Ordering::SeqCst), 0);
        });
    }

    #[test]
    fn gate_limits_and_releases() {
        let g = Gate::new(2);
        assert!(g.try_enter());
        assert!(g.try_enter());
        assert!(!g.try_enter());
        g.leave();
        assert_eq!(g.current(), 1);
        assert!(g.try_enter());
        assert_eq!(g.current(), 2);
    }
}
