//! Hitless reload with the real binary: `-x <admin.sock> -sf <old pid>` under continuous load
//! (keep-alive and one-request-per-connection clients) must fail no request; a broken
//! configuration leaves the old process serving; `_getsocks` as HAProxy 2.6 answers it; HAProxy
//! itself as the old or the new process.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use backend::{HttpNode, HttpOpts, free_port, lo, wait_until};
use proxy::{TempDir, io_engine, read_response};

const HAPROXY: &str = "/usr/sbin/haproxy";

fn node() -> HttpNode {
    HttpNode::start(
        SocketAddr::from(([127, 0, 1, 111], 0)),
        HttpOpts::named("reload"),
    )
    .expect("node")
}

fn cfg(port: u16, sock: &Path, server: SocketAddr, nbthread: u32, expose: bool) -> String {
    format!(
        "global\n    nbthread {nbthread}\n    stats socket \"{}\" mode 600 level admin{}\n    hard-stop-after 20s\n\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    server s1 {server}\n",
        sock.display(),
        if expose { " expose-fd listeners" } else { "" }
    )
}

/// A portcullis process with its stderr in a file (shown when an assertion fails) and its stdout
/// (`log stdout`) in another.
struct Instance {
    child: Child,
    log: PathBuf,
    out: PathBuf,
}

impl Instance {
    fn start(dir: &Path, tag: &str, cfg: &Path, extra: &[String]) -> Instance {
        let log = dir.join(format!("{tag}.log"));
        let out = dir.join(format!("{tag}.out"));
        let child = Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(["--io", &io_engine(), "-db", "-f"])
            .arg(cfg)
            .args(extra)
            .stdout(std::fs::File::create(&out).expect("stdout file"))
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("spawn portcullis");
        Instance { child, log, out }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn stdout(&self) -> String {
        std::fs::read_to_string(&self.out).unwrap_or_default()
    }

    /// Waits for the process to exit; None if it still runs after `timeout`.
    fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        wait_child(&mut self.child, timeout)
    }

    fn running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn wait_listening(addr: SocketAddr) {
    assert!(
        wait_until(Duration::from_secs(10), || TcpStream::connect(addr).is_ok()),
        "nothing listens on {addr}"
    );
}

/// The frontend accepts and the admin socket (bound after the listeners) answers.
fn wait_ready(addr: SocketAddr, sock: &Path) {
    wait_listening(addr);
    assert!(
        wait_until(Duration::from_secs(10), || UnixStream::connect(sock)
            .is_ok()),
        "no admin socket at {}",
        sock.display()
    );
}

fn wait_child(child: &mut Child, timeout: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + timeout;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            return Some(st);
        }
        if Instant::now() > deadline {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn get_ok(addr: SocketAddr) -> bool {
    let Ok(mut s) = TcpStream::connect(addr) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    if s.write_all(b"GET /probe HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    read_response(&mut s, false).is_some_and(|r| r.status == 200)
}

/// A client connection of the load: plain TCP or TLS (rustls) to a `bind … ssl crt` frontend.
enum Conn {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Conn {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.read(buf),
            Conn::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Conn {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Conn::Plain(s) => s.write(buf),
            Conn::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Conn::Plain(s) => s.flush(),
            Conn::Tls(s) => s.flush(),
        }
    }
}

/// Where a load client connects: plain, or TLS with this client configuration.
#[derive(Clone)]
enum Target {
    Plain(SocketAddr),
    Tls(SocketAddr, Arc<rustls::ClientConfig>),
}

impl Target {
    fn connect(&self) -> std::io::Result<Conn> {
        let addr = match self {
            Target::Plain(a) | Target::Tls(a, _) => *a,
        };
        let s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        match self {
            Target::Plain(_) => Ok(Conn::Plain(s)),
            Target::Tls(_, cfg) => {
                let name = rustls::pki_types::ServerName::try_from("example.local")
                    .map_err(std::io::Error::other)?;
                let c = rustls::ClientConnection::new(Arc::clone(cfg), name)
                    .map_err(std::io::Error::other)?;
                Ok(Conn::Tls(Box::new(rustls::StreamOwned::new(c, s))))
            }
        }
    }
}

/// A rustls client configuration trusting only `der` (HTTP/1.1 by ALPN).
fn tls_config(der: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(der.to_vec()))
        .unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(cfg)
}

/// One response (the node always sends `content-length`): (status line and headers, body).
fn read_reply(s: &mut impl Read) -> Result<(String, Vec<u8>), String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            Ok(_) if head.is_empty() => return Err("no response".into()),
            Ok(_) => return Err("response head cut".into()),
            Err(e) => return Err(format!("read: {e}")),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let len = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse::<usize>().ok())?
        })
        .ok_or_else(|| format!("no content-length: {head}"))?;
    let mut body = vec![0u8; len];
    s.read_exact(&mut body)
        .map_err(|e| format!("body cut ({e}): {head}"))?;
    Ok((head, body))
}

/// Client threads sending requests until stopped: every request must get a whole 200.
struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicU64>,
    failed: Arc<AtomicU64>,
    errors: Arc<std::sync::Mutex<Vec<String>>>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    fn start(addr: SocketAddr, keep_alive: usize, one_shot: usize) -> Load {
        Load::start_with(Target::Plain(addr), keep_alive, one_shot, None)
    }

    /// `keep_alive` and `one_shot` clients to `plain`, and `tls.1` keep-alive clients to `tls.0`.
    fn start_with(
        plain: Target,
        keep_alive: usize,
        one_shot: usize,
        tls: Option<(Target, usize)>,
    ) -> Load {
        let load = Load {
            stop: Arc::new(AtomicBool::new(false)),
            ok: Arc::new(AtomicU64::new(0)),
            failed: Arc::new(AtomicU64::new(0)),
            errors: Arc::new(std::sync::Mutex::new(Vec::new())),
            threads: Vec::new(),
        };
        let mut clients: Vec<(Target, bool, &str)> = Vec::new();
        clients.extend((0..keep_alive).map(|_| (plain.clone(), true, "ka")));
        clients.extend((0..one_shot).map(|_| (plain.clone(), false, "once")));
        if let Some((t, n)) = tls {
            clients.extend((0..n).map(|_| (t.clone(), true, "tls")));
        }
        let mut threads = Vec::new();
        for (i, (target, ka, kind)) in clients.into_iter().enumerate() {
            let (stop, ok, failed, errors) = (
                Arc::clone(&load.stop),
                Arc::clone(&load.ok),
                Arc::clone(&load.failed),
                Arc::clone(&load.errors),
            );
            threads.push(std::thread::spawn(move || {
                let mut conn: Option<Conn> = None;
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    n += 1;
                    let fail = |what: String| {
                        failed.fetch_add(1, Ordering::Relaxed);
                        errors.lock().unwrap_or_else(|p| p.into_inner()).push(what);
                    };
                    let reused = conn.is_some();
                    let mut s = match conn.take() {
                        Some(s) => s,
                        None => match target.connect() {
                            Ok(s) => s,
                            Err(e) => {
                                fail(format!("client {i} ({kind}) request {n}: connect: {e}"));
                                continue;
                            }
                        },
                    };
                    let path = format!("/{kind}/{i}/{n}");
                    let req = if ka {
                        format!("GET {path} HTTP/1.1\r\nHost: t\r\n\r\n")
                    } else {
                        format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
                    };
                    if let Err(e) = s.write_all(req.as_bytes()).and_then(|()| s.flush()) {
                        fail(format!(
                            "client {i} ({kind}) request {n} (reused {reused}): write: {e}"
                        ));
                        continue;
                    }
                    match read_reply(&mut s) {
                        Ok((head, body))
                            if head.starts_with("HTTP/1.1 200 ")
                                && body.ends_with(format!("path={path}\n").as_bytes()) =>
                        {
                            ok.fetch_add(1, Ordering::Relaxed);
                            let closing = head.lines().any(|l| {
                                l.split_once(':').is_some_and(|(k, v)| {
                                    k.eq_ignore_ascii_case("connection")
                                        && v.trim().eq_ignore_ascii_case("close")
                                })
                            });
                            if ka && !closing {
                                conn = Some(s);
                            }
                        }
                        Ok((head, _)) => fail(format!("client {i} ({kind}) request {n}: {head}")),
                        Err(e) => fail(format!(
                            "client {i} ({kind}) request {n} (reused {reused}): {e}"
                        )),
                    }
                }
            }));
        }
        Load { threads, ..load }
    }

    fn ok(&self) -> u64 {
        self.ok.load(Ordering::Relaxed)
    }

    /// Stops the clients; returns (ok, failed, the first failures).
    fn finish(self) -> (u64, u64, Vec<String>) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            let _ = t.join();
        }
        let errs = self
            .errors
            .lock()
            .unwrap()
            .iter()
            .take(10)
            .cloned()
            .collect();
        (
            self.ok.load(Ordering::Relaxed),
            self.failed.load(Ordering::Relaxed),
            errs,
        )
    }
}

/// Waits until the load has made `more` successful requests beyond now.
fn progress(load: &Load, more: u64) {
    let base = load.ok();
    assert!(
        wait_until(Duration::from_secs(20), || load.ok() >= base + more),
        "load stalled at {} requests",
        load.ok()
    );
}

#[test]
fn ten_reloads_under_load_fail_no_request() {
    let n = node();
    let dir = TempDir::new("reload");
    let sock = dir.0.join("admin.sock");
    let port = free_port();
    let path = dir.0.join("p.cfg");
    std::fs::write(&path, cfg(port, &sock, n.addr(), 2, true)).unwrap();
    let mut cur = Instance::start(&dir.0, "p0", &path, &[]);
    wait_ready(lo(port), &sock);
    let load = Load::start(lo(port), 3, 2);
    progress(&load, 200);
    for i in 1..=10 {
        let args = vec![
            "-x".to_string(),
            sock.display().to_string(),
            "-sf".to_string(),
            cur.pid().to_string(),
        ];
        let mut next = Instance::start(&dir.0, &format!("p{i}"), &path, &args);
        let st = cur.wait_exit(Duration::from_secs(20));
        assert!(
            st.is_some_and(|s| s.success()),
            "reload {i}: old process did not finish ({st:?}): {}\nnew: {}",
            cur.stderr(),
            next.stderr()
        );
        assert!(
            next.running(),
            "reload {i}: new process died: {}",
            next.stderr()
        );
        // The new process carries the load alone now.
        let base = load.ok();
        if !wait_until(Duration::from_secs(20), || load.ok() >= base + 100) {
            let ss = Command::new("ss").arg("-tnpo").output().unwrap();
            let ss = String::from_utf8_lossy(&ss.stdout)
                .lines()
                .filter(|l| l.contains(&port.to_string()))
                .collect::<Vec<_>>()
                .join("\n");
            panic!(
                "reload {i}: load stalled at {}: {ss}\nnew: {}\nerrors: {:?}",
                load.ok(),
                next.stderr(),
                load.errors.lock().unwrap_or_else(|p| p.into_inner())
            );
        }
        std::thread::sleep(Duration::from_millis(100));
        cur = next;
    }
    let (ok, failed, errs) = load.finish();
    assert_eq!(failed, 0, "{ok} ok, {failed} failed: {errs:#?}");
    assert!(ok > 1000, "only {ok} requests");
    assert!(get_ok(lo(port)));
    assert!(cur.running());
}

#[test]
fn broken_config_on_reload_keeps_the_old_process_serving() {
    let n = node();
    let dir = TempDir::new("reload-bad");
    let sock = dir.0.join("admin.sock");
    let port = free_port();
    let good = dir.0.join("good.cfg");
    std::fs::write(&good, cfg(port, &sock, n.addr(), 1, true)).unwrap();
    let mut old = Instance::start(&dir.0, "old", &good, &[]);
    wait_ready(lo(port), &sock);
    let bad = dir.0.join("bad.cfg");
    std::fs::write(
        &bad,
        cfg(port, &sock, n.addr(), 1, true) + "    no-such-keyword here\n",
    )
    .unwrap();
    let args = vec![
        "-x".to_string(),
        sock.display().to_string(),
        "-sf".to_string(),
        old.pid().to_string(),
    ];
    let mut new = Instance::start(&dir.0, "new", &bad, &args);
    let st = new
        .wait_exit(Duration::from_secs(10))
        .expect("bad config exits");
    assert_eq!(st.code(), Some(1));
    assert!(new.stderr().contains("no-such-keyword"), "{}", new.stderr());
    std::thread::sleep(Duration::from_millis(300));
    assert!(old.running(), "old process stopped: {}", old.stderr());
    assert!(get_ok(lo(port)));
    // The old process' sockets are still whole: another good reload works.
    let mut next = Instance::start(&dir.0, "next", &good, &args);
    assert!(old.wait_exit(Duration::from_secs(10)).is_some());
    assert!(next.running(), "{}", next.stderr());
    assert!(get_ok(lo(port)));
}

#[test]
fn getsocks_without_expose_fd_answers_nothing() {
    let n = node();
    let dir = TempDir::new("getsocks-plain");
    let sock = dir.0.join("admin.sock");
    let port = free_port();
    let path = dir.0.join("p.cfg");
    std::fs::write(&path, cfg(port, &sock, n.addr(), 1, false)).unwrap();
    let _p = Instance::start(&dir.0, "p", &path, &[]);
    wait_ready(lo(port), &sock);
    // HAProxy 2.6 closes the connection without a byte.
    let mut s = UnixStream::connect(&sock).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"_getsocks\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    assert_eq!(out, b"");
    // -x against it fails as HAProxy's does, and the process serves on.
    let err = portcullis::engine::handover::fetch(&sock).err();
    assert_eq!(
        err.as_deref(),
        Some("Failed to get the number of sockets to be transferred !")
    );
    assert!(get_ok(lo(port)));
}

#[test]
fn getsocks_sends_every_worker_socket_with_metadata() {
    let n = node();
    let dir = TempDir::new("getsocks");
    let sock = dir.0.join("admin.sock");
    let port = free_port();
    let path = dir.0.join("p.cfg");
    std::fs::write(&path, cfg(port, &sock, n.addr(), 3, true)).unwrap();
    let _p = Instance::start(&dir.0, "p", &path, &[]);
    wait_ready(lo(port), &sock);
    let got = portcullis::engine::handover::fetch(&sock).expect("sockets");
    assert_eq!(got.len(), 3);
    let mut workers = Vec::new();
    for r in &got {
        let key = portcullis::engine::handover::offer_key(&r.fd);
        assert_eq!(key, Some(portcullis::engine::handover::Key::Inet(lo(port))));
        let m = r.record.meta.clone().expect("portcullis metadata");
        assert_eq!(
            (m.family.as_str(), m.addr.clone(), m.frontend.as_str()),
            ("ipv4", format!("127.0.0.1:{port}"), "fe")
        );
        assert!(m.bind.ends_with("p.cfg:13"), "{}", m.bind);
        workers.push(m.worker);
    }
    workers.sort();
    assert_eq!(workers, vec![0, 1, 2]);
}

/// HAProxy's `-x`/`-sf` on either side: HAProxy old → portcullis new → HAProxy new, under
/// one-request-per-connection load (HAProxy's own soft stop closes idle keep-alive connections,
/// which is what portcullis improves on, so keep-alive clients are not part of it).
#[test]
fn haproxy_interop_both_ways() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("haproxy not installed: skipped");
        return;
    }
    let n = node();
    let dir = TempDir::new("reload-haproxy");
    let sock = dir.0.join("admin.sock");
    let port = free_port();
    let path = dir.0.join("p.cfg");
    std::fs::write(&path, cfg(port, &sock, n.addr(), 1, true)).unwrap();
    let hap = |tag: &str, extra: &[String]| {
        Command::new(HAPROXY)
            .args(["-db", "-f"])
            .arg(&path)
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.0.join(format!("{tag}.log"))).unwrap())
            .spawn()
            .expect("spawn haproxy")
    };
    let mut h1 = hap("h1", &[]);
    wait_ready(lo(port), &sock);
    let load = Load::start(lo(port), 0, 3);
    progress(&load, 100);
    let args = |pid: u32| {
        vec![
            "-x".to_string(),
            sock.display().to_string(),
            "-sf".to_string(),
            pid.to_string(),
        ]
    };
    let mut p = Instance::start(&dir.0, "p", &path, &args(h1.id()));
    let st = wait_child(&mut h1, Duration::from_secs(20));
    assert!(st.is_some(), "HAProxy did not finish");
    assert!(p.running(), "{}", p.stderr());
    progress(&load, 100);
    let mut h2 = hap("h2", &args(p.pid()));
    let st = p.wait_exit(Duration::from_secs(20));
    assert!(st.is_some_and(|s| s.success()), "{st:?}: {}", p.stderr());
    progress(&load, 100);
    let (ok, failed, errs) = load.finish();
    let _ = h2.kill();
    let _ = h2.wait();
    assert_eq!(failed, 0, "{ok} ok, {failed} failed: {errs:#?}");
}

#[test]
fn old_process_ends_at_hard_stop_after_despite_a_client() {
    let n = node();
    let dir = TempDir::new("reload-hard");
    let sock = dir.0.join("admin.sock");
    let port = free_port();
    let path = dir.0.join("p.cfg");
    let text =
        cfg(port, &sock, n.addr(), 1, true).replace("hard-stop-after 20s", "hard-stop-after 1s");
    std::fs::write(&path, text).unwrap();
    let mut old = Instance::start(&dir.0, "old", &path, &[]);
    wait_ready(lo(port), &sock);
    // Half a request head: the old process waits for the rest (timeout client is 10 s).
    let mut held = TcpStream::connect(lo(port)).unwrap();
    held.write_all(b"GET /held HTTP/1.1\r\nHost: t\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let args = vec![
        "-x".to_string(),
        sock.display().to_string(),
        "-sf".to_string(),
        old.pid().to_string(),
    ];
    let t0 = Instant::now();
    let mut new = Instance::start(&dir.0, "new", &path, &args);
    let st = old.wait_exit(Duration::from_secs(5));
    let took = t0.elapsed();
    assert!(
        st.is_some(),
        "old process still there after 5 s: {}",
        old.stderr()
    );
    assert!(
        took >= Duration::from_millis(900),
        "ended after {took:?}: not held by the client?"
    );
    assert!(new.running(), "{}", new.stderr());
    assert!(get_ok(lo(port)));
}

#[test]
fn pidfile_names_the_new_process_after_reload() {
    let n = node();
    let dir = TempDir::new("reload-pid");
    let sock = dir.0.join("admin.sock");
    let pidfile = dir.0.join("p.pid");
    let port = free_port();
    let path = dir.0.join("p.cfg");
    std::fs::write(&path, cfg(port, &sock, n.addr(), 1, true)).unwrap();
    let p = vec!["-p".to_string(), pidfile.display().to_string()];
    let mut old = Instance::start(&dir.0, "old", &path, &p);
    wait_ready(lo(port), &sock);
    let read_pid = || std::fs::read_to_string(&pidfile).unwrap_or_default();
    assert_eq!(read_pid().trim(), old.pid().to_string());
    let mut args = p.clone();
    args.extend([
        "-x".to_string(),
        sock.display().to_string(),
        "-sf".to_string(),
        read_pid().trim().to_string(),
    ]);
    let new = Instance::start(&dir.0, "new", &path, &args);
    assert!(old.wait_exit(Duration::from_secs(10)).is_some());
    // The old process, exiting last, leaves the new one's pidfile alone.
    assert_eq!(read_pid().trim(), new.pid().to_string());
}

/// Another `nbthread` on each reload: fewer workers keep accepting from the extra sockets, more
/// workers bind new ones; a unix bind is reused in place. No request may fail meanwhile.
#[test]
fn reloads_changing_nbthread_and_a_unix_bind_fail_no_request() {
    let n = node();
    let dir = TempDir::new("reload-nbthread");
    let sock = dir.0.join("admin.sock");
    let fe_sock = dir.0.join("fe.sock");
    let port = free_port();
    let path = dir.0.join("p.cfg");
    let write = |threads: u32| {
        let text = cfg(port, &sock, n.addr(), threads, true).replace(
            "    default_backend be\n",
            &format!(
                "    bind unix@{}\n    default_backend be\n",
                fe_sock.display()
            ),
        );
        std::fs::write(&path, text).unwrap();
    };
    write(2);
    let mut cur = Instance::start(&dir.0, "p0", &path, &[]);
    wait_ready(lo(port), &sock);
    let load = Load::start(lo(port), 2, 2);
    progress(&load, 100);
    let ino = || std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&fe_sock).unwrap());
    let first_ino = ino();
    for (i, threads) in [1u32, 3, 2, 4, 1].into_iter().enumerate() {
        write(threads);
        let args = vec![
            "-x".to_string(),
            sock.display().to_string(),
            "-sf".to_string(),
            cur.pid().to_string(),
        ];
        let mut next = Instance::start(&dir.0, &format!("p{}", i + 1), &path, &args);
        let st = cur.wait_exit(Duration::from_secs(20));
        assert!(
            st.is_some_and(|s| s.success()),
            "reload to nbthread {threads}: {st:?} {}\nnew: {}",
            cur.stderr(),
            next.stderr()
        );
        assert!(next.running(), "{}", next.stderr());
        progress(&load, 100);
        // The unix listener is the same socket, still at its path (never unlinked and bound).
        assert_eq!(ino(), first_ino);
        let mut u = UnixStream::connect(&fe_sock).expect("unix bind still there");
        u.write_all(b"GET /unix HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        u.read_to_string(&mut out).unwrap();
        assert!(out.starts_with("HTTP/1.1 200"), "{out}");
        cur = next;
    }
    let (ok, failed, errs) = load.finish();
    assert_eq!(failed, 0, "{ok} ok, {failed} failed: {errs:#?}");
}

fn master_cli(path: &Path, cmd: &str) -> String {
    let mut s = UnixStream::connect(path).expect("master CLI");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// The worker pids `show proc` lists under `# workers`.
fn workers(show_proc: &str) -> Vec<u32> {
    show_proc
        .lines()
        .skip_while(|l| *l != "# workers")
        .skip(1)
        .take_while(|l| !l.starts_with('#'))
        .filter_map(|l| l.split_whitespace().next()?.parse().ok())
        .collect()
}

/// `-W`: SIGUSR2 and the master CLI's `reload` start a new worker that takes the sockets over;
/// a broken configuration is refused and the worker keeps serving; no request fails.
#[test]
fn master_worker_reloads_under_load() {
    let n = node();
    let dir = TempDir::new("reload-master");
    let sock = dir.0.join("admin.sock");
    let mcli = dir.0.join("master.sock");
    let port = free_port();
    let path = dir.0.join("p.cfg");
    // No expose-fd here: the master's private sockets carry the handover.
    let good = cfg(port, &sock, n.addr(), 2, false);
    std::fs::write(&path, &good).unwrap();
    let args = vec![
        "-W".to_string(),
        "-S".to_string(),
        mcli.display().to_string(),
    ];
    let mut master = Instance::start(&dir.0, "master", &path, &args);
    wait_ready(lo(port), &sock);
    assert!(wait_until(Duration::from_secs(10), || UnixStream::connect(
        &mcli
    )
    .is_ok()));
    let first = workers(&master_cli(&mcli, "show proc"));
    assert_eq!(first.len(), 1, "{}", master.stderr());
    let load = Load::start(lo(port), 2, 2);
    progress(&load, 100);
    let mut seen = first.clone();
    for i in 0..6 {
        if i % 2 == 0 {
            // SAFETY: a signal to our own child.
            unsafe { libc::kill(master.pid() as i32, libc::SIGUSR2) };
        } else {
            assert_eq!(master_cli(&mcli, "reload"), "");
        }
        let before = *seen.last().unwrap();
        assert!(
            wait_until(Duration::from_secs(20), || {
                let w = workers(&master_cli(&mcli, "show proc"));
                w.len() == 1 && w[0] != before
            }),
            "reload {i}: {}",
            master.stderr()
        );
        seen.push(workers(&master_cli(&mcli, "show proc"))[0]);
        progress(&load, 100);
    }
    // A broken configuration: refused, counted, the worker stays.
    std::fs::write(&path, good.clone() + "    no-such-keyword here\n").unwrap();
    let cur = *seen.last().unwrap();
    // SAFETY: as above.
    unsafe { libc::kill(master.pid() as i32, libc::SIGUSR2) };
    assert!(wait_until(Duration::from_secs(10), || master_cli(
        &mcli,
        "show proc"
    )
    .contains("[failed: 1]")));
    progress(&load, 100);
    let show = master_cli(&mcli, "show proc");
    assert_eq!(workers(&show), vec![cur], "{show}");
    assert!(show.contains(" 6 [failed: 1] "), "{show}");
    let (ok, failed, errs) = load.finish();
    assert_eq!(failed, 0, "{ok} ok, {failed} failed: {errs:#?}");
    // Every former worker is gone; stopping the master stops the last one.
    for pid in &seen[..seen.len() - 1] {
        // SAFETY: signal 0 only checks the pid (the master reaped them).
        assert!(
            unsafe { libc::kill(*pid as i32, 0) } != 0,
            "worker {pid} still there"
        );
    }
    // SAFETY: as above.
    unsafe { libc::kill(master.pid() as i32, libc::SIGTERM) };
    let st = master.wait_exit(Duration::from_secs(10));
    assert_eq!(st.and_then(|s| s.code()), Some(0), "{}", master.stderr());
    assert!(
        unsafe { libc::kill(cur as i32, 0) } != 0,
        "last worker still there"
    );
    assert!(TcpStream::connect(lo(port)).is_err());
}

/// `-Ws` tells systemd (`Type=notify`) when it is ready, reloading and stopping.
#[test]
fn master_worker_notifies_systemd() {
    let n = node();
    let dir = TempDir::new("reload-notify");
    let sock = dir.0.join("admin.sock");
    let port = free_port();
    let path = dir.0.join("p.cfg");
    std::fs::write(&path, cfg(port, &sock, n.addr(), 1, false)).unwrap();
    let nsock = dir.0.join("notify.sock");
    let rx = std::os::unix::net::UnixDatagram::bind(&nsock).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    let mut master = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .args(["--io", &io_engine(), "-Ws", "-f"])
        .arg(&path)
        .env("NOTIFY_SOCKET", &nsock)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let recv = || {
        let mut buf = [0u8; 256];
        let n = rx.recv(&mut buf).expect("a notification");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    };
    assert_eq!(recv(), format!("READY=1\nMAINPID={}", master.id()));
    // Ready means serving.
    assert!(get_ok(lo(port)));
    // SAFETY: signals to our own child.
    unsafe { libc::kill(master.id() as i32, libc::SIGUSR2) };
    assert_eq!(recv(), "RELOADING=1");
    assert_eq!(recv(), "READY=1");
    assert!(get_ok(lo(port)));
    unsafe { libc::kill(master.id() as i32, libc::SIGTERM) };
    assert_eq!(recv(), "STOPPING=1");
    let st = wait_child(&mut master, Duration::from_secs(10));
    assert_eq!(st.and_then(|s| s.code()), Some(0));
}

fn admin_cmd(sock: &Path, cmd: &str) -> String {
    let mut s = proxy::admin_connect(sock);
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

/// `show servers state be` line by line, the time since the last change (field 9) left out: the
/// one value a reload may change.
fn servers_state(sock: &Path) -> Vec<String> {
    admin_cmd(sock, "show servers state be")
        .lines()
        .filter(|l| !l.starts_with('#') && l.split(' ').count() > 20)
        .map(|l| {
            let mut f: Vec<&str> = l.split(' ').collect();
            f[9] = "-";
            f.join(" ")
        })
        .collect()
}

/// [`servers_state`] when no health check is running: a check in progress shows in its status
/// (field 10) and state (field 13, bit 0x1) until it completes, and s4 is checked every 200 ms.
fn settled_servers_state(sock: &Path) -> Vec<String> {
    let mut st = servers_state(sock);
    let running = |st: &[String]| {
        st.iter().any(|l| {
            l.split(' ')
                .nth(13)
                .and_then(|v| v.parse::<u32>().ok())
                .is_some_and(|v| v & 1 != 0)
        })
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while running(&st) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
        st = servers_state(sock);
    }
    st
}

/// Field `k` of `name`'s line of [`servers_state`].
fn state_field(state: &[String], name: &str, k: usize) -> String {
    state
        .iter()
        .map(|l| l.split(' ').collect::<Vec<_>>())
        .find(|f| f[3] == name)
        .map(|f| f[k].to_string())
        .unwrap_or_default()
}

/// Runtime changes (MAINT, DRAIN, weight, address) and health survive the reload, `-x`/`-sf` or
/// `-W`/SIGUSR2: `show servers state` reads the same after it, and a DOWN server stays DOWN
/// instead of flapping UP.
fn server_state_survives(master_worker: bool) {
    let n = node();
    let other = node();
    let dead = backend::RefusingPort::new().unwrap();
    let dir = TempDir::new("reload-state");
    let sock = dir.0.join("admin.sock");
    let mcli = dir.0.join("master.sock");
    let port = free_port();
    let path = dir.0.join("p.cfg");
    let text = cfg(port, &sock, n.addr(), 1, !master_worker).replace(
        &format!("    server s1 {}\n", n.addr()),
        &format!(
            "    server s1 {a}\n    server s2 {a}\n    server s3 {a}\n    server s4 {d} check inter 200ms fall 1 rise 2\n",
            a = n.addr(),
            d = dead.addr()
        ),
    );
    std::fs::write(&path, text).unwrap();
    let mw = vec![
        "-W".to_string(),
        "-S".to_string(),
        mcli.display().to_string(),
    ];
    let mut old = Instance::start(&dir.0, "old", &path, if master_worker { &mw } else { &[] });
    wait_ready(lo(port), &sock);
    assert!(wait_until(Duration::from_secs(10), || !master_worker
        || UnixStream::connect(&mcli).is_ok()));
    for c in [
        "set server be/s1 state maint",
        "set server be/s2 state drain",
        "set server be/s3 weight 7",
    ] {
        assert_eq!(admin_cmd(&sock, c), "\n", "{c}");
    }
    let o = other.addr();
    let out = admin_cmd(
        &sock,
        &format!("set server be/s2 addr {} port {}", o.ip(), o.port()),
    );
    assert!(out.contains("port changed"), "{out}");
    // Servers added at run time are added again by the new process, with their state: d1
    // checked and in service, d2 left in maintenance.
    for c in [
        format!("add server be/d1 {o} check inter 200ms"),
        format!("add server be/d2 {o} weight 3"),
    ] {
        assert_eq!(admin_cmd(&sock, &c), "New server registered.\n\n", "{c}");
    }
    for c in ["enable health be/d1", "set server be/d1 state ready"] {
        assert_eq!(admin_cmd(&sock, c), "\n", "{c}");
    }
    // s4 fails its first check: DOWN.
    assert!(
        wait_until(Duration::from_secs(10), || state_field(
            &servers_state(&sock),
            "s4",
            5
        ) == "0"),
        "{:?}",
        servers_state(&sock)
    );
    let before = settled_servers_state(&sock);
    assert_eq!(before.len(), 6);
    assert_eq!(state_field(&before, "d1", 5), "2");
    assert_eq!(state_field(&before, "d2", 6), "1");
    // What was set shows: s1 MAINT (admin 0x01), s2 DRAIN (0x08) at its new address.
    assert_eq!(state_field(&before, "s1", 6), "1");
    assert_eq!(state_field(&before, "s2", 6), "8");
    assert_eq!(state_field(&before, "s2", 4), o.ip().to_string());
    assert_eq!(state_field(&before, "s2", 18), o.port().to_string());
    assert_eq!(state_field(&before, "s3", 7), "7");
    let mut held = Vec::new();
    let log = if master_worker {
        let w = workers(&master_cli(&mcli, "show proc"));
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(old.pid() as i32, libc::SIGUSR2) };
        assert!(
            wait_until(Duration::from_secs(20), || {
                let now = workers(&master_cli(&mcli, "show proc"));
                now.len() == 1 && now != w && !alive(w[0])
            }),
            "{}",
            old.stderr()
        );
        old.stderr()
    } else {
        let args = vec![
            "-x".to_string(),
            sock.display().to_string(),
            "-sf".to_string(),
            old.pid().to_string(),
        ];
        let mut new = Instance::start(&dir.0, "new", &path, &args);
        assert!(old.wait_exit(Duration::from_secs(10)).is_some());
        assert!(new.running(), "{}", new.stderr());
        let log = new.stderr();
        // The new process serves until the end of the test.
        held.push(new);
        log
    };
    wait_ready(lo(port), &sock);
    // d1's check runs again in the new process: its result and health count from there.
    assert!(wait_until(Duration::from_secs(10), || state_field(
        &servers_state(&sock),
        "d1",
        10
    ) == "6"));
    let d1_check_masked = |st: Vec<String>| -> Vec<String> {
        st.into_iter()
            .map(|l| {
                let mut f: Vec<String> = l.split(' ').map(str::to_string).collect();
                if f[3] == "d1" {
                    for v in f.iter_mut().take(13).skip(10) {
                        *v = "-".into();
                    }
                }
                f.join(" ")
            })
            .collect()
    };
    let after = d1_check_masked(settled_servers_state(&sock));
    let before = d1_check_masked(before);
    assert_eq!(after, before, "{log}");
    assert!(
        log.contains("server state of 6 server(s) taken from the old process"),
        "{log}"
    );
    // Traffic goes to s2's new address (s1 is in maintenance, s4 down, s3 and s2 share).
    assert!(get_ok(lo(port)));
}

#[test]
fn server_state_is_handed_over() {
    server_state_survives(false);
}

#[test]
fn server_state_is_handed_over_by_the_master() {
    server_state_survives(true);
}

/// A worker does not outlive its master, even one killed with SIGKILL.
#[test]
fn worker_stops_with_its_master() {
    let n = node();
    let dir = TempDir::new("reload-orphan");
    let sock = dir.0.join("admin.sock");
    let mcli = dir.0.join("master.sock");
    let port = free_port();
    let path = dir.0.join("p.cfg");
    std::fs::write(&path, cfg(port, &sock, n.addr(), 1, false)).unwrap();
    let args = vec![
        "-W".to_string(),
        "-S".to_string(),
        mcli.display().to_string(),
    ];
    let mut master = Instance::start(&dir.0, "master", &path, &args);
    wait_ready(lo(port), &sock);
    assert!(wait_until(Duration::from_secs(10), || UnixStream::connect(
        &mcli
    )
    .is_ok()));
    let w = workers(&master_cli(&mcli, "show proc"));
    assert_eq!(w.len(), 1);
    let _ = master.child.kill();
    let _ = master.child.wait();
    assert!(
        wait_until(Duration::from_secs(10), || {
            // SAFETY: signal 0 only checks the pid (the worker is reparented and reaped).
            unsafe { libc::kill(w[0] as i32, 0) != 0 }
        }),
        "worker {} outlived its master",
        w[0]
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 7's proof: 20 reloads of each kind under every kind of load at once.

/// Byte `i` of the long stream: deterministic and not periodic at any small length, so a lost,
/// doubled or reordered block shows at its offset.
fn stream_byte(i: u64) -> u8 {
    let x = i ^ (i >> 11) ^ (i >> 23);
    (x.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8
}

/// One long `mode tcp` connection through the proxy to an echo server: a writer sends the
/// sequence of [`stream_byte`] in small blocks, a reader checks every byte that comes back.
struct LongStream {
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    /// Bytes written so far.
    sent: Arc<AtomicU64>,
    /// Asks the writer to pause; it answers by setting `held`.
    hold: Arc<AtomicBool>,
    held: Arc<AtomicBool>,
    /// How the writer or the reader stopped, if one did.
    ended: Arc<std::sync::Mutex<Vec<String>>>,
    writer: JoinHandle<Result<(u64, u64), String>>,
    reader: JoinHandle<Result<(u64, u64), String>>,
}

impl LongStream {
    fn start(addr: SocketAddr) -> LongStream {
        let s = TcpStream::connect(addr).expect("connect the long stream");
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        let mut w = s.try_clone().unwrap();
        let mut r = s;
        let stop = Arc::new(AtomicBool::new(false));
        let received = Arc::new(AtomicU64::new(0));
        let sent = Arc::new(AtomicU64::new(0));
        let hold = Arc::new(AtomicBool::new(false));
        let held = Arc::new(AtomicBool::new(false));
        let ended = Arc::new(std::sync::Mutex::new(Vec::new()));
        let st = Arc::clone(&stop);
        let (wsent, whold, wheld) = (Arc::clone(&sent), Arc::clone(&hold), Arc::clone(&held));
        let wended = Arc::clone(&ended);
        let writer = std::thread::spawn(move || {
            let r = (|| {
                let (mut off, mut sum) = (0u64, backend::Fnv1a::new());
                while !st.load(Ordering::Relaxed) {
                    if whold.load(Ordering::SeqCst) {
                        wheld.store(true, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_millis(5));
                        continue;
                    }
                    let block: Vec<u8> = (off..off + 4096).map(stream_byte).collect();
                    w.write_all(&block)
                        .map_err(|e| format!("stream write at {off}: {e}"))?;
                    sum.update(&block);
                    off += block.len() as u64;
                    wsent.store(off, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(5));
                }
                // Half-close: the echo server sends the rest, then closes its side.
                w.shutdown(std::net::Shutdown::Write)
                    .map_err(|e| format!("stream shutdown: {e}"))?;
                Ok((off, sum.finish()))
            })();
            if let Err(e) = &r {
                wended.lock().unwrap().push(format!("writer: {e}"));
            }
            r
        });
        let got = Arc::clone(&received);
        let rended = Arc::clone(&ended);
        let reader = std::thread::spawn(move || {
            let r = (|| {
                let (mut off, mut sum) = (0u64, backend::Fnv1a::new());
                let mut buf = vec![0u8; 16 * 1024];
                loop {
                    let n = r
                        .read(&mut buf)
                        .map_err(|e| format!("stream read at {off}: {e}"))?;
                    if n == 0 {
                        return Ok((off, sum.finish()));
                    }
                    let data = &buf[..n];
                    if let Some(k) = (0..n).find(|&k| data[k] != stream_byte(off + k as u64)) {
                        return Err(format!("stream byte {} differs", off + k as u64));
                    }
                    sum.update(data);
                    off += n as u64;
                    got.store(off, Ordering::Relaxed);
                }
            })();
            let end = match &r {
                Ok((n, _)) => format!("reader: end of stream after {n} bytes"),
                Err(e) => format!("reader: {e}"),
            };
            rended.lock().unwrap().push(end);
            r
        });
        LongStream {
            stop,
            received,
            sent,
            hold,
            held,
            ended,
            writer,
            reader,
        }
    }

    /// Pauses the writer for good (until [`LongStream::finish`]) and waits until every byte
    /// written came back; returns their count.
    fn quiesce(&self, what: &str) -> u64 {
        self.hold.store(true, Ordering::SeqCst);
        let done = || {
            self.held.load(Ordering::SeqCst)
                && self.received.load(Ordering::SeqCst) == self.sent.load(Ordering::SeqCst)
        };
        assert!(
            wait_until(Duration::from_secs(10), done),
            "{what}: {} bytes sent, {} back",
            self.sent.load(Ordering::SeqCst),
            self.received.load(Ordering::SeqCst)
        );
        self.sent.load(Ordering::SeqCst)
    }

    /// Waits until more bytes came back: the stream still flows.
    fn flows(&self, what: &str) {
        let base = self.received.load(Ordering::Relaxed);
        if !wait_until(Duration::from_secs(10), || {
            self.received.load(Ordering::Relaxed) > base
        }) {
            let ss = Command::new("ss").arg("-tnpoi").output().unwrap();
            panic!(
                "{what}: the long stream stalled at {base} bytes ({} sent; {:?})\n{}",
                self.sent.load(Ordering::SeqCst),
                self.ended.lock().unwrap(),
                String::from_utf8_lossy(&ss.stdout)
            );
        }
    }

    /// Ends the stream; returns the bytes sent (as many came back, all of them intact).
    fn finish(self) -> u64 {
        self.stop.store(true, Ordering::Relaxed);
        let sent = self.writer.join().unwrap();
        let back = self.reader.join().unwrap();
        let (sent, sent_sum) = sent.unwrap_or_else(|e| panic!("{e}"));
        let (back, back_sum) = back.unwrap_or_else(|e| panic!("{e} ({sent} bytes sent)"));
        assert_eq!(back, sent, "bytes back / sent");
        assert_eq!(back_sum, sent_sum, "FNV-1a of the bytes back / sent");
        sent
    }
}

/// Every kind of load at once: plain HTTP/1.1 keep-alive and one request per connection, HTTPS
/// keep-alive through a `bind … ssl crt` frontend, and a long stream through a `mode tcp`
/// frontend. `hard-stop-after` outlasts the test: the process holding the stream stays.
struct Rig {
    node: HttpNode,
    echo: backend::TcpEcho,
    dir: TempDir,
    sock: PathBuf,
    path: PathBuf,
    port: u16,
    tls_port: u16,
    tcp_port: u16,
    der: Vec<u8>,
}

impl Rig {
    fn new(tag: &str, expose: bool) -> Rig {
        let node = node();
        let echo = backend::TcpEcho::start(lo(0)).expect("echo");
        let dir = TempDir::new(tag);
        let sock = dir.0.join("admin.sock");
        let (port, tls_port, tcp_port) = (free_port(), free_port(), free_port());
        let ck = rcgen::generate_simple_self_signed(vec!["example.local".to_string()]).unwrap();
        let pem = dir.0.join("bundle.pem");
        std::fs::write(
            &pem,
            format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem()),
        )
        .unwrap();
        let text = cfg(port, &sock, node.addr(), 2, expose)
            .replace("hard-stop-after 20s", "hard-stop-after 300s")
            + &format!(
                "\nfrontend fes\n    bind 127.0.0.1:{tls_port} ssl crt \"{}\" alpn http/1.1\n    default_backend be\n\
             \nfrontend ft\n    mode tcp\n    bind 127.0.0.1:{tcp_port}\n    default_backend echo\n\
             \nbackend echo\n    mode tcp\n    server e {}\n",
                pem.display(),
                echo.addr()
            );
        let path = dir.0.join("p.cfg");
        std::fs::write(&path, text).unwrap();
        Rig {
            node,
            echo,
            dir,
            sock,
            path,
            port,
            tls_port,
            tcp_port,
            der: ck.cert.der().to_vec(),
        }
    }

    fn wait_ready(&self) {
        wait_ready(lo(self.port), &self.sock);
        wait_listening(lo(self.tls_port));
        wait_listening(lo(self.tcp_port));
    }

    fn load(&self) -> Load {
        Load::start_with(
            Target::Plain(lo(self.port)),
            2,
            2,
            Some((Target::Tls(lo(self.tls_port), tls_config(&self.der)), 2)),
        )
    }

    /// Every kind of client was served all along (the node saw many requests of each).
    fn each_kind_served(&self) {
        let reqs = self.node.requests();
        for kind in ["/ka/", "/once/", "/tls/"] {
            let n = reqs.iter().filter(|r| r.target.starts_with(kind)).count();
            assert!(n >= 200, "only {n} {kind} requests");
        }
    }

    fn admin_ino(&self) -> Option<u64> {
        std::fs::metadata(&self.sock)
            .ok()
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
    }
}

/// True while `pid` exists (a zombie counts: its parent has not reaped it).
fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks the pid.
    unsafe { libc::kill(pid as i32, 0) == 0 }
}

const RELOADS: usize = 20;

/// `-x <admin.sock> -sf <pid>` 20 times under all the load: no request fails, the long `mode
/// tcp` stream stays with the first process and comes back intact, every old process exits.
#[test]
fn twenty_x_sf_reloads_under_every_kind_of_load() {
    let t0 = Instant::now();
    let rig = Rig::new("reload-proof-x", true);
    let mut first = Instance::start(&rig.dir.0, "p0", &rig.path, &[]);
    rig.wait_ready();
    let stream = LongStream::start(lo(rig.tcp_port));
    let load = rig.load();
    progress(&load, 100);
    stream.flows("before the reloads");
    let mut olds: Vec<Instance> = Vec::new();
    let mut cur_pid = first.pid();
    for i in 1..=RELOADS {
        let ino = rig.admin_ino();
        let args = vec![
            "-x".to_string(),
            rig.sock.display().to_string(),
            "-sf".to_string(),
            cur_pid.to_string(),
        ];
        let next = Instance::start(&rig.dir.0, &format!("p{i}"), &rig.path, &args);
        // The new process serves once its admin socket replaced the old one's.
        assert!(
            wait_until(Duration::from_secs(20), || rig.admin_ino() != ino
                && UnixStream::connect(&rig.sock).is_ok()),
            "reload {i}: no new admin socket: {}",
            next.stderr()
        );
        // Every old process but the first (which holds the stream) empties and exits.
        if let Some(prev) = olds.last_mut() {
            let st = prev.wait_exit(Duration::from_secs(20));
            assert!(
                st.is_some_and(|s| s.success()),
                "reload {i}: old process did not finish ({st:?}): {}",
                prev.stderr()
            );
        }
        cur_pid = next.pid();
        olds.push(next);
        progress(&load, 50);
        stream.flows(&format!("reload {i}"));
        assert!(first.running(), "reload {i}: {}", first.stderr());
    }
    let (ok, failed, errs) = load.finish();
    let sent = stream.finish();
    assert_eq!(failed, 0, "{ok} ok, {failed} failed: {errs:#?}");
    // The first process ends with its last session (the stream), long before hard-stop-after.
    let st = first.wait_exit(Duration::from_secs(10));
    assert!(
        st.is_some_and(|s| s.success()),
        "first process: {st:?}: {}",
        first.stderr()
    );
    let mut last = olds.pop().unwrap();
    for (k, p) in olds.iter_mut().enumerate() {
        assert!(
            !p.running(),
            "process {} of reload {} still there",
            p.pid(),
            k + 1
        );
    }
    assert!(last.running(), "{}", last.stderr());
    assert!(get_ok(lo(rig.port)));
    assert_eq!(rig.echo.open_connections(), 0);
    rig.each_kind_served();
    eprintln!(
        "{RELOADS} -x/-sf reloads: {ok} requests, 0 failed, {sent} stream bytes intact, {:?}",
        t0.elapsed()
    );
}

/// `-W` and SIGUSR2 20 times under all the load: the same proof, the master reaping the workers.
#[test]
fn twenty_master_worker_reloads_under_every_kind_of_load() {
    let t0 = Instant::now();
    let rig = Rig::new("reload-proof-w", false);
    let mcli = rig.dir.0.join("master.sock");
    let args = vec![
        "-W".to_string(),
        "-S".to_string(),
        mcli.display().to_string(),
    ];
    let mut master = Instance::start(&rig.dir.0, "master", &rig.path, &args);
    rig.wait_ready();
    assert!(wait_until(Duration::from_secs(10), || UnixStream::connect(
        &mcli
    )
    .is_ok()));
    let first = workers(&master_cli(&mcli, "show proc"));
    assert_eq!(first.len(), 1, "{}", master.stderr());
    let stream = LongStream::start(lo(rig.tcp_port));
    let load = rig.load();
    progress(&load, 100);
    stream.flows("before the reloads");
    let mut seen = first.clone();
    for i in 1..=RELOADS {
        // SAFETY: a signal to our own child.
        unsafe { libc::kill(master.pid() as i32, libc::SIGUSR2) };
        let before = *seen.last().unwrap();
        let mut now = Vec::new();
        assert!(
            wait_until(Duration::from_secs(20), || {
                now = workers(&master_cli(&mcli, "show proc"));
                now.len() == 1 && now[0] != before
            }),
            "reload {i}: {}",
            master.stderr()
        );
        seen.push(now[0]);
        // The worker before (the first one excepted: it holds the stream) empties and exits.
        if i > 1 {
            assert!(
                wait_until(Duration::from_secs(20), || !alive(before)),
                "reload {i}: worker {before} did not finish: {}",
                master.stderr()
            );
        }
        progress(&load, 50);
        stream.flows(&format!("reload {i}"));
        assert!(alive(first[0]), "reload {i}: the first worker is gone");
    }
    let (ok, failed, errs) = load.finish();
    let sent = stream.finish();
    assert_eq!(failed, 0, "{ok} ok, {failed} failed: {errs:#?}");
    assert!(
        wait_until(Duration::from_secs(10), || !alive(first[0])),
        "the first worker outlived its stream"
    );
    let show = master_cli(&mcli, "show proc");
    assert!(!show.contains("# old workers"), "{show}");
    assert!(show.contains(&format!(" {RELOADS} [failed: 0] ")), "{show}");
    let cur = *seen.last().unwrap();
    assert_eq!(workers(&show), vec![cur], "{show}");
    for pid in &seen[..seen.len() - 1] {
        assert!(!alive(*pid), "worker {pid} still there");
    }
    assert!(get_ok(lo(rig.port)));
    assert_eq!(rig.echo.open_connections(), 0);
    rig.each_kind_served();
    // SAFETY: as above.
    unsafe { libc::kill(master.pid() as i32, libc::SIGTERM) };
    let st = master.wait_exit(Duration::from_secs(10));
    assert_eq!(st.and_then(|s| s.code()), Some(0), "{}", master.stderr());
    assert!(!alive(cur), "last worker still there");
    eprintln!(
        "{RELOADS} -W/SIGUSR2 reloads: {ok} requests, 0 failed, {sent} stream bytes intact, {:?}",
        t0.elapsed()
    );
}

// ---------------------------------------------------------------------------------------------
// Issue 7, deliver 4: a spliced passthrough session keeps flowing across reloads.

/// `show splice` (a portcullis extension) of the process behind `sock`: its counters by name.
fn splice_counters(sock: &Path) -> std::collections::HashMap<String, u64> {
    admin_cmd(sock, "show splice")
        .lines()
        .filter_map(|l| l.split_once(": "))
        .filter_map(|(k, v)| Some((k.to_string(), v.parse().ok()?)))
        .collect()
}

/// [`splice_counters`], waiting (30 s at most) for a whole answer: a loaded machine may leave a
/// just started process's admin socket slower than `admin_cmd`'s 10 s read timeout.
fn splice_counters_now(sock: &Path, what: &str) -> std::collections::HashMap<String, u64> {
    let mut c = splice_counters(sock);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !c.contains_key("Sessions") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        c = splice_counters(sock);
    }
    assert!(
        c.contains_key("Sessions"),
        "{what}: no answer to show splice"
    );
    c
}

/// The splice's per-socket counters in process `pid`'s own FLOWS map (found through the map ids
/// of its descriptors): one entry per socket it splices now, under the cookie of the socket the
/// bytes arrive on. A soft-stopped process has closed its admin socket; its maps still answer.
fn kernel_flows(pid: u32) -> Vec<(u64, portcullis_ebpf_common::Flow)> {
    let mut ids: Vec<u32> = std::fs::read_dir(format!("/proc/{pid}/fdinfo"))
        .expect("fdinfo")
        .flatten()
        .filter_map(|e| {
            let text = std::fs::read_to_string(e.path()).ok()?;
            text.lines()
                .find_map(|l| l.strip_prefix("map_id:"))
                .and_then(|v| v.trim().parse().ok())
        })
        .collect();
    ids.sort();
    ids.dedup();
    for id in ids {
        let Ok(data) = aya::maps::MapData::from_id(id) else {
            continue;
        };
        let name = data
            .info()
            .ok()
            .and_then(|i| i.name_as_str().map(str::to_string));
        if name.as_deref() != Some(portcullis_ebpf_common::FLOWS_MAP) {
            continue;
        }
        let map: aya::maps::HashMap<_, u64, portcullis_ebpf_common::Flow> =
            aya::maps::HashMap::try_from(aya::maps::Map::HashMap(data)).expect("FLOWS map");
        let mut flows: Vec<_> = map.iter().map(|r| r.expect("FLOWS entry")).collect();
        flows.sort_by_key(|(cookie, _)| *cookie);
        return flows;
    }
    panic!("process {pid} has no FLOWS map");
}

/// The processes holding a socket that listens on `port` (as `ss -p` names them).
fn listening_pids(port: u16) -> Vec<u32> {
    let out = Command::new("ss")
        .args(["-Hltnp", &format!("sport = :{port}")])
        .output()
        .expect("ss");
    let mut pids: Vec<u32> = String::from_utf8_lossy(&out.stdout)
        .split("pid=")
        .skip(1)
        .filter_map(|s| {
            let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
            digits.parse().ok()
        })
        .collect();
    pids.sort();
    pids.dedup();
    pids
}

/// One short session through `port` to the echo server: `msg` comes back whole.
fn echo_once(port: u16, msg: &[u8]) {
    let mut c = TcpStream::connect(lo(port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(msg).unwrap();
    let mut back = vec![0u8; msg.len()];
    c.read_exact(&mut back).expect("echo");
    assert_eq!(back, msg);
}

/// The bytes the first process's kernel redirected for the stream, per direction (keyed by the
/// proxy's own sockets, so in no particular order); neither direction fell back to userspace
/// nor had a byte passed to it.
fn spliced_only(pid: u32, what: &str) -> [u64; 2] {
    let flows = kernel_flows(pid);
    assert_eq!(flows.len(), 2, "{what}: {flows:?}");
    for (_, f) in &flows {
        assert_eq!((f.passed, f.fallback), (0, 0), "{what}: {flows:?}");
    }
    [flows[0].1.redirected, flows[1].1.redirected]
}

/// A `mode tcp` stream spliced in the kernel (`portcullis-relay kernel`) before the first of 5
/// `-x`/`-sf` reloads keeps flowing through each of them, every later process taking the
/// listener and splicing its own sessions; the first process's kernel carried every byte of the
/// stream both ways (userspace relayed none), all of them came back intact, and the session ends
/// with its tcplog line, the first process then exiting.
#[test]
fn a_spliced_stream_keeps_flowing_across_reloads() {
    // SAFETY: no arguments.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("SKIPPED: the kernel splice needs root (CAP_BPF and CAP_NET_ADMIN)");
        return;
    }
    const SPLICED_RELOADS: usize = 5;
    let echo = backend::TcpEcho::start(SocketAddr::from(([127, 0, 1, 112], 0))).expect("echo");
    let dir = TempDir::new("reload-splice");
    let sock = dir.0.join("admin.sock");
    let port = free_port();
    let text = format!(
        "global\n    nbthread 2\n    stats socket \"{}\" mode 600 level admin expose-fd listeners\n    hard-stop-after 300s\n\ndefaults\n    mode tcp\n    log stdout format raw local0\n    option tcplog\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n\nfrontend ft\n    bind 127.0.0.1:{port}\n    default_backend echo\n\nbackend echo\n    portcullis-relay kernel\n    server e {}\n",
        sock.display(),
        echo.addr()
    );
    let path = dir.0.join("p.cfg");
    std::fs::write(&path, text).unwrap();
    let mut first = Instance::start(&dir.0, "p0", &path, &[]);
    wait_ready(lo(port), &sock);
    let status = admin_cmd(&sock, "show splice");
    assert!(
        status.starts_with("Status: kernel (sockmap splice)\n"),
        "{status}"
    );
    // The readiness probe's session has ended.
    assert!(wait_until(Duration::from_secs(10), || kernel_flows(
        first.pid()
    )
    .is_empty()));
    let stream = LongStream::start(lo(port));
    stream.flows("before the reloads");
    let mid = splice_counters_now(&sock, "before the reloads");
    assert_eq!(mid.get("ActiveSessions"), Some(&1), "{mid:?}");
    let mut seen = spliced_only(first.pid(), "before the reloads");
    assert!(seen.iter().all(|&n| n > 0), "{seen:?}");
    let mut probes = 0u64;
    let mut olds: Vec<Instance> = Vec::new();
    let mut cur_pid = first.pid();
    for i in 1..=SPLICED_RELOADS {
        let ino = std::fs::metadata(&sock)
            .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
            .ok();
        let args = vec![
            "-x".to_string(),
            sock.display().to_string(),
            "-sf".to_string(),
            cur_pid.to_string(),
        ];
        let next = Instance::start(&dir.0, &format!("p{i}"), &path, &args);
        assert!(
            wait_until(Duration::from_secs(20), || {
                std::fs::metadata(&sock)
                    .map(|m| std::os::unix::fs::MetadataExt::ino(&m))
                    .ok()
                    != ino
                    && UnixStream::connect(&sock).is_ok()
            }),
            "reload {i}: no new admin socket: {}",
            next.stderr()
        );
        if let Some(prev) = olds.last_mut() {
            let st = prev.wait_exit(Duration::from_secs(20));
            assert!(
                st.is_some_and(|s| s.success()),
                "reload {i}: old process did not finish ({st:?}): {}",
                prev.stderr()
            );
        }
        // The new process alone holds the listener (the first one let go of it too)...
        assert!(
            wait_until(Duration::from_secs(20), || listening_pids(port)
                == vec![next.pid()]),
            "reload {i}: the listener is held by {:?}, the new process is {}",
            listening_pids(port),
            next.pid()
        );
        // ... and splices the sessions it accepts.
        let b = splice_counters_now(&sock, &format!("reload {i}: {}", next.stderr()));
        let msg = format!("reload {i} probe");
        echo_once(port, msg.as_bytes());
        probes += msg.len() as u64;
        assert!(
            wait_until(Duration::from_secs(30), || {
                let a = splice_counters(&sock);
                a.get("Sessions").copied() == b.get("Sessions").map(|n| n + 1)
                    && a.get("ActiveSessions") == Some(&0)
            }),
            "reload {i}: {b:?} then {:?}: {}",
            splice_counters(&sock),
            next.stderr()
        );
        let a = splice_counters_now(&sock, &format!("reload {i}"));
        assert_eq!(
            a.get("RedirectedBytes").copied(),
            b.get("RedirectedBytes").map(|n| n + 2 * msg.len() as u64),
            "reload {i}: {b:?} then {a:?}"
        );
        cur_pid = next.pid();
        olds.push(next);
        stream.flows(&format!("reload {i}"));
        assert!(first.running(), "reload {i}: {}", first.stderr());
        let now = spliced_only(first.pid(), &format!("reload {i}"));
        assert!(
            now[0] + now[1] > seen[0] + seen[1],
            "reload {i}: {seen:?} then {now:?}"
        );
        seen = now;
    }
    // Every byte of the stream, both ways, went through the first process's kernel splice.
    let sent = stream.quiesce("after the reloads");
    assert_eq!(spliced_only(first.pid(), "after the reloads"), [sent, sent]);
    assert_eq!(echo.bytes_echoed(), sent + probes);
    let total = stream.finish();
    assert_eq!(total, sent);
    // The session ends normally: the first process logs it and, soft-stopped, exits.
    let st = first.wait_exit(Duration::from_secs(10));
    assert!(
        st.is_some_and(|s| s.success()),
        "first process: {st:?}: {}",
        first.stderr()
    );
    let out = first.stdout();
    let line = out
        .lines()
        .find(|l| l.contains(" ft echo/e ") && l.contains(&format!(" {sent} -- ")))
        .unwrap_or_else(|| panic!("no tcplog line for {sent} bytes:\n{out}"));
    eprintln!("{SPLICED_RELOADS} reloads, {sent} spliced bytes each way: {line}");
    assert!(wait_until(Duration::from_secs(5), || echo
        .open_connections()
        == 0));
    let mut last = olds.pop().unwrap();
    for p in olds.iter_mut() {
        assert!(!p.running(), "process {} still there", p.pid());
    }
    assert!(last.running(), "{}", last.stderr());
}
