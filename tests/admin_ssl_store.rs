//! CA files and crt-lists on the Runtime API: `new|set|commit|abort|del|show ssl ca-file` and
//! `add|del|show ssl crt-list [-n]` give HAProxy 2.6's reply bytes (same files, same paths, the
//! same script on both), and their effect is real on portcullis: a committed CA file is what the
//! next connection to a `verify required` server is checked against (a foreign CA makes it fail,
//! the right one makes it pass again), and a line added to a crt-list serves its certificate on
//! the next handshake with its SNI, removed again by `del`.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/tls.rs"]
mod tls;

use std::path::Path;

use backend::{free_port, lo};
use proxy::{Proc, TempDir, admin_cli_payload as cli};
use rustls::pki_types::CertificateDer;

const HAPROXY: &str = "/usr/sbin/haproxy";

struct Files {
    dir: TempDir,
    /// Leaf `a.example` signed by `ca.pem`, as a bundle.
    srv: String,
    /// Self-signed `b.example` bundle.
    b: String,
    ca: String,
    /// Another CA (PEM certificate only), which did not sign `srv`.
    other_ca_pem: String,
    ca_pem: String,
}

impl Files {
    fn p(&self, name: &str) -> String {
        self.dir.0.join(name).display().to_string()
    }
}

fn ca(cn: &str) -> (rcgen::Certificate, rcgen::KeyPair) {
    let (mut p, key) = tls::params(cn, &[]);
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    (p.self_signed(&key).expect("ca"), key)
}

fn files() -> Files {
    let dir = TempDir::new("sslstore");
    let (ca_cert, ca_key) = ca("Test CA");
    let (other, _) = ca("Other CA");
    let (p, key) = tls::params("a.example", &["a.example"]);
    let leaf = p.signed_by(&key, &ca_cert, &ca_key).expect("leaf");
    let (bp, bkey) = tls::params("b.example", &["b.example"]);
    let b = bp.self_signed(&bkey).expect("b");
    let f = Files {
        srv: String::new(),
        b: String::new(),
        ca: String::new(),
        other_ca_pem: other.pem(),
        ca_pem: ca_cert.pem(),
        dir,
    };
    let w = |name: &str, text: String| {
        std::fs::write(f.dir.0.join(name), text).unwrap();
        f.p(name)
    };
    let srv = w("srv.pem", tls::bundle_pem(&leaf, &key));
    let bb = w("b.pem", tls::bundle_pem(&b, &bkey));
    let cap = w("ca.pem", ca_cert.pem());
    w("list.txt", format!("{srv} a.example\n"));
    Files {
        srv,
        b: bb,
        ca: cap,
        ..f
    }
}

/// Three listeners: plain HTTP (routed to the TLS server `s1`), TLS from the crt-list, TLS on
/// `b.pem` (so that the store holds it for `add ssl crt-list`).
fn config(f: &Files, sock: &Path, port: u16, tls: u16, tls_b: u16) -> String {
    format!(
        "global\n    stats socket \"{sock}\" mode 600 level admin\n\n\
         defaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\n\
         frontend f\n    bind 127.0.0.1:{port}\n    default_backend be\n\n\
         frontend tls\n    bind 127.0.0.1:{tls} ssl crt-list {list}\n    bind 127.0.0.1:{tls_b} ssl crt {b}\n    http-request return status 200 content-type text/plain string tls\n\n\
         backend be\n    http-reuse never\n    retries 0\n    server s1 127.0.0.1:{tls} ssl verify required ca-file {ca}\n",
        sock = sock.display(),
        list = f.p("list.txt"),
        b = f.b,
        ca = f.ca,
    )
}

fn script(f: &Files) -> Vec<(String, Option<String>)> {
    let ca = &f.ca;
    let new = f.p("new.pem");
    let list = f.p("list.txt");
    let b = &f.b;
    let srv = &f.srv;
    let nc = f.p("new-cert.pem");
    let bpem = std::fs::read_to_string(b).expect("b.pem");
    let c = |s: String| (s, None);
    let with = |s: String, p: &str| (s, Some(p.to_string()));
    vec![
        c("show ssl ca-file".into()),
        c(format!("show ssl ca-file {ca}")),
        c(format!("show ssl ca-file {ca}:1")),
        c(format!("show ssl ca-file {ca}:0")),
        c("show ssl ca-file nope".into()),
        c(format!("new ssl ca-file {new}")),
        c(format!("new ssl ca-file {new}")),
        c("new ssl ca-file".into()),
        c("show ssl ca-file".into()),
        c(format!("show ssl ca-file {new}")),
        with(format!("set ssl ca-file {ca}"), &f.other_ca_pem),
        c("show ssl ca-file".into()),
        c(format!("show ssl ca-file *{ca}")),
        with(format!("set ssl ca-file {new}"), &f.ca_pem),
        c(format!("commit ssl ca-file {new}")),
        c(format!("abort ssl ca-file {new}")),
        with(format!("set ssl ca-file {ca}"), "notapem\n"),
        c(format!("commit ssl ca-file {ca}")),
        c(format!("commit ssl ca-file {ca}")),
        c(format!("abort ssl ca-file {ca}")),
        c("commit ssl ca-file".into()),
        c("abort ssl ca-file".into()),
        with(format!("set ssl ca-file {}", f.p("nope.pem")), &f.ca_pem),
        c(format!("set ssl ca-file {ca}")),
        with(format!("set ssl ca-file {ca}"), &f.ca_pem),
        c(format!("abort ssl ca-file {ca}")),
        c(format!("del ssl ca-file {new}")),
        c(format!("del ssl ca-file {new}")),
        c("del ssl ca-file".into()),
        c("show ssl ca-file".into()),
        c("show ssl crt-list".into()),
        c(format!("show ssl crt-list {list}")),
        c(format!("show ssl crt-list -n {list}")),
        c("show ssl crt-list -n".into()),
        c("show ssl crt-list nope".into()),
        c(format!("add ssl crt-list {list} {b} ignored.example")),
        with(
            format!("add ssl crt-list {list}"),
            &format!("{b} b2.example\n"),
        ),
        c(format!("add ssl crt-list {list} {}", f.p("nope.pem"))),
        c(format!("add ssl crt-list nope {b}")),
        c(format!("add ssl crt-list {list}")),
        c(format!("show ssl crt-list -n {list}")),
        c(format!("del ssl crt-list {list} {b}")),
        c(format!("del ssl crt-list {list} {b}:9")),
        c(format!("del ssl crt-list {list} {b}:x")),
        c(format!("del ssl crt-list {list} {srv}:7")),
        c(format!("del ssl crt-list {list} {}", f.p("nope.pem"))),
        c(format!("del ssl crt-list nope {b}")),
        c(format!("del ssl crt-list {list}")),
        c(format!("del ssl crt-list {list} {b}:2")),
        c(format!("show ssl crt-list {list}")),
        c(format!("del ssl crt-list {list} {b}")),
        c(format!("show ssl crt-list -n {list}")),
        // `new ssl cert`: an empty entry, filled by set + commit, then usable in a crt-list.
        c(format!("new ssl cert {nc}")),
        c(format!("new ssl cert {nc}")),
        c(format!("new ssl cert {b}")),
        c("new ssl cert".into()),
        c("show ssl cert".into()),
        c(format!("show ssl cert {nc}")),
        c(format!("commit ssl cert {nc}")),
        c(format!("add ssl crt-list {list} {nc}")),
        with(format!("set ssl cert {nc}"), &bpem),
        c("show ssl cert".into()),
        c(format!("commit ssl cert {nc}")),
        c(format!("add ssl crt-list {list} {nc}")),
        c(format!("show ssl crt-list {list}")),
    ]
}

#[test]
fn ssl_store_replies_match_haproxy() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("NOTICE: {HAPROXY} missing: ssl store differential test skipped");
        return;
    }
    let f = files();
    let run = |haproxy: bool| -> Vec<String> {
        let d = TempDir::new("sslstore-sock");
        let sock = d.0.join("admin.sock");
        let (port, tls, tls_b) = (free_port(), free_port(), free_port());
        let cfg = config(&f, &sock, port, tls, tls_b);
        let _p = if haproxy {
            Proc::haproxy(&cfg, lo(port)).expect("haproxy")
        } else {
            Proc::portcullis(&cfg, lo(port))
        };
        script(&f)
            .iter()
            .map(|(c, p)| cli(&sock, c, p.as_deref()))
            .collect()
    };
    let (h, p) = (run(true), run(false));
    let mut diffs = Vec::new();
    for ((cmd, _), (a, b)) in script(&f).iter().zip(h.iter().zip(&p)) {
        if a != b {
            diffs.push(format!("[{cmd}]\n  haproxy    {a:?}\n  portcullis {b:?}"));
        }
    }
    assert!(
        diffs.is_empty(),
        "differences from HAProxy 2.6:\n{}",
        diffs.join("\n")
    );
}

/// The leaf certificate served on `port` for SNI `sni`.
fn served(port: u16, sni: &str) -> Vec<u8> {
    tls::handshake(lo(port), sni).1
}

fn der_of(pem_path: &str) -> Vec<u8> {
    let text = std::fs::read(pem_path).unwrap();
    let mut rd = &text[..];
    rustls_pemfile_first(&mut rd)
}

/// The first certificate of a PEM text, DER.
fn rustls_pemfile_first(rd: &mut &[u8]) -> Vec<u8> {
    use rustls::pki_types::pem::PemObject;
    CertificateDer::pem_slice_iter(rd)
        .next()
        .expect("a certificate")
        .expect("PEM")
        .to_vec()
}

#[test]
fn committed_ca_file_and_crt_list_lines_take_effect() {
    let f = files();
    let d = TempDir::new("sslstore-effect");
    let sock = d.0.join("admin.sock");
    let (port, tls, tls_b) = (free_port(), free_port(), free_port());
    let _p = Proc::portcullis(&config(&f, &sock, port, tls, tls_b), lo(port));
    let status = || proxy::get(lo(port), "/").status;
    assert_eq!(status(), 200, "s1 verified against the CA that signed it");

    // A foreign CA committed: the next connection to s1 fails verification.
    let r = cli(
        &sock,
        &format!("set ssl ca-file {}", f.ca),
        Some(&f.other_ca_pem),
    );
    assert!(r.starts_with("transaction created"), "{r}");
    assert_eq!(status(), 200, "not committed yet");
    let r = cli(&sock, &format!("commit ssl ca-file {}", f.ca), None);
    assert_eq!(r, format!("Committing {}\nSuccess!\n\n", f.ca));
    assert_eq!(status(), 503, "s1's certificate no longer verifies");
    // The right CA back: connections succeed again.
    cli(&sock, &format!("set ssl ca-file {}", f.ca), Some(&f.ca_pem));
    cli(&sock, &format!("commit ssl ca-file {}", f.ca), None);
    assert_eq!(status(), 200);

    // crt-list: b.example is not in the list (the default, srv, answers) until a line adds it.
    let (srv, b) = (der_of(&f.srv), der_of(&f.b));
    assert_eq!(served(tls, "b.example"), srv);
    let list = f.p("list.txt");
    let r = cli(
        &sock,
        &format!("add ssl crt-list {list}"),
        Some(&format!("{} b.example\n", f.b)),
    );
    assert!(r.ends_with("Success!\n\n"), "{r}");
    assert_eq!(served(tls, "b.example"), b);
    assert_eq!(served(tls, "a.example"), srv);
    let r = cli(&sock, &format!("del ssl crt-list {list} {}", f.b), None);
    assert!(r.contains("deleted in crtlist"), "{r}");
    assert_eq!(served(tls, "b.example"), srv);
}
