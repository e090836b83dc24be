//! `cargo xtask bench [--duration S] [--backend nginx|node]`: tiny responses over HTTP/1.1 keep-alive, through
//! portcullis (`--io uring`, `--io epoll`), HAProxy and directly, in one run.
//!
//! Every target gets the same backend (nginx, one process, `return 200 "ok"`; the in-process
//! [`HttpNode`] when nginx is absent) and the same load (`wrk -t1 -c50 -d10s --latency`). The
//! proxies get the same plain HAProxy config with `nbthread 1`.
//!
//! Placement, when `taskset` exists and there are at least 2 cores: the proxy under test runs
//! on core 1, wrk and the backend share core 0. The proxy then has a core to itself, as it
//! would on a load-balancer host, and the load side is the same for every target (direct
//! included, where the backend competes with wrk exactly as it does behind a proxy).
//!
//! A target that fails to start (or does not answer 200) is skipped with the reason.
//!
//! Besides req/s (bounded by what wrk and the backend leave of the load core: with 2 cores the
//! direct figure is the ceiling for every proxy), the table gives each proxy's own CPU time per
//! request, read from /proc: the efficiency comparison that this machine can make fairly.

use crate::backend::{HttpNode, HttpOpts, free_port};
use crate::util::{Result, exec, have, output, root, target_dir, which};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LOAD_CORE: &str = "0";
const PROXY_CORE: &str = "1";
const CONNECTIONS: u32 = 50;
const START_TIMEOUT: Duration = Duration::from_secs(5);

/// One wrk run, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Measure {
    pub rps: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Socket errors and non-2xx answers, when wrk reported any.
    pub errors: Option<String>,
    /// The proxy's own CPU time (user + system) per request, in microseconds: its efficiency,
    /// independent of how much of the load core wrk and the backend leave for it.
    pub cpu_us_per_req: Option<f64>,
}

struct Row {
    name: String,
    result: std::result::Result<Measure, String>,
}

/// A process killed (and reaped) on drop, so no proxy or backend outlives the bench.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Held until the bench ends: dropping it stops the backend.
enum Backend {
    Nginx { _proc: Proc },
    Node { _node: HttpNode },
}

fn pinned(core: &str, program: &Path, pin: bool) -> Command {
    if pin {
        let mut c = Command::new("taskset");
        c.args(["-c", core]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

pub fn run(args: &[String]) -> Result {
    let Opts { duration, nginx } = parse_args(args)?;
    if !have("wrk") {
        return Err("wrk is missing (cargo xtask setup installs it)".into());
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pin = have("taskset") && cores >= 2;
    if pin {
        println!("bench: proxies pinned to core {PROXY_CORE}, wrk and backend to core {LOAD_CORE}");
    } else {
        println!("bench: not pinning (needs taskset and 2 cores; have {cores} core(s))");
    }
    let dir = target_dir().join("xtask-bench");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;

    // Built before anything is pinned: cargo would inherit a one-core mask.
    let built = build_portcullis();
    let backend_addr: SocketAddr = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let (_backend, backend_name) = start_backend(&dir, backend_addr, pin, nginx)?;
    wait_ready(backend_addr, None).map_err(|e| format!("backend: {e}"))?;
    println!(
        "bench: backend {backend_name} on {backend_addr}, wrk -t1 -c{CONNECTIONS} -d{duration}s"
    );

    let mut rows = vec![Row {
        name: "direct".into(),
        result: measure(backend_addr, duration, pin),
    }];

    let proxy_port = free_port();
    let cfg = dir.join("bench.cfg");
    std::fs::write(&cfg, proxy_config(proxy_port, backend_addr))
        .map_err(|e| format!("{}: {e}", cfg.display()))?;
    let proxy_addr = SocketAddr::from(([127, 0, 0, 1], proxy_port));

    let haproxy_name = haproxy_version().unwrap_or_else(|| "haproxy".into());
    let result = match which("haproxy") {
        Some(bin) => proxied(
            &dir,
            "haproxy",
            pinned(PROXY_CORE, &bin, pin),
            &cfg,
            &[],
            proxy_addr,
            duration,
            pin,
        ),
        None => Err("no haproxy on PATH".into()),
    };
    rows.push(Row {
        name: haproxy_name,
        result,
    });

    for io in ["uring", "epoll"] {
        let name = format!("portcullis {io}");
        let result = match &built {
            Ok(bin) => proxied(
                &dir,
                &format!("portcullis-{io}"),
                pinned(PROXY_CORE, bin, pin),
                &cfg,
                &["--io", io],
                proxy_addr,
                duration,
                pin,
            ),
            Err(e) => Err(e.clone()),
        };
        rows.push(Row { name, result });
    }
    println!("\n{}", table(&rows));
    Ok(())
}

#[derive(Debug, PartialEq, Eq)]
struct Opts {
    /// Seconds per wrk run.
    duration: u64,
    /// nginx as the backend when present (else the in-process HttpNode).
    nginx: bool,
}

const BENCH_USAGE: &str = "usage: cargo xtask bench [--duration SECONDS] [--backend nginx|node]";

fn parse_args(args: &[String]) -> Result<Opts> {
    let mut opts = Opts {
        duration: 10,
        nginx: true,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (key, value) = match a.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (a.as_str(), it.next().map(String::as_str)),
        };
        let v = value.ok_or_else(|| format!("{key} needs a value; {BENCH_USAGE}"))?;
        match key {
            "--duration" => {
                opts.duration = v
                    .trim_end_matches('s')
                    .parse()
                    .ok()
                    .filter(|d| *d > 0)
                    .ok_or_else(|| format!("bad duration '{v}'"))?
            }
            "--backend" if v == "nginx" || v == "node" => opts.nginx = v == "nginx",
            _ => return Err(format!("bad argument '{a}'; {BENCH_USAGE}")),
        }
    }
    Ok(opts)
}

/// The config both proxies run: plain HAProxy, one frontend, one backend, one server.
pub fn proxy_config(port: u16, backend: SocketAddr) -> String {
    format!(
        "global\n    nbthread 1\n\ndefaults\n    mode http\n    timeout connect 5s\n    \
         timeout client 30s\n    timeout server 30s\n\nfrontend bench\n    bind 127.0.0.1:{port}\n    \
         default_backend app\n\nbackend app\n    server app1 {backend}\n"
    )
}

fn nginx_config(dir: &Path, addr: SocketAddr) -> String {
    let d = dir.display();
    format!(
        "daemon off;\nmaster_process off;\nworker_processes 1;\npid {d}/nginx.pid;\n\
         error_log {d}/nginx-error.log warn;\nevents {{ worker_connections 1024; }}\n\
         http {{\n    access_log off;\n    keepalive_requests 10000000;\n    \
         client_body_temp_path {d}/tmp-body;\n    proxy_temp_path {d}/tmp-proxy;\n    \
         fastcgi_temp_path {d}/tmp-fastcgi;\n    uwsgi_temp_path {d}/tmp-uwsgi;\n    \
         scgi_temp_path {d}/tmp-scgi;\n    server {{\n        listen {addr};\n        \
         location / {{ return 200 \"ok\"; }}\n    }}\n}}\n"
    )
}

fn start_backend(
    dir: &Path,
    addr: SocketAddr,
    pin: bool,
    want_nginx: bool,
) -> Result<(Backend, String)> {
    if let Some(nginx) = which("nginx").filter(|_| want_nginx) {
        let conf = dir.join("nginx.conf");
        std::fs::write(&conf, nginx_config(dir, addr)).map_err(|e| e.to_string())?;
        let log = std::fs::File::create(dir.join("nginx.log")).map_err(|e| e.to_string())?;
        let child = pinned(LOAD_CORE, &nginx, pin)
            .arg("-p")
            .arg(dir)
            .arg("-e")
            .arg(dir.join("nginx-error.log"))
            .arg("-c")
            .arg(&conf)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|e| format!("cannot start nginx: {e}"))?;
        return Ok((
            Backend::Nginx { _proc: Proc(child) },
            "nginx (1 process)".into(),
        ));
    }
    if pin {
        // The node runs in this process: put all its threads on the load core.
        let pid = std::process::id().to_string();
        let _ = output(Command::new("taskset").args(["-a", "-p", "-c", LOAD_CORE, &pid]));
    }
    let node = HttpNode::start(addr, HttpOpts::named("bench"))
        .map_err(|e| format!("HttpNode on {addr}: {e}"))?;
    Ok((Backend::Node { _node: node }, "in-process HttpNode".into()))
}

fn build_portcullis() -> std::result::Result<PathBuf, String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    exec(
        Command::new(cargo)
            .args(["build", "--release", "-p", "portcullis"])
            .current_dir(root()),
    )
    .map_err(|e| format!("build failed: {e}"))?;
    Ok(target_dir().join("release/portcullis"))
}

fn haproxy_version() -> Option<String> {
    let out = output(Command::new(which("haproxy")?).arg("-v"))?;
    // "HAProxy version 2.6.12-1+deb12u1 2023/..."
    let v = out.split_whitespace().nth(2)?;
    Some(format!(
        "haproxy {}",
        v.split(['-', '+']).next().unwrap_or(v)
    ))
}

/// Starts a proxy with `-f cfg -db <extra>`, measures through it, stops it.
#[allow(clippy::too_many_arguments)]
fn proxied(
    dir: &Path,
    tag: &str,
    mut cmd: Command,
    cfg: &Path,
    extra: &[&str],
    addr: SocketAddr,
    duration: u64,
    pin: bool,
) -> std::result::Result<Measure, String> {
    let log_path = dir.join(format!("{tag}.log"));
    let log = std::fs::File::create(&log_path).map_err(|e| e.to_string())?;
    let log2 = log.try_clone().map_err(|e| e.to_string())?;
    cmd.arg("-f").arg(cfg).arg("-db").args(extra);
    cmd.stdout(log).stderr(log2);
    let child = cmd.spawn().map_err(|e| format!("cannot start: {e}"))?;
    let mut proc = Proc(child);
    if let Err(e) = wait_ready(addr, Some(&mut proc.0)) {
        let last = std::fs::read_to_string(&log_path)
            .ok()
            .and_then(|t| {
                t.lines()
                    .rev()
                    .find(|l| !l.trim().is_empty())
                    .map(str::to_string)
            })
            .unwrap_or_default();
        return Err(format!("{e}: {}", last.trim()));
    }
    let pid = proc.0.id();
    let before = cpu_seconds(pid);
    let mut m = measure(addr, duration, pin)?;
    if let (Some(a), Some(b)) = (before, cpu_seconds(pid))
        && m.rps > 0.0
    {
        m.cpu_us_per_req = Some((b - a) * 1e6 / (m.rps * duration as f64));
    }
    Ok(m)
}

/// Waits until `addr` answers `GET /` with a 2xx, or `child` exits, or a timeout.
fn wait_ready(addr: SocketAddr, mut child: Option<&mut Child>) -> std::result::Result<(), String> {
    let deadline = Instant::now() + START_TIMEOUT;
    let mut last = String::from("no answer");
    while Instant::now() < deadline {
        if let Some(c) = child.as_deref_mut()
            && let Ok(Some(status)) = c.try_wait()
        {
            return Err(format!("exited at start ({status})"));
        }
        match probe(addr) {
            Ok(line) if line.split(' ').nth(1).is_some_and(|c| c.starts_with('2')) => return Ok(()),
            Ok(line) => last = format!("answers '{line}'"),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("not ready after {START_TIMEOUT:?} ({last})"))
}

/// One `GET /` on a fresh connection; returns the status line.
fn probe(addr: SocketAddr) -> std::io::Result<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(500))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(b"GET / HTTP/1.1\r\nHost: bench\r\nConnection: close\r\n\r\n")?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    Ok(text.lines().next().unwrap_or("").to_string())
}

fn measure(addr: SocketAddr, duration: u64, pin: bool) -> std::result::Result<Measure, String> {
    let wrk = which("wrk").ok_or("no wrk")?;
    let mut cmd = pinned(LOAD_CORE, &wrk, pin);
    cmd.args([
        "-t1",
        &format!("-c{CONNECTIONS}"),
        &format!("-d{duration}s"),
        "--latency",
    ])
    .arg(format!("http://{addr}/"));
    println!("$ {}", crate::util::show(&cmd));
    let out = cmd.output().map_err(|e| format!("cannot run wrk: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(format!("wrk failed ({})", out.status));
    }
    parse_wrk(&text).ok_or_else(|| format!("cannot read wrk output:\n{text}"))
}

/// Milliseconds from a wrk duration: `591.00us`, `1.03ms`, `2.00s`, `1.50m`.
fn wrk_ms(s: &str) -> Option<f64> {
    let split = s.find(|c: char| c.is_ascii_alphabetic())?;
    let (n, unit) = s.split_at(split);
    let n: f64 = n.parse().ok()?;
    let factor = match unit {
        "us" => 0.001,
        "ms" => 1.0,
        "s" => 1000.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        _ => return None,
    };
    Some(n * factor)
}

pub fn parse_wrk(text: &str) -> Option<Measure> {
    let mut rps = None;
    let mut p50 = None;
    let mut p99 = None;
    let mut errors = Vec::new();
    for line in text.lines().map(str::trim) {
        let mut w = line.split_whitespace();
        match (w.next(), w.next()) {
            (Some("Requests/sec:"), Some(v)) => rps = v.parse().ok(),
            (Some("50%"), Some(v)) => p50 = wrk_ms(v),
            (Some("99%"), Some(v)) => p99 = wrk_ms(v),
            _ => {}
        }
        if line.starts_with("Socket errors:") || line.starts_with("Non-2xx or 3xx responses:") {
            errors.push(line.to_string());
        }
    }
    Some(Measure {
        rps: rps?,
        p50_ms: p50?,
        p99_ms: p99?,
        errors: (!errors.is_empty()).then(|| errors.join("; ")),
        cpu_us_per_req: None,
    })
}

/// CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat.
fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    let hz = 100.0; // USER_HZ on Linux
    Some(ticks / hz)
}

fn table(rows: &[Row]) -> String {
    let rps_of = |prefix: &str| {
        rows.iter()
            .find(|r| r.name.starts_with(prefix))
            .and_then(|r| r.result.as_ref().ok())
            .map(|m| m.rps)
    };
    let (haproxy, direct) = (rps_of("haproxy"), rps_of("direct"));
    let haproxy_cpu = rows
        .iter()
        .find(|r| r.name.starts_with("haproxy"))
        .and_then(|r| r.result.as_ref().ok())
        .and_then(|m| m.cpu_us_per_req);
    let ratio = |rps: f64, base: Option<f64>| match base {
        Some(b) if b > 0.0 => format!("{:.2}x", rps / b),
        _ => "-".into(),
    };
    let mut out = format!(
        "{:<18} {:>10} {:>9} {:>9} {:>11} {:>10} {:>12} {:>14}\n",
        "target", "req/s", "p50", "p99", "vs haproxy", "vs direct", "cpu us/req", "cpu vs haproxy"
    );
    for r in rows {
        match &r.result {
            Ok(m) => {
                let (cpu, cpu_ratio) = match (m.cpu_us_per_req, haproxy_cpu) {
                    (Some(c), Some(h)) if c > 0.0 => (format!("{c:.1}"), format!("{:.2}x", h / c)),
                    (Some(c), _) => (format!("{c:.1}"), "-".into()),
                    _ => ("-".into(), "-".into()),
                };
                out.push_str(&format!(
                    "{:<18} {:>10.0} {:>7.2}ms {:>7.2}ms {:>11} {:>10} {:>12} {:>14}\n",
                    r.name,
                    m.rps,
                    m.p50_ms,
                    m.p99_ms,
                    ratio(m.rps, haproxy),
                    ratio(m.rps, direct),
                    cpu,
                    cpu_ratio
                ));
                if let Some(e) = &m.errors {
                    out.push_str(&format!("{:<18} ! {e}\n", ""));
                }
            }
            Err(e) => out.push_str(&format!("{:<18} skipped: {e}\n", r.name)),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRK: &str = "Running 10s test @ http://127.0.0.1:8080/
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   620.53us  101.00us   5.00ms   90.00%
    Req/Sec    80.64k     3.21k   85.36k    73.00%
  Latency Distribution
     50%  591.00us
     75%  650.00us
     90%  700.00us
     99%    1.03ms
  802532 requests in 10.00s, 95.66MB read
  Non-2xx or 3xx responses: 12
Requests/sec:  80240.66
Transfer/sec:      9.56MB
";

    #[test]
    fn parses_wrk_output() {
        let m = parse_wrk(WRK).unwrap();
        assert_eq!(m.rps, 80240.66);
        assert!((m.p50_ms - 0.591).abs() < 1e-9);
        assert!((m.p99_ms - 1.03).abs() < 1e-9);
        assert_eq!(m.errors.as_deref(), Some("Non-2xx or 3xx responses: 12"));
        assert_eq!(parse_wrk("garbage"), None);
    }

    #[test]
    fn wrk_units() {
        assert_eq!(wrk_ms("2.00s"), Some(2000.0));
        assert_eq!(wrk_ms("1.5m"), Some(90_000.0));
        assert_eq!(wrk_ms("12"), None);
        assert_eq!(wrk_ms("3.0xs"), None);
    }

    #[test]
    fn args() {
        let a = |v: &[&str]| parse_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
        let o = |duration, nginx| Ok(Opts { duration, nginx });
        assert_eq!(a(&[]), o(10, true));
        assert_eq!(a(&["--duration", "3s"]), o(3, true));
        assert_eq!(a(&["--duration=5", "--backend", "node"]), o(5, false));
        assert!(a(&["--duration", "0"]).is_err());
        assert!(a(&["--duration"]).is_err());
        assert!(a(&["--backend", "apache"]).is_err());
        assert!(a(&["-x"]).is_err());
    }

    #[test]
    fn config_is_plain_haproxy() {
        let cfg = proxy_config(9000, "127.0.0.1:8080".parse().unwrap());
        assert!(cfg.starts_with("global\n    nbthread 1\n"));
        assert!(cfg.contains("    bind 127.0.0.1:9000\n"));
        assert!(cfg.ends_with("    server app1 127.0.0.1:8080\n"));
    }

    #[test]
    fn table_ratios_and_skips() {
        let m = |rps| {
            Ok(Measure {
                rps,
                p50_ms: 0.5,
                p99_ms: 1.0,
                errors: None,
                cpu_us_per_req: (rps < 100.0).then_some(20.0),
            })
        };
        let rows = [
            Row {
                name: "direct".into(),
                result: m(100.0),
            },
            Row {
                name: "haproxy 2.6.12".into(),
                result: m(50.0),
            },
            Row {
                name: "portcullis uring".into(),
                result: Err("exited at start".into()),
            },
        ];
        let t = table(&rows);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[1],
            "direct                    100    0.50ms    1.00ms       2.00x      1.00x            -              -"
        );
        assert_eq!(
            lines[2],
            "haproxy 2.6.12             50    0.50ms    1.00ms       1.00x      0.50x         20.0          1.00x"
        );
        assert_eq!(lines[3], "portcullis uring   skipped: exited at start");
    }
}
