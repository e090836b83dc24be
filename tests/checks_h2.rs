//! HTTP health checks over HTTP/2 against HAProxy 2.6: `check-proto h2` (h2c with prior
//! knowledge to a `bind … proto h2` listener), `check-alpn h2` with `check-ssl` (h2 chosen by
//! ALPN), a status the expect rules refuse, an HTTP/1 check sent to an h2-only listener, and the
//! post-parse refusal of `check-proto` without HTTP checks. Listeners and servers are the proxy's
//! own, on 127.0.0.1. The HAProxy part is skipped, with a notice, without /usr/sbin/haproxy.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use backend::{free_port, lo, wait_until};
use proxy::{Proc, TempDir};

fn bundle(dir: &Path) -> std::path::PathBuf {
    let ck = rcgen::generate_simple_self_signed(vec!["chk.test".to_string()]).expect("cert");
    let path = dir.join("bundle.pem");
    let pem = format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem());
    std::fs::write(&path, pem).expect("write bundle");
    path
}

fn config(dir: &Path, h2c: u16, tls: u16, cert: &Path) -> String {
    let d = dir.display();
    // Generous budgets: a loaded machine must not turn a slow handshake into a failed check.
    let chk = "check inter 1s rise 1 fall 1";
    format!(
        "global\n    stats socket {d}/admin.sock level admin\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n    timeout check 5s\n\n\
         backend be_h2c\n    option httpchk GET /status HTTP/1.1\n\
         \x20   server srv 127.0.0.1:{h2c} {chk} check-proto h2\n\n\
         backend be_h2c_body\n    option httpchk\n\
         \x20   http-check send meth POST uri /status hdr host chk.test body \"ping\"\n\
         \x20   http-check expect string pong\n\
         \x20   server srv 127.0.0.1:{h2c} {chk} check-proto h2\n\n\
         backend be_h2c_404\n    option httpchk GET /missing HTTP/1.1\n\
         \x20   server srv 127.0.0.1:{h2c} {chk} check-proto h2\n\n\
         backend be_alpn\n    option httpchk GET /status HTTP/1.1\n\
         \x20   server srv 127.0.0.1:{tls} {chk} check-ssl verify none check-alpn h2\n\n\
         backend be_alpn_h1\n    option httpchk GET /status HTTP/1.1\\r\\nHost:\\ chk.test\n\
         \x20   server srv 127.0.0.1:{tls} {chk} check-ssl verify none check-alpn http/1.1\n\n\
         listen li_h2c\n    bind 127.0.0.1:{h2c} proto h2\n\
         \x20   http-request return status 200 content-type text/plain string pong if {{ path /status }}\n\
         \x20   http-request return status 404\n\n\
         listen li_tls\n    bind 127.0.0.1:{tls} ssl crt {} alpn h2,http/1.1\n\
         \x20   http-request return status 200 if {{ path /status }}\n",
        cert.display()
    )
}

/// `pxname,svname,status,check_status,check_code` of the checked servers.
fn rows(sock: &Path) -> Vec<String> {
    proxy::server_stat_columns(sock, &[0, 1, 17, 36, 37])
        .into_iter()
        .filter(|l| l.starts_with("be_"))
        .collect()
}

fn run(start: impl FnOnce(&str, std::net::SocketAddr) -> Option<Proc>) -> Option<Vec<String>> {
    let dir = TempDir::new("checks-h2");
    let cert = bundle(&dir.0);
    let (h2c, tls) = (free_port(), free_port());
    let p = start(&config(&dir.0, h2c, tls, &cert), lo(tls))?;
    let sock = dir.0.join("admin.sock");
    // Every server has had a check result (rise 1 / fall 1: one check decides).
    let settled = |r: &[String]| r.len() == 5 && r.iter().all(|l| !l.contains(",INI,"));
    wait_until(Duration::from_secs(20), || settled(&rows(&sock)));
    // A second look after more checks: the states hold.
    std::thread::sleep(Duration::from_millis(1500));
    let got = rows(&sock);
    drop(p);
    Some(got)
}

#[test]
fn http_checks_over_h2_by_check_proto_and_alpn() {
    let got = run(|cfg, port| Some(Proc::portcullis(cfg, port))).expect("portcullis");
    let want = [
        "be_h2c,srv,UP,L7OK,200",
        "be_h2c_body,srv,UP,L7OK,200",
        "be_h2c_404,srv,DOWN,L7STS,404",
        "be_alpn,srv,UP,L7OK,200",
        "be_alpn_h1,srv,UP,L7OK,200",
    ];
    assert_eq!(got, want);
    if let Some(reference) = run(Proc::haproxy) {
        assert_eq!(got, reference, "portcullis vs HAProxy 2.6");
    }
}

#[test]
fn check_proto_errors_as_haproxy() {
    let dir = TempDir::new("checks-h2-cfg");
    let cfg = "defaults\n mode http\n timeout connect 1s\n timeout client 1s\n timeout server 1s\n\
               backend be\n server s1 127.0.0.1:80 check check-proto foo\n\
               \x20server s2 127.0.0.1:80 check check-proto\n\
               \x20server s3 127.0.0.1:80 check check-alpn\n\
               backend tc\n mode tcp\n option tcp-check\n server s7 127.0.0.1:80 check check-proto h2\n";
    let check = |cfg: &str| {
        let path = dir.0.join("cp.cfg");
        std::fs::write(&path, cfg).expect("write");
        let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
            .args(["-c", "-f"])
            .arg(&path)
            .output()
            .expect("run");
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let err = check(cfg);
    for want in [
        "cp.cfg:7] : 'server be/s1' : 'check-proto' :  unknown MUX protocol 'foo'.",
        "cp.cfg:8] : 'server be/s2' : 'check-proto' : missing value.",
        "cp.cfg:9] : 'server be/s3' : 'check-alpn' : missing the comma-delimited ALPN protocol suite.",
    ] {
        assert!(err.lines().any(|l| l.ends_with(want)), "{want}\n{err}");
    }
    // The post-parse check runs only on a configuration that parsed.
    let ok_parse = "defaults\n mode http\n timeout connect 1s\n timeout client 1s\n timeout server 1s\n\
                    backend tc\n mode tcp\n option tcp-check\n server s7 127.0.0.1:80 check check-proto h2\n";
    let err = check(ok_parse);
    assert!(
        err.contains(
            " : config : config: backend 'tc': server 's7' uses an incompatible MUX protocol for the selected check type"
        ),
        "{err}"
    );
}
