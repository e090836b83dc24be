//! The exchange with a server: a connection (`connect.rs`), the request sent, the response head
//! read — replayed once on a fresh connection when a reused one turns out closed — then the
//! response forwarded (`response.rs`) or the error answered (502, 503, 504). The server in use is
//! watched from outside the exchange's future for `shutdown-sessions` (`DH`/`DD`).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;

use crate::clock;
use tokio::time::Instant;

use super::upstream::Side;
use super::{BODY_BUF, Front, Session, Txn, Upstream};
use crate::backend::{self, ConnectError};
use crate::engine::conn::Duplex;
use crate::engine::pool::take_buf;
use crate::http::errors::{self, ConnHeader};
use crate::http::h1::{self, BodyDecoder, BodyFraming, Limits};
use crate::http::head::{ResponseHead, Version};
use crate::log::SessionLog;
use crate::model::{Counters, Proxy, Server, stats as counters};

/// Why a transaction ended early, mapped to the termination state and counters.
pub(super) enum Abort {
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

/// The server side of an exchange: the backend, the server, the connection to it.
pub(super) struct Leg<'a, C> {
    pub be: &'a Arc<Proxy>,
    pub srv: &'a Arc<Server>,
    pub server: &'a Rc<C>,
}

/// The server in use, its kill epoch when taken, and the connection to reset.
type Armed<C> = (Arc<Server>, u64, Rc<C>);

/// The server a transaction is using, watched for `shutdown-sessions` from outside the
/// transaction's future so that the kill can drop it wherever it is waiting.
struct KillWatch<C> {
    cur: RefCell<Option<Armed<C>>>,
    /// The response has started towards the client (a kill then cuts it).
    streaming: Cell<bool>,
}

impl<C> KillWatch<C> {
    fn new() -> Self {
        KillWatch {
            cur: RefCell::new(None),
            streaming: Cell::new(false),
        }
    }

    fn arm(&self, srv: &Arc<Server>, conn: &Rc<C>) {
        *self.cur.borrow_mut() = Some((Arc::clone(srv), srv.kill_epoch(), Rc::clone(conn)));
    }

    fn disarm(&self) {
        *self.cur.borrow_mut() = None;
    }

    /// Resolves when the armed server's sessions are shut down. Only [`Session::exchange`]'s
    /// biased select polls it, right after the exchange that arms and disarms it: every poll
    /// sees the server armed last, so a change needs no wake-up (a `Notify` for it took a lock
    /// three times per request), only the kill does.
    async fn killed(&self) {
        loop {
            let armed = self
                .cur
                .borrow()
                .as_ref()
                .map(|(s, e, _)| (Arc::clone(s), *e));
            let Some((srv, epoch)) = armed else {
                std::future::poll_fn(|_| match self.cur.borrow().is_some() {
                    true => Poll::Ready(()),
                    false => Poll::Pending,
                })
                .await;
                continue;
            };
            let moved = std::future::poll_fn(|_| {
                let same = self
                    .cur
                    .borrow()
                    .as_ref()
                    .is_some_and(|(s, e, _)| Arc::ptr_eq(s, &srv) && *e == epoch);
                if same { Poll::Pending } else { Poll::Ready(()) }
            });
            tokio::select! {
                biased;
                _ = moved => {}
                _ = srv.killed(epoch) => return,
            }
        }
    }
}

/// What a server answered: its response head and the bytes read after it, or why not.
type Answer = Result<(ResponseHead, Vec<u8>), Abort>;

impl<F: Front, U: Upstream> Session<F, U> {
    /// The exchange with a server for `tx`, cut short if the server's sessions are shut down.
    /// Returns whether the client connection stays.
    pub(super) async fn exchange(
        &mut self,
        be: &Arc<Proxy>,
        tx: &mut Txn,
        head_bytes: Vec<u8>,
    ) -> bool {
        let watch = KillWatch::new();
        let done = {
            // Pinned where it is made: `select!` then moves a pointer, not the exchange's
            // future (≈ 2 KiB copied per request).
            let work = std::pin::pin!(self.exchange_on(be, tx, head_bytes, &watch));
            tokio::select! {
                biased;
                keep = work => Some(keep),
                _ = watch.killed() => None,
            }
        };
        match done {
            Some(keep) => keep,
            None => self.killed(be, &watch, &mut tx.log).await,
        }
    }

    /// The server was marked DOWN with `on-marked-down shutdown-sessions`: RST to the server,
    /// 502 (`DH--`, Tr = -1) if the client has no response yet, else the response is cut (`DD--`).
    async fn killed(
        &mut self,
        be: &Proxy,
        watch: &KillWatch<U::Conn>,
        log: &mut SessionLog,
    ) -> bool {
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
        let (page, _) =
            errors::reply_page_for(&[&be.cfg.extra, &self.fe.cfg.extra], 502, ConnHeader::Close);
        if let Some(p) = page {
            log.bytes_out = crate::log::htx::page_size(&p);
            let _ = self.send_page(&p).await;
        }
        let _ = self.client.shutdown_write().await;
        false
    }

    /// Connect, send, read the response head; then forward it (or hand an upgrade to the relay)
    /// or answer the error. The server's slot is released and its counters added here.
    async fn exchange_on(
        &mut self,
        be: &Arc<Proxy>,
        tx: &mut Txn,
        head_bytes: Vec<u8>,
        watch: &KillWatch<U::Conn>,
    ) -> bool {
        let (srv, server, resp) = match self.attempts(be, tx, head_bytes, watch).await {
            Ok(x) => x,
            Err(keep) => return keep,
        };
        let leg = Leg {
            be,
            srv: &srv,
            server: &server,
        };
        let outcome = match resp {
            Ok(resp) => {
                watch.streaming.set(true);
                let done = self.forward_response(&leg, resp, tx).await;
                // h2 server streams: `%B` as HAProxy's HTX form of the response counts it.
                tx.log.bytes_out = tx.log.bytes_out.saturating_sub(server.htx_surplus());
                match done {
                    super::response::Forwarded::Done(keep) => keep,
                    // An upgrade: the stream becomes a tunnel, under the same watch.
                    // Boxed, as the connect: the relay's state would weigh on every
                    // transaction's future for the rare upgrade.
                    super::response::Forwarded::Upgrade(sbuf) => {
                        Box::pin(self.tunnel(&leg, sbuf, &mut tx.log)).await
                    }
                }
            }
            Err(a) => {
                let reply = (tx.error_conn_hdr(), tx.req.method == "HEAD");
                self.fail(&leg, a, &mut tx.log, reply).await && tx.error_keep()
            }
        };
        watch.disarm();
        self.close_leg(&leg, &mut tx.log, tx.start);
        outcome
    }

    /// Connects and sends until a response head comes: a reused idle connection may have been
    /// closed by the server meanwhile, so a bodiless request that got no response byte is
    /// replayed once on a fresh connection. Err: answered without a server (whether the
    /// connection stays).
    async fn attempts(
        &mut self,
        be: &Arc<Proxy>,
        tx: &mut Txn,
        mut head_bytes: Vec<u8>,
        watch: &KillWatch<U::Conn>,
    ) -> Result<(Arc<Server>, Rc<U::Conn>, Answer), bool> {
        let tc_start = clock::now();
        // The balancing key of the request as it leaves the rules (HAProxy hashes at connect).
        // HAProxy prunes the request's variables as the connection is requested, before it
        // assigns a server.
        tx.vars.end_request();
        let key = self.lb_key(be, tx);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let side = Side {
                shared: &self.shared,
                fe: &self.fe,
                facts: &self.facts,
                persist: tx.persist.as_ref(),
                force_persist: tx.persist_rule == Some(true),
                stick: tx.stick.as_ref(),
                replayable: tx.framing.bodyless() && attempts == 1,
            };
            let first = tx.first || attempts > 1;
            let got = self.up.conn(side, be, first, key, &mut tx.log).await;
            let (srv, server, reused) = match got {
                Ok(x) => x,
                Err((e, failed)) => return Err(self.no_server(be, tx, e, failed).await),
            };
            if reused {
                Counters::add(&srv.counters.reuse, 1);
                Counters::add(&be.counters.reuse, 1);
                tx.log.connect = Some(clock::since(tc_start));
            }
            self.engage(be, &srv, &server, &mut tx.log, watch);
            let r = self
                .send_request(be, &server, &mut head_bytes, tx.framing, &mut tx.log)
                .await;
            let r = match r {
                Ok(()) => self.read_response(be, &srv, &server, &mut tx.log).await,
                Err(a) => Err(a),
            };
            match r {
                Err(Abort::Server(b'H')) if reused && tx.framing.bodyless() && attempts < 2 => {
                    watch.disarm();
                    backend::release(be, &srv);
                    server.abort(false);
                }
                other => return Ok((srv, server, other)),
            }
        }
    }

    /// The stream now uses `srv` over `server`: logged, watched, counted.
    fn engage(
        &self,
        be: &Proxy,
        srv: &Arc<Server>,
        server: &Rc<U::Conn>,
        log: &mut SessionLog,
        watch: &KillWatch<U::Conn>,
    ) {
        log.server = Some(srv.name.clone());
        watch.arm(srv, server);
        Counters::add(&srv.counters.req_tot, 1);
        log.beconn = be.beconn.load(Ordering::Relaxed);
        log.srvconn = srv.cur_conns.load(Ordering::Relaxed);
    }

    /// No usable server (none up, queue timeout, connection refused after the retries): 503
    /// with the connection error's termination codes.
    async fn no_server(
        &mut self,
        be: &Proxy,
        tx: &mut Txn,
        e: ConnectError,
        failed: Option<Arc<Server>>,
    ) -> bool {
        let (hdr, keep) = (tx.error_conn_hdr(), tx.error_keep());
        let head_only = tx.req.method == "HEAD";
        let (page, close) = errors::reply_page_for(&[&be.cfg.extra, &self.fe.cfg.extra], 503, hdr);
        let (page, status) = self.error_page(be, page, 503, head_only, &tx.log);
        let log = &mut tx.log;
        log.beconn = be.beconn.load(Ordering::Relaxed);
        log.status = Some(status);
        log.term = e.term();
        self.fe.fe_counters.count_status(status);
        be.counters.count_status(status);
        log.bytes_out = page.as_ref().map_or(0, crate::log::htx::page_size);
        // HAProxy counts the error's bytes on the server that failed too.
        if let Some(s) = failed {
            s.counters.bytes(log.bytes_in, log.bytes_out);
        }
        let sent = self.send_opt(page.as_ref()).await;
        sent && keep && !close
    }

    /// The request's balancing key for `be`: `balance hash` evaluates its expression here,
    /// on the request and the variables its rules set (never response data: there is none
    /// yet); `url_param` looks into a POST's body when the query string lacks the parameter.
    fn lb_key(&self, be: &Proxy, tx: &Txn) -> Option<u32> {
        let pool = be.pool();
        let req = &tx.req;
        let Some(expr) = pool.lb.hash_expr() else {
            let key = pool.lb.key(self.facts.peer.map(|p| p.ip()), Some(req));
            if key.is_none() && req.method == "POST" {
                return pool.lb.post_key(&self.buffered_payload(tx.framing));
            }
            return key;
        };
        let mut ctx = self.sample_base();
        ctx.req = Some(req);
        ctx.backend = Some(&be.name);
        ctx.vars = Some(&*tx.vars);
        let v = expr.eval(&ctx)?;
        Some(pool.lb.key_of(&v.to_bytes()))
    }

    /// The server's part of the end: its bytes, the stream's time sample (HAProxy's
    /// `stream_update_time_stats`) when a response came, its connection slot.
    fn close_leg(&self, leg: &Leg<'_, U::Conn>, log: &mut SessionLog, start: Instant) {
        let (be, srv) = (leg.be, leg.srv);
        srv.counters.bytes(log.bytes_in, log.bytes_out);
        if let (Some(c), Some(r)) = (log.connect, log.response) {
            let t = counters::Sample {
                queue: counters::ms(log.queue.unwrap_or_default()),
                connect: counters::ms(c),
                response: counters::ms(r),
                total: counters::ms(clock::since(start)),
            };
            srv.counters.times(true, t);
            be.counters.times(true, t);
        }
        backend::release(be, srv);
        log.srvconn = srv.cur_conns.load(Ordering::Relaxed);
    }

    /// Sends the head and streams the request body (validated by the decoder) to the server.
    async fn send_request(
        &mut self,
        be: &Proxy,
        server: &U::Conn,
        head: &mut Vec<u8>,
        framing: BodyFraming,
        log: &mut SessionLog,
    ) -> Result<(), Abort> {
        let st = be.cfg.timeouts.server;
        // The head is lent to the write and comes back whole, for a replay.
        let sent = self
            .stimer
            .idle(server.write_all(std::mem::take(head)), st, &self.activity)
            .await;
        match sent {
            Some((Ok(()), b)) => *head = b,
            Some((Err(_), b)) => {
                *head = b;
                return Err(Abort::Server(b'H'));
            }
            None => return Err(Abort::ServerTimeout(b'H')),
        }
        if framing.bodyless() {
            return Ok(());
        }
        // An HTTP/2 body of unknown length: its payload leaves chunked.
        if framing == BodyFraming::Chunked && self.client.payload() {
            return self.send_payload_chunked(be, server, log).await;
        }
        let mut dec = BodyDecoder::new(framing);
        let mut htx_body = crate::log::htx::BodySize::new(framing == BodyFraming::Chunked);
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
            self.read_body_bytes(&mut dec).await?;
        }
    }

    /// A request body the client sends as payload (HTTP/2 DATA) of unknown length, chunked
    /// towards the server: one chunk per read, the last chunk at its end.
    async fn send_payload_chunked(
        &mut self,
        be: &Proxy,
        server: &U::Conn,
        log: &mut SessionLog,
    ) -> Result<(), Abort> {
        let st = be.cfg.timeouts.server;
        let mut htx_body = crate::log::htx::BodySize::new(true);
        loop {
            let mut end = false;
            if self.cbuf.is_empty() {
                if self.cbuf.capacity() < BODY_BUF {
                    self.cbuf.reserve(BODY_BUF);
                }
                let ct = self.fe.cfg.timeouts.client;
                match self.read_client(None, ct).await {
                    Ok(0) => end = true,
                    Ok(_) => {}
                    Err(None) => return Err(Abort::ClientTimeout(b'D')),
                    Err(Some(_)) => return Err(Abort::Client(b'D')),
                }
            }
            let mut out = Vec::with_capacity(self.cbuf.len() + 16);
            if !self.cbuf.is_empty() {
                out.extend_from_slice(format!("{:x}\r\n", self.cbuf.len()).as_bytes());
                out.extend_from_slice(&self.cbuf);
                out.extend_from_slice(b"\r\n");
                self.cbuf.clear();
            }
            if end {
                out.extend_from_slice(b"0\r\n");
                for f in self.client.take_trailers().map(|t| t.0).unwrap_or_default() {
                    out.extend_from_slice(f.name.as_bytes());
                    out.extend_from_slice(b": ");
                    out.extend_from_slice(&f.value);
                    out.extend_from_slice(b"\r\n");
                }
                out.extend_from_slice(b"\r\n");
            }
            log.bytes_in += htx_body.feed(&out);
            match self
                .stimer
                .idle(server.write_all(out), st, &self.activity)
                .await
            {
                Some((Ok(()), _)) => self.activity.touch(),
                Some((Err(_), _)) => return Err(Abort::Server(b'D')),
                None => return Err(Abort::ServerTimeout(b'D')),
            }
            if end {
                return Ok(());
            }
        }
    }

    /// More request body from the client.
    async fn read_body_bytes(&mut self, dec: &mut BodyDecoder) -> Result<(), Abort> {
        if self.cbuf.capacity() < BODY_BUF {
            self.cbuf.reserve(BODY_BUF - self.cbuf.len());
        }
        let ct = self.fe.cfg.timeouts.client;
        match self.read_client(None, ct).await {
            Ok(0) => Err(dec
                .at_eof()
                .map_or_else(|e| Abort::BadBody(e.status()), |()| Abort::Client(b'D'))),
            Ok(_) => Ok(()),
            Err(None) => Err(Abort::ClientTimeout(b'D')),
            Err(Some(_)) => Err(Abort::Client(b'D')),
        }
    }

    /// Reads the final response head (forwarding interim 1xx responses other than 101).
    async fn read_response(
        &mut self,
        be: &Proxy,
        srv: &Server,
        server: &U::Conn,
        log: &mut SessionLog,
    ) -> Answer {
        let st = be.cfg.timeouts.server;
        let sent_at = clock::now();
        let limits = Limits::default();
        let mut sbuf = take_buf();
        loop {
            match h1::parse_response_head(&sbuf, &limits) {
                Ok(Some((resp, n))) => {
                    if (100..200).contains(&resp.status) && resp.status != 101 {
                        let interim: Vec<u8> = sbuf.drain(..n).collect();
                        if self.client.send_interim(&resp, interim).await.is_err() {
                            return Err(Abort::Client(b'H'));
                        }
                        continue;
                    }
                    log.response = Some(clock::since(sent_at));
                    sbuf.drain(..n);
                    return Ok((resp, sbuf));
                }
                Ok(None) => {}
                Err(_) => {
                    let at = h1::error_offset(&sbuf, true);
                    let snaps = crate::model::error_snapshots::store();
                    snaps.response(be, &self.fe, srv, self.facts.peer, &sbuf, at);
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

    /// Answers an aborted transaction: 502 when the server failed before its response head, 504
    /// on a server timeout, the request body's status when it was bad, nothing (just close) when
    /// the client is gone. The reply carries the connection header of `reply.0`, and no body
    /// when `reply.1` (a HEAD request); returns whether one was sent and the connection stays.
    pub(super) async fn fail(
        &mut self,
        leg: &Leg<'_, U::Conn>,
        a: Abort,
        log: &mut SessionLog,
        reply: (ConnHeader, bool),
    ) -> bool {
        let (be, srv) = (leg.be, leg.srv);
        leg.server.abort(true);
        let (cause, state, status) = match a {
            Abort::Client(s) => (b'C', s, None),
            Abort::BadBody(st) => (b'C', b'D', Some(st)),
            Abort::ClientTimeout(s) => (b'c', s, Some(408)),
            Abort::Server(s) => (b'S', s, if s == b'H' { Some(502) } else { None }),
            Abort::ServerTimeout(s) => (b's', s, if s == b'H' { Some(504) } else { None }),
        };
        log.term = [cause, state];
        if cause == b'C' || cause == b'c' {
            Counters::add(&be.counters.cli_aborts, 1);
            Counters::add(&srv.counters.cli_aborts, 1);
        } else {
            Counters::add(&be.counters.srv_aborts, 1);
            Counters::add(&srv.counters.srv_aborts, 1);
        }
        let Some(st) = status else { return false };
        if cause == b'c' && state != b'R' {
            return false;
        }
        let (page, close) =
            errors::reply_page_for(&[&be.cfg.extra, &self.fe.cfg.extra], st, reply.0);
        let (page, st) = self.error_page(be, page, st, reply.1, log);
        log.status = Some(st);
        self.fe.fe_counters.count_status(st);
        be.counters.count_status(st);
        log.bytes_out = page.as_ref().map_or(0, crate::log::htx::page_size);
        self.send_opt(page.as_ref()).await && !close
    }
}

impl Txn {
    /// HAProxy keeps the client connection after its own 502/503/504 when it could after a
    /// normal response: keep-alive asked, no request body left behind.
    fn error_keep(&self) -> bool {
        !self.client_close && self.framing.bodyless()
    }

    /// The connection header of those errors.
    fn error_conn_hdr(&self) -> ConnHeader {
        let http10 = self.req.version == Version::Http10;
        ConnHeader::for_reply(http10, !self.client_close, !self.error_keep())
    }
}
