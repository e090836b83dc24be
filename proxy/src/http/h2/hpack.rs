//! HPACK (RFC 7541) for the frames a server sends. Decoding, with its Huffman code and dynamic
//! table, is `loona-hpack`'s; encoding is done here the way HAProxy's encoder does it: names
//! from the static table where they are in it, everything else literal and never indexed, so
//! the client's dynamic table is left alone (no table-size bookkeeping with its SETTINGS).

/// The static table's names (RFC 7541 Appendix A), index 1 first: what `static_name` answers.
#[cfg(test)]
const STATIC_NAMES: [&str; 61] = [
    ":authority",
    ":method",
    ":method",
    ":path",
    ":path",
    ":scheme",
    ":scheme",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    ":status",
    "accept-charset",
    "accept-encoding",
    "accept-language",
    "accept-ranges",
    "accept",
    "access-control-allow-origin",
    "age",
    "allow",
    "authorization",
    "cache-control",
    "content-disposition",
    "content-encoding",
    "content-language",
    "content-length",
    "content-location",
    "content-range",
    "content-type",
    "cookie",
    "date",
    "etag",
    "expect",
    "expires",
    "from",
    "host",
    "if-match",
    "if-modified-since",
    "if-none-match",
    "if-range",
    "if-unmodified-since",
    "last-modified",
    "link",
    "location",
    "max-forwards",
    "proxy-authenticate",
    "proxy-authorization",
    "range",
    "referer",
    "refresh",
    "retry-after",
    "server",
    "set-cookie",
    "strict-transport-security",
    "transfer-encoding",
    "user-agent",
    "vary",
    "via",
    "www-authenticate",
];

/// `:status` values with an entry of their own (indices 8 to 14).
const STATIC_STATUS: [u16; 7] = [200, 204, 206, 304, 400, 404, 500];

/// An integer with an `n`-bit prefix whose high bits are `first` (RFC 7541 §5.1).
#[inline]
fn put_int(out: &mut Vec<u8>, first: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128) as u8 | 0x80);
        v /= 128;
    }
    out.push(v as u8);
}

fn put_str(out: &mut Vec<u8>, s: &[u8]) {
    put_int(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

/// The static index of `name` (lowercase), if it has one: by length first, then by name, so
/// a field costs a few comparisons rather than a walk of the whole table.
fn static_name(name: &[u8]) -> Option<usize> {
    let i = match name.len() {
        3 => match name {
            b"age" => 21,
            b"via" => 60,
            _ => return None,
        },
        4 => match name {
            b"date" => 33,
            b"etag" => 34,
            b"from" => 37,
            b"host" => 38,
            b"link" => 45,
            b"vary" => 59,
            _ => return None,
        },
        5 => match name {
            b":path" => 4,
            b"allow" => 22,
            b"range" => 50,
            _ => return None,
        },
        6 => match name {
            b"accept" => 19,
            b"cookie" => 32,
            b"expect" => 35,
            b"server" => 54,
            _ => return None,
        },
        7 => match name {
            b":method" => 2,
            b":scheme" => 6,
            b":status" => 8,
            b"expires" => 36,
            b"referer" => 51,
            b"refresh" => 52,
            _ => return None,
        },
        8 => match name {
            b"if-match" => 39,
            b"if-range" => 42,
            b"location" => 46,
            _ => return None,
        },
        10 => match name {
            b":authority" => 1,
            b"set-cookie" => 55,
            b"user-agent" => 58,
            _ => return None,
        },
        11 => match name {
            b"retry-after" => 53,
            _ => return None,
        },
        12 => match name {
            b"content-type" => 31,
            b"max-forwards" => 47,
            _ => return None,
        },
        13 => match name {
            b"accept-ranges" => 18,
            b"authorization" => 23,
            b"cache-control" => 24,
            b"content-range" => 30,
            b"if-none-match" => 41,
            b"last-modified" => 44,
            _ => return None,
        },
        14 => match name {
            b"accept-charset" => 15,
            b"content-length" => 28,
            _ => return None,
        },
        15 => match name {
            b"accept-encoding" => 16,
            b"accept-language" => 17,
            _ => return None,
        },
        16 => match name {
            b"content-encoding" => 26,
            b"content-language" => 27,
            b"content-location" => 29,
            b"www-authenticate" => 61,
            _ => return None,
        },
        17 => match name {
            b"if-modified-since" => 40,
            b"transfer-encoding" => 57,
            _ => return None,
        },
        18 => match name {
            b"proxy-authenticate" => 48,
            _ => return None,
        },
        19 => match name {
            b"content-disposition" => 25,
            b"if-unmodified-since" => 43,
            b"proxy-authorization" => 49,
            _ => return None,
        },
        25 => match name {
            b"strict-transport-security" => 56,
            _ => return None,
        },
        27 => match name {
            b"access-control-allow-origin" => 20,
            _ => return None,
        },
        _ => return None,
    };
    Some(i)
}

/// Appends a `:status` field.
pub fn put_status(out: &mut Vec<u8>, status: u16) {
    match STATIC_STATUS.iter().position(|s| *s == status) {
        Some(i) => put_int(out, 0x80, 7, 8 + i),
        None => {
            put_int(out, 0x00, 4, 8);
            put_str(out, status.to_string().as_bytes());
        }
    }
}

/// Appends a field as a literal never added to the table; `name` is written lowercase (HTTP/2
/// wants it so; a name from an HTTP/1 head keeps its case until here, with no copy made of it).
pub fn put_field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    // Names are short: lowercased on the stack for the table lookup (a longer one is never in
    // the table, whose longest name has 27 bytes).
    // One reservation for the whole field (its prefixes: a few bytes).
    out.reserve(name.len() + value.len() + 12);
    let mut low = [0u8; 32];
    let index = match low.get_mut(..name.len()) {
        Some(l) => {
            l.copy_from_slice(name.as_bytes());
            l.make_ascii_lowercase();
            static_name(l)
        }
        None => None,
    };
    match index {
        Some(i) => put_int(out, 0x00, 4, i),
        None => {
            out.push(0x00);
            put_int(out, 0, 7, name.len());
            out.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
        }
    }
    put_str(out, value);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decode(block: &[u8]) -> Vec<(String, String)> {
        let mut d = loona_hpack::Decoder::new();
        let mut v = Vec::new();
        d.decode_with_cb(block, |n, val| {
            v.push((
                String::from_utf8_lossy(&n).into_owned(),
                String::from_utf8_lossy(&val).into_owned(),
            ))
        })
        .expect("a valid block");
        v
    }

    #[test]
    fn what_is_encoded_decodes_back() {
        let mut b = Vec::new();
        put_status(&mut b, 200);
        put_status(&mut b, 302);
        put_status(&mut b, 404);
        put_field(&mut b, "content-type", b"text/plain");
        put_field(&mut b, "x-custom", b"v");
        put_field(&mut b, "www-authenticate", &[b'a'; 300]);
        let long_name = "x-".to_owned() + &"n".repeat(200);
        put_field(&mut b, &long_name, b"");
        put_field(&mut b, "Content-Length", b"2");
        put_field(&mut b, "X-Mixed-Case", b"V");
        let got = decode(&b);
        let want: Vec<(String, String)> = [
            (":status", "200".to_owned()),
            (":status", "302".to_owned()),
            (":status", "404".to_owned()),
            ("content-type", "text/plain".to_owned()),
            ("x-custom", "v".to_owned()),
            ("www-authenticate", "a".repeat(300)),
            (long_name.as_str(), String::new()),
            ("content-length", "2".to_owned()),
            ("x-mixed-case", "V".to_owned()),
        ]
        .into_iter()
        .map(|(n, v)| (n.to_owned(), v))
        .collect();
        assert_eq!(got, want);
        // A status in the table is one byte.
        let mut one = Vec::new();
        put_status(&mut one, 200);
        assert_eq!(one, [0x88]);
    }

    #[test]
    fn static_names_match_the_table() {
        for (i, n) in STATIC_NAMES.iter().enumerate() {
            let first = STATIC_NAMES.iter().position(|m| m == n).map(|p| p + 1);
            assert_eq!(static_name(n.as_bytes()), first, "{n} (entry {})", i + 1);
        }
        for n in ["", "x-custom", "dates", "serve", ":statu", "content-typf"] {
            assert_eq!(static_name(n.as_bytes()), None, "{n}");
        }
    }

    #[test]
    fn integers_use_their_prefix() {
        let mut b = Vec::new();
        put_int(&mut b, 0, 5, 1337);
        assert_eq!(b, [31, 154, 10]); // RFC 7541 C.1.2
        b.clear();
        put_int(&mut b, 0x80, 7, 10);
        assert_eq!(b, [0x8a]);
    }
}
