//! DNS over TCP (`nameserver <name> tcp@<ip>:<port>`) against a test-owned DNS server that
//! only speaks TCP: a changed A record moves traffic without a reload, as with UDP; the same
//! scenario runs on HAProxy 2.6 when installed. And HAProxy's implicit `resolvers default`
//! (built from /etc/resolv.conf when the configuration has no such section) is listed by
//! `show resolvers` as HAProxy lists it — no server uses it, so nothing is sent to the
//! machine's nameservers.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/dns.rs"]
mod dns;
#[path = "support/proxy.rs"]
mod proxy;

use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use backend::{HttpNode, free_port, lo, wait_until};
use dns::{DnsServer, Rr};
use proxy::{Proc, TempDir, admin_cli};

const N1: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
const N2: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 3);
const WAIT: Duration = Duration::from_secs(15);

/// Two HTTP nodes on the same port of two loopback addresses, so only the address moves.
fn nodes() -> (HttpNode, HttpNode, u16) {
    backend::node_pair(IpAddr::V4(N1), IpAddr::V4(N2))
}

/// Which node answered `/` through the proxy ("503" when none).
fn who(port: u16) -> String {
    proxy::answering_node(lo(port))
}

/// The run: (node before the change, node after, `show resolvers`' default section).
fn scenario(haproxy: bool) -> Option<(String, String, String)> {
    let dir = TempDir::new(if haproxy { "rtcp-ha" } else { "rtcp-pc" });
    let sock = dir.0.join("admin.sock");
    let (_n1, _n2, np) = nodes();
    let dns = DnsServer::start_tcp(IpAddr::V4(Ipv4Addr::LOCALHOST)).expect("dns");
    dns.set("app.test", vec![Rr::A(N1)]);
    let port = free_port();
    let cfg = format!(
        "global\n    stats socket {sock} level admin\n\
         resolvers r\n    nameserver t tcp@{dns}\n    resolve_retries 2\n    \
         timeout resolve 100ms\n    timeout retry 200ms\n    hold valid 100ms\n\
         defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend b\n\
         backend b\n    server s1 app.test:{np} resolvers r resolve-prefer ipv4 init-addr none\n",
        sock = sock.display(),
        dns = dns.addr(),
    );
    let _p = if haproxy {
        Proc::haproxy(&cfg, lo(port))?
    } else {
        Proc::portcullis(&cfg, lo(port))
    };
    let mut first = String::new();
    wait_until(WAIT, || {
        first = who(port);
        first == "n1"
    });
    dns.set("app.test", vec![Rr::A(N2)]);
    let mut second = String::new();
    wait_until(WAIT, || {
        second = who(port);
        second == "n2"
    });
    assert!(dns.queries() > 0, "the TCP server answered");
    let shown = admin_cli(&sock, "show resolvers");
    let default = shown
        .split_once("Resolvers section default\n")
        .map(|(_, d)| format!("Resolvers section default\n{d}"))
        .unwrap_or_default();
    Some((first, second, default))
}

#[test]
fn tcp_nameserver_moves_a_server_and_default_section_is_listed() {
    let p = scenario(false).expect("portcullis");
    assert_eq!((p.0.as_str(), p.1.as_str()), ("n1", "n2"), "{p:?}");
    if let Some(h) = scenario(true) {
        assert_eq!(h, p, "HAProxy 2.6 vs portcullis");
    }
}
