//! The XDP filter (`portcullis-xdp <iface>…`, a portcullis extension): the `tcp-request
//! connection` rules of the frontends that the kernel can enforce, moved in front of the network
//! stack so that a flood is dropped before it costs a socket. The same rules keep running in
//! userspace, so behaviour never depends on the filter being attached.
//!
//! Expressible, per frontend, in rule order up to the first `tcp-request connection accept`:
//! - `reject if { src <nets>|-f <file> }` (or a named ACL of such lines): a deny list;
//! - `reject if !{ src … }` / `reject unless { src … }`: an allow list;
//! - `track-sc0 src [table <t>]` then `reject if { sc_conn_rate(0) gt <n> }` where the table
//!   stores `conn_rate(<period>)`: a per-source SYN rate.
//!
//! The frontend's TCP bind ports are the protected ports. [`plan`] (pure) turns the configuration
//! into map contents; [`init`] loads the `portcullis-xdp` object, fills its maps and attaches it.
//! The per-source map and the counters are pinned under [`PIN_DIR`] and the attachment is a
//! pinned BPF link there, so a reloaded process adopts them (its program replaces the old one
//! atomically, the per-source rates carry over).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use portcullis_ebpf_common::xdp::{
    self as common, Lpm4, Lpm6, NONE, PKT_GROUP, PortRule, SrcKey, SrcState,
};

use crate::config::model::{
    BindAddr, Config, Proxy, StickKey, StickStore, TcpRequestAction, XdpCfg, XdpMode,
};

/// Where the filter's shared maps and links are pinned by default (`pin-dir` changes it).
pub const PIN_DIR: &str = "/sys/fs/bpf/portcullis";

/// `statfs` magic of bpffs.
const BPF_FS_MAGIC: i64 = 0xcafe_4a11;

/// The XDP object built by build.rs (empty when built with `AYA_BUILD_SKIP=1`).
static OBJECT: &[u8] = aya::include_bytes_aligned!(concat!(env!("OUT_DIR"), "/portcullis-xdp"));

/// What the maps will hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Protected ports and their rules.
    pub ports: Vec<(u16, PortRule)>,
    /// (list id, network, prefix length) of every allow/deny list.
    pub nets: Vec<(u32, IpAddr, u8)>,
    /// Per-source counter groups and their periods (ms), for expiry.
    pub groups: Vec<(u32, u64)>,
    /// Size of the per-source map.
    pub sources: u32,
    /// What the kernel enforces, one line each (for `show xdp`).
    pub rules: Vec<String>,
    /// The stick tables the per-source map mirrors: (table, group, period ms, IPv4 only).
    pub mirrored: Vec<(String, u32, u64, bool)>,
}

/// One condition the kernel can hold.
enum Term {
    /// `{ src … }` (negated: `!{ src … }`).
    Src { nets: Vec<(IpAddr, u8)>, neg: bool },
    /// `{ sc_conn_rate(0) gt <n> }`.
    ConnRate(u32),
}

/// A condition with one term: braces or a named ACL, negated by `!` or `unless`.
fn term(p: &Proxy, unless: bool, tokens: &[String]) -> Option<Term> {
    let mut neg = unless;
    let mut toks = tokens;
    // `!{`, `!` then `{`, `!name`.
    let mut first = toks.first()?.as_str();
    while let Some(rest) = first.strip_prefix('!') {
        neg = !neg;
        if rest.is_empty() {
            toks = toks.get(1..)?;
            first = toks.first()?.as_str();
        } else {
            first = rest;
        }
    }
    let exprs: Vec<&[String]> = if first == "{" {
        let inner = toks.get(1..)?;
        let close = inner.iter().position(|t| t == "}")?;
        if close + 2 != toks.len() {
            return None;
        }
        vec![inner.get(..close)?]
    } else {
        if toks.len() != 1 {
            return None;
        }
        let defs: Vec<&[String]> = p
            .acls
            .iter()
            .filter(|a| a.name == first)
            .map(|a| a.tokens.as_slice())
            .collect();
        if defs.is_empty() {
            return None;
        }
        defs
    };
    if let [e] = exprs.as_slice()
        && let [kw, op, n] = e
        && kw == "sc_conn_rate(0)"
        && op == "gt"
        && !neg
    {
        return n.parse().ok().map(Term::ConnRate);
    }
    let mut nets = Vec::new();
    for e in exprs {
        nets.extend(crate::http::acl::src_networks(e)?);
    }
    Some(Term::Src { nets, neg })
}

/// The rate part of a `track-sc0` table: (group, period ms, IPv4 only, size).
fn conn_rate_table(cfg: &Config, name: &str) -> Option<(u32, u64, bool, u32)> {
    let (i, p) = cfg
        .proxies
        .iter()
        .enumerate()
        .find(|(_, p)| p.name == name && p.stick_table.is_some())?;
    let t = p.stick_table.as_ref()?;
    let period = t.store.iter().find_map(|s| match s {
        StickStore::ConnRate(d) => Some(d.as_millis() as u64),
        _ => None,
    })?;
    Some((i as u32, period.max(1), t.key == StickKey::Ip, t.size))
}

/// The map contents for `cfg` (pure; `-f` pattern files are read).
pub fn plan(cfg: &Config) -> Plan {
    let mut out = Plan::default();
    let mut table_sizes: u64 = 0;
    for (fi, p) in cfg.proxies.iter().enumerate() {
        if !p.cap.frontend || p.disabled {
            continue;
        }
        let ports: Vec<u16> = p
            .binds
            .iter()
            .filter_map(|b| match &b.addr {
                BindAddr::Inet(a) => Some(a.port()),
                _ => None,
            })
            .collect();
        if ports.is_empty() {
            continue;
        }
        let mut rule = PortRule::OPEN;
        let (deny_id, allow_id) = (2 * fi as u32, 2 * fi as u32 + 1);
        let mut tracked: Option<(u32, u64, bool, u32)> = None;
        let mut tracked_name = String::new();
        let mut lines = Vec::new();
        for t in p
            .tcp_request
            .iter()
            .filter(|t| t.at == crate::config::model::TcpAt::Connection)
        {
            match (&t.action, &t.cond) {
                // A final accept may let through what a later reject would refuse.
                (TcpRequestAction::Accept, _) => break,
                (TcpRequestAction::TrackSc(tr), None) if tr.sc == 0 && tr.key == "src" => {
                    let name = tr.table.clone().unwrap_or_else(|| p.name.clone());
                    tracked = conn_rate_table(cfg, &name);
                    tracked_name = name;
                }
                (TcpRequestAction::Reject, Some(c)) => match term(p, c.unless, &c.tokens) {
                    Some(Term::Src { nets, neg: false }) => {
                        rule.deny = deny_id;
                        lines.push(format!("deny {} prefixes", nets.len()));
                        out.nets
                            .extend(nets.into_iter().map(|(a, l)| (deny_id, a, l)));
                    }
                    // Two allow lists must both hold: the kernel keeps the first, the other
                    // stays in userspace.
                    Some(Term::Src { nets, neg: true }) if rule.allow == NONE => {
                        rule.allow = allow_id;
                        lines.push(format!("allow only {} prefixes", nets.len()));
                        out.nets
                            .extend(nets.into_iter().map(|(a, l)| (allow_id, a, l)));
                    }
                    Some(Term::ConnRate(n)) => {
                        if let Some((group, period, v4, size)) = tracked
                            && (rule.table == NONE || rule.syn_max > n)
                        {
                            rule.table = group;
                            rule.syn_max = n;
                            rule.syn_period_ms = period.min(u64::from(u32::MAX)) as u32;
                            rule.table_v4_only = u32::from(v4);
                            table_sizes += u64::from(size);
                            if !out.groups.iter().any(|(g, _)| *g == group) {
                                out.groups.push((group, period));
                                out.mirrored.push((tracked_name.clone(), group, period, v4));
                            }
                            lines.push(format!("SYN rate over {n} per {period} ms"));
                        }
                    }
                    _ => {}
                },
                _ => {}
            }
        }
        if let Some(n) = cfg.global.xdp.as_ref().and_then(|x| x.packet_rate) {
            rule.pkt_max = n;
            lines.push(format!("packets over {n}/s"));
        }
        if rule == PortRule::OPEN {
            continue;
        }
        for port in ports {
            if out.ports.iter().any(|(q, _)| *q == port) {
                continue;
            }
            out.ports.push((port, rule));
            out.rules
                .push(format!("port {port} ({}): {}", p.name, lines.join(", ")));
        }
    }
    if out.ports.iter().any(|(_, r)| r.pkt_max != NONE) {
        out.groups.push((PKT_GROUP, 1000));
        table_sizes += 65536;
    }
    // Headroom: a quarter more than the tables hold.
    let want = (table_sizes + table_sizes / 4).clamp(1024, 1 << 22) as u32;
    out.sources = cfg
        .global
        .xdp
        .as_ref()
        .and_then(|x| x.max_sources)
        .unwrap_or(want);
    out
}

/// The counters of the filter, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XdpStats {
    pub passed: u64,
    pub denied: u64,
    pub not_allowed: u64,
    pub syn_rate: u64,
    pub pkt_rate: u64,
    pub map_full: u64,
    pub other: u64,
    pub syns: u64,
    pub sources: u64,
}

struct Loaded {
    ebpf: Mutex<aya::Ebpf>,
    /// The pin directory.
    dir: PathBuf,
    /// Interfaces and their pinned link.
    links: Vec<(String, PathBuf)>,
    prog_id: u32,
    plan: Plan,
    mode: &'static str,
}

struct State {
    status: String,
    loaded: Option<Loaded>,
}

static STATE: OnceLock<State> = OnceLock::new();

/// Loads and attaches the filter if `portcullis-xdp` is configured; logs what happened. Call
/// once at start, before the listeners accept.
pub fn init(cfg: &Config) {
    let _ = STATE.get_or_init(|| {
        let Some(x) = cfg.global.xdp.as_ref() else {
            return State {
                status: "off (no portcullis-xdp)".into(),
                loaded: None,
            };
        };
        let plan = plan(cfg);
        match load(&plan, x) {
            Ok(l) => {
                tracing::info!(
                    "XDP filter attached to {} ({} mode), {} protected ports",
                    x.interfaces.join(", "),
                    l.mode,
                    plan.ports.len()
                );
                start_sweeper();
                State {
                    status: format!("attached to {} ({} mode)", x.interfaces.join(","), l.mode),
                    loaded: Some(l),
                }
            }
            Err(why) => {
                tracing::warn!(
                    "XDP filter unavailable ({why}); the same rules are enforced in userspace"
                );
                State {
                    status: format!("userspace only ({why})"),
                    loaded: None,
                }
            }
        }
    });
}

/// `attached to …`, `off …` or `userspace only (<why>)`.
pub fn status() -> &'static str {
    STATE.get().map_or("off (not started)", |s| &s.status)
}

fn is_bpffs(p: &Path) -> bool {
    let Ok(c) = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: a NUL-terminated path and a statfs to write into.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    unsafe { libc::statfs(c.as_ptr(), &mut st) == 0 && st.f_type as i64 == BPF_FS_MAGIC }
}

/// Creates `dir` on a bpffs: mounts one on /sys/fs/bpf when that is where `dir` is and none is.
fn prepare_pin_dir(dir: &Path) -> Result<(), String> {
    let root = Path::new("/sys/fs/bpf");
    if dir.starts_with(root) && !is_bpffs(root) {
        std::fs::create_dir_all(root).map_err(|e| format!("mkdir /sys/fs/bpf: {e}"))?;
        // SAFETY: NUL-terminated literals; no data argument.
        let r = unsafe {
            libc::mount(
                c"bpf".as_ptr(),
                c"/sys/fs/bpf".as_ptr(),
                c"bpf".as_ptr(),
                0,
                std::ptr::null(),
            )
        };
        if r != 0 {
            return Err(format!(
                "cannot mount bpffs on /sys/fs/bpf: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("mkdir {}: {e}", dir.display()))?;
    if !is_bpffs(dir) {
        return Err(format!("{} is not on a bpf filesystem", dir.display()));
    }
    Ok(())
}

/// A pinned map of another size (or layout) than this build wants cannot be adopted: drop it.
fn drop_stale_pin(dir: &Path, name: &str, max_entries: u32) {
    let path = dir.join(name);
    if !path.exists() {
        return;
    }
    let ok = aya::maps::MapData::from_pin(&path)
        .ok()
        .and_then(|m| m.info().ok())
        .is_some_and(|i| i.max_entries() == max_entries);
    if !ok {
        let _ = std::fs::remove_file(&path);
    }
}

fn load(plan: &Plan, x: &XdpCfg) -> Result<Loaded, String> {
    if OBJECT.is_empty() {
        return Err("eBPF programs not built (AYA_BUILD_SKIP)".into());
    }
    let dir = PathBuf::from(x.pin_dir.as_deref().unwrap_or(PIN_DIR));
    prepare_pin_dir(&dir)?;
    drop_stale_pin(&dir, common::SRC_MAP, plan.sources);
    drop_stale_pin(&dir, common::XSTATS_MAP, common::XSTAT_COUNT);
    let src_pin = dir.join(common::SRC_MAP);
    let stats_pin = dir.join(common::XSTATS_MAP);
    let mut ebpf = aya::EbpfLoader::new()
        .map_max_entries(common::SRC_MAP, plan.sources)
        .map_pin_path(common::SRC_MAP, src_pin.as_path())
        .map_pin_path(common::XSTATS_MAP, stats_pin.as_path())
        .load(OBJECT)
        .map_err(|e| format!("cannot load the XDP program: {e}"))?;
    fill(&mut ebpf, plan)?;
    let prog: &mut aya::programs::Xdp = ebpf
        .program_mut(common::XDP_PROG)
        .ok_or_else(|| format!("program {} missing", common::XDP_PROG))?
        .try_into()
        .map_err(|e| format!("program {}: {e}", common::XDP_PROG))?;
    prog.load()
        .map_err(|e| format!("cannot load {}: {e}", common::XDP_PROG))?;
    let prog_id = prog.info().map(|i| i.id()).unwrap_or(0);
    let (flags, mode_name) = match x.mode {
        XdpMode::Native => (aya::programs::XdpMode::Driver, "native"),
        XdpMode::Generic => (aya::programs::XdpMode::Skb, "generic"),
        XdpMode::Auto => (aya::programs::XdpMode::Default, "auto"),
    };
    let mut links = Vec::new();
    for ifname in &x.interfaces {
        let path = dir.join(format!("link-{ifname}"));
        // A pinned link is the previous process' attachment: replace its program atomically.
        let adopted = aya::programs::links::PinnedLink::from_pin(&path)
            .ok()
            .and_then(|pinned| {
                let fd: aya::programs::links::FdLink = pinned.into();
                aya::programs::xdp::XdpLink::try_from(fd).ok()
            })
            .map(|link| prog.attach_to_link(link));
        let id = match adopted {
            Some(Ok(id)) => id,
            _ => {
                let _ = std::fs::remove_file(&path);
                prog.attach(ifname, flags)
                    .map_err(|e| format!("cannot attach to {ifname}: {e}"))?
            }
        };
        let link = prog
            .take_link(id)
            .map_err(|e| format!("link on {ifname}: {e}"))?;
        if !path.exists() {
            let fd = aya::programs::links::FdLink::try_from(link)
                .map_err(|e| format!("link on {ifname} cannot be pinned: {e}"))?;
            let pinned = fd
                .pin(&path)
                .map_err(|e| format!("cannot pin the link on {ifname}: {e}"))?;
            // The pin keeps the link: the descriptor may go.
            drop(pinned);
        } else {
            // Adopted: the pin already holds it.
            drop(link);
        }
        links.push((ifname.clone(), path));
    }
    Ok(Loaded {
        ebpf: Mutex::new(ebpf),
        dir,
        links,
        prog_id,
        plan: plan.clone(),
        mode: mode_name,
    })
}

fn fill(ebpf: &mut aya::Ebpf, plan: &Plan) -> Result<(), String> {
    use aya::maps::{HashMap, lpm_trie::Key, lpm_trie::LpmTrie};
    {
        let map = ebpf.map_mut(common::PORTS_MAP).ok_or("XDP_PORTS missing")?;
        let mut ports: HashMap<_, u32, PortRule> =
            HashMap::try_from(map).map_err(|e| format!("XDP_PORTS: {e}"))?;
        for (port, rule) in &plan.ports {
            ports
                .insert(u32::from(*port), *rule, 0)
                .map_err(|e| format!("XDP_PORTS: {e}"))?;
        }
    }
    for (id, addr, len) in &plan.nets {
        match addr {
            IpAddr::V4(v4) => {
                let map = ebpf.map_mut(common::LIST4_MAP).ok_or("XDP_LIST4 missing")?;
                let mut t: LpmTrie<_, Lpm4, u8> =
                    LpmTrie::try_from(map).map_err(|e| format!("XDP_LIST4: {e}"))?;
                let key = Key::new(32 + u32::from(*len), common::lpm4(*id, v4.octets()));
                t.insert(&key, 1, 0)
                    .map_err(|e| format!("XDP_LIST4: {e}"))?;
            }
            IpAddr::V6(v6) => {
                let map = ebpf.map_mut(common::LIST6_MAP).ok_or("XDP_LIST6 missing")?;
                let mut t: LpmTrie<_, Lpm6, u8> =
                    LpmTrie::try_from(map).map_err(|e| format!("XDP_LIST6: {e}"))?;
                let key = Key::new(32 + u32::from(*len), common::lpm6(*id, v6.octets()));
                t.insert(&key, 1, 0)
                    .map_err(|e| format!("XDP_LIST6: {e}"))?;
            }
        }
    }
    Ok(())
}

/// Drops per-source entries idle for two periods of their group, every second: the map keeps
/// room for new sources (a full map fails closed).
fn start_sweeper() {
    let r = std::thread::Builder::new()
        .name("xdp-sweeper".into())
        .spawn(|| {
            loop {
                std::thread::sleep(std::time::Duration::from_secs(1));
                sweep();
            }
        });
    if let Err(e) = r {
        tracing::warn!("XDP: cannot start the source sweeper: {e}");
    }
}

/// The kernel's monotonic clock in ms (what `bpf_ktime_get_ns` reads).
fn ktime_ms() -> u64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write into.
    if unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut t) } != 0 {
        return 0;
    }
    t.tv_sec as u64 * 1000 + t.tv_nsec as u64 / 1_000_000
}

/// Gives the kernel the `conn_rate` a mirrored stick table learnt for `src` from a peer or
/// from the previous process of a reload (`f` on the table's clock at `now`), unless the kernel
/// already counts more for it: a source over its limit elsewhere stays limited here, in XDP
/// too, from its first SYN.
pub fn seed_conn_rate(table: &str, src: IpAddr, f: &crate::stick::FreqCtr, now: u64) {
    let Some(l) = STATE.get().and_then(|s| s.loaded.as_ref()) else {
        return;
    };
    let Some((_, group, period, v4_only)) = l.plan.mirrored.iter().find(|m| m.0 == table) else {
        return;
    };
    let addr = match src {
        IpAddr::V4(a) => a.to_ipv6_mapped().octets(),
        IpAddr::V6(a) if !*v4_only => a.octets(),
        IpAddr::V6(_) => return,
    };
    let (tick, curr, prev) = f.parts();
    let kt = ktime_ms();
    let seeded = SrcState {
        curr_tick: kt.saturating_sub(now.saturating_sub(tick)),
        curr,
        prev,
        last: kt,
    };
    let rate = |s: &SrcState| {
        crate::stick::FreqCtr::from_parts(s.curr_tick, s.curr, s.prev).read(kt, *period)
    };
    let want = rate(&seeded);
    if want == 0 {
        return;
    }
    let Ok(mut ebpf) = l.ebpf.lock() else { return };
    let Some(map) = ebpf.map_mut(common::SRC_MAP) else {
        return;
    };
    let Ok(mut map) = aya::maps::HashMap::<_, SrcKey, SrcState>::try_from(map) else {
        return;
    };
    let key = SrcKey {
        group: *group,
        addr,
    };
    if map.get(&key, 0).is_ok_and(|cur| rate(&cur) >= want) {
        return;
    }
    // A full map keeps its entries: the userspace rules still hold for this source.
    let _ = map.insert(key, seeded, 0);
}

fn sweep() {
    let Some(l) = STATE.get().and_then(|s| s.loaded.as_ref()) else {
        return;
    };
    let now = ktime_ms();
    let Ok(mut ebpf) = l.ebpf.lock() else { return };
    let Some(map) = ebpf.map_mut(common::SRC_MAP) else {
        return;
    };
    let Ok(mut src) = aya::maps::HashMap::<_, SrcKey, SrcState>::try_from(map) else {
        return;
    };
    let stale: Vec<SrcKey> = src
        .iter()
        .filter_map(Result::ok)
        .filter(|(k, v)| {
            let period = l
                .plan
                .groups
                .iter()
                .find(|(g, _)| *g == k.group)
                .map_or(1000, |(_, p)| *p);
            v.idle(now, period)
        })
        .map(|(k, _)| k)
        .collect();
    for k in stale {
        let _ = src.remove(&k);
    }
}

fn stats(l: &Loaded) -> XdpStats {
    let mut s = XdpStats::default();
    let Ok(ebpf) = l.ebpf.lock() else { return s };
    if let Some(map) = ebpf.map(common::XSTATS_MAP)
        && let Ok(arr) = aya::maps::PerCpuArray::<_, u64>::try_from(map)
    {
        let sum = |i: u32| {
            arr.get(&i, 0)
                .map(|v| v.iter().copied().fold(0u64, u64::wrapping_add))
                .unwrap_or(0)
        };
        s.passed = sum(common::XSTAT_PASSED);
        s.denied = sum(common::XSTAT_DENIED);
        s.not_allowed = sum(common::XSTAT_NOT_ALLOWED);
        s.syn_rate = sum(common::XSTAT_SYN_RATE);
        s.pkt_rate = sum(common::XSTAT_PKT_RATE);
        s.map_full = sum(common::XSTAT_MAP_FULL);
        s.other = sum(common::XSTAT_OTHER);
        s.syns = sum(common::XSTAT_SYNS);
    }
    if let Some(map) = ebpf.map(common::SRC_MAP)
        && let Ok(src) = aya::maps::HashMap::<_, SrcKey, SrcState>::try_from(map)
    {
        s.sources = src.keys().filter(Result::is_ok).count() as u64;
    }
    s
}

/// The filter's counters, if it is attached.
pub fn counters() -> Option<XdpStats> {
    STATE.get().and_then(|s| s.loaded.as_ref()).map(stats)
}

/// The filter's counters in the Prometheus text format (appended to the exporter's page).
pub fn dump_prometheus(s: &XdpStats, out: &mut String) {
    out.push_str("# HELP portcullis_xdp_packets_total Packets to protected ports, by the XDP filter's verdict.\n# TYPE portcullis_xdp_packets_total counter\n");
    for (v, n) in [
        ("passed", s.passed),
        ("denied", s.denied),
        ("not_allowed", s.not_allowed),
        ("syn_rate", s.syn_rate),
        ("packet_rate", s.pkt_rate),
        ("map_full", s.map_full),
    ] {
        out.push_str(&format!(
            "portcullis_xdp_packets_total{{verdict=\"{v}\"}} {n}\n"
        ));
    }
    out.push_str(&format!(
        "# HELP portcullis_xdp_syns_total SYNs to protected ports seen by the XDP filter.\n# TYPE portcullis_xdp_syns_total counter\nportcullis_xdp_syns_total {}\n# HELP portcullis_xdp_sources Sources the XDP filter counts now.\n# TYPE portcullis_xdp_sources gauge\nportcullis_xdp_sources {}\n",
        s.syns, s.sources
    ));
}

/// `show xdp` (a portcullis extension of the admin socket): `name: value` lines.
pub fn show_xdp() -> String {
    let mut out = format!("Status: {}\n", status());
    let Some(l) = STATE.get().and_then(|s| s.loaded.as_ref()) else {
        return out;
    };
    let s = stats(l);
    for (k, v) in [
        ("Passed", s.passed),
        ("DroppedDenied", s.denied),
        ("DroppedNotAllowed", s.not_allowed),
        ("DroppedSynRate", s.syn_rate),
        ("DroppedPacketRate", s.pkt_rate),
        ("DroppedMapFull", s.map_full),
        ("Syns", s.syns),
        ("OtherPackets", s.other),
        ("Sources", s.sources),
        ("MaxSources", u64::from(l.plan.sources)),
    ] {
        out.push_str(&format!("{k}: {v}\n"));
    }
    for r in &l.plan.rules {
        out.push_str(&format!("Rule: {r}\n"));
    }
    out
}

/// At exit: if this process' program is still the one attached (no newer process adopted the
/// links), unpin them and the shared maps, so the filter leaves with the process. A process that
/// handed over to a new one leaves everything to it.
pub fn shutdown() {
    let Some(l) = STATE.get().and_then(|s| s.loaded.as_ref()) else {
        return;
    };
    let mut ours = false;
    for (_, path) in &l.links {
        let Ok(pinned) = aya::programs::links::PinnedLink::from_pin(path) else {
            continue;
        };
        let fd: aya::programs::links::FdLink = pinned.into();
        if fd.info().is_ok_and(|i| i.program_id() == l.prog_id) {
            ours = true;
            let _ = std::fs::remove_file(path);
        }
    }
    if ours {
        let _ = std::fs::remove_file(l.dir.join(common::SRC_MAP));
        let _ = std::fs::remove_file(l.dir.join(common::XSTATS_MAP));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> Config {
        let env = |_: &str| None;
        crate::config::parse_str("t.cfg", text, &env)
            .map_err(|e| format!("{e:?}"))
            .unwrap()
            .config
    }

    const HEAD: &str =
        "defaults\n  mode tcp\n  timeout client 1s\n  timeout server 1s\n  timeout connect 1s\n";

    #[test]
    fn rules_the_kernel_can_hold() {
        let c = cfg(&format!(
            "global\n  portcullis-xdp veth0 mode generic\n{HEAD}frontend f\n  bind 10.9.0.1:8443\n  bind :9443\n  stick-table type ip size 10k expire 30s store conn_rate(10s)\n  acl bad src 192.0.2.0/24\n  tcp-request connection reject if bad\n  tcp-request connection reject if !{{ src 10.0.0.0/8 2001:db8::/32 }}\n  tcp-request connection track-sc0 src\n  tcp-request connection reject if {{ sc_conn_rate(0) gt 20 }}\n  tcp-request connection reject if {{ dst_port 1 }}\n  default_backend b\nfrontend g\n  bind :80\n  tcp-request connection accept if {{ src 10.1.0.0/16 }}\n  tcp-request connection reject if {{ src 10.0.0.0/8 }}\n  default_backend b\nbackend b\n  server s 127.0.0.1:2\n"
        ));
        let p = plan(&c);
        let rule = PortRule {
            allow: 1,
            deny: 0,
            table: 0,
            syn_max: 20,
            syn_period_ms: 10_000,
            table_v4_only: 1,
            pkt_max: NONE,
            _pad: 0,
        };
        assert_eq!(p.ports, [(8443, rule), (9443, rule)]);
        assert_eq!(
            p.nets,
            [
                (0, "192.0.2.0".parse().unwrap(), 24),
                (1, "10.0.0.0".parse().unwrap(), 8),
                (1, "2001:db8::".parse().unwrap(), 32)
            ]
        );
        assert_eq!(p.groups, [(0, 10_000)]);
        assert_eq!(p.mirrored, [("f".to_string(), 0, 10_000, true)]);
        // 10k entries and a quarter more.
        assert_eq!(p.sources, 12_800);
        assert_eq!(
            p.rules[0],
            "port 8443 (f): deny 1 prefixes, allow only 2 prefixes, SYN rate over 20 per 10000 ms"
        );
    }

    #[test]
    fn a_rate_needs_a_tracked_conn_rate_and_sizes_can_be_forced() {
        let c = cfg(&format!(
            "global\n  portcullis-xdp eth0 max-sources 8 packet-rate 1000\n{HEAD}frontend f\n  bind :1\n  stick-table type ipv6 size 10 store conn_cur\n  tcp-request connection track-sc0 src\n  tcp-request connection reject if {{ sc_conn_rate(0) gt 20 }}\n  default_backend b\nbackend b\n  server s 127.0.0.1:2\n"
        ));
        let p = plan(&c);
        assert_eq!(p.sources, 8);
        assert_eq!(p.ports.len(), 1);
        let r = p.ports[0].1;
        assert_eq!((r.table, r.pkt_max), (NONE, 1000));
        assert_eq!(p.groups, [(PKT_GROUP, 1000)]);
    }

    #[test]
    fn prometheus_lines() {
        let mut out = String::new();
        dump_prometheus(
            &XdpStats {
                passed: 3,
                syn_rate: 580,
                sources: 2,
                ..Default::default()
            },
            &mut out,
        );
        assert!(out.contains("portcullis_xdp_packets_total{verdict=\"passed\"} 3\n"));
        assert!(out.contains("portcullis_xdp_packets_total{verdict=\"syn_rate\"} 580\n"));
        assert!(out.contains("# TYPE portcullis_xdp_sources gauge\nportcullis_xdp_sources 2\n"));
    }

    #[test]
    fn keyword_errors() {
        let errs = |g: &str| -> Vec<String> {
            let env = |_: &str| None;
            match crate::config::parse_str("t.cfg", &format!("global\n  {g}\n"), &env) {
                Ok(_) => Vec::new(),
                Err(d) => d.into_iter().map(|d| d.msg).collect(),
            }
        };
        assert_eq!(
            errs("portcullis-xdp"),
            ["'portcullis-xdp' expects at least one interface name."]
        );
        assert_eq!(
            errs("portcullis-xdp eth0 mode turbo"),
            ["'portcullis-xdp' : unknown mode 'turbo' (expects 'native', 'generic' or 'auto')."]
        );
        assert_eq!(
            errs("portcullis-xdp eth0 max-sources 0"),
            ["'portcullis-xdp' : 'max-sources' expects a positive integer (got '0')."]
        );
        assert!(errs("portcullis-xdp eth0 eth1 mode native").is_empty());
    }
}
