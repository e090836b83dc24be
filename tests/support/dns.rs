//! A test-owned authoritative DNS server on a loopback UDP port: a zone the test edits while
//! the proxies run (records change, names vanish), answered with hickory-proto's wire format.
//! Unknown names get NXDOMAIN; a known name without records of the asked type an empty answer.

#![allow(dead_code)]

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use hickory_proto::op::{Message, MessageType, OpCode, ResponseCode};
use hickory_proto::rr::rdata::{A, AAAA, CNAME, SRV};
use hickory_proto::rr::{Name, RData, Record, RecordType};

/// One resource record of the zone.
#[derive(Clone, Debug)]
pub enum Rr {
    A(Ipv4Addr),
    Aaaa(Ipv6Addr),
    Cname(String),
    Srv {
        priority: u16,
        weight: u16,
        port: u16,
        target: String,
    },
}

type Zone = HashMap<String, Vec<Rr>>;

pub struct DnsServer {
    addr: SocketAddr,
    zone: Arc<Mutex<Zone>>,
    queries: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

fn key(name: &str) -> String {
    name.trim_end_matches('.').to_ascii_lowercase()
}

fn name(s: &str) -> Option<Name> {
    Name::from_ascii(format!("{}.", key(s))).ok()
}

impl DnsServer {
    /// Serves on `ip` (a loopback address), on a port of the kernel's choice.
    pub fn start(ip: IpAddr) -> io::Result<DnsServer> {
        let sock = UdpSocket::bind(SocketAddr::new(ip, 0))?;
        sock.set_read_timeout(Some(Duration::from_millis(50)))?;
        let addr = sock.local_addr()?;
        let zone = Arc::new(Mutex::new(Zone::new()));
        let queries = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (zone, queries, stop) = (zone.clone(), queries.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut buf = [0u8; 4096];
                while !stop.load(Ordering::Relaxed) {
                    let Ok((n, peer)) = sock.recv_from(&mut buf) else {
                        continue;
                    };
                    queries.fetch_add(1, Ordering::Relaxed);
                    let reply = {
                        let z = zone.lock().unwrap_or_else(|e| e.into_inner());
                        answer(&z, &buf[..n])
                    };
                    if let Some(r) = reply {
                        let _ = sock.send_to(&r, peer);
                    }
                }
            })
        };
        Ok(DnsServer {
            addr,
            zone,
            queries,
            stop,
            thread: Some(thread),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves the same way over TCP on `ip` (DNS's 2-byte length framing, several queries per
    /// connection), on a port of the kernel's choice: [`DnsServer::addr`] is the TCP address.
    pub fn start_tcp(ip: IpAddr) -> io::Result<DnsServer> {
        let listener = std::net::TcpListener::bind(SocketAddr::new(ip, 0))?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let zone = Arc::new(Mutex::new(Zone::new()));
        let queries = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let thread = {
            let (zone, queries, stop) = (zone.clone(), queries.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut conns: Vec<JoinHandle<()>> = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let Ok((c, _)) = listener.accept() else {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    };
                    let (zone, queries, stop) = (zone.clone(), queries.clone(), stop.clone());
                    conns.push(std::thread::spawn(move || {
                        serve_tcp(c, &zone, &queries, &stop)
                    }));
                }
                for c in conns {
                    let _ = c.join();
                }
            })
        };
        Ok(DnsServer {
            addr,
            zone,
            queries,
            stop,
            thread: Some(thread),
        })
    }

    /// Replaces every record of `name`.
    pub fn set(&self, name: &str, rrs: Vec<Rr>) {
        self.zone
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(key(name), rrs);
    }

    /// Removes `name`: it answers NXDOMAIN from now on.
    pub fn remove(&self, name: &str) {
        self.zone
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&key(name));
    }

    pub fn queries(&self) -> u64 {
        self.queries.load(Ordering::Relaxed)
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn record(owner: &Name, rr: &Rr) -> Option<Record> {
    let data = match rr {
        Rr::A(ip) => RData::A(A(*ip)),
        Rr::Aaaa(ip) => RData::AAAA(AAAA(*ip)),
        Rr::Cname(t) => RData::CNAME(CNAME(name(t)?)),
        Rr::Srv {
            priority,
            weight,
            port,
            target,
        } => RData::SRV(SRV::new(*priority, *weight, *port, name(target)?)),
    };
    Some(Record::from_rdata(owner.clone(), 1, data))
}

fn matches(rr: &Rr, t: RecordType) -> bool {
    matches!(
        (rr, t),
        (Rr::A(_), RecordType::A)
            | (Rr::Aaaa(_), RecordType::AAAA)
            | (Rr::Srv { .. }, RecordType::SRV)
            | (Rr::Cname(_), _)
    )
}

/// One TCP connection: framed queries answered in order until the peer closes or the server
/// stops.
fn serve_tcp(
    mut c: std::net::TcpStream,
    zone: &Mutex<Zone>,
    queries: &AtomicU64,
    stop: &AtomicBool,
) {
    use std::io::{Read, Write};
    let _ = c.set_nonblocking(false);
    let _ = c.set_read_timeout(Some(Duration::from_millis(50)));
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = [0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        match c.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                continue;
            }
            Err(_) => return,
        }
        while buf.len() >= 2 {
            let len = usize::from(u16::from_be_bytes([buf[0], buf[1]]));
            if buf.len() < 2 + len {
                break;
            }
            let q: Vec<u8> = buf.drain(..2 + len).skip(2).collect();
            queries.fetch_add(1, Ordering::Relaxed);
            let reply = {
                let z = zone.lock().unwrap_or_else(|e| e.into_inner());
                answer(&z, &q)
            };
            if let Some(r) = reply {
                let mut framed = (r.len() as u16).to_be_bytes().to_vec();
                framed.extend_from_slice(&r);
                if c.write_all(&framed).is_err() {
                    return;
                }
            }
        }
    }
}

/// The reply to one query; SRV answers carry their targets' addresses as additional records.
fn answer(zone: &Zone, query: &[u8]) -> Option<Vec<u8>> {
    let q = Message::from_vec(query).ok()?;
    let question = q.queries().first()?.clone();
    let mut m = Message::new();
    m.set_id(q.id())
        .set_message_type(MessageType::Response)
        .set_op_code(OpCode::Query)
        .set_authoritative(true)
        .set_recursion_desired(q.recursion_desired());
    m.add_query(question.clone());
    let qt = question.query_type();
    let mut owner = question.name().clone();
    let mut k = key(&owner.to_ascii());
    // Follow CNAMEs inside the zone, as a recursive server would.
    for _ in 0..8 {
        let Some(rrs) = zone.get(&k) else {
            if owner == *question.name() {
                m.set_response_code(ResponseCode::NXDomain);
            }
            break;
        };
        let mut next = None;
        for rr in rrs.iter().filter(|rr| matches(rr, qt)) {
            m.add_answer(record(&owner, rr)?);
            if let Rr::Cname(t) = rr {
                next = Some(t.clone());
            }
            if let Rr::Srv { target, .. } = rr
                && let (Some(tn), Some(trrs)) = (name(target), zone.get(&key(target)))
            {
                for a in trrs.iter().filter(|r| matches!(r, Rr::A(_) | Rr::Aaaa(_))) {
                    m.add_additional(record(&tn, a)?);
                }
            }
        }
        match next {
            Some(t) => {
                owner = name(&t)?;
                k = key(&t);
            }
            None => break,
        }
    }
    m.to_vec().ok()
}
