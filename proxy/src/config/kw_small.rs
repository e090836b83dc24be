//! Small proxy keywords that real configurations carry: `description`, `monitor-uri`,
//! `monitor fail`, `load-server-state-from-file`, `server-state-file-name`.

use super::kw_proxy::{BE, DEF, FE, P, ProxyKw};
use super::model::LoadServerState;

pub(crate) static SMALL_KWS: &[ProxyKw] = &[
    ProxyKw {
        kw: "description",
        caps: FE | BE,
        strict: true,
        parse: kw_description,
    },
    ProxyKw {
        kw: "load-server-state-from-file",
        caps: DEF | BE,
        strict: false,
        parse: kw_load_server_state,
    },
    ProxyKw {
        kw: "monitor",
        caps: FE,
        strict: false,
        parse: kw_monitor,
    },
    ProxyKw {
        kw: "server-state-file-name",
        caps: DEF | BE,
        strict: false,
        parse: kw_server_state_file_name,
    },
    ProxyKw {
        kw: "monitor-uri",
        caps: DEF | FE,
        strict: false,
        parse: kw_monitor_uri,
    },
];

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map_or("", String::as_str)
}

/// `description <text>…`: the words joined with spaces (stats page, `show info`-style dumps).
fn kw_description(p: &mut P, args: &[String]) {
    match super::values::joined_words(args) {
        Some(d) => p.px.extra.description = Some(d),
        None => p.alert("'description' expects a string argument."),
    }
}

/// `monitor-uri <uri>`: requests for exactly this URI are answered by the proxy itself.
fn kw_monitor_uri(p: &mut P, args: &[String]) {
    if p.c.too_many(args, 1, 1) {
        return;
    }
    let uri = arg(args, 1);
    if uri.is_empty() {
        p.alert("'monitor-uri' expects an URI.");
        return;
    }
    p.px.extra.monitor_uri = Some(uri.to_string());
}

/// `monitor fail if|unless <cond>`.
fn kw_monitor(p: &mut P, args: &[String]) {
    if arg(args, 1) != "fail" {
        p.alert("'monitor' expects 'fail'.");
        return;
    }
    if !matches!(arg(args, 2), "if" | "unless") || arg(args, 3).is_empty() {
        p.alert("'monitor fail' expects either 'if' or 'unless' followed by a condition.");
        return;
    }
    p.pending("monitor fail");
}

/// `load-server-state-from-file global|local|none`: servers start from the state a previous
/// process saved with `show servers state` (`model::state_file`).
fn kw_load_server_state(p: &mut P, args: &[String]) {
    let how = match arg(args, 1) {
        "none" => LoadServerState::None,
        "global" => LoadServerState::Global,
        "local" => LoadServerState::Local,
        _ => {
            return p.alert(format!(
                "'{}' expects 'global', 'local' or 'none'. Got '{}'",
                arg(args, 0),
                arg(args, 1)
            ));
        }
    };
    p.px.extra.load_server_state = Some(how);
}

/// `server-state-file-name [use-backend-name|<file>]`: the file `load-server-state-from-file
/// local` reads (relative to `server-state-base`); none or `use-backend-name` is the section's
/// name, as HAProxy.
fn kw_server_state_file_name(p: &mut P, args: &[String]) {
    if p.c.too_many(args, 1, 1) {
        return;
    }
    let name = match arg(args, 1) {
        "" | "use-backend-name" => p.px.name.clone(),
        f => f.to_string(),
    };
    p.px.extra.server_state_file_name = Some(name);
}
