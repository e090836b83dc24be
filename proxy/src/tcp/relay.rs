//! The userspace relay: both directions run concurrently in the session's task; a FIN on one
//! side is propagated as a half-close to the other, and the session ends when both directions are
//! done (or on an error or timeout).

use std::rc::Rc;
use std::time::Duration;

use std::cell::{Cell, OnceCell};

use super::pipe::{self, BulkRule, Pipe};
use crate::engine::conn::Duplex;
use crate::engine::idle::{Activity, Timer};
use crate::engine::io::{SpliceFd, SpliceSock};

pub const RELAY_BUF: usize = 64 * 1024;

/// Which side ended the session and how, for the termination state (`%ts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Both directions closed normally (`--`).
    Normal,
    /// Client side read/write error (`CD`).
    ClientError,
    /// Server side read/write error (`SD`).
    ServerError,
    /// Client side inactivity (`cD`).
    ClientTimeout,
    /// Server side inactivity (`sD`).
    ServerTimeout,
    /// Killed from outside (e.g. server marked DOWN with shutdown-sessions, `DD`).
    Killed,
    /// The kernel splice could not keep the stream intact (`ID`, HAProxy's internal error):
    /// both sides are reset.
    Internal,
}

#[derive(Clone, Copy, Debug)]
pub struct RelayStats {
    /// Bytes from client to server (`bin` on the frontend).
    pub c2s: u64,
    /// Bytes from server to client (`%B`, `bout`).
    pub s2c: u64,
    pub end: End,
}

#[derive(Clone, Copy, Debug, Default)]
pub struct RelayTimeouts {
    pub client: Option<Duration>,
    pub server: Option<Duration>,
    /// `timeout tunnel` replaces both once the relay runs.
    pub tunnel: Option<Duration>,
    /// `timeout client-fin`: the client side once the server has closed its direction.
    pub client_fin: Option<Duration>,
    /// `timeout server-fin`: the server side once the client has closed its direction.
    pub server_fin: Option<Duration>,
}

/// Which directions of a session may move to splice(2) (`global nosplice`, `no option
/// splice-*`; see `tcp::pipe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpliceDirs {
    pub c2s: bool,
    pub s2c: bool,
}

impl SpliceDirs {
    pub const ALL: SpliceDirs = SpliceDirs {
        c2s: true,
        s2c: true,
    };
    pub const NONE: SpliceDirs = SpliceDirs {
        c2s: false,
        s2c: false,
    };
}

pub(super) enum DirEnd {
    Eof,
    Killed,
    ReadErr,
    WriteErr,
    Timeout,
    /// See [`End::Internal`].
    Broken,
    /// Both directions parked and the session was taken over (never returned by a pump).
    Parked,
}

/// How long a direction stays parked waiting for the other one to park too (see [`Park`]).
const PARK_MAX: Duration = Duration::from_millis(5);

/// Lets the session's owner stop both directions of a relay at a point where neither holds a
/// byte: each direction parks between a completed write and its next read, so no read is in
/// flight (an io_uring read cannot be withdrawn without losing what it may still receive). Used
/// to move a chatty session into the kernel splice (`tcp::auto`).
#[derive(Default)]
pub(super) struct Park {
    /// Set by the owner: directions park at their next quiet point.
    pub want: Cell<bool>,
    /// C2s, S2c: parked now.
    pub parked: [Cell<bool>; 2],
    /// Reads that returned bytes and their bytes, both directions together.
    pub reads: Cell<u64>,
    pub bytes: Cell<u64>,
    /// A direction parked.
    pub parked_n: tokio::sync::Notify,
    /// The owner gave up waiting: parked directions resume.
    pub resume: tokio::sync::Notify,
}

impl Park {
    pub fn both_parked(&self) -> bool {
        self.parked[0].get() && self.parked[1].get()
    }
}

/// A session side's socket for splice(2), set up when a direction first needs it (an io_uring
/// stream's duplicate descriptor costs syscalls that chatty sessions never need).
struct SpliceSide<'a> {
    fd: Option<SpliceFd<'a>>,
    sock: OnceCell<Option<SpliceSock<'a>>>,
}

impl<'a> SpliceSide<'a> {
    fn new(fd: Option<SpliceFd<'a>>) -> Self {
        SpliceSide {
            fd,
            sock: OnceCell::new(),
        }
    }

    fn get(&self) -> Option<&SpliceSock<'a>> {
        self.sock
            .get_or_init(|| {
                let fd = self.fd?;
                SpliceSock::new(fd)
                    .map_err(|e| tracing::debug!("relay: no splice ({e}); copying"))
                    .ok()
            })
            .as_ref()
    }
}

/// A direction's (from, to) sockets for splice(2), when both sides have one and it is allowed.
type SplicePair<'s, 'a> = Option<(&'s SpliceSide<'a>, &'s SpliceSide<'a>)>;

/// One direction: the copy path, then splice(2) through a pipe once the direction is bulk (see
/// `tcp::pipe` for the rule). Only an empty pipe is filled and it is drained before the next
/// fill, so at end of stream nothing is left in it and the half-close follows every byte.
#[allow(clippy::too_many_arguments)]
async fn pump(
    from: &impl Duplex,
    to: &impl Duplex,
    splice: SplicePair<'_, '_>,
    mut buf: Vec<u8>,
    timeout: &Cell<Option<Duration>>,
    activity: &Activity,
    count: &Cell<u64>,
    park: Option<(&Park, usize)>,
) -> DirEnd {
    let mut timer = Timer::default();
    let recheck = Cell::new(tokio::time::Instant::now());
    let mut rule = splice.map(|_| BulkRule::default());
    let mut spliced = None;
    loop {
        if let (Some(pipe), Some((src, dst))) = (&spliced, splice)
            && let (Some(src), Some(dst)) = (src.get(), dst.get())
        {
            // The copy buffer is not needed any more.
            drop(std::mem::take(&mut buf));
            return splice_pump(
                pipe, src, dst, to, &mut timer, &recheck, timeout, activity, count,
            )
            .await;
        }
        buf.clear();
        if let Some((p, i)) = park.filter(|(p, _)| p.want.get()) {
            p.parked[i].set(true);
            p.parked_n.notify_one();
            // Dropped here when the owner takes the session over; else back to reading.
            let _ = tokio::time::timeout(PARK_MAX, p.resume.notified()).await;
            p.parked[i].set(false);
        }
        let (res, b) = match timer
            .idle_by(from.read(buf), timeout, activity, &recheck)
            .await
        {
            Some(r) => r,
            None => return DirEnd::Timeout,
        };
        buf = b;
        match res {
            Ok(0) => {
                let _ = to.shutdown_write().await;
                return DirEnd::Eof;
            }
            Ok(n) => {
                activity.touch();
                count.set(count.get() + n as u64);
                if let Some((p, _)) = park {
                    p.reads.set(p.reads.get() + 1);
                    p.bytes.set(p.bytes.get() + n as u64);
                }
                if rule.as_mut().is_some_and(|r| r.on_read(n, RELAY_BUF)) {
                    rule = None;
                    spliced = to_splice(splice);
                }
            }
            Err(_) => return DirEnd::ReadErr,
        }
        let (res, b) = match timer
            .idle_by(to.write_all(buf), timeout, activity, &recheck)
            .await
        {
            Some(r) => r,
            None => return DirEnd::Timeout,
        };
        buf = b;
        if res.is_err() {
            return DirEnd::WriteErr;
        }
        activity.touch();
    }
}

/// The pipe of a direction that has become bulk, once both sockets are ready for splice(2);
/// None (copy on) when either is not or no pipe can be had (e.g. EMFILE).
fn to_splice(splice: SplicePair<'_, '_>) -> Option<Pipe> {
    let (src, dst) = splice?;
    src.get()?;
    dst.get()?;
    match Pipe::new() {
        Ok(p) => {
            pipe::SPLICED_DIRECTIONS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Some(p)
        }
        Err(e) => {
            tracing::debug!("relay: no pipe for splice ({e}); copying");
            None
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn splice_pump(
    pipe: &Pipe,
    src: &SpliceSock<'_>,
    dst: &SpliceSock<'_>,
    to: &impl Duplex,
    timer: &mut Timer,
    recheck: &Cell<tokio::time::Instant>,
    timeout: &Cell<Option<Duration>>,
    activity: &Activity,
    count: &Cell<u64>,
) -> DirEnd {
    let (from_fd, to_fd) = (src.raw_fd(), dst.raw_fd());
    loop {
        let res = match timer
            .idle_by(
                src.io(false, || pipe.fill(from_fd)),
                timeout,
                activity,
                recheck,
            )
            .await
        {
            Some(r) => r,
            None => return DirEnd::Timeout,
        };
        let mut left = match res {
            Ok(0) => {
                let _ = to.shutdown_write().await;
                return DirEnd::Eof;
            }
            Ok(n) => n,
            Err(_) => return DirEnd::ReadErr,
        };
        activity.touch();
        count.set(count.get() + left as u64);
        pipe::count(left);
        while left > 0 {
            let res = match timer
                .idle_by(
                    dst.io(true, || pipe.drain(to_fd, left)),
                    timeout,
                    activity,
                    recheck,
                )
                .await
            {
                Some(r) => r,
                None => return DirEnd::Timeout,
            };
            match res {
                Ok(n) => left = left.saturating_sub(n),
                Err(_) => return DirEnd::WriteErr,
            }
            activity.touch();
        }
    }
}

/// Relays until both directions end. `initial` is data already read from the client (e.g. during
/// `tcp-request inspect-delay`) that must reach the server first.
/// `kill` resolves when the session must end at once (server marked DOWN with
/// `on-marked-down shutdown-sessions`): the relay then stops with [`End::Killed`].
pub async fn relay<C: Duplex, S: Duplex>(
    client: Rc<C>,
    server: Rc<S>,
    initial: Vec<u8>,
    t: RelayTimeouts,
    splice: SpliceDirs,
    kill: impl std::future::Future<Output = ()>,
) -> RelayStats {
    let kill = std::pin::pin!(kill);
    let never = std::future::pending::<()>();
    match relay_parkable(client, server, initial, t, splice, kill, None, never).await {
        Phase::Done(stats) => stats,
        // Without a `Park` nothing parks.
        Phase::Parked { c2s, s2c } => RelayStats {
            c2s,
            s2c,
            end: End::Internal,
        },
    }
}

/// How [`relay_parkable`] ended.
pub(super) enum Phase {
    Done(RelayStats),
    /// Both directions parked and `take` resolved: the sockets hold no relayed byte in userspace;
    /// the bytes relayed so far.
    Parked {
        c2s: u64,
        s2c: u64,
    },
}

/// [`relay`] that can be taken over: when `take` resolves while both directions are parked (see
/// [`Park`]), it returns [`Phase::Parked`] without touching the sockets.
#[allow(clippy::too_many_arguments)]
pub(super) async fn relay_parkable<C: Duplex, S: Duplex, K: std::future::Future<Output = ()>>(
    client: Rc<C>,
    server: Rc<S>,
    initial: Vec<u8>,
    t: RelayTimeouts,
    splice: SpliceDirs,
    mut kill: std::pin::Pin<&mut K>,
    park: Option<&Park>,
    take: impl std::future::Future<Output = ()>,
) -> Phase {
    let activity = Activity::default();
    let c2s = Cell::new(initial.len() as u64);
    let s2c = Cell::new(0u64);
    if !initial.is_empty() {
        let (r, _) = server.write_all(initial).await;
        if r.is_err() {
            return Phase::Done(RelayStats {
                c2s: c2s.get(),
                s2c: 0,
                end: End::ServerError,
            });
        }
    }
    let ct = Cell::new(t.tunnel.or(t.client));
    let st = Cell::new(t.tunnel.or(t.server));
    let (cs, ss) = if splice == SpliceDirs::NONE {
        (SpliceSide::new(None), SpliceSide::new(None))
    } else {
        (
            SpliceSide::new(client.splice_fd()),
            SpliceSide::new(server.splice_fd()),
        )
    };
    let can = cs.fd.is_some() && ss.fd.is_some();
    let end = {
        let up = pump(
            &*client,
            &*server,
            (can && splice.c2s).then_some((&cs, &ss)),
            Vec::with_capacity(RELAY_BUF),
            &ct,
            &activity,
            &c2s,
            park.map(|p| (p, 0)),
        );
        let down = pump(
            &*server,
            &*client,
            (can && splice.s2c).then_some((&ss, &cs)),
            Vec::with_capacity(RELAY_BUF),
            &st,
            &activity,
            &s2c,
            park.map(|p| (p, 1)),
        );
        // The first direction to fail ends the session; a clean EOF waits for the other direction.
        let mut up = std::pin::pin!(up);
        let mut down = std::pin::pin!(down);
        let mut take = std::pin::pin!(take);
        let (first_up, first) = tokio::select! {
                biased;
            e = &mut up => (true, e),
            e = &mut down => (false, e),
            _ = &mut kill => (true, DirEnd::Killed),
            _ = &mut take => (true, DirEnd::Parked),
        };
        match first {
            DirEnd::Parked => None,
            DirEnd::Eof => {
                // Half-closed: no taking over any more, and no direction may stay parked.
                if let Some(p) = park {
                    p.want.set(false);
                    p.resume.notify_waiters();
                }
                // The side still sending is now under its `-fin` timeout.
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
                biased;
                    e = rest => e,
                    _ = &mut kill => DirEnd::Killed,
                };
                Some(match second {
                    DirEnd::Eof => End::Normal,
                    other => classify(!first_up, other),
                })
            }
            other => Some(classify(first_up, other)),
        }
    };
    // The duplicate descriptors (io_uring) go before a reset, so it is sent at once, and before
    // the sockets move into the kernel splice.
    drop((cs, ss));
    let Some(end) = end else {
        return Phase::Parked {
            c2s: c2s.get(),
            s2c: s2c.get(),
        };
    };
    finish(&client, &server, end);
    Phase::Done(RelayStats {
        c2s: c2s.get(),
        s2c: s2c.get(),
        end,
    })
}

/// Aborts both sides of a session that did not end normally; the server gets a RST when the
/// client side failed or the session was killed (as HAProxy does).
pub(super) fn finish(client: &impl Duplex, server: &impl Duplex, end: End) {
    if end != End::Normal {
        client.abort(end == End::Internal);
        server.abort(matches!(
            end,
            End::ClientError | End::ClientTimeout | End::Killed | End::Internal
        ));
    }
}

/// Maps a direction's failure onto the side to blame. `upstream` is the client→server direction.
pub(super) fn classify(upstream: bool, e: DirEnd) -> End {
    match (upstream, e) {
        (_, DirEnd::Eof) => End::Normal,
        (_, DirEnd::Killed) => End::Killed,
        (_, DirEnd::Broken | DirEnd::Parked) => End::Internal,
        (true, DirEnd::ReadErr) | (false, DirEnd::WriteErr) => End::ClientError,
        (true, DirEnd::WriteErr) | (false, DirEnd::ReadErr) => End::ServerError,
        (true, DirEnd::Timeout) => End::ClientTimeout,
        (false, DirEnd::Timeout) => End::ServerTimeout,
    }
}

impl End {
    /// The two termination-state characters for `%ts` (cause, state).
    pub fn codes(self) -> [u8; 2] {
        match self {
            End::Normal => *b"--",
            End::ClientError => *b"CD",
            End::ServerError => *b"SD",
            End::ClientTimeout => *b"cD",
            End::ServerTimeout => *b"sD",
            End::Killed => *b"DD",
            End::Internal => *b"ID",
        }
    }
}
