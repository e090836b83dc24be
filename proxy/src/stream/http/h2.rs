//! HTTP/2 on the frontend (ALPN `h2`, or `proto h2`): the connection's I/O shell around the
//! sans-I/O core (`http::h2::server`). One task reads the client's bytes into the core and
//! writes what the core queued; each stream runs one transaction of the same L7 session code
//! as an HTTP/1 client's, its client side an [`H2Front`] (`h2front.rs`) that reads and writes
//! through the core, so rules, routing, server pools, shutdown-sessions and logs are shared.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;
use tokio::sync::Notify;

use super::h2front::H2Front;
use crate::ana::vars::SessVars;
use crate::engine::Shared;
use crate::engine::conn::Conn;
use crate::engine::io::spawn;
use crate::engine::service::Origin;
use crate::http::h2::server::{IdMap, Limits, Server};
use crate::model::Proxy;
use crate::stick::StkCtrs;
use crate::tls::stream::TlsInfo;

/// HAProxy's `tune.h2.max-concurrent-streams` default.
const MAX_CONCURRENT_STREAMS: u32 = 100;
/// Largest header list accepted (HAProxy's is bounded by `tune.bufsize`, 16 KiB, per block; a
/// little more room here, still far from a CONTINUATION flood's).
const MAX_HEADER_LIST: u32 = 64 * 1024;
/// Output queued past this makes the streams wait for the socket.
pub(super) const OUT_HIGH: usize = 256 * 1024;
/// Output queued past this stops reading the client (it does not read what it asks for:
/// PING or SETTINGS floods).
const OUT_STOP_READ: usize = 1024 * 1024;
const READ_BUF: usize = 16 * 1024;

/// What the connection task and its streams share.
pub(super) struct H2Io {
    pub(super) core: RefCell<Server>,
    /// Woken when output was queued.
    pub(super) flush: Notify,
    /// Woken when queued output went to the socket.
    pub(super) drained: Notify,
    /// Each stream's signal: its state changed (data, end, reset, window).
    wakers: RefCell<IdMap<Rc<Notify>>>,
}

impl H2Io {
    /// Forgets a stream the transaction is done with.
    pub(super) fn release(&self, id: u32) {
        self.core.borrow_mut().release(id);
        self.wakers.borrow_mut().remove(&id);
        self.flush.notify_one();
    }

    /// Wakes the streams whose state changed.
    fn wake_changed(&self) {
        let mut ids = Vec::new();
        self.core.borrow_mut().take_changed(&mut ids);
        let w = self.wakers.borrow();
        for id in ids {
            if let Some(n) = w.get(&id) {
                n.notify_waiters();
            }
        }
    }
}

type ReadFut = Pin<Box<dyn Future<Output = (io::Result<usize>, Vec<u8>)>>>;
type WriteFut = Pin<Box<dyn Future<Output = (io::Result<()>, Vec<u8>)>>>;

fn read(conn: &Rc<Conn>, buf: Vec<u8>) -> ReadFut {
    let c = Rc::clone(conn);
    Box::pin(async move { c.read(buf).await })
}

fn write(conn: &Rc<Conn>, buf: Vec<u8>) -> WriteFut {
    let c = Rc::clone(conn);
    Box::pin(async move { c.write_all(buf).await })
}

/// Serves an HTTP/2 connection until it closes, the client goes idle, or the process stops
/// (GOAWAY, then the streams in flight finish): one L7 transaction per stream. `sess` holds
/// the counters the connection's `tcp-request connection` rules tracked and `vars` its `sess.*`
/// variables: every stream shares them, as HAProxy's streams share their session.
pub async fn serve_tracked(
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    conn: Conn,
    origin: Origin,
    (sess, vars): (Rc<StkCtrs>, SessVars),
) {
    let conn = Rc::new(conn);
    let (client, idle) = {
        let t = fe.cfg.timeouts;
        (t.client, t.http_keep_alive.or(t.client))
    };
    let io = Rc::new(H2Io {
        core: RefCell::new(Server::new(Limits {
            max_concurrent_streams: MAX_CONCURRENT_STREAMS,
            max_header_list: MAX_HEADER_LIST,
            // RFC 8441's extended CONNECT (WebSocket over h2), which HAProxy 2.6 advertises.
            connect_protocol: true,
        })),
        flush: Notify::new(),
        drained: Notify::new(),
        wakers: RefCell::new(IdMap::default()),
    });
    let streams = H2Conn {
        tls: conn.tls().cloned(),
        shared,
        fe,
        origin,
        sess,
        vars,
        io: Rc::clone(&io),
        active: Rc::new(Cell::new(0)),
        ended: Rc::new(Notify::new()),
        count: Cell::new(0),
    };
    let (failed, reading) = drive(&conn, &streams, client, idle).await;
    // Streams still running see their connection gone.
    io.core.borrow_mut().close();
    io.wake_changed();
    if failed {
        linger(&conn, reading).await;
    } else {
        drop(reading);
    }
    // A read still in flight would keep the socket open (io_uring): the shutdown ends it.
    conn.abort(false);
}

/// The connection's loop; true when it ended on a protocol error (a GOAWAY was sent), with
/// the read in flight.
async fn drive(
    conn: &Rc<Conn>,
    streams: &H2Conn,
    client: Option<Duration>,
    idle: Option<Duration>,
) -> (bool, ReadFut) {
    let io = &streams.io;
    let mut input = BytesMut::with_capacity(READ_BUF);
    let mut reading: ReadFut = read(conn, Vec::with_capacity(READ_BUF));
    let mut writing: Option<WriteFut> = None;
    let mut spare = Vec::new();
    let mut stop = streams.shared.stop_tx.subscribe();
    let mut stopping = *stop.borrow_and_update();
    if stopping {
        io.core.borrow_mut().go_away();
    }
    let handshake = client.map(|d| tokio::time::Instant::now() + d);
    loop {
        if writing.is_none() && io.core.borrow().output_len() > 0 {
            let out = io.core.borrow_mut().take_output(std::mem::take(&mut spare));
            writing = Some(write(conn, out));
        }
        let (closing, failed) = {
            let c = io.core.borrow();
            (c.closing(), c.failed().is_some())
        };
        if (failed || (closing && streams.active.get() == 0)) && writing.is_none() {
            return (failed, reading);
        }
        let ready = io.core.borrow().ready();
        let idle_timer = async {
            match (handshake, idle) {
                (Some(t), _) if !ready => tokio::time::sleep_until(t).await,
                (_, Some(d)) if ready && streams.active.get() == 0 && !closing => {
                    tokio::time::sleep(d).await
                }
                _ => std::future::pending::<()>().await,
            }
        };
        let read_now = io.core.borrow().output_len() < OUT_STOP_READ;
        tokio::select! {
            (r, mut buf) = &mut reading, if read_now && !failed => {
                match r {
                    Ok(n) if n > 0 => {
                        input.extend_from_slice(&buf[..n]);
                        buf.clear();
                        reading = read(conn, buf);
                        let r = io.core.borrow_mut().recv(&mut input);
                        if let Err(e) = r {
                            tracing::debug!("{}: h2 connection error: {}", streams.fe.name, e.why);
                        }
                        streams.dispatch();
                    }
                    // The client is gone: nothing more can be sent either.
                    _ => return (false, read(conn, buf)),
                }
            }
            (r, buf) = async { writing.as_mut().expect("checked").await }, if writing.is_some() => {
                writing = None;
                spare = buf;
                spare.clear();
                io.drained.notify_waiters();
                if r.is_err() {
                    return (false, reading);
                }
            }
            _ = io.flush.notified() => {}
            _ = streams.ended.notified() => {}
            r = stop.changed(), if !stopping => {
                if r.is_ok() && *stop.borrow_and_update() {
                    stopping = true;
                    io.core.borrow_mut().go_away();
                }
            }
            _ = idle_timer => {
                if !ready {
                    return (false, reading);
                }
                io.core.borrow_mut().go_away();
            }
        }
    }
}

/// What every stream of one HTTP/2 connection shares, and how many are running.
struct H2Conn {
    shared: Arc<Shared>,
    fe: Arc<Proxy>,
    origin: Origin,
    tls: Option<Arc<TlsInfo>>,
    sess: Rc<StkCtrs>,
    vars: SessVars,
    io: Rc<H2Io>,
    active: Rc<Cell<usize>>,
    /// Signalled when the last running stream ends (the idle timer then starts).
    ended: Rc<Notify>,
    count: Cell<u64>,
}

impl H2Conn {
    /// Starts the new streams and wakes those whose state changed.
    fn dispatch(&self) {
        loop {
            let next = self.io.core.borrow_mut().accept();
            let Some(id) = next else { break };
            let req = self.io.core.borrow_mut().take_request(id);
            if let Some(req) = req {
                self.count.set(self.count.get() + 1);
                self.spawn(id, req, self.count.get() == 1);
            }
        }
        self.io.wake_changed();
    }

    /// Runs a new stream (`first`: the connection's first) in a task of its own.
    fn spawn(&self, id: u32, req: crate::http::h2::request::RequestFields, first: bool) {
        self.active.set(self.active.get() + 1);
        let (active, ended) = (Rc::clone(&self.active), Rc::clone(&self.ended));
        let notify = Rc::new(Notify::new());
        self.io.wakers.borrow_mut().insert(id, Rc::clone(&notify));
        let front = H2Front::new(
            Rc::clone(&self.io),
            id,
            notify,
            req,
            (self.tls.clone(), self.fe.cfg.timeouts.client),
            first,
        );
        // Boxed: the task then holds a pointer, not the whole session's future, which the
        // runtime would otherwise copy around (about 8 KiB) per stream. In a pooled block, made
        // there: `Box::pin` copied it once all the same.
        let (shared, fe, origin) = (
            Arc::clone(&self.shared),
            Arc::clone(&self.fe),
            self.origin.clone(),
        );
        let (sess, vars) = (Rc::clone(&self.sess), Rc::clone(&self.vars));
        let fut = crate::engine::boxpool::Pooled::new_with(move || {
            super::run_stream(shared, fe, front, origin, sess, vars)
        });
        // The clock read once per poll, as an HTTP/1 connection's task does.
        spawn(crate::clock::Scoped::new(async move {
            fut.await;
            let left = active.get().saturating_sub(1);
            active.set(left);
            // Only the connection loop waits for this, and only once none is left.
            if left == 0 {
                ended.notify_one();
            }
        }));
    }
}

/// After a connection error (GOAWAY sent): what the client still sends is read and dropped
/// for a moment before the close, since closing on unread bytes sends a RST, which can destroy
/// the GOAWAY before the client reads it (e.g. in the middle of a rapid-reset burst).
async fn linger(conn: &Conn, reading: ReadFut) {
    const LINGER: Duration = Duration::from_millis(500);
    const LINGER_MAX: usize = 1 << 20;
    let drain = async {
        let (r, mut buf) = reading.await;
        let mut total = match r {
            Ok(n) if n > 0 => n,
            _ => return,
        };
        while total < LINGER_MAX {
            buf.clear();
            let (r, b) = conn.read(buf).await;
            buf = b;
            match r {
                Ok(0) | Err(_) => break,
                Ok(n) => total += n,
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
}
