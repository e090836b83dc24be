//! `peers` sections (`peer`, `bind`/`server`, `default-bind`, `default-server`, `table`,
//! `disabled`/`enabled`, `log`) and, after the parse, the `stick-table … peers <section>` links
//! and the removal of sections without a local peer, in HAProxy 2.6's words
//! (`cfg_parse_peers` and the end of `check_config_validity`).

use super::addr;
use super::diag::{Diag, Severity};
use super::kw_server::{BARE, SrvState, apply};
use super::model::{Peer, PeersSection, Proxy, ServerOpts};
use super::parser::Ctx;
use super::suggest;
use super::values::invalid_name_char;

/// The keywords of a `peers` section (for the keyword index and `-dK`).
pub(crate) const PEERS_KWS: &[&str] = &[
    "bind",
    "default-bind",
    "default-server",
    "disabled",
    "enabled",
    "log",
    "peer",
    "server",
    "table",
];

/// What only matters while a `peers` section is being read (HAProxy's static `bind_line`,
/// `peer_line` and the section frontend's `default-server`).
#[derive(Default)]
pub(crate) struct Reading {
    bind_line: bool,
    peer_line: bool,
    /// Where the listener was declared (`One listener per "peers" section`).
    bind_at: Option<super::model::Loc>,
    default_server: ServerOpts,
}

/// `bind` options a peers listener takes; anything else is refused with HAProxy's words.
const BIND_KWS: &[&str] = &[
    "tfo",
    "v4v6",
    "v6only",
    "name",
    "id",
    "interface",
    "thread",
    "process",
    "transparent",
    "defer-accept",
    "maxconn",
    "backlog",
    "nice",
    "ssl",
    "crt",
    "ca-file",
    "verify",
    "alpn",
    "accept-proxy",
    "mss",
];

/// Bind options followed by a value.
const BIND_VALUED: &[&str] = &[
    "name",
    "id",
    "interface",
    "thread",
    "process",
    "maxconn",
    "backlog",
    "nice",
    "crt",
    "ca-file",
    "verify",
    "alpn",
    "mss",
];

/// `peers <name>`: the new section, or None (reported; the lines that follow are skipped).
pub(crate) fn open(
    ctx: &mut Ctx<'_>,
    words: &[String],
    all: &[PeersSection],
) -> Option<PeersSection> {
    // Both errors stop HAProxy's reading (ERR_ABORT).
    let Some(name) = words.get(1).filter(|n| !n.is_empty()) else {
        ctx.alert("missing name for peers section.");
        abort(ctx);
        return None;
    };
    if ctx.too_many(words, 1, 1) {
        return None;
    }
    if let Some(c) = invalid_name_char(name) {
        ctx.alert(format!(
            "character '{c}' is not permitted in 'peers' name '{name}'."
        ));
        abort(ctx);
        return None;
    }
    if let Some(prev) = all.iter().find(|p| p.name == *name) {
        // Reported, but HAProxy still reads the section.
        let msg = format!(
            "Parsing [{}:{}]: peers section '{name}' has the same name as another peers section declared at {}:{}.",
            ctx.loc.file, ctx.loc.line, prev.loc.file, prev.loc.line
        );
        ctx.diags
            .push(Diag::located(&ctx.loc.file, ctx.loc.line, msg));
    }
    Some(PeersSection {
        name: name.clone(),
        loc: ctx.loc.clone(),
        disabled: false,
        active: false,
        peers: Vec::new(),
        bind: None,
        tables: Vec::new(),
        bind_ssl: None,
    })
}

/// One line inside a `peers` section. `localpeer` is this process' peer name; `proxies` are the
/// proxies declared so far (a `table` name must not clash with theirs).
pub(crate) fn dispatch(
    s: &mut PeersSection,
    r: &mut Reading,
    ctx: &mut Ctx<'_>,
    words: &[String],
    localpeer: &str,
    proxies: &[Proxy],
    pending: &mut Vec<String>,
) {
    let kw = words[0].as_str();
    let a = |i: usize| words.get(i).map_or("", String::as_str);
    match kw {
        "bind" | "default-bind" => {
            let mut from = 1;
            if kw == "bind" {
                if r.peer_line {
                    ctx.alert("mixing \"peer\" and \"bind\" line is forbidden");
                    return;
                }
                if let Some(at) = &r.bind_at {
                    let msg = format!(
                        "One listener per \"peers\" section is authorized but another is already configured at [{}:{}].",
                        at.file, at.line
                    );
                    ctx.alert(msg);
                }
                let sa = match listen_addr(ctx, a(1)) {
                    Ok(sa) => sa,
                    Err(e) => {
                        ctx.alert(format!("'bind {}' : {e}", a(1)));
                        return;
                    }
                };
                r.bind_line = true;
                r.bind_at.get_or_insert_with(|| ctx.loc.clone());
                s.bind = Some(sa);
                if !s.peers.iter().any(|p| p.local) {
                    // Named by the `server <local>` line that follows.
                    s.peers.push(Peer {
                        name: String::new(),
                        addr: Some(sa),
                        local: true,
                        ssl: None,
                        loc: ctx.loc.clone(),
                    });
                }
                from = 2;
            }
            let head = if kw == "bind" {
                format!("'bind {}' in section 'peers'", a(1))
            } else {
                let rest = words.get(1..).unwrap_or_default().join(" ");
                format!("'default-bind {rest}' in section 'peers'")
            };
            match bind_options(ctx, &head, words, from, pending) {
                Some(Some(crt)) if std::fs::metadata(&crt).is_err() => {
                    let why = match std::fs::metadata(&crt) {
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            "No such file or directory".to_string()
                        }
                        Err(e) => e.to_string(),
                        Ok(_) => String::new(),
                    };
                    ctx.alert(format!(
                        "{head} : unable to stat SSL certificate from file '{crt}' : {why}."
                    ));
                }
                Some(Some(crt)) => {
                    let ssl = s.bind_ssl.get_or_insert_with(Default::default);
                    ssl.crts.push(crt.clone());
                    ssl.sources.push(super::model::CrtSource::Crt(crt));
                }
                // `ssl` needs its certificate on the same line here.
                Some(None) => pending.push("peers bind ssl without crt".to_string()),
                None => {}
            }
        }
        "default-server" => {
            let mut st = SrvState {
                name: "default-server".to_string(),
                opts: r.default_server.clone(),
                id: None,
                pending: Vec::new(),
            };
            match apply(&mut st, words, 1, true) {
                Ok(()) => r.default_server = st.opts,
                Err(e) => {
                    let e = e.strip_prefix(BARE).unwrap_or(&e).to_string();
                    bare(
                        ctx,
                        format!("{e} Hint: no address was expected for this server."),
                    );
                }
            }
        }
        "peer" | "server" => peer_line(s, r, ctx, words, localpeer, pending),
        "table" => {
            let name = a(1);
            // HAProxy looks the bare name up: only a proxy's table can clash.
            if let Some(px) = proxies
                .iter()
                .find(|p| p.stick_table.is_some() && p.name == name)
                && let Some(t) = &px.stick_table
            {
                ctx.alert(format!(
                    "stick-table name '{name}' conflicts with table declared in {} '{}' at {}:{}.",
                    px.kind(),
                    px.name,
                    t.loc.file,
                    t.loc.line
                ));
                return;
            }
            if let Some(t) = super::kw_rules::parse_stick_table(ctx, words, 2, pending) {
                s.tables.push((name.to_string(), t));
            }
        }
        "disabled" => s.disabled = true,
        "enabled" => s.disabled = false,
        // Checked as HAProxy does; what peers sessions would log is not kept.
        "log" => {
            if a(1) == "global" {
                return;
            }
            if a(1).is_empty() || a(2).is_empty() {
                ctx.alert("log : expects <address> and <facility> or global as arguments");
                return;
            }
            let _ = super::kw_proxy::parse_log_target(ctx, words);
        }
        other => ctx.alert(format!("unknown keyword '{other}' in 'peers' section")),
    }
}

/// An alert HAProxy prints as `[file:line] : msg` (the server parser's layout).
fn bare(ctx: &mut Ctx<'_>, msg: String) {
    let m = format!("[{}:{}] : {msg}", ctx.loc.file, ctx.loc.line);
    ctx.diags
        .push(Diag::located(&ctx.loc.file, ctx.loc.line, m));
}

fn abort(ctx: &mut Ctx<'_>) {
    if let Some(d) = ctx.diags.last_mut() {
        d.abort = true;
    }
}

/// A listening address of a `peers` section: one inet address with a port.
fn listen_addr(ctx: &Ctx<'_>, spec: &str) -> Result<std::net::SocketAddr, String> {
    let addrs = addr::parse_bind(spec, ctx.sys.resolve)?;
    match addrs.as_slice() {
        [super::model::BindAddr::Inet(sa)] => Ok(*sa),
        _ => Err(format!(
            "unsupported address for a peers listener in '{spec}'"
        )),
    }
}

/// Checks the options of a `bind`/`default-bind` line; `Some` when it says `ssl`, with its
/// `crt` if any (the TLS listener portcullis builds; other TLS options stay pending).
fn bind_options(
    ctx: &mut Ctx<'_>,
    head: &str,
    words: &[String],
    from: usize,
    pending: &mut Vec<String>,
) -> Option<Option<String>> {
    let mut i = from;
    let (mut ssl, mut crt) = (false, None);
    while let Some(w) = words.get(i).filter(|w| !w.is_empty()) {
        if !BIND_KWS.contains(&w.as_str()) {
            let mut m = format!("{head}: unknown keyword '{w}'.");
            if let Some(s) = suggest::best_match(w, BIND_KWS.iter().copied()) {
                m = format!("{head}: unknown keyword '{w}'; did you mean '{s}' maybe ?");
            }
            ctx.alert(m);
            return None;
        }
        match w.as_str() {
            "ssl" => ssl = true,
            "crt" => crt = words.get(i + 1).filter(|v| !v.is_empty()).cloned(),
            "ca-file" | "verify" | "accept-proxy" => pending.push(format!("peers bind {w}")),
            _ => {}
        }
        if BIND_VALUED.contains(&w.as_str()) {
            if words.get(i + 1).is_none_or(|v| v.is_empty()) {
                let what = if w == "crt" {
                    "missing certificate location"
                } else {
                    "missing argument"
                };
                ctx.alert(format!("{head} : '{w}' : {what}"));
                return None;
            }
            i += 1;
        }
        i += 1;
    }
    if crt.is_some() && !ssl {
        // A certificate without `ssl`: nothing portcullis would use it for.
        pending.push("peers bind crt".to_string());
    }
    ssl.then_some(crt)
}

/// `peer <name> <addr:port> [server options]` or `server <name> [<addr:port>] [options]`.
fn peer_line(
    s: &mut PeersSection,
    r: &mut Reading,
    ctx: &mut Ctx<'_>,
    words: &[String],
    localpeer: &str,
    pending: &mut Vec<String>,
) {
    let kw = words[0].as_str();
    let name = words.get(1).map_or("", String::as_str);
    let is_peer = kw == "peer";
    let local = name == localpeer;
    if is_peer {
        if r.bind_line {
            ctx.alert("mixing \"peer\" and \"bind\" line is forbidden");
            return;
        }
        r.peer_line = true;
    }
    let unnamed_local = s.peers.iter().position(|p| p.local && p.name.is_empty());
    if local
        && unnamed_local.is_none()
        && let Some(prev) = s.peers.iter().find(|p| p.local)
    {
        let msg = format!(
            "'{kw} {name}' : local peer name already referenced at {}:{}. {}",
            prev.loc.file, prev.loc.line, prev.name
        );
        ctx.alert(msg);
        return;
    }
    if name.is_empty() {
        // HAProxy's server parser gives up silently on a nameless line here.
        return;
    }
    if let Some(c) = invalid_name_char(name) {
        bare(
            ctx,
            format!("character '{c}' is not permitted in peer name '{name}'."),
        );
        return;
    }
    // The frontend is named after the local peer in HAProxy's messages ('server vm/o').
    let who = format!("'server {localpeer}/{name}'");
    let parse_addr = is_peer || !local;
    let mut from = 2;
    let mut addr = None;
    if parse_addr {
        let spec = words.get(2).map_or("", String::as_str);
        if !spec.is_empty() {
            match peer_addr(ctx, spec) {
                // The listener needs a port; a remote peer without one is taken as is.
                Ok(sa) if sa.port() == 0 && local && is_peer => {
                    ctx.alert(format!(
                        "'{kw} {name}' : missing port specification in '{spec}'"
                    ));
                    return;
                }
                Ok(sa) => addr = Some(sa),
                Err(e) => {
                    bare(ctx, format!("{who} : {e}\n"));
                    if local && is_peer {
                        ctx.alert(format!("'{kw} {name}' : {e}"));
                    }
                    return;
                }
            }
            from = 3;
        }
    }
    let mut st = SrvState {
        name: name.to_string(),
        opts: r.default_server.clone(),
        id: None,
        pending: Vec::new(),
    };
    if let Err(e) = apply(&mut st, words, from, false) {
        let e = e.strip_prefix(BARE).unwrap_or(&e).to_string();
        let hint = if parse_addr {
            ""
        } else {
            " Hint: no address was expected for this server."
        };
        bare(ctx, format!("{who} : {e}{hint}"));
        return;
    }
    if st.opts.check || !st.opts.resolve.init_addr.is_empty() || st.opts.resolve.resolvers.is_some()
    {
        ctx.warn(format!(
            "'{kw} {name}' : init_addr, resolvers, check and agent are ignored for peers."
        ));
    }
    // TLS towards the peer; a client certificate is not built.
    if st.opts.ssl && st.opts.crt.is_some() {
        pending.push("peers server crt".to_string());
    }
    let ssl = st.opts.ssl.then(|| Box::new(st.opts.clone()));
    if local && is_peer && st.opts.ssl && s.bind_ssl.is_none() {
        // HAProxy's words (it names the section after the local peer).
        ctx.diags.push(Diag::global(
            super::diag::Severity::Warning,
            format!(
                "Peers section '{localpeer}': local peer have a non-SSL listener and a SSL server configured at line {}:{}.",
                ctx.loc.file, ctx.loc.line
            ),
        ));
    }
    if let Some(i) = unnamed_local.filter(|_| local) {
        if let Some(p) = s.peers.get_mut(i) {
            p.name = name.to_string();
        }
        return;
    }
    s.peers.push(Peer {
        name: name.to_string(),
        addr,
        local,
        ssl,
        loc: ctx.loc.clone(),
    });
    if local && is_peer {
        if let Some(at) = &r.bind_at {
            let msg = format!(
                "One listener per \"peers\" section is authorized but another is already configured at [{}:{}].",
                at.file, at.line
            );
            ctx.alert(msg);
        }
        r.bind_at.get_or_insert_with(|| ctx.loc.clone());
        s.bind = addr;
    }
}

/// A peer's address.
fn peer_addr(ctx: &Ctx<'_>, spec: &str) -> Result<std::net::SocketAddr, String> {
    let sa = addr::parse_server(spec, ctx.sys.resolve).map_err(|e| {
        if e.starts_with("could not resolve") {
            let h = spec.rsplit_once(':').map_or(spec, |(h, _)| h);
            format!("invalid address: '{h}' in '{spec}'")
        } else {
            e
        }
    })?;
    Ok(sa)
}

/// After the parse: links every `stick-table … peers <section>` to its section, then drops
/// the sections HAProxy removes (disabled ones silently, those without a local peer with a
/// warning), unlinking their tables.
pub(crate) fn finish(
    sections: &mut [PeersSection],
    proxies: &mut [Proxy],
    localpeer: &str,
    diags: &mut Vec<Diag>,
) {
    // A configuration with parse errors stops before these checks in HAProxy.
    let quiet = diags.iter().any(Diag::is_alert);
    for px in proxies.iter_mut() {
        let pxname = px.name.clone();
        let Some(t) = px.stick_table.as_mut() else {
            continue;
        };
        let Some(want) = t.peers.clone() else {
            continue;
        };
        // HAProxy's list is newest first: the last section of that name wins.
        match sections.iter().rev().find(|s| s.name == want) {
            None => {
                diags.push(Diag::global(
                    Severity::Alert,
                    format!("Proxy '{pxname}': unable to find sync peers '{want}'."),
                ));
                t.peers = None;
            }
            Some(s) if s.disabled => t.peers = None,
            Some(s) if s.peers.is_empty() && s.tables.is_empty() => {
                diags.push(Diag::global(
                    Severity::Alert,
                    format!(
                        "Proxy '{pxname}': unable to find local peer '{localpeer}' in peers section '{want}'."
                    ),
                ));
                t.peers = None;
            }
            Some(_) => {}
        }
    }
    // HAProxy walks its sections newest first.
    for s in sections.iter_mut().rev() {
        let has_local = s.peers.iter().any(|p| p.local && !p.name.is_empty());
        s.active = !s.disabled && has_local;
        if !s.disabled && !has_local && !quiet {
            diags.push(Diag::global(
                Severity::Warning,
                format!(
                    "Removing incomplete section 'peers {}' (no peer named '{localpeer}').",
                    s.name
                ),
            ));
        }
    }
    for px in proxies.iter_mut() {
        if let Some(t) = px.stick_table.as_mut()
            && let Some(want) = &t.peers
            && !sections.iter().any(|s| s.active && s.name == *want)
        {
            t.peers = None;
        }
    }
}
