//! HAProxy 2.6's Prometheus exporter (`http-request use-service prometheus-exporter`): the
//! `haproxy_process_*`, `haproxy_frontend_*`, `haproxy_backend_*` and `haproxy_server_*`
//! families with the names, HELP texts, types, label sets and ordering the Debian 2.6.12 build
//! prints (captured in `testdata/haproxy-2.6/stats/promex-metrics.txt`).
//!
//! Rendering rules kept from HAProxy: one `# HELP`/`# TYPE` pair per metric, printed just before
//! its first sample (a metric without any sample prints nothing); empty fields are `NaN`; times
//! are seconds as `%f`; label values are printed as they are.

use crate::field::Val;
use crate::model::*;
use crate::stat::{self, Row, Scratch, StatOpts};
use std::fmt::Write as _;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Ty {
    Gauge,
    Counter,
}

struct Metric {
    name: &'static str,
    ty: Ty,
    help: &'static str,
}

const fn m(name: &'static str, ty: Ty, help: &'static str) -> Metric {
    Metric { name, ty, help }
}

/// A sample value as promex prints it.
#[derive(Clone, Copy)]
enum V {
    U(u64),
    I(i64),
    F(f64),
    NaN,
}

impl V {
    fn from_field(v: &Val) -> V {
        match *v {
            Val::U(u) => V::U(u),
            Val::I(i) => V::I(i),
            Val::Empty | Val::S(_) => V::NaN,
        }
    }
    fn push(self, out: &mut String) {
        let _ = match self {
            V::U(u) => write!(out, "{u}"),
            V::I(i) => write!(out, "{i}"),
            V::F(f) => write!(out, "{f:.6}"),
            V::NaN => write!(out, "NaN"),
        };
    }
}

/// Writes samples of one metric, its header first.
struct Emitter<'o> {
    out: &'o mut String,
    prefix: &'static str,
    hdr_done: bool,
}

impl Emitter<'_> {
    fn sample(&mut self, m: &Metric, labels: &[(&str, &str)], v: V) {
        if !self.hdr_done {
            self.hdr_done = true;
            let ty = match m.ty {
                Ty::Gauge => "gauge",
                Ty::Counter => "counter",
            };
            let _ = writeln!(self.out, "# HELP {}{} {}", self.prefix, m.name, m.help);
            let _ = writeln!(self.out, "# TYPE {}{} {}", self.prefix, m.name, ty);
        }
        self.out.push_str(self.prefix);
        self.out.push_str(m.name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, val)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{val}\"");
            }
            self.out.push('}');
        }
        self.out.push(' ');
        v.push(self.out);
        self.out.push('\n');
    }
}

/// The `state` labels of `haproxy_server_status`, in HAProxy's order.
const SRV_STATES: [&str; 5] = ["DOWN", "UP", "MAINT", "DRAIN", "NOLB"];
const HRSP_CODES: [&str; 6] = ["1xx", "2xx", "3xx", "4xx", "5xx", "other"];
/// Check statuses that promex lists: every result from "failed" on.
const CHECK_STATES: [CheckStatus; 16] = [
    CheckStatus::Hana,
    CheckStatus::SockErr,
    CheckStatus::L4Ok,
    CheckStatus::L4Tout,
    CheckStatus::L4Con,
    CheckStatus::L6Ok,
    CheckStatus::L6Tout,
    CheckStatus::L6Rsp,
    CheckStatus::L7Tout,
    CheckStatus::L7Rsp,
    CheckStatus::L7Ok,
    CheckStatus::L7Okc,
    CheckStatus::L7Sts,
    CheckStatus::ProcErr,
    CheckStatus::ProcTout,
    CheckStatus::ProcOk,
];

/// promex's server state: maintenance wins, then stopping (NOLB), drain, up, down.
fn srv_state(sv: &ServerSnap) -> usize {
    let mut st = match sv.op_state {
        OpState::Running | OpState::Starting if sv.admin.drain() => 3,
        OpState::Running | OpState::Starting => 1,
        OpState::Stopping => 4,
        OpState::Stopped => 0,
    };
    if sv.admin.maint() {
        st = 2;
    }
    st
}

/// The `show stat` column behind a metric name (shared by frontends, backends and servers).
fn col(name: &str) -> Option<usize> {
    Some(match name {
        "current_queue" => 2,
        "max_queue" => 3,
        "current_sessions" => 4,
        "max_sessions" => 5,
        "limit_sessions" => 6,
        "sessions_total" => 7,
        "bytes_in_total" => 8,
        "bytes_out_total" => 9,
        "requests_denied_total" => 10,
        "responses_denied_total" => 11,
        "request_errors_total" => 12,
        "connection_errors_total" => 13,
        "response_errors_total" => 14,
        "retry_warnings_total" => 15,
        "redispatch_warnings_total" => 16,
        "weight" => 18,
        "active_servers" => 19,
        "backup_servers" => 20,
        "check_failures_total" => 21,
        "check_up_down_total" => 22,
        "check_last_change_seconds" => 23,
        "downtime_seconds_total" => 24,
        "queue_limit" => 25,
        "current_throttle" => 29,
        "loadbalanced_total" => 30,
        "limit_session_rate" => 34,
        "max_session_rate" => 35,
        "http_requests_rate_max" => 47,
        "http_requests_total" => 48,
        "client_aborts_total" => 49,
        "server_aborts_total" => 50,
        "http_comp_bytes_in_total" => 51,
        "http_comp_bytes_out_total" => 52,
        "http_comp_bytes_bypassed_total" => 53,
        "http_comp_responses_total" => 54,
        "last_session_seconds" => 55,
        "connections_rate_max" => 78,
        "connections_total" => 79,
        "intercepted_requests_total" => 80,
        "denied_connections_total" => 81,
        "denied_sessions_total" => 82,
        "failed_header_rewriting_total" => 83,
        "connection_attempts_total" => 84,
        "connection_reuses_total" => 85,
        "http_cache_lookups_total" => 86,
        "http_cache_hits_total" => 87,
        "idle_connections_current" => 88,
        "idle_connections_limit" => 89,
        "internal_errors_total" => 94,
        "unsafe_idle_connections_current" => 95,
        "safe_idle_connections_current" => 96,
        "used_connections_current" => 97,
        "need_connections_current" => 98,
        "uweight" => 99,
        _ => return None,
    })
}

/// Times promex reports in seconds (from milliseconds).
fn time_ms(c: &Counters, name: &str) -> Option<u32> {
    Some(match name {
        "queue_time_average_seconds" => c.qtime,
        "connect_time_average_seconds" => c.ctime,
        "response_time_average_seconds" => c.rtime,
        "total_time_average_seconds" => c.ttime,
        "max_queue_time_seconds" => c.qtime_max,
        "max_connect_time_seconds" => c.ctime_max,
        "max_response_time_seconds" => c.rtime_max,
        "max_total_time_seconds" => c.ttime_max,
        _ => return None,
    })
}

fn secs(ms: u64) -> V {
    V::F(ms as f64 / 1000.0)
}

/// Metrics only HTTP proxies report.
fn http_only(name: &str) -> bool {
    matches!(
        name,
        "http_requests_rate_max"
            | "http_requests_total"
            | "intercepted_requests_total"
            | "http_cache_lookups_total"
            | "http_cache_hits_total"
            | "http_comp_bytes_in_total"
            | "http_comp_bytes_out_total"
            | "http_comp_bytes_bypassed_total"
            | "http_comp_responses_total"
    )
}

fn shown(px: &ProxySnap) -> bool {
    !px.disabled
}

fn process_value(i: &ProcessInfo, name: &str) -> V {
    let u = |v: u32| V::U(u64::from(v));
    match name {
        "nbthread" => u(i.nbthread),
        "nbproc" | "relative_process_id" => V::U(1),
        "uptime_seconds" => u(i.uptime_secs),
        "pool_failures_total" => u(i.pool_failed),
        "max_fds" => u(i.ulimit_n),
        "max_sockets" => u(i.maxsock),
        "max_connections" => u(i.maxconn),
        "hard_max_connections" => u(i.hard_maxconn),
        "current_connections" => u(i.curr_conns),
        "connections_total" => u(i.cum_conns),
        "requests_total" => u(i.cum_req),
        "max_ssl_connections" => u(i.max_ssl_conns),
        "current_ssl_connections" => u(i.curr_ssl_conns),
        "ssl_connections_total" => u(i.cum_ssl_conns),
        "max_pipes" => u(i.maxpipes),
        "pipes_used_total" => u(i.pipes_used),
        "pipes_free_total" => u(i.pipes_free),
        "current_connection_rate" => u(i.conn_rate),
        "limit_connection_rate" => u(i.conn_rate_limit),
        "max_connection_rate" => u(i.max_conn_rate),
        "current_session_rate" => u(i.sess_rate),
        "limit_session_rate" => u(i.sess_rate_limit),
        "max_session_rate" => u(i.max_sess_rate),
        "current_ssl_rate" => u(i.ssl_rate),
        "limit_ssl_rate" => u(i.ssl_rate_limit),
        "max_ssl_rate" => u(i.max_ssl_rate),
        "current_frontend_ssl_key_rate" => u(i.ssl_frontend_key_rate),
        "max_frontend_ssl_key_rate" => u(i.ssl_frontend_max_key_rate),
        "frontend_ssl_reuse" => u(i.ssl_frontend_session_reuse_pct),
        "current_backend_ssl_key_rate" => u(i.ssl_backend_key_rate),
        "max_backend_ssl_key_rate" => u(i.ssl_backend_max_key_rate),
        "ssl_cache_lookups_total" => u(i.ssl_cache_lookups),
        "ssl_cache_misses_total" => u(i.ssl_cache_misses),
        "http_comp_bytes_in_total" => u(i.compress_bps_in),
        "http_comp_bytes_out_total" => u(i.compress_bps_out),
        "limit_http_comp" => u(i.compress_bps_rate_lim),
        "current_tasks" => u(i.tasks),
        "current_run_queue" => u(i.run_queue),
        "idle_time_percent" => u(i.idle_pct),
        "stopping" => V::U(u64::from(i.stopping)),
        "jobs" => u(i.jobs),
        "unstoppable_jobs" => u(i.unstoppable_jobs),
        "listeners" => u(i.listeners),
        "active_peers" => u(i.active_peers),
        "connected_peers" => u(i.connected_peers),
        "dropped_logs_total" => u(i.dropped_logs),
        "busy_polling_enabled" => u(i.busy_polling),
        "failed_resolutions" => u(i.failed_resolutions),
        "bytes_out_total" => V::U(i.total_bytes_out),
        "spliced_bytes_out_total" => V::U(i.total_spliced_bytes_out),
        "bytes_out_rate" => V::U(i.bytes_out_rate),
        "recv_logs_total" => u(i.cum_recv_logs),
        "max_memory_bytes" => u(i.memmax_bytes),
        "pool_allocated_bytes" => V::U(i.pool_alloc_bytes),
        "pool_used_bytes" => V::U(i.pool_used_bytes),
        "start_time_seconds" => u(i.start_time_sec),
        // Not built with zlib (USE_SLZ): HAProxy leaves these fields empty.
        _ => V::NaN,
    }
}

/// The whole exporter page (the body of `GET /metrics`).
pub fn dump_prometheus(snap: &Snapshot, out: &mut String) {
    dump_process(&snap.info, out);
    dump_frontends(snap, out);
    dump_backends(snap, out);
    dump_servers(snap, out);
}

fn dump_process(info: &ProcessInfo, out: &mut String) {
    for mt in PROCESS {
        let mut e = Emitter {
            out,
            prefix: "haproxy_process_",
            hdr_done: false,
        };
        if mt.name == "build_info" {
            e.sample(mt, &[("version", &info.build_info)], V::U(1));
        } else {
            e.sample(mt, &[], process_value(info, mt.name));
        }
    }
}

fn dump_frontends(snap: &Snapshot, out: &mut String) {
    let fes: Vec<(&ProxySnap, &FrontendSnap, Row)> = snap
        .proxies
        .iter()
        .filter(|p| shown(p))
        .filter_map(|p| {
            p.frontend
                .as_ref()
                .map(|f| (p, f, stat::frontend_row(p, f)))
        })
        .collect();
    for mt in FRONTEND {
        let mut e = Emitter {
            out,
            prefix: "haproxy_frontend_",
            hdr_done: false,
        };
        if mt.name == "http_responses_total" {
            for (ci, code) in HRSP_CODES.iter().enumerate() {
                for (px, _, row) in fes.iter().filter(|f| f.0.mode == ProxyMode::Http) {
                    let v = row.get(39 + ci).map_or(V::NaN, V::from_field);
                    e.sample(mt, &[("proxy", &px.name), ("code", code)], v);
                }
            }
            continue;
        }
        for (px, fe, row) in &fes {
            let lbl = ("proxy", px.name.as_str());
            if mt.name == "status" {
                let up = fe.state != FrontendState::Stop;
                e.sample(mt, &[lbl, ("state", "DOWN")], V::U(u64::from(!up)));
                e.sample(mt, &[lbl, ("state", "UP")], V::U(u64::from(up)));
                continue;
            }
            if http_only(mt.name) && px.mode != ProxyMode::Http {
                continue;
            }
            let v = col(mt.name)
                .and_then(|i| row.get(i))
                .map_or(V::NaN, V::from_field);
            e.sample(mt, &[lbl], v);
        }
    }
}

fn dump_backends(snap: &Snapshot, out: &mut String) {
    let opts = StatOpts::default();
    let mut status = Vec::new();
    let bes: Vec<(&ProxySnap, &BackendSnap)> = snap
        .proxies
        .iter()
        .filter(|p| shown(p))
        .filter_map(|p| p.backend.as_ref().map(|b| (p, b)))
        .collect();
    status.resize_with(bes.len(), String::new);
    let rows: Vec<Row> = bes
        .iter()
        .zip(status.iter_mut())
        .map(|((p, b), s)| stat::backend_row(p, b, &opts, s))
        .collect();
    for mt in BACKEND {
        let mut e = Emitter {
            out,
            prefix: "haproxy_backend_",
            hdr_done: false,
        };
        if mt.name == "http_responses_total" {
            for (ci, code) in HRSP_CODES.iter().enumerate() {
                for ((px, _), row) in bes.iter().zip(&rows) {
                    if px.mode != ProxyMode::Http {
                        continue;
                    }
                    let v = row.get(39 + ci).map_or(V::NaN, V::from_field);
                    e.sample(mt, &[("proxy", &px.name), ("code", code)], v);
                }
            }
            continue;
        }
        for ((px, be), row) in bes.iter().zip(&rows) {
            let lbl = ("proxy", px.name.as_str());
            match mt.name {
                "status" => {
                    let up = stat::backend_agg(px).tot_weight > 0 || px.servers.is_empty();
                    e.sample(mt, &[lbl, ("state", "DOWN")], V::U(u64::from(!up)));
                    e.sample(mt, &[lbl, ("state", "UP")], V::U(u64::from(up)));
                }
                "agg_server_status" | "agg_server_check_status" => {
                    if px.servers.is_empty() {
                        continue;
                    }
                    let mut n = [0u64; 5];
                    for sv in &px.servers {
                        if let Some(c) = n.get_mut(srv_state(sv)) {
                            *c += 1;
                        }
                    }
                    for (st, c) in SRV_STATES.iter().zip(n) {
                        e.sample(mt, &[lbl, ("state", st)], V::U(c));
                    }
                }
                "agg_check_status" => {
                    if px.servers.is_empty() {
                        continue;
                    }
                    for st in CHECK_STATES {
                        let c = px
                            .servers
                            .iter()
                            .filter(|s| s.check.reported() && s.check.status == st)
                            .count();
                        e.sample(mt, &[lbl, ("state", st.code())], V::U(c as u64));
                    }
                }
                name => {
                    if (http_only(name)) && px.mode != ProxyMode::Http {
                        continue;
                    }
                    let v = match time_ms(&be.counters, name) {
                        Some(ms) => secs(u64::from(ms)),
                        None => col(name)
                            .and_then(|i| row.get(i))
                            .map_or(V::NaN, V::from_field),
                    };
                    e.sample(mt, &[lbl], v);
                }
            }
        }
    }
}

fn dump_servers(snap: &Snapshot, out: &mut String) {
    let opts = StatOpts::default();
    let list: Vec<(&ProxySnap, &ServerSnap)> = snap
        .proxies
        .iter()
        .filter(|p| shown(p) && p.backend.is_some())
        .flat_map(|p| p.servers.iter().map(move |s| (p, s)))
        .collect();
    let mut scratch: Vec<Scratch> = Vec::new();
    scratch.resize_with(list.len(), Scratch::default);
    let rows: Vec<Row> = list
        .iter()
        .zip(scratch.iter_mut())
        .map(|((p, s), sc)| stat::server_row(snap, p, s, &opts, sc))
        .collect();
    for mt in SERVER {
        let mut e = Emitter {
            out,
            prefix: "haproxy_server_",
            hdr_done: false,
        };
        if mt.name == "http_responses_total" {
            for (ci, code) in HRSP_CODES.iter().enumerate() {
                for ((px, sv), row) in list.iter().zip(&rows) {
                    if px.mode != ProxyMode::Http {
                        continue;
                    }
                    let v = row.get(39 + ci).map_or(V::NaN, V::from_field);
                    e.sample(
                        mt,
                        &[("proxy", &px.name), ("server", &sv.name), ("code", code)],
                        v,
                    );
                }
            }
            continue;
        }
        for ((px, sv), row) in list.iter().zip(&rows) {
            let lbl = [("proxy", px.name.as_str()), ("server", sv.name.as_str())];
            match mt.name {
                "status" => {
                    let cur = srv_state(sv);
                    for (i, st) in SRV_STATES.iter().enumerate() {
                        e.sample(
                            mt,
                            &[lbl[0], lbl[1], ("state", st)],
                            V::U(u64::from(i == cur)),
                        );
                    }
                }
                "check_status" => {
                    if !sv.check.reported() {
                        continue;
                    }
                    for st in CHECK_STATES {
                        e.sample(
                            mt,
                            &[lbl[0], lbl[1], ("state", st.code())],
                            V::U(u64::from(sv.check.status == st)),
                        );
                    }
                }
                "check_code" => {
                    if !sv.check.reported() {
                        continue;
                    }
                    let code = if sv.check.status.has_code() {
                        u64::from(sv.check.code)
                    } else {
                        0
                    };
                    e.sample(mt, &lbl, V::U(code));
                }
                "check_duration_seconds" => {
                    if !sv.check.status.has_duration() {
                        continue;
                    }
                    e.sample(mt, &lbl, secs(sv.check.duration_ms));
                }
                name => {
                    let v = match time_ms(&sv.counters, name) {
                        Some(ms) => secs(u64::from(ms)),
                        None => col(name)
                            .and_then(|i| row.get(i))
                            .map_or(V::NaN, V::from_field),
                    };
                    e.sample(mt, &lbl, v);
                }
            }
        }
    }
}

const PROCESS: &[Metric] = &[
    m(
        "nbthread",
        Ty::Gauge,
        "Number of started threads (global.nbthread)",
    ),
    m(
        "nbproc",
        Ty::Gauge,
        "Number of started worker processes (historical, always 1)",
    ),
    m(
        "relative_process_id",
        Ty::Gauge,
        "Relative worker process number (1)",
    ),
    m(
        "uptime_seconds",
        Ty::Gauge,
        "How long ago this worker process was started (seconds)",
    ),
    m(
        "pool_failures_total",
        Ty::Counter,
        "Number of failed pool allocations since this worker was started",
    ),
    m(
        "max_fds",
        Ty::Gauge,
        "Hard limit on the number of per-process file descriptors",
    ),
    m(
        "max_sockets",
        Ty::Gauge,
        "Hard limit on the number of per-process sockets",
    ),
    m(
        "max_connections",
        Ty::Gauge,
        "Hard limit on the number of per-process connections (configured or imposed by Ulimit-n)",
    ),
    m(
        "hard_max_connections",
        Ty::Gauge,
        "Hard limit on the number of per-process connections (imposed by Memmax_MB or Ulimit-n)",
    ),
    m(
        "current_connections",
        Ty::Gauge,
        "Current number of connections on this worker process",
    ),
    m(
        "connections_total",
        Ty::Counter,
        "Total number of connections on this worker process since started",
    ),
    m(
        "requests_total",
        Ty::Counter,
        "Total number of requests on this worker process since started",
    ),
    m(
        "max_ssl_connections",
        Ty::Gauge,
        "Hard limit on the number of per-process SSL endpoints (front+back), 0=unlimited",
    ),
    m(
        "current_ssl_connections",
        Ty::Gauge,
        "Current number of SSL endpoints on this worker process (front+back)",
    ),
    m(
        "ssl_connections_total",
        Ty::Counter,
        "Total number of SSL endpoints on this worker process since started (front+back)",
    ),
    m(
        "max_pipes",
        Ty::Gauge,
        "Hard limit on the number of pipes for splicing, 0=unlimited",
    ),
    m(
        "pipes_used_total",
        Ty::Counter,
        "Current number of pipes in use in this worker process",
    ),
    m(
        "pipes_free_total",
        Ty::Counter,
        "Current number of allocated and available pipes in this worker process",
    ),
    m(
        "current_connection_rate",
        Ty::Gauge,
        "Number of front connections created on this worker process over the last second",
    ),
    m(
        "limit_connection_rate",
        Ty::Gauge,
        "Hard limit for ConnRate (global.maxconnrate)",
    ),
    m(
        "max_connection_rate",
        Ty::Gauge,
        "Highest ConnRate reached on this worker process since started (in connections per second)",
    ),
    m(
        "current_session_rate",
        Ty::Gauge,
        "Number of sessions created on this worker process over the last second",
    ),
    m(
        "limit_session_rate",
        Ty::Gauge,
        "Hard limit for SessRate (global.maxsessrate)",
    ),
    m(
        "max_session_rate",
        Ty::Gauge,
        "Highest SessRate reached on this worker process since started (in sessions per second)",
    ),
    m(
        "current_ssl_rate",
        Ty::Gauge,
        "Number of SSL connections created on this worker process over the last second",
    ),
    m(
        "limit_ssl_rate",
        Ty::Gauge,
        "Hard limit for SslRate (global.maxsslrate)",
    ),
    m(
        "max_ssl_rate",
        Ty::Gauge,
        "Highest SslRate reached on this worker process since started (in connections per second)",
    ),
    m(
        "current_frontend_ssl_key_rate",
        Ty::Gauge,
        "Number of SSL keys created on frontends in this worker process over the last second",
    ),
    m(
        "max_frontend_ssl_key_rate",
        Ty::Gauge,
        "Highest SslFrontendKeyRate reached on this worker process since started (in SSL keys per second)",
    ),
    m(
        "frontend_ssl_reuse",
        Ty::Gauge,
        "Percent of frontend SSL connections which did not require a new key",
    ),
    m(
        "current_backend_ssl_key_rate",
        Ty::Gauge,
        "Number of SSL keys created on backends in this worker process over the last second",
    ),
    m(
        "max_backend_ssl_key_rate",
        Ty::Gauge,
        "Highest SslBackendKeyRate reached on this worker process since started (in SSL keys per second)",
    ),
    m(
        "ssl_cache_lookups_total",
        Ty::Counter,
        "Total number of SSL session ID lookups in the SSL session cache on this worker since started",
    ),
    m(
        "ssl_cache_misses_total",
        Ty::Counter,
        "Total number of SSL session ID lookups that didn't find a session in the SSL session cache on this worker since started",
    ),
    m(
        "http_comp_bytes_in_total",
        Ty::Counter,
        "Number of bytes submitted to the HTTP compressor in this worker process over the last second",
    ),
    m(
        "http_comp_bytes_out_total",
        Ty::Counter,
        "Number of bytes emitted by the HTTP compressor in this worker process over the last second",
    ),
    m(
        "limit_http_comp",
        Ty::Gauge,
        "Limit of CompressBpsOut beyond which HTTP compression is automatically disabled",
    ),
    m(
        "current_zlib_memory",
        Ty::Gauge,
        "Amount of memory currently used by HTTP compression on the current worker process (in bytes)",
    ),
    m(
        "max_zlib_memory",
        Ty::Gauge,
        "Limit on the amount of memory used by HTTP compression above which it is automatically disabled (in bytes, see global.maxzlibmem)",
    ),
    m(
        "current_tasks",
        Ty::Gauge,
        "Total number of tasks in the current worker process (active + sleeping)",
    ),
    m(
        "current_run_queue",
        Ty::Gauge,
        "Total number of active tasks+tasklets in the current worker process",
    ),
    m(
        "idle_time_percent",
        Ty::Gauge,
        "Percentage of last second spent waiting in the current worker thread",
    ),
    m(
        "stopping",
        Ty::Gauge,
        "1 if the worker process is currently stopping, otherwise zero",
    ),
    m(
        "jobs",
        Ty::Gauge,
        "Current number of active jobs on the current worker process (frontend connections, master connections, listeners)",
    ),
    m(
        "unstoppable_jobs",
        Ty::Gauge,
        "Current number of unstoppable jobs on the current worker process (master connections)",
    ),
    m(
        "listeners",
        Ty::Gauge,
        "Current number of active listeners on the current worker process",
    ),
    m(
        "active_peers",
        Ty::Gauge,
        "Current number of verified active peers connections on the current worker process",
    ),
    m(
        "connected_peers",
        Ty::Gauge,
        "Current number of peers having passed the connection step on the current worker process",
    ),
    m(
        "dropped_logs_total",
        Ty::Counter,
        "Total number of dropped logs for current worker process since started",
    ),
    m(
        "busy_polling_enabled",
        Ty::Gauge,
        "1 if busy-polling is currently in use on the worker process, otherwise zero (config.busy-polling)",
    ),
    m(
        "failed_resolutions",
        Ty::Counter,
        "Total number of failed DNS resolutions in current worker process since started",
    ),
    m(
        "bytes_out_total",
        Ty::Counter,
        "Total number of bytes emitted by current worker process since started",
    ),
    m(
        "spliced_bytes_out_total",
        Ty::Counter,
        "Total number of bytes emitted by current worker process through a kernel pipe since started",
    ),
    m(
        "bytes_out_rate",
        Ty::Gauge,
        "Number of bytes emitted by current worker process over the last second",
    ),
    m(
        "recv_logs_total",
        Ty::Counter,
        "Total number of log messages received by log-forwarding listeners on this worker process since started",
    ),
    m("build_info", Ty::Gauge, "Build info"),
    m(
        "max_memory_bytes",
        Ty::Gauge,
        "Worker process's hard limit on memory usage in byes (-m on command line)",
    ),
    m(
        "pool_allocated_bytes",
        Ty::Gauge,
        "Amount of memory allocated in pools (in bytes)",
    ),
    m(
        "pool_used_bytes",
        Ty::Gauge,
        "Amount of pool memory currently used (in bytes)",
    ),
    m("start_time_seconds", Ty::Gauge, "Start time in seconds"),
];
const FRONTEND: &[Metric] = &[
    m(
        "current_sessions",
        Ty::Gauge,
        "Number of current sessions on the frontend, backend or server",
    ),
    m(
        "max_sessions",
        Ty::Gauge,
        "Highest value of current sessions encountered since process started",
    ),
    m(
        "limit_sessions",
        Ty::Gauge,
        "Frontend/listener/server's maxconn, backend's fullconn",
    ),
    m(
        "sessions_total",
        Ty::Counter,
        "Total number of sessions since process started",
    ),
    m(
        "bytes_in_total",
        Ty::Counter,
        "Total number of request bytes since process started",
    ),
    m(
        "bytes_out_total",
        Ty::Counter,
        "Total number of response bytes since process started",
    ),
    m(
        "requests_denied_total",
        Ty::Counter,
        "Total number of denied requests since process started",
    ),
    m(
        "responses_denied_total",
        Ty::Counter,
        "Total number of denied responses since process started",
    ),
    m(
        "request_errors_total",
        Ty::Counter,
        "Total number of invalid requests since process started",
    ),
    m(
        "status",
        Ty::Gauge,
        "Current status of the service, per state label value.",
    ),
    m(
        "limit_session_rate",
        Ty::Gauge,
        "Limit on the number of sessions accepted in a second (frontend only, 'rate-limit sessions' setting)",
    ),
    m(
        "max_session_rate",
        Ty::Gauge,
        "Highest value of sessions per second observed since the worker process started",
    ),
    m(
        "http_responses_total",
        Ty::Counter,
        "Total number of HTTP responses with status 100-199 returned by this object since the worker process started",
    ),
    m(
        "http_requests_rate_max",
        Ty::Gauge,
        "Highest value of http requests observed since the worker process started",
    ),
    m(
        "http_requests_total",
        Ty::Counter,
        "Total number of HTTP requests processed by this object since the worker process started",
    ),
    m(
        "http_comp_bytes_in_total",
        Ty::Counter,
        "Total number of bytes submitted to the HTTP compressor for this object since the worker process started",
    ),
    m(
        "http_comp_bytes_out_total",
        Ty::Counter,
        "Total number of bytes emitted by the HTTP compressor for this object since the worker process started",
    ),
    m(
        "http_comp_bytes_bypassed_total",
        Ty::Counter,
        "Total number of bytes that bypassed HTTP compression for this object since the worker process started (CPU/memory/bandwidth limitation)",
    ),
    m(
        "http_comp_responses_total",
        Ty::Counter,
        "Total number of HTTP responses that were compressed for this object since the worker process started",
    ),
    m(
        "connections_rate_max",
        Ty::Gauge,
        "Highest value of connections per second observed since the worker process started",
    ),
    m(
        "connections_total",
        Ty::Counter,
        "Total number of new connections accepted on this frontend since the worker process started",
    ),
    m(
        "intercepted_requests_total",
        Ty::Counter,
        "Total number of HTTP requests intercepted on the frontend (redirects/stats/services) since the worker process started",
    ),
    m(
        "denied_connections_total",
        Ty::Counter,
        "Total number of incoming connections blocked on a listener/frontend by a tcp-request connection rule since the worker process started",
    ),
    m(
        "denied_sessions_total",
        Ty::Counter,
        "Total number of incoming sessions blocked on a listener/frontend by a tcp-request connection rule since the worker process started",
    ),
    m(
        "failed_header_rewriting_total",
        Ty::Counter,
        "Total number of failed HTTP header rewrites since the worker process started",
    ),
    m(
        "http_cache_lookups_total",
        Ty::Counter,
        "Total number of HTTP requests looked up in the cache on this frontend/backend since the worker process started",
    ),
    m(
        "http_cache_hits_total",
        Ty::Counter,
        "Total number of HTTP requests not found in the cache on this frontend/backend since the worker process started",
    ),
    m(
        "internal_errors_total",
        Ty::Counter,
        "Total number of internal errors since process started",
    ),
];
const BACKEND: &[Metric] = &[
    m(
        "current_queue",
        Ty::Gauge,
        "Number of current queued connections",
    ),
    m(
        "max_queue",
        Ty::Gauge,
        "Highest value of queued connections encountered since process started",
    ),
    m(
        "current_sessions",
        Ty::Gauge,
        "Number of current sessions on the frontend, backend or server",
    ),
    m(
        "max_sessions",
        Ty::Gauge,
        "Highest value of current sessions encountered since process started",
    ),
    m(
        "limit_sessions",
        Ty::Gauge,
        "Frontend/listener/server's maxconn, backend's fullconn",
    ),
    m(
        "sessions_total",
        Ty::Counter,
        "Total number of sessions since process started",
    ),
    m(
        "bytes_in_total",
        Ty::Counter,
        "Total number of request bytes since process started",
    ),
    m(
        "bytes_out_total",
        Ty::Counter,
        "Total number of response bytes since process started",
    ),
    m(
        "requests_denied_total",
        Ty::Counter,
        "Total number of denied requests since process started",
    ),
    m(
        "responses_denied_total",
        Ty::Counter,
        "Total number of denied responses since process started",
    ),
    m(
        "connection_errors_total",
        Ty::Counter,
        "Total number of failed connections to server since the worker process started",
    ),
    m(
        "response_errors_total",
        Ty::Counter,
        "Total number of invalid responses since the worker process started",
    ),
    m(
        "retry_warnings_total",
        Ty::Counter,
        "Total number of server connection retries since the worker process started",
    ),
    m(
        "redispatch_warnings_total",
        Ty::Counter,
        "Total number of server redispatches due to connection failures since the worker process started",
    ),
    m(
        "status",
        Ty::Gauge,
        "Current status of the service, per state label value.",
    ),
    m(
        "weight",
        Ty::Gauge,
        "Server's effective weight, or sum of active servers' effective weights for a backend",
    ),
    m(
        "active_servers",
        Ty::Gauge,
        "Total number of active UP servers with a non-zero weight",
    ),
    m(
        "backup_servers",
        Ty::Gauge,
        "Total number of backup UP servers with a non-zero weight",
    ),
    m(
        "check_up_down_total",
        Ty::Counter,
        "Total number of failed checks causing UP to DOWN server transitions, per server/backend, since the worker process started",
    ),
    m(
        "check_last_change_seconds",
        Ty::Gauge,
        "How long ago the last server state changed, in seconds",
    ),
    m(
        "downtime_seconds_total",
        Ty::Counter,
        "Total time spent in DOWN state, for server or backend",
    ),
    m(
        "loadbalanced_total",
        Ty::Counter,
        "Total number of requests routed by load balancing since the worker process started (ignores queue pop and stickiness)",
    ),
    m(
        "max_session_rate",
        Ty::Gauge,
        "Highest value of sessions per second observed since the worker process started",
    ),
    m(
        "http_responses_total",
        Ty::Counter,
        "Total number of HTTP responses with status 100-199 returned by this object since the worker process started",
    ),
    m(
        "http_requests_total",
        Ty::Counter,
        "Total number of HTTP requests processed by this object since the worker process started",
    ),
    m(
        "client_aborts_total",
        Ty::Counter,
        "Total number of requests or connections aborted by the client since the worker process started",
    ),
    m(
        "server_aborts_total",
        Ty::Counter,
        "Total number of requests or connections aborted by the server since the worker process started",
    ),
    m(
        "http_comp_bytes_in_total",
        Ty::Counter,
        "Total number of bytes submitted to the HTTP compressor for this object since the worker process started",
    ),
    m(
        "http_comp_bytes_out_total",
        Ty::Counter,
        "Total number of bytes emitted by the HTTP compressor for this object since the worker process started",
    ),
    m(
        "http_comp_bytes_bypassed_total",
        Ty::Counter,
        "Total number of bytes that bypassed HTTP compression for this object since the worker process started (CPU/memory/bandwidth limitation)",
    ),
    m(
        "http_comp_responses_total",
        Ty::Counter,
        "Total number of HTTP responses that were compressed for this object since the worker process started",
    ),
    m(
        "last_session_seconds",
        Ty::Gauge,
        "How long ago some traffic was seen on this object on this worker process, in seconds",
    ),
    m(
        "queue_time_average_seconds",
        Ty::Gauge,
        "Avg. queue time for last 1024 successful connections.",
    ),
    m(
        "connect_time_average_seconds",
        Ty::Gauge,
        "Avg. connect time for last 1024 successful connections.",
    ),
    m(
        "response_time_average_seconds",
        Ty::Gauge,
        "Avg. response time for last 1024 successful connections.",
    ),
    m(
        "total_time_average_seconds",
        Ty::Gauge,
        "Avg. total time for last 1024 successful connections.",
    ),
    m(
        "failed_header_rewriting_total",
        Ty::Counter,
        "Total number of failed HTTP header rewrites since the worker process started",
    ),
    m(
        "connection_attempts_total",
        Ty::Counter,
        "Total number of outgoing connection attempts on this backend/server since the worker process started",
    ),
    m(
        "connection_reuses_total",
        Ty::Counter,
        "Total number of reused connection on this backend/server since the worker process started",
    ),
    m(
        "http_cache_lookups_total",
        Ty::Counter,
        "Total number of HTTP requests looked up in the cache on this frontend/backend since the worker process started",
    ),
    m(
        "http_cache_hits_total",
        Ty::Counter,
        "Total number of HTTP requests not found in the cache on this frontend/backend since the worker process started",
    ),
    m(
        "max_queue_time_seconds",
        Ty::Gauge,
        "Maximum observed time spent in the queue",
    ),
    m(
        "max_connect_time_seconds",
        Ty::Gauge,
        "Maximum observed time spent waiting for a connection to complete",
    ),
    m(
        "max_response_time_seconds",
        Ty::Gauge,
        "Maximum observed time spent waiting for a server response",
    ),
    m(
        "max_total_time_seconds",
        Ty::Gauge,
        "Maximum observed total request+response time (request+queue+connect+response+processing)",
    ),
    m(
        "internal_errors_total",
        Ty::Counter,
        "Total number of internal errors since process started",
    ),
    m(
        "uweight",
        Ty::Gauge,
        "Server's user weight, or sum of active servers' user weights for a backend",
    ),
    m(
        "agg_server_status",
        Ty::Gauge,
        "Backend's aggregated gauge of servers' status",
    ),
    m(
        "agg_server_check_status",
        Ty::Gauge,
        "Backend's aggregated gauge of servers' state check status",
    ),
    m(
        "agg_check_status",
        Ty::Gauge,
        "Backend's aggregated gauge of servers' state check status",
    ),
];
const SERVER: &[Metric] = &[
    m(
        "current_queue",
        Ty::Gauge,
        "Number of current queued connections",
    ),
    m(
        "max_queue",
        Ty::Gauge,
        "Highest value of queued connections encountered since process started",
    ),
    m(
        "current_sessions",
        Ty::Gauge,
        "Number of current sessions on the frontend, backend or server",
    ),
    m(
        "max_sessions",
        Ty::Gauge,
        "Highest value of current sessions encountered since process started",
    ),
    m(
        "limit_sessions",
        Ty::Gauge,
        "Frontend/listener/server's maxconn, backend's fullconn",
    ),
    m(
        "sessions_total",
        Ty::Counter,
        "Total number of sessions since process started",
    ),
    m(
        "bytes_in_total",
        Ty::Counter,
        "Total number of request bytes since process started",
    ),
    m(
        "bytes_out_total",
        Ty::Counter,
        "Total number of response bytes since process started",
    ),
    m(
        "responses_denied_total",
        Ty::Counter,
        "Total number of denied responses since process started",
    ),
    m(
        "connection_errors_total",
        Ty::Counter,
        "Total number of failed connections to server since the worker process started",
    ),
    m(
        "response_errors_total",
        Ty::Counter,
        "Total number of invalid responses since the worker process started",
    ),
    m(
        "retry_warnings_total",
        Ty::Counter,
        "Total number of server connection retries since the worker process started",
    ),
    m(
        "redispatch_warnings_total",
        Ty::Counter,
        "Total number of server redispatches due to connection failures since the worker process started",
    ),
    m(
        "status",
        Ty::Gauge,
        "Current status of the service, per state label value.",
    ),
    m(
        "weight",
        Ty::Gauge,
        "Server's effective weight, or sum of active servers' effective weights for a backend",
    ),
    m(
        "check_failures_total",
        Ty::Counter,
        "Total number of failed individual health checks per server/backend, since the worker process started",
    ),
    m(
        "check_up_down_total",
        Ty::Counter,
        "Total number of failed checks causing UP to DOWN server transitions, per server/backend, since the worker process started",
    ),
    m(
        "check_last_change_seconds",
        Ty::Gauge,
        "How long ago the last server state changed, in seconds",
    ),
    m(
        "downtime_seconds_total",
        Ty::Counter,
        "Total time spent in DOWN state, for server or backend",
    ),
    m(
        "queue_limit",
        Ty::Gauge,
        "Limit on the number of connections in queue, for servers only (maxqueue argument)",
    ),
    m(
        "current_throttle",
        Ty::Gauge,
        "Throttling ratio applied to a server's maxconn and weight during the slowstart period (0 to 100%)",
    ),
    m(
        "loadbalanced_total",
        Ty::Counter,
        "Total number of requests routed by load balancing since the worker process started (ignores queue pop and stickiness)",
    ),
    m(
        "max_session_rate",
        Ty::Gauge,
        "Highest value of sessions per second observed since the worker process started",
    ),
    m(
        "check_status",
        Ty::Gauge,
        "Status of last health check, per state label value.",
    ),
    m(
        "check_code",
        Ty::Gauge,
        "layer5-7 code, if available of the last health check.",
    ),
    m(
        "check_duration_seconds",
        Ty::Gauge,
        "Total duration of the latest server health check, in seconds.",
    ),
    m(
        "http_responses_total",
        Ty::Counter,
        "Total number of HTTP responses with status 100-199 returned by this object since the worker process started",
    ),
    m(
        "client_aborts_total",
        Ty::Counter,
        "Total number of requests or connections aborted by the client since the worker process started",
    ),
    m(
        "server_aborts_total",
        Ty::Counter,
        "Total number of requests or connections aborted by the server since the worker process started",
    ),
    m(
        "last_session_seconds",
        Ty::Gauge,
        "How long ago some traffic was seen on this object on this worker process, in seconds",
    ),
    m(
        "queue_time_average_seconds",
        Ty::Gauge,
        "Avg. queue time for last 1024 successful connections.",
    ),
    m(
        "connect_time_average_seconds",
        Ty::Gauge,
        "Avg. connect time for last 1024 successful connections.",
    ),
    m(
        "response_time_average_seconds",
        Ty::Gauge,
        "Avg. response time for last 1024 successful connections.",
    ),
    m(
        "total_time_average_seconds",
        Ty::Gauge,
        "Avg. total time for last 1024 successful connections.",
    ),
    m(
        "failed_header_rewriting_total",
        Ty::Counter,
        "Total number of failed HTTP header rewrites since the worker process started",
    ),
    m(
        "connection_attempts_total",
        Ty::Counter,
        "Total number of outgoing connection attempts on this backend/server since the worker process started",
    ),
    m(
        "connection_reuses_total",
        Ty::Counter,
        "Total number of reused connection on this backend/server since the worker process started",
    ),
    m(
        "idle_connections_current",
        Ty::Gauge,
        "Current number of idle connections available for reuse on this server",
    ),
    m(
        "idle_connections_limit",
        Ty::Gauge,
        "Limit on the number of available idle connections on this server (server 'pool_max_conn' directive)",
    ),
    m(
        "max_queue_time_seconds",
        Ty::Gauge,
        "Maximum observed time spent in the queue",
    ),
    m(
        "max_connect_time_seconds",
        Ty::Gauge,
        "Maximum observed time spent waiting for a connection to complete",
    ),
    m(
        "max_response_time_seconds",
        Ty::Gauge,
        "Maximum observed time spent waiting for a server response",
    ),
    m(
        "max_total_time_seconds",
        Ty::Gauge,
        "Maximum observed total request+response time (request+queue+connect+response+processing)",
    ),
    m(
        "internal_errors_total",
        Ty::Counter,
        "Total number of internal errors since process started",
    ),
    m(
        "unsafe_idle_connections_current",
        Ty::Gauge,
        "Current number of unsafe idle connections",
    ),
    m(
        "safe_idle_connections_current",
        Ty::Gauge,
        "Current number of safe idle connections",
    ),
    m(
        "used_connections_current",
        Ty::Gauge,
        "Current number of connections in use",
    ),
    m(
        "need_connections_current",
        Ty::Gauge,
        "Estimated needed number of connections",
    ),
    m(
        "uweight",
        Ty::Gauge,
        "Server's user weight, or sum of active servers' user weights for a backend",
    ),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tests::{counters, n, row};

    const CSV: &str = include_str!("../testdata/haproxy-2.6/stats/capture-show-stat.csv");
    const GOLDEN: &str = include_str!("../testdata/haproxy-2.6/stats/promex-metrics.txt");

    fn fe(name: &str, id: u32) -> ProxySnap {
        ProxySnap {
            name: name.into(),
            id,
            mode: ProxyMode::Http,
            frontend: Some(FrontendSnap {
                maxconn: 9983,
                counters: counters(&row(CSV, name, "FRONTEND")),
                ..FrontendSnap::default()
            }),
            ..ProxySnap::default()
        }
    }

    fn srv(
        name: &str,
        id: u32,
        up: bool,
        backup: bool,
        check: Option<(CheckStatus, u32, u32, u32)>,
    ) -> ServerSnap {
        let f = row(CSV, "be", name);
        let mut sv = ServerSnap {
            name: name.into(),
            id,
            backup,
            op_state: if up {
                OpState::Running
            } else {
                OpState::Stopped
            },
            uweight: 1,
            iweight: 1,
            eweight: 1,
            last_change_secs: n(&f, "lastchg") as u32,
            downtime_secs: n(&f, "downtime") as u32,
            counters: counters(&f),
            ..ServerSnap::default()
        };
        if let Some((status, code, rise, fall)) = check {
            sv.check = CheckSnap {
                configured: true,
                enabled: true,
                status,
                code,
                rise,
                fall,
                health: if up { rise + fall - 1 } else { 0 },
                failed: n(&f, "chkfail"),
                down_trans: n(&f, "chkdown"),
                ..CheckSnap::default()
            };
        }
        sv
    }

    /// `capture.cfg` at the moment of `capture-show-stat.csv`.
    fn capture_snapshot() -> Snapshot {
        let b = row(CSV, "be", "BACKEND");
        let be = ProxySnap {
            name: "be".into(),
            id: 5,
            mode: ProxyMode::Http,
            backend: Some(BackendSnap {
                fullconn: 999,
                algo: "roundrobin".into(),
                dynamic_weights: true,
                down_trans: n(&b, "chkdown"),
                last_change_secs: n(&b, "lastchg") as u32,
                downtime_secs: n(&b, "downtime") as u32,
                counters: counters(&b),
                ..BackendSnap::default()
            }),
            servers: vec![
                srv("up1", 1, true, false, Some((CheckStatus::L7Ok, 200, 1, 1))),
                srv(
                    "down1",
                    2,
                    false,
                    false,
                    Some((CheckStatus::L4Con, 0, 1, 1)),
                ),
                srv("bk1", 3, true, true, Some((CheckStatus::L7Ok, 200, 2, 3))),
                srv("nochk", 4, true, false, None),
            ],
            ..ProxySnap::default()
        };
        Snapshot {
            info: ProcessInfo {
                build_info: "2.6.12-1+deb12u4".into(),
                nbthread: 2,
                ..ProcessInfo::default()
            },
            proxies: vec![fe("stats", 2), fe("stats2", 3), fe("prom", 4), be],
        }
    }

    fn key(l: &str) -> &str {
        l.rsplit_once(' ').map_or(l, |(k, _)| k)
    }

    /// Same metrics, HELP/TYPE texts, label sets and order as HAProxy 2.6.12; backend and
    /// server values identical (the frontends and the process moved between the captures).
    #[test]
    fn exposition_matches_haproxy_promex() {
        let mut out = String::new();
        dump_prometheus(&capture_snapshot(), &mut out);
        let mine: Vec<&str> = out.lines().collect();
        let gold: Vec<&str> = GOLDEN.lines().collect();
        assert_eq!(mine.len(), gold.len());
        for (a, b) in mine.iter().zip(&gold) {
            if b.starts_with('#') {
                assert_eq!(a, b);
                continue;
            }
            assert_eq!(key(a), key(b));
            if b.starts_with("haproxy_backend_") || b.starts_with("haproxy_server_") {
                assert_eq!(a, b);
            }
        }
    }

    #[test]
    fn small_snapshot_exact_text() {
        let snap = Snapshot {
            info: ProcessInfo::default(),
            proxies: vec![ProxySnap {
                name: "b".into(),
                id: 2,
                mode: ProxyMode::Tcp,
                backend: Some(BackendSnap::default()),
                servers: vec![ServerSnap {
                    name: "s1".into(),
                    id: 1,
                    op_state: OpState::Running,
                    admin: AdminFlags(AdminFlags::FDRAIN),
                    uweight: 1,
                    eweight: 1,
                    ..ServerSnap::default()
                }],
                ..ProxySnap::default()
            }],
        };
        let mut out = String::new();
        dump_servers(&snap, &mut out);
        let status: Vec<&str> = out
            .lines()
            .skip_while(|l| !l.contains("haproxy_server_status"))
            .take(7)
            .collect();
        assert_eq!(
            status,
            [
                "# HELP haproxy_server_status Current status of the service, per state label value.",
                "# TYPE haproxy_server_status gauge",
                "haproxy_server_status{proxy=\"b\",server=\"s1\",state=\"DOWN\"} 0",
                "haproxy_server_status{proxy=\"b\",server=\"s1\",state=\"UP\"} 0",
                "haproxy_server_status{proxy=\"b\",server=\"s1\",state=\"MAINT\"} 0",
                "haproxy_server_status{proxy=\"b\",server=\"s1\",state=\"DRAIN\"} 1",
                "haproxy_server_status{proxy=\"b\",server=\"s1\",state=\"NOLB\"} 0",
            ]
        );
        // No check: no check_status/check_code samples, hence no header either; TCP: no
        // http_responses_total.
        assert!(!out.contains("haproxy_server_check_status"));
        assert!(!out.contains("haproxy_server_check_code"));
        assert!(!out.contains("http_responses_total"));
        assert!(out.contains("haproxy_server_queue_limit{proxy=\"b\",server=\"s1\"} NaN\n"));
        assert!(out.contains(
            "haproxy_server_total_time_average_seconds{proxy=\"b\",server=\"s1\"} 0.000000\n"
        ));
    }
}
