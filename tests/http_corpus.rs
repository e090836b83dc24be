//! Replays the HTTP/1 smuggling corpus (`shared/data/http1-corpus/corpus.jsonl`) against the real
//! binary, with a recording backend behind it: each case whole, then one byte at a time, each
//! followed by a fresh request that must be answered correctly (a poisoned pooled server
//! connection shows up there). Runs with the engine from `PORTCULLIS_IO`.
//!
//! One proxy process serves every case. It has several frontend/backend pairs ("lanes"), each
//! with its own recorder, so lanes run in parallel threads while every backend request can still
//! be attributed to exactly one case. `nbthread 1` and `http-reuse always` make the probe after
//! each case pick up the server connection the case left in the pool.

#[path = "support/backend.rs"]
mod backend;
#[path = "support/corpus.rs"]
mod corpus;
#[path = "support/proxy.rs"]
mod proxy;

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backend::{free_port, lo};
use corpus::Case;
use proxy::Proc;

/// Lanes (frontend + recording backend pairs) run in parallel.
const LANES: usize = 6;
/// How long a case may take before what the client got so far is judged.
const CASE_TIMEOUT: Duration = Duration::from_secs(3);
/// After the expected responses, how long to wait for unexpected extra bytes or the close.
const QUIET: Duration = Duration::from_millis(200);

// ---- the recording backend ----

/// One complete request as the backend received it.
#[derive(Clone, Debug)]
struct Recorded {
    conn: usize,
    /// The head exactly as received (request line to the empty line).
    head: Vec<u8>,
    method: String,
    target: String,
    version: String,
    headers: Vec<(String, Vec<u8>)>,
    /// The decoded body.
    body: Vec<u8>,
}

impl Recorded {
    fn all(&self, name: &str) -> Vec<&[u8]> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_slice())
            .collect()
    }
    fn one(&self, name: &str) -> Option<&[u8]> {
        match self.all(name).as_slice() {
            [v] => Some(v),
            _ => None,
        }
    }
    fn short(&self) -> String {
        format!(
            "[conn {}] {} {} {} body={:?}",
            self.conn,
            self.method,
            self.target.chars().take(40).collect::<String>(),
            self.version,
            String::from_utf8_lossy(&self.body)
        )
    }
}

#[derive(Default)]
struct RecState {
    reqs: Vec<Recorded>,
    /// The request line of every head that reached the server, complete request or not: a
    /// rejected request must not show up here at all.
    heads: Vec<String>,
    /// Framing violations seen on a server connection (the connection is then dropped).
    errors: Vec<String>,
    /// Bytes left over when a server connection closed mid-request.
    partial: Vec<(usize, Vec<u8>)>,
    conns: usize,
}

struct Recorder {
    addr: SocketAddr,
    st: Arc<Mutex<RecState>>,
}

impl Recorder {
    fn start() -> Recorder {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let st = Arc::new(Mutex::new(RecState::default()));
        let st2 = Arc::clone(&st);
        std::thread::spawn(move || {
            for s in l.incoming() {
                let Ok(s) = s else { continue };
                let id = {
                    let mut g = st2.lock().unwrap();
                    g.conns += 1;
                    g.conns
                };
                let st3 = Arc::clone(&st2);
                std::thread::spawn(move || serve(s, id, &st3));
            }
        });
        Recorder { addr, st }
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', r @ ..] = v {
        v = r;
    }
    while let [r @ .., b' ' | b'\t'] = v {
        v = r;
    }
    v
}

enum Parse {
    More,
    Done(Box<Recorded>, usize),
    Bad(String),
}

/// Decodes a chunked body strictly; `Ok(None)` when more bytes are needed.
fn dechunk(b: &[u8]) -> Result<Option<(Vec<u8>, usize)>, String> {
    let mut at = 0;
    let mut body = Vec::new();
    loop {
        let Some(eol) = find(&b[at..], b"\r\n") else {
            return Ok(None);
        };
        let line = &b[at..at + eol];
        let size_part = line.split(|&c| c == b';').next().unwrap_or_default();
        let size_txt = std::str::from_utf8(trim(size_part)).map_err(|e| e.to_string())?;
        let size = usize::from_str_radix(size_txt, 16)
            .map_err(|_| format!("bad chunk size line {:?}", String::from_utf8_lossy(line)))?;
        at += eol + 2;
        if size == 0 {
            // Trailer section up to the empty line.
            loop {
                let Some(eol) = find(&b[at..], b"\r\n") else {
                    return Ok(None);
                };
                let line = &b[at..at + eol];
                at += eol + 2;
                if line.is_empty() {
                    return Ok(Some((body, at)));
                }
                if !line.contains(&b':') || line.contains(&b'\n') || line.contains(&b'\r') {
                    return Err(format!(
                        "bad trailer line {:?}",
                        String::from_utf8_lossy(line)
                    ));
                }
            }
        }
        if b.len() < at + size + 2 {
            return Ok(None);
        }
        body.extend_from_slice(&b[at..at + size]);
        if &b[at + size..at + size + 2] != b"\r\n" {
            return Err("chunk data not followed by CRLF".into());
        }
        at += size + 2;
    }
}

/// Parses one request strictly: whatever a proxy forwards must be unambiguous.
fn parse_request(b: &[u8], conn: usize) -> Parse {
    let Some(end) = find(b, b"\r\n\r\n") else {
        if b.len() > 256 * 1024 {
            return Parse::Bad("head too large".into());
        }
        return Parse::More;
    };
    let head = &b[..end + 4];
    let mut lines = b[..end + 1].split(|&c| c == b'\n').map(|l| {
        l.strip_suffix(b"\r").map_or(
            Err(()),
            |l| if l.contains(&b'\r') { Err(()) } else { Ok(l) },
        )
    });
    let Some(Ok(rl)) = lines.next() else {
        return Parse::Bad("bare CR/LF in request line".into());
    };
    let rl = String::from_utf8_lossy(rl).into_owned();
    let parts: Vec<&str> = rl.split(' ').collect();
    let [method, target, version] = parts.as_slice() else {
        return Parse::Bad(format!("malformed request line {rl:?}"));
    };
    if method.is_empty()
        || !method.bytes().all(is_tchar)
        || target.is_empty()
        || !(*version == "HTTP/1.1" || *version == "HTTP/1.0")
    {
        return Parse::Bad(format!("malformed request line {rl:?}"));
    }
    let mut headers = Vec::new();
    for l in lines {
        let Ok(l) = l else {
            return Parse::Bad("bare CR/LF in head".into());
        };
        let Some(colon) = l.iter().position(|&c| c == b':') else {
            return Parse::Bad(format!(
                "field without colon {:?}",
                String::from_utf8_lossy(l)
            ));
        };
        let name = &l[..colon];
        if name.is_empty() || !name.iter().all(|&c| is_tchar(c)) {
            return Parse::Bad(format!("bad field name {:?}", String::from_utf8_lossy(l)));
        }
        headers.push((
            String::from_utf8_lossy(name).into_owned(),
            trim(&l[colon + 1..]).to_vec(),
        ));
    }
    let mut rec = Recorded {
        conn,
        head: head.to_vec(),
        method: method.to_string(),
        target: target.to_string(),
        version: version.to_string(),
        headers,
        body: Vec::new(),
    };
    let te = rec.all("transfer-encoding").len();
    let cls: Vec<Vec<u8>> = rec
        .all("content-length")
        .iter()
        .map(|v| v.to_vec())
        .collect();
    if te > 0 && !cls.is_empty() {
        return Parse::Bad("Transfer-Encoding and Content-Length forwarded together".into());
    }
    let rest = &b[end + 4..];
    if te > 0 {
        if !rec
            .one("transfer-encoding")
            .is_some_and(|v| v.eq_ignore_ascii_case(b"chunked"))
        {
            return Parse::Bad(format!(
                "forwarded Transfer-Encoding is not exactly 'chunked': {:?}",
                rec.all("transfer-encoding")
                    .iter()
                    .map(|v| String::from_utf8_lossy(v))
                    .collect::<Vec<_>>()
            ));
        }
        return match dechunk(rest) {
            Ok(None) => Parse::More,
            Ok(Some((body, n))) => {
                rec.body = body;
                Parse::Done(Box::new(rec), end + 4 + n)
            }
            Err(e) => Parse::Bad(e),
        };
    }
    let len = match cls.as_slice() {
        [] => 0,
        [v] => match std::str::from_utf8(v).ok().and_then(|t| {
            t.bytes()
                .all(|c| c.is_ascii_digit())
                .then(|| t.parse::<usize>().ok())
                .flatten()
        }) {
            Some(n) => n,
            None => {
                return Parse::Bad(format!(
                    "bad Content-Length {:?}",
                    String::from_utf8_lossy(v)
                ));
            }
        },
        _ => return Parse::Bad("several Content-Length fields forwarded".into()),
    };
    if rest.len() < len {
        return Parse::More;
    }
    rec.body = rest[..len].to_vec();
    Parse::Done(Box::new(rec), end + 4 + len)
}

fn has_token(r: &Recorded, name: &str, token: &str) -> bool {
    r.all(name).iter().any(|v| {
        v.split(|&c| c == b',')
            .any(|t| trim(t).eq_ignore_ascii_case(token.as_bytes()))
    })
}

fn serve(mut s: TcpStream, id: usize, st: &Mutex<RecState>) {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 16384];
    // Whether the head of the request at the start of `buf` is in `heads` already.
    let mut head_seen = false;
    loop {
        if !head_seen && let Some(end) = find(&buf, b"\r\n\r\n") {
            head_seen = true;
            let line = buf[..end].split(|&c| c == b'\n').next().unwrap_or_default();
            let line = String::from_utf8_lossy(line).trim_end().to_string();
            st.lock().unwrap().heads.push(line);
        }
        match parse_request(&buf, id) {
            Parse::Done(rec, n) => {
                buf.drain(..n);
                head_seen = false;
                let close = has_token(&rec, "connection", "close")
                    || (rec.version == "HTTP/1.0" && !has_token(&rec, "connection", "keep-alive"));
                let body = format!("{} {} len={}\n", rec.method, rec.target, rec.body.len());
                st.lock().unwrap().reqs.push(*rec);
                let resp = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n{}\r\n{body}",
                    body.len(),
                    if close { "Connection: close\r\n" } else { "" }
                );
                if s.write_all(resp.as_bytes()).is_err() || close {
                    return;
                }
                continue;
            }
            Parse::Bad(e) => {
                st.lock().unwrap().errors.push(format!(
                    "server conn {id}: {e} in {:?}",
                    String::from_utf8_lossy(&buf[..buf.len().min(300)])
                ));
                return;
            }
            Parse::More => {}
        }
        match s.read(&mut tmp) {
            Ok(0) | Err(_) => {
                if !buf.is_empty() {
                    st.lock().unwrap().partial.push((id, buf));
                }
                return;
            }
            Ok(n) => buf.extend_from_slice(&tmp[..n]),
        }
    }
}

// ---- the client ----

#[derive(Clone, Debug)]
struct Resp {
    status: u16,
    body: Vec<u8>,
}

/// One response from the start of `b`: Ok(None) when incomplete.
fn parse_response(b: &[u8], closed: bool) -> Result<Option<(Resp, usize)>, String> {
    let Some(end) = find(b, b"\r\n\r\n") else {
        return Ok(None);
    };
    let head = String::from_utf8_lossy(&b[..end + 4]).into_owned();
    let status: u16 = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad status line in {head:?}"))?;
    let header = |name: &str| {
        head.lines().skip(1).find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    };
    let rest = &b[end + 4..];
    let mk = |body: Vec<u8>| Resp { status, body };
    if (100..200).contains(&status) || status == 204 || status == 304 {
        return Ok(Some((mk(Vec::new()), end + 4)));
    }
    if header("transfer-encoding").is_some() {
        return match dechunk(rest)? {
            None => Ok(None),
            Some((body, n)) => Ok(Some((mk(body), end + 4 + n))),
        };
    }
    if let Some(cl) = header("content-length") {
        let n: usize = cl.parse().map_err(|_| format!("bad response CL {cl:?}"))?;
        if rest.len() < n {
            return Ok(None);
        }
        return Ok(Some((mk(rest[..n].to_vec()), end + 4 + n)));
    }
    if closed {
        return Ok(Some((mk(rest.to_vec()), b.len())));
    }
    Ok(None)
}

#[derive(Clone, Debug, Default)]
struct ClientView {
    interim: Vec<u16>,
    finals: Vec<Resp>,
    closed: bool,
    timed_out: bool,
    garbage: Option<String>,
}

impl ClientView {
    fn statuses(&self) -> Vec<u16> {
        self.finals.iter().map(|r| r.status).collect()
    }
}

/// Sends `raw` (whole or byte by byte), half-closes if asked, and reads what comes back until
/// the proxy closes, or `want` final responses arrived followed by a quiet spell, or the
/// case timeout.
fn run_client(
    addr: SocketAddr,
    raw: &[u8],
    bytewise: bool,
    half_close: bool,
    want: Option<usize>,
) -> ClientView {
    let mut s = TcpStream::connect(addr).expect("connect to proxy");
    s.set_nodelay(true).unwrap();
    s.set_write_timeout(Some(CASE_TIMEOUT)).unwrap();
    let start = Instant::now();
    if bytewise {
        for b in raw {
            if s.write_all(std::slice::from_ref(b))
                .and_then(|()| s.flush())
                .is_err()
            {
                break;
            }
        }
    } else {
        let _ = s.write_all(raw);
    }
    if half_close {
        let _ = s.shutdown(Shutdown::Write);
    }
    let deadline = start + CASE_TIMEOUT + Duration::from_millis(raw.len() as u64 / 20);
    let mut v = ClientView::default();
    let mut buf = Vec::new();
    let mut tmp = [0u8; 65536];
    let mut quiet_since: Option<Instant> = None;
    loop {
        // Take every complete response out of the buffer.
        loop {
            match parse_response(&buf, v.closed) {
                Ok(Some((r, n))) => {
                    buf.drain(..n);
                    if (100..200).contains(&r.status) && r.status != 101 {
                        v.interim.push(r.status);
                    } else {
                        v.finals.push(r);
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    v.garbage = Some(e);
                    return v;
                }
            }
        }
        if v.closed {
            if !buf.is_empty() {
                v.garbage = Some(format!(
                    "incomplete response at close: {:?}",
                    String::from_utf8_lossy(&buf)
                ));
            }
            return v;
        }
        let now = Instant::now();
        if now >= deadline {
            v.timed_out = true;
            return v;
        }
        let mut wait = deadline - now;
        if want.is_some_and(|w| v.finals.len() >= w) && buf.is_empty() {
            let q = *quiet_since.get_or_insert(now);
            if now >= q + QUIET {
                return v;
            }
            wait = wait.min(q + QUIET - now);
        }
        s.set_read_timeout(Some(wait.max(Duration::from_millis(1))))
            .unwrap();
        match s.read(&mut tmp) {
            Ok(0) => v.closed = true,
            Ok(n) => {
                buf.extend_from_slice(&tmp[..n]);
                quiet_since = None;
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => v.closed = true,
        }
    }
}

/// A fresh valid request on a new connection: must be answered 200 by the backend for exactly
/// this request.
fn probe(addr: SocketAddr, tag: &str) -> Result<(), String> {
    let path = format!("/__probe/{tag}");
    let raw = format!("GET {path} HTTP/1.1\r\nHost: probe.local\r\n\r\n");
    let v = run_client(addr, raw.as_bytes(), false, false, Some(1));
    let want = format!("GET {path} len=0\n");
    match v.finals.as_slice() {
        [r] if r.status == 200 && r.body == want.as_bytes() => Ok(()),
        other => Err(format!(
            "probe {path}: got {:?} (interim {:?}, garbage {:?}, timed out {})",
            other
                .iter()
                .map(|r| format!("{} {:?}", r.status, String::from_utf8_lossy(&r.body)))
                .collect::<Vec<_>>(),
            v.interim,
            v.garbage,
            v.timed_out
        )),
    }
}

// ---- judging ----

fn accepts(e: &str) -> bool {
    e == "accept" || e == "accept-normalized"
}

fn body_is(reqs: &[Recorded], i: usize, want: &[u8]) -> Result<(), String> {
    match reqs.get(i) {
        Some(r) if r.body == want => Ok(()),
        Some(r) => Err(format!(
            "request {i} body {:?}, want {:?}",
            String::from_utf8_lossy(&r.body),
            String::from_utf8_lossy(want)
        )),
        None => Err(format!("no request {i}")),
    }
}

fn header_is(reqs: &[Recorded], i: usize, name: &str, want: &str) -> Result<(), String> {
    let r = reqs.get(i).ok_or(format!("no request {i}"))?;
    let all = r.all(name);
    if all.len() == 1 && all[0] == want.as_bytes() {
        Ok(())
    } else {
        Err(format!(
            "request {i}: {name} fields {:?}, want exactly one {want:?}",
            all.iter()
                .map(|v| String::from_utf8_lossy(v))
                .collect::<Vec<_>>()
        ))
    }
}

fn target_is(reqs: &[Recorded], i: usize, method: &str, targets: &[&str]) -> Result<(), String> {
    let r = reqs.get(i).ok_or(format!("no request {i}"))?;
    if r.method == method && targets.contains(&r.target.as_str()) {
        Ok(())
    } else {
        Err(format!(
            "request {i} is {} {}, want {method} {targets:?}",
            r.method, r.target
        ))
    }
}

/// The body after the first empty line of `raw` (the bytes that must arrive as a body).
fn after_head(raw: &[u8], len: usize) -> Vec<u8> {
    let at = find(raw, b"\r\n\r\n").unwrap() + 4;
    raw[at..at + len].to_vec()
}

/// What `forward_note` asks of an accepted case, where it can be checked on the recorded
/// requests (counts are checked by the caller).
fn forward_checks(c: &Case, reqs: &[Recorded], v: &ClientView) -> Result<(), String> {
    // Whatever the case: no forwarded head may name a smuggled target or the evil host.
    for r in reqs {
        let head = String::from_utf8_lossy(&r.head);
        for bad in ["/smuggled", "/evil", "/inner", "evil.example"] {
            if head.contains(bad) {
                return Err(format!("forwarded head contains {bad:?}: {head:?}"));
            }
        }
        if r.all("host").len() > 1 {
            return Err(format!("several Host fields forwarded: {head:?}"));
        }
    }
    let hello = b"hello";
    match c.id.as_str() {
        "te-tab-ows-valid"
        | "te-case-insensitive-valid"
        | "cl-ows-valid"
        | "chunk-ext-bws"
        | "last-chunk-multi-zero"
        | "chunk-ext-quoted"
        | "chunk-size-leading-zeros"
        | "cl-many-leading-zeros"
        | "te-trailing-comma"
        | "upgrade-with-body" => body_is(reqs, 0, hello),
        "chunk-valid-multi" => body_is(reqs, 0, b"hello world"),
        "cl-dup-same" | "obs-fold-cl-value" => {
            header_is(reqs, 0, "content-length", "5")?;
            body_is(reqs, 0, hello)
        }
        "cl-get-body-http10" => {
            header_is(reqs, 0, "content-length", "5")?;
            body_is(reqs, 0, hello)
        }
        "cl-list-trailing-comma" => header_is(reqs, 0, "content-length", "0"),
        "cl-270-char-header-name" => target_is(reqs, 0, "POST", &["/index"]),
        "cl-underscore-name" => {
            target_is(reqs, 0, "POST", &["/"])?;
            body_is(reqs, 0, b"")?;
            target_is(reqs, 1, "GET", &["/admin"])
        }
        "chunk-trailer-forbidden-fields" => {
            header_is(reqs, 0, "host", "example.com")?;
            body_is(reqs, 0, hello)
        }
        "chunk-trailer-request-lookalike" => target_is(reqs, 0, "GET", &["/"]),
        "hdr-ows-variants" => {
            header_is(reqs, 0, "host", "example.com")?;
            header_is(reqs, 0, "x-a", "v")
        }
        "rl-absolute-form" => {
            target_is(
                reqs,
                0,
                "GET",
                &["/path?q=1", "http://example.com/path?q=1"],
            )?;
            header_is(reqs, 0, "host", "example.com")
        }
        "host-absolute-form-conflict" => header_is(reqs, 0, "host", "example.com"),
        "host-duplicate-same" => header_is(reqs, 0, "host", "example.com"),
        "rl-http12" => {
            let r = reqs.first().ok_or("no request")?;
            if r.version == "HTTP/1.1" {
                Ok(())
            } else {
                Err(format!("forwarded version {}", r.version))
            }
        }
        "rl-options-asterisk" => target_is(reqs, 0, "OPTIONS", &["*"]),
        "expect-http10" => {
            if !v.interim.is_empty() {
                return Err(format!(
                    "interim responses sent to an HTTP/1.0 client: {:?}",
                    v.interim
                ));
            }
            body_is(reqs, 0, hello)
        }
        "expect-obfuscated-y" | "expect-100-body-sent" => body_is(reqs, 0, &after_head(&c.raw, 45)),
        "upgrade-h2c" => {
            let r = reqs.first().ok_or("no request")?;
            let up = r.all("upgrade");
            if up.iter().any(|v| {
                String::from_utf8_lossy(v)
                    .to_ascii_lowercase()
                    .contains("h2c")
            }) || !r.all("http2-settings").is_empty()
            {
                return Err(format!(
                    "h2c upgrade forwarded: {:?}",
                    String::from_utf8_lossy(&r.head)
                ));
            }
            Ok(())
        }
        "upgrade-websocket-valid" => {
            header_is(reqs, 0, "upgrade", "websocket")?;
            header_is(reqs, 0, "sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        }
        "pipeline-cl0-then-post" => {
            header_is(reqs, 0, "id", "0")?;
            body_is(reqs, 0, b"")?;
            header_is(reqs, 1, "id", "1")?;
            body_is(reqs, 1, b"GET / HTTP/1.1\r\nHost: a\r\nid: 2\r\n\r\n")
        }
        "pipeline-post-cl-then-get" => {
            target_is(reqs, 0, "POST", &["/1"])?;
            body_is(reqs, 0, hello)?;
            target_is(reqs, 1, "GET", &["/2"])
        }
        "pipeline-get-body-lookalike" => {
            target_is(reqs, 0, "GET", &["/1"])?;
            body_is(reqs, 0, b"GET /inner HTTP/1.1\r\nHost: example.com\r\n\r\n")?;
            target_is(reqs, 1, "GET", &["/2"])
        }
        "pipeline-close-then-valid-request" | "pipeline-valid-then-invalid" => {
            target_is(reqs, 0, "GET", &["/1"])
        }
        "obs-fold-generic" => {
            let r = reqs.first().ok_or("no request")?;
            let v = r.one("x-folded").ok_or("no single X-Folded field")?;
            let v = String::from_utf8_lossy(v);
            if v.starts_with("first") && v.ends_with("second") {
                Ok(())
            } else {
                Err(format!("X-Folded {v:?}"))
            }
        }
        "hdr-val-nul" => {
            let r = reqs.first().ok_or("no request")?;
            if r.head.contains(&0) {
                Err("NUL forwarded".into())
            } else {
                Ok(())
            }
        }
        "te-http10-no-cl" => body_is(reqs, 0, b""),
        _ => Ok(()),
    }
}

/// Judges one run; Ok("primary" | "alt") or the reason it fails.
fn judge(
    c: &Case,
    v: &ClientView,
    reqs: &[Recorded],
    backend_errors: &[String],
) -> Result<&'static str, String> {
    if let Some(g) = &v.garbage {
        return Err(format!("client got garbage: {g}"));
    }
    if !backend_errors.is_empty() {
        return Err(format!("backend saw bad framing: {backend_errors:?}"));
    }
    let statuses = v.statuses();
    let n = reqs.len();
    let reqs_text = || reqs.iter().map(Recorded::short).collect::<Vec<_>>();
    let last = statuses.last().copied();
    let rejected = last.is_some_and(|s| s != 200);
    if rejected {
        let s = last.unwrap_or_default();
        let served = &statuses[..statuses.len() - 1];
        let (primary, allowed_status, want_reqs) = if c.expect == "reject" {
            (
                Some(s) == c.status,
                Some(s) == c.status || c.alt_status.contains(&s),
                c.backend_requests,
            )
        } else {
            let alt_ok = c.alt_expect.iter().any(|e| e == "reject")
                && (c.alt_status.contains(&s) || (c.alt_status.is_empty() && s == 400));
            (false, alt_ok, 0)
        };
        if !allowed_status {
            return Err(format!(
                "rejected with {statuses:?}, backend got {:?}",
                reqs_text()
            ));
        }
        if n != want_reqs || served.len() != want_reqs || served.iter().any(|&x| x != 200) {
            return Err(format!(
                "rejected with {statuses:?} but backend got {n} requests (want {want_reqs}): {:?}",
                reqs_text()
            ));
        }
        if !v.closed {
            return Err(format!(
                "rejected with {statuses:?} but the connection stayed open"
            ));
        }
        return Ok(if primary { "primary" } else { "alt" });
    }
    if statuses.is_empty() {
        // Closing without a response: only where the corpus says it is acceptable.
        let silent_ok = c.expect == "reject"
            && c.forward_note
                .contains("Closing without a response is acceptable");
        if silent_ok && v.closed && n == c.backend_requests {
            return Ok("alt");
        }
        return Err(format!(
            "no response (closed {}, timed out {}), backend got {:?}",
            v.closed,
            v.timed_out,
            reqs_text()
        ));
    }
    // Every final response is a 200 from the backend: the case was accepted.
    let (primary, want_reqs) = if accepts(&c.expect) {
        (true, c.backend_requests)
    } else if c.alt_expect.iter().any(|e| accepts(e)) {
        (false, c.backend_requests.max(1))
    } else {
        return Err(format!(
            "accepted ({statuses:?}), backend got {:?}",
            reqs_text()
        ));
    };
    if n != want_reqs || statuses.len() != want_reqs {
        return Err(format!(
            "accepted with {statuses:?}, backend got {n} requests (want {want_reqs}): {:?}",
            reqs_text()
        ));
    }
    let note = c.forward_note.to_ascii_lowercase();
    if (note.contains("close after response") || note.contains("closed after the response"))
        && !v.closed
    {
        return Err("accepted but the connection was not closed after the response".into());
    }
    forward_checks(c, reqs, v).map_err(|e| format!("accepted with {statuses:?}: {e}"))?;
    Ok(if primary { "primary" } else { "alt" })
}

fn expected_text(c: &Case) -> String {
    let mut s = match c.status {
        Some(st) => format!("{} {st} br={}", c.expect, c.backend_requests),
        None => format!("{} br={}", c.expect, c.backend_requests),
    };
    if !c.alt_expect.is_empty() || !c.alt_status.is_empty() {
        s += &format!(" alt {:?} {:?}", c.alt_expect, c.alt_status);
    }
    s
}

struct Row {
    id: String,
    pass: &'static str,
    expected: String,
    got: String,
    verdict: Result<&'static str, String>,
}

struct Lane {
    front: SocketAddr,
    rec: Recorder,
}

fn run_case(lane: &Lane, lane_no: usize, c: &Case, bytewise: bool, seq: usize) -> Row {
    let pass = if bytewise { "bytewise" } else { "whole" };
    let (before_reqs, before_errs, before_heads) = {
        let g = lane.rec.st.lock().unwrap();
        (g.reqs.len(), g.errors.len(), g.heads.len())
    };
    // The count of final responses after which a quiet spell ends the read; rejections are read
    // until the proxy closes.
    let want = accepts(&c.expect).then_some(c.backend_requests);
    let v = run_client(lane.front, &c.raw, bytewise, c.half_close, want);
    // Let the proxy finish the client session so its server connection goes back to the pool.
    std::thread::sleep(Duration::from_millis(10));
    let tag = format!("{lane_no}-{pass}-{seq}");
    let probe_res = probe(lane.front, &tag);
    let (reqs, errs, partial, heads) = {
        let g = lane.rec.st.lock().unwrap();
        let probe_target = format!("/__probe/{tag}");
        let reqs: Vec<Recorded> = g.reqs[before_reqs..]
            .iter()
            .filter(|r| r.target != probe_target)
            .cloned()
            .collect();
        let probe_line = format!("GET {probe_target} HTTP/1.1");
        let heads: Vec<String> = g.heads[before_heads..]
            .iter()
            .filter(|l| **l != probe_line)
            .cloned()
            .collect();
        (
            reqs,
            g.errors[before_errs..].to_vec(),
            g.partial.len(),
            heads,
        )
    };
    let mut verdict = judge(c, &v, &reqs, &errs);
    // Sent in one write, a request refused with nothing to forward (a malformed chunked body
    // included) must be refused before its head reaches the server. A half-closed case is
    // only known bad at the close, and a bytewise one once its bad byte arrives.
    let refused = v.statuses().last().is_some_and(|&s| s != 200);
    if !bytewise && !c.half_close && refused && c.backend_requests == 0 && !heads.is_empty() {
        verdict = Err(format!(
            "refused, but {} request heads reached the server: {heads:?}",
            heads.len()
        ));
    }
    if let Err(e) = probe_res {
        verdict = Err(match verdict {
            Ok(_) => e,
            Err(first) => format!("{first}; {e}"),
        });
    }
    let got = format!(
        "statuses {:?}{} closed={} backend={} heads={} partial_conns={partial}",
        v.statuses(),
        if v.interim.is_empty() {
            String::new()
        } else {
            format!(" interim {:?}", v.interim)
        },
        v.closed,
        reqs.len(),
        heads.len()
    );
    Row {
        id: c.id.clone(),
        pass,
        expected: expected_text(c),
        got,
        verdict,
    }
}

#[test]
fn corpus_against_the_real_proxy_whole_and_bytewise() {
    let cases = corpus::load();
    assert_eq!(cases.len(), 106, "corpus size changed");
    let lanes: Vec<Lane> = (0..LANES)
        .map(|_| Lane {
            front: lo(free_port()),
            rec: Recorder::start(),
        })
        .collect();
    let mut cfg = String::from(
        "global\n    nbthread 1\n\ndefaults\n    mode http\n    timeout connect 2s\n    timeout client 10s\n    timeout server 10s\n    timeout http-request 10s\n\n",
    );
    for (i, l) in lanes.iter().enumerate() {
        cfg += &format!(
            "frontend fe{i}\n    bind {}\n    default_backend be{i}\n\nbackend be{i}\n    http-reuse always\n    server s{i} {}\n\n",
            l.front, l.rec.addr
        );
    }
    let _p = Proc::portcullis(&cfg, lanes[0].front);
    let started = Instant::now();
    let cases = Arc::new(cases);
    let lanes = Arc::new(lanes);
    let mut rows: Vec<Row> = Vec::new();
    for bytewise in [false, true] {
        let handles: Vec<_> = (0..LANES)
            .map(|ln| {
                let cases = Arc::clone(&cases);
                let lanes = Arc::clone(&lanes);
                std::thread::spawn(move || {
                    let lane = &lanes[ln];
                    cases
                        .iter()
                        .enumerate()
                        .filter(|(i, _)| i % LANES == ln)
                        .map(|(i, c)| run_case(lane, ln, c, bytewise, i))
                        .collect::<Vec<Row>>()
                })
            })
            .collect();
        for h in handles {
            rows.extend(h.join().unwrap());
        }
    }
    let elapsed = started.elapsed();
    // The probes only catch a poisoned server connection if they reuse the cases' ones.
    for (i, l) in lanes.iter().enumerate() {
        let g = l.rec.st.lock().unwrap();
        println!(
            "lane {i}: {} requests over {} server connections, {} left partial",
            g.reqs.len(),
            g.conns,
            g.partial.len()
        );
        assert!(
            g.conns * 2 < g.reqs.len(),
            "lane {i}: server connections are not being reused ({} for {} requests)",
            g.conns,
            g.reqs.len()
        );
    }
    let mut summary = String::new();
    for pass in ["whole", "bytewise"] {
        let of = |v: &str| {
            rows.iter()
                .filter(|r| r.pass == pass && r.verdict.as_ref().is_ok_and(|x| *x == v))
                .count()
        };
        let failed = rows
            .iter()
            .filter(|r| r.pass == pass && r.verdict.is_err())
            .count();
        summary += &format!(
            "{} ({}): {} primary, {} alt, {failed} failed\n",
            pass,
            proxy::io_engine(),
            of("primary"),
            of("alt")
        );
    }
    println!("{summary}in {elapsed:?}");
    for r in rows
        .iter()
        .filter(|r| r.verdict.as_ref().is_ok_and(|x| *x == "alt"))
    {
        println!("  alt: {} [{}] {}", r.id, r.pass, r.got);
    }
    let failures: Vec<&Row> = rows.iter().filter(|r| r.verdict.is_err()).collect();
    if !failures.is_empty() {
        let mut table = format!("{:<36} {:<9} {:<44} got\n", "id", "pass", "expected");
        for r in &failures {
            table += &format!(
                "{:<36} {:<9} {:<44} {}\n{:>47}{}\n",
                r.id,
                r.pass,
                r.expected,
                r.got,
                "-> ",
                r.verdict.as_ref().err().map_or("", String::as_str)
            );
        }
        panic!(
            "{} of {} runs failed:\n{table}\n{summary}",
            failures.len(),
            rows.len()
        );
    }
    assert!(elapsed < Duration::from_secs(90), "too slow: {elapsed:?}");
}
