//! `mode tcp` through the kernel splice (sockmap): 100 MB each way with equal sha256, close from
//! either side with no byte lost, the SOCKHASH empty after 1000 short connections, a server
//! put in maintenance with `on-marked-down shutdown-sessions` ending its spliced sessions, a slow
//! reader keeping the bytes in flight bounded, and `portcullis-relay userspace` on a frontend
//! (`relay_auto.rs` tests the default, `portcullis-relay auto`).
//!
//! Each test reads the splice's counters with `show splice` (a portcullis admin command) and
//! asserts how many bytes the kernel redirected. They need root (CAP_BPF, CAP_NET_ADMIN): without
//! it they say so and pass without running.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/splice.rs"]
mod splice_cli;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use backend::{TcpEcho, free_port, lo, wait_until};
use proxy::{Proc, TempDir};
use splice_cli::{Setup, cli, counter, delta, echo64, kernel_counters, root, splice, stat_bytes};

const MB: usize = 1024 * 1024;
/// The size of a [`block`].
const BLOCK: usize = 64 * 1024;
/// The stream clients send (a [`Peer`] checks it).
const CLIENT_SEED: u64 = 1;

/// A `mode tcp` frontend on a fresh port to `server` (two workers), with `fe`/`be` extra lines.
fn start(server: SocketAddr, fe: &str, be: &str) -> Setup {
    splice_cli::start(2, server, fe, be)
}

/// Deterministic bytes: block `i` of a stream seeded `seed`.
fn block(seed: u64, i: u64) -> Vec<u8> {
    let mut x = seed ^ i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x2545_f491_4f6c_dd1d;
    (0..BLOCK)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Writes `size` bytes of stream `seed`; returns their sha256.
fn send(w: &mut impl Write, seed: u64, size: usize) -> std::io::Result<Vec<u8>> {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut left = size;
    let mut i = 0;
    while left > 0 {
        let b = block(seed, i);
        let n = left.min(b.len());
        w.write_all(&b[..n])?;
        ctx.update(&b[..n]);
        left -= n;
        i += 1;
    }
    Ok(ctx.finish().as_ref().to_vec())
}

/// Reads to end of stream: (bytes, sha256). With the `seed` of the stream expected, says on
/// stderr where the bytes first differ from it (a failure then shows what was lost where).
fn recv(r: &mut impl Read, seed: Option<u64>) -> (usize, Vec<u8>) {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0;
    let mut expected = Vec::new();
    let mut first_diff = None;
    loop {
        match r.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                ctx.update(&buf[..n]);
                if let (Some(seed), None) = (seed, first_diff) {
                    // Block by block: `expected` holds the block the stream is in.
                    let mut k = 0;
                    while k < n && first_diff.is_none() {
                        let at = total + k;
                        let (blk, off) = (at / BLOCK, at % BLOCK);
                        if off == 0 || expected.is_empty() {
                            expected = block(seed, blk as u64);
                        }
                        let len = (n - k).min(BLOCK - off);
                        let (got, want) = (&buf[k..k + len], &expected[off..off + len]);
                        if let Some(d) = got.iter().zip(want).position(|(a, b)| a != b) {
                            first_diff = Some(at + d);
                        }
                        k += len;
                    }
                }
                total += n;
            }
            Err(e) => panic!("read after {total} bytes: {e}"),
        }
    }
    if let (Some(seed), Some(at)) = (seed, first_diff) {
        eprintln!("stream {seed}: {total} bytes received, first difference at offset {at}");
    }
    (total, ctx.finish().as_ref().to_vec())
}

/// A server that, per connection, waits for one "go" byte from the client (so that the harness's
/// probe connection, which sends nothing, is ignored), then sends `size` bytes (stream `seed`)
/// and shuts its write side (or closes at once with `close`), while reading what comes until end
/// of stream. Reports (received bytes after "go", their sha256, sha256 of what it sent).
struct Peer {
    addr: SocketAddr,
    seed: u64,
    done: std::sync::mpsc::Receiver<PeerResult>,
}

/// What a [`Peer`] connection received (bytes, sha256) and the sha256 of what it sent.
type PeerResult = (usize, Vec<u8>, Vec<u8>);

impl Peer {
    fn start(size: usize, seed: u64, close: bool) -> Peer {
        let l = TcpListener::bind("127.0.1.61:0").expect("bind");
        let addr = l.local_addr().unwrap();
        let (tx, done) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(mut s) = s else { return };
                let tx = tx.clone();
                std::thread::spawn(move || {
                    if !go(&mut s) {
                        return;
                    }
                    let mut r = s.try_clone().unwrap();
                    let reader = std::thread::spawn(move || recv(&mut r, Some(CLIENT_SEED)));
                    let sent = send(&mut s, seed, size).unwrap_or_default();
                    if close {
                        // The reader's clone keeps the socket open: shut both ways so the FIN
                        // leaves now, not at the proxy's timeout.
                        let _ = s.shutdown(Shutdown::Both);
                        drop(s);
                        let _ = tx.send((0, Vec::new(), sent));
                        return;
                    }
                    let _ = s.shutdown(Shutdown::Write);
                    let (n, sum) = reader.join().unwrap();
                    let _ = tx.send((n, sum, sent));
                });
            }
        });
        Peer { addr, seed, done }
    }
}

/// Reads the client's "go" byte; false for a connection that ends without it.
fn go(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 1];
    matches!(s.read(&mut b), Ok(1))
}

/// A client connection through the proxy that has sent its "go" byte.
fn client(port: u16) -> TcpStream {
    let mut c = TcpStream::connect(lo(port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    c.write_all(b"g").unwrap();
    c
}

/// 100 MB each way through one spliced session; returns (client got, client sum, peer result).
fn both_ways(st: &Setup, peer: &Peer, size: usize) -> (usize, Vec<u8>, Vec<u8>, PeerResult) {
    let mut c = client(st.port);
    let mut r = c.try_clone().unwrap();
    let seed = peer.seed;
    let reader = std::thread::spawn(move || recv(&mut r, Some(seed)));
    let sent = send(&mut c, CLIENT_SEED, size).expect("send");
    c.shutdown(Shutdown::Write).unwrap();
    let (got, sum) = reader.join().unwrap();
    let peer = peer
        .done
        .recv_timeout(Duration::from_secs(60))
        .expect("peer done");
    (got, sum, sent, peer)
}

#[test]
fn hundred_megabytes_each_way_in_the_kernel() {
    if !root() {
        return;
    }
    let size = 100 * MB;
    let peer = Peer::start(size, 2, false);
    // A limit above the transfer and no bulk rule: every byte stays in the kernel.
    let st = start(
        peer.addr,
        "",
        "    portcullis-relay kernel max-unacked 1g bulk-rate 0\n",
    );
    let before = kernel_counters(&st.sock);
    let (got, sum, sent, (peer_got, peer_sum, peer_sent)) = both_ways(&st, &peer, size);
    assert_eq!((got, peer_got), (size, size));
    assert_eq!(sum, peer_sent, "server to client intact");
    assert_eq!(peer_sum, sent, "client to server intact");
    let line =
        st.p.wait_log(&format!(" {size} -- "), Duration::from_secs(5))
            .unwrap_or_else(|| panic!("tcplog line: {:?}", st.p.log_lines()));
    assert!(line.contains(" fe be/srv "), "{line}");
    let after = kernel_counters(&st.sock);
    assert_eq!(
        delta(&after, &before, "RedirectedBytes"),
        2 * size as u64 + 1
    );
    assert_eq!(delta(&after, &before, "PassedBytes"), 0);
    assert_eq!(delta(&after, &before, "Sessions"), 1);
    assert_eq!(counter(&after, "SockhashEntries"), 0);
}

#[test]
fn hundred_megabytes_each_way_with_the_default_handover() {
    if !root() {
        return;
    }
    // The defaults (max-unacked 4 MB, bulk-rate 64 MB/s): a bulk direction moves to userspace
    // mid-stream; no byte may be lost or reordered at the handover, and kernel + userspace bytes
    // add up.
    let size = 100 * MB;
    let peer = Peer::start(size, 3, false);
    let st = start(peer.addr, "", "    portcullis-relay kernel\n");
    let before = kernel_counters(&st.sock);
    let (got, sum, sent, (peer_got, peer_sum, peer_sent)) = both_ways(&st, &peer, size);
    assert_eq!(
        (got, peer_got),
        (size, size),
        "{:?}",
        st.p.stderr.lock().unwrap()
    );
    assert_eq!(sum, peer_sent, "server to client intact");
    assert_eq!(peer_sum, sent, "client to server intact");
    st.p.wait_log(&format!(" {size} -- "), Duration::from_secs(5))
        .unwrap_or_else(|| panic!("tcplog line: {:?}", st.p.log_lines()));
    let after = kernel_counters(&st.sock);
    let kernel = delta(&after, &before, "RedirectedBytes");
    let user = delta(&after, &before, "PassedBytes");
    assert!(kernel > 0, "the kernel carried the start");
    assert!(user > 0, "the bulk rule moved the rest to userspace");
    assert_eq!(kernel + user, 2 * size as u64 + 1);
    eprintln!(
        "kernel {kernel} B, userspace {user} B, fallbacks {}",
        delta(&after, &before, "Fallbacks")
    );
}

#[test]
fn close_from_either_side_loses_nothing() {
    if !root() {
        return;
    }
    // The server sends 30 MB and closes at once: the FIN reaches the proxy while most of it may
    // still be queued in the kernel.
    let size = 30 * MB;
    let peer = Peer::start(size, 4, true);
    let st = start(
        peer.addr,
        "",
        "    portcullis-relay kernel max-unacked 1g bulk-rate 0\n",
    );
    let before = kernel_counters(&st.sock);
    let mut c = client(st.port);
    let (got, sum) = recv(&mut c, None);
    let (_, _, peer_sent) = peer.done.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(
        got,
        size,
        "{:?} {:?}",
        st.p.log_lines(),
        st.p.stderr.lock().unwrap()
    );
    assert_eq!(sum, peer_sent);
    drop(c);
    st.p.wait_log(&format!(" {size} "), Duration::from_secs(5))
        .unwrap_or_else(|| panic!("tcplog line: {:?}", st.p.log_lines()));

    // The client sends 30 MB and closes; the server reads all of it, then answers and closes.
    let peer2 = Peer::start(MB, 5, false);
    let st2 = start(
        peer2.addr,
        "",
        "    portcullis-relay kernel max-unacked 1g bulk-rate 0\n",
    );
    let before2 = kernel_counters(&st2.sock);
    let mut c = client(st2.port);
    let mut r = c.try_clone().unwrap();
    let reader = std::thread::spawn(move || recv(&mut r, None));
    let sent = send(&mut c, CLIENT_SEED, size).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let (peer_got, peer_sum, peer_sent) = peer2.done.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(peer_got, size);
    assert_eq!(peer_sum, sent);
    let (got, sum) = reader.join().unwrap();
    assert_eq!(got, MB);
    assert_eq!(sum, peer_sent);
    let after = kernel_counters(&st.sock);
    assert_eq!(delta(&after, &before, "RedirectedBytes"), size as u64 + 1);
    let after2 = kernel_counters(&st2.sock);
    assert_eq!(
        delta(&after2, &before2, "RedirectedBytes"),
        (size + MB) as u64 + 1
    );
}

#[test]
fn thousand_short_connections_leave_the_sockhash_empty() {
    if !root() {
        return;
    }
    let echo = TcpEcho::start(SocketAddr::from(([127, 0, 1, 62], 0))).expect("echo");
    let st = start(echo.addr(), "", "    portcullis-relay kernel\n");
    let before = kernel_counters(&st.sock);
    let port = st.port;
    let workers: Vec<_> = (0..4)
        .map(|w| {
            std::thread::spawn(move || {
                for i in 0..250u32 {
                    let mut c = TcpStream::connect(lo(port)).expect("connect");
                    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
                    let msg = format!("{w:02}-{i:04}-").repeat(10);
                    c.write_all(msg.as_bytes()).unwrap();
                    let mut back = vec![0u8; msg.len()];
                    c.read_exact(&mut back).unwrap();
                    assert_eq!(back, msg.as_bytes());
                }
            })
        })
        .collect();
    for w in workers {
        w.join().expect("client");
    }
    assert!(
        wait_until(Duration::from_secs(10), || {
            let s = splice(&st.sock);
            counter(&s, "ActiveSessions") == 0 && counter(&s, "SockhashEntries") == 0
        }),
        "{:?}",
        splice(&st.sock)
    );
    let after = kernel_counters(&st.sock);
    assert_eq!(delta(&after, &before, "Sessions"), 1000);
    assert_eq!(delta(&after, &before, "AttachFailures"), 0);
    assert_eq!(delta(&after, &before, "RedirectedBytes"), 1000 * 2 * 80);
    assert_eq!(delta(&after, &before, "PassedBytes"), 0);
}

/// A proxy with `be/srv` (`on-marked-down shutdown-sessions`, `be_line` in the backend) to an echo
/// server; returns the proxy, its admin socket, its port and what keeps them alive.
fn echo_proxy(ip: u8, be_line: &str) -> (Proc, PathBuf, u16, (TcpEcho, TempDir)) {
    let echo = TcpEcho::start(SocketAddr::from(([127, 0, 1, ip], 0))).expect("echo");
    let dir = TempDir::new("splice-down");
    let sock = dir.0.join("admin.sock");
    let port = free_port();
    let cfg = format!(
        "global\n    stats socket {} level admin\n\ndefaults\n    mode tcp\n    log stdout format raw local0\n    option tcplog\n    timeout connect 2s\n    timeout client 30s\n    timeout server 30s\n\nfrontend fe\n    bind 127.0.0.1:{port}\n    default_backend be\n\nbackend be\n{be_line}    server srv {} on-marked-down shutdown-sessions\n",
        sock.display(),
        echo.addr()
    );
    (Proc::portcullis(&cfg, lo(port)), sock, port, (echo, dir))
}

/// Three sessions that have echoed "ping".
fn three_sessions(port: u16) -> Vec<TcpStream> {
    (0..3)
        .map(|_| {
            let mut c = TcpStream::connect(lo(port)).expect("connect");
            c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            c.write_all(b"ping").unwrap();
            let mut b = [0u8; 4];
            c.read_exact(&mut b).unwrap();
            assert_eq!(&b, b"ping");
            c
        })
        .collect()
}

/// `disable server be/srv` ends the three sessions at once (EOF or a reset within 5 s), each
/// logged with `DD`.
fn shutdown_ends_them(p: &Proc, sock: &Path, clients: &mut [TcpStream]) {
    // Only these three clients' lines count: the start-up probe's connection, when the proxy
    // is slow to see it close on a loaded machine, is ended (and logged DD) too.
    let ours: Vec<String> = clients
        .iter()
        .filter_map(|c| c.local_addr().ok())
        .map(|a| format!("{a} "))
        .collect();
    assert_eq!(ours.len(), 3);
    let t = Instant::now();
    cli(sock, "disable server be/srv");
    for c in clients.iter_mut() {
        let mut b = [0u8; 16];
        let r = c.read(&mut b);
        assert!(matches!(r, Ok(0) | Err(_)), "{r:?}");
    }
    assert!(t.elapsed() < Duration::from_secs(5));
    assert!(
        wait_until(Duration::from_secs(5), || p
            .log_lines()
            .iter()
            .filter(|l| ours.iter().any(|a| l.starts_with(a.as_str()))
                && l.contains(" fe be/srv ")
                && l.contains(" DD "))
            .count()
            == 3),
        "{:?}",
        p.log_lines()
    );
}

#[test]
fn maintenance_with_shutdown_sessions_ends_spliced_sessions() {
    if !root() {
        return;
    }
    let (p, sock, port, _keep) = echo_proxy(63, "    portcullis-relay kernel\n");
    let before = kernel_counters(&sock);
    let mut clients = three_sessions(port);
    let mid = splice(&sock);
    assert_eq!(delta(&mid, &before, "RedirectedBytes"), 3 * 8);
    assert_eq!(counter(&mid, "ActiveSessions"), 3);
    assert_eq!(counter(&mid, "SockhashEntries"), 6);
    shutdown_ends_them(&p, &sock, &mut clients);
    let after = kernel_counters(&sock);
    assert_eq!(counter(&after, "ActiveSessions"), 0);
    assert_eq!(counter(&after, "SockhashEntries"), 0);
}

#[test]
fn a_slow_reader_keeps_the_bytes_in_flight_bounded() {
    if !root() {
        return;
    }
    // A server writes as fast as its socket takes bytes; the client reads 64 kB every 10 ms.
    // Every byte the server's kernel accepted and the client has not read is buffered somewhere
    // in the kernel (sockets, the splice's queue): that is what must stay bounded. Unbounded, the
    // splice queues hundreds of MB per second on loopback.
    let l = TcpListener::bind("127.0.1.64:0").expect("bind");
    let addr = l.local_addr().unwrap();
    let sent = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let (s2, stop2) = (sent.clone(), stop.clone());
    std::thread::spawn(move || {
        let mut s = loop {
            let Ok((mut s, _)) = l.accept() else { return };
            if go(&mut s) {
                break s;
            }
        };
        s.set_write_timeout(Some(Duration::from_millis(50)))
            .unwrap();
        let b = block(7, 0);
        while !stop2.load(Ordering::Relaxed) {
            match s.write(&b) {
                Ok(n) => {
                    s2.fetch_add(n as u64, Ordering::Relaxed);
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {}
                Err(_) => return,
            }
        }
    });
    let st = start(
        addr,
        "",
        "    portcullis-relay kernel max-unacked 1m bulk-rate 0\n",
    );
    let before = kernel_counters(&st.sock);
    let c = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    // Set before connecting: a small fixed window (no autotuning) on the slow side.
    c.set_recv_buffer_size(64 * 1024).unwrap();
    c.connect(&lo(st.port).into()).expect("connect");
    let mut c: TcpStream = c.into();
    c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    c.write_all(b"g").unwrap();
    let mut got = 0u64;
    let mut max_in_flight = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(4) {
        std::thread::sleep(Duration::from_millis(10));
        let n = c.read(&mut buf).expect("read");
        got += n as u64;
        max_in_flight = max_in_flight.max(sent.load(Ordering::Relaxed).saturating_sub(got));
    }
    stop.store(true, Ordering::Relaxed);
    let after = kernel_counters(&st.sock);
    eprintln!(
        "slow reader: read {got} B in 4 s, at most {max_in_flight} B in flight; kernel redirected {} B, fallbacks {}",
        delta(&after, &before, "RedirectedBytes"),
        delta(&after, &before, "Fallbacks")
    );
    // Sockets' own buffers (sender 4 MB, the proxy's server side autotuned up to tcp_rmem's
    // maximum) plus the 1 MB limit: far below what an unbounded splice queues in 4 s.
    let bound = 64 * MB as u64;
    assert!(
        max_in_flight < bound,
        "{max_in_flight} bytes in flight (bound {bound})"
    );
    assert!(got > 0);
    assert!(
        delta(&after, &before, "RedirectedBytes") > 0,
        "the kernel carried the start"
    );
    assert!(
        delta(&after, &before, "Fallbacks") >= 1,
        "the direction moved to userspace"
    );
}

#[test]
fn portcullis_relay_userspace_keeps_the_kernel_out() {
    if !root() {
        return;
    }
    let size = 100 * MB;
    let peer = Peer::start(size, 8, false);
    let st = start(
        peer.addr,
        "    portcullis-relay userspace\n",
        "    portcullis-relay kernel\n",
    );
    let before = kernel_counters(&st.sock);
    let (got, sum, sent, (peer_got, peer_sum, peer_sent)) = both_ways(&st, &peer, size);
    assert_eq!((got, peer_got), (size, size));
    assert_eq!(sum, peer_sent);
    assert_eq!(peer_sum, sent);
    st.p.wait_log(&format!(" {size} -- "), Duration::from_secs(5))
        .unwrap_or_else(|| panic!("tcplog line: {:?}", st.p.log_lines()));
    // The backend would splice; the frontend's keyword wins.
    let after = kernel_counters(&st.sock);
    assert_eq!(delta(&after, &before, "RedirectedBytes"), 0);
    assert_eq!(delta(&after, &before, "Sessions"), 0);
}

#[test]
fn chatty_sessions_stay_in_the_kernel_under_the_bulk_rule() {
    if !root() {
        return;
    }
    // 64-byte request/response round trips (an API watch, an RPC): far below the default bulk
    // rate, so every byte of an opted-in session stays spliced.
    let addr = echo64(61);
    let st = start(addr, "", "    portcullis-relay kernel\n");
    let before = kernel_counters(&st.sock);
    let mut c = TcpStream::connect(lo(st.port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.set_nodelay(true).unwrap();
    const TRIPS: u64 = 2000;
    for i in 0..TRIPS {
        let msg = [i as u8; 64];
        c.write_all(&msg).unwrap();
        let mut back = [0u8; 64];
        c.read_exact(&mut back).unwrap();
        assert_eq!(back, msg, "round trip {i}");
    }
    drop(c);
    st.p.wait_log(" fe be/srv ", Duration::from_secs(5))
        .unwrap_or_else(|| panic!("tcplog line: {:?}", st.p.log_lines()));
    let after = kernel_counters(&st.sock);
    assert_eq!(delta(&after, &before, "RedirectedBytes"), 2 * 64 * TRIPS);
    assert_eq!(delta(&after, &before, "PassedBytes"), 0);
    assert_eq!(delta(&after, &before, "Fallbacks"), 0);
}

#[test]
fn show_stat_bytes_match_what_the_client_sent_and_received() {
    if !root() {
        return;
    }
    // Spliced (kernel only), and the userspace fallback: the same counters either way.
    for (seed, relay, kernel) in [
        (10, "kernel max-unacked 1g bulk-rate 0", true),
        (11, "userspace", false),
    ] {
        let size = 2 * MB;
        let peer = Peer::start(size, seed, false);
        // The frontend asks for the kernel (so the path is loaded); the backend's word wins.
        let st = start(
            peer.addr,
            "    portcullis-relay kernel\n",
            &format!("    portcullis-relay {relay}\n"),
        );
        let before = kernel_counters(&st.sock);
        let (got, sum, sent, (peer_got, peer_sum, peer_sent)) = both_ways(&st, &peer, size);
        assert_eq!((got, peer_got), (size, size), "{relay}");
        assert_eq!((sum, peer_sum), (peer_sent, sent), "{relay}");
        st.p.wait_log(&format!(" {size} -- "), Duration::from_secs(5))
            .unwrap_or_else(|| panic!("tcplog line: {:?}", st.p.log_lines()));
        // The client sent its "go" byte and `size` bytes, and received `size`.
        let want = (size as u64 + 1, size as u64);
        for (px, sv) in [("fe", "FRONTEND"), ("be", "BACKEND"), ("be", "srv")] {
            assert_eq!(stat_bytes(&st.sock, px, sv), want, "{relay}: {px}/{sv}");
        }
        let after = kernel_counters(&st.sock);
        if kernel {
            assert_eq!(
                delta(&after, &before, "RedirectedBytes"),
                2 * size as u64 + 1
            );
        } else {
            assert_eq!(delta(&after, &before, "Sessions"), 0, "{relay}");
        }
    }
}

#[test]
fn the_userspace_fallback_passes_the_same_close_and_shutdown_tests() {
    if !root() {
        return;
    }
    // The server sends 8 MB and closes at once.
    let size = 8 * MB;
    let peer = Peer::start(size, 12, true);
    let st = start(
        peer.addr,
        "    portcullis-relay userspace\n",
        "    portcullis-relay kernel\n",
    );
    let before = kernel_counters(&st.sock);
    let mut c = client(st.port);
    let (got, sum) = recv(&mut c, None);
    let (_, _, peer_sent) = peer.done.recv_timeout(Duration::from_secs(30)).unwrap();
    assert_eq!(got, size, "{:?}", st.p.log_lines());
    assert_eq!(sum, peer_sent);
    drop(c);
    st.p.wait_log(&format!(" {size} "), Duration::from_secs(5))
        .unwrap_or_else(|| panic!("tcplog line: {:?}", st.p.log_lines()));

    // shutdown-sessions ends userspace-relayed sessions too.
    let (p, sock, port, _keep) = echo_proxy(64, "    portcullis-relay userspace\n");
    let mut clients = three_sessions(port);
    shutdown_ends_them(&p, &sock, &mut clients);
    let after = kernel_counters(&st.sock);
    assert_eq!(delta(&after, &before, "Sessions"), 0);
    let other = kernel_counters(&sock);
    assert_eq!(counter(&other, "Sessions"), 0);
    assert_eq!(counter(&other, "Promotions"), 0);
    // With every `mode tcp` proxy saying `userspace`, the kernel path is not even loaded.
    let none = start(
        peer.addr,
        "    portcullis-relay userspace\n",
        "    portcullis-relay userspace\n",
    );
    let shown = cli(&none.sock, "show splice");
    assert_eq!(
        shown.lines().next(),
        Some("Status: userspace (every mode tcp proxy says portcullis-relay userspace)")
    );
    assert!(!shown.contains("RedirectedBytes"), "{shown}");
}

/// `TCP_QUEUE_SEQ` of `fd`'s send queue (`write_seq`) or receive queue (`rcv_nxt`), read in
/// repair mode (CAP_NET_ADMIN).
fn queue_seq(fd: std::os::fd::RawFd, send_queue: bool) -> u32 {
    const TCP_REPAIR: libc::c_int = 19;
    const TCP_REPAIR_QUEUE: libc::c_int = 20;
    const TCP_QUEUE_SEQ: libc::c_int = 21;
    let set = |opt: libc::c_int, v: libc::c_int| {
        // SAFETY: setsockopt reads one int.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                libc::IPPROTO_TCP,
                opt,
                (&raw const v).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        assert_eq!(
            rc,
            0,
            "setsockopt {opt}: {}",
            std::io::Error::last_os_error()
        );
    };
    set(TCP_REPAIR, 1);
    set(TCP_REPAIR_QUEUE, if send_queue { 2 } else { 1 });
    let mut v: u32 = 0;
    let mut len = std::mem::size_of::<u32>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `v`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            TCP_QUEUE_SEQ,
            (&raw mut v).cast(),
            &mut len,
        )
    };
    assert_eq!(rc, 0, "TCP_QUEUE_SEQ: {}", std::io::Error::last_os_error());
    set(TCP_REPAIR, 0);
    v
}

/// Sends one TCP segment (PSH|ACK, no options) from `src` to `dst` on a raw socket.
fn inject_segment(src: SocketAddr, dst: SocketAddr, seq: u32, ack: u32, payload: &[u8]) {
    let (SocketAddr::V4(s), SocketAddr::V4(d)) = (src, dst) else {
        panic!("IPv4 only");
    };
    let mut seg = Vec::with_capacity(20 + payload.len());
    seg.extend_from_slice(&s.port().to_be_bytes());
    seg.extend_from_slice(&d.port().to_be_bytes());
    seg.extend_from_slice(&seq.to_be_bytes());
    seg.extend_from_slice(&ack.to_be_bytes());
    seg.extend_from_slice(&[5 << 4, 0x18, 0xff, 0xff, 0, 0, 0, 0]);
    seg.extend_from_slice(payload);
    let mut pseudo = Vec::new();
    pseudo.extend_from_slice(&s.ip().octets());
    pseudo.extend_from_slice(&d.ip().octets());
    pseudo.extend_from_slice(&[0, libc::IPPROTO_TCP as u8]);
    pseudo.extend_from_slice(&(seg.len() as u16).to_be_bytes());
    pseudo.extend_from_slice(&seg);
    if pseudo.len() % 2 == 1 {
        pseudo.push(0);
    }
    let mut sum: u32 = pseudo
        .chunks(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    seg[16..18].copy_from_slice(&(!(sum as u16)).to_be_bytes());
    // SAFETY: plain socket calls on a descriptor this function owns; sendto reads `seg` and
    // `sin` within their lengths.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_RAW, libc::IPPROTO_TCP);
        assert!(fd >= 0, "raw socket: {}", std::io::Error::last_os_error());
        let mut sin: libc::sockaddr_in = std::mem::zeroed();
        sin.sin_family = libc::AF_INET as libc::sa_family_t;
        sin.sin_addr.s_addr = u32::from_ne_bytes(d.ip().octets());
        let n = libc::sendto(
            fd,
            seg.as_ptr().cast(),
            seg.len(),
            0,
            (&raw const sin).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        );
        assert_eq!(n, seg.len() as isize, "{}", std::io::Error::last_os_error());
        libc::close(fd);
    }
}

#[test]
fn a_partial_retransmission_is_relayed_once() {
    if !root() {
        return;
    }
    // TCP queues a retransmission that starts below rcv_nxt whole and lets readers skip its
    // head by copied_seq; the verdict-only sockmap path reads whole skbs and, unchecked, relays
    // that head a second time (the 64 kB repeats of contrib/splice-stress). Here the client's
    // connection gets [end(A) - 10, end(A) + 10) injected, then sends B, whose first 10 bytes
    // the proxy then already has: two partial overlaps of 10 bytes.
    let echo = TcpEcho::start(SocketAddr::from(([127, 0, 1, 62], 0))).expect("echo");
    let addr = echo.addr();
    let st = start(addr, "", "    portcullis-relay kernel\n");
    let before = kernel_counters(&st.sock);
    let a: Vec<u8> = (0..1000u32).map(|i| (i * 7 + 1) as u8).collect();
    let b: Vec<u8> = (0..1000u32).map(|i| (i * 13 + 5) as u8).collect();
    let mut c = TcpStream::connect(lo(st.port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.set_nodelay(true).unwrap();
    c.write_all(&a).unwrap();
    let mut got = vec![0u8; a.len()];
    c.read_exact(&mut got).unwrap();
    assert_eq!(got, a);
    // A acknowledged: the client's send queue is empty, write_seq is end(A).
    std::thread::sleep(Duration::from_millis(200));
    let fd = std::os::fd::AsRawFd::as_raw_fd(&c);
    let end = queue_seq(fd, true);
    let ack = queue_seq(fd, false);
    let mut seg = a[a.len() - 10..].to_vec();
    seg.extend_from_slice(&b[..10]);
    inject_segment(
        c.local_addr().unwrap(),
        c.peer_addr().unwrap(),
        end.wrapping_sub(10),
        ack,
        &seg,
    );
    std::thread::sleep(Duration::from_millis(200));
    c.write_all(&b).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    c.read_to_end(&mut got).unwrap();
    let want = [a.as_slice(), b.as_slice()].concat();
    let first_diff = got.iter().zip(&want).position(|(x, y)| x != y);
    assert!(
        got == want,
        "echo of {} bytes for {} sent, first difference at {first_diff:?}",
        got.len(),
        want.len()
    );
    st.p.wait_log(" fe be/srv ", Duration::from_secs(5))
        .unwrap_or_else(|| panic!("tcplog line: {:?}", st.p.log_lines()));
    let after = kernel_counters(&st.sock);
    // The verdict cut both heads (a kernel whose tcp_read_skb honours copied_seq would leave it
    // nothing to cut).
    assert_eq!(delta(&after, &before, "OverlapSkbs"), 2);
    assert_eq!(delta(&after, &before, "OverlapBytes"), 20);
    assert_eq!(delta(&after, &before, "RedirectedBytes"), 4000);
}
