//! Rules and checks: `acl`, `http-request`, `tcp-request`, `http-check`, `tcp-check`, and the
//! proxy `stats` page keywords. Conditions and ACL patterns stay as tokens (`http::acl` compiles
//! them later).

use super::kw_proxy::P;
use super::model::{
    AclDef, CheckConnect, Cond, ExpectMatch, HdrPattern, HttpCheck, HttpCheckExpect, HttpCheckRule,
    HttpRequestAction, HttpRequestRule, HttpSendRule, LinePart, RedirectKind, StatsPage, StrMatch,
    TcpAt, TcpCheckRule, TcpRequestAction, TcpRequestRule,
};
use super::values::{TimeError, invalid_name_char, parse_time, parse_u32};

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map_or("", String::as_str)
}

/// `args[at]` is `if` or `unless`: the condition is every word after it.
pub(crate) fn cond(p: &P, args: &[String], at: usize) -> Cond {
    Cond {
        unless: arg(args, at) == "unless",
        tokens: args.get(at + 1..).unwrap_or_default().to_vec(),
        loc: p.c.loc.clone(),
    }
}

pub(crate) fn kw_acl(p: &mut P, args: &[String]) {
    let Some(name) = args.get(1).filter(|s| !s.is_empty()) else {
        p.alert("'acl' expects an ACL name.");
        return;
    };
    if let Some(c) = invalid_name_char(name) {
        p.alert(format!(
            "character '{c}' is not permitted in acl name '{name}'."
        ));
        return;
    }
    if args.len() < 3 {
        p.alert(format!(
            "error detected while parsing ACL '{name}' : missing fetch method in ACL expression ''."
        ));
        return;
    }
    let loc = p.c.loc.clone();
    p.px.acls.push(AclDef {
        name: name.clone(),
        tokens: args.get(2..).unwrap_or_default().to_vec(),
        loc,
    });
}

pub(crate) const HTTP_ACTIONS: &[&str] = &[
    "add-header",
    "allow",
    "auth",
    "capture",
    "del-header",
    "deny",
    "disable-l7-retry",
    "early-hint",
    "normalize-uri",
    "set-dst",
    "set-dst-port",
    "set-log-level",
    "set-src",
    "set-src-port",
    "silent-drop",
    "tarpit",
    "redirect",
    "reject",
    "replace-header",
    "replace-path",
    "replace-pathq",
    "replace-uri",
    "replace-value",
    "return",
    "sc-inc-gpc(*)",
    "sc-inc-gpc0(*)",
    "sc-inc-gpc1(*)",
    "sc-set-gpt(*)",
    "sc-set-gpt0(*)",
    "set-header",
    "set-method",
    "set-path",
    "set-pathq",
    "set-query",
    "set-uri",
    "set-var(*)",
    "set-var-fmt(*)",
    "track-sc0",
    "track-sc1",
    "track-sc2",
    "unset-var(*)",
    "use-service",
];

/// Status codes HAProxy has an error message for (what `deny_status` accepts).
const DENY_CODES: &[u16] = &[
    200, 400, 401, 403, 404, 405, 407, 408, 410, 413, 425, 429, 500, 501, 502, 503, 504,
];

/// `http-response` actions portcullis applies to a server's response head.
pub(crate) const HTTP_RESPONSE_ACTIONS: &[&str] = &[
    "add-header",
    "allow",
    "capture",
    "del-header",
    "deny",
    "redirect",
    "replace-header",
    "replace-value",
    "sc-inc-gpc(*)",
    "sc-inc-gpc0(*)",
    "sc-inc-gpc1(*)",
    "sc-set-gpt(*)",
    "sc-set-gpt0(*)",
    "set-header",
    "set-log-level",
    "set-status",
    "set-var(*)",
    "set-var-fmt(*)",
    "unset-var(*)",
];

pub(crate) fn kw_http_request(p: &mut P, args: &[String]) {
    if let Some(rule) = http_rule(p, args, "http-request", HTTP_ACTIONS) {
        p.px.http_request.push(rule);
    }
}

/// `http-after-response` actions (HAProxy 2.6's list less `ot-group` and `strict-mode`).
pub(crate) const HTTP_AFTER_RESPONSE_ACTIONS: &[&str] = &[
    "add-header",
    "allow",
    "capture",
    "del-header",
    "replace-header",
    "replace-value",
    "set-header",
    "set-status",
    "set-var-fmt(*)",
    "set-var(*)",
    "unset-var(*)",
];

pub(crate) fn kw_http_after_response(p: &mut P, args: &[String]) {
    if let Some(rule) = http_rule(p, args, "http-after-response", HTTP_AFTER_RESPONSE_ACTIONS) {
        p.px.http_after_response.push(rule);
    }
}

pub(crate) fn kw_http_response(p: &mut P, args: &[String]) {
    if let Some(rule) = http_rule(p, args, "http-response", HTTP_RESPONSE_ACTIONS) {
        p.px.http_response.push(rule);
    }
}

/// `set-var(<var>[,<cond>…]) <expr>`, `set-var-fmt(<var>[,<cond>…]) <fmt>` or
/// `unset-var(<var>)` at `args[1]`: the action and the index after its arguments.
fn parse_var_action(args: &[String], action: &str) -> Result<(HttpRequestAction, usize), String> {
    use crate::ana::vars::{SetCond, VarName};
    let (kw, rest) = action.split_once('(').unwrap_or((action, ""));
    let Some(inner) = rest.strip_suffix(')') else {
        return Err(format!(
            "incomplete argument after action '{action}'. Expects 'set-var(<var-name>)', 'set-var-fmt(<var-name>)' or 'unset-var(<var-name>)'."
        ));
    };
    let mut parts = inner.split(',');
    let name = parts.next().unwrap_or("");
    // HAProxy reads the name up to the first character a name cannot hold.
    if let Some(at) = name.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '.')) {
        return Err(format!("invalid syntax at char '{}'.", &rest[at..]));
    }
    let var = VarName::parse(name).map_err(|e| format!("{e}."))?;
    let conds = parts
        .map(|c| SetCond::parse(c).map_err(|_| format!("unknown condition \"{c}\".")))
        .collect::<Result<Vec<_>, _>>()?;
    match kw {
        "unset-var" => {
            if !conds.is_empty() {
                return Err("unset-var does not expect parameters after the variable name. Only \"set-var\" and \"set-var-fmt\" manage conditions.".into());
            }
            Ok((HttpRequestAction::UnsetVar { var }, 2))
        }
        "set-var-fmt" => {
            // HAProxy accepts a missing format (the variable is set to an empty string).
            let (expr, next) = match args.get(2).map(String::as_str) {
                None | Some("if" | "unless") => (String::new(), 2),
                Some(f) => (f.to_string(), 3),
            };
            Ok((
                HttpRequestAction::SetVar {
                    var,
                    conds,
                    expr,
                    fmt: true,
                },
                next,
            ))
        }
        _ => {
            let expr = match args.get(2).map(String::as_str) {
                None | Some("" | "if" | "unless") => return Err("missing fetch method.".into()),
                Some(e) => e,
            };
            crate::ana::sample::parse_sample(expr).map_err(|e| format!("{e}."))?;
            Ok((
                HttpRequestAction::SetVar {
                    var,
                    conds,
                    expr: expr.to_string(),
                    fmt: false,
                },
                3,
            ))
        }
    }
}

/// One `http-request` / `http-response` rule (`kw`), whose action must be in `actions`.
fn http_rule(p: &mut P, args: &[String], kw: &str, actions: &[&str]) -> Option<HttpRequestRule> {
    let action = arg(args, 1);
    if let Some(n) = action.strip_prefix("track-sc")
        && !actions.contains(&action)
        && n.parse::<u32>().is_ok()
    {
        let head = format!(
            "error detected in {} while parsing '{kw} {action}' rule :",
            p.desc()
        );
        if let Err(e) = parse_track_sc(args, 1) {
            p.alert(format!("{head} {e}"));
            return None;
        }
    }
    let kind = if kw == "http-request" {
        crate::ana::script::Kind::HttpReq
    } else {
        crate::ana::script::Kind::HttpRes
    };
    if let Some(name) = action.strip_prefix("lua.")
        && let Some(nargs) = crate::ana::script::action(kind, name)
    {
        return lua_rule(p, args, kw, nargs);
    }
    // `set-var(<name>)`-style actions are listed as `set-var(*)` (and `sc-inc-gpc0` alone
    // means counter 0).
    let listed = match action.split_once('(') {
        Some((a, _)) => format!("{a}(*)"),
        None if matches!(
            action,
            "sc-inc-gpc0" | "sc-inc-gpc1" | "sc-set-gpt0" | "sc-inc-gpc" | "sc-set-gpt"
        ) =>
        {
            format!("{action}(*)")
        }
        None => action.to_string(),
    };
    if !actions.contains(&listed.as_str()) {
        let list = actions
            .iter()
            .map(|a| a.to_string())
            .chain(crate::ana::script::listed_actions(kind))
            .map(|a| format!("'{a}'"))
            .collect::<Vec<_>>()
            .join(", ");
        p.alert(format!("'{kw}' expects {list}, but got '{action}'."));
        return None;
    }
    let head = format!(
        "error detected in {} while parsing '{kw} {action}' rule :",
        p.desc()
    );
    let mut i = 2;
    let act = match action {
        "set-header" | "add-header" | "early-hint" => {
            let (Some(n), Some(v)) = (args.get(2), args.get(3)) else {
                p.alert(format!("{head} expects exactly 2 arguments."));
                return None;
            };
            if n.is_empty() || n == "if" || n == "unless" {
                p.alert(format!("{head} expects exactly 2 arguments."));
                return None;
            }
            i = 4;
            let (name, value) = (n.clone(), v.clone());
            match action {
                "set-header" => HttpRequestAction::SetHeader { name, value },
                "early-hint" => HttpRequestAction::EarlyHint { name, value },
                _ => HttpRequestAction::AddHeader { name, value },
            }
        }
        "del-header" => {
            let Some(n) = args
                .get(2)
                .filter(|n| !n.is_empty() && *n != "if" && *n != "unless")
            else {
                p.alert(format!("{head} expects at least 1 argument."));
                return None;
            };
            i = 3;
            HttpRequestAction::DelHeader { name: n.clone() }
        }
        "redirect" => match parse_redirect(args, &mut i) {
            Ok(HttpRequestAction::Redirect { kind, .. })
                if kw != "http-request" && kind != super::model::RedirectKind::Location =>
            {
                p.alert(format!(
                    "{head} response only supports redirect type 'location'."
                ));
                return None;
            }
            Ok(a) => a,
            Err(e) => {
                p.alert(format!("{head} {e}"));
                return None;
            }
        },
        "deny" | "tarpit" => {
            // HAProxy denies a response with a 502, tarpits with a 500.
            let mut status = match (kw, action) {
                (_, "tarpit") => 500,
                ("http-response", _) => 502,
                _ => 403,
            };
            while matches!(arg(args, i), "deny_status" | "status") {
                match parse_u32(arg(args, i + 1)).and_then(|n| u16::try_from(n).ok()) {
                    Some(n) if DENY_CODES.contains(&n) => status = n,
                    Some(_) => {
                        p.alert(format!(
                            "{head} Unexpected status code '{}'.",
                            arg(args, i + 1)
                        ));
                        return None;
                    }
                    None if arg(args, i + 1).is_empty() => {
                        p.alert(format!(
                            "{head} 'status' expects <status_code> as argument."
                        ));
                        return None;
                    }
                    None => {
                        p.alert(format!(
                            "{head} Unexpected status code '{}'.",
                            arg(args, i + 1)
                        ));
                        return None;
                    }
                }
                i += 2;
            }
            if action == "tarpit" {
                HttpRequestAction::Tarpit { status }
            } else {
                HttpRequestAction::Deny { status }
            }
        }
        "return" => {
            let mut status = 200u16;
            let mut content_type = None;
            let mut body = None;
            let mut body_lf = false;
            let mut headers = Vec::new();
            loop {
                let kw = arg(args, i);
                let v = args.get(i + 1).filter(|v| !v.is_empty());
                match kw {
                    "hdr" => match (v, args.get(i + 2)) {
                        (Some(n), Some(val)) => {
                            headers.push((n.clone(), val.clone()));
                            i += 3;
                            continue;
                        }
                        _ => {
                            p.alert(format!(
                                "{head} 'hdr' expects <name> and <value> as arguments."
                            ));
                            return None;
                        }
                    },
                    "lf-string" => match v {
                        Some(v) => (body, body_lf) = (Some(v.clone()), true),
                        None => {
                            p.alert(format!("{head} 'lf-string' expects <fmt> as argument."));
                            return None;
                        }
                    },
                    "file" | "lf-file" => match v {
                        Some(v) => match std::fs::read(v) {
                            Ok(b) => {
                                body = Some(String::from_utf8_lossy(&b).into_owned());
                                body_lf = kw == "lf-file";
                            }
                            Err(_) => {
                                p.alert(format!("{head} error opening file '{v}'."));
                                return None;
                            }
                        },
                        None => {
                            p.alert(format!("{head} '{kw}' expects <file> as argument."));
                            return None;
                        }
                    },
                    "status" => match v
                        .and_then(|v| parse_u32(v))
                        .and_then(|n| u16::try_from(n).ok())
                    {
                        Some(n) if (200..=599).contains(&n) => status = n,
                        _ if v.is_none() => {
                            p.alert(format!(
                                "{head} 'status' expects <status_code> as argument."
                            ));
                            return None;
                        }
                        _ => {
                            p.alert(format!(
                                "{head} Unexpected status code '{}'.",
                                arg(args, i + 1)
                            ));
                            return None;
                        }
                    },
                    "content-type" => match v {
                        Some(v) => content_type = Some(v.clone()),
                        None => {
                            p.alert(format!(
                                "{head} 'content-type' expects a value as argument."
                            ));
                            return None;
                        }
                    },
                    "string" => match v {
                        Some(v) => body = Some(v.clone()),
                        None => {
                            p.alert(format!("{head} 'string' expects <str> as argument."));
                            return None;
                        }
                    },
                    _ => break,
                }
                i += 2;
            }
            if body_lf && content_type.is_none() {
                p.alert(format!(
                    "{head} a content type must be defined with a log-format payload."
                ));
                return None;
            }
            if body.as_ref().is_some_and(|b| !b.is_empty()) {
                if content_type.is_none() {
                    p.alert(format!(
                        "{head} a content type must be defined when non-empty payload is configured."
                    ));
                    return None;
                }
                if matches!(status, 204 | 304) {
                    p.alert(format!("{head} No body expected for {status} responses."));
                    return None;
                }
            }
            HttpRequestAction::Return {
                status,
                content_type,
                body,
                body_lf,
                headers,
            }
        }
        "auth" => {
            let mut realm = None;
            if arg(args, 2) == "realm" {
                match args.get(3).filter(|r| !r.is_empty()) {
                    Some(r) => realm = Some(r.clone()),
                    None => {
                        p.alert(format!("{head} missing realm value."));
                        return None;
                    }
                }
                i = 4;
            }
            HttpRequestAction::Auth { realm }
        }
        "use-service"
            if arg(args, 2)
                .strip_prefix("lua.")
                .is_some_and(crate::ana::script::has_service) =>
        {
            i = 3;
            HttpRequestAction::LuaService {
                name: arg(args, 2).trim_start_matches("lua.").to_string(),
            }
        }
        "use-service" => {
            match arg(args, 2) {
                "prometheus-exporter" => {}
                "" | "if" | "unless" => {
                    p.alert(format!("{head} 'use-service' expects a service name.."));
                    return None;
                }
                other => {
                    p.alert(format!("{head} '{other}' unknown service name.."));
                    return None;
                }
            }
            i = 3;
            HttpRequestAction::UsePrometheus
        }
        "set-method" | "set-path" | "set-pathq" | "set-query" | "set-uri" => {
            let Some(v) = args.get(2).filter(|v| !v.is_empty()) else {
                p.alert(format!("{head} expects exactly 1 argument <format>."));
                return None;
            };
            if !matches!(arg(args, 3), "" | "if" | "unless") {
                p.alert(format!("{head} expects exactly 1 argument <format>."));
                return None;
            }
            i = 3;
            let part = match action {
                "set-method" => LinePart::Method,
                "set-path" => LinePart::Path,
                "set-pathq" => LinePart::PathQ,
                "set-query" => LinePart::Query,
                _ => LinePart::Uri,
            };
            HttpRequestAction::SetLine {
                part,
                value: v.clone(),
            }
        }
        "replace-path" | "replace-pathq" | "replace-uri" => {
            let (Some(re), Some(rep)) = (args.get(2), args.get(3)) else {
                p.alert(format!(
                    "{head} expects exactly 2 arguments <match-regex> and <replace-format>."
                ));
                return None;
            };
            if !matches!(arg(args, 4), "" | "if" | "unless") {
                p.alert(format!(
                    "{head} expects exactly 2 arguments <match-regex> and <replace-format>."
                ));
                return None;
            }
            if let Err(e) = regex::Regex::new(re) {
                p.alert(format!(
                    "{head} failed to parse the regex : {}.",
                    crate::ana::acl::regex_invalid(re, &e)
                ));
                return None;
            }
            i = 4;
            let part = match action {
                "replace-path" => LinePart::Path,
                "replace-pathq" => LinePart::PathQ,
                _ => LinePart::Uri,
            };
            HttpRequestAction::ReplaceLine {
                part,
                regex: re.clone(),
                replace: rep.clone(),
            }
        }
        "replace-header" | "replace-value" => {
            let (Some(n), Some(re), Some(rep)) = (args.get(2), args.get(3), args.get(4)) else {
                p.alert(format!("{head} expects exactly 3 arguments."));
                return None;
            };
            if let Err(e) = regex::Regex::new(re) {
                p.alert(format!(
                    "{head} {}.",
                    crate::ana::acl::regex_invalid(re, &e)
                ));
                return None;
            }
            i = 5;
            HttpRequestAction::ReplaceHeader {
                name: n.clone(),
                regex: re.clone(),
                replace: rep.clone(),
                values: action == "replace-value",
            }
        }
        "capture" => match super::kw_capture::capture_rule(p, args, 2, kw != "http-request") {
            Ok((sample, slot, len)) => {
                i = 5;
                HttpRequestAction::Capture { sample, slot, len }
            }
            Err(e) => {
                p.alert(format!("{head} {e}"));
                return None;
            }
        },
        a if a.starts_with("sc-") => match parse_sc_action(args, 1, true) {
            Ok((act, next)) => {
                i = next;
                HttpRequestAction::Sc(act)
            }
            Err(e) => {
                p.alert(format!("{head} {e}."));
                // HAProxy stops reading here (`ERR_ABORT`).
                if let Some(d) = p.c.diags.last_mut() {
                    d.abort = true;
                }
                return None;
            }
        },
        a if listed.ends_with("(*)") => match parse_var_action(args, a) {
            Ok((act, next)) => {
                i = next;
                act
            }
            Err(e) => {
                p.alert(format!("{head} {e}"));
                return None;
            }
        },
        "set-status" => {
            let status = parse_u32(arg(args, 2))
                .and_then(|n| u16::try_from(n).ok())
                .filter(|n| (100..=999).contains(n));
            let Some(status) = status else {
                p.alert(format!(
                    "{head} expects an integer status code between 100 and 999."
                ));
                return None;
            };
            i = 3;
            let mut reason = None;
            // A bare `reason` is left to the condition parser, whose error HAProxy prints.
            if arg(args, 3) == "reason"
                && let Some(r) = args.get(4)
            {
                reason = Some(r.clone());
                i = 5;
            }
            HttpRequestAction::SetStatus { status, reason }
        }
        a if a.starts_with("track-sc") => match parse_track_sc(args, 1) {
            Ok((t, next)) => {
                i = next;
                HttpRequestAction::TrackSc(t)
            }
            Err(e) => {
                let e = if e.ends_with('.') { e } else { format!("{e}.") };
                p.alert(format!("{head} {e}"));
                return None;
            }
        },
        "reject" => HttpRequestAction::Reject,
        "disable-l7-retry" => HttpRequestAction::DisableL7Retry,
        "silent-drop" => HttpRequestAction::SilentDrop,
        "set-src" | "set-dst" | "set-src-port" | "set-dst-port" => {
            let expr = match arg(args, 2) {
                "" | "if" | "unless" => {
                    p.alert(format!("{head} missing fetch method."));
                    return None;
                }
                e => e.to_string(),
            };
            if let Err(e) = crate::ana::sample::parse_sample(&expr) {
                p.alert(format!("{head} {e}."));
                return None;
            }
            i = 3;
            HttpRequestAction::SetAddr {
                dst: action.starts_with("set-dst"),
                port: action.ends_with("-port"),
                expr,
            }
        }
        "set-log-level" => {
            let Some(level) = parse_log_level(arg(args, 2)) else {
                p.alert(format!("{head} {LOG_LEVEL_EXPECTS}."));
                return None;
            };
            i = 3;
            HttpRequestAction::SetLogLevel(level)
        }
        "normalize-uri" => {
            if !p.global.expose_experimental {
                p.alert(
                    "'normalize-uri' action is experimental, must be allowed via a global 'expose-experimental-directives'",
                );
                return None;
            }
            match parse_normalizer(args) {
                Ok((n, next)) => {
                    i = next;
                    HttpRequestAction::NormalizeUri(n)
                }
                Err(e) => {
                    p.alert(format!("{head} {e}"));
                    return None;
                }
            }
        }
        _ => HttpRequestAction::Allow,
    };
    let cond = match args.get(i).map(String::as_str) {
        None => None,
        Some("if" | "unless") => Some(cond(p, args, i)),
        Some(other) => {
            p.alert(format!(
                "'{kw} {action}' expects either 'if' or 'unless' followed by a condition but found '{other}'."
            ));
            return None;
        }
    };
    let loc = p.c.loc.clone();
    Some(HttpRequestRule {
        action: act,
        cond,
        loc,
    })
}

/// `normalize-uri <normalizer> [full|strict]` at `args[2]`: the normalizer and the index
/// after it, or HAProxy's words for what is wrong.
fn parse_normalizer(args: &[String]) -> Result<(super::model::UriNorm, usize), String> {
    use super::model::UriNorm;
    let name = arg(args, 2);
    let opt = arg(args, 3);
    // The one option a normalizer takes; a word that is no condition must be it.
    let flag = |o: &str| -> Result<bool, String> {
        match opt {
            "" | "if" | "unless" => Ok(false),
            x if x == o => Ok(true),
            x => Err(format!("unknown argument '{x}' for '{name}' normalizer.")),
        }
    };
    let n = match name {
        "" => return Err("missing argument <normalizer>.".into()),
        "path-merge-slashes" => UriNorm::PathMergeSlashes,
        "path-strip-dot" => UriNorm::PathStripDot,
        "path-strip-dotdot" => UriNorm::PathStripDotdot {
            full: flag("full")?,
        },
        "percent-decode-unreserved" => UriNorm::PercentDecodeUnreserved {
            strict: flag("strict")?,
        },
        "percent-to-uppercase" => UriNorm::PercentToUppercase {
            strict: flag("strict")?,
        },
        "query-sort-by-name" => UriNorm::QuerySortByName,
        "fragment-strip" => UriNorm::FragmentStrip,
        "fragment-encode" => UriNorm::FragmentEncode,
        other => return Err(format!("unknown normalizer '{other}'.")),
    };
    let takes = matches!(
        n,
        UriNorm::PathStripDotdot { full: true }
            | UriNorm::PercentDecodeUnreserved { strict: true }
            | UriNorm::PercentToUppercase { strict: true }
    );
    Ok((n, if takes { 4 } else { 3 }))
}

/// `http-request|http-response lua.<name>`: as HAProxy, exactly `nargs` words are the
/// script's arguments (whatever they say), then the optional condition.
fn lua_rule(p: &mut P, args: &[String], kw: &str, nargs: usize) -> Option<HttpRequestRule> {
    let action = arg(args, 1);
    let mut script_args = Vec::with_capacity(nargs);
    for i in 2..2 + nargs {
        match args.get(i).filter(|a| !a.is_empty()) {
            Some(a) => script_args.push(a.clone()),
            None => {
                let d = p.desc();
                p.alert(format!(
                    "error detected in {d} while parsing '{kw} {action}' rule : expect {nargs} arguments."
                ));
                return None;
            }
        }
    }
    let at = 2 + nargs;
    let cond = match args.get(at).map(String::as_str) {
        None => None,
        Some("if" | "unless") => Some(cond(p, args, at)),
        Some(other) => {
            p.c.alert_tight(format!(
                "'{kw} {action}' expects either 'if' or 'unless' followed by a condition but found '{other}'."
            ));
            return None;
        }
    };
    Some(HttpRequestRule {
        action: HttpRequestAction::Lua {
            name: action.trim_start_matches("lua.").to_string(),
            args: script_args,
        },
        cond,
        loc: p.c.loc.clone(),
    })
}

fn parse_redirect(args: &[String], i: &mut usize) -> Result<HttpRequestAction, String> {
    let mut target: Option<(RedirectKind, String)> = None;
    let mut code = 302u16;
    let mut drop_query = false;
    let mut append_slash = false;
    while let Some(w) = args.get(*i) {
        match w.as_str() {
            "if" | "unless" => break,
            k @ ("location" | "prefix" | "scheme") => {
                let Some(v) = args.get(*i + 1).filter(|v| !v.is_empty()) else {
                    return Err(format!("missing argument for '{k}'."));
                };
                let kind = match k {
                    "location" => RedirectKind::Location,
                    "prefix" => RedirectKind::Prefix,
                    _ => RedirectKind::Scheme,
                };
                target = Some((kind, v.clone()));
                *i += 2;
            }
            "code" => {
                let v = arg(args, *i + 1);
                match v.parse::<u16>() {
                    Ok(c @ (301 | 302 | 303 | 307 | 308)) => code = c,
                    _ if v.is_empty() => return Err("missing HTTP code.".to_string()),
                    _ => {
                        return Err(format!(
                            "'code': unsupported HTTP code '{v}' (must be one of 301, 302, 303, 307 or 308)."
                        ));
                    }
                }
                *i += 2;
            }
            "drop-query" => {
                drop_query = true;
                *i += 1;
            }
            "append-slash" => {
                append_slash = true;
                *i += 1;
            }
            other => {
                return Err(format!(
                    "expects 'code', 'prefix', 'location', 'scheme', 'drop-query' or 'append-slash' (was '{other}')."
                ));
            }
        }
    }
    let Some((kind, value)) = target else {
        return Err("redirection type expected ('prefix', 'location', or 'scheme').".to_string());
    };
    Ok(HttpRequestAction::Redirect {
        kind,
        value,
        code,
        drop_query,
        append_slash,
    })
}

pub(crate) fn kw_tcp_request(p: &mut P, args: &[String]) {
    let sub = arg(args, 1);
    let desc = format!("proxy '{}'", p.px.name);
    let at = match sub {
        "inspect-delay" => {
            if p.c.too_many(args, 2, 1) {
                return;
            }
            match parse_time(arg(args, 2)) {
                Ok(d) => {
                    p.px.tcp_inspect_delay = Some(d);
                    p.pending("tcp-request inspect-delay");
                }
                Err(_) => p.alert(format!(
                    "'tcp-request inspect-delay' expects a positive delay in milliseconds, in {desc}"
                )),
            }
            return;
        }
        "content" => TcpAt::Content,
        "connection" => TcpAt::Connection,
        "session" => TcpAt::Session,
        other => {
            p.alert(format!(
                "'tcp-request' expects 'inspect-delay', 'connection', or 'content' in {desc} (got '{other}')"
            ));
            return;
        }
    };
    if p.defaults && p.px.name.is_empty() {
        p.alert(format!(
            "tcp-request {sub} is not allowed in anonymous 'defaults' sections"
        ));
        return;
    }
    if at != TcpAt::Content && !p.defaults && !p.px.cap.frontend {
        let (kind, name) = (p.px.kind(), p.px.name.clone());
        p.alert(format!(
            "tcp-request {sub} is not allowed because {kind} {name} is not a frontend"
        ));
        return;
    }
    let Some((action, next)) = tcp_request_action(p, args, at) else {
        return;
    };
    let cond = match args.get(next).map(String::as_str) {
        None => None,
        Some("if" | "unless") => Some(cond(p, args, next)),
        Some(other) => {
            let desc = if next > 3 || at == TcpAt::Session {
                p.desc()
            } else {
                desc
            };
            p.alert(format!(
                "'tcp-request {sub} {}' only accepts 'if' or 'unless', in {desc} (got '{other}')",
                arg(args, 2)
            ));
            return;
        }
    };
    misplaced_tcp_rule(p, at);
    p.pending(&format!("tcp-request {sub}"));
    if let TcpRequestAction::SetAddr { .. } = action {
        // Parsed with HAProxy's words; the address change itself is not built at this step.
        p.pending(&format!("tcp-request {sub} {}", arg(args, 2)));
    }
    let loc = p.c.loc.clone();
    p.px.tcp_request.push(TcpRequestRule {
        at,
        action,
        cond,
        loc,
    });
}

/// HAProxy's warning for a `tcp-request` rule written after rules that run later
/// (`warnif_misplaced_tcp_conn|sess|cont`: session rules, content rules, then `monitor fail`,
/// `http-request`, `use_backend`).
fn misplaced_tcp_rule(p: &mut P, at: TcpAt) {
    let px = &p.px;
    let has = |a: TcpAt| px.tcp_request.iter().any(|r| r.at == a);
    let after = if at == TcpAt::Connection && has(TcpAt::Session) {
        Some("a 'tcp-request session'")
    } else if at != TcpAt::Content && has(TcpAt::Content) {
        Some("a 'tcp-request content'")
    } else if px.pending.iter().any(|(k, _)| k == "monitor fail") {
        Some("a 'monitor fail'")
    } else if !px.http_request.is_empty() {
        Some("an 'http-request'")
    } else if !px.use_backends.is_empty() {
        Some("a 'use_backend'")
    } else {
        None
    };
    if let Some(after) = after {
        p.warn(format!(
            "a 'tcp-request' rule placed after {after} rule will still be processed before."
        ));
    }
}

/// HAProxy 2.6's list of the actions a `tcp-request session` rule takes, as its parse error
/// names them (the keywords its modules register for layer 5, in their order).
const TCP_SESSION_ACTIONS: [&str; 15] = [
    "sc-inc-gpc(*)",
    "sc-inc-gpc0(*)",
    "sc-inc-gpc1(*)",
    "sc-set-gpt(*)",
    "sc-set-gpt0(*)",
    "set-var-fmt(*)",
    "set-var(*)",
    "unset-var(*)",
    "set-dst",
    "set-dst-port",
    "set-mark",
    "set-src",
    "set-src-port",
    "set-tos",
    "silent-drop",
];

/// A `tcp-request connection|session|content` rule's action and where its condition starts;
/// None (alert given) when it does not parse or is not allowed at `at`.
fn tcp_request_action(p: &mut P, args: &[String], at: TcpAt) -> Option<(TcpRequestAction, usize)> {
    let sub = at.word();
    let connection = at == TcpAt::Connection;
    let content = at == TcpAt::Content;
    let desc = format!("proxy '{}'", p.px.name);
    let mut next = 3;
    let word = arg(args, 2);
    let action = match word {
        v if !connection
            && ["set-var(", "set-var-fmt(", "unset-var("]
                .iter()
                .any(|k| v.starts_with(k)) =>
        {
            match parse_var_action(&args[1..], v) {
                Ok((a, n)) => {
                    next = n + 1;
                    TcpRequestAction::Var(Box::new(a))
                }
                Err(e) if at == TcpAt::Session => {
                    p.alert(e.trim_end_matches('.'));
                    return None;
                }
                Err(e) => {
                    let d = p.desc();
                    p.alert(format!(
                        "error detected in {d} while parsing 'tcp-request content {v}' rule : {e}"
                    ));
                    return None;
                }
            }
        }
        "accept" => TcpRequestAction::Accept,
        "reject" => TcpRequestAction::Reject,
        "set-log-level" if content => match parse_log_level(arg(args, 3)) {
            Some(l) => {
                next = 4;
                TcpRequestAction::SetLogLevel(l)
            }
            None => {
                p.alert(LOG_LEVEL_EXPECTS);
                return None;
            }
        },
        "expect-proxy" => {
            let d = p.desc();
            if arg(args, 3) != "layer4" && !content {
                p.alert(format!(
                    "'tcp-request {sub} expect-proxy' only supports 'layer4' in {d} (got '{}')",
                    arg(args, 3)
                ));
                return None;
            }
            if !connection {
                p.alert(format!(
                    "'expect-proxy layer4' is not allowed in 'tcp-request {sub}' rules in {d}"
                ));
                return None;
            }
            next = 4;
            TcpRequestAction::ExpectProxy
        }
        "capture" if at == TcpAt::Session => {
            let d = p.desc();
            p.alert(format!(
                "'capture {}' is not allowed in 'tcp-request session' rules in {d}",
                arg(args, 3)
            ));
            return None;
        }
        "capture" if content => {
            let sample = arg(args, 3).to_string();
            let len = parse_u32(arg(args, 5)).filter(|n| *n > 0);
            let Some(len) = len.filter(|_| arg(args, 4) == "len") else {
                p.alert("'tcp-request content capture' : a positive 'len' argument is mandatory");
                return None;
            };
            if let Err(e) = crate::ana::sample::parse_sample(&sample) {
                p.alert(format!("'tcp-request content capture' : {e}"));
                return None;
            }
            if !p.px.cap.frontend {
                let d = p.desc();
                p.alert(format!(
                    "'tcp-request content capture' : {d} has no frontend capability"
                ));
                return None;
            }
            p.px.captures.req.push(super::model::CaptureSlot {
                header: None,
                len: len as usize,
            });
            next = 6;
            TcpRequestAction::Capture {
                sample,
                slot: p.px.captures.req.len() - 1,
                len: len as usize,
            }
        }
        "silent-drop" if at == TcpAt::Session => TcpRequestAction::SilentDrop,
        "set-src" | "set-dst" | "set-src-port" | "set-dst-port" if at == TcpAt::Session => {
            let expr = match arg(args, 3) {
                "" | "if" | "unless" => {
                    p.alert("missing fetch method");
                    return None;
                }
                e => e.to_string(),
            };
            if let Err(e) = crate::ana::sample::parse_sample(&expr) {
                p.alert(e);
                return None;
            }
            next = 4;
            TcpRequestAction::SetAddr {
                dst: word.starts_with("set-dst"),
                port: word.ends_with("-port"),
                expr,
            }
        }
        t if is_sc_action(t) => {
            // An expression is HTTP-only in content rules (HAProxy 2.6 fails on it there).
            match parse_sc_action(args, 2, at == TcpAt::Session) {
                Ok((a, n)) => {
                    next = n;
                    TcpRequestAction::Sc(a)
                }
                // HAProxy prints the action's message alone here.
                Err(e) => {
                    p.alert(e);
                    return None;
                }
            }
        }
        t if t.starts_with("track-sc") => match parse_track_sc(args, 2) {
            Ok((t, n)) => {
                if !content
                    && let Ok(e) = crate::http::sample::parse_sample(&t.key)
                    && let Some(needs) = e.def().log_needs
                {
                    p.alert(format!(
                        "'tcp-request {sub} {word}' : fetch method '{}' extracts information from '{needs}', none of which is available here",
                        t.key
                    ));
                    return None;
                }
                next = n;
                TcpRequestAction::TrackSc(t)
            }
            Err(e) => {
                let e = e.trim_end_matches('.');
                p.alert(format!("'tcp-request {sub} {word}' : {e}"));
                return None;
            }
        },
        lua if content
            && let Some(nargs) = lua
                .strip_prefix("lua.")
                .and_then(|n| crate::ana::script::action(crate::ana::script::Kind::TcpReq, n)) =>
        {
            let mut script_args = Vec::with_capacity(nargs);
            for i in 3..3 + nargs {
                match args.get(i).filter(|a| !a.is_empty()) {
                    Some(a) => script_args.push(a.clone()),
                    None => {
                        p.alert(format!(
                            "'tcp-request {sub} {lua}' : expect {nargs} arguments in {desc}"
                        ));
                        return None;
                    }
                }
            }
            next = 3 + nargs;
            TcpRequestAction::Lua {
                name: lua.trim_start_matches("lua.").to_string(),
                args: script_args,
            }
        }
        other if at == TcpAt::Session => {
            let d = p.desc();
            let list = TCP_SESSION_ACTIONS
                .iter()
                .map(|k| format!("'{k}'"))
                .collect::<Vec<_>>()
                .join(", ");
            let suggestion = session_action_suggestion(other)
                .map(|b| format!(" Did you mean '{b}' maybe ?"))
                .unwrap_or_default();
            p.alert(format!(
                "'tcp-request session' expects 'accept', 'reject', 'capture', 'expect-proxy', 'expect-netscaler-cip', 'track-sc0' ... 'track-sc2', {list} in {d} (got '{other}').{suggestion}\n"
            ));
            return None;
        }
        other => {
            p.alert(format!(
                "'tcp-request {sub}' expects 'accept' or 'reject' in {desc} (got '{other}')."
            ));
            return None;
        }
    };
    Some((action, next))
}

/// HAProxy's `action_suggest` over the `tcp-request session` keywords, then the words every
/// rule set takes: the closest one if it is a plausible typo (prefix keywords, those ending in
/// `(*)`, are given more room).
fn session_action_suggestion(word: &str) -> Option<&'static str> {
    let kws = TCP_SESSION_ACTIONS.iter();
    let extra = [
        "accept",
        "reject",
        "capture",
        "track-sc",
        "expect-proxy",
        "expect-netscaler-cip",
    ];
    let cands = kws
        .map(|k| (k.trim_end_matches("(*)"), k.ends_with("(*)")))
        .chain(extra.iter().map(|k| (*k, false)));
    super::suggest::best_action(word, cands)
}

/// What `set-log-level` says without a level.
const LOG_LEVEL_EXPECTS: &str = "expects exactly 1 argument (log level name or 'silent')";

/// `set-log-level`'s argument: a syslog level (its number), `silent` (None), else None.
fn parse_log_level(s: &str) -> Option<Option<u8>> {
    match s {
        "silent" => Some(None),
        l => super::kw_proxy::LEVELS
            .iter()
            .position(|n| *n == l)
            .map(|i| Some(i as u8)),
    }
}

/// HAProxy 2.6's list of `tcp-response content` actions, as its parse error names them.
const TCP_RESPONSE_EXPECTS: &str = "'accept', 'close', 'reject', 'ot-group', 'set-log-level', \
    'set-nice', 'sc-inc-gpc(*)', 'sc-inc-gpc0(*)', 'sc-inc-gpc1(*)', 'sc-set-gpt(*)', \
    'sc-set-gpt0(*)', 'send-spoe-group', 'set-var-fmt(*)', 'set-var(*)', 'unset-var(*)', \
    'set-mark', 'set-tos', 'silent-drop'";

/// `tcp-response inspect-delay <time>` / `tcp-response content <action> [if|unless <cond>]`:
/// backends (and named defaults) only.
pub(crate) fn kw_tcp_response(p: &mut P, args: &[String]) {
    let sub = arg(args, 1);
    if !matches!(sub, "inspect-delay" | "content") {
        let d = p.desc();
        p.alert(format!(
            "'tcp-response' expects 'inspect-delay' or 'content' in {d} (got '{sub}')"
        ));
        return;
    }
    if (p.defaults && p.px.name.is_empty()) || (!p.defaults && !p.px.cap.backend) {
        p.alert(format!(
            "tcp-response {sub} is only allowed in 'backend' sections or 'defaults' section with a name"
        ));
        return;
    }
    if sub == "inspect-delay" {
        match parse_time(arg(args, 2)) {
            Ok(d) if !arg(args, 2).is_empty() => p.px.tcp_res_inspect_delay = Some(d),
            _ => {
                let d = p.desc();
                p.alert(format!(
                    "'tcp-response inspect-delay' expects a positive delay in milliseconds, in {d}"
                ));
            }
        }
        return;
    }
    let mut at = 3;
    let action = match arg(args, 2) {
        "accept" => TcpRequestAction::Accept,
        "reject" => TcpRequestAction::Reject,
        "close" => TcpRequestAction::Close,
        "set-log-level" => match parse_log_level(arg(args, 3)) {
            Some(l) => {
                at = 4;
                TcpRequestAction::SetLogLevel(l)
            }
            None => {
                p.alert(LOG_LEVEL_EXPECTS);
                return;
            }
        },
        v if ["set-var(", "set-var-fmt(", "unset-var("]
            .iter()
            .any(|k| v.starts_with(k)) =>
        {
            match parse_var_action(&args[1..], v) {
                Ok((a, next)) => {
                    at = next + 1;
                    TcpRequestAction::Var(Box::new(a))
                }
                Err(e) => {
                    // HAProxy prints this one without its period here.
                    let e = if e == "missing fetch method." {
                        "missing fetch method".to_string()
                    } else {
                        e
                    };
                    p.alert(e);
                    return;
                }
            }
        }
        t if is_sc_action(t) => match parse_sc_action(args, 2, false) {
            Ok((a, next)) => {
                at = next;
                TcpRequestAction::Sc(a)
            }
            Err(e) => {
                p.alert(e);
                return;
            }
        },
        other => {
            let d = p.desc();
            p.alert(format!(
                "'tcp-response content' expects {TCP_RESPONSE_EXPECTS} in {d} (got '{other}')."
            ));
            return;
        }
    };
    let cond = match args.get(at).map(String::as_str) {
        None => None,
        Some("if" | "unless") => Some(cond(p, args, at)),
        Some(other) => {
            let d = p.desc();
            p.alert(format!(
                "'tcp-response content {}' only accepts 'if' or 'unless', in {d} (got '{other}')",
                arg(args, 2)
            ));
            return;
        }
    };
    let loc = p.c.loc.clone();
    p.px.tcp_response.push(TcpRequestRule {
        at: TcpAt::Content,
        action,
        cond,
        loc,
    });
}

/// `200`, `200,300-310`: comma list of codes or inclusive ranges.
fn parse_status_list(s: &str) -> Option<Vec<(u16, u16)>> {
    s.split(',')
        .map(|part| {
            let (lo, hi) = part.split_once('-').unwrap_or((part, part));
            let lo = parse_u32(lo).and_then(|n| u16::try_from(n).ok())?;
            let hi = parse_u32(hi).and_then(|n| u16::try_from(n).ok())?;
            (lo <= hi && (100..=999).contains(&lo) && hi <= 999).then_some((lo, hi))
        })
        .collect()
}

/// `[!] <kind> <pattern>` from `args[i..]` for the checks' `expect`.
/// `<what> [min-recv <n>] [comment <msg>] [!] <match> <pattern>`, options on either side of the
/// pattern as HAProxy's parser takes them; `!<match>` is the negated form too. `min-recv` is
/// tcp-check's only (None in `kinds` callers that do not allow it).
fn parse_expect(
    args: &[String],
    i: usize,
    what: &str,
    kinds: &[&str],
) -> Result<(bool, ExpectMatch, Option<usize>), String> {
    if args.len() <= i {
        return Err(format!(
            "'{what}' : expects at least a matching pattern as arguments."
        ));
    }
    let tcp = what.starts_with("tcp-check");
    let mut i = i;
    let mut negate = false;
    let mut min_recv = None;
    let mut found: Option<ExpectMatch> = None;
    while let Some(w) = args.get(i) {
        match w.as_str() {
            "min-recv" if tcp => {
                let v = arg(args, i + 1);
                min_recv = Some(v.parse::<usize>().map_err(|_| {
                    format!("'{what}' : '{w}' expects a integer as argument (got '{v}').")
                })?);
                i += 2;
            }
            "comment" => {
                if args.get(i + 1).is_none() {
                    return Err(format!("'{what}' : '{w}' expects a string as argument."));
                }
                i += 2;
            }
            "!" if found.is_none() => {
                negate = true;
                i += 1;
            }
            k if found.is_none() => {
                let kind = match k.strip_prefix('!') {
                    Some(rest) => {
                        negate = true;
                        rest
                    }
                    None => k,
                };
                if !kinds.contains(&kind) {
                    let list = kinds
                        .iter()
                        .map(|k| format!("'[!]{k}'"))
                        .collect::<Vec<_>>()
                        .join(", ");
                    return Err(format!(
                        "'{what}' : only supports {list} but got '{kind}' as argument."
                    ));
                }
                if kind == "hdr" || kind == "fhdr" {
                    let (m, next) = parse_expect_hdr(args, i, what, kind)?;
                    found = Some(m);
                    i = next;
                    continue;
                }
                let Some(v) = args.get(i + 1).filter(|v| !v.is_empty()).cloned() else {
                    return Err(format!(
                        "'{what}' : '{kind}' expects a <pattern> as argument."
                    ));
                };
                found = Some(match kind {
                    "status" => ExpectMatch::Status(
                        parse_status_list(&v)
                            .ok_or_else(|| format!("'{what}' : invalid status pattern '{v}'."))?,
                    ),
                    "rstatus" => ExpectMatch::Rstatus(v),
                    "string" => ExpectMatch::String(v),
                    _ => ExpectMatch::Rstring(v),
                });
                i += 2;
            }
            extra => {
                return Err(format!(
                    "'{what}' : cannot handle unexpected argument '{extra}'."
                ));
            }
        }
    }
    let Some(m) = found else {
        return Err(format!(
            "'{what}' : expects at least a matching pattern as arguments."
        ));
    };
    Ok((negate, m, min_recv))
}

/// `hdr|fhdr {name|name-lf} [-m <meth>] <pattern> [{value|value-lf} [-m <meth>] <pattern>]` at
/// `args[i]`; returns the matcher and the index after it. Errors in HAProxy 2.6's words.
fn parse_expect_hdr(
    args: &[String],
    i: usize,
    what: &str,
    kind: &str,
) -> Result<(ExpectMatch, usize), String> {
    let pattern = |at: usize, key: &str| -> Result<(HdrPattern, usize), String> {
        let lf = key.ends_with("-lf");
        let (how, at) = if arg(args, at) == "-m" {
            let how = match arg(args, at + 1) {
                "str" => StrMatch::Str,
                "beg" => StrMatch::Beg,
                "end" => StrMatch::End,
                "sub" => StrMatch::Sub,
                "reg" if lf => {
                    return Err(format!(
                        "'{what}' : '{kind}': log-format string is not supported with a regex matching method."
                    ));
                }
                "reg" => StrMatch::Reg,
                "" => {
                    return Err(format!(
                        "'{what}' : '{kind}' : '-m' expects at a matching pattern ('str', 'beg', 'end', 'sub' or 'reg')."
                    ));
                }
                other => {
                    return Err(format!(
                        "'{what}' : '{kind}' : '-m' only supports 'str', 'beg', 'end', 'sub' or 'reg' (got '{other}')."
                    ));
                }
            };
            (how, at + 2)
        } else {
            (StrMatch::Str, at)
        };
        Ok((
            HdrPattern {
                how,
                lf,
                pattern: arg(args, at).to_string(),
            },
            at + 1,
        ))
    };
    let key = arg(args, i + 1);
    if !matches!(key, "name" | "name-lf") || arg(args, i + 2).is_empty() {
        return Err(format!(
            "'{what}' : '{kind}' expects at the name keyword as first argument followed by a pattern."
        ));
    }
    let (name, mut next) = pattern(i + 2, key)?;
    if name.pattern.is_empty() {
        return Err(format!(
            "'{what}' : '{kind}' expects at the name keyword as first argument followed by a pattern."
        ));
    }
    let mut value = None;
    let vkey = arg(args, next);
    if matches!(vkey, "value" | "value-lf") {
        let (v, n) = pattern(next + 1, vkey)?;
        if v.pattern.is_empty() && args.get(n - 1).is_none() {
            return Err(format!(
                "'{what}' : '{kind}' expect a pattern with the value keyword."
            ));
        }
        value = Some(v);
        next = n;
    }
    for p in std::iter::once(&name).chain(value.as_ref()) {
        if p.how == StrMatch::Reg
            && let Err(e) = regex::Regex::new(&p.pattern)
        {
            return Err(format!(
                "'{what}' : regex '{}' is invalid ({e}).",
                p.pattern
            ));
        }
    }
    Ok((
        ExpectMatch::Header {
            full: kind == "fhdr",
            name,
            value,
        },
        next,
    ))
}

/// A proxy's own first `http-check` line drops the rules it inherited from `defaults`, the
/// inherited `option httpchk` request included (the check stays an HTTP one).
pub(crate) fn own_http_checks(px: &mut super::model::Proxy) {
    if std::mem::take(&mut px.extra.checks_inherited) {
        px.http_check = HttpCheck::default();
        if let Some(o) = px.options.httpchk.as_mut() {
            *o = HttpCheck::default();
        }
    }
}

pub(crate) fn kw_http_check(p: &mut P, args: &[String]) {
    own_http_checks(p.px);
    let sub = arg(args, 1);
    let rule = match sub {
        "disable-on-404" => {
            if !p.c.too_many(args, 2, 0) {
                p.px.http_check.disable_on_404 = true;
            }
            return;
        }
        "send-state" => {
            if !p.c.too_many(args, 2, 0) {
                p.px.http_check.send_state = true;
            }
            return;
        }
        "comment" => {
            if arg(args, 2).is_empty() {
                p.alert("'http-check comment' expects a string as argument.");
            }
            return;
        }
        "connect" => match parse_check_connect(args) {
            Ok(c) => HttpCheckRule::Connect(c),
            Err(e) => {
                p.alert(e);
                p.px.http_check.rules.clear();
                return;
            }
        },
        "send" => match parse_http_send(args) {
            Ok(s) => HttpCheckRule::Send(s),
            Err(e) => {
                p.alert(e);
                p.px.http_check.rules.clear();
                return;
            }
        },
        "expect" => match parse_expect(
            args,
            2,
            "http-check expect",
            &["status", "rstatus", "string", "rstring", "hdr", "fhdr"],
        ) {
            Ok((negate, matcher, _)) => HttpCheckRule::Expect(HttpCheckExpect { negate, matcher }),
            Err(e) => {
                p.alert(e);
                p.px.http_check.rules.clear();
                return;
            }
        },
        s if s.starts_with("set-var(")
            || s.starts_with("set-var-fmt(")
            || s.starts_with("unset-var(") =>
        {
            match parse_check_var(args) {
                Ok(r) => r,
                Err(e) => {
                    p.alert(e);
                    p.px.http_check.rules.clear();
                    return;
                }
            }
        }
        other => {
            p.alert(format!(
                "'http-check' only supports 'disable-on-404', 'send-state', 'comment', 'connect', 'send', 'expect', 'set-var-fmt(*)', 'set-var(*)', 'unset-var(*)'. but got '{other}'"
            ));
            return;
        }
    };
    if let Err(e) = check_sequence(
        &p.px.http_check.rules,
        &rule,
        p.px.options.httpchk.is_some(),
    ) {
        p.alert(format!("'http-check {sub}' : {e}."));
        p.px.http_check.rules.clear();
        return;
    }
    p.px.http_check.rules.push(rule);
}

/// HAProxy's tcpcheck_add_http_rule: a send follows a connect (or nothing but `option httpchk`'s
/// implicit send), an expect a send or an expect, a connect an expect. `set-var`, `unset-var`
/// and comments are transparent (but counted in the step number). As HAProxy, a line in error
/// drops the ruleset built so far (later lines are judged against an empty one).
fn check_sequence(
    rules: &[HttpCheckRule],
    new: &HttpCheckRule,
    implicit_send: bool,
) -> Result<(), String> {
    let is_action =
        |r: &HttpCheckRule| matches!(r, HttpCheckRule::SetVar { .. } | HttpCheckRule::UnsetVar(_));
    // HAProxy numbers a new rule after the last one in its list; `option httpchk`'s send is
    // rule 0 at the front until the first explicit send merges into it and moves, with its
    // index, to the end.
    let mut idx: Vec<usize> = if implicit_send { vec![0] } else { Vec::new() };
    let mut merged = !implicit_send;
    for r in rules {
        if matches!(r, HttpCheckRule::Send(_)) && !std::mem::replace(&mut merged, true) {
            idx.remove(0);
            idx.push(0);
        } else {
            idx.push(idx.last().map_or(0, |i| i + 1));
        }
    }
    let step = idx.last().map_or(0, |i| i + 1) + 1;
    if matches!(new, HttpCheckRule::Connect(_))
        && !rules.iter().any(|r| matches!(r, HttpCheckRule::Connect(_)))
        && rules.iter().any(|r| !is_action(r))
    {
        return Err("first step MUST also be a 'connect', optionally preceded by a 'set-var', an 'unset-var' or a 'comment', when there is a 'connect' step in the tcp-check ruleset".to_string());
    }
    let Some(last) = rules.iter().rev().find(|r| !is_action(r)) else {
        return Ok(());
    };
    match (last, new) {
        (HttpCheckRule::Connect(_), HttpCheckRule::Send(_)) => Ok(()),
        (_, HttpCheckRule::Send(_)) => Err(format!(
            "unable to add http-check send rule at step {step} (missing connect rule)."
        )),
        (HttpCheckRule::Send(_) | HttpCheckRule::Expect(_), HttpCheckRule::Expect(_)) => Ok(()),
        (_, HttpCheckRule::Expect(_)) => Err(format!(
            "unable to add http-check expect rule at step {step} (missing send rule)."
        )),
        (HttpCheckRule::Expect(_), HttpCheckRule::Connect(_)) => Ok(()),
        (_, HttpCheckRule::Connect(_)) => Err(format!(
            "unable to add http-check connect rule at step {step} (missing expect rule)."
        )),
        _ => Ok(()),
    }
}

/// `http-check connect [default] [port <n>] [addr <ip>] [ssl] [sni <s>] [alpn <l>] [linger]
/// [proto <p>] [comment <m>]`.
fn parse_check_connect(args: &[String]) -> Result<CheckConnect, String> {
    let mut c = CheckConnect::default();
    let mut i = 2;
    while let Some(w) = args.get(i) {
        let v = args
            .get(i + 1)
            .map(String::as_str)
            .filter(|v| !v.is_empty());
        let need = |what: &str| format!("'http-check connect' : '{w}' expects {what} as argument.");
        match w.as_str() {
            "default" => c.default = true,
            "ssl" => c.ssl = true,
            "linger" => c.linger = true,
            "port" => {
                let v = v.ok_or_else(|| need("a port number or a sample expression"))?;
                c.port = Some(
                    parse_u32(v)
                        .and_then(|n| u16::try_from(n).ok())
                        .filter(|&n| n > 0)
                        .ok_or_else(|| {
                            format!("'http-check connect' : expects a valid TCP port (from range 1 to 65535) or a sample-fetch expression, got {v}.")
                        })?,
                );
                i += 1;
            }
            "addr" => {
                let v = v.ok_or_else(|| need("<ipv4|ipv6>"))?;
                let (ip, port) = super::addr::parse_ip(v)
                    .map(|ip| (ip, None))
                    .or_else(|| {
                        let sa = v.parse::<std::net::SocketAddr>().ok()?;
                        Some((sa.ip(), Some(sa.port()).filter(|&p| p != 0)))
                    })
                    .ok_or_else(|| {
                        format!("'http-check connect' : '{w}' : invalid address '{v}'.")
                    })?;
                c.addr = Some(ip);
                c.addr_port = port;
                i += 1;
            }
            "sni" => {
                c.sni = Some(v.ok_or_else(|| need("a string"))?.to_string());
                i += 1;
            }
            "alpn" => {
                c.alpn = Some(v.ok_or_else(|| need("a protocol list"))?.to_string());
                i += 1;
            }
            "comment" => {
                v.ok_or_else(|| need("a string"))?;
                i += 1;
            }
            // HTTP/1 is the only check protocol portcullis speaks; h2 checks are refused.
            "proto" => {
                match v.ok_or_else(|| need("the name of a mux protocol"))? {
                    "h1" => {}
                    other => {
                        return Err(format!(
                            "'http-check connect' : 'proto {other}' is not supported by portcullis yet (HTTP/1 checks only)."
                        ));
                    }
                }
                i += 1;
            }
            "send-proxy" | "via-socks4" => {
                return Err(format!(
                    "'http-check connect' : '{w}' is not supported by portcullis yet."
                ));
            }
            other => {
                return Err(format!(
                    "'http-check connect' : expects 'comment', 'port', 'addr', 'send-proxy', 'ssl', 'sni', 'alpn' or 'via-socks4', 'linger', 'default' but got '{other}' as argument.."
                ));
            }
        }
        i += 1;
    }
    Ok(c)
}

/// `http-check send [meth <m>] [uri <u> | uri-lf <fmt>] [ver <v>] [hdr <name> <fmt>]*
/// [body <s> | body-lf <fmt>] [comment <msg>]`.
fn parse_http_send(args: &[String]) -> Result<HttpSendRule, String> {
    let mut send = HttpSendRule::default();
    let mut i = 2;
    while let Some(w) = args.get(i) {
        let v = args.get(i + 1).filter(|v| !v.is_empty()).cloned();
        match (w.as_str(), v) {
            ("meth", Some(v)) => send.method = Some(v),
            ("uri", Some(v)) => send.uri = Some((v, false)),
            ("uri-lf", Some(v)) => send.uri = Some((v, true)),
            ("ver", Some(v)) => send.version = Some(v),
            ("body", Some(v)) => send.body = Some((v, false)),
            ("body-lf", Some(v)) => send.body = Some((v, true)),
            ("comment", Some(_)) => {}
            ("hdr", Some(n)) => match args.get(i + 2) {
                Some(v) => {
                    send.headers.push((n, v.clone()));
                    i += 1;
                }
                None => {
                    return Err(
                        "'http-check send' : 'hdr' expects <name> and <value> as arguments."
                            .to_string(),
                    );
                }
            },
            (
                k @ ("meth" | "uri" | "uri-lf" | "ver" | "body" | "body-lf" | "hdr" | "comment"),
                None,
            ) => {
                return Err(format!(
                    "'http-check send' : '{k}' expects a string as argument."
                ));
            }
            (other, _) => {
                return Err(format!(
                    "'http-check send' : expects 'comment', 'meth', 'uri', 'uri-lf', 'ver', 'hdr', 'body' or 'body-lf' but got '{other}' as argument."
                ));
            }
        }
        i += 2;
    }
    for fmt in send
        .uri
        .iter()
        .chain(send.body.iter())
        .filter(|(_, lf)| *lf)
        .map(|(f, _)| f)
        .chain(send.headers.iter().map(|(_, v)| v))
    {
        crate::check::sample::parse_lf(fmt).map_err(|e| format!("'http-check send' : {e}"))?;
    }
    Ok(send)
}

/// `set-var(<scope>.<name>) <expr>`, `set-var-fmt(<scope>.<name>) <fmt>`, `unset-var(<name>)`.
/// Checks run with the `check` (and `sess`) scopes of their own; `proc` is refused.
fn parse_check_var(args: &[String]) -> Result<HttpCheckRule, String> {
    let kw = arg(args, 1);
    let (verb, rest) = kw.split_once('(').unwrap_or((kw, ""));
    let Some(name) = rest.strip_suffix(')').filter(|n| !n.is_empty()) else {
        return Err(format!(
            "'http-check {kw}' : '{verb}' : missing variable name or closing parenthesis."
        ));
    };
    let name = name.split(',').next().unwrap_or(name).to_string();
    match name.split_once('.') {
        Some(("check" | "sess" | "txn" | "req" | "res", v)) if !v.is_empty() => {}
        Some(("proc", _)) => {
            return Err(format!(
                "'http-check {kw}' : '{verb}' : proc-scope variables in checks are not supported by portcullis yet."
            ));
        }
        _ => {
            return Err(format!(
                "'http-check {kw}' : '{verb}' : invalid variable name '{name}'. Only 'proc', 'sess' and 'check' scopes are supported."
            ));
        }
    }
    if verb == "unset-var" {
        return Ok(HttpCheckRule::UnsetVar(name));
    }
    let fmt = verb == "set-var-fmt";
    let Some(expr) = args.get(2).filter(|e| !e.is_empty()).cloned() else {
        return Err(format!(
            "'http-check {kw}' : '{verb}' : missing expression."
        ));
    };
    let parsed = if fmt {
        crate::check::sample::parse_lf(&expr).map(|_| ())
    } else {
        crate::check::sample::parse_expr(&expr).map(|_| ())
    };
    parsed.map_err(|e| format!("'http-check {kw}' : '{verb}' : {e}."))?;
    Ok(HttpCheckRule::SetVar { name, expr, fmt })
}

pub(crate) fn kw_tcp_check(p: &mut P, args: &[String]) {
    let sub = arg(args, 1);
    let rule = match sub {
        "connect" => {
            let mut port = None;
            let mut i = 2;
            while let Some(w) = args.get(i) {
                if w != "port" {
                    p.alert(format!(
                        "'tcp-check connect' : expects 'port' but got '{w}' as argument."
                    ));
                    return;
                }
                match parse_u32(arg(args, i + 1)).and_then(|n| u16::try_from(n).ok()) {
                    Some(n) if n > 0 => port = Some(n),
                    _ => {
                        p.alert(format!(
                            "'tcp-check connect' : invalid port '{}'.",
                            arg(args, i + 1)
                        ));
                        return;
                    }
                }
                i += 2;
            }
            TcpCheckRule::Connect { port }
        }
        "send" => {
            let Some(v) = args.get(2).filter(|v| !v.is_empty()) else {
                p.alert("'tcp-check send' : 'string' expects a send as argument.");
                return;
            };
            if p.c.too_many(args, 2, 1) {
                return;
            }
            TcpCheckRule::Send(v.as_bytes().to_vec())
        }
        "expect" => match parse_expect(args, 2, "tcp-check expect", &["string", "rstring"]) {
            Ok((negate, matcher, min_recv)) => TcpCheckRule::Expect {
                negate,
                matcher,
                min_recv,
            },
            Err(e) => {
                p.alert(e);
                return;
            }
        },
        other => {
            p.alert(format!(
                "'tcp-check' only supports 'connect', 'send', 'expect'. but got '{other}'"
            ));
            return;
        }
    };
    p.px.tcp_checks.push(rule);
}

pub(crate) fn kw_stats(p: &mut P, args: &[String]) {
    let sub = arg(args, 1);
    let mut st = p.px.stats.clone().unwrap_or_default();
    let v = args.get(2).filter(|v| !v.is_empty());
    match sub {
        "enable" => st.enable = true,
        "hide-version" => st.hide_version = true,
        "uri" => match v {
            Some(u) => st.uri = Some(u.clone()),
            None => {
                p.alert("'uri' needs an URI prefix.");
                return;
            }
        },
        "realm" => match v {
            Some(r) => st.realm = Some(r.clone()),
            None => {
                p.alert("'realm' needs an realm name.");
                return;
            }
        },
        "auth" => match v.and_then(|a| a.split_once(':')) {
            Some((u, pw)) if !u.is_empty() => st.auth.push((u.to_string(), pw.to_string())),
            _ => {
                p.alert("'auth' needs a user:password account.");
                return;
            }
        },
        "refresh" => match v.map(|s| parse_time(s)) {
            Some(Ok(d)) => st.refresh = Some(d),
            Some(Err(TimeError::BadChar(c))) => {
                p.alert(format!(
                    "unexpected character '{c}' in argument to stats refresh interval."
                ));
                return;
            }
            _ => {
                p.alert("'refresh' needs a positive interval.");
                return;
            }
        },
        "admin" => match args.get(2).map(String::as_str) {
            Some("if" | "unless") if args.len() > 3 => st.admin = Some(cond(p, args, 2)),
            _ => {
                p.alert("'stats admin' requires either 'if' or 'unless' followed by a condition.");
                return;
            }
        },
        "show-legends" => st.show_legends = true,
        "show-node" => st.show_node = Some(v.cloned().unwrap_or_default()),
        // The words are joined with single spaces, as HAProxy does.
        "show-desc" => st.show_desc = Some(args.get(2..).unwrap_or_default().join(" ")),
        "http-request" => {
            if v.is_none() {
                p.alert("'stats http-request' requires a rule (allow, deny or auth).");
                return;
            }
            // An `http-request` rule, kept apart (HAProxy's `uri_auth->http_req_rules`).
            let Some(rule) = http_rule(p, &args[1..], "http-request", HTTP_ACTIONS) else {
                return;
            };
            st.http_request.push(rule);
        }
        // Parsed; the stats page does not render it yet, so the start refuses it (pending).
        "scope" => {
            if v.is_none() {
                p.alert("'scope' needs a proxy name.");
                return;
            }
            p.pending(&format!("stats {sub}"));
        }
        other => {
            p.alert(format!(
                "unknown stats parameter '{other}', expects 'admin', 'uri', 'realm', 'auth', 'enable', 'hide-version' or 'refresh'."
            ));
            return;
        }
    }
    let max = match sub {
        "enable" | "hide-version" | "show-legends" => 0,
        "admin" | "show-desc" | "http-request" => usize::MAX / 2,
        _ => 1,
    };
    if p.c.too_many(args, 2, max) {
        return;
    }
    // Every stats setting except `hide-version` turns the page on, as in HAProxy.
    if sub != "hide-version" {
        st.enable = true;
    }
    p.px.stats = Some(StatsPage { ..st });
}

/// HAProxy 2.6's stick-table data types, in its order (the order `show table` prints them).
/// (name, is a rate, supported by portcullis)
const STORE_TYPES: &[(&str, bool, bool)] = &[
    ("server_id", false, true),
    ("gpt0", false, true),
    ("gpc0", false, true),
    ("gpc0_rate", true, true),
    ("conn_cnt", false, true),
    ("conn_rate", true, true),
    ("conn_cur", false, true),
    ("sess_cnt", false, true),
    ("sess_rate", true, true),
    ("http_req_cnt", false, true),
    ("http_req_rate", true, true),
    ("http_err_cnt", false, true),
    ("http_err_rate", true, true),
    ("bytes_in_cnt", false, true),
    ("bytes_in_rate", true, true),
    ("bytes_out_cnt", false, true),
    ("bytes_out_rate", true, true),
    ("gpc1", false, true),
    ("gpc1_rate", true, true),
    ("server_key", false, false),
    ("server_name", false, false),
    ("http_fail_cnt", false, true),
    ("http_fail_rate", true, true),
    ("gpt", false, true),
    ("gpc", false, true),
    ("gpc_rate", true, true),
];

/// `stick-table type ip|ipv6 size <n> [expire <t>] [nopurge] [peers <section>] [store <type>[,<type>]*]*`.
pub(crate) fn kw_stick_table(p: &mut P, args: &[String]) {
    if p.defaults {
        p.alert("'stick-table' is not supported in 'defaults' section.");
        return;
    }
    if let Some(prev) = &p.px.stick_table {
        let (name, kind, loc) = (p.px.name.clone(), p.px.kind(), prev.loc.clone());
        p.alert(format!(
            "stick-table name '{name}' conflicts with table declared in {kind} '{name}' at {}:{}.",
            loc.file, loc.line
        ));
        return;
    }
    let mut pending = Vec::new();
    if let Some(t) = parse_stick_table(p.c, args, 1, &mut pending) {
        for kw in pending {
            p.pending(&kw);
        }
        p.px.stick_table = Some(t);
    }
}

/// The words of a stick table from `args[from..]`, for `stick-table` in a proxy and `table
/// <name>` in a `peers` section (no `peers` word there); errors are prefixed with `args[0]` as
/// HAProxy's `parse_stick_table` does. `pending` receives the keywords not built yet.
pub(crate) fn parse_stick_table(
    c: &mut super::parser::Ctx<'_>,
    args: &[String],
    from: usize,
    pending: &mut Vec<String>,
) -> Option<super::model::StickTable> {
    use super::model::{StickKey, StickStore, StickTable};
    use super::values::parse_size;
    let kw = arg(args, 0);
    let in_peers = kw == "table";
    let mut key = None;
    let mut size = None;
    let mut expire = None;
    let mut peers = None;
    // (index in STORE_TYPES, rate period, array size)
    let mut store: Vec<(usize, Option<std::time::Duration>, u32)> = Vec::new();
    let mut i = from;
    while let Some(w) = args.get(i) {
        let v = arg(args, i + 1);
        match w.as_str() {
            "type" => {
                let custom = matches!(v, "string" | "binary");
                key = match v {
                    "ip" | "ipv4" => Some(StickKey::Ip),
                    "ipv6" => Some(StickKey::Ipv6),
                    "integer" => Some(StickKey::Integer),
                    "string" => Some(StickKey::String(31)),
                    "binary" => Some(StickKey::Binary(32)),
                    _ => {
                        c.alert(format!("{kw}: unknown type '{v}'."));
                        return None;
                    }
                };
                i += 2;
                // `len <n>` belongs to string and binary keys (a string's counts its bytes).
                if custom && arg(args, i) == "len" {
                    let n = arg(args, i + 1);
                    let len = match n.parse::<u32>() {
                        Ok(len) if len > 0 && n.bytes().all(|b| b.is_ascii_digit()) => len,
                        // HAProxy 2.6 names the bad length as the type.
                        _ => {
                            c.alert(format!("{kw}: unknown type '{n}'."));
                            return None;
                        }
                    };
                    key = Some(if v == "string" {
                        StickKey::String(len)
                    } else {
                        StickKey::Binary(len)
                    });
                    i += 2;
                }
            }
            "size" => {
                match parse_size(v).and_then(|n| u32::try_from(n).ok()) {
                    Some(n) => size = Some(n),
                    None => {
                        // The culprit is what follows the digits and an accepted unit letter.
                        let digits = v.bytes().take_while(u8::is_ascii_digit).count();
                        let rest = v.get(digits..).unwrap_or("");
                        let skip = usize::from(rest.starts_with(['k', 'K', 'm', 'M', 'g', 'G']));
                        let ch = rest.chars().nth(skip).unwrap_or(' ');
                        c.alert(format!(
                            "{kw}: unexpected character '{ch}' in argument of 'size'."
                        ));
                        return None;
                    }
                }
                i += 2;
            }
            "expire" => {
                match parse_time(v) {
                    Ok(d) => expire = Some(d),
                    Err(e) => {
                        let ch = match e {
                            TimeError::BadChar(ch) => ch,
                            _ => ' ',
                        };
                        c.alert(format!(
                            "{kw}: unexpected character '{ch}' in argument of 'expire'."
                        ));
                        return None;
                    }
                }
                i += 2;
            }
            "nopurge" => {
                pending.push("stick-table nopurge".into());
                i += 1;
            }
            "peers" if !in_peers => {
                if v.is_empty() {
                    c.alert(format!("{kw}: missing argument after 'peers'."));
                    return None;
                }
                peers = Some(v.to_string());
                i += 2;
            }
            "srvkey" | "write-to" => {
                pending.push(format!("stick-table {w}"));
                i += 2;
            }
            "store" => {
                for item in split_store(v) {
                    let (name, targ) = match item.split_once('(') {
                        Some((n, rest)) => (n, Some(rest.strip_suffix(')').unwrap_or(rest))),
                        None => (item, None),
                    };
                    let Some(idx) = STORE_TYPES.iter().position(|(n, _, _)| *n == name) else {
                        c.alert(format!("{kw}: unknown store option '{name}'."));
                        return None;
                    };
                    let (_, rate, supported) = STORE_TYPES[idx];
                    let array = matches!(name, "gpt" | "gpc" | "gpc_rate");
                    let (size, targ) = match (array, targ) {
                        (false, t) => (1, t),
                        (true, None) => {
                            c.alert(format!("{kw}: missing argument to store option '{name}'."));
                            return None;
                        }
                        (true, Some(a)) => {
                            let (n, rest) = match a.split_once(',') {
                                Some((n, r)) => (n, Some(r)),
                                None => (a, None),
                            };
                            if rate && rest.is_none() {
                                c.alert(format!(
                                    "{kw}: missing argument to store option '{name}'."
                                ));
                                return None;
                            }
                            let Some(n) = n.parse::<u32>().ok().filter(|n| (1..=100).contains(n))
                            else {
                                c.alert(format!(
                                    "{kw}: array size is out of allowed range (1-100) for store option '{name}'."
                                ));
                                return None;
                            };
                            if !rate && rest.is_some() {
                                c.alert(format!(
                                    "{kw}: unexpected argument to store option '{name}'."
                                ));
                                return None;
                            }
                            (n, rest)
                        }
                    };
                    let period = match (rate, targ) {
                        (true, None) => {
                            c.alert(format!("{kw}: missing argument to store option '{name}'."));
                            return None;
                        }
                        (true, Some(a)) => match parse_time(a) {
                            Ok(d) if !d.is_zero() => Some(d),
                            _ => {
                                c.alert(format!(
                                    "{kw}: error when processing store option '{name}'."
                                ));
                                return None;
                            }
                        },
                        (false, Some(_)) => {
                            c.alert(format!(
                                "{kw}: unexpected argument to store option '{name}'."
                            ));
                            return None;
                        }
                        (false, None) => None,
                    };
                    if !supported {
                        pending.push(format!("stick-table store {name}"));
                    }
                    if store.iter().any(|(j, _, _)| *j == idx) {
                        c.warn(format!(
                            "{kw}: store option '{name}' already enabled, ignored."
                        ));
                        continue;
                    }
                    store.push((idx, period, size));
                }
                i += 2;
            }
            other => {
                c.alert(format!("{kw}: unknown argument '{other}'."));
                return None;
            }
        }
    }
    let Some(size) = size.filter(|n| *n > 0) else {
        c.alert(format!("{kw}: missing size."));
        return None;
    };
    let Some(key) = key else {
        c.alert(format!("{kw}: missing type."));
        return None;
    };
    // An array overrides the legacy types it extends (HAProxy refuses both).
    let has = |n: &str| {
        store
            .iter()
            .any(|(j, _, _)| STORE_TYPES.get(*j).is_some_and(|t| t.0 == n))
    };
    for (arr, legacy, what) in [
        (
            "gpt",
            &["gpt0"][..],
            "'gpt' and 'gpt0' in a same table is not permitted as 'gpt' overrides 'gpt0'",
        ),
        (
            "gpc",
            &["gpc0", "gpc1"][..],
            "'gpc' and 'gpc[0/1]' in a same table is not permitted as 'gpc' overrides 'gpc[0/1]'",
        ),
        (
            "gpc_rate",
            &["gpc0_rate", "gpc1_rate"][..],
            "'gpc_rate' and 'gpc[0/1]_rate' in a same table is not permitted as 'gpc_rate' overrides 'gpc[0/1]_rate'",
        ),
    ] {
        if has(arr) && legacy.iter().any(|l| has(l)) {
            c.alert(format!("{kw}: simultaneous usage of {what}."));
            return None;
        }
    }
    store.sort_by_key(|(j, _, _)| *j);
    let store = store
        .into_iter()
        .filter_map(|(j, period, size)| {
            let d = period.unwrap_or_default();
            Some(match STORE_TYPES.get(j)?.0 {
                "conn_cnt" => StickStore::ConnCnt,
                "conn_rate" => StickStore::ConnRate(d),
                "conn_cur" => StickStore::ConnCur,
                "sess_cnt" => StickStore::SessCnt,
                "sess_rate" => StickStore::SessRate(d),
                "http_req_cnt" => StickStore::HttpReqCnt,
                "http_req_rate" => StickStore::HttpReqRate(d),
                "server_id" => StickStore::ServerId,
                "gpt0" => StickStore::Gpt0,
                "gpc0" => StickStore::Gpc0,
                "gpc0_rate" => StickStore::Gpc0Rate(d),
                "http_err_cnt" => StickStore::HttpErrCnt,
                "http_err_rate" => StickStore::HttpErrRate(d),
                "bytes_in_cnt" => StickStore::BytesInCnt,
                "bytes_in_rate" => StickStore::BytesInRate(d),
                "bytes_out_cnt" => StickStore::BytesOutCnt,
                "bytes_out_rate" => StickStore::BytesOutRate(d),
                "gpc1" => StickStore::Gpc1,
                "gpc1_rate" => StickStore::Gpc1Rate(d),
                "http_fail_cnt" => StickStore::HttpFailCnt,
                "http_fail_rate" => StickStore::HttpFailRate(d),
                "gpt" => StickStore::Gpt(size),
                "gpc" => StickStore::Gpc(size),
                "gpc_rate" => StickStore::GpcRate(size, d),
                _ => return None,
            })
        })
        .collect();
    Some(StickTable {
        key,
        size,
        expire: expire.filter(|d| !d.is_zero()),
        store,
        peers,
        loc: c.loc.clone(),
    })
}

/// The items of `store a,b(x),c(y,z)`: commas inside parentheses belong to the item.
fn split_store(v: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0i32, 0);
    for (i, c) in v.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth <= 0 => {
                out.push(&v[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&v[start..]);
    out
}

/// `sc-inc-gpc0|1[(<sc>)]` or `sc-set-gpt0[(<sc>)] <int>|<expr>` at `args[at]`: the action
/// and the index after it, or HAProxy's message (without its prefix and final dot). `expr`:
/// a sample expression may give gpt0's value.
pub(crate) fn parse_sc_action(
    args: &[String],
    at: usize,
    expr: bool,
) -> Result<(super::model::ScAction, usize), String> {
    use super::model::ScAction;
    let word = arg(args, at);
    let (verb, rest) = match word.find('(') {
        Some(i) => (&word[..i], &word[i..]),
        None => (word, ""),
    };
    if matches!(verb, "sc-inc-gpc" | "sc-set-gpt") {
        return parse_sc_array_action(args, at);
    }
    let gpt = verb == "sc-set-gpt0";
    if !matches!(verb, "sc-inc-gpc0" | "sc-inc-gpc1" | "sc-set-gpt0") {
        return Err(format!(
            "invalid gpc ID '{word}'. Expects sc-inc-gpc(<GPC ID>,<Track ID>)"
        ));
    }
    let sc = if rest.is_empty() {
        0
    } else {
        let id = rest
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .and_then(|n| n.parse::<u32>().ok());
        match id {
            Some(n) if n <= 2 => n as u8,
            Some(_) if gpt => {
                return Err(format!(
                    "invalid stick table track ID '{word}'. The max allowed ID is 2"
                ));
            }
            Some(_) => return Err("invalid stick table track ID. The max allowed ID is 2".into()),
            None if gpt => {
                return Err(format!(
                    "invalid stick table track ID '{word}'. Expects sc-set-gpt0(<Track ID>)"
                ));
            }
            None => {
                return Err(format!(
                    "invalid stick table track ID. Expects {word}(<Track ID>)"
                ));
            }
        }
    };
    if !gpt {
        let which = u8::from(verb == "sc-inc-gpc1");
        return Ok((ScAction::IncGpc { which, sc }, at + 1));
    }
    let v = arg(args, at + 1);
    let value = match v.trim_start().parse::<i64>() {
        _ if v.is_empty() => Ok(0),
        Ok(n) => Ok(n),
        Err(_) if expr => {
            crate::ana::sample::parse_sample(v)?;
            Err(v.to_string())
        }
        Err(_) => return Err(format!("unexpected value '{v}'")),
    };
    let next = if v.is_empty() { at + 1 } else { at + 2 };
    Ok((ScAction::SetGpt0 { sc, value }, next))
}

/// `sc-inc-gpc(<idx>,<sc>)` or `sc-set-gpt(<idx>,<sc>) <int>|<expr>` at `args[at]`, read as
/// HAProxy 2.6 does (`strtoul` then `strtol`: an empty number is 0).
fn parse_sc_array_action(
    args: &[String],
    at: usize,
) -> Result<(super::model::ScAction, usize), String> {
    use super::model::ScAction;
    let word = arg(args, at);
    let gpt = word.starts_with("sc-set-gpt");
    let (what, verb) = if gpt {
        ("gpt", "sc-set-gpt(<GPT ID>,<Track ID>)")
    } else {
        ("gpc", "sc-inc-gpc(<GPC ID>,<Track ID>)")
    };
    let Some(inner) = word
        .get("sc-inc-gpc".len()..)
        .and_then(|r| r.strip_prefix('('))
    else {
        return Err(format!("invalid {what} ID '{word}'. Expects {verb}"));
    };
    let digits = |s: &str| s.bytes().take_while(u8::is_ascii_digit).count();
    let n = digits(inner);
    let Some(after) = inner[n..].strip_prefix(',') else {
        return Err(format!("Missing {what} ID '{word}'. Expects {verb}"));
    };
    let idx = inner[..n]
        .parse::<u32>()
        .unwrap_or(if n == 0 { 0 } else { u32::MAX });
    let m = digits(after);
    if !after[m..].starts_with(')') {
        return Err(format!(
            "invalid stick table track ID '{word}'. Expects {verb}"
        ));
    }
    let sc = match after[..m].parse::<u32>() {
        Ok(v) if v <= 2 => v as u8,
        Err(_) if m == 0 => 0,
        _ => {
            return Err(format!(
                "invalid stick table track ID '{word}'. The max allowed ID is 2"
            ));
        }
    };
    if !gpt {
        return Ok((ScAction::IncGpcAt { idx, sc }, at + 1));
    }
    let v = arg(args, at + 1);
    let value = match v.trim_start().parse::<i64>() {
        _ if v.is_empty() => Ok(0),
        Ok(n) => Ok(n),
        Err(_) => {
            crate::ana::sample::parse_sample(v)?;
            Err(v.to_string())
        }
    };
    let next = if v.is_empty() { at + 1 } else { at + 2 };
    Ok((ScAction::SetGptAt { idx, sc, value }, next))
}

/// `track-sc<n> <key> [table <name>]` starting at `args[at]` (the `track-scN` word). Returns the
/// rule and the index of the word after it, or HAProxy's message (without its prefix).
pub(crate) fn parse_track_sc(
    args: &[String],
    at: usize,
) -> Result<(super::model::TrackSc, usize), String> {
    let word = arg(args, at);
    let n = word.strip_prefix("track-sc").unwrap_or("");
    // `track-sc` alone is counter 0 to HAProxy (`cfg_parse_track_sc_num` reads no digit).
    let sc = match n.parse::<u32>() {
        _ if n.is_empty() => 0,
        Ok(v) if v <= 2 => v as u8,
        Ok(v) => {
            return Err(format!(
                "{v} track-sc number exceeding 2 (MAX_SESS_STKCTR-1) value."
            ));
        }
        Err(_) => return Err(format!("unknown action '{word}'.")),
    };
    let key = arg(args, at + 1);
    if key.is_empty() || key == "if" || key == "unless" {
        return Err("missing fetch method".into());
    }
    crate::http::sample::parse_sample(key)?;
    let mut i = at + 2;
    let mut table = None;
    if arg(args, i) == "table" {
        let t = arg(args, i + 1);
        if t.is_empty() {
            return Err("missing table name".into());
        }
        table = Some(t.to_string());
        i += 2;
    }
    Ok((
        super::model::TrackSc {
            sc,
            key: key.to_string(),
            table,
        },
        i,
    ))
}

/// `stick on|match|store-request|store-response <pattern> [table <t>] [{if|unless} <cond>]`,
/// with HAProxy 2.6's words (the pattern must be a fetch the rule's direction has).
pub(crate) fn kw_stick(p: &mut P, args: &[String]) {
    use super::model::{StickKind, StickRule};
    let kind = match arg(args, 1) {
        "on" => StickKind::On,
        "match" => StickKind::Match,
        "store-request" => StickKind::StoreRequest,
        "store-response" => StickKind::StoreResponse,
        _ => {
            p.alert("'stick' expects 'on', 'match', or 'store'.");
            return;
        }
    };
    let pattern = arg(args, 2);
    if pattern.is_empty() || pattern == "table" || pattern == "if" || pattern == "unless" {
        p.alert("'stick' expects a fetch method.");
        return;
    }
    let expr = match crate::ana::sample::parse_sample(pattern) {
        Ok(e) => e,
        Err(e) => {
            let name = pattern.split(['(', ',']).next().unwrap_or(pattern);
            if crate::ana::sample::find_fetch(name).is_none() {
                p.alert(format!("'stick': unknown fetch method '{name}'"));
            } else {
                p.alert(format!("'stick': {e}"));
            }
            return;
        }
    };
    // What the fetch reads must exist in the rule's direction.
    if let Some(needs) = expr.def().log_needs {
        let response = kind == StickKind::StoreResponse;
        let here = needs.split(',').any(|n| n.contains("response") == response);
        if !here {
            let when = if response {
                "for 'store-response'"
            } else {
                "during request"
            };
            let name = pattern.split(['(', ',']).next().unwrap_or(pattern);
            p.alert(format!(
                "'stick': fetch method '{name}' extracts information from '{needs}', none of which is available {when}."
            ));
            return;
        }
    }
    let mut table = None;
    let mut cond_at = None;
    let mut i = 3;
    while i < args.len() {
        match arg(args, i) {
            "table" => {
                table = Some(arg(args, i + 1).to_string());
                i += 2;
            }
            "if" | "unless" => {
                cond_at = Some(i);
                break;
            }
            other => {
                p.alert(format!("'stick': unknown keyword '{other}'."));
                return;
            }
        }
    }
    let cond = cond_at.map(|at| cond(p, args, at));
    let loc = p.c.loc.clone();
    p.px.stick_rules.push(StickRule {
        kind,
        pattern: pattern.to_string(),
        table,
        cond,
        loc,
    });
}

/// `sc-inc-gpc0|1`, `sc-set-gpt0`, `sc-inc-gpc`, `sc-set-gpt`, with or without their `(<args>)`.
fn is_sc_action(t: &str) -> bool {
    [
        "sc-inc-gpc0",
        "sc-inc-gpc1",
        "sc-set-gpt0",
        "sc-inc-gpc",
        "sc-set-gpt",
    ]
    .iter()
    .any(|v| {
        t.strip_prefix(v)
            .is_some_and(|r| r.is_empty() || r.starts_with('('))
    })
}
