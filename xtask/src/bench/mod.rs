//! `cargo xtask bench`: every workload through portcullis (`--io uring` and `--io epoll`),
//! HAProxy 2.6 and nginx, and directly against the backend, in one run; a markdown table, JSON
//! and an SVG chart of the ratios under `target/bench/`.
//!
//! Method (also written into the report):
//! - One backend for everything: nginx, one worker (`/` → `ok`, `/16k` → a 16 KiB file; TLS and
//!   h2 on a second port for the direct TLS rows), an echo server and `iperf3 -s`.
//! - Every proxy runs one worker thread (`nbthread 1`, nginx `worker_processes 1`), all
//!   started once with the same listeners; HAProxy and portcullis run the same config text.
//! - Placement, with `taskset` and ≥ 2 cores: the proxy under test on core 1; load generator
//!   and backend on core 0. The load side is the same for every target, direct included.
//! - Per workload: one unrecorded warm-up run per target, then the repetitions interleaved
//!   across targets (rep 1 of every target, then rep 2, …) so drift hits all alike; the
//!   median and the spread are reported. The proxy's own CPU time per operation comes from
//!   /proc: the efficiency figure that holds even when the load core is the limit.
//! - A target that fails to start or a workload it cannot run is listed as skipped with the
//!   reason; workloads waiting on unmerged features are listed as skipped, never hidden.

mod conf;
mod flood;
pub mod load;
mod parse;
mod reload;
mod report;

use crate::backend::free_port;
use crate::util::{Result, exec, have, output, root, show, target_dir, which};
use conf::{Ports, Upstreams};
use parse::Run;
use report::{Better, Cell, Report, Row, Stat};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const LOAD_CORE: &str = "0";
const PROXY_CORE: &str = "1";
const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Idle connections of the memory workload, when RLIMIT_NOFILE allows.
const IDLE_CONNS: usize = 10_000;
/// The kernel-only target: a bound no bench transfer reaches, so no direction falls back.
const KERNEL_ONLY: &str = "kernel max-unacked 4g bulk-rate 0";
const STREAM_MODULE: &str = "/usr/lib/nginx/modules/ngx_stream_module.so";

const USAGE: &str = "usage: cargo xtask bench [--quick] [--only WORKLOAD[,WORKLOAD…]] \
[--duration SECONDS] [--reps N] [--release|--debug] [--baseline PATH[:LABEL]]";
/// The label of a `--baseline` given without one.
const BASELINE_LABEL: &str = "baseline";

/// What one workload measures, and how.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// wrk over HTTP/1.1: path, `Connection: close`, TLS.
    Wrk {
        path: &'static str,
        close: bool,
        tls: bool,
    },
    TlsHandshake,
    H2,
    /// h2load with prior knowledge to an h2 frontend whose server is `proto h2`.
    H2ToH2,
    Iperf(u32),
    PingPong(usize),
    Latency,
    Memory,
    SynFlood,
    Reload,
}

struct Workload {
    id: &'static str,
    title: &'static str,
    kind: Kind,
}

const WORKLOADS: &[Workload] = &[
    Workload {
        id: "memory",
        title: "10k idle keep-alive connections",
        kind: Kind::Memory,
    },
    Workload {
        id: "http-ka-tiny",
        title: "HTTP/1.1 keep-alive, tiny",
        kind: Kind::Wrk {
            path: "/",
            close: false,
            tls: false,
        },
    },
    Workload {
        id: "http-ka-16k",
        title: "HTTP/1.1 keep-alive, 16 KiB",
        kind: Kind::Wrk {
            path: "/16k",
            close: false,
            tls: false,
        },
    },
    Workload {
        id: "http-close",
        title: "HTTP/1.1, one request per connection",
        kind: Kind::Wrk {
            path: "/",
            close: true,
            tls: false,
        },
    },
    Workload {
        id: "tls-handshake",
        title: "TLS 1.3 full handshakes (ECDSA P-256)",
        kind: Kind::TlsHandshake,
    },
    Workload {
        id: "https-ka",
        title: "HTTPS keep-alive, tiny",
        kind: Kind::Wrk {
            path: "/",
            close: false,
            tls: true,
        },
    },
    Workload {
        id: "h2",
        title: "HTTP/2 over TLS (10 conns × 10 streams)",
        kind: Kind::H2,
    },
    Workload {
        id: "h2c-h2",
        title: "HTTP/2 h2c to an h2 server (10 conns × 10 streams)",
        kind: Kind::H2ToH2,
    },
    Workload {
        id: "tcp-throughput-1",
        title: "TCP passthrough, 1 stream (iperf3)",
        kind: Kind::Iperf(1),
    },
    Workload {
        id: "tcp-throughput-4",
        title: "TCP passthrough, 4 streams (iperf3)",
        kind: Kind::Iperf(4),
    },
    Workload {
        id: "pingpong-1",
        title: "TCP 64 B ping-pong, 1 connection",
        kind: Kind::PingPong(1),
    },
    Workload {
        id: "pingpong-8",
        title: "TCP 64 B ping-pong, 8 connections",
        kind: Kind::PingPong(8),
    },
    Workload {
        id: "latency",
        title: "Latency at 70% of HAProxy's keep-alive capacity",
        kind: Kind::Latency,
    },
    Workload {
        id: "reload",
        title: "Reload under load",
        kind: Kind::Reload,
    },
    Workload {
        id: "syn-flood",
        title: "SYN flood with legitimate clients",
        kind: Kind::SynFlood,
    },
];

#[derive(Debug, PartialEq)]
struct Opts {
    quick: bool,
    only: Vec<String>,
    duration: Option<u64>,
    reps: Option<usize>,
    release: Option<bool>,
    baseline: Option<Baseline>,
}

/// Another portcullis binary (an earlier build) run beside the current one, so that a change's
/// before and after are measured in the same run on the same machine state.
#[derive(Debug, Clone, PartialEq)]
struct Baseline {
    bin: PathBuf,
    label: String,
}

/// `PATH[:LABEL]`: the label is what follows the last `:` unless that holds a `/` (then the
/// whole is a path).
fn parse_baseline(v: &str) -> Result<Baseline> {
    let (path, label) = match v.rsplit_once(':') {
        Some((p, l)) if !l.contains('/') => (p, l),
        _ => (v, BASELINE_LABEL),
    };
    if path.is_empty() {
        return Err(format!("--baseline '{v}' has no path; {USAGE}"));
    }
    // Shown in a markdown table and a one-line progress log: printable, no column separator.
    if label.is_empty() || !label.chars().all(|c| c.is_ascii_graphic() && c != '|') {
        return Err(format!(
            "bad baseline label '{label}' (printable ASCII without spaces or '|')"
        ));
    }
    Ok(Baseline {
        bin: PathBuf::from(path),
        label: label.to_string(),
    })
}

fn parse_args(args: &[String]) -> Result<Opts> {
    let mut o = Opts {
        quick: false,
        only: Vec::new(),
        duration: None,
        reps: None,
        release: None,
        baseline: None,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let (key, inline) = match a.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (a.as_str(), None),
        };
        let mut value = || {
            inline
                .or_else(|| it.next().map(String::as_str))
                .ok_or_else(|| format!("{key} needs a value; {USAGE}"))
        };
        match key {
            "--quick" => o.quick = true,
            "--release" => o.release = Some(true),
            "--debug" => o.release = Some(false),
            "--only" => {
                for w in value()?.split(',').filter(|w| !w.is_empty()) {
                    if !WORKLOADS.iter().any(|x| selects(w, x.id)) {
                        let ids: Vec<&str> = WORKLOADS.iter().map(|x| x.id).collect();
                        return Err(format!(
                            "unknown workload '{w}' (known: {})",
                            ids.join(", ")
                        ));
                    }
                    o.only.push(w.to_string());
                }
            }
            "--duration" => {
                let v = value()?;
                o.duration = Some(
                    v.trim_end_matches('s')
                        .parse()
                        .ok()
                        .filter(|d| *d > 0)
                        .ok_or_else(|| format!("bad duration '{v}'"))?,
                )
            }
            "--reps" => {
                let v = value()?;
                o.reps = Some(
                    v.parse()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| format!("bad repetition count '{v}'"))?,
                )
            }
            "--baseline" => {
                let b = parse_baseline(value()?)?;
                if o.baseline.is_some() {
                    return Err(format!("--baseline given twice; {USAGE}"));
                }
                o.baseline = Some(b);
            }
            _ => return Err(format!("bad argument '{a}'; {USAGE}")),
        }
    }
    Ok(o)
}

/// `--only tcp-throughput` selects `tcp-throughput-1` and `tcp-throughput-4`.
fn selects(only: &str, id: &str) -> bool {
    id == only || id.strip_prefix(only).is_some_and(|r| r.starts_with('-'))
}

/// A process killed (and reaped) on drop, so nothing outlives the bench.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum TargetKind {
    Direct,
    Haproxy,
    Portcullis(&'static str),
    Nginx,
}

struct Target {
    id: &'static str,
    label: String,
    kind: TargetKind,
    /// `portcullis-relay` arguments forced in `defaults`: the passthrough-only targets that
    /// show the opt-in kernel splice (with its per-session rule, and kernel only) beside the
    /// default userspace relay.
    relay: Option<&'static str>,
    /// The binary of a portcullis target that is not the current build (`--baseline`).
    bin: Option<PathBuf>,
    /// The config sections (`frontend h2c`) that binary refused at start, and why: it runs
    /// without them, and the workloads that need them are skipped cells saying so.
    refused: Vec<(String, String)>,
    ports: Ports,
    proc: Option<Proc>,
    /// Why it is not running, when it is not.
    down: Option<String>,
}

impl Target {
    /// The binary a portcullis target runs: the baseline's own, else the current build.
    fn portcullis(&self, env: &Env) -> Result<PathBuf> {
        match &self.bin {
            Some(b) => Ok(b.clone()),
            None => env.portcullis.clone(),
        }
    }
}

struct Env {
    dir: PathBuf,
    pin: bool,
    secs: u64,
    warm: u64,
    reps: usize,
    load_bin: PathBuf,
    portcullis: std::result::Result<PathBuf, String>,
    /// `--baseline`, its binary already copied into `dir`.
    baseline: Option<Baseline>,
    bundle: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    upstreams: Upstreams,
    stream_module: Option<PathBuf>,
    maxconn: u32,
    idle_conns: usize,
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

fn spawn_logged(mut cmd: Command, log: &Path) -> Result<Proc> {
    let f = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let f2 = f.try_clone().map_err(|e| e.to_string())?;
    cmd.stdin(Stdio::null()).stdout(f).stderr(f2);
    cmd.spawn()
        .map(Proc)
        .map_err(|e| format!("cannot start '{}': {e}", show(&cmd)))
}

fn last_line(path: &Path) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .map(|l| l.trim().to_string())
        })
        .unwrap_or_default()
}

pub fn run(args: &[String]) -> Result {
    let opts = parse_args(args)?;
    let started = Instant::now();
    for tool in ["wrk", "nginx"] {
        if !have(tool) {
            return Err(format!("{tool} is missing (cargo xtask setup installs it)"));
        }
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let pin = have("taskset") && cores >= 2;
    let release = opts.release.unwrap_or(!opts.quick);
    // 3 s in --quick: a debug build on a busy machine may not finish 50 TLS handshakes in 1 s.
    let secs = opts.duration.unwrap_or(if opts.quick { 3 } else { 10 });
    let reps = opts.reps.unwrap_or(if opts.quick { 1 } else { 3 });
    let warm = if opts.quick { 0 } else { 3 };
    let out_dir = target_dir().join("bench");
    let dir = out_dir.join("work");
    std::fs::create_dir_all(dir.join("www")).map_err(|e| format!("{}: {e}", dir.display()))?;
    let load_avg_start = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();

    println!(
        "bench: {} build, {secs}s runs, {reps} repetition(s), warm-up {}",
        if release { "release" } else { "debug" },
        if warm > 0 {
            format!("{warm}s")
        } else {
            "none".into()
        }
    );
    // Built before anything is pinned: cargo would inherit a one-core mask.
    let (portcullis, load_bin) = build(release, &dir)?;
    let baseline = match opts.baseline.clone() {
        Some(b) => Some(Baseline {
            bin: keep(&b.bin, &dir, "portcullis-baseline")
                .map_err(|e| format!("--baseline: {e}"))?,
            label: b.label,
        }),
        None => None,
    };
    if let Some(b) = baseline.as_ref().filter(|_| !release) {
        println!(
            "bench: the current build is a debug one; the baseline ({}) runs as given",
            b.label
        );
    }

    let hard_nofile = hard_nofile();
    let maxconn = conf::maxconn(hard_nofile);
    let idle_conns = IDLE_CONNS.min(maxconn.saturating_sub(200) as usize);
    let (bundle, cert, key) = certificate(&dir)?;
    std::fs::write(dir.join("www/16k"), vec![b'x'; 16 * 1024]).map_err(|e| e.to_string())?;

    // The backend side, all on the load core.
    let b_http = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let b_https = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let b_h2c = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let echo = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let iperf = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let nginx = which("nginx").ok_or("nginx is missing")?;
    let backend_conf = dir.join("backend.conf");
    std::fs::write(
        &backend_conf,
        conf::nginx_backend(&dir, (b_http, b_h2c), b_https, &cert, &key, maxconn),
    )
    .map_err(|e| e.to_string())?;
    let mut cmd = pinned(LOAD_CORE, &nginx, pin);
    cmd.arg("-p")
        .arg(&dir)
        .arg("-e")
        .arg(dir.join("backend-error.log"));
    cmd.arg("-c").arg(&backend_conf);
    let mut backend = spawn_logged(cmd, &dir.join("backend.log"))?;
    wait_ready(b_http, Some(&mut backend.0)).map_err(|e| {
        format!(
            "backend nginx: {e} ({})",
            last_line(&dir.join("backend-error.log"))
        )
    })?;
    let mut cmd = pinned(LOAD_CORE, &load_bin, pin);
    cmd.args(["bench-load", "echo", "--listen", &echo.to_string()]);
    let _echo = spawn_logged(cmd, &dir.join("echo.log"))?;
    let _iperf = match which("iperf3") {
        Some(bin) => {
            let mut cmd = pinned(LOAD_CORE, &bin, pin);
            cmd.args(["-s", "-p", &iperf.port().to_string()]);
            Some(spawn_logged(cmd, &dir.join("iperf3.log"))?)
        }
        None => None,
    };
    wait_port(echo)?;

    let stream_module = Some(PathBuf::from(STREAM_MODULE)).filter(|p| p.exists());
    let env = Env {
        dir: dir.clone(),
        pin,
        secs,
        warm,
        reps,
        load_bin,
        portcullis,
        baseline,
        bundle,
        cert,
        key,
        upstreams: Upstreams {
            http: b_http,
            echo,
            iperf,
            h2c: b_h2c,
        },
        stream_module,
        maxconn,
        idle_conns,
    };
    let mut targets = targets(&env, b_https.port());
    for t in targets.iter_mut() {
        start(&env, t);
        match &t.down {
            Some(why) => println!("bench: {} is down: {why}", t.label),
            None => println!("bench: {} ready on :{}", t.label, t.ports.http),
        }
    }
    let placement = if pin {
        format!(
            "proxy under test pinned to core {PROXY_CORE}; load generators and backend (nginx, echo, iperf3 -s) to core {LOAD_CORE}"
        )
    } else {
        format!("not pinned (needs taskset and 2 cores; this machine has {cores})")
    };
    println!("bench: {placement}");

    let chosen: Vec<&Workload> = WORKLOADS
        .iter()
        .filter(|w| opts.only.is_empty() || opts.only.iter().any(|o| selects(o, w.id)))
        .collect();
    let mut rows = Vec::new();
    for (n, w) in chosen.iter().enumerate() {
        println!(
            "\n== [{}/{}] {} ({}) at {:.0}s",
            n + 1,
            chosen.len(),
            w.title,
            w.id,
            started.elapsed().as_secs_f64()
        );
        let new_rows = workload(&env, &mut targets, w);
        for r in &new_rows {
            println!("   {}", summary(r, &targets));
        }
        rows.extend(new_rows);
    }

    let mut report = Report {
        date: output(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]))
            .unwrap_or_default()
            .trim()
            .to_string(),
        command: std::iter::once("cargo xtask bench".to_string())
            .chain(args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" "),
        machine: machine(cores),
        method: vec![
            placement,
            format!(
                "one worker thread per proxy (nbthread 1, nginx worker_processes 1); portcullis {} build",
                if release { "release" } else { "debug" }
            ),
            format!(
                "{reps} repetition(s) of {secs}s, interleaved across targets; warm-up {}",
                if warm > 0 { format!("{warm}s per target and workload") } else { "none".into() }
            ),
            "backend: nginx 1 worker (`/` → ok, `/16k` → 16 KiB; for the TLS rows, direct is this nginx \
             terminating TLS itself); wrk -t1 -c50; h2load -t1 -c10 -m10; \
             TLS handshakes: xtask client, 32 connections, rustls, resumption off, every handshake checked full; \
             ping-pong: xtask client + echo; iperf3 -P 1/4; latency: xtask open-loop client, 128 keep-alive connections, latency counted from each request's due time"
                .into(),
            format!(
                "memory: RSS growth of a fresh proxy process with {} idle keep-alive connections \
                 (one request each), divided by the connections; maxconn {} (RLIMIT_NOFILE hard limit {hard_nofile})",
                env.idle_conns, env.maxconn
            ),
            flood::METHOD.into(),
            reload::method(),
            format!(
                "load average at start: {}; at end: {} (other jobs on the machine skew absolute figures)",
                load_avg_start.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
                std::fs::read_to_string("/proc/loadavg")
                    .unwrap_or_default()
                    .split_whitespace()
                    .take(3)
                    .collect::<Vec<_>>()
                    .join(" ")
            ),
        ],
        quick: opts.quick,
        targets: targets
            .iter()
            .map(|t| report::Target {
                id: t.id.into(),
                label: t.label.clone(),
            })
            .collect(),
        rows,
    };
    if let Some(b) = &opts.baseline {
        report.method.push(format!(
            "baseline: `{}` as \"portcullis {} uring\", copied at start and run exactly like \
             portcullis uring (same config, `--io uring`, same placement); its cells add the \
             ratio to the current build (C)",
            b.bin.display(),
            b.label
        ));
    }
    let md = report::markdown(&report);
    let files = [
        ("report.md", md.clone()),
        ("report.json", report::json(&report)),
        ("ratios.svg", report::svg(&report)),
    ];
    for (name, text) in files {
        let p = out_dir.join(name);
        std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    println!("\n{md}");
    println!(
        "bench: wrote {}/report.md, report.json, ratios.svg ({:.0}s)",
        out_dir.display(),
        started.elapsed().as_secs_f64()
    );
    let broken = broken_rows(&report);
    if broken.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "no value for portcullis in: {} (see the notes under the table)",
            broken.join(", ")
        ))
    }
}

/// Why a workload cannot run at all on this machine (e.g. no root for the namespaces).
fn cannot_run(kind: Kind) -> Option<String> {
    match kind {
        Kind::SynFlood => flood::cannot_run(),
        _ => None,
    }
}

/// Rows of implemented workloads where a portcullis target has no value: a broken bench (or a
/// broken proxy), which CI must see even though the report lists it as skipped.
fn broken_rows(report: &Report) -> Vec<String> {
    let implemented = |id: &str| {
        WORKLOADS
            .iter()
            .any(|w| w.id == id && cannot_run(w.kind).is_none())
    };
    report
        .rows
        .iter()
        .filter(|r| implemented(&r.workload))
        .flat_map(|r| {
            report
                .targets
                .iter()
                .zip(&r.cells)
                .filter(|(t, c)| {
                    // A baseline build that cannot run a workload (an old build refusing a
                    // newer config line) is a skipped cell, not a broken bench.
                    t.id.starts_with("portcullis")
                        && t.id != report::BASELINE
                        && !matches!(c, Cell::Value(_) | Cell::NotApplicable)
                })
                .map(move |(t, _)| format!("{} {} ({})", r.workload, t.label, r.metric))
        })
        .collect()
}

/// The portcullis binary (when it builds) and the binary that runs the `bench-load` clients:
/// in release, a release xtask beside it (the debug one is too slow to drive TLS load). Both
/// are copied into `dir` at once, so a later build into the same target directory (another
/// checkout sharing it) cannot swap them mid-run.
fn build(release: bool, dir: &Path) -> Result<(std::result::Result<PathBuf, String>, PathBuf)> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "-p", "portcullis"]).current_dir(root());
    if release {
        cmd.args(["--release", "-p", "xtask"]);
    }
    let profile = if release { "release" } else { "debug" };
    let portcullis = exec(&mut cmd)
        .map(|()| target_dir().join(profile).join("portcullis"))
        .map_err(|e| format!("build failed: {e}"));
    let load_bin = if release && portcullis.is_ok() {
        target_dir().join("release/xtask")
    } else {
        std::env::current_exe().map_err(|e| format!("cannot find the xtask binary: {e}"))?
    };
    let portcullis = portcullis.and_then(|p| keep(&p, dir, "portcullis"));
    Ok((portcullis, keep(&load_bin, dir, "xtask-load")?))
}

/// Copies a binary into the bench directory as `name` (what the bench then runs).
fn keep(from: &Path, dir: &Path, name: &str) -> Result<PathBuf> {
    let to = dir.join(name);
    let _ = std::fs::remove_file(&to);
    std::fs::copy(from, &to).map_err(|e| format!("copy {}: {e}", from.display()))?;
    Ok(to)
}

/// A self-signed ECDSA P-256 certificate: the bundle HAProxy and portcullis read, and the
/// separate certificate and key nginx reads.
fn certificate(dir: &Path) -> Result<(PathBuf, PathBuf, PathBuf)> {
    let ck = rcgen::generate_simple_self_signed(vec!["bench.local".to_string()])
        .map_err(|e| format!("certificate: {e}"))?;
    let (cert, key) = (ck.cert.pem(), ck.key_pair.serialize_pem());
    let paths = (
        dir.join("bundle.pem"),
        dir.join("cert.pem"),
        dir.join("key.pem"),
    );
    for (p, text) in [
        (&paths.0, format!("{cert}{key}")),
        (&paths.1, cert.clone()),
        (&paths.2, key.clone()),
    ] {
        std::fs::write(p, text).map_err(|e| format!("{}: {e}", p.display()))?;
    }
    Ok(paths)
}

fn haproxy_label() -> String {
    let v = which("haproxy")
        .and_then(|b| output(Command::new(b).arg("-v")))
        .and_then(|out| {
            // "HAProxy version 2.6.12-1+deb12u1 2023/..."
            let v = out.split_whitespace().nth(2)?.to_string();
            Some(v.split(['-', '+']).next().unwrap_or(&v).to_string())
        });
    v.map_or_else(|| "haproxy".into(), |v| format!("haproxy {v}"))
}

fn nginx_label() -> String {
    // nginx -v prints "nginx version: nginx/1.22.1" on stderr.
    which("nginx")
        .and_then(|b| Command::new(b).arg("-v").output().ok())
        .and_then(|o| {
            let t = String::from_utf8_lossy(&o.stderr).into_owned();
            t.split('/').nth(1).map(|v| format!("nginx {}", v.trim()))
        })
        .unwrap_or_else(|| "nginx".into())
}

fn targets(env: &Env, backend_https: u16) -> Vec<Target> {
    let proxy_ports = || Ports {
        http: free_port(),
        https: free_port(),
        echo: free_port(),
        iperf: free_port(),
        h2c: free_port(),
    };
    let t = |id, label, kind, ports| Target {
        id,
        label,
        kind,
        relay: None,
        bin: None,
        refused: Vec::new(),
        ports,
        proc: None,
        down: None,
    };
    let relay = |id, label, relay| Target {
        relay: Some(relay),
        ..t(id, label, TargetKind::Portcullis("uring"), proxy_ports())
    };
    let mut list = vec![
        t(
            report::DIRECT,
            "direct".into(),
            TargetKind::Direct,
            Ports {
                http: env.upstreams.http.port(),
                https: backend_https,
                echo: env.upstreams.echo.port(),
                iperf: env.upstreams.iperf.port(),
                h2c: env.upstreams.h2c.port(),
            },
        ),
        t(
            report::HAPROXY,
            haproxy_label(),
            TargetKind::Haproxy,
            proxy_ports(),
        ),
        t(
            report::CURRENT,
            "portcullis uring".into(),
            TargetKind::Portcullis("uring"),
            proxy_ports(),
        ),
        t(
            "portcullis-epoll",
            "portcullis epoll".into(),
            TargetKind::Portcullis("epoll"),
            proxy_ports(),
        ),
        t("nginx", nginx_label(), TargetKind::Nginx, proxy_ports()),
        relay(
            "portcullis-kernel",
            "portcullis uring, kernel relay only".into(),
            KERNEL_ONLY,
        ),
        relay(
            "portcullis-userspace",
            "portcullis uring, userspace relay only".into(),
            "userspace",
        ),
    ];
    if let Some(b) = &env.baseline {
        // Beside the current build's column, started exactly like it but for the binary.
        let at = list
            .iter()
            .position(|t| t.id == report::CURRENT)
            .map_or(list.len(), |i| i + 1);
        let baseline = Target {
            bin: Some(b.bin.clone()),
            ..t(
                report::BASELINE,
                format!("portcullis {} uring", b.label),
                TargetKind::Portcullis("uring"),
                proxy_ports(),
            )
        };
        list.insert(at, baseline);
    }
    list
}

/// (Re)starts a target's proxy; on failure `down` says why.
fn start(env: &Env, t: &mut Target) {
    start_with(env, t, None)
}

/// [`start`], with an admin socket at `admin` (HAProxy and portcullis) for the reloads.
fn start_with(env: &Env, t: &mut Target, admin: Option<&Path>) {
    start_opts(env, t, admin, false)
}

/// [`start`] for the memory row: portcullis with mimalloc's purge delay at 0, so that memory
/// freed during start-up (the eBPF loader parses the kernel's BTF: 35–50 MiB, kept resident by
/// builds before `process::release_startup_memory`) is not counted as room the connections
/// then fill for free: it made such builds look several times lighter per connection than
/// they are. Builds that give it back themselves measure the same either way.
fn start_for_memory(env: &Env, t: &mut Target) {
    start_opts(env, t, None, true)
}

fn start_opts(env: &Env, t: &mut Target, admin: Option<&Path>, purge: bool) {
    t.proc = None;
    t.down = None;
    let tag = t.id;
    let cfg_path = env.dir.join(format!("{tag}.cfg"));
    // The HAProxy-language text, to find what an older build refused.
    let mut written = String::new();
    let cmd = match t.kind {
        TargetKind::Direct => return,
        TargetKind::Haproxy | TargetKind::Portcullis(_) => {
            let bin = match t.kind {
                TargetKind::Portcullis(_) => t.portcullis(env),
                _ => which("haproxy").ok_or_else(|| "no haproxy on PATH".to_string()),
            };
            let bin = match bin {
                Ok(b) => b,
                Err(e) => {
                    t.down = Some(e);
                    return;
                }
            };
            let mut text = conf::haproxy(t.ports, env.upstreams, &env.bundle, env.maxconn);
            if let Some(relay) = t.relay {
                text = conf::with_relay(&text, relay);
            }
            if let Some(sock) = admin {
                text = conf::with_admin_socket(&text, sock);
            }
            if !t.refused.is_empty() {
                let headers: Vec<String> = t.refused.iter().map(|(h, _)| h.clone()).collect();
                text = conf::without(&text, &headers);
            }
            if let Err(e) = std::fs::write(&cfg_path, &text) {
                t.down = Some(e.to_string());
                return;
            }
            written = text;
            let mut c = pinned(PROXY_CORE, &bin, env.pin);
            c.arg("-f").arg(&cfg_path).arg("-db");
            if let TargetKind::Portcullis(io) = t.kind {
                c.args(["--io", io]);
                if purge {
                    c.env("MIMALLOC_PURGE_DELAY", "0");
                }
            }
            c
        }
        TargetKind::Nginx => {
            let Some(bin) = which("nginx") else {
                t.down = Some("no nginx on PATH".into());
                return;
            };
            let text = conf::nginx_proxy(
                &env.dir,
                t.ports,
                env.upstreams,
                &env.cert,
                &env.key,
                env.stream_module.as_deref(),
                env.maxconn,
            );
            if let Err(e) = std::fs::write(&cfg_path, text) {
                t.down = Some(e.to_string());
                return;
            }
            let mut c = pinned(PROXY_CORE, &bin, env.pin);
            c.arg("-p")
                .arg(&env.dir)
                .arg("-e")
                .arg(env.dir.join("proxy-error.log"));
            c.arg("-c").arg(&cfg_path);
            c
        }
    };
    let log = env.dir.join(format!("{tag}.log"));
    let mut proc = match spawn_logged(cmd, &log) {
        Ok(p) => p,
        Err(e) => {
            t.down = Some(e);
            return;
        }
    };
    let addr = SocketAddr::from(([127, 0, 0, 1], t.ports.http));
    match wait_ready(addr, Some(&mut proc.0)) {
        Ok(()) if t.relay == Some(KERNEL_ONLY) => {
            // Without the kernel path this target would measure the userspace relay under the
            // kernel's name.
            match kernel_unavailable(&log) {
                Some(why) => t.down = Some(why),
                None => t.proc = Some(proc),
            }
        }
        Ok(()) => t.proc = Some(proc),
        Err(_) if t.bin.is_some() && refuse_more(t, &written, &log) => {
            drop(proc);
            start_opts(env, t, admin, purge)
        }
        Err(e) => {
            let mut why = last_line(&log);
            if t.kind == TargetKind::Nginx {
                why = last_line(&env.dir.join("proxy-error.log"));
            }
            t.down = Some(format!("{e}: {why}"));
        }
    }
}

/// After a `--baseline` build failed to start: adds the config sections its log says it refused
/// to `t.refused`; true when there are new ones (it is worth starting again without them).
fn refuse_more(t: &mut Target, cfg: &str, log: &Path) -> bool {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let Some(found) = conf::refused(cfg, &text) else {
        return false;
    };
    let mut more = false;
    for (header, why) in found {
        if !t.refused.iter().any(|(h, _)| *h == header) {
            println!(
                "bench: {} refused '{header}' ({why}): runs without it",
                t.label
            );
            t.refused.push((header, why));
            more = true;
        }
    }
    more
}

/// The frontend of the bench's config a workload runs through (SYN flood has its own config).
fn frontend(kind: Kind) -> Option<&'static str> {
    match kind {
        Kind::Wrk { tls: false, .. } | Kind::Latency | Kind::Memory | Kind::Reload => Some("http"),
        Kind::Wrk { tls: true, .. } | Kind::TlsHandshake | Kind::H2 => Some("https"),
        Kind::H2ToH2 => Some("h2c"),
        Kind::Iperf(_) => Some("iperf"),
        Kind::PingPong(_) => Some("echo"),
        Kind::SynFlood => None,
    }
}

/// The `kernel path unavailable (…)` line portcullis logs at start, when it does.
fn kernel_unavailable(log: &Path) -> Option<String> {
    // The line is written while the listeners come up; give it a moment to reach the file.
    std::thread::sleep(Duration::from_millis(200));
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let at = text.find("kernel path unavailable")?;
    let line = text.get(at..)?.lines().next()?;
    Some(line.trim().to_string())
}

/// Waits until `addr` answers `GET /` with a 2xx, or `child` exits, or a timeout.
fn wait_ready(addr: SocketAddr, mut child: Option<&mut Child>) -> Result {
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

fn wait_port(addr: SocketAddr) -> Result {
    let deadline = Instant::now() + START_TIMEOUT;
    while Instant::now() < deadline {
        if TcpStream::connect(addr).is_ok() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(format!("nothing listens on {addr}"))
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

/// CPU seconds (user + system) a process has used so far, from /proc/<pid>/stat.
fn cpu_seconds(pid: u32) -> Option<f64> {
    cpu_split(pid).map(|(user, sys)| user + sys)
}

/// CPU seconds a process has used so far in user space and in the kernel (/proc/<pid>/stat).
fn cpu_split(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.get(stat.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i)?.parse::<f64>().ok().map(|t| t / 100.0); // USER_HZ
    Some((tick(11)?, tick(12)?))
}

/// Seconds the threads of a process have spent runnable but waiting for a CPU so far (the
/// second field of each /proc/<pid>/task/*/schedstat, in ns).
fn run_queue_wait(pid: u32) -> Option<f64> {
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut ns = 0u64;
    for t in tasks.flatten() {
        let text = std::fs::read_to_string(t.path().join("schedstat")).unwrap_or_default();
        ns += text
            .split_whitespace()
            .nth(1)
            .and_then(|w| w.parse::<u64>().ok())
            .unwrap_or(0);
    }
    Some(ns as f64 / 1e9)
}

/// Says so when the proxy spent a good part of a run waiting for a CPU: its figure then
/// measures what else the machine ran (a whole run's worth gives h2load's "0 req/s"), not it.
fn starved_warning(waited: f64, secs: u64) {
    if waited > 0.2 * secs as f64 {
        println!(
            "     ! the proxy waited {waited:.1}s for a CPU during this {secs}s run \
             (oversubscribed machine): its figure measures the machine, not the proxy"
        );
    }
}

/// The hard RLIMIT_NOFILE: what every process of the bench can raise its own limit to.
fn hard_nofile() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit only writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return 4096;
    }
    r.rlim_max
}

fn rss_kib(pid: u32) -> Option<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// How long a load generator may outlive the run it was asked for before it is stopped: h2load
/// never exits when a connection's handshake completes after its `-D` duration ended (it stops
/// only the clients connected by then; a late one sends requests for ever), which a proxy that
/// gets no CPU for the whole run causes (seen with HAProxy as with portcullis).
const CLIENT_GRACE: Duration = Duration::from_secs(30);

/// Runs a load generator to completion, stopping it `limit` after its start; its stdout, or why
/// it failed.
fn client(mut cmd: Command, limit: Duration) -> Result<String> {
    println!("   $ {}", show(&cmd));
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run '{}': {e}", show(&cmd)))?;
    // Both pipes drained while it runs, so a chatty client cannot block on a full one.
    let out = drain(child.stdout.take());
    let err = drain(child.stderr.take());
    let deadline = Instant::now() + limit;
    let status = loop {
        match child.try_wait() {
            Ok(Some(st)) => break Some(st),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let stdout = out.join().unwrap_or_default();
    let stderr = err.join().unwrap_or_default();
    let name = cmd.get_program().to_string_lossy().into_owned();
    let Some(status) = status else {
        return Err(format!(
            "{name} still running {}s after its start, stopped (a connection set up after the \
             run ended?)",
            limit.as_secs()
        ));
    };
    if !status.success() {
        let why = stderr
            .lines()
            .chain(stdout.lines())
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        return Err(format!("{name} ({status}): {why}"));
    }
    Ok(stdout)
}

/// Reads a child's pipe to its end in a thread of its own.
fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut buf = Vec::new();
        if let Some(mut p) = pipe {
            let _ = p.read_to_end(&mut buf);
        }
        String::from_utf8_lossy(&buf).into_owned()
    })
}

/// One run of workload `kind` against target `t` for `secs` seconds.
fn measure(env: &Env, t: &Target, kind: Kind, secs: u64, rate: f64) -> Result<Run> {
    let lo = |port: u16| SocketAddr::from(([127, 0, 0, 1], port));
    let load = |args: &[&str]| {
        let mut c = pinned(LOAD_CORE, &env.load_bin, env.pin);
        c.arg("bench-load").args(args);
        c
    };
    let secs_s = secs.to_string();
    let limit = Duration::from_secs(secs) + CLIENT_GRACE;
    match kind {
        Kind::Wrk { path, close, tls } => {
            let wrk = which("wrk").ok_or("no wrk")?;
            let mut c = pinned(LOAD_CORE, &wrk, env.pin);
            c.args(["-t1", "-c50", &format!("-d{secs}s"), "--latency"]);
            if close {
                c.args(["-H", "Connection: close"]);
            }
            let (scheme, port) = if tls {
                ("https", t.ports.https)
            } else {
                ("http", t.ports.http)
            };
            c.arg(format!("{scheme}://127.0.0.1:{port}{path}"));
            let out = client(c, limit)?;
            parse::wrk(&out).ok_or_else(|| format!("cannot read wrk output: {}", out.trim()))
        }
        Kind::H2 => {
            let h2load = which("h2load").ok_or("h2load missing (nghttp2-client)")?;
            let mut c = pinned(LOAD_CORE, &h2load, env.pin);
            c.args(["-t1", "-c10", "-m10", "-D", &secs_s]);
            c.arg(format!("https://127.0.0.1:{}/", t.ports.https));
            let out = client(c, limit)?;
            let run = parse::h2load(&out)
                .ok_or_else(|| format!("cannot read h2load output: {}", out.trim()))?;
            if !out.contains("Application protocol: h2") {
                return Err("h2load did not negotiate h2".into());
            }
            Ok(run)
        }
        Kind::H2ToH2 => {
            let h2load = which("h2load").ok_or("h2load missing (nghttp2-client)")?;
            let mut c = pinned(LOAD_CORE, &h2load, env.pin);
            c.args(["-t1", "-c10", "-m10", "-D", &secs_s]);
            c.arg(format!("http://127.0.0.1:{}/", t.ports.h2c));
            let out = client(c, limit)?;
            let run = parse::h2load(&out)
                .ok_or_else(|| format!("cannot read h2load output: {}", out.trim()))?;
            if !out.contains("Application protocol: h2c") {
                return Err("h2load did not speak h2c".into());
            }
            Ok(run)
        }
        Kind::TlsHandshake => {
            let out = client(
                load(&[
                    "tls",
                    "--addr",
                    &lo(t.ports.https).to_string(),
                    "--conns",
                    "32",
                    "--duration",
                    &secs_s,
                ]),
                limit,
            )?;
            parse::load_line(&out).ok_or_else(|| format!("no result from the TLS client: {out}"))
        }
        Kind::PingPong(n) => {
            let out = client(
                load(&[
                    "pingpong",
                    "--addr",
                    &lo(t.ports.echo).to_string(),
                    "--conns",
                    &n.to_string(),
                    "--duration",
                    &secs_s,
                ]),
                limit,
            )?;
            parse::load_line(&out)
                .ok_or_else(|| format!("no result from the ping-pong client: {out}"))
        }
        Kind::Latency => {
            let out = client(
                load(&[
                    "rate",
                    "--addr",
                    &lo(t.ports.http).to_string(),
                    "--conns",
                    "128",
                    "--duration",
                    &secs_s,
                    "--rate",
                    &format!("{rate:.0}"),
                ]),
                limit,
            )?;
            parse::load_line(&out).ok_or_else(|| format!("no result from the rate client: {out}"))
        }
        Kind::Iperf(streams) => {
            let bin = which("iperf3").ok_or("iperf3 missing")?;
            let mut c = pinned(LOAD_CORE, &bin, env.pin);
            c.args(["-c", "127.0.0.1", "-p", &t.ports.iperf.to_string()]);
            c.args(["-t", &secs_s, "-P", &streams.to_string(), "-f", "m"]);
            let out = client(c, limit)?;
            parse::iperf3(&out).ok_or_else(|| format!("cannot read iperf3 output: {}", out.trim()))
        }
        Kind::Memory | Kind::SynFlood | Kind::Reload => Err("not a timed workload".into()),
    }
}

/// Why a target cannot run a workload at all, before trying.
fn unavailable(env: &Env, t: &Target, kind: Kind) -> Option<Cell> {
    if t.relay.is_some() && !matches!(kind, Kind::Iperf(_) | Kind::PingPong(_)) {
        return Some(Cell::NotApplicable);
    }
    if let Some(why) = &t.down {
        return Some(Cell::Skipped(why.clone()));
    }
    let refused = frontend(kind).and_then(|f| {
        let header = format!("frontend {f}");
        t.refused.iter().find(|(h, _)| *h == header)
    });
    if let Some((header, why)) = refused {
        return Some(Cell::Skipped(format!(
            "this build refused the bench config's {header}: {why}"
        )));
    }
    match kind {
        Kind::Memory if t.kind == TargetKind::Direct => Some(Cell::NotApplicable),
        Kind::Memory if env.idle_conns < 100 => Some(Cell::Skipped(format!(
            "RLIMIT_NOFILE allows only {} idle connections",
            env.idle_conns
        ))),
        Kind::Iperf(_) | Kind::PingPong(_)
            if t.kind == TargetKind::Nginx && env.stream_module.is_none() =>
        {
            Some(Cell::Skipped(format!(
                "no nginx stream module ({STREAM_MODULE}; Debian: libnginx-mod-stream)"
            )))
        }
        Kind::Iperf(_) if !have("iperf3") => Some(Cell::Skipped("iperf3 missing".into())),
        Kind::H2 | Kind::H2ToH2 if !have("h2load") => Some(Cell::Skipped("h2load missing".into())),
        // nginx proxies HTTP/1.x only (grpc_pass aside): it has no h2 upstreams.
        Kind::H2ToH2 if t.kind == TargetKind::Nginx => Some(Cell::NotApplicable),
        Kind::SynFlood => flood::unavailable(t.kind),
        Kind::Reload => reload::unavailable(t.kind),
        _ => None,
    }
}

/// The metrics a workload reports: title suffix, unit, direction.
fn metrics(kind: Kind) -> Vec<(&'static str, Better)> {
    match kind {
        // The kernel's part bounds what user-space work can win: loopback TCP runs the peer's
        // receive path in the sender's context, so it weighs alike on every proxy.
        // The user-space part (total − kernel) is what a proxy's own code costs.
        Kind::Wrk { .. } | Kind::H2 | Kind::H2ToH2 => vec![
            ("req/s", Better::Higher),
            ("proxy CPU µs/req", Better::Lower),
            ("of which kernel µs/req", Better::Lower),
            ("of which user-space µs/req", Better::Lower),
        ],
        Kind::TlsHandshake => vec![
            ("handshakes/s", Better::Higher),
            ("proxy CPU µs/handshake", Better::Lower),
            ("of which kernel µs/handshake", Better::Lower),
            ("of which user-space µs/handshake", Better::Lower),
        ],
        Kind::PingPong(_) => vec![
            ("round trips/s", Better::Higher),
            ("proxy CPU µs/round trip", Better::Lower),
            ("of which kernel µs/round trip", Better::Lower),
            ("of which user-space µs/round trip", Better::Lower),
        ],
        Kind::Iperf(_) => vec![
            ("Mbit/s", Better::Higher),
            ("proxy CPU µs/MB", Better::Lower),
            ("of which kernel µs/MB", Better::Lower),
            ("of which user-space µs/MB", Better::Lower),
        ],
        Kind::Latency => vec![
            ("p50 ms", Better::Lower),
            ("p99 ms", Better::Lower),
            ("p99.9 ms", Better::Lower),
        ],
        Kind::Memory => vec![("KiB/connection", Better::Lower)],
        Kind::SynFlood => flood::METRICS.to_vec(),
        Kind::Reload => reload::METRICS.to_vec(),
    }
}

fn workload(env: &Env, targets: &mut [Target], w: &Workload) -> Vec<Row> {
    let ms = metrics(w.kind);
    // cells[metric][target]
    let mut stats: Vec<Vec<Stat>> = vec![vec![Stat::default(); targets.len()]; ms.len()];
    let mut failures: Vec<Option<String>> = vec![None; targets.len()];
    let mut fixed: Vec<Option<Cell>> = targets
        .iter()
        .map(|t| unavailable(env, t, w.kind))
        .collect();
    if let Some(why) = cannot_run(w.kind) {
        fixed = vec![Some(Cell::Skipped(why)); targets.len()];
    }
    let mut rate = 0.0;
    if w.kind == Kind::Latency {
        match haproxy_capacity(env, targets) {
            Ok(r) => {
                rate = r * 0.7;
                println!("   fixed rate: {rate:.0} req/s (70% of HAProxy's {r:.0})");
            }
            Err(e) => {
                fixed = vec![
                    Some(Cell::Skipped(format!("needs HAProxy's capacity: {e}")));
                    targets.len()
                ]
            }
        }
    }
    let n = targets.len();
    let active = |fixed: &[Option<Cell>]| -> Vec<usize> {
        (0..n)
            .filter(|i| fixed.get(*i).is_some_and(Option::is_none))
            .collect()
    };
    if env.warm > 0 && !matches!(w.kind, Kind::Memory | Kind::SynFlood | Kind::Reload) {
        for i in active(&fixed) {
            if let Some(t) = targets.get(i) {
                println!("   warm-up {}", t.label);
                let _ = measure(env, t, w.kind, env.warm, rate);
            }
        }
    }
    for rep in 0..env.reps {
        for i in active(&fixed) {
            let Some(t) = targets.get_mut(i) else {
                continue;
            };
            println!("   [{}/{}] {}", rep + 1, env.reps, t.label);
            let result = match w.kind {
                Kind::Memory => memory(env, t).map(|(kib, errors)| (vec![Some(kib)], errors)),
                Kind::SynFlood => flood::rep(env, t),
                Kind::Reload => reload::rep(env, t, rep),
                _ => timed(env, t, w.kind, rate),
            };
            match result {
                Ok((values, errors)) => {
                    let shown: Vec<String> = values
                        .iter()
                        .zip(&ms)
                        .filter_map(|(v, (metric, _))| {
                            v.map(|v| format!("{} {metric}", report::number(v)))
                        })
                        .collect();
                    let errs = if errors > 0 {
                        format!(" ({errors} errors)")
                    } else {
                        String::new()
                    };
                    println!("     → {}{errs}", shown.join(", "));
                    for (m, v) in values.into_iter().enumerate() {
                        if let (Some(v), Some(s)) = (v, stats.get_mut(m).and_then(|s| s.get_mut(i)))
                        {
                            s.samples.push(v);
                        }
                    }
                    if let Some(s) = stats.first_mut().and_then(|s| s.get_mut(i)) {
                        s.errors += errors;
                    }
                }
                Err(e) => {
                    println!("   ! {}: {e}", t.label);
                    if let Some(f) = failures.get_mut(i) {
                        *f = Some(e);
                    }
                }
            }
        }
    }
    ms.iter()
        .enumerate()
        .map(|(m, (metric, better))| Row {
            workload: w.id.into(),
            title: match w.kind {
                Kind::Memory => format!(
                    "{} idle keep-alive connections",
                    report::number(env.idle_conns as f64)
                ),
                Kind::Latency if rate > 0.0 => format!(
                    "Latency at {} req/s (70% of HAProxy's keep-alive req/s)",
                    report::number(rate)
                ),
                Kind::SynFlood => flood::title(),
                Kind::Reload => reload::title(env.secs),
                _ => w.title.into(),
            },
            metric: (*metric).into(),
            better: *better,
            cells: (0..targets.len())
                .map(|i| {
                    if let Some(Some(c)) = fixed.get(i) {
                        return c.clone();
                    }
                    let s = stats
                        .get(m)
                        .and_then(|s| s.get(i))
                        .cloned()
                        .unwrap_or_default();
                    let t = targets.get(i);
                    if s.samples.is_empty() {
                        if m > 0 && t.is_some_and(|t| t.kind == TargetKind::Direct) {
                            return Cell::NotApplicable;
                        }
                        return Cell::Skipped(
                            failures
                                .get(i)
                                .cloned()
                                .flatten()
                                .unwrap_or_else(|| "no data".into()),
                        );
                    }
                    Cell::Value(s)
                })
                .collect(),
        })
        .collect()
}

/// One recorded repetition: the main value, the proxy's CPU per operation, or the
/// latency percentiles; and the failed operations.
fn timed(env: &Env, t: &Target, kind: Kind, rate: f64) -> Result<(Vec<Option<f64>>, u64)> {
    let pid = t.proc.as_ref().map(|p| p.0.id());
    let before = pid.and_then(cpu_split);
    let waited_before = pid.and_then(run_queue_wait);
    let run = measure(env, t, kind, env.secs, rate)?;
    let after = pid.and_then(cpu_split);
    if let (Some(a), Some(b)) = (waited_before, pid.and_then(run_queue_wait)) {
        starved_warning(b - a, env.secs);
    }
    if kind == Kind::Latency {
        return Ok((vec![run.p50_ms, run.p99_ms, run.p999_ms], run.errors));
    }
    let per_op = |f: fn((f64, f64)) -> f64| match (before, after) {
        (Some(a), Some(b)) if run.ops > 0.0 => Some((f(b) - f(a)) * 1e6 / run.ops),
        _ => None,
    };
    let mut values = vec![Some(run.value), per_op(|(u, s)| u + s)];
    let n = metrics(kind).len();
    if n > 2 {
        values.push(per_op(|(_, s)| s));
    }
    if n > 3 {
        values.push(per_op(|(u, _)| u));
    }
    Ok((values, run.errors))
}

/// HAProxy's keep-alive req/s (the http-ka-tiny load), measured just before the latency runs:
/// capacity drifts with whatever else the machine runs, so an earlier figure could be stale.
fn haproxy_capacity(env: &Env, targets: &[Target]) -> Result<f64> {
    let t = targets
        .iter()
        .find(|t| t.kind == TargetKind::Haproxy)
        .ok_or("no HAProxy target")?;
    if let Some(why) = &t.down {
        return Err(why.clone());
    }
    let kind = WORKLOADS
        .iter()
        .find(|w| w.id == "http-ka-tiny")
        .map(|w| w.kind)
        .ok_or("no keep-alive workload")?;
    let run = measure(env, t, kind, env.secs.max(2), 0.0)?;
    Ok(run.value)
}

/// A fresh proxy, then RSS before and with `IDLE_CONNS` idle keep-alive connections: KiB per
/// connection, and the connections that failed.
fn memory(env: &Env, t: &mut Target) -> Result<(f64, u64)> {
    start_for_memory(env, t);
    let r = idle_growth(env, t);
    // The rows after this one measure a process started as usual: with the purge delay at 0
    // mimalloc gives freed pages back at once, and the rows after it paid for that in kernel
    // time (HTTP/2 over TLS: 11.7 kernel µs/req against 8.35 on a normal start).
    start(env, t);
    r
}

/// RSS growth per connection of the process `t` runs now, with idle keep-alive connections.
fn idle_growth(env: &Env, t: &Target) -> Result<(f64, u64)> {
    if let Some(why) = &t.down {
        return Err(why.clone());
    }
    let pid = t.proc.as_ref().map(|p| p.0.id()).ok_or("not running")?;
    let before = rss_kib(pid).ok_or("cannot read VmRSS")?;
    let mut cmd = pinned(LOAD_CORE, &env.load_bin, env.pin);
    cmd.args([
        "bench-load",
        "idle",
        "--addr",
        &format!("127.0.0.1:{}", t.ports.http),
    ]);
    cmd.args(["--conns", &env.idle_conns.to_string()]);
    println!("   $ {}", show(&cmd));
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot start the idle client: {e}"))?;
    let mut line = String::new();
    if let Some(out) = child.stdout.take() {
        let _ = BufReader::new(out).read_line(&mut line);
    }
    // Let the proxy settle the last connections before reading its memory.
    std::thread::sleep(Duration::from_millis(300));
    let with = rss_kib(pid);
    drop(child.stdin.take());
    let _ = child.wait();
    let run = parse::load_line(&line).ok_or_else(|| format!("idle client: '{}'", line.trim()))?;
    if run.ops < env.idle_conns as f64 * 0.9 {
        return Err(format!(
            "only {} of {} connections opened",
            run.ops, env.idle_conns
        ));
    }
    let with = with.ok_or("cannot read VmRSS")?;
    Ok(((with - before).max(0.0) / run.ops, run.errors))
}

/// `direct 80,240 · haproxy 2.6.12 50,000 · …`: the progress line of a finished row.
fn summary(row: &Row, targets: &[Target]) -> String {
    let cells: Vec<String> = targets
        .iter()
        .zip(&row.cells)
        .map(|(t, c)| {
            let v = match c {
                Cell::Value(s) => s.median().map_or("no data".into(), report::number),
                Cell::Skipped(_) => "skipped".into(),
                Cell::NotApplicable => "n/a".into(),
            };
            format!("{} {v}", t.label)
        })
        .collect();
    format!("{} [{}]: {}", row.title, row.metric, cells.join(" · "))
}

fn machine(cores: usize) -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map_or("unknown CPU", |(_, m)| m.trim());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let l = m.lines().find(|l| l.starts_with("MemTotal:"))?.to_string();
            l.split_whitespace().nth(1)?.parse::<f64>().ok()
        })
        .map_or(String::new(), |kib| {
            format!(", {:.1} GiB RAM", kib / 1024.0 / 1024.0)
        });
    format!("{cores} cores ({model}){mem_gib}, Linux {}", kernel.trim())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_that_outlives_its_run_is_stopped() {
        // As h2load with a connection set up after its run ended: it would never exit.
        let t0 = Instant::now();
        let mut c = Command::new("sh");
        c.args(["-c", "echo started; exec sleep 60"]);
        let r = client(c, Duration::from_millis(300));
        assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
        let e = r.expect_err("a client past its limit is an error");
        assert!(e.contains("still running"), "{e}");
    }

    #[test]
    fn a_client_within_its_limit_gives_its_output() {
        let mut c = Command::new("sh");
        c.args(["-c", "echo ok; echo noise >&2"]);
        assert_eq!(client(c, Duration::from_secs(30)).as_deref(), Ok("ok\n"));
        let mut c = Command::new("sh");
        c.args(["-c", "echo why >&2; exit 3"]);
        let e = client(c, Duration::from_secs(30)).expect_err("exit 3");
        assert!(e.ends_with(": why"), "{e}");
    }

    #[test]
    fn run_queue_wait_reads_this_process() {
        let w = run_queue_wait(std::process::id()).expect("own schedstat");
        assert!(w >= 0.0);
        assert_eq!(run_queue_wait(u32::MAX), None);
    }

    fn a(v: &[&str]) -> Result<Opts> {
        parse_args(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn args() {
        let o = a(&["--quick", "--only", "h2,tcp-throughput", "--reps=5"]).unwrap();
        assert!(o.quick);
        assert_eq!(o.only, ["h2", "tcp-throughput"]);
        assert_eq!(o.reps, Some(5));
        assert_eq!(a(&["--duration", "3s"]).unwrap().duration, Some(3));
        assert_eq!(a(&["--debug"]).unwrap().release, Some(false));
        assert_eq!(a(&["--duration", "0"]).unwrap_err(), "bad duration '0'");
        assert!(
            a(&["--only", "h3"])
                .unwrap_err()
                .starts_with("unknown workload 'h3' (known: memory, http-ka-tiny,")
        );
        assert!(
            a(&["--reps"])
                .unwrap_err()
                .starts_with("--reps needs a value")
        );
        assert!(a(&["-x"]).unwrap_err().starts_with("bad argument '-x'"));
    }

    #[test]
    fn baseline_args() {
        let b = |path: &str, label: &str| Baseline {
            bin: PathBuf::from(path),
            label: label.into(),
        };
        assert_eq!(a(&[]).unwrap().baseline, None);
        assert_eq!(
            a(&["--baseline", "/w/before/portcullis"]).unwrap().baseline,
            Some(b("/w/before/portcullis", "baseline"))
        );
        assert_eq!(
            a(&["--baseline=/w/p:before-01d033d", "--quick"])
                .unwrap()
                .baseline,
            Some(b("/w/p", "before-01d033d"))
        );
        // The last ':' separates the label; one followed by a '/' is part of the path.
        assert_eq!(
            a(&["--baseline", "/w/a:b/p:old"]).unwrap().baseline,
            Some(b("/w/a:b/p", "old"))
        );
        assert_eq!(
            a(&["--baseline", "/w/a:b/p"]).unwrap().baseline,
            Some(b("/w/a:b/p", "baseline"))
        );
        assert!(
            a(&["--baseline"])
                .unwrap_err()
                .starts_with("--baseline needs a value")
        );
        assert!(
            a(&["--baseline", ":old"])
                .unwrap_err()
                .starts_with("--baseline ':old' has no path")
        );
        assert!(
            a(&["--baseline", "/w/p:"])
                .unwrap_err()
                .starts_with("bad baseline label ''")
        );
        assert!(
            a(&["--baseline", "/w/p:a|b"])
                .unwrap_err()
                .starts_with("bad baseline label 'a|b'")
        );
        assert!(
            a(&["--baseline", "/w/p", "--baseline", "/w/q"])
                .unwrap_err()
                .starts_with("--baseline given twice")
        );
    }

    fn env(baseline: Option<Baseline>) -> Env {
        let lo = SocketAddr::from(([127, 0, 0, 1], 9));
        Env {
            dir: PathBuf::from("/w/bench"),
            pin: false,
            secs: 1,
            warm: 0,
            reps: 1,
            load_bin: PathBuf::from("/w/bench/xtask-load"),
            portcullis: Ok(PathBuf::from("/w/bench/portcullis")),
            baseline,
            bundle: PathBuf::new(),
            cert: PathBuf::new(),
            key: PathBuf::new(),
            upstreams: Upstreams {
                http: lo,
                echo: lo,
                iperf: lo,
                h2c: lo,
            },
            stream_module: None,
            maxconn: 20_000,
            idle_conns: 10_000,
        }
    }

    #[test]
    fn a_baseline_adds_one_target_beside_the_current_build() {
        let plain = env(None);
        let ids = |ts: &[Target]| ts.iter().map(|t| t.id).collect::<Vec<_>>();
        let before = targets(&plain, 9);
        assert!(before.iter().all(|t| t.bin.is_none()));
        let with = env(Some(Baseline {
            bin: PathBuf::from("/w/bench/portcullis-baseline"),
            label: "before-01d033d".into(),
        }));
        let after = targets(&with, 9);
        assert_eq!(after.len(), before.len() + 1);
        let at = after
            .iter()
            .position(|t| t.id == report::BASELINE)
            .expect("a baseline target");
        assert_eq!(after.get(at - 1).map(|t| t.id), Some(report::CURRENT));
        let mut without = ids(&after);
        without.remove(at);
        assert_eq!(without, ids(&before));

        let (b, cur) = (&after[at], &after[at - 1]);
        assert_eq!(b.label, "portcullis before-01d033d uring");
        assert_eq!(b.kind, cur.kind);
        assert_eq!(b.relay, cur.relay);
        assert_eq!(
            b.portcullis(&with).unwrap(),
            PathBuf::from("/w/bench/portcullis-baseline")
        );
        assert_eq!(
            cur.portcullis(&with).unwrap(),
            PathBuf::from("/w/bench/portcullis")
        );
        // Its own ports: both run at once.
        assert_ne!(b.ports.http, cur.ports.http);
        // It takes part in every workload the current build does.
        for w in WORKLOADS {
            assert_eq!(
                unavailable(&with, b, w.kind),
                unavailable(&with, cur, w.kind),
                "{}",
                w.id
            );
        }
    }

    #[test]
    fn a_refused_frontend_skips_the_workloads_through_it() {
        let e = env(Some(Baseline {
            bin: PathBuf::from("/w/bench/portcullis-baseline"),
            label: "old".into(),
        }));
        let mut ts = targets(&e, 9);
        let b = ts
            .iter_mut()
            .find(|t| t.id == report::BASELINE)
            .expect("a baseline target");
        b.refused = vec![(
            "frontend h2c".into(),
            "'bind 127.0.0.1:9005' unknown keyword 'proto'.".into(),
        )];
        let kind = |id: &str| WORKLOADS.iter().find(|w| w.id == id).unwrap().kind;
        assert_eq!(
            unavailable(&e, b, kind("h2c-h2")),
            Some(Cell::Skipped(
                "this build refused the bench config's frontend h2c: 'bind 127.0.0.1:9005' \
                 unknown keyword 'proto'."
                    .into()
            ))
        );
        for id in ["memory", "http-ka-tiny", "h2", "pingpong-1"] {
            assert_eq!(unavailable(&e, b, kind(id)), None, "{id}");
        }
        // Every workload but the SYN flood (its own config) names a frontend of the config.
        let cfg = conf::haproxy(b.ports, e.upstreams, &e.bundle, e.maxconn);
        for w in WORKLOADS {
            match frontend(w.kind) {
                Some(f) => assert!(cfg.contains(&format!("\nfrontend {f}\n")), "{}", w.id),
                None => assert_eq!(w.kind, Kind::SynFlood),
            }
        }
    }

    #[test]
    fn only_selects_groups() {
        assert!(selects("tcp-throughput", "tcp-throughput-4"));
        assert!(selects("http-ka", "http-ka-16k"));
        assert!(selects("h2", "h2"));
        assert!(!selects("http", "https-ka"));
        assert!(!selects("tcp-throughput-1", "tcp-throughput-4"));
    }

    #[test]
    fn broken_rows_are_portcullis_gaps_in_implemented_workloads() {
        let t = |id: &str| report::Target {
            id: id.into(),
            label: id.into(),
        };
        let row = |workload: &str, cells: Vec<Cell>| Row {
            workload: workload.into(),
            title: workload.into(),
            metric: "req/s".into(),
            better: Better::Higher,
            cells,
        };
        let v = || {
            Cell::Value(Stat {
                samples: vec![1.0],
                errors: 0,
            })
        };
        let r = Report {
            targets: vec![
                t("haproxy"),
                t("portcullis-uring"),
                t(report::BASELINE),
                t("nginx"),
            ],
            rows: vec![
                // An old build refusing a config line: skipped, not broken.
                row(
                    "http-ka-tiny",
                    vec![
                        v(),
                        v(),
                        Cell::Skipped("old".into()),
                        Cell::Skipped("x".into()),
                    ],
                ),
                row("h2", vec![v(), Cell::Skipped("down".into()), v(), v()]),
                // Not a workload of this bench (e.g. a row of an older report): never broken.
                row("retired", vec![Cell::Skipped("gone".into()); 4]),
                // Not applicable is no gap.
                row("http-close", vec![v(), Cell::NotApplicable, v(), v()]),
            ],
            ..Report::default()
        };
        assert_eq!(broken_rows(&r), ["h2 portcullis-uring (req/s)"]);
    }

    #[test]
    fn every_workload_has_rows_and_unique_id() {
        let mut ids: Vec<&str> = WORKLOADS.iter().map(|w| w.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), WORKLOADS.len());
        for w in WORKLOADS {
            assert!(!metrics(w.kind).is_empty(), "{}", w.id);
        }
    }
}
