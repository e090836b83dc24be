//! Slow and greedy clients (issue 18): a slowloris crowd trickling request heads does not keep
//! normal clients from being answered and is cut off by `timeout http-request` (408); clients
//! that never read a big response cost the proxy a bounded amount of memory (backpressure:
//! nothing is buffered whole).

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use backend::{HttpNode, HttpOpts, free_port, lo};
use proxy::{Proc, get};

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn start(node: &HttpNode, extra: &str) -> (Proc, u16) {
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 20s\n    timeout server 20s\n{extra}\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend b\n\
         backend b\n    server s1 {}\n",
        node.addr()
    );
    (Proc::portcullis(&cfg, lo(port)), port)
}

#[test]
fn slowloris_heads_do_not_starve_normal_clients() {
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let (_p, port) = start(&node, "    timeout http-request 3s\n");
    let mut slow: Vec<TcpStream> = (0..500)
        .filter_map(|_| {
            let mut s = TcpStream::connect(lo(port)).ok()?;
            s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\nX-Slow: ").ok()?;
            Some(s)
        })
        .collect();
    assert!(
        slow.len() >= 450,
        "only {} slow clients connected",
        slow.len()
    );
    let started = Instant::now();
    let mut answered = 0;
    while started.elapsed() < Duration::from_secs(2) {
        // One more byte on every slow head, then a normal request that must get through.
        for s in &mut slow {
            let _ = s.write_all(b"x");
        }
        let t = Instant::now();
        assert_eq!(get(lo(port), "/normal").status, 200);
        // Generous: a busy CI machine, but nowhere near the slow clients' 3 s.
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
        answered += 1;
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(answered >= 5, "{answered}");
    // `timeout http-request` ends the incomplete heads with a 408 (or closes them).
    let mut timed_out = 0;
    for s in slow.iter_mut().take(20) {
        s.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf);
        let text = String::from_utf8_lossy(&buf);
        if buf.is_empty() || text.starts_with("HTTP/1.1 408") {
            timed_out += 1;
        }
    }
    assert_eq!(timed_out, 20);
    assert_eq!(
        node.requests().iter().filter(|r| r.target == "/").count(),
        0,
        "no slow head reached the server"
    );
}

#[test]
fn clients_that_never_read_cost_bounded_memory() {
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let (p, port) = start(&node, "");
    assert_eq!(get(lo(port), "/").status, 200);
    let before = rss_kib(p.pid());
    // 16 clients ask for 8 MiB each and read nothing.
    let greedy: Vec<TcpStream> = (0..16)
        .map(|_| {
            let mut s = TcpStream::connect(lo(port)).expect("connect");
            s.write_all(b"GET /size?bytes=8388608 HTTP/1.1\r\nHost: a\r\n\r\n")
                .expect("send");
            s
        })
        .collect();
    std::thread::sleep(Duration::from_secs(2));
    let grown = rss_kib(p.pid()).saturating_sub(before);
    // 128 MiB asked for; the proxy holds its buffers, not the responses.
    assert!(
        grown < 16 * 1024,
        "RSS grew by {grown} KiB for 16 stalled 8 MiB responses"
    );
    // The proxy still serves others meanwhile.
    assert_eq!(get(lo(port), "/other").status, 200);
    drop(greedy);
}

/// Keep-alive connections waiting for their next request (issue 21), `N` of them after one
/// request each, all answered again afterwards (some with two requests sent at once): the
/// proxy's RSS growth while they waited, in KiB. `lean_from`: `PORTCULLIS_LEAN_IDLE_FROM`.
fn idle_keepalive_growth(lean_from: &str) -> u64 {
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let port = free_port();
    let cfg = format!(
        "global\n    maxconn 4000\n\
         defaults\n    mode http\n    option http-server-close\n    timeout connect 1s\n\
         timeout client 30s\n    timeout server 30s\n    timeout http-keep-alive 30s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend b\n\
         backend b\n    server s1 {}\n",
        node.addr()
    );
    // (Transparent huge pages are off, see `huge_pages_stay_out_unless_asked_for`: khugepaged
    // folding a 2 MiB range of the arena at any moment would be more than is measured here.)
    let env = [("PORTCULLIS_LEAN_IDLE_FROM", lean_from)];
    let p = Proc::portcullis_env(&cfg, lo(port), &env);
    assert_eq!(get(lo(port), "/warm").status, 200);
    let before = rss_kib(p.pid());
    let mut idle: Vec<TcpStream> = (0..IDLE_N)
        .map(|i| {
            let mut s = TcpStream::connect(lo(port)).expect("connect");
            s.write_all(format!("GET /first{i} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes())
                .expect("send");
            let r = proxy::read_response(&mut s, false).expect("first response");
            assert_eq!(r.status, 200);
            s
        })
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let grown = rss_kib(p.pid()).saturating_sub(before);
    // Every waiting connection is still served: one request each, and two at once on some.
    for (i, s) in idle.iter_mut().enumerate() {
        if i % 100 == 0 {
            s.write_all(b"GET /a HTTP/1.1\r\nHost: a\r\n\r\nGET /b HTTP/1.1\r\nHost: a\r\n\r\n")
                .expect("send two");
            for _ in 0..2 {
                let r = proxy::read_response(s, false).expect("pipelined response");
                assert_eq!(r.status, 200);
            }
        } else {
            s.write_all(b"GET /again HTTP/1.1\r\nHost: a\r\n\r\n")
                .expect("send");
            let r = proxy::read_response(s, false).expect("second response");
            assert_eq!(r.status, 200);
        }
    }
    grown
}

const IDLE_N: u64 = 800;

/// `THP_enabled` of `/proc/PID/status`: whether the process may use transparent huge pages.
fn thp_enabled(pid: u32) -> Option<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()?
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))?
        .trim()
        .parse()
        .ok()
}

/// The proxy keeps transparent huge pages out of its memory (`process::keep_huge_pages_out`),
/// unless mimalloc's own `MIMALLOC_ALLOW_THP` says otherwise.
#[test]
fn huge_pages_stay_out_unless_asked_for() {
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    for (env, want) in [(None, 0), (Some("1"), 1), (Some("0"), 0)] {
        let port = free_port();
        let cfg = format!(
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n\
             timeout server 5s\nfrontend fe\n    bind 127.0.0.1:{port}\n    default_backend b\n\
             backend b\n    server s1 {}\n",
            node.addr()
        );
        let vars: Vec<(&str, &str)> = env.map(|v| ("MIMALLOC_ALLOW_THP", v)).into_iter().collect();
        let p = Proc::portcullis_env(&cfg, lo(port), &vars);
        assert_eq!(get(lo(port), "/").status, 200);
        assert_eq!(
            thp_enabled(p.pid()),
            Some(want),
            "MIMALLOC_ALLOW_THP={env:?}"
        );
    }
}

/// With the lean wait forced (`PORTCULLIS_LEAN_IDLE_FROM=0`: every such wait, not only past 512
/// connections) each holds no read buffer and a small state: under 2.5 KiB of resident memory
/// apiece in the debug build the suite runs (≈ 0.7 KiB on io_uring, where it parks; 1.7 on
/// epoll, where it waits in its task; release on io_uring ≈ 0.47).
#[test]
fn idle_keepalive_connections_wait_lean() {
    let grown = idle_keepalive_growth("0");
    assert!(
        grown < IDLE_N * 5 / 2,
        "RSS grew by {grown} KiB for {IDLE_N} idle keep-alive connections"
    );
}

/// Without the lean wait (fewer than `PORTCULLIS_LEAN_IDLE_FROM` connections) a connection
/// waits in its task with a small buffer, but not inside the whole transaction's future (4 KiB,
/// boxed once the next request's first bytes came): ≈ 3.4 KiB apiece in the debug build, 7.7
/// when the transaction waited.
#[test]
fn idle_keepalive_connections_in_their_task_hold_no_transaction() {
    let grown = idle_keepalive_growth("1000000");
    assert!(
        grown < IDLE_N * 5,
        "RSS grew by {grown} KiB for {IDLE_N} idle keep-alive connections"
    );
}

/// A lean idle wait ends at `timeout http-keep-alive` as any other: the connection is closed
/// without a response (no 408 between requests).
#[test]
fn lean_idle_wait_ends_at_keepalive_timeout() {
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 30s\n\
         timeout server 30s\n    timeout http-keep-alive 300ms\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend b\n\
         backend b\n    server s1 {}\n",
        node.addr()
    );
    let _p = Proc::portcullis_env(&cfg, lo(port), &[("PORTCULLIS_LEAN_IDLE_FROM", "0")]);
    let mut s = TcpStream::connect(lo(port)).expect("connect");
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
        .expect("send");
    assert_eq!(
        proxy::read_response(&mut s, false)
            .expect("response")
            .status,
        200
    );
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    let started = Instant::now();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "closed by the keep-alive timeout, not the read timeout"
    );
}
