//! HTTP response compression as HAProxy 2.6's compression filter decides and does it
//! (`flt_http_comp.c`): the algorithm a request accepts ([`select_request`]), whether a
//! response may be compressed ([`response_allows`]), the head a compressed response gets
//! ([`set_response_head`]) and the streaming encoder ([`Encoder`]) that compresses each piece
//! of body as it passes, flushed so the client can decode it at once. Pure: the stream layer's
//! hook (`stream/http/compress.rs`) feeds it.

use std::sync::atomic::{AtomicU64, Ordering};

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

use super::h1::{BodyFraming, is_tchar, list_elements};
use super::head::{Headers, ResponseHead, Version};
use crate::config::model::{CompAlgo, CompCfg};

/// HAProxy's `tune.comp.maxlevel` default: the fastest level.
pub const DEFAULT_LEVEL: u32 = 1;

/// The settings that apply to a stream: the backend's algorithms (types) when it has some,
/// else the frontend's, as HAProxy looks them up.
pub fn pick<'a>(
    be: Option<&'a CompCfg>,
    fe: Option<&'a CompCfg>,
) -> (&'a [CompAlgo], &'a [String]) {
    let algos = [be, fe]
        .into_iter()
        .flatten()
        .map(|c| c.algos.as_slice())
        .find(|a| !a.is_empty())
        .unwrap_or_default();
    let types = [be, fe]
        .into_iter()
        .flatten()
        .map(|c| c.types.as_slice())
        .find(|t| !t.is_empty())
        .unwrap_or_default();
    (algos, types)
}

/// What a request accepts of `algos`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Choice {
    pub algo: CompAlgo,
    /// Chosen from `Accept-Encoding` (`compression offload` then removes that header), not
    /// the implicit `identity`.
    pub accepted: bool,
}

/// The algorithm for a request with `headers`: the `Accept-Encoding` element with the highest
/// q-value (the first of equals) naming one of `algos` (`*`: the first of the list), else
/// `identity` when configured. None for old `Mozilla/4` agents (bar MSIE 6 SP2 and later).
pub fn select_request(algos: &[CompAlgo], headers: &Headers) -> Option<Choice> {
    if headers.get_first("user-agent").is_some_and(broken_agent) {
        return None;
    }
    let mut best: Option<(CompAlgo, u32)> = None;
    for elem in headers.get_all("accept-encoding").flat_map(list_elements) {
        let tok_len = elem.iter().take_while(|&&b| is_tchar(b)).count();
        let (token, params) = elem.split_at(tok_len);
        let q = qvalue(params);
        if q <= best.map_or(0, |b| b.1) {
            continue;
        }
        let found = algos.iter().find(|a| {
            elem.first() == Some(&b'*') || token.eq_ignore_ascii_case(a.coding().as_bytes())
        });
        if let Some(&a) = found {
            best = Some((a, q));
        }
    }
    match best {
        Some((algo, _)) => Some(Choice {
            algo,
            accepted: true,
        }),
        None => algos.contains(&CompAlgo::Identity).then_some(Choice {
            algo: CompAlgo::Identity,
            accepted: false,
        }),
    }
}

/// HAProxy's test for agents that announce `Mozilla/4` but are not MSIE 6 SP2 or later.
fn broken_agent(ua: &[u8]) -> bool {
    if !ua.starts_with(b"Mozilla/4") {
        return false;
    }
    if ua.len() < 31 || &ua[25..30] != b"MSIE " || ua[30] < b'6' {
        return true;
    }
    ua[30] == b'6' && (ua.len() < 54 || &ua[51..54] != b"SV1")
}

/// The q-value of an element's parameters (`;q=0.5`), in thousandths; 1000 without one. As
/// HAProxy's `http_parse_qvalue`: the digits it can read, a non-digit start counting as 1.
fn qvalue(mut params: &[u8]) -> u32 {
    loop {
        params = trim_lws(params);
        let Some(rest) = params.strip_prefix(b";") else {
            return 1000;
        };
        params = trim_lws(rest);
        if let Some(v) = params.strip_prefix(b"q=") {
            return parse_q(v);
        }
        match params.iter().position(|&b| b == b';') {
            Some(i) => params = &params[i..],
            None => return 1000,
        }
    }
}

fn trim_lws(s: &[u8]) -> &[u8] {
    let n = s
        .iter()
        .take_while(|b| matches!(b, b' ' | b'\t' | b'\r' | b'\n'))
        .count();
    &s[n..]
}

fn parse_q(v: &[u8]) -> u32 {
    let digit = |i: usize| {
        v.get(i)
            .filter(|b| b.is_ascii_digit())
            .map(|b| u32::from(b - b'0'))
    };
    let Some(units) = digit(0) else { return 1000 };
    let mut q = units * 1000;
    if v.get(1) == Some(&b'.') {
        for (i, scale) in [(2, 100), (3, 10), (4, 1)] {
            match digit(i) {
                Some(d) => q += d * scale,
                None => break,
            }
        }
    }
    q.min(1000)
}

/// What [`response_allows`] needs to know of the exchange besides the response head.
#[derive(Clone, Copy, Debug)]
pub struct Exchange {
    /// The request came as HTTP/1.0 (HTTP/2 counts as 1.1).
    pub http10_request: bool,
    pub head_request: bool,
    /// The response body's framing as the server sent it.
    pub framing: BodyFraming,
}

/// Whether a response may be compressed (HAProxy's `select_compression_response_header`):
/// HTTP/1.1 both ways, not to HEAD, status 200 to 203, a body with a known length (neither
/// empty nor ended by the close), no `Content-Encoding`, no `Cache-Control: no-transform`, one
/// valid `ETag` at most, a `Content-Type` that is not multipart and matches `types` (when
/// there are some: then a response without one is not compressed).
pub fn response_allows(head: &ResponseHead, ex: Exchange, types: &[String]) -> bool {
    let h = &head.headers;
    let sized = matches!(ex.framing, BodyFraming::Chunked | BodyFraming::Length(1..));
    if ex.http10_request || head.version == Version::Http10 || ex.head_request || !sized {
        return false;
    }
    if !(200..=203).contains(&head.status) || h.contains("content-encoding") {
        return false;
    }
    let no_transform = h
        .get_all("cache-control")
        .flat_map(list_elements)
        .any(|v| v.eq_ignore_ascii_case(b"no-transform"));
    let mut etags = h.get_all("etag");
    let etag_ok = etags.next().is_none_or(valid_etag) && etags.next().is_none();
    if no_transform || !etag_ok {
        return false;
    }
    match h.get_first("content-type") {
        Some(ct) => {
            let prefix = |p: &[u8]| ct.len() >= p.len() && ct[..p.len()].eq_ignore_ascii_case(p);
            !prefix(b"multipart")
                && (types.is_empty() || types.iter().any(|t| prefix(t.as_bytes())))
        }
        None => types.is_empty(),
    }
}

/// HAProxy's `http_get_etag_type` is not `ETAG_INVALID`: `"…"` or `W/"…"`.
fn valid_etag(v: &[u8]) -> bool {
    v.len() >= 2 && v.ends_with(b"\"") && (v.starts_with(b"\"") || v.starts_with(b"W/\""))
}

/// The head of a response about to be compressed with `algo`: `Content-Encoding` (not for
/// identity), no `Content-Length`, `Transfer-Encoding: chunked` (an HTTP/2 client gets DATA
/// frames instead), a strong `ETag` made weak, `Vary: Accept-Encoding`; added last, in this
/// order, as HAProxy adds them.
pub fn set_response_head(algo: CompAlgo, head: &mut ResponseHead) {
    let h = &mut head.headers;
    if algo != CompAlgo::Identity {
        h.append("content-encoding", algo.coding());
    }
    h.remove("content-length");
    if !h.contains("transfer-encoding") {
        h.append("transfer-encoding", "chunked");
    }
    if let Some(e) = h.0.iter_mut().find(|f| f.name.eq_ignore_ascii_case("etag"))
        && e.value.first() == Some(&b'"')
    {
        e.value.make_vec().splice(0..0, *b"W/");
    }
    h.append("vary", "Accept-Encoding");
}

/// The memory one deflate state holds, as zlib allocates it for HAProxy's defaults (window
/// bits 15, memory level 8): the window and its chains (2 × 32 KiB each), the hash heads
/// (64 KiB), the pending buffer (64 KiB) and the state itself. What `maxzlibmem` bounds.
pub const DEFLATE_STATE_BYTES: u64 = 4 * 65536 + 5824;

/// The deflate states alive in the process, in bytes (HAProxy's `zlib_used_memory`).
static ZLIB_USED: AtomicU64 = AtomicU64::new(0);

/// The memory the live deflate states hold.
pub fn zlib_used() -> u64 {
    ZLIB_USED.load(Ordering::Relaxed)
}

/// Whether one more deflate state fits under `maxzlibmem` (`max` bytes, 0: no bound). A
/// response that would pass it goes uncompressed, as HAProxy's when zlib's allocation fails.
pub fn zlib_room(max: u64) -> bool {
    max == 0 || zlib_used() + DEFLATE_STATE_BYTES <= max
}

/// A streaming compressor for one response body.
pub struct Encoder {
    algo: CompAlgo,
    /// None for identity.
    z: Option<Compress>,
    /// gzip's trailer: the CRC-32 and length of the input.
    crc: Crc,
    started: bool,
}

/// gzip's fixed header (RFC 1952): deflate, no flags, no time, no extra flags, OS unknown.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

impl Encoder {
    /// `level`: 1 (fastest) to 9 (smallest), `tune.comp.maxlevel`.
    pub fn new(algo: CompAlgo, level: u32) -> Self {
        let level = Compression::new(level.clamp(1, 9));
        let z = match algo {
            CompAlgo::Identity => None,
            CompAlgo::Deflate => Some(Compress::new(level, true)),
            CompAlgo::RawDeflate | CompAlgo::Gzip => Some(Compress::new(level, false)),
        };
        if z.is_some() {
            ZLIB_USED.fetch_add(DEFLATE_STATE_BYTES, Ordering::Relaxed);
        }
        Encoder {
            algo,
            z,
            crc: Crc::new(),
            started: false,
        }
    }

    /// `identity`: the bytes pass as they are.
    pub fn identity(&self) -> bool {
        self.z.is_none()
    }

    /// Compresses `data`, appending to `out` what the compressor gives (it may keep some
    /// until [`Encoder::flush`]).
    pub fn write(&mut self, data: &[u8], out: &mut Vec<u8>) {
        if self.z.is_none() {
            out.extend_from_slice(data);
            return;
        }
        self.start(out);
        self.crc.update(data);
        if let Some(z) = &mut self.z {
            deflate(z, data, FlushCompress::None, out);
        }
    }

    /// Appends everything written so far: a sync flush (the client decodes it without waiting
    /// for more), or with `end` the stream's end.
    pub fn flush(&mut self, end: bool, out: &mut Vec<u8>) {
        self.start(out);
        let Some(z) = &mut self.z else { return };
        let mode = if end {
            FlushCompress::Finish
        } else {
            FlushCompress::Sync
        };
        deflate(z, &[], mode, out);
        if end && self.algo == CompAlgo::Gzip {
            out.extend_from_slice(&self.crc.sum().to_le_bytes());
            out.extend_from_slice(&self.crc.amount().to_le_bytes());
        }
    }

    fn start(&mut self, out: &mut Vec<u8>) {
        if !self.started && self.algo == CompAlgo::Gzip {
            out.extend_from_slice(&GZIP_HEADER);
        }
        self.started = true;
    }
}

impl Drop for Encoder {
    fn drop(&mut self) {
        if self.z.is_some() {
            ZLIB_USED.fetch_sub(DEFLATE_STATE_BYTES, Ordering::Relaxed);
        }
    }
}

/// Runs `z` over all of `input` with `flush`, until the flush is complete (room left in
/// `out` after a call) or the stream ended.
fn deflate(z: &mut Compress, mut input: &[u8], flush: FlushCompress, out: &mut Vec<u8>) {
    let finish = matches!(flush, FlushCompress::Finish);
    loop {
        if out.capacity() - out.len() < 64 {
            out.reserve(input.len() / 2 + 1024);
        }
        let (in0, out0) = (z.total_in(), z.total_out());
        let st = z.compress_vec(input, out, flush);
        let took = usize::try_from(z.total_in() - in0).unwrap_or(input.len());
        input = input.get(took..).unwrap_or_default();
        if matches!(st, Ok(Status::StreamEnd) | Err(_)) {
            return;
        }
        let room = out.len() < out.capacity();
        let stuck = took == 0 && z.total_out() == out0;
        if room && (stuck || (input.is_empty() && !finish)) {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::head::Header;
    use CompAlgo::*;
    use std::io::Read;

    fn hdrs(fields: &[(&str, &str)]) -> Headers {
        Headers(fields.iter().map(|(n, v)| Header::new(*n, *v)).collect())
    }

    fn ae(algos: &[CompAlgo], v: &str) -> Option<CompAlgo> {
        select_request(algos, &hdrs(&[("accept-encoding", v)])).map(|c| c.algo)
    }

    #[test]
    fn accept_encoding_with_q_values() {
        // `compression algo gzip deflate`: HAProxy's list is deflate, gzip.
        let both = [Deflate, Gzip];
        assert_eq!(ae(&both, "gzip"), Some(Gzip));
        assert_eq!(ae(&both, "deflate, gzip"), Some(Deflate));
        assert_eq!(ae(&both, "deflate;q=0.5, gzip"), Some(Gzip));
        assert_eq!(ae(&both, "gzip;q=0, deflate;q=0.001"), Some(Deflate));
        assert_eq!(ae(&both, "gzip;q=0"), None);
        assert_eq!(
            ae(&both, "GZIP ; level=1 ; q=0.7, deflate;q=0.6"),
            Some(Gzip)
        );
        assert_eq!(ae(&both, "x-gzip, br"), None);
        assert_eq!(ae(&both, "*"), Some(Deflate));
        assert_eq!(ae(&both, "br;q=1, *;q=0.1"), Some(Deflate));
        assert_eq!(ae(&both, "gzip;q=abc"), Some(Gzip));
        assert_eq!(ae(&[RawDeflate], "deflate"), Some(RawDeflate));
        // Several header lines, equal q: the first wins.
        let h = hdrs(&[("accept-encoding", "deflate"), ("accept-encoding", "gzip")]);
        assert_eq!(select_request(&both, &h).map(|c| c.algo), Some(Deflate));
    }

    #[test]
    fn identity_is_implicit() {
        let algos = [Gzip, Identity];
        let c = select_request(&algos, &hdrs(&[])).unwrap();
        assert_eq!((c.algo, c.accepted), (Identity, false));
        let c = select_request(&algos, &hdrs(&[("accept-encoding", "identity")])).unwrap();
        assert_eq!((c.algo, c.accepted), (Identity, true));
        assert_eq!(select_request(&[Gzip], &hdrs(&[])), None);
    }

    #[test]
    fn old_mozilla_agents_get_nothing() {
        let ua = |v: &str| hdrs(&[("user-agent", v), ("accept-encoding", "gzip")]);
        assert_eq!(select_request(&[Gzip], &ua("Mozilla/4.0 (X11)")), None);
        let msie7 = "Mozilla/4.0 (compatible; MSIE 7.0; Windows NT 5.1)";
        assert!(select_request(&[Gzip], &ua(msie7)).is_some());
        let msie6 = "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1)";
        assert_eq!(select_request(&[Gzip], &ua(msie6)), None);
        let sp2 = "Mozilla/4.0 (compatible; MSIE 6.0; Windows NT 5.1; SV1)";
        assert!(select_request(&[Gzip], &ua(sp2)).is_some());
        assert!(select_request(&[Gzip], &ua("Mozilla/5.0")).is_some());
    }

    fn resp(status: u16, fields: &[(&str, &str)]) -> ResponseHead {
        ResponseHead {
            version: Version::Http11,
            status,
            reason: "OK".into(),
            headers: hdrs(fields),
        }
    }

    const EX: Exchange = Exchange {
        http10_request: false,
        head_request: false,
        framing: BodyFraming::Length(10),
    };

    #[test]
    fn which_responses_are_compressed() {
        let ok = |h: &ResponseHead, types: &[&str]| {
            let t: Vec<String> = types.iter().map(|s| s.to_string()).collect();
            response_allows(h, EX, &t)
        };
        let html = resp(200, &[("content-type", "text/html; charset=utf-8")]);
        assert!(ok(&html, &[]));
        assert!(ok(&html, &["text/plain", "TEXT/HTML"]));
        assert!(!ok(&html, &["text/plain"]));
        assert!(!ok(&resp(200, &[]), &["text/plain"]));
        assert!(ok(&resp(200, &[]), &[]));
        assert!(!ok(&resp(200, &[("content-type", "multipart/mixed")]), &[]));
        assert!(ok(&resp(203, &[]), &[]));
        for st in [204, 206, 301, 304, 404, 500] {
            assert!(!ok(&resp(st, &[]), &[]), "{st}");
        }
        assert!(!ok(&resp(200, &[("content-encoding", "identity")]), &[]));
        assert!(!ok(
            &resp(200, &[("cache-control", "public, No-Transform")]),
            &[]
        ));
        assert!(ok(&resp(200, &[("cache-control", "no-transformx")]), &[]));
        assert!(ok(&resp(200, &[("etag", "W/\"a\"")]), &[]));
        assert!(!ok(&resp(200, &[("etag", "abc")]), &[]));
        assert!(!ok(
            &resp(200, &[("etag", "\"a\""), ("etag", "\"b\"")]),
            &[]
        ));
        let mut old = resp(200, &[]);
        old.version = Version::Http10;
        assert!(!ok(&old, &[]));
        let r = resp(200, &[]);
        for (ex, want) in [
            (
                Exchange {
                    http10_request: true,
                    ..EX
                },
                false,
            ),
            (
                Exchange {
                    head_request: true,
                    ..EX
                },
                false,
            ),
            (
                Exchange {
                    framing: BodyFraming::Length(0),
                    ..EX
                },
                false,
            ),
            (
                Exchange {
                    framing: BodyFraming::UntilClose,
                    ..EX
                },
                false,
            ),
            (
                Exchange {
                    framing: BodyFraming::Chunked,
                    ..EX
                },
                true,
            ),
        ] {
            assert_eq!(response_allows(&r, ex, &[]), want, "{ex:?}");
        }
    }

    #[test]
    fn compressed_head() {
        let mut h = resp(200, &[("content-length", "10"), ("etag", "\"v1\"")]);
        set_response_head(Gzip, &mut h);
        let got: Vec<(&str, &[u8])> = h
            .headers
            .0
            .iter()
            .map(|f| (f.name.as_str(), &f.value[..]))
            .collect();
        assert_eq!(
            got,
            [
                ("etag", &b"W/\"v1\""[..]),
                ("content-encoding", b"gzip"),
                ("transfer-encoding", b"chunked"),
                ("vary", b"Accept-Encoding"),
            ]
        );
        let mut h = resp(
            200,
            &[("transfer-encoding", "chunked"), ("etag", "W/\"x\"")],
        );
        set_response_head(Identity, &mut h);
        assert_eq!(h.headers.get_all("transfer-encoding").count(), 1);
        assert_eq!(h.headers.get_first("etag"), Some(&b"W/\"x\""[..]));
        assert!(!h.headers.contains("content-encoding"));
    }

    /// Pieces fed one by one decode, after each flush, to what was fed so far.
    fn round_trip(algo: CompAlgo, decode: fn(&[u8]) -> Vec<u8>) {
        let text: Vec<u8> = (0..200_000u32)
            .map(|i| b"abcdefgh, "[(i % 10) as usize] ^ (i / 977) as u8)
            .collect();
        let mut enc = Encoder::new(algo, DEFAULT_LEVEL);
        let mut out = Vec::new();
        let mut fed = 0;
        for piece in text.chunks(16_384) {
            fed += piece.len();
            let end = fed == text.len();
            for half in piece.chunks(5000) {
                enc.write(half, &mut out);
            }
            enc.flush(end, &mut out);
            if algo == Deflate && !end {
                // A sync flush makes everything so far decodable.
                let mut d = flate2::Decompress::new(true);
                let mut plain = Vec::with_capacity(fed + 1024);
                let _ = d.decompress_vec(&out, &mut plain, flate2::FlushDecompress::Sync);
                assert_eq!(plain, &text[..fed]);
            }
        }
        assert!(
            algo == Identity || out.len() < text.len() / 2,
            "{}",
            out.len()
        );
        assert_eq!(decode(&out), text);
    }

    #[test]
    fn encoders_round_trip() {
        fn read(mut r: impl Read) -> Vec<u8> {
            let mut v = Vec::new();
            r.read_to_end(&mut v).unwrap();
            v
        }
        round_trip(Gzip, |b| read(flate2::read::GzDecoder::new(b)));
        round_trip(Deflate, |b| read(flate2::read::ZlibDecoder::new(b)));
        round_trip(RawDeflate, |b| read(flate2::read::DeflateDecoder::new(b)));
        round_trip(Identity, |b| b.to_vec());
        // An empty body still makes a complete stream.
        let mut out = Vec::new();
        Encoder::new(Gzip, DEFAULT_LEVEL).flush(true, &mut out);
        assert_eq!(read(flate2::read::GzDecoder::new(&out[..])), b"");
    }
}
