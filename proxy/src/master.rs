//! Master-worker mode (`-W`): the master serves no traffic; it runs one worker process (this
//! binary without `-W`), and on SIGUSR2 (or `reload` on the master CLI, `-S <sock>`) checks the
//! configuration again (`-c`) and starts a new worker that takes the listening sockets from the
//! current one and soft-stops it (`-x`/`-sf` over a private admin socket per worker). A
//! configuration that fails the check leaves the current worker serving.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, kill, pthread_sigmask};
use nix::unistd::Pid;

use crate::cmdline::{Args, IoChoice};
use crate::master_cli;

/// How long a new worker may take to listen before the reload counts as failed.
const READY_TIMEOUT: Duration = Duration::from_secs(15);

struct Worker {
    child: Child,
    /// Its private admin socket (`expose-fd listeners`), used by the next reload's `-x`.
    sock: PathBuf,
    started: Instant,
    /// The master's reload count when it started (`show proc` shows how many reloads ago).
    generation: u32,
}

/// A running `program` section's command.
struct ProgChild {
    name: String,
    child: Child,
    started: Instant,
    generation: u32,
}

struct State {
    started: Instant,
    reloads: u32,
    failed: u32,
    current: Option<Worker>,
    old: Vec<Worker>,
    programs: Vec<ProgChild>,
    /// Programs told to stop by a reload, until they exit.
    old_programs: Vec<ProgChild>,
    /// `master-worker no-exit-on-failure` was not set: a failing program stops everything.
    exit_on_failure: bool,
}

/// The `program` sections of the configuration (read as the check child just accepted it).
fn load_programs(args: &Args) -> (Vec<crate::config::model::Program>, bool) {
    let env = |k: &str| std::env::var(k).ok();
    match crate::config::load(&args.files, &env) {
        Ok(l) => (
            l.config.programs,
            !l.config.global.process.no_exit_on_failure,
        ),
        Err(_) => (Vec::new(), true),
    }
}

/// Starts one program as HAProxy's master does (its own user and group if set).
fn spawn_program(p: &crate::config::model::Program, generation: u32) -> Option<ProgChild> {
    use std::os::unix::process::CommandExt;
    let (bin, argv) = p.command.split_first()?;
    let mut c = Command::new(bin);
    c.args(argv);
    if let Some(g) = p
        .group
        .as_deref()
        .and_then(|g| nix::unistd::Group::from_name(g).ok().flatten())
    {
        c.gid(g.gid.as_raw());
    }
    if let Some(u) = p
        .user
        .as_deref()
        .and_then(|u| nix::unistd::User::from_name(u).ok().flatten())
    {
        c.uid(u.uid.as_raw());
    }
    // The master blocks these for its signal loop; a program starts with them open.
    // SAFETY: only async-signal-safe calls between fork and exec.
    unsafe {
        c.pre_exec(|| {
            let _ = pthread_sigmask(SigmaskHow::SIG_UNBLOCK, Some(&signals()), None);
            Ok(())
        });
    }
    match c.spawn() {
        Ok(child) => {
            log(
                "[NOTICE]",
                &format!("New program '{}' ({}) forked", p.name, child.id()),
            );
            Some(ProgChild {
                name: p.name.clone(),
                child,
                started: Instant::now(),
                generation,
            })
        }
        Err(e) => {
            log("[ALERT]", &format!("Cannot execute {bin}: {e}"));
            None
        }
    }
}

/// After a reload: programs that restart on reload (and those no longer configured) are told
/// to stop; new ones and restarted ones start; `no option start-on-reload` ones keep running.
fn reload_programs(st: &mut State, progs: &[crate::config::model::Program], generation: u32) {
    let mut keep = Vec::new();
    for pc in st.programs.drain(..) {
        let stays = progs
            .iter()
            .any(|p| p.name == pc.name && !p.start_on_reload);
        if stays {
            keep.push(pc);
        } else {
            // The soft-stop signal former workers get, as HAProxy sends it.
            let _ = kill(Pid::from_raw(pc.child.id() as i32), Signal::SIGUSR1);
            st.old_programs.push(pc);
        }
    }
    for p in progs {
        if !keep.iter().any(|k| k.name == p.name)
            && let Some(pc) = spawn_program(p, generation)
        {
            keep.push(pc);
        }
    }
    st.programs = keep;
}

/// Stops every program (at the master's exit): current ones first, then former ones.
fn stop_programs(current: &mut [ProgChild], former: &mut [ProgChild]) {
    for p in current.iter().chain(former.iter()) {
        let _ = kill(Pid::from_raw(p.child.id() as i32), Signal::SIGTERM);
    }
    for (list, level, which) in [
        (current, "[ALERT]", "Current"),
        (former, "[WARNING]", "Former"),
    ] {
        for p in list.iter_mut() {
            if let Ok(s) = p.child.wait() {
                log(
                    level,
                    &format!(
                        "{which} program '{}' ({}) exited with code {}",
                        p.name,
                        p.child.id(),
                        code(s)
                    ),
                );
            }
        }
    }
}

/// `sd_notify`: one datagram to `$NOTIFY_SOCKET` (`@` names an abstract socket), for `-Ws`.
fn notify(args: &Args, state: &str) {
    if !args.systemd {
        return;
    }
    let Some(path) = std::env::var_os("NOTIFY_SOCKET") else {
        return;
    };
    let Ok(sock) = std::os::unix::net::UnixDatagram::unbound() else {
        return;
    };
    let bytes = std::os::unix::ffi::OsStrExt::as_bytes(path.as_os_str());
    let addr = match bytes.strip_prefix(b"@") {
        Some(name) => <std::os::unix::net::SocketAddr as std::os::linux::net::SocketAddrExt>::from_abstract_name(name),
        None => std::os::unix::net::SocketAddr::from_pathname(Path::new(&path)),
    };
    if let Ok(a) = addr {
        let _ = sock.send_to_addr(state.as_bytes(), &a);
    }
}

fn log(level: &str, msg: &str) {
    eprintln!("{level:<10} ({}) : {msg}", std::process::id());
}

/// `0d00h01m02s`, as HAProxy prints an uptime.
pub fn uptime(d: Duration) -> String {
    let s = d.as_secs();
    format!(
        "{}d{:02}h{:02}m{:02}s",
        s / 86400,
        (s / 3600) % 24,
        (s / 60) % 60,
        s % 60
    )
}

/// The `show proc` table (HAProxy 2.6's layout).
pub fn show_proc(
    master: (u32, Duration, u32, u32),
    workers: &[(u32, Duration, u32)],
    old: &[(u32, Duration, u32)],
    programs: &[(u32, &str, Duration, u32)],
    old_programs: &[(u32, &str, Duration, u32)],
    version: &str,
) -> String {
    let mut out = format!(
        "#{:<14} {:<15} {:<15} {:<15} {:<15}\n",
        "<PID>", "<type>", "<reloads>", "<uptime>", "<version>"
    );
    let row = |pid: u32, kind: &str, reloads: String, up: Duration| {
        format!(
            "{pid:<15} {kind:<15} {reloads:<15} {:<15} {version}\n",
            uptime(up)
        )
    };
    let (pid, up, reloads, failed) = master;
    out.push_str(&row(
        pid,
        "master",
        format!("{reloads} [failed: {failed}]"),
        up,
    ));
    out.push_str("# workers\n");
    for (pid, up, r) in workers {
        out.push_str(&row(*pid, "worker", r.to_string(), *up));
    }
    if !old.is_empty() {
        out.push_str("# old workers\n");
        for (pid, up, r) in old {
            out.push_str(&row(*pid, "worker", r.to_string(), *up));
        }
    }
    out.push_str("# programs\n");
    let prow = |(pid, name, up, r): &(u32, &str, Duration, u32)| {
        format!(
            "{pid:<15} {name:<15} {r:<15} {:<15} {:<15}\n",
            uptime(*up),
            "-"
        )
    };
    for p in programs {
        out.push_str(&prow(p));
    }
    if !old_programs.is_empty() {
        out.push_str("# old programs\n");
        for p in old_programs {
            out.push_str(&prow(p));
        }
    }
    out
}

fn worker_args(args: &Args, sock: &Path) -> Vec<String> {
    let mut v = vec!["-db".to_string()];
    for f in &args.files {
        v.push("-f".into());
        v.push(f.display().to_string());
    }
    if let Some(n) = args.maxconn {
        v.push("-n".into());
        v.push(n.to_string());
    }
    match args.io {
        IoChoice::Uring => v.extend(["--io".into(), "uring".into()]),
        IoChoice::Epoll => v.extend(["--io".into(), "epoll".into()]),
        IoChoice::Auto => {}
    }
    if let Some(l) = &args.localpeer {
        v.extend(["-L".into(), l.clone()]);
    }
    v.push("--master-sock".into());
    v.push(sock.display().to_string());
    v
}

fn exe() -> Result<PathBuf, String> {
    std::env::current_exe().map_err(|e| format!("cannot find the executable: {e}"))
}

/// `-c` on the configuration, in a child process (the check a worker start does).
fn check(args: &Args) -> Result<(), String> {
    // Not `-q`: that silences the alerts too, and a master that refuses a configuration must
    // say why (its output is shown only when the check fails).
    let mut c = Command::new(exe()?);
    // `-W`: what the check accepts is for a master (its `program` sections need one).
    c.arg("-W").arg("-c");
    for f in &args.files {
        c.arg("-f").arg(f);
    }
    let out = c
        .output()
        .map_err(|e| format!("cannot run the check: {e}"))?;
    if out.status.success() {
        return Ok(());
    }
    Err(String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr))
}

/// Starts a worker; `from` is the worker to take the sockets from and finish.
fn spawn(args: &Args, dir: &Path, n: u32, from: Option<&Worker>) -> Result<Worker, String> {
    let sock = dir.join(format!("worker-{n}.sock"));
    let mut a = worker_args(args, &sock);
    if let Some(old) = from {
        a.extend([
            "-x".to_string(),
            old.sock.display().to_string(),
            "-sf".to_string(),
            old.child.id().to_string(),
        ]);
    }
    let mut child = Command::new(exe()?)
        .args(&a)
        .spawn()
        .map_err(|e| format!("cannot start a worker: {e}"))?;
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if let Ok(Some(st)) = child.try_wait() {
            let _ = std::fs::remove_file(&sock);
            return Err(format!(
                "New worker ({}) exited with code {}",
                child.id(),
                code(st)
            ));
        }
        // Its private socket is bound once its listeners are: it serves.
        if UnixStream::connect(&sock).is_ok() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("New worker ({}) did not start in time", child.id()));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    log("[NOTICE]", &format!("New worker ({}) forked", child.id()));
    Ok(Worker {
        child,
        sock,
        started: Instant::now(),
        generation: n,
    })
}

/// An exit status as HAProxy counts it: the code, or 128 + the signal.
fn exit_code(st: ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    st.code().or(st.signal().map(|s| 128 + s)).unwrap_or(1)
}

fn code(st: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("{c} (Exit)"),
        (None, Some(s)) => {
            let name = Signal::try_from(s).map_or("Signal", |sg| match sg {
                Signal::SIGTERM => "Terminated",
                Signal::SIGKILL => "Killed",
                Signal::SIGINT => "Interrupt",
                Signal::SIGHUP => "Hangup",
                Signal::SIGQUIT => "Quit",
                Signal::SIGABRT => "Aborted",
                Signal::SIGSEGV => "Segmentation fault",
                Signal::SIGUSR1 => "User defined signal 1",
                Signal::SIGUSR2 => "User defined signal 2",
                _ => "Signal",
            });
            format!("{} ({name})", 128 + s)
        }
        _ => "?".into(),
    }
}

fn signals() -> SigSet {
    let mut set = SigSet::empty();
    for s in [
        Signal::SIGINT,
        Signal::SIGTERM,
        Signal::SIGUSR1,
        Signal::SIGUSR2,
        Signal::SIGHUP,
        Signal::SIGCHLD,
    ] {
        set.add(s);
    }
    set
}

fn lock(st: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    st.lock().unwrap_or_else(|p| p.into_inner())
}

/// Runs the master until its workers are gone; returns the exit code.
pub fn run(args: &Args) -> u8 {
    if let Err(e) = check(args) {
        eprint!("{e}");
        return 1;
    }
    // Before any thread: every thread inherits the mask, so only `wait` below sees them.
    let set = signals();
    let _ = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&set), None);
    let dir = std::env::temp_dir().join(format!("portcullis-master-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&dir) {
        log("[ALERT]", &format!("cannot create {}: {e}", dir.display()));
        return 1;
    }
    let first = match spawn(args, &dir, 0, None) {
        Ok(w) => w,
        Err(e) => {
            log("[ALERT]", &e);
            let _ = std::fs::remove_dir_all(&dir);
            return 1;
        }
    };
    let (progs, exit_on_failure) = load_programs(args);
    let mut programs: Vec<ProgChild> = Vec::new();
    let mut unstarted = false;
    for p in &progs {
        match spawn_program(p, 0) {
            Some(pc) => programs.push(pc),
            None => unstarted = true,
        }
    }
    // HAProxy's program child fails its exec and exits 1: with exit-on-failure, everything
    // stops.
    if unstarted && exit_on_failure {
        log(
            "[ALERT]",
            "exit-on-failure: killing every processes with SIGTERM",
        );
        let mut w = first;
        let _ = kill(Pid::from_raw(w.child.id() as i32), Signal::SIGTERM);
        stop_programs(&mut programs, &mut []);
        let _ = w.child.wait();
        let _ = std::fs::remove_dir_all(&dir);
        return 1;
    }
    log("[NOTICE]", "Loading success.");
    notify(args, &format!("READY=1\nMAINPID={}", std::process::id()));
    let state = Arc::new(Mutex::new(State {
        started: Instant::now(),
        reloads: 0,
        failed: 0,
        current: Some(first),
        old: Vec::new(),
        programs,
        old_programs: Vec::new(),
        exit_on_failure,
    }));
    let mut cli_path = None;
    if let Some(spec) = &args.master_cli {
        match bind_cli(spec) {
            Ok((l, path)) => {
                cli_path = path;
                let st = Arc::clone(&state);
                std::thread::spawn(move || cli_loop(l, st));
            }
            Err(e) => log(
                "[ALERT]",
                &format!("cannot bind the master CLI {spec}: {e}"),
            ),
        }
    }
    let rc = loop {
        let Ok(sig) = set.wait() else { continue };
        match sig {
            Signal::SIGUSR2 | Signal::SIGHUP => reload(args, &dir, &state),
            Signal::SIGUSR1 | Signal::SIGTERM | Signal::SIGINT => {
                let fwd = if sig == Signal::SIGUSR1 {
                    Signal::SIGUSR1
                } else {
                    Signal::SIGTERM
                };
                notify(args, "STOPPING=1");
                let mut st = lock(&state);
                let mut all: Vec<Worker> = st.old.drain(..).collect();
                all.extend(st.current.take());
                let mut progs: Vec<ProgChild> = st.programs.drain(..).collect();
                let mut former: Vec<ProgChild> = st.old_programs.drain(..).collect();
                drop(st);
                for w in &mut all {
                    let _ = kill(Pid::from_raw(w.child.id() as i32), fwd);
                }
                stop_programs(&mut progs, &mut former);
                for w in &mut all {
                    let _ = w.child.wait();
                }
                // As HAProxy's master: 130 after SIGINT (what VTest expects), 0 otherwise.
                break if sig == Signal::SIGINT { 130 } else { 0 };
            }
            Signal::SIGCHLD => {
                let mut st = lock(&state);
                st.old_programs.retain_mut(|p| match p.child.try_wait() {
                    Ok(Some(s)) => {
                        log(
                            "[WARNING]",
                            &format!(
                                "Former program '{}' ({}) exited with code {}",
                                p.name,
                                p.child.id(),
                                code(s)
                            ),
                        );
                        false
                    }
                    _ => true,
                });
                let mut failed = None;
                st.programs.retain_mut(|p| match p.child.try_wait() {
                    Ok(Some(s)) => {
                        log(
                            "[ALERT]",
                            &format!(
                                "Current program '{}' ({}) exited with code {}",
                                p.name,
                                p.child.id(),
                                code(s)
                            ),
                        );
                        let rc = exit_code(s);
                        if rc != 0 && rc != 130 {
                            failed = Some(rc);
                        }
                        false
                    }
                    _ => true,
                });
                if let Some(rc) = failed.filter(|_| st.exit_on_failure) {
                    log(
                        "[ALERT]",
                        "exit-on-failure: killing every processes with SIGTERM",
                    );
                    let mut all: Vec<Worker> = st.old.drain(..).collect();
                    all.extend(st.current.take());
                    let mut progs: Vec<ProgChild> = st.programs.drain(..).collect();
                    let mut former: Vec<ProgChild> = st.old_programs.drain(..).collect();
                    drop(st);
                    for w in &mut all {
                        let _ = kill(Pid::from_raw(w.child.id() as i32), Signal::SIGTERM);
                    }
                    stop_programs(&mut progs, &mut former);
                    for w in &mut all {
                        let _ = w.child.wait();
                    }
                    break u8::try_from(rc).unwrap_or(1);
                }
                st.old.retain_mut(|w| match w.child.try_wait() {
                    Ok(Some(s)) => {
                        log(
                            "[WARNING]",
                            &format!(
                                "Former worker ({}) exited with code {}",
                                w.child.id(),
                                code(s)
                            ),
                        );
                        let _ = std::fs::remove_file(&w.sock);
                        false
                    }
                    _ => true,
                });
                let gone = st
                    .current
                    .as_mut()
                    .and_then(|w| w.child.try_wait().ok().flatten().map(|s| (w.child.id(), s)));
                if let Some((pid, s)) = gone {
                    log(
                        "[ALERT]",
                        &format!("Current worker ({pid}) exited with code {}", code(s)),
                    );
                    st.current = None;
                    let mut old: Vec<Worker> = st.old.drain(..).collect();
                    drop(st);
                    for w in &mut old {
                        let _ = kill(Pid::from_raw(w.child.id() as i32), Signal::SIGTERM);
                        let _ = w.child.wait();
                    }
                    break u8::try_from(s.code().unwrap_or(1)).unwrap_or(1);
                }
            }
            _ => {}
        }
    };
    log(
        "[WARNING]",
        &format!("All workers exited. Exiting... ({rc})"),
    );
    if let Some(p) = &cli_path {
        let _ = std::fs::remove_file(p);
    }
    let _ = std::fs::remove_dir_all(&dir);
    rc
}

fn reload(args: &Args, dir: &Path, state: &Mutex<State>) {
    log("[NOTICE]", "Reloading portcullis");
    notify(args, "RELOADING=1");
    reload_inner(args, dir, state);
    notify(args, "READY=1");
}

fn reload_inner(args: &Args, dir: &Path, state: &Mutex<State>) {
    if let Err(e) = check(args) {
        eprint!("{e}");
        lock(state).failed += 1;
        log("[WARNING]", "Loading failure!");
        return;
    }
    let n = lock(state).reloads + 1;
    // The lock is not held while the new worker starts: `show proc` keeps answering.
    let cur = lock(state).current.take();
    let res = spawn(args, dir, n, cur.as_ref());
    let mut st = lock(state);
    match res {
        Ok(w) => {
            st.reloads = n;
            st.old.extend(cur);
            st.current = Some(w);
            let (progs, exit_on_failure) = load_programs(args);
            st.exit_on_failure = exit_on_failure;
            reload_programs(&mut st, &progs, n);
            log("[NOTICE]", "Loading success.");
        }
        Err(e) => {
            st.current = cur;
            st.failed += 1;
            log("[ALERT]", &e);
            log("[WARNING]", "Loading failure!");
        }
    }
}

/// Binds the master CLI: a unix socket path, or a listening socket inherited as `fd@<n>`
/// (VTest passes one). Returns the path to remove at exit, if any.
fn bind_cli(spec: &str) -> Result<(UnixListener, Option<PathBuf>), String> {
    let spec = master_cli::parse_spec(spec)?;
    let (sock, path) = match spec.addr {
        master_cli::Addr::Fd(fd) => (
            crate::engine::listen::inherited(fd).map_err(|e| e.to_string())?,
            None,
        ),
        master_cli::Addr::Path(p) => (
            crate::engine::listen::unix(&p, 16, spec.mode.or(Some(0o600)))
                .map_err(|e| e.to_string())?,
            Some(PathBuf::from(p)),
        ),
    };
    let l = UnixListener::from(std::os::fd::OwnedFd::from(sock));
    l.set_nonblocking(false).map_err(|e| e.to_string())?;
    Ok((l, path))
}

fn cli_loop(l: UnixListener, state: Arc<Mutex<State>>) {
    for conn in l.incoming() {
        let Ok(conn) = conn else { continue };
        let st = Arc::clone(&state);
        std::thread::spawn(move || cli_session(conn, &st));
    }
}

/// One master CLI connection: a line of `;`-separated commands, or, after `prompt`, one line
/// after another with a `master> ` prompt until `quit` or the client closes.
fn cli_session(mut conn: UnixStream, state: &Mutex<State>) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(60)));
    let Ok(rd) = conn.try_clone() else { return };
    let mut rd = BufReader::new(rd);
    let mut prompt = false;
    loop {
        let mut line = String::new();
        match rd.read_line(&mut line) {
            Ok(n) if n > 0 => {}
            _ => return,
        }
        let mut out = String::new();
        let mut quit = false;
        match master_cli::split_line(&line) {
            Err(e) => out.push_str(&e),
            Ok(cmds) => {
                for (target, cmd) in cmds {
                    match (target, cmd.as_str()) {
                        (master_cli::Target::Master, "prompt") => prompt = !prompt,
                        (master_cli::Target::Master, "quit") => quit = true,
                        (master_cli::Target::Master, c) => out.push_str(&master_command(c, state)),
                        (t, c) => out.push_str(&forward(&t, c, state)),
                    }
                }
            }
        }
        if prompt && !quit {
            out.push_str("\nmaster> ");
        }
        if conn.write_all(out.as_bytes()).is_err() || quit || !prompt {
            return;
        }
    }
}

fn master_command(cmd: &str, state: &Mutex<State>) -> String {
    match cmd {
        "show proc" => {
            let st = lock(state);
            let now = Instant::now();
            let row = |w: &Worker| {
                (
                    w.child.id(),
                    now - w.started,
                    st.reloads.saturating_sub(w.generation),
                )
            };
            let workers: Vec<_> = st.current.iter().map(row).collect();
            let old: Vec<_> = st.old.iter().map(row).collect();
            fn prow(p: &ProgChild, now: Instant, reloads: u32) -> (u32, &str, Duration, u32) {
                (
                    p.child.id(),
                    p.name.as_str(),
                    now - p.started,
                    reloads.saturating_sub(p.generation),
                )
            }
            let programs: Vec<_> = st
                .programs
                .iter()
                .map(|p| prow(p, now, st.reloads))
                .collect();
            let old_programs: Vec<_> = st
                .old_programs
                .iter()
                .map(|p| prow(p, now, st.reloads))
                .collect();
            show_proc(
                (std::process::id(), now - st.started, st.reloads, st.failed),
                &workers,
                &old,
                &programs,
                &old_programs,
                env!("CARGO_PKG_VERSION"),
            ) + "\n"
        }
        "show version" => format!("{}\n\n", env!("CARGO_PKG_VERSION")),
        "reload" => {
            // The main thread does it, as for SIGUSR2.
            let _ = kill(Pid::this(), Signal::SIGUSR2);
            String::new()
        }
        "help" => master_cli::HELP.to_string(),
        _ => master_cli::UNKNOWN.to_string(),
    }
}

/// Sends one command to a worker's admin socket and returns its whole reply.
fn forward(target: &master_cli::Target, cmd: &str, state: &Mutex<State>) -> String {
    let sock = {
        let st = lock(state);
        let mut all = st.current.iter().chain(st.old.iter().rev());
        let w = match target {
            master_cli::Target::Relative(n) => all.nth(*n as usize - 1),
            master_cli::Target::Pid(p) => all.find(|w| w.child.id() == *p),
            master_cli::Target::Master => None,
        };
        match w {
            Some(w) => w.sock.clone(),
            None => {
                let prefix = match target {
                    master_cli::Target::Pid(p) => format!("!{p}"),
                    master_cli::Target::Relative(n) => n.to_string(),
                    master_cli::Target::Master => "master".into(),
                };
                return format!("Can't find the target PID matching the prefix '@{prefix}'\n");
            }
        }
    };
    let ask = || -> std::io::Result<String> {
        let mut s = UnixStream::connect(&sock)?;
        s.set_read_timeout(Some(Duration::from_secs(30)))?;
        s.write_all(format!("{cmd}\n").as_bytes())?;
        let mut reply = String::new();
        std::io::Read::read_to_string(&mut s, &mut reply)?;
        Ok(reply)
    };
    ask().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_proc_layout_is_haproxys() {
        let out = show_proc(
            (17162, Duration::from_secs(62), 1, 0),
            &[(18785, Duration::from_secs(1), 0)],
            &[(17328, Duration::from_secs(3723), 1)],
            &[(18790, "api", Duration::from_secs(5), 1)],
            &[],
            "2.6.12-1+deb12u4",
        );
        assert_eq!(
            out,
            "#<PID>          <type>          <reloads>       <uptime>        <version>      \n\
             17162           master          1 [failed: 0]   0d00h01m02s     2.6.12-1+deb12u4\n\
             # workers\n\
             18785           worker          0               0d00h00m01s     2.6.12-1+deb12u4\n\
             # old workers\n\
             17328           worker          1               0d01h02m03s     2.6.12-1+deb12u4\n\
             # programs\n\
             18790           api             1               0d00h00m05s     -              \n"
        );
    }
}
