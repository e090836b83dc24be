//! `xdp_filter`: per-source limits and allow/deny prefix lists for the protected TCP ports, in
//! front of the network stack. The rules and their arithmetic are `portcullis_ebpf_common::xdp`;
//! portcullis fills the maps from the HAProxy rules the kernel can enforce (see
//! `proxy/src/kernel/xdp.rs`). Its own object (`portcullis-xdp`) so that loading the splice never
//! touches bpffs.
#![no_std]
#![no_main]

use aya_ebpf::{
    bindings::xdp_action,
    helpers::bpf_ktime_get_ns,
    macros::{map, xdp},
    maps::{HashMap, LpmTrie, PerCpuArray, lpm_trie::Key},
    programs::XdpContext,
};
use portcullis_ebpf_common::xdp::{
    DEFAULT_SOURCES, Lpm4, Lpm6, MAX_PORTS, MAX_PREFIXES, NONE, PKT_GROUP, PortRule, SrcKey,
    SrcState, Verdict, XSTAT_COUNT, XSTAT_OTHER, XSTAT_SYNS, lpm4, lpm6,
};

#[map(name = "XDP_PORTS")]
static PORTS: HashMap<u32, PortRule> = HashMap::with_max_entries(MAX_PORTS, 0);

#[map(name = "XDP_LIST4")]
static LIST4: LpmTrie<Lpm4, u8> = LpmTrie::with_max_entries(MAX_PREFIXES, 0);

#[map(name = "XDP_LIST6")]
static LIST6: LpmTrie<Lpm6, u8> = LpmTrie::with_max_entries(MAX_PREFIXES, 0);

#[map(name = "XDP_SRC")]
static SRC: HashMap<SrcKey, SrcState> = HashMap::with_max_entries(DEFAULT_SOURCES, 0);

#[map(name = "XDP_STATS")]
static STATS: PerCpuArray<u64> = PerCpuArray::with_max_entries(XSTAT_COUNT, 0);

const ETH_HLEN: usize = 14;
const ETH_P_IP: u16 = 0x0800;
const ETH_P_IPV6: u16 = 0x86DD;
const IPPROTO_TCP: u8 = 6;

#[inline(always)]
fn count(stat: u32) {
    if let Some(p) = STATS.get_ptr_mut(stat) {
        // SAFETY: a per-CPU slot; the program is not preempted on its CPU.
        unsafe { *p += 1 };
    }
}

/// `n` bytes at `off` in the packet, if inside it.
#[inline(always)]
fn bytes<const N: usize>(ctx: &XdpContext, off: usize) -> Option<[u8; N]> {
    let start = ctx.data();
    let end = ctx.data_end();
    if start + off + N > end {
        return None;
    }
    // SAFETY: bounds checked just above against data_end.
    Some(unsafe { *((start + off) as *const [u8; N]) })
}

struct Pkt {
    /// Source as IPv6 (IPv4 mapped).
    src: [u8; 16],
    v4: bool,
    dport: u16,
    syn: bool,
}

#[inline(always)]
fn parse(ctx: &XdpContext) -> Option<Pkt> {
    let eth = bytes::<2>(ctx, 12)?;
    let proto = u16::from_be_bytes(eth);
    let mut src = [0u8; 16];
    let (l4, v4) = match proto {
        ETH_P_IP => {
            let h = bytes::<20>(ctx, ETH_HLEN)?;
            if h[9] != IPPROTO_TCP {
                return None;
            }
            // A later fragment has no TCP header: let the stack reassemble it.
            if (u16::from_be_bytes([h[6], h[7]]) & 0x1FFF) != 0 {
                return None;
            }
            let ihl = ((h[0] & 0x0F) as usize) * 4;
            if ihl < 20 {
                return None;
            }
            src[10] = 0xFF;
            src[11] = 0xFF;
            src[12] = h[12];
            src[13] = h[13];
            src[14] = h[14];
            src[15] = h[15];
            (ETH_HLEN + ihl, true)
        }
        ETH_P_IPV6 => {
            let h = bytes::<40>(ctx, ETH_HLEN)?;
            // Extension headers are left to the stack.
            if h[6] != IPPROTO_TCP {
                return None;
            }
            let mut i = 0;
            while i < 16 {
                src[i] = h[8 + i];
                i += 1;
            }
            (ETH_HLEN + 40, false)
        }
        _ => return None,
    };
    let tcp = bytes::<14>(ctx, l4)?;
    let dport = u16::from_be_bytes([tcp[2], tcp[3]]);
    let flags = tcp[13];
    Some(Pkt {
        src,
        v4,
        dport,
        syn: flags & 0x02 != 0 && flags & 0x10 == 0,
    })
}

#[inline(always)]
fn listed(id: u32, p: &Pkt) -> bool {
    if p.v4 {
        let key = Key::new(64, lpm4(id, [p.src[12], p.src[13], p.src[14], p.src[15]]));
        LIST4.get(&key).is_some()
    } else {
        let key = Key::new(160, lpm6(id, p.src));
        LIST6.get(&key).is_some()
    }
}

/// Counts an event for (group, source); None when the map has no room for a new source.
#[inline(always)]
fn hit(group: u32, src: [u8; 16], now: u64, period: u64) -> Option<u32> {
    let key = SrcKey { group, addr: src };
    if let Some(st) = SRC.get_ptr_mut(&key) {
        // SAFETY: the value stays valid during the program; concurrent CPUs may race on the
        // same source and lose an event, never corrupt the map.
        return Some(unsafe { (*st).hit(now, period) });
    }
    let mut st = SrcState::new(now);
    let rate = st.hit(now, period);
    SRC.insert(&key, &st, 0).ok()?;
    Some(rate)
}

#[inline(always)]
fn decide(p: &Pkt, rule: &PortRule, now: u64) -> Verdict {
    if rule.allow != NONE && !listed(rule.allow, p) {
        return Verdict::NotAllowed;
    }
    if rule.deny != NONE && listed(rule.deny, p) {
        return Verdict::Denied;
    }
    if rule.pkt_max != NONE {
        match hit(PKT_GROUP, p.src, now, 1000) {
            None => return Verdict::MapFull,
            Some(r) if r > rule.pkt_max => return Verdict::PktRate,
            Some(_) => {}
        }
    }
    if p.syn && rule.table != NONE && (p.v4 || rule.table_v4_only == 0) {
        match hit(rule.table, p.src, now, u64::from(rule.syn_period_ms)) {
            None => return Verdict::MapFull,
            Some(r) if rule.syn_max != NONE && r > rule.syn_max => return Verdict::SynRate,
            Some(_) => {}
        }
    }
    Verdict::Pass
}

#[xdp]
pub fn xdp_filter(ctx: XdpContext) -> u32 {
    let Some(p) = parse(&ctx) else {
        return xdp_action::XDP_PASS;
    };
    // SAFETY: read-only lookup of a plain value.
    let Some(rule) = (unsafe { PORTS.get(&u32::from(p.dport)) }) else {
        count(XSTAT_OTHER);
        return xdp_action::XDP_PASS;
    };
    if p.syn {
        count(XSTAT_SYNS);
    }
    // SAFETY: the helper has no arguments.
    let now = unsafe { bpf_ktime_get_ns() } / 1_000_000;
    let v = decide(&p, rule, now);
    count(v.stat());
    if v == Verdict::Pass {
        xdp_action::XDP_PASS
    } else {
        xdp_action::XDP_DROP
    }
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 13] = *b"Dual MIT/GPL\0";
