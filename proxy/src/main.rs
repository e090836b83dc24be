use std::process::ExitCode;

// Per-request head parsing and buffers allocate a lot of small objects; mimalloc's thread-local
// free lists cut glibc malloc's share of a worker's CPU (measured with perf on the L7 path).
#[global_allocator]
static GLOBAL: Mi = Mi;

/// mimalloc, reached through `mi_malloc` when its own alignment (16 bytes, 8 for smaller
/// blocks) covers the layout's, as Rust's `System` does with malloc: `mimalloc::MiMalloc` asks
/// `mi_malloc_aligned` for everything, whose fallback for blocks over 1 KiB (a transaction's
/// boxed future, every request) over-allocates and searches (≈ 1 000 instructions per request).
struct Mi;

/// The alignment every `mi_malloc` block of at least this size has (MI_MAX_ALIGN_SIZE).
const MI_ALIGN: usize = 16;

fn plain(layout: std::alloc::Layout, size: usize) -> bool {
    layout.align() <= MI_ALIGN && layout.align() <= size
}

// SAFETY: each method hands the layout's size (and, off the plain path, its alignment) to the
// matching mimalloc function, which returns memory that satisfies it or null; `dealloc` and
// `realloc` get pointers that this allocator returned.
unsafe impl std::alloc::GlobalAlloc for Mi {
    unsafe fn alloc(&self, layout: std::alloc::Layout) -> *mut u8 {
        if plain(layout, layout.size()) {
            unsafe { libmimalloc_sys::mi_malloc(layout.size()).cast() }
        } else {
            unsafe { mimalloc::MiMalloc.alloc(layout) }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: std::alloc::Layout) -> *mut u8 {
        if plain(layout, layout.size()) {
            unsafe { libmimalloc_sys::mi_zalloc(layout.size()).cast() }
        } else {
            unsafe { mimalloc::MiMalloc.alloc_zeroed(layout) }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: std::alloc::Layout) {
        unsafe { mimalloc::MiMalloc.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: std::alloc::Layout, new_size: usize) -> *mut u8 {
        if plain(layout, new_size) {
            unsafe { libmimalloc_sys::mi_realloc(ptr.cast(), new_size).cast() }
        } else {
            unsafe { mimalloc::MiMalloc.realloc(ptr, layout, new_size) }
        }
    }
}

fn main() -> ExitCode {
    portcullis::process::keep_huge_pages_out();
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
            print!("{}", build_options());
        }
        return ExitCode::SUCCESS;
    }
    if let Some(classes) = &args.dump_keywords {
        return match portcullis::config::keywords::dump(classes) {
            Ok(text) => {
                print!("{text}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("{e}");
                ExitCode::from(1)
            }
        };
    }
    // `lua-load` runs scripts while the configuration is parsed.
    portcullis::lua::install();
    if let Some(name) = &args.localpeer {
        portcullis::config::set_cmdline_localpeer(name);
    }
    // SAFETY: still single-threaded here; the configuration reads it as `${HAPROXY_LOCALPEER}`
    // (the host name without `-L`, as HAProxy sets it).
    unsafe {
        std::env::set_var(
            "HAPROXY_LOCALPEER",
            portcullis::config::default_localpeer().0,
        )
    };
    if let Some(c) = &args.check_condition {
        return check_condition(c);
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
        let mw = args.master_worker;
        let rc = portcullis::config::check_command_with(&args.files, args.quiet, &|c| {
            let mut v = validate(c);
            v.extend(portcullis::config::kw_program::check(
                &c.programs,
                mw || c.global.process.master_worker,
            ));
            v
        });
        return ExitCode::from(u8::try_from(rc).unwrap_or(1));
    }
    run(args)
}

/// `-cc <condition>` as HAProxy: the text is split like a configuration line (quotes, `\`,
/// `"${VAR}"`), its words re-joined with spaces, and evaluated.
fn check_condition(text: &str) -> ExitCode {
    let pid = std::process::id();
    let env = |k: &str| std::env::var(k).ok();
    let words = match portcullis::config::lexer::split_line(text, &env) {
        Ok(w) => w,
        Err(_) => {
            eprintln!("[ALERT]    ({pid}) : config : Syntax Error in condition: Unmatched quote.");
            return ExitCode::from(2);
        }
    };
    match portcullis::config::cond::eval(&words.join(" "), &env) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(msg) => {
            eprintln!("[ALERT]    ({pid}) : config : Failed to evaluate condition: {msg}");
            ExitCode::from(2)
        }
    }
}

/// `-vv`: what this binary was built with and what this host allows, in `haproxy -vv`'s order.
fn build_options() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .trim()
            .to_string()
    };
    let uring = match portcullis::engine::io::uring_available() {
        Ok(()) => "test result OK".to_string(),
        Err(e) => format!("test result FAILED ({e})"),
    };
    let provider = portcullis::tls::default_provider();
    let suites: Vec<String> = provider
        .cipher_suites
        .iter()
        .map(|s| format!("{:?}", s.suite()))
        .collect();
    let groups: Vec<String> = provider
        .kx_groups
        .iter()
        .map(|g| format!("{:?}", g.name()))
        .collect();
    // CAP_NET_ADMIN (12), CAP_PERFMON (38), CAP_BPF (39): what loading the eBPF programs needs.
    let cap_eff = read("/proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .unwrap_or(0);
    let missing: Vec<&str> = [(12, "CAP_NET_ADMIN"), (38, "CAP_PERFMON"), (39, "CAP_BPF")]
        .iter()
        .filter(|(bit, _)| cap_eff & (1u64 << bit) == 0)
        .map(|(_, n)| *n)
        .collect();
    let ebpf = if missing.is_empty() {
        "capabilities present; loaded at start when a mode tcp proxy or portcullis-xdp uses it"
            .to_string()
    } else {
        format!(
            "unavailable to this process (missing {}): mode tcp uses the userspace relay, portcullis-xdp stays in userspace",
            missing.join(", ")
        )
    };
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!(
        "HAProxy version {} (portcullis {}) - the HAProxy release this one follows
Running on: Linux {} {}
Build options :
  EDITION = 2024
  RUSTC   >= {}
  PROFILE = {}
  ALLOC   = mimalloc

Feature list : {}

Built with multi-threading support (default={threads}).
Built with rustls version : 0.23 (crypto provider aws-lc-rs, TLS 1.3 key schedule on ring)
rustls supports : TLSv1.2 TLSv1.3
TLS cipher suites : {}
TLS key exchange groups : {}
Built with the Prometheus exporter as a service
Built with the regex crate for regular expressions (no PCRE2)
HTTP : HTTP/1.1 (strict RFC 9112 codec), HTTP/2 (h2, by ALPN)

Available polling systems :
   io_uring : {uring}
      epoll : test result OK
Selected by --io (default: io_uring when its test passes)

eBPF kernel path (aya 0.14: sockmap splice for mode tcp, XDP filter) on this host :
  {ebpf}
",
        portcullis::config::cond::HAPROXY_VERSION,
        env!("CARGO_PKG_VERSION"),
        read("/proc/sys/kernel/osrelease"),
        read("/proc/sys/kernel/version"),
        env!("CARGO_PKG_RUST_VERSION"),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        // `feature()` in conditions answers from the same list.
        portcullis::config::cond::FEATURES,
        suites.join(" "),
        groups.join(" "),
    )
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
        eprintln!("{}", w.render(std::process::id()));
    }
    // A worker of `-W` has `--master-sock`; its master runs the programs.
    let perrs = portcullis::config::kw_program::check(
        &loaded.config.programs,
        loaded.config.global.process.master_worker || args.master_sock.is_some(),
    );
    if !perrs.is_empty() {
        eprint!(
            "{}",
            portcullis::config::diag::render_failure(&perrs, std::process::id())
        );
        return ExitCode::from(1);
    }
    if loaded.config.global.process.zero_warning
        && loaded
            .warnings
            .iter()
            .any(|w| w.severity == portcullis::config::Severity::Warning)
    {
        alert("config : Some warnings were found and 'zero-warning' is set. Aborting.");
        return ExitCode::from(1);
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
    // `master-worker` in the configuration is `-W` (a worker started by a master has
    // `--master-sock`).
    if cfg.global.process.master_worker && args.master_sock.is_none() && !args.master_worker {
        let mut a = args.clone();
        a.master_worker = true;
        a.daemon |= cfg.global.daemon;
        return master(&a);
    }
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
