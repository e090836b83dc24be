//! Process setup with the real binary, as root, each instance in a fresh network namespace that
//! has nothing but `lo`: Debian's stock `haproxy.cfg` (one frontend added, its admin socket moved
//! to a private directory) runs its `-W` worker as user `haproxy` chrooted to
//! `/var/lib/haproxy`, answers with the page of `/etc/haproxy/errors/503.http` byte for byte as
//! HAProxy 2.6 sends it, and does all that again after master reloads.

#[path = "support/netns.rs"]
mod netns;
#[path = "support/shared.rs"]
mod shared;

use netns::{in_netns, spawn_isolated};

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PORT: u16 = 18480;

struct Tmp(PathBuf);

impl Tmp {
    fn new(tag: &str) -> Tmp {
        let d = std::env::temp_dir().join(format!("portcullis-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Tmp(d)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A child killed (SIGTERM, then SIGKILL) when the test ends, however it ends.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(self.0.id() as i32, libc::SIGTERM) };
        let t = Instant::now();
        while t.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.0.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// One request on a fresh connection; everything the server sends until it closes (or 3 s).
fn get(port: u16) -> Vec<u8> {
    let t = Instant::now();
    let mut s = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(e) if t.elapsed() > Duration::from_secs(10) => panic!("connect: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    s.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

fn cli(path: &Path, cmd: &str) -> String {
    let mut s = UnixStream::connect(path).expect("CLI socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

fn workers(show_proc: &str) -> Vec<u32> {
    show_proc
        .lines()
        .skip_while(|l| *l != "# workers")
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

fn wait_until(limit: Duration, mut f: impl FnMut() -> bool) -> bool {
    let t = Instant::now();
    while t.elapsed() < limit {
        if f() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    false
}

/// The real uid of `pid` (`/proc/<pid>/status`).
fn uid_of(pid: u32) -> Option<u32> {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    st.lines()
        .find_map(|l| l.strip_prefix("Uid:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The preconditions: root, Debian's error pages, HAProxy, and a `haproxy` user (created here
/// when missing, as the Debian package does).
fn ready() -> Option<u32> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("notice: not root, process test skipped");
        return None;
    }
    if !Path::new("/etc/haproxy/errors/503.http").exists()
        || !Path::new("/usr/sbin/haproxy").exists()
    {
        eprintln!("notice: no HAProxy/Debian error pages, process test skipped");
        return None;
    }
    if nix::unistd::User::from_name("haproxy")
        .ok()
        .flatten()
        .is_none()
    {
        let st = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--home-dir",
                "/var/lib/haproxy",
            ])
            .args(["--shell", "/usr/sbin/nologin", "haproxy"])
            .status()
            .expect("useradd");
        assert!(st.success(), "useradd haproxy");
    }
    std::fs::create_dir_all("/var/lib/haproxy").unwrap();
    nix::unistd::User::from_name("haproxy")
        .ok()
        .flatten()
        .map(|u| u.uid.as_raw())
}

/// Debian's file, its admin socket in `dir`, plus a frontend whose backend has no server (so
/// every request gets the 503 page).
fn debian_config(dir: &Path, port: u16) -> PathBuf {
    let stock =
        std::fs::read_to_string(shared::shared_path("data/real-configs/01-debian-stock.cfg"))
            .expect("01-debian-stock.cfg");
    let sock = dir.join("admin.sock");
    let text = stock.replace("/run/haproxy/admin.sock", &sock.display().to_string())
        + &format!(
            "\nfrontend web\n\tbind 127.0.0.1:{port}\n\tdefault_backend nothing\n\nbackend nothing\n"
        );
    let path = dir.join("haproxy.cfg");
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn debian_stock_worker_is_unprivileged_chrooted_and_reloads() {
    let Some(uid) = ready() else { return };
    let dir = Tmp::new("process");
    let cfg = debian_config(&dir.0, PORT);
    let mcli = dir.0.join("master.sock");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    // The engine under test (`PORTCULLIS_IO`, as the other integration tests).
    let io = std::env::var("PORTCULLIS_IO").unwrap_or_else(|_| "auto".into());
    cmd.args(["--io", &io, "-W", "-db", "-S"])
        .arg(&mcli)
        .arg("-f")
        .arg(&cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let master = Proc(spawn_isolated(cmd));
    let mpid = master.0.id();

    // What HAProxy 2.6 sends for the same file, in a namespace of its own.
    let hdir = Tmp::new("process-haproxy");
    let hcfg = debian_config(&hdir.0, PORT);
    let mut h = Command::new("/usr/sbin/haproxy");
    h.args(["-db", "-f"])
        .arg(&hcfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let hap = Proc(spawn_isolated(h));
    let want = in_netns(hap.0.id(), || get(PORT));
    drop(hap);
    assert!(
        want.starts_with(b"HTTP/1.0 503 "),
        "{}",
        String::from_utf8_lossy(&want)
    );

    let mut seen: Vec<u32> = Vec::new();
    for round in 0..3 {
        if round > 0 {
            assert_eq!(cli(&mcli, "reload"), "");
        }
        let mut worker = 0;
        assert!(
            wait_until(Duration::from_secs(20), || {
                if !mcli.exists() {
                    return false;
                }
                let w = workers(&cli(&mcli, "show proc"));
                match w.as_slice() {
                    [p] if !seen.contains(p) => {
                        worker = *p;
                        true
                    }
                    _ => false,
                }
            }),
            "round {round}: no new worker"
        );
        seen.push(worker);
        // Privileges are dropped once the worker is set up.
        assert!(
            wait_until(Duration::from_secs(10), || uid_of(worker) == Some(uid)),
            "round {round}: worker {worker} runs as uid {:?}",
            uid_of(worker)
        );
        assert_eq!(
            std::fs::read_link(format!("/proc/{worker}/root")).unwrap(),
            PathBuf::from("/var/lib/haproxy")
        );
        // The master stays root: it re-executes the next worker.
        assert_eq!(uid_of(mpid), Some(0));
        let got = in_netns(mpid, || get(PORT));
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "round {round}"
        );
        // The admin socket was bound before the chroot and still answers.
        let info = cli(&dir.0.join("admin.sock"), "show info");
        assert!(info.contains(&format!("Pid: {worker}")), "{info}");
    }
}
