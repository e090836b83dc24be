//! An HTTP/1 connection of its own task, which it leaves while idle between requests: once the
//! process waits lean (see `LEAN_IDLE_FROM`), a plain connection waiting for its next request
//! (io_uring, or epoll with its socket out of tokio's reactor meanwhile) parks its state — the
//! session and its `maxconn` slots — in its socket's readiness slot (`engine::readiness`) and
//! its task ends. The socket's next bytes, its keep-alive deadline or the process' stop start a
//! new task on the same state, which waits in its task as an unparked connection does, and goes
//! on. As HAProxy frees an idle connection's stream, a parked connection holds no task, no timer
//! and no `show sess` entry (HAProxy lists no stream for it either; its next request is a new
//! one, with a new identifier): less than half of what it held in its task.

use std::sync::Arc;

use tokio::time::Instant;

use super::Session;
use super::upstream::Servers;
use super::wait::{Idle, Next};
use crate::ana::vars::SessVars;
use crate::engine::Shared;
use crate::engine::conn::Conn;
use crate::engine::readiness::Parked;
use crate::engine::service::{Origin, SessionGuard};
use crate::model::Proxy;
use crate::model::sessions::{Entry, register};
use crate::stick::StkCtrs;

/// What an HTTP/1 connection is, in its task or parked.
struct Held {
    s: Session<Conn, Servers>,
    /// Its `show sess` registration (None while parked).
    entry: Option<Entry>,
    _guard: SessionGuard,
    /// Parked: since when it waits for its next request (its deadline counts from then).
    since: Option<Instant>,
}

/// Serves an HTTP/1 connection until it closes, in a task of its own that it leaves while
/// parked. `sess` holds the stick counters its `tcp-request connection` rules tracked, `vars`
/// the `sess` variables its `tcp-request session` rules set.
pub fn serve(
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    conn: Conn,
    origin: Origin,
    (sess, vars): (std::rc::Rc<StkCtrs>, SessVars),
    entry: Entry,
    guard: SessionGuard,
) {
    let s = Session::new(shared, fe, conn, Servers::default(), origin, (sess, vars));
    start(Held {
        s,
        entry: Some(entry),
        _guard: guard,
        since: None,
    });
}

/// Runs `held` in a new task, registered (again) for `show sess`, with `shutdown session`
/// watched.
fn start(mut held: Held) {
    let entry = held.entry.get_or_insert_with(|| {
        let s = &held.s;
        let f = &s.facts;
        register(&s.fe, (f.peer, f.local), f.bind as usize, s.client.raw_fd())
    });
    let watcher = entry.watcher();
    // In the task's own cell, not a pooled block: the block saved ≈ 550 instructions per
    // connection (tokio's copies of the future) but a cell and a block per live task left
    // 0.65–0.66 KiB per idle connection against 0.64 (`xtask/scripts/idle-mem.sh`).
    crate::engine::io::spawn(watcher.track(run(held)));
}

/// The connection's transactions, until it closes or parks. Not an `async fn`, whose future
/// would hold `held` twice (the argument and its binding in the body).
#[allow(clippy::manual_async_fn)]
fn run(mut held: Held) -> impl std::future::Future<Output = ()> {
    async move {
        // An epoll engine's socket parked out of tokio's reactor goes back to it first.
        if let Some(c) = std::rc::Rc::get_mut(&mut held.s.client)
            && c.reattach().is_err()
        {
            held.s.end_servers();
            return;
        }
        // Only a plain connection parks (`Conn::parks`); others wait in the task.
        let between = match held.s.client.parks() {
            true => Idle::MayPark,
            false => Idle::InTask,
        };
        let mut idle = match held.since.take() {
            Some(since) => Idle::Resumed(since),
            None => between,
        };
        loop {
            match held.s.transaction(idle).await {
                Next::Again => idle = between,
                Next::End => break,
                Next::Park { since, due } => {
                    // A stream `shutdown session` just killed ends in its task (its socket is
                    // shut down at the task's next poll).
                    let killed = held.entry.as_ref().is_some_and(Entry::killed);
                    if !killed
                        && let Some(ticket) = park_ticket(&mut held.s.client)
                        && ticket.may_park()
                    {
                        held.since = Some(since);
                        held.entry = None;
                        if let Err(p) = ticket.park(due, Box::new(held)) {
                            p.resume();
                        }
                        return;
                    }
                    // Bytes may be waiting already, or the process stops: wait in the task
                    // (an epoll engine's socket back in tokio's reactor).
                    if let Some(c) = std::rc::Rc::get_mut(&mut held.s.client)
                        && c.reattach().is_err()
                    {
                        break;
                    }
                    idle = Idle::Resumed(since);
                }
            }
        }
        held.s.end_servers();
    }
}

/// What parks the session idle on `client`: an io_uring socket's own slot, or an epoll engine's
/// TCP socket detached from tokio's reactor into the worker's epoll instance (only the session
/// holds its connection between requests; were it shared, it would wait in its task).
fn park_ticket(client: &mut std::rc::Rc<Conn>) -> Option<crate::engine::readiness::Ticket> {
    if let Some(t) = client.idle_ticket() {
        return Some(t);
    }
    let c = std::rc::Rc::get_mut(client)?;
    if !c.detach() {
        return None;
    }
    c.idle_ticket()
}

impl Parked for Held {
    fn resume(self: Box<Self>) {
        start(*self);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The size of the future `f` returns, without calling it.
    fn future_size<A, R>(_: fn(A) -> R) -> usize {
        std::mem::size_of::<R>()
    }

    /// A parked connection is its `Held`, boxed: within mimalloc's 256-byte size class (rustc
    /// 1.95: 248; 288, in the 320-byte class, before the server connection a session keeps was
    /// boxed and its timers lost their copy of the deadline). One in its task holds the task's
    /// future: within 520 bytes (512 before parking, and before the wait for `PARK_AFTER`).
    #[test]
    fn a_parked_connection_holds_less_than_its_task() {
        let held = std::mem::size_of::<Held>();
        let task = future_size(run);
        assert!(held <= 256, "a parked connection: {held} bytes");
        assert!(task <= 520, "a connection's task: {task} bytes");
    }
}
