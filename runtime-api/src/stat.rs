//! `show stat`: one column table drives the CSV, typed and JSON renderings (HAProxy 2.6's
//! `stat_fields[]` plus the stats-module columns of the Debian build).

use crate::field::{Tags, Ty, Val};
use crate::model::*;
use std::fmt::Write as _;

/// One column of `show stat`.
pub struct StatCol {
    pub name: &'static str,
    /// Origin, nature and scope letters as `show stat typed` prints them (e.g. `MCP`).
    pub tags: Tags,
    pub ty: Ty,
    /// Text printed by `show stat typed desc`.
    pub desc: &'static str,
}

const fn c(name: &'static str, tags: &'static [u8; 3], ty: Ty, desc: &'static str) -> StatCol {
    StatCol {
        name,
        tags: Tags(*tags),
        ty,
        desc,
    }
}

/// Number of static columns (before the `-` separator).
pub const STATIC_COLS: usize = 103;
/// Static columns plus the module columns (the `-` is not a field).
pub const NB_COLS: usize = 127;

/// HAProxy 2.6's columns in `show stat` order; index = the field position (`idx`).
pub static STAT_COLS: [StatCol; NB_COLS] = [
    c("pxname", b"KNS", Ty::Str, "Proxy name"),
    c("svname", b"KNS", Ty::Str, "Server name"),
    c(
        "qcur",
        b"MGP",
        Ty::U32,
        "Number of current queued connections",
    ),
    c(
        "qmax",
        b"MMP",
        Ty::U32,
        "Highest value of queued connections encountered since process started",
    ),
    c(
        "scur",
        b"MGP",
        Ty::U32,
        "Number of current sessions on the frontend, backend or server",
    ),
    c(
        "smax",
        b"MMP",
        Ty::U32,
        "Highest value of current sessions encountered since process started",
    ),
    c(
        "slim",
        b"CLP",
        Ty::U32,
        "Frontend/listener/server's maxconn, backend's fullconn",
    ),
    c(
        "stot",
        b"MCP",
        Ty::U64,
        "Total number of sessions since process started",
    ),
    c(
        "bin",
        b"MCP",
        Ty::U64,
        "Total number of request bytes since process started",
    ),
    c(
        "bout",
        b"MCP",
        Ty::U64,
        "Total number of response bytes since process started",
    ),
    c(
        "dreq",
        b"MCP",
        Ty::U64,
        "Total number of denied requests since process started",
    ),
    c(
        "dresp",
        b"MCP",
        Ty::U64,
        "Total number of denied responses since process started",
    ),
    c(
        "ereq",
        b"MCP",
        Ty::U64,
        "Total number of invalid requests since process started",
    ),
    c(
        "econ",
        b"MCP",
        Ty::U64,
        "Total number of failed connections to server since the worker process started",
    ),
    c(
        "eresp",
        b"MCP",
        Ty::U64,
        "Total number of invalid responses since the worker process started",
    ),
    c(
        "wretr",
        b"MCP",
        Ty::U64,
        "Total number of server connection retries since the worker process started",
    ),
    c(
        "wredis",
        b"MCP",
        Ty::U64,
        "Total number of server redispatches due to connection failures since the worker process started",
    ),
    c(
        "status",
        b"SGP",
        Ty::Str,
        "Frontend/listen status: OPEN/WAITING/FULL/STOP; backend: UP/DOWN; server: last check status",
    ),
    c(
        "weight",
        b"MaP",
        Ty::U32,
        "Server's effective weight, or sum of active servers' effective weights for a backend",
    ),
    c(
        "act",
        b"SGP",
        Ty::U32,
        "Total number of active UP servers with a non-zero weight",
    ),
    c(
        "bck",
        b"SGP",
        Ty::U32,
        "Total number of backup UP servers with a non-zero weight",
    ),
    c(
        "chkfail",
        b"MCP",
        Ty::U64,
        "Total number of failed individual health checks per server/backend, since the worker process started",
    ),
    c(
        "chkdown",
        b"MCP",
        Ty::U64,
        "Total number of failed checks causing UP to DOWN server transitions, per server/backend, since the worker process started",
    ),
    c(
        "lastchg",
        b"MAP",
        Ty::U32,
        "How long ago the last server state changed, in seconds",
    ),
    c(
        "downtime",
        b"MCP",
        Ty::U32,
        "Total time spent in DOWN state, for server or backend",
    ),
    c(
        "qlimit",
        b"CGS",
        Ty::U32,
        "Limit on the number of connections in queue, for servers only (maxqueue argument)",
    ),
    c("pid", b"KGP", Ty::U32, "Relative worker process number (1)"),
    c(
        "iid",
        b"KGS",
        Ty::U32,
        "Frontend or Backend numeric identifier ('id' setting)",
    ),
    c(
        "sid",
        b"KGS",
        Ty::U32,
        "Server numeric identifier ('id' setting)",
    ),
    c(
        "throttle",
        b"MaP",
        Ty::U32,
        "Throttling ratio applied to a server's maxconn and weight during the slowstart period (0 to 100%)",
    ),
    c(
        "lbtot",
        b"MCP",
        Ty::U64,
        "Total number of requests routed by load balancing since the worker process started (ignores queue pop and stickiness)",
    ),
    c(
        "tracked",
        b"CNS",
        Ty::Str,
        "Name of the other server this server tracks for its state",
    ),
    c(
        "type",
        b"CGS",
        Ty::U32,
        "Type of the object (Listener, Frontend, Backend, Server)",
    ),
    c(
        "rate",
        b"MRP",
        Ty::U32,
        "Total number of sessions processed by this object over the last second (sessions for listeners/frontends, requests for backends/servers)",
    ),
    c(
        "rate_lim",
        b"CLP",
        Ty::U32,
        "Limit on the number of sessions accepted in a second (frontend only, 'rate-limit sessions' setting)",
    ),
    c(
        "rate_max",
        b"MMP",
        Ty::U32,
        "Highest value of sessions per second observed since the worker process started",
    ),
    c(
        "check_status",
        b"MOP",
        Ty::Str,
        "Status report of the server's latest health check, prefixed with '*' if a check is currently in progress",
    ),
    c(
        "check_code",
        b"MOP",
        Ty::U32,
        "HTTP/SMTP/LDAP status code reported by the latest server health check",
    ),
    c(
        "check_duration",
        b"MDP",
        Ty::U64,
        "Total duration of the latest server health check, in milliseconds",
    ),
    c(
        "hrsp_1xx",
        b"MCP",
        Ty::U64,
        "Total number of HTTP responses with status 100-199 returned by this object since the worker process started",
    ),
    c(
        "hrsp_2xx",
        b"MCP",
        Ty::U64,
        "Total number of HTTP responses with status 200-299 returned by this object since the worker process started",
    ),
    c(
        "hrsp_3xx",
        b"MCP",
        Ty::U64,
        "Total number of HTTP responses with status 300-399 returned by this object since the worker process started",
    ),
    c(
        "hrsp_4xx",
        b"MCP",
        Ty::U64,
        "Total number of HTTP responses with status 400-499 returned by this object since the worker process started",
    ),
    c(
        "hrsp_5xx",
        b"MCP",
        Ty::U64,
        "Total number of HTTP responses with status 500-599 returned by this object since the worker process started",
    ),
    c(
        "hrsp_other",
        b"MCP",
        Ty::U64,
        "Total number of HTTP responses with status <100, >599 returned by this object since the worker process started (error -1 included)",
    ),
    c(
        "hanafail",
        b"MCP",
        Ty::U64,
        "Total number of failed checks caused by an 'on-error' directive after an 'observe' condition matched",
    ),
    c(
        "req_rate",
        b"MRP",
        Ty::U32,
        "Number of HTTP requests processed over the last second on this object",
    ),
    c(
        "req_rate_max",
        b"MMP",
        Ty::U32,
        "Highest value of http requests observed since the worker process started",
    ),
    c(
        "req_tot",
        b"MCP",
        Ty::U64,
        "Total number of HTTP requests processed by this object since the worker process started",
    ),
    c(
        "cli_abrt",
        b"MCP",
        Ty::U64,
        "Total number of requests or connections aborted by the client since the worker process started",
    ),
    c(
        "srv_abrt",
        b"MCP",
        Ty::U64,
        "Total number of requests or connections aborted by the server since the worker process started",
    ),
    c(
        "comp_in",
        b"MCP",
        Ty::U64,
        "Total number of bytes submitted to the HTTP compressor for this object since the worker process started",
    ),
    c(
        "comp_out",
        b"MCP",
        Ty::U64,
        "Total number of bytes emitted by the HTTP compressor for this object since the worker process started",
    ),
    c(
        "comp_byp",
        b"MCP",
        Ty::U64,
        "Total number of bytes that bypassed HTTP compression for this object since the worker process started (CPU/memory/bandwidth limitation)",
    ),
    c(
        "comp_rsp",
        b"MCP",
        Ty::U64,
        "Total number of HTTP responses that were compressed for this object since the worker process started",
    ),
    c(
        "lastsess",
        b"MAP",
        Ty::S32,
        "How long ago some traffic was seen on this object on this worker process, in seconds",
    ),
    c(
        "last_chk",
        b"MOP",
        Ty::Str,
        "Short description of the latest health check report for this server (see also check_desc)",
    ),
    c(
        "last_agt",
        b"MOP",
        Ty::Str,
        "Short description of the latest agent check report for this server (see also agent_desc)",
    ),
    c(
        "qtime",
        b"MaP",
        Ty::U32,
        "Time spent in the queue, in milliseconds, averaged over the 1024 last requests (backend/server)",
    ),
    c(
        "ctime",
        b"MaP",
        Ty::U32,
        "Time spent waiting for a connection to complete, in milliseconds, averaged over the 1024 last requests (backend/server)",
    ),
    c(
        "rtime",
        b"MaP",
        Ty::U32,
        "Time spent waiting for a server response, in milliseconds, averaged over the 1024 last requests (backend/server)",
    ),
    c(
        "ttime",
        b"MaP",
        Ty::U32,
        "Total request+response time (request+queue+connect+response+processing), in milliseconds, averaged over the 1024 last requests (backend/server)",
    ),
    c(
        "agent_status",
        b"MOP",
        Ty::Str,
        "Status report of the server's latest agent check, prefixed with '*' if a check is currently in progress",
    ),
    c(
        "agent_code",
        b"MOP",
        Ty::U32,
        "Status code reported by the latest server agent check",
    ),
    c(
        "agent_duration",
        b"MDP",
        Ty::U64,
        "Total duration of the latest server agent check, in milliseconds",
    ),
    c(
        "check_desc",
        b"MOP",
        Ty::Str,
        "Textual description of the latest health check report for this server",
    ),
    c(
        "agent_desc",
        b"MOP",
        Ty::Str,
        "Textual description of the latest agent check report for this server",
    ),
    c(
        "check_rise",
        b"CGS",
        Ty::U32,
        "Number of successful health checks before declaring a server UP (server 'rise' setting)",
    ),
    c(
        "check_fall",
        b"CGS",
        Ty::U32,
        "Number of failed health checks before declaring a server DOWN (server 'fall' setting)",
    ),
    c(
        "check_health",
        b"CGS",
        Ty::U32,
        "Current server health check level (0..fall-1=DOWN, fall..rise-1=UP)",
    ),
    c(
        "agent_rise",
        b"CGS",
        Ty::U32,
        "Number of successful agent checks before declaring a server UP (server 'rise' setting)",
    ),
    c(
        "agent_fall",
        b"CGS",
        Ty::U32,
        "Number of failed agent checks before declaring a server DOWN (server 'fall' setting)",
    ),
    c(
        "agent_health",
        b"CGS",
        Ty::U32,
        "Current server agent check level (0..fall-1=DOWN, fall..rise-1=UP)",
    ),
    c(
        "addr",
        b"CGS",
        Ty::Str,
        "Server's address:port, shown only if show-legends is set, or at levels oper/admin for the CLI",
    ),
    c(
        "cookie",
        b"CNS",
        Ty::Str,
        "Backend's cookie name or Server's cookie value, shown only if show-legends is set, or at levels oper/admin for the CLI",
    ),
    c(
        "mode",
        b"CGS",
        Ty::Str,
        "'mode' setting (tcp/http/health/cli)",
    ),
    c(
        "algo",
        b"CGS",
        Ty::Str,
        "Backend's load balancing algorithm, shown only if show-legends is set, or at levels oper/admin for the CLI",
    ),
    c(
        "conn_rate",
        b"MRP",
        Ty::U32,
        "Number of new connections accepted over the last second on the frontend for this worker process",
    ),
    c(
        "conn_rate_max",
        b"MMP",
        Ty::U32,
        "Highest value of connections per second observed since the worker process started",
    ),
    c(
        "conn_tot",
        b"MCP",
        Ty::U64,
        "Total number of new connections accepted on this frontend since the worker process started",
    ),
    c(
        "intercepted",
        b"MCP",
        Ty::U64,
        "Total number of HTTP requests intercepted on the frontend (redirects/stats/services) since the worker process started",
    ),
    c(
        "dcon",
        b"MCP",
        Ty::U64,
        "Total number of incoming connections blocked on a listener/frontend by a tcp-request connection rule since the worker process started",
    ),
    c(
        "dses",
        b"MCP",
        Ty::U64,
        "Total number of incoming sessions blocked on a listener/frontend by a tcp-request connection rule since the worker process started",
    ),
    c(
        "wrew",
        b"MCP",
        Ty::U64,
        "Total number of failed HTTP header rewrites since the worker process started",
    ),
    c(
        "connect",
        b"MCP",
        Ty::U64,
        "Total number of outgoing connection attempts on this backend/server since the worker process started",
    ),
    c(
        "reuse",
        b"MCP",
        Ty::U64,
        "Total number of reused connection on this backend/server since the worker process started",
    ),
    c(
        "cache_lookups",
        b"MCP",
        Ty::U64,
        "Total number of HTTP requests looked up in the cache on this frontend/backend since the worker process started",
    ),
    c(
        "cache_hits",
        b"MCP",
        Ty::U64,
        "Total number of HTTP requests not found in the cache on this frontend/backend since the worker process started",
    ),
    c(
        "srv_icur",
        b"MGP",
        Ty::U32,
        "Current number of idle connections available for reuse on this server",
    ),
    c(
        "src_ilim",
        b"CLP",
        Ty::U32,
        "Limit on the number of available idle connections on this server (server 'pool_max_conn' directive)",
    ),
    c(
        "qtime_max",
        b"MMP",
        Ty::U32,
        "Maximum observed time spent in the queue, in milliseconds (backend/server)",
    ),
    c(
        "ctime_max",
        b"MMP",
        Ty::U32,
        "Maximum observed time spent waiting for a connection to complete, in milliseconds (backend/server)",
    ),
    c(
        "rtime_max",
        b"MMP",
        Ty::U32,
        "Maximum observed time spent waiting for a server response, in milliseconds (backend/server)",
    ),
    c(
        "ttime_max",
        b"MMP",
        Ty::U32,
        "Maximum observed total request+response time (request+queue+connect+response+processing), in milliseconds (backend/server)",
    ),
    c(
        "eint",
        b"MCP",
        Ty::U64,
        "Total number of internal errors since process started",
    ),
    c(
        "idle_conn_cur",
        b"MGP",
        Ty::U32,
        "Current number of unsafe idle connections",
    ),
    c(
        "safe_conn_cur",
        b"MGP",
        Ty::U32,
        "Current number of safe idle connections",
    ),
    c(
        "used_conn_cur",
        b"MGP",
        Ty::U32,
        "Current number of connections in use",
    ),
    c(
        "need_conn_est",
        b"MGP",
        Ty::U32,
        "Estimated needed number of connections",
    ),
    c(
        "uweight",
        b"MaP",
        Ty::U32,
        "Server's user weight, or sum of active servers' user weights for a backend",
    ),
    c(
        "agg_server_status",
        b"MGP",
        Ty::U32,
        "Backend's aggregated gauge of servers' status",
    ),
    c(
        "agg_server_check_status",
        b"MGP",
        Ty::U32,
        "Backend's aggregated gauge of servers' state check status",
    ),
    c(
        "agg_check_status",
        b"MGP",
        Ty::U32,
        "Backend's aggregated gauge of servers' state check status",
    ),
    c(
        "ssl_sess",
        b"MCP",
        Ty::U64,
        "Total number of ssl sessions established",
    ),
    c(
        "ssl_reused_sess",
        b"MCP",
        Ty::U64,
        "Total number of ssl sessions reused",
    ),
    c(
        "ssl_failed_handshake",
        b"MCP",
        Ty::U64,
        "Total number of failed handshake",
    ),
    c(
        "h2_headers_rcvd",
        b"MCP",
        Ty::U64,
        "Total number of received HEADERS frames",
    ),
    c(
        "h2_data_rcvd",
        b"MCP",
        Ty::U64,
        "Total number of received DATA frames",
    ),
    c(
        "h2_settings_rcvd",
        b"MCP",
        Ty::U64,
        "Total number of received SETTINGS frames",
    ),
    c(
        "h2_rst_stream_rcvd",
        b"MCP",
        Ty::U64,
        "Total number of received RST_STREAM frames",
    ),
    c(
        "h2_goaway_rcvd",
        b"MCP",
        Ty::U64,
        "Total number of received GOAWAY frames",
    ),
    c(
        "h2_detected_conn_protocol_errors",
        b"MCP",
        Ty::U64,
        "Total number of connection protocol errors",
    ),
    c(
        "h2_detected_strm_protocol_errors",
        b"MCP",
        Ty::U64,
        "Total number of stream protocol errors",
    ),
    c(
        "h2_rst_stream_resp",
        b"MCP",
        Ty::U64,
        "Total number of RST_STREAM sent on detected error",
    ),
    c(
        "h2_goaway_resp",
        b"MCP",
        Ty::U64,
        "Total number of GOAWAY sent on detected error",
    ),
    c(
        "h2_open_connections",
        b"MGP",
        Ty::U64,
        "Count of currently open connections",
    ),
    c(
        "h2_backend_open_streams",
        b"MGP",
        Ty::U64,
        "Count of currently open streams",
    ),
    c(
        "h2_total_connections",
        b"MCP",
        Ty::U64,
        "Total number of connections",
    ),
    c(
        "h2_backend_total_streams",
        b"MCP",
        Ty::U64,
        "Total number of streams",
    ),
    c(
        "h1_open_connections",
        b"MGP",
        Ty::U64,
        "Count of currently open connections",
    ),
    c(
        "h1_open_streams",
        b"MGP",
        Ty::U64,
        "Count of currently open streams",
    ),
    c(
        "h1_total_connections",
        b"MCP",
        Ty::U64,
        "Total number of connections",
    ),
    c(
        "h1_total_streams",
        b"MCP",
        Ty::U64,
        "Total number of streams",
    ),
    c(
        "h1_bytes_in",
        b"MCP",
        Ty::U64,
        "Total number of bytes received",
    ),
    c(
        "h1_bytes_out",
        b"MCP",
        Ty::U64,
        "Total number of bytes send",
    ),
    c(
        "h1_spliced_bytes_in",
        b"MCP",
        Ty::U64,
        "Total number of bytes received using kernel splicing",
    ),
    c(
        "h1_spliced_bytes_out",
        b"MCP",
        Ty::U64,
        "Total number of bytes sendusing kernel splicing",
    ),
];

/// Object type of a row.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjType {
    Frontend,
    Backend,
    Server,
    Listener,
}

impl ObjType {
    fn letter(self) -> char {
        match self {
            ObjType::Frontend => 'F',
            ObjType::Backend => 'B',
            ObjType::Server => 'S',
            ObjType::Listener => 'L',
        }
    }
    fn json_name(self) -> &'static str {
        match self {
            ObjType::Frontend => "Frontend",
            ObjType::Backend => "Backend",
            ObjType::Server => "Server",
            ObjType::Listener => "Listener",
        }
    }
    /// The `type` column and the bit in the `<type>` filter mask.
    fn number(self) -> u32 {
        match self {
            ObjType::Frontend => 0,
            ObjType::Backend => 1,
            ObjType::Server => 2,
            ObjType::Listener => 3,
        }
    }
}

/// Output format of `show stat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StatFormat {
    #[default]
    Csv,
    Typed,
    Json,
}

/// The `{<iid>|<name>} <type> <sid>` filter, after name resolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatScope {
    /// Proxy id, -1 for all.
    pub iid: i32,
    /// Bit mask: 1 frontends, 2 backends, 4 servers, 8 listeners (-1 all).
    pub types: i32,
    /// Server id, -1 for all.
    pub sid: i32,
}

/// Parsed `show stat` options.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StatOpts {
    pub format: StatFormat,
    /// `desc`: typed lines get the field description.
    pub desc: bool,
    /// `no-maint`.
    pub hide_maint: bool,
    /// `up`.
    pub hide_down: bool,
    pub scope: Option<StatScope>,
    /// Operator/admin sessions see `addr`, `cookie` and `algo`.
    pub legends: bool,
}

/// Strings a row computes (status text, addresses) live here so field values can borrow them.
#[derive(Default)]
pub(crate) struct Scratch {
    pub(crate) status: String,
    pub(crate) check_status: String,
    pub(crate) agent_status: String,
    pub(crate) tracked: String,
    pub(crate) addr: String,
}

impl Scratch {
    pub(crate) fn clear(&mut self) {
        self.status.clear();
        self.check_status.clear();
        self.agent_status.clear();
        self.tracked.clear();
        self.addr.clear();
    }
}

/// Backend figures HAProxy derives from its servers (`recount_servers`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct BackendAgg {
    /// Usable active / backup servers (`act`, `bck`).
    pub act: u32,
    pub bck: u32,
    /// Effective weight the LB uses (`weight`): active ones, else the first/all backups.
    pub tot_weight: u32,
    pub tot_uweight: u32,
    /// Servers not STOPPED, and all servers (for `UP (x/y)`).
    pub nbup: u32,
    pub nbsrv: u32,
}

/// A server takes traffic: weight > 0, no maintenance, no drain, starting or running.
pub fn server_usable(sv: &ServerSnap) -> bool {
    sv.eweight > 0
        && !sv.admin.maint()
        && !sv.admin.drain()
        && matches!(sv.op_state, OpState::Running | OpState::Starting)
}

pub fn backend_agg(px: &ProxySnap) -> BackendAgg {
    let all_backups = px.backend.as_ref().is_some_and(|b| b.all_backups);
    let mut a = BackendAgg::default();
    let (mut wact, mut uwact, mut wbck, mut uwbck) = (0u32, 0u32, 0u32, 0u32);
    let mut first_bck: Option<&ServerSnap> = None;
    for sv in &px.servers {
        a.nbsrv += 1;
        if sv.op_state != OpState::Stopped {
            a.nbup += 1;
        }
        if !server_usable(sv) {
            continue;
        }
        if sv.backup {
            if a.bck == 0 && !all_backups {
                first_bck = Some(sv);
            }
            a.bck += 1;
            wbck = wbck.saturating_add(sv.eweight);
            uwbck = uwbck.saturating_add(sv.uweight);
        } else {
            a.act += 1;
            wact = wact.saturating_add(sv.eweight);
            uwact = uwact.saturating_add(sv.uweight);
        }
    }
    (a.tot_weight, a.tot_uweight) = if a.act > 0 {
        (wact, uwact)
    } else if let Some(b) = first_bck {
        (b.eweight, b.uweight)
    } else {
        (wbck, uwbck)
    };
    a
}

/// The server whose check decides the state shown: the end of the `track` chain.
pub fn tracked_ref<'a>(snap: &'a Snapshot, sv: &'a ServerSnap) -> &'a ServerSnap {
    let mut cur = sv;
    // A tracking loop is refused by HAProxy's config check; bound the walk anyway.
    for _ in 0..32 {
        let Some((b, s)) = &cur.tracks else { break };
        let next = snap
            .find_proxy(b)
            .and_then(|p| snap.proxies.get(p))
            .and_then(|p| p.find_server(s).and_then(|i| p.servers.get(i)));
        match next {
            Some(n) => cur = n,
            None => break,
        }
    }
    cur
}

/// The `status` text of a server (compat §1.4, HAProxy's `stats_fill_sv_stats_computestate`).
pub fn server_status(snap: &Snapshot, sv: &ServerSnap, out: &mut String) {
    if sv.admin.has(AdminFlags::RMAINT) {
        out.push_str("MAINT (resolution)");
        return;
    }
    if sv.admin.has(AdminFlags::IMAINT) {
        out.push_str("MAINT (via ");
        match &sv.tracks {
            Some((b, s)) => {
                let _ = write!(out, "{b}/{s}");
            }
            None => out.push_str("?/?"),
        }
        out.push(')');
        return;
    }
    if sv.admin.maint() {
        out.push_str("MAINT");
        return;
    }
    let r = tracked_ref(snap, sv);
    let (h, rise, fall) = (r.check.health, r.check.rise, r.check.fall);
    let full = (rise + fall).saturating_sub(1);
    let going = |out: &mut String, word: &str| {
        let (num, den) = if r.op_state != OpState::Stopped {
            ((h + 1).saturating_sub(rise), fall)
        } else {
            (h, rise)
        };
        let _ = write!(out, "{word} {num}/{den}");
    };
    match sv.op_state {
        OpState::Running | OpState::Starting => {
            let going_down = r.check.enabled && h < full;
            if sv.admin.drain() {
                if r.agent.enabled {
                    out.push_str("DRAIN (agent)");
                } else if going_down {
                    going(out, "DRAIN");
                } else {
                    out.push_str("DRAIN");
                }
            } else if going_down {
                going(out, "UP");
            } else if !r.check.enabled {
                out.push_str("no check");
            } else {
                out.push_str("UP");
            }
        }
        OpState::Stopping => {
            if (!sv.check.enabled && sv.tracks.is_none()) || h == full {
                out.push_str("NOLB");
            } else {
                going(out, "NOLB");
            }
        }
        OpState::Stopped => {
            if r.agent.enabled && r.agent.health == 0 {
                out.push_str("DOWN (agent)");
            } else if r.check.enabled && h == 0 {
                out.push_str("DOWN");
            } else if r.agent.enabled || r.check.enabled {
                going(out, "DOWN");
            } else {
                out.push_str("DOWN");
            }
        }
    }
}

fn push_addr(addr: Option<std::net::IpAddr>, port: u16, out: &mut String) {
    match addr {
        Some(std::net::IpAddr::V4(a)) => {
            let _ = write!(out, "{a}:{port}");
        }
        Some(std::net::IpAddr::V6(a)) => {
            let _ = write!(out, "[{a}]:{port}");
        }
        None => {}
    }
}

pub(crate) type Row<'a> = [Val<'a>; NB_COLS];

fn u(v: impl Into<u64>) -> Val<'static> {
    Val::U(v.into())
}

fn lastsess(v: Option<u32>) -> Val<'static> {
    match v {
        Some(s) => Val::I(i64::from(s)),
        None => Val::I(-1),
    }
}

fn fill_modules<'a>(row: &mut Row<'a>, m: &ModuleCounters, h1h2: bool) {
    for (i, v) in m.ssl.iter().enumerate() {
        row[STATIC_COLS + i] = u(*v);
    }
    if h1h2 {
        for (i, v) in m.h2.iter().chain(m.h1.iter()).enumerate() {
            row[STATIC_COLS + 3 + i] = u(*v);
        }
    }
}

pub(crate) fn frontend_row<'a>(px: &'a ProxySnap, fe: &'a FrontendSnap) -> Row<'a> {
    let c = &fe.counters;
    let http = px.mode == ProxyMode::Http;
    let mut r: Row = [Val::Empty; NB_COLS];
    r[0] = Val::S(&px.name);
    r[1] = Val::S("FRONTEND");
    r[4] = u(c.scur);
    r[5] = u(c.smax);
    r[6] = u(fe.maxconn);
    r[7] = u(c.stot);
    r[8] = u(c.bin);
    r[9] = u(c.bout);
    r[10] = u(c.dreq);
    r[11] = u(c.dresp);
    r[12] = u(c.ereq);
    r[17] = Val::S(match fe.state {
        FrontendState::Open => "OPEN",
        FrontendState::Stop => "STOP",
        FrontendState::Paused => "PAUSED",
    });
    r[26] = u(1u32);
    r[27] = u(px.id);
    r[28] = u(0u32);
    r[32] = u(0u32);
    r[33] = u(c.rate);
    r[34] = u(fe.rate_limit);
    r[35] = u(c.rate_max);
    if http {
        for i in 0..6 {
            r[39 + i] = u(c.hrsp[i]);
        }
        r[80] = u(c.intercepted);
        r[86] = u(c.cache_lookups);
        r[87] = u(c.cache_hits);
    }
    r[46] = u(c.req_rate);
    r[47] = u(c.req_rate_max);
    r[48] = u(c.req_tot);
    r[51] = u(c.comp_in);
    r[52] = u(c.comp_out);
    r[53] = u(c.comp_byp);
    r[54] = u(c.comp_rsp);
    r[75] = Val::S(px.mode.as_str());
    r[77] = u(c.conn_rate);
    r[78] = u(c.conn_rate_max);
    r[79] = u(c.conn_tot);
    r[81] = u(c.dcon);
    r[82] = u(c.dses);
    r[83] = u(c.wrew);
    r[94] = u(c.eint);
    fill_modules(&mut r, &c.modules, true);
    r
}

pub(crate) fn listener_row<'a>(px: &'a ProxySnap, li: &'a ListenerSnap, legends: bool) -> Row<'a> {
    let c = &li.counters;
    let mut r: Row = [Val::Empty; NB_COLS];
    r[0] = Val::S(&px.name);
    r[1] = Val::S(&li.name);
    r[4] = u(c.scur);
    r[5] = u(c.smax);
    r[6] = u(li.maxconn);
    r[7] = u(c.stot);
    r[8] = u(c.bin);
    r[9] = u(c.bout);
    r[10] = u(c.dreq);
    r[11] = u(c.dresp);
    r[12] = u(c.ereq);
    r[17] = Val::S(match li.state {
        ListenerState::Open => "OPEN",
        ListenerState::Waiting => "WAITING",
        ListenerState::Full => "FULL",
    });
    r[26] = u(1u32);
    r[27] = u(px.id);
    r[28] = u(li.id);
    r[32] = u(3u32);
    if legends {
        r[73] = Val::S(&li.addr);
    }
    r[75] = Val::S(px.mode.as_str());
    r[81] = u(c.dcon);
    r[82] = u(c.dses);
    r[83] = u(c.wrew);
    r[94] = u(c.eint);
    fill_modules(&mut r, &c.modules, false);
    r
}

pub(crate) fn backend_row<'a>(
    px: &'a ProxySnap,
    be: &'a BackendSnap,
    opts: &StatOpts,
    status: &'a mut String,
) -> Row<'a> {
    let c = &be.counters;
    let http = px.mode == ProxyMode::Http;
    let agg = backend_agg(px);
    status.push_str(if agg.tot_weight > 0 || px.servers.is_empty() {
        "UP"
    } else {
        "DOWN"
    });
    if opts.hide_maint || opts.hide_down {
        let _ = write!(status, " ({}/{})", agg.nbup, agg.nbsrv);
    }
    let status: &'a String = status;
    let mut r: Row = [Val::Empty; NB_COLS];
    r[0] = Val::S(&px.name);
    r[1] = Val::S("BACKEND");
    r[2] = u(c.qcur);
    r[3] = u(c.qmax);
    r[4] = u(c.scur);
    r[5] = u(c.smax);
    r[6] = u(be.fullconn);
    r[7] = u(c.stot);
    r[8] = u(c.bin);
    r[9] = u(c.bout);
    r[10] = u(c.dreq);
    r[11] = u(c.dresp);
    r[13] = u(c.econ);
    r[14] = u(c.eresp);
    r[15] = u(c.wretr);
    r[16] = u(c.wredis);
    r[17] = Val::S(status);
    r[18] = u(agg.tot_weight);
    r[19] = u(agg.act);
    r[20] = u(agg.bck);
    r[22] = u(be.down_trans);
    r[23] = u(be.last_change_secs);
    if !px.servers.is_empty() {
        r[24] = u(be.downtime_secs);
    }
    r[26] = u(1u32);
    r[27] = u(px.id);
    r[28] = u(0u32);
    r[30] = u(c.lbtot);
    r[32] = u(1u32);
    r[33] = u(c.rate);
    r[35] = u(c.rate_max);
    if http {
        for i in 0..6 {
            r[39 + i] = u(c.hrsp[i]);
        }
        r[48] = u(c.req_tot);
        r[86] = u(c.cache_lookups);
        r[87] = u(c.cache_hits);
    }
    r[49] = u(c.cli_abrt);
    r[50] = u(c.srv_abrt);
    r[51] = u(c.comp_in);
    r[52] = u(c.comp_out);
    r[53] = u(c.comp_byp);
    r[54] = u(c.comp_rsp);
    r[55] = lastsess(c.lastsess_secs);
    r[58] = u(c.qtime);
    r[59] = u(c.ctime);
    r[60] = u(c.rtime);
    r[61] = u(c.ttime);
    if opts.legends {
        if let Some(ck) = &be.cookie {
            r[74] = Val::S(ck);
        }
        r[76] = Val::S(&be.algo);
    }
    r[75] = Val::S(px.mode.as_str());
    r[83] = u(c.wrew);
    r[84] = u(c.connect);
    r[85] = u(c.reuse);
    r[90] = u(c.qtime_max);
    r[91] = u(c.ctime_max);
    r[92] = u(c.rtime_max);
    r[93] = u(c.ttime_max);
    r[94] = u(c.eint);
    r[99] = u(agg.tot_uweight);
    r[100] = u(0u32);
    r[101] = u(0u32);
    r[102] = u(0u32);
    fill_modules(&mut r, &c.modules, true);
    r
}

fn push_check_status(ck: &CheckSnap, out: &mut String) {
    if ck.in_progress {
        out.push_str("* ");
    }
    out.push_str(ck.status.code());
}

pub(crate) fn server_row<'a>(
    snap: &'a Snapshot,
    px: &'a ProxySnap,
    sv: &'a ServerSnap,
    opts: &StatOpts,
    sc: &'a mut Scratch,
) -> Row<'a> {
    let c = &sv.counters;
    let http = px.mode == ProxyMode::Http;
    server_status(snap, sv, &mut sc.status);
    let chk = sv.check.reported();
    let agt = sv.agent.reported();
    if chk {
        push_check_status(&sv.check, &mut sc.check_status);
    }
    if agt {
        push_check_status(&sv.agent, &mut sc.agent_status);
    }
    if let Some((b, s)) = &sv.tracks {
        let _ = write!(sc.tracked, "{b}/{s}");
    }
    if opts.legends {
        match sv.unix {
            true => sc.addr.push_str("unix"),
            false => push_addr(sv.addr, sv.port, &mut sc.addr),
        }
    }
    let sc: &'a Scratch = sc;
    let mut r: Row = [Val::Empty; NB_COLS];
    r[0] = Val::S(&px.name);
    r[1] = Val::S(&sv.name);
    r[2] = u(c.qcur);
    r[3] = u(c.qmax);
    r[4] = u(c.scur);
    r[5] = u(c.smax);
    if sv.maxconn != 0 {
        r[6] = u(sv.maxconn);
    }
    r[7] = u(c.stot);
    r[8] = u(c.bin);
    r[9] = u(c.bout);
    r[11] = u(c.dresp);
    r[13] = u(c.econ);
    r[14] = u(c.eresp);
    r[15] = u(c.wretr);
    r[16] = u(c.wredis);
    r[17] = Val::S(&sc.status);
    r[18] = u(sv.eweight);
    r[19] = u(u32::from(!sv.backup));
    r[20] = u(u32::from(sv.backup));
    if sv.check.enabled {
        r[21] = u(sv.check.failed);
        r[22] = u(sv.check.down_trans);
        r[24] = u(sv.downtime_secs);
    }
    r[23] = u(sv.last_change_secs);
    if sv.maxqueue != 0 {
        r[25] = u(sv.maxqueue);
    }
    r[26] = u(1u32);
    r[27] = u(px.id);
    r[28] = u(sv.id);
    if sv.op_state == OpState::Starting
        && !sv.admin.drain()
        && let Some(t) = sv.throttle_pct
    {
        r[29] = u(t);
    }
    r[30] = u(c.lbtot);
    if sv.tracks.is_some() {
        r[31] = Val::S(&sc.tracked);
    }
    r[32] = u(2u32);
    r[33] = u(c.rate);
    r[35] = u(c.rate_max);
    if chk {
        r[36] = Val::S(&sc.check_status);
        if sv.check.status.has_code() {
            r[37] = u(sv.check.code);
        }
        if sv.check.status.has_duration() {
            r[38] = u(sv.check.duration_ms);
        }
        r[56] = Val::S(&sv.check.desc);
        r[65] = Val::S(sv.check.status.desc());
        r[67] = u(sv.check.rise);
        r[68] = u(sv.check.fall);
        r[69] = u(sv.check.health);
    }
    if http {
        for i in 0..6 {
            r[39 + i] = u(c.hrsp[i]);
        }
        r[48] = u(c.req_tot);
    }
    // HAProxy tests `observe` on the end of the track chain.
    if tracked_ref(snap, sv).observe {
        r[45] = u(sv.hanafail);
    }
    r[49] = u(c.cli_abrt);
    r[50] = u(c.srv_abrt);
    r[55] = lastsess(c.lastsess_secs);
    r[58] = u(c.qtime);
    r[59] = u(c.ctime);
    r[60] = u(c.rtime);
    r[61] = u(c.ttime);
    if agt {
        r[57] = Val::S(&sv.agent.desc);
        r[62] = Val::S(&sc.agent_status);
        if sv.agent.status.has_code() {
            r[63] = u(sv.agent.code);
        }
        if sv.agent.status.has_duration() {
            r[64] = u(sv.agent.duration_ms);
        }
        r[66] = Val::S(sv.agent.status.desc());
        r[70] = u(sv.agent.rise);
        r[71] = u(sv.agent.fall);
        r[72] = u(sv.agent.health);
    }
    if opts.legends {
        if sv.addr.is_some() || sv.unix {
            r[73] = Val::S(&sc.addr);
        }
        if let Some(ck) = &sv.cookie {
            r[74] = Val::S(ck);
        }
    }
    r[75] = Val::S(px.mode.as_str());
    r[83] = u(c.wrew);
    r[84] = u(c.connect);
    r[85] = u(c.reuse);
    r[88] = u(c.srv_icur);
    if let Some(l) = sv.idle_limit {
        r[89] = u(l);
    }
    r[90] = u(c.qtime_max);
    r[91] = u(c.ctime_max);
    r[92] = u(c.rtime_max);
    r[93] = u(c.ttime_max);
    r[94] = u(c.eint);
    r[95] = u(c.idle_conn_cur);
    r[96] = u(c.safe_conn_cur);
    r[97] = u(c.used_conn_cur);
    r[98] = u(c.need_conn_est);
    r[99] = u(sv.uweight);
    fill_modules(&mut r, &c.modules, false);
    r
}

/// Tags of a column for a row type: HAProxy's backend fills a few as plain gauges.
fn col_tags(idx: usize, obj: ObjType) -> Tags {
    if obj == ObjType::Backend && matches!(idx, 19 | 20 | 33 | 35) {
        return Tags(*b"MGP");
    }
    STAT_COLS.get(idx).map_or(Tags(*b"MGP"), |c| c.tags)
}

/// The CSV header line (`# pxname,…,-,ssl_sess,…,\n`).
pub fn push_csv_header(out: &mut String) {
    out.push_str("# ");
    for (i, col) in STAT_COLS.iter().enumerate() {
        if i == STATIC_COLS {
            out.push_str("-,");
        }
        out.push_str(col.name);
        out.push(',');
    }
    out.push('\n');
}

struct RowMeta {
    obj: ObjType,
    iid: u32,
    sid: u32,
}

fn push_row(row: &Row, m: &RowMeta, opts: &StatOpts, first_json: bool, out: &mut String) {
    match opts.format {
        StatFormat::Csv => {
            for (i, v) in row.iter().enumerate() {
                if i == STATIC_COLS {
                    out.push_str("-,");
                }
                v.push_csv(out);
                out.push(',');
            }
            out.push('\n');
        }
        StatFormat::Typed => {
            for (i, (v, col)) in row.iter().zip(STAT_COLS.iter()).enumerate() {
                if v.is_empty() {
                    continue;
                }
                let _ = write!(
                    out,
                    "{}.{}.{}.{}.{}.1:",
                    m.obj.letter(),
                    m.iid,
                    m.sid,
                    i,
                    col.name
                );
                crate::field::push_typed_value(col_tags(i, m.obj), col.ty, v, out);
                if opts.desc {
                    let _ = write!(out, ":\"{}\"", col.desc);
                }
                out.push('\n');
            }
        }
        StatFormat::Json => {
            out.push_str(if first_json { "[" } else { ",[" });
            let mut first = true;
            for (i, (v, col)) in row.iter().zip(STAT_COLS.iter()).enumerate() {
                if v.is_empty() {
                    continue;
                }
                if !first {
                    out.push(',');
                }
                first = false;
                let _ = write!(
                    out,
                    "{{\"objType\":\"{}\",\"proxyId\":{},\"id\":{},\"field\":{{\"pos\":{},\"name\":\"{}\"}},\"processNum\":1,",
                    m.obj.json_name(),
                    m.iid,
                    m.sid,
                    i,
                    col.name
                );
                crate::field::push_json_tags_value(col_tags(i, m.obj), col.ty, v, out);
                out.push('}');
            }
            out.push(']');
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    Start,
    Frontend,
    Listeners(usize),
    Servers(usize),
    Backend,
    NextProxy,
    Done,
}

/// A resumable `show stat` dump: call [`StatDump::fill`] until it returns `true`. Each call writes
/// whole rows and stops once `out` reaches `budget` bytes (always making progress), so a socket
/// shell can flush between calls as HAProxy's io_handler does.
pub struct StatDump {
    opts: StatOpts,
    px: usize,
    phase: Phase,
    rows: usize,
}

impl StatDump {
    pub fn new(opts: StatOpts) -> StatDump {
        StatDump {
            opts,
            px: 0,
            phase: Phase::Start,
            rows: 0,
        }
    }

    fn scope_allows(&self, obj: ObjType) -> bool {
        match self.opts.scope {
            None => true,
            Some(s) => s.types & (1 << obj.number()) != 0,
        }
    }

    pub(crate) fn server_shown(&self, snap: &Snapshot, sv: &ServerSnap) -> bool {
        if let Some(s) = self.opts.scope
            && s.sid != -1
            && i64::from(sv.id) != i64::from(s.sid)
        {
            return false;
        }
        if self.opts.hide_maint && sv.admin.maint() {
            return false;
        }
        if self.opts.hide_down {
            let r = tracked_ref(snap, sv);
            let down_still = sv.op_state == OpState::Stopped
                && (!(r.agent.enabled || r.check.enabled)
                    || (r.agent.enabled && r.agent.health == 0)
                    || (r.check.enabled && r.check.health == 0));
            if sv.admin.maint() || down_still {
                return false;
            }
        }
        true
    }

    fn proxy_shown(&self, px: &ProxySnap) -> bool {
        if px.disabled {
            return false;
        }
        match self.opts.scope {
            Some(s) if s.iid != -1 => i64::from(px.id) == i64::from(s.iid),
            _ => true,
        }
    }

    /// Writes the next rows; returns `true` once the dump is complete.
    pub fn fill(&mut self, snap: &Snapshot, out: &mut String, budget: usize) -> bool {
        if self.phase == Phase::Done {
            return true;
        }
        if self.phase == Phase::Start {
            self.start(out);
            self.phase = Phase::Frontend;
        }
        let mut sc = Scratch::default();
        let mut wrote = false;
        loop {
            if wrote && out.len() >= budget {
                return false;
            }
            let Some(px) = snap.proxies.get(self.px) else {
                self.end(out);
                self.phase = Phase::Done;
                return true;
            };
            match self.phase {
                Phase::Frontend => {
                    if !self.proxy_shown(px) {
                        self.phase = Phase::NextProxy;
                        continue;
                    }
                    if let Some(fe) = &px.frontend
                        && self.scope_allows(ObjType::Frontend)
                    {
                        let row = frontend_row(px, fe);
                        let m = RowMeta {
                            obj: ObjType::Frontend,
                            iid: px.id,
                            sid: 0,
                        };
                        push_row(&row, &m, &self.opts, self.rows == 0, out);
                        self.rows += 1;
                        wrote = true;
                    }
                    self.phase = Phase::Listeners(0);
                }
                Phase::Listeners(i) => {
                    let show = px.frontend.is_some()
                        && px.socket_stats
                        && self.scope_allows(ObjType::Listener);
                    match px.listeners.get(i) {
                        Some(li) if show => {
                            let row = listener_row(px, li, self.opts.legends);
                            let m = RowMeta {
                                obj: ObjType::Listener,
                                iid: px.id,
                                sid: li.id,
                            };
                            push_row(&row, &m, &self.opts, self.rows == 0, out);
                            self.rows += 1;
                            wrote = true;
                            self.phase = Phase::Listeners(i + 1);
                        }
                        _ => self.phase = Phase::Servers(0),
                    }
                }
                Phase::Servers(i) => {
                    let show = px.backend.is_some() && self.scope_allows(ObjType::Server);
                    match px.servers.get(i) {
                        Some(sv) if show => {
                            if self.server_shown(snap, sv) {
                                sc.status.clear();
                                sc.check_status.clear();
                                sc.agent_status.clear();
                                sc.tracked.clear();
                                sc.addr.clear();
                                let row = server_row(snap, px, sv, &self.opts, &mut sc);
                                let m = RowMeta {
                                    obj: ObjType::Server,
                                    iid: px.id,
                                    sid: sv.id,
                                };
                                push_row(&row, &m, &self.opts, self.rows == 0, out);
                                self.rows += 1;
                                wrote = true;
                            }
                            self.phase = Phase::Servers(i + 1);
                        }
                        _ => self.phase = Phase::Backend,
                    }
                }
                Phase::Backend => {
                    if let Some(be) = &px.backend
                        && self.scope_allows(ObjType::Backend)
                    {
                        sc.status.clear();
                        let row = backend_row(px, be, &self.opts, &mut sc.status);
                        let m = RowMeta {
                            obj: ObjType::Backend,
                            iid: px.id,
                            sid: 0,
                        };
                        push_row(&row, &m, &self.opts, self.rows == 0, out);
                        self.rows += 1;
                        wrote = true;
                    }
                    self.phase = Phase::NextProxy;
                }
                Phase::NextProxy => {
                    self.px += 1;
                    self.phase = Phase::Frontend;
                }
                Phase::Start | Phase::Done => self.phase = Phase::Frontend,
            }
        }
    }

    fn start(&self, out: &mut String) {
        match self.opts.format {
            StatFormat::Csv => push_csv_header(out),
            StatFormat::Json => out.push('['),
            StatFormat::Typed => {}
        }
    }

    fn end(&self, out: &mut String) {
        if self.opts.format == StatFormat::Json {
            out.push_str("]\n");
        }
    }
}

/// The whole dump at once.
pub fn dump_stat(snap: &Snapshot, opts: StatOpts, out: &mut String) {
    let mut d = StatDump::new(opts);
    while !d.fill(snap, out, usize::MAX) {}
}
