//! Out of file descriptors (issue 18): with `ulimit-n` low, idle clients take every descriptor;
//! accepting then pauses without a busy loop, says so once in HAProxy's words ("reached process
//! FD limit … Please check 'ulimit-n' and restart."), and serves again once descriptors free up.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::net::TcpStream;
use std::time::Duration;

use backend::{HttpNode, HttpOpts, free_port, lo, wait_until};
use proxy::{Proc, get};

/// CPU seconds (user + system) the process used so far.
fn cpu_secs(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let tick = 100.0; // USER_HZ on Linux
    let n = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (n(11) + n(12)) / tick
}

#[test]
fn accept_pauses_at_the_fd_limit_logs_once_and_recovers() {
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let port = free_port();
    let cfg = format!(
        "global\n    ulimit-n 96\n    nbthread 1\n\
         defaults\n    mode http\n    timeout connect 1s\n    timeout client 30s\n    timeout server 5s\n    \
         timeout http-request 30s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend b\n\
         backend b\n    server s1 {}\n",
        node.addr()
    );
    let p = Proc::portcullis(&cfg, lo(port));
    assert_eq!(get(lo(port), "/").status, 200);
    // Idle clients until the proxy runs out of descriptors (the kernel still completes the
    // handshakes: they wait in the backlog).
    let mut idle = Vec::new();
    let alert = "Proxy fe reached process FD limit";
    let hit = wait_until(Duration::from_secs(20), || {
        for _ in 0..10 {
            if let Ok(s) = TcpStream::connect(lo(port)) {
                idle.push(s);
            }
        }
        p.stderr.lock().unwrap().iter().any(|l| l.contains(alert))
    });
    assert!(hit, "no FD-limit alert after {} connections", idle.len());
    // Saturated for two seconds: no busy loop (a spinning accept would burn the whole core).
    let before = cpu_secs(p.pid());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_secs(p.pid()) - before;
    assert!(
        used < 0.5,
        "{used} s of CPU in 2 s while out of descriptors"
    );
    let alerts: Vec<String> = p
        .stderr
        .lock()
        .unwrap()
        .iter()
        .filter(|l| l.contains(alert))
        .cloned()
        .collect();
    assert_eq!(alerts.len(), 1, "{alerts:#?}");
    assert!(
        alerts[0].starts_with("[ALERT]")
            && alerts[0].ends_with("Please check 'ulimit-n' and restart."),
        "{alerts:?}"
    );
    // Descriptors come back: new clients are served again.
    drop(idle);
    let served = wait_until(Duration::from_secs(20), || {
        TcpStream::connect(lo(port)).is_ok() && get(lo(port), "/").status == 200
    });
    assert!(served, "not served again after the clients left");
}
