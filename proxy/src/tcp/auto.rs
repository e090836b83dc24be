//! `portcullis-relay auto`, the default when the kernel path is loaded: which engine suits a
//! `mode tcp` session is learnt from its traffic. A session starts on the userspace relay (which
//! also splices bulk through pipes); it moves into the kernel splice once it is *chatty* — many
//! small messages, where the splice saves a wakeup of userspace per message — and no other
//! session of its worker is busy. The splice runs each message's forwarding in the sender's CPU
//! context and one kernel worker per receiving socket: it wins for one chatty session (no
//! cross-CPU wakeup) and loses as soon as several busy sessions share it, where the userspace
//! relay's batching spreads the work onto the worker's own core (`cargo xtask bench`, ping-pong
//! with 1 and 8 connections). The move happens between messages, when neither direction holds a
//! byte in userspace (`relay::Park`); a session whose one direction never pauses between a write
//! and its next read (e.g. a silent side with a read in flight) is not moved after a few tries.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use crate::engine::io::Stream;

use super::relay::{Park, Phase, RelayStats, RelayTimeouts, SpliceDirs, relay, relay_parkable};

/// The window over which a session's traffic is judged.
pub const WINDOW: Duration = Duration::from_millis(100);
/// Reads (both directions) in a window that make a session busy; chatty if their average size
/// is at most [`MAX_AVG_READ`].
pub const MIN_READS: u64 = 50;
pub const MAX_AVG_READ: u64 = 4096;
/// Bytes in a window that make a session busy whatever its reads.
pub const BUSY_BYTES: u64 = 1 << 20;
/// Busy sessions of a worker (the candidate included) up to which a chatty one moves into the
/// kernel.
pub const MAX_BUSY: usize = 1;
/// Tries to park both directions before the session stays in userspace; each failed try doubles
/// the windows waited before the next.
const TRIES: u32 = 4;
/// How long a try waits for both directions to park.
const PARK_WAIT: Duration = Duration::from_millis(5);

/// A session's traffic during one window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Window {
    pub reads: u64,
    pub bytes: u64,
}

impl Window {
    pub fn busy(self) -> bool {
        self.reads >= MIN_READS || self.bytes >= BUSY_BYTES
    }
    pub fn chatty(self) -> bool {
        self.reads >= MIN_READS && self.bytes <= self.reads.saturating_mul(MAX_AVG_READ)
    }
}

/// Whether a session whose last two windows' traffic was `prev` and `w` moves into the kernel
/// while `busy_others` other sessions of its worker are busy. Two windows: sessions that start
/// together have all marked themselves busy by the second, so none of them moves while the
/// others have not been counted yet.
pub fn promote(prev: Window, w: Window, busy_others: usize) -> bool {
    prev.chatty() && w.chatty() && busy_others < MAX_BUSY
}

thread_local! {
    /// Busy `mode tcp` sessions of this worker (userspace or spliced).
    static BUSY: Cell<usize> = const { Cell::new(0) };
}

/// A session's entry in its worker's busy count; leaves it when dropped.
#[derive(Default)]
pub struct BusyMark(bool);

impl BusyMark {
    pub fn set(&mut self, busy: bool) {
        if busy != self.0 {
            self.0 = busy;
            BUSY.with(|b| {
                b.set(if busy {
                    b.get() + 1
                } else {
                    b.get().saturating_sub(1)
                })
            });
        }
    }
    /// Busy sessions of this worker other than this one.
    pub fn others(&self) -> usize {
        BUSY.with(Cell::get).saturating_sub(usize::from(self.0))
    }
}

impl Drop for BusyMark {
    fn drop(&mut self) {
        self.set(false);
    }
}

/// Resolves once the session should move and both directions are parked; keeps the session's
/// busy mark up to date meanwhile.
async fn chatty_and_alone(park: &Park, mark: &RefCell<BusyMark>) {
    let (mut last, mut prev) = (Window::default(), Window::default());
    let (mut tries, mut skip) = (0u32, 0u32);
    loop {
        tokio::time::sleep(WINDOW).await;
        let now = Window {
            reads: park.reads.get(),
            bytes: park.bytes.get(),
        };
        let w = Window {
            reads: now.reads - last.reads,
            bytes: now.bytes - last.bytes,
        };
        last = now;
        let others = {
            let mut m = mark.borrow_mut();
            m.set(w.busy());
            m.others()
        };
        let before = std::mem::replace(&mut prev, w);
        if skip > 0 {
            skip -= 1;
            continue;
        }
        if tries >= TRIES || !promote(before, w, others) {
            continue;
        }
        park.want.set(true);
        let both = async {
            while !park.both_parked() {
                park.parked_n.notified().await;
            }
        };
        if tokio::time::timeout(PARK_WAIT, both).await.is_ok() {
            return;
        }
        park.want.set(false);
        park.resume.notify_waiters();
        tries += 1;
        skip = 1 << tries;
    }
}

/// Relays a session of two plain sockets under `portcullis-relay auto`.
pub async fn run<K: std::future::Future<Output = ()>>(
    client: Rc<Stream>,
    server: Rc<Stream>,
    t: RelayTimeouts,
    splice: SpliceDirs,
    max_unacked: u64,
    bulk_rate: u64,
    kill: K,
) -> RelayStats {
    let mut kill = std::pin::pin!(kill);
    let park = Park::default();
    let mark = RefCell::new(BusyMark::default());
    let phase = relay_parkable(
        client.clone(),
        server.clone(),
        Vec::new(),
        t,
        splice,
        kill.as_mut(),
        Some(&park),
        chatty_and_alone(&park, &mark),
    )
    .await;
    let (c2s, s2c) = match phase {
        Phase::Done(stats) => return stats,
        Phase::Parked { c2s, s2c } => (c2s, s2c),
    };
    if let Some(l) = crate::kernel::loaded() {
        l.promotions
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    tracing::debug!("tcp session: chatty, moving into the kernel splice");
    let mut mark = mark.into_inner();
    let spliced = super::splice::relay(
        client.clone(),
        server.clone(),
        t,
        max_unacked,
        bulk_rate,
        kill.as_mut(),
        Some(&mut mark),
    )
    .await;
    let rest = match spliced {
        Ok(stats) => stats,
        // See `session`: after a failed attach only recv sees what a verdict may have queued.
        Err(kill) => relay(client, server, Vec::new(), t, SpliceDirs::NONE, kill).await,
    };
    RelayStats {
        c2s: c2s + rest.c2s,
        s2c: s2c + rest.s2c,
        end: rest.end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chatty_is_many_small_reads() {
        let ping = Window {
            reads: 200,
            bytes: 200 * 64,
        };
        assert!(ping.busy() && ping.chatty());
        // Exactly the average limit is still chatty; one byte more is not.
        let edge = Window {
            reads: MIN_READS,
            bytes: MIN_READS * MAX_AVG_READ,
        };
        assert!(edge.chatty());
        assert!(
            !Window {
                bytes: edge.bytes + 1,
                ..edge
            }
            .chatty()
        );
        // Too few reads: neither busy nor chatty.
        let quiet = Window {
            reads: MIN_READS - 1,
            bytes: 100,
        };
        assert!(!quiet.busy() && !quiet.chatty());
        // Bulk: busy by its bytes, never chatty.
        let bulk = Window {
            reads: 20,
            bytes: 20 << 16,
        };
        assert!(bulk.busy() && !bulk.chatty());
    }

    #[test]
    fn only_a_lone_chatty_session_moves() {
        let ping = Window {
            reads: 500,
            bytes: 500 * 64,
        };
        assert!(promote(ping, ping, 0));
        assert!(!promote(ping, ping, 1));
        assert!(!promote(ping, ping, 7));
        // One chatty window is not enough, nor a quiet one after it.
        assert!(!promote(Window::default(), ping, 0));
        assert!(!promote(ping, Window::default(), 0));
    }

    #[test]
    fn busy_marks_count_per_worker_and_leave_on_drop() {
        let mut a = BusyMark::default();
        let mut b = BusyMark::default();
        assert_eq!(a.others(), 0);
        a.set(true);
        a.set(true);
        assert_eq!(a.others(), 0);
        assert_eq!(b.others(), 1);
        b.set(true);
        assert_eq!(a.others(), 1);
        drop(b);
        assert_eq!(a.others(), 0);
        a.set(false);
        let c = BusyMark::default();
        assert_eq!(c.others(), 0);
    }
}
