//! `cargo xtask <command>`: the developer tooling of the workspace.
//!
//! - `setup`: installs what the builds and tests need (idempotent, fast when all is there).
//! - `test`: everything CI runs, in order, failing fast; ends with `N passed, M failed`.
//! - `demo`: the seed config on loopback with fake nodes, until Ctrl-C.
//! - `bench`: portcullis vs HAProxy vs nginx vs direct, same backend and load generators.
//! - `drill`: seed 000's graceful-termination experiment against portcullis and HAProxy.
//! - `regtests`: HAProxy's reg-tests (VTest) with HAProxy and with portcullis, side by side.
//! - `deb`: the Debian package (and its checks).
//! - `fuzz`: the cargo-fuzz targets of `fuzz/` for a bounded time each (docs/fuzzing.md).

// The fake backends are shared with the integration tests.
#[path = "../../tests/support/backend.rs"]
mod backend;
mod bench;
mod churn;
#[path = "../../tests/support/churn.rs"]
mod churn_core;
mod ci;
mod deb;
mod demo;
mod drill;
mod failover;
// The drill's pods, client and log reading are shared with tests/drill.rs.
#[path = "../../tests/support/drill.rs"]
mod drill_core;
mod fuzz;
mod regtests;
mod setup;
mod util;

use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command>

commands:
  setup                 install missing tools (apt packages, nightly rust-src, bpf-linker)
  test                  run what CI runs: setup, fmt, clippy, tests with --io uring then epoll
  test --stress [--runs N]
                        the suite on both engines N times (3) while a spinning thread keeps one
                        core busy
  demo [--haproxy]      run the seed config on loopback against fake nodes (Ctrl-C to stop);
                        --haproxy runs HAProxy on the unstripped config instead
  bench [--quick] [--only W[,W…]] [--duration S] [--reps N] [--release|--debug]
        [--baseline PATH[:LABEL]]
                        every workload through portcullis (uring, epoll), HAProxy, nginx and
                        direct; writes target/bench/report.md, report.json, ratios.svg;
                        --baseline adds another portcullis binary (an earlier build) run like
                        portcullis uring, as the column 'portcullis LABEL uring' (LABEL:
                        baseline), with its ratio to the current build (C)
  drill [--quick] [--net 127.B] [--balancer …] [--mode …] [--redispatch …]
                        seed 000's rolling-restart drill: current vs improved preStop,
                        portcullis and HAProxy side by side (drill --help for all options)
  drill --failover [--balancer portcullis|haproxy|both] [--seconds S]   (root)
                        two LB hosts under keepalived in network namespaces: kill the
                        active proxy under load; failed requests, failover time, rate limit kept
  drill --churn [--quick] [--balancer portcullis|haproxy|both]
                        a controller's rolling update 3 → 6 → 3 pods over the Runtime API
                        (add/del server, set map) under load, portcullis beside HAProxy
  regtests [--release] [--no-haproxy] [--only T[,T…]]
                        HAProxy's reg-tests (VTest, ../shared/tools/regtests) with HAProxy and
                        with portcullis, side by side; fails if one in xtask/regtests-pass.txt fails
  deb [--check] [--install-test] [--binary <path>]
                        build target/deb/portcullis_<version>_<arch>.deb; --check reads it back
                        (contents, conffiles, -c on the stock config, man page, lintian);
                        --install-test (root) installs, runs and purges it
  pgo                   a profile-guided release build, target/pgo/portcullis: instrumented,
                        trained on the bench's HTTP workloads, rebuilt with the profile
                        (xtask/scripts/pgo.sh)
  fuzz [--time S] [--target T[,T…]]
                        every fuzz target of fuzz/ (cargo-fuzz, nightly) for S seconds (default
                        10) on its seeded corpus; fails on a crash (docs/fuzzing.md)";

/// `cargo xtask pgo`: the script does the work (builds, training through `ka-instr.sh`).
fn pgo(rest: &[String]) -> Result<(), String> {
    if !rest.is_empty() {
        return Err(format!("pgo takes no arguments\n{USAGE}"));
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/pgo.sh");
    util::exec(std::process::Command::new("bash").arg(script))
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (cmd, rest) = match args.split_first() {
        Some((c, r)) => (c.as_str(), r),
        None => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match cmd {
        "setup" => setup::run(),
        "test" => ci::run(rest),
        "demo" => demo::run(rest),
        "bench" => bench::run(rest),
        "drill" => drill::run(rest),
        "regtests" => regtests::run(rest),
        "deb" => deb::run(rest),
        "fuzz" => fuzz::run(rest),
        "pgo" => pgo(rest),
        // The bench's own load clients, run as pinned child processes.
        "bench-load" => bench::load::run(rest),
        // The failover drill's client, run inside its client namespace.
        "drill-client" => failover::client(rest),
        "-h" | "--help" | "help" => {
            println!("{USAGE}");
            Ok(())
        }
        other => Err(format!("unknown command '{other}'\n{USAGE}")),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("xtask {cmd}: {msg}");
            ExitCode::FAILURE
        }
    }
}
