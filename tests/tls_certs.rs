//! Certificates: `crt-list` selection by SNI, and `set/commit/abort/show ssl cert` through the
//! admin socket swapping the served certificate for new connections without a reload, while an
//! established TLS connection keeps working. The same CLI sequence runs against HAProxy 2.6 when
//! installed, and the replies must be identical (same certificate files, same paths).

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/tls.rs"]
mod tls;

use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use backend::{HttpNode, HttpOpts, free_port, lo};
use proxy::{Proc, TempDir, admin_cli_payload as cli};
use tls::Tls;

struct Cert {
    pem: String,
    der: Vec<u8>,
}

/// A self-signed ECDSA P-256 bundle with `CN=<cn>` and DNS SANs.
fn cert(cn: &str, sans: &[&str]) -> Cert {
    let (p, key) = tls::params(cn, sans);
    let c = p.self_signed(&key).expect("self-signed");
    Cert {
        pem: tls::bundle_pem(&c, &key),
        der: c.der().to_vec(),
    }
}

/// A TLS connection to `port` with SNI `sni`; returns it and the leaf certificate served.
fn tls_connect(port: u16, sni: &str) -> (Tls, Vec<u8>) {
    tls::handshake(lo(port), sni)
}

/// One keep-alive GET on `s`: the status code.
fn get(s: &mut Tls, path: &str) -> u16 {
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    s.flush().unwrap();
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        assert_eq!(s.read(&mut byte).unwrap(), 1, "response head cut");
        buf.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&buf).to_ascii_lowercase();
    let len: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .map(|v| v.trim().parse().unwrap())
        .unwrap_or(0);
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).unwrap();
    head.get(9..12).unwrap().parse().unwrap()
}

struct Files {
    dir: TempDir,
    default: Cert,
    a: Cert,
    wild: Cert,
    b: Cert,
    new_a: Cert,
}

impl Files {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.0.join(name)
    }
    fn p(&self, name: &str) -> String {
        self.path(name).display().to_string()
    }
}

fn files() -> Files {
    let dir = TempDir::new("certs");
    let f = Files {
        default: cert("default.local", &["default.local"]),
        a: cert("a.example.com", &["a.example.com"]),
        wild: cert("wild", &["*.example.com"]),
        b: cert("b.example.com", &["b.example.com", "bb.example.com"]),
        new_a: cert("new-a", &["a.example.com", "a2.example.com"]),
        dir,
    };
    for (n, c) in [
        ("default.pem", &f.default),
        ("a.pem", &f.a),
        ("wild.pem", &f.wild),
        ("b.pem", &f.b),
        ("new-a.pem", &f.new_a),
    ] {
        std::fs::write(f.path(n), &c.pem).unwrap();
    }
    std::fs::write(
        f.path("list.txt"),
        format!(
            "# default first\n{}\n\n{} [alpn h2,http/1.1] a.example.com\n{} *.example.com !secure.example.com\n{}\n",
            f.p("default.pem"),
            f.p("a.pem"),
            f.p("wild.pem"),
            f.p("b.pem"),
        ),
    )
    .unwrap();
    f
}

fn config(f: &Files, port: u16, port2: u16, node: &HttpNode) -> String {
    format!(
        "global\n\
         \x20   stats socket {} level admin\n\
         defaults\n\
         \x20   mode http\n\
         \x20   timeout connect 5s\n\
         \x20   timeout client 5s\n\
         \x20   timeout server 5s\n\
         frontend fe\n\
         \x20   bind 127.0.0.1:{port} ssl crt-list {} alpn h2,http/1.1\n\
         \x20   bind 127.0.0.1:{port2} ssl crt {}\n\
         \x20   default_backend be\n\
         backend be\n\
         \x20   server s1 {}\n",
        f.p("adm.sock"),
        f.p("list.txt"),
        f.p("a.pem"),
        node.addr()
    )
}

#[test]
fn crt_list_selects_by_sni() {
    let f = files();
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let (port, port2) = (free_port(), free_port());
    let _p = Proc::portcullis(&config(&f, port, port2, &node), lo(port));
    for (sni, want) in [
        ("default.local", &f.default),
        ("a.example.com", &f.a),
        ("x.example.com", &f.wild),
        ("secure.example.com", &f.default),
        ("b.example.com", &f.b),
        ("bb.example.com", &f.b),
        ("other.org", &f.default),
    ] {
        let (mut s, der) = tls_connect(port, sni);
        assert!(der == want.der, "{sni}: wrong certificate");
        assert_eq!(get(&mut s, "/"), 200, "{sni}");
    }
    // openssl's view agrees (subject printed by s_client).
    let out = std::process::Command::new("openssl")
        .args(["s_client", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-servername", "bb.example.com"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("subject=CN = b.example.com"), "{text}");
}

#[test]
fn set_commit_swaps_for_new_connections_only() {
    let f = files();
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let (port, port2) = (free_port(), free_port());
    let _p = Proc::portcullis(&config(&f, port, port2, &node), lo(port));
    let sock = f.path("adm.sock");
    let a = f.p("a.pem");

    let (mut old, der) = tls_connect(port2, "a.example.com");
    assert!(der == f.a.der);
    assert_eq!(get(&mut old, "/1"), 200);

    assert_eq!(
        cli(&sock, &format!("set ssl cert {a}"), Some(&f.new_a.pem)),
        format!("Transaction created for certificate {a}!\n\n")
    );
    let mut list = [
        f.p("a.pem"),
        f.p("b.pem"),
        f.p("default.pem"),
        f.p("wild.pem"),
    ];
    list.sort();
    assert_eq!(
        cli(&sock, "show ssl cert", None),
        format!("# transaction\n*{a}\n# filename\n{}\n\n", list.join("\n"))
    );
    let shown = cli(&sock, &format!("show ssl cert *{a}"), None);
    assert!(
        shown.starts_with(&format!("Filename: *{a}\nStatus: Unused\nSerial: ")),
        "{shown}"
    );
    assert!(
        shown.contains("\nSubject Alternative Name: DNS:a.example.com, DNS:a2.example.com\nAlgorithm: EC256\nSHA1 FingerPrint: "),
        "{shown}"
    );
    assert!(
        shown.ends_with("\nSubject: /CN=new-a\nIssuer: /CN=new-a\nOCSP Response Key: \n\n"),
        "{shown}"
    );
    // Not committed yet: still the old certificate.
    assert!(tls_connect(port2, "a.example.com").1 == f.a.der);

    // Two uses of the file: the crt-list line and the `crt` bind.
    assert_eq!(
        cli(&sock, &format!("commit ssl cert {a}"), None),
        format!("Committing {a}..\nSuccess!\n\n")
    );
    assert!(tls_connect(port2, "a.example.com").1 == f.new_a.der);
    assert!(tls_connect(port2, "a2.example.com").1 == f.new_a.der);
    // The crt-list line keeps its SNI filter: a2 still goes to the wildcard there.
    assert!(tls_connect(port, "a.example.com").1 == f.new_a.der);
    assert!(tls_connect(port, "a2.example.com").1 == f.wild.der);
    // The connection made before the commit keeps working on its certificate.
    assert_eq!(get(&mut old, "/2"), 200);
    assert!(old.conn.peer_certificates().unwrap()[0].as_ref() == f.a.der.as_slice());
    let shown = cli(&sock, &format!("show ssl cert {a}"), None);
    assert!(
        shown.starts_with(&format!("Filename: {a}\nStatus: Used\n")),
        "{shown}"
    );
    assert!(shown.contains("\nSubject: /CN=new-a\n"), "{shown}");

    // abort discards.
    let b = f.p("b.pem");
    assert_eq!(
        cli(&sock, &format!("set ssl cert {b}"), Some(&f.default.pem)),
        format!("Transaction created for certificate {b}!\n\n")
    );
    assert_eq!(
        cli(&sock, &format!("abort ssl cert {b}"), None),
        format!("Transaction aborted for certificate '{b}'!\n\n")
    );
    assert_eq!(
        cli(&sock, &format!("commit ssl cert {b}"), None),
        format!("No ongoing transaction! !\nCan't commit {b}!\n\n")
    );
    assert!(tls_connect(port, "b.example.com").1 == f.b.der);
}

/// The CLI sequence whose replies must match HAProxy 2.6's byte for byte.
fn sequence(f: &Files) -> Vec<(String, Option<String>)> {
    let a = f.p("a.pem");
    let b = f.p("b.pem");
    let cmd = |c: String| (c, None);
    vec![
        cmd("show ssl cert".into()),
        cmd(format!("show ssl cert {a}")),
        cmd(format!("show ssl cert *{a}")),
        cmd("show ssl cert nope.pem".into()),
        cmd(format!("commit ssl cert {a}")),
        cmd(format!("abort ssl cert {a}")),
        cmd("commit ssl cert".into()),
        cmd("abort ssl cert".into()),
        cmd(format!("set ssl cert {a}")),
        (
            format!("set ssl cert {}", f.p("nope.pem")),
            Some(f.a.pem.clone()),
        ),
        (format!("set ssl cert {a}"), Some("garbage\nmore\n".into())),
        (format!("set ssl cert {a}"), Some(f.new_a.pem.clone())),
        (format!("set ssl cert {a}"), Some(f.b.pem.clone())),
        cmd("show ssl cert".into()),
        cmd(format!("show ssl cert *{a}")),
        cmd(format!("commit ssl cert {b}")),
        cmd(format!("abort ssl cert {b}")),
        cmd(format!("commit ssl cert {a}")),
        cmd(format!("show ssl cert {a}")),
        (format!("set ssl cert {b}"), Some(f.a.pem.clone())),
        cmd(format!("abort ssl cert {b}")),
        cmd("show ssl cert".into()),
        cmd(format!("operator; set ssl cert {a}")),
        cmd("user; show ssl cert".into()),
    ]
}

#[test]
fn cli_replies_match_haproxy() {
    let f = files();
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let run = |proc: &dyn Fn(&str, u16) -> Option<Proc>| -> Option<Vec<String>> {
        let (port, port2) = (free_port(), free_port());
        // Both start from the original files.
        std::fs::write(f.path("a.pem"), &f.a.pem).unwrap();
        let _ = std::fs::remove_file(f.path("adm.sock"));
        let _p = proc(&config(&f, port, port2, &node), port)?;
        let sock = f.path("adm.sock");
        Some(
            sequence(&f)
                .iter()
                .map(|(c, p)| cli(&sock, c, p.as_deref()))
                .collect(),
        )
    };
    let ours = run(&|cfg, port| Some(Proc::portcullis(cfg, lo(port)))).unwrap();
    let Some(theirs) = run(&|cfg, port| Proc::haproxy(cfg, lo(port))) else {
        return;
    };
    let seq = sequence(&f);
    assert_eq!(theirs.len(), seq.len());
    assert!(theirs[0].starts_with("# filename\n"), "{}", theirs[0]);
    if std::env::var_os("SHOW_REPLIES").is_some() {
        for ((c, _), t) in seq.iter().zip(&theirs) {
            eprintln!("### {c}\n{t}### END");
        }
    }
    let mismatches: Arc<Mutex<Vec<String>>> = Arc::default();
    for (i, ((o, t), (c, _))) in ours.iter().zip(&theirs).zip(&seq).enumerate() {
        if o != t {
            mismatches
                .lock()
                .unwrap()
                .push(format!("#{i} {c}\n--- portcullis\n{o}--- haproxy\n{t}"));
        }
    }
    let m = mismatches.lock().unwrap();
    assert!(m.is_empty(), "{}", m.join("\n"));
}

/// `-c` on crt-list files: the same alerts and warnings as HAProxy 2.6 (PIDs masked), and our
/// own refusal of per-certificate settings rustls cannot honour.
#[test]
fn check_mode_crt_list_messages_match_haproxy() {
    let f = files();
    let cfg_path = f.path("c.cfg");
    let list = f.path("l.txt");
    std::fs::write(
        &cfg_path,
        format!(
            "defaults\n    mode http\n    timeout client 5s\n    timeout server 5s\n    timeout connect 5s\nfrontend f\n    bind 127.0.0.1:{} ssl crt-list {} alpn h2\n    default_backend be\nbackend be\n    server s 127.0.0.1:9\n",
            free_port(),
            list.display()
        ),
    )
    .unwrap();
    std::fs::write(f.path("garbage.txt"), "garbage\n").unwrap();
    let run = |bin: &str| -> String {
        let out = std::process::Command::new(bin)
            .arg("-c")
            .arg("-f")
            .arg(&cfg_path)
            .current_dir(&f.dir.0)
            .output()
            .expect("run -c");
        let text = String::from_utf8_lossy(&out.stderr).into_owned()
            + &String::from_utf8_lossy(&out.stdout);
        text.lines()
            .filter(|l| l.starts_with("[ALERT]") || l.starts_with("[WARNING]"))
            .filter(|l| !l.contains("Error(s) found") && !l.contains("Fatal errors"))
            .map(|l| {
                let (head, rest) = l.split_once(") :").unwrap_or((l, ""));
                format!("{}) :{rest}\n", head.split('(').next().unwrap_or(""))
            })
            .collect()
    };
    let a = f.p("a.pem");
    let cases = [
        format!("{}\n", f.p("nope.pem")),
        format!("# c\n\n{a} [foo bar] x\n"),
        format!("{a} [ssl-min-ver TLSv9] x\n"),
        format!("{a} [alpn] x\n"),
        format!("{a} [alpn h2 alpn]\n"),
        format!("{a} ]\n"),
        format!("[alpn h2] {a}\n"),
        "garbage.txt\n".to_string(),
        "# only a comment\n".to_string(),
        format!("{a} x.example.com [alpn h2]\n"),
        format!("{a} [alpn h2] a.example.com\n"),
    ];
    let haproxy = std::path::Path::new("/usr/sbin/haproxy").exists();
    for c in &cases {
        std::fs::write(&list, c).unwrap();
        let ours = run(env!("CARGO_BIN_EXE_portcullis"));
        assert!(!ours.is_empty() || c.contains("[alpn h2] a.example"), "{c}");
        if haproxy {
            assert_eq!(ours, run("/usr/sbin/haproxy"), "crt-list:\n{c}");
        }
    }
    std::fs::write(&list, format!("{a} [alpn http/1.1] a.example.com\n")).unwrap();
    let ours = run(env!("CARGO_BIN_EXE_portcullis"));
    assert!(
        ours.ends_with(&format!(
            "'crt-list' : parsing [{}:1]: 'alpn http/1.1' is not supported per certificate (rustls sets it once per bind); use the bind line's value or move the certificate to its own bind\n",
            list.display()
        )),
        "{ours}"
    );
}
