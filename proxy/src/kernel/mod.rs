//! The kernel path: the eBPF programs of `ebpf/programs` (built by build.rs, embedded here),
//! loaded once at start when a `mode tcp` proxy may use them, with detection and fallback.
//!
//! - `sockmap`: the maps of the `mode tcp` splice, opened per worker thread, and one spliced
//!   session's entries in them ([`sockmap::Splice`]).
//! - `tcpinfo`: what a socket has handed to TCP (`tcpi_bytes_acked` + `SIOCOUTQ`), which tells
//!   when the kernel has sent every redirected byte.
//!
//! Without privileges (root, or CAP_BPF + CAP_NET_ADMIN + CAP_PERFMON: the verdict reads the
//! skb's TCP sequence numbers with `bpf_probe_read_kernel`), kernel support or the embedded object,
//! sessions use the userspace relay; [`status`] says which path runs and why.

pub mod sockmap;
pub mod tcpinfo;
pub mod xdp;

use std::os::fd::{AsFd, OwnedFd};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

use aya::maps::{Map, MapData, PerCpuArray};
use aya::programs::SkSkb;

use portcullis_ebpf_common as common;

use crate::config::model::{Config, Mode};

/// The eBPF object built by build.rs (empty when built with `AYA_BUILD_SKIP=1`).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/portcullis-ebpf"));

/// The default `max-unacked`: how many redirected bytes a direction may have in the kernel,
/// not yet acknowledged by the receiver, before it moves to the userspace relay.
pub const DEFAULT_MAX_UNACKED: u64 = 4 << 20;

/// The default `bulk-rate`: a direction moving more than this many bytes a second (over
/// [`BULK_WINDOW`]) is bulk and moves to the userspace relay. Chatty traffic (API watches, RPC)
/// stays far below; a bulk transfer passes it within one window. The splice carries one skb at a
/// time through the peer's psock worker: one iperf3 stream on loopback ran at 4.0 Gbit/s spliced
/// vs 11.7 on the userspace relay and 11.9 with this rule (`cargo xtask bench`, 2026-11-30).
pub const DEFAULT_BULK_RATE: u64 = 64 << 20;

/// The window over which `bulk-rate` is measured.
pub const BULK_WINDOW: std::time::Duration = std::time::Duration::from_millis(100);

/// The loaded splice: the program stays attached while this lives (the whole process).
pub struct Loaded {
    /// Keeps the programs and maps alive.
    _ebpf: std::sync::Mutex<aya::Ebpf>,
    /// Descriptors each worker duplicates to open its own map handles.
    splice_fd: OwnedFd,
    flows_fd: OwnedFd,
    ctl_fd: OwnedFd,
    stats: std::sync::Mutex<PerCpuArray<MapData, u64>>,
    /// Sessions spliced since start, and those that are now.
    pub sessions: AtomicU64,
    pub active: AtomicU64,
    /// Sessions that could not be spliced (map full, socket refused) and used the userspace relay.
    pub attach_failures: AtomicU64,
    /// Sessions `portcullis-relay auto` moved from the userspace relay into the splice.
    pub promotions: AtomicU64,
}

struct State {
    status: String,
    loaded: Option<Loaded>,
}

static STATE: OnceLock<State> = OnceLock::new();

/// Loads the kernel path if a `mode tcp` proxy may use it (`portcullis-relay auto`, the default,
/// or `kernel`; see `config::model::Relay`). Logs which relay `mode tcp` sessions use. Call
/// once, before workers.
pub fn init(cfg: &Config) {
    let _ = STATE.get_or_init(|| {
        let wanted = cfg.proxies.iter().any(|p| {
            p.mode == Mode::Tcp
                && p.relay.engine != Some(crate::config::model::RelayEngine::Userspace)
        });
        if !wanted {
            return State {
                status: "userspace (every mode tcp proxy says portcullis-relay userspace)".into(),
                loaded: None,
            };
        }
        match load() {
            Ok(l) => {
                tracing::info!(
                    "kernel path: mode tcp sessions can be spliced in the kernel (sockmap; portcullis-relay auto moves chatty ones, kernel all)"
                );
                State {
                    status: "kernel (sockmap splice)".into(),
                    loaded: Some(l),
                }
            }
            Err(why) => {
                tracing::warn!(
                    "kernel path unavailable ({why}); mode tcp sessions use the userspace relay"
                );
                State {
                    status: format!("userspace ({why})"),
                    loaded: None,
                }
            }
        }
    });
}

/// Which relay `mode tcp` sessions use and, for the userspace one, why: e.g.
/// `kernel (sockmap splice)`, `userspace (cannot load the eBPF programs: ...)`.
pub fn status() -> &'static str {
    STATE.get().map_or("userspace (not started)", |s| &s.status)
}

/// The loaded splice, if the kernel path is usable.
pub fn loaded() -> Option<&'static Loaded> {
    STATE.get().and_then(|s| s.loaded.as_ref())
}

/// The splice's counters, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SpliceStats {
    /// Bytes the kernel redirected from one socket to its peer (never seen by userspace).
    pub redirected_bytes: u64,
    pub redirected_skbs: u64,
    /// Bytes of fallen-back directions, handed to the userspace relay.
    pub passed_bytes: u64,
    /// Directions that moved to the userspace relay (past `max-unacked`, or a failed redirect).
    pub fallbacks: u64,
    pub unknown_skbs: u64,
    /// skbs whose head repeated bytes already handed over (a partial TCP retransmission the
    /// verdict-only path reads whole), and the bytes cut off them.
    pub overlap_skbs: u64,
    pub overlap_bytes: u64,
    /// skbs whose TCP sequence numbers could not be checked, and overlaps not wholly cut off.
    pub seq_unknown: u64,
    pub trim_failed: u64,
    /// Sessions spliced since start, and now.
    pub sessions: u64,
    pub active: u64,
    pub attach_failures: u64,
    pub promotions: u64,
    /// Entries in the SOCKHASH now (two per spliced session).
    pub sockhash_entries: u64,
}

impl Loaded {
    pub fn stats(&self) -> SpliceStats {
        let mut s = SpliceStats {
            sessions: self.sessions.load(Ordering::Relaxed),
            active: self.active.load(Ordering::Relaxed),
            attach_failures: self.attach_failures.load(Ordering::Relaxed),
            promotions: self.promotions.load(Ordering::Relaxed),
            sockhash_entries: sockmap::sockhash_len(),
            ..Default::default()
        };
        if let Ok(map) = self.stats.lock() {
            let sum = |i: u32| {
                map.get(&i, 0)
                    .map(|v| v.iter().copied().fold(0u64, u64::wrapping_add))
                    .unwrap_or(0)
            };
            s.redirected_bytes = sum(common::STAT_REDIRECTED_BYTES);
            s.redirected_skbs = sum(common::STAT_REDIRECTED_SKBS);
            s.passed_bytes = sum(common::STAT_PASSED_BYTES);
            s.fallbacks = sum(common::STAT_FALLBACKS);
            s.unknown_skbs = sum(common::STAT_UNKNOWN_SKBS);
            s.overlap_skbs = sum(common::STAT_OVERLAP_SKBS);
            s.overlap_bytes = sum(common::STAT_OVERLAP_BYTES);
            s.seq_unknown = sum(common::STAT_SEQ_UNKNOWN);
            s.trim_failed = sum(common::STAT_TRIM_FAILED);
        }
        s
    }
}

/// `show splice` (a portcullis extension of the admin socket): one `name: value` line each.
pub fn show_splice() -> String {
    let mut out = format!("Status: {}\n", status());
    // The userspace relay's splice(2) through a pipe (`tcp::pipe`), whatever the status.
    for (k, v) in [
        ("PipeSplicedBytes", &crate::tcp::pipe::SPLICED_BYTES),
        (
            "PipeSplicedDirections",
            &crate::tcp::pipe::SPLICED_DIRECTIONS,
        ),
    ] {
        out.push_str(&format!(
            "{k}: {}\n",
            v.load(std::sync::atomic::Ordering::Relaxed)
        ));
    }
    if let Some(l) = loaded() {
        let s = l.stats();
        for (k, v) in [
            ("RedirectedBytes", s.redirected_bytes),
            ("RedirectedSkbs", s.redirected_skbs),
            ("PassedBytes", s.passed_bytes),
            ("Fallbacks", s.fallbacks),
            ("UnknownSkbs", s.unknown_skbs),
            ("OverlapSkbs", s.overlap_skbs),
            ("OverlapBytes", s.overlap_bytes),
            ("SeqUnknown", s.seq_unknown),
            ("TrimFailed", s.trim_failed),
            ("Sessions", s.sessions),
            ("ActiveSessions", s.active),
            ("AttachFailures", s.attach_failures),
            ("Promotions", s.promotions),
            ("SockhashEntries", s.sockhash_entries),
        ] {
            out.push_str(&format!("{k}: {v}\n"));
        }
    }
    out
}

fn load() -> Result<Loaded, String> {
    if OBJECT.is_empty() {
        return Err("eBPF programs not built (AYA_BUILD_SKIP)".into());
    }
    let mut ebpf = aya::Ebpf::load(OBJECT).map_err(|e| {
        let msg = format!("cannot load the eBPF programs: {e}");
        if is_root() {
            msg
        } else {
            format!("{msg}; needs root or CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON")
        }
    })?;
    let splice_fd = map_fd(&ebpf, common::SPLICE_MAP)?;
    let flows_fd = map_fd(&ebpf, common::FLOWS_MAP)?;
    let ctl_fd = map_fd(&ebpf, common::FLOW_CTL_MAP)?;
    let stats = match ebpf.take_map(common::STATS_MAP) {
        Some(m) => {
            PerCpuArray::try_from(m).map_err(|e| format!("map {}: {e}", common::STATS_MAP))?
        }
        None => return Err(format!("map {} missing", common::STATS_MAP)),
    };
    let sock_map_fd = match ebpf.map(common::SPLICE_MAP) {
        Some(map) => {
            let hash = aya::maps::SockHash::<&MapData, u64>::try_from(map)
                .map_err(|e| format!("map {}: {e}", common::SPLICE_MAP))?;
            hash.fd()
                .try_clone()
                .map_err(|e| format!("map {}: {e}", common::SPLICE_MAP))?
        }
        None => return Err(format!("map {} missing", common::SPLICE_MAP)),
    };
    let prog: &mut SkSkb = ebpf
        .program_mut(common::VERDICT_PROG)
        .ok_or_else(|| format!("program {} missing", common::VERDICT_PROG))?
        .try_into()
        .map_err(|e| format!("program {}: {e}", common::VERDICT_PROG))?;
    prog.load().map_err(|e| {
        let msg = format!("cannot load {}: {e}", common::VERDICT_PROG);
        if is_root() {
            msg
        } else {
            // The overlap check's bpf_probe_read_kernel needs CAP_PERFMON.
            format!("{msg}; needs root or CAP_BPF, CAP_NET_ADMIN and CAP_PERFMON")
        }
    })?;
    prog.attach(&sock_map_fd)
        .map_err(|e| format!("cannot attach {}: {e}", common::VERDICT_PROG))?;
    let loaded = Loaded {
        _ebpf: std::sync::Mutex::new(ebpf),
        splice_fd,
        flows_fd,
        ctl_fd,
        stats: std::sync::Mutex::new(stats),
        sessions: AtomicU64::new(0),
        active: AtomicU64::new(0),
        attach_failures: AtomicU64::new(0),
        promotions: AtomicU64::new(0),
    };
    // Prove a socket pair can be spliced before claiming the path works.
    sockmap::self_test(&loaded)?;
    Ok(loaded)
}

fn map_fd(ebpf: &aya::Ebpf, name: &str) -> Result<OwnedFd, String> {
    let data = match ebpf.map(name) {
        Some(Map::SockHash(d) | Map::HashMap(d)) => d,
        _ => return Err(format!("map {name} missing")),
    };
    data.fd()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| format!("map {name}: {e}"))
}

fn is_root() -> bool {
    // SAFETY: no arguments, cannot fail.
    unsafe { libc::geteuid() == 0 }
}
