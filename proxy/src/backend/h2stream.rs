//! One transaction's stream on an HTTP/2 server connection, behind the same byte interface as
//! an HTTP/1 connection ([`Duplex`]): what the transaction writes (HTTP/1 request head, then its
//! body as framed by Content-Length or chunked) becomes HEADERS, DATA and trailers; what it
//! reads is the server's response as HTTP/1.1 bytes (`h2conv`). After a 101 (an upgrade sent as
//! extended CONNECT) both directions are raw DATA.

use std::cell::{Cell, RefCell};
use std::io;
use std::rc::Rc;

use bytes::Bytes;
use h2::client::ResponseFuture;
use h2::{RecvStream, SendStream};

use super::h2::Link;
use super::h2conv::{self, Asked, Relay};
use crate::engine::conn::Duplex;
use crate::http::h1::{self, BodyFraming, Limits};
use crate::http::h1::{BodyDecoder, Payload};

/// The request side: where the bytes written so far have got to.
#[derive(Default)]
enum Tx {
    /// Collecting the request head.
    Head(Vec<u8>),
    /// This many body bytes left (Content-Length).
    Len(u64),
    /// The transaction validated the framing; this decoder finds the payload and trailers.
    Chunked(Box<BodyDecoder>),
    /// An upgraded stream: bytes go as DATA.
    Tunnel,
    /// Everything sent (or the stream is gone).
    #[default]
    Done,
}

/// The response side.
#[derive(Default)]
struct Rx {
    pending: Option<ResponseFuture>,
    asked: Asked,
    body: Option<RecvStream>,
    relay: Option<Relay>,
    ended: bool,
    /// The body ended with trailers.
    trailers: bool,
}

pub struct H2Stream {
    link: Rc<Link>,
    tx: RefCell<Tx>,
    send: RefCell<Option<SendStream<Bytes>>>,
    rx: RefCell<Rx>,
    attached: Cell<bool>,
}

impl Drop for H2Stream {
    fn drop(&mut self) {
        self.finish();
    }
}

fn other(e: impl std::fmt::Display) -> io::Error {
    io::Error::other(e.to_string())
}

impl H2Stream {
    pub fn new(link: Rc<Link>) -> H2Stream {
        H2Stream {
            link,
            tx: RefCell::new(Tx::Head(Vec::new())),
            send: RefCell::new(None),
            rx: RefCell::new(Rx::default()),
            attached: Cell::new(false),
        }
    }

    pub fn link(&self) -> &Rc<Link> {
        &self.link
    }

    /// The stream no longer counts on its connection.
    fn finish(&self) {
        if self.attached.replace(false) {
            self.link.detach();
        }
    }

    /// Opens the stream with the request head at the start of `buf`; returns where the body
    /// starts and how it is framed.
    async fn open(&self, buf: &[u8]) -> io::Result<Option<(usize, Tx)>> {
        let Some((head, n)) = h1::parse_request_head(buf, &Limits::default())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{e:?}")))?
        else {
            return Ok(None);
        };
        let out = h2conv::request(&head).map_err(other)?;
        let tunnel = out.asked.upgrade.is_some();
        if tunnel {
            self.link.settings().await;
            if !self.link.extended_connect() {
                self.link.refuse_next().await;
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    "server without extended CONNECT",
                ));
            }
        }
        let mut send = self.link.sender();
        if let Err(e) = std::future::poll_fn(|cx| send.poll_ready(cx)).await {
            self.link.fail();
            return Err(other(e));
        }
        let end = out.framing.bodyless() && !tunnel;
        let (resp, stream) = send.send_request(out.req, end).map_err(|e| {
            self.link.fail();
            other(e)
        })?;
        self.link.attach();
        self.attached.set(true);
        {
            let mut rx = self.rx.borrow_mut();
            rx.pending = Some(resp);
            rx.asked = out.asked;
        }
        *self.send.borrow_mut() = Some(stream);
        let tx = match out.framing {
            _ if tunnel => Tx::Tunnel,
            BodyFraming::Length(l) if l > 0 => Tx::Len(l),
            BodyFraming::Chunked => {
                let mut d = BodyDecoder::new(BodyFraming::Chunked);
                d.keep_trailers();
                Tx::Chunked(Box::new(d))
            }
            _ => Tx::Done,
        };
        Ok(Some((n, tx)))
    }

    /// Sends `data` as DATA frames as flow control allows (`end`: with END_STREAM).
    async fn push(&self, mut data: &[u8], end: bool) -> io::Result<()> {
        let with_send = |f: &mut dyn FnMut(&mut SendStream<Bytes>) -> io::Result<()>| match self
            .send
            .borrow_mut()
            .as_mut()
        {
            Some(s) => f(s),
            None => Err(io::ErrorKind::BrokenPipe.into()),
        };
        if data.is_empty() && end {
            return with_send(&mut |s| s.send_data(Bytes::new(), true).map_err(other));
        }
        while !data.is_empty() {
            let cap = std::future::poll_fn(|cx| match self.send.borrow_mut().as_mut() {
                Some(s) => {
                    s.reserve_capacity(data.len());
                    s.poll_capacity(cx)
                }
                None => std::task::Poll::Ready(None),
            })
            .await;
            let cap = match cap {
                Some(Ok(c)) => c,
                Some(Err(e)) => return Err(other(e)),
                None => return Err(io::ErrorKind::BrokenPipe.into()),
            };
            if cap == 0 {
                continue;
            }
            let n = cap.min(data.len());
            let last = end && n == data.len();
            let piece = Bytes::copy_from_slice(&data[..n]);
            with_send(&mut |s| s.send_data(piece.clone(), last).map_err(other))?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Sends what `buf` holds of the request in state `tx`; returns the next state.
    async fn write_body(&self, tx: Tx, buf: &[u8]) -> io::Result<Tx> {
        match tx {
            Tx::Len(left) => {
                let n = usize::try_from(left).map_or(buf.len(), |l| l.min(buf.len()));
                let rest = left - n as u64;
                self.push(&buf[..n], rest == 0).await?;
                Ok(if rest == 0 { Tx::Done } else { Tx::Len(rest) })
            }
            Tx::Chunked(mut d) => {
                let mut payload = Payload::new();
                let p = d.advance_payload(buf, &mut payload).map_err(other)?;
                for r in payload {
                    self.push(&buf[r], false).await?;
                }
                if !p.done {
                    return Ok(Tx::Chunked(d));
                }
                let t = h2conv::trailer_map(d.take_trailers());
                if t.is_empty() {
                    self.push(&[], true).await?;
                } else if let Some(s) = self.send.borrow_mut().as_mut() {
                    s.send_trailers(t).map_err(other)?;
                }
                Ok(Tx::Done)
            }
            Tx::Tunnel => {
                self.push(buf, false).await?;
                Ok(Tx::Tunnel)
            }
            other => Ok(other),
        }
    }

    async fn write(&self, buf: &[u8]) -> io::Result<()> {
        let tx = std::mem::take(&mut *self.tx.borrow_mut());
        let tx = match tx {
            Tx::Head(mut acc) => {
                acc.extend_from_slice(buf);
                match self.open(&acc).await? {
                    None => Tx::Head(acc),
                    Some((n, tx)) => self.write_body(tx, &acc[n..]).await?,
                }
            }
            tx => self.write_body(tx, buf).await?,
        };
        *self.tx.borrow_mut() = tx;
        Ok(())
    }

    /// The response head as HTTP/1.1 into `buf`.
    async fn read_head(
        &self,
        rx: &mut Rx,
        fut: ResponseFuture,
        buf: &mut Vec<u8>,
    ) -> io::Result<usize> {
        let resp = fut.await.map_err(other)?;
        let (parts, body) = resp.into_parts();
        let ended = body.is_end_stream();
        let (head, relay) = h2conv::response_head(&parts, &rx.asked);
        let before = buf.len();
        buf.extend_from_slice(&head);
        if relay == Relay::None || ended {
            if ended && relay == Relay::Chunked {
                h2conv::last_chunk(buf, None);
            }
            rx.ended = true;
            self.finish();
        }
        rx.body = Some(body);
        rx.relay = Some(relay);
        Ok(buf.len() - before)
    }

    /// More of the response body into `buf` (0: it ended).
    async fn read_body(&self, rx: &mut Rx, buf: &mut Vec<u8>) -> io::Result<usize> {
        let (Some(body), Some(relay)) = (rx.body.as_mut(), rx.relay) else {
            return Ok(0);
        };
        loop {
            if rx.ended {
                return Ok(0);
            }
            let before = buf.len();
            match body.data().await {
                Some(Ok(d)) => {
                    let _ = body.flow_control().release_capacity(d.len());
                    match relay {
                        Relay::Chunked => h2conv::chunk(buf, &d),
                        _ => buf.extend_from_slice(&d),
                    }
                }
                Some(Err(e)) => return Err(other(e)),
                None => {
                    rx.ended = true;
                    self.finish();
                    if relay == Relay::Chunked {
                        let t = body.trailers().await.map_err(other)?;
                        rx.trailers = t.is_some();
                        h2conv::last_chunk(buf, t.as_ref());
                    }
                }
            }
            if body.is_end_stream() && relay != Relay::Chunked {
                rx.ended = true;
                self.finish();
            }
            if buf.len() > before {
                return Ok(buf.len() - before);
            }
        }
    }

    async fn read_into(&self, buf: &mut Vec<u8>) -> io::Result<usize> {
        let mut rx = std::mem::take(&mut *self.rx.borrow_mut());
        let r = match rx.pending.take() {
            Some(fut) => self.read_head(&mut rx, fut, buf).await,
            None => self.read_body(&mut rx, buf).await,
        };
        *self.rx.borrow_mut() = rx;
        r
    }
}

impl H2Stream {
    /// What the chunked form adds to `%B`: HAProxy's HTX of an h2 response holds no
    /// `transfer-encoding` (its H1 mux adds it on output), nor an end of trailers without
    /// trailers; the HTTP/1 form's count holds both.
    pub fn htx_surplus(&self) -> u64 {
        let rx = self.rx.borrow();
        match rx.relay {
            Some(Relay::Chunked) => {
                let te = ("transfer-encoding".len() + "chunked".len()) as u64;
                te + u64::from(!rx.trailers)
            }
            _ => 0,
        }
    }
}

impl Duplex for H2Stream {
    async fn read(&self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        let r = self.read_into(&mut buf).await;
        if let Err(e) = &r {
            tracing::debug!("h2 server stream: {e}");
        }
        (r, buf)
    }

    async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        let r = self.write(&buf).await;
        if let Err(e) = &r {
            tracing::debug!("h2 server stream: {e}");
        }
        (r, buf)
    }

    async fn shutdown_write(&self) -> io::Result<()> {
        if matches!(*self.tx.borrow(), Tx::Tunnel) {
            *self.tx.borrow_mut() = Tx::Done;
            return self.push(&[], true).await;
        }
        Ok(())
    }

    /// Resets the stream (CANCEL); the connection and its other streams go on.
    fn abort(&self, _rst: bool) {
        if let Some(s) = self.send.borrow_mut().as_mut() {
            s.send_reset(h2::Reason::CANCEL);
        }
        *self.tx.borrow_mut() = Tx::Done;
        let mut rx = self.rx.borrow_mut();
        rx.pending = None;
        rx.body = None;
        rx.ended = true;
        drop(rx);
        self.finish();
    }
}
