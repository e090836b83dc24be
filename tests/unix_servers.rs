//! Servers on unix sockets (`server s unix@/path`, a bare path, `abns@name`) against HAProxy 2.6:
//!
//! - the ingress controllers' chain: a `mode tcp` frontend routes by SNI and passes the
//!   connection with `send-proxy-v2` over `unix@` to a TLS-offload frontend that has
//!   `accept-proxy`; its backend must see the original client in `X-Forwarded-For`, and both
//!   frontends log it. Checked against HAProxy on the same configuration.
//! - `mode tcp` and `mode http` to a filesystem socket and to an abstract one (a listener of the
//!   test's own), health checks over the socket, and what `show stat` / `show servers state`
//!   print for such servers (`unix`, `-`), byte for byte beside HAProxy.
//!
//! Only 127.0.0.0/8 and sockets in a temporary folder or the abstract namespace. The HAProxy
//! parts are skipped, with a notice, without /usr/sbin/haproxy.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use backend::{HttpNode, HttpOpts, free_port, lo, wait_until};
use proxy::{Proc, TempDir, admin_cli};

const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 78);

/// A self-signed certificate for `offload.test` as a PEM bundle (cert + key).
fn bundle(dir: &Path) -> PathBuf {
    let ck = rcgen::generate_simple_self_signed(vec!["offload.test".to_string()]).expect("cert");
    let path = dir.join("bundle.pem");
    let pem = format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem());
    std::fs::write(&path, pem).expect("write bundle");
    path
}

/// The chain: `sni` (mode tcp, SNI routing) → `server … unix@term.sock send-proxy-v2` →
/// `term` (`bind unix@term.sock accept-proxy ssl`, mode http, forwardfor) → `app`.
fn chain_cfg(dir: &Path, port: u16, cert: &Path, app: SocketAddr, other: SocketAddr) -> String {
    let d = dir.display();
    format!(
        "global\n    log stdout format raw local0\n    stats socket {d}/admin.sock level admin\n\
         defaults\n    log global\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\n\
         frontend sni\n    mode tcp\n    bind 127.0.0.1:{port}\n    log-format \"sni %ci %ft %b/%s\"\n\
         \x20   tcp-request inspect-delay 5s\n    tcp-request content accept if {{ req.ssl_hello_type 1 }}\n\
         \x20   use_backend offload if {{ req.ssl_sni -i offload.test }}\n    default_backend other\n\n\
         backend offload\n    mode tcp\n    server term unix@{d}/term.sock send-proxy-v2\n\n\
         backend other\n    mode tcp\n    server other {other}\n\n\
         frontend term\n    mode http\n    bind unix@{d}/term.sock accept-proxy ssl crt {}\n\
         \x20   option forwardfor\n    log-format \"term %ci %ST %b/%s %r\"\n    default_backend app\n\n\
         backend app\n    mode http\n    server app {app}\n",
        cert.display()
    )
}

/// curl from 127.0.0.78 with SNI `offload.test` to `port`.
fn curl_offload(port: u16, path: &str) -> (i32, String) {
    let out = Command::new("curl")
        .args(["-sk", "--http1.1", "--max-time", "10", "--interface"])
        .arg(CLIENT_IP.to_string())
        .arg("--resolve")
        .arg(format!("offload.test:{port}:127.0.0.1"))
        .arg(format!("https://offload.test:{port}{path}"))
        .output()
        .expect("curl is installed by cargo xtask setup");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The log lines of `p` that start with `prefix`, once `n` of them are there.
fn lines_with(p: &Proc, prefix: &str, n: usize) -> Vec<String> {
    let grab = || -> Vec<String> {
        p.log_lines()
            .into_iter()
            .filter(|l| l.starts_with(prefix))
            .collect()
    };
    wait_until(Duration::from_secs(5), || grab().len() >= n);
    grab()
}

/// What one proxy did with the chain: the backend's view and both log lines.
fn run_chain(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let dir = TempDir::new("unix-chain");
    let cert = bundle(&dir.0);
    let app = HttpNode::start(lo(0), HttpOpts::named("app")).expect("app");
    // Anything that is not offload.test: nothing listens, no request may get there.
    let other = backend::RefusingPort::new().expect("refusing port");
    let port = free_port();
    let p = start(
        &chain_cfg(&dir.0, port, &cert, app.addr(), other.addr()),
        lo(port),
    )?;
    let (rc, body) = curl_offload(port, "/through/the/chain");
    assert_eq!(rc, 0, "curl through the chain: {body}");
    assert!(body.contains("app"), "the app answered: {body}");
    let reqs = app.requests();
    assert_eq!(reqs.len(), 1, "one request reached the app");
    let mut seen = vec![
        format!("xff={:?}", reqs[0].header("x-forwarded-for")),
        format!("target={}", reqs[0].target),
    ];
    seen.extend(lines_with(&p, "term ", 1));
    // The client's line only: the start-up probe's empty connection is logged by HAProxy (a
    // `--` line) and not by portcullis, a difference of its own.
    seen.extend(lines_with(&p, &format!("sni {CLIENT_IP} "), 1));
    drop(p);
    Some(seen)
}

#[test]
fn sni_router_to_tls_offload_over_unix_socket_with_proxy_v2() {
    let got = run_chain(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    assert_eq!(got[0], format!("xff=Some(\"{CLIENT_IP}\")"), "{got:?}");
    assert_eq!(got[1], "target=/through/the/chain");
    assert!(
        got.iter()
            .any(|l| l == &format!("term {CLIENT_IP} 200 app/app GET /through/the/chain HTTP/1.1")),
        "{got:?}"
    );
    assert!(
        got.iter()
            .any(|l| l == &format!("sni {CLIENT_IP} sni offload/term")),
        "{got:?}"
    );
    if let Some(reference) = run_chain(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}

/// An abstract-namespace listener of the test's own that answers every connection with
/// `abns <what it read>` and closes.
struct AbstractEcho {
    name: String,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl AbstractEcho {
    fn start(tag: &str) -> AbstractEcho {
        use std::os::linux::net::SocketAddrExt;
        let name = format!("portcullis-test-{tag}-{}", std::process::id());
        // HAProxy pads `abns@` names with NULs to the end of sun_path: so does the listener.
        let mut padded = name.clone().into_bytes();
        padded.resize(107, 0);
        let addr =
            std::os::unix::net::SocketAddr::from_abstract_name(&padded).expect("abstract name");
        let l = UnixListener::bind_addr(&addr).expect("bind abstract");
        l.set_nonblocking(true).expect("nonblocking");
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let st = stop.clone();
        let thread = std::thread::spawn(move || {
            while !st.load(std::sync::atomic::Ordering::Relaxed) {
                match l.accept() {
                    Ok((mut s, _)) => {
                        s.set_nonblocking(false).ok();
                        s.set_read_timeout(Some(Duration::from_secs(5))).ok();
                        let mut buf = [0u8; 256];
                        let n = s.read(&mut buf).unwrap_or(0);
                        let mut out = b"abns ".to_vec();
                        out.extend_from_slice(&buf[..n]);
                        let _ = s.write_all(&out);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        AbstractEcho {
            name,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for AbstractEcho {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `mode tcp` to an abstract socket and `mode http` to a filesystem one (served by a unix
/// `bind` of the same process), with a health check over the socket.
fn forms_cfg(dir: &Path, tcp: u16, http: u16, abns: &str, app: SocketAddr) -> String {
    let d = dir.display();
    format!(
        "global\n    stats socket {d}/admin.sock level admin\n\
         defaults\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\n\
         listen tcp_in\n    mode tcp\n    bind 127.0.0.1:{tcp}\n    server ab abns@{abns}\n\n\
         listen http_in\n    mode http\n    bind 127.0.0.1:{http}\n\
         \x20   server path {d}/inner.sock check inter 200ms\n\n\
         listen inner\n    mode http\n    bind unix@{d}/inner.sock\n    server app {app}\n"
    )
}

fn tcp_roundtrip(port: u16, msg: &[u8]) -> Vec<u8> {
    let mut s = proxy::connect(lo(port));
    s.write_all(msg).expect("write");
    let mut got = Vec::new();
    let _ = s.read_to_end(&mut got);
    got
}

/// Columns `pxname,svname,status,check_status,addr` of the `show stat` rows of servers.
fn stat_rows(sock: &Path) -> Vec<String> {
    proxy::server_stat_columns(sock, &[0, 1, 17, 36, 73])
}

fn run_forms(start: impl FnOnce(&str, SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let dir = TempDir::new("unix-forms");
    let echo = AbstractEcho::start("forms");
    let app = HttpNode::start(lo(0), HttpOpts::named("app")).expect("app");
    let (tcp, http) = (free_port(), free_port());
    let p = start(
        &forms_cfg(&dir.0, tcp, http, &echo.name, app.addr()),
        lo(http),
    )?;
    let sock = dir.0.join("admin.sock");
    let mut seen = vec![String::from_utf8_lossy(&tcp_roundtrip(tcp, b"hello")).into_owned()];
    let r = proxy::get(lo(http), "/over/a/path");
    seen.push(format!(
        "{} {}",
        r.status,
        r.header("x-node").unwrap_or_default()
    ));
    // The check over the socket: L4OK once it ran.
    assert!(
        wait_until(Duration::from_secs(5), || stat_rows(&sock)
            .iter()
            .any(|l| l.starts_with("http_in,path,UP,L4OK"))),
        "check over the unix socket: {:?}",
        stat_rows(&sock)
    );
    seen.extend(stat_rows(&sock));
    // `show servers state`: the address is `-` and the port 0 (columns up to srv_port, less
    // the time since the last change).
    for l in admin_cli(&sock, "show servers state").lines() {
        let f: Vec<&str> = l.split(' ').collect();
        if f.len() > 18 && !l.starts_with('#') {
            seen.push(format!("{} {} {} {} {}", f[1], f[3], f[4], f[5], f[18]));
        }
    }
    seen.push(admin_cli(&sock, "set server http_in/path addr 127.0.0.1"));
    drop(p);
    // The inet app's port differs from run to run.
    let port = app.addr().port().to_string();
    Some(seen.into_iter().map(|l| l.replace(&port, "APP")).collect())
}

#[test]
fn tcp_and_http_to_filesystem_and_abstract_sockets() {
    let got = run_forms(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    assert!(got[0].starts_with("abns hello"), "{got:?}");
    assert_eq!(got[1], "200 app", "{got:?}");
    assert!(
        got.contains(&"tcp_in,ab,no check,,unix".to_string()),
        "{got:?}"
    );
    assert!(got.contains(&"http_in path - 2 0".to_string()), "{got:?}");
    if let Some(reference) = run_forms(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}

#[test]
fn unix_server_errors_as_haproxy() {
    let dir = TempDir::new("unix-errors");
    let long = "a".repeat(120);
    let cfg = format!(
        "defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n\
         backend be\n    server s1 /tmp/{long}\n    server s2 abns@{long}\n    server s3 /tmp/ok.sock\n"
    );
    let path = dir.0.join("long.cfg");
    std::fs::write(&path, &cfg).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("-c")
        .arg("-f")
        .arg(&path)
        .output()
        .expect("run");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let want1 =
        format!("long.cfg:7] : 'server be/s1' : socket path '/tmp/{long}' too long (max 97)");
    let want2 =
        format!("long.cfg:8] : 'server be/s2' : socket path 'abns@{long}' too long (max 107)");
    for w in [want1, want2] {
        assert!(err.lines().any(|l| l.ends_with(&w)), "{w}\n{err}");
    }
    assert!(!err.contains("long.cfg:9"), "{err}");
}
