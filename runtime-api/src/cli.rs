//! CLI sessions, the command keyword table, dispatch and HAProxy 2.6's reply texts.
//!
//! Framing (verified against HAProxy 2.6): a received line is split into commands on unescaped
//! `;`; each command's reply is followed by `\n` (non-interactive) or `\n> ` (after `prompt`).
//! Messages are written as HAProxy writes them: most end in `\n` (so the reply ends with an empty
//! line), a few of HAProxy's texts have no `\n` and arrive as a single line.

use crate::info::{InfoFormat, dump_info};
use crate::model::{ProxySnap, ServerSnap, Snapshot};
use crate::reply::{Reply, Sev, SeverityOutput};
use crate::servers::{dump_backends, dump_servers_state};
use crate::ssl::{AbortCertError, CertDetails, CertList, CommitCertError, SetCertError, SetCertOk};
use crate::stat::{StatFormat, StatOpts, StatScope, dump_stat};
use std::fmt::Write as _;
use std::net::IpAddr;

/// Access level of a CLI session (`level` on the `stats socket` line; default operator).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    User = 1,
    Operator = 2,
    Admin = 3,
}

impl Level {
    pub fn as_str(self) -> &'static str {
        match self {
            Level::User => "user",
            Level::Operator => "operator",
            Level::Admin => "admin",
        }
    }
}

/// Per-connection CLI state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CliSession {
    pub level: Level,
    /// Interactive mode (`prompt`): each reply ends with `\n> ` and the connection stays open.
    pub prompt: bool,
    /// `set severity-output`: how messages are prefixed.
    pub severity: SeverityOutput,
}

impl CliSession {
    pub fn new(level: Level) -> CliSession {
        CliSession {
            level,
            prompt: false,
            severity: SeverityOutput::None,
        }
    }
}

/// What the socket shell does after writing [`Output::data`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Conn {
    /// Interactive session: wait for the next line.
    KeepOpen,
    /// Non-interactive: run any further lines already received (HAProxy serves pipelined
    /// requests), then close once the input buffer is empty.
    CloseIfIdle,
    /// `quit`: close now; later commands on the line were not run.
    Close,
}

/// The reply to one received line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Output {
    pub data: String,
    pub conn: Conn,
}

/// A server the proxy must act on: indexes into [`Snapshot::proxies`] and
/// [`ProxySnap::servers`] of the snapshot the command was resolved against, plus the ids.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SrvRef {
    pub proxy: usize,
    pub server: usize,
    pub proxy_id: u32,
    pub server_id: u32,
}

/// The port given to `set server … addr … port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortSpec {
    /// A fixed port.
    Fixed(u16),
    /// `+N`/`-N`: an offset added to the client's destination port, stored as HAProxy stores
    /// it (the 16-bit wrap of N, so `-5` is 65531).
    Mapped(u16),
}

/// `set server … state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdminOp {
    /// Leave maintenance and drain (`ready`, `enable server`): H = rise, checks resume.
    Ready,
    /// Weight effectively 0, still checked.
    Drain,
    /// Forced maintenance (`maint`, `disable server`): checks paused, H = 0.
    Maint,
}

/// `set server … health`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HealthOp {
    /// H = rise+fall-1, RUNNING.
    Up,
    /// H = rise+fall-1, STOPPING (NOLB).
    Stopping,
    /// H = 0, STOPPED.
    Down,
}

/// The proxy side. Every input is validated here first (all error texts live in this crate), so
/// mutations only apply state and cannot fail.
pub trait Runtime {
    /// A consistent view of every proxy, server and process counter.
    fn snapshot(&self) -> Snapshot;
    fn set_admin_state(&mut self, srv: SrvRef, op: AdminOp);
    fn set_health(&mut self, srv: SrvRef, op: HealthOp);
    /// `set server … agent up|down`.
    fn set_agent(&mut self, srv: SrvRef, up: bool);
    /// New user weight (0..=256), already computed from a `%` when given so.
    fn set_weight(&mut self, srv: SrvRef, weight: u32);
    /// `set server … addr`: new address and/or port (only the parts that change are `Some`).
    /// The proxy also clears a resolution maintenance (RMAINT) and drops idle connections.
    fn set_addr(&mut self, srv: SrvRef, addr: Option<IpAddr>, port: Option<PortSpec>);
    fn set_check_addr(&mut self, srv: SrvRef, addr: IpAddr, port: Option<u16>);
    fn set_check_port(&mut self, srv: SrvRef, port: u16);
    fn set_agent_addr(&mut self, srv: SrvRef, addr: IpAddr, port: Option<u16>);
    fn set_agent_port(&mut self, srv: SrvRef, port: u16);
    fn set_agent_send(&mut self, srv: SrvRef, text: &str);
    /// `enable|disable health`.
    fn set_check_enabled(&mut self, srv: SrvRef, on: bool);
    /// `enable|disable agent`.
    fn set_agent_enabled(&mut self, srv: SrvRef, on: bool);
    /// `set maxconn server` (HAProxy stores the C `long` into an unsigned: -1 wraps).
    fn set_maxconn_server(&mut self, srv: SrvRef, maxconn: u32);
    /// `clear counters` (max values and rates) or `clear counters all`.
    fn clear_counters(&mut self, all: bool);
    /// `shutdown sessions server`.
    fn shutdown_sessions(&mut self, srv: SrvRef);
    /// `show ssl cert`.
    fn ssl_cert_list(&self) -> CertList {
        CertList::default()
    }
    /// `show ssl cert <name>`: a loaded file, or `*<file>` for the transaction's copy.
    fn ssl_cert_details(&self, _name: &str) -> Option<CertDetails> {
        None
    }
    /// `set ssl cert <file>` with its payload (the PEM text).
    fn ssl_cert_set(&mut self, _file: &str, _payload: &str) -> Result<SetCertOk, SetCertError> {
        Err(SetCertError::NotReferenced)
    }
    /// `commit ssl cert <file>`: how many certificate uses were rebuilt.
    fn ssl_cert_commit(&mut self, _file: &str) -> Result<usize, CommitCertError> {
        Err(CommitCertError::NoTransaction)
    }
    fn ssl_cert_abort(&mut self, _file: &str) -> Result<(), AbortCertError> {
        Err(AbortCertError::NoTransaction)
    }
    /// `new ssl cert <file>`: an empty entry `set ssl cert` + `commit ssl cert` then fill.
    /// `Err` is HAProxy's message.
    fn ssl_cert_new(&mut self, _file: &str) -> Result<(), String> {
        Err(UNSUPPORTED_REPLY.to_string())
    }
    /// `show table [<table> [<filter>]*]`: `args` are the words after `show table`; `dump` is
    /// false below level operator (HAProxy then shows the header only). The reply's lines.
    fn show_table(&self, _args: &[&str], _dump: bool) -> String {
        UNSUPPORTED_REPLY.to_string()
    }
    /// `show resolvers [<id>]`: the dump, or HAProxy's error text for an unknown section.
    fn show_resolvers(&self, _only: Option<&str>) -> Result<String, String> {
        Err(UNSUPPORTED_REPLY.to_string())
    }
    /// `show peers [dict|-] [<section>]`: `args` are the words after `show peers`. `Err` is
    /// HAProxy's error text (an unknown section).
    fn show_peers(&self, _args: &[&str]) -> Result<String, String> {
        Err(UNSUPPORTED_REPLY.to_string())
    }
    /// `clear table <table> [<filter>]*`; `allowed` is false below level operator.
    fn clear_table(&mut self, _args: &[&str], _allowed: bool) -> String {
        UNSUPPORTED_REPLY.to_string()
    }
    /// `set table <table> key <k> [data.<type> <v>]*`; `allowed` is false below level
    /// operator. Empty on success, else HAProxy's error text.
    fn set_table(&mut self, _args: &[&str], _allowed: bool) -> String {
        UNSUPPORTED_REPLY.to_string()
    }
    /// `add server`: `backend` indexes [`Snapshot::proxies`] (a backend accepting dynamic
    /// servers), `addr` and `kws` are the words of a `server` line after the name. The server
    /// starts in maintenance, its checks disabled, as in HAProxy. `Err` is HAProxy's message
    /// (without its LF): a parse error, a duplicate name or id.
    fn add_server(
        &mut self,
        _backend: usize,
        _name: &str,
        _addr: &str,
        _kws: &[String],
    ) -> Result<(), String> {
        Err(UNSUPPORTED_REPLY.trim_end().to_string())
    }
    /// `del server`, once checked to be in maintenance and without connections.
    fn del_server(&mut self, _srv: SrvRef) {}
    /// `set maxconn frontend`: `proxy` indexes [`Snapshot::proxies`]; 0 as HAProxy reads it.
    fn set_maxconn_frontend(&mut self, _proxy: usize, _maxconn: u32) {}
    /// `disable frontend` (true) / `enable frontend`: accepting pauses or resumes.
    fn set_frontend_paused(&mut self, _proxy: usize, _paused: bool) {}
    /// `set rate-limit … global <n>`, already checked (0: no limit).
    fn set_rate_limit(&mut self, _which: crate::limits::RateLimit, _value: u32) {}
    /// `enable|disable dynamic-cookie backend` (`enable`), `set dynamic-cookie-key backend`
    /// (`key`), the backend found.
    fn set_dynamic_cookie(&mut self, _proxy: usize, _enable: Option<bool>, _key: Option<&str>) {}
    /// `shutdown frontend`: its listeners close for good (running sessions go on).
    fn shutdown_frontend(&mut self, _proxy: usize) {}
    /// `set maxconn global`, already checked against `Hard_maxconn` (0 means that limit).
    fn set_maxconn_global(&mut self, _maxconn: u32) {}
    /// `show errors [<iid>|<proxy>] [request|response]` (`args`: the words after `errors`).
    fn show_errors(&mut self, _args: &[String], out: &mut Reply) {
        out.err(UNSUPPORTED_REPLY);
    }
    /// `show sess [<id>|all]` / `shutdown session <id>` (`args`: the words after `sess`/
    /// `session`), the level already checked: the registry of live streams is the proxy's.
    fn sessions_command(&mut self, _verb: &str, _args: &[String], out: &mut Reply) {
        out.err(UNSUPPORTED_REPLY);
    }
    /// `<verb> ssl ca-file|crt-list <args…>` (the words after `ca-file`/`crt-list`), the
    /// session's level already checked: the stores and these commands' texts are the proxy's.
    fn ssl_store_command(
        &mut self,
        _verb: &str,
        _what: &str,
        _args: &[String],
        _payload: Option<&str>,
        out: &mut Reply,
    ) {
        out.err(UNSUPPORTED_REPLY);
    }
    /// `<verb> map|acl <args…>` (show, get, add, set, del, clear, prepare, commit; `what` is
    /// `map` or `acl`): the pattern store
    /// is the proxy's, and so are these commands' texts (see `portcullis::map::cli`).
    fn map_command(
        &mut self,
        _verb: &str,
        _what: &str,
        _args: &[String],
        _payload: Option<&str>,
        out: &mut Reply,
    ) {
        out.err(UNSUPPORTED_REPLY);
    }
}

/// Reply for a command HAProxy 2.6 knows but portcullis does not implement.
pub const UNSUPPORTED_REPLY: &str = "This command is not supported by this build.\n";
const PERMISSION_DENIED: &str = "Permission denied\n";

/// Which sessions see a keyword (HAProxy's expert/experimental modes are not offered).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Vis {
    Normal,
    Expert,
    Experimental,
}

/// Handlers of implemented commands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum H {
    ShowPeers,
    Help,
    Prompt,
    Quit,
    Operator,
    User,
    ShowCliLevel,
    ShowVersion,
    ShowStat,
    ShowInfo,
    ShowServersState,
    ShowBackend,
    GetWeight,
    SetWeight,
    SetServer,
    EnableServer,
    DisableServer,
    EnableHealth,
    DisableHealth,
    EnableAgent,
    DisableAgent,
    SetMaxconnServer,
    ClearCounters,
    ShutdownSessionsServer,
    SetSeverityOutput,
    AddServer,
    DelServer,
    Map,
    SetMaxconnFrontend,
    SetMaxconnGlobal,
    SetRateLimit,
    EnableFrontend,
    DisableFrontend,
    ShutdownFrontend,
    /// `enable|disable dynamic-cookie backend`, `set dynamic-cookie-key backend`.
    DynCookie,
    ShowSslCert,
    ShowTable,
    ClearTable,
    SetTable,
    ShowResolvers,
    SetSslCert,
    NewSslCert,
    /// `new|set|commit|abort|del|show ssl ca-file`, `add|del|show ssl crt-list`.
    SslStore,
    /// `show sess [<id>|all]`, `shutdown session <id>`.
    Sess,
    /// `show errors [<iid>|<proxy>] [request|response]`.
    ShowErrors,
    CommitSslCert,
    AbortSslCert,
    Unsupported,
}

/// One CLI keyword (HAProxy's `struct cli_kw`).
pub struct CliKw {
    /// The words that select the command (`["set", "server"]`).
    pub words: &'static [&'static str],
    /// The `help` line; `None` hides the command from `help`.
    pub usage: Option<&'static str>,
    vis: Vis,
    /// Lowest session level allowed; below it the reply is `Permission denied`.
    pub level: Level,
    handler: H,
}

const fn kw(
    words: &'static [&'static str],
    usage: Option<&'static str>,
    vis: Vis,
    level: Level,
    handler: H,
) -> CliKw {
    CliKw {
        words,
        usage,
        vis,
        level,
        handler,
    }
}

/// HAProxy 2.6's worker CLI keywords (`haproxy -dKcli`), in HAProxy's registration order (link
/// order of its objects): lookups take the first match and fuzzy suggestions keep the first of
/// equally distant keywords, so the order is part of the behaviour.
pub static CLI_KWS: &[CliKw] = &[
    kw(
        &["show", "tls-keys"],
        Some(
            "show tls-keys [id|*]                    : show tls keys references or dump tls ticket keys when id specified",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["set", "ssl", "tls-key"],
        Some(
            "set ssl tls-key [id|file] <key>         : set the next TLS key for the <id> or <file> listener to <key>",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["set", "ssl", "ocsp-response"],
        Some(
            "set ssl ocsp-response <resp|payload>    : update a certificate's OCSP Response from a base64-encode DER",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "ssl", "ocsp-response"],
        Some(
            "show ssl ocsp-response [id]             : display the IDs of the OCSP responses used in memory, or the details of a single OCSP response",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "ssl", "providers"],
        Some("show ssl providers                      : show loaded SSL providers"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["add", "ssl", "crt-list"],
        Some(
            "add ssl crt-list <list> <cert> [opts]*  : add to crt-list file <list> a line <cert> or a payload",
        ),
        Vis::Normal,
        Level::User,
        H::SslStore,
    ),
    kw(
        &["del", "ssl", "crt-list"],
        Some(
            "del ssl crt-list <list> <cert[:line]>   : delete a line <cert> from crt-list file <list>",
        ),
        Vis::Normal,
        Level::User,
        H::SslStore,
    ),
    kw(
        &["show", "ssl", "crt-list"],
        Some(
            "show ssl crt-list [-n] [<list>]         : show the list of crt-lists or the content of a crt-list file <list>",
        ),
        Vis::Normal,
        Level::User,
        H::SslStore,
    ),
    kw(
        &["new", "ssl", "cert"],
        Some(
            "new ssl cert <certfile>                 : create a new certificate file to be used in a crt-list or a directory",
        ),
        Vis::Normal,
        Level::User,
        H::NewSslCert,
    ),
    kw(
        &["set", "ssl", "cert"],
        Some("set ssl cert <certfile> <payload>       : replace a certificate file"),
        Vis::Normal,
        Level::User,
        H::SetSslCert,
    ),
    kw(
        &["commit", "ssl", "cert"],
        Some("commit ssl cert <certfile>              : commit a certificate file"),
        Vis::Normal,
        Level::User,
        H::CommitSslCert,
    ),
    kw(
        &["abort", "ssl", "cert"],
        Some(
            "abort ssl cert <certfile>               : abort a transaction for a certificate file",
        ),
        Vis::Normal,
        Level::User,
        H::AbortSslCert,
    ),
    kw(
        &["del", "ssl", "cert"],
        Some("del ssl cert <certfile>                 : delete an unused certificate file"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "ssl", "cert"],
        Some(
            "show ssl cert [<certfile>]              : display the SSL certificates used in memory, or the details of a file",
        ),
        Vis::Normal,
        Level::User,
        H::ShowSslCert,
    ),
    kw(
        &["new", "ssl", "ca-file"],
        Some(
            "new ssl ca-file <cafile>                : create a new CA file to be used in a crt-list",
        ),
        Vis::Normal,
        Level::User,
        H::SslStore,
    ),
    kw(
        &["set", "ssl", "ca-file"],
        Some("set ssl ca-file <cafile> <payload>      : replace a CA file"),
        Vis::Normal,
        Level::User,
        H::SslStore,
    ),
    kw(
        &["commit", "ssl", "ca-file"],
        Some("commit ssl ca-file <cafile>             : commit a CA file"),
        Vis::Normal,
        Level::User,
        H::SslStore,
    ),
    kw(
        &["abort", "ssl", "ca-file"],
        Some("abort ssl ca-file <cafile>              : abort a transaction for a CA file"),
        Vis::Normal,
        Level::User,
        H::SslStore,
    ),
    kw(
        &["del", "ssl", "ca-file"],
        Some("del ssl ca-file <cafile>                : delete an unused CA file"),
        Vis::Normal,
        Level::User,
        H::SslStore,
    ),
    kw(
        &["show", "ssl", "ca-file"],
        Some(
            "show ssl ca-file [<cafile>[:<index>]]   : display the SSL CA files used in memory, or the details of a <cafile>, or a single certificate of index <index> of a CA file <cafile>",
        ),
        Vis::Normal,
        Level::User,
        H::SslStore,
    ),
    kw(
        &["new", "ssl", "crl-file"],
        Some(
            "new ssl crlfile <crlfile>               : create a new CRL file to be used in a crt-list",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["set", "ssl", "crl-file"],
        Some("set ssl crl-file <crlfile> <payload>    : replace a CRL file"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["commit", "ssl", "crl-file"],
        Some("commit ssl crl-file <crlfile>           : commit a CRL file"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["abort", "ssl", "crl-file"],
        Some("abort ssl crl-file <crlfile>            : abort a transaction for a CRL file"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["del", "ssl", "crl-file"],
        Some("del ssl crl-file <crlfile>              : delete an unused CRL file"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "ssl", "crl-file"],
        Some(
            "show ssl crl-file [<crlfile[:<index>>]] : display the SSL CRL files used in memory, or the details of a <crlfile>, or a single CRL of index <index> of CRL file <crlfile>",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "sess"],
        Some(
            "show sess [id]                          : report the list of current sessions or dump this exact session",
        ),
        Vis::Normal,
        Level::Operator,
        H::Sess,
    ),
    kw(
        &["shutdown", "session"],
        Some("shutdown session [id]                   : kill a specific session"),
        Vis::Normal,
        Level::User,
        H::Sess,
    ),
    kw(
        &["shutdown", "sessions", "server"],
        Some("shutdown sessions server <bk>/<srv>     : kill sessions on a server"),
        Vis::Normal,
        Level::Admin,
        H::ShutdownSessionsServer,
    ),
    kw(
        &["clear", "counters"],
        Some(
            "clear counters [all]                    : clear max statistics counters (or all counters)",
        ),
        Vis::Normal,
        Level::Operator,
        H::ClearCounters,
    ),
    kw(
        &["show", "info"],
        Some(
            "show info [desc|json|typed|float]*      : report information about the running process",
        ),
        Vis::Normal,
        Level::User,
        H::ShowInfo,
    ),
    kw(
        &["show", "stat"],
        Some("show stat [desc|json|no-maint|typed|up]*: report counters for each proxy and server"),
        Vis::Normal,
        Level::User,
        H::ShowStat,
    ),
    kw(
        &["show", "schema", "json"],
        Some("show schema json                        : report schema used for stats"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["disable", "agent"],
        Some("disable agent                           : disable agent checks"),
        Vis::Normal,
        Level::Admin,
        H::DisableAgent,
    ),
    kw(
        &["disable", "health"],
        Some("disable health                          : disable health checks"),
        Vis::Normal,
        Level::Admin,
        H::DisableHealth,
    ),
    kw(
        &["disable", "server"],
        Some(
            "disable server (DEPRECATED)             : disable a server for maintenance (use 'set server' instead)",
        ),
        Vis::Normal,
        Level::Admin,
        H::DisableServer,
    ),
    kw(
        &["enable", "agent"],
        Some("enable agent                            : enable agent checks"),
        Vis::Normal,
        Level::Admin,
        H::EnableAgent,
    ),
    kw(
        &["enable", "health"],
        Some("enable health                           : enable health checks"),
        Vis::Normal,
        Level::Admin,
        H::EnableHealth,
    ),
    kw(
        &["enable", "server"],
        Some(
            "enable server  (DEPRECATED)             : enable a disabled server (use 'set server' instead)",
        ),
        Vis::Normal,
        Level::Admin,
        H::EnableServer,
    ),
    kw(
        &["set", "maxconn", "server"],
        Some("set maxconn server <bk>/<srv>           : change a server's maxconn setting"),
        Vis::Normal,
        Level::Admin,
        H::SetMaxconnServer,
    ),
    kw(
        &["set", "server"],
        Some(
            "set server <bk>/<srv> [opts]            : change a server's state, weight, address or ssl",
        ),
        Vis::Normal,
        Level::Admin,
        H::SetServer,
    ),
    kw(
        &["get", "weight"],
        Some("get weight <bk>/<srv>                   : report a server's current weight"),
        Vis::Normal,
        Level::User,
        H::GetWeight,
    ),
    kw(
        &["set", "weight"],
        Some(
            "set weight <bk>/<srv>  (DEPRECATED)     : change a server's weight (use 'set server' instead)",
        ),
        Vis::Normal,
        Level::Admin,
        H::SetWeight,
    ),
    kw(
        &["add", "server"],
        Some("add server <bk>/<srv>                   : create a new server"),
        Vis::Normal,
        Level::User,
        H::AddServer,
    ),
    kw(
        &["del", "server"],
        Some("del server <bk>/<srv>                   : remove a dynamically added server"),
        Vis::Normal,
        Level::User,
        H::DelServer,
    ),
    kw(
        &["clear", "table"],
        Some(
            "clear table <table> [<filter>]*         : remove an entry from a table (filter: data/key)",
        ),
        Vis::Normal,
        Level::User,
        H::ClearTable,
    ),
    kw(
        &["set", "table"],
        Some("set table <table> key <k> [data.* <v>]* : update or create a table entry's data"),
        Vis::Normal,
        Level::User,
        H::SetTable,
    ),
    kw(
        &["show", "table"],
        Some(
            "show table <table> [<filter>]*          : report table usage stats or dump this table's contents (filter: data/key)",
        ),
        Vis::Normal,
        Level::User,
        H::ShowTable,
    ),
    kw(
        &["show", "peers"],
        Some(
            "show peers [dict|-] [section]           : dump some information about all the peers or this peers section",
        ),
        Vis::Normal,
        Level::User,
        H::ShowPeers,
    ),
    kw(
        &["show", "resolvers"],
        Some(
            "show resolvers [id]                     : dumps counters from all resolvers section and associated name servers",
        ),
        Vis::Normal,
        Level::User,
        H::ShowResolvers,
    ),
    kw(&["help"], None, Vis::Normal, Level::User, H::Help),
    kw(&["prompt"], None, Vis::Normal, Level::User, H::Prompt),
    kw(&["quit"], None, Vis::Normal, Level::User, H::Quit),
    kw(
        &["_getsocks"],
        None,
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["expert-mode"],
        None,
        Vis::Normal,
        Level::Admin,
        H::Unsupported,
    ),
    kw(
        &["experimental-mode"],
        None,
        Vis::Normal,
        Level::Admin,
        H::Unsupported,
    ),
    kw(
        &["set", "maxconn", "global"],
        Some("set maxconn global <value>              : change the per-process maxconn setting"),
        Vis::Normal,
        Level::User,
        H::SetMaxconnGlobal,
    ),
    kw(
        &["set", "rate-limit"],
        Some("set rate-limit <setting> <value>        : change a rate limiting value"),
        Vis::Normal,
        Level::User,
        H::SetRateLimit,
    ),
    kw(
        &["set", "severity-output"],
        Some(
            "set severity-output [none|number|string]: set presence of severity level in feedback information",
        ),
        Vis::Normal,
        Level::User,
        H::SetSeverityOutput,
    ),
    kw(
        &["set", "timeout"],
        Some("set timeout [cli] <delay>               : change a timeout setting"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "env"],
        Some(
            "show env [var]                          : dump environment variables known to the process",
        ),
        Vis::Normal,
        Level::Operator,
        H::Unsupported,
    ),
    kw(
        &["show", "cli", "sockets"],
        Some("show cli sockets                        : dump list of cli sockets"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "cli", "level"],
        Some(
            "show cli level                          : display the level of the current CLI session",
        ),
        Vis::Normal,
        Level::User,
        H::ShowCliLevel,
    ),
    kw(
        &["show", "fd"],
        Some(
            "show fd [num]                           : dump list of file descriptors in use or a specific one",
        ),
        Vis::Normal,
        Level::Operator,
        H::Unsupported,
    ),
    kw(
        &["show", "activity"],
        Some(
            "show activity                           : show per-thread activity stats (for support/developers)",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "version"],
        Some("show version                            : show version of the current process"),
        Vis::Normal,
        Level::User,
        H::ShowVersion,
    ),
    kw(
        &["operator"],
        Some(
            "operator                                : lower the level of the current CLI session to operator",
        ),
        Vis::Normal,
        Level::Operator,
        H::Operator,
    ),
    kw(
        &["user"],
        Some(
            "user                                    : lower the level of the current CLI session to user",
        ),
        Vis::Normal,
        Level::User,
        H::User,
    ),
    kw(
        &["disable", "frontend"],
        Some("disable frontend <frontend>             : temporarily disable specific frontend"),
        Vis::Normal,
        Level::User,
        H::DisableFrontend,
    ),
    kw(
        &["enable", "frontend"],
        Some("enable frontend <frontend>              : re-enable specific frontend"),
        Vis::Normal,
        Level::User,
        H::EnableFrontend,
    ),
    kw(
        &["set", "maxconn", "frontend"],
        Some("set maxconn frontend <frontend> <value> : change a frontend's maxconn setting"),
        Vis::Normal,
        Level::User,
        H::SetMaxconnFrontend,
    ),
    kw(
        &["show", "servers", "conn"],
        Some(
            "show servers conn [<backend>]           : dump server connections status (all or for a single backend)",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "servers", "state"],
        Some(
            "show servers state [<backend>]          : dump volatile server information (all or for a single backend)",
        ),
        Vis::Normal,
        Level::User,
        H::ShowServersState,
    ),
    kw(
        &["show", "backend"],
        Some(
            "show backend                            : list backends in the current running config",
        ),
        Vis::Normal,
        Level::User,
        H::ShowBackend,
    ),
    kw(
        &["shutdown", "frontend"],
        Some("shutdown frontend <frontend>            : stop a specific frontend"),
        Vis::Normal,
        Level::User,
        H::ShutdownFrontend,
    ),
    kw(
        &["set", "dynamic-cookie-key", "backend"],
        Some(
            "set dynamic-cookie-key backend <bk> <k> : change a backend secret key for dynamic cookies",
        ),
        Vis::Normal,
        Level::User,
        H::DynCookie,
    ),
    kw(
        &["enable", "dynamic-cookie", "backend"],
        Some(
            "enable dynamic-cookie backend <bk>      : enable dynamic cookies on a specific backend",
        ),
        Vis::Normal,
        Level::User,
        H::DynCookie,
    ),
    kw(
        &["disable", "dynamic-cookie", "backend"],
        Some(
            "disable dynamic-cookie backend <bk>     : disable dynamic cookies on a specific backend",
        ),
        Vis::Normal,
        Level::User,
        H::DynCookie,
    ),
    kw(
        &["show", "errors"],
        Some(
            "show errors [<px>] [request|response]   : report last request and/or response errors for each proxy",
        ),
        Vis::Normal,
        Level::Operator,
        H::ShowErrors,
    ),
    kw(
        &["show", "cache"],
        Some("show cache                              : show cache status"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["httpclient"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["get", "var"],
        Some(
            "get var <name>                          : retrieve contents of a process-wide variable",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["set", "var"],
        None,
        Vis::Experimental,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "bug"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "check"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "close"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "delay"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "fd"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "exit"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "hex"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "log"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "loop"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "panic"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "sched"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "stream"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "sym"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "tkill"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "warn"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["debug", "dev", "write"],
        None,
        Vis::Expert,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "threads"],
        Some("show threads                            : show some threads debugging information"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "libs"],
        Some("show libs                               : show loaded object files and libraries"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "events"],
        Some("show events [<sink>] [-w] [-n]          : show event sink state"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["add", "acl"],
        Some("add acl [@<ver>] <acl> <pattern>        : add an acl entry"),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["clear", "acl"],
        Some("clear acl [@<ver>] <acl>                : clear the contents of this acl"),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["commit", "acl"],
        Some("commit acl @<ver> <acl>                 : commit the ACL at this version"),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["del", "acl"],
        Some("del acl <acl> [<key>|#<ref>]            : delete acl entries matching <key>"),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["get", "acl"],
        Some(
            "get acl <acl> <value>                   : report the patterns matching a sample for an ACL",
        ),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["prepare", "acl"],
        Some(
            "prepare acl <acl>                       : prepare a new version for atomic ACL replacement",
        ),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["show", "acl"],
        Some(
            "show acl [@<ver>] <acl>]                : report available acls or dump an acl's contents",
        ),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["add", "map"],
        Some(
            "add map [@<ver>] <map> <key> <val>      : add a map entry (payload supported instead of key/val)",
        ),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["clear", "map"],
        Some("clear map [@<ver>] <map>                : clear the contents of this map"),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["commit", "map"],
        Some("commit map @<ver> <map>                 : commit the map at this version"),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["del", "map"],
        Some("del map <map> [<key>|#<ref>]            : delete map entries matching <key>"),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["get", "map"],
        Some(
            "get map <acl> <value>                   : report the keys and values matching a sample for a map",
        ),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["prepare", "map"],
        Some(
            "prepare map <acl>                       : prepare a new version for atomic map replacement",
        ),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["set", "map"],
        Some("set map <map> [<key>|#<ref>] <value>    : modify a map entry"),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["show", "map"],
        Some(
            "show map [@ver] [map]                   : report available maps or dump a map's contents",
        ),
        Vis::Normal,
        Level::User,
        H::Map,
    ),
    kw(
        &["show", "pools"],
        Some(
            "show pools                              : report information about the memory pools usage",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["trace"],
        Some(
            "trace [<module>|0] [cmd [args...]]      : manage live tracing (empty to list, 0 to stop all)",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "trace"],
        Some("show trace [<module>]                   : show live tracing state"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["set", "profiling"],
        Some(
            "set profiling <what> {auto|on|off}      : enable/disable resource profiling (tasks,memory)",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "profiling"],
        Some(
            "show profiling [<what>|<#lines>|byaddr]*: show profiling state (all,status,tasks,memory)",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "tasks"],
        Some("show tasks                              : show running tasks"),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
    kw(
        &["show", "startup-logs"],
        Some(
            "show startup-logs                       : report logs emitted during HAProxy startup",
        ),
        Vis::Normal,
        Level::User,
        H::Unsupported,
    ),
];

/// Most arguments HAProxy splits a command into.
const MAX_ARGS: usize = 64;
/// Words of a keyword HAProxy compares (CLI_PREFIX_KW_NB).
const PREFIX_KW_NB: usize = 5;
/// Fuzzy suggestions kept (CLI_MAX_MATCHES).
const MAX_MATCHES: usize = 5;

/// Splits a received line into commands on unescaped `;` (a trailing CR is dropped first).
/// Backslash escapes are kept for [`split_args`].
pub fn split_commands(line: &str) -> Vec<&str> {
    let line = line.strip_suffix('\n').unwrap_or(line);
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut cmds = Vec::new();
    let mut start = 0;
    let mut escaped = false;
    for (i, b) in line.bytes().enumerate() {
        if escaped {
            escaped = false;
        } else if b == b'\\' {
            escaped = true;
        } else if b == b';' {
            cmds.push(line.get(start..i).unwrap_or(""));
            start = i + 1;
        }
    }
    cmds.push(line.get(start..).unwrap_or(""));
    cmds
}

/// Splits one command into words on spaces and tabs; a backslash makes the next character
/// literal (`\ `, `\;`, `\\`).
pub fn split_args(cmd: &str) -> Vec<String> {
    let mut args: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = cmd.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => {
                if in_word {
                    args.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\\' => {
                in_word = true;
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
        if args.len() >= MAX_ARGS {
            break;
        }
    }
    if in_word && args.len() < MAX_ARGS {
        args.push(cur);
    }
    args
}

fn visible(k: &CliKw) -> bool {
    k.vis == Vis::Normal
}

/// The keyword whose words all match the first arguments (HAProxy's `cli_find_kw`).
fn find_kw(args: &[String]) -> Option<&'static CliKw> {
    CLI_KWS.iter().find(|k| {
        k.words.len() <= args.len() && k.words.iter().zip(args).all(|(w, a)| *w == a.as_str())
    })
}

/// Letter-pair signature of words (HAProxy's `update_word_fingerprint`): counts of transitions
/// between character classes (a-z, digits, other, with word start/end as "other"), plus a
/// presence mark per class. Dense as HAProxy's, with the cells written so far listed: an unknown
/// command compares the args with every keyword, and comparing or clearing a keyword's signature
/// then costs its words' length instead of 1024 cells (it took 68% of the CLI fuzzer's time).
struct Fingerprint {
    cells: [u8; 1024],
    /// Cells that went from 0 to non-zero (a cell that wraps to 0 and back is listed twice).
    touched: Vec<usize>,
}

impl Fingerprint {
    fn new() -> Self {
        Fingerprint {
            cells: [0; 1024],
            touched: Vec::new(),
        }
    }

    fn add(&mut self, word: &str) {
        let class = |c: u8| -> usize {
            match c.to_ascii_lowercase() {
                c @ b'a'..=b'z' => usize::from(c - b'a' + 1),
                b'0'..=b'9' => 27,
                _ => 28,
            }
        };
        let mut from = 28;
        for b in word.bytes() {
            let to = class(b);
            // Row 0 records which classes occur at all.
            self.set(to, |_| 1);
            self.set(32 * from + to, |v| v.wrapping_add(1));
            from = to;
        }
        self.set(32 * from + 28, |v| v.wrapping_add(1));
    }

    fn set(&mut self, i: usize, f: impl Fn(u8) -> u8) {
        if let Some(slot) = self.cells.get_mut(i) {
            if *slot == 0 {
                self.touched.push(i);
            }
            *slot = f(*slot);
        }
    }

    fn total(&self) -> i64 {
        self.cells.iter().map(|&v| i64::from(v)).sum()
    }

    /// HAProxy's `word_fingerprint_distance` between `args` (whose [`Self::total`] is
    /// `args_total`) and this signature, which is left empty for the next keyword.
    fn take_distance(&mut self, args: &Fingerprint, args_total: i64) -> i64 {
        // Σ|a−b| = Σa + Σ over b's non-zero cells of (|a−b| − a).
        let mut d = args_total;
        for &i in &self.touched {
            let (Some(slot), Some(&a)) = (self.cells.get_mut(i), args.cells.get(i)) else {
                continue;
            };
            if *slot != 0 {
                d += (i64::from(a) - i64::from(*slot)).abs() - i64::from(a);
                *slot = 0;
            }
        }
        self.touched.clear();
        d
    }
}

fn arg_at(args: &[String], i: usize) -> &str {
    args.get(i).map_or("", String::as_str)
}

/// Words of `k` from 0 matching the args, up to `limit`.
fn matching_prefix(k: &CliKw, args: &[String], limit: usize) -> usize {
    let mut idx = 0;
    while idx < limit {
        let Some(w) = k.words.get(idx) else { break };
        let a = arg_at(args, idx);
        if a.is_empty() || *w != a {
            break;
        }
        idx += 1;
    }
    idx
}

/// The usage list: `help [words]` (ishelp) or the reply to an unknown command, with HAProxy's
/// fuzzy suggestions (`cli_gen_usage_msg`).
pub fn usage_message(args: &[String], ishelp: bool, out: &mut String) {
    let args = if ishelp {
        args.get(1..).unwrap_or(&[])
    } else {
        args
    };
    let mut length = 0;
    for k in CLI_KWS.iter().filter(|k| visible(k)) {
        length = length.max(matching_prefix(k, args, PREFIX_KW_NB));
    }
    if ishelp {
        out.push_str("The following commands are valid at this level:\n");
    } else if length == 0 && arg_at(args, 0).is_empty() {
        out.push_str("Unknown command. Please enter one of the following commands only:\n");
    } else {
        out.push_str("Unknown command, but maybe one of the following ones is a better match:\n");
    }

    let mut matches: [(Option<&'static CliKw>, i64); MAX_MATCHES] = [(None, i64::MAX); MAX_MATCHES];
    if !arg_at(args, length).is_empty() {
        // The args' signature is the same for every keyword.
        let mut word_sig = Fingerprint::new();
        let mut args_len = 0i64;
        for a in args.iter().take(PREFIX_KW_NB).skip(length) {
            if a.is_empty() {
                break;
            }
            word_sig.add(a);
            args_len += a.len() as i64;
        }
        let word_total = word_sig.total();
        let mut list_sig = Fingerprint::new();
        for k in CLI_KWS.iter().filter(|k| visible(k) && k.usage.is_some()) {
            if matching_prefix(k, args, length) != length || k.words.len() <= length {
                continue;
            }
            let mut totlen = args_len;
            for w in k.words.iter().take(PREFIX_KW_NB).skip(length) {
                list_sig.add(w);
                totlen += w.len() as i64;
            }
            let dist = list_sig.take_distance(&word_sig, word_total);
            let last = MAX_MATCHES - 1;
            if dist < 5 * totlen / 2 && dist < matches[last].1 {
                matches[last] = (Some(k), dist);
                let mut i = last;
                while i > 0 && matches[i].1 < matches[i - 1].1 {
                    matches.swap(i, i - 1);
                    i -= 1;
                }
            }
        }
    }

    let mut entries: Vec<&'static str> = Vec::new();
    if matches[0].0.is_some() {
        let best = matches[0].1;
        for (k, d) in matches {
            let Some(k) = k else { break };
            if d > 5 * best / 2 {
                break;
            }
            if let Some(u) = k.usage {
                entries.push(u);
            }
        }
    } else {
        for k in CLI_KWS.iter().filter(|k| visible(k)) {
            if matching_prefix(k, args, length) == length
                && k.words.len() >= length
                && let Some(u) = k.usage
            {
                entries.push(u);
            }
        }
    }
    entries.sort_unstable();
    for u in entries {
        out.push_str("  ");
        out.push_str(u);
        out.push('\n');
    }
    out.push_str("  help [<command>]                        : list matching or all commands\n");
    out.push_str(
        "  prompt                                  : toggle interactive mode with prompt\n",
    );
    out.push_str("  quit                                    : disconnect\n");
}

/// Runs one received line (one or more `;`-separated commands) and returns the bytes to write.
pub fn execute(line: &str, session: &mut CliSession, rt: &mut dyn Runtime) -> Output {
    execute_with_payload(line, None, session, rt)
}

/// As [`execute`], for a line that ended in `<<` (given here without it) followed by
/// `payload`: the lines up to the first empty one, each with its LF. The last command of the
/// line receives it (see [`crate::ssl::payload_command`]).
pub fn execute_with_payload(
    line: &str,
    payload: Option<&str>,
    session: &mut CliSession,
    rt: &mut dyn Runtime,
) -> Output {
    let mut data = String::new();
    let cmds = split_commands(line);
    let last = cmds.len().saturating_sub(1);
    for (i, cmd) in cmds.into_iter().enumerate() {
        let args = split_args(cmd);
        let p = if i == last { payload } else { None };
        let mut reply = Reply::default();
        let flow = run_one(&args, p, session, rt, &mut reply);
        reply.render(session.severity, &mut data);
        if flow == Flow::Quit {
            return Output {
                data,
                conn: Conn::Close,
            };
        }
        data.push('\n');
        if session.prompt {
            data.push_str("> ");
        }
    }
    let conn = if session.prompt {
        Conn::KeepOpen
    } else {
        Conn::CloseIfIdle
    };
    Output { data, conn }
}

#[derive(PartialEq, Eq)]
enum Flow {
    Continue,
    Quit,
}

fn run_one(
    args: &[String],
    payload: Option<&str>,
    s: &mut CliSession,
    rt: &mut dyn Runtime,
    out: &mut Reply,
) -> Flow {
    let Some(k) = find_kw(args) else {
        usage_message(args, false, out);
        out.sev = Some(Sev::Info);
        return Flow::Continue;
    };
    match k.vis {
        Vis::Expert => {
            out.err("This command is restricted to expert mode only.\n");
            return Flow::Continue;
        }
        Vis::Experimental => {
            out.err("This command is restricted to experimental mode only.\n");
            return Flow::Continue;
        }
        Vis::Normal => {}
    }
    if s.level < k.level {
        out.err(PERMISSION_DENIED);
        return Flow::Continue;
    }
    match k.handler {
        H::Help => {
            usage_message(args, true, out);
            out.sev = Some(Sev::Info);
        }
        H::SetSeverityOutput => match SeverityOutput::parse(arg_at(args, 2)) {
            Some(m) => s.severity = m,
            None => out.err("one of 'none', 'number', 'string' is a required argument\n"),
        },
        H::Prompt => s.prompt = !s.prompt,
        H::Quit => return Flow::Quit,
        H::Operator => s.level = s.level.min(Level::Operator),
        H::User => s.level = Level::User,
        H::ShowCliLevel => {
            out.info(s.level.as_str());
            out.push('\n');
        }
        H::ShowVersion => {
            out.info(&rt.snapshot().info.version);
            out.push('\n');
        }
        H::ShowStat => show_stat(args, s, rt, out),
        H::ShowInfo => show_info(args, rt, out),
        H::ShowServersState => {
            let snap = rt.snapshot();
            let bk = args.get(3).map(String::as_str).filter(|a| !a.is_empty());
            let mut body = String::new();
            match dump_servers_state(&snap, bk, &mut body) {
                Ok(()) => out.push_str(&body),
                Err(e) => out.err(e),
            }
        }
        H::ShowBackend => dump_backends(&rt.snapshot(), out),
        H::GetWeight => {
            let snap = rt.snapshot();
            if let Some((_, sv)) = find_server(&snap, arg_at(args, 2), out) {
                let _ = writeln!(out, "{} (initial {})", sv.uweight, sv.iweight);
            }
        }
        H::SetWeight => {
            let snap = rt.snapshot();
            if let Some((r, _)) = find_server(&snap, arg_at(args, 2), out) {
                set_weight(&snap, r, arg_at(args, 3), rt, out);
            }
        }
        H::SetServer => set_server(args, rt, out),
        H::EnableServer | H::DisableServer => {
            let snap = rt.snapshot();
            if let Some((r, _)) = find_server(&snap, arg_at(args, 2), out) {
                let op = if k.handler == H::EnableServer {
                    AdminOp::Ready
                } else {
                    AdminOp::Maint
                };
                rt.set_admin_state(r, op);
            }
        }
        H::EnableHealth | H::DisableHealth | H::EnableAgent | H::DisableAgent => {
            let snap = rt.snapshot();
            if let Some((r, sv)) = find_server(&snap, arg_at(args, 2), out) {
                match k.handler {
                    H::EnableHealth if !sv.check.configured => {
                        out.err("Health check was not configured on this server, cannot enable.\n")
                    }
                    H::EnableHealth => rt.set_check_enabled(r, true),
                    H::DisableHealth => rt.set_check_enabled(r, false),
                    H::EnableAgent if !sv.agent.configured => {
                        out.err("Agent was not configured on this server, cannot enable.\n")
                    }
                    H::EnableAgent => rt.set_agent_enabled(r, true),
                    _ => rt.set_agent_enabled(r, false),
                }
            }
        }
        H::SetMaxconnServer => {
            let snap = rt.snapshot();
            if let Some((r, _)) = find_server(&snap, arg_at(args, 3), out) {
                let v = arg_at(args, 4);
                if v.is_empty() {
                    out.err("Require <maxconn>.\n");
                } else {
                    match strtol(v) {
                        (_, 0) => out.err("maxconn string empty or preceded by garbage"),
                        (_, end) if end < v.len() => out.err("Trailing garbage in maxconn string"),
                        // HAProxy keeps the C conversion of the long into an unsigned int.
                        (n, _) => rt.set_maxconn_server(r, n as u32),
                    }
                }
            }
        }
        H::ClearCounters => {
            let all = arg_at(args, 2) == "all";
            if all && s.level < Level::Admin {
                out.err(PERMISSION_DENIED);
            } else {
                rt.clear_counters(all);
            }
        }
        H::ShutdownSessionsServer => {
            let snap = rt.snapshot();
            if let Some((r, _)) = find_server(&snap, arg_at(args, 3), out) {
                rt.shutdown_sessions(r);
            }
        }
        H::ShowSslCert => show_ssl_cert(args, s, rt, out),
        H::NewSslCert => new_ssl_cert(args, s, rt, out),
        H::SetSslCert | H::CommitSslCert | H::AbortSslCert => {
            ssl_cert_txn(k.handler, args, payload, s, rt, out)
        }
        H::ShowResolvers => {
            let only = args.get(2).map(String::as_str).filter(|a| !a.is_empty());
            match rt.show_resolvers(only) {
                Ok(text) => out.push_str(&text),
                Err(e) => out.err(&e),
            }
        }
        H::ShowPeers => {
            let words: Vec<&str> = args.iter().skip(2).map(String::as_str).collect();
            match rt.show_peers(&words) {
                Ok(r) => out.push_str(&r),
                Err(e) => out.err(&e),
            }
        }
        H::ShowTable | H::ClearTable | H::SetTable => {
            let words: Vec<&str> = args.iter().skip(2).map(String::as_str).collect();
            let oper = s.level >= Level::Operator;
            let r = match k.handler {
                H::ShowTable => rt.show_table(&words, oper),
                H::ClearTable => rt.clear_table(&words, oper),
                _ => rt.set_table(&words, oper),
            };
            // A dump starts with its `# table` header; any other text is HAProxy's error.
            if r.starts_with('#') {
                out.push_str(&r);
            } else {
                out.err(&r);
            }
        }
        H::AddServer
        | H::DelServer
        | H::SetMaxconnFrontend
        | H::SetMaxconnGlobal
        | H::SetRateLimit
        | H::EnableFrontend
        | H::DisableFrontend
        | H::ShutdownFrontend
        | H::DynCookie
            if s.level < Level::Admin =>
        {
            out.err(PERMISSION_DENIED)
        }
        H::SetMaxconnFrontend => crate::limits::set_maxconn_frontend(args, rt, out),
        H::SetMaxconnGlobal => crate::limits::set_maxconn_global(args, rt, out),
        H::SetRateLimit => crate::limits::set_rate_limit(args, rt, out),
        H::EnableFrontend | H::DisableFrontend | H::ShutdownFrontend => {
            let snap = rt.snapshot();
            let Some(pi) = crate::limits::find_frontend(&snap, arg_at(args, 2), out) else {
                return Flow::Continue;
            };
            let state = snap
                .proxies
                .get(pi)
                .and_then(|p| p.frontend.as_ref())
                .map(|f| f.state);
            let paused = state == Some(crate::model::FrontendState::Paused);
            let stopped = state == Some(crate::model::FrontendState::Stop);
            match k.handler {
                H::EnableFrontend if stopped => {
                    out.err("Frontend was previously shut down, cannot enable.\n")
                }
                H::DisableFrontend if stopped => {
                    out.notice("Frontend was previously shut down, cannot disable.\n")
                }
                H::ShutdownFrontend if stopped => out.notice("Frontend was already shut down.\n"),
                H::EnableFrontend if !paused => out.notice("All sockets are already enabled.\n"),
                H::EnableFrontend => rt.set_frontend_paused(pi, false),
                H::DisableFrontend if paused => out.notice("All sockets are already disabled.\n"),
                H::DisableFrontend => rt.set_frontend_paused(pi, true),
                _ => rt.shutdown_frontend(pi),
            }
        }
        H::DynCookie => dyn_cookie(args, rt, out),
        H::AddServer => crate::dynamic::add_server(args, rt, out),
        H::Map => rt.map_command(
            arg_at(args, 0),
            arg_at(args, 1),
            args.get(2..).unwrap_or(&[]),
            payload,
            out,
        ),
        H::DelServer => crate::dynamic::del_server(args, rt, out),
        H::ShowErrors => rt.show_errors(args.get(2..).unwrap_or(&[]), out),
        H::Sess => {
            let verb = arg_at(args, 0);
            if verb == "shutdown" && s.level < Level::Admin {
                out.err(PERMISSION_DENIED);
            } else {
                rt.sessions_command(verb, args.get(2..).unwrap_or(&[]), out);
            }
        }
        H::SslStore => {
            let verb = arg_at(args, 0);
            // HAProxy 2.6: the dumps need `operator` (else its allocation error), changes `admin`.
            if verb == "show" && s.level < Level::Operator {
                out.err("Can't allocate memory!\n");
            } else if verb != "show" && s.level < Level::Admin {
                out.err(PERMISSION_DENIED);
            } else {
                rt.ssl_store_command(
                    verb,
                    arg_at(args, 2),
                    args.get(3..).unwrap_or(&[]),
                    payload,
                    out,
                );
            }
        }
        H::Unsupported => out.err(UNSUPPORTED_REPLY),
    }
    Flow::Continue
}

fn show_ssl_cert(args: &[String], s: &CliSession, rt: &dyn Runtime, out: &mut Reply) {
    // HAProxy 2.6 answers a user-level session so.
    if s.level < Level::Operator {
        out.err("Can't allocate memory!\n");
        return;
    }
    match args.get(3) {
        None => crate::ssl::format_list(&rt.ssl_cert_list(), &mut out.text),
        Some(name) => match rt.ssl_cert_details(name) {
            Some(d) => crate::ssl::format_details(&d, &mut out.text),
            None => out.err(crate::ssl::SHOW_NOT_FOUND),
        },
    }
}

fn new_ssl_cert(args: &[String], s: &CliSession, rt: &mut dyn Runtime, out: &mut Reply) {
    if s.level < Level::Admin {
        out.err(PERMISSION_DENIED);
        return;
    }
    match args.get(3).map(String::as_str).filter(|f| !f.is_empty()) {
        Some(f) => {
            let r = rt.ssl_cert_new(f);
            crate::ssl::new_reply(f, &r, out);
        }
        None => out.err("'new ssl cert' expects a filename\n"),
    }
}

fn ssl_cert_txn(
    h: H,
    args: &[String],
    payload: Option<&str>,
    s: &CliSession,
    rt: &mut dyn Runtime,
    out: &mut Reply,
) {
    if s.level < Level::Admin {
        out.err(PERMISSION_DENIED);
        return;
    }
    let file = args.get(3).map(String::as_str).filter(|f| !f.is_empty());
    match h {
        H::SetSslCert => match (file, payload) {
            (Some(f), Some(p)) => {
                let r = rt.ssl_cert_set(f, p);
                out.sev = Some(if r.is_ok() { Sev::Notice } else { Sev::Err });
                crate::ssl::set_reply(f, &r, out);
            }
            _ => out.err("'set ssl cert expects a filename and a certificate as a payload\n"),
        },
        H::CommitSslCert => match file {
            Some(f) => {
                let r = rt.ssl_cert_commit(f);
                // Success is the committing handler's dump; a failure is an error message.
                out.sev = r.is_err().then_some(Sev::Err);
                crate::ssl::commit_reply(f, &r, out);
            }
            None => out.err("'commit ssl cert expects a filename\n"),
        },
        _ => match file {
            Some(f) => {
                let r = rt.ssl_cert_abort(f);
                out.sev = Some(if r.is_ok() { Sev::Notice } else { Sev::Err });
                crate::ssl::abort_reply(f, &r, out);
            }
            None => out.err("'abort ssl cert' expects a filename\n"),
        },
    }
}

/// C `strtol(s, &end, 10)`: leading blanks, optional sign, digits; returns the value (saturated)
/// and the byte offset where parsing stopped (0 when no digits were read).
pub(crate) fn strtol(s: &str) -> (i64, usize) {
    let (v, end, _) = strtol_ext(s);
    (v, end)
}

/// [`strtol`] that also reports an overflow (C's `ERANGE`).
fn strtol_ext(s: &str) -> (i64, usize, bool) {
    let b = s.as_bytes();
    let mut i = 0;
    while b.get(i).is_some_and(|c| c.is_ascii_whitespace()) {
        i += 1;
    }
    let neg = match b.get(i) {
        Some(b'-') => {
            i += 1;
            true
        }
        Some(b'+') => {
            i += 1;
            false
        }
        _ => false,
    };
    let digits_start = i;
    let mut v: i64 = 0;
    let mut overflow = false;
    while let Some(d) = b.get(i).filter(|c| c.is_ascii_digit()) {
        let d = i64::from(d - b'0');
        let next = v.checked_mul(10).and_then(|x| {
            if neg {
                x.checked_sub(d)
            } else {
                x.checked_add(d)
            }
        });
        match next {
            Some(n) => v = n,
            None => {
                overflow = true;
                v = if neg { i64::MIN } else { i64::MAX };
            }
        }
        i += 1;
    }
    if i == digits_start {
        return (0, 0, false);
    }
    (v, i, overflow)
}

/// Resolves `<backend>/<server>` (either part may be `#<id>`), writing HAProxy's error text.
fn find_server<'a>(
    snap: &'a Snapshot,
    arg: &str,
    out: &mut Reply,
) -> Option<(SrvRef, &'a ServerSnap)> {
    let (b, s) = match arg.split_once('/') {
        Some((b, s)) if !b.is_empty() && !s.is_empty() => (b, s),
        _ => {
            out.err("Require 'backend/server'.\n");
            return None;
        }
    };
    let pi = snap.find_backend(b);
    let Some((pi, px)) = pi.and_then(|i| snap.proxies.get(i).map(|p| (i, p))) else {
        out.err("No such backend.\n");
        return None;
    };
    let Some((si, sv)) = px
        .find_server(s)
        .and_then(|i| px.servers.get(i).map(|v| (i, v)))
    else {
        out.err("No such server.\n");
        return None;
    };
    if px.disabled {
        out.err("Proxy is disabled.\n");
        return None;
    }
    Some((
        SrvRef {
            proxy: pi,
            server: si,
            proxy_id: px.id,
            server_id: sv.id,
        },
        sv,
    ))
}

fn set_weight(snap: &Snapshot, r: SrvRef, w: &str, rt: &mut dyn Runtime, out: &mut Reply) {
    let Some(px) = snap.proxies.get(r.proxy) else {
        return;
    };
    let Some(sv) = px.servers.get(r.server) else {
        return;
    };
    match parse_weight(px, sv, w) {
        Ok(v) => rt.set_weight(r, v),
        Err(e) => out.err(e),
    }
}

/// HAProxy's `server_parse_weight_change_request`, messages included (some have no `\n`).
fn parse_weight(px: &ProxySnap, sv: &ServerSnap, w: &str) -> Result<u32, &'static str> {
    if w.is_empty() {
        return Err("Require <weight> or <weight%>.\n");
    }
    let (mut v, end) = strtol(w);
    if end == 0 {
        return Err("Empty weight string empty or preceded by garbage");
    }
    let rest = w.get(end..).unwrap_or("");
    if rest == "%" {
        if v < 0 {
            return Err("Relative weight must be positive.\n");
        }
        v = v.min(25600);
        v = (i64::from(sv.iweight) * v / 100).min(256);
    } else if !(0..=256).contains(&v) {
        return Err("Absolute weight can only be between 0 and 256 inclusive.\n");
    } else if !rest.is_empty() {
        return Err("Trailing garbage in weight string");
    }
    let v = u32::try_from(v).unwrap_or(0);
    let dynamic = px.backend.as_ref().is_some_and(|b| b.dynamic_weights);
    if v != 0 && v != sv.iweight && !dynamic {
        return Err(
            "Backend is using a static LB algorithm and only accepts weights '0%' and '100%'.\n",
        );
    }
    Ok(v)
}

const SET_SERVER_USAGE: &str = "usage: set server <backend>/<server> addr | agent | agent-addr | agent-port | agent-send | check-addr | check-port | fqdn | health | ssl | state | weight\n";

/// `provided port is …` parsing of check-port / agent-port / `port` of check-addr, agent-addr.
fn parse_check_port(p: &str) -> Result<u16, &'static str> {
    let (v, end) = strtol(p);
    if end == 0 || end < p.len() {
        return Err("provided port is not an integer");
    }
    u16::try_from(v)
        .ok()
        .filter(|&v| v != 0 || p.trim() == "0")
        .ok_or("provided port is invalid")
}

fn set_server(args: &[String], rt: &mut dyn Runtime, out: &mut Reply) {
    let snap = rt.snapshot();
    let Some((r, sv)) = find_server(&snap, arg_at(args, 2), out) else {
        return;
    };
    let Some(px) = snap.proxies.get(r.proxy) else {
        return;
    };
    let a4 = arg_at(args, 4);
    match arg_at(args, 3) {
        "weight" => match parse_weight(px, sv, a4) {
            Ok(v) => rt.set_weight(r, v),
            Err(e) => out.err(e),
        },
        "state" => match a4 {
            "ready" => rt.set_admin_state(r, AdminOp::Ready),
            "drain" => rt.set_admin_state(r, AdminOp::Drain),
            "maint" => rt.set_admin_state(r, AdminOp::Maint),
            _ => out.err("'set server <srv> state' expects 'ready', 'drain' and 'maint'.\n"),
        },
        "health" => {
            if sv.tracks.is_some() {
                out.err("cannot change health on a tracking server.\n");
            } else {
                match a4 {
                    "up" => rt.set_health(r, HealthOp::Up),
                    "stopping" => rt.set_health(r, HealthOp::Stopping),
                    "down" => rt.set_health(r, HealthOp::Down),
                    _ => {
                        out.err("'set server <srv> health' expects 'up', 'stopping', or 'down'.\n")
                    }
                }
            }
        }
        "agent" => {
            if !sv.agent.enabled {
                out.err("agent checks are not enabled on this server.\n");
            } else {
                match a4 {
                    "up" => rt.set_agent(r, true),
                    "down" => rt.set_agent(r, false),
                    _ => out.err("'set server <srv> agent' expects 'up' or 'down'.\n"),
                }
            }
        }
        "agent-addr" | "check-addr" => {
            let agent = arg_at(args, 3) == "agent-addr";
            if a4.is_empty() {
                out.err(&format!(
                    "set server <b>/<s> {} requires an address and optionally a port.\n",
                    arg_at(args, 3)
                ));
                return;
            }
            let enabled = if agent {
                sv.agent.enabled
            } else {
                sv.check.enabled
            };
            if !enabled {
                out.warn(if agent {
                    "agent checks are not enabled on this server"
                } else {
                    "health checks are not enabled on this server"
                });
                return;
            }
            let Ok(ip) = a4.parse::<IpAddr>() else {
                out.warn(&format!("invalid addr '{a4}'"));
                return;
            };
            let port = if arg_at(args, 5) == "port" {
                match parse_check_port(arg_at(args, 6)) {
                    Ok(p) => Some(p),
                    Err(e) => {
                        out.warn(e);
                        return;
                    }
                }
            } else {
                None
            };
            if agent {
                rt.set_agent_addr(r, ip, port);
            } else {
                rt.set_check_addr(r, ip, port);
            }
        }
        "agent-port" | "check-port" => {
            let agent = arg_at(args, 3) == "agent-port";
            if a4.is_empty() {
                out.err(&format!(
                    "set server <b>/<s> {} requires a port.\n",
                    arg_at(args, 3)
                ));
                return;
            }
            let enabled = if agent {
                sv.agent.enabled
            } else {
                sv.check.enabled
            };
            if !enabled {
                out.warn(if agent {
                    "agent checks are not enabled on this server"
                } else {
                    "health checks are not enabled on this server"
                });
                return;
            }
            match parse_check_port(a4) {
                Ok(p) if agent => rt.set_agent_port(r, p),
                Ok(p) => rt.set_check_port(r, p),
                Err(e) => out.warn(e),
            }
        }
        "agent-send" => {
            if !sv.agent.enabled {
                out.err("agent checks are not enabled on this server.\n");
            } else {
                rt.set_agent_send(r, a4);
            }
        }
        "addr" => set_server_addr(args, r, sv, rt, out),
        "fqdn" => {
            if a4.is_empty() {
                out.err("set server <b>/<s> fqdn requires a FQDN.\n");
            } else {
                out.err("set server <b>/<s> fqdn failed because no resolution is configured.\n");
            }
        }
        "ssl" => out.err(
            "'set server <srv> ssl' cannot be set.  default-server should define ssl settings\n",
        ),
        _ => out.err(SET_SERVER_USAGE),
    }
}

/// `set server <b>/<s> addr <ip> [port <p>]` with 2.6's message (`srv_update_addr_port`).
fn set_server_addr(
    args: &[String],
    r: SrvRef,
    sv: &ServerSnap,
    rt: &mut dyn Runtime,
    out: &mut Reply,
) {
    let a4 = arg_at(args, 4);
    if a4.is_empty() {
        out.err("set server <b>/<s> addr requires an address and optionally a port.\n");
        return;
    }
    let mut msg = String::new();
    let mut new_addr = None;
    let mut new_port = None;
    'upd: {
        let Ok(ip) = a4.parse::<IpAddr>() else {
            let _ = write!(msg, "Invalid addr '{a4}'");
            break 'upd;
        };
        let Some(old) = sv.addr else {
            msg.push_str("Update for the current server address family is only supported through configuration file");
            break 'upd;
        };
        if old != ip {
            let _ = write!(msg, "IP changed from '{old}' to '{a4}'");
            new_addr = Some(ip);
        } else {
            msg.push_str("no need to change the addr");
        }
        if arg_at(args, 5) != "port" {
            break 'upd;
        }
        let p = arg_at(args, 6);
        msg.push_str(", ");
        let (v, end, overflow) = strtol_ext(p);
        if end == 0 || overflow {
            let _ = write!(msg, "problem converting port '{p}' to an int");
            break 'upd;
        }
        // HAProxy keeps the C conversion of the long into its 16-bit port.
        let v16 = v as u16;
        let sign = p.bytes().next().filter(|c| *c == b'+' || *c == b'-');
        let change = match sign {
            Some(_) if !sv.port_map => {
                if sv.check.port == 0 {
                    msg.push_str("can't change <port> to port map because it is incompatible with current health check port configuration (use 'port' statement from the 'server' directive.");
                    break 'upd;
                }
                true
            }
            _ => sv.port != v16,
        };
        if !change {
            msg.push_str("no need to change the port");
            break 'upd;
        }
        msg.push_str("port changed from '");
        if sv.port_map {
            msg.push('+');
        }
        let _ = write!(msg, "{}' to '", sv.port);
        match sign {
            Some(b'-') => {
                let _ = write!(msg, "-{}'", v16.wrapping_neg());
                new_port = Some(PortSpec::Mapped(v16));
            }
            Some(_) => {
                let _ = write!(msg, "+{v16}'");
                new_port = Some(PortSpec::Mapped(v16));
            }
            None => {
                let _ = write!(msg, "{v16}'");
                new_port = Some(PortSpec::Fixed(v16));
            }
        }
    }
    // HAProxy clears the resolution maintenance whatever the update said.
    rt.set_addr(r, new_addr, new_port);
    msg.push_str(" by 'stats socket command'\n");
    out.warn(&msg);
}

fn show_stat(args: &[String], s: &CliSession, rt: &mut dyn Runtime, out: &mut Reply) {
    let snap = rt.snapshot();
    let mut opts = StatOpts {
        legends: s.level >= Level::Operator,
        ..StatOpts::default()
    };
    let mut i = 2;
    if arg_at(args, i) == "domain" {
        i += 1;
        match arg_at(args, i) {
            "proxy" => i += 1,
            "resolvers" => {
                out.err(UNSUPPORTED_REPLY);
                return;
            }
            _ => {
                out.err("Invalid statistics domain.\n");
                return;
            }
        }
    }
    let (a, b, c) = (arg_at(args, i), arg_at(args, i + 1), arg_at(args, i + 2));
    if !a.is_empty() && !b.is_empty() && !c.is_empty() {
        let iid = match snap.proxies.iter().find(|p| p.name == a) {
            Some(p) => i32::try_from(p.id).unwrap_or(0),
            None => atoi(a),
        };
        if iid == 0 {
            out.err("No such proxy.\n");
            return;
        }
        opts.scope = Some(StatScope {
            iid,
            types: atoi(b),
            sid: atoi(c),
        });
        i += 3;
    }
    for a in args.iter().skip(i) {
        match a.as_str() {
            "typed" => opts.format = StatFormat::Typed,
            "json" => opts.format = StatFormat::Json,
            "desc" => opts.desc = true,
            "no-maint" => opts.hide_maint = true,
            "up" => opts.hide_down = true,
            _ => {}
        }
    }
    dump_stat(&snap, opts, out);
}

/// C `atoi`.
fn atoi(s: &str) -> i32 {
    let (v, _) = strtol(s);
    v as i32
}

fn show_info(args: &[String], rt: &mut dyn Runtime, out: &mut String) {
    let mut format = InfoFormat::Plain;
    let mut desc = false;
    for a in args.iter().skip(2) {
        match a.as_str() {
            "typed" => format = InfoFormat::Typed,
            "json" => format = InfoFormat::Json,
            "desc" => desc = true,
            _ => {}
        }
    }
    dump_info(&rt.snapshot().info, format, desc, out);
}

impl CliKw {
    /// Whether portcullis answers this command itself (others get [`UNSUPPORTED_REPLY`]).
    pub fn implemented(&self) -> bool {
        self.handler != H::Unsupported
    }
}

/// The worker keyword inventory in `haproxy -dKcli` format (sorted, `[WORKER]` and mode tags),
/// so it can be diffed against HAProxy's own list. The master CLI keywords (`@…`, `reload`,
/// `show proc`, `mcli-debug-mode`) are not part of this crate.
pub fn dump_cli_keywords(out: &mut String) {
    let mut lines: Vec<String> = CLI_KWS
        .iter()
        .map(|k| {
            let mut l = k.words.join(" ");
            // Keywords shared with the master CLI carry both tags in HAProxy's dump.
            const BOTH: &[&str] = &[
                "experimental-mode",
                "expert-mode",
                "help",
                "operator",
                "prompt",
                "quit",
                "show cli level",
                "show cli sockets",
                "show version",
                "user",
            ];
            if BOTH.contains(&l.as_str()) {
                l.push_str(" [MASTER]");
            }
            l.push_str(" [WORKER] ");
            match k.vis {
                Vis::Expert => l.push_str("[EXPERT] "),
                Vis::Experimental => l.push_str("[EXPERIM] "),
                Vis::Normal => {}
            }
            l
        })
        .collect();
    lines.sort();
    out.push_str("# List of registered CLI keywords:\n");
    for l in lines {
        out.push_str(&l);
        out.push('\n');
    }
}

/// `enable|disable dynamic-cookie backend <bk>`, `set dynamic-cookie-key backend <bk> <key>`:
/// HAProxy's `cli_find_backend` words, then silence on success.
fn dyn_cookie(args: &[String], rt: &mut dyn Runtime, out: &mut Reply) {
    let name = arg_at(args, 3);
    if name.is_empty() {
        out.err("A backend name is expected.\n");
        return;
    }
    let Some(pi) = rt.snapshot().find_backend(name) else {
        out.err("No such backend.\n");
        return;
    };
    match arg_at(args, 0) {
        "set" => {
            let key = arg_at(args, 4);
            if key.is_empty() {
                out.err("String value expected.\n");
                return;
            }
            rt.set_dynamic_cookie(pi, None, Some(key));
        }
        verb => rt.set_dynamic_cookie(pi, Some(verb == "enable"), None),
    }
}

#[cfg(test)]
mod fingerprint_tests {
    use super::Fingerprint;

    fn dense(a: &Fingerprint, b: &Fingerprint) -> i64 {
        a.cells
            .iter()
            .zip(b.cells.iter())
            .map(|(x, y)| (i64::from(*x) - i64::from(*y)).abs())
            .sum()
    }

    #[test]
    fn sparse_distance_is_the_dense_one_and_leaves_the_signature_empty() {
        // A cell wraps past 255 in the long words (HAProxy's counters are bytes too).
        let long = "ab".repeat(300);
        let words = [
            "", "show", "stat", "servers", "state", "x1-Y_z", "Show", "9000", &long, "zz",
        ];
        let mut kw = Fingerprint::new();
        for args in words
            .iter()
            .flat_map(|a| words.iter().map(move |b| [*a, *b]))
        {
            let mut a = Fingerprint::new();
            for w in args {
                a.add(w);
            }
            for w in words.iter().rev().take(3).chain(args.iter()) {
                kw.add(w);
                let want = dense(&a, &kw);
                assert_eq!(kw.take_distance(&a, a.total()), want, "{args:?} vs {w:?}");
                assert!(kw.cells.iter().all(|&c| c == 0) && kw.touched.is_empty());
            }
        }
    }
}
