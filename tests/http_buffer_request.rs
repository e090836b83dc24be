//! `option http-buffer-request` beside HAProxy 2.6: the server hears nothing of a request until
//! its body is all there, then gets it in one go; a body that does not come whole within
//! `timeout http-request` is a 408.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backend::{free_port, lo};
use proxy::Proc;

/// A server that records what it reads and answers each whole request (`content-length: 10`
/// body) with an empty 200.
fn server() -> (SocketAddr, Arc<Mutex<Vec<u8>>>) {
    let l = TcpListener::bind(lo(0)).expect("bind");
    let addr = l.local_addr().expect("addr");
    let got = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&got);
    std::thread::spawn(move || {
        for c in l.incoming() {
            let Ok(mut c) = c else { break };
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || {
                let _ = c.set_read_timeout(Some(Duration::from_secs(10)));
                let mut b = [0u8; 4096];
                let mut mine = Vec::new();
                loop {
                    match c.read(&mut b) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            seen.lock().unwrap().extend_from_slice(&b[..n]);
                            mine.extend_from_slice(&b[..n]);
                        }
                    }
                    let whole = mine
                        .windows(4)
                        .position(|w| w == b"\r\n\r\n")
                        .is_some_and(|i| mine.len() >= i + 4 + 10);
                    if whole {
                        mine.clear();
                        let r = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
                        if c.write_all(r).is_err() {
                            break;
                        }
                    }
                }
            });
        }
    });
    (addr, got)
}

fn status(c: &mut TcpStream) -> String {
    let _ = c.set_read_timeout(Some(Duration::from_secs(5)));
    let mut b = [0u8; 1024];
    let n = c.read(&mut b).unwrap_or(0);
    let text = String::from_utf8_lossy(&b[..n]).into_owned();
    text.lines().next().unwrap_or_default().to_string()
}

/// The status, termination state and request line of each log line (`%ST %tsc %{{+Q}}r`).
fn logged(p: &Proc, n: usize) -> Vec<String> {
    for _ in 0..100 {
        let lines = p.log_lines();
        if lines.len() >= n {
            return lines;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    p.log_lines()
}

/// One run: (what the server had before the body's end, the status then, the status of a
/// body left unfinished, the log lines).
type Seen = (usize, String, String, Vec<String>);

fn run(start: impl Fn(&str, SocketAddr) -> Option<Proc>) -> Option<Seen> {
    let (srv, got) = server();
    let port = free_port();
    let cfg = format!(
        "defaults\n    mode http\n    option http-buffer-request\n    option dontlognull\n    timeout connect 2s\n    \
         log stdout format raw local0\n    log-format \"%ST %tsc %{{+Q}}r\"\n    \
         timeout client 5s\n    timeout server 5s\n    timeout http-request 1s\n\
         listen l\n    bind 127.0.0.1:{port}\n    server s1 {srv}\n"
    );
    let p = start(&cfg, lo(port))?;
    let head = b"POST /p HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\n";
    let mut c = TcpStream::connect(lo(port)).expect("connect");
    c.write_all(head).expect("head");
    c.write_all(b"12345").expect("first half");
    std::thread::sleep(Duration::from_millis(300));
    let early = got.lock().unwrap().len();
    c.write_all(b"67890").expect("second half");
    let whole = status(&mut c);
    let mut late = TcpStream::connect(lo(port)).expect("connect");
    late.write_all(head).expect("head");
    late.write_all(b"123").expect("a third");
    let cut = status(&mut late);
    Some((early, whole, cut, logged(&p, 2)))
}

#[test]
fn the_body_is_awaited_before_the_server_hears_of_it() {
    let ours = run(|cfg, at| Some(Proc::portcullis(cfg, at))).expect("ran");
    let lines = vec![
        "200 ---- \"POST /p HTTP/1.1\"".to_string(),
        "408 cR-- \"POST /p HTTP/1.1\"".to_string(),
    ];
    let want = (
        0,
        "HTTP/1.1 200 OK".to_string(),
        "HTTP/1.1 408 Request Time-out".to_string(),
        lines,
    );
    assert_eq!(ours, want);
    if let Some(theirs) = run(Proc::haproxy) {
        assert_eq!(ours, theirs);
    }
}
