//! The keyword table of proxy sections (`defaults`, `frontend`, `backend`, `listen`), with
//! HAProxy's capability columns, and the parsers of the proxy-level keywords. Rules and checks
//! live in `kw_rules`, server options in `kw_server`.

use super::diag::{Diag, Severity};
use super::model::{
    Balance, Bind, BindSsl, CrtSource, Facility, ForwardFor, Global, HttpCheckSend, HttpReuse,
    Level, LogFormatKind, LogTarget, Mode, Proxy, Redispatch, SslOptions, TlsVersion,
};
use super::parser::{Ctx, unknown_kw};
use super::values::{parse_time, parse_u32, time_error_msg};
use super::{
    addr, kw_capture, kw_comp, kw_cookie, kw_pages, kw_rules, kw_server, kw_small, suggest,
};

/// Allowed in `defaults` sections (named or anonymous).
pub(crate) const DEF: u8 = 1;
/// Needs the frontend capability (frontend, listen).
pub(crate) const FE: u8 = 2;
/// Needs the backend capability (backend, listen).
pub(crate) const BE: u8 = 4;
/// Allowed in named `defaults` sections only (rules that inheriting proxies run first).
pub(crate) const NDEF: u8 = 8;

/// One proxy keyword: where it may appear, and whether a misplaced use is an error (`strict`)
/// or, as HAProxy does, a warning and the line is ignored.
pub(crate) struct ProxyKw {
    pub kw: &'static str,
    pub caps: u8,
    pub strict: bool,
    pub parse: fn(&mut P, &[String]),
}

/// The parse context of a proxy keyword.
pub(crate) struct P<'a, 'b> {
    pub px: &'a mut Proxy,
    /// True while parsing a `defaults` section.
    pub defaults: bool,
    pub global: &'a Global,
    pub c: &'a mut Ctx<'b>,
    /// The line started with `no` (or `default`).
    pub no: bool,
}

impl P<'_, '_> {
    pub fn alert(&mut self, msg: impl Into<String>) {
        self.c.alert(msg);
    }
    /// An alert HAProxy prints as `[file:line] : msg` (without `parsing`).
    pub fn alert_bare(&mut self, msg: impl Into<String>) {
        let loc = self.c.loc.clone();
        self.c.diags.push(super::diag::Diag::global(
            super::diag::Severity::Alert,
            format!("[{}:{}] : {}", loc.file, loc.line, msg.into()),
        ));
    }
    pub fn warn(&mut self, msg: impl Into<String>) {
        self.c.warn(msg);
    }
    /// Records a keyword whose feature is not built yet.
    pub fn pending(&mut self, kw: &str) {
        let loc = self.c.loc.clone();
        self.px.pending.push((kw.to_string(), loc));
    }
    /// `frontend 'x'`, `backend 'x'`, `proxy 'x'` (listen) or `defaults 'x'`.
    pub fn desc(&self) -> String {
        format!("{} '{}'", self.px.kind(), self.px.name)
    }
    pub fn section(&self) -> &'static str {
        section_name(self.px, self.defaults)
    }
}

fn section_name(px: &Proxy, defaults: bool) -> &'static str {
    if defaults {
        return "defaults";
    }
    match (px.cap.frontend, px.cap.backend) {
        (true, true) => "listen",
        (true, false) => "frontend",
        _ => "backend",
    }
}

pub(crate) static PROXY_KWS: &[ProxyKw] = &[
    ProxyKw {
        kw: "acl",
        caps: FE | BE | NDEF,
        strict: true,
        parse: kw_rules::kw_acl,
    },
    ProxyKw {
        kw: "balance",
        caps: DEF | BE,
        strict: false,
        parse: kw_balance,
    },
    ProxyKw {
        kw: "unique-id-format",
        caps: DEF | FE,
        strict: false,
        parse: kw_unique_id_format,
    },
    ProxyKw {
        kw: "unique-id-header",
        caps: DEF | FE,
        strict: false,
        parse: kw_unique_id_header,
    },
    ProxyKw {
        kw: "compression",
        caps: DEF | FE | BE,
        strict: false,
        parse: kw_comp::kw_compression,
    },
    ProxyKw {
        kw: "filter",
        caps: DEF | FE | BE,
        strict: false,
        parse: kw_comp::kw_filter,
    },
    ProxyKw {
        kw: "cookie",
        caps: DEF | BE,
        strict: false,
        parse: kw_cookie::kw_cookie,
    },
    ProxyKw {
        kw: "persist",
        // HAProxy 2.6 takes it in a frontend too, silently (and ignores it there).
        caps: DEF | FE | BE,
        strict: false,
        parse: kw_cookie::kw_persist,
    },
    ProxyKw {
        kw: "force-persist",
        caps: BE,
        strict: false,
        parse: kw_cookie::kw_persist_rule,
    },
    ProxyKw {
        kw: "ignore-persist",
        caps: BE,
        strict: false,
        parse: kw_cookie::kw_persist_rule,
    },
    ProxyKw {
        kw: "dynamic-cookie-key",
        caps: DEF | BE,
        strict: false,
        parse: kw_cookie::kw_dynamic_cookie_key,
    },
    ProxyKw {
        kw: "hash-balance-factor",
        caps: DEF | BE,
        strict: false,
        parse: kw_hash_balance_factor,
    },
    ProxyKw {
        kw: "hash-type",
        caps: DEF | BE,
        strict: false,
        parse: kw_hash_type,
    },
    ProxyKw {
        kw: "bind",
        caps: FE,
        strict: true,
        parse: kw_bind,
    },
    ProxyKw {
        kw: "default-server",
        caps: DEF | BE,
        strict: false,
        parse: kw_server::kw_default_server,
    },
    ProxyKw {
        kw: "capture",
        caps: FE,
        strict: false,
        parse: kw_capture::kw_capture,
    },
    ProxyKw {
        kw: "declare",
        caps: FE,
        strict: false,
        parse: kw_capture::kw_declare,
    },
    ProxyKw {
        kw: "default_backend",
        caps: DEF | FE,
        strict: true,
        parse: kw_default_backend,
    },
    ProxyKw {
        kw: "disabled",
        caps: DEF | FE | BE,
        strict: false,
        parse: kw_disabled,
    },
    ProxyKw {
        kw: "enabled",
        caps: DEF | FE | BE,
        strict: false,
        parse: kw_enabled,
    },
    ProxyKw {
        kw: "http-check",
        caps: DEF | BE,
        strict: false,
        parse: kw_rules::kw_http_check,
    },
    ProxyKw {
        kw: "http-request",
        caps: FE | BE | NDEF,
        strict: true,
        parse: kw_rules::kw_http_request,
    },
    ProxyKw {
        kw: "http-response",
        caps: FE | BE | NDEF,
        strict: true,
        parse: kw_rules::kw_http_response,
    },
    ProxyKw {
        kw: "http-after-response",
        caps: FE | BE | NDEF,
        strict: true,
        parse: kw_rules::kw_http_after_response,
    },
    ProxyKw {
        kw: "http-reuse",
        caps: DEF | BE,
        strict: false,
        parse: kw_http_reuse,
    },
    ProxyKw {
        kw: "id",
        caps: FE | BE,
        strict: true,
        parse: kw_id,
    },
    ProxyKw {
        kw: "log",
        caps: DEF | FE | BE,
        strict: true,
        parse: kw_log,
    },
    ProxyKw {
        kw: "log-format",
        caps: DEF | FE,
        strict: false,
        parse: kw_log_format,
    },
    ProxyKw {
        kw: "maxconn",
        caps: DEF | FE,
        strict: false,
        parse: kw_maxconn,
    },
    ProxyKw {
        kw: "mode",
        caps: DEF | FE | BE,
        strict: true,
        parse: kw_mode,
    },
    ProxyKw {
        kw: "option",
        caps: DEF | FE | BE,
        strict: true,
        parse: kw_option,
    },
    ProxyKw {
        kw: "portcullis-relay",
        caps: DEF | FE | BE,
        strict: true,
        parse: kw_portcullis_relay,
    },
    ProxyKw {
        kw: "retries",
        caps: DEF | BE,
        strict: false,
        parse: kw_retries,
    },
    ProxyKw {
        kw: "server",
        caps: BE,
        strict: true,
        parse: kw_server::kw_server,
    },
    ProxyKw {
        kw: "server-template",
        caps: BE,
        strict: true,
        parse: kw_server::kw_server_template,
    },
    ProxyKw {
        kw: "stats",
        caps: DEF | FE | BE,
        strict: true,
        parse: kw_rules::kw_stats,
    },
    ProxyKw {
        kw: "stick",
        caps: BE,
        strict: false,
        parse: kw_rules::kw_stick,
    },
    ProxyKw {
        kw: "stick-table",
        caps: DEF | FE | BE,
        strict: true,
        parse: kw_rules::kw_stick_table,
    },
    ProxyKw {
        kw: "tcp-check",
        caps: DEF | BE,
        strict: false,
        parse: kw_rules::kw_tcp_check,
    },
    ProxyKw {
        kw: "tcp-request",
        caps: DEF | FE | BE,
        strict: true,
        parse: kw_rules::kw_tcp_request,
    },
    ProxyKw {
        kw: "tcp-response",
        // Its parser words the misplaced uses as HAProxy does.
        caps: DEF | FE | BE,
        strict: true,
        parse: kw_rules::kw_tcp_response,
    },
    ProxyKw {
        kw: "timeout",
        caps: DEF | FE | BE,
        strict: true,
        parse: kw_timeout,
    },
    ProxyKw {
        kw: "use_backend",
        caps: FE,
        strict: true,
        parse: kw_use_backend,
    },
];

/// Runs one line of a proxy section. `defaults` is `Some(named)` inside a `defaults` section.
pub(crate) fn dispatch(
    px: &mut Proxy,
    defaults: Option<bool>,
    global: &Global,
    c: &mut Ctx,
    words: &[String],
) {
    let no = matches!(words.first().map(String::as_str), Some("no" | "default"));
    let args = if no {
        words.get(1..).unwrap_or_default()
    } else {
        words
    };
    let Some(kw) = args.first() else {
        c.alert(format!("'{}' expects an option name.", words[0]));
        return;
    };
    let section = section_name(px, defaults.is_some());
    let all = || {
        PROXY_KWS
            .iter()
            .chain(kw_pages::PAGE_KWS)
            .chain(kw_small::SMALL_KWS)
    };
    let Some(row) = all().find(|k| k.kw == kw) else {
        c.alert(unknown_kw(kw, section, all().map(|k| k.kw)));
        return;
    };
    if no && kw != "option" && kw != "log" {
        c.alert("negation/default currently supported only for options and log.");
        return;
    }
    match defaults {
        Some(named) => {
            if row.caps & (DEF | NDEF) == 0 {
                c.alert(format!("'{kw}' not allowed in 'defaults' section."));
                return;
            }
            if row.caps & DEF == 0 && !named {
                c.alert(format!(
                    "'{kw}' not allowed in anonymous 'defaults' section."
                ));
                return;
            }
        }
        None => {
            let fe_ok = row.caps & FE != 0 && px.cap.frontend;
            let be_ok = row.caps & BE != 0 && px.cap.backend;
            if !fe_ok && !be_ok {
                let missing = if row.caps & FE != 0 {
                    "frontend"
                } else {
                    "backend"
                };
                let what = format!("{} '{}'", px.kind(), px.name);
                if row.strict && missing == "backend" {
                    // HAProxy 2.6 prints this one with its location twice.
                    let (f, l) = (&c.loc.file, c.loc.line);
                    let msg = format!(
                        "[{f}:{l}] : parsing [{f}:{l}] : '{kw}' not allowed because {what} has no {missing} capability."
                    );
                    c.diags.push(super::diag::Diag::located(f, l, msg));
                    return;
                }
                if missing == "backend" {
                    c.warn(format!(
                        "'{kw}' ignored because {what} has no {missing} capability."
                    ));
                    return;
                }
                match kw.as_str() {
                    "declare" => {
                        c.alert("'declare' only available in frontend or listen section");
                        return;
                    }
                    "log-format" => c.warn(format!(
                        "{what} : 'log-format' directive is ignored in backends."
                    )),
                    // HAProxy 2.6 takes it in a backend without a word.
                    "unique-id-format" => {}
                    "maxconn" => c.warn(format!(
                        "'maxconn' ignored because {what} has no frontend capability. Maybe you want 'fullconn' instead ?"
                    )),
                    _ => c.warn(format!(
                        "'{kw}' ignored because {what} has no frontend capability."
                    )),
                }
                // HAProxy's `warnifnotcap` lets the parser run on: its errors are reported,
                // what it sets is dropped (a scratch copy of the proxy takes it).
                let mut scratch = px.clone();
                let mut p = P {
                    px: &mut scratch,
                    defaults: false,
                    global,
                    c,
                    no,
                };
                (row.parse)(&mut p, args);
                // HAProxy keeps this one, and checks it once parsed (a loop is an error).
                if kw == "default_backend" {
                    px.default_backend = scratch.default_backend;
                }
                return;
            }
        }
    }
    let mut p = P {
        px,
        defaults: defaults.is_some(),
        global,
        c,
        no,
    };
    (row.parse)(&mut p, args);
}

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map_or("", String::as_str)
}

fn kw_mode(p: &mut P, args: &[String]) {
    if p.c.too_many(args, 1, 1) {
        return;
    }
    match arg(args, 1) {
        "http" => p.px.mode = Mode::Http,
        "tcp" => p.px.mode = Mode::Tcp,
        other => p.alert(format!("unknown proxy mode '{other}'.")),
    }
}

/// The smallest `max-unacked`: one skb may carry 64 kB, and a limit below a few of them would
/// move every session to userspace at its first burst.
pub const MIN_MAX_UNACKED: u64 = 256 << 10;

/// `portcullis-relay auto|kernel|userspace [max-unacked <size>] [bulk-rate <size>]` (portcullis
/// extension).
fn kw_portcullis_relay(p: &mut P, args: &[String]) {
    let engine = match arg(args, 1) {
        "auto" => super::model::RelayEngine::Auto,
        "kernel" => super::model::RelayEngine::Kernel,
        "userspace" => super::model::RelayEngine::Userspace,
        other => {
            p.alert(format!(
                "'portcullis-relay' expects 'auto', 'kernel' or 'userspace' (got '{other}')."
            ));
            return;
        }
    };
    let mut max_unacked = None;
    let mut bulk_rate = None;
    let mut i = 2;
    while let Some(word) = args.get(i) {
        match word.as_str() {
            "max-unacked" => {
                let v = arg(args, i + 1);
                match super::values::parse_size(v) {
                    Some(n) if n >= MIN_MAX_UNACKED => max_unacked = Some(n),
                    Some(_) => {
                        p.alert(format!(
                            "'portcullis-relay' : 'max-unacked' must be at least 256k (got '{v}')."
                        ));
                        return;
                    }
                    None => {
                        p.alert(format!(
                            "'portcullis-relay' : 'max-unacked' expects a size (got '{v}')."
                        ));
                        return;
                    }
                }
                i += 2;
            }
            "bulk-rate" => {
                let v = arg(args, i + 1);
                match super::values::parse_size(v) {
                    Some(n) => bulk_rate = Some(n),
                    None => {
                        p.alert(format!(
                            "'portcullis-relay' : 'bulk-rate' expects a size per second, or 0 (got '{v}')."
                        ));
                        return;
                    }
                }
                i += 2;
            }
            other => {
                p.alert(format!(
                    "'portcullis-relay' : unknown argument '{other}' (expects 'max-unacked <size>' or 'bulk-rate <size>')."
                ));
                return;
            }
        }
    }
    p.px.relay = super::model::Relay {
        engine: Some(engine),
        max_unacked,
        bulk_rate,
    };
}

fn kw_balance(p: &mut P, args: &[String]) {
    // HAProxy's backend_parse_balance: words after what an algorithm reads are ignored.
    match parse_balance(&args[1.min(args.len())..]) {
        Ok(Some(algo)) => p.px.balance = algo,
        Ok(None) => p.pending(&format!("balance {}", arg(args, 1))),
        Err(e) => p.alert(format!("balance {e}")),
    }
}

/// `balance` after the keyword: the algorithm, `None` for one portcullis does not have yet, or
/// HAProxy 2.6's error text (after `balance `).
pub(crate) fn parse_balance(a: &[String]) -> Result<Option<Balance>, String> {
    let at = |i: usize| a.get(i).map_or("", String::as_str);
    let algo = at(0);
    let positive = |i: usize| -> Result<u32, String> {
        let v = at(i + 1);
        match super::values::atoi(v) {
            n if n > 0 => Ok(u32::try_from(n).unwrap_or(u32::MAX)),
            _ => Err(format!(
                "{algo} : '{}' expects a positive integer (got '{v}').",
                at(i)
            )),
        }
    };
    Ok(Some(match algo {
        "" | "roundrobin" => Balance::Roundrobin,
        "static-rr" => Balance::StaticRr,
        "leastconn" => Balance::Leastconn,
        "first" => Balance::First,
        "source" => Balance::Source,
        _ if algo.starts_with("random") => {
            let rest = &algo["random".len()..];
            let mut draws = 2;
            if let Some(inner) = rest.strip_prefix('(').filter(|i| !i.starts_with(')')) {
                let (n, end) = super::values::strtol(inner);
                match end.chars().next() {
                    Some(')') => {}
                    None => return Err("random : missing closing parenthesis.".into()),
                    Some(c) => {
                        return Err(format!(
                            "random : unexpected character '{c}' after argument."
                        ));
                    }
                }
                if n < 1 {
                    return Err("random : number of draws must be at least 1.".into());
                }
                draws = u32::try_from(n).unwrap_or(u32::MAX);
            }
            Balance::Random { draws }
        }
        "uri" => {
            let (mut len, mut depth, mut whole, mut path_only) = (0, 0, false, false);
            let mut i = 1;
            while !at(i).is_empty() {
                match at(i) {
                    "len" => {
                        len = positive(i)?;
                        i += 2;
                    }
                    "depth" => {
                        depth = positive(i)?;
                        i += 2;
                    }
                    "whole" => {
                        whole = true;
                        i += 1;
                    }
                    "path-only" => {
                        path_only = true;
                        i += 1;
                    }
                    other => {
                        return Err(format!(
                            "uri only accepts parameters 'len', 'depth', 'path-only', and 'whole' (got '{other}')."
                        ));
                    }
                }
            }
            Balance::Uri {
                len,
                depth,
                whole,
                path_only,
            }
        }
        "url_param" => {
            if at(1).is_empty() {
                return Err("url_param requires an URL parameter name.".into());
            }
            let check_post = match at(2) {
                "" => false,
                "check_post" => true,
                other => {
                    return Err(format!(
                        "url_param only accepts 'check_post' modifier (got '{other}')."
                    ));
                }
            };
            Balance::UrlParam {
                name: at(1).to_string(),
                check_post,
            }
        }
        "hash" => {
            if at(1).is_empty() {
                return Err("hash requires a sample expression.".into());
            }
            if !at(2).is_empty() {
                return Err(format!("hash takes no other argument (got '{}').", at(2)));
            }
            Balance::Hash(at(1).to_string())
        }
        _ if algo.starts_with("hdr(") => {
            let name = algo["hdr(".len()..].split(')').next().unwrap_or("");
            if name.is_empty() || !algo["hdr(".len()..].contains(')') {
                return Err("hdr requires an http header field name.".into());
            }
            let domain_only = match at(1) {
                "" => false,
                "use_domain_only" => true,
                other => {
                    return Err(format!(
                        "{algo} only accepts 'use_domain_only' modifier (got '{other}')."
                    ));
                }
            };
            Balance::Hdr {
                name: name.to_ascii_lowercase(),
                domain_only,
            }
        }
        _ if algo.starts_with("rdp-cookie") => {
            let rest = &algo["rdp-cookie".len()..];
            let ok = rest.is_empty()
                || rest
                    .strip_prefix('(')
                    .is_some_and(|r| r.find(')').is_some_and(|e| e > 0));
            if !ok {
                return Err("rdp-cookie : missing cookie name.".into());
            }
            // HAProxy hashes the cookie's value as `balance hash` does its sample (and goes
            // round the map or the ring without one).
            let name = rest
                .strip_prefix('(')
                .and_then(|r| r.split(')').next())
                .unwrap_or("mstshash");
            Balance::Hash(format!("req.rdp_cookie({name})"))
        }
        _ => {
            return Err("only supports 'roundrobin', 'static-rr', 'leastconn', 'source', 'uri', 'url_param', 'hdr(name)' and 'rdp-cookie(name)' options.".into());
        }
    }))
}

/// `hash-balance-factor <n>`: consistent hashing with bounded loads (0 or more than 100).
fn kw_hash_balance_factor(p: &mut P, args: &[String]) {
    if arg(args, 1).is_empty() {
        p.alert("'hash-balance-factor' expects an integer argument.");
        return;
    }
    let n = super::values::atoi(arg(args, 1));
    if n != 0 && n <= 100 {
        p.alert("'hash-balance-factor' must be 0 or greater than 100.");
        return;
    }
    p.px.hash_balance_factor = u32::try_from(n).unwrap_or(0);
}

/// `hash-type map-based|consistent [<function> [avalanche]]` (consistent alone: sdbm with
/// avalanche, as HAProxy).
fn kw_hash_type(p: &mut P, args: &[String]) {
    use super::model::{HashFn, HashType};
    let consistent = match arg(args, 1) {
        "consistent" => true,
        "map-based" => false,
        "avalanche" => {
            p.alert(format!(
                "experimental feature '{0} {1}' is not supported anymore, please use '{0} map-based sdbm avalanche' instead.",
                arg(args, 0),
                arg(args, 1)
            ));
            return;
        }
        _ => {
            p.alert(format!(
                "'{}' only supports 'consistent' and 'map-based'.",
                arg(args, 0)
            ));
            return;
        }
    };
    let mut ht = HashType {
        consistent,
        func: HashFn::Sdbm,
        avalanche: consistent,
    };
    if !arg(args, 2).is_empty() {
        ht.func = match arg(args, 2) {
            "sdbm" => HashFn::Sdbm,
            "djb2" => HashFn::Djb2,
            "wt6" => HashFn::Wt6,
            "crc32" => HashFn::Crc32,
            _ => {
                p.alert(format!(
                    "'{}' only supports 'sdbm', 'djb2', 'crc32', or 'wt6' hash functions.",
                    arg(args, 0)
                ));
                return;
            }
        };
        ht.avalanche = match arg(args, 3) {
            "avalanche" => true,
            "" => false,
            _ => {
                p.alert(format!(
                    "'{}' only supports 'avalanche' as a modifier for hash functions.",
                    arg(args, 0)
                ));
                return;
            }
        };
    }
    p.px.hash_type = ht;
}

fn kw_http_reuse(p: &mut P, args: &[String]) {
    let v = match arg(args, 1) {
        "never" => HttpReuse::Never,
        "safe" => HttpReuse::Safe,
        "aggressive" => HttpReuse::Aggressive,
        "always" => HttpReuse::Always,
        _ => {
            p.alert("'http-reuse' only supports 'never', 'safe', 'aggressive', 'always'.");
            return;
        }
    };
    if !p.c.too_many(args, 1, 1) {
        p.px.http_reuse = v;
    }
}

fn kw_retries(p: &mut P, args: &[String]) {
    if p.c.too_many(args, 1, 1) {
        return;
    }
    match parse_u32(arg(args, 1)) {
        Some(n) => p.px.retries = n,
        None => p.alert("'retries' expects an integer argument (dispatch counts for one)."),
    }
}

fn kw_maxconn(p: &mut P, args: &[String]) {
    if p.c.too_many(args, 1, 1) {
        return;
    }
    match parse_u32(arg(args, 1)) {
        Some(n) => p.px.maxconn = Some(n),
        None => p.alert(format!(
            "'maxconn' expects an integer argument (got '{}').",
            arg(args, 1)
        )),
    }
}

fn kw_id(p: &mut P, args: &[String]) {
    if p.c.too_many(args, 1, 1) {
        return;
    }
    match parse_u32(arg(args, 1)) {
        Some(n) if n > 0 => p.px.id = n,
        _ => p.alert("custom id has to be > 0."),
    }
}

fn kw_disabled(p: &mut P, args: &[String]) {
    if !p.c.too_many(args, 1, 0) {
        p.px.disabled = true;
    }
}

fn kw_enabled(p: &mut P, args: &[String]) {
    if !p.c.too_many(args, 1, 0) {
        p.px.disabled = false;
    }
}

fn kw_default_backend(p: &mut P, args: &[String]) {
    if p.c.too_many(args, 1, 1) {
        return;
    }
    match args.get(1).filter(|s| !s.is_empty()) {
        Some(b) => p.px.default_backend = Some((b.clone(), p.c.loc.clone())),
        None => p.alert("'default_backend' expects a backend name."),
    }
}

fn kw_use_backend(p: &mut P, args: &[String]) {
    let Some(b) = args.get(1).filter(|s| !s.is_empty()) else {
        p.alert("'use_backend' expects a backend name.");
        return;
    };
    let cond = match args.get(2).map(String::as_str) {
        None => None,
        Some("if" | "unless") => Some(kw_rules::cond(p, args, 2)),
        Some(other) => {
            p.alert(format!(
                "unexpected keyword '{other}' after switching rule, only 'if' and 'unless' are allowed."
            ));
            return;
        }
    };
    p.px.use_backends.push(super::model::UseBackend {
        backend: b.clone(),
        cond,
        loc: p.c.loc.clone(),
    });
}

fn kw_unique_id_format(p: &mut P, args: &[String]) {
    match args.len() {
        0 | 1 => p.alert("unique-id-format expects an argument."),
        2 => p.px.unique_id_format = Some((args[1].clone(), p.c.loc.clone())),
        _ => p.alert("unique-id-format expects only one argument, don't forget to escape spaces!"),
    }
}

fn kw_unique_id_header(p: &mut P, args: &[String]) {
    match args.get(1) {
        Some(h) if !h.is_empty() => p.px.unique_id_header = Some(h.clone()),
        _ => p.alert("unique-id-header expects an argument."),
    }
}

fn kw_log_format(p: &mut P, args: &[String]) {
    match args.len() {
        0 | 1 => p.alert("log-format expects an argument."),
        2 => p.px.log_format = Some((args[1].clone(), p.c.loc.clone())),
        _ => p.alert("log-format expects only one argument, don't forget to escape spaces!"),
    }
}

fn kw_log(p: &mut P, args: &[String]) {
    if p.no {
        if !p.c.too_many(args, 1, 0) {
            p.px.logs.clear();
        }
        return;
    }
    if arg(args, 1) == "global" {
        if !p.c.too_many(args, 2, 0) {
            // HAProxy copies the global loggers known at this point.
            let g = p.global.logs.clone();
            p.px.logs.extend(g);
        }
        return;
    }
    if let Some(t) = parse_log_target(p.c, args) {
        p.px.logs.push(t);
    }
}

const FACILITIES: &[&str] = &[
    "kern", "user", "mail", "daemon", "auth", "syslog", "lpr", "news", "uucp", "cron", "auth2",
    "ftp", "ntp", "audit", "alert", "cron2", "local0", "local1", "local2", "local3", "local4",
    "local5", "local6", "local7",
];

pub(crate) const LEVELS: &[&str] = &[
    "emerg", "alert", "crit", "err", "warning", "notice", "info", "debug",
];

fn log_format_kind(s: &str) -> Option<LogFormatKind> {
    Some(match s {
        "local" => LogFormatKind::Local,
        "rfc3164" => LogFormatKind::Rfc3164,
        "rfc5424" => LogFormatKind::Rfc5424,
        "short" => LogFormatKind::Short,
        "priority" => LogFormatKind::Priority,
        "timed" => LogFormatKind::Timed,
        "iso" => LogFormatKind::Iso,
        "raw" => LogFormatKind::Raw,
        _ => return None,
    })
}

fn index_of(list: &[&str], s: &str) -> Option<u8> {
    list.iter()
        .position(|x| *x == s)
        .and_then(|i| u8::try_from(i).ok())
}

/// `log <target> [len <n>] [format <fmt>] [sample <r>:<s>] <facility> [<level> [<minlevel>]]`
pub(crate) fn parse_log_target(c: &mut Ctx, args: &[String]) -> Option<LogTarget> {
    let target = arg(args, 1);
    if target.is_empty() || args.len() < 3 {
        c.alert("log : expects <address> and <facility>  as arguments");
        return None;
    }
    let mut i = 2;
    let mut format = LogFormatKind::Local;
    let mut sample = None;
    loop {
        match arg(args, i) {
            "len" => {
                if parse_u32(arg(args, i + 1)).is_none_or(|n| n < 80) {
                    c.alert(format!(
                        "log : invalid max length '{}' (must be at least 80)",
                        arg(args, i + 1)
                    ));
                    return None;
                }
            }
            "format" => match log_format_kind(arg(args, i + 1)) {
                Some(f) => format = f,
                None => {
                    c.alert(format!("log : unknown log format '{}'", arg(args, i + 1)));
                    return None;
                }
            },
            "sample" => match super::model::LogSample::parse(arg(args, i + 1)) {
                Ok(smp) => sample = Some(smp),
                Err(e) => {
                    c.alert(e);
                    return None;
                }
            },
            _ => break,
        }
        i += 2;
    }
    let fac = arg(args, i);
    let Some(facility) = index_of(FACILITIES, fac).map(Facility) else {
        if fac.is_empty() {
            c.alert("log : expects <address> and <facility>  as arguments");
        } else {
            c.alert(format!("log : unknown log facility '{fac}'"));
        }
        return None;
    };
    let mut level = None;
    if let Some(l) = args.get(i + 1) {
        match index_of(LEVELS, l) {
            Some(n) => level = Some(Level(n)),
            None => {
                c.alert(format!("log : unknown optional log level '{l}'"));
                return None;
            }
        }
    }
    if let Some(l) = args.get(i + 2)
        && index_of(LEVELS, l).is_none()
    {
        c.alert(format!("log : unknown optional minimum log level '{l}'"));
        return None;
    }
    if let Some(extra) = args.get(i + 3) {
        c.alert(format!(
            "log : cannot handle unexpected argument '{extra}'."
        ));
        return None;
    }
    Some(match target {
        "stdout" | "fd@1" => LogTarget::Stdout {
            stderr: false,
            format,
            facility,
            level,
            sample: sample.clone(),
        },
        "stderr" | "fd@2" => LogTarget::Stdout {
            stderr: true,
            format,
            facility,
            level,
            sample: sample.clone(),
        },
        t if t.starts_with('/') || t.starts_with("unix@") => LogTarget::Unix {
            path: t.trim_start_matches("unix@").to_string(),
            format,
            facility,
            level,
            sample: sample.clone(),
        },
        t if t.starts_with("ring@") || t.starts_with("fd@") => {
            c.alert(format!("log : target '{t}' is not supported yet"));
            return None;
        }
        t => match addr::parse_log_inet(t, c.sys.resolve) {
            Ok(a) => LogTarget::Udp {
                addr: a,
                format,
                facility,
                level,
                sample: sample.clone(),
            },
            Err(e) => {
                c.alert(format!("log : {e}"));
                return None;
            }
        },
    })
}

pub(crate) const TIMEOUTS: &[(&str, u8)] = &[
    ("client", FE),
    ("server", BE),
    ("connect", BE),
    ("check", BE),
    ("queue", BE),
    ("http-keep-alive", FE | BE),
    ("http-request", FE | BE),
    ("tunnel", BE),
    ("tarpit", FE | BE),
    ("client-fin", FE),
    ("server-fin", BE),
];

fn kw_timeout(p: &mut P, args: &[String]) {
    let name = arg(args, 1);
    let Some(&(_, caps)) = TIMEOUTS.iter().find(|(n, _)| *n == name) else {
        p.alert(format!(
            "'timeout' supports 'client', 'server', 'connect', 'check', 'queue', 'http-keep-alive', 'http-request', 'tunnel', 'tarpit', 'client-fin' and 'server-fin' (got '{name}')"
        ));
        return;
    };
    if p.c.too_many(args, 2, 1) {
        return;
    }
    let what = format!("timeout {name}");
    let d = match parse_time(arg(args, 2)) {
        Ok(d) => d,
        Err(e) => {
            p.alert(time_error_msg(&e, arg(args, 2), &what));
            return;
        }
    };
    if !p.defaults && !has_cap(p.px, caps) {
        let missing = if caps & FE != 0 {
            "frontend"
        } else {
            "backend"
        };
        let desc = p.desc();
        p.warn(format!(
            "'{what}' will be ignored because {desc} has no {missing} capability"
        ));
        return;
    }
    // 0 means "no timeout" in HAProxy.
    let v = (!d.is_zero()).then_some(d);
    let t = &mut p.px.timeouts;
    match name {
        "client" => t.client = v,
        "server" => t.server = v,
        "connect" => t.connect = v,
        "check" => t.check = v,
        "queue" => t.queue = v,
        "http-keep-alive" => t.http_keep_alive = v,
        "http-request" => t.http_request = v,
        "tunnel" => t.tunnel = v,
        "tarpit" => t.tarpit = v,
        "client-fin" => t.client_fin = v,
        _ => t.server_fin = v,
    }
}

/// `option` names: (name, caps FE/BE, pending).
pub(crate) const OPTIONS: &[(&str, u8, bool)] = &[
    ("abortonclose", BE, true),
    ("clitcpka", FE, false),
    ("dontlog-normal", FE, false),
    ("http-buffer-request", FE | BE, false),
    ("http-ignore-probes", FE, true),
    ("log-separate-errors", FE, false),
    ("logasap", FE, false),
    ("redis-check", BE, true),
    ("srvtcpka", BE, false),
    ("ssl-hello-chk", BE, true),
    ("tcp-smart-accept", FE, false),
    ("tcp-smart-connect", BE, false),
    ("tcpka", FE | BE, false),
    ("allbackups", BE, false),
    ("persist", BE, false),
    ("dontlognull", FE, false),
    ("forwardfor", FE | BE, false),
    ("http-keep-alive", FE | BE, false),
    ("http-server-close", FE | BE, false),
    ("httpchk", BE, false),
    ("httpclose", FE | BE, false),
    ("httplog", FE, false),
    ("idle-close-on-response", FE, false),
    ("log-health-checks", BE, false),
    ("redispatch", BE, false),
    ("socket-stats", FE, true),
    ("splice-auto", FE | BE, false),
    ("splice-request", FE | BE, false),
    ("splice-response", FE | BE, false),
    ("tcp-check", BE, false),
    ("tcplog", FE, false),
];

fn kw_option(p: &mut P, args: &[String]) {
    let name = arg(args, 1);
    let Some(&(_, caps, pending)) = OPTIONS.iter().find(|(n, _, _)| *n == name) else {
        if p.no {
            p.alert(format!(
                "negation/default is not supported for option '{name}'."
            ));
        } else {
            let mut msg = format!("unknown option '{name}'.");
            if let Some(m) = suggest::best_match(name, OPTIONS.iter().map(|o| o.0)) {
                msg = format!("unknown option '{name}'; did you mean '{m}' maybe ?");
            }
            p.alert(msg);
        }
        return;
    };
    if !p.defaults && !has_cap(p.px, caps) {
        let missing = if caps & FE != 0 {
            "frontend"
        } else {
            "backend"
        };
        let desc = p.desc();
        if matches!(name, "httplog" | "tcplog" | "httpslog") && missing == "frontend" {
            p.warn(format!(
                "{desc} : 'option {name}' directive is ignored in backends."
            ));
        } else {
            p.warn(format!(
                "'{name}' ignored because {desc} has no {missing} capability."
            ));
        }
        return;
    }
    let on = !p.no;
    if p.no && p.c.too_many(args, 2, 0) {
        return;
    }
    let o = &mut p.px.options;
    match name {
        "abortonclose"
        | "allbackups"
        | "persist"
        | "dontlognull"
        | "log-health-checks"
        | "socket-stats"
        | "idle-close-on-response"
        | "tcplog"
        | "httpclose"
        | "http-server-close"
        | "http-keep-alive"
        | "splice-auto"
        | "splice-request"
        | "splice-response"
        | "clitcpka"
        | "dontlog-normal"
        | "http-ignore-probes"
        | "http-buffer-request"
        | "log-separate-errors"
        | "logasap"
        | "redis-check"
        | "srvtcpka"
        | "ssl-hello-chk"
        | "tcp-smart-accept"
        | "tcp-smart-connect"
        | "tcpka"
        | "tcp-check" => {
            if p.c.too_many(args, 2, 0) {
                return;
            }
            let o = &mut p.px.options;
            match name {
                // Accept-time and connect-time optimisations (TCP_DEFER_ACCEPT, delayed
                // connect) that change no observable behaviour: accepted as HAProxy does.
                "tcp-smart-accept" | "tcp-smart-connect" => {}
                // Not built yet: recorded as pending below (the start refuses them).
                "http-ignore-probes" | "redis-check" | "ssl-hello-chk" => {}
                "logasap" => o.logasap = on,
                "http-buffer-request" => o.http_buffer_request = on,
                "clitcpka" => o.clitcpka = on,
                "srvtcpka" => o.srvtcpka = on,
                // Each side reads its own half: the frontend the client's, the backend the
                // server's.
                "tcpka" => {
                    o.clitcpka = on;
                    o.srvtcpka = on;
                }
                "dontlog-normal" => o.dontlog_normal = on,
                "log-separate-errors" => o.log_separate_errors = on,
                "abortonclose" => o.abortonclose = on,
                "allbackups" => o.allbackups = on,
                "persist" => o.persist = on,
                "dontlognull" => o.dontlognull = on,
                "log-health-checks" => o.log_health_checks = on,
                "socket-stats" => o.socket_stats = on,
                "idle-close-on-response" => o.idle_close_on_response = on,
                "tcp-check" => o.tcp_check = on,
                // Splicing is on by default (the relay's bulk rule decides when): only the
                // negations change anything.
                "splice-auto" => {
                    o.no_splice_request = !on;
                    o.no_splice_response = !on;
                }
                "splice-request" => o.no_splice_request = !on,
                "splice-response" => o.no_splice_response = !on,
                "tcplog" => {
                    o.tcplog = on;
                    if on {
                        o.httplog = false;
                        o.httplog_clf = false;
                        p.px.log_format = None;
                    }
                }
                // The three connection modes exclude each other; the last one wins.
                _ => {
                    if on {
                        o.httpclose = false;
                        o.http_server_close = false;
                        o.http_keep_alive = false;
                    }
                    match name {
                        "httpclose" => o.httpclose = on,
                        "http-server-close" => o.http_server_close = on,
                        _ => o.http_keep_alive = on,
                    }
                }
            }
        }
        "httplog" => {
            let clf = match args.get(2).map(String::as_str) {
                None => false,
                Some("clf") if args.len() == 3 => true,
                _ => {
                    p.alert("keyword 'httplog' only supports option 'clf'.");
                    return;
                }
            };
            o.httplog = on;
            o.httplog_clf = on && clf;
            if on {
                o.tcplog = false;
                // The format it names replaces a `log-format` set before, inherited from
                // `defaults` included (HAProxy: one format string, the last setting wins).
                p.px.log_format = None;
            }
        }
        "forwardfor" => {
            if !on {
                o.forwardfor = None;
                return;
            }
            if let Some(ff) = parse_forwardfor(p, args) {
                p.px.options.forwardfor = Some(ff);
            }
        }
        "redispatch" => {
            if !on {
                o.redispatch = None;
                return;
            }
            if p.c.too_many(args, 2, 1) {
                return;
            }
            let interval = match args.get(2) {
                None => -1,
                Some(v) => match v.parse::<i32>() {
                    Ok(n) => n,
                    Err(_) => {
                        p.alert(format!(
                            "'option redispatch' expects an integer interval (got '{v}')."
                        ));
                        return;
                    }
                },
            };
            // `option redispatch 0` disables redispatching.
            p.px.options.redispatch = (interval != 0).then_some(Redispatch { interval });
        }
        _ => {
            // httpchk
            if !on {
                o.httpchk = None;
                return;
            }
            if p.c.too_many(args, 2, 3) {
                return;
            }
            super::kw_rules::own_http_checks(p.px);
            let mut send = HttpCheckSend::default();
            match args.len() {
                3 => send.uri = args[2].clone(),
                4 => {
                    send.method = args[2].clone();
                    send.uri = args[3].clone();
                }
                5 => {
                    send.method = args[2].clone();
                    send.uri = args[3].clone();
                    send.version = args[4].clone();
                }
                _ => {}
            }
            p.px.options.httpchk = Some(super::model::HttpCheck {
                send,
                ..Default::default()
            });
        }
    }
    if pending && on {
        p.pending(&format!("option {name}"));
    }
}

fn parse_forwardfor(p: &mut P, args: &[String]) -> Option<ForwardFor> {
    let mut ff = ForwardFor {
        except: None,
        header: "X-Forwarded-For".to_string(),
        if_none: false,
    };
    let mut i = 2;
    while let Some(w) = args.get(i) {
        match w.as_str() {
            "except" => match args.get(i + 1).and_then(|n| addr::parse_net(n)) {
                Some(net) => {
                    ff.except = Some(net);
                    i += 2;
                }
                None => {
                    p.alert("'option forwardfor except' expects <address>[/mask] as argument.");
                    return None;
                }
            },
            "header" => match args.get(i + 1).filter(|h| !h.is_empty()) {
                Some(h) => {
                    ff.header = h.clone();
                    i += 2;
                }
                None => {
                    p.alert("'option forwardfor header' requires a header name.");
                    return None;
                }
            },
            "if-none" => {
                ff.if_none = true;
                i += 1;
            }
            _ => {
                p.alert("'option forwardfor' only supports optional values: 'except', 'header' and 'if-none'.");
                return None;
            }
        }
    }
    Some(ff)
}

fn tls_version(s: &str) -> Option<TlsVersion> {
    Some(match s {
        "SSLv3" => TlsVersion::Ssl3,
        "TLSv1.0" => TlsVersion::Tls10,
        "TLSv1.1" => TlsVersion::Tls11,
        "TLSv1.2" => TlsVersion::Tls12,
        "TLSv1.3" => TlsVersion::Tls13,
        _ => return None,
    })
}

/// One TLS protocol option shared by `bind` and `ssl-default-bind-options`. Returns how many
/// value words it consumed after `word`, or `Err` with HAProxy's message.
pub(crate) fn parse_ssl_option(
    o: &mut SslOptions,
    word: &str,
    next: Option<&String>,
) -> Result<usize, String> {
    let raise_min = |o: &mut SslOptions, v: TlsVersion| {
        if o.min_ver.is_none_or(|m| m < v) {
            o.min_ver = Some(v);
        }
    };
    match word {
        "ssl-min-ver" | "ssl-max-ver" => {
            let v = next.map_or("", String::as_str);
            if v.is_empty() {
                return Err(format!("'{word}' : missing the ssl/tls version"));
            }
            let ver = tls_version(v).ok_or_else(|| format!("'{v}' : unknown ssl/tls version"))?;
            if word == "ssl-min-ver" {
                o.min_ver = Some(ver);
            } else {
                o.max_ver = Some(ver);
            }
            Ok(1)
        }
        "no-tls-tickets" => {
            o.no_tls_tickets = true;
            Ok(0)
        }
        "prefer-client-ciphers" => {
            o.prefer_client_ciphers = true;
            Ok(0)
        }
        // SSLv3 is never offered; the others map onto the version range.
        "no-sslv3" => Ok(0),
        "no-tlsv10" => {
            raise_min(o, TlsVersion::Tls11);
            Ok(0)
        }
        "no-tlsv11" => {
            raise_min(o, TlsVersion::Tls12);
            Ok(0)
        }
        "no-tlsv13" => {
            o.max_ver = Some(TlsVersion::Tls12);
            Ok(0)
        }
        "force-tlsv12" => {
            o.min_ver = Some(TlsVersion::Tls12);
            o.max_ver = Some(TlsVersion::Tls12);
            Ok(0)
        }
        "force-tlsv13" => {
            o.min_ver = Some(TlsVersion::Tls13);
            o.max_ver = Some(TlsVersion::Tls13);
            Ok(0)
        }
        other => Err(format!("unknown keyword '{other}'.")),
    }
}

pub(crate) const BIND_OPTS: &[&str] = &[
    "accept-proxy",
    "alpn",
    "ciphers",
    "ciphersuites",
    "crt",
    "crt-list",
    "curves",
    "force-tlsv12",
    "force-tlsv13",
    "maxconn",
    "name",
    "no-sslv3",
    "no-tls-tickets",
    "no-tlsv10",
    "no-tlsv11",
    "no-tlsv13",
    "prefer-client-ciphers",
    "ssl",
    "ssl-max-ver",
    "ssl-min-ver",
];

fn kw_bind(p: &mut P, args: &[String]) {
    let Some(spec) = args.get(1).filter(|s| !s.is_empty()) else {
        p.alert(
            "'bind' expects {<path>|[addr1]:port1[-end1]}{,[addr]:port[-end]}... as arguments.",
        );
        return;
    };
    let addrs = match addr::parse_bind(spec, p.c.sys.resolve) {
        Ok(a) => a,
        Err(e) => {
            p.alert(format!("'bind' : {e}"));
            return;
        }
    };
    let head = format!("'bind {spec}' in section '{}'", p.section());
    let mut ssl_on = false;
    let mut ssl = BindSsl::default();
    let mut name = None;
    let mut maxconn = None;
    let mut accept_proxy = false;
    let mut proto = None;
    let mut i = 2;
    while let Some(opt) = args.get(i) {
        let val = args.get(i + 1).filter(|v| !v.is_empty());
        let missing = |what: &str| format!("{head} : '{opt}' : missing {what}");
        let res: Result<usize, String> = match opt.as_str() {
            "ssl" => {
                ssl_on = true;
                Ok(0)
            }
            "accept-proxy" => {
                accept_proxy = true;
                Ok(0)
            }
            // HAProxy 2.6's multiplexers; whether one suits the frontend's mode is checked once
            // the section is complete.
            "proto" => match val.map(String::as_str) {
                Some(v @ ("h1" | "h2" | "none" | "fcgi")) => {
                    proto = Some(v.to_string());
                    Ok(1)
                }
                Some(v) => Err(format!("{head} : 'proto' :  unknown MUX protocol '{v}'")),
                None => Err(format!("{head} : 'proto' : missing value")),
            },
            "crt" => match val.map(|v| based(p.global.process.crt_base.as_deref(), v)) {
                Some(ref v) => match (p.c.sys.stat)(v) {
                    Ok(()) => {
                        ssl.crts.push(v.clone());
                        ssl.sources.push(CrtSource::Crt(v.clone()));
                        Ok(1)
                    }
                    Err(e) => Err(format!(
                        "{head} : unable to stat SSL certificate from file '{v}' : {e}."
                    )),
                },
                None => Err(format!("{head} : 'crt' : missing certificate location")),
            },
            "crt-list" => match val {
                Some(v) => match (p.c.sys.stat)(v) {
                    Ok(()) => {
                        ssl.crt_list = Some(v.clone());
                        ssl.sources.push(CrtSource::List(v.clone()));
                        Ok(1)
                    }
                    Err(e) => Err(format!(
                        "{head} : 'crt-list' : cannot open file '{v}' : {e}"
                    )),
                },
                None => Err(missing("certificate location")),
            },
            "alpn" => match val {
                Some(v) => {
                    ssl.alpn = v.split(',').map(str::to_string).collect();
                    if ssl.alpn.iter().any(|a| a.is_empty() || a.len() > 255) {
                        Err(format!(
                            "{head} : 'alpn' : ALPN protocol name too long or empty"
                        ))
                    } else {
                        Ok(1)
                    }
                }
                None => Err(format!(
                    "{head} : 'alpn' : missing the comma-delimited ALPN protocol suite"
                )),
            },
            "ciphers" | "ciphersuites" | "curves" => match val {
                Some(v) => {
                    let slot = match opt.as_str() {
                        "ciphers" => &mut ssl.ciphers,
                        "ciphersuites" => &mut ssl.ciphersuites,
                        _ => &mut ssl.curves,
                    };
                    *slot = Some(v.clone());
                    Ok(1)
                }
                None => Err(missing("argument")),
            },
            "name" => match val {
                Some(v) => {
                    name = Some(v.clone());
                    Ok(1)
                }
                None => Err(format!("{head} : 'name' : missing name")),
            },
            "maxconn" => match val.and_then(|v| parse_u32(v)) {
                Some(n) => {
                    maxconn = Some(n);
                    Ok(1)
                }
                None => Err(format!("{head} : 'maxconn' : expects an integer argument")),
            },
            // Linux binds `:::p` dual-stack unless told otherwise: `v4v6` is what happens.
            "v4v6" => Ok(0),
            "strict-sni" => {
                ssl.strict_sni = true;
                Ok(0)
            }
            "v6only" | "transparent" | "defer-accept" | "tfo" => {
                p.pending(&format!("bind {opt}"));
                Ok(0)
            }
            "interface" | "thread" | "id" | "process" => match val {
                Some(_) => {
                    // `id` and `thread` only number/pin listeners; `interface` binds to a device.
                    if opt == "interface" {
                        p.pending("bind interface");
                    }
                    Ok(1)
                }
                None => Err(format!("{head} : '{opt}' : missing argument")),
            },
            "allow-0rtt" => Err(format!(
                "{head} : 'allow-0rtt' : TLS 1.3 early data is not supported by portcullis."
            )),
            o if BIND_OPTS.contains(&o) => parse_ssl_option(&mut ssl.options, o, args.get(i + 1))
                .map_err(|e| format!("{head} : {e}")),
            other => {
                let mut m = format!("{head}: unknown keyword '{other}'.");
                if let Some(s) = suggest::best_match(other, BIND_OPTS.iter().copied()) {
                    m = format!("{head}: unknown keyword '{other}'; did you mean '{s}' maybe ?");
                }
                Err(m)
            }
        };
        match res {
            Ok(n) => i += 1 + n,
            Err(e) => {
                p.alert(e);
                return;
            }
        }
    }
    if ssl_on && ssl.crts.is_empty() && ssl.crt_list.is_none() {
        let loc = p.c.loc.clone();
        let px = p.px.name.clone();
        p.alert(format!(
            "Proxy '{px}': no SSL certificate specified for bind '{spec}' at [{loc}] (use 'crt')."
        ));
        return;
    }
    let loc = p.c.loc.clone();
    for a in addrs {
        p.px.binds.push(Bind {
            addr: a,
            name: name.clone(),
            ssl: ssl_on.then(|| ssl.clone()),
            maxconn,
            accept_proxy,
            proto: proto.clone(),
            spec: spec.clone(),
            loc: loc.clone(),
        });
    }
}

/// `crt-base`/`ca-base`: a relative path is taken under the base directory.
pub(crate) fn based(base: Option<&str>, path: &str) -> String {
    match base {
        Some(b) if !path.starts_with('/') => format!("{}/{path}", b.trim_end_matches('/')),
        _ => path.to_string(),
    }
}

/// Derived settings once a proxy section is complete.
pub(crate) fn finish_proxy(px: &mut Proxy, global: &Global, diags: &mut Vec<Diag>) {
    if let Some(msg) = super::kw_comp::implicit_filter_error(px) {
        diags.push(Diag::global(Severity::Alert, msg));
    }
    // A bind's `proto` must suit the mode: h1/h2 for HTTP, none for TCP (HAProxy's
    // post-parse check, with its words).
    for b in &px.binds {
        let Some(proto) = &b.proto else { continue };
        let usable = match px.mode {
            Mode::Http => matches!(proto.as_str(), "h1" | "h2"),
            Mode::Tcp => proto == "none",
        };
        if !usable {
            let kind = match (px.cap.frontend, px.cap.backend) {
                (true, true) => "proxy",
                (true, false) => "frontend",
                _ => "backend",
            };
            diags.push(Diag::global(
                Severity::Alert,
                format!(
                    "{kind} '{}' : MUX protocol '{proto}' is not usable for 'bind {}' at [{}].",
                    px.name, b.spec, b.loc
                ),
            ));
        }
    }
    // A server's `proto` must suit the mode as a bind's does; fcgi needs an fcgi-app (none here).
    for s in &px.servers {
        let Some(proto) = &s.opts.proto else { continue };
        let msg = match (px.mode, proto.as_str()) {
            (Mode::Http, "fcgi") => format!(
                "proxy '{}': FCGI server '{}' has no FCGI app configured.",
                px.name, s.name
            ),
            (Mode::Http, "h1" | "h2") | (Mode::Tcp, "none") => continue,
            _ => format!(
                "backend '{}' : MUX protocol '{proto}' is not usable for server '{}' at [{}].",
                px.name, s.name, s.loc
            ),
        };
        diags.push(Diag::global(Severity::Alert, msg));
    }
    // `check-proto` names an HTTP mux: it needs HTTP checks (HAProxy's post-parse check).
    for s in &px.servers {
        if s.opts.check && s.opts.check_proto.is_some() && px.options.httpchk.is_none() {
            diags.push(Diag::global(
                Severity::Alert,
                format!(
                    "config: backend '{}': server '{}' uses an incompatible MUX protocol for the selected check type",
                    px.name, s.name
                ),
            ));
        }
    }
    // Content inspection peeks at the socket: with TLS terminated first there is nothing to peek.
    if px.mode == Mode::Tcp
        && px
            .tcp_request
            .iter()
            .any(|r| r.at == super::model::TcpAt::Content)
        && let Some(b) = px.binds.iter().find(|b| b.ssl.is_some())
    {
        px.pending.push((
            "tcp-request content (with bind ssl)".to_string(),
            b.loc.clone(),
        ));
    }
    // `http-check` lines refine what `option httpchk` declared: its request takes what the first
    // `http-check send` sets; both fields end up holding the effective check.
    if let Some(base) = px.options.httpchk.as_mut() {
        let hc = &px.http_check;
        if let Some(first) = hc.rules.iter().find_map(|r| match r {
            super::model::HttpCheckRule::Send(s) => Some(s),
            _ => None,
        }) {
            base.send.overlay(first);
        }
        base.rules = hc.rules.clone();
        base.disable_on_404 = hc.disable_on_404;
        base.send_state = hc.send_state;
        px.http_check = base.clone();
    } else if px.cap.backend && px.http_check != super::model::HttpCheck::default() {
        diags.push(Diag::global(
            Severity::Warning,
            format!(
                "{} '{}' uses http-check rules without 'option httpchk', so the rules are ignored.",
                px.kind(),
                px.name
            ),
        ));
    }
    if px.cap.backend && !px.options.tcp_check && !px.tcp_checks.is_empty() {
        diags.push(Diag::global(
            Severity::Warning,
            format!(
                "{} '{}' uses tcp-check rules without 'option tcp-check', so the rules are ignored.",
                px.kind(),
                px.name
            ),
        ));
    }
    // `maxqueue` bounds a server's own queue. Streams queue on a server only when something
    // pins them to it (HAProxy: persistence, hash balancing); otherwise they wait in the
    // backend's queue, where it does not apply. portcullis has no per-server queues yet, so a
    // pinning algorithm keeps it refused.
    if px.cap.backend && px.mode != Mode::Http && px.balance.needs_http() {
        diags.push(Diag::global(
            Severity::Warning,
            format!(
                "Layer 7 hash not possible for {} '{}' (needs 'mode http'). Falling back to round robin.",
                px.kind(),
                px.name
            ),
        ));
        px.balance = Balance::Roundrobin;
    }
    // `balance hash` compiles its expression once the section is read (HAProxy's words).
    if let Balance::Hash(e) = &px.balance
        && let Err(err) = crate::ana::sample::parse_sample(e)
    {
        diags.push(Diag::global(
            Severity::Alert,
            format!(
                "{} '{}' [{}:{}]: failed to parse 'balance hash' expression '{e}' in : {err}.",
                px.kind(),
                px.name,
                px.loc.file,
                px.loc.line
            ),
        ));
    }
    if px.balance.is_hash() {
        let algo = px.balance.as_str();
        for s in px.servers.iter().filter(|s| s.opts.maxqueue.is_some()) {
            px.pending.push((
                format!("server maxqueue (with balance {algo})"),
                s.loc.clone(),
            ));
        }
    }
    let ca_base = global.process.ca_base.as_deref();
    for s in &mut px.servers {
        if let Some(ca) = s.opts.ca_file.as_mut() {
            *ca = based(ca_base, ca);
        }
    }
    for b in &mut px.binds {
        if let Some(ssl) = b.ssl.as_mut() {
            if ssl.ciphers.is_none() {
                ssl.ciphers = global.ssl_default_bind_ciphers.clone();
            }
            if ssl.ciphersuites.is_none() {
                ssl.ciphersuites = global.ssl_default_bind_ciphersuites.clone();
            }
            let g = &global.ssl_default_bind_options;
            let o = &mut ssl.options;
            o.min_ver = o.min_ver.or(g.min_ver);
            o.max_ver = o.max_ver.or(g.max_ver);
            o.no_tls_tickets |= g.no_tls_tickets;
            o.prefer_client_ciphers |= g.prefer_client_ciphers;
            if ssl.curves.is_none() {
                ssl.curves = global.ssl_default_bind_curves.clone();
            }
        }
    }
}

/// Whether the proxy has one of the capabilities in `caps` (FE/BE).
fn has_cap(px: &Proxy, caps: u8) -> bool {
    (caps & FE != 0 && px.cap.frontend) || (caps & BE != 0 && px.cap.backend)
}
