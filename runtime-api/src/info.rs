//! `show info [typed|json] [desc] [float]`: HAProxy 2.6's `info_fields[]` in order. Fields with no
//! value (ZlibMemUsage and MaxZlibMemUsage in a build without zlib, an unset `description`) are
//! skipped, leaving holes in the positions as HAProxy does.

use crate::field::{Tags, Ty, Val, push_json_tags_value, push_typed_value};
use crate::model::ProcessInfo;
use std::fmt::Write as _;

/// Output format of `show info`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InfoFormat {
    #[default]
    Plain,
    Typed,
    Json,
}

/// (position, name, tags, type, description)
type InfoCol = (usize, &'static str, &'static [u8; 3], Ty, &'static str);

static INFO_COLS: &[InfoCol] = &[
    (0, "Name", b"POS", Ty::Str, "Product name"),
    (1, "Version", b"POS", Ty::Str, "Product version"),
    (
        2,
        "Release_date",
        b"POS",
        Ty::Str,
        "Date of latest source code update",
    ),
    (
        3,
        "Nbthread",
        b"CGS",
        Ty::U32,
        "Number of started threads (global.nbthread)",
    ),
    (
        4,
        "Nbproc",
        b"CGS",
        Ty::U32,
        "Number of started worker processes (historical, always 1)",
    ),
    (
        5,
        "Process_num",
        b"KGP",
        Ty::U32,
        "Relative worker process number (1)",
    ),
    (
        6,
        "Pid",
        b"SGP",
        Ty::U32,
        "This worker process identifier for the system",
    ),
    (
        7,
        "Uptime",
        b"MDP",
        Ty::Str,
        "How long ago this worker process was started (days+hours+minutes+seconds)",
    ),
    (
        8,
        "Uptime_sec",
        b"MDP",
        Ty::U32,
        "How long ago this worker process was started (seconds)",
    ),
    (
        9,
        "Memmax_MB",
        b"CLP",
        Ty::U32,
        "Worker process's hard limit on memory usage in MB (-m on command line)",
    ),
    (
        10,
        "PoolAlloc_MB",
        b"MGP",
        Ty::U32,
        "Amount of memory allocated in pools (in MB)",
    ),
    (
        11,
        "PoolUsed_MB",
        b"MGP",
        Ty::U32,
        "Amount of pool memory currently used (in MB)",
    ),
    (
        12,
        "PoolFailed",
        b"MCP",
        Ty::U32,
        "Number of failed pool allocations since this worker was started",
    ),
    (
        13,
        "Ulimit-n",
        b"CLP",
        Ty::U32,
        "Hard limit on the number of per-process file descriptors",
    ),
    (
        14,
        "Maxsock",
        b"CLP",
        Ty::U32,
        "Hard limit on the number of per-process sockets",
    ),
    (
        15,
        "Maxconn",
        b"CLP",
        Ty::U32,
        "Hard limit on the number of per-process connections (configured or imposed by Ulimit-n)",
    ),
    (
        16,
        "Hard_maxconn",
        b"CLP",
        Ty::U32,
        "Hard limit on the number of per-process connections (imposed by Memmax_MB or Ulimit-n)",
    ),
    (
        17,
        "CurrConns",
        b"MGP",
        Ty::U32,
        "Current number of connections on this worker process",
    ),
    (
        18,
        "CumConns",
        b"MCP",
        Ty::U32,
        "Total number of connections on this worker process since started",
    ),
    (
        19,
        "CumReq",
        b"MCP",
        Ty::U32,
        "Total number of requests on this worker process since started",
    ),
    (
        20,
        "MaxSslConns",
        b"MMP",
        Ty::U32,
        "Hard limit on the number of per-process SSL endpoints (front+back), 0=unlimited",
    ),
    (
        21,
        "CurrSslConns",
        b"MGP",
        Ty::U32,
        "Current number of SSL endpoints on this worker process (front+back)",
    ),
    (
        22,
        "CumSslConns",
        b"MCP",
        Ty::U32,
        "Total number of SSL endpoints on this worker process since started (front+back)",
    ),
    (
        23,
        "Maxpipes",
        b"CLP",
        Ty::U32,
        "Hard limit on the number of pipes for splicing, 0=unlimited",
    ),
    (
        24,
        "PipesUsed",
        b"MGP",
        Ty::U32,
        "Current number of pipes in use in this worker process",
    ),
    (
        25,
        "PipesFree",
        b"MGP",
        Ty::U32,
        "Current number of allocated and available pipes in this worker process",
    ),
    (
        26,
        "ConnRate",
        b"MRP",
        Ty::U32,
        "Number of front connections created on this worker process over the last second",
    ),
    (
        27,
        "ConnRateLimit",
        b"CLP",
        Ty::U32,
        "Hard limit for ConnRate (global.maxconnrate)",
    ),
    (
        28,
        "MaxConnRate",
        b"MMP",
        Ty::U32,
        "Highest ConnRate reached on this worker process since started (in connections per second)",
    ),
    (
        29,
        "SessRate",
        b"MRP",
        Ty::U32,
        "Number of sessions created on this worker process over the last second",
    ),
    (
        30,
        "SessRateLimit",
        b"CLP",
        Ty::U32,
        "Hard limit for SessRate (global.maxsessrate)",
    ),
    (
        31,
        "MaxSessRate",
        b"MRP",
        Ty::U32,
        "Highest SessRate reached on this worker process since started (in sessions per second)",
    ),
    (
        32,
        "SslRate",
        b"MRP",
        Ty::U32,
        "Number of SSL connections created on this worker process over the last second",
    ),
    (
        33,
        "SslRateLimit",
        b"CLP",
        Ty::U32,
        "Hard limit for SslRate (global.maxsslrate)",
    ),
    (
        34,
        "MaxSslRate",
        b"MMP",
        Ty::U32,
        "Highest SslRate reached on this worker process since started (in connections per second)",
    ),
    (
        35,
        "SslFrontendKeyRate",
        b"MGP",
        Ty::U32,
        "Number of SSL keys created on frontends in this worker process over the last second",
    ),
    (
        36,
        "SslFrontendMaxKeyRate",
        b"MMP",
        Ty::U32,
        "Highest SslFrontendKeyRate reached on this worker process since started (in SSL keys per second)",
    ),
    (
        37,
        "SslFrontendSessionReuse_pct",
        b"MGP",
        Ty::U32,
        "Percent of frontend SSL connections which did not require a new key",
    ),
    (
        38,
        "SslBackendKeyRate",
        b"MRP",
        Ty::U32,
        "Number of SSL keys created on backends in this worker process over the last second",
    ),
    (
        39,
        "SslBackendMaxKeyRate",
        b"MMP",
        Ty::U32,
        "Highest SslBackendKeyRate reached on this worker process since started (in SSL keys per second)",
    ),
    (
        40,
        "SslCacheLookups",
        b"MCP",
        Ty::U32,
        "Total number of SSL session ID lookups in the SSL session cache on this worker since started",
    ),
    (
        41,
        "SslCacheMisses",
        b"MCP",
        Ty::U32,
        "Total number of SSL session ID lookups that didn't find a session in the SSL session cache on this worker since started",
    ),
    (
        42,
        "CompressBpsIn",
        b"MRP",
        Ty::U32,
        "Number of bytes submitted to the HTTP compressor in this worker process over the last second",
    ),
    (
        43,
        "CompressBpsOut",
        b"MRP",
        Ty::U32,
        "Number of bytes emitted by the HTTP compressor in this worker process over the last second",
    ),
    (
        44,
        "CompressBpsRateLim",
        b"CLP",
        Ty::U32,
        "Limit of CompressBpsOut beyond which HTTP compression is automatically disabled",
    ),
    (
        47,
        "Tasks",
        b"MGP",
        Ty::U32,
        "Total number of tasks in the current worker process (active + sleeping)",
    ),
    (
        48,
        "Run_queue",
        b"MGP",
        Ty::U32,
        "Total number of active tasks+tasklets in the current worker process",
    ),
    (
        49,
        "Idle_pct",
        b"MaP",
        Ty::U32,
        "Percentage of last second spent waiting in the current worker thread",
    ),
    (50, "node", b"COS", Ty::Str, "Node name (global.node)"),
    (
        52,
        "Stopping",
        b"MGP",
        Ty::U32,
        "1 if the worker process is currently stopping, otherwise zero",
    ),
    (51, "description", b"COS", Ty::Str, "Node description"),
    (
        53,
        "Jobs",
        b"MGP",
        Ty::U32,
        "Current number of active jobs on the current worker process (frontend connections, master connections, listeners)",
    ),
    (
        54,
        "Unstoppable Jobs",
        b"MGP",
        Ty::U32,
        "Current number of unstoppable jobs on the current worker process (master connections)",
    ),
    (
        55,
        "Listeners",
        b"MGP",
        Ty::U32,
        "Current number of active listeners on the current worker process",
    ),
    (
        56,
        "ActivePeers",
        b"MGP",
        Ty::U32,
        "Current number of verified active peers connections on the current worker process",
    ),
    (
        57,
        "ConnectedPeers",
        b"MGP",
        Ty::U32,
        "Current number of peers having passed the connection step on the current worker process",
    ),
    (
        58,
        "DroppedLogs",
        b"MGP",
        Ty::U32,
        "Total number of dropped logs for current worker process since started",
    ),
    (
        59,
        "BusyPolling",
        b"MGP",
        Ty::U32,
        "1 if busy-polling is currently in use on the worker process, otherwise zero (config.busy-polling)",
    ),
    (
        60,
        "FailedResolutions",
        b"MGP",
        Ty::U32,
        "Total number of failed DNS resolutions in current worker process since started",
    ),
    (
        61,
        "TotalBytesOut",
        b"MGP",
        Ty::U64,
        "Total number of bytes emitted by current worker process since started",
    ),
    (
        62,
        "TotalSplicdedBytesOut",
        b"MGP",
        Ty::U64,
        "Total number of bytes emitted by current worker process through a kernel pipe since started",
    ),
    (
        63,
        "BytesOutRate",
        b"MRP",
        Ty::U64,
        "Number of bytes emitted by current worker process over the last second",
    ),
    (
        64,
        "DebugCommandsIssued",
        b"MGP",
        Ty::U32,
        "Number of debug commands issued on this process (anything > 0 is unsafe)",
    ),
    (
        65,
        "CumRecvLogs",
        b"MCP",
        Ty::U32,
        "Total number of log messages received by log-forwarding listeners on this worker process since started",
    ),
    (66, "Build info", b"POS", Ty::Str, "Build info"),
    (
        67,
        "Memmax_bytes",
        b"CLP",
        Ty::U32,
        "Worker process's hard limit on memory usage in byes (-m on command line)",
    ),
    (
        68,
        "PoolAlloc_bytes",
        b"MGP",
        Ty::U64,
        "Amount of memory allocated in pools (in bytes)",
    ),
    (
        69,
        "PoolUsed_bytes",
        b"MGP",
        Ty::U64,
        "Amount of pool memory currently used (in bytes)",
    ),
    (
        70,
        "Start_time_sec",
        b"MDP",
        Ty::U32,
        "Start time in seconds",
    ),
    (71, "Tainted", b"SGP", Ty::Str, "Experimental features used"),
];

fn value<'a>(i: &'a ProcessInfo, pos: usize, scratch: &'a mut String) -> Val<'a> {
    let u = |v: u64| Val::U(v);
    match pos {
        0 => Val::S(&i.name),
        1 => Val::S(&i.version),
        2 => Val::S(&i.release_date),
        3 => u(i.nbthread.into()),
        4 | 5 => u(1),
        6 => u(i.pid.into()),
        7 => {
            let s = i.uptime_secs;
            let _ = write!(
                scratch,
                "{}d {}h{:02}m{:02}s",
                s / 86400,
                (s / 3600) % 24,
                (s / 60) % 60,
                s % 60
            );
            Val::S(scratch)
        }
        8 => u(i.uptime_secs.into()),
        9 => u(i.memmax_mb.into()),
        10 => u(i.pool_alloc_bytes / (1024 * 1024)),
        11 => u(i.pool_used_bytes / (1024 * 1024)),
        12 => u(i.pool_failed.into()),
        13 => u(i.ulimit_n.into()),
        14 => u(i.maxsock.into()),
        15 => u(i.maxconn.into()),
        16 => u(i.hard_maxconn.into()),
        17 => u(i.curr_conns.into()),
        18 => u(i.cum_conns.into()),
        19 => u(i.cum_req.into()),
        20 => u(i.max_ssl_conns.into()),
        21 => u(i.curr_ssl_conns.into()),
        22 => u(i.cum_ssl_conns.into()),
        23 => u(i.maxpipes.into()),
        24 => u(i.pipes_used.into()),
        25 => u(i.pipes_free.into()),
        26 => u(i.conn_rate.into()),
        27 => u(i.conn_rate_limit.into()),
        28 => u(i.max_conn_rate.into()),
        29 => u(i.sess_rate.into()),
        30 => u(i.sess_rate_limit.into()),
        31 => u(i.max_sess_rate.into()),
        32 => u(i.ssl_rate.into()),
        33 => u(i.ssl_rate_limit.into()),
        34 => u(i.max_ssl_rate.into()),
        35 => u(i.ssl_frontend_key_rate.into()),
        36 => u(i.ssl_frontend_max_key_rate.into()),
        37 => u(i.ssl_frontend_session_reuse_pct.into()),
        38 => u(i.ssl_backend_key_rate.into()),
        39 => u(i.ssl_backend_max_key_rate.into()),
        40 => u(i.ssl_cache_lookups.into()),
        41 => u(i.ssl_cache_misses.into()),
        42 => u(i.compress_bps_in.into()),
        43 => u(i.compress_bps_out.into()),
        44 => u(i.compress_bps_rate_lim.into()),
        47 => u(i.tasks.into()),
        48 => u(i.run_queue.into()),
        49 => u(i.idle_pct.into()),
        50 => Val::S(&i.node),
        51 => match &i.description {
            Some(d) => Val::S(d),
            None => Val::Empty,
        },
        52 => u(i.stopping.into()),
        53 => u(i.jobs.into()),
        54 => u(i.unstoppable_jobs.into()),
        55 => u(i.listeners.into()),
        56 => u(i.active_peers.into()),
        57 => u(i.connected_peers.into()),
        58 => u(i.dropped_logs.into()),
        59 => u(i.busy_polling.into()),
        60 => u(i.failed_resolutions.into()),
        61 => u(i.total_bytes_out),
        62 => u(i.total_spliced_bytes_out),
        63 => u(i.bytes_out_rate),
        64 => u(i.debug_commands_issued.into()),
        65 => u(i.cum_recv_logs.into()),
        66 => Val::S(&i.build_info),
        67 => u(i.memmax_bytes.into()),
        68 => u(i.pool_alloc_bytes),
        69 => u(i.pool_used_bytes),
        70 => u(i.start_time_sec.into()),
        71 => {
            if i.tainted == 0 {
                scratch.push('0');
            } else {
                let _ = write!(scratch, "{:#x}", i.tainted);
            }
            Val::S(scratch)
        }
        _ => Val::Empty,
    }
}

/// Renders `show info` (without the CLI's final empty line).
pub fn dump_info(i: &ProcessInfo, format: InfoFormat, desc: bool, out: &mut String) {
    let mut scratch = String::new();
    if format == InfoFormat::Json {
        out.push('[');
    }
    let mut first = true;
    for &(pos, name, tags, ty, d) in INFO_COLS {
        scratch.clear();
        let v = value(i, pos, &mut scratch);
        if v.is_empty() {
            continue;
        }
        match format {
            InfoFormat::Plain => {
                out.push_str(name);
                out.push_str(": ");
                v.push_raw(out);
            }
            InfoFormat::Typed => {
                let _ = write!(out, "{pos}.{name}.1:");
                push_typed_value(Tags(*tags), ty, &v, out);
            }
            InfoFormat::Json => {
                if !first {
                    out.push(',');
                }
                let _ = write!(
                    out,
                    "{{\"field\":{{\"pos\":{pos},\"name\":\"{name}\"}},\"processNum\":1,"
                );
                push_json_tags_value(Tags(*tags), ty, &v, out);
                out.push('}');
            }
        }
        first = false;
        if format != InfoFormat::Json {
            if desc {
                let _ = write!(out, ":\"{d}\"");
            }
            out.push('\n');
        }
    }
    if format == InfoFormat::Json {
        out.push_str("]\n");
    }
}
