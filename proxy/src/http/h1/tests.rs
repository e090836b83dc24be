//! One test per rule, with exact values.

use super::*;
use crate::http::head::{Headers, RequestHead, ResponseHead, Version};

fn req(raw: &[u8]) -> Result<(RequestHead, usize), H1Error> {
    parse_request_head(raw, &Limits::default()).map(|r| r.expect("head should be complete"))
}

fn req_err(raw: &[u8]) -> H1Error {
    req(raw).expect_err("should be refused")
}

fn resp(raw: &[u8]) -> Result<(ResponseHead, usize), H1Error> {
    parse_response_head(raw, &Limits::default()).map(|r| r.expect("head should be complete"))
}

fn names_values(h: &Headers) -> Vec<(String, String)> {
    h.0.iter()
        .map(|h| {
            (
                h.name.to_string(),
                String::from_utf8_lossy(&h.value).into_owned(),
            )
        })
        .collect()
}

fn nv(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

// ---- request heads ----

#[test]
fn parses_a_request_with_offsets_and_trimmed_values() {
    let raw =
        b"POST /a?b=1 HTTP/1.1\r\nHost: example.com\r\nX-A: \t v w \t\r\nX-Empty:\r\n\r\nbody";
    let (h, n) = req(raw).unwrap();
    assert_eq!(n, raw.len() - 4);
    assert_eq!(h.method, "POST");
    assert_eq!(h.target, "/a?b=1");
    assert_eq!(h.version, Version::Http11);
    assert_eq!(
        names_values(&h.headers),
        nv(&[("Host", "example.com"), ("X-A", "v w"), ("X-Empty", "")])
    );
}

#[test]
fn every_prefix_of_a_valid_head_needs_more_bytes() {
    let raw = b"GET / HTTP/1.1\r\nHost: a\r\nX: y\r\n\r\n";
    for end in 0..raw.len() {
        assert_eq!(
            parse_request_head(&raw[..end], &Limits::default()),
            Ok(None),
            "prefix {end}"
        );
    }
    assert_eq!(req(raw).unwrap().1, raw.len());
}

#[test]
fn leading_empty_lines_are_skipped_and_counted() {
    let (h, n) = req(b"\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n").unwrap();
    assert_eq!((h.target.as_str(), n), ("/", 31));
    assert_eq!(
        req_err(b"\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BareLf
    );
    assert_eq!(
        req_err(b"\rGET / HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BareCr
    );
}

#[test]
fn bare_lf_and_bare_cr_are_refused_early() {
    let l = Limits::default();
    assert_eq!(
        parse_request_head(b"GET / HTTP/1.1\n", &l),
        Err(H1Error::BareLf)
    );
    assert_eq!(
        parse_request_head(b"GET / HTTP/1.1\r\nHost: a\nX", &l),
        Err(H1Error::BareLf)
    );
    assert_eq!(
        parse_request_head(b"GET / HTTP/1.1\rHost", &l),
        Err(H1Error::BareCr)
    );
    assert_eq!(
        parse_request_head(b"GET / HTTP/1.1\r\nHost: a\r\n\rZ", &l),
        Err(H1Error::BareCr)
    );
    assert_eq!(
        parse_request_head(b"GET / HTTP/1.1\r\nHost: a\r\n\n", &l),
        Err(H1Error::BareLf)
    );
}

#[test]
fn obs_fold_is_refused() {
    assert_eq!(
        req_err(b"GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n"),
        H1Error::ObsFold
    );
    assert_eq!(
        req_err(b"GET / HTTP/1.1\r\n\tContent-Length: 1\r\n\r\nX"),
        H1Error::ObsFold
    );
}

#[test]
fn field_name_rules() {
    let e = |line: &[u8]| {
        let mut raw = b"GET / HTTP/1.1\r\nHost: a\r\n".to_vec();
        raw.extend_from_slice(line);
        raw.extend_from_slice(b"\r\n\r\n");
        req_err(&raw)
    };
    assert_eq!(e(b"Transfer-Encoding : chunked"), H1Error::SpaceBeforeColon);
    assert_eq!(
        e(b"Transfer-Encoding\t: chunked"),
        H1Error::SpaceBeforeColon
    );
    assert_eq!(e(b"X Foo: bar"), H1Error::BadHeaderName);
    assert_eq!(e(b"Content-Length 10"), H1Error::MissingColon);
    assert_eq!(e(b"Transfer-"), H1Error::MissingColon);
    assert_eq!(e(b": v"), H1Error::BadHeaderName);
    assert_eq!(e(b"X-Foo/Bar: x"), H1Error::BadHeaderName);
    assert_eq!(e(b"\xefoo: bar"), H1Error::BadHeaderName);
    assert_eq!(e(b"X\x00: bar"), H1Error::BadHeaderName);
    // Underscores and long names are tokens.
    assert!(req(b"GET / HTTP/1.1\r\nHost: a\r\nContent_Length: 4\r\n\r\n").is_ok());
}

#[test]
fn field_value_rules() {
    let v = |value: &[u8]| {
        let mut raw = b"GET / HTTP/1.1\r\nHost: a\r\nX: ".to_vec();
        raw.extend_from_slice(value);
        raw.extend_from_slice(b"\r\n\r\n");
        req(&raw).map(|(h, _)| h.headers.get_first("x").unwrap().to_vec())
    };
    assert_eq!(v(b"a\x00b"), Err(H1Error::BadHeaderValue));
    assert_eq!(v(b"a\x01b"), Err(H1Error::BadHeaderValue));
    assert_eq!(v(b"a\x0bb"), Err(H1Error::BadHeaderValue));
    assert_eq!(v(b"a\x7fb"), Err(H1Error::BadHeaderValue));
    assert_eq!(v(b"\xa0ok\xa0"), Ok(b"\xa0ok\xa0".to_vec()));
    assert_eq!(v(b"a\tb"), Ok(b"a\tb".to_vec()));
    // A CTL is refused before the line ends.
    assert_eq!(
        parse_request_head(b"GET / HTTP/1.1\r\nX: a\x00", &Limits::default()),
        Err(H1Error::BadHeaderValue)
    );
}

#[test]
fn request_line_rules() {
    assert_eq!(
        req_err(b"GET / http/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadVersion
    );
    assert_eq!(
        req_err(b"GET / HTTP/2.0\r\nHost: a\r\n\r\n"),
        H1Error::BadVersion
    );
    assert_eq!(
        req_err(b"GET / HTTP/0.9\r\nHost: a\r\n\r\n"),
        H1Error::BadVersion
    );
    assert_eq!(
        req_err(b"GET / HTTP/4294967295.255\r\n\r\n"),
        H1Error::BadVersion
    );
    assert_eq!(
        req_err(b"GET / HTTP/1.10\r\nHost: a\r\n\r\n"),
        H1Error::BadVersion
    );
    assert_eq!(req_err(b"GET /\r\n\r\n"), H1Error::BadRequestLine);
    assert_eq!(
        req_err(b"GET\t/\tHTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadRequestLine
    );
    assert_eq!(
        req_err(b"GET  / HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadRequestLine
    );
    assert_eq!(
        req_err(b"GET /a b HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadRequestLine
    );
    assert_eq!(
        req_err(b"G(T / HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadRequestLine
    );
    assert_eq!(
        req_err(b"GET /i#f HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadTarget
    );
    assert_eq!(
        req_err(b"GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadTarget
    );
    assert_eq!(
        req(b"GET / HTTP/1.2\r\nHost: a\r\n\r\n").unwrap().0.version,
        Version::Http11
    );
    assert_eq!(
        req(b"GET / HTTP/1.0\r\n\r\n").unwrap().0.version,
        Version::Http10
    );
    assert_eq!(
        req(b"GET /{a}|b HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap()
            .0
            .target,
        "/{a}|b"
    );
    // A TLS ClientHello on a clear-text port is refused at once.
    assert_eq!(
        parse_request_head(b"\x16\x03\x01\x02\x00", &Limits::default()),
        Err(H1Error::BadRequestLine)
    );
}

#[test]
fn request_target_forms() {
    assert_eq!(
        req(b"OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n")
            .unwrap()
            .0
            .target,
        "*"
    );
    assert_eq!(
        req_err(b"GET * HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadTarget
    );
    assert_eq!(
        req(b"CONNECT a.b:443 HTTP/1.1\r\nHost: a.b:443\r\n\r\n")
            .unwrap()
            .0
            .target,
        "a.b:443"
    );
    assert_eq!(
        req_err(b"CONNECT a.b HTTP/1.1\r\nHost: a.b\r\n\r\n"),
        H1Error::BadTarget
    );
    assert_eq!(
        req_err(b"CONNECT /x HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadTarget
    );
    assert_eq!(
        req_err(b"GET index HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadTarget
    );
    assert_eq!(
        req_err(b"GET 1http://a/ HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadTarget
    );
    assert_eq!(
        req_err(b"GET http://u@a/ HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadTarget
    );
    assert_eq!(
        req_err(b"GET http:/a/ HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadTarget
    );
    assert_eq!(
        req_err(b"GET http:/// HTTP/1.1\r\nHost: a\r\n\r\n"),
        H1Error::BadTarget
    );
    let (h, _) =
        req(b"GET http://example.com/p?q=1 HTTP/1.1\r\nX: 1\r\nHost: evil.example\r\n\r\n")
            .unwrap();
    assert_eq!(h.target, "http://example.com/p?q=1");
    assert_eq!(
        names_values(&h.headers),
        nv(&[("X", "1"), ("Host", "example.com")])
    );
    let (h, _) = req(b"GET HTTPS://e.com:8443?x HTTP/1.0\r\n\r\n").unwrap();
    assert_eq!(h.headers.get_first("host"), Some(&b"e.com:8443"[..]));
}

#[test]
fn host_rules() {
    assert_eq!(req_err(b"GET / HTTP/1.1\r\n\r\n"), H1Error::MissingHost);
    assert!(req(b"GET / HTTP/1.0\r\n\r\n").is_ok());
    assert_eq!(
        req_err(b"GET / HTTP/1.1\r\nHost: a\r\nhost: a\r\n\r\n"),
        H1Error::DuplicateHost
    );
    assert_eq!(
        req_err(b"GET / HTTP/1.1\r\nHost: a b\r\n\r\n"),
        H1Error::BadHost
    );
    assert_eq!(
        req_err(b"GET / HTTP/1.1\r\nHost: u@a\r\n\r\n"),
        H1Error::BadHost
    );
    assert_eq!(
        req_err(b"GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n"),
        H1Error::BadHost
    );
    assert_eq!(
        req_err(b"GET / HTTP/1.1\r\nHost: a:8x\r\n\r\n"),
        H1Error::BadHost
    );
    assert_eq!(
        req_err(b"GET / HTTP/1.1\r\nHost: [::1\r\n\r\n"),
        H1Error::BadHost
    );
    assert_eq!(
        req_err(b"GET / HTTP/1.0\r\nHost: a/b\r\n\r\n"),
        H1Error::BadHost
    );
    for ok in [
        "",
        "a",
        "a.b:80",
        "a.b:",
        "[::1]:8080",
        "xn--bcher-kva.example",
        "a%2eb",
    ] {
        let raw = format!("GET / HTTP/1.1\r\nHost: {ok}\r\n\r\n");
        assert!(req(raw.as_bytes()).is_ok(), "{ok:?}");
    }
}

#[test]
fn websocket_key_is_checked() {
    let ws = |version: &str, key: Option<&str>| {
        let mut raw = format!(
            "GET /c HTTP/{version}\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"
        );
        if let Some(k) = key {
            raw.push_str(&format!("Sec-WebSocket-Key: {k}\r\n"));
        }
        raw.push_str("\r\n");
        req(raw.as_bytes()).map(|_| ())
    };
    assert_eq!(ws("1.1", Some("dGhlIHNhbXBsZSBub25jZQ==")), Ok(()));
    assert_eq!(ws("1.1", Some("short")), Err(H1Error::BadWebSocketKey));
    assert_eq!(
        ws("1.1", Some("!!!!!!!!!!!!!!!!!!!!!!==")),
        Err(H1Error::BadWebSocketKey)
    );
    assert_eq!(ws("1.1", None), Err(H1Error::BadWebSocketKey));
    assert_eq!(ws("1.0", Some("short")), Err(H1Error::BadWebSocketKey));
    // Without the Connection token it is not an upgrade: no key check.
    assert!(
        req(b"GET / HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\nSec-WebSocket-Key: x\r\n\r\n")
            .is_ok()
    );
}

#[test]
fn head_size_and_field_count_limits() {
    let l = Limits {
        max_head: 64,
        max_headers: 2,
    };
    let head = |pad: usize| {
        let mut raw = b"GET / HTTP/1.1\r\nHost: a\r\nX: ".to_vec();
        raw.extend(std::iter::repeat_n(b'v', pad));
        raw.extend_from_slice(b"\r\n\r\n");
        raw
    };
    let exact = head(32);
    assert_eq!(exact.len(), 64);
    assert_eq!(parse_request_head(&exact, &l).unwrap().unwrap().1, 64);
    assert_eq!(
        parse_request_head(&head(33), &l),
        Err(H1Error::HeadTooLarge)
    );
    assert_eq!(parse_request_head(&head(33)[..60], &l), Ok(None));
    let long_line = [b"GET /".as_slice(), &[b'a'; 70]].concat();
    assert_eq!(parse_request_head(&long_line, &l), Err(H1Error::UriTooLong));
    assert_eq!(
        parse_request_head(&b"\r\n".repeat(40), &l),
        Err(H1Error::HeadTooLarge)
    );
    assert_eq!(H1Error::UriTooLong.status(), 414);
    assert_eq!(H1Error::HeadTooLarge.status(), 400);
    assert_eq!(
        parse_request_head(b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n", &l),
        Err(H1Error::TooManyHeaders)
    );
    assert!(
        parse_request_head(b"GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\n\r\n", &l)
            .unwrap()
            .is_some()
    );
    assert_eq!(
        Limits::default(),
        Limits {
            max_head: 16384,
            max_headers: 101
        }
    );
}

#[test]
fn error_statuses_and_reasons() {
    assert_eq!(H1Error::UnsupportedTransferCoding.status(), 422);
    assert_eq!(H1Error::BareLf.status(), 400);
    assert_eq!(H1Error::Truncated.status(), 400);
    assert_eq!(
        H1Error::UnsupportedTransferCoding.reason(),
        "unsupported transfer coding"
    );
    assert_eq!(H1Error::ObsFold.to_string(), "obsolete line folding");
}

// ---- response heads ----

#[test]
fn parses_responses() {
    let (h, n) = resp(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok").unwrap();
    assert_eq!(
        (h.version, h.status, h.reason.as_str(), n),
        (Version::Http11, 200, "OK", 38)
    );
    assert_eq!(
        resp(b"HTTP/1.0 404 Not  Found\r\n\r\n").unwrap().0.reason,
        "Not  Found"
    );
    assert_eq!(resp(b"HTTP/1.1 204 \r\n\r\n").unwrap().0.reason, "");
    assert_eq!(resp(b"HTTP/1.1 200\r\n\r\n").unwrap().0.status, 200);
    assert_eq!(
        resp(b"HTTP/1.1 200 \xe9t\xe9\r\n\r\n").unwrap().0.reason,
        "\u{fffd}t\u{fffd}"
    );
    for bad in [
        &b"HTTP/1.1 20 OK\r\n\r\n"[..],
        b"HTTP/1.1 2000 OK\r\n\r\n",
        b"HTTP/1.1 099 x\r\n\r\n",
        b"HTTP/1.1 2x0 x\r\n\r\n",
        b"HTTP/1.1  200 OK\r\n\r\n",
        b"HTTP/1.1 200 O\x01K\r\n\r\n",
        b"\r\nHTTP/1.1 200 OK\r\n\r\n",
    ] {
        assert_eq!(
            resp(bad).map(|_| ()),
            Err(H1Error::BadStatusLine),
            "{:?}",
            String::from_utf8_lossy(bad)
        );
    }
    assert_eq!(
        resp(b"HTTP/2 200 OK\r\n\r\n").map(|_| ()),
        Err(H1Error::BadVersion)
    );
    assert_eq!(
        resp(b"HTTP/1.1 200 OK\r\nX: a\nY: b\r\n\r\n").map(|_| ()),
        Err(H1Error::BareLf)
    );
}

// ---- framing ----

fn framing(fields: &str) -> Result<BodyFraming, H1Error> {
    framing_v("1.1", fields)
}

fn framing_v(version: &str, fields: &str) -> Result<BodyFraming, H1Error> {
    let raw = format!("POST / HTTP/{version}\r\nHost: a\r\n{fields}\r\n");
    request_framing(&req(raw.as_bytes()).unwrap().0)
}

#[test]
fn content_length_rules() {
    assert_eq!(framing(""), Ok(BodyFraming::None));
    assert_eq!(framing("Content-Length: 5\r\n"), Ok(BodyFraming::Length(5)));
    assert_eq!(framing("Content-Length: 0\r\n"), Ok(BodyFraming::Length(0)));
    assert_eq!(
        framing("Content-Length: 5\r\nContent-Length: 5\r\n"),
        Ok(BodyFraming::Length(5))
    );
    assert_eq!(
        framing("Content-Length: 5, 5\r\n"),
        Ok(BodyFraming::Length(5))
    );
    assert_eq!(
        framing("Content-Length: \t 5 \t\r\n"),
        Ok(BodyFraming::Length(5))
    );
    assert_eq!(
        framing("Content-Length: 00000000000000000000000000000000000000005\r\n"),
        Ok(BodyFraming::Length(5))
    );
    assert_eq!(
        framing("Content-Length: 18446744073709551615\r\n"),
        Ok(BodyFraming::Length(u64::MAX))
    );
    for bad in [
        "+5",
        "-1",
        "5.0",
        "5 5",
        "0x5",
        "",
        "5,",
        ",5",
        "6, 5",
        "18446744073709551616",
        "18446744073709551621",
        "5a",
    ] {
        let f = format!("Content-Length: {bad}\r\n");
        assert_eq!(framing(&f), Err(H1Error::BadContentLength), "{bad:?}");
    }
    assert_eq!(
        framing("Content-Length: 0\r\nContent-Length: 41\r\n"),
        Err(H1Error::BadContentLength)
    );
}

#[test]
fn transfer_encoding_rules() {
    assert_eq!(
        framing("Transfer-Encoding: chunked\r\n"),
        Ok(BodyFraming::Chunked)
    );
    assert_eq!(
        framing("TRANSFER-ENCODING: CHUNKED\r\n"),
        Ok(BodyFraming::Chunked)
    );
    assert_eq!(
        framing("Transfer-Encoding:\tchunked\r\n"),
        Ok(BodyFraming::Chunked)
    );
    assert_eq!(
        framing("Transfer-Encoding: chunked,\r\n"),
        Ok(BodyFraming::Chunked)
    );
    assert_eq!(
        framing("Transfer-Encoding: , chunked\r\n"),
        Ok(BodyFraming::Chunked)
    );
    let e = |f: &str| framing(f).unwrap_err();
    // Transfer-Encoding wins (HAProxy 2.6; the connection then closes, see below).
    assert_eq!(
        framing("Transfer-Encoding: chunked\r\nContent-Length: 6\r\n"),
        Ok(BodyFraming::Chunked)
    );
    assert_eq!(
        framing("Content-Length: 6\r\nTransfer-Encoding: chunked\r\n"),
        Ok(BodyFraming::Chunked)
    );
    assert_eq!(
        framing_v("1.0", "Transfer-Encoding: chunked\r\n"),
        Ok(BodyFraming::Chunked)
    );
    assert_eq!(
        e("Content-Length: 6\r\nTransfer-Encoding: gzip\r\n"),
        H1Error::BadTransferEncoding
    );
    assert_eq!(
        e("Transfer-Encoding: gzip\r\n"),
        H1Error::BadTransferEncoding
    );
    assert_eq!(
        e("Transfer-Encoding: chunked, identity\r\n"),
        H1Error::BadTransferEncoding
    );
    assert_eq!(
        e("Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n"),
        H1Error::BadTransferEncoding
    );
    assert_eq!(
        e("Transfer-Encoding: chunked, chunked\r\n"),
        H1Error::BadTransferEncoding
    );
    assert_eq!(
        e("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"),
        H1Error::BadTransferEncoding
    );
    assert_eq!(
        e("Transfer-Encoding: chunked;q=1\r\n"),
        H1Error::BadTransferEncoding
    );
    assert_eq!(e("Transfer-Encoding: \r\n"), H1Error::BadTransferEncoding);
    assert_eq!(e("Transfer-Encoding: ,\r\n"), H1Error::BadTransferEncoding);
    assert_eq!(
        e("Transfer-Encoding: \u{a0}chunked\r\n"),
        H1Error::BadTransferEncoding
    );
    assert_eq!(
        e("Transfer-Encoding: identity, chunked\r\n"),
        H1Error::UnsupportedTransferCoding
    );
    assert_eq!(
        e("Transfer-Encoding: gzip;q=1, chunked\r\n"),
        H1Error::UnsupportedTransferCoding
    );
    assert_eq!(H1Error::UnsupportedTransferCoding.status(), 422);
}

fn rframing(raw: &str, method: &str) -> Result<BodyFraming, H1Error> {
    response_framing(&resp(raw.as_bytes()).unwrap().0, method)
}

#[test]
fn response_framing_rules() {
    let cl = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
    assert_eq!(rframing(cl, "GET"), Ok(BodyFraming::Length(3)));
    assert_eq!(rframing(cl, "HEAD"), Ok(BodyFraming::None));
    assert_eq!(rframing(cl, "CONNECT"), Ok(BodyFraming::Tunnel));
    assert_eq!(
        rframing("HTTP/1.1 407 No\r\nContent-Length: 3\r\n\r\n", "CONNECT"),
        Ok(BodyFraming::Length(3))
    );
    assert_eq!(
        rframing("HTTP/1.1 101 Switching\r\n\r\n", "GET"),
        Ok(BodyFraming::Tunnel)
    );
    for s in ["100 Continue", "103 Early", "204 No", "304 Not"] {
        let raw = format!("HTTP/1.1 {s}\r\nContent-Length: 3\r\n\r\n");
        assert_eq!(rframing(&raw, "GET"), Ok(BodyFraming::None), "{s}");
    }
    assert_eq!(
        rframing("HTTP/1.1 200 OK\r\n\r\n", "GET"),
        Ok(BodyFraming::UntilClose)
    );
    assert_eq!(
        rframing(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n",
            "GET"
        ),
        Ok(BodyFraming::Chunked)
    );
    // Any coding but chunked: unusable, as in HAProxy 2.6 (reg-test http_transfer_encoding c11).
    assert_eq!(
        rframing(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
            "GET"
        ),
        Err(H1Error::UnsupportedTransferCoding)
    );
    assert_eq!(
        rframing("HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "GET"),
        Err(H1Error::UnsupportedTransferCoding)
    );
    assert_eq!(
        rframing(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
            "GET"
        ),
        Err(H1Error::BadTransferEncoding)
    );
    assert_eq!(
        rframing(
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n",
            "GET"
        ),
        Err(H1Error::BadTransferEncoding)
    );
    assert_eq!(
        rframing(
            "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
            "GET"
        ),
        Ok(BodyFraming::Chunked)
    );
    assert_eq!(
        rframing("HTTP/1.1 200 OK\r\nContent-Length: 3, 4\r\n\r\n", "GET"),
        Err(H1Error::BadContentLength)
    );
}

// ---- normalization ----

fn normalized(raw: &[u8]) -> Vec<(String, String)> {
    let (mut h, _) = req(raw).unwrap();
    let f = request_framing(&h).unwrap();
    normalize_request(&mut h, &f);
    names_values(&h.headers)
}

#[test]
fn normalize_request_repairs() {
    assert_eq!(
        normalized(b"POST / HTTP/1.1\r\nContent-Length: 5\r\nHost: a\r\nContent-Length: 5\r\n\r\n"),
        nv(&[("Content-Length", "5"), ("Host", "a")])
    );
    assert_eq!(
        normalized(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 05, 5\r\n\r\n"),
        nv(&[("Host", "a"), ("Content-Length", "5")])
    );
    // A single value is left as sent.
    assert_eq!(
        normalized(b"POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 005\r\n\r\n"),
        nv(&[("Host", "a"), ("Content-Length", "005")])
    );
    assert_eq!(
        normalized(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked,\r\n\r\n"),
        nv(&[("Host", "a"), ("Transfer-Encoding", "chunked")])
    );
    assert_eq!(
        normalized(b"POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n"),
        nv(&[("Host", "a"), ("Transfer-Encoding", "Chunked")])
    );
    assert_eq!(
        normalized(b"POST /up HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, X\r\nUpgrade: foo\r\nContent-Length: 5\r\n\r\n"),
        nv(&[("Host", "a"), ("Connection", "X"), ("Content-Length", "5")])
    );
    assert_eq!(
        normalized(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade, HTTP2-Settings\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMA\r\n\r\n"),
        nv(&[("Host", "a")])
    );
    assert_eq!(
        normalized(b"GET / HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket, h2c\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n"),
        nv(&[
            ("Host", "a"),
            ("Connection", "Upgrade"),
            ("Upgrade", "websocket"),
            ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
        ])
    );
    // A body-less upgrade stays untouched.
    let ws = b"GET / HTTP/1.1\r\nHost: a\r\nConnection: upgrade\r\nUpgrade: foo/2\r\nContent-Length: 0\r\n\r\n";
    assert_eq!(
        normalized(ws),
        nv(&[
            ("Host", "a"),
            ("Connection", "upgrade"),
            ("Upgrade", "foo/2"),
            ("Content-Length", "0")
        ])
    );
}

#[test]
fn normalize_response_drops_content_length_beside_te() {
    let (mut h, _) =
        resp(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap();
    let f = response_framing(&h, "GET").unwrap();
    normalize_response(&mut h, &f);
    assert_eq!(
        names_values(&h.headers),
        nv(&[("Transfer-Encoding", "chunked")])
    );
    let (mut h, _) =
        resp(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n").unwrap();
    normalize_response(&mut h, &BodyFraming::Length(3));
    assert_eq!(names_values(&h.headers), nv(&[("Content-Length", "3")]));
}

// ---- body decoder ----

/// Feeds `input` whole and byte by byte; both must agree. Returns (consumed, done).
fn decode(framing: BodyFraming, input: &[u8]) -> Result<(usize, bool), H1Error> {
    let mut d = BodyDecoder::new(framing);
    let whole = d.advance(input).map(|p| (p.consumed, p.done));
    let mut d = BodyDecoder::new(framing);
    let mut consumed = 0;
    let mut bytewise = d.advance(&[]).map(|p| (0, p.done));
    for b in input.chunks(1) {
        if d.is_done() {
            break;
        }
        match d.advance(b) {
            Ok(p) => {
                consumed += p.consumed;
                bytewise = Ok((consumed, p.done));
            }
            Err(e) => {
                bytewise = Err(e);
                break;
            }
        }
    }
    assert_eq!(
        whole,
        bytewise,
        "whole vs byte-by-byte on {:?}",
        String::from_utf8_lossy(input)
    );
    whole
}

#[test]
fn length_and_trivial_bodies() {
    assert_eq!(decode(BodyFraming::Length(5), b"helloGET"), Ok((5, true)));
    assert_eq!(decode(BodyFraming::Length(5), b"hel"), Ok((3, false)));
    assert_eq!(decode(BodyFraming::Length(0), b"GET"), Ok((0, true)));
    assert_eq!(decode(BodyFraming::None, b"GET"), Ok((0, true)));
    assert_eq!(decode(BodyFraming::UntilClose, b"abc"), Ok((3, false)));
    assert_eq!(decode(BodyFraming::Tunnel, b"abc"), Ok((3, false)));
    let mut d = BodyDecoder::new(BodyFraming::Length(u64::MAX));
    assert_eq!(
        d.advance(b"abc"),
        Ok(BodyProgress {
            consumed: 3,
            done: false
        })
    );
}

#[test]
fn eof_handling() {
    let mut d = BodyDecoder::new(BodyFraming::Length(10));
    d.advance(b"hello").unwrap();
    assert_eq!(d.at_eof(), Err(H1Error::Truncated));
    let mut d = BodyDecoder::new(BodyFraming::Chunked);
    d.advance(b"5\r\nhello\r\n").unwrap();
    assert_eq!(d.at_eof(), Err(H1Error::Truncated));
    let mut d = BodyDecoder::new(BodyFraming::UntilClose);
    d.advance(b"abc").unwrap();
    assert_eq!(d.at_eof(), Ok(()));
    assert!(d.is_done());
    let mut d = BodyDecoder::new(BodyFraming::Length(2));
    d.advance(b"ab").unwrap();
    assert_eq!(d.at_eof(), Ok(()));
}

#[test]
fn chunked_valid_bodies() {
    let body = b"5\r\nhello\r\n6;a=b;c=\"d \\\" ;e\"\r\n world\r\n0\r\nX: y\r\nZ:\r\n\r\n";
    let mut input = body.to_vec();
    input.extend_from_slice(b"GET / HTTP/1.1\r\n");
    assert_eq!(decode(BodyFraming::Chunked, &input), Ok((body.len(), true)));
    assert_eq!(decode(BodyFraming::Chunked, b"0\r\n\r\n"), Ok((5, true)));
    assert_eq!(decode(BodyFraming::Chunked, b"000\r\n\r\n"), Ok((7, true)));
    assert_eq!(
        decode(BodyFraming::Chunked, b"5 ; foo = bar\r\nhello\r\n0\r\n\r\n"),
        Ok((27, true))
    );
    assert_eq!(
        decode(BodyFraming::Chunked, b"5;a\t;b\r\nhello\r\n0\r\n\r\n"),
        Ok((20, true))
    );
    assert_eq!(
        decode(
            BodyFraming::Chunked,
            b"0000000000000000000005\r\nhello\r\n0\r\n\r\n"
        ),
        Ok((36, true))
    );
    assert_eq!(
        decode(BodyFraming::Chunked, b"A\r\n0123456789\r\n0\r\n\r\n"),
        Ok((20, true))
    );
    assert_eq!(
        decode(BodyFraming::Chunked, b"0\r\nX:POST / HTTP/1.1\r\n\r\n"),
        Ok((24, true))
    );
    // 2^52 - 1 is the largest size; the data is then still awaited.
    assert_eq!(
        decode(BodyFraming::Chunked, b"FFFFFFFFFFFFF\r\nab"),
        Ok((17, false))
    );
}

#[test]
fn chunked_invalid_bodies() {
    let e = |input: &[u8]| decode(BodyFraming::Chunked, input).unwrap_err();
    assert_eq!(e(b"5\nhello\r\n0\r\n\r\n"), H1Error::BareLf);
    assert_eq!(e(b"5;\nhello\r\n0\r\n\r\n"), H1Error::BareLf);
    assert_eq!(e(b"5\r\r;ABCD\r\n"), H1Error::BareCr);
    assert_eq!(e(b"g\r\n"), H1Error::BadChunkSize);
    assert_eq!(e(b"  5\r\nhello\r\n"), H1Error::BadChunkSize);
    assert_eq!(e(b"-0x0\r\n\r\n"), H1Error::BadChunkSize);
    assert_eq!(e(b"0x5\r\n"), H1Error::BadChunkSize);
    assert_eq!(e(b"\r\n\r\n"), H1Error::BadChunkSize);
    assert_eq!(e(b"+5\r\n"), H1Error::BadChunkSize);
    assert_eq!(e(b"10000000000000\r\n"), H1Error::BadChunkSize);
    assert_eq!(e(b"FFFFFFFFFFFFFFFF\r\nhello\r\n"), H1Error::BadChunkSize);
    assert_eq!(e(b"10000000000000005\r\nhello\r\n"), H1Error::BadChunkSize);
    assert_eq!(e(b"5 \r\nhello\r\n"), H1Error::BadChunkExtension);
    assert_eq!(e(b"5;\r\nhello\r\n"), H1Error::BadChunkExtension);
    assert_eq!(e(b"5;a=\r\nhello\r\n"), H1Error::BadChunkExtension);
    assert_eq!(e(b"5;a b\r\nhello\r\n"), H1Error::BadChunkExtension);
    assert_eq!(e(b"5;a=\"x\x01\"\r\n"), H1Error::BadChunkExtension);
    assert_eq!(e(b"5;a=\"x\"y\r\n"), H1Error::BadChunkExtension);
    // "hi\r\n0" is the data, then an empty chunk-size line.
    assert_eq!(e(b"5\r\nhi\r\n0\r\n\r\n"), H1Error::BadChunkSize);
    assert_eq!(e(b"5\r\nhelloXX0\r\n\r\n"), H1Error::BadChunkEnd);
    assert_eq!(e(b"a\r\n0123456789\n0\r\n\r\n"), H1Error::BadChunkEnd);
    assert_eq!(e(b"5\r\nhello\r\n0\n\n"), H1Error::BareLf);
    assert_eq!(
        e(b"0\r\nGET /smuggled HTTP/1.1\r\n\r\n"),
        H1Error::BadTrailer
    );
    assert_eq!(e(b"0\r\n folded: x\r\n\r\n"), H1Error::BadTrailer);
    assert_eq!(e(b"0\r\n: x\r\n\r\n"), H1Error::BadTrailer);
    assert_eq!(e(b"0\r\nX: a\x00b\r\n\r\n"), H1Error::BadTrailer);
    assert_eq!(e(b"0\r\nX: a\nY: b\r\n\r\n"), H1Error::BadTrailer);
    assert_eq!(e(b"0\r\nX: a\r\rY"), H1Error::BareCr);
    assert_eq!(e(b"0\r\n\rX"), H1Error::BadTrailer);
    let long = [b"5;".as_slice(), &[b'a'; 16384]].concat();
    assert_eq!(e(&long), H1Error::ChunkLineTooLong);
}

#[test]
fn chunked_errors_are_sticky() {
    let mut d = BodyDecoder::new(BodyFraming::Chunked);
    assert_eq!(d.advance(b"z"), Err(H1Error::BadChunkSize));
    assert_eq!(d.advance(b"0\r\n\r\n"), Err(H1Error::BadChunkSize));
    assert!(!d.is_done());
}

#[test]
fn done_decoder_consumes_nothing_more() {
    let mut d = BodyDecoder::new(BodyFraming::Chunked);
    assert_eq!(
        d.advance(b"0\r\n\r\nGET"),
        Ok(BodyProgress {
            consumed: 5,
            done: true
        })
    );
    assert_eq!(
        d.advance(b"GET"),
        Ok(BodyProgress {
            consumed: 0,
            done: true
        })
    );
}

// ---- serialization ----

#[test]
fn writes_heads_with_lowercase_names() {
    let (h, _) =
        req(b"GET /x?y HTTP/1.1\r\nHost: example.com\r\nX-Mixed-Case: V A\r\nX-Empty:\r\n\r\n")
            .unwrap();
    let mut out = Vec::new();
    write_request_head(&h, &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "GET /x?y HTTP/1.1\r\nhost: example.com\r\nx-mixed-case: V A\r\nx-empty: \r\n\r\n"
    );
    let mut h2 = h.clone();
    h2.version = Version::Http2;
    let mut out = Vec::new();
    write_request_head(&h2, &mut out);
    assert!(out.starts_with(b"GET /x?y HTTP/1.1\r\n"));
    let (r, _) =
        resp(b"HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/html\r\n\r\n").unwrap();
    let mut out = b"prefix|".to_vec();
    write_response_head(&r, &mut out);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        "prefix|HTTP/1.0 503 Service Unavailable\r\ncontent-type: text/html\r\n\r\n"
    );
    let (r, _) = resp(b"HTTP/1.1 200\r\n\r\n").unwrap();
    let mut out = Vec::new();
    write_response_head(&r, &mut out);
    assert_eq!(out, b"HTTP/1.1 200 \r\n\r\n");
}

#[test]
fn written_head_parses_back_identically() {
    let raw = b"PUT http://h:81/p HTTP/1.1\r\nHost: h:81\r\nA: 1\r\nB: x\xa0y\r\n\r\n";
    let (h, _) = req(raw).unwrap();
    let mut out = Vec::new();
    write_request_head(&h, &mut out);
    let (again, n) = req(&out).unwrap();
    assert_eq!(n, out.len());
    assert_eq!(
        (again.method, again.target, again.version),
        (h.method, h.target, h.version)
    );
    let lower: Vec<_> = names_values(&h.headers)
        .into_iter()
        .map(|(n, v)| (n.to_ascii_lowercase(), v))
        .collect();
    assert_eq!(names_values(&again.headers), lower);
}

// ---- connection semantics ----

fn headers(pairs: &[(&str, &str)]) -> Headers {
    let mut h = Headers::default();
    for (n, v) in pairs {
        h.append(*n, *v);
    }
    h
}

#[test]
fn wants_close_rules() {
    assert!(!wants_close(Version::Http11, &headers(&[])));
    assert!(wants_close(
        Version::Http11,
        &headers(&[("Connection", "close")])
    ));
    assert!(wants_close(
        Version::Http11,
        &headers(&[("connection", "Foo, CLOSE")])
    ));
    assert!(!wants_close(
        Version::Http11,
        &headers(&[("Connection", "closed")])
    ));
    assert!(wants_close(Version::Http10, &headers(&[])));
    assert!(!wants_close(
        Version::Http10,
        &headers(&[("Connection", "Keep-Alive")])
    ));
    assert!(wants_close(
        Version::Http10,
        &headers(&[("Connection", "keep-alive, close")])
    ));
    assert!(!wants_close(Version::Http2, &headers(&[])));
}

#[test]
fn upgrade_detection() {
    let h = |version: &str, fields: &str| {
        req(format!("GET / HTTP/{version}\r\nHost: a\r\n{fields}\r\n").as_bytes())
            .unwrap()
            .0
    };
    assert!(is_upgrade(&h(
        "1.1",
        "Connection: keep-alive, Upgrade\r\nUpgrade: foo\r\n"
    )));
    assert!(!is_upgrade(&h("1.1", "Upgrade: foo\r\n")));
    assert!(!is_upgrade(&h(
        "1.1",
        "Connection: upgrade\r\nUpgrade: ,\r\n"
    )));
    assert!(!is_upgrade(&h("1.1", "Connection: upgrade\r\n")));
    assert!(!is_upgrade(&h(
        "1.0",
        "Connection: upgrade\r\nUpgrade: foo\r\n"
    )));
    let ws = h(
        "1.1",
        "Connection: upgrade\r\nUpgrade: WebSocket/13\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n",
    );
    assert!(is_websocket_upgrade(&ws) && is_upgrade(&ws));
    assert!(connection_has_token(&ws.headers, "UPGRADE"));
}

#[test]
fn connection_tokens_alone_in_lists_and_across_fields() {
    let has = |fields: &[(&str, &str)], t: &str| connection_has_token(&headers(fields), t);
    assert!(has(&[("Connection", "Close")], "close"));
    assert!(!has(&[("Connection", "closed")], "close"));
    assert!(!has(&[("Connection", "clos")], "close"));
    // A value set by a rule may keep its spaces: still a list.
    assert!(has(&[("Connection", " close ")], "close"));
    assert!(has(&[("Connection", "x-foo,CLOSE")], "close"));
    assert!(has(
        &[("connection", "x-foo"), ("CONNECTION", "close")],
        "close"
    ));
    assert!(!has(
        &[("Connections", "close"), ("X-Connection", "close")],
        "close"
    ));
    assert!(!has(&[("Connection", "keep-alive, x-close")], "close"));
}

#[test]
fn hop_by_hop_removal() {
    let mut h = headers(&[
        ("Host", "a"),
        (
            "Connection",
            "close, X-Foo, Content-Length, Host, Transfer-Encoding",
        ),
        ("X-Foo", "1"),
        ("Keep-Alive", "timeout=5"),
        ("Proxy-Connection", "keep-alive"),
        ("TE", "trailers"),
        ("Upgrade", "foo"),
        ("Content-Length", "3"),
        ("Transfer-Encoding", "chunked"),
    ]);
    remove_hop_by_hop(&mut h);
    assert_eq!(
        names_values(&h),
        nv(&[
            ("Host", "a"),
            ("TE", "trailers"),
            ("Content-Length", "3"),
            ("Transfer-Encoding", "chunked")
        ])
    );
    let mut h = headers(&[
        ("Connection", "keep-alive, Upgrade, X-Foo"),
        ("X-Foo", "1"),
        ("Upgrade", "websocket"),
    ]);
    remove_hop_by_hop(&mut h);
    assert_eq!(
        names_values(&h),
        nv(&[("Connection", "Upgrade"), ("Upgrade", "websocket")])
    );
    // `close` names no field here: everything else stays as it was, in order.
    let mut h = headers(&[
        ("Host", "a"),
        ("Connection", "close"),
        ("X-Close", "1"),
        ("Accept", "*/*"),
    ]);
    remove_hop_by_hop(&mut h);
    assert_eq!(
        names_values(&h),
        nv(&[("Host", "a"), ("X-Close", "1"), ("Accept", "*/*")])
    );
    // A token names a field whatever the case of either, across `Connection` fields.
    let mut h = headers(&[
        ("Connection", "close"),
        ("X-FOO", "1"),
        ("connection", "x-Foo"),
        ("Close", "2"),
    ]);
    remove_hop_by_hop(&mut h);
    assert_eq!(names_values(&h), nv(&[]));
    // `close` alone names a `Close` field when there is one; `keep-alive` alone, none but its
    // own hop-by-hop field.
    let mut h = headers(&[("Connection", "close"), ("A", "1"), ("close", "2")]);
    remove_hop_by_hop(&mut h);
    assert_eq!(names_values(&h), nv(&[("A", "1")]));
    let mut h = headers(&[
        ("Connection", "Keep-Alive"),
        ("Keep-Alive", "timeout=5"),
        ("A", "1"),
        ("Proxy-Connection", "close"),
        ("B", "2"),
    ]);
    remove_hop_by_hop(&mut h);
    assert_eq!(names_values(&h), nv(&[("A", "1"), ("B", "2")]));
}

#[test]
fn haproxy_connection_handling() {
    let mut h = headers(&[
        ("Connection", "close, X-Foo"),
        ("X-Foo", "1"),
        ("Keep-Alive", "5"),
    ]);
    strip_close_keepalive(&mut h);
    assert_eq!(
        names_values(&h),
        nv(&[("Connection", "X-Foo"), ("X-Foo", "1"), ("Keep-Alive", "5")])
    );
    let mut h = headers(&[
        ("Connection", "Keep-Alive"),
        ("Connection", "Upgrade"),
        ("Connection", ""),
    ]);
    strip_close_keepalive(&mut h);
    assert_eq!(names_values(&h), nv(&[("Connection", "Upgrade")]));

    let mut h = headers(&[("Host", "a")]);
    set_connection_mode(Version::Http10, &mut h, true);
    assert_eq!(
        names_values(&h),
        nv(&[("Host", "a"), ("Connection", "keep-alive")])
    );
    let mut h = headers(&[("Host", "a")]);
    set_connection_mode(Version::Http10, &mut h, false);
    set_connection_mode(Version::Http11, &mut h, true);
    assert_eq!(names_values(&h), nv(&[("Host", "a")]));
    let mut h = headers(&[("Connection", "Upgrade")]);
    set_connection_mode(Version::Http11, &mut h, false);
    assert_eq!(names_values(&h), nv(&[("Connection", "Upgrade, close")]));
    set_connection_mode(Version::Http11, &mut h, false);
    assert_eq!(names_values(&h), nv(&[("Connection", "Upgrade, close")]));
}

/// HAProxy 2.6's answer to Transfer-Encoding with Content-Length (reg-test
/// `http_transfer_encoding` c1/c2): chunked framing, the Content-Length dropped, and the
/// connection closed after the response.
#[test]
fn te_with_cl_or_in_http10_is_chunked_then_closes() {
    let head = |raw: &str| req(raw.as_bytes()).unwrap().0;
    let fc = |h: &RequestHead| framing_forces_close(h.version, &h.headers);
    let mut h = head(
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 31\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    assert!(fc(&h));
    let f = request_framing(&h).unwrap();
    normalize_request(&mut h, &f);
    assert!(!h.headers.contains("content-length"));
    assert!(h.headers.contains("transfer-encoding"));
    assert!(fc(&head(
        "POST / HTTP/1.0\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n"
    )));
    assert!(!fc(&head(
        "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"
    )));
    assert!(!fc(&head(
        "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\n\r\n"
    )));
}

/// `TE` towards the server as HAProxy 2.6 sends it (reg-test http_transfer_encoding c5).
#[test]
fn te_keeps_only_trailers() {
    let te = |v: &str| {
        let raw = format!("GET / HTTP/1.1\r\nHost: a\r\nTE: {v}\r\n\r\n");
        let mut h = req(raw.as_bytes()).unwrap().0;
        restrict_te(&mut h.headers);
        h.headers
            .get_all("te")
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .collect::<Vec<_>>()
    };
    assert_eq!(te("trailers, gzip"), ["trailers"]);
    assert_eq!(te("gzip, trailers"), ["trailers"]);
    assert_eq!(te("gzip"), Vec::<String>::new());
    assert_eq!(te("trailers;q=0.5"), Vec::<String>::new());
    assert_eq!(te("trailers"), ["trailers"]);
}
