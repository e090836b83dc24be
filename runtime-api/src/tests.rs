//! Golden tests: a fake [`Runtime`] reproduces the state of the captured HAProxy 2.6 run
//! (`testdata/haproxy-2.6/`, seed-loopback.cfg: master1 DOWN L7STS 503, worker1/2 UP L7OK) and
//! every reply is compared byte for byte with what HAProxy printed.

use crate::cli::*;
use crate::model::*;
use crate::stat::STAT_COLS;
use std::net::IpAddr;

pub(crate) const GOLDEN_CSV: &str = include_str!("../testdata/haproxy-2.6/show-stat.csv");
pub(crate) const GOLDEN_CSV_AFTER: &str =
    include_str!("../testdata/haproxy-2.6/show-stat-after-drain-maint.csv");
const GOLDEN_SERVERS_ONLY: &str =
    include_str!("../testdata/haproxy-2.6/show-stat-servers-only.csv");
const GOLDEN_TYPED: &str = include_str!("../testdata/haproxy-2.6/show-stat-typed.txt");
const GOLDEN_INFO: &str = include_str!("../testdata/haproxy-2.6/show-info.txt");
const GOLDEN_HELP: &str = include_str!("../testdata/haproxy-2.6/help.txt");
const GOLDEN_STATE_BEFORE: &str = include_str!("../testdata/haproxy-2.6/show-servers-state.txt");
const GOLDEN_STATE_AFTER: &str =
    include_str!("../testdata/haproxy-2.6/show-servers-state-after-drain-maint.txt");
const T2_CSV: &str = include_str!("../testdata/haproxy-2.6/t2-show-stat.csv");

/// The golden CSV row of `px/sv`.
pub(crate) fn row<'a>(csv: &'a str, px: &str, sv: &str) -> Vec<&'a str> {
    csv.lines()
        .map(|l| l.split(',').collect::<Vec<_>>())
        .find(|f| f.first() == Some(&px) && f.get(1) == Some(&sv))
        .unwrap_or_else(|| panic!("no golden row {px}/{sv}"))
}

pub(crate) fn n(f: &[&str], name: &str) -> u64 {
    let i = STAT_COLS.iter().position(|c| c.name == name).unwrap();
    // Module columns sit one further right because of the "-" separator.
    let i = if i >= crate::stat::STATIC_COLS {
        i + 1
    } else {
        i
    };
    f[i].parse().unwrap_or(0)
}

/// Traffic counters as HAProxy printed them in a golden row (test fixture only: the state
/// fields are set explicitly by the scenarios).
pub(crate) fn counters(f: &[&str]) -> Counters {
    let g = |name| n(f, name);
    let g32 = |name| n(f, name) as u32;
    let mut m = ModuleCounters::default();
    for (i, name) in ["ssl_sess", "ssl_reused_sess", "ssl_failed_handshake"]
        .iter()
        .enumerate()
    {
        m.ssl[i] = g(name);
    }
    let h2 = [
        "h2_headers_rcvd",
        "h2_data_rcvd",
        "h2_settings_rcvd",
        "h2_rst_stream_rcvd",
        "h2_goaway_rcvd",
        "h2_detected_conn_protocol_errors",
        "h2_detected_strm_protocol_errors",
        "h2_rst_stream_resp",
        "h2_goaway_resp",
        "h2_open_connections",
        "h2_backend_open_streams",
        "h2_total_connections",
        "h2_backend_total_streams",
    ];
    for (i, name) in h2.iter().enumerate() {
        m.h2[i] = g(name);
    }
    let h1 = [
        "h1_open_connections",
        "h1_open_streams",
        "h1_total_connections",
        "h1_total_streams",
        "h1_bytes_in",
        "h1_bytes_out",
        "h1_spliced_bytes_in",
        "h1_spliced_bytes_out",
    ];
    for (i, name) in h1.iter().enumerate() {
        m.h1[i] = g(name);
    }
    let ls = f[55];
    Counters {
        qcur: g32("qcur"),
        qmax: g32("qmax"),
        scur: g32("scur"),
        smax: g32("smax"),
        stot: g("stot"),
        bin: g("bin"),
        bout: g("bout"),
        dreq: g("dreq"),
        dresp: g("dresp"),
        ereq: g("ereq"),
        econ: g("econ"),
        eresp: g("eresp"),
        wretr: g("wretr"),
        wredis: g("wredis"),
        lbtot: g("lbtot"),
        rate: g32("rate"),
        rate_max: g32("rate_max"),
        hrsp: [
            g("hrsp_1xx"),
            g("hrsp_2xx"),
            g("hrsp_3xx"),
            g("hrsp_4xx"),
            g("hrsp_5xx"),
            g("hrsp_other"),
        ],
        req_rate: g32("req_rate"),
        req_rate_max: g32("req_rate_max"),
        req_tot: g("req_tot"),
        cli_abrt: g("cli_abrt"),
        srv_abrt: g("srv_abrt"),
        comp_in: g("comp_in"),
        comp_out: g("comp_out"),
        comp_byp: g("comp_byp"),
        comp_rsp: g("comp_rsp"),
        lastsess_secs: if ls == "-1" || ls.is_empty() {
            None
        } else {
            ls.parse().ok()
        },
        qtime: g32("qtime"),
        ctime: g32("ctime"),
        rtime: g32("rtime"),
        ttime: g32("ttime"),
        qtime_max: g32("qtime_max"),
        ctime_max: g32("ctime_max"),
        rtime_max: g32("rtime_max"),
        ttime_max: g32("ttime_max"),
        conn_rate: g32("conn_rate"),
        conn_rate_max: g32("conn_rate_max"),
        conn_tot: g("conn_tot"),
        intercepted: g("intercepted"),
        dcon: g("dcon"),
        dses: g("dses"),
        wrew: g("wrew"),
        connect: g("connect"),
        reuse: g("reuse"),
        cache_lookups: g("cache_lookups"),
        cache_hits: g("cache_hits"),
        eint: g("eint"),
        srv_icur: g32("srv_icur"),
        idle_conn_cur: g32("idle_conn_cur"),
        safe_conn_cur: g32("safe_conn_cur"),
        used_conn_cur: g32("used_conn_cur"),
        need_conn_est: g32("need_conn_est"),
        modules: m,
    }
}

fn ip(s: &str) -> Option<IpAddr> {
    s.parse().ok()
}

fn frontend(csv: &str, name: &str, id: u32, mode: ProxyMode) -> ProxySnap {
    let f = row(csv, name, "FRONTEND");
    ProxySnap {
        name: name.into(),
        id,
        mode,
        frontend: Some(FrontendSnap {
            state: FrontendState::Open,
            maxconn: 4000,
            rate_limit: 0,
            counters: counters(&f),
        }),
        ..ProxySnap::default()
    }
}

fn backend(csv: &str, name: &str, id: u32, mode: ProxyMode, servers: Vec<ServerSnap>) -> ProxySnap {
    let f = row(csv, name, "BACKEND");
    ProxySnap {
        name: name.into(),
        id,
        mode,
        backend: Some(BackendSnap {
            fullconn: 400,
            algo: "roundrobin".into(),
            dynamic_weights: true,
            dynamic_servers: true,
            down_trans: n(&f, "chkdown"),
            last_change_secs: n(&f, "lastchg") as u32,
            downtime_secs: n(&f, "downtime") as u32,
            counters: counters(&f),
            ..BackendSnap::default()
        }),
        servers,
        ..ProxySnap::default()
    }
}

struct Srv<'a> {
    name: &'a str,
    id: u32,
    addr: &'a str,
    port: u16,
    check_port: u16,
    rise: u32,
    fall: u32,
    up: bool,
    status: CheckStatus,
    code: u32,
    desc: &'a str,
}

fn server(csv: &str, px: &str, s: Srv) -> ServerSnap {
    let f = row(csv, px, s.name);
    ServerSnap {
        name: s.name.into(),
        id: s.id,
        op_state: if s.up {
            OpState::Running
        } else {
            OpState::Stopped
        },
        addr: ip(s.addr),
        port: s.port,
        uweight: 1,
        iweight: 1,
        eweight: 1,
        check: CheckSnap {
            configured: true,
            enabled: true,
            status: s.status,
            code: s.code,
            duration_ms: n(&f, "check_duration"),
            desc: s.desc.into(),
            rise: s.rise,
            fall: s.fall,
            health: if s.up { s.rise + s.fall - 1 } else { 0 },
            port: s.check_port,
            failed: n(&f, "chkfail"),
            down_trans: n(&f, "chkdown"),
            ..CheckSnap::default()
        },
        // HAProxy 2.6's `port` keyword sets the agent port too.
        agent: CheckSnap {
            port: s.check_port,
            ..CheckSnap::default()
        },
        last_change_secs: n(&f, "lastchg") as u32,
        downtime_secs: n(&f, "downtime") as u32,
        counters: counters(&f),
        ..ServerSnap::default()
    }
}

/// seed-loopback.cfg as HAProxy 2.6 ran it for the golden capture, counters from `csv`.
pub(crate) fn seed_snapshot(csv: &str) -> Snapshot {
    let hb = "istio-http-backend";
    let http_srv = |name, id, addr, up, status, code, desc| Srv {
        name,
        id,
        addr,
        port: 30080,
        check_port: 30180,
        rise: 2,
        fall: 2,
        up,
        status,
        code,
        desc,
    };
    let tcp_srv = |name, id, addr, port| Srv {
        name,
        id,
        addr,
        port,
        check_port: 0,
        rise: 2,
        fall: 3,
        up: true,
        status: CheckStatus::L4Ok,
        code: 0,
        desc: "",
    };
    let http_servers = vec![
        server(
            csv,
            hb,
            http_srv(
                "master1",
                1,
                "127.0.1.12",
                false,
                CheckStatus::L7Sts,
                503,
                "Service Unavailable",
            ),
        ),
        server(
            csv,
            hb,
            http_srv("worker1", 2, "127.0.1.13", true, CheckStatus::L7Ok, 200, ""),
        ),
        server(
            csv,
            hb,
            http_srv("worker2", 3, "127.0.1.14", true, CheckStatus::L7Ok, 200, ""),
        ),
    ];
    let kube = vec![server(
        csv,
        "kube-apiserver",
        tcp_srv("master1", 1, "127.0.1.12", 6443),
    )];
    let grpc = vec![
        server(
            csv,
            "istio-grpc-backend",
            tcp_srv("worker1", 1, "127.0.1.13", 31443),
        ),
        server(
            csv,
            "istio-grpc-backend",
            tcp_srv("worker2", 2, "127.0.1.14", 31443),
        ),
    ];
    Snapshot {
        info: golden_info(),
        proxies: vec![
            frontend(csv, "http-redirect", 2, ProxyMode::Http),
            frontend(csv, "istio-https-l7", 3, ProxyMode::Http),
            backend(csv, hb, 4, ProxyMode::Http, http_servers),
            frontend(csv, "kube-apiserver", 5, ProxyMode::Tcp),
            backend(csv, "kube-apiserver", 6, ProxyMode::Tcp, kube),
            frontend(csv, "istio-grpc-passthrough", 7, ProxyMode::Tcp),
            backend(csv, "istio-grpc-backend", 8, ProxyMode::Tcp, grpc),
            frontend(csv, "stats", 9, ProxyMode::Http),
        ],
    }
}

fn golden_info() -> ProcessInfo {
    ProcessInfo {
        name: "HAProxy".into(),
        version: "2.6.12-1+deb12u4".into(),
        release_date: "2026/10/17".into(),
        nbthread: 2,
        pid: 14641,
        uptime_secs: 15,
        pool_alloc_bytes: 134104,
        pool_used_bytes: 134104,
        ulimit_n: 8041,
        maxsock: 8041,
        maxconn: 4000,
        hard_maxconn: 4000,
        cum_conns: 48,
        cum_req: 9,
        cum_ssl_conns: 1,
        max_conn_rate: 3,
        max_sess_rate: 3,
        max_ssl_rate: 1,
        ssl_frontend_max_key_rate: 1,
        tasks: 26,
        idle_pct: 100,
        node: "vm".into(),
        jobs: 7,
        listeners: 6,
        total_bytes_out: 52884,
        bytes_out_rate: 36256,
        build_info: "2.6.12-1+deb12u4".into(),
        start_time_sec: 1796015679,
        ..ProcessInfo::default()
    }
}

/// A runtime over a snapshot that applies state the way HAProxy does, and logs every call.
pub(crate) struct FakeRuntime {
    pub snap: Snapshot,
    pub calls: Vec<String>,
}

impl FakeRuntime {
    pub fn new(snap: Snapshot) -> FakeRuntime {
        FakeRuntime {
            snap,
            calls: Vec::new(),
        }
    }
    fn srv(&mut self, r: SrvRef) -> &mut ServerSnap {
        &mut self.snap.proxies[r.proxy].servers[r.server]
    }
    fn after_change(&mut self, r: SrvRef) {
        let px = &mut self.snap.proxies[r.proxy];
        let down = crate::stat::backend_agg(px).tot_weight == 0;
        if let Some(be) = &mut px.backend
            && down
        {
            be.down_trans += 1;
            be.last_change_secs = 0;
            be.downtime_secs = 0;
        }
    }
}

impl Runtime for FakeRuntime {
    fn snapshot(&self) -> Snapshot {
        self.snap.clone()
    }
    fn add_server(
        &mut self,
        backend: usize,
        name: &str,
        addr: &str,
        kws: &[String],
    ) -> Result<(), String> {
        self.calls
            .push(format!("add {backend} {name} {addr} {}", kws.join(" ")));
        let px = &mut self.snap.proxies[backend];
        if px.servers.iter().any(|s| s.name == name) {
            return Err("Already exists a server with the same name in backend.".into());
        }
        let id = (1..)
            .find(|i| px.servers.iter().all(|s| s.id != *i))
            .unwrap();
        px.servers.push(ServerSnap {
            name: name.into(),
            id,
            admin: AdminFlags(AdminFlags::FMAINT),
            op_state: OpState::Stopped,
            ..ServerSnap::default()
        });
        Ok(())
    }
    fn set_maxconn_frontend(&mut self, proxy: usize, maxconn: u32) {
        self.calls.push(format!("maxconn fe {proxy} {maxconn}"));
    }
    fn set_maxconn_global(&mut self, maxconn: u32) {
        self.calls.push(format!("maxconn global {maxconn}"));
    }
    fn set_rate_limit(&mut self, which: crate::limits::RateLimit, value: u32) {
        self.calls.push(format!("rate {which:?} {value}"));
    }
    fn shutdown_frontend(&mut self, proxy: usize) {
        self.calls.push(format!("shutdown {proxy}"));
        if let Some(f) = self.snap.proxies[proxy].frontend.as_mut() {
            f.state = FrontendState::Stop;
        }
    }
    fn set_frontend_paused(&mut self, proxy: usize, paused: bool) {
        self.calls.push(format!("paused {proxy} {paused}"));
        if let Some(f) = self.snap.proxies[proxy].frontend.as_mut() {
            f.state = if paused {
                FrontendState::Paused
            } else {
                FrontendState::Open
            };
        }
    }
    fn del_server(&mut self, r: SrvRef) {
        self.calls
            .push(format!("del {}/{}", r.proxy_id, r.server_id));
        self.snap.proxies[r.proxy].servers.remove(r.server);
    }
    fn set_admin_state(&mut self, r: SrvRef, op: AdminOp) {
        self.calls
            .push(format!("admin {}/{} {op:?}", r.proxy_id, r.server_id));
        let sv = self.srv(r);
        match op {
            AdminOp::Ready => {
                sv.admin.0 &= !(AdminFlags::FMAINT | AdminFlags::FDRAIN);
                sv.check.paused = false;
                sv.check.health = sv.check.rise;
                sv.op_state = OpState::Running;
            }
            AdminOp::Drain => sv.admin.0 |= AdminFlags::FDRAIN,
            AdminOp::Maint => {
                sv.admin.0 |= AdminFlags::FMAINT;
                if sv.op_state != OpState::Stopped {
                    sv.check.down_trans += 1;
                }
                sv.op_state = OpState::Stopped;
                sv.check.paused = true;
                sv.check.health = 0;
            }
        }
        sv.last_change_secs = 0;
        self.after_change(r);
    }
    fn set_health(&mut self, r: SrvRef, op: HealthOp) {
        self.calls
            .push(format!("health {}/{} {op:?}", r.proxy_id, r.server_id));
    }
    fn set_agent(&mut self, r: SrvRef, up: bool) {
        self.calls
            .push(format!("agent {}/{} {up}", r.proxy_id, r.server_id));
    }
    fn set_weight(&mut self, r: SrvRef, w: u32) {
        self.calls
            .push(format!("weight {}/{} {w}", r.proxy_id, r.server_id));
        let sv = self.srv(r);
        sv.uweight = w;
        sv.eweight = w;
    }
    fn set_addr(&mut self, r: SrvRef, addr: Option<IpAddr>, port: Option<PortSpec>) {
        self.calls.push(format!(
            "addr {}/{} {addr:?} {port:?}",
            r.proxy_id, r.server_id
        ));
        let sv = self.srv(r);
        if addr.is_some() {
            sv.addr = addr;
        }
        match port {
            Some(PortSpec::Fixed(p)) => {
                sv.port = p;
                sv.port_map = false;
            }
            Some(PortSpec::Mapped(p)) => {
                sv.port = p;
                sv.port_map = true;
            }
            None => {}
        }
    }
    fn set_check_addr(&mut self, r: SrvRef, addr: IpAddr, port: Option<u16>) {
        self.calls.push(format!(
            "check-addr {}/{} {addr} {port:?}",
            r.proxy_id, r.server_id
        ));
    }
    fn set_check_port(&mut self, r: SrvRef, port: u16) {
        self.calls
            .push(format!("check-port {}/{} {port}", r.proxy_id, r.server_id));
    }
    fn set_agent_addr(&mut self, r: SrvRef, addr: IpAddr, port: Option<u16>) {
        self.calls.push(format!(
            "agent-addr {}/{} {addr} {port:?}",
            r.proxy_id, r.server_id
        ));
    }
    fn set_agent_port(&mut self, r: SrvRef, port: u16) {
        self.calls
            .push(format!("agent-port {}/{} {port}", r.proxy_id, r.server_id));
    }
    fn set_agent_send(&mut self, r: SrvRef, text: &str) {
        self.calls
            .push(format!("agent-send {}/{} {text}", r.proxy_id, r.server_id));
    }
    fn set_check_enabled(&mut self, r: SrvRef, on: bool) {
        self.calls
            .push(format!("check {}/{} {on}", r.proxy_id, r.server_id));
        self.srv(r).check.enabled = on;
    }
    fn set_agent_enabled(&mut self, r: SrvRef, on: bool) {
        self.calls
            .push(format!("agent-check {}/{} {on}", r.proxy_id, r.server_id));
    }
    fn set_maxconn_server(&mut self, r: SrvRef, maxconn: u32) {
        self.calls
            .push(format!("maxconn {}/{} {maxconn}", r.proxy_id, r.server_id));
    }
    fn clear_counters(&mut self, all: bool) {
        self.calls.push(format!("clear {all}"));
    }
    fn shutdown_sessions(&mut self, r: SrvRef) {
        self.calls
            .push(format!("shutdown {}/{}", r.proxy_id, r.server_id));
    }
}

pub(crate) fn run(rt: &mut FakeRuntime, level: Level, line: &str) -> String {
    let mut s = CliSession::new(level);
    execute(line, &mut s, rt).data
}

fn admin(rt: &mut FakeRuntime, line: &str) -> String {
    run(rt, Level::Admin, line)
}

/// Drives the golden run's two commands through the CLI: traffic counters come from the later
/// capture, state counters (chkdown, lastchg, downtime) from the earlier one, and the fake
/// runtime moves them as HAProxy does.
pub(crate) fn after_drain_maint() -> FakeRuntime {
    let mut snap = seed_snapshot(GOLDEN_CSV_AFTER);
    let before = seed_snapshot(GOLDEN_CSV);
    for (px, old) in snap.proxies.iter_mut().zip(&before.proxies) {
        for (sv, o) in px.servers.iter_mut().zip(&old.servers) {
            sv.check.down_trans = o.check.down_trans;
            sv.last_change_secs = o.last_change_secs;
            sv.downtime_secs = o.downtime_secs;
        }
        if let (Some(b), Some(o)) = (&mut px.backend, &old.backend) {
            b.down_trans = o.down_trans;
            b.last_change_secs = o.last_change_secs;
            b.downtime_secs = o.downtime_secs;
        }
    }
    let mut rt = FakeRuntime::new(snap);
    assert_eq!(
        admin(&mut rt, "set server istio-http-backend/worker2 state drain"),
        "\n"
    );
    assert_eq!(
        admin(&mut rt, "disable server istio-http-backend/worker1"),
        "\n"
    );
    rt
}

/// `awk -F, '/istio-http-backend/{print $2"="$18" check="$37}'`
fn awk_recipe(csv: &str) -> String {
    let mut out = String::new();
    for l in csv.lines().filter(|l| l.contains("istio-http-backend")) {
        let f: Vec<&str> = l.split(',').collect();
        let get = |i: usize| f.get(i - 1).copied().unwrap_or("");
        out.push_str(&format!("{}={} check={}\n", get(2), get(18), get(37)));
    }
    out
}

#[test]
fn show_stat_matches_haproxy_byte_for_byte() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    let out = admin(&mut rt, "show stat");
    assert_eq!(out, GOLDEN_CSV);
    let header = out.lines().next().unwrap();
    assert_eq!(
        header.split(',').count(),
        GOLDEN_CSV.lines().next().unwrap().split(',').count()
    );
    for l in out.lines().filter(|l| !l.is_empty()) {
        assert_eq!(l.split(',').count(), header.split(',').count(), "{l}");
    }
}

#[test]
fn show_stat_after_drain_and_maint_matches_haproxy() {
    let mut rt = after_drain_maint();
    assert_eq!(admin(&mut rt, "show stat"), GOLDEN_CSV_AFTER);
}

#[test]
fn seed_awk_recipe_prints_the_readme_lines() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    assert_eq!(
        awk_recipe(&admin(&mut rt, "show stat")),
        "master1=DOWN check=L7STS\nworker1=UP check=L7OK\nworker2=UP check=L7OK\nBACKEND=UP check=\n"
    );
    let mut rt = after_drain_maint();
    assert_eq!(
        awk_recipe(&admin(&mut rt, "show stat")),
        "master1=DOWN check=L7STS\nworker1=MAINT check=\nworker2=DRAIN check=L7OK\nBACKEND=DOWN check=\n"
    );
}

#[test]
fn show_stat_servers_only_filter() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    assert_eq!(admin(&mut rt, "show stat -1 4 -1"), GOLDEN_SERVERS_ONLY);
}

/// Typed lines: same objects, fields, positions, tags and types as HAProxy; string values equal;
/// numbers masked (the typed capture was taken a moment after the CSV one).
#[test]
fn show_stat_typed_matches_haproxy_modulo_counters() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    let out = admin(&mut rt, "show stat typed");
    let mask = |l: &str| -> String {
        let (head, _) = l.split_at(
            l.find(":str:")
                .map_or_else(|| l.rfind(':').unwrap(), |i| i + 4),
        );
        if head.ends_with(":str") {
            l.to_string()
        } else {
            format!("{head}:#")
        }
    };
    let got: Vec<String> = out.lines().filter(|l| !l.is_empty()).map(mask).collect();
    let want: Vec<String> = GOLDEN_TYPED
        .lines()
        .filter(|l| !l.is_empty())
        .map(mask)
        .collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g, w);
    }
    assert!(out.ends_with("\n\n"));
}

#[test]
fn show_servers_state_matches_haproxy_before_and_after() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    assert_eq!(admin(&mut rt, "show servers state"), GOLDEN_STATE_BEFORE);
    let mut rt = after_drain_maint();
    assert_eq!(admin(&mut rt, "show servers state"), GOLDEN_STATE_AFTER);
}

#[test]
fn show_info_matches_haproxy() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    assert_eq!(admin(&mut rt, "show info"), GOLDEN_INFO);
}

#[test]
fn help_matches_haproxy_at_every_level() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    for level in [Level::User, Level::Operator, Level::Admin] {
        assert_eq!(run(&mut rt, level, "help"), GOLDEN_HELP);
    }
}

/// t2.cfg (testdata): socket-stats listener, agent check, cookie, maxqueue, observe, track,
/// `disabled`, backup, no check, check+disabled, and a server whose first check is pending.
fn t2_snapshot() -> Snapshot {
    let fe = |name: &str, id| ProxySnap {
        name: name.into(),
        id,
        mode: ProxyMode::Http,
        frontend: Some(FrontendSnap {
            maxconn: 9983,
            ..FrontendSnap::default()
        }),
        ..ProxySnap::default()
    };
    let be = |cookie: Option<&str>| BackendSnap {
        fullconn: 999,
        algo: "roundrobin".into(),
        dynamic_weights: true,
        cookie: cookie.map(Into::into),
        last_change_secs: 2,
        ..BackendSnap::default()
    };
    let srv = |name: &str, id, last: u8| ServerSnap {
        name: name.into(),
        id,
        addr: ip(&format!("127.0.1.{last}")),
        port: 80,
        uweight: 1,
        iweight: 1,
        eweight: 1,
        op_state: OpState::Running,
        last_change_secs: 2,
        counters: Counters {
            lastsess_secs: None,
            ..Counters::default()
        },
        ..ServerSnap::default()
    };
    let mut s1 = srv("s1", 1, 20);
    s1.op_state = OpState::Stopped;
    s1.maxqueue = 5;
    s1.observe = true;
    s1.cookie = Some("c1".into());
    s1.downtime_secs = 2;
    s1.counters.need_conn_est = 1;
    s1.check = CheckSnap {
        configured: true,
        enabled: true,
        status: CheckStatus::L4Con,
        desc: "Connection refused".into(),
        rise: 2,
        fall: 3,
        failed: 1,
        down_trans: 1,
        ..CheckSnap::default()
    };
    s1.agent = CheckSnap {
        configured: true,
        enabled: true,
        status: CheckStatus::L4Con,
        desc: "Connection refused".into(),
        rise: 1,
        fall: 1,
        health: 1,
        port: 9999,
        ..CheckSnap::default()
    };
    let mut s2 = srv("s2", 2, 21);
    s2.op_state = OpState::Stopped;
    s2.tracks = Some(("be".into(), "s1".into()));
    let mut s3 = srv("s3", 3, 22);
    s3.op_state = OpState::Stopped;
    s3.admin = AdminFlags(AdminFlags::FMAINT | AdminFlags::CMAINT);
    let mut s4 = srv("s4", 4, 23);
    s4.backup = true;
    let s5 = srv("s5", 5, 24);
    let mut s6 = srv("s6", 6, 25);
    s6.op_state = OpState::Stopped;
    s6.admin = AdminFlags(AdminFlags::FMAINT | AdminFlags::CMAINT);
    s6.downtime_secs = 2;
    s6.check = CheckSnap {
        configured: true,
        enabled: true,
        paused: true,
        rise: 2,
        fall: 3,
        ..CheckSnap::default()
    };
    let mut x = srv("x", 1, 26);
    x.check = CheckSnap {
        configured: true,
        enabled: true,
        status: CheckStatus::Ini,
        rise: 2,
        fall: 3,
        health: 2,
        ..CheckSnap::default()
    };
    let mut fe1 = fe("fe", 2);
    fe1.socket_stats = true;
    fe1.listeners = vec![ListenerSnap {
        name: "mybind".into(),
        id: 1,
        addr: "127.0.0.1:20080".into(),
        ..ListenerSnap::default()
    }];
    let mut lsn = fe("ls", 4);
    lsn.backend = Some(be(None));
    lsn.servers = vec![x];
    let b = |b: BackendSnap| b;
    let mut beb = b(be(Some("SRV")));
    beb.counters.lastsess_secs = None;
    if let Some(l) = &mut lsn.backend {
        l.counters.lastsess_secs = None;
    }
    Snapshot {
        info: ProcessInfo::default(),
        proxies: vec![
            fe1,
            ProxySnap {
                name: "be".into(),
                id: 3,
                mode: ProxyMode::Http,
                backend: Some(beb),
                servers: vec![s1, s2, s3, s4, s5, s6],
                ..ProxySnap::default()
            },
            lsn,
        ],
    }
}

#[test]
fn t2_statuses_listener_agent_track_backup_match_haproxy() {
    let mut rt = FakeRuntime::new(t2_snapshot());
    assert_eq!(admin(&mut rt, "show stat"), T2_CSV);
}

/// Replies captured from HAProxy 2.6 on seed-loopback.cfg with `socat` (one connection per
/// case, `level admin|operator|user` sockets). Format: `### <level> <line>`, the exact reply
/// bytes, `### END`.
const CLI_REPLIES: &str = include_str!("../testdata/haproxy-2.6/cli-replies.txt");

#[test]
fn malformed_and_unauthorised_commands_reply_like_haproxy() {
    let cases = replay_golden(CLI_REPLIES);
    assert!(cases >= 100, "{cases}");
}

/// The same command lines (and a few more) after `set severity-output number|string;`, captured
/// from HAProxy 2.6 the same way: messages get `[<n>]: ` / `[<name>]: `, dumps nothing.
#[test]
fn severity_output_prefixes_messages_like_haproxy() {
    let cases = replay_golden(include_str!(
        "../testdata/haproxy-2.6/cli-severity-replies.txt"
    ));
    assert!(cases >= 200, "{cases}");
}

/// `add server` / `del server` captured from HAProxy 2.6 in this order on a fresh process (the
/// servers added by one line exist for the next): target errors, levels, maintenance-only
/// deletion, severity prefixes, and the replies HAProxy sends without their final LF.
#[test]
fn add_and_del_server_reply_like_haproxy() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    let cases = replay_golden_on(
        &mut rt,
        include_str!("../testdata/haproxy-2.6/dynamic-server-replies.txt"),
    );
    assert_eq!(cases, 23);
    // Added servers start in maintenance; the ones deleted are gone.
    let bi = rt.snap.find_backend("istio-http-backend").unwrap();
    let names: Vec<&str> = rt.snap.proxies[bi]
        .servers
        .iter()
        .map(|s| s.name.as_str())
        .collect();
    assert_eq!(names, ["master1", "worker1", "worker2"]);
    assert!(rt.calls.contains(&format!("add {bi} w4 127.0.1.15:30080 ")));
    // A backend whose algorithm is static refuses.
    rt.snap.proxies[bi]
        .backend
        .as_mut()
        .unwrap()
        .dynamic_servers = false;
    let mut s = CliSession::new(Level::Admin);
    let o = execute(
        "add server istio-http-backend/w9 1.2.3.4:80",
        &mut s,
        &mut rt,
    );
    assert_eq!(
        o.data,
        "Backend must use a dynamic load balancing to support dynamic servers.\n"
    );
}

/// `set maxconn frontend|global`, `set rate-limit` (captured from HAProxy 2.6 on the seed
/// configuration, `Hard_maxconn` 4000): errors, levels, and the values applied.
#[test]
fn maxconn_and_rate_limit_reply_like_haproxy() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    rt.snap.info.hard_maxconn = 4000;
    let cases = replay_golden_on(
        &mut rt,
        include_str!("../testdata/haproxy-2.6/limits-replies.txt"),
    );
    assert_eq!(cases, 28);
    let rates: Vec<&String> = rt.calls.iter().filter(|c| c.starts_with("rate")).collect();
    assert_eq!(
        rates,
        [
            "rate Connections 100",
            "rate Sessions 5",
            "rate HttpCompression 10240",
            "rate Connections 0"
        ]
    );
    let fe = rt
        .snap
        .proxies
        .iter()
        .position(|p| p.name == "kube-apiserver" && p.frontend.is_some())
        .unwrap();
    let applied: Vec<String> = rt
        .calls
        .iter()
        .filter(|c| c.starts_with("maxconn"))
        .cloned()
        .collect();
    assert_eq!(
        applied,
        [
            format!("maxconn fe {fe} 0"),
            format!("maxconn fe {fe} 10"),
            format!("maxconn fe {fe} 0"),
            "maxconn global 4000".to_string(),
            "maxconn global 100".to_string(),
            "maxconn global 4000".to_string(),
            "maxconn global 4000".to_string(),
        ]
    );
}

/// `enable|disable|shutdown frontend` captured from HAProxy 2.6 in this order (the state one
/// line leaves is the next one's): "already" errors, levels, severity prefixes.
#[test]
fn frontend_controls_reply_like_haproxy() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    let cases = replay_golden_on(
        &mut rt,
        include_str!("../testdata/haproxy-2.6/frontend-replies.txt"),
    );
    assert_eq!(cases, 19);
    let n = rt.calls.iter().filter(|c| c.starts_with("paused")).count();
    assert_eq!(n, 4, "{:?}", rt.calls);
    let n = rt
        .calls
        .iter()
        .filter(|c| c.starts_with("shutdown"))
        .count();
    assert_eq!(n, 1, "{:?}", rt.calls);
}

/// Runs every `### <level> <line>` block of a capture on the seed snapshot; returns the count.
fn replay_golden(golden: &str) -> usize {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    replay_golden_on(&mut rt, golden)
}

fn replay_golden_on(rt: &mut FakeRuntime, golden: &str) -> usize {
    let mut cases = 0;
    let mut failures = Vec::new();
    for block in golden.split("### END\n").filter(|b| !b.is_empty()) {
        let (head, want) = block.split_once('\n').unwrap();
        let head = head.strip_prefix("### ").unwrap();
        let (lvl, line) = head.split_once(' ').unwrap();
        let level = match lvl {
            "admin" => Level::Admin,
            "oper" => Level::Operator,
            _ => Level::User,
        };
        let mut s = CliSession::new(level);
        let got = execute(line, &mut s, rt).data;
        cases += 1;
        if got != want {
            failures.push(format!("[{head}]\n--- got\n{got}--- want\n{want}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    cases
}

/// Numbers masked: CSV cells, typed values and JSON values that are integers, and every digit
/// run in `show info` values (uptime, pid…). Text (statuses, check codes, names) stays.
fn mask(out: &str) -> String {
    let mut res = String::with_capacity(out.len());
    for line in out.split_inclusive('\n') {
        let body = line.trim_end_matches('\n');
        let masked = if line.starts_with("# ") || body.is_empty() {
            body.to_string()
        } else if body.starts_with('[') || body.starts_with('{') {
            mask_json(body)
        } else if body.contains(":str:") {
            body.to_string()
        } else if let Some(i) = typed_value_start(body) {
            let (head, rest) = body.split_at(i);
            // keep a trailing description (`:"…"`) as it is
            let desc = rest.find(":\"").map_or("", |d| &rest[d..]);
            format!("{head}#{desc}")
        } else if let Some((key, val)) = body.split_once(": ")
            && !key.contains(',')
        {
            // `show info` line: every digit run becomes one `#`, the description stays.
            let (val, desc) = val.split_at(val.find(":\"").unwrap_or(val.len()));
            format!("{key}: {}{desc}", squash_digits(val))
        } else if body.contains(',') {
            body.split(',')
                .map(|c| if c.parse::<i64>().is_ok() { "#" } else { c })
                .collect::<Vec<_>>()
                .join(",")
        } else {
            squash_digits(body)
        };
        res.push_str(&masked);
        if line.ends_with('\n') {
            res.push('\n');
        }
    }
    res
}

fn squash_digits(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        if !c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('#') {
            out.push('#');
        }
    }
    out
}

/// Where the value starts in a typed line (`...:MCP:u64:<value>`).
fn typed_value_start(l: &str) -> Option<usize> {
    for t in [":u32:", ":u64:", ":s32:", ":s64:"] {
        if let Some(i) = l.find(t) {
            return Some(i + t.len());
        }
    }
    None
}

fn mask_json(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("\"value\":") {
        let (head, tail) = rest.split_at(i + 8);
        out.push_str(head);
        let n = tail
            .bytes()
            .take_while(|b| b.is_ascii_digit() || *b == b'-')
            .count();
        if n > 0 {
            out.push('#');
        }
        rest = &tail[n..];
    }
    out.push_str(rest);
    out
}

macro_rules! live {
    ($f:literal) => {
        include_str!(concat!("../testdata/haproxy-2.6/live/", $f, ".txt"))
    };
}

/// Captures from HAProxy 2.6 in the golden state (fake nodes answering 503/200 on 127.0.1.x),
/// compared with counters masked.
#[test]
fn formats_and_filters_match_live_haproxy_captures() {
    let cases: &[(&str, &str)] = &[
        ("show stat json", live!("show_stat_json")),
        ("show stat json desc", live!("show_stat_json_desc")),
        ("show stat typed desc", live!("show_stat_typed_desc")),
        ("show stat up", live!("show_stat_up")),
        ("show stat no-maint", live!("show_stat_no-maint")),
        ("show stat -1 6 -1 json", live!("show_stat_-1_6_-1_json")),
        (
            "show stat istio-http-backend 4 2 typed",
            live!("show_stat_istio-http-backend_4_2_typed"),
        ),
        ("show info typed", live!("show_info_typed")),
        ("show info json", live!("show_info_json")),
        ("show info desc", live!("show_info_desc")),
        ("show info typed desc", live!("show_info_typed_desc")),
    ];
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    // The info captures were taken 11 s after start (the uptime is text, so not masked).
    rt.snap.info.uptime_secs = 11;
    for (cmd, want) in cases {
        assert_eq!(mask(&admin(&mut rt, cmd)), mask(want), "{cmd}");
    }
    let after: &[(&str, &str)] = &[
        ("show stat up", live!("after_show_stat_up")),
        ("show stat no-maint", live!("after_show_stat_no-maint")),
        ("show stat typed", live!("after_show_stat_typed")),
        ("show stat json", live!("after_show_stat_json")),
    ];
    let mut rt = after_drain_maint();
    for (cmd, want) in after {
        assert_eq!(mask(&admin(&mut rt, cmd)), mask(want), "{cmd}");
    }
}

/// Interactive framing as captured from HAProxy 2.6 (`printf 'prompt\n…' | socat`).
#[test]
fn prompt_mode_framing_matches_haproxy() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    let mut s = CliSession::new(Level::Admin);
    let mut all = String::new();
    let backends = "# name\nistio-http-backend\nkube-apiserver\nistio-grpc-backend\n";
    let lines = [
        "prompt",
        "show backend",
        "get weight istio-http-backend/worker2;show backend",
        "foo",
    ];
    for l in lines {
        let o = execute(l, &mut s, &mut rt);
        assert_eq!(o.conn, Conn::KeepOpen);
        all.push_str(&o.data);
    }
    let foo = "Unknown command, but maybe one of the following ones is a better match:\n  add acl [@<ver>] <acl> <pattern>        : add an acl entry\n  show fd [num]                           : dump list of file descriptors in use or a specific one\n  show info [desc|json|typed|float]*      : report information about the running process\n  trace [<module>|0] [cmd [args...]]      : manage live tracing (empty to list, 0 to stop all)\n  user                                    : lower the level of the current CLI session to user\n  help [<command>]                        : list matching or all commands\n  prompt                                  : toggle interactive mode with prompt\n  quit                                    : disconnect\n";
    assert_eq!(
        all,
        format!("\n> {backends}\n> 1 (initial 1)\n\n> {backends}\n> {foo}\n> ")
    );
    let o = execute("quit", &mut s, &mut rt);
    assert_eq!((o.data.as_str(), o.conn), ("", Conn::Close));

    // Toggling twice leaves interactive mode; later pipelined lines still run.
    let mut s = CliSession::new(Level::Admin);
    let mut all = String::new();
    for l in ["prompt", "prompt", "show backend"] {
        all.push_str(&execute(l, &mut s, &mut rt).data);
    }
    assert_eq!(all, format!("\n> \n{backends}\n"));
    let o = execute("show backend", &mut s, &mut rt);
    assert_eq!(o.conn, Conn::CloseIfIdle);

    // `quit` stops the line: nothing after it runs.
    let o = execute(
        "get weight istio-http-backend/worker2;quit;show backend",
        &mut s,
        &mut rt,
    );
    assert_eq!(
        (o.data.as_str(), o.conn),
        ("1 (initial 1)\n\n", Conn::Close)
    );
    // CRLF and escaped separators.
    let o = execute("show backend\r", &mut s, &mut rt);
    assert_eq!(o.data, format!("{backends}\n"));
    assert_eq!(split_commands("a\\;b;c"), vec!["a\\;b", "c"]);
    assert_eq!(
        split_args("set  server\\ x\t y"),
        vec!["set", "server x", "y"]
    );
}

/// A dump cut into 64-byte slices resumes to the same bytes (a socket shell flushing between
/// calls, as HAProxy's io_handler does when its buffer is full).
#[test]
fn stat_dump_resumes_across_small_budgets() {
    let snap = seed_snapshot(GOLDEN_CSV);
    for format in [
        crate::stat::StatFormat::Csv,
        crate::stat::StatFormat::Typed,
        crate::stat::StatFormat::Json,
    ] {
        let opts = crate::stat::StatOpts {
            format,
            legends: true,
            ..Default::default()
        };
        let mut whole = String::new();
        crate::stat::dump_stat(&snap, opts, &mut whole);
        let mut d = crate::stat::StatDump::new(opts);
        let mut pieces = String::new();
        let mut calls = 0;
        loop {
            let mut buf = String::new();
            let done = d.fill(&snap, &mut buf, 64);
            calls += 1;
            pieces.push_str(&buf);
            if done {
                break;
            }
        }
        assert_eq!(pieces, whole);
        assert!(calls > 10, "{calls}");
    }
}

/// Server commands reach the runtime with validated values; errors never do.
#[test]
fn server_commands_apply_validated_state() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    let be = "istio-http-backend";
    for (cmd, reply) in [
        ("set server istio-http-backend/worker2 state drain", "\n"),
        ("set server istio-http-backend/worker2 state ready", "\n"),
        ("set server #4/#2 state maint", "\n"),
        ("enable server istio-http-backend/worker1", "\n"),
        ("set server istio-http-backend/worker2 weight 50%", "\n"),
        ("set weight istio-http-backend/worker2 200", "\n"),
        ("set server istio-http-backend/master1 health up", "\n"),
        (
            "set server istio-http-backend/master1 health stopping",
            "\n",
        ),
        ("set maxconn server istio-http-backend/worker2 -1", "\n"),
        ("set maxconn server istio-http-backend/worker2 10", "\n"),
        (
            "set server istio-http-backend/worker2 check-port 30181",
            "\n",
        ),
        (
            "set server istio-http-backend/worker2 check-addr 127.0.1.99 port 5",
            "\n",
        ),
        ("disable health istio-http-backend/worker2", "\n"),
        ("enable health istio-http-backend/worker2", "\n"),
        ("clear counters", "\n"),
        ("clear counters all", "\n"),
        ("shutdown sessions server istio-http-backend/worker2", "\n"),
        (
            "set server istio-http-backend/worker2 addr 127.0.1.15 port 30081",
            "IP changed from '127.0.1.14' to '127.0.1.15', port changed from '30080' to '30081' by 'stats socket command'\n\n",
        ),
        (
            "set server istio-http-backend/worker2 addr 127.0.1.15 port -1",
            "no need to change the addr, port changed from '30081' to '-1' by 'stats socket command'\n\n",
        ),
        (
            "set server istio-http-backend/worker2 addr 127.0.1.15 port 30080",
            "no need to change the addr, port changed from '+65535' to '30080' by 'stats socket command'\n\n",
        ),
        (
            "get weight istio-http-backend/worker2",
            "200 (initial 1)\n\n",
        ),
    ] {
        assert_eq!(admin(&mut rt, cmd), reply, "{cmd}");
    }
    let _ = be;
    assert_eq!(
        rt.calls,
        [
            "admin 4/3 Drain",
            "admin 4/3 Ready",
            "admin 4/2 Maint",
            "admin 4/2 Ready",
            "weight 4/3 0",
            "weight 4/3 200",
            "health 4/1 Up",
            "health 4/1 Stopping",
            "maxconn 4/3 4294967295",
            "maxconn 4/3 10",
            "check-port 4/3 30181",
            "check-addr 4/3 127.0.1.99 Some(5)",
            "check 4/3 false",
            "check 4/3 true",
            "clear false",
            "clear true",
            "shutdown 4/3",
            "addr 4/3 Some(127.0.1.15) Some(Fixed(30081))",
            "addr 4/3 None Some(Mapped(65535))",
            "addr 4/3 None Some(Fixed(30080))",
        ]
    );
    // A static algorithm only takes 0% / 100%.
    rt.snap.proxies[2].backend.as_mut().unwrap().dynamic_weights = false;
    assert_eq!(
        admin(&mut rt, "set weight istio-http-backend/worker2 3"),
        "Backend is using a static LB algorithm and only accepts weights '0%' and '100%'.\n\n"
    );
    assert_eq!(
        admin(&mut rt, "set weight istio-http-backend/worker2 100%"),
        "\n"
    );
    // Errors for servers without checks or agents, and disabled proxies.
    let mut t2 = FakeRuntime::new(t2_snapshot());
    let n = t2.calls.len();
    assert_eq!(
        admin(&mut t2, "enable health be/s5"),
        "Health check was not configured on this server, cannot enable.\n\n"
    );
    assert_eq!(
        admin(&mut t2, "set server be/s2 health up"),
        "cannot change health on a tracking server.\n\n"
    );
    assert_eq!(
        admin(&mut t2, "set server be/s1 agent foo"),
        "'set server <srv> agent' expects 'up' or 'down'.\n\n"
    );
    assert_eq!(admin(&mut t2, "set server be/s1 agent down"), "\n");
    assert_eq!(
        admin(&mut t2, "set server be/s1 agent-port 70000"),
        "provided port is invalid\n"
    );
    t2.snap.proxies[1].disabled = true;
    assert_eq!(admin(&mut t2, "get weight be/s1"), "Proxy is disabled.\n\n");
    assert_eq!(t2.calls[n..], ["agent 3/1 false"]);
}

#[test]
fn keyword_inventory_matches_haproxy_worker_keywords() {
    let want: String = include_str!("../testdata/haproxy-2.6/keywords-cli.txt")
        .lines()
        .filter(|l| l.starts_with('#') || l.contains("[WORKER]"))
        .map(|l| format!("{l}\n"))
        .collect();
    let mut got = String::new();
    dump_cli_keywords(&mut got);
    assert_eq!(got, want);
    let implemented: Vec<String> = CLI_KWS
        .iter()
        .filter(|k| k.implemented())
        .map(|k| k.words.join(" "))
        .collect();
    assert_eq!(implemented.len(), 72, "{implemented:?}");
}

/// `level user` sessions do not see `addr`, `cookie` and `algo` (checked on HAProxy 2.6).
#[test]
fn user_level_hides_legends_in_show_stat() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    let want: String = GOLDEN_CSV
        .split_inclusive('\n')
        .map(|l| {
            if l.starts_with('#') || l == "\n" {
                return l.to_string();
            }
            let mut f: Vec<&str> = l.split(',').collect();
            for i in [73, 74, 76] {
                f[i] = "";
            }
            f.join(",")
        })
        .collect();
    assert_eq!(run(&mut rt, Level::User, "show stat"), want);
    assert_eq!(run(&mut rt, Level::Operator, "show stat"), GOLDEN_CSV);
}

/// Arbitrary word salad built from the keywords and odd tokens never panics, at any level.
#[test]
fn no_panic_on_arbitrary_lines() {
    let mut words: Vec<&str> = CLI_KWS
        .iter()
        .flat_map(|k| k.words.iter().copied())
        .collect();
    words.extend([
        "",
        "-1",
        "#4",
        "#4/#1",
        "istio-http-backend/worker1",
        "x/y",
        "/",
        "%",
        "300%",
        "-9999999999999999999999",
        "99999999999999999999",
        "typed",
        "json",
        "desc",
        "up",
        "no-maint",
        "\\",
        ";",
        "é",
        "::1",
        "+5",
        "port",
        "addr",
        "state",
        "weight",
        "health",
        "agent",
        "all",
        "domain",
        "resolvers",
    ]);
    let mut seed = 0x2545F4914F6CDD1Du64;
    let mut next = || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut rt = FakeRuntime::new(t2_snapshot());
    for _ in 0..1000 {
        let n = (next() % 7) as usize;
        let line: Vec<&str> = (0..n)
            .map(|_| words[(next() % words.len() as u64) as usize])
            .collect();
        let level = [Level::User, Level::Operator, Level::Admin][(next() % 3) as usize];
        let mut s = CliSession::new(level);
        let _ = execute(&line.join(" "), &mut s, &mut rt);
    }
}

/// `ssl cert` commands: levels, missing arguments and the payload, as HAProxy 2.6 answers
/// (testdata/haproxy-2.6/ssl-cert-replies.txt). FakeRuntime references no certificate.
#[test]
fn ssl_cert_commands_grammar_and_levels() {
    let mut rt = FakeRuntime::new(seed_snapshot(GOLDEN_CSV));
    assert_eq!(
        run(&mut rt, Level::User, "show ssl cert"),
        "Can't allocate memory!\n\n"
    );
    assert_eq!(
        run(&mut rt, Level::Operator, "show ssl cert"),
        "# filename\n\n"
    );
    assert_eq!(
        run(&mut rt, Level::Operator, "show ssl cert a.pem"),
        "Can't display the certificate: Not found or the certificate is a bundle!\n\n"
    );
    for cmd in [
        "set ssl cert a.pem",
        "commit ssl cert a.pem",
        "abort ssl cert a.pem",
    ] {
        assert_eq!(
            run(&mut rt, Level::Operator, cmd),
            "Permission denied\n\n",
            "{cmd}"
        );
    }
    assert_eq!(
        admin(&mut rt, "set ssl cert a.pem"),
        "'set ssl cert expects a filename and a certificate as a payload\n\n"
    );
    assert_eq!(
        admin(&mut rt, "set ssl cert"),
        "'set ssl cert expects a filename and a certificate as a payload\n\n"
    );
    assert_eq!(
        admin(&mut rt, "commit ssl cert"),
        "'commit ssl cert expects a filename\n\n"
    );
    assert_eq!(
        admin(&mut rt, "abort ssl cert"),
        "'abort ssl cert' expects a filename\n\n"
    );
    assert_eq!(
        admin(&mut rt, "commit ssl cert a.pem"),
        "No ongoing transaction! !\nCan't commit a.pem!\n\n"
    );
    assert_eq!(
        admin(&mut rt, "abort ssl cert a.pem"),
        "No ongoing transaction!\n\n"
    );
    let mut s = CliSession::new(Level::Admin);
    let line = crate::ssl::payload_command("set ssl cert nope.pem <<").unwrap();
    assert_eq!(
        execute_with_payload(line, Some("-----BEGIN…\n"), &mut s, &mut rt).data,
        "Can't replace a certificate which is not referenced by the configuration!\nCan't update nope.pem!\n\n"
    );
    // Only the last command of the line gets the payload.
    assert_eq!(
        execute_with_payload(
            "show cli level; set ssl cert x ",
            Some("p\n"),
            &mut s,
            &mut rt
        )
        .data,
        "admin\n\nCan't replace a certificate which is not referenced by the configuration!\nCan't update x!\n\n"
    );
}
