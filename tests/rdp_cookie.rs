//! RDP cookies in `mode tcp` (issue 19 item 4): `tcp-request content accept if RDP_COOKIE`
//! waiting for the whole cookie, `balance rdp-cookie` picking the server HAProxy 2.6 picks for
//! each user, `persist rdp-cookie` sending a client to the server its cookie names, and
//! `stick on req.rdp_cookie(mstshash)` keying a `string` table — compared with HAProxy 2.6 on
//! the same connections. Runs with the engine from `PORTCULLIS_IO`.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use backend::{TcpEcho, free_port, lo, wait_until};
use proxy::{Proc, TempDir, admin_cli};

/// A Remote Desktop client's first packet: TPKT and X.224 headers, then the cookie line.
fn rdp_packet(cookie: &str) -> Vec<u8> {
    let line = format!("Cookie: {cookie}\r\n");
    let len = 11 + line.len() + 8;
    let mut p = vec![
        3,
        0,
        (len >> 8) as u8,
        len as u8,
        (len - 5) as u8,
        0xe0,
        0,
        0,
        0,
        0,
        0,
    ];
    p.extend_from_slice(line.as_bytes());
    p.extend_from_slice(&[1, 0, 8, 0, 3, 0, 0, 0]);
    p
}

/// Sends `pkt` (in two pieces, the first without the cookie's end) and reads it back through
/// the echo server the proxy chose: which one, by its index.
fn connect_with(port: u16, pkt: &[u8], echoes: &[TcpEcho]) -> Option<usize> {
    let before: Vec<u64> = echoes.iter().map(TcpEcho::connections).collect();
    let mut s = TcpStream::connect(lo(port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let cut = pkt.len() - 12;
    s.write_all(&pkt[..cut]).unwrap();
    std::thread::sleep(Duration::from_millis(50));
    s.write_all(&pkt[cut..]).unwrap();
    let mut back = vec![0; pkt.len()];
    s.read_exact(&mut back).ok()?;
    assert_eq!(back, pkt);
    drop(s);
    echoes
        .iter()
        .zip(before)
        .position(|(e, b)| e.connections() > b)
}

/// `persist rdp-cookie`'s value for a server: its IPv4 address and port as HAProxy reads them.
fn msts(addr: SocketAddr) -> String {
    let SocketAddr::V4(a) = addr else {
        panic!("IPv4 only")
    };
    let ip = u32::from_le_bytes(a.ip().octets());
    let port = u16::from_le_bytes(a.port().to_be_bytes());
    format!("msts={ip}.{port}.0000")
}

fn scenario(haproxy: bool) -> Option<Vec<String>> {
    let dir = TempDir::new(if haproxy { "rdp-ha" } else { "rdp-pc" });
    let sock = dir.0.join("admin.sock");
    let echoes: Vec<TcpEcho> = (0..3)
        .map(|_| TcpEcho::start(lo(free_port())).expect("echo"))
        .collect();
    let (p1, p2) = (free_port(), free_port());
    let mut cfg = format!(
        "global\n    stats socket {} level admin\n\
         defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend f1\n    bind 127.0.0.1:{p1}\n    tcp-request inspect-delay 5s\n    tcp-request content accept if RDP_COOKIE\n    default_backend b1\n\
         frontend f2\n    bind 127.0.0.1:{p2}\n    tcp-request inspect-delay 5s\n    tcp-request content accept if {{ req.rdp_cookie_cnt(msts) gt 0 }}\n    default_backend b2\n\
         backend b1\n    balance rdp-cookie\n    stick-table type string len 8 size 1k expire 10m\n    stick store-request req.rdp_cookie(mstshash)\n",
        sock.display()
    );
    for (i, e) in echoes.iter().enumerate() {
        cfg.push_str(&format!("    server s{} {}\n", i + 1, e.addr()));
    }
    cfg.push_str("backend b2\n    balance roundrobin\n    persist rdp-cookie\n");
    for (i, e) in echoes.iter().enumerate() {
        cfg.push_str(&format!("    server s{} {}\n", i + 1, e.addr()));
    }
    let p = if haproxy {
        Proc::haproxy(&cfg, lo(p1))?
    } else {
        Proc::portcullis(&cfg, lo(p1))
    };
    // The readiness probe went through f1 without a cookie: it is part of the sequence.
    let mut seen = Vec::new();
    for user in [
        "alice", "bob", "carol", "dave", "eve", "mallory", "alice", "bob",
    ] {
        let to = connect_with(p1, &rdp_packet(&format!("mstshash={user}")), &echoes);
        seen.push(format!("b1 {user} -> {to:?}"));
    }
    for target in [2, 0, 1, 2] {
        let pkt = rdp_packet(&msts(echoes[target].addr()));
        let to = connect_with(p2, &pkt, &echoes);
        seen.push(format!("b2 s{} -> {to:?}", target + 1));
    }
    wait_until(Duration::from_secs(3), || {
        echoes.iter().all(|e| e.open_connections() == 0)
    });
    for l in admin_cli(&sock, "show table b1").lines() {
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
fn rdp_cookie_balance_persist_and_stick_as_haproxy() {
    let ours = scenario(false).expect("portcullis");
    for target in [1, 2, 3] {
        let tag = format!("b2 s{target} -> Some({})", target - 1);
        assert!(ours.contains(&tag), "{tag}: {ours:#?}");
    }
    assert!(
        ours.iter()
            .any(|l| l.starts_with("key=mallory use=0 server_id=")),
        "{ours:#?}"
    );
    if let Some(theirs) = scenario(true) {
        assert_eq!(ours, theirs);
    }
}
