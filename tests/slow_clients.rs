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
