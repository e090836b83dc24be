//! `tcp-request content` rules in a `mode tcp` backend, run once the backend is chosen, after
//! the frontend's, with the backend's own `inspect-delay`: a differential run against HAProxy
//! 2.6 (the answers clients get, the log lines, the counters).

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/raw.rs"]
mod raw;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use backend::{free_port, lo};
use proxy::{Proc, TempDir};

/// One client from `src` sending `data` (after `gap`), then half-closing: what it got back.
fn client(px: SocketAddr, src: [u8; 4], data: &[u8], gap: Duration) -> String {
    let mut s = raw::connect_from(src, px, Duration::from_secs(8));
    std::thread::sleep(gap);
    if s.write_all(data).is_err() {
        return "refused".into();
    }
    let _ = s.shutdown(std::net::Shutdown::Write);
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) if out.is_empty() => "closed".into(),
        Ok(_) => String::from_utf8_lossy(&out).into_owned(),
        Err(_) => "refused".into(),
    }
}

fn config(port: u16, sock: &std::path::Path, srv: SocketAddr) -> String {
    format!(
        "global\n    stats socket {sock} level admin\n\ndefaults\n    mode tcp\n    log stdout format raw local0\n    \
         log-format \"%ci %ft %b/%s %ts %U %B\"\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    tcp-request inspect-delay 3s\n    tcp-request content reject if {{ req.len ge 4 }} {{ src 127.0.0.4 }}\n    tcp-request content accept if {{ req.len ge 4 }}\n    default_backend guarded\n\n\
         backend guarded\n    acl internal_networks src 127.0.0.1 127.0.0.2\n    tcp-request inspect-delay 3s\n    \
         tcp-request content reject if ! internal_networks\n    \
         tcp-request content reject if {{ src 127.0.0.2 }} {{ req.len ge 4 }}\n    server s {srv}\n",
        sock = sock.display(),
    )
}

#[derive(Debug, PartialEq)]
struct Observed {
    answers: Vec<String>,
    logs: Vec<String>,
    /// (proxy, server, stot, dreq, bin) of the FRONTEND and BACKEND rows.
    stats: Vec<Vec<String>>,
}

fn observe(haproxy: bool, srv: SocketAddr) -> Option<Observed> {
    let port = free_port();
    let dir = TempDir::new("tcp-be-rules");
    let sock = dir.0.join("admin.sock");
    let cfg = config(port, &sock, srv);
    let p = if haproxy {
        Proc::haproxy(&cfg, lo(port))?
    } else {
        Proc::portcullis(&cfg, lo(port))
    };
    let px = lo(port);
    let short = Duration::from_millis(50);
    let answers = vec![
        // Allowed by the backend's rules: the server gets every byte.
        client(px, [127, 0, 0, 1], b"HELO", Duration::ZERO),
        // Refused by the backend (source not internal).
        client(px, [127, 0, 0, 3], b"HELO", Duration::ZERO),
        // Refused by the frontend before any backend. The frontend waits for 4 bytes (or the
        // FIN) before it decides: what the rejected sessions read is then never a race.
        client(px, [127, 0, 0, 4], b"HELO", Duration::ZERO),
        // The length rule waits for 4 bytes within the backend's inspect-delay.
        client(px, [127, 0, 0, 2], b"QUIT", Duration::from_millis(300)),
        client(px, [127, 0, 0, 2], b"QUI", short),
    ];
    // Lines come once sessions end; the start's readiness probe leaves one more.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut logs;
    loop {
        logs = p
            .log_lines()
            .into_iter()
            .filter(|l| l.contains(" fe "))
            .collect::<Vec<_>>();
        if logs.len() > answers.len() || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    logs.sort();
    let stats = proxy::stat_table(
        &sock,
        |px, _| px == "fe" || px == "guarded",
        &["pxname", "svname", "stot", "dreq", "bin"],
    );
    Some(Observed {
        answers,
        logs,
        stats,
    })
}

#[test]
fn backend_content_rules_as_haproxy() {
    let srv = raw::counting_server("got", Duration::from_millis(500));
    let ours = observe(false, srv).expect("portcullis");
    assert_eq!(
        ours.answers,
        ["got 4", "closed", "closed", "closed", "got 3"],
        "{ours:?}"
    );
    assert!(
        ours.logs
            .contains(&"127.0.0.3 fe guarded/<NOSRV> PR 4 0".to_string()),
        "{ours:?}"
    );
    if let Some(h) = observe(true, srv) {
        assert_eq!(ours, h);
    }
}
