//! `show servers state [<backend>]` (format version 1, 25 fields) and `show backend`.

use crate::model::{ProxySnap, Snapshot};
use std::fmt::Write as _;

/// The header HAProxy prints after the version line.
pub const SERVERS_STATE_HEADER: &str = "# be_id be_name srv_id srv_name srv_addr srv_op_state srv_admin_state srv_uweight srv_iweight srv_time_since_last_change srv_check_status srv_check_result srv_check_health srv_check_state srv_agent_state bk_f_forced_id srv_f_forced_id srv_fqdn srv_port srvrecord srv_use_ssl srv_check_port srv_check_addr srv_agent_addr srv_agent_port\n";

/// Agent bit in `srv_agent_state`.
const CHK_ST_AGENT: u8 = 0x10;

fn push_opt_addr(a: Option<std::net::IpAddr>, out: &mut String) {
    match a {
        Some(a) => {
            let _ = write!(out, "{a}");
        }
        None => out.push('-'),
    }
}

/// One backend's server lines.
pub fn push_proxy_servers_state(px: &ProxySnap, out: &mut String) {
    let bk_forced = u8::from(px.forced_id);
    for sv in &px.servers {
        let agent_state = if sv.agent.configured {
            sv.agent.state_bits() | CHK_ST_AGENT
        } else {
            sv.agent.state_bits()
        };
        let _ = write!(out, "{} {} {} {} ", px.id, px.name, sv.id, sv.name);
        push_opt_addr(sv.addr, out);
        let _ = write!(
            out,
            " {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} {} ",
            sv.op_state as u8,
            sv.admin.0,
            sv.uweight,
            sv.iweight,
            sv.last_change_secs,
            sv.check.status as u8,
            sv.check.status.result(),
            sv.check.health,
            sv.check.state_bits(),
            agent_state,
            bk_forced,
            u8::from(sv.forced_id),
            sv.fqdn.as_deref().unwrap_or("-"),
            sv.port,
            sv.srvrecord.as_deref().unwrap_or("-"),
            u8::from(sv.use_ssl),
            sv.check.port,
        );
        push_opt_addr(sv.check.addr, out);
        out.push(' ');
        push_opt_addr(sv.agent.addr, out);
        let _ = writeln!(out, " {}", sv.agent.port);
    }
}

/// `show servers state [<backend>]` without the CLI's final empty line. `Err` carries HAProxy's
/// message for an unknown backend.
pub fn dump_servers_state(
    snap: &Snapshot,
    backend: Option<&str>,
    out: &mut String,
) -> Result<(), &'static str> {
    let only = match backend {
        Some(name) => match snap.find_backend(name) {
            Some(i) => Some(i),
            None => return Err("Can't find backend.\n"),
        },
        None => None,
    };
    out.push_str("1\n");
    out.push_str(SERVERS_STATE_HEADER);
    for (i, px) in snap.proxies.iter().enumerate() {
        if px.backend.is_none() || only.is_some_and(|o| o != i) {
            continue;
        }
        push_proxy_servers_state(px, out);
    }
    Ok(())
}

/// `show backend`: `# name` then one backend per line.
pub fn dump_backends(snap: &Snapshot, out: &mut String) {
    out.push_str("# name\n");
    for px in snap.proxies.iter().filter(|p| p.backend.is_some()) {
        out.push_str(&px.name);
        out.push('\n');
    }
}
