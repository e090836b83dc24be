//! `add server` and `del server`: servers created and removed at run time, with HAProxy 2.6's
//! replies. Some of them have no final LF (HAProxy's own strings lack it), so the reply is a
//! single line instead of a line and an empty one; that is kept byte for byte.

use crate::cli::{Runtime, SrvRef};
use crate::model::Snapshot;
use crate::reply::Reply;

/// `add server <backend>/<server> <addr>[:<port>] [<keyword> [<value>]]*`. The grammar of the
/// address and keywords is the proxy's (its `server` line parser); this checks the target.
pub(crate) fn add_server(args: &[String], rt: &mut dyn Runtime, out: &mut Reply) {
    let target = args.get(2).map_or("", String::as_str);
    let Some((b, s)) = target
        .split_once('/')
        .filter(|(b, s)| !b.is_empty() && !s.is_empty())
    else {
        out.err("Require 'backend/server'.");
        return;
    };
    let snap = rt.snapshot();
    let Some(bi) = snap.find_backend(b) else {
        out.err("No such backend.");
        return;
    };
    let dynamic = snap
        .proxies
        .get(bi)
        .and_then(|p| p.backend.as_ref())
        .is_some_and(|be| be.dynamic_servers);
    if !dynamic {
        out.err("Backend must use a dynamic load balancing to support dynamic servers.");
        return;
    }
    let Some(addr) = args.get(3).filter(|a| !a.is_empty()) else {
        out.err("'server' expects <name> and <addr>[:<port>] as arguments.\n");
        return;
    };
    match rt.add_server(bi, s, addr, args.get(4..).unwrap_or(&[])) {
        Ok(()) => out.info("New server registered.\n"),
        Err(e) => {
            out.err(&e);
            out.push('\n');
        }
    }
}

/// `del server <backend>/<server>`: only a server in maintenance with no connection left.
pub(crate) fn del_server(args: &[String], rt: &mut dyn Runtime, out: &mut Reply) {
    let snap = rt.snapshot();
    let Some(r) = find(&snap, args.get(2).map_or("", String::as_str), out) else {
        return;
    };
    let Some(sv) = snap
        .proxies
        .get(r.proxy)
        .and_then(|p| p.servers.get(r.server))
    else {
        return;
    };
    if !sv.admin.maint() {
        out.err("Only servers in maintenance mode can be deleted.");
    } else if sv.counters.scur > 0 || sv.counters.qcur > 0 {
        out.err("Server still has connections attached to it, cannot remove it.");
    } else {
        rt.del_server(r);
        out.info("Server deleted.");
    }
}

/// `<backend>/<server>` as `del server` resolves it (its messages have no LF).
fn find(snap: &Snapshot, arg: &str, out: &mut Reply) -> Option<SrvRef> {
    let Some((b, s)) = arg
        .split_once('/')
        .filter(|(b, s)| !b.is_empty() && !s.is_empty())
    else {
        out.err("Require 'backend/server'.");
        return None;
    };
    let Some((pi, px)) = snap
        .find_backend(b)
        .and_then(|i| snap.proxies.get(i).map(|p| (i, p)))
    else {
        out.err("No such backend.");
        return None;
    };
    let Some((si, sv)) = px
        .find_server(s)
        .and_then(|i| px.servers.get(i).map(|v| (i, v)))
    else {
        out.err("No such server.");
        return None;
    };
    Some(SrvRef {
        proxy: pi,
        server: si,
        proxy_id: px.id,
        server_id: sv.id,
    })
}
