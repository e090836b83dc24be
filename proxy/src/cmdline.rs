//! The command line, with HAProxy's flags where HAProxy has one.

use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IoChoice {
    Auto,
    Uring,
    Epoll,
}

#[derive(Clone, Debug)]
pub struct Args {
    pub files: Vec<PathBuf>,
    pub check_only: bool,
    pub foreground: bool,
    pub daemon: bool,
    pub pidfile: Option<PathBuf>,
    pub version: u8,
    pub maxconn: Option<u32>,
    pub quiet: bool,
    pub io: IoChoice,
    /// `-x <socket>`: the old process' admin socket to fetch the listeners from.
    pub old_socket: Option<PathBuf>,
    /// `-sf <pid>…`: old processes to soft-stop (SIGUSR1) once started.
    pub finish_pids: Vec<i32>,
    /// `-st <pid>…`: old processes to stop (SIGTERM) once started.
    pub terminate_pids: Vec<i32>,
    /// `-W`: master-worker mode.
    pub master_worker: bool,
    /// `-Ws`: master-worker mode telling systemd (`Type=notify`) when it is ready or reloading.
    pub systemd: bool,
    /// `-S <addr>[,<opt>,<value>]…`: the master CLI socket (a path or an inherited `fd@<n>`).
    pub master_cli: Option<String>,
    /// `--master-sock <path>` (set by the master for its workers): a private admin socket with
    /// `expose-fd listeners`, which the next worker's `-x` reads.
    pub master_sock: Option<PathBuf>,
    /// `-L <name>`: this process' local peer name (`$HAPROXY_LOCALPEER` in the configuration).
    pub localpeer: Option<String>,
    /// `-cc <condition>`: evaluate a `.if` condition and exit 0 (true), 1 (false) or 2 (error).
    pub check_condition: Option<String>,
    /// `-dK<class>[,…]`: print the keyword tables and exit.
    pub dump_keywords: Option<String>,
}

pub const USAGE: &str =
    "Usage : portcullis [-f <cfgfile|cfgdir>]* [ -vdVD ] [ -n <maxconn> ] [ -N <maxpconn> ]
        [ -p <pidfile> ] [ -c ] [ -q ] [ --io uring|epoll ]
        [ -x <unix_socket> ] [ -sf[-st] [pid ]* ] [ -W ] [ -S <unix_socket> ]
        [ -L <localpeer> ] [ -cc <condition> ] [ -dM[<byte>] ]
        -v displays version ; -vv shows known build options.
        -d enters debug mode ; -db only disables background mode.
        -D goes daemon ; -p writes pids of all children to this file
        -c check mode : only check config files and exit
        -q quiet mode : don't display messages
        -N sets the default, per-proxy maximum # of connections
        -x get listening sockets from a unix socket
        -sf/-st [pid ]* finishes/terminates old pids.
        -W master-worker mode.
        -Ws master-worker mode with systemd notify support.
        -S <unix_socket>[,<bind options>] the master CLI socket (show proc, reload, @<n>)
        -L set local peer name (default to hostname)
        -cc evaluates a condition and exits with 0 if true, 1 if false, 2 on error
        -dM[<byte>] accepted for HAProxy's memory debugging (no effect)
        --io uring|epoll forces the I/O engine (default: io_uring when the kernel allows it)
        -dK{class[,...]} dump registered keywords (use 'help' for list)
";

/// Parses `argv[1..]`. Errors carry HAProxy-style text for stderr.
pub fn parse(args: &[String]) -> Result<Args, String> {
    let mut out = Args {
        files: Vec::new(),
        check_only: false,
        foreground: false,
        daemon: false,
        pidfile: None,
        version: 0,
        maxconn: None,
        quiet: false,
        io: IoChoice::Auto,
        old_socket: None,
        finish_pids: Vec::new(),
        terminate_pids: Vec::new(),
        master_worker: false,
        systemd: false,
        master_cli: None,
        master_sock: None,
        localpeer: None,
        check_condition: None,
        dump_keywords: None,
    };
    let mut it = args.iter().peekable();
    while let Some(a) = it.next() {
        let mut value = |flag: &str| -> Result<String, String> {
            it.next()
                .cloned()
                .ok_or_else(|| format!("[ALERT]    (1) : '{flag}' requires an argument.\n{USAGE}"))
        };
        match a.as_str() {
            "-f" => out.files.push(PathBuf::from(value("-f")?)),
            "-c" => out.check_only = true,
            "-cc" => out.check_condition = Some(value("-cc")?),
            "-d" | "-db" => out.foreground = true,
            "-D" => out.daemon = true,
            "-q" => out.quiet = true,
            "-p" => out.pidfile = Some(PathBuf::from(value("-p")?)),
            "-x" => out.old_socket = Some(PathBuf::from(value("-x")?)),
            "-W" => out.master_worker = true,
            "-Ws" => {
                out.master_worker = true;
                out.systemd = true;
            }
            "-S" => out.master_cli = Some(value("-S")?),
            "-L" => out.localpeer = Some(value("-L")?),
            // HAProxy's memory debugging (poisoning, pool options): nothing to do in Rust.
            s if s.starts_with("-dM") => {}
            "--master-sock" => out.master_sock = Some(PathBuf::from(value("--master-sock")?)),
            // As HAProxy: every following argument that is not an option is a pid.
            "-sf" | "-st" => {
                let mut pids = Vec::new();
                while let Some(p) = it.next_if(|p| !p.starts_with('-')) {
                    match p.parse::<i32>() {
                        Ok(n) if n > 0 => pids.push(n),
                        _ => {
                            return Err(format!(
                                "[ALERT]    (1) : -{} option: invalid pid '{p}'.",
                                &a[1..]
                            ));
                        }
                    }
                }
                match a.as_str() {
                    "-sf" => out.finish_pids.extend(pids),
                    _ => out.terminate_pids.extend(pids),
                }
            }
            "-v" => out.version = out.version.max(1),
            "-vv" => out.version = 2,
            "-N" | "-n" => {
                let v = value(a)?;
                out.maxconn = Some(v.parse().map_err(|_| {
                    format!("[ALERT]    (1) : invalid value '{v}' for '{a}'.\n{USAGE}")
                })?);
            }
            "--io" => {
                out.io = match value("--io")?.as_str() {
                    "uring" | "io_uring" => IoChoice::Uring,
                    "epoll" => IoChoice::Epoll,
                    "auto" => IoChoice::Auto,
                    other => {
                        return Err(format!(
                            "[ALERT]    (1) : unknown I/O engine '{other}' (expected uring or epoll)."
                        ));
                    }
                }
            }
            s if s.starts_with("-f") && s.len() > 2 => out.files.push(PathBuf::from(&s[2..])),
            s if s.starts_with("-dK") => out.dump_keywords = Some(s[3..].to_string()),
            s if s.starts_with("--io=") => {
                out.io = match &s[5..] {
                    "uring" | "io_uring" => IoChoice::Uring,
                    "epoll" => IoChoice::Epoll,
                    "auto" => IoChoice::Auto,
                    other => {
                        return Err(format!(
                            "[ALERT]    (1) : unknown I/O engine '{other}' (expected uring or epoll)."
                        ));
                    }
                }
            }
            "-h" | "--help" => return Err(USAGE.to_string()),
            other => {
                return Err(format!(
                    "[ALERT]    (1) : unknown option '{other}'.\n{USAGE}"
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(v: &[&str]) -> Result<Args, String> {
        parse(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn flags() {
        let a = p(&[
            "-f", "a.cfg", "-f", "dir", "-c", "-db", "-N", "100", "--io", "epoll",
        ])
        .unwrap();
        assert_eq!(a.files.len(), 2);
        assert!(a.check_only && a.foreground);
        assert_eq!(a.maxconn, Some(100));
        assert_eq!(a.io, IoChoice::Epoll);
        assert!(p(&["-f"]).is_err());
        assert!(p(&["--io", "kqueue"]).is_err());
        assert!(p(&["-x"]).is_err());
        let a = p(&[
            "-L",
            "A",
            "-cc",
            "version_atleast(2.5-dev0)",
            "-dM",
            "-dM0x55",
        ])
        .unwrap();
        assert_eq!(a.localpeer.as_deref(), Some("A"));
        assert_eq!(
            a.check_condition.as_deref(),
            Some("version_atleast(2.5-dev0)")
        );
        assert!(p(&["-L"]).is_err() && p(&["-cc"]).is_err());
    }

    #[test]
    fn reload_flags() {
        let a = p(&["-f", "a.cfg", "-x", "/run/a.sock", "-sf", "12", "34", "-db"]).unwrap();
        assert_eq!(a.old_socket, Some(PathBuf::from("/run/a.sock")));
        assert_eq!(a.finish_pids, vec![12, 34]);
        assert!(a.foreground && a.terminate_pids.is_empty());
        let a = p(&["-st", "7", "-f", "b.cfg"]).unwrap();
        assert_eq!(a.terminate_pids, vec![7]);
        assert_eq!(a.files, vec![PathBuf::from("b.cfg")]);
        // No pid at all is accepted, as HAProxy does (nothing to signal).
        assert!(p(&["-sf"]).unwrap().finish_pids.is_empty());
        let a = p(&["-W", "-S", "/run/m.sock", "-f", "c"]).unwrap();
        assert!(a.master_worker);
        assert_eq!(a.master_cli.as_deref(), Some("/run/m.sock"));
        assert_eq!(
            p(&["-sf", "x1"]).unwrap_err(),
            "[ALERT]    (1) : -sf option: invalid pid 'x1'."
        );
    }
}
