//! The admin socket against HAProxy 2.6: the same seed-like configuration (an HTTP backend of
//! three servers checked on a separate health port, a TCP backend with `option tcp-check`) runs
//! under both, each with its own fake nodes behaving alike, through the same scripted scenario
//! (traffic, a node failing its health check and recovering, disable/enable, drain, set addr,
//! set weight). After every step `show stat` and `show servers state` must agree on what an
//! operator reads: states, weights, check results and counters, times within a tolerance.
//! Skipped with a notice when /usr/sbin/haproxy is missing.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use backend::{HealthNode, HttpNode, HttpOpts, RefusingPort, TcpEcho, free_port};
use proxy::{Proc, TempDir, get};

const HAPROXY: &str = "/usr/sbin/haproxy";
const NAMES: [&str; 3] = ["master1", "worker1", "worker2"];
const HTTP_BE: &str = "istio-http-backend";
const TCP_BE: &str = "tcp-backend";

fn cli(sock: &Path, cmd: &str) -> String {
    let mut s = proxy::admin_connect(sock);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// One proxy under test with its own nodes.
struct Side {
    label: &'static str,
    _dir: TempDir,
    _proc: Proc,
    sock: PathBuf,
    front: SocketAddr,
    tcp_front: SocketAddr,
    nodes: Vec<(HttpNode, HealthNode)>,
    _echo: TcpEcho,
    _refused: RefusingPort,
    /// Where `set server … addr` moves worker1 (nothing listens there).
    moved: IpAddr,
    /// Concrete addresses and ports replaced by names before comparing.
    names: Vec<(String, String)>,
}

impl Side {
    fn start(label: &'static str, net: u8, haproxy: bool) -> Side {
        let dir = TempDir::new(&format!("admdiff-{label}"));
        let sock = dir.0.join("admin.sock");
        let ip = |host: u8| IpAddr::from([127, 0, net, host]);
        let mut names = Vec::new();
        let mut nodes = Vec::new();
        for (i, n) in NAMES.iter().enumerate() {
            let host = ip(10 + i as u8);
            // Ports are masked by name, so every one must be distinct within a side (nodes on
            // different addresses may otherwise get the same number).
            let taken =
                |p: u16, names: &[(String, String)]| names.iter().any(|(v, _)| *v == p.to_string());
            let d = loop {
                let d =
                    HttpNode::start(SocketAddr::new(host, 0), HttpOpts::named(n)).expect("data");
                if !taken(d.addr().port(), &names) {
                    break d;
                }
            };
            names.push((d.addr().port().to_string(), format!("PORT-{n}")));
            let h = loop {
                let h = HealthNode::start(SocketAddr::new(host, 0)).expect("health");
                if !taken(h.addr().port(), &names) {
                    break h;
                }
            };
            names.push((host.to_string(), format!("IP-{n}")));
            names.push((h.addr().port().to_string(), format!("CHECK-{n}")));
            nodes.push((d, h));
        }
        let echo = TcpEcho::start(SocketAddr::new(ip(20), 0)).expect("echo");
        let refused = RefusingPort::on(ip(21)).expect("refusing port");
        let moved = ip(30);
        names.push((ip(20).to_string(), "IP-echo".into()));
        names.push((echo.addr().port().to_string(), "PORT-echo".into()));
        names.push((ip(21).to_string(), "IP-refused".into()));
        names.push((refused.port().to_string(), "PORT-refused".into()));
        names.push((moved.to_string(), "IP-moved".into()));
        let port = free_port();
        let tport = free_port();
        let servers: String = nodes
            .iter()
            .zip(NAMES)
            .map(|((d, h), n)| {
                format!(
                    "    server {n} {} check port {} inter 500ms rise 2 fall 2\n",
                    d.addr(),
                    h.addr().port()
                )
            })
            .collect();
        let cfg = format!(
            "global\n    maxconn 4000\n    stats socket \"{sock}\" mode 600 level admin\n    stats timeout 30s\n\n\
             defaults\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n\n\
             frontend istio-https-l7\n    mode http\n    bind 127.0.0.1:{port}\n    default_backend {HTTP_BE}\n\n\
             backend {HTTP_BE}\n    mode http\n    balance roundrobin\n    option httpchk GET /health_check.html\n    http-check expect status 200\n{servers}\n\
             frontend tcp-in\n    mode tcp\n    bind 127.0.0.1:{tport}\n    default_backend {TCP_BE}\n\n\
             backend {TCP_BE}\n    mode tcp\n    option tcp-check\n    server t1 {} check inter 500ms rise 2 fall 2\n    server t2 {} check inter 500ms rise 2 fall 2\n\n\
             backend nocheck-backend\n    mode tcp\n    server n1 {}\n",
            echo.addr(),
            refused.addr(),
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
            _proc: proc,
            sock,
            front,
            tcp_front: SocketAddr::from(([127, 0, 0, 1], tport)),
            nodes,
            _echo: echo,
            _refused: refused,
            moved,
            names,
        }
    }

    fn cli(&self, cmd: &str) -> String {
        cli(&self.sock, cmd)
    }

    fn name(&self, v: &str) -> String {
        self.names
            .iter()
            .find(|(k, _)| k == v)
            .map_or_else(|| v.to_string(), |(_, n)| n.clone())
    }

    /// `show stat` rows of the two backends, as fields.
    fn stat(&self) -> Vec<Vec<String>> {
        let out = self.cli("show stat");
        out.lines()
            .filter(|l| !l.starts_with('#') && !l.is_empty())
            .map(|l| l.split(',').map(str::to_string).collect::<Vec<_>>())
            .collect()
    }

    fn row(&self, px: &str, sv: &str) -> Vec<String> {
        self.stat()
            .into_iter()
            .find(|r| {
                r.first().map(String::as_str) == Some(px)
                    && r.get(1).map(String::as_str) == Some(sv)
            })
            .unwrap_or_else(|| panic!("{}: no row {px}/{sv}", self.label))
    }

    fn status(&self, px: &str, sv: &str) -> String {
        self.row(px, sv).get(17).cloned().unwrap_or_default()
    }

    /// `show servers state` lines, fields named where they are addresses or ports.
    fn servers_state(&self) -> Vec<Vec<String>> {
        let out = self.cli("show servers state");
        out.lines()
            .skip(2)
            .filter(|l| !l.is_empty())
            .map(|l| l.split(' ').map(|f| self.name(f)).collect())
            .collect()
    }
}

/// 1-based awk field numbers compared on server rows (compat doc §1.2): pxname, svname, status,
/// weight, act, bck, chkfail, chkdown, lastchg, downtime, check_status, check_code, last_chk,
/// check_desc, agent_desc, check_rise, check_fall, check_health.
const SERVER_FIELDS: [usize; 18] = [
    1, 2, 18, 19, 20, 21, 22, 23, 24, 25, 37, 38, 57, 66, 67, 68, 69, 70,
];
/// On BACKEND rows: status, weight, act, bck, chkdown, lastchg, downtime.
const BACKEND_FIELDS: [usize; 9] = [1, 2, 18, 19, 20, 21, 23, 24, 25];
/// Seconds two `lastchg` (or `downtime`) may differ by: the two proxies' checks do not run at the same instants.
const LASTCHG_SLACK: i64 = 2;
/// Plus the seconds between the two proxies' starts (they start one after the other, which
/// takes longer on a loaded machine; their clocks count from their own start).
static START_GAP: std::sync::atomic::AtomicI64 = std::sync::atomic::AtomicI64::new(0);

fn lastchg_close(x: i64, y: i64) -> bool {
    (x - y).abs() <= LASTCHG_SLACK + START_GAP.load(std::sync::atomic::Ordering::Relaxed)
}

fn same_field(awk: usize, a: &str, b: &str) -> bool {
    match awk {
        // A check running right now is shown with "* ": not a difference of state.
        37 => a.trim_start_matches("* ") == b.trim_start_matches("* "),
        24 | 25 => match (a.parse::<i64>(), b.parse::<i64>()) {
            (Ok(x), Ok(y)) => lastchg_close(x, y),
            _ => a == b,
        },
        _ => a == b,
    }
}

fn diff_stat(h: &[Vec<String>], p: &[Vec<String>]) -> Vec<String> {
    let mut out = Vec::new();
    let key = |r: &Vec<String>| (r[0].clone(), r[1].clone());
    for hr in h.iter().filter(|r| r[0] == HTTP_BE || r[0] == TCP_BE) {
        let Some(pr) = p.iter().find(|r| key(r) == key(hr)) else {
            out.push(format!("{}/{}: row missing in portcullis", hr[0], hr[1]));
            continue;
        };
        let fields: &[usize] = if hr[1] == "BACKEND" {
            &BACKEND_FIELDS
        } else {
            &SERVER_FIELDS
        };
        for &f in fields {
            let (a, b) = (&hr[f - 1], &pr[f - 1]);
            if !same_field(f, a, b) {
                out.push(format!(
                    "{}/{} ${f}: haproxy {a:?} portcullis {b:?}",
                    hr[0], hr[1]
                ));
            }
        }
    }
    out
}

/// `show servers state` fields (0-based): 9 is the seconds since the last change (tolerance);
/// 13 the check state, whose "in progress" bit depends on the instant.
fn diff_state(h: &[Vec<String>], p: &[Vec<String>]) -> Vec<String> {
    let mut out = Vec::new();
    if h.len() != p.len() {
        out.push(format!("servers state: {} lines vs {}", h.len(), p.len()));
    }
    for (hl, pl) in h.iter().zip(p) {
        if hl.len() != pl.len() {
            out.push(format!("servers state: {hl:?} vs {pl:?}"));
            continue;
        }
        for (i, (a, b)) in hl.iter().zip(pl).enumerate() {
            let same = match i {
                9 => match (a.parse::<i64>(), b.parse::<i64>()) {
                    (Ok(x), Ok(y)) => lastchg_close(x, y),
                    _ => a == b,
                },
                13 => a.parse::<u8>().map(|v| v & !1) == b.parse::<u8>().map(|v| v & !1),
                _ => a == b,
            };
            if !same {
                out.push(format!(
                    "servers state {} field {i}: haproxy {a:?} portcullis {b:?}",
                    hl[3]
                ));
            }
        }
    }
    out
}

/// When a step's effect is visible on one proxy.
type Settled = Box<dyn Fn(&Side) -> bool>;

fn wait_for(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Compares both proxies until they agree (checks run at different instants on each) or the
/// time is up; returns the differences left.
fn compare(step: &str, h: &Side, p: &Side, within: Duration) -> Vec<String> {
    let deadline = Instant::now() + within;
    loop {
        let (hs, hst) = (h.stat(), h.servers_state());
        // Both backends' server and BACKEND rows, and one state line per server.
        let rows = hs
            .iter()
            .filter(|r| r[0] == HTTP_BE || r[0] == TCP_BE)
            .count();
        // A backend of one unchecked server too: its state line (srv_check_status) is compared.
        assert_eq!((rows, hst.len()), (7, 6), "[{step}] haproxy dump: {hs:?}");
        let mut d = diff_stat(&hs, &p.stat());
        d.extend(diff_state(&hst, &p.servers_state()));
        if d.is_empty() {
            return d;
        }
        if Instant::now() >= deadline {
            return d.into_iter().map(|l| format!("[{step}] {l}")).collect();
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Frontend/backend traffic counters both must agree on exactly after the same requests:
/// FRONTEND stot, req_tot, hrsp_2xx; BACKEND stot, lbtot, req_tot, hrsp_2xx, bin.
fn traffic_counters(s: &Side) -> Vec<(String, String)> {
    let stat = s.stat();
    let mut out = Vec::new();
    for r in &stat {
        let fields: &[usize] = match (r[0].as_str(), r[1].as_str()) {
            ("istio-https-l7", "FRONTEND") => &[8, 9, 41, 49],
            (HTTP_BE, "BACKEND") => &[8, 9, 31, 41, 49],
            ("tcp-in", "FRONTEND") => &[8, 9, 10],
            (TCP_BE, "BACKEND") => &[8, 9, 10, 31],
            // Servers: stot, bin, bout, lbtot, hrsp_2xx, req_tot.
            (HTTP_BE, _) => &[8, 9, 10, 31, 41, 49],
            (TCP_BE, _) => &[8, 9, 10, 31],
            _ => continue,
        };
        for &f in fields {
            out.push((format!("{}/{} ${f}", r[0], r[1]), r[f - 1].clone()));
        }
    }
    out
}

/// The given columns of every row of the test's proxies.
fn columns(s: &Side, fields: &[usize]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for r in s.stat() {
        for &f in fields {
            out.push((format!("{}/{} ${f}", r[0], r[1]), r[f - 1].clone()));
        }
    }
    out
}

#[test]
fn admin_socket_matches_haproxy_through_a_scenario() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("NOTICE: {HAPROXY} missing: admin differential test skipped");
        return;
    }
    let h = Side::start("haproxy", 32, true);
    let p = Side::start("portcullis", 31, false);
    // How much earlier HAProxy's clock started, read from both processes' uptime at once.
    let uptime = |s: &Side| -> i64 {
        s.cli("show info")
            .lines()
            .find_map(|l| l.strip_prefix("Uptime_sec: "))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    START_GAP.store(
        (uptime(&h) - uptime(&p)).abs() + 1,
        std::sync::atomic::Ordering::Relaxed,
    );
    let both = [&h, &p];
    let mut diffs: Vec<String> = Vec::new();
    let settle = Duration::from_secs(4);

    // Initial checks done: HTTP servers fully UP, t2 refused and DOWN.
    for s in both {
        wait_for(
            &format!("{} t2 DOWN", s.label),
            Duration::from_secs(6),
            || s.status(TCP_BE, "t2") == "DOWN",
        );
        wait_for(
            &format!("{} all UP", s.label),
            Duration::from_secs(6),
            || NAMES.iter().all(|n| s.status(HTTP_BE, n) == "UP"),
        );
    }
    diffs.extend(compare("initial", &h, &p, settle));
    // `show info`: the same socket budget (both run one thread per CPU by default).
    let info = |s: &Side, key: &str| {
        s.cli("show info")
            .lines()
            .find_map(|l| l.strip_prefix(key).map(str::to_string))
            .unwrap_or_default()
    };
    for key in ["Maxsock: ", "Maxconn: ", "Nbthread: "] {
        let (a, b) = (info(&h, key), info(&p, key));
        if a != b || a.is_empty() {
            diffs.push(format!("[show info] {key}haproxy {a:?} portcullis {b:?}"));
        }
    }

    // Traffic: the same requests through both.
    for s in both {
        for _ in 0..6 {
            assert_eq!(get(s.front, "/").status, 200, "{}", s.label);
        }
        let mut t = TcpStream::connect(s.tcp_front).expect("tcp front");
        t.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        t.write_all(b"ping\n").unwrap();
        t.shutdown(std::net::Shutdown::Write).unwrap();
        let mut back = Vec::new();
        t.read_to_end(&mut back).unwrap();
        assert_eq!(back, b"ping\n", "{}", s.label);
    }
    std::thread::sleep(Duration::from_millis(300));
    let (hc, pc) = (traffic_counters(&h), traffic_counters(&p));
    for (a, b) in hc.iter().zip(&pc) {
        if a != b {
            diffs.push(format!(
                "[traffic] {}: haproxy {} portcullis {}",
                a.0, a.1, b.1
            ));
        }
    }
    diffs.extend(compare("traffic", &h, &p, settle));

    // `clear counters` resets the maxima (smax, rate_max, req_rate_max, conn_rate_max, the
    // *time_max); `all` every counter, the current rates excepted.
    for cmd in ["clear counters", "clear counters all"] {
        let (ha, pa) = (h.cli(cmd), p.cli(cmd));
        if ha != pa {
            diffs.push(format!("[{cmd}] reply: haproxy {ha:?} portcullis {pa:?}"));
        }
        let (hc, pc) = (
            columns(&h, &[6, 8, 9, 10, 31, 36, 41, 48, 49, 80, 91, 92]),
            columns(&p, &[6, 8, 9, 10, 31, 36, 41, 48, 49, 80, 91, 92]),
        );
        for (a, b) in hc.iter().zip(&pc) {
            if a != b {
                diffs.push(format!(
                    "[{cmd}] {}: haproxy {} portcullis {}",
                    a.0, a.1, b.1
                ));
            }
        }
    }

    // master1's health answers 503: DOWN after `fall` checks.
    for s in both {
        s.nodes[0].1.set_healthy(false);
    }
    for s in both {
        wait_for(
            &format!("{} master1 DOWN", s.label),
            Duration::from_secs(6),
            || s.status(HTTP_BE, "master1") == "DOWN",
        );
    }
    diffs.extend(compare("health 503", &h, &p, settle));

    // Healthy again: UP after `rise` checks.
    for s in both {
        s.nodes[0].1.set_healthy(true);
    }
    for s in both {
        wait_for(
            &format!("{} master1 UP", s.label),
            Duration::from_secs(6),
            || s.status(HTTP_BE, "master1") == "UP",
        );
    }
    diffs.extend(compare("health back", &h, &p, settle));

    // Admin commands: each answer and the state right after it.
    let steps: Vec<(String, Settled)> = vec![
        (
            format!("disable server {HTTP_BE}/worker1"),
            Box::new(|s: &Side| s.status(HTTP_BE, "worker1") == "MAINT"),
        ),
        (
            format!("enable server {HTTP_BE}/worker1"),
            Box::new(|s: &Side| s.status(HTTP_BE, "worker1") == "UP"),
        ),
        (
            format!("set server {HTTP_BE}/worker2 state drain"),
            Box::new(|s: &Side| s.status(HTTP_BE, "worker2") == "DRAIN"),
        ),
        (
            format!("set server {HTTP_BE}/worker2 state ready"),
            Box::new(|s: &Side| s.status(HTTP_BE, "worker2") == "UP"),
        ),
        (
            format!("set weight {HTTP_BE}/master1 50"),
            Box::new(|s: &Side| s.row(HTTP_BE, "master1")[18] == "50"),
        ),
        (
            format!("set weight {HTTP_BE}/worker2 0"),
            Box::new(|s: &Side| s.row(HTTP_BE, "worker2")[18] == "0"),
        ),
        (
            format!("set server {HTTP_BE}/worker2 weight 1"),
            Box::new(|s: &Side| s.row(HTTP_BE, "worker2")[18] == "1"),
        ),
        (
            format!("set server {HTTP_BE}/master1 state maint"),
            Box::new(|s: &Side| s.status(HTTP_BE, "master1") == "MAINT"),
        ),
        // Drain and maintenance replace each other (HAProxy's srv_adm_set_drain/set_maint).
        (
            format!("set server {HTTP_BE}/master1 state drain"),
            Box::new(|s: &Side| s.status(HTTP_BE, "master1") == "DRAIN"),
        ),
        (
            format!("set server {HTTP_BE}/master1 state maint"),
            Box::new(|s: &Side| s.status(HTTP_BE, "master1") == "MAINT"),
        ),
        (
            format!("set server {HTTP_BE}/master1 state ready"),
            Box::new(|s: &Side| s.status(HTTP_BE, "master1") == "UP"),
        ),
        // The TCP backend loses its last server: BACKEND DOWN, chkdown 1; then back.
        (
            format!("disable server {TCP_BE}/t1"),
            Box::new(|s: &Side| s.status(TCP_BE, "BACKEND") == "DOWN"),
        ),
        (
            format!("enable server {TCP_BE}/t1"),
            Box::new(|s: &Side| s.status(TCP_BE, "t1") == "UP"),
        ),
        (
            format!("set server {HTTP_BE}/worker2 health down"),
            Box::new(|s: &Side| s.status(HTTP_BE, "worker2").starts_with("DOWN")),
        ),
        (
            format!("set server {HTTP_BE}/worker2 health up"),
            Box::new(|s: &Side| s.status(HTTP_BE, "worker2") == "UP"),
        ),
    ];
    for (cmd, done) in &steps {
        let (ha, pa) = (h.cli(cmd), p.cli(cmd));
        if ha != pa {
            diffs.push(format!("[{cmd}] reply: haproxy {ha:?} portcullis {pa:?}"));
        }
        // Right after the command (checks may run in between: short retry window).
        diffs.extend(compare(
            &format!("{cmd} (at once)"),
            &h,
            &p,
            Duration::from_millis(400),
        ));
        for s in both {
            wait_for(
                &format!("{} after {cmd}", s.label),
                Duration::from_secs(6),
                || done(s),
            );
        }
        diffs.extend(compare(cmd, &h, &p, settle));
    }

    // set addr: worker1 moves where nothing answers its checks: DOWN with a layer-4 error.
    let replies: Vec<String> = both
        .iter()
        .map(|s| {
            let r = s.cli(&format!("set server {HTTP_BE}/worker1 addr {}", s.moved));
            let port = s.nodes[1].0.addr().port().to_string();
            r.replace(&s.nodes[1].0.addr().ip().to_string(), "IP-worker1")
                .replace(&s.moved.to_string(), "IP-moved")
                .replace(&port, "PORT-worker1")
        })
        .collect();
    if replies[0] != replies[1] {
        diffs.push(format!(
            "[set addr] reply: haproxy {:?} portcullis {:?}",
            replies[0], replies[1]
        ));
    }
    diffs.extend(compare(
        "set addr (at once)",
        &h,
        &p,
        Duration::from_millis(400),
    ));
    for s in both {
        wait_for(
            &format!("{} worker1 DOWN at the new address", s.label),
            Duration::from_secs(8),
            || s.status(HTTP_BE, "worker1") == "DOWN",
        );
    }
    diffs.extend(compare("set addr", &h, &p, settle));

    // The comparisons above saw real values: the TCP backend went down once, master1 three
    // times (its failing health, `state maint`, then `maint` again after `drain` had brought it
    // back), worker1 failed two checks before going DOWN.
    for s in both {
        let be = s.row(TCP_BE, "BACKEND");
        let m1 = s.row(HTTP_BE, "master1");
        assert_eq!(
            (be[22].as_str(), m1[22].as_str()),
            ("1", "3"),
            "{}",
            s.label
        );
        assert_eq!(s.row(HTTP_BE, "worker1")[21], "2", "{}", s.label);
    }
    assert!(
        diffs.is_empty(),
        "differences from HAProxy 2.6:\n{}",
        diffs.join("\n")
    );
}
