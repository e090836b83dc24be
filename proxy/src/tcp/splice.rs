//! The kernel relay of a `mode tcp` session: both sockets go into the splice's SOCKHASH and the
//! kernel carries the bytes (`kernel::sockmap`); this task keeps what userspace owns:
//!
//! - close and half-close: a read returning end of stream (the kernel has run the verdict on
//!   every byte before) waits until the peer socket has handed every redirected byte to TCP
//!   (`tcpi_bytes_acked + SIOCOUTQ` ≥ redirected), then shuts the peer's write side — shutting it
//!   at once would drop what still waits in the splice's queue;
//! - timeouts (client, server, tunnel, -fin): kernel progress counts as activity;
//! - flow control: it samples each receiver's acknowledged bytes for the verdict, which moves a
//!   direction to this relay once its un-acked redirected bytes would pass `max-unacked`;
//! - the bulk rule: a direction redirecting more than `bulk-rate` bytes a second (over
//!   `BULK_WINDOW`) moves to this relay too, which is faster for bulk than the splice;
//! - the fallen-back directions: bytes the verdict passes arrive on the socket as usual and are
//!   relayed here, after the peer has sent what the kernel redirected before them;
//! - kills (`on-marked-down shutdown-sessions`) and byte counters (kernel + userspace).

use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

use tokio::time::Instant;

use crate::engine::idle::{Activity, Timer};
use crate::engine::io::Stream;
use crate::kernel::sockmap::{Dir, Splice};
use crate::kernel::{BULK_WINDOW, tcpinfo};

use super::auto::BusyMark;
use super::relay::{DirEnd, RELAY_BUF, RelayStats, RelayTimeouts, classify, finish};

/// The fastest the acknowledged counts are sampled (while bytes move).
const TICK_MIN: Duration = Duration::from_millis(5);
/// The slowest (an idle session), unless a timeout needs it sooner.
const TICK_MAX: Duration = Duration::from_millis(250);

/// Relays a connected session through the kernel splice. `None` when the sockets cannot be
/// spliced: `kill` is handed back and the caller uses the userspace relay with the same streams.
pub async fn relay<K: std::future::Future<Output = ()>>(
    client: Rc<Stream>,
    server: Rc<Stream>,
    t: RelayTimeouts,
    max_unacked: u64,
    bulk_rate: u64,
    kill: K,
    mark: Option<&mut BusyMark>,
) -> Result<RelayStats, K> {
    let Some(loaded) = crate::kernel::loaded() else {
        return Err(kill);
    };
    let sp = match Splice::attach(loaded, client.raw_fd(), server.raw_fd(), max_unacked) {
        Ok(sp) => sp,
        Err(e) => {
            loaded
                .attach_failures
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::debug!("splice refused ({e}); using the userspace relay");
            return Err(kill);
        }
    };
    let mut own = BusyMark::default();
    let mark = mark.unwrap_or(&mut own);
    Ok(spliced(client, server, t, kill, sp, bulk_rate, mark).await)
}

async fn spliced(
    client: Rc<Stream>,
    server: Rc<Stream>,
    t: RelayTimeouts,
    kill: impl std::future::Future<Output = ()>,
    sp: Splice<'static>,
    bulk_rate: u64,
    mark: &mut BusyMark,
) -> RelayStats {
    let activity = Activity::default();
    let user_c2s = Cell::new(0u64);
    let user_s2c = Cell::new(0u64);
    let ct = Cell::new(t.tunnel.or(t.client));
    let st = Cell::new(t.tunnel.or(t.server));
    let up = pump(&client, &server, Dir::C2s, &sp, &ct, &activity, &user_c2s);
    let down = pump(&server, &client, Dir::S2c, &sp, &st, &activity, &user_s2c);
    let watch = watch(&sp, &activity, &ct, &st, bulk_rate, mark);
    let mut up = std::pin::pin!(up);
    let mut down = std::pin::pin!(down);
    let mut kill = std::pin::pin!(kill);
    let mut watch = std::pin::pin!(watch);
    let (first_up, first) = tokio::select! {
        e = &mut up => (true, e),
        e = &mut down => (false, e),
        _ = &mut kill => (true, DirEnd::Killed),
        _ = &mut watch => (true, DirEnd::Broken),
    };
    let end = match first {
        DirEnd::Eof => {
            if first_up {
                st.set(t.server_fin.or(st.get()));
            } else {
                ct.set(t.client_fin.or(ct.get()));
            }
            let rest = async {
                if first_up {
                    down.as_mut().await
                } else {
                    up.as_mut().await
                }
            };
            let second = tokio::select! {
                e = rest => e,
                _ = &mut kill => DirEnd::Killed,
                _ = &mut watch => DirEnd::Broken,
            };
            match second {
                DirEnd::Eof => super::End::Normal,
                other => classify(!first_up, other),
            }
        }
        other => classify(first_up, other),
    };
    let c2s = sp.flow(Dir::C2s).redirected + user_c2s.get();
    let s2c = sp.flow(Dir::S2c).redirected + user_s2c.get();
    // Out of the map before the sockets close or reset.
    sp.detach();
    finish(&client, &server, end);
    RelayStats { c2s, s2c, end }
}

/// One direction: reads what the verdict hands to userspace (nothing until the direction falls
/// back) and the end of stream.
async fn pump(
    from: &Stream,
    to: &Stream,
    dir: Dir,
    sp: &Splice<'_>,
    timeout: &Cell<Option<Duration>>,
    activity: &Activity,
    user: &Cell<u64>,
) -> DirEnd {
    let mut buf = Vec::with_capacity(RELAY_BUF);
    let mut timer = Timer::default();
    let recheck = Cell::new(tokio::time::Instant::now());
    let mut drained = false;
    let mut again = 0u32;
    let mut early_eof = 0u32;
    loop {
        buf.clear();
        let (res, b) = match timer
            .idle_by(from.read(buf), timeout, activity, &recheck)
            .await
        {
            Some(r) => r,
            None => return DirEnd::Timeout,
        };
        buf = b;
        let n = match res {
            Ok(0) => {
                // The end of stream can overtake bytes the verdict passed: when the socket's
                // own splice queue holds skbs (the other direction's redirects waiting for room
                // in this socket, or a deferred delivery), passed skbs wait behind them for the
                // kernel's worker, while recv already reports the FIN. Read on until every
                // passed byte has arrived.
                let passed = sp.flow(dir).passed;
                if user.get() < passed {
                    if early_eof == 0 {
                        tracing::debug!(
                            "splice {dir:?}: end of stream with {} of {passed} passed bytes read; \
                             waiting for the rest",
                            user.get()
                        );
                    }
                    early_eof += 1;
                    if let Err(e) = wait_passed(from, dir, timeout, activity, early_eof).await {
                        return e;
                    }
                    continue;
                }
                if let Err(e) = drain(to, dir, sp, user.get(), timeout, activity).await {
                    return e;
                }
                let _ = to.shutdown_write();
                return DirEnd::Eof;
            }
            Ok(n) => n,
            // A sockmap socket's recv says EAGAIN when bytes arrive while it runs the verdict on
            // its queue; io_uring hands that back instead of waiting. Try again, gently.
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                again += 1;
                if again > 3 {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                } else {
                    tokio::task::yield_now().await;
                }
                continue;
            }
            Err(e) => {
                tracing::debug!("splice {dir:?}: read error: {e}");
                return DirEnd::ReadErr;
            }
        };
        again = 0;
        early_eof = 0;
        activity.touch();
        // The first passed bytes follow everything the kernel redirected: the peer sends that
        // first. Afterwards the verdict redirects nothing more in this direction.
        if !drained {
            if let Err(e) = drain(to, dir, sp, user.get(), timeout, activity).await {
                return e;
            }
            drained = true;
        }
        user.set(user.get() + n as u64);
        let (res, b) = match timer
            .idle_by(to.write_all(buf), timeout, activity, &recheck)
            .await
        {
            Some(r) => r,
            None => return DirEnd::Timeout,
        };
        buf = b;
        if let Err(e) = res {
            tracing::debug!("splice {dir:?}: write error: {e}");
            return DirEnd::WriteErr;
        }
        activity.touch();
    }
}

/// Waits until `to` has handed to TCP every byte of `dir`: those the kernel redirected plus the
/// `user` bytes written here.
async fn drain(
    to: &Stream,
    dir: Dir,
    sp: &Splice<'_>,
    user: u64,
    timeout: &Cell<Option<Duration>>,
    activity: &Activity,
) -> Result<(), DirEnd> {
    let target = sp.flow(dir).redirected + user;
    let mut pause = Duration::from_micros(50);
    let mut last = 0;
    loop {
        let handed = match sp.handed(dir) {
            Ok(h) => h,
            Err(e) => {
                tracing::debug!("splice {dir:?}: TCP_INFO: {e}");
                return Err(DirEnd::WriteErr);
            }
        };
        if handed >= target {
            return Ok(());
        }
        if handed > last {
            activity.touch();
            last = handed;
        } else if let Some(t) = timeout.get()
            && activity.last() + t <= Instant::now()
        {
            return Err(DirEnd::Timeout);
        }
        if tcpinfo::is_closed(to.raw_fd()) {
            tracing::debug!("splice {dir:?}: receiver closed with {handed} of {target} bytes sent");
            return Err(DirEnd::WriteErr);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(Duration::from_millis(10));
    }
}

/// One pause of the wait for passed bytes that an early end of stream overtook (`n`: how many
/// reads have said end of stream so far): the kernel's worker delivers them, nothing signals it.
async fn wait_passed(
    from: &Stream,
    dir: Dir,
    timeout: &Cell<Option<Duration>>,
    activity: &Activity,
    n: u32,
) -> Result<(), DirEnd> {
    if let Some(t) = timeout.get()
        && activity.last() + t <= Instant::now()
    {
        return Err(DirEnd::Timeout);
    }
    if tcpinfo::is_closed(from.raw_fd()) {
        tracing::debug!("splice {dir:?}: sender closed before its passed bytes were read");
        return Err(DirEnd::ReadErr);
    }
    // 50 µs doubling to 10 ms.
    let pause = Duration::from_micros(50) * 2u32.saturating_pow(n.saturating_sub(1).min(8));
    tokio::time::sleep(pause.min(Duration::from_millis(10))).await;
    Ok(())
}

/// The bulk rule of one direction: more than `rate` bytes a second, counted over tumbling
/// windows of [`BULK_WINDOW`] (a window's share is reached early → bulk at once).
struct BulkMeter {
    rate: u64,
    start: Instant,
    at_start: u64,
}

impl BulkMeter {
    fn new(rate: u64, now: Instant) -> BulkMeter {
        BulkMeter {
            rate,
            start: now,
            at_start: 0,
        }
    }

    /// Whether `redirected` (the direction's running total) at `now` makes it bulk.
    fn is_bulk(&mut self, now: Instant, redirected: u64) -> bool {
        if self.rate == 0 {
            return false;
        }
        let share = self.rate.saturating_mul(BULK_WINDOW.as_millis() as u64) / 1000;
        if redirected.saturating_sub(self.at_start) > share {
            return true;
        }
        if now.duration_since(self.start) >= BULK_WINDOW {
            self.start = now;
            self.at_start = redirected;
        }
        false
    }
}

/// Samples each receiver's acknowledged bytes for the verdict's flow control, applies the bulk
/// rule, and counts kernel progress as activity for the timeouts. Returns only when a direction
/// is broken (a repeated head the verdict could not cut): the session must then be reset.
async fn watch(
    sp: &Splice<'_>,
    activity: &Activity,
    ct: &Cell<Option<Duration>>,
    st: &Cell<Option<Duration>>,
    bulk_rate: u64,
    mark: &mut BusyMark,
) {
    let mut seen = [0u64; 4];
    let now = Instant::now();
    // A spliced session counts as busy for `portcullis-relay auto` while bytes moved within
    // its last window.
    let mut last_move = now;
    mark.set(true);
    let mut meters = [
        BulkMeter::new(bulk_rate, now),
        BulkMeter::new(bulk_rate, now),
    ];
    let mut tick = TICK_MIN;
    loop {
        let cap = [ct.get(), st.get()]
            .into_iter()
            .flatten()
            .map(|t| t / 4)
            .fold(TICK_MAX, Duration::min)
            .max(TICK_MIN);
        tokio::time::sleep(tick.min(cap)).await;
        let mut moved = false;
        let now = Instant::now();
        for ((i, dir), meter) in [Dir::C2s, Dir::S2c]
            .into_iter()
            .enumerate()
            .zip(&mut meters)
        {
            let flow = sp.flow(dir);
            if flow.broken != 0 {
                tracing::warn!(
                    "splice {dir:?}: a retransmitted segment's repeated bytes could not be cut \
                     off; resetting the session rather than sending them twice"
                );
                return;
            }
            let redirected = flow.redirected;
            let acked = sp.acked(dir);
            if flow.fallback == 0 && meter.is_bulk(now, redirected) {
                tracing::debug!(
                    "splice {dir:?}: bulk ({redirected} bytes); to the userspace relay"
                );
                sp.fall_back(dir, acked);
                meter.rate = 0;
            }
            if redirected != seen[2 * i] || acked != seen[2 * i + 1] {
                moved = true;
                if acked != seen[2 * i + 1] {
                    sp.set_acked(dir, acked);
                }
                seen[2 * i] = redirected;
                seen[2 * i + 1] = acked;
            }
        }
        if moved {
            last_move = now;
        }
        mark.set(now.duration_since(last_move) < super::auto::WINDOW);
        if moved {
            activity.touch();
            tick = TICK_MIN;
        } else {
            tick = (tick * 2).min(TICK_MAX);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bulk_is_a_windows_share_of_the_rate() {
        let t0 = Instant::now();
        let ms = |n| t0 + Duration::from_millis(n);
        // 10 MB/s: 1 MB per 100 ms window.
        let mut m = BulkMeter::new(10_000_000, t0);
        assert!(!m.is_bulk(ms(50), 1_000_000));
        assert!(
            !m.is_bulk(ms(100), 1_000_000),
            "exactly the share is not past it"
        );
        // The window restarted at 1 MB.
        assert!(!m.is_bulk(ms(150), 1_900_000));
        assert!(m.is_bulk(ms(160), 2_000_001));
    }

    #[test]
    fn chatty_never_bulk_and_zero_disables() {
        let t0 = Instant::now();
        let mut m = BulkMeter::new(64 << 20, t0);
        for i in 1..1000u64 {
            assert!(!m.is_bulk(t0 + Duration::from_millis(5 * i), 64 * i));
        }
        let mut off = BulkMeter::new(0, t0);
        assert!(!off.is_bulk(t0 + Duration::from_millis(5), u64::MAX));
    }
}
