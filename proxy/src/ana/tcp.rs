//! The `tcp-request` rule helpers a session runs: the sample context of a connection, the
//! `tcp-request connection` verdict at accept, and the backend a `mode tcp` session goes to.

use std::net::SocketAddr;
use std::sync::Arc;

use super::rules::apply_connection_rules;
use super::sample::SampleCtx;
use crate::config::model::TcpRequestAction;
use crate::model::{Model, Proxy};
use crate::stick::StkCtrs;

/// A connection's sample context: its addresses (0.0.0.0:0 when unknown, as for a unix socket)
/// and the frontend's name.
pub fn base_ctx(fe: &Proxy, src: Option<SocketAddr>, dst: Option<SocketAddr>) -> SampleCtx<'_> {
    let zero = || SocketAddr::from(([0, 0, 0, 0], 0));
    SampleCtx::new(src.unwrap_or_else(zero), dst.unwrap_or_else(zero), &fe.name)
}

/// The backend a frontend sends a session to (`use_backend` conditions evaluated on what is
/// known of a TCP session: addresses, the PROXY header received, the inspected bytes if any).
pub fn route(
    model: &Model,
    fe: &Arc<Proxy>,
    (src, dst): (Option<SocketAddr>, Option<SocketAddr>),
    proxied: Option<&crate::proxy_proto::Header>,
    payload: Option<&[u8]>,
) -> Option<Arc<Proxy>> {
    let ctx = SampleCtx {
        payload,
        proxied,
        ..base_ctx(fe, src, dst)
    };
    let idx = super::rules::route(&fe.rules, fe.index, fe.is_backend(), &ctx)?;
    model.proxies.get(idx).cloned()
}

/// Whether `tcp-request connection` rules refuse a just-accepted connection from `src` to
/// `dst`; `track-sc` rules track into `sess`, the session's counters.
pub fn connection_rejected(
    model: &Model,
    fe: &Proxy,
    addrs: (Option<SocketAddr>, Option<SocketAddr>),
    sess: &StkCtrs,
    now: u64,
) -> bool {
    connection_verdict(model, fe, addrs, sess, now).is_none()
}

/// The `tcp-request connection` verdict: None when refused, else whether an `expect-proxy
/// layer4` rule applied (the connection then starts with a PROXY protocol header).
pub fn connection_verdict(
    model: &Model,
    fe: &Proxy,
    (src, dst): (Option<SocketAddr>, Option<SocketAddr>),
    sess: &StkCtrs,
    now: u64,
) -> Option<bool> {
    if fe.rules.tcp_connection.is_empty() {
        return Some(false);
    }
    let mut ctx = base_ctx(fe, src, dst);
    ctx.stick = model.stick_view(fe, Some(sess), None, now);
    match apply_connection_rules(&fe.rules.tcp_connection, &ctx) {
        (Some(TcpRequestAction::Reject), _) => None,
        (_, expect) => Some(expect),
    }
}

/// What the `tcp-request session` rules decide for an established connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionVerdict {
    /// The session goes on (an `accept`, or no rule ended the evaluation).
    Accept,
    /// `reject`: counted in `dses`.
    Reject,
    /// `silent-drop`: counted in `dreq`, the client told nothing.
    SilentDrop,
}

/// The `tcp-request session` verdict on `ctx` (the connection's addresses after any PROXY
/// header, its TLS facts and the session's variables); `track-sc` rules track into `sess`.
pub fn session_verdict<'a>(
    model: &'a Model,
    fe: &'a Proxy,
    mut ctx: SampleCtx<'a>,
    sess: &'a StkCtrs,
    now: u64,
) -> SessionVerdict {
    if fe.rules.tcp_session.is_empty() {
        return SessionVerdict::Accept;
    }
    ctx.stick = model.stick_view(fe, Some(sess), None, now);
    match apply_connection_rules(&fe.rules.tcp_session, &ctx).0 {
        Some(TcpRequestAction::Reject) => SessionVerdict::Reject,
        Some(TcpRequestAction::SilentDrop) => SessionVerdict::SilentDrop,
        _ => SessionVerdict::Accept,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(text: &str) -> Model {
        let cfg = crate::config::parse_str("t.cfg", text, &|_| None)
            .expect("config")
            .config;
        Model::build(cfg, None).expect("model")
    }

    fn addr(s: &str) -> Option<SocketAddr> {
        s.parse().ok()
    }

    const CFG: &str = "defaults\n    mode tcp\n    timeout connect 1s\n    timeout client 1s\n    \
        timeout server 1s\nfrontend fe\n    bind 127.0.0.1:1\n    \
        tcp-request connection reject if { src 127.0.0.2 }\n    \
        use_backend local if { dst_port 1 }\n    default_backend other\n\
        backend local\n    server s 127.0.0.1:9\nbackend other\n    server s 127.0.0.1:9\n";

    #[test]
    fn connection_rules_see_the_source_address() {
        let m = model(CFG);
        let fe = m.proxy("fe").unwrap();
        let sess = StkCtrs::default();
        let dst = addr("127.0.0.1:1");
        let refused = |src| connection_rejected(&m, fe, (addr(src), dst), &sess, 0);
        assert!(refused("127.0.0.2:4000"));
        assert!(!refused("127.0.0.3:4000"));
        // Unknown addresses (a unix socket) are 0.0.0.0:0, which the rule does not match.
        assert!(!connection_rejected(&m, fe, (None, None), &sess, 0));
    }

    #[test]
    fn route_follows_use_backend_then_default_backend() {
        let m = model(CFG);
        let fe = m.proxy("fe").unwrap();
        let src = addr("127.0.0.3:4000");
        let be = |dst| route(&m, fe, (src, addr(dst)), None, None).map(|b| b.name.clone());
        assert_eq!(be("127.0.0.1:1").as_deref(), Some("local"));
        assert_eq!(be("127.0.0.1:2").as_deref(), Some("other"));
    }
}
