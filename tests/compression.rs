//! HTTP response compression (`compression algo|type|offload`) against HAProxy 2.6 on the same
//! configuration, origin and requests. Debian's HAProxy compresses with libslz, portcullis with
//! flate2: the compressed bytes differ, so what is compared is the status, the headers the
//! filter touches (Content-Encoding, Vary, ETag, Content-Length, Transfer-Encoding), the
//! `Accept-Encoding` the server saw, and the decompressed body (also checked against what the
//! origin sent). HTTP/1.1 and HTTP/1.0 clients, and an HTTP/2 one (curl over h2c). A held body
//! shows a compressed piece reaching the client before the server sent the rest. Only
//! 127.0.0.1; the HAProxy half is skipped without /usr/sbin/haproxy.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use backend::{free_port, lo};
use proxy::Proc;

/// A compressible body of `n` bytes.
fn text(n: usize) -> Vec<u8> {
    let line = b"the quick brown fox jumps over the lazy dog 0123456789\n";
    (0..n)
        .map(|i| line[i % line.len()] ^ ((i / 4096) % 7) as u8)
        .collect()
}

const BIG: usize = 1 << 20;
const HELD_FIRST: usize = 20_000;

/// The origin's answer to `path` (head fields, body framing), its request's `Accept-Encoding`
/// echoed in `x-ae`.
fn answer(path: &str, ae: &str, release: &AtomicBool, s: &mut TcpStream) -> std::io::Result<()> {
    let route = path.split('?').next().unwrap_or("");
    let (status, fields, body, chunked): (&str, &str, Vec<u8>, bool) = match route {
        "/html" => (
            "200 OK",
            "content-type: text/html; charset=utf-8\r\n",
            text(5000),
            false,
        ),
        "/plain" => ("200 OK", "content-type: text/plain\r\n", text(3000), true),
        "/json" => (
            "200 OK",
            "content-type: application/json\r\n",
            text(3000),
            false,
        ),
        "/none" => ("200 OK", "", text(3000), false),
        "/encoded" => (
            "200 OK",
            "content-type: text/html\r\ncontent-encoding: br\r\n",
            text(2000),
            false,
        ),
        "/notransform" => (
            "200 OK",
            "content-type: text/html\r\ncache-control: public, no-transform\r\n",
            text(2000),
            false,
        ),
        "/etag" => (
            "200 OK",
            "content-type: text/html\r\netag: \"v1\"\r\n",
            text(2000),
            false,
        ),
        "/weak" => (
            "200 OK",
            "content-type: text/html\r\netag: W/\"v1\"\r\n",
            text(2000),
            false,
        ),
        "/badetag" => (
            "200 OK",
            "content-type: text/html\r\netag: v1\r\n",
            text(2000),
            false,
        ),
        "/multipart" => (
            "200 OK",
            "content-type: multipart/mixed; boundary=x\r\n",
            text(2000),
            false,
        ),
        "/big" => ("200 OK", "content-type: text/html\r\n", text(BIG), true),
        "/bigcl" => ("200 OK", "content-type: text/plain\r\n", text(BIG), false),
        "/empty" => ("200 OK", "content-type: text/html\r\n", Vec::new(), false),
        "/created" => (
            "201 Created",
            "content-type: text/html\r\n",
            text(2000),
            false,
        ),
        "/notfound" => (
            "404 Not Found",
            "content-type: text/html\r\n",
            text(2000),
            false,
        ),
        "/nocontent" => (
            "204 No Content",
            "content-type: text/html\r\n",
            Vec::new(),
            false,
        ),
        "/notmodified" => (
            "304 Not Modified",
            "content-type: text/html\r\netag: \"v1\"\r\n",
            Vec::new(),
            false,
        ),
        "/held" => return held(ae, release, s),
        // No length: the body ends with the connection.
        "/untilclose" => {
            let head = format!("HTTP/1.1 200 OK\r\ncontent-type: text/html\r\nx-ae: {ae}\r\n\r\n");
            s.write_all(head.as_bytes())?;
            return s.write_all(&text(3000));
        }
        "/old" => {
            let head = format!(
                "HTTP/1.0 200 OK\r\ncontent-type: text/html\r\nx-ae: {ae}\r\ncontent-length: 3000\r\n\r\n"
            );
            s.write_all(head.as_bytes())?;
            return s.write_all(&text(3000));
        }
        "/trailers" => {
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\nx-ae: {ae}\r\ntransfer-encoding: chunked\r\ntrailer: x-sum\r\n\r\n"
            );
            let body = text(3000);
            s.write_all(head.as_bytes())?;
            s.write_all(format!("{:x}\r\n", body.len()).as_bytes())?;
            s.write_all(&body)?;
            return s.write_all(b"\r\n0\r\nx-sum: 42\r\n\r\n");
        }
        _ => ("200 OK", "content-type: text/html\r\n", text(100), false),
    };
    let mut head = format!("HTTP/1.1 {status}\r\n{fields}x-ae: {ae}\r\n");
    let bodyless = status.starts_with("204") || status.starts_with("304");
    if chunked {
        head.push_str("transfer-encoding: chunked\r\n\r\n");
    } else if !bodyless {
        head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
    } else {
        head.push_str("\r\n");
    }
    s.write_all(head.as_bytes())?;
    if bodyless || path.contains("head=1") {
        return Ok(());
    }
    if chunked {
        for c in body.chunks(7000) {
            s.write_all(format!("{:x}\r\n", c.len()).as_bytes())?;
            s.write_all(c)?;
            s.write_all(b"\r\n")?;
        }
        s.write_all(b"0\r\n\r\n")
    } else {
        s.write_all(&body)
    }
}

/// A chunked body sent in two parts: the second once the client saw the first decoded.
fn held(ae: &str, release: &AtomicBool, s: &mut TcpStream) -> std::io::Result<()> {
    let body = text(2 * HELD_FIRST);
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\nx-ae: {ae}\r\ntransfer-encoding: chunked\r\n\r\n"
    );
    s.write_all(head.as_bytes())?;
    s.write_all(format!("{HELD_FIRST:x}\r\n").as_bytes())?;
    s.write_all(&body[..HELD_FIRST])?;
    s.write_all(b"\r\n")?;
    // Well within `timeout server`.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !release.load(Ordering::Acquire) && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(5));
    }
    s.write_all(format!("{HELD_FIRST:x}\r\n").as_bytes())?;
    s.write_all(&body[HELD_FIRST..])?;
    s.write_all(b"\r\n0\r\n\r\n")
}

/// The origin: one request per connection (it closes after answering).
struct Origin {
    addr: SocketAddr,
    release: Arc<AtomicBool>,
}

impl Origin {
    fn start() -> Origin {
        let l = TcpListener::bind(lo(0)).expect("bind origin");
        let addr = l.local_addr().expect("addr");
        let release = Arc::new(AtomicBool::new(false));
        let r = Arc::clone(&release);
        thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { continue };
                let r = Arc::clone(&r);
                thread::spawn(move || {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
                    let mut rd = BufReader::new(s.try_clone().expect("clone"));
                    let mut line = String::new();
                    if rd.read_line(&mut line).is_err() {
                        return;
                    }
                    let path = line.split(' ').nth(1).unwrap_or("/").to_string();
                    let mut ae = Vec::new();
                    loop {
                        let mut h = String::new();
                        if rd.read_line(&mut h).unwrap_or(0) == 0 || h == "\r\n" {
                            break;
                        }
                        if let Some((n, v)) = h.split_once(':')
                            && n.eq_ignore_ascii_case("accept-encoding")
                        {
                            ae.push(v.trim().to_string());
                        }
                    }
                    let ae = if ae.is_empty() {
                        "-".into()
                    } else {
                        ae.join("|")
                    };
                    let _ = answer(&path, &ae, &r, &mut s);
                    let _ = s.shutdown(std::net::Shutdown::Write);
                });
            }
        });
        Origin { addr, release }
    }
}

fn config(ports: [u16; 4], origin: SocketAddr, sock: &std::path::Path) -> String {
    let [p1, p2, p3, p4] = ports;
    format!(
        "global\n    stats socket \"{}\" mode 600 level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind 127.0.0.1:{p1}\n    compression algo gzip deflate\n\
         \x20   http-response set-header x-comp \"%[res.comp] %[res.comp_algo]\"\n\
         \x20   compression type text/html text/plain\n    use_backend braw if {{ path_beg /raw/ }}\n\
         \x20   default_backend b\n\
         frontend fo\n    bind 127.0.0.1:{p2}\n    compression algo identity gzip\n    compression offload\n\
         \x20   default_backend b\n\
         frontend fh2\n    bind 127.0.0.1:{p3} proto h2\n    compression algo gzip\n    default_backend b\n\
         frontend fbe\n    bind 127.0.0.1:{p4}\n    default_backend braw\n\
         backend b\n    server s {origin}\n\
         backend braw\n    compression algo raw-deflate\n    http-request set-path %[path,regsub(^/raw,)]\n\
         \x20   server s {origin}\n",
        sock.display()
    )
}

/// The compression counters of the proxies' rows in `show stat` once they settled (the last
/// response may be counted just after its last byte left): `comp_in`, whether `comp_out` is
/// non-zero (the codecs differ), `comp_byp`, `comp_rsp`.
fn comp_stats(sock: &std::path::Path) -> Vec<String> {
    let read = || {
        let csv = proxy::admin_cli(sock, "show stat");
        let mut lines = csv.lines();
        let head: Vec<&str> = lines
            .next()
            .unwrap_or("")
            .trim_start_matches("# ")
            .split(',')
            .collect();
        let col = |n: &str| head.iter().position(|h| *h == n).unwrap_or(usize::MAX);
        let cols = ["comp_in", "comp_out", "comp_byp", "comp_rsp"].map(col);
        lines
            .filter(|l| l.contains(",FRONTEND,") || l.contains(",BACKEND,"))
            .map(|l| {
                let f: Vec<&str> = l.split(',').collect();
                let v = |i: usize| f.get(i).copied().unwrap_or("?");
                let out = v(cols[1]).parse::<u64>().is_ok_and(|n| n > 0);
                format!(
                    "{} {} in={} out>0={out} byp={} rsp={}",
                    f[0],
                    f[1],
                    v(cols[0]),
                    v(cols[2]),
                    v(cols[3])
                )
            })
            .collect::<Vec<_>>()
    };
    let mut last = read();
    for _ in 0..20 {
        thread::sleep(Duration::from_millis(100));
        let now = read();
        if now == last {
            break;
        }
        last = now;
    }
    last
}

/// Decodes `body` as its `Content-Encoding` says; `raw` deflate when zlib's header is absent
/// (`raw-deflate` is announced as `deflate`).
fn decode(enc: Option<&str>, body: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    let r = match enc {
        None => return Ok(body.to_vec()),
        Some("gzip") => flate2::read::GzDecoder::new(body).read_to_end(&mut out),
        Some("deflate") if body.first().is_some_and(|b| b & 0x0f == 8) => {
            match flate2::read::ZlibDecoder::new(body).read_to_end(&mut out) {
                Ok(n) => Ok(n),
                Err(_) => {
                    out.clear();
                    flate2::read::DeflateDecoder::new(body).read_to_end(&mut out)
                }
            }
        }
        Some("deflate") => flate2::read::DeflateDecoder::new(body).read_to_end(&mut out),
        // The origin's own label (`br` on plain bytes): forwarded as it is.
        Some(_) => return Ok(body.to_vec()),
    };
    r.map(|_| out).map_err(|e| e.to_string())
}

const FIELDS: [&str; 7] = [
    "content-encoding",
    "vary",
    "etag",
    "content-length",
    "transfer-encoding",
    "x-ae",
    "x-comp",
];

/// One exchange as compared: status, the fields above, the decoded body's length and a hash.
fn summary(status: u16, field: impl Fn(&str) -> Option<String>, body: &[u8]) -> String {
    let enc = field("content-encoding");
    let mut s = format!("{status}");
    for f in FIELDS {
        // The length of an uncompressed body is the origin's; of a compressed one, the codec's.
        let v = field(f);
        let v = match (f, &enc) {
            ("content-length", Some(_)) => v.map(|_| "<n>".to_string()),
            _ => v,
        };
        s.push_str(&format!(" {f}={}", v.unwrap_or_else(|| "-".into())));
    }
    match decode(enc.as_deref(), body) {
        Ok(b) => s.push_str(&format!(" body={}:{:016x}", b.len(), backend::fnv1a64(&b))),
        Err(e) => s.push_str(&format!(" body=undecodable({e})")),
    }
    s
}

/// (port index, request line path, extra request fields, HTTP version).
const ASKS: &[(usize, &str, &str, &str)] = &[
    (0, "/html", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/html", "Accept-Encoding: deflate\r\n", "1.1"),
    (
        0,
        "/html",
        "Accept-Encoding: gzip;q=0.5, deflate;q=0.8\r\n",
        "1.1",
    ),
    (
        0,
        "/html",
        "Accept-Encoding: deflate;q=0, gzip;q=0.001\r\n",
        "1.1",
    ),
    (0, "/html", "Accept-Encoding: br, *;q=0.3\r\n", "1.1"),
    (0, "/html", "Accept-Encoding: *\r\n", "1.1"),
    (0, "/html", "Accept-Encoding: br, identity\r\n", "1.1"),
    (0, "/html", "Accept-Encoding: gzip;q=0\r\n", "1.1"),
    (
        0,
        "/html",
        "Accept-Encoding: x-gzip\r\nAccept-Encoding: GZIP ; q=0.9\r\n",
        "1.1",
    ),
    (0, "/html", "", "1.1"),
    (0, "/html", "Accept-Encoding: gzip\r\n", "1.0"),
    (
        0,
        "/html",
        "Accept-Encoding: gzip\r\nUser-Agent: Mozilla/4.0 (X11; U)\r\n",
        "1.1",
    ),
    (0, "/plain", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/json", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/none", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/encoded", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/notransform", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/etag", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/weak", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/badetag", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/multipart", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/big", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/bigcl", "Accept-Encoding: deflate\r\n", "1.1"),
    (0, "/empty", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/created", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/notfound", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/nocontent", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/notmodified", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/raw/html", "Accept-Encoding: deflate\r\n", "1.1"),
    (0, "/untilclose", "Accept-Encoding: gzip\r\n", "1.1"),
    (0, "/old", "Accept-Encoding: gzip\r\n", "1.1"),
    (1, "/html", "Accept-Encoding: gzip\r\n", "1.1"),
    (1, "/html", "Accept-Encoding: br\r\n", "1.1"),
    (1, "/html", "", "1.1"),
    (1, "/etag", "Accept-Encoding: identity\r\n", "1.1"),
    (3, "/html", "Accept-Encoding: deflate, gzip\r\n", "1.1"),
    (3, "/html", "Accept-Encoding: gzip\r\n", "1.1"),
];

fn ask_h1(port: u16, path: &str, extra: &str, version: &str, method: &str) -> String {
    let mut s = proxy::connect(lo(port));
    let req =
        format!("{method} {path} HTTP/{version}\r\nHost: t\r\n{extra}Connection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("send");
    match proxy::read_response(&mut s, method == "HEAD") {
        Some(r) => summary(r.status, |n| r.header(n), &r.body),
        None => "no response".into(),
    }
}

/// A compressed chunked response keeps its trailers (HTTP/1.1 client).
fn trailers(port: u16) -> String {
    let mut s = proxy::connect(lo(port));
    let req =
        "GET /trailers HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n";
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    let tail = text.rsplit("\r\n0\r\n").next().unwrap_or("").to_string();
    let body = decoded_so_far(&raw).map(|b| (b.len(), backend::fnv1a64(&b)));
    format!("after the last chunk {tail:?}, body {body:?}")
}

/// Two compressed responses on one client connection.
fn keep_alive(port: u16) -> String {
    let mut s = proxy::connect(lo(port));
    let mut out = Vec::new();
    for path in ["/html", "/plain"] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\n\r\n");
        if s.write_all(req.as_bytes()).is_err() {
            out.push("send failed".to_string());
            break;
        }
        match proxy::read_response(&mut s, false) {
            Some(r) => out.push(summary(r.status, |n| r.header(n), &r.body)),
            None => out.push("no response".to_string()),
        }
    }
    out.join(" / ")
}

/// An HTTP/2 exchange with curl (h2c prior knowledge): the same summary.
fn ask_h2(port: u16, path: &str, ae: &str, dir: &std::path::Path, head: bool) -> String {
    let (hp, bp) = (dir.join("h"), dir.join("b"));
    let mut c = Command::new("curl");
    c.args(["-s", "--max-time", "20", "--http2-prior-knowledge", "-D"])
        .arg(&hp)
        .arg("-o")
        .arg(&bp);
    if !ae.is_empty() {
        c.args(["-H", &format!("Accept-Encoding: {ae}")]);
    }
    if head {
        c.arg("-I");
    }
    let out = c
        .arg(format!("http://127.0.0.1:{port}{path}"))
        .output()
        .expect("curl");
    if !out.status.success() {
        return format!("curl failed: {out:?}");
    }
    let h = std::fs::read_to_string(&hp).unwrap_or_default();
    let b = std::fs::read(&bp).unwrap_or_default();
    let status = h
        .split(' ')
        .nth(1)
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(0);
    let field = |n: &str| {
        h.lines().skip(1).find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(n)
                .then(|| v.trim().to_string())
        })
    };
    summary(status, field, &b)
}

/// Every exchange of the run, as compared.
fn run(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>, tag: &str) -> Option<Vec<String>> {
    let origin = Origin::start();
    // `free_port` may hand the same port out twice: four distinct ones.
    let mut ports = [0u16; 4];
    for i in 0..4 {
        ports[i] = loop {
            let p = free_port();
            if !ports[..i].contains(&p) {
                break p;
            }
        };
    }
    let dir = proxy::TempDir::new(&format!("comp-{tag}"));
    let sock = dir.0.join("admin.sock");
    let cfg = config(ports, origin.addr, &sock);
    let _p = start(&cfg, lo(ports[3]))?;
    let mut got = Vec::new();
    for (i, path, extra, v) in ASKS {
        let r = ask_h1(ports[*i], path, extra, v, "GET");
        got.push(format!("{i} {path} {extra:?} {v}: {r}"));
    }
    let r = ask_h1(
        ports[0],
        "/html?head=1",
        "Accept-Encoding: gzip\r\n",
        "1.1",
        "HEAD",
    );
    got.push(format!("HEAD /html: {r}"));
    got.push(format!("trailers: {}", trailers(ports[0])));
    got.push(format!("keep-alive: {}", keep_alive(ports[0])));
    for (path, ae, head) in [
        ("/html", "gzip", false),
        ("/big", "gzip", false),
        ("/bigcl", "gzip", false),
        ("/json", "gzip", false),
        ("/html", "", false),
        ("/notmodified", "gzip", false),
        ("/html?head=1", "gzip", true),
        ("/trailers", "gzip", false),
    ] {
        let r = ask_h2(ports[2], path, ae, &dir.0, head);
        got.push(format!("h2 {path} {ae} head={head}: {r}"));
    }
    got.push(format!("held: {}", held_streams(ports[0], &origin)));
    got.extend(comp_stats(&sock));
    // `set rate-limit http-compression global 1` (1 kB/s) right after 1 MiB went through the
    // compressor: the next response is not compressed (the second's rate is far over, with a
    // wide margin in time); 0 lifts the limit.
    let gz = "Accept-Encoding: gzip\r\n";
    got.push(format!(
        "/big: {}",
        ask_h1(ports[0], "/big", gz, "1.1", "GET")
    ));
    let info = proxy::admin_cli(&sock, "show info");
    let rate = |k: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(k)?.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    got.push(format!(
        "show info: CompressBpsIn>0={} CompressBpsOut>0={}",
        rate("CompressBpsIn:") > 0,
        rate("CompressBpsOut:") > 0
    ));
    for cmd in ["1", "0"] {
        let set = format!("set rate-limit http-compression global {cmd}");
        got.push(format!("{set} -> {:?}", proxy::admin_cli(&sock, &set)));
        let next = ask_h1(ports[0], "/html", gz, "1.1", "GET");
        got.push(format!("limit {cmd}: /html {next}"));
    }
    Some(got)
}

/// The first part of `/held` arrives decoded while the origin holds the rest back.
fn held_streams(port: u16, origin: &Origin) -> String {
    origin.release.store(false, Ordering::Release);
    let mut s = proxy::connect(lo(port));
    let req = "GET /held HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n";
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = Vec::new();
    let mut buf = [0u8; 16384];
    let want = text(2 * HELD_FIRST);
    let deadline = Instant::now() + Duration::from_secs(10);
    let early = loop {
        // A compressor may keep the last bits of a flush (libslz does): most of the part is
        // enough.
        if let Some(plain) = decoded_so_far(&raw)
            && plain.len() >= HELD_FIRST / 2
        {
            break want.starts_with(&plain);
        }
        if Instant::now() > deadline {
            break false;
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break false,
            Ok(n) => raw.extend_from_slice(&buf[..n]),
        }
    };
    origin.release.store(true, Ordering::Release);
    let _ = s.read_to_end(&mut raw);
    let whole = decoded_so_far(&raw).is_some_and(|p| p == want);
    format!("most of the first part decoded before the rest was sent: {early}; whole body: {whole}")
}

/// What the gzip chunks of the response in `raw` decode to so far (None before the head).
fn decoded_so_far(raw: &[u8]) -> Option<Vec<u8>> {
    let at = raw.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let mut rest = &raw[at..];
    let mut dec = flate2::write::GzDecoder::new(Vec::new());
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = usize::from_str_radix(std::str::from_utf8(&rest[..eol]).ok()?, 16).ok()?;
        let data = rest.get(eol + 2..eol + 2 + size);
        let Some(data) = data else {
            // A chunk still arriving: what there is of it.
            let _ = dec.write_all(&rest[eol + 2..]);
            break;
        };
        let _ = dec.write_all(data);
        if size == 0 {
            break;
        }
        rest = rest.get(eol + 4 + size..).unwrap_or_default();
    }
    let _ = dec.flush();
    Some(dec.get_ref().clone())
}

#[test]
fn compression_as_haproxy() {
    let got = run(|cfg, port| Some(Proc::portcullis(cfg, port)), "p").expect("portcullis");
    let find = |k: &str| {
        got.iter()
            .find(|l| l.starts_with(k))
            .unwrap_or_else(|| panic!("{k}: {got:#?}"))
            .clone()
    };
    // Portcullis' own facts, so the test stands without HAProxy.
    let html_gz = find("0 /html \"Accept-Encoding: gzip\\r\\n\" 1.1");
    let html = text(5000);
    let sum = format!("body={}:{:016x}", html.len(), backend::fnv1a64(&html));
    assert!(
        html_gz.contains("content-encoding=gzip vary=Accept-Encoding"),
        "{html_gz}"
    );
    assert!(
        html_gz.contains("transfer-encoding=chunked") && html_gz.contains(&sum),
        "{html_gz}"
    );
    let big = find("0 /big ");
    let bsum = format!("body={BIG}:{:016x}", backend::fnv1a64(&text(BIG)));
    assert!(
        big.contains("content-encoding=gzip") && big.contains(&bsum),
        "{big}"
    );
    assert!(find("h2 /bigcl gzip").contains(&bsum), "{got:#?}");
    assert!(
        find("h2 /bigcl gzip").contains("content-encoding=gzip"),
        "{got:#?}"
    );
    assert!(find("0 /etag").contains("etag=W/\"v1\""), "{got:#?}");
    assert!(html_gz.contains("x-comp=1 gzip"), "{html_gz}");
    assert!(find("0 /json").contains("x-comp=0 "), "{got:#?}");
    assert!(
        find("trailers:").contains("\"x-sum: 42\\r\\n\\r\\n\", body Some((3000,"),
        "{got:#?}"
    );
    assert_eq!(
        find("keep-alive:").matches("content-encoding=gzip").count(),
        2,
        "{got:#?}"
    );
    assert!(
        find("1 /html \"Accept-Encoding: gzip").contains("x-ae=-"),
        "{got:#?}"
    );
    assert_eq!(
        find("show info:"),
        "show info: CompressBpsIn>0=true CompressBpsOut>0=true"
    );
    assert!(find("limit 1:").contains("content-encoding=- "), "{got:#?}");
    assert!(
        find("limit 0:").contains("content-encoding=gzip"),
        "{got:#?}"
    );
    assert_eq!(
        find("held:"),
        "held: most of the first part decoded before the rest was sent: true; whole body: true"
    );
    eprintln!("{}", got.join("\n"));
    for l in &got {
        assert!(!l.contains("undecodable") && !l.contains("failed"), "{l}");
    }
    let Some(want) = run(Proc::haproxy, "h") else {
        return;
    };
    let diff: Vec<String> = got
        .iter()
        .zip(&want)
        .filter(|(a, b)| a != b)
        .map(|(a, b)| format!("portcullis: {a}\nhaproxy:    {b}"))
        .collect();
    assert!(diff.is_empty(), "{}", diff.join("\n\n"));
    assert_eq!(got.len(), want.len());
}

/// `compression` lines HAProxy 2.6 refuses (or warns about), with its words.
#[test]
fn compression_keyword_errors_as_haproxy() {
    let lines = [
        ("frontend", "compression"),
        ("frontend", "compression gzip"),
        ("frontend", "compression algo"),
        ("frontend", "compression algo gzip brotli"),
        ("frontend", "compression algo GZIP"),
        ("frontend", "compression type"),
        ("backend", "compression offload extra"),
        ("defaults", "compression offload"),
        (
            "defaults",
            "compression algo gzip identity raw-deflate deflate",
        ),
        ("global", "tune.comp.maxlevel"),
        ("global", "tune.comp.maxlevel 0"),
        ("global", "tune.comp.maxlevel 10"),
        ("global", "tune.comp.maxlevel abc"),
        ("global", "tune.comp.maxlevel 3 4"),
        ("global", "tune.comp.maxlevel 9"),
        ("global", "maxcomprate"),
        ("global", "maxcomprate 10 20"),
        ("global", "maxcomprate 10"),
        ("global", "maxzlibmem"),
        ("global", "maxzlibmem 1 2"),
        ("global", "maxzlibmem 10"),
        ("global", "maxcompcpuusage"),
        ("global", "maxcompcpuusage 101"),
        ("global", "maxcompcpuusage -1"),
        ("global", "maxcompcpuusage 50 5"),
        ("global", "maxcompcpuusage 80"),
        ("frontend", "filter"),
        ("frontend", "filter foo"),
        ("frontend", "filter compression"),
        ("frontend", "filter trace"),
        ("frontend", "filter compression\n  filter compression"),
        ("backend", "filter compression x"),
        ("defaults", "filter compression"),
        ("backend", "filter trace\n  compression algo gzip"),
        (
            "backend",
            "filter trace\n  filter compression\n  compression algo gzip",
        ),
    ];
    let haproxy = std::path::Path::new("/usr/sbin/haproxy").exists();
    for (section, l) in lines {
        let at = |s: &str| if section == s { l } else { "" };
        let cfg = format!(
            "global\n  {}\ndefaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n  {}\n\
             frontend f\n  bind 127.0.0.1:{}\n  default_backend b\n  {}\n\
             backend b\n  {}\n  server s1 127.0.0.1:1\n",
            at("global"),
            at("defaults"),
            free_port(),
            at("frontend"),
            at("backend"),
        );
        let got = check_lines(env!("CARGO_BIN_EXE_portcullis"), &cfg);
        let clean = l.contains("extra")
            || l.contains("identity")
            || l.ends_with("maxlevel 9")
            || l.ends_with("maxcomprate 10")
            || ["maxzlibmem 10", "maxcompcpuusage 80"].contains(&l)
            || (["filter compression", "filter trace"].contains(&l) && section != "defaults")
            || l.ends_with("filter compression\n  compression algo gzip");
        assert_eq!(got.is_empty(), clean, "{l}: {got:?}");
        if haproxy {
            assert_eq!(got, check_lines("/usr/sbin/haproxy", &cfg), "{l}");
        }
    }
}

/// The ALERT and WARNING lines of `-c` on `cfg` (the pid and the file's directory taken out).
fn check_lines(cmd: &str, cfg: &str) -> Vec<String> {
    let dir = proxy::TempDir::new("comp-check");
    let path = dir.0.join("c.cfg");
    std::fs::write(&path, cfg).expect("write");
    let out = Command::new(cmd)
        .arg("-c")
        .arg("-f")
        .arg(&path)
        .output()
        .expect("run -c");
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let p = path.to_string_lossy().into_owned();
    text.lines()
        .filter(|l| l.starts_with("[ALERT]") || l.starts_with("[WARNING]"))
        .filter(|l| !l.contains("Error(s) found") && !l.contains("Fatal errors found"))
        .map(|l| {
            let (sev, rest) = l.split_once('(').unwrap_or((l, ""));
            let rest = rest.split_once(')').map_or(rest, |r| r.1);
            format!("{} {}", sev.trim(), rest.replace(&p, "c.cfg"))
        })
        .collect()
}

/// `maxzlibmem`: while the deflate states of the responses being compressed fill the bound
/// (1 MB: three of them, about 262 KiB each as zlib allocates them), a new response goes
/// uncompressed, as HAProxy's when zlib's allocation fails; compressed again once they end.
/// (Portcullis alone: Debian's HAProxy compresses with libslz, which the bound does not see.)
#[test]
fn maxzlibmem_bounds_the_deflate_states() {
    let origin = Origin::start();
    origin.release.store(false, Ordering::Release);
    let port = free_port();
    let cfg = format!(
        "global\n    maxzlibmem 1\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    filter compression\n    compression algo gzip\n\
         \x20   default_backend b\n\
         backend b\n    server s {}\n",
        origin.addr
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    // The head of `path`'s response (its connection, for the held ones, kept open).
    let head = |path: &str| {
        let mut s = proxy::connect(lo(port));
        let req = format!(
            "GET {path} HTTP/1.1\r\nHost: t\r\nAccept-Encoding: gzip\r\nConnection: close\r\n\r\n"
        );
        s.write_all(req.as_bytes()).expect("send");
        let mut raw = Vec::new();
        let mut buf = [0u8; 4096];
        while !raw.windows(4).any(|w| w == b"\r\n\r\n") {
            match s.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => raw.extend_from_slice(&buf[..n]),
            }
        }
        let text = String::from_utf8_lossy(&raw).to_ascii_lowercase();
        (text.contains("content-encoding: gzip"), s)
    };
    let held: Vec<_> = (0..3).map(|_| head("/held")).collect();
    assert!(
        held.iter().all(|(gz, _)| *gz),
        "the first three are compressed"
    );
    let (gz, _) = head("/html");
    assert!(!gz, "a fourth deflate state would pass maxzlibmem");
    origin.release.store(true, Ordering::Release);
    for (_, mut s) in held {
        let mut rest = Vec::new();
        let _ = s.read_to_end(&mut rest);
    }
    // The held streams' states are freed as their transactions end (just after their last
    // byte): allow for that on a busy machine.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let (gz, _) = head("/html");
        if gz {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "compressed again once the others ended"
        );
        thread::sleep(Duration::from_millis(50));
    }
}
