//! `set maxconn frontend|global`, `set rate-limit` and the frontend lookup of `enable|disable|
//! shutdown frontend`, with HAProxy 2.6's replies.

use crate::cli::{Runtime, UNSUPPORTED_REPLY, strtol};
use crate::model::Snapshot;
use crate::reply::Reply;

/// C `atoi`, as these commands read their value (garbage reads as 0).
fn atoi(s: &str) -> i64 {
    strtol(s).0
}

/// A frontend by name or `#<id>`, with HAProxy's messages (`enable|disable|shutdown frontend`,
/// `set maxconn frontend`).
pub(crate) fn find_frontend(snap: &Snapshot, name: &str, out: &mut Reply) -> Option<usize> {
    if name.is_empty() {
        out.err("A frontend name is expected.\n");
        return None;
    }
    let found = snap.proxies.iter().position(|p| {
        p.frontend.is_some()
            && match name.strip_prefix('#') {
                Some(id) => id.parse::<u32>().ok() == Some(p.id),
                None => p.name == name,
            }
    });
    if found.is_none() {
        out.err("No such frontend.\n");
    }
    found
}

pub(crate) fn set_maxconn_frontend(args: &[String], rt: &mut dyn Runtime, out: &mut Reply) {
    let snap = rt.snapshot();
    let name = args.get(3).map_or("", String::as_str);
    let Some(pi) = find_frontend(&snap, name, out) else {
        return;
    };
    let Some(v) = args.get(4).filter(|a| !a.is_empty()) else {
        out.err("Integer value expected.\n");
        return;
    };
    match u32::try_from(atoi(v)) {
        Ok(n) => rt.set_maxconn_frontend(pi, n),
        Err(_) => out.err("Value out of range.\n"),
    }
}

pub(crate) fn set_maxconn_global(args: &[String], rt: &mut dyn Runtime, out: &mut Reply) {
    let Some(v) = args.get(3).filter(|a| !a.is_empty()) else {
        out.err("Expects an integer value.\n");
        return;
    };
    let hard = i64::from(rt.snapshot().info.hard_maxconn);
    let v = atoi(v);
    if v > hard {
        out.err("Value out of range.\n");
        return;
    }
    // 0 (or a value that is no number) restores the hard limit, as HAProxy does; HAProxy takes
    // a negative one silently (into its signed limit), read here as no limit below the hard one.
    let v = if v <= 0 { hard } else { v };
    rt.set_maxconn_global(u32::try_from(v).unwrap_or(u32::MAX));
}

const RATE_LIMIT_USAGE: &str = "'set rate-limit' only supports :\n   - 'connections global' to set the per-process maximum connection rate\n   - 'sessions global' to set the per-process maximum session rate\n   - 'ssl-sessions global' to set the per-process maximum SSL session rate\n   - 'http-compression global' to set the per-process maximum compression speed in kB/s\n";

/// `set rate-limit connections|sessions|ssl-sessions|http-compression global <n>`: HAProxy's
/// grammar, errors and value rules (C `atoi`, negative refused, compression in kB/s). portcullis
/// has no SSL session rate limit yet: a valid `ssl-sessions` setting says so instead of being
/// accepted and ignored.
pub(crate) fn set_rate_limit(args: &[String], rt: &mut dyn Runtime, out: &mut Reply) {
    let what = args.get(2).map_or("", String::as_str);
    let scope = args.get(3).map_or("", String::as_str);
    let kind = match what {
        "connections" => Some(RateLimit::Connections),
        "sessions" => Some(RateLimit::Sessions),
        "ssl-sessions" => None,
        "http-compression" => Some(RateLimit::HttpCompression),
        _ => {
            out.err(RATE_LIMIT_USAGE);
            return;
        }
    };
    if scope != "global" {
        out.err(RATE_LIMIT_USAGE);
        return;
    }
    let Some(v) = args.get(4).filter(|v| !v.is_empty()) else {
        out.err("Expects an integer value.\n");
        return;
    };
    let v = atoi(v);
    if v < 0 {
        out.err("Value out of range.\n");
        return;
    }
    let Some(kind) = kind else {
        out.err(UNSUPPORTED_REPLY);
        return;
    };
    let v = u32::try_from(v).unwrap_or(u32::MAX);
    // HAProxy stores the compression limit in bytes per second.
    let v = match kind {
        RateLimit::HttpCompression => v.saturating_mul(1024),
        _ => v,
    };
    rt.set_rate_limit(kind, v);
}

/// The process-wide rate limits `set rate-limit` changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateLimit {
    /// Connections per second (`ConnRateLimit`).
    Connections,
    /// Sessions per second (`SessRateLimit`).
    Sessions,
    /// Compressed bytes per second (`CompressBpsRateLim`).
    HttpCompression,
}
