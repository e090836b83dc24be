//! Fake backends for the integration tests and `cargo xtask demo`: std only (threads and
//! `std::net`), so the same file is compiled into both (`#[path = "support/backend.rs"] mod
//! backend;`).
//!
//! - [`HttpNode`]: HTTP/1.1 with keep-alive; records every request and answers by path (see
//!   [`HttpNode`] for the routes).
//! - [`HealthNode`]: `/health_check.html` → 200 or 503, switchable at run time.
//! - [`TcpEcho`]: echoes bytes and propagates a half-close.
//! - [`RefusingPort`], [`free_port`]: addresses that refuse or are free.
//!
//! Every server stops on drop: the accept loop is woken by a self-connect and every open
//! connection is shut down, so no thread outlives the test by more than a moment. Use only
//! 127.0.0.0/8 addresses (all of it is loopback on Linux: 127.0.1.12 binds without setup).
#![allow(dead_code)] // each test binary uses a different subset

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Largest request head accepted before answering 431.
const MAX_HEAD: usize = 64 * 1024;
/// How long `Drop` waits for the accept thread before leaving it behind.
const STOP_WAIT: Duration = Duration::from_secs(2);
/// Interval between two chunks of `/stream`.
const STREAM_TICK: Duration = Duration::from_millis(100);

// ---------------------------------------------------------------------------------------------
// Checksums and the exact bodies the routes serve, so tests can compute expected values.

/// FNV-1a 64-bit, streaming: the checksum reported by `POST`/`PUT` answers and recorded in
/// [`RequestRecord::body_sum`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fnv1a(u64);

impl Fnv1a {
    pub fn new() -> Self {
        Fnv1a(0xcbf2_9ce4_8422_2325)
    }

    pub fn update(&mut self, data: &[u8]) {
        for &b in data {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }

    pub fn finish(&self) -> u64 {
        self.0
    }
}

impl Default for Fnv1a {
    fn default() -> Self {
        Self::new()
    }
}

/// FNV-1a 64 of `data` in one call.
pub fn fnv1a64(data: &[u8]) -> u64 {
    let mut h = Fnv1a::new();
    h.update(data);
    h.finish()
}

/// Writes `size` bytes to `w`: `block` over and over, the last copy cut short. Returns the
/// FNV-1a 64 of what was written.
pub fn write_repeated(w: &mut impl Write, block: &[u8], size: usize) -> io::Result<u64> {
    let mut sum = Fnv1a::new();
    let mut sent = 0;
    while sent < size {
        let n = block.len().min(size - sent);
        w.write_all(&block[..n])?;
        sum.update(&block[..n]);
        sent += n;
    }
    Ok(sum.finish())
}

/// The body a `POST`/`PUT` of `body` is answered with: `len=<n> sum=<16 hex digits>\n`.
pub fn upload_answer(body: &[u8]) -> String {
    format!("len={} sum={:016x}\n", body.len(), fnv1a64(body))
}

/// Byte `i` of a `/size?bytes=N` body: `a`..`z` repeating.
pub fn size_byte(i: u64) -> u8 {
    b'a' + (i % 26) as u8
}

/// The whole body of `/size?bytes=n`.
pub fn size_body(n: usize) -> Vec<u8> {
    (0..n as u64).map(size_byte).collect()
}

/// Chunk `i` (from 0) of `/chunked?n=K`.
pub fn chunk_text(i: u64) -> String {
    format!("chunk {i}\n")
}

/// The de-chunked body of `/chunked?n=k`.
pub fn chunked_body(k: u64) -> String {
    (0..k).map(chunk_text).collect()
}

/// The body of the default route: `node=<name> path=<path>\n` (path includes the query).
pub fn default_body(name: &str, target: &str) -> String {
    format!("node={name} path={target}\n")
}

// ---------------------------------------------------------------------------------------------
// Addresses.

/// `127.0.0.1:port`.
pub fn lo(port: u16) -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, port))
}

/// A port on 127.0.0.1 that nothing listens on right now.
pub fn free_port() -> u16 {
    free_port_on(IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// A port on `ip` (a loopback address) that nothing listens on right now and that this test
/// process has not handed out before. The ports come from below the kernel's ephemeral range
/// (`ip_local_port_range`, 32768 up by default): a port the kernel offered to `bind(…:0)` and
/// that was then released could be offered again at once to a test server binding port 0, or
/// be the source port of an outgoing connection, and the proxy started on it afterwards would
/// fail to bind while its readiness probe reached the other socket (seen in CI: an echo server
/// answered on the port a receiver should have had). Another process may still take a port
/// before the caller binds it; on a test machine that race is rare enough.
pub fn free_port_on(ip: IpAddr) -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    // 22000..30000: below the ephemeral range, above the fixed ports tests name (10000-19000),
    // below the seed config's backend ports (30080, 30180, 31443).
    const LOW: u16 = 22_000;
    const SPAN: u16 = 8_000;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    let ephemeral_low = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    if ephemeral_low >= LOW + SPAN {
        // Sequential test processes start at different places, so a port in TIME_WAIT from the
        // previous one is rarely offered again.
        let start = (std::process::id() % u32::from(SPAN)) as u16;
        let _ = NEXT.compare_exchange(0, start + 1, Ordering::AcqRel, Ordering::Acquire);
        for _ in 0..SPAN {
            let n = NEXT.fetch_add(1, Ordering::AcqRel);
            let port = LOW + n % SPAN;
            if TcpListener::bind(SocketAddr::new(ip, port)).is_ok() {
                return port;
            }
        }
    }
    // A machine whose ephemeral range covers ours: the kernel's choice, not handed out twice.
    static GIVEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let mut port = 0;
    for _ in 0..64 {
        port = match TcpListener::bind(SocketAddr::new(ip, 0)).and_then(|l| l.local_addr()) {
            Ok(a) => a.port(),
            Err(e) => panic!("free_port_on({ip}): {e}"),
        };
        if !given.contains(&port) {
            break;
        }
    }
    given.push(port);
    port
}

/// Two [`HttpNode`]s named `n1` and `n2` on one port of the loopback addresses `a` and `b` (only
/// the address tells them apart), and that port.
pub fn node_pair(a: IpAddr, b: IpAddr) -> (HttpNode, HttpNode, u16) {
    for _ in 0..20 {
        let p = free_port_on(a);
        let Ok(na) = HttpNode::start(SocketAddr::new(a, p), HttpOpts::named("n1")) else {
            continue;
        };
        if let Ok(nb) = HttpNode::start(SocketAddr::new(b, p), HttpOpts::named("n2")) {
            return (na, nb, p);
        }
    }
    panic!("no port free on both {a} and {b}");
}

/// An address on 127.0.0.1 that refuses connections (RST on SYN): a port that was free a
/// moment ago and that this helper checked is refused.
#[derive(Debug)]
pub struct RefusingPort {
    addr: SocketAddr,
}

impl RefusingPort {
    pub fn new() -> io::Result<Self> {
        Self::on(IpAddr::V4(Ipv4Addr::LOCALHOST))
    }

    pub fn on(ip: IpAddr) -> io::Result<Self> {
        for _ in 0..20 {
            let addr = SocketAddr::new(ip, free_port_on(ip));
            match TcpStream::connect_timeout(&addr, Duration::from_millis(500)) {
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                    return Ok(RefusingPort { addr });
                }
                _ => continue,
            }
        }
        Err(io::Error::other("no refusing port found"))
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn port(&self) -> u16 {
        self.addr.port()
    }
}

// ---------------------------------------------------------------------------------------------
// The accept loop every server shares.

type Handler = Arc<dyn Fn(TcpStream, u64, &Arc<AtomicBool>) + Send + Sync>;

/// A listener with one thread per connection. Stopping wakes the blocking `accept` with a
/// self-connect, then shuts every open connection down so blocked reads return.
struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicU64>,
    open: Arc<Mutex<HashMap<u64, TcpStream>>>,
    accept_thread: Option<JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panicking connection thread must not take the whole fake backend down with it.
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Server {
    fn start(addr: SocketAddr, handler: Handler) -> io::Result<Server> {
        let listener = TcpListener::bind(addr)?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let accepted = Arc::new(AtomicU64::new(0));
        let open: Arc<Mutex<HashMap<u64, TcpStream>>> = Arc::new(Mutex::new(HashMap::new()));
        let (stop2, accepted2, open2) = (stop.clone(), accepted.clone(), open.clone());
        let accept_thread = thread::Builder::new()
            .name(format!("fake-{addr}"))
            .spawn(move || accept_loop(listener, handler, stop2, accepted2, open2))?;
        Ok(Server {
            addr,
            stop,
            accepted,
            open,
            accept_thread: Some(accept_thread),
        })
    }

    fn accepted(&self) -> u64 {
        self.accepted.load(Ordering::SeqCst)
    }

    fn open_connections(&self) -> usize {
        lock(&self.open).len()
    }

    /// Shuts down every connection open now (the listener keeps accepting).
    fn close_connections(&self) {
        for s in lock(&self.open).values() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    handler: Handler,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicU64>,
    open: Arc<Mutex<HashMap<u64, TcpStream>>>,
) {
    for incoming in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            break;
        }
        let stream = match incoming {
            Ok(s) => s,
            Err(_) => {
                // EMFILE and friends: back off instead of spinning.
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        let id = accepted.fetch_add(1, Ordering::SeqCst) + 1;
        if let Ok(clone) = stream.try_clone() {
            lock(&open).insert(id, clone);
        }
        let (handler, stop, conns) = (handler.clone(), stop.clone(), open.clone());
        let spawned = thread::Builder::new()
            .name(format!("fake-conn-{id}"))
            .spawn(move || {
                handler(stream, id, &stop);
                lock(&conns).remove(&id);
            });
        if spawned.is_err() {
            lock(&open).remove(&id);
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        let mut wake = self.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(IpAddr::V4(Ipv4Addr::LOCALHOST));
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_millis(500));
        if let Some(t) = self.accept_thread.take() {
            let deadline = Instant::now() + STOP_WAIT;
            while !t.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(2));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
        // The accept thread is gone, so no connection registers after this sweep.
        for (_, s) in lock(&self.open).drain() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP/1.1 reading: a connection with a carry-over buffer.

struct Conn {
    s: TcpStream,
    buf: Vec<u8>,
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

impl Conn {
    fn new(s: TcpStream) -> Self {
        Conn {
            s,
            buf: Vec::with_capacity(16 * 1024),
        }
    }

    /// Reads more bytes into the buffer; returns how many (0 at EOF).
    fn fill(&mut self) -> io::Result<usize> {
        let mut tmp = [0u8; 16 * 1024];
        let n = self.s.read(&mut tmp)?;
        self.buf.extend_from_slice(&tmp[..n]);
        Ok(n)
    }

    /// The next request head including its blank line, `None` on a clean EOF between requests.
    fn read_head(&mut self) -> io::Result<Option<Vec<u8>>> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n\r\n") {
                return Ok(Some(self.buf.drain(..i + 4).collect()));
            }
            if self.buf.len() > MAX_HEAD {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "head too large"));
            }
            if self.fill()? == 0 {
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// One CRLF-terminated line without its CRLF.
    fn read_line(&mut self) -> io::Result<Vec<u8>> {
        loop {
            if let Some(i) = find(&self.buf, b"\r\n") {
                let mut line: Vec<u8> = self.buf.drain(..i + 2).collect();
                line.truncate(i);
                return Ok(line);
            }
            if self.buf.len() > 8192 {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "line too long"));
            }
            if self.fill()? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
    }

    /// Consumes exactly `n` body bytes into `sum` without holding them all.
    fn consume(&mut self, mut n: u64, sum: &mut Fnv1a) -> io::Result<()> {
        while n > 0 {
            if self.buf.is_empty() && self.fill()? == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
            let take = self.buf.len().min(usize::try_from(n).unwrap_or(usize::MAX));
            sum.update(&self.buf[..take]);
            self.buf.drain(..take);
            n -= take as u64;
        }
        Ok(())
    }

    /// Consumes a chunked body (and its trailers); returns its decoded length.
    fn consume_chunked(&mut self, sum: &mut Fnv1a) -> io::Result<u64> {
        let mut total = 0u64;
        loop {
            let line = self.read_line()?;
            let text = String::from_utf8_lossy(&line);
            let hex = text.split(';').next().unwrap_or("").trim();
            let size = u64::from_str_radix(hex, 16)
                .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad chunk size"))?;
            if size == 0 {
                while !self.read_line()?.is_empty() {}
                return Ok(total);
            }
            self.consume(size, sum)?;
            total += size;
            if !self.read_line()?.is_empty() {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "no CRLF after chunk",
                ));
            }
        }
    }
}

/// A parsed request head.
struct Req {
    head: Vec<u8>,
    method: String,
    target: String,
    http11: bool,
    headers: Vec<(String, String)>,
}

impl Req {
    fn parse(head: Vec<u8>) -> Option<Req> {
        let text = String::from_utf8_lossy(&head).into_owned();
        let mut lines = text.split("\r\n");
        let mut first = lines.next()?.split(' ');
        let method = first.next()?.to_string();
        let target = first.next()?.to_string();
        let version = first.next()?;
        if !version.starts_with("HTTP/1.") || method.is_empty() {
            return None;
        }
        let headers = lines
            .filter(|l| !l.is_empty())
            .filter_map(|l| {
                let (k, v) = l.split_once(':')?;
                Some((k.trim().to_ascii_lowercase(), v.trim().to_string()))
            })
            .collect();
        Some(Req {
            http11: version == "HTTP/1.1",
            head,
            method,
            target,
            headers,
        })
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    fn has_token(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(k, _)| k == name)
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }

    fn path(&self) -> &str {
        self.target.split('?').next().unwrap_or("")
    }

    fn query(&self, key: &str) -> Option<&str> {
        let (_, q) = self.target.split_once('?')?;
        q.split('&')
            .filter_map(|kv| kv.split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| v)
    }

    fn query_u64(&self, key: &str) -> u64 {
        self.query(key).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    fn keep_alive(&self) -> bool {
        if self.has_token("connection", "close") {
            false
        } else {
            self.http11 || self.has_token("connection", "keep-alive")
        }
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        101 => "Switching Protocols",
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        301 => "Moved Permanently",
        302 => "Found",
        304 => "Not Modified",
        400 => "Bad Request",
        403 => "Forbidden",
        404 => "Not Found",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Other",
    }
}

/// Writes a complete response with a Content-Length body (no body for HEAD, 204 and 304).
fn respond(
    s: &mut TcpStream,
    req_head_only: bool,
    code: u16,
    extra: &[(&str, String)],
    body: &[u8],
    keep_alive: bool,
) -> io::Result<()> {
    let mut head = format!("HTTP/1.1 {code} {}\r\n", reason(code));
    for (k, v) in extra {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let bodyless = code == 204 || code == 304;
    if !bodyless {
        head.push_str(&format!("content-length: {}\r\n", body.len()));
    }
    if !keep_alive {
        head.push_str("connection: close\r\n");
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    if !req_head_only && !bodyless {
        out.extend_from_slice(body);
    }
    s.write_all(&out)
}

fn sleep_unless_stopped(total: Duration, stop: &AtomicBool) {
    let deadline = Instant::now() + total;
    while !stop.load(Ordering::SeqCst) {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        thread::sleep((deadline - now).min(Duration::from_millis(20)));
    }
}

/// Copies everything read back to the writer; on read EOF shuts the write side down.
fn echo(s: &mut TcpStream, pending: &[u8], counter: &AtomicU64) -> io::Result<()> {
    if !pending.is_empty() {
        s.write_all(pending)?;
        counter.fetch_add(pending.len() as u64, Ordering::SeqCst);
    }
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = s.read(&mut buf)?;
        if n == 0 {
            s.flush()?;
            return s.shutdown(Shutdown::Write);
        }
        s.write_all(&buf[..n])?;
        counter.fetch_add(n as u64, Ordering::SeqCst);
    }
}

// ---------------------------------------------------------------------------------------------
// HttpNode.

/// Options of an [`HttpNode`].
#[derive(Clone, Debug)]
pub struct HttpOpts {
    /// Reported in bodies and in the `x-node` response header.
    pub name: String,
    /// When false every response carries `connection: close` and the connection is closed.
    pub keep_alive: bool,
}

impl HttpOpts {
    pub fn named(name: &str) -> Self {
        HttpOpts {
            name: name.to_string(),
            keep_alive: true,
        }
    }
}

impl Default for HttpOpts {
    fn default() -> Self {
        Self::named("node")
    }
}

/// One request as an [`HttpNode`] received it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestRecord {
    /// The head exactly as received, request line to blank line included.
    pub head: String,
    pub method: String,
    /// The request target (path and query) as sent.
    pub target: String,
    /// Decoded body length (after de-chunking).
    pub body_len: u64,
    /// FNV-1a 64 of the decoded body.
    pub body_sum: u64,
    /// Which accepted connection (1, 2, …) it came on.
    pub conn_id: u64,
}

impl RequestRecord {
    /// Value of the first header `name` (case-insensitive) in the recorded head.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.split("\r\n").skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

struct HttpShared {
    opts: HttpOpts,
    requests: Mutex<Vec<RequestRecord>>,
    ws_bytes: AtomicU64,
}

/// An HTTP/1.1 server with keep-alive that records every request. Routes (every response
/// carries `x-node: <name>` and `x-conn-id: <n>`):
///
/// | request | answer |
/// | --- | --- |
/// | `POST`/`PUT` anything | body consumed streaming (Content-Length or chunked); `len=<n> sum=<016x>\n` ([`upload_answer`]) |
/// | `/echo-headers` | body = the request head as received |
/// | `/size?bytes=N` | N bytes of [`size_body`], Content-Length |
/// | `/chunked?n=K` | K chunks of [`chunk_text`] |
/// | `/slow?ms=N` | the default answer after N ms |
/// | `/stream?seconds=N` | chunked, one `tick <i>\n` chunk every 100 ms for N seconds |
/// | `/status?code=N` | status N, body `status=N\n` |
/// | `GET /ws` + `Upgrade: websocket` | 101, then raw bytes echoed back until EOF |
/// | anything else | 200 `text/plain` [`default_body`] |
pub struct HttpNode {
    server: Server,
    shared: Arc<HttpShared>,
}

impl HttpNode {
    pub fn start(addr: SocketAddr, opts: HttpOpts) -> io::Result<HttpNode> {
        let shared = Arc::new(HttpShared {
            opts,
            requests: Mutex::new(Vec::new()),
            ws_bytes: AtomicU64::new(0),
        });
        let sh = shared.clone();
        let server = Server::start(
            addr,
            Arc::new(move |s, id, stop| {
                let _ = serve_http(s, id, &sh, stop);
            }),
        )?;
        Ok(HttpNode { server, shared })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    pub fn name(&self) -> &str {
        &self.shared.opts.name
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> u64 {
        self.server.accepted()
    }

    /// Connections open right now.
    pub fn open_connections(&self) -> usize {
        self.server.open_connections()
    }

    /// Shuts down every open connection (the node keeps accepting new ones).
    pub fn close_connections(&self) {
        self.server.close_connections()
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RequestRecord> {
        lock(&self.shared.requests).clone()
    }

    pub fn request_count(&self) -> usize {
        lock(&self.shared.requests).len()
    }

    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear()
    }

    /// Bytes echoed on upgraded (`/ws`) connections.
    pub fn ws_bytes(&self) -> u64 {
        self.shared.ws_bytes.load(Ordering::SeqCst)
    }

    /// Waits until at least `n` requests were recorded; false on timeout.
    pub fn wait_requests(&self, n: usize, timeout: Duration) -> bool {
        wait_until(timeout, || self.request_count() >= n)
    }
}

/// Polls `cond` every 5 ms until it holds (true) or `timeout` passes (false).
pub fn wait_until(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

fn serve_http(s: TcpStream, id: u64, sh: &HttpShared, stop: &AtomicBool) -> io::Result<()> {
    let _ = s.set_nodelay(true);
    let mut c = Conn::new(s);
    loop {
        let head = match c.read_head() {
            Ok(Some(h)) => h,
            Ok(None) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return respond(&mut c.s, false, 431, &[], b"", false);
            }
            Err(e) => return Err(e),
        };
        let Some(req) = Req::parse(head) else {
            return respond(&mut c.s, false, 400, &[], b"bad request\n", false);
        };
        let mut sum = Fnv1a::new();
        let chunked = req
            .header("transfer-encoding")
            .is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
        let body_len = if chunked {
            c.consume_chunked(&mut sum)?
        } else {
            let n = match req.header("content-length").map(str::parse::<u64>) {
                None => 0,
                Some(Ok(n)) => n,
                Some(Err(_)) => return respond(&mut c.s, false, 400, &[], b"bad length\n", false),
            };
            c.consume(n, &mut sum)?;
            n
        };
        lock(&sh.requests).push(RequestRecord {
            head: String::from_utf8_lossy(&req.head).into_owned(),
            method: req.method.clone(),
            target: req.target.clone(),
            body_len,
            body_sum: sum.finish(),
            conn_id: id,
        });

        let keep = sh.opts.keep_alive && req.keep_alive() && !stop.load(Ordering::SeqCst);
        let head_only = req.method == "HEAD";
        let base = vec![
            ("x-node", sh.opts.name.clone()),
            ("x-conn-id", id.to_string()),
        ];
        let mut text = base.clone();
        text.push(("content-type", "text/plain".to_string()));

        if req.method == "POST" || req.method == "PUT" {
            let body = format!("len={body_len} sum={:016x}\n", sum.finish());
            respond(&mut c.s, head_only, 200, &text, body.as_bytes(), keep)?;
        } else if req.path() == "/ws"
            && req.has_token("connection", "upgrade")
            && req.has_token("upgrade", "websocket")
        {
            let mut h = format!(
                "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nx-node: {}\r\n",
                sh.opts.name
            );
            if let Some(key) = req.header("sec-websocket-key") {
                h.push_str(&format!("sec-websocket-accept: {}\r\n", ws_accept(key)));
            }
            h.push_str("\r\n");
            c.s.write_all(h.as_bytes())?;
            let pending = std::mem::take(&mut c.buf);
            return echo(&mut c.s, &pending, &sh.ws_bytes);
        } else {
            match req.path() {
                "/echo-headers" => {
                    respond(&mut c.s, head_only, 200, &text, &req.head, keep)?;
                }
                "/size" => {
                    let n = req.query_u64("bytes");
                    let mut h = format!("HTTP/1.1 200 OK\r\ncontent-length: {n}\r\n");
                    for (k, v) in &base {
                        h.push_str(&format!("{k}: {v}\r\n"));
                    }
                    h.push_str("content-type: application/octet-stream\r\n");
                    if !keep {
                        h.push_str("connection: close\r\n");
                    }
                    h.push_str("\r\n");
                    c.s.write_all(h.as_bytes())?;
                    if !head_only {
                        let mut block = [0u8; 64 * 1024];
                        let mut sent = 0u64;
                        while sent < n {
                            let len = (n - sent).min(block.len() as u64) as usize;
                            for (j, b) in block.iter_mut().take(len).enumerate() {
                                *b = size_byte(sent + j as u64);
                            }
                            c.s.write_all(&block[..len])?;
                            sent += len as u64;
                        }
                    }
                }
                "/chunked" | "/stream" => {
                    let chunked_ok = req.http11;
                    let keep = keep && chunked_ok;
                    let mut h = String::from("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n");
                    for (k, v) in &base {
                        h.push_str(&format!("{k}: {v}\r\n"));
                    }
                    if chunked_ok {
                        h.push_str("transfer-encoding: chunked\r\n");
                    }
                    if !keep {
                        h.push_str("connection: close\r\n");
                    }
                    h.push_str("\r\n");
                    c.s.write_all(h.as_bytes())?;
                    if !head_only {
                        let mut put = |data: &[u8]| -> io::Result<()> {
                            if chunked_ok {
                                c.s.write_all(format!("{:x}\r\n", data.len()).as_bytes())?;
                                c.s.write_all(data)?;
                                c.s.write_all(b"\r\n")
                            } else {
                                c.s.write_all(data)
                            }
                        };
                        if req.path() == "/chunked" {
                            for i in 0..req.query_u64("n") {
                                put(chunk_text(i).as_bytes())?;
                            }
                        } else {
                            let end =
                                Instant::now() + Duration::from_secs(req.query_u64("seconds"));
                            let mut i = 0u64;
                            while Instant::now() < end && !stop.load(Ordering::SeqCst) {
                                put(format!("tick {i}\n").as_bytes())?;
                                i += 1;
                                sleep_unless_stopped(STREAM_TICK, stop);
                            }
                        }
                        if chunked_ok {
                            c.s.write_all(b"0\r\n\r\n")?;
                        }
                    }
                    if !keep {
                        return Ok(());
                    }
                }
                "/status" => {
                    let code = req
                        .query("code")
                        .and_then(|v| v.parse::<u16>().ok())
                        .filter(|c| (200..=599).contains(c))
                        .unwrap_or(400);
                    let body = format!("status={code}\n");
                    respond(&mut c.s, head_only, code, &text, body.as_bytes(), keep)?;
                }
                _ => {
                    if req.path() == "/slow" {
                        sleep_unless_stopped(Duration::from_millis(req.query_u64("ms")), stop);
                    }
                    let body = default_body(&sh.opts.name, &req.target);
                    respond(&mut c.s, head_only, 200, &text, body.as_bytes(), keep)?;
                }
            }
        }
        if !keep {
            let _ = c.s.shutdown(Shutdown::Write);
            return Ok(());
        }
    }
}

// ---------------------------------------------------------------------------------------------
// HealthNode.

/// Answers `GET /health_check.html` with 200 `OK\n` or 503 `DOWN\n` (any other path: 404).
pub struct HealthNode {
    server: Server,
    healthy: Arc<AtomicBool>,
    checks: Arc<AtomicU64>,
}

impl HealthNode {
    /// Starts healthy.
    pub fn start(addr: SocketAddr) -> io::Result<HealthNode> {
        let healthy = Arc::new(AtomicBool::new(true));
        let checks = Arc::new(AtomicU64::new(0));
        let (h, n) = (healthy.clone(), checks.clone());
        let server = Server::start(
            addr,
            Arc::new(move |s, _id, _stop| {
                let _ = serve_health(s, &h, &n);
            }),
        )?;
        Ok(HealthNode {
            server,
            healthy,
            checks,
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    pub fn set_healthy(&self, up: bool) {
        self.healthy.store(up, Ordering::SeqCst)
    }

    pub fn is_healthy(&self) -> bool {
        self.healthy.load(Ordering::SeqCst)
    }

    /// Requests for `/health_check.html` answered so far.
    pub fn checks(&self) -> u64 {
        self.checks.load(Ordering::SeqCst)
    }

    /// Connections accepted so far (a layer-4 check only connects).
    pub fn connections(&self) -> u64 {
        self.server.accepted()
    }
}

fn serve_health(s: TcpStream, healthy: &AtomicBool, checks: &AtomicU64) -> io::Result<()> {
    let mut c = Conn::new(s);
    while let Some(head) = c.read_head()? {
        let Some(req) = Req::parse(head) else {
            return respond(&mut c.s, false, 400, &[], b"bad request\n", false);
        };
        let keep = req.keep_alive();
        let head_only = req.method == "HEAD";
        let ctype = [("content-type", "text/plain".to_string())];
        if req.path() == "/health_check.html" {
            checks.fetch_add(1, Ordering::SeqCst);
            let (code, body): (u16, &[u8]) = if healthy.load(Ordering::SeqCst) {
                (200, b"OK\n")
            } else {
                (503, b"DOWN\n")
            };
            respond(&mut c.s, head_only, code, &ctype, body, keep)?;
        } else {
            respond(&mut c.s, head_only, 404, &ctype, b"not found\n", keep)?;
        }
        if !keep {
            return c.s.shutdown(Shutdown::Write);
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// TcpEcho.

/// Echoes every byte back. On the client's half-close (read EOF) it writes what is left, then
/// shuts down its own write side, so the client sees EOF only after all its bytes came back.
pub struct TcpEcho {
    server: Server,
    bytes: Arc<AtomicU64>,
}

impl TcpEcho {
    pub fn start(addr: SocketAddr) -> io::Result<TcpEcho> {
        let bytes = Arc::new(AtomicU64::new(0));
        let b = bytes.clone();
        let server = Server::start(
            addr,
            Arc::new(move |mut s, _id, _stop| {
                let _ = echo(&mut s, &[], &b);
            }),
        )?;
        Ok(TcpEcho { server, bytes })
    }

    pub fn addr(&self) -> SocketAddr {
        self.server.addr
    }

    pub fn connections(&self) -> u64 {
        self.server.accepted()
    }

    pub fn open_connections(&self) -> usize {
        self.server.open_connections()
    }

    /// Bytes echoed so far, all connections together.
    pub fn bytes_echoed(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }

    pub fn close_connections(&self) {
        self.server.close_connections()
    }
}

// ---------------------------------------------------------------------------------------------
// WebSocket accept key (RFC 6455 §4.2.2): base64(sha1(key + GUID)).

/// The `Sec-WebSocket-Accept` value for a `Sec-WebSocket-Key`.
pub fn ws_accept(key: &str) -> String {
    let mut input = key.trim().as_bytes().to_vec();
    input.extend_from_slice(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64(&sha1(&input))
}

fn sha1(data: &[u8]) -> [u8; 20] {
    let mut h: [u32; 5] = [
        0x6745_2301,
        0xEFCD_AB89,
        0x98BA_DCFE,
        0x1032_5476,
        0xC3D2_E1F0,
    ];
    let mut msg = data.to_vec();
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&((data.len() as u64) * 8).to_be_bytes());
    for block in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in block.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A82_7999),
                20..=39 => (b ^ c ^ d, 0x6ED9_EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1B_BCDC),
                _ => (b ^ c ^ d, 0xCA62_C1D6),
            };
            let t = a
                .rotate_left(5)
                .wrapping_add(f)
                .wrapping_add(e)
                .wrapping_add(k)
                .wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    let mut out = [0u8; 20];
    for (o, x) in out.chunks_exact_mut(4).zip(h) {
        o.copy_from_slice(&x.to_be_bytes());
    }
    out
}

fn base64(data: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for group in data.chunks(3) {
        let b = [
            group[0],
            group.get(1).copied().unwrap_or(0),
            group.get(2).copied().unwrap_or(0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= group.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}
