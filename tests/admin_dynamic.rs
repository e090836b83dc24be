//! Servers added and deleted at run time (`add server`, `del server`), against HAProxy 2.6: the
//! same configuration and command script run under both, each with its own nodes; every reply
//! must be the same bytes (addresses and ports named), and the added servers must behave alike:
//! health-checked once `enable health` is given, receiving traffic by roundrobin once ready, and
//! not deletable while a session uses them. On portcullis the added server also shows on the
//! stats page and in `/metrics`. Skipped with a notice when /usr/sbin/haproxy is missing.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use backend::{HealthNode, HttpNode, HttpOpts, TcpEcho, free_port};
use proxy::{Proc, TempDir, get};

const HAPROXY: &str = "/usr/sbin/haproxy";

fn cli(sock: &Path, cmd: &str) -> String {
    proxy::admin_cli(sock, cmd)
}

struct Side {
    label: &'static str,
    _dir: TempDir,
    proc: Proc,
    sock: PathBuf,
    front: SocketAddr,
    tcp_front: SocketAddr,
    stats: SocketAddr,
    /// w1 (configured) and w2 (added): data and health nodes.
    nodes: Vec<(HttpNode, HealthNode)>,
    echo: TcpEcho,
    /// Concrete values replaced by names before comparing.
    names: Vec<(String, String)>,
}

impl Side {
    fn start(label: &'static str, net: u8, haproxy: bool) -> Side {
        let dir = TempDir::new(&format!("admdyn-{label}"));
        let sock = dir.0.join("admin.sock");
        let ip = |host: u8| IpAddr::from([127, 0, net, host]);
        let mut names = Vec::new();
        let mut nodes = Vec::new();
        for (i, n) in ["w1", "w2"].iter().enumerate() {
            let host = ip(10 + i as u8);
            let d = HttpNode::start(SocketAddr::new(host, 0), HttpOpts::named(n)).expect("data");
            let h = HealthNode::start(SocketAddr::new(host, 0)).expect("health");
            names.push((host.to_string(), format!("IP-{n}")));
            names.push((d.addr().port().to_string(), format!("PORT-{n}")));
            names.push((h.addr().port().to_string(), format!("CHECK-{n}")));
            nodes.push((d, h));
        }
        let echo = TcpEcho::start(SocketAddr::new(ip(20), 0)).expect("echo");
        names.push((ip(20).to_string(), "IP-echo".into()));
        names.push((echo.addr().port().to_string(), "PORT-echo".into()));
        let (port, tport, sport) = (free_port(), free_port(), free_port());
        let (d1, h1) = (&nodes[0].0, &nodes[0].1);
        let cfg = format!(
            "global\n    stats socket \"{sock}\" mode 600 level admin\n\n\
             defaults\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n\n\
             frontend web-in\n    mode http\n    bind 127.0.0.1:{port}\n    default_backend web\n\n\
             backend web\n    mode http\n    balance roundrobin\n    option httpchk GET /health_check.html\n    http-check expect status 200\n    server w1 {} check port {} inter 300ms rise 2 fall 2\n\n\
             frontend tcp-in\n    mode tcp\n    bind 127.0.0.1:{tport}\n    default_backend pods\n\n\
             backend pods\n    mode tcp\n    balance leastconn\n\n\
             backend hashed\n    balance source\n    server h1 {}\n\n\
             frontend stats\n    mode http\n    bind 127.0.0.1:{sport}\n    http-request use-service prometheus-exporter if {{ path /metrics }}\n    stats enable\n    stats uri /\n",
            d1.addr(),
            h1.addr().port(),
            echo.addr(),
            sock = sock.display(),
        );
        let front = SocketAddr::from(([127, 0, 0, 1], port));
        let proc = if haproxy {
            Proc::haproxy(&cfg, front).expect("haproxy present")
        } else {
            Proc::portcullis(&cfg, front)
        };
        Side {
            label,
            _dir: dir,
            proc,
            sock,
            front,
            tcp_front: SocketAddr::from(([127, 0, 0, 1], tport)),
            stats: SocketAddr::from(([127, 0, 0, 1], sport)),
            nodes,
            echo,
            names,
        }
    }

    /// `{w2}`, `{w2-check}`, `{echo}` in a command become this side's addresses.
    fn expand(&self, cmd: &str) -> String {
        cmd.replace("{w2}", &self.nodes[1].0.addr().to_string())
            .replace("{w2-check}", &self.nodes[1].1.addr().port().to_string())
            .replace("{echo}", &self.echo.addr().to_string())
    }

    fn cli(&self, cmd: &str) -> String {
        cli(&self.sock, &self.expand(cmd))
    }

    /// A reply with addresses and ports named, and `show servers state`'s seconds since the
    /// last change (field 9, the instants differ) masked.
    fn masked(&self, reply: &str) -> String {
        reply
            .split_inclusive('\n')
            .map(|l| {
                let body = l.trim_end_matches('\n');
                let mut fields: Vec<String> = body
                    .split(' ')
                    .map(|f| {
                        // The configuration file's path differs: only its line is compared.
                        if let Some((_, line)) = f.split_once(".cfg:") {
                            return format!("CFG:{line}");
                        }
                        let mut f = f.to_string();
                        for (v, n) in &self.names {
                            if f == *v {
                                f = n.clone();
                            }
                            f = f.replace(&format!("{v}:"), &format!("{n}:"));
                        }
                        f
                    })
                    .collect();
                if fields.len() == 25 && fields[0].parse::<u32>().is_ok() {
                    fields[9] = "T".into();
                }
                let nl = if l.ends_with('\n') { "\n" } else { "" };
                format!("{}{nl}", fields.join(" "))
            })
            .collect()
    }

    fn stat_row(&self, px: &str, sv: &str) -> Vec<String> {
        cli(&self.sock, "show stat")
            .lines()
            .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
            .find(|r| r.len() > 20 && r[0] == px && r[1] == sv)
            .unwrap_or_default()
    }

    fn status(&self, px: &str, sv: &str) -> String {
        self.stat_row(px, sv).get(17).cloned().unwrap_or_default()
    }
}

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The commands run on both, in order; each reply is compared.
const SCRIPT: &[&str] = &[
    // Target errors, some without a final LF in HAProxy.
    "add server",
    "add server web",
    "add server nope/w2 {w2}",
    "add server web-in/w2 {w2}",
    "add server hashed/w2 {w2}",
    "add server web/w2",
    "add server web/w1 {w2}",
    // Keyword errors.
    "add server web/w2 {w2} bogus",
    "add server web/w2 {w2} weight 300",
    "add server web/w2 {w2} rise 0",
    "add server web/w2 {w2} inter 0",
    "add server web/w2 {w2} addr nowhere",
    "add server web/w2 {w2} no-check",
    "add server web/w2 {w2} on-marked-down foo",
    "add server web/w2 {w2} ssl",
    "add server web/w2 {w2} id 1",
    "add server web/w3 {w2} id 9",
    "show servers state web",
    "del server web/w3",
    // The real one: checked on its health port, in maintenance until made ready.
    "add server web/w2 {w2} check port {w2-check} inter 300ms rise 2 fall 2 weight 1",
    "add server web/w2 {w2}",
    "show servers state web",
    "del server web/w1",
    "enable agent web/w2",
    "enable health web/w2",
    "set severity-output number;add server web/w2 {w2};show servers state nope",
    "set severity-output string;del server web/nope;del server nope/w2;del server web",
];

#[test]
fn add_and_del_server_match_haproxy() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("NOTICE: {HAPROXY} missing: dynamic server differential test skipped");
        return;
    }
    let h = Side::start("haproxy", 42, true);
    let p = Side::start("portcullis", 41, false);
    let both = [&h, &p];
    let mut diffs = Vec::new();
    for s in both {
        wait_for(
            &format!("{} w1 UP", s.label),
            Duration::from_secs(6),
            || s.status("web", "w1") == "UP",
        );
    }
    let compare = |cmd: &str, diffs: &mut Vec<String>| {
        let (mut a, mut b) = (h.masked(&h.cli(cmd)), p.masked(&p.cli(cmd)));
        // A health check in flight on either side shows in `show servers state` (HAProxy: result
        // 0 and the in-progress bit until it ends): a state read is taken again a few times, so
        // only a lasting difference counts. Commands that change something are sent once.
        let read_only = cmd.starts_with("show servers state");
        for _ in 0..10 {
            if a == b || !read_only {
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
            (a, b) = (h.masked(&h.cli(cmd)), p.masked(&p.cli(cmd)));
        }
        if a != b {
            diffs.push(format!("[{cmd}]\n  haproxy    {a:?}\n  portcullis {b:?}"));
        }
    };
    for cmd in SCRIPT {
        compare(cmd, &mut diffs);
    }

    // Ready: checked by its own health node, then in the roundrobin with w1.
    compare("set server web/w2 state ready", &mut diffs);
    for s in both {
        wait_for(
            &format!("{} w2 UP", s.label),
            Duration::from_secs(6),
            || s.status("web", "w2") == "UP",
        );
        assert!(s.nodes[1].1.checks() > 0, "{}: w2 never checked", s.label);
        for _ in 0..6 {
            assert_eq!(get(s.front, "/").status, 200, "{}", s.label);
        }
        let (n1, n2) = (s.nodes[0].0.request_count(), s.nodes[1].0.request_count());
        assert_eq!((n1, n2), (3, 3), "{}: roundrobin over w1 and w2", s.label);
    }
    // Its health fails: DOWN by its checks, as a configured server.
    for s in both {
        s.nodes[1].1.set_healthy(false);
    }
    for s in both {
        wait_for(
            &format!("{} w2 DOWN", s.label),
            Duration::from_secs(6),
            || s.status("web", "w2") == "DOWN",
        );
    }
    compare("show servers state web", &mut diffs);

    // A TCP pod: added, ready, used by a session; not deletable until the session ends.
    compare("add server pods/p1 {echo}", &mut diffs);
    compare("set server pods/p1 state ready", &mut diffs);
    let mut sessions = Vec::new();
    for s in both {
        let mut t = TcpStream::connect(s.tcp_front).expect("tcp front");
        t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        t.write_all(b"ping\n").unwrap();
        let mut back = [0u8; 5];
        t.read_exact(&mut back).unwrap();
        assert_eq!(&back, b"ping\n", "{}", s.label);
        sessions.push(t);
    }
    compare("del server pods/p1", &mut diffs);
    compare("set server pods/p1 state maint", &mut diffs);
    compare("del server pods/p1", &mut diffs);
    drop(sessions);
    for s in both {
        wait_for(
            &format!("{} p1 without sessions", s.label),
            Duration::from_secs(5),
            || s.stat_row("pods", "p1").get(4).map(String::as_str) == Some("0"),
        );
    }
    compare("del server pods/p1", &mut diffs);
    compare("show servers state pods", &mut diffs);
    compare("del server web/w2", &mut diffs);
    compare(
        "set server web/w2 state maint;del server web/w2;show servers state web",
        &mut diffs,
    );

    assert!(
        diffs.is_empty(),
        "differences from HAProxy 2.6:\n{}",
        diffs.join("\n")
    );
}

/// On portcullis, an added server is on the stats page and in `/metrics`, and a deleted one
/// leaves both (HAProxy's exporter and page are not compared: their layout is tested elsewhere).
#[test]
fn added_server_shows_on_stats_page_and_metrics() {
    let p = Side::start("portcullis", 43, false);
    assert_eq!(
        p.cli("add server web/w2 {w2}"),
        "New server registered.\n\n"
    );
    let page = |path: &str| get(p.stats, path).text();
    assert!(page("/").contains(">w2<"), "stats page without w2");
    let metrics = page("/metrics");
    assert!(
        metrics.contains("proxy=\"web\",server=\"w2\""),
        "/metrics without w2"
    );
    assert_eq!(p.cli("del server web/w2"), "Server deleted.\n");
    assert!(!page("/").contains(">w2<"));
    assert!(!page("/metrics").contains("server=\"w2\""));
    let _ = p.proc.pid();
}

/// `set maxconn global|frontend` change the limits `show info` and `show stat` report (and the
/// gates that accepting waits on), without a reload.
#[test]
fn set_maxconn_applies_at_once() {
    let p = Side::start("portcullis", 44, false);
    let info = |key: &str| {
        p.cli("show info")
            .lines()
            .find_map(|l| l.strip_prefix(key).map(str::to_string))
            .unwrap_or_default()
    };
    let hard = info("Hard_maxconn: ");
    assert_eq!(p.cli("set maxconn global 100"), "\n");
    assert_eq!(info("Maxconn: "), "100");
    assert_eq!(info("Hard_maxconn: "), hard);
    assert_eq!(p.cli("set maxconn global 0"), "\n");
    assert_eq!(info("Maxconn: "), hard);
    assert_eq!(p.cli("set maxconn frontend web-in 7"), "\n");
    assert_eq!(p.stat_row("web-in", "FRONTEND")[6], "7");
    assert_eq!(get(p.front, "/").status, 200);
    assert_eq!(p.cli("set maxconn frontend web 7"), "No such frontend.\n\n");

    // `disable frontend`: PAUSED, nothing served until `enable frontend`.
    assert_eq!(p.cli("disable frontend web-in"), "\n");
    assert_eq!(p.stat_row("web-in", "FRONTEND")[17], "PAUSED");
    assert_eq!(
        p.cli("disable frontend web-in"),
        "All sockets are already disabled.\n\n"
    );
    let front = p.front;
    let (tx, rx) = std::sync::mpsc::channel();
    let client = std::thread::spawn(move || {
        let _ = tx.send(get(front, "/").status);
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(700)).is_err(),
        "served while disabled"
    );
    assert_eq!(p.cli("enable frontend web-in"), "\n");
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)), Ok(200));
    client.join().unwrap();
    assert_eq!(p.stat_row("web-in", "FRONTEND")[17], "OPEN");

    // `set rate-limit connections global 1`: `show info` reports it and accepting waits for the
    // next second (three connections take more than one second); 0 lifts it.
    assert_eq!(p.cli("set rate-limit connections global 1"), "\n");
    assert_eq!(info("ConnRateLimit: "), "1");
    let t0 = std::time::Instant::now();
    for _ in 0..3 {
        assert_eq!(get(p.front, "/").status, 200);
    }
    assert!(
        t0.elapsed() >= Duration::from_millis(900),
        "3 connections at 1/s in {:?}",
        t0.elapsed()
    );
    assert_eq!(p.cli("set rate-limit connections global 0"), "\n");
    assert_eq!(info("ConnRateLimit: "), "0");
    assert_eq!(p.cli("set rate-limit http-compression global 10"), "\n");
    assert_eq!(info("CompressBpsRateLim: "), "10240");

    // `shutdown frontend`: its listeners close (connections refused), STOP for good, HAProxy's
    // warning on stderr.
    assert_eq!(p.cli("shutdown frontend web-in"), "\n");
    assert_eq!(p.stat_row("web-in", "FRONTEND")[17], "STOP");
    assert!(
        backend::wait_until(Duration::from_secs(10), || std::net::TcpStream::connect(
            p.front
        )
        .is_err()),
        "still accepting after shutdown frontend"
    );
    assert_eq!(
        p.cli("enable frontend web-in"),
        "Frontend was previously shut down, cannot enable.\n\n"
    );
    assert_eq!(
        p.cli("shutdown frontend web-in"),
        "Frontend was already shut down.\n\n"
    );
    let warned = backend::wait_until(Duration::from_secs(5), || {
        p.proc
            .stderr
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("Proxy web-in stopped (cumulated conns: FE: "))
    });
    assert!(warned, "no stop warning");
}
