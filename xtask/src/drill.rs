//! `cargo xtask drill`: seed 000's graceful-termination experiment (S3), against portcullis
//! and HAProxy 2.6 on the same config.
//!
//! For each balancer × preStop mode × `option redispatch` off/on: three simulated gateway pods
//! (`tests/support/drill.rs`), the balancer on the seed config, fixed-rate HTTPS load plus a
//! few long streams through the 443 frontend, and a rolling restart of the pods one at a time.
//! Prints the seed's table, one row per run.

use crate::drill_core::{self as core, Mode, Net, Spec};
use crate::util::{Result, exec, root, target_dir, which};
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

const USAGE: &str =
    "usage: cargo xtask drill --churn [--quick] [--balancer …]  (see drill --churn --help)
       cargo xtask drill [--quick] [--duration S] [--rate N] [--restarts 1-3]
                  [--streams N] [--stream-seconds S] [--net 127.B]
                  [--balancer portcullis|haproxy|both] [--mode current|improved|both]
                  [--redispatch off|on|both] [--io auto|uring|epoll]
                  [--portcullis <prebuilt binary>] [-v]";

struct Opts {
    quick: bool,
    duration: Option<u64>,
    rate: u32,
    restarts: Option<usize>,
    streams: usize,
    stream_secs: Option<u64>,
    net: Net,
    balancers: Vec<&'static str>,
    modes: Vec<Mode>,
    redispatch: Vec<bool>,
    io: Option<String>,
    /// A prebuilt portcullis instead of `cargo build --release`.
    portcullis: Option<PathBuf>,
    verbose: bool,
}

fn parse(args: &[String]) -> Result<Opts> {
    let mut o = Opts {
        quick: false,
        duration: None,
        rate: 50,
        restarts: None,
        streams: 3,
        stream_secs: None,
        net: Net::parse("127.0")?,
        balancers: vec!["portcullis", "haproxy"],
        modes: vec![Mode::Current, Mode::Improved],
        redispatch: vec![false, true],
        io: None,
        portcullis: None,
        verbose: false,
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || {
            it.next()
                .cloned()
                .ok_or(format!("{a} needs a value\n{USAGE}"))
        };
        let num = |v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{a}: '{v}' is not a number"))
        };
        match a.as_str() {
            "--quick" => o.quick = true,
            "-v" | "--verbose" => o.verbose = true,
            "--duration" => o.duration = Some(num(val()?)?),
            "--rate" => o.rate = num(val()?)?.clamp(1, 2000) as u32,
            "--restarts" => o.restarts = Some(num(val()?)?.clamp(1, 3) as usize),
            "--streams" => o.streams = num(val()?)? as usize,
            "--stream-seconds" => o.stream_secs = Some(num(val()?)?.max(1)),
            "--net" => o.net = Net::parse(&val()?)?,
            "--io" => o.io = Some(val()?),
            "--portcullis" => o.portcullis = Some(PathBuf::from(val()?)),
            "--balancer" => {
                o.balancers = match val()?.as_str() {
                    "portcullis" => vec!["portcullis"],
                    "haproxy" => vec!["haproxy"],
                    "both" => vec!["portcullis", "haproxy"],
                    v => return Err(format!("--balancer: '{v}'\n{USAGE}")),
                }
            }
            "--mode" => {
                o.modes = match val()?.as_str() {
                    "current" => vec![Mode::Current],
                    "improved" => vec![Mode::Improved],
                    "both" => vec![Mode::Current, Mode::Improved],
                    v => return Err(format!("--mode: '{v}'\n{USAGE}")),
                }
            }
            "--redispatch" => {
                o.redispatch = match val()?.as_str() {
                    "off" => vec![false],
                    "on" => vec![true],
                    "both" => vec![false, true],
                    v => return Err(format!("--redispatch: '{v}'\n{USAGE}")),
                }
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown option '{other}'\n{USAGE}")),
        }
    }
    Ok(o)
}

/// One row of the table.
pub struct Row {
    pub balancer: String,
    pub mode: Mode,
    pub redispatch: bool,
    pub result: core::RunResult,
}

fn ms(v: Option<f64>) -> String {
    match v {
        Some(v) if v >= 100.0 => format!("{v:.0}ms"),
        Some(v) => format!("{v:.1}ms"),
        None => "-".into(),
    }
}

pub fn header() -> String {
    format!(
        "{:<18} {:<9} {:<10} {:>8} {:>5} {:>14} {:>8} {:>12} {:>8} {:>8}",
        "balancer",
        "mode",
        "redispatch",
        "requests",
        "5xx",
        "connection_err",
        "D-coded",
        "streams cut",
        "p50",
        "p99"
    )
}

pub fn row(r: &Row) -> String {
    let l = &r.result.load;
    let streams = l.streams_ok + l.streams_cut_total();
    format!(
        "{:<18} {:<9} {:<10} {:>8} {:>5} {:>14} {:>8} {:>12} {:>8} {:>8}",
        r.balancer,
        r.mode.name(),
        if r.redispatch { "yes" } else { "no" },
        l.sent,
        l.fivexx(),
        l.conn_err(),
        r.result.log.d_coded,
        format!("{}/{}", l.streams_cut_total(), streams),
        ms(l.percentile_ms(50.0)),
        ms(l.percentile_ms(99.0)),
    )
}

/// The line under a row: what the counts are made of.
pub fn detail(r: &Row) -> String {
    let l = &r.result.load;
    let join = |m: Vec<String>| {
        if m.is_empty() {
            "none".to_string()
        } else {
            m.join(" ")
        }
    };
    let codes = join(l.statuses.iter().map(|(c, n)| format!("{c}×{n}")).collect());
    let errs = join(
        l.conn_errs
            .iter()
            .map(|(c, n)| format!("{c}×{n}"))
            .collect(),
    );
    let cut = join(
        l.streams_cut
            .iter()
            .map(|(c, n)| format!("{c}×{n}"))
            .collect(),
    );
    let tsc = join(
        r.result
            .log
            .states
            .iter()
            .map(|(c, n)| format!("{c}×{n}"))
            .collect(),
    );
    format!(
        "    statuses {codes}; client errors {errs}; streams cut {cut}; log states {tsc}; DOWN {} UP {}",
        r.result.log.downs, r.result.log.ups
    )
}

fn seed_text() -> String {
    std::fs::read_to_string(root().join("../shared/configs/seed-loopback.cfg"))
        .unwrap_or_else(|_| include_str!("seed-loopback.cfg").to_string())
}

pub fn run(args: &[String]) -> Result {
    if args.iter().any(|a| a == "--churn") {
        return crate::churn::run(args);
    }
    if args.iter().any(|a| a == "--failover") {
        return crate::failover::run(args);
    }
    let o = parse(args)?;
    let duration = o.duration.unwrap_or(if o.quick { 20 } else { 90 });
    let restarts = o.restarts.unwrap_or(if o.quick { 1 } else { 3 });
    let stream_secs = o.stream_secs.unwrap_or(if o.quick { 4 } else { 10 });
    let run_dir = target_dir().join("xtask-drill");
    std::fs::create_dir_all(&run_dir).map_err(|e| format!("{}: {e}", run_dir.display()))?;
    let cert = crate::demo::make_cert(&run_dir).ok_or("no certificate (is openssl installed?)")?;
    let seed = seed_text();

    let mut bins: Vec<(String, PathBuf)> = Vec::new();
    for b in &o.balancers {
        match (*b, &o.portcullis) {
            ("portcullis", Some(p)) => bins.push(("portcullis".into(), p.clone())),
            ("portcullis", None) => {
                let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                exec(
                    Command::new(cargo)
                        .args(["build", "--release", "-p", "portcullis"])
                        .current_dir(root()),
                )?;
                bins.push(("portcullis".into(), target_dir().join("release/portcullis")));
            }
            _ => match which("haproxy") {
                Some(p) => bins.push((crate::util::haproxy_label(&p), p)),
                None => println!("drill: haproxy is not installed, its rows are left out"),
            },
        }
    }

    println!(
        "drill: {duration} s of load at {} req/s + {} stream(s) of {stream_secs} s, rolling restart \
         of {restarts} node(s); balancer on {}, nodes on {}-{}",
        o.rate,
        o.streams,
        o.net.https(),
        o.net.nodes[0],
        o.net.nodes[2]
    );
    let mut rows = Vec::new();
    for (name, bin) in &bins {
        for &mode in &o.modes {
            for &redispatch in &o.redispatch {
                let spec = Spec {
                    mode,
                    redispatch,
                    duration: Duration::from_secs(duration),
                    rate: o.rate,
                    restarts,
                    streams: o.streams,
                    stream_secs,
                    warmup: Duration::from_secs(3),
                    replace_after: Duration::from_secs(5),
                    net: o.net,
                };
                let mut cmd = Command::new(bin);
                if name == "portcullis"
                    && let Some(io) = &o.io
                {
                    cmd.args(["--io", io]);
                }
                cmd.arg("-db");
                let dir = run_dir.join(format!(
                    "{}-{}-{}",
                    name.split(' ').next().unwrap_or("lb"),
                    mode.name(),
                    if redispatch { "redispatch" } else { "plain" }
                ));
                std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
                println!(
                    "drill: {name}, {}, redispatch {} …",
                    mode.name(),
                    if redispatch { "on" } else { "off" }
                );
                let result = core::run(cmd, &seed, &cert, &dir, &spec)
                    .map_err(|e| format!("{name} {}: {e}", mode.name()))?;
                if o.verbose {
                    for t in &result.timeline {
                        println!("    {t}");
                    }
                }
                let r = Row {
                    balancer: name.clone(),
                    mode,
                    redispatch,
                    result,
                };
                println!("{}", row(&r));
                rows.push(r);
            }
        }
    }
    println!("\n{}", header());
    for r in &rows {
        println!("{}", row(r));
    }
    println!();
    for r in &rows {
        println!(
            "{} {} redispatch={}:",
            r.balancer,
            r.mode.name(),
            if r.redispatch { "yes" } else { "no" }
        );
        println!("{}", detail(r));
    }
    println!("\nlogs and configs: {}", run_dir.display());
    Ok(())
}
