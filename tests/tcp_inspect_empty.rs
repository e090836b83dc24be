//! A `mode tcp` client that closes without sending anything while `tcp-request content` rules
//! wait for its bytes: HAProxy 2.6 tries the server once and, when that fails, ends the stream
//! at once, logged `--` with one retry counted (no connection error), instead of retrying and
//! logging `SC`. A client that did send something is retried for as usual, and its bytes are
//! read so that the close is a plain FIN, not a reset. A differential run against HAProxy 2.6.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use backend::{RefusingPort, free_port, lo, wait_until};
use proxy::{Proc, TempDir, admin_cli};

fn config(dir: &std::path::Path, (p1, p2): (u16, u16), srv: SocketAddr) -> String {
    format!(
        "global\n    stats socket {}/admin.sock level admin\n\
         defaults\n    mode tcp\n    log stdout format raw local0\n    retries 1\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         \x20   log-format \"%ft %b/%s %ts Tc=%Tc rc=%rc U=%U B=%B\"\n\n\
         frontend fe\n    bind 127.0.0.1:{p1}\n    tcp-request inspect-delay 3s\n\
         \x20   tcp-request content accept if {{ req.len gt 0 }}\n    default_backend be\n\
         backend be\n    server s {srv}\n\n\
         frontend fe2\n    bind 127.0.0.1:{p2}\n    default_backend be2\n\
         backend be2\n    tcp-request inspect-delay 3s\n\
         \x20   tcp-request content accept if {{ req.len gt 0 }}\n    server s {srv}\n",
        dir.display()
    )
}

/// Connects, sends `data` (if any), half-closes, reads until the proxy closes: `eof` or
/// `reset`, and whether it came within the second.
fn client(px: SocketAddr, data: &[u8]) -> String {
    let mut s = TcpStream::connect(px).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(6))).unwrap();
    let t = Instant::now();
    if !data.is_empty() {
        s.write_all(data).unwrap();
    }
    s.shutdown(Shutdown::Write).unwrap();
    let mut out = Vec::new();
    let end = match s.read_to_end(&mut out) {
        Ok(_) => "eof",
        Err(_) => "reset",
    };
    let fast = if t.elapsed() < Duration::from_millis(900) {
        "at once"
    } else {
        "later"
    };
    format!("{} {end} {fast}", String::from_utf8_lossy(data))
}

fn run(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let dir = TempDir::new("tcp-inspect-empty");
    let srv = RefusingPort::new().expect("refusing port");
    let (p1, p2) = (free_port(), free_port());
    let p = start(&config(&dir.0, (p1, p2), srv.addr()), lo(p1))?;
    // Closed at once (no half-close first), on a frontend's and on a backend's rules.
    for port in [p1, p2] {
        drop(TcpStream::connect(lo(port)).unwrap());
        std::thread::sleep(Duration::from_millis(100));
    }
    let mut seen = vec![client(lo(p1), b""), client(lo(p1), b"x")];
    // The start's readiness probe makes one more line on `fe`.
    let want = 5;
    wait_until(Duration::from_secs(5), || p.log_lines().len() >= want);
    let mut logs = p.log_lines();
    logs.sort();
    seen.extend(logs);
    for l in admin_cli(&dir.0.join("admin.sock"), "show stat").lines() {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() > 16 && f[0] != "# pxname" {
            // stot, econ, wretr
            seen.push(format!("{}/{} {} {} {}", f[0], f[1], f[7], f[13], f[15]));
        }
    }
    Some(seen)
}

#[test]
fn empty_close_during_inspection_as_haproxy() {
    let got = run(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    let has = |s: &str| got.iter().any(|l| l == s);
    assert!(has(" eof at once") && has("x eof later"), "{got:#?}");
    assert!(has("fe2 be2/s -- Tc=-1 rc=1 U=0 B=0"), "{got:#?}");
    assert!(has("fe be/s SC Tc=-1 rc=1 U=1 B=0"), "{got:#?}");
    if let Some(reference) = run(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}
