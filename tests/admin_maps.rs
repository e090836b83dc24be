//! Maps against HAProxy 2.6: the same configuration (`use_backend %[req.hdr(host),lower,
//! map(<hosts.map>,be_default)]`, `map_beg` and `map_ip` in `http-request set-header`) and the
//! same map files under both; the same `show/get/add/set/del/clear/prepare/commit map` script
//! must give the same reply bytes (entry references `0x…`, map ids and the configuration's path
//! masked), and requests must be routed alike after every change, without a reload.
//! Skipped with a notice when /usr/sbin/haproxy is missing.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use backend::free_port;
use proxy::{Proc, TempDir};

const HAPROXY: &str = "/usr/sbin/haproxy";

fn cli(sock: &Path, cmd: &str) -> String {
    let mut s = proxy::admin_connect(sock);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

struct Side {
    _dir: TempDir,
    _proc: Proc,
    sock: PathBuf,
    front: SocketAddr,
    maps: PathBuf,
}

impl Side {
    fn start(label: &str, haproxy: bool) -> Side {
        let dir = TempDir::new(&format!("admmaps-{label}"));
        let sock = dir.0.join("admin.sock");
        let maps = dir.0.join("maps");
        std::fs::create_dir_all(&maps).unwrap();
        std::fs::write(
            maps.join("hosts.map"),
            "www.example.com be_a\n# comment\n\napi.example.com   be_b\n",
        )
        .unwrap();
        std::fs::write(maps.join("paths.map"), "/api be_b\n/static be_a\n").unwrap();
        let port = free_port();
        let m = maps.display();
        let cfg = format!(
            "global\n    stats socket \"{sock}\" mode 600 level admin\n\n\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\n\
             frontend f\n    bind 127.0.0.1:{port}\n    http-request set-header X-P %[path,map_beg({m}/paths.map,none)]\n    use_backend %[req.hdr(host),lower,map({m}/hosts.map,be_default)]\n    default_backend be_default\n\n\
             backend be_a\n    http-request return status 200 content-type text/plain string a\n\n\
             backend be_b\n    http-request return status 200 content-type text/plain string b\n\n\
             backend be_default\n    http-request return status 200 content-type text/plain string d\n",
            sock = sock.display(),
        );
        let front = SocketAddr::from(([127, 0, 0, 1], port));
        let proc = if haproxy {
            Proc::haproxy(&cfg, front).expect("haproxy present")
        } else {
            Proc::portcullis(&cfg, front)
        };
        Side {
            _dir: dir,
            _proc: proc,
            sock,
            front,
            maps,
        }
    }

    fn cli(&self, cmd: &str) -> String {
        cli(
            &self.sock,
            &cmd.replace("{maps}", &self.maps.display().to_string()),
        )
    }

    /// The body answered for `Host: host`.
    fn route(&self, host: &str) -> String {
        let r = proxy::request(
            self.front,
            &format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        );
        r.text()
    }

    /// References, ids and paths masked; `show map`'s list sorted (ids are given in a
    /// different order).
    fn masked(&self, reply: &str) -> String {
        let maps = self.maps.display().to_string();
        let mut lines: Vec<String> = reply
            .split_inclusive('\n')
            .map(|l| {
                let mut l = l.replace(&maps, "MAPS");
                if l.starts_with("0x") {
                    l = match l.split_once(' ') {
                        Some((_, rest)) => format!("REF {rest}"),
                        None => l,
                    };
                }
                if let Some((id, rest)) = l.split_once(" (MAPS")
                    && id.parse::<u32>().is_ok()
                {
                    // `used by map at file '<cfg>' line N`: the configuration's own path.
                    let rest = match rest.split_once("at file '") {
                        Some((a, b)) => {
                            let tail = b.split_once('\'').map_or("", |(_, t)| t);
                            format!("{a}at file 'CFG'{tail}")
                        }
                        None => rest.to_string(),
                    };
                    l = format!("ID (MAPS{rest}");
                }
                l
            })
            .collect();
        if lines.first().is_some_and(|l| l.starts_with("# id (file)")) {
            lines[1..].sort();
        }
        lines.concat()
    }
}

/// Commands and, after each, the hosts whose routing is compared.
const SCRIPT: &[&str] = &[
    "show map",
    "show map {maps}/hosts.map",
    "show map #99",
    "get map {maps}/hosts.map www.example.com",
    "get map {maps}/hosts.map nope",
    "get map {maps}/paths.map /api/x",
    "get map {maps}/paths.map /nothing",
    "get map /nope x",
    "get map {maps}/hosts.map",
    "add map {maps}/hosts.map new.example.com be_b",
    "set map {maps}/hosts.map www.example.com be_b",
    "set map {maps}/hosts.map nope.example.com be_a",
    "set map {maps}/hosts.map #0x1 x",
    "set map",
    "del map {maps}/hosts.map api.example.com",
    "del map {maps}/hosts.map api.example.com",
    "del map {maps}/hosts.map",
    "add map {maps}/hosts.map",
    "add map {maps}/hosts.map k",
    "add map /nope k v",
    "show map {maps}/hosts.map",
    "prepare map {maps}/hosts.map",
    "prepare map {maps}/hosts.map",
    "add map @1 {maps}/hosts.map v1.example.com be_a",
    "add map @2 {maps}/hosts.map v2.example.com be_b",
    "add map @2 {maps}/hosts.map www.example.com be_a",
    "show map @2 {maps}/hosts.map",
    "show map {maps}/hosts.map",
    "commit map @9 {maps}/hosts.map",
    "commit map {maps}/hosts.map",
    "commit map",
    "clear map",
    "prepare map",
    "commit map @2 {maps}/hosts.map",
    "show map {maps}/hosts.map",
    "show map",
    "set severity-output number;prepare map {maps}/hosts.map;add map {maps}/hosts.map;set map {maps}/hosts.map zz y",
    "clear map {maps}/paths.map",
    "show map",
];

const HOSTS: &[&str] = &[
    "www.example.com",
    "WWW.Example.com",
    "api.example.com",
    "new.example.com",
    "v1.example.com",
    "v2.example.com",
    "other",
];

#[test]
fn map_commands_and_routing_match_haproxy() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("NOTICE: {HAPROXY} missing: map differential test skipped");
        return;
    }
    let h = Side::start("haproxy", true);
    let p = Side::start("portcullis", false);
    let mut diffs = Vec::new();
    let mut routed = Vec::new();
    for cmd in SCRIPT {
        let (a, b) = (h.masked(&h.cli(cmd)), p.masked(&p.cli(cmd)));
        if a != b {
            diffs.push(format!("[{cmd}]\n  haproxy    {a:?}\n  portcullis {b:?}"));
        }
        for host in HOSTS {
            let (a, b) = (h.route(host), p.route(host));
            if a != b {
                diffs.push(format!(
                    "[after {cmd}] Host {host}: haproxy {a:?} portcullis {b:?}"
                ));
            }
            routed.push(b);
        }
    }
    // The routes did change along the script (the comparison saw more than defaults).
    for body in ["a", "b", "d"] {
        assert!(routed.iter().any(|r| r == body), "never routed to {body}");
    }
    assert!(
        diffs.is_empty(),
        "differences from HAProxy 2.6:\n{}",
        diffs.join("\n")
    );
}
