//! The churn drill's core (issue 17): what an ingress controller does during a rolling update
//! of 3 → 6 → 3 pods, through the Runtime API only, while steady keep-alive and
//! new-connection load runs through the balancer. New pods: `add server` + `enable health` +
//! `set server … state ready`; old pods: `state drain`, `state maint`, then `del server`
//! (retried while HAProxy still counts idle connections on it), and only then the pod stops.
//! Midway a `set map` sends a host to another backend. Std only, so the same file builds into
//! `cargo xtask drill --churn` and `tests/churn.rs` (which need `mod backend` beside it).
#![allow(dead_code)]

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::backend::{HttpNode, HttpOpts, free_port};

/// The host the map moves from `be_app` to `be_new` during the run.
pub const MOVED_HOST: &str = "moved.example";

#[derive(Clone, Debug)]
pub struct ChurnSpec {
    /// Keep-alive clients (one connection each, reused) and new-connection clients.
    pub keepalive: usize,
    pub newconn: usize,
    /// Pause between two requests of one client.
    pub pace: Duration,
    /// Load before the first change and between steps.
    pub settle: Duration,
}

impl ChurnSpec {
    pub fn quick() -> Self {
        ChurnSpec {
            keepalive: 2,
            newconn: 2,
            pace: Duration::from_millis(5),
            settle: Duration::from_millis(500),
        }
    }
    pub fn full() -> Self {
        ChurnSpec {
            keepalive: 4,
            newconn: 4,
            pace: Duration::from_millis(2),
            settle: Duration::from_secs(2),
        }
    }
}

/// The balancer's side of a run: its front address, admin socket and map file.
pub struct Setup {
    pub front: SocketAddr,
    pub admin: PathBuf,
    pub map: PathBuf,
    pub config: String,
    pub pods: Vec<HttpNode>,
    pub moved: HttpNode,
}

/// The balancer configuration: three pods configured, a second backend for the moved host.
/// `retries 3` + `option redispatch` as the ingress controllers' base configurations have.
pub fn setup(dir: &Path) -> io::Result<Setup> {
    let front = SocketAddr::from((Ipv4Addr::LOCALHOST, free_port()));
    let admin = dir.join("admin.sock");
    let map = dir.join("hosts.map");
    std::fs::write(&map, format!("app.example be_app\n{MOVED_HOST} be_app\n"))?;
    let mut pods = Vec::new();
    for i in 1..=3 {
        pods.push(pod(&format!("pod{i}"))?);
    }
    let moved = pod("moved")?;
    let mut config = format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    retries 3\n    option redispatch\n    \
         timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n\
         frontend fe\n    bind {front}\n    \
         use_backend %[req.hdr(host),lower,map({},be_app)]\n\
         backend be_app\n    balance roundrobin\n",
        admin.display(),
        map.display()
    );
    for (i, p) in pods.iter().enumerate() {
        config.push_str(&format!(
            "    server pod{} {} check inter 300ms rise 1 fall 2\n",
            i + 1,
            p.addr()
        ));
    }
    config.push_str(&format!(
        "backend be_new\n    server moved {}\n",
        moved.addr()
    ));
    Ok(Setup {
        front,
        admin,
        map,
        config,
        pods,
        moved,
    })
}

fn pod(name: &str) -> io::Result<HttpNode> {
    HttpNode::start(
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0),
        HttpOpts::named(name),
    )
}

/// What the load saw, and how long each change took to show.
#[derive(Debug, Default)]
pub struct ChurnResult {
    pub requests: u64,
    /// Requests that did not get a 200 (5xx included) or got no answer at all.
    pub failed: u64,
    pub fivexx: u64,
    pub conn_err: u64,
    /// From `set server … state ready` to the pod's first request, per added pod.
    pub add_to_first: Vec<Duration>,
    /// From `set map` to the moved backend's first request.
    pub map_to_first: Option<Duration>,
    /// From `state maint` to a successful `del server`, per removed pod.
    pub del_wait: Vec<Duration>,
    /// CLI replies that were not the expected ones.
    pub cli_errors: Vec<String>,
    /// Requests each of the six pods received.
    pub per_pod: Vec<(String, usize)>,
}

/// One admin-socket command (the socket closes after it).
pub fn cli(sock: &Path, cmd: &str) -> String {
    let Ok(mut s) = UnixStream::connect(sock) else {
        return String::from("(no admin socket)");
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.write_all(format!("{cmd}\n").as_bytes());
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[derive(Default)]
struct Tally {
    requests: AtomicU64,
    failed: AtomicU64,
    fivexx: AtomicU64,
    conn_err: AtomicU64,
}

/// Reads one response; `Ok((status, close))`.
fn read_response(r: &mut BufReader<TcpStream>) -> io::Result<(u16, bool)> {
    let mut line = String::new();
    if r.read_line(&mut line)? == 0 {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    let status = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or(io::ErrorKind::InvalidData)?;
    let (mut len, mut close) = (0usize, false);
    loop {
        line.clear();
        if r.read_line(&mut line)? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let l = line.trim_end();
        if l.is_empty() {
            break;
        }
        if let Some((k, v)) = l.split_once(':') {
            let (k, v) = (k.trim(), v.trim());
            if k.eq_ignore_ascii_case("content-length") {
                len = v.parse().map_err(|_| io::ErrorKind::InvalidData)?;
            } else if k.eq_ignore_ascii_case("connection") && v.eq_ignore_ascii_case("close") {
                close = true;
            }
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body)?;
    Ok((status, close))
}

fn client(
    front: SocketAddr,
    keepalive: bool,
    n: usize,
    pace: Duration,
    stop: &AtomicBool,
    t: &Tally,
) {
    let mut conn: Option<BufReader<TcpStream>> = None;
    let mut i = 0usize;
    while !stop.load(Ordering::Relaxed) {
        i += 1;
        // Every fourth request asks for the host the map moves.
        let host = if (i + n).is_multiple_of(4) {
            MOVED_HOST
        } else {
            "app.example"
        };
        let req = format!(
            "GET /churn HTTP/1.1\r\nHost: {host}\r\n{}\r\n",
            if keepalive {
                ""
            } else {
                "Connection: close\r\n"
            }
        );
        t.requests.fetch_add(1, Ordering::Relaxed);
        let outcome = (|| -> io::Result<(u16, bool)> {
            if conn.is_none() {
                let s = TcpStream::connect_timeout(&front, Duration::from_secs(2))?;
                s.set_read_timeout(Some(Duration::from_secs(10)))?;
                s.set_nodelay(true)?;
                conn = Some(BufReader::new(s));
            }
            let r = conn.as_mut().ok_or(io::ErrorKind::NotConnected)?;
            r.get_mut().write_all(req.as_bytes())?;
            read_response(r)
        })();
        match outcome {
            Ok((status, close)) => {
                if status != 200 {
                    t.failed.fetch_add(1, Ordering::Relaxed);
                }
                if status >= 500 {
                    t.fivexx.fetch_add(1, Ordering::Relaxed);
                }
                if close || !keepalive {
                    conn = None;
                }
            }
            Err(_) => {
                t.failed.fetch_add(1, Ordering::Relaxed);
                t.conn_err.fetch_add(1, Ordering::Relaxed);
                conn = None;
            }
        }
        thread::sleep(pace);
    }
}

fn wait(timeout: Duration, mut f: impl FnMut() -> bool) -> Option<Duration> {
    let t0 = Instant::now();
    while t0.elapsed() < timeout {
        if f() {
            return Some(t0.elapsed());
        }
        thread::sleep(Duration::from_millis(2));
    }
    None
}

/// `scur` of `be/srv` in `show stat`, if the row exists.
fn scur(sock: &Path, be: &str, srv: &str) -> Option<u64> {
    cli(sock, "show stat").lines().find_map(|l| {
        let f: Vec<&str> = l.split(',').collect();
        (f.len() > 4 && f[0] == be && f[1] == srv)
            .then(|| f[4].parse().ok())
            .flatten()
    })
}

/// Runs the rolling update against a balancer already started on `s.config`.
pub fn run(s: Setup, spec: &ChurnSpec, log: &mut dyn FnMut(String)) -> ChurnResult {
    let Setup {
        front,
        admin,
        map,
        mut pods,
        moved,
        ..
    } = s;
    let stop = Arc::new(AtomicBool::new(false));
    let tally = Arc::new(Tally::default());
    let mut threads = Vec::new();
    for k in 0..spec.keepalive + spec.newconn {
        let (stop, tally) = (stop.clone(), tally.clone());
        let (pace, keepalive) = (spec.pace, k < spec.keepalive);
        threads.push(thread::spawn(move || {
            client(front, keepalive, k, pace, &stop, &tally)
        }));
    }
    let mut res = ChurnResult::default();
    let expect = |cmd: &str, want: &str, res: &mut ChurnResult| {
        let r = cli(&admin, cmd);
        // An empty `want` means HAProxy's silent success.
        let ok = if want.is_empty() {
            r.trim().is_empty()
        } else {
            r.contains(want)
        };
        if !ok {
            res.cli_errors.push(format!("{cmd}: {:?}", r.trim_end()));
        }
    };
    thread::sleep(spec.settle);
    let served = Arc::new(Mutex::new(Vec::<(String, usize)>::new()));

    // 3 → 6: each new pod is added, health-checked and made ready.
    for i in 4..=6 {
        let Ok(p) = pod(&format!("pod{i}")) else {
            res.cli_errors.push(format!("pod{i}: no port"));
            continue;
        };
        let name = format!("be_app/pod{i}");
        expect(
            &format!(
                "add server {name} {} check inter 300ms rise 1 fall 2",
                p.addr()
            ),
            "New server registered.",
            &mut res,
        );
        expect(&format!("enable health {name}"), "", &mut res);
        expect(&format!("set server {name} state ready"), "", &mut res);
        match wait(Duration::from_secs(15), || p.request_count() > 0) {
            Some(d) => res.add_to_first.push(d),
            None => res.cli_errors.push(format!("{name}: no request in 15 s")),
        }
        log(format!("added {name}"));
        pods.push(p);
        thread::sleep(spec.settle);
    }

    // The controller moves a host to another backend.
    expect(
        &format!("set map {} {MOVED_HOST} be_new", map.display()),
        "",
        &mut res,
    );
    res.map_to_first = wait(Duration::from_secs(15), || moved.request_count() > 0);
    log("map set".into());
    thread::sleep(spec.settle);

    // 6 → 3: the old pods drain, go to maintenance, are deleted, and only then stop.
    for i in 1..=3 {
        let name = format!("be_app/pod{i}");
        expect(&format!("set server {name} state drain"), "", &mut res);
        wait(Duration::from_secs(10), || {
            scur(&admin, "be_app", &format!("pod{i}")) == Some(0)
        });
        expect(&format!("set server {name} state maint"), "", &mut res);
        let mut last = String::new();
        let t = wait(Duration::from_secs(30), || {
            last = cli(&admin, &format!("del server {name}"));
            last.contains("Server deleted.")
        });
        match t {
            Some(d) => res.del_wait.push(d),
            None => res
                .cli_errors
                .push(format!("del server {name}: {:?}", last.trim_end())),
        }
        if let Some(pos) = pods.iter().position(|p| p.name() == format!("pod{i}")) {
            let p = pods.remove(pos);
            lock(&served).push((p.name().to_string(), p.request_count()));
            drop(p);
        }
        log(format!("removed {name}"));
        thread::sleep(spec.settle);
    }
    thread::sleep(spec.settle);
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        let _ = t.join();
    }
    for p in &pods {
        lock(&served).push((p.name().to_string(), p.request_count()));
    }
    res.requests = tally.requests.load(Ordering::Relaxed);
    res.failed = tally.failed.load(Ordering::Relaxed);
    res.fivexx = tally.fivexx.load(Ordering::Relaxed);
    res.conn_err = tally.conn_err.load(Ordering::Relaxed);
    res.per_pod = lock(&served).clone();
    res
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn ms(d: Duration) -> String {
    format!("{:.0}ms", d.as_secs_f64() * 1000.0)
}

fn max_ms(v: &[Duration]) -> String {
    v.iter().max().map_or("-".into(), |d| ms(*d))
}

pub fn header() -> String {
    format!(
        "{:<18} {:>8} {:>7} {:>5} {:>9} {:>14} {:>12} {:>12}",
        "balancer",
        "requests",
        "failed",
        "5xx",
        "conn_err",
        "add→first max",
        "map→first",
        "del wait max"
    )
}

pub fn row(balancer: &str, r: &ChurnResult) -> String {
    format!(
        "{:<18} {:>8} {:>7} {:>5} {:>9} {:>14} {:>12} {:>12}",
        balancer,
        r.requests,
        r.failed,
        r.fivexx,
        r.conn_err,
        max_ms(&r.add_to_first),
        r.map_to_first.map_or("-".into(), ms),
        max_ms(&r.del_wait)
    )
}
