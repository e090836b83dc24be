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
/// skbs that began with bytes TCP had already delivered (a partial retransmission, queued
/// untrimmed): the verdict cut those bytes off (see [`seq_check`]).
pub const STAT_OVERLAP_SKBS: u32 = 6;
/// Bytes cut off those skbs.
pub const STAT_OVERLAP_BYTES: u32 = 7;
/// skbs whose TCP sequence numbers did not match their length (the control block could not be
/// read as expected): no overlap check for them, nor for the next one of their socket.
pub const STAT_SEQ_UNKNOWN: u32 = 8;
/// Overlaps the verdict could not cut off entirely (`bpf_skb_adjust_room` failed).
pub const STAT_TRIM_FAILED: u32 = 9;
/// Number of counters in [`STATS_MAP`].
pub const STAT_COUNT: u32 = 10;

/// Where `struct tcp_skb_cb` (`TCP_SKB_CB(skb)`: `seq`, `end_seq`, then at +12 `tcp_flags`)
/// lies in `struct sk_buff`: `skb->cb`, after the list/rbnode union (24 bytes), `sk` and
/// `tstamp` on a 64-bit kernel. [`seq_check`] ignores an skb whose numbers do not fit its length,
/// so a kernel laid out otherwise only loses the check.
pub const SKB_CB_OFFSET: usize = 40;

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
    /// The TCP sequence number that follows the last byte the verdict was handed (valid when
    /// `seq_known` is nonzero).
    pub next_seq: u64,
    /// Nonzero once `next_seq` is known.
    pub seq_known: u64,
    /// Nonzero once an skb's repeated head could not be cut off wholly: the verdict drops the
    /// direction's data from then on and userspace resets the session, rather than let the peer
    /// receive bytes twice.
    pub broken: u64,
}

/// What [`seq_check`] found in an skb.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeqCheck {
    /// Bytes at the head of the skb that were in an earlier skb: to cut off before the verdict.
    pub trim: u32,
    /// The sequence number following this skb's data; `None` when its numbers do not fit its
    /// length (nothing is trusted then).
    pub next: Option<u32>,
}

/// Checks an skb the kernel hands the verdict against the stream so far.
///
/// The verdict-only sockmap path reads whole skbs off the receive queue (`tcp_read_skb`), and
/// TCP queues a partial retransmission (`seq < rcv_nxt < end_seq`) untrimmed, relying on
/// `copied_seq` to skip its head, which `tcp_read_skb` ignores: without this, the verdict would
/// redirect those bytes a second time. `expected`: the sequence number following the previous
/// skb's data; `seq`, `end_seq`, `fin`: from `TCP_SKB_CB(skb)` (`end_seq` counts the FIN).
#[inline(always)]
pub fn seq_check(expected: Option<u32>, seq: u32, end_seq: u32, fin: bool, len: u64) -> SeqCheck {
    let data_end = end_seq.wrapping_sub(u32::from(fin));
    if u64::from(data_end.wrapping_sub(seq)) != len {
        return SeqCheck {
            trim: 0,
            next: None,
        };
    }
    let trim = match expected {
        // Serial number arithmetic: `expected` is ahead of `seq` by less than 2^31.
        Some(e) if (e.wrapping_sub(seq) as i32) > 0 => e.wrapping_sub(seq),
        _ => 0,
    };
    SeqCheck {
        // TCP never queues an skb wholly below rcv_nxt; if one came, cut nothing rather than all.
        trim: if u64::from(trim) < len { trim } else { 0 },
        next: Some(data_end),
    }
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
            ..Flow::default()
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
    fn a_partial_retransmission_is_cut_to_its_new_bytes() {
        // 100 bytes delivered up to 1100; the retransmission covers 1000..1300.
        let c = seq_check(Some(1100), 1000, 1300, false, 300);
        assert_eq!(
            c,
            SeqCheck {
                trim: 100,
                next: Some(1300)
            }
        );
        // In order: nothing to cut. A FIN counts in end_seq, not in the length.
        assert_eq!(
            seq_check(Some(1300), 1300, 1401, true, 100),
            SeqCheck {
                trim: 0,
                next: Some(1400)
            }
        );
    }

    #[test]
    fn sequence_numbers_wrap() {
        let c = seq_check(Some(10), u32::MAX - 9, 50, false, 60);
        assert_eq!(
            c,
            SeqCheck {
                trim: 20,
                next: Some(50)
            }
        );
    }

    #[test]
    fn numbers_that_do_not_fit_the_length_are_not_trusted() {
        assert_eq!(
            seq_check(Some(1100), 1000, 1300, false, 299),
            SeqCheck {
                trim: 0,
                next: None
            }
        );
    }

    #[test]
    fn the_first_skb_or_one_ahead_is_left_alone() {
        assert_eq!(seq_check(None, 5000, 5100, false, 100).trim, 0);
        assert_eq!(seq_check(Some(4000), 5000, 5100, false, 100).trim, 0);
        // Wholly old (TCP never queues one): cut nothing rather than everything.
        assert_eq!(seq_check(Some(6000), 5000, 5100, false, 100).trim, 0);
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
