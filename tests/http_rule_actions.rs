//! `http-request` actions against HAProxy 2.6: `normalize-uri` (every normalizer, the target
//! a following rule sees, `strict` refusing a malformed escape with a 400) and
//! `disable-l7-retry`. Only 127.0.0.1; the HAProxy half is skipped without /usr/sbin/haproxy.
//! One frontend per normalizer, without a condition: HAProxy 2.6.12 misparses the normalizers
//! with an optional word when `if`/`unless` follows (see docs/compatibility.md).

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use backend::{free_port, lo};
use proxy::Proc;

const NORMALIZERS: &[&str] = &[
    "path-merge-slashes",
    "path-strip-dot",
    "path-strip-dotdot",
    "path-strip-dotdot full",
    "percent-decode-unreserved",
    "percent-decode-unreserved strict",
    "percent-to-uppercase",
    "percent-to-uppercase strict",
    "query-sort-by-name",
    "fragment-strip",
    "fragment-encode",
];

const URIS: &[&str] = &[
    "/a//b///c/",
    "//x",
    "/a/./b/.",
    "/./",
    "/a/../b",
    "/a/b/../../c",
    "/../a",
    "/a/b/..",
    "/..",
    "/%2e%2e/a",
    "/a/%41%2d%7e%2F%20?q=%2d",
    "/%zz%4",
    "/?b=2&a=1&c&a=0",
    "/a?c=3;b=2&a",
];

fn config(ports: &[u16]) -> String {
    let mut cfg = "global\n    expose-experimental-directives\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n"
        .to_string();
    for (i, (n, port)) in NORMALIZERS.iter().zip(ports).enumerate() {
        cfg += &format!(
            "\nfrontend fe{i}\n    bind 127.0.0.1:{port}\n    http-request disable-l7-retry\n\
             \x20   http-request normalize-uri {n}\n\
             \x20   http-request return status 200 content-type text/plain lf-string \"%[url]\"\n"
        );
    }
    cfg
}

/// The status line's code and the body (the target the `return` rule saw).
fn ask(addr: SocketAddr, n: usize, uri: &str) -> String {
    let mut s = proxy::connect(addr);
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let req = format!("GET {uri} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    let code = text.split(' ').nth(1).unwrap_or("closed");
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    let body = if code == "200" { body } else { "" };
    format!("{} {uri} => {code} {body}", NORMALIZERS[n])
}

fn run(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    // Distinct ports: the kernel may hand a just-released port out again.
    let mut ports: Vec<u16> = Vec::new();
    while ports.len() < NORMALIZERS.len() {
        let p = free_port();
        if !ports.contains(&p) {
            ports.push(p);
        }
    }
    let last = *ports.last()?;
    let _p = start(&config(&ports), lo(last))?;
    let mut seen = Vec::new();
    for (n, port) in ports.iter().enumerate() {
        for u in URIS {
            seen.push(ask(lo(*port), n, u));
        }
    }
    Some(seen)
}

#[test]
fn normalize_uri_as_haproxy() {
    let got = run(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    let has = |s: &str| got.iter().any(|l| l == s);
    assert!(has("path-strip-dotdot /.. => 200 /../"), "{got:#?}");
    assert!(has("path-strip-dotdot full /.. => 200 /"), "{got:#?}");
    assert!(
        has("percent-decode-unreserved strict /%zz%4 => 400 "),
        "{got:#?}"
    );
    assert!(
        has("query-sort-by-name /?b=2&a=1&c&a=0 => 200 /?a=1&a=0&b=2&c"),
        "{got:#?}"
    );
    if let Some(reference) = run(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}

fn log_config(port: u16, app: SocketAddr) -> String {
    format!(
        "global\n    log stdout format rfc3164 local0\n\
         defaults\n    mode http\n    log global\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n    timeout tarpit 300ms\n\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    log-format \"%{{+Q}}r %ST %tsc %B %b/%s\"\n\
         \x20   http-request set-log-level err if {{ path /err }}\n\
         \x20   http-request set-log-level silent if {{ path /silent }}\n\
         \x20   http-request set-var(txn.n) str(1) if {{ path /resnotice }}\n\
         \x20   http-request tarpit if {{ path /tarpit }}\n\
         \x20   http-request tarpit deny_status 429 if {{ path /tarpit429 }}\n\
         \x20   default_backend be\n\
         backend be\n    http-response set-log-level notice if {{ var(txn.n) -m found }}\n    server s {app}\n"
    )
}

/// The status and whether the answer came after the tarpit's 300 ms.
fn timed(addr: SocketAddr, path: &str) -> String {
    let t = std::time::Instant::now();
    let mut s = proxy::connect(addr);
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let req = format!("GET {path} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    let held = t.elapsed() >= Duration::from_millis(280);
    format!(
        "{path} {} held={held}",
        text.split(' ').nth(1).unwrap_or("closed")
    )
}

fn run_levels(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let app = backend::HttpNode::start(lo(0), backend::HttpOpts::named("app")).expect("app");
    let port = free_port();
    let p = start(&log_config(port, app.addr()), lo(port))?;
    let paths = [
        "/ok",
        "/err",
        "/silent",
        "/resnotice",
        "/tarpit",
        "/tarpit429",
    ];
    let mut seen: Vec<String> = paths.iter().map(|u| timed(lo(port), u)).collect();
    // `<priority>` and the message of each line, less the date and the process.
    let lines = || {
        let mut l: Vec<String> = p
            .log_lines()
            .into_iter()
            .filter(|l| !l.contains("<BADREQ>"))
            .filter_map(|l| {
                let prio = l.split('>').next()?.to_string();
                let msg = l.split_once("]: ")?.1.to_string();
                Some(format!("{prio}> {msg}"))
            })
            .collect();
        l.sort();
        l
    };
    backend::wait_until(Duration::from_secs(5), || lines().len() >= paths.len() - 1);
    seen.extend(lines());
    Some(seen)
}

#[test]
fn set_log_level_and_tarpit_as_haproxy() {
    let got = run_levels(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    let has = |s: &str| got.iter().any(|l| l == s);
    assert!(
        has("/tarpit 500 held=true") && has("/tarpit429 429 held=true"),
        "{got:#?}"
    );
    assert!(
        has("<131> \"GET /err HTTP/1.1\" 200 ---- 110 be/s"),
        "{got:#?}"
    );
    assert!(
        has("<133> \"GET /resnotice HTTP/1.1\" 200 ---- 116 be/s"),
        "{got:#?}"
    );
    assert!(
        has("<134> \"GET /tarpit HTTP/1.1\" 500 PT-- 208 fe/<NOSRV>"),
        "{got:#?}"
    );
    assert!(!got.iter().any(|l| l.contains("/silent HTTP")), "{got:#?}");
    if let Some(reference) = run_levels(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}

/// `silent-drop`: what the client sees (`silent` when nothing, not even a close, comes within
/// a second: TCP_REPAIR needs CAP_NET_ADMIN, without it both fall back to a TTL of 1, which
/// loopback ignores), the log line, `dreq`.
fn run_drop(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let dir = proxy::TempDir::new("silent-drop");
    let port = free_port();
    let cfg = format!(
        "global\n    log stdout format raw local0\n    stats socket {}/admin.sock level admin\n\
         defaults\n    mode http\n    log global\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    log-format \"%{{+Q}}r %ST %tsc %B %b/%s\"\n\
         \x20   http-request silent-drop if {{ path /drop }}\n\
         \x20   http-request return status 200\n",
        dir.0.display()
    );
    let p = start(&cfg, lo(port))?;
    let mut s = proxy::connect(lo(port));
    s.set_read_timeout(Some(Duration::from_secs(1))).ok();
    s.write_all(b"GET /drop HTTP/1.1\r\nhost: t\r\n\r\n")
        .expect("write");
    let mut buf = [0u8; 64];
    let seen = match s.read(&mut buf) {
        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => "silent".to_string(),
        Err(e) if e.kind() == std::io::ErrorKind::TimedOut => "silent".to_string(),
        Ok(0) => "closed".to_string(),
        Ok(_) => "answered".to_string(),
        Err(_) => "reset".to_string(),
    };
    let lines = || {
        p.log_lines()
            .into_iter()
            .filter(|l| !l.contains("<BADREQ>"))
            .collect::<Vec<_>>()
    };
    backend::wait_until(Duration::from_secs(5), || !lines().is_empty());
    let mut out = vec![seen];
    out.extend(lines());
    for l in proxy::admin_cli(&dir.0.join("admin.sock"), "show stat").lines() {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() > 11 && f[1] == "FRONTEND" {
            out.push(format!("{} dreq={}", f[0], f[10]));
        }
    }
    Some(out)
}

#[test]
fn silent_drop_as_haproxy() {
    let got = run_drop(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    assert_eq!(
        got[1..],
        ["\"GET /drop HTTP/1.1\" -1 PR-- 0 fe/<NOSRV>", "fe dreq=1"],
        "{got:#?}"
    );
    if let Some(reference) = run_drop(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}

/// `set-src`, `set-src-port`, `set-dst`, `set-dst-port`: what the next rules, the log line and
/// `option forwardfor` see (the transaction's only: the next request on the connection has
/// the connection's addresses again, as HAProxy 2.6); a port is an integer's low 16 bits.
fn run_addrs(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let app = backend::HttpNode::start(lo(0), backend::HttpOpts::named("app")).expect("app");
    let port = free_port();
    let cfg = format!(
        "global\n    log stdout format raw local0\n\
         defaults\n    mode http\n    log global\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    option forwardfor\n    log-format \"%ci:%cp %fi:%fp %{{+Q}}r\"\n\
         \x20   http-request set-src hdr(x-src) if {{ hdr(x-src) -m found }}\n\
         \x20   http-request set-src-port hdr(x-sport) if {{ hdr(x-sport) -m found }}\n\
         \x20   http-request set-dst hdr(x-dst) if {{ hdr(x-dst) -m found }}\n\
         \x20   http-request set-dst-port hdr(x-dport) if {{ hdr(x-dport) -m found }}\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"%[src]:%[src_port] %[dst]:%[dst_port]\" if {{ path /show }}\n\
         \x20   default_backend be\n\
         backend be\n    http-request set-header x-be-src %[src]\n    server s {}\n",
        app.addr()
    );
    let p = start(&cfg, lo(port))?;
    let mut s = proxy::connect(lo(port));
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let me = s.local_addr().ok()?.port().to_string();
    let reqs = [
        "GET /show HTTP/1.1\r\nhost: t\r\nx-src: 10.1.2.3\r\nx-sport: 4000\r\nx-dst: 127.0.0.9\r\nx-dport: 8080\r\n\r\n",
        "GET /show HTTP/1.1\r\nhost: t\r\n\r\n",
        "GET /show HTTP/1.1\r\nhost: t\r\nx-src: bogus\r\nx-sport: 99999\r\n\r\n",
        "GET /fwd HTTP/1.1\r\nhost: t\r\nx-src: 2001:db8::7\r\n\r\n",
    ];
    let mut seen = Vec::new();
    for r in reqs {
        s.write_all(r.as_bytes()).expect("write");
        let resp = proxy::read_response(&mut s, false)?;
        seen.push(format!("{} {}", resp.status, resp.text()));
    }
    let got = app.requests();
    let last = got.last()?;
    seen.push(format!(
        "xff={:?} be-src={:?}",
        last.header("x-forwarded-for"),
        last.header("x-be-src")
    ));
    backend::wait_until(Duration::from_secs(5), || {
        p.log_lines()
            .iter()
            .filter(|l| !l.contains("BADREQ"))
            .count()
            >= reqs.len()
    });
    seen.extend(p.log_lines().into_iter().filter(|l| !l.contains("BADREQ")));
    // The client's own port and the frontend's differ from run to run.
    let seen = seen
        .into_iter()
        .map(|l| {
            l.replace(&me, "<cport>")
                .replace(&port.to_string(), "<fport>")
        })
        .collect();
    Some(seen)
}

#[test]
fn set_src_dst_as_haproxy() {
    let got = run_addrs(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    let has = |s: &str| got.iter().any(|l| l == s);
    assert!(has("200 10.1.2.3:4000 127.0.0.9:8080"), "{got:#?}");
    assert!(has("200 127.0.0.1:<cport> 127.0.0.1:<fport>"), "{got:#?}");
    assert!(has("200 127.0.0.1:34463 127.0.0.1:<fport>"), "{got:#?}");
    assert!(
        has("xff=Some(\"2001:db8::7\") be-src=Some(\"2001:db8::7\")"),
        "{got:#?}"
    );
    if let Some(reference) = run_addrs(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}

/// `early-hint`: one 103 per rule before the answer (a `return` or the server's), for HTTP/1.1
/// clients only; the bytes the client gets, as HAProxy sends them.
fn run_hints(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let app = backend::HttpNode::start(lo(0), backend::HttpOpts::named("app")).expect("app");
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\n\
         frontend fe\n    bind 127.0.0.1:{port}\n\
         \x20   http-request early-hint link \"</style.css>; rel=preload; as=style\"\n\
         \x20   http-request early-hint link \"</script.js>; rel=preload\" if {{ path /two }}\n\
         \x20   http-request set-header x-a 1\n\
         \x20   http-request early-hint x-late \"%[path]\"\n\
         \x20   http-request return status 200 content-type text/plain string ok if {{ path /two }}\n\
         \x20   default_backend be\n\
         backend be\n    server s {}\n",
        app.addr()
    );
    let _p = start(&cfg, lo(port))?;
    let mut seen = Vec::new();
    for (path, v) in [("/two", "1.1"), ("/two", "1.0"), ("/app", "1.1")] {
        let mut s = proxy::connect(lo(port));
        s.set_read_timeout(Some(Duration::from_secs(5))).ok();
        let req = format!("GET {path} HTTP/{v}\r\nhost: t\r\nconnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).expect("write");
        let mut got = Vec::new();
        let _ = s.read_to_end(&mut got);
        seen.push(String::from_utf8_lossy(&got).into_owned());
    }
    Some(seen)
}

#[test]
fn early_hint_as_haproxy() {
    let got = run_hints(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    assert!(
        got[0].starts_with(
            "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload; as=style\r\n\r\n\
             HTTP/1.1 103 Early Hints\r\nlink: </script.js>; rel=preload\r\n\r\n\
             HTTP/1.1 103 Early Hints\r\nx-late: /two\r\n\r\nHTTP/1.1 200 OK\r\n"
        ),
        "{got:#?}"
    );
    assert!(got[1].starts_with("HTTP/1.1 200 OK\r\n"), "{got:#?}");
    if let Some(reference) = run_hints(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}
