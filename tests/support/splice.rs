//! The admin-socket side of the `mode tcp` relay tests: `show splice` counters and `show stat`
//! bytes. Needs `backend` and `proxy` from `support/` declared beside it.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::backend::{free_port, lo, wait_until};
use super::proxy::{self, Proc, TempDir};

/// Whether the kernel path can be tested here (root: CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON); says
/// why not.
pub fn root() -> bool {
    // SAFETY: no arguments.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        eprintln!(
            "SKIPPED: the kernel path tests need root (CAP_BPF and CAP_NET_ADMIN); euid is {euid}"
        );
        return false;
    }
    true
}

pub struct Setup {
    pub p: Proc,
    pub sock: PathBuf,
    pub port: u16,
    pub _dir: TempDir,
}

/// A `mode tcp` frontend on a fresh port to `server` with `nbthread` workers, `fe`/`be` extra
/// lines in the frontend and the backend.
pub fn start(nbthread: usize, server: SocketAddr, fe: &str, be: &str) -> Setup {
    let dir = TempDir::new("splice");
    let sock = dir.0.join("admin.sock");
    let port = free_port();
    let cfg = format!(
        "global\n    nbthread {nbthread}\n    stats socket {} level admin\n\ndefaults\n    mode tcp\n    log stdout format raw local0\n    option tcplog\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n\nfrontend fe\n    bind 127.0.0.1:{port}\n{fe}    default_backend be\n\nbackend be\n{be}    server srv {server}\n",
        sock.display()
    );
    let p = Proc::portcullis(&cfg, lo(port));
    Setup {
        p,
        sock,
        port,
        _dir: dir,
    }
}

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

/// An echo of 64-byte messages on 127.0.1.`ip`; it shuts its write side at end of stream.
pub fn echo64(ip: u8) -> SocketAddr {
    let echo = TcpListener::bind(SocketAddr::from(([127, 0, 1, ip], 0))).expect("bind");
    let addr = echo.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in echo.incoming() {
            let Ok(mut s) = s else { return };
            std::thread::spawn(move || {
                let mut b = [0u8; 64];
                while s.read_exact(&mut b).is_ok() {
                    if s.write_all(&b).is_err() {
                        return;
                    }
                }
                let _ = s.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}
