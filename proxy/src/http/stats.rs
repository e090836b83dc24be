//! The applets HAProxy serves itself on an HTTP proxy: the statistics page (`stats enable`,
//! `stats uri`, `;csv`, `;json`, `stats auth`) and the Prometheus exporter
//! (`http-request use-service prometheus-exporter`). Builds the whole response (head as HAProxy
//! 2.6 sends it, one-chunk chunked body) from a snapshot of the live model; the session sends it.

use portcullis_runtime_api::cli::{AdminOp, HealthOp, Runtime, SrvRef};
use portcullis_runtime_api::html::{
    self, HtmlOpts, PostAction, PostForm, StatStatus, StatsFormat, StatsRequest,
};
use portcullis_runtime_api::{prom, stat};

use crate::config::model::StatsPage;
use crate::http::errors::{self, ConnHeader, Page};
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
    pub page: Page,
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

/// Whether `be` serves its stats page at the request's URI with `stats http-request` rules to
/// pass first.
pub fn guarded(be: &crate::model::Proxy, req: &RequestHead) -> bool {
    !be.rules.stats_http_request.is_empty()
        && be.cfg.stats.as_ref().is_some_and(|p| matches(p, req))
}

/// A request that `stats http-request` rules refused: HAProxy has made the stats applet the
/// target already, so the line names `<STATS>` and the logged status is 400 whatever was sent
/// (as HAProxy 2.6.12 logs it); an `auth` challenge counts as intercepted, a `deny` not.
pub fn refused(log: &mut crate::log::SessionLog, fe: &crate::model::Proxy, denied: bool) {
    log.server = Some("<STATS>".into());
    log.status = Some(400);
    if !denied {
        crate::model::Counters::add(&fe.fe_counters.intercepted, 1);
    }
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

/// A page as HAProxy's applets send it: `heads`, then one chunk of `body` (its HTTP/1 form;
/// an HTTP/2 client gets the payload).
fn chunked(status: u16, heads: &[(&str, &str)], body: &[u8], conn: ConnHeader) -> Page {
    let mut page = Page::new(status, errors::reason(status));
    for (k, v) in heads {
        page.field(k, v.as_bytes());
    }
    page.field("transfer-encoding", b"chunked");
    page.set_connection(conn);
    let mut framed = Vec::with_capacity(body.len() + 16);
    if !body.is_empty() {
        framed.extend_from_slice(format!("{:x}\r\n", body.len()).as_bytes());
        framed.extend_from_slice(body);
        framed.extend_from_slice(b"\r\n");
    }
    framed.extend_from_slice(b"0\r\n\r\n");
    page.body = framed;
    page
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

/// The stats applet's answer to `req` (which [`matches`] the page). `admin`: `stats admin`
/// matched this request.
pub fn stats_reply(
    model: &Model,
    stopping: bool,
    page: &StatsPage,
    req: &RequestHead,
    admin: bool,
    conn: ConnHeader,
) -> Applet {
    if !authorized(page, req) {
        let realm = page.realm.as_deref().unwrap_or(DEFAULT_REALM);
        let mut page = Page::new(401, "Unauthorized");
        page.field(
            "content-length",
            UNAUTHORIZED_BODY.len().to_string().as_bytes(),
        );
        page.field("cache-control", b"no-cache");
        page.field("content-type", b"text/html");
        page.field(
            "www-authenticate",
            format!("Basic realm=\"{realm}\"").as_bytes(),
        );
        page.set_connection(conn);
        page.body = UNAUTHORIZED_BODY.as_bytes().to_vec();
        return Applet {
            status: 401,
            log_status: 400,
            server: "<STATS>",
            page,
            served: false,
        };
    }
    let uri = page.uri.as_deref().unwrap_or(DEFAULT_URI);
    let rest = req.target.get(uri.len()..).unwrap_or("");
    let r = StatsRequest::parse(rest);
    let mut snap = crate::admin::snapshot::take(model, threads(model), stopping);
    // `scope=` narrows the CSV and JSON dumps to the matching proxies too, as HAProxy's.
    if r.format != StatsFormat::Html {
        snap.proxies.retain(|p| r.scope_allows(&p.name));
    }
    let mut body = String::new();
    let ctype = match r.format {
        StatsFormat::Html => {
            let o = HtmlOpts {
                uri: uri.to_string(),
                refresh: page.refresh.map_or(0, |d| d.as_secs() as u32),
                hide_version: page.hide_version,
                req: r.clone(),
                admin,
                legends: page.show_legends,
                node: page.show_node.as_ref().map(|n| {
                    if n.is_empty() {
                        node_name(model)
                    } else {
                        n.clone()
                    }
                }),
                desc: page.show_desc.as_ref().map(|d| {
                    if d.is_empty() {
                        model
                            .cfg
                            .global
                            .process
                            .description
                            .clone()
                            .unwrap_or_default()
                    } else {
                        d.clone()
                    }
                }),
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
        page: chunked(200, &heads, body.as_bytes(), conn),
        served: true,
    }
}

/// The Prometheus exporter's answer.
pub fn prometheus_reply(model: &Model, stopping: bool, conn: ConnHeader) -> Applet {
    let snap = crate::admin::snapshot::take(model, threads(model), stopping);
    let mut body = String::new();
    prom::dump_prometheus(&snap, &mut body);
    if let Some(x) = crate::kernel::xdp::counters() {
        crate::kernel::xdp::dump_prometheus(&x, &mut body);
    }
    let heads = [
        ("cache-control", "no-cache"),
        ("content-type", "text/plain; version=0.0.4"),
    ];
    Applet {
        status: 200,
        log_status: 200,
        server: "<PROMEX>",
        page: chunked(200, &heads, body.as_bytes(), conn),
        served: true,
    }
}

/// The answer to a POST on the stats page: the form applied (when `stats admin` allows it), then
/// HAProxy's 303 back to the page with the outcome in `;st=<code>`. `body` is the request body,
/// or the status that refuses it (too large, chunked).
pub fn stats_post_reply(
    shared: &std::sync::Arc<crate::engine::Shared>,
    page: &StatsPage,
    req: &RequestHead,
    admin: bool,
    body: Result<&[u8], StatStatus>,
    conn: ConnHeader,
) -> Applet {
    if !authorized(page, req) {
        return stats_reply(&shared.model, false, page, req, admin, conn);
    }
    let st = if !admin {
        StatStatus::Deny
    } else {
        match body.and_then(PostForm::parse) {
            Ok(form) => apply_post(shared, &form),
            Err(st) => st,
        }
    };
    let uri = page.uri.as_deref().unwrap_or(DEFAULT_URI);
    let r = StatsRequest::parse(req.target.get(uri.len()..).unwrap_or(""));
    let mut location = format!("{uri};st={}", st.code());
    if r.hide_down {
        location.push_str(";up");
    }
    if r.no_refresh {
        location.push_str(";norefresh");
    }
    let mut page = Page::new(303, "See Other");
    page.field("cache-control", b"no-cache");
    page.field("content-type", b"text/plain");
    page.field("content-length", b"0");
    page.field("location", location.as_bytes());
    page.set_connection(conn);
    Applet {
        status: 303,
        log_status: 303,
        server: "<STATS>",
        page,
        served: true,
    }
}

/// Applies a stats page form as HAProxy 2.6 does, counting the servers named and those changed.
fn apply_post(shared: &std::sync::Arc<crate::engine::Shared>, f: &PostForm) -> StatStatus {
    let model = &shared.model;
    let (Some(b), Some(action)) = (f.backend.as_deref(), f.action) else {
        return StatStatus::None;
    };
    let be = model.proxies.iter().find(|p| {
        p.is_backend()
            && match b.strip_prefix('#') {
                Some(id) => id.parse::<u32>().ok() == Some(p.cfg.id),
                None => p.name == b,
            }
    });
    let Some(be) = be else {
        return StatStatus::Errp;
    };
    let mut rt = crate::admin::AdminRuntime {
        shared: std::sync::Arc::clone(shared),
        threads: threads(model),
    };
    let (mut total, mut altered) = (0, 0);
    for name in &f.servers {
        let pool = be.pool();
        let Some((si, srv)) = pool
            .servers
            .iter()
            .enumerate()
            .find(|(_, s)| &s.name == name)
        else {
            total += 1;
            continue;
        };
        let r = SrvRef {
            proxy: be.index,
            server: si,
            proxy_id: be.cfg.id,
            server_id: srv.id,
        };
        let admin = srv.admin();
        let checked = srv.check_spec.is_some();
        let applied = match action {
            PostAction::Ready => {
                rt.set_admin_state(r, AdminOp::Ready);
                true
            }
            PostAction::Drain => {
                rt.set_admin_state(r, AdminOp::Drain);
                true
            }
            PostAction::Maint => {
                rt.set_admin_state(r, AdminOp::Maint);
                true
            }
            PostAction::Disable if admin & crate::model::ADMIN_MAINT == 0 => {
                rt.set_admin_state(r, AdminOp::Maint);
                true
            }
            PostAction::Enable if admin & crate::model::ADMIN_MAINT != 0 => {
                rt.set_admin_state(r, AdminOp::Ready);
                true
            }
            PostAction::Stop if admin & crate::model::ADMIN_DRAIN == 0 => {
                rt.set_admin_state(r, AdminOp::Drain);
                true
            }
            PostAction::Start if admin & crate::model::ADMIN_DRAIN != 0 => {
                rt.set_admin_state(r, AdminOp::Ready);
                true
            }
            PostAction::DisableHealth if checked => {
                rt.set_check_enabled(r, false);
                true
            }
            PostAction::EnableHealth if checked => {
                rt.set_check_enabled(r, true);
                true
            }
            PostAction::HealthUp => {
                rt.set_health(r, HealthOp::Up);
                true
            }
            PostAction::HealthNolb => {
                rt.set_health(r, HealthOp::Stopping);
                true
            }
            PostAction::HealthDown => {
                rt.set_health(r, HealthOp::Down);
                true
            }
            PostAction::Shutdown => {
                rt.shutdown_sessions(r);
                true
            }
            // Agent checks are not configured on any server (not supported): nothing to change.
            _ => false,
        };
        if applied {
            total += 1;
            altered += 1;
        }
    }
    StatStatus::of_post(total, altered)
}

/// The global `node`, else the hostname (HAProxy's default for `node`).
fn node_name(model: &crate::model::Model) -> String {
    model.cfg.global.process.node.clone().unwrap_or_else(|| {
        nix::unistd::gethostname()
            .map(|h| h.to_string_lossy().into_owned())
            .unwrap_or_default()
    })
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
            String::from_utf8(r.wire()).unwrap(),
            "HTTP/1.1 200 OK\r\ncache-control: no-cache\r\ncontent-type: text/plain\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
        );
    }
}
