//! `show errors` against HAProxy 2.6: malformed requests sent by the test (refused with 400)
//! and a malformed response from a test server (refused with 502) are captured per proxy and
//! dumped in HAProxy's layout; the same script on both must give the same bytes once the dates
//! and the client ports are masked.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use backend::{free_port, lo};
use proxy::{Proc, TempDir, admin_cli};

/// A server answering every request with a response whose header line has no colon.
fn bad_server(stop: Arc<AtomicBool>) -> (u16, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let port = l.local_addr().unwrap().port();
    let t = std::thread::spawn(move || {
        while !stop.load(Ordering::Relaxed) {
            let Ok((mut c, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(10));
                continue;
            };
            c.set_nonblocking(false).unwrap();
            c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = Vec::new();
            let mut b = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match c.read(&mut b) {
                    Ok(n) if n > 0 => buf.extend_from_slice(&b[..n]),
                    _ => break,
                }
            }
            let _ = c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nBroken header\r\n\r\n");
        }
    });
    (port, t)
}

fn send(port: u16, raw: &[u8]) -> String {
    let mut c = TcpStream::connect(lo(port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(raw).unwrap();
    let mut out = Vec::new();
    let _ = c.read_to_end(&mut out);
    String::from_utf8_lossy(&out)
        .lines()
        .next()
        .unwrap_or("")
        .to_string()
}

/// Dates (`[dd/Mmm/yyyy:hh:mm:ss.mmm]`) and `src ip:port` masked.
fn mask(s: &str) -> String {
    s.split_inclusive('\n')
        .map(|l| {
            let mut l = l.to_string();
            if let (Some(a), Some(b)) = (l.find('['), l.find(']'))
                && b > a
                && l[a..b].contains('/')
            {
                l.replace_range(a..=b, "[DATE]");
            }
            // Bit 0x8 of the H1 stream flags says the server's close had been read when the
            // error was found: HAProxy sets it or not depending on timing (the test server
            // closes right after its bad response).
            if let Some(i) = l.find("H1 stream flags 0x") {
                let at = i + "H1 stream flags 0x".len();
                if let Some(v) = l
                    .get(at..at + 8)
                    .and_then(|h| u32::from_str_radix(h, 16).ok())
                {
                    l.replace_range(at..at + 8, &format!("{:08x}", v & !0x8));
                }
            }
            if let Some(i) = l.find(", src ") {
                let end = l[i..].find('\n').map_or(l.len(), |e| i + e);
                l.replace_range(i..end, ", src SRC");
            }
            l
        })
        .collect()
}

const SCRIPT: &[&str] = &[
    "show errors",
    "show errors f request",
    "show errors f response",
    "show errors be",
    "show errors be response",
    "show errors nope",
    "show errors -1",
    "show errors 2 request",
    "show errors 3",
];

fn scenario(haproxy: bool) -> Option<(Vec<String>, Vec<String>, String)> {
    let dir = TempDir::new(if haproxy { "err-ha" } else { "err-pc" });
    let sock = dir.0.join("admin.sock");
    let stop = Arc::new(AtomicBool::new(false));
    let (srv, t) = bad_server(Arc::clone(&stop));
    let port = free_port();
    let cfg = format!(
        "global\n    stats socket {sock} mode 600 level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\
         frontend f\n    bind 127.0.0.1:{port}\n    default_backend be\n\
         backend be\n    server s1 127.0.0.1:{srv}\n",
        sock = sock.display(),
    );
    let p = if haproxy {
        Proc::haproxy(&cfg, lo(port))?
    } else {
        Proc::portcullis(&cfg, lo(port))
    };
    let empty = mask(&admin_cli(&sock, "show errors"));
    let statuses = vec![
        send(port, b"GET / HTTP/1.1\r\nHo st: x\r\nX: \x01y\r\n\r\n"),
        send(port, b"GET / HTTP/1.1\r\nHost: x\r\nBad\r\n\r\n"),
        send(
            port,
            b"GET /ok HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        ),
    ];
    let replies = SCRIPT.iter().map(|c| mask(&admin_cli(&sock, c))).collect();
    drop(p);
    stop.store(true, Ordering::Relaxed);
    let _ = t.join();
    Some((statuses, replies, empty))
}

#[test]
fn show_errors_matches_haproxy() {
    let p = scenario(false).expect("portcullis");
    assert_eq!(
        p.0,
        [
            "HTTP/1.1 400 Bad request",
            "HTTP/1.1 400 Bad request",
            "HTTP/1.1 502 Bad Gateway"
        ]
    );
    assert_eq!(p.2, "Total events captured on [DATE] : 0\n\n");
    assert!(
        p.1[0].contains("  00016  Host: x\\r\\n\n  00025  Bad\\r\\n\n"),
        "{}",
        p.1[0]
    );
    if !Path::new("/usr/sbin/haproxy").exists() {
        return;
    }
    let h = scenario(true).expect("haproxy");
    let mut diffs = Vec::new();
    for ((cmd, a), b) in SCRIPT.iter().zip(&h.1).zip(&p.1) {
        if a != b {
            diffs.push(format!("[{cmd}]\n  haproxy    {a:?}\n  portcullis {b:?}"));
        }
    }
    assert_eq!(h.0, p.0);
    assert!(
        diffs.is_empty(),
        "differences from HAProxy 2.6:\n{}",
        diffs.join("\n")
    );
}
