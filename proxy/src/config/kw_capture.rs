//! `capture request|response header`, `declare capture` and the capture slots that
//! `http-request|tcp-request content capture … len` add: one ordered list of slots per
//! direction, numbered as HAProxy numbers them (declaration order).

use super::kw_proxy::P;
use super::model::CaptureSlot;
use super::values::parse_u32;

fn arg(args: &[String], i: usize) -> &str {
    args.get(i).map_or("", String::as_str)
}

/// HAProxy reads the length with `atol`: digits up to the first other character, else 0.
fn atol(s: &str) -> usize {
    let digits: String = s.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or(0)
}

pub(crate) fn kw_capture(p: &mut P, args: &[String]) {
    match (arg(args, 1), arg(args, 2)) {
        (dir @ ("request" | "response"), "header") => {
            if args.len() < 6 || arg(args, 4) != "len" {
                p.alert(format!(
                    "'capture {dir}' expects 'header' <header_name> 'len' <len>."
                ));
                return;
            }
            let slot = CaptureSlot {
                header: Some(arg(args, 3).to_string()),
                len: atol(arg(args, 5)),
            };
            if dir == "request" {
                p.px.captures.req.push(slot);
            } else {
                p.px.captures.res.push(slot);
            }
        }
        ("cookie", _) => {
            // HAProxy checks only that a length is there (`atol`, `len` itself not read).
            if arg(args, 4).is_empty() {
                p.alert("'capture' expects 'cookie' <cookie_name> 'len' <len>.");
                return;
            }
            p.px.extra.capture_cookie = Some((arg(args, 2).to_string(), atol(arg(args, 4))));
        }
        _ => p.alert("'capture' expects 'cookie' or 'request header' or 'response header'."),
    }
}

/// `declare capture request|response len <n>`: a slot that `… capture <sample> id <n>` rules
/// fill.
pub(crate) fn kw_declare(p: &mut P, args: &[String]) {
    if arg(args, 1) != "capture" {
        p.alert(format!(
            "unknown keyword 'declare {}' in '{}' section",
            arg(args, 1),
            p.section()
        ));
        return;
    }
    let dir = arg(args, 2);
    if dir != "request" && dir != "response" {
        p.alert("'declare capture' requires a direction ('request' or 'response')");
        return;
    }
    if arg(args, 3) != "len" {
        p.alert("'declare capture' requires a capture length ('len')");
        return;
    }
    let Some(len) = parse_u32(arg(args, 4)).filter(|n| *n > 0) else {
        p.alert("length must be > 0");
        return;
    };
    let slot = CaptureSlot {
        header: None,
        len: len as usize,
    };
    if dir == "request" {
        p.px.captures.req.push(slot);
    } else {
        p.px.captures.res.push(slot);
    }
}

/// `<sample> len <n>` (a new request slot; frontends only) or `<sample> id <n>` after
/// `http-request|http-response capture`: the slot index and the sample text.
pub(crate) fn capture_rule(
    p: &mut P,
    args: &[String],
    at: usize,
    response: bool,
) -> Result<(String, usize, usize), String> {
    let usage = if response {
        "expects <expression> id <idx>."
    } else {
        "expects <expression> [ 'len' <length> | id <idx> ]."
    };
    let sample = arg(args, at);
    if sample.is_empty() || !matches!(arg(args, at + 1), "len" | "id") {
        return Err(usage.into());
    }
    crate::ana::sample::parse_sample(sample).map_err(|e| format!("{e}."))?;
    let n = parse_u32(arg(args, at + 2));
    match arg(args, at + 1) {
        "len" if !response => {
            let Some(len) = n.filter(|n| *n > 0) else {
                return Err("length must be > 0.".into());
            };
            // A defaults section declares the slot for the frontends that use it (2.5+).
            if p.px.kind() == "backend" {
                return Err(format!("proxy '{}' has no frontend capability.", p.px.name));
            }
            p.px.captures.req.push(CaptureSlot {
                header: None,
                len: len as usize,
            });
            Ok((
                sample.to_string(),
                p.px.captures.req.len() - 1,
                len as usize,
            ))
        }
        "id" => {
            let Some(id) = n else {
                return Err(usage.into());
            };
            Ok((sample.to_string(), id as usize, 0))
        }
        _ => Err(usage.into()),
    }
}
