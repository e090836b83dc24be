//! The compression filter's places in the transaction (`http::comp` decides and encodes): the
//! request's choice as it leaves for the server (`compression offload` then removes its
//! `Accept-Encoding`), the response's check before the `http-response` rules (HAProxy's
//! post-analysis of the response head), and each piece of body compressed as it is forwarded,
//! framed for the client: chunks for HTTP/1 (the same bytes' payload ranges for HTTP/2).

use std::io::Write;
use std::ops::Range;

use super::{Front, Session, Txn, Upstream};
use crate::config::model::CompAlgo;
use crate::http::comp::{self, Encoder, Exchange};
use crate::http::h1::{BodyFraming, Payload};
use crate::http::head::{Headers, RequestHead, ResponseHead};
use crate::model::{Counters, Model, Proxy};

impl<F: Front, U: Upstream> Session<F, U> {
    /// The algorithm the request accepts for `be` (None: no compression), its
    /// `Accept-Encoding` removed under `compression offload`.
    pub(super) fn comp_request(&self, be: &Proxy, req: &mut RequestHead) -> Option<CompAlgo> {
        let fe = self.fe.cfg.extra.compression.as_ref();
        let be = be.cfg.extra.compression.as_ref();
        if fe.is_none() && be.is_none() {
            return None;
        }
        let (algos, _) = comp::pick(be, fe);
        let c = comp::select_request(algos, &req.headers)?;
        if c.accepted && [be, fe].into_iter().flatten().any(|c| c.offload) {
            req.headers.remove("accept-encoding");
        }
        Some(c.algo)
    }

    /// The encoder of a body the server frames with `framing`, at `tune.comp.maxlevel`.
    pub(super) fn compressor(&self, algo: CompAlgo, framing: BodyFraming) -> Compressor {
        let tune = &self.shared.model.cfg.global.tune;
        let level = tune.comp_maxlevel.unwrap_or(comp::DEFAULT_LEVEL);
        Compressor::new(algo, level, framing == BodyFraming::Chunked)
    }

    /// The request's algorithm if the response (as the server sent it) may be compressed, the
    /// compression rate is within `set rate-limit http-compression` and one more deflate state
    /// fits under `maxzlibmem`.
    pub(super) fn comp_response(
        &self,
        be: &Proxy,
        tx: &Txn,
        head: &ResponseHead,
        framing: BodyFraming,
    ) -> Option<CompAlgo> {
        let algo = tx.comp?;
        let model = &self.shared.model;
        if model.rate_limits.comp_over(model.now_ms()) {
            return None;
        }
        // `maxzlibmem`: no room for one more deflate state (identity needs none).
        let max = model.cfg.global.maxzlibmem.unwrap_or(0);
        if algo != CompAlgo::Identity && !comp::zlib_room(max) {
            return None;
        }
        let fe = self.fe.cfg.extra.compression.as_ref();
        let (_, types) = comp::pick(be.cfg.extra.compression.as_ref(), fe);
        let ex = Exchange {
            http10_request: tx.http10,
            head_request: tx.head_request,
            framing,
        };
        comp::response_allows(head, ex, types).then_some(algo)
    }
}

/// A response body being compressed: the encoder, and the buffers of the pieces it makes.
pub(super) struct Compressor {
    enc: Encoder,
    /// The compressed bytes of the piece being made.
    z: Vec<u8>,
    /// A piece's buffer back from the front, reused for the next.
    spare: Vec<u8>,
    /// Where the compressed data lies in the last piece (inside its chunk framing).
    pub payload: Payload,
    /// The last piece's payload bytes in and compressed bytes out.
    last: (u64, u64),
    /// The server's body is chunked: its end (and trailers) count as HAProxy's HTX blocks.
    chunked: bool,
}

impl Compressor {
    /// `level`: `tune.comp.maxlevel`.
    pub fn new(algo: CompAlgo, level: u32, chunked: bool) -> Self {
        Compressor {
            enc: Encoder::new(algo, level),
            z: Vec::new(),
            spare: Vec::new(),
            payload: Payload::new(),
            last: (0, 0),
            chunked,
        }
    }

    /// The client's piece for the server's `wire` bytes whose payload is at `ranges`: the
    /// compressed data as one chunk, then with `end` the last chunk and the `trailers`. None
    /// when there is nothing to send yet (no payload in `wire`).
    pub fn piece(
        &mut self,
        wire: &[u8],
        ranges: &[Range<usize>],
        end: bool,
        trailers: Option<&Headers>,
    ) -> Option<Vec<u8>> {
        self.payload.clear();
        self.z.clear();
        self.last = (0, 0);
        for r in ranges {
            self.enc
                .write(wire.get(r.clone()).unwrap_or_default(), &mut self.z);
        }
        if ranges.iter().all(|r| r.is_empty()) && !end {
            return None;
        }
        let mut out = std::mem::take(&mut self.spare);
        out.clear();
        self.enc.flush(end, &mut self.z);
        let mut took: usize = ranges.iter().map(|r| r.len()).sum();
        if end && self.chunked {
            // HAProxy counts the trailer fields' blocks (name and value) and the end-of-trailers
            // block (one byte) as they pass the filter.
            let fields = trailers.map(|t| t.0.as_slice()).unwrap_or_default();
            took += 1 + fields
                .iter()
                .map(|f| f.name.len() + f.value.len())
                .sum::<usize>();
        }
        self.last = (took as u64, self.z.len() as u64);
        if !self.z.is_empty() {
            let _ = write!(out, "{:x}\r\n", self.z.len());
            let start = out.len();
            out.extend_from_slice(&self.z);
            self.payload.push(start..out.len());
            out.extend_from_slice(b"\r\n");
        }
        if end {
            out.extend_from_slice(b"0\r\n");
            for t in trailers.map(|t| t.0.as_slice()).unwrap_or_default() {
                out.extend_from_slice(t.name.as_bytes());
                out.extend_from_slice(b": ");
                out.extend_from_slice(&t.value);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"\r\n");
        }
        Some(out)
    }

    /// The last piece in the counters of the frontend and the backend (HAProxy's `comp_in`
    /// and `comp_out`, or `comp_byp` for identity, which does not compress).
    pub fn count(&self, counters: [&Counters; 2], model: &Model) {
        let (took, made) = self.last;
        if !self.enc.identity() {
            let (now, rates) = (model.now_ms(), &model.rate_limits);
            rates
                .comp_in
                .add(u32::try_from(took).unwrap_or(u32::MAX), now);
            rates
                .comp_out
                .add(u32::try_from(made).unwrap_or(u32::MAX), now);
        }
        for c in counters {
            if self.enc.identity() {
                Counters::add(&c.comp_byp, took);
            } else {
                Counters::add(&c.comp_in, took);
                Counters::add(&c.comp_out, made);
            }
        }
    }

    /// A piece's buffer back from the front.
    pub fn give_back(&mut self, buf: Vec<u8>) {
        self.spare = buf;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::head::Header;
    use std::io::Read;

    #[test]
    #[allow(clippy::single_range_in_vec_init)] // one payload range per piece here
    fn pieces_are_chunks_with_payload_ranges() {
        let mut c = Compressor::new(CompAlgo::Gzip, 1, true);
        // Framing only (a chunk-size line): nothing to send yet.
        assert!(c.piece(b"5\r\n", &[], false, None).is_none());
        let wire = b"5\r\nhello\r\n";
        let first = c.piece(wire, &[3..8], false, None).expect("a piece");
        assert!(first.ends_with(b"\r\n"));
        let mut gz = c.payload.iter().fold(Vec::new(), |mut v, r| {
            v.extend_from_slice(&first[r.clone()]);
            v
        });
        let eol = first.windows(2).position(|w| w == b"\r\n").unwrap_or(0);
        let size = std::str::from_utf8(&first[..eol])
            .ok()
            .and_then(|h| usize::from_str_radix(h, 16).ok());
        assert_eq!(size, Some(gz.len()));
        c.give_back(first);
        let t = Headers(vec![Header::new("x-sum", "42")]);
        let last = c
            .piece(b"1\r\n!\r\n0\r\n", &[3..4], true, Some(&t))
            .expect("the end");
        assert!(last.ends_with(b"\r\n0\r\nx-sum: 42\r\n\r\n"), "{last:?}");
        for r in &c.payload {
            gz.extend_from_slice(&last[r.clone()]);
        }
        let mut plain = String::new();
        flate2::read::GzDecoder::new(&gz[..])
            .read_to_string(&mut plain)
            .expect("gzip");
        assert_eq!(plain, "hello!");
        // The end and the trailer field count as HAProxy's HTX blocks: 1 + 1 + 5 + 2.
        assert_eq!(c.last.0, 9);
    }
}
