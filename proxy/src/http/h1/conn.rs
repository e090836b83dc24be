//! Connection management: the `Connection` token list, persistence, upgrades, hop-by-hop fields.

use super::{is_token, list_elements};
use crate::http::head::{Headers, RequestHead, Version};

/// True if a `Connection` field lists `token` (ASCII case-insensitive).
pub fn connection_has_token(headers: &Headers, token: &str) -> bool {
    // This runs several times on both heads of every request: a value that is the token
    // alone (the usual `close`, `keep-alive`) is told without splitting it, and a value no
    // longer than the token holds it only that way.
    let token = token.as_bytes();
    headers.get_all("connection").any(|v| {
        v.eq_ignore_ascii_case(token)
            || (v.len() > token.len() && list_elements(v).any(|t| t.eq_ignore_ascii_case(token)))
    })
}

/// Whether the connection must close after this message (RFC 9112 §9.3): HTTP/1.0 without
/// `keep-alive`, or any `close` token.
pub fn wants_close(version: Version, headers: &Headers) -> bool {
    connection_has_token(headers, "close")
        || (version == Version::Http10 && !connection_has_token(headers, "keep-alive"))
}

fn upgrade_protocols(headers: &Headers) -> impl Iterator<Item = &[u8]> {
    headers
        .get_all("upgrade")
        .flat_map(list_elements)
        .filter(|p| !p.is_empty())
}

/// Protocol name of an Upgrade element (`websocket` in `websocket/13`).
fn protocol_name(p: &[u8]) -> &[u8] {
    p.split(|&b| b == b'/').next().unwrap_or_default()
}

/// An HTTP/1.1 request asking to switch protocols: `Connection: upgrade` plus a non-empty
/// `Upgrade` (RFC 9110 §7.8; an HTTP/1.0 Upgrade is ignored). Only a 101 answer turns the
/// connection into a tunnel.
pub fn is_upgrade(head: &RequestHead) -> bool {
    head.version == Version::Http11
        && connection_has_token(&head.headers, "upgrade")
        && upgrade_protocols(&head.headers).next().is_some()
}

/// `Connection: upgrade` with `websocket` among the Upgrade protocols, in any version (HAProxy
/// validates the key of such requests even in HTTP/1.0).
pub fn is_websocket_upgrade(head: &RequestHead) -> bool {
    connection_has_token(&head.headers, "upgrade")
        && upgrade_protocols(&head.headers)
            .any(|p| protocol_name(p).eq_ignore_ascii_case(b"websocket"))
}

/// RFC 6455 §4.2.2: the `Sec-WebSocket-Accept` a server owes a key.
pub fn websocket_accept(key: &[u8]) -> String {
    use base64::Engine;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    ctx.update(key.trim_ascii());
    ctx.update(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    base64::engine::general_purpose::STANDARD.encode(ctx.finish())
}

/// Whether a 101 answers a WebSocket upgrade properly: when the request carried a
/// `Sec-WebSocket-Key`, the response must carry its accept value (HAProxy's H1 mux refuses the
/// response otherwise, a 502).
pub fn websocket_accept_ok(req: &Headers, resp: &Headers) -> bool {
    let Some(key) = req.get_first("sec-websocket-key") else {
        return true;
    };
    resp.get_first("sec-websocket-accept")
        .is_some_and(|a| a.trim_ascii() == websocket_accept(key).as_bytes())
}

pub(crate) fn is_h2_upgrade_token(p: &[u8]) -> bool {
    let name = protocol_name(p);
    name.eq_ignore_ascii_case(b"h2c") || name.eq_ignore_ascii_case(b"h2")
}

/// Keeps, in every `name` field, the list elements for which `keep` is true. A field is left
/// byte-for-byte alone when nothing is dropped, rewritten as `a, b` otherwise, and removed when
/// nothing remains. Returns whether anything was dropped.
pub(crate) fn retain_list_elements(
    headers: &mut Headers,
    name: &str,
    mut keep: impl FnMut(&[u8]) -> bool,
) -> bool {
    let mut changed = false;
    headers.0.retain_mut(|h| {
        if !h.name.eq_ignore_ascii_case(name) {
            return true;
        }
        let elems: Vec<&[u8]> = list_elements(&h.value).filter(|e| !e.is_empty()).collect();
        let kept: Vec<&[u8]> = elems.iter().copied().filter(|e| keep(e)).collect();
        if kept.len() == elems.len() {
            return true;
        }
        changed = true;
        if kept.is_empty() {
            return false;
        }
        let new = kept.join(&b", "[..]);
        h.value = new.into();
        true
    });
    changed
}

/// Fields that a `Connection` token must never remove: dropping them would change framing or
/// routing between what the proxy checked and what the server sees.
const PROTECTED: [&str; 3] = ["content-length", "transfer-encoding", "host"];

/// Removes hop-by-hop fields before forwarding (RFC 9110 §7.6.1): `Connection` and the fields
/// it names, `Keep-Alive`, `Proxy-Connection`, and `Upgrade`. When the message carries an
/// upgrade (`Connection: upgrade` and an `Upgrade` field, after [`super::normalize_request`]
/// dropped the ones we refuse to forward), `Upgrade` is kept and `Connection` is reduced to its
/// `upgrade` token, as spelled. Call [`wants_close`] / [`is_upgrade`] first: this erases what
/// they read. HAProxy 2.6 itself only strips `close`/`keep-alive` ([`strip_close_keepalive`]).
pub fn remove_hop_by_hop(headers: &mut Headers) {
    // Most messages carry none of these fields, or `Connection: close` or `keep-alive` alone
    // (naming no field but a `Close` one, if any) and no upgrade: one pass over the names (by
    // their length first) tells, and marks the fields found by their index.
    let (mut any, mut upgrade_field) = (false, false);
    let mut simple = headers.0.len() <= 64;
    let mut found: u64 = 0;
    for (i, h) in headers.0.iter().enumerate() {
        match hop_field(&h.name) {
            Some(Hop::Upgrade) => (any, upgrade_field, simple) = (true, true, false),
            Some(hop) => {
                any = true;
                found |= 1u64.checked_shl(i as u32).unwrap_or(0);
                if matches!(hop, Hop::Connection) {
                    let v = h.value.as_slice();
                    simple &=
                        v.eq_ignore_ascii_case(b"close") || v.eq_ignore_ascii_case(b"keep-alive");
                }
            }
            None => simple &= !h.name.eq_ignore_ascii_case("close"),
        }
    }
    if !any {
        return;
    }
    if simple {
        let mut i = 0;
        headers.0.retain(|_| {
            let hop = found & (1 << i) != 0;
            i += 1;
            !hop
        });
        return;
    }
    let upgrading = upgrade_field
        && connection_has_token(headers, "upgrade")
        && upgrade_protocols(headers).next().is_some();
    // The fields `Connection` names (the usual cases took the path above).
    let mut named: Vec<String> = Vec::new();
    for t in headers.get_all("connection").flat_map(list_elements) {
        if t.eq_ignore_ascii_case(b"keep-alive") || !is_token(t) {
            continue;
        }
        let t = String::from_utf8_lossy(t).to_ascii_lowercase();
        if !PROTECTED.contains(&t.as_str()) && t != "upgrade" && t != "connection" {
            named.push(t);
        }
    }
    headers.0.retain(|h| match hop_field(&h.name) {
        Some(Hop::KeepAlive | Hop::ProxyConnection) => false,
        // Reduced to its `upgrade` token below.
        Some(Hop::Upgrade | Hop::Connection) => upgrading,
        None => !named.iter().any(|t| h.name.eq_ignore_ascii_case(t)),
    });
    if upgrading {
        retain_list_elements(headers, "connection", |t| {
            t.eq_ignore_ascii_case(b"upgrade")
        });
    }
}

/// The hop-by-hop fields [`remove_hop_by_hop`] knows by name.
#[derive(Clone, Copy)]
enum Hop {
    Connection,
    KeepAlive,
    ProxyConnection,
    Upgrade,
}

/// Which hop-by-hop field `n` names, if any: by length first, as most names are none.
fn hop_field(n: &str) -> Option<Hop> {
    let is = |s: &str| n.eq_ignore_ascii_case(s);
    match n.len() {
        7 if is("upgrade") => Some(Hop::Upgrade),
        10 if is("connection") => Some(Hop::Connection),
        10 if is("keep-alive") => Some(Hop::KeepAlive),
        16 if is("proxy-connection") => Some(Hop::ProxyConnection),
        _ => None,
    }
}

/// HAProxy 2.6's own treatment: drop the `close` and `keep-alive` tokens (the proxy decides
/// persistence per side and re-adds what the server needs); other tokens and fields stay.
pub fn strip_close_keepalive(headers: &mut Headers) {
    retain_list_elements(headers, "connection", |t| {
        !(t.eq_ignore_ascii_case(b"close") || t.eq_ignore_ascii_case(b"keep-alive"))
    });
    // An empty `Connection:` carries nothing either.
    headers.0.retain(|h| {
        !(h.name.eq_ignore_ascii_case("connection") && super::trim_ows(&h.value).is_empty())
    });
}

/// Says what persistence the next hop gets, as HAProxy does after [`strip_close_keepalive`]:
/// HTTP/1.1 is persistent unless `close` is sent, HTTP/1.0 only with `keep-alive`. The token is
/// appended to an existing `Connection` field (e.g. `upgrade`) or added as a new field.
pub fn set_connection_mode(version: Version, headers: &mut Headers, keep_alive: bool) {
    let token: &[u8] = match (version, keep_alive) {
        (Version::Http10, true) => b"keep-alive",
        (Version::Http11 | Version::Http2, false) => b"close",
        _ => return,
    };
    if connection_has_token(headers, std::str::from_utf8(token).unwrap_or_default()) {
        return;
    }
    match headers
        .0
        .iter_mut()
        .rfind(|h| h.name.eq_ignore_ascii_case("connection"))
    {
        Some(h) if !super::trim_ows(&h.value).is_empty() => {
            let v = h.value.make_vec();
            v.extend_from_slice(b", ");
            v.extend_from_slice(token);
        }
        Some(h) => h.value = token.into(),
        None => headers.append("Connection", token),
    }
}

/// The `TE` field as HAProxy's H1 mux sends it on: `trailers` alone when the value names it
/// (followed by nothing or a comma), otherwise the field is dropped (RFC 9110 §10.1.4: other
/// codings are hop-by-hop offers this hop cannot honour for the next).
pub fn restrict_te(headers: &mut Headers) {
    if !headers.contains("te") {
        return;
    }
    headers.0.retain_mut(|h| {
        if !h.name.eq_ignore_ascii_case("te") {
            return true;
        }
        let v = h.value.as_slice();
        let Some(i) = v.windows(8).position(|w| w == b"trailers") else {
            return false;
        };
        if v.get(i + 8).is_some_and(|&c| c != b',') {
            return false;
        }
        h.value = b"trailers".into();
        true
    });
}

#[cfg(test)]
mod websocket_tests {
    use super::*;

    #[test]
    fn accept_value_of_rfc_6455() {
        // The example of RFC 6455 §1.3.
        assert_eq!(
            websocket_accept(b"dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        let mut req = Headers::default();
        let mut resp = Headers::default();
        assert!(websocket_accept_ok(&req, &resp), "no key, nothing to check");
        req.append("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==");
        assert!(!websocket_accept_ok(&req, &resp));
        resp.append("sec-websocket-accept", "wrong");
        assert!(!websocket_accept_ok(&req, &resp));
        resp.set("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert!(websocket_accept_ok(&req, &resp));
    }
}
