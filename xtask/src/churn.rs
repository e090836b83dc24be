//! `cargo xtask drill --churn`: a controller's rolling update (3 → 6 → 3 pods through `add
//! server` / `del server`, a `set map`) under steady load, against portcullis and HAProxy 2.6
//! on the same configuration (`tests/support/churn.rs`). Prints one row per balancer.

use crate::churn_core::{self as core, ChurnSpec};
use crate::util::{Result, exec, root, target_dir, which};
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const USAGE: &str = "usage: cargo xtask drill --churn [--quick] [--balancer portcullis|haproxy|both] [--portcullis <binary>] [-v]";

pub fn run(args: &[String]) -> Result {
    let (mut quick, mut verbose, mut prebuilt) = (false, false, None::<PathBuf>);
    let mut balancers = vec!["portcullis", "haproxy"];
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--churn" => {}
            "--quick" => quick = true,
            "-v" | "--verbose" => verbose = true,
            "--portcullis" => prebuilt = it.next().map(PathBuf::from),
            "--balancer" => {
                balancers = match it.next().map(String::as_str) {
                    Some("portcullis") => vec!["portcullis"],
                    Some("haproxy") => vec!["haproxy"],
                    Some("both") => vec!["portcullis", "haproxy"],
                    _ => return Err(USAGE.into()),
                }
            }
            _ => return Err(format!("unknown option '{a}'\n{USAGE}")),
        }
    }
    let spec = if quick {
        ChurnSpec::quick()
    } else {
        ChurnSpec::full()
    };
    let mut bins: Vec<(String, PathBuf)> = Vec::new();
    for b in balancers {
        if b == "portcullis" {
            let bin = match &prebuilt {
                Some(p) => p.clone(),
                None => {
                    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
                    exec(
                        Command::new(cargo)
                            .args(["build", "--release", "-p", "portcullis"])
                            .current_dir(root()),
                    )?;
                    target_dir().join("release/portcullis")
                }
            };
            bins.push(("portcullis".into(), bin));
        } else {
            match which("haproxy") {
                Some(p) => bins.push((crate::util::haproxy_label(&p), p)),
                None => println!("churn: haproxy is not installed, its row is left out"),
            }
        }
    }
    let run_dir = target_dir().join("xtask-churn");
    let mut rows = Vec::new();
    for (name, bin) in &bins {
        let dir = run_dir.join(name.split(' ').next().unwrap_or("lb"));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let s = core::setup(&dir).map_err(|e| format!("setup: {e}"))?;
        let cfg = dir.join("churn.cfg");
        std::fs::write(&cfg, &s.config).map_err(|e| format!("{}: {e}", cfg.display()))?;
        println!("churn: {name} …");
        let mut child = Command::new(bin)
            .arg("-db")
            .arg("-f")
            .arg(&cfg)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("{}: {e}", bin.display()))?;
        let stderr = child.stderr.take();
        let log_path = dir.join("stderr.log");
        let logger = std::thread::spawn(move || {
            let mut out = String::new();
            if let Some(e) = stderr {
                for l in BufReader::new(e).lines().map_while(|l| l.ok()) {
                    out.push_str(&l);
                    out.push('\n');
                }
            }
            let _ = std::fs::write(log_path, out);
        });
        let t0 = Instant::now();
        while TcpStream::connect(s.front).is_err() {
            if t0.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                return Err(format!("{name} did not listen on {}", s.front));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let r = core::run(s, &spec, &mut |l| {
            if verbose {
                println!("    {l}");
            }
        });
        let _ = child.kill();
        let _ = child.wait();
        let _ = logger.join();
        println!("{}", core::row(name, &r));
        for e in &r.cli_errors {
            println!("    unexpected reply: {e}");
        }
        rows.push((name.clone(), r));
    }
    println!("\n{}", core::header());
    for (n, r) in &rows {
        println!("{}", core::row(n, r));
    }
    println!();
    for (n, r) in &rows {
        let pods: Vec<String> = r.per_pod.iter().map(|(p, c)| format!("{p}={c}")).collect();
        println!("{n}: requests per pod {}", pods.join(" "));
    }
    println!("\nconfigs and logs: {}", run_dir.display());
    Ok(())
}
