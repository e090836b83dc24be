//! portcullis's eBPF programs. Built for bpfel by proxy/build.rs (aya-build: nightly,
//! `-Z build-std=core`, bpf-linker) and embedded in the binary.
//!
//! `splice_verdict`: the sk_skb stream verdict of the `mode tcp` splice. Attached to the SOCKHASH
//! with no stream parser, so the kernel hands it each skb as it is read off the socket; it
//! redirects the bytes to the peer socket's egress under the flow-control rule of
//! `portcullis_ebpf_common::decide`.
#![no_std]
#![no_main]

use aya_ebpf::{
    EbpfContext as _,
    bindings::sk_action,
    helpers::{bpf_get_socket_cookie, bpf_probe_read_kernel},
    macros::{map, stream_verdict},
    maps::{HashMap, PerCpuArray, SockHash},
    programs::SkBuffContext,
};
use portcullis_ebpf_common::{
    Decision, Flow, FlowCtl, MAX_SOCKETS, SKB_CB_OFFSET, STAT_COUNT, STAT_DROPPED_SKBS,
    STAT_FALLBACKS, STAT_OVERLAP_BYTES, STAT_OVERLAP_SKBS, STAT_PASSED_BYTES,
    STAT_REDIRECTED_BYTES, STAT_REDIRECTED_SKBS, STAT_SEQ_UNKNOWN, STAT_TRIM_FAILED,
    STAT_UNKNOWN_SKBS, decide, seq_check,
};

#[map(name = "SPLICE")]
static SPLICE: SockHash<u64> = SockHash::with_max_entries(MAX_SOCKETS, 0);

#[map(name = "FLOWS")]
static FLOWS: HashMap<u64, Flow> = HashMap::with_max_entries(MAX_SOCKETS, 0);

#[map(name = "FLOW_CTL")]
static FLOW_CTL: HashMap<u64, FlowCtl> = HashMap::with_max_entries(MAX_SOCKETS, 0);

#[map(name = "SPLICE_STATS")]
static STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(STAT_COUNT, 0);

#[inline(always)]
fn count(stat: u32, n: u64) {
    if let Some(p) = STATS.get_ptr_mut(stat) {
        // SAFETY: a per-CPU slot; the program is not preempted on its CPU.
        unsafe { *p += n };
    }
}

#[stream_verdict]
pub fn splice_verdict(ctx: SkBuffContext) -> u32 {
    // SAFETY: the helper only reads the skb's socket.
    let mut cookie = unsafe { bpf_get_socket_cookie(ctx.as_ptr()) };
    let (Some(flow), Some(ctl)) = (FLOWS.get_ptr_mut(cookie), FLOW_CTL.get_ptr(cookie)) else {
        count(STAT_UNKNOWN_SKBS, 1);
        return sk_action::SK_PASS;
    };
    // SAFETY: map values stay valid for the program's run; only this program writes a Flow, and
    // the kernel runs it for one socket at a time (under the socket's lock).
    let (flow, ctl) = unsafe { (&mut *flow, &*ctl) };
    let len = cut_overlap(&ctx, flow);
    if flow.broken != 0 {
        count(STAT_DROPPED_SKBS, 1);
        return sk_action::SK_DROP;
    }
    match decide(flow, ctl, len) {
        Decision::Redirect => {
            let verdict = SPLICE.redirect_skb(&ctx, &mut cookie, 0);
            if verdict == i64::from(sk_action::SK_PASS) {
                flow.redirected += len;
                count(STAT_REDIRECTED_BYTES, len);
                count(STAT_REDIRECTED_SKBS, 1);
                sk_action::SK_PASS
            } else {
                // The peer is not in the SOCKHASH (yet: `attach` inserts one socket at a time;
                // or any more): these bytes go to userspace, and the direction with them, so
                // nothing is lost and nothing overtakes them.
                count(STAT_DROPPED_SKBS, 1);
                flow.fallback = 1;
                flow.passed += len;
                count(STAT_FALLBACKS, 1);
                count(STAT_PASSED_BYTES, len);
                sk_action::SK_PASS
            }
        }
        Decision::FallBack => {
            flow.fallback = 1;
            flow.passed += len;
            count(STAT_FALLBACKS, 1);
            count(STAT_PASSED_BYTES, len);
            sk_action::SK_PASS
        }
        Decision::Drop => sk_action::SK_DROP,
        Decision::Pass => {
            flow.passed += len;
            count(STAT_PASSED_BYTES, len);
            sk_action::SK_PASS
        }
    }
}

/// The largest cut `bpf_skb_adjust_room` makes at once for an sk_skb program.
const ROOM_STEP: u32 = 0xfff;
/// Cuts of [`ROOM_STEP`] at most per skb: 64 × 4095 bytes cover a 256 kB skb.
const ROOM_STEPS: u32 = 64;

/// Cuts off the head of an skb that repeats bytes already handed to the verdict (see
/// `portcullis_ebpf_common::seq_check`) and returns the skb's length.
#[inline(always)]
fn cut_overlap(ctx: &SkBuffContext, flow: &mut Flow) -> u64 {
    let len = u64::from(ctx.len());
    if len == 0 {
        return 0;
    }
    // The context pointer is the kernel's `struct sk_buff`; its first 56 bytes end with
    // TCP_SKB_CB's seq, end_seq and tcp_flags. Root may hand a kernel address to this helper.
    // SAFETY: the helper copies kernel memory safely (an error leaves the check undone).
    let Ok(head) = (unsafe { bpf_probe_read_kernel(ctx.as_ptr() as *const [u32; 14]) }) else {
        count(STAT_SEQ_UNKNOWN, 1);
        flow.seq_known = 0;
        return len;
    };
    let cb = SKB_CB_OFFSET / 4;
    let (seq, end_seq, flags) = (head[cb], head[cb + 1], head[cb + 3]);
    let expected = if flow.seq_known != 0 {
        Some(flow.next_seq as u32)
    } else {
        None
    };
    let check = seq_check(expected, seq, end_seq, flags & 1 != 0, len);
    match check.next {
        Some(n) => {
            flow.next_seq = u64::from(n);
            flow.seq_known = 1;
        }
        None => {
            count(STAT_SEQ_UNKNOWN, 1);
            flow.seq_known = 0;
        }
    }
    if check.trim == 0 {
        return len;
    }
    let mut left = check.trim;
    let mut i = 0;
    while left > 0 && i < ROOM_STEPS {
        let step = if left < ROOM_STEP { left } else { ROOM_STEP };
        if ctx.adjust_room(-(step as i32), 0, 0).is_err() {
            break;
        }
        left -= step;
        i += 1;
    }
    count(STAT_OVERLAP_SKBS, 1);
    count(STAT_OVERLAP_BYTES, u64::from(check.trim - left));
    if left > 0 {
        count(STAT_TRIM_FAILED, 1);
        flow.broken = 1;
    }
    u64::from(ctx.len())
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
