//! Error pages and `monitor-uri` against HAProxy 2.6: the same configuration (`errorfile`
//! with Debian's page and a page of our own, `errorloc302`, `errorfiles` + `http-errors`,
//! `monitor-uri`, deny statuses, a backend without servers) runs under each, each in a fresh
//! network namespace with only `lo`, and every reply must be byte for byte HAProxy's, with the
//! same keep-alive or close outcome.

#[path = "support/netns.rs"]
mod netns;

use netns::{in_netns, spawn_isolated};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const PORT: u16 = 18500;

struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The response to `req` on a fresh connection: its bytes, then `<close>` when the server
/// closed after it or `<open>` when the connection stayed open.
fn exchange(req: &str) -> String {
    let t = Instant::now();
    let mut s = loop {
        match TcpStream::connect(("127.0.0.1", PORT)) {
            Ok(s) => break s,
            Err(e) if t.elapsed() > Duration::from_secs(10) => panic!("connect: {e}"),
            Err(_) => std::thread::sleep(Duration::from_millis(100)),
        }
    };
    s.write_all(req.as_bytes()).unwrap();
    let head_req = req.starts_with("HEAD ");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    loop {
        // A complete response with a length: see whether the server closes after it.
        if let Some(end) = complete(&out, head_req) {
            out.truncate(end);
            s.set_read_timeout(Some(Duration::from_millis(1500)))
                .unwrap();
            let closed = matches!(s.read(&mut buf), Ok(0));
            return format!(
                "{}{}",
                String::from_utf8_lossy(&out),
                if closed { "<close>" } else { "<open>" }
            );
        }
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    format!("{}<close>", String::from_utf8_lossy(&out))
}

/// Where a response with a `content-length` (or a HEAD reply) ends, once it is all there.
fn complete(b: &[u8], head_req: bool) -> Option<usize> {
    let h = b.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    if head_req {
        return Some(h);
    }
    let head = String::from_utf8_lossy(&b[..h]).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))?
        .trim()
        .parse()
        .ok()?;
    (b.len() >= h + len).then_some(h + len)
}

const REQUESTS: &[&str] = &[
    "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    "HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /healthz HTTP/1.0\r\n\r\n",
    "GET /healthz?x HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /deny HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /deny HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
    "GET /502 HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /404 HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET /429 HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: x\r\n\r\n",
    "GET / HTTP/1.0\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
];

fn config(dir: &Path) -> String {
    std::fs::write(
        dir.join("403.http"),
        "HTTP/1.0 403 Go Away\r\nContent-Type: text/plain\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope",
    )
    .unwrap();
    std::fs::write(
        dir.join("404.http"),
        "HTTP/1.1 404 Not Here\r\nX-Page: site\r\nContent-Length: 7\r\n\r\nmissing",
    )
    .unwrap();
    format!(
        "defaults\n mode http\n timeout client 5s\n timeout server 5s\n timeout connect 1s\n\
         errorfile 503 /etc/haproxy/errors/503.http\n errorfile 403 {d}/403.http\n\
         errorloc302 502 http://example.com/moved\n\
         http-errors site\n errorfile 404 {d}/404.http\n\
         frontend f\n bind 127.0.0.1:{PORT}\n monitor-uri /healthz\n errorfiles site 404\n\
         http-request deny if {{ path /deny }}\n\
         http-request deny deny_status 502 if {{ path /502 }}\n\
         http-request deny deny_status 404 if {{ path /404 }}\n\
         http-request deny deny_status 429 if {{ path /429 }}\n\
         default_backend b\nbackend b\n",
        d = dir.display()
    )
}

fn replies(program: &str, cfg: &Path) -> Vec<String> {
    let mut cmd = Command::new(program);
    if program.ends_with("portcullis") {
        let io = std::env::var("PORTCULLIS_IO").unwrap_or_else(|_| "auto".into());
        cmd.args(["--io", &io]);
    }
    cmd.arg("-db")
        .arg("-f")
        .arg(cfg)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let p = Proc(spawn_isolated(cmd));
    let out = in_netns(p.0.id(), || REQUESTS.iter().map(|r| exchange(r)).collect());
    drop(p);
    out
}

#[test]
fn error_pages_and_monitor_uri_are_haproxys_bytes() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0
        || !Path::new("/usr/sbin/haproxy").exists()
        || !Path::new("/etc/haproxy/errors/503.http").exists()
    {
        eprintln!("notice: needs root, HAProxy and Debian's error pages; test skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("portcullis-pages-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cfg = dir.join("pages.cfg");
    std::fs::write(&cfg, config(&dir)).unwrap();
    let want = replies("/usr/sbin/haproxy", &cfg);
    let got = replies(env!("CARGO_BIN_EXE_portcullis"), &cfg);
    let _ = std::fs::remove_dir_all(&dir);
    for ((req, w), g) in REQUESTS.iter().zip(&want).zip(&got) {
        assert_eq!(g, w, "{req:?}");
    }
    // The configured pages are really in use (not HAProxy's and our canned ones agreeing).
    assert!(want[4].starts_with("HTTP/1.0 403 Go Away"), "{}", want[4]);
    assert!(want[7].contains("x-page: site"), "{}", want[7]);
}
