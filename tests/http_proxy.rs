//! L7 proxy against real fake backends on 127.0.0.0/8: routing, headers, balancing, keep-alive,
//! bodies, retries, timeouts, tunnels. Runs with the engine from `PORTCULLIS_IO`.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use backend::{HttpNode, HttpOpts, RefusingPort, free_port, lo};
use proxy::{Proc, connect, get, read_response, request};

fn node(ip: [u8; 4], name: &str) -> HttpNode {
    let ip = std::net::IpAddr::from(ip);
    HttpNode::start(SocketAddr::new(ip, 0), HttpOpts::named(name)).expect("start node")
}

const GLOBAL: &str = "global\n    nbthread 2\n\ndefaults\n    mode http\n    log stdout format raw local0\n    option httplog\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\n";

#[test]
fn redirect_scheme_https_301() {
    let port = free_port();
    let cfg = format!(
        "{GLOBAL}frontend http-redirect\n    bind 127.0.0.1:{port}\n    http-request redirect scheme https code 301\n"
    );
    let p = Proc::portcullis(&cfg, lo(port));
    let r = request(
        lo(port),
        &format!("GET /x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"),
    );
    assert_eq!(r.status, 301);
    assert_eq!(
        r.header("location").as_deref(),
        Some(format!("https://127.0.0.1:{port}/x?y=1").as_str())
    );
    let line = p
        .wait_log("\"GET /x?y=1 HTTP/1.1\"", Duration::from_secs(5))
        .expect("log line");
    assert!(line.contains(" 301 ") && line.contains(" LR-- "), "{line}");
}

#[test]
fn forwarded_headers_reach_the_backend() {
    let n = node([127, 0, 1, 21], "n1");
    let port = free_port();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:{port}\n    option forwardfor\n    http-request set-header X-Forwarded-Proto https\n    http-request set-header X-Forwarded-Port 443\n    http-request set-header X-Forwarded-Host %[req.hdr(Host)]\n    default_backend be\n\nbackend be\n    server n1 {}\n",
        n.addr()
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    let r = request(
        lo(port),
        "GET /h HTTP/1.1\r\nHost: example.local\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(r.status, 200);
    let reqs = n.requests();
    let rec = reqs.last().expect("request reached node");
    assert_eq!(rec.header("x-forwarded-for").as_deref(), Some("127.0.0.1"));
    assert_eq!(rec.header("x-forwarded-proto").as_deref(), Some("https"));
    assert_eq!(rec.header("x-forwarded-port").as_deref(), Some("443"));
    assert_eq!(
        rec.header("x-forwarded-host").as_deref(),
        Some("example.local")
    );
}

#[test]
fn roundrobin_spreads_within_one() {
    let nodes: Vec<HttpNode> = (0..3)
        .map(|i| node([127, 0, 1, 31 + i], &format!("s{i}")))
        .collect();
    let port = free_port();
    let servers: String = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| format!("    server s{i} {}\n", n.addr()))
        .collect();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    balance roundrobin\n{servers}"
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    for _ in 0..30 {
        assert_eq!(get(lo(port), "/").status, 200);
    }
    let counts: Vec<usize> = nodes.iter().map(|n| n.request_count()).collect();
    let (min, max) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
    assert!(max - min <= 1, "{counts:?}");
    assert_eq!(counts.iter().sum::<usize>(), 30);
}

#[test]
fn keep_alive_reuses_server_connections() {
    let n = node([127, 0, 1, 41], "ka");
    let port = free_port();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    server ka {}\n",
        n.addr()
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    let mut s = connect(lo(port));
    for i in 0..20 {
        s.write_all(format!("GET /k{i} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes())
            .unwrap();
        let r = read_response(&mut s, false).expect("response");
        assert_eq!(r.status, 200);
        assert!(r.text().contains(&format!("path=/k{i}")), "{}", r.text());
    }
    assert_eq!(n.request_count(), 20);
    assert!(
        n.connections() < 20,
        "backend saw {} connections for 20 requests",
        n.connections()
    );
}

#[test]
fn chunked_and_large_bodies_intact() {
    let n = node([127, 0, 1, 51], "body");
    let port = free_port();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    server b {}\n",
        n.addr()
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    // 100 MB Content-Length upload, checksummed by the node.
    let size: usize = 100 * 1024 * 1024;
    let mut s = connect(lo(port));
    s.write_all(
        format!("POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: {size}\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let block: Vec<u8> = (0..65536u32).map(|i| (i % 251) as u8).collect();
    let sum = backend::write_repeated(&mut s, &block, size).unwrap();
    let r = read_response(&mut s, false).expect("upload answer");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text().trim(),
        format!("len={size} sum={sum:016x}").trim_end(),
        "{}",
        r.text()
    );
    // 100 MB download.
    let r = request(
        lo(port),
        &format!("GET /size?bytes={size} HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
    );
    assert_eq!(r.body.len(), size);
    assert_eq!(r.body, backend::size_body(size));
    // Chunked request and response.
    let mut s = connect(lo(port));
    s.write_all(b"POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\n\r\n").unwrap();
    let r = read_response(&mut s, false).expect("chunked upload answer");
    assert_eq!(r.text(), backend::upload_answer(b"hello world"));
    s.write_all(b"GET /chunked?n=5 HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    let r = read_response(&mut s, false).expect("chunked response");
    assert_eq!(r.text(), backend::chunked_body(5));
}

#[test]
fn refused_server_retries_then_503_sc() {
    let refusing = RefusingPort::new().expect("refusing port");
    let port = free_port();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    retries 2\n    timeout connect 200ms\n    server dead {}\n",
        refusing.addr()
    );
    let p = Proc::portcullis(&cfg, lo(port));
    let r = get(lo(port), "/r");
    assert_eq!(r.status, 503);
    let line = p
        .wait_log("\"GET /r HTTP/1.1\"", Duration::from_secs(5))
        .expect("log line");
    assert!(
        line.contains(" fe be/dead ") && line.contains(" 503 ") && line.contains(" SC-- "),
        "{line}"
    );
    // %ac/%fc/%bc/%sc/%rc: the retry count is last.
    let words: Vec<&str> = line.split(' ').collect();
    let at = words
        .iter()
        .position(|w| *w == "SC--")
        .expect("termination state");
    let conns = words.get(at + 1).expect("conn counters");
    assert!(conns.ends_with("/2"), "{line}");
}

#[test]
fn redispatch_moves_the_retry_to_another_server() {
    let good = node([127, 0, 1, 61], "good");
    let refusing = RefusingPort::new().expect("refusing port");
    let port = free_port();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    retries 3\n    option redispatch\n    server dead {}\n    server good {}\n",
        refusing.addr(),
        good.addr()
    );
    let p = Proc::portcullis(&cfg, lo(port));
    for i in 0..4 {
        let r = get(lo(port), &format!("/d{i}"));
        assert_eq!(r.status, 200, "request {i}");
    }
    let line = p
        .wait_log("+1 ", Duration::from_secs(5))
        .unwrap_or_else(|| panic!("no redispatched log line (+1): {:?}", p.log_lines()));
    assert!(
        line.contains(" be/good ") && line.contains(" 200 "),
        "{line}"
    );
}

#[test]
fn request_timeout_408_and_server_timeout_504() {
    let n = node([127, 0, 1, 71], "slow");
    let port = free_port();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:{port}\n    timeout http-request 500ms\n    default_backend be\n\nbackend be\n    timeout server 500ms\n    server slow {}\n",
        n.addr()
    );
    let p = Proc::portcullis(&cfg, lo(port));
    let mut s = connect(lo(port));
    s.write_all(b"GET /partial HTTP/1.1\r\nHost: a\r\n")
        .unwrap();
    let r = read_response(&mut s, false).expect("408");
    assert_eq!(r.status, 408);
    let line = p
        .wait_log(" cR-- ", Duration::from_secs(5))
        .expect("cR-- log");
    assert!(line.contains(" 408 "), "{line}");
    let r = get(lo(port), "/slow?ms=3000");
    assert_eq!(r.status, 504);
    let line = p
        .wait_log(" sH-- ", Duration::from_secs(5))
        .expect("sH-- log");
    assert!(line.contains(" 504 ") && line.contains("be/slow"), "{line}");
}

#[test]
fn websocket_upgrade_becomes_a_tunnel() {
    let n = node([127, 0, 1, 81], "ws");
    let port = free_port();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    server ws {}\n",
        n.addr()
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    let mut s = connect(lo(port));
    s.write_all(b"GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n").unwrap();
    let r = read_response(&mut s, false).expect("101");
    assert_eq!(r.status, 101, "{}", r.head);
    assert_eq!(
        r.header("sec-websocket-accept").as_deref(),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    for msg in [&b"ping"[..], &b"a longer message through the tunnel"[..]] {
        s.write_all(msg).unwrap();
        let mut back = vec![0u8; msg.len()];
        s.read_exact(&mut back).unwrap();
        assert_eq!(back, msg);
    }
}

#[test]
fn server_maxconn_queues_then_times_out_with_sq() {
    let n = node([127, 0, 1, 95], "one");
    let port = free_port();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    timeout queue 800ms\n    server one {} maxconn 1\n",
        n.addr()
    );
    let p = Proc::portcullis(&cfg, lo(port));
    // Two requests wait behind a slow one: the first queued one is served when the slot frees
    // (queue time > 0), the other one times out in the queue with 503 sQ--. The queue timeout
    // leaves 600 ms to spare over the slow request: a loaded machine once took more than 100.
    let slow = std::thread::spawn(move || get(lo(port), "/slow?ms=200"));
    std::thread::sleep(Duration::from_millis(50));
    let queued = std::thread::spawn(move || get(lo(port), "/after"));
    let r = slow.join().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(queued.join().unwrap().status, 200);
    let line = p
        .wait_log("\"GET /after HTTP/1.1\"", Duration::from_secs(5))
        .expect("log");
    let timers = line.split(' ').nth(4).expect("timers");
    let tw: i64 = timers
        .split('/')
        .nth(1)
        .and_then(|t| t.parse().ok())
        .expect("Tw");
    assert!(
        tw >= 100,
        "queued request should show its wait in Tw: {line}"
    );
    let slow = std::thread::spawn(move || get(lo(port), "/slow?ms=2000"));
    std::thread::sleep(Duration::from_millis(50));
    let r = get(lo(port), "/late");
    assert_eq!(r.status, 503);
    let line = p
        .wait_log("\"GET /late HTTP/1.1\"", Duration::from_secs(5))
        .expect("log");
    assert!(line.contains(" sQ-- "), "{line}");
    assert_eq!(slow.join().unwrap().status, 200);
}

/// A request with `Content-Length: 0` has no body to wait for: it is answered at once, with
/// keep-alive and without (HAProxy 2.6 does; an earlier portcullis waited for body bytes). A
/// response with `Content-Length: 0` ends at its head, so the next request follows.
#[test]
fn content_length_zero_is_answered_at_once() {
    let n = node([127, 0, 1, 42], "cl0");
    let port = free_port();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    server cl0 {}\n",
        n.addr()
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    let mut s = connect(lo(port));
    // Short enough that a hang fails the test quickly, long for a loaded machine.
    s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    for m in ["GET", "POST", "PUT"] {
        s.write_all(format!("{m} /z HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n").as_bytes())
            .unwrap();
        let r = read_response(&mut s, false).unwrap_or_else(|| panic!("{m}: no response"));
        assert_eq!(r.status, 200, "{m}");
        if m != "GET" {
            assert!(r.text().starts_with("len=0 "), "{m}: {}", r.text());
        }
    }
    // An empty response body on the same connection, twice.
    for _ in 0..2 {
        s.write_all(b"GET /size?bytes=0 HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap();
        let r = read_response(&mut s, false).expect("empty response");
        assert_eq!(r.status, 200);
        assert_eq!(r.header("content-length").as_deref(), Some("0"));
    }
    // Without keep-alive: answered, then closed.
    for m in ["GET", "POST", "PUT"] {
        let mut c = connect(lo(port));
        c.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
        c.write_all(
            format!("{m} /z HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
                .as_bytes(),
        )
        .unwrap();
        let r = read_response(&mut c, false).unwrap_or_else(|| panic!("{m} close: no response"));
        assert_eq!(r.status, 200, "{m}");
        let mut rest = Vec::new();
        assert_eq!(c.read_to_end(&mut rest).ok(), Some(0), "{m}: closed after");
    }
    let reqs = n.requests();
    assert_eq!(reqs.len(), 8);
    assert!(reqs.iter().all(|r| r.body_len == 0));
}

/// A server that closes its connection after each response, without saying so in a header: the
/// client's keep-alive connection stays, and each next request — with a body too, which cannot
/// be replayed — goes on a new server connection (HAProxy notices the idle connection's close).
#[test]
fn server_close_after_response_keeps_the_client() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = l.local_addr().expect("addr");
    let served = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = std::sync::Arc::clone(&served);
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { return };
            let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
            let mut buf = Vec::new();
            let mut b = [0u8; 4096];
            // Head, then as many body bytes as Content-Length says.
            let body_at = loop {
                if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                    break i + 4;
                }
                match c.read(&mut b) {
                    Ok(n) if n > 0 => buf.extend_from_slice(&b[..n]),
                    _ => return,
                }
            };
            let head = String::from_utf8_lossy(&buf[..body_at]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length:"))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            while buf.len() < body_at + len {
                match c.read(&mut b) {
                    Ok(n) if n > 0 => buf.extend_from_slice(&b[..n]),
                    _ => return,
                }
            }
            count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            // Dropped: the server closes right after its response.
        }
    });
    let port = free_port();
    let cfg = format!(
        "{GLOBAL}frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    server s1 {addr}\n"
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    let mut s = connect(lo(port));
    s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    for (i, req) in [
        "GET /1 HTTP/1.1\r\nHost: a\r\n\r\n",
        "HEAD /2 HTTP/1.1\r\nHost: a\r\n\r\n",
        "POST /3 HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\nthis is sent",
        "GET /4 HTTP/1.1\r\nHost: a\r\nContent-Length: 38\r\n\r\nthis must be delivered, like it or not",
    ]
    .iter()
    .enumerate()
    {
        // Let the server's close reach the proxy first, as a client's think time does.
        std::thread::sleep(Duration::from_millis(100));
        s.write_all(req.as_bytes()).unwrap();
        let r = read_response(&mut s, req.starts_with("HEAD"))
            .unwrap_or_else(|| panic!("request {i}: the client connection was closed"));
        assert_eq!(r.status, 200, "request {i}");
    }
    assert_eq!(served.load(std::sync::atomic::Ordering::SeqCst), 4);
}
