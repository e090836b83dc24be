//! The fake backends of `tests/support/backend.rs`, exercised with plain std clients.

#[path = "support/backend.rs"]
mod backend;

use backend::*;
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn local(ip: [u8; 4]) -> SocketAddr {
    let ip = IpAddr::V4(Ipv4Addr::from(ip));
    SocketAddr::new(ip, free_port_on(ip))
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// A response as read by [`read_response`]: status, lower-cased headers, de-chunked body.
#[derive(Debug)]
struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }
    fn text(&self) -> String {
        String::from_utf8(self.body.clone()).unwrap()
    }
}

fn read_until(s: &mut TcpStream, buf: &mut Vec<u8>, pat: &[u8]) -> usize {
    loop {
        if let Some(i) = buf.windows(pat.len()).position(|w| w == pat) {
            return i;
        }
        let mut tmp = [0u8; 8192];
        let n = s.read(&mut tmp).unwrap();
        assert!(n > 0, "EOF while waiting for {pat:?}");
        buf.extend_from_slice(&tmp[..n]);
    }
}

fn read_exact_buf(s: &mut TcpStream, buf: &mut Vec<u8>, n: usize) -> Vec<u8> {
    while buf.len() < n {
        let mut tmp = [0u8; 65536];
        let got = s.read(&mut tmp).unwrap();
        assert!(got > 0, "EOF in body");
        buf.extend_from_slice(&tmp[..got]);
    }
    buf.drain(..n).collect()
}

/// Reads one response; `buf` carries bytes over between responses on one connection.
fn read_response(s: &mut TcpStream, buf: &mut Vec<u8>, head_only: bool) -> Resp {
    let end = read_until(s, buf, b"\r\n\r\n");
    let head: Vec<u8> = buf.drain(..end + 4).collect();
    let head = String::from_utf8(head).unwrap();
    let mut lines = head.split("\r\n");
    let status: u16 = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_string()))
        .collect();
    let mut resp = Resp {
        status,
        headers,
        body: Vec::new(),
    };
    if head_only || status == 101 || status == 204 || status == 304 {
        return resp;
    }
    if resp.header("transfer-encoding") == Some("chunked") {
        loop {
            let i = read_until(s, buf, b"\r\n");
            let line: Vec<u8> = buf.drain(..i + 2).collect();
            let size = usize::from_str_radix(std::str::from_utf8(&line[..i]).unwrap(), 16).unwrap();
            let data = read_exact_buf(s, buf, size + 2);
            assert_eq!(&data[size..], b"\r\n");
            if size == 0 {
                break;
            }
            resp.body.extend_from_slice(&data[..size]);
        }
    } else if let Some(n) = resp.header("content-length") {
        let n: usize = n.parse().unwrap();
        resp.body = read_exact_buf(s, buf, n);
    } else {
        s.read_to_end(buf).unwrap();
        resp.body = std::mem::take(buf);
    }
    resp
}

fn get(s: &mut TcpStream, buf: &mut Vec<u8>, target: &str) -> Resp {
    write!(s, "GET {target} HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    read_response(s, buf, false)
}

#[test]
fn default_route_keep_alive_and_records() {
    let node = HttpNode::start(local([127, 0, 1, 12]), HttpOpts::named("master1")).unwrap();
    assert_eq!(node.addr().ip(), IpAddr::V4(Ipv4Addr::new(127, 0, 1, 12)));
    let mut s = connect(node.addr());
    let mut buf = Vec::new();
    let r = get(&mut s, &mut buf, "/a?b=1");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "node=master1 path=/a?b=1\n");
    assert_eq!(r.header("x-node"), Some("master1"));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    let r = get(&mut s, &mut buf, "/second");
    assert_eq!(r.text(), "node=master1 path=/second\n");
    assert_eq!(node.connections(), 1);

    let mut s2 = connect(node.addr());
    let r = get(&mut s2, &mut Vec::new(), "/third");
    assert_eq!(r.header("x-conn-id"), Some("2"));

    let reqs = node.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0].head, "GET /a?b=1 HTTP/1.1\r\nHost: t\r\n\r\n");
    assert_eq!(reqs[0].method, "GET");
    assert_eq!(reqs[0].target, "/a?b=1");
    assert_eq!(reqs[0].header("host").as_deref(), Some("t"));
    assert_eq!(
        reqs.iter().map(|r| r.conn_id).collect::<Vec<_>>(),
        vec![1, 1, 2]
    );
    assert_eq!(node.connections(), 2);
}

#[test]
fn echo_headers_returns_head_as_received() {
    let node = HttpNode::start(local([127, 0, 0, 1]), HttpOpts::named("n")).unwrap();
    let mut s = connect(node.addr());
    let head = "GET /echo-headers HTTP/1.1\r\nHost: x\r\nX-Mixed-Case:  spaced \r\n\r\n";
    s.write_all(head.as_bytes()).unwrap();
    let r = read_response(&mut s, &mut Vec::new(), false);
    assert_eq!(r.text(), head);
}

#[test]
fn size_and_chunked_bodies() {
    let node = HttpNode::start(local([127, 0, 0, 1]), HttpOpts::named("n")).unwrap();
    let mut s = connect(node.addr());
    let mut buf = Vec::new();
    let r = get(&mut s, &mut buf, "/size?bytes=200000");
    assert_eq!(r.header("content-length"), Some("200000"));
    assert_eq!(r.body, size_body(200_000));
    assert_eq!(&r.body[..3], b"abc");
    let r = get(&mut s, &mut buf, "/size?bytes=0");
    assert!(r.body.is_empty());
    let r = get(&mut s, &mut buf, "/chunked?n=5");
    assert_eq!(r.header("transfer-encoding"), Some("chunked"));
    assert_eq!(r.text(), "chunk 0\nchunk 1\nchunk 2\nchunk 3\nchunk 4\n");
    assert_eq!(r.text(), chunked_body(5));
    // Still the same connection after all three.
    assert_eq!(node.connections(), 1);
}

#[test]
fn head_request_has_no_body() {
    let node = HttpNode::start(local([127, 0, 0, 1]), HttpOpts::named("n")).unwrap();
    let mut s = connect(node.addr());
    let mut buf = Vec::new();
    s.write_all(b"HEAD /size?bytes=10 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let r = read_response(&mut s, &mut buf, true);
    assert_eq!(r.header("content-length"), Some("10"));
    let r = get(&mut s, &mut buf, "/after");
    assert_eq!(r.text(), "node=n path=/after\n");
}

#[test]
fn uploads_with_length_and_chunked() {
    let node = HttpNode::start(local([127, 0, 0, 1]), HttpOpts::named("n")).unwrap();
    let mut s = connect(node.addr());
    let mut buf = Vec::new();
    let body: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 256) as u8).collect();
    write!(
        s,
        "POST /up HTTP/1.1\r\nHost: t\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .unwrap();
    s.write_all(&body).unwrap();
    let r = read_response(&mut s, &mut buf, false);
    assert_eq!(r.text(), upload_answer(&body));
    assert_eq!(
        r.text(),
        format!("len=3000000 sum={:016x}\n", fnv1a64(&body))
    );

    s.write_all(b"PUT /up HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n")
        .unwrap();
    s.write_all(b"5\r\nhello\r\n6;ext=1\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\n")
        .unwrap();
    let r = read_response(&mut s, &mut buf, false);
    assert_eq!(r.text(), upload_answer(b"hello world"));

    let reqs = node.requests();
    assert_eq!(reqs[0].body_len, 3_000_000);
    assert_eq!(reqs[0].body_sum, fnv1a64(&body));
    assert_eq!(reqs[1].method, "PUT");
    assert_eq!(reqs[1].body_len, 11);
    assert_eq!(reqs[1].conn_id, 1);
}

#[test]
fn fnv1a_known_values() {
    assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
    assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    let mut h = Fnv1a::new();
    h.update(b"foo");
    h.update(b"bar");
    assert_eq!(h.finish(), fnv1a64(b"foobar"));
    assert_eq!(fnv1a64(b"foobar"), 0x85944171f73967e8);
}

#[test]
fn slow_and_status() {
    let node = HttpNode::start(local([127, 0, 0, 1]), HttpOpts::named("n")).unwrap();
    let mut s = connect(node.addr());
    let mut buf = Vec::new();
    let t = Instant::now();
    let r = get(&mut s, &mut buf, "/slow?ms=300");
    assert!(t.elapsed() >= Duration::from_millis(300));
    assert_eq!(r.text(), "node=n path=/slow?ms=300\n");
    let r = get(&mut s, &mut buf, "/status?code=503");
    assert_eq!(r.status, 503);
    assert_eq!(r.text(), "status=503\n");
    let r = get(&mut s, &mut buf, "/status?code=204");
    assert_eq!(r.status, 204);
    assert!(r.body.is_empty());
    let r = get(&mut s, &mut buf, "/status?code=99");
    assert_eq!(r.status, 400);
}

#[test]
fn stream_lasts_its_duration() {
    let node = HttpNode::start(local([127, 0, 0, 1]), HttpOpts::named("n")).unwrap();
    let mut s = connect(node.addr());
    let t = Instant::now();
    let r = get(&mut s, &mut Vec::new(), "/stream?seconds=1");
    let took = t.elapsed();
    assert!(took >= Duration::from_millis(900), "{took:?}");
    assert!(took < Duration::from_secs(3), "{took:?}");
    let text = r.text();
    assert!(text.starts_with("tick 0\ntick 1\n"), "{text}");
    assert!(text.lines().count() >= 5, "{text}");
}

#[test]
fn http10_and_close_are_honoured() {
    let node = HttpNode::start(local([127, 0, 0, 1]), HttpOpts::named("n")).unwrap();
    let mut s = connect(node.addr());
    s.write_all(b"GET /old HTTP/1.0\r\n\r\n").unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    assert!(all.starts_with("HTTP/1.1 200 OK\r\n"), "{all}");
    assert!(all.contains("connection: close\r\n"), "{all}");
    assert!(all.ends_with("\r\n\r\nnode=n path=/old\n"), "{all}");

    let node = HttpNode::start(
        local([127, 0, 0, 1]),
        HttpOpts {
            keep_alive: false,
            ..HttpOpts::named("c")
        },
    )
    .unwrap();
    let mut s = connect(node.addr());
    s.write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    let mut all = String::new();
    s.read_to_string(&mut all).unwrap();
    assert!(all.contains("connection: close\r\n"), "{all}");
}

#[test]
fn bad_request_gets_400() {
    let node = HttpNode::start(local([127, 0, 0, 1]), HttpOpts::named("n")).unwrap();
    let mut s = connect(node.addr());
    s.write_all(b"garbage\r\n\r\n").unwrap();
    let r = read_response(&mut s, &mut Vec::new(), false);
    assert_eq!(r.status, 400);
}

#[test]
fn websocket_upgrade_echoes() {
    let node = HttpNode::start(local([127, 0, 0, 1]), HttpOpts::named("n")).unwrap();
    let mut s = connect(node.addr());
    // The key and accept value are RFC 6455's own example.
    s.write_all(
        b"GET /ws HTTP/1.1\r\nHost: t\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\
          Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\nearly",
    )
    .unwrap();
    let mut buf = Vec::new();
    let r = read_response(&mut s, &mut buf, false);
    assert_eq!(r.status, 101);
    assert_eq!(
        r.header("sec-websocket-accept"),
        Some("s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
    );
    s.write_all(b" and late").unwrap();
    s.shutdown(Shutdown::Write).unwrap();
    s.read_to_end(&mut buf).unwrap();
    assert_eq!(buf, b"early and late");
    assert_eq!(node.ws_bytes(), 14);
}

#[test]
fn health_node_switches() {
    let h = HealthNode::start(local([127, 0, 1, 13])).unwrap();
    let check = |h: &HealthNode| {
        let mut s = connect(h.addr());
        s.write_all(b"GET /health_check.html HTTP/1.0\r\n\r\n")
            .unwrap();
        let mut all = String::new();
        s.read_to_string(&mut all).unwrap();
        all
    };
    assert!(check(&h).starts_with("HTTP/1.1 200 OK\r\n"));
    h.set_healthy(false);
    assert!(!h.is_healthy());
    let down = check(&h);
    assert!(
        down.starts_with("HTTP/1.1 503 Service Unavailable\r\n"),
        "{down}"
    );
    assert!(down.ends_with("DOWN\n"), "{down}");
    h.set_healthy(true);
    assert!(check(&h).ends_with("\r\n\r\nOK\n"));
    assert_eq!(h.checks(), 3);
    let mut s = connect(h.addr());
    let r = get(&mut s, &mut Vec::new(), "/other");
    assert_eq!(r.status, 404);
    assert_eq!(h.connections(), 4);
}

#[test]
fn tcp_echo_propagates_half_close() {
    let e = TcpEcho::start(local([127, 0, 1, 14])).unwrap();
    let mut s = connect(e.addr());
    let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 253) as u8).collect();
    let mut w = s.try_clone().unwrap();
    let sent = data.clone();
    let writer = std::thread::spawn(move || {
        w.write_all(&sent).unwrap();
        w.shutdown(Shutdown::Write).unwrap();
    });
    let mut back = Vec::new();
    s.read_to_end(&mut back).unwrap();
    writer.join().unwrap();
    assert_eq!(back.len(), data.len());
    assert!(back == data);
    assert_eq!(e.bytes_echoed(), 1_000_000);
    assert_eq!(e.connections(), 1);
}

#[test]
fn refusing_and_free_ports() {
    let r = RefusingPort::new().unwrap();
    let err = TcpStream::connect(r.addr()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    let p = free_port();
    assert_ne!(p, 0);
    std::net::TcpListener::bind(("127.0.0.1", p)).unwrap();
}

#[test]
fn drop_stops_quickly_and_frees_the_port() {
    let addr = local([127, 0, 0, 1]);
    let node = HttpNode::start(addr, HttpOpts::named("n")).unwrap();
    let mut idle = connect(addr);
    let r = get(&mut idle, &mut Vec::new(), "/");
    assert_eq!(r.status, 200);
    let mut streaming = connect(addr);
    streaming
        .write_all(b"GET /stream?seconds=30 HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let mut first = [0u8; 1];
    streaming.read_exact(&mut first).unwrap();
    assert!(wait_until(Duration::from_secs(2), || node
        .open_connections()
        == 2));

    let t = Instant::now();
    drop(node);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    // Both connections end: the idle one at once, the streaming one after its last bytes.
    let mut rest = Vec::new();
    assert_eq!(idle.read_to_end(&mut rest).unwrap(), 0);
    let _ = streaming.read_to_end(&mut rest);
    assert_eq!(
        TcpStream::connect(addr).unwrap_err().kind(),
        std::io::ErrorKind::ConnectionRefused
    );
    // The same address can serve again right away.
    let again = HttpNode::start(addr, HttpOpts::named("again")).unwrap();
    let r = get(&mut connect(addr), &mut Vec::new(), "/");
    assert_eq!(r.text(), "node=again path=/\n");
    drop(again);

    let e = TcpEcho::start(local([127, 0, 0, 1])).unwrap();
    let _open = connect(e.addr());
    assert!(wait_until(Duration::from_secs(2), || e.open_connections() == 1));
    e.close_connections();
    assert!(wait_until(Duration::from_secs(2), || e.open_connections() == 0));
    let t = Instant::now();
    drop(e);
    assert!(t.elapsed() < Duration::from_secs(1));
}

/// Ports handed out for proxies to bind lie below the kernel's ephemeral range (so no server
/// binding port 0 and no outgoing connection can be given one of them) and are not repeated.
#[test]
fn free_ports_are_outside_the_ephemeral_range_and_distinct() {
    let low: u16 = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let ports: Vec<u16> = (0..200).map(|_| free_port()).collect();
    let mut seen = ports.clone();
    seen.sort_unstable();
    seen.dedup();
    assert_eq!(seen.len(), ports.len(), "a port was handed out twice");
    if low >= 30_000 {
        assert!(ports.iter().all(|&p| p < low), "{ports:?} vs {low}");
    }
    // Ephemeral binds never land on them.
    let servers: Vec<_> = (0..200)
        .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    for s in &servers {
        assert!(!ports.contains(&s.local_addr().unwrap().port()));
    }
}
