//! `http-after-response`, `http-request return … hdr/lf-string` and `http-request reject`
//! against HAProxy 2.6 on the same configuration: the response heads the client gets (from a
//! server, and from the proxy itself: deny, return, redirect, 503), what the server received,
//! and the log lines. Only 127.0.0.1; the HAProxy half is skipped without /usr/sbin/haproxy.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use backend::{HttpNode, HttpOpts, free_port, lo, wait_until};
use proxy::Proc;

fn config(port: u16, app: SocketAddr) -> String {
    format!(
        "global\n    log stdout format raw local0\n\
         defaults common\n    mode http\n    log global\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
         \x20   log-format \"%ST %tsc %b/%s %{{+Q}}r\"\n\n\
         defaults def_front from common\n\
         \x20   http-request set-header x-frontend \"%[fe_name]\"\n\
         \x20   http-after-response set-var(txn.t3) \"str(def_front)\"\n\n\
         defaults def_back from common\n\
         \x20   http-request set-header x-backend \"%[be_name]\"\n\
         \x20   http-after-response set-var(txn.t3) \"str(def_back)\"\n\n\
         frontend fe from def_front\n    bind 127.0.0.1:{port}\n\
         \x20   http-request deny deny_status 403 if {{ path /deny }}\n\
         \x20   http-request reject if {{ path /reject }}\n\
         \x20   http-request redirect location /elsewhere if {{ path /redirect }}\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"hello %[path]\" hdr x-ret \"%[fe_name]\" hdr x-two two if {{ path /return }}\n\
         \x20   use_backend empty if {{ path /empty }}\n\
         \x20   http-after-response set-header x-t3-frt \"%[var(txn.t3)]\"\n\
         \x20   http-after-response set-status 418 if {{ status 403 }}\n\
         \x20   http-after-response allow if {{ path /allow }}\n\
         \x20   http-after-response add-header x-after yes\n\
         \x20   default_backend be\n\n\
         backend be from def_back\n\
         \x20   http-after-response set-header x-t3-bck \"%[var(txn.t3)]\"\n\
         \x20   http-after-response del-header x-node\n\
         \x20   server s1 {app}\n\n\
         backend empty from def_back\n\
         \x20   http-after-response set-header x-empty \"%[be_name]\"\n"
    )
}

/// Status line and the headers of interest of one request (or `closed` when the proxy sent
/// nothing).
fn ask(port: u16, path: &str) -> String {
    let mut s = proxy::connect(lo(port));
    s.set_read_timeout(Some(Duration::from_secs(5))).ok();
    let req = format!("GET {path} HTTP/1.1\r\nhost: t\r\nconnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    if got.is_empty() {
        return format!("{path}: closed");
    }
    let text = String::from_utf8_lossy(&got);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let mut lines = head.lines();
    let mut out = format!("{path}: {}", lines.next().unwrap_or_default());
    for l in lines {
        let n = l.split(':').next().unwrap_or_default().to_ascii_lowercase();
        if (n.starts_with("x-") && n != "x-conn-id") || n == "location" {
            out.push_str(&format!(" | {l}"));
        }
    }
    if path == "/return" {
        out.push_str(&format!(" | body {body}"));
    }
    out
}

fn run(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let app = HttpNode::start(lo(0), HttpOpts::named("app")).expect("app");
    let port = free_port();
    let p = start(&config(port, app.addr()), lo(port))?;
    let paths = [
        "/fwd",
        "/allow",
        "/deny",
        "/reject",
        "/redirect",
        "/return",
        "/empty",
    ];
    let mut seen: Vec<String> = paths.iter().map(|p| ask(port, p)).collect();
    for r in app.requests() {
        seen.push(format!(
            "server saw {} x-frontend={:?} x-backend={:?}",
            r.target,
            r.header("x-frontend"),
            r.header("x-backend")
        ));
    }
    // Every request logs a line, and so does the start-up probe that connects and closes
    // (`<BADREQ>` `CR--`, as HAProxy).
    wait_until(Duration::from_secs(5), || p.log_lines().len() > paths.len());
    let mut logs = p.log_lines();
    logs.sort();
    seen.extend(logs);
    Some(seen)
}

#[test]
fn after_response_return_hdr_and_reject_as_haproxy() {
    let got = run(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    let has = |s: &str| got.iter().any(|l| l == s);
    assert!(
        has("/fwd: HTTP/1.1 200 OK | x-t3-bck: def_back | x-t3-frt: def_front | x-after: yes"),
        "{got:#?}"
    );
    assert!(has("/reject: closed"), "{got:#?}");
    assert!(
        got.iter().any(|l| l.starts_with("/deny: HTTP/1.1 418 ")),
        "set-status on a deny: {got:#?}"
    );
    if let Some(reference) = run(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}
