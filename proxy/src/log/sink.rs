//! Log sinks: syslog header formatting (pure, [`format_header`]) and one writer thread per
//! process fed through a bounded channel ([`LogSink`]). Workers never block on logging: when the
//! channel is full the line is dropped and counted (HAProxy likewise drops on `EAGAIN` and
//! counts `dropped_logs`).
//!
//! Program name: HAProxy prints `haproxy[pid]:` by default; operators grep for it, so we keep
//! [`DEFAULT_LOG_TAG`] = `haproxy` unless `log-tag` is configured.

use std::io::Write as _;
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::net::UnixDatagram;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::thread::JoinHandle;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::model::{Facility, Level, LogFormatKind, LogTarget};
use crate::log::format::{civil, push_padded, push_uint};

/// Tag printed in `tag[pid]:` when `log-tag` is not set.
pub const DEFAULT_LOG_TAG: &str = "haproxy";

/// Syslog severities, named.
pub mod level {
    use crate::config::model::Level;
    pub const EMERG: Level = Level(0);
    pub const ALERT: Level = Level(1);
    pub const CRIT: Level = Level(2);
    pub const ERR: Level = Level(3);
    pub const WARNING: Level = Level(4);
    pub const NOTICE: Level = Level(5);
    pub const INFO: Level = Level(6);
    pub const DEBUG: Level = Level(7);
}

/// What the header shows besides time and priority.
#[derive(Clone, Copy, Debug)]
pub struct HeaderMeta<'a> {
    pub tag: &'a str,
    pub pid: u32,
    /// `log-send-hostname`; rfc3164 prints `localhost` and rfc5424 `-` without it.
    pub hostname: Option<&'a str>,
}

/// Append the syslog header for `kind` to `out` (HAProxy 2.6 `build_log_header`):
/// - `local`:    `<PRI>Mmm dd HH:MM:SS tag[pid]: `
/// - `rfc3164`:  `<PRI>Mmm dd HH:MM:SS host tag[pid]: `
/// - `rfc5424`:  `<PRI>1 ISO8601 host tag pid - - `
/// - `priority`: `<PRI>`; `short`: `<LEVEL>`; `timed`: `<LEVEL>ISO8601 `; `iso`: `ISO8601 `;
///   `raw`: nothing.
///
/// `now_us` is the emission time (epoch µs), `utc_offset_secs` the local offset.
pub fn format_header(
    kind: LogFormatKind,
    facility: Facility,
    lvl: Level,
    now_us: i64,
    utc_offset_secs: i32,
    meta: &HeaderMeta<'_>,
    out: &mut String,
) {
    use std::fmt::Write as _;
    let pri = u32::from(facility.0) * 8 + u32::from(lvl.0);
    match kind {
        LogFormatKind::Local
        | LogFormatKind::Rfc3164
        | LogFormatKind::Rfc5424
        | LogFormatKind::Priority => {
            out.push('<');
            push_uint(out, pri.into());
            out.push('>');
        }
        LogFormatKind::Short | LogFormatKind::Timed => {
            out.push('<');
            push_uint(out, lvl.0.into());
            out.push('>');
        }
        LogFormatKind::Iso | LogFormatKind::Raw => {}
    }
    match kind {
        // The common headers without the formatting machinery: one per log line.
        LogFormatKind::Local | LogFormatKind::Rfc3164 => {
            let c = civil(now_us, utc_offset_secs);
            out.push_str(c.month_name());
            out.push_str(if c.day < 10 { "  " } else { " " });
            push_uint(out, c.day.into());
            for (sep, v) in [(' ', c.hour), (':', c.min), (':', c.sec)] {
                out.push(sep);
                push_padded(out, v.into(), 2);
            }
            out.push(' ');
            if kind == LogFormatKind::Rfc3164 {
                out.push_str(meta.hostname.unwrap_or("localhost"));
                out.push(' ');
            }
            out.push_str(meta.tag);
            out.push('[');
            push_uint(out, meta.pid.into());
            out.push_str("]: ");
        }
        LogFormatKind::Rfc5424 => {
            out.push_str("1 ");
            iso_time(out, now_us, utc_offset_secs);
            let _ = write!(
                out,
                " {} {} {} - - ",
                meta.hostname.unwrap_or("-"),
                meta.tag,
                meta.pid
            );
        }
        LogFormatKind::Timed | LogFormatKind::Iso => {
            iso_time(out, now_us, utc_offset_secs);
            out.push(' ');
        }
        LogFormatKind::Priority | LogFormatKind::Short | LogFormatKind::Raw => {}
    }
}

/// `YYYY-MM-DDTHH:MM:SS.uuuuuu+hh:mm`
fn iso_time(out: &mut String, now_us: i64, off: i32) {
    use std::fmt::Write as _;
    let c = civil(now_us, off);
    let sign = if off < 0 { '-' } else { '+' };
    let a = off.unsigned_abs();
    let _ = write!(
        out,
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}{sign}{:02}:{:02}",
        c.year,
        c.month,
        c.day,
        c.hour,
        c.min,
        c.sec,
        c.usec,
        a / 3600,
        a % 3600 / 60
    );
}

/// Header + message + `\n`, as sent in one datagram or one write.
#[allow(clippy::too_many_arguments)]
pub fn format_message(
    kind: LogFormatKind,
    facility: Facility,
    lvl: Level,
    now_us: i64,
    utc_offset_secs: i32,
    meta: &HeaderMeta<'_>,
    line: &str,
    out: &mut String,
) {
    format_header(kind, facility, lvl, now_us, utc_offset_secs, meta, out);
    out.push_str(line.trim_end_matches(['\n', '\0']));
    out.push('\n');
}

fn target_parts(t: &LogTarget) -> (LogFormatKind, Facility, Option<Level>) {
    match t {
        LogTarget::Stdout {
            format,
            facility,
            level,
            ..
        }
        | LogTarget::Udp {
            format,
            facility,
            level,
            ..
        }
        | LogTarget::Unix {
            format,
            facility,
            level,
            ..
        } => (*format, *facility, *level),
    }
}

/// Whether `target` sends a line of severity `lvl` now: its level, then its `sample` (which
/// counts the line).
fn takes(target: &LogTarget, lvl: Level) -> bool {
    if !accepts(target, lvl) {
        return false;
    }
    match target {
        LogTarget::Stdout {
            sample: Some(smp), ..
        }
        | LogTarget::Udp {
            sample: Some(smp), ..
        }
        | LogTarget::Unix {
            sample: Some(smp), ..
        } => smp.take(),
        _ => true,
    }
}

/// Whether `target` takes a message of severity `lvl` (its level is the least severe it sends).
pub fn accepts(target: &LogTarget, lvl: Level) -> bool {
    target_parts(target).2.is_none_or(|max| lvl <= max)
}

/// Options of the per-process writer.
#[derive(Clone, Debug)]
pub struct SinkOptions {
    /// `log-tag`, default [`DEFAULT_LOG_TAG`].
    pub tag: String,
    pub pid: u32,
    /// `log-send-hostname`
    pub hostname: Option<String>,
    /// Lines buffered before dropping.
    pub capacity: usize,
}

impl Default for SinkOptions {
    fn default() -> Self {
        SinkOptions {
            tag: DEFAULT_LOG_TAG.into(),
            pid: std::process::id(),
            hostname: None,
            capacity: 4096,
        }
    }
}

struct Msg {
    target: LogTarget,
    facility: Facility,
    level: Level,
    time_us: i64,
    line: String,
}

#[derive(Default)]
struct Counters {
    dropped: AtomicU64,
    errors: AtomicU64,
}

/// Per-process log channel to one writer thread. Cheap to share behind an `Arc`.
pub struct LogSink {
    tx: Option<SyncSender<Msg>>,
    counters: Arc<Counters>,
    writer: Option<JoinHandle<()>>,
}

impl LogSink {
    /// Start the writer thread.
    pub fn new(opts: SinkOptions) -> std::io::Result<LogSink> {
        let (tx, rx) = sync_channel(opts.capacity.max(1));
        let counters = Arc::new(Counters::default());
        let c2 = counters.clone();
        let writer = std::thread::Builder::new()
            .name("log-writer".into())
            .spawn(move || writer_loop(rx, &opts, &c2))?;
        Ok(LogSink {
            tx: Some(tx),
            counters,
            writer: Some(writer),
        })
    }

    /// Queue `line` for `target` at severity `lvl` (facility: the target's unless given).
    /// Never blocks: a full channel drops the line and counts it.
    pub fn log(&self, target: &LogTarget, facility: Option<Facility>, lvl: Level, line: &str) {
        if takes(target, lvl) {
            self.send(target, facility, lvl, line.to_string());
        }
    }

    /// [`LogSink::log`] of a line the caller hands over (no copy: a session's line is made for
    /// its one target).
    pub fn log_owned(
        &self,
        target: &LogTarget,
        facility: Option<Facility>,
        lvl: Level,
        line: String,
    ) {
        if takes(target, lvl) {
            self.send(target, facility, lvl, line);
        }
    }

    fn send(&self, target: &LogTarget, facility: Option<Facility>, lvl: Level, line: String) {
        let Some(tx) = &self.tx else { return };
        let time_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_micros()).unwrap_or(i64::MAX));
        let msg = Msg {
            target: target.clone(),
            facility: facility.unwrap_or(target_parts(target).1),
            level: lvl,
            time_us,
            line,
        };
        match tx.try_send(msg) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.counters.dropped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Lines dropped because the writer was behind.
    pub fn dropped(&self) -> u64 {
        self.counters.dropped.load(Ordering::Relaxed)
    }

    /// Send/write failures seen by the writer.
    pub fn errors(&self) -> u64 {
        self.counters.errors.load(Ordering::Relaxed)
    }

    /// Flush what is queued and stop the writer.
    pub fn shutdown(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        self.tx = None;
        if let Some(w) = self.writer.take() {
            let _ = w.join();
        }
    }
}

impl Drop for LogSink {
    fn drop(&mut self) {
        self.stop();
    }
}

fn writer_loop(rx: Receiver<Msg>, opts: &SinkOptions, counters: &Counters) {
    let mut udp4: Option<UdpSocket> = None;
    let mut udp6: Option<UdpSocket> = None;
    let mut unix: Option<UnixDatagram> = None;
    let mut buf = String::with_capacity(1024);
    let meta = HeaderMeta {
        tag: &opts.tag,
        pid: opts.pid,
        hostname: opts.hostname.as_deref(),
    };
    // The local offset of the last second seen: a time zone lookup per second, not per line.
    let mut offset: Option<(i64, i32)> = None;
    for m in rx {
        buf.clear();
        let (kind, _, _) = target_parts(&m.target);
        let sec = m.time_us.div_euclid(1_000_000);
        let off = match offset {
            Some((s, off)) if s == sec => off,
            _ => {
                let off = local_utc_offset(sec);
                offset = Some((sec, off));
                off
            }
        };
        format_message(
            kind, m.facility, m.level, m.time_us, off, &meta, &m.line, &mut buf,
        );
        let res = match &m.target {
            LogTarget::Stdout { stderr: false, .. } => {
                std::io::stdout().lock().write_all(buf.as_bytes())
            }
            LogTarget::Stdout { stderr: true, .. } => {
                std::io::stderr().lock().write_all(buf.as_bytes())
            }
            LogTarget::Udp { addr, .. } => {
                let slot = if addr.is_ipv4() { &mut udp4 } else { &mut udp6 };
                send_udp(slot, *addr, buf.as_bytes())
            }
            LogTarget::Unix { path, .. } => send_unix(&mut unix, path, buf.as_bytes()),
        };
        if res.is_err() {
            counters.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn send_udp(slot: &mut Option<UdpSocket>, addr: SocketAddr, data: &[u8]) -> std::io::Result<()> {
    if slot.is_none() {
        let bind: SocketAddr = if addr.is_ipv4() {
            SocketAddr::from(([0, 0, 0, 0], 0))
        } else {
            SocketAddr::from(([0u16; 8], 0))
        };
        *slot = Some(UdpSocket::bind(bind)?);
    }
    match slot {
        Some(s) => s.send_to(data, addr).map(|_| ()),
        None => Ok(()),
    }
}

fn send_unix(slot: &mut Option<UnixDatagram>, path: &str, data: &[u8]) -> std::io::Result<()> {
    if slot.is_none() {
        *slot = Some(UnixDatagram::unbound()?);
    }
    match slot {
        Some(s) => s.send_to(data, path).map(|_| ()),
        None => Ok(()),
    }
}

/// The local UTC offset at `epoch_secs`, from the C library's time zone data.
pub fn local_utc_offset(epoch_secs: i64) -> i32 {
    let t: libc::time_t = epoch_secs as libc::time_t;
    // SAFETY: localtime_r only writes into the `tm` we own; a zeroed `tm` is a valid value.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::localtime_r(&t, &mut tm) };
    if r.is_null() {
        0
    } else {
        i32::try_from(tm.tm_gmtoff).unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &str = "127.0.0.1:54196 [30/Nov/2026:06:31:32.367] fh b/s1 0/0/0/1/1 200 185 - - ---- 1/1/0/0/0 0/0 \"GET /index.html HTTP/1.1\"";
    /// 2026-11-30T06:31:32.369130Z
    const NOW: i64 = 1_796_020_292_369_130;

    fn msg(kind: LogFormatKind) -> String {
        let mut s = String::new();
        let meta = HeaderMeta {
            tag: "haproxy",
            pid: 7369,
            hostname: None,
        };
        format_message(kind, Facility(16), level::INFO, NOW, 0, &meta, LINE, &mut s);
        s
    }

    /// The level filters first (a line it drops is not counted by the sample), then the
    /// sample's ranges: `sample 1:2` sends every other line.
    #[test]
    fn takes_filters_by_level_then_sample() {
        let t = LogTarget::Udp {
            addr: "127.0.0.1:514".parse().expect("addr"),
            format: LogFormatKind::Local,
            facility: Facility(16),
            level: Some(Level(3)),
            sample: Some(crate::config::model::LogSample {
                ranges: vec![(1, 1)],
                size: 2,
                counter: Arc::new(AtomicU64::new(0)),
            }),
        };
        let sent: Vec<bool> = [level::INFO, Level(3), Level(3), level::INFO, Level(3)]
            .into_iter()
            .map(|l| takes(&t, l))
            .collect();
        assert_eq!(sent, [false, true, false, false, true]);
    }

    /// A one-digit day is space-padded (`{:2}`), the time zero-padded.
    #[test]
    fn local_header_pads_the_day() {
        let meta = HeaderMeta {
            tag: "haproxy",
            pid: 7,
            hostname: Some("lb1"),
        };
        let mut s = String::new();
        let nov5 = NOW - 25 * 86_400 * 1_000_000 - 6 * 3_600 * 1_000_000;
        format_header(
            LogFormatKind::Rfc3164,
            Facility(16),
            level::INFO,
            nov5,
            0,
            &meta,
            &mut s,
        );
        assert_eq!(s, "<134>Nov  5 00:31:32 lb1 haproxy[7]: ");
    }

    /// Byte-exact against HAProxy 2.6 sending the same line to a UDP listener.
    #[test]
    fn headers_match_haproxy() {
        assert_eq!(
            msg(LogFormatKind::Local),
            format!("<134>Nov 30 06:31:32 haproxy[7369]: {LINE}\n")
        );
        assert_eq!(
            msg(LogFormatKind::Rfc3164),
            format!("<134>Nov 30 06:31:32 localhost haproxy[7369]: {LINE}\n")
        );
        assert_eq!(
            msg(LogFormatKind::Rfc5424),
            format!("<134>1 2026-11-30T06:31:32.369130+00:00 - haproxy 7369 - - {LINE}\n")
        );
        assert_eq!(msg(LogFormatKind::Short), format!("<6>{LINE}\n"));
        assert_eq!(msg(LogFormatKind::Priority), format!("<134>{LINE}\n"));
        assert_eq!(
            msg(LogFormatKind::Timed),
            format!("<6>2026-11-30T06:31:32.369130+00:00 {LINE}\n")
        );
        assert_eq!(
            msg(LogFormatKind::Iso),
            format!("2026-11-30T06:31:32.369130+00:00 {LINE}\n")
        );
        assert_eq!(msg(LogFormatKind::Raw), format!("{LINE}\n"));
    }

    #[test]
    fn header_details() {
        let meta = HeaderMeta {
            tag: "lb",
            pid: 1,
            hostname: Some("host1"),
        };
        let mut s = String::new();
        // 2026-03-05T23:59:59Z, shown at +01:00 and with a space-padded day
        format_header(
            LogFormatKind::Rfc3164,
            Facility(3),
            level::ERR,
            1_772_755_199_000_000,
            3600,
            &meta,
            &mut s,
        );
        assert_eq!(s, "<27>Mar  6 00:59:59 host1 lb[1]: ");
        s.clear();
        format_header(
            LogFormatKind::Rfc5424,
            Facility(0),
            level::EMERG,
            1_772_755_199_000_001,
            -(9 * 3600 + 30 * 60),
            &meta,
            &mut s,
        );
        assert_eq!(s, "<0>1 2026-03-05T14:29:59.000001-09:30 host1 lb 1 - - ");
    }

    fn udp_target(addr: SocketAddr, lvl: Option<Level>) -> LogTarget {
        LogTarget::Udp {
            addr,
            format: LogFormatKind::Local,
            facility: Facility(16),
            level: lvl,
            sample: None,
        }
    }

    #[test]
    fn level_filter() {
        let t = udp_target("127.0.0.1:1".parse().unwrap(), Some(level::NOTICE));
        assert!(accepts(&t, level::ERR));
        assert!(accepts(&t, level::NOTICE));
        assert!(!accepts(&t, level::INFO));
        assert!(accepts(
            &udp_target("127.0.0.1:1".parse().unwrap(), None),
            level::DEBUG
        ));
    }

    #[test]
    fn udp_and_unix_delivery() {
        let rx = UdpSocket::bind("127.0.0.1:0").unwrap();
        rx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let dir = std::env::temp_dir().join(format!("pc-sink-{}", std::process::id()));
        let _ = std::fs::create_dir_all(&dir);
        let upath = dir.join("log.sock");
        let _ = std::fs::remove_file(&upath);
        let urx = UnixDatagram::bind(&upath).unwrap();
        urx.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        let sink = LogSink::new(SinkOptions {
            pid: 42,
            ..SinkOptions::default()
        })
        .unwrap();
        let t = udp_target(rx.local_addr().unwrap(), None);
        sink.log(&t, None, level::INFO, "hello udp");
        let ut = LogTarget::Unix {
            path: upath.to_string_lossy().into_owned(),
            format: LogFormatKind::Raw,
            facility: Facility(16),
            level: None,
            sample: None,
        };
        sink.log(&ut, None, level::INFO, "hello unix");
        let mut b = [0u8; 512];
        let n = rx.recv(&mut b).unwrap();
        let got = String::from_utf8_lossy(&b[..n]).into_owned();
        assert!(got.starts_with("<134>"), "{got}");
        assert!(got.ends_with(" haproxy[42]: hello udp\n"), "{got}");
        let n = urx.recv(&mut b).unwrap();
        assert_eq!(&b[..n], b"hello unix\n");
        sink.shutdown();
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn full_channel_drops_and_counts() {
        // A sink whose writer never drains: the second line must be dropped, not block.
        let (tx, _rx) = sync_channel(1);
        let sink = LogSink {
            tx: Some(tx),
            counters: Arc::new(Counters::default()),
            writer: None,
        };
        let t = udp_target("127.0.0.1:9".parse().unwrap(), None);
        sink.log(&t, None, level::INFO, "a");
        sink.log(&t, None, level::INFO, "b");
        sink.log(&t, None, level::INFO, "c");
        assert_eq!(sink.dropped(), 2);
    }
}
