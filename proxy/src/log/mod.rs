//! Logs: HAProxy log-format expressions, httplog/tcplog, termination codes (pure, `format`),
//! and the sinks (stdout, syslog over UDP or a unix socket) fed without blocking a worker.

pub mod format;
pub mod sink;
