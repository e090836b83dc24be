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
use tokio::time::Instant;

use super::fsm::{CheckOutcome, Status};
use crate::config::model::{ExpectMatch, Proxy, Server, TcpCheckRule};

/// HAProxy reads a check's reply into one buffer (`tune.bufsize`).
const BUFSIZE: usize = 16384;

#[derive(Clone, Debug)]
enum Matcher {
    Status(Vec<(u16, u16)>),
    Rstatus(regex::Regex),
    String(String),
    Rstring(regex::bytes::Regex),
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

/// `option httpchk` / `http-check send|expect|disable-on-404`.
#[derive(Clone, Debug)]
pub struct HttpProbe {
    /// The request bytes, as HAProxy 2.6 puts them on the wire.
    pub request: Vec<u8>,
    expect: Option<Expect>,
    pub disable_on_404: bool,
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
    // The deprecated `option httpchk GET / HTTP/1.1\r\nHost:\ x` form smuggles headers in the
    // version.
    let mut parts = version.split("\r\n");
    let version = parts.next().unwrap_or("HTTP/1.0");
    let mut all: Vec<(String, String)> = parts
        .filter_map(|l| {
            let (n, v) = l.split_once(':')?;
            Some((n.trim().to_string(), v.trim().to_string()))
        })
        .collect();
    all.extend(headers.iter().cloned());
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
            let s = &hc.send;
            CheckKind::Http(HttpProbe {
                request: build_http_request(
                    &s.method,
                    &s.uri,
                    &s.version,
                    &s.headers,
                    s.body.as_deref(),
                ),
                expect: hc
                    .expect
                    .as_ref()
                    .map(|e| Expect::compile(e.negate, &e.matcher, "http-check"))
                    .transpose()?,
                disable_on_404: hc.disable_on_404,
            })
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
        }))
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
pub async fn run(
    spec: &CheckSpec,
    target: SocketAddr,
    server_stopped: bool,
    tls: Option<&crate::tls::client::ServerTls>,
) -> CheckOutcome {
    let mut p = Run {
        spec,
        start: Instant::now(),
        deadline: Instant::now(),
        tls: tls
            .filter(|t| t.checks)
            .map(|t| std::sync::Arc::clone(&t.config)),
    };
    let (status, code, info) = match &spec.kind {
        CheckKind::Connect => match p.connect(target).await {
            // A completed handshake is a Layer6 success.
            Ok(_) if p.tls.is_some() => (Status::L6Ok, None, String::new()),
            Ok(_) => (Status::L4Ok, None, String::new()),
            Err(e) => (e.status, None, e.text),
        },
        CheckKind::TcpConnect => match p.connect(target).await {
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
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
}

type Verdict = (Status, Option<u16>, String);

impl Run<'_> {
    async fn connect(&mut self, addr: SocketAddr) -> Result<ProbeIo, Fail> {
        let s = self.connect_tcp(addr).await?;
        let Some(cfg) = self.tls.clone() else {
            return Ok(Box::new(s));
        };
        let name = crate::tls::client::server_name(None, addr.ip());
        let hs = tokio_rustls::TlsConnector::from(cfg).connect(name, s);
        match tokio::time::timeout_at(self.deadline, hs).await {
            Ok(Ok(t)) => Ok(Box::new(t)),
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

    async fn connect_tcp(&mut self, addr: SocketAddr) -> Result<TcpStream, Fail> {
        let now = Instant::now();
        self.deadline = if self.spec.timeout_check.is_some() {
            now + self.spec.connect_budget()
        } else {
            self.start + self.spec.inter
        };
        match tokio::time::timeout_at(self.deadline, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => {
                // Checks close with a reset, as HAProxy's do (no TIME_WAIT pile-up); a zero
                // linger never blocks the close.
                let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                let _ = s.set_nodelay(true);
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
        let mut s = match self.connect(target).await {
            Ok(s) => s,
            Err(e) => return (e.status, None, e.text),
        };
        match self.send(&mut s, &h.request).await {
            Ok(()) => {}
            Err(None) => return (Status::L7Tout, None, String::new()),
            Err(Some(e)) => return (Status::SockErr, None, err_text(&e)),
        }
        let need_body = h.expect.as_ref().is_some_and(Expect::is_body);
        let mut buf = Vec::new();
        let resp = loop {
            let eof = match self.read_more(&mut s, &mut buf).await {
                Ok(more) => !more,
                // A reset after a complete reply still counts as the reply.
                Err(Some(_)) => true,
                Err(None) => return (Status::L7Tout, None, String::new()),
            };
            match parse_response(&buf) {
                Some(r) if eof || !need_body || r.body_complete(&buf) => break Some(r),
                Some(_) => {}
                None if eof => break None,
                None => {}
            }
        };
        let Some(r) = resp else {
            return (Status::L7Rsp, None, String::new());
        };
        let body = buf.get(r.body_start..).unwrap_or_default();
        eval_http(h, r.code, &r.reason, body, stopped)
    }

    async fn tcp(&mut self, steps: &[TcpStep], target: SocketAddr) -> Verdict {
        let mut conn = None;
        if !matches!(steps.first(), Some(TcpStep::Connect { .. })) {
            match self.connect(target).await {
                Ok(s) => conn = Some(s),
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
                        Ok(s) => conn = Some(s),
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
        // Status matchers are HTTP only (the parser refuses them here).
        Matcher::Status(_) | Matcher::Rstatus(_) => (false, "(status)".to_string()),
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

/// The verdict on a parsed HTTP reply.
fn eval_http(h: &HttpProbe, code: u16, reason: &str, body: &[u8], stopped: bool) -> Verdict {
    if h.disable_on_404 && !stopped && code == 404 {
        return (Status::L7OkC, Some(code), String::new());
    }
    let ok = (Status::L7Ok, Some(code), String::new());
    let wrong = (Status::L7Sts, Some(code), reason.to_string());
    let Some(x) = &h.expect else {
        return if (200..400).contains(&code) {
            ok
        } else {
            wrong
        };
    };
    let found = match &x.matcher {
        Matcher::Status(l) => l.iter().any(|&(a, b)| (a..=b).contains(&code)),
        Matcher::Rstatus(re) => re.is_match(&code.to_string()),
        Matcher::String(s) => contains(body, s.as_bytes()),
        Matcher::Rstring(re) => re.is_match(body),
    };
    match (found != x.negate, x.is_body()) {
        (true, _) => ok,
        (false, false) => wrong,
        (false, true) if x.negate => (
            Status::L7Rsp,
            None,
            "HTTP check matched unwanted content".into(),
        ),
        (false, true) => (
            Status::L7Rsp,
            None,
            "HTTP content check did not match".into(),
        ),
    }
}

struct Response {
    code: u16,
    reason: String,
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
    for l in lines {
        let (n, v) = l.split_once(':')?;
        if n.trim().eq_ignore_ascii_case("content-length") {
            content_length = v.trim().parse().ok();
        }
    }
    Some(Response {
        code,
        reason,
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
            expect: expect.map(|(negate, matcher)| HttpCheckExpect { negate, matcher }),
            disable_on_404: d404,
        });
    }

    fn check(p: &Proxy, addr: SocketAddr, stopped: bool) -> CheckOutcome {
        let srv = server(addr);
        let spec = CheckSpec::from_config(p, &srv).unwrap().unwrap();
        rt().block_on(run(&spec, spec.target(srv.addr), stopped, None))
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
