//! An HTTP/2 connection to a server (`proto h2`, or ALPN `h2` on an `ssl` server): the `h2`
//! crate's client, driven by a task of the worker, whose streams carry one transaction each
//! ([`super::h2stream::H2Stream`]). The worker pools it (`engine::pool`), shared by concurrent
//! streams up to the server's SETTINGS_MAX_CONCURRENT_STREAMS unless `http-reuse never` keeps
//! it to its session, as HAProxy 2.6's backend does.

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use bytes::Bytes;
use h2::client::SendRequest;

use super::h2io::Preface;
use crate::engine::conn::Conn;
use crate::engine::pollio::PollIo;

/// HAProxy's `tune.h2.initial-window-size` default.
const WINDOW: u32 = 65535;
/// HAProxy's `tune.h2.max-concurrent-streams` default (what it lets the server push: none).
const MAX_RECV_STREAMS: u32 = 100;
/// Largest response header list accepted (HAProxy is bounded by `tune.bufsize`).
const MAX_HEADER_LIST: u32 = 64 * 1024;

pub struct Link {
    send: RefCell<SendRequest<Bytes>>,
    driver: tokio::task::JoinHandle<()>,
    /// The connection ended (its driver returned), or a request could not open a stream on it
    /// (GOAWAY received, connection error).
    closed: Rc<Cell<bool>>,
    preface: Rc<Preface>,
    /// Streams attached now.
    active: Cell<usize>,
    /// Streams it carried so far (`max-reuse`).
    used: Cell<u64>,
    /// In the worker's pool for concurrent use (`http-reuse always`), not owned by a stream.
    pub shared: Cell<bool>,
    /// Its key in the worker's pool, when `http-reuse` lets it be pooled at all.
    pub home: RefCell<Option<crate::engine::pool::Key>>,
    /// The connection, for a frame the crate cannot send (see [`Link::refuse_next`]).
    conn: Rc<Conn>,
    io_busy: Rc<Cell<bool>>,
}

impl Drop for Link {
    fn drop(&mut self) {
        self.driver.abort();
    }
}

impl Link {
    /// The client preface and SETTINGS on `conn`; the connection is then driven by a task of
    /// this worker until it closes or the last handle to the link goes.
    pub async fn handshake(conn: Conn) -> io::Result<Rc<Link>> {
        let preface = Rc::new(Preface::default());
        let conn = Rc::new(conn);
        let tap: Rc<dyn crate::engine::pollio::ReadTap> = Rc::clone(&preface) as _;
        let io = PollIo::new(Rc::clone(&conn), Some(tap));
        let io_busy = io.busy();
        let mut b = h2::client::Builder::new();
        b.initial_window_size(WINDOW)
            .max_concurrent_streams(MAX_RECV_STREAMS)
            .max_header_list_size(MAX_HEADER_LIST)
            .enable_push(false);
        let (send, connection) = b
            .handshake::<_, Bytes>(io)
            .await
            .map_err(io::Error::other)?;
        let closed = Rc::new(Cell::new(false));
        let driver = {
            let (closed, preface) = (Rc::clone(&closed), Rc::clone(&preface));
            crate::engine::io::spawn(async move {
                if let Err(e) = connection.await {
                    tracing::debug!("h2 server connection: {e}");
                }
                closed.set(true);
                preface.give_up();
            })
        };
        Ok(Rc::new(Link {
            send: RefCell::new(send),
            driver,
            closed,
            preface,
            active: Cell::new(0),
            used: Cell::new(0),
            shared: Cell::new(false),
            home: RefCell::new(None),
            conn,
            io_busy,
        }))
    }

    /// Whether a new stream may open on it: the connection is up and the server has not sent
    /// GOAWAY (the crate then refuses new streams).
    pub fn usable(&self) -> bool {
        if self.closed.get() {
            return false;
        }
        let mut cx = Context::from_waker(Waker::noop());
        let ok = matches!(
            self.send.borrow_mut().poll_ready(&mut cx),
            Poll::Ready(Ok(()))
        );
        if !ok {
            self.closed.set(true);
        }
        ok
    }

    /// Room for one more stream now: under the server's stream limit and `max-reuse`.
    pub fn has_room(&self, max_reuse: Option<u64>) -> bool {
        let limit = self.send.borrow().current_max_send_streams();
        self.active.get() < limit && max_reuse.is_none_or(|m| self.used.get() <= m)
    }

    /// No stream attached now.
    pub fn idle(&self) -> bool {
        self.active.get() == 0
    }

    pub fn sender(&self) -> SendRequest<Bytes> {
        self.send.borrow().clone()
    }

    /// A request failed to open a stream here: no other will try.
    pub fn fail(&self) {
        self.closed.set(true);
    }

    /// Waits until the server's SETTINGS have been processed (or the connection ended).
    pub async fn settings(&self) {
        loop {
            let n = self.preface.notify.notified();
            if self.preface.done.get() {
                // The frame was handed to the crate in the driver's current poll, which
                // processes it before it returns: one turn of the scheduler later it is applied.
                tokio::task::yield_now().await;
                return;
            }
            n.await;
        }
    }

    /// The server allows RFC 8441's extended CONNECT.
    pub fn extended_connect(&self) -> bool {
        self.send.borrow().is_extended_connect_protocol_enabled()
    }

    /// A request the server cannot take (an upgrade without RFC 8441): as HAProxy's H2 mux,
    /// the stream it would have opened is reset (RST_STREAM, INTERNAL_ERROR) without HEADERS.
    /// The crate has no such frame, so it is written here, between the crate's writes; the
    /// connection then opens no more streams (the server saw that stream id used). Returns once
    /// the frame is written: the 502 the client gets must not overtake it (HAProxy's mux sends
    /// the reset before the stream answers; protocol_upgrade.vtc ends right at the 502).
    pub async fn refuse_next(&self) {
        self.fail();
        let id = u32::try_from(self.used.get() * 2 + 1).unwrap_or(u32::MAX >> 1);
        let mut frame = vec![0, 0, 4, 3, 0];
        frame.extend_from_slice(&id.to_be_bytes());
        frame.extend_from_slice(&2u32.to_be_bytes());
        // A write of the crate's in flight ends first (within 100 ms, else the reset goes anyway:
        // it is what the server waits for). What the crate only buffered does not hold it back:
        // the failed link's driver may never flush it.
        for _ in 0..100 {
            if !self.io_busy.get() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
        }
        let _ = self.conn.write_all(frame).await;
    }

    pub fn attach(&self) {
        self.active.set(self.active.get() + 1);
        self.used.set(self.used.get() + 1);
    }

    pub fn detach(&self) {
        self.active.set(self.active.get().saturating_sub(1));
    }
}
