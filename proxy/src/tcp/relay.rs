//! The userspace relay: both directions run concurrently in the session's task; a FIN on one
//! side is propagated as a half-close to the other, and the session ends when both directions are
//! done (or on an error or timeout).

use std::rc::Rc;
use std::time::Duration;

use std::cell::Cell;

use crate::engine::conn::Duplex;
use crate::engine::idle::{Activity, Timer};

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

pub(super) enum DirEnd {
    Eof,
    Killed,
    ReadErr,
    WriteErr,
    Timeout,
    /// See [`End::Internal`].
    Broken,
}

async fn pump(
    from: &impl Duplex,
    to: &impl Duplex,
    mut buf: Vec<u8>,
    timeout: &Cell<Option<Duration>>,
    activity: &Activity,
    count: &Cell<u64>,
) -> DirEnd {
    let mut timer = Timer::default();
    let recheck = Cell::new(tokio::time::Instant::now());
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
        match res {
            Ok(0) => {
                let _ = to.shutdown_write().await;
                return DirEnd::Eof;
            }
            Ok(n) => {
                activity.touch();
                count.set(count.get() + n as u64);
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

/// Relays until both directions end. `initial` is data already read from the client (e.g. during
/// `tcp-request inspect-delay`) that must reach the server first.
/// `kill` resolves when the session must end at once (server marked DOWN with
/// `on-marked-down shutdown-sessions`): the relay then stops with [`End::Killed`].
pub async fn relay<C: Duplex, S: Duplex>(
    client: Rc<C>,
    server: Rc<S>,
    initial: Vec<u8>,
    t: RelayTimeouts,
    kill: impl std::future::Future<Output = ()>,
) -> RelayStats {
    let activity = Activity::default();
    let c2s = Cell::new(initial.len() as u64);
    let s2c = Cell::new(0u64);
    if !initial.is_empty() {
        let (r, _) = server.write_all(initial).await;
        if r.is_err() {
            return RelayStats {
                c2s: c2s.get(),
                s2c: 0,
                end: End::ServerError,
            };
        }
    }
    let ct = Cell::new(t.tunnel.or(t.client));
    let st = Cell::new(t.tunnel.or(t.server));
    let up = pump(
        &*client,
        &*server,
        Vec::with_capacity(RELAY_BUF),
        &ct,
        &activity,
        &c2s,
    );
    let down = pump(
        &*server,
        &*client,
        Vec::with_capacity(RELAY_BUF),
        &st,
        &activity,
        &s2c,
    );
    // The first direction to fail ends the session; a clean EOF waits for the other direction.
    let mut up = std::pin::pin!(up);
    let mut down = std::pin::pin!(down);
    let mut kill = std::pin::pin!(kill);
    let (first_up, first) = tokio::select! {
            biased;
        e = &mut up => (true, e),
        e = &mut down => (false, e),
        _ = &mut kill => (true, DirEnd::Killed),
    };
    let end = match first {
        DirEnd::Eof => {
            // Half-closed: the side still sending is now under its `-fin` timeout.
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
            match second {
                DirEnd::Eof => End::Normal,
                other => classify(!first_up, other),
            }
        }
        other => classify(first_up, other),
    };
    finish(&client, &server, end);
    RelayStats {
        c2s: c2s.get(),
        s2c: s2c.get(),
        end,
    }
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
        (_, DirEnd::Broken) => End::Internal,
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
