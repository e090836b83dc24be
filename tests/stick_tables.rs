//! Stick tables enforced in userspace over loopback: seed 004's `http-request deny deny_status
//! 429` past `sc_http_req_rate(0)`, `tcp-request connection reject` past `sc_conn_rate(0)`, a
//! `src` deny list and a `!{ src -f <file> }` allow list, and `show table` / `clear table` on the
//! admin socket. Runs with the engine from `PORTCULLIS_IO`.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{Read, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Duration;

use backend::{HttpNode, HttpOpts, TcpEcho, free_port, lo, wait_until};
use proxy::{Proc, TempDir, get};

fn cli(sock: &Path, cmd: &str) -> String {
    wait_until(Duration::from_secs(5), || UnixStream::connect(sock).is_ok());
    let mut s = UnixStream::connect(sock).expect("connect admin socket");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(format!("{cmd}\n").as_bytes()).unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// `0x55…: key=` → `ADDR: key=` (the entry address differs per run).
fn mask(s: &str) -> String {
    s.lines()
        .map(|l| match l.split_once(": key=") {
            Some((a, rest)) if a.starts_with("0x") => format!("ADDR: key={rest}"),
            _ => l.to_string(),
        })
        .map(|l| {
            // exp counts down: keep its magnitude only.
            match l.split_once(" exp=") {
                Some((a, rest)) => {
                    let (n, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                    let n: u64 = n.parse().unwrap_or(0);
                    format!("{a} exp={} {tail}", if n > 0 { "LIVE" } else { "0" })
                }
                None => l,
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// A connection from `src` (a 127/8 address) to `to`: whether the echo server behind the proxy
/// answered (false: the proxy reset or closed it).
fn echoes(src: IpAddr, to: SocketAddr) -> bool {
    let sock = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    sock.bind(&SocketAddr::new(src, 0).into()).unwrap();
    if sock.connect(&to.into()).is_err() {
        return false;
    }
    let mut s: TcpStream = sock.into();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    if s.write_all(b"ping").is_err() {
        return false;
    }
    let mut buf = [0u8; 4];
    matches!(s.read_exact(&mut buf), Ok(()) if &buf == b"ping")
}

#[test]
fn http_req_rate_denies_with_429_and_show_table() {
    let dir = TempDir::new("stick-http");
    let sock = dir.0.join("admin.sock");
    let node = HttpNode::start(lo(free_port()), HttpOpts::named("n1")).unwrap();
    let port = free_port();
    let cfg = format!(
        "global\n    stats socket {} level admin\n\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend fe\n    bind 127.0.0.1:{port}\n    stick-table type ip size 100k expire 1m store http_req_rate(10s)\n    http-request track-sc0 src\n    acl too_many sc_http_req_rate(0) gt 3\n    http-request deny deny_status 429 if too_many\n    default_backend be\n\nbackend be\n    server s1 {}\n",
        sock.display(),
        node.addr()
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    let codes: Vec<u16> = (0..6).map(|_| get(lo(port), "/").status).collect();
    assert_eq!(codes, [200, 200, 200, 429, 429, 429]);
    assert_eq!(
        node.request_count(),
        3,
        "denied requests never reach the server"
    );
    assert_eq!(
        cli(&sock, "show table"),
        "# table: fe, type: ip, size:102400, used:1\n\n"
    );
    // The last session releases its entry once its reply is sent: `use` drops to 0 just after.
    let want = "# table: fe, type: ip, size:102400, used:1\nADDR: key=127.0.0.1 use=0 exp=LIVE http_req_rate(10000)=6\n";
    let deadline = std::time::Instant::now() + Duration::from_secs(3);
    while mask(&cli(&sock, "show table fe")) != want && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(mask(&cli(&sock, "show table fe")), want);
    assert_eq!(
        mask(&cli(&sock, "show table fe data.http_req_rate gt 10")),
        "# table: fe, type: ip, size:102400, used:1\n"
    );
    assert_eq!(cli(&sock, "show table nope"), "No such table\n\n");
    assert_eq!(cli(&sock, "clear table fe key 127.0.0.1"), "\n");
    assert_eq!(
        cli(&sock, "show table fe"),
        "# table: fe, type: ip, size:102400, used:0\n\n"
    );
    // A cleared entry starts over.
    assert_eq!(get(lo(port), "/").status, 200);
}

#[test]
fn conn_rate_rejects_and_src_lists() {
    let dir = TempDir::new("stick-tcp");
    let sock = dir.0.join("admin.sock");
    let allow = dir.0.join("allow.lst");
    std::fs::write(
        &allow,
        "# who may connect\n127.0.0.1\n127.0.0.2\n127.0.0.4/32\n",
    )
    .unwrap();
    let echo = TcpEcho::start(lo(free_port())).unwrap();
    let port = free_port();
    let cfg = format!(
        "global\n    stats socket {} level admin\n\ndefaults\n    mode tcp\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend fe\n    bind 127.0.0.1:{port}\n    stick-table type ip size 1k expire 30s store conn_rate(10s),conn_cur\n    tcp-request connection reject if {{ src 127.0.0.2 }}\n    tcp-request connection reject if !{{ src -f {} }}\n    tcp-request connection track-sc0 src\n    tcp-request connection reject if {{ sc_conn_rate(0) gt 3 }}\n    default_backend be\n\nbackend be\n    server s1 {}\n",
        sock.display(),
        allow.display(),
        echo.addr()
    );
    let _p = Proc::portcullis(&cfg, lo(port));
    let to = lo(port);
    let one: IpAddr = "127.0.0.1".parse().unwrap();
    // The harness' readiness probe connected once from 127.0.0.1 already.
    let got: Vec<bool> = (0..5).map(|_| echoes(one, to)).collect();
    assert_eq!(got, [true, true, false, false, false]);
    // Denied prefix, and a source missing from the allow file.
    assert!(!echoes("127.0.0.2".parse().unwrap(), to));
    assert!(!echoes("127.0.0.3".parse().unwrap(), to));
    // Another allowed source has its own rate.
    assert!(echoes("127.0.0.4".parse().unwrap(), to));
    // Sessions end (and release their entry) shortly after the client closes.
    let want = "# table: fe, type: ip, size:1024, used:2\nADDR: key=127.0.0.1 use=0 exp=LIVE conn_rate(10000)=6 conn_cur=0\nADDR: key=127.0.0.4 use=0 exp=LIVE conn_rate(10000)=1 conn_cur=0\n";
    assert!(
        wait_until(Duration::from_secs(3), || mask(&cli(
            &sock,
            "show table fe"
        )) == want),
        "{}",
        cli(&sock, "show table fe")
    );
    // A connection in progress holds its entry (use=1, conn_cur=1).
    let held = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    held.bind(&lo(0).into()).ok();
    let four: IpAddr = "127.0.0.4".parse().unwrap();
    let held = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
        .and_then(|s| s.bind(&SocketAddr::new(four, 0).into()).map(|_| s))
        .and_then(|s| s.connect(&to.into()).map(|_| s))
        .unwrap_or(held);
    assert!(
        wait_until(Duration::from_secs(3), || {
            mask(&cli(&sock, "show table fe key 127.0.0.4"))
                .contains("key=127.0.0.4 use=1 exp=LIVE conn_rate(10000)=2 conn_cur=1")
        }),
        "{}",
        cli(&sock, "show table fe")
    );
    drop(held);
}

/// The same config on HAProxy 2.6 and portcullis, the same requests, the same `show table` and
/// `clear table` replies (entry addresses and the ms left to expiry masked).
#[test]
fn show_table_replies_match_haproxy() {
    let dir = TempDir::new("stick-diff");
    let run = |bin: &str| -> Option<Vec<String>> {
        let sock = dir.0.join(format!("{bin}.sock"));
        let port = free_port();
        let cfg = format!(
            "global\n    stats socket {} level admin\n\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend f\n    bind 127.0.0.1:{port}\n    stick-table type ip size 100k expire 1m store conn_cnt,conn_cur,conn_rate(10s),http_req_cnt,http_req_rate(1m)\n    http-request track-sc0 src\n    http-request return status 200 content-type text/plain string ok\n\nbackend other\n    stick-table type ipv6 size 10 expire 30s store conn_rate(10s),conn_cur\n",
            sock.display()
        );
        let _p = if bin == "haproxy" {
            Proc::haproxy(&cfg, lo(port))?
        } else {
            Proc::portcullis(&cfg, lo(port))
        };
        // Three requests on one connection, one on another.
        let mut s = TcpStream::connect(lo(port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        for _ in 0..3 {
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
            let r = proxy::read_response(&mut s, false).expect("response");
            assert_eq!(r.status, 200);
        }
        drop(s);
        assert_eq!(get(lo(port), "/").status, 200);
        wait_until(Duration::from_secs(3), || {
            cli(&sock, "show table f").contains("conn_cur=0")
        });
        let cmds = [
            "show table",
            "show table f",
            "show table other",
            "show table nope",
            "show table f key 127.0.0.1",
            "show table f key 127.0.0.2",
            "show table other key 127.0.0.1",
            "show table f key",
            "show table f data.conn_cnt gt 3",
            "show table f data.conn_cnt gt 4",
            "show table f data.http_req_rate ge 4 data.conn_cur eq 0",
            "show table f bogus",
            "show table f data.foo gt 1",
            "show table f data.conn_cnt",
            "show table f data.conn_cnt gt x",
            "show table other data.http_req_rate gt 0",
            "clear table",
            "clear table nope",
            "clear table f bogus",
            "clear table f key 127.0.0.2",
            "show table f",
            "clear table f key 127.0.0.1",
            "show table f",
        ];
        Some(
            cmds.iter()
                .map(|c| format!("{c}\n{}", mask(&cli(&sock, c))))
                .collect(),
        )
    };
    let Some(want) = run("haproxy") else { return };
    let got = run("portcullis").unwrap();
    assert_eq!(want.len(), got.len());
    assert!(
        want[1].contains("conn_cnt=4 conn_rate(10000)=4 conn_cur=0 http_req_cnt=4"),
        "{}",
        want[1]
    );
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w);
    }
}

/// The data types beyond the connection and request counters, on HAProxy 2.6 and portcullis
/// with the same requests: `sc-inc-gpc0|1`, `sc-set-gpt0`, a fetch reading `gpc0`, 4xx answers
/// (local and from the server) in `http_err_*`, a server's 5xx in `http_fail_cnt`, the bytes
/// each way, then `set table` and the `data.<type>` filters; the replies must be the same.
#[test]
fn new_data_types_match_haproxy() {
    let dir = TempDir::new("stick-types");
    let node = HttpNode::start(lo(free_port()), HttpOpts::named("n1")).unwrap();
    let run = |bin: &str| -> Option<Vec<String>> {
        let sock = dir.0.join(format!("{bin}.sock"));
        let port = free_port();
        let cfg = format!(
            "global\n    stats socket {} level admin\n\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend f\n    bind 127.0.0.1:{port}\n    stick-table type ip size 100k expire 1m store gpt0,gpc0,gpc0_rate(10s),http_err_cnt,http_err_rate(10s),bytes_in_cnt,bytes_in_rate(10s),bytes_out_cnt,bytes_out_rate(10s),gpc1,gpc1_rate(10s),http_fail_cnt\n    http-request track-sc0 src\n    http-request sc-inc-gpc0(0) if {{ path /inc }}\n    http-request sc-inc-gpc1 if {{ path /inc1 }}\n    http-request sc-set-gpt0(0) 42 if {{ path /gpt }}\n    http-request deny if {{ path /deny }}\n    http-request deny deny_status 429 if {{ path /check }} {{ sc0_get_gpc0 gt 1 }} {{ sc0_gpc0_rate ge 2 }} {{ sc_get_gpt0(0) eq 0 }}\n    http-request return status 404 content-type text/plain string nf if {{ path /nf }}\n    http-request return status 200 content-type text/plain string ok if {{ path /inc }} || {{ path /inc1 }} || {{ path /gpt }} || {{ path /check }}\n    default_backend be\n\nbackend be\n    server s1 {}\n",
            sock.display(),
            node.addr()
        );
        let _p = if bin == "haproxy" {
            Proc::haproxy(&cfg, lo(port))?
        } else {
            Proc::portcullis(&cfg, lo(port))
        };
        let mut codes = Vec::new();
        for path in [
            "/inc",
            "/check",
            "/inc",
            "/inc1",
            "/check",
            "/deny",
            "/nf",
            "/status?code=404",
            "/status?code=503",
            "/status?code=200",
        ] {
            codes.push(get(lo(port), path).status);
        }
        assert_eq!(codes, [200, 200, 200, 200, 429, 403, 404, 404, 503, 200]);
        codes.clear();
        codes.push(get(lo(port), "/gpt").status);
        wait_until(Duration::from_secs(3), || {
            cli(&sock, "show table f").contains("use=0")
        });
        let cmds = [
            "show table f",
            "set table f key 127.0.0.9 data.gpc0 5 data.gpc0_rate 7 data.bytes_out_cnt 99999999999 data.gpt0 -1",
            "set table f key 127.0.0.9 data.conn_cnt 1",
            "set table f key 127.0.0.9 data.foo 1",
            "set table f key 127.0.0.9 data.server_id 1",
            "set table f key 127.0.0.9 data.gpc0",
            "set table f key 127.0.0.9 data.gpc0 x",
            "set table f key 127.0.0.9 data.gpc1 3 extra",
            "set table f key 127.0.0.9 bar 1",
            "set table f key",
            "set table",
            "set table f data.gpc0 1",
            "set table nope key 127.0.0.1",
            "show table f key 127.0.0.9",
            "show table f data.http_err_cnt gt 2",
            "show table f data.gpc1 eq 3",
            "show table f data.bytes_out_cnt gt 100000",
            "clear table f data.gpt0 eq 42",
            "show table f",
            "clear table f data.gpc0_rate gt 0",
            "show table f",
            // HAProxy 2.6 empties the table then.
            "set table f",
            "show table f",
        ];
        Some(
            cmds.iter()
                .map(|c| format!("{c}\n{}", mask(&cli(&sock, c))))
                .collect(),
        )
    };
    let Some(want) = run("haproxy") else { return };
    let got = run("portcullis").unwrap();
    assert_eq!(want.len(), got.len());
    assert!(want[0].contains("gpt0=42 gpc0=2"), "{}", want[0]);
    let err = want
        .iter()
        .find(|r| r.starts_with("show table f data.http_err_cnt"))
        .unwrap();
    assert!(err.contains("key=127.0.0.1"), "{err}");
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w);
    }
}

/// `tcp-request connection|content` `sc-inc-gpc0`, `sc-inc-gpc1` and `sc-set-gpt0` in `mode
/// tcp`, and the bytes of the stream: the same `show table` as HAProxy 2.6.
#[test]
fn tcp_sc_actions_and_bytes_match_haproxy() {
    let dir = TempDir::new("stick-tcp-sc");
    let echo = TcpEcho::start(lo(free_port())).unwrap();
    let run = |bin: &str| -> Option<String> {
        let sock = dir.0.join(format!("{bin}.sock"));
        let port = free_port();
        let cfg = format!(
            "global\n    stats socket {} level admin\n\ndefaults\n    mode tcp\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend fe\n    bind 127.0.0.1:{port}\n    stick-table type ip size 1k expire 30s store gpt0,gpc0,gpc0_rate(10s),conn_cnt,bytes_in_cnt,bytes_out_cnt,gpc1\n    tcp-request connection track-sc0 src\n    tcp-request connection sc-inc-gpc0(0)\n    tcp-request content sc-inc-gpc1\n    tcp-request content sc-set-gpt0(0) 9\n    default_backend be\n\nbackend be\n    server s1 {}\n",
            sock.display(),
            echo.addr()
        );
        let _p = if bin == "haproxy" {
            Proc::haproxy(&cfg, lo(port))?
        } else {
            Proc::portcullis(&cfg, lo(port))
        };
        // The harness' readiness probe connected once from 127.0.0.1: use another source.
        let src: IpAddr = "127.0.0.7".parse().unwrap();
        for _ in 0..3 {
            assert!(echoes(src, lo(port)));
        }
        let done = |s: &str| s.contains("key=127.0.0.7 use=0") && s.contains("bytes_out_cnt=12");
        wait_until(Duration::from_secs(3), || {
            done(&cli(&sock, "show table fe"))
        });
        Some(mask(&cli(&sock, "show table fe key 127.0.0.7")))
    };
    let Some(want) = run("haproxy") else { return };
    assert!(
        want.contains(
            "gpt0=9 gpc0=3 gpc0_rate(10000)=3 conn_cnt=3 bytes_in_cnt=12 bytes_out_cnt=12 gpc1=3"
        ),
        "{want}"
    );
    assert_eq!(run("portcullis").unwrap(), want);
}

/// `http-request sc-inc-gpc0` / `sc-set-gpt0` on a counter tracked by `tcp-request
/// connection` (the session's, as HAProxy falls back to it), on HAProxy 2.6 and portcullis.
#[test]
fn http_sc_actions_on_a_session_counter_match_haproxy() {
    let dir = TempDir::new("stick-sess-sc");
    let run = |bin: &str| -> Option<String> {
        let sock = dir.0.join(format!("{bin}.sock"));
        let port = free_port();
        let cfg = format!(
            "global\n    stats socket {} level admin\n\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend f\n    bind 127.0.0.1:{port}\n    stick-table type ip size 1k expire 60s store gpc0,gpt0,http_req_cnt\n    tcp-request connection track-sc0 src\n    http-request sc-inc-gpc0(0)\n    http-request sc-set-gpt0(0) req.hdr_cnt(x-a)\n    http-request return status 200\n",
            sock.display()
        );
        let _p = if bin == "haproxy" {
            Proc::haproxy(&cfg, lo(port))?
        } else {
            Proc::portcullis(&cfg, lo(port))
        };
        let mut s = TcpStream::connect(lo(port)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        for _ in 0..2 {
            s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nX-A: 2\r\nX-A: 3\r\n\r\n")
                .unwrap();
            assert_eq!(
                proxy::read_response(&mut s, false)
                    .expect("response")
                    .status,
                200
            );
        }
        drop(s);
        wait_until(Duration::from_secs(10), || {
            cli(&sock, "show table f").contains("use=0")
        });
        Some(mask(&cli(&sock, "show table f")))
    };
    let Some(want) = run("haproxy") else { return };
    assert!(want.contains(" gpt0=3 gpc0=2 "), "{want}");
    assert_eq!(run("portcullis").unwrap(), want);
}

/// Tables keyed by `string [len]`, `integer` and `binary [len]`, tracked with request headers
/// (`http-request track-sc0 req.hdr(x-str)` …): the keys HAProxy 2.6 makes of them (cut,
/// padded, cast), `sc_*` reading them, and the CLI (`show|set|clear table … key`) on each
/// type, with the same replies as HAProxy 2.6.
#[test]
fn string_integer_and_binary_keys_match_haproxy() {
    let dir = TempDir::new("stick-keys");
    let run = |bin: &str| -> Option<Vec<String>> {
        let sock = dir.0.join(format!("{bin}.sock"));
        let port = free_port();
        let cfg = format!(
            "global\n    stats socket {} level admin\n\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend f\n    bind 127.0.0.1:{port}\n    stick-table type string len 8 size 1k expire 1m store http_req_cnt,gpc0\n    http-request track-sc0 req.hdr(x-str)\n    http-request track-sc1 req.hdr(x-int) table fi if {{ req.hdr(x-int) -m found }}\n    http-request track-sc2 req.hdr(x-bin) table fb if {{ req.hdr(x-bin) -m found }}\n    http-request sc-inc-gpc0(0) if {{ path /inc }}\n    http-request return status 200 hdr x-n \"%[sc0_http_req_cnt]/%[sc_http_req_cnt(1)]/%[sc2_http_req_cnt]/%[sc_get_gpc0(0)]/%[req.hdr(x-str),table_http_req_cnt(f)]\"\n\nbackend fi\n    stick-table type integer size 1k expire 1m store http_req_cnt\n\nbackend fb\n    stick-table type binary len 6 size 1k expire 1m store http_req_cnt\n",
            sock.display()
        );
        let _p = if bin == "haproxy" {
            Proc::haproxy(&cfg, lo(port))?
        } else {
            Proc::portcullis(&cfg, lo(port))
        };
        let mut out = Vec::new();
        for (path, host, int, bin) in [
            ("/", "hello.example.com", "12", "ab"),
            ("/inc", "hello.example.org", "-3", "abcdefghij"),
            ("/", "a\"b\\c", "4294967297", "ab"),
            ("/inc", "\u{e9}t\u{e9}", "foo", "x"),
            ("/", "hello.example.com", "12abc", "abc"),
        ] {
            let r = proxy::request(
                lo(port),
                &format!(
                    "GET {path} HTTP/1.1\r\nHost: x\r\nX-Str: {host}\r\nX-Int: {int}\r\nX-Bin: {bin}\r\nConnection: close\r\n\r\n"
                ),
            );
            out.push(format!("{} {:?}", r.status, r.header("x-n")));
        }
        wait_until(Duration::from_secs(3), || {
            !cli(&sock, "show table f").contains("use=1")
        });
        for c in [
            "show table",
            "show table f",
            "show table fi",
            "show table fb",
            "show table f key hello.example.net",
            "show table f key nope",
            "show table fi key 12",
            "show table fi key abc",
            "show table fi key -1",
            "show table fb key 616200000000",
            "set table f key a\\ b=c data.http_req_cnt 5",
            "set table fi key 4294967295 data.http_req_cnt 7",
            "set table fi key 4294967296 data.http_req_cnt 7",
            "set table fb key 61 data.http_req_cnt 3",
            "clear table fi key 12",
            "clear table fb key 00",
            "clear table f key hello.exam",
            "show table f",
            "show table fi",
        ] {
            out.push(format!("{c}\n{}", mask(&cli(&sock, c))));
        }
        Some(out)
    };
    let Some(want) = run("haproxy") else { return };
    let got = run("portcullis").unwrap();
    assert!(
        want.iter().any(|r| r.contains("key=a\"b\\\\c ")),
        "{want:#?}"
    );
    assert_eq!(want.len(), got.len());
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w);
    }
}

/// The arrays `gpt(<n>)`, `gpc(<n>)`, `gpc_rate(<n>,<p>)`: `sc-inc-gpc(<idx>,<sc>)` and
/// `sc-set-gpt(<idx>,<sc>)` in `http-request` and `tcp-request content`, the fetches
/// `sc_get_gpt|get_gpc|gpc_rate|inc_gpc|clr_gpc(<idx>,<sc>)` and their `src_` forms, then
/// `show table` (elements numbered), `set table … data.gpc` and a `data.gpc` filter, as
/// HAProxy 2.6.
#[test]
fn gpt_gpc_arrays_match_haproxy() {
    let dir = TempDir::new("stick-arrays");
    let run = |bin: &str| -> Option<Vec<String>> {
        let sock = dir.0.join(format!("{bin}.sock"));
        let port = free_port();
        let cfg = format!(
            "global\n    stats socket {} level admin\n\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend f\n    bind 127.0.0.1:{port}\n    stick-table type ip size 1k expire 1m store gpt(2),gpc(3),gpc_rate(2,10s),http_req_cnt\n    tcp-request content track-sc1 src table s\n    tcp-request content sc-inc-gpc(0,1)\n    http-request track-sc0 src\n    http-request sc-inc-gpc(1,0)\n    http-request sc-inc-gpc(2,0) if {{ path /two }}\n    http-request sc-set-gpt(1,0) 77\n    http-request sc-set-gpt(0,0) req.hdr_cnt(x-a) if {{ path /two }}\n    http-request sc-inc-gpc(7,0)\n    http-request return status 200 hdr x-n \"%[sc_get_gpc(1,0)]/%[sc_gpc_rate(1,0)]/%[sc_get_gpt(1,0)]/%[sc_get_gpt(0,0)]/%[src_get_gpc(0,s)]/%[sc_get_gpc0(0)]/%[sc_inc_gpc(2,0)]/%[src_get_gpc(2,f)]\" if {{ path /two }}\n    http-request return status 200 hdr x-n \"%[sc_clr_gpc(1,0)]/%[src_inc_gpc(0,s)]/%[sc_get_gpc(1,0)]/%[sc_get_gpc(9,0)]/%[sc_gpc_rate(0,1)]\" if {{ path /clr }}\n    http-request return status 200 hdr x-n \"%[sc_get_gpc(1,0)]\"\n\nbackend s\n    stick-table type ip size 1k expire 1m store gpc(1),gpt(1)\n",
            sock.display()
        );
        let _p = if bin == "haproxy" {
            Proc::haproxy(&cfg, lo(port))?
        } else {
            Proc::portcullis(&cfg, lo(port))
        };
        let mut out = Vec::new();
        for path in ["/", "/", "/two", "/clr", "/two"] {
            let r = proxy::request(
                lo(port),
                &format!(
                    "GET {path} HTTP/1.1\r\nHost: x\r\nX-A: 1\r\nX-A: 2\r\nConnection: close\r\n\r\n"
                ),
            );
            out.push(format!("{path} {} {:?}", r.status, r.header("x-n")));
        }
        wait_until(Duration::from_secs(3), || {
            !cli(&sock, "show table f").contains("use=1")
        });
        for c in [
            "show table f",
            "show table s",
            "set table f key 127.0.0.9 data.gpc 5 data.gpc_rate 4 data.gpt 3",
            "set table f key 127.0.0.9 data.gpc0 1",
            "set table f key 127.0.0.9 data.gpc1 1",
            "show table f data.gpc gt 4",
            "show table f data.gpc0 gt 4",
            "show table f key 127.0.0.9",
        ] {
            out.push(format!("{c}\n{}", mask(&cli(&sock, c))));
        }
        Some(out)
    };
    let Some(want) = run("haproxy") else { return };
    let got = run("portcullis").unwrap();
    assert!(want.iter().any(|l| l.contains(" gpt1=77 ")), "{want:#?}");
    assert_eq!(want.len(), got.len());
    for (w, g) in want.iter().zip(&got) {
        assert_eq!(g, w);
    }
}

/// `http-response sc-inc-gpc0`, `sc-inc-gpc(<idx>,<sc>)`, `sc-set-gpt0 <expr>` and
/// `sc-set-gpt(<idx>,<sc>)` on the counters `http-request track-sc*` tracked, with conditions
/// on the response, as HAProxy 2.6.
#[test]
fn http_response_sc_actions_match_haproxy() {
    let dir = TempDir::new("stick-res-sc");
    let node = HttpNode::start(lo(free_port()), HttpOpts::named("n1")).unwrap();
    let run = |bin: &str| -> Option<Vec<String>> {
        let sock = dir.0.join(format!("{bin}.sock"));
        let port = free_port();
        let cfg = format!(
            "global\n    stats socket {} level admin\n\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n\nfrontend f\n    bind 127.0.0.1:{port}\n    stick-table type ip size 1k expire 1m store gpc0,gpt0\n    http-request track-sc0 src\n    http-request track-sc1 src table t2\n    default_backend be\n\nbackend t2\n    stick-table type ip size 1k expire 1m store gpc(2),gpt(2)\n\nbackend be\n    http-response sc-inc-gpc0(0) if {{ status 404 }}\n    http-response sc-inc-gpc(1,1)\n    http-response sc-set-gpt0(0) status\n    http-response sc-set-gpt(1,1) 5 if {{ status 200 }}\n    server s1 {}\n",
            sock.display(),
            node.addr()
        );
        let _p = if bin == "haproxy" {
            Proc::haproxy(&cfg, lo(port))?
        } else {
            Proc::portcullis(&cfg, lo(port))
        };
        let src: IpAddr = "127.0.0.5".parse().unwrap();
        for path in [
            "/status?code=404",
            "/",
            "/status?code=404",
            "/status?code=503",
        ] {
            let sock2 =
                socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
            sock2.bind(&SocketAddr::new(src, 0).into()).unwrap();
            sock2.connect(&lo(port).into()).unwrap();
            let mut s: TcpStream = sock2.into();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            write!(
                s,
                "GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
            )
            .unwrap();
            proxy::read_response(&mut s, false).expect("response");
        }
        wait_until(Duration::from_secs(3), || {
            cli(&sock, "show table f").contains("key=127.0.0.5 use=0")
        });
        Some(
            ["show table f key 127.0.0.5", "show table t2 key 127.0.0.5"]
                .iter()
                .map(|c| mask(&cli(&sock, c)))
                .collect(),
        )
    };
    let Some(want) = run("haproxy") else { return };
    assert!(want[0].contains(" gpt0=503 gpc0=2"), "{want:#?}");
    assert_eq!(run("portcullis").unwrap(), want);
}
