//! Server state handed from the old process to the new one at a reload (what HAProxy needs a
//! `server-state-file` for): runtime admin state (MAINT/DRAIN from the CLI), weight, address
//! (`set server … addr`), health and `enable|disable health`, so that a DOWN server does not
//! flap UP; and the servers added with `add server`, added again in the new process.
//!
//! `_getstate` on an admin socket with `expose-fd listeners` answers a versioned message: the
//! magic `PCST`, the format version (u32, little endian), then the state in bincode. A peer of
//! another version is refused with a clear warning and the servers start from the configuration.

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::check::fsm::OpState;
use crate::model::{ADMIN_DRAIN, ADMIN_MAINT, Model, Oper};

const MAGIC: &[u8; 4] = b"PCST";
/// 2: `check_enabled` and the `add server` line.
pub const VERSION: u32 = 2;
/// Largest state read and decoded: bincode trusts the lengths it reads, so without a bound a
/// corrupt length asks for an allocation of exabytes and aborts the new process (found by the
/// `handover` fuzz target). 64 MiB is hundreds of thousands of servers.
const MAX_STATE: usize = 64 << 20;

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerState {
    pub backend: String,
    pub server: String,
    /// `ADMIN_MAINT`/`ADMIN_DRAIN` bits.
    pub admin: u8,
    pub uweight: u32,
    /// The weight and address of the old configuration: a runtime change is carried over only
    /// while the new configuration still says the same (else the new configuration wins).
    pub cfg_weight: u32,
    pub addr: SocketAddr,
    pub cfg_addr: SocketAddr,
    /// `Oper` as u8.
    pub oper: u8,
    /// Checks enabled (`enable|disable health`).
    pub check_enabled: bool,
    /// For a server added at run time: the words after its name on `add server`.
    pub dynamic: Option<Vec<String>>,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct State {
    pub servers: Vec<ServerState>,
}

/// Encodes `state` as `_getstate` sends it, for format `version`.
pub fn encode_versioned(state: &State, version: u32) -> Vec<u8> {
    let mut out = MAGIC.to_vec();
    out.extend_from_slice(&version.to_le_bytes());
    if let Ok(body) = bincode::serde::encode_to_vec(state, bincode::config::standard()) {
        out.extend_from_slice(&body);
    }
    out
}

pub fn encode(state: &State) -> Vec<u8> {
    encode_versioned(state, VERSION)
}

pub fn decode(bytes: &[u8]) -> Result<State, String> {
    let (magic, rest) = bytes.split_at_checked(4).ok_or_else(not_portcullis)?;
    if magic != MAGIC {
        return Err(not_portcullis());
    }
    let (v, body) = rest.split_at_checked(4).ok_or_else(not_portcullis)?;
    let v = u32::from_le_bytes([v[0], v[1], v[2], v[3]]);
    if v != VERSION {
        return Err(format!(
            "server state from the old process has format version {v}, this one reads version \
             {VERSION}: refused, servers start from the configuration"
        ));
    }
    let config = bincode::config::standard().with_limit::<MAX_STATE>();
    bincode::serde::decode_from_slice(body, config)
        .map(|(s, _)| s)
        .map_err(|e| {
            format!("server state from the old process is unreadable ({e}): servers start from the configuration")
        })
}

fn not_portcullis() -> String {
    "the old process sent no server state (not portcullis?): servers start from the configuration"
        .into()
}

/// The state of every server now.
pub fn capture(model: &Model) -> State {
    let mut servers = Vec::new();
    for be in model.proxies.iter().filter(|p| p.is_backend()) {
        for s in be.pool().servers.iter() {
            servers.push(ServerState {
                backend: be.name.clone(),
                server: s.name.clone(),
                admin: s.admin(),
                uweight: s.uweight.load(Ordering::Acquire),
                cfg_weight: s.cfg.opts.weight,
                addr: s.addr(),
                cfg_addr: s.cfg.addr,
                oper: s.oper() as u8,
                check_enabled: s.check_enabled.load(Ordering::Acquire),
                dynamic: s.dynamic.as_ref().map(|d| d.line.clone()),
            });
        }
    }
    State { servers }
}

/// Applies the old process' state to a model that serves nothing yet. Returns how many servers
/// took it.
pub fn apply(model: &Model, state: &State) -> usize {
    let mut applied = 0;
    for st in &state.servers {
        let Some(be) = model
            .proxies
            .iter()
            .find(|p| p.is_backend() && p.name == st.backend)
        else {
            continue;
        };
        let found = be
            .pool()
            .servers
            .iter()
            .find(|s| s.name == st.server)
            .cloned();
        let srv = match (found, &st.dynamic) {
            (Some(s), _) => s,
            // Added at run time in the old process: added again, then given its state.
            (None, Some(line)) => match crate::model::dynamic::build(model, be, &st.server, line) {
                Ok(s) => crate::model::dynamic::insert(be, s),
                Err(e) => {
                    tracing::warn!(
                        "server {}/{} added at run time cannot be added again: {e}",
                        st.backend,
                        st.server
                    );
                    continue;
                }
            },
            (None, None) => continue,
        };
        srv.check_enabled.store(
            st.check_enabled && srv.check_spec.is_some(),
            Ordering::Release,
        );
        let mut fsm = srv.check.lock().unwrap_or_else(|p| p.into_inner());
        let maint = st.admin & ADMIN_MAINT != 0;
        if !maint && srv.dynamic.is_some() {
            // A dynamic server starts in maintenance; the old one had left it.
            srv.admin.fetch_and(!ADMIN_MAINT, Ordering::AcqRel);
            let _ = fsm.leave_maint();
        }
        if maint {
            srv.admin.fetch_or(ADMIN_MAINT, Ordering::AcqRel);
            let _ = fsm.enter_maint();
        }
        if st.admin & ADMIN_DRAIN != 0 {
            srv.admin.fetch_or(ADMIN_DRAIN, Ordering::AcqRel);
        }
        if st.cfg_weight == srv.cfg.opts.weight {
            srv.uweight.store(st.uweight, Ordering::Release);
        }
        if st.cfg_addr == srv.cfg.addr {
            srv.addr.store(std::sync::Arc::new(st.addr));
        }
        // A server the old process had DOWN (or NOLB) starts so, not UP until checks say so.
        let op = match st.oper {
            x if x == Oper::Stopped as u8 => Some(OpState::Stopped),
            x if x == Oper::Stopping as u8 => Some(OpState::Stopping),
            _ => None,
        };
        if let Some(op) = op.filter(|_| !maint) {
            let _ = fsm.force_health(op);
        }
        let oper = match fsm.op() {
            OpState::Running => Oper::Running,
            OpState::Stopping => Oper::Stopping,
            OpState::Stopped => Oper::Stopped,
        };
        drop(fsm);
        srv.oper.store(oper as u8, Ordering::Release);
        srv.apply_state();
        applied += 1;
    }
    for be in model.proxies.iter().filter(|p| p.is_backend()) {
        be.rebuild_lb();
    }
    applied
}

/// Asks the process behind the admin socket `path` for its server state (`_getstate`).
pub fn fetch(path: &std::path::Path) -> Result<State, String> {
    let mut s = std::os::unix::net::UnixStream::connect(path).map_err(|e| {
        format!(
            "cannot reach the old process for its server state ({e}): servers start from the configuration"
        )
    })?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = s.set_write_timeout(Some(Duration::from_secs(5)));
    let mut buf = Vec::new();
    s.write_all(b"_getstate\n")
        .and_then(|()| (&mut s).take(MAX_STATE as u64 + 8).read_to_end(&mut buf))
        .map_err(|e| {
            format!(
                "cannot read the old process' server state ({e}): servers start from the configuration"
            )
        })?;
    decode(&buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> State {
        State {
            servers: vec![ServerState {
                backend: "be".into(),
                server: "s1".into(),
                admin: ADMIN_MAINT,
                uweight: 7,
                cfg_weight: 1,
                addr: "127.0.0.9:81".parse().unwrap(),
                cfg_addr: "127.0.0.1:80".parse().unwrap(),
                oper: Oper::Stopped as u8,
                check_enabled: true,
                dynamic: Some(vec!["127.0.0.9:81".into(), "check".into()]),
            }],
        }
    }

    /// Fuzz finding (`handover`): a length prefix claiming 2^61 elements made bincode allocate
    /// without bound, aborting the process; it is a decode error now.
    #[test]
    fn huge_length_prefix_is_an_error_not_an_abort() {
        let bytes = b"PCST\x02\x00\x00\x00\xe2\xfd\xff\x1e\x02\x09\x1e\x00\x00\x1e\x00\x00\x00\x00\x00\x00\x00\x00\x54\x02";
        let e = decode(bytes).unwrap_err();
        assert!(e.contains("unreadable"), "{e}");
    }

    #[test]
    fn round_trip() {
        let bytes = encode(&sample());
        assert_eq!(&bytes[..8], b"PCST\x02\x00\x00\x00");
        assert_eq!(decode(&bytes).unwrap(), sample());
    }

    #[test]
    fn other_version_is_refused() {
        let bytes = encode_versioned(&sample(), 1);
        assert_eq!(
            decode(&bytes).unwrap_err(),
            "server state from the old process has format version 1, this one reads version 2: \
             refused, servers start from the configuration"
        );
    }

    #[test]
    fn haproxy_or_garbage_is_not_state() {
        let e =
            decode(b"Unknown command, but maybe one of the following ones is a better match:\n")
                .unwrap_err();
        assert!(e.starts_with("the old process sent no server state"), "{e}");
        assert!(decode(b"").is_err());
        let mut cut = encode(&sample());
        cut.truncate(12);
        assert!(decode(&cut).unwrap_err().contains("unreadable"));
    }
}
