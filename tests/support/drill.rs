//! Seed 000's graceful-termination drill: simulated gateway pods with the hc FSM, a rolling
//! restart, fixed-rate HTTPS load through the seed's 443 frontend and the balancer's log.
//!
//! Shared by `cargo xtask drill` and `tests/drill.rs` (`#[path]` include, like `backend.rs`).
//! Needs only std, rustls (ring) and socket2 (for the RST on CLOSED).
//!
//! The pod's gate states (the seed's hc FSM, renamed 2026-04-26):
//!
//! | gate | `/health_check.html` (:30180) | data (:30080) |
//! | --- | --- | --- |
//! | OPEN | 200 | 200, keep-alive |
//! | DRAINING | 200 | 200 with `connection: close` (the proxy drains its HTTP/1 connections) |
//! | CLOSING | 503 (only the LB is told) | 200 with `connection: close`: in-flight work goes on |
//! | CLOSED | listener gone (refused) | listener gone (refused), open connections reset |
//! | FAULT | 500 | 500 |
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// How often a blocked pod connection looks at its kill flag.
const POLL: Duration = Duration::from_millis(50);
/// Interval between two chunks of `/stream`.
const TICK: Duration = Duration::from_millis(100);
/// The seed's detection window: `inter 2s` × `fall 2`.
pub const DETECTION_WINDOW: Duration = Duration::from_secs(4);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

// ---------------------------------------------------------------------------------------------
// The hc FSM (pure).

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gate {
    Open,
    Draining,
    Closing,
    Closed,
    Fault,
}

/// What moves the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateEvent {
    /// SIGTERM: the preStop hook starts and tells the proxy to drain.
    Sigterm,
    /// The hook flips the health answer: from now on only the LB hears "going away".
    SignalLb,
    /// The hook's budget is spent: the process exits.
    Exit,
    /// The hc found its proxy broken.
    Failure,
    /// The proxy works again.
    Recovered,
}

impl Gate {
    pub fn name(self) -> &'static str {
        match self {
            Gate::Open => "OPEN",
            Gate::Draining => "DRAINING",
            Gate::Closing => "CLOSING",
            Gate::Closed => "CLOSED",
            Gate::Fault => "FAULT",
        }
    }

    /// The next state, or None when `ev` does not apply in this one.
    pub fn on(self, ev: GateEvent) -> Option<Gate> {
        use Gate::*;
        use GateEvent::*;
        match (self, ev) {
            (Open, Sigterm) => Some(Draining),
            (Draining, SignalLb) => Some(Closing),
            (Open | Draining | Closing | Fault, Exit) => Some(Closed),
            (Fault, Sigterm) => Some(Closing),
            (Open | Draining, Failure) => Some(Fault),
            (Fault, Recovered) => Some(Open),
            _ => None,
        }
    }

    /// Status of `/health_check.html`; None: nothing listens.
    pub fn health_status(self) -> Option<u16> {
        match self {
            Gate::Open | Gate::Draining => Some(200),
            Gate::Closing => Some(503),
            Gate::Fault => Some(500),
            Gate::Closed => None,
        }
    }

    /// Status of a data request; None: nothing listens.
    pub fn data_status(self) -> Option<u16> {
        match self {
            Gate::Open | Gate::Draining | Gate::Closing => Some(200),
            Gate::Fault => Some(500),
            Gate::Closed => None,
        }
    }

    /// Whether data responses keep the connection open.
    pub fn keep_alive(self) -> bool {
        matches!(self, Gate::Open | Gate::Fault)
    }

    fn to_u8(self) -> u8 {
        match self {
            Gate::Open => 0,
            Gate::Draining => 1,
            Gate::Closing => 2,
            Gate::Closed => 3,
            Gate::Fault => 4,
        }
    }

    fn from_u8(v: u8) -> Gate {
        match v {
            0 => Gate::Open,
            1 => Gate::Draining,
            2 => Gate::Closing,
            3 => Gate::Closed,
            _ => Gate::Fault,
        }
    }
}

/// The two preStop scripts of the seed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The data side exits after a drain shorter than the detection window.
    Current,
    /// Serves through the detection window, then drains what is in flight, then exits.
    Improved,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Current => "current",
            Mode::Improved => "improved",
        }
    }

    pub fn plan(self) -> PreStop {
        match self {
            Mode::Current => PreStop {
                hook: Duration::from_millis(100),
                closing: Duration::from_secs(1),
                inflight_max: Duration::ZERO,
            },
            Mode::Improved => PreStop {
                hook: Duration::from_millis(100),
                closing: DETECTION_WINDOW + Duration::from_secs(1),
                inflight_max: Duration::from_secs(15),
            },
        }
    }
}

/// The timing of one preStop: DRAINING for `hook`, CLOSING for `closing`, then up to
/// `inflight_max` more until no request is in progress, then CLOSED.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreStop {
    pub hook: Duration,
    pub closing: Duration,
    pub inflight_max: Duration,
}

// ---------------------------------------------------------------------------------------------
// Listeners that can be closed (connections refused afterwards) and connections that can be
// reset.

struct Listener {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

type Handler = Arc<dyn Fn(TcpStream) + Send + Sync>;

impl Listener {
    fn start(addr: SocketAddr, open: Arc<AtomicUsize>, handler: Handler) -> io::Result<Listener> {
        let l = TcpListener::bind(addr)?;
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = thread::Builder::new()
            .name(format!("pod-{addr}"))
            .spawn(move || {
                for s in l.incoming() {
                    if stop2.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(s) = s else {
                        thread::sleep(Duration::from_millis(5));
                        continue;
                    };
                    let (h, conns) = (handler.clone(), open.clone());
                    open.fetch_add(1, Ordering::SeqCst);
                    let spawned = thread::Builder::new().spawn(move || {
                        h(s);
                        conns.fetch_sub(1, Ordering::SeqCst);
                    });
                    if spawned.is_err() {
                        open.fetch_sub(1, Ordering::SeqCst);
                    }
                }
            })?;
        Ok(Listener {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// Closes the listening socket: connects are refused from now on.
    fn close(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_millis(300));
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.close();
    }
}

/// Drops `s` with SO_LINGER 0: the peer gets a RST, not a FIN.
fn reset(s: TcpStream) {
    let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
    drop(s);
}

// ---------------------------------------------------------------------------------------------
// The pod.

struct PodShared {
    name: String,
    gate: AtomicU8,
    kill: AtomicBool,
    /// Data requests between head read and response end.
    active: AtomicUsize,
    open: Arc<AtomicUsize>,
    served: AtomicU64,
    health_ok: AtomicU64,
    health_failed: AtomicU64,
}

impl PodShared {
    fn gate(&self) -> Gate {
        Gate::from_u8(self.gate.load(Ordering::SeqCst))
    }
}

/// One gateway pod on one node: data and health listeners driven by its [`Gate`].
pub struct Pod {
    sh: Arc<PodShared>,
    data: Listener,
    health: Listener,
    transitions: Vec<(Instant, Gate)>,
}

impl Pod {
    /// Starts OPEN.
    pub fn start(name: &str, data: SocketAddr, health: SocketAddr) -> io::Result<Pod> {
        let open = Arc::new(AtomicUsize::new(0));
        let sh = Arc::new(PodShared {
            name: name.to_string(),
            gate: AtomicU8::new(Gate::Open.to_u8()),
            kill: AtomicBool::new(false),
            active: AtomicUsize::new(0),
            open: open.clone(),
            served: AtomicU64::new(0),
            health_ok: AtomicU64::new(0),
            health_failed: AtomicU64::new(0),
        });
        let s1 = sh.clone();
        let data = Listener::start(data, open.clone(), Arc::new(move |s| serve_data(s, &s1)))?;
        let s2 = sh.clone();
        let health = Listener::start(health, open, Arc::new(move |s| serve_health(s, &s2)))?;
        Ok(Pod {
            sh,
            data,
            health,
            transitions: vec![(Instant::now(), Gate::Open)],
        })
    }

    pub fn name(&self) -> &str {
        &self.sh.name
    }

    pub fn gate(&self) -> Gate {
        self.sh.gate()
    }

    /// Applies `ev`; false when the FSM has no such transition from the current state.
    pub fn fire(&mut self, ev: GateEvent) -> bool {
        let Some(next) = self.gate().on(ev) else {
            return false;
        };
        if next == Gate::Closed {
            self.sh.gate.store(next.to_u8(), Ordering::SeqCst);
            self.data.close();
            self.health.close();
            self.sh.kill.store(true, Ordering::SeqCst);
            // Connections notice the kill flag within POLL.
            let deadline = Instant::now() + Duration::from_secs(2);
            while self.sh.open.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(5));
            }
        } else {
            self.sh.gate.store(next.to_u8(), Ordering::SeqCst);
        }
        self.transitions.push((Instant::now(), next));
        true
    }

    /// SIGTERM and the whole preStop hook of `plan`; returns when the pod is CLOSED.
    pub fn terminate(&mut self, plan: PreStop) {
        self.fire(GateEvent::Sigterm);
        thread::sleep(plan.hook);
        self.fire(GateEvent::SignalLb);
        thread::sleep(plan.closing);
        let deadline = Instant::now() + plan.inflight_max;
        while self.in_flight() > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_millis(10));
        }
        self.fire(GateEvent::Exit);
    }

    /// Data requests in progress.
    pub fn in_flight(&self) -> usize {
        self.sh.active.load(Ordering::SeqCst)
    }

    pub fn served(&self) -> u64 {
        self.sh.served.load(Ordering::SeqCst)
    }

    /// Health checks answered 200.
    pub fn health_ok(&self) -> u64 {
        self.sh.health_ok.load(Ordering::SeqCst)
    }

    /// Health checks answered with something else.
    pub fn health_failed(&self) -> u64 {
        self.sh.health_failed.load(Ordering::SeqCst)
    }

    pub fn transitions(&self) -> &[(Instant, Gate)] {
        &self.transitions
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        self.fire(GateEvent::Exit);
    }
}

/// Reads one request head, watching the kill flag. Ok(None): clean EOF before a request.
/// Err(()): killed (the stream was reset) or broken.
fn read_head(s: &mut TcpStream, buf: &mut Vec<u8>, sh: &PodShared) -> Result<Option<Vec<u8>>, ()> {
    let mut tmp = [0u8; 4096];
    loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            return Ok(Some(buf.drain(..i + 4).collect()));
        }
        if sh.kill.load(Ordering::SeqCst) || buf.len() > 64 * 1024 {
            return Err(());
        }
        match s.read(&mut tmp) {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) => return Err(()),
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) => {}
            Err(_) => return Err(()),
        }
    }
}

/// `GET /path?query HTTP/1.1` → (target, wants close).
fn parse_head(head: &[u8]) -> Option<(String, bool)> {
    let text = String::from_utf8_lossy(head);
    let mut lines = text.split("\r\n");
    let target = lines.next()?.split(' ').nth(1)?.to_string();
    let close = lines.any(|l| {
        l.split_once(':').is_some_and(|(k, v)| {
            k.trim().eq_ignore_ascii_case("connection") && v.trim().eq_ignore_ascii_case("close")
        })
    });
    Some((target, close))
}

fn query_u64(target: &str, key: &str) -> u64 {
    target
        .split_once('?')
        .map(|(_, q)| q)
        .unwrap_or("")
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0)
}

struct Active<'a>(&'a AtomicUsize);

impl Drop for Active<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn serve_data(mut s: TcpStream, sh: &PodShared) {
    let _ = s.set_nodelay(true);
    let _ = s.set_read_timeout(Some(POLL));
    let mut buf = Vec::new();
    loop {
        let head = match read_head(&mut s, &mut buf, sh) {
            Ok(Some(h)) => h,
            Ok(None) => return,
            Err(()) => return reset(s),
        };
        let Some((target, close)) = parse_head(&head) else {
            return reset(s);
        };
        sh.active.fetch_add(1, Ordering::SeqCst);
        let _active = Active(&sh.active);
        let gate = sh.gate();
        let status = gate.data_status().unwrap_or(503);
        let keep = gate.keep_alive() && !close;
        let conn = if keep { "" } else { "connection: close\r\n" };
        let path = target.split('?').next().unwrap_or("");
        let ok = if path == "/stream" && status == 200 {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-node: {}\r\n\
                 transfer-encoding: chunked\r\n{conn}\r\n",
                sh.name
            );
            let end = Instant::now() + Duration::from_secs(query_u64(&target, "seconds"));
            let mut out = s.write_all(head.as_bytes()).is_ok();
            let mut i = 0u64;
            while out && Instant::now() < end {
                if sh.kill.load(Ordering::SeqCst) {
                    return reset(s);
                }
                let line = format!("tick {i}\n");
                out = s
                    .write_all(format!("{:x}\r\n{line}\r\n", line.len()).as_bytes())
                    .is_ok();
                i += 1;
                thread::sleep(TICK);
            }
            out && s.write_all(b"0\r\n\r\n").is_ok()
        } else {
            let body = format!("node={} path={target}\n", sh.name);
            let resp = format!(
                "HTTP/1.1 {status} {}\r\ncontent-type: text/plain\r\nx-node: {}\r\n\
                 content-length: {}\r\n{conn}\r\n{body}",
                if status == 200 { "OK" } else { "Error" },
                sh.name,
                body.len()
            );
            s.write_all(resp.as_bytes()).is_ok()
        };
        sh.served.fetch_add(1, Ordering::SeqCst);
        if !ok {
            return reset(s);
        }
        if !keep {
            let _ = s.shutdown(Shutdown::Write);
            return;
        }
    }
}

fn serve_health(mut s: TcpStream, sh: &PodShared) {
    let _ = s.set_read_timeout(Some(POLL));
    let mut buf = Vec::new();
    let Ok(Some(head)) = read_head(&mut s, &mut buf, sh) else {
        return;
    };
    let target = parse_head(&head).map(|(t, _)| t).unwrap_or_default();
    let (code, body) = if target.split('?').next() == Some("/health_check.html") {
        match sh.gate().health_status() {
            Some(200) => {
                sh.health_ok.fetch_add(1, Ordering::SeqCst);
                (200, "OK\n")
            }
            Some(500) => {
                sh.health_failed.fetch_add(1, Ordering::SeqCst);
                (500, "FAULT\n")
            }
            _ => {
                sh.health_failed.fetch_add(1, Ordering::SeqCst);
                (503, "CLOSING\n")
            }
        }
    } else {
        (404, "not found\n")
    };
    let resp = format!(
        "HTTP/1.1 {code} X\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\
         connection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = s.write_all(resp.as_bytes());
    let _ = s.shutdown(Shutdown::Write);
}

// ---------------------------------------------------------------------------------------------
// Addresses and the config.

/// Where the drill runs: the balancer on `<prefix>.0.1`, the nodes on `<prefix>.1.12–14`.
/// `127.0` is the seed's own layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Net {
    pub lb: Ipv4Addr,
    pub nodes: [Ipv4Addr; 3],
}

pub const NODE_NAMES: [&str; 3] = ["master1", "worker1", "worker2"];

impl Net {
    /// `"127.0"` → the seed's addresses; `"127.61"` → 127.61.0.1 and 127.61.1.12–14.
    pub fn parse(prefix: &str) -> Result<Net, String> {
        let bad = || format!("'{prefix}': expected 127.<0-255>");
        let (a, b) = prefix.split_once('.').ok_or_else(bad)?;
        let b: u8 = b.parse().map_err(|_| bad())?;
        if a != "127" {
            return Err(bad());
        }
        Ok(Net {
            lb: Ipv4Addr::new(127, b, 0, 1),
            nodes: [12, 13, 14].map(|d| Ipv4Addr::new(127, b, 1, d)),
        })
    }

    pub fn https(&self) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(self.lb), 10443)
    }

    pub fn data(&self, i: usize) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(self.nodes[i % 3]), 30080)
    }

    pub fn health(&self, i: usize) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(self.nodes[i % 3]), 30180)
    }
}

/// The seed config moved onto `net`, with `option redispatch` added to `defaults` when asked.
pub fn drill_config(seed: &str, net: &Net, redispatch: bool) -> String {
    let mut out = String::new();
    for line in seed.lines() {
        let mut l = line.replace("127.0.0.1:", &format!("{}:", net.lb));
        for (i, d) in [12, 13, 14].iter().enumerate() {
            l = l.replace(&format!("127.0.1.{d}:"), &format!("{}:", net.nodes[i]));
        }
        out.push_str(&l);
        out.push('\n');
        if redispatch && line.trim_start().starts_with("retries") {
            out.push_str("    option                  redispatch\n");
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The HTTPS client (HTTP/1.1 over rustls, one connection per request, like a curl loop).

#[derive(Debug)]
struct NoVerify(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for NoVerify {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        // The drill's certificate is a throwaway self-signed one; the handshake is what counts.
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// What one request ended with, as the client saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// A complete response.
    Status(u16),
    /// Reset, EOF, refused, a broken TLS session, a timeout or a cut body.
    ConnErr(&'static str),
}

#[derive(Clone)]
pub struct Client {
    cfg: Arc<rustls::ClientConfig>,
    addr: SocketAddr,
}

fn kind(e: &io::Error) -> &'static str {
    match e.kind() {
        io::ErrorKind::ConnectionReset | io::ErrorKind::ConnectionAborted => "reset",
        io::ErrorKind::UnexpectedEof => "eof",
        io::ErrorKind::ConnectionRefused => "refused",
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => "timeout",
        io::ErrorKind::InvalidData => "tls",
        _ => "other",
    }
}

impl Client {
    pub fn new(addr: SocketAddr) -> Result<Client, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerify(provider)))
            .with_no_client_auth();
        cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Client {
            cfg: Arc::new(cfg),
            addr,
        })
    }

    /// `GET path` on a new TLS connection; the body is read to its end (Content-Length or the
    /// last chunk) and dropped.
    pub fn get(&self, path: &str, timeout: Duration) -> Outcome {
        match self.try_get(path, timeout) {
            Ok(code) => Outcome::Status(code),
            Err(e) => Outcome::ConnErr(kind(&e)),
        }
    }

    fn try_get(&self, path: &str, timeout: Duration) -> io::Result<u16> {
        let tcp = TcpStream::connect_timeout(&self.addr, Duration::from_secs(5))?;
        tcp.set_read_timeout(Some(timeout))?;
        tcp.set_write_timeout(Some(timeout))?;
        let _ = tcp.set_nodelay(true);
        let name = rustls::pki_types::ServerName::try_from("localhost")
            .map_err(|e| io::Error::other(e.to_string()))?;
        let conn = rustls::ClientConnection::new(self.cfg.clone(), name)
            .map_err(|e| io::Error::other(e.to_string()))?;
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let req =
            format!("GET {path} HTTP/1.1\r\nhost: example.local\r\nconnection: close\r\n\r\n");
        tls.write_all(req.as_bytes())?;
        let mut r = BufReader::new(tls);
        let mut line = String::new();
        read_line(&mut r, &mut line)?;
        let code: u16 = line
            .split(' ')
            .nth(1)
            .and_then(|c| c.parse().ok())
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "bad status line"))?;
        let (mut len, mut chunked) = (None, false);
        loop {
            line.clear();
            read_line(&mut r, &mut line)?;
            let l = line.trim_end();
            if l.is_empty() {
                break;
            }
            if let Some((k, v)) = l.split_once(':') {
                let (k, v) = (k.trim(), v.trim());
                if k.eq_ignore_ascii_case("content-length") {
                    len = v.parse::<u64>().ok();
                } else if k.eq_ignore_ascii_case("transfer-encoding") {
                    chunked = v.eq_ignore_ascii_case("chunked");
                }
            }
        }
        if chunked {
            loop {
                line.clear();
                read_line(&mut r, &mut line)?;
                let size = u64::from_str_radix(line.trim().split(';').next().unwrap_or(""), 16)
                    .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk"))?;
                if size == 0 {
                    line.clear();
                    read_line(&mut r, &mut line)?;
                    return Ok(code);
                }
                io::copy(&mut (&mut r).take(size + 2), &mut io::sink()).and_then(|n| {
                    if n == size + 2 {
                        Ok(())
                    } else {
                        Err(io::ErrorKind::UnexpectedEof.into())
                    }
                })?;
            }
        }
        match len {
            Some(n) => {
                let got = io::copy(&mut (&mut r).take(n), &mut io::sink())?;
                if got < n {
                    return Err(io::ErrorKind::UnexpectedEof.into());
                }
            }
            None => {
                io::copy(&mut r, &mut io::sink())?;
            }
        }
        Ok(code)
    }
}

/// A line that must end with LF; EOF first is an error.
fn read_line(r: &mut impl BufRead, into: &mut String) -> io::Result<()> {
    if r.read_line(into)? == 0 || !into.ends_with('\n') {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Load: a fixed request rate plus a few long streams.

#[derive(Clone, Debug, Default)]
pub struct LoadReport {
    pub sent: u64,
    pub statuses: BTreeMap<u16, u64>,
    pub conn_errs: BTreeMap<&'static str, u64>,
    /// Latency of every request that got a complete response, in microseconds.
    pub latencies_us: Vec<u64>,
    pub streams_ok: u64,
    /// Streams that did not end with their last chunk and a 200.
    pub streams_cut: BTreeMap<String, u64>,
}

impl LoadReport {
    pub fn fivexx(&self) -> u64 {
        self.statuses.range(500..).map(|(_, n)| n).sum()
    }

    pub fn conn_err(&self) -> u64 {
        self.conn_errs.values().sum()
    }

    pub fn streams_cut_total(&self) -> u64 {
        self.streams_cut.values().sum()
    }

    /// Percentile `p` (0–100) of the latencies, in milliseconds.
    pub fn percentile_ms(&self, p: f64) -> Option<f64> {
        let mut v = self.latencies_us.clone();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let idx = ((p / 100.0) * (v.len() - 1) as f64).round() as usize;
        v.get(idx).map(|us| *us as f64 / 1000.0)
    }
}

/// Runs load until `stop` is set; returns what was seen. Requests are scheduled at `rate`
/// per second from the start, whether earlier ones have finished or not.
pub struct Load {
    stop: Arc<AtomicBool>,
    report: Arc<Mutex<LoadReport>>,
    threads: Vec<JoinHandle<()>>,
}

const WORKERS: usize = 64;

impl Load {
    pub fn start(client: &Client, rate: u32, streams: usize, stream_secs: u64) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let report = Arc::new(Mutex::new(LoadReport::default()));
        let mut threads = Vec::new();
        let (tx, rx) = mpsc::channel::<()>();
        let rx = Arc::new(Mutex::new(rx));
        for _ in 0..WORKERS {
            let (rx, c, rep) = (rx.clone(), client.clone(), report.clone());
            threads.push(thread::spawn(move || {
                loop {
                    let job = lock(&rx).recv();
                    if job.is_err() {
                        return;
                    }
                    let t = Instant::now();
                    let out = c.get("/drill", Duration::from_secs(30));
                    let us = t.elapsed().as_micros() as u64;
                    let mut r = lock(&rep);
                    r.sent += 1;
                    match out {
                        Outcome::Status(code) => {
                            *r.statuses.entry(code).or_default() += 1;
                            r.latencies_us.push(us);
                        }
                        Outcome::ConnErr(k) => *r.conn_errs.entry(k).or_default() += 1,
                    }
                }
            }));
        }
        let st = stop.clone();
        threads.push(thread::spawn(move || {
            let start = Instant::now();
            let period = Duration::from_secs_f64(1.0 / f64::from(rate.max(1)));
            let mut next = start;
            while !st.load(Ordering::SeqCst) {
                let now = Instant::now();
                if now < next {
                    thread::sleep(next - now);
                    continue;
                }
                if tx.send(()).is_err() {
                    return;
                }
                next += period;
            }
            // Dropping tx ends the workers once the queue is empty.
        }));
        for i in 0..streams {
            let (c, rep, st) = (client.clone(), report.clone(), stop.clone());
            threads.push(thread::spawn(move || {
                // Staggered so the streams do not all land on the same node.
                thread::sleep(Duration::from_millis(300 * i as u64));
                while !st.load(Ordering::SeqCst) {
                    let path = format!("/stream?seconds={stream_secs}");
                    let out = c.get(&path, Duration::from_secs(stream_secs + 30));
                    let mut r = lock(&rep);
                    match out {
                        Outcome::Status(200) => r.streams_ok += 1,
                        Outcome::Status(code) => {
                            *r.streams_cut.entry(code.to_string()).or_default() += 1
                        }
                        Outcome::ConnErr(k) => {
                            *r.streams_cut.entry(k.to_string()).or_default() += 1
                        }
                    }
                }
            }));
        }
        Load {
            stop,
            report,
            threads,
        }
    }

    /// Stops scheduling, waits for what is in flight (streams end on their own).
    pub fn finish(self) -> LoadReport {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads {
            let _ = t.join();
        }
        lock(&self.report).clone()
    }
}

// ---------------------------------------------------------------------------------------------
// The balancer's log.

/// The termination state (`%tsc`, 4 characters) of an httplog line of `frontend`, if it is one.
pub fn termination_state<'a>(line: &'a str, frontend: &str) -> Option<&'a str> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let fe = w.get(2)?;
    if fe.trim_end_matches('~') != frontend {
        return None;
    }
    let tsc = *w.get(9)?;
    (tsc.len() == 4 && w.get(3)?.contains('/')).then_some(tsc)
}

#[derive(Clone, Debug, Default)]
pub struct LogSummary {
    /// Lines of the 443 frontend.
    pub sessions: u64,
    /// Termination states other than `----`, with their counts.
    pub states: BTreeMap<String, u64>,
    /// Sessions killed because their server went DOWN (`D` first).
    pub d_coded: u64,
    /// "Server istio-http-backend/… is DOWN" / "is UP" lines.
    pub downs: u64,
    pub ups: u64,
}

pub fn summarize_log(lines: &[String]) -> LogSummary {
    let mut s = LogSummary::default();
    for l in lines {
        if let Some(tsc) = termination_state(l, "istio-https-l7") {
            s.sessions += 1;
            if tsc != "----" {
                *s.states.entry(tsc.to_string()).or_default() += 1;
            }
            if tsc.starts_with('D') {
                s.d_coded += 1;
            }
        } else if l.starts_with("Server istio-http-backend/") {
            // The log line; the same text also comes as an [ALERT]/[WARNING] on stderr.
            if l.contains(" is DOWN") {
                s.downs += 1;
            } else if l.contains(" is UP") {
                s.ups += 1;
            }
        }
    }
    s
}

// ---------------------------------------------------------------------------------------------
// One drill run.

#[derive(Clone, Debug)]
pub struct Spec {
    pub mode: Mode,
    pub redispatch: bool,
    /// Load duration; extended when the rollout takes longer.
    pub duration: Duration,
    pub rate: u32,
    /// How many nodes the rollout replaces, in order master1, worker1, worker2.
    pub restarts: usize,
    pub streams: usize,
    pub stream_secs: u64,
    /// Load before the first SIGTERM.
    pub warmup: Duration,
    /// From a pod's exit to its replacement's start (longer than the detection window, so the
    /// balancer sees the node go DOWN, as with a pod that takes seconds to start).
    pub replace_after: Duration,
    pub net: Net,
}

#[derive(Clone, Debug)]
pub struct RunResult {
    pub load: LoadReport,
    pub log: LogSummary,
    pub timeline: Vec<String>,
    pub log_lines: Vec<String>,
}

/// Runs the balancer `cmd` (program and its flags; `-f <cfg>` is added) on the seed config
/// moved to `spec.net`, the pods, the load and the rollout. `rundir` receives the config
/// (`drill.cfg`), the admin socket and the balancer's output (`balancer.log`).
pub fn run(
    mut cmd: Command,
    seed: &str,
    cert: &Path,
    rundir: &Path,
    spec: &Spec,
) -> Result<RunResult, String> {
    let cfg = drill_config(seed, &spec.net, spec.redispatch);
    let cfg_path = rundir.join("drill.cfg");
    std::fs::write(&cfg_path, cfg).map_err(|e| format!("{}: {e}", cfg_path.display()))?;
    let _ = std::fs::remove_file(rundir.join("admin.sock"));

    let mut pods: Vec<Pod> = Vec::new();
    for i in 0..3 {
        pods.push(start_pod(&spec.net, i)?);
    }

    let t0 = Instant::now();
    let mut timeline = Vec::new();
    let mut note =
        |what: String| timeline.push(format!("{:6.2}s {what}", t0.elapsed().as_secs_f64()));

    cmd.arg("-f")
        .arg(&cfg_path)
        .env("CERT", cert)
        .env("RUNDIR", rundir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = Balancer::spawn(cmd)?;
    wait_listening(&mut child, spec.net.https())?;
    // Every server has been checked once: the balancer is past its start-up.
    let checked = wait(Duration::from_secs(10), || {
        pods.iter().all(|p| p.health_ok() >= 1)
    });
    if !checked {
        return Err("the balancer does not health-check the pods".into());
    }
    note("balancer up, load starts".into());

    let client = Client::new(spec.net.https())?;
    let load = Load::start(&client, spec.rate, spec.streams, spec.stream_secs);
    thread::sleep(spec.warmup);

    let plan = spec.mode.plan();
    for i in 0..spec.restarts.min(3) {
        let name = NODE_NAMES[i];
        note(format!("{name}: SIGTERM ({} preStop)", spec.mode.name()));
        let Some(pod) = pods.get_mut(i) else { break };
        pod.terminate(plan);
        note(format!("{name}: CLOSED (data and health gone)"));
        thread::sleep(spec.replace_after);
        let fresh = start_pod(&spec.net, i)?;
        note(format!("{name}: replacement OPEN"));
        // rise 2: the balancer marks it UP on the second good check.
        if !wait(Duration::from_secs(15), || fresh.health_ok() >= 2) {
            note(format!("{name}: replacement not checked twice in 15 s"));
        }
        thread::sleep(Duration::from_millis(300));
        note(format!("{name}: replacement healthy"));
        pods[i] = fresh;
    }
    let end = t0 + spec.warmup + spec.duration.max(Duration::from_secs(1));
    let tail = Instant::now() + Duration::from_secs(2);
    let until = end.max(tail);
    if until > end {
        note("rollout outlasted the duration: load extended".into());
    }
    thread::sleep(until.saturating_duration_since(Instant::now()));
    note("load stops".into());
    let load = load.finish();
    // Log lines are written when sessions end; give the writer a moment.
    thread::sleep(Duration::from_millis(500));
    let lines = child.stop();
    let _ = std::fs::write(rundir.join("balancer.log"), lines.join("\n") + "\n");
    Ok(RunResult {
        load,
        log: summarize_log(&lines),
        timeline,
        log_lines: lines,
    })
}

fn start_pod(net: &Net, i: usize) -> Result<Pod, String> {
    let name = NODE_NAMES[i % 3];
    // The old listener may still be closing: retry the bind for a moment.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        match Pod::start(name, net.data(i), net.health(i)) {
            Ok(p) => return Ok(p),
            Err(e) if Instant::now() > deadline => {
                return Err(format!("pod {name} on {}: {e}", net.data(i)));
            }
            Err(_) => thread::sleep(Duration::from_millis(50)),
        }
    }
}

fn wait(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while !cond() {
        if Instant::now() > deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(20));
    }
    true
}

struct Balancer {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
    readers: Vec<JoinHandle<()>>,
}

impl Balancer {
    fn spawn(mut cmd: Command) -> Result<Balancer, String> {
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {:?}: {e}", cmd.get_program()))?;
        let lines = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        if let Some(out) = child.stdout.take() {
            readers.push(capture(out, lines.clone()));
        }
        if let Some(err) = child.stderr.take() {
            readers.push(capture(err, lines.clone()));
        }
        Ok(Balancer {
            child,
            lines,
            readers,
        })
    }

    fn stop(mut self) -> Vec<String> {
        let _ = self.child.kill();
        let _ = self.child.wait();
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
        lock(&self.lines).clone()
    }
}

impl Drop for Balancer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn capture(r: impl Read + Send + 'static, into: Arc<Mutex<Vec<String>>>) -> JoinHandle<()> {
    thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            lock(&into).push(line);
        }
    })
}

fn wait_listening(b: &mut Balancer, addr: SocketAddr) -> Result<(), String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return Ok(());
        }
        if let Ok(Some(st)) = b.child.try_wait() {
            thread::sleep(Duration::from_millis(100));
            return Err(format!(
                "the balancer exited ({st}):\n{}",
                lock(&b.lines).join("\n")
            ));
        }
        if Instant::now() > deadline {
            return Err(format!(
                "the balancer does not listen on {addr}:\n{}",
                lock(&b.lines).join("\n")
            ));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gate_walks_the_rollout() {
        let g = Gate::Open;
        assert_eq!(g.on(GateEvent::SignalLb), None);
        let g = g.on(GateEvent::Sigterm).unwrap();
        assert_eq!(
            (g, g.health_status(), g.data_status()),
            (Gate::Draining, Some(200), Some(200))
        );
        let g = g.on(GateEvent::SignalLb).unwrap();
        assert_eq!(
            (g, g.health_status(), g.data_status()),
            (Gate::Closing, Some(503), Some(200))
        );
        assert!(!g.keep_alive());
        let g = g.on(GateEvent::Exit).unwrap();
        assert_eq!(
            (g, g.health_status(), g.data_status()),
            (Gate::Closed, None, None)
        );
        assert_eq!(g.on(GateEvent::Sigterm), None);
        assert_eq!(Gate::Open.on(GateEvent::Failure), Some(Gate::Fault));
        assert_eq!(Gate::Fault.health_status(), Some(500));
        assert_eq!(Gate::Fault.on(GateEvent::Recovered), Some(Gate::Open));
    }

    #[test]
    fn net_moves_the_seed_addresses() {
        let n = Net::parse("127.61").unwrap();
        assert_eq!(n.https().to_string(), "127.61.0.1:10443");
        assert_eq!(n.data(1).to_string(), "127.61.1.13:30080");
        assert_eq!(n.health(2).to_string(), "127.61.1.14:30180");
        assert_eq!(
            Net::parse("127.0").unwrap().https().to_string(),
            "127.0.0.1:10443"
        );
        assert!(Net::parse("10.0").is_err());
        assert!(Net::parse("127.256").is_err());
        let seed = "defaults\n    retries                 3\nfrontend f\n    bind 127.0.0.1:10443 ssl\n    \
                    server worker1 127.0.1.13:30080 check port 30180\n";
        assert_eq!(
            drill_config(seed, &n, true),
            "defaults\n    retries                 3\n    option                  redispatch\n\
             frontend f\n    bind 127.61.0.1:10443 ssl\n    \
             server worker1 127.61.1.13:30080 check port 30180\n"
        );
        assert!(!drill_config(seed, &n, false).contains("redispatch"));
    }

    #[test]
    fn reads_termination_states() {
        let lines: Vec<String> = [
            "127.0.0.1:5 [30/Nov/2025:09:11:00.123] istio-https-l7~ istio-http-backend/worker1 \
             0/0/0/-1/4001 502 209 - - DH-- 6/6/5/1/0 0/0 \"GET /slow HTTP/1.1\"",
            "127.0.0.1:6 [30/Nov/2025:09:11:00.123] istio-https-l7~ istio-http-backend/master1 \
             0/0/3001/-1/3001 503 217 - - SC-- 6/6/5/1/3 0/0 \"GET /drill HTTP/1.1\"",
            "127.0.0.1:7 [30/Nov/2025:09:11:00.123] istio-https-l7~ istio-http-backend/worker2 \
             0/0/0/1/1 200 150 - - ---- 6/6/5/1/0 0/0 \"GET /drill HTTP/1.1\"",
            "127.0.0.1:8 [30/Nov/2025:09:11:00.123] stats stats/<STATS> 0/0/0/1/1 200 150 - - LR-- 1/1/0/0/0 0/0 \"GET / HTTP/1.1\"",
            "[WARNING]  (1) : Server istio-http-backend/master1 is DOWN, reason: Layer4 connection problem",
            "Server istio-http-backend/master1 is DOWN, reason: Layer4 connection problem",
            "Server istio-http-backend/master1 is UP, reason: Layer7 check passed",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(termination_state(&lines[0], "istio-https-l7"), Some("DH--"));
        assert_eq!(termination_state(&lines[3], "istio-https-l7"), None);
        let s = summarize_log(&lines);
        assert_eq!((s.sessions, s.d_coded, s.downs, s.ups), (3, 1, 1, 1));
        assert_eq!(
            s.states.into_iter().collect::<Vec<_>>(),
            vec![("DH--".to_string(), 1), ("SC--".to_string(), 1)]
        );
    }
}
