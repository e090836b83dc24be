//! The end of a stream: the record every exit of a `mode tcp` session or an HTTP transaction
//! fills, and the one [`finish`] that releases what the stream still holds, adds its counters and
//! writes its log line — in HAProxy's order: the backend and server slots are released before the
//! line, which then shows `beconn`/`srvconn` without this stream.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::engine::Shared;
use crate::log::SessionLog;
use crate::model::{Proxy, Server, stats};

/// The end-of-stream record: the log record (status, termination codes, bytes, timers, server,
/// retries, redispatch) and what the stream still holds when it ends.
pub struct End {
    pub log: SessionLog,
    /// The backend whose `beconn` slot the stream holds.
    pub be: Option<Arc<Proxy>>,
    /// The server whose connection slot the stream holds (always one of `be`'s).
    pub srv: Option<Arc<Server>>,
    /// Add the record's bytes to the frontend's counters and to the held backend's and
    /// server's (a locally answered request counts its own, before its reply is sent).
    pub count_bytes: bool,
    /// The stream's time sample (HAProxy's `stream_update_time_stats`) for the held backend and
    /// server, and whether it is an HTTP one.
    pub times: Option<(bool, stats::Sample)>,
}

impl End {
    /// A stream that holds nothing and counts nothing more: only its log line is left.
    pub fn log_only(log: SessionLog) -> End {
        End {
            log,
            be: None,
            srv: None,
            count_bytes: false,
            times: None,
        }
    }

    /// A stream holding a slot of backend `be`.
    pub fn on(log: SessionLog, be: &Arc<Proxy>) -> End {
        End {
            be: Some(Arc::clone(be)),
            ..End::log_only(log)
        }
    }
}

/// Releases the stream's slots, adds its counters and writes its one log line (nothing when the
/// frontend does not log). Every stream ends here exactly once.
pub fn finish(shared: &Shared, fe: &Proxy, end: End) {
    let End {
        mut log,
        be,
        srv,
        count_bytes,
        times,
    } = end;
    let (be, srv) = (be.as_deref(), srv.as_deref());
    if count_bytes {
        fe.fe_counters.bytes(log.bytes_in, log.bytes_out);
        for c in be
            .map(|b| &b.counters)
            .into_iter()
            .chain(srv.map(|s| &s.counters))
        {
            c.bytes(log.bytes_in, log.bytes_out);
        }
    }
    if let Some((http, t)) = times {
        for c in be
            .map(|b| &b.counters)
            .into_iter()
            .chain(srv.map(|s| &s.counters))
        {
            c.times(http, t);
        }
    }
    if let (Some(be), Some(srv)) = (be, srv) {
        crate::backend::release(be, srv);
    }
    if let Some(be) = be {
        be.beconn.fetch_sub(1, Ordering::Relaxed);
        log.beconn = be.beconn.load(Ordering::Relaxed);
    }
    if let Some(srv) = srv {
        log.srvconn = srv.cur_conns.load(Ordering::Relaxed);
    }
    shared.log.session(fe, &log);
}
