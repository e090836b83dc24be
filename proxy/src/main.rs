use std::process::ExitCode;

// Per-request head parsing and buffers allocate a lot of small objects; mimalloc's thread-local
// free lists cut glibc malloc's share of a worker's CPU (measured with perf on the L7 path).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args = match portcullis::cmdline::parse(&argv) {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(1);
        }
    };
    if args.version > 0 {
        println!(
            "portcullis version {} - HAProxy-compatible load balancer",
            env!("CARGO_PKG_VERSION")
        );
        if args.version > 1 {
            // The line scripts parse (`grep 'HA-*Proxy version'`): the HAProxy release whose
            // configuration language, CLI and logs this one follows.
            println!(
                "HAProxy version {} (portcullis {}) - compatible",
                portcullis::cmdline::HAPROXY_COMPAT,
                env!("CARGO_PKG_VERSION")
            );
            println!("Feature list : {}", portcullis::cmdline::FEATURES.join(" "));
            let uring = match portcullis::engine::io::uring_available() {
                Ok(()) => "available".to_string(),
                Err(e) => format!("unavailable ({e})"),
            };
            println!(
                "Build options : edition 2024, minimum rustc {}",
                env!("CARGO_PKG_RUST_VERSION")
            );
            println!("Available I/O engines : io_uring (tokio-uring) {uring}, epoll (tokio)");
            println!("HTTP : HTTP/1.1 (strict RFC 9112 codec), HTTP/2 (h2, by ALPN)");
            println!("TLS  : rustls 0.23 (ring provider)");
            println!(
                "eBPF : aya 0.14 (sockmap splice for mode tcp, XDP filter with portcullis-xdp; loaded at start when the kernel allows)"
            );
        }
        return ExitCode::SUCCESS;
    }
    if let Some(name) = &args.localpeer {
        // SAFETY: still single-threaded here; the configuration reads it as `${HAPROXY_LOCALPEER}`.
        unsafe { std::env::set_var("HAPROXY_LOCALPEER", name) };
    }
    if args.master_worker && !args.check_only {
        return master(&args);
    }
    // A worker of `-W` stops with its master, even one killed outright.
    if args.master_sock.is_some() {
        // SAFETY: prctl with integer arguments only.
        unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) };
    }
    if args.check_only {
        let rc = portcullis::config::check_command_with(&args.files, args.quiet, &validate);
        return ExitCode::from(u8::try_from(rc).unwrap_or(1));
    }
    run(args)
}

/// `-c` also compiles what the engine compiles at start: rules, ACLs and log formats.
fn validate(cfg: &portcullis::config::model::Config) -> Vec<portcullis::config::Diag> {
    let mut errs = portcullis::http::rules::compile(cfg)
        .err()
        .unwrap_or_default();
    // Certificates and TLS settings are loaded as HAProxy's -c does, errors in its words.
    for p in &cfg.proxies {
        for b in &p.binds {
            let Some(ssl) = &b.ssl else { continue };
            let addr = portcullis::engine::listen::describe(&b.addr);
            for w in portcullis::tls::bind_warnings(ssl) {
                errs.push(portcullis::config::Diag::warning(
                    &b.loc.file,
                    b.loc.line,
                    format!("'bind {addr}' in section '{}' : {w}", p.kind()),
                ));
            }
            match portcullis::tls::server_config(ssl) {
                Ok(_) => {}
                Err(portcullis::tls::TlsError::Cert(m)) => {
                    errs.push(portcullis::config::Diag::alert(
                        &b.loc.file,
                        b.loc.line,
                        format!("'bind {addr}' in section '{}' : {m}", p.kind()),
                    ))
                }
                Err(e) => errs.push(portcullis::config::Diag::global(
                    portcullis::config::Severity::Alert,
                    e.bind_alert(&p.name, &addr, &format!("{}:{}", b.loc.file, b.loc.line)),
                )),
            }
        }
    }
    if let Err(e) = portcullis::log::Logger::formats_ok(cfg) {
        errs.push(portcullis::config::Diag::global(
            portcullis::config::Severity::Alert,
            e,
        ));
    }
    errs
}

/// `-W`: the master process (daemonized with `-D`, its pid in the pidfile).
fn master(args: &portcullis::cmdline::Args) -> ExitCode {
    if args.daemon
        && !args.foreground
        && let Err(e) = nix::unistd::daemon(true, true)
    {
        alert(&format!("cannot daemonize: {e}"));
        return ExitCode::from(1);
    }
    if let Some(p) = &args.pidfile
        && let Err(e) = std::fs::write(p, format!("{}\n", std::process::id()))
    {
        alert(&format!("cannot create pidfile {}: {e}", p.display()));
        return ExitCode::from(1);
    }
    let rc = portcullis::master::run(args);
    if let Some(p) = &args.pidfile {
        let _ = std::fs::remove_file(p);
    }
    ExitCode::from(rc)
}

fn alert(msg: &str) {
    eprintln!("[ALERT]    ({}) : {msg}", std::process::id());
}

fn run(args: portcullis::cmdline::Args) -> ExitCode {
    if args.files.is_empty() {
        alert("No configuration file specified (use -f).");
        return ExitCode::from(1);
    }
    let env = |k: &str| std::env::var(k).ok();
    let loaded = match portcullis::config::load(&args.files, &env) {
        Ok(l) => l,
        Err(diags) => {
            eprint!(
                "{}",
                portcullis::config::diag::render_failure(&diags, std::process::id())
            );
            return ExitCode::from(1);
        }
    };
    for w in &loaded.warnings {
        eprint!("{}", w.render(std::process::id()));
    }
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("PORTCULLIS_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_target(false)
        .init();
    let cfg = loaded.config;
    if (args.daemon || cfg.global.daemon) && !args.foreground {
        // Before any thread exists: fork is only safe in a single-threaded process.
        if let Err(e) = nix::unistd::daemon(true, false) {
            alert(&format!("cannot daemonize: {e}"));
            return ExitCode::from(1);
        }
    }
    let pidfile = args
        .pidfile
        .clone()
        .or_else(|| cfg.global.pidfile.clone().map(Into::into));
    if let Some(p) = &pidfile
        && let Err(e) = std::fs::write(p, format!("{}\n", std::process::id()))
    {
        alert(&format!("cannot create pidfile {}: {e}", p.display()));
        return ExitCode::from(1);
    }
    let reload = portcullis::engine::Reload {
        old_socket: args.old_socket.clone(),
        finish: args.finish_pids.clone(),
        terminate: args.terminate_pids.clone(),
        master_sock: args.master_sock.clone(),
    };
    // The engine runs the stream layer on what it accepts.
    let streams = std::sync::Arc::new(portcullis::stream::Streams);
    let res = portcullis::engine::start_with(cfg, args.io, args.maxconn, &reload, streams);
    // After a reload the file holds the new process' pid: only our own is removed.
    if let Some(p) = &pidfile
        && std::fs::read_to_string(p).is_ok_and(|s| s.trim() == std::process::id().to_string())
    {
        let _ = std::fs::remove_file(p);
    }
    match res {
        Ok(()) => ExitCode::SUCCESS,
        Err(errs) => {
            for e in errs {
                alert(&e);
            }
            ExitCode::from(1)
        }
    }
}
