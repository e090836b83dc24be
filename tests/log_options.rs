//! `option dontlog-normal`, `option log-separate-errors` and `option tcpka` (issue 16), against
//! HAProxy 2.6: which sessions are logged and at which syslog level, and SO_KEEPALIVE on both
//! sides of a session.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{TcpStream, UdpSocket};
use std::process::Command;
use std::time::Duration;

use backend::{HttpNode, HttpOpts, RefusingPort, TcpEcho, free_port, lo};
use proxy::{Proc, get};

/// The PRI and status of every log line received until a quiet second: `<131> 503`. The
/// harness's own readiness probe (a connection closed at once, `<BADREQ>`) is left out: whether
/// a proxy sees it before its logger is up is a matter of timing.
fn lines(udp: &UdpSocket) -> Vec<String> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(len) = udp.recv(&mut buf) {
        let l = String::from_utf8_lossy(&buf[..len]).into_owned();
        if l.contains("<BADREQ>") {
            continue;
        }
        let pri = l.split('>').next().unwrap_or("").to_string() + ">";
        // httplog: `... <status> <bytes> - - ---- ...`; the status follows the timers.
        let status = l
            .split_whitespace()
            .skip_while(|w| !w.contains('/') || w.matches('/').count() < 4)
            .nth(1)
            .unwrap_or("?")
            .to_string();
        out.push(format!("{pri} {status}"));
    }
    out
}

fn scenario(haproxy: bool) -> Option<Vec<String>> {
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let dead = RefusingPort::new().expect("refusing port");
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(1))).unwrap();
    let port = free_port();
    let cfg = format!(
        "global\n    log {} local0\n\
         defaults\n    mode http\n    log global\n    option httplog\n    option dontlog-normal\n    \
         option log-separate-errors\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    use_backend dead if {{ path_beg /dead }}\n    default_backend b\n\
         backend b\n    server s1 {}\n\
         backend dead\n    retries 0\n    server s2 {}\n",
        udp.local_addr().unwrap(),
        node.addr(),
        dead.addr()
    );
    let p = if haproxy {
        Proc::haproxy(&cfg, lo(port))?
    } else {
        Proc::portcullis(&cfg, lo(port))
    };
    // Normal (200, and a 404 from the server): not logged. Errors: logged at `err` (local0.err
    // = <131>).
    let mut seen: Vec<String> = [
        "/ok",
        "/status?code=404",
        "/dead",
        "/status?code=500",
        "/ok2",
    ]
    .iter()
    .map(|path| get(lo(port), path).status.to_string())
    .collect();
    // Sorted: a session is logged when it ends, and sessions on different worker threads end in
    // either order (seen once in CI: the 500's line before the 503's).
    let mut logged = lines(&udp);
    logged.sort();
    seen.extend(logged);
    drop(p);
    Some(seen)
}

#[test]
fn only_error_sessions_are_logged_at_err_as_haproxy() {
    let ours = scenario(false).expect("portcullis");
    assert_eq!(
        ours,
        ["200", "404", "503", "500", "200", "<131> 500", "<131> 503"],
        "{ours:?}"
    );
    if let Some(theirs) = scenario(true) {
        assert_eq!(ours, theirs);
    }
}

/// `ss` shows a keepalive timer on a socket with SO_KEEPALIVE.
fn keepalive_timers(port: u16) -> (bool, bool) {
    let out = Command::new("ss")
        .args(["-tnoH", "state", "established"])
        .output()
        .expect("ss (iproute2)");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut client_side = false;
    let mut server_side = false;
    for l in text.lines().filter(|l| l.contains("keepalive")) {
        let f: Vec<&str> = l.split_whitespace().collect();
        // Local address then peer address.
        if f.get(2).is_some_and(|a| a.ends_with(&format!(":{port}"))) {
            client_side = true;
        }
        if f.get(3)
            .is_some_and(|a| a.ends_with(&format!(":{}", port + 1)))
        {
            server_side = true;
        }
    }
    (client_side, server_side)
}

#[test]
fn tcpka_sets_so_keepalive_on_both_sides() {
    // The echo server on port+1 so that `ss` can tell the proxy's server socket.
    // Both ports taken from the allocator, so that a test running beside this one is not handed
    // `p + 1` between the two binds.
    let port = loop {
        let p = free_port();
        if free_port() != p.wrapping_add(1) {
            continue;
        }
        if let Ok(e) = TcpEcho::start(lo(p + 1)) {
            break (p, e);
        }
    };
    let (port, _echo) = port;
    let cfg = format!(
        "defaults\n    mode tcp\n    option tcpka\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         listen l\n    bind 127.0.0.1:{port}\n    server s 127.0.0.1:{}\n",
        port + 1
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    let mut c = TcpStream::connect(lo(port)).expect("connect");
    c.write_all(b"ping").unwrap();
    let mut b = [0u8; 4];
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.read_exact(&mut b).unwrap();
    assert_eq!(keepalive_timers(port), (true, true));
}
