//! `tcp-response content` rules in `mode http` (HAProxy's `AN_RES_INSPECT`): the backend's rules
//! run on the server's response once its head is here, before the `http-response` rules.
//!
//! HAProxy evaluates them on its HTX buffer and, when a rule still needs data, waits for the
//! whole message (or `tcp-response inspect-delay`); portcullis streams bodies, so it evaluates
//! them once, as final, on the head and the body bytes that came with it (`res.len` counts
//! those; `res.payload` reads nothing in HTTP mode, as in HAProxy). `close` lets the response
//! through and ends the server connection after it.

use super::exchange::Leg;
use super::{Front, Session, Txn, Upstream};
use crate::ana::rules;
use crate::config::model::TcpRequestAction;
use crate::engine::conn::Duplex;
use crate::http::h1::{BodyDecoder, BodyFraming};
use crate::http::head::ResponseHead;
use crate::log::htx::BodySize;
use crate::model::{Counters, Proxy};

impl<F: Front, U: Upstream> Session<F, U> {
    /// Runs the backend's `tcp-response content` rules on a response head and the body bytes
    /// read with it: Some(whether the server connection may stay: `close` ends it after this
    /// response), or None when one rejected the response. The server connection is then
    /// dropped and the client's closed without an answer, logged `PD` with no status nor
    /// response time, and counted as a denied response (HAProxy's `tcp_inspect_response`).
    pub(super) fn tcp_response_rules(
        &self,
        leg: &Leg<'_, U::Conn>,
        head: &ResponseHead,
        (body, framing): (&[u8], BodyFraming),
        tx: &mut Txn,
    ) -> Option<bool> {
        let be: &Proxy = leg.be;
        if be.rules.tcp_response.is_empty() {
            return Some(true);
        }
        let body = match BodyDecoder::new(framing).advance(body) {
            Ok(p) => body.get(..p.consumed).unwrap_or_default(),
            Err(_) => &[],
        };
        let verdict = {
            let mut ctx = self.sample_base();
            ctx.backend = Some(&be.name);
            ctx.server = Some(&leg.srv.name);
            ctx.captures = tx.log.captures.as_deref();
            ctx.vars = tx.log.vars.as_deref();
            ctx.unique_id = tx.log.unique_id.as_deref();
            ctx.counts = Some((&*self.shared.model, &be.name));
            ctx.last_rule = Some(&tx.log.last_rule);
            ctx.res = Some(head);
            ctx.stick = self.shared.model.stick_view(
                be,
                self.sess.as_deref(),
                None,
                self.shared.model.now_ms(),
            );
            // `res.len` reads the head as HAProxy stores it plus the body bytes here.
            let len = crate::log::htx::head_size(head) as usize + body.len();
            ctx.res_len = Some(len);
            rules::apply_tcp_rules(&be.rules.tcp_response, &ctx)
        };
        match verdict {
            Some(TcpRequestAction::Reject) => {}
            Some(TcpRequestAction::Close) => return Some(false),
            _ => return Some(true),
        }
        leg.server.abort(true);
        let log = &mut tx.log;
        log.term = *b"PD";
        log.status = None;
        log.response = None;
        // HAProxy had received the body bytes that came with the head.
        log.bytes_out += BodySize::new(framing == BodyFraming::Chunked).feed(body);
        Counters::add(&self.fe.fe_counters.denied_resp, 1);
        Counters::add(&be.counters.denied_resp, 1);
        Counters::add(&leg.srv.counters.denied_resp, 1);
        None
    }
}
