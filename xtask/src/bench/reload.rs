//! The reload workload (issue #7): hitless `-x <admin.sock> -sf <old pid>` reloads while two
//! open-loop clients run, the same script against HAProxy and portcullis.
//!
//! Per repetition: a fresh proxy whose configuration is the bench's plus an admin socket with
//! `expose-fd listeners`; the keep-alive `rate` client and the one-request-per-connection
//! `rate-close` client for the run; [`reloads`] reloads evenly spaced inside it, each a new
//! process started with the first one's own command line (read from /proc, so whatever options
//! a target has are kept) plus `-x <sock> -sf <current pid>`, pinned like the proxy.
//!
//! "Reload → accepting" is the time from spawning the new process until the admin socket path
//! answers `show info` with the new process's `Pid:` (asked every millisecond). The new process
//! takes that socket over with the listeners (HAProxy passes its stats socket along with them),
//! and answers it from the loop that accepts on them; until then the old process answers.
//!
//! Every old process must exit once drained (after the clients stop at the latest); the last
//! one stays as the target's process. A reload that never answers, or an old process that
//! does not exit, fails the repetition.

use super::report::{Better, Cell, Stat, number};
use super::{
    Env, LOAD_CORE, PROXY_CORE, Proc, Target, TargetKind, last_line, parse, pinned, spawn_logged,
    start, start_with,
};
use crate::util::{Result, show};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub const METRICS: &[(&str, Better)] = &[
    ("failed requests", Better::Lower),
    ("p99 ms during reloads", Better::Lower),
    ("reload → accepting ms", Better::Lower),
];

/// The keep-alive client: connections and requests per second (far below either proxy's
/// capacity, so latency shows the reloads, not saturation).
const KA_CONNS: usize = 32;
const KA_RATE: u32 = 2000;
/// The one-request-per-connection client.
const CLOSE_CONNS: usize = 4;
const CLOSE_RATE: u32 = 200;
/// The load clients start sending this long after they are spawned (see `load.rs`).
const CLIENT_DELAY: Duration = Duration::from_millis(50);
const ACCEPT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long old processes may take to exit once the clients have stopped.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Direct has nothing to reload; nginx runs here with `master_process off`, which has no
/// `nginx -s reload`.
pub fn unavailable(kind: TargetKind) -> Option<Cell> {
    match kind {
        TargetKind::Direct => Some(Cell::NotApplicable),
        TargetKind::Nginx => Some(Cell::Skipped(
            "the bench runs nginx with master_process off: no `nginx -s reload`".into(),
        )),
        _ => None,
    }
}

/// Reloads in a run of `secs` seconds: one per second, at least 2.
pub fn reloads(secs: u64) -> usize {
    secs.max(2) as usize
}

/// When each reload is due from the start of the load: evenly spaced, none at either end.
pub fn schedule(secs: u64) -> Vec<Duration> {
    let n = reloads(secs);
    (1..=n)
        .map(|k| Duration::from_secs_f64(secs as f64 * k as f64 / (n + 1) as f64))
        .collect()
}

pub fn title(secs: u64) -> String {
    format!(
        "Reload under load ({} reloads in {secs} s; {KA_RATE} req/s keep-alive + {CLOSE_RATE} req/s one per connection)",
        reloads(secs)
    )
}

/// The method line of the report.
pub fn method() -> String {
    format!(
        "reload: no warm-up; per repetition a fresh proxy (the same config plus `stats socket … \
         level admin expose-fd listeners`), 1 reload per second of the run (≥ 2) as `-x <sock> -sf <pid>` \
         with the first process's command line, pinned like the proxy; xtask open-loop clients \
         for the whole run: {KA_CONNS} keep-alive connections at {KA_RATE} req/s (p99 from each \
         request's due time) + {CLOSE_CONNS} threads at {CLOSE_RATE} req/s, one request per \
         connection; failed requests = refused connects + requests closed or reset without a \
         whole 200 (a `Connection: close` answer is no failure); reload → accepting = spawn of \
         the new process until `show info` on the admin socket answers with its Pid (median)"
    )
}

/// The `Pid:` line of `show info` (HAProxy and portcullis print it alike).
pub fn info_pid(text: &str) -> Option<u32> {
    text.lines()
        .find_map(|l| l.strip_prefix("Pid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// /proc/<pid>/cmdline: NUL-separated arguments.
pub fn cmdline(raw: &[u8]) -> Vec<String> {
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect()
}

/// The new process's arguments: the first one's (without argv[0]), minus any earlier
/// `-x`/`-sf`, plus `-x <sock> -sf <old>` last (HAProxy reads pids after `-sf` to the end).
pub fn reload_args(first: &[String], sock: &Path, old: u32) -> Vec<String> {
    let args = first.get(1..).unwrap_or_default();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        match a.as_str() {
            "-x" => i += 1,
            // Their pids run to the next option.
            "-sf" | "-st" => {
                while args.get(i).is_some_and(|p| p.parse::<u32>().is_ok()) {
                    i += 1;
                }
            }
            _ => out.push(a.clone()),
        }
    }
    out.extend([
        "-x".to_string(),
        sock.display().to_string(),
        "-sf".to_string(),
        old.to_string(),
    ]);
    out
}

/// The failure causes on a `rate` result line, for the progress output:
/// `3 dropped, 1 refused` (none: empty).
pub fn causes(text: &str) -> String {
    let Some(line) = text.lines().rev().find(|l| l.starts_with("ops=")) else {
        return String::new();
    };
    let parts: Vec<String> = line
        .split_whitespace()
        .filter_map(|w| w.split_once('='))
        .filter(|(k, v)| matches!(*k, "refused" | "dropped" | "status") && *v != "0")
        .map(|(k, v)| match k {
            "status" => format!("{v} non-200"),
            _ => format!("{v} {k}"),
        })
        .collect();
    parts.join(", ")
}

/// The median of `v`; 0 when empty.
fn median(v: &[f64]) -> f64 {
    Stat {
        samples: v.to_vec(),
        errors: 0,
    }
    .median()
    .unwrap_or(0.0)
}

/// `show info` on the admin socket: the answering process's pid.
fn show_info_pid(sock: &Path) -> Option<u32> {
    let mut s = UnixStream::connect(sock).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    s.write_all(b"show info\n").ok()?;
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    info_pid(&out)
}

/// Waits until `sock` answers `show info` with `pid`, or `child` exits, or a timeout.
fn wait_answering(sock: &Path, pid: u32, child: &mut Proc) -> Result {
    let deadline = Instant::now() + ACCEPT_TIMEOUT;
    loop {
        if let Ok(Some(st)) = child.0.try_wait() {
            return Err(format!("process {pid} exited ({st})"));
        }
        if show_info_pid(sock) == Some(pid) {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "process {pid} did not answer on {} within {ACCEPT_TIMEOUT:?}",
                sock.display()
            ));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// A process being replaced: when its successor was spawned, and when it was seen gone.
struct Old {
    proc: Proc,
    since: Instant,
    gone: Option<(Duration, std::process::ExitStatus)>,
}

fn reap(old: &mut [Old]) {
    for o in old.iter_mut().filter(|o| o.gone.is_none()) {
        if let Ok(Some(st)) = o.proc.0.try_wait() {
            o.gone = Some((o.since.elapsed(), st));
        }
    }
}

/// Sleeps until `at`, reaping old processes meanwhile.
fn sleep_reaping(at: Instant, old: &mut [Old]) {
    loop {
        reap(old);
        let now = Instant::now();
        if now >= at {
            return;
        }
        std::thread::sleep((at - now).min(Duration::from_millis(10)));
    }
}

/// One repetition against `t`: (failed requests, keep-alive p99 ms, median reload → accepting
/// ms), and no separate error count (failures are the first metric). A failed repetition
/// leaves a freshly started proxy behind for whatever runs next.
pub fn rep(env: &Env, t: &mut Target, rep: usize) -> Result<(Vec<Option<f64>>, u64)> {
    let r = reloads_under_load(env, t, rep);
    if r.is_err() && t.proc.is_none() {
        start(env, t);
    }
    r
}

fn reloads_under_load(env: &Env, t: &mut Target, rep: usize) -> Result<(Vec<Option<f64>>, u64)> {
    let sock = env.dir.join(format!("{}.sock", t.id));
    let _ = std::fs::remove_file(&sock);
    start_with(env, t, Some(&sock));
    if let Some(why) = &t.down {
        return Err(why.clone());
    }
    let mut cur = t.proc.take().ok_or("not running")?;
    let first = cur.0.id();
    let program = std::fs::read_link(format!("/proc/{first}/exe"))
        .map_err(|e| format!("/proc/{first}/exe: {e}"))?;
    let argv = cmdline(
        &std::fs::read(format!("/proc/{first}/cmdline"))
            .map_err(|e| format!("/proc/{first}/cmdline: {e}"))?,
    );
    wait_answering(&sock, first, &mut cur)?;

    let addr = format!("127.0.0.1:{}", t.ports.http);
    let secs = env.secs.to_string();
    let client = |kind: &str, conns: usize, rate: u32| -> Result<(Proc, PathBuf)> {
        let mut c = pinned(LOAD_CORE, &env.load_bin, env.pin);
        c.args(["bench-load", kind, "--addr", &addr, "--conns"]);
        c.args([&conns.to_string(), "--duration", &secs, "--rate"]);
        c.arg(rate.to_string());
        println!("   $ {}", show(&c));
        let out = env.dir.join(format!("{}-{kind}-{rep}.out", t.id));
        Ok((spawn_logged(c, &out)?, out))
    };
    let (mut ka, ka_out) = client("rate", KA_CONNS, KA_RATE)?;
    let (mut close, close_out) = client("rate-close", CLOSE_CONNS, CLOSE_RATE)?;
    let t0 = Instant::now() + CLIENT_DELAY;

    let mut old: Vec<Old> = Vec::new();
    let mut accept_ms = Vec::new();
    for (k, at) in schedule(env.secs).into_iter().enumerate() {
        sleep_reaping(t0 + at, &mut old);
        let pid = cur.0.id();
        let mut c = pinned(PROXY_CORE, &program, env.pin);
        c.args(reload_args(&argv, &sock, pid));
        let log = env.dir.join(format!("{}-reload-{}.log", t.id, k + 1));
        let spawned = Instant::now();
        let mut next = spawn_logged(c, &log)?;
        if let Err(e) = wait_answering(&sock, next.0.id(), &mut next) {
            return Err(format!("reload {}: {e}: {}", k + 1, last_line(&log)));
        }
        accept_ms.push(spawned.elapsed().as_secs_f64() * 1000.0);
        old.push(Old {
            proc: std::mem::replace(&mut cur, next),
            since: spawned,
            gone: None,
        });
    }
    let ka_st = ka.0.wait().map_err(|e| e.to_string())?;
    let close_st = close.0.wait().map_err(|e| e.to_string())?;
    let stopped = Instant::now();
    let read = |st: std::process::ExitStatus, out: &Path| -> Result<(parse::Run, String)> {
        let text = std::fs::read_to_string(out).unwrap_or_default();
        let failed = match causes(&text) {
            c if c.is_empty() => String::new(),
            c => format!(" ({c})"),
        };
        parse::load_line(&text)
            .filter(|_| st.success())
            .map(|r| (r, failed))
            .ok_or_else(|| format!("load client ({st}): {}", last_line(out)))
    };
    let (ka, ka_why) = read(ka_st, &ka_out)?;
    let (close, close_why) = read(close_st, &close_out)?;
    while old.iter().any(|o| o.gone.is_none()) && stopped.elapsed() < DRAIN_TIMEOUT {
        sleep_reaping(Instant::now() + Duration::from_millis(10), &mut old);
    }
    t.proc = Some(cur);

    let shown: Vec<String> = accept_ms.iter().map(|v| format!("{v:.0}")).collect();
    println!("     reload → accepting ms: {}", shown.join(", "));
    let exits: Vec<String> = old
        .iter()
        .map(|o| match &o.gone {
            Some((d, st)) if st.success() => format!("{:.0}", d.as_secs_f64() * 1000.0),
            Some((d, st)) => format!("{:.0} ({st})", d.as_secs_f64() * 1000.0),
            None => "running".into(),
        })
        .collect();
    println!("     old process exit after ms: {}", exits.join(", "));
    let ms = |v: Option<f64>| v.map_or("–".into(), number);
    println!(
        "     keep-alive: {} ok, {} failed{ka_why}, p50 {} / p99 {} / p99.9 {} ms; one per connection: {} ok, {} failed{close_why}, p99 {} ms",
        ka.ops,
        ka.errors,
        ms(ka.p50_ms),
        ms(ka.p99_ms),
        ms(ka.p999_ms),
        close.ops,
        close.errors,
        ms(close.p99_ms)
    );
    let stuck = old.iter().filter(|o| o.gone.is_none()).count();
    if stuck > 0 {
        return Err(format!(
            "{stuck} old process(es) still running {DRAIN_TIMEOUT:?} after the load stopped"
        ));
    }
    let failed = (ka.errors + close.errors) as f64;
    Ok((vec![Some(failed), ka.p99_ms, Some(median(&accept_ms))], 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_from_show_info() {
        let haproxy = "Name: HAProxy\nVersion: 2.6.12-1+deb12u4\nNbproc: 1\nProcess_num: 1\nPid: 12086\nUptime: 0d 0h00m00s\n";
        assert_eq!(info_pid(haproxy), Some(12086));
        assert_eq!(info_pid("Name: portcullis\nPid:  7\n"), Some(7));
        assert_eq!(info_pid("Name: x\nPpid: 3\n"), None);
        assert_eq!(info_pid("Pid: abc\n"), None);
        assert_eq!(info_pid(""), None);
    }

    #[test]
    fn reload_arguments() {
        let first = cmdline(b"/w/portcullis\0-f\0/w/p.cfg\0-db\0--io\0uring\0");
        assert_eq!(
            first,
            ["/w/portcullis", "-f", "/w/p.cfg", "-db", "--io", "uring"]
        );
        assert_eq!(
            reload_args(&first, Path::new("/w/p.sock"), 42),
            [
                "-f",
                "/w/p.cfg",
                "-db",
                "--io",
                "uring",
                "-x",
                "/w/p.sock",
                "-sf",
                "42"
            ]
        );
        // A first process that was itself a reload: its -x/-sf are replaced, not repeated.
        let again =
            cmdline(b"haproxy\x00-f\x00c\x00-x\x00/old.sock\x00-sf\x001\x002\x003\x00-db\x00");
        assert_eq!(
            reload_args(&again, Path::new("/s"), 9),
            ["-f", "c", "-db", "-x", "/s", "-sf", "9"]
        );
    }

    #[test]
    fn reloads_are_spread_inside_the_run() {
        assert_eq!(reloads(1), 2);
        assert_eq!(reloads(10), 10);
        let ms = |s: u64| -> Vec<u128> { schedule(s).iter().map(Duration::as_millis).collect() };
        assert_eq!(ms(1), [333, 666]);
        assert_eq!(ms(3), [750, 1500, 2250]);
        assert_eq!(ms(10).len(), 10);
        assert_eq!(ms(10).first(), Some(&909));
        assert_eq!(ms(10).last(), Some(&9090));
    }

    #[test]
    fn failure_causes() {
        let line = "x\nops=10 secs=1.000 errors=4 p50_us=1 p99_us=2 p999_us=3 refused=1 dropped=3 status=0\n";
        assert_eq!(causes(line), "1 refused, 3 dropped");
        assert_eq!(causes("ops=1 secs=1 errors=2 status=2"), "2 non-200");
        assert_eq!(
            causes("ops=1 secs=1 errors=0 refused=0 dropped=0 status=0"),
            ""
        );
        assert_eq!(causes("no result"), "");
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[5.0, 1.0, 3.0]), 3.0);
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), 2.5);
    }

    #[test]
    fn only_the_proxies_reload() {
        assert_eq!(unavailable(TargetKind::Direct), Some(Cell::NotApplicable));
        assert!(matches!(
            unavailable(TargetKind::Nginx),
            Some(Cell::Skipped(why)) if why.contains("master_process off")
        ));
        assert_eq!(unavailable(TargetKind::Haproxy), None);
        assert_eq!(unavailable(TargetKind::Portcullis("uring")), None);
    }
}
