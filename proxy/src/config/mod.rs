//! HAProxy's configuration language: lexer (quotes, `\` escapes, `"${ENV}"`), sections, keyword
//! tables, the typed model (`model`) and diagnostics with file:line (`diag`).
//!
//! The parser is pure: file contents, the environment, certificate checks and name resolution
//! come in through [`Sys`]. [`load`] and [`check_command`] are the thin shells that read files.

pub mod addr;
pub mod cond;
pub mod diag;
pub mod keywords;
mod kw_capture;
mod kw_comp;
mod kw_cookie;
mod kw_global;
mod kw_pages;
mod kw_peers;
mod kw_process;
pub mod kw_program;
mod kw_proxy;
mod kw_resolvers;
mod kw_rules;
pub(crate) mod kw_server;
mod kw_small;
mod kw_ssl;
mod kw_tune;
mod kw_userlist;
pub mod lexer;
pub mod model;
mod parser;
pub mod suggest;
pub mod values;

pub use diag::{Diag, Severity};
use model::Config;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

/// A parsed configuration and the warnings it produced.
#[derive(Debug)]
pub struct Loaded {
    pub config: Config,
    pub warnings: Vec<Diag>,
}

/// What the parser asks of the outside world.
pub struct Sys<'a> {
    /// Environment variables for `"${VAR}"`.
    pub env: &'a dyn Fn(&str) -> Option<String>,
    /// Whether a certificate path exists; `Err` is the reason (`No such file or directory`).
    pub stat: &'a dyn Fn(&str) -> Result<(), String>,
    /// Host name resolution for addresses that are not IP literals.
    pub resolve: &'a dyn Fn(&str) -> Option<IpAddr>,
    /// `getpwnam`/`getgrnam` for `user`/`group`: the numeric id of a user (`Id::User`) or a
    /// group (`Id::Group`).
    pub ids: &'a dyn Fn(Id, &str) -> Option<u32>,
    /// Reads a whole file (`errorfile`); `Err` is the reason.
    pub read: &'a dyn Fn(&str) -> Result<Vec<u8>, String>,
    /// This process' peer name before `localpeer` (`-L`, else the host name).
    pub localpeer: &'a str,
    /// The name came from `-L` (a `localpeer` line is then ignored with a warning).
    pub localpeer_cmdline: bool,
}

static LOCALPEER_CMDLINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// `-L <name>`: recorded once by `main` before any configuration is read.
pub fn set_cmdline_localpeer(name: &str) {
    let _ = LOCALPEER_CMDLINE.set(name.to_string());
}

/// The local peer name the configuration starts from: `-L`, else the host name (HAProxy's
/// `localpeer` default).
pub fn default_localpeer() -> (String, bool) {
    match LOCALPEER_CMDLINE.get() {
        Some(n) => (n.clone(), true),
        None => (
            nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .unwrap_or_default(),
            false,
        ),
    }
}

/// `std::fs::read` with HAProxy's wording of the common failures.
pub fn read_file(p: &str) -> Result<Vec<u8>, String> {
    std::fs::read(p).map_err(|e| io_reason(&e))
}

/// Which account database [`Sys::ids`] looks in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Id {
    User,
    Group,
}

/// The system's user and group databases.
pub fn lookup_id(kind: Id, name: &str) -> Option<u32> {
    match kind {
        Id::User => nix::unistd::User::from_name(name)
            .ok()
            .flatten()
            .map(|u| u.uid.as_raw()),
        Id::Group => nix::unistd::Group::from_name(name)
            .ok()
            .flatten()
            .map(|g| g.gid.as_raw()),
    }
}

/// `stat(2)` with HAProxy's wording of the common failure.
pub fn stat_path(p: &str) -> Result<(), String> {
    match std::fs::metadata(p) {
        Ok(_) => Ok(()),
        Err(e) => Err(io_reason(&e)),
    }
}

fn io_reason(e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::NotFound => "No such file or directory".to_string(),
        std::io::ErrorKind::PermissionDenied => "Permission denied".to_string(),
        _ => e.to_string(),
    }
}

/// The system resolver (what HAProxy's `libc` resolution does at start-up).
pub fn resolve_host(host: &str) -> Option<IpAddr> {
    use std::net::ToSocketAddrs;
    (host, 0).to_socket_addrs().ok()?.map(|sa| sa.ip()).next()
}

/// Parses already-read sources `(file name, text)` in order.
pub fn parse_sources(sources: &[(String, String)], sys: &Sys) -> Result<Loaded, Vec<Diag>> {
    let mut p = parser::Parser::new(sys);
    for (name, text) in sources {
        p.feed(name, text);
    }
    let (config, diags) = p.finish();
    if diags.iter().any(Diag::is_alert) {
        Err(diags)
    } else {
        Ok(Loaded {
            config,
            warnings: diags,
        })
    }
}

/// Parses one text (tests, tools). Certificates are checked and names resolved on this host.
pub fn parse_str(
    name: &str,
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Loaded, Vec<Diag>> {
    let (localpeer, localpeer_cmdline) = default_localpeer();
    let sys = Sys {
        env,
        stat: &stat_path,
        resolve: &resolve_host,
        ids: &lookup_id,
        read: &read_file,
        localpeer: &localpeer,
        localpeer_cmdline,
    };
    parse_sources(&[(name.to_string(), text.to_string())], &sys)
}

/// Reads `paths` like HAProxy's `-f`: a file, or a directory whose `*.cfg` files are read in
/// lexical order.
pub fn read_sources(paths: &[PathBuf]) -> Result<Vec<(String, String)>, Vec<Diag>> {
    let mut out = Vec::new();
    let mut errs = Vec::new();
    let cannot = |p: &Path, e: &std::io::Error| {
        Diag::global(
            Severity::Alert,
            format!(
                "Cannot open configuration file/directory {} : {}",
                p.display(),
                io_reason(e)
            ),
        )
    };
    for path in paths {
        let files = if path.is_dir() {
            match std::fs::read_dir(path) {
                Ok(rd) => {
                    let mut v: Vec<PathBuf> = rd
                        .filter_map(Result::ok)
                        .map(|e| e.path())
                        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "cfg"))
                        .collect();
                    v.sort();
                    v
                }
                Err(e) => {
                    errs.push(cannot(path, &e));
                    continue;
                }
            }
        } else {
            vec![path.clone()]
        };
        for f in files {
            match std::fs::read(&f) {
                Ok(b) => out.push((
                    f.display().to_string(),
                    String::from_utf8_lossy(&b).into_owned(),
                )),
                Err(e) => errs.push(cannot(&f, &e)),
            }
        }
    }
    if errs.is_empty() { Ok(out) } else { Err(errs) }
}

/// Reads and parses the configuration files.
pub fn load(paths: &[PathBuf], env: &dyn Fn(&str) -> Option<String>) -> Result<Loaded, Vec<Diag>> {
    let sources = read_sources(paths)?;
    let (localpeer, localpeer_cmdline) = default_localpeer();
    let sys = Sys {
        env,
        stat: &stat_path,
        resolve: &resolve_host,
        ids: &lookup_id,
        read: &read_file,
        localpeer: &localpeer,
        localpeer_cmdline,
    };
    parse_sources(&sources, &sys)
}

/// True when nothing would listen (no `bind` in an enabled proxy and no stats socket).
fn no_listener(c: &Config) -> bool {
    c.global.stats_sockets.is_empty()
        && !c
            .proxies
            .iter()
            .any(|p| !p.disabled && p.cap.frontend && !p.binds.is_empty())
}

/// `portcullis -c`: exit status 0 (valid), 1 (errors) or 2 (valid but nothing listens), with
/// HAProxy's messages. `quiet` silences everything, as HAProxy's `-q` does.
pub fn check_command(paths: &[PathBuf], quiet: bool) -> i32 {
    check_command_with(paths, quiet, &|_| Vec::new())
}

/// `check_command` plus the checks of later stages (ACL and log-format compilation), whose
/// errors are reported like the parser's.
pub fn check_command_with(
    paths: &[PathBuf],
    quiet: bool,
    validate: &dyn Fn(&Config) -> Vec<Diag>,
) -> i32 {
    let pid = std::process::id();
    let env = |k: &str| std::env::var(k).ok();
    if paths.is_empty() {
        if !quiet {
            eprintln!(
                "{:<10} ({pid}) : No configuration file specified.",
                "[ALERT]"
            );
        }
        return 1;
    }
    let loaded = load(paths, &env).and_then(|mut l| {
        // `validate` may also warn (crt-list lines HAProxy only warns about).
        let (errs, warns): (Vec<Diag>, Vec<Diag>) =
            validate(&l.config).into_iter().partition(Diag::is_alert);
        l.warnings.extend(warns);
        if errs.is_empty() { Ok(l) } else { Err(errs) }
    });
    match loaded {
        Ok(l) => {
            if !quiet {
                for w in &l.warnings {
                    eprintln!("{}", w.render(pid));
                }
            }
            let warned = l.warnings.iter().any(|w| w.severity == Severity::Warning);
            if warned && l.config.global.process.zero_warning {
                if !quiet {
                    eprintln!(
                        "{:<10} ({pid}) : config : Some warnings were found and 'zero-warning' is set. Aborting.",
                        "[ALERT]"
                    );
                }
                return 1;
            }
            if warned && !quiet {
                println!("Warnings were found.");
            }
            if no_listener(&l.config) {
                if !quiet {
                    println!(
                        "Configuration file has no error but will not start (no listener) => exit(2)."
                    );
                }
                return 2;
            }
            if !quiet {
                println!("Configuration file is valid");
            }
            0
        }
        Err(diags) => {
            if !quiet {
                eprint!("{}", diag::render_failure(&diags, pid));
            }
            1
        }
    }
}

#[cfg(test)]
mod tests;
