//! `server` and `default-server`: the server keyword table (HAProxy's `srv_kw` with its
//! "allowed in default-server" column).

use super::addr;
use super::kw_proxy::P;
use super::model::{Server, ServerOpts};
use super::suggest;
use super::values::{TimeError, invalid_name_char, parse_time, parse_u32};
use std::time::Duration;

/// What a server keyword may change besides the shared options.
pub(crate) struct SrvState {
    pub name: String,
    pub opts: ServerOpts,
    pub id: Option<u32>,
    /// Keywords parsed whose feature is not built yet (recorded as the proxy's pending ones).
    pub pending: Vec<&'static str>,
}

pub(crate) struct SrvKw {
    pub kw: &'static str,
    /// Number of value words that follow the keyword.
    pub args: usize,
    /// Allowed on `default-server` lines.
    pub default_ok: bool,
    pub parse: fn(&mut SrvState, &str) -> Result<(), String>,
}

/// Marks an error HAProxy prints as `[file:line] : 'server b/s' : …` (no `parsing`).
pub(crate) const BARE: char = '\u{1}';

fn bare(msg: String) -> String {
    format!("{BARE}{msg}")
}

fn init_addr(s: &mut SrvState, v: &str) -> Result<(), String> {
    use super::model::InitAddr;
    let mut out = Vec::new();
    for m in v.split(',') {
        out.push(match m {
            "last" => InitAddr::Last,
            "libc" => InitAddr::Libc,
            "none" => InitAddr::None,
            _ => match m.parse() {
                Ok(ip) => InitAddr::Ip(ip),
                Err(_) => {
                    return Err(bare(format!(
                        "'init-addr' : unknown init-addr method '{m}', supported methods are 'libc', 'last', 'none'.."
                    )));
                }
            },
        });
    }
    s.opts.resolve.init_addr = out;
    Ok(())
}

fn resolve_prefer(s: &mut SrvState, v: &str) -> Result<(), String> {
    s.opts.resolve.prefer_ipv4 = match v {
        "ipv4" => true,
        "ipv6" => false,
        _ => {
            return Err(bare(
                "'resolve-prefer' expects either ipv4 or ipv6 as argument..".into(),
            ));
        }
    };
    Ok(())
}

fn resolve_net(s: &mut SrvState, v: &str) -> Result<(), String> {
    let mut nets = Vec::new();
    for n in v.split(',') {
        match addr::parse_net(n) {
            Some(x) => nets.push(x),
            None => return Err(bare(format!("'resolve-net' invalid network '{n}'.."))),
        }
    }
    s.opts.resolve.nets = nets;
    Ok(())
}

fn resolve_opts(s: &mut SrvState, v: &str) -> Result<(), String> {
    let r = &mut s.opts.resolve;
    for o in v.split(',') {
        match o {
            "allow-dup-ip" => r.allow_dup_ip = true,
            "ignore-weight" => r.ignore_weight = true,
            "prevent-dup-ip" => r.prevent_dup_ip = true,
            _ => {
                return Err(bare(format!(
                    "'resolve-opts' : unknown resolve-opts option '{o}', supported methods are 'allow-dup-ip', 'ignore-weight', and 'prevent-dup-ip'.."
                )));
            }
        }
    }
    Ok(())
}

pub(crate) static SRV_KWS: &[SrvKw] = &[
    SrvKw {
        kw: "init-addr",
        args: 1,
        default_ok: true,
        parse: init_addr,
    },
    SrvKw {
        kw: "resolve-net",
        args: 1,
        default_ok: true,
        parse: resolve_net,
    },
    SrvKw {
        kw: "resolve-opts",
        args: 1,
        default_ok: true,
        parse: resolve_opts,
    },
    SrvKw {
        kw: "resolve-prefer",
        args: 1,
        default_ok: true,
        parse: resolve_prefer,
    },
    SrvKw {
        kw: "resolvers",
        args: 1,
        default_ok: true,
        parse: |s, v| set_str(&mut s.opts.resolve.resolvers, v),
    },
    SrvKw {
        kw: "send-proxy",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.send_proxy.v1, true),
    },
    SrvKw {
        kw: "send-proxy-v2",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.send_proxy.v2, true),
    },
    SrvKw {
        kw: "send-proxy-v2-ssl",
        args: 0,
        default_ok: true,
        parse: |s, _| {
            s.opts.send_proxy.v2 = true;
            flag(&mut s.opts.send_proxy.ssl, true)
        },
    },
    SrvKw {
        kw: "send-proxy-v2-ssl-cn",
        args: 0,
        default_ok: true,
        parse: |s, _| {
            let pp = &mut s.opts.send_proxy;
            (pp.v2, pp.ssl) = (true, true);
            flag(&mut pp.cert_cn, true)
        },
    },
    SrvKw {
        kw: "slowstart",
        args: 1,
        default_ok: true,
        parse: |s, v| match parse_time(v) {
            Ok(d) => {
                // HAProxy keeps whole seconds, rounded up; 0 disables it.
                let secs = d.as_millis().div_ceil(1000) as u64;
                s.opts.slowstart = (secs > 0).then(|| Duration::from_secs(secs));
                Ok(())
            }
            Err(TimeError::BadChar(c)) => Err(format!(
                "unexpected character '{c}' in 'slowstart' argument of server {}.",
                s.name
            )),
            Err(_) => Err("'slowstart' expects a positive delay in milliseconds.".to_string()),
        },
    },
    SrvKw {
        kw: "addr",
        args: 1,
        default_ok: true,
        parse: srv_addr,
    },
    SrvKw {
        kw: "backup",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.backup, true),
    },
    SrvKw {
        kw: "ca-file",
        args: 1,
        default_ok: true,
        parse: |s, v| set_str(&mut s.opts.ca_file, v),
    },
    SrvKw {
        kw: "cookie",
        args: 1,
        default_ok: true,
        parse: |s, v| set_str(&mut s.opts.cookie, v),
    },
    SrvKw {
        kw: "check",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.check, true),
    },
    SrvKw {
        kw: "check-ssl",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.check_ssl, true),
    },
    SrvKw {
        kw: "crt",
        args: 1,
        default_ok: true,
        parse: |s, v| set_str(&mut s.opts.crt, v),
    },
    SrvKw {
        kw: "disabled",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.disabled, true),
    },
    SrvKw {
        kw: "downinter",
        args: 1,
        default_ok: true,
        parse: |s, v| opt_time(&mut s.opts.downinter, v, "downinter"),
    },
    SrvKw {
        kw: "enabled",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.disabled, false),
    },
    SrvKw {
        kw: "fall",
        args: 1,
        default_ok: true,
        parse: |s, v| positive(&mut s.opts.fall, v, "fall"),
    },
    SrvKw {
        kw: "fastinter",
        args: 1,
        default_ok: true,
        parse: |s, v| opt_time(&mut s.opts.fastinter, v, "fastinter"),
    },
    SrvKw {
        kw: "id",
        args: 1,
        default_ok: false,
        parse: srv_id,
    },
    SrvKw {
        kw: "inter",
        args: 1,
        default_ok: true,
        parse: srv_inter,
    },
    SrvKw {
        kw: "maxconn",
        args: 1,
        default_ok: true,
        parse: |s, v| opt_u32(&mut s.opts.maxconn, v, "maxconn"),
    },
    SrvKw {
        kw: "maxqueue",
        args: 1,
        default_ok: true,
        parse: |s, v| opt_u32(&mut s.opts.maxqueue, v, "maxqueue"),
    },
    SrvKw {
        kw: "check-proto",
        args: 1,
        default_ok: true,
        parse: check_proto,
    },
    SrvKw {
        kw: "check-alpn",
        args: 1,
        default_ok: true,
        parse: |s, v| {
            s.opts.check_alpn = Some(v.split(',').map(str::to_string).collect());
            Ok(())
        },
    },
    SrvKw {
        kw: "proto",
        args: 1,
        default_ok: true,
        parse: server_proto,
    },
    SrvKw {
        kw: "alpn",
        args: 1,
        default_ok: true,
        parse: |s, v| {
            s.opts.alpn = Some(v.split(',').map(str::to_string).collect());
            Ok(())
        },
    },
    SrvKw {
        kw: "max-reuse",
        args: 1,
        default_ok: true,
        // HAProxy reads it with atoi: a word that is no number is 0, negative is unlimited.
        parse: |s, v| {
            let n: i64 = v.trim().parse().unwrap_or(0);
            s.opts.max_reuse = u64::try_from(n).ok();
            Ok(())
        },
    },
    SrvKw {
        kw: "check-send-proxy",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.check_send_proxy, true),
    },
    SrvKw {
        kw: "no-backup",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.backup, false),
    },
    SrvKw {
        kw: "no-check",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.check, false),
    },
    SrvKw {
        kw: "no-check-ssl",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.check_ssl, false),
    },
    SrvKw {
        kw: "no-send-proxy",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.send_proxy.v1, false),
    },
    SrvKw {
        kw: "no-send-proxy-v2",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.send_proxy.v2, false),
    },
    SrvKw {
        kw: "no-send-proxy-v2-ssl",
        args: 0,
        default_ok: true,
        parse: |s, _| {
            s.opts.send_proxy.v2 = false;
            flag(&mut s.opts.send_proxy.ssl, false)
        },
    },
    SrvKw {
        kw: "no-send-proxy-v2-ssl-cn",
        args: 0,
        default_ok: true,
        parse: |s, _| {
            let pp = &mut s.opts.send_proxy;
            (pp.v2, pp.ssl) = (false, false);
            flag(&mut pp.cert_cn, false)
        },
    },
    SrvKw {
        kw: "no-ssl",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.ssl, false),
    },
    SrvKw {
        kw: "on-marked-down",
        args: 1,
        default_ok: true,
        parse: srv_on_marked_down,
    },
    SrvKw {
        kw: "on-marked-up",
        args: 1,
        default_ok: true,
        parse: srv_on_marked_up,
    },
    SrvKw {
        kw: "port",
        args: 1,
        default_ok: true,
        parse: srv_port,
    },
    SrvKw {
        kw: "proxy-v2-options",
        args: 1,
        default_ok: true,
        parse: srv_proxy_v2_options,
    },
    SrvKw {
        kw: "rise",
        args: 1,
        default_ok: true,
        parse: |s, v| positive(&mut s.opts.rise, v, "rise"),
    },
    SrvKw {
        kw: "sni",
        args: 1,
        default_ok: true,
        parse: |s, v| set_str(&mut s.opts.sni, v),
    },
    SrvKw {
        kw: "ssl",
        args: 0,
        default_ok: true,
        parse: |s, _| flag(&mut s.opts.ssl, true),
    },
    SrvKw {
        kw: "verify",
        args: 1,
        default_ok: true,
        parse: srv_verify,
    },
    SrvKw {
        kw: "weight",
        args: 1,
        default_ok: true,
        parse: srv_weight,
    },
];

fn flag(f: &mut bool, v: bool) -> Result<(), String> {
    *f = v;
    Ok(())
}

fn set_str(f: &mut Option<String>, v: &str) -> Result<(), String> {
    *f = Some(v.to_string());
    Ok(())
}

fn time_arg(v: &str, kw: &str) -> Result<Duration, String> {
    match parse_time(v) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err(format!("invalid value 0 for argument '{kw}'.")),
        Err(TimeError::Empty) => Err(format!("'{kw}' expects a time value.")),
        Err(TimeError::BadChar(c)) => {
            Err(format!("unexpected character '{c}' in '{kw}' argument."))
        }
        Err(TimeError::Overflow) => Err(format!(
            "timer overflow in argument '{v}' to '{kw}' (maximum value is 2147483647 ms or ~24.8 days)"
        )),
    }
}

fn opt_time(f: &mut Option<Duration>, v: &str, kw: &str) -> Result<(), String> {
    *f = Some(time_arg(v, kw)?);
    Ok(())
}

fn srv_inter(s: &mut SrvState, v: &str) -> Result<(), String> {
    s.opts.inter = time_arg(v, "inter")?;
    Ok(())
}

fn positive(f: &mut u32, v: &str, kw: &str) -> Result<(), String> {
    match parse_u32(v) {
        Some(n) if n > 0 => {
            *f = n;
            Ok(())
        }
        Some(_) => Err(format!("'{kw}' has to be > 0.")),
        None => Err(format!("'{kw}' expects an integer argument (got '{v}').")),
    }
}

fn opt_u32(f: &mut Option<u32>, v: &str, kw: &str) -> Result<(), String> {
    match parse_u32(v) {
        Some(n) => {
            *f = Some(n);
            Ok(())
        }
        None => Err(format!("'{kw}' expects an integer argument (got '{v}').")),
    }
}

fn srv_weight(s: &mut SrvState, v: &str) -> Result<(), String> {
    match parse_u32(v) {
        Some(n) if n <= 256 => {
            s.opts.weight = n;
            Ok(())
        }
        Some(n) => Err(format!(
            "weight of server {} is not within 0 and 256 ({n}).",
            s.name
        )),
        None => Err(format!("'weight' expects an integer argument (got '{v}').")),
    }
}

fn srv_id(s: &mut SrvState, v: &str) -> Result<(), String> {
    match parse_u32(v) {
        Some(n) if n > 0 => {
            s.id = Some(n);
            Ok(())
        }
        _ => Err("'id' : custom id has to be > 0.".to_string()),
    }
}

fn srv_port(s: &mut SrvState, v: &str) -> Result<(), String> {
    match parse_u32(v) {
        Some(n) if (1..=65535).contains(&n) => {
            s.opts.check_port = u16::try_from(n).ok();
            Ok(())
        }
        _ => Err(format!("'port' : invalid port '{v}' (expects 1-65535).")),
    }
}

/// `addr <ip>[:<port>]`: as HAProxy's tcpcheck connect, the port it carries is the check's
/// port unless `port` sets one (whichever order the two come in).
fn srv_addr(s: &mut SrvState, v: &str) -> Result<(), String> {
    if let Some(ip) = addr::parse_ip(v) {
        s.opts.check_addr = Some(ip);
        return Ok(());
    }
    match v.parse::<std::net::SocketAddr>() {
        Ok(sa) => {
            s.opts.check_addr = Some(sa.ip());
            if s.opts.check_port.is_none() && sa.port() != 0 {
                s.opts.check_port = Some(sa.port());
            }
            Ok(())
        }
        Err(_) => Err(format!("'addr' : invalid address: '{v}' in '{v}'.")),
    }
}

fn srv_verify(s: &mut SrvState, v: &str) -> Result<(), String> {
    s.opts.verify_set = true;
    match v {
        "none" => s.opts.verify_none = true,
        "required" => s.opts.verify_none = false,
        _ => {
            return Err(format!(
                "'verify' : unknown verify method '{v}', only 'none' and 'required' are supported."
            ));
        }
    }
    Ok(())
}

/// `proxy-v2-options <opt>[,<opt>]*`: the TLVs of the v2 header (`ssl` and `cert-*` add the
/// SSL TLV).
fn srv_proxy_v2_options(s: &mut SrvState, v: &str) -> Result<(), String> {
    let pp = &mut s.opts.send_proxy;
    for o in v.split(',') {
        let f = match o {
            "ssl" => &mut pp.ssl,
            "cert-cn" => &mut pp.cert_cn,
            "ssl-cipher" => &mut pp.ssl_cipher,
            "cert-sig" => &mut pp.cert_sig,
            "cert-key" => &mut pp.cert_key,
            "authority" => &mut pp.authority,
            "crc32c" => &mut pp.crc32c,
            "unique-id" => &mut pp.unique_id,
            _ => return Err(format!("'{o}' : proxy v2 option not implemented.")),
        };
        *f = true;
        if o.starts_with("cert-") || o == "ssl-cipher" {
            pp.ssl = true;
        }
    }
    Ok(())
}

fn srv_on_marked_down(s: &mut SrvState, v: &str) -> Result<(), String> {
    if v != "shutdown-sessions" {
        return Err(format!(
            "'on-marked-down' expects 'shutdown-sessions' but got '{v}'."
        ));
    }
    s.opts.on_marked_down_shutdown_sessions = true;
    Ok(())
}

fn srv_on_marked_up(s: &mut SrvState, v: &str) -> Result<(), String> {
    if v != "shutdown-backup-sessions" {
        return Err(format!(
            "'on-marked-up' expects 'shutdown-backup-sessions' but got '{v}'."
        ));
    }
    s.opts.on_marked_up_shutdown_backup_sessions = true;
    Ok(())
}

/// Applies the option words `args[from..]`; `Err` carries the first error's text.
/// HAProxy's words for a keyword given without its value.
fn missing_value(kw: &str) -> String {
    match kw {
        "check-proto" => bare("'check-proto' : missing value.".into()),
        "proto" => bare("'proto' : missing value.".into()),
        "alpn" => bare("'alpn' : missing the comma-delimited ALPN protocol suite.".into()),
        "check-alpn" => {
            bare("'check-alpn' : missing the comma-delimited ALPN protocol suite.".into())
        }
        _ => format!("'{kw}' expects an argument."),
    }
}

/// `proto <mux>`: the protocol of the traffic to the server (h1, h2 with prior knowledge; fcgi
/// and none are checked against the mode once the section is complete).
fn server_proto(s: &mut SrvState, v: &str) -> Result<(), String> {
    match v {
        "h1" | "h2" | "fcgi" | "none" => s.opts.proto = Some(v.to_string()),
        _ => {
            return Err(bare(format!("'proto' :  unknown MUX protocol '{v}'.")));
        }
    }
    Ok(())
}

/// `check-proto <mux>`: the protocol HTTP checks speak (h1, h2); HAProxy's FastCGI mux is not
/// built here.
fn check_proto(s: &mut SrvState, v: &str) -> Result<(), String> {
    match v {
        "h1" | "h2" => s.opts.check_proto = Some(v.to_string()),
        "fcgi" => s.pending.push("check-proto fcgi"),
        _ => {
            return Err(bare(format!(
                "'check-proto' :  unknown MUX protocol '{v}'."
            )));
        }
    }
    Ok(())
}

pub(crate) fn apply(
    st: &mut SrvState,
    args: &[String],
    from: usize,
    default_line: bool,
) -> Result<(), String> {
    let mut i = from;
    while let Some(w) = args.get(i) {
        let Some(kw) = SRV_KWS.iter().find(|k| k.kw == w) else {
            let mut m = format!("unknown keyword '{w}'.");
            if let Some(s) = suggest::best_match(w, SRV_KWS.iter().map(|k| k.kw)) {
                m = format!("unknown keyword '{w}'; did you mean '{s}' maybe ?");
            }
            return Err(m);
        };
        if default_line && !kw.default_ok {
            return Err(format!(
                "'{w}' option is not accepted in default-server sections."
            ));
        }
        let val = if kw.args == 0 {
            ""
        } else {
            match args.get(i + 1) {
                Some(v) if !v.is_empty() => v.as_str(),
                _ => return Err(missing_value(w)),
            }
        };
        (kw.parse)(st, val)?;
        i += 1 + kw.args;
    }
    Ok(())
}

pub(crate) fn kw_default_server(p: &mut P, args: &[String]) {
    let mut st = SrvState {
        name: "default-server".to_string(),
        opts: p.px.default_server.clone(),
        id: None,
        pending: Vec::new(),
    };
    match apply(&mut st, args, 1, true) {
        Ok(()) => {
            for k in &st.pending {
                p.pending(k);
            }
            p.px.default_server = st.opts;
        }
        Err(e) => p.alert(format!("'default-server' : {e}")),
    }
}

pub(crate) fn kw_server(p: &mut P, args: &[String]) {
    let (Some(name), Some(spec)) = (args.get(1), args.get(2)) else {
        p.alert("'server' expects <name> and <addr>[:<port>] as arguments.");
        return;
    };
    if let Some(c) = invalid_name_char(name) {
        p.alert(format!(
            "character '{c}' is not permitted in server name '{name}'."
        ));
        return;
    }
    add_server(p, name, spec, args, 3);
}

/// Reports a server keyword's error in HAProxy's layout (see [`BARE`]).
fn server_error(p: &mut P, who: &str, e: &str) {
    match e.strip_prefix(BARE) {
        Some(m) => {
            // Located in its text, and marking the file for HAProxy's closing `Error(s) found`.
            let loc = p.c.loc.clone();
            p.c.diags.push(super::diag::Diag::located(
                &loc.file,
                loc.line,
                format!("[{}:{}] : {who} : {m}", loc.file, loc.line),
            ));
        }
        None => p.alert(format!("{who} : {e}")),
    }
}

/// One server `name` at `spec` with the keywords from `args[from..]`; false when refused.
fn add_server(p: &mut P, name: &str, spec: &str, args: &[String], from: usize) -> bool {
    let who = format!("'server {}/{name}'", p.px.name);
    let (addr, fqdn, unix) = match addr::parse_unix_server(spec) {
        Some(Ok(u)) => (std::net::SocketAddr::from(([0, 0, 0, 0], 0)), None, Some(u)),
        Some(Err(e)) => {
            server_error(p, &who, &format!("{BARE}{e}"));
            return false;
        }
        None => match addr::parse_server_spec(spec) {
            Ok((a, f)) => (a, f, None),
            Err(e) => {
                p.alert(format!("{who} : {e}"));
                return false;
            }
        },
    };
    let mut st = SrvState {
        name: name.to_string(),
        opts: p.px.default_server.clone(),
        id: None,
        pending: Vec::new(),
    };
    if let Err(e) = apply(&mut st, args, from, false) {
        server_error(p, &who, &e);
        return false;
    }
    for k in &st.pending {
        p.pending(k);
    }
    if let Some(prev) = p.px.servers.iter().find(|s| s.name == *name) {
        let msg = format!(
            "{} '{}', another server named '{name}' was already defined at line {}, please use distinct names.",
            p.px.kind(),
            p.px.name,
            prev.loc.line
        );
        p.alert(msg);
        return false;
    }
    if let Some(id) = st.id
        && let Some(prev) = p.px.servers.iter().find(|s| s.id == id)
    {
        let msg = format!(
            "{who} : 'id' : custom id {id} already used at {} ('server {}').",
            prev.loc, prev.name
        );
        p.alert(msg);
        return false;
    }
    let loc = p.c.loc.clone();
    p.px.servers.push(Server {
        name: name.to_string(),
        addr,
        fqdn,
        unix,
        unresolved: false,
        id: st.id.unwrap_or(0),
        opts: st.opts,
        loc,
    });
    true
}

/// `server-template <prefix> <num>|<low>-<high> <fqdn>[:<port>] [params…]`: servers
/// `<prefix><n>` for each n, all on the same name (DNS fills them in).
pub(crate) fn kw_server_template(p: &mut P, args: &[String]) {
    let (Some(prefix), Some(range), Some(spec)) = (args.get(1), args.get(2), args.get(3)) else {
        p.alert_bare(
            "'server-template' expects <prefix> <nb | range> <addr>[:<port>] as arguments.",
        );
        return;
    };
    if prefix.is_empty() || range.is_empty() || spec.is_empty() {
        p.alert_bare(
            "'server-template' expects <prefix> <nb | range> <addr>[:<port>] as arguments.",
        );
        return;
    }
    let bounds = match range.split_once('-') {
        Some((a, b)) => a.parse::<u32>().ok().zip(b.parse::<u32>().ok()),
        None => range.parse::<u32>().ok().map(|n| (1, n)),
    };
    let Some((lo, hi)) = bounds.filter(|(lo, hi)| *lo >= 1 && lo <= hi) else {
        p.alert_bare(format!(
            "Wrong server-template number or range arg '{range}'."
        ));
        return;
    };
    if let Some(c) = invalid_name_char(prefix) {
        p.alert(format!(
            "character '{c}' is not permitted in server name '{prefix}'."
        ));
        return;
    }
    for n in lo..=hi {
        if !add_server(p, &format!("{prefix}{n}"), spec, args, 4) {
            return;
        }
    }
}
