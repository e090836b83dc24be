//! `stats http-request allow|deny|auth [realm <r>] [if|unless <cond>]`: rules checked once the
//! stats URI matched, before the page is served (config 19 of the real configurations guards
//! its page so). A differential run against HAProxy 2.6: the status, the `WWW-Authenticate`
//! challenge, the log lines and the counters, for a client refused by address, one without
//! credentials, one with wrong and one with right ones, and a request outside the stats URI.

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

fn config(port: u16, port2: u16, port3: u16, sock: &std::path::Path) -> String {
    format!(
        "global\n    stats socket {sock} level admin\n\n\
         userlist stats-auth\n    group admin users admin\n    user admin insecure-password test\n    \
         user viewer insecure-password view\n\n\
         defaults\n    mode http\n    log stdout format raw local0\n    log-format \"%ci %ft %b/%s %ST %tsc %r\"\n    \
         timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\n\
         listen stats\n    bind 127.0.0.1:{port}\n    stats enable\n    \
         acl internal_networks src 127.0.0.1 127.0.0.3\n    stats http-request deny unless internal_networks\n    \
         stats uri /st\n    acl AUTH http_auth(stats-auth)\n    acl AUTH_ADMIN http_auth_group(stats-auth) admin\n    \
         stats http-request auth unless AUTH\n    stats admin if AUTH_ADMIN\n\n\
         listen realm\n    bind 127.0.0.1:{port2}\n    stats uri /\n    \
         stats http-request allow if {{ src 127.0.0.3 }}\n    \
         stats http-request auth realm Private\n\n\
         frontend probe\n    bind 127.0.0.1:{port3}\n    option dontlognull\n",
        sock = sock.display(),
    )
}

/// One request from `src`: the status and the challenge, if any.
fn ask(px: SocketAddr, src: [u8; 4], path: &str, auth: Option<&str>) -> String {
    let mut s = raw::connect_from(src, px, Duration::from_secs(5));
    let auth = auth
        .map(|a| format!("Authorization: Basic {a}\r\n"))
        .unwrap_or_default();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\n{auth}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    let text = String::from_utf8_lossy(&out);
    let status = text.split(' ').nth(1).unwrap_or("none").to_string();
    let challenge = text
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("www-authenticate:"))
        .unwrap_or("")
        .to_string();
    format!("{status} {challenge}").trim().to_string()
}

#[derive(Debug, PartialEq)]
struct Observed {
    answers: Vec<String>,
    logs: Vec<String>,
    /// (pxname, svname, dreq, intercepted, hrsp_4xx)
    stats: Vec<String>,
}

fn observe(haproxy: bool) -> Option<Observed> {
    let (port, port2, port3) = (free_port(), free_port(), free_port());
    let dir = TempDir::new("stats-rules");
    let sock = dir.0.join("admin.sock");
    let cfg = config(port, port2, port3, &sock);
    // The readiness probe (a connection sending nothing) goes to a frontend of its own.
    let p = if haproxy {
        Proc::haproxy(&cfg, lo(port3))?
    } else {
        Proc::portcullis(&cfg, lo(port3))
    };
    // admin:test, viewer:view, admin:nope
    let (admin, viewer, wrong) = ("YWRtaW46dGVzdA==", "dmlld2VyOnZpZXc=", "YWRtaW46bm9wZQ==");
    let (px, px2) = (lo(port), lo(port2));
    let answers = vec![
        ask(px, [127, 0, 0, 2], "/st", Some(admin)),
        ask(px, [127, 0, 0, 1], "/st", None),
        ask(px, [127, 0, 0, 1], "/st", Some(wrong)),
        ask(px, [127, 0, 0, 1], "/st", Some(viewer)),
        ask(px, [127, 0, 0, 3], "/st;csv", Some(admin)),
        // Outside the stats URI the rules do not apply (no server: 503).
        ask(px, [127, 0, 0, 2], "/other", None),
        ask(px2, [127, 0, 0, 3], "/", None),
        ask(px2, [127, 0, 0, 1], "/", None),
    ];
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let mut logs;
    loop {
        logs = p
            .log_lines()
            .into_iter()
            .filter(|l| !l.contains("Proxy "))
            .collect::<Vec<_>>();
        if logs.len() >= answers.len() || std::time::Instant::now() > deadline {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    logs.sort();
    let stats = proxy::stat_table(
        &sock,
        |px, sv| px != "probe" && (sv == "FRONTEND" || sv == "BACKEND"),
        &[
            "pxname",
            "svname",
            "dreq",
            "intercepted",
            "hrsp_4xx",
            "hrsp_2xx",
        ],
    )
    .iter()
    .map(|r| r.join(","))
    .collect();
    Some(Observed {
        answers,
        logs,
        stats,
    })
}

#[test]
fn stats_rules_as_haproxy() {
    let ours = observe(false).expect("portcullis");
    assert_eq!(
        ours.answers[..5],
        [
            "403",
            "401 www-authenticate: Basic realm=\"HAProxy Statistics\"",
            "401 www-authenticate: Basic realm=\"HAProxy Statistics\"",
            "200",
            "200",
        ],
        "{ours:?}"
    );
    if let Some(theirs) = observe(true) {
        assert_eq!(ours, theirs);
    }
}
