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
