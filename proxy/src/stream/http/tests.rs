//! The L7 transaction without sockets: a scripted client ([`MockFront`]) and scripted servers
//! ([`MockUp`]), on a current-thread runtime with paused time. Each test checks what the client
//! got, the end-of-stream record `finish` logged and its log line.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use super::front::Part;
use super::upstream::{ServerConn, Side};
use super::{Front, Upstream, run_with};
use crate::backend::ConnectError;
use crate::config::model::HttpReuse;
use crate::engine::Shared;
use crate::engine::conn::Duplex;
use crate::engine::service::Origin;
use crate::http::errors::Page;
use crate::http::head::{Headers, RequestHead, ResponseHead, Version};
use crate::log::SessionLog;
use crate::model::{Proxy, Server};
use crate::stick::StkCtrs;
use crate::stream::end::tap;
use crate::tls::stream::TlsInfo;

/// One side's bytes: what its reads return, in order, and what was written to it.
#[derive(Default)]
struct Script {
    reads: RefCell<VecDeque<Vec<u8>>>,
    /// Once the reads are used up: end of stream, else a read that never completes.
    eof_at_end: bool,
    written: RefCell<Vec<u8>>,
    shut: Cell<bool>,
    aborted: Cell<bool>,
}

impl Script {
    fn new(reads: &[&[u8]], eof_at_end: bool) -> Rc<Script> {
        Rc::new(Script {
            reads: RefCell::new(reads.iter().map(|r| r.to_vec()).collect()),
            eof_at_end,
            ..Script::default()
        })
    }

    fn written(&self) -> String {
        String::from_utf8_lossy(&self.written.borrow()).into_owned()
    }
}

impl Duplex for Script {
    async fn read(&self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        let next = self.reads.borrow_mut().pop_front();
        match next {
            Some(b) => {
                buf.extend_from_slice(&b);
                (Ok(b.len()), buf)
            }
            None if self.eof_at_end => (Ok(0), buf),
            None => std::future::pending().await,
        }
    }

    async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        self.written.borrow_mut().extend_from_slice(&buf);
        (Ok(()), buf)
    }

    async fn shutdown_write(&self) -> io::Result<()> {
        self.shut.set(true);
        Ok(())
    }

    fn abort(&self, _rst: bool) {
        self.aborted.set(true);
    }
}

/// The client: an HTTP/1 connection (serialising as `Conn` does), or an h2 stream (`h2`), whose
/// request head comes structured and which records what it is sent, structured.
struct MockFront {
    io: Rc<Script>,
    later_stream: bool,
    h2: Option<MockH2>,
}

/// An h2 stream's side of [`MockFront`].
struct MockH2 {
    head: RefCell<Option<RequestHead>>,
    sent: Rc<RefCell<Vec<Sent>>>,
}

/// What an h2 front was given, in order.
#[derive(Debug, PartialEq, Eq)]
enum Sent {
    /// A response head: status, fields, whether it ends the stream.
    Head(u16, Vec<(String, String)>, bool),
    /// Payload, and whether it ends the stream.
    Data(String, bool),
    Trailers(Vec<(String, String)>),
    /// End of stream after the last piece.
    End,
}

fn fields(h: &Headers) -> Vec<(String, String)> {
    h.0.iter()
        .map(|f| (f.name.to_string(), f.value_str().into_owned()))
        .collect()
}

impl Duplex for MockFront {
    async fn read(&self, buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        self.io.read(buf).await
    }
    async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        self.io.write_all(buf).await
    }
    async fn shutdown_write(&self) -> io::Result<()> {
        self.io.shutdown_write().await
    }
    fn abort(&self, rst: bool) {
        self.io.abort(rst)
    }
}

impl Front for MockFront {
    fn tls(&self) -> Option<&Arc<TlsInfo>> {
        None
    }
    fn later_stream(&self) -> bool {
        self.later_stream
    }
    fn take_head(&self) -> Option<Result<RequestHead, u16>> {
        self.h2.as_ref()?.head.borrow_mut().take().map(Ok)
    }
    fn log_line(&self) -> Option<&str> {
        self.h2.as_ref().map(|_| "GET https://x/ HTTP/2.0")
    }
    fn payload(&self) -> bool {
        self.h2.is_some()
    }
    async fn send_page(&self, page: &Page) -> io::Result<()> {
        if let Some(h2) = &self.h2 {
            let end = page.body.is_empty();
            let mut sent = h2.sent.borrow_mut();
            sent.push(Sent::Head(
                page.head.status,
                fields(&page.head.headers),
                end,
            ));
            if !end {
                sent.push(Sent::Data(String::from_utf8_lossy(&page.body).into(), true));
            }
            return Ok(());
        }
        self.io.write_all(page.wire()).await.0
    }
    async fn send_interim(&self, _head: &ResponseHead, wire: Vec<u8>) -> io::Result<()> {
        self.io.write_all(wire).await.0
    }
    async fn send_part(&self, part: Part<'_>) -> (io::Result<()>, Vec<u8>) {
        let Some(h2) = &self.h2 else {
            let mut out = Vec::new();
            if let Some(h) = part.head {
                crate::http::h1::write_response_head(h, &mut out);
            }
            out.extend_from_slice(&part.wire);
            let r = self.io.write_all(out).await.0;
            if part.close {
                self.io.shut.set(true);
            }
            return (r, part.wire);
        };
        let mut sent = h2.sent.borrow_mut();
        let bodyless = part.payload.is_empty() && part.trailers.is_none();
        if let Some(h) = part.head {
            sent.push(Sent::Head(
                h.status,
                fields(&h.headers),
                part.end && bodyless,
            ));
        }
        for r in part.payload {
            let data = String::from_utf8_lossy(&part.wire[r.clone()]).into_owned();
            sent.push(Sent::Data(data, false));
        }
        if let Some(t) = &part.trailers {
            sent.push(Sent::Trailers(fields(t)));
        }
        if part.end && !(part.head.is_some() && bodyless) {
            sent.push(Sent::End);
        }
        (Ok(()), part.wire)
    }
}

/// What the next server connection request gets.
enum Next {
    /// A new connection to server `.0` over `.1`, after `.2` retries, redispatched if `.3`.
    New(usize, Rc<Script>, u32, bool),
    /// The connection the stream kept, reused.
    Kept,
    /// No connection.
    Fail(ConnectError),
}

/// Scripted servers: each request for a connection takes the next [`Next`].
struct MockUp {
    be: Arc<Proxy>,
    next: VecDeque<Next>,
    kept: Option<(Arc<Server>, Rc<Script>, HttpReuse)>,
    /// The `first` flag of each request (`http-reuse safe`).
    firsts: Rc<RefCell<Vec<bool>>>,
    /// Whether the stream's kept connection went to the pool at its end.
    pooled: Rc<Cell<bool>>,
    /// Kept connections the stream gave to the pool while waiting lean.
    released: Rc<Cell<u32>>,
}

impl Upstream for MockUp {
    type Conn = Script;

    async fn conn(
        &mut self,
        _side: Side<'_>,
        _be: &Proxy,
        first: bool,
        _key: Option<u32>,
        log: &mut SessionLog,
    ) -> ServerConn<Script> {
        self.firsts.borrow_mut().push(first);
        log.queue = Some(Duration::ZERO);
        let (srv, conn, reused) = match self.next.pop_front() {
            Some(Next::New(i, conn, retries, redispatched)) => {
                log.retries = retries;
                log.redispatched = redispatched;
                log.connect = Some(Duration::from_millis(1));
                (Arc::clone(&self.be.pool().servers[i]), conn, false)
            }
            Some(Next::Kept) => {
                let (srv, conn, _) = self.kept.take().expect("a kept connection");
                (srv, conn, true)
            }
            Some(Next::Fail(e)) => return Err((e, None)),
            None => return Err((ConnectError::NoServer, None)),
        };
        // The slot `take_server` would have taken (the transaction releases it).
        srv.cur_conns.fetch_add(1, Ordering::AcqRel);
        Ok((srv, conn, reused))
    }

    fn keep(&mut self, srv: Arc<Server>, conn: Rc<Script>, reuse: HttpReuse, private: bool) {
        // A private connection is kept as under `never`: never shared.
        let reuse = if private { HttpReuse::Never } else { reuse };
        self.kept = Some((srv, conn, reuse));
    }

    fn end(&mut self, stopping: bool) {
        let kept = self.kept.take();
        self.pooled
            .set(kept.is_some_and(|k| k.2 != HttpReuse::Never) && !stopping);
    }

    fn release_idle(&mut self, stopping: bool) {
        if !stopping && self.kept.as_ref().is_some_and(|k| k.2 != HttpReuse::Never) {
            self.kept = None;
            self.released.set(self.released.get() + 1);
        }
    }
}

/// A process with frontend `fe` (httplog) and backend `be` (servers s1, s2); its frontend has a
/// log target, but the logger has no sink: the lines are rendered from the tapped records.
fn shared(http_reuse: &str) -> Arc<Shared> {
    let text = format!(
        "global\n    log 127.0.0.1:9 local0\n\
         defaults\n    mode http\n    log global\n    option httplog\n    \
         timeout connect 1s\n    timeout client 5s\n    timeout server 2s\n\
         frontend fe\n    bind 127.0.0.1:1\n    \
         acl d path /deny\n    acl r path /redir\n    acl t path /ret\n    \
         http-request deny if d\n    http-request redirect location /there if r\n    \
         http-request return status 200 content-type text/plain string hello if t\n    \
         acl h path /head\n    http-request set-method GET if h\n    \
         default_backend be\n\
         backend be\n    http-reuse {http_reuse}\n    \
         server s1 127.0.0.1:9\n    server s2 127.0.0.1:10\n"
    );
    let cfg = crate::config::parse_str("t.cfg", &text, &|_| None)
        .expect("config")
        .config;
    let mut quiet = cfg.clone();
    for p in &mut quiet.proxies {
        p.logs.clear();
    }
    let logger = crate::log::Logger::new(&quiet).expect("logger");
    let model = Arc::new(crate::model::Model::build(cfg, None).expect("model"));
    Arc::new(Shared {
        model,
        io: crate::engine::io::Backend::Epoll,
        stopping: AtomicBool::new(false),
        sessions: AtomicUsize::new(0),
        stop_tx: tokio::sync::watch::channel(false).0,
        log: logger,
        tls: Vec::new(),
        certs: Arc::new(crate::tls::CertStore::new()),
        handover: crate::engine::handover::Registry::new(Vec::new()),
    })
}

/// What a stream left behind.
struct Run {
    client: Rc<Script>,
    /// The end-of-stream records, in order, and their log lines.
    ends: Vec<SessionLog>,
    lines: Vec<String>,
    firsts: Vec<bool>,
    pooled: bool,
    released: u32,
}

/// Runs one client connection sending `reads` (then closing) against the servers `next`.
fn run(sh: &Arc<Shared>, reads: &[&[u8]], next: Vec<Next>, later_stream: bool) -> Run {
    let client = Script::new(reads, true);
    run_on(sh, client, next, later_stream, async {})
}

/// An h2 stream's front and what it was sent.
type H2Side = (RequestHead, Rc<RefCell<Vec<Sent>>>);

/// [`run_on`] for a client that is not an h2 stream.
fn run_on(
    sh: &Arc<Shared>,
    client: Rc<Script>,
    next: Vec<Next>,
    later_stream: bool,
    beside: impl std::future::Future<Output = ()>,
) -> Run {
    run_front(sh, client, None, next, later_stream, beside)
}

/// [`run`] for the client `client` (an h2 stream with `h2`), with `beside` running next to the
/// stream.
fn run_front(
    sh: &Arc<Shared>,
    client: Rc<Script>,
    h2: Option<H2Side>,
    next: Vec<Next>,
    later_stream: bool,
    beside: impl std::future::Future<Output = ()>,
) -> Run {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .expect("runtime");
    let fe = Arc::clone(sh.model.proxy("fe").expect("fe"));
    let be = Arc::clone(sh.model.proxy("be").expect("be"));
    let (firsts, pooled, released) = (Rc::default(), Rc::default(), Rc::<Cell<u32>>::default());
    let up = MockUp {
        be,
        next: next.into(),
        kept: None,
        firsts: Rc::clone(&firsts),
        pooled: Rc::clone(&pooled),
        released: Rc::clone(&released),
    };
    let front = MockFront {
        io: Rc::clone(&client),
        later_stream,
        h2: h2.map(|(head, sent)| MockH2 {
            head: RefCell::new(Some(head)),
            sent,
        }),
    };
    let origin = Origin {
        peer: Some(([127, 0, 0, 1], 40000).into()),
        local: Some(([127, 0, 0, 1], 8080).into()),
        proxied: None,
        bind: 0,
    };
    let sess = Rc::new(StkCtrs::default());
    tap::take();
    let stream = run_with(
        Arc::clone(sh),
        Arc::clone(&fe),
        front,
        up,
        origin,
        (sess, Default::default()),
    );
    let both = async { tokio::join!(stream, beside) };
    rt.block_on(async { tokio::time::timeout(Duration::from_secs(600), both).await })
        .expect("the stream ends");
    let ends = tap::take();
    let lines = ends
        .iter()
        .map(|e| sh.log.session_line(&fe, e).expect("a log format"))
        .collect();
    Run {
        client,
        ends,
        lines,
        firsts: firsts.take(),
        pooled: pooled.get(),
        released: released.get(),
    }
}

const GET: &[u8] = b"GET / HTTP/1.1\r\nhost: x\r\n\r\n";
const OK: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";

fn server(reads: &[&[u8]]) -> Rc<Script> {
    Script::new(reads, true)
}

#[test]
fn no_usable_server_is_a_503_sc() {
    let sh = shared("safe");
    let r = run(&sh, &[GET], vec![Next::Fail(ConnectError::NoServer)], false);
    assert!(
        r.client.written().starts_with("HTTP/1.1 503 "),
        "{}",
        r.client.written()
    );
    assert_eq!(r.ends.len(), 1);
    let e = &r.ends[0];
    assert_eq!((e.status, &e.term), (Some(503), b"SC"));
    assert_eq!(e.server, None);
    assert!(r.lines[0].contains(" fe be/<NOSRV> "), "{}", r.lines[0]);
    assert!(
        r.lines[0].contains(" 503 ") && r.lines[0].contains(" SC-- "),
        "{}",
        r.lines[0]
    );
    // Nothing kept, nothing pooled; the backend's slot is back.
    assert!(!r.pooled);
    assert_eq!(
        sh.model.proxy("be").unwrap().beconn.load(Ordering::Relaxed),
        0
    );
}

#[test]
fn a_retry_then_a_redispatch_show_in_the_record_and_the_line() {
    let sh = shared("safe");
    let s2 = server(&[OK]);
    let r = run(
        &sh,
        &[GET],
        vec![Next::New(1, Rc::clone(&s2), 1, true)],
        false,
    );
    assert!(
        r.client.written().ends_with("\r\n\r\nok"),
        "{}",
        r.client.written()
    );
    assert!(
        s2.written().starts_with("GET / HTTP/1.1\r\n"),
        "{}",
        s2.written()
    );
    let e = &r.ends[0];
    assert_eq!((e.status, e.retries, e.redispatched), (Some(200), 1, true));
    assert_eq!(e.server.as_deref(), Some("s2"));
    assert!(r.lines[0].contains(" fe be/s2 "), "{}", r.lines[0]);
    // HAProxy's `%rc`: a redispatched stream's retries with a `+`.
    assert!(r.lines[0].contains("/+1 "), "{}", r.lines[0]);
    assert!(r.lines[0].contains(" ---- "), "{}", r.lines[0]);
    let srv = &sh.model.proxy("be").unwrap().pool().servers[1];
    assert_eq!(srv.cur_conns.load(Ordering::Relaxed), 0);
}

#[test]
fn a_bad_response_head_is_a_502_sh() {
    let sh = shared("safe");
    let s1 = server(&[b"HTTP/1.1 abc\r\n\r\n"]);
    let r = run(
        &sh,
        &[GET],
        vec![Next::New(0, Rc::clone(&s1), 0, false)],
        false,
    );
    assert!(
        r.client.written().starts_with("HTTP/1.1 502 "),
        "{}",
        r.client.written()
    );
    assert!(s1.aborted.get());
    let e = &r.ends[0];
    assert_eq!((e.status, &e.term), (Some(502), b"SH"));
    assert!(
        r.lines[0].contains(" 502 ") && r.lines[0].contains(" SH-- "),
        "{}",
        r.lines[0]
    );
    let srv = &sh.model.proxy("be").unwrap().pool().servers[0];
    assert_eq!(srv.counters.errors_resp.load(Ordering::Relaxed), 1);
}

#[test]
fn a_silent_server_is_a_504_sh_after_timeout_server() {
    let sh = shared("safe");
    // No response, and no close: only `timeout server` (2 s, paused time) ends the wait.
    let s1 = Script::new(&[], false);
    let r = run(&sh, &[GET], vec![Next::New(0, s1, 0, false)], false);
    assert!(
        r.client.written().starts_with("HTTP/1.1 504 "),
        "{}",
        r.client.written()
    );
    let e = &r.ends[0];
    assert_eq!((e.status, &e.term, e.response), (Some(504), b"sH", None));
    assert!(
        r.lines[0].contains(" 504 ") && r.lines[0].contains(" sH-- "),
        "{}",
        r.lines[0]
    );
    let total = e.total.as_millis();
    assert!((2000..2100).contains(&total), "{total}");
}

#[test]
fn keep_alive_reuses_the_streams_own_connection() {
    let sh = shared("safe");
    let s1 = server(&[OK, OK]);
    let next = vec![Next::New(0, Rc::clone(&s1), 0, false), Next::Kept];
    let r = run(&sh, &[GET, GET], next, false);
    assert_eq!(r.client.written().matches("HTTP/1.1 200 OK").count(), 2);
    assert_eq!(s1.written().matches("GET / HTTP/1.1").count(), 2);
    assert_eq!(r.ends.len(), 2);
    for (e, l) in r.ends.iter().zip(&r.lines) {
        assert_eq!((e.status, &e.term), (Some(200), b"--"));
        assert!(l.contains(" fe be/s1 ") && l.contains(" ---- "), "{l}");
    }
    assert_eq!(r.firsts, [true, false]);
    let srv = &sh.model.proxy("be").unwrap().pool().servers[0];
    assert_eq!(srv.counters.reuse.load(Ordering::Relaxed), 1);
    // The connection the stream kept goes to the pool when the client leaves, not while it
    // waits for the next request (few connections: the wait is not lean).
    assert!(r.pooled);
    assert_eq!(r.released, 0);
}

/// Enough connections in the process for the wait between requests to be lean.
fn lean(sh: &Shared) {
    sh.model.actconn.set_max(100_000);
    for _ in 0..super::LEAN_IDLE_FROM {
        assert!(sh.model.actconn.try_enter());
    }
}

const NTLM_401: &[u8] =
    b"HTTP/1.1 401 Unauthorized\r\nwww-authenticate: Negotiate, NTLM\r\ncontent-length: 0\r\n\r\n";

#[test]
fn an_ntlm_challenge_makes_the_server_connection_private() {
    // Waiting lean after the challenge, the stream keeps its connection for the client's
    // answer; the 200 after it leaves a shareable one, given to the pool at the next wait.
    let sh = shared("always");
    lean(&sh);
    let s1 = server(&[NTLM_401, OK]);
    let next = vec![Next::New(0, Rc::clone(&s1), 0, false), Next::Kept];
    let r = run(&sh, &[GET, GET], next, false);
    assert!(r.client.written().starts_with("HTTP/1.1 401 "));
    assert_eq!(r.client.written().matches("HTTP/1.1 200 OK").count(), 1);
    assert_eq!(r.released, 1);
    // A client leaving after the challenge: its private connection is not pooled.
    let sh = shared("always");
    let r = run(
        &sh,
        &[GET],
        vec![Next::New(0, server(&[NTLM_401]), 0, false)],
        false,
    );
    assert!(r.client.written().starts_with("HTTP/1.1 401 "));
    assert!(!r.pooled);
}

#[test]
fn a_stream_waiting_lean_gives_its_server_connection_to_the_pool() {
    let sh = shared("safe");
    lean(&sh);
    // The second request finds no connection kept (here a new one; the pool's in production).
    let (s1, s2) = (server(&[OK]), server(&[OK]));
    let next = vec![
        Next::New(0, Rc::clone(&s1), 0, false),
        Next::New(0, s2, 0, false),
    ];
    let r = run(&sh, &[GET, GET], next, false);
    assert_eq!(r.client.written().matches("HTTP/1.1 200 OK").count(), 2);
    // After each response, waiting for the next request (the client closes after the second).
    assert_eq!(r.released, 2);
    assert_eq!(r.firsts, [true, false]);
    // Nothing left kept for the end.
    assert!(!r.pooled);

    // Under `http-reuse never` the stream keeps it.
    let sh = shared("never");
    lean(&sh);
    let s1 = server(&[OK, OK]);
    let next = vec![Next::New(0, Rc::clone(&s1), 0, false), Next::Kept];
    let r = run(&sh, &[GET, GET], next, false);
    assert_eq!(r.client.written().matches("HTTP/1.1 200 OK").count(), 2);
    assert_eq!(r.released, 0);
}

#[test]
fn a_reused_connection_found_closed_is_replayed_on_a_new_one() {
    let sh = shared("safe");
    // s1 answers once, then closes while idle; the second request goes again to a new one.
    let (a, b) = (server(&[OK]), server(&[OK]));
    let next = vec![
        Next::New(0, Rc::clone(&a), 0, false),
        Next::Kept,
        Next::New(0, Rc::clone(&b), 0, false),
    ];
    let r = run(&sh, &[GET, GET], next, false);
    assert_eq!(r.client.written().matches("HTTP/1.1 200 OK").count(), 2);
    assert!(
        b.written().starts_with("GET / HTTP/1.1\r\n"),
        "{}",
        b.written()
    );
    assert_eq!(r.ends.len(), 2);
    assert_eq!((r.ends[1].status, &r.ends[1].term), (Some(200), b"--"));
    assert!(
        r.lines[1].contains(" 200 ") && r.lines[1].contains(" ---- "),
        "{}",
        r.lines[1]
    );
    // The replay asks as a first request: no other stream's idle connection.
    assert_eq!(r.firsts, [true, false, true]);
    let srv = &sh.model.proxy("be").unwrap().pool().servers[0];
    assert_eq!(srv.cur_conns.load(Ordering::Relaxed), 0);
}

#[test]
fn deny_keeps_the_connection_with_and_without_a_received_body() {
    let sh = shared("safe");
    let post: &[u8] = b"POST /deny HTTP/1.1\r\nhost: x\r\ncontent-length: 3\r\n\r\nabc";
    let get: &[u8] = b"GET /deny HTTP/1.1\r\nhost: x\r\n\r\n";
    let r = run(&sh, &[post, get], vec![], false);
    // The body was dropped: the next request parsed and got its own 403.
    assert_eq!(
        r.client.written().matches("HTTP/1.1 403 Forbidden").count(),
        2
    );
    assert!(
        !r.client.written().contains("onnection: close"),
        "{}",
        r.client.written()
    );
    assert_eq!(r.ends.len(), 2);
    for (e, l) in r.ends.iter().zip(&r.lines) {
        assert_eq!((e.status, &e.term), (Some(403), b"PR"));
        assert!(l.contains(" fe fe/<NOSRV> ") && l.contains(" PR-- "), "{l}");
    }
    assert!(
        r.lines[0].contains("\"POST /deny HTTP/1.1\""),
        "{}",
        r.lines[0]
    );
}

#[test]
fn redirect_and_return_answer_locally() {
    let sh = shared("safe");
    let redir: &[u8] = b"GET /redir HTTP/1.1\r\nhost: x\r\n\r\n";
    let ret: &[u8] = b"GET /ret HTTP/1.1\r\nhost: x\r\n\r\n";
    let r = run(&sh, &[redir, ret], vec![], false);
    let out = r.client.written();
    assert!(out.starts_with("HTTP/1.1 302 Found\r\n"), "{out}");
    assert!(out.contains("\r\nlocation: /there\r\n"), "{out}");
    assert!(out.ends_with("\r\n\r\nhello"), "{out}");
    assert_eq!(r.ends.len(), 2);
    assert_eq!((r.ends[0].status, &r.ends[0].term), (Some(302), b"LR"));
    assert_eq!((r.ends[1].status, &r.ends[1].term), (Some(200), b"LR"));
    assert!(
        r.lines[0].contains(" 302 ") && r.lines[0].contains(" LR-- "),
        "{}",
        r.lines[0]
    );
    assert!(
        r.lines[1].contains(" 200 ") && r.lines[1].contains(" LR-- "),
        "{}",
        r.lines[1]
    );
}

#[test]
fn a_return_before_the_whole_body_closes_the_connection() {
    let sh = shared("safe");
    // 10 bytes announced, 3 received: the reply closes (HAProxy does not wait for the rest).
    let post: &[u8] = b"POST /ret HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\nabc";
    let r = run(&sh, &[post, GET], vec![], false);
    let out = r.client.written();
    assert!(out.starts_with("HTTP/1.1 200 OK\r\n"), "{out}");
    assert!(out.contains("\r\nconnection: close\r\n"), "{out}");
    assert!(r.client.shut.get());
    // One transaction only: the bytes after the reply are never read as a request.
    assert_eq!(r.ends.len(), 1);
    assert_eq!((r.ends[0].status, &r.ends[0].term), (Some(200), b"LR"));
    assert!(r.lines[0].contains(" LR-- "), "{}", r.lines[0]);
}

#[test]
fn a_101_hands_the_stream_to_the_relay() {
    let sh = shared("safe");
    let up: &[u8] = b"GET /ws HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: websocket\r\n\
        sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n";
    let s1 = server(&[
        b"HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: websocket\r\n\
          sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\nfrom-srv",
    ]);
    let r = run(
        &sh,
        &[up, b"from-cli"],
        vec![Next::New(0, Rc::clone(&s1), 0, false)],
        false,
    );
    let out = r.client.written();
    assert!(
        out.starts_with("HTTP/1.1 101 Switching Protocols\r\n"),
        "{out}"
    );
    assert!(out.ends_with("\r\n\r\nfrom-srv"), "{out}");
    assert!(
        s1.written().ends_with("\r\n\r\nfrom-cli"),
        "{}",
        s1.written()
    );
    assert_eq!(r.ends.len(), 1);
    let e = &r.ends[0];
    assert_eq!(e.status, Some(101));
    // The relay's bytes count on top of the heads'.
    assert!(
        e.bytes_in >= 8 && e.bytes_out >= 8,
        "{} {}",
        e.bytes_in,
        e.bytes_out
    );
    assert!(r.lines[0].contains(" 101 "), "{}", r.lines[0]);
    // A tunnel's server connection is never kept.
    assert!(!r.pooled);
}

#[test]
fn a_101_without_the_websocket_accept_is_a_502_sh() {
    let sh = shared("safe");
    let up: &[u8] = b"GET /ws HTTP/1.1\r\nhost: x\r\nconnection: upgrade\r\nupgrade: websocket\r\n\
        sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n";
    let s1 = server(&[
        b"HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: websocket\r\n\
          sec-websocket-accept: bm90IHRoZSByaWdodCBvbmU=\r\n\r\n",
    ]);
    let r = run(
        &sh,
        &[up],
        vec![Next::New(0, Rc::clone(&s1), 0, false)],
        false,
    );
    let out = r.client.written();
    assert!(out.starts_with("HTTP/1.1 502 Bad Gateway\r\n"), "{out}");
    assert_eq!(r.ends.len(), 1);
    assert_eq!((r.ends[0].status, &r.ends[0].term), (Some(502), b"SH"));
    assert!(r.lines[0].contains(" SH-- "), "{}", r.lines[0]);
}

#[test]
fn a_later_h2_stream_may_take_a_shared_connection_the_first_may_not() {
    let sh = shared("safe");
    let r = run(
        &sh,
        &[GET],
        vec![Next::New(0, server(&[OK]), 0, false)],
        true,
    );
    assert_eq!(r.firsts, [false]);
    assert_eq!(r.ends[0].status, Some(200));
    let r = run(
        &sh,
        &[GET],
        vec![Next::New(0, server(&[OK]), 0, false)],
        false,
    );
    assert_eq!(r.firsts, [true]);
    assert!(r.lines[0].contains(" 200 "), "{}", r.lines[0]);
}

/// `on-marked-down shutdown-sessions` 100 ms into the stream (paused time: before any timeout).
async fn kill_after_100ms(sh: Arc<Shared>, srv: usize) {
    tokio::time::sleep(Duration::from_millis(100)).await;
    sh.model.proxy("be").unwrap().pool().servers[srv].shutdown_sessions(b'D');
}

#[test]
fn shutdown_sessions_before_the_response_is_a_502_dh() {
    let sh = shared("safe");
    let s1 = Script::new(&[], false);
    let next = vec![Next::New(0, Rc::clone(&s1), 0, false)];
    let kill = kill_after_100ms(Arc::clone(&sh), 0);
    let r = run_on(&sh, Script::new(&[GET], true), next, false, kill);
    assert!(
        r.client.written().starts_with("HTTP/1.1 502 "),
        "{}",
        r.client.written()
    );
    assert!(s1.aborted.get());
    let e = &r.ends[0];
    assert_eq!((e.status, &e.term, e.response), (Some(502), b"DH", None));
    assert!(
        r.lines[0].contains(" 502 ") && r.lines[0].contains(" DH-- "),
        "{}",
        r.lines[0]
    );
    let srv = &sh.model.proxy("be").unwrap().pool().servers[0];
    assert_eq!(srv.cur_conns.load(Ordering::Relaxed), 0);
}

#[test]
fn shutdown_sessions_during_the_body_cuts_it_dd() {
    let sh = shared("safe");
    // 10 bytes announced, 2 sent, then nothing: the kill cuts the response.
    let s1 = Script::new(&[b"HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nok"], false);
    let next = vec![Next::New(0, Rc::clone(&s1), 0, false)];
    let kill = kill_after_100ms(Arc::clone(&sh), 0);
    let r = run_on(&sh, Script::new(&[GET], true), next, false, kill);
    assert!(
        r.client.written().starts_with("HTTP/1.1 200 OK\r\n"),
        "{}",
        r.client.written()
    );
    assert!(r.client.aborted.get());
    let e = &r.ends[0];
    assert_eq!((e.status, &e.term), (Some(200), b"DD"));
    assert!(
        r.lines[0].contains(" 200 ") && r.lines[0].contains(" DD-- "),
        "{}",
        r.lines[0]
    );
}

#[test]
fn a_bad_request_is_a_400_pr_badreq() {
    let sh = shared("safe");
    let r = run(
        &sh,
        &[b"GET / HTTP/1.1\r\nbad header\r\n\r\n"],
        vec![],
        false,
    );
    assert!(
        r.client.written().starts_with("HTTP/1.1 400 "),
        "{}",
        r.client.written()
    );
    assert!(r.client.shut.get());
    assert_eq!(r.ends.len(), 1);
    let e = &r.ends[0];
    assert_eq!((e.status, &e.term, e.bytes_out), (Some(400), b"PR", 0));
    assert!(r.lines[0].contains(" fe fe/<NOSRV> "), "{}", r.lines[0]);
    assert!(
        r.lines[0].contains(" PR-- ") && r.lines[0].ends_with("\"<BADREQ>\""),
        "{}",
        r.lines[0]
    );
    assert!(r.firsts.is_empty());
}

#[test]
fn a_silent_client_is_a_408_cr_after_timeout_client() {
    let sh = shared("safe");
    let r = run_on(&sh, Script::new(&[], false), vec![], false, async {});
    assert!(
        r.client.written().starts_with("HTTP/1.1 408 "),
        "{}",
        r.client.written()
    );
    assert_eq!(r.ends.len(), 1);
    let e = &r.ends[0];
    assert_eq!((e.status, &e.term), (Some(408), b"cR"));
    assert!(
        r.lines[0].contains(" 408 ") && r.lines[0].contains(" cR-- "),
        "{}",
        r.lines[0]
    );
    // `timeout client` (5 s) bounds the wait for the first request's head.
    let total = e.total.as_millis();
    assert!((5000..5100).contains(&total), "{total}");
}

#[test]
fn a_request_body_is_streamed_to_the_server_as_it_comes() {
    let sh = shared("safe");
    let head: &[u8] = b"POST /up HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n";
    let s1 = server(&[OK]);
    let next = vec![Next::New(0, Rc::clone(&s1), 0, false)];
    let r = run(&sh, &[head, b"3\r\nabc\r\n", b"0\r\n\r\n"], next, false);
    assert!(
        s1.written().ends_with("\r\n\r\n3\r\nabc\r\n0\r\n\r\n"),
        "{}",
        s1.written()
    );
    assert_eq!((r.ends[0].status, &r.ends[0].term), (Some(200), b"--"));
    assert!(
        r.lines[0].contains("\"POST /up HTTP/1.1\""),
        "{}",
        r.lines[0]
    );
}

#[test]
fn a_client_gone_in_the_middle_of_its_body_is_cd() {
    let sh = shared("safe");
    let head: &[u8] = b"POST /up HTTP/1.1\r\nhost: x\r\ncontent-length: 10\r\n\r\nabc";
    let s1 = Script::new(&[], false);
    let next = vec![Next::New(0, Rc::clone(&s1), 0, false)];
    let r = run(&sh, &[head], next, false);
    assert!(s1.written().ends_with("\r\n\r\nabc"), "{}", s1.written());
    assert!(s1.aborted.get());
    assert_eq!(r.ends.len(), 1);
    assert_eq!(&r.ends[0].term, b"CD");
    assert!(r.lines[0].contains(" CD-- "), "{}", r.lines[0]);
    let be = sh.model.proxy("be").unwrap();
    assert_eq!(be.counters.cli_aborts.load(Ordering::Relaxed), 1);
}

/// An h2 stream: its request head arrives structured, the server's chunked response goes back
/// as a head, payload pieces (no chunk framing), the trailers, then the end of the stream; the
/// log line shows the h2 request line and HAProxy's byte count.
#[test]
fn h2_front_gets_the_response_structured() {
    let sh = shared("safe");
    let mut headers = Headers::default();
    headers.append("host", "x");
    let head = RequestHead {
        method: "GET".into(),
        target: "/".into(),
        version: Version::Http11,
        headers,
    };
    let resp: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\n\
        transfer-encoding: chunked\r\n\r\n5\r\nhello\r\n3;x=y\r\nabc\r\n0\r\nx-t: 1\r\n\r\n";
    let s1 = server(&[resp]);
    let sent = Rc::new(RefCell::new(Vec::new()));
    let client = Script::new(&[], true);
    let r = run_front(
        &sh,
        client,
        Some((head, Rc::clone(&sent))),
        vec![Next::New(0, Rc::clone(&s1), 0, false)],
        false,
        async {},
    );
    let text = |v: &[(&str, &str)]| -> Vec<(String, String)> {
        v.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    };
    assert_eq!(
        *sent.borrow(),
        [
            Sent::Head(
                200,
                text(&[
                    ("content-type", "text/plain"),
                    ("transfer-encoding", "chunked")
                ]),
                false
            ),
            Sent::Data("hello".into(), false),
            Sent::Data("abc".into(), false),
            Sent::Trailers(text(&[("x-t", "1")])),
            Sent::End,
        ]
    );
    // No HTTP/1 byte went to the client; the server got the request as HTTP/1.1.
    assert_eq!(r.client.written(), "");
    assert!(
        s1.written().starts_with("GET / HTTP/1.1\r\nhost: x\r\n"),
        "{}",
        s1.written()
    );
    assert_eq!(r.ends.len(), 1);
    assert_eq!((r.ends[0].status, &r.ends[0].term), (Some(200), b"--"));
    assert!(r.lines[0].contains(" 200 "), "{}", r.lines[0]);
    assert!(
        r.lines[0].contains("\"GET https://x/ HTTP/2.0\""),
        "{}",
        r.lines[0]
    );
    // The stream ends after its one transaction; the server connection is kept.
    assert!(r.pooled);
}

/// An h2 stream answered locally gets the page structured: a head and its body.
#[test]
fn h2_front_gets_local_replies_structured() {
    let sh = shared("safe");
    let mut headers = Headers::default();
    headers.append("host", "x");
    let head = RequestHead {
        method: "GET".into(),
        target: "/ret".into(),
        version: Version::Http11,
        headers,
    };
    let sent = Rc::new(RefCell::new(Vec::new()));
    let r = run_front(
        &sh,
        Script::new(&[], true),
        Some((head, Rc::clone(&sent))),
        vec![],
        false,
        async {},
    );
    let sent = sent.borrow();
    assert!(
        matches!(&sent[..], [Sent::Head(200, f, false), Sent::Data(b, true)]
            if b == "hello" && f.iter().any(|(n, v)| n == "content-length" && v == "5")),
        "{sent:?}"
    );
    assert_eq!(r.client.written(), "");
    assert_eq!((r.ends[0].status, &r.ends[0].term), (Some(200), b"LR"));
}

/// A HEAD a rule sends as GET: the server's body (chunked, in pieces) is read and dropped, the
/// client gets the head alone, and the server connection serves the next request.
#[test]
fn a_head_sent_as_get_gets_no_body_and_keeps_the_connection() {
    let sh = shared("safe");
    let chunked: &[u8] = b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n5\r\nhello\r\n";
    let s1 = server(&[chunked, b"3\r\nabc\r\n0\r\n\r\n", OK]);
    let next = vec![Next::New(0, Rc::clone(&s1), 0, false), Next::Kept];
    let head: &[u8] = b"HEAD /head HTTP/1.1\r\nhost: x\r\n\r\n";
    let r = run(&sh, &[head, GET], next, false);
    assert!(
        s1.written().starts_with("GET /head HTTP/1.1\r\n"),
        "{}",
        s1.written()
    );
    assert_eq!(
        r.client.written(),
        "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\
         HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok"
    );
    assert_eq!(r.firsts, [true, false]);
    assert_eq!(r.ends.len(), 2);
}
