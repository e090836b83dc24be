//! `option logasap`: the log line is written as soon as the server connection is up (`mode
//! tcp`) or the server's response head is forwarded (`mode http`), with `+` before `%Tt`, `%Ta`
//! and `%B`, and not again at the end. A differential run against HAProxy 2.6: the lines are
//! compared with their times reduced to their shape, and each must be out while the session is
//! still running.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use backend::{free_port, lo};
use proxy::Proc;

/// Holds each exchange open this long after the first bytes, so the early line is seen before
/// the end.
const HOLD: Duration = Duration::from_millis(1500);

/// A TCP server that greets first, then waits for the client's bytes and closes.
fn greeting_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let _ = s.write_all(b"hello\n");
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 64];
                let _ = s.read(&mut buf);
            });
        }
    });
    addr
}

/// An HTTP server sending the head at once, the body `HOLD` later.
fn slow_body_server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut req = Vec::new();
                let mut buf = [0u8; 1024];
                while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                    match s.read(&mut buf) {
                        Ok(n) if n > 0 => req.extend_from_slice(&buf[..n]),
                        _ => return,
                    }
                }
                let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n");
                std::thread::sleep(HOLD);
                let _ = s.write_all(b"hello");
            });
        }
    });
    addr
}

/// The readiness probe goes to a frontend that does not log.
fn config(ports: [u16; 3], tsrv: SocketAddr, hsrv: SocketAddr) -> String {
    let [tport, hport, probe] = ports;
    format!(
        "defaults\n    option logasap\n    timeout connect 2s\n    \
         timeout client 5s\n    timeout server 5s\n\n\
         frontend ft\n    mode tcp\n    bind 127.0.0.1:{tport}\n    log stdout format raw local0\n    \
         log-format \"%ft %b/%s %ts %U %B %Tw %Tt\"\n    default_backend bt\n\n\
         backend bt\n    mode tcp\n    server s {tsrv}\n\n\
         frontend fh\n    mode http\n    bind 127.0.0.1:{hport}\n    log stdout format raw local0\n    \
         log-format \"%ft %b/%s %ST %tsc %U %B %Tw %Tr %Ta %Tt %r\"\n    default_backend bh\n\n\
         backend bh\n    mode http\n    server s {hsrv}\n\n\
         frontend probe\n    mode http\n    bind 127.0.0.1:{probe}\n    default_backend bh\n"
    )
}

/// `+123` → `+N`, `123` → `N`, `-1` stays: the shape of a time; the fields before the
/// first time (`%U`, `%B` at 3 and 4 on both lines) are kept.
fn shape(line: &str) -> String {
    let http = line.starts_with("fh ");
    line.split(' ')
        .enumerate()
        .map(|(i, w)| {
            if i == 3 + usize::from(http) || i == 4 + usize::from(http) {
                return w.to_string();
            }
            let (sign, digits) = w.strip_prefix('+').map_or(("", w), |d| ("+", d));
            if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
                format!("{sign}N")
            } else {
                w.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Waits for a line starting with `prefix`; how long it took.
fn wait_line(p: &Proc, prefix: &str) -> Option<String> {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        if let Some(l) = p.log_lines().into_iter().find(|l| l.starts_with(prefix)) {
            return Some(l);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// The TCP and HTTP lines (exact, for the byte counts; shaped) and the number of lines.
fn observe(haproxy: bool, tsrv: SocketAddr, hsrv: SocketAddr) -> Option<(Vec<String>, usize)> {
    let (tport, hport, probe) = (free_port(), free_port(), free_port());
    let cfg = config([tport, hport, probe], tsrv, hsrv);
    let p = if haproxy {
        Proc::haproxy(&cfg, lo(probe))?
    } else {
        Proc::portcullis(&cfg, lo(probe))
    };
    let mut lines = Vec::new();
    // TCP: the line is out once the greeting came, while the client still holds the session.
    let mut c = TcpStream::connect(lo(tport)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 6];
    c.read_exact(&mut buf).unwrap();
    let early = wait_line(&p, "ft ");
    assert!(early.is_some(), "no early TCP line: {:?}", p.log_lines());
    lines.extend(early.map(|l| shape(&l)));
    c.write_all(b"bye").unwrap();
    drop(c);
    // HTTP: the line is out before the body comes.
    let mut h = TcpStream::connect(lo(hport)).unwrap();
    h.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    h.write_all(b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let t0 = Instant::now();
    let early = wait_line(&p, "fh ");
    assert!(
        early.is_some() && t0.elapsed() < HOLD,
        "no early HTTP line: {:?}",
        p.log_lines()
    );
    lines.extend(early.map(|l| shape(&l)));
    let mut out = Vec::new();
    let _ = h.read_to_end(&mut out);
    assert!(out.ends_with(b"hello"), "{}", String::from_utf8_lossy(&out));
    // Nothing more at the end of either session.
    std::thread::sleep(Duration::from_millis(300));
    let n = p
        .log_lines()
        .iter()
        .filter(|l| l.starts_with("ft ") || l.starts_with("fh "))
        .count();
    Some((lines, n))
}

#[test]
fn logasap_lines_as_haproxy() {
    let (tsrv, hsrv) = (greeting_server(), slow_body_server());
    let ours = observe(false, tsrv, hsrv).expect("portcullis");
    assert_eq!(ours.1, 2, "{ours:?}");
    assert!(ours.0[0].ends_with(" +N"), "{ours:?}");
    if let Some(theirs) = observe(true, tsrv, hsrv) {
        assert_eq!(ours, theirs);
    }
}
