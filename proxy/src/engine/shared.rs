//! What every worker of a process shares: the runtime model, the log, the TLS settings, the
//! stop signal and the count of live sessions.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};

use tokio::sync::watch;

use super::io::Backend as IoBackend;
use crate::model::Model;

/// What every worker shares.
pub struct Shared {
    pub model: Arc<Model>,
    pub io: IoBackend,
    pub stopping: AtomicBool,
    /// Sessions alive across all workers (soft stop waits for 0).
    pub sessions: AtomicUsize,
    pub stop_tx: watch::Sender<bool>,
    pub log: crate::log::Logger,
    /// TLS settings of each `bind … ssl` line: `[proxy index][bind index]`.
    pub tls: Vec<Vec<Option<Arc<rustls::ServerConfig>>>>,
    /// The certificates behind `tls`, replaceable through the admin socket.
    pub certs: Arc<crate::tls::CertStore>,
    /// The listening sockets `_getsocks` hands over to a new process.
    pub handover: super::handover::Registry,
}
