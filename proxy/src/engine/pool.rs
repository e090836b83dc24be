//! Per-worker pools: released session buffers and idle server connections. Thread-local (one
//! pool per worker thread, no locks); the worker purges the connection pool every
//! [`PURGE_DELAY`] and clears it when it stops.

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use foldhash::HashMap;

use crate::backend::h2::Link;
use crate::backend::srvconn::SrvConn;
use crate::config::addr::UnixAddr;

/// What idle server connections are pooled by: the server's current address, or its socket.
#[derive(Clone, PartialEq, Eq, Hash)]
pub enum Key {
    Inet(SocketAddr),
    Unix(UnixAddr),
}

impl From<SocketAddr> for Key {
    fn from(a: SocketAddr) -> Key {
        Key::Inet(a)
    }
}

impl From<&crate::model::Server> for Key {
    fn from(s: &crate::model::Server) -> Key {
        match &s.cfg.unix {
            Some(u) => Key::Unix(u.clone()),
            None => Key::Inet(s.addr()),
        }
    }
}

/// The capacity of a session buffer taken from the pool.
pub const BUF: usize = 16 * 1024;
/// Largest buffer given back (a body buffer may grow to this twice over).
const BUF_MAX: usize = 2 * 64 * 1024;
/// Buffers kept per worker for reuse across sessions.
const BUF_POOL: usize = 256;
/// Idle server connections a worker keeps per server address: room for every stream of a few
/// busy h2 connections (100 each), else each burst of completions closes the surplus and the
/// next burst connects again (HAProxy's `pool-max-conn` is unlimited by default).
const PER_SERVER: usize = 1024;
/// HAProxy's `pool-purge-delay` default: every interval, half of the idle server connections
/// are closed, so that a burst's surplus does not linger (up to [`PER_SERVER`] each).
pub const PURGE_DELAY: Duration = Duration::from_secs(5);

/// An idle server connection and when it went idle (`clock::coarse_ms`).
type Idle = (Rc<SrvConn>, u64);

thread_local! {
    /// Released session buffers, reused by the next transaction on this worker.
    static BUFS: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
    /// This worker's idle server connections, by server address.
    static CONNS: RefCell<HashMap<Key, Vec<Idle>>> = RefCell::new(HashMap::default());
    /// This worker's HTTP/2 server connections, by server address: idle ones (owned by the
    /// stream that takes one) and shared ones (`http-reuse always`, taken without removal).
    static LINKS: RefCell<HashMap<Key, Vec<Rc<Link>>>> = RefCell::new(HashMap::default());
    /// Shared HTTP/2 connections being opened, by server address: who waits for one.
    static CONNECTING: RefCell<HashMap<Key, Rc<tokio::sync::Notify>>> =
        RefCell::new(HashMap::default());
}

/// The wake-up of the shared h2 connection to `addr` being opened, if one is.
pub fn connecting(addr: impl Into<Key>) -> Option<Rc<tokio::sync::Notify>> {
    let key = addr.into();
    CONNECTING.with(|c| c.borrow().get(&key).cloned())
}

/// A shared h2 connection being opened: waiters wake when it is dropped (opened or failed).
pub struct Connecting(Key);

impl Connecting {
    pub fn start(addr: impl Into<Key>) -> Connecting {
        let key = addr.into();
        CONNECTING.with(|c| {
            c.borrow_mut()
                .entry(key.clone())
                .or_insert_with(|| Rc::new(tokio::sync::Notify::new()));
        });
        Connecting(key)
    }
}

impl Drop for Connecting {
    fn drop(&mut self) {
        if let Some(n) = CONNECTING.with(|c| c.borrow_mut().remove(&self.0)) {
            n.notify_waiters();
        }
    }
}

/// A cleared buffer with at least [`BUF`] bytes of capacity, from this worker's pool if it has
/// one.
pub fn take_buf() -> Vec<u8> {
    BUFS.with(|b| b.borrow_mut().pop())
        .unwrap_or_else(|| Vec::with_capacity(BUF))
}

/// Gives a buffer back to this worker's pool (undersized and oversized ones are freed).
pub fn give_buf(mut v: Vec<u8>) {
    if v.capacity() < BUF || v.capacity() > BUF_MAX {
        return;
    }
    v.clear();
    BUFS.with(|b| {
        let mut b = b.borrow_mut();
        if b.len() < BUF_POOL {
            b.push(v);
        }
    });
}

/// The most recently idled connection to `addr` that the server has not closed meanwhile (the
/// closed ones met on the way are dropped). `unchecked(conn, idle_since)` says when one may be
/// taken without that check's system call (a close is then caught by the caller's replay).
pub fn take(
    addr: impl Into<Key>,
    unchecked: impl Fn(&SrvConn, u64) -> bool,
) -> Option<Rc<SrvConn>> {
    let key = addr.into();
    CONNS.with(|p| {
        let mut p = p.borrow_mut();
        let v = p.get_mut(&key)?;
        while let Some((c, at)) = v.pop() {
            if unchecked(&c, at) || c.idle_usable() {
                return Some(c);
            }
        }
        None
    })
}

/// Keeps an idle connection to `addr`, idle since `at` (its last response's end, on
/// `clock::coarse_ms`); closed instead when the pool for it is full.
pub fn put(addr: impl Into<Key>, s: Rc<SrvConn>, at: u64) {
    let key = addr.into();
    CONNS.with(|p| {
        let mut p = p.borrow_mut();
        let v = p.entry(key).or_default();
        if v.len() < PER_SERVER {
            v.push((s, at));
        }
    });
}

/// An HTTP/2 connection to `addr` with room for a stream: a shared one (kept in the pool), or
/// an idle one with no stream (taken out); `busy_only`: only one carrying streams now (HAProxy's
/// available list, unlike its idle ones). Connections closed or refusing streams are dropped.
pub fn take_link(
    addr: impl Into<Key>,
    max_reuse: Option<u64>,
    busy_only: bool,
) -> Option<Rc<Link>> {
    let key = addr.into();
    LINKS.with(|p| {
        let mut p = p.borrow_mut();
        let v = p.get_mut(&key)?;
        v.retain(|l| l.usable());
        let i = v.iter().rposition(|l| {
            (l.shared.get() || l.idle()) && l.has_room(max_reuse) && !(busy_only && l.idle())
        })?;
        if v[i].shared.get() {
            Some(Rc::clone(&v[i]))
        } else {
            Some(v.remove(i))
        }
    })
}

/// Keeps an HTTP/2 connection to `addr` (closed instead when the pool for it is full).
pub fn put_link(addr: impl Into<Key>, l: Rc<Link>) {
    let key = addr.into();
    LINKS.with(|p| {
        let mut p = p.borrow_mut();
        let v = p.entry(key).or_default();
        if v.len() < PER_SERVER {
            v.push(l);
        }
    });
}

/// Closes the older half of this worker's idle server connections (each pool is taken from its
/// end, so the front holds those idle the longest). Run every [`PURGE_DELAY`].
pub fn purge() {
    CONNS.with(|p| {
        let mut p = p.borrow_mut();
        for v in p.values_mut() {
            v.drain(..v.len() / 2);
        }
        p.retain(|_, v| !v.is_empty());
    });
    LINKS.with(|p| {
        let mut p = p.borrow_mut();
        for v in p.values_mut() {
            v.retain(|l| l.usable());
            // Shared connections with streams on them stay; idle ones go as HTTP/1's do.
            let idle = v.iter().filter(|l| l.idle()).count();
            let mut close = idle / 2;
            v.retain(|l| {
                let go = close > 0 && l.idle();
                close -= usize::from(go);
                !go
            });
        }
        p.retain(|_, v| !v.is_empty());
    });
}

/// Closes every idle server connection of this worker (at a stop: none will be used again).
pub fn clear() {
    CONNS.with(|p| p.borrow_mut().clear());
    LINKS.with(|p| p.borrow_mut().clear());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether the peer of a pooled connection saw it closed (EOF) within a short wait.
    fn closed(peer: &mut std::net::TcpStream) -> bool {
        use std::io::Read;
        peer.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        matches!(peer.read(&mut [0u8; 1]), Ok(0))
    }

    /// Runs `f` as a worker does: a current-thread runtime and its LocalSet.
    fn on_worker<F: std::future::Future>(f: F) -> F::Output {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        tokio::task::LocalSet::new().block_on(&rt, f)
    }

    /// A server connection as the pool holds one, to `l`, and the server's end of it.
    fn connect(l: &std::net::TcpListener) -> (Rc<SrvConn>, std::net::TcpStream) {
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let peer = l.accept().unwrap().0;
        let s =
            super::super::io::Stream::from_std_tcp(super::super::io::Backend::Epoll, c).unwrap();
        let conn = Rc::new(SrvConn::H1(crate::engine::conn::Conn::Plain(s)));
        (conn, peer)
    }

    #[test]
    fn purge_closes_the_older_half_and_clear_the_rest() {
        on_worker(async {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let mut peers = Vec::new();
            for _ in 0..4 {
                let (conn, peer) = connect(&l);
                peers.push(peer);
                put(addr, conn, crate::clock::coarse_ms());
            }
            purge();
            let seen: Vec<bool> = peers.iter_mut().map(closed).collect();
            assert_eq!(seen, [true, true, false, false]);
            // The taker gets the newest; a lone idle connection survives a purge.
            assert!(take(addr, |_, _| false).is_some());
            purge();
            assert!(!closed(&mut peers[2]));
            clear();
            assert!(closed(&mut peers[2]));
            assert!(take(addr, |_, _| false).is_none());
        });
    }

    /// A connection its server closed while idle is dropped when checked; one the caller takes
    /// unchecked (idle only a moment, its request replayable) comes back as it is, with the
    /// time it went idle.
    #[test]
    fn a_take_checks_for_a_close_unless_told_not_to() {
        on_worker(async {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let idle_closed = || {
                let (conn, peer) = connect(&l);
                drop(peer);
                // The server's FIN has arrived once the socket reads as closed.
                for _ in 0..200 {
                    if !conn.idle_usable() {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                conn
            };
            put(addr, idle_closed(), 7);
            assert!(
                take(addr, |_, _| false).is_none(),
                "checked: closed, dropped"
            );
            put(addr, idle_closed(), 42);
            let seen = std::cell::Cell::new(None);
            let got = take(addr, |_, at| {
                seen.set(Some(at));
                true
            });
            assert!(got.is_some(), "unchecked: taken as it is");
            assert_eq!(seen.get(), Some(42), "with when it went idle");
            assert!(take(addr, |_, _| true).is_none(), "the pool is empty");
        });
    }

    #[test]
    fn buffers_come_back_cleared_and_odd_sizes_are_freed() {
        let mut b = take_buf();
        assert!(b.capacity() >= BUF);
        b.extend_from_slice(b"left over");
        give_buf(b);
        let again = take_buf();
        assert!(again.is_empty() && again.capacity() >= BUF);
        give_buf(Vec::with_capacity(16));
        give_buf(Vec::with_capacity(BUF_MAX + 1));
        assert!(BUFS.with(|b| {
            b.borrow()
                .iter()
                .all(|v| v.capacity() >= BUF && v.capacity() <= BUF_MAX)
        }));
    }
}
