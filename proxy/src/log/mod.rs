//! Logs: HAProxy log-format expressions, httplog/tcplog, termination codes (pure, `format`),
//! and the sinks (stdout, syslog over UDP or a unix socket) fed without blocking a worker.

pub mod format;
pub mod sink;
pub mod session;

pub use session::SessionLog;

use crate::model::Proxy;

/// The process's access logger, shared by all workers.
#[derive(Default)]
pub struct Logger {}

impl Logger {
    pub fn new(cfg: &crate::config::model::Config) -> Logger {
        let _ = cfg;
        Logger {}
    }

    /// Emits the session's line per the frontend's log settings.
    pub fn session(&self, fe: &Proxy, rec: &SessionLog) {
        let _ = (fe, rec);
    }
}
