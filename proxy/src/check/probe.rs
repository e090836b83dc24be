//! Runs one health check against a socket and reports a `CheckOutcome` (HAProxy 2.6's statuses
//! and `last_chk` texts). Plain tokio (`net`, `time`): meant for the control thread's
//! current-thread runtime, not the tokio-uring workers.
//!
//! Timeouts (configuration.txt `timeout check`): without `timeout check` the whole check must
//! finish within `inter`; with it, connecting gets min(`timeout connect`, `inter`) and the rest
//! gets `timeout check` from the moment the connection is established.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A probe's connection: plain TCP, or TLS for `check-ssl`.
trait Io: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Io for T {}
type ProbeIo = Box<dyn Io>;

/// An HTTP check's connection: HTTP/1 bytes, or h2 streams (`check-proto h2`, ALPN `h2`).
enum Link {
    H1(ProbeIo),
    H2(super::h2::Link),
}
use tokio::time::Instant;

use super::fsm::{CheckOutcome, Status};
use super::sample;
use crate::config::model::{
    CheckConnect, ExpectMatch, HdrPattern, HttpCheck, HttpCheckRule, HttpCheckSend, Proxy, Server,
    StrMatch, TcpCheckRule,
};

/// HAProxy reads a check's reply into one buffer (`tune.bufsize`).
const BUFSIZE: usize = 16384;

#[derive(Clone, Debug)]
enum Matcher {
    Status(Vec<(u16, u16)>),
    Rstatus(regex::Regex),
    String(String),
    Rstring(regex::bytes::Regex),
    /// `hdr` / `fhdr` (`full`).
    Header {
        full: bool,
        name: HdrMatcher,
        value: Option<HdrMatcher>,
    },
}

/// A header name or value pattern, compiled.
#[derive(Clone, Debug)]
enum HdrMatcher {
    Fixed(StrMatch, String),
    Lf(StrMatch, sample::Lf),
    Re(regex::Regex),
}

impl HdrMatcher {
    /// Names compare without case (a regex too: HAProxy compiles it case-insensitive); values
    /// with case.
    fn compile(p: &HdrPattern, name: bool) -> Result<HdrMatcher, String> {
        let bad = |e: &dyn std::fmt::Display| {
            format!(
                "'http-check expect' : regex '{}' is invalid ({e}).",
                p.pattern
            )
        };
        Ok(match (p.how, p.lf) {
            (StrMatch::Reg, _) => HdrMatcher::Re(
                regex::RegexBuilder::new(&p.pattern)
                    .case_insensitive(name)
                    .build()
                    .map_err(|e| bad(&e))?,
            ),
            (how, true) => HdrMatcher::Lf(
                how,
                sample::parse_lf(&p.pattern).map_err(|e| format!("'http-check expect' : {e}"))?,
            ),
            (how, false) => HdrMatcher::Fixed(how, p.pattern.clone()),
        })
    }

    /// `Err` when a log-format pattern expands to nothing (HAProxy: L7RSP).
    fn matches(&self, s: &str, ctx: &sample::Ctx, name: bool) -> Result<bool, ()> {
        let (how, pat) = match self {
            HdrMatcher::Re(re) => return Ok(re.is_match(s)),
            HdrMatcher::Fixed(how, p) => (*how, std::borrow::Cow::Borrowed(p.as_str())),
            HdrMatcher::Lf(how, lf) => {
                let v = lf.eval(ctx);
                if v.is_empty() {
                    return Err(());
                }
                (*how, std::borrow::Cow::Owned(v))
            }
        };
        let (s, pat) = if name {
            (s.to_ascii_lowercase(), pat.to_ascii_lowercase())
        } else {
            (s.to_string(), pat.into_owned())
        };
        Ok(match how {
            StrMatch::Str | StrMatch::Reg => s == pat,
            StrMatch::Beg => s.starts_with(&pat),
            StrMatch::End => s.ends_with(&pat),
            StrMatch::Sub => s.contains(&pat),
        })
    }
}

/// One `expect` rule, compiled.
#[derive(Clone, Debug)]
pub struct Expect {
    negate: bool,
    matcher: Matcher,
    /// tcp-check `min-recv`.
    min_recv: Option<usize>,
}

impl Expect {
    fn compile(negate: bool, m: &ExpectMatch, kw: &str) -> Result<Expect, String> {
        let bad = |re: &str, e: &dyn std::fmt::Display| {
            format!("'{kw} expect' : regex '{re}' is invalid ({e}).")
        };
        let matcher = match m {
            ExpectMatch::Status(l) => Matcher::Status(l.clone()),
            ExpectMatch::Rstatus(re) => {
                Matcher::Rstatus(regex::Regex::new(re).map_err(|e| bad(re, &e))?)
            }
            ExpectMatch::String(s) => Matcher::String(s.clone()),
            ExpectMatch::Rstring(re) => {
                Matcher::Rstring(regex::bytes::Regex::new(re).map_err(|e| bad(re, &e))?)
            }
            ExpectMatch::Header { full, name, value } => Matcher::Header {
                full: *full,
                name: HdrMatcher::compile(name, true)?,
                value: value
                    .as_ref()
                    .map(|v| HdrMatcher::compile(v, false))
                    .transpose()?,
            },
        };
        Ok(Expect {
            negate,
            matcher,
            min_recv: None,
        })
    }
    fn is_body(&self) -> bool {
        matches!(self.matcher, Matcher::String(_) | Matcher::Rstring(_))
    }
}

/// `option httpchk` + the `http-check` rules, as the sequence HAProxy runs: each `connect`
/// opens a new connection, each `send` sends one request on it, the `expect`s after it judge
/// its response, `set-var`/`unset-var` update the check's variables.
#[derive(Clone, Debug)]
pub struct HttpProbe {
    steps: Vec<HttpStep>,
    pub disable_on_404: bool,
    /// `http-check send-state`: the caller passes the `X-Haproxy-Server-State` value to `run`.
    pub send_state: bool,
    backend: String,
    server: String,
}

#[derive(Clone, Debug)]
enum Text {
    Plain(String),
    Lf(sample::Lf),
}

impl Text {
    fn new(s: &str, lf: bool) -> Result<Text, String> {
        Ok(if lf {
            Text::Lf(sample::parse_lf(s).map_err(|e| format!("'http-check send' : {e}"))?)
        } else {
            Text::Plain(s.to_string())
        })
    }
    fn eval(&self, ctx: &sample::Ctx) -> String {
        match self {
            Text::Plain(s) => s.clone(),
            Text::Lf(lf) => lf.eval(ctx),
        }
    }
}

#[derive(Clone, Debug)]
struct SendStep {
    method: String,
    uri: Text,
    version: String,
    /// Values are log-format strings; a header whose value expands to nothing is not sent.
    headers: Vec<(String, sample::Lf)>,
    body: Option<Text>,
}

impl SendStep {
    fn compile(s: &HttpCheckSend) -> Result<SendStep, String> {
        let mut headers = Vec::with_capacity(s.headers.len());
        for (n, v) in &s.headers {
            headers.push((
                n.clone(),
                sample::parse_lf(v).map_err(|e| format!("'http-check send' : {e}"))?,
            ));
        }
        Ok(SendStep {
            method: s.method.clone(),
            uri: Text::new(&s.uri, s.uri_lf)?,
            version: s.version.clone(),
            headers,
            body: s
                .body
                .as_deref()
                .map(|b| Text::new(b, s.body_lf))
                .transpose()?,
        })
    }

    fn bytes(&self, ctx: &sample::Ctx, state: Option<&str>) -> Vec<u8> {
        let (uri, headers, body) = self.parts(ctx, state);
        build_http_request(&self.method, &uri, &self.version, &headers, body.as_deref())
    }

    /// The request's target, headers and body once its log-format parts are evaluated.
    fn parts(
        &self,
        ctx: &sample::Ctx,
        state: Option<&str>,
    ) -> (String, Vec<(String, String)>, Option<String>) {
        let mut uri = self.uri.eval(ctx);
        if uri.is_empty() {
            uri.push('/');
        }
        let mut headers: Vec<(String, String)> = self
            .headers
            .iter()
            .map(|(n, v)| (n.clone(), v.eval(ctx)))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        if let Some(st) = state {
            headers.push(("X-Haproxy-Server-State".to_string(), st.to_string()));
        }
        let body = self
            .body
            .as_ref()
            .map(|b| b.eval(ctx))
            .filter(|b| !b.is_empty());
        (uri, headers, body)
    }
}

#[derive(Clone, Debug)]
enum HttpStep {
    Connect(CheckConnect),
    Send(SendStep),
    Expect(Expect),
    SetVar { name: String, value: VarValue },
    UnsetVar(String),
}

#[derive(Clone, Debug)]
enum VarValue {
    Expr(sample::Expr),
    Fmt(sample::Lf),
}

impl HttpProbe {
    /// HAProxy's check_tcpcheck_ruleset for an HTTP ruleset: `option httpchk`'s request is the
    /// first send (merged into the first `http-check send`, or placed after a leading connect,
    /// else first); a ruleset ending with a send gets `expect status 200-399`; one not starting
    /// with a connect gets the default connect first.
    fn compile(hc: &HttpCheck, backend: &str, server: &str) -> Result<HttpProbe, String> {
        let mut steps = Vec::with_capacity(hc.rules.len() + 3);
        let mut first_send = true;
        for r in &hc.rules {
            steps.push(match r {
                HttpCheckRule::Connect(c) => HttpStep::Connect(c.clone()),
                HttpCheckRule::Send(rule) => {
                    let send = if std::mem::take(&mut first_send) {
                        hc.send.clone()
                    } else {
                        let mut s = HttpCheckSend::default();
                        s.overlay(rule);
                        s
                    };
                    HttpStep::Send(SendStep::compile(&send)?)
                }
                HttpCheckRule::Expect(x) => {
                    HttpStep::Expect(Expect::compile(x.negate, &x.matcher, "http-check")?)
                }
                HttpCheckRule::SetVar { name, expr, fmt } => HttpStep::SetVar {
                    name: name.clone(),
                    value: if *fmt {
                        VarValue::Fmt(sample::parse_lf(expr)?)
                    } else {
                        VarValue::Expr(sample::parse_expr(expr)?)
                    },
                },
                HttpCheckRule::UnsetVar(n) => HttpStep::UnsetVar(n.clone()),
            });
        }
        let main = |steps: &[HttpStep]| {
            steps
                .iter()
                .position(|s| !matches!(s, HttpStep::SetVar { .. } | HttpStep::UnsetVar(_)))
        };
        if first_send {
            let send = HttpStep::Send(SendStep::compile(&hc.send)?);
            match main(&steps) {
                Some(i) if matches!(steps[i], HttpStep::Connect(_)) => steps.insert(i + 1, send),
                _ => steps.insert(0, send),
            }
        }
        if matches!(
            steps
                .iter()
                .rev()
                .find(|s| !matches!(s, HttpStep::SetVar { .. } | HttpStep::UnsetVar(_))),
            Some(HttpStep::Send(_))
        ) {
            steps.push(HttpStep::Expect(Expect {
                negate: false,
                matcher: Matcher::Status(vec![(200, 399)]),
                min_recv: None,
            }));
        }
        if !matches!(main(&steps).map(|i| &steps[i]), Some(HttpStep::Connect(_))) {
            steps.insert(
                0,
                HttpStep::Connect(CheckConnect {
                    default: true,
                    ..CheckConnect::default()
                }),
            );
        }
        Ok(HttpProbe {
            steps,
            disable_on_404: hc.disable_on_404,
            send_state: hc.send_state,
            backend: backend.to_string(),
            server: server.to_string(),
        })
    }

    /// Whether the expect at step `i`, or one after it before the next send or connect, needs
    /// the body (read whole then, not only the head and what came with it).
    fn needs_body(&self, i: usize) -> bool {
        self.steps
            .iter()
            .skip(i)
            .take_while(|s| !matches!(s, HttpStep::Send(_) | HttpStep::Connect(_)))
            .any(|s| matches!(s, HttpStep::Expect(x) if x.is_body()))
    }
}

#[derive(Clone, Debug)]
pub enum TcpStep {
    Connect { port: Option<u16> },
    Send(Vec<u8>),
    Expect(Expect),
}

#[derive(Clone, Debug)]
pub enum CheckKind {
    /// A connect only (`check` alone): L4OK.
    Connect,
    /// `option tcp-check` without rules: a connect too, but its failures name the tcp-check
    /// step as HAProxy 2.6 does (`Connection refused at initial connection step of tcp-check`).
    TcpConnect,
    Http(HttpProbe),
    Tcp(Vec<TcpStep>),
}

/// Everything a check of one server needs, built once from the configuration.
#[derive(Clone, Debug)]
pub struct CheckSpec {
    pub kind: CheckKind,
    /// Server `addr` / `port` overrides.
    pub check_addr: Option<IpAddr>,
    pub check_port: Option<u16>,
    pub inter: Duration,
    pub timeout_connect: Option<Duration>,
    pub timeout_check: Option<Duration>,
    /// A PROXY protocol header first (`Some(true)`: v2), as HAProxy 2.6 sends on checks of a
    /// `send-proxy*` server without `port`/`addr`, or with `check-send-proxy`: v1 with the check
    /// connection's own addresses, v2 as a `LOCAL` command.
    pub send_proxy: Option<bool>,
    /// `check-proto h2`: HTTP checks speak h2 (h2c with prior knowledge on plain connections).
    pub h2: bool,
    /// `check-alpn`: offered in the TLS handshake of `check-ssl`; `h2` chosen means h2 checks.
    pub alpn: Option<Vec<Vec<u8>>>,
}

/// The deprecated `option httpchk GET / HTTP/1.1\r\nHost:\ x` form smuggles headers in the
/// version: the version itself, and those headers before the others.
fn split_version<'v>(
    version: &'v str,
    headers: &[(String, String)],
) -> (&'v str, Vec<(String, String)>) {
    let mut parts = version.split("\r\n");
    let version = parts.next().unwrap_or("HTTP/1.0");
    let mut all: Vec<(String, String)> = parts
        .filter_map(|l| {
            let (n, v) = l.split_once(':')?;
            Some((n.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    all.extend(headers.iter().cloned());
    (version, all)
}

/// The request `option httpchk` + `http-check send` produce: names lowercased (HAProxy's H1
/// output), `content-length` with a body, `connection: close` for HTTP/1.1 unless set.
pub fn build_http_request(
    method: &str,
    uri: &str,
    version: &str,
    headers: &[(String, String)],
    body: Option<&str>,
) -> Vec<u8> {
    let (version, all) = split_version(version, headers);
    let mut r = format!("{method} {uri} {version}\r\n");
    for (n, v) in &all {
        r.push_str(&format!("{}: {v}\r\n", n.to_ascii_lowercase()));
    }
    if let Some(b) = body {
        r.push_str(&format!("content-length: {}\r\n", b.len()));
    }
    if version.eq_ignore_ascii_case("HTTP/1.1")
        && !all
            .iter()
            .any(|(n, _)| n.eq_ignore_ascii_case("connection"))
    {
        r.push_str("connection: close\r\n");
    }
    r.push_str("\r\n");
    if let Some(b) = body {
        r.push_str(b);
    }
    r.into_bytes()
}

impl CheckSpec {
    /// `None` when the server has no `check`. `option httpchk` wins over `option tcp-check`
    /// when both are set. Errors (in HAProxy's words) for regexes that do not compile.
    pub fn from_config(proxy: &Proxy, server: &Server) -> Result<Option<CheckSpec>, String> {
        let o = &server.opts;
        if !o.check {
            return Ok(None);
        }
        let kind = if let Some(hc) = &proxy.options.httpchk {
            CheckKind::Http(HttpProbe::compile(hc, &proxy.name, &server.name)?)
        } else if proxy.options.tcp_check && !proxy.tcp_checks.is_empty() {
            let mut steps = Vec::with_capacity(proxy.tcp_checks.len());
            for r in &proxy.tcp_checks {
                steps.push(match r {
                    TcpCheckRule::Connect { port } => TcpStep::Connect { port: *port },
                    TcpCheckRule::Send(b) => TcpStep::Send(b.clone()),
                    TcpCheckRule::Expect {
                        negate,
                        matcher,
                        min_recv,
                    } => TcpStep::Expect(Expect {
                        min_recv: *min_recv,
                        ..Expect::compile(*negate, matcher, "tcp-check")?
                    }),
                });
            }
            CheckKind::Tcp(steps)
        } else if proxy.options.tcp_check {
            CheckKind::TcpConnect
        } else {
            CheckKind::Connect
        };
        Ok(Some(CheckSpec {
            kind,
            check_addr: o.check_addr,
            check_port: o.check_port,
            inter: o.inter,
            timeout_connect: proxy.timeouts.connect,
            timeout_check: proxy.timeouts.check,
            send_proxy: ((o.send_proxy.enabled()
                && o.check_port.is_none()
                && o.check_addr.is_none())
                || o.check_send_proxy)
                .then_some(o.send_proxy.v2),
            // Without `check-proto`/`check-alpn`, checks speak the server's `proto`/`alpn`.
            h2: o.check_proto.as_deref().or(o.proto.as_deref()) == Some("h2"),
            alpn: o
                .check_alpn
                .as_ref()
                .or(o.alpn.as_ref().filter(|_| o.ssl))
                .map(|l| l.iter().map(|p| p.as_bytes().to_vec()).collect()),
        }))
    }

    /// Whether `run` needs the server's state (`http-check send-state`).
    pub fn wants_state(&self) -> bool {
        matches!(&self.kind, CheckKind::Http(h) if h.send_state)
    }

    /// Where to connect, given the server's current address (`set server … addr` may move it).
    pub fn target(&self, server_addr: SocketAddr) -> SocketAddr {
        SocketAddr::new(
            self.check_addr.unwrap_or(server_addr.ip()),
            self.check_port.unwrap_or(server_addr.port()),
        )
    }

    fn connect_budget(&self) -> Duration {
        match (self.timeout_check, self.timeout_connect) {
            (Some(_), Some(c)) => c.min(self.inter),
            _ => self.inter,
        }
    }
}

/// Runs one check. `server_stopped`: the server is DOWN (`CheckState::is_stopped`), where a 404
/// with `disable-on-404` is a plain failure rather than NOLB.
/// `tls`: the server's TLS settings when its checks go over TLS (`check-ssl`).
/// `state`: the `X-Haproxy-Server-State` value for `http-check send-state`.
pub async fn run(
    spec: &CheckSpec,
    target: SocketAddr,
    server_stopped: bool,
    tls: Option<&crate::tls::client::ServerTls>,
    state: Option<&str>,
    unix: Option<&crate::config::addr::UnixAddr>,
) -> CheckOutcome {
    let mut p = Run {
        spec,
        start: Instant::now(),
        deadline: Instant::now(),
        tls: tls
            .filter(|t| t.checks)
            .map(|t| std::sync::Arc::clone(&t.config)),
        server_tls: tls.map(|t| std::sync::Arc::clone(&t.config)),
        state,
        unix,
    };
    let (status, code, info) = match &spec.kind {
        CheckKind::Connect => match p.connect(target).await.map(|(s, _)| s) {
            // A completed handshake is a Layer6 success.
            Ok(_) if p.tls.is_some() => (Status::L6Ok, None, String::new()),
            Ok(_) => (Status::L4Ok, None, String::new()),
            Err(e) => (e.status, None, e.text),
        },
        CheckKind::TcpConnect => match p.connect(target).await.map(|(s, _)| s) {
            Ok(_) => (Status::L4Ok, None, String::new()),
            Err(e) => (
                e.status,
                None,
                format!("{} at initial connection step of tcp-check", e.text),
            ),
        },
        CheckKind::Http(h) => p.http(h, target, server_stopped).await,
        CheckKind::Tcp(steps) => p.tcp(steps, target).await,
    };
    CheckOutcome::new(status, code, info, p.start.elapsed())
}

struct Fail {
    status: Status,
    /// strerror text, empty for a timeout.
    text: String,
}

/// `Connection refused`, without Rust's ` (os error 111)`.
fn err_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.find(" (os error ") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

struct Run<'a> {
    spec: &'a CheckSpec,
    start: Instant,
    /// Deadline of the current phase.
    deadline: Instant,
    /// TLS of the implicit (and `default`) connect: the server's settings with `check-ssl`.
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    /// The server's TLS settings, for `http-check connect ssl`.
    server_tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    state: Option<&'a str>,
    /// The server's unix socket, for a unix-socket server.
    unix: Option<&'a crate::config::addr::UnixAddr>,
}

type Verdict = (Status, Option<u16>, String);

impl Run<'_> {
    /// The connection, and whether TLS chose `h2` by ALPN.
    async fn connect(&mut self, addr: SocketAddr) -> Result<(ProbeIo, bool), Fail> {
        let s = self.connect_tcp(addr).await?;
        let Some(mut cfg) = self.tls.clone() else {
            return Ok((s, false));
        };
        if let Some(alpn) = &self.spec.alpn {
            let mut c = (*cfg).clone();
            c.alpn_protocols = alpn.clone();
            cfg = std::sync::Arc::new(c);
        }
        let name = crate::tls::client::server_name(None, addr.ip());
        let hs = tokio_rustls::TlsConnector::from(cfg).connect(name, s);
        match tokio::time::timeout_at(self.deadline, hs).await {
            Ok(Ok(t)) => {
                let h2 = t.get_ref().1.alpn_protocol() == Some(b"h2");
                Ok((Box::new(t), h2))
            }
            Ok(Err(e)) => Err(Fail {
                status: Status::L6Rsp,
                text: format!("SSL handshake failure ({})", err_text(&e)),
            }),
            Err(_) => Err(Fail {
                status: Status::L6Tout,
                text: String::new(),
            }),
        }
    }

    /// A unix-socket server's own socket (the placeholder address, no `addr` override), or
    /// TCP to `addr`; the PROXY header first with `check-send-proxy`.
    async fn connect_tcp(&mut self, addr: SocketAddr) -> Result<ProbeIo, Fail> {
        let now = Instant::now();
        self.deadline = if self.spec.timeout_check.is_some() {
            now + self.spec.connect_budget()
        } else {
            self.start + self.spec.inter
        };
        let opened = match self.unix.filter(|_| addr.ip().is_unspecified()) {
            Some(u) => {
                let c = async {
                    let s = crate::engine::io::unix_socket(u)?;
                    tokio::net::UnixStream::from_std(s)
                };
                tokio::time::timeout_at(self.deadline, c)
                    .await
                    .map(|r| r.map(|s| (Box::new(s) as ProbeIo, None)))
            }
            None => tokio::time::timeout_at(self.deadline, TcpStream::connect(addr))
                .await
                .map(|r| {
                    r.map(|s| {
                        // Checks close with a reset, as HAProxy's do (no TIME_WAIT pile-up); a
                        // zero linger never blocks the close.
                        let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                        let _ = s.set_nodelay(true);
                        let addrs = s.local_addr().ok().zip(s.peer_addr().ok());
                        (Box::new(s) as ProbeIo, addrs)
                    })
                }),
        };
        match opened {
            Ok(Ok((s, addrs))) => {
                if let Some(v2) = self.spec.send_proxy {
                    let mut h = Vec::new();
                    match v2 {
                        true => crate::proxy_proto::encode_v2(None, &Default::default(), &mut h),
                        false => crate::proxy_proto::encode_v1(addrs, &mut h),
                    }
                    let mut s = s;
                    match tokio::time::timeout_at(self.deadline, s.write_all(&h)).await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            return Err(Fail {
                                status: Status::L4Con,
                                text: err_text(&e),
                            });
                        }
                        Err(_) => {
                            return Err(Fail {
                                status: Status::L4Tout,
                                text: String::new(),
                            });
                        }
                    }
                    if let Some(t) = self.spec.timeout_check {
                        self.deadline = Instant::now() + t;
                    }
                    return Ok(s);
                }
                if let Some(t) = self.spec.timeout_check {
                    self.deadline = Instant::now() + t;
                }
                Ok(s)
            }
            Ok(Err(e)) => Err(Fail {
                status: Status::L4Con,
                text: err_text(&e),
            }),
            Err(_) => Err(Fail {
                status: Status::L4Tout,
                text: String::new(),
            }),
        }
    }

    /// Writes `data`; `Err` is a timeout (`None`) or an I/O error.
    async fn send(&self, s: &mut ProbeIo, data: &[u8]) -> Result<(), Option<std::io::Error>> {
        match tokio::time::timeout_at(self.deadline, s.write_all(data)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(Some(e)),
            Err(_) => Err(None),
        }
    }

    /// Reads more into `buf`: `Ok(false)` at EOF (or a full buffer), `Err` on timeout/error.
    async fn read_more(
        &self,
        s: &mut ProbeIo,
        buf: &mut Vec<u8>,
    ) -> Result<bool, Option<std::io::Error>> {
        if buf.len() >= BUFSIZE {
            return Ok(false);
        }
        let mut chunk = [0u8; 4096];
        let room = (BUFSIZE - buf.len()).min(chunk.len());
        match tokio::time::timeout_at(self.deadline, s.read(&mut chunk[..room])).await {
            Ok(Ok(0)) => Ok(false),
            Ok(Ok(n)) => {
                buf.extend_from_slice(chunk.get(..n).unwrap_or_default());
                Ok(true)
            }
            Ok(Err(e)) => Err(Some(e)),
            Err(_) => Err(None),
        }
    }

    async fn http(&mut self, h: &HttpProbe, target: SocketAddr, stopped: bool) -> Verdict {
        let mut vars = std::collections::HashMap::new();
        let mut conn: Option<Link> = None;
        // The response to the last send: its bytes and parsed head.
        let mut buf = Vec::new();
        let mut resp: Option<Response> = None;
        let mut code = None;
        for (i, step) in h.steps.iter().enumerate() {
            fn ctx<'c>(
                h: &'c HttpProbe,
                vars: &'c std::collections::HashMap<String, String>,
                resp: &'c Option<Response>,
            ) -> sample::Ctx<'c> {
                sample::Ctx {
                    vars,
                    status: resp.as_ref().map(|r| r.code),
                    headers: resp.as_ref().map_or(&[][..], |r| &r.headers[..]),
                    backend: &h.backend,
                    server: &h.server,
                }
            }
            match step {
                HttpStep::Connect(c) => {
                    drop(conn.take());
                    // Port: the rule's, else the server's check port, else the one in the
                    // rule's address, else the server's (`target` holds the last two merged).
                    let port = c
                        .port
                        .or(self.spec.check_port)
                        .or(c.addr_port)
                        .unwrap_or(target.port());
                    let addr = SocketAddr::new(c.addr.unwrap_or(target.ip()), port);
                    let saved = self.tls.clone();
                    if !c.default || c.ssl {
                        self.tls = c.ssl.then(|| self.server_tls.clone()).flatten();
                    }
                    let r = self.connect(addr).await;
                    self.tls = saved;
                    match r {
                        Ok((s, alpn_h2)) => match self.link(s, alpn_h2).await {
                            Ok(l) => conn = Some(l),
                            Err(v) => return v,
                        },
                        Err(e) => return (e.status, None, e.text),
                    }
                }
                HttpStep::Send(send) => {
                    let Some(link) = conn.as_mut() else {
                        return (Status::SockErr, None, String::new());
                    };
                    let state = self.state.filter(|_| h.send_state);
                    if let Err(v) = self.send_on(link, send, &ctx(h, &vars, &resp), state).await {
                        return v;
                    }
                    buf.clear();
                    resp = None;
                }
                HttpStep::Expect(x) => {
                    if resp.is_none() {
                        let Some(link) = conn.as_mut() else {
                            return (Status::SockErr, None, String::new());
                        };
                        match self.read_on(link, &mut buf, h.needs_body(i)).await {
                            Ok(r) => resp = Some(r),
                            Err(v) => return v,
                        }
                    }
                    let Some(r) = resp.as_ref() else {
                        return (Status::L7Rsp, None, String::new());
                    };
                    code = Some(r.code);
                    if h.disable_on_404 && !stopped && r.code == 404 {
                        return (Status::L7OkC, Some(r.code), String::new());
                    }
                    let body = buf.get(r.body_start..).unwrap_or_default();
                    if let Some(v) = eval_http_expect(x, r, body, &ctx(h, &vars, &resp)) {
                        return v;
                    }
                }
                HttpStep::SetVar { name, value } => {
                    let c = ctx(h, &vars, &resp);
                    let v = match value {
                        VarValue::Expr(e) => e.eval(&c),
                        VarValue::Fmt(f) => Some(f.eval(&c)),
                    };
                    if let Some(v) = v {
                        vars.insert(name.clone(), v);
                    }
                }
                HttpStep::UnsetVar(name) => {
                    vars.remove(name);
                }
            }
        }
        (Status::L7Ok, code, String::new())
    }

    /// The HTTP connection a check speaks on `s`: h2 with `check-proto h2` or ALPN `h2`.
    async fn link(&self, s: ProbeIo, alpn_h2: bool) -> Result<Link, Verdict> {
        if !(self.spec.h2 || alpn_h2) {
            return Ok(Link::H1(s));
        }
        match tokio::time::timeout_at(self.deadline, super::h2::handshake(s)).await {
            Ok(Ok(l)) => Ok(Link::H2(l)),
            Ok(Err(e)) => Err((Status::L7Rsp, None, e.to_string())),
            Err(_) => Err((Status::L7Tout, None, String::new())),
        }
    }

    /// Sends one `http-check send` request on `link`.
    async fn send_on(
        &self,
        link: &mut Link,
        send: &SendStep,
        c: &sample::Ctx<'_>,
        state: Option<&str>,
    ) -> Result<(), Verdict> {
        let r = match link {
            Link::H1(s) => self.send(s, &send.bytes(c, state)).await,
            Link::H2(l) => {
                let (uri, headers, body) = send.parts(c, state);
                let (_, headers) = split_version(&send.version, &headers);
                let sent = l.send(&send.method, &uri, &headers, body.as_deref());
                match tokio::time::timeout_at(self.deadline, sent).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(e)) => Err(Some(std::io::Error::other(e))),
                    Err(_) => Err(None),
                }
            }
        };
        r.map_err(|e| match e {
            None => (Status::L7Tout, None, String::new()),
            Some(e) => (Status::SockErr, None, err_text(&e)),
        })
    }

    /// The response to the last send on `link` (an h2 response's body lands in `buf`).
    async fn read_on(
        &self,
        link: &mut Link,
        buf: &mut Vec<u8>,
        need_body: bool,
    ) -> Result<Response, Verdict> {
        let l = match link {
            Link::H1(s) => return self.read_response(s, buf, need_body).await,
            Link::H2(l) => l,
        };
        let a = match tokio::time::timeout_at(self.deadline, l.response(need_body, BUFSIZE)).await {
            Ok(Ok(a)) => a,
            Ok(Err(e)) => return Err((Status::L7Rsp, None, e)),
            Err(_) => return Err((Status::L7Tout, None, String::new())),
        };
        *buf = a.body;
        Ok(Response {
            code: a.status,
            reason: crate::http::errors::reason(a.status).to_string(),
            headers: a.headers,
            body_start: 0,
            content_length: a.complete.then_some(buf.len()),
        })
    }

    /// Reads the response to the last send: its head, and its body too when `need_body` (up to
    /// `Content-Length`, the end of the connection or a full buffer).
    async fn read_response(
        &self,
        s: &mut ProbeIo,
        buf: &mut Vec<u8>,
        need_body: bool,
    ) -> Result<Response, Verdict> {
        loop {
            let eof = match self.read_more(s, buf).await {
                Ok(more) => !more,
                // A reset after a complete reply still counts as the reply.
                Err(Some(_)) => true,
                Err(None) => return Err((Status::L7Tout, None, String::new())),
            };
            match parse_response(buf) {
                Some(r) if eof || !need_body || r.body_complete(buf) => return Ok(r),
                Some(_) => {}
                None if eof => return Err((Status::L7Rsp, None, String::new())),
                None => {}
            }
        }
    }

    async fn tcp(&mut self, steps: &[TcpStep], target: SocketAddr) -> Verdict {
        let mut conn = None;
        if !matches!(steps.first(), Some(TcpStep::Connect { .. })) {
            match self.connect(target).await {
                Ok((s, _)) => conn = Some(s),
                Err(e) => {
                    return (
                        e.status,
                        None,
                        format!("{} at initial connection step of tcp-check", e.text),
                    );
                }
            }
        }
        let mut buf = Vec::new();
        let mut eof = false;
        for (i, step) in steps.iter().enumerate() {
            let n = i + 1;
            match step {
                TcpStep::Connect { port } => {
                    drop(conn.take());
                    buf.clear();
                    eof = false;
                    let addr = SocketAddr::new(target.ip(), port.unwrap_or(target.port()));
                    match self.connect(addr).await {
                        Ok((s, _)) => conn = Some(s),
                        Err(e) => {
                            let what = match port {
                                Some(p) => format!("connect port {p}"),
                                None => "connect".to_string(),
                            };
                            return (
                                e.status,
                                None,
                                format!("{} at step {n} of tcp-check ({what})", e.text),
                            );
                        }
                    }
                }
                TcpStep::Send(data) => {
                    let Some(s) = conn.as_mut() else {
                        return (Status::SockErr, None, String::new());
                    };
                    // As HAProxy's tcpcheck_eval_send: what arrived before a send is not matched
                    // by the expects after it.
                    buf.clear();
                    match self.send(s, data).await {
                        Ok(()) => {}
                        Err(None) => {
                            return (
                                Status::L7Tout,
                                None,
                                format!(" at step {n} of tcp-check (send)"),
                            );
                        }
                        Err(Some(e)) => {
                            return (
                                Status::SockErr,
                                None,
                                format!("{} at step {n} of tcp-check (send)", err_text(&e)),
                            );
                        }
                    }
                }
                TcpStep::Expect(x) => {
                    let Some(s) = conn.as_mut() else {
                        return (Status::SockErr, None, String::new());
                    };
                    loop {
                        match eval_tcp_expect(x, &buf, eof, n) {
                            Some(Ok(())) => break,
                            Some(Err(text)) => return (Status::L7Rsp, None, text),
                            None => {}
                        }
                        match self.read_more(s, &mut buf).await {
                            Ok(more) => eof = !more,
                            Err(Some(_)) => eof = true,
                            Err(None) => {
                                let what = match &x.matcher {
                                    Matcher::String(p) => format!("expect string '{p}'"),
                                    _ => "expect regex".to_string(),
                                };
                                return (
                                    Status::L7Tout,
                                    None,
                                    format!(" at step {n} of tcp-check ({what})"),
                                );
                            }
                        }
                    }
                }
            }
        }
        (Status::L7Ok, Some(0), "(tcp-check)".to_string())
    }
}

/// A tcp-check `expect` against what arrived so far: `None` = wait for more data. As HAProxy's
/// tcpcheck_eval_expect: below `min-recv` it waits; a pattern not found waits for more unless
/// the server closed or a `min-recv` was given (then the absence is final), negated or not.
fn eval_tcp_expect(x: &Expect, buf: &[u8], eof: bool, step: usize) -> Option<Result<(), String>> {
    if buf.is_empty() {
        return eof.then(|| Err(format!("TCPCHK got an empty response at step {step}")));
    }
    if !eof && x.min_recv.is_some_and(|m| buf.len() < m) {
        return None;
    }
    let (found, what) = match &x.matcher {
        Matcher::String(p) => {
            // Not enough bytes to decide yet.
            if buf.len() < p.len() && !eof {
                return None;
            }
            (contains(buf, p.as_bytes()), format!("'{p}'"))
        }
        Matcher::Rstring(re) => (re.is_match(buf), "(regex)".to_string()),
        // Status and header matchers are HTTP only (the parser refuses them here).
        Matcher::Status(_) | Matcher::Rstatus(_) => (false, "(status)".to_string()),
        Matcher::Header { .. } => (false, "(header pattern)".to_string()),
    };
    if !found && !eof && x.min_recv.is_none() {
        return None;
    }
    Some(match (found, x.negate) {
        (true, false) | (false, true) => Ok(()),
        (false, false) => Err(format!(
            "TCPCHK did not match content {what} at step {step}"
        )),
        (true, true) => Err(format!(
            "TCPCHK matched unwanted content {what} at step {step}"
        )),
    })
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    needle.is_empty() || hay.windows(needle.len()).any(|w| w == needle)
}

/// One `http-check expect` on a parsed reply: `None` when it passes, else the verdict (HAProxy's
/// tcpcheck_eval_expect_http: a status or header mismatch is L7STS with the reason, a body one
/// L7RSP).
fn eval_http_expect(x: &Expect, r: &Response, body: &[u8], ctx: &sample::Ctx) -> Option<Verdict> {
    let wrong = || Some((Status::L7Sts, Some(r.code), r.reason.clone()));
    let found = match &x.matcher {
        Matcher::Status(l) => l.iter().any(|&(a, b)| (a..=b).contains(&r.code)),
        Matcher::Rstatus(re) => re.is_match(&r.code.to_string()),
        Matcher::String(s) => contains(body, s.as_bytes()),
        Matcher::Rstring(re) => re.is_match(body),
        Matcher::Header { full, name, value } => {
            match header_found(r, *full, name, value.as_ref(), ctx) {
                Ok(f) => f,
                Err(()) => {
                    return Some((
                        Status::L7Rsp,
                        Some(r.code),
                        "log-format string evaluated to an empty string".into(),
                    ));
                }
            }
        }
    };
    match (found != x.negate, x.is_body()) {
        (true, _) => None,
        (false, false) => wrong(),
        (false, true) if x.negate => Some((
            Status::L7Rsp,
            None,
            "HTTP check matched unwanted content".into(),
        )),
        (false, true) => Some((
            Status::L7Rsp,
            None,
            "HTTP content check did not match".into(),
        )),
    }
}

/// Whether a header of `r` matches `name` and, if given, one of its values matches `value`
/// (`hdr`: each comma-separated value; `fhdr`: the whole value).
fn header_found(
    r: &Response,
    full: bool,
    name: &HdrMatcher,
    value: Option<&HdrMatcher>,
    ctx: &sample::Ctx,
) -> Result<bool, ()> {
    for (n, v) in &r.headers {
        if !name.matches(n, ctx, true)? {
            continue;
        }
        let Some(vm) = value else {
            return Ok(true);
        };
        if full {
            if vm.matches(v.trim(), ctx, false)? {
                return Ok(true);
            }
        } else {
            for part in v.split(',') {
                if vm.matches(part.trim(), ctx, false)? {
                    return Ok(true);
                }
            }
        }
    }
    Ok(false)
}

struct Response {
    code: u16,
    reason: String,
    /// Names as received (matched without case).
    headers: Vec<(String, String)>,
    body_start: usize,
    content_length: Option<usize>,
}

impl Response {
    fn body_complete(&self, buf: &[u8]) -> bool {
        self.content_length
            .is_some_and(|n| buf.len().saturating_sub(self.body_start) >= n)
    }
}

/// Parses a complete status line + headers; `None` until they are complete, or if invalid (an
/// invalid head at EOF is L7RSP).
fn parse_response(buf: &[u8]) -> Option<Response> {
    let end = buf.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = std::str::from_utf8(buf.get(..end)?).ok()?;
    let mut lines = head.split("\r\n");
    let status = lines.next()?;
    let mut it = status.splitn(3, ' ');
    let ver = it.next()?;
    if !(ver == "HTTP/1.0" || ver == "HTTP/1.1") {
        return None;
    }
    let code_s = it.next()?;
    if code_s.len() != 3 || !code_s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let code: u16 = code_s.parse().ok()?;
    if !(100..=999).contains(&code) {
        return None;
    }
    let reason = it.next().unwrap_or("").to_string();
    let mut content_length = None;
    let mut headers = Vec::new();
    for l in lines {
        let (n, v) = l.split_once(':')?;
        if n.trim().eq_ignore_ascii_case("content-length") {
            content_length = v.trim().parse().ok();
        }
        headers.push((n.trim().to_string(), v.trim().to_string()));
    }
    Some(Response {
        code,
        reason,
        headers,
        body_start: end + 4,
        content_length,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::{Cap, HttpCheck, HttpCheckExpect, HttpCheckSend, Loc, ServerOpts};
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::{Arc, Mutex};

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    /// A one-thread server answering every connection with `f(request bytes)` (None = stay
    /// silent for 3 s); records the requests.
    fn serve(
        f: impl Fn(&[u8]) -> Option<Vec<u8>> + Send + 'static,
    ) -> (SocketAddr, Arc<Mutex<Vec<Vec<u8>>>>) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let reqs = Arc::new(Mutex::new(Vec::new()));
        let r2 = reqs.clone();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { continue };
                let _ = c.set_read_timeout(Some(Duration::from_millis(200)));
                let mut req = Vec::new();
                let mut b = [0u8; 4096];
                loop {
                    match c.read(&mut b) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            req.extend_from_slice(&b[..n]);
                            if req.ends_with(b"\r\n\r\n") || req.ends_with(b"\n") {
                                break;
                            }
                        }
                    }
                }
                let answer = f(&req);
                r2.lock().unwrap().push(req);
                match answer {
                    Some(a) => {
                        let _ = c.write_all(&a);
                    }
                    None => std::thread::sleep(Duration::from_secs(3)),
                }
            }
        });
        (addr, reqs)
    }

    fn refused() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        drop(l);
        a
    }

    fn proxy() -> Proxy {
        let mut p = Proxy::new(
            "be",
            Cap {
                frontend: false,
                backend: true,
            },
            Loc {
                file: "t".into(),
                line: 1,
            },
        );
        p.timeouts.connect = Some(Duration::from_secs(1));
        p
    }

    fn server(addr: SocketAddr) -> Server {
        Server {
            name: "s1".into(),
            addr,
            fqdn: None,
            unix: None,
            unresolved: false,
            id: 1,
            opts: ServerOpts {
                check: true,
                inter: Duration::from_millis(400),
                ..ServerOpts::default()
            },
            loc: Loc {
                file: "t".into(),
                line: 2,
            },
        }
    }

    fn httpchk(p: &mut Proxy, expect: Option<(bool, ExpectMatch)>, d404: bool) {
        p.options.httpchk = Some(HttpCheck {
            send: HttpCheckSend::default(),
            rules: expect
                .map(|(negate, matcher)| HttpCheckRule::Expect(HttpCheckExpect { negate, matcher }))
                .into_iter()
                .collect(),
            disable_on_404: d404,
            send_state: false,
        });
    }

    fn check(p: &Proxy, addr: SocketAddr, stopped: bool) -> CheckOutcome {
        let srv = server(addr);
        let spec = CheckSpec::from_config(p, &srv).unwrap().unwrap();
        rt().block_on(run(&spec, spec.target(srv.addr), stopped, None, None, None))
    }

    fn reply(s: &'static str) -> impl Fn(&[u8]) -> Option<Vec<u8>> + Send + 'static {
        move |_| Some(s.as_bytes().to_vec())
    }

    fn brief(o: &CheckOutcome) -> (Status, Option<u16>, &str) {
        (o.status, o.code, o.info.as_str())
    }

    #[test]
    fn request_bytes_match_haproxy_26() {
        // Captured from HAProxy 2.6.12 on the wire.
        assert_eq!(
            build_http_request("OPTIONS", "/", "HTTP/1.0", &[], None),
            b"OPTIONS / HTTP/1.0\r\n\r\n"
        );
        assert_eq!(
            build_http_request("HEAD", "/old", "HTTP/1.1", &[], None),
            b"HEAD /old HTTP/1.1\r\nconnection: close\r\n\r\n"
        );
        let h = [
            ("Host".to_string(), "h.example".to_string()),
            ("X-A".to_string(), "1".to_string()),
        ];
        assert_eq!(
            build_http_request("POST", "/p", "HTTP/1.1", &h, Some("abc")),
            b"POST /p HTTP/1.1\r\nhost: h.example\r\nx-a: 1\r\ncontent-length: 3\r\nconnection: close\r\n\r\nabc"
        );
        let c = [("Connection".to_string(), "keep-alive".to_string())];
        assert_eq!(
            build_http_request("GET", "/p", "HTTP/1.0", &c, None),
            b"GET /p HTTP/1.0\r\nconnection: keep-alive\r\n\r\n"
        );
        assert_eq!(
            build_http_request("GET", "/", "HTTP/1.1\r\nHost: x", &[], None),
            b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
        );
    }

    #[test]
    fn spec_from_config() {
        let mut p = proxy();
        let mut s = server("127.0.0.1:80".parse().unwrap());
        s.opts.check = false;
        assert!(CheckSpec::from_config(&p, &s).unwrap().is_none());
        s.opts.check = true;
        s.opts.check_port = Some(81);
        let spec = CheckSpec::from_config(&p, &s).unwrap().unwrap();
        assert!(matches!(spec.kind, CheckKind::Connect));
        assert_eq!(spec.target(s.addr), "127.0.0.1:81".parse().unwrap());
        s.opts.check_addr = Some("127.0.0.2".parse().unwrap());
        let spec = CheckSpec::from_config(&p, &s).unwrap().unwrap();
        assert_eq!(spec.target(s.addr), "127.0.0.2:81".parse().unwrap());
        p.options.tcp_check = true;
        p.tcp_checks = vec![TcpCheckRule::Expect {
            negate: false,
            matcher: ExpectMatch::Rstring("(".into()),
            min_recv: None,
        }];
        let e = CheckSpec::from_config(&p, &s).unwrap_err();
        assert!(
            e.starts_with("'tcp-check expect' : regex '(' is invalid"),
            "{e}"
        );
        // Without rules, `option tcp-check` is a connect (its failures name the step).
        p.tcp_checks.clear();
        let spec = CheckSpec::from_config(&p, &s).unwrap().unwrap();
        assert!(matches!(spec.kind, CheckKind::TcpConnect));
        // Budget: inter alone, or min(connect, inter) with `timeout check`.
        assert_eq!(spec.connect_budget(), Duration::from_millis(400));
        p.timeouts.check = Some(Duration::from_millis(100));
        p.timeouts.connect = Some(Duration::from_millis(300));
        let spec = CheckSpec::from_config(&p, &s).unwrap().unwrap();
        assert_eq!(spec.connect_budget(), Duration::from_millis(300));
    }

    #[test]
    fn plain_connect() {
        let (a, _) = serve(|_| Some(Vec::new()));
        let p = proxy();
        let o = check(&p, a, false);
        assert_eq!(brief(&o), (Status::L4Ok, None, ""));
        assert!(o.duration < Duration::from_millis(200));
        let o = check(&p, refused(), false);
        assert_eq!(brief(&o), (Status::L4Con, None, "Connection refused"));
    }

    // Seen in 2.6.12: the same connect under `option tcp-check` names the step when it fails.
    #[test]
    fn tcp_check_without_rules_names_the_step() {
        let (a, _) = serve(|_| Some(Vec::new()));
        let mut p = proxy();
        p.options.tcp_check = true;
        assert_eq!(brief(&check(&p, a, false)), (Status::L4Ok, None, ""));
        let o = check(&p, refused(), false);
        assert_eq!(
            brief(&o),
            (
                Status::L4Con,
                None,
                "Connection refused at initial connection step of tcp-check"
            )
        );
    }

    #[test]
    fn http_statuses() {
        let mut p = proxy();
        httpchk(&mut p, None, false);
        let (a, reqs) = serve(reply("HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok"));
        assert_eq!(brief(&check(&p, a, false)), (Status::L7Ok, Some(200), ""));
        assert_eq!(reqs.lock().unwrap()[0], b"OPTIONS / HTTP/1.0\r\n\r\n");
        let (a, _) = serve(reply("HTTP/1.1 301 Moved Permanently\r\n\r\n"));
        assert_eq!(brief(&check(&p, a, false)), (Status::L7Ok, Some(301), ""));
        let (a, _) = serve(reply("HTTP/1.0 503 Service Unavailable\r\n\r\n"));
        assert_eq!(
            brief(&check(&p, a, false)),
            (Status::L7Sts, Some(503), "Service Unavailable")
        );
        let (a, _) = serve(reply("HTTP/1.0 503\r\n\r\n"));
        assert_eq!(brief(&check(&p, a, false)), (Status::L7Sts, Some(503), ""));
        let (a, _) = serve(reply("garbage here\r\n\r\n"));
        assert_eq!(brief(&check(&p, a, false)), (Status::L7Rsp, None, ""));
        let (a, _) = serve(reply(""));
        assert_eq!(brief(&check(&p, a, false)), (Status::L7Rsp, None, ""));
        let o = check(&p, refused(), false);
        assert_eq!(brief(&o), (Status::L4Con, None, "Connection refused"));
    }

    /// The backend `be` of a configuration text, and its server `srv` pointed at `addr`.
    fn parsed(text: &str, addr: SocketAddr) -> (Proxy, Server) {
        let text = text.replace("ADDR", &addr.to_string());
        let cfg = crate::config::parse_str("t.cfg", &text, &|_| None)
            .unwrap_or_else(|d| panic!("{d:#?}"))
            .config;
        let p = cfg.proxies.into_iter().find(|p| p.name == "be").unwrap();
        let s = p.servers[0].clone();
        (p, s)
    }

    /// As reg-test checks/http-check's `be4`: a ruleset of three connections, variables in
    /// `uri-lf` and header values, `send-state`, implicit last expect.
    #[test]
    fn http_check_ruleset() {
        let (a, reqs) = serve(reply(
            "HTTP/1.1 200 OK\r\nX-Name: x-test1\r\nX-List: a, b-val\r\nX-Test1: yes\r\nContent-Length: 0\r\n\r\n",
        ));
        let (p, srv) = parsed(
            "backend be\n mode http\n option httpchk\n http-check send-state\n \
             http-check connect\n http-check set-var(check.path) str(/req1)\n \
             http-check send meth GET uri-lf %[var(check.path)] ver HTTP/1.1 hdr x-test server=%[srv_name]\n \
             http-check expect status 200\n http-check expect hdr name x-list value -m beg b-\n \
             http-check set-var(check.hdr) res.fhdr(x-name)\n \
             http-check expect fhdr name-lf %[var(check.hdr)]\n \
             http-check connect addr ADDR\n http-check unset-var(check.path)\n \
             http-check send meth POST uri-lf %[var(check.path)] body-lf on-%[be_name]\n \
             server srv ADDR check\n",
            a,
        );
        let spec = CheckSpec::from_config(&p, &srv).unwrap().unwrap();
        assert!(spec.wants_state());
        let o = rt().block_on(run(&spec, a, false, None, Some("UP; name=be/srv"), None));
        assert_eq!(brief(&o), (Status::L7Ok, Some(200), ""));
        let reqs = reqs.lock().unwrap();
        assert_eq!(
            String::from_utf8_lossy(&reqs[0]),
            "GET /req1 HTTP/1.1\r\nx-test: server=srv\r\nx-haproxy-server-state: UP; name=be/srv\r\nconnection: close\r\n\r\n"
        );
        // The second send is not merged with `option httpchk`: HAProxy's defaults, `/` for an
        // empty URI.
        assert!(
            String::from_utf8_lossy(&reqs[1])
                .starts_with("POST / HTTP/1.0\r\nx-haproxy-server-state: UP; name=be/srv\r\ncontent-length: 5\r\n"),
            "{:?}",
            String::from_utf8_lossy(&reqs[1])
        );
    }

    #[test]
    fn http_check_header_expects() {
        let (a, _) = serve(reply(
            "HTTP/1.1 202 Accepted\r\nX-Test2: true, begin-value, value-end\r\nX-Reg-Test1: 1\r\n\r\n",
        ));
        let verdict = |expect: &str| {
            let (p, srv) = parsed(
                &format!(
                    "backend be\n option httpchk\n http-check expect {expect}\n server srv ADDR check\n"
                ),
                a,
            );
            let spec = CheckSpec::from_config(&p, &srv).unwrap().unwrap();
            let o = rt().block_on(run(&spec, a, false, None, None, None));
            (o.status, o.code, o.info)
        };
        let ok = (Status::L7Ok, Some(202), String::new());
        let sts = (Status::L7Sts, Some(202), "Accepted".to_string());
        assert_eq!(verdict("hdr name x-test2"), ok);
        assert_eq!(verdict("hdr name -m str X-TEST2 value -m str true"), ok);
        assert_eq!(verdict("hdr name -m reg ^[a-z]+-Reg-[a-z]+[0-9]$"), ok);
        assert_eq!(verdict("hdr name -m sub test value -m end -end"), ok);
        // `fhdr` sees the whole value, `hdr` each comma-separated one.
        assert_eq!(verdict("fhdr name x-test2 value true"), sts);
        assert_eq!(verdict("fhdr name x-test2 value -m sub begin-value,"), ok);
        assert_eq!(verdict("hdr name x-test2 value -m str TRUE"), sts);
        assert_eq!(verdict("! hdr name x-absent"), ok);
        assert_eq!(verdict("hdr name x-absent"), sts);
    }

    #[test]
    fn http_timeout_is_inter_without_timeout_check() {
        let mut p = proxy();
        httpchk(&mut p, None, false);
        let (a, _) = serve(|_| None);
        let o = check(&p, a, false);
        assert_eq!(brief(&o), (Status::L7Tout, None, ""));
        let ms = o.duration.as_millis();
        assert!((395..600).contains(&ms), "{ms}");
        // `timeout check` bounds the wait for the reply once connected.
        p.timeouts.check = Some(Duration::from_millis(150));
        let o = check(&p, a, false);
        assert_eq!(o.status, Status::L7Tout);
        let ms = o.duration.as_millis();
        assert!((145..350).contains(&ms), "{ms}");
    }

    #[test]
    fn connect_timeout_on_full_backlog() {
        // A listener with a full accept queue drops SYNs: the connect times out.
        let sock =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        sock.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        sock.listen(0).unwrap();
        let a = sock.local_addr().unwrap().as_socket().unwrap();
        let mut fillers = Vec::new();
        for _ in 0..4 {
            let s =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            s.set_nonblocking(true).unwrap();
            let _ = s.connect(&a.into());
            fillers.push(s);
        }
        std::thread::sleep(Duration::from_millis(50));
        let p = proxy();
        let o = check(&p, a, false);
        assert_eq!(brief(&o), (Status::L4Tout, None, ""), "{o:?}");
        assert!(o.duration.as_millis() >= 395, "{o:?}");
        drop(fillers);
    }

    #[test]
    fn disable_on_404() {
        let mut p = proxy();
        httpchk(&mut p, None, true);
        let (a, _) = serve(reply("HTTP/1.0 404 Not Found\r\n\r\n"));
        assert_eq!(brief(&check(&p, a, false)), (Status::L7OkC, Some(404), ""));
        // On a DOWN server a 404 is a failure.
        assert_eq!(
            brief(&check(&p, a, true)),
            (Status::L7Sts, Some(404), "Not Found")
        );
        httpchk(&mut p, None, false);
        assert_eq!(
            brief(&check(&p, a, false)),
            (Status::L7Sts, Some(404), "Not Found")
        );
    }

    #[test]
    fn http_expect() {
        let mut p = proxy();
        let (a503, _) = serve(reply("HTTP/1.0 503 Service Unavailable\r\n\r\n"));
        let (a200, _) = serve(reply(
            "HTTP/1.0 200 OK\r\nContent-Length: 11\r\n\r\nhello world",
        ));
        httpchk(
            &mut p,
            Some((false, ExpectMatch::Status(vec![(200, 200)]))),
            false,
        );
        assert_eq!(
            brief(&check(&p, a503, false)),
            (Status::L7Sts, Some(503), "Service Unavailable")
        );
        httpchk(
            &mut p,
            Some((true, ExpectMatch::Status(vec![(200, 299)]))),
            false,
        );
        assert_eq!(
            brief(&check(&p, a200, false)),
            (Status::L7Sts, Some(200), "OK")
        );
        assert_eq!(
            brief(&check(&p, a503, false)),
            (Status::L7Ok, Some(503), "")
        );
        httpchk(
            &mut p,
            Some((false, ExpectMatch::Rstatus("^5".into()))),
            false,
        );
        assert_eq!(
            brief(&check(&p, a503, false)),
            (Status::L7Ok, Some(503), "")
        );
        httpchk(
            &mut p,
            Some((false, ExpectMatch::String("nope".into()))),
            false,
        );
        assert_eq!(
            brief(&check(&p, a200, false)),
            (Status::L7Rsp, None, "HTTP content check did not match")
        );
        httpchk(
            &mut p,
            Some((true, ExpectMatch::String("hello".into()))),
            false,
        );
        assert_eq!(
            brief(&check(&p, a200, false)),
            (Status::L7Rsp, None, "HTTP check matched unwanted content")
        );
        httpchk(
            &mut p,
            Some((false, ExpectMatch::Rstring("^hel+o w".into()))),
            false,
        );
        assert_eq!(
            brief(&check(&p, a200, false)),
            (Status::L7Ok, Some(200), "")
        );
    }

    fn tcp(p: &mut Proxy, rules: Vec<TcpCheckRule>) {
        p.options.tcp_check = true;
        p.tcp_checks = rules;
    }
    fn send(s: &str) -> TcpCheckRule {
        TcpCheckRule::Send(s.as_bytes().to_vec())
    }
    fn expect(negate: bool, m: ExpectMatch) -> TcpCheckRule {
        TcpCheckRule::Expect {
            negate,
            matcher: m,
            min_recv: None,
        }
    }

    /// A send empties what was received before it (HAProxy's tcpcheck_eval_send): the expect
    /// after the send judges only the new bytes, so a stale "valid" cannot pass it.
    #[test]
    fn tcp_check_send_forgets_earlier_bytes() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for c in l.incoming() {
                let Ok(mut c) = c else { continue };
                let _ = c.set_read_timeout(Some(Duration::from_secs(2)));
                let _ = c.write_all(b"valid");
                let mut got = Vec::new();
                let mut b = [0u8; 64];
                while got.len() < 10 {
                    match c.read(&mut b) {
                        Ok(n) if n > 0 => got.extend_from_slice(&b[..n]),
                        _ => break,
                    }
                }
                let _ = c.write_all(b"error");
            }
        });
        let mut p = proxy();
        tcp(
            &mut p,
            vec![
                expect(false, ExpectMatch::String("valid".into())),
                send("0123456789"),
                expect(false, ExpectMatch::String("valid".into())),
            ],
        );
        assert_eq!(
            brief(&check(&p, a, false)),
            (
                Status::L7Rsp,
                None,
                "TCPCHK did not match content 'valid' at step 3"
            )
        );
    }

    #[test]
    fn tcp_check_texts() {
        let mut p = proxy();
        let (pong, reqs) = serve(reply("+PONG\r\n"));
        let (err, _) = serve(reply("-ERR\r\n"));
        tcp(
            &mut p,
            vec![
                send("PING\r\n"),
                expect(false, ExpectMatch::String("+PONG".into())),
            ],
        );
        assert_eq!(
            brief(&check(&p, pong, false)),
            (Status::L7Ok, Some(0), "(tcp-check)")
        );
        assert_eq!(reqs.lock().unwrap()[0], b"PING\r\n");
        assert_eq!(
            brief(&check(&p, err, false)),
            (
                Status::L7Rsp,
                None,
                "TCPCHK did not match content '+PONG' at step 2"
            )
        );
        tcp(
            &mut p,
            vec![send("x\n"), expect(true, ExpectMatch::String("ERR".into()))],
        );
        assert_eq!(
            brief(&check(&p, err, false)),
            (
                Status::L7Rsp,
                None,
                "TCPCHK matched unwanted content 'ERR' at step 2"
            )
        );
        tcp(
            &mut p,
            vec![
                send("x\n"),
                expect(false, ExpectMatch::Rstring("^\\+P".into())),
            ],
        );
        assert_eq!(
            brief(&check(&p, err, false)),
            (
                Status::L7Rsp,
                None,
                "TCPCHK did not match content (regex) at step 2"
            )
        );
        let (empty, _) = serve(reply(""));
        assert_eq!(
            brief(&check(&p, empty, false)),
            (
                Status::L7Rsp,
                None,
                "TCPCHK got an empty response at step 2"
            )
        );
        let (silent, _) = serve(|_| None);
        tcp(
            &mut p,
            vec![expect(false, ExpectMatch::String("hello".into()))],
        );
        let o = check(&p, silent, false);
        assert_eq!(
            brief(&o),
            (
                Status::L7Tout,
                None,
                " at step 1 of tcp-check (expect string 'hello')"
            )
        );
        tcp(
            &mut p,
            vec![
                send("x\n"),
                expect(false, ExpectMatch::Rstring("^he".into())),
            ],
        );
        assert_eq!(
            check(&p, silent, false).info,
            " at step 2 of tcp-check (expect regex)"
        );
        let r = refused();
        tcp(
            &mut p,
            vec![
                TcpCheckRule::Connect { port: None },
                send("hi"),
                TcpCheckRule::Connect {
                    port: Some(r.port()),
                },
            ],
        );
        let msg = format!(
            "Connection refused at step 3 of tcp-check (connect port {})",
            r.port()
        );
        assert_eq!(
            brief(&check(&p, pong, false)),
            (Status::L4Con, None, msg.as_str())
        );
        tcp(&mut p, vec![send("hi")]);
        assert_eq!(
            brief(&check(&p, r, false)),
            (
                Status::L4Con,
                None,
                "Connection refused at initial connection step of tcp-check"
            )
        );
        // Two expects read the same reply.
        tcp(
            &mut p,
            vec![
                send("x\n"),
                expect(false, ExpectMatch::String("+PO".into())),
                expect(false, ExpectMatch::String("NG".into())),
            ],
        );
        assert_eq!(check(&p, pong, false).status, Status::L7Ok);
    }
}
