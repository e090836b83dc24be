//! The server side of an HTTP/2 connection, sans I/O: bytes from the client go in
//! ([`Server::recv`]), frames for the client come out ([`Server::take_output`]); streams are
//! read and written through their ids. Flow control as HAProxy 2.6 does it: every DATA frame
//! the transaction takes is acknowledged at once on the stream and the connection (a
//! WINDOW_UPDATE each), so a client is never left waiting for half a window.
//!
//! Defences: a header block larger than the header-list limit or spread over too many
//! CONTINUATION frames ends the connection (ENHANCE_YOUR_CALM), as do more than
//! [`MAX_PREMATURE_RESETS`] streams the client reset before their response ended (less the
//! responses completed meanwhile: rapid reset).

use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

use bytes::{Bytes, BytesMut};

use super::frame::{self, Head, code, setting};
use super::hpack;
use super::request::{self, Collect, RequestFields};
use crate::http::head::Header;

/// Streams the client may reset before their response ended, net of the responses completed.
pub const MAX_PREMATURE_RESETS: u32 = 100;
/// CONTINUATION frames one header block may use.
const MAX_CONTINUATIONS: u32 = 256;
/// Our SETTINGS_INITIAL_WINDOW_SIZE and connection window (RFC 9113's default, as HAProxy's
/// `tune.h2.initial-window-size`).
const WINDOW: i64 = 65_535;

/// Hashes a stream id by one multiplication (Fibonacci hashing): ids are few and odd, SipHash
/// cost more than the rest of a stream's bookkeeping; the multiplication still spreads ids a
/// client picks with the same low bits.
#[derive(Default)]
pub struct IdHash(u64);

impl Hasher for IdHash {
    fn finish(&self) -> u64 {
        // The product's high bits depend on every bit of the id; the table indexes by low ones.
        self.0 ^ (self.0 >> 32)
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8 | u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, id: u32) {
        self.0 = u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// A map keyed by stream id.
pub type IdMap<V> = HashMap<u32, V, BuildHasherDefault<IdHash>>;

/// What this server announces and enforces.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub max_concurrent_streams: u32,
    pub max_header_list: u32,
    pub connect_protocol: bool,
}

/// A connection error: a GOAWAY with this code was queued; nothing more is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnError {
    pub code: u32,
    pub why: &'static str,
}

/// What a stream's request body has next.
#[derive(Debug, PartialEq, Eq)]
pub enum Body {
    Data(Bytes),
    /// Nothing yet.
    Pending,
    /// The body ended (trailers, if any, are taken apart).
    End,
    /// The stream was reset (by either side) with this code.
    Reset(u32),
}

/// Why a stream cannot be written to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gone {
    /// Reset (by either side) with this code.
    Reset(u32),
    /// The response already ended, or the stream is unknown.
    Closed,
}

#[derive(Debug)]
struct Stream {
    recv_window: i64,
    send_window: i64,
    request: Option<RequestFields>,
    body: VecDeque<Bytes>,
    /// Body bytes received, not yet taken.
    queued: usize,
    trailers: Option<Vec<Header>>,
    recv_closed: bool,
    send_closed: bool,
    reset: Option<u32>,
    length: Option<u64>,
    received: u64,
    /// Blocked on flow control: woken when a window opens.
    wants_window: bool,
    marked: bool,
}

impl Stream {
    fn closed(&self) -> bool {
        self.reset.is_some() || (self.recv_closed && self.send_closed)
    }
}

/// A header block being gathered from HEADERS and CONTINUATION frames.
struct Pending {
    stream: u32,
    end_stream: bool,
    block: Vec<u8>,
    frames: u32,
}

pub struct Server {
    limits: Limits,
    decoder: loona_hpack::Decoder<'static>,
    preface: bool,
    settings_seen: bool,
    peer_window: i64,
    peer_frame_size: usize,
    send_window: i64,
    recv_window: i64,
    streams: IdMap<Stream>,
    last_id: u32,
    pending: Option<Pending>,
    premature: u32,
    goaway_sent: bool,
    peer_goaway: bool,
    failed: Option<ConnError>,
    out: Vec<u8>,
    accepted: VecDeque<u32>,
    changed: Vec<u32>,
}

impl Server {
    /// A connection whose SETTINGS are queued (they may go out before the client's preface).
    pub fn new(limits: Limits) -> Server {
        let mut out = Vec::with_capacity(256);
        let mut pairs = vec![
            (
                setting::MAX_CONCURRENT_STREAMS,
                limits.max_concurrent_streams,
            ),
            (setting::MAX_HEADER_LIST_SIZE, limits.max_header_list),
        ];
        if limits.connect_protocol {
            pairs.push((setting::ENABLE_CONNECT_PROTOCOL, 1));
        }
        frame::put_settings(&mut out, &pairs);
        Server {
            limits,
            decoder: loona_hpack::Decoder::new(),
            preface: false,
            settings_seen: false,
            peer_window: WINDOW,
            peer_frame_size: frame::DEFAULT_FRAME_SIZE as usize,
            send_window: WINDOW,
            recv_window: WINDOW,
            streams: IdMap::default(),
            last_id: 0,
            pending: None,
            premature: 0,
            goaway_sent: false,
            peer_goaway: false,
            failed: None,
            out,
            accepted: VecDeque::new(),
            changed: Vec::new(),
        }
    }

    /// The client's preface and first SETTINGS arrived.
    pub fn ready(&self) -> bool {
        self.settings_seen
    }

    /// Frames to send, swapped with `spare` (an empty buffer to fill next).
    pub fn take_output(&mut self, spare: Vec<u8>) -> Vec<u8> {
        std::mem::replace(&mut self.out, spare)
    }

    pub fn output_len(&self) -> usize {
        self.out.len()
    }

    /// A new stream whose request can be taken.
    pub fn accept(&mut self) -> Option<u32> {
        self.accepted.pop_front()
    }

    /// Streams whose state changed since the last call (data, end, reset, window).
    pub fn take_changed(&mut self, into: &mut Vec<u32>) {
        for id in self.changed.drain(..) {
            if let Some(s) = self.streams.get_mut(&id) {
                s.marked = false;
            }
            into.push(id);
        }
    }

    /// Streams not closed yet (what counts against SETTINGS_MAX_CONCURRENT_STREAMS).
    pub fn open_streams(&self) -> usize {
        self.streams.values().filter(|s| !s.closed()).count()
    }

    /// Whether either side said GOAWAY or the connection failed: no stream will come.
    pub fn closing(&self) -> bool {
        self.goaway_sent || self.peer_goaway || self.failed.is_some()
    }

    pub fn failed(&self) -> Option<ConnError> {
        self.failed
    }

    /// Says GOAWAY (NO_ERROR: a graceful stop); the streams already open go on.
    pub fn go_away(&mut self) {
        if !self.goaway_sent && self.failed.is_none() {
            self.goaway_sent = true;
            frame::put_goaway(&mut self.out, self.last_id, code::NO_ERROR);
        }
    }

    fn mark(&mut self, id: u32) {
        if let Some(s) = self.streams.get_mut(&id)
            && !s.marked
        {
            s.marked = true;
            self.changed.push(id);
        }
    }

    fn conn_error(&mut self, code: u32, why: &'static str) -> ConnError {
        let e = ConnError { code, why };
        if self.failed.is_none() {
            self.failed = Some(e);
            frame::put_goaway(&mut self.out, self.last_id, code);
            self.reset_all(code);
        }
        e
    }

    /// Every stream ends with the connection (their transactions see it at their next step).
    fn reset_all(&mut self, code: u32) {
        let ids: Vec<u32> = self.streams.keys().copied().collect();
        for id in ids {
            if let Some(s) = self.streams.get_mut(&id)
                && s.reset.is_none()
            {
                s.reset = Some(code);
            }
            self.mark(id);
        }
    }

    /// Resets stream `id` with `code` (a stream error, ours).
    fn stream_error(&mut self, id: u32, code: u32) {
        frame::put_rst(&mut self.out, id, code);
        self.drop_stream_state(id, code);
    }

    /// The stream is over (reset): its unread body is given back to the connection window.
    fn drop_stream_state(&mut self, id: u32, code: u32) {
        let Some(s) = self.streams.get_mut(&id) else {
            return;
        };
        if s.reset.is_none() {
            s.reset = Some(code);
        }
        let unread = std::mem::take(&mut s.queued);
        s.body.clear();
        self.credit(0, unread);
        self.mark(id);
    }

    /// Gives `n` bytes back to the client's window on `stream` (0: the connection).
    fn credit(&mut self, stream: u32, n: usize) {
        if n == 0 || self.failed.is_some() {
            return;
        }
        if stream == 0 {
            self.recv_window += n as i64;
        } else if let Some(s) = self.streams.get_mut(&stream) {
            s.recv_window += n as i64;
        }
        frame::put_window_update(&mut self.out, stream, n as u32);
    }

    /// Consumes every whole frame at the front of `input` (all of it after an error).
    pub fn recv(&mut self, input: &mut BytesMut) -> Result<(), ConnError> {
        let r = self.recv_frames(input);
        if r.is_err() {
            input.clear();
        }
        r
    }

    fn recv_frames(&mut self, input: &mut BytesMut) -> Result<(), ConnError> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        if !self.preface {
            let n = input.len().min(frame::PREFACE.len());
            if input[..n] != frame::PREFACE[..n] {
                return Err(self.conn_error(code::PROTOCOL_ERROR, "bad connection preface"));
            }
            if n < frame::PREFACE.len() {
                return Ok(());
            }
            let _ = input.split_to(n);
            self.preface = true;
        }
        while let Some(head) = Head::parse(input) {
            if head.len > frame::DEFAULT_FRAME_SIZE as usize {
                return Err(self.conn_error(code::FRAME_SIZE_ERROR, "frame too large"));
            }
            if input.len() < frame::HEADER_LEN + head.len {
                break;
            }
            let _ = input.split_to(frame::HEADER_LEN);
            let payload = input.split_to(head.len).freeze();
            self.frame(head, payload)?;
        }
        Ok(())
    }

    fn frame(&mut self, head: Head, payload: Bytes) -> Result<(), ConnError> {
        if !self.settings_seen && (head.kind != frame::SETTINGS || head.has(frame::ACK)) {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "first frame not SETTINGS"));
        }
        if self.pending.is_some() && head.kind != frame::CONTINUATION {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "CONTINUATION expected"));
        }
        match head.kind {
            frame::DATA => self.data(head, payload),
            frame::HEADERS => self.headers(head, &payload),
            frame::CONTINUATION => self.continuation(head, &payload),
            frame::PRIORITY => self.priority(head),
            frame::RST_STREAM => self.rst(head, &payload),
            frame::SETTINGS => self.settings(head, &payload),
            frame::PUSH_PROMISE => Err(self.conn_error(code::PROTOCOL_ERROR, "PUSH_PROMISE")),
            frame::PING => self.ping(head, &payload),
            frame::GOAWAY => self.goaway(head, &payload),
            frame::WINDOW_UPDATE => self.window_update(head, &payload),
            // Unknown frame types are ignored (RFC 9113 §4.1).
            _ => Ok(()),
        }
    }

    fn data(&mut self, head: Head, payload: Bytes) -> Result<(), ConnError> {
        let id = head.stream;
        if id == 0 {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "DATA on stream 0"));
        }
        if id > self.last_id {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "DATA on an idle stream"));
        }
        self.recv_window -= head.len as i64;
        if self.recv_window < 0 {
            return Err(self.conn_error(code::FLOW_CONTROL_ERROR, "connection window exceeded"));
        }
        let Some((start, end)) = frame::unpad(&head, &payload) else {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "padding too long"));
        };
        let data = payload.slice(start..end);
        let Some(s) = self.streams.get_mut(&id) else {
            // A stream already over (reset, or released while the client was still sending):
            // the bytes only count against the connection.
            self.credit(0, head.len);
            return Ok(());
        };
        if s.reset.is_some() {
            self.credit(0, head.len);
            return Ok(());
        }
        if s.recv_closed {
            self.credit(0, head.len);
            self.stream_error(id, code::STREAM_CLOSED);
            return Ok(());
        }
        s.recv_window -= head.len as i64;
        if s.recv_window < 0 {
            self.credit(0, head.len);
            self.stream_error(id, code::FLOW_CONTROL_ERROR);
            return Ok(());
        }
        s.received += data.len() as u64;
        let end_stream = head.has(frame::END_STREAM);
        let over = s
            .length
            .is_some_and(|l| s.received > l || (end_stream && s.received != l));
        if over {
            self.credit(0, head.len);
            self.stream_error(id, code::PROTOCOL_ERROR);
            return Ok(());
        }
        if !data.is_empty() {
            s.queued += data.len();
            s.body.push_back(data.clone());
        }
        s.recv_closed = end_stream;
        // Padding is given back at once: the transaction never sees it.
        let padding = head.len - data.len();
        if padding > 0 {
            self.credit(0, padding);
            if !end_stream {
                self.credit(id, padding);
            }
        }
        self.mark(id);
        Ok(())
    }

    fn headers(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream == 0 {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "HEADERS on stream 0"));
        }
        let Some((mut start, end)) = frame::unpad(&head, payload) else {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "padding too long"));
        };
        if head.has(frame::PRIORITY_FLAG) {
            start += 5;
            if start > end {
                return Err(self.conn_error(code::FRAME_SIZE_ERROR, "short HEADERS"));
            }
        }
        let block = payload[start..end].to_vec();
        let pending = Pending {
            stream: head.stream,
            end_stream: head.has(frame::END_STREAM),
            block,
            frames: 0,
        };
        if head.has(frame::END_HEADERS) {
            return self.block(pending);
        }
        self.check_pending_size(&pending)?;
        self.pending = Some(pending);
        Ok(())
    }

    fn check_pending_size(&mut self, p: &Pending) -> Result<(), ConnError> {
        if p.block.len() > self.limits.max_header_list as usize || p.frames > MAX_CONTINUATIONS {
            return Err(self.conn_error(code::ENHANCE_YOUR_CALM, "header block too large"));
        }
        Ok(())
    }

    fn continuation(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        let Some(mut p) = self.pending.take() else {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "unexpected CONTINUATION"));
        };
        if head.stream != p.stream {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "CONTINUATION on another stream"));
        }
        p.block.extend_from_slice(payload);
        p.frames += 1;
        self.check_pending_size(&p)?;
        if head.has(frame::END_HEADERS) {
            return self.block(p);
        }
        self.pending = Some(p);
        Ok(())
    }

    /// A whole header block: a new stream's request or a stream's trailers.
    fn block(&mut self, p: Pending) -> Result<(), ConnError> {
        let id = p.stream;
        if id.is_multiple_of(2) {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "even stream id"));
        }
        let known = self.streams.contains_key(&id);
        let trailers = known || id <= self.last_id;
        let mut c = Collect::default();
        let decoded = self
            .decoder
            .decode_with_cb(&p.block, |n, v| c.field(&n, &v, trailers));
        if decoded.is_err() {
            return Err(self.conn_error(code::COMPRESSION_ERROR, "HPACK decoding failed"));
        }
        let too_large = c.size > self.limits.max_header_list as usize;
        if trailers {
            return self.trailers(id, p.end_stream, c, too_large);
        }
        self.last_id = id;
        if self.goaway_sent || self.peer_goaway {
            frame::put_rst(&mut self.out, id, code::REFUSED_STREAM);
            return Ok(());
        }
        if self.open_streams() >= self.limits.max_concurrent_streams as usize {
            frame::put_rst(&mut self.out, id, code::REFUSED_STREAM);
            return Ok(());
        }
        let req = match c.request(p.end_stream, self.limits.connect_protocol) {
            // A body announced but absent is malformed too (RFC 9113 §8.1.1).
            Ok(r) if !(too_large || p.end_stream && r.length.is_some_and(|l| l != 0)) => r,
            Ok(_) | Err(_) => {
                frame::put_rst(&mut self.out, id, code::PROTOCOL_ERROR);
                return Ok(());
            }
        };
        self.streams.insert(
            id,
            Stream {
                recv_window: WINDOW,
                send_window: self.peer_window,
                length: req.length,
                recv_closed: p.end_stream,
                request: Some(req),
                body: VecDeque::new(),
                queued: 0,
                trailers: None,
                send_closed: false,
                reset: None,
                received: 0,
                wants_window: false,
                marked: false,
            },
        );
        self.accepted.push_back(id);
        Ok(())
    }

    fn trailers(
        &mut self,
        id: u32,
        end_stream: bool,
        c: Collect,
        too_large: bool,
    ) -> Result<(), ConnError> {
        let Some(s) = self.streams.get_mut(&id) else {
            frame::put_rst(&mut self.out, id, code::STREAM_CLOSED);
            return Ok(());
        };
        if s.reset.is_some() {
            return Ok(());
        }
        if s.recv_closed {
            self.stream_error(id, code::STREAM_CLOSED);
            return Ok(());
        }
        let fields = request::trailers(c);
        let short = s.length.is_some_and(|l| s.received != l);
        match fields {
            Ok(f) if end_stream && !too_large && !short => {
                s.trailers = Some(f);
                s.recv_closed = true;
                self.mark(id);
            }
            _ => self.stream_error(id, code::PROTOCOL_ERROR),
        }
        Ok(())
    }

    fn priority(&mut self, head: Head) -> Result<(), ConnError> {
        if head.stream == 0 {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "PRIORITY on stream 0"));
        }
        // A stream error by RFC 9113 §6.3, but the stream may be idle (or even-numbered), where a
        // RST_STREAM is itself an error: the connection's, as HAProxy's.
        if head.len != 5 {
            return Err(self.conn_error(code::FRAME_SIZE_ERROR, "PRIORITY size"));
        }
        Ok(())
    }

    fn rst(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream == 0 {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "RST_STREAM on stream 0"));
        }
        let Ok(c) = <[u8; 4]>::try_from(payload) else {
            return Err(self.conn_error(code::FRAME_SIZE_ERROR, "RST_STREAM size"));
        };
        if head.stream > self.last_id {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "RST_STREAM on an idle stream"));
        }
        let Some(s) = self.streams.get(&head.stream) else {
            return Ok(());
        };
        if s.reset.is_some() {
            return Ok(());
        }
        if !s.send_closed {
            self.premature += 1;
            if self.premature > MAX_PREMATURE_RESETS {
                return Err(self.conn_error(code::ENHANCE_YOUR_CALM, "too many resets"));
            }
        }
        self.drop_stream_state(head.stream, u32::from_be_bytes(c));
        Ok(())
    }

    fn settings(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream != 0 {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "SETTINGS on a stream"));
        }
        if head.has(frame::ACK) {
            if !payload.is_empty() {
                return Err(self.conn_error(code::FRAME_SIZE_ERROR, "SETTINGS ack with payload"));
            }
            return Ok(());
        }
        if !payload.len().is_multiple_of(6) {
            return Err(self.conn_error(code::FRAME_SIZE_ERROR, "SETTINGS size"));
        }
        for p in payload.chunks_exact(6) {
            let id = u16::from_be_bytes([p[0], p[1]]);
            let v = u32::from_be_bytes([p[2], p[3], p[4], p[5]]);
            match id {
                setting::ENABLE_PUSH | setting::ENABLE_CONNECT_PROTOCOL if v > 1 => {
                    return Err(self.conn_error(code::PROTOCOL_ERROR, "boolean setting"));
                }
                setting::INITIAL_WINDOW_SIZE => self.peer_window_size(v)?,
                setting::MAX_FRAME_SIZE => {
                    if !(frame::DEFAULT_FRAME_SIZE..=frame::MAX_FRAME_SIZE_LIMIT).contains(&v) {
                        return Err(self.conn_error(code::PROTOCOL_ERROR, "MAX_FRAME_SIZE"));
                    }
                    self.peer_frame_size = v as usize;
                }
                // The encoder never indexes: the client's table size does not matter.
                _ => {}
            }
        }
        self.settings_seen = true;
        frame::put_settings_ack(&mut self.out);
        Ok(())
    }

    /// A new SETTINGS_INITIAL_WINDOW_SIZE moves every stream's send window (RFC 9113 §6.9.2).
    fn peer_window_size(&mut self, v: u32) -> Result<(), ConnError> {
        if i64::from(v) > frame::MAX_WINDOW {
            return Err(self.conn_error(code::FLOW_CONTROL_ERROR, "INITIAL_WINDOW_SIZE"));
        }
        let delta = i64::from(v) - self.peer_window;
        self.peer_window = i64::from(v);
        let mut overflow = false;
        let mut woken = Vec::new();
        for (id, s) in &mut self.streams {
            s.send_window += delta;
            overflow |= s.send_window > frame::MAX_WINDOW;
            if delta > 0 && s.wants_window {
                woken.push(*id);
            }
        }
        if overflow {
            return Err(self.conn_error(code::FLOW_CONTROL_ERROR, "window overflow"));
        }
        for id in woken {
            self.mark(id);
        }
        Ok(())
    }

    fn ping(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream != 0 {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "PING on a stream"));
        }
        if payload.len() != 8 {
            return Err(self.conn_error(code::FRAME_SIZE_ERROR, "PING size"));
        }
        if !head.has(frame::ACK) {
            frame::put_ping_ack(&mut self.out, payload);
        }
        Ok(())
    }

    fn goaway(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        if head.stream != 0 {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "GOAWAY on a stream"));
        }
        if payload.len() < 8 {
            return Err(self.conn_error(code::FRAME_SIZE_ERROR, "GOAWAY size"));
        }
        self.peer_goaway = true;
        Ok(())
    }

    fn window_update(&mut self, head: Head, payload: &[u8]) -> Result<(), ConnError> {
        let Ok(b) = <[u8; 4]>::try_from(payload) else {
            return Err(self.conn_error(code::FRAME_SIZE_ERROR, "WINDOW_UPDATE size"));
        };
        let inc = i64::from(u32::from_be_bytes(b) & 0x7fff_ffff);
        let id = head.stream;
        if id == 0 {
            if inc == 0 {
                return Err(self.conn_error(code::PROTOCOL_ERROR, "zero window increment"));
            }
            self.send_window += inc;
            if self.send_window > frame::MAX_WINDOW {
                return Err(self.conn_error(code::FLOW_CONTROL_ERROR, "window overflow"));
            }
            let woken: Vec<u32> = self
                .streams
                .iter()
                .filter(|(_, s)| s.wants_window)
                .map(|(id, _)| *id)
                .collect();
            for id in woken {
                self.mark(id);
            }
            return Ok(());
        }
        if id > self.last_id {
            return Err(self.conn_error(code::PROTOCOL_ERROR, "WINDOW_UPDATE on an idle stream"));
        }
        let Some(s) = self.streams.get_mut(&id) else {
            return Ok(());
        };
        if s.reset.is_some() {
            return Ok(());
        }
        if inc == 0 {
            self.stream_error(id, code::PROTOCOL_ERROR);
            return Ok(());
        }
        s.send_window += inc;
        if s.send_window > frame::MAX_WINDOW {
            self.stream_error(id, code::FLOW_CONTROL_ERROR);
            return Ok(());
        }
        if s.wants_window {
            self.mark(id);
        }
        Ok(())
    }

    // ---- the streams' side ----

    /// The request of a stream [`accept`](Self::accept) gave (taken once); None if the stream
    /// was reset meanwhile (it is then forgotten).
    pub fn take_request(&mut self, id: u32) -> Option<RequestFields> {
        let s = self.streams.get_mut(&id)?;
        if s.reset.is_some() {
            self.streams.remove(&id);
            return None;
        }
        s.request.take()
    }

    /// The client is gone: every stream is reset (nothing is sent any more).
    pub fn close(&mut self) {
        if self.failed.is_none() {
            self.failed = Some(ConnError {
                code: code::CANCEL,
                why: "connection closed",
            });
            self.reset_all(code::CANCEL);
        }
    }

    /// The next piece of a stream's request body; a piece taken is acknowledged at once
    /// (WINDOW_UPDATE on the stream and on the connection).
    pub fn recv_body(&mut self, id: u32) -> Body {
        let Some(s) = self.streams.get_mut(&id) else {
            return Body::Reset(code::CANCEL);
        };
        if let Some(c) = s.reset {
            return Body::Reset(c);
        }
        match s.body.pop_front() {
            Some(d) => {
                s.queued -= d.len();
                // HAProxy acknowledges on the stream even after its END_STREAM (h2_to_h1.vtc
                // waits for it); the client's half-closed stream may receive it.
                self.credit(id, d.len());
                self.credit(0, d.len());
                Body::Data(d)
            }
            None if s.recv_closed => Body::End,
            None => Body::Pending,
        }
    }

    /// The request's trailers, once its body ended with them.
    pub fn take_trailers(&mut self, id: u32) -> Option<Vec<Header>> {
        self.streams.get_mut(&id)?.trailers.take()
    }

    fn writable(&self, id: u32) -> Result<(), Gone> {
        match self.streams.get(&id) {
            Some(s) if s.reset.is_some() => Err(Gone::Reset(s.reset.unwrap_or(code::CANCEL))),
            Some(s) if !s.send_closed => Ok(()),
            _ => Err(Gone::Closed),
        }
    }

    /// A response head (`status` < 200: an interim one); `fields` in any case (written
    /// lowercase).
    pub fn send_head<'a>(
        &mut self,
        id: u32,
        status: u16,
        fields: impl Iterator<Item = (&'a str, &'a [u8])>,
        end_stream: bool,
    ) -> Result<(), Gone> {
        self.writable(id)?;
        self.put_block(id, Some(status), fields, end_stream);
        if end_stream {
            self.sent_end(id);
        }
        Ok(())
    }

    /// The response's trailers, ending the stream.
    pub fn send_trailers<'a>(
        &mut self,
        id: u32,
        fields: impl Iterator<Item = (&'a str, &'a [u8])>,
    ) -> Result<(), Gone> {
        self.writable(id)?;
        self.put_block(id, None, fields, true);
        self.sent_end(id);
        Ok(())
    }

    /// Encodes a header block straight into the output behind a HEADERS frame header filled in
    /// afterwards; a block over the peer's frame size is moved out and split into CONTINUATION
    /// frames (rare: only the copy is extra then).
    fn put_block<'a>(
        &mut self,
        id: u32,
        status: Option<u16>,
        fields: impl Iterator<Item = (&'a str, &'a [u8])>,
        end_stream: bool,
    ) {
        let start = self.out.len();
        frame::put_head(&mut self.out, 0, frame::HEADERS, 0, id);
        if let Some(status) = status {
            hpack::put_status(&mut self.out, status);
        }
        for (n, v) in fields {
            hpack::put_field(&mut self.out, n, v);
        }
        let body = start + frame::HEADER_LEN;
        let len = self.out.len() - body;
        if len <= self.peer_frame_size {
            let flags = frame::END_HEADERS | if end_stream { frame::END_STREAM } else { 0 };
            self.out[start..body].copy_from_slice(&frame::head_bytes(
                len,
                frame::HEADERS,
                flags,
                id,
            ));
        } else {
            let block = self.out.split_off(body);
            self.out.truncate(start);
            frame::put_header_block(&mut self.out, id, &block, end_stream, self.peer_frame_size);
        }
    }

    /// Sends as much of `data` as the windows allow; how much. With `end` and all of it sent,
    /// the stream's response ends (an empty `data` only ends it).
    pub fn send_data(&mut self, id: u32, data: &[u8], end: bool) -> Result<usize, Gone> {
        self.writable(id)?;
        let Some(s) = self.streams.get_mut(&id) else {
            return Err(Gone::Closed);
        };
        let room = self.send_window.min(s.send_window).max(0) as usize;
        let n = room.min(data.len());
        let all = n == data.len();
        s.wants_window = !all;
        s.send_window -= n as i64;
        self.send_window -= n as i64;
        let max = self.peer_frame_size;
        let mut chunks = data[..n].chunks(max).peekable();
        if n == 0 && all && end {
            frame::put_data(&mut self.out, id, &[], true);
        }
        while let Some(c) = chunks.next() {
            let last = chunks.peek().is_none();
            frame::put_data(&mut self.out, id, c, last && all && end);
        }
        if all && end {
            self.sent_end(id);
        }
        Ok(n)
    }

    fn sent_end(&mut self, id: u32) {
        if let Some(s) = self.streams.get_mut(&id) {
            s.send_closed = true;
            self.premature = self.premature.saturating_sub(1);
        }
    }

    /// Resets a stream (ours: the transaction gave up on it).
    pub fn reset(&mut self, id: u32, code: u32) {
        if self
            .streams
            .get(&id)
            .is_some_and(|s| s.reset.is_none() && !s.closed())
        {
            self.stream_error(id, code);
        }
    }

    /// The transaction is done with the stream: a response left unfinished is reset (CANCEL),
    /// a request body still coming is refused (NO_ERROR, RFC 9113 §8.1), and the stream forgotten.
    pub fn release(&mut self, id: u32) {
        let Some(s) = self.streams.get(&id) else {
            return;
        };
        if s.reset.is_none() && self.failed.is_none() {
            if !s.send_closed {
                self.stream_error(id, code::CANCEL);
            } else if !s.recv_closed {
                self.stream_error(id, code::NO_ERROR);
            }
        }
        if let Some(s) = self.streams.remove(&id) {
            self.credit(0, s.queued);
        }
    }
}

#[cfg(test)]
mod tests;
