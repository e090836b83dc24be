//! What portcullis and its eBPF programs (`ebpf/programs`) share: map names, map value layouts
//! (`#[repr(C)]`) and the sockmap verdict's flow-control rule, which is pure and tested here.
//!
//! The splice keys every map by a socket's cookie (`SO_COOKIE`, `bpf_get_socket_cookie`): the
//! SOCKHASH entry under a socket's cookie is its *peer*, so the verdict running on one socket's
//! bytes redirects them to the other socket's egress with the cookie it already has.
#![no_std]

/// SOCKHASH: cookie of a spliced socket → the peer socket its bytes are redirected to.
pub const SPLICE_MAP: &str = "SPLICE";
/// HASH: cookie of a spliced socket → [`Flow`] (written by the kernel only).
pub const FLOWS_MAP: &str = "FLOWS";
/// HASH: cookie of a spliced socket → [`FlowCtl`] (written by userspace only).
pub const FLOW_CTL_MAP: &str = "FLOW_CTL";
/// PER_CPU_ARRAY of u64 counters, indexed by the `STAT_*` constants.
pub const STATS_MAP: &str = "SPLICE_STATS";
/// The stream verdict program.
pub const VERDICT_PROG: &str = "splice_verdict";

/// Spliced sockets the maps hold at most (two per session).
pub const MAX_SOCKETS: u32 = 65536;

/// Bytes redirected to a peer's egress.
pub const STAT_REDIRECTED_BYTES: u32 = 0;
/// Redirect calls (one per skb).
pub const STAT_REDIRECTED_SKBS: u32 = 1;
/// Bytes handed to userspace (`SK_PASS`) because their direction fell back.
pub const STAT_PASSED_BYTES: u32 = 2;
/// Directions that fell back to userspace (their un-acked bytes passed the limit).
pub const STAT_FALLBACKS: u32 = 3;
/// skbs whose redirect failed (the peer not in the SOCKHASH): passed to userspace, and their
/// direction falls back.
pub const STAT_DROPPED_SKBS: u32 = 4;
/// skbs seen on a socket with no [`Flow`] (passed to userspace).
pub const STAT_UNKNOWN_SKBS: u32 = 5;
/// Number of counters in [`STATS_MAP`].
pub const STAT_COUNT: u32 = 6;

/// One direction of a spliced session, keyed by the cookie of the socket the bytes arrive on.
/// Only the kernel writes it once userspace has created it zeroed.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flow {
    /// Bytes redirected to the peer socket's egress.
    pub redirected: u64,
    /// Bytes handed to userspace after the direction fell back.
    pub passed: u64,
    /// Nonzero once the direction has fell back to userspace (it stays there).
    pub fallback: u64,
}

/// Userspace's side of one direction. Only userspace writes it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowCtl {
    /// Bytes the peer socket has had acknowledged (`tcpi_bytes_acked`), as last sampled.
    pub acked: u64,
    /// The most redirected-but-unacknowledged bytes the direction may have in the kernel.
    pub limit: u64,
}

/// What the verdict does with an skb of `len` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Redirect to the peer's egress.
    Redirect,
    /// This skb would pass the limit: the direction falls back to userspace, this skb first.
    FallBack,
    /// The direction is already in userspace.
    Pass,
    /// An skb with no payload (a bare FIN): dropped, since redirecting it would make the
    /// peer's egress send zero bytes, which the kernel reports as a broken pipe on the peer.
    /// TCP has already recorded the FIN itself, so userspace still sees the end of stream.
    Drop,
}

/// The flow-control rule. A direction redirects while `redirected - acked + len <= limit`, where
/// `acked` lags the truth (userspace samples it), so the kernel never holds more than `limit`
/// bytes of a direction; past it the direction moves to the userspace relay for good, which
/// reads only as fast as the receiver drains (TCP backpressure).
#[inline(always)]
pub fn decide(flow: &Flow, ctl: &FlowCtl, len: u64) -> Decision {
    if len == 0 {
        return Decision::Drop;
    }
    if flow.fallback != 0 {
        return Decision::Pass;
    }
    let unacked = flow.redirected.saturating_sub(ctl.acked);
    if unacked.saturating_add(len) > ctl.limit {
        Decision::FallBack
    } else {
        Decision::Redirect
    }
}

pub mod xdp;

#[cfg(feature = "user")]
mod user {
    // SAFETY: plain #[repr(C)] structs of u64s, no padding, any bit pattern is valid.
    unsafe impl aya::Pod for super::Flow {}
    unsafe impl aya::Pod for super::FlowCtl {}
    // SAFETY: #[repr(C)] structs of integers and byte arrays laid out without padding (checked by
    // the size tests in `xdp`); any bit pattern is valid.
    unsafe impl aya::Pod for super::xdp::PortRule {}
    unsafe impl aya::Pod for super::xdp::SrcKey {}
    unsafe impl aya::Pod for super::xdp::SrcState {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(redirected: u64, fallback: u64) -> Flow {
        Flow {
            redirected,
            passed: 0,
            fallback,
        }
    }

    #[test]
    fn redirects_up_to_the_limit_inclusive() {
        let ctl = FlowCtl {
            acked: 1000,
            limit: 500,
        };
        assert_eq!(decide(&flow(1000, 0), &ctl, 500), Decision::Redirect);
        assert_eq!(decide(&flow(1200, 0), &ctl, 300), Decision::Redirect);
        assert_eq!(decide(&flow(1200, 0), &ctl, 301), Decision::FallBack);
    }

    #[test]
    fn a_stale_acked_count_only_makes_it_stricter() {
        let ctl = FlowCtl {
            acked: 0,
            limit: 100,
        };
        assert_eq!(decide(&flow(90, 0), &ctl, 20), Decision::FallBack);
    }

    #[test]
    fn acked_ahead_of_redirected_counts_as_nothing_unacked() {
        // bytes_acked counts the FIN too: it may pass the redirected count by one.
        let ctl = FlowCtl {
            acked: 11,
            limit: 10,
        };
        assert_eq!(decide(&flow(10, 0), &ctl, 10), Decision::Redirect);
    }

    #[test]
    fn empty_skbs_are_dropped_whatever_the_state() {
        let ctl = FlowCtl {
            acked: 0,
            limit: 100,
        };
        assert_eq!(decide(&flow(0, 0), &ctl, 0), Decision::Drop);
        assert_eq!(decide(&flow(0, 1), &ctl, 0), Decision::Drop);
    }

    #[test]
    fn fallback_is_for_good() {
        let ctl = FlowCtl {
            acked: 0,
            limit: u64::MAX,
        };
        assert_eq!(decide(&flow(0, 1), &ctl, 1), Decision::Pass);
    }
}
