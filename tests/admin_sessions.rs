//! `show sess` and `shutdown session` on a live `mode tcp` stream: the stream is listed with its
//! frontend, backend, server and source; `shutdown session <id>` ends it (the client sees the
//! connection close) and its log line reads `K-`, as HAProxy 2.6's does; the errors are
//! HAProxy's bytes. The same scenario runs on HAProxy when installed and the termination codes
//! and error replies must match.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::time::Duration;

use backend::{free_port, lo};
use proxy::{Proc, TempDir, admin_cli};

/// An echo server (each connection closed when its client closes), until `stop` is set.
fn echo_server(
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            let Ok((mut c, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            std::thread::spawn(move || {
                c.set_nonblocking(false).unwrap();
                c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
                let mut buf = [0u8; 1024];
                while let Ok(n) = c.read(&mut buf) {
                    if n == 0 || c.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            });
        }
    });
    (port, t)
}

/// The run: (log line's termination state, the error replies, what `show sess` listed).
fn scenario(haproxy: bool) -> Option<(String, Vec<String>, String)> {
    let dir = TempDir::new(if haproxy { "sess-ha" } else { "sess-pc" });
    let sock = dir.0.join("admin.sock");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (echo, echo_t) = echo_server(std::sync::Arc::clone(&stop));
    let port = free_port();
    let cfg = format!(
        "global\n    stats socket {sock} mode 600 level admin\n\
         defaults\n    mode tcp\n    log stdout format raw local0\n    option tcplog\n    \
         timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n\
         frontend f\n    bind 127.0.0.1:{port}\n    log global\n    default_backend be\n\
         backend be\n    server s1 127.0.0.1:{echo}\n",
        sock = sock.display(),
    );
    let p = if haproxy {
        Proc::haproxy(&cfg, lo(port))?
    } else {
        Proc::portcullis(&cfg, lo(port))
    };
    let mut c = TcpStream::connect(lo(port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"ping").unwrap();
    let mut buf = [0u8; 4];
    c.read_exact(&mut buf).unwrap();
    assert_eq!(&buf, b"ping", "the stream relays");
    let src = c.local_addr().unwrap().to_string();
    let list = admin_cli(&sock, "show sess");
    let line = list
        .lines()
        .find(|l| l.contains(" fe=f "))
        .unwrap_or_else(|| panic!("stream not listed: {list:?}"))
        .to_string();
    assert!(
        line.contains(&format!("src={src} fe=f be=be srv=s1 ")),
        "{line}"
    );
    let id = line.split(':').next().unwrap().to_string();
    let detail = admin_cli(&sock, &format!("show sess {id}"));
    assert!(
        detail.starts_with(&format!("{id}: ["))
            && detail.contains("  frontend=f (id=")
            && detail.contains("  backend=be (id=")
            && detail.contains("  server=s1 (id="),
        "{detail}"
    );
    let errors: Vec<String> = [
        "shutdown session",
        "shutdown session 0x1234",
        "show sess 0x1234",
    ]
    .iter()
    .map(|cmd| admin_cli(&sock, cmd))
    .collect();
    assert_eq!(admin_cli(&sock, &format!("shutdown session {id}")), "\n");
    // The client sees its connection end.
    let mut rest = Vec::new();
    let _ = c.read_to_end(&mut rest);
    let log = p
        .wait_log(&format!("{src} ["), Duration::from_secs(10))
        .expect("the stream's log line");
    let term = log
        .split_whitespace()
        .nth(6)
        .unwrap_or_default()
        .to_string();
    assert!(
        backend::wait_until(Duration::from_secs(10), || !admin_cli(&sock, "show sess")
            .contains(" fe=f ")),
        "the stream is gone"
    );
    drop(c);
    drop(p);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = echo_t.join();
    Some((
        term,
        errors,
        line.split(' ').nth(1).unwrap_or("").to_string(),
    ))
}

#[test]
fn shutdown_session_kills_a_live_stream_as_haproxy() {
    let p = scenario(false).expect("portcullis");
    assert_eq!(p.0, "K-", "termination state");
    assert_eq!(
        p.1,
        [
            "Session pointer expected (use 'show sess').\n\n",
            "No such session (use 'show sess').\n\n",
            "Session not found.\n\n"
        ]
    );
    if Path::new("/usr/sbin/haproxy").exists()
        && let Some(h) = scenario(true)
    {
        assert_eq!(h, p, "HAProxy 2.6 vs portcullis");
    }
}
