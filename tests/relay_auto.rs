//! The default `portcullis-relay auto`: a lone chatty `mode tcp` session moves from the userspace
//! relay into the kernel splice between two messages, with nothing lost, counted in `show stat`
//! and the tcplog line; concurrent busy sessions and bulk stay in userspace. Its own test binary:
//! the rule judges traffic rates, which the heavy transfers of `kernel_splice.rs` would disturb.
//! Needs root (CAP_BPF, CAP_NET_ADMIN, CAP_PERFMON): without it the tests say so and pass
//! without running.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/splice.rs"]
mod splice_cli;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use backend::{TcpEcho, fnv1a64, lo};
use splice_cli::{Setup, counter, delta, echo64, kernel_counters, root, splice, stat_bytes};

/// One test at a time: each judges its own traffic's rate.
static ONE: Mutex<()> = Mutex::new(());

/// The default relay with one worker thread: the busy-session rule counts per worker.
fn start(server: SocketAddr) -> Setup {
    splice_cli::start(1, server, "", "")
}

/// `trips` 64-byte round trips on `c`, each message distinct and checked.
fn round_trips(c: &mut TcpStream, tag: u8, trips: u64) {
    for i in 0..trips {
        let mut msg = [tag; 64];
        msg[..8].copy_from_slice(&i.to_le_bytes());
        c.write_all(&msg).unwrap();
        let mut back = [0u8; 64];
        c.read_exact(&mut back).unwrap();
        assert_eq!(back, msg, "session {tag}, round trip {i}");
    }
}

fn chatty_client(port: u16) -> TcpStream {
    let c = TcpStream::connect(lo(port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.set_nodelay(true).unwrap();
    c
}

#[test]
fn a_lone_chatty_session_moves_into_the_kernel() {
    if !root() {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let st = start(echo64(66));
    let before = kernel_counters(&st.sock);
    let mut c = chatty_client(st.port);
    // Chatty until judged (two windows of 100 ms) and moved, then more.
    let t = Instant::now();
    let mut trips = 0;
    while counter(&splice(&st.sock), "Promotions") == counter(&before, "Promotions") {
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "not moved after {trips} round trips"
        );
        round_trips(&mut c, 1, 100);
        trips += 100;
    }
    let moved = splice(&st.sock);
    assert_eq!(delta(&moved, &before, "Promotions"), 1, "{moved:?}");
    round_trips(&mut c, 2, 500);
    trips += 500;
    assert_eq!(counter(&splice(&st.sock), "ActiveSessions"), 1);
    // Half-close from the client: the echo ends too, nothing is lost on the way.
    c.shutdown(Shutdown::Write).unwrap();
    let mut rest = Vec::new();
    c.read_to_end(&mut rest).unwrap();
    assert!(rest.is_empty(), "{} stray bytes", rest.len());
    let total = 64 * trips;
    st.p.wait_log(&format!(" {total} -- "), Duration::from_secs(5))
        .unwrap_or_else(|| panic!("tcplog line for {total} bytes: {:?}", st.p.log_lines()));
    assert_eq!(stat_bytes(&st.sock, "fe", "FRONTEND"), (total, total));
    let after = kernel_counters(&st.sock);
    // At least the last 500 round trips went through the kernel, and not every byte did.
    let redirected = delta(&after, &before, "RedirectedBytes");
    assert!(
        redirected >= 2 * 64 * 500 && redirected < 2 * total,
        "{redirected} of {} bytes redirected",
        2 * total
    );
    assert_eq!(delta(&after, &before, "PassedBytes"), 0);
    assert_eq!(counter(&after, "SockhashEntries"), 0);
}

#[test]
fn busy_neighbours_and_bulk_stay_in_userspace() {
    if !root() {
        return;
    }
    let _one = ONE.lock().unwrap_or_else(|e| e.into_inner());
    let st = start(echo64(67));
    let before = kernel_counters(&st.sock);
    // Three chatty sessions at once on the one worker: none is alone, none moves. Judged while
    // all three still talk: once two have ended, the third is alone and may move.
    let port = st.port;
    let go = Arc::new(Barrier::new(4));
    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..3u8)
        .map(|tag| {
            let (go, stop) = (go.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut c = chatty_client(port);
                go.wait();
                while !stop.load(Ordering::Relaxed) {
                    round_trips(&mut c, tag, 20);
                }
                // Each session ends only when every client has stopped talking.
                go.wait();
            })
        })
        .collect();
    go.wait();
    std::thread::sleep(Duration::from_millis(800));
    let during = splice(&st.sock);
    stop.store(true, Ordering::Relaxed);
    go.wait();
    for c in clients {
        c.join().expect("client");
    }
    assert_eq!(delta(&during, &before, "Promotions"), 0, "{during:?}");
    assert_eq!(delta(&during, &before, "Sessions"), 0);
    // Bulk alone: busy, never chatty.
    let echo = TcpEcho::start(SocketAddr::from(([127, 0, 1, 68], 0))).expect("echo");
    let st = start(echo.addr());
    let before = kernel_counters(&st.sock);
    let mut c = TcpStream::connect(lo(st.port)).expect("connect");
    c.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let mut r = c.try_clone().unwrap();
    let size = 32usize << 20;
    let data: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let sum = fnv1a64(&data);
    let reader = std::thread::spawn(move || {
        let mut back = Vec::with_capacity(size);
        r.read_to_end(&mut back).map(|_| back)
    });
    c.write_all(&data).unwrap();
    c.shutdown(Shutdown::Write).unwrap();
    let back = reader.join().unwrap().expect("read back");
    assert_eq!((back.len(), fnv1a64(&back)), (size, sum));
    let after = kernel_counters(&st.sock);
    assert_eq!(delta(&after, &before, "Promotions"), 0, "{after:?}");
    assert_eq!(delta(&after, &before, "RedirectedBytes"), 0);
}
