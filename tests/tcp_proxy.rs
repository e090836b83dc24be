//! `mode tcp`: the userspace relay with real sockets: 100 MB both ways intact, half-close
//! propagated, tcplog line, refused server.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::time::Duration;

use backend::{RefusingPort, TcpEcho, free_port, lo};
use proxy::Proc;

fn cfg(port: u16, server: SocketAddr, extra: &str) -> String {
    format!(
        "global\n    nbthread 2\n\ndefaults\n    mode tcp\n    log stdout format raw local0\n    timeout connect 2s\n    timeout client 20s\n    timeout server 20s\n\nfrontend fe\n    bind 127.0.0.1:{port}\n{extra}    default_backend be\n\nbackend be\n    retries 1\n    server echo {server}\n"
    )
}

#[test]
fn hundred_megabytes_both_ways_with_half_close() {
    let echo = TcpEcho::start(SocketAddr::from(([127, 0, 1, 91], 0))).expect("echo");
    let port = free_port();
    let p = Proc::portcullis(&cfg(port, echo.addr(), "    option tcplog\n"), lo(port));
    let mut s = TcpStream::connect(lo(port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let size: usize = 100 * 1024 * 1024;
    let mut reader = s.try_clone().unwrap();
    let rx = std::thread::spawn(move || {
        let mut sum = backend::Fnv1a::new();
        let mut total = 0usize;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            match reader.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    sum.update(&buf[..n]);
                    total += n;
                }
                Err(e) => panic!("read after {total} bytes: {e}"),
            }
        }
        (total, sum.finish())
    });
    let block: Vec<u8> = (0..65536u32).map(|i| (i * 7 % 253) as u8).collect();
    let sum = backend::write_repeated(&mut s, &block, size).unwrap();
    // Half-close: the echo sees EOF through the proxy, finishes, and closes its side; we must
    // still receive every byte, then EOF.
    s.shutdown(Shutdown::Write).unwrap();
    let (got, got_sum) = rx.join().expect("reader");
    assert_eq!(got, size);
    assert_eq!(got_sum, sum);
    let line = p
        .wait_log(&format!(" {size} -- "), Duration::from_secs(5))
        .unwrap_or_else(|| panic!("tcplog line: {:?}", p.log_lines()));
    assert!(line.contains(" fe be/echo "), "{line}");
}

#[test]
fn refused_server_logs_sc_and_closes() {
    let dead = RefusingPort::new().expect("refusing port");
    let port = free_port();
    let p = Proc::portcullis(&cfg(port, dead.addr(), "    option tcplog\n"), lo(port));
    let mut s = TcpStream::connect(lo(port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = [0u8; 16];
    assert_eq!(s.read(&mut buf).unwrap_or(0), 0, "closed without data");
    let line = p
        .wait_log(" SC ", Duration::from_secs(5))
        .expect("SC tcplog line");
    assert!(
        line.contains(" fe be/echo ") && line.ends_with(" 0/0") && line.contains("/1 0/0"),
        "{line}"
    );
}

#[test]
fn connect_from_line_without_log_option() {
    let echo = TcpEcho::start(SocketAddr::from(([127, 0, 1, 92], 0))).expect("echo");
    let port = free_port();
    let p = Proc::portcullis(&cfg(port, echo.addr(), ""), lo(port));
    let mut s = TcpStream::connect(lo(port)).expect("connect");
    s.write_all(b"x").unwrap();
    let line = p
        .wait_log(
            &format!("to 127.0.0.1:{port} (fe/TCP)"),
            Duration::from_secs(5),
        )
        .expect("Connect from line");
    assert!(line.starts_with("Connect from 127.0.0.1:"), "{line}");
}

#[test]
fn client_fin_timeout_ends_a_half_closed_session() {
    // A server that answers then half-closes, while the client keeps its side open.
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let srv = l.local_addr().unwrap();
    l.set_nonblocking(true).unwrap();
    let t = std::thread::spawn(move || {
        let end = std::time::Instant::now() + Duration::from_secs(4);
        let mut held = Vec::new();
        while std::time::Instant::now() < end {
            match l.accept() {
                Ok((mut s, _)) => {
                    let _ = s.write_all(b"bye");
                    let _ = s.shutdown(Shutdown::Write);
                    held.push(s);
                }
                Err(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    });
    let port = free_port();
    let p = Proc::portcullis(
        &cfg(
            port,
            srv,
            "    option tcplog\n    timeout client-fin 300ms\n",
        ),
        lo(port),
    );
    let mut c = TcpStream::connect(lo(port)).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got, b"bye");
    let line = p
        .wait_log(" cD ", Duration::from_secs(3))
        .unwrap_or_else(|| panic!("cD line: {:?}", p.log_lines()));
    assert!(line.contains(" fe be/echo "), "{line}");
    drop(c);
    t.join().unwrap();
}
