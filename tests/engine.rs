//! The engine with the real binary: bind forms (`unix@`, `fd@`), `maxconn` pausing accepts,
//! clean stop on SIGTERM/SIGINT, syslog over UDP.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use backend::{HttpNode, HttpOpts, free_port, lo};
use proxy::{Proc, TempDir, portcullis_command, read_response};

fn node(name: &str) -> HttpNode {
    HttpNode::start(
        SocketAddr::from(([127, 0, 1, 101], 0)),
        HttpOpts::named(name),
    )
    .expect("node")
}

fn cfg(bind: &str, server: SocketAddr, extra_global: &str) -> String {
    format!(
        "global\n    nbthread 2\n{extra_global}\ndefaults\n    mode http\n    log stdout format raw local0\n    option httplog\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend fe\n    bind {bind}\n    default_backend be\n\nbackend be\n    server s {server}\n"
    )
}

#[test]
fn unix_socket_bind_serves_http() {
    let n = node("unix");
    let dir = TempDir::new("unix");
    let path = dir.0.join("fe.sock");
    let port = free_port();
    // A second inet bind tells the harness when the proxy is up.
    let text = cfg(
        &format!("unix@{}\n    bind 127.0.0.1:{port}", path.display()),
        n.addr(),
        "",
    );
    let _p = Proc::portcullis(&text, lo(port));
    let mut s = UnixStream::connect(&path).expect("connect unix socket");
    s.write_all(b"GET /over-unix HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    assert!(out.starts_with("HTTP/1.1 200"), "{out}");
    assert!(out.contains("path=/over-unix"), "{out}");
}

#[test]
fn inherited_fd_bind_serves_http() {
    let n = node("fd");
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let fd = l.as_raw_fd();
    // The child must inherit it: clear close-on-exec (std sets it on every socket).
    // SAFETY: fcntl on a descriptor this test owns.
    assert_eq!(unsafe { libc::fcntl(fd, libc::F_SETFD, 0) }, 0);
    let dir = TempDir::new("fd");
    let path = dir.0.join("fd.cfg");
    std::fs::write(&path, cfg(&format!("fd@{fd}"), n.addr(), "")).unwrap();
    let mut child = portcullis_command(&["-db"], &path).spawn().expect("spawn");
    drop(l);
    let deadline = Instant::now() + Duration::from_secs(10);
    let r = loop {
        if let Ok(mut s) = TcpStream::connect(addr) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(b"GET /via-fd HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
                .unwrap();
            if let Some(r) = read_response(&mut s, false) {
                break r;
            }
        }
        assert!(
            Instant::now() < deadline,
            "no answer on the inherited socket"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(r.status, 200);
    assert!(r.text().contains("path=/via-fd"), "{}", r.text());
}

#[test]
fn maxconn_pauses_accepting_until_a_slot_frees() {
    let n = node("max");
    let port = free_port();
    let front = lo(port);
    let text = cfg(&format!("127.0.0.1:{port}"), n.addr(), "    maxconn 2\n");
    let p = Proc::portcullis(&text, front);
    std::thread::sleep(Duration::from_millis(200));
    // Two idle connections take both slots; a third is accepted by the kernel but not served.
    let a = TcpStream::connect(front).unwrap();
    let b = TcpStream::connect(front).unwrap();
    std::thread::sleep(Duration::from_millis(200));
    let mut c = TcpStream::connect(front).unwrap();
    c.set_read_timeout(Some(Duration::from_millis(700)))
        .unwrap();
    c.write_all(b"GET /third HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 64];
    let waited = c.read(&mut buf);
    assert!(waited.is_err(), "served beyond maxconn: {waited:?}");
    // Freeing one slot lets it through.
    drop(a);
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let r = read_response(&mut c, false).expect("served after a slot freed");
    assert_eq!(r.status, 200);
    drop(b);
    assert!(
        p.wait_log("\"GET /third HTTP/1.1\"", Duration::from_secs(5))
            .is_some()
    );
}

fn stop_with(signal: libc::c_int) {
    let n = node("stop");
    let port = free_port();
    let front = lo(port);
    let dir = TempDir::new("stop");
    let path = dir.0.join("s.cfg");
    std::fs::write(&path, cfg(&format!("127.0.0.1:{port}"), n.addr(), "")).unwrap();
    let mut child = portcullis_command(&["-db"], &path).spawn().expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(front).is_err() {
        assert!(Instant::now() < deadline, "not listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    // An idle keep-alive client and pending accepts must not hold the stop.
    let _idle = TcpStream::connect(front).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, signal) }, 0);
    let stopped = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(
            stopped.elapsed() < Duration::from_secs(5),
            "did not stop within 5 s"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
    assert!(
        TcpStream::connect(front).is_err(),
        "still listening after stop"
    );
}

#[test]
fn sigterm_stops_cleanly() {
    stop_with(libc::SIGTERM);
}

#[test]
fn sigint_stops_cleanly() {
    stop_with(libc::SIGINT);
}

#[test]
fn syslog_over_udp_with_haproxy_header() {
    let n = node("syslog");
    let udp = UdpSocket::bind("127.0.0.1:0").unwrap();
    udp.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let port = free_port();
    let front = lo(port);
    let text = format!(
        "global\n    log {} local0\n\ndefaults\n    mode http\n    log global\n    option httplog\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n    server s {}\n",
        udp.local_addr().unwrap(),
        n.addr()
    );
    let _p = Proc::portcullis(&text, front);
    let r = proxy::get(front, "/logged");
    assert_eq!(r.status, 200);
    let mut buf = [0u8; 2048];
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let n = udp.recv(&mut buf).expect("a syslog datagram");
        let msg = String::from_utf8_lossy(&buf[..n]).to_string();
        if !msg.contains("/logged") {
            assert!(Instant::now() < deadline);
            continue;
        }
        // local0.info = 16*8+6 = 134; HAProxy's default `local` format: no hostname.
        assert!(msg.starts_with("<134>"), "{msg}");
        assert!(msg.contains(" haproxy["), "{msg}");
        assert!(msg.contains("fe be/s ") && msg.contains(" 200 "), "{msg}");
        break;
    }
}

#[test]
fn daemon_mode_writes_the_pidfile() {
    let n = node("daemon");
    let port = free_port();
    let front = lo(port);
    let dir = TempDir::new("daemon");
    let path = dir.0.join("d.cfg");
    let pidfile = dir.0.join("portcullis.pid");
    std::fs::write(&path, cfg(&format!("127.0.0.1:{port}"), n.addr(), "")).unwrap();
    // -D returns at once: the parent exits 0 and the daemon keeps serving.
    let status = portcullis_command(
        &[OsStr::new("-D"), OsStr::new("-p"), pidfile.as_os_str()],
        &path,
    )
    .status()
    .expect("run");
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let pid: i32 = loop {
        if let Some(p) = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|t| t.trim().parse().ok())
        {
            break p;
        }
        assert!(Instant::now() < deadline, "no pidfile");
        std::thread::sleep(Duration::from_millis(20));
    };
    let served = loop {
        if let Ok(mut s) = TcpStream::connect(front) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            s.write_all(b"GET /d HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
                .unwrap();
            break read_response(&mut s, false);
        }
        assert!(Instant::now() < deadline, "daemon not listening");
        std::thread::sleep(Duration::from_millis(20));
    };
    // SAFETY: stopping the daemon this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert_eq!(served.map(|r| r.status), Some(200));
    let deadline = Instant::now() + Duration::from_secs(5);
    while pidfile.exists() {
        assert!(Instant::now() < deadline, "pidfile left behind after stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// SIGUSR1 is HAProxy's soft stop: listeners close at once, sessions in flight finish, then the
/// process exits.
#[test]
fn sigusr1_soft_stop_lets_requests_finish() {
    let n = node("soft");
    let port = free_port();
    let front = lo(port);
    let dir = TempDir::new("soft");
    let path = dir.0.join("s.cfg");
    std::fs::write(&path, cfg(&format!("127.0.0.1:{port}"), n.addr(), "")).unwrap();
    let mut child = portcullis_command(&["-db"], &path).spawn().expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(10);
    while TcpStream::connect(front).is_err() {
        assert!(Instant::now() < deadline, "not listening");
        std::thread::sleep(Duration::from_millis(20));
    }
    let slow = std::thread::spawn(move || proxy::get(front, "/slow?ms=1500").status);
    // An idle keep-alive client must not hold the stop.
    let mut idle = TcpStream::connect(front).unwrap();
    idle.write_all(b"GET /k HTTP/1.1\r\nHost: a\r\n\r\n")
        .unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    assert_eq!(read_response(&mut idle, false).map(|r| r.status), Some(200));
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: signalling our own child.
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGUSR1) }, 0);
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        TcpStream::connect(front).is_err(),
        "still accepting after soft stop"
    );
    assert!(
        child.try_wait().unwrap().is_none(),
        "exited before its session ended"
    );
    let mut rest = Vec::new();
    assert_eq!(
        idle.read_to_end(&mut rest).map(|_| rest.len()).ok(),
        Some(0),
        "idle keep-alive closed"
    );
    assert_eq!(slow.join().expect("client"), 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    let status = loop {
        if let Some(st) = child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "did not exit once idle");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "{status}");
}
