//! ACLs on the Runtime API against HAProxy 2.6: the same configuration (ACLs from `-f` files,
//! inline patterns, `{ … }` conditions, a predefined ACL, a map beside them) and the same
//! files under both; the same `show/get/add/del/clear/prepare/commit acl` script must give the
//! same reply bytes (entry references `0x…` and the temporary paths masked; reference ids are
//! compared as they are), and requests must be denied or let through alike after every change,
//! without a reload. Skipped with a notice when /usr/sbin/haproxy is missing.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use backend::free_port;
use proxy::{Proc, TempDir};

const HAPROXY: &str = "/usr/sbin/haproxy";

struct Side {
    _dir: TempDir,
    _proc: Proc,
    sock: PathBuf,
    front: SocketAddr,
    files: PathBuf,
}

impl Side {
    fn start(label: &str, haproxy: bool) -> Side {
        let dir = TempDir::new(&format!("admacl-{label}"));
        let sock = dir.0.join("admin.sock");
        let files = dir.0.join("acl");
        std::fs::create_dir_all(&files).unwrap();
        std::fs::write(files.join("block.acl"), "/admin\n# comment\n\n  /private\n").unwrap();
        std::fs::write(files.join("nets.acl"), "10.0.0.0/8\n").unwrap();
        std::fs::write(files.join("hosts.map"), "a.example be_a\n").unwrap();
        let port = free_port();
        let f = files.display();
        let cfg = format!(
            "global\n    stats socket \"{sock}\" mode 600 level admin\n\n\
             defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\n\
             frontend f\n    bind 127.0.0.1:{port}\n\
             \x20   http-request deny deny_status 405 if METH_DELETE\n\
             \x20   http-request deny deny_status 404 if {{ req.hdr(x-a) -i foo }} || {{ path -m beg -f {f}/block.acl }}\n\
             \x20   acl blocked path_beg -f {f}/block.acl -f {f}/nets.acl\n\
             \x20   acl blocked path_end .php\n\
             \x20   acl many req.hdr_cnt(x-b) gt 2\n\
             \x20   acl exact path /exact\n\
             \x20   acl nets src -f {f}/nets.acl\n\
             \x20   http-request deny deny_status 403 if blocked\n\
             \x20   http-request deny deny_status 429 if many || exact\n\
             \x20   http-request deny deny_status 410 if nets\n\
             \x20   http-request set-header x-m %[req.hdr(host),map({f}/hosts.map,none)]\n\
             \x20   default_backend be\n\n\
             backend be\n    acl b path_beg -f {f}/block.acl\n    http-request return status 200 content-type text/plain string ok\n",
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
            files,
        }
    }

    fn cli(&self, cmd: &str) -> String {
        proxy::admin_cli(
            &self.sock,
            &cmd.replace("{f}", &self.files.display().to_string()),
        )
    }

    /// The status answered for `path`.
    fn status(&self, path: &str) -> u16 {
        proxy::request(
            self.front,
            &format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
        )
        .status
    }

    /// Entry references and temporary paths masked.
    fn masked(&self, reply: &str) -> String {
        let files = self.files.display().to_string();
        reply
            .split_inclusive('\n')
            .map(|l| {
                let mut l = l.replace(&files, "F");
                if l.starts_with("0x")
                    && let Some((_, rest)) = l.split_once(' ')
                {
                    l = format!("REF {rest}");
                }
                // The configuration's own path (`file '/tmp/…/test.cfg'`).
                while let Some(i) = l.find("file '/") {
                    let tail = &l[i + 6..];
                    let end = tail.find('\'').map_or(tail.len(), |e| e + 1);
                    l = format!("{}file 'CFG'{}", &l[..i], &tail[end..]);
                }
                l
            })
            .collect()
    }
}

/// Commands; after each, the paths whose status is compared.
const SCRIPT: &[&str] = &[
    "show acl",
    "show map",
    "show acl #2",
    "show acl {f}/block.acl",
    "show acl #3",
    "show acl #7",
    "show acl #99",
    "show acl #x",
    "show acl nope",
    "show acl {f}/hosts.map",
    "get acl {f}/block.acl /admin/x",
    "get acl {f}/block.acl /nothing",
    "get acl #1 FOO",
    "get acl #1 bar",
    "get acl #4 10.1.2.3",
    "get acl #4 11.1.2.3",
    "get acl {f}/hosts.map a.example",
    "get acl nope x",
    "get acl",
    "get acl #2",
    "add acl {f}/block.acl /new",
    "add acl #8 /other",
    "add acl {f}/nets.acl bad",
    "add acl {f}/nets.acl 192.168.0.0/16",
    "add acl {f}/hosts.map x",
    "add acl",
    "add acl #2",
    "add acl nope x",
    "add acl @3 #2 /x",
    "show acl {f}/block.acl",
    "del acl {f}/block.acl /admin",
    "del acl {f}/block.acl /admin",
    "del acl {f}/block.acl #0x1234",
    "del acl {f}/block.acl #0xzz",
    "del acl nope x",
    "del acl #2",
    "del acl",
    "prepare acl {f}/block.acl",
    "prepare acl {f}/block.acl",
    "prepare acl",
    "prepare acl {f}/hosts.map",
    "add acl @1 {f}/block.acl /v1",
    "add acl @2 {f}/block.acl /v2",
    "show acl @2 {f}/block.acl",
    "show acl @1",
    "commit acl @0 {f}/block.acl",
    "commit acl @9 {f}/block.acl",
    "commit acl {f}/block.acl",
    "commit acl @1",
    "commit acl",
    "commit acl @2 {f}/block.acl",
    "show acl {f}/block.acl",
    "show acl",
    "clear acl @1",
    "clear acl",
    "clear acl nope",
    "clear acl #8",
    "clear acl {f}/block.acl",
    "show acl",
];

const PATHS: &[&str] = &[
    "/admin/x", "/private", "/new/1", "/v1", "/v2/a", "/other", "/exact", "/x.php", "/fine",
];

#[test]
fn acl_commands_and_their_effect_match_haproxy() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("NOTICE: {HAPROXY} missing: acl differential test skipped");
        return;
    }
    let h = Side::start("haproxy", true);
    let p = Side::start("portcullis", false);
    let mut diffs = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for cmd in SCRIPT {
        let (a, b) = (h.masked(&h.cli(cmd)), p.masked(&p.cli(cmd)));
        if a != b {
            diffs.push(format!("[{cmd}]\n  haproxy    {a:?}\n  portcullis {b:?}"));
        }
        for path in PATHS {
            let (a, b) = (h.status(path), p.status(path));
            if a != b {
                diffs.push(format!("[after {cmd}] {path}: haproxy {a} portcullis {b}"));
            }
            seen.insert((path.to_string(), b));
        }
    }
    // The script did move requests between denied and let through.
    for path in ["/new/1", "/v2/a", "/admin/x"] {
        for st in [200, 404] {
            assert!(
                seen.contains(&(path.to_string(), st)),
                "{path} never answered {st}"
            );
        }
    }
    assert!(
        diffs.is_empty(),
        "differences from HAProxy 2.6:\n{}",
        diffs.join("\n")
    );
}
