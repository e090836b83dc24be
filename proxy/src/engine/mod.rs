//! The transport: worker threads and the I/O backends (io_uring, epoll), connections (`conn`),
//! listeners, timers, per-worker pools, handover. Each worker is one thread with its own
//! current-thread runtime and its own listening sockets; no work stealing, no locks on the hot
//! path. What runs on an accepted connection is the [`Service`] given to [`start`]: nothing here
//! names a session type.

pub mod boxpool;
pub mod conn;
pub mod control;
pub mod handover;
pub mod idle;
pub mod io;
pub mod listen;
pub mod pollio;
pub mod pool;
pub mod readiness;
pub mod service;
pub mod shared;
pub mod state;
pub mod worker;

pub use service::Service;
pub use shared::Shared;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

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
        // `peers` sections report theirs here too (`peers ssl`, `peers bind crt`).
        let section = if kw.starts_with("peers ") {
            "a 'peers' section"
        } else {
            "section 'global'"
        };
        out.push(format!(
            "parsing [{loc}] : '{kw}' is not supported yet by portcullis ({section})."
        ));
    }
    for p in &cfg.proxies {
        // `tcp-request connection` runs at accept in every mode, `session` once the connection is
        // established; inspection (`inspect-delay`,
        // `content`) in frontends and backends of both modes (`mode http`: on the parsed
        // request, before the `http-request` rules).
        let done = |kw: &str| {
            matches!(
                kw,
                "tcp-request connection"
                    | "tcp-request session"
                    | "tcp-request inspect-delay"
                    | "tcp-request content"
            )
        };
        for (kw, loc) in p.pending.iter().filter(|(kw, _)| !done(kw)) {
            out.push(format!(
                "parsing [{loc}] : '{kw}' is not supported yet by portcullis (proxy '{}').",
                p.name
            ));
        }
    }
    out
}

/// Builds the runtime model, binds every listener and runs the workers until stopped.
pub fn start<S: Service>(
    cfg: Config,
    io_choice: IoChoice,
    maxconn: Option<u32>,
    service: Arc<S>,
) -> Result<(), Vec<String>> {
    start_with(cfg, io_choice, maxconn, &Reload::default(), service)
}

/// A reload from the command line: `-x <old admin socket>`, `-sf <pid>…`, `-st <pid>…`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reload {
    /// Fetch the listening sockets from the process behind this admin socket.
    pub old_socket: Option<std::path::PathBuf>,
    /// Sent SIGUSR1 (finish, then exit) once this process accepts.
    pub finish: Vec<i32>,
    /// Sent SIGTERM (stop now) once this process accepts.
    pub terminate: Vec<i32>,
    /// A private admin socket (level admin, `expose-fd listeners`) for the master (`-W`).
    pub master_sock: Option<std::path::PathBuf>,
}

impl Reload {
    fn signal_old(&self) {
        use nix::sys::signal::{Signal, kill};
        use nix::unistd::Pid;
        let sigs = self
            .finish
            .iter()
            .map(|p| (*p, Signal::SIGUSR1))
            .chain(self.terminate.iter().map(|p| (*p, Signal::SIGTERM)));
        for (pid, sig) in sigs {
            if let Err(e) = kill(Pid::from_raw(pid), sig) {
                tracing::warn!("cannot send {sig} to old process {pid}: {e}");
            }
        }
    }
}

/// [`start`] for a reload: the old process' sockets are reused and it is told to finish once
/// this one runs. Nothing is signalled when the configuration or a bind fails: the old process
/// keeps serving.
pub fn start_with<S: Service>(
    cfg: Config,
    io_choice: IoChoice,
    maxconn: Option<u32>,
    reload: &Reload,
    service: Arc<S>,
) -> Result<(), Vec<String>> {
    let pending = pending_features(&cfg);
    if !pending.is_empty() {
        return Err(pending);
    }
    let io = choose_backend(io_choice).map_err(|e| vec![e])?;
    if let Some(w) = crate::process::apply_limits(&cfg.global) {
        tracing::warn!("{w}");
    }
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
    // `load-server-state-from-file`: before the old process' state, which is newer.
    for w in crate::model::state_file::apply(&model) {
        tracing::warn!("{w}");
    }
    if model.cfg.global.maxconn.is_some() {
        let want = crate::admin::snapshot::maxsock(&model, model.actconn.max(), threads as u32);
        let got = crate::admin::snapshot::raise_nofile(want);
        if got < want {
            let msg =
                format!("[portcullis.main()] Cannot raise FD limit to {want}, limit is {got}.");
            // `strict-limits` (HAProxy's default): refuse to start rather than run short.
            if !model.cfg.global.process.no_strict_limits {
                return Err(vec![msg]);
            }
            tracing::warn!("{msg}");
        }
    }
    let certs = Arc::new(crate::tls::CertStore::new());
    let tls = tls_configs(&model, &certs).map_err(|e| vec![e])?;
    // Loading and self-testing the eBPF programs takes a while: before anything listens.
    crate::kernel::init(&model.cfg);
    // Before the admin sockets are bound: the old one may be at the same path.
    let received = match &reload.old_socket {
        Some(path) => handover::fetch(path).map_err(|e| {
            vec![
                e,
                "Failed to get the sockets from the old process!".to_string(),
            ]
        })?,
        None => Vec::new(),
    };
    // The old process' server state, on the same socket; failing only costs the runtime changes.
    if let Some(path) = &reload.old_socket {
        match state::fetch(path) {
            Ok(st) => {
                let n = state::apply(&model, &st);
                tracing::info!("server state of {n} server(s) taken from the old process");
            }
            Err(e) => tracing::warn!("{e}"),
        }
    }
    let (listeners, exported) =
        worker::bind_all_adopting(&model, threads, received).map_err(|e| vec![e])?;
    // After the binds: a process that fails to start never takes the interfaces over.
    crate::kernel::xdp::init(&model.cfg);
    let mut admin = crate::admin::bind_all(&model.cfg.global).map_err(|e| vec![e])?;
    if let Some(p) = &reload.master_sock {
        let sock = listen::unix(&p.display().to_string(), 16, Some(0o600)).map_err(|e| {
            vec![format!(
                "Starting proxy MASTER: cannot bind UNIX socket ({e}) [{}]",
                p.display()
            )]
        })?;
        admin.push(crate::admin::AdminListener {
            sock,
            unix: true,
            level: crate::config::model::CliLevel::Admin,
            expose_fd: true,
        });
    }
    tracing::info!(
        "using {} engine with {} worker thread(s)",
        io.name(),
        threads
    );
    let (stop_tx, _) = tokio::sync::watch::channel(false);
    let log = crate::log::Logger::new(&model.cfg).map_err(|e| vec![e])?;
    // Everything privileged is open (listeners, logs, admin sockets, certificates, eBPF).
    crate::process::drop_privileges(&model.cfg.global).map_err(|e| vec![e])?;
    crate::process::release_startup_memory();
    let shared = Arc::new(Shared {
        log,
        model,
        io,
        stopping: AtomicBool::new(false),
        sessions: AtomicUsize::new(0),
        stop_tx,
        tls,
        certs,
        handover: handover::Registry::new(exported),
    });
    // Lines Lua scripts log reach the loggers of their proxy (or of `global`).
    let weak = Arc::downgrade(&shared);
    crate::lua::set_log_sink(Box::new(move |px, level, line| {
        if let Some(s) = weak.upgrade() {
            let px = px.and_then(|n| s.model.proxies.iter().find(|p| p.name == n));
            s.log
                .script(px.map(|p| &**p), &s.model.cfg.global.logs, level, line);
        }
    }));
    if admin.iter().any(|a| a.expose_fd) {
        shared.handover.exportable.store(true, Ordering::SeqCst);
    }
    worker::block_stop_signals();
    control::spawn(Arc::clone(&shared), admin, threads, Arc::clone(&service))
        .map_err(|e| vec![format!("cannot start the control thread: {e}")])?;
    let r =
        worker::run_with(shared, service, listeners, || reload.signal_old()).map_err(|e| vec![e]);
    crate::kernel::xdp::shutdown();
    r
}

/// The rustls settings of every `bind … ssl` line, `[proxy][bind]`, built once at start.
fn tls_configs(
    model: &Model,
    certs: &crate::tls::CertStore,
) -> Result<Vec<Vec<Option<Arc<rustls::ServerConfig>>>>, String> {
    let mut out = Vec::with_capacity(model.proxies.len());
    for p in &model.proxies {
        let mut binds = Vec::with_capacity(p.cfg.binds.len());
        for b in &p.cfg.binds {
            binds.push(match &b.ssl {
                None => None,
                Some(ssl) => Some(Arc::new(crate::tls::server_config_in(ssl, certs).map_err(
                    |e| e.bind_alert(&p.name, &listen::describe(&b.addr), &b.loc.to_string()),
                )?)),
            });
        }
        out.push(binds);
    }
    Ok(out)
}
