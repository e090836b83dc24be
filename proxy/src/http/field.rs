//! Header field names and values that hold short contents inline: most fields of a head
//! (`Host`, `Content-Length`, `Date`, `Connection`…) fit in 30 bytes, so parsing a head does not
//! allocate once per field. Longer contents, and contents handed over as a `Vec`/`String`, live
//! on the heap. A value reads as a `[u8]` and a name as a `str` (Deref), which is how every rule,
//! sample fetch and writer uses them; the length is stored, so reading one costs one branch.

use std::borrow::Cow;
use std::fmt;
use std::ops::Deref;

/// Inline capacity: with the length byte and the variant's tag, each type is 32 bytes.
const INLINE: usize = 30;

#[derive(Clone)]
enum Repr {
    Inline { len: u8, buf: [u8; INLINE] },
    Heap(Vec<u8>),
}

impl Repr {
    const EMPTY: Repr = Repr::Inline {
        len: 0,
        buf: [0; INLINE],
    };

    fn copy_from(b: &[u8]) -> Repr {
        if b.len() <= INLINE {
            let mut buf = [0; INLINE];
            buf[..b.len()].copy_from_slice(b);
            Repr::Inline {
                len: b.len() as u8,
                buf,
            }
        } else {
            Repr::Heap(b.to_vec())
        }
    }

    fn as_slice(&self) -> &[u8] {
        match self {
            Repr::Inline { len, buf } => &buf[..usize::from(*len)],
            Repr::Heap(v) => v,
        }
    }

    fn as_mut_slice(&mut self) -> &mut [u8] {
        match self {
            Repr::Inline { len, buf } => &mut buf[..usize::from(*len)],
            Repr::Heap(v) => v,
        }
    }

    fn into_vec(self) -> Vec<u8> {
        match self {
            Repr::Inline { .. } => self.as_slice().to_vec(),
            Repr::Heap(v) => v,
        }
    }
}

/// The bytes of one field value (obs-text allowed, hence bytes and not `str`).
#[derive(Clone)]
pub struct FieldValue(Repr);

impl FieldValue {
    pub const fn new() -> Self {
        FieldValue(Repr::EMPTY)
    }

    /// A copy of `b`, inline when it fits.
    pub fn copy_from(b: &[u8]) -> Self {
        FieldValue(Repr::copy_from(b))
    }

    pub fn as_slice(&self) -> &[u8] {
        self.0.as_slice()
    }

    /// The bytes as a `Vec`, without a copy when they are already on the heap.
    pub fn into_vec(self) -> Vec<u8> {
        self.0.into_vec()
    }

    /// Mutable access as a `Vec` (moves an inline value to the heap: rewrites are rare).
    pub fn make_vec(&mut self) -> &mut Vec<u8> {
        if let Repr::Inline { .. } = self.0 {
            self.0 = Repr::Heap(self.as_slice().to_vec());
        }
        match &mut self.0 {
            Repr::Heap(v) => v,
            Repr::Inline { .. } => unreachable!("made a heap value just above"),
        }
    }
}

impl Default for FieldValue {
    fn default() -> Self {
        FieldValue::new()
    }
}

impl Deref for FieldValue {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl AsRef<[u8]> for FieldValue {
    fn as_ref(&self) -> &[u8] {
        self.as_slice()
    }
}

impl std::borrow::Borrow<[u8]> for FieldValue {
    fn borrow(&self) -> &[u8] {
        self.as_slice()
    }
}

impl fmt::Debug for FieldValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_slice(), f)
    }
}

impl PartialEq for FieldValue {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for FieldValue {}

impl std::hash::Hash for FieldValue {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state)
    }
}

impl PartialEq<[u8]> for FieldValue {
    fn eq(&self, other: &[u8]) -> bool {
        self.as_slice() == other
    }
}

impl PartialEq<&[u8]> for FieldValue {
    fn eq(&self, other: &&[u8]) -> bool {
        self.as_slice() == *other
    }
}

impl<const N: usize> PartialEq<[u8; N]> for FieldValue {
    fn eq(&self, other: &[u8; N]) -> bool {
        self.as_slice() == other
    }
}

impl<const N: usize> PartialEq<&[u8; N]> for FieldValue {
    fn eq(&self, other: &&[u8; N]) -> bool {
        self.as_slice() == *other
    }
}

impl PartialEq<Vec<u8>> for FieldValue {
    fn eq(&self, other: &Vec<u8>) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl From<Vec<u8>> for FieldValue {
    fn from(v: Vec<u8>) -> Self {
        FieldValue(Repr::Heap(v))
    }
}

impl From<String> for FieldValue {
    fn from(s: String) -> Self {
        FieldValue(Repr::Heap(s.into_bytes()))
    }
}

impl From<&[u8]> for FieldValue {
    fn from(b: &[u8]) -> Self {
        FieldValue::copy_from(b)
    }
}

impl<const N: usize> From<&[u8; N]> for FieldValue {
    fn from(b: &[u8; N]) -> Self {
        FieldValue::copy_from(b)
    }
}

impl From<&str> for FieldValue {
    fn from(s: &str) -> Self {
        FieldValue::copy_from(s.as_bytes())
    }
}

impl From<&String> for FieldValue {
    fn from(s: &String) -> Self {
        FieldValue::copy_from(s.as_bytes())
    }
}

impl From<&Vec<u8>> for FieldValue {
    fn from(v: &Vec<u8>) -> Self {
        FieldValue::copy_from(v)
    }
}

impl From<Cow<'_, [u8]>> for FieldValue {
    fn from(c: Cow<'_, [u8]>) -> Self {
        match c {
            Cow::Borrowed(b) => FieldValue::copy_from(b),
            Cow::Owned(v) => v.into(),
        }
    }
}

impl From<Cow<'_, str>> for FieldValue {
    fn from(c: Cow<'_, str>) -> Self {
        match c {
            Cow::Borrowed(s) => FieldValue::copy_from(s.as_bytes()),
            Cow::Owned(s) => s.into(),
        }
    }
}

impl From<FieldValue> for Vec<u8> {
    fn from(v: FieldValue) -> Vec<u8> {
        v.into_vec()
    }
}

/// A field name: UTF-8 text (a validated token when it came from a parser).
#[derive(Clone)]
pub struct FieldName(Repr);

impl FieldName {
    pub const fn new() -> Self {
        FieldName(Repr::EMPTY)
    }

    /// Bytes known to be ASCII (a token the parser checked), without UTF-8 validation: `None`
    /// when one is not.
    pub fn from_ascii(b: &[u8]) -> Option<Self> {
        b.is_ascii().then(|| FieldName(Repr::copy_from(b)))
    }

    pub fn as_str(&self) -> &str {
        // SAFETY: every constructor takes a `str`, a `String` or bytes checked to be ASCII, and
        // the bytes are never handed out mutably: they are valid UTF-8.
        unsafe { std::str::from_utf8_unchecked(self.0.as_slice()) }
    }

    /// Lowercases the ASCII letters in place (the text stays UTF-8: only ASCII bytes change).
    pub fn make_ascii_lowercase(&mut self) {
        self.0.as_mut_slice().make_ascii_lowercase()
    }
}

impl Default for FieldName {
    fn default() -> Self {
        FieldName::new()
    }
}

impl Deref for FieldName {
    type Target = str;
    fn deref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<str> for FieldName {
    fn as_ref(&self) -> &str {
        self.as_str()
    }
}

impl AsRef<[u8]> for FieldName {
    fn as_ref(&self) -> &[u8] {
        self.0.as_slice()
    }
}

impl std::borrow::Borrow<str> for FieldName {
    fn borrow(&self) -> &str {
        self.as_str()
    }
}

impl fmt::Debug for FieldName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for FieldName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq for FieldName {
    fn eq(&self, other: &Self) -> bool {
        self.as_str() == other.as_str()
    }
}

impl Eq for FieldName {}

impl std::hash::Hash for FieldName {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.as_str().hash(state)
    }
}

impl PartialEq<str> for FieldName {
    fn eq(&self, other: &str) -> bool {
        self.as_str() == other
    }
}

impl PartialEq<&str> for FieldName {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

impl PartialEq<String> for FieldName {
    fn eq(&self, other: &String) -> bool {
        self.as_str() == other.as_str()
    }
}

impl From<&str> for FieldName {
    fn from(s: &str) -> Self {
        FieldName(Repr::copy_from(s.as_bytes()))
    }
}

impl From<&String> for FieldName {
    fn from(s: &String) -> Self {
        FieldName(Repr::copy_from(s.as_bytes()))
    }
}

impl From<String> for FieldName {
    fn from(s: String) -> Self {
        FieldName(Repr::Heap(s.into_bytes()))
    }
}

impl From<Cow<'_, str>> for FieldName {
    fn from(c: Cow<'_, str>) -> Self {
        match c {
            Cow::Borrowed(s) => s.into(),
            Cow::Owned(s) => s.into(),
        }
    }
}

impl From<FieldName> for String {
    fn from(n: FieldName) -> String {
        match n.0 {
            Repr::Inline { .. } => n.as_str().to_owned(),
            // Bytes that came from a `String` or a `str`.
            Repr::Heap(v) => String::from_utf8(v).unwrap_or_default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inline_up_to_capacity_then_heap() {
        assert_eq!(std::mem::size_of::<FieldValue>(), 32);
        let short = FieldValue::from("Sun, 06 Dec 2026 19:28:55 GMT");
        assert!(matches!(short.0, Repr::Inline { len: 29, .. }));
        assert_eq!(&*short, b"Sun, 06 Dec 2026 19:28:55 GMT");
        let long = FieldValue::from(&[b'x'; INLINE + 1][..]);
        assert!(matches!(long.0, Repr::Heap(_)));
        assert_eq!(long.len(), INLINE + 1);
        let exact = FieldValue::copy_from(&[b'y'; INLINE]);
        assert!(matches!(exact.0, Repr::Inline { .. }));
        assert_eq!(exact, [b'y'; INLINE]);
    }

    #[test]
    fn equal_whatever_the_storage() {
        let inline = FieldValue::from("abc");
        let heap = FieldValue::from(b"abc".to_vec());
        assert_eq!(inline, heap);
        assert_eq!(inline.clone().into_vec(), b"abc");
        let mut v = inline;
        v.make_vec().extend_from_slice(b"def");
        assert_eq!(v, b"abcdef");
        assert_eq!(FieldValue::default().len(), 0);
    }

    #[test]
    fn names_read_as_text() {
        assert_eq!(std::mem::size_of::<FieldName>(), 32);
        let n = FieldName::from("Content-Length");
        assert!(n.eq_ignore_ascii_case("content-length"));
        assert_eq!(String::from(n.clone()), "Content-Length");
        assert_eq!(n, FieldName::from("Content-Length".to_string()));
        assert_eq!(
            FieldName::from_ascii(b"X-Forwarded-For").as_deref(),
            Some("X-Forwarded-For")
        );
        assert!(FieldName::from_ascii("é".as_bytes()).is_none());
        let mut m = FieldName::from("X-Été");
        m.make_ascii_lowercase();
        assert_eq!(m, "x-Été");
        let long = "x".repeat(INLINE + 5);
        assert_eq!(FieldName::from(long.as_str()).as_str(), long);
    }
}
