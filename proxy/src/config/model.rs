//! The typed configuration: what the parser produces after `defaults` inheritance is applied.
//! Conditions (`if`/`unless`), ACL patterns and log-format strings are kept as tokens/text with
//! their location here; `http::acl` and `log::format` compile them (and report errors at `loc`).

use std::sync::Arc;
use std::time::Duration;

/// Where a directive came from, for diagnostics: `parsing [file:line]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    pub file: Arc<str>,
    pub line: u32,
}

impl std::fmt::Display for Loc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

#[derive(Clone, Debug, Default)]
pub struct Config {
    pub global: Global,
    /// Frontends, backends and listens in configuration order (HAProxy's proxy list order, which
    /// also decides `iid` and `show stat` order).
    pub proxies: Vec<Proxy>,
    /// `userlist` sections, in configuration order.
    pub userlists: Vec<Userlist>,
    /// `program` sections: commands the master runs.
    pub programs: Vec<Program>,
    /// `resolvers` sections: DNS servers that keep server addresses current.
    pub resolvers: Vec<Resolvers>,
    /// `peers` sections, in configuration order (inactive ones kept for their tables).
    pub peers: Vec<PeersSection>,
}

/// `resolvers <name>` (HAProxy's defaults: 3 retries, 1s resolve and retry timeouts, hold
/// valid 10s, nx/other/refused/timeout 30s, obsolete 0, 512-byte payloads).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolvers {
    pub name: String,
    /// `nameserver <name> <ip:port>` and those `parse-resolv-conf` added, in order.
    pub nameservers: Vec<(String, std::net::SocketAddr)>,
    /// The nameservers (by name) reached over TCP (`tcp@<ip>:<port>`, 2-byte length framing).
    pub tcp: Vec<String>,
    pub resolve_retries: u32,
    pub timeout_resolve: Duration,
    pub timeout_retry: Duration,
    pub hold_valid: Duration,
    pub hold_nx: Duration,
    pub hold_other: Duration,
    pub hold_refused: Duration,
    pub hold_timeout: Duration,
    pub hold_obsolete: Duration,
    pub accepted_payload_size: u16,
    pub loc: Loc,
}

/// `init-addr`: how a server's name becomes its first address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InitAddr {
    /// The address in the `server-state-file`.
    Last,
    /// The system resolver.
    Libc,
    /// No address: the server starts in maintenance until a resolver finds one.
    None,
    Ip(std::net::IpAddr),
}

/// What a server takes from DNS: `resolvers`, `resolve-prefer`, `resolve-net`, `resolve-opts`,
/// `init-addr`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ResolveOpts {
    pub resolvers: Option<String>,
    /// HAProxy prefers IPv6 unless told otherwise.
    pub prefer_ipv4: bool,
    pub nets: Vec<(std::net::IpAddr, u8)>,
    pub allow_dup_ip: bool,
    pub ignore_weight: bool,
    pub prevent_dup_ip: bool,
    /// Empty: HAProxy's default `last,libc`.
    pub init_addr: Vec<InitAddr>,
}

/// `program <name>`: `command <argv…>`, `user`, `group`, `[no] option start-on-reload`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    pub name: String,
    pub command: Vec<String>,
    pub user: Option<String>,
    pub group: Option<String>,
    /// Restarted on every reload (HAProxy's default); else kept running across reloads.
    pub start_on_reload: bool,
    pub loc: Loc,
}

/// `userlist <name>`: users and groups for `http-request auth` and `http_auth*()`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Userlist {
    pub name: String,
    pub users: Vec<UserlistUser>,
    pub groups: Vec<UserGroup>,
}

/// `user <name> [password <hash>|insecure-password <pw>] [groups <g>[,<g>]*]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserlistUser {
    pub name: String,
    pub password: Option<String>,
    /// The password is clear text (`insecure-password`), not a crypt(3) hash.
    pub insecure: bool,
    pub groups: Vec<String>,
}

/// `group <name> [users <u>[,<u>]*]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UserGroup {
    pub name: String,
    pub users: Vec<String>,
}

impl Config {
    pub fn proxy(&self, name: &str) -> Option<&Proxy> {
        self.proxies.iter().find(|p| p.name == name)
    }
    pub fn backend(&self, name: &str) -> Option<&Proxy> {
        self.proxies
            .iter()
            .find(|p| p.cap.backend && p.name == name)
    }
}

#[derive(Clone, Debug, Default)]
pub struct Global {
    pub maxconn: Option<u32>,
    /// `maxcomprate <kB/s>`, in bytes per second: the initial `set rate-limit http-compression`.
    pub maxcomprate: Option<u32>,
    /// `maxzlibmem <MB>`, in bytes: the bound on the deflate states' memory (0: none).
    pub maxzlibmem: Option<u64>,
    /// `maxcompcpuusage <pct>`: parsed; portcullis has no CPU-idle measure to apply it with.
    pub maxcompcpuusage: Option<u8>,
    pub nbthread: Option<u32>,
    pub daemon: bool,
    pub pidfile: Option<String>,
    pub logs: Vec<LogTarget>,
    pub log_send_hostname: Option<String>,
    pub stats_sockets: Vec<StatsSocket>,
    pub stats_timeout: Option<Duration>,
    pub ssl_default_bind_ciphers: Option<String>,
    pub ssl_default_bind_ciphersuites: Option<String>,
    pub ssl_default_bind_options: SslOptions,
    /// `ssl-server-verify none`: servers' default is `verify none` instead of `required`.
    pub ssl_server_verify_none: bool,
    pub hard_stop_after: Option<Duration>,
    /// `nosplice`: the `mode tcp` relay never uses splice(2) (see `tcp::pipe`).
    pub nosplice: bool,
    /// `expose-experimental-directives`: experimental keywords (`normalize-uri`) are allowed.
    pub expose_experimental: bool,
    /// `portcullis-xdp` (a portcullis extension): interfaces the XDP filter protects.
    pub xdp: Option<XdpCfg>,
    /// Keywords parsed and validated whose feature has not landed: the engine refuses to start
    /// with any of them (never silently ignored). (keyword, location)
    pub pending: Vec<(String, Loc)>,
    /// `ssl-default-server-ciphers|ciphersuites|options`: TLS towards servers.
    pub ssl_default_server_ciphers: Option<String>,
    pub ssl_default_server_ciphersuites: Option<String>,
    pub ssl_default_server_options: SslOptions,
    /// `ssl-default-bind-curves`.
    pub ssl_default_bind_curves: Option<String>,
    /// `tune.*` settings.
    pub tune: Tune,
    /// The process section: identity, chroot, limits, names.
    pub process: ProcessCfg,
}

/// `user`/`group`/`chroot`/`ulimit-n`… (global): how the process sets itself up.
#[derive(Clone, Debug, Default)]
pub struct ProcessCfg {
    /// `uid`/`user`: the workers run as this uid once everything privileged is open.
    pub uid: Option<u32>,
    /// `gid`/`group`.
    pub gid: Option<u32>,
    /// `chroot <dir>`: the workers are chrooted there once everything is open.
    pub chroot: Option<String>,
    /// `ulimit-n <n>`: RLIMIT_NOFILE set at start.
    pub ulimit_n: Option<u64>,
    /// `set-dumpable`: PR_SET_DUMPABLE after the privilege drop.
    pub set_dumpable: bool,
    /// `zero-warning`: any warning refuses the configuration.
    pub zero_warning: bool,
    /// `no strict-limits`: a file-descriptor limit that cannot be raised is only a warning.
    pub no_strict_limits: bool,
    /// `master-worker [no-exit-on-failure]`.
    pub master_worker: bool,
    /// `master-worker no-exit-on-failure`: a failing program does not stop the others.
    pub no_exit_on_failure: bool,
    pub mworker_max_reloads: Option<u32>,
    /// `description` (`show info`, stats page).
    pub description: Option<String>,
    /// `node` (`show info`, stats page).
    pub node: Option<String>,
    /// `log-tag`: the syslog tag (default: the program name).
    pub log_tag: Option<String>,
    pub localpeer: Option<String>,
    /// `ca-base` / `crt-base`: prefixes of relative CA and certificate paths.
    pub ca_base: Option<String>,
    pub crt_base: Option<String>,
    /// `server-state-base` / `server-state-file`.
    pub server_state_base: Option<String>,
    pub server_state_file: Option<String>,
    /// `unix-bind prefix <p> mode <m> uid/user <u> gid/group <g>`.
    pub unix_bind: UnixBind,
    /// `cpu-map <threads> <cpus>` lines as written.
    pub cpu_map: Vec<(String, String)>,
    /// `spread-checks <pct>`.
    pub spread_checks: Option<u32>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UnixBind {
    pub prefix: Option<String>,
    pub mode: Option<u32>,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
}

/// `tune.*` (global).
#[derive(Clone, Debug, Default)]
pub struct Tune {
    /// `tune.bufsize` (rounded up to 16 as HAProxy does).
    pub bufsize: Option<u32>,
    /// `tune.maxrewrite`.
    pub maxrewrite: Option<u32>,
    /// `tune.idle-pool.shared on|off`.
    pub idle_pool_shared: bool,
    /// `tune.ssl.default-dh-param`: accepted, without effect (rustls has no FFDHE).
    pub ssl_default_dh_param: Option<u32>,
    /// The warning about finite-field DHE settings was given.
    pub dhe_warned: bool,
    /// `tune.lua.*`.
    pub lua: crate::ana::script::Tune,
    /// `tune.comp.maxlevel` (1..9; HAProxy's default is 1).
    pub comp_maxlevel: Option<u32>,
}

/// `portcullis-xdp <iface>... [mode native|generic|auto] [max-sources <n>] [packet-rate <n>]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XdpCfg {
    pub interfaces: Vec<String>,
    pub mode: XdpMode,
    /// Size of the per-source map (default: the stick tables' sizes with headroom).
    pub max_sources: Option<u32>,
    /// Packets per second and source above which packets to protected ports are dropped.
    pub packet_rate: Option<u32>,
    /// `pin-dir <dir>`: where the shared maps and links are pinned (a bpffs directory).
    pub pin_dir: Option<String>,
    pub loc: Loc,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XdpMode {
    /// The driver's mode if it has one, else generic.
    #[default]
    Auto,
    Native,
    Generic,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CliLevel {
    User,
    Operator,
    #[default]
    Admin,
}

#[derive(Clone, Debug)]
pub struct StatsSocket {
    pub addr: BindAddr,
    pub mode: Option<u32>,
    pub level: CliLevel,
    pub expose_fd_listeners: bool,
    pub loc: Loc,
}

/// TLS versions as HAProxy names them (`ssl-min-ver TLSv1.2`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    Ssl3,
    Tls10,
    Tls11,
    Tls12,
    Tls13,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SslOptions {
    pub min_ver: Option<TlsVersion>,
    pub max_ver: Option<TlsVersion>,
    pub no_tls_tickets: bool,
    /// `prefer-client-ciphers`: the client's cipher order wins (HAProxy's default is the
    /// server's order).
    pub prefer_client_ciphers: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogTarget {
    /// `log stdout|stderr [format <fmt>] <facility> [<level> [<minlevel>]]`
    Stdout {
        stderr: bool,
        format: LogFormatKind,
        facility: Facility,
        level: Option<Level>,
        sample: Option<LogSample>,
    },
    /// `log <ip>:<port>` (UDP syslog; port defaults to 514)
    Udp {
        addr: std::net::SocketAddr,
        format: LogFormatKind,
        facility: Facility,
        level: Option<Level>,
        sample: Option<LogSample>,
    },
    /// `log /dev/log` or `log unix@/path` (datagram unix socket)
    Unix {
        path: String,
        format: LogFormatKind,
        facility: Facility,
        level: Option<Level>,
        sample: Option<LogSample>,
    },
}

/// `log … sample <ranges>:<size>`: of every `size` messages for this target, only those whose
/// position (1-based) is in one of the ranges are sent. The counter is the log line's own,
/// shared by every worker (HAProxy's per-logger `smp_info`).
#[derive(Clone, Debug)]
pub struct LogSample {
    pub ranges: Vec<(u32, u32)>,
    pub size: u32,
    pub counter: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl PartialEq for LogSample {
    fn eq(&self, o: &Self) -> bool {
        self.ranges == o.ranges && self.size == o.size
    }
}

impl Eq for LogSample {}

impl LogSample {
    /// `1,3:5`, `2-4:10`: HAProxy's syntax; the size must cover every range.
    pub fn parse(v: &str) -> Result<LogSample, String> {
        let (ranges, size) = v.rsplit_once(':').ok_or_else(|| {
            format!("log : invalid sample '{v}' (expects <ranges>:<sample size>)")
        })?;
        let size: u32 = size
            .parse()
            .ok()
            .filter(|n| *n > 0)
            .ok_or_else(|| format!("log : invalid sample size '{size}'"))?;
        let mut out = Vec::new();
        for r in ranges.split(',') {
            let (a, b) = r.split_once('-').unwrap_or((r, r));
            let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>()) else {
                return Err(format!("log : invalid range '{r}' in sample '{v}'"));
            };
            if a == 0 || b < a {
                return Err(format!("log : invalid range '{r}' in sample '{v}'"));
            }
            if b > size {
                return Err(format!(
                    "log : sample range '{r}' is beyond the sample size ({size})"
                ));
            }
            out.push((a, b));
        }
        Ok(LogSample {
            ranges: out,
            size,
            counter: Default::default(),
        })
    }

    /// Counts one message; whether it is to be sent.
    pub fn take(&self) -> bool {
        let n = self
            .counter
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let pos = (n % u64::from(self.size)) as u32 + 1;
        self.ranges.iter().any(|&(a, b)| (a..=b).contains(&pos))
    }
}

/// The syslog header format (`log … format <fmt>`); `local` is HAProxy's default.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormatKind {
    #[default]
    Local,
    Rfc3164,
    Rfc5424,
    Short,
    Priority,
    Timed,
    Iso,
    Raw,
}

/// Syslog facilities in their numeric order (kern = 0 … local7 = 23).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Facility(pub u8);

/// Syslog severities (emerg = 0 … debug = 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Level(pub u8);

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cap {
    pub frontend: bool,
    pub backend: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mode {
    #[default]
    Tcp,
    Http,
}

impl Mode {
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Tcp => "tcp",
            Mode::Http => "http",
        }
    }
}

/// A listening address as `bind` (and `stats socket`) accept it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BindAddr {
    /// `addr:port`, `*:port` (0.0.0.0), `:::port` (::), with `ipv4@`/`ipv6@` prefixes resolved.
    Inet(std::net::SocketAddr),
    /// `unix@<path>` or a bare absolute path.
    Unix(String),
    /// `abns@<name>`: Linux's abstract namespace, the name padded with NULs as HAProxy does.
    Abns(String),
    /// `fd@<n>`: an inherited, already-listening socket.
    Fd(i32),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Bind {
    pub addr: BindAddr,
    /// `name <name>` (listener name in `show stat` with `option socket-stats`).
    pub name: Option<String>,
    pub ssl: Option<BindSsl>,
    pub maxconn: Option<u32>,
    /// `accept-proxy`: every connection starts with a PROXY protocol header (v1 or v2) whose
    /// addresses replace the socket's.
    pub accept_proxy: bool,
    /// `proto <mux>` (`h1`, `h2`, `none`; `fcgi` is known but never usable on a bind): the
    /// protocol forced on every connection, whatever ALPN said (`h2` on a plain bind is
    /// HTTP/2 with prior knowledge, h2c).
    pub proto: Option<String>,
    /// The address argument as written, for messages.
    pub spec: String,
    pub loc: Loc,
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BindSsl {
    /// `crt` arguments: a PEM bundle or a directory of them (checked to exist at parse time).
    pub crts: Vec<String>,
    /// The last `crt-list` argument (see `sources` for all of them).
    pub crt_list: Option<String>,
    /// Every `crt` and `crt-list` argument in line order: the first certificate loaded is the
    /// default one, so the order of the two kinds matters.
    pub sources: Vec<CrtSource>,
    pub alpn: Vec<String>,
    pub ciphers: Option<String>,
    pub ciphersuites: Option<String>,
    pub curves: Option<String>,
    pub options: SslOptions,
    /// `strict-sni`: no default certificate; a handshake whose SNI names none fails.
    pub strict_sni: bool,
}

/// Where a bind's certificates come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CrtSource {
    /// `crt <file|dir>`
    Crt(String),
    /// `crt-list <file>`
    List(String),
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Timeouts {
    pub connect: Option<Duration>,
    pub client: Option<Duration>,
    pub server: Option<Duration>,
    pub http_request: Option<Duration>,
    pub http_keep_alive: Option<Duration>,
    pub queue: Option<Duration>,
    pub tunnel: Option<Duration>,
    pub client_fin: Option<Duration>,
    pub server_fin: Option<Duration>,
    pub check: Option<Duration>,
    /// `timeout tarpit` (unset: `timeout connect`, as HAProxy).
    pub tarpit: Option<Duration>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Balance {
    Roundrobin,
    StaticRr,
    Leastconn,
    First,
    Source,
    /// `random[(<draws>)]`: the least loaded of `draws` servers drawn on the consistent tree.
    Random {
        draws: u32,
    },
    /// `uri [len <n>] [depth <n>] [whole] [path-only]` (0: no limit).
    Uri {
        len: u32,
        depth: u32,
        whole: bool,
        path_only: bool,
    },
    /// `url_param <name> [check_post]`
    UrlParam {
        name: String,
        check_post: bool,
    },
    /// `hdr(<name>) [use_domain_only]`
    Hdr {
        name: String,
        domain_only: bool,
    },
    /// `hash <expr>`: the sample expression's value (as binary) hashed.
    Hash(String),
}

impl Balance {
    /// HAProxy's BE_LB_PROP_DYN: algorithms whose weights change at run time (`slowstart`
    /// ramps only these): the tree-based ones, consistent hashing included.
    pub fn dynamic_weights(&self, hash: &HashType) -> bool {
        match self {
            Balance::Roundrobin | Balance::Leastconn | Balance::First | Balance::Random { .. } => {
                true
            }
            Balance::StaticRr => false,
            _ => hash.consistent,
        }
    }

    /// Hashes a key of the stream (HAProxy's BE_LB_KIND_HI).
    pub fn is_hash(&self) -> bool {
        matches!(
            self,
            Balance::Source
                | Balance::Uri { .. }
                | Balance::UrlParam { .. }
                | Balance::Hdr { .. }
                | Balance::Hash(_)
        )
    }

    /// Needs an HTTP request (HAProxy's BE_LB_NEED_HTTP): roundrobin in a `mode tcp` backend.
    pub fn needs_http(&self) -> bool {
        matches!(
            self,
            Balance::Uri { .. } | Balance::UrlParam { .. } | Balance::Hdr { .. }
        )
    }

    pub fn as_str(&self) -> &'static str {
        match self {
            Balance::Roundrobin => "roundrobin",
            Balance::StaticRr => "static-rr",
            Balance::Leastconn => "leastconn",
            Balance::First => "first",
            Balance::Source => "source",
            // As 2.6's backend_lb_algo_str, which has no name for it.
            Balance::Random { .. } => "unknown",
            Balance::Uri { .. } => "uri",
            Balance::UrlParam { .. } => "url_param",
            Balance::Hdr { .. } => "hdr",
            Balance::Hash(_) => "hash",
        }
    }
}

/// `hash-type map-based|consistent [<function> [avalanche]]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HashType {
    pub consistent: bool,
    pub func: HashFn,
    pub avalanche: bool,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HashFn {
    #[default]
    Sdbm,
    Djb2,
    Wt6,
    Crc32,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HttpReuse {
    #[default]
    Safe,
    Never,
    Always,
    Aggressive,
}

/// `option forwardfor [except <net>] [header <name>] [if-none]`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForwardFor {
    /// (network, prefix length)
    pub except: Option<(std::net::IpAddr, u8)>,
    pub header: String,
    pub if_none: bool,
}

/// `option redispatch [<interval>]`: interval 1 = every retry; -1 (default) = the last retry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Redispatch {
    pub interval: i32,
}

/// An `if`/`unless` condition, kept as its tokens (after `if`/`unless`), compiled by `http::acl`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Cond {
    pub unless: bool,
    pub tokens: Vec<String>,
    pub loc: Loc,
}

/// `acl <name> <criterion> [flags] [operator] <value> …`
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AclDef {
    pub name: String,
    /// Criterion, flags and patterns, as written.
    pub tokens: Vec<String>,
    pub loc: Loc,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UseBackend {
    /// A backend name (may be a log-format string in HAProxy; only plain names for now).
    pub backend: String,
    pub cond: Option<Cond>,
    pub loc: Loc,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedirectKind {
    Location,
    Prefix,
    Scheme,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpRequestAction {
    /// `lua.<name> [args…]`: an action a `lua-load`ed script registered (`core.register_action`).
    Lua {
        name: String,
        args: Vec<String>,
    },
    /// `use-service lua.<name>`: an HTTP service a script registered (`core.register_service`).
    LuaService {
        name: String,
    },
    /// value is a log-format string
    SetHeader {
        name: String,
        value: String,
    },
    AddHeader {
        name: String,
        value: String,
    },
    DelHeader {
        name: String,
    },
    Redirect {
        kind: RedirectKind,
        value: String,
        code: u16,
        drop_query: bool,
        append_slash: bool,
    },
    Deny {
        status: u16,
    },
    Return {
        status: u16,
        content_type: Option<String>,
        body: Option<String>,
        /// The body is a log-format string (`lf-string`, `lf-file`).
        body_lf: bool,
        /// `hdr <name> <fmt>` lines, in order.
        headers: Vec<(String, String)>,
    },
    Allow,
    /// `reject`: the connection is closed at once, without a response.
    Reject,
    /// `use-service prometheus-exporter`: the request is answered by the built-in exporter.
    UsePrometheus,
    /// `track-sc<n> <key> [table <t>]`: count this request in a stick table.
    TrackSc(TrackSc),
    /// `sc-inc-gpc0|1(<sc>)`, `sc-set-gpt0(<sc>) <value>`.
    Sc(ScAction),
    /// `set-method|set-path|set-pathq|set-query|set-uri <fmt>`.
    SetLine {
        part: LinePart,
        value: String,
    },
    /// `replace-path|replace-pathq|replace-uri <regex> <fmt>`.
    ReplaceLine {
        part: LinePart,
        regex: String,
        replace: String,
    },
    /// `replace-header|replace-value <name> <regex> <fmt>` (`values`: each comma-separated value).
    ReplaceHeader {
        name: String,
        regex: String,
        replace: String,
        values: bool,
    },
    /// `http-response set-status <status> [reason <str>]`.
    SetStatus {
        status: u16,
        reason: Option<String>,
    },
    /// `capture <sample> len <n>|id <n>`: stores the sample in capture slot `slot` (of the
    /// request, or of the response for `http-response`); `len` 0 = the slot's own length.
    Capture {
        sample: String,
        slot: usize,
        len: usize,
    },
    /// `set-var(<var>[,<cond>…]) <expr>` / `set-var-fmt(<var>[,<cond>…]) <fmt>`: as written
    /// (`expr` is a sample expression, or a log-format when `fmt`).
    SetVar {
        var: crate::ana::vars::VarName,
        conds: Vec<crate::ana::vars::SetCond>,
        expr: String,
        fmt: bool,
    },
    /// `auth [realm <realm>]`: a 401 asking for Basic credentials (realm: the proxy's name).
    Auth {
        realm: Option<String>,
    },
    /// `unset-var(<var>)`.
    UnsetVar {
        var: crate::ana::vars::VarName,
    },
    /// `normalize-uri <normalizer> [full|strict]`.
    NormalizeUri(UriNorm),
    /// `set-log-level <level>|silent`: the syslog severity of the stream's log line (None:
    /// no line).
    SetLogLevel(Option<u8>),
    /// `silent-drop`: the connection is dropped without telling the client.
    SilentDrop,
    /// `early-hint <name> <fmt>`: a 103 Early Hints interim response with this header.
    EarlyHint {
        name: String,
        value: String,
    },
    /// `set-src|set-dst|set-src-port|set-dst-port <expr>`: the stream's address (or port)
    /// becomes the sample's, for the rest of the transaction.
    SetAddr {
        dst: bool,
        port: bool,
        expr: String,
    },
    /// `tarpit [deny_status <code>]`: the request is held `timeout tarpit`, then answered with
    /// this status's error page.
    Tarpit {
        status: u16,
    },
    /// `disable-l7-retry`: portcullis makes no layer 7 retries, nothing to disable.
    DisableL7Retry,
}

/// The URI normalizers of `http-request normalize-uri` (HAProxy 2.6).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UriNorm {
    PathMergeSlashes,
    PathStripDot,
    /// `path-strip-dotdot [full]`: `full` also drops `..` segments above the root.
    PathStripDotdot {
        full: bool,
    },
    /// `percent-decode-unreserved [strict]`: `strict` refuses malformed escapes (400).
    PercentDecodeUnreserved {
        strict: bool,
    },
    /// `percent-to-uppercase [strict]`.
    PercentToUppercase {
        strict: bool,
    },
    QuerySortByName,
    FragmentStrip,
    FragmentEncode,
}

/// One capture slot: a header's value (`capture request|response header`) or what a
/// `capture` rule stores (`declare capture`, `… capture <sample> len <n>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureSlot {
    pub header: Option<String>,
    /// Values are cut to this many bytes.
    pub len: usize,
}

/// A frontend's capture slots, per direction, in HAProxy's numbering (declaration order).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Captures {
    pub req: Vec<CaptureSlot>,
    pub res: Vec<CaptureSlot>,
}

/// The part of the request line a rewrite reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinePart {
    Method,
    /// The path without the query string.
    Path,
    /// The path with the query string.
    PathQ,
    /// The query string after `?`.
    Query,
    /// The whole request-target.
    Uri,
}

/// `track-sc<n> <key> [table <t>]` (in `tcp-request connection|content` and `http-request`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TrackSc {
    /// Stick counter number, 0..=2.
    pub sc: u8,
    /// The key's sample expression, as written (compiled by `http::rules`).
    pub key: String,
    /// `table <name>`; default: the proxy's own table.
    pub table: Option<String>,
}

/// `stick-table type <type> size <n> [expire <t>] [store <data>[,<data>]*]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StickTable {
    pub key: StickKey,
    pub size: u32,
    pub expire: Option<Duration>,
    /// Stored data types in HAProxy's data-type order, without duplicates.
    pub store: Vec<StickStore>,
    /// `peers <section>`: the `peers` section that syncs it (None after the parse when that
    /// section is disabled or has no local peer, as HAProxy unlinks it).
    pub peers: Option<String>,
    pub loc: Loc,
}

/// An action on a tracked stick counter's entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ScAction {
    /// `sc-inc-gpc0(<sc>)` (`which` 0) / `sc-inc-gpc1(<sc>)` (`which` 1).
    IncGpc { which: u8, sc: u8 },
    /// `sc-set-gpt0(<sc>) <int>|<expr>`: `Err` holds a sample expression, as written.
    SetGpt0 { sc: u8, value: Result<i64, String> },
    /// `sc-inc-gpc(<idx>,<sc>)`: element `idx` of the `gpc` array.
    IncGpcAt { idx: u32, sc: u8 },
    /// `sc-set-gpt(<idx>,<sc>) <int>|<expr>`: element `idx` of the `gpt` array.
    SetGptAt {
        idx: u32,
        sc: u8,
        value: Result<i64, String>,
    },
}

/// A `peers <name>` section: the processes that keep stick tables in sync.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeersSection {
    pub name: String,
    pub loc: Loc,
    /// `disabled` (and not `enabled` again after it).
    pub disabled: bool,
    /// False when disabled or without a peer named after the local peer (HAProxy removes the
    /// section then, "Removing incomplete section").
    pub active: bool,
    /// Every `peer`/`server` line, in configuration order; one may be the local peer.
    pub peers: Vec<Peer>,
    /// Where the local peer listens (its `peer` line or the `bind` line).
    pub bind: Option<std::net::SocketAddr>,
    /// `table <name> …` lines: tables known as `<section>/<name>` and synced by this section.
    pub tables: Vec<(String, StickTable)>,
    /// `bind … ssl crt <pem>` (or `default-bind ssl crt <pem>`): the listener speaks TLS.
    pub bind_ssl: Option<BindSsl>,
}

/// One `peer <name> <addr:port>` (or `server <name> [<addr:port>]`) line of a `peers` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    pub name: String,
    /// None for the local peer of the `bind`/`server` form (or a `peer` line without address).
    pub addr: Option<std::net::SocketAddr>,
    /// This process (its name is the local peer name: `-L`, `localpeer` or the host name).
    pub local: bool,
    /// `ssl` on its line (or `default-server`): connections to it speak TLS with these
    /// options (`verify`, `ca-file`).
    pub ssl: Option<Box<ServerOpts>>,
    pub loc: Loc,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StickKey {
    Ip,
    Ipv6,
    /// `integer`: 32 bits.
    Integer,
    /// `string [len <n>]`: at most this many bytes (`len`, 31 by default).
    String(u32),
    /// `binary [len <n>]`: exactly this many bytes (`len`, 32 by default).
    Binary(u32),
}

impl StickKey {
    /// The word `type` takes (`show table`'s header).
    pub fn name(self) -> &'static str {
        match self {
            StickKey::Ip => "ip",
            StickKey::Ipv6 => "ipv6",
            StickKey::Integer => "integer",
            StickKey::String(_) => "string",
            StickKey::Binary(_) => "binary",
        }
    }
}

/// A stored data type; the rates carry their period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StickStore {
    ServerId,
    Gpt0,
    Gpc0,
    Gpc0Rate(Duration),
    ConnCnt,
    ConnRate(Duration),
    ConnCur,
    SessCnt,
    SessRate(Duration),
    HttpReqCnt,
    HttpReqRate(Duration),
    HttpErrCnt,
    HttpErrRate(Duration),
    BytesInCnt,
    BytesInRate(Duration),
    BytesOutCnt,
    BytesOutRate(Duration),
    Gpc1,
    Gpc1Rate(Duration),
    HttpFailCnt,
    HttpFailRate(Duration),
    /// `gpt(<n>)`, `gpc(<n>)`, `gpc_rate(<n>,<period>)`: arrays of `n` (1 to 100).
    Gpt(u32),
    Gpc(u32),
    GpcRate(u32, Duration),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpRequestRule {
    pub action: HttpRequestAction,
    pub cond: Option<Cond>,
    pub loc: Loc,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TcpRequestAction {
    Accept,
    Reject,
    /// `tcp-response content close`: the server connection closes, what it sent is forwarded.
    Close,
    /// `set-log-level <level>|silent` (not final; None: silent).
    SetLogLevel(Option<u8>),
    /// Not final: the next rule is evaluated.
    TrackSc(TrackSc),
    /// `sc-inc-gpc0|1(<sc>)`, `sc-set-gpt0(<sc>) <int>` (not final).
    Sc(ScAction),
    /// `capture <sample> len <n>` (not final), into request slot `slot`.
    Capture {
        sample: String,
        slot: usize,
        len: usize,
    },
    /// `tcp-request connection expect-proxy layer4` (not final): the connection starts with a
    /// PROXY protocol header, as on an `accept-proxy` bind.
    ExpectProxy,
    /// `set-var(<name>)`, `set-var-fmt(<name>)`, `unset-var(<name>)` (not final): the
    /// `HttpRequestAction::SetVar` / `UnsetVar` the same words make in `http-request`.
    Var(Box<HttpRequestAction>),
    /// `tcp-request session silent-drop`: the connection ends without telling the client.
    SilentDrop,
    /// `tcp-request session set-src|set-dst[-port] <expr>` (parsed; refused at start).
    SetAddr {
        dst: bool,
        port: bool,
        expr: String,
    },
    /// `tcp-request content lua.<name> [args…]` (not final unless the script ends the session).
    Lua {
        name: String,
        args: Vec<String>,
    },
}

/// Where a `tcp-request` rule runs: at accept (`connection`), once the connection is
/// established (`session`: after the PROXY header and the TLS handshake), or on the request's
/// content (`content`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TcpAt {
    Connection,
    Session,
    Content,
}

impl TcpAt {
    /// The rule set's word after `tcp-request`.
    pub fn word(self) -> &'static str {
        match self {
            TcpAt::Connection => "connection",
            TcpAt::Session => "session",
            TcpAt::Content => "content",
        }
    }
}

/// `tcp-request content accept|reject [if|unless cond]` (`connection` and `session` likewise).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TcpRequestRule {
    pub at: TcpAt,
    pub action: TcpRequestAction,
    pub cond: Option<Cond>,
    pub loc: Loc,
}

/// `option httpchk` and `http-check send`: the request a check sends.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpCheckSend {
    pub method: String,
    pub uri: String,
    /// `uri-lf`: `uri` is a log-format string.
    pub uri_lf: bool,
    pub version: String,
    /// Values are log-format strings (configuration.txt `http-check send hdr <name> <fmt>`).
    pub headers: Vec<(String, String)>,
    pub body: Option<String>,
    /// `body-lf`: `body` is a log-format string.
    pub body_lf: bool,
}

impl Default for HttpCheckSend {
    fn default() -> Self {
        HttpCheckSend {
            method: "OPTIONS".into(),
            uri: "/".into(),
            uri_lf: false,
            version: "HTTP/1.0".into(),
            headers: Vec::new(),
            body: None,
            body_lf: false,
        }
    }
}

impl HttpCheckSend {
    /// What one `http-check send` line sets overrides this request (HAProxy's
    /// tcpcheck_overwrite_send_http_rule); its headers replace those smuggled in the version.
    pub fn overlay(&mut self, r: &HttpSendRule) {
        if let Some(m) = &r.method {
            self.method = m.clone();
        }
        if let Some((u, lf)) = &r.uri {
            self.uri = u.clone();
            self.uri_lf = *lf;
        }
        if let Some(v) = &r.version {
            self.version = v.clone();
        }
        if !r.headers.is_empty() {
            if let Some((v, _)) = self.version.split_once("\r\n") {
                self.version = v.to_string();
            }
            self.headers = r.headers.clone();
        }
        if let Some((b, lf)) = &r.body {
            self.body = Some(b.clone());
            self.body_lf = *lf;
        }
    }
}

/// One `http-check send` line: only what it names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpSendRule {
    pub method: Option<String>,
    /// The URI and whether it is `uri-lf`.
    pub uri: Option<(String, bool)>,
    pub version: Option<String>,
    pub headers: Vec<(String, String)>,
    /// The body and whether it is `body-lf`.
    pub body: Option<(String, bool)>,
}

/// `http-check connect [default] [port <n>] [addr <ip>] [ssl] [sni <s>] [alpn <l>] [linger]`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckConnect {
    pub addr: Option<std::net::IpAddr>,
    /// The port `addr <ip>:<port>` carried: used when neither `port` nor the server's check
    /// port is set (HAProxy's tcpcheck_eval_connect).
    pub addr_port: Option<u16>,
    pub port: Option<u16>,
    pub ssl: bool,
    pub sni: Option<String>,
    pub alpn: Option<String>,
    pub linger: bool,
    pub default: bool,
}

/// How a header expect compares a name or a value (`-m str|beg|end|sub|reg`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StrMatch {
    #[default]
    Str,
    Beg,
    End,
    Sub,
    Reg,
}

/// The name or value pattern of `http-check expect hdr|fhdr`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HdrPattern {
    pub how: StrMatch,
    /// `name-lf` / `value-lf`: `pattern` is a log-format string.
    pub lf: bool,
    pub pattern: String,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ExpectMatch {
    /// comma list with ranges, e.g. `200,300-310`
    Status(Vec<(u16, u16)>),
    Rstatus(String),
    String(String),
    Rstring(String),
    /// `hdr` (each comma-separated value) or `fhdr` (`full`: the whole value).
    Header {
        full: bool,
        name: HdrPattern,
        value: Option<HdrPattern>,
    },
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpCheckExpect {
    pub negate: bool,
    pub matcher: ExpectMatch,
}

/// One `http-check` rule, in the order of the configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HttpCheckRule {
    Connect(CheckConnect),
    Send(HttpSendRule),
    Expect(HttpCheckExpect),
    /// `set-var(<name>) <expr>`, or `set-var-fmt(<name>) <fmt>` (`fmt`).
    SetVar {
        name: String,
        expr: String,
        fmt: bool,
    },
    UnsetVar(String),
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HttpCheck {
    /// `option httpchk`'s request with the first `http-check send` laid over it (HAProxy merges
    /// the two into one rule).
    pub send: HttpCheckSend,
    /// The `http-check` rules; the first `Send` among them is `send` above.
    pub rules: Vec<HttpCheckRule>,
    pub disable_on_404: bool,
    /// `http-check send-state`: the `X-Haproxy-Server-State` header.
    pub send_state: bool,
}

impl HttpCheck {
    pub fn expects(&self) -> impl Iterator<Item = &HttpCheckExpect> {
        self.rules.iter().filter_map(|r| match r {
            HttpCheckRule::Expect(x) => Some(x),
            _ => None,
        })
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TcpCheckRule {
    Connect {
        port: Option<u16>,
    },
    Send(Vec<u8>),
    /// `min-recv`: bytes to have before the pattern is judged (a mismatch is then final).
    Expect {
        negate: bool,
        matcher: ExpectMatch,
        min_recv: Option<usize>,
    },
}

#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StatsPage {
    pub enable: bool,
    pub uri: Option<String>,
    pub refresh: Option<Duration>,
    pub hide_version: bool,
    /// `stats show-legends`.
    pub show_legends: bool,
    /// `stats show-node [<name>]`: `Some("")` names the global `node` (or the hostname).
    pub show_node: Option<String>,
    /// `stats show-desc [<text>]`: `Some("")` uses the global `description`.
    pub show_desc: Option<String>,
    pub realm: Option<String>,
    pub auth: Vec<(String, String)>,
    pub admin: Option<Cond>,
    /// `stats http-request <rule>`: checked once the page's URI matched, before it is served.
    pub http_request: Vec<HttpRequestRule>,
}

/// Server options that `default-server` may also set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerOpts {
    pub weight: u32,
    pub maxconn: Option<u32>,
    pub maxqueue: Option<u32>,
    pub check: bool,
    pub check_port: Option<u16>,
    pub check_addr: Option<std::net::IpAddr>,
    pub inter: Duration,
    pub fastinter: Option<Duration>,
    pub downinter: Option<Duration>,
    pub rise: u32,
    pub fall: u32,
    pub backup: bool,
    pub disabled: bool,
    pub on_marked_down_shutdown_sessions: bool,
    pub on_marked_up_shutdown_backup_sessions: bool,
    pub ssl: bool,
    pub verify_none: bool,
    /// `verify` was given on the line (else the global `ssl-server-verify` decides).
    pub verify_set: bool,
    pub ca_file: Option<String>,
    /// `crt <pem>`: the client certificate (and key) offered to a TLS server.
    pub crt: Option<String>,
    pub sni: Option<String>,
    pub check_ssl: bool,
    /// `slowstart`: after coming back UP, the weight ramps up over this delay (whole seconds,
    /// as HAProxy rounds it).
    pub slowstart: Option<Duration>,
    pub resolve: ResolveOpts,
    /// The PROXY protocol header sent first on every connection to the server.
    pub send_proxy: SendProxy,
    /// `cookie <value>`: the persistence cookie value naming this server (`cookie` keyword of
    /// its backend).
    pub cookie: Option<String>,
    /// `check-send-proxy`: health checks send it too, even with `port`/`addr`.
    pub check_send_proxy: bool,
    /// `check-proto h1|h2`: the protocol of HTTP checks.
    pub check_proto: Option<String>,
    /// `check-alpn <list>`: ALPN offered by `check-ssl` handshakes.
    pub check_alpn: Option<Vec<String>>,
    /// `proto <mux>`: the protocol of the traffic (`h2`: HTTP/2 with prior knowledge).
    pub proto: Option<String>,
    /// `alpn <list>`: ALPN offered by `ssl` handshakes (`h2` negotiated: HTTP/2).
    pub alpn: Option<Vec<String>>,
    /// `max-reuse <n>`: how many times a connection may be reused (None: unlimited).
    pub max_reuse: Option<u64>,
}

/// `send-proxy`, `send-proxy-v2[-ssl[-cn]]` and `proxy-v2-options` (HAProxy's `pp_opts`): any
/// of them sends a header; version 2 only with a `send-proxy-v2*` keyword.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendProxy {
    pub v1: bool,
    pub v2: bool,
    pub ssl: bool,
    pub cert_cn: bool,
    pub ssl_cipher: bool,
    pub cert_sig: bool,
    pub cert_key: bool,
    pub authority: bool,
    pub crc32c: bool,
    pub unique_id: bool,
}

impl SendProxy {
    /// A header is sent at all (HAProxy: `pp_opts != 0`).
    pub fn enabled(&self) -> bool {
        *self != SendProxy::default()
    }
}

impl Default for ServerOpts {
    fn default() -> Self {
        ServerOpts {
            weight: 1,
            maxconn: None,
            maxqueue: None,
            check: false,
            check_port: None,
            check_addr: None,
            inter: Duration::from_secs(2),
            fastinter: None,
            downinter: None,
            rise: 2,
            fall: 3,
            backup: false,
            disabled: false,
            on_marked_down_shutdown_sessions: false,
            on_marked_up_shutdown_backup_sessions: false,
            ssl: false,
            verify_none: false,
            verify_set: false,
            ca_file: None,
            crt: None,
            sni: None,
            check_ssl: false,
            slowstart: None,
            resolve: ResolveOpts::default(),
            send_proxy: SendProxy::default(),
            cookie: None,
            check_send_proxy: false,
            check_proto: None,
            check_alpn: None,
            proto: None,
            alpn: None,
            max_reuse: None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Server {
    pub name: String,
    /// The address (`ip:port`): a name is resolved after the parse as `init-addr` says
    /// (0.0.0.0 when it starts unresolved).
    pub addr: std::net::SocketAddr,
    /// The host name as written, when the address is one (kept current by `resolvers`).
    pub fqdn: Option<String>,
    /// A unix-socket server (`unix@`, a path, `abns@`): `addr` is then a placeholder.
    pub unix: Option<super::addr::UnixAddr>,
    /// Starts in maintenance for want of an address (`init-addr none`, or a name that does not
    /// resolve under `resolvers`): HAProxy's RMAINT.
    pub unresolved: bool,
    /// `id <n>` or auto-assigned 1..n in configuration order (`sid` in `show stat`).
    pub id: u32,
    pub opts: ServerOpts,
    pub loc: Loc,
}

#[derive(Clone, Debug, Default)]
pub struct Options {
    pub httplog: bool,
    pub httplog_clf: bool,
    pub tcplog: bool,
    pub dontlognull: bool,
    pub log_health_checks: bool,
    pub forwardfor: Option<ForwardFor>,
    pub redispatch: Option<Redispatch>,
    pub allbackups: bool,
    /// `option persist`: a persistence cookie naming a stopped server still sends to it.
    pub persist: bool,
    pub socket_stats: bool,
    pub httpclose: bool,
    pub http_server_close: bool,
    pub http_keep_alive: bool,
    pub abortonclose: bool,
    /// `option idle-close-on-response`: at a soft stop, an idle keep-alive connection is kept
    /// until it carries one more response (with `Connection: close`). portcullis always does
    /// this (see `stream::http`), so the option is recorded and changes nothing.
    pub idle_close_on_response: bool,
    pub httpchk: Option<HttpCheck>,
    pub tcp_check: bool,
    /// `no option splice-request` / `no option splice-auto`: the client→server direction of
    /// this proxy's `mode tcp` sessions never uses splice(2) (on by default, see `tcp::pipe`).
    pub no_splice_request: bool,
    /// `no option splice-response` / `no option splice-auto`: likewise server→client.
    pub no_splice_response: bool,
    /// `option clitcpka` (or `tcpka` in a frontend): SO_KEEPALIVE on client connections.
    pub clitcpka: bool,
    /// `option srvtcpka` (or `tcpka` in a backend): SO_KEEPALIVE on server connections.
    pub srvtcpka: bool,
    /// `option dontlog-normal`: only sessions with an error are logged.
    pub dontlog_normal: bool,
    /// `option logasap`: the line is written once the server connection is up (TCP) or its
    /// response head forwarded (HTTP), with `+` before the times and bytes still growing.
    pub logasap: bool,
    /// `option log-separate-errors`: sessions with an error are logged at level `err`.
    pub log_separate_errors: bool,
    /// `option http-buffer-request`: the request body is awaited (whole, or a buffer's worth)
    /// before the analysis goes on (`stream/http/buffer.rs`).
    pub http_buffer_request: bool,
}

#[derive(Clone, Debug)]
pub struct Proxy {
    pub name: String,
    pub cap: Cap,
    /// `id <n>` or auto-assigned (`iid` in `show stat`).
    pub id: u32,
    pub loc: Loc,
    pub mode: Mode,
    pub disabled: bool,
    pub binds: Vec<Bind>,
    pub maxconn: Option<u32>,
    pub timeouts: Timeouts,
    pub retries: u32,
    pub balance: Balance,
    pub hash_type: HashType,
    /// `hash-balance-factor` (0: unbounded).
    pub hash_balance_factor: u32,
    pub http_reuse: HttpReuse,
    pub options: Options,
    pub logs: Vec<LogTarget>,
    /// `log-format` string, raw (compiled by `log::format`).
    pub log_format: Option<(String, Loc)>,
    /// `unique-id-format`, raw (compiled by `log::format`), and `unique-id-header`.
    pub unique_id_format: Option<(String, Loc)>,
    pub unique_id_header: Option<String>,
    pub acls: Vec<AclDef>,
    pub default_backend: Option<(String, Loc)>,
    pub use_backends: Vec<UseBackend>,
    pub http_request: Vec<HttpRequestRule>,
    /// `http-response` rules (the same actions on the server's response head).
    pub http_response: Vec<HttpRequestRule>,
    /// `http-after-response` rules: every response, the proxy's own ones included.
    pub http_after_response: Vec<HttpRequestRule>,
    pub captures: Captures,
    pub tcp_request: Vec<TcpRequestRule>,
    pub tcp_inspect_delay: Option<Duration>,
    /// `tcp-response content` rules (`connection` is false), on the server's first bytes.
    pub tcp_response: Vec<TcpRequestRule>,
    /// `tcp-response inspect-delay`.
    pub tcp_res_inspect_delay: Option<Duration>,
    pub http_check: HttpCheck,
    pub tcp_checks: Vec<TcpCheckRule>,
    pub default_server: ServerOpts,
    pub servers: Vec<Server>,
    pub stats: Option<StatsPage>,
    /// `portcullis-relay` (a portcullis extension): which engine relays `mode tcp` sessions.
    pub relay: Relay,
    /// `stick-table`: the proxy's own table, named after it.
    pub stick_table: Option<StickTable>,
    /// `stick on|match|store-request|store-response src [table <t>]`: persistence by client
    /// address, in configuration order.
    pub stick_rules: Vec<StickRule>,
    /// Keywords parsed and validated whose feature has not landed (see `Global::pending`).
    pub pending: Vec<(String, Loc)>,
    pub extra: ProxyExtra,
}

/// `portcullis-relay auto|kernel|userspace [max-unacked <size>] [bulk-rate <size>]` (a portcullis
/// extension, not HAProxy):
/// the engine that carries a `mode tcp` session's bytes once the server is connected.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Relay {
    /// The engine asked for; `None` (no keyword) means `Auto`.
    pub engine: Option<RelayEngine>,
    /// `max-unacked <size>`: the most bytes a direction may have redirected in the kernel and not
    /// yet acknowledged by the receiver before it moves to the userspace relay.
    pub max_unacked: Option<u64>,
    /// `bulk-rate <size>`: bytes per second above which a spliced direction counts as bulk and
    /// moves to the userspace relay (the splice is slower for bulk); `0` never moves it.
    pub bulk_rate: Option<u64>,
}

/// `portcullis-relay auto|kernel|userspace`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RelayEngine {
    /// Start on the userspace relay; move a chatty session into the kernel splice (`tcp::auto`).
    Auto,
    /// Splice when the kernel path is available.
    Kernel,
    /// Never the kernel splice, whatever the other side of the session says.
    Userspace,
}

/// `cookie` modes: at most one of them (HAProxy's `PR_CK_RW|PR_CK_INS|PR_CK_PFX`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CookieMode {
    Rewrite,
    Insert,
    Prefix,
}

/// `cookie <name> [rewrite|insert|prefix] [indirect] [nocache] [postonly] [preserve]
/// [httponly] [secure] [domain <d>]* [maxidle <t>] [maxlife <t>] [dynamic] [attr <v>]*`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CookieCfg {
    pub name: String,
    pub mode: Option<CookieMode>,
    pub indirect: bool,
    pub nocache: bool,
    pub postonly: bool,
    pub preserve: bool,
    pub httponly: bool,
    pub secure: bool,
    /// `domain` values joined as HAProxy emits them (`a; domain=b`).
    pub domain: Option<String>,
    /// Seconds; 0: none.
    pub maxidle: u32,
    pub maxlife: u32,
    pub dynamic: bool,
    /// `attr` values joined with `; `.
    pub attrs: Option<String>,
}

impl CookieCfg {
    /// HAProxy's `PR_CK_ANY`: a mode or `indirect` is set (the log then shows the cookie flags).
    pub fn any(&self) -> bool {
        self.mode.is_some() || self.indirect
    }
}

/// Proxy settings of the real-world keywords (error pages, monitor, description…).
#[derive(Clone, Debug, Default)]
pub struct ProxyExtra {
    /// `cookie <name> …`: cookie-based persistence (`http/cookie.rs`).
    pub cookie: Option<CookieCfg>,
    /// `dynamic-cookie-key <key>`: the secret of `cookie … dynamic`.
    pub dynamic_cookie_key: Option<String>,
    /// `capture cookie <name> len <n>`: the first cookie whose name starts with `name`, for
    /// `%CC` / `%CS`.
    pub capture_cookie: Option<(String, usize)>,
    /// `force-persist` (true) and `ignore-persist` (false) rules, in order.
    pub persist_rules: Vec<(bool, Cond)>,
    /// `persist rdp-cookie[(<name>)]`: the RDP cookie naming the server (`msts` by default).
    pub rdp_persist: Option<String>,
    /// The check rules (`option httpchk`, `http-check`) still those copied from `defaults`: the
    /// proxy's own first such line starts them afresh, as HAProxy frees inherited rules.
    pub checks_inherited: bool,
    /// `errorfile`/`errorloc*` and resolved `errorfiles`: (status, the response as HAProxy
    /// loads it), later entries win.
    pub error_pages: Vec<(u16, Vec<u8>)>,
    /// `errorfiles <section> [<status>…]` references, resolved at the end of the parse.
    pub errorfiles_refs: Vec<ErrorfilesRef>,
    /// `monitor-uri <uri>`.
    pub monitor_uri: Option<String>,
    /// `description <text>`.
    pub description: Option<String>,
    /// `load-server-state-from-file global|local|none` (unset: none).
    pub load_server_state: Option<LoadServerState>,
    /// `server-state-file-name [use-backend-name|<file>]`: the file of `local` (unset: the
    /// backend's name).
    pub server_state_file_name: Option<String>,
    /// `compression algo|type|offload` (`http/comp.rs`); None: no `compression` line.
    pub compression: Option<CompCfg>,
    /// The `filter` lines' names in order (`compression`, `trace`, `cache`, …).
    pub filters: Vec<String>,
}

/// A `compression algo` name (HAProxy 2.6's `comp_algos`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CompAlgo {
    Identity,
    /// zlib-wrapped deflate (RFC 1950).
    Deflate,
    /// Raw deflate (RFC 1951), announced as `deflate` (for clients that expect it unwrapped).
    RawDeflate,
    Gzip,
}

impl CompAlgo {
    /// The name `compression algo` takes (case-sensitive, as HAProxy's `strcmp`).
    pub fn from_cfg(name: &str) -> Option<CompAlgo> {
        Some(match name {
            "identity" => CompAlgo::Identity,
            "deflate" => CompAlgo::Deflate,
            "raw-deflate" => CompAlgo::RawDeflate,
            "gzip" => CompAlgo::Gzip,
            _ => return None,
        })
    }

    /// The configuration's name (what `res.comp_algo` returns).
    pub fn cfg_name(self) -> &'static str {
        match self {
            CompAlgo::Identity => "identity",
            CompAlgo::Deflate => "deflate",
            CompAlgo::RawDeflate => "raw-deflate",
            CompAlgo::Gzip => "gzip",
        }
    }

    /// The content-coding name: matched in `Accept-Encoding`, sent in `Content-Encoding`.
    pub fn coding(self) -> &'static str {
        match self {
            CompAlgo::Identity => "identity",
            CompAlgo::Deflate | CompAlgo::RawDeflate => "deflate",
            CompAlgo::Gzip => "gzip",
        }
    }
}

/// One proxy's `compression` settings. Both lists are in HAProxy's order: each word is put
/// in front (`comp_append_algo` prepends), after what `defaults` gave, so `Accept-Encoding: *`
/// picks the last algorithm configured.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CompCfg {
    pub algos: Vec<CompAlgo>,
    /// `compression type` prefixes (matched case-insensitively against `Content-Type`).
    pub types: Vec<String>,
    /// `compression offload`: the request's `Accept-Encoding` is removed once an algorithm
    /// is chosen (never inherited from `defaults`, where HAProxy ignores it).
    pub offload: bool,
}

/// `load-server-state-from-file`: where a backend's servers take their saved state at start.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoadServerState {
    /// The global `server-state-file`.
    Global,
    /// The backend's own file (`server-state-file-name`).
    Local,
    None,
}

impl ProxyExtra {
    /// The configured page for `status`, if any.
    pub fn error_page(&self, status: u16) -> Option<&[u8]> {
        self.error_pages
            .iter()
            .rev()
            .find(|(s, _)| *s == status)
            .map(|(_, b)| b.as_slice())
    }
}

/// One `errorfiles` line.
#[derive(Clone, Debug)]
pub struct ErrorfilesRef {
    pub section: String,
    /// Empty: every page of the section.
    pub statuses: Vec<u16>,
    pub loc: Loc,
}

impl Proxy {
    /// A proxy with HAProxy's built-in settings (what a proxy gets with no `defaults` section).
    pub fn new(name: &str, cap: Cap, loc: Loc) -> Proxy {
        Proxy {
            name: name.to_string(),
            cap,
            id: 0,
            loc,
            mode: Mode::Tcp,
            disabled: false,
            binds: Vec::new(),
            maxconn: None,
            timeouts: Timeouts::default(),
            retries: 3,
            balance: Balance::Roundrobin,
            hash_type: HashType::default(),
            hash_balance_factor: 0,
            http_reuse: HttpReuse::Safe,
            options: Options::default(),
            logs: Vec::new(),
            log_format: None,
            unique_id_format: None,
            unique_id_header: None,
            acls: Vec::new(),
            default_backend: None,
            use_backends: Vec::new(),
            http_request: Vec::new(),
            http_response: Vec::new(),
            http_after_response: Vec::new(),
            captures: Captures::default(),
            tcp_request: Vec::new(),
            tcp_inspect_delay: None,
            tcp_response: Vec::new(),
            tcp_res_inspect_delay: None,
            http_check: HttpCheck::default(),
            tcp_checks: Vec::new(),
            default_server: ServerOpts::default(),
            servers: Vec::new(),
            stats: None,
            relay: Relay::default(),
            stick_table: None,
            stick_rules: Vec::new(),
            pending: Vec::new(),
            extra: ProxyExtra::default(),
        }
    }

    /// HAProxy's word for this proxy in messages: `frontend`, `backend` or `proxy` (listen).
    pub fn kind(&self) -> &'static str {
        match (self.cap.frontend, self.cap.backend) {
            (true, true) => "proxy",
            (true, false) => "frontend",
            (false, true) => "backend",
            (false, false) => "defaults",
        }
    }
}

/// What a `stick` rule does with the server a client got.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StickKind {
    /// `stick on`: match, then store.
    On,
    Match,
    StoreRequest,
    StoreResponse,
}

impl StickKind {
    pub fn matches(self) -> bool {
        matches!(self, StickKind::On | StickKind::Match)
    }
    pub fn stores(self) -> bool {
        !matches!(self, StickKind::Match)
    }
}

/// One `stick` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StickRule {
    pub kind: StickKind,
    /// The key's sample expression, as written (compiled by `ana::sticking`).
    pub pattern: String,
    /// `table <name>`, else the proxy's own table.
    pub table: Option<String>,
    pub cond: Option<Cond>,
    pub loc: Loc,
}
