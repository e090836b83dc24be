//! Hash-based balancing against HAProxy 2.6: the same configuration and the same 1,000 keys
//! (URIs, URL parameters, headers, client addresses) through HAProxy then portcullis, counting
//! which server answered each request (the fake servers name themselves in `x-node`). The two
//! sequences must be identical: a mixed fleet sends a given key to the same server. (And
//! `static-rr`, which walks the same weighted map as map-based hashing.)
//!
//! Skipped, with a notice, when /usr/sbin/haproxy is not installed.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::Write;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};
use std::time::Duration;

use backend::{HttpNode, HttpOpts, free_port, lo};
use proxy::{Proc, read_response};

const KEYS: usize = 1000;

/// One backend per case: `balance` and `hash-type` lines, and the servers' weights.
const CASES: &[(&str, &str, &[u32])] = &[
    ("balance uri", "", &[1, 2, 3, 1]),
    ("balance uri whole", "hash-type consistent", &[1, 1, 2, 1]),
    (
        "balance uri depth 2 len 12",
        "hash-type consistent crc32",
        &[1, 1, 1, 1],
    ),
    (
        "balance uri path-only",
        "hash-type map-based wt6 avalanche",
        &[2, 4, 6, 2],
    ),
    (
        "balance url_param k",
        "hash-type map-based djb2",
        &[1, 1, 1, 3],
    ),
    (
        "balance url_param x",
        "hash-type consistent sdbm",
        &[3, 1, 1, 1],
    ),
    (
        "balance hdr(x-key)",
        "hash-type consistent wt6",
        &[1, 2, 1, 2],
    ),
    (
        "balance hdr(host) use_domain_only",
        "hash-type map-based crc32 avalanche",
        &[1, 1, 1, 1],
    ),
    ("balance hdr(X-List)", "", &[5, 1, 1, 1]),
    (
        "balance hash req.hdr(x-key),lower",
        "hash-type consistent",
        &[1, 1, 1, 1],
    ),
    (
        "balance hash path,field(2,/)",
        "hash-type map-based djb2 avalanche",
        &[1, 3, 1, 2],
    ),
    ("balance hash url_param(k)", "", &[1, 1, 2, 2]),
    // Not a hash: HAProxy's map walked in order, the same sequence from the same start.
    ("balance static-rr", "", &[3, 1, 2, 1]),
];

fn have_haproxy() -> bool {
    let ok = std::path::Path::new("/usr/sbin/haproxy").exists();
    if !ok {
        eprintln!("NOTICE: /usr/sbin/haproxy is not installed: differential test skipped");
    }
    ok
}

/// Deterministic, varied words (xorshift).
struct Words(u64);

impl Words {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn word(&mut self) -> String {
        let n = 1 + (self.next() % 9) as usize;
        (0..n)
            .map(|_| (b'a' + (self.next() % 26) as u8) as char)
            .collect()
    }
}

/// The 1,000 requests every case sees: each part (path depth, query parameters, headers)
/// varies.
fn requests() -> Vec<String> {
    let mut w = Words(0x9e37_79b9_7f4a_7c15);
    (0..KEYS)
        .map(|i| {
            let depth = 1 + (w.next() % 4) as usize;
            let path: String = (0..depth).map(|_| format!("/{}", w.word())).collect();
            let query = match i % 4 {
                0 => format!("?k={}&x={}", w.word(), w.word()),
                1 => format!("?x={}&k={}", w.word(), i),
                2 => format!("?a=1&k={}{}", w.word(), i),
                _ => format!("?x={}", w.word()),
            };
            format!(
                "GET {path}{query} HTTP/1.1\r\nHost: {}.{}.example\r\nx-key: {}{i}\r\nx-list: {} , {}\r\n\r\n",
                w.word(),
                w.word(),
                w.word(),
                w.word(),
                w.word()
            )
        })
        .collect()
}

fn config(ports: &[u16], nodes: &[HttpNode], src_cases: &[(&str, &str, &[u32])]) -> String {
    let mut cfg = String::from(
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 20s\n    timeout server 20s\n\n",
    );
    for (i, (balance, hash, weights)) in CASES.iter().chain(src_cases).enumerate() {
        cfg.push_str(&format!(
            "listen l{i}\n    bind 127.0.0.1:{}\n    {balance}\n    {hash}\n",
            ports[i]
        ));
        for (n, (node, w)) in nodes.iter().zip(weights.iter()).enumerate() {
            cfg.push_str(&format!(
                "    server s{} {} weight {w}\n",
                n + 1,
                node.addr()
            ));
        }
        cfg.push('\n');
    }
    cfg
}

fn node_of(r: Option<proxy::Response>) -> String {
    r.and_then(|r| r.header("x-node"))
        .unwrap_or_else(|| "-".into())
}

/// The server each request went to, in order, over one keep-alive connection.
fn run_keys(addr: SocketAddr, reqs: &[String]) -> Vec<String> {
    let mut c = TcpStream::connect(addr).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    reqs.iter()
        .map(|raw| {
            c.write_all(raw.as_bytes()).expect("write");
            node_of(read_response(&mut c, false))
        })
        .collect()
}

/// `balance source`: one connection per client address in 127.0.0.0/8.
fn run_sources(addr: SocketAddr, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let ip = IpAddr::V4(Ipv4Addr::new(
                127,
                1 + (i / 250) as u8,
                (i * 7 % 256) as u8,
                1 + (i % 250) as u8,
            ));
            let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                .expect("socket");
            sock.bind(&SocketAddr::new(ip, 0).into()).expect("bind src");
            sock.connect(&addr.into()).expect("connect");
            let mut c: TcpStream = sock.into();
            c.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                .expect("write");
            node_of(read_response(&mut c, false))
        })
        .collect()
}

const SOURCE_CASES: &[(&str, &str, &[u32])] = &[
    ("balance source", "", &[1, 2, 1, 1]),
    ("balance source", "hash-type consistent", &[1, 1, 1, 1]),
    (
        "balance source",
        "hash-type map-based sdbm avalanche",
        &[2, 1, 1, 2],
    ),
];

/// Runs every case against one proxy: per case, the server of each key.
fn observe(haproxy: bool, nodes: &[HttpNode], reqs: &[String], sources: usize) -> Vec<Vec<String>> {
    let ports: Vec<u16> = (0..CASES.len() + SOURCE_CASES.len())
        .map(|_| free_port())
        .collect();
    let cfg = config(&ports, nodes, SOURCE_CASES);
    let proc = if haproxy {
        Proc::haproxy(&cfg, lo(ports[0])).expect("haproxy")
    } else {
        Proc::portcullis(&cfg, lo(ports[0]))
    };
    for p in &ports[1..] {
        // Every listener accepts before the first request.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(lo(*p)).is_err() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let mut out: Vec<Vec<String>> = (0..CASES.len())
        .map(|i| run_keys(lo(ports[i]), reqs))
        .collect();
    for i in 0..SOURCE_CASES.len() {
        out.push(run_sources(lo(ports[CASES.len() + i]), sources));
    }
    drop(proc);
    out
}

#[test]
fn hash_balancing_picks_the_server_haproxy_picks() {
    if !have_haproxy() {
        return;
    }
    let nodes: Vec<HttpNode> = (1..=4)
        .map(|i| HttpNode::start(lo(0), HttpOpts::named(&format!("n{i}"))).expect("node"))
        .collect();
    let reqs = requests();
    let sources = 300;
    let h = observe(true, &nodes, &reqs, sources);
    let p = observe(false, &nodes, &reqs, sources);
    let all: Vec<&(&str, &str, &[u32])> = CASES.iter().chain(SOURCE_CASES).collect();
    for (i, (hs, ps)) in h.iter().zip(&p).enumerate() {
        let (balance, hash, weights) = all[i];
        // The reference spreads the keys over every server (the keys do vary).
        let used: std::collections::BTreeSet<&String> = hs.iter().collect();
        assert!(
            used.len() == weights.len() && !used.contains(&"-".to_string()),
            "{balance} {hash}: HAProxy used {used:?}"
        );
        let diff: Vec<usize> = (0..hs.len()).filter(|&k| hs[k] != ps[k]).collect();
        assert!(
            diff.is_empty(),
            "{balance} / {hash} / weights {weights:?}: {} of {} keys differ, first at {}: haproxy {} portcullis {} ({:?})",
            diff.len(),
            hs.len(),
            diff[0],
            hs[diff[0]],
            ps[diff[0]],
            reqs.get(diff[0]).map(|r| r.lines().next())
        );
    }
}

/// POSTs for `balance url_param … check_post` and `balance hash var(…)`: the parameter in the
/// query string (it wins), in a form body (`Content-Length` or chunked in two pieces), after a
/// blank (an empty value to HAProxy), behind a byte that is no token (no key: round the map),
/// and an `x-key` header the backend's rules copy into a variable.
fn post_requests() -> Vec<String> {
    let mut w = Words(0x2545_f491_4f6c_dd1d);
    (0..KEYS)
        .map(|i| {
            let (query, body) = match i % 5 {
                0 => (String::new(), format!("a=1&k={}{i}&z=2", w.word())),
                1 => (format!("?k={}", w.word()), "k=other".to_string()),
                2 => (String::new(), format!("k={}{i}", w.word())),
                3 if i % 25 == 3 => (String::new(), format!("k=({})", w.word())),
                3 => (String::new(), format!("k=\t{}", w.word())),
                _ => (String::new(), format!("x={}&k={}{i}", w.word(), w.word())),
            };
            let key = format!("{}{i}", w.word());
            if i % 5 == 2 {
                let (a, b) = body.split_at(body.len() / 2);
                format!(
                    "POST /p{query} HTTP/1.1\r\nHost: h\r\nx-key: {key}\r\nTransfer-Encoding: chunked\r\n\r\n{:x}\r\n{a}\r\n{:x}\r\n{b}\r\n0\r\n\r\n",
                    a.len(),
                    b.len()
                )
            } else {
                format!(
                    "POST /p{query} HTTP/1.1\r\nHost: h\r\nx-key: {key}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                )
            }
        })
        .collect()
}

const POST_CASES: &[(&str, &str)] = &[
    ("balance url_param k check_post", "hash-type map-based djb2"),
    ("balance url_param k check_post", "hash-type consistent"),
    ("balance url_param k", "hash-type map-based sdbm avalanche"),
    (
        "balance hash var(txn.k)\n    http-request set-var(txn.k) req.hdr(x-key)",
        "hash-type consistent wt6",
    ),
    (
        "balance hash var(req.k),lower\n    http-request set-var(req.k) req.hdr(x-key),upper",
        "",
    ),
];

fn observe_posts(haproxy: bool, nodes: &[HttpNode], reqs: &[String]) -> Vec<Vec<String>> {
    let ports: Vec<u16> = POST_CASES.iter().map(|_| free_port()).collect();
    let mut cfg = String::from(
        "defaults\n    mode http\n    timeout connect 2s\n    timeout client 20s\n    timeout server 20s\n    timeout http-request 5s\n\n",
    );
    for (i, (balance, hash)) in POST_CASES.iter().enumerate() {
        cfg.push_str(&format!(
            "listen l{i}\n    bind 127.0.0.1:{}\n    {balance}\n    {hash}\n",
            ports[i]
        ));
        for (n, node) in nodes.iter().enumerate() {
            cfg.push_str(&format!(
                "    server s{} {} weight {}\n",
                n + 1,
                node.addr(),
                n + 1
            ));
        }
        cfg.push('\n');
    }
    let proc = if haproxy {
        Proc::haproxy(&cfg, lo(ports[0])).expect("haproxy")
    } else {
        Proc::portcullis(&cfg, lo(ports[0]))
    };
    for p in &ports[1..] {
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(lo(*p)).is_err() && std::time::Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let out = ports.iter().map(|p| run_keys(lo(*p), reqs)).collect();
    drop(proc);
    out
}

#[test]
fn post_parameters_and_variables_pick_the_server_haproxy_picks() {
    if !have_haproxy() {
        return;
    }
    let nodes: Vec<HttpNode> = (1..=4)
        .map(|i| HttpNode::start(lo(0), HttpOpts::named(&format!("n{i}"))).expect("node"))
        .collect();
    let reqs = post_requests();
    let h = observe_posts(true, &nodes, &reqs);
    let p = observe_posts(false, &nodes, &reqs);
    for (i, (hs, ps)) in h.iter().zip(&p).enumerate() {
        let (balance, hash) = POST_CASES[i];
        let used: std::collections::BTreeSet<&String> = hs.iter().collect();
        assert!(
            used.len() == 4 && !used.contains(&"-".to_string()),
            "{balance} {hash}: HAProxy used {used:?}"
        );
        let diff: Vec<usize> = (0..hs.len()).filter(|&k| hs[k] != ps[k]).collect();
        assert!(
            diff.is_empty(),
            "{balance} / {hash}: {} of {} keys differ, first at {}: haproxy {} portcullis {} ({:?})",
            diff.len(),
            hs.len(),
            diff[0],
            hs[diff[0]],
            ps[diff[0]],
            reqs.get(diff[0])
        );
    }
}
