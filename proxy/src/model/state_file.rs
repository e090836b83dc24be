//! `server-state-file` / `load-server-state-from-file`: at start, servers take the state a
//! previous process saved with `show servers state` (format version 1), as HAProxy 2.6's
//! `apply_server_state` does: operational and admin states, user weight (while the configured
//! weight is unchanged), `disable health`, the service port, the check address and port, and
//! for a name-resolved server whose `init-addr` starts with `last`, the address.
//!
//! Parsing is pure ([`parse`], [`update`]); [`apply`] reads the files and changes the model once,
//! before anything listens. Problems are HAProxy's warnings, never an error.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::Ordering;

use crate::check::fsm::OpState;
use crate::config::model::{InitAddr, LoadServerState};
use crate::model::{ADMIN_DRAIN, ADMIN_HMAINT, ADMIN_MAINT, ADMIN_RMAINT, Model, Oper, Proxy};

/// HAProxy's `SRV_ADMF_*` bits in `srv_admin_state`.
const FMAINT: i64 = 0x01;
const IMAINT: i64 = 0x02;
const CMAINT: i64 = 0x04;
const FDRAIN: i64 = 0x08;
const IDRAIN: i64 = 0x10;
const RMAINT: i64 = 0x20;
const HMAINT: i64 = 0x40;
/// `CHK_ST_*` bits in `srv_check_state` / `srv_agent_state`.
const CHK_CONFIGURED: i64 = 0x02;
const CHK_ENABLED: i64 = 0x04;
const CHK_ALLOWED: i64 = 0x01 | CHK_CONFIGURED | CHK_ENABLED | 0x08 | 0x10;
/// `SRV_UWGHT_MAX`, `HCHK_STATUS_SIZE`.
const WEIGHT_MAX: i64 = 256;
const CHECK_STATUS_SIZE: i64 = 21;
/// A version-1 line has 20 to 25 fields (`SRV_STATE_FILE_{MIN,MAX}_FIELDS_VERSION_1`).
const MIN_FIELDS: usize = 20;
const MAX_FIELDS: usize = 25;

/// A file's lines: the fields of each (comments and blank lines left out), or None when the
/// version line is missing or wrong, or Err(line number) for a corrupted line (counted from the
/// line after the version line, as HAProxy reports it).
pub fn parse(text: &str) -> Result<Option<Vec<Vec<String>>>, usize> {
    let Some((first, rest)) = text.split_once('\n') else {
        return Ok(None);
    };
    // strtol on the first line, which must end right after the number.
    let digits = first.trim_start_matches([' ', '\t']);
    let digits = digits.strip_prefix('+').unwrap_or(digits);
    if digits != "1" && digits.trim_start_matches('0') != "1" {
        return Ok(None);
    }
    let mut out = Vec::new();
    let mut rest = rest;
    let mut n = 0;
    while !rest.is_empty() {
        n += 1;
        // fgets: a last line without its newline is a truncated one.
        let Some((line, tail)) = rest.split_once('\n') else {
            return Err(n);
        };
        rest = tail;
        let line = line.trim_start_matches([' ', '\t']);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<String> = line
            .split([' ', '\t'])
            .filter(|f| !f.is_empty())
            .take(MAX_FIELDS)
            .map(str::to_string)
            .collect();
        if fields.len() < MIN_FIELDS {
            return Err(n);
        }
        out.push(fields);
    }
    Ok(Some(out))
}

/// C's `strtol` as HAProxy uses it: leading blanks, a sign, digits; what follows is ignored.
/// None when there is no digit or the value overflows.
fn strtol(s: &str) -> Option<i64> {
    let t = s.trim_start_matches([' ', '\t', '\n']);
    let (neg, t) = match t.as_bytes().first() {
        Some(b'-') => (true, &t[1..]),
        Some(b'+') => (false, &t[1..]),
        _ => (false, t),
    };
    let end = t.bytes().take_while(u8::is_ascii_digit).count();
    let v: i64 = t.get(..end).filter(|d| !d.is_empty())?.parse().ok()?;
    Some(if neg { -v } else { v })
}

/// What a server keeps from its line (HAProxy's `srv_state_srv_update`), checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Saved {
    pub addr: Option<IpAddr>,
    pub op: i64,
    pub admin: i64,
    /// `HMAINT` was set: the FQDN came from the CLI.
    pub fqdn_by_cli: bool,
    pub uweight: u32,
    pub iweight: u32,
    pub check_state: i64,
    pub fqdn: Option<String>,
    pub port: Option<u16>,
    pub check_port: Option<u16>,
    pub check_addr: Option<IpAddr>,
}

/// Checks a line's fields after the backend and server ones (`params + 4`); Err is HAProxy's
/// list of `, invalid <field> value '<v>'` complaints.
pub fn update(p: &[String]) -> Result<Saved, String> {
    let f = |i: usize| p.get(i).map_or("", String::as_str);
    let mut msg = String::new();
    let mut num = |i: usize, name: &str, ok: &dyn Fn(i64) -> bool| -> i64 {
        match strtol(f(i)).filter(|v| ok(*v)) {
            Some(v) => v,
            None => {
                msg.push_str(&format!(", invalid {name} value '{}'", f(i)));
                0
            }
        }
    };
    let op = num(1, "srv_op_state", &|v| (0..=3).contains(&v));
    let raw_admin = strtol(f(2));
    let admin = raw_admin.map(|a| a & !(IDRAIN | IMAINT | HMAINT | RMAINT));
    let admin_ok = admin.is_some_and(|a| {
        [0, FMAINT, CMAINT, CMAINT | FMAINT, CMAINT | FDRAIN, FDRAIN].contains(&a)
    });
    if !admin_ok {
        msg.push_str(&format!(", invalid srv_admin_state value '{}'", f(2)));
    }
    let mut num = |i: usize, name: &str, ok: &dyn Fn(i64) -> bool| -> i64 {
        match strtol(f(i)).filter(|v| ok(*v)) {
            Some(v) => v,
            None => {
                msg.push_str(&format!(", invalid {name} value '{}'", f(i)));
                0
            }
        }
    };
    let uweight = num(3, "srv_uweight", &|v| (0..=WEIGHT_MAX).contains(&v));
    let iweight = num(4, "srv_iweight", &|v| (0..=WEIGHT_MAX).contains(&v));
    num(5, "srv_last_time_change", &|_| true);
    num(6, "srv_check_status", &|v| {
        (0..CHECK_STATUS_SIZE).contains(&v)
    });
    num(7, "srv_check_result", &|v| (0..=4).contains(&v));
    num(8, "srv_check_health", &|_| true);
    let check_state = num(9, "srv_check_state", &|v| v & !CHK_ALLOWED == 0);
    num(10, "srv_agent_state", &|v| v & !CHK_ALLOWED == 0);
    num(11, "bk_f_forced_id", &|v| v == 0 || v == 1);
    num(12, "srv_f_forced_id", &|v| v == 0 || v == 1);
    let fqdn = Some(f(13)).filter(|s| !s.is_empty() && !s.starts_with('-'));
    let fqdn_ok = |s: &str| {
        s.len() <= 255
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
    };
    let fqdn = match fqdn {
        Some(s) if !fqdn_ok(s) => {
            msg.push_str(&format!(", invalid srv_fqdn value '{s}'"));
            None
        }
        other => other.map(str::to_string),
    };
    // strl2uic: the leading digits.
    let port_digits: String = f(14).chars().take_while(char::is_ascii_digit).collect();
    let port = match port_digits.parse::<u64>().unwrap_or(0) {
        v if v > u64::from(u16::MAX) => {
            msg.push_str(&format!(", invalid srv_port value '{}'", f(14)));
            None
        }
        v => Some(v as u16),
    };
    if !msg.is_empty() {
        return Err(msg);
    }
    let opt = |i: usize, skip: &str| p.get(i).filter(|v| v.as_str() != skip);
    Ok(Saved {
        addr: f(0).parse().ok(),
        op,
        admin: admin.unwrap_or(0),
        fqdn_by_cli: raw_admin.is_some_and(|a| a & HMAINT != 0),
        uweight: uweight as u32,
        iweight: iweight as u32,
        check_state,
        fqdn,
        port,
        check_port: opt(17, "0").and_then(|v| v.parse().ok()),
        check_addr: opt(18, "-").and_then(|v| v.parse().ok()),
    })
}

/// The file's path: absolute, or under `server-state-base`.
fn path(base: Option<&str>, file: &str) -> String {
    match base {
        Some(b) if !file.starts_with('/') => {
            let sep = if b.ends_with('/') { "" } else { "/" };
            format!("{b}{sep}{file}")
        }
        _ => file.to_string(),
    }
}

/// Lines keyed by "backend server" (the first of duplicates wins, as HAProxy's tree).
type Lines = HashMap<(String, String), Vec<String>>;

fn read(file: &str) -> Result<Option<Vec<Vec<String>>>, String> {
    let text = std::fs::read(file).map_err(|e| {
        let mut m = e.to_string();
        // strerror's words, without Rust's " (os error N)".
        if let Some(i) = m.find(" (os error") {
            m.truncate(i);
        }
        m
    })?;
    parse(&String::from_utf8_lossy(&text)).map_err(|n| format!("line {n}"))
}

/// Applies the state files the configuration names; returns HAProxy's warnings.
pub fn apply(model: &Model) -> Vec<String> {
    let mut warns = Vec::new();
    let global = &model.cfg.global.process;
    let base = global.server_state_base.as_deref();
    let mut global_lines: Option<Lines> = None;
    if let Some(f) = &global.server_state_file {
        let file = path(base, f);
        match read(&file) {
            Err(e) if e.starts_with("line ") => warns.push(format!(
                "config: corrupted global server state file '{file}' at {e}."
            )),
            Err(e) => warns.push(format!(
                "config: Can't open global server state file '{file}': {e}"
            )),
            Ok(None) => warns.push(format!(
                "config: Can't get version of the global server state file '{file}'."
            )),
            Ok(Some(lines)) => {
                let mut map = Lines::new();
                for l in lines {
                    map.entry((l[1].clone(), l[3].clone())).or_insert(l);
                }
                global_lines = Some(map);
            }
        }
    }
    for be in model
        .proxies
        .iter()
        .filter(|p| p.is_backend() && !p.cfg.disabled)
    {
        if be.pool().servers.is_empty() {
            continue;
        }
        match be.cfg.extra.load_server_state {
            Some(LoadServerState::Global) => {
                if let Some(lines) = &global_lines {
                    px_update(be, lines, &mut warns);
                }
            }
            Some(LoadServerState::Local) => local(be, base, &mut warns),
            _ => {}
        }
    }
    for be in model.proxies.iter().filter(|p| p.is_backend()) {
        be.rebuild_lb();
    }
    warns
}

/// `load-server-state-from-file local`: the backend's own file, its lines checked against the
/// backend's name and id.
fn local(be: &Proxy, base: Option<&str>, warns: &mut Vec<String>) {
    let name = be.cfg.extra.server_state_file_name.as_deref();
    let file = path(base, name.unwrap_or(&be.name));
    let lines = match read(&file) {
        Err(e) if e.starts_with("line ") => {
            return warns.push(format!(
                "Proxy '{}': corrupted server state file '{file}' at {e}.",
                be.name
            ));
        }
        Err(e) => {
            return warns.push(format!(
                "Proxy '{}': Can't open server state file '{file}': {e}.",
                be.name
            ));
        }
        Ok(None) => {
            return warns.push(format!(
                "Proxy '{}': Can't get version of the server state file '{file}'.",
                be.name
            ));
        }
        Ok(Some(l)) => l,
    };
    let mut map = Lines::new();
    for l in lines {
        let id_ok = strtol(&l[0]).unwrap_or(0) == i64::from(be.cfg.id);
        let name_ok = l[1] == be.name;
        if !id_ok && !name_ok {
            continue;
        } else if !id_ok {
            warns.push(format!(
                "Proxy '{}': backend ID mismatch: from server state file: '{}', from running config '{}'",
                be.name, l[0], be.cfg.id
            ));
        } else if !name_ok {
            warns.push(format!(
                "Proxy '{}': backend name mismatch: from server state file: '{}', from running config '{}'",
                be.name, l[1], be.name
            ));
            if strtol(&l[15]).unwrap_or(0) & 1 == 0 {
                continue;
            }
        }
        map.entry((be.name.clone(), l[3].clone())).or_insert(l);
    }
    let used = px_update(be, &map, warns);
    for ((_, srv), _) in map.iter().filter(|(k, _)| !used.contains(&k.1)) {
        warns.push(format!(
            "Proxy '{}': can't find server '{srv}' in backend '{}'",
            be.name, be.name
        ));
    }
}

/// Applies the lines of `be`'s servers; returns the names of those that had one.
fn px_update(be: &Proxy, lines: &Lines, warns: &mut Vec<String>) -> Vec<String> {
    let mut used = Vec::new();
    for srv in be.pool().servers.iter() {
        let Some(l) = lines.get(&(be.name.clone(), srv.name.clone())) else {
            continue;
        };
        used.push(srv.name.clone());
        match update(l.get(4..).unwrap_or(&[])) {
            Ok(saved) => srv_update(srv, &saved),
            Err(m) => warns.push(format!(
                "server-state application failed for server '{}/{}'{m}",
                be.name, srv.name
            )),
        }
    }
    used
}

/// One server takes its saved state (the order of HAProxy's `srv_state_srv_update`).
fn srv_update(srv: &Arc<crate::model::Server>, s: &Saved) {
    let mut fsm = srv.check.lock().unwrap_or_else(|p| p.into_inner());
    // Operational state first (a server in maintenance keeps it).
    let op = match s.op {
        0 => Some(OpState::Stopped),
        2 => Some(OpState::Running),
        3 if fsm.fall() == 1 => Some(OpState::Stopped),
        3 => Some(OpState::Stopping),
        _ => None,
    };
    if let Some(op) = op {
        let _ = fsm.force_health(op);
    }
    // Admin state: a configuration change (`disabled` added or removed) wins; else the saved
    // forced maintenance is taken over.
    let cfg_maint = srv.cfg.opts.disabled;
    let maint = if (s.admin & CMAINT != 0) != cfg_maint {
        cfg_maint
    } else if s.admin & FMAINT != 0 && !cfg_maint {
        true
    } else if s.admin & FMAINT == 0 && cfg_maint {
        false
    } else {
        srv.admin() & ADMIN_MAINT != 0
    };
    if maint {
        srv.admin.fetch_or(ADMIN_MAINT, Ordering::AcqRel);
        let _ = fsm.enter_maint();
    } else if srv.admin() & ADMIN_MAINT != 0 {
        srv.admin.fetch_and(!ADMIN_MAINT, Ordering::AcqRel);
        let _ = fsm.leave_maint();
    }
    // Drain: kept unless it only came from a zero configured weight that is no longer zero.
    if !maint && s.admin & FDRAIN != 0 && (s.iweight > 0 || srv.cfg.opts.weight == 0) {
        srv.admin.fetch_or(ADMIN_DRAIN, Ordering::AcqRel);
    }
    // Only `disable health` is carried over.
    if srv.check_spec.is_some()
        && s.check_state & CHK_CONFIGURED != 0
        && s.check_state & CHK_ENABLED == 0
    {
        srv.check_enabled.store(false, Ordering::Release);
    }
    // A weight set at run time stays while the configuration's is the same.
    if s.iweight == srv.cfg.opts.weight {
        srv.uweight.store(s.uweight, Ordering::Release);
    }
    // The address: only for a name whose `init-addr` starts with `last` (HAProxy's default).
    let methods = &srv.cfg.opts.resolve.init_addr;
    let last_first = methods.first().is_none_or(|m| *m == InitAddr::Last);
    if let (Some(ip), Some(_), true) = (s.addr, &srv.cfg.fqdn, last_first) {
        let port = srv.addr().port();
        srv.addr.store(Arc::new(SocketAddr::new(ip, port)));
        srv.has_addr.store(true, Ordering::Release);
        if srv.admin() & ADMIN_RMAINT != 0 {
            srv.admin.fetch_and(!ADMIN_RMAINT, Ordering::AcqRel);
            let _ = fsm.leave_maint();
        }
    }
    // The FQDN the CLI set is kept; one equal to the configuration's is no longer "from CLI".
    if let (Some(fqdn), Some(host)) = (&s.fqdn, srv.host()) {
        if *fqdn == host {
            srv.admin.fetch_and(!ADMIN_HMAINT, Ordering::AcqRel);
        } else if s.fqdn_by_cli {
            srv.set_host(Some(fqdn.clone()));
            srv.admin.fetch_or(ADMIN_HMAINT, Ordering::AcqRel);
        }
    }
    if let Some(port) = s.port {
        let ip = srv.addr().ip();
        srv.addr.store(Arc::new(SocketAddr::new(ip, port)));
    }
    if s.check_addr.is_some() || s.check_port.is_some() {
        let mut t = srv.check_target.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(a) = s.check_addr {
            t.0 = Some(a);
        }
        if let Some(p) = s.check_port {
            t.1 = Some(p);
        }
    }
    let oper = match fsm.op() {
        OpState::Running => Oper::Running,
        OpState::Stopping => Oper::Stopping,
        OpState::Stopped => Oper::Stopped,
    };
    drop(fsm);
    srv.oper.store(oper as u8, Ordering::Release);
    srv.apply_state();
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "3 be 1 s1 127.0.0.1 2 1 7 1 5 1 0 0 0 0 0 0 - 8081 - 0 0 - - 0";

    #[test]
    fn parse_needs_the_version_and_whole_lines() {
        let ok = parse(&format!("1\n# be_id …\n\n{LINE}\n"))
            .unwrap()
            .unwrap();
        assert_eq!(ok.len(), 1);
        assert_eq!(ok[0].len(), 25);
        assert_eq!(parse("2\n"), Ok(None));
        assert_eq!(parse("1 \n"), Ok(None));
        assert_eq!(parse(""), Ok(None));
        // Truncated last line, too few fields: corrupted, numbered after the version line.
        assert_eq!(parse(&format!("1\n#\n{LINE}")), Err(2));
        assert_eq!(parse("1\nbe 1 s1\n"), Err(1));
    }

    #[test]
    fn update_reads_and_checks_the_fields() {
        let f: Vec<String> = LINE.split(' ').map(String::from).collect();
        let s = update(&f[4..]).unwrap();
        assert_eq!(s.op, 2);
        assert_eq!(s.admin, FMAINT);
        assert_eq!((s.uweight, s.iweight), (7, 1));
        assert_eq!(s.port, Some(8081));
        assert_eq!(s.addr, "127.0.0.1".parse().ok());
        let mut bad = f.clone();
        bad[5] = "9".into();
        bad[7] = "300".into();
        assert_eq!(
            update(&bad[4..]).unwrap_err(),
            ", invalid srv_op_state value '9', invalid srv_uweight value '300'"
        );
        // HAProxy's strtol ignores what follows the digits.
        bad = f;
        bad[7] = "12x".into();
        assert_eq!(update(&bad[4..]).unwrap().uweight, 12);
    }

    #[test]
    fn paths_join_the_base() {
        assert_eq!(path(Some("/var/lib"), "st"), "/var/lib/st");
        assert_eq!(path(Some("/var/lib/"), "st"), "/var/lib/st");
        assert_eq!(path(Some("/var/lib"), "/etc/st"), "/etc/st");
        assert_eq!(path(None, "st"), "st");
    }
}
