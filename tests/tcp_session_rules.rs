//! `tcp-request session` rules, evaluated once the connection is established (after the PROXY
//! header), before any content: a differential run against HAProxy 2.6 in `mode http` and
//! `mode tcp` (what clients get, the log lines, the `dses`/`dreq`/`stot` counters, the
//! `sess` variables and the session counts of what the rules track).

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

/// A client from `src` sending `data` then half-closing (unless there is none): the body it got back (after the
/// head, for HTTP), `closed` when the connection ended without a byte, `silent` when nothing
/// came within 1.5 s (a silent drop).
fn client(px: SocketAddr, src: [u8; 4], data: &[u8]) -> String {
    let mut s = raw::connect_from(src, px, Duration::from_millis(1500));
    // Without data the client only listens (a silent drop is then deterministic: a byte or a
    // FIN arriving after the drop's close would draw a reset from the kernel).
    if !data.is_empty() {
        if s.write_all(data).is_err() {
            return "closed".into();
        }
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) if out.is_empty() => "closed".into(),
        Ok(_) => {
            let t = String::from_utf8_lossy(&out).into_owned();
            match t.split_once("\r\n\r\n") {
                Some((head, body)) => format!("{} {body}", head.lines().next().unwrap_or("")),
                None => t,
            }
        }
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) =>
        {
            "silent".into()
        }
        Err(_) if out.is_empty() => "closed".into(),
        Err(_) => String::from_utf8_lossy(&out).into_owned(),
    }
}

fn config(ports: [u16; 3], sock: &std::path::Path, srv: SocketAddr) -> String {
    let [http, proxied, tcp] = ports;
    format!(
        "global\n    stats socket {sock} level admin\n\n\
         defaults\n    mode http\n    log stdout format raw local0\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\n\
         frontend fh\n    bind 127.0.0.1:{http}\n    bind 127.0.0.1:{proxied} accept-proxy\n    \
         log-format \"%ci %ft %[var(sess.tag)] %ST\"\n    \
         tcp-request session set-var(sess.tag) str(seen)\n    \
         tcp-request session reject if {{ src 127.0.0.3 }}\n    \
         tcp-request session silent-drop if {{ src 127.0.0.5 }}\n    \
         tcp-request session track-sc0 src table st\n    \
         tcp-request session accept if {{ src 10.9.9.9 }}\n    \
         tcp-request session set-var(sess.tag) str(late)\n    \
         http-request return status 200 content-type text/plain lf-string \"%[var(sess.tag)] %[sc0_sess_cnt] %[sc0_conn_cnt]\\n\"\n\n\
         frontend ft\n    mode tcp\n    bind 127.0.0.1:{tcp}\n    log-format \"%ci %ft %[var(sess.tag)] %ts\"\n    \
         tcp-request session reject if {{ src 127.0.0.3 }}\n    \
         tcp-request session set-var(sess.tag) src\n    default_backend b\n\n\
         backend st\n    stick-table type ip size 1k store sess_cnt,conn_cnt\n\n\
         backend b\n    mode tcp\n    server s {srv}\n",
        sock = sock.display(),
    )
}

#[derive(Debug, PartialEq)]
struct Observed {
    answers: Vec<String>,
    logs: Vec<String>,
    /// (proxy, dses, dreq, stot) of the two FRONTEND rows.
    stats: Vec<Vec<String>>,
}

/// PROXY v1 from `src`, then a request.
fn proxied_request(src: &str, port: u16) -> Vec<u8> {
    format!(
        "PROXY TCP4 {src} 127.0.0.1 1111 {port}\r\nGET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n"
    )
    .into_bytes()
}

fn observe(haproxy: bool, srv: SocketAddr) -> Option<Observed> {
    let ports = [free_port(), free_port(), free_port()];
    let dir = TempDir::new("tcp-sess-rules");
    let sock = dir.0.join("admin.sock");
    let cfg = config(ports, &sock, srv);
    // The readiness probe knocks at the TCP frontend (it reaches the server: one stot there).
    let p = if haproxy {
        Proc::haproxy(&cfg, lo(ports[2]))?
    } else {
        Proc::portcullis(&cfg, lo(ports[2]))
    };
    let get = b"GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n";
    let answers = vec![
        client(lo(ports[0]), [127, 0, 0, 1], get),
        client(lo(ports[0]), [127, 0, 0, 1], get),
        client(lo(ports[0]), [127, 0, 0, 3], get),
        client(lo(ports[0]), [127, 0, 0, 5], b""),
        // The rules see the PROXY header's source.
        client(
            lo(ports[1]),
            [127, 0, 0, 1],
            &proxied_request("127.0.0.3", ports[1]),
        ),
        client(
            lo(ports[1]),
            [127, 0, 0, 1],
            &proxied_request("10.9.9.9", ports[1]),
        ),
        client(
            lo(ports[1]),
            [127, 0, 0, 1],
            &proxied_request("127.0.0.7", ports[1]),
        ),
        client(lo(ports[2]), [127, 0, 0, 3], b"HELO"),
        client(lo(ports[2]), [127, 0, 0, 4], b"HELO"),
    ];
    // Four HTTP lines, one embryonic line, two TCP sessions (the probe's and 127.0.0.4's).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut logs;
    loop {
        logs = p
            .log_lines()
            .into_iter()
            // The embryonic line's date differs by nature: keep what is around it.
            .map(|l| match (l.find(" ["), l.find("] ")) {
                (Some(a), Some(b)) if a < b => format!("{}{}", &l[..a], &l[b + 1..]),
                _ => l,
            })
            .collect::<Vec<_>>();
        if logs.len() >= 7 || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(200));
    logs = p
        .log_lines()
        .into_iter()
        .map(|l| match (l.find(" ["), l.find("] ")) {
            (Some(a), Some(b)) if a < b => format!("{}{}", &l[..a], &l[b + 1..]),
            _ => l,
        })
        .collect();
    // The readiness probe's TCP line is left out (its close races the connection: `CC` or
    // `--`, see tests/tcp_inspect_empty.rs).
    logs.retain(|l| !l.starts_with("127.0.0.1 ft "));
    logs.sort();
    let stats = proxy::stat_table(
        &sock,
        |_, sv| sv == "FRONTEND",
        &["pxname", "dses", "dreq", "stot"],
    );
    Some(Observed {
        answers,
        logs,
        stats,
    })
}

#[test]
fn session_rules_as_haproxy() {
    let srv = raw::counting_server("got", Duration::from_millis(500));
    let ours = observe(false, srv).expect("portcullis");
    assert_eq!(
        ours.answers,
        [
            "HTTP/1.1 200 OK late 1 1\n",
            "HTTP/1.1 200 OK late 2 2\n",
            "closed",
            "silent",
            "closed",
            "HTTP/1.1 200 OK seen 1 1\n",
            "HTTP/1.1 200 OK late 1 1\n",
            "closed",
            "got 4",
        ],
        "{ours:?}"
    );
    assert!(
        ours.logs
            .contains(&"127.0.0.3:1111 fh/2: Success".to_string()),
        "{ours:?}"
    );
    if let Some(h) = observe(true, srv) {
        assert_eq!(ours, h);
    }
}
