//! `cargo xtask regtests`: HAProxy's own reg-tests (VTest) against HAProxy 2.6 and portcullis,
//! side by side.
//!
//! The tests and VTest's source are HAProxy's files and stay outside the product's source, in
//! `../shared/tools/regtests/` (its `run.sh` builds VTest once and runs a list of tests against
//! one binary). This command runs that list with HAProxy, then with portcullis (debug build, or
//! `--release`), prints one table and `N passed, M failed` for each, and fails when a test listed
//! in `xtask/regtests-pass.txt` (the ones portcullis has been made to pass) fails for
//! portcullis — so CI keeps what was won and shows the rest.

use crate::util::{Result, have, root, target_dir, which};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Command;

const USAGE: &str = "usage: cargo xtask regtests [--release] [--no-haproxy] [--only T[,T…]]";

pub fn run(args: &[String]) -> Result {
    let mut release = false;
    let mut with_haproxy = true;
    let mut only: Option<Vec<String>> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--release" => release = true,
            "--no-haproxy" => with_haproxy = false,
            "--only" => {
                let v = it.next().ok_or(USAGE)?;
                only = Some(v.split(',').map(str::to_string).collect());
            }
            _ => return Err(USAGE.into()),
        }
    }
    let dir = regtests_dir()?;
    let mut list: Vec<String> = std::fs::read_to_string(dir.join("in-scope.txt"))
        .map_err(|e| format!("{}: {e}", dir.join("in-scope.txt").display()))?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect();
    if let Some(o) = &only {
        list.retain(|t| o.iter().any(|x| t.contains(x.as_str())));
    }
    let list_file = target_dir().join("regtests-list.txt");
    std::fs::create_dir_all(target_dir()).map_err(|e| e.to_string())?;
    std::fs::write(&list_file, list.join("\n") + "\n").map_err(|e| e.to_string())?;

    let bin = build(release)?;
    let mut columns: Vec<(&str, BTreeMap<String, Outcome>)> = Vec::new();
    if with_haproxy {
        match which("haproxy") {
            Some(h) => columns.push(("HAProxy", run_list(&dir, &h, &list_file)?)),
            None => println!("haproxy is not installed: its column is left out"),
        }
    }
    let ours = run_list(&dir, &bin, &list_file)?;
    columns.push(("portcullis", ours.clone()));

    print_table(&list, &columns);
    let expected = expected_passes();
    let regressed: Vec<&String> = list
        .iter()
        .filter(|t| expected.contains(*t) && ours.get(*t) != Some(&Outcome::Passed))
        .collect();
    if !regressed.is_empty() {
        return Err(format!(
            "reg-tests that passed before fail now: {}",
            regressed
                .iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    Ok(())
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Passed,
    /// With the path of its VTest log.
    Failed(String),
}

/// `../shared/tools/regtests` beside the checkout (one level deeper for a git worktree).
fn regtests_dir() -> Result<PathBuf> {
    let r = root();
    [
        r.join("../shared/tools/regtests"),
        r.join("../../shared/tools/regtests"),
        PathBuf::from("/work/shared/tools/regtests"),
    ]
    .into_iter()
    .find(|p| p.join("run.sh").exists())
    .ok_or_else(|| "shared/tools/regtests/run.sh not found beside the checkout".into())
}

fn build(release: bool) -> Result<PathBuf> {
    let mut c = Command::new(std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    c.args(["build", "-p", "portcullis", "--bin", "portcullis"])
        .current_dir(root());
    if release {
        c.arg("--release");
    }
    crate::util::exec(&mut c)?;
    Ok(target_dir()
        .join(if release { "release" } else { "debug" })
        .join("portcullis"))
}

/// Runs `run.sh BINARY LIST` and reads its `<test> passed|failed (<log>)` lines.
fn run_list(
    dir: &std::path::Path,
    bin: &std::path::Path,
    list: &std::path::Path,
) -> Result<BTreeMap<String, Outcome>> {
    if !have("make") || !have("cc") {
        return Err("VTest needs make and a C compiler".into());
    }
    println!("$ bash {}/run.sh {}", dir.display(), bin.display());
    let out = Command::new("bash")
        .arg(dir.join("run.sh"))
        .arg(bin)
        .arg(list)
        .output()
        .map_err(|e| format!("cannot run run.sh: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let results = parse_run_output(&text);
    if results.is_empty() {
        return Err(format!(
            "run.sh printed no result (exit {:?}): {}{}",
            out.status.code(),
            text,
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    if let Some(last) = text.lines().rev().find(|l| l.contains(" passed, ")) {
        println!("{}: {last}", bin.display());
    }
    Ok(results)
}

fn parse_run_output(text: &str) -> BTreeMap<String, Outcome> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let (Some(test), Some(verdict)) = (words.next(), words.next()) else {
            continue;
        };
        if !test.ends_with(".vtc") {
            continue;
        }
        let o = match verdict {
            "passed" => Outcome::Passed,
            "failed" => Outcome::Failed(
                words
                    .next()
                    .unwrap_or_default()
                    .trim_matches(|c| c == '(' || c == ')')
                    .to_string(),
            ),
            _ => continue,
        };
        m.insert(test.to_string(), o);
    }
    m
}

/// The tests portcullis passes and must keep passing (one per line, `#` comments).
fn expected_passes() -> Vec<String> {
    std::fs::read_to_string(root().join("xtask/regtests-pass.txt"))
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_string)
        .collect()
}

fn print_table(list: &[String], columns: &[(&str, BTreeMap<String, Outcome>)]) {
    let w = list.iter().map(String::len).max().unwrap_or(4).max(4);
    let mut head = format!("{:<w$}", "test");
    for (name, _) in columns {
        head.push_str(&format!("  {name:<10}"));
    }
    println!("\n{head}");
    for t in list {
        let mut row = format!("{t:<w$}");
        for (_, res) in columns {
            let cell = match res.get(t) {
                Some(Outcome::Passed) => "passed",
                Some(Outcome::Failed(_)) => "failed",
                None => "-",
            };
            row.push_str(&format!("  {cell:<10}"));
        }
        println!("{row}");
    }
    println!();
    for (name, res) in columns {
        let passed = res.values().filter(|o| **o == Outcome::Passed).count();
        println!("{name}: {passed} passed, {} failed", res.len() - passed);
    }
    if let Some((_, ours)) = columns.last() {
        for (t, o) in ours {
            if let Outcome::Failed(log) = o {
                println!("  portcullis failed {t}: {log}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_run_sh_lines() {
        let text = "balance/balance-rr.vtc                             passed\n\
                    checks/http-check.vtc                              failed  (/tmp/r/x.log)\n\
                    1 passed, 1 failed\n";
        let m = parse_run_output(text);
        assert_eq!(m.len(), 2);
        assert_eq!(m["balance/balance-rr.vtc"], Outcome::Passed);
        assert_eq!(
            m["checks/http-check.vtc"],
            Outcome::Failed("/tmp/r/x.log".into())
        );
    }
}
