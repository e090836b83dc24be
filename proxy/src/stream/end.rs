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
pub fn finish(shared: &Shared, fe: &Proxy, mut end: End) {
    // Taken apart in place: moving the log record out copied it (≈ 1 KiB) per request.
    let End {
        log,
        be,
        srv,
        count_bytes,
        times,
    } = &mut end;
    let held = Held {
        be: be.as_deref(),
        srv: srv.as_deref(),
        count_bytes: *count_bytes,
        times: *times,
    };
    finish_record(shared, fe, log, held);
}

/// What an [`End`] holds beside its record, borrowed.
pub struct Held<'a> {
    pub be: Option<&'a Proxy>,
    pub srv: Option<&'a Server>,
    pub count_bytes: bool,
    pub times: Option<(bool, stats::Sample)>,
}

/// [`finish`] for a record left where it is (a forwarded transaction's, in its `Txn`): the
/// same end, without moving the record into an [`End`] first.
pub fn finish_record(shared: &Shared, fe: &Proxy, log: &mut SessionLog, held: Held<'_>) {
    let Held {
        be,
        srv,
        count_bytes,
        times,
    } = held;
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
    log.term = crate::model::sessions::killed_term(log.term);
    #[cfg(test)]
    tap::push(log);
    shared.log.session(fe, log);
}

/// The records `finish` logged on this thread, for the stream layer's unit tests.
#[cfg(test)]
pub mod tap {
    use std::cell::RefCell;

    use crate::log::SessionLog;

    thread_local! {
        static ENDS: RefCell<Vec<SessionLog>> = const { RefCell::new(Vec::new()) };
    }

    pub fn push(log: &SessionLog) {
        ENDS.with(|e| e.borrow_mut().push(log.clone()));
    }

    /// The records logged since the last call.
    pub fn take() -> Vec<SessionLog> {
        ENDS.with(|e| std::mem::take(&mut *e.borrow_mut()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize};
    use std::time::Duration;

    /// A process' shared state from `cfg`, whose frontend logs to `log` (a UDP socket here).
    fn shared(log: std::net::SocketAddr) -> Shared {
        let text = format!(
            "global\n    log {log} local0\ndefaults\n    mode tcp\n    log global\n    \
             option tcplog\n    timeout connect 1s\n    timeout client 1s\n    timeout server 1s\n\
             frontend fe\n    bind 127.0.0.1:1\n    default_backend be\n\
             backend be\n    server s1 127.0.0.1:9\n"
        );
        let cfg = crate::config::parse_str("t.cfg", &text, &|_| None)
            .expect("config")
            .config;
        let logger = crate::log::Logger::new(&cfg).expect("logger");
        let model = Arc::new(crate::model::Model::build(cfg, None).expect("model"));
        Shared {
            model,
            io: crate::engine::io::Backend::Epoll,
            stopping: AtomicBool::new(false),
            sessions: AtomicUsize::new(0),
            stop_tx: tokio::sync::watch::channel(false).0,
            log: logger,
            tls: Vec::new(),
            certs: Arc::new(crate::tls::CertStore::new()),
            handover: crate::engine::handover::Registry::new(Vec::new()),
        }
    }

    fn recv_line(sock: &std::net::UdpSocket) -> String {
        let mut buf = [0u8; 2048];
        let n = sock.recv(&mut buf).expect("a log line within the timeout");
        String::from_utf8_lossy(&buf[..n]).into_owned()
    }

    #[test]
    fn finish_releases_the_slots_then_counts_and_logs_once() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let sh = shared(sock.local_addr().unwrap());
        let fe = Arc::clone(sh.model.proxy("fe").unwrap());
        let be = Arc::clone(sh.model.proxy("be").unwrap());
        let srv = Arc::clone(&be.pool().servers[0]);
        // Another stream holds a slot of each: the line shows that one, not this stream's.
        be.beconn.fetch_add(2, Ordering::Relaxed);
        srv.cur_conns.fetch_add(2, Ordering::Relaxed);
        let mut log = SessionLog::new(&fe, None, None, std::time::SystemTime::now());
        log.backend = Some("be".into());
        log.server = Some("s1".into());
        log.bytes_in = 7;
        log.bytes_out = 11;
        log.term = *b"SD";
        let end = End {
            srv: Some(Arc::clone(&srv)),
            count_bytes: true,
            ..End::on(log, &be)
        };
        finish(&sh, &fe, end);
        assert_eq!(be.beconn.load(Ordering::Relaxed), 1);
        assert_eq!(srv.cur_conns.load(Ordering::Relaxed), 1);
        for c in [&fe.fe_counters, &be.counters, &srv.counters] {
            assert_eq!(c.bytes_in.load(Ordering::Relaxed), 7);
            assert_eq!(c.bytes_out.load(Ordering::Relaxed), 11);
        }
        let line = recv_line(&sock);
        assert!(line.contains(" fe be/s1 "), "{line}");
        assert!(line.contains(" 11 SD "), "{line}");
        // actconn/feconn/beconn/srvconn/retries: the slots were released before the line.
        assert!(line.contains(" 0/0/1/1/0 "), "{line}");
    }

    #[test]
    fn a_log_only_end_touches_no_counter() {
        let sock = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let sh = shared(sock.local_addr().unwrap());
        let fe = Arc::clone(sh.model.proxy("fe").unwrap());
        let mut log = SessionLog::new(&fe, None, None, std::time::SystemTime::now());
        log.bytes_in = 3;
        log.term = *b"PR";
        finish(&sh, &fe, End::log_only(log));
        assert_eq!(fe.fe_counters.bytes_in.load(Ordering::Relaxed), 0);
        let line = recv_line(&sock);
        assert!(line.contains(" fe fe/<NOSRV> "), "{line}");
        assert!(line.contains(" PR "), "{line}");
    }
}
