//! A plain recursive-descent reading of the chunked body grammar portcullis accepts (RFC 9112
//! §7.1, strict: no whitespace before CRLF, no bare CR/LF, sizes below 2^52, lines and the
//! trailer section at most 16 KiB). It is written independently of the decoder's state table
//! so that the two can be compared byte for byte.

/// What the model says about a whole input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A complete body of this many bytes (anything after it belongs to the next message).
    Done(usize),
    /// A valid prefix: more bytes are needed.
    More,
    /// Invalid at some byte: no continuation can make it valid.
    Bad,
}

const MAX_SIZE: u64 = (1 << 52) - 1;
const MAX_LINE: usize = 16384;

enum Stop {
    More,
    Bad,
}

struct Cur<'a> {
    b: &'a [u8],
    at: usize,
    /// Start of the counted region (size line or trailer section) and its limit.
    region: Option<usize>,
}

impl Cur<'_> {
    fn next(&mut self) -> Result<u8, Stop> {
        if let Some(start) = self.region
            && self.at - start >= MAX_LINE
        {
            // The byte that would make the region longer than the limit, whatever it is.
            return if self.at < self.b.len() {
                Err(Stop::Bad)
            } else {
                Err(Stop::More)
            };
        }
        let c = *self.b.get(self.at).ok_or(Stop::More)?;
        self.at += 1;
        Ok(c)
    }
    fn peek(&self) -> Result<u8, Stop> {
        if let Some(start) = self.region
            && self.at - start >= MAX_LINE
        {
            return if self.at < self.b.len() {
                Err(Stop::Bad)
            } else {
                Err(Stop::More)
            };
        }
        self.b.get(self.at).copied().ok_or(Stop::More)
    }
    fn expect(&mut self, want: u8) -> Result<(), Stop> {
        if self.next()? == want {
            Ok(())
        } else {
            Err(Stop::Bad)
        }
    }
}

fn tchar(c: u8) -> bool {
    c.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&c)
}

fn ws(c: u8) -> bool {
    c == b' ' || c == b'\t'
}

fn field_byte(c: u8) -> bool {
    c == b'\t' || (b' '..=b'~').contains(&c) || c >= 0x80
}

fn qdtext(c: u8) -> bool {
    field_byte(c) && c != b'"' && c != b'\\'
}

fn skip_ws(c: &mut Cur) -> Result<(), Stop> {
    while ws(c.peek()?) {
        c.next()?;
    }
    Ok(())
}

/// After the size: `[ BWS ";" ext ]* CRLF`, where an extension that ends in a value or a name
/// may only be followed by `;`, BWS then `;`, or CR.
fn extensions(c: &mut Cur) -> Result<(), Stop> {
    loop {
        // Here: right after the size, a name, or a value.
        match c.next()? {
            b'\r' => return c.expect(b'\n'),
            b';' => {}
            x if ws(x) => {
                skip_ws(c)?;
                if c.next()? != b';' {
                    return Err(Stop::Bad);
                }
            }
            _ => return Err(Stop::Bad),
        }
        // After `;`: BWS, name, [BWS "=" BWS value].
        skip_ws(c)?;
        if !tchar(c.next()?) {
            return Err(Stop::Bad);
        }
        while tchar(c.peek()?) {
            c.next()?;
        }
        let had_ws = ws(c.peek()?);
        skip_ws(c)?;
        if c.peek()? != b'=' {
            // A name alone: after whitespace only `;` may follow (no CR), else as after a name.
            if had_ws {
                if c.next()? != b';' {
                    return Err(Stop::Bad);
                }
                // Re-enter after a `;`: push it back by re-reading as a fresh extension.
                c.at -= 1;
            }
            continue;
        }
        c.next()?;
        skip_ws(c)?;
        if c.peek()? == b'"' {
            c.next()?;
            loop {
                match c.next()? {
                    b'"' => break,
                    b'\\' => {
                        if !field_byte(c.next()?) {
                            return Err(Stop::Bad);
                        }
                    }
                    x if qdtext(x) => {}
                    _ => return Err(Stop::Bad),
                }
            }
        } else {
            if !tchar(c.next()?) {
                return Err(Stop::Bad);
            }
            while tchar(c.peek()?) {
                c.next()?;
            }
        }
    }
}

fn body(c: &mut Cur) -> Result<usize, Stop> {
    loop {
        c.region = Some(c.at);
        let mut size: u64 = 0;
        let first = c.next()?;
        size += u64::from((first as char).to_digit(16).ok_or(Stop::Bad)?);
        while let Some(d) = (c.peek()? as char).to_digit(16) {
            c.next()?;
            size = size * 16 + u64::from(d);
            if size > MAX_SIZE {
                return Err(Stop::Bad);
            }
        }
        extensions(c)?;
        c.region = None;
        if size == 0 {
            break;
        }
        let left = c.b.len() - c.at;
        if (left as u64) < size {
            return Err(Stop::More);
        }
        c.at += size as usize;
        c.expect(b'\r')?;
        c.expect(b'\n')?;
    }
    // Trailer section.
    c.region = Some(c.at);
    loop {
        let x = c.next()?;
        if x == b'\r' {
            c.expect(b'\n')?;
            return Ok(c.at);
        }
        if !tchar(x) {
            return Err(Stop::Bad);
        }
        loop {
            let y = c.next()?;
            if y == b':' {
                break;
            }
            if !tchar(y) {
                return Err(Stop::Bad);
            }
        }
        loop {
            let y = c.next()?;
            if y == b'\r' {
                break;
            }
            if !field_byte(y) {
                return Err(Stop::Bad);
            }
        }
        c.expect(b'\n')?;
    }
}

/// Judges `input` as the start of a chunked body.
pub fn judge(input: &[u8]) -> Verdict {
    let mut c = Cur {
        b: input,
        at: 0,
        region: None,
    };
    match body(&mut c) {
        Ok(n) => Verdict::Done(n),
        Err(Stop::More) => Verdict::More,
        Err(Stop::Bad) => Verdict::Bad,
    }
}
