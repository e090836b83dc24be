//! `cargo xtask drill --failover` (issue 23): two LB "hosts" under keepalived, the way HAProxy
//! users run an active/standby pair, in network namespaces of their own (nothing leaves them):
//!
//! ```text
//!   pcfo-cl (10.251.0.2, .3) ─┐
//!   pcfo-lb1 (10.251.0.11) ───┤ br0 in pcfo-sw      VIP 10.251.0.100 (VRRP, keepalived)
//!   pcfo-lb2 (10.251.0.12) ───┤
//!   pcfo-be (10.251.0.20) ────┘
//! ```
//!
//! Each LB runs keepalived and the proxy on the same configuration; keepalived's `vrrp_script`
//! asks the proxy's `monitor-uri`. Under load (a client opening one connection per request,
//! and an "abuser" from another address far over the stick-table rate limit), the active
//! host's proxy is killed: the drill measures the requests that failed, the failover time (the
//! longest gap without a successful request), and whether the abuser is still limited on the
//! new active host (the rate kept by the `peers` protocol) — for portcullis and for HAProxy 2.6.

use crate::util::{Result, which};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const NS: [&str; 5] = ["pcfo-sw", "pcfo-lb1", "pcfo-lb2", "pcfo-cl", "pcfo-be"];
const VIP: &str = "10.251.0.100";
const BACKEND: &str = "10.251.0.20";
const CLIENT: &str = "10.251.0.2";
const ABUSER: &str = "10.251.0.3";
/// The rate limit: requests per source over 10 s (the normal client sends well under it).
const LIMIT: u32 = 300;

const USAGE: &str = "usage: cargo xtask drill --failover [--balancer portcullis|haproxy|both] \
                     [--portcullis <binary>] [--seconds S]";

fn ip(args: &[&str]) -> Result {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("ip: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

fn in_ns(ns: &str, prog: &str) -> Command {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", ns, prog]);
    c
}

/// The namespaces, removed again on drop (and any stale ones first).
struct Net;

impl Net {
    fn build() -> Result<Net> {
        Net::teardown();
        for ns in NS {
            ip(&["netns", "add", ns])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        let net = Net;
        ip(&["-n", "pcfo-sw", "link", "add", "br0", "type", "bridge"])?;
        ip(&["-n", "pcfo-sw", "link", "set", "br0", "up"])?;
        for (ns, addrs) in [
            ("pcfo-lb1", &["10.251.0.11/24"][..]),
            ("pcfo-lb2", &["10.251.0.12/24"][..]),
            ("pcfo-cl", &["10.251.0.2/24", "10.251.0.3/24"][..]),
            ("pcfo-be", &["10.251.0.20/24"][..]),
        ] {
            let peer = format!("v-{}", &ns[5..]);
            ip(&[
                "-n", "pcfo-sw", "link", "add", &peer, "type", "veth", "peer", "name", "eth0",
                "netns", ns,
            ])?;
            ip(&["-n", "pcfo-sw", "link", "set", &peer, "master", "br0", "up"])?;
            for a in addrs {
                ip(&["-n", ns, "addr", "add", a, "dev", "eth0"])?;
            }
            ip(&["-n", ns, "link", "set", "eth0", "up"])?;
        }
        // The standby binds the VIP before it owns it.
        for ns in ["pcfo-lb1", "pcfo-lb2"] {
            let ok = in_ns(ns, "sysctl")
                .args(["-qw", "net.ipv4.ip_nonlocal_bind=1"])
                .status()
                .is_ok_and(|s| s.success());
            if !ok {
                return Err(format!("{ns}: cannot set ip_nonlocal_bind"));
            }
        }
        Ok(net)
    }

    fn teardown() {
        for ns in NS {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stderr(Stdio::null())
                .status();
        }
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        Net::teardown();
    }
}

/// Children killed on drop.
struct Procs(Vec<Child>);

impl Drop for Procs {
    fn drop(&mut self) {
        for c in &mut self.0 {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

fn keepalived_conf(me: usize) -> String {
    let (src, peer, prio) = if me == 1 {
        ("10.251.0.11", "10.251.0.12", 150)
    } else {
        ("10.251.0.12", "10.251.0.11", 100)
    };
    format!(
        "global_defs {{\n  router_id lb{me}\n  enable_script_security\n  script_user root\n}}\n\
         vrrp_script proxy_ok {{\n  script \"/usr/bin/curl -sf --max-time 1 -o /dev/null http://127.0.0.1:8404/healthz\"\n  \
         interval 1\n  fall 1\n  rise 1\n}}\n\
         vrrp_instance VI {{\n  state {}\n  interface eth0\n  virtual_router_id 51\n  priority {prio}\n  \
         advert_int 1\n  unicast_src_ip {src}\n  unicast_peer {{\n    {peer}\n  }}\n  \
         virtual_ipaddress {{\n    {VIP}/24 dev eth0\n  }}\n  track_script {{\n    proxy_ok\n  }}\n}}\n",
        if me == 1 { "MASTER" } else { "BACKUP" },
    )
}

fn proxy_conf(me: usize, dir: &Path, peers: bool) -> String {
    let peers_section = if peers {
        "peers mesh\n    peer lb1 10.251.0.11:10000\n    peer lb2 10.251.0.12:10000\n"
    } else {
        ""
    };
    format!(
        "global\n    stats socket {}/lb{me}.sock level admin\n\
         defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         {peers_section}\
         frontend health\n    bind 127.0.0.1:8404\n    monitor-uri /healthz\n\
         frontend fe\n    bind {VIP}:80\n    \
         stick-table type ip size 100k expire 60s store http_req_rate(10s){}\n    \
         http-request track-sc0 src\n    \
         http-request deny deny_status 429 if {{ sc_http_req_rate(0) gt {LIMIT} }}\n    \
         default_backend be\n\
         backend be\n    server s1 {BACKEND}:8080 check inter 500ms\n",
        dir.display(),
        if peers { " peers mesh" } else { "" }
    )
}

/// One balancer's result.
struct Row {
    name: String,
    peers: &'static str,
    sent: usize,
    failed: usize,
    gap_ms: u128,
    limited_after: Option<bool>,
    note: String,
}

pub fn run(args: &[String]) -> Result {
    let (mut balancers, mut prebuilt, mut secs) =
        (vec!["portcullis", "haproxy"], None::<PathBuf>, 16u64);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--failover" => {}
            "--balancer" => {
                balancers = match it.next().map(String::as_str) {
                    Some("portcullis") => vec!["portcullis"],
                    Some("haproxy") => vec!["haproxy"],
                    Some("both") => vec!["portcullis", "haproxy"],
                    _ => return Err(USAGE.into()),
                }
            }
            "--portcullis" => prebuilt = it.next().map(PathBuf::from),
            "--seconds" => {
                secs = it
                    .next()
                    .and_then(|v| v.parse().ok())
                    .filter(|s| *s >= 8)
                    .ok_or(USAGE)?
            }
            _ => return Err(format!("unknown option '{a}'\n{USAGE}")),
        }
    }
    if !crate::util::is_root() {
        return Err("drill --failover needs root (network namespaces)".into());
    }
    for tool in ["keepalived", "curl", "python3", "ip"] {
        if which(tool).is_none() {
            return Err(format!("{tool} is missing (cargo xtask setup installs it)"));
        }
    }
    let dir = crate::util::target_dir().join("xtask-failover");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let mut rows = Vec::new();
    for b in balancers {
        let bin = match b {
            "portcullis" => match &prebuilt {
                Some(p) => p.clone(),
                None => {
                    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                    crate::util::exec(
                        Command::new(cargo)
                            .args(["build", "--release", "-p", "portcullis"])
                            .current_dir(crate::util::root()),
                    )?;
                    crate::util::target_dir().join("release/portcullis")
                }
            },
            _ => match which("haproxy") {
                Some(p) => p,
                None => {
                    println!("failover: haproxy is not installed, its row is left out");
                    continue;
                }
            },
        };
        let name = if b == "haproxy" {
            crate::util::haproxy_label(&bin)
        } else {
            "portcullis".into()
        };
        println!("failover: {name} …");
        let sub = dir.join(b);
        std::fs::create_dir_all(&sub).map_err(|e| format!("{}: {e}", sub.display()))?;
        let row = one(&name, &bin, &sub, secs)?;
        println!("{}", line(&row));
        rows.push(row);
    }
    println!("\n{}", header());
    for r in &rows {
        println!("{}", line(r));
    }
    for r in &rows {
        if !r.note.is_empty() {
            println!("{}: {}", r.name, r.note);
        }
    }
    println!("\nconfigs and logs: {}", dir.display());
    Ok(())
}

fn header() -> String {
    format!(
        "{:<16} {:<6} {:>5} {:>7} {:>14} {:>22}",
        "balancer", "peers", "sent", "failed", "failover (ms)", "rate limit kept"
    )
}

fn line(r: &Row) -> String {
    format!(
        "{:<16} {:<6} {:>5} {:>7} {:>14} {:>22}",
        r.name,
        r.peers,
        r.sent,
        r.failed,
        r.gap_ms,
        match r.limited_after {
            Some(true) => "yes",
            Some(false) => "no",
            None => "-",
        }
    )
}

/// Starts the proxy of host `me` in its namespace; None when it exits at once.
fn start_proxy(bin: &Path, me: usize, dir: &Path, peers: bool) -> Result<Option<Child>> {
    let cfg = dir.join(format!("lb{me}.cfg"));
    std::fs::write(&cfg, proxy_conf(me, dir, peers)).map_err(|e| format!("{e}"))?;
    let log = std::fs::File::create(dir.join(format!("lb{me}.log"))).map_err(|e| format!("{e}"))?;
    let mut c = in_ns(&format!("pcfo-lb{me}"), &bin.to_string_lossy())
        .args(["-db", "-L", &format!("lb{me}"), "-f"])
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .map_err(|e| format!("{}: {e}", bin.display()))?;
    std::thread::sleep(Duration::from_millis(700));
    if let Ok(Some(_)) = c.try_wait() {
        return Ok(None);
    }
    Ok(Some(c))
}

fn one(name: &str, bin: &Path, dir: &Path, secs: u64) -> Result<Row> {
    let _net = Net::build()?;
    let mut procs = Procs(Vec::new());
    // The backend: Python's threading HTTP server.
    procs.0.push(
        in_ns("pcfo-be", "python3")
            .args(["-m", "http.server", "8080", "--bind", BACKEND])
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("python3: {e}"))?,
    );
    let mut peers = true;
    let mut note = String::new();
    let mut lbs = Vec::new();
    for me in [1, 2] {
        let p = match start_proxy(bin, me, dir, peers)? {
            Some(p) => p,
            None if peers => {
                // A proxy that refuses the peers section runs without it (the row says so).
                let why = std::fs::read_to_string(dir.join(format!("lb{me}.log")))
                    .unwrap_or_default()
                    .lines()
                    .find(|l| l.contains("ALERT"))
                    .unwrap_or("")
                    .to_string();
                note = format!("peers refused at start ({}); ran without", why.trim());
                peers = false;
                for mut l in lbs.drain(..) {
                    let _ = Child::kill(&mut l);
                    let _ = Child::wait(&mut l);
                }
                match (
                    start_proxy(bin, 1, dir, false)?,
                    start_proxy(bin, 2, dir, false)?,
                ) {
                    (Some(a), Some(b)) => {
                        lbs.push(a);
                        lbs.push(b);
                    }
                    _ => return Err(format!("{name} does not start: see {}", dir.display())),
                }
                break;
            }
            None => return Err(format!("{name} does not start: see {}", dir.display())),
        };
        lbs.push(p);
    }
    for me in [1, 2] {
        let conf = dir.join(format!("keepalived-lb{me}.conf"));
        std::fs::write(&conf, keepalived_conf(me)).map_err(|e| format!("{e}"))?;
        let log = std::fs::File::create(dir.join(format!("keepalived-lb{me}.log")))
            .map_err(|e| format!("{e}"))?;
        let pid = |k: &str| dir.join(format!("lb{me}-{k}.pid"));
        procs.0.push(
            in_ns(&format!("pcfo-lb{me}"), "keepalived")
                .args(["-n", "-l", "-D", "-f"])
                .arg(&conf)
                .arg("-p")
                .arg(pid("main"))
                .arg("-r")
                .arg(pid("vrrp"))
                .arg("-c")
                .arg(pid("checkers"))
                .stdout(log.try_clone().map_err(|e| format!("{e}"))?)
                .stderr(log)
                .spawn()
                .map_err(|e| format!("keepalived: {e}"))?,
        );
    }
    // lb1 owns the VIP once keepalived has settled.
    let t0 = Instant::now();
    let vip: SocketAddr = format!("{VIP}:80").parse().map_err(|e| format!("{e}"))?;
    while !owns_vip("pcfo-lb1") {
        if t0.elapsed() > Duration::from_secs(15) {
            return Err("lb1 never took the VIP (see keepalived-lb1.log)".into());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let me = std::env::current_exe().map_err(|e| format!("{e}"))?;
    let client = |src: &str, rate: u32| {
        in_ns("pcfo-cl", &me.to_string_lossy())
            .args(["drill-client", "--addr", &vip.to_string(), "--src", src])
            .args(["--rate", &rate.to_string(), "--seconds", &secs.to_string()])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("drill-client: {e}"))
    };
    let start = Instant::now();
    let normal = client(CLIENT, 20)?;
    let abuser = client(ABUSER, 100)?;
    // Kill the active proxy after a third of the run, as a crash would.
    std::thread::sleep(Duration::from_secs(secs / 3));
    let kill_at = start.elapsed().as_millis();
    if let Some(p) = lbs.first_mut() {
        let _ = p.kill();
        let _ = p.wait();
    }
    let normal = outcomes(normal)?;
    let abuser = outcomes(abuser)?;
    procs.0.extend(lbs);
    let failed = normal.iter().filter(|(_, c)| *c != 200).count();
    // The longest stretch without a successful request, around the kill.
    let mut gap = 0u128;
    let mut last_ok = 0u128;
    for (t, c) in &normal {
        if *c == 200 {
            gap = gap.max(t.saturating_sub(last_ok));
            last_ok = *t;
        }
    }
    // The abuser's first answer after the kill comes from the new host (the old one's proxy is
    // dead): still 429 if its rate came across.
    let limited_before = abuser
        .iter()
        .filter(|(t, _)| *t < kill_at)
        .any(|(_, c)| *c == 429);
    let first_after = abuser
        .iter()
        .find(|(t, c)| *t > kill_at && (*c == 200 || *c == 429))
        .map(|(_, c)| *c == 429);
    if !limited_before {
        note.push_str(" the abuser was never limited before the kill;");
    }
    Ok(Row {
        name: name.into(),
        peers: if peers { "yes" } else { "no" },
        sent: normal.len(),
        failed,
        gap_ms: gap,
        limited_after: first_after.filter(|_| limited_before),
        note,
    })
}

fn owns_vip(ns: &str) -> bool {
    in_ns(ns, "ip")
        .args(["-4", "-o", "addr", "show", "dev", "eth0"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains(&format!("{VIP}/")))
}

/// The client's lines: `<ms since its start> <status or 0>`.
fn outcomes(mut c: Child) -> Result<Vec<(u128, u16)>> {
    let mut out = String::new();
    if let Some(s) = c.stdout.as_mut() {
        let _ = s.read_to_string(&mut out);
    }
    let _ = c.wait();
    Ok(out
        .lines()
        .filter_map(|l| {
            let (t, s) = l.split_once(' ')?;
            Some((t.parse().ok()?, s.parse().ok()?))
        })
        .collect())
}

/// `xtask drill-client --addr A --src S --rate N --seconds T`: one connection per request at a
/// fixed rate from source address S, each outcome printed as `<ms> <status>` (0: no answer).
pub fn client(args: &[String]) -> Result {
    let mut addr = None::<SocketAddr>;
    let mut src = None::<IpAddr>;
    let (mut rate, mut secs) = (10u32, 10u64);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let v = it.next().ok_or(format!("{a} needs a value"))?;
        match a.as_str() {
            "--addr" => addr = v.parse().ok(),
            "--src" => src = v.parse().ok(),
            "--rate" => rate = v.parse().map_err(|_| "--rate")?,
            "--seconds" => secs = v.parse().map_err(|_| "--seconds")?,
            _ => return Err(format!("unknown option '{a}'")),
        }
    }
    let addr = addr.ok_or("--addr")?;
    let start = Instant::now();
    let every = Duration::from_secs_f64(1.0 / f64::from(rate.max(1)));
    let mut next = start;
    let stdout = std::io::stdout();
    let mut out = stdout.lock();
    while start.elapsed() < Duration::from_secs(secs) {
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        }
        next += every;
        let t = start.elapsed().as_millis();
        let status = request(addr, src).unwrap_or(0);
        let _ = writeln!(out, "{t} {status}");
    }
    Ok(())
}

fn request(addr: SocketAddr, src: Option<IpAddr>) -> Option<u16> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    if let Some(ip) = src {
        sock.bind(&SocketAddr::new(ip, 0).into()).ok()?;
    }
    sock.connect_timeout(&addr.into(), Duration::from_millis(500))
        .ok()?;
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"GET / HTTP/1.1\r\nHost: vip\r\nConnection: close\r\n\r\n")
        .ok()?;
    let mut line = String::new();
    BufReader::new(s).read_line(&mut line).ok()?;
    line.split_whitespace().nth(1)?.parse().ok()
}
