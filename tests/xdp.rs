//! The XDP filter (`portcullis-xdp`) in network namespaces this test creates: a server namespace
//! running portcullis, joined by veth pairs to a flooding namespace (10.77.1.0/24) and a client
//! namespace (10.77.2.0/24); the same links carry IPv6 (fd00:77::/64 toward the flood,
//! fd00:77:0:2::/64 toward the client). Only these namespaces and their veths are touched, and
//! they are deleted in every path (a guard's Drop).
//!
//! - a flood at 10x the configured SYN rate has its excess dropped by XDP (the drop count within
//!   10% of the expected one) while a client under its limit connects every time;
//! - the same two for IPv6 sources (a `type ipv6` table, an IPv6 deny prefix);
//! - a denied prefix is dropped by XDP, and so is a source missing from an allow file;
//! - a per-source map too small for the sources fails closed, counted;
//! - `packet-rate` drops a source's packets past the limit;
//! - a reload adopts the pinned link and per-source rates;
//! - a `conn_rate` a peer teaches is written into the per-source map;
//! - the same rate limit without `portcullis-xdp` is enforced in userspace.
//!
//! Needs root (network namespaces, XDP): without it the tests say so and pass without running.
//! Runs with the engine from `PORTCULLIS_IO`.

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const FE_PORT: u16 = 18080;
const BE_PORT: u16 = 18081;
const METRICS_PORT: u16 = 18090;
/// `sc_conn_rate(0) gt LIMIT` over `conn_rate(1s)`.
const LIMIT: u32 = 20;

fn usable() -> bool {
    // SAFETY: no arguments.
    let euid = unsafe { libc::geteuid() };
    if euid != 0 {
        eprintln!("SKIPPED: the XDP tests need root (netns, veth, XDP); euid is {euid}");
        return false;
    }
    if Command::new("ip").arg("-V").output().is_err() {
        eprintln!("SKIPPED: the XDP tests need iproute2 (`ip`)");
        return false;
    }
    true
}

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("run ip");
    assert!(
        out.status.success(),
        "ip {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The namespaces of one test; deleted (with their veths) on drop.
struct Net {
    srv: String,
    flood: String,
    client: String,
    /// The server's interfaces toward the flood and the client namespaces.
    if_flood: String,
    if_client: String,
}

impl Net {
    fn new(tag: char) -> Net {
        let id = std::process::id() % 100_000;
        let n = Net {
            srv: format!("pcx{id}{tag}s"),
            flood: format!("pcx{id}{tag}f"),
            client: format!("pcx{id}{tag}c"),
            if_flood: format!("px{id}{tag}sf"),
            if_client: format!("px{id}{tag}sc"),
        };
        // Leftovers of an earlier run with the same pid.
        for ns in [&n.srv, &n.flood, &n.client] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
        for ns in [&n.srv, &n.flood, &n.client] {
            ip(&["netns", "add", ns]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
        }
        let fs = format!("px{id}{tag}fs");
        let cs = format!("px{id}{tag}cs");
        for (mine, peer, peer_ns, net, net6) in [
            (&n.if_flood, &fs, &n.flood, "10.77.1", "fd00:77:"),
            (&n.if_client, &cs, &n.client, "10.77.2", "fd00:77:0:2:"),
        ] {
            ip(&[
                "-n", &n.srv, "link", "add", mine, "type", "veth", "peer", "name", peer, "netns",
                peer_ns,
            ]);
            ip(&[
                "-n",
                &n.srv,
                "addr",
                "add",
                &format!("{net}.1/24"),
                "dev",
                mine,
            ]);
            ip(&[
                "-n",
                peer_ns,
                "addr",
                "add",
                &format!("{net}.2/24"),
                "dev",
                peer,
            ]);
            // No duplicate address detection: the addresses are usable at once.
            for (ns, dev, host) in [(&n.srv, mine, 1), (peer_ns, peer, 2)] {
                ip(&[
                    "-n",
                    ns,
                    "-6",
                    "addr",
                    "add",
                    &format!("{net6}:{host}/64"),
                    "dev",
                    dev,
                    "nodad",
                ]);
            }
            ip(&["-n", &n.srv, "link", "set", mine, "up"]);
            ip(&["-n", peer_ns, "link", "set", peer, "up"]);
        }
        // More sources in the flooding namespace (the map-full test).
        for last in 3..=5 {
            ip(&[
                "-n",
                &n.flood,
                "addr",
                "add",
                &format!("10.77.1.{last}/24"),
                "dev",
                &fs,
            ]);
        }
        n
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in [&self.srv, &self.flood, &self.client] {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}

/// Runs `f` on a thread that entered network namespace `ns`: sockets it creates live there.
fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
    let path = format!("/var/run/netns/{ns}");
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).expect("open netns");
        // SAFETY: a valid namespace descriptor; only this thread changes namespace.
        let r = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
        assert_eq!(r, 0, "setns {path}: {}", std::io::Error::last_os_error());
        f()
    })
    .join()
    .expect("namespace thread")
}

/// An echo server on 127.0.0.1:BE_PORT in the server namespace, until dropped.
struct Echo(Arc<AtomicBool>);

impl Echo {
    fn start(ns: &str) -> Echo {
        let stop = Arc::new(AtomicBool::new(false));
        let st = Arc::clone(&stop);
        let l = in_ns(ns, || {
            TcpListener::bind(("127.0.0.1", BE_PORT)).expect("bind echo")
        });
        l.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            while !st.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((mut s, _)) => {
                        std::thread::spawn(move || {
                            let _ = s.set_nonblocking(false);
                            let mut buf = [0u8; 4096];
                            while let Ok(n) = s.read(&mut buf) {
                                if n == 0 || s.write_all(&buf[..n]).is_err() {
                                    break;
                                }
                            }
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Echo(stop)
    }
}

impl Drop for Echo {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// portcullis running in the server namespace; killed (by pid) on drop.
struct Proxy {
    child: Child,
    sock: PathBuf,
    dir: PathBuf,
}

impl Proxy {
    fn start(net: &Net, global: &str, fe: &str) -> Proxy {
        Self::start_with(net, global, fe, "admin", &[])
    }

    /// `name` tells processes of one test apart (their admin socket and files).
    fn start_with(net: &Net, global: &str, fe: &str, name: &str, args: &[String]) -> Proxy {
        let dir = std::env::temp_dir().join(format!(
            "portcullis-xdp-{}-{}-{name}",
            std::process::id(),
            net.srv
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let sock = dir.join("admin.sock");
        let cfg = format!(
            "global\n    stats socket {} level admin expose-fd listeners\n{global}\ndefaults\n    mode tcp\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend fe\n    bind :{FE_PORT}\n{fe}    default_backend be\n\nbackend be\n    server s 127.0.0.1:{BE_PORT}\n\nfrontend metrics\n    mode http\n    bind 127.0.0.1:{METRICS_PORT}\n    http-request use-service prometheus-exporter\n",
            sock.display()
        );
        let path = dir.join("xdp.cfg");
        std::fs::write(&path, cfg).unwrap();
        let engine = std::env::var("PORTCULLIS_IO").unwrap_or_else(|_| "auto".into());
        let child = Command::new("ip")
            .args(["netns", "exec", &net.srv])
            .arg(env!("CARGO_BIN_EXE_portcullis"))
            .args(["--io", &engine, "-db"])
            .args(args)
            .arg("-f")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("spawn portcullis");
        let p = Proxy { child, sock, dir };
        // The admin socket is bound once the listeners (and the filter) are.
        let t0 = Instant::now();
        while UnixStream::connect(&p.sock).is_err() {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "portcullis did not start"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        p
    }

    fn cli(&self, cmd: &str) -> String {
        let mut s = UnixStream::connect(&self.sock).expect("admin socket");
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    }

    /// A `show xdp` counter.
    fn xdp(&self, name: &str) -> u64 {
        let out = self.cli("show xdp");
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}: ")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {name} in show xdp:\n{out}"))
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Only a child not yet reaped: its pid cannot have been reused.
        if matches!(self.child.try_wait(), Ok(None)) {
            // SAFETY: signalling our own running child by its pid.
            unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        }
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(5) {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The server's address on the link of `src` (the flood's or the client's, IPv4 or IPv6).
fn server_for(src: IpAddr) -> SocketAddr {
    let ip: IpAddr = match src {
        IpAddr::V4(a) if a.octets()[2] == 2 => "10.77.2.1".parse().unwrap(),
        IpAddr::V4(_) => "10.77.1.1".parse().unwrap(),
        IpAddr::V6(a) if a.segments()[3] == 2 => "fd00:77:0:2::1".parse().unwrap(),
        IpAddr::V6(_) => "fd00:77::1".parse().unwrap(),
    };
    SocketAddr::new(ip, FE_PORT)
}

/// Connects from `src` in the current namespace, sends a line and reads it back.
fn echo_ok(src: &str, timeout: Duration) -> bool {
    let from = SocketAddr::new(src.parse().unwrap(), 0);
    let to = server_for(from.ip());
    let sock = socket2::Socket::new(
        socket2::Domain::for_address(to),
        socket2::Type::STREAM,
        None,
    )
    .unwrap();
    sock.bind(&from.into()).unwrap();
    if sock.connect_timeout(&to.into(), timeout).is_err() {
        return false;
    }
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(timeout)).unwrap();
    if s.write_all(b"ping\n").is_err() {
        return false;
    }
    let mut buf = [0u8; 5];
    matches!(s.read_exact(&mut buf), Ok(()) if &buf == b"ping\n")
}

/// `per_sec` SYNs a second from 10.77.1.2 for `secs`: see [`flood_from`].
fn flood(ns: &str, per_sec: u32, secs: u32) -> u32 {
    flood_from(ns, "10.77.1.2", per_sec, secs)
}

/// `per_sec` SYNs a second from `src` for `secs`: non-blocking connects, each dropped after
/// 300 ms (before the SYN would be retransmitted). Returns how many were sent.
fn flood_from(ns: &str, src: &str, per_sec: u32, secs: u32) -> u32 {
    let from = SocketAddr::new(src.parse().unwrap(), 0);
    in_ns(ns, move || {
        let to = server_for(from.ip());
        let gap = Duration::from_secs(1) / per_sec;
        let start = Instant::now();
        let mut live: Vec<(Instant, socket2::Socket)> = Vec::new();
        let mut sent = 0;
        for i in 0..per_sec * secs {
            let due = start + gap * i;
            if let Some(d) = due.checked_duration_since(Instant::now()) {
                std::thread::sleep(d);
            }
            let s = socket2::Socket::new(
                socket2::Domain::for_address(to),
                socket2::Type::STREAM,
                None,
            )
            .unwrap();
            s.set_nonblocking(true).unwrap();
            s.bind(&from.into()).unwrap();
            let _ = s.connect(&to.into());
            sent += 1;
            live.push((Instant::now(), s));
            live.retain(|(t, _)| t.elapsed() < Duration::from_millis(300));
        }
        sent
    })
}

/// `n` echo round trips from the client namespace, `per_sec` a second; how many succeeded.
fn client(ns: &str, n: u32, per_sec: u32) -> u32 {
    client_from(ns, "10.77.2.2", n, per_sec)
}

fn client_from(ns: &str, src: &'static str, n: u32, per_sec: u32) -> u32 {
    in_ns(ns, move || {
        let mut ok = 0;
        for _ in 0..n {
            if echo_ok(src, Duration::from_secs(3)) {
                ok += 1;
            }
            std::thread::sleep(Duration::from_secs(1) / per_sec);
        }
        ok
    })
}

fn rate_rules(period: &str) -> String {
    rate_rules_of("ip", period)
}

fn rate_rules_of(table_type: &str, period: &str) -> String {
    format!(
        "    stick-table type {table_type} size 1k expire 30s store conn_rate({period}),conn_cur\n    tcp-request connection track-sc0 src\n    tcp-request connection reject if {{ sc_conn_rate(0) gt {LIMIT} }}\n"
    )
}

#[test]
fn syn_flood_is_dropped_by_xdp_and_clients_under_the_limit_connect() {
    if !usable() {
        return;
    }
    let net = Net::new('a');
    let _echo = Echo::start(&net.srv);
    let p = Proxy::start(
        &net,
        &format!(
            "    portcullis-xdp {} {} mode generic",
            net.if_flood, net.if_client
        ),
        &rate_rules("1s"),
    );
    assert!(
        p.cli("show xdp").starts_with("Status: attached to "),
        "{}",
        p.cli("show xdp")
    );
    // 10x the limit for 3 s, while a client connects 5 times a second.
    let fl = net.flood.clone();
    let flooder = std::thread::spawn(move || flood(&fl, LIMIT * 10, 3));
    let ok = client(&net.client, 15, 5);
    let sent = flooder.join().unwrap();
    assert_eq!(ok, 15, "the client under its limit connects every time");
    // As HAProxy counts every connection of a tracked source, a flood past the limit keeps the
    // rate above it: only the first LIMIT SYNs of the first second pass.
    let expected = u64::from(sent - LIMIT);
    let dropped = p.xdp("DroppedSynRate");
    eprintln!("sent {sent} SYNs; show xdp:\n{}", p.cli("show xdp"));
    let diff = dropped.abs_diff(expected);
    assert!(
        diff * 10 <= expected,
        "dropped {dropped}, expected {expected} of {sent} SYNs\n{}",
        p.cli("show xdp")
    );
    assert_eq!(p.xdp("Syns"), u64::from(sent) + 15, "{}", p.cli("show xdp"));
    assert_eq!(p.xdp("DroppedMapFull"), 0);
    // The exporter page carries the same counters.
    let page = in_ns(&net.srv, || {
        let mut s = TcpStream::connect(("127.0.0.1", METRICS_PORT)).expect("metrics");
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out
    });
    assert!(
        page.contains(&format!(
            "portcullis_xdp_packets_total{{verdict=\"syn_rate\"}} {dropped}\n"
        )),
        "{page}"
    );
}

/// The IPv4 flood test over IPv6: a `type ipv6` table, the listener on `:::port` too.
#[test]
fn ipv6_syn_flood_is_dropped_by_xdp_and_clients_under_the_limit_connect() {
    if !usable() {
        return;
    }
    let net = Net::new('i');
    let _echo = Echo::start(&net.srv);
    let p = Proxy::start(
        &net,
        &format!(
            "    portcullis-xdp {} {} mode generic",
            net.if_flood, net.if_client
        ),
        &format!("    bind :::{FE_PORT}\n{}", rate_rules_of("ipv6", "1s")),
    );
    assert!(
        p.cli("show xdp").starts_with("Status: attached to "),
        "{}",
        p.cli("show xdp")
    );
    let fl = net.flood.clone();
    let flooder = std::thread::spawn(move || flood_from(&fl, "fd00:77::2", LIMIT * 10, 3));
    let ok = client_from(&net.client, "fd00:77:0:2::2", 15, 5);
    let sent = flooder.join().unwrap();
    assert_eq!(
        ok, 15,
        "the IPv6 client under its limit connects every time"
    );
    let expected = u64::from(sent - LIMIT);
    let dropped = p.xdp("DroppedSynRate");
    eprintln!("sent {sent} IPv6 SYNs; show xdp:\n{}", p.cli("show xdp"));
    let diff = dropped.abs_diff(expected);
    assert!(
        diff * 10 <= expected,
        "dropped {dropped}, expected {expected} of {sent} SYNs\n{}",
        p.cli("show xdp")
    );
    assert_eq!(p.xdp("Syns"), u64::from(sent) + 15, "{}", p.cli("show xdp"));
    assert_eq!(p.xdp("DroppedMapFull"), 0);
    // Both sources are tracked, by their IPv6 address.
    assert_eq!(p.xdp("Sources"), 2, "{}", p.cli("show xdp"));
}

/// An IPv6 deny prefix: the flood link's /64 is dropped by XDP; IPv6 on the client's
/// (unfiltered) link is served.
#[test]
fn ipv6_denied_prefix_is_dropped_by_xdp() {
    if !usable() {
        return;
    }
    let net = Net::new('j');
    let _echo = Echo::start(&net.srv);
    let p = Proxy::start(
        &net,
        &format!("    portcullis-xdp {} mode generic", net.if_flood),
        &format!(
            "    bind :::{FE_PORT}\n    tcp-request connection reject if {{ src fd00:77::/64 }}\n"
        ),
    );
    let denied = in_ns(&net.flood, || {
        echo_ok("fd00:77::2", Duration::from_millis(1500))
    });
    assert!(!denied);
    assert!(p.xdp("DroppedDenied") >= 1, "{}", p.cli("show xdp"));
    assert_eq!(p.xdp("Passed"), 0, "{}", p.cli("show xdp"));
    // IPv4 from the same namespace is outside the prefix: served.
    assert!(in_ns(&net.flood, || echo_ok(
        "10.77.1.2",
        Duration::from_secs(3)
    )));
    assert!(p.xdp("Passed") >= 1, "{}", p.cli("show xdp"));
    assert!(in_ns(&net.client, || echo_ok(
        "fd00:77:0:2::2",
        Duration::from_secs(3)
    )));
}

#[test]
fn denied_prefix_is_dropped_by_xdp() {
    if !usable() {
        return;
    }
    let net = Net::new('b');
    let _echo = Echo::start(&net.srv);
    let p = Proxy::start(
        &net,
        &format!("    portcullis-xdp {} mode generic", net.if_flood),
        "    tcp-request connection reject if { src 10.77.1.0/28 }\n",
    );
    let denied = in_ns(&net.flood, || {
        echo_ok("10.77.1.2", Duration::from_millis(1500))
    });
    assert!(!denied);
    // Dropped before TCP: no reset, the SYN (and its retransmission) vanish.
    assert!(p.xdp("DroppedDenied") >= 1, "{}", p.cli("show xdp"));
    assert_eq!(p.xdp("Passed"), 0, "{}", p.cli("show xdp"));
    // The interface without the filter is still served.
    assert!(in_ns(&net.client, || echo_ok(
        "10.77.2.2",
        Duration::from_secs(3)
    )));
}

#[test]
fn a_full_source_map_fails_closed_and_is_counted() {
    if !usable() {
        return;
    }
    let net = Net::new('c');
    let _echo = Echo::start(&net.srv);
    let p = Proxy::start(
        &net,
        &format!(
            "    portcullis-xdp {} mode generic max-sources 2",
            net.if_flood
        ),
        &rate_rules("10s"),
    );
    let got = in_ns(&net.flood, || {
        ["10.77.1.2", "10.77.1.3", "10.77.1.4", "10.77.1.5"]
            .iter()
            .map(|s| echo_ok(s, Duration::from_millis(800)))
            .collect::<Vec<_>>()
    });
    assert_eq!(got, [true, true, false, false], "{}", p.cli("show xdp"));
    assert!(p.xdp("DroppedMapFull") >= 2, "{}", p.cli("show xdp"));
    assert_eq!(p.xdp("Sources"), 2);
    assert_eq!(p.xdp("MaxSources"), 2);
}

#[test]
fn without_xdp_the_same_rate_limit_holds_in_userspace() {
    if !usable() {
        return;
    }
    let net = Net::new('d');
    let _echo = Echo::start(&net.srv);
    let p = Proxy::start(&net, "", &rate_rules("1s"));
    assert!(
        p.cli("show xdp").starts_with("Status: off"),
        "{}",
        p.cli("show xdp")
    );
    let fl = net.flood.clone();
    let flooder = std::thread::spawn(move || flood(&fl, LIMIT * 10, 3));
    let ok = client(&net.client, 15, 5);
    let sent = flooder.join().unwrap();
    assert_eq!(ok, 15, "the client under its limit connects every time");
    // The flooding source is over its rate: refused by the userspace rule.
    assert!(!in_ns(&net.flood, || echo_ok(
        "10.77.1.2",
        Duration::from_secs(2)
    )));
    let table = p.cli("show table fe key 10.77.1.2");
    let rate: u64 = table
        .split_whitespace()
        .find_map(|w| w.strip_prefix("conn_rate(1000)="))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{table}"));
    assert!(rate > u64::from(LIMIT), "{table} (sent {sent})");
}

/// A bpffs instance of the test's own, mounted before the processes start so that both see it
/// (each `ip netns exec` copies the mounts); unmounted on drop.
struct BpfDir(PathBuf);

impl BpfDir {
    fn mount(tag: &str) -> BpfDir {
        let p = std::env::temp_dir().join(format!("portcullis-bpf-{}-{tag}", std::process::id()));
        std::fs::create_dir_all(&p).unwrap();
        let st = Command::new("mount")
            .args(["-t", "bpf", "bpf"])
            .arg(&p)
            .status()
            .expect("mount");
        assert!(st.success(), "mount bpffs on {}", p.display());
        BpfDir(p)
    }
}

impl Drop for BpfDir {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

/// A reload (`-x <old admin socket> -sf <old pid>`) adopts the filter: the new process' program
/// replaces the old one on the pinned link, the per-source rates carry over (a source over its
/// rate stays dropped), the old process leaves the pins to the new one, and the last process to
/// stop removes them.
#[test]
fn a_reload_adopts_the_filter_and_its_rates() {
    if !usable() {
        return;
    }
    let net = Net::new('e');
    let _echo = Echo::start(&net.srv);
    let bpf = BpfDir::mount("e");
    let global = format!(
        "    portcullis-xdp {} mode generic pin-dir {}",
        net.if_flood,
        bpf.0.display()
    );
    let rules = rate_rules("10s");
    let a = Proxy::start_with(&net, &global, &rules, "a", &[]);
    let link = bpf.0.join(format!("link-{}", net.if_flood));
    assert!(link.exists(), "the attachment is pinned");
    // 25 connections in a row: past the 20th, dropped.
    let got: Vec<bool> = in_ns(&net.flood, || {
        (0..25)
            .map(|_| echo_ok("10.77.1.2", Duration::from_millis(300)))
            .collect()
    });
    assert_eq!(
        got.iter().filter(|ok| **ok).count(),
        20,
        "{}",
        a.cli("show xdp")
    );
    let dropped_a = a.xdp("DroppedSynRate");
    assert!(dropped_a >= 5, "{}", a.cli("show xdp"));
    let old_pid = a.child.id().to_string();
    let b = Proxy::start_with(
        &net,
        &global,
        &rules,
        "b",
        &[
            "-x".into(),
            a.sock.display().to_string(),
            "-sf".into(),
            old_pid,
        ],
    );
    assert!(
        b.cli("show xdp").starts_with("Status: attached to "),
        "{}",
        b.cli("show xdp")
    );
    // The counters and the source's rate came along.
    assert!(
        b.xdp("DroppedSynRate") >= dropped_a,
        "{}",
        b.cli("show xdp")
    );
    assert_eq!(b.xdp("Sources"), 1, "{}", b.cli("show xdp"));
    // The old process finishes and leaves the pins to the new one.
    let mut a = a;
    let t0 = Instant::now();
    while !matches!(a.child.try_wait(), Ok(Some(_))) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the old process did not stop"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        link.exists(),
        "the old process must not unpin the new one's link"
    );
    // Still over its rate: dropped by the new program, and counted there.
    let before = b.xdp("DroppedSynRate");
    assert!(!in_ns(&net.flood, || echo_ok(
        "10.77.1.2",
        Duration::from_millis(300)
    )));
    assert!(b.xdp("DroppedSynRate") > before, "{}", b.cli("show xdp"));
    // A source under its rate is served by the new process.
    assert!(in_ns(&net.flood, || echo_ok(
        "10.77.1.3",
        Duration::from_secs(2)
    )));
    drop(b);
    assert!(!link.exists(), "the last process removes its pinned link");
    assert!(!bpf.0.join("XDP_SRC").exists());
    drop(a);
}

/// `packet-rate <n>`: a source's packets past n a second are dropped, and counted.
#[test]
fn packet_rate_drops_the_excess() {
    if !usable() {
        return;
    }
    let net = Net::new('g');
    let _echo = Echo::start(&net.srv);
    let p = Proxy::start(
        &net,
        &format!(
            "    portcullis-xdp {} mode generic packet-rate 30",
            net.if_flood
        ),
        "",
    );
    assert!(
        p.cli("show xdp")
            .contains("Rule: port 18080 (fe): packets over 30/s"),
        "{}",
        p.cli("show xdp")
    );
    let sent = flood(&net.flood, 200, 1);
    // Every packet counts, dropped ones too, so past the first 30 the source stays over the
    // rate: the SYNs past them are dropped, and so are the handshakes' ACKs.
    assert_eq!(p.xdp("Passed"), 30, "{}", p.cli("show xdp"));
    let dropped = p.xdp("DroppedPacketRate");
    assert!(
        dropped >= u64::from(sent) - 30,
        "{dropped} of {sent}\n{}",
        p.cli("show xdp")
    );
}

/// `reject if !{ src -f <file> }`: a source missing from the allow file is dropped by XDP, a
/// listed one is served.
#[test]
fn allow_list_file_is_enforced_by_xdp() {
    if !usable() {
        return;
    }
    let net = Net::new('h');
    let _echo = Echo::start(&net.srv);
    let list = std::env::temp_dir().join(format!("portcullis-xdp-allow-{}", std::process::id()));
    std::fs::write(&list, "# the client network only\n10.77.2.0/24\n").unwrap();
    let p = Proxy::start(
        &net,
        &format!(
            "    portcullis-xdp {} {} mode generic",
            net.if_flood, net.if_client
        ),
        &format!(
            "    tcp-request connection reject if !{{ src -f {} }}\n",
            list.display()
        ),
    );
    assert!(!in_ns(&net.flood, || echo_ok(
        "10.77.1.2",
        Duration::from_millis(800)
    )));
    assert!(in_ns(&net.client, || echo_ok(
        "10.77.2.2",
        Duration::from_secs(3)
    )));
    assert!(p.xdp("DroppedNotAllowed") >= 1, "{}", p.cli("show xdp"));
    assert!(p.xdp("Passed") >= 1, "{}", p.cli("show xdp"));
    let _ = std::fs::remove_file(&list);
}

/// A peer's `conn_rate` re-seeds the per-source map: a second process (`b`, no XDP) shares the
/// table through a `peers` section; `set table` there puts 10.77.1.2 far over the limit, and
/// the filtering process, which never saw that source, drops its very first SYN in XDP.
#[test]
fn a_synced_conn_rate_seeds_the_xdp_map() {
    if !usable() {
        return;
    }
    let net = Net::new('g');
    let _echo = Echo::start(&net.srv);
    let peers = "peers mesh\n    peer a 127.0.0.1:18095\n    peer b 127.0.0.1:18096\n";
    let global = format!(
        "    portcullis-xdp {} mode generic\n    localpeer a\n{peers}",
        net.if_flood
    );
    let table = format!(
        "    stick-table type ip size 1k expire 30s store conn_rate(10s),conn_cur peers mesh\n    tcp-request connection track-sc0 src\n    tcp-request connection reject if {{ sc_conn_rate(0) gt {LIMIT} }}\n"
    );
    let a = Proxy::start_with(&net, &global, &table, "a", &[]);
    assert!(
        a.cli("show xdp").starts_with("Status: attached to "),
        "{}",
        a.cli("show xdp")
    );
    // `b`: the same table, listening on loopback only.
    let dir = std::env::temp_dir().join(format!(
        "portcullis-xdp-{}-{}-b",
        std::process::id(),
        net.srv
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let sock_b = dir.join("admin.sock");
    let cfg_b = dir.join("b.cfg");
    std::fs::write(
        &cfg_b,
        format!(
            "global\n    stats socket {} level admin\n    localpeer b\n{peers}defaults\n    mode tcp\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend fe\n    bind 127.0.0.1:18097\n{table}    default_backend be\n\nbackend be\n    server s 127.0.0.1:{BE_PORT}\n",
            sock_b.display()
        ),
    )
    .unwrap();
    let engine = std::env::var("PORTCULLIS_IO").unwrap_or_else(|_| "auto".into());
    let child = Command::new("ip")
        .args(["netns", "exec", &net.srv])
        .arg(env!("CARGO_BIN_EXE_portcullis"))
        .args(["--io", &engine, "-db", "-f"])
        .arg(&cfg_b)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn portcullis b");
    // Reuses Proxy's cleanup (kill by pid, remove the directory).
    let b = Proxy {
        child,
        sock: sock_b,
        dir,
    };
    let t0 = Instant::now();
    while UnixStream::connect(&b.sock).is_err() {
        assert!(t0.elapsed() < Duration::from_secs(10), "b did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(b.cli("set table fe key 10.77.1.2 data.conn_rate 500"), "\n");
    // `a` learns it (peers push every 100 ms; generous for a busy machine).
    let learnt = |p: &Proxy| {
        p.cli("show table fe key 10.77.1.2")
            .contains(" conn_rate(10000)=500 ")
    };
    let t0 = Instant::now();
    while !learnt(&a) {
        assert!(
            t0.elapsed() < Duration::from_secs(15),
            "a did not learn the rate: {}",
            a.cli("show table fe")
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(a.xdp("DroppedSynRate"), 0);
    // The first SYNs from that source: dropped by XDP, not by the userspace rule.
    assert!(!in_ns(&net.flood, || echo_ok(
        "10.77.1.2",
        Duration::from_millis(300)
    )));
    assert!(a.xdp("DroppedSynRate") >= 1, "{}", a.cli("show xdp"));
    // Another source is served.
    assert!(in_ns(&net.flood, || echo_ok(
        "10.77.1.3",
        Duration::from_secs(2)
    )));
    drop(b);
    drop(a);
}
