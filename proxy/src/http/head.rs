//! HTTP message heads shared by the codec, the rules, sample fetches and logs.

/// HTTP version of a message on an HTTP/1 connection (HTTP/2 requests are mapped onto these).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    Http10,
    Http11,
    /// A request that arrived over HTTP/2, forwarded as HTTP/1.1; logs show `HTTP/2.0`.
    Http2,
}

impl Version {
    pub fn as_str(self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
            Version::Http2 => "HTTP/2.0",
        }
    }
}

pub use super::field::{FieldName, FieldValue};

/// One header field. Names are kept as received (validated tokens); values may hold obs-text
/// bytes, so they are raw bytes without leading/trailing whitespace. Both are stored inline
/// when short (up to 30 bytes each): no allocation per field for most heads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    pub name: FieldName,
    pub value: FieldValue,
}

impl Header {
    pub fn new(name: impl Into<FieldName>, value: impl Into<FieldValue>) -> Self {
        Header {
            name: name.into(),
            value: value.into(),
        }
    }
    /// The value as text, lossily (obs-text bytes become U+FFFD).
    pub fn value_str(&self) -> std::borrow::Cow<'_, str> {
        String::from_utf8_lossy(&self.value)
    }
}

/// Header list with HAProxy's case-insensitive lookups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Headers(pub Vec<Header>);

impl Headers {
    /// All values of `name`; comma-separated lists are *not* split here.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> + 'a {
        self.0
            .iter()
            .filter(move |h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.as_slice())
    }
    /// Last occurrence, as `req.hdr(name)` returns by default (HAProxy: occurrence -1).
    pub fn get_last<'a>(&'a self, name: &'a str) -> Option<&'a [u8]> {
        self.get_all(name).last()
    }
    pub fn get_first<'a>(&'a self, name: &'a str) -> Option<&'a [u8]> {
        self.get_all(name).next()
    }
    pub fn contains(&self, name: &str) -> bool {
        self.get_all(name).next().is_some()
    }
    pub fn remove(&mut self, name: &str) {
        self.0.retain(|h| !h.name.eq_ignore_ascii_case(name));
    }
    pub fn append(&mut self, name: impl Into<FieldName>, value: impl Into<FieldValue>) {
        self.0.push(Header::new(name, value));
    }
    /// `set-header`: remove every occurrence then append one.
    pub fn set(&mut self, name: &str, value: impl Into<FieldValue>) {
        self.remove(name);
        self.append(name, value);
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestHead {
    pub method: String,
    /// The request-target exactly as received (origin-form, absolute-form, authority-form or `*`).
    pub target: String,
    pub version: Version,
    pub headers: Headers,
}

impl RequestHead {
    /// `path` sample fetch: the target without query string; for absolute-form, the path part.
    pub fn path(&self) -> &str {
        let t = self.target.as_str();
        let t = match t.find("://") {
            Some(i) => match t[i + 3..].find('/') {
                Some(j) => &t[i + 3 + j..],
                None => "/",
            },
            None => t,
        };
        match t.find('?') {
            Some(q) => &t[..q],
            None => t,
        }
    }
    /// The query string without `?`, if any.
    pub fn query(&self) -> Option<&str> {
        self.target.find('?').map(|q| &self.target[q + 1..])
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResponseHead {
    pub version: Version,
    pub status: u16,
    pub reason: String,
    pub headers: Headers,
}

/// The connection-specific fields of an HTTP/1 message, which HTTP/2 forbids (RFC 9113
/// §8.2.2): HAProxy's H2 mux leaves them out of what it sends (`te` other than `trailers`,
/// and `host` beside `:authority`, are each caller's own rule).
pub fn h2_forbidden(name: &str) -> bool {
    [
        "connection",
        "keep-alive",
        "proxy-connection",
        "transfer-encoding",
        "upgrade",
    ]
    .iter()
    .any(|n| name.eq_ignore_ascii_case(n))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(target: &str) -> RequestHead {
        RequestHead {
            method: "GET".into(),
            target: target.into(),
            version: Version::Http11,
            headers: Headers::default(),
        }
    }

    #[test]
    fn path_and_query() {
        assert_eq!(req("/a/b?x=1").path(), "/a/b");
        assert_eq!(req("/a/b?x=1").query(), Some("x=1"));
        assert_eq!(req("http://h/x/y?z").path(), "/x/y");
        assert_eq!(req("http://h").path(), "/");
    }

    #[test]
    fn header_set_replaces_all() {
        let mut h = Headers::default();
        h.append("X-A", "1");
        h.append("x-a", "2");
        h.set("X-A", "3");
        assert_eq!(h.get_all("x-a").count(), 1);
        assert_eq!(h.get_last("X-a"), Some(&b"3"[..]));
    }
}
