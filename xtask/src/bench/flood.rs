//! The `syn-flood` workload: a SYN flood from one network namespace while legitimate clients
//! connect from another, against each target running in a third, joined by veth pairs.
//!
//! Per repetition, in namespaces of its own (`pcbf<pid>-<n>{s,f,c}`, deleted on drop, leftovers
//! of dead runs deleted first):
//! - server namespace: the target (its proxy pinned to the proxy core) in front of the
//!   `bench-load echo` backend; direct is the echo server itself, unprotected;
//! - flood namespace: `bench-load syn-flood`, raw SYNs (IP_HDRINCL) from a few addresses the
//!   server routes back to it and it blackholes, random source ports: the half-open
//!   connections of a spoofed flood, never answered by a RST;
//! - client namespace: `bench-load connects`, open-loop connects at a fixed rate under the
//!   per-source limit, each with one 64-byte echo round trip; connect latency counts from the
//!   time each connect was due.
//!
//! HAProxy and portcullis run the same `mode tcp` frontend (a `conn_rate(1s)` stick table and a
//! `reject if { sc_conn_rate(0) gt LIMIT }` rule); portcullis adds `portcullis-xdp` on both
//! server-side veths. CPU: the proxy process' own, and the machine's system + softirq time,
//! since the kernel spends the flood's cost (XDP drops, SYN cookies) in softirq, charged to no
//! proxy. The machine figure includes the flood sender's own send path and whatever else runs.

use super::report;
use super::{Env, LOAD_CORE, PROXY_CORE, Proc, Target, TargetKind, cpu_seconds, spawn_logged};
use crate::util::{Result, have, is_root, output, show};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::Command;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// `sc_conn_rate(0) gt LIMIT` over `conn_rate(1s)`.
const LIMIT: u32 = 300;
/// SYNs a second the flood aims at, spread over `FLOOD_SOURCES` addresses.
const FLOOD_RATE: u32 = 25_000;
const FLOOD_SOURCES: u8 = 4;
/// Legitimate connects a second, all from one address: half the limit.
const LEGIT_RATE: u32 = 150;
/// Long enough for one SYN retransmission (after 1 s): a connect that needed one counts as a
/// success with its latency.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// The flood runs this long before the clients start, so they meet a full SYN queue.
const RAMP: Duration = Duration::from_millis(500);
/// A legitimate connect whose client was this late to start it is skipped (counted, not run).
const LATE: Duration = Duration::from_millis(250);
const FE_PORT: u16 = 8080;
const BE_PORT: u16 = 9000;
const NS_PREFIX: &str = "pcbf";
/// Inside the namespaces only: server .1 / peer .2 on each link, spoofed flood sources in .3.
const FLOOD_NET: [u8; 3] = [10, 78, 1];
const CLIENT_NET: [u8; 3] = [10, 78, 2];
const SPOOF_NET: [u8; 3] = [10, 78, 3];

/// The row title: what the flood and the clients are.
pub fn title() -> String {
    format!(
        "SYN flood ({} SYN/s from {FLOOD_SOURCES} sources, limit {LIMIT} conn/s per source) with {LEGIT_RATE} legit connects/s",
        report::number(f64::from(FLOOD_RATE))
    )
}

/// The metrics of a repetition, in [`rep`]'s order.
pub const METRICS: [(&str, report::Better); 7] = [
    ("legit success %", report::Better::Higher),
    ("connect p50 ms", report::Better::Lower),
    ("connect p99 ms", report::Better::Lower),
    ("proxy CPU %", report::Better::Lower),
    ("kernel CPU % (machine sys+softirq)", report::Better::Lower),
    ("flood path CPU µs/SYN", report::Better::Lower),
    // The sender shares its core with the receive path: a cheaper path lets it send more.
    ("flood SYN/s sent", report::Better::Higher),
];

pub const METHOD: &str = "syn-flood: per repetition fresh network namespaces (server, flood, clients) joined by veths; \
     raw SYNs (target 25,000/s) from 4 spoofed sources the server routes back to the flood namespace, which \
     blackholes the SYN-ACKs (half-open connections, no RST); the flood starts 0.5 s before the legit client, \
     which opens connections open-loop from one address at half the per-source limit, one 64 B echo \
     round trip each (a slot the client itself reaches over 250 ms late is skipped, not bunched), 3 s connect timeout (one SYN retransmission fits), latency from each connect's due time; \
     same stick-table rule for every proxy, portcullis adding `portcullis-xdp <both veths> mode auto`; \
     direct: the echo server alone; CPU in % of one core: the proxy process, and the whole machine's \
     system+irq+softirq time (includes other jobs); flood path CPU per SYN: the sender's CPU (its sends and \
     the receive path the kernel runs in its context: the XDP drop, or the stack, SYN cookie and SYN-ACK) plus \
     ksoftirqd's, over the SYNs sent; the server's receive path for the flood runs on the sender's core (veth), \
     the load core, like a NIC's interrupt core shared with the clients: a costlier path slows the \
     legit handshakes behind it and lets the sender reach fewer SYN/s";

/// Why this machine cannot run the workload (checked once): it needs root and iproute2, and
/// network namespaces it may create. Also deletes the namespaces of earlier runs that died.
pub fn cannot_run() -> Option<String> {
    static WHY: OnceLock<Option<String>> = OnceLock::new();
    WHY.get_or_init(|| {
        if !is_root() {
            return Some("needs root (network namespaces, veth, XDP)".into());
        }
        if !have("ip") {
            return Some("needs iproute2 (`ip`)".into());
        }
        delete_leftovers();
        let probe = format!("{NS_PREFIX}{}-probe", std::process::id());
        let why = ip(&["netns", "add", &probe]).err();
        let _ = ip(&["netns", "del", &probe]);
        why.map(|e| format!("cannot create a network namespace: {e}"))
    })
    .clone()
}

/// Why a target has no cell in this workload, when it has none.
pub fn unavailable(kind: TargetKind) -> Option<report::Cell> {
    match kind {
        TargetKind::Direct | TargetKind::Haproxy | TargetKind::Portcullis(_) => None,
        TargetKind::Nginx => Some(report::Cell::Skipped(
            "nginx has no per-source connection-rate reject (limit_conn counts concurrent connections)"
                .into(),
        )),
    }
}

fn ip(args: &[&str]) -> Result {
    let out = Command::new("ip")
        .args(args)
        .output()
        .map_err(|e| format!("cannot run ip: {e}"))?;
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

/// Namespaces named `pcbf<pid>-…` whose process is gone.
fn delete_leftovers() {
    let list = output(Command::new("ip").args(["netns", "list"])).unwrap_or_default();
    for name in stale_namespaces(&list, |pid| Path::new(&format!("/proc/{pid}")).exists()) {
        let _ = ip(&["netns", "del", &name]);
    }
}

/// The names in `ip netns list` output made by a bench whose pid is no longer alive.
fn stale_namespaces(list: &str, alive: impl Fn(u32) -> bool) -> Vec<String> {
    list.lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|name| {
            name.strip_prefix(NS_PREFIX)
                .and_then(|rest| rest.split_once('-'))
                .and_then(|(pid, _)| pid.parse::<u32>().ok())
                .is_some_and(|pid| !alive(pid))
        })
        .map(str::to_string)
        .collect()
}

fn addr(net: [u8; 3], last: u8) -> Ipv4Addr {
    Ipv4Addr::new(net[0], net[1], net[2], last)
}

/// The three namespaces of one repetition; deleted (with their veths) on drop.
struct Net {
    srv: String,
    flood: String,
    client: String,
}

/// The server's interfaces (names inside its namespace) toward the flood and the clients.
const IF_FLOOD: &str = "to-flood";
const IF_CLIENT: &str = "to-client";

impl Net {
    fn new() -> Result<Net> {
        static SEQ: AtomicU32 = AtomicU32::new(0);
        let tag = format!(
            "{NS_PREFIX}{}-{}",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        );
        let n = Net {
            srv: format!("{tag}s"),
            flood: format!("{tag}f"),
            client: format!("{tag}c"),
        };
        for ns in [&n.srv, &n.flood, &n.client] {
            ip(&["netns", "add", ns])?;
            ip(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        for (mine, peer_ns, net) in [
            (IF_FLOOD, &n.flood, FLOOD_NET),
            (IF_CLIENT, &n.client, CLIENT_NET),
        ] {
            ip(&[
                "-n", &n.srv, "link", "add", mine, "type", "veth", "peer", "name", "eth0", "netns",
                peer_ns,
            ])?;
            ip(&[
                "-n",
                &n.srv,
                "addr",
                "add",
                &format!("{}/24", addr(net, 1)),
                "dev",
                mine,
            ])?;
            ip(&[
                "-n",
                peer_ns,
                "addr",
                "add",
                &format!("{}/24", addr(net, 2)),
                "dev",
                "eth0",
            ])?;
            ip(&["-n", &n.srv, "link", "set", mine, "up"])?;
            ip(&["-n", peer_ns, "link", "set", "eth0", "up"])?;
        }
        // The spoofed sources: the server answers them through the flood namespace, which
        // drops the SYN-ACKs silently (no RST frees the server's half-open entries).
        let spoof = format!("{}/24", addr(SPOOF_NET, 0));
        ip(&[
            "-n",
            &n.srv,
            "route",
            "add",
            &spoof,
            "via",
            &addr(FLOOD_NET, 2).to_string(),
        ])?;
        ip(&["-n", &n.flood, "route", "add", "blackhole", &spoof])?;
        Ok(n)
    }

    /// `ip netns exec <ns> [taskset -c <core>] <program>`.
    fn exec(&self, ns: &str, core: &str, pin: bool, program: &Path) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", ns]);
        if pin {
            c.args(["taskset", "-c", core]);
        }
        c.arg(program);
        c
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in [&self.srv, &self.flood, &self.client] {
            let _ = ip(&["netns", "del", ns]);
        }
    }
}

/// The frontend every proxy runs; `xdp` adds portcullis' filter on those interfaces (HAProxy
/// would refuse the keyword).
pub fn config(admin: &Path, xdp: Option<&[&str]>) -> String {
    let xdp = xdp.map_or(String::new(), |ifs| {
        format!("    portcullis-xdp {} mode auto\n", ifs.join(" "))
    });
    format!(
        "global\n    nbthread 1\n    maxconn 4096\n    stats socket {} level admin\n{xdp}\n\
         defaults\n    mode tcp\n    timeout connect 5s\n    timeout client 30s\n    timeout server 30s\n\n\
         frontend flood\n    mode tcp\n    bind :{FE_PORT}\n    \
         stick-table type ip size 100k expire 30s store conn_rate(1s)\n    \
         tcp-request connection track-sc0 src\n    \
         tcp-request connection reject if {{ sc_conn_rate(0) gt {LIMIT} }}\n    \
         default_backend echo\n\n\
         backend echo\n    mode tcp\n    server echo1 127.0.0.1:{BE_PORT}\n",
        admin.display()
    )
}

/// Runs `f` on a thread that entered network namespace `ns`.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).map_err(|e| format!("{path}: {e}"))?;
        // SAFETY: a namespace descriptor we opened; only this thread changes namespace.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(format!("setns {path}: {}", std::io::Error::last_os_error()));
        }
        Ok(f())
    })
    .join()
    .map_err(|_| "namespace thread panicked".to_string())?
}

/// One connect and 64-byte echo round trip; the connect's latency.
fn echo_once(to: SocketAddr, timeout: Duration) -> std::io::Result<Duration> {
    let t0 = Instant::now();
    let mut s = TcpStream::connect_timeout(&to, timeout)?;
    let connected = t0.elapsed();
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(timeout))?;
    s.set_write_timeout(Some(timeout))?;
    let ping = [b'f'; 64];
    s.write_all(&ping)?;
    let mut buf = [0u8; 64];
    s.read_exact(&mut buf)?;
    if buf != ping {
        return Err(std::io::Error::other("echo mismatch"));
    }
    Ok(connected)
}

/// Waits until the target answers an echo from the client namespace, or `child` exits.
fn wait_ready(net: &Net, to: SocketAddr, child: &mut Proc) -> Result {
    let deadline = Instant::now() + super::START_TIMEOUT;
    let mut last = String::from("no answer");
    while Instant::now() < deadline {
        if let Ok(Some(status)) = child.0.try_wait() {
            return Err(format!("exited at start ({status})"));
        }
        match in_ns(&net.client, move || {
            echo_once(to, Duration::from_millis(500))
        })? {
            Ok(_) => return Ok(()),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!(
        "not ready after {:?} ({last})",
        super::START_TIMEOUT
    ))
}

/// A command on the admin socket.
fn cli(sock: &Path, cmd: &str) -> String {
    let Ok(mut s) = UnixStream::connect(sock) else {
        return String::new();
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = s.write_all(format!("{cmd}\n").as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// `Status` and `DroppedSynRate` of `show xdp`, for the progress line.
fn xdp_summary(show: &str) -> String {
    let field = |k: &str| {
        show.lines()
            .find_map(|l| l.strip_prefix(k))
            .map(|v| v.trim().to_string())
    };
    match (field("Status:"), field("DroppedSynRate:")) {
        (Some(s), Some(d)) => format!("xdp {s}, {d} SYNs dropped"),
        (Some(s), None) => format!("xdp {s}"),
        _ => "no show xdp answer".into(),
    }
}

/// Kernel time (system + irq + softirq) and all time from the first line of /proc/stat, in
/// USER_HZ ticks.
fn kernel_ticks(stat: &str) -> Option<(u64, u64)> {
    let line = stat.lines().next()?.strip_prefix("cpu ")?;
    let v: Vec<u64> = line
        .split_whitespace()
        .take(8)
        .map(str::parse)
        .collect::<std::result::Result<_, _>>()
        .ok()?;
    // user nice system idle iowait irq softirq steal
    let kernel = v.get(2)? + v.get(5)? + v.get(6)?;
    Some((kernel, v.iter().sum()))
}

/// The value of `key=<f64>` in a result line.
fn word(line: &str, key: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// CPU seconds of the per-CPU softirq threads: the receive work the kernel defers there is
/// charged to no sender.
fn ksoftirqd_seconds() -> Option<f64> {
    let mut total = 0.0;
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Some(pid) = e.file_name().to_str().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        let comm = std::fs::read_to_string(e.path().join("comm")).unwrap_or_default();
        if comm.starts_with("ksoftirqd/") {
            total += cpu_seconds(pid)?;
        }
    }
    Some(total)
}

fn machine_kernel_ticks() -> Option<u64> {
    kernel_ticks(&std::fs::read_to_string("/proc/stat").ok()?).map(|(k, _)| k)
}

/// Stops a process started in a namespace: SIGTERM so portcullis detaches its filter, then
/// SIGKILL (by [`Proc`]'s drop) if it lingers.
fn stop(mut p: Proc) {
    if matches!(p.0.try_wait(), Ok(None)) {
        // SAFETY: signalling our own child, not yet reaped, by its pid.
        unsafe { libc::kill(p.0.id() as i32, libc::SIGTERM) };
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(3) {
            if let Ok(Some(_)) = p.0.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// One repetition against `t`: the [`METRICS`] values and the failed legitimate connects.
pub fn rep(env: &Env, t: &Target) -> Result<(Vec<Option<f64>>, u64)> {
    let net = Net::new()?;
    let tag = format!("flood-{}", t.id);
    let mut cmd = net.exec(&net.srv, LOAD_CORE, env.pin, &env.load_bin);
    cmd.args([
        "bench-load",
        "echo",
        "--listen",
        &format!("0.0.0.0:{BE_PORT}"),
    ]);
    let echo = spawn_logged(cmd, &env.dir.join(format!("{tag}-echo.log")))?;
    let admin = env.dir.join(format!("{tag}.sock"));
    let _ = std::fs::remove_file(&admin);
    let (proxy, port) = match t.kind {
        TargetKind::Direct => (None, BE_PORT),
        TargetKind::Haproxy | TargetKind::Portcullis(_) => {
            let (bin, xdp) = match t.kind {
                TargetKind::Portcullis(_) => (t.portcullis(env)?, Some(&[IF_FLOOD, IF_CLIENT][..])),
                _ => (
                    crate::util::which("haproxy").ok_or("no haproxy on PATH")?,
                    None,
                ),
            };
            let cfg = env.dir.join(format!("{tag}.cfg"));
            std::fs::write(&cfg, config(&admin, xdp)).map_err(|e| e.to_string())?;
            let mut cmd = net.exec(&net.srv, PROXY_CORE, env.pin, &bin);
            cmd.arg("-f").arg(&cfg).arg("-db");
            if let TargetKind::Portcullis(io) = t.kind {
                cmd.args(["--io", io]);
            }
            (
                Some(spawn_logged(cmd, &env.dir.join(format!("{tag}.log")))?),
                FE_PORT,
            )
        }
        TargetKind::Nginx => return Err("not applicable".into()),
    };
    let mut proxy = proxy;
    let mut echo = echo;
    let legit_to = SocketAddr::from((addr(CLIENT_NET, 1), port));
    match proxy.as_mut() {
        Some(p) => wait_ready(&net, legit_to, p),
        None => wait_ready(&net, legit_to, &mut echo),
    }
    .map_err(|e| {
        let log = super::last_line(&env.dir.join(format!("{tag}.log")));
        format!("{e}: {log}")
    })?;
    let status = if matches!(t.kind, TargetKind::Portcullis(_)) {
        cli(&admin, "show xdp")
            .lines()
            .next()
            .unwrap_or("")
            .to_string()
    } else {
        String::new()
    };
    if !status.is_empty() {
        println!("     {status}");
    }
    let pid = proxy.as_ref().map(|p| p.0.id());
    let result = measure(env, &net, port, legit_to, pid);
    if matches!(t.kind, TargetKind::Portcullis(_)) {
        println!("     {}", xdp_summary(&cli(&admin, "show xdp")));
    }
    if let Some(p) = proxy {
        stop(p);
    }
    drop(echo);
    let _ = std::fs::remove_file(&admin);
    result
}

/// The flood, then the legitimate clients while it goes on; CPU over the clients' run.
fn measure(
    env: &Env,
    net: &Net,
    port: u16,
    legit_to: SocketAddr,
    proxy_pid: Option<u32>,
) -> Result<(Vec<Option<f64>>, u64)> {
    let secs = env.secs as f64;
    let flood_secs = secs + RAMP.as_secs_f64() + 0.5;
    let mut cmd = net.exec(&net.flood, LOAD_CORE, env.pin, &env.load_bin);
    cmd.args([
        "bench-load",
        "syn-flood",
        "--addr",
        &SocketAddr::from((addr(FLOOD_NET, 1), port)).to_string(),
        "--from",
        &addr(SPOOF_NET, 1).to_string(),
        "--sources",
        &FLOOD_SOURCES.to_string(),
        "--rate",
        &FLOOD_RATE.to_string(),
        "--duration",
        &format!("{flood_secs:.1}"),
    ]);
    println!("   $ {}", show(&cmd));
    let softirq0 = ksoftirqd_seconds();
    let flood = cmd
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the flood: {e}"))?;
    std::thread::sleep(RAMP);
    let mut cmd = net.exec(&net.client, LOAD_CORE, env.pin, &env.load_bin);
    cmd.args([
        "bench-load",
        "connects",
        "--addr",
        &legit_to.to_string(),
        "--rate",
        &LEGIT_RATE.to_string(),
        "--duration",
        &env.secs.to_string(),
    ]);
    let t0 = Instant::now();
    let cpu0 = proxy_pid.and_then(cpu_seconds);
    let k0 = machine_kernel_ticks();
    let legit = super::client(cmd, Duration::from_secs(env.secs) + super::CLIENT_GRACE);
    let wall = t0.elapsed().as_secs_f64();
    let cpu1 = proxy_pid.and_then(cpu_seconds);
    let k1 = machine_kernel_ticks();
    let flood_out = flood
        .wait_with_output()
        .map_err(|e| format!("flood: {e}"))?;
    let flood_text = String::from_utf8_lossy(&flood_out.stdout);
    let softirq = softirq0.zip(ksoftirqd_seconds()).map(|(a, b)| b - a);
    let sender_cpu = flood_text
        .lines()
        .rev()
        .find(|l| l.starts_with("ops="))
        .and_then(|l| word(l, "cpu_s"));
    let sent = super::parse::load_line(&flood_text).ok_or_else(|| {
        format!(
            "no result from the flood: {}",
            String::from_utf8_lossy(&flood_out.stderr).trim()
        )
    })?;
    println!(
        "     flood: {} SYN/s sent ({} send errors); CPU {:.2}s in the sender, {:.2}s in ksoftirqd",
        report::number(sent.value),
        sent.errors,
        sender_cpu.unwrap_or(0.0),
        softirq.unwrap_or(0.0)
    );
    let legit = legit?;
    for l in legit.lines().filter(|l| l.starts_with("failed: ")) {
        println!("     legit {l}");
    }
    let late = legit
        .lines()
        .rev()
        .find(|l| l.starts_with("ops="))
        .and_then(|l| word(l, "late"))
        .unwrap_or(0.0);
    if late > 0.0 {
        println!("     legit client: {late} connects skipped (the client ran over 250 ms late)");
    }
    let legit = super::parse::load_line(&legit).ok_or("no result from the legitimate clients")?;
    let tried = legit.ops + legit.errors as f64;
    let success = (tried > 0.0).then(|| legit.ops / tried * 100.0);
    let proxy_cpu = match (cpu0, cpu1) {
        (Some(a), Some(b)) => Some((b - a) / wall * 100.0),
        _ => None,
    };
    // USER_HZ ticks to seconds.
    let kernel_secs = match (k0, k1) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 100.0),
        _ => None,
    };
    let kernel = kernel_secs.map(|k| k / wall * 100.0);
    let per_syn = match (sender_cpu, softirq) {
        (Some(c), Some(k)) if sent.ops > 0.0 => Some((c + k) * 1e6 / sent.ops),
        _ => None,
    };
    let (p50, p99) = if legit.ops > 0.0 {
        (legit.p50_ms, legit.p99_ms)
    } else {
        (None, None)
    };
    Ok((
        vec![
            success,
            p50,
            p99,
            proxy_cpu,
            kernel,
            per_syn,
            Some(sent.value),
        ],
        legit.errors,
    ))
}

// ---- the load clients: `xtask bench-load syn-flood|connects …` ----

#[derive(Debug, PartialEq)]
struct ClientArgs {
    addr: SocketAddrV4,
    from: Ipv4Addr,
    sources: u8,
    rate: f64,
    secs: f64,
}

fn parse_client_args(args: &[String]) -> Result<ClientArgs> {
    let mut a = ClientArgs {
        addr: SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0),
        from: Ipv4Addr::UNSPECIFIED,
        sources: 1,
        rate: 0.0,
        secs: 1.0,
    };
    let mut it = args.iter();
    while let Some(k) = it.next() {
        let v = it.next().ok_or_else(|| format!("{k} needs a value"))?;
        let bad = || format!("bad value '{v}' for {k}");
        match k.as_str() {
            "--addr" => a.addr = v.parse().map_err(|_| bad())?,
            "--from" => a.from = v.parse().map_err(|_| bad())?,
            "--sources" => a.sources = v.parse().ok().filter(|n| *n > 0).ok_or_else(bad)?,
            "--rate" => a.rate = v.parse().ok().filter(|r| *r > 0.0).ok_or_else(bad)?,
            "--duration" => a.secs = v.parse().ok().filter(|s| *s > 0.0).ok_or_else(bad)?,
            _ => return Err(format!("unknown option '{k}'")),
        }
    }
    if a.addr.port() == 0 {
        return Err("--addr is required".into());
    }
    if a.rate <= 0.0 {
        return Err("--rate is required".into());
    }
    Ok(a)
}

/// The `bench-load` kinds of this workload; `None` for the others.
pub fn client(kind: &str, args: &[String]) -> Option<Result> {
    let run = match kind {
        "syn-flood" => syn_flood,
        "connects" => connects,
        _ => return None,
    };
    Some(parse_client_args(args).and_then(|a| run(&a)))
}

/// The ones' complement sum of `data` (16-bit big-endian words) added to `sum`, folded.
fn ones_sum(data: &[u8], mut sum: u32) -> u32 {
    for pair in data.chunks(2) {
        let hi = u32::from(pair.first().copied().unwrap_or(0));
        let lo = u32::from(pair.get(1).copied().unwrap_or(0));
        sum += (hi << 8) | lo;
    }
    while sum > 0xFFFF {
        sum = (sum & 0xFFFF) + (sum >> 16);
    }
    sum
}

/// The Internet checksum (RFC 1071) of `data`, starting from a partial sum.
pub fn checksum(data: &[u8], partial: u32) -> u16 {
    !(ones_sum(data, partial) as u16)
}

/// Length of [`syn_packet`]: IPv4 header, TCP header with one MSS option.
const SYN_LEN: usize = 20 + 24;

/// An IPv4 TCP SYN from `src` to `dst`, checksums filled in, MSS 1460.
pub fn syn_packet(src: SocketAddrV4, dst: SocketAddrV4, seq: u32, id: u16) -> [u8; SYN_LEN] {
    let mut p = [0u8; SYN_LEN];
    let (ip, tcp) = p.split_at_mut(20);
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&(SYN_LEN as u16).to_be_bytes());
    ip[4..6].copy_from_slice(&id.to_be_bytes());
    ip[6] = 0x40; // don't fragment
    ip[8] = 64;
    ip[9] = 6; // TCP
    ip[12..16].copy_from_slice(&src.ip().octets());
    ip[16..20].copy_from_slice(&dst.ip().octets());
    let c = checksum(ip, 0);
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    tcp[0..2].copy_from_slice(&src.port().to_be_bytes());
    tcp[2..4].copy_from_slice(&dst.port().to_be_bytes());
    tcp[4..8].copy_from_slice(&seq.to_be_bytes());
    tcp[12] = 6 << 4; // data offset: 6 words
    tcp[13] = 0x02; // SYN
    tcp[14..16].copy_from_slice(&64240u16.to_be_bytes());
    tcp[20..24].copy_from_slice(&[2, 4, 0x05, 0xB4]); // MSS 1460
    // The pseudo-header: source, destination, protocol, TCP length.
    let mut pseudo = [0u8; 12];
    pseudo[0..4].copy_from_slice(&src.ip().octets());
    pseudo[4..8].copy_from_slice(&dst.ip().octets());
    pseudo[9] = 6;
    pseudo[10..12].copy_from_slice(&((SYN_LEN - 20) as u16).to_be_bytes());
    let c = checksum(tcp, ones_sum(&pseudo, 0));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    p
}

/// xorshift64*: cheap randomness for ports and sequence numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
}

/// This process' CPU seconds so far: for the flood sender, its sends and the receive path the
/// kernel runs in its context (softirq under tick accounting is charged to the task it
/// interrupts).
fn own_cpu() -> f64 {
    // SAFETY: getrusage only writes the struct it is given, zeroed plain data before.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) } != 0 {
        return 0.0;
    }
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Raw SYNs at `rate` a second for the duration, from `sources` consecutive addresses starting
/// at `from`, random source ports and sequence numbers.
fn syn_flood(a: &ClientArgs) -> Result {
    use socket2::{Domain, Protocol, Socket, Type};
    // IPPROTO_RAW: we write the IP header (IP_HDRINCL is implied).
    let sock = Socket::new(
        Domain::IPV4,
        Type::RAW,
        Some(Protocol::from(libc::IPPROTO_RAW)),
    )
    .map_err(|e| format!("raw socket: {e}"))?;
    let to: socket2::SockAddr = SocketAddr::V4(a.addr).into();
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ (u64::from(std::process::id()) << 32);
    let mut rng = Rng(seed | 1);
    let base = u32::from(a.from);
    let started = Instant::now();
    let cpu0 = own_cpu();
    let deadline = Duration::from_secs_f64(a.secs);
    let (mut sent, mut errors) = (0u64, 0u64);
    loop {
        let elapsed = started.elapsed();
        if elapsed >= deadline {
            break;
        }
        let due = (elapsed.as_secs_f64() * a.rate) as u64;
        // Bounded batches: a stalled sender catches up without one endless burst.
        let mut batch = 0;
        while sent + errors < due && batch < 2000 {
            let r = rng.next();
            let src = Ipv4Addr::from(base + (((sent + errors) % u64::from(a.sources)) as u32));
            let port = 1024 + (r % (65536 - 1024)) as u16;
            let pkt = syn_packet(
                SocketAddrV4::new(src, port),
                a.addr,
                (r >> 32) as u32,
                (r >> 16) as u16,
            );
            match sock.send_to(&pkt, &to) {
                Ok(_) => sent += 1,
                Err(_) => errors += 1,
            }
            batch += 1;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let cpu = own_cpu() - cpu0;
    println!(
        "ops={sent} secs={:.3} errors={errors} cpu_s={cpu:.3}",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Open-loop connects at `rate` a second, one thread each (a dropped SYN must not hold back the
/// next connect); each does one 64-byte echo round trip. Latency is the connect's, from the
/// time it was due.
fn connects(a: &ClientArgs) -> Result {
    let to = SocketAddr::V4(a.addr);
    let gap = Duration::from_secs_f64(1.0 / a.rate);
    let n = (a.secs * a.rate).round() as u32;
    let start = Instant::now() + Duration::from_millis(20);
    let mut threads = Vec::with_capacity(n as usize);
    let mut late = 0u32;
    for i in 0..n {
        let due = start + gap * i;
        match due.checked_duration_since(Instant::now()) {
            Some(d) => std::thread::sleep(d),
            // This client was descheduled: catching up in a burst would push the source over
            // the server's rate limit, a refusal the server did not cause. The slot is skipped.
            None if due.elapsed() > LATE => {
                late += 1;
                continue;
            }
            None => {}
        }
        threads.push(std::thread::spawn(move || {
            let waited = Instant::now().saturating_duration_since(due);
            echo_once(to, CONNECT_TIMEOUT).map(|c| (waited + c).as_micros() as u64)
        }));
    }
    let mut lat = Vec::with_capacity(threads.len());
    let mut failed: std::collections::BTreeMap<String, u64> = Default::default();
    for t in threads {
        match t.join() {
            Ok(Ok(us)) => lat.push(us),
            Ok(Err(e)) => *failed.entry(e.to_string()).or_default() += 1,
            Err(_) => *failed.entry("thread panicked".into()).or_default() += 1,
        }
    }
    let errors: u64 = failed.values().sum();
    if !failed.is_empty() {
        let kinds: Vec<String> = failed.iter().map(|(e, n)| format!("{n}× {e}")).collect();
        println!("failed: {}", kinds.join(", "));
    }
    lat.sort_unstable();
    let p = |q| super::load::percentile(&lat, q);
    println!(
        "ops={} secs={:.3} errors={errors} p50_us={} p99_us={} p999_us={} late={late}",
        lat.len(),
        a.secs,
        p(0.5),
        p(0.99),
        p(0.999)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ip_header_checksum_of_the_rfc_example() {
        // The classic example header (checksum field zeroed): 0xB861.
        let h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8,
            0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7,
        ];
        assert_eq!(checksum(&h, 0), 0xB861);
        // An odd length pads with a zero byte.
        assert_eq!(checksum(&[0x01], 0), !0x0100);
    }

    #[test]
    fn syn_packet_fields_and_checksums() {
        let src: SocketAddrV4 = "10.78.3.2:40000".parse().unwrap();
        let dst: SocketAddrV4 = "10.78.1.1:8080".parse().unwrap();
        let p = syn_packet(src, dst, 0x0102_0304, 0xBEEF);
        assert_eq!(p.len(), 44);
        assert_eq!(
            &p[..12],
            &[0x45, 0, 0, 44, 0xBE, 0xEF, 0x40, 0, 64, 6, p[10], p[11]]
        );
        assert_eq!(&p[12..20], &[10, 78, 3, 2, 10, 78, 1, 1]);
        // A header with its checksum sums to zero.
        assert_eq!(checksum(&p[..20], 0), 0);
        let tcp = &p[20..];
        assert_eq!(&tcp[..4], &[0x9C, 0x40, 0x1F, 0x90]);
        assert_eq!(&tcp[4..8], &[1, 2, 3, 4]);
        assert_eq!((tcp[12], tcp[13]), (0x60, 0x02));
        assert_eq!(&tcp[20..], &[2, 4, 0x05, 0xB4]);
        let pseudo = [10, 78, 3, 2, 10, 78, 1, 1, 0, 6, 0, 24];
        assert_eq!(checksum(tcp, ones_sum(&pseudo, 0)), 0);
        // The exact values, computed independently (Python's struct over the same fields).
        assert_eq!(u16::from_be_bytes([p[10], p[11]]), 0x633E);
        assert_eq!(u16::from_be_bytes([tcp[16], tcp[17]]), 0xC4C0);
    }

    #[test]
    fn configs_differ_only_by_the_xdp_line() {
        let admin = Path::new("/w/a.sock");
        let h = config(admin, None);
        let p = config(admin, Some(&["to-flood", "to-client"]));
        assert!(h.starts_with(
            "global\n    nbthread 1\n    maxconn 4096\n    stats socket /w/a.sock level admin\n\ndefaults\n"
        ));
        assert!(h.contains(
            "frontend flood\n    mode tcp\n    bind :8080\n    \
             stick-table type ip size 100k expire 30s store conn_rate(1s)\n    \
             tcp-request connection track-sc0 src\n    \
             tcp-request connection reject if { sc_conn_rate(0) gt 300 }\n    default_backend echo\n"
        ));
        assert!(h.ends_with("backend echo\n    mode tcp\n    server echo1 127.0.0.1:9000\n"));
        assert!(!h.contains("portcullis-xdp"));
        assert_eq!(
            p.replace("    portcullis-xdp to-flood to-client mode auto\n", ""),
            h
        );
    }

    #[test]
    fn proc_stat_kernel_ticks() {
        let s =
            "cpu  1483348 1052 496844 1782508 21450 7 101711 22303 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n";
        assert_eq!(
            kernel_ticks(s),
            Some((
                496_844 + 7 + 101_711,
                1_483_348 + 1052 + 496_844 + 1_782_508 + 21_450 + 7 + 101_711 + 22_303
            ))
        );
        assert_eq!(kernel_ticks("cpu0 1 2 3\n"), None);
        assert_eq!(kernel_ticks("cpu  1 2 x 4 5 6 7 8\n"), None);
    }

    #[test]
    fn result_words() {
        let l = "ops=10 secs=1.000 errors=0 cpu_s=0.250";
        assert_eq!(word(l, "cpu_s"), Some(0.25));
        assert_eq!(word(l, "secs"), Some(1.0));
        assert_eq!(word(l, "cpu"), None);
        assert_eq!(word("ops=1 cpu_s=x", "cpu_s"), None);
    }

    #[test]
    fn stale_namespaces_are_those_of_dead_pids() {
        let list = "pcbf12-0s (id: 3)\npcbf12-0f\npcbf99-1c (id: 5)\npcx77as\npcbfx-1s\nother\n";
        assert_eq!(
            stale_namespaces(list, |pid| pid == 99),
            ["pcbf12-0s", "pcbf12-0f"]
        );
    }

    #[test]
    fn client_args() {
        let a =
            |v: &[&str]| parse_client_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let ok = a(&[
            "--addr",
            "10.0.0.1:80",
            "--from",
            "10.0.3.1",
            "--sources",
            "4",
            "--rate",
            "5000",
            "--duration",
            "2.5",
        ])
        .unwrap();
        assert_eq!(ok.addr, "10.0.0.1:80".parse().unwrap());
        assert_eq!(
            (ok.from, ok.sources, ok.rate, ok.secs),
            (Ipv4Addr::new(10, 0, 3, 1), 4, 5000.0, 2.5)
        );
        assert_eq!(a(&["--rate", "1"]).unwrap_err(), "--addr is required");
        assert_eq!(
            a(&["--addr", "10.0.0.1:80"]).unwrap_err(),
            "--rate is required"
        );
        assert_eq!(
            a(&["--sources", "0"]).unwrap_err(),
            "bad value '0' for --sources"
        );
        assert_eq!(a(&["--x", "1"]).unwrap_err(), "unknown option '--x'");
        assert!(client("rate", &[]).is_none());
    }
}
