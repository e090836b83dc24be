//! `global` TLS defaults besides the `ssl-default-bind-*` ones: towards servers, curves and
//! the finite-field DHE settings rustls has no use for.

use super::kw_global::GlobalKw;
use super::kw_proxy;
use super::model::{Global, SslOptions};
use super::parser::Ctx;

pub(crate) static SSL_KWS: &[GlobalKw] = &[
    GlobalKw {
        kw: "ssl-default-bind-curves",
        parse: kw_bind_curves,
        pending: false,
    },
    GlobalKw {
        kw: "ssl-default-server-ciphers",
        parse: kw_server_ciphers,
        pending: false,
    },
    GlobalKw {
        kw: "ssl-default-server-ciphersuites",
        parse: kw_server_ciphersuites,
        pending: false,
    },
    GlobalKw {
        kw: "ssl-default-server-options",
        parse: kw_server_options,
        pending: false,
    },
    GlobalKw {
        kw: "ssl-dh-param-file",
        parse: kw_dh_param_file,
        pending: false,
    },
];

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map_or("", String::as_str)
}

fn one(c: &mut Ctx, args: &[String], what: &str) -> Option<String> {
    if c.too_many(args, 1, 1) {
        return None;
    }
    match arg(args, 1) {
        "" => {
            c.alert(format!("'{}' expects {what} as an argument.", arg(args, 0)));
            None
        }
        v => Some(v.to_string()),
    }
}

fn kw_bind_curves(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if let Some(v) = one(c, args, "a curves list") {
        g.ssl_default_bind_curves = Some(v);
    }
}

fn kw_server_ciphers(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if let Some(v) = one(c, args, "a cipher suite") {
        g.ssl_default_server_ciphers = Some(v);
    }
}

fn kw_server_ciphersuites(g: &mut Global, c: &mut Ctx, args: &[String]) {
    if let Some(v) = one(c, args, "a cipher suite") {
        g.ssl_default_server_ciphersuites = Some(v);
    }
}

fn kw_server_options(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let mut opts = SslOptions::default();
    let mut i = 1;
    while let Some(word) = args.get(i) {
        match kw_proxy::parse_ssl_option(&mut opts, word, args.get(i + 1)) {
            Ok(used) => i += 1 + used,
            Err(msg) => {
                c.alert(format!("'ssl-default-server-options' : {msg}"));
                return;
            }
        }
    }
    g.ssl_default_server_options = opts;
}

/// `ssl-dh-param-file <file>`: the file must exist (HAProxy loads it); its groups are never
/// used since rustls offers no finite-field DHE (one warning, see `kw_tune`).
fn kw_dh_param_file(g: &mut Global, c: &mut Ctx, args: &[String]) {
    let Some(f) = one(c, args, "a file path") else {
        return;
    };
    if (c.sys.stat)(&f).is_err() {
        c.alert(format!(
            "'{}': unable to load DH parameters from file <{f}>.",
            arg(args, 0)
        ));
        return;
    }
    super::kw_tune::dhe_unsupported_once(g, c, arg(args, 0));
}
