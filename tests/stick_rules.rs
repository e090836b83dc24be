//! `stick on src` (issue 19): a client address sticks to the server it first got, through a
//! roundrobin backend, and `show table` lists `server_id`/`server_key` as HAProxy 2.6 does;
//! other patterns, conditions, `store-response` and other key types — compared with HAProxy on
//! the same requests.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use backend::{HttpNode, HttpOpts, free_port, lo};
use proxy::{Proc, TempDir, admin_cli};

/// One GET from `src`; the node that answered.
fn get_from(src: Ipv4Addr, port: u16) -> String {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    s.bind(&SocketAddr::new(IpAddr::V4(src), 0).into()).unwrap();
    s.connect(&lo(port).into()).unwrap();
    let mut s: TcpStream = s.into();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.split_whitespace()
        .find_map(|w| w.strip_prefix("node="))
        .unwrap_or("?")
        .to_string()
}

fn scenario(haproxy: bool) -> Option<Vec<String>> {
    let dir = TempDir::new(if haproxy { "stk-ha" } else { "stk-pc" });
    let sock = dir.0.join("admin.sock");
    let nodes: Vec<HttpNode> = (1..=3)
        .map(|i| HttpNode::start(lo(0), HttpOpts::named(&format!("n{i}"))).expect("node"))
        .collect();
    let port = free_port();
    let mut cfg = format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend b\n\
         backend b\n    balance roundrobin\n    stick-table type ip size 1k expire 10m\n    stick on src\n",
        sock.display()
    );
    for (i, n) in nodes.iter().enumerate() {
        cfg.push_str(&format!("    server s{} {}\n", i + 1, n.addr()));
    }
    let p = if haproxy {
        Proc::haproxy(&cfg, lo(port))?
    } else {
        Proc::portcullis(&cfg, lo(port))
    };
    let mut seen = Vec::new();
    for round in 0..3 {
        for c in 2..=6u8 {
            let who = get_from(Ipv4Addr::new(127, 0, 0, c), port);
            seen.push(format!("round {round} 127.0.0.{c} -> {who}"));
        }
    }
    for l in admin_cli(&sock, "show table b").lines() {
        // Entry addresses and expiry differ by nature.
        let fields: Vec<&str> = l
            .split_whitespace()
            .filter(|f| !f.starts_with("0x") && !f.starts_with("exp="))
            .collect();
        seen.push(fields.join(" "));
    }
    drop(p);
    Some(seen)
}

#[test]
fn stick_on_src_keeps_each_client_on_its_server_as_haproxy() {
    let ours = scenario(false).expect("portcullis");
    // Every source gets the same node in every round.
    for c in 2..=6 {
        let got: Vec<&String> = ours
            .iter()
            .filter(|l| l.contains(&format!(" 127.0.0.{c} -> ")))
            .collect();
        let first = got[0].rsplit(' ').next().unwrap_or("");
        assert!(
            got.iter().all(|l| l.ends_with(first)),
            "127.0.0.{c}: {got:?}"
        );
    }
    assert!(
        ours.iter()
            .any(|l| l.starts_with("key=127.0.0.2 use=0 server_id=")),
        "{ours:#?}"
    );
    if let Some(theirs) = scenario(true) {
        assert_eq!(ours, theirs);
    }
}

/// One GET with extra header lines; the node that answered.
fn get_with(port: u16, path: &str, headers: &str) -> String {
    let mut s = TcpStream::connect(lo(port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: a\r\n{headers}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines()
        .find_map(|l| l.strip_prefix("x-node: "))
        .unwrap_or("?")
        .trim()
        .to_string()
}

/// Patterns other than `src`, with conditions and another table: `stick match req.hdr(x-want)`
/// finds what `stick store-response res.hdr(x-node) if { status 200 }` stored (the node's
/// name, in a `string` table), `stick on req.hdr(x-user) table t2` keys an `integer` table.
fn patterns_scenario(haproxy: bool) -> Option<Vec<String>> {
    let dir = TempDir::new(if haproxy { "stkp-ha" } else { "stkp-pc" });
    let sock = dir.0.join("admin.sock");
    let nodes: Vec<HttpNode> = (1..=3)
        .map(|i| HttpNode::start(lo(0), HttpOpts::named(&format!("n{i}"))).expect("node"))
        .collect();
    let port = free_port();
    let mut cfg = format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend b\n\
         backend t2\n    stick-table type integer size 1k expire 10m\n\
         backend b\n    balance roundrobin\n    stick-table type string len 16 size 1k expire 10m\n\
         \x20   stick match req.hdr(x-want)\n\
         \x20   stick store-response res.hdr(x-node) if {{ status 200 }}\n\
         \x20   stick on req.hdr(x-user) table t2 if {{ req.hdr(x-user) -m found }}\n",
        sock.display()
    );
    for (i, n) in nodes.iter().enumerate() {
        cfg.push_str(&format!("    server s{} {}\n", i + 1, n.addr()));
    }
    let p = if haproxy {
        Proc::haproxy(&cfg, lo(port))?
    } else {
        Proc::portcullis(&cfg, lo(port))
    };
    let mut seen = Vec::new();
    let mut ask = |path: &str, h: &str| {
        let who = get_with(port, path, h);
        seen.push(format!("{path} {h:?} -> {who}"));
    };
    for _ in 0..3 {
        ask("/", "");
    }
    for want in ["n2", "n3", "n2", "n1", "n9", "n2"] {
        ask("/", &format!("x-want: {want}\r\n"));
    }
    ask("/status?code=503", "x-want: n1\r\n");
    for _ in 0..3 {
        ask("/", "x-user: 42\r\n");
        ask("/", "x-user: -1\r\n");
    }
    for t in ["b", "t2"] {
        for l in admin_cli(&sock, &format!("show table {t}")).lines() {
            let fields: Vec<&str> = l
                .split_whitespace()
                .filter(|f| !f.starts_with("0x") && !f.starts_with("exp="))
                .collect();
            seen.push(fields.join(" "));
        }
    }
    drop(p);
    Some(seen)
}

#[test]
fn stick_patterns_and_conditions_as_haproxy() {
    let ours = patterns_scenario(false).expect("portcullis");
    assert!(
        ours.iter()
            .any(|l| l == "key=4294967295 use=0 server_id=3 server_key=s3"),
        "{ours:#?}"
    );
    // A stored node name brings its node back.
    for l in ours.iter().filter(|l| l.contains("x-want: n2")) {
        assert!(l.ends_with("-> n2"), "{ours:#?}");
    }
    let Some(theirs) = patterns_scenario(true) else {
        return;
    };
    assert_eq!(ours, theirs);
}
