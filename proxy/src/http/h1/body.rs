//! Incremental body delimiter and validator: never copies, never buffers.

use super::{BodyFraming, H1Error, is_field_byte, is_tchar};
use crate::http::head::{Header, Headers};

/// Largest chunk size accepted: 2^52 - 1, HAProxy's limit, so that no downstream consumer with
/// signed or floating-point lengths can be fooled.
const MAX_CHUNK_SIZE: u64 = (1 << 52) - 1;
/// Longest chunk-size line (extensions included) and largest trailer section.
const MAX_CHUNK_LINE: usize = 16384;

/// What one [`BodyDecoder::advance`] call found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BodyProgress {
    /// Bytes at the start of the input that belong to this body: forward them verbatim.
    pub consumed: usize,
    /// The body is complete; bytes after `consumed` belong to the next message.
    pub done: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChunkState {
    /// First hex digit of a chunk-size.
    Size,
    SizeMore,
    /// BWS after the size or an extension, before `;`.
    ExtPreSemi,
    /// After `;`: BWS then an extension name.
    ExtPreName,
    ExtName,
    ExtAfterName,
    /// After `=`: BWS then a token or quoted-string.
    ExtPreValue,
    ExtValueToken,
    ExtQuoted,
    ExtQuotedEscape,
    ExtAfterQuoted,
    /// LF ending the chunk-size line.
    SizeLf,
    Data,
    DataCr,
    DataLf,
    TrailerLineStart,
    TrailerName,
    TrailerValue,
    TrailerLf,
    FinalLf,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Chunked {
    state: ChunkState,
    /// The size being read, then the data left in the current chunk.
    size: u64,
    line_len: usize,
    trailer_len: usize,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Done,
    Length(u64),
    Chunked(Chunked),
    UntilClose,
    Tunnel,
}

/// Delimits and validates one message body as its bytes arrive, in pieces of any size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BodyDecoder {
    kind: Kind,
    failed: Option<H1Error>,
    /// The trailer section's bytes, kept once [`BodyDecoder::keep_trailers`] asked (an HTTP/2
    /// client gets them as a HEADERS frame); bounded by the trailer limit.
    trailers: Option<Vec<u8>>,
}

/// Where the payload lies in what one [`BodyDecoder::advance_payload`] call consumed: the
/// chunk data without its framing (the whole input for other framings).
pub type Payload = Vec<std::ops::Range<usize>>;

impl BodyDecoder {
    pub fn new(framing: BodyFraming) -> Self {
        let kind = match framing {
            BodyFraming::None | BodyFraming::Length(0) => Kind::Done,
            BodyFraming::Length(n) => Kind::Length(n),
            BodyFraming::Chunked => Kind::Chunked(Chunked {
                state: ChunkState::Size,
                size: 0,
                line_len: 0,
                trailer_len: 0,
            }),
            BodyFraming::UntilClose => Kind::UntilClose,
            BodyFraming::Tunnel => Kind::Tunnel,
        };
        BodyDecoder {
            kind,
            failed: None,
            trailers: None,
        }
    }

    /// Keeps the trailer section of a chunked body for [`BodyDecoder::take_trailers`].
    pub fn keep_trailers(&mut self) {
        self.trailers = Some(Vec::new());
    }

    /// The trailer fields kept, once the body is done (None: none, or not kept).
    pub fn take_trailers(&mut self) -> Option<Headers> {
        let raw = self.trailers.take()?;
        let fields: Vec<Header> = raw
            .split(|&b| b == b'\n')
            .filter_map(|l| {
                let l = l.strip_suffix(b"\r").unwrap_or(l);
                let colon = l.iter().position(|&b| b == b':')?;
                let name = std::str::from_utf8(l.get(..colon)?).ok()?;
                Some(Header::new(name, super::trim_ows(l.get(colon + 1..)?)))
            })
            .collect();
        (!fields.is_empty()).then_some(Headers(fields))
    }

    /// Consumes the part of `input` that belongs to this body. Once an error is returned, every
    /// later call returns it again: the connection must be closed.
    pub fn advance(&mut self, input: &[u8]) -> Result<BodyProgress, H1Error> {
        self.advance_inner(input, None)
    }

    /// [`BodyDecoder::advance`], also telling where the payload is in the bytes consumed
    /// (`payload` is cleared first).
    pub fn advance_payload(
        &mut self,
        input: &[u8],
        payload: &mut Payload,
    ) -> Result<BodyProgress, H1Error> {
        payload.clear();
        self.advance_inner(input, Some(payload))
    }

    fn advance_inner(
        &mut self,
        input: &[u8],
        payload: Option<&mut Payload>,
    ) -> Result<BodyProgress, H1Error> {
        if let Some(e) = self.failed {
            return Err(e);
        }
        let (consumed, done) = match &mut self.kind {
            Kind::Done => (0, true),
            Kind::Length(left) => {
                let take = usize::try_from(*left).map_or(input.len(), |l| l.min(input.len()));
                *left -= take as u64;
                if let Some(p) = payload.filter(|_| take > 0) {
                    p.push(0..take);
                }
                (take, *left == 0)
            }
            Kind::UntilClose | Kind::Tunnel => {
                if let Some(p) = payload.filter(|_| !input.is_empty()) {
                    p.push(0..input.len());
                }
                (input.len(), false)
            }
            Kind::Chunked(c) => match c.feed(input, payload, self.trailers.as_mut()) {
                Ok(r) => r,
                Err(e) => {
                    self.failed = Some(e);
                    return Err(e);
                }
            },
        };
        if done {
            self.kind = Kind::Done;
        }
        Ok(BodyProgress { consumed, done })
    }

    /// The peer closed its side: fine for a complete body (and it completes an until-close
    /// one), `Truncated` otherwise.
    pub fn at_eof(&mut self) -> Result<(), H1Error> {
        match self.kind {
            Kind::Done | Kind::Tunnel => Ok(()),
            Kind::UntilClose => {
                self.kind = Kind::Done;
                Ok(())
            }
            Kind::Length(_) | Kind::Chunked(_) => Err(H1Error::Truncated),
        }
    }

    pub fn is_done(&self) -> bool {
        self.kind == Kind::Done
    }
}

fn hex_value(b: u8) -> Option<u64> {
    match b {
        b'0'..=b'9' => Some(u64::from(b - b'0')),
        b'a'..=b'f' => Some(u64::from(b - b'a' + 10)),
        b'A'..=b'F' => Some(u64::from(b - b'A' + 10)),
        _ => None,
    }
}

fn is_ws(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// qdtext: HTAB, SP, VCHAR except `"` and `\`, obs-text.
fn is_qdtext(b: u8) -> bool {
    matches!(b, b'\t' | b' ' | b'!' | b'#'..=b'[' | b']'..=b'~' | 0x80..=0xff)
}

impl Chunked {
    /// Returns (bytes consumed, done); pushes the chunk data's ranges to `payload` and the
    /// trailer section's bytes to `trailers`.
    fn feed(
        &mut self,
        input: &[u8],
        mut payload: Option<&mut Payload>,
        mut trailers: Option<&mut Vec<u8>>,
    ) -> Result<(usize, bool), H1Error> {
        use ChunkState as S;
        let mut i = 0;
        while i < input.len() {
            if self.state == S::Data {
                let avail = (input.len() - i) as u64;
                let take = self.size.min(avail);
                if let Some(p) = payload.as_deref_mut().filter(|_| take > 0) {
                    p.push(i..i + take as usize);
                }
                i += take as usize;
                self.size -= take;
                if self.size == 0 {
                    self.state = S::DataCr;
                }
                continue;
            }
            let Some(&b) = input.get(i) else { break };
            i += 1;
            self.count(b)?;
            if let Some(t) = trailers.as_deref_mut()
                && matches!(
                    self.state,
                    S::TrailerLineStart | S::TrailerName | S::TrailerValue | S::TrailerLf
                )
            {
                t.push(b);
            }
            self.state = match (self.state, b) {
                (S::Size, _) => {
                    self.size = hex_value(b).ok_or(H1Error::BadChunkSize)?;
                    S::SizeMore
                }
                (S::SizeMore, _) if hex_value(b).is_some() => {
                    let d = hex_value(b).unwrap_or_default();
                    self.size = self.size * 16 + d;
                    if self.size > MAX_CHUNK_SIZE {
                        return Err(H1Error::BadChunkSize);
                    }
                    S::SizeMore
                }
                (S::SizeMore, b'\r') => S::SizeLf,
                (S::SizeMore, b';') => S::ExtPreName,
                (S::SizeMore, b) if is_ws(b) => S::ExtPreSemi,
                (S::SizeMore, b'\n') => return Err(H1Error::BareLf),
                (S::SizeMore, _) => return Err(H1Error::BadChunkSize),

                (S::ExtPreSemi, b) if is_ws(b) => S::ExtPreSemi,
                (S::ExtPreSemi, b';') => S::ExtPreName,
                (S::ExtPreName, b) if is_ws(b) => S::ExtPreName,
                (S::ExtPreName, b) if is_tchar(b) => S::ExtName,
                (S::ExtName, b) if is_tchar(b) => S::ExtName,
                (S::ExtName, b) if is_ws(b) => S::ExtAfterName,
                (S::ExtName | S::ExtAfterName, b'=') => S::ExtPreValue,
                (S::ExtName | S::ExtAfterName, b';') => S::ExtPreName,
                (S::ExtName, b'\r') => S::SizeLf,
                (S::ExtAfterName, b) if is_ws(b) => S::ExtAfterName,
                (S::ExtPreValue, b) if is_ws(b) => S::ExtPreValue,
                (S::ExtPreValue, b'"') => S::ExtQuoted,
                (S::ExtPreValue, b) if is_tchar(b) => S::ExtValueToken,
                (S::ExtValueToken, b) if is_tchar(b) => S::ExtValueToken,
                (S::ExtQuoted, b'"') => S::ExtAfterQuoted,
                (S::ExtQuoted, b'\\') => S::ExtQuotedEscape,
                (S::ExtQuoted, b) if is_qdtext(b) => S::ExtQuoted,
                (S::ExtQuotedEscape, b) if is_field_byte(b) => S::ExtQuoted,
                (S::ExtValueToken | S::ExtAfterQuoted, b) if is_ws(b) => S::ExtPreSemi,
                (S::ExtValueToken | S::ExtAfterQuoted, b';') => S::ExtPreName,
                (S::ExtValueToken | S::ExtAfterQuoted, b'\r') => S::SizeLf,
                (
                    S::ExtPreSemi
                    | S::ExtPreName
                    | S::ExtName
                    | S::ExtAfterName
                    | S::ExtPreValue
                    | S::ExtValueToken
                    | S::ExtQuoted
                    | S::ExtQuotedEscape
                    | S::ExtAfterQuoted,
                    b'\n',
                ) => return Err(H1Error::BareLf),
                (
                    S::ExtPreSemi
                    | S::ExtPreName
                    | S::ExtName
                    | S::ExtAfterName
                    | S::ExtPreValue
                    | S::ExtValueToken
                    | S::ExtQuoted
                    | S::ExtQuotedEscape
                    | S::ExtAfterQuoted,
                    _,
                ) => return Err(H1Error::BadChunkExtension),

                (S::SizeLf, b'\n') => {
                    self.line_len = 0;
                    if self.size == 0 {
                        S::TrailerLineStart
                    } else {
                        S::Data
                    }
                }
                (S::SizeLf, _) => return Err(H1Error::BareCr),
                (S::Data, _) => S::Data,
                (S::DataCr, b'\r') => S::DataLf,
                (S::DataCr, _) => return Err(H1Error::BadChunkEnd),
                (S::DataLf, b'\n') => S::Size,
                (S::DataLf, _) => return Err(H1Error::BadChunkEnd),

                (S::TrailerLineStart, b'\r') => S::FinalLf,
                (S::TrailerLineStart | S::TrailerName, b) if is_tchar(b) => S::TrailerName,
                (S::TrailerName, b':') => S::TrailerValue,
                (S::TrailerLineStart | S::TrailerName, _) => return Err(H1Error::BadTrailer),
                (S::TrailerValue, b'\r') => S::TrailerLf,
                (S::TrailerValue, b) if is_field_byte(b) => S::TrailerValue,
                (S::TrailerValue, _) => return Err(H1Error::BadTrailer),
                (S::TrailerLf, b'\n') => S::TrailerLineStart,
                (S::TrailerLf, _) => return Err(H1Error::BareCr),
                (S::FinalLf, b'\n') => return Ok((i, true)),
                (S::FinalLf, _) => return Err(H1Error::BadTrailer),
            };
        }
        Ok((i, false))
    }

    /// Bounds the chunk-size line and the trailer section: neither is buffered, but an endless
    /// one would pin the connection.
    fn count(&mut self, _b: u8) -> Result<(), H1Error> {
        use ChunkState as S;
        let counter = match self.state {
            S::Data | S::DataCr | S::DataLf => return Ok(()),
            S::TrailerLineStart | S::TrailerName | S::TrailerValue | S::TrailerLf | S::FinalLf => {
                &mut self.trailer_len
            }
            _ => &mut self.line_len,
        };
        *counter += 1;
        if *counter > MAX_CHUNK_LINE {
            return Err(H1Error::ChunkLineTooLong);
        }
        Ok(())
    }
}
