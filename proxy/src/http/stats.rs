//! The applets HAProxy serves itself on an HTTP proxy: the statistics page (`stats enable`,
//! `stats uri`, `;csv`, `;json`, `stats auth`) and the Prometheus exporter
//! (`http-request use-service prometheus-exporter`). Builds the whole response (head as HAProxy
//! 2.6 sends it, one-chunk chunked body) from a snapshot of the live model; the session sends it.

use portcullis_runtime_api::html::{self, HtmlOpts, StatsFormat, StatsRequest};
use portcullis_runtime_api::{prom, stat};

use crate::config::model::StatsPage;
use crate::http::errors::{self, ConnHeader};
use crate::http::head::RequestHead;
use crate::model::Model;

/// HAProxy's `stats uri` default.
pub const DEFAULT_URI: &str = "/haproxy?stats";
/// HAProxy's `stats realm` default.
pub const DEFAULT_REALM: &str = "HAProxy Statistics";

/// A locally produced answer and what the log line says about it.
pub struct Applet {
    /// Status sent (and counted in `hrsp_*`).
    pub status: u16,
    /// Status logged: HAProxy 2.6 logs its `stats auth` challenge as 400 with Tr = -1.
    pub log_status: u16,
    /// `<STATS>` or `<PROMEX>` in the server field.
    pub server: &'static str,
    pub bytes: Vec<u8>,
    /// The applet answered (Tr is its time); false for the auth challenge.
    pub served: bool,
}

/// The `stats uri` rule: the request target starts with the prefix.
pub fn matches(page: &StatsPage, req: &RequestHead) -> bool {
    page.enable
        && req
            .target
            .starts_with(page.uri.as_deref().unwrap_or(DEFAULT_URI))
}

/// Worker threads as the engine counts them (for `nbthread` in the page).
fn threads(model: &Model) -> usize {
    model
        .cfg
        .global
        .nbthread
        .map(|n| n as usize)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .max(1)
}

fn chunked(status: u16, heads: &[(&str, &str)], body: &[u8], conn: ConnHeader) -> Vec<u8> {
    let mut out = format!("HTTP/1.1 {status} {}\r\n", errors::reason(status)).into_bytes();
    for (k, v) in heads {
        out.extend_from_slice(format!("{k}: {v}\r\n").as_bytes());
    }
    out.extend_from_slice(b"transfer-encoding: chunked\r\n\r\n");
    let mut resp = errors::with_connection(&out, conn);
    if !body.is_empty() {
        resp.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
        resp.extend_from_slice(body);
        resp.extend_from_slice(b"\r\n");
    }
    resp.extend_from_slice(b"0\r\n\r\n");
    resp
}

/// `Authorization: Basic …` checked against the `stats auth` accounts.
fn authorized(page: &StatsPage, req: &RequestHead) -> bool {
    if page.auth.is_empty() {
        return true;
    }
    let Some(v) = req.headers.get_last("authorization") else {
        return false;
    };
    let v = String::from_utf8_lossy(v);
    let mut it = v.trim().splitn(2, ' ');
    let (Some(scheme), Some(cred)) = (it.next(), it.next()) else {
        return false;
    };
    if !scheme.eq_ignore_ascii_case("basic") {
        return false;
    }
    let Some(plain) = base64_decode(cred.trim()) else {
        return false;
    };
    let plain = String::from_utf8_lossy(&plain);
    let Some((user, pass)) = plain.split_once(':') else {
        return false;
    };
    page.auth.iter().any(|(u, p)| u == user && p == pass)
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim_end_matches('=').as_bytes();
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0u32);
    for &c in s {
        acc = (acc << 6) | val(c)?;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

const UNAUTHORIZED_BODY: &str = "<html><body><h1>401 Unauthorized</h1>\nYou need a valid user and password to access this content.\n</body></html>\n";

/// The stats applet's answer to `req` (which [`matches`] the page).
pub fn stats_reply(
    model: &Model,
    stopping: bool,
    page: &StatsPage,
    req: &RequestHead,
    conn: ConnHeader,
) -> Applet {
    if !authorized(page, req) {
        let realm = page.realm.as_deref().unwrap_or(DEFAULT_REALM);
        let mut head = format!(
            "HTTP/1.1 401 Unauthorized\r\ncontent-length: {}\r\ncache-control: no-cache\r\ncontent-type: text/html\r\nwww-authenticate: Basic realm=\"{realm}\"\r\n\r\n",
            UNAUTHORIZED_BODY.len()
        )
        .into_bytes();
        head.extend_from_slice(UNAUTHORIZED_BODY.as_bytes());
        return Applet {
            status: 401,
            log_status: 400,
            server: "<STATS>",
            bytes: errors::with_connection(&head, conn),
            served: false,
        };
    }
    let uri = page.uri.as_deref().unwrap_or(DEFAULT_URI);
    let rest = req.target.get(uri.len()..).unwrap_or("");
    let r = StatsRequest::parse(rest);
    let snap = crate::admin::snapshot::take(model, threads(model), stopping);
    let mut body = String::new();
    let ctype = match r.format {
        StatsFormat::Html => {
            let o = HtmlOpts {
                uri: uri.to_string(),
                refresh: page.refresh.map_or(0, |d| d.as_secs() as u32),
                hide_version: page.hide_version,
                req: r.clone(),
            };
            html::render_html(&snap, &o, &mut body);
            "text/html"
        }
        StatsFormat::Csv => {
            stat::dump_stat(&snap, r.stat_opts(), &mut body);
            "text/plain"
        }
        StatsFormat::Json => {
            stat::dump_stat(&snap, r.stat_opts(), &mut body);
            "application/json"
        }
    };
    let refresh = page
        .refresh
        .map(|d| d.as_secs())
        .filter(|s| *s > 0 && !r.no_refresh)
        .map(|s| s.to_string());
    let mut heads = vec![("cache-control", "no-cache"), ("content-type", ctype)];
    if let Some(s) = refresh.as_deref() {
        heads.push(("refresh", s));
    }
    Applet {
        status: 200,
        log_status: 200,
        server: "<STATS>",
        bytes: chunked(200, &heads, body.as_bytes(), conn),
        served: true,
    }
}

/// The Prometheus exporter's answer.
pub fn prometheus_reply(model: &Model, stopping: bool, conn: ConnHeader) -> Applet {
    let snap = crate::admin::snapshot::take(model, threads(model), stopping);
    let mut body = String::new();
    prom::dump_prometheus(&snap, &mut body);
    let heads = [
        ("cache-control", "no-cache"),
        ("content-type", "text/plain; version=0.0.4"),
    ];
    Applet {
        status: 200,
        log_status: 200,
        server: "<PROMEX>",
        bytes: chunked(200, &heads, body.as_bytes(), conn),
        served: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_credentials_decode() {
        assert_eq!(base64_decode("YWRtaW46c2VjcmV0").unwrap(), b"admin:secret");
        assert_eq!(base64_decode("YQ==").unwrap(), b"a");
        assert!(base64_decode("!!").is_none());
    }

    #[test]
    fn chunked_reply_has_haproxy_head() {
        let r = chunked(
            200,
            &[
                ("cache-control", "no-cache"),
                ("content-type", "text/plain"),
            ],
            b"abc",
            ConnHeader::None,
        );
        assert_eq!(
            String::from_utf8(r).unwrap(),
            "HTTP/1.1 200 OK\r\ncache-control: no-cache\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        );
    }
}
