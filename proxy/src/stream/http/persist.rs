//! Cookie-based persistence in the stream (`cookie` keyword; the header work is the pure
//! `http::cookie`): the request's cookie names the server the exchange tries first, the
//! response gets its `Set-Cookie` handled, the log its `%tsc` cookie characters.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::Txn;
use crate::http::cookie::{self, Candidate, Flags};
use crate::http::head::ResponseHead;
use crate::model::{Proxy, Server};

/// `capture cookie` of the frontend `fe`, on the request as the rules left it (`%CC`).
pub(super) fn capture_request(tx: &mut Txn, fe: &Proxy) {
    if let Some((name, len)) = &fe.cfg.extra.capture_cookie
        && tx.log.cli_cookie.is_none()
    {
        tx.log.cli_cookie = cookie::capture(&tx.req.headers, false, name, *len);
    }
}

/// `capture cookie` on the server's response, before the persistence cookie's edits (`%CS`).
pub(super) fn capture_response(tx: &mut Txn, fe: &Proxy, head: &ResponseHead) {
    if let Some((name, len)) = &fe.cfg.extra.capture_cookie
        && head.status >= 200
    {
        tx.log.srv_cookie = cookie::capture(&head.headers, true, name, *len);
    }
}

/// Request side, once the rules chose `be`: the server the client's cookie names (kept in
/// `tx.persist`) and the `Cookie` headers edited as the mode says.
pub(super) fn request(tx: &mut Txn, be: &Proxy) {
    let Some(ck) = &be.cfg.extra.cookie else {
        return;
    };
    let pool = be.pool();
    // A server's address changed since its dynamic cookie was made: made again.
    let moved = |s: &Arc<Server>| {
        s.cookie_addr
            .load()
            .as_deref()
            .is_some_and(|a| *a != **s.addr.load())
    };
    if pool.servers.iter().any(moved) {
        be.set_dynamic_cookie(None, None);
    }
    let cookies: Vec<_> = pool.servers.iter().map(|s| s.cookie.load_full()).collect();
    let candidates: Vec<Candidate<'_>> = pool
        .servers
        .iter()
        .zip(&cookies)
        .map(|(s, c)| Candidate {
            cookie: c.as_deref().map(String::as_str),
            running: s.usable.load(Ordering::Acquire),
        })
        .collect();
    let mut flags = Flags::default();
    let cx = cookie::ReqCtx {
        ck,
        servers: &candidates,
        persist: be.cfg.options.persist || tx.persist_rule == Some(true),
        ignore: tx.persist_rule == Some(false),
        now: unix_secs(),
    };
    let idx = cookie::client_side(&cx, &mut tx.req.headers, &mut flags);
    tx.persist = idx.and_then(|i| pool.servers.get(i).cloned());
    if ck.any() {
        tx.log.cookie = Some(flags);
    }
}

/// Response side: the server's `Set-Cookie` and the insertion, after the `http-response`
/// rules as HAProxy's `http_process_res_common` (not for interim responses).
pub(super) fn response(tx: &mut Txn, be: &Proxy, srv: &Arc<Server>, head: &mut ResponseHead) {
    let Some(ck) = &be.cfg.extra.cookie else {
        return;
    };
    if head.status < 200 && head.status != 101 {
        return;
    }
    let direct = tx.persist.as_ref().is_some_and(|p| Arc::ptr_eq(p, srv));
    let mut flags = tx.log.cookie.unwrap_or_default();
    // Redispatched away from the cookie's server: HAProxy logs the cookie as naming a down one.
    if tx.persist.is_some() && !direct && flags.client == b'V' {
        flags.client = b'D';
    }
    let rx = cookie::ResCtx {
        direct,
        ignore: tx.persist_rule == Some(false),
        post: tx.req.method == "POST",
        cacheable: ck.nocache && cookie::cacheable(&tx.req, head.status, &head.headers),
        now: unix_secs(),
    };
    let sc = srv.cookie.load_full();
    let sc = sc.as_deref().map(String::as_str);
    cookie::server_side(ck, &mut head.headers, sc, &rx, &mut flags);
    if ck.any() {
        tx.log.cookie = Some(flags);
    }
}

/// HAProxy's `date.tv_sec`: the cookie dates count seconds since the epoch.
fn unix_secs() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as u32)
}
