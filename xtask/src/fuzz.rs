//! `cargo xtask fuzz [--time S] [--target T[,T…]]`: seeds each target's corpus, builds the
//! cargo-fuzz targets of `fuzz/` (nightly, libFuzzer) once, runs each for S seconds on its
//! corpus and prints a table (executions, coverage, features, corpus, result). Exits non-zero
//! when a target crashed; the input is in `fuzz/artifacts/<target>/` and becomes a unit test.

use crate::util::{Result, root, show};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Every target, with the largest input libFuzzer may generate for it.
const TARGETS: &[(&str, usize)] = &[
    ("config", 65536),
    ("h1_request", 8192),
    ("h1_response", 4096),
    ("cli", 4096),
    ("tls_hello", 4096),
    ("log_format", 2048),
    ("sample_expr", 2048),
    ("proxy_proto", 1024),
    ("handover", 4096),
    ("crt_list", 4096),
    ("h2_front", 4096),
    ("h2_core", 4096),
];

const DEFAULT_SECS: u64 = 10;

struct Row {
    target: String,
    secs: u64,
    execs: u64,
    cov: u64,
    ft: u64,
    corpus: u64,
    crash: Option<String>,
}

pub fn run(args: &[String]) -> Result {
    let mut secs = DEFAULT_SECS;
    let mut only: Option<Vec<String>> = None;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--time" => {
                secs = it
                    .next()
                    .and_then(|s| s.parse().ok())
                    .ok_or("--time needs a number of seconds")?
            }
            "--target" => {
                let t = it.next().ok_or("--target needs a target name")?;
                only = Some(t.split(',').map(str::to_string).collect());
            }
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    let targets: Vec<(&str, usize)> = match &only {
        None => TARGETS.to_vec(),
        Some(names) => {
            let mut v = Vec::new();
            for n in names {
                let t = TARGETS
                    .iter()
                    .find(|(t, _)| t == n)
                    .ok_or_else(|| format!("no target '{n}' (targets: {})", names_list()))?;
                v.push(*t);
            }
            v
        }
    };
    let root = root();
    let fuzz = root.join("fuzz");
    if crate::util::output(Command::new("cargo").args(["+nightly", "fuzz", "--version"])).is_none()
    {
        return Err(
            "cargo-fuzz on nightly is missing: `rustup toolchain install nightly` and \
             `cargo install cargo-fuzz`"
                .into(),
        );
    }
    for (t, _) in &targets {
        seed(&fuzz, t)?;
    }
    let mut build = cargo_fuzz(&root);
    build.args(["build", "-s", "none"]);
    crate::util::exec(&mut build)?;
    let mut rows = Vec::new();
    for (t, max_len) in &targets {
        rows.push(run_one(&root, &fuzz, t, *max_len, secs)?);
    }
    println!("\n| target | seconds | executions | exec/s | cov | ft | corpus | result |");
    println!("|---|---:|---:|---:|---:|---:|---:|---|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.target,
            r.secs,
            r.execs,
            r.execs / r.secs.max(1),
            r.cov,
            r.ft,
            r.corpus,
            r.crash.as_deref().unwrap_or("ok")
        );
    }
    let crashed: Vec<&Row> = rows.iter().filter(|r| r.crash.is_some()).collect();
    if crashed.is_empty() {
        println!("{} passed, 0 failed", rows.len());
        Ok(())
    } else {
        println!(
            "{} passed, {} failed",
            rows.len() - crashed.len(),
            crashed.len()
        );
        Err(format!(
            "{} target(s) crashed: {}",
            crashed.len(),
            crashed
                .iter()
                .map(|r| r.target.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

fn names_list() -> String {
    TARGETS
        .iter()
        .map(|(t, _)| *t)
        .collect::<Vec<_>>()
        .join(", ")
}

/// `cargo +nightly fuzz` from the workspace root, without the kernel path (the targets never
/// load eBPF) and with cargo-fuzz's own target directory.
fn cargo_fuzz(root: &Path) -> Command {
    let mut c = Command::new("cargo");
    c.current_dir(root)
        .args(["+nightly", "fuzz"])
        .env("AYA_BUILD_SKIP", "1")
        .env_remove("CARGO_TARGET_DIR");
    c
}

fn run_one(root: &Path, fuzz: &Path, t: &str, max_len: usize, secs: u64) -> Result<Row> {
    let corpus = fuzz.join("corpus").join(t);
    let mut c = cargo_fuzz(root);
    c.args(["run", "-s", "none", t])
        .arg(&corpus)
        .arg("--")
        .arg(format!("-max_total_time={secs}"))
        .arg(format!("-max_len={max_len}"))
        .args(["-timeout=10", "-rss_limit_mb=2048", "-print_final_stats=1"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    println!("$ {}", show(&c));
    let out = c
        .output()
        .map_err(|e| format!("cannot run cargo fuzz: {e}"))?;
    let err = String::from_utf8_lossy(&out.stderr);
    let log = fuzz.join("artifacts").join(format!("{t}.log"));
    if let Some(dir) = log.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let _ = std::fs::write(&log, err.as_bytes());
    let stat = |name: &str| {
        err.lines()
            .find_map(|l| l.strip_prefix(&format!("stat::{name}:")))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    // The last status line (`#N DONE cov: X ft: Y corp: Z/…`) has the coverage figures.
    let last = err
        .lines()
        .rev()
        .find(|l| l.starts_with('#') && l.contains(" cov: "))
        .unwrap_or("");
    let field = |name: &str| {
        last.split_whitespace()
            .skip_while(|w| *w != name)
            .nth(1)
            .and_then(|v| v.split('/').next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    let crash = (!out.status.success()).then(|| {
        let artifact = err
            .lines()
            .find_map(|l| l.split("Test unit written to ").nth(1))
            .map(str::trim)
            .unwrap_or("no artifact (see the log)");
        format!("CRASH {artifact} (log {})", log.display())
    });
    let row = Row {
        target: t.to_string(),
        secs,
        execs: stat("number_of_executed_units"),
        cov: field("cov:"),
        ft: field("ft:"),
        corpus: field("corp:"),
        crash,
    };
    if let Some(c) = &row.crash {
        eprintln!("{t}: {c}");
        for l in err.lines().filter(|l| l.contains("panicked")).take(3) {
            eprintln!("  {l}");
        }
    }
    Ok(row)
}

/// The workplace's `shared/` folder, beside the checkout or one level up (a worktree).
fn shared(rel: &str) -> Option<PathBuf> {
    let r = root();
    [
        r.join("../shared"),
        r.join("../../shared"),
        PathBuf::from("/work/shared"),
    ]
    .into_iter()
    .map(|p| p.join(rel))
    .find(|p| p.exists())
}

fn write_seed(dir: &Path, name: &str, bytes: &[u8]) -> Result {
    std::fs::write(dir.join(name), bytes).map_err(|e| format!("{}: {e}", dir.display()))
}

/// Seeds `fuzz/corpus/<t>/` (kept between runs: libFuzzer adds what it finds).
fn seed(fuzz: &Path, t: &str) -> Result {
    let dir = fuzz.join("corpus").join(t);
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    match t {
        "config" => {
            let mut files: Vec<PathBuf> = Vec::new();
            for d in [
                root().join("tests/configs/bad"),
                shared("configs").unwrap_or_default(),
                shared("data/real-configs").unwrap_or_default(),
            ] {
                if let Ok(rd) = std::fs::read_dir(&d) {
                    files.extend(
                        rd.flatten()
                            .map(|e| e.path())
                            .filter(|p| p.extension().is_some_and(|x| x == "cfg")),
                    );
                }
            }
            for (i, f) in files.iter().enumerate() {
                if let Ok(b) = std::fs::read(f) {
                    write_seed(&dir, &format!("seed-{i:03}"), &b)?;
                }
            }
        }
        "h1_request" => {
            for (i, raw) in http_corpus().iter().enumerate() {
                // Mode byte 0: a request head (and its body); 1: the bytes after the head as
                // a chunked body.
                let mut head = vec![0u8];
                head.extend_from_slice(raw);
                write_seed(&dir, &format!("seed-{i:03}-head"), &head)?;
                if let Some(at) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
                    let mut body = vec![1u8];
                    body.extend_from_slice(&raw[at + 4..]);
                    write_seed(&dir, &format!("seed-{i:03}-body"), &body)?;
                }
            }
        }
        "h1_response" => {
            for (i, r) in RESPONSES.iter().enumerate() {
                write_seed(&dir, &format!("seed-{i:03}"), r.as_bytes())?;
            }
        }
        "cli" => {
            for (i, script) in CLI_SCRIPTS.iter().enumerate() {
                let mut b = vec![2u8];
                b.extend_from_slice(script.as_bytes());
                write_seed(&dir, &format!("seed-{i:03}"), &b)?;
            }
        }
        "tls_hello" => {
            for (i, h) in client_hellos()?.iter().enumerate() {
                write_seed(&dir, &format!("seed-{i:03}"), h)?;
            }
        }
        "log_format" => {
            for (i, f) in LOG_FORMATS.iter().enumerate() {
                write_seed(&dir, &format!("seed-{i:03}"), f.as_bytes())?;
            }
        }
        "sample_expr" => {
            for (i, f) in SAMPLE_EXPRS.iter().enumerate() {
                write_seed(&dir, &format!("seed-{i:03}"), f.as_bytes())?;
            }
        }
        "proxy_proto" => {
            for (i, p) in proxy_headers().iter().enumerate() {
                write_seed(&dir, &format!("seed-{i:03}"), p)?;
            }
        }
        "handover" => {
            // Mode byte = the number of sockets announced; HAProxy's records (namespace and
            // interface length-prefixed, 4 option bytes), then portcullis' trailer; and a reload
            // state with no server.
            let mut two = vec![2u8];
            two.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
            two.extend_from_slice(&[3, b'n', b's', b'1', 4, b'e', b't', b'h', b'0', 0, 0, 0, 1]);
            two.extend_from_slice(
                b"portcullis-getsocks 1 2\n0\tipv4\t127.0.0.1:80\tfe\ta.cfg:3\n1\tunix\t/run/x\tfe2\ta.cfg:9\n",
            );
            write_seed(&dir, "seed-000", &two)?;
            let mut st = vec![0u8];
            st.extend_from_slice(b"PCST");
            st.extend_from_slice(&2u32.to_le_bytes());
            st.push(0);
            write_seed(&dir, "seed-001", &st)?;
        }
        "crt_list" => {
            for (i, l) in CRT_LISTS.iter().enumerate() {
                let mut b = vec![0u8];
                b.extend_from_slice(l.as_bytes());
                write_seed(&dir, &format!("seed-{i:03}"), &b)?;
            }
            // Mode 1: a certificate's DER (SAN DNS names and a CN).
            let mut params = rcgen::CertificateParams::new(vec![
                "www.example.com".to_string(),
                "*.example.org".to_string(),
            ])
            .map_err(|e| e.to_string())?;
            params
                .distinguished_name
                .push(rcgen::DnType::CommonName, "cn.example.net");
            let key = rcgen::KeyPair::generate().map_err(|e| e.to_string())?;
            let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
            let mut b = vec![1u8];
            b.extend_from_slice(cert.der());
            write_seed(&dir, "seed-der", &b)?;
        }
        "h2_front" => {
            for (i, f) in h2_frames().iter().enumerate() {
                write_seed(&dir, &format!("seed-{i:03}"), f)?;
            }
        }
        // The same frames behind the byte that chooses piece sizes and stream actions.
        "h2_core" => {
            for (i, f) in h2_frames().iter().enumerate() {
                for ops in [0u8, 37, 255] {
                    write_seed(
                        &dir,
                        &format!("seed-{i:03}-{ops}"),
                        &[&[ops], &f[..]].concat(),
                    )?;
                }
            }
        }
        _ => {}
    }
    Ok(())
}

/// One HTTP/2 frame: length, type, flags, stream, payload.
fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = payload.len() as u32;
    let mut f = len.to_be_bytes()[1..].to_vec();
    f.extend_from_slice(&[kind, flags]);
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// An HPACK header block: static-table indexed fields (`0x80 | index`) and literal fields
/// without indexing with a new name (no Huffman).
fn hpack(indexed: &[u8], literal: &[(&str, &str)]) -> Vec<u8> {
    let mut b: Vec<u8> = indexed.iter().map(|i| 0x80 | i).collect();
    for (n, v) in literal {
        b.push(0);
        b.push(n.len() as u8);
        b.extend_from_slice(n.as_bytes());
        b.push(v.len() as u8);
        b.extend_from_slice(v.as_bytes());
    }
    b
}

/// The h2 frontend target's seeds (the target writes the client preface itself): SETTINGS,
/// then requests the test configuration answers locally (return, deny, redirect, 503), a
/// body, two streams, CONTINUATION, extended CONNECT, trailers, RST_STREAM, GOAWAY.
fn h2_frames() -> Vec<Vec<u8>> {
    const SETTINGS: u8 = 4;
    const HEADERS: u8 = 1;
    const DATA: u8 = 0;
    const CONT: u8 = 9;
    const END_STREAM: u8 = 1;
    const END_HEADERS: u8 = 4;
    // Static table: 2 GET, 3 POST, 4 `/`, 6 http, 7 https.
    let get = |path: &str| {
        hpack(
            &[2, 6],
            &[
                (":path", path),
                (":authority", "a.example"),
                ("user-agent", "f"),
            ],
        )
    };
    let settings = h2_frame(SETTINGS, 0, 0, &[]);
    let req = |stream: u32, block: &[u8], flags: u8| {
        h2_frame(HEADERS, flags | END_HEADERS, stream, block)
    };
    let one = |block: Vec<u8>| [settings.clone(), req(1, &block, END_STREAM)].concat();
    let mut out = vec![
        one(get("/r")),
        one(get("/d")),
        one(get("/x")),
        one(hpack(&[2, 4, 7], &[(":authority", "b")])),
    ];
    let post = hpack(
        &[3, 6],
        &[
            (":path", "/r"),
            (":authority", "a"),
            ("content-length", "5"),
        ],
    );
    out.push(
        [
            settings.clone(),
            req(1, &post, 0),
            h2_frame(DATA, END_STREAM, 1, b"hello"),
        ]
        .concat(),
    );
    out.push(
        [
            settings.clone(),
            req(1, &get("/r"), END_STREAM),
            h2_frame(8, 0, 0, &65535u32.to_be_bytes()),
            h2_frame(6, 0, 0, b"12345678"),
            req(3, &get("/d"), END_STREAM),
        ]
        .concat(),
    );
    let block = get("/r");
    let (a, b) = block.split_at(block.len() / 2);
    out.push(
        [
            settings.clone(),
            h2_frame(HEADERS, END_STREAM, 1, a),
            h2_frame(CONT, END_HEADERS, 1, b),
        ]
        .concat(),
    );
    let connect = {
        let mut b = vec![0x02, 7];
        b.extend_from_slice(b"CONNECT");
        b.extend(hpack(
            &[6],
            &[
                (":protocol", "websocket"),
                (":path", "/ws"),
                (":authority", "a"),
            ],
        ));
        b
    };
    out.push(
        [
            settings.clone(),
            req(1, &connect, 0),
            h2_frame(DATA, 0, 1, b"\x81\x00"),
        ]
        .concat(),
    );
    out.push(
        [
            settings.clone(),
            req(1, &post, 0),
            h2_frame(DATA, 0, 1, b"hello"),
            h2_frame(
                HEADERS,
                END_STREAM | END_HEADERS,
                1,
                &hpack(&[], &[("x-trailer", "1")]),
            ),
        ]
        .concat(),
    );
    out.push(
        [
            settings.clone(),
            req(1, &get("/"), 0),
            h2_frame(3, 0, 1, &8u32.to_be_bytes()),
            h2_frame(7, 0, 0, &[0, 0, 0, 1, 0, 0, 0, 0]),
        ]
        .concat(),
    );
    out
}

const CRT_LISTS: &[&str] = &[
    "site.pem\n# comment\n\nother.pem [alpn h2,http/1.1 ssl-min-ver TLSv1.2] *.example.com !www.example.com\n",
    "/etc/ssl/a.pem [verify none ciphers ECDHE+AESGCM]\n/etc/ssl/b.pem www.example.org\n",
    "a.pem [ssl-max-ver TLSv1.3 no-tls-tickets] \n  b.pem\t[ curves X25519 ]\tb.example\n",
];

/// The raw requests of the shared HTTP/1 corpus (`raw_b64` of each JSON line).
fn http_corpus() -> Vec<Vec<u8>> {
    let Some(p) = shared("data/http1-corpus/corpus.jsonl") else {
        return Vec::new();
    };
    let text = std::fs::read_to_string(p).unwrap_or_default();
    text.lines()
        .filter_map(|l| {
            let at = l.find("\"raw_b64\"")?;
            let rest = &l[at + 9..];
            let start = rest.find('"')? + 1;
            let end = start + rest[start..].find('"')?;
            base64_decode(&rest[start..end])
        })
        .collect()
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::new();
    let mut acc = 0u32;
    let mut bits = 0;
    for &c in s.as_bytes() {
        if c == b'=' {
            break;
        }
        acc = (acc << 6) | u32::from(val(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// Real ClientHellos from rustls: with and without SNI and ALPN, TLS 1.2 only and 1.3.
fn client_hellos() -> Result<Vec<Vec<u8>>> {
    use rustls::pki_types::ServerName;
    use std::sync::Arc;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut out = Vec::new();
    for (sni, alpn, tls12_only) in [
        (
            "www.example.com",
            vec![b"h2".to_vec(), b"http/1.1".to_vec()],
            false,
        ),
        ("a.b", vec![], true),
        ("xn--nxasmq6b.example", vec![b"http/1.1".to_vec()], false),
        ("10.0.0.1", vec![], false),
    ] {
        let versions: &[&rustls::SupportedProtocolVersion] = if tls12_only {
            &[&rustls::version::TLS12]
        } else {
            rustls::DEFAULT_VERSIONS
        };
        let mut cfg = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(versions)
            .map_err(|e| e.to_string())?
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        cfg.alpn_protocols = alpn;
        let name = ServerName::try_from(sni.to_string()).map_err(|e| e.to_string())?;
        let mut conn =
            rustls::ClientConnection::new(Arc::new(cfg), name).map_err(|e| e.to_string())?;
        let mut hello = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut hello).map_err(|e| e.to_string())?;
        }
        out.push(hello);
    }
    Ok(out)
}

fn proxy_headers() -> Vec<Vec<u8>> {
    let mut v: Vec<Vec<u8>> = [
        "PROXY TCP4 192.0.2.1 198.51.100.2 56324 443\r\nGET / HTTP/1.1\r\n\r\n",
        "PROXY TCP6 2001:db8::1 2001:db8::2 1234 80\r\n",
        "PROXY UNKNOWN\r\n",
        "PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n",
    ]
    .iter()
    .map(|s| s.as_bytes().to_vec())
    .collect();
    const SIG: &[u8] = b"\r\n\r\n\0\r\nQUIT\n";
    // v2 PROXY TCP over IPv4 with an ALPN TLV and an SSL TLV (CN inside).
    let mut v4 = SIG.to_vec();
    v4.extend_from_slice(&[0x21, 0x11]);
    let mut body = vec![192, 0, 2, 1, 198, 51, 100, 2, 0xdc, 0x04, 0x01, 0xbb];
    body.extend_from_slice(&[0x01, 0, 2, b'h', b'2']);
    body.extend_from_slice(&[
        0x20, 0, 12, 0x07, 0, 0, 0, 0, 0x22, 0, 4, b'c', b'n', b'=', b'x',
    ]);
    v4.extend_from_slice(&(body.len() as u16).to_be_bytes());
    v4.extend_from_slice(&body);
    v.push(v4);
    // v2 LOCAL, and PROXY over IPv6.
    let mut local = SIG.to_vec();
    local.extend_from_slice(&[0x20, 0x00, 0, 0]);
    v.push(local);
    let mut v6 = SIG.to_vec();
    v6.extend_from_slice(&[0x21, 0x21, 0, 36]);
    v6.extend(std::iter::repeat_n(0x20, 32));
    v6.extend_from_slice(&[0, 80, 1, 187]);
    v.push(v6);
    v
}

const RESPONSES: &[&str] = &[
    "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
    "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Length: 3\r\n\r\n",
    "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\n\r\nbody until close",
    "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
    "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n",
    "HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n",
    "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
    "HTTP/1.1 302 Found\r\nLocation: /x\r\nSet-Cookie: a=b\r\nSet-Cookie: c=d\r\n\r\n",
    "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\nConnection: close, keep-alive\r\n\r\nhello",
];

const CLI_SCRIPTS: &[&str] = &[
    "help\n",
    "show info\nshow stat\nshow stat typed\nshow stat json\n",
    "show servers state\nshow servers state be\nshow backend\n",
    "prompt\nshow cli level\noperator\nuser\nshow cli level\nquit\n",
    "set server be/s1 weight 50%\nget weight be/s1\nset weight be/s2 0\n",
    "set server be/s1 state drain; set server be/s1 state maint; set server be/s1 state ready\n",
    "set server be/s1 health down\nset server be/s1 agent up\nset server be/s2 addr 10.0.0.2 port +5\n",
    "set server be/s1 check-port 8080\nset server be/s1 check-addr ::1 port 9\n",
    "disable server be/s1\nenable server be/s1\ndisable health be/s1\nenable agent be/s1\n",
    "set maxconn server be/s1 -1\nset maxconn frontend fe 10\nset maxconn global 100\n",
    "add server be/s3 127.0.0.1:8080 weight 10 check\nshow stat\ndel server be/s3\n",
    "disable frontend fe\nenable frontend fe\nshutdown frontend fe\n",
    "shutdown sessions server be/s2\nclear counters\nclear counters all\n",
    "set severity-output number\nset server be/nope weight 1\nset server nope/s1 weight x\n",
    "show map\nadd map #0 a b\nshow table\nclear table t key 1\n",
    "set ssl cert /x.pem <<\n-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n\ncommit ssl cert /x.pem\nabort ssl cert /x.pem\nshow ssl cert\n",
    "set rate-limit connections global 10\nshow version\nexperimental-mode on\n",
    "set server be/s1 weight 1\\; show info; show stat -1 4 -1\n",
];

const LOG_FORMATS: &[&str] = &[
    "%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %CC %CS %tsc %ac/%fc/%bc/%sc/%rc %sq/%bq %hr %hs %{+Q}r",
    "%ci:%cp [%t] %ft %b/%s %Tw/%Tc/%Tt %B %ts %ac/%fc/%bc/%sc/%rc %sq/%bq",
    "%{+Q,+E}o %[src] %[req.hdr(host),lower] %{-Q}[capture.req.hdr(0)] %%",
    "%[var(txn.x)] %H %ID %pid %rt %U %{+X}Ts %ms %HM %HP %HQ %HU %HV",
    "{\"client\":\"%ci\",\"status\":%ST}",
    "%[ssl_fc_sni] %sslv %sslc %[fc_rtt] %[be_name,map(/x)]",
];

const SAMPLE_EXPRS: &[&str] = &[
    "req.hdr(host),lower,map_str(/etc/x.map,default)",
    "src,ipmask(24)",
    "path_beg -i /api /static",
    "hdr(x-forwarded-for) -m ip 10.0.0.0/8",
    "url_param(id),regsub(^a,b,g)",
    "var(txn.foo) -m str bar",
    "req.ssl_sni -i -m end .example.com",
    "sc0_http_req_rate gt 10",
    "str(abc),concat(-,txn.x,-),upper",
    "base32+src,crc32(1),mod(10)",
    "method GET HEAD",
    "nbsrv(be) lt 1",
    "int(1),add(2),sub(var(txn.n)),mul(3),div(0)",
    "req.cook(sess) -m reg ^[a-f0-9]{32}$",
];
