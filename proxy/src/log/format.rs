//! HAProxy log-format strings: compile once ([`LogFormat::parse`]), render per stream from a
//! [`LogRecord`] the proxy fills plus a [`SampleCtx`] for `%[fetch]` nodes. Pure: the accept
//! date and the local UTC offset come from the record, never from a clock.
//!
//! Rendering follows HAProxy 2.6 `sess_build_logline`: spaces in the format are separators that
//! collapse when the node before them printed nothing (so an unconfigured `%hr` vanishes with its
//! space); empty text values print `-` (or `""` when quoted with `+Q`); the request line and
//! captured headers escape non-printable bytes, `"` and `#` as `#XX`.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use crate::http::sample::{SampleCtx, SampleExpr, parse_sample_prefix};

/// `option httplog`.
pub const HTTPLOG_FORMAT: &str = "%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq %hr %hs %{+Q}r";
/// `option httplog clf`.
pub const HTTPLOG_CLF_FORMAT: &str = "%{+Q}o %{-Q}ci - - [%trg] %r %ST %B \"\" \"\" %cp %ms %ft %b %s %TR %Tw %Tc %Tr %Ta %tsc %ac %fc %bc %sc %rc %sq %bq %CC %CS %hrl %hsl";
/// `option tcplog`.
pub const TCPLOG_FORMAT: &str =
    "%ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts %ac/%fc/%bc/%sc/%rc %sq/%bq";

/// First character of the termination state: why the stream ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub enum TermCause {
    /// `-` normal end.
    #[default]
    None,
    /// `L` processed locally (redirect, stats, return).
    Local,
    /// `c` client-side timeout.
    ClientTimeout,
    /// `C` client aborted or error.
    ClientAbort,
    /// `s` server-side timeout.
    ServerTimeout,
    /// `S` server aborted or refused.
    ServerAbort,
    /// `P` proxy condition: deny, limit, security check.
    Proxy,
    /// `R` resource exhausted.
    Resource,
    /// `I` internal error.
    Internal,
    /// `D` killed because the server went DOWN (`on-marked-down shutdown-sessions`).
    Down,
    /// `K` killed by an administrator (`shutdown session`).
    Killed,
    /// `U` killed on a backup server because an active one came UP.
    Up,
}

impl TermCause {
    pub fn as_char(self) -> char {
        match self {
            TermCause::None => '-',
            TermCause::Local => 'L',
            TermCause::ClientTimeout => 'c',
            TermCause::ClientAbort => 'C',
            TermCause::ServerTimeout => 's',
            TermCause::ServerAbort => 'S',
            TermCause::Proxy => 'P',
            TermCause::Resource => 'R',
            TermCause::Internal => 'I',
            TermCause::Down => 'D',
            TermCause::Killed => 'K',
            TermCause::Up => 'U',
        }
    }
}

/// Second character: the stream's state when it ended.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TermState {
    /// `-` normal end (after the last data).
    #[default]
    None,
    /// `R` waiting for a complete request.
    Request,
    /// `Q` queued.
    Queue,
    /// `C` connecting to the server.
    Connect,
    /// `H` waiting for response headers.
    Headers,
    /// `D` data transfer.
    Data,
    /// `L` sending the last data.
    Last,
    /// `T` tarpitted.
    Tarpit,
}

impl TermState {
    pub fn as_char(self) -> char {
        match self {
            TermState::None => '-',
            TermState::Request => 'R',
            TermState::Queue => 'Q',
            TermState::Connect => 'C',
            TermState::Headers => 'H',
            TermState::Data => 'D',
            TermState::Last => 'L',
            TermState::Tarpit => 'T',
        }
    }
}

/// Termination state (`%ts`), e.g. `SC`, `cD`, `--`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Termination {
    pub cause: TermCause,
    pub state: TermState,
}

impl std::fmt::Display for Termination {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_char(self.cause.as_char())?;
        f.write_char(self.state.as_char())
    }
}

/// Persistence cookie states (`%tsc` chars 3 and 4), when the backend has a `cookie` set up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CookieState {
    /// `N` none, `I` invalid, `D` down server, `V` valid, `E` expired, `O` old, `U` unused.
    pub client: char,
    /// `N` none, `P` passed, `D` deleted, `I` inserted, `R` rewritten, `U` updated.
    pub server: char,
}

/// HAProxy's stream timers: milliseconds since accept at which each phase ended, `-1` when
/// not reached. The log fields derive from them exactly as HAProxy does:
/// `TR = t_request - t_idle - t_handshake`, `Tw = t_queue - t_request`,
/// `Tc = t_connect - t_queue`, `Tr = t_data - t_connect`, `Ta = t_close - t_idle - t_handshake`,
/// `Tt = t_close`, `Tq = t_request` (each `-1` if its end was not reached).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timers {
    /// `%Th`: handshake (TLS / PROXY protocol) duration.
    pub t_handshake: i64,
    /// `%Ti`: idle time before the first request byte (keep-alive wait); -1 if none.
    pub t_idle: i64,
    /// Full request headers received.
    pub t_request: i64,
    /// Left the queue (server assigned).
    pub t_queue: i64,
    /// Connection to the server established.
    pub t_connect: i64,
    /// Response headers received (HTTP) / first data (TCP).
    pub t_data: i64,
    /// Stream closed.
    pub t_close: i64,
}

impl Default for Timers {
    fn default() -> Self {
        Timers {
            t_handshake: 0,
            t_idle: -1,
            t_request: -1,
            t_queue: -1,
            t_connect: -1,
            t_data: -1,
            t_close: 0,
        }
    }
}

impl Timers {
    /// Build from the logged phase durations (what `%Th %Ti %TR %Tw %Tc %Tr %Ta` print), each
    /// `-1` when unreached. A phase after an unreached one is unreached too.
    pub fn from_phases(th: i64, ti: i64, tr: i64, tw: i64, tc: i64, tresp: i64, ta: i64) -> Self {
        let base = th + ti.max(0);
        let t_request = if tr >= 0 { base + tr } else { -1 };
        let t_queue = if tw >= 0 && t_request >= 0 {
            t_request + tw
        } else {
            -1
        };
        let t_connect = if tc >= 0 && t_queue >= 0 {
            t_queue + tc
        } else {
            -1
        };
        let t_data = if tresp >= 0 && t_connect >= 0 {
            t_connect + tresp
        } else {
            -1
        };
        Timers {
            t_handshake: th,
            t_idle: ti,
            t_request,
            t_queue,
            t_connect,
            t_data,
            t_close: base + ta,
        }
    }
    fn idle_hs(&self) -> i64 {
        if self.t_idle >= 0 {
            self.t_idle + self.t_handshake
        } else {
            0
        }
    }
    pub fn tr(&self) -> i64 {
        if self.t_request >= 0 {
            self.t_request - self.t_idle.max(0) - self.t_handshake
        } else {
            -1
        }
    }
    pub fn tw(&self) -> i64 {
        if self.t_queue >= 0 {
            self.t_queue - self.t_request
        } else {
            -1
        }
    }
    pub fn tc(&self) -> i64 {
        if self.t_connect >= 0 {
            self.t_connect - self.t_queue
        } else {
            -1
        }
    }
    pub fn tr_resp(&self) -> i64 {
        if self.t_data >= 0 {
            self.t_data - self.t_connect
        } else {
            -1
        }
    }
    pub fn ta(&self) -> i64 {
        self.t_close - self.idle_hs()
    }
    pub fn tt(&self) -> i64 {
        self.t_close
    }
}

/// Everything one log line may print, filled by the proxy when the stream ends (or at
/// request time with `option logasap`).
#[derive(Clone, Debug, Default)]
pub struct LogRecord<'a> {
    /// `%ci:%cp` (None: e.g. an internal applet).
    pub client: Option<SocketAddr>,
    /// A unix-socket client: `%ci`/`%fi` read `unix`, `%cp`/`%fp` this listener id (HAProxy).
    pub unix_listener: Option<u32>,
    /// `%fi:%fp`: address the client connected to.
    pub frontend_addr: Option<SocketAddr>,
    /// `%bi:%bp`: our source address towards the server.
    pub backend_src: Option<SocketAddr>,
    /// `%si:%sp`: the server's address.
    pub server_addr: Option<SocketAddr>,
    pub frontend: &'a str,
    /// The frontend listener is TLS: `%ft` prints `name~`.
    pub frontend_ssl: bool,
    /// Backend name; the frontend's own name when no backend was chosen.
    pub backend: &'a str,
    /// Server name; `None` prints `<NOSRV>`. Applets pass `<STATS>`, `<CACHE>`, ….
    pub server: Option<&'a str>,
    /// Backend in HTTP mode (changes `%Td`).
    pub http: bool,
    /// Accept date, microseconds since the Unix epoch.
    pub accept_date_us: i64,
    /// Local time offset from UTC, seconds (for `%t`, `%tr`, `%Tl`, `%trl`).
    pub utc_offset_secs: i32,
    pub timers: Timers,
    /// `option logasap`: logged before the end, so `%Ta %Tt %B` get a `+` prefix.
    pub logasap: bool,
    /// HTTP status (`%ST`); -1 when none was produced.
    pub status: i32,
    /// `%B`: bytes sent to the client, headers included.
    pub bytes_out: u64,
    /// `%U`: bytes received from the client.
    pub bytes_in: u64,
    pub term: Termination,
    /// `None` when the backend has no persistence cookie (`--` in `%tsc`).
    pub cookie: Option<CookieState>,
    pub actconn: u32,
    pub feconn: u32,
    pub beconn: u32,
    pub srv_conn: u32,
    pub retries: u32,
    /// The stream was redispatched: `%rc` prints `+N`.
    pub redispatched: bool,
    pub srv_queue: u32,
    pub be_queue: u32,
    /// The request line as received (`GET /x HTTP/1.1`); `None` prints `<BADREQ>`.
    pub request_line: Option<&'a str>,
    /// `capture request header` values; `None` when no capture is configured.
    pub req_captures: Option<&'a [Option<String>]>,
    pub res_captures: Option<&'a [Option<String>]>,
    /// `%CC` / `%CS` captured cookies.
    pub cli_cookie: Option<&'a str>,
    pub srv_cookie: Option<&'a str>,
    pub unique_id: Option<&'a str>,
    /// `%H`
    pub hostname: &'a str,
    pub pid: u32,
    /// `%lc`: per-frontend log counter; `%rt`: request counter.
    pub log_count: u64,
    pub req_counter: u64,
    pub ssl_cipher: Option<&'a str>,
    pub ssl_version: Option<&'a str>,
}

impl LogRecord<'_> {
    /// `option dontlognull`: nothing at all was received from the client.
    pub fn is_null(&self) -> bool {
        self.bytes_in == 0
    }

    /// HAProxy's notion of an error stream (logged at `err` with `option log-separate-errors`,
    /// and still logged with `option dontlog-normal`).
    pub fn is_error(&self) -> bool {
        self.redispatched || self.term.cause > TermCause::Local || (self.http && self.status >= 500)
    }

    /// Whether to emit this record at all under `dontlognull` / `dontlog-normal`.
    pub fn should_log(&self, dontlognull: bool, dontlog_normal: bool) -> bool {
        if dontlognull && self.is_null() {
            return false;
        }
        !dontlog_normal || self.is_error()
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Opts {
    quote: bool,
    hexa: bool,
    mandatory: bool,
    esc: bool,
}

impl Opts {
    fn apply(&mut self, args: &str) {
        for a in args.split(',') {
            let (on, name) = match a.as_bytes().first() {
                Some(b'+') => (true, a.get(1..).unwrap_or("")),
                Some(b'-') => (false, a.get(1..).unwrap_or("")),
                _ => continue,
            };
            match name {
                "Q" => self.quote = on,
                "X" => self.hexa = on,
                "M" => self.mandatory = on,
                "E" => self.esc = on,
                _ => {}
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Var {
    Global,
    Bytes,
    CookieCli,
    CookieSrv,
    Hostname,
    UniqueId,
    Status,
    DateGmt,
    Ta,
    Tc,
    Th,
    Ti,
    DateLocal,
    Tq,
    TrResp,
    TR,
    Td,
    Ts,
    Tt,
    Tu,
    Tw,
    BytesUp,
    ActConn,
    Backend,
    BeConn,
    BackendIp,
    BackendPort,
    BeQueue,
    ClientIp,
    ClientPort,
    Frontend,
    FeConn,
    FrontendIp,
    FrontendPort,
    FrontendXprt,
    HdrReq,
    HdrReqList,
    HdrRes,
    HdrResList,
    Method,
    Path,
    PathOnly,
    Query,
    Uri,
    HttpVersion,
    LogCount,
    Ms,
    Pid,
    Request,
    Retries,
    ReqCounter,
    Server,
    SrvConn,
    ServerIp,
    ServerPort,
    SrvQueue,
    SslCipher,
    SslVersion,
    Date,
    ReqDate,
    ReqDateGmt,
    ReqDateLocal,
    TermState,
    TermStateCk,
}

/// `(name, var, HTTP mode only)`, as HAProxy 2.6's `logformat_keywords`.
static VARS: &[(&str, Var, bool)] = &[
    ("o", Var::Global, false),
    ("B", Var::Bytes, false),
    ("CC", Var::CookieCli, true),
    ("CS", Var::CookieSrv, true),
    ("H", Var::Hostname, false),
    ("ID", Var::UniqueId, false),
    ("ST", Var::Status, false),
    ("T", Var::DateGmt, false),
    ("Ta", Var::Ta, true),
    ("Tc", Var::Tc, false),
    ("Th", Var::Th, false),
    ("Ti", Var::Ti, true),
    ("Tl", Var::DateLocal, false),
    ("Tq", Var::Tq, true),
    ("Tr", Var::TrResp, true),
    ("TR", Var::TR, true),
    ("Td", Var::Td, false),
    ("Ts", Var::Ts, false),
    ("Tt", Var::Tt, false),
    ("Tu", Var::Tu, false),
    ("Tw", Var::Tw, false),
    ("U", Var::BytesUp, false),
    ("ac", Var::ActConn, false),
    ("b", Var::Backend, false),
    ("bc", Var::BeConn, false),
    ("bi", Var::BackendIp, false),
    ("bp", Var::BackendPort, false),
    ("bq", Var::BeQueue, false),
    ("ci", Var::ClientIp, false),
    ("cp", Var::ClientPort, false),
    ("f", Var::Frontend, false),
    ("fc", Var::FeConn, false),
    ("fi", Var::FrontendIp, false),
    ("fp", Var::FrontendPort, false),
    ("ft", Var::FrontendXprt, false),
    ("hr", Var::HdrReq, false),
    ("hrl", Var::HdrReqList, false),
    ("hs", Var::HdrRes, false),
    ("hsl", Var::HdrResList, false),
    ("HM", Var::Method, true),
    ("HP", Var::Path, true),
    ("HPO", Var::PathOnly, true),
    ("HQ", Var::Query, true),
    ("HU", Var::Uri, true),
    ("HV", Var::HttpVersion, true),
    ("lc", Var::LogCount, false),
    ("ms", Var::Ms, false),
    ("pid", Var::Pid, false),
    ("r", Var::Request, true),
    ("rc", Var::Retries, false),
    ("rt", Var::ReqCounter, false),
    ("s", Var::Server, false),
    ("sc", Var::SrvConn, false),
    ("si", Var::ServerIp, false),
    ("sp", Var::ServerPort, false),
    ("sq", Var::SrvQueue, false),
    ("sslc", Var::SslCipher, false),
    ("sslv", Var::SslVersion, false),
    ("t", Var::Date, false),
    ("tr", Var::ReqDate, true),
    ("trg", Var::ReqDateGmt, true),
    ("trl", Var::ReqDateLocal, true),
    ("ts", Var::TermState, false),
    ("tsc", Var::TermStateCk, false),
];

#[derive(Clone, Debug)]
enum Node {
    Text(String),
    Sep,
    Var(Var, Opts),
    Expr(Box<SampleExpr>, Opts),
}

/// A compiled log-format string.
#[derive(Clone, Debug, Default)]
pub struct LogFormat {
    nodes: Vec<Node>,
}

impl LogFormat {
    /// `option httplog`
    pub fn httplog() -> Self {
        Self::parse(HTTPLOG_FORMAT, true).unwrap_or_default()
    }
    /// `option httplog clf`
    pub fn httplog_clf() -> Self {
        Self::parse(HTTPLOG_CLF_FORMAT, true).unwrap_or_default()
    }
    /// `option tcplog`
    pub fn tcplog() -> Self {
        Self::parse(TCPLOG_FORMAT, false).unwrap_or_default()
    }

    /// Compile `fmt` for a proxy in HTTP mode (`http`) or TCP mode. The error is HAProxy's
    /// text; the config layer prints it as
    /// `Parsing [file:line]: failed to parse log-format : <err>.`
    pub fn parse(fmt: &str, http: bool) -> Result<LogFormat, String> {
        Self::parse_in(fmt, http, false)
    }

    /// Compile a log-format argument of an `http-request` rule (`set-header X %[req.hdr(Host)]`):
    /// evaluated while the request is at hand, so request fetches are allowed.
    pub fn parse_rule(fmt: &str) -> Result<LogFormat, String> {
        Self::parse_in(fmt, true, true)
    }

    fn parse_in(fmt: &str, http: bool, in_request: bool) -> Result<LogFormat, String> {
        let mut nodes = Vec::new();
        // HAProxy passes LOG_OPT_MANDATORY (an empty value prints `-`) only for log-format;
        // a rule's format renders an absent sample as nothing.
        let mut defopts = Opts {
            mandatory: !in_request,
            ..Opts::default()
        };
        let mut text = String::new();
        let flush = |text: &mut String, nodes: &mut Vec<Node>| {
            if !text.is_empty() {
                nodes.push(Node::Text(std::mem::take(text)));
            }
        };
        let b = fmt.as_bytes();
        let mut i = 0;
        while let Some(&c) = b.get(i) {
            match c {
                b' ' => {
                    flush(&mut text, &mut nodes);
                    nodes.push(Node::Sep);
                    i += 1;
                }
                b'%' => {
                    i += 1;
                    let Some(&n) = b.get(i) else {
                        return Err("truncated line after '%'".into());
                    };
                    let mut arg: Option<&str> = None;
                    let mut n = n;
                    if n == b'%' {
                        text.push('%');
                        i += 1;
                        continue;
                    }
                    if n.is_ascii_digit() || n == b' ' || n == b'\t' {
                        return Err(format!(
                            "unexpected variable name near '{}' at position {i} line : '{fmt}'. Maybe you want to write a single '%', use the syntax '%%'",
                            n as char
                        ));
                    }
                    if n == b'{' {
                        let rest = fmt.get(i + 1..).unwrap_or("");
                        let Some(close) = rest.find('}') else {
                            return Err(format!("truncated line after '{rest}'"));
                        };
                        let a = rest.get(..close).unwrap_or("");
                        arg = Some(a);
                        i += 1 + close + 1;
                        match b.get(i) {
                            Some(&c) if c == b'[' || c.is_ascii_alphanumeric() => n = c,
                            _ => {
                                return Err(format!(
                                    "parse argument modifier without variable name near '%{{{a}}}'"
                                ));
                            }
                        }
                    }
                    if n == b'[' {
                        flush(&mut text, &mut nodes);
                        let rest = fmt.get(i + 1..).unwrap_or("");
                        let (expr, end) = parse_sample_prefix(rest).map_err(|e| {
                            format!("failed to parse sample expression <{rest}> : {e}")
                        })?;
                        if let Some(needs) = expr.def().log_needs.filter(|_| !in_request) {
                            return Err(format!(
                                "sample fetch <{rest}> may not be reliably used here because it needs '{needs}' which is not available here"
                            ));
                        }
                        let shown = rest.get(..end).unwrap_or("");
                        match rest.as_bytes().get(end) {
                            Some(b']') => {}
                            Some(&c) if (0x20..0x7f).contains(&c) => {
                                return Err(format!(
                                    "expected ']' after '{shown}', but found '{}'",
                                    c as char
                                ));
                            }
                            _ => return Err(format!("missing ']' after '{shown}'")),
                        }
                        let mut o = defopts;
                        if let Some(a) = arg {
                            o.apply(a);
                        }
                        nodes.push(Node::Expr(Box::new(expr), o));
                        i += 1 + end + 1;
                    } else if n.is_ascii_alphabetic()
                        || (arg.is_some() && n.is_ascii_alphanumeric())
                    {
                        let start = i;
                        while b.get(i).is_some_and(|c| c.is_ascii_alphanumeric()) {
                            i += 1;
                        }
                        let name = fmt.get(start..i).unwrap_or("");
                        let Some((_, var, http_only)) = VARS.iter().find(|(n, _, _)| *n == name)
                        else {
                            return Err(format!(
                                "no such format variable '{name}'. If you wanted to emit the '%' character verbatim, you need to use '%%'"
                            ));
                        };
                        if *http_only && !http {
                            return Err(format!(
                                "format variable '{name}' is reserved for HTTP mode"
                            ));
                        }
                        if *var == Var::Global {
                            if let Some(a) = arg {
                                defopts.apply(a);
                            }
                            continue;
                        }
                        flush(&mut text, &mut nodes);
                        let mut o = defopts;
                        if let Some(a) = arg {
                            o.apply(a);
                        }
                        nodes.push(Node::Var(*var, o));
                    }
                    // any other character after '%' is kept as text, the '%' dropped
                }
                _ => {
                    let rest = fmt.get(i..).unwrap_or("");
                    let len = rest.chars().next().map_or(1, char::len_utf8);
                    text.push_str(rest.get(..len).unwrap_or(""));
                    i += len;
                }
            }
        }
        flush(&mut text, &mut nodes);
        Ok(LogFormat { nodes })
    }

    /// Render one line (without the trailing newline) into `out`.
    pub fn render(&self, rec: &LogRecord<'_>, ctx: &SampleCtx<'_>, out: &mut String) {
        let mut last_isspace = true;
        for node in &self.nodes {
            match node {
                Node::Sep => {
                    if !last_isspace {
                        out.push(' ');
                        last_isspace = true;
                    }
                }
                Node::Text(t) => {
                    out.push_str(t);
                    last_isspace = false;
                }
                Node::Expr(e, o) => {
                    let v = e.eval(ctx);
                    let s = v.as_ref().map(|v| v.to_str());
                    lf_text(out, s.as_deref(), o);
                    last_isspace = false;
                }
                Node::Var(v, o) => {
                    if render_var(*v, o, rec, out) {
                        last_isspace = false;
                    }
                }
            }
        }
    }

    /// Convenience: render into a new string.
    pub fn render_to_string(&self, rec: &LogRecord<'_>, ctx: &SampleCtx<'_>) -> String {
        let mut s = String::with_capacity(256);
        self.render(rec, ctx, &mut s);
        s
    }
}

/// A text value: quoted with `+Q`; empty/absent prints `-` (mandatory) or `""` (quoted).
fn lf_text(out: &mut String, s: Option<&str>, o: &Opts) {
    if o.quote {
        out.push('"');
    }
    match s {
        Some(s) if !s.is_empty() => {
            if o.esc {
                for c in s.chars() {
                    if matches!(c, '"' | '\\' | ']') {
                        out.push('\\');
                    }
                    out.push(c);
                }
            } else {
                out.push_str(s);
            }
        }
        _ => {
            if o.mandatory && !o.quote {
                out.push('-');
            }
        }
    }
    if o.quote {
        out.push('"');
    }
}

fn lf_ip(out: &mut String, a: Option<SocketAddr>, o: &Opts) {
    match a {
        Some(a) if o.hexa => match a.ip() {
            IpAddr::V4(v4) => {
                for b in v4.octets() {
                    let _ = write!(out, "{b:02X}");
                }
            }
            IpAddr::V6(v6) => {
                for b in v6.octets() {
                    let _ = write!(out, "{b:02X}");
                }
            }
        },
        // IPv4 without the formatting machinery nor an allocation: every log line has one.
        Some(SocketAddr::V4(a)) => quoted(out, o, |out| {
            for (i, b) in a.ip().octets().into_iter().enumerate() {
                if i > 0 {
                    out.push('.');
                }
                push_uint(out, u64::from(b));
            }
        }),
        Some(a) => lf_text(out, Some(&a.ip().to_string()), o),
        None => lf_text(out, None, o),
    }
}

fn lf_port(out: &mut String, a: Option<SocketAddr>, o: &Opts) {
    match a {
        Some(a) if o.hexa => {
            let _ = write!(out, "{:04X}", a.port());
        }
        Some(a) => push_uint(out, u64::from(a.port())),
        None => lf_text(out, None, o),
    }
}

/// `#XX`-escape bytes < 0x20, >= 0x7f, `"` and `#` (plus `{|}` for captured headers).
fn encode(out: &mut String, s: &str, hdr: bool) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    let esc = |b: u8| {
        !(0x20..0x7f).contains(&b)
            || b == b'"'
            || b == b'#'
            || (hdr && matches!(b, b'{' | b'|' | b'}'))
    };
    // Runs of plain bytes in one copy. A run starts at 0 or after an escaped byte followed by
    // an ASCII one, so on a character boundary: `get` always finds it.
    let mut start = 0;
    for (i, &b) in s.as_bytes().iter().enumerate() {
        if esc(b) {
            out.push_str(s.get(start..i).unwrap_or_default());
            out.push('#');
            out.push(char::from(HEX[usize::from(b >> 4)]));
            out.push(char::from(HEX[usize::from(b & 15)]));
            start = i + 1;
        }
    }
    out.push_str(s.get(start..).unwrap_or_default());
}

fn quoted(out: &mut String, o: &Opts, f: impl FnOnce(&mut String)) {
    if o.quote {
        out.push('"');
    }
    f(out);
    if o.quote {
        out.push('"');
    }
}

const BADREQ: &str = "<BADREQ>";

fn is_sp(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

/// Split a request line into (method, uri, version, spaces-after-method>0).
fn split_reqline(line: &str) -> (&str, &str, &str, bool) {
    let b = line.as_bytes();
    let m_end = b.iter().position(|c| is_sp(*c)).unwrap_or(b.len());
    let mut u_start = m_end;
    while b.get(u_start).is_some_and(|c| is_sp(*c)) {
        u_start += 1;
    }
    let spaces = u_start > m_end;
    let mut u_end = u_start;
    while b.get(u_end).is_some_and(|c| !is_sp(*c)) {
        u_end += 1;
    }
    let mut v_start = u_end;
    while b.get(v_start).is_some_and(|c| is_sp(*c)) {
        v_start += 1;
    }
    (
        line.get(..m_end).unwrap_or(""),
        line.get(u_start..u_end).unwrap_or(""),
        line.get(v_start..).unwrap_or(""),
        spaces,
    )
}

/// A value `ltoa` prints: integers without the formatting machinery (a log line holds a score
/// of them), anything else through `Display`.
trait LogNum {
    fn put(self, out: &mut String);
}

macro_rules! lognum_unsigned {
    ($($t:ty),*) => {$(impl LogNum for $t {
        fn put(self, out: &mut String) {
            push_uint(out, u64::from(self));
        }
    })*};
}
lognum_unsigned!(u32, u64);

macro_rules! lognum_signed {
    ($($t:ty),*) => {$(impl LogNum for $t {
        fn put(self, out: &mut String) {
            let v = i64::from(self);
            if v < 0 {
                out.push('-');
            }
            push_uint(out, v.unsigned_abs());
        }
    })*};
}
lognum_signed!(i32, i64);

impl LogNum for Termination {
    fn put(self, out: &mut String) {
        out.push(self.cause.as_char());
        out.push(self.state.as_char());
    }
}

impl LogNum for std::fmt::Arguments<'_> {
    fn put(self, out: &mut String) {
        let _ = out.write_fmt(self);
    }
}

fn ltoa(out: &mut String, v: impl LogNum) {
    v.put(out);
}

/// `v` in decimal.
pub(crate) fn push_uint(out: &mut String, v: u64) {
    out.push_str(itoa::Buffer::new().format(v));
}

/// `v` in decimal on at least `width` digits (zero-padded), as `{:0width$}`.
pub(crate) fn push_padded(out: &mut String, v: u64, width: usize) {
    let mut buf = itoa::Buffer::new();
    let digits = buf.format(v);
    for _ in digits.len()..width {
        out.push('0');
    }
    out.push_str(digits);
}

fn plus(out: &mut String, rec: &LogRecord<'_>) {
    if rec.logasap {
        out.push('+');
    }
}

/// Render one variable; returns false when it printed nothing (captures not configured), so
/// the next separator is skipped.
fn render_var(v: Var, o: &Opts, rec: &LogRecord<'_>, out: &mut String) -> bool {
    let t = &rec.timers;
    let req_date_us = rec.accept_date_us + t.idle_hs() * 1000;
    match v {
        Var::Global => return false,
        Var::ClientIp | Var::FrontendIp if rec.client.is_none() && rec.unix_listener.is_some() => {
            lf_text(out, Some("unix"), o)
        }
        Var::ClientPort | Var::FrontendPort
            if rec.client.is_none()
                && let Some(id) = rec.unix_listener =>
        {
            ltoa(out, id)
        }
        Var::ClientIp => lf_ip(out, rec.client, o),
        Var::ClientPort => lf_port(out, rec.client, o),
        Var::FrontendIp => lf_ip(out, rec.frontend_addr, o),
        Var::FrontendPort => lf_port(out, rec.frontend_addr, o),
        Var::BackendIp => lf_ip(out, rec.backend_src, o),
        Var::BackendPort => lf_port(out, rec.backend_src, o),
        Var::ServerIp => lf_ip(out, rec.server_addr, o),
        Var::ServerPort => lf_port(out, rec.server_addr, o),
        Var::Date => date_log(out, rec.accept_date_us, rec.utc_offset_secs),
        Var::ReqDate => date_log(out, req_date_us, rec.utc_offset_secs),
        Var::DateGmt => date_zone(out, rec.accept_date_us, 0),
        Var::ReqDateGmt => date_zone(out, req_date_us, 0),
        Var::DateLocal => date_zone(out, rec.accept_date_us, rec.utc_offset_secs),
        Var::ReqDateLocal => date_zone(out, req_date_us, rec.utc_offset_secs),
        Var::Ts => {
            let secs = rec.accept_date_us.div_euclid(1_000_000);
            if o.hexa {
                ltoa(out, format_args!("{secs:04X}"));
            } else {
                ltoa(out, secs);
            }
        }
        Var::Ms => {
            let ms = rec.accept_date_us.rem_euclid(1_000_000) / 1000;
            if o.hexa {
                ltoa(out, format_args!("{ms:02X}"));
            } else {
                ltoa(out, format_args!("{ms:03}"));
            }
        }
        Var::Frontend => lf_text(out, Some(rec.frontend), o),
        Var::FrontendXprt => quoted(out, o, |out| {
            out.push_str(rec.frontend);
            if rec.frontend_ssl {
                out.push('~');
            }
        }),
        Var::SslCipher => lf_text(out, rec.ssl_cipher, o),
        Var::SslVersion => lf_text(out, rec.ssl_version, o),
        Var::Backend => lf_text(out, Some(rec.backend), o),
        Var::Server => lf_text(out, Some(rec.server.unwrap_or("<NOSRV>")), o),
        Var::Th => ltoa(out, t.t_handshake),
        Var::Ti => ltoa(out, t.t_idle),
        Var::TR => ltoa(out, t.tr()),
        Var::Tq => ltoa(out, t.t_request),
        Var::Tw => ltoa(out, t.tw()),
        Var::Tc => ltoa(out, t.tc()),
        Var::TrResp => ltoa(out, t.tr_resp()),
        Var::Td => {
            let d = if rec.http {
                if t.t_data >= 0 {
                    t.t_close - t.t_data
                } else {
                    -1
                }
            } else if t.t_connect >= 0 {
                t.t_close - t.t_connect
            } else {
                -1
            };
            ltoa(out, d);
        }
        Var::Ta => {
            plus(out, rec);
            ltoa(out, t.ta());
        }
        Var::Tt => {
            plus(out, rec);
            ltoa(out, t.tt());
        }
        Var::Tu => {
            plus(out, rec);
            ltoa(out, t.t_close - t.t_idle.max(0));
        }
        Var::Status => ltoa(out, rec.status),
        Var::Bytes => {
            plus(out, rec);
            ltoa(out, rec.bytes_out);
        }
        Var::BytesUp => ltoa(out, rec.bytes_in),
        Var::CookieCli => lf_text(out, rec.cli_cookie, o),
        Var::CookieSrv => lf_text(out, rec.srv_cookie, o),
        Var::TermState => ltoa(out, rec.term),
        Var::TermStateCk => {
            ltoa(out, rec.term);
            let (c, s) = rec.cookie.map_or(('-', '-'), |c| (c.client, c.server));
            out.push(c);
            out.push(s);
        }
        Var::ActConn => ltoa(out, rec.actconn),
        Var::FeConn => ltoa(out, rec.feconn),
        Var::BeConn => ltoa(out, rec.beconn),
        Var::SrvConn => ltoa(out, rec.srv_conn),
        Var::Retries => {
            if rec.redispatched {
                out.push('+');
            }
            ltoa(out, rec.retries);
        }
        Var::SrvQueue => ltoa(out, rec.srv_queue),
        Var::BeQueue => ltoa(out, rec.be_queue),
        Var::HdrReq | Var::HdrRes => {
            let caps = if v == Var::HdrReq {
                rec.req_captures
            } else {
                rec.res_captures
            };
            let Some(caps) = caps.filter(|c| !c.is_empty()) else {
                return false;
            };
            quoted(out, o, |out| {
                out.push('{');
                for (i, c) in caps.iter().enumerate() {
                    if i > 0 {
                        out.push('|');
                    }
                    if let Some(c) = c {
                        encode(out, c, true);
                    }
                }
                out.push('}');
            });
        }
        Var::HdrReqList | Var::HdrResList => {
            let caps = if v == Var::HdrReqList {
                rec.req_captures
            } else {
                rec.res_captures
            };
            let Some(caps) = caps.filter(|c| !c.is_empty()) else {
                return false;
            };
            for (i, c) in caps.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                quoted(out, o, |out| match c {
                    Some(c) => encode(out, c, true),
                    None if !o.quote => out.push('-'),
                    None => {}
                });
            }
        }
        Var::Request => quoted(out, o, |out| {
            encode(out, rec.request_line.unwrap_or(BADREQ), false)
        }),
        Var::Method | Var::Uri | Var::Path | Var::PathOnly | Var::Query | Var::HttpVersion => {
            quoted(out, o, |out| {
                let part = http_part(v, rec.request_line);
                encode(out, part, false);
            })
        }
        Var::ReqCounter => {
            if o.hexa {
                ltoa(out, format_args!("{:04X}", rec.req_counter));
            } else {
                ltoa(out, rec.req_counter);
            }
        }
        Var::LogCount => {
            if o.hexa {
                ltoa(out, format_args!("{:04X}", rec.log_count));
            } else {
                ltoa(out, rec.log_count);
            }
        }
        Var::Hostname => lf_text(out, Some(rec.hostname), o),
        Var::Pid => {
            if o.hexa {
                ltoa(out, format_args!("{:04X}", rec.pid));
            } else {
                ltoa(out, rec.pid);
            }
        }
        Var::UniqueId => lf_text(out, rec.unique_id, o),
    }
    true
}

/// `%HM %HU %HP %HPO %HQ %HV` from the request line, as HAProxy cuts it.
fn http_part(v: Var, line: Option<&str>) -> &str {
    let Some(line) = line else { return BADREQ };
    let (m, uri, ver, spaces) = split_reqline(line);
    match v {
        Var::Method => {
            if m.len() == line.len() {
                BADREQ
            } else {
                m
            }
        }
        Var::Query => match line.find('?') {
            Some(q) => {
                let rest = line.get(q..).unwrap_or("");
                let end = rest.find([' ', '\t']).unwrap_or(rest.len());
                rest.get(..end).unwrap_or("")
            }
            None => "",
        },
        _ if !spaces => BADREQ,
        Var::Uri => uri,
        Var::Path => uri.split('?').next().unwrap_or(""),
        Var::PathOnly => {
            let p = match uri.find("://") {
                Some(i) => {
                    let after = uri.get(i + 3..).unwrap_or("");
                    after.find('/').and_then(|j| after.get(j..)).unwrap_or("")
                }
                None => uri,
            };
            p.split('?').next().unwrap_or("")
        }
        Var::HttpVersion => {
            if ver.is_empty() {
                "HTTP/0.9"
            } else {
                ver
            }
        }
        _ => "",
    }
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// Broken-down civil time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Civil {
    pub year: i64,
    /// 1..=12
    pub month: u32,
    pub day: u32,
    pub hour: u32,
    pub min: u32,
    pub sec: u32,
    /// 0..1_000_000
    pub usec: u32,
}

impl Civil {
    pub fn month_name(&self) -> &'static str {
        MONTHS
            .get(self.month.saturating_sub(1) as usize)
            .copied()
            .unwrap_or("Jan")
    }
}

/// Civil date of `epoch_us + offset` (Howard Hinnant's days-to-civil algorithm).
pub fn civil(epoch_us: i64, utc_offset_secs: i32) -> Civil {
    let us = epoch_us.saturating_add(i64::from(utc_offset_secs) * 1_000_000);
    let secs = us.div_euclid(1_000_000);
    let usec = us.rem_euclid(1_000_000) as u32;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    Civil {
        year,
        month,
        day,
        hour: (sod / 3600) as u32,
        min: (sod % 3600 / 60) as u32,
        sec: (sod % 60) as u32,
        usec,
    }
}

/// `dd/Mmm/yyyy:HH:MM:SS.mmm` in local time (`%t`, `%tr`).
pub fn date_log(out: &mut String, epoch_us: i64, utc_offset_secs: i32) {
    let c = civil(epoch_us, utc_offset_secs);
    push_padded(out, c.day.into(), 2);
    out.push('/');
    out.push_str(c.month_name());
    out.push('/');
    // `{:04}`: the sign counts in the width.
    if c.year < 0 {
        out.push('-');
        push_padded(out, c.year.unsigned_abs(), 3);
    } else {
        push_padded(out, c.year.unsigned_abs(), 4);
    }
    for (sep, v) in [(':', c.hour), (':', c.min), (':', c.sec)] {
        out.push(sep);
        push_padded(out, v.into(), 2);
    }
    out.push('.');
    push_padded(out, (c.usec / 1000).into(), 3);
}

/// `dd/Mmm/yyyy:HH:MM:SS +hhmm` (`%T`/`%trg` with offset 0, `%Tl`/`%trl` local).
pub fn date_zone(out: &mut String, epoch_us: i64, utc_offset_secs: i32) {
    let c = civil(epoch_us, utc_offset_secs);
    let sign = if utc_offset_secs < 0 { '-' } else { '+' };
    let off = utc_offset_secs.unsigned_abs();
    let _ = write!(
        out,
        "{:02}/{}/{:04}:{:02}:{:02}:{:02} {sign}{:02}{:02}",
        c.day,
        c.month_name(),
        c.year,
        c.hour,
        c.min,
        c.sec,
        off / 3600,
        off % 3600 / 60
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-11-30T05:15:23Z
    const NOV30: i64 = 1_796_015_723;

    fn ctx() -> SampleCtx<'static> {
        SampleCtx::new(
            "127.0.0.1:41902".parse().unwrap(),
            "127.0.0.1:10443".parse().unwrap(),
            "istio-https-l7",
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn golden_rec(
        port: u16,
        ms: i64,
        server: &'static str,
        phases: (i64, i64, i64, i64, i64),
        status: i32,
        term: Termination,
        conns: (u32, u32, u32, u32),
    ) -> LogRecord<'static> {
        LogRecord {
            client: Some(SocketAddr::from(([127, 0, 0, 1], port))),
            frontend: "istio-https-l7",
            frontend_ssl: true,
            backend: "istio-http-backend",
            server: Some(server),
            http: true,
            accept_date_us: (NOV30 * 1000 + ms) * 1000 + 417,
            timers: Timers::from_phases(0, 0, phases.0, phases.1, phases.2, phases.3, phases.4),
            status,
            bytes_out: if status == 502 { 209 } else { 181 },
            bytes_in: 120,
            term,
            actconn: conns.0,
            feconn: conns.0,
            beconn: conns.1,
            srv_conn: conns.2,
            retries: conns.3,
            request_line: Some("GET /slow?ms=9000 HTTP/1.1"),
            ..LogRecord::default()
        }
    }

    #[test]
    fn golden_httplog_shutdown_sessions() {
        let dh = Termination {
            cause: TermCause::Down,
            state: TermState::Headers,
        };
        let ok = Termination::default();
        let recs = [
            golden_rec(
                41902,
                838,
                "worker1",
                (0, 0, 0, -1, 4019),
                502,
                dh,
                (6, 5, 0, 0),
            ),
            golden_rec(
                41964,
                851,
                "worker1",
                (0, 0, 4, -1, 4006),
                502,
                dh,
                (6, 4, 0, 0),
            ),
            golden_rec(
                41936,
                835,
                "master1",
                (0, 0, 0, 9003, 9003),
                200,
                ok,
                (4, 3, 1, 0),
            ),
            golden_rec(
                41922,
                837,
                "worker2",
                (0, 0, 1, 9010, 9011),
                200,
                ok,
                (3, 2, 1, 0),
            ),
            golden_rec(
                41914,
                838,
                "master1",
                (0, 0, 0, 9009, 9010),
                200,
                ok,
                (3, 1, 0, 0),
            ),
            golden_rec(
                41948,
                847,
                "worker2",
                (0, 0, 0, 9003, 9003),
                200,
                ok,
                (1, 0, 0, 0),
            ),
        ];
        // /work/shared/docs/haproxy-2.6-golden/httplog-shutdown-sessions.txt (HAProxy 2.6.12)
        let expected = [
            "127.0.0.1:41902 [30/Nov/2026:05:15:23.838] istio-https-l7~ istio-http-backend/worker1 0/0/0/-1/4019 502 209 - - DH-- 6/6/5/0/0 0/0 \"GET /slow?ms=9000 HTTP/1.1\"",
            "127.0.0.1:41964 [30/Nov/2026:05:15:23.851] istio-https-l7~ istio-http-backend/worker1 0/0/4/-1/4006 502 209 - - DH-- 6/6/4/0/0 0/0 \"GET /slow?ms=9000 HTTP/1.1\"",
            "127.0.0.1:41936 [30/Nov/2026:05:15:23.835] istio-https-l7~ istio-http-backend/master1 0/0/0/9003/9003 200 181 - - ---- 4/4/3/1/0 0/0 \"GET /slow?ms=9000 HTTP/1.1\"",
            "127.0.0.1:41922 [30/Nov/2026:05:15:23.837] istio-https-l7~ istio-http-backend/worker2 0/0/1/9010/9011 200 181 - - ---- 3/3/2/1/0 0/0 \"GET /slow?ms=9000 HTTP/1.1\"",
            "127.0.0.1:41914 [30/Nov/2026:05:15:23.838] istio-https-l7~ istio-http-backend/master1 0/0/0/9009/9010 200 181 - - ---- 3/3/1/0/0 0/0 \"GET /slow?ms=9000 HTTP/1.1\"",
            "127.0.0.1:41948 [30/Nov/2026:05:15:23.847] istio-https-l7~ istio-http-backend/worker2 0/0/0/9003/9003 200 181 - - ---- 1/1/0/0/0 0/0 \"GET /slow?ms=9000 HTTP/1.1\"",
        ];
        let f = LogFormat::httplog();
        for (rec, want) in recs.iter().zip(expected) {
            assert_eq!(f.render_to_string(rec, &ctx()), want);
        }
    }

    fn sample_rec() -> LogRecord<'static> {
        LogRecord {
            client: Some("10.0.1.2:33317".parse().unwrap()),
            frontend_addr: Some("10.0.0.1:80".parse().unwrap()),
            backend_src: Some("10.0.0.1:46260".parse().unwrap()),
            server_addr: Some("10.0.0.9:8080".parse().unwrap()),
            frontend: "http-in",
            backend: "static",
            server: Some("srv1"),
            http: true,
            // 2009-02-06T12:14:14.655Z
            accept_date_us: 1_233_922_454_655_000,
            timers: Timers::from_phases(0, 0, 10, 0, 30, 69, 109),
            status: 200,
            bytes_out: 2750,
            bytes_in: 83,
            actconn: 1,
            feconn: 1,
            beconn: 1,
            srv_conn: 1,
            req_captures: None,
            request_line: Some("GET /index.html HTTP/1.1"),
            hostname: "vm",
            pid: 6355,
            ..LogRecord::default()
        }
    }

    #[test]
    fn httplog_doc_example_and_captures() {
        let f = LogFormat::httplog();
        let mut rec = sample_rec();
        assert_eq!(
            f.render_to_string(&rec, &ctx()),
            "10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 \"GET /index.html HTTP/1.1\""
        );
        let req = [Some("1wt.eu".to_string())];
        let res: [Option<String>; 2] = [None, Some("a|b\"".to_string())];
        rec.req_captures = Some(&req);
        rec.res_captures = Some(&res);
        assert_eq!(
            f.render_to_string(&rec, &ctx()),
            "10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 10/0/30/69/109 200 2750 - - ---- 1/1/1/1/0 0/0 {1wt.eu} {|a#7Cb#22} \"GET /index.html HTTP/1.1\""
        );
    }

    #[test]
    fn httplog_badreq_nosrv_redispatch_logasap() {
        let f = LogFormat::httplog();
        let rec = LogRecord {
            client: Some("127.0.0.1:53900".parse().unwrap()),
            frontend: "fh",
            backend: "fh",
            server: None,
            http: true,
            accept_date_us: 1_796_020_255_013_000,
            timers: Timers {
                t_close: 0,
                ..Timers::default()
            },
            status: 400,
            term: Termination {
                cause: TermCause::Proxy,
                state: TermState::Request,
            },
            actconn: 1,
            feconn: 1,
            ..LogRecord::default()
        };
        assert_eq!(
            f.render_to_string(&rec, &ctx()),
            "127.0.0.1:53900 [30/Nov/2026:06:30:55.013] fh fh/<NOSRV> -1/-1/-1/-1/0 400 0 - - PR-- 1/1/0/0/0 0/0 \"<BADREQ>\""
        );
        let mut rec = sample_rec();
        rec.redispatched = true;
        rec.retries = 2;
        rec.logasap = true;
        rec.cookie = Some(CookieState {
            client: 'N',
            server: 'I',
        });
        rec.request_line = Some("GET /a\"#b\x01 HTTP/1.1");
        assert_eq!(
            f.render_to_string(&rec, &ctx()),
            "10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 10/0/30/69/+109 200 +2750 - - --NI 1/1/1/1/+2 0/0 \"GET /a#22#23b#01 HTTP/1.1\""
        );
    }

    #[test]
    fn tcplog_exact() {
        let f = LogFormat::tcplog();
        let rec = LogRecord {
            client: Some("10.0.1.2:33313".parse().unwrap()),
            frontend: "fnt",
            backend: "bck",
            server: Some("srv1"),
            // 2009-02-06T12:12:51.443Z
            accept_date_us: 1_233_922_371_443_000,
            timers: Timers {
                t_handshake: 0,
                t_idle: -1,
                t_request: 0,
                t_queue: 0,
                t_connect: 0,
                t_data: 5,
                t_close: 5007,
            },
            bytes_out: 212,
            retries: 3,
            ..LogRecord::default()
        };
        assert_eq!(
            f.render_to_string(&rec, &ctx()),
            "10.0.1.2:33313 [06/Feb/2009:12:12:51.443] fnt bck/srv1 0/0/5007 212 -- 0/0/0/0/3 0/0"
        );
        // SSL frontend and a timezone east of UTC
        let rec2 = LogRecord {
            frontend_ssl: true,
            utc_offset_secs: 3600,
            term: Termination {
                cause: TermCause::Down,
                state: TermState::Data,
            },
            ..rec
        };
        assert_eq!(
            f.render_to_string(&rec2, &ctx()),
            "10.0.1.2:33313 [06/Feb/2009:13:12:51.443] fnt~ bck/srv1 0/0/5007 212 DD 0/0/0/0/3 0/0"
        );
    }

    #[test]
    fn httplog_clf_exact() {
        // Real HAProxy 2.6 output for the same request (note the single trailing space).
        let f = LogFormat::httplog_clf();
        let rec = LogRecord {
            client: Some("127.0.0.1:47042".parse().unwrap()),
            frontend: "fclf",
            backend: "b",
            server: Some("s1"),
            http: true,
            accept_date_us: 1_796_020_251_962_000,
            timers: Timers::from_phases(0, 0, 0, 0, 0, 1, 1),
            status: 200,
            bytes_out: 185,
            actconn: 1,
            feconn: 1,
            request_line: Some("GET /index.html HTTP/1.1"),
            ..LogRecord::default()
        };
        assert_eq!(
            f.render_to_string(&rec, &ctx()),
            "127.0.0.1 - - [30/Nov/2026:06:30:51 +0000] \"GET /index.html HTTP/1.1\" 200 185 \"\" \"\" 47042 962 \"fclf\" \"b\" \"s1\" 0 0 0 1 1 ---- 1 1 0 0 0 0 0 \"\" \"\" "
        );
    }

    #[test]
    fn custom_format_matches_haproxy() {
        // Same format and values as a real HAProxy 2.6 run (see module tests' comments).
        let fmt = "ci=%ci cp=%cp t=%t tr=%tr trg=%trg trl=%trl ft=%ft f=%f b=%b s=%s TR=%TR Tw=%Tw Tc=%Tc Tr=%Tr Ta=%Ta Tt=%Tt Th=%Th Ti=%Ti Tq=%Tq ST=%ST B=%B U=%U CC=%CC CS=%CS tsc=%tsc ts=%ts ac=%ac fc=%fc bc=%bc sc=%sc rc=%rc sq=%sq bq=%bq hr=%hr hs=%hs r=%r HM=%HM HU=%HU HP=%HP HV=%HV ID=%ID pid=%pid H=%H fi=%fi fp=%fp bi=%bi bp=%bp si=%si sp=%sp Q=%{+Q}r %{+Q}[fe_name] %[src] %{+Q}HM %{+Q}ci %{+Q}B %{+Q}ST [%{+Q}[srv_name]] [%[ssl_fc_sni]] [%{+Q}[ssl_fc_sni]] %%";
        let f = LogFormat::parse(fmt, true).unwrap();
        let rec = LogRecord {
            client: Some("127.0.0.1:51690".parse().unwrap()),
            frontend_addr: Some("127.0.0.1:18084".parse().unwrap()),
            backend_src: Some("127.0.0.1:46260".parse().unwrap()),
            server_addr: Some("127.0.0.1:18099".parse().unwrap()),
            frontend: "fc",
            backend: "b",
            server: Some("s1"),
            http: true,
            accept_date_us: 1_796_020_251_984_000,
            timers: Timers {
                t_handshake: 0,
                t_idle: 0,
                t_request: 0,
                t_queue: 0,
                t_connect: 0,
                t_data: 1,
                t_close: 1,
            },
            status: 404,
            bytes_out: 500,
            bytes_in: 83,
            actconn: 1,
            feconn: 1,
            request_line: Some("GET /a%20b?q HTTP/1.1"),
            hostname: "vm",
            pid: 6355,
            ..LogRecord::default()
        };
        let mut c = SampleCtx::new(
            "127.0.0.1:51690".parse().unwrap(),
            "127.0.0.1:18084".parse().unwrap(),
            "fc",
        );
        c.backend = Some("b");
        c.server = Some("s1");
        assert_eq!(
            f.render_to_string(&rec, &c),
            "ci=127.0.0.1 cp=51690 t=30/Nov/2026:06:30:51.984 tr=30/Nov/2026:06:30:51.984 trg=30/Nov/2026:06:30:51 +0000 trl=30/Nov/2026:06:30:51 +0000 ft=fc f=fc b=b s=s1 TR=0 Tw=0 Tc=0 Tr=1 Ta=1 Tt=1 Th=0 Ti=0 Tq=0 ST=404 B=500 U=83 CC=- CS=- tsc=---- ts=-- ac=1 fc=1 bc=0 sc=0 rc=0 sq=0 bq=0 hr= hs= r=GET /a%20b?q HTTP/1.1 HM=GET HU=/a%20b?q HP=/a%20b HV=HTTP/1.1 ID=- pid=6355 H=vm fi=127.0.0.1 fp=18084 bi=127.0.0.1 bp=46260 si=127.0.0.1 sp=18099 Q=\"GET /a%20b?q HTTP/1.1\" \"fc\" 127.0.0.1 \"GET\" \"127.0.0.1\" 500 404 [\"s1\"] [-] [\"\"] %"
        );
    }

    #[test]
    fn options_and_separators() {
        let c = ctx();
        let rec = sample_rec();
        let r = |fmt: &str| {
            LogFormat::parse(fmt, true)
                .unwrap()
                .render_to_string(&rec, &c)
        };
        assert_eq!(r("%{+X}ci:%{+X}cp"), "0A000102:8225");
        assert_eq!(r("  a   b  "), "a b ");
        assert_eq!(r("%hr %hs x"), "x");
        assert_eq!(r("%{-M}ID|%ID|%{+Q}ID"), "|-|\"\"");
        assert_eq!(r("%{+Q}o %b %{-Q}s"), "\"static\" srv1");
        assert_eq!(r("%HQ|%HPO|%Tl"), "|/index.html|06/Feb/2009:12:14:14 +0000");
        assert_eq!(r("%ms %Ts %{+X}Ts"), "655 1233922454 498C2996");
        assert_eq!(r("100%% %-x"), "100% -x");
        assert_eq!(r("%{+E}[fe_name]"), "istio-https-l7");
        let tcp = LogFormat::tcplog().render_to_string(&rec, &c);
        assert!(tcp.starts_with(
            "10.0.1.2:33317 [06/Feb/2009:12:14:14.655] http-in static/srv1 0/30/109 2750 -- "
        ));
    }

    #[test]
    fn parse_errors_in_haproxy_words() {
        let e = |f: &str| LogFormat::parse(f, true).unwrap_err();
        assert_eq!(
            e("%zz"),
            "no such format variable 'zz'. If you wanted to emit the '%' character verbatim, you need to use '%%'"
        );
        assert_eq!(e("%{+Q"), "truncated line after '+Q'");
        assert_eq!(e("%"), "truncated line after '%'");
        assert_eq!(
            e("%{+Q}"),
            "parse argument modifier without variable name near '%{+Q}'"
        );
        assert_eq!(
            e("%[foo]"),
            "failed to parse sample expression <foo]> : unknown fetch method 'foo'"
        );
        assert_eq!(
            e("%["),
            "failed to parse sample expression <> : missing fetch method"
        );
        assert_eq!(
            e("%[src,foo]"),
            "failed to parse sample expression <src,foo]> : unknown converter 'foo'"
        );
        assert_eq!(
            e("%[path]"),
            "sample fetch <path]> may not be reliably used here because it needs 'HTTP request headers' which is not available here"
        );
        assert_eq!(e("%ci%[src"), "missing ']' after 'src'");
        assert_eq!(e("%[src x"), "expected ']' after 'src', but found ' '");
        assert_eq!(
            e("a %1"),
            "unexpected variable name near '1' at position 3 line : 'a %1'. Maybe you want to write a single '%', use the syntax '%%'"
        );
        assert_eq!(
            LogFormat::parse("%r", false).unwrap_err(),
            "format variable 'r' is reserved for HTTP mode"
        );
        assert!(LogFormat::parse(TCPLOG_FORMAT, false).is_ok());
        assert!(LogFormat::parse(HTTPLOG_FORMAT, true).is_ok());
        assert!(LogFormat::parse(HTTPLOG_CLF_FORMAT, true).is_ok());
    }

    #[test]
    fn termination_display_and_dontlognull() {
        let t = Termination {
            cause: TermCause::ClientTimeout,
            state: TermState::Request,
        };
        assert_eq!(t.to_string(), "cR");
        assert_eq!(Termination::default().to_string(), "--");
        let mut rec = sample_rec();
        assert!(rec.should_log(true, false));
        assert!(!rec.should_log(false, true));
        rec.bytes_in = 0;
        assert!(rec.is_null());
        assert!(!rec.should_log(true, false));
        rec.status = 503;
        assert!(rec.is_error());
        assert!(rec.should_log(false, true));
    }

    #[test]
    fn encode_escapes_each_byte_and_copies_runs() {
        let mut s = String::new();
        encode(&mut s, "a\"é#{x}\u{7f}", true);
        assert_eq!(s, "a#22#C3#A9#23#7Bx#7D#7F");
        s.clear();
        encode(&mut s, "é", false);
        encode(&mut s, "plain {x}", false);
        assert_eq!(s, "#C3#A9plain {x}");
    }

    #[test]
    fn digits_as_the_formatter_writes_them() {
        for v in [0u64, 7, 42, 999, 1000, 65_535, u64::MAX] {
            let (mut a, mut b) = (String::new(), String::new());
            push_uint(&mut a, v);
            push_padded(&mut b, v, 3);
            assert_eq!((a, b), (format!("{v}"), format!("{v:03}")));
        }
        let mut s = String::new();
        for v in [-1i64, 0, i64::MIN] {
            ltoa(&mut s, v);
            s.push(' ');
        }
        ltoa(&mut s, u32::MAX);
        assert_eq!(s, format!("-1 0 {} {}", i64::MIN, u32::MAX));
        // As the `{:02}/{}/{:04}:…` format wrote it, years before 1000 and before 0 included.
        for us in [
            NOV30 * 1_000_000 + 7_000,
            0,
            -30_000_000_000_000_000,
            -70_000_000_000_000_000,
        ] {
            let c = civil(us, 3600);
            let want = format!(
                "{:02}/{}/{:04}:{:02}:{:02}:{:02}.{:03}",
                c.day,
                c.month_name(),
                c.year,
                c.hour,
                c.min,
                c.sec,
                c.usec / 1000
            );
            let mut s = String::new();
            date_log(&mut s, us, 3600);
            assert_eq!(s, want);
        }
        let mut s = String::new();
        date_log(&mut s, NOV30 * 1_000_000 + 7_000, 0);
        assert_eq!(s, "30/Nov/2026:05:15:23.007");
    }

    #[test]
    fn civil_dates() {
        let c = civil(0, 0);
        assert_eq!((c.year, c.month, c.day, c.hour), (1970, 1, 1, 0));
        let c = civil(951_782_400_000_000, 0); // 2000-02-29
        assert_eq!((c.year, c.month, c.day), (2000, 2, 29));
        let mut s = String::new();
        date_zone(&mut s, 0, -(5 * 3600 + 30 * 60));
        assert_eq!(s, "31/Dec/1969:18:30:00 -0530");
    }
}
