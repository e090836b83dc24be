//! The maps of the `mode tcp` splice and one session's entries in them.
//!
//! Keys are socket cookies. For a session (client C, server S) the SOCKHASH holds
//! `cookie(C) → S` and `cookie(S) → C`, so the verdict running on C's bytes redirects them to S's
//! egress and the other way round; `FLOWS` and `FLOW_CTL` hold each direction's counters and
//! limit under the cookie of the socket its bytes arrive on.
//!
//! Each worker thread opens its own handles on the maps (duplicated descriptors), so map updates
//! need no lock between workers.

use std::cell::RefCell;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::Ordering;
use std::time::Duration;

use aya::maps::{HashMap, Map, MapData, SockHash};
use portcullis_ebpf_common::{Flow, FlowCtl};

use super::Loaded;
use super::tcpinfo::cookie;

struct Maps {
    splice: SockHash<MapData, u64>,
    flows: HashMap<MapData, u64, Flow>,
    ctl: HashMap<MapData, u64, FlowCtl>,
}

thread_local! {
    static MAPS: RefCell<Option<Maps>> = const { RefCell::new(None) };
}

fn open(l: &Loaded) -> Result<Maps, String> {
    let data = |fd: &OwnedFd| {
        let fd = fd.try_clone().map_err(|e| format!("dup map fd: {e}"))?;
        MapData::from_fd(fd).map_err(|e| format!("open map: {e}"))
    };
    Ok(Maps {
        splice: SockHash::try_from(Map::SockHash(data(&l.splice_fd)?))
            .map_err(|e| e.to_string())?,
        flows: HashMap::try_from(Map::HashMap(data(&l.flows_fd)?)).map_err(|e| e.to_string())?,
        ctl: HashMap::try_from(Map::HashMap(data(&l.ctl_fd)?)).map_err(|e| e.to_string())?,
    })
}

/// Runs `f` on this thread's map handles, opening them on first use.
fn with_maps<R>(l: &Loaded, f: impl FnOnce(&mut Maps) -> Result<R, String>) -> Result<R, String> {
    MAPS.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(open(l)?);
        }
        match slot.as_mut() {
            Some(m) => f(m),
            None => Err("splice maps not open".into()),
        }
    })
}

/// Entries in the SOCKHASH now (two per spliced session).
pub fn sockhash_len() -> u64 {
    let Some(l) = super::loaded() else {
        return 0;
    };
    with_maps(l, |m| {
        Ok(m.splice.keys().filter(Result::is_ok).count() as u64)
    })
    .unwrap_or(0)
}

/// A direction of a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Client to server: the bytes arrive on the client socket.
    C2s,
    /// Server to client.
    S2c,
}

/// One spliced session's entries in the maps; removed on [`Splice::detach`] or drop.
pub struct Splice<'a> {
    l: &'a Loaded,
    client: u64,
    server: u64,
    fds: [RawFd; 2],
    /// What each socket (client, server) had handed to TCP before the splice: an active open
    /// counts its SYN in `tcpi_bytes_acked`.
    base: [u64; 2],
    /// Each direction's `max-unacked` (C2s, S2c); 0 once userspace moved it to its relay.
    limits: [std::cell::Cell<u64>; 2],
    attached: std::cell::Cell<bool>,
}

impl<'a> Splice<'a> {
    /// Splices two connected TCP sockets: from now on the kernel carries their bytes to each
    /// other, each direction until its un-acked redirected bytes would pass `limit`.
    pub fn attach(l: &'a Loaded, client: RawFd, server: RawFd, limit: u64) -> Result<Self, String> {
        let c = cookie(client).map_err(|e| format!("SO_COOKIE: {e}"))?;
        let s = cookie(server).map_err(|e| format!("SO_COOKIE: {e}"))?;
        let handed = |fd| super::tcpinfo::handed_to_tcp(fd).map_err(|e| format!("TCP_INFO: {e}"));
        let base = [handed(client)?, handed(server)?];
        let sp = Splice {
            l,
            client: c,
            server: s,
            fds: [client, server],
            base,
            limits: [std::cell::Cell::new(limit), std::cell::Cell::new(limit)],
            attached: std::cell::Cell::new(true),
        };
        // Counted now: `detach` (also on failure below) uncounts it.
        l.active.fetch_add(1, Ordering::Relaxed);
        let ctl = FlowCtl { acked: 0, limit };
        let r = with_maps(l, |m| {
            for k in [c, s] {
                m.flows
                    .insert(k, Flow::default(), 0)
                    .map_err(|e| format!("FLOWS: {e}"))?;
                m.ctl
                    .insert(k, ctl, 0)
                    .map_err(|e| format!("FLOW_CTL: {e}"))?;
            }
            // Each insertion hands the *value* socket to the verdict. The server goes first: a
            // byte it sends before the client is in (its redirect would fail) makes the verdict
            // move that direction to userspace, losing nothing.
            m.splice
                .insert(c, server, 0)
                .map_err(|e| format!("SOCKHASH: {e}"))?;
            m.splice
                .insert(s, client, 0)
                .map_err(|e| format!("SOCKHASH: {e}"))?;
            Ok(())
        });
        if let Err(e) = r {
            sp.detach();
            return Err(e);
        }
        // Bytes that arrived before the sockets entered the map sit in their receive queues and
        // no verdict runs until more come; a recv on a sockmap socket runs it on them first.
        kick(client);
        kick(server);
        l.sessions.fetch_add(1, Ordering::Relaxed);
        Ok(sp)
    }

    /// The kernel's counters of a direction (zero if the entry is gone).
    pub fn flow(&self, dir: Dir) -> Flow {
        let key = self.source(dir);
        with_maps(self.l, |m| m.flows.get(&key, 0).map_err(|e| e.to_string())).unwrap_or_default()
    }

    /// Tells the verdict how many bytes of `dir` the receiver has acknowledged.
    pub fn set_acked(&self, dir: Dir, acked: u64) {
        let key = self.source(dir);
        let ctl = FlowCtl {
            acked,
            limit: self.limit(dir).get(),
        };
        let _ = with_maps(self.l, |m| {
            m.ctl.insert(key, ctl, 0).map_err(|e| e.to_string())
        });
    }

    /// Moves `dir` to the userspace relay: with a limit of 0 the verdict's next skb falls back
    /// (`acked`: the receiver's count, as [`Splice::set_acked`] takes it).
    pub fn fall_back(&self, dir: Dir, acked: u64) {
        self.limit(dir).set(0);
        self.set_acked(dir, acked);
    }

    fn limit(&self, dir: Dir) -> &std::cell::Cell<u64> {
        let [c2s, s2c] = &self.limits;
        match dir {
            Dir::C2s => c2s,
            Dir::S2c => s2c,
        }
    }

    /// Bytes of `dir` its receiving socket has handed to TCP (sent or queued there): the kernel's
    /// redirects and what userspace wrote.
    pub fn handed(&self, dir: Dir) -> std::io::Result<u64> {
        let i = self.sink(dir);
        let fd = self.fds.get(i).copied().unwrap_or(-1);
        let base = self.base.get(i).copied().unwrap_or(0);
        super::tcpinfo::handed_to_tcp(fd).map(|h| h.saturating_sub(base))
    }

    /// Bytes of `dir` its receiver has acknowledged.
    pub fn acked(&self, dir: Dir) -> u64 {
        let i = self.sink(dir);
        let fd = self.fds.get(i).copied().unwrap_or(-1);
        let base = self.base.get(i).copied().unwrap_or(0);
        super::tcpinfo::bytes_acked(fd)
            .map(|a| a.saturating_sub(base))
            .unwrap_or(0)
    }

    /// Index in `fds`/`base` of the socket `dir` writes to.
    fn sink(&self, dir: Dir) -> usize {
        match dir {
            Dir::C2s => 1,
            Dir::S2c => 0,
        }
    }

    /// Removes the session's entries (the sockets leave the SOCKHASH first).
    pub fn detach(&self) {
        if !self.attached.replace(false) {
            return;
        }
        let (c, s) = (self.client, self.server);
        let _ = with_maps(self.l, |m| {
            for k in [c, s] {
                let _ = m.splice.remove(&k);
            }
            for k in [c, s] {
                let _ = m.flows.remove(&k);
                let _ = m.ctl.remove(&k);
            }
            Ok(())
        });
        self.l.active.fetch_sub(1, Ordering::Relaxed);
    }

    fn source(&self, dir: Dir) -> u64 {
        match dir {
            Dir::C2s => self.client,
            Dir::S2c => self.server,
        }
    }
}

impl Drop for Splice<'_> {
    fn drop(&mut self) {
        self.detach();
    }
}

/// A non-blocking peek: on a sockmap socket it runs the verdict on what waits in the receive
/// queue. Whatever it reports is left in place for the relay's reads.
fn kick(fd: RawFd) {
    let mut b = [0u8; 1];
    // SAFETY: recv writes at most one byte into `b`.
    let _ = unsafe {
        libc::recv(
            fd,
            b.as_mut_ptr().cast(),
            1,
            libc::MSG_PEEK | libc::MSG_DONTWAIT,
        )
    };
}

/// Splices two loopback connections and sends a few bytes through, both ways: proves the
/// program loads, attaches and redirects here before the proxy relies on it.
pub(super) fn self_test(l: &Loaded) -> Result<(), String> {
    let fail = |what: &str, e: std::io::Error| format!("splice self-test: {what}: {e}");
    let pair = || -> Result<(std::net::TcpStream, std::net::TcpStream), String> {
        let lst = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| fail("bind", e))?;
        let addr = lst.local_addr().map_err(|e| fail("bind", e))?;
        let a = std::net::TcpStream::connect(addr).map_err(|e| fail("connect", e))?;
        let (b, _) = lst.accept().map_err(|e| fail("accept", e))?;
        for s in [&a, &b] {
            s.set_read_timeout(Some(Duration::from_secs(2)))
                .map_err(|e| fail("timeout", e))?;
        }
        Ok((a, b))
    };
    let (mut client, client_side) = pair()?;
    let (server_side, mut server) = pair()?;
    let sp = Splice::attach(
        l,
        client_side.as_raw_fd(),
        server_side.as_raw_fd(),
        super::DEFAULT_MAX_UNACKED,
    )?;
    let check = |from: &mut std::net::TcpStream, to: &mut std::net::TcpStream| {
        from.write_all(b"portcullis")
            .map_err(|e| fail("write", e))?;
        let mut buf = [0u8; 10];
        to.read_exact(&mut buf).map_err(|e| fail("read", e))?;
        if &buf != b"portcullis" {
            return Err("splice self-test: bytes changed in the kernel".to_string());
        }
        Ok(())
    };
    let r = check(&mut client, &mut server).and_then(|()| check(&mut server, &mut client));
    let redirected = sp.flow(Dir::C2s).redirected + sp.flow(Dir::S2c).redirected;
    sp.detach();
    l.sessions.fetch_sub(1, Ordering::Relaxed);
    r?;
    if redirected != 20 {
        return Err(format!(
            "splice self-test: the kernel redirected {redirected} bytes of 20"
        ));
    }
    Ok(())
}
