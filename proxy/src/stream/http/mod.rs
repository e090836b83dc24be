//! The L7 stream (I/O shell around the sans-I/O codec): one client [`Front`], its keep-alive loop
//! of transactions, each in HAProxy's order — wait for the request head (`wait.rs`) → frontend
//! rules → route → backend rules (`request.rs`) → applet (`applet.rs`) or local reply, or a
//! server connection from the [`Upstream`] (`upstream.rs`) → send the request → read the
//! response head (`exchange.rs`) → forward the response, or hand an upgrade to the relay
//! (`response.rs`). Every transaction that logs ends in [`finish`](crate::stream::end::finish).
//!
//! Bodies are streamed in both directions through one buffer per side and never held whole;
//! chunked bodies are forwarded verbatim once the decoder has validated their framing.

mod after;
mod applet;
mod buffer;
mod compress;
mod exchange;
pub mod front;
pub mod h2;
mod h2front;
pub mod park;
mod persist;
mod request;
mod res_inspect;
mod response;
#[cfg(test)]
mod tests;
pub mod upstream;
mod wait;

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::clock;
use tokio::time::Instant;

use crate::ana::sample::SampleCtx;
use crate::ana::vars::{SessVars, Vars};
use crate::engine::Shared;
use crate::engine::conn::Duplex;
use crate::engine::idle::{Activity, Timer};
use crate::engine::pool::{BUF, take_buf};
use crate::engine::service::Origin;
use crate::http::errors::{ConnHeader, Page};
use crate::http::h1::BodyFraming;
use crate::http::head::RequestHead;
use crate::log::SessionLog;
use crate::model::Proxy;
use crate::stick::StkCtrs;
use crate::stream::end::{End, finish};

pub use front::Front;
pub use upstream::Upstream;
use upstream::{Facts, Servers};

const BODY_BUF: usize = 64 * 1024;
/// Largest stats page form accepted (HAProxy's buffer: `tune.bufsize`).
const STATS_POST_MAX: usize = 16384;
/// How long an idle keep-alive connection may wait for its next request once a soft stop began,
/// without `timeout http-keep-alive`.
const SOFT_STOP_IDLE: Duration = Duration::from_secs(1);
/// Buffer a connection waiting for its next request reads into: idle keep-alive connections then
/// hold this much instead of a full buffer (HAProxy holds none while idle).
const IDLE_READ: usize = 1024;

/// Connections the process holds (`actconn`) from which a keep-alive connection waiting for its
/// next request waits lean — for readiness, holding no buffer, the rest of the transaction's
/// state boxed away — rather than in a read with a small buffer. The plain read is cheaper per
/// request (on io_uring no epoll event and no extra recv; on both engines no buffer and timer
/// given back and taken again), the lean wait about 2.5 KiB lighter per idle connection
/// (release, io_uring: 0.47 against 2.95 KiB with a server connection kept): with few
/// connections CPU matters more, with many memory. `PORTCULLIS_LEAN_IDLE_FROM` overrides it
/// (tests run both ways).
const LEAN_IDLE_FROM: usize = 512;

/// How long a keep-alive connection waiting lean stays in its task before it parks (`park.rs`):
/// a busy client's next request comes sooner, and parking and resuming for each one cost more
/// than the memory saved meanwhile (on epoll, four `epoll_ctl`s and tokio's registration anew:
/// +1.2 µs user and +5.4 µs kernel per request parking at once, 200 000 requests over 50
/// keep-alive connections, `ka-instr.sh MODE=cpu IO=epoll` with `PORTCULLIS_LEAN_IDLE_FROM=0`).
const PARK_AFTER: Duration = Duration::from_millis(100);

#[cfg(test)]
fn lean_idle_from() -> usize {
    // The unit tests decide it through `actconn`, whatever the suite's environment says.
    LEAN_IDLE_FROM
}

#[cfg(not(test))]
fn lean_idle_from() -> usize {
    static FROM: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *FROM.get_or_init(|| {
        std::env::var("PORTCULLIS_LEAN_IDLE_FROM")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(LEAN_IDLE_FROM)
    })
}

/// When a client read times out: `idle` after the last activity, or `deadline`, whichever
/// comes first.
fn read_due(
    activity: &Activity,
    deadline: Option<Instant>,
    idle: Option<Duration>,
) -> impl Fn() -> Option<Instant> + '_ {
    move || match (idle.map(|t| activity.last() + t), deadline) {
        (Some(i), Some(d)) => Some(i.min(d)),
        (i, d) => i.or(d),
    }
}

struct Session<F: Front, U: Upstream> {
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    client: Rc<F>,
    /// The client's addresses, TLS and PROXY facts.
    facts: Facts,
    /// Where server connections come from (and the one kept for the next request).
    up: U,
    /// Client bytes read but not yet consumed.
    cbuf: Vec<u8>,
    activity: Activity,
    /// Timeouts of the client reads, and of the server reads and writes (one each: their
    /// deadlines differ, and each only moves forward).
    ctimer: Timer,
    stimer: Timer,
    requests: u64,
    /// Stick counters the session tracked at accept (`tcp-request connection track-sc`); None
    /// when it tracks none (most): an idle connection then holds no empty counters.
    sess: Option<Rc<StkCtrs>>,
    /// The `sess.*` variables, kept across the connection's transactions; made at a
    /// transaction's start, let go while idle when none is set (see `shed_idle_state`).
    sess_vars: Option<SessVars>,
}

/// One transaction once its head is parsed: the request as the rules leave it, and its log
/// record, which becomes the end-of-stream record.
struct Txn {
    req: RequestHead,
    framing: BodyFraming,
    log: SessionLog,
    /// When the request's first byte arrived.
    start: Instant,
    /// The connection's first request (`http-reuse safe` keeps it off shared connections).
    first: bool,
    /// The connection closes after this transaction (client's wish, framing, soft stop).
    client_close: bool,
    /// An `Upgrade` request: a 101 turns the stream into a tunnel.
    upgrade: bool,
    /// The client asked with HEAD (whatever method a rule sends the server): no response body
    /// reaches it.
    head_request: bool,
    /// The request was HTTP/1.0 as received.
    http10: bool,
    /// The request body's length when it is already wholly received.
    body_here: Option<usize>,
    /// A local reply keeps the connection (keep-alive asked, body wholly received).
    keep: bool,
    vars: Rc<Vars>,
    /// The server the client's persistence cookie names (`persist.rs`).
    persist: Option<Arc<crate::model::Server>>,
    /// `force-persist` (true) or `ignore-persist` (false) matched.
    persist_rule: Option<bool>,
    /// What the backend's `stick` rules found on the request.
    stick: Option<crate::ana::sticking::StickPlan>,
    /// The stream's stick counters (`http-request track-sc`), for the response's rules.
    strm: Option<Rc<StkCtrs>>,
    /// The compression algorithm the request accepts (`compress.rs`), kept once the response
    /// head allows it (`res.comp`).
    comp: Option<crate::config::model::CompAlgo>,
}

impl Txn {
    /// The connection header of a reply generated here.
    fn conn_hdr(&self, closing: bool) -> ConnHeader {
        ConnHeader::for_reply(self.http10, !self.client_close, closing)
    }
}

/// A response generated here (rules, applets, errors), and whether the connection stays.
/// No page: nothing is sent (`reject`, an empty errorfile, a Lua `done` without a reply).
struct Reply {
    status: u16,
    page: Option<Page>,
    term: [u8; 2],
    keep: bool,
}

/// One HTTP/2 stream's session: its single transaction awaited in place. The stream's task
/// holds this future boxed already, whereas an HTTP/1 connection boxes each transaction again
/// to stay small while idle, which a stream never is: one allocation and one copy of the
/// transaction's state fewer per request.
pub async fn run_stream<F: Front>(
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    client: F,
    origin: Origin,
    sess: Rc<StkCtrs>,
    vars: SessVars,
) {
    let mut s = Session::new(shared, fe, client, Servers::default(), origin, (sess, vars));
    s.stream_transaction().await;
    s.end_servers();
}

/// A connection's keep-alive loop over any front and upstream, in its task (the unit tests';
/// a real connection runs in `park.rs`, which may leave its task). Not an `async fn`: its
/// future would keep the arguments beside the session made of them.
#[cfg(test)]
fn run_with<F: Front, U: Upstream>(
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    client: F,
    up: U,
    origin: Origin,
    sess: (Rc<StkCtrs>, SessVars),
) -> impl std::future::Future<Output = ()> {
    let mut s = Session::new(shared, fe, client, up, origin, sess);
    async move {
        // A soft stop (SIGUSR1) ends keep-alive connections without racing the client: the
        // next request is answered with `Connection: close` (see `wait.rs`).
        while let wait::Next::Again = s.transaction(wait::Idle::InTask).await {}
        s.end_servers();
    }
}

impl<F: Front, U: Upstream> Session<F, U> {
    /// The session is over: its server connections go back to the pool or are closed, as
    /// `http-reuse` and a soft stop decide.
    fn end_servers(&mut self) {
        let stopping = self.shared.stopping.load(Ordering::Acquire);
        self.up.end(stopping);
    }

    fn new(
        shared: Arc<Shared>,
        fe: Arc<Proxy>,
        client: F,
        up: U,
        origin: Origin,
        (sess, sess_vars): (Rc<StkCtrs>, SessVars),
    ) -> Self {
        let facts = Facts {
            peer: origin.peer,
            local: origin.local,
            tls: client.tls().cloned(),
            bind: u32::try_from(origin.bind).unwrap_or(u32::MAX),
            proxied: origin.proxied,
        };
        // An h2 stream after the connection's first is not a connection's first request: it
        // may use an idle server connection under `http-reuse safe`, as HAProxy's streams do.
        let requests = u64::from(client.later_stream());
        let tracks = sess.iter().next().is_some();
        Session {
            shared,
            fe,
            client: Rc::new(client),
            facts,
            up,
            cbuf: Vec::new(),
            activity: Activity::default(),
            ctimer: Timer::default(),
            stimer: Timer::default(),
            requests,
            sess: tracks.then_some(sess),
            sess_vars: Some(sess_vars),
        }
    }
}

impl<F: Front, U: Upstream> Session<F, U> {
    /// The `sess.*` variables, made if need be.
    fn sess_vars(&mut self) -> SessVars {
        Rc::clone(self.sess_vars.get_or_insert_default())
    }

    /// What a connection idle between requests need not hold: its `sess` variables when none
    /// is set (and nothing else holds them).
    fn shed_idle_state(&mut self) {
        self.sess_vars
            .take_if(|v| Rc::strong_count(v) == 1 && v.borrow().is_empty());
    }

    /// Whether a connection waiting for its next request waits lean (see [`LEAN_IDLE_FROM`]).
    fn lean_idle(&self) -> bool {
        self.shared.model.actconn.current() as usize >= lean_idle_from()
    }

    /// An HTTP request arrived (valid or not): frontend and process `req_tot`, `req_rate`.
    fn count_request(&self) {
        let now = self.shared.model.now_ms();
        self.fe.fe_counters.request(now);
        self.shared.model.totals.request(now);
        for t in self.sess.iter().flat_map(|s| s.iter()) {
            t.count_http_req(now);
        }
    }

    fn new_log(&self) -> SessionLog {
        self.new_log_at(std::time::SystemTime::now())
    }

    /// [`Session::new_log`] with the date already read.
    fn new_log_at(&self, now: std::time::SystemTime) -> SessionLog {
        let mut log = SessionLog::new(&self.fe, self.facts.peer, self.facts.local, now);
        log.unix_listener = self.facts.unix_listener();
        log.actconn = self.shared.model.actconn.current();
        log.feconn = self.fe.feconn.current();
        log.req_counter = self.shared.model.streams.fetch_add(1, Ordering::Relaxed);
        log.ssl = self.facts.tls.is_some();
        log.tls = self.facts.tls.clone();
        log.proxied = self.facts.proxied.clone();
        log
    }

    /// The sample context every rule and expression of the stream starts from: addresses,
    /// frontend, TLS and PROXY facts.
    fn sample_base(&self) -> SampleCtx<'_> {
        self.facts.sample(&self.fe.name)
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
        let due = read_due(&self.activity, deadline, idle);
        let read = self.ctimer.limit(self.client.read(buf), due).await;
        self.took(read)
    }

    /// What a client read gave: the buffer back into `cbuf`, the activity noted.
    fn took(
        &mut self,
        read: Option<(std::io::Result<usize>, Vec<u8>)>,
    ) -> Result<usize, Option<std::io::Error>> {
        let (res, buf) = read.ok_or(None)?;
        self.cbuf = buf;
        let n = res.map_err(Some)?;
        self.activity.touch();
        Ok(n)
    }

    async fn send_page(&self, page: &Page) -> bool {
        self.client.send_page(page).await.is_ok()
    }

    /// [`Self::send_page`]; no page (an empty errorfile) sends nothing.
    async fn send_opt(&self, page: Option<&Page>) -> bool {
        match page {
            Some(p) => self.send_page(p).await,
            None => true,
        }
    }

    /// Sends a locally generated response, logs it, and tells whether the connection stays open.
    /// `reply.keep` keeps the connection for another request (HAProxy does after deny, redirect
    /// and return, unless the client asked to close or a request body is left unread).
    ///
    /// Boxed: its state (≈ 1.9 KB) would otherwise be part of every transaction's future, which
    /// is allocated and moved once per request, while most requests are forwarded.
    fn local_reply(
        &mut self,
        log: SessionLog,
        reply: Reply,
        start: Instant,
    ) -> std::pin::Pin<Box<impl Future<Output = bool> + '_>> {
        Box::pin(self.send_local_reply(log, reply, start))
    }

    /// [`Self::local_reply`], unboxed.
    async fn send_local_reply(
        &mut self,
        mut log: SessionLog,
        reply: Reply,
        start: Instant,
    ) -> bool {
        let Reply {
            status,
            page,
            term,
            keep,
        } = reply;
        // Errors the H1 mux answers itself (`<BADREQ>`) count no byte in HAProxy's `%B`, and
        // meet no rule.
        let badreq = log.request_line.as_deref() == Some("<BADREQ>");
        let (page, after) = match (badreq, page) {
            (false, Some(mut p)) => {
                let be = self.logged_backend(&log);
                let after = self.after_rules_page(be.as_deref(), &mut p, status, &log);
                (Some(p), after)
            }
            (_, p) => (p, status),
        };
        // An applet may log another status than it sends (see `stats::Applet::log_status`),
        // unless `http-after-response set-status` changed it.
        log.status = Some(match after != status {
            true => after,
            false => log.status.unwrap_or(status),
        });
        let status = after;
        // `http-request reject`: no response, no status; the connection is reset.
        if status == 0 && page.is_none() {
            log.status = None;
            log.term = term;
            log.total = clock::since(start);
            self.client.abort(true);
            finish(&self.shared, &self.fe, End::log_only(log));
            return false;
        }
        log.bytes_out = match (&page, badreq) {
            (Some(p), false) => crate::log::htx::page_size(p),
            _ => 0,
        };
        log.term = term;
        self.fe.fe_counters.count_status(status);
        if !badreq {
            self.fe.fe_counters.bytes(log.bytes_in, log.bytes_out);
        }
        // No page (an empty errorfile): nothing is sent.
        let ok = match &page {
            Some(p) => self.send_page(p).await,
            None => true,
        };
        log.total = clock::since(start);
        finish(&self.shared, &self.fe, End::log_only(log));
        if !keep {
            let _ = self.client.shutdown_write().await;
        }
        ok && keep
    }
}
