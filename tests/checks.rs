//! Health checks with real probes against fake nodes: the seed's separate health port,
//! `inter 2s rise 2 fall 2`, and `on-marked-down shutdown-sessions` ending in-flight requests
//! with 502 `DH--` (the golden httplog-shutdown-sessions run, over plain HTTP until TLS lands).

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use backend::{HealthNode, HttpNode, HttpOpts, free_port};
use proxy::{Proc, get};

struct Node {
    data: HttpNode,
    health: HealthNode,
}

fn nodes(first: u8) -> Vec<Node> {
    (0..3u8)
        .map(|i| {
            let ip = IpAddr::from([127, 0, 1, first + i]);
            let name = ["master1", "worker1", "worker2"][i as usize];
            Node {
                data: HttpNode::start(SocketAddr::new(ip, 0), HttpOpts::named(name)).expect("data"),
                health: HealthNode::start(SocketAddr::new(ip, 0)).expect("health"),
            }
        })
        .collect()
}

fn config(port: u16, nodes: &[Node], extra_srv: &str) -> String {
    let names = ["master1", "worker1", "worker2"];
    let servers: String = nodes
        .iter()
        .zip(names)
        .map(|(n, name)| {
            format!(
                "    server {name} {} check port {} inter 2s rise 2 fall 2{extra_srv}\n",
                n.data.addr(),
                n.health.addr().port()
            )
        })
        .collect();
    format!(
        "global\n    nbthread 2\n\ndefaults\n    log stdout format raw local0\n    option dontlognull\n    timeout connect 5s\n    timeout client 1h\n    timeout server 1h\n    timeout http-request 10s\n    retries 3\n\nfrontend fe\n    mode http\n    option httplog\n    bind 127.0.0.1:{port}\n    default_backend istio-http-backend\n\nbackend istio-http-backend\n    mode http\n    balance roundrobin\n    option httpchk GET /health_check.html\n    http-check expect status 200\n{servers}"
    )
}

#[test]
fn failing_health_port_marks_down_and_shutdown_sessions_cuts_its_requests() {
    let nodes = nodes(111);
    let port = free_port();
    let front = SocketAddr::from(([127, 0, 0, 1], port));
    let p = Proc::portcullis(
        &config(port, &nodes, " on-marked-down shutdown-sessions"),
        front,
    );
    // Let every server get its first checks (spread over the first 2 s interval).
    std::thread::sleep(Duration::from_millis(2500));
    let start = Instant::now();
    let clients: Vec<_> = (0..6)
        .map(|i| {
            std::thread::spawn(move || {
                let r = get(front, &format!("/slow?ms=9000&c={i}"));
                (r.status, r.header("x-node"))
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    nodes[1].health.set_healthy(false);
    let results: Vec<(u16, Option<String>)> = clients
        .into_iter()
        .map(|c| c.join().expect("client"))
        .collect();
    let elapsed = start.elapsed();
    let cut = results.iter().filter(|(s, _)| *s == 502).count();
    let ok = results
        .iter()
        .filter(|(s, n)| *s == 200 && n.as_deref() != Some("worker1"))
        .count();
    assert_eq!((cut, ok), (2, 4), "{results:?}");
    assert!(
        elapsed >= Duration::from_secs(8),
        "the healthy requests ran to completion"
    );
    // The two requests on worker1 log 502 DH-- with Tr = -1 and Ta ~ the detection time.
    let lines: Vec<String> = p
        .log_lines()
        .into_iter()
        .filter(|l| l.contains(" DH-- "))
        .collect();
    assert_eq!(lines.len(), 2, "{:?}", p.log_lines());
    for l in &lines {
        assert!(
            l.contains(" istio-http-backend/worker1 ") && l.contains(" 502 "),
            "{l}"
        );
        let timers: Vec<i64> = l
            .split(' ')
            .nth(4)
            .unwrap()
            .split('/')
            .map(|t| t.parse().unwrap())
            .collect();
        assert_eq!(timers[3], -1, "Tr is -1: {l}");
        assert!(
            (2000..=5000).contains(&timers[4]),
            "Ta {} outside the 2 × inter window: {l}",
            timers[4]
        );
    }
    assert!(p.stderr.lock().unwrap().iter().any(|l| l.contains("Server istio-http-backend/worker1 is DOWN, reason: Layer7 wrong status, code: 503, info: \"Service Unavailable\"")));
    // New requests avoid the DOWN server.
    for _ in 0..6 {
        let r = get(front, "/after");
        assert_eq!(r.status, 200);
        assert_ne!(r.header("x-node").as_deref(), Some("worker1"));
    }
}

#[test]
fn server_comes_back_after_rise_successes() {
    let nodes = nodes(121);
    nodes[0].health.set_healthy(false);
    let port = free_port();
    let front = SocketAddr::from(([127, 0, 0, 1], port));
    let p = Proc::portcullis(&config(port, &nodes, ""), front);
    let down = "Server istio-http-backend/master1 is DOWN";
    let deadline = Instant::now() + Duration::from_secs(6);
    while !p.stderr.lock().unwrap().iter().any(|l| l.contains(down)) {
        assert!(
            Instant::now() < deadline,
            "master1 not marked DOWN: {:?}",
            p.stderr.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    for _ in 0..4 {
        assert_ne!(get(front, "/").header("x-node").as_deref(), Some("master1"));
    }
    nodes[0].health.set_healthy(true);
    let up = "Server istio-http-backend/master1 is UP, reason: Layer7 check passed, code: 200";
    let deadline = Instant::now() + Duration::from_secs(8);
    while !p.stderr.lock().unwrap().iter().any(|l| l.contains(up)) {
        assert!(
            Instant::now() < deadline,
            "master1 not back UP: {:?}",
            p.stderr.lock().unwrap()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let seen: Vec<Option<String>> = (0..6).map(|_| get(front, "/").header("x-node")).collect();
    assert!(
        seen.iter().any(|n| n.as_deref() == Some("master1")),
        "{seen:?}"
    );
}

#[test]
fn active_server_back_up_ends_backup_sessions_with_u() {
    let ip_a = IpAddr::from([127, 0, 1, 131]);
    let ip_b = IpAddr::from([127, 0, 1, 132]);
    let active =
        HttpNode::start(SocketAddr::new(ip_a, 0), HttpOpts::named("active")).expect("active");
    let active_health = HealthNode::start(SocketAddr::new(ip_a, 0)).expect("health");
    let backup =
        HttpNode::start(SocketAddr::new(ip_b, 0), HttpOpts::named("backup")).expect("backup");
    active_health.set_healthy(false);
    let port = free_port();
    let front = SocketAddr::from(([127, 0, 0, 1], port));
    let cfg = format!(
        "defaults\n    mode http\n    log stdout format raw local0\n    option httplog\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n\nfrontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    option httpchk GET /health_check.html\n    server active {} check port {} inter 300ms rise 2 fall 1\n    server spare {} backup on-marked-up shutdown-backup-sessions\n",
        active.addr(),
        active_health.addr().port(),
        backup.addr()
    );
    let p = Proc::portcullis(&cfg, front);
    let deadline = Instant::now() + Duration::from_secs(5);
    while get(front, "/probe").header("x-node").as_deref() != Some("backup") {
        assert!(
            Instant::now() < deadline,
            "traffic never moved to the backup"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let slow = std::thread::spawn(move || get(front, "/slow?ms=8000").status);
    std::thread::sleep(Duration::from_millis(300));
    active_health.set_healthy(true);
    assert_eq!(slow.join().expect("client"), 502);
    let line = p
        .wait_log(" UH-- ", Duration::from_secs(3))
        .unwrap_or_else(|| panic!("{:?}", p.log_lines()));
    assert!(
        line.contains(" be/spare ") && line.contains(" 502 "),
        "{line}"
    );
}
