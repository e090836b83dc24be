//! The request's analysis, in HAProxy's order once its head is parsed: the framing (`PR` on a bad
//! one), `monitor-uri`, the frontend's `http-request` rules, routing, the backend's rules — each
//! rule may answer locally — then the request's edits before it leaves for a server.

use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::clock;
use tokio::time::Instant;

use super::wait::refusal;
use super::{Front, Reply, Session, Txn, Upstream};
use crate::ana::capture::Captured;
use crate::ana::last_rule::LastRule;
use crate::ana::rules::{self, Verdict};
use crate::ana::sample::SampleCtx;
use crate::ana::vars::Vars;
use crate::engine::conn::Duplex;
use crate::http::errors::{self, ConnHeader};
use crate::http::h1::{self, BodyDecoder, BodyFraming};
use crate::http::head::{RequestHead, Version};
use crate::log::SessionLog;
use crate::model::{Counters, Proxy};
use crate::stick::StkCtrs;
use crate::stream::end::{Held, finish_record};

/// How the analysis ended when no server is to be asked.
enum Answer {
    /// A rule or an applet answered.
    Reply(Reply),
    /// No backend for the request: 503, `SC`.
    NoRoute,
    /// The route names a proxy that is gone (the connection just closes).
    Lost,
}

/// What the rules' sample contexts borrow from the transaction while the rules edit its request.
struct Refs {
    caps: Option<Rc<Captured>>,
    uid: Option<String>,
    vars: Rc<Vars>,
    /// The rules' last final rule, copied into the log record once they are done.
    last: LastRule,
}

impl<F: Front, U: Upstream> Session<F, U> {
    /// A parsed request head: its analysis, then an applet, a local reply or the exchange with a
    /// server, and the log line.
    pub(super) async fn process(
        &mut self,
        head: (RequestHead, usize),
        first: bool,
        start: Instant,
    ) -> bool {
        let addrs = (self.facts.peer, self.facts.local);
        let keep = self.process_txn(head, first, start).await;
        (self.facts.peer, self.facts.local) = addrs;
        keep
    }

    /// [`Self::process`], whose rules may change the stream's addresses.
    async fn process_txn(
        &mut self,
        head: (RequestHead, usize),
        first: bool,
        start: Instant,
    ) -> bool {
        let mut tx = match self.begin(head, first, start) {
            Ok(tx) => tx,
            Err(refused) => {
                let (log, status) = *refused;
                let reply = Reply {
                    status,
                    page: Some(refusal(status)),
                    term: *b"PR",
                    keep: false,
                };
                return self.local_reply(log, reply, start).await;
            }
        };
        self.read_stats_form(&tx).await;
        let fe = Arc::clone(&self.fe);
        if let Err(r) = self.buffer_request(&fe, &tx).await {
            return self.local_reply(tx.log, r, tx.start).await;
        }
        // A local reply keeps the connection when the request body, if any, is already wholly
        // received (HAProxy's H1 mux then drops it): its length here.
        tx.body_here = match tx.framing {
            BodyFraming::None => Some(0),
            f => BodyDecoder::new(f)
                .advance(&self.cbuf)
                .ok()
                .filter(|p| p.done)
                .map(|p| p.consumed),
        };
        tx.keep = !tx.client_close && tx.body_here.is_some();
        // `monitor-uri`: the exact target is answered with the 200 page (or errorfile 200)
        // before any rule, and is not logged, as HAProxy does.
        if self.fe.cfg.extra.monitor_uri.as_deref() == Some(tx.req.target.as_str()) {
            return self.monitor(&tx).await;
        }
        // The stream's stick counters (`http-request track-sc`): held until the transaction
        // ends (`conn_cur`).
        let strm = Rc::new(StkCtrs::default());
        tx.strm = Some(Rc::clone(&strm));
        let analysed = self.analyse(&mut tx, &strm);
        self.adopt_addrs(&mut tx);
        // `early-hint`: the 103 interim responses go before whatever answers the request.
        self.early_hints(&tx).await;
        match analysed {
            // `tx` is lent to the exchange, not moved: moved, it would be stored twice more in
            // this future, which every request allocates and copies.
            Ok(be) => match self.forward(&mut tx, &be).await {
                Ok(keep) => {
                    self.forwarded(&mut tx, &be, &strm);
                    keep
                }
                Err(r) => self.local_reply(tx.log, r, tx.start).await,
            },
            Err(Answer::Reply(r)) => self.answer(tx, r, &strm).await,
            Err(Answer::NoRoute) => {
                let (page, _) =
                    errors::reply_page_for(&[&self.fe.cfg.extra], 503, ConnHeader::Close);
                let reply = Reply {
                    status: 503,
                    page,
                    term: *b"SC",
                    keep: false,
                };
                self.local_reply(tx.log, reply, tx.start).await
            }
            Err(Answer::Lost) => false,
        }
    }

    /// The transaction of a parsed head: counted, its log record opened, its framing checked
    /// (Err: the log record and the status refusing it; boxed, it is rare).
    fn begin(
        &mut self,
        head: (RequestHead, usize),
        first: bool,
        start: Instant,
    ) -> Result<Txn, Box<(SessionLog, u16)>> {
        let (mut req, consumed) = head;
        self.cbuf.drain(..consumed);
        self.requests += 1;
        self.count_request();
        let sess_vars = self.sess_vars();
        let (mut log, vars) = self.open_log(&req, start, sess_vars);
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
                return Err(Box::new((log, e.status())));
            }
        };
        // Without a log format, HAProxy logs "Connect from" per stream, i.e. per valid request.
        self.shared.log.connect(&self.fe, &log);
        // `unique-id-format`: made once per stream, from what is known before the rules (HAProxy
        // makes it at first use, at the latest before the backend's headers are added).
        log.unique_id = self.shared.log.unique_id(&self.fe, &log);
        // A request arriving during a soft stop is served, then the connection closes.
        // Chunked over a Content-Length, or in HTTP/1.0, closes (`h1::framing_forces_close`;
        // only a chunked request has a Transfer-Encoding, so no other needs that scan).
        let forced = framing == BodyFraming::Chunked
            && (req.version == Version::Http10 || req.headers.contains("content-length"));
        let client_close = h1::wants_close(req.version, &req.headers)
            || forced
            || self.shared.stopping.load(Ordering::Acquire);
        let upgrade = h1::is_upgrade(&req);
        h1::normalize_request(&mut req, &framing);
        Ok(Txn {
            http10: req.version == Version::Http10,
            head_request: req.method == "HEAD",
            req,
            framing,
            log,
            start,
            first,
            client_close,
            upgrade,
            body_here: None,
            keep: false,
            vars,
            persist: None,
            persist_rule: None,
            stick: None,
            strm: None,
            comp: None,
        })
    }

    /// The transaction's log record as the head arrived, and its variables.
    fn open_log(
        &self,
        req: &RequestHead,
        start: Instant,
        sess_vars: crate::ana::vars::SessVars,
    ) -> (SessionLog, Rc<Vars>) {
        // One wall-clock and one monotonic read: the head's wait, and the date it began at.
        let now = std::time::SystemTime::now();
        let waited = clock::since(start);
        let mut log = self.new_log_at(now);
        log.accept_date = now - waited;
        log.request = Some(waited);
        // `capture request header` sees the request as received, before any rule.
        log.captures = Captured::start(&self.fe.cfg.captures);
        if let Some(c) = &log.captures {
            c.headers(false, &self.fe.cfg.captures.req, &req.headers);
        }
        let vars = Vars::new(sess_vars);
        log.vars = Some(Rc::clone(&vars));
        // Only a log line reads it: no allocation per request when the frontend does not log.
        if !self.fe.cfg.logs.is_empty() {
            log.request_line = Some(match self.client.log_line() {
                Some(l) => l.to_string(),
                // One allocation of the summed length, without the formatting machinery.
                None => [
                    req.method.as_str(),
                    " ",
                    req.target.as_str(),
                    " ",
                    req.version.as_str(),
                ]
                .concat(),
            });
        }
        log.bytes_in = crate::log::htx::request_head_size(req);
        (log, vars)
    }

    /// The `monitor-uri` answer (not logged).
    async fn monitor(&mut self, tx: &Txn) -> bool {
        let keep = tx.keep;
        let (mut page, close) =
            errors::reply_page_for(&[&self.fe.cfg.extra], 200, tx.conn_hdr(!keep));
        if tx.req.method == "HEAD"
            && let Some(p) = &mut page
        {
            p.head_only();
        }
        if let Some(n) = tx.body_here.filter(|_| keep) {
            self.cbuf.drain(..n.min(self.cbuf.len()));
        }
        let sent = match &page {
            Some(p) => self.send_page(p).await,
            None => true,
        };
        if !keep || close {
            let _ = self.client.shutdown_write().await;
        }
        sent && keep && !close
    }

    /// The frontend's `http-request` rules, routing, then the backend's rules (HAProxy's
    /// order): the backend that gets the request, or how the analysis answered it.
    fn analyse(&self, tx: &mut Txn, strm: &StkCtrs) -> Result<Arc<Proxy>, Answer> {
        let refs = Refs {
            caps: tx.log.captures.clone(),
            uid: tx.log.unique_id.clone(),
            vars: Rc::clone(&tx.vars),
            last: LastRule::default(),
        };
        let out = self.analyse_with(tx, strm, &refs);
        tx.log.last_rule.merge(&refs.last);
        out
    }

    /// [`Self::analyse`] with the transaction's rule state in `refs`.
    fn analyse_with(
        &self,
        tx: &mut Txn,
        strm: &StkCtrs,
        refs: &Refs,
    ) -> Result<Arc<Proxy>, Answer> {
        let fe = Arc::clone(&self.fe);
        let mut be = Arc::clone(&fe);
        for stage in 0..2 {
            let base = self.rule_ctx(refs, &be, strm);
            let answered = match self.content_rules(tx, &be, stage, &base) {
                Some(r) => Some(r),
                None => {
                    // The HTTP analysis starts: what the frontend's content rules tracked counts
                    // this request (HAProxy's stream_inc_http_req_ctr).
                    if stage == 0 && !be.rules.tcp_content.is_empty() {
                        let now = self.shared.model.now_ms();
                        for t in strm.iter() {
                            t.count_http_req(now);
                        }
                    }
                    self.request_rules(tx, &be, stage, &base)
                }
            };
            if let Some(r) = answered {
                if stage == 1 {
                    tx.log.backend = Some(be.name.clone());
                }
                return Err(Answer::Reply(r));
            }
            if stage == 1 {
                break;
            }
            let ctx = SampleCtx {
                req: Some(&tx.req),
                ..base
            };
            let idx =
                rules::route(&fe.rules, fe.index, fe.is_backend(), &ctx).ok_or(Answer::NoRoute)?;
            let next = self.shared.model.proxies.get(idx).cloned();
            let next = next.ok_or(Answer::Lost)?;
            if Arc::ptr_eq(&next, &fe) {
                break;
            }
            be = next;
        }
        // `force-persist` / `ignore-persist`: read once the rules are done (HAProxy's
        // http_process_request, before the cookie).
        if !be.rules.persist.is_empty() {
            let base = self.rule_ctx(refs, &be, strm);
            let ctx = SampleCtx {
                req: Some(&tx.req),
                ..base
            };
            tx.persist_rule = rules::persist_rule(&be.rules.persist, &ctx);
        }
        // `stick on|match|store-request`: after the backend's rules, before the server.
        if !be.rules.stick.is_empty() {
            let base = self.rule_ctx(refs, &be, strm);
            let ctx = SampleCtx {
                req: Some(&tx.req),
                ..base
            };
            let now = self.shared.model.now_ms();
            tx.stick = Some(crate::ana::sticking::on_request(
                &be.rules.stick,
                &self.shared.model.stick,
                &ctx,
                now,
            ));
        }
        Ok(be)
    }

    /// `early-hint`: a `103 Early Hints` per rule, before whatever answers the request (over h2,
    /// a HEADERS frame each). A client gone meanwhile is noticed, and logged, with the answer.
    async fn early_hints(&self, tx: &Txn) {
        for (name, value) in tx.log.last_rule.take_hints() {
            let mut head = crate::http::head::ResponseHead {
                version: Version::Http11,
                status: 103,
                reason: "Early Hints".into(),
                headers: Default::default(),
            };
            head.headers.append(name, value);
            let mut wire = Vec::with_capacity(64);
            h1::write_response_head(&head, &mut wire);
            if self.client.send_interim(&head, wire).await.is_err() {
                return;
            }
        }
    }

    /// `set-src`/`set-dst`: the transaction has the addresses the rules gave it, for its log
    /// line, `option forwardfor` and balancing (HAProxy 2.6 changes the stream's, not the
    /// connection's: [`Self::process`] restores them for the next request).
    fn adopt_addrs(&mut self, tx: &mut Txn) {
        let (src, dst) = tx.log.last_rule.addrs();
        if let Some(a) = src {
            self.facts.peer = Some(a);
            tx.log.client = Some(a);
        }
        if let Some(a) = dst {
            self.facts.local = Some(a);
            tx.log.frontend_addr = Some(a);
        }
    }

    /// The sample context of `be`'s request rules.
    fn rule_ctx<'a>(&'a self, refs: &'a Refs, be: &'a Proxy, strm: &'a StkCtrs) -> SampleCtx<'a> {
        let mut base = self.sample_base();
        base.captures = refs.caps.as_deref();
        base.vars = Some(&refs.vars);
        base.userlists = Some(&be.rules.userlists);
        // The stream's backend is the frontend itself until the routing picks another.
        base.backend = Some(&be.name);
        base.counts = Some((&*self.shared.model, &be.name));
        base.unique_id = refs.uid.as_deref();
        base.last_rule = Some(&refs.last);
        // What the frontend's `set-src`/`set-dst` gave the connection so far.
        let (src, dst) = refs.last.addrs();
        base.src = src.unwrap_or(base.src);
        base.dst = dst.unwrap_or(base.dst);
        let now = self.shared.model.now_ms();
        base.stick = self
            .shared
            .model
            .stick_view(be, self.sess.as_deref(), Some(strm), now);
        base
    }

    /// `be`'s `tcp-request content` rules in HTTP mode: on the parsed request, before its
    /// `http-request` rules (`accept` ends them); a `reject` closes without a response, logged
    /// `PR` with no status and, in the frontend, no request line (HAProxy has not recorded it
    /// yet), counted as a denied request of the frontend.
    fn content_rules(
        &self,
        tx: &mut Txn,
        be: &Proxy,
        stage: u8,
        base: &SampleCtx<'_>,
    ) -> Option<Reply> {
        if be.rules.tcp_content.is_empty() {
            return None;
        }
        let ctx = SampleCtx {
            req: Some(&tx.req),
            ..*base
        };
        let verdict = rules::apply_tcp_rules(&be.rules.tcp_content, &ctx);
        if verdict != Some(crate::config::model::TcpRequestAction::Reject) {
            return None;
        }
        Counters::add(&self.fe.fe_counters.denied_req, 1);
        if stage == 0 {
            tx.log.request_line = Some("<BADREQ>".into());
        }
        Some(Reply {
            status: 0,
            page: None,
            term: *b"PR",
            keep: false,
        })
    }

    /// `be`'s `http-request` rules (`stage` 0: as the frontend, 1: as the backend); Some when
    /// they, or an applet they lead to, answer the request.
    fn request_rules(
        &self,
        tx: &mut Txn,
        be: &Proxy,
        stage: u8,
        base: &SampleCtx<'_>,
    ) -> Option<Reply> {
        let keep = tx.keep;
        let conn = tx.conn_hdr(!keep);
        let reply = |status, mut page: errors::Page| {
            page.set_connection(conn);
            Reply {
                status,
                page: Some(page),
                term: *b"LR",
                keep,
            }
        };
        let verdict = self.request_verdict(tx, be, base);
        // HAProxy runs the persistence cookie on a deny or tarpit too, for the log's flags.
        if matches!(verdict, Verdict::Deny(_) | Verdict::Tarpit(_)) {
            super::persist::capture_request(tx, &self.fe);
            super::persist::request(tx, be);
        }
        match verdict {
            Verdict::Continue => self.stats_applet(tx, be, base),
            Verdict::Prometheus => Some(self.prometheus_applet(tx)),
            Verdict::Deny(st) => Some(self.deny(tx, be, stage, st)),
            Verdict::Invalid => Some(self.invalid(tx)),
            Verdict::SilentDrop => Some(self.silent_drop()),
            // Held in `answer`, then logged `PT`.
            Verdict::Tarpit(st) => Some(Reply {
                term: *b"PT",
                ..self.deny(tx, be, stage, st)
            }),
            Verdict::Reject => Some(self.reject(be, stage)),
            Verdict::Auth(realm) => {
                let realm = realm.unwrap_or_else(|| be.name.clone());
                Some(reply(401, errors::auth_page(&realm, false)))
            }
            Verdict::Redirect { code, location } => {
                Some(reply(code, errors::redirect_page(code, &location, false)))
            }
            Verdict::Service {
                name,
                status,
                bytes,
                close,
            } => Some(self.lua_service(tx, &name, (status, bytes, close))),
            // A Lua action's `txn:done([reply])`: its reply, or a close without any.
            Verdict::Reply { status, bytes } => match errors::Page::parse(&bytes) {
                Some(page) => Some(reply(status, page)),
                None => Some(Reply {
                    status,
                    page: None,
                    term: *b"LR",
                    keep: false,
                }),
            },
            Verdict::Return {
                status,
                content_type,
                body,
                headers,
            } => {
                let body = body.unwrap_or_default();
                let ct = content_type.as_deref();
                let page = errors::return_page(status, ct, body.as_bytes(), &headers, false);
                Some(reply(status, page))
            }
        }
    }

    /// What `be`'s `http-request` rules decide. HAProxy checks `stats uri` once the proxy's
    /// rules let the request through, then the `stats http-request` rules (a realm-less `auth`
    /// asks for the page's realm).
    fn request_verdict(&self, tx: &mut Txn, be: &Proxy, base: &SampleCtx<'_>) -> Verdict {
        let verdict = rules::apply_http_request(&be.rules.http_request, &mut tx.req, base);
        if !matches!(verdict, Verdict::Continue) || !crate::http::stats::guarded(be, &tx.req) {
            return verdict;
        }
        let verdict =
            match rules::apply_http_request(&be.rules.stats_http_request, &mut tx.req, base) {
                Verdict::Auth(None) => Verdict::Auth(Some("HAProxy Statistics".into())),
                v => v,
            };
        if !matches!(verdict, Verdict::Continue) {
            let denied = matches!(verdict, Verdict::Deny(_));
            crate::http::stats::refused(&mut tx.log, &self.fe, denied);
        }
        verdict
    }

    /// `http-request reject`: counted as a denied request; nothing is sent (status 0: none
    /// logged), the connection is reset.
    fn reject(&self, be: &Proxy, stage: u8) -> Reply {
        Counters::add(&self.fe.fe_counters.denied_req, 1);
        if stage == 1 {
            Counters::add(&be.counters.denied_req, 1);
        }
        Reply {
            status: 0,
            page: None,
            term: *b"PR",
            keep: false,
        }
    }

    /// `http-request deny`: counted, answered with the page of the proxy that has the request.
    fn deny(&self, tx: &Txn, be: &Proxy, stage: u8, status: u16) -> Reply {
        let fe = &self.fe;
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
        let (page, close) = errors::reply_page_for(pages, status, tx.conn_hdr(!tx.keep));
        Reply {
            status,
            page,
            term: *b"PR",
            keep: tx.keep && !close,
        }
    }

    /// A request a rule found invalid (`normalize-uri … strict`): 400, counted as a bad request,
    /// and the connection closes (HAProxy's `return_bad_req`).
    fn invalid(&self, tx: &Txn) -> Reply {
        Counters::add(&self.fe.fe_counters.errors_req, 1);
        let (page, _) = errors::reply_page_for(&[&self.fe.cfg.extra], 400, tx.conn_hdr(true));
        Reply {
            status: 400,
            page,
            term: *b"PR",
            keep: false,
        }
    }

    /// `silent-drop`: the client socket is drained and made quiet (`stream::silence`) before the
    /// close that follows, which then tells the client nothing; logged `-1 PR--`,
    /// counted in `dreq`. Behind TLS or h2 the socket is out of reach: the close resets it.
    fn silent_drop(&self) -> Reply {
        use std::os::fd::AsRawFd;
        Counters::add(&self.fe.fe_counters.denied_req, 1);
        let fd = match self.client.splice_fd() {
            Some(crate::engine::io::SpliceFd::Tokio(s)) => Some(s.as_raw_fd()),
            Some(crate::engine::io::SpliceFd::Uring(fd)) => Some(fd),
            None => None,
        };
        if let Some(fd) = fd {
            crate::stream::silence(fd);
        }
        Reply {
            status: 0,
            page: None,
            term: *b"PR",
            keep: false,
        }
    }

    /// `tarpit`: the request is held `timeout tarpit` (else `timeout connect`) of the proxy that
    /// has it, logged as its `Tw` (HAProxy logs no request time then).
    async fn tarpit(&self, tx: &mut Txn) {
        let px = self
            .logged_backend(&tx.log)
            .unwrap_or_else(|| Arc::clone(&self.fe));
        let t = px.cfg.timeouts.tarpit.or(px.cfg.timeouts.connect);
        let held = clock::now();
        if let Some(t) = t {
            tokio::time::sleep(t).await;
        }
        tx.log.queue = Some(clock::since(held));
        tx.log.request = None;
    }

    /// Sends what the analysis answered, dropping a wholly received body if the connection stays.
    async fn answer(&mut self, mut tx: Txn, mut r: Reply, strm: &StkCtrs) -> bool {
        if r.term == *b"PT" {
            self.tarpit(&mut tx).await;
        }
        if r.keep
            && let Some(n) = tx.body_here
        {
            self.cbuf.drain(..n.min(self.cbuf.len()));
        }
        if tx.req.method == "HEAD"
            && let Some(p) = &mut r.page
        {
            p.head_only();
        }
        // Of the local answers, HAProxy counts a deny's status only (`http_err_*`).
        crate::stick::count_end(
            [self.sess.as_deref(), Some(strm)],
            (r.term == *b"PR").then_some(r.status),
            tx.log.bytes_in,
            r.page.as_ref().map_or(0, crate::log::htx::page_size),
            || self.shared.model.now_ms(),
        );
        self.local_reply(tx.log, r, tx.start).await
    }

    /// The request leaves for `be`: its last edits, the backend's counters and the exchange with
    /// a server (Ok: whether the connection stays), unless its body, awaited for the backend's
    /// `http-buffer-request`, gets a local answer (Err).
    async fn forward(&mut self, tx: &mut Txn, be: &Arc<Proxy>) -> Result<bool, Reply> {
        tx.log.backend = Some(be.name.clone());
        if let (Some(h), Some(id)) = (&self.fe.cfg.unique_id_header, &tx.log.unique_id) {
            tx.req.headers.append(h.clone(), id.clone());
        }
        if !Arc::ptr_eq(be, &self.fe) && !self.fe.cfg.options.http_buffer_request {
            self.buffer_request(be, tx).await?;
        }
        super::persist::capture_request(tx, &self.fe);
        super::persist::request(tx, be);
        self.prepare_request(&mut tx.req, be);
        tx.comp = self.comp_request(be, &mut tx.req);
        let mut head_bytes = Vec::with_capacity(1024);
        h1::write_request_head(&tx.req, &mut head_bytes);
        let n = be.beconn.fetch_add(1, Ordering::Relaxed) + 1;
        be.counters.smax.update(n);
        be.counters.session(self.shared.model.now_ms());
        Counters::add(&be.counters.req_tot, 1);
        Ok(self.exchange(be, tx, head_bytes).await)
    }

    /// The end of a forwarded transaction: its counters and its end-of-stream record.
    fn forwarded(&self, tx: &mut Txn, be: &Proxy, strm: &StkCtrs) {
        tx.log.total = clock::since(tx.start);
        let l = &tx.log;
        crate::stick::count_end(
            [self.sess.as_deref(), Some(strm)],
            l.status,
            l.bytes_in,
            l.bytes_out,
            || self.shared.model.now_ms(),
        );
        // The server's slot is released already (`exchange_on`): the backend's goes here. The
        // record is ended where it is (moved, it was copied twice more).
        let held = Held {
            be: Some(be),
            srv: None,
            count_bytes: true,
            times: None,
        };
        finish_record(&self.shared, &self.fe, &mut tx.log, held);
    }

    /// Header edits every forwarded request gets: hop-by-hop removal, `option forwardfor`.
    fn prepare_request(&self, req: &mut RequestHead, be: &Proxy) {
        h1::remove_hop_by_hop(&mut req.headers);
        let ff = self
            .fe
            .cfg
            .options
            .forwardfor
            .as_ref()
            .or(be.cfg.options.forwardfor.as_ref());
        if let (Some(ff), Some(peer)) = (ff, self.facts.peer) {
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
