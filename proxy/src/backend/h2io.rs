//! Poll-based I/O over a server connection's owned-buffer interface, for the `h2` crate's
//! client. It also tells when the server's first frame (its SETTINGS) has been handed to the
//! crate, which RFC 8441's extended CONNECT has to wait for.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::engine::conn::Conn;

/// Bytes buffered towards the socket before the writer is made to wait.
const WBUF_MAX: usize = 64 * 1024;
const RBUF: usize = 16 * 1024;

type ReadFut = Pin<Box<dyn Future<Output = (io::Result<usize>, Vec<u8>)>>>;
type WriteFut = Pin<Box<dyn Future<Output = (io::Result<()>, Vec<u8>)>>>;
type ShutFut = Pin<Box<dyn Future<Output = io::Result<()>>>>;

/// How far the server's first frame has come.
#[derive(Default)]
pub struct Preface {
    /// The first frame's length field (its first 3 bytes), as they came.
    head: Cell<[u8; 3]>,
    /// Bytes handed to the crate so far (counted up to the first frame's end).
    seen: Cell<usize>,
    /// The whole first frame has been handed over.
    pub done: Cell<bool>,
    pub notify: tokio::sync::Notify,
}

impl Preface {
    fn delivered(&self, bytes: &[u8]) {
        if self.done.get() {
            return;
        }
        let before = self.seen.get();
        let mut head = self.head.get();
        for (i, b) in bytes.iter().enumerate().take(3usize.saturating_sub(before)) {
            head[before + i] = *b;
        }
        self.head.set(head);
        let seen = before + bytes.len();
        self.seen.set(seen);
        // A frame is its 9-byte header and the payload length the first 3 bytes give.
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        if seen >= 3 && seen >= 9 + len {
            self.done.set(true);
            self.notify.notify_waiters();
        }
    }

    /// The connection ended before the first frame: nobody waits any longer.
    pub fn give_up(&self) {
        self.done.set(true);
        self.notify.notify_waiters();
    }
}

pub struct H2Io {
    conn: Rc<Conn>,
    rbuf: Vec<u8>,
    rpos: usize,
    reading: Option<ReadFut>,
    wbuf: Vec<u8>,
    spare: Vec<u8>,
    writing: Option<WriteFut>,
    shut: Option<ShutFut>,
    preface: Rc<Preface>,
    /// Bytes are buffered or being written: no frame may be slipped in from outside.
    pub busy: Rc<Cell<bool>>,
}

impl H2Io {
    pub fn new(conn: Rc<Conn>, preface: Rc<Preface>) -> H2Io {
        H2Io {
            conn,
            rbuf: Vec::with_capacity(RBUF),
            rpos: 0,
            reading: None,
            wbuf: Vec::with_capacity(RBUF),
            spare: Vec::new(),
            writing: None,
            shut: None,
            preface,
            busy: Rc::new(Cell::new(false)),
        }
    }

    fn note_busy(&self) {
        self.busy
            .set(self.writing.is_some() || !self.wbuf.is_empty());
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

impl AsyncRead for H2Io {
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
                this.preface.delivered(given);
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

impl AsyncWrite for H2Io {
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
