//! What `show peers` reports: each section's and each peer's state, kept up to date by the
//! section tasks, and the dump in HAProxy 2.6's layout (`peers_dump_head`/`peers_dump_peer`).
//! HAProxy prints its structures' addresses; portcullis prints stable stand-ins.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard};

use crate::config::model::PeersSection;

/// The state of one peer as the dump shows it. Times are in ms of the process clock.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerState {
    /// A session is up (or being set up).
    pub active: bool,
    /// The last status: 100 connecting, 110 TCP connected, 200 established, else an error.
    pub statuscode: u16,
    pub last_hdshk: Option<u64>,
    pub reconnect: Option<u64>,
    pub heartbeat: Option<u64>,
    pub confirm: u32,
    pub tx_hbt: u64,
    pub rx_hbt: u64,
    pub no_hbt: u64,
    pub new_conn: u64,
    pub proto_err: u64,
    pub coll: u64,
    /// The source and destination of an accepted session.
    pub accepted: Option<(SocketAddr, SocketAddr)>,
    /// Per shared table: (remote id, remote data bits, last acked, last pushed, last get).
    pub tables: Vec<TableState>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TableState {
    pub remote_id: u64,
    pub remote_data: u64,
    pub last_acked: u32,
    pub last_pushed: u32,
    pub last_get: u32,
}

#[derive(Debug)]
pub struct PeerStatus {
    pub name: String,
    pub local: bool,
    pub addr: Option<SocketAddr>,
    state: Mutex<PeerState>,
}

impl PeerStatus {
    pub fn state(&self) -> MutexGuard<'_, PeerState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[derive(Debug)]
pub struct SectionStatus {
    pub name: String,
    pub disabled: bool,
    /// When the process read the section (epoch µs), as HAProxy's `last_change`.
    pub created_us: i64,
    /// The shared tables' names (the table ids `show table` knows).
    pub tables: Vec<String>,
    /// In declaration order (the dump lists them newest first, as HAProxy links them).
    pub peers: Vec<PeerStatus>,
    /// A full resync was learnt (HAProxy's RESYNC_LOCAL|RESYNC_REMOTE flags).
    pub resynced: std::sync::atomic::AtomicBool,
    pub task_calls: std::sync::atomic::AtomicU64,
}

/// Every active section, as configured.
#[derive(Debug, Default)]
pub struct Registry {
    pub sections: Vec<SectionStatus>,
}

impl Registry {
    pub fn from_config(cfg: &[PeersSection], created_us: i64) -> Registry {
        Registry {
            sections: cfg
                .iter()
                .filter(|s| s.active)
                .map(|s| SectionStatus {
                    name: s.name.clone(),
                    disabled: s.disabled,
                    created_us,
                    tables: Vec::new(),
                    peers: s
                        .peers
                        .iter()
                        .map(|p| PeerStatus {
                            name: p.name.clone(),
                            local: p.local,
                            addr: p.addr,
                            state: Mutex::new(PeerState::default()),
                        })
                        .collect(),
                    resynced: Default::default(),
                    task_calls: Default::default(),
                })
                .collect(),
        }
    }

    pub fn section(&self, name: &str) -> Option<&SectionStatus> {
        self.sections.iter().find(|s| s.name == name)
    }
}

impl SectionStatus {
    pub fn peer(&self, name: &str) -> Option<&PeerStatus> {
        self.peers.iter().find(|p| p.name == name)
    }
}

fn status_str(code: u16) -> &'static str {
    match code {
        100 => "CONN",
        110 => "HSHK",
        200 => "ESTA",
        300 => "RETR",
        501 => "PROT",
        502 => "VERS",
        503 => "NAME",
        504 => "UNKN",
        _ => "NONE",
    }
}

/// HAProxy's `human_time(ms / 1000, 1)`.
fn human(ms: u64) -> String {
    portcullis_runtime_api::html::human_time(i64::try_from(ms / 1000).unwrap_or(i64::MAX))
}

/// A timer as HAProxy prints one: `<NEVER>`, `<PAST>` or what is left.
fn timer(at: Option<u64>, now: u64) -> String {
    match at {
        None => "<NEVER>".into(),
        Some(t) if t <= now => "<PAST>".into(),
        Some(t) => human(t - now),
    }
}

/// Stand-ins for the structure addresses HAProxy prints (stable per section and peer).
fn addr_of(section: usize, peer: usize, what: u64) -> u64 {
    0x5580_0010_0000 + ((section as u64) << 16) + ((peer as u64) << 8) + what * 0x10
}

/// `show peers [dict|-] [<section>]`: the words after `show peers`. `Err` is HAProxy's
/// message for an unknown section.
pub fn show_peers(
    reg: &Registry,
    words: &[&str],
    now: u64,
    utc_offset: i32,
) -> Result<String, String> {
    let mut w = words;
    if let Some(&first) = w.first()
        && (first == "dict" || first == "-")
    {
        w = &w[1..];
    }
    let target = match w.first().filter(|s| !s.is_empty()) {
        Some(n) => match reg.sections.iter().position(|s| s.name == *n) {
            Some(i) => Some(i),
            None => return Err("No such peers\n".into()),
        },
        None => None,
    };
    let mut out = String::new();
    // HAProxy's section list is newest first.
    let order: Vec<usize> = match target {
        Some(i) => vec![i],
        None => (0..reg.sections.len()).rev().collect(),
    };
    for (n, &si) in order.iter().enumerate() {
        let Some(s) = reg.sections.get(si) else {
            continue;
        };
        if n > 0 {
            out.push('\n');
        }
        let c = crate::log::format::civil(s.created_us, utc_offset);
        let resynced = s.resynced.load(std::sync::atomic::Ordering::Relaxed);
        let _ = writeln!(
            out,
            "0x{:x}: [{:02}/{}/{:04}:{:02}:{:02}:{:02}] id={} disabled={} flags=0x{:x} resync_timeout={} task_calls={}",
            addr_of(si, 0, 0),
            c.day,
            c.month_name(),
            c.year,
            c.hour,
            c.min,
            c.sec,
            s.name,
            u8::from(s.disabled),
            if resynced { 0x3 } else { 0 },
            if resynced { "<NEVER>" } else { "<PAST>" },
            s.task_calls.load(std::sync::atomic::Ordering::Relaxed)
        );
        for (pi, p) in s.peers.iter().enumerate().rev() {
            dump_peer(&mut out, s, si, pi, p, now);
        }
    }
    Ok(out)
}

fn dump_peer(out: &mut String, s: &SectionStatus, si: usize, pi: usize, p: &PeerStatus, now: u64) {
    let st = p.state().clone();
    let addr = p
        .addr
        .map_or_else(|| "0.0.0.0:0".to_string(), |a| a.to_string());
    let _ = writeln!(
        out,
        "  0x{:x}: id={}({},{}) addr={addr} last_status={} last_hdshk={}",
        addr_of(si, pi + 1, 0),
        p.name,
        if p.local { "local" } else { "remote" },
        if st.active { "active" } else { "inactive" },
        status_str(st.statuscode),
        st.last_hdshk
            .map_or_else(|| "<NEVER>".to_string(), |t| human(now.saturating_sub(t)))
    );
    let _ = writeln!(
        out,
        "        reconnect={} heartbeat={} confirm={} tx_hbt={} rx_hbt={} no_hbt={} new_conn={} proto_err={} coll={}",
        timer(st.reconnect, now),
        timer(st.heartbeat, now),
        st.confirm,
        st.tx_hbt,
        st.rx_hbt,
        st.no_hbt,
        st.new_conn,
        st.proto_err,
        st.coll
    );
    // PEER_F_ALIVE while a session runs.
    let _ = write!(
        out,
        "        flags=0x{:x}",
        if st.active { 0x2000_0000u32 } else { 0 }
    );
    if st.active {
        let _ = write!(
            out,
            " appctx:0x{:x} st0=7 st1=0 task_calls={} state=EST",
            addr_of(si, pi + 1, 1),
            st.tx_hbt + st.rx_hbt + 1
        );
        if let Some((src, dst)) = st.accepted {
            let _ = write!(out, "\n        xprt=RAW src={src} addr={dst}");
        }
    }
    let active_tables = st.active && !st.tables.is_empty();
    if active_tables {
        if let Some((i, t)) = st.tables.iter().enumerate().find(|(_, t)| t.remote_id != 0) {
            let _ = write!(
                out,
                "\n        remote_table:0x{:x} id={} local_id={} remote_id={}",
                addr_of(si, pi + 1, 2 + i as u64),
                s.tables.get(i).map_or("", String::as_str),
                i + 1,
                t.remote_id
            );
        }
        if let Some((i, t)) = st
            .tables
            .iter()
            .enumerate()
            .find(|(_, t)| t.last_pushed != 0)
        {
            let _ = write!(
                out,
                "\n        last_local_table:0x{:x} id={} local_id={} remote_id={}",
                addr_of(si, pi + 1, 2 + i as u64),
                s.tables.get(i).map_or("", String::as_str),
                i + 1,
                t.remote_id
            );
        }
    }
    if !s.tables.is_empty() {
        out.push_str("\n        shared tables:");
        for (i, name) in s.tables.iter().enumerate() {
            let t = st.tables.get(i).copied().unwrap_or_default();
            let _ = write!(
                out,
                "\n          0x{:x} local_id={} remote_id={} flags=0x0 remote_data=0x{:x}",
                addr_of(si, pi + 1, 2 + i as u64),
                i + 1,
                t.remote_id,
                t.remote_data
            );
            let _ = write!(
                out,
                "\n              last_acked={} last_pushed={} last_get={} teaching_origin=0 update={}",
                t.last_acked, t.last_pushed, t.last_get, t.last_acked
            );
            let _ = write!(
                out,
                "\n              table:0x{:x} id={name} update={} localupdate={} commitupdate={} refcnt=1",
                addr_of(si, 0, 2 + i as u64),
                t.last_pushed,
                t.last_pushed,
                t.last_pushed
            );
            out.push_str("\n        Dictionary cache not dumped (use \"show peers dict\")");
        }
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::model::{Loc, Peer};

    fn section() -> Registry {
        let loc = Loc {
            file: "t.cfg".into(),
            line: 1,
        };
        let cfg = PeersSection {
            name: "mesh".into(),
            loc: loc.clone(),
            disabled: false,
            active: true,
            peers: vec![
                Peer {
                    name: "hap".into(),
                    addr: Some("127.0.0.1:21001".parse().unwrap()),
                    local: false,
                    ssl: None,
                    loc: loc.clone(),
                },
                Peer {
                    name: "pc".into(),
                    addr: Some("127.0.0.1:21002".parse().unwrap()),
                    local: true,
                    ssl: None,
                    loc,
                },
            ],
            bind: None,
            tables: vec![],
            bind_ssl: None,
        };
        // 2026-12-04T19:04:19Z
        let mut r = Registry::from_config(&[cfg], 1_796_411_059_000_000);
        r.sections[0].tables.push("f".into());
        r
    }

    /// The layout of HAProxy 2.6's dump: the newest peer first, a line per timer group, one
    /// block per shared table.
    #[test]
    fn layout() {
        let r = section();
        {
            let mut st = r.sections[0].peers[0].state();
            st.active = true;
            st.statuscode = 200;
            st.last_hdshk = Some(7_000);
            st.reconnect = Some(14_000);
            st.heartbeat = Some(10_000);
            st.rx_hbt = 1;
            st.new_conn = 1;
            st.tables = vec![TableState {
                remote_id: 1,
                remote_data: 0x610,
                last_acked: 1,
                last_pushed: 4,
                last_get: 1,
            }];
        }
        let out = show_peers(&r, &[], 10_000, 0).unwrap();
        let want = "\
0x558000100000: [04/Dec/2026:19:04:19] id=mesh disabled=0 flags=0x0 resync_timeout=<PAST> task_calls=0
  0x558000100200: id=pc(local,inactive) addr=127.0.0.1:21002 last_status=NONE last_hdshk=<NEVER>
        reconnect=<NEVER> heartbeat=<NEVER> confirm=0 tx_hbt=0 rx_hbt=0 no_hbt=0 new_conn=0 proto_err=0 coll=0
        flags=0x0
        shared tables:
          0x558000100220 local_id=1 remote_id=0 flags=0x0 remote_data=0x0
              last_acked=0 last_pushed=0 last_get=0 teaching_origin=0 update=0
              table:0x558000100020 id=f update=0 localupdate=0 commitupdate=0 refcnt=1
        Dictionary cache not dumped (use \"show peers dict\")
  0x558000100100: id=hap(remote,active) addr=127.0.0.1:21001 last_status=ESTA last_hdshk=3s
        reconnect=4s heartbeat=<PAST> confirm=0 tx_hbt=0 rx_hbt=1 no_hbt=0 new_conn=1 proto_err=0 coll=0
        flags=0x20000000 appctx:0x558000100110 st0=7 st1=0 task_calls=2 state=EST
        remote_table:0x558000100120 id=f local_id=1 remote_id=1
        last_local_table:0x558000100120 id=f local_id=1 remote_id=1
        shared tables:
          0x558000100120 local_id=1 remote_id=1 flags=0x0 remote_data=0x610
              last_acked=1 last_pushed=4 last_get=1 teaching_origin=0 update=1
              table:0x558000100020 id=f update=4 localupdate=4 commitupdate=4 refcnt=1
        Dictionary cache not dumped (use \"show peers dict\")
";
        assert_eq!(out, want);
        assert_eq!(
            show_peers(&r, &["nope"], 0, 0),
            Err("No such peers\n".into())
        );
        assert_eq!(show_peers(&r, &["dict", "mesh"], 10_000, 0).unwrap(), want);
    }
}
