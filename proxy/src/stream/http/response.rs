//! The response's way back: its head checked and shaped (framing, connection mode, hop-by-hop
//! headers), the `http-response` rules, then the head and body streamed to the client — or, for
//! a 101 to an upgrade request, the head sent and the stream handed to the relay as a tunnel.

use std::rc::Rc;
use std::sync::Arc;

use super::compress::Compressor;
use super::exchange::{Abort, Leg};
use super::front::Part;
use super::{BODY_BUF, Front, Session, Txn, Upstream};
use crate::ana::rules;
use crate::config::model::{CompAlgo, StickKind};
use crate::engine::conn::Duplex;
use crate::engine::pool::give_buf;
use crate::http::errors::{self, ConnHeader};
use crate::http::h1::{self, BodyDecoder, BodyFraming, Payload};
use crate::http::head::{ResponseHead, Version};
use crate::log::SessionLog;
use crate::log::htx::BodySize;
use crate::model::{Counters, Proxy};

/// How forwarding a response ended.
pub(super) enum Forwarded {
    /// Done; whether the client connection stays.
    Done(bool),
    /// A 101 to an upgrade request, its head sent: the stream becomes a tunnel, starting with
    /// these server bytes.
    Upgrade(Vec<u8>),
}

/// How a response travels, decided from its head.
struct Plan {
    framing: BodyFraming,
    /// The client connection closes after it.
    close: bool,
    /// A 101 answering an upgrade.
    tunnel: bool,
    /// The server connection may carry another request (neither side nor an option closes it).
    keep_server: bool,
    /// The server connection is bound to this client (connection-based authentication).
    private: bool,
    /// The client asked with HEAD, the server (asked with another method by a rule) sends a
    /// body: it is read and dropped.
    skip_body: bool,
    /// The body is compressed with this algorithm (`compress.rs`).
    comp: Option<CompAlgo>,
}

/// A response body on its way: the head held back for the first body bytes, the decoder that
/// validates the framing (and finds the payload in it), HAProxy's byte accounting.
struct Body {
    head: Option<ResponseHead>,
    dec: BodyDecoder,
    payload: Payload,
    htx: BodySize,
    /// The last write carried the client connection's close.
    closed: bool,
    /// Read and dropped, not forwarded (see `Plan::skip_body`).
    skip: bool,
    comp: Option<Compressor>,
}

impl<F: Front, U: Upstream> Session<F, U> {
    /// Forwards the server's response (`resp`: its head and the bytes read after it).
    pub(super) async fn forward_response(
        &mut self,
        leg: &Leg<'_, U::Conn>,
        resp: (ResponseHead, Vec<u8>),
        tx: &mut Txn,
    ) -> Forwarded {
        let (mut head, sbuf) = resp;
        tx.log.status = Some(head.status);
        // The server counts what it sent; the frontend and backend count the final status
        // once the rules (or an error) decided it, as HAProxy's process_stream does.
        leg.srv.counters.count_status(head.status);
        let tunnel = tx.upgrade && head.status == 101;
        let Some(mut plan) = self.plan_response(leg.be, &mut head, tunnel, tx) else {
            Counters::add(&leg.srv.counters.errors_resp, 1);
            Counters::add(&leg.be.counters.errors_resp, 1);
            let abort = Abort::Server(b'H');
            self.fail(leg, abort, &mut tx.log, (ConnHeader::Close, false))
                .await;
            return Forwarded::Done(false);
        };
        // Whether to compress is decided on the server's head, before the rules (`res.comp`).
        tx.comp = self.comp_response(leg.be, tx, &head, plan.framing);
        plan.comp = tx.comp;
        tx.log.comp = tx.comp.map(CompAlgo::cfg_name);
        // `tcp-response content` rules (res_inspect.rs): a reject closes without an answer, a
        // close ends the server connection after this response.
        match self.tcp_response_rules(leg, &head, (&sbuf, plan.framing), tx) {
            Some(keep) => plan.keep_server &= keep,
            None => return Forwarded::Done(false),
        }
        self.store_rules(leg, &head, tx);
        if let Some(v) = self.response_rules(leg, &mut head, &tx.log, tx.strm.as_deref()) {
            // HAProxy has counted the body bytes that came with the head.
            if let Ok(p) = BodyDecoder::new(plan.framing).advance(&sbuf) {
                tx.log.bytes_out +=
                    BodySize::new(plan.framing == BodyFraming::Chunked).feed(&sbuf[..p.consumed]);
            }
            return Forwarded::Done(self.replace_response(leg, v, tx).await);
        }
        super::persist::capture_response(tx, &self.fe, &head);
        super::persist::response(tx, leg.be, leg.srv, &mut head);
        self.after_rules(Some(leg.be), &mut head, &tx.log);
        if let Some(algo) = plan.comp {
            crate::http::comp::set_response_head(algo, &mut head);
        }
        self.response_head(leg.be, &mut head, &plan, tx);
        // `option logasap`: the line goes out once the head is ready to forward.
        if self.fe.cfg.options.logasap {
            crate::log::asap_counts(&mut tx.log, tx.start, leg.be, leg.srv);
            self.shared.log.asap(&self.fe, &mut tx.log);
        }
        if !tunnel {
            return Forwarded::Done(self.stream_body(leg, sbuf, head, &plan, &mut tx.log).await);
        }
        let mut head = Some(head);
        if !self.flush_head(&mut head, false, leg, &mut tx.log).await {
            return Forwarded::Done(false);
        }
        Forwarded::Upgrade(sbuf)
    }

    /// Checks the head's framing (None: a bad response, 502) and decides how the response
    /// travels; the head loses its hop-by-hop headers and is counted and captured as HAProxy
    /// stores it.
    fn plan_response(
        &self,
        be: &Proxy,
        head: &mut ResponseHead,
        tunnel: bool,
        tx: &mut Txn,
    ) -> Option<Plan> {
        if tunnel
            && h1::is_websocket_upgrade(&tx.req)
            && !h1::websocket_accept_ok(&tx.req.headers, &head.headers)
        {
            return None;
        }
        let framing = match h1::response_framing(head, &tx.req.method) {
            Ok(BodyFraming::Tunnel) if !tunnel => return None,
            Ok(f) => f,
            Err(_) => return None,
        };
        // Chunked over a Content-Length, or in HTTP/1.0: both connections close afterwards.
        let forced_close = h1::framing_forces_close(head.version, &head.headers);
        h1::normalize_response(head, &framing);
        let server_close = h1::wants_close(head.version, &head.headers) || forced_close;
        let (fo, bo) = (&self.fe.cfg.options, &be.cfg.options);
        // `option httpclose` closes both sides after each exchange; `http-server-close` only the
        // server side.
        let httpclose = fo.httpclose || bo.httpclose;
        let server_keep = !(httpclose || fo.http_server_close || bo.http_server_close);
        let close =
            tx.client_close || httpclose || forced_close || framing == BodyFraming::UntilClose;
        h1::remove_hop_by_hop(&mut head.headers);
        // `%B` counts the head as HAProxy stores it, before the mux adds its connection header
        // and before the `http-response` rules change it.
        tx.log.bytes_out = crate::log::htx::head_size(head);
        if let Some(c) = &tx.log.captures {
            c.headers(true, &self.fe.cfg.captures.res, &head.headers);
        }
        Some(Plan {
            framing,
            close,
            tunnel,
            keep_server: server_keep && !server_close,
            private: binds_connection(head),
            skip_body: tx.head_request && !framing.bodyless() && framing != BodyFraming::Tunnel,
            comp: None,
        })
    }

    /// The final status counted, the connection header the H1 mux adds.
    fn response_head(&self, be: &Proxy, head: &mut ResponseHead, plan: &Plan, tx: &mut Txn) {
        tx.log.status = Some(head.status);
        self.fe.fe_counters.count_status(head.status);
        be.counters.count_status(head.status);
        // As HAProxy's H1 mux: `close` on an HTTP/1.1 response that ends the connection,
        // `keep-alive` when either side is HTTP/1.0 and the connection stays.
        if plan.close && !plan.tunnel && head.version == Version::Http11 {
            head.headers.append("connection", "close");
        } else if !plan.close
            && (tx.req.version == Version::Http10 || head.version == Version::Http10)
        {
            head.headers.append("connection", "keep-alive");
        }
    }

    /// Streams the body. The head goes out with the body bytes already read, in one write as
    /// HAProxy does (a client gone meanwhile is then noticed the same way). Keeps the server
    /// connection for the next request when it is reusable; returns whether the client's stays.
    async fn stream_body(
        &mut self,
        leg: &Leg<'_, U::Conn>,
        mut sbuf: Vec<u8>,
        head: ResponseHead,
        plan: &Plan,
        log: &mut SessionLog,
    ) -> bool {
        let mut body = Body {
            head: Some(head),
            dec: BodyDecoder::new(plan.framing),
            payload: Payload::new(),
            htx: BodySize::new(plan.framing == BodyFraming::Chunked),
            closed: false,
            skip: plan.skip_body,
            comp: plan.comp.map(|a| self.compressor(a, plan.framing)),
        };
        // A compressed body is framed anew, its trailers included.
        if self.client.payload() || body.comp.is_some() {
            body.dec.keep_trailers();
        }
        if body.comp.is_some() {
            body.htx = BodySize::new(true);
        }
        // A HEAD answered with a body: the head alone goes to the client, once the body is
        // drained (the server connection is then free for the client's next request).
        let mut done = plan.framing.bodyless();
        while !done {
            if !sbuf.is_empty() {
                match self
                    .pass_body(leg, &mut body, &mut sbuf, plan.close, log)
                    .await
                {
                    None => return false,
                    Some(true) => break,
                    Some(false) => {}
                }
            }
            if !body.skip && !self.flush_head(&mut body.head, false, leg, log).await {
                return false;
            }
            if sbuf.capacity() < BODY_BUF {
                sbuf.reserve(BODY_BUF);
            }
            let Some((b, eof)) = self.read_body(leg, sbuf, plan.framing, log).await else {
                return false;
            };
            (sbuf, done) = (b, eof);
        }
        if !self.flush_head(&mut body.head, true, leg, log).await {
            return false;
        }
        if plan.comp.is_some() {
            Counters::add(&self.fe.fe_counters.comp_rsp, 1);
            Counters::add(&leg.be.counters.comp_rsp, 1);
        }
        let reusable =
            plan.keep_server && sbuf.is_empty() && plan.framing != BodyFraming::UntilClose;
        give_buf(sbuf);
        if reusable {
            let reuse = leg.be.cfg.http_reuse;
            let (srv, conn) = (Arc::clone(leg.srv), Rc::clone(leg.server));
            self.up.keep(srv, conn, reuse, plan.private);
        }
        if plan.close && !body.closed {
            let _ = self.client.shutdown_write().await;
        }
        !plan.close
    }

    /// Forwards what `sbuf` holds of the body, as far as the decoder validates it (with the
    /// held head, if any). None: the transaction failed; else whether the body is complete.
    async fn pass_body(
        &mut self,
        leg: &Leg<'_, U::Conn>,
        body: &mut Body,
        sbuf: &mut Vec<u8>,
        close: bool,
        log: &mut SessionLog,
    ) -> Option<bool> {
        let Ok(p) = body.dec.advance_payload(sbuf, &mut body.payload) else {
            Counters::add(&leg.srv.counters.errors_resp, 1);
            Counters::add(&leg.be.counters.errors_resp, 1);
            log.term = *b"SD";
            leg.server.abort(true);
            return None;
        };
        if p.consumed == 0 {
            return Some(p.done);
        }
        if body.skip {
            sbuf.drain(..p.consumed);
            return Some(p.done);
        }
        let trailers = if p.done {
            body.dec.take_trailers()
        } else {
            None
        };
        let (chunk, tail) = match &mut body.comp {
            Some(c) => {
                let wire = &sbuf[..p.consumed];
                let piece = c.piece(wire, &body.payload, p.done, trailers.as_ref());
                sbuf.drain(..p.consumed);
                c.count([&self.fe.fe_counters, &leg.be.counters], &self.shared.model);
                // Nothing to send yet (framing only): the body goes on.
                let Some(piece) = piece else {
                    return Some(false);
                };
                (piece, None)
            }
            // The common case hands the whole buffer to the write and gets it back.
            None => {
                let tail = (p.consumed < sbuf.len()).then(|| sbuf.split_off(p.consumed));
                (std::mem::take(sbuf), tail)
            }
        };
        log.bytes_out += body.htx.feed(&chunk);
        // The response's last bytes on a closing connection carry the close.
        let last = p.done && close;
        let part = Part {
            head: body.head.as_ref(),
            wire: chunk,
            payload: body.comp.as_ref().map_or(&body.payload, |c| &c.payload),
            trailers,
            end: p.done,
            close: last,
        };
        let (r, mut back) = self.client.send_part(part).await;
        body.head = None;
        body.closed = last;
        back.clear();
        match &mut body.comp {
            // `sbuf` kept the bytes after the piece.
            Some(c) => c.give_back(back),
            None => *sbuf = tail.unwrap_or(back),
        }
        if r.is_err() {
            let abort = Abort::Client(b'D');
            self.fail(leg, abort, log, (ConnHeader::Close, false)).await;
            return None;
        }
        self.activity.touch();
        Some(p.done)
    }

    /// Reads more of the body from the server into `sbuf`; None: the transaction failed (`SD`,
    /// `sD`); else the buffer and whether the body ended (a close ends an until-close body).
    async fn read_body(
        &mut self,
        leg: &Leg<'_, U::Conn>,
        sbuf: Vec<u8>,
        framing: BodyFraming,
        log: &mut SessionLog,
    ) -> Option<(Vec<u8>, bool)> {
        let st = leg.be.cfg.timeouts.server;
        let read = leg.server.read(sbuf);
        match self.stimer.idle(read, st, &self.activity).await {
            Some((Ok(0), b)) if framing == BodyFraming::UntilClose => Some((b, true)),
            Some((Ok(0), _)) | Some((Err(_), _)) => {
                log.term = *b"SD";
                Counters::add(&leg.srv.counters.srv_aborts, 1);
                Counters::add(&leg.be.counters.srv_aborts, 1);
                None
            }
            Some((Ok(_), b)) => {
                self.activity.touch();
                Some((b, false))
            }
            None => {
                log.term = *b"sD";
                leg.server.abort(true);
                None
            }
        }
    }

    /// Sends the response head still held back for the first body bytes (`end`: no body
    /// follows). False when the client is gone (the transaction is then already failed and
    /// logged as `CD`).
    async fn flush_head(
        &mut self,
        head: &mut Option<ResponseHead>,
        end: bool,
        leg: &Leg<'_, U::Conn>,
        log: &mut SessionLog,
    ) -> bool {
        let Some(h) = head.take() else { return true };
        let part = Part {
            head: Some(&h),
            wire: Vec::new(),
            payload: &[],
            trailers: None,
            end,
            close: false,
        };
        if self.client.send_part(part).await.0.is_ok() {
            return true;
        }
        let abort = Abort::Client(b'D');
        self.fail(leg, abort, log, (ConnHeader::Close, false)).await;
        false
    }

    /// The hand-off of an upgraded stream (its 101 sent) to the relay: the client's unread
    /// bytes and the server's `sbuf` first, then both ways until either side ends it.
    pub(super) async fn tunnel(
        &mut self,
        leg: &Leg<'_, U::Conn>,
        sbuf: Vec<u8>,
        log: &mut SessionLog,
    ) -> bool {
        let client = Rc::clone(&self.client);
        let initial = std::mem::take(&mut self.cbuf);
        if !sbuf.is_empty() {
            let (r, _) = client.write_all(sbuf).await;
            if r.is_err() {
                return false;
            }
        }
        let (fe, be) = (&self.fe.cfg.timeouts, &leg.be.cfg.timeouts);
        let t = crate::tcp::RelayTimeouts {
            client: fe.client,
            server: be.server,
            tunnel: be.tunnel,
            client_fin: fe.client_fin,
            server_fin: be.server_fin,
        };
        let stats = crate::tcp::relay(
            client,
            Rc::clone(leg.server),
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
        false
    }

    /// `http-response` rules: the backend's, then the frontend's (HAProxy's order); `Some` is
    /// a final verdict (`deny`, `redirect`).
    /// `stick store-response` on the server's response head (before the `http-response`
    /// rules, as HAProxy's `AN_RES_STORE_RULES`), then every key the request's and the
    /// response's store rules kept sticks to the server.
    fn store_rules(&self, leg: &Leg<'_, U::Conn>, head: &ResponseHead, tx: &Txn) {
        let be: &Proxy = leg.be;
        if !be
            .rules
            .stick
            .iter()
            .any(|r| r.kind == StickKind::StoreResponse)
        {
            return;
        }
        let mut ctx = self.sample_base();
        ctx.backend = Some(&be.name);
        ctx.server = Some(&leg.srv.name);
        ctx.vars = tx.log.vars.as_deref();
        ctx.req = Some(&tx.req);
        ctx.res = Some(head);
        let tables = &self.shared.model.stick;
        let keys = crate::ana::sticking::on_response(&be.rules.stick, tables, &ctx);
        let now = self.shared.model.now_ms();
        crate::ana::sticking::store(&keys, leg.srv.id, &leg.srv.name, now);
    }

    fn response_rules(
        &self,
        leg: &Leg<'_, U::Conn>,
        head: &mut ResponseHead,
        log: &SessionLog,
        strm: Option<&crate::stick::StkCtrs>,
    ) -> Option<rules::ResVerdict> {
        let be: &Proxy = leg.be;
        let mut base = self.sample_base();
        // `http-response sc-*` and the `sc_*` fetches: the stream's counters, else the
        // session's.
        let now = self.shared.model.now_ms();
        base.stick = self
            .shared
            .model
            .stick_view(be, self.sess.as_deref(), strm, now);
        base.backend = Some(&be.name);
        base.server = Some(&leg.srv.name);
        base.captures = log.captures.as_deref();
        base.vars = log.vars.as_deref();
        base.unique_id = log.unique_id.as_deref();
        base.counts = Some((&*self.shared.model, &be.name));
        base.last_rule = Some(&log.last_rule);
        base.res_comp = log.comp;
        let fe: &Proxy = &self.fe;
        let sections: &[&Proxy] = if std::ptr::eq(be, fe) {
            &[be]
        } else {
            &[be, fe]
        };
        sections.iter().find_map(|px| {
            match rules::apply_http_response(&px.rules.http_response, head, &base) {
                rules::ResVerdict::Continue => None,
                v => Some(v),
            }
        })
    }

    /// The server's response replaced by the proxy's: `deny`'s error page or a `redirect`.
    async fn replace_response(
        &mut self,
        leg: &Leg<'_, U::Conn>,
        v: rules::ResVerdict,
        tx: &mut Txn,
    ) -> bool {
        match v {
            rules::ResVerdict::Redirect { code, location } => {
                self.redirect_response(leg, code, &location, tx).await
            }
            rules::ResVerdict::Deny(st) => self.deny_response(leg, st, tx).await,
            rules::ResVerdict::Continue => false,
        }
    }

    /// `http-response redirect`: the server connection is dropped (its body unread) and the
    /// client gets the redirect, logged `LH--` (server kept) on a connection that stays.
    async fn redirect_response(
        &mut self,
        leg: &Leg<'_, U::Conn>,
        code: u16,
        location: &str,
        tx: &mut Txn,
    ) -> bool {
        let be = leg.be;
        leg.server.abort(true);
        tx.log.term = *b"LH";
        let keep = !tx.client_close;
        let http10 = tx.req.version == Version::Http10;
        let hdr = ConnHeader::for_reply(http10, keep, false);
        let mut page = errors::redirect_page(code, location, false);
        page.set_connection(hdr);
        let head_only = tx.req.method == "HEAD";
        let (page, status) = self.error_page(be, Some(page), code, head_only, &tx.log);
        tx.log.status = Some(status);
        self.fe.fe_counters.count_status(status);
        be.counters.count_status(status);
        tx.log.bytes_out += page.as_ref().map_or(0, crate::log::htx::page_size);
        self.send_opt(page.as_ref()).await && keep
    }

    /// `http-response deny`: the server connection is dropped (its body unread) and the client
    /// gets the error page, logged `PH--` and counted in `dresp`.
    async fn deny_response(&mut self, leg: &Leg<'_, U::Conn>, status: u16, tx: &mut Txn) -> bool {
        let (be, srv) = (leg.be, leg.srv);
        leg.server.abort(true);
        let log = &mut tx.log;
        log.term = *b"PH";
        log.status = Some(status);
        // HAProxy logs no server response time for a denied response.
        log.response = None;
        Counters::add(&self.fe.fe_counters.denied_resp, 1);
        Counters::add(&be.counters.denied_resp, 1);
        Counters::add(&srv.counters.denied_resp, 1);
        // The client connection stays, as after any reply HAProxy generates.
        let http10 = tx.req.version == Version::Http10;
        let hdr = ConnHeader::for_reply(http10, !tx.client_close, false);
        let (page, close) =
            errors::reply_page_for(&[&be.cfg.extra, &self.fe.cfg.extra], status, hdr);
        let head_only = tx.req.method == "HEAD";
        let (page, status) = self.error_page(be, page, status, head_only, &tx.log);
        tx.log.status = Some(status);
        self.fe.fe_counters.count_status(status);
        be.counters.count_status(status);
        tx.log.bytes_out += page.as_ref().map_or(0, crate::log::htx::page_size);
        self.send_opt(page.as_ref()).await && !tx.client_close && !close
    }
}

/// HAProxy 2.6 (`http_wait_for_response`): a 401 or 407 challenging with NTLM or Negotiate
/// (an `…-Authenticate` value starting with `NTLM` or `Nego`) makes the server connection
/// private: the authentication holds for that connection only, so no other client may use it.
fn binds_connection(head: &ResponseHead) -> bool {
    let name = match head.status {
        401 => "www-authenticate",
        407 => "proxy-authenticate",
        _ => return false,
    };
    head.headers
        .get_all(name)
        .flat_map(|v| v.split(|&b| b == b','))
        .map(|v| v.trim_ascii_start())
        .any(|v| {
            v.get(..4)
                .is_some_and(|p| p.eq_ignore_ascii_case(b"NTLM") || p.eq_ignore_ascii_case(b"Nego"))
        })
}
