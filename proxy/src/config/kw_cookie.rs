//! The persistence cookie's keywords: `cookie`, `dynamic-cookie-key`, `force-persist`,
//! `ignore-persist` (the server's `cookie` is in `kw_server`), with HAProxy 2.6's words.

use super::diag::Severity;
use super::kw_proxy::P;
use super::kw_rules;
use super::model::CookieCfg;

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map_or("", String::as_str)
}

/// `cookie <name> [options]` with HAProxy 2.6's checks and words.
pub(crate) fn kw_cookie(p: &mut P, args: &[String]) {
    if arg(args, 1).is_empty() {
        p.alert(format!("'{}' expects <cookie_name> as argument.", args[0]));
        return;
    }
    let mut warns = Vec::new();
    let parsed = parse_cookie(args, &mut warns);
    for w in warns {
        // HAProxy words this warning `parsing [f:l]: msg`.
        p.c.diags.push(super::diag::Diag::reader(
            &p.c.loc.file,
            p.c.loc.line,
            Severity::Warning,
            w,
        ));
    }
    match parsed {
        Ok(ck) => {
            p.px.extra.cookie = Some(ck);
        }
        Err(e) => p.alert_cookie(e),
    }
}

/// `force-persist|ignore-persist if|unless <condition>`.
pub(crate) fn kw_persist_rule(p: &mut P, args: &[String]) {
    if !matches!(arg(args, 1), "if" | "unless") {
        p.alert(format!(
            "'{}' requires either 'if' or 'unless' followed by a condition.",
            args[0]
        ));
        return;
    }
    let c = kw_rules::cond(p, args, 1);
    p.px.extra
        .persist_rules
        .push((args[0] == "force-persist", c));
}

/// `persist rdp-cookie[(<name>)]`, with HAProxy 2.6's words.
pub(crate) fn kw_persist(p: &mut P, args: &[String]) {
    let m = arg(args, 1);
    if m.is_empty() {
        p.alert("missing persist method.");
        return;
    }
    let Some(rest) = m.strip_prefix("rdp-cookie") else {
        p.alert("unknown persist method.");
        return;
    };
    let name = match rest.strip_prefix('(') {
        Some(r) => r.find(')').filter(|e| *e > 0).map(|e| &r[..e]),
        None if rest.is_empty() => Some("msts"),
        None => None,
    };
    if (rest.is_empty() || name.is_some()) && p.c.too_many(args, 1, 1) {
        return;
    }
    match name {
        Some(n) => p.px.extra.rdp_persist = Some(n.to_string()),
        None => p.alert("persist rdp-cookie(name)' requires an rdp cookie name."),
    }
}

/// `dynamic-cookie-key <key>`.
pub(crate) fn kw_dynamic_cookie_key(p: &mut P, args: &[String]) {
    match args.get(1) {
        Some(k) if !k.is_empty() => p.px.extra.dynamic_cookie_key = Some(k.clone()),
        _ => p.alert(format!("'{}' expects <secret_key> as argument.", args[0])),
    }
}

impl P<'_, '_> {
    /// HAProxy words its cookie alerts `parsing [f:l]: msg` or `parsing [f:l] : msg`.
    fn alert_cookie(&mut self, (tight, msg): (bool, String)) {
        if tight {
            self.c.alert_tight(msg);
        } else {
            self.alert(msg);
        }
    }
}

/// The options of a `cookie` line; Err: (the alert has no space before its colon, message).
fn parse_cookie(args: &[String], warns: &mut Vec<String>) -> Result<CookieCfg, (bool, String)> {
    use super::model::CookieMode;
    let mut ck = CookieCfg {
        name: args[1].clone(),
        ..CookieCfg::default()
    };
    let (mut rw, mut ins, mut pfx) = (false, false, false);
    let mut i = 2;
    while i < args.len() && !args[i].is_empty() {
        let next = arg(args, i + 1);
        match args[i].as_str() {
            "rewrite" => rw = true,
            "indirect" => ck.indirect = true,
            "insert" => ins = true,
            "nocache" => ck.nocache = true,
            "postonly" => ck.postonly = true,
            "preserve" => ck.preserve = true,
            "prefix" => pfx = true,
            "httponly" => ck.httponly = true,
            "secure" => ck.secure = true,
            "dynamic" => ck.dynamic = true,
            "domain" => {
                if next.is_empty() {
                    return Err((true, "'domain' expects <domain> as argument.".into()));
                }
                if !next.contains('.') {
                    warns.push(format!("domain '{next}' contains no embedded dot, this configuration may not work properly (see RFC6265#5.2.3)."));
                }
                if let Some(c) = next
                    .chars()
                    .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_')))
                {
                    return Err((
                        true,
                        format!("character '{c}' is not permitted in domain name '{next}'."),
                    ));
                }
                ck.domain = Some(match ck.domain.take() {
                    Some(d) => format!("{d}; domain={next}"),
                    None => next.to_string(),
                });
                i += 1;
            }
            kw @ ("maxidle" | "maxlife") => {
                let what = if kw == "maxidle" {
                    "<idletime>"
                } else {
                    "<lifetime>"
                };
                if next.is_empty() {
                    return Err((
                        true,
                        format!("'{kw}' expects {what} in seconds as argument."),
                    ));
                }
                let secs = cookie_secs(next, kw)?;
                if kw == "maxidle" {
                    ck.maxidle = secs;
                } else {
                    ck.maxlife = secs;
                }
                i += 1;
            }
            "attr" => {
                if next.is_empty() {
                    return Err((true, "'attr' expects <value> as argument.".into()));
                }
                if let Some(b) = next.bytes().find(|b| b.is_ascii_control() || *b == b';') {
                    return Err((
                        true,
                        format!("character '%x{b:02X}' is not permitted in attribute value."),
                    ));
                }
                ck.attrs = Some(match ck.attrs.take() {
                    Some(a) => format!("{a}; {next}"),
                    None => next.to_string(),
                });
                i += 1;
            }
            _ => {
                return Err((
                    false,
                    format!(
                        "'{}' supports 'rewrite', 'insert', 'prefix', 'indirect', 'nocache', 'postonly', 'domain', 'maxidle', 'dynamic', 'maxlife' and 'attr' options.",
                        args[0]
                    ),
                ));
            }
        }
        i += 1;
    }
    if rw && ck.indirect {
        return Err((
            false,
            "cookie 'rewrite' and 'indirect' modes are incompatible.".into(),
        ));
    }
    if u8::from(rw) + u8::from(ins) + u8::from(pfx) > 1 {
        return Err((
            false,
            "cookie 'rewrite', 'insert' and 'prefix' modes are incompatible.".into(),
        ));
    }
    if ck.preserve && !ins && !ck.indirect {
        return Err((
            false,
            "cookie 'preserve' requires at least 'insert' or 'indirect'.".into(),
        ));
    }
    ck.mode = if rw {
        Some(CookieMode::Rewrite)
    } else if ins {
        Some(CookieMode::Insert)
    } else if pfx {
        Some(CookieMode::Prefix)
    } else {
        None
    };
    Ok(ck)
}

/// A `maxidle`/`maxlife` delay: HAProxy's `parse_time_err` in seconds.
fn cookie_secs(v: &str, kw: &str) -> Result<u32, (bool, String)> {
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let (num, unit) = v.split_at(digits);
    let per_us = u128::from(super::values::time_unit_us(unit, 1_000_000).map_err(|c| {
        (
            true,
            format!("unexpected character '{c}' in argument to <{kw}>."),
        )
    })?);
    let n: u128 = num.parse().unwrap_or(u128::MAX / per_us.max(1));
    let secs = n.saturating_mul(per_us) / 1_000_000;
    if secs > i32::MAX as u128 {
        return Err((
            true,
            format!(
                "timer overflow in argument <{v}> to <{kw}>, maximum value is 2147483647 s (~68 years)."
            ),
        ));
    }
    // 2.6.12 takes a delay under a second as 0 (no underflow error).
    Ok(secs as u32)
}
