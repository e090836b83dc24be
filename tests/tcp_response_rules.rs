//! `tcp-response content` rules against HAProxy 2.6: in a `mode tcp` backend, on the server's
//! first bytes (the client's keep flowing meanwhile; `reject` closes both sides, `PD`; `close`
//! forwards what came, then closes; `WAIT_END` waits for `inspect-delay`; `set-log-level`
//! silences a line), and in a `mode http` backend on the response, before the `http-response`
//! rules; `last_rule_line` in the log lines. Only 127.0.0.1; the HAProxy half is skipped without /usr/sbin/haproxy.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use backend::{HttpNode, HttpOpts, free_port, lo, wait_until};
use proxy::{Proc, TempDir, admin_cli};

/// A server that answers the client's first message: `bad` → `BAD!`, `bye` → `BYE!!` (the
/// connection kept open), `big` → `HELLO!` then a close, `few` → `HI` then a close 1.5 s later.
fn server() -> SocketAddr {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    std::thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { continue };
            std::thread::spawn(move || {
                let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                let mut buf = [0u8; 64];
                let n = s.read(&mut buf).unwrap_or(0);
                let (answer, hold): (&[u8], u64) = match &buf[..n] {
                    b"bad" => (b"BAD!", 3000),
                    b"bye" => (b"BYE!!", 3000),
                    b"big" => (b"HELLO!", 0),
                    b"few" => (b"HI", 1500),
                    _ => return,
                };
                let _ = s.write_all(answer);
                // Held open until the proxy closes it (or the hold ends).
                let _ = s.set_read_timeout(Some(Duration::from_millis(hold.max(1))));
                while matches!(s.read(&mut buf), Ok(k) if k > 0) {}
            });
        }
    });
    addr
}

/// Sends `msg` and reads until the proxy closes: what came back, or `closed` for nothing.
fn client(px: SocketAddr, msg: &str) -> String {
    let mut s = TcpStream::connect(px).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(6))).unwrap();
    s.write_all(msg.as_bytes()).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    match out.is_empty() {
        true => format!("{msg}: closed"),
        false => format!("{msg}: {}", String::from_utf8_lossy(&out)),
    }
}

fn tcp_config(dir: &std::path::Path, port: u16, srv: SocketAddr) -> String {
    format!(
        "global\n    stats socket {}/admin.sock level admin\n\
         defaults\n    mode tcp\n    log stdout format raw local0\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    tcp-request connection track-sc0 src table st\n\
         \x20   log-format \"%b/%s %ts U=%U B=%B lr=%[last_rule_line] l=%[var(txn.l)]\"\n    default_backend be\n\n\
         backend be\n    tcp-response inspect-delay 1s\n\
         \x20   tcp-response content set-var(txn.l) res.len\n\
         \x20   tcp-response content reject if {{ res.payload(0,3) -m str BAD }}\n\
         \x20   tcp-response content close if {{ res.payload(0,3) -m bin 425945 }}\n\
         \x20   tcp-response content sc-inc-gpc0(0) if {{ res.len ge 6 }}\n\
         \x20   tcp-response content accept if {{ res.len ge 6 }}\n\
         \x20   tcp-response content reject unless WAIT_END\n\
         \x20   tcp-response content set-log-level silent if {{ res.len eq 2 }}\n    server s {srv}\n\n\
         backend st\n    stick-table type ip size 10 store gpc0\n",
        dir.display()
    )
}

fn run_tcp(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let dir = TempDir::new("tcp-response");
    let port = free_port();
    let p = start(&tcp_config(&dir.0, port, server()), lo(port))?;
    let msgs = ["bad", "bye", "big", "few"];
    let mut seen: Vec<String> = msgs.iter().map(|m| client(lo(port), m)).collect();
    // The start's readiness probe sends nothing: its line is left out.
    let lines = || {
        let mut l: Vec<String> = p
            .log_lines()
            .into_iter()
            .filter(|l| !l.contains("U=0 "))
            .collect();
        l.sort();
        l
    };
    // `few`'s line is silenced: time for it to come, were it written.
    wait_until(Duration::from_secs(5), || lines().len() >= msgs.len() - 1);
    std::thread::sleep(Duration::from_millis(300));
    seen.extend(lines());
    // `sc-inc-gpc0` on the counter the connection tracks.
    let table = admin_cli(&dir.0.join("admin.sock"), "show table st");
    seen.extend(
        table
            .lines()
            .skip(1)
            .filter_map(|l| Some(l.split_once(": ")?.1.to_string())),
    );
    for l in admin_cli(&dir.0.join("admin.sock"), "show stat").lines() {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() > 14 && f[0] != "# pxname" && f[0] != "st" {
            seen.push(format!("{}/{} dresp={}", f[0], f[1], f[11]));
        }
    }
    Some(seen)
}

#[test]
fn tcp_response_rules_in_tcp_mode_as_haproxy() {
    let got = run_tcp(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    let has = |s: &str| got.iter().any(|l| l == s);
    assert!(has("bad: closed") && has("bye: BYE!!"), "{got:#?}");
    assert!(has("big: HELLO!") && has("few: HI"), "{got:#?}");
    assert!(has("be/s PD U=3 B=4 lr=19 l=4"), "{got:#?}");
    assert!(has("be/s -- U=3 B=6 lr=22 l=6"), "{got:#?}");
    assert!(has("key=127.0.0.1 use=0 exp=0 gpc0=1"), "{got:#?}");
    assert!(!got.iter().any(|l| l.contains("l=2")), "silent: {got:#?}");
    assert!(has("be/BACKEND dresp=1"), "{got:#?}");
    if let Some(reference) = run_tcp(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}

fn http_config(dir: &std::path::Path, port: u16, app: SocketAddr) -> String {
    format!(
        "global\n    log stdout format raw local0\n    stats socket {}/admin.sock level admin\n\
         defaults\n    mode http\n    log global\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\n\
         frontend fe\n    bind 127.0.0.1:{port}\n\
         \x20   log-format \"%ST %tsc %b/%s %{{+Q}}r lr=%[last_rule_line] v=%[var(txn.v)]\"\n    default_backend be\n\n\
         backend be\n    tcp-response inspect-delay 2s\n\
         \x20   tcp-request content set-var(txn.p) path\n\
         \x20   tcp-response content set-var(txn.v) var(txn.p)\n\
         \x20   tcp-response content reject if {{ path /rej }} || {{ var(txn.p) -m beg /rej }}\n\
         \x20   tcp-response content accept if {{ var(txn.p) -m beg /acc }}\n\
         \x20   tcp-response content reject unless WAIT_END\n\
         \x20   http-response deny if {{ var(txn.p) -m beg /acc/deny }}\n\
         \x20   http-request allow if {{ path /allow }}\n    server s1 {app}\n",
        dir.display()
    )
}

/// The status line, or `closed` when the proxy answered nothing.
fn ask(port: u16, path: &str) -> String {
    let mut s = proxy::connect(lo(port));
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let req = format!("GET {path} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    match text.lines().next() {
        Some(l) => format!("{path}: {l}"),
        None => format!("{path}: closed"),
    }
}

fn run_http(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let dir = TempDir::new("tcp-response-http");
    let app = HttpNode::start(lo(0), HttpOpts::named("app")).expect("app");
    let port = free_port();
    let p = start(&http_config(&dir.0, port, app.addr()), lo(port))?;
    let paths = ["/ok", "/rej", "/acc", "/acc/deny", "/allow"];
    let mut seen: Vec<String> = paths.iter().map(|p| ask(port, p)).collect();
    // The start's readiness probe is logged as a bad request: left out.
    let lines = || {
        let mut l: Vec<String> = p
            .log_lines()
            .into_iter()
            .filter(|l| !l.contains("<BADREQ>"))
            .collect();
        l.sort();
        l
    };
    // Generous: a reference HAProxy on a loaded machine was seen taking over 5 s to log.
    wait_until(Duration::from_secs(15), || lines().len() >= paths.len());
    let logs = lines();
    seen.extend(logs);
    for l in admin_cli(&dir.0.join("admin.sock"), "show stat").lines() {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() > 14 && matches!(f[1], "FRONTEND" | "BACKEND") {
            seen.push(format!("{}/{} dresp={}", f[0], f[1], f[11]));
        }
    }
    Some(seen)
}

#[test]
fn tcp_response_rules_in_http_mode_as_haproxy() {
    let got = run_http(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    let has = |s: &str| got.iter().any(|l| l == s);
    assert!(
        has("/rej: closed") && has("/ok: HTTP/1.1 200 OK"),
        "{got:#?}"
    );
    assert!(has("/acc/deny: HTTP/1.1 502 Bad Gateway"), "{got:#?}");
    assert!(
        has("-1 PD-- be/s1 \"GET /rej HTTP/1.1\" lr=20 v=/rej"),
        "{got:#?}"
    );
    assert!(
        has("200 ---- be/s1 \"GET /allow HTTP/1.1\" lr=24 v=/allow"),
        "{got:#?}"
    );
    if let Some(reference) = run_http(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}

/// `tcp-response content close` in `mode http`: the response goes through and the server
/// connection ends after it, so the next request on the client connection needs a new one.
/// Not compared with HAProxy 2.6, which here answers the `close`d response with a 502 or not
/// depending on when the close reaches its HTTP analysis.
#[test]
fn tcp_response_close_in_http_mode_ends_the_server_connection() {
    let app = HttpNode::start(lo(0), HttpOpts::named("app")).expect("app");
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend bc\n\n\
         backend bc\n    http-reuse never\n    http-request set-var(txn.q) path\n\
         \x20   tcp-response content close if {{ var(txn.q) -m beg /close }}\n    server s1 {}\n",
        app.addr()
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    let conns = |paths: &[&str]| {
        let before = app.connections();
        let mut s = proxy::connect(lo(port));
        s.set_read_timeout(Some(Duration::from_secs(5))).ok();
        let mut got = Vec::new();
        for path in paths {
            let req = format!("GET {path} HTTP/1.1\r\nhost: t\r\n\r\n");
            s.write_all(req.as_bytes()).expect("write");
            got.push(proxy::read_response(&mut s, false).map(|r| r.status));
        }
        (got, app.connections() - before)
    };
    assert_eq!(conns(&["/a", "/b"]), (vec![Some(200), Some(200)], 1));
    assert_eq!(conns(&["/close", "/b"]), (vec![Some(200), Some(200)], 2));
}
