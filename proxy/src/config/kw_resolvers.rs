//! `resolvers` sections (nameservers, retries, timeouts, hold periods, payload size,
//! `parse-resolv-conf`) and, after the parse, the first address of every server given by name
//! (`init-addr`), in HAProxy 2.6's words.

use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::diag::{Diag, Severity};
use super::model::{InitAddr, Proxy, Resolvers};
use super::parser::Ctx;
use super::values::{TimeError, invalid_name_char, parse_time};

/// `resolvers <name>`: the new section, or None (reported).
pub(crate) fn open(ctx: &mut Ctx<'_>, words: &[String], all: &[Resolvers]) -> Option<Resolvers> {
    let Some(name) = words.get(1).filter(|n| !n.is_empty()) else {
        ctx.alert("missing name for resolvers section.");
        return None;
    };
    if let Some(c) = invalid_name_char(name) {
        ctx.alert(format!(
            "character '{c}' is not permitted in 'resolvers' name '{name}'."
        ));
        return None;
    }
    if let Some(prev) = all.iter().find(|r| r.name == *name) {
        ctx.diags.push(Diag::global(
            Severity::Alert,
            format!(
                "Parsing [{}:{}]: resolvers '{name}' has same name as another resolvers (declared at {}:{}).",
                ctx.loc.file, ctx.loc.line, prev.loc.file, prev.loc.line
            ),
        ));
        return None;
    }
    Some(Resolvers {
        name: name.clone(),
        nameservers: Vec::new(),
        tcp: Vec::new(),
        resolve_retries: 3,
        timeout_resolve: Duration::from_secs(1),
        timeout_retry: Duration::from_secs(1),
        hold_valid: Duration::from_secs(10),
        hold_nx: Duration::from_secs(30),
        hold_other: Duration::from_secs(30),
        hold_refused: Duration::from_secs(30),
        hold_timeout: Duration::from_secs(30),
        hold_obsolete: Duration::ZERO,
        accepted_payload_size: 512,
        loc: ctx.loc.clone(),
    })
}

/// A time argument, HAProxy's three errors worded for `what`.
fn time(ctx: &mut Ctx<'_>, v: &str, arg: &str, what: &str) -> Option<Duration> {
    match parse_time(v) {
        Ok(d) => Some(d),
        Err(TimeError::Overflow) => {
            ctx.alert_tight(format!(
                "timer overflow in argument <{arg}> to <{what}>, maximum value is 2147483647 ms (~24.8 days)."
            ));
            None
        }
        Err(TimeError::BadChar(c)) => {
            ctx.alert_tight(format!(
                "unexpected character '{c}' in argument to <{what}>."
            ));
            None
        }
        Err(TimeError::Empty) => Some(Duration::ZERO),
    }
}

/// One line inside a `resolvers` section.
pub(crate) fn dispatch(r: &mut Resolvers, ctx: &mut Ctx<'_>, words: &[String]) {
    let kw = words[0].as_str();
    let a = |i: usize| words.get(i).map_or("", String::as_str);
    match kw {
        "nameserver" => {
            if a(2).is_empty() {
                ctx.alert("'nameserver' expects <name> and <addr>[:<port>] as arguments.");
                return;
            }
            let name = a(1);
            if let Some(c) = invalid_name_char(name) {
                ctx.alert(format!(
                    "character '{c}' is not permitted in server name '{name}'."
                ));
                return;
            }
            if r.nameservers.iter().any(|(n, _)| n == name) {
                ctx.diags.push(Diag::global(
                    Severity::Alert,
                    format!(
                        "Parsing [{}:{}]: nameserver '{name}' has same name as another nameserver.",
                        ctx.loc.file, ctx.loc.line
                    ),
                ));
                return;
            }
            match nameserver_addr(a(2), ctx.sys.resolve) {
                Ok((sa, tcp)) => {
                    r.nameservers.push((name.to_string(), sa));
                    if tcp {
                        r.tcp.push(name.to_string());
                    }
                }
                Err(e) => ctx.alert(format!("'nameserver {name}' : {e}")),
            }
        }
        "parse-resolv-conf" => {
            let Ok(text) = (ctx.sys.read)("/etc/resolv.conf") else {
                ctx.alert("failed to open /etc/resolv.conf.");
                return;
            };
            for ns in resolv_conf_nameservers(&String::from_utf8_lossy(&text)) {
                if !r.nameservers.iter().any(|(n, _)| *n == ns.0) {
                    r.nameservers.push(ns);
                }
            }
        }
        "hold" => {
            if a(2).is_empty() {
                ctx.alert("'hold' expects an <event> and a <time> as arguments.");
                ctx.diags.push(Diag::global(
                    Severity::Alert,
                    "<event> can be either 'valid', 'nx', 'refused', 'timeout', or 'other'",
                ));
                return;
            }
            let Some(t) = time(ctx, a(2), a(1), "hold") else {
                return;
            };
            match a(1) {
                "nx" => r.hold_nx = t,
                "other" => r.hold_other = t,
                "refused" => r.hold_refused = t,
                "timeout" => r.hold_timeout = t,
                "valid" => r.hold_valid = t,
                "obsolete" => r.hold_obsolete = t,
                other => ctx.alert(format!(
                    "'hold' unknown <event>: '{other}', expects either 'nx', 'timeout', 'valid', 'obsolete' or 'other'."
                )),
            }
        }
        "accepted_payload_size" => {
            if a(1).is_empty() {
                ctx.alert("'accepted_payload_size' expects <nb> as argument.");
                return;
            }
            match super::values::atol(a(1)) {
                n @ 12..=65535 => r.accepted_payload_size = n as u16,
                _ => ctx.alert(format!(
                    "'accepted_payload_size' must be between 12 and 65535 inclusive (was {}).",
                    a(1)
                )),
            }
        }
        "resolution_pool_size" => ctx.alert(
            "'resolution_pool_size' directive is not supported anymore (it never appeared in a stable release).",
        ),
        "resolve_retries" => {
            if a(1).is_empty() {
                ctx.alert("'resolve_retries' expects <nb> as argument.");
                return;
            }
            r.resolve_retries = u32::try_from(super::values::atol(a(1))).unwrap_or(0);
        }
        "timeout" => match a(1) {
            "" => ctx.alert("'timeout' expects 'retry' or 'resolve' and <time> as arguments."),
            which @ ("retry" | "resolve") => {
                if a(2).is_empty() {
                    ctx.alert(format!("'timeout {which}' expects <time> as argument."));
                    return;
                }
                let what = format!("timeout {which}");
                let Some(t) = time(ctx, a(2), a(2), &what) else {
                    return;
                };
                if which == "retry" {
                    r.timeout_retry = t;
                } else {
                    r.timeout_resolve = t;
                }
            }
            other => ctx.alert(format!(
                "'timeout' expects 'retry' or 'resolve' and <time> as arguments got '{other}'."
            )),
        },
        _ => ctx.alert(format!("unknown keyword '{kw}' in 'resolvers' section")),
    }
}

/// The `nameserver <ip>` lines of a resolv.conf text, named by their address, port 53, in
/// order (HAProxy's `parse-resolv-conf`: other lines and names that are not IPs are skipped).
pub(crate) fn resolv_conf_nameservers(text: &str) -> Vec<(String, SocketAddr)> {
    let mut out: Vec<(String, SocketAddr)> = Vec::new();
    for line in text.lines() {
        let Some(rest) = line.strip_prefix("nameserver") else {
            continue;
        };
        let Some(addr) = rest.split_whitespace().next() else {
            continue;
        };
        if !rest.starts_with([' ', '\t']) || out.iter().any(|(n, _)| n == addr) {
            continue;
        }
        if let Ok(ip) = addr.parse::<IpAddr>() {
            out.push((addr.to_string(), SocketAddr::new(ip, 53)));
        }
    }
    out
}

/// HAProxy's implicit `resolvers default` (made at start when the configuration has no section
/// of that name): the nameservers of `/etc/resolv.conf` with the default settings, or none when
/// the file names no nameserver (HAProxy then silently goes without).
pub(crate) fn implicit_default(resolv_conf: Result<Vec<u8>, String>) -> Option<Resolvers> {
    let text = resolv_conf.ok()?;
    let nameservers = resolv_conf_nameservers(&String::from_utf8_lossy(&text));
    if nameservers.is_empty() {
        return None;
    }
    Some(Resolvers {
        name: "default".into(),
        nameservers,
        tcp: Vec::new(),
        resolve_retries: 3,
        timeout_resolve: Duration::from_secs(1),
        timeout_retry: Duration::from_secs(1),
        hold_valid: Duration::from_secs(10),
        hold_nx: Duration::from_secs(30),
        hold_other: Duration::from_secs(30),
        hold_refused: Duration::from_secs(30),
        hold_timeout: Duration::from_secs(30),
        hold_obsolete: Duration::ZERO,
        accepted_payload_size: 512,
        loc: super::model::Loc {
            file: "<internal>".into(),
            line: 0,
        },
    })
}

/// `<ip>:<port>` of a nameserver (a port is mandatory, as HAProxy; `udp@`/`ipv4@` prefixes
/// accepted, `tcp@` for DNS over TCP) and whether it is reached over TCP.
fn nameserver_addr(
    spec: &str,
    resolve: super::addr::Resolver,
) -> Result<(SocketAddr, bool), String> {
    let tcp = ["tcp@", "tcp4@", "tcp6@"]
        .iter()
        .find_map(|p| spec.strip_prefix(p));
    let s = tcp
        .or_else(|| spec.strip_prefix("udp@"))
        .or_else(|| spec.strip_prefix("udp4@"))
        .or_else(|| spec.strip_prefix("udp6@"))
        .unwrap_or(spec);
    let a = super::addr::parse_server(s, resolve).map_err(|e| {
        match e.strip_prefix("could not resolve address '") {
            Some(h) => {
                let h = h.trim_end_matches('\'');
                format!("invalid address: '{h}' in '{spec}'")
            }
            None => e,
        }
    })?;
    if a.port() == 0 {
        return Err(format!("missing port specification in '{spec}'"));
    }
    Ok((a, tcp.is_some()))
}

/// After parsing: a server's `resolvers` exists; a section without nameserver is worth a
/// warning; every server given by name gets its first address as `init-addr` says.
pub(crate) fn finish(
    proxies: &mut [Proxy],
    resolvers: &[Resolvers],
    resolve: super::addr::Resolver,
    diags: &mut Vec<Diag>,
) {
    for r in resolvers.iter().filter(|r| r.nameservers.is_empty()) {
        diags.push(Diag::global(
            Severity::Warning,
            format!(
                "resolvers '{}' [{}:{}] has no nameservers configured!",
                r.name, r.loc.file, r.loc.line
            ),
        ));
    }
    let mut failed = false;
    for px in proxies.iter_mut() {
        let (kind, pname) = (px.kind(), px.name.clone());
        for s in &mut px.servers {
            if let Some(rn) = &s.opts.resolve.resolvers
                && !resolvers.iter().any(|r| r.name == *rn)
            {
                diags.push(Diag::global(
                    Severity::Alert,
                    format!(
                        "{kind} '{pname}', server '{}': unable to find required resolvers '{rn}'",
                        s.name
                    ),
                ));
            }
            let Some(host) = s.fqdn.clone() else { continue };
            let methods = if s.opts.resolve.init_addr.is_empty() {
                vec![InitAddr::Last, InitAddr::Libc]
            } else {
                s.opts.resolve.init_addr.clone()
            };
            let mut done = false;
            for m in &methods {
                match m {
                    // The server-state file is read after the start: nothing here.
                    InitAddr::Last => {}
                    InitAddr::Libc => {
                        if let Some(ip) = resolve(&host) {
                            s.addr.set_ip(ip);
                            done = true;
                        }
                    }
                    InitAddr::None => {
                        s.unresolved = true;
                        done = true;
                    }
                    InitAddr::Ip(ip) => {
                        s.addr.set_ip(*ip);
                        done = true;
                    }
                }
                if done {
                    break;
                }
            }
            if done {
                continue;
            }
            let who = format!(
                "[{}:{}] : 'server {pname}/{}'",
                s.loc.file, s.loc.line, s.name
            );
            if s.opts.resolve.resolvers.is_some() {
                diags.push(Diag::global(
                    Severity::Warning,
                    format!("{who} : could not resolve address '{host}', disabling server."),
                ));
                s.unresolved = true;
            } else {
                diags.push(Diag::global(
                    Severity::Alert,
                    format!("{who} : could not resolve address '{host}'."),
                ));
                failed = true;
            }
        }
    }
    if failed {
        diags.push(Diag::global(
            Severity::Alert,
            "Failed to initialize server(s) addr.",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_dns(_: &str) -> Option<IpAddr> {
        None
    }

    /// A resolv.conf of the test's own (never the machine's): HAProxy's reading of it.
    #[test]
    fn implicit_default_from_a_resolv_conf() {
        let text = "# comment\nsearch example\nnameserver 127.0.0.53\noptions edns0\n\
                    nameserver\t::1\nnameserver 127.0.0.53\nnameserver not-an-ip\nnameservers 1.2.3.4\n";
        let d = implicit_default(Ok(text.as_bytes().to_vec())).expect("a section");
        assert_eq!(d.name, "default");
        assert_eq!(
            d.nameservers,
            vec![
                ("127.0.0.53".to_string(), "127.0.0.53:53".parse().unwrap()),
                ("::1".to_string(), "[::1]:53".parse().unwrap()),
            ]
        );
        assert!(d.tcp.is_empty());
        assert_eq!((d.resolve_retries, d.accepted_payload_size), (3, 512));
        assert_eq!(d.hold_valid, Duration::from_secs(10));
        // No nameserver, or no file: no section at all.
        assert_eq!(implicit_default(Ok(b"search x\n".to_vec())), None);
        assert_eq!(implicit_default(Err("No such file".into())), None);
    }

    #[test]
    fn tcp_nameservers() {
        assert_eq!(
            nameserver_addr("tcp@127.0.0.1:5353", &no_dns),
            Ok(("127.0.0.1:5353".parse().unwrap(), true))
        );
        assert_eq!(
            nameserver_addr("udp@127.0.0.1:53", &no_dns),
            Ok(("127.0.0.1:53".parse().unwrap(), false))
        );
        assert_eq!(
            nameserver_addr("tcp@127.0.0.1", &no_dns),
            Err("missing port specification in 'tcp@127.0.0.1'".to_string())
        );
    }
}
