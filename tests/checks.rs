//! Health checks with real probes against fake nodes: the seed's separate health port,
//! `inter 2s rise 2 fall 2`, and `on-marked-down shutdown-sessions` ending in-flight requests
//! with 502 `DH--` — and the golden httplog-shutdown-sessions run itself, on the seed-loopback
//! config verbatim over TLS.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/shared.rs"]
mod shared;

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

/// The golden run (`../shared/docs/haproxy-2.6-golden/httplog-shutdown-sessions.txt`): the seed's
/// loopback config verbatim, six concurrent `GET /slow?ms=9000` over TLS through 10443, worker1's
/// health flipped to 503 at t≈0.5 s. HAProxy 2.6 answered the two requests on worker1 with 502
/// logged `DH--`, Tr = -1, Ta ≈ 4000 ms; the other four got 200.
#[test]
fn golden_seed_loopback_shutdown_sessions_over_tls() {
    let dir = proxy::TempDir::new("seed-golden");
    let ck = rcgen::generate_simple_self_signed(vec!["example.local".to_string()]).expect("cert");
    let cert = dir.0.join("seed.pem");
    std::fs::write(
        &cert,
        format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem()),
    )
    .expect("cert");
    let cfg = std::fs::read_to_string(shared::shared_path("configs/seed-loopback.cfg"))
        .expect("seed-loopback.cfg");
    let names = ["master1", "worker1", "worker2"];
    let nodes: Vec<Node> = (0..3u8)
        .map(|i| {
            let ip = IpAddr::from([127, 0, 1, 12 + i]);
            Node {
                data: HttpNode::start(
                    SocketAddr::new(ip, 30080),
                    HttpOpts::named(names[i as usize]),
                )
                .expect("data port 30080"),
                health: HealthNode::start(SocketAddr::new(ip, 30180)).expect("health port 30180"),
            }
        })
        .collect();
    let front = SocketAddr::from(([127, 0, 0, 1], 10443));
    let p = Proc::portcullis_env(
        &cfg,
        front,
        &[
            ("CERT", cert.to_str().expect("utf-8 path")),
            ("RUNDIR", dir.0.to_str().expect("utf-8 path")),
        ],
    );
    std::thread::sleep(Duration::from_millis(2500));
    // All nodes up: the recipe's first moment.
    let all_up =
        "master1=UP check=L7OK\nworker1=UP check=L7OK\nworker2=UP check=L7OK\nBACKEND=UP check=\n";
    let sock = dir.0.join("admin.sock");
    assert!(
        backend::wait_until(Duration::from_secs(5), || recipe(&sock) == all_up),
        "{}",
        recipe(&sock)
    );
    // The golden README's h2 request: the node sees the forwarded headers, the log shows
    // HAProxy's h2 request line.
    let out = std::process::Command::new("curl")
        .args([
            "-sk",
            "--http2",
            "--max-time",
            "10",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code} %{http_version}",
        ])
        .args(["--resolve", "example.local:10443:127.0.0.1"])
        .arg("https://example.local:10443/hello")
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "200 2");
    let seen = nodes
        .iter()
        .flat_map(|n| n.data.requests())
        .find(|r| r.target == "/hello")
        .expect("a node got /hello");
    assert_eq!(seen.header("x-forwarded-proto").as_deref(), Some("https"));
    assert_eq!(seen.header("x-forwarded-for").as_deref(), Some("127.0.0.1"));
    assert_eq!(
        seen.header("x-forwarded-host").as_deref(),
        Some("example.local:10443")
    );
    let l = p
        .wait_log(
            "\"GET https://example.local:10443/hello HTTP/2.0\"",
            Duration::from_secs(5),
        )
        .unwrap_or_else(|| panic!("{:?}", p.log_lines()));
    assert!(l.contains(" istio-https-l7~ istio-http-backend/"), "{l}");
    let clients: Vec<_> = (0..6)
        .map(|_| {
            std::thread::spawn(move || {
                let out = std::process::Command::new("curl")
                    .args(["-sk", "--http1.1", "--max-time", "20", "-o", "/dev/null"])
                    .args(["-w", "%{http_code}"])
                    .arg("https://127.0.0.1:10443/slow?ms=9000")
                    .output()
                    .expect("curl is installed by cargo xtask setup");
                String::from_utf8_lossy(&out.stdout).into_owned()
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    nodes[1].health.set_healthy(false);
    let mut codes: Vec<String> = clients
        .into_iter()
        .map(|c| c.join().expect("client"))
        .collect();
    codes.sort();
    assert_eq!(codes, ["200", "200", "200", "200", "502", "502"]);
    let cut = regex::Regex::new(
        r#"^127\.0\.0\.1:\d+ \[\d\d/\w{3}/\d{4}:\d\d:\d\d:\d\d\.\d{3}\] istio-https-l7~ istio-http-backend/worker1 \d+/\d+/\d+/-1/(\d+) 502 209 - - DH-- \d+/\d+/\d+/\d+/0 0/0 "GET /slow\?ms=9000 HTTP/1\.1"$"#,
    )
    .expect("regex");
    let ok = regex::Regex::new(
        r#" istio-https-l7~ istio-http-backend/(master1|worker2) \d+/\d+/\d+/\d+/\d+ 200 \d+ - - ---- .* "GET /slow\?ms=9000 HTTP/1\.1"$"#,
    )
    .expect("regex");
    let done = |l: &String| cut.is_match(l) || ok.is_match(l);
    backend::wait_until(Duration::from_secs(3), || {
        p.log_lines().iter().filter(|l| done(l)).count() >= 6
    });
    let lines = p.log_lines();
    let cut_lines: Vec<&String> = lines.iter().filter(|l| cut.is_match(l)).collect();
    assert_eq!(cut_lines.len(), 2, "{lines:#?}");
    for l in cut_lines {
        let ta: u64 = cut.captures(l).and_then(|c| c[1].parse().ok()).expect("Ta");
        assert!(
            (2400..=6500).contains(&ta),
            "Ta {ta} is the detection window: {l}"
        );
    }
    assert_eq!(
        lines.iter().filter(|l| ok.is_match(l)).count(),
        4,
        "{lines:#?}"
    );
    let stderr = p.stderr.lock().expect("stderr").join("\n");
    assert!(
        stderr.contains(
            "Server istio-http-backend/worker1 is DOWN, reason: Layer7 wrong status, code: 503, \
             info: \"Service Unavailable\", check duration: "
        ) && stderr.contains(
            "2 active and 0 backup servers left. 2 sessions active, 0 requeued, 0 remaining in queue."
        ),
        "{stderr}"
    );
    // The seed's awk recipe, literally (socat + awk), through the golden README's other moments.
    assert_eq!(
        recipe(&sock),
        "master1=UP check=L7OK\nworker1=DOWN check=L7STS\nworker2=UP check=L7OK\nBACKEND=UP check=\n"
    );
    nodes[1].health.set_healthy(true);
    nodes[0].health.set_healthy(false);
    let want = "master1=DOWN check=L7STS\nworker1=UP check=L7OK\nworker2=UP check=L7OK\nBACKEND=UP check=\n";
    assert!(
        backend::wait_until(Duration::from_secs(10), || recipe(&sock) == want),
        "{}",
        recipe(&sock)
    );
    cli(&sock, "set server istio-http-backend/worker2 state drain");
    cli(&sock, "disable server istio-http-backend/worker1");
    assert_eq!(
        recipe(&sock),
        "master1=DOWN check=L7STS\nworker1=MAINT check=\nworker2=DRAIN check=L7OK\nBACKEND=DOWN check=\n"
    );
}

/// The seed's recipe, literally, through socat and awk.
fn recipe(sock: &std::path::Path) -> String {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo \"show stat\" | socat {} stdio | awk -F, '/istio-http-backend/{{print $2\"=\"$18\" check=\"$37}}'",
            sock.display()
        ))
        .output()
        .expect("sh");
    // A check running at the moment of the dump reads `* L7OK` (HAProxy's in-progress mark,
    // as HAProxy prints it): on a busy machine that moment can be any dump.
    String::from_utf8_lossy(&out.stdout).replace("check=* ", "check=")
}

fn cli(sock: &std::path::Path, cmd: &str) -> String {
    use std::io::{Read, Write};
    let mut s = proxy::admin_connect(sock);
    s.write_all(format!("{cmd}\n").as_bytes()).expect("write");
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// HAProxy's shutdown-sessions also ends the streams still retrying a connection to the server
/// when it goes DOWN: 503 logged `DC--` at once, instead of the retries running out (`SC--`).
#[test]
fn shutdown_sessions_ends_requests_still_retrying_with_dc() {
    let refusing = backend::RefusingPort::on(IpAddr::from([127, 0, 1, 171])).expect("port");
    let health =
        HealthNode::start(SocketAddr::new(IpAddr::from([127, 0, 1, 171]), 0)).expect("health");
    let port = free_port();
    let front = SocketAddr::from(([127, 0, 0, 1], port));
    let cfg = format!(
        "defaults\n    mode http\n    log stdout format raw local0\n    option httplog\n    timeout connect 1s\n    timeout client 30s\n    timeout server 30s\n    retries 20\n\nfrontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    option httpchk GET /health_check.html\n    timeout check 3s\n    server s1 {} check port {} inter 500ms rise 1 fall 1 on-marked-down shutdown-sessions\n",
        refusing.addr(),
        health.addr().port()
    );
    let p = Proc::portcullis(&cfg, front);
    std::thread::sleep(Duration::from_millis(700));
    let start = Instant::now();
    let client = std::thread::spawn(move || get(front, "/retrying").status);
    std::thread::sleep(Duration::from_millis(1500));
    health.set_healthy(false);
    assert_eq!(client.join().expect("client"), 503);
    assert!(
        start.elapsed() < Duration::from_secs(6),
        "ended at the DOWN, not after 20 retries: {:?}",
        start.elapsed()
    );
    let l = p
        .wait_log("\"GET /retrying HTTP/1.1\"", Duration::from_secs(5))
        .expect("log line");
    assert!(
        l.contains(" be/s1 ") && l.contains(" 503 ") && l.contains(" DC-- "),
        "{l}"
    );
}

/// `slowstart`: a server coming back UP starts at 1/16 of its weight and ramps up (HAProxy's
/// server_recalc_eweight, whole seconds). Within 6 s of UP with `slowstart 100s`, `show stat`
/// reads weight 7 of 100 and throttle 6 % for the starting server — on HAProxy 2.6 and on
/// portcullis alike — and round robin sends it few requests.
#[test]
fn slowstart_ramps_a_server_coming_back() {
    for haproxy in [false, true] {
        let nodes = nodes(if haproxy { 131 } else { 141 });
        let dir = proxy::TempDir::new("slowstart");
        let sock = dir.0.join("admin.sock");
        let port = free_port();
        let front = SocketAddr::from(([127, 0, 0, 1], port));
        let servers: String = nodes
            .iter()
            .zip(["master1", "worker1", "worker2"])
            .map(|(n, name)| {
                format!(
                    "    server {name} {} weight 100 check port {} inter 200ms rise 1 fall 1{}\n",
                    n.data.addr(),
                    n.health.addr().port(),
                    if name == "master1" {
                        " slowstart 100s"
                    } else {
                        ""
                    }
                )
            })
            .collect();
        let cfg = format!(
            "global\n    stats socket {} level admin\n\ndefaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n\n\
             frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\n\
             backend be\n    balance roundrobin\n    option httpchk GET /health_check.html\n{servers}",
            sock.display()
        );
        let p = if haproxy {
            match Proc::haproxy(&cfg, front) {
                Some(p) => p,
                None => return,
            }
        } else {
            Proc::portcullis(&cfg, front)
        };
        let who = if haproxy { "haproxy" } else { "portcullis" };
        // master1's row: (status, weight, throttle).
        let row = || {
            let out = cli(&sock, "show stat");
            let mut lines = out.lines();
            let head: Vec<&str> = lines
                .next()
                .unwrap_or_default()
                .trim_start_matches("# ")
                .split(',')
                .collect();
            let col = |n: &str| head.iter().position(|h| *h == n).expect("column");
            let (st, w, t) = (col("status"), col("weight"), col("throttle"));
            lines
                .map(|l| l.split(',').collect::<Vec<_>>())
                .find(|f| f.get(1) == Some(&"master1"))
                .map(|f| (f[st].to_string(), f[w].to_string(), f[t].to_string()))
                .unwrap_or_default()
        };
        let wait = |want: &str, secs: u64| {
            let deadline = Instant::now() + Duration::from_secs(secs);
            loop {
                let r = row();
                if r.0 == want {
                    return r;
                }
                assert!(
                    Instant::now() < deadline,
                    "{who}: master1 never {want}: {r:?}"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        };
        // Before any ramp: full weight, no throttle.
        assert_eq!(
            wait("UP", 10),
            ("UP".into(), "100".into(), "".into()),
            "{who}"
        );
        nodes[0].health.set_healthy(false);
        wait("DOWN", 10);
        nodes[0].health.set_healthy(true);
        let up = Instant::now();
        let r = wait("UP", 10);
        assert!(
            up.elapsed() < Duration::from_secs(5),
            "{who}: too slow to judge the ramp"
        );
        assert_eq!(r, ("UP".into(), "7".into(), "6".into()), "{who}");
        let n = 200;
        let to_master = (0..n)
            .filter(|_| get(front, "/").header("x-node").as_deref() == Some("master1"))
            .count();
        // 7 of 207 by weight (HAProxy: 1/16 of 100 against 100 and 100).
        assert!(
            (1..=25).contains(&to_master),
            "{who}: master1 took {to_master} of {n}"
        );
        drop(p);
    }
}
