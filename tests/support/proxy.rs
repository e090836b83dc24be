//! Test harness for the real binary: start portcullis (or HAProxy) on a config, capture its log
//! lines from stdout, and a small blocking HTTP/1.1 client for raw requests.
#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The I/O engine under test, from `PORTCULLIS_IO` (set by `cargo xtask test`), default auto.
pub fn io_engine() -> String {
    std::env::var("PORTCULLIS_IO").unwrap_or_else(|_| "auto".into())
}

pub struct Proc {
    child: Child,
    pub lines: Arc<Mutex<Vec<String>>>,
    pub stderr: Arc<Mutex<Vec<String>>>,
    _dir: TempDir,
}

pub struct TempDir(pub std::path::PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let p = std::env::temp_dir().join(format!("portcullis-{tag}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&p).expect("temp dir");
        TempDir(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn capture(r: impl Read + Send + 'static, into: Arc<Mutex<Vec<String>>>) {
    std::thread::spawn(move || {
        for line in BufReader::new(r).lines() {
            let Ok(line) = line else { break };
            into.lock().unwrap().push(line);
        }
    });
}

/// The binary with `--io <engine>`, `args` and `-f cfg`, its output discarded: for tests that
/// need the process itself (inherited descriptors, signals, daemon mode) rather than a [`Proc`].
pub fn portcullis_command<S: AsRef<std::ffi::OsStr>>(args: &[S], cfg: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    c.args(["--io", &io_engine()])
        .args(args)
        .arg("-f")
        .arg(cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    c
}

impl Proc {
    /// Starts portcullis on `cfg` and waits until `wait_port` accepts connections.
    pub fn portcullis(cfg: &str, wait_port: SocketAddr) -> Proc {
        let mut args = vec!["--io".to_string(), io_engine()];
        args.push("-db".into());
        Self::start(env!("CARGO_BIN_EXE_portcullis"), &args, cfg, wait_port)
    }

    /// Like [`Proc::portcullis`], with extra environment variables (`"${VAR}"` in configs).
    pub fn portcullis_env(cfg: &str, wait_port: SocketAddr, env: &[(&str, &str)]) -> Proc {
        let mut args = vec!["--io".to_string(), io_engine()];
        args.push("-db".into());
        Self::start_env(env!("CARGO_BIN_EXE_portcullis"), &args, cfg, wait_port, env)
    }

    /// Starts Debian's HAProxy on `cfg`, or None when it is not installed.
    pub fn haproxy(cfg: &str, wait_port: SocketAddr) -> Option<Proc> {
        let bin = "/usr/sbin/haproxy";
        if !std::path::Path::new(bin).exists() {
            eprintln!("haproxy not installed: differential part skipped");
            return None;
        }
        Some(Self::start(bin, &["-db".to_string()], cfg, wait_port))
    }

    fn start(bin: &str, extra: &[String], cfg: &str, wait_port: SocketAddr) -> Proc {
        Self::start_env(bin, extra, cfg, wait_port, &[])
    }

    fn start_env(
        bin: &str,
        extra: &[String],
        cfg: &str,
        wait_port: SocketAddr,
        env: &[(&str, &str)],
    ) -> Proc {
        let dir = TempDir::new("cfg");
        let path = dir.0.join("test.cfg");
        std::fs::write(&path, cfg).expect("write cfg");
        let mut child = Command::new(bin)
            .envs(env.iter().copied())
            .args(extra)
            .arg("-f")
            .arg(&path)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn proxy");
        let lines = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        capture(child.stdout.take().expect("stdout"), Arc::clone(&lines));
        capture(child.stderr.take().expect("stderr"), Arc::clone(&stderr));
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if TcpStream::connect_timeout(&wait_port, Duration::from_millis(200)).is_ok() {
                // Someone else may hold the port (another process on a shared machine): make
                // sure it is the child that answers, i.e. that it did not exit on a bind error.
                std::thread::sleep(Duration::from_millis(30));
                if let Ok(Some(st)) = child.try_wait() {
                    panic!("{bin} exited with {st}: {:?}", stderr.lock().unwrap());
                }
                break;
            }
            if let Ok(Some(st)) = child.try_wait() {
                panic!("{bin} exited with {st}: {:?}", stderr.lock().unwrap());
            }
            assert!(
                Instant::now() < deadline,
                "{bin} did not listen on {wait_port}: {:?}",
                stderr.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Proc {
            child,
            lines,
            stderr,
            _dir: dir,
        }
    }

    /// Waits for a log line containing `needle`.
    pub fn wait_log(&self, needle: &str, timeout: Duration) -> Option<String> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(l) = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(needle))
            {
                return Some(l.clone());
            }
            if Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    pub fn log_lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[derive(Debug, Clone)]
pub struct Response {
    pub status: u16,
    pub head: String,
    pub body: Vec<u8>,
}

impl Response {
    pub fn header(&self, name: &str) -> Option<String> {
        self.head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Reads one response from `s` (Content-Length, chunked, or until close); None on EOF first.
pub fn read_response(s: &mut TcpStream, head_request: bool) -> Option<Response> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return None,
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let status: u16 = head.split(' ').nth(1)?.parse().ok()?;
    let mut r = Response {
        status,
        head,
        body: Vec::new(),
    };
    if head_request || status == 204 || status == 304 || (100..200).contains(&status) {
        return Some(r);
    }
    if r.header("transfer-encoding")
        .is_some_and(|v| v.eq_ignore_ascii_case("chunked"))
    {
        let mut rd = BufReader::new(s.try_clone().ok()?);
        loop {
            let mut line = String::new();
            rd.read_line(&mut line).ok()?;
            let size = usize::from_str_radix(line.trim().split(';').next()?, 16).ok()?;
            if size == 0 {
                let mut crlf = String::new();
                rd.read_line(&mut crlf).ok()?;
                break;
            }
            let mut chunk = vec![0u8; size + 2];
            rd.read_exact(&mut chunk).ok()?;
            chunk.truncate(size);
            r.body.extend_from_slice(&chunk);
        }
    } else if let Some(cl) = r.header("content-length") {
        let n: usize = cl.parse().ok()?;
        r.body = vec![0u8; n];
        s.read_exact(&mut r.body).ok()?;
    } else {
        let _ = s.read_to_end(&mut r.body);
    }
    Some(r)
}

pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect to proxy");
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Sends `raw` on a new connection and reads one response.
pub fn request(addr: SocketAddr, raw: &str) -> Response {
    let mut s = connect(addr);
    s.write_all(raw.as_bytes()).unwrap();
    read_response(&mut s, raw.starts_with("HEAD ")).expect("a response")
}

pub fn get(addr: SocketAddr, path: &str) -> Response {
    request(
        addr,
        &format!("GET {path} HTTP/1.1\r\nHost: test.local\r\nConnection: close\r\n\r\n"),
    )
}

/// Which fake node answered `GET /` at `addr`: the name in its default-route body
/// (`node=<name> …`, "?" without one), or the status when it is not 200.
pub fn answering_node(addr: SocketAddr) -> String {
    let r = get(addr, "/");
    if r.status != 200 {
        return r.status.to_string();
    }
    r.text()
        .split_whitespace()
        .find_map(|w| w.strip_prefix("node="))
        .unwrap_or("?")
        .to_string()
}

/// Connects to an admin socket, waiting for the proxy to bind it (it does so right after its
/// listeners, which is what [`Proc`] waits for).
pub fn admin_connect(sock: &std::path::Path) -> std::os::unix::net::UnixStream {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match std::os::unix::net::UnixStream::connect(sock) {
            Ok(s) => return s,
            Err(e) if Instant::now() > deadline => {
                panic!("connect admin socket {}: {e}", sock.display())
            }
            Err(_) => std::thread::sleep(Duration::from_millis(20)),
        }
    }
}

/// One admin-socket command and its whole reply (the socket closes after a command).
pub fn admin_cli(sock: &std::path::Path, cmd: &str) -> String {
    admin_cli_payload(sock, cmd, None)
}

/// [`admin_cli`] with an optional payload, sent as socat sends one: `<cmd> <<`, a newline, the
/// payload, a newline.
pub fn admin_cli_payload(sock: &std::path::Path, cmd: &str, payload: Option<&str>) -> String {
    let mut s = admin_connect(sock);
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("read timeout");
    let msg = match payload {
        Some(p) => format!("{cmd} <<\n{p}\n"),
        None => format!("{cmd}\n"),
    };
    s.write_all(msg.as_bytes()).expect("send a command");
    let mut out = String::new();
    s.read_to_string(&mut out).expect("read the reply");
    out
}

/// The `show stat` rows of servers (no FRONTEND/BACKEND lines), each reduced to the given
/// columns joined with `,` (a row missing one is left out).
pub fn server_stat_columns(sock: &std::path::Path, cols: &[usize]) -> Vec<String> {
    admin_cli(sock, "show stat")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.contains(",FRONTEND,") && !l.contains(",BACKEND,"))
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            let picked: Option<Vec<&str>> = cols.iter().map(|c| f.get(*c).copied()).collect();
            Some(picked?.join(","))
        })
        .collect()
}

/// `show stat` by column name: for each row whose (pxname, svname) `keep` accepts, the values
/// of `cols` in that order. Panics on a column the header does not name, and when no row is kept.
pub fn stat_table(
    sock: &std::path::Path,
    keep: impl Fn(&str, &str) -> bool,
    cols: &[&str],
) -> Vec<Vec<String>> {
    let out = admin_cli(sock, "show stat");
    let mut lines = out.lines();
    let head: Vec<&str> = lines
        .next()
        .unwrap_or_default()
        .trim_start_matches("# ")
        .split(',')
        .collect();
    let idx: Vec<usize> = cols
        .iter()
        .map(|c| {
            head.iter()
                .position(|h| h == c)
                .unwrap_or_else(|| panic!("no column {c} in show stat: {out:?}"))
        })
        .collect();
    let rows: Vec<Vec<String>> = lines
        .map(|l| l.split(',').collect::<Vec<_>>())
        .filter(|r| r.len() > 1 && idx.iter().all(|&i| i < r.len()) && keep(r[0], r[1]))
        .map(|r| idx.iter().map(|&i| r[i].to_string()).collect())
        .collect();
    // An empty table would make any comparison of two of them pass.
    assert!(!rows.is_empty(), "no show stat row kept: {out:?}");
    rows
}
