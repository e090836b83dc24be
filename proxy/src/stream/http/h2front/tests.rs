use super::*;

/// The HTTP/1.1 request head for a stream, and whether its body goes chunked.
fn request_head(req: &RequestFields) -> (Vec<u8>, bool) {
    let method = String::from_utf8_lossy(&req.method);
    let authority = req.authority.as_deref().map(String::from_utf8_lossy);
    let target = if req.method == b"CONNECT" {
        authority.clone().unwrap_or_default()
    } else {
        req.path
            .as_deref()
            .map_or(Cow::Borrowed("/"), String::from_utf8_lossy)
    };
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(method.as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    let mut fields = Vec::new();
    let chunked = h1_fields(
        req.fields.clone(),
        authority.as_deref(),
        req.end_stream,
        &mut fields,
    );
    for h in &fields {
        out.extend_from_slice(h.name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(&h.value);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    (out, chunked)
}

/// A request as the core hands it over: `uri` is `scheme://authority/path`, `authority:port`
/// for a CONNECT, or an origin-form path (no `:authority`).
fn req(method: &str, uri: &str, fields: &[(&str, &str)]) -> RequestFields {
    let mut r = RequestFields {
        method: method.into(),
        fields: fields.iter().map(|(n, v)| Header::new(*n, *v)).collect(),
        end_stream: true,
        ..RequestFields::default()
    };
    if method == "CONNECT" {
        r.authority = Some(uri.into());
    } else if let Some((scheme, rest)) = uri.split_once("://") {
        let (auth, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
        r.scheme = Some(scheme.into());
        r.authority = Some(auth.into());
        r.path = Some(if path.is_empty() { "/" } else { path }.into());
    } else {
        r.scheme = Some(b"https".into());
        r.path = Some(uri.into());
    }
    r
}

#[test]
fn build_head_matches_parser() {
    let cases = [
        req("GET", "https://example.local/", &[("user-agent", "h2load")]),
        req(
            "POST",
            "https://example.local/p?q=1",
            &[("cookie", "a=1"), ("x-y", "z\u{7e}"), ("cookie", "b=2")],
        ),
        req(
            "PUT",
            "https://example.local:8443/x",
            &[("content-length", "3"), ("host", "other")],
        ),
        req("CONNECT", "example.local:443", &[]),
        req("DELETE", "http://example.local/a%20b", &[("x-a", "1\t2")]),
        // OWS the parser trims.
        req("GET", "https://example.local/", &[("x-a", " v\t")]),
        // No :authority: HTTP/1.1 gets an empty Host.
        req("GET", "/", &[]),
    ];
    for (i, p) in cases.iter().enumerate() {
        for end in [true, false] {
            let p = RequestFields {
                end_stream: end,
                ..p.clone()
            };
            let built = build_head(&mut p.clone()).unwrap_or_else(|s| panic!("case {i}: {s}"));
            let (text, _) = request_head(&p);
            let (parsed, used) = h1::parse_request_head(&text, &Limits::default())
                .unwrap()
                .unwrap();
            assert_eq!(used, text.len());
            assert_eq!(built, parsed, "case {i} end {end}");
        }
    }
    let h = build_head(&mut RequestFields {
        end_stream: false,
        ..cases[1].clone()
    })
    .unwrap();
    assert_eq!(h.target, "/p?q=1");
    assert_eq!(
        h.headers.get_all("cookie").collect::<Vec<_>>(),
        [b"a=1; b=2"]
    );
    assert_eq!(
        h.headers.get_last("transfer-encoding"),
        Some(&b"chunked"[..])
    );
    let bare = build_head(&mut cases[6].clone()).unwrap();
    assert_eq!(bare.headers.get_all("host").next(), Some(&b""[..]));
}

#[test]
fn build_head_refuses_what_the_parser_refuses() {
    let many: Vec<(String, String)> = (0..101).map(|i| (format!("x-{i}"), "v".into())).collect();
    let many: Vec<(&str, &str)> = many.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
    let big = "v".repeat(17000);
    let odd = [
        req("GET", "https://example.local/", &many),
        req("GET", "https://example.local/", &[("x-big", &big)]),
    ];
    for (i, p) in odd.iter().enumerate() {
        assert_eq!(build_head(&mut p.clone()), Err(400), "case {i}");
        let (text, _) = request_head(p);
        assert!(h1::parse_request_head(&text, &Limits::default()).is_err());
    }
}

#[test]
fn methods_and_schemes_http1_cannot_carry_are_400() {
    // h2_desync_attacks.vtc: HAProxy answers these with a 400.
    let mut scheme = req("GET", "/", &[]);
    scheme.scheme = Some(b"http://localhost/?".into());
    assert_eq!(build_head(&mut scheme), Err(400));
    let method = req("GET?", "/", &[]);
    assert_eq!(build_head(&mut method.clone()), Err(400));
    let mut fine = req("GET", "/", &[]);
    fine.scheme = Some(b"web+x.y-z".into());
    assert!(build_head(&mut fine).is_ok());
}

#[test]
fn extended_connect_is_a_get_upgrade_with_a_key() {
    let mut p = req("CONNECT", "", &[]);
    p.authority = Some(b"127.0.0.1".into());
    p.scheme = Some(b"http".into());
    p.path = Some(b"/chat".into());
    p.protocol = Some(b"websocket".into());
    p.end_stream = false;
    let h = build_head(&mut p.clone()).unwrap();
    assert_eq!((h.method.as_str(), h.target.as_str()), ("GET", "/chat"));
    let names: Vec<&str> = h.headers.0.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["upgrade", "connection", "host", "sec-websocket-key"]
    );
    assert_eq!(h.headers.get_last("upgrade"), Some(&b"websocket"[..]));
    assert_eq!(
        h.headers.get_last("sec-websocket-key").map(<[u8]>::len),
        Some(24)
    );
    assert!(h1::is_websocket_upgrade(&h));
    assert_eq!(log_line(&p), "GET http://127.0.0.1/chat HTTP/2.0");
}

#[test]
fn response_fields_lose_connection_fields_and_case() {
    let mut h = Headers::default();
    h.append("Content-Type", "text/plain");
    h.append("Connection", "close");
    h.append("Transfer-Encoding", "chunked");
    h.append("X-A", "1");
    h.append("TE", "trailers");
    h.append("Keep-Alive", "timeout=5");
    h.append("Proxy-Connection", "close");
    h.append("Upgrade", "h2c");
    h.append("Tea", "1");
    // Names keep their case here: the HPACK encoder writes them lowercase.
    let names: Vec<&str> = h2_fields(&h).map(|(n, _)| n).collect();
    assert_eq!(names, ["Content-Type", "X-A", "Tea"]);
}

#[test]
fn request_head_and_log_line_from_h2() {
    let mut r = req(
        "POST",
        "https://example.local/p?q=1",
        &[("cookie", "a=1"), ("x-y", "z"), ("cookie", "b=2")],
    );
    r.end_stream = false;
    let (head, chunked) = request_head(&r);
    assert_eq!(log_line(&r), "POST https://example.local/p?q=1 HTTP/2.0");
    assert!(chunked);
    assert_eq!(
        String::from_utf8(head).unwrap(),
        "POST /p?q=1 HTTP/1.1\r\nhost: example.local\r\nx-y: z\r\ncookie: a=1; b=2\r\n\
         transfer-encoding: chunked\r\n\r\n"
    );
    let r = req(
        "GET",
        "https://example.local/",
        &[("host", "other"), ("content-length", "0")],
    );
    let (head, chunked) = request_head(&r);
    assert!(!chunked);
    assert_eq!(
        String::from_utf8(head).unwrap(),
        "GET / HTTP/1.1\r\nhost: example.local\r\ncontent-length: 0\r\n\r\n"
    );
    assert_eq!(
        log_line(&req("CONNECT", "example.local:443", &[])),
        "CONNECT example.local:443 HTTP/2.0"
    );
    assert_eq!(log_line(&req("GET", "/x?y", &[])), "GET /x?y HTTP/2.0");
}
