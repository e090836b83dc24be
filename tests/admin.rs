//! The admin socket with the real binary and real checks: the seed's `show stat | awk` recipe
//! prints HAProxy 2.6's lines (golden README), and server commands take effect at once.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

use backend::{HealthNode, HttpNode, HttpOpts, free_port};
use proxy::{Proc, TempDir, get};

/// One command on a fresh connection, as `echo "…" | socat <sock> stdio` does.
fn cli(sock: &Path, cmd: &str) -> String {
    let mut s = proxy::admin_connect(sock);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The seed's recipe, literally, through socat and awk.
fn recipe(sock: &Path) -> String {
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "echo \"show stat\" | socat {} stdio | awk -F, '/istio-http-backend/{{print $2\"=\"$18\" check=\"$37}}'",
            sock.display()
        ))
        .output()
        .expect("sh");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn seed_recipe_matches_haproxy_and_commands_apply() {
    if std::process::Command::new("socat")
        .arg("-V")
        .output()
        .is_err()
    {
        panic!("socat is required (cargo xtask setup installs it)");
    }
    let dir = TempDir::new("admin");
    let sock = dir.0.join("admin.sock");
    let names = ["master1", "worker1", "worker2"];
    let mut nodes = Vec::new();
    for i in 0..3u8 {
        let ip = IpAddr::from([127, 0, 1, 141 + i]);
        let data = HttpNode::start(SocketAddr::new(ip, 0), HttpOpts::named(names[i as usize]))
            .expect("data");
        let h = HealthNode::start(SocketAddr::new(ip, 0)).expect("health");
        nodes.push((data, h));
    }
    let port = free_port();
    let front = SocketAddr::from(([127, 0, 0, 1], port));
    let servers: String = nodes
        .iter()
        .zip(names)
        .map(|((d, h), n)| format!("    server {n} {} check port {} inter 300ms rise 2 fall 2 on-marked-down shutdown-sessions\n", d.addr(), h.addr().port()))
        .collect();
    let cfg = format!(
        "global\n    maxconn 4000\n    stats socket \"{}\" mode 600 level admin expose-fd listeners\n    stats timeout 30s\n\ndefaults\n    log stdout format raw local0\n    option dontlognull\n    timeout connect 5s\n    timeout client 1h\n    timeout server 1h\n\nfrontend istio-https-l7\n    mode http\n    option httplog\n    bind 127.0.0.1:{port}\n    default_backend istio-http-backend\n\nbackend istio-http-backend\n    mode http\n    balance roundrobin\n    option httpchk GET /health_check.html\n    http-check expect status 200\n{servers}",
        sock.display()
    );
    let _p = Proc::portcullis(&cfg, front);
    // All up, then master1's health answers 503.
    nodes[0].1.set_healthy(false);
    // Margins for a loaded machine (two failed checks 300 ms apart are enough when idle).
    wait_for("master1 DOWN", Duration::from_secs(20), || {
        recipe(&sock).contains("master1=DOWN")
    });
    wait_for("checks settled", Duration::from_secs(20), || {
        recipe(&sock)
            == "master1=DOWN check=L7STS\nworker1=UP check=L7OK\nworker2=UP check=L7OK\nBACKEND=UP check=\n"
    });
    // The golden drain + maint step.
    assert_eq!(
        cli(&sock, "set server istio-http-backend/worker2 state drain"),
        "\n"
    );
    assert_eq!(
        cli(&sock, "disable server istio-http-backend/worker1"),
        "\n"
    );
    assert_eq!(
        recipe(&sock),
        "master1=DOWN check=L7STS\nworker1=MAINT check=\nworker2=DRAIN check=L7OK\nBACKEND=DOWN check=\n"
    );
    // Nothing can take traffic now: 503 with no server.
    assert_eq!(get(front, "/").status, 503);
    // Replies in HAProxy's words.
    assert_eq!(
        cli(&sock, "set server istio-http-backend/nope state drain"),
        "No such server.\n\n"
    );
    assert_eq!(
        cli(&sock, "set server nope/x state drain"),
        "No such backend.\n\n"
    );
    assert_eq!(
        cli(&sock, "get weight istio-http-backend/worker2"),
        "1 (initial 1)\n\n"
    );
    // Back to service: worker2 ready again takes the traffic.
    assert_eq!(
        cli(&sock, "set server istio-http-backend/worker2 state ready"),
        "\n"
    );
    wait_for("worker2 serving", Duration::from_secs(5), || {
        get(front, "/").header("x-node").as_deref() == Some("worker2")
    });
    // set addr moves new connections without a reload.
    let moved = HttpNode::start(
        SocketAddr::from(([127, 0, 1, 149], 0)),
        HttpOpts::named("moved"),
    )
    .expect("moved");
    let reply = cli(
        &sock,
        &format!(
            "set server istio-http-backend/worker2 addr 127.0.1.149 port {}",
            moved.addr().port()
        ),
    );
    assert!(
        reply.starts_with("IP changed from '127.0.1.143' to '127.0.1.149', port changed from '"),
        "{reply}"
    );
    assert!(
        reply.ends_with("' by 'stats socket command'\n\n"),
        "{reply}"
    );
    wait_for("traffic on the new address", Duration::from_secs(5), || {
        get(front, "/").header("x-node").as_deref() == Some("moved")
    });
}

#[test]
fn silent_and_garbage_clients_do_not_block_others() {
    let dir = TempDir::new("admin2");
    let sock = dir.0.join("a.sock");
    let port = free_port();
    let cfg = format!(
        "global\n    stats socket {} level operator\n    stats timeout 2s\n\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\nfrontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    server s 127.0.0.1:9\n",
        sock.display()
    );
    let _p = Proc::portcullis(&cfg, SocketAddr::from(([127, 0, 0, 1], port)));
    let _silent: Vec<UnixStream> = (0..5)
        .map(|_| UnixStream::connect(&sock).unwrap())
        .collect();
    let mut garbage = UnixStream::connect(&sock).unwrap();
    garbage.write_all(b"\x00\x01\xff garbage\n").unwrap();
    let started = Instant::now();
    let out = cli(&sock, "show info");
    assert!(
        started.elapsed() < Duration::from_secs(1),
        "blocked by silent clients"
    );
    assert!(out.starts_with("Name: portcullis\n"), "{out}");
    // Operator level: admin commands are refused in HAProxy's words.
    assert_eq!(cli(&sock, "disable server be/s"), "Permission denied\n\n");
}

#[test]
fn backend_denials_count_on_both_rows() {
    let dir = TempDir::new("admin3");
    let sock = dir.0.join("d.sock");
    let port = free_port();
    let front = SocketAddr::from(([127, 0, 0, 1], port));
    let cfg = format!(
        "global\n    stats socket {}\n\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\nfrontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    http-request deny\n    server s1 127.0.0.1:9\n",
        sock.display()
    );
    let _p = Proc::portcullis(&cfg, front);
    assert_eq!(get(front, "/").status, 403);
    let stat = cli(&sock, "show stat");
    let dreq: Vec<String> = stat
        .lines()
        .filter(|l| l.starts_with("fe,") || l.starts_with("be,"))
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            format!("{},{} dreq={}", f[0], f[1], f[10])
        })
        .collect();
    assert_eq!(
        dreq,
        ["fe,FRONTEND dreq=1", "be,s1 dreq=", "be,BACKEND dreq=1"],
        "{stat}"
    );
}
