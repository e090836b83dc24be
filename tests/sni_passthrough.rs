//! `mode tcp` TLS passthrough routed by SNI (seed 004): the ClientHello is peeked, never
//! terminated. Two rustls servers (a.example, b.example) and a default one behind one frontend;
//! the client must see the chosen backend's own certificate. Malformed, split and stalled
//! ClientHellos leave the process serving others; `tcp-request content/connection reject` log
//! and count as HAProxy 2.6 does; and a differential run against HAProxy 2.6 asserts the same
//! routing decisions for the same bytes.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/raw.rs"]
mod raw;
#[path = "support/tls.rs"]
mod tls;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use backend::{free_port, lo};
use proxy::{Proc, TempDir};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tls::provider;

/// A TLS server with its own self-signed certificate: after the handshake it writes its name
/// and closes.
struct TlsNode {
    addr: SocketAddr,
    cert: CertificateDer<'static>,
}

impl TlsNode {
    fn start(name: &'static str, san: &str) -> TlsNode {
        let ck = rcgen::generate_simple_self_signed(vec![san.to_string()]).unwrap();
        let cert = ck.cert.der().clone();
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der()));
        let cfg = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], key)
            .unwrap();
        let cfg = Arc::new(cfg);
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                let cfg = Arc::clone(&cfg);
                std::thread::spawn(move || {
                    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
                    let conn = rustls::ServerConnection::new(cfg).unwrap();
                    let mut tls = rustls::StreamOwned::new(conn, s);
                    if tls.write_all(format!("{name}\n").as_bytes()).is_ok() {
                        tls.conn.send_close_notify();
                        let _ = tls.flush();
                    }
                });
            }
        });
        TlsNode { addr, cert }
    }
}

fn client_config() -> Arc<rustls::ClientConfig> {
    tls::any_cert_client(&[b"h2", b"http/1.1"])
}

/// A TLS session through the proxy: `sni` None sends none (an IP as server name). The first
/// `chunks` bytes of the ClientHello are sent in separate segments `gap` apart. Returns the
/// greeting and the certificate the server presented.
fn tls_via(
    proxy: SocketAddr,
    sni: Option<&str>,
    chunks: &[usize],
    gap: Duration,
) -> (String, CertificateDer<'static>) {
    let name = ServerName::try_from(sni.unwrap_or("127.0.0.1").to_string()).unwrap();
    let mut conn = rustls::ClientConnection::new(client_config(), name).unwrap();
    let mut sock = TcpStream::connect(proxy).unwrap();
    sock.set_nodelay(true).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    if !chunks.is_empty() {
        let mut hello = Vec::new();
        conn.write_tls(&mut hello).unwrap();
        let mut off = 0;
        for &c in chunks {
            sock.write_all(&hello[off..off + c]).unwrap();
            off += c;
            std::thread::sleep(gap);
        }
        sock.write_all(&hello[off..]).unwrap();
    }
    let mut tls = rustls::StreamOwned::new(conn, sock);
    let mut text = String::new();
    let _ = tls.read_to_string(&mut text);
    let cert = tls
        .conn
        .peer_certificates()
        .and_then(|c| c.first())
        .expect("server certificate")
        .clone()
        .into_owned();
    (text, cert)
}

struct Setup {
    a: TlsNode,
    b: TlsNode,
    d: TlsNode,
    port: u16,
    /// The `strict` frontend (reject rules).
    port2: u16,
    sock: std::path::PathBuf,
    _dir: TempDir,
    proc: Proc,
}

fn setup(delay: &str) -> Setup {
    let a = TlsNode::start("A", "a.example");
    let b = TlsNode::start("B", "*.b.example");
    let d = TlsNode::start("D", "default.example");
    let port = free_port();
    let port2 = free_port();
    let dir = TempDir::new("sni");
    let sock = dir.0.join("admin.sock");
    let cfg = format!(
        "global\n    stats socket {sock} level admin\n\ndefaults\n    mode tcp\n    log stdout format raw local0\n    option tcplog\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\n\
         frontend tls\n    bind 127.0.0.1:{port}\n    tcp-request inspect-delay {delay}\n    tcp-request content accept if {{ req.ssl_hello_type 1 }}\n    use_backend a if {{ req.ssl_sni -i a.example }}\n    use_backend b if {{ req_ssl_sni -i -m end .b.example }}\n    default_backend d\n\n\
         frontend strict\n    bind 127.0.0.1:{port2}\n    tcp-request inspect-delay {delay}\n    tcp-request connection reject if {{ src 127.0.0.2 }}\n    tcp-request content reject unless {{ req.ssl_hello_type 1 }}\n    default_backend d\n\n\
         backend a\n    server a {}\n\nbackend b\n    server b {}\n\nbackend d\n    server d {}\n",
        a.addr,
        b.addr,
        d.addr,
        sock = sock.display(),
    );
    let proc = Proc::portcullis(&cfg, lo(port));
    Setup {
        a,
        b,
        d,
        port,
        port2,
        sock,
        _dir: dir,
        proc,
    }
}

/// One FRONTEND row's column by name.
fn fe_stat(sock: &std::path::Path, fe: &str, col: &str) -> String {
    proxy::stat_table(sock, |px, sv| px == fe && sv == "FRONTEND", &[col])
        .pop()
        .expect("frontend row")
        .remove(0)
}

#[test]
fn sni_chooses_backend_and_client_sees_its_certificate() {
    let s = setup("5s");
    let px = lo(s.port);
    let (t, cert) = tls_via(px, Some("A.Example"), &[], Duration::ZERO);
    assert_eq!(
        (t.as_str(), &cert),
        ("A\n", &s.a.cert),
        "-i matches any case"
    );
    let (t, cert) = tls_via(px, Some("shop.b.example"), &[], Duration::ZERO);
    assert_eq!((t.as_str(), &cert), ("B\n", &s.b.cert));
    let (t, cert) = tls_via(px, None, &[], Duration::ZERO);
    assert_eq!((t.as_str(), &cert), ("D\n", &s.d.cert), "no SNI: default");
    let (t, cert) = tls_via(px, Some("b.example"), &[], Duration::ZERO);
    assert_eq!((t.as_str(), &cert), ("D\n", &s.d.cert), "-m end .b.example");
    // Split over TCP segments: inspection waits for the whole ClientHello.
    let (t, cert) = tls_via(
        px,
        Some("a.example"),
        &[1, 4, 30],
        Duration::from_millis(100),
    );
    assert_eq!((t.as_str(), &cert), ("A\n", &s.a.cert));
    let line = s
        .proc
        .wait_log(" tls a/a ", Duration::from_secs(5))
        .expect("log line");
    assert!(line.contains(" -- "), "{line}");
    // Five sessions, and the harness's probe of the port.
    assert_eq!(fe_stat(&s.sock, "tls", "stot"), "6");
    assert_eq!(fe_stat(&s.sock, "tls", "dreq"), "0");
}

#[test]
fn malformed_and_stalled_hellos_leave_others_served() {
    let s = setup("1s");
    let px = lo(s.port);
    // Stalled: connected, nothing sent. Routed to the default once inspect-delay expires.
    let stalled = TcpStream::connect(px).unwrap();
    // A ClientHello whose record announces more than will ever come.
    let mut partial = TcpStream::connect(px).unwrap();
    partial
        .write_all(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
        .unwrap();
    // Garbage in a handshake record, and a ClientHello with lengths past its end.
    let mut garbage = TcpStream::connect(px).unwrap();
    garbage
        .write_all(b"\x16\x03\x01\x00\x08\x01\x00\x00\x04\xff\xff\xff\xff")
        .unwrap();
    let mut hello = Vec::new();
    let name = ServerName::try_from("a.example").unwrap();
    rustls::ClientConnection::new(client_config(), name)
        .unwrap()
        .write_tls(&mut hello)
        .unwrap();
    let mut bad = hello.clone();
    bad[5 + 4 + 2 + 32] = 0xff; // session id length past the end
    let mut bad_conn = TcpStream::connect(px).unwrap();
    bad_conn.write_all(&bad).unwrap();
    // Meanwhile, good clients are served at once.
    let t0 = Instant::now();
    for _ in 0..5 {
        let (t, cert) = tls_via(px, Some("a.example"), &[], Duration::ZERO);
        assert_eq!((t.as_str(), &cert), ("A\n", &s.a.cert));
    }
    assert!(
        t0.elapsed() < Duration::from_millis(900),
        "{:?}",
        t0.elapsed()
    );
    // The stalled and partial ones go to the default backend once the delay expires, the
    // invalid ones at once: all four reach `d` (whose TLS server fails their handshakes) and
    // are logged when they end.
    std::thread::sleep(Duration::from_millis(1300));
    drop((stalled, partial, garbage, bad_conn));
    // Four, and the harness's probe of the port.
    assert!(
        backend::wait_until(Duration::from_secs(8), || {
            s.proc
                .log_lines()
                .iter()
                .filter(|l| l.contains(" tls d/d "))
                .count()
                == 5
        }),
        "{:?}",
        s.proc.log_lines()
    );
    // The stalled one waited for the whole delay: Tw (queue time, inspection included) >= 1s.
    let waited = s
        .proc
        .log_lines()
        .iter()
        .filter(|l| l.contains(" tls d/d "))
        .filter_map(|l| l.split(' ').nth(4)?.split('/').next()?.parse::<u64>().ok())
        .filter(|tw| *tw >= 1000)
        .count();
    assert_eq!(waited, 2, "{:?}", s.proc.log_lines());
    let (t, _) = tls_via(px, Some("x.b.example"), &[], Duration::ZERO);
    assert_eq!(t, "B\n");
}

#[test]
fn rejects_log_and_count_as_haproxy() {
    let s = setup("2s");
    let px = lo(s.port2);
    // Plain text: not a ClientHello, rejected at once (no waiting for the delay).
    let t0 = Instant::now();
    let mut c = TcpStream::connect(px).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut buf = [0u8; 16];
    assert!(matches!(c.read(&mut buf), Ok(0) | Err(_)));
    assert!(t0.elapsed() < Duration::from_millis(1500));
    let line = s
        .proc
        .wait_log(" PR ", Duration::from_secs(5))
        .expect("PR line");
    assert!(
        line.contains(" strict strict/<NOSRV> -1/-1/")
            && line.contains(" 0 PR ")
            && line.ends_with("/0/0/0 0/0"),
        "{line}"
    );
    // A ClientHello passes.
    let (t, cert) = tls_via(px, Some("a.example"), &[], Duration::ZERO);
    assert_eq!((t.as_str(), &cert), ("D\n", &s.d.cert));
    // `tcp-request connection reject`: closed at once, no log line, counted in dcon only.
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&SocketAddr::from(([127, 0, 0, 2], 0)).into())
        .unwrap();
    sock.connect(&px.into()).unwrap();
    let mut r: TcpStream = sock.into();
    r.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert!(matches!(r.read(&mut buf), Ok(0) | Err(_)));
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        s.proc
            .log_lines()
            .iter()
            .filter(|l| l.contains(" strict "))
            .count(),
        2,
        "{:?}",
        s.proc.log_lines()
    );
    assert_eq!(fe_stat(&s.sock, "strict", "dreq"), "1");
    assert_eq!(fe_stat(&s.sock, "strict", "dcon"), "1");
    assert_eq!(fe_stat(&s.sock, "strict", "dses"), "0");
    assert_eq!(fe_stat(&s.sock, "strict", "stot"), "2");
    assert_eq!(fe_stat(&s.sock, "strict", "conn_tot"), "3");
    // The rejected session's bytes were read: they count in bin.
    let bin: u64 = fe_stat(&s.sock, "strict", "bin").parse().unwrap();
    assert!(bin > 18, "{bin}");
}

/// A plain TCP server standing for a backend in the differential run: reads until EOF or a
/// short silence, then answers `<name> <bytes received>` and closes.
fn name_server(name: &'static str) -> SocketAddr {
    raw::counting_server(name, Duration::from_millis(700))
}

/// What one input produced: the answer the client got (empty when refused).
fn run_case(px: SocketAddr, src: [u8; 4], chunks: &[&[u8]], gap: Duration, fin: bool) -> String {
    let mut s = raw::connect_from(src, px, Duration::from_secs(6));
    s.set_nodelay(true).unwrap();
    for (i, c) in chunks.iter().enumerate() {
        if i > 0 {
            std::thread::sleep(gap);
        }
        if s.write_all(c).is_err() {
            return "refused".into();
        }
    }
    if fin {
        let _ = s.shutdown(std::net::Shutdown::Write);
    }
    let mut out = Vec::new();
    match s.read_to_end(&mut out) {
        Ok(_) if out.is_empty() => "closed".into(),
        Ok(_) => String::from_utf8_lossy(&out).into_owned(),
        Err(_) => "refused".into(),
    }
}

#[derive(Debug, PartialEq)]
struct Observed {
    answers: Vec<String>,
    /// `frontend backend/server term` of every log line, sorted.
    logs: Vec<String>,
    /// (frontend, stot, dreq, dcon, dses, conn_tot)
    stats: Vec<Vec<String>>,
}

fn differential_config(
    port: u16,
    port2: u16,
    sock: &std::path::Path,
    be: [SocketAddr; 3],
) -> String {
    format!(
        "global\n    stats socket {sock} level admin\n\ndefaults\n    mode tcp\n    log stdout format raw local0\n    option tcplog\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\n\
         frontend fe\n    bind 127.0.0.1:{port}\n    tcp-request inspect-delay 1s\n    tcp-request content accept if {{ req.ssl_hello_type 1 }}\n    use_backend a if {{ req.ssl_sni -i a.example }}\n    use_backend b if {{ req_ssl_sni -m dom b.example }}\n    default_backend d\n\n\
         frontend strict\n    bind 127.0.0.1:{port2}\n    tcp-request inspect-delay 1s\n    tcp-request connection reject if {{ src 127.0.0.2 }}\n    tcp-request content reject if {{ req.len gt 4 }} !{{ req.ssl_hello_type 1 }}\n    tcp-request content accept if {{ req.ssl_hello_type 1 }}\n    use_backend a if {{ req.ssl_sni -m end .example }}\n    default_backend d\n\n\
         backend a\n    server a {}\n\nbackend b\n    server b {}\n\nbackend d\n    server d {}\n",
        be[0],
        be[1],
        be[2],
        sock = sock.display(),
    )
}

/// An input: proxy port, client address, segments, gap between them, FIN after.
type Case<'a> = (SocketAddr, [u8; 4], Vec<&'a [u8]>, Duration, bool);

/// A rustls ClientHello (no SNI for None).
fn hello(sni: Option<&str>) -> Vec<u8> {
    let name = ServerName::try_from(sni.unwrap_or("127.0.0.1").to_string()).unwrap();
    let mut v = Vec::new();
    rustls::ClientConnection::new(client_config(), name)
        .unwrap()
        .write_tls(&mut v)
        .unwrap();
    v
}

fn observe(haproxy: bool, be: [SocketAddr; 3]) -> Option<Observed> {
    let (port, port2) = (free_port(), free_port());
    let dir = TempDir::new("sni-diff");
    let sock = dir.0.join("admin.sock");
    let cfg = differential_config(port, port2, &sock, be);
    let p = if haproxy {
        Proc::haproxy(&cfg, lo(port))?
    } else {
        Proc::portcullis(&cfg, lo(port))
    };
    let (ha, hb, hn) = (
        hello(Some("A.Example")),
        hello(Some("x.B.example")),
        hello(None),
    );
    let hb2 = hello(Some("b.example.org"));
    let lo_ = [127, 0, 0, 1];
    let z = Duration::ZERO;
    let (fe, st) = (lo(port), lo(port2));
    let cases: Vec<Case> = vec![
        (fe, lo_, vec![&ha], z, false),
        (fe, lo_, vec![&hb], z, false),
        (fe, lo_, vec![&hn], z, false),
        (fe, lo_, vec![&hb2], z, false),
        (
            fe,
            lo_,
            vec![&ha[..1], &ha[1..5], &ha[5..40], &ha[40..]],
            Duration::from_millis(80),
            false,
        ),
        (fe, lo_, vec![b"GET / HTTP/1.0\r\n\r\n"], z, false),
        (fe, lo_, vec![b"abc"], z, false),
        (
            fe,
            lo_,
            vec![b"\x16\x03\x01\x00\x05\x01\x00\x00\x01\x00"],
            z,
            false,
        ),
        (fe, lo_, vec![], z, false),
        (fe, lo_, vec![b"\x16\x03\x01\x02\x00\x01"], z, true),
        (fe, lo_, vec![&ha], z, true),
        (st, lo_, vec![b"GET / HTTP/1.0\r\n\r\n"], z, false),
        (st, lo_, vec![b"\x16\x03"], z, false),
        (st, lo_, vec![&ha], z, false),
        (st, [127, 0, 0, 2], vec![&ha], z, false),
    ];
    let answers: Vec<String> = cases
        .iter()
        .map(|(px, src, chunks, gap, fin)| run_case(*px, *src, chunks, *gap, *fin))
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    let mut logs: Vec<String> = p
        .log_lines()
        .iter()
        .filter(|l| l.contains('['))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            format!("{} {} {}", f[2], f[3], f[6])
        })
        .collect();
    logs.sort();
    let stats = proxy::stat_table(
        &sock,
        |_, sv| sv == "FRONTEND",
        &["pxname", "stot", "dreq", "dcon", "dses", "conn_tot"],
    );
    Some(Observed {
        answers,
        logs,
        stats,
    })
}

/// The same config and the same bytes on HAProxy 2.6 and portcullis: same backends chosen,
/// same bytes delivered, same log verdicts and counters.
#[test]
fn same_routing_as_haproxy() {
    let be = [name_server("A"), name_server("B"), name_server("D")];
    let Some(h) = observe(true, be) else { return };
    let p = observe(false, be).expect("portcullis");
    let n = |sni| hello(Some(sni)).len();
    let (a, b, none, b2) = (
        n("A.Example"),
        n("x.B.example"),
        hello(None).len(),
        n("b.example.org"),
    );
    // What HAProxy does, spelled out: SNI compared verbatim unless -i (x.B.example is not in
    // domain b.example, A.Example does not end with .example); `-m dom` matches whole labels
    // anywhere; non-TLS goes to the default at once; an incomplete record or nothing at all
    // waits for the delay (or the client's FIN); `req.len gt 4` waits while it is false.
    let want = [
        format!("A {a}"),
        format!("D {b}"),
        format!("D {none}"),
        format!("B {b2}"),
        format!("A {a}"),
        "D 18".into(),
        "D 3".into(),
        "D 10".into(),
        "D 0".into(),
        "D 6".into(),
        format!("A {a}"),
        "closed".into(),
        "D 2".into(),
        format!("D {a}"),
        "refused".into(),
    ];
    assert_eq!(h.answers, want, "HAProxy itself");
    assert_eq!(h.answers, p.answers);
    assert_eq!(h.logs, p.logs);
    assert_eq!(h.stats, p.stats);
}
