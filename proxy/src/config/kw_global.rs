//! The `global` section's keyword table.

use super::model::{CliLevel, Global, SslOptions, StatsSocket};
use super::parser::{Ctx, unknown_kw};
use super::values::{TimeError, parse_time, parse_u32};
use super::{addr, kw_process, kw_proxy, kw_ssl, kw_tune};

pub(crate) struct GlobalKw {
    pub kw: &'static str,
    pub parse: fn(&mut Global, &mut Ctx, &[String]),
    /// Parsed and validated, but the feature is not built yet (recorded in `Global::pending`).
    pub pending: bool,
}

pub(crate) static GLOBAL_KWS: &[GlobalKw] = &[
    GlobalKw {
        kw: "daemon",
        parse: kw_daemon,
        pending: false,
    },
    GlobalKw {
        kw: "expose-experimental-directives",
        parse: kw_expose_experimental,
        pending: false,
    },
    GlobalKw {
        kw: "hard-stop-after",
        parse: kw_hard_stop_after,
        pending: false,
    },
    GlobalKw {
        kw: "log",
        parse: kw_log,
        pending: false,
    },
    GlobalKw {
        kw: "log-send-hostname",
        parse: kw_log_send_hostname,
        pending: false,
    },
    GlobalKw {
        kw: "maxconn",
        parse: kw_maxconn,
        pending: false,
    },
    GlobalKw {
        kw: "maxcomprate",
        parse: kw_maxcomprate,
        pending: false,
    },
    GlobalKw {
        kw: "maxcompcpuusage",
        parse: kw_maxcompcpuusage,
        pending: false,
    },
    GlobalKw {
        kw: "maxzlibmem",
        parse: kw_maxzlibmem,
        pending: false,
    },
    GlobalKw {
        kw: "nbthread",
        parse: kw_nbthread,
        pending: false,
    },
    GlobalKw {
        kw: "nosplice",
        parse: kw_nosplice,
        pending: false,
    },
    GlobalKw {
        kw: "pidfile",
        parse: kw_pidfile,
        pending: false,
    },
    GlobalKw {
        kw: "portcullis-xdp",
        parse: kw_portcullis_xdp,
        pending: false,
    },
    GlobalKw {
        kw: "ssl-default-bind-ciphers",
        parse: kw_ciphers,
        pending: false,
    },
    GlobalKw {
        kw: "ssl-default-bind-ciphersuites",
        parse: kw_ciphersuites,
        pending: false,
    },
    GlobalKw {
        kw: "ssl-default-bind-options",
        parse: kw_bind_options,
        pending: false,
    },
    GlobalKw {
        kw: "ssl-server-verify",
        parse: kw_ssl_server_verify,
        pending: false,
    },
    GlobalKw {
        kw: "stats",
        parse: kw_stats,
        pending: false,
    },
];

pub(crate) fn dispatch(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let Some(kw) = args.first() else { return };
    if kw == "no" && kw_process::kw_no(g, c, args) {
        return;
    }
    let all = || {
        GLOBAL_KWS
            .iter()
            .chain(kw_tune::TUNE_KWS)
            .chain(kw_process::PROCESS_KWS)
            .chain(kw_ssl::SSL_KWS)
    };
    match all().find(|k| k.kw == kw) {
        Some(row) => {
            let before = c.diags.len();
            (row.parse)(g, c, args);
            if row.pending && c.diags.len() == before {
                g.pending.push((kw.clone(), c.loc.clone()));
            }
        }
        None => c.alert(unknown_kw(kw, "global", all().map(|k| k.kw))),
    }
}

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map_or("", String::as_str)
}

/// `portcullis-xdp <iface>... [mode native|generic|auto] [max-sources <n>] [packet-rate <n>]
/// [pin-dir <dir>]` (a portcullis extension): the XDP filter on these interfaces.
fn kw_portcullis_xdp(g: &mut Global, c: &mut Ctx, args: &[String]) {
    use super::model::{XdpCfg, XdpMode};
    let mut x = XdpCfg {
        interfaces: Vec::new(),
        mode: XdpMode::Auto,
        max_sources: None,
        packet_rate: None,
        pin_dir: None,
        loc: c.loc.clone(),
    };
    let mut i = 1;
    while let Some(w) = args.get(i) {
        let v = arg(args, i + 1);
        match w.as_str() {
            "mode" => {
                x.mode = match v {
                    "native" => XdpMode::Native,
                    "generic" => XdpMode::Generic,
                    "auto" => XdpMode::Auto,
                    _ => {
                        c.alert(format!(
                            "'portcullis-xdp' : unknown mode '{v}' (expects 'native', 'generic' or 'auto')."
                        ));
                        return;
                    }
                };
                i += 2;
            }
            "pin-dir" => {
                if !v.starts_with('/') {
                    c.alert(format!(
                        "'portcullis-xdp' : 'pin-dir' expects an absolute path (got '{v}')."
                    ));
                    return;
                }
                x.pin_dir = Some(v.to_string());
                i += 2;
            }
            "max-sources" | "packet-rate" => {
                let Some(n) = parse_u32(v).filter(|n| *n > 0) else {
                    c.alert(format!(
                        "'portcullis-xdp' : '{w}' expects a positive integer (got '{v}')."
                    ));
                    return;
                };
                if w == "max-sources" {
                    x.max_sources = Some(n);
                } else {
                    x.packet_rate = Some(n);
                }
                i += 2;
            }
            iface => {
                if iface.is_empty() || iface.len() >= 16 || iface.contains(['/', ' ']) {
                    c.alert(format!(
                        "'portcullis-xdp' : invalid interface name '{iface}'."
                    ));
                    return;
                }
                x.interfaces.push(iface.to_string());
                i += 1;
            }
        }
    }
    if x.interfaces.is_empty() {
        c.alert("'portcullis-xdp' expects at least one interface name.");
        return;
    }
    g.xdp = Some(x);
}

fn kw_daemon(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if !c.too_many(args, 1, 0) {
        g.daemon = true;
    }
}

fn kw_expose_experimental(g: &mut Global, _: &mut Ctx, _: &[String]) {
    g.expose_experimental = true;
}

fn kw_nosplice(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if !c.too_many(args, 1, 0) {
        g.nosplice = true;
    }
}

fn kw_hard_stop_after(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    match parse_time(arg(args, 1)) {
        Ok(d) => g.hard_stop_after = Some(d),
        Err(TimeError::Empty) => c.alert("'hard-stop-after' expects <time> as argument."),
        Err(TimeError::BadChar(ch)) => {
            c.alert(format!("unexpected character '{ch}' in argument to <hard-stop-after>."))
        }
        Err(TimeError::Overflow) => c.alert(format!(
            "timer overflow in argument '{}' to <hard-stop-after> (maximum value is 2147483647 ms or ~24.8 days)",
            arg(args, 1)
        )),
    }
}

fn kw_log(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if arg(args, 1) == "global" {
        c.alert("log : 'global' is only valid in proxy sections.");
        return;
    }
    if let Some(t) = kw_proxy::parse_log_target(c, args) {
        g.logs.push(t);
    }
}

fn kw_log_send_hostname(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    // Without an argument HAProxy sends the system host name, resolved by the runtime.
    g.log_send_hostname = Some(arg(args, 1).to_string());
}

fn kw_maxconn(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    match parse_u32(arg(args, 1)) {
        Some(n) => g.maxconn = Some(n),
        None => c.alert(format!(
            "'maxconn' expects an integer argument (got '{}').",
            arg(args, 1)
        )),
    }
}

/// `maxcomprate <kB/s>`: read with `atoi` as HAProxy does (a negative value wraps into no
/// practical limit, a word is 0: none).
fn kw_maxcomprate(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    if arg(args, 1).is_empty() {
        c.alert("'maxcomprate' expects an integer argument in kb/s.");
        return;
    }
    let kb = super::values::atol(arg(args, 1));
    g.maxcomprate = Some(kb.wrapping_mul(1024) as u32);
}

/// `maxzlibmem <MB>`: read with `atol` as HAProxy does (a word is 0: no bound).
fn kw_maxzlibmem(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    if arg(args, 1).is_empty() {
        c.alert("'maxzlibmem' expects an integer argument.");
        return;
    }
    let mb = super::values::atol(arg(args, 1));
    g.maxzlibmem = Some(mb.wrapping_mul(1024 * 1024) as u64);
}

/// `maxcompcpuusage <0..100>`: read with `atoi` as HAProxy does (a word is 0).
fn kw_maxcompcpuusage(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    let v = super::values::atol(arg(args, 1)) as i32;
    if arg(args, 1).is_empty() || !(0..=100).contains(&v) {
        c.alert("'maxcompcpuusage' expects an integer argument between 0 and 100.");
        return;
    }
    g.maxcompcpuusage = Some(v as u8);
}

fn kw_nbthread(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    match parse_u32(arg(args, 1)) {
        Some(n) if (1..=4096).contains(&n) => g.nbthread = Some(n),
        Some(n) => c.alert(format!("'nbthread' must be between 1 and 4096 (was {n}).")),
        None => c.alert(format!(
            "'nbthread' passed a missing or unparsable integer value in '{}'",
            arg(args, 1)
        )),
    }
}

fn kw_pidfile(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    match args.get(1).filter(|s| !s.is_empty()) {
        Some(p) => g.pidfile = Some(p.clone()),
        None => c.alert("'pidfile' expects a file name as an argument."),
    }
}

fn kw_ssl_server_verify(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    match args.get(1).map(String::as_str) {
        Some("none") => g.ssl_server_verify_none = true,
        Some("required") => g.ssl_server_verify_none = false,
        // HAProxy 2.6's words for a missing argument.
        None | Some("") => c.alert("'ssl-server-verify' expects an integer argument."),
        Some(_) => c.alert("'ssl-server-verify' expects 'none' or 'required' as argument."),
    }
}

fn kw_ciphers(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if let Some(v) = one_string(c, args, "a cipher suite") {
        g.ssl_default_bind_ciphers = Some(v);
    }
}

fn kw_ciphersuites(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if let Some(v) = one_string(c, args, "a cipher suite") {
        g.ssl_default_bind_ciphersuites = Some(v);
    }
}

fn one_string(c: &mut Ctx, args: &[String], what: &str) -> Option<String> {
    if c.too_many(args, 1, 1) {
        return None;
    }
    match args.get(1).filter(|s| !s.is_empty()) {
        Some(v) => Some(v.clone()),
        None => {
            c.alert(format!("'{}' expects {what} as an argument.", arg(args, 0)));
            None
        }
    }
}

fn kw_bind_options(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let mut opts = SslOptions::default();
    let mut i = 1;
    while let Some(word) = args.get(i) {
        match kw_proxy::parse_ssl_option(&mut opts, word, args.get(i + 1)) {
            Ok(used) => i += 1 + used,
            Err(msg) => {
                c.alert(format!("'ssl-default-bind-options' : {msg}"));
                return;
            }
        }
    }
    g.ssl_default_bind_options = opts;
}

fn kw_stats(g: &mut Global, c: &mut Ctx, args: &[String]) {
    match arg(args, 1) {
        "socket" => stats_socket(g, c, args),
        "timeout" => {
            if c.too_many(args, 2, 1) {
                return;
            }
            match parse_time(arg(args, 2)) {
                Ok(d) if !d.is_zero() => g.stats_timeout = Some(d),
                Ok(_) | Err(TimeError::Empty) => {
                    c.alert("'stats timeout' expects a positive value.")
                }
                Err(TimeError::BadChar(ch)) => {
                    c.alert(format!("'stats timeout' : unexpected character '{ch}'"))
                }
                Err(TimeError::Overflow) => c.alert(format!(
                    "'stats timeout' : timer overflow in argument '{}' (maximum value is 2147483647 ms or ~24.8 days)",
                    arg(args, 2)
                )),
            }
        }
        "maxconn" => {
            if !c.too_many(args, 2, 1) && parse_u32(arg(args, 2)).is_none_or(|n| n == 0) {
                c.alert("'stats maxconn' expects a positive value.");
            }
        }
        other => c.alert(format!(
            "'stats' only supports 'socket', 'maxconn', 'bind-process' and 'timeout' (got '{other}')."
        )),
    }
}

fn stats_socket(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let Some(a) = args.get(2).filter(|s| !s.is_empty()) else {
        c.alert("'stats socket' in global section expects an address or a path to a UNIX socket");
        return;
    };
    let addr = match addr::parse_bind(a, c.sys.resolve) {
        Ok(mut v) if v.len() == 1 => v.remove(0),
        Ok(_) => {
            c.alert(format!(
                "'stats socket' : expects a single address (got '{a}')"
            ));
            return;
        }
        Err(e) => {
            c.alert(format!("'stats socket' : {e}"));
            return;
        }
    };
    let mut sock = StatsSocket {
        addr,
        mode: None,
        level: CliLevel::Admin,
        expose_fd_listeners: false,
        loc: c.loc.clone(),
    };
    let mut i = 3;
    while let Some(opt) = args.get(i) {
        let val = args.get(i + 1).map_or("", String::as_str);
        let err = match opt.as_str() {
            "mode" => match u32::from_str_radix(val, 8) {
                Ok(m) if !val.is_empty() => {
                    sock.mode = Some(m);
                    None
                }
                _ => Some(format!(
                    "''mode' : missing or invalid mode '{val}' (octal integer expected)'"
                )),
            },
            "level" => {
                match val {
                    "user" => sock.level = CliLevel::User,
                    "operator" => sock.level = CliLevel::Operator,
                    "admin" => sock.level = CliLevel::Admin,
                    _ => {
                        c.alert(format!("'stats socket' : ''level' only supports 'user', 'operator', and 'admin' (got '{val}')'"));
                        return;
                    }
                }
                None
            }
            "expose-fd" => {
                if val == "listeners" {
                    sock.expose_fd_listeners = true;
                    None
                } else {
                    Some("''expose-fd' only supports 'listeners'.'".to_string())
                }
            }
            // Socket ownership is applied when the socket is created; accepted as written.
            "user" | "group" | "uid" | "gid" | "name" | "maxconn" | "process" | "thread" => {
                if val.is_empty() {
                    Some(format!("''{opt}' : missing value'"))
                } else {
                    None
                }
            }
            other => Some(format!("unknown keyword '{other}'.")),
        };
        if let Some(e) = err {
            c.alert(format!("'stats socket' : {e}"));
            return;
        }
        i += 2;
    }
    g.stats_sockets.push(sock);
}
