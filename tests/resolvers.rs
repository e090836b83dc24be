//! Servers given by name: `init-addr`, `server-template`, the resolution maintenance and what
//! `show stat` / `show servers state` say about it, against HAProxy 2.6.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::path::Path;

use backend::{HttpNode, HttpOpts, free_port, lo};
use proxy::{Proc, TempDir, admin_cli, get};

/// `show stat` reduced to name, status and weight; `show servers state` to name, address,
/// op state, admin state, fqdn and port.
fn states(sock: &Path, node: &str, node_port: u16) -> Vec<String> {
    let mut out = Vec::new();
    for l in admin_cli(sock, "show stat").lines().skip(1) {
        let f: Vec<&str> = l.split(',').collect();
        if f.len() > 18 && f[0] == "b" {
            out.push(format!("stat {} {} w={}", f[1], f[17], f[18]));
        }
    }
    for l in admin_cli(sock, "show servers state b").lines().skip(2) {
        let f: Vec<&str> = l.split(' ').collect();
        if f.len() > 18 {
            let addr = f[4].replace(node, "NODE");
            let port = f[18].replace(&node_port.to_string(), "NODEPORT");
            out.push(format!(
                "state {} addr={addr} op={} admin={} fqdn={} port={port}",
                f[3], f[5], f[6], f[17]
            ));
        }
    }
    out
}

fn scenario(haproxy: bool) -> Option<Vec<String>> {
    let dir = TempDir::new(if haproxy { "res-ha" } else { "res-pc" });
    let sock = dir.0.join("admin.sock");
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let port = free_port();
    let cfg = format!(
        "global\n    stats socket {} level admin\ndefaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\nfrontend fe\n    bind 127.0.0.1:{port}\n    default_backend b\nbackend b\n    server-template s 2 unresolvable.invalid:{} init-addr none\n    server t unresolvable.invalid:81 init-addr 127.0.0.9\n",
        sock.display(),
        node.addr().port()
    );
    let p = if haproxy {
        Proc::haproxy(&cfg, lo(port))?
    } else {
        Proc::portcullis(&cfg, lo(port))
    };
    let ip = node.addr().ip().to_string();
    let mut seen = states(&sock, &ip, node.addr().port());
    // Nothing usable yet: s1/s2 wait for an address, t has no listener.
    seen.push(format!("get: {}", get(lo(port), "/").status));
    let reply = admin_cli(&sock, &format!("set server b/s1 addr {ip}"));
    seen.push(format!("set addr: {}", reply.replace(&ip, "NODE")));
    seen.extend(states(&sock, &ip, node.addr().port()));
    // HAProxy refuses a runtime address for a server that has none, but s1 leaves the
    // resolution maintenance anyway: in service without an address, it fails every request,
    // as t does (127.0.0.9, no listener).
    for i in 0..2 {
        seen.push(format!("get after {i}: {}", get(lo(port), "/").status));
    }
    // A server with an address takes a new one at runtime.
    let reply = admin_cli(
        &sock,
        &format!("set server b/t addr {ip} port {}", node.addr().port()),
    );
    let reply = reply.replace(&ip, "NODE");
    seen.push(format!(
        "set t addr: {}",
        reply.replace(&node.addr().port().to_string(), "NODEPORT")
    ));
    seen.extend(states(&sock, &ip, node.addr().port()));
    let mut got = 0;
    for _ in 0..6 {
        got = get(lo(port), "/").status;
        if got == 200 {
            break;
        }
    }
    seen.push(format!("get t: {got}"));
    drop(p);
    Some(seen)
}

#[test]
fn unresolved_servers_wait_in_resolution_maintenance_as_haproxy() {
    let ours = scenario(false).expect("portcullis");
    assert!(
        ours.iter().any(|l| l == "stat s1 MAINT (resolution) w=1"),
        "{ours:#?}"
    );
    assert!(ours.iter().any(|l| l == "get t: 200"), "{ours:#?}");
    assert!(ours.iter().any(|l| l == "get after 0: 503"), "{ours:#?}");
    if let Some(theirs) = scenario(true) {
        assert_eq!(ours, theirs);
    }
}
