//! The data the proxy hands to this crate: a point-in-time snapshot of every proxy, listener and
//! server, plus process facts for `show info`. Plain structs, filled by the proxy; every reply
//! format is derived from them here.
//!
//! Conventions: times are already turned into "seconds ago" by the proxy (this crate never reads a
//! clock); weights are in the user scale (0..=256) HAProxy prints; ids are HAProxy's (`iid` of
//! proxies, `sid` of servers, `luid` of listeners).

use std::net::IpAddr;

/// Everything `show stat`, `show servers state`, `show backend`, `show info` and the server
/// commands need.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    pub info: ProcessInfo,
    /// In configuration order (HAProxy dumps proxies in that order).
    pub proxies: Vec<ProxySnap>,
}

/// `mode` of a proxy as HAProxy prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProxyMode {
    #[default]
    Tcp,
    Http,
    Health,
    Cli,
}

impl ProxyMode {
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyMode::Tcp => "tcp",
            ProxyMode::Http => "http",
            ProxyMode::Health => "health",
            ProxyMode::Cli => "cli",
        }
    }
}

/// One `frontend`, `backend` or `listen` section.
#[derive(Debug, Clone, Default)]
pub struct ProxySnap {
    pub name: String,
    /// `iid`: the proxy's numeric id (uuid). With a `stats socket` in `global`, the first user
    /// proxy gets 2.
    pub id: u32,
    /// Set when the id came from an `id` keyword (`bk_f_forced_id` in `show servers state`).
    pub forced_id: bool,
    pub mode: ProxyMode,
    /// Disabled proxies are skipped by every dump.
    pub disabled: bool,
    /// Present when the proxy has the frontend capability (frontend or listen).
    pub frontend: Option<FrontendSnap>,
    /// Listener rows: only emitted when `option socket-stats` is set on the proxy.
    pub socket_stats: bool,
    pub listeners: Vec<ListenerSnap>,
    /// Present when the proxy has the backend capability (backend or listen).
    pub backend: Option<BackendSnap>,
    /// In configuration order.
    pub servers: Vec<ServerSnap>,
}

/// FRONTEND row facts.
#[derive(Debug, Clone, Default)]
pub struct FrontendSnap {
    pub state: FrontendState,
    /// `maxconn` of the frontend (`slim`).
    pub maxconn: u32,
    /// `rate-limit sessions` (`rate_lim`), 0 if unset.
    pub rate_limit: u32,
    pub counters: Counters,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FrontendState {
    #[default]
    Open,
    /// Disabled or stopped.
    Stop,
    Paused,
}

/// One `bind` line's listener (row only with `option socket-stats`).
#[derive(Debug, Clone, Default)]
pub struct ListenerSnap {
    /// The bind `name`, or `sock-<n>`.
    pub name: String,
    /// `luid`: 1..n in bind order.
    pub id: u32,
    pub state: ListenerState,
    pub maxconn: u32,
    /// Printed in the `addr` column: `ip:port`, `[ipv6]:port`, or `unix`.
    pub addr: String,
    pub counters: Counters,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ListenerState {
    #[default]
    Open,
    Waiting,
    Full,
}

/// BACKEND row facts that cannot be derived from the servers.
#[derive(Debug, Clone, Default)]
pub struct BackendSnap {
    /// `fullconn` (the BACKEND `slim`).
    pub fullconn: u32,
    /// LB algorithm as printed in `algo` (e.g. `roundrobin`).
    pub algo: String,
    /// Whether the algorithm accepts any weight (roundrobin, leastconn, random, first…): static
    /// ones (static-rr, hashes with map-based) only accept `0%`/`100%` through the CLI.
    pub dynamic_weights: bool,
    /// Whether `add server` may add to it: HAProxy 2.6 wants an algorithm that rebuilds its
    /// tables at run time (roundrobin, leastconn, first), not a static or map-based one.
    pub dynamic_servers: bool,
    /// `option allbackups`.
    pub all_backups: bool,
    /// Backend cookie name (`cookie` column), if any.
    pub cookie: Option<String>,
    /// Times the whole backend went down (`chkdown`).
    pub down_trans: u64,
    /// Seconds since the backend last changed state (`lastchg`).
    pub last_change_secs: u32,
    /// Total seconds the backend spent DOWN (`downtime`).
    pub downtime_secs: u32,
    pub counters: Counters,
}

/// Operational state (`srv_op_state`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OpState {
    #[default]
    Stopped = 0,
    Starting = 1,
    Running = 2,
    Stopping = 3,
}

/// Administrative state flags (`srv_admin_state`), as HAProxy's bit values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AdminFlags(pub u8);

impl AdminFlags {
    /// Forced maintenance (`disable server`, `state maint`, `disabled` keyword).
    pub const FMAINT: u8 = 0x01;
    /// Maintenance inherited from a tracked server.
    pub const IMAINT: u8 = 0x02;
    /// Maintenance from the configuration (`disabled`; set together with FMAINT).
    pub const CMAINT: u8 = 0x04;
    /// Forced drain (`state drain`).
    pub const FDRAIN: u8 = 0x08;
    /// Drain inherited from a tracked server.
    pub const IDRAIN: u8 = 0x10;
    /// Maintenance after a DNS resolution failure.
    pub const RMAINT: u8 = 0x20;
    /// FQDN set from the CLI.
    pub const HMAINT: u8 = 0x40;
    /// Any maintenance (HAProxy's SRV_ADMF_MAINT mask).
    pub const MAINT_MASK: u8 = Self::FMAINT | Self::IMAINT | Self::RMAINT;
    pub const DRAIN_MASK: u8 = Self::FDRAIN | Self::IDRAIN;

    pub fn maint(self) -> bool {
        self.0 & Self::MAINT_MASK != 0
    }
    pub fn drain(self) -> bool {
        self.0 & Self::DRAIN_MASK != 0
    }
    pub fn has(self, bit: u8) -> bool {
        self.0 & bit != 0
    }
}

/// `check_status` codes, with the numbers `show servers state` prints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CheckStatus {
    Unknown = 0,
    #[default]
    Ini = 1,
    Start = 2,
    Checked = 3,
    Hana = 4,
    SockErr = 5,
    L4Ok = 6,
    L4Tout = 7,
    L4Con = 8,
    L6Ok = 9,
    L6Tout = 10,
    L6Rsp = 11,
    L7Tout = 12,
    L7Rsp = 13,
    L57Data = 14,
    L7Ok = 15,
    L7Okc = 16,
    L7Sts = 17,
    ProcErr = 18,
    ProcTout = 19,
    ProcOk = 20,
}

impl CheckStatus {
    /// The short code (`check_status` column).
    pub fn code(self) -> &'static str {
        match self {
            CheckStatus::Unknown => "UNK",
            CheckStatus::Ini => "INI",
            CheckStatus::Start => "START",
            CheckStatus::Checked => "CHECKED",
            CheckStatus::Hana => "HANA",
            CheckStatus::SockErr => "SOCKERR",
            CheckStatus::L4Ok => "L4OK",
            CheckStatus::L4Tout => "L4TOUT",
            CheckStatus::L4Con => "L4CON",
            CheckStatus::L6Ok => "L6OK",
            CheckStatus::L6Tout => "L6TOUT",
            CheckStatus::L6Rsp => "L6RSP",
            CheckStatus::L7Tout => "L7TOUT",
            CheckStatus::L7Rsp => "L7RSP",
            CheckStatus::L57Data => "L57DATA",
            CheckStatus::L7Ok => "L7OK",
            CheckStatus::L7Okc => "L7OKC",
            CheckStatus::L7Sts => "L7STS",
            CheckStatus::ProcErr => "PROCERR",
            CheckStatus::ProcTout => "PROCTOUT",
            CheckStatus::ProcOk => "PROCOK",
        }
    }

    /// The human text (`check_desc` column, log "reason").
    pub fn desc(self) -> &'static str {
        match self {
            CheckStatus::Unknown => "Unknown",
            CheckStatus::Ini => "Initializing",
            CheckStatus::Start => "Start",
            CheckStatus::Checked => "No status change",
            CheckStatus::Hana => "Health analyze",
            CheckStatus::SockErr => "Socket error",
            CheckStatus::L4Ok => "Layer4 check passed",
            CheckStatus::L4Tout => "Layer4 timeout",
            CheckStatus::L4Con => "Layer4 connection problem",
            CheckStatus::L6Ok => "Layer6 check passed",
            CheckStatus::L6Tout => "Layer6 timeout",
            CheckStatus::L6Rsp => "Layer6 invalid response",
            CheckStatus::L7Tout => "Layer7 timeout",
            CheckStatus::L7Rsp => "Layer7 invalid response",
            CheckStatus::L57Data => "Layer5-7 data found",
            CheckStatus::L7Ok => "Layer7 check passed",
            CheckStatus::L7Okc => "Layer7 check conditionally passed",
            CheckStatus::L7Sts => "Layer7 wrong status",
            CheckStatus::ProcErr => "External check error",
            CheckStatus::ProcTout => "External check timeout",
            CheckStatus::ProcOk => "External check passed",
        }
    }

    /// `srv_check_result` in `show servers state`: 0 unknown, 1 neutral, 2 failed, 3 passed,
    /// 4 conditionally passed.
    pub fn result(self) -> u8 {
        match self {
            CheckStatus::Unknown | CheckStatus::Ini | CheckStatus::Start => 0,
            CheckStatus::Checked | CheckStatus::L57Data => 1,
            CheckStatus::L4Ok | CheckStatus::L6Ok | CheckStatus::L7Ok | CheckStatus::ProcOk => 3,
            CheckStatus::L7Okc => 4,
            _ => 2,
        }
    }

    /// HAProxy only reports a code (HTTP status…) from L57DATA on.
    pub fn has_code(self) -> bool {
        self as u8 >= CheckStatus::L57Data as u8
    }

    /// A duration exists once a check has completed.
    pub fn has_duration(self) -> bool {
        self as u8 >= CheckStatus::Checked as u8
    }
}

/// A health check or an agent check of one server.
#[derive(Debug, Clone, Default)]
pub struct CheckSnap {
    /// `check` (or `agent-check`) was configured.
    pub configured: bool,
    /// Enabled (configured and not turned off with `disable health|agent`).
    pub enabled: bool,
    /// Paused (server in maintenance).
    pub paused: bool,
    /// A check is running right now (`* ` prefix on the status).
    pub in_progress: bool,
    pub status: CheckStatus,
    /// L5-7 code (HTTP status) of the last result.
    pub code: u32,
    /// Milliseconds the last check took.
    pub duration_ms: u64,
    /// Free text of the last result (`last_chk`): reason phrase, `Connection refused`…
    pub desc: String,
    pub rise: u32,
    pub fall: u32,
    /// Raw health counter, 0..rise+fall-1 (UP from `rise` on).
    pub health: u32,
    /// Check port (`srv_check_port`; 0 when it is the server's).
    pub port: u16,
    /// Check address (`srv_check_addr`), when set with `addr`.
    pub addr: Option<IpAddr>,
    /// Failed checks while UP (`chkfail`).
    pub failed: u64,
    /// UP→DOWN transitions (`chkdown`).
    pub down_trans: u64,
}

impl CheckSnap {
    /// The bits `show servers state` prints in `srv_check_state` / `srv_agent_state`.
    pub fn state_bits(&self) -> u8 {
        (self.in_progress as u8)
            | ((self.configured as u8) << 1)
            | ((self.enabled as u8) << 2)
            | ((self.paused as u8) << 3)
    }
    /// Checks are reported only while enabled and not paused.
    pub fn reported(&self) -> bool {
        self.enabled && !self.paused
    }
}

/// One `server` line.
#[derive(Debug, Clone, Default)]
pub struct ServerSnap {
    pub name: String,
    /// `sid` (puid): 1..n in configuration order unless forced with `id`.
    pub id: u32,
    pub forced_id: bool,
    pub backup: bool,
    pub op_state: OpState,
    pub admin: AdminFlags,
    /// `backend/server` this server tracks (`track`), if any.
    pub tracks: Option<(String, String)>,
    pub addr: Option<IpAddr>,
    pub port: u16,
    /// A unix-socket server: `addr` reads `unix` in `show stat`, `-` in `show servers state`.
    pub unix: bool,
    /// The port is an offset added to the client's destination port (`+N`/`-N`, HAProxy's
    /// SRV_F_MAPPORTS); `port` then holds that offset as HAProxy stores it (16-bit wrap).
    pub port_map: bool,
    pub fqdn: Option<String>,
    /// The SRV record a `server-template` follows.
    pub srvrecord: Option<String>,
    pub use_ssl: bool,
    /// User weight (set by `weight`/CLI) and initial weight from the configuration.
    pub uweight: u32,
    pub iweight: u32,
    /// Effective weight in user scale (uweight, reduced during slowstart).
    pub eweight: u32,
    /// `maxconn` (0: unlimited, `slim` empty).
    pub maxconn: u32,
    /// `maxqueue` (0: unlimited, `qlimit` empty).
    pub maxqueue: u32,
    /// Slowstart throttle percentage while starting.
    pub throttle_pct: Option<u32>,
    /// `pool-max-conn` (`src_ilim`), None when unlimited.
    pub idle_limit: Option<u32>,
    pub cookie: Option<String>,
    /// `observe` set: `hanafail` is reported.
    pub observe: bool,
    pub hanafail: u64,
    pub check: CheckSnap,
    pub agent: CheckSnap,
    /// Seconds since the last state change (`lastchg`, `srv_time_since_last_change`).
    pub last_change_secs: u32,
    /// Total seconds DOWN (`downtime`, only shown when the check is enabled).
    pub downtime_secs: u32,
    pub counters: Counters,
}

/// The traffic counters of one row. Which ones a row prints depends on its type and mode, as in
/// HAProxy; the proxy fills what it has and leaves the rest at 0.
#[derive(Debug, Clone, Default)]
pub struct Counters {
    pub qcur: u32,
    pub qmax: u32,
    pub scur: u32,
    pub smax: u32,
    pub stot: u64,
    pub bin: u64,
    pub bout: u64,
    pub dreq: u64,
    pub dresp: u64,
    pub ereq: u64,
    pub econ: u64,
    pub eresp: u64,
    pub wretr: u64,
    pub wredis: u64,
    pub lbtot: u64,
    pub rate: u32,
    pub rate_max: u32,
    /// hrsp_1xx, 2xx, 3xx, 4xx, 5xx, other.
    pub hrsp: [u64; 6],
    pub req_rate: u32,
    pub req_rate_max: u32,
    pub req_tot: u64,
    pub cli_abrt: u64,
    pub srv_abrt: u64,
    pub comp_in: u64,
    pub comp_out: u64,
    pub comp_byp: u64,
    pub comp_rsp: u64,
    /// Seconds since the last session; None prints -1.
    pub lastsess_secs: Option<u32>,
    pub qtime: u32,
    pub ctime: u32,
    pub rtime: u32,
    pub ttime: u32,
    pub qtime_max: u32,
    pub ctime_max: u32,
    pub rtime_max: u32,
    pub ttime_max: u32,
    pub conn_rate: u32,
    pub conn_rate_max: u32,
    pub conn_tot: u64,
    pub intercepted: u64,
    pub dcon: u64,
    pub dses: u64,
    pub wrew: u64,
    pub connect: u64,
    pub reuse: u64,
    pub cache_lookups: u64,
    pub cache_hits: u64,
    pub eint: u64,
    pub srv_icur: u32,
    pub idle_conn_cur: u32,
    pub safe_conn_cur: u32,
    pub used_conn_cur: u32,
    pub need_conn_est: u32,
    /// Stats-module columns after `-`.
    pub modules: ModuleCounters,
}

/// The stats modules of HAProxy 2.6 (Debian build), in the order they print after `-`.
#[derive(Debug, Clone, Default)]
pub struct ModuleCounters {
    /// ssl_sess, ssl_reused_sess, ssl_failed_handshake.
    pub ssl: [u64; 3],
    /// h2_headers_rcvd … h2_backend_total_streams (13 columns).
    pub h2: [u64; 13],
    /// h1_open_connections … h1_spliced_bytes_out (8 columns).
    pub h1: [u64; 8],
}

/// Process facts for `show info`. Fields HAProxy prints as strings stay strings here.
#[derive(Debug, Clone, Default)]
pub struct ProcessInfo {
    pub name: String,
    pub version: String,
    pub release_date: String,
    pub nbthread: u32,
    pub pid: u32,
    pub uptime_secs: u32,
    pub memmax_mb: u32,
    pub pool_alloc_bytes: u64,
    pub pool_used_bytes: u64,
    pub pool_failed: u32,
    pub ulimit_n: u32,
    pub maxsock: u32,
    pub maxconn: u32,
    pub hard_maxconn: u32,
    pub curr_conns: u32,
    pub cum_conns: u32,
    pub cum_req: u32,
    pub max_ssl_conns: u32,
    pub curr_ssl_conns: u32,
    pub cum_ssl_conns: u32,
    pub maxpipes: u32,
    pub pipes_used: u32,
    pub pipes_free: u32,
    pub conn_rate: u32,
    pub conn_rate_limit: u32,
    pub max_conn_rate: u32,
    pub sess_rate: u32,
    pub sess_rate_limit: u32,
    pub max_sess_rate: u32,
    pub ssl_rate: u32,
    pub ssl_rate_limit: u32,
    pub max_ssl_rate: u32,
    pub ssl_frontend_key_rate: u32,
    pub ssl_frontend_max_key_rate: u32,
    pub ssl_frontend_session_reuse_pct: u32,
    pub ssl_backend_key_rate: u32,
    pub ssl_backend_max_key_rate: u32,
    pub ssl_cache_lookups: u32,
    pub ssl_cache_misses: u32,
    pub compress_bps_in: u32,
    pub compress_bps_out: u32,
    pub compress_bps_rate_lim: u32,
    pub tasks: u32,
    pub run_queue: u32,
    pub idle_pct: u32,
    pub node: String,
    /// `description` from the global section; omitted when None.
    pub description: Option<String>,
    pub stopping: bool,
    pub jobs: u32,
    pub unstoppable_jobs: u32,
    pub listeners: u32,
    pub active_peers: u32,
    pub connected_peers: u32,
    pub dropped_logs: u32,
    pub busy_polling: u32,
    pub failed_resolutions: u32,
    pub total_bytes_out: u64,
    pub total_spliced_bytes_out: u64,
    pub bytes_out_rate: u64,
    pub debug_commands_issued: u32,
    pub cum_recv_logs: u32,
    pub build_info: String,
    pub memmax_bytes: u32,
    pub start_time_sec: u32,
    pub tainted: u32,
}

impl Snapshot {
    /// Looks a proxy up the way the CLI does: `#<id>` or a name.
    pub fn find_proxy(&self, key: &str) -> Option<usize> {
        if let Some(id) = key.strip_prefix('#') {
            let id: u32 = id.parse().ok()?;
            return self.proxies.iter().position(|p| p.id == id);
        }
        self.proxies.iter().position(|p| p.name == key)
    }
}

impl Snapshot {
    /// Looks a backend up (`#<id>` or name), skipping frontends that share the name, as HAProxy's
    /// `proxy_be_by_name` does.
    pub fn find_backend(&self, key: &str) -> Option<usize> {
        let is_be = |p: &ProxySnap| p.backend.is_some();
        if let Some(id) = key.strip_prefix('#') {
            let id: u32 = id.parse().ok()?;
            return self.proxies.iter().position(|p| is_be(p) && p.id == id);
        }
        self.proxies.iter().position(|p| is_be(p) && p.name == key)
    }
}

impl ProxySnap {
    /// Looks a server up: `#<id>` or a name.
    pub fn find_server(&self, key: &str) -> Option<usize> {
        if let Some(id) = key.strip_prefix('#') {
            let id: u32 = id.parse().ok()?;
            return self.servers.iter().position(|s| s.id == id);
        }
        self.servers.iter().position(|s| s.name == key)
    }
}
