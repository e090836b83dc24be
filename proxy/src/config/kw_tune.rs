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
        kw: "tune.idle-pool.shared",
        parse: kw_idle_pool_shared,
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
