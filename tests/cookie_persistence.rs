//! Cookie-based persistence (`cookie` keyword, server `cookie`) against HAProxy 2.6 on the same
//! configuration and requests: the `Set-Cookie`/`Cache-Control` headers the client gets, which
//! server answers a request carrying each server's cookie (or an unknown one, or one naming a
//! server in maintenance), the `Cookie` header the server sees, and the log lines with `%tsc`
//! (the cookie flags of httplog's termination state). The server's own `Set-Cookie` comes from
//! an `http-response add-header` (the cookie work follows the response rules in both). The
//! `maxidle`/`maxlife` dates follow the clock: requests carry dates made at run time, and the
//! dates are masked in what is compared. Only 127.0.0.1; the HAProxy half is skipped without
//! /usr/sbin/haproxy.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use backend::{HttpNode, HttpOpts, free_port, lo, wait_until};
use proxy::Proc;

fn config((port, hport): (u16, u16), s: [SocketAddr; 3]) -> String {
    let servers = format!(
        "    balance first\n\
         \x20   http-request set-header x-ck \"%[req.cook(SRV)]\"\n\
         \x20   http-request set-var(txn.sc) str(1) if {{ query -m sub sc=1 }}\n\
         \x20   http-request set-var(txn.pub) str(1) if {{ query -m sub pub=1 }}\n\
         \x20   http-response add-header Set-Cookie \"SRV=app; path=/\" if {{ var(txn.sc) -m found }}\n\
         \x20   http-request set-var(txn.etag) str(1) if {{ query -m sub etag=1 }}\n\
         \x20   http-response add-header Cache-Control public if {{ var(txn.pub) -m found }}\n\
         \x20   http-response add-header ETag '\"x\"' if {{ var(txn.etag) -m found }}\n\
         \x20   server s1 {} cookie c1\n    server s2 {} cookie c2\n    server s3 {} cookie c3 disabled\n\
         \x20   server s4 {} cookie c4 weight 0\n",
        s[0], s[1], s[2], s[1]
    );
    let mut cfg = format!(
        "global\n    log stdout format raw local0\n\
         defaults\n    mode http\n    log global\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
         \n\
         frontend fe\n    bind 127.0.0.1:{port}\n\
         \x20   log-format \"%ST %tsc %b/%s %rc %{{+Q}}r\"\n\
         \x20   use_backend %[path,field(2,/)]\n\n\
         frontend fh\n    bind 127.0.0.1:{hport}\n    option httplog\n    capture cookie SR len 6\n\
         \x20   use_backend %[path,field(2,/)]\n\n"
    );
    let backends = [
        (
            "ins",
            "cookie SRV insert indirect nocache httponly domain .ex.com attr SameSite=Lax",
        ),
        ("rw", "cookie SRV rewrite"),
        ("pfx", "cookie SRV prefix"),
        ("post", "cookie SRV insert postonly secure"),
        ("pres", "cookie SRV insert preserve"),
        ("plain", "cookie SRV"),
        ("idle", "cookie SRV insert indirect maxidle 1h maxlife 1d"),
    ];
    for (name, line) in backends {
        cfg.push_str(&format!("backend {name}\n    {line}\n{servers}\n"));
    }
    // A cookie naming a server that refuses: retried, then redispatched (the cookie inserted
    // for the server that answers).
    cfg.push_str(&format!(
        "backend rd\n    cookie SRV insert indirect\n    balance first\n    option redispatch\n    retries 1\n\
         \x20   server dead 127.0.0.1:{} cookie c9\n    server s1 {} cookie c1\n",
        free_port(),
        s[0]
    ));
    // Local answers in a backend with a cookie: a deny, and a 503 without a usable server.
    cfg.push_str(&format!(
        "backend deny\n    cookie SRV insert\n    http-request deny\n    server s1 {}\n\n\
         backend pers\n    cookie SRV insert indirect\n    option persist\n    option redispatch\n    retries 1\n\
         \x20   server s1 {} cookie c1\n    server s3 {} cookie c3 disabled\n    server dead 127.0.0.1:{} cookie c9 disabled\n\n\
         backend dyn\n    dynamic-cookie-key s3cr3t\n    cookie SRV insert indirect dynamic\n    balance first\n\
         \x20   server s1 {}\n    server s2 {} cookie c2\n\n\
         backend fp\n    cookie SRV insert indirect\n    balance first\n\
         \x20   force-persist if {{ query -m sub force=1 }}\n    ignore-persist if {{ query -m sub ign=1 }}\n\
         \x20   server s1 {} cookie c1\n    server s3 {} cookie c3 disabled\n\n\
         backend nock\n    cookie SRV insert indirect secure\n    server s1 {}\n\n\
         backend none\n    cookie SRV insert\n    server s3 {} cookie c3 disabled\n",
        s[0], s[0], s[2], free_port(), s[0], s[1], s[0], s[2], s[0], s[2]
    ));
    cfg
}

/// (method, path, Cookie header) of each request, each on its own connection.
const ASKS: &[(&str, &str, &str)] = &[
    ("GET", "/ins/a", ""),
    ("GET", "/ins/b", "SRV=c2"),
    ("GET", "/ins/c", "a=1; SRV=c2; b=2"),
    ("GET", "/ins/d", "SRV=c1;$Path=/;x=y"),
    ("GET", "/ins/e", "SRV=c3"),
    ("GET", "/ins/f", "SRV=zz; k=v"),
    ("GET", "/ins/g?sc=1", "SRV=c2"),
    ("GET", "/ins/h?sc=1", ""),
    ("GET", "/ins/i?pub=1", ""),
    ("GET", "/ins/j?pub=1", "SRV=c2"),
    ("GET", "/ins/k?etag=1", ""),
    ("GET", "/ins/l?pub=1&etag=1", ""),
    ("POST", "/ins/m?etag=1", ""),
    ("GET", "/ins/n?etag=1&sc=1", ""),
    ("GET", "/rw/a?sc=1", ""),
    ("GET", "/rw/b?sc=1", "SRV=c2"),
    ("GET", "/rw/c", "SRV=c2"),
    ("GET", "/pfx/a?sc=1", ""),
    ("GET", "/pfx/b?sc=1", "SRV=c2~app; z=1"),
    ("GET", "/pfx/c", "SRV=c2"),
    ("GET", "/post/a", ""),
    ("POST", "/post/b", ""),
    ("POST", "/post/c", "SRV=c2"),
    ("GET", "/pres/a?sc=1", ""),
    ("GET", "/pres/b", ""),
    ("GET", "/ins/o", "SRV=c4"),
    ("GET", "/rd/a", "SRV=c9"),
    ("GET", "/rd/b", ""),
    ("GET", "/deny/a", "SRV=c1"),
    ("GET", "/deny/b", ""),
    ("GET", "/deny/c", "SRV=zz"),
    ("GET", "/none/a", "SRV=c3"),
    ("GET", "/pers/a", "SRV=c3"),
    ("GET", "/pers/b", "SRV=c9"),
    ("GET", "/nock/a", ""),
    ("GET", "/nock/b", "SRV=c1; q=1"),
    ("GET", "/ins/p", "SRV=c2|AAAAB"),
    ("GET", "/idle/a", ""),
    ("GET", "/idle/b", "SRV=c2|AAAAB"),
    ("GET", "/idle/c", "SRV=c2|{recent}|AAAAB"),
    ("GET", "/idle/d", "SRV=c2|{recent}|{recent}"),
    ("GET", "/idle/e", "SRV=c2|{future}"),
    ("GET", "/dyn/b", "SRV=c2"),
    ("GET", "/fp/a?force=1", "SRV=c3"),
    ("GET", "/fp/b", "SRV=c3"),
    ("GET", "/fp/c?ign=1", "SRV=c1; k=1"),
    ("GET", "/fp/d?ign=1", ""),
    ("GET", "/plain/a", "SRV=c2"),
    ("GET", "/plain/b?sc=1", ""),
];

/// Requests through the `option httplog` frontend.
const HTTPLOG_ASKS: &[(&str, &str, &str)] = &[
    ("GET", "/ins/x", ""),
    ("GET", "/ins/y", "SRV=c2"),
    ("GET", "/rd/z", "SRV=c9"),
    ("GET", "/deny/z", "SRV=c1"),
    ("GET", "/rw/z?sc=1", "a=1; SRV=c2"),
    ("GET", "/pfx/z?sc=1", "SRV=c2~app"),
];

/// An httplog line without what varies between runs and engines (the client port, the date,
/// the timers, the connection counts); other lines as they are.
fn httplog_fixed(l: &str) -> String {
    if !l.starts_with("127.0.0.1:") {
        return l.to_string();
    }
    l.split(' ')
        .enumerate()
        .map(|(i, f)| match i {
            0 | 1 | 4 | 10 => "*",
            _ => f,
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// HAProxy's `s30tob64` of a date in 4-second units, for the `maxidle`/`maxlife` cookies.
fn stamp(secs: u64) -> String {
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let v = (secs >> 2) as u32;
    (0..5)
        .rev()
        .map(|i| char::from(B64[((v >> (6 * i)) & 0x3f) as usize]))
        .collect()
}

/// `{recent}` (a minute ago) and `{future}` (two days ahead) dates in a request cookie.
fn with_dates(cookie: &str) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    cookie
        .replace("{recent}", &stamp(now - 60))
        .replace("{future}", &stamp(now + 2 * 86400))
}

/// A line with the cookie dates (`|` and five base64 characters) masked, as they follow the
/// clock.
fn dates_masked(l: &str) -> String {
    let b = l.as_bytes();
    let mut out = String::with_capacity(l.len());
    let mut i = 0;
    while i < b.len() {
        let date = b[i] == b'|'
            && b.len() >= i + 6
            && b[i + 1..i + 6]
                .iter()
                .all(|c| c.is_ascii_alphanumeric() || *c == b'+' || *c == b'/');
        if date {
            out.push_str("|*");
            i += 6;
        } else {
            out.push(char::from(b[i]));
            i += 1;
        }
    }
    out
}

/// The status line and the headers of interest the client got.
fn ask(port: u16, method: &str, path: &str, cookie: &str) -> String {
    let mut s = proxy::connect(lo(port));
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let mut req = format!("{method} {path} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n");
    if !cookie.is_empty() {
        req.push_str(&format!("cookie: {}\r\n", with_dates(cookie)));
    }
    if method == "POST" {
        req.push_str("content-length: 0\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    let text = String::from_utf8_lossy(&got);
    let head = text.split("\r\n\r\n").next().unwrap_or_default();
    let mut lines = head.lines();
    let mut out = format!(
        "{method} {path} [{cookie}]: {}",
        lines.next().unwrap_or("closed")
    );
    for l in lines {
        let n = l.split(':').next().unwrap_or_default().to_ascii_lowercase();
        if matches!(n.as_str(), "set-cookie" | "cache-control" | "x-node") {
            out.push_str(&format!(" | {l}"));
        }
    }
    out
}

fn run(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let nodes =
        ["s1", "s2", "s3"].map(|n| HttpNode::start(lo(0), HttpOpts::named(n)).expect("node"));
    let (port, hport) = (free_port(), free_port());
    let cfg = config((port, hport), nodes.each_ref().map(|n| n.addr()));
    let p = start(&cfg, lo(port))?;
    let mut seen: Vec<String> = ASKS
        .iter()
        .map(|(m, path, c)| ask(port, m, path, c))
        .collect();
    // A dynamic cookie (its value follows the server's address, which differs between the
    // runs: masked), then a request carrying it.
    let first = ask(port, "GET", "/dyn/c", "");
    let val = first
        .split("set-cookie: SRV=")
        .nth(1)
        .and_then(|r| r.split(';').next())
        .unwrap_or("none")
        .to_string();
    let again = ask(port, "GET", "/dyn/d", &format!("SRV={val}"));
    seen.extend([first, again].map(|l| l.replace(&val, "<dynamic>")));
    // The same through a frontend with `option httplog`.
    for (m, path, c) in HTTPLOG_ASKS {
        seen.push(ask(hport, m, path, c));
    }
    let mut saw = Vec::new();
    for (name, n) in ["s1", "s2", "s3"].iter().zip(&nodes) {
        for r in n.requests() {
            saw.push(format!(
                "{name} saw {} {} cookie={:?} x-ck={:?}",
                r.method,
                r.target,
                r.header("cookie"),
                r.header("x-ck")
            ));
        }
    }
    saw.sort();
    seen.extend(saw);
    // One line per request, and the start-up probe's (`<BADREQ>`).
    let lines = ASKS.len() + HTTPLOG_ASKS.len() + 2;
    wait_until(Duration::from_secs(5), || p.log_lines().len() > lines);
    let mut logs: Vec<String> = p.log_lines().iter().map(|l| httplog_fixed(l)).collect();
    logs.sort();
    seen.extend(logs);
    Some(seen.iter().map(|l| dates_masked(l)).collect())
}

#[test]
fn cookie_persistence_as_haproxy() {
    let got = run(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    let has = |s: &str| got.iter().any(|l| l == s);
    assert!(
        has(
            "GET /ins/a []: HTTP/1.1 200 OK | x-node: s1 | set-cookie: SRV=c1; path=/; domain=.ex.com; HttpOnly; SameSite=Lax"
        ),
        "{got:#?}"
    );
    assert!(
        has("s2 saw GET /ins/c cookie=Some(\"a=1; b=2\") x-ck=Some(\"c2\")"),
        "{got:#?}"
    );
    assert!(has("200 --VN ins/s2 0 \"GET /ins/b HTTP/1.1\""), "{got:#?}");
    assert!(
        has("200 --EI idle/s1 0 \"GET /idle/b HTTP/1.1\""),
        "{got:#?}"
    );
    assert!(
        has("200 --VU idle/s2 0 \"GET /idle/d HTTP/1.1\""),
        "{got:#?}"
    );
    assert!(
        has(
            "GET /nock/a []: HTTP/1.1 200 OK | x-node: s1 | set-cookie: SRV=; Expires=Thu, 01-Jan-1970 00:00:01 GMT; path=/; Secure"
        ),
        "a server without a cookie: {got:#?}"
    );
    assert!(
        got.iter()
            .any(|l| l.contains(" fh ins/s2 * 200 ")
                && l.contains(" SRV=c2 - --VN * 0/0 \"GET /ins/y")),
        "httplog: {got:#?}"
    );
    // HAProxy drops a log line now and then on a loaded machine (its non-blocking writes to
    // stdout): a reference shorter than ours is taken again, up to twice.
    let mut reference = run(Proc::haproxy);
    for _ in 0..2 {
        if reference.as_ref().is_some_and(|r| r.len() < got.len()) {
            eprintln!("HAProxy's run came out short; running it again");
            reference = run(Proc::haproxy);
        }
    }
    if let Some(reference) = reference {
        for (a, b) in got.iter().zip(&reference) {
            if a != b {
                eprintln!("DIFF\n  P: {a}\n  H: {b}");
            }
        }
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}

/// The ALERT and WARNING lines of `-c` on `cfg` (the pid and the file's directory taken out).
fn check_lines(cmd: &str, cfg: &str) -> Vec<String> {
    let dir = std::env::temp_dir().join(format!("portcullis-cookie-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("dir");
    let path = dir.join("c.cfg");
    std::fs::write(&path, cfg).expect("write");
    let out = std::process::Command::new(cmd)
        .arg("-c")
        .arg("-f")
        .arg(&path)
        .output()
        .expect("run -c");
    let _ = std::fs::remove_dir_all(&dir);
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let p = path.to_string_lossy().into_owned();
    text.lines()
        .filter(|l| l.starts_with("[ALERT]") || l.starts_with("[WARNING]"))
        .filter(|l| !l.contains("Error(s) found") && !l.contains("Fatal errors found"))
        .map(|l| {
            let (sev, rest) = l.split_once('(').unwrap_or((l, ""));
            let rest = rest.split_once(')').map_or(rest, |r| r.1);
            format!("{} {}", sev.trim(), rest.replace(&p, "c.cfg"))
        })
        .collect()
}

/// HAProxy 2.6's words for each bad `cookie` line (and the warnings of accepted ones).
#[test]
fn cookie_keyword_errors_as_haproxy() {
    let lines = [
        "cookie",
        "cookie SRV rewrite indirect",
        "cookie SRV insert prefix",
        "cookie SRV preserve",
        "cookie SRV bogus",
        "cookie SRV domain",
        "cookie SRV domain ex",
        "cookie SRV domain a/b",
        "cookie SRV maxidle",
        "cookie SRV maxidle 10x",
        "cookie SRV maxidle 500ms",
        "cookie SRV maxlife 99999999999",
        "cookie SRV attr",
        "cookie SRV attr a;b",
        "dynamic-cookie-key",
        "force-persist",
        "ignore-persist when { always_true }",
        "force-persist if { nosuchfetch }",
        "cookie SRV insert indirect nocache postonly preserve httponly secure domain .a.com domain .b.com attr x=1 attr y maxidle 1h maxlife 2d dynamic",
    ];
    let haproxy = std::path::Path::new("/usr/sbin/haproxy").exists();
    for l in lines {
        let cfg = format!(
            "defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n\
             backend b\n  {l}\n  server s1 127.0.0.1:1 cookie c1\n"
        );
        let got = check_lines(env!("CARGO_BIN_EXE_portcullis"), &cfg);
        // Each line but the last two draws a diagnostic.
        assert_eq!(
            got.is_empty(),
            l.contains("500ms") || l.ends_with(" dynamic"),
            "{l}: {got:?}"
        );
        if haproxy {
            assert_eq!(got, check_lines("/usr/sbin/haproxy", &cfg), "{l}");
        }
    }
}

/// The CLI's `enable|disable dynamic-cookie backend` and `set dynamic-cookie-key backend`:
/// their replies, and the cookie a server without one gets after each (the values follow the
/// server's address, which differs between the runs: compared as which of them differ).
fn dyn_cli_run(
    start: impl FnOnce(&str, SocketAddr) -> Option<Proc>,
    tag: &str,
) -> Option<Vec<String>> {
    let node = HttpNode::start(lo(0), HttpOpts::named("s1")).expect("node");
    let other = HttpNode::start(lo(0), HttpOpts::named("s1b")).expect("node");
    assert_ne!(node.addr().port(), other.addr().port());
    let dir = proxy::TempDir::new(&format!("cookie-cli-{tag}"));
    let sock = dir.0.join("admin.sock");
    let port = free_port();
    let cfg = format!(
        "global\n    stats socket \"{}\" mode 600 level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend dc\n\
         backend dc\n    cookie SRV insert\n    dynamic-cookie-key k1\n    server s1 {}\n",
        sock.display(),
        node.addr()
    );
    let _p = start(&cfg, lo(port))?;
    let mut seen = Vec::new();
    let mut values: Vec<String> = Vec::new();
    // The servers' ports differ between the runs.
    let ports = [node.addr().port(), other.addr().port()].map(|p| p.to_string());
    let masked = |t: &str| {
        t.replace(&ports[0], "<port1>")
            .replace(&ports[1], "<port2>")
    };
    let mut step = |seen: &mut Vec<String>, cmd: &str| {
        if !cmd.is_empty() {
            let reply = proxy::admin_cli(&sock, cmd);
            seen.push(masked(&format!("{cmd:?} -> {reply:?}")));
        }
        let got = ask(port, "GET", "/", "");
        let v = got
            .split("set-cookie: SRV=")
            .nth(1)
            .and_then(|r| r.split(';').next())
            .unwrap_or("none")
            .to_string();
        let n = values.iter().position(|x| *x == v).unwrap_or_else(|| {
            values.push(v.clone());
            values.len() - 1
        });
        seen.push(format!("cookie #{n} ({} chars)", v.len()));
    };
    step(&mut seen, "");
    step(&mut seen, "enable dynamic-cookie backend dc");
    step(&mut seen, "set dynamic-cookie-key backend dc k2");
    step(&mut seen, "set dynamic-cookie-key backend dc k1");
    // A new address, a new dynamic cookie; the old address, the old one.
    let moved = format!(
        "set server dc/s1 addr 127.0.0.1 port {}",
        other.addr().port()
    );
    step(&mut seen, &moved);
    let back = format!(
        "set server dc/s1 addr 127.0.0.1 port {}",
        node.addr().port()
    );
    step(&mut seen, &back);
    step(&mut seen, "disable dynamic-cookie backend dc");
    for cmd in [
        "enable dynamic-cookie backend",
        "enable dynamic-cookie backend nosuch",
        "set dynamic-cookie-key backend dc",
        "disable dynamic-cookie backend fe",
    ] {
        seen.push(format!("{cmd:?} -> {:?}", proxy::admin_cli(&sock, cmd)));
    }
    Some(seen)
}

#[test]
fn dynamic_cookie_cli_as_haproxy() {
    let got = dyn_cli_run(|cfg, port| Some(Proc::portcullis(cfg, port)), "p").expect("portcullis");
    assert!(got.iter().any(|l| l == "cookie #1 (16 chars)"), "{got:#?}");
    assert!(
        got.iter().any(|l| l == "cookie #3 (16 chars)"),
        "a new address: {got:#?}"
    );
    if let Some(reference) = dyn_cli_run(Proc::haproxy, "h") {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}
