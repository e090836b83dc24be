//! The master process of `-W`: its CLI on an inherited descriptor (`-S fd@N`, as VTest starts
//! HAProxy), `@<n>` / `@!<pid>` forwarding to a worker, its exit code after SIGINT, and the
//! alerts of a configuration it refuses.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use backend::free_port;
use proxy::{TempDir, io_engine};

fn ask(path: &std::path::Path, cmd: &str) -> String {
    let mut s = UnixStream::connect(path).expect("master CLI");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn master_cli_on_an_inherited_fd_forwards_and_sigint_exits_130() {
    let dir = TempDir::new("mcli-fd");
    let sock = dir.0.join("m.sock");
    let l = UnixListener::bind(&sock).expect("bind");
    let fd = l.as_raw_fd();
    let port = free_port();
    let cfg = dir.0.join("cfg");
    std::fs::write(
        &cfg,
        format!(
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\nfrontend fe\n    bind 127.0.0.1:{port}\n"
        ),
    )
    .unwrap();
    let mut c = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    c.args([
        "--io",
        &io_engine(),
        "-d",
        "-W",
        "-S",
        &format!("fd@{fd}"),
        "-f",
    ])
    .arg(&cfg)
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    // SAFETY: only async-signal-safe calls between fork and exec: the listener crosses the exec
    // (std opens it close-on-exec) and SIGINT is not ignored by the child.
    unsafe {
        c.pre_exec(move || {
            let flags = libc::fcntl(fd, libc::F_GETFD);
            libc::fcntl(fd, libc::F_SETFD, flags & !libc::FD_CLOEXEC);
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let mut child = c.spawn().expect("start the master");
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut procs = String::new();
    while Instant::now() < deadline {
        procs = ask(&sock, "show proc");
        if procs.contains(" worker ") {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let worker: u32 = procs
        .lines()
        .find(|l| l.contains(" worker "))
        .and_then(|l| l.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("no worker in {procs:?}"));
    // The worker's own CLI answers through the master.
    let info = ask(&sock, "@1 show info");
    assert!(info.contains(&format!("\nPid: {worker}\n")), "{info}");
    assert!(ask(&sock, &format!("@!{worker} show info")).contains(&format!("\nPid: {worker}\n")));
    assert_eq!(
        ask(&sock, "@!1 show info"),
        "Can't find the target PID matching the prefix '@!1'\n"
    );
    assert!(ask(&sock, "@1; show info").contains(&format!("\nPid: {worker}\n")));
    assert!(ask(&sock, "help").starts_with("The following commands are valid at this level:\n"));
    // SAFETY: signalling our own child.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let rc = child.wait().expect("master exits");
    assert_eq!(
        rc.code(),
        Some(130),
        "HAProxy's master exits 130 after SIGINT"
    );
    drop(l);
}

#[test]
fn master_refusing_a_configuration_says_why() {
    let dir = TempDir::new("mcli-bad");
    let cfg = dir.0.join("bad.cfg");
    std::fs::write(&cfg, "global\n    foo bar\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["-d", "-W", "-f"])
        .arg(&cfg)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("[ALERT]") && err.contains(":2] : unknown keyword 'foo' in 'global' section"),
        "{err}"
    );
}
