//! Worker threads and the I/O backends (io_uring, epoll): each worker is one thread with its own
//! current-thread runtime and its own listening sockets; no work stealing, no locks on the hot path.

pub mod control;
pub mod idle;
pub mod io;
pub mod listen;
pub mod worker;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize};

use crate::cmdline::IoChoice;
use crate::config::model::Config;
use crate::model::Model;

/// Picks the I/O backend: forced by `--io`, else io_uring when a ring can be set up here.
pub fn choose_backend(choice: IoChoice) -> Result<io::Backend, String> {
    match choice {
        IoChoice::Epoll => Ok(io::Backend::Epoll),
        IoChoice::Uring => io::uring_available()
            .map(|_| io::Backend::Uring)
            .map_err(|e| format!("io_uring was requested (--io uring) but is unavailable: {e}")),
        IoChoice::Auto => match io::uring_available() {
            Ok(()) => Ok(io::Backend::Uring),
            Err(e) => {
                tracing::warn!("io_uring unavailable ({e}); falling back to epoll");
                Ok(io::Backend::Epoll)
            }
        },
    }
}

/// Directives parsed and validated whose feature has not landed: starting with any of them is an
/// error naming each one, never a silent ignore.
pub fn pending_features(cfg: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for (kw, loc) in &cfg.global.pending {
        out.push(format!(
            "parsing [{loc}] : '{kw}' is not supported yet by portcullis (section 'global')."
        ));
    }
    for p in &cfg.proxies {
        for (kw, loc) in &p.pending {
            out.push(format!(
                "parsing [{loc}] : '{kw}' is not supported yet by portcullis (proxy '{}').",
                p.name
            ));
        }
    }
    out
}

/// Builds the runtime model, binds every listener and runs the workers until stopped.
pub fn start(cfg: Config, io_choice: IoChoice, maxconn: Option<u32>) -> Result<(), Vec<String>> {
    let pending = pending_features(&cfg);
    if !pending.is_empty() {
        return Err(pending);
    }
    let io = choose_backend(io_choice).map_err(|e| vec![e])?;
    let threads = cfg
        .global
        .nbthread
        .map(|n| n as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1);
    let model = Arc::new(Model::build(cfg, maxconn).map_err(|ds| {
        ds.iter()
            .map(|d| match d.file.is_empty() {
                true => format!("config : {}", d.msg),
                false => format!("config : parsing [{}:{}] : {}", d.file, d.line, d.msg),
            })
            .collect::<Vec<_>>()
    })?);
    if model.cfg.global.maxconn.is_some() {
        let want = crate::admin::snapshot::maxsock(&model, model.actconn.max(), threads as u32);
        crate::admin::snapshot::raise_nofile(want);
    }
    let listeners = worker::bind_all(&model, threads).map_err(|e| vec![e])?;
    crate::kernel::init(&model.cfg);
    let admin = crate::admin::bind_all(&model.cfg.global).map_err(|e| vec![e])?;
    tracing::info!(
        "using {} engine with {} worker thread(s)",
        io.name(),
        threads
    );
    let (stop_tx, _) = tokio::sync::watch::channel(false);
    let log = crate::log::Logger::new(&model.cfg).map_err(|e| vec![e])?;
    let shared = Arc::new(worker::Shared {
        log,
        model,
        io,
        stopping: AtomicBool::new(false),
        sessions: AtomicUsize::new(0),
        stop_tx,
    });
    worker::block_stop_signals();
    control::spawn(Arc::clone(&shared), admin, threads)
        .map_err(|e| vec![format!("cannot start the control thread: {e}")])?;
    worker::run(shared, listeners).map_err(|e| vec![e])
}
