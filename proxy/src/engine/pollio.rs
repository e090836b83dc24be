//! Poll-based I/O (`AsyncRead` + `AsyncWrite`) over a connection's owned-buffer interface, for
//! the `h2` crate's client, on HTTP/2 connections to servers. Writes are gathered into one buffer and sent at a flush or once
//! `WBUF_MAX` is reached; reads go through one buffer handed to the connection and back.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::conn::Conn;

/// Bytes buffered towards the socket before the writer is made to wait.
const WBUF_MAX: usize = 64 * 1024;
const RBUF: usize = 16 * 1024;

type ReadFut = Pin<Box<dyn Future<Output = (io::Result<usize>, Vec<u8>)>>>;
type WriteFut = Pin<Box<dyn Future<Output = (io::Result<()>, Vec<u8>)>>>;
type ShutFut = Pin<Box<dyn Future<Output = io::Result<()>>>>;

/// Sees the bytes handed to the reader, in order (e.g. to know when a peer's first frame has
/// been delivered).
pub trait ReadTap {
    fn delivered(&self, bytes: &[u8]);
}

pub struct PollIo {
    conn: Rc<Conn>,
    rbuf: Vec<u8>,
    rpos: usize,
    reading: Option<ReadFut>,
    wbuf: Vec<u8>,
    spare: Vec<u8>,
    writing: Option<WriteFut>,
    shut: Option<ShutFut>,
    tap: Option<Rc<dyn ReadTap>>,
    /// A write is in flight: nothing may be slipped onto the socket from outside (an h2 frame
    /// the crate cannot send, written between its own) until it ends. Bytes only buffered do
    /// not count: they leave whole, at the next flush, which a failed connection may never do.
    busy: Rc<Cell<bool>>,
}

impl PollIo {
    pub fn new(conn: Rc<Conn>, tap: Option<Rc<dyn ReadTap>>) -> PollIo {
        PollIo {
            conn,
            rbuf: Vec::with_capacity(RBUF),
            rpos: 0,
            reading: None,
            wbuf: Vec::with_capacity(RBUF),
            spare: Vec::new(),
            writing: None,
            shut: None,
            tap,
            busy: Rc::new(Cell::new(false)),
        }
    }

    /// Whether a write is in flight (shared: read after the crate took this I/O).
    pub fn busy(&self) -> Rc<Cell<bool>> {
        Rc::clone(&self.busy)
    }

    fn note_busy(&self) {
        self.busy.set(self.writing.is_some());
    }

    /// Drives the write in flight; Ready once none is.
    fn poll_writing(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if let Some(f) = self.writing.as_mut() {
            let (r, mut b) = std::task::ready!(f.as_mut().poll(cx));
            self.writing = None;
            b.clear();
            self.spare = b;
            r?;
        }
        Poll::Ready(Ok(()))
    }

    fn start_write(&mut self) {
        let next = std::mem::take(&mut self.spare);
        let b = std::mem::replace(&mut self.wbuf, next);
        let c = Rc::clone(&self.conn);
        self.writing = Some(Box::pin(async move { c.write_all(b).await }));
    }
}

impl AsyncRead for PollIo {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        out: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.rpos < this.rbuf.len() {
                let n = out.remaining().min(this.rbuf.len() - this.rpos);
                let given = &this.rbuf[this.rpos..this.rpos + n];
                if let Some(t) = &this.tap {
                    t.delivered(given);
                }
                out.put_slice(given);
                this.rpos += n;
                return Poll::Ready(Ok(()));
            }
            if this.reading.is_none() {
                let mut b = std::mem::take(&mut this.rbuf);
                b.clear();
                if b.capacity() < RBUF {
                    b.reserve(RBUF);
                }
                this.rpos = 0;
                let c = Rc::clone(&this.conn);
                this.reading = Some(Box::pin(async move { c.read(b).await }));
            }
            let Some(f) = this.reading.as_mut() else {
                continue;
            };
            let (r, b) = std::task::ready!(f.as_mut().poll(cx));
            this.reading = None;
            this.rbuf = b;
            this.rpos = 0;
            match r {
                Ok(0) => return Poll::Ready(Ok(())),
                Ok(_) => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

impl AsyncWrite for PollIo {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.writing.is_some() {
            match this.poll_writing(cx) {
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending if this.wbuf.len() >= WBUF_MAX => return Poll::Pending,
                _ => {}
            }
        }
        this.wbuf.extend_from_slice(data);
        if this.writing.is_none() && this.wbuf.len() >= WBUF_MAX {
            this.start_write();
        }
        this.note_busy();
        Poll::Ready(Ok(data.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let r = this.poll_writing(cx);
            this.note_busy();
            std::task::ready!(r)?;
            if this.wbuf.is_empty() {
                return Poll::Ready(Ok(()));
            }
            this.start_write();
            this.note_busy();
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        std::task::ready!(self.as_mut().poll_flush(cx))?;
        let this = self.get_mut();
        let f = this.shut.get_or_insert_with(|| {
            let c = Rc::clone(&this.conn);
            Box::pin(async move { c.shutdown_write().await })
        });
        f.as_mut().poll(cx)
    }
}
