//! Servers added at run time (`add server`): the `server` line is parsed by the configuration's
//! own server keyword table, restricted to what HAProxy 2.6 accepts for a dynamic server, and
//! the result becomes a full [`Server`] of the backend (LB, checks, stats, state handover).

use std::sync::Arc;

use super::{Model, Proxy, Server};
use crate::config::kw_server::{SrvState, apply};
use crate::config::model::{self as cfg, ServerOpts};

/// How a server was added, kept so a reload can add it again in the next process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Origin {
    /// The words after the name: `<addr> [<keyword> [<value>]]*`.
    pub line: Vec<String>,
    /// `enabled` was given: in service at once instead of maintenance.
    pub enabled: bool,
}

/// Keywords HAProxy 2.6 refuses on `add server` ("not accepted for dynamic server"): the
/// `no-*` forms exist to override `default-server`, which dynamic servers do not inherit.
const NOT_DYNAMIC: &[&str] = &["no-backup", "no-check", "no-check-ssl", "no-ssl"];
/// Keywords portcullis parses in a configuration but cannot run (the start is refused there).
const NOT_SUPPORTED: &[&str] = &["maxqueue"];

/// Parses `add server <be>/<name> <line…>` and builds the server; `Err` is HAProxy's message.
pub fn build(model: &Model, be: &Proxy, name: &str, line: &[String]) -> Result<Server, String> {
    let Some(spec) = line.first() else {
        return Err("'server' expects <name> and <addr>[:<port>] as arguments.".into());
    };
    if let Some(c) = crate::config::values::invalid_name_char(name) {
        return Err(format!(
            "character '{c}' is not permitted in server name '{name}'."
        ));
    }
    // No resolution at run time: HAProxy would keep a name for its resolvers, which portcullis
    // does not have.
    let no_dns = |_: &str| None;
    let (addr, unix) = match crate::config::addr::parse_unix_server(spec) {
        Some(u) => (std::net::SocketAddr::from(([0, 0, 0, 0], 0)), Some(u?)),
        None => (crate::config::addr::parse_server(spec, &no_dns)?, None),
    };
    let kws = line.get(1..).unwrap_or(&[]);
    if let Some(k) = kws.iter().find(|w| NOT_DYNAMIC.contains(&w.as_str())) {
        return Err(format!("'{k}' option is not accepted for dynamic server"));
    }
    if let Some(k) = kws.iter().find(|w| NOT_SUPPORTED.contains(&w.as_str())) {
        return Err(format!("'{k}' option is not supported by this build"));
    }
    // Dynamic servers do not inherit `default-server` (HAProxy 2.6).
    let mut st = SrvState {
        name: name.to_string(),
        opts: ServerOpts::default(),
        id: None,
        pending: Vec::new(),
    };
    let mut words = vec![String::new(), name.to_string(), spec.clone()];
    words.extend(kws.iter().cloned());
    apply(&mut st, &words, 3, false).map_err(|e| dotted(&e).replace("{name}", name))?;
    // A keyword whose feature has not landed is refused here too, never silently ignored.
    if let Some(k) = st.pending.first() {
        return Err(format!("'{k}' option is not supported by this build"));
    }
    let pool = be.pool();
    if pool.servers.iter().any(|s| s.name == name) {
        return Err("Already exists a server with the same name in backend.".into());
    }
    if let Some(id) = st.id
        && let Some(prev) = pool.servers.iter().find(|s| s.id == id)
    {
        // HAProxy names where the other server was declared; a dynamic one has no file.
        let at = match prev.dynamic {
            Some(_) => "(null):0".to_string(),
            None => prev.cfg.loc.to_string(),
        };
        return Err(format!(
            "'id' : custom id {id} already used at {at} ('server {}').",
            prev.name
        ));
    }
    // The lowest id no server of the backend uses (HAProxy reuses the ids of deleted ones).
    let id = st.id.unwrap_or_else(|| {
        (1..)
            .find(|i| pool.servers.iter().all(|s| s.id != *i))
            .unwrap_or(u32::MAX)
    });
    let enabled = kws.iter().any(|w| w == "enabled");
    let s = cfg::Server {
        name: name.to_string(),
        addr,
        fqdn: None,
        unix,
        unresolved: false,
        id,
        opts: st.opts,
        loc: be.cfg.loc.clone(),
    };
    let origin = Origin {
        line: line.to_vec(),
        enabled,
    };
    Server::new(&model.cfg.global, &be.cfg, &s, Some(origin)).map_err(|e| {
        if e.contains("no CA file") {
            VERIFY_NO_CA.to_string()
        } else {
            e
        }
    })
}

/// HAProxy 2.6's `add server` refusal of `ssl` or `check-ssl` without `verify none` or a CA.
const VERIFY_NO_CA: &str = "verify is enabled by default but no CA file specified. If you're running on a LAN where you're certain to trust the server's certificate, please set an explicit 'verify none' statement on the 'server' line, or use 'ssl-server-verify none' in the global section to disable server-side verifications by default.";

/// HAProxy prints a keyword parser's message followed by one more `.` on the CLI; the few
/// messages the server parser writes itself (`'addr' : …`, `'id' : …`) have none.
fn dotted(e: &str) -> String {
    if e.starts_with('\'') && e.contains(" : ")
        || e.starts_with("'on-marked-")
        || e.starts_with("unknown keyword")
    {
        e.to_string()
    } else if let Some(kw) = e
        .strip_prefix("invalid value 0 for argument '")
        .and_then(|r| r.strip_suffix("'."))
    {
        format!("invalid value 0 for argument '{kw}' of server {{name}}..")
    } else {
        format!("{e}.")
    }
}

/// Adds a built server to `be`: LB table, and a check task when the caller starts one.
pub fn insert(be: &Proxy, srv: Server) -> Arc<Server> {
    let srv = Arc::new(srv);
    be.push_server(Arc::clone(&srv));
    srv
}
