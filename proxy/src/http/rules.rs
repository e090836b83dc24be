//! Compiled per-proxy rules: ACLs, `use_backend`/`default_backend`, `http-request` actions and
//! `tcp-request content` rules. Compiled once at start (and by `-c`); applying them is pure and
//! evaluated against a `SampleCtx` built by the session.

use crate::config::diag::Diag;
use crate::config::model::{Config, HttpRequestAction, Proxy, RedirectKind, TcpRequestAction};
use crate::http::acl::{self, Condition};
use crate::http::head::RequestHead;
use crate::http::sample::SampleCtx;
use crate::log::format::{LogFormat, LogRecord};

pub enum Action {
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
        body: Option<String>,
    },
    Allow,
    UsePrometheus,
}

pub struct Rule {
    pub action: Action,
    pub cond: Option<Condition>,
}

#[derive(Default)]
pub struct ProxyRules {
    /// (backend proxy index, condition)
    pub use_backends: Vec<(usize, Option<Condition>)>,
    pub default_backend: Option<usize>,
    pub http_request: Vec<Rule>,
    pub tcp_content: Vec<(TcpRequestAction, Option<Condition>)>,
    /// `tcp-request connection` rules, evaluated at accept on addresses only.
    pub tcp_connection: Vec<(TcpRequestAction, Option<Condition>)>,
    /// `stats admin if|unless <cond>`: the stats page may change servers.
    pub stats_admin: Option<Condition>,
}

/// What the `http-request` rules decided.
pub enum Verdict {
    Continue,
    Deny(u16),
    Redirect {
        code: u16,
        location: String,
    },
    Return {
        status: u16,
        content_type: Option<String>,
        body: Option<String>,
    },
    /// `use-service prometheus-exporter`: answer with the exporter page.
    Prometheus,
}

fn rule_name(a: &HttpRequestAction) -> &'static str {
    match a {
        HttpRequestAction::SetHeader { .. } => "http-request set-header",
        HttpRequestAction::AddHeader { .. } => "http-request add-header",
        HttpRequestAction::DelHeader { .. } => "http-request del-header",
        HttpRequestAction::Redirect { .. } => "http-request redirect",
        HttpRequestAction::Deny { .. } => "http-request deny",
        HttpRequestAction::Return { .. } => "http-request return",
        HttpRequestAction::Allow => "http-request allow",
        HttpRequestAction::UsePrometheus => "http-request use-service",
    }
}

/// Compiles every proxy's rules; errors are collected with file:line, in HAProxy's words.
pub fn compile(cfg: &Config) -> Result<Vec<ProxyRules>, Vec<Diag>> {
    let mut out = Vec::with_capacity(cfg.proxies.len());
    let mut errs = Vec::new();
    for p in &cfg.proxies {
        out.push(compile_proxy(cfg, p, &mut errs));
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
    let admin = p.stats.as_ref().and_then(|s| s.admin.clone());
    r.stats_admin = cond(&admin, "stats admin", errs);
    let fmt = |s: &str, loc: &crate::config::model::Loc, rule: &str, errs: &mut Vec<Diag>| {
        match LogFormat::parse_rule(s) {
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
    for rule in &p.http_request {
        let name = rule_name(&rule.action);
        let action = match &rule.action {
            HttpRequestAction::SetHeader { name: h, value } => {
                Action::SetHeader(h.clone(), fmt(value, &rule.loc, name, errs))
            }
            HttpRequestAction::AddHeader { name: h, value } => {
                Action::AddHeader(h.clone(), fmt(value, &rule.loc, name, errs))
            }
            HttpRequestAction::DelHeader { name: h } => Action::DelHeader(h.clone()),
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
            } => Action::Return {
                status: *status,
                content_type: content_type.clone(),
                body: body.clone(),
            },
            HttpRequestAction::Allow => Action::Allow,
            HttpRequestAction::UsePrometheus => Action::UsePrometheus,
        };
        let c = cond(&rule.cond, name, errs);
        r.http_request.push(Rule { action, cond: c });
    }
    for t in &p.tcp_request {
        if t.connection {
            let c = cond(&t.cond, "tcp-request connection", errs);
            r.tcp_connection.push((t.action.clone(), c));
        } else {
            let c = cond(&t.cond, "tcp-request content", errs);
            r.tcp_content.push((t.action.clone(), c));
        }
    }
    r
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
    for rule in rules {
        let ctx = SampleCtx {
            req: Some(&*req),
            ..*base
        };
        if !Condition::eval_opt(rule.cond.as_ref(), &ctx) {
            continue;
        }
        match &rule.action {
            Action::SetHeader(name, f) => {
                let v = render(f, &ctx);
                req.headers.set(name, v.into_bytes());
            }
            Action::AddHeader(name, f) => {
                let v = render(f, &ctx);
                req.headers.append(name.clone(), v.into_bytes());
            }
            Action::DelHeader(name) => req.headers.remove(name),
            Action::Deny(status) => return Verdict::Deny(*status),
            Action::Allow => return Verdict::Continue,
            Action::UsePrometheus => return Verdict::Prometheus,
            Action::Return {
                status,
                content_type,
                body,
            } => {
                return Verdict::Return {
                    status: *status,
                    content_type: content_type.clone(),
                    body: body.clone(),
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
pub fn apply_tcp_rules(
    rules: &[(TcpRequestAction, Option<Condition>)],
    ctx: &SampleCtx<'_>,
) -> Option<TcpRequestAction> {
    for (action, cond) in rules {
        let applies = match cond {
            None => true,
            Some(c) => c.eval_partial(ctx)?,
        };
        if applies {
            return Some(action.clone());
        }
    }
    Some(TcpRequestAction::Accept)
}

/// The backend a frontend sends a stream to: the first `use_backend` whose condition holds,
/// else `default_backend`, else the proxy itself when it is a `listen`/backend.
pub fn route(
    rules: &ProxyRules,
    self_index: usize,
    self_is_backend: bool,
    ctx: &SampleCtx<'_>,
) -> Option<usize> {
    for (idx, cond) in &rules.use_backends {
        if Condition::eval_opt(cond.as_ref(), ctx) {
            return Some(*idx);
        }
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
}
