//! The first phase of a transaction: waiting for the request head (HAProxy's `wait-for-request`
//! analyser), with its timeouts (`http-keep-alive`, then `http-request`), the soft stop's idle
//! reads, and the answers to a head that never comes whole (`<BADREQ>`: 400, 408, `CR`, `cR`).

use std::time::Duration;

use crate::clock;
use tokio::time::Instant;

use super::{Front, IDLE_READ, PARK_AFTER, Reply, SOFT_STOP_IDLE, Session, Upstream};
use crate::engine::io::reserve;
use crate::engine::pool::give_buf;
use crate::http::errors::{self, ConnHeader, Page};
use crate::http::h1::{self, Limits};
use crate::http::head::RequestHead;
use crate::model::Counters;
use crate::stream::end::{End, finish};

/// Where the wait for a request head stands.
struct Wait {
    /// The connection's first request.
    first: bool,
    /// When the wait began.
    since: Instant,
    /// When the head's first byte arrived (`since` until then).
    start: Instant,
    got_first_byte: bool,
    /// `timeout http-request` for the whole head, from its first byte.
    deadline: Option<Instant>,
}

impl Wait {
    /// The wait of a connection idle between requests since `since`, no byte come yet.
    fn between(since: Instant) -> Wait {
        Wait {
            first: false,
            since,
            start: since,
            got_first_byte: false,
            deadline: None,
        }
    }
}

type Read = Result<usize, Option<std::io::Error>>;

/// How a transaction waits for its request when the connection is idle between two.
#[derive(Clone, Copy)]
pub(super) enum Idle {
    /// In its task.
    InTask,
    /// It may park instead, when waiting lean ([`Next::Park`], `park.rs`).
    MayPark,
    /// Resumed from its park: it waits (in its task) from this instant, as it had.
    Resumed(Instant),
}

/// What follows a transaction.
pub(super) enum Next {
    /// Another request on the connection.
    Again,
    /// The connection ends.
    End,
    /// The connection waits lean for its next request, from `since`, until `due` (its
    /// timeouts): its task may end and its state park (`park.rs`), holding no timer.
    Park {
        since: Instant,
        due: Option<Instant>,
    },
}

impl From<bool> for Next {
    fn from(again: bool) -> Next {
        if again { Next::Again } else { Next::End }
    }
}

impl<F: Front, U: Upstream> Session<F, U> {
    /// One request/response exchange, and what follows it.
    pub(super) async fn transaction(&mut self, idle: Idle) -> Next {
        let first = self.requests == 0;
        let resumed = match idle {
            Idle::Resumed(since) => Some(since),
            Idle::InTask | Idle::MayPark => None,
        };
        let lean = resumed.is_some() || (!first && self.lean_idle());
        // Waiting for a new request: hold no buffer when waiting lean (the idle read takes one
        // once bytes come), else a small one, not a full one.
        let keep = if lean { 0 } else { IDLE_READ };
        if self.cbuf.is_empty() && self.cbuf.capacity() > keep {
            let buf = std::mem::take(&mut self.cbuf);
            if buf.capacity() > IDLE_READ {
                give_buf(buf);
            }
        }
        let wait_start = resumed.unwrap_or_else(clock::now);
        // An h2 stream's request, already checked as the HTTP/1 parser would: its one
        // transaction, then the stream ends.
        if let Some(txn) = self.held_head(first, wait_start) {
            txn.await;
            return Next::End;
        }
        // Between requests the connection waits for the next one's first bytes in this small
        // future (lean: holding no buffer, or parked, holding no task); the head's reading and
        // the rest of the transaction run boxed once they came, so an idle connection does not
        // hold the whole transaction's future (4 KiB).
        let mut first_byte = None;
        if !first && self.cbuf.is_empty() {
            let mut may_park = false;
            if lean && resumed.is_none() {
                // The server-side timer is not needed until then, nor the server connection.
                self.stimer.release();
                let stopping = self.stopping();
                self.up.release_idle(stopping);
                self.shed_idle_state();
                may_park = matches!(idle, Idle::MayPark) && !stopping;
            }
            // Whatever else ends the wait (the client's close, `timeout http-keep-alive`, a
            // read error, a soft stop) closes a connection idle between requests silently.
            match self.idle_read(wait_start, lean, may_park).await {
                Ok(n) if n > 0 => first_byte = Some(clock::now()),
                Err(None)
                    if may_park && clock::now() >= wait_start + PARK_AFTER && !self.stopping() =>
                {
                    let due = self.idle_due(wait_start);
                    if due.is_some_and(|d| clock::now() >= d) {
                        return Next::End;
                    }
                    self.ctimer.release();
                    return Next::Park {
                        since: wait_start,
                        due,
                    };
                }
                _ => return Next::End,
            }
        }
        // A `move` closure: one borrowing these locals would keep them in the task's state.
        crate::engine::boxpool::Pooled::new_with(move || {
            self.request(first, wait_start, first_byte)
        })
        .await
        .into()
    }

    fn stopping(&self) -> bool {
        self.shared
            .stopping
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// When a connection idle between requests since `since` times out (as [`Self::idle_read`]
    /// reckons it).
    fn idle_due(&self, since: Instant) -> Option<Instant> {
        let dl = self.head_deadline(&Wait::between(since));
        super::read_due(&self.activity, dl, self.fe.cfg.timeouts.client)()
    }

    /// The transaction of a head the front already holds (boxed, and made here rather than in
    /// `transaction`, whose state would otherwise keep room for the head while idle).
    #[allow(clippy::type_complexity)]
    fn held_head(
        &mut self,
        first: bool,
        since: Instant,
    ) -> Option<std::pin::Pin<Box<impl std::future::Future<Output = bool> + '_>>> {
        let req = self.client.take_head()?;
        Some(Box::pin(async move {
            match req {
                Ok(req) => self.process((req, 0), first, since).await,
                Err(status) => self.refuse_head(status, since).await,
            }
        }))
    }

    /// The request head, then the transaction on it; false when the connection ends.
    async fn request(&mut self, first: bool, since: Instant, first_byte: Option<Instant>) -> bool {
        match self.wait_head(first, since, first_byte).await {
            Ok((head, start)) => self.process(head, first, start).await,
            Err(keep) => keep,
        }
    }

    /// An h2 stream's one transaction, its head already built, run in place (see
    /// `run_stream`); a front without a head has nothing to do.
    pub(super) async fn stream_transaction(&mut self) {
        let first = self.requests == 0;
        let wait_start = clock::now();
        match self.client.take_head() {
            Some(Ok(req)) => self.process((req, 0), first, wait_start).await,
            Some(Err(status)) => self.refuse_head(status, wait_start).await,
            None => false,
        };
    }

    /// Reads until a request head parses; Err when the transaction ended without one (whether
    /// the connection stays).
    /// `first_byte`: when the bytes already in `cbuf` began to arrive (`since` if unknown).
    async fn wait_head(
        &mut self,
        first: bool,
        since: Instant,
        first_byte: Option<Instant>,
    ) -> Result<((RequestHead, usize), Instant), bool> {
        let http_request = self.fe.cfg.timeouts.http_request;
        let limits = Limits::default();
        let got_first_byte = !self.cbuf.is_empty();
        // Before the first byte of a follow-up request, `timeout http-keep-alive` applies (HAProxy
        // falls back to http-request); then `timeout http-request` bounds the whole head.
        let mut w = Wait {
            first,
            since,
            start: first_byte.unwrap_or(since),
            got_first_byte,
            deadline: None,
        };
        if got_first_byte {
            w.deadline = http_request.map(|d| w.start + d);
        }
        loop {
            match h1::parse_request_head(&self.cbuf, &limits) {
                Ok(Some(h)) => return Ok((h, w.start)),
                Ok(None) => {}
                Err(e) => return Err(Box::pin(self.refuse_head(e.status(), w.start)).await),
            }
            let Some(read) = self.read_head_bytes(&w).await else {
                return Err(false);
            };
            match read {
                Ok(0) => return Err(self.closed_before_head(&w).await),
                Ok(_) if !w.got_first_byte => {
                    w.got_first_byte = true;
                    w.start = clock::now();
                    w.deadline = http_request.map(|d| w.start + d);
                }
                Ok(_) => {}
                Err(None) => return Err(self.head_timed_out(&w).await),
                Err(Some(_)) => {
                    self.head_read_failed(&w);
                    return Err(false);
                }
            }
        }
    }

    /// One read towards the head, within its timeouts; None when a soft stop ended the wait.
    async fn read_head_bytes(&mut self, w: &Wait) -> Option<Read> {
        // Only what the read needs lives across it (an idle connection's state is this future).
        let (dl, client, soft_stop, idle_limit) = self.head_limits(w);
        let read = std::pin::pin!(self.read_client(dl, client));
        match soft_stop {
            None => Some(read.await),
            Some(stop) => Box::pin(read_at_soft_stop(read, stop, idle_limit)).await,
        }
    }

    /// [`Self::read_head_bytes`] for the first bytes of a keep-alive connection's next request:
    /// `lean`, with no buffer held while the client is silent (a readiness wait), else a plain
    /// read into a small buffer (one io_uring operation, no readiness event). With `may_park`
    /// it also times out [`PARK_AFTER`] from `since` (the session then parks; only a lean read,
    /// which can be abandoned). A flag, not an instant, as its argument: an async fn keeps its
    /// arguments for its whole life, in an idle connection's state.
    async fn idle_read(&mut self, since: Instant, lean: bool, may_park: bool) -> Read {
        let (dl, client, soft_stop, idle_limit) = self.head_limits(&Wait::between(since));
        // The timer and the front's read inline, not in a `read_client`-like async fn of their
        // own, which would keep its arguments beside them: this is an idle connection's state.
        let buf = std::mem::take(&mut self.cbuf);
        let dl = park_cap(dl, since, may_park);
        let due = super::read_due(&self.activity, dl, client);
        let read = {
            let read = match lean {
                true => IdleRead::Lean {
                    f: self.client.read_idle(buf, IDLE_READ),
                },
                // Boxed: the read's future (io_uring's operation under the front's layers,
                // ≈ 500 bytes) would otherwise widen every connection's task. In a pooled block,
                // made there: this is a box per request.
                false => {
                    let (client, buf) = (&self.client, reserve(buf, IDLE_READ));
                    IdleRead::Plain {
                        f: crate::engine::boxpool::Pooled::new_with(move || client.read(buf)),
                    }
                }
            };
            let read = std::pin::pin!(self.ctimer.limit(read, due));
            match soft_stop {
                None => read.await,
                Some(stop) => Box::pin(read_at_soft_stop(read, stop, idle_limit))
                    .await
                    .flatten(),
            }
        };
        self.took(read)
    }

    /// When the wait `w` for a head ends: `timeout http-request` from its first byte once one
    /// came; before, `timeout http-keep-alive` between requests (HAProxy falls back to
    /// `http-request`, then `client`), `http-request` for the first.
    fn head_deadline(&self, w: &Wait) -> Option<Instant> {
        let t = self.fe.cfg.timeouts;
        if w.got_first_byte {
            return w.deadline;
        }
        let idle_wait = match w.first {
            true => t.http_request.or(t.client),
            false => t.http_keep_alive.or(t.http_request).or(t.client),
        };
        idle_wait.map(|d| w.since + d)
    }

    /// The timeouts of a read towards the head: its deadline, `timeout client`, the soft stop
    /// to watch (if any) and how long an idle connection may still wait once it came.
    fn head_limits(
        &self,
        w: &Wait,
    ) -> (
        Option<Instant>,
        Option<Duration>,
        Option<tokio::sync::watch::Receiver<bool>>,
        Instant,
    ) {
        let t = self.fe.cfg.timeouts;
        let dl = self.head_deadline(w);
        // Idle between requests at a soft stop: closing now would race a request on its way
        // (and dropping the read could lose one already read), so the read goes on until
        // the connection has been idle for `timeout http-keep-alive`. With that timeout
        // set, the read's own deadline (`dl`) is already that instant: no watch needed,
        // and none of its per-request cost (a subscription and a boxed future).
        let soft_stop = (!w.got_first_byte && !w.first && t.http_keep_alive.is_none())
            .then(|| self.shared.stop_tx.subscribe());
        let idle_limit = w.since + t.http_keep_alive.unwrap_or(SOFT_STOP_IDLE);
        (dl, t.client, soft_stop, idle_limit)
    }

    /// A head the codec refused: its status, `PR`, the connection closes.
    async fn refuse_head(&mut self, status: u16, start: Instant) -> bool {
        // `show errors`: the refused request as it was received.
        let at = h1::error_offset(&self.cbuf, false);
        crate::model::error_snapshots::store().request(&self.fe, self.facts.peer, &self.cbuf, at);
        let mut log = self.new_log();
        log.request_line = Some("<BADREQ>".into());
        Counters::add(&self.fe.fe_counters.errors_req, 1);
        self.count_request();
        let reply = Reply {
            status,
            page: Some(refusal(status)),
            term: *b"PR",
            keep: false,
        };
        self.local_reply(log, reply, start).await
    }

    /// The client closed while a head was awaited.
    async fn closed_before_head(&mut self, w: &Wait) -> bool {
        if w.got_first_byte {
            // Boxed, like every reply here: an idle connection's state should not hold a log
            // record (held across the await) for the rare error.
            return Box::pin(self.truncated_head(w.start)).await;
        }
        // HAProxy 2.6 counts a connection closed before its first byte as a request
        // (`req_tot`), not one closed between requests.
        if w.first {
            self.count_request();
        }
        // Closed between requests: nothing to log (and a silent probe on the first request is
        // `dontlognull` territory).
        if w.first && !self.fe.cfg.options.dontlognull {
            let mut log = self.new_log();
            log.term = *b"CR";
            log.null = true;
            log.status = Some(400);
            log.request_line = Some("<BADREQ>".into());
            finish(&self.shared, &self.fe, End::log_only(log));
        }
        false
    }

    /// The client closed in the middle of a head: 400, `CR`.
    async fn truncated_head(&mut self, start: Instant) -> bool {
        let mut log = self.new_log();
        log.term = *b"CR";
        log.request_line = Some("<BADREQ>".into());
        Counters::add(&self.fe.fe_counters.errors_req, 1);
        log.status = Some(400);
        let (page, _) = errors::reply_page_for(&[&self.fe.cfg.extra], 400, ConnHeader::Close);
        if let Some(p) = page {
            let _ = self.send_page(&p).await;
        }
        log.total = clock::since(start);
        finish(&self.shared, &self.fe, End::log_only(log));
        false
    }

    /// No (whole) head in time: 408 with `cR--`, as HAProxy (also for a silent first
    /// connection); a keep-alive connection idle between requests just closes.
    async fn head_timed_out(&mut self, w: &Wait) -> bool {
        if !w.got_first_byte && !w.first {
            return false;
        }
        Box::pin(self.late_head(!w.got_first_byte, w.start)).await
    }

    async fn late_head(&mut self, null: bool, start: Instant) -> bool {
        let mut log = self.new_log();
        log.request_line = Some("<BADREQ>".into());
        Counters::add(&self.fe.fe_counters.errors_req, 1);
        log.null = null;
        let (page, _) = errors::reply_page_for(&[&self.fe.cfg.extra], 408, ConnHeader::Close);
        if null && self.fe.cfg.options.dontlognull {
            if let Some(p) = page {
                let _ = self.send_page(&p).await;
            }
            return false;
        }
        let reply = Reply {
            status: 408,
            page,
            term: *b"cR",
            keep: false,
        };
        self.local_reply(log, reply, start).await
    }

    /// A read error while a head was awaited: logged (`CR`, 400) once a byte had come.
    fn head_read_failed(&self, w: &Wait) {
        if w.got_first_byte {
            let mut log = self.new_log();
            log.term = *b"CR";
            log.status = Some(400);
            log.request_line = Some("<BADREQ>".into());
            log.total = clock::since(w.start);
            finish(&self.shared, &self.fe, End::log_only(log));
        }
    }
}

/// An idle read's deadline `dl`, brought forward to [`PARK_AFTER`] from `since` when the session
/// may park (a plain function: its temporaries stay out of the read's future).
fn park_cap(dl: Option<Instant>, since: Instant, may_park: bool) -> Option<Instant> {
    match (dl, may_park.then(|| since + PARK_AFTER)) {
        (Some(d), Some(p)) => Some(d.min(p)),
        (d, p) => d.or(p),
    }
}

pin_project_lite::pin_project! {
    /// One of [`Session::idle_read`]'s two reads, held in place (the plain one is itself in a
    /// pooled block, taken per wait: the price of keeping the task's future small).
    #[project = IdleReadProj]
    enum IdleRead<L, P> {
        Lean { #[pin] f: L },
        Plain { #[pin] f: P },
    }
}

impl<T, L: std::future::Future<Output = T>, P: std::future::Future<Output = T>> std::future::Future
    for IdleRead<L, P>
{
    type Output = T;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<T> {
        match self.project() {
            IdleReadProj::Lean { f } => f.poll(cx),
            IdleReadProj::Plain { f } => f.poll(cx),
        }
    }
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

/// The answer to a request the codec refused, on a connection about to close. A status without
/// a canned page (414) gets a page of its own rather than HAProxy's 500 fallback.
pub(super) fn refusal(status: u16) -> Page {
    // 400, 408 and the H1 mux's own refusals of a request it parsed (HAProxy's `h1c->errcode`).
    if matches!(status, 400 | 408 | 422) {
        return errors::mux_page_for(status);
    }
    if errors::has_error_page(status) {
        let (page, _) = errors::reply_page_for(&[], status, ConnHeader::Close);
        if let Some(p) = page {
            return p;
        }
    }
    let why = errors::reason(status);
    let body = format!("<html><body><h1>{status} {why}</h1>\n</body></html>\n");
    errors::return_page(status, Some("text/html"), body.as_bytes(), &[], true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_keeps_the_codec_status_and_closes() {
        let r = String::from_utf8(refusal(414).wire()).unwrap();
        assert!(
            r.starts_with("HTTP/1.1 414 Request-URI Too Long\r\n"),
            "{r}"
        );
        assert!(r.contains("\r\nconnection: close\r\n\r\n"), "{r}");
        let r = String::from_utf8(refusal(501).wire()).unwrap();
        assert!(r.starts_with("HTTP/1.1 501 "), "{r}");
        assert!(r.contains("\r\nconnection: close\r\n\r\n"), "{r}");
        assert_eq!(refusal(400).wire(), errors::error_response(400));
        let r = String::from_utf8(refusal(422).wire()).unwrap();
        assert_eq!(
            r,
            "HTTP/1.1 422 Unprocessable Content\r\nContent-length: 116\r\nCache-Control: no-cache\r\n\
             Content-Type: text/html\r\n\r\n<html><body><h1>422 Unprocessable Content</h1>\n\
             The server cannot process the contained instructions.\n</body></html>\n"
        );
    }
}
