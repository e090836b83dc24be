//! The admin-socket side of the `mode tcp` relay tests: `show splice` counters and `show stat`
//! bytes. Needs `backend` and `proxy` from `support/` declared beside it.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;

use super::backend::wait_until;
use super::proxy;

pub fn cli(sock: &Path, cmd: &str) -> String {
    // The listeners accept before the admin socket is bound.
    wait_until(Duration::from_secs(5), || {
        std::os::unix::net::UnixStream::connect(sock).is_ok()
    });
    let mut s = proxy::admin_connect(sock);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// `show splice` as name → value.
pub fn splice(sock: &Path) -> HashMap<String, String> {
    cli(sock, "show splice")
        .lines()
        .filter_map(|l| l.split_once(": "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

pub fn counter(s: &HashMap<String, String>, k: &str) -> u64 {
    s.get(k)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no counter {k} in {s:?}"))
}

/// The counters of `show splice` after the kernel path was checked to be on, once no session is
/// spliced (the harness's probe connection has ended).
pub fn kernel_counters(sock: &Path) -> HashMap<String, String> {
    wait_until(Duration::from_secs(5), || {
        splice(sock).get("ActiveSessions").is_some_and(|v| v == "0")
    });
    let s = splice(sock);
    assert_eq!(
        s.get("Status").map(String::as_str),
        Some("kernel (sockmap splice)"),
        "the kernel path must be available as root: {s:?}"
    );
    s
}

pub fn delta(after: &HashMap<String, String>, before: &HashMap<String, String>, k: &str) -> u64 {
    counter(after, k) - counter(before, k)
}

/// `show stat`'s bin and bout (fields 8 and 9) of `px/sv`.
pub fn stat_bytes(sock: &Path, px: &str, sv: &str) -> (u64, u64) {
    let csv = cli(sock, "show stat");
    let row: Vec<&str> = csv
        .lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f.first() == Some(&px) && f.get(1) == Some(&sv))
        .unwrap_or_else(|| panic!("no {px}/{sv} in {csv}"));
    let n = |i: usize| row[i].parse::<u64>().unwrap_or_else(|_| panic!("{row:?}"));
    (n(8), n(9))
}
