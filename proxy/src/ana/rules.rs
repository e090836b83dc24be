//! Compiled per-proxy rules: ACLs, `use_backend`/`default_backend`, `http-request` actions and
//! `tcp-request content` rules. Compiled once at start (and by `-c`); applying them is pure and
//! evaluated against a `SampleCtx` built by the session.

use crate::ana::acl::{self, Condition};
use crate::ana::last_rule::RuleLoc;
use crate::ana::rewrite;
use crate::ana::sample::{SampleCtx, SampleExpr, SampleValue, parse_sample};
use crate::ana::script::{self, Outcome};
use crate::ana::vars::{SetCond, VarName};
use crate::config::diag::Diag;
use crate::config::model::{
    Config, HttpRequestAction, HttpRequestRule, LinePart, Proxy, RedirectKind, ScAction, TcpAt,
    TcpRequestAction, TrackSc,
};
use crate::http::head::{RequestHead, ResponseHead};
use crate::log::format::{LogFormat, LogRecord};
use crate::stick::{StickData, StkCtrs};

/// The payload of `http-request return`.
pub enum ReturnBody {
    None,
    /// `string`, `file`.
    Plain(String),
    /// `lf-string`, `lf-file`: rendered per request.
    Lf(LogFormat),
}

pub enum Action {
    /// `lua.<name> [args…]`: a registered Lua action (not final unless it ends the transaction).
    Lua {
        name: String,
        args: Vec<String>,
    },
    /// `use-service lua.<name>`.
    LuaService(String),
    SetHeader(String, LogFormat),
    AddHeader(String, LogFormat),
    DelHeader(String),
    Redirect {
        kind: RedirectKind,
        value: LogFormat,
        code: u16,
        drop_query: bool,
        append_slash: bool,
    },
    Deny(u16),
    Return {
        status: u16,
        content_type: Option<String>,
        body: ReturnBody,
        headers: Vec<(String, LogFormat)>,
    },
    Allow,
    Reject,
    UsePrometheus,
    TrackSc(Track),
    Sc(ScRun),
    SetLine(LinePart, LogFormat),
    ReplaceLine(LinePart, regex::bytes::Regex, LogFormat),
    ReplaceHeader {
        name: String,
        re: regex::bytes::Regex,
        replace: LogFormat,
        values: bool,
    },
    /// `http-response set-status <code> [reason <str>]`.
    SetStatus(u16, Option<String>),
    /// `capture <sample> len|id`: into the request's (or for `http-response`, the response's)
    /// slot; `len` 0 = the slot's own.
    Capture {
        expr: SampleExpr,
        slot: usize,
        len: usize,
    },
    SetVar {
        var: VarName,
        conds: Vec<SetCond>,
        value: VarValue,
    },
    UnsetVar(VarName),
    /// `auth [realm <r>]`.
    Auth(Option<String>),
    /// `normalize-uri <normalizer>`.
    NormalizeUri(crate::config::model::UriNorm),
    /// `disable-l7-retry` (nothing to do: no layer 7 retries here).
    Nop,
    /// `set-log-level <level>|silent` (None: silent).
    SetLogLevel(Option<u8>),
    /// `tarpit [deny_status <code>]`.
    Tarpit(u16),
    /// `silent-drop`.
    SilentDrop,
    /// `early-hint <name> <fmt>`.
    EarlyHint(String, LogFormat),
    /// `set-src|set-dst[-port] <expr>`.
    SetAddr {
        dst: bool,
        port: bool,
        expr: SampleExpr,
    },
}

/// What `set-var` stores: a sample (typed) or `set-var-fmt`'s rendered string.
pub enum VarValue {
    Sample(SampleExpr),
    Fmt(LogFormat),
}

/// A compiled `track-sc<n> <key> [table <t>]`.
pub struct Track {
    pub sc: usize,
    pub key: SampleExpr,
    /// The table's name (the proxy's own when the rule names none).
    pub table: String,
}

impl Track {
    /// Tracks the key into `into` unless counter `sc` is already tracked there; true if it did.
    pub fn run(&self, ctx: &SampleCtx<'_>, into: &StkCtrs) -> bool {
        let Some(view) = ctx.stick else { return false };
        if into.is_set(self.sc) {
            return false;
        }
        let Some(table) = view.tables.find(&self.table) else {
            return false;
        };
        let Some(key) = self
            .key
            .eval(ctx)
            .and_then(|v| super::stkey::from_sample(table.key, &v))
        else {
            return false;
        };
        into.track(self.sc, table, key, view.now_ms)
    }
}

/// A compiled `sc-inc-gpc0|1`, `sc-inc-gpc(<idx>,<sc>)`, `sc-set-gpt0`, `sc-set-gpt(<idx>,<sc>)`:
/// acts on counter `sc`'s entry (the stream's, else the session's), nothing when it is not
/// tracked.
pub struct ScRun {
    pub sc: usize,
    /// The counter or tag acted on: `Gpc0`, `Gpc1`, `Gpc`, `Gpt0` or `Gpt` (element `idx`).
    data: StickData,
    idx: u32,
    /// The value a `sc-set-gpt*` sets (an integer or an expression).
    gpt: Option<Result<i64, SampleExpr>>,
}

impl ScRun {
    pub fn compile(a: &ScAction) -> Result<ScRun, String> {
        let value = |v: &Result<i64, String>| -> Result<_, String> {
            Ok(match v {
                Ok(n) => Ok(*n),
                Err(e) => Err(parse_sample(e)?),
            })
        };
        Ok(match a {
            ScAction::IncGpc { which, sc } => ScRun {
                sc: usize::from(*sc),
                data: if *which == 0 {
                    StickData::Gpc0
                } else {
                    StickData::Gpc1
                },
                idx: 0,
                gpt: None,
            },
            ScAction::IncGpcAt { idx, sc } => ScRun {
                sc: usize::from(*sc),
                data: StickData::Gpc,
                idx: *idx,
                gpt: None,
            },
            ScAction::SetGpt0 { sc, value: v } => ScRun {
                sc: usize::from(*sc),
                data: StickData::Gpt0,
                idx: 0,
                gpt: Some(value(v)?),
            },
            ScAction::SetGptAt { idx, sc, value: v } => ScRun {
                sc: usize::from(*sc),
                data: StickData::Gpt,
                idx: *idx,
                gpt: Some(value(v)?),
            },
        })
    }

    pub fn run(&self, ctx: &SampleCtx<'_>) {
        let Some(view) = ctx.stick else { return };
        let Some(t) = view.tracked(self.sc) else {
            return;
        };
        match &self.gpt {
            None => {
                t.inc_gpc(self.data, self.idx, view.now_ms);
            }
            Some(v) => {
                let v = match v {
                    Ok(n) => *n,
                    Err(e) => match e.eval(ctx).and_then(|v| v.to_int()) {
                        Some(n) => n,
                        None => return,
                    },
                };
                // HAProxy stores it as an unsigned int (a C cast).
                t.set_gpt(self.data, self.idx, u64::from(v as u32));
            }
        }
    }
}

/// A compiled `tcp-request connection|content` or `tcp-response content` rule.
pub struct TcpRule {
    pub action: TcpRequestAction,
    pub cond: Option<Condition>,
    /// Where it was written (`last_rule_file`/`last_rule_line` once it ends its rule set).
    pub at: RuleLoc,
    /// Set for `TcpRequestAction::TrackSc`.
    pub track: Option<Track>,
    /// Set for `TcpRequestAction::Sc`.
    pub sc: Option<ScRun>,
    /// Set for `TcpRequestAction::Capture`: the sample, slot and length.
    pub capture: Option<(SampleExpr, usize, usize)>,
    /// Set for `TcpRequestAction::Var`: `set-var*` (with its value) or `unset-var`.
    pub var: Option<(VarName, Vec<SetCond>, Option<VarValue>)>,
}

pub struct Rule {
    pub action: Action,
    pub cond: Option<Condition>,
    /// Where it was written (`last_rule_file`/`last_rule_line` once it is final).
    pub at: RuleLoc,
}

#[derive(Default)]
pub struct ProxyRules {
    /// (backend proxy index, condition)
    pub use_backends: Vec<(usize, Option<Condition>)>,
    /// `use_backend <log-format>`: (number of `use_backends` before it, name format,
    /// condition); the backend is looked up by the rendered name when the rule is reached.
    pub dynamic_backends: Vec<(usize, LogFormat, Option<Condition>)>,
    /// Every backend by name, for the dynamic rules.
    pub backend_names: Vec<(String, usize)>,
    pub default_backend: Option<usize>,
    pub http_request: Vec<Rule>,
    /// `http-response` rules, applied to a server's response head.
    pub http_response: Vec<Rule>,
    /// `http-after-response` rules, applied to every response head before it leaves.
    pub http_after_response: Vec<Rule>,
    pub tcp_content: Vec<TcpRule>,
    /// `tcp-response content` rules, on the server's first bytes (a backend's).
    pub tcp_response: Vec<TcpRule>,
    /// `tcp-request connection` rules, evaluated at accept on addresses only.
    pub tcp_connection: Vec<TcpRule>,
    /// `tcp-request session` rules, evaluated once the connection is established (after the
    /// PROXY header and the TLS handshake), before any content.
    pub tcp_session: Vec<TcpRule>,
    /// `stats admin if|unless <cond>`: the stats page may change servers.
    pub stats_admin: Option<Condition>,
    /// `force-persist` (true) / `ignore-persist` (false) rules.
    pub persist: Vec<(bool, Condition)>,
    /// `stats http-request` rules, run before the stats page is served.
    pub stats_http_request: Vec<Rule>,
    /// `stick` rules (a backend's).
    pub stick: Vec<super::sticking::StickRun>,
    /// Every `userlist` (shared by all proxies), for `http_auth*()`.
    pub userlists: std::sync::Arc<crate::ana::auth::Userlists>,
}

/// What the first matching `force-persist` (true) or `ignore-persist` (false) rule says.
pub fn persist_rule(rules: &[(bool, Condition)], ctx: &SampleCtx<'_>) -> Option<bool> {
    rules.iter().find(|(_, c)| c.eval(ctx)).map(|(f, _)| *f)
}

/// What the `http-request` rules decided.
pub enum Verdict {
    Continue,
    Deny(u16),
    /// `reject`: close without a response.
    Reject,
    Redirect {
        code: u16,
        location: String,
    },
    Return {
        status: u16,
        content_type: Option<String>,
        body: Option<String>,
        /// `hdr` lines, their values rendered.
        headers: Vec<(String, String)>,
    },
    /// `use-service prometheus-exporter`: answer with the exporter page.
    Prometheus,
    /// `auth`: a 401 with this realm (None: the proxy's name).
    Auth(Option<String>),
    /// A `strict` `normalize-uri` met a malformed URI: 400, as an invalid request.
    Invalid,
    /// `tarpit`: hold the request `timeout tarpit`, then answer this status's error page.
    Tarpit(u16),
    /// `silent-drop`: drop the connection without a word to the client.
    SilentDrop,
    /// A Lua action ended the transaction (`txn:done()`): `bytes` is the whole response (a
    /// head without `connection`, then the body), or empty to close without answering.
    Reply {
        status: u16,
        bytes: Vec<u8>,
    },
    /// `use-service lua.<name>` answered: its response (a head without `connection`, then
    /// the framed body), and whether the connection must close after it (a body ended by the
    /// close). Logged with `<lua.<name>>` as the server, as HAProxy's applets.
    Service {
        name: String,
        status: u16,
        bytes: Vec<u8>,
        close: bool,
    },
}

/// The action's keyword, as it appears after `http-request` / `http-response`.
fn rule_name(a: &HttpRequestAction) -> std::borrow::Cow<'static, str> {
    if let HttpRequestAction::Lua { name, .. } = a {
        return format!("lua.{name}").into();
    }
    std::borrow::Cow::Borrowed(match a {
        HttpRequestAction::Lua { .. } => "lua",
        HttpRequestAction::LuaService { .. } => "use-service",
        HttpRequestAction::SetHeader { .. } => "set-header",
        HttpRequestAction::AddHeader { .. } => "add-header",
        HttpRequestAction::DelHeader { .. } => "del-header",
        HttpRequestAction::Redirect { .. } => "redirect",
        HttpRequestAction::Deny { .. } => "deny",
        HttpRequestAction::Return { .. } => "return",
        HttpRequestAction::Allow => "allow",
        HttpRequestAction::Reject => "reject",
        HttpRequestAction::UsePrometheus => "use-service",
        HttpRequestAction::SetLine { part, .. } => match part {
            LinePart::Method => "set-method",
            LinePart::Path => "set-path",
            LinePart::PathQ => "set-pathq",
            LinePart::Query => "set-query",
            LinePart::Uri => "set-uri",
        },
        HttpRequestAction::ReplaceLine { part, .. } => match part {
            LinePart::PathQ => "replace-pathq",
            LinePart::Uri => "replace-uri",
            _ => "replace-path",
        },
        HttpRequestAction::ReplaceHeader { values: false, .. } => "replace-header",
        HttpRequestAction::ReplaceHeader { values: true, .. } => "replace-value",
        HttpRequestAction::SetStatus { .. } => "set-status",
        HttpRequestAction::Capture { .. } => "capture",
        HttpRequestAction::SetVar { fmt: false, .. } => "set-var",
        HttpRequestAction::SetVar { fmt: true, .. } => "set-var-fmt",
        HttpRequestAction::UnsetVar { .. } => "unset-var",
        HttpRequestAction::NormalizeUri(_) => "normalize-uri",
        HttpRequestAction::SetLogLevel(_) => "set-log-level",
        HttpRequestAction::Tarpit { .. } => "tarpit",
        HttpRequestAction::SilentDrop => "silent-drop",
        HttpRequestAction::EarlyHint { .. } => "early-hint",
        HttpRequestAction::SetAddr { dst, port, .. } => match (dst, port) {
            (false, false) => "set-src",
            (false, true) => "set-src-port",
            (true, false) => "set-dst",
            (true, true) => "set-dst-port",
        },
        HttpRequestAction::DisableL7Retry => "disable-l7-retry",
        HttpRequestAction::Auth { .. } => "auth",
        HttpRequestAction::TrackSc(t) => match t.sc {
            0 => "track-sc0",
            1 => "track-sc1",
            _ => "track-sc2",
        },
        HttpRequestAction::Sc(ScAction::IncGpc { which: 0, .. }) => "sc-inc-gpc0",
        HttpRequestAction::Sc(ScAction::IncGpc { .. }) => "sc-inc-gpc1",
        HttpRequestAction::Sc(ScAction::SetGpt0 { .. }) => "sc-set-gpt0",
        HttpRequestAction::Sc(ScAction::IncGpcAt { .. }) => "sc-inc-gpc",
        HttpRequestAction::Sc(ScAction::SetGptAt { .. }) => "sc-set-gpt",
    })
}

/// Compiles every proxy's rules; errors are collected with file:line, in HAProxy's words.
pub fn compile(cfg: &Config) -> Result<Vec<ProxyRules>, Vec<Diag>> {
    let mut out = Vec::with_capacity(cfg.proxies.len());
    let mut errs = Vec::new();
    let lists = std::sync::Arc::new(crate::ana::auth::Userlists(cfg.userlists.clone()));
    for p in &cfg.proxies {
        let mut r = compile_proxy(cfg, p, &mut errs);
        r.userlists = std::sync::Arc::clone(&lists);
        out.push(r);
    }
    if errs.is_empty() { Ok(out) } else { Err(errs) }
}

fn compile_proxy(cfg: &Config, p: &Proxy, errs: &mut Vec<Diag>) -> ProxyRules {
    let acls = match acl::compile_acls(&p.acls) {
        Ok(a) => a,
        Err(es) => {
            errs.extend(
                es.into_iter()
                    .map(|e| Diag::alert(&e.loc.file, e.loc.line, e.msg)),
            );
            acl::AclSet::default()
        }
    };
    let cond = |c: &Option<crate::config::model::Cond>,
                rule: &str,
                errs: &mut Vec<Diag>|
     -> Option<Condition> {
        let c = c.as_ref()?;
        match acl::compile_cond(c, &acls) {
            Ok(x) => Some(x),
            Err(e) => {
                errs.push(Diag::alert(&e.loc.file, e.loc.line, e.in_rule(rule)));
                None
            }
        }
    };
    let mut r = ProxyRules::default();
    let index_of = |name: &str| {
        cfg.proxies
            .iter()
            .position(|x| x.cap.backend && x.name == name)
    };
    for ub in &p.use_backends {
        let c = cond(&ub.cond, "use_backend", errs);
        // A name with a `%` is a log-format (HAProxy's dynamic use_backend).
        if ub.backend.contains('%') {
            let parsed = crate::map::with_late_origin(&ub.loc.file, ub.loc.line, || {
                LogFormat::parse_rule(&ub.backend)
            });
            match parsed {
                Ok(f) => r.dynamic_backends.push((r.use_backends.len(), f, c)),
                Err(e) => errs.push(Diag::alert(
                    &ub.loc.file,
                    ub.loc.line,
                    format!("failed to parse use_backend rule '{}' : {e}.", ub.backend),
                )),
            }
            continue;
        }
        match index_of(&ub.backend) {
            Some(i) => r.use_backends.push((i, c)),
            None => errs.push(Diag::alert(
                &ub.loc.file,
                ub.loc.line,
                format!("unable to find required use_backend: '{}'.", ub.backend),
            )),
        }
    }
    if let Some((name, _)) = &p.default_backend {
        r.default_backend = index_of(name);
    }
    if !r.dynamic_backends.is_empty() {
        r.backend_names = cfg
            .proxies
            .iter()
            .enumerate()
            .filter(|(_, x)| x.cap.backend)
            .map(|(i, x)| (x.name.clone(), i))
            .collect();
    }
    let admin = p.stats.as_ref().and_then(|s| s.admin.clone());
    r.stats_admin = cond(&admin, "stats admin", errs);
    for (force, c) in &p.extra.persist_rules {
        let kw = if *force {
            "force-persist"
        } else {
            "ignore-persist"
        };
        // HAProxy words this one "a '<kw>' rule".
        match acl::compile_cond(c, &acls) {
            Ok(x) => r.persist.push((*force, x)),
            Err(e) => errs.push(Diag::alert(
                &e.loc.file,
                e.loc.line,
                format!("error detected while parsing a '{kw}' rule : {}.", e.msg),
            )),
        }
    }
    for st in &p.stick_rules {
        let c = match &st.cond {
            None => None,
            Some(c) => match acl::compile_cond(c, &acls) {
                Ok(x) => Some(x),
                Err(e) => {
                    errs.push(Diag::alert(
                        &e.loc.file,
                        e.loc.line,
                        format!(
                            "'stick': error detected while parsing sticking condition : {}.",
                            e.msg
                        ),
                    ));
                    continue;
                }
            },
        };
        // The parser checked the pattern.
        let Ok(expr) = parse_sample(&st.pattern) else {
            continue;
        };
        r.stick.push(super::sticking::StickRun {
            kind: st.kind,
            expr,
            table: st.table.clone().unwrap_or_else(|| p.name.clone()),
            cond: c,
        });
    }
    let fmt = |s: &str, loc: &crate::config::model::Loc, rule: &str, errs: &mut Vec<Diag>| {
        match crate::map::with_origin(&loc.file, loc.line, || LogFormat::parse_rule(s)) {
            Ok(f) => f,
            Err(e) => {
                errs.push(Diag::alert(
                    &loc.file,
                    loc.line,
                    format!("'{rule}': failed to parse log-format : {e}."),
                ));
                LogFormat::default()
            }
        }
    };
    // A `set-var` / `set-var-fmt` value: a sample expression or a log-format string (None: an
    // expression that does not parse, reported).
    let var_value = |expr: &str,
                     is_fmt: bool,
                     loc: &crate::config::model::Loc,
                     rule: &str,
                     errs: &mut Vec<Diag>| {
        if is_fmt {
            return Some(VarValue::Fmt(fmt(expr, loc, rule, errs)));
        }
        match parse_sample(expr) {
            Ok(e) => Some(VarValue::Sample(e)),
            Err(e) => {
                errs.push(Diag::alert(&loc.file, loc.line, e));
                None
            }
        }
    };
    let http_rules = |rules: &[HttpRequestRule], kw: &str, errs: &mut Vec<Diag>| {
        let mut out = Vec::with_capacity(rules.len());
        for rule in rules {
            let full = format!("{kw} {}", rule_name(&rule.action));
            let name = full.as_str();
            let action = match &rule.action {
                HttpRequestAction::Lua { name: n, args } => Action::Lua {
                    name: n.clone(),
                    args: args.clone(),
                },
                HttpRequestAction::LuaService { name: n } => Action::LuaService(n.clone()),
                HttpRequestAction::SetHeader { name: h, value } => {
                    Action::SetHeader(h.clone(), fmt(value, &rule.loc, name, errs))
                }
                HttpRequestAction::AddHeader { name: h, value } => {
                    Action::AddHeader(h.clone(), fmt(value, &rule.loc, name, errs))
                }
                HttpRequestAction::DelHeader { name: h } => Action::DelHeader(h.clone()),
                HttpRequestAction::SetStatus { status, reason } => {
                    Action::SetStatus(*status, reason.clone())
                }
                HttpRequestAction::Capture { sample, slot, len } => match parse_sample(sample) {
                    Ok(expr) => Action::Capture {
                        expr,
                        slot: *slot,
                        len: *len,
                    },
                    Err(e) => {
                        errs.push(Diag::alert(&rule.loc.file, rule.loc.line, e));
                        continue;
                    }
                },
                HttpRequestAction::SetVar {
                    var,
                    conds,
                    expr,
                    fmt: is_fmt,
                } => {
                    let Some(value) = var_value(expr, *is_fmt, &rule.loc, name, errs) else {
                        continue;
                    };
                    Action::SetVar {
                        var: var.clone(),
                        conds: conds.clone(),
                        value,
                    }
                }
                HttpRequestAction::UnsetVar { var } => Action::UnsetVar(var.clone()),
                HttpRequestAction::Auth { realm } => Action::Auth(realm.clone()),
                HttpRequestAction::NormalizeUri(n) => Action::NormalizeUri(*n),
                HttpRequestAction::DisableL7Retry => Action::Nop,
                HttpRequestAction::SetLogLevel(l) => Action::SetLogLevel(*l),
                HttpRequestAction::Tarpit { status } => Action::Tarpit(*status),
                HttpRequestAction::SilentDrop => Action::SilentDrop,
                HttpRequestAction::EarlyHint { name: h, value } => {
                    Action::EarlyHint(h.clone(), fmt(value, &rule.loc, name, errs))
                }
                HttpRequestAction::SetAddr { dst, port, expr } => match parse_sample(expr) {
                    Ok(e) => Action::SetAddr {
                        dst: *dst,
                        port: *port,
                        expr: e,
                    },
                    Err(e) => {
                        errs.push(Diag::alert(&rule.loc.file, rule.loc.line, e));
                        continue;
                    }
                },
                HttpRequestAction::Redirect {
                    kind,
                    value,
                    code,
                    drop_query,
                    append_slash,
                } => Action::Redirect {
                    kind: kind.clone(),
                    value: fmt(value, &rule.loc, name, errs),
                    code: *code,
                    drop_query: *drop_query,
                    append_slash: *append_slash,
                },
                HttpRequestAction::Deny { status } => Action::Deny(*status),
                HttpRequestAction::Return {
                    status,
                    content_type,
                    body,
                    body_lf,
                    headers,
                } => Action::Return {
                    status: *status,
                    content_type: content_type.clone(),
                    body: match (body, body_lf) {
                        (None, _) => ReturnBody::None,
                        (Some(b), false) => ReturnBody::Plain(b.clone()),
                        (Some(b), true) => ReturnBody::Lf(fmt(b, &rule.loc, name, errs)),
                    },
                    headers: headers
                        .iter()
                        .map(|(n, v)| (n.clone(), fmt(v, &rule.loc, name, errs)))
                        .collect(),
                },
                HttpRequestAction::Allow => Action::Allow,
                HttpRequestAction::Reject => Action::Reject,
                HttpRequestAction::UsePrometheus => Action::UsePrometheus,
                HttpRequestAction::TrackSc(t) => match compile_track(cfg, p, t, errs) {
                    Some(t) => Action::TrackSc(t),
                    None => continue,
                },
                HttpRequestAction::Sc(a) => match ScRun::compile(a) {
                    Ok(a) => Action::Sc(a),
                    Err(e) => {
                        errs.push(Diag::alert(&rule.loc.file, rule.loc.line, e));
                        continue;
                    }
                },
                HttpRequestAction::SetLine { part, value } => {
                    Action::SetLine(*part, fmt(value, &rule.loc, name, errs))
                }
                HttpRequestAction::ReplaceLine {
                    part,
                    regex,
                    replace,
                } => match rewrite_regex(regex, &rule.loc, errs) {
                    Some(re) => Action::ReplaceLine(*part, re, fmt(replace, &rule.loc, name, errs)),
                    None => continue,
                },
                HttpRequestAction::ReplaceHeader {
                    name: h,
                    regex,
                    replace,
                    values,
                } => match rewrite_regex(regex, &rule.loc, errs) {
                    Some(re) => Action::ReplaceHeader {
                        name: h.clone(),
                        re,
                        replace: fmt(replace, &rule.loc, name, errs),
                        values: *values,
                    },
                    None => continue,
                },
            };
            let c = cond(&rule.cond, name, errs);
            out.push(Rule {
                action,
                cond: c,
                at: RuleLoc::new(&rule.loc.file, rule.loc.line),
            });
        }
        out
    };
    r.http_request = http_rules(&p.http_request, "http-request", errs);
    r.http_response = http_rules(&p.http_response, "http-response", errs);
    let stats_rules = p.stats.as_ref().map_or(&[][..], |s| &s.http_request[..]);
    r.stats_http_request = http_rules(stats_rules, "http-request", errs);
    r.http_after_response = http_rules(&p.http_after_response, "http-after-response", errs);
    let tcp_rules = p.tcp_request.iter().map(|t| (t, false));
    for (t, response) in tcp_rules.chain(p.tcp_response.iter().map(|t| (t, true))) {
        let track = match &t.action {
            TcpRequestAction::TrackSc(tr) => match compile_track(cfg, p, tr, errs) {
                Some(x) => Some(x),
                None => continue,
            },
            _ => None,
        };
        let name = match (response, t.at) {
            (true, _) => "tcp-response content",
            (false, TcpAt::Connection) => "tcp-request connection",
            (false, TcpAt::Session) => "tcp-request session",
            (false, TcpAt::Content) => "tcp-request content",
        };
        let capture = match &t.action {
            TcpRequestAction::Capture { sample, slot, len } => match parse_sample(sample) {
                Ok(e) => Some((e, *slot, *len)),
                Err(e) => {
                    errs.push(Diag::alert(&t.loc.file, t.loc.line, e));
                    continue;
                }
            },
            _ => None,
        };
        let sc = match &t.action {
            TcpRequestAction::Sc(a) => match ScRun::compile(a) {
                Ok(a) => Some(a),
                Err(e) => {
                    errs.push(Diag::alert(&t.loc.file, t.loc.line, e));
                    continue;
                }
            },
            _ => None,
        };
        let var = match &t.action {
            TcpRequestAction::Var(a) => match &**a {
                HttpRequestAction::UnsetVar { var } => Some((var.clone(), Vec::new(), None)),
                HttpRequestAction::SetVar {
                    var,
                    conds,
                    expr,
                    fmt: is_fmt,
                } => {
                    let Some(value) = var_value(expr, *is_fmt, &t.loc, name, errs) else {
                        continue;
                    };
                    Some((var.clone(), conds.clone(), Some(value)))
                }
                _ => None,
            },
            _ => None,
        };
        let rule = TcpRule {
            action: t.action.clone(),
            cond: cond(&t.cond, name, errs),
            at: RuleLoc::new(&t.loc.file, t.loc.line),
            track,
            sc,
            capture,
            var,
        };
        match (response, t.at) {
            (true, _) => r.tcp_response.push(rule),
            (false, TcpAt::Connection) => r.tcp_connection.push(rule),
            (false, TcpAt::Session) => r.tcp_session.push(rule),
            (false, TcpAt::Content) => r.tcp_content.push(rule),
        }
    }
    errs.extend(stick_fetch_tables(cfg, p));
    errs.extend(auth_fetch_lists(cfg, p));
    r
}

/// `http_auth(<ul>)` / `http_auth_group(<ul>)` in an ACL: the list exists, and an ACL on
/// `http_auth_group` names only its groups (HAProxy's post-parse checks).
fn auth_fetch_lists(cfg: &Config, p: &Proxy) -> Vec<Diag> {
    use crate::ana::sample::Fetch;
    let mut out = Vec::new();
    let conds = p
        .http_request
        .iter()
        .chain(&p.http_response)
        .chain(&p.http_after_response)
        .filter_map(|r| r.cond.as_ref())
        .chain(p.tcp_request.iter().filter_map(|r| r.cond.as_ref()))
        .chain(p.use_backends.iter().filter_map(|r| r.cond.as_ref()));
    let words = p
        .acls
        .iter()
        .filter_map(|a| a.tokens.first().map(|t| (t, &a.loc)))
        .chain(conds.flat_map(|c| c.tokens.iter().map(move |t| (t, &c.loc))));
    for (w, loc) in words {
        let Ok((expr, _)) = crate::ana::sample::parse_sample_prefix(w) else {
            continue;
        };
        let Fetch::HttpAuth { list, .. } = &expr.fetch else {
            continue;
        };
        let kw = w.split(['(', ',', ')']).next().unwrap_or(w);
        let msg = match list {
            None => format!(
                "missing userlist name in arg 1 of ACL keyword '{kw}' in proxy '{}'.",
                p.name
            ),
            Some(l) if !cfg.userlists.iter().any(|u| u.name == *l) => format!(
                "unable to find userlist '{l}' referenced in arg 1 of ACL keyword '{kw}' in proxy '{}'.",
                p.name
            ),
            Some(_) => continue,
        };
        out.push(Diag::global(
            crate::config::diag::Severity::Alert,
            format!("parsing [{}:{}]: {msg}", loc.file, loc.line),
        ));
    }
    // Named ACLs on `http_auth_group(<ul>)`: every pattern is a group of the list.
    for a in &p.acls {
        let Some(first) = a.tokens.first() else {
            continue;
        };
        let Ok((expr, _)) = crate::ana::sample::parse_sample_prefix(first) else {
            continue;
        };
        let Fetch::HttpAuth {
            list: Some(l),
            group: true,
        } = &expr.fetch
        else {
            continue;
        };
        let Some(ul) = cfg.userlists.iter().find(|u| u.name == *l) else {
            continue;
        };
        for g in a.tokens.iter().skip(1).filter(|t| !t.starts_with('-')) {
            if !ul.groups.iter().any(|x| x.name == *g) {
                out.push(Diag::global(
                    crate::config::diag::Severity::Alert,
                    format!(
                        "proxy {}: acl {} http_auth_group(): invalid group '{g}'.",
                        p.name, a.name
                    ),
                ));
                break;
            }
        }
    }
    out
}

/// A rewrite's regex (already checked by the parser; a failure here is still reported).
fn rewrite_regex(
    s: &str,
    loc: &crate::config::model::Loc,
    errs: &mut Vec<Diag>,
) -> Option<regex::bytes::Regex> {
    match regex::bytes::Regex::new(s) {
        Ok(re) => Some(re),
        Err(e) => {
            errs.push(Diag::alert(
                &loc.file,
                loc.line,
                crate::ana::acl::regex_invalid(s, &e),
            ));
            None
        }
    }
}

/// `track-scN`: its key compiles and its table exists.
fn compile_track(cfg: &Config, p: &Proxy, t: &TrackSc, errs: &mut Vec<Diag>) -> Option<Track> {
    let table = t.table.clone().unwrap_or_else(|| p.name.clone());
    // Tables are named after their proxies; only those with a `stick-table` line exist.
    if !table_exists(cfg, &table) {
        errs.push(Diag::global(
            crate::config::diag::Severity::Alert,
            format!(
                "Proxy '{}': unable to find table '{table}' referenced by track-sc{}.",
                p.name, t.sc
            ),
        ));
        return None;
    }
    let key = match parse_sample(&t.key) {
        Ok(k) => k,
        Err(e) => {
            errs.push(Diag::global(crate::config::diag::Severity::Alert, e));
            return None;
        }
    };
    Some(Track {
        sc: usize::from(t.sc),
        key,
        table,
    })
}

/// `src_*([table])` / `sc_*(n,table)` in an ACL naming a table that does not exist, as HAProxy
/// reports it after parsing.
fn stick_fetch_tables(cfg: &Config, p: &Proxy) -> Vec<Diag> {
    let conds = p
        .http_request
        .iter()
        .filter_map(|r| r.cond.as_ref())
        .chain(p.tcp_request.iter().filter_map(|r| r.cond.as_ref()))
        .chain(p.use_backends.iter().filter_map(|r| r.cond.as_ref()));
    let words = p
        .acls
        .iter()
        .filter_map(|a| a.tokens.first().map(|t| (t, &a.loc)))
        .chain(conds.flat_map(|c| c.tokens.iter().map(move |t| (t, &c.loc))));
    let mut out = Vec::new();
    for (w, loc) in words {
        let Ok((expr, _)) = crate::ana::sample::parse_sample_prefix(w) else {
            continue;
        };
        let crate::ana::sample::Fetch::Stick {
            src, table, data, ..
        } = &expr.fetch
        else {
            continue;
        };
        let name = table.clone().unwrap_or_else(|| p.name.clone());
        // `sc_*` without a table reads whatever the counter tracks.
        if (table.is_none() && !src) || table_exists(cfg, &name) {
            continue;
        }
        let kw = w.split(['(', ',']).next().unwrap_or(w);
        // The arrays' fetches take the element first.
        let arg = usize::from(kw.starts_with("sc_")) + usize::from(data.is_array()) + 1;
        out.push(Diag::global(
            crate::config::diag::Severity::Alert,
            format!(
                "parsing [{}:{}]: unable to find table '{name}' referenced in arg {arg} of ACL keyword '{kw}' in proxy '{}'.",
                loc.file, loc.line, p.name
            ),
        ));
    }
    out
}

fn table_exists(cfg: &Config, name: &str) -> bool {
    cfg.proxies
        .iter()
        .any(|x| x.stick_table.is_some() && x.name == name)
        || cfg.peers.iter().any(|s| {
            s.tables
                .iter()
                .any(|(t, _)| name.strip_prefix(s.name.as_str()) == Some(&format!("/{t}")))
        })
}

/// Renders a rule's log-format argument against the request at hand.
fn render(f: &LogFormat, ctx: &SampleCtx<'_>) -> String {
    let rec = LogRecord {
        frontend: ctx.frontend,
        backend: ctx.backend.unwrap_or(ctx.frontend),
        http: true,
        ..Default::default()
    };
    let mut out = String::new();
    f.render(&rec, ctx, &mut out);
    out
}

/// Applies `http-request` rules in order; header edits happen in place, the first final action
/// (deny, redirect, return, allow) stops evaluation.
pub fn apply_http_request(rules: &[Rule], req: &mut RequestHead, base: &SampleCtx<'_>) -> Verdict {
    // Most proxies have none: no copy of the context for them.
    if rules.is_empty() {
        return Verdict::Continue;
    }
    // `set-src`/`set-dst` change what the next rules see.
    let mut base = *base;
    let base = &mut base;
    for rule in rules {
        let ctx = SampleCtx {
            req: Some(&*req),
            ..*base
        };
        if !Condition::eval_opt(rule.cond.as_ref(), &ctx) {
            continue;
        }
        if rule.action.is_final() {
            record(base, rule.at);
        }
        match &rule.action {
            Action::Lua { name, args } => {
                let Some(host) = script::host() else { continue };
                match host.http_request(name, args, req, base) {
                    Outcome::Continue => {}
                    Outcome::Reply { status, bytes } => {
                        record(base, rule.at);
                        return Verdict::Reply { status, bytes };
                    }
                    Outcome::Done => {
                        record(base, rule.at);
                        return Verdict::Reply {
                            status: 0,
                            bytes: Vec::new(),
                        };
                    }
                }
            }
            Action::LuaService(name) => {
                let Some((status, bytes, close)) =
                    script::host().and_then(|h| h.http_service(name, req, base))
                else {
                    continue;
                };
                return Verdict::Service {
                    name: name.clone(),
                    status,
                    bytes,
                    close,
                };
            }
            Action::SetHeader(name, f) => {
                let v = render(f, &ctx);
                req.headers.set(name, v.into_bytes());
            }
            Action::AddHeader(name, f) => {
                let v = render(f, &ctx);
                req.headers.append(name.clone(), v.into_bytes());
            }
            Action::DelHeader(name) => req.headers.remove(name),
            Action::SetLine(part, f) => {
                let v = render(f, &ctx);
                rewrite::set_part(req, *part, &v);
            }
            Action::ReplaceLine(part, re, f) => {
                let v = render(f, &ctx);
                rewrite::replace_part(req, *part, re, &v);
            }
            Action::ReplaceHeader {
                name,
                re,
                replace,
                values,
            } => {
                let v = render(replace, &ctx);
                rewrite::replace_header(&mut req.headers.0, name, re, &v, *values);
            }
            Action::Sc(a) => a.run(&ctx),
            Action::TrackSc(t) => {
                if let Some(into) = ctx.stick.and_then(|v| v.strm)
                    && t.run(&ctx, into)
                    && let Some(tr) = into.get(t.sc)
                {
                    // HAProxy counts the request that starts tracking at once.
                    tr.count_http_req(ctx.stick.map_or(0, |v| v.now_ms));
                }
            }
            // Only `http-response` rules carry it (the parser refuses it in requests).
            Action::SetStatus(..) => {}
            Action::Capture { expr, slot, len } => capture(&ctx, expr, false, *slot, *len),
            Action::SetVar { var, conds, value } => set_var(&ctx, var, conds, value),
            Action::UnsetVar(var) => {
                if let Some(v) = ctx.vars {
                    v.unset(var);
                }
            }
            Action::NormalizeUri(n) => match super::normalize::normalize(&req.target, *n) {
                Ok(t) => req.target = t,
                Err(_) => {
                    record(base, rule.at);
                    return Verdict::Invalid;
                }
            },
            Action::Nop => {}
            Action::SetLogLevel(l) => set_level(base, *l),
            Action::Tarpit(status) => return Verdict::Tarpit(*status),
            Action::SilentDrop => return Verdict::SilentDrop,
            // Not to HTTP/1.0 clients (as HAProxy).
            Action::EarlyHint(name, f) => {
                if let Some(l) = ctx.last_rule
                    && req.version != crate::http::head::Version::Http10
                {
                    l.push_hint(name, render(f, &ctx));
                }
            }
            Action::SetAddr { dst, port, expr } => {
                if let Some(a) = new_addr(&ctx, *dst, *port, expr) {
                    if *dst {
                        base.dst = a;
                    } else {
                        base.src = a;
                    }
                    if let Some(l) = base.last_rule {
                        l.set_addr(*dst, a);
                    }
                }
            }
            Action::Deny(status) => return Verdict::Deny(*status),
            Action::Auth(realm) => return Verdict::Auth(realm.clone()),
            Action::Allow => return Verdict::Continue,
            Action::Reject => return Verdict::Reject,
            Action::UsePrometheus => return Verdict::Prometheus,
            Action::Return {
                status,
                content_type,
                body,
                headers,
            } => {
                return Verdict::Return {
                    status: *status,
                    content_type: content_type.clone(),
                    body: match body {
                        ReturnBody::None => None,
                        ReturnBody::Plain(b) => Some(b.clone()),
                        ReturnBody::Lf(f) => Some(render(f, &ctx)),
                    },
                    headers: headers
                        .iter()
                        .map(|(n, f)| (n.clone(), render(f, &ctx)))
                        .collect(),
                };
            }
            Action::Redirect {
                kind,
                value,
                code,
                drop_query,
                append_slash,
            } => {
                let v = render(value, &ctx);
                let location = redirect_location(kind, &v, req, *drop_query, *append_slash);
                return Verdict::Redirect {
                    code: *code,
                    location,
                };
            }
        }
    }
    Verdict::Continue
}

/// A `capture` action: the sample as a string into the slot (nothing when it yields none).
fn capture(ctx: &SampleCtx<'_>, expr: &SampleExpr, response: bool, slot: usize, len: usize) {
    if let (Some(caps), Some(v)) = (ctx.captures, expr.eval(ctx)) {
        caps.store(response, slot, len, &v.to_str());
    }
}

/// `set-var`/`set-var-fmt`: a sample that yields nothing leaves the variable as it was.
fn set_var(ctx: &SampleCtx<'_>, var: &VarName, conds: &[SetCond], value: &VarValue) {
    let Some(vars) = ctx.vars else { return };
    match value {
        VarValue::Sample(e) => {
            if let Some(v) = e.eval(ctx) {
                vars.set(var, v, conds);
            }
        }
        VarValue::Fmt(f) => {
            let v = render(f, ctx);
            vars.set(var, SampleValue::Str(v.into()), conds);
        }
    }
}

/// What one section's `http-response` rules decided.
#[derive(Debug, PartialEq, Eq)]
pub enum ResVerdict {
    Continue,
    /// `deny`: the response is replaced by this status's error page.
    Deny(u16),
    /// `redirect location …`: the response is replaced by a redirect.
    Redirect {
        code: u16,
        location: String,
    },
}

/// Applies one section's `http-response` rules to the server's response head, in order; the
/// first `allow` or `deny` stops this section. The request is gone by now (HAProxy has
/// forwarded it), so request fetches yield nothing here.
pub fn apply_http_response(
    rules: &[Rule],
    res: &mut ResponseHead,
    base: &SampleCtx<'_>,
) -> ResVerdict {
    for rule in rules {
        let ctx = SampleCtx {
            req: None,
            res: Some(&*res),
            ..*base
        };
        if !Condition::eval_opt(rule.cond.as_ref(), &ctx) {
            continue;
        }
        if rule.action.is_final() {
            record(base, rule.at);
        }
        match &rule.action {
            Action::Lua { name, args } => {
                let Some(host) = script::host() else { continue };
                let plain = SampleCtx {
                    req: None,
                    res: None,
                    ..*base
                };
                // Ending the transaction from a response action stops this section's rules;
                // the response already received is forwarded (see docs/compatibility.md).
                if host.http_response(name, args, res, &plain) != Outcome::Continue {
                    record(base, rule.at);
                    return ResVerdict::Continue;
                }
            }
            Action::SetHeader(name, f) => {
                let v = render(f, &ctx);
                res.headers.set(name, v.into_bytes());
            }
            Action::AddHeader(name, f) => {
                let v = render(f, &ctx);
                res.headers.append(name.clone(), v.into_bytes());
            }
            Action::DelHeader(name) => res.headers.remove(name),
            Action::ReplaceHeader {
                name,
                re,
                replace,
                values,
            } => {
                let v = render(replace, &ctx);
                rewrite::replace_header(&mut res.headers.0, name, re, &v, *values);
            }
            Action::SetStatus(status, reason) => {
                res.status = *status;
                res.reason = match reason {
                    Some(r) => r.clone(),
                    None => crate::http::errors::reason(*status).to_string(),
                };
            }
            Action::Capture { expr, slot, len } => capture(&ctx, expr, true, *slot, *len),
            Action::SetVar { var, conds, value } => set_var(&ctx, var, conds, value),
            Action::UnsetVar(var) => {
                if let Some(v) = ctx.vars {
                    v.unset(var);
                }
            }
            Action::SetLogLevel(l) => set_level(base, *l),
            Action::Sc(a) => a.run(&ctx),
            Action::Deny(status) => return ResVerdict::Deny(*status),
            Action::Redirect { value, code, .. } => {
                // Only `location` is accepted here (the parser refuses the other kinds).
                return ResVerdict::Redirect {
                    code: *code,
                    location: render(value, &ctx),
                };
            }
            Action::Allow => return ResVerdict::Continue,
            // Request-only actions (the parser keeps them out of `http-response`).
            _ => {}
        }
    }
    ResVerdict::Continue
}

/// The `Location` of a redirect, as HAProxy builds it: `scheme` keeps host and URI, `prefix`
/// prepends to the URI, `location` is used as is.
pub fn redirect_location(
    kind: &RedirectKind,
    value: &str,
    req: &RequestHead,
    drop_query: bool,
    append_slash: bool,
) -> String {
    let mut uri = if req.target.starts_with('/') {
        req.target.clone()
    } else {
        req.path().to_string()
    };
    if let Some(q) = uri.find('?').filter(|_| drop_query) {
        uri.truncate(q);
    }
    if append_slash && !uri.ends_with('/') {
        uri.push('/');
    }
    match kind {
        RedirectKind::Location => value.to_string(),
        RedirectKind::Prefix => {
            if value == "/" {
                uri
            } else {
                format!("{value}{uri}")
            }
        }
        RedirectKind::Scheme => {
            let host = req
                .headers
                .get_last("host")
                .map(|h| String::from_utf8_lossy(h).into_owned());
            match host {
                Some(h) => format!("{value}://{h}{uri}"),
                None => format!("{value}://{uri}"),
            }
        }
    }
}

/// Runs `tcp-request content` (or `connection`) rules in order, as HAProxy does: the first rule
/// whose condition holds decides; a condition still waiting for bytes (`ctx.partial`) stops the
/// evaluation with `None` (wait for more data or for `inspect-delay` to expire); past the last
/// rule the connection is accepted.
pub fn apply_tcp_rules(rules: &[TcpRule], ctx: &SampleCtx<'_>) -> Option<TcpRequestAction> {
    tcp_rules(rules, ctx, &mut false)
}

/// [`apply_tcp_rules`] for `tcp-request connection` rules: also whether an applying
/// `expect-proxy layer4` rule came before the verdict.
pub fn apply_connection_rules(
    rules: &[TcpRule],
    ctx: &SampleCtx<'_>,
) -> (Option<TcpRequestAction>, bool) {
    let mut expect = false;
    let v = tcp_rules(rules, ctx, &mut expect);
    (v, expect)
}

fn tcp_rules(
    rules: &[TcpRule],
    ctx: &SampleCtx<'_>,
    expect_proxy: &mut bool,
) -> Option<TcpRequestAction> {
    for rule in rules {
        let applies = match &rule.cond {
            None => true,
            Some(c) => c.eval_partial(ctx)?,
        };
        if !applies {
            continue;
        }
        if let Some((expr, slot, len)) = &rule.capture {
            capture(ctx, expr, false, *slot, *len);
            continue;
        }
        if let Some((var, conds, value)) = &rule.var {
            match value {
                Some(v) => set_var(ctx, var, conds, v),
                None => {
                    if let Some(vars) = ctx.vars {
                        vars.unset(var);
                    }
                }
            }
            continue;
        }
        if rule.action == TcpRequestAction::ExpectProxy {
            *expect_proxy = true;
            continue;
        }
        if let TcpRequestAction::SetLogLevel(l) = rule.action {
            set_level(ctx, l);
            continue;
        }
        // Refused at start (see `engine::pending_features`): never reached in a running process.
        if let TcpRequestAction::SetAddr { .. } = rule.action {
            continue;
        }
        if let TcpRequestAction::Lua { name, args } = &rule.action {
            // Not final, unless the script ends the session (`txn:done()`).
            match script::host().map(|h| h.tcp_request(name, args, ctx)) {
                None | Some(Outcome::Continue) => continue,
                Some(_) => {
                    record(ctx, rule.at);
                    return Some(TcpRequestAction::Reject);
                }
            }
        }
        if let Some(a) = &rule.sc {
            a.run(ctx);
            continue;
        }
        match &rule.track {
            // `track-sc` is not final: content rules track per stream, connection rules per
            // session.
            Some(t) => {
                if let Some(into) = ctx.stick.and_then(|v| v.strm.or(v.sess)) {
                    t.run(ctx, into);
                }
            }
            None => {
                record(ctx, rule.at);
                return Some(rule.action.clone());
            }
        }
    }
    Some(TcpRequestAction::Accept)
}

/// `set-src|set-dst[-port]`: the stream's new address, from the sample as an address (the
/// port kept) or as a port; None when the sample is none or not of that type.
fn new_addr(
    ctx: &SampleCtx<'_>,
    dst: bool,
    port: bool,
    expr: &SampleExpr,
) -> Option<std::net::SocketAddr> {
    let v = expr.eval(ctx)?;
    let mut a = if dst { ctx.dst } else { ctx.src };
    if port {
        // HAProxy stores the integer's low 16 bits (`htons`).
        a.set_port(v.to_int()? as u16);
    } else {
        a.set_ip(v.to_ip()?);
    }
    Some(a)
}

/// `set-log-level`: the stream's line goes out at this severity (None: not at all).
fn set_level(ctx: &SampleCtx<'_>, l: Option<u8>) {
    use crate::ana::last_rule::LogLevel;
    if let Some(r) = ctx.last_rule {
        r.set_level(l.map_or(LogLevel::Silent, LogLevel::Severity));
    }
}

/// Records the rule that ends its rule set as the stream's last final rule.
fn record(ctx: &SampleCtx<'_>, at: RuleLoc) {
    if let Some(l) = ctx.last_rule {
        l.set(at);
    }
}

impl Action {
    /// Whether the action ends its rule set (HAProxy records it as the last rule). A Lua
    /// action is final only when the script ends the transaction.
    fn is_final(&self) -> bool {
        matches!(
            self,
            Action::LuaService(_)
                | Action::Redirect { .. }
                | Action::Deny(_)
                | Action::Tarpit(_)
                | Action::SilentDrop
                | Action::Return { .. }
                | Action::Allow
                | Action::Reject
                | Action::UsePrometheus
                | Action::Auth(_)
        )
    }
}

/// The dynamic rules placed before static rule `pos`: `Some(choice)` once one applies. A name
/// that is no backend ends the rules with the default backend, as HAProxy does.
fn dynamic_route(rules: &ProxyRules, pos: usize, ctx: &SampleCtx<'_>) -> Option<Option<usize>> {
    for (_, f, cond) in rules.dynamic_backends.iter().filter(|d| d.0 == pos) {
        if !Condition::eval_opt(cond.as_ref(), ctx) {
            continue;
        }
        let name = render(f, ctx);
        let found = rules.backend_names.iter().find(|(n, _)| *n == name);
        return Some(found.map(|(_, i)| *i).or(rules.default_backend));
    }
    None
}

/// The backend a frontend sends a stream to: the first `use_backend` whose condition holds,
/// else `default_backend`, else the proxy itself when it is a `listen`/backend.
pub fn route(
    rules: &ProxyRules,
    self_index: usize,
    self_is_backend: bool,
    ctx: &SampleCtx<'_>,
) -> Option<usize> {
    for (pos, (idx, cond)) in rules.use_backends.iter().enumerate() {
        if let Some(d) = dynamic_route(rules, pos, ctx) {
            return d;
        }
        if Condition::eval_opt(cond.as_ref(), ctx) {
            return Some(*idx);
        }
    }
    if let Some(d) = dynamic_route(rules, rules.use_backends.len(), ctx) {
        return d;
    }
    rules.default_backend.or(if self_is_backend {
        Some(self_index)
    } else {
        None
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::head::{Headers, Version};

    fn req(target: &str, host: Option<&str>) -> RequestHead {
        let mut headers = Headers::default();
        if let Some(h) = host {
            headers.append("Host", h);
        }
        RequestHead {
            method: "GET".into(),
            target: target.into(),
            version: Version::Http11,
            headers,
        }
    }

    #[test]
    fn redirect_locations() {
        let r = req("/a?b=1", Some("h.example:8080"));
        assert_eq!(
            redirect_location(&RedirectKind::Scheme, "https", &r, false, false),
            "https://h.example:8080/a?b=1"
        );
        assert_eq!(
            redirect_location(&RedirectKind::Prefix, "https://x.example", &r, false, false),
            "https://x.example/a?b=1"
        );
        assert_eq!(
            redirect_location(&RedirectKind::Prefix, "https://x.example", &r, true, true),
            "https://x.example/a/"
        );
        assert_eq!(
            redirect_location(&RedirectKind::Location, "/new", &r, false, false),
            "/new"
        );
    }

    fn compile_one(text: &str) -> Result<Vec<ProxyRules>, Vec<Diag>> {
        let env = |_: &str| None;
        let loaded = crate::config::parse_str("t.cfg", text, &env)?;
        compile(&loaded.config)
    }

    #[test]
    fn unknown_acl_in_rule_is_an_error_with_location() {
        let cfg = "defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind 127.0.0.1:1\n  http-request deny if nope\n  default_backend b\nbackend b\n  server s 127.0.0.1:2\n";
        let errs = compile_one(cfg).err().expect("error");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].line, 8);
        assert!(
            errs[0].msg.contains("'http-request deny' condition")
                && errs[0].msg.contains("no such ACL : 'nope'"),
            "{}",
            errs[0].msg
        );
    }

    /// `use_backend <log-format>` in its place among the static rules; a name that is no
    /// backend ends the rules with the default backend (HAProxy's `process_switching_rules`).
    #[test]
    fn dynamic_use_backend_routes_by_rendered_name() {
        let dir = std::env::temp_dir().join(format!("pc-rules-map-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let map = dir.join("hosts.map");
        std::fs::write(&map, "a.example a\nz.example nope\n").unwrap();
        let cfg = format!(
            "defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind 127.0.0.1:1\n  use_backend c if {{ path /c }}\n  use_backend %[req.hdr(host),lower,map({},b)] if {{ path_beg /m }}\n  use_backend c\n  default_backend d\nbackend a\n  server s 127.0.0.1:2\nbackend b\n  server s 127.0.0.1:3\nbackend c\n  server s 127.0.0.1:4\nbackend d\n  server s 127.0.0.1:5\n",
            map.display()
        );
        let rules = compile_one(&cfg).expect("compiles");
        let fe = &rules[0];
        let base = SampleCtx::new(
            "127.0.0.1:5000".parse().unwrap(),
            "127.0.0.1:1".parse().unwrap(),
            "f",
        );
        let at = |path: &str, host: &str| {
            let r = req(path, Some(host));
            let ctx = SampleCtx {
                req: Some(&r),
                ..base
            };
            route(fe, 0, false, &ctx)
        };
        assert_eq!(at("/c", "a.example"), Some(3), "static rule first");
        assert_eq!(at("/m", "A.Example"), Some(1), "map hit");
        assert_eq!(at("/m", "other"), Some(2), "map default");
        assert_eq!(
            at("/m", "z.example"),
            Some(4),
            "no such backend: default_backend"
        );
        assert_eq!(at("/x", "a.example"), Some(3), "condition false: next rule");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn rules_apply_in_order_and_route() {
        let cfg = "defaults\n  mode http\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind 127.0.0.1:1\n  acl api path_beg /api\n  http-request set-header X-Host %[req.hdr(Host)]\n  http-request del-header X-Drop\n  http-request deny deny_status 429 if { path /blocked }\n  use_backend a if api\n  default_backend b\nbackend a\n  server s 127.0.0.1:2\nbackend b\n  server s 127.0.0.1:3\n";
        let rules = compile_one(cfg).expect("compiles");
        let fe = &rules[0];
        let src = "127.0.0.1:5000".parse().unwrap();
        let dst = "127.0.0.1:1".parse().unwrap();
        let base = SampleCtx::new(src, dst, "f");
        let mut r = req("/api/x", Some("example.local"));
        r.headers.append("X-Drop", "1");
        assert!(matches!(
            apply_http_request(&fe.http_request, &mut r, &base),
            Verdict::Continue
        ));
        assert_eq!(r.headers.get_last("x-host"), Some(&b"example.local"[..]));
        assert!(!r.headers.contains("x-drop"));
        let ctx = SampleCtx {
            req: Some(&r),
            ..base
        };
        assert_eq!(route(fe, 0, false, &ctx), Some(1));
        let other = req("/other", Some("e"));
        let ctx = SampleCtx {
            req: Some(&other),
            ..base
        };
        assert_eq!(route(fe, 0, false, &ctx), Some(2));
        let mut blocked = req("/blocked", Some("e"));
        assert!(matches!(
            apply_http_request(&fe.http_request, &mut blocked, &base),
            Verdict::Deny(429)
        ));
    }

    /// Seed 004's passthrough: wait for the ClientHello, then route on its SNI.
    #[test]
    fn sni_passthrough_rules() {
        let cfg = "defaults\n  mode tcp\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\nfrontend f\n  bind 127.0.0.1:1\n  tcp-request inspect-delay 5s\n  tcp-request connection reject if { src 10.0.0.0/8 }\n  tcp-request content reject if { req.len gt 10 } !{ req.ssl_hello_type 1 }\n  tcp-request content accept if { req.ssl_hello_type 1 }\n  use_backend a if { req.ssl_sni -i a.example }\n  use_backend b if { req_ssl_sni -m dom b.example }\n  default_backend d\nbackend a\n  server s 127.0.0.1:2\nbackend b\n  server s 127.0.0.1:3\nbackend d\n  server s 127.0.0.1:4\n";
        let rules = compile_one(cfg).expect("compiles");
        let fe = &rules[0];
        let ctx = |src: &str, payload: &'static [u8], partial: bool| {
            let mut c = SampleCtx::new(src.parse().unwrap(), "127.0.0.1:1".parse().unwrap(), "f");
            c.payload = Some(payload);
            c.partial = partial;
            c
        };
        let leak = |v: Vec<u8>| -> &'static [u8] { Box::leak(v.into_boxed_slice()) };
        let a = leak(crate::tcp::hello::test_hello(Some("A.example"), &[]));
        let b = leak(crate::tcp::hello::test_hello(Some("x.b.example"), &[]));
        let none = leak(crate::tcp::hello::test_hello(None, &[]));
        let c = ctx("127.0.0.1:9", a, true);
        assert_eq!(
            apply_tcp_rules(&fe.tcp_connection, &c),
            Some(TcpRequestAction::Accept)
        );
        assert_eq!(
            apply_tcp_rules(&fe.tcp_connection, &ctx("10.1.1.1:9", a, true)),
            Some(TcpRequestAction::Reject)
        );
        assert_eq!(
            apply_tcp_rules(&fe.tcp_content, &c),
            Some(TcpRequestAction::Accept)
        );
        assert_eq!(route(fe, 0, false, &c), Some(1));
        assert_eq!(route(fe, 0, false, &ctx("127.0.0.1:9", b, true)), Some(2));
        assert_eq!(
            route(fe, 0, false, &ctx("127.0.0.1:9", none, true)),
            Some(3)
        );
        // Half a ClientHello waits; at expiry it is accepted and goes to the default backend.
        let half: &'static [u8] = &a[..a.len() / 2];
        assert_eq!(
            apply_tcp_rules(&fe.tcp_content, &ctx("127.0.0.1:9", half, true)),
            None
        );
        assert_eq!(
            apply_tcp_rules(&fe.tcp_content, &ctx("127.0.0.1:9", half, false)),
            Some(TcpRequestAction::Reject),
            "final: not a ClientHello, and past 10 bytes"
        );
        let fin = ctx("127.0.0.1:9", &a[..8], false);
        assert_eq!(
            apply_tcp_rules(&fe.tcp_content, &fin),
            Some(TcpRequestAction::Accept)
        );
        assert_eq!(route(fe, 0, false, &fin), Some(3));
        // Plain text past 10 bytes is rejected at once.
        let http = ctx("127.0.0.1:9", b"GET / HTTP/1.1\r\n", true);
        assert_eq!(
            apply_tcp_rules(&fe.tcp_content, &http),
            Some(TcpRequestAction::Reject)
        );
    }

    fn loaded(text: &str) -> crate::config::model::Config {
        let env = |_: &str| None;
        crate::config::parse_str("t.cfg", text, &env)
            .map_err(|e| format!("{e:?}"))
            .unwrap()
            .config
    }

    const HEAD: &str = "defaults\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n";

    /// `tcp-request connection track-sc0 src` + `reject if { sc_conn_rate(0) gt 3 }`: the
    /// fourth connection of a second passes, the fifth is rejected; another source is not.
    #[test]
    fn conn_rate_reject() {
        let cfg = loaded(&format!(
            "{HEAD}frontend f\n  mode tcp\n  bind 127.0.0.1:1\n  stick-table type ip size 1k expire 30s store conn_rate(1s),conn_cur\n  tcp-request connection track-sc0 src\n  tcp-request connection reject if {{ sc_conn_rate(0) gt 3 }}\n  default_backend b\nbackend b\n  server s 127.0.0.1:2\n"
        ));
        let rules = compile(&cfg).map_err(|e| format!("{e:?}")).unwrap();
        let tables = crate::stick::Tables::build(&cfg);
        let own = tables.find("f").cloned();
        let verdict = |src: &str, now: u64| {
            let sess = StkCtrs::default();
            let mut ctx = SampleCtx::new(src.parse().unwrap(), "127.0.0.1:1".parse().unwrap(), "f");
            ctx.stick = Some(crate::stick::StickView {
                now_ms: now,
                sess: Some(&sess),
                strm: None,
                own: own.as_ref(),
                tables: &tables,
            });
            apply_tcp_rules(&rules[0].tcp_connection, &ctx)
        };
        for i in 0..3 {
            assert_eq!(
                verdict("10.0.0.1:5", 100 + i),
                Some(TcpRequestAction::Accept)
            );
        }
        assert_eq!(verdict("10.0.0.1:5", 200), Some(TcpRequestAction::Reject));
        assert_eq!(verdict("10.0.0.2:5", 200), Some(TcpRequestAction::Accept));
        // Rejected connections still count; two periods later the rate is back to 1.
        assert_eq!(verdict("10.0.0.1:5", 3000), Some(TcpRequestAction::Accept));
        let t = tables.find("f").unwrap();
        assert_eq!(
            t.peek(
                Some(&crate::stick::Key::Ip("10.0.0.1".parse().unwrap())),
                crate::stick::StickData::ConnCur,
                3000
            ),
            Some(0),
            "released with the session"
        );
    }

    /// Seed 004: `http-request track-sc0 src` then `deny deny_status 429` past the rate.
    #[test]
    fn http_req_rate_deny_429() {
        let cfg = loaded(&format!(
            "{HEAD}frontend f\n  mode http\n  bind 127.0.0.1:1\n  stick-table type ip size 100k expire 1m store http_req_rate(1m)\n  http-request track-sc0 src\n  acl too_many sc_http_req_rate(0) gt 2\n  http-request deny deny_status 429 if too_many\n  default_backend b\nbackend b\n  mode http\n  server s 127.0.0.1:2\n"
        ));
        let rules = compile(&cfg).map_err(|e| format!("{e:?}")).unwrap();
        let tables = crate::stick::Tables::build(&cfg);
        let own = tables.find("f").cloned();
        let sess = StkCtrs::default();
        let run = |now: u64| {
            let strm = StkCtrs::default();
            let mut base = SampleCtx::new(
                "10.0.0.1:5".parse().unwrap(),
                "127.0.0.1:1".parse().unwrap(),
                "f",
            );
            base.stick = Some(crate::stick::StickView {
                now_ms: now,
                sess: Some(&sess),
                strm: Some(&strm),
                own: own.as_ref(),
                tables: &tables,
            });
            let mut r = req("/", Some("h"));
            match apply_http_request(&rules[0].http_request, &mut r, &base) {
                Verdict::Deny(s) => s,
                _ => 200,
            }
        };
        assert_eq!([run(1), run(2), run(3), run(4)], [200, 200, 429, 429]);
        let t = tables.find("f").unwrap();
        assert_eq!(
            t.peek(
                Some(&crate::stick::Key::Ip("10.0.0.1".parse().unwrap())),
                crate::stick::StickData::HttpReqRate,
                5
            ),
            Some(4)
        );
    }

    /// `tcp-response content` on the server's bytes: a fetch that needs more waits while the
    /// inspection is partial; the final rule is recorded as the last rule, with its line.
    #[test]
    fn tcp_response_rules_and_last_rule() {
        let cfg = loaded(&format!(
            "{HEAD}backend b\n  mode tcp\n  tcp-response inspect-delay 2s\n  \
             tcp-response content reject if {{ res.payload(0,3) -m bin 626164 }}\n  \
             tcp-response content close if {{ res.payload(0,2) -m str by }}\n  \
             tcp-response content accept if {{ res.len gt 3 }}\n  \
             tcp-response content reject unless WAIT_END\n  server s 127.0.0.1:2\n"
        ));
        let rules = compile(&cfg).map_err(|e| format!("{e:?}")).unwrap();
        let last = crate::ana::last_rule::LastRule::default();
        let run = |payload: &'static [u8], partial: bool| {
            let mut c = SampleCtx::new(
                "10.0.0.1:5".parse().unwrap(),
                "127.0.0.1:1".parse().unwrap(),
                "b",
            );
            c.res_payload = Some(payload);
            c.partial = partial;
            c.last_rule = Some(&last);
            apply_tcp_rules(&rules[0].tcp_response, &c)
        };
        assert_eq!(run(b"ba", true), None, "the 3 bytes may still come");
        assert_eq!(last.get(), None);
        assert_eq!(run(b"bad!", true), Some(TcpRequestAction::Reject));
        assert_eq!(last.get().map(|r| r.line), Some(8));
        assert_eq!(run(b"bye", true), Some(TcpRequestAction::Close));
        assert_eq!(run(b"hello", true), Some(TcpRequestAction::Accept));
        assert_eq!(last.get().map(|r| (r.file, r.line)), Some(("t.cfg", 10)));
        assert_eq!(run(b"hi", true), None, "WAIT_END waits");
        assert_eq!(run(b"hi", false), Some(TcpRequestAction::Accept));
        assert_eq!(last.get().map(|r| r.line), Some(10), "no final rule: kept");
    }

    #[test]
    fn missing_tables_in_haproxy_words() {
        let errs = |body: &str| -> Vec<String> {
            let cfg = loaded(&format!(
                "{HEAD}frontend f\n  mode tcp\n  bind 127.0.0.1:1\n{body}  default_backend b\nbackend b\n  server s 127.0.0.1:2\n"
            ));
            match compile(&cfg) {
                Ok(_) => Vec::new(),
                Err(es) => es.into_iter().map(|d| d.msg).collect(),
            }
        };
        assert_eq!(
            errs("  tcp-request connection track-sc0 src\n"),
            ["Proxy 'f': unable to find table 'f' referenced by track-sc0."]
        );
        assert_eq!(
            errs("  tcp-request connection reject if { src_conn_rate gt 10 }\n"),
            [
                "parsing [t.cfg:8]: unable to find table 'f' referenced in arg 1 of ACL keyword 'src_conn_rate' in proxy 'f'."
            ]
        );
        assert_eq!(
            errs("  tcp-request connection reject if { sc_conn_rate(0,nope) gt 10 }\n"),
            [
                "parsing [t.cfg:8]: unable to find table 'nope' referenced in arg 2 of ACL keyword 'sc_conn_rate' in proxy 'f'."
            ]
        );
        assert!(errs("  tcp-request connection reject if { sc_conn_rate(0) gt 10 }\n").is_empty());
    }

    #[test]
    fn src_pattern_file() {
        let dir = std::env::temp_dir().join(format!("pc-acl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ok = dir.join("ok.lst");
        std::fs::write(&ok, "# allowed\n  10.0.0.0/8\n\n192.168.1.1\n").unwrap();
        let bad = dir.join("bad.lst");
        std::fs::write(&bad, "10.0.0.0/8\nbogus\n").unwrap();
        let cfg_for = |path: &std::path::Path| {
            loaded(&format!(
                "{HEAD}frontend f\n  mode tcp\n  bind 127.0.0.1:1\n  tcp-request connection reject if !{{ src -f {} }}\n  default_backend b\nbackend b\n  server s 127.0.0.1:2\n",
                path.display()
            ))
        };
        let rules = compile(&cfg_for(&ok))
            .map_err(|e| format!("{e:?}"))
            .unwrap();
        let v = |src: &str| {
            let ctx = SampleCtx::new(src.parse().unwrap(), "127.0.0.1:1".parse().unwrap(), "f");
            apply_tcp_rules(&rules[0].tcp_connection, &ctx)
        };
        assert_eq!(v("10.1.2.3:1"), Some(TcpRequestAction::Accept));
        assert_eq!(v("192.168.1.1:1"), Some(TcpRequestAction::Accept));
        assert_eq!(v("192.168.1.2:1"), Some(TcpRequestAction::Reject));
        let e = compile(&cfg_for(&bad)).err().unwrap();
        assert!(
            e[0].msg.contains(&format!(
                "'bogus' is not a valid IPv4 or IPv6 address at line 2 of file '{}'",
                bad.display()
            )),
            "{}",
            e[0].msg
        );
        let e = compile(&cfg_for(&dir.join("nope.lst"))).err().unwrap();
        assert!(
            e[0].msg.contains(&format!(
                "failed to open pattern file <{}>",
                dir.join("nope.lst").display()
            )),
            "{}",
            e[0].msg
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
