//! The text bridge between the transaction's HTTP/1 and an HTTP/2 server stream, free of I/O:
//! the HTTP/1 request head the transaction writes becomes an `http::Request` (HAProxy's H2 mux
//! rules: `Host` becomes `:authority`, connection-specific headers are dropped, an `Upgrade`
//! becomes an RFC 8441 extended CONNECT), and the server's response becomes HTTP/1.1 bytes
//! (chunked, trailers included, when it has no `content-length`).
//!
//! A later structured seam between the transaction and its server connection can replace this
//! round trip through text.

use http::header::{HeaderName, HeaderValue};

use crate::http::h1::{self, BodyFraming};
use crate::http::head::RequestHead;

/// What the response conversion needs to remember of the request.
#[derive(Clone, Debug, Default)]
pub struct Asked {
    /// A HEAD request: the response has no body whatever its headers say.
    pub head_only: bool,
    /// An HTTP/1 upgrade sent as extended CONNECT: the protocol, and the WebSocket key whose
    /// accept value the 101 owes the client.
    pub upgrade: Option<(String, Option<Vec<u8>>)>,
}

/// A request ready for the h2 crate: the request, how its body is framed in the HTTP/1 bytes
/// that follow, and what the response conversion needs.
pub struct Outgoing {
    pub req: http::Request<()>,
    pub framing: BodyFraming,
    pub asked: Asked,
}

/// Headers HTTP/2 forbids (RFC 9113 §8.2.2), and `host` (`:authority` or a kept header, as
/// the callers decide), left out as HAProxy's H2 mux does.
fn connection_specific(name: &str) -> bool {
    crate::http::head::h2_forbidden(name) || name.eq_ignore_ascii_case("host")
}

/// The h2 request for `head`.
pub fn request(head: &RequestHead) -> Result<Outgoing, String> {
    let framing = h1::request_framing(head).map_err(|e| format!("{e:?}"))?;
    let upgrade = h1::is_upgrade(head)
        .then(|| {
            let proto = head.headers.get_first("upgrade")?;
            let proto = String::from_utf8_lossy(proto).trim().to_string();
            let key = head
                .headers
                .get_first("sec-websocket-key")
                .map(<[u8]>::to_vec);
            Some((proto, key))
        })
        .flatten();
    let host = head
        .headers
        .get_first("host")
        .filter(|h| !h.is_empty())
        .map(|h| String::from_utf8_lossy(h).into_owned());
    let target = head.target.as_str();
    let absolute = target.contains("://");
    // As HAProxy's H2 mux: an origin-form request goes out without `:authority`, its `Host`
    // as a header; an absolute one with its scheme and authority (and no `Host`). An extended
    // CONNECT needs `:authority`: `Host` gives it, with HAProxy's default scheme `https`.
    let uri = match (&upgrade, &host) {
        (Some(_), Some(h)) if !absolute => format!("https://{h}{target}"),
        _ => target.to_string(),
    };
    let keep_host = !absolute && upgrade.is_none();
    let method = if upgrade.is_some() {
        "CONNECT"
    } else {
        head.method.as_str()
    };
    let mut req = http::Request::builder()
        .method(method)
        .uri(uri.as_str())
        .body(())
        .map_err(|e| format!("{e} ({uri})"))?;
    if let Some((p, _)) = &upgrade {
        req.extensions_mut()
            .insert(h2::ext::Protocol::from(p.as_str()));
    }
    for h in &head.headers.0 {
        let ws_key = upgrade.is_some() && h.name.eq_ignore_ascii_case("sec-websocket-key");
        let te_other =
            h.name.eq_ignore_ascii_case("te") && !h.value.eq_ignore_ascii_case(b"trailers");
        let host_hdr = keep_host && h.name.eq_ignore_ascii_case("host");
        if (connection_specific(&h.name) && !host_hdr) || ws_key || te_other {
            continue;
        }
        let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(h.name.to_ascii_lowercase().as_bytes()),
            HeaderValue::from_bytes(&h.value),
        ) else {
            return Err(format!("bad header '{}'", h.name));
        };
        req.headers_mut().append(n, v);
    }
    Ok(Outgoing {
        req,
        framing: if upgrade.is_some() {
            BodyFraming::None
        } else {
            framing
        },
        asked: Asked {
            head_only: head.method == "HEAD",
            upgrade,
        },
    })
}

/// How the response body travels in the HTTP/1 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relay {
    /// No body (HEAD, 1xx, 204, 304).
    None,
    /// As is: the response has a `content-length`, or the stream is a tunnel.
    Raw,
    /// Chunked, with the trailers in the last chunk.
    Chunked,
}

/// The HTTP/1.1 head of `resp`, and how its body follows.
pub fn response_head(resp: &http::response::Parts, asked: &Asked) -> (Vec<u8>, Relay) {
    let status = resp.status.as_u16();
    let mut out = Vec::with_capacity(256);
    if let (Some((proto, key)), true) = (&asked.upgrade, resp.status.is_success()) {
        out.extend_from_slice(b"HTTP/1.1 101 \r\n");
        push_fields(&mut out, &resp.headers);
        out.extend_from_slice(b"connection: upgrade\r\nupgrade: ");
        out.extend_from_slice(proto.as_bytes());
        out.extend_from_slice(b"\r\n");
        if let Some(k) = key {
            out.extend_from_slice(b"sec-websocket-accept: ");
            out.extend_from_slice(h1::websocket_accept(k).as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        return (out, Relay::Raw);
    }
    // HTTP/2 has no reason phrase: HAProxy's HTTP/1 output leaves it empty.
    out.extend_from_slice(b"HTTP/1.1 ");
    out.extend_from_slice(status.to_string().as_bytes());
    out.extend_from_slice(b" \r\n");
    push_fields(&mut out, &resp.headers);
    let bodyless = asked.head_only || status < 200 || status == 204 || status == 304;
    let has_len = resp.headers.contains_key(http::header::CONTENT_LENGTH);
    // Without a length the body is chunked, even when END_STREAM came with the headers (an
    // empty chunked body, as HAProxy sends).
    let relay = if bodyless {
        Relay::None
    } else if has_len {
        Relay::Raw
    } else {
        out.extend_from_slice(b"transfer-encoding: chunked\r\n");
        Relay::Chunked
    };
    out.extend_from_slice(b"\r\n");
    (out, relay)
}

fn push_fields(out: &mut Vec<u8>, headers: &http::HeaderMap) {
    for (n, v) in headers {
        if connection_specific(n.as_str()) && n != http::header::HOST {
            continue;
        }
        out.extend_from_slice(n.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
}

/// One DATA payload as a chunk.
pub fn chunk(out: &mut Vec<u8>, data: &[u8]) {
    if data.is_empty() {
        return;
    }
    out.extend_from_slice(format!("{:x}\r\n", data.len()).as_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(b"\r\n");
}

/// The last chunk with the trailers.
pub fn last_chunk(out: &mut Vec<u8>, trailers: Option<&http::HeaderMap>) {
    out.extend_from_slice(b"0\r\n");
    if let Some(t) = trailers {
        push_fields(out, t);
    }
    out.extend_from_slice(b"\r\n");
}

/// A chunked request body's trailer fields as h2 trailers (connection-specific ones dropped):
/// the payload and trailers come from the transaction's own body decoder
/// ([`BodyDecoder::advance_payload`](crate::http::h1::BodyDecoder::advance_payload)).
pub fn trailer_map(fields: Option<crate::http::head::Headers>) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for f in fields.map(|h| h.0).unwrap_or_default() {
        let name = f.name.to_ascii_lowercase();
        if connection_specific(&name) {
            continue;
        }
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_bytes(&f.value),
        ) {
            map.append(n, v);
        }
    }
    map
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::h1::{Limits, parse_request_head};

    fn head(text: &str) -> RequestHead {
        parse_request_head(text.as_bytes(), &Limits::default())
            .unwrap()
            .unwrap()
            .0
    }

    #[test]
    fn origin_form_takes_host_as_authority_and_drops_connection_headers() {
        let h = head(
            "POST /p?q=1 HTTP/1.1\r\nhost: example.org\r\nconnection: keep-alive\r\nte: trailers\r\nx-a: 1\r\ncontent-length: 3\r\n\r\n",
        );
        let o = request(&h).unwrap();
        assert_eq!(o.req.uri().to_string(), "/p?q=1");
        assert_eq!(o.req.method(), "POST");
        assert!(o.req.headers().get("connection").is_none());
        assert_eq!(o.req.headers()["host"], "example.org");
        assert_eq!(o.req.headers()["te"], "trailers");
        assert_eq!(o.req.headers()["x-a"], "1");
        assert_eq!(o.framing, BodyFraming::Length(3));
        let h = head("GET http://example.org/a HTTP/1.1\r\nhost: example.org\r\n\r\n");
        let o = request(&h).unwrap();
        assert_eq!(o.req.uri().to_string(), "http://example.org/a");
        assert!(o.req.headers().get("host").is_none());
    }

    #[test]
    fn upgrade_becomes_extended_connect() {
        let h = head(
            "GET / HTTP/1.1\r\nhost: 127.0.0.1\r\nconnection: upgrade\r\nupgrade: websocket\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n",
        );
        let o = request(&h).unwrap();
        assert_eq!(o.req.method(), "CONNECT");
        assert_eq!(o.req.uri().to_string(), "https://127.0.0.1/");
        assert!(o.req.headers().get("sec-websocket-key").is_none());
        let resp = http::Response::builder().status(200).body(()).unwrap();
        let (bytes, relay) = response_head(&resp.into_parts().0, &o.asked);
        let text = String::from_utf8(bytes).unwrap();
        assert!(text.starts_with("HTTP/1.1 101 \r\n"), "{text}");
        assert!(text.contains("upgrade: websocket\r\n"));
        assert!(text.contains("sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
        assert_eq!(relay, Relay::Raw);
    }

    #[test]
    fn response_framing_from_the_h2_head() {
        let asked = Asked::default();
        let parts = |b: http::response::Builder| b.body(()).unwrap().into_parts().0;
        let (h, r) = response_head(&parts(http::Response::builder().status(200)), &asked);
        assert_eq!(r, Relay::Chunked);
        assert_eq!(h, b"HTTP/1.1 200 \r\ntransfer-encoding: chunked\r\n\r\n");
        let p = parts(
            http::Response::builder()
                .status(200)
                .header("content-length", "5"),
        );
        assert_eq!(response_head(&p, &asked).1, Relay::Raw);
        let p = parts(http::Response::builder().status(304));
        assert_eq!(response_head(&p, &asked).1, Relay::None);
        let head_only = Asked {
            head_only: true,
            ..Asked::default()
        };
        let p = parts(http::Response::builder().status(200));
        assert_eq!(response_head(&p, &head_only).1, Relay::None);
        let mut out = Vec::new();
        chunk(&mut out, b"hello");
        let mut t = http::HeaderMap::new();
        t.insert("grpc-status", HeaderValue::from_static("0"));
        last_chunk(&mut out, Some(&t));
        assert_eq!(out, b"5\r\nhello\r\n0\r\ngrpc-status: 0\r\n\r\n");
    }

    #[test]
    fn chunked_payload_and_trailers_at_any_split() {
        use crate::http::h1::{BodyDecoder, BodyFraming, Payload};
        let body = b"5;ext=1\r\nhello\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\ngrpc-status: 3\r\ngrpc-message: no\r\nconnection: x\r\n\r\n";
        for step in 1..body.len() {
            let mut d = BodyDecoder::new(BodyFraming::Chunked);
            d.keep_trailers();
            let (mut out, mut done, mut payload) = (Vec::new(), false, Payload::new());
            for piece in body.chunks(step) {
                let p = d.advance_payload(piece, &mut payload).unwrap();
                for r in payload.iter().cloned() {
                    out.extend_from_slice(&piece[r]);
                }
                done = p.done;
            }
            assert_eq!(out, b"helloabcdefghijklmnopqrstuvwxyz", "step {step}");
            assert!(done, "step {step}");
            let t = trailer_map(d.take_trailers());
            assert_eq!(t["grpc-status"], "3");
            assert_eq!(t["grpc-message"], "no");
            assert!(t.get("connection").is_none());
        }
        let mut d = BodyDecoder::new(BodyFraming::Chunked);
        d.keep_trailers();
        assert!(d.advance(b"0\r\n\r\n").unwrap().done);
        assert!(trailer_map(d.take_trailers()).is_empty());
    }
}
