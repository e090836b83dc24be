//! `xtask bench-load <kind> …`: the load clients the bench needs that no packaged tool does
//! right, run as a separate (pinnable) process. Each prints one result line,
//! `ops=N secs=S errors=E [p50_us= p99_us= p999_us=]` (read by [`super::parse::load_line`];
//! `rate` adds the failures by cause: `refused= dropped= status=`).
//!
//! - `tls`: TLS 1.3 full handshakes, one `Connection: close` request each. Resumption is off
//!   (wrk and h2load resume sessions, which would measure something else); every handshake is
//!   checked to be a full one. The client skips certificate and signature checks to stay light:
//!   the server's work (ECDHE + ECDSA signature) is unchanged.
//! - `pingpong`: 64-byte messages echoed back, one in flight per connection.
//! - `rate`: open-loop HTTP/1.1 keep-alive at a fixed rate; latency counts from the time each
//!   request was due, so a stall delays (and is charged to) the requests queued behind it.
//!   `rate-close`: the same with one request per connection (`Connection: close`).
//! - `idle`: opens N keep-alive connections, one request each, prints the result line and
//!   holds them until stdin closes.
//! - `echo`: the echo server behind the ping-pong frontends (runs until killed).

use crate::util::Result;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: bench\r\n\r\n";
const REQUEST_CLOSE: &[u8] = b"GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n";
const PING: [u8; 64] = [b'p'; 64];

#[derive(Debug)]
struct Args {
    addr: Option<SocketAddr>,
    conns: usize,
    secs: f64,
    rate: f64,
}

fn parse_args(args: &[String]) -> Result<Args> {
    let mut a = Args {
        addr: None,
        conns: 1,
        secs: 1.0,
        rate: 0.0,
    };
    let mut it = args.iter();
    while let Some(k) = it.next() {
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        let bad = || format!("bad value '{v}' for {k}");
        match k.as_str() {
            "--addr" | "--listen" => a.addr = Some(v.parse().map_err(|_| bad())?),
            "--conns" => a.conns = v.parse().ok().filter(|n| *n > 0).ok_or_else(bad)?,
            "--duration" => a.secs = v.parse().ok().filter(|s| *s > 0.0).ok_or_else(bad)?,
            "--rate" => a.rate = v.parse().ok().filter(|r| *r > 0.0).ok_or_else(bad)?,
            _ => return Err(format!("unknown option '{k}'")),
        }
    }
    Ok(a)
}

pub fn run(args: &[String]) -> Result {
    let (kind, rest) = args.split_first().ok_or(
        "usage: xtask bench-load tls|pingpong|rate|rate-close|idle|echo|syn-flood|connects [options]",
    )?;
    if let Some(r) = super::flood::client(kind, rest) {
        return r;
    }
    let a = parse_args(rest)?;
    let addr = a.addr.ok_or("--addr is required")?;
    match kind.as_str() {
        "echo" => echo(addr),
        "tls" => closed_loop(&a, addr, tls_client()?, tls_once),
        "pingpong" => closed_loop(&a, addr, (), pingpong),
        "rate" => rate(&a, addr, false),
        "rate-close" => rate(&a, addr, true),
        "idle" => idle(&a, addr),
        other => Err(format!("unknown load '{other}'")),
    }
}

fn echo(addr: SocketAddr) -> Result {
    let listener = TcpListener::bind(addr).map_err(|e| format!("bind {addr}: {e}"))?;
    for stream in listener.incoming().flatten() {
        std::thread::spawn(move || {
            let _ = stream.set_nodelay(true);
            let Ok(mut w) = stream.try_clone() else {
                return;
            };
            let mut r = stream;
            let _ = std::io::copy(&mut r, &mut w);
        });
    }
    Ok(())
}

/// `conns` threads each repeating `op` until the duration is over; an error counts and the
/// thread goes on (`op` reconnects as it needs).
fn closed_loop<C: Clone + Send + 'static>(
    a: &Args,
    addr: SocketAddr,
    ctx: C,
    op: fn(&C, SocketAddr, &mut Option<TcpStream>) -> std::io::Result<()>,
) -> Result {
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let threads: Vec<_> = (0..a.conns)
        .map(|_| {
            let (stop, ctx) = (stop.clone(), ctx.clone());
            std::thread::spawn(move || {
                let (mut ops, mut errors) = (0u64, 0u64);
                let mut conn = None;
                while !stop.load(Ordering::Relaxed) {
                    match op(&ctx, addr, &mut conn) {
                        Ok(()) => ops += 1,
                        Err(e) => {
                            if errors == 0 {
                                eprintln!("first error: {e}");
                            }
                            errors += 1;
                            conn = None;
                            // A refused connect must not spin the load core.
                            std::thread::sleep(Duration::from_millis(1));
                        }
                    }
                }
                (ops, errors)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(a.secs));
    stop.store(true, Ordering::Relaxed);
    let secs = started.elapsed().as_secs_f64();
    let (mut ops, mut errors) = (0, 0);
    for t in threads {
        let (o, e) = t.join().map_err(|_| "load thread panicked")?;
        ops += o;
        errors += e;
    }
    println!("ops={ops} secs={secs:.3} errors={errors}");
    Ok(())
}

fn pingpong(_: &(), addr: SocketAddr, conn: &mut Option<TcpStream>) -> std::io::Result<()> {
    if conn.is_none() {
        let s = TcpStream::connect(addr)?;
        s.set_nodelay(true)?;
        *conn = Some(s);
    }
    let Some(s) = conn.as_mut() else {
        return Ok(());
    };
    s.write_all(&PING)?;
    let mut buf = [0u8; 64];
    s.read_exact(&mut buf)?;
    Ok(())
}

mod insecure {
    use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
    use rustls::crypto::CryptoProvider;
    use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
    use rustls::{DigitallySignedStruct, Error, SignatureScheme};
    use std::sync::Arc;

    /// Accepts any certificate and signature: the load generator spends nothing on checks.
    #[derive(Debug)]
    pub struct AnyCert(pub Arc<CryptoProvider>);

    impl ServerCertVerifier for AnyCert {
        fn verify_server_cert(
            &self,
            _: &CertificateDer<'_>,
            _: &[CertificateDer<'_>],
            _: &ServerName<'_>,
            _: &[u8],
            _: UnixTime,
        ) -> Result<ServerCertVerified, Error> {
            Ok(ServerCertVerified::assertion())
        }
        fn verify_tls12_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, Error> {
            Ok(HandshakeSignatureValid::assertion())
        }
        fn verify_tls13_signature(
            &self,
            _: &[u8],
            _: &CertificateDer<'_>,
            _: &DigitallySignedStruct,
        ) -> Result<HandshakeSignatureValid, Error> {
            Ok(HandshakeSignatureValid::assertion())
        }
        fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
            self.0.signature_verification_algorithms.supported_schemes()
        }
    }
}

fn tls_client() -> Result<Arc<rustls::ClientConfig>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(insecure::AnyCert(provider)))
        .with_no_client_auth();
    cfg.resumption = rustls::client::Resumption::disabled();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

fn tls_once(
    cfg: &Arc<rustls::ClientConfig>,
    addr: SocketAddr,
    _: &mut Option<TcpStream>,
) -> std::io::Result<()> {
    let tcp = TcpStream::connect(addr)?;
    tcp.set_nodelay(true)?;
    let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
    let conn = rustls::ClientConnection::new(cfg.clone(), name).map_err(std::io::Error::other)?;
    let mut s = rustls::StreamOwned::new(conn, tcp);
    s.write_all(REQUEST_CLOSE)?;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(buf.get(..n).unwrap_or_default()),
            // A close without close_notify still ends a complete answer.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => break,
            Err(e) => return Err(e),
        }
    }
    if !matches!(
        s.conn.handshake_kind(),
        Some(rustls::HandshakeKind::Full | rustls::HandshakeKind::FullWithHelloRetryRequest)
    ) {
        return Err(std::io::Error::other("not a full handshake"));
    }
    if !got.starts_with(b"HTTP/1.1 200") {
        return Err(std::io::Error::other("no 200 answer"));
    }
    Ok(())
}

/// What a response said that the client acts on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Reply {
    status: u16,
    /// The server closes the connection after this response (`Connection: close`, or HTTP/1.0
    /// without keep-alive): the next request needs a new connection and is no failure.
    close: bool,
}

/// Whether a response ends its connection: `Connection` tokens win, else the version's default.
fn closes(version: &str, connection: &[&str]) -> bool {
    let token = |t: &str| {
        connection
            .iter()
            .flat_map(|v| v.split(','))
            .any(|x| x.trim().eq_ignore_ascii_case(t))
    };
    if token("close") {
        return true;
    }
    version == "HTTP/1.0" && !token("keep-alive")
}

/// Reads one HTTP/1.1 response with a Content-Length body.
fn read_response(r: &mut BufReader<TcpStream>) -> std::io::Result<Reply> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let mut words = line.split_whitespace();
    let version = words.next().unwrap_or("").to_string();
    let status = words.next().and_then(|c| c.parse().ok()).unwrap_or(0);
    let mut length = 0usize;
    let mut connection = Vec::new();
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            if k.eq_ignore_ascii_case("content-length") {
                length = v.trim().parse().unwrap_or(0);
            } else if k.eq_ignore_ascii_case("connection") {
                connection.push(v.trim().to_string());
            }
        }
    }
    let body = std::io::copy(&mut r.by_ref().take(length as u64), &mut std::io::sink())?;
    if body < length as u64 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    let connection: Vec<&str> = connection.iter().map(String::as_str).collect();
    Ok(Reply {
        status,
        close: closes(&version, &connection),
    })
}

/// One request; a whole 200 is success, anything else (no answer, another status) a failure.
fn request(r: &mut BufReader<TcpStream>, req: &[u8]) -> std::io::Result<Reply> {
    r.get_mut().write_all(req)?;
    match read_response(r)? {
        reply @ Reply { status: 200, .. } => Ok(reply),
        Reply { status, .. } => Err(std::io::Error::other(format!("status {status}"))),
    }
}

/// A request stuck longer than this counts as failed (a proxy that hangs must not hang the bench).
const REPLY_TIMEOUT: Duration = Duration::from_secs(5);

fn connect_http(addr: SocketAddr) -> std::io::Result<BufReader<TcpStream>> {
    let s = TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(REPLY_TIMEOUT))?;
    Ok(BufReader::new(s))
}

fn rate(a: &Args, addr: SocketAddr, close: bool) -> Result {
    let (mut all, f) = open_loop(a, addr, close)?;
    all.sort_unstable();
    let p = |q: f64| percentile(&all, q);
    println!(
        "ops={} secs={:.3} errors={} p50_us={} p99_us={} p999_us={} refused={} dropped={} status={}",
        all.len(),
        a.secs,
        f.total(),
        p(0.50),
        p(0.99),
        p(0.999),
        f.refused,
        f.dropped,
        f.status
    );
    Ok(())
}

/// The failed requests of the open-loop client, by cause.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Failures {
    /// The connect failed (refused, reset).
    refused: u64,
    /// Sent, then the connection closed, reset or timed out before a whole answer.
    dropped: u64,
    /// Answered with another status than 200.
    status: u64,
}

impl Failures {
    fn total(&self) -> u64 {
        self.refused + self.dropped + self.status
    }

    fn add(&mut self, o: Failures) {
        self.refused += o.refused;
        self.dropped += o.dropped;
        self.status += o.status;
    }
}

/// The open-loop client: `conns` threads, each sending its share of `rate` requests per second
/// at fixed due times. Returns each successful request's latency from its due time (µs) and the
/// failed requests: a refused connect, a request whose connection closes or resets before a
/// whole answer, a non-200. A response with `Connection: close` is a success and the next
/// request opens a new connection; with `close`, every request has its own connection.
fn open_loop(a: &Args, addr: SocketAddr, close: bool) -> Result<(Vec<u64>, Failures)> {
    if a.rate <= 0.0 {
        return Err("--rate is required".into());
    }
    let req = if close { REQUEST_CLOSE } else { REQUEST };
    let interval = Duration::from_secs_f64(a.conns as f64 / a.rate);
    let start = Instant::now() + Duration::from_millis(50);
    let deadline = start + Duration::from_secs_f64(a.secs);
    let threads: Vec<_> = (0..a.conns)
        .map(|i| {
            let offset = interval.mul_f64(i as f64 / a.conns as f64);
            std::thread::spawn(move || {
                let mut lat_us = Vec::new();
                let mut f = Failures::default();
                let mut conn = if close { None } else { connect_http(addr).ok() };
                let mut due = start + offset;
                while due < deadline {
                    let now = Instant::now();
                    if now < due {
                        std::thread::sleep(due - now);
                    }
                    let c = match conn.as_mut() {
                        Some(c) => c,
                        None => match connect_http(addr) {
                            Ok(c) => conn.insert(c),
                            Err(_) => {
                                f.refused += 1;
                                due += interval;
                                continue;
                            }
                        },
                    };
                    let reply = c.get_mut().write_all(req).and_then(|()| read_response(c));
                    match reply {
                        Ok(r) if r.status == 200 => {
                            lat_us.push(due.elapsed().as_micros() as u64);
                            if r.close || close {
                                conn = None;
                            }
                        }
                        Ok(_) => {
                            f.status += 1;
                            conn = None;
                        }
                        Err(_) => {
                            f.dropped += 1;
                            conn = None;
                        }
                    }
                    due += interval;
                }
                (lat_us, f)
            })
        })
        .collect();
    let mut all = Vec::new();
    let mut failures = Failures::default();
    for t in threads {
        let (l, f) = t.join().map_err(|_| "load thread panicked")?;
        all.extend(l);
        failures.add(f);
    }
    Ok((all, failures))
}

/// The `q` quantile of sorted samples (nearest rank); 0 when there are none.
pub fn percentile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted
        .get(rank.clamp(1, sorted.len()) - 1)
        .copied()
        .unwrap_or(0)
}

/// Raises RLIMIT_NOFILE (soft and hard: we run as root in CI) so N sockets fit.
fn raise_nofile(want: u64) {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read or write the struct they are given.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) == 0 && r.rlim_cur < want {
            let up = libc::rlimit {
                rlim_cur: want,
                rlim_max: r.rlim_max.max(want),
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &up) != 0 {
                let soft = libc::rlimit {
                    rlim_cur: r.rlim_max,
                    rlim_max: r.rlim_max,
                };
                libc::setrlimit(libc::RLIMIT_NOFILE, &soft);
            }
        }
    }
}

fn idle(a: &Args, addr: SocketAddr) -> Result {
    raise_nofile(a.conns as u64 + 256);
    let started = Instant::now();
    let mut held = Vec::with_capacity(a.conns);
    let mut errors = 0u64;
    for _ in 0..a.conns {
        match connect_http(addr).and_then(|mut c| request(&mut c, REQUEST).map(|_| c)) {
            Ok(c) => held.push(c),
            Err(_) => errors += 1,
        }
    }
    println!(
        "ops={} secs={:.3} errors={errors}",
        held.len(),
        started.elapsed().as_secs_f64()
    );
    let _ = std::io::stdout().flush();
    // Hold until the bench has read the proxy's memory and closes our stdin.
    let _ = std::io::stdin().read_to_end(&mut Vec::new());
    drop(held);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_nearest_rank() {
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(percentile(&v, 0.5), 500);
        assert_eq!(percentile(&v, 0.99), 990);
        assert_eq!(percentile(&v, 0.999), 999);
        assert_eq!(percentile(&[7], 0.999), 7);
        assert_eq!(percentile(&[], 0.5), 0);
    }

    #[test]
    fn args() {
        let a = |v: &[&str]| parse_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let ok = a(&[
            "--addr",
            "127.0.0.1:80",
            "--conns",
            "8",
            "--duration",
            "1.5",
        ])
        .unwrap();
        assert_eq!(ok.addr, Some("127.0.0.1:80".parse().unwrap()));
        assert_eq!((ok.conns, ok.secs), (8, 1.5));
        assert_eq!(
            a(&["--conns", "0"]).unwrap_err(),
            "bad value '0' for --conns"
        );
        assert_eq!(a(&["--rate"]).unwrap_err(), "--rate needs a value");
        assert_eq!(a(&["--x", "1"]).unwrap_err(), "unknown option '--x'");
    }

    #[test]
    fn connection_close_is_read_from_the_response() {
        assert!(closes("HTTP/1.1", &["close"]));
        assert!(closes("HTTP/1.1", &["Upgrade, Close"]));
        assert!(!closes("HTTP/1.1", &[]));
        assert!(!closes("HTTP/1.1", &["keep-alive"]));
        assert!(!closes("HTTP/1.1", &["closed"]));
        assert!(closes("HTTP/1.0", &[]));
        assert!(!closes("HTTP/1.0", &["Keep-Alive"]));
    }

    /// A server on a fresh port: `serve` runs once per accepted connection.
    fn server(serve: fn(TcpStream)) -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming().flatten() {
                std::thread::spawn(move || serve(s));
            }
        });
        addr
    }

    fn read_head(s: &mut TcpStream) -> bool {
        let mut got = Vec::new();
        let mut b = [0u8; 1];
        while !got.ends_with(b"\r\n\r\n") {
            match s.read(&mut b) {
                Ok(1) => got.push(b[0]),
                _ => return false,
            }
        }
        true
    }

    /// 1 connection at 100 req/s for 0.2 s: 20 requests due.
    fn open_loop_20(addr: SocketAddr, close: bool) -> (usize, Failures) {
        let a = Args {
            addr: Some(addr),
            conns: 1,
            secs: 0.2,
            rate: 100.0,
        };
        let (lat, f) = open_loop(&a, addr, close).unwrap();
        (lat.len(), f)
    }

    #[test]
    fn open_loop_reconnects_after_connection_close_without_failing() {
        // Two answers per connection, the second with `Connection: close`, then a close.
        let addr = server(|mut s| {
            for last in [false, true] {
                if !read_head(&mut s) {
                    return;
                }
                let c = if last { "Connection: close\r\n" } else { "" };
                let _ = write!(s, "HTTP/1.1 200 OK\r\n{c}Content-Length: 2\r\n\r\nok");
            }
        });
        let none = Failures::default();
        assert_eq!(open_loop_20(addr, false), (20, none));
        assert_eq!(open_loop_20(addr, true), (20, none));
    }

    #[test]
    fn open_loop_counts_requests_closed_without_answer_and_refused_connects() {
        // Answers the first request of each connection, then closes on the second unanswered.
        let addr = server(|mut s| {
            if read_head(&mut s) {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            }
            let _ = read_head(&mut s);
        });
        let dropped = |n| Failures {
            dropped: n,
            ..Failures::default()
        };
        assert_eq!(open_loop_20(addr, false), (10, dropped(10)));
        // A body cut short is no answer either.
        let addr = server(|mut s| {
            if read_head(&mut s) {
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nok");
            }
        });
        assert_eq!(open_loop_20(addr, false), (0, dropped(20)));
        // A 503 is an answer, but a failed request.
        let addr = server(|mut s| {
            while read_head(&mut s) {
                let _ = s.write_all(b"HTTP/1.1 503 Busy\r\nContent-Length: 0\r\n\r\n");
            }
        });
        let status = Failures {
            status: 20,
            ..Failures::default()
        };
        assert_eq!(open_loop_20(addr, false), (0, status));
        let refused = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let refused_20 = Failures {
            refused: 20,
            ..Failures::default()
        };
        assert_eq!(open_loop_20(refused, false), (0, refused_20));
        assert_eq!(open_loop_20(refused, true), (0, refused_20));
        assert_eq!(refused_20.total(), 20);
    }

    /// A real exchange with the `pingpong` op against the echo server, and with
    /// `read_response` against a canned HTTP answer.
    #[test]
    fn pingpong_and_response_reader() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut s, _) = l.accept().unwrap();
            let mut buf = [0u8; 64];
            s.read_exact(&mut buf).unwrap();
            s.write_all(&buf).unwrap();
            let mut req = [0u8; REQUEST.len()];
            s.read_exact(&mut req).unwrap();
            s.write_all(b"HTTP/1.1 503 Busy\r\ncontent-length: 3\r\n\r\nabcHTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
                .unwrap();
        });
        let mut conn = None;
        pingpong(&(), addr, &mut conn).unwrap();
        let mut r = BufReader::new(conn.unwrap());
        assert_eq!(
            request(&mut r, REQUEST).unwrap_err().to_string(),
            "status 503"
        );
        assert_eq!(
            read_response(&mut r).unwrap(),
            Reply {
                status: 200,
                close: false
            }
        );
        assert_eq!(
            read_response(&mut r).unwrap_err().kind(),
            std::io::ErrorKind::UnexpectedEof
        );
    }
}
