//! `peers` sections: `-c` against HAProxy 2.6 on the same files (errors, warnings, exit
//! codes, the stick counter actions), and the peers protocol between portcullis and HAProxy 2.6
//! on loopback (updates both ways, every data type, a full resync for a restarted peer, over
//! TLS too), and reloads that keep the tables, also while a client keeps traffic flowing.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output};
use std::time::Duration;

use backend::{free_port, lo, wait_until};
use proxy::{Proc, TempDir, admin_cli};

const HAPROXY: &str = "/usr/sbin/haproxy";

fn run(bin: &str, file: &Path, extra: &[&str]) -> Output {
    Command::new(bin)
        .args(extra)
        .arg("-c")
        .arg("-f")
        .arg(file)
        .output()
        .expect("run the check")
}

/// The `[ALERT]`/`[WARNING]` lines without pids (HAProxy's version NOTICE lines left out).
fn diag_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| !l.contains("haproxy version is") && !l.contains("path to executable"))
        .map(|l| match (l.find('('), l.find(") : ")) {
            (Some(a), Some(b)) if a < b => format!("{}(PID{}", &l[..a], &l[b..]),
            _ => l.to_string(),
        })
        .collect()
}

const BASE: &str = "defaults\n mode http\n timeout client 1s\n timeout server 1s\n timeout connect 1s\nfrontend f\n bind 127.0.0.1:18080\n";

/// Every case runs with `-L lb1` on both sides, so the host name does not matter.
const CASES: &[&str] = &[
    "peers\n",
    "peers a/b\n peer lb1 127.0.0.1:10000\n",
    "peers p\n peer lb1 127.0.0.1:10000\npeers p\n peer lb1 127.0.0.1:10001\n",
    "peers p\n peer lb1 127.0.0.1:10000\n shards 2\n",
    "peers p\n peer lb1\n",
    "peers p\n peer lb1 1.2.3.4.5:10000\n",
    "peers p\n bind 127.0.0.1:10000\n peer lb1 127.0.0.1:10000\n",
    "peers p\n peer lb1 127.0.0.1:10000\n peer lb1 127.0.0.1:10001\n",
    "backend b\n stick-table type ip size 1k peers nope\n",
    "peers p\n peer other 127.0.0.1:10000\nbackend b\n stick-table type ip size 1k peers p\n",
    "peers p\n peer lb1 127.0.0.1:10000 check\n peer o 127.0.0.2:10000 check\n",
    "peers p\n peer lb1 127.0.0.1:10000\n table t type ip size 1k store http_req_rate(10s)\n table t type ip size 1k\nbackend b\n http-request track-sc0 src table p/t\n",
    "peers p\n peer lb1 127.0.0.1:10000\n disabled\n enable\n",
    "peers p\n peer lb1 127.0.0.1:10000\n disabled\nbackend b\n stick-table type ip size 1k peers p\n",
    "peers p\n default-bind v4v6\n default-server inter 3s\n bind 127.0.0.1:10000\n server lb1\n server o 127.0.0.2:10000\n",
    "peers p\n peer lb1 127.0.0.1\n",
    "peers p\n peer lb1 127.0.0.1:10000\n log 127.0.0.1 local0\n",
    "peers p\n peer lb1 127.0.0.1:10000\n log\n",
    "peers p\n peer lb1 127.0.0.1:10000\n log 127.0.0.1\n",
    "peers p\n peer lb1 127.0.0.1:10000\n log 127.0.0.1 nofac\n",
    "peers p\n peer lb1 127.0.0.1:10000\n log global\n",
    "peers p\n peer lb1 127.0.0.1:10000\n default-bind foo\n",
    "peers p\n bind 127.0.0.1:10000 foo\n server lb1\n",
    "peers p\n peer lb1 127.0.0.1:10000\n peer o 127.0.0.2:10000\nbackend b\n stick-table type ip size 1k peers p\nbackend c\n stick-table type ip size 1k peers p\n",
    "peers p\n server lb1 127.0.0.1:10000\n",
    "peers p\n peer\n",
    "peers p\n bind 127.0.0.1:10000\n bind 127.0.0.1:10001\n server lb1\n",
    "peers p\n peer lb1 127.0.0.1:10000\n table t type ip size 1k peers p\n",
    "peers p\n peer lb1 127.0.0.1:10000\n table\n",
    "peers p\n enabled\n peer lb1 127.0.0.1:10000\n",
    "backend b\n stick-table type ip size 1k\npeers p\n peer lb1 127.0.0.1:10000\n table b type ip size 1k\n",
    "peers p\n peer lb1 127.0.0.1:10000 shard 1\n",
    "peers p\nbackend b\n stick-table type ip size 1k peers p\n",
    "peers p\n peer lb1 127.0.0.1:10000\nglobal\n localpeer x\n",
    "global\n localpeer lb1\npeers p\n peer lb1 127.0.0.1:10000\n",
    "peers p\n peer a/b 127.0.0.1:10000\n",
    "peers p\n peer lb1 127.0.0.1:10000\n peer o 127.0.0.2:10000 init-addr none resolvers r\n",
    "peers p\n peer lb1 [::1]:10000\n peer o ipv6@::2:10000\n",
    "peers p\n peer lb1 127.0.0.1:10000\n peer o somehost.invalid:10000\n",
    "peers p\n peer lb1 127.0.0.1:10000\nbackend b\n stick-table type ip size 1k peers\n",
    "peers p\n peer lb1 127.0.0.1:10000\n peer o 127.0.0.2\n peer\n",
    "peers p\n peer lb1 127.0.0.1:10000\n table t type ip size 1k store gpc0,conn_cnt expire 30s\nbackend b\n stick-table type ip size 1k peers p store gpc0\n",
    // The stick counter actions (in frontend `f`).
    " stick-table type ip size 1k store gpc0,gpc1,gpt0,gpc0_rate(10s),http_err_rate(1m),bytes_in_cnt,server_id\n tcp-request connection sc-set-gpt0(0) 3\n tcp-request content sc-inc-gpc0(0)\n http-request sc-inc-gpc0\n http-request sc-inc-gpc1(2)\n http-request sc-set-gpt0(1) 5\n http-request sc-set-gpt0(0) src_conn_cnt\n",
    " stick-table type ip size 1k store gpc0\n http-request sc-inc-gpc0(3)\n",
    " stick-table type ip size 1k store gpc0\n http-request sc-inc-gpc0(x)\n",
    " stick-table type ip size 1k store gpt0\n http-request sc-set-gpt0(4) 5\n",
    " stick-table type ip size 1k store gpt0\n http-request sc-set-gpt0(0) foo(\n",
    " stick-table type ip size 1k store gpc0\n tcp-request connection sc-inc-gpc0(3)\n",
    " stick-table type ip size 1k store gpc0_rate\n",
    " stick-table type ip size 1k store bytes_out_rate(x)\n",
    // TLS on peers.
    "peers p\n bind 127.0.0.1:10000 ssl crt /nonexistent.pem\n default-server ssl verify none\n server lb1\n server o 127.0.0.2:10000\n",
    "peers p\n bind 127.0.0.1:10000 ssl crt\n server lb1\n",
    "peers p\n default-server ssl verify none\n peer lb1 127.0.0.1:10000\n peer o 127.0.0.2:10000\nbackend b\n stick-table type ip size 1k peers p\n",
];

#[test]
fn peers_sections_check_like_haproxy() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("notice: {HAPROXY} not found, differential test skipped");
        return;
    }
    let dir = std::env::temp_dir().join(format!("portcullis-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ours = env!("CARGO_BIN_EXE_portcullis");
    for (i, c) in CASES.iter().enumerate() {
        let f = dir.join(format!("p{i}.cfg"));
        std::fs::write(&f, format!("{BASE}{c}")).unwrap();
        let a = run(ours, &f, &["-L", "lb1"]);
        let b = run(HAPROXY, &f, &["-L", "lb1"]);
        assert_eq!(a.status.code(), b.status.code(), "case {i}:\n{c}");
        assert_eq!(diag_lines(&a), diag_lines(&b), "case {i}:\n{c}");
    }
    // Without `-L` the local peer is the host name, as in HAProxy.
    let f = dir.join("host.cfg");
    std::fs::write(
        &f,
        format!("{BASE}peers p\n peer nosuchhost 127.0.0.1:10000\n"),
    )
    .unwrap();
    let (a, b) = (run(ours, &f, &[]), run(HAPROXY, &f, &[]));
    assert_eq!(a.status.code(), b.status.code());
    assert_eq!(diag_lines(&a), diag_lines(&b));
    let _ = std::fs::remove_dir_all(&dir);
}

/// One HTTP/1.0 request from `src` (a 127/8 address): the status line.
fn request_from(src: IpAddr, to: SocketAddr) -> String {
    request_path(src, to, "/")
}

/// [`request_from`] for `path`.
fn request_path(src: IpAddr, to: SocketAddr, path: &str) -> String {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&SocketAddr::new(src, 0).into()).unwrap();
    sock.connect_timeout(&to.into(), Duration::from_secs(5))
        .unwrap();
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines().next().unwrap_or("").to_string()
}

/// Both processes share this configuration but for their name, sockets and frontend port.
fn peer_cfg(me: &str, sock: &Path, fe: u16, hap: u16, pc: u16) -> String {
    format!(
        "global\n localpeer {me}\n stats socket {} level admin\n\
         defaults\n mode http\n timeout client 5s\n timeout server 5s\n timeout connect 5s\n\
         peers mesh\n peer hap 127.0.0.1:{hap}\n peer pc 127.0.0.1:{pc}\n\
         frontend f\n bind 127.0.0.1:{fe}\n http-request track-sc0 src\n\
         http-request sc-inc-gpc0(0) if {{ path /inc }}\n http-request sc-set-gpt0(0) 7 if {{ path /gpt }}\n\
         http-request deny if {{ path /deny }}\n http-request return status 200\n\
         stick-table type ip size 1k expire 60s store gpt0,gpc0,conn_cnt,http_req_cnt,http_req_rate(10s),http_err_rate(10s),bytes_out_cnt peers mesh\n",
        sock.display()
    )
}

/// The line of `key` in `show table f` without the entry address and expiry; `rates`: with
/// the rates (which fade, so two reads far apart differ).
fn full_row(sock: &Path, key: &str, rates: bool) -> Option<String> {
    let out = admin_cli(sock, "show table f");
    out.lines()
        .find(|l| l.contains(&format!(" key={key} ")))
        .map(|l| {
            l.split(' ')
                .skip(1)
                .filter(|w| !w.starts_with("exp=") && (rates || !w.contains("_rate(")))
                .collect::<Vec<_>>()
                .join(" ")
        })
}

/// Waits until both sides show `key` alike, and returns the row.
fn same_row(a: &Path, b: &Path, key: &str, rates: bool, limit: Duration) -> Option<String> {
    let ok = wait_until(limit, || {
        let r = full_row(a, key, rates);
        r.is_some() && r == full_row(b, key, rates)
    });
    ok.then(|| full_row(a, key, rates)).flatten()
}

/// The line of `key` in `show table f`, counters only (entry address and expiry dropped).
fn row(sock: &Path, key: &str) -> Option<String> {
    let out = admin_cli(sock, "show table f");
    out.lines()
        .find(|l| l.contains(&format!(" key={key} ")))
        .map(|l| {
            l.split(' ')
                .filter(|w| w.starts_with("conn_cnt=") || w.starts_with("http_req"))
                .collect::<Vec<_>>()
                .join(" ")
        })
}

/// Waits (generously: a busy machine) until `key`'s row reads `want`.
fn wait_row(sock: &Path, key: &str, want: &str) -> bool {
    wait_row_for(sock, key, want, Duration::from_secs(10))
}

fn wait_row_for(sock: &Path, key: &str, want: &str, limit: Duration) -> bool {
    wait_until(limit, || row(sock, key).as_deref() == Some(want))
}

#[test]
fn stick_tables_sync_with_haproxy() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("notice: {HAPROXY} not found, interop test skipped");
        return;
    }
    let dir = TempDir::new("peers");
    let (hap_sock, pc_sock) = (dir.0.join("hap.sock"), dir.0.join("pc.sock"));
    let (hap_peer, pc_peer, hap_fe, pc_fe) = (free_port(), free_port(), free_port(), free_port());
    let hap_cfg = peer_cfg("hap", &hap_sock, hap_fe, hap_peer, pc_peer);
    let pc_cfg = peer_cfg("pc", &pc_sock, pc_fe, hap_peer, pc_peer);
    let Some(hap) = Proc::haproxy(&hap_cfg, lo(hap_peer)) else {
        return;
    };
    let pc = Proc::portcullis(&pc_cfg, lo(pc_peer));
    let a: IpAddr = "127.0.0.21".parse().unwrap();
    let b: IpAddr = "127.0.0.22".parse().unwrap();

    // HAProxy → portcullis.
    for _ in 0..3 {
        assert!(request_from(a, lo(hap_fe)).contains("200"));
    }
    let want = "conn_cnt=3 http_req_cnt=3 http_req_rate(10000)=3";
    assert!(wait_row(&hap_sock, "127.0.0.21", want));
    assert!(
        wait_row(&pc_sock, "127.0.0.21", want),
        "portcullis: {:?}",
        row(&pc_sock, "127.0.0.21")
    );
    // portcullis → HAProxy.
    for _ in 0..2 {
        assert!(request_from(b, lo(pc_fe)).contains("200"));
    }
    let want_b = "conn_cnt=2 http_req_cnt=2 http_req_rate(10000)=2";
    assert!(
        wait_row(&hap_sock, "127.0.0.22", want_b),
        "haproxy: {:?}",
        row(&hap_sock, "127.0.0.22")
    );
    // An update of an entry both know goes on counting from the synced values.
    assert!(request_from(a, lo(pc_fe)).contains("200"));
    let want4 = "conn_cnt=4 http_req_cnt=4 http_req_rate(10000)=4";
    assert!(
        wait_row(&hap_sock, "127.0.0.21", want4),
        "haproxy: {:?}",
        row(&hap_sock, "127.0.0.21")
    );

    // gpc0, gpt0, http_err_rate and bytes_out_cnt, each way.
    let (c, d): (IpAddr, IpAddr) = ("127.0.0.23".parse().unwrap(), "127.0.0.24".parse().unwrap());
    for (src, fe) in [(c, hap_fe), (d, pc_fe)] {
        for path in ["/inc", "/inc", "/gpt"] {
            assert!(request_path(src, lo(fe), path).contains("200"));
        }
        assert!(request_path(src, lo(fe), "/deny").contains("403"));
    }
    for key in ["127.0.0.23", "127.0.0.24"] {
        let r = same_row(&hap_sock, &pc_sock, key, true, Duration::from_secs(10));
        let r = r.unwrap_or_else(|| {
            panic!(
                "{key}: haproxy {:?}, portcullis {:?}",
                full_row(&hap_sock, key, true),
                full_row(&pc_sock, key, true)
            )
        });
        assert!(
            r.contains(" gpt0=7 gpc0=2 conn_cnt=4 http_req_cnt=4 http_req_rate(10000)=4 http_err_rate(10000)=1 bytes_out_cnt="),
            "{key}: {r}"
        );
    }
    let synced_c = full_row(&hap_sock, "127.0.0.23", false);
    let synced_d = full_row(&hap_sock, "127.0.0.24", false);

    // `show peers`: HAProxy's layout, newest peer first, the session up.
    let heads = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with("  0x"))
            .map(|l| l.split(' ').nth(3).unwrap_or("").to_string())
            .collect()
    };
    // Both sides connect at start; a collision may leave a peer inactive for a moment.
    assert!(wait_until(Duration::from_secs(10), || {
        heads(&admin_cli(&pc_sock, "show peers"))
            == ["id=pc(local,inactive)", "id=hap(remote,active)"]
            && heads(&admin_cli(&hap_sock, "show peers"))
                == ["id=pc(remote,active)", "id=hap(local,inactive)"]
    }));
    let shown = admin_cli(&pc_sock, "show peers");
    assert!(shown.contains(" id=mesh disabled=0 "), "{shown}");
    assert!(shown.contains("        shared tables:\n"), "{shown}");
    assert!(shown.contains(" remote_data=0x9616\n"), "{shown}");
    assert_eq!(
        admin_cli(&pc_sock, "show peers nope"),
        admin_cli(&hap_sock, "show peers nope")
    );

    // A restarted portcullis learns everything again from HAProxy (full resync).
    drop(pc);
    let pc = Proc::portcullis(&pc_cfg, lo(pc_peer));
    assert!(
        wait_row(&pc_sock, "127.0.0.21", want4),
        "after restart: {:?}",
        row(&pc_sock, "127.0.0.21")
    );
    assert!(wait_row(&pc_sock, "127.0.0.22", want_b));
    for (key, want) in [("127.0.0.23", &synced_c), ("127.0.0.24", &synced_d)] {
        assert!(
            wait_until(Duration::from_secs(10), || full_row(&pc_sock, key, false)
                == *want),
            "after restart, {key}: {:?} instead of {want:?}",
            full_row(&pc_sock, key, false)
        );
    }

    // A restarted HAProxy asks portcullis for everything (after its own 5 s wait for a local
    // predecessor) and gets it.
    drop(hap);
    let hap = Proc::haproxy(&hap_cfg, lo(hap_peer)).expect("haproxy again");
    assert!(
        wait_row_for(&hap_sock, "127.0.0.21", want4, Duration::from_secs(30)),
        "haproxy after restart: {:?}",
        row(&hap_sock, "127.0.0.21")
    );
    assert!(wait_row(&hap_sock, "127.0.0.22", want_b));
    for (key, want) in [("127.0.0.23", &synced_c), ("127.0.0.24", &synced_d)] {
        assert!(
            wait_until(Duration::from_secs(10), || full_row(&hap_sock, key, false)
                == *want),
            "haproxy after restart, {key}: {:?} instead of {want:?}",
            full_row(&hap_sock, key, false)
        );
    }
    drop(pc);
    drop(hap);
}

/// `show table f` without what differs between processes (entry addresses, expiry).
fn table_rows(sock: &Path) -> Vec<String> {
    admin_cli(sock, "show table f")
        .lines()
        .filter_map(|l| l.split_once(": key=").map(|(_, r)| r))
        .map(|r| {
            r.split(' ')
                .filter(|w| !w.starts_with("exp="))
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect()
}

/// The configuration file (under `dir`) of a process alone in its `local` peers section
/// (`peers`: its lines there) as `lb1`: frontend `f` on `fe` tracks sources (then `rules`) in
/// its table storing `store`; the admin socket exposes the listeners for `-x`.
fn lb1_cfg(dir: &Path, sock: &Path, peers: &str, fe: u16, rules: &[&str], store: &str) -> PathBuf {
    let rules: String = rules.iter().map(|r| format!(" {r}\n")).collect();
    let cfg = dir.join("p.cfg");
    std::fs::write(
        &cfg,
        format!(
            "global\n stats socket {} level admin expose-fd listeners\n\
             defaults\n mode http\n timeout client 5s\n timeout server 5s\n timeout connect 5s\n\
             peers local\n {peers}\n\
             frontend f\n bind 127.0.0.1:{fe}\n http-request track-sc0 src\n{rules}\
             stick-table type ip size 1k expire 5m store {store} peers local\n",
            sock.display()
        ),
    )
    .unwrap();
    cfg
}

/// portcullis as the local peer `lb1` on `cfg`, with `extra` arguments.
fn start_lb1(cfg: &Path, extra: &[String]) -> Child {
    proxy::portcullis_command(
        &[&["-L".to_string(), "lb1".to_string()], extra].concat(),
        cfg,
    )
    .spawn()
    .expect("start portcullis")
}

/// Waits until the admin socket and the frontend on `fe` accept connections.
fn listening(sock: &Path, fe: u16) -> bool {
    wait_until(Duration::from_secs(10), || {
        std::os::unix::net::UnixStream::connect(sock).is_ok() && TcpStream::connect(lo(fe)).is_ok()
    })
}

/// Reload `n`: a new `lb1` started with `-x <sock> -sf <old>`; asserts that the old process
/// leaves (once its tables are handed over) and that the new one still runs. The new one.
fn reload_lb1(cfg: &Path, sock: &Path, old: &mut Child, n: usize) -> Child {
    let args = [
        "-x".to_string(),
        sock.display().to_string(),
        "-sf".to_string(),
        old.id().to_string(),
    ];
    let mut next = start_lb1(cfg, &args);
    let gone = wait_until(Duration::from_secs(15), || {
        old.try_wait().ok().flatten().is_some()
    });
    assert!(gone, "reload {n}: the old process did not stop");
    assert!(
        next.try_wait().ok().flatten().is_none(),
        "reload {n}: new process died"
    );
    next
}

/// Reloads (`-x <sock> -sf <old>`): the old process teaches the new one its tables through
/// the local peer, so `show table` reads the same after each of five reloads.
#[test]
fn tables_survive_reloads() {
    let dir = TempDir::new("peers-reload");
    let sock = dir.0.join("admin.sock");
    let (peer, fe) = (free_port(), free_port());
    let cfg = lb1_cfg(
        &dir.0,
        &sock,
        &format!("peer lb1 127.0.0.1:{peer}"),
        fe,
        &["http-request return status 200"],
        "conn_cnt,http_req_cnt,http_req_rate(5m)",
    );
    let mut cur = start_lb1(&cfg, &[]);
    assert!(listening(&sock, fe));
    for (i, src) in ["127.0.0.31", "127.0.0.32", "127.0.0.33"]
        .iter()
        .enumerate()
    {
        for _ in 0..=i {
            assert!(request_from(src.parse().unwrap(), lo(fe)).contains("200"));
        }
    }
    // Once every connection is released (use=0).
    assert!(wait_until(Duration::from_secs(10), || {
        let rows = table_rows(&sock);
        rows.len() == 3 && rows.iter().all(|r| r.contains(" use=0 "))
    }));
    let want = table_rows(&sock);
    for n in 1..=5 {
        cur = reload_lb1(&cfg, &sock, &mut cur, n);
        assert!(
            wait_until(Duration::from_secs(10), || table_rows(&sock) == want),
            "reload {n}: {:?} instead of {want:?}",
            table_rows(&sock)
        );
    }
    let _ = cur.kill();
    let _ = cur.wait();
}

/// One request from `src` that never panics (a load thread's): the status line, if any.
fn try_request(src: IpAddr, to: SocketAddr, path: &str) -> Option<String> {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).ok()?;
    sock.bind(&SocketAddr::new(src, 0).into()).ok()?;
    sock.connect_timeout(&to.into(), Duration::from_secs(5))
        .ok()?;
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.0\r\n\r\n").as_bytes())
        .ok()?;
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out.lines().next().map(str::to_string)
}

/// Five `-x -sf` reloads while a client keeps sending tracked requests: at each, once the
/// old process is gone, the load pauses and `show table` must read what the client did (every
/// answered request counted once, nothing lost in the hand-over) and the idle sources' rows
/// must be those of the start.
#[test]
fn tables_survive_reloads_under_load() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let dir = TempDir::new("peers-reload-load");
    let sock = dir.0.join("admin.sock");
    let (peer, fe) = (free_port(), free_port());
    let cfg = lb1_cfg(
        &dir.0,
        &sock,
        &format!("peer lb1 127.0.0.1:{peer}"),
        fe,
        &[
            "http-request sc-inc-gpc0(0)",
            "http-request deny if { path /deny }",
            "http-request return status 200",
        ],
        "gpc0,conn_cnt,http_req_cnt,http_req_rate(5m),http_err_cnt,bytes_out_cnt",
    );
    let mut cur = start_lb1(&cfg, &[]);
    assert!(listening(&sock, fe));
    // Idle sources: what they leave must not move.
    for (src, path) in [("127.0.0.36", "/"), ("127.0.0.37", "/deny")] {
        let st = request_path(src.parse().unwrap(), lo(fe), path);
        assert!(st.contains("200") || st.contains("403"), "{st}");
    }
    let idle = |rows: &[String]| -> Vec<String> {
        rows.iter()
            .filter(|r| !r.starts_with("127.0.0.35 "))
            .cloned()
            .collect()
    };
    assert!(wait_until(Duration::from_secs(10), || {
        let rows = table_rows(&sock);
        rows.len() == 2 && rows.iter().all(|r| r.contains(" use=0 "))
    }));
    let idle_want = idle(&table_rows(&sock));

    // The load: one tracked request after another from 127.0.0.35, each on a new connection.
    let (stop, pause, paused) = (
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
        Arc::new(AtomicBool::new(false)),
    );
    let (ok, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let load = {
        let (stop, pause, paused) = (stop.clone(), pause.clone(), paused.clone());
        let (ok, failed) = (ok.clone(), failed.clone());
        let to = lo(fe);
        std::thread::spawn(move || {
            let src: IpAddr = "127.0.0.35".parse().unwrap();
            while !stop.load(Ordering::SeqCst) {
                if pause.load(Ordering::SeqCst) {
                    paused.store(true, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
                paused.store(false, Ordering::SeqCst);
                match try_request(src, to, "/") {
                    Some(l) if l.contains(" 200 ") => ok.fetch_add(1, Ordering::SeqCst),
                    _ => failed.fetch_add(1, Ordering::SeqCst),
                };
                std::thread::sleep(Duration::from_millis(2));
            }
        })
    };
    // Pauses the load and waits until its last request is released; the loaded row.
    let quiesce = || -> Option<String> {
        pause.store(true, Ordering::SeqCst);
        assert!(wait_until(Duration::from_secs(10), || paused.load(Ordering::SeqCst)));
        let mut last = None;
        wait_until(Duration::from_secs(10), || {
            let rows = table_rows(&sock);
            last = rows.iter().find(|r| r.starts_with("127.0.0.35 ")).cloned();
            last.as_deref().is_some_and(|r| r.contains(" use=0 "))
        });
        last
    };
    let field = |row: &str, name: &str| -> u64 {
        row.split(' ')
            .find_map(|w| w.strip_prefix(name))
            .and_then(|v| v.parse().ok())
            .unwrap_or(u64::MAX)
    };
    for n in 1..=5 {
        // Some traffic before the reload, and during it.
        let before = ok.load(Ordering::SeqCst);
        assert!(wait_until(Duration::from_secs(10), || ok
            .load(Ordering::SeqCst)
            >= before + 5));
        cur = reload_lb1(&cfg, &sock, &mut cur, n);
        let row = quiesce().unwrap_or_default();
        let (done, lost) = (ok.load(Ordering::SeqCst), failed.load(Ordering::SeqCst));
        // Every answered request is counted once; a request cut by the reload may or may not
        // have been.
        for name in [
            "conn_cnt=",
            "http_req_cnt=",
            "gpc0=",
            "http_req_rate(300000)=",
        ] {
            let v = field(&row, name);
            assert!(
                (done..=done + lost).contains(&v),
                "reload {n}: {name}{v} for {done} answered ({lost} failed): {row}"
            );
        }
        assert_eq!(field(&row, "http_err_cnt="), 0, "{row}");
        let per = field(&row, "bytes_out_cnt=") / field(&row, "http_req_cnt=").max(1);
        assert_eq!(
            field(&row, "bytes_out_cnt="),
            per * field(&row, "http_req_cnt="),
            "every answer has the same size: {row}"
        );
        assert_eq!(idle(&table_rows(&sock)), idle_want, "reload {n}");
        // Identical while nothing moves.
        std::thread::sleep(Duration::from_millis(200));
        let again = table_rows(&sock);
        assert!(again.contains(&row), "reload {n}: {again:?} vs {row}");
        pause.store(false, Ordering::SeqCst);
    }
    stop.store(true, Ordering::SeqCst);
    load.join().expect("load thread");
    assert!(ok.load(Ordering::SeqCst) >= 25);
    let _ = cur.kill();
    let _ = cur.wait();
}

/// Two portcullis processes sharing a `peers` section's own table (`table t`, tracked as
/// `mesh/t`, named `t` on the wire): updates go both ways.
#[test]
fn portcullis_pair_syncs_a_peers_table() {
    let dir = TempDir::new("peers-pair");
    let (s1, s2) = (dir.0.join("a.sock"), dir.0.join("b.sock"));
    let (p1, p2, f1, f2) = (free_port(), free_port(), free_port(), free_port());
    let cfg = |me: &str, sock: &Path, fe: u16| {
        format!(
            "global\n localpeer {me}\n stats socket {} level admin\n\
             defaults\n mode http\n timeout client 5s\n timeout server 5s\n timeout connect 5s\n\
             peers mesh\n peer a 127.0.0.1:{p1}\n peer b 127.0.0.1:{p2}\n\
             table t type ip size 1k expire 60s store http_req_cnt\n\
             frontend f\n bind 127.0.0.1:{fe}\n http-request track-sc0 src table mesh/t\n http-request return status 200\n",
            sock.display()
        )
    };
    let a = Proc::portcullis(&cfg("a", &s1, f1), lo(p1));
    let b = Proc::portcullis(&cfg("b", &s2, f2), lo(p2));
    let rows = |sock: &Path| -> Vec<String> {
        admin_cli(sock, "show table mesh/t")
            .lines()
            .filter_map(|l| l.split_once(": key=").map(|(_, r)| r.to_string()))
            .map(|r| {
                r.split(' ')
                    .filter(|w| !w.starts_with("exp="))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    };
    assert!(request_from("127.0.0.41".parse().unwrap(), lo(f1)).contains("200"));
    assert!(request_from("127.0.0.42".parse().unwrap(), lo(f2)).contains("200"));
    assert!(request_from("127.0.0.42".parse().unwrap(), lo(f2)).contains("200"));
    let want = [
        "127.0.0.41 use=0 http_req_cnt=1",
        "127.0.0.42 use=0 http_req_cnt=2",
    ];
    assert!(
        wait_until(Duration::from_secs(10), || rows(&s1) == want
            && rows(&s2) == want),
        "a: {:?}, b: {:?}",
        rows(&s1),
        rows(&s2)
    );
    drop((a, b));
}

/// A migration step: portcullis reloaded into HAProxy 2.6 (`haproxy -x <sock> -sf <pid>`)
/// hands its tables to HAProxy through the local peer.
#[test]
fn reload_into_haproxy_keeps_the_tables() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("notice: {HAPROXY} not found, interop test skipped");
        return;
    }
    let dir = TempDir::new("peers-migrate");
    let sock = dir.0.join("admin.sock");
    let (peer, fe) = (free_port(), free_port());
    let cfg = lb1_cfg(
        &dir.0,
        &sock,
        &format!("peer lb1 127.0.0.1:{peer}"),
        fe,
        &["http-request return status 200"],
        "conn_cnt,http_req_cnt,http_req_rate(5m)",
    );
    let mut old = start_lb1(&cfg, &[]);
    assert!(listening(&sock, fe));
    for _ in 0..2 {
        assert!(request_from("127.0.0.51".parse().unwrap(), lo(fe)).contains("200"));
    }
    assert!(wait_until(Duration::from_secs(10), || {
        table_rows(&sock) == ["127.0.0.51 use=0 conn_cnt=2 http_req_cnt=2 http_req_rate(300000)=2"]
    }));
    let mut new = Command::new(HAPROXY)
        .args(["-L", "lb1", "-db", "-f"])
        .arg(&cfg)
        .arg("-x")
        .arg(&sock)
        .arg("-sf")
        .arg(old.id().to_string())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("start haproxy");
    assert!(
        wait_until(Duration::from_secs(15), || old
            .try_wait()
            .ok()
            .flatten()
            .is_some()),
        "portcullis did not stop"
    );
    let got = wait_until(Duration::from_secs(10), || {
        table_rows(&sock) == ["127.0.0.51 use=0 conn_cnt=2 http_req_cnt=2 http_req_rate(300000)=2"]
    });
    let rows = table_rows(&sock);
    let _ = new.kill();
    let _ = new.wait();
    assert!(got, "haproxy: {rows:?}");
}

/// Verifying peers' client certificates (`ca-file`, `verify` on the listener) is not built:
/// starting with it fails, naming the line and the feature.
#[test]
fn peer_certificate_verification_is_refused_at_start() {
    let dir = TempDir::new("peers-ssl");
    let cfg = dir.0.join("p.cfg");
    // Refused before any certificate is read: these files only have to exist.
    let (crt, ca) = (dir.0.join("peer.pem"), dir.0.join("ca.pem"));
    std::fs::write(&crt, "").unwrap();
    std::fs::write(&ca, "").unwrap();
    std::fs::write(
        &cfg,
        format!(
            "{BASE} stick-table type ip size 1k peers p\npeers p\n bind 127.0.0.1:{} ssl crt {} ca-file {} verify required\n default-server ssl verify none\n server lb1\n server o 127.0.0.2:{}\n",
            free_port(),
            crt.display(),
            ca.display(),
            free_port()
        ),
    )
    .unwrap();
    let mut c = proxy::portcullis_command(&["-db", "-L", "lb1"], &cfg);
    let mut child = c
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start portcullis");
    let exited = wait_until(Duration::from_secs(10), || {
        child.try_wait().ok().flatten().is_some()
    });
    if !exited {
        let _ = child.kill();
    }
    let out = child.wait_with_output().expect("output");
    assert!(exited, "portcullis started with ca-file on a peers bind");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            ":10] : 'peers bind ca-file' is not supported yet by portcullis (a 'peers' section)."
        ),
        "{err}"
    );
}

/// A self-signed certificate and its key in one PEM file under `dir` (None without openssl).
fn self_signed(dir: &Path) -> Option<std::path::PathBuf> {
    let (key, crt, pem) = (dir.join("k.pem"), dir.join("c.pem"), dir.join("peer.pem"));
    let made = Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", "/CN=peer",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&crt)
        .output();
    if !made.is_ok_and(|o| o.status.success()) {
        eprintln!("notice: openssl unavailable, TLS test skipped");
        return None;
    }
    let mut both = std::fs::read(&crt).ok()?;
    both.extend(std::fs::read(&key).ok()?);
    std::fs::write(&pem, both).ok()?;
    Some(pem)
}

/// Reloads with a TLS peers listener: the old process hands its tables over through TLS.
#[test]
fn tables_survive_reloads_over_tls() {
    let dir = TempDir::new("peers-reload-tls");
    let Some(pem) = self_signed(&dir.0) else {
        return;
    };
    let sock = dir.0.join("admin.sock");
    let (peer, fe) = (free_port(), free_port());
    let cfg = lb1_cfg(
        &dir.0,
        &sock,
        &format!(
            "bind 127.0.0.1:{peer} ssl crt {}\n server lb1",
            pem.display()
        ),
        fe,
        &["http-request return status 200"],
        "conn_cnt,http_req_cnt",
    );
    let mut cur = start_lb1(&cfg, &[]);
    assert!(listening(&sock, fe));
    for _ in 0..3 {
        assert!(request_from("127.0.0.71".parse().unwrap(), lo(fe)).contains("200"));
    }
    let want = vec!["127.0.0.71 use=0 conn_cnt=3 http_req_cnt=3".to_string()];
    assert!(wait_until(Duration::from_secs(10), || table_rows(&sock) == want));
    for n in 1..=2 {
        cur = reload_lb1(&cfg, &sock, &mut cur, n);
        assert!(
            wait_until(Duration::from_secs(10), || table_rows(&sock) == want),
            "reload {n}: {:?}",
            table_rows(&sock)
        );
    }
    let _ = cur.kill();
    let _ = cur.wait();
}

/// Peers over TLS with HAProxy 2.6: `bind … ssl crt <pem>` and `default-server ssl verify
/// none` on both sides (a self-signed certificate made by `openssl`); updates both ways.
#[test]
fn stick_tables_sync_with_haproxy_over_tls() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("notice: {HAPROXY} not found, interop test skipped");
        return;
    }
    let dir = TempDir::new("peers-tls");
    let Some(pem) = self_signed(&dir.0) else {
        return;
    };
    let (hap_sock, pc_sock) = (dir.0.join("hap.sock"), dir.0.join("pc.sock"));
    let (hap_peer, pc_peer, hap_fe, pc_fe) = (free_port(), free_port(), free_port(), free_port());
    let cfg = |me: &str, sock: &Path, fe: u16| {
        let (mine, hap, pc) = if me == "hap" {
            (hap_peer, String::new(), format!(" 127.0.0.1:{pc_peer}"))
        } else {
            (pc_peer, format!(" 127.0.0.1:{hap_peer}"), String::new())
        };
        format!(
            "global\n localpeer {me}\n stats socket {} level admin\n\
             defaults\n mode http\n timeout client 5s\n timeout server 5s\n timeout connect 5s\n\
             peers mesh\n bind 127.0.0.1:{mine} ssl crt {}\n default-server ssl verify none\n server hap{hap}\n server pc{pc}\n\
             frontend f\n bind 127.0.0.1:{fe}\n http-request track-sc0 src\n http-request return status 200\n\
             stick-table type ip size 1k expire 60s store conn_cnt,http_req_cnt,http_req_rate(10s) peers mesh\n",
            sock.display(),
            pem.display()
        )
    };
    let Some(hap) = Proc::haproxy(&cfg("hap", &hap_sock, hap_fe), lo(hap_peer)) else {
        return;
    };
    let pc = Proc::portcullis(&cfg("pc", &pc_sock, pc_fe), lo(pc_peer));
    let (a, b): (IpAddr, IpAddr) = ("127.0.0.61".parse().unwrap(), "127.0.0.62".parse().unwrap());
    for _ in 0..3 {
        assert!(request_from(a, lo(hap_fe)).contains("200"));
    }
    let want = "conn_cnt=3 http_req_cnt=3 http_req_rate(10000)=3";
    assert!(
        wait_row(&pc_sock, "127.0.0.61", want),
        "portcullis: {:?}",
        row(&pc_sock, "127.0.0.61")
    );
    for _ in 0..2 {
        assert!(request_from(b, lo(pc_fe)).contains("200"));
    }
    let want_b = "conn_cnt=2 http_req_cnt=2 http_req_rate(10000)=2";
    assert!(
        wait_row(&hap_sock, "127.0.0.62", want_b),
        "haproxy: {:?}",
        row(&hap_sock, "127.0.0.62")
    );
    // portcullis' listener speaks TLS only: a plain hello gets no status line.
    let mut plain = TcpStream::connect(lo(pc_peer)).unwrap();
    plain
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    plain.write_all(b"HAProxyS 2.1\npc\nhap 1 1\n").unwrap();
    let mut got = Vec::new();
    let _ = plain.read_to_end(&mut got);
    assert!(!got.starts_with(b"200"), "{got:?}");
    drop(pc);
    drop(hap);
}

/// Tables keyed by `string` and `integer` (tracked from request headers) sync both ways with
/// HAProxy 2.6: the key types travel as HAProxy sends them (a string with its length, an
/// integer in network order).
#[test]
fn string_and_integer_keys_sync_with_haproxy() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("notice: {HAPROXY} not found, interop test skipped");
        return;
    }
    let dir = TempDir::new("peers-keys");
    let (hap_sock, pc_sock) = (dir.0.join("hap.sock"), dir.0.join("pc.sock"));
    let (hap_peer, pc_peer, hap_fe, pc_fe) = (free_port(), free_port(), free_port(), free_port());
    let cfg = |me: &str, sock: &Path, fe: u16| {
        format!(
            "global\n localpeer {me}\n stats socket {} level admin\n\
             defaults\n mode http\n timeout client 5s\n timeout server 5s\n timeout connect 5s\n\
             peers mesh\n peer hap 127.0.0.1:{hap_peer}\n peer pc 127.0.0.1:{pc_peer}\n\
             frontend f\n bind 127.0.0.1:{fe}\n http-request track-sc0 req.hdr(x-user) table ts\n\
             http-request track-sc1 req.hdr(x-id) table ti\n http-request return status 200\n\
             backend ts\n stick-table type string len 16 size 1k expire 60s store http_req_cnt peers mesh\n\
             backend ti\n stick-table type integer size 1k expire 60s store http_req_cnt peers mesh\n",
            sock.display()
        )
    };
    let Some(_hap) = Proc::haproxy(&cfg("hap", &hap_sock, hap_fe), lo(hap_peer)) else {
        return;
    };
    let _pc = Proc::portcullis(&cfg("pc", &pc_sock, pc_fe), lo(pc_peer));
    let ask = |fe: u16, user: &str, id: &str| {
        let r = proxy::request(
            lo(fe),
            &format!(
                "GET / HTTP/1.1\r\nHost: x\r\nX-User: {user}\r\nX-Id: {id}\r\nConnection: close\r\n\r\n"
            ),
        );
        assert_eq!(r.status, 200);
    };
    let rows = |sock: &Path, t: &str| -> Vec<String> {
        admin_cli(sock, &format!("show table {t}"))
            .lines()
            .filter(|l| l.contains(" key="))
            .map(|l| {
                l.split(' ')
                    .filter(|w| w.starts_with("key=") || w.starts_with("http_req_cnt="))
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    };
    for _ in 0..2 {
        ask(hap_fe, "alice", "42");
    }
    ask(pc_fe, "bob=1", "4294967295");
    let want_s = ["key=alice http_req_cnt=2", "key=bob\\=1 http_req_cnt=1"];
    let want_i = ["key=42 http_req_cnt=2", "key=4294967295 http_req_cnt=1"];
    for sock in [&hap_sock, &pc_sock] {
        assert!(
            wait_until(Duration::from_secs(10), || rows(sock, "ts") == want_s
                && rows(sock, "ti") == want_i),
            "{}: {:?} {:?}",
            sock.display(),
            rows(sock, "ts"),
            rows(sock, "ti")
        );
    }
}

/// The arrays (`gpt(<n>)`, `gpc(<n>)`, `gpc_rate(<n>,<p>)`) travel both ways with HAProxy 2.6:
/// announced with their sizes (and the rates' period), each element in a row in updates.
#[test]
fn gpt_gpc_arrays_sync_with_haproxy() {
    if !Path::new(HAPROXY).exists() {
        eprintln!("notice: {HAPROXY} not found, interop test skipped");
        return;
    }
    let dir = TempDir::new("peers-arrays");
    let (hap_sock, pc_sock) = (dir.0.join("hap.sock"), dir.0.join("pc.sock"));
    let (hap_peer, pc_peer, hap_fe, pc_fe) = (free_port(), free_port(), free_port(), free_port());
    let cfg = |me: &str, sock: &Path, fe: u16| {
        format!(
            "global\n localpeer {me}\n stats socket {} level admin\n\
             defaults\n mode http\n timeout client 5s\n timeout server 5s\n timeout connect 5s\n\
             peers mesh\n peer hap 127.0.0.1:{hap_peer}\n peer pc 127.0.0.1:{pc_peer}\n\
             frontend f\n bind 127.0.0.1:{fe}\n http-request track-sc0 req.hdr(x-user) table ts\n\
             http-request sc-inc-gpc(1,0) if {{ path /inc }}\n\
             http-request sc-set-gpt(2,0) 9 if {{ path /gpt }}\n\
             http-request sc-set-gpt(0,0) 4 if {{ path /gpt }}\n\
             http-request return status 200\n\
             backend ts\n stick-table type string len 16 size 1k expire 60s store gpt(3),gpc(2),gpc_rate(2,10s),http_req_cnt peers mesh\n",
            sock.display()
        )
    };
    let Some(_hap) = Proc::haproxy(&cfg("hap", &hap_sock, hap_fe), lo(hap_peer)) else {
        return;
    };
    let _pc = Proc::portcullis(&cfg("pc", &pc_sock, pc_fe), lo(pc_peer));
    let ask = |fe: u16, user: &str, path: &str| {
        let r = proxy::request(
            lo(fe),
            &format!(
                "GET {path} HTTP/1.1\r\nHost: x\r\nX-User: {user}\r\nConnection: close\r\n\r\n"
            ),
        );
        assert_eq!(r.status, 200);
    };
    // The counters as they read, a rate as whether it counted anything (rates fade).
    let rows = |sock: &Path| -> Vec<String> {
        admin_cli(sock, "show table ts")
            .lines()
            .filter(|l| l.contains(" key="))
            .map(|l| {
                l.split(' ')
                    .filter(|w| {
                        ["key=", "gpt", "gpc", "http_req_cnt="]
                            .iter()
                            .any(|p| w.starts_with(p))
                    })
                    .map(|w| match w.split_once(")=") {
                        Some((r, v)) => format!("{r})={}", if v == "0" { "0" } else { "n" }),
                        None => w.to_string(),
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    };
    // Learnt from HAProxy.
    for p in ["/inc", "/inc", "/gpt"] {
        ask(hap_fe, "alice", p);
    }
    // Taught to HAProxy.
    for p in ["/inc", "/gpt", "/"] {
        ask(pc_fe, "bob", p);
    }
    let want = [
        "key=alice http_req_cnt=3 gpt0=4 gpt1=0 gpt2=9 gpc0=0 gpc1=2 gpc0_rate(10000)=0 gpc1_rate(10000)=n",
        "key=bob http_req_cnt=3 gpt0=4 gpt1=0 gpt2=9 gpc0=0 gpc1=1 gpc0_rate(10000)=0 gpc1_rate(10000)=n",
    ];
    for sock in [&hap_sock, &pc_sock] {
        assert!(
            wait_until(Duration::from_secs(10), || rows(sock) == want),
            "{}: {:?}",
            sock.display(),
            rows(sock)
        );
    }
}
