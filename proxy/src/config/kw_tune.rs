//! `global` keywords of the `tune.*` family.

use super::kw_global::GlobalKw;
use super::model::Global;
use super::parser::Ctx;
use super::values::atol;

pub(crate) static TUNE_KWS: &[GlobalKw] = &[
    GlobalKw {
        kw: "tune.bufsize",
        parse: kw_bufsize,
        pending: false,
    },
    GlobalKw {
        kw: "tune.comp.maxlevel",
        parse: kw_comp_maxlevel,
        pending: false,
    },
    GlobalKw {
        kw: "tune.idle-pool.shared",
        parse: kw_idle_pool_shared,
        pending: false,
    },
    GlobalKw {
        kw: "tune.lua.forced-yield",
        parse: kw_lua_forced_yield,
        pending: false,
    },
    GlobalKw {
        kw: "tune.lua.maxmem",
        parse: kw_lua_maxmem,
        pending: false,
    },
    GlobalKw {
        kw: "tune.lua.service-timeout",
        parse: kw_lua_timeout,
        pending: false,
    },
    GlobalKw {
        kw: "tune.lua.session-timeout",
        parse: kw_lua_timeout,
        pending: false,
    },
    GlobalKw {
        kw: "tune.lua.task-timeout",
        parse: kw_lua_timeout,
        pending: false,
    },
    GlobalKw {
        kw: "tune.maxrewrite",
        parse: kw_maxrewrite,
        pending: false,
    },
    GlobalKw {
        kw: "tune.ssl.default-dh-param",
        parse: kw_default_dh_param,
        pending: false,
    },
];

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map_or("", String::as_str)
}

/// `tune.bufsize <n>`: HAProxy rounds it up to two pointers' alignment (16 bytes).
fn kw_bufsize(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let Some(n) = int_arg(c, args) else { return };
    let n = n.saturating_add(15) & !15;
    match u32::try_from(n) {
        Ok(v) if v > 0 => g.tune.bufsize = Some(v),
        _ => c.alert(format!(
            "'{}' expects a positive integer argument.",
            arg(args, 0)
        )),
    }
}

fn kw_maxrewrite(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let Some(n) = int_arg(c, args) else { return };
    match u32::try_from(n) {
        Ok(v) => g.tune.maxrewrite = Some(v),
        Err(_) => c.alert(format!(
            "'{}' expects a positive integer argument.",
            arg(args, 0)
        )),
    }
}

/// The one argument of `tune.bufsize`/`tune.maxrewrite`, read as C's `atol` does.
fn int_arg(c: &mut Ctx, args: &[String]) -> Option<i64> {
    if c.too_many(args, 1, 1) {
        return None;
    }
    if arg(args, 1).is_empty() {
        c.alert(format!("'{}' expects an integer argument.", arg(args, 0)));
        return None;
    }
    Some(atol(arg(args, 1)))
}

/// `tune.idle-pool.shared on|off`: whether idle server connections are shared between threads.
/// portcullis keeps them per worker thread either way, which is what `off` asks; `on` only
/// lets more connections be reused and changes nothing that can be observed otherwise.
fn kw_idle_pool_shared(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    match arg(args, 1) {
        "on" => g.tune.idle_pool_shared = true,
        "off" => g.tune.idle_pool_shared = false,
        other => c.alert(format!(
            "'{}' expects either 'on' or 'off' but got '{other}'.",
            arg(args, 0)
        )),
    }
}

/// `tune.comp.maxlevel <1..9>`: the compression level of `compression algo` (`atoi`).
fn kw_comp_maxlevel(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    match u32::try_from(atol(arg(args, 1))) {
        Ok(n @ 1..=9) => g.tune.comp_maxlevel = Some(n),
        _ => c.alert(format!(
            "'{}' expects a numeric value between 1 and 9",
            arg(args, 0)
        )),
    }
}

/// `tune.ssl.default-dh-param <bits>`: the size of HAProxy's built-in DHE group. rustls has no
/// finite-field DHE, so no DHE suite is ever offered: the value is checked as HAProxy checks it
/// and one warning says it has no effect (nothing is downgraded).
fn kw_default_dh_param(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if c.too_many(args, 1, 1) {
        return;
    }
    if arg(args, 1).is_empty() {
        c.alert(format!("'{}' expects an integer argument.", arg(args, 0)));
        return;
    }
    let bits = atol(arg(args, 1));
    if bits < 1024 {
        c.alert(format!("'{}' expects a value >= 1024.", arg(args, 0)));
        return;
    }
    g.tune.ssl_default_dh_param = u32::try_from(bits).ok();
    dhe_unsupported_once(g, c, arg(args, 0));
}

/// The one warning about finite-field DHE settings (`tune.ssl.default-dh-param`,
/// `ssl-dh-param-file`).
pub(crate) fn dhe_unsupported_once(g: &mut Global, c: &mut Ctx, kw: &str) {
    if g.tune.dhe_warned {
        return;
    }
    g.tune.dhe_warned = true;
    c.warn(format!(
        "'{kw}' : portcullis uses rustls, which has no finite-field DHE key exchange: no DHE \
         cipher is ever offered (ECDHE only), so this setting has no effect."
    ));
}

/// `tune.lua.session-timeout|task-timeout|service-timeout <time>`: HAProxy reads the value only
/// (extra words are ignored, as it does).
fn kw_lua_timeout(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let kw = arg(args, 0);
    let Ok(d) = super::values::parse_time(arg(args, 1)) else {
        c.alert(format!("{kw}: invalid timeout"));
        return;
    };
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    match kw {
        "tune.lua.session-timeout" => g.tune.lua.session_timeout_ms = ms,
        "tune.lua.task-timeout" => g.tune.lua.task_timeout_ms = ms,
        _ => g.tune.lua.service_timeout_ms = ms,
    }
    lua_tune(g);
}

/// `tune.lua.forced-yield <n>`: read with `strtol`, refused when anything follows the number
/// (an empty word is 0, as in HAProxy).
fn kw_lua_forced_yield(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let v = arg(args, 1).trim_start();
    let sign = usize::from(v.starts_with(['-', '+']));
    let digits = v[sign..].bytes().take_while(u8::is_ascii_digit).count();
    if digits == 0 && !v.is_empty() || sign + digits < v.len() {
        c.alert("tune.lua.forced-yield: invalid number");
        return;
    }
    g.tune.lua.forced_yield = u32::try_from(atol(v)).unwrap_or(0);
    lua_tune(g);
}

/// `tune.lua.maxmem <MB>`.
fn kw_lua_maxmem(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let v = arg(args, 1);
    if v.is_empty() {
        c.alert("'tune.lua.maxmem' expects an integer argument (Lua memory size in MB).");
        return;
    }
    let digits = v.bytes().take_while(u8::is_ascii_digit).count();
    let (num, rest) = v.split_at(digits);
    if !rest.is_empty() || num.is_empty() {
        c.alert(format!(
            "tune.lua.maxmem: invalid number {v} (error at '{rest}')"
        ));
        return;
    }
    let mb: usize = num.parse().unwrap_or(usize::MAX);
    g.tune.lua.maxmem = mb.saturating_mul(1024 * 1024);
    lua_tune(g);
}

/// The interpreter reads `tune.lua.*` when it makes the workers' states.
fn lua_tune(g: &Global) {
    if let Some(h) = crate::ana::script::host() {
        h.set_tune(g.tune.lua);
    }
}
