//! TLS offload and HTTP/2 through the seed's 443 frontend: real curl, openssl and h2load clients
//! against the real binary, a recording backend behind it, and hostile clients (malformed
//! ClientHello, stalled handshake, h2 rapid reset, CONTINUATION flood) next to healthy ones.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use backend::{HttpNode, HttpOpts, free_port, lo};
use proxy::{Proc, TempDir};

/// A self-signed ECDSA P-256 certificate for `example.local` as a PEM bundle (cert + key, as
/// HAProxy reads them). Returns the bundle path and the certificate's DER.
fn bundle(dir: &Path) -> (PathBuf, Vec<u8>) {
    let ck = rcgen::generate_simple_self_signed(vec!["example.local".to_string()]).expect("cert");
    let path = dir.join("bundle.pem");
    let pem = format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem());
    std::fs::write(&path, pem).expect("write bundle");
    (path, ck.cert.der().to_vec())
}

/// The seed's global TLS policy and its 443 frontend, on `port`, in front of `nodes`.
fn config(port: u16, cert: &Path, nodes: &[&HttpNode], bind_extra: &str) -> String {
    let mut servers = String::new();
    for (i, n) in nodes.iter().enumerate() {
        servers.push_str(&format!("    server s{i} {}\n", n.addr()));
    }
    format!(
        "global\n\
         \x20   ssl-default-bind-ciphers ECDHE+AESGCM:ECDHE+CHACHA20\n\
         \x20   ssl-default-bind-options ssl-min-ver TLSv1.2 no-tls-tickets\n\
         defaults\n\
         \x20   log stdout format raw local0\n\
         \x20   timeout connect 5s\n\
         \x20   timeout client 3s\n\
         \x20   timeout server 10s\n\
         \x20   timeout http-request 10s\n\
         frontend istio-https-l7\n\
         \x20   mode http\n\
         \x20   option httplog\n\
         \x20   bind 127.0.0.1:{port} ssl crt \"{}\" alpn h2,http/1.1 {bind_extra}\n\
         \x20   option forwardfor\n\
         \x20   http-request set-header X-Forwarded-Proto https\n\
         \x20   http-request set-header X-Forwarded-Port 443\n\
         \x20   http-request set-header X-Forwarded-Host %[req.hdr(Host)]\n\
         \x20   http-request set-header X-Tls \"%[ssl_fc] %[ssl_fc_sni] %[ssl_fc_protocol] %[ssl_fc_alpn]\"\n\
         \x20   default_backend be\n\
         backend be\n\
         \x20   mode http\n\
         \x20   balance roundrobin\n\
         {servers}",
        cert.display()
    )
}

struct Setup {
    proc: Proc,
    node: HttpNode,
    port: u16,
    _dir: TempDir,
    der: Vec<u8>,
}

fn setup(bind_extra: &str) -> Setup {
    let dir = TempDir::new("tls");
    let (cert, der) = bundle(&dir.0);
    let node = HttpNode::start(lo(0), HttpOpts::named("node1")).expect("node");
    let port = free_port();
    let proc = Proc::portcullis(&config(port, &cert, &[&node], bind_extra), lo(port));
    Setup {
        proc,
        node,
        port,
        _dir: dir,
        der,
    }
}

/// curl through the frontend: (exit code, stdout). `-w` output follows the body.
fn curl(port: u16, args: &[&str], path: &str) -> (i32, String) {
    let out = Command::new("curl")
        .args(["-sk", "--max-time", "10", "--resolve"])
        .arg(format!("example.local:{port}:127.0.0.1"))
        .args(args)
        .arg(format!("https://example.local:{port}{path}"))
        .output()
        .expect("curl is installed by cargo xtask setup");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn http1_and_h2_through_the_seed_frontend() {
    let s = setup("");
    for (flag, version, logged) in [
        ("--http1.1", "1.1", "\"GET /v1 HTTP/1.1\""),
        (
            "--http2",
            "2",
            "\"GET https://example.local:PORT/v2 HTTP/2.0\"",
        ),
    ] {
        let path = if version == "2" { "/v2" } else { "/v1" };
        let (rc, out) = curl(
            s.port,
            &[flag, "-w", "\n%{http_code} %{http_version}"],
            path,
        );
        assert_eq!(rc, 0, "curl {flag}: {out}");
        assert!(
            out.ends_with(&format!("\n200 {version}")),
            "curl {flag}: {out}"
        );
        assert!(out.contains("node1"), "served by the node: {out}");
        let rec = s
            .node
            .requests()
            .into_iter()
            .find(|r| r.target == path)
            .expect("the node saw the request");
        assert_eq!(rec.header("x-forwarded-proto").as_deref(), Some("https"));
        assert_eq!(rec.header("x-forwarded-port").as_deref(), Some("443"));
        let host = format!("example.local:{}", s.port);
        assert_eq!(
            rec.header("x-forwarded-host").as_deref(),
            Some(host.as_str())
        );
        assert_eq!(rec.header("x-forwarded-for").as_deref(), Some("127.0.0.1"));
        let alpn = if version == "2" { "h2" } else { "http/1.1" };
        assert_eq!(
            rec.header("x-tls").as_deref(),
            Some(format!("1 example.local TLSv1.3 {alpn}").as_str())
        );
        let logged = logged.replace("PORT", &s.port.to_string());
        let line = s
            .proc
            .wait_log(&logged, Duration::from_secs(5))
            .unwrap_or_else(|| panic!("no log line {logged}: {:?}", s.proc.log_lines()));
        assert!(
            line.contains(" istio-https-l7~ be/s0 "),
            "TLS frontends carry ~ in the log: {line}"
        );
    }
    // h2 requests reach the server as HTTP/1.1 in origin form with host from :authority.
    let rec = s
        .node
        .requests()
        .into_iter()
        .find(|r| r.target == "/v2")
        .expect("h2 request");
    assert!(rec.head.starts_with("GET /v2 HTTP/1.1\r\n"), "{}", rec.head);
}

#[test]
fn h2_post_bodies_and_chunked_responses() {
    let s = setup("");
    let dir = TempDir::new("tls-body");
    let file = dir.0.join("up.bin");
    let body = backend::size_body(300_000);
    std::fs::write(&file, &body).expect("write");
    let data = format!("@{}", file.display());
    for flag in ["--http1.1", "--http2"] {
        let (rc, out) = curl(s.port, &[flag, "--data-binary", &data], "/up");
        assert_eq!(rc, 0, "{flag}");
        assert_eq!(out, backend::upload_answer(&body), "{flag}");
        // A chunked response re-framed as DATA frames.
        let (rc, out) = curl(s.port, &[flag], "/chunked?n=50");
        assert_eq!(rc, 0, "{flag}");
        assert_eq!(out, backend::chunked_body(50), "{flag}");
        let (rc, out) = curl(s.port, &[flag], "/size?bytes=1000000");
        assert_eq!(rc, 0, "{flag}");
        assert_eq!(out.len(), 1_000_000, "{flag}");
        assert!(out.as_bytes() == backend::size_body(1_000_000), "{flag}");
    }
    // An upload without a length (h2 DATA until END_STREAM) reaches the node chunked.
    let mut child = Command::new("curl")
        .args(["-sk", "--http2", "--max-time", "10", "-T", "-", "--resolve"])
        .arg(format!("example.local:{}:127.0.0.1", s.port))
        .arg(format!("https://example.local:{}/put", s.port))
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("curl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(&body)
        .expect("feed curl");
    let out = child.wait_with_output().expect("curl");
    assert!(out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        backend::upload_answer(&body)
    );
    let rec = s
        .node
        .requests()
        .into_iter()
        .find(|r| r.target == "/put")
        .expect("put");
    assert_eq!(rec.header("transfer-encoding").as_deref(), Some("chunked"));
    assert_eq!(rec.body_len, body.len() as u64);
}

#[test]
fn tls11_is_refused_under_ssl_min_ver_tls12() {
    let s = setup("");
    // The client offers only TLS 1.1 (at the lowest security level so OpenSSL really sends it).
    let out = Command::new("openssl")
        .args(["s_client", "-connect"])
        .arg(format!("127.0.0.1:{}", s.port))
        .args(["-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl");
    assert!(!out.status.success(), "TLS 1.1 handshake must fail");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Cipher is (NONE)"), "{text}");
    let line = s
        .proc
        .wait_log("SSL handshake failure", Duration::from_secs(5))
        .expect("the refusal is logged as HAProxy logs it");
    assert!(
        line.contains("] istio-https-l7/1: SSL handshake failure"),
        "{line}"
    );
    // TLS 1.2 and 1.3 are served.
    for v in ["--tlsv1.2", "--tlsv1.3"] {
        let (rc, _) = curl(s.port, &["--http1.1", v], "/");
        assert_eq!(rc, 0, "{v}");
    }
    let (rc, _) = curl(s.port, &["--http1.1", "--tls-max", "1.2"], "/");
    assert_eq!(rc, 0);
}

/// Whether `openssl s_client` got a session ticket from a TLS 1.2 handshake on `port`.
fn tls12_ticket(port: u16, dir: &Path) -> bool {
    let sess = dir.join(format!("sess-{port}.pem"));
    let _ = std::fs::remove_file(&sess);
    let st = Command::new("openssl")
        .args(["s_client", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-tls1_2", "-ign_eof", "-sess_out"])
        .arg(&sess)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl");
    assert!(st.success());
    let out = Command::new("openssl")
        .args(["sess_id", "-text", "-noout", "-in"])
        .arg(&sess)
        .output()
        .expect("openssl sess_id");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Session-ID:"), "{text}");
    text.contains("TLS session ticket lifetime hint")
}

#[test]
fn session_tickets_follow_no_tls_tickets() {
    let dir = TempDir::new("tickets");
    let (cert, _) = bundle(&dir.0);
    let node = HttpNode::start(lo(0), HttpOpts::named("n")).expect("node");
    let port = free_port();
    let port2 = free_port();
    // `no-tls-tickets` on the first bind only (the global options are defaults every bind
    // inherits, so the seed's global form would cover both).
    let mut cfg = config(port, &cert, &[&node], "no-tls-tickets");
    cfg = cfg.replace(
        "option forwardfor\n",
        &format!(
            "option forwardfor\n    bind 127.0.0.1:{port2} ssl crt \"{}\"\n",
            cert.display()
        ),
    );
    cfg = cfg.replace("ssl-min-ver TLSv1.2 no-tls-tickets", "ssl-min-ver TLSv1.2");
    let proc = Proc::portcullis(&cfg, lo(port));
    assert!(
        !tls12_ticket(port, &dir.0),
        "no ticket under no-tls-tickets"
    );
    assert!(
        tls12_ticket(port2, &dir.0),
        "a ticket without no-tls-tickets"
    );
    // Resumption by session ID still works without tickets.
    let sess = dir.0.join(format!("sess-{port}.pem"));
    let out = Command::new("openssl")
        .args(["s_client", "-connect"])
        .arg(format!("127.0.0.1:{port}"))
        .args(["-tls1_2", "-ign_eof", "-sess_in"])
        .arg(&sess)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("openssl");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Reused, TLSv1.2"), "{text}");
    drop(proc);
}

/// TLS 1.3, one request with `Connection: close`: the answer ends with close_notify (a clean
/// end of stream, not a bare FIN) and the session tickets, sent with the answer rather than after
/// the handshake, still let the next connection resume.
#[test]
fn tls13_close_sends_close_notify_and_tickets_resume() {
    let s = setup("");
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(s.der.clone()))
        .expect("root");
    let cfg = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let once = || {
        let name = rustls::pki_types::ServerName::try_from("example.local").expect("name");
        let conn = rustls::ClientConnection::new(Arc::clone(&cfg), name).expect("client");
        let sock = TcpStream::connect(lo(s.port)).expect("connect");
        sock.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let mut tls = rustls::StreamOwned::new(conn, sock);
        tls.write_all(b"GET / HTTP/1.1\r\nHost: example.local\r\nConnection: close\r\n\r\n")
            .expect("request");
        let mut got = Vec::new();
        // read_to_end fails with UnexpectedEof on a FIN without close_notify.
        tls.read_to_end(&mut got)
            .expect("answer ended by close_notify");
        let text = String::from_utf8_lossy(&got).into_owned();
        assert!(text.starts_with("HTTP/1.1 200"), "{text}");
        assert!(text.contains("\r\nconnection: close\r\n"), "{text}");
        tls.conn.handshake_kind()
    };
    assert_eq!(once(), Some(rustls::HandshakeKind::Full));
    assert_eq!(once(), Some(rustls::HandshakeKind::Resumed));
    healthy(&s);
}

#[test]
fn h2load_all_responses_2xx() {
    let s = setup("");
    let n = std::env::var("TLS_H2LOAD_N").unwrap_or_else(|_| "100000".into());
    let out = Command::new("h2load")
        .args(["-n", &n, "-c", "10", "-m", "10"])
        .arg(format!("https://127.0.0.1:{}/", s.port))
        .output()
        .expect("h2load is installed by cargo xtask setup");
    let text = String::from_utf8_lossy(&out.stdout);
    let want = format!("requests: {n} total, {n} started, {n} done, {n} succeeded, 0 failed");
    assert!(text.contains(&want), "{text}");
    assert!(text.contains(&format!("status codes: {n} 2xx")), "{text}");
}

// ---------------------------------------------------------------------------------------------
// Hostile clients.

/// A TLS client speaking raw HTTP/2 frames (rustls, ALPN h2), trusting the test certificate.
fn h2_raw(port: u16, der: &[u8]) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(der.to_vec()))
        .expect("root");
    let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    cfg.alpn_protocols = vec![b"h2".to_vec()];
    let name = rustls::pki_types::ServerName::try_from("example.local").expect("name");
    let conn = rustls::ClientConnection::new(Arc::new(cfg), name).expect("client");
    let sock = TcpStream::connect(lo(port)).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut tls = rustls::StreamOwned::new(conn, sock);
    tls.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")
        .expect("preface");
    tls.write_all(&frame(4, 0, 0, &[])).expect("settings");
    assert_eq!(tls.conn.alpn_protocol(), Some(&b"h2"[..]));
    tls
}

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK for `GET https://example.local/` (static-table indices, literal authority).
fn get_block() -> Vec<u8> {
    let mut b = vec![0x82, 0x87, 0x84, 0x01, 13];
    b.extend_from_slice(b"example.local");
    b
}

/// Reads until the server closes (or `limit`); returns whether it closed in time and whether a
/// GOAWAY frame was seen on the way.
fn drain_until_closed(
    tls: &mut rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    limit: Duration,
) -> (bool, bool) {
    let deadline = Instant::now() + limit;
    let mut buf = vec![0u8; 65536];
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        match tls.read(&mut buf) {
            Ok(0) => return (true, has_goaway(&seen)),
            Ok(n) => seen.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => return (true, has_goaway(&seen)),
        }
    }
    (false, has_goaway(&seen))
}

fn has_goaway(mut b: &[u8]) -> bool {
    while b.len() >= 9 {
        let len = (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]);
        if b[3] == 7 {
            return true;
        }
        if b.len() < 9 + len {
            break;
        }
        b = &b[9 + len..];
    }
    false
}

fn healthy(s: &Setup) {
    for flag in ["--http1.1", "--http2"] {
        let (rc, out) = curl(s.port, &[flag, "-w", "\n%{http_code}"], "/after");
        assert_eq!(rc, 0, "{flag} after the attack");
        assert!(out.ends_with("\n200"), "{flag}: {out}");
    }
}

#[test]
fn h2_rapid_reset_is_cut_off() {
    let s = setup("");
    let mut tls = h2_raw(s.port, &s.der);
    let block = get_block();
    let mut burst = Vec::new();
    for i in 0..2000u32 {
        let id = 1 + 2 * i;
        burst.extend_from_slice(&frame(1, 0x5, id, &block));
        burst.extend_from_slice(&frame(3, 0, id, &8u32.to_be_bytes()));
    }
    // The server may hang up mid-burst: a write error is the defence working.
    let _ = tls.write_all(&burst);
    let _ = tls.flush();
    let (closed, goaway) = drain_until_closed(&mut tls, Duration::from_secs(10));
    assert!(closed && goaway, "closed={closed} goaway={goaway}");
    assert!(
        s.node.request_count() < 2000,
        "the reset streams were not all forwarded"
    );
    healthy(&s);
}

#[test]
fn h2_continuation_flood_is_cut_off() {
    let s = setup("");
    let mut tls = h2_raw(s.port, &s.der);
    tls.write_all(&frame(1, 0x1, 1, &get_block()))
        .expect("headers");
    // Endless CONTINUATION frames, each adding never-indexed literal fields.
    let mut field = vec![0x10, 8];
    field.extend_from_slice(b"x-filler");
    field.push(0x7f);
    field.push(0x81);
    field.push(0x7f); // value length 127 + 255 = 382
    field.extend_from_slice(&[b'a'; 382]);
    let mut block = Vec::new();
    while block.len() + field.len() <= 16384 {
        block.extend_from_slice(&field);
    }
    let cont = frame(9, 0, 1, &block);
    let mut sent = 0usize;
    let mut cut = false;
    while sent < 64 * 1024 * 1024 {
        if tls.write_all(&cont).and_then(|_| tls.flush()).is_err() {
            cut = true;
            break;
        }
        sent += cont.len();
    }
    let (closed, _) = drain_until_closed(&mut tls, Duration::from_secs(10));
    assert!(
        cut || closed,
        "the flood was not stopped after {sent} bytes"
    );
    assert_eq!(s.node.request_count(), 0);
    healthy(&s);
}

#[test]
fn malformed_and_stalled_handshakes_leave_others_served() {
    let s = setup("");
    // Not TLS at all.
    let mut c = TcpStream::connect(lo(s.port)).expect("connect");
    c.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    c.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut buf = [0u8; 256];
    let n = c.read(&mut buf).unwrap_or(0);
    // rustls answers with an alert record (content type 21) or just closes.
    assert!(n == 0 || buf[0] == 21, "{:?}", &buf[..n]);
    // A ClientHello record with a truncated, inconsistent body.
    let mut c2 = TcpStream::connect(lo(s.port)).expect("connect");
    c2.write_all(&[
        0x16, 0x03, 0x01, 0x00, 0x08, 0x01, 0x00, 0xff, 0xff, 0x03, 0x03, 0, 0,
    ])
    .expect("write");
    // A client that connects and says nothing (timeout client 3s).
    let stalled = TcpStream::connect(lo(s.port)).expect("connect");
    // Another that stops mid-ClientHello.
    let mut half = TcpStream::connect(lo(s.port)).expect("connect");
    half.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01])
        .expect("write");
    healthy(&s);
    assert!(
        s.proc
            .wait_log("SSL handshake failure", Duration::from_secs(5))
            .is_some()
    );
    let t = s
        .proc
        .wait_log("Timeout during SSL handshake", Duration::from_secs(8))
        .expect("the stalled handshakes time out at timeout client");
    assert!(t.contains("istio-https-l7/1: "), "{t}");
    drop((stalled, half, c2));
    healthy(&s);
}

// ---------------------------------------------------------------------------------------------
// TLS towards the servers.

/// An HTTP/1.1-over-TLS server for one certificate: answers every request with
/// `tls-node sni=<sni> path=<target>` (keep-alive) and counts requests per path.
/// (SNI, request target) of every request a [`TlsNode`] answered.
type Seen = Arc<std::sync::Mutex<Vec<(Option<String>, String)>>>;

struct TlsNode {
    addr: std::net::SocketAddr,
    seen: Seen,
}

impl TlsNode {
    fn start(names: &[&str]) -> (TlsNode, String) {
        let ck = rcgen::generate_simple_self_signed(
            names.iter().map(|n| n.to_string()).collect::<Vec<_>>(),
        )
        .expect("cert");
        let cert_pem = ck.cert.pem();
        let key =
            rustls::pki_types::PrivateKeyDer::try_from(ck.key_pair.serialize_der()).expect("key");
        let cfg = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_no_client_auth()
        .with_single_cert(vec![ck.cert.der().clone()], key)
        .expect("server config");
        let cfg = Arc::new(cfg);
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let seen: Seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen2 = Arc::clone(&seen);
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { break };
                let (cfg, seen) = (Arc::clone(&cfg), Arc::clone(&seen2));
                std::thread::spawn(move || {
                    let Ok(conn) = rustls::ServerConnection::new(cfg) else {
                        return;
                    };
                    let mut tls = rustls::StreamOwned::new(conn, s);
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    loop {
                        let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                            match tls.read(&mut chunk) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                            continue;
                        };
                        let head = String::from_utf8_lossy(&buf[..end]).into_owned();
                        buf.drain(..end + 4);
                        let target = head.split(' ').nth(1).unwrap_or("").to_string();
                        let sni = tls.conn.server_name().map(str::to_string);
                        seen.lock().unwrap().push((sni.clone(), target.clone()));
                        let body =
                            format!("tls-node sni={} path={target}", sni.unwrap_or_default());
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}",
                            body.len()
                        );
                        if tls.write_all(resp.as_bytes()).is_err() {
                            return;
                        }
                    }
                });
            }
        });
        (TlsNode { addr, seen }, cert_pem)
    }

    fn paths(&self, p: &str) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, t)| t == p)
            .count()
    }
}

fn plain_front(port: u16, server_line: &str, extra: &str) -> String {
    format!(
        "defaults\n    mode http\n    log stdout format raw local0\n    option httplog\n\
         \x20   timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\
         backend be\n{extra}    {server_line}\n"
    )
}

#[test]
fn servers_over_tls_verify_none_required_and_sni() {
    let dir = TempDir::new("srv-tls");
    let (node, cert_pem) = TlsNode::start(&["backend.local"]);
    let ca = dir.0.join("ca.pem");
    std::fs::write(&ca, &cert_pem).expect("ca");
    let (_, other_pem) = TlsNode::start(&["other.local"]);
    let wrong_ca = dir.0.join("wrong-ca.pem");
    std::fs::write(&wrong_ca, &other_pem).expect("ca");
    let a = node.addr;
    let cases = [
        (
            format!("server s {a} ssl verify none"),
            Some("tls-node sni= path=/n"),
        ),
        (
            format!("server s {a} ssl verify required ca-file {}", ca.display()),
            Some("tls-node sni= path=/r"),
        ),
        (
            format!(
                "server s {a} ssl verify required ca-file {} sni str(backend.local)",
                ca.display()
            ),
            Some("tls-node sni=backend.local path=/s"),
        ),
        // The chain does not lead to the CA file.
        (
            format!(
                "server s {a} ssl verify required ca-file {}",
                wrong_ca.display()
            ),
            None,
        ),
        // The name asked by `sni` is not on the certificate.
        (
            format!(
                "server s {a} ssl verify required ca-file {} sni str(nope.local)",
                ca.display()
            ),
            None,
        ),
    ];
    for (i, (line, want)) in cases.iter().enumerate() {
        let port = free_port();
        let p = Proc::portcullis(&plain_front(port, line, "    retries 0\n"), lo(port));
        let path = match (i, want) {
            (0, _) => "/n",
            (1, _) => "/r",
            (2, _) => "/s",
            _ => "/x",
        };
        let r = proxy::get(lo(port), path);
        match want {
            Some(body) => {
                assert_eq!(r.status, 200, "{line}");
                assert_eq!(r.text(), *body, "{line}");
            }
            None => {
                assert_eq!(r.status, 503, "{line}");
                let l = p
                    .wait_log("\"GET /x HTTP/1.1\"", Duration::from_secs(5))
                    .expect("log line");
                assert!(
                    l.contains(" fe be/s ") && l.contains(" SC-- "),
                    "{line}: {l}"
                );
            }
        }
    }
    assert_eq!(node.paths("/x"), 0);
}

#[test]
fn checks_over_tls() {
    let (node, _) = TlsNode::start(&["backend.local"]);
    let port = free_port();
    // `ssl` without a check port: checks go over TLS too.
    let cfg = plain_front(
        port,
        &format!(
            "server s {} ssl verify none check inter 1s rise 1 fall 1",
            node.addr
        ),
        "    option httpchk GET /health\n",
    );
    let p = Proc::portcullis(&cfg, lo(port));
    assert!(backend::wait_until(Duration::from_secs(5), || node
        .paths("/health")
        >= 3));
    let r = proxy::get(lo(port), "/after-checks");
    assert_eq!(r.status, 200);
    assert!(
        !p.stderr
            .lock()
            .unwrap()
            .iter()
            .any(|l| l.contains("is DOWN")),
        "{:?}",
        p.stderr.lock().unwrap()
    );
    // `check-ssl` against a plain server fails at Layer 6.
    let plain = HttpNode::start(lo(0), HttpOpts::named("plain")).expect("node");
    let port2 = free_port();
    let cfg = plain_front(
        port2,
        &format!(
            "server s {} check check-ssl verify none inter 200ms rise 1 fall 1",
            plain.addr()
        ),
        "",
    );
    let p2 = Proc::portcullis(&cfg, lo(port2));
    assert!(
        backend::wait_until(Duration::from_secs(5), || {
            p2.stderr
                .lock()
                .unwrap()
                .iter()
                .any(|l| l.contains("Server be/s is DOWN, reason: Layer6 "))
        }),
        "{:?}",
        p2.stderr.lock().unwrap()
    );
}

#[test]
fn verify_without_ca_file_is_refused_in_haproxys_words() {
    let dir = TempDir::new("verify");
    let cfg = dir.0.join("v.cfg");
    std::fs::write(
        &cfg,
        "defaults\n mode http\n timeout client 1s\n timeout server 1s\n timeout connect 1s\n\
         backend be\n server s 127.0.0.1:1 ssl\n server s2 127.0.0.1:1 ssl verify none\n",
    )
    .expect("cfg");
    let out = Command::new(env!("CARGO_BIN_EXE_portcullis"))
        .arg("-c")
        .arg("-f")
        .arg(&cfg)
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    let want = format!(
        "config : [{}:7] : 'server be/s' : verify is enabled by default but no CA file specified. \
         If you're running on a LAN where you're certain to trust the server's certificate, please \
         set an explicit 'verify none' statement on the 'server' line, or use 'ssl-server-verify \
         none' in the global section to disable server-side verifications by default.",
        cfg.display()
    );
    assert!(err.contains(&want), "{err}");
    assert!(!err.contains("'server be/s2'"), "{err}");
}

/// A rustls client trusting `der`, without ALPN.
fn tls_client(port: u16, der: &[u8]) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(der.to_vec()))
        .expect("root");
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("example.local").expect("name");
    let conn = rustls::ClientConnection::new(Arc::new(cfg), name).expect("client");
    let sock = TcpStream::connect(lo(port)).expect("connect");
    sock.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    rustls::StreamOwned::new(conn, sock)
}

#[test]
fn tcp_mode_tls_offload_and_tls_towards_servers() {
    let dir = TempDir::new("tcp-tls");
    let (cert, der) = bundle(&dir.0);
    let echo = backend::TcpEcho::start(lo(0)).expect("echo");
    let (node, _) = TlsNode::start(&["backend.local"]);
    let (p1, p2) = (free_port(), free_port());
    let cfg = format!(
        "defaults\n    mode tcp\n    log stdout format raw local0\n    option tcplog\n\
         \x20   timeout connect 2s\n    timeout client 5s\n    timeout server 5s\n\
         frontend offload\n    bind 127.0.0.1:{p1} ssl crt \"{}\"\n    default_backend echo\n\
         backend echo\n    server e {}\n\
         frontend to-tls\n    bind 127.0.0.1:{p2}\n    default_backend tlsnode\n\
         backend tlsnode\n    server t {} ssl verify none\n",
        cert.display(),
        echo.addr(),
        node.addr
    );
    let p = Proc::portcullis(&cfg, lo(p1));
    // TLS terminated by a `mode tcp` frontend: the echo server sees plaintext.
    let mut c = tls_client(p1, &der);
    c.write_all(b"hello over tls\n").expect("write");
    let mut got = vec![0u8; 15];
    c.read_exact(&mut got).expect("echo back");
    assert_eq!(&got, b"hello over tls\n");
    c.conn.send_close_notify();
    let _ = c.flush();
    drop(c);
    let l = p
        .wait_log(" offload~ echo/e ", Duration::from_secs(5))
        .unwrap_or_else(|| panic!("tcplog with ~: {:?}", p.log_lines()));
    assert!(l.contains(" 15 "), "bytes to the client: {l}");
    // Plain client, TLS towards the server.
    let mut s = TcpStream::connect(lo(p2)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s.write_all(b"GET /tcp HTTP/1.1\r\nHost: x\r\n\r\n")
        .expect("write");
    let mut buf = vec![0u8; 4096];
    let mut resp = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(5);
    while !resp.ends_with(b"path=/tcp") && Instant::now() < deadline {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => resp.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&resp);
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    assert!(text.ends_with("tls-node sni= path=/tcp"), "{text}");
    assert_eq!(node.paths("/tcp"), 1);
}

/// `Content-Length: 0` over TLS, HTTP/1.1 and HTTP/2: answered at once (curl's own 5 s limit
/// fails a hang), the node sees an empty body, and an empty response ends at its head.
#[test]
fn content_length_zero_over_h1_and_h2() {
    let s = setup("");
    for flag in ["--http1.1", "--http2"] {
        for m in ["GET", "POST", "PUT"] {
            let (rc, out) = curl(
                s.port,
                &[flag, "--max-time", "5", "-X", m, "-H", "Content-Length: 0"],
                "/z",
            );
            assert_eq!(rc, 0, "{flag} {m}");
            if m != "GET" {
                assert!(out.starts_with("len=0 "), "{flag} {m}: {out}");
            }
        }
        let (rc, out) = curl(s.port, &[flag, "--max-time", "5"], "/size?bytes=0");
        assert_eq!((rc, out.as_str()), (0, ""), "{flag}");
    }
    assert!(s.node.requests().iter().all(|r| r.body_len == 0));
}

/// `server … ssl crt <pem>`: the client certificate is offered to a TLS server that asks for
/// one. The server is HAProxy 2.6 itself, answering with what it saw (`ssl_c_used`, the CN).
#[test]
fn server_crt_is_the_client_certificate() {
    let dir = TempDir::new("tls-srv-crt");
    let (srv_pem, _) = bundle(&dir.0);
    let mut params =
        rcgen::CertificateParams::new(vec!["client.local".to_string()]).expect("params");
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "pc-client");
    let key = rcgen::KeyPair::generate().expect("key");
    let cert = params.self_signed(&key).expect("client cert");
    let client_pem = dir.0.join("client.pem");
    std::fs::write(
        &client_pem,
        format!("{}{}", cert.pem(), key.serialize_pem()),
    )
    .unwrap();
    let hport = free_port();
    let hcfg = format!(
        "defaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\n\
         frontend tls\n    bind 127.0.0.1:{hport} ssl crt {} verify optional ca-file {} ca-ignore-err all crt-ignore-err all\n\
         \x20   http-request return status 200 content-type text/plain lf-string \"used=%[ssl_c_used] cn=%[ssl_c_s_dn(CN)]\"\n",
        srv_pem.display(),
        client_pem.display()
    );
    let Some(_h) = Proc::haproxy(&hcfg, lo(hport)) else {
        eprintln!("NOTICE: haproxy missing: server crt test skipped");
        return;
    };
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 5s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    use_backend with if {{ path /with }}\n    default_backend without\n\
         backend with\n    server h 127.0.0.1:{hport} ssl verify none crt {}\n\
         backend without\n    server h 127.0.0.1:{hport} ssl verify none\n",
        client_pem.display()
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    let r = proxy::get(lo(port), "/with");
    assert_eq!((r.status, r.text().as_str()), (200, "used=1 cn=pc-client"));
    let r = proxy::get(lo(port), "/without");
    assert_eq!((r.status, r.text().as_str()), (200, "used=0 cn="));
}
