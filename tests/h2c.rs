//! `bind … proto h2`: HTTP/2 with prior knowledge on a plain listener (h2c), beside an HTTP/1
//! bind of the same frontend, with real clients (curl, h2load).

#[path = "support/backend.rs"]
mod backend;
#[path = "support/h2client.rs"]
mod h2client;
#[path = "support/proxy.rs"]
mod proxy;

use std::process::Command;

use backend::{HttpNode, HttpOpts, free_port, lo};
use proxy::Proc;

fn curl(args: &[&str], url: &str) -> (bool, String) {
    let out = Command::new("curl")
        .args([
            "-s",
            "--max-time",
            "10",
            "-w",
            "\n%{http_version} %{http_code}",
        ])
        .args(args)
        .arg(url)
        .output()
        .expect("curl is installed by cargo xtask setup");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn h2_prior_knowledge_on_a_plain_bind() {
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let (h2, h1) = (free_port(), free_port());
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{h2} proto h2\n    bind 127.0.0.1:{h1}\n    default_backend b\n\
         backend b\n    server s1 {}\n",
        node.addr()
    );
    let _p = Proc::portcullis(&cfg, lo(h1));
    let (ok, out) = curl(
        &["--http2-prior-knowledge"],
        &format!("http://127.0.0.1:{h2}/x"),
    );
    assert!(ok, "{out}");
    assert!(out.ends_with("\n2 200"), "{out}");
    assert!(out.contains("node=n1 path=/x"), "{out}");
    // The other bind of the same frontend stays HTTP/1.
    let (ok, out) = curl(&["--http1.1"], &format!("http://127.0.0.1:{h1}/y"));
    assert!(ok && out.ends_with("\n1.1 200"), "{out}");
    // An HTTP/1 request on the h2 bind is no HTTP/2 preface: the connection is refused.
    let (_, out) = curl(&["--http1.1"], &format!("http://127.0.0.1:{h2}/z"));
    assert!(!out.ends_with(" 200"), "{out}");
    // Many streams over few connections.
    let out = Command::new("h2load")
        .args(["-n", "2000", "-c", "4", "-m", "10"])
        .arg(format!("http://127.0.0.1:{h2}/"))
        .output()
        .expect("h2load is installed by cargo xtask setup");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed"),
        "{text}"
    );
    let rec = node
        .requests()
        .into_iter()
        .find(|r| r.target == "/x")
        .expect("the h2 request");
    assert!(rec.head.starts_with("GET /x HTTP/1.1\r\n"), "{}", rec.head);
}

/// Sends GET requests for `paths` one after another on one HTTP/2 connection (h2c); the bodies.
fn sequential_gets(port: u16, paths: &[&str]) -> Vec<String> {
    h2client::h2_exchange(lo(port), |client| async move {
        let mut bodies = Vec::new();
        for p in paths {
            let mut client = client.clone().ready().await.expect("ready");
            let req = http::Request::get(format!("http://127.0.0.1{p}"))
                .body(())
                .expect("request");
            let (resp, _) = client.send_request(req, true).expect("send");
            let mut body = resp.await.expect("response").into_body();
            let data = h2client::read_body(&mut body).await;
            bodies.push(String::from_utf8_lossy(&data).into_owned());
        }
        bodies
    })
}

/// `sess.*` variables belong to the connection: a later stream of the same HTTP/2 connection
/// reads what an earlier one set, as in HAProxy 2.6 (streams share their session).
#[test]
fn sess_variables_are_shared_by_a_connections_streams_as_haproxy() {
    let run = |port: u16, start: &dyn Fn(&str) -> Option<Proc>| {
        let cfg = format!(
            "defaults\n    mode http\n    timeout connect 1s\n    timeout client 5s\n    timeout server 5s\n\
             frontend fe\n    bind 127.0.0.1:{port} proto h2\n\
             \x20   http-request set-var(sess.first) path if !{{ var(sess.first) -m found }}\n\
             \x20   http-request set-var(sess.n) int(0) if !{{ var(sess.n) -m found }}\n\
             \x20   http-request set-var(sess.n) var(sess.n),add(1)\n\
             \x20   http-request return status 200 content-type text/plain lf-string \"first=%[var(sess.first)] n=%[var(sess.n)] path=%[path]\"\n"
        );
        let _p = start(&cfg)?;
        Some(sequential_gets(port, &["/a", "/b", "/c"]))
    };
    let p = free_port();
    let ours = run(p, &|c| Some(Proc::portcullis(c, lo(p)))).expect("portcullis");
    assert_eq!(
        ours,
        [
            "first=/a n=1 path=/a",
            "first=/a n=2 path=/b",
            "first=/a n=3 path=/c"
        ]
    );
    let h = free_port();
    if let Some(theirs) = run(h, &|c| Proc::haproxy(c, lo(h))) {
        assert_eq!(ours, theirs, "HAProxy 2.6 differs");
    }
}

/// A client that opens no flow-control window gets no response body and keeps nothing open:
/// the stream waits at most `timeout client` for a window, then the idle connection is closed
/// (found by the `h2_front` fuzz target: SETTINGS_INITIAL_WINDOW_SIZE 0 and no WINDOW_UPDATE
/// once kept the connection forever).
#[test]
fn a_client_that_opens_no_window_is_cut_off_at_timeout_client() {
    use std::io::{Read, Write};
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    timeout connect 1s\n    timeout client 1s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port} proto h2\n\
         \x20   http-request return status 200 content-type text/plain string hello\n"
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    let mut c = std::net::TcpStream::connect(lo(port)).expect("connect");
    c.set_read_timeout(Some(std::time::Duration::from_secs(1)))
        .expect("timeout");
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    // SETTINGS_INITIAL_WINDOW_SIZE = 0.
    hello.extend(frame(4, 0, 0, &[0, 4, 0, 0, 0, 0]));
    // GET http://a/ (static-table method, scheme and path; literal authority).
    hello.extend(frame(1, 0x5, 1, &[0x82, 0x86, 0x84, 0x41, 1, b'a']));
    c.write_all(&hello).expect("write");
    let start = std::time::Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let closed = loop {
        match c.read(&mut buf) {
            Ok(0) => break true,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(_) => break true,
        }
        if start.elapsed() > std::time::Duration::from_secs(15) {
            break false;
        }
    };
    assert!(closed, "the connection was kept open: {got:?}");
    // The head went out; no DATA frame did (the window stayed shut).
    let kinds: Vec<u8> = frames_in(&got).into_iter().map(|(k, _)| k).collect();
    assert!(kinds.contains(&1), "no HEADERS: {kinds:?}");
    assert!(!kinds.contains(&0), "DATA despite a shut window: {kinds:?}");
}

/// With `option http-buffer-request`, a stream reset while its body is awaited (a DATA frame
/// longer than its `content-length`, arriving after the HEADERS) reaches no server, as in HAProxy
/// (the `h2_to_h1.vtc` case, which depended on both frames arriving in one read).
#[test]
fn a_stream_reset_while_its_body_is_buffered_reaches_no_server() {
    use std::io::{Read, Write};
    let node = HttpNode::start(lo(0), HttpOpts::named("n1")).expect("node");
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    option http-buffer-request\n    timeout connect 1s\n\
         \x20   timeout client 2s\n    timeout server 5s\n\
         frontend fe\n    bind 127.0.0.1:{port} proto h2\n    default_backend b\n\
         backend b\n    server s1 {}\n",
        node.addr()
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    let mut c = std::net::TcpStream::connect(lo(port)).expect("connect");
    c.set_read_timeout(Some(std::time::Duration::from_secs(5)))
        .expect("timeout");
    let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    hello.extend(frame(4, 0, 0, &[]));
    // POST http://a/ with content-length: 2 (static-table name 28), the body still to come.
    let block = [0x83, 0x86, 0x84, 0x41, 1, b'a', 0x0f, 0x0d, 1, b'2'];
    hello.extend(frame(1, 0x4, 1, &block));
    c.write_all(&hello).expect("write");
    // The DATA comes in a later read.
    std::thread::sleep(std::time::Duration::from_millis(300));
    c.write_all(&frame(0, 0x1, 1, b"this is sent and ignored"))
        .expect("write");
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let rst = loop {
        let found = frames_in(&got).contains(&(3, 1));
        if found || std::time::Instant::now() > deadline {
            break found;
        }
        match c.read(&mut buf) {
            Ok(0) | Err(_) => {}
            Ok(n) => got.extend_from_slice(&buf[..n]),
        }
    };
    assert!(rst, "no RST_STREAM on stream 1: {got:?}");
    std::thread::sleep(std::time::Duration::from_millis(300));
    assert_eq!(node.connections(), 0, "the request reached the server");
}

/// A raw HTTP/2 frame, for clients that send what a library would not.
fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// The (type, stream) of each whole frame at the start of `b`.
fn frames_in(mut b: &[u8]) -> Vec<(u8, u32)> {
    let mut v = Vec::new();
    while b.len() >= 9 {
        let len = (usize::from(b[0]) << 16) | (usize::from(b[1]) << 8) | usize::from(b[2]);
        v.push((
            b[3],
            u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        ));
        b = &b[(9 + len).min(b.len())..];
    }
    v
}
