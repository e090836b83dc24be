//! The master CLI (`-S <addr>[,<option> <value>]…`): what the master answers itself (`show proc`,
//! `reload`, `help`, `prompt`, `quit`) and the `@<relative pid>` / `@!<pid>` / `@master`
//! prefixes that send a command to one worker's admin socket, as HAProxy 2.6's master CLI does.
//! The parsing is pure; `master.rs` does the socket work.

/// `-S`'s argument: the address (a path, `unix@<path>` or an inherited `fd@<n>`) and its options
/// (`level`, `mode`, `user`, `group`: HAProxy's bind options for the master CLI).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    pub addr: Addr,
    /// `mode <octal>` for a path socket (HAProxy's default leaves the umask's).
    pub mode: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Addr {
    Path(String),
    Fd(i32),
}

pub fn parse_spec(s: &str) -> Result<Spec, String> {
    let mut parts = s.split(',');
    let addr = parts.next().unwrap_or_default();
    let addr = if let Some(n) = addr.strip_prefix("fd@") {
        Addr::Fd(
            n.parse()
                .map_err(|_| format!("invalid master CLI address '{addr}'"))?,
        )
    } else {
        let p = addr.strip_prefix("unix@").unwrap_or(addr);
        if p.is_empty() {
            return Err("-S requires a socket address".into());
        }
        Addr::Path(p.to_string())
    };
    let mut mode = None;
    let opts: Vec<&str> = parts.collect();
    let mut it = opts.chunks(2);
    for pair in it.by_ref() {
        match pair {
            ["mode", v] => {
                mode = Some(
                    u32::from_str_radix(v, 8)
                        .map_err(|_| format!("invalid mode '{v}' for the master CLI"))?,
                )
            }
            ["level", "user" | "operator" | "admin"] | ["user" | "group", _] => {}
            [k, v] => return Err(format!("unknown master CLI option '{k} {v}'")),
            [k] => return Err(format!("master CLI option '{k}' requires a value")),
            _ => {}
        }
    }
    Ok(Spec { addr, mode })
}

/// Where one command of a line goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    Master,
    /// `@<n>`: the n-th worker, 1 being the current one.
    Relative(u32),
    /// `@!<pid>`.
    Pid(u32),
}

/// Splits a command line on `;` (HAProxy's separator) and reads each command's routing prefix.
/// A prefix alone (`@1`) applies to the commands after it on the line, as HAProxy's does.
pub fn split_line(line: &str) -> Result<Vec<(Target, String)>, String> {
    let mut out = Vec::new();
    let mut sticky = Target::Master;
    for cmd in line.split(';') {
        let cmd = cmd.trim();
        if cmd.is_empty() {
            continue;
        }
        let (target, rest) = match cmd.strip_prefix('@') {
            Some(r) => {
                let (word, rest) = r.split_once(char::is_whitespace).unwrap_or((r, ""));
                let t = if word == "master" {
                    Target::Master
                } else if let Some(p) = word.strip_prefix('!') {
                    Target::Pid(p.parse().map_err(|_| no_target(word))?)
                } else {
                    match word.parse::<u32>() {
                        Ok(0) => Target::Master,
                        Ok(n) => Target::Relative(n),
                        Err(_) => return Err(no_target(word)),
                    }
                };
                (t, rest.trim())
            }
            None => (sticky.clone(), cmd),
        };
        if rest.is_empty() {
            sticky = target;
            continue;
        }
        out.push((target, rest.to_string()));
    }
    Ok(out)
}

fn no_target(word: &str) -> String {
    format!("Can't find the target PID matching the prefix '@{word}'\n")
}

/// `help` on the master CLI: HAProxy 2.6's lines for the commands the master answers.
pub const HELP: &str = "The following commands are valid at this level:
  @!<pid>                                 : send a command to the <pid> process
  @<relative pid>                         : send a command to the <relative pid> process
  @master                                 : send a command to the master process
  reload                                  : reload haproxy
  show proc                               : show processes status
  show version                            : show version of the current process
  help [<command>]                        : list matching or all commands
  prompt                                  : toggle interactive mode with prompt
  quit                                    : disconnect

";

/// An unknown command (HAProxy narrows the list to near matches; this gives the whole of it).
pub const UNKNOWN: &str = "Unknown command, but maybe one of the following ones is a better match:
  @!<pid>                                 : send a command to the <pid> process
  @master                                 : send a command to the master process
  reload                                  : reload haproxy
  show proc                               : show processes status
  help [<command>]                        : list matching or all commands
  prompt                                  : toggle interactive mode with prompt
  quit                                    : disconnect

";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs() {
        assert_eq!(
            parse_spec("fd@7").unwrap(),
            Spec {
                addr: Addr::Fd(7),
                mode: None
            }
        );
        assert_eq!(
            parse_spec("/run/m.sock,level,admin,mode,600").unwrap(),
            Spec {
                addr: Addr::Path("/run/m.sock".into()),
                mode: Some(0o600)
            }
        );
        assert_eq!(parse_spec("unix@/x").unwrap().addr, Addr::Path("/x".into()));
        assert!(parse_spec("fd@x").is_err());
        assert!(parse_spec("/x,level").is_err());
        assert!(parse_spec("/x,color,red").is_err());
        assert!(parse_spec("").is_err());
    }

    #[test]
    fn routing() {
        assert_eq!(
            split_line("show proc").unwrap(),
            [(Target::Master, "show proc".to_string())]
        );
        assert_eq!(
            split_line("@1 show info; @!42 show stat;show proc").unwrap(),
            [
                (Target::Relative(1), "show info".to_string()),
                (Target::Pid(42), "show stat".to_string()),
                (Target::Master, "show proc".to_string()),
            ]
        );
        assert_eq!(
            split_line("@1; show info; show stat").unwrap(),
            [
                (Target::Relative(1), "show info".to_string()),
                (Target::Relative(1), "show stat".to_string()),
            ]
        );
        assert_eq!(
            split_line("@master show proc").unwrap(),
            [(Target::Master, "show proc".to_string())]
        );
        assert_eq!(
            split_line("@x show info").unwrap_err(),
            "Can't find the target PID matching the prefix '@x'\n"
        );
    }
}
