//! `peers` sections: `-c` against HAProxy 2.6 on the same files (errors, warnings, exit codes).

use std::path::Path;
use std::process::{Command, Output};

const HAPROXY: &str = "/usr/sbin/haproxy";

fn run(bin: &str, file: &Path, extra: &[&str]) -> Output {
    Command::new(bin)
        .args(extra)
        .arg("-c")
        .arg("-f")
        .arg(file)
        .output()
        .expect("run the check")
}

/// The `[ALERT]`/`[WARNING]` lines without pids (HAProxy's version NOTICE lines left out).
fn diag_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.contains("haproxy version is") && !l.contains("path to executable"))
        .map(|l| match (l.find('('), l.find(") : ")) {
            (Some(a), Some(b)) if a < b => format!("{}(PID{}", &l[..a], &l[b..]),
            _ => l.to_string(),
        })
        .collect()
}

const BASE: &str = "defaults\n mode http\n timeout client 1s\n timeout server 1s\n timeout connect 1s\nfrontend f\n bind 127.0.0.1:18080\n";

/// Every case runs with `-L lb1` on both sides, so the host name does not matter.
const CASES: &[&str] = &[
    "peers\n",
    "peers a/b\n peer lb1 127.0.0.1:10000\n",
    "peers p\n peer lb1 127.0.0.1:10000\npeers p\n peer lb1 127.0.0.1:10001\n",
    "peers p\n peer lb1 127.0.0.1:10000\n shards 2\n",
    "peers p\n peer lb1\n",
    "peers p\n peer lb1 1.2.3.4.5:10000\n",
    "peers p\n bind 127.0.0.1:10000\n peer lb1 127.0.0.1:10000\n",
    "peers p\n peer lb1 127.0.0.1:10000\n peer lb1 127.0.0.1:10001\n",
    "backend b\n stick-table type ip size 1k peers nope\n",
    "peers p\n peer other 127.0.0.1:10000\nbackend b\n stick-table type ip size 1k peers p\n",
    "peers p\n peer lb1 127.0.0.1:10000 check\n peer o 127.0.0.2:10000 check\n",
    "peers p\n peer lb1 127.0.0.1:10000\n table t type ip size 1k store http_req_rate(10s)\n table t type ip size 1k\nbackend b\n http-request track-sc0 src table p/t\n",
    "peers p\n peer lb1 127.0.0.1:10000\n disabled\n enable\n",
    "peers p\n peer lb1 127.0.0.1:10000\n disabled\nbackend b\n stick-table type ip size 1k peers p\n",
    "peers p\n default-bind v4v6\n default-server inter 3s\n bind 127.0.0.1:10000\n server lb1\n server o 127.0.0.2:10000\n",
    "peers p\n peer lb1 127.0.0.1\n",
    "peers p\n peer lb1 127.0.0.1:10000\n log 127.0.0.1 local0\n",
    "peers p\n peer lb1 127.0.0.1:10000\n peer o 127.0.0.2:10000\nbackend b\n stick-table type ip size 1k peers p\nbackend c\n stick-table type ip size 1k peers p\n",
    "peers p\n server lb1 127.0.0.1:10000\n",
    "peers p\n peer\n",
    "peers p\n bind 127.0.0.1:10000\n bind 127.0.0.1:10001\n server lb1\n",
    "peers p\n peer lb1 127.0.0.1:10000\n table t type ip size 1k peers p\n",
    "peers p\n peer lb1 127.0.0.1:10000\n table\n",
    "peers p\n enabled\n peer lb1 127.0.0.1:10000\n",
    "backend b\n stick-table type ip size 1k\npeers p\n peer lb1 127.0.0.1:10000\n table b type ip size 1k\n",
    "peers p\n peer lb1 127.0.0.1:10000 shard 1\n",
    "peers p\nbackend b\n stick-table type ip size 1k peers p\n",
    "peers p\n peer lb1 127.0.0.1:10000\nglobal\n localpeer x\n",
    "global\n localpeer lb1\npeers p\n peer lb1 127.0.0.1:10000\n",
    "peers p\n peer a/b 127.0.0.1:10000\n",
    "peers p\n peer lb1 127.0.0.1:10000\n peer o 127.0.0.2:10000 init-addr none resolvers r\n",
    "peers p\n peer lb1 [::1]:10000\n peer o ipv6@::2:10000\n",
    "peers p\n peer lb1 127.0.0.1:10000\n peer o somehost.invalid:10000\n",
    "peers p\n peer lb1 127.0.0.1:10000\nbackend b\n stick-table type ip size 1k peers\n",
    "peers p\n peer lb1 127.0.0.1:10000\n peer o 127.0.0.2\n peer\n",
    "peers p\n peer lb1 127.0.0.1:10000\n table t type ip size 1k store gpc0,conn_cnt expire 30s\nbackend b\n stick-table type ip size 1k peers p store gpc0\n",
];

#[test]
fn peers_sections_check_like_haproxy() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("notice: {HAPROXY} not found, differential test skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("portcullis-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ours = env!("CARGO_BIN_EXE_portcullis");
    for (i, c) in CASES.iter().enumerate() {
        let f = dir.join(format!("p{i}.cfg"));
        std::fs::write(&f, format!("{BASE}{c}")).unwrap();
        let a = run(ours, &f, &["-L", "lb1"]);
        let b = run(HAPROXY, &f, &["-L", "lb1"]);
        assert_eq!(a.status.code(), b.status.code(), "case {i}:\n{c}");
        assert_eq!(diag_lines(&a), diag_lines(&b), "case {i}:\n{c}");
    }
    // Without `-L` the local peer is the host name, as in HAProxy.
    let f = dir.join("host.cfg");
    std::fs::write(
        &f,
        format!("{BASE}peers p\n peer nosuchhost 127.0.0.1:10000\n"),
    )
    .unwrap();
    let (a, b) = (run(ours, &f, &[]), run(HAPROXY, &f, &[]));
    assert_eq!(a.status.code(), b.status.code());
    assert_eq!(diag_lines(&a), diag_lines(&b));
    let _ = std::fs::remove_dir_all(&dir);
}
