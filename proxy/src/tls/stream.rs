//! A TLS connection (server side for `bind … ssl`, client side for `server … ssl`) over an
//! engine stream, with the stream's owned-buffer interface.
//!
//! rustls' buffered API does the record work; the socket I/O stays the engine's (io_uring or
//! epoll). Both directions of a session share the connection (`Rc`): the rustls state sits in a
//! `RefCell` never borrowed across an await, and socket writes are serialised by an async lock so
//! that records leave in the order they were sealed.

use std::cell::RefCell;
use std::io::{self, BufRead, Write};
use std::sync::Arc;

use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};

use crate::engine::io::Stream;

pub use super::info::TlsInfo;

/// Why a handshake did not complete.
#[derive(Debug)]
pub enum HandshakeError {
    /// The peer closed or reset before the handshake completed.
    Io(io::Error),
    /// The peer sent something rustls refused (an alert was sent back).
    Tls(rustls::Error),
    /// `timeout client` expired first.
    Timeout,
}

impl HandshakeError {
    /// HAProxy's words for the log line of the failed connection.
    pub fn log_message(&self) -> &'static str {
        match self {
            HandshakeError::Io(_) => "Connection closed during SSL handshake",
            HandshakeError::Tls(_) => "SSL handshake failure",
            HandshakeError::Timeout => "Timeout during SSL handshake",
        }
    }
}

impl std::fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandshakeError::Io(e) => write!(f, "{e}"),
            HandshakeError::Tls(e) => write!(f, "{e}"),
            HandshakeError::Timeout => f.write_str("timeout"),
        }
    }
}

const READ_CHUNK: usize = 16 * 1024 + 256;

pub struct TlsStream {
    sock: Stream,
    conn: RefCell<Connection>,
    /// Ciphertext read from the socket and not yet taken by rustls, from `.1` on.
    pending: RefCell<(Vec<u8>, usize)>,
    /// Reused buffer for sealed records.
    out: RefCell<Vec<u8>>,
    wlock: tokio::sync::Mutex<()>,
    /// The socket reported end of stream.
    eof: std::cell::Cell<bool>,
    info: Arc<TlsInfo>,
}

impl TlsStream {
    /// Runs the server handshake on an accepted stream, within `timeout`. On failure, also
    /// tells whether the client sent any byte (HAProxy's `dontlognull` skips those that did not).
    pub async fn accept(
        sock: Stream,
        cfg: Arc<ServerConfig>,
        timeout: Option<std::time::Duration>,
    ) -> Result<TlsStream, (HandshakeError, bool)> {
        let conn = ServerConnection::new(cfg).map_err(|e| (HandshakeError::Tls(e), false))?;
        Self::handshake_within(sock, Connection::Server(conn), timeout).await
    }

    /// Runs the client handshake towards a server, within `timeout`.
    pub async fn connect(
        sock: Stream,
        cfg: Arc<ClientConfig>,
        name: rustls::pki_types::ServerName<'static>,
        timeout: Option<std::time::Duration>,
    ) -> Result<TlsStream, HandshakeError> {
        let conn = ClientConnection::new(cfg, name).map_err(HandshakeError::Tls)?;
        Self::handshake_within(sock, Connection::Client(conn), timeout)
            .await
            .map_err(|(e, _)| e)
    }

    async fn handshake_within(
        sock: Stream,
        conn: Connection,
        timeout: Option<std::time::Duration>,
    ) -> Result<TlsStream, (HandshakeError, bool)> {
        let t = TlsStream {
            sock,
            conn: RefCell::new(conn),
            pending: RefCell::new((Vec::with_capacity(READ_CHUNK), 0)),
            out: RefCell::new(Vec::new()),
            wlock: tokio::sync::Mutex::new(()),
            eof: std::cell::Cell::new(false),
            info: Arc::default(),
        };
        let received = std::cell::Cell::new(false);
        let hs = t.handshake(&received);
        let res = match timeout {
            Some(d) => tokio::time::timeout(d, hs)
                .await
                .unwrap_or(Err(HandshakeError::Timeout)),
            None => hs.await,
        };
        match res {
            Ok(info) => Ok(TlsStream {
                info: Arc::new(info),
                ..t
            }),
            Err(e) => Err((e, received.get())),
        }
    }

    async fn handshake(&self, received: &std::cell::Cell<bool>) -> Result<TlsInfo, HandshakeError> {
        let t = self;
        loop {
            let (wants_write, handshaking, tickets_only) = {
                let c = t.conn.borrow();
                // Once a TLS 1.3 server handshake is done, all rustls has left to send is its
                // session tickets: they wait for the first response (one write and one segment
                // fewer per connection). TLS 1.2 still owes its Finished here.
                let tickets_only = matches!(&*c, Connection::Server(_))
                    && c.protocol_version() == Some(rustls::ProtocolVersion::TLSv1_3);
                (c.wants_write(), c.is_handshaking(), tickets_only)
            };
            if wants_write && (handshaking || !tickets_only) {
                t.flush().await.map_err(HandshakeError::Io)?;
            }
            if !handshaking {
                break;
            }
            match t.fill().await {
                Ok(true) => received.set(true),
                Ok(false) => {
                    return Err(HandshakeError::Io(io::ErrorKind::UnexpectedEof.into()));
                }
                Err(e) => {
                    if matches!(e, HandshakeError::Tls(_)) {
                        received.set(true);
                    }
                    return Err(e);
                }
            }
        }
        Ok(info_of(&t.conn.borrow()))
    }

    pub fn info(&self) -> &Arc<TlsInfo> {
        &self.info
    }

    pub fn socket(&self) -> &Stream {
        &self.sock
    }

    /// Reads from the socket and feeds rustls until it has made progress: returns Ok(false) at
    /// end of stream. A protocol error sends rustls' alert, then fails.
    async fn fill(&self) -> Result<bool, HandshakeError> {
        if self.feed()? {
            return Ok(true);
        }
        let buf = {
            let mut p = self.pending.borrow_mut();
            let (b, off) = &mut *p;
            b.drain(..*off);
            *off = 0;
            std::mem::take(b)
        };
        let (r, buf) = self.sock.read(buf).await;
        self.pending.borrow_mut().0 = buf;
        match r {
            Ok(0) => {
                self.eof.set(true);
                // Tells rustls the transport ended (it then reports an unclean close).
                let _ = self.conn.borrow_mut().read_tls(&mut io::empty());
                Ok(false)
            }
            Ok(_) => {
                self.feed()?;
                Ok(true)
            }
            Err(e) => Err(HandshakeError::Io(e)),
        }
    }

    /// Hands pending ciphertext to rustls and processes it. Returns whether anything was taken.
    fn feed(&self) -> Result<bool, HandshakeError> {
        let mut p = self.pending.borrow_mut();
        let (b, off) = &mut *p;
        let mut conn = self.conn.borrow_mut();
        let mut took = false;
        while *off < b.len() {
            let mut rd = &b[*off..];
            match conn.read_tls(&mut rd) {
                Ok(0) => break,
                Ok(n) => {
                    *off += n;
                    took = true;
                }
                // The plaintext buffer is full: the reader must drain it first.
                Err(_) => break,
            }
            if let Err(e) = conn.process_new_packets() {
                drop(conn);
                drop(p);
                self.send_alert_now();
                return Err(HandshakeError::Tls(e));
            }
        }
        if *off == b.len() {
            b.clear();
            *off = 0;
        }
        Ok(took)
    }

    /// Best effort: puts rustls' alert on the wire without waiting.
    fn send_alert_now(&self) {
        let mut out = Vec::new();
        {
            let mut conn = self.conn.borrow_mut();
            while conn.wants_write() {
                if conn.write_tls(&mut out).is_err() {
                    break;
                }
            }
        }
        if !out.is_empty() {
            // SAFETY: a plain send on a descriptor the stream owns; MSG_DONTWAIT never blocks.
            unsafe {
                libc::send(
                    self.sock.raw_fd(),
                    out.as_ptr().cast(),
                    out.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                );
            }
        }
    }

    /// Sends every sealed record, in order.
    async fn flush(&self) -> io::Result<()> {
        let _g = self.wlock.lock().await;
        self.flush_locked().await
    }

    async fn flush_locked(&self) -> io::Result<()> {
        let mut out = std::mem::take(&mut *self.out.borrow_mut());
        {
            let mut conn = self.conn.borrow_mut();
            while conn.wants_write() {
                conn.write_tls(&mut out)?;
            }
        }
        if out.is_empty() {
            return Ok(());
        }
        let (r, mut out) = self.sock.write_all(out).await;
        out.clear();
        *self.out.borrow_mut() = out;
        r
    }

    /// Reads plaintext into the spare capacity of `buf` (appending). Ok(0) is end of stream,
    /// with or without close_notify (HAProxy treats both as the client closing).
    pub async fn read(&self, mut buf: Vec<u8>) -> (io::Result<usize>, Vec<u8>) {
        if buf.capacity() == buf.len() {
            buf.reserve(16 * 1024);
        }
        loop {
            {
                let mut conn = self.conn.borrow_mut();
                let room = buf.capacity() - buf.len();
                let mut rd = conn.reader();
                match rd.fill_buf() {
                    Ok(chunk) if !chunk.is_empty() => {
                        let n = chunk.len().min(room);
                        buf.extend_from_slice(&chunk[..n]);
                        rd.consume(n);
                        return (Ok(n), buf);
                    }
                    Ok(_) => return (Ok(0), buf),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                    Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return (Ok(0), buf),
                    Err(e) => return (Err(e), buf),
                }
            }
            if self.eof.get() {
                return (Ok(0), buf);
            }
            let r = self.fill().await;
            // Post-handshake messages (key updates, alerts) may want an answer.
            if self.conn.borrow().wants_write()
                && let Err(e) = self.flush().await
            {
                return (Err(e), buf);
            }
            match r {
                Ok(_) => {}
                Err(HandshakeError::Io(e)) => return (Err(e), buf),
                Err(HandshakeError::Tls(e)) => {
                    return (Err(io::Error::new(io::ErrorKind::InvalidData, e)), buf);
                }
                Err(HandshakeError::Timeout) => {
                    return (Err(io::ErrorKind::TimedOut.into()), buf);
                }
            }
        }
    }

    /// Seals and sends all of `buf`.
    pub async fn write_all(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        let _g = self.wlock.lock().await;
        if let Err(e) = self.seal(&buf) {
            return (Err(e), buf);
        }
        (self.flush_locked().await, buf)
    }

    /// `write_all` then `shutdown_write`, with the data and close_notify in one send.
    pub async fn write_all_close(&self, buf: Vec<u8>) -> (io::Result<()>, Vec<u8>) {
        let r = {
            let _g = self.wlock.lock().await;
            match self.seal(&buf) {
                Ok(()) => {
                    self.conn.borrow_mut().send_close_notify();
                    self.flush_locked().await
                }
                Err(e) => Err(e),
            }
        };
        let fin = self.sock.shutdown_write();
        (r.and(fin), buf)
    }

    /// Seals all of `buf` into the output buffer (the caller holds the write lock).
    fn seal(&self, buf: &[u8]) -> io::Result<()> {
        let mut off = 0;
        while off < buf.len() {
            let mut conn = self.conn.borrow_mut();
            let n = conn.writer().write(&buf[off..])?;
            let mut out = self.out.borrow_mut();
            while conn.wants_write() {
                conn.write_tls(&mut *out)?;
            }
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            off += n;
        }
        Ok(())
    }

    /// Sends close_notify, then a FIN.
    pub async fn shutdown_write(&self) -> io::Result<()> {
        self.conn.borrow_mut().send_close_notify();
        let r = self.flush().await;
        self.sock.shutdown_write()?;
        r
    }
}

fn info_of(c: &Connection) -> TlsInfo {
    let protocol = match c.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3",
        Some(rustls::ProtocolVersion::TLSv1_2) => "TLSv1.2",
        _ => "",
    };
    TlsInfo {
        sni: match c {
            Connection::Server(s) => s.server_name().map(str::to_string),
            Connection::Client(_) => None,
        },
        alpn: c
            .alpn_protocol()
            .map(|a| String::from_utf8_lossy(a).into_owned()),
        protocol,
        cipher: c
            .negotiated_cipher_suite()
            .map_or("", |s| super::ciphers::openssl_name(s.suite())),
        resumed: matches!(c.handshake_kind(), Some(rustls::HandshakeKind::Resumed)),
    }
}
