//! The L7 session (I/O shell around the sans-I/O codec): one client connection, its keep-alive
//! loop of transactions, each one parsed strictly, passed through the frontend rules, routed to a
//! backend, sent over a fresh or pooled server connection (retries, redispatch), and answered with
//! the server's response streamed back, then logged.
//!
//! Bodies are streamed in both directions through one buffer per side and never held whole;
//! chunked bodies are forwarded verbatim once the decoder has validated their framing.

use crate::engine::service::Origin;
use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;

use crate::stick::StkCtrs;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio::time::Instant;

use crate::ana::capture::Captured;
use crate::ana::rules::{self, Verdict};
use crate::ana::sample::SampleCtx;
use crate::ana::vars::{SessVars, Vars};
use crate::backend::{self, ConnectError};
use crate::config::model::HttpReuse;
use crate::engine::Shared;
use crate::engine::conn::Conn;
use crate::engine::idle::{Activity, Timer};
use crate::engine::io::Stream;
use crate::engine::pool::{self, BUF, give_buf, take_buf};
use crate::http::errors::{self, ConnHeader};
use crate::http::h1::{self, BodyDecoder, BodyFraming, Limits};
use crate::http::h2::Client;
use crate::http::head::{RequestHead, ResponseHead, Version};
use crate::http::stats;
use crate::log::SessionLog;
use crate::model::{Counters, Proxy, Server, stats as counters};
use crate::stream::end::{End, finish};
use crate::tls::stream::TlsInfo;
use portcullis_runtime_api::html::StatStatus;

const BODY_BUF: usize = 64 * 1024;
/// Largest stats page form accepted (HAProxy's buffer: `tune.bufsize`).
const STATS_POST_MAX: usize = 16384;
/// How long an idle keep-alive connection may wait for its next request once a soft stop began,
/// without `timeout http-keep-alive`.
const SOFT_STOP_IDLE: Duration = Duration::from_secs(1);
/// Buffer a connection waiting for its next request reads into: idle keep-alive connections then
/// hold this much instead of a full buffer (HAProxy holds none while idle).
const IDLE_READ: usize = 1024;

/// Why a transaction ended early, mapped to the termination state and counters.
enum Abort {
    /// Client went away or failed (`C`), at `state` (R, H, D …).
    Client(u8),
    /// Client timeout (`c`).
    ClientTimeout(u8),
    /// Server closed or failed (`S`).
    Server(u8),
    /// Server timeout (`s`).
    ServerTimeout(u8),
    /// The request body is malformed or cut short by the client's close (`CD`): answered with
    /// this status while no response has started.
    BadBody(u16),
}

/// The server a transaction is using, watched for `shutdown-sessions` from outside the
/// transaction's future so that the kill can drop it wherever it is waiting.
/// The server in use, its kill epoch when taken, and the connection to reset.
type Armed = (Arc<Server>, u64, Rc<Conn>);

#[derive(Default)]
struct KillWatch {
    cur: RefCell<Option<Armed>>,
    changed: tokio::sync::Notify,
    /// The response has started towards the client (a kill then cuts it).
    streaming: std::cell::Cell<bool>,
}

impl KillWatch {
    fn arm(&self, srv: &Arc<Server>, conn: &Rc<Conn>) {
        *self.cur.borrow_mut() = Some((Arc::clone(srv), srv.kill_epoch(), Rc::clone(conn)));
        self.changed.notify_waiters();
    }

    fn disarm(&self) {
        *self.cur.borrow_mut() = None;
        self.changed.notify_waiters();
    }

    /// Resolves when the armed server's sessions are shut down.
    async fn killed(&self) {
        loop {
            let changed = self.changed.notified();
            let mut changed = std::pin::pin!(changed);
            changed.as_mut().enable();
            let armed = self
                .cur
                .borrow()
                .as_ref()
                .map(|(s, e, _)| (Arc::clone(s), *e));
            match armed {
                Some((srv, epoch)) => {
                    tokio::select! {
                        biased;
                        _ = srv.killed(epoch) => return,
                        _ = changed => {}
                    }
                }
                None => changed.await,
            }
        }
    }
}

struct Session {
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    client: Rc<Client>,
    /// The frontend TLS connection's facts (None: plain).
    tls: Option<Arc<TlsInfo>>,
    peer: Option<SocketAddr>,
    local: Option<SocketAddr>,
    /// The PROXY protocol header of an `accept-proxy` bind (`fc_pp_*`, sent on by `send-proxy`).
    proxied: Option<Arc<crate::proxy_proto::Header>>,
    /// Client bytes read but not yet consumed.
    cbuf: Vec<u8>,
    activity: Activity,
    /// Timeouts of the client reads, and of the server reads and writes (one each: their
    /// deadlines differ, and each only moves forward).
    ctimer: Timer,
    stimer: Timer,
    /// The server connection this session used last (kept for its next request).
    own: Option<(Arc<Server>, Rc<Conn>)>,
    requests: u64,
    /// Stick counters the session tracked at accept (`tcp-request connection track-sc`).
    sess: Rc<StkCtrs>,
    /// The `sess.*` variables, kept across the connection's transactions.
    sess_vars: SessVars,
}

pub async fn run(shared: Arc<Shared>, fe: Arc<Proxy>, conn: Conn, peer: Option<SocketAddr>) {
    let origin = Origin::of(&conn, peer);
    run_tracked(
        shared,
        fe,
        Client::Conn(conn),
        origin,
        Rc::new(StkCtrs::default()),
    )
    .await
}

/// [`run`] for a connection whose `tcp-request connection` rules tracked counters in `sess`.
pub async fn run_tracked(
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    conn: Client,
    origin: Origin,
    sess: Rc<StkCtrs>,
) {
    let tls = conn.tls().cloned();
    // An h2 stream after the connection's first is not a connection's first request: it may use
    // an idle server connection under `http-reuse safe`, as HAProxy's streams do.
    let requests = u64::from(conn.h2_later_stream());
    let client = Rc::new(conn);
    let mut s = Session {
        shared,
        fe,
        client,
        tls,
        peer: origin.peer,
        local: origin.local,
        proxied: origin.proxied,
        cbuf: Vec::new(),
        activity: Activity::default(),
        ctimer: Timer::default(),
        stimer: Timer::default(),
        own: None,
        requests,
        sess,
        sess_vars: SessVars::default(),
    };
    // A soft stop (SIGUSR1) ends keep-alive connections without racing the client: the next
    // request is answered with `Connection: close` (see `transaction`).
    while s.transaction().await {}
    if let Some((srv, conn)) = s.own.take() {
        let reuse = s.fe.cfg.http_reuse;
        // Stopping: nothing will take it again (the worker has emptied its pools).
        if reuse != HttpReuse::Never
            && !s.shared.stopping.load(Ordering::Acquire)
            && !srv.cfg.opts.send_proxy.enabled()
        {
            pool::put(srv.addr(), conn);
        }
    }
}

impl Session {
    /// An HTTP request arrived (valid or not): frontend and process `req_tot`, `req_rate`.
    fn count_request(&self) {
        let now = self.shared.model.now_ms();
        self.fe.fe_counters.request(now);
        self.shared.model.totals.request(now);
        for t in self.sess.iter() {
            t.count_http_req(now);
        }
    }

    fn new_log(&self) -> SessionLog {
        let mut log = SessionLog::new(
            &self.fe,
            self.peer,
            self.local,
            std::time::SystemTime::now(),
        );
        log.actconn = self.shared.model.actconn.current();
        log.feconn = self.fe.feconn.current();
        log.req_counter = self.shared.model.streams.fetch_add(1, Ordering::Relaxed);
        log.ssl = self.tls.is_some();
        log.tls = self.tls.clone();
        log.proxied = self.proxied.clone();
        log
    }

    /// Reads more client bytes into `cbuf`; Ok(0) at end of stream; Err(None) on timeout.
    async fn read_client(
        &mut self,
        deadline: Option<Instant>,
        idle: Option<Duration>,
    ) -> Result<usize, Option<std::io::Error>> {
        let mut buf = std::mem::take(&mut self.cbuf);
        if buf.capacity() == 0 {
            buf.reserve(IDLE_READ);
        } else if buf.capacity() == buf.len() && buf.capacity() < BUF {
            // A head longer than the idle buffer: continue in a full one.
            let mut full = take_buf();
            full.extend_from_slice(&buf);
            buf = full;
        }
        let activity = &self.activity;
        let due = || match (idle.map(|t| activity.last() + t), deadline) {
            (Some(i), Some(d)) => Some(i.min(d)),
            (i, d) => i.or(d),
        };
        match self.ctimer.limit(self.client.read(buf), due).await {
            Some((res, buf)) => {
                self.cbuf = buf;
                match res {
                    Ok(n) => {
                        self.activity.touch();
                        Ok(n)
                    }
                    Err(e) => Err(Some(e)),
                }
            }
            _ => Err(None),
        }
    }

    async fn send_client(&self, bytes: Vec<u8>) -> bool {
        let (r, _) = self.client.write_all(bytes).await;
        r.is_ok()
    }

    /// Sends a locally generated response, logs it, and tells whether the connection stays open.
    /// `keep` keeps the connection for another request (HAProxy does after deny, redirect and
    /// return, unless the client asked to close or a request body is left unread).
    async fn local_reply(
        &mut self,
        mut log: SessionLog,
        status: u16,
        bytes: Vec<u8>,
        term: [u8; 2],
        start: Instant,
        keep: bool,
    ) -> bool {
        // An applet may log another status than it sends (see `stats::Applet::log_status`).
        log.status = Some(log.status.unwrap_or(status));
        // Errors the H1 mux answers itself (`<BADREQ>`) count no byte in HAProxy's `%B`.
        log.bytes_out = if log.request_line.as_deref() == Some("<BADREQ>") {
            0
        } else {
            crate::log::htx::reply_size(&bytes)
        };
        log.term = term;
        self.fe.fe_counters.count_status(status);
        if log.request_line.as_deref() != Some("<BADREQ>") {
            self.fe.fe_counters.bytes(log.bytes_in, log.bytes_out);
        }
        let ok = self.send_client(bytes).await;
        log.total = start.elapsed();
        finish(&self.shared, &self.fe, End::log_only(log));
        if !keep {
            let _ = self.client.shutdown_write().await;
        }
        ok && keep
    }

    /// One request/response exchange. Returns whether to read another request on this connection.
    async fn transaction(&mut self) -> bool {
        let first = self.requests == 0;
        // Waiting for a new request: hold a small buffer, not a full one.
        if self.cbuf.is_empty() && self.cbuf.capacity() > IDLE_READ {
            give_buf(std::mem::take(&mut self.cbuf));
        }
        let t = self.fe.cfg.timeouts;
        let wait_start = Instant::now();
        let limits = Limits::default();
        // Before the first byte of a follow-up request, `timeout http-keep-alive` applies (HAProxy
        // falls back to http-request); then `timeout http-request` bounds the whole head.
        let mut deadline: Option<Instant> = None;
        // An h2 stream's request, already checked as the HTTP/1 parser would.
        if let Some(req) = self.client.take_h2_head() {
            return Box::pin(self.process((req, 0), first, wait_start)).await;
        }
        let mut got_first_byte = !self.cbuf.is_empty();
        let mut start = wait_start;
        if got_first_byte {
            deadline = t.http_request.map(|d| start + d);
        }
        let head = loop {
            match h1::parse_request_head(&self.cbuf, &limits) {
                Ok(Some(h)) => break h,
                Ok(None) => {}
                Err(e) => {
                    let mut log = self.new_log();
                    log.request_line = Some("<BADREQ>".into());
                    Counters::add(&self.fe.fe_counters.errors_req, 1);
                    self.count_request();
                    let status = e.status();
                    return Box::pin(self.local_reply(
                        log,
                        status,
                        refusal(status),
                        *b"PR",
                        start,
                        false,
                    ))
                    .await;
                }
            }
            let idle_wait = if got_first_byte {
                None
            } else if first {
                t.http_request.or(t.client)
            } else {
                t.http_keep_alive.or(t.http_request).or(t.client)
            };
            let dl = if got_first_byte {
                deadline
            } else {
                idle_wait.map(|d| wait_start + d)
            };
            // Idle between requests at a soft stop: closing now would race a request on its way
            // (and dropping the read could lose one already read), so the read goes on until the
            // connection has been idle for `timeout http-keep-alive`. With that timeout set, the
            // read's own deadline (`dl`) is already that instant: no watch needed, and none of
            // its per-request cost (a subscription and a boxed future).
            let soft_stop = (!got_first_byte && !first && t.http_keep_alive.is_none())
                .then(|| self.shared.stop_tx.subscribe());
            let idle_limit = wait_start + t.http_keep_alive.unwrap_or(SOFT_STOP_IDLE);
            // One read future, however it is awaited: it is most of an idle connection's state.
            let read = {
                let read = std::pin::pin!(self.read_client(dl, t.client));
                match soft_stop {
                    None => read.await,
                    Some(stop) => match Box::pin(read_at_soft_stop(read, stop, idle_limit)).await {
                        Some(r) => r,
                        None => return false,
                    },
                }
            };
            match read {
                Ok(0) => {
                    if !got_first_byte {
                        // HAProxy 2.6 counts a connection closed before its first byte as a
                        // request (`req_tot`), not one closed between requests.
                        if first {
                            self.count_request();
                        }
                        // Closed between requests: nothing to log (and a silent probe on the first
                        // request is `dontlognull` territory).
                        if first && !self.fe.cfg.options.dontlognull {
                            let mut log = self.new_log();
                            log.term = *b"CR";
                            log.null = true;
                            log.status = Some(400);
                            log.request_line = Some("<BADREQ>".into());
                            finish(&self.shared, &self.fe, End::log_only(log));
                        }
                        return false;
                    }
                    // Boxed, like every reply below: an idle connection's state should not hold
                    // a log record (held across the await) for the rare error.
                    return Box::pin(async move {
                        let mut log = self.new_log();
                        log.term = *b"CR";
                        log.request_line = Some("<BADREQ>".into());
                        Counters::add(&self.fe.fe_counters.errors_req, 1);
                        log.status = Some(400);
                        let (page, _) =
                            errors::reply_for(&[&self.fe.cfg.extra], 400, ConnHeader::Close);
                        let _ = self.send_client(page).await;
                        log.total = start.elapsed();
                        finish(&self.shared, &self.fe, End::log_only(log));
                        false
                    })
                    .await;
                }
                Ok(_) => {
                    if !got_first_byte {
                        got_first_byte = true;
                        start = Instant::now();
                        deadline = t.http_request.map(|d| start + d);
                    }
                }
                Err(None) => {
                    if !got_first_byte && !first {
                        return false;
                    }
                    // 408 with cR--, as HAProxy (also for a silent first connection).
                    return Box::pin(async move {
                        let mut log = self.new_log();
                        log.request_line = Some("<BADREQ>".into());
                        Counters::add(&self.fe.fe_counters.errors_req, 1);
                        let null = !got_first_byte;
                        log.null = null;
                        let (reply, _) =
                            errors::reply_for(&[&self.fe.cfg.extra], 408, ConnHeader::Close);
                        if null && self.fe.cfg.options.dontlognull {
                            let _ = self.send_client(reply).await;
                            return false;
                        }
                        self.local_reply(log, 408, reply, *b"cR", start, false)
                            .await
                    })
                    .await;
                }
                Err(Some(_)) => {
                    if got_first_byte {
                        let mut log = self.new_log();
                        log.term = *b"CR";
                        log.status = Some(400);
                        log.request_line = Some("<BADREQ>".into());
                        log.total = start.elapsed();
                        finish(&self.shared, &self.fe, End::log_only(log));
                    }
                    return false;
                }
            }
        };
        // The rest of the transaction runs boxed: an idle keep-alive connection then holds only
        // the small head-reading state, not the whole exchange's.
        Box::pin(self.process(head, first, start)).await
    }

    /// A parsed request head: rules, routing, the exchange with a server, the log line.
    async fn process(&mut self, head: (RequestHead, usize), first: bool, start: Instant) -> bool {
        let t = self.fe.cfg.timeouts;
        let (mut req, consumed) = head;
        self.cbuf.drain(..consumed);
        self.requests += 1;
        self.count_request();
        let mut log = self.new_log();
        log.accept_date = std::time::SystemTime::now() - start.elapsed();
        log.request = Some(start.elapsed());
        // `capture request header` sees the request as received, before any rule.
        log.captures = Captured::start(&self.fe.cfg.captures);
        if let Some(c) = &log.captures {
            c.headers(false, &self.fe.cfg.captures.req, &req.headers);
        }
        let caps = log.captures.clone();
        let vars = Vars::new(Rc::clone(&self.sess_vars));
        log.vars = Some(Rc::clone(&vars));
        // Only a log line reads it: no allocation per request when the frontend does not log.
        if !self.fe.cfg.logs.is_empty() {
            log.request_line = Some(match self.client.h2_log_line() {
                Some(l) => l.to_string(),
                None => format!("{} {} {}", req.method, req.target, req.version.as_str()),
            });
        }
        log.bytes_in = crate::log::htx::request_head_size(&req);

        // Body bytes read with the head are validated before anything reaches a server: HAProxy's
        // H1 mux parses them in the same pass as the head and refuses the request (400, PR--).
        let framing = h1::request_framing(&req).and_then(|f| {
            BodyDecoder::new(f).advance(&self.cbuf)?;
            Ok(f)
        });
        let framing = match framing {
            Ok(f) => f,
            Err(e) => {
                Counters::add(&self.fe.fe_counters.errors_req, 1);
                log.request = None;
                log.request_line = Some("<BADREQ>".into());
                let status = e.status();
                return self
                    .local_reply(log, status, refusal(status), *b"PR", start, false)
                    .await;
            }
        };
        // Without a log format, HAProxy logs "Connect from" per stream, i.e. per valid request.
        self.shared.log.connect(&self.fe, &log);
        // `unique-id-format`: made once per stream, from what is known before the rules (HAProxy
        // makes it at first use, at the latest before the backend's headers are added).
        log.unique_id = self.shared.log.unique_id(&self.fe, &log);
        let uid = log.unique_id.clone();
        // A request arriving during a soft stop is served, then the connection closes.
        let client_close = h1::wants_close(req.version, &req.headers)
            || h1::framing_forces_close(req.version, &req.headers)
            || self.shared.stopping.load(Ordering::Acquire);
        let upgrade = h1::is_upgrade(&req);
        h1::normalize_request(&mut req, &framing);

        // Frontend rules, then routing, then the backend's rules.
        let http10 = req.version == Version::Http10;
        // A stats page POST carries its form in a small body: have it all before the rules run
        // (only where a `stats admin` could use it).
        if req.method == "POST"
            && let BodyFraming::Length(n) = framing
            && n <= STATS_POST_MAX as u64
            && self.shared.model.stats_admin
        {
            let dl = t.http_request.map(|d| start + d);
            while (self.cbuf.len() as u64) < n {
                match self.read_client(dl, t.client).await {
                    Ok(m) if m > 0 => {}
                    _ => break,
                }
            }
        }
        // A local reply keeps the connection when the request body, if any, is already wholly
        // received (HAProxy's H1 mux then drops it): its length here.
        let body_here = match framing {
            BodyFraming::None => Some(0),
            f => BodyDecoder::new(f)
                .advance(&self.cbuf)
                .ok()
                .filter(|p| p.done)
                .map(|p| p.consumed),
        };
        let keep = !client_close && body_here.is_some();
        let conn_hdr = |closing: bool| ConnHeader::for_reply(http10, !client_close, closing);
        let src = self.peer.unwrap_or_else(|| ([0, 0, 0, 0], 0).into());
        let dst = self.local.unwrap_or_else(|| ([0, 0, 0, 0], 0).into());
        let fe = Arc::clone(&self.fe);
        let mut be = Arc::clone(&fe);
        // The stream's stick counters (`http-request track-sc`): held until the transaction
        // ends (`conn_cur`).
        let strm = StkCtrs::default();
        // `monitor-uri`: the exact target is answered with the 200 page (or errorfile 200)
        // before any rule, and is not logged, as HAProxy does.
        if fe.cfg.extra.monitor_uri.as_deref() == Some(req.target.as_str()) {
            let (mut page, close) = errors::reply_for(&[&fe.cfg.extra], 200, conn_hdr(!keep));
            if req.method == "HEAD" {
                page = errors::head_only(&page).to_vec();
            }
            if let Some(n) = body_here.filter(|_| keep) {
                self.cbuf.drain(..n.min(self.cbuf.len()));
            }
            let sent = self.send_client(page).await;
            if !keep || close {
                let _ = self.client.shutdown_write().await;
            }
            return sent && keep && !close;
        }
        for stage in 0..2 {
            let mut base = SampleCtx::new(src, dst, &fe.name)
                .with_tls(self.tls.as_deref())
                .with_proxied(self.proxied.as_deref());
            base.captures = caps.as_deref();
            base.vars = Some(&vars);
            base.userlists = Some(&be.rules.userlists);
            base.counts = Some((&*self.shared.model, &be.name));
            base.unique_id = uid.as_deref();
            let now = self.shared.model.now_ms();
            base.stick = self
                .shared
                .model
                .stick_view(&be, Some(&self.sess), Some(&strm), now);
            let verdict = rules::apply_http_request(&be.rules.http_request, &mut req, &base);
            let reply = match verdict {
                // HAProxy checks `stats uri` once the proxy's http-request rules let it through.
                Verdict::Continue => {
                    match be.cfg.stats.as_ref().filter(|p| stats::matches(p, &req)) {
                        Some(page) => {
                            let ctx = SampleCtx {
                                req: Some(&req),
                                ..base
                            };
                            let admin = be.rules.stats_admin.as_ref().is_some_and(|c| c.eval(&ctx));
                            let stopping = self.shared.stopping.load(Ordering::Relaxed);
                            let a = if req.method == "POST" {
                                let body = match (framing, body_here) {
                                    (BodyFraming::None, _) => Ok(&[][..]),
                                    (BodyFraming::Length(n), Some(_))
                                        if n <= STATS_POST_MAX as u64 =>
                                    {
                                        Ok(self.cbuf.get(..n as usize).unwrap_or(&[]))
                                    }
                                    (BodyFraming::Length(_), _) => Err(StatStatus::Excd),
                                    _ => Err(StatStatus::Ival),
                                };
                                stats::stats_post_reply(
                                    &self.shared,
                                    page,
                                    &req,
                                    admin,
                                    body,
                                    conn_hdr(!keep),
                                )
                            } else {
                                stats::stats_reply(
                                    &self.shared.model,
                                    stopping,
                                    page,
                                    &req,
                                    admin,
                                    conn_hdr(!keep),
                                )
                            };
                            Some(applet_reply(&mut log, &fe, a, keep))
                        }
                        None => None,
                    }
                }
                Verdict::Prometheus => {
                    let stopping = self.shared.stopping.load(Ordering::Relaxed);
                    let a = stats::prometheus_reply(&self.shared.model, stopping, conn_hdr(!keep));
                    Some(applet_reply(&mut log, &fe, a, keep))
                }
                Verdict::Deny(st) => {
                    Counters::add(&fe.fe_counters.denied_req, 1);
                    // Once a backend is assigned (its own rules), HAProxy counts it there too.
                    if stage == 1 {
                        Counters::add(&be.counters.denied_req, 1);
                    }
                    // The backend's page once it is assigned, else the frontend's (HAProxy).
                    let pages: &[&crate::config::model::ProxyExtra] = if stage == 1 {
                        &[&be.cfg.extra, &fe.cfg.extra]
                    } else {
                        &[&fe.cfg.extra]
                    };
                    let (page, close) = errors::reply_for(pages, st, conn_hdr(!keep));
                    Some((st, page, *b"PR", keep && !close))
                }
                Verdict::Auth(realm) => {
                    let realm = realm.unwrap_or_else(|| be.name.clone());
                    let page = errors::with_connection(
                        &errors::auth_response(&realm, false),
                        conn_hdr(!keep),
                    );
                    Some((401, page, *b"LR", keep))
                }
                Verdict::Redirect { code, location } => {
                    let close = !keep;
                    Some((
                        code,
                        errors::with_connection(
                            &errors::redirect_response(code, &location, false),
                            conn_hdr(close),
                        ),
                        *b"LR",
                        keep,
                    ))
                }
                // `use-service lua.<name>`: an applet's answer, logged as HAProxy logs applets.
                Verdict::Service {
                    name,
                    status,
                    bytes,
                    close,
                } => {
                    let keep = keep && !close;
                    let a = stats::Applet {
                        status,
                        log_status: status,
                        server: "",
                        // A body ended by the close (HTTP/1.0): no `connection` header, as
                        // HAProxy.
                        bytes: if close {
                            bytes
                        } else {
                            errors::with_connection(&bytes, conn_hdr(!keep))
                        },
                        served: true,
                    };
                    let r = applet_reply(&mut log, &fe, a, keep);
                    log.server = Some(format!("<lua.{name}>"));
                    Some(r)
                }
                // A Lua action's `txn:done([reply])`: its reply, or a close without any.
                Verdict::Reply { status, bytes } if bytes.is_empty() => {
                    Some((status, bytes, *b"LR", false))
                }
                Verdict::Reply { status, bytes } => Some((
                    status,
                    errors::with_connection(&bytes, conn_hdr(!keep)),
                    *b"LR",
                    keep,
                )),
                Verdict::Return {
                    status,
                    content_type,
                    body,
                } => {
                    let body = body.unwrap_or_default();
                    let bytes = errors::return_response(
                        status,
                        content_type.as_deref(),
                        body.as_bytes(),
                        false,
                    );
                    Some((
                        status,
                        errors::with_connection(&bytes, conn_hdr(!keep)),
                        *b"LR",
                        keep,
                    ))
                }
            };
            if let Some((status, bytes, term, keep)) = reply {
                if stage == 1 {
                    log.backend = Some(be.name.clone());
                }
                if keep && let Some(n) = body_here {
                    self.cbuf.drain(..n.min(self.cbuf.len()));
                }
                let bytes = if req.method == "HEAD" {
                    errors::head_only(&bytes).to_vec()
                } else {
                    bytes
                };
                return self
                    .local_reply(log, status, bytes, term, start, keep)
                    .await;
            }
            if stage == 1 {
                break;
            }
            let ctx = SampleCtx {
                req: Some(&req),
                ..base
            };
            let Some(idx) = rules::route(&fe.rules, fe.index, fe.is_backend(), &ctx) else {
                return self
                    .local_reply(
                        log,
                        503,
                        errors::reply_for(&[&fe.cfg.extra], 503, ConnHeader::Close).0,
                        *b"SC",
                        start,
                        false,
                    )
                    .await;
            };
            let Some(next) = self.shared.model.proxies.get(idx).cloned() else {
                return false;
            };
            if Arc::ptr_eq(&next, &fe) {
                break;
            }
            be = next;
        }
        log.backend = Some(be.name.clone());
        if let (Some(h), Some(id)) = (&self.fe.cfg.unique_id_header, &uid) {
            req.headers.append(h.clone(), id.clone());
        }
        self.prepare_request(&mut req, &be, upgrade);

        let mut head_bytes = Vec::with_capacity(1024);
        h1::write_request_head(&req, &mut head_bytes);
        let n = be.beconn.fetch_add(1, Ordering::Relaxed) + 1;
        be.counters.smax.update(n);
        be.counters.session(self.shared.model.now_ms());
        Counters::add(&be.counters.req_tot, 1);
        let result = self
            .exchange(
                &be,
                &req,
                framing,
                head_bytes,
                client_close,
                upgrade,
                first,
                &mut log,
                start,
            )
            .await;
        log.total = start.elapsed();
        // The server's slot is released already (`exchange_on`): the backend's goes here.
        let end = End {
            count_bytes: true,
            ..End::on(log, &be)
        };
        finish(&self.shared, &self.fe, end);
        result
    }

    /// The request's balancing key for `be` (`balance hash` evaluates its expression here).
    fn lb_key(&self, be: &Proxy, req: &RequestHead) -> Option<u32> {
        let pool = be.pool();
        let Some(expr) = pool.lb.hash_expr() else {
            return pool.lb.key(self.peer.map(|p| p.ip()), Some(req));
        };
        let zero = || SocketAddr::from(([0, 0, 0, 0], 0));
        let mut ctx = SampleCtx::new(
            self.peer.unwrap_or_else(zero),
            self.local.unwrap_or_else(zero),
            &self.fe.name,
        )
        .with_tls(self.tls.as_deref())
        .with_proxied(self.proxied.as_deref());
        ctx.req = Some(req);
        ctx.backend = Some(&be.name);
        let v = expr.eval(&ctx)?;
        Some(pool.lb.key_of(&v.to_bytes()))
    }

    /// Header edits every forwarded request gets: hop-by-hop removal, `option forwardfor`.
    fn prepare_request(&self, req: &mut RequestHead, be: &Proxy, upgrade: bool) {
        let _ = upgrade;
        h1::remove_hop_by_hop(&mut req.headers);
        let ff = self
            .fe
            .cfg
            .options
            .forwardfor
            .as_ref()
            .or(be.cfg.options.forwardfor.as_ref());
        if let (Some(ff), Some(peer)) = (ff, self.peer) {
            let ip = peer.ip();
            let excepted = ff.except.is_some_and(|(net, len)| ip_in_net(ip, net, len));
            if !(excepted || ff.if_none && req.headers.contains(&ff.header)) {
                req.headers.append(ff.header.clone(), ip.to_string());
            }
        }
        h1::restrict_te(&mut req.headers);
        // HAProxy keeps an HTTP/1.0 server connection alive, except for a chunked HTTP/1.0
        // request (its connection closes after the response anyway).
        if req.version == Version::Http10 && !req.headers.contains("transfer-encoding") {
            req.headers.append("connection", "keep-alive");
        }
    }

    /// Gets a server connection for `be`: the session's own if the LB picked the same server,
    /// else an idle pooled one (per `http-reuse`), else a new one (with retries).
    async fn server_conn(
        &mut self,
        be: &Proxy,
        first: bool,
        log: &mut SessionLog,
        key: Option<u32>,
    ) -> Result<(Arc<Server>, Rc<Conn>, bool), (ConnectError, Option<Arc<Server>>)> {
        let reuse = be.cfg.http_reuse;
        let src = self.peer.map(|p| p.ip());
        let tables = &self.shared.model.stick;
        let now = self.shared.model.now_ms();
        let stuck = backend::stuck_server(tables, be, src, now);
        let (srv, queued) = backend::take_server(be, key, stuck)
            .await
            .map_err(|e| (e, None))?;
        log.queue = Some(queued);
        let picked = Some(Arc::clone(&srv));
        {
            let srv = &srv;
            // A connection the server closed after its last response is not reused (HAProxy
            // notices the close on the idle connection): the request goes on a new one.
            if let Some((own_srv, conn)) = self.own.take().filter(|(_, c)| c.idle_usable()) {
                if Arc::ptr_eq(&own_srv, srv) {
                    backend::stick_store(tables, be, src, srv, now);
                    Counters::add(&srv.counters.lbtot, 1);
                    Counters::add(&be.counters.lbtot, 1);
                    srv.counters.session(self.shared.model.now_ms());
                    return Ok((Arc::clone(srv), conn, true));
                }
                // A connection that began with this client's PROXY header is never shared.
                if reuse != HttpReuse::Never && !own_srv.cfg.opts.send_proxy.enabled() {
                    pool::put(own_srv.addr(), conn);
                }
            }
            let may_share = match reuse {
                _ if srv.cfg.opts.send_proxy.enabled() => false,
                HttpReuse::Never => false,
                HttpReuse::Safe => !first,
                HttpReuse::Always | HttpReuse::Aggressive => true,
            };
            // Not taken at all unless it may be used: a take-then-drop would close it.
            if let Some(conn) = may_share.then(|| pool::take(srv.addr())).flatten() {
                backend::stick_store(tables, be, src, srv, now);
                Counters::add(&srv.counters.lbtot, 1);
                Counters::add(&be.counters.lbtot, 1);
                srv.counters.session(self.shared.model.now_ms());
                return Ok((Arc::clone(srv), conn, true));
            }
        }
        let uid = log.unique_id.clone();
        let side = backend::ClientSide {
            addrs: self.peer.zip(self.local),
            tls: self.tls.as_deref(),
            received: self.proxied.as_deref(),
            unique_id: uid.as_deref(),
        };
        match backend::connect(self.shared.io, be, key, picked, &side).await {
            Ok(c) => {
                backend::stick_store(tables, be, src, &c.server, now);
                log.retries = c.info.retries;
                log.redispatched = c.info.redispatched;
                log.connect = Some(c.info.connect_time);
                let conn = match c.server.tls.as_ref().filter(|t| t.traffic) {
                    None => Conn::Plain(c.stream),
                    Some(t) => match self.server_handshake(be, &c.server, t, c.stream).await {
                        Some(conn) => conn,
                        None => {
                            backend::release(be, &c.server);
                            log.server = Some(c.server.name.clone());
                            return Err((ConnectError::Refused, Some(c.server)));
                        }
                    },
                };
                Ok((c.server, Rc::new(conn), false))
            }
            Err(f) => {
                log.server = f.server.as_ref().map(|s| s.name.clone());
                log.retries = f.info.retries;
                log.redispatched = f.info.redispatched;
                Err((f.error, f.server))
            }
        }
    }

    /// TLS towards a `server … ssl`, within `timeout connect`. A failed handshake counts as a
    /// connection error on the server (HAProxy: `SC`, `econ`).
    async fn server_handshake(
        &self,
        be: &Proxy,
        srv: &Server,
        tls: &crate::tls::client::ServerTls,
        sock: Stream,
    ) -> Option<Conn> {
        let sni = tls.sni.as_ref().and_then(|e| {
            let src = self.peer.unwrap_or_else(|| ([0, 0, 0, 0], 0).into());
            let dst = self.local.unwrap_or_else(|| ([0, 0, 0, 0], 0).into());
            let ctx = SampleCtx::new(src, dst, &self.fe.name)
                .with_tls(self.tls.as_deref())
                .with_proxied(self.proxied.as_deref());
            e.eval(&ctx).map(|v| v.to_str().into_owned())
        });
        let name = crate::tls::client::server_name(sni.as_deref(), srv.addr().ip());
        match crate::tls::stream::TlsStream::connect(
            sock,
            Arc::clone(&tls.config),
            name,
            be.cfg.timeouts.connect,
        )
        .await
        {
            Ok(t) => Some(Conn::Tls(Box::new(t))),
            Err(e) => {
                tracing::debug!("{}/{}: TLS handshake failed: {e}", be.name, srv.name);
                Counters::add(&srv.counters.errors_conn, 1);
                Counters::add(&be.counters.errors_conn, 1);
                None
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    async fn exchange(
        &mut self,
        be: &Arc<Proxy>,
        req: &RequestHead,
        framing: BodyFraming,
        head_bytes: Vec<u8>,
        client_close: bool,
        upgrade: bool,
        first: bool,
        log: &mut SessionLog,
        start: Instant,
    ) -> bool {
        let watch = KillWatch::default();
        let done = {
            let work = self.exchange_on(
                be,
                req,
                framing,
                head_bytes,
                (client_close, upgrade, first),
                log,
                start,
                &watch,
            );
            tokio::select! {
                biased;
                keep = work => Some(keep),
                _ = watch.killed() => None,
            }
        };
        if let Some(keep) = done {
            return keep;
        }
        // The server was marked DOWN with `on-marked-down shutdown-sessions`: RST to the server,
        // 502 (`DH--`, Tr = -1) if the client has no response yet, else the response is cut (`DD--`).
        let Some((srv, _, conn)) = watch.cur.borrow_mut().take() else {
            return false;
        };
        conn.abort(true);
        backend::release(be, &srv);
        log.srvconn = srv.cur_conns.load(Ordering::Relaxed);
        Counters::add(&srv.counters.srv_aborts, 1);
        Counters::add(&be.counters.srv_aborts, 1);
        let cause = srv.kill_cause();
        if watch.streaming.get() {
            log.term = [cause, b'D'];
            self.client.abort(false);
            return false;
        }
        log.term = [cause, b'H'];
        log.response = None;
        log.status = Some(502);
        self.fe.fe_counters.count_status(502);
        be.counters.count_status(502);
        let (bytes, _) =
            errors::reply_for(&[&be.cfg.extra, &self.fe.cfg.extra], 502, ConnHeader::Close);
        log.bytes_out = crate::log::htx::reply_size(&bytes);
        let _ = self.send_client(bytes).await;
        let _ = self.client.shutdown_write().await;
        false
    }

    #[allow(clippy::too_many_arguments)]
    async fn exchange_on(
        &mut self,
        be: &Arc<Proxy>,
        req: &RequestHead,
        framing: BodyFraming,
        head_bytes: Vec<u8>,
        (client_close, upgrade, first): (bool, bool, bool),
        log: &mut SessionLog,
        start: Instant,
        watch: &KillWatch,
    ) -> bool {
        let tc_start = Instant::now();
        let mut attempts = 0;
        // HAProxy keeps the client connection after its own 502/503/504 when it could after a
        // normal response: keep-alive asked, no request body left behind.
        let keep = !client_close && framing.bodyless();
        let conn = ConnHeader::for_reply(req.version == Version::Http10, !client_close, !keep);
        let head_req = req.method == "HEAD";
        // A reused idle connection may have been closed by the server meanwhile: a bodiless
        // request that got no response byte is replayed once on a fresh connection.
        // The balancing key of the request as it leaves the rules (HAProxy hashes at connect).
        let key = self.lb_key(be, req);
        let (srv, server, resp) = loop {
            attempts += 1;
            let (srv, server, reused) =
                match self.server_conn(be, first || attempts > 1, log, key).await {
                    Ok(x) => x,
                    Err((e, failed)) => {
                        log.beconn = be.beconn.load(Ordering::Relaxed);
                        let term = e.term();
                        log.status = Some(503);
                        log.term = term;
                        self.fe.fe_counters.count_status(503);
                        be.counters.count_status(503);
                        let (mut bytes, close) =
                            errors::reply_for(&[&be.cfg.extra, &self.fe.cfg.extra], 503, conn);
                        if head_req {
                            bytes = errors::head_only(&bytes).to_vec();
                        }
                        log.bytes_out = crate::log::htx::reply_size(&bytes);
                        // HAProxy counts the error's bytes on the server that failed too.
                        if let Some(s) = failed {
                            s.counters.bytes(log.bytes_in, log.bytes_out);
                        }
                        let sent = self.send_client(bytes).await;
                        return sent && keep && !close;
                    }
                };
            if reused {
                Counters::add(&srv.counters.reuse, 1);
                Counters::add(&be.counters.reuse, 1);
                log.connect = Some(tc_start.elapsed());
            }
            log.server = Some(srv.name.clone());
            watch.arm(&srv, &server);
            Counters::add(&srv.counters.req_tot, 1);
            log.beconn = be.beconn.load(Ordering::Relaxed);
            log.srvconn = srv.cur_conns.load(Ordering::Relaxed);
            let r = self
                .send_request(be, &server, head_bytes.clone(), framing, log)
                .await;
            let r = match r {
                Ok(()) => self.read_response(be, &srv, &server, req, log).await,
                Err(a) => Err(a),
            };
            match r {
                Err(Abort::Server(b'H')) if reused && framing.bodyless() && attempts < 2 => {
                    watch.disarm();
                    backend::release(be, &srv);
                    server.abort(false);
                    continue;
                }
                other => break (srv, server, other),
            }
        };
        let outcome = match resp {
            Ok(resp) => {
                watch.streaming.set(true);
                self.forward_response(
                    be,
                    &srv,
                    &server,
                    resp,
                    req,
                    client_close,
                    upgrade,
                    log,
                    start,
                )
                .await
            }
            Err(a) => self.fail(be, &srv, &server, a, log, (conn, head_req)).await && keep,
        };
        watch.disarm();
        srv.counters.bytes(log.bytes_in, log.bytes_out);
        // A stream that got a response gives a time sample (HAProxy's `stream_update_time_stats`).
        if let (Some(c), Some(r)) = (log.connect, log.response) {
            let t = counters::Sample {
                queue: counters::ms(log.queue.unwrap_or_default()),
                connect: counters::ms(c),
                response: counters::ms(r),
                total: counters::ms(start.elapsed()),
            };
            srv.counters.times(true, t);
            be.counters.times(true, t);
        }
        backend::release(be, &srv);
        log.srvconn = srv.cur_conns.load(Ordering::Relaxed);
        outcome
    }

    /// Sends the head and streams the request body (validated by the decoder) to the server.
    async fn send_request(
        &mut self,
        be: &Proxy,
        server: &Conn,
        head: Vec<u8>,
        framing: BodyFraming,
        log: &mut SessionLog,
    ) -> Result<(), Abort> {
        let st = be.cfg.timeouts.server;
        match self
            .stimer
            .idle(server.write_all(head), st, &self.activity)
            .await
        {
            Some((Ok(()), _)) => {}
            Some((Err(_), _)) => return Err(Abort::Server(b'H')),
            None => return Err(Abort::ServerTimeout(b'H')),
        }
        if framing.bodyless() {
            return Ok(());
        }
        let mut dec = BodyDecoder::new(framing);
        let mut htx_body = crate::log::htx::BodySize::new(framing == BodyFraming::Chunked);
        let ct = self.fe.cfg.timeouts.client;
        loop {
            if !self.cbuf.is_empty() {
                let p = dec
                    .advance(&self.cbuf)
                    .map_err(|e| Abort::BadBody(e.status()))?;
                if p.consumed > 0 {
                    let tail = self.cbuf.split_off(p.consumed);
                    let chunk = std::mem::replace(&mut self.cbuf, tail);
                    log.bytes_in += htx_body.feed(&chunk);
                    match self
                        .stimer
                        .idle(server.write_all(chunk), st, &self.activity)
                        .await
                    {
                        Some((Ok(()), _)) => self.activity.touch(),
                        Some((Err(_), _)) => return Err(Abort::Server(b'D')),
                        None => return Err(Abort::ServerTimeout(b'D')),
                    }
                }
                if p.done {
                    return Ok(());
                }
            }
            if self.cbuf.capacity() < BODY_BUF {
                self.cbuf.reserve(BODY_BUF - self.cbuf.len());
            }
            match self.read_client(None, ct).await {
                Ok(0) => {
                    return Err(dec
                        .at_eof()
                        .map_or_else(|e| Abort::BadBody(e.status()), |()| Abort::Client(b'D')));
                }
                Ok(_) => {}
                Err(None) => return Err(Abort::ClientTimeout(b'D')),
                Err(Some(_)) => return Err(Abort::Client(b'D')),
            }
        }
    }

    /// Reads the final response head (forwarding interim 1xx responses other than 101).
    async fn read_response(
        &mut self,
        be: &Proxy,
        srv: &Server,
        server: &Conn,
        req: &RequestHead,
        log: &mut SessionLog,
    ) -> Result<(crate::http::head::ResponseHead, Vec<u8>), Abort> {
        let st = be.cfg.timeouts.server;
        let sent_at = Instant::now();
        let limits = Limits::default();
        let mut sbuf = take_buf();
        loop {
            match h1::parse_response_head(&sbuf, &limits) {
                Ok(Some((resp, n))) => {
                    if (100..200).contains(&resp.status) && resp.status != 101 {
                        let interim: Vec<u8> = sbuf.drain(..n).collect();
                        if !self.send_client(interim).await {
                            return Err(Abort::Client(b'H'));
                        }
                        continue;
                    }
                    log.response = Some(sent_at.elapsed());
                    sbuf.drain(..n);
                    let _ = req;
                    return Ok((resp, sbuf));
                }
                Ok(None) => {}
                Err(_) => {
                    Counters::add(&srv.counters.errors_resp, 1);
                    Counters::add(&be.counters.errors_resp, 1);
                    return Err(Abort::Server(b'H'));
                }
            }
            let read = self
                .stimer
                .idle(server.read(sbuf), st, &self.activity)
                .await;
            match read {
                Some((Ok(0), _)) | Some((Err(_), _)) => return Err(Abort::Server(b'H')),
                Some((Ok(_), b)) => {
                    sbuf = b;
                    self.activity.touch();
                }
                None => return Err(Abort::ServerTimeout(b'H')),
            }
        }
    }

    /// Answers an aborted transaction: 502 when the server failed before its response head, 504 on
    /// a server timeout, nothing (just close) when the client is gone. The reply carries the
    /// connection header of `reply.0`, and no body when `reply.1` (a HEAD request); returns
    /// whether one was sent.
    /// Sends the response head still held back for the first body bytes. False when the client
    /// is gone (the transaction is then already failed and logged as `CD`).
    async fn flush_head(
        &mut self,
        head: &mut Option<Vec<u8>>,
        be: &Proxy,
        srv: &Server,
        server: &Conn,
        log: &mut SessionLog,
    ) -> bool {
        let Some(h) = head.take() else { return true };
        if self.send_client(h).await {
            return true;
        }
        self.fail(
            be,
            srv,
            server,
            Abort::Client(b'D'),
            log,
            (ConnHeader::Close, false),
        )
        .await;
        false
    }

    async fn fail(
        &mut self,
        be: &Proxy,
        srv: &Server,
        server: &Conn,
        a: Abort,
        log: &mut SessionLog,
        reply: (ConnHeader, bool),
    ) -> bool {
        server.abort(true);
        let (cause, state, status) = match a {
            Abort::Client(s) => (b'C', s, None),
            Abort::BadBody(st) => (b'C', b'D', Some(st)),
            Abort::ClientTimeout(s) => (b'c', s, Some(408)),
            Abort::Server(s) => (b'S', s, if s == b'H' { Some(502) } else { None }),
            Abort::ServerTimeout(s) => (b's', s, if s == b'H' { Some(504) } else { None }),
        };
        log.term = [cause, state];
        match cause {
            b'C' | b'c' => {
                Counters::add(&be.counters.cli_aborts, 1);
                Counters::add(&srv.counters.cli_aborts, 1);
            }
            _ => {
                Counters::add(&be.counters.srv_aborts, 1);
                Counters::add(&srv.counters.srv_aborts, 1);
            }
        }
        if let Some(st) = status {
            if cause == b'c' && state != b'R' {
                return false;
            }
            log.status = Some(st);
            self.fe.fe_counters.count_status(st);
            be.counters.count_status(st);
            let (mut bytes, close) =
                errors::reply_for(&[&be.cfg.extra, &self.fe.cfg.extra], st, reply.0);
            if reply.1 {
                bytes = errors::head_only(&bytes).to_vec();
            }
            log.bytes_out = crate::log::htx::reply_size(&bytes);
            return self.send_client(bytes).await && !close;
        }
        false
    }

    /// `http-response` rules: the backend's, then the frontend's (HAProxy's order); `Some` is
    /// the status of a `deny`.
    fn response_rules(
        &self,
        be: &Proxy,
        srv: &Server,
        head: &mut ResponseHead,
        captures: Option<&Captured>,
        vars: Option<&Vars>,
        unique_id: Option<&str>,
    ) -> Option<u16> {
        let src = self.peer.unwrap_or_else(|| ([0, 0, 0, 0], 0).into());
        let dst = self.local.unwrap_or_else(|| ([0, 0, 0, 0], 0).into());
        let mut base = SampleCtx::new(src, dst, &self.fe.name)
            .with_tls(self.tls.as_deref())
            .with_proxied(self.proxied.as_deref());
        base.backend = Some(&be.name);
        base.server = Some(&srv.name);
        base.captures = captures;
        base.vars = vars;
        base.unique_id = unique_id;
        base.counts = Some((&*self.shared.model, &be.name));
        let fe: &Proxy = &self.fe;
        let sections: &[&Proxy] = if std::ptr::eq(be, fe) {
            &[be]
        } else {
            &[be, fe]
        };
        sections.iter().find_map(|px| {
            match rules::apply_http_response(&px.rules.http_response, head, &base) {
                rules::ResVerdict::Deny(st) => Some(st),
                rules::ResVerdict::Continue => None,
            }
        })
    }

    /// `http-response deny`: the server connection is dropped (its body unread) and the client
    /// gets the error page, logged `PH--` and counted in `dresp`.
    async fn deny_response(
        &mut self,
        be: &Proxy,
        srv: &Server,
        server: &Conn,
        status: u16,
        (req, client_close): (&RequestHead, bool),
        log: &mut SessionLog,
    ) -> bool {
        server.abort(true);
        log.term = *b"PH";
        log.status = Some(status);
        // HAProxy logs no server response time for a denied response.
        log.response = None;
        Counters::add(&self.fe.fe_counters.denied_resp, 1);
        Counters::add(&be.counters.denied_resp, 1);
        Counters::add(&srv.counters.denied_resp, 1);
        self.fe.fe_counters.count_status(status);
        be.counters.count_status(status);
        // The client connection stays, as after any reply HAProxy generates.
        let hdr = ConnHeader::for_reply(req.version == Version::Http10, !client_close, false);
        let (mut bytes, close) =
            errors::reply_for(&[&be.cfg.extra, &self.fe.cfg.extra], status, hdr);
        if req.method == "HEAD" {
            bytes = errors::head_only(&bytes).to_vec();
        }
        log.bytes_out += crate::log::htx::reply_size(&bytes);
        self.send_client(bytes).await && !client_close && !close
    }

    #[allow(clippy::too_many_arguments)]
    async fn forward_response(
        &mut self,
        be: &Arc<Proxy>,
        srv: &Arc<Server>,
        server: &Rc<Conn>,
        resp: (crate::http::head::ResponseHead, Vec<u8>),
        req: &RequestHead,
        client_close: bool,
        upgrade: bool,
        log: &mut SessionLog,
        _start: Instant,
    ) -> bool {
        let (mut head, mut sbuf) = resp;
        let status = head.status;
        log.status = Some(status);
        // The server counts what it sent; the frontend and backend count the final status
        // once the rules (or an error) decided it, as HAProxy's process_stream does.
        srv.counters.count_status(status);
        let tunnel = upgrade && status == 101;
        let framing = match h1::response_framing(&head, &req.method) {
            Ok(BodyFraming::Tunnel) if !tunnel => Err(()),
            Ok(f) => Ok(f),
            Err(_) => Err(()),
        };
        let Ok(framing) = framing else {
            Counters::add(&srv.counters.errors_resp, 1);
            Counters::add(&be.counters.errors_resp, 1);
            self.fail(
                be,
                srv,
                server,
                Abort::Server(b'H'),
                log,
                (ConnHeader::Close, false),
            )
            .await;
            return false;
        };
        // Chunked over a Content-Length, or in HTTP/1.0: both connections close afterwards.
        let forced_close = h1::framing_forces_close(head.version, &head.headers);
        h1::normalize_response(&mut head, &framing);
        let server_close = h1::wants_close(head.version, &head.headers) || forced_close;
        let (fo, bo) = (&self.fe.cfg.options, &be.cfg.options);
        // `option httpclose` closes both sides after each exchange; `http-server-close` only the
        // server side.
        let httpclose = fo.httpclose || bo.httpclose;
        let server_keep = !(httpclose || fo.http_server_close || bo.http_server_close);
        let close = client_close || httpclose || forced_close || framing == BodyFraming::UntilClose;
        h1::remove_hop_by_hop(&mut head.headers);
        // `%B` counts the head as HAProxy stores it, before the mux adds its connection header
        // and before the `http-response` rules change it.
        log.bytes_out = crate::log::htx::head_size(&head);
        if let Some(c) = &log.captures {
            c.headers(true, &self.fe.cfg.captures.res, &head.headers);
        }
        if let Some(st) = self.response_rules(
            be,
            srv,
            &mut head,
            log.captures.as_deref(),
            log.vars.as_deref(),
            log.unique_id.as_deref(),
        ) {
            // HAProxy has counted the body bytes that came with the head.
            if let Ok(p) = BodyDecoder::new(framing).advance(&sbuf) {
                log.bytes_out += crate::log::htx::BodySize::new(framing == BodyFraming::Chunked)
                    .feed(&sbuf[..p.consumed]);
            }
            return self
                .deny_response(be, srv, server, st, (req, client_close), log)
                .await;
        }
        log.status = Some(head.status);
        self.fe.fe_counters.count_status(head.status);
        be.counters.count_status(head.status);
        let mut htx_body = crate::log::htx::BodySize::new(framing == BodyFraming::Chunked);
        // As HAProxy's H1 mux: `close` on an HTTP/1.1 response that ends the connection,
        // `keep-alive` when either side is HTTP/1.0 and the connection stays.
        if close && !tunnel && head.version == Version::Http11 {
            head.headers.append("connection", "close");
        } else if !close && (req.version == Version::Http10 || head.version == Version::Http10) {
            head.headers.append("connection", "keep-alive");
        }
        let mut out = Vec::with_capacity(1024 + sbuf.len());
        h1::write_response_head(&head, &mut out);
        if tunnel {
            if !self.send_client(out).await {
                self.fail(
                    be,
                    srv,
                    server,
                    Abort::Client(b'D'),
                    log,
                    (ConnHeader::Close, false),
                )
                .await;
                return false;
            }
            let client = Rc::clone(&self.client);
            let initial = std::mem::take(&mut self.cbuf);
            if !sbuf.is_empty() {
                let (r, _) = client.write_all(std::mem::take(&mut sbuf)).await;
                if r.is_err() {
                    return false;
                }
            }
            let t = crate::tcp::RelayTimeouts {
                client: self.fe.cfg.timeouts.client,
                server: be.cfg.timeouts.server,
                tunnel: be.cfg.timeouts.tunnel,
                client_fin: self.fe.cfg.timeouts.client_fin,
                server_fin: be.cfg.timeouts.server_fin,
            };
            let stats = crate::tcp::relay(
                client,
                Rc::clone(server),
                initial,
                t,
                // HTTP tunnels (upgrades) keep the copy path for now.
                crate::tcp::SpliceDirs::NONE,
                std::future::pending(),
            )
            .await;
            log.bytes_in += stats.c2s;
            log.bytes_out += stats.s2c;
            log.term = stats.end.codes();
            return false;
        }
        // Stream the body. The head goes out with the body bytes already read, in one write as
        // HAProxy does (a client gone meanwhile is then noticed the same way).
        let mut pending_head = Some(out);
        let mut dec = BodyDecoder::new(framing);
        let st = be.cfg.timeouts.server;
        let mut done = framing.bodyless();
        let mut closed = false;
        while !done {
            if !sbuf.is_empty() {
                let p = match dec.advance(&sbuf) {
                    Ok(p) => p,
                    Err(_) => {
                        Counters::add(&srv.counters.errors_resp, 1);
                        Counters::add(&be.counters.errors_resp, 1);
                        log.term = *b"SD";
                        server.abort(true);
                        return false;
                    }
                };
                if p.consumed > 0 {
                    log.bytes_out += htx_body.feed(&sbuf[..p.consumed]);
                    // The common case hands the whole buffer to the write and gets it back.
                    let (chunk, tail) = if p.consumed == sbuf.len() {
                        (std::mem::take(&mut sbuf), None)
                    } else {
                        let tail = sbuf.split_off(p.consumed);
                        (std::mem::take(&mut sbuf), Some(tail))
                    };
                    let (chunk, head_owned) = match pending_head.take() {
                        Some(mut h) => {
                            h.extend_from_slice(&chunk);
                            (h, Some(chunk))
                        }
                        None => (chunk, None),
                    };
                    // The response's last bytes on a closing connection carry the close.
                    let last = p.done && close;
                    let (r, mut back) = if last {
                        self.client.write_all_close(chunk).await
                    } else {
                        self.client.write_all(chunk).await
                    };
                    closed = last;
                    if let Some(b) = head_owned {
                        back = b;
                    }
                    back.clear();
                    sbuf = match tail {
                        Some(t) => t,
                        None => back,
                    };
                    if r.is_err() {
                        self.fail(
                            be,
                            srv,
                            server,
                            Abort::Client(b'D'),
                            log,
                            (ConnHeader::Close, false),
                        )
                        .await;
                        return false;
                    }
                    self.activity.touch();
                }
                done = p.done;
                if done {
                    break;
                }
            }
            if !self
                .flush_head(&mut pending_head, be, srv, server, log)
                .await
            {
                return false;
            }
            if sbuf.capacity() < BODY_BUF {
                sbuf.reserve(BODY_BUF);
            }
            match self
                .stimer
                .idle(server.read(sbuf), st, &self.activity)
                .await
            {
                Some((Ok(0), b)) => {
                    sbuf = b;
                    if framing == BodyFraming::UntilClose {
                        done = true;
                    } else {
                        log.term = *b"SD";
                        Counters::add(&srv.counters.srv_aborts, 1);
                        Counters::add(&be.counters.srv_aborts, 1);
                        return false;
                    }
                }
                Some((Ok(_), b)) => {
                    sbuf = b;
                    self.activity.touch();
                }
                Some((Err(_), _)) => {
                    log.term = *b"SD";
                    Counters::add(&srv.counters.srv_aborts, 1);
                    Counters::add(&be.counters.srv_aborts, 1);
                    return false;
                }
                None => {
                    log.term = *b"sD";
                    server.abort(true);
                    return false;
                }
            }
        }
        if !self
            .flush_head(&mut pending_head, be, srv, server, log)
            .await
        {
            return false;
        }
        // Keep the server connection for the next request unless it is not reusable.
        let reusable =
            server_keep && !server_close && sbuf.is_empty() && framing != BodyFraming::UntilClose;
        give_buf(sbuf);
        if reusable {
            self.own = Some((Arc::clone(srv), Rc::clone(server)));
        }
        if close && !closed {
            let _ = self.client.shutdown_write().await;
        }
        !close
    }
}

/// The answer to a request the codec refused, on a connection about to close. A status without
/// a canned page (414) gets a page of its own rather than HAProxy's 500 fallback.
/// Log fields and counters of an applet answer (stats page, exporter): `<STATS>`/`<PROMEX>` as
/// the server, Tw/Tc/Tr at 0 (Tr -1 for the auth challenge), `LR`, one intercepted request.
fn applet_reply(
    log: &mut SessionLog,
    fe: &Proxy,
    a: stats::Applet,
    keep: bool,
) -> (u16, Vec<u8>, [u8; 2], bool) {
    log.server = Some(a.server.to_string());
    log.queue = Some(Duration::ZERO);
    log.connect = Some(Duration::ZERO);
    log.response = a.served.then_some(Duration::ZERO);
    log.status = Some(a.log_status);
    Counters::add(&fe.fe_counters.intercepted, 1);
    (a.status, a.bytes, *b"LR", keep)
}

/// Awaits `read` (a read between keep-alive requests) until the process stops softly, then at
/// most until `idle_limit`; None when that passes first. Boxed by its caller: it runs only at a
/// soft stop, and an idle connection's state should not carry it.
async fn read_at_soft_stop<F: std::future::Future>(
    mut read: std::pin::Pin<&mut F>,
    mut stop: tokio::sync::watch::Receiver<bool>,
    idle_limit: Instant,
) -> Option<F::Output> {
    let stopping = async move {
        while !*stop.borrow_and_update() {
            if stop.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    tokio::select! {
        r = &mut read => Some(r),
        _ = stopping => tokio::time::timeout_at(idle_limit, read).await.ok(),
    }
}

fn refusal(status: u16) -> Vec<u8> {
    if status == 400 || status == 408 {
        return errors::error_response(status).to_vec();
    }
    // The H1 mux's own refusals of a request it parsed (HAProxy's `h1c->errcode`).
    if status == 422 {
        return errors::mux_response(status);
    }
    if errors::has_error_page(status) {
        return errors::with_connection(errors::error_response(status), ConnHeader::Close);
    }
    let why = errors::reason(status);
    let body = format!("<html><body><h1>{status} {why}</h1>\n</body></html>\n");
    errors::return_response(status, Some("text/html"), body.as_bytes(), true)
}

/// Whether `ip` lies in `net/len` (v4-mapped v6 addresses count as v4).
fn ip_in_net(ip: std::net::IpAddr, net: std::net::IpAddr, len: u8) -> bool {
    use std::net::IpAddr;
    let canon = |a: IpAddr| match a {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(a, IpAddr::V4),
        v4 => v4,
    };
    match (canon(ip), canon(net)) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            let len = u32::from(len.min(32));
            let mask = if len == 0 { 0 } else { u32::MAX << (32 - len) };
            u32::from(a) & mask == u32::from(n) & mask
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => {
            let len = u32::from(len.min(128));
            let mask = if len == 0 {
                0
            } else {
                u128::MAX << (128 - len)
            };
            u128::from(a) & mask == u128::from(n) & mask
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_keeps_the_codec_status_and_closes() {
        let r = String::from_utf8(refusal(414)).unwrap();
        assert!(
            r.starts_with("HTTP/1.1 414 Request-URI Too Long\r\n"),
            "{r}"
        );
        assert!(r.contains("\r\nconnection: close\r\n\r\n"), "{r}");
        let r = String::from_utf8(refusal(501)).unwrap();
        assert!(r.starts_with("HTTP/1.1 501 "), "{r}");
        assert!(r.contains("\r\nconnection: close\r\n\r\n"), "{r}");
        assert_eq!(refusal(400), errors::error_response(400));
        let r = String::from_utf8(refusal(422)).unwrap();
        assert_eq!(
            r,
            "HTTP/1.1 422 Unprocessable Content\r\nContent-length: 116\r\nCache-Control: no-cache\r\n\
             Content-Type: text/html\r\n\r\n<html><body><h1>422 Unprocessable Content</h1>\n\
             The server cannot process the contained instructions.\n</body></html>\n"
        );
    }
}
