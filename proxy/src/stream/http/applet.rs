//! The applets a transaction may end in instead of a server: the statistics page (`stats uri`,
//! its admin form) and the Prometheus exporter. The pages themselves are built by
//! `http::stats`; this is the stream's side: when they answer, the form they read, and how they
//! are logged.

use std::sync::atomic::Ordering;
use std::time::Duration;

use portcullis_runtime_api::html::StatStatus;

use super::{Front, Reply, STATS_POST_MAX, Session, Txn, Upstream};
use crate::ana::sample::SampleCtx;
use crate::http::h1::BodyFraming;
use crate::http::stats;
use crate::log::SessionLog;
use crate::model::{Counters, Proxy};

impl<F: Front, U: Upstream> Session<F, U> {
    /// A stats page POST carries its form in a small body: have it all before the rules run
    /// (only where a `stats admin` could use it).
    pub(super) async fn read_stats_form(&mut self, tx: &Txn) {
        if tx.req.method == "POST"
            && let BodyFraming::Length(n) = tx.framing
            && n <= STATS_POST_MAX as u64
            && self.shared.model.stats_admin
        {
            let t = self.fe.cfg.timeouts;
            let dl = t.http_request.map(|d| tx.start + d);
            while (self.cbuf.len() as u64) < n {
                match self.read_client(dl, t.client).await {
                    Ok(m) if m > 0 => {}
                    _ => break,
                }
            }
        }
    }

    /// The statistics page, when `be` serves it at the request's URI.
    pub(super) fn stats_applet(
        &self,
        tx: &mut Txn,
        be: &Proxy,
        base: &SampleCtx<'_>,
    ) -> Option<Reply> {
        let page = be
            .cfg
            .stats
            .as_ref()
            .filter(|p| stats::matches(p, &tx.req))?;
        let ctx = SampleCtx {
            req: Some(&tx.req),
            ..*base
        };
        let admin = be.rules.stats_admin.as_ref().is_some_and(|c| c.eval(&ctx));
        let stopping = self.shared.stopping.load(Ordering::Relaxed);
        let conn = tx.conn_hdr(!tx.keep);
        let a = if tx.req.method == "POST" {
            let body = self.stats_form(tx);
            stats::stats_post_reply(&self.shared, page, &tx.req, admin, body, conn)
        } else {
            stats::stats_reply(&self.shared.model, stopping, page, &tx.req, admin, conn)
        };
        Some(applet_reply(&mut tx.log, &self.fe, a, tx.keep))
    }

    /// The admin form of a stats page POST, or why it cannot be read.
    fn stats_form(&self, tx: &Txn) -> Result<&[u8], StatStatus> {
        match (tx.framing, tx.body_here) {
            (BodyFraming::None, _) => Ok(&[][..]),
            (BodyFraming::Length(n), Some(_)) if n <= STATS_POST_MAX as u64 => {
                Ok(self.cbuf.get(..n as usize).unwrap_or(&[]))
            }
            (BodyFraming::Length(_), _) => Err(StatStatus::Excd),
            _ => Err(StatStatus::Ival),
        }
    }

    /// `http-request use-service prometheus-exporter`.
    /// `use-service lua.<name>`: the service's answer, logged as HAProxy logs applets (with
    /// `<lua.name>` as the server).
    pub(super) fn lua_service(
        &self,
        tx: &mut Txn,
        name: &str,
        (status, bytes, close): (u16, Vec<u8>, bool),
    ) -> Reply {
        let keep = tx.keep && !close;
        // A Lua service writes HTTP/1 text; its page is read from it.
        let page = crate::http::errors::Page::parse(&bytes).map(|mut p| {
            // A body ended by the close (HTTP/1.0): no `connection` header, as HAProxy.
            if !close {
                p.set_connection(tx.conn_hdr(!keep));
            }
            p
        });
        let mut r = applet_log(&mut tx.log, &self.fe, (status, status, ""), true);
        r.page = page;
        r.keep = keep;
        tx.log.server = Some(format!("<lua.{name}>"));
        r
    }

    pub(super) fn prometheus_applet(&self, tx: &mut Txn) -> Reply {
        let stopping = self.shared.stopping.load(Ordering::Relaxed);
        let a = stats::prometheus_reply(&self.shared.model, stopping, tx.conn_hdr(!tx.keep));
        applet_reply(&mut tx.log, &self.fe, a, tx.keep)
    }
}

/// Log fields and counters of an applet answer (stats page, exporter): `<STATS>`/`<PROMEX>` as
/// the server, Tw/Tc/Tr at 0 (Tr -1 for the auth challenge), `LR`, one intercepted request.
fn applet_reply(log: &mut SessionLog, fe: &Proxy, a: stats::Applet, keep: bool) -> Reply {
    let mut r = applet_log(log, fe, (a.status, a.log_status, a.server), a.served);
    r.page = Some(a.page);
    r.keep = keep;
    r
}

/// [`applet_reply`]'s log fields and counters, for `(status sent, status logged, server)`; the
/// reply has no page yet.
fn applet_log(
    log: &mut SessionLog,
    fe: &Proxy,
    (status, log_status, server): (u16, u16, &str),
    served: bool,
) -> Reply {
    log.server = Some(server.to_string());
    log.queue = Some(Duration::ZERO);
    log.connect = Some(Duration::ZERO);
    log.response = served.then_some(Duration::ZERO);
    log.status = Some(log_status);
    Counters::add(&fe.fe_counters.intercepted, 1);
    Reply {
        status,
        page: None,
        term: *b"LR",
        keep: false,
    }
}
