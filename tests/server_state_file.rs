//! `server-state-file` / `load-server-state-from-file global|local` / `server-state-file-name`:
//! a first process is changed on its admin socket (`disable server`, `set weight`, `set server
//! … addr … port`, drain), its `show servers state` is saved, and a second
//! process starts from the files. Compared with HAProxy 2.6 doing the same: `show servers state`
//! (but the seconds since the last change) and `show stat`'s state columns; and portcullis
//! starting from HAProxy's files gives HAProxy's result.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::path::Path;

use backend::{free_port, lo};
use proxy::{Proc, TempDir, admin_cli};

fn config(port: u16, sock: &Path, dir: &Path) -> String {
    format!(
        "global\n    stats socket {sock} level admin\n    server-state-base {dir}\n    server-state-file global.state\n\n\
         defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n    load-server-state-from-file global\n\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\n\
         backend be\n    server s1 127.0.0.1:9001\n    server s2 127.0.0.1:9002 weight 10\n    server s3 127.0.0.1:9003\n    \
         server s5 127.0.0.1:9005\n\n\
         backend loc\n    load-server-state-from-file local\n    server-state-file-name loc.state\n    \
         server l1 127.0.0.1:9011\n    server l2 127.0.0.1:9012 weight 3\n\n\
         backend none\n    load-server-state-from-file none\n    server n1 127.0.0.1:9021\n",
        sock = sock.display(),
        dir = dir.display(),
    )
}

fn start(haproxy: bool, cfg: &str, port: u16) -> Option<Proc> {
    if haproxy {
        Proc::haproxy(cfg, lo(port))
    } else {
        Some(Proc::portcullis(cfg, lo(port)))
    }
}

/// `show servers state` without `srv_time_since_last_change` (field 10) and `srv_check_state`
/// (field 14: portcullis shows a server without checks put in maintenance as paused, HAProxy
/// not, in the first process already), and the state columns of `show stat`.
fn observe(sock: &Path) -> (Vec<String>, Vec<String>) {
    let state = admin_cli(sock, "show servers state")
        .lines()
        .map(|l| {
            let mut f: Vec<&str> = l.split(' ').collect();
            if f.len() > 13 && !l.starts_with('#') {
                f[9] = "T";
                f[13] = "C";
            }
            f.join(" ")
        })
        .collect();
    let stat = admin_cli(sock, "show stat");
    let mut lines = stat.lines();
    let head: Vec<&str> = lines
        .next()
        .unwrap_or("")
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let cols: Vec<usize> = [
        "pxname", "svname", "status", "weight", "act", "bck", "chkdown",
    ]
    .iter()
    .filter_map(|c| head.iter().position(|h| h == c))
    .collect();
    let rows = lines
        .map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            cols.iter()
                .map(|i| f.get(*i).copied().unwrap_or(""))
                .collect::<Vec<_>>()
                .join(",")
        })
        .collect();
    (state, rows)
}

/// Runs the first process (`first`), saves its state into `dir`, then the second (`second`)
/// from the files: what the second one shows.
fn run(first: bool, second: bool, dir: &Path) -> Option<(Vec<String>, Vec<String>)> {
    let port = free_port();
    let sock = dir.join("admin.sock");
    let cfg = config(port, &sock, dir);
    {
        let p = start(first, &cfg, port)?;
        for cmd in [
            "disable server be/s1",
            "set weight be/s2 5",
            "set server be/s3 addr 127.0.0.9 port 9999",
            "set server be/s5 state drain",
            "set weight loc/l2 2",
            "disable server loc/l1",
            "disable server none/n1",
        ] {
            let r = admin_cli(&sock, cmd);
            assert!(r.trim().is_empty() || r.contains("changed"), "{cmd}: {r}");
        }
        std::fs::write(
            dir.join("global.state"),
            admin_cli(&sock, "show servers state"),
        )
        .unwrap();
        std::fs::write(
            dir.join("loc.state"),
            admin_cli(&sock, "show servers state loc"),
        )
        .unwrap();
        drop(p);
    }
    let _ = std::fs::remove_file(&sock);
    let p = start(second, &cfg, port)?;
    let seen = observe(&sock);
    drop(p);
    Some(seen)
}

#[test]
fn servers_start_from_the_saved_state_as_haproxy() {
    let dir = TempDir::new("srv-state");
    let ours = run(false, false, &dir.0).expect("portcullis");
    let (state, stat) = &ours;
    // The saved changes are back: s1 and l1 in maintenance, s2's weight, s5 draining, s3's port (its address is the configuration's: only a name
    // resolved with `init-addr last` takes the saved one); `none` ignores the file.
    let line = |name: &str| {
        state
            .iter()
            .find(|l| l.split(' ').nth(3) == Some(name))
            .cloned()
            .unwrap_or_default()
    };
    assert!(line("s1").contains(" 127.0.0.1 0 1 1 1 "), "{state:?}");
    assert!(line("s2").contains(" 127.0.0.1 2 0 5 10 "), "{state:?}");
    assert!(line("s3").contains(" 9999 "), "{state:?}");
    assert!(line("n1").contains(" 127.0.0.1 2 0 1 1 "), "{state:?}");
    assert!(
        stat.iter().any(|r| r.starts_with("be,s5,DRAIN")),
        "{stat:?}"
    );
    let hdir = TempDir::new("srv-state-h");
    let Some(theirs) = run(true, true, &hdir.0) else {
        return;
    };
    assert_eq!(ours, theirs);
    // Starting from HAProxy's files gives HAProxy's state.
    let xdir = TempDir::new("srv-state-x");
    let port = free_port();
    let sock = xdir.0.join("admin.sock");
    for f in ["global.state", "loc.state"] {
        std::fs::copy(hdir.0.join(f), xdir.0.join(f)).unwrap();
    }
    let p = Proc::portcullis(&config(port, &sock, &xdir.0), lo(port));
    assert_eq!(observe(&sock), theirs);
    drop(p);
}

/// A missing global file, a corrupted local one: HAProxy's warnings, and the servers start
/// from the configuration.
#[test]
fn unreadable_files_warn_and_change_nothing() {
    let dir = TempDir::new("srv-state-bad");
    std::fs::write(dir.0.join("loc.state"), "1\nbe 1 l1\n").unwrap();
    let port = free_port();
    let sock = dir.0.join("admin.sock");
    let p = Proc::portcullis(&config(port, &sock, &dir.0), lo(port));
    let (state, _) = observe(&sock);
    assert!(
        state.iter().any(|l| l.contains(" l2 127.0.0.1 2 0 3 3 ")),
        "{state:?}"
    );
    let err = p.stderr.lock().unwrap().join("\n");
    let global = format!(
        "config: Can't open global server state file '{}/global.state': No such file or directory",
        dir.0.display()
    );
    let local = format!(
        "Proxy 'loc': corrupted server state file '{}/loc.state' at line 1.",
        dir.0.display()
    );
    assert!(err.contains(&global) && err.contains(&local), "{err}");
}

/// `-c`: `load-server-state-from-file global` without `server-state-file` is HAProxy's warning.
#[test]
fn check_warns_about_a_missing_global_file_as_haproxy() {
    let dir = TempDir::new("srv-state-c");
    let cfg = dir.0.join("w.cfg");
    std::fs::write(
        &cfg,
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n    \
         load-server-state-from-file global\nfrontend fe\n    bind 127.0.0.1:1\n    default_backend be\n\
         backend be\n    server-state-file-name\n    server s1 127.0.0.1:9001\n",
    )
    .unwrap();
    let warnings = |bin: &str| {
        let out = std::process::Command::new(bin)
            .arg("-c")
            .arg("-f")
            .arg(&cfg)
            .output()
            .expect("run -c");
        assert!(out.status.success(), "{bin}: {out:?}");
        String::from_utf8_lossy(&out.stderr)
            .lines()
            .filter(|l| l.starts_with("[WARNING]"))
            .map(|l| l.split_once(" : ").map_or(l, |(_, m)| m).to_string())
            .collect::<Vec<_>>()
    };
    let ours = warnings(env!("CARGO_BIN_EXE_portcullis"));
    assert_eq!(
        ours,
        [
            "config : backend 'be' configured to load server state file from global section \
          'server-state-file' directive. Unfortunately, 'server-state-file' is not set!"
        ]
    );
    if std::path::Path::new("/usr/sbin/haproxy").exists() {
        assert_eq!(ours, warnings("/usr/sbin/haproxy"));
    }
}
