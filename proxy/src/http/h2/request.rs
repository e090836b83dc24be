//! A request's header block checked as RFC 9113 §8.2–8.3 requires of a server: what makes it
//! malformed (reset with PROTOCOL_ERROR, as HAProxy 2.6 does) is refused here; what is only
//! a bad HTTP request (a method that is not a token, a scheme with odd characters) is passed
//! on, for the transaction to answer 400 as HAProxy's does.

use crate::http::field::{FieldName, FieldValue};
use crate::http::head::Header;

/// A request as its HEADERS carried it: the pseudo-header fields apart, the regular fields in
/// order (lowercase names, checked tokens), each value inline when short (no allocation per
/// field: the request head is then built by moving them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RequestFields {
    pub method: FieldValue,
    pub scheme: Option<FieldValue>,
    pub authority: Option<FieldValue>,
    pub path: Option<FieldValue>,
    /// RFC 8441's `:protocol` (an extended CONNECT).
    pub protocol: Option<FieldValue>,
    pub fields: Vec<Header>,
    /// The stream ended with the HEADERS frame (no body).
    pub end_stream: bool,
    /// The `content-length` value, if one was given.
    pub length: Option<u64>,
}

/// Why a block is malformed (for tracing; the peer only sees PROTOCOL_ERROR).
pub type Malformed = &'static str;

/// Collects a block's fields one by one, as the HPACK decoder hands them out.
#[derive(Default)]
pub struct Collect {
    req: RequestFields,
    method: bool,
    regular_seen: bool,
    /// The first reason the block is malformed.
    pub bad: Option<Malformed>,
    /// The decoded size as SETTINGS_MAX_HEADER_LIST_SIZE counts it.
    pub size: usize,
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

impl Collect {
    fn fail(&mut self, why: Malformed) {
        self.bad.get_or_insert(why);
    }

    /// One field of the block; `trailers`: the block is a trailer section (no pseudo-header).
    pub fn field(&mut self, name: &[u8], value: &[u8], trailers: bool) {
        self.size += name.len() + value.len() + 32;
        if self.bad.is_some() {
            return;
        }
        if value.iter().any(|&b| matches!(b, 0 | b'\r' | b'\n')) {
            return self.fail("forbidden byte in a field value");
        }
        if let Some(pseudo) = name.strip_prefix(b":") {
            if trailers || self.regular_seen {
                return self.fail("pseudo-header after regular fields");
            }
            let slot = match pseudo {
                b"method" if !self.method => {
                    self.method = true;
                    self.req.method = FieldValue::copy_from(value);
                    return;
                }
                b"scheme" => &mut self.req.scheme,
                b"authority" => &mut self.req.authority,
                b"path" => &mut self.req.path,
                b"protocol" => &mut self.req.protocol,
                _ => return self.fail("unknown or repeated pseudo-header"),
            };
            if slot.is_some() {
                return self.fail("repeated pseudo-header");
            }
            *slot = Some(FieldValue::copy_from(value));
            return;
        }
        self.regular_seen = true;
        if name.is_empty() || !name.iter().all(|&b| is_tchar(b) && !b.is_ascii_uppercase()) {
            return self.fail("field name not a lowercase token");
        }
        match name {
            b"connection" | b"keep-alive" | b"proxy-connection" | b"transfer-encoding"
            | b"upgrade" => return self.fail("connection-specific field"),
            b"te" if value != b"trailers" => return self.fail("te other than trailers"),
            b"content-length" if !trailers => {
                let n = std::str::from_utf8(value)
                    .ok()
                    .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                    .and_then(|s| s.parse::<u64>().ok());
                match (n, self.req.length) {
                    (None, _) => return self.fail("bad content-length"),
                    (Some(a), Some(b)) if a != b => return self.fail("conflicting content-length"),
                    (Some(a), _) => self.req.length = Some(a),
                }
            }
            _ => {}
        }
        // Names were checked to be ASCII tokens.
        let Some(name) = FieldName::from_ascii(name) else {
            return self.fail("field name not a lowercase token");
        };
        self.req.fields.push(Header {
            name,
            value: FieldValue::copy_from(value),
        });
    }

    /// The request, once the whole block was seen; `connect_protocol`: RFC 8441 is enabled.
    pub fn request(
        self,
        end_stream: bool,
        connect_protocol: bool,
    ) -> Result<RequestFields, Malformed> {
        if let Some(why) = self.bad {
            return Err(why);
        }
        let mut req = self.req;
        req.end_stream = end_stream;
        if !self.method {
            return Err("no :method");
        }
        let connect = req.method == b"CONNECT";
        if req.protocol.is_some() && (!connect || !connect_protocol) {
            return Err(":protocol outside an extended CONNECT");
        }
        if connect && req.protocol.is_none() {
            // RFC 9113 §8.5: only :method and :authority.
            if req.scheme.is_some() || req.path.is_some() || req.authority.is_none() {
                return Err("malformed CONNECT");
            }
            return Ok(req);
        }
        if req.scheme.is_none() {
            return Err("no :scheme");
        }
        match req.path.as_deref() {
            None | Some(b"") => return Err("no :path"),
            Some(b"*") if req.method == b"OPTIONS" => {}
            Some(p) if p.first() == Some(&b'/') => {}
            // HAProxy 2.6 resets a stream whose path is neither absolute nor `*`.
            Some(_) => return Err(":path not absolute"),
        }
        Ok(req)
    }
}

/// A trailer section's fields (no pseudo-header allowed).
pub fn trailers(c: Collect) -> Result<Vec<Header>, Malformed> {
    match c.bad {
        Some(why) => Err(why),
        None => Ok(c.req.fields),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn collect(fields: &[(&str, &str)]) -> Collect {
        let mut c = Collect::default();
        for (n, v) in fields {
            c.field(n.as_bytes(), v.as_bytes(), false);
        }
        c
    }

    fn req(fields: &[(&str, &str)]) -> Result<RequestFields, Malformed> {
        collect(fields).request(true, true)
    }

    const GET: [(&str, &str); 3] = [(":method", "GET"), (":scheme", "https"), (":path", "/")];

    #[test]
    fn a_plain_request_passes() {
        let mut f = GET.to_vec();
        f.push((":authority", "a.example"));
        f.push(("content-length", "12"));
        f.push(("te", "trailers"));
        let r = req(&f).expect("valid");
        assert_eq!(r.method, b"GET");
        assert_eq!(r.authority.as_deref(), Some(&b"a.example"[..]));
        assert_eq!(r.length, Some(12));
        assert_eq!(r.fields.len(), 2);
    }

    #[test]
    fn malformed_blocks_are_refused() {
        let cases: Vec<Vec<(&str, &str)>> = vec![
            vec![
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "hello-world"),
            ],
            vec![(":method", "GET"), (":scheme", "http")],
            vec![(":method", "GET"), (":path", "/")],
            vec![(":scheme", "http"), (":path", "/")],
            vec![
                (":method", "GET"),
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
            ],
            [&GET[..], &[("Upper", "x")]].concat(),
            [&GET[..], &[("connection", "close")]].concat(),
            [&GET[..], &[("te", "gzip")]].concat(),
            [&GET[..], &[("x", "a\nb")]].concat(),
            [
                &GET[..],
                &[("content-length", "1"), ("content-length", "2")],
            ]
            .concat(),
            [&GET[..], &[("content-length", "x")]].concat(),
            vec![
                (":method", "GET"),
                ("x", "1"),
                (":scheme", "http"),
                (":path", "/"),
            ],
            vec![
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":foo", "1"),
            ],
            vec![
                (":method", "CONNECT"),
                (":authority", "h:1"),
                (":path", "/"),
            ],
            vec![
                (":method", "GET"),
                (":scheme", "http"),
                (":path", "/"),
                (":protocol", "ws"),
            ],
            vec![(":method", "GET"), (":scheme", "http"), (":path", "*")],
        ];
        for (i, c) in cases.iter().enumerate() {
            assert!(req(c).is_err(), "case {i}: {c:?}");
        }
    }

    #[test]
    fn odd_values_are_left_to_the_transaction() {
        // HAProxy answers these 400 (h2_desync_attacks.vtc), not with a reset.
        let scheme = [
            (":method", "GET"),
            (":scheme", "http://localhost/?"),
            (":path", "/"),
        ];
        assert!(req(&scheme).is_ok());
        let method = [(":method", "GET?"), (":scheme", "http"), (":path", "/")];
        assert!(req(&method).is_ok());
        let connect = [(":method", "CONNECT"), (":authority", "h:443")];
        assert!(req(&connect).is_ok());
        let ext = [
            (":method", "CONNECT"),
            (":protocol", "websocket"),
            (":scheme", "http"),
            (":path", "/chat"),
            (":authority", "h"),
        ];
        assert!(req(&ext).is_ok());
        assert!(collect(&ext).request(true, false).is_err());
        let opts = [(":method", "OPTIONS"), (":scheme", "http"), (":path", "*")];
        assert!(req(&opts).is_ok());
    }

    #[test]
    fn trailers_carry_no_pseudo_header() {
        let mut c = Collect::default();
        c.field(b"grpc-status", b"0", true);
        assert_eq!(trailers(c).map(|f| f.len()), Ok(1));
        let mut c = Collect::default();
        c.field(b":status", b"200", true);
        assert!(trailers(c).is_err());
    }
}
