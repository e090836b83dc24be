//! HTTP/1 connections parked between requests (issue 21): once the process waits lean (forced
//! here with `PORTCULLIS_LEAN_IDLE_FROM=0`), a worker's keep-alive connection waiting for its
//! next request leaves its task, its state parked in its socket's readiness slot (on the epoll
//! engine, its socket out of tokio's reactor meanwhile). What an operator sees is HAProxy's:
//! `show sess` does not list it (HAProxy frees an idle connection's stream), `timeout
//! http-keep-alive` closes it at its own time, a soft stop closes it as an idle connection, and
//! a client that leaves releases its slot.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use backend::{HttpNode, HttpOpts, free_port, lo, wait_until};
use proxy::{Proc, TempDir, admin_cli};

const LEAN: &[(&str, &str)] = &[("PORTCULLIS_LEAN_IDLE_FROM", "0")];

/// One request on `s`; its status.
fn ask(s: &mut TcpStream, path: &str) -> u16 {
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: a\r\n\r\n").as_bytes())
        .expect("send");
    proxy::read_response(s, false).expect("response").status
}

/// Connections that made one request each and now wait.
fn idle_clients(port: u16, n: usize) -> Vec<TcpStream> {
    (0..n)
        .map(|i| {
            let mut s = TcpStream::connect(lo(port)).expect("connect");
            assert_eq!(ask(&mut s, &format!("/first{i}")), 200);
            s
        })
        .collect()
}

/// Whether the peer closed `s` within `within` (EOF with no byte).
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).expect("timeout");
    let mut rest = Vec::new();
    s.read_to_end(&mut rest).is_ok() && rest.is_empty()
}

fn show_info(sock: &std::path::Path, field: &str) -> Option<u64> {
    admin_cli(sock, "show info")
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{field}: "))?.trim().parse().ok())
}

fn fe_lines(sock: &std::path::Path) -> Vec<String> {
    admin_cli(sock, "show sess")
        .lines()
        .filter(|l| l.contains(" fe=fe "))
        .map(String::from)
        .collect()
}

/// `show sess` while clients wait between requests: HAProxy 2.6 lists no stream for them
/// (it frees an idle connection's stream; the next request is a new one), nor does
/// portcullis for a parked connection, on either engine. Each then still gets its answers, and
/// clients that leave release their slots.
fn idle_sessions(haproxy: bool) -> Option<usize> {
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let dir = TempDir::new(if haproxy { "parked-ha" } else { "parked-pc" });
    let sock = dir.0.join("admin.sock");
    let port = free_port();
    let cfg = format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 1s\n    timeout client 30s\n\
         timeout server 30s\n    timeout http-keep-alive 30s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend b\n\
         backend b\n    server s1 {}\n",
        sock.display(),
        node.addr()
    );
    let _p = match haproxy {
        true => Proc::haproxy(&cfg, lo(port))?,
        false => Proc::portcullis_env(&cfg, lo(port), LEAN),
    };
    const N: usize = 20;
    let mut idle = idle_clients(port, N);
    // Ours park once silent for 100 ms (`PARK_AFTER`); HAProxy lists none from the start.
    wait_until(Duration::from_secs(5), || fe_lines(&sock).is_empty());
    let listed = fe_lines(&sock).len();
    // Each goes on, several times (parking again after each answer).
    for round in 0..3 {
        for (i, s) in idle.iter_mut().enumerate() {
            assert_eq!(ask(s, &format!("/again{round}")), 200, "connection {i}");
        }
    }
    drop(idle);
    assert!(
        wait_until(Duration::from_secs(5), || show_info(&sock, "CurrConns")
            == Some(0)),
        "CurrConns after the clients left: {:?}",
        show_info(&sock, "CurrConns")
    );
    assert!(fe_lines(&sock).is_empty(), "{:#?}", fe_lines(&sock));
    Some(listed)
}

#[test]
fn idle_connections_are_not_streams_as_in_haproxy() {
    let ours = idle_sessions(false).expect("portcullis");
    assert_eq!(ours, 0, "show sess lines");
    if let Some(theirs) = idle_sessions(true) {
        assert_eq!(theirs, 0, "HAProxy lists no idle connection");
    }
}

/// Parked connections of two frontends, one with a short `timeout http-keep-alive`: each closes
/// at its own deadline — the short ones while the long ones still answer.
#[test]
fn parked_connections_close_at_their_own_keepalive_timeout() {
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let (short, long) = (free_port(), free_port());
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 30s\n\
         timeout server 30s\n    timeout http-keep-alive 30s\n\
         frontend fe\n    bind 127.0.0.1:{short}\n    timeout http-keep-alive 300ms\n    \
         default_backend b\n\
         frontend fe2\n    bind 127.0.0.1:{long}\n    default_backend b\n\
         backend b\n    server s1 {}\n",
        node.addr()
    );
    let _p = Proc::portcullis_env(&cfg, lo(short), LEAN);
    // Long ones first: their deadlines are earlier in the heap's order of arrival.
    let mut l = idle_clients(long, 10);
    let mut s = idle_clients(short, 10);
    let started = Instant::now();
    for c in &mut s {
        assert!(closed_within(c, Duration::from_secs(10)), "short closes");
    }
    assert!(
        started.elapsed() < Duration::from_secs(9),
        "closed by the keep-alive timeout"
    );
    for c in &mut l {
        assert_eq!(ask(c, "/still"), 200, "the long ones wait on");
    }
}

/// A soft stop (SIGUSR1) ends parked connections as idle ones (without `timeout
/// http-keep-alive`: one second after the stop, not `timeout client`), and the process exits.
#[test]
fn a_soft_stop_ends_parked_connections() {
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 60s\n\
         timeout server 60s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend b\n\
         backend b\n    server s1 {}\n",
        node.addr()
    );
    let p = Proc::portcullis_env(&cfg, lo(port), LEAN);
    let mut idle = idle_clients(port, 10);
    std::thread::sleep(Duration::from_millis(100));
    let pid = p.pid();
    // SAFETY: a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGUSR1) }, 0);
    for c in &mut idle {
        assert!(
            closed_within(c, Duration::from_secs(20)),
            "closed at the stop"
        );
    }
    let gone = wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .map_or(true, |s| s.lines().any(|l| l.starts_with("State:\tZ")))
    });
    assert!(gone, "the process exits once its connections closed");
}
