//! `option http-buffer-request` (HAProxy's `AN_REQ_HTTP_BODY`): the request body is awaited —
//! whole, or as much as a buffer holds — before the analysis goes on, so that rules and the
//! server see it at once. Bounded by `timeout http-request` from the request's start: past it,
//! 408 (`cR`, the request phase), as HAProxy 2.6.

use std::sync::Arc;

use super::{BODY_BUF, Front, Reply, Session, Txn, Upstream};
use crate::config::model::Balance;
use crate::http::errors::{self, ConnHeader};
use crate::http::h1::{BodyDecoder, BodyFraming, Payload};
use crate::model::{Counters, Proxy};

/// The most body bytes awaited: HAProxy's buffer (`tune.bufsize`) less its rewrite reserve
/// (`tune.maxrewrite`).
const BUFFERED_MAX: usize = 16384 - 1024;

impl<F: Front, U: Upstream> Session<F, U> {
    /// Awaits the body when `px` asks for it (`option http-buffer-request`, or a POST to a
    /// `balance url_param` backend, which may hash a parameter of the body, as HAProxy's
    /// `http_process_request` asks); Err: the reply when the wait timed out.
    pub(super) async fn buffer_request(&mut self, px: &Arc<Proxy>, tx: &Txn) -> Result<(), Reply> {
        let post_param = tx.req.method == "POST"
            && matches!(px.cfg.balance, Balance::UrlParam { .. })
            && px.cfg.cap.backend;
        if !(px.cfg.options.http_buffer_request || post_param) || tx.framing.bodyless() {
            return Ok(());
        }
        let t = self.fe.cfg.timeouts;
        let deadline = t.http_request.map(|d| tx.start + d);
        while !self.body_buffered(tx.framing) {
            if self.cbuf.capacity() < BODY_BUF {
                self.cbuf.reserve(BODY_BUF - self.cbuf.len());
            }
            match self.read_client(deadline, t.client).await {
                Ok(0) => break,
                Ok(_) => {}
                // The client aborted (an h2 stream reset, e.g. for a body longer than its
                // content-length): nothing goes to a server, as HAProxy's `return_cli_abort`.
                Err(Some(_)) => return Err(self.client_aborted(px)),
                Err(None) => return Err(self.body_timed_out(px)),
            }
        }
        Ok(())
    }

    /// The payload of the body's bytes already read (those [`Session::buffer_request`]
    /// awaited), at most a buffer's worth: what `balance url_param` reads in a POST.
    pub(super) fn buffered_payload(&self, framing: BodyFraming) -> Vec<u8> {
        let cbuf = &self.cbuf[..self.cbuf.len().min(BUFFERED_MAX)];
        match framing {
            _ if self.client.payload() => cbuf.to_vec(),
            BodyFraming::Length(n) => cbuf[..cbuf.len().min(n as usize)].to_vec(),
            BodyFraming::Chunked => {
                let mut ranges = Payload::new();
                let _ = BodyDecoder::new(framing).advance_payload(cbuf, &mut ranges);
                ranges
                    .iter()
                    .flat_map(|r| cbuf.get(r.clone()).unwrap_or_default())
                    .copied()
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    /// The body is all here, or a buffer's worth of it.
    fn body_buffered(&self, framing: BodyFraming) -> bool {
        if self.cbuf.len() >= BUFFERED_MAX {
            return true;
        }
        // An HTTP/2 body of unknown length ends with its stream (a read of 0).
        if framing == BodyFraming::Chunked && self.client.payload() {
            return false;
        }
        BodyDecoder::new(framing)
            .advance(&self.cbuf)
            .map_or(true, |p| p.done)
    }

    /// The client went away while its body was awaited: 400 (if it can still be told), `CR`,
    /// counted as a client abort (HAProxy 2.6's `http_wait_for_request_body`).
    fn client_aborted(&self, px: &Proxy) -> Reply {
        Counters::add(&self.fe.fe_counters.cli_aborts, 1);
        let pages = [&px.cfg.extra, &self.fe.cfg.extra];
        let (page, _) = errors::reply_page_for(&pages, 400, ConnHeader::Close);
        Reply {
            status: 400,
            page,
            term: *b"CR",
            keep: false,
        }
    }

    /// No whole body in time: 408, `cR`, counted as a bad request.
    fn body_timed_out(&self, px: &Proxy) -> Reply {
        Counters::add(&self.fe.fe_counters.errors_req, 1);
        let pages = [&px.cfg.extra, &self.fe.cfg.extra];
        let (page, _) = errors::reply_page_for(&pages, 408, ConnHeader::Close);
        Reply {
            status: 408,
            page,
            term: *b"cR",
            keep: false,
        }
    }
}
