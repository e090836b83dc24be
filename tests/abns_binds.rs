//! `bind abns@<name>`: a frontend chained to another over an abstract socket (HAProxy pads the
//! name with NULs to the end of `sun_path`; so do portcullis's binds and servers), compared with
//! HAProxy 2.6; and each proxy's abstract bind reached by the other's `server abns@`.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::net::SocketAddr;

use backend::{HttpNode, HttpOpts, free_port, lo};
use proxy::Proc;

const LOG_FORMAT: &str = "log-format \"%ci %f %b/%s %ST %B %ts %{+Q}r\"";

fn name(tag: &str) -> String {
    format!("portcullis-test-{tag}-{}", std::process::id())
}

/// `outer` (TCP port, `mode tcp` and `mode http` chains) → `abns@<abns>` binds → the app.
fn chain_cfg(tcp: u16, http: u16, abns: &str, app: SocketAddr) -> String {
    format!(
        "global\n    log stdout format raw local0\n\
         defaults\n    log global\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\n\
         listen tcp_out\n    mode tcp\n    bind 127.0.0.1:{tcp}\n    server in abns@{abns}-tcp\n\n\
         listen tcp_in\n    mode tcp\n    bind abns@{abns}-tcp\n    server app {app}\n\n\
         listen http_out\n    mode http\n    {LOG_FORMAT}\n    bind 127.0.0.1:{http}\n    server in abns@{abns}-http\n\n\
         listen http_in\n    mode http\n    {LOG_FORMAT}\n    bind abns@{abns}-http\n    server app {app}\n"
    )
}

fn run_chain(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let app = HttpNode::start(lo(0), HttpOpts::named("app")).expect("app");
    let (tcp, http) = (free_port(), free_port());
    let p = start(&chain_cfg(tcp, http, &name("chain"), app.addr()), lo(http))?;
    let mut seen = Vec::new();
    for port in [tcp, http] {
        let r = proxy::get(lo(port), "/through/abns");
        seen.push(format!(
            "{} {}",
            r.status,
            r.header("x-node").unwrap_or_default()
        ));
    }
    // The http chain's two log lines: the inner one's client is the abstract socket.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while p
        .log_lines()
        .iter()
        .filter(|l| l.contains("/through"))
        .count()
        < 2
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // The inner line's client is the abstract socket: `unix:1` in both (HAProxy's `%ci:%cp`
    // of a unix-socket client: the listener's id as the port).
    let mut lines: Vec<String> = p
        .log_lines()
        .into_iter()
        .filter(|l| l.contains("/through"))
        .collect();
    lines.sort();
    seen.extend(lines);
    Some(seen)
}

#[test]
fn frontends_chained_over_an_abstract_socket_as_haproxy() {
    let got = run_chain(|c, w| Some(Proc::portcullis(c, w))).expect("portcullis");
    assert_eq!(got[0], "200 app", "{got:?}");
    assert_eq!(got[1], "200 app", "{got:?}");
    if let Some(reference) = run_chain(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}

/// One proxy's `bind abns@` reached by the other's `server abns@`: the padded names match.
#[test]
fn abstract_names_match_haproxy_both_ways() {
    if !std::path::Path::new("/usr/sbin/haproxy").exists() {
        return;
    }
    let app = HttpNode::start(lo(0), HttpOpts::named("app")).expect("app");
    for (tag, inner_pc) in [("pc-in", true), ("hap-in", false)] {
        let abns = name(tag);
        let (outer_port, inner_wait) = (free_port(), free_port());
        let inner_cfg = format!(
            "defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
             listen inner\n    bind abns@{abns}\n    bind 127.0.0.1:{inner_wait}\n    server app {}\n",
            app.addr()
        );
        let outer_cfg = format!(
            "defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
             listen outer\n    bind 127.0.0.1:{outer_port}\n    server in abns@{abns}\n"
        );
        let (_inner, _outer) = if inner_pc {
            (
                Some(Proc::portcullis(&inner_cfg, lo(inner_wait))),
                Proc::haproxy(&outer_cfg, lo(outer_port)),
            )
        } else {
            (
                Proc::haproxy(&inner_cfg, lo(inner_wait)),
                Some(Proc::portcullis(&outer_cfg, lo(outer_port))),
            )
        };
        let r = proxy::get(lo(outer_port), "/x");
        assert_eq!(r.status, 200, "{tag}");
        assert_eq!(r.header("x-node").as_deref(), Some("app"), "{tag}");
    }
}

#[test]
fn abns_bind_errors_as_haproxy() {
    let dir = proxy::TempDir::new("abns-cfg");
    let long = "a".repeat(108);
    let cfg = format!(
        "defaults\n mode http\n timeout client 1s\n timeout server 1s\n timeout connect 1s\n\
         frontend f\n bind abns@{long}\n"
    );
    let path = dir.0.join("t.cfg");
    std::fs::write(&path, &cfg).unwrap();
    let run = |bin: &str| {
        let out = std::process::Command::new(bin)
            .arg("-c")
            .arg("-f")
            .arg(&path)
            .output()
            .expect("run");
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        let alerts: Vec<String> = text
            .lines()
            .filter(|l| l.contains("ALERT"))
            .map(|l| l.split_once(" : ").map_or("", |(_, r)| r).to_string())
            .collect();
        (out.status.code(), alerts)
    };
    let pc = run(env!("CARGO_BIN_EXE_portcullis"));
    assert_eq!(pc.0, Some(1), "{pc:?}");
    if std::path::Path::new("/usr/sbin/haproxy").exists() {
        assert_eq!(pc, run("/usr/sbin/haproxy"));
    }
}
