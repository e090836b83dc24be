//! `compression algo <name>…|type <mime>…|offload`, with HAProxy 2.6's words
//! (`parse_compression_options` in its flt_http_comp.c). What the settings do is `http/comp.rs`.

use super::kw_proxy::P;
use super::model::{CompAlgo, CompCfg};

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map_or("", String::as_str)
}

/// `compression …`: a line adds to what the proxy has (its own earlier lines and `defaults`').
pub(crate) fn kw_compression(p: &mut P, args: &[String]) {
    let kw = arg(args, 0).to_string();
    let words = args.get(2..).unwrap_or_default();
    match arg(args, 1) {
        "algo" => {
            if words.is_empty() {
                // HAProxy writes the location into this message and its caller adds it again.
                let loc = p.c.loc.clone();
                p.alert(format!(
                    "parsing [{}:{}] : '{kw}' expects <algorithm>.",
                    loc.file, loc.line
                ));
                return;
            }
            for w in words {
                let Some(a) = CompAlgo::from_cfg(w) else {
                    p.alert(format!("'{kw}' : '{w}' is not a supported algorithm."));
                    return;
                };
                comp(p).algos.insert(0, a);
            }
        }
        "type" => {
            if words.is_empty() {
                p.alert(format!("'{kw}' expects <type>."));
                return;
            }
            for w in words {
                comp(p).types.insert(0, w.clone());
            }
        }
        "offload" => {
            // HAProxy sets it in `defaults` too, but no proxy copies it from there.
            if p.defaults {
                p.warn(format!("'{kw}' : 'offload' ignored in 'defaults' section."));
                comp(p);
            } else {
                comp(p).offload = true;
            }
        }
        _ => p.alert(format!("'{kw}' expects 'algo', 'type' or 'offload'")),
    }
}

/// The proxy's settings, created by its first `compression` line (even one that then fails,
/// as HAProxy allocates them first).
fn comp<'a>(p: &'a mut P) -> &'a mut CompCfg {
    p.px.extra.compression.get_or_insert_with(CompCfg::default)
}

/// The filters HAProxy 2.6 (Debian's build) registers, as its unknown-filter error lists them.
const FILTERS: [(&str, &str); 6] = [
    ("CACHE", "cache"),
    ("COMP", "compression"),
    ("FCGI", "fcgi-app"),
    ("  OT", "opentracing"),
    ("SPOE", "spoe"),
    ("TRACE", "trace"),
];

/// `filter <name> [args…]`: `compression` is HAProxy's compression filter (what `compression`
/// lines configure; at most one per proxy); the other filters HAProxy knows are parsed by
/// name and refused at start (not built); an unknown one gets HAProxy's list.
pub(crate) fn kw_filter(p: &mut P, args: &[String]) {
    let loc = p.c.loc.clone();
    let at = format!("parsing [{}:{}] :", loc.file, loc.line);
    if p.defaults {
        p.alert(format!(
            "{at} filter is not allowed in a 'default' section."
        ));
        return;
    }
    let name = arg(args, 1);
    if name.is_empty() {
        let d = p.desc();
        p.alert(format!("{at} missing argument for 'filter' in {d}."));
        return;
    }
    if !FILTERS.iter().any(|(_, n)| *n == name) {
        let list: String = FILTERS
            .iter()
            .map(|(m, n)| format!("\n    [{m}] {n}"))
            .collect();
        p.alert(format!(
            "'filter' : unknown keyword '{name}'. Registered keywords :{list}"
        ));
        return;
    }
    if name == "compression" {
        if p.px.extra.filters.iter().any(|f| f == "compression") {
            let id = p.px.name.clone();
            p.alert(format!(
                "'filter' : '{id}: Proxy supports only one compression filter\n'"
            ));
            return;
        }
        if let Some(w) = args.get(2) {
            p.alert(format!("'filter compression' : unknown keyword '{w}'."));
            return;
        }
    } else {
        p.pending(&format!("filter {name}"));
    }
    p.px.extra.filters.push(name.to_string());
}

/// HAProxy's post-parse check (`check_implicit_http_comp_flt`): `compression` lines in a proxy
/// whose filters (other than `fcgi-app`) do not include `compression` need one.
pub(crate) fn implicit_filter_error(px: &super::model::Proxy) -> Option<String> {
    let f = &px.extra.filters;
    let explicit = f.iter().any(|n| n != "compression" && n != "fcgi-app");
    (px.extra.compression.is_some() && explicit && !f.iter().any(|n| n == "compression")).then(
        || {
            format!(
                "config: {} '{}': require an explicit filter declaration to use HTTP compression",
                px.kind(),
                px.name
            )
        },
    )
}
