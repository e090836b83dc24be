//! The XDP filter's maps and its per-packet decision, shared by `ebpf/programs` (the `xdp_filter`
//! program) and portcullis (`proxy/src/kernel/xdp.rs`, which fills the maps from the HAProxy
//! rules that the kernel can enforce). The decision and the rate arithmetic are pure and tested
//! here on the host.
//!
//! For a packet to a protected TCP port (a key of [`PORTS_MAP`]):
//! 1. a source missing from the port's allow list (`reject if !{ src … }`) is dropped;
//! 2. a source in the port's deny list (`reject if { src … }`) is dropped;
//! 3. the source's packets are counted (`packet-rate`) and past the limit dropped;
//! 4. a SYN is counted in the source's connection rate, as `track-sc0 src` counts a connection,
//!    and dropped when the rate is then above the limit (`reject if { sc_conn_rate(0) gt N }`).
//!    Every SYN counts, dropped or not, as HAProxy counts rejected connections.
//!
//! A source the rate map has no room for is dropped on a protected port (fail closed), and
//! counted.

/// HASH: destination port (u32, host order) → [`PortRule`]. Not pinned: each process loads its
/// own rules before it takes the interface over.
pub const PORTS_MAP: &str = "XDP_PORTS";
/// LPM_TRIE: [`Lpm4`] key (list id + IPv4 prefix) → u8, for allow and deny lists.
pub const LIST4_MAP: &str = "XDP_LIST4";
/// LPM_TRIE: [`Lpm6`] key (list id + IPv6 prefix) → u8.
pub const LIST6_MAP: &str = "XDP_LIST6";
/// HASH: [`SrcKey`] → [`SrcState`], per-source counters. Pinned: a new process adopts it.
pub const SRC_MAP: &str = "XDP_SRC";
/// PER_CPU_ARRAY of u64 counters, indexed by the `XSTAT_*` constants. Pinned.
pub const XSTATS_MAP: &str = "XDP_STATS";
/// The XDP program.
pub const XDP_PROG: &str = "xdp_filter";

/// Protected ports the map holds at most.
pub const MAX_PORTS: u32 = 256;
/// Prefixes the allow/deny lists hold at most (per family).
pub const MAX_PREFIXES: u32 = 65536;
/// Default size of [`SRC_MAP`] (portcullis sizes it from the stick tables, with headroom).
pub const DEFAULT_SOURCES: u32 = 65536;

/// Packets to protected ports that passed every check.
pub const XSTAT_PASSED: u32 = 0;
/// Dropped: source in a deny list.
pub const XSTAT_DENIED: u32 = 1;
/// Dropped: source missing from an allow list.
pub const XSTAT_NOT_ALLOWED: u32 = 2;
/// Dropped: SYN past the connection rate.
pub const XSTAT_SYN_RATE: u32 = 3;
/// Dropped: packet past the packet rate.
pub const XSTAT_PKT_RATE: u32 = 4;
/// Dropped: no room for the source in [`SRC_MAP`].
pub const XSTAT_MAP_FULL: u32 = 5;
/// Packets not for a protected port (passed untouched).
pub const XSTAT_OTHER: u32 = 6;
/// SYNs to protected ports seen (passed or dropped).
pub const XSTAT_SYNS: u32 = 7;
/// Number of counters.
pub const XSTAT_COUNT: u32 = 8;

/// No list / no limit.
pub const NONE: u32 = u32::MAX;

/// What the kernel enforces on one destination port.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortRule {
    /// Allow list id ([`NONE`]: none).
    pub allow: u32,
    /// Deny list id ([`NONE`]: none).
    pub deny: u32,
    /// Stick table id the connection rate counts in ([`NONE`]: no SYN limit).
    pub table: u32,
    /// SYNs above this rate are dropped.
    pub syn_max: u32,
    /// The rate's period (ms).
    pub syn_period_ms: u32,
    /// Nonzero: the table is `type ip` (IPv6 sources are not tracked, as in HAProxy).
    pub table_v4_only: u32,
    /// Packets per second above this are dropped ([`NONE`]: no limit).
    pub pkt_max: u32,
    pub _pad: u32,
}

impl PortRule {
    pub const OPEN: PortRule = PortRule {
        allow: NONE,
        deny: NONE,
        table: NONE,
        syn_max: NONE,
        syn_period_ms: 1000,
        table_v4_only: 0,
        pkt_max: NONE,
        _pad: 0,
    };
}

/// Key of the IPv4 LPM trie: `prefix_len` counts the 32 bits of the list id plus the address
/// prefix, so each list is its own subtree.
pub type Lpm4 = [u8; 8];
/// Key of the IPv6 LPM trie (list id, then 16 address bytes).
pub type Lpm6 = [u8; 20];

/// The LPM data for list `id` and address bytes `addr` (network order).
pub fn lpm4(id: u32, addr: [u8; 4]) -> Lpm4 {
    let i = id.to_be_bytes();
    [i[0], i[1], i[2], i[3], addr[0], addr[1], addr[2], addr[3]]
}

pub fn lpm6(id: u32, addr: [u8; 16]) -> Lpm6 {
    let mut k = [0u8; 20];
    let i = id.to_be_bytes();
    let mut n = 0;
    while n < 4 {
        k[n] = i[n];
        n += 1;
    }
    while n < 20 {
        k[n] = addr[n - 4];
        n += 1;
    }
    k
}

/// Per-source key: the counter group (a stick table id, or [`PKT_GROUP`]) and the source as an
/// IPv6 address (IPv4 mapped to `::ffff:a.b.c.d`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SrcKey {
    pub group: u32,
    pub addr: [u8; 16],
}

/// The group of the per-source packet counters.
pub const PKT_GROUP: u32 = 0xFFFF_FFFE;

/// HAProxy's `freq_ctr` over a period, as the stick tables count (`stick::FreqCtr`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SrcState {
    /// Start of the current period (ms on the kernel's monotonic clock).
    pub curr_tick: u64,
    pub curr: u32,
    pub prev: u32,
    /// Last event (ms): userspace drops entries idle for two periods.
    pub last: u64,
}

impl SrcState {
    pub fn new(now: u64) -> SrcState {
        SrcState {
            curr_tick: now,
            curr: 0,
            prev: 0,
            last: now,
        }
    }

    /// Counts one event at `now` and returns the rate over the sliding `period` including it.
    #[inline(always)]
    pub fn hit(&mut self, now: u64, period: u64) -> u32 {
        let period = if period == 0 { 1 } else { period };
        let elapsed = now.saturating_sub(self.curr_tick);
        if elapsed >= period {
            if elapsed < 2 * period {
                self.prev = self.curr;
                self.curr_tick += period;
            } else {
                self.prev = 0;
                self.curr_tick = now;
            }
            self.curr = 0;
        }
        self.curr = self.curr.saturating_add(1);
        self.last = now;
        let into = now.saturating_sub(self.curr_tick);
        let remain = period.saturating_sub(into);
        // `remain` <= `period`, so the share fits in u32 whenever `prev` does.
        let share = (self.prev as u64) * remain / period;
        self.curr.saturating_add(share as u32)
    }

    /// Whether the entry has been idle long enough to drop (nothing left in the window).
    pub fn idle(&self, now: u64, period: u64) -> bool {
        now.saturating_sub(self.last) >= 2 * period.max(1)
    }
}

/// What to do with a packet, and why.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Denied,
    NotAllowed,
    SynRate,
    PktRate,
    MapFull,
}

impl Verdict {
    /// The `XSTAT_*` counter of the verdict.
    pub fn stat(self) -> u32 {
        match self {
            Verdict::Pass => XSTAT_PASSED,
            Verdict::Denied => XSTAT_DENIED,
            Verdict::NotAllowed => XSTAT_NOT_ALLOWED,
            Verdict::SynRate => XSTAT_SYN_RATE,
            Verdict::PktRate => XSTAT_PKT_RATE,
            Verdict::MapFull => XSTAT_MAP_FULL,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_have_no_padding() {
        assert_eq!(core::mem::size_of::<PortRule>(), 32);
        assert_eq!(core::mem::size_of::<SrcKey>(), 20);
        assert_eq!(core::mem::size_of::<SrcState>(), 24);
    }

    #[test]
    fn rate_counts_like_haproxy() {
        let mut s = SrcState::new(0);
        for i in 1..=10 {
            assert_eq!(s.hit(100, 1000), i);
        }
        // A quarter into the next period: 1 + 10 * 750 / 1000.
        assert_eq!(s.hit(1250, 1000), 8);
        assert_eq!(s.hit(5000, 1000), 1);
        assert!(!s.idle(6000, 1000));
        assert!(s.idle(7000, 1000));
    }

    #[test]
    fn lpm_keys_put_the_list_first() {
        assert_eq!(lpm4(2, [10, 0, 0, 1]), [0, 0, 0, 2, 10, 0, 0, 1]);
        let k = lpm6(1, [0xfe; 16]);
        assert_eq!(&k[..4], &[0, 0, 0, 1]);
        assert_eq!(k[4], 0xfe);
    }
}
