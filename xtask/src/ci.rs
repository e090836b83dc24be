//! `cargo xtask test`: what CI runs, in order, stopping at the first failed step (the test
//! suite runs whole on both engines first).
//!
//! setup → `cargo fmt --check` → clippy `-D warnings` → `cargo test --workspace` with
//! `PORTCULLIS_IO=uring`, then again with `PORTCULLIS_IO=epoll` (the integration tests pass it to
//! the binary as `--io`). The last line is `N passed, M failed`, summed over both test runs;
//! then the Debian package is built and checked (`deb::ci`).
//!
//! `cargo xtask test --stress [--runs N]` runs the suite on both engines N times (3 by default)
//! while a spinning thread keeps one core busy, as when CI shares the machine: a test that
//! judges a rate or a timing without margins fails there. It stops at the first failing run.

use crate::util::{Result, exec, show};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// The I/O engines the test suite runs under, in order.
const IO_ENGINES: &[&str] = &["uring", "epoll"];

#[derive(Default, Debug, PartialEq, Eq)]
pub struct Tally {
    pub passed: u64,
    pub failed: u64,
}

pub fn run(args: &[String]) -> Result {
    if args.first().map(String::as_str) == Some("--stress") {
        let runs = match args.get(1..) {
            Some([flag, n]) if flag == "--runs" => n
                .parse()
                .map_err(|_| format!("--runs: '{n}' is not a number"))?,
            Some([]) | None => 3,
            _ => return Err("usage: cargo xtask test [--stress [--runs N]]".into()),
        };
        return stress(runs);
    }
    if let Some(a) = args.first() {
        return Err(format!(
            "unknown option '{a}'\nusage: cargo xtask test [--stress [--runs N]]"
        ));
    }
    step("setup", crate::setup::run)?;
    step("cargo fmt", || {
        exec(&mut cargo(&["fmt", "--all", "--", "--check"]))
    })?;
    step("cargo clippy", || {
        let args = [
            "clippy",
            "--workspace",
            "--all-targets",
            "--",
            "-D",
            "warnings",
        ];
        exec(&mut cargo(&args))
    })?;
    let mut total = Tally::default();
    // Both engines run to the end even when one fails (and every test binary of each, with
    // --no-fail-fast): one flaky test must not hide what else is broken.
    let mut failures = Vec::new();
    for io in IO_ENGINES {
        println!("==> cargo test --workspace (PORTCULLIS_IO={io})");
        if let Err(e) = cargo_test(io, &mut total) {
            failures.push(format!("cargo test with PORTCULLIS_IO={io}: {e}"));
        }
    }
    println!("{} passed, {} failed", total.passed, total.failed);
    if !failures.is_empty() {
        return Err(failures.join("; "));
    }
    if total.failed > 0 {
        return Err(format!("{} test(s) failed", total.failed));
    }
    step("cargo xtask deb", crate::deb::ci)
}

/// The suite on both engines `runs` times under a one-core CPU hog; the first failure ends it.
fn stress(runs: u32) -> Result {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};
    let stop = Arc::new(AtomicBool::new(false));
    let hog = {
        let stop = Arc::clone(&stop);
        std::thread::spawn(move || {
            let mut x = 0u64;
            while !stop.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        })
    };
    let mut result = Ok(());
    'runs: for run in 1..=runs {
        for io in IO_ENGINES {
            println!(
                "==> stress run {run}/{runs}: cargo test --workspace (PORTCULLIS_IO={io}), one core busy"
            );
            let mut total = Tally::default();
            let outcome = cargo_test(io, &mut total);
            println!(
                "stress run {run}/{runs} {io}: {} passed, {} failed",
                total.passed, total.failed
            );
            if let Err(e) = outcome {
                result = Err(format!("stress run {run} (PORTCULLIS_IO={io}): {e}"));
                break 'runs;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let _ = hog.join();
    if result.is_ok() {
        println!("stress: {runs} run(s) passed on both engines");
    }
    result
}

fn step(name: &str, f: impl FnOnce() -> Result) -> Result {
    println!("==> {name}");
    f().map_err(|e| format!("step '{name}' failed: {e}"))
}

fn cargo(args: &[&str]) -> Command {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.args(args).current_dir(crate::util::root());
    c
}

/// Runs the test suite once, echoing its output and adding its result lines to `total`.
fn cargo_test(io: &str, total: &mut Tally) -> Result {
    let mut cmd = cargo(&["test", "--workspace", "--no-fail-fast"]);
    cmd.env("PORTCULLIS_IO", io).stdout(Stdio::piped());
    println!("$ PORTCULLIS_IO={io} {}", show(&cmd));
    let mut child = cmd.spawn().map_err(|e| format!("cannot run cargo: {e}"))?;
    let mut this_run = Tally::default();
    if let Some(out) = child.stdout.take() {
        for line in BufReader::new(out).lines().map_while(|l| l.ok()) {
            println!("{line}");
            if let Some(t) = parse_result_line(&line) {
                this_run.passed += t.passed;
                this_run.failed += t.failed;
            }
        }
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    if !status.success() && this_run.failed == 0 {
        // A build error or a crashed test binary: count it, so the summary cannot read clean.
        this_run.failed = 1;
    }
    total.passed += this_run.passed;
    total.failed += this_run.failed;
    if status.success() {
        Ok(())
    } else {
        Err(format!("failed ({status})"))
    }
}

/// Reads `test result: ok. 15 passed; 0 failed; 0 ignored; …` into a tally.
pub fn parse_result_line(line: &str) -> Option<Tally> {
    let rest = line.trim().strip_prefix("test result:")?;
    let mut t = Tally::default();
    for part in rest.split(';') {
        let mut words = part.split_whitespace().rev();
        let (Some(kind), Some(n)) = (words.next(), words.next()) else {
            continue;
        };
        match (kind, n.parse::<u64>()) {
            ("passed", Ok(n)) => t.passed = n,
            ("failed", Ok(n)) => t.failed = n,
            _ => {}
        }
    }
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_lines() {
        assert_eq!(
            parse_result_line(
                "test result: ok. 15 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.15s"
            ),
            Some(Tally {
                passed: 15,
                failed: 0
            })
        );
        assert_eq!(
            parse_result_line("test result: FAILED. 14 passed; 1 failed; 0 ignored; 0 measured"),
            Some(Tally {
                passed: 14,
                failed: 1
            })
        );
        assert_eq!(parse_result_line("running 15 tests"), None);
        assert_eq!(parse_result_line("test foo ... ok"), None);
    }
}
