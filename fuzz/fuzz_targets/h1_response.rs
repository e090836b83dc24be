//! HTTP/1 response head and framing, for each request method that changes the framing.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis::http::h1::{self, BodyDecoder, Limits};

fuzz_target!(|data: &[u8]| {
    let limits = Limits {
        max_head: 4096,
        max_headers: 32,
    };
    let whole = h1::parse_response_head(data, &limits);
    if let Ok(Some((_, n))) = &whole {
        let step = (*n / 128).max(1);
        for k in (0..*n).step_by(step) {
            match h1::parse_response_head(&data[..k], &limits) {
                Ok(None) => {}
                other => panic!("prefix {k} of a {n}-byte head: {other:?}"),
            }
        }
    }
    let Ok(Some((mut resp, n))) = whole else {
        return;
    };
    for method in ["GET", "HEAD", "CONNECT"] {
        let Ok(framing) = h1::response_framing(&resp, method) else {
            continue;
        };
        let mut dec = BodyDecoder::new(framing);
        let _ = dec.advance(&data[n..]).map(|_| dec.at_eof());
        if method == "GET" {
            h1::normalize_response(&mut resp, &framing);
            h1::strip_close_keepalive(&mut resp.headers);
            let mut out = Vec::new();
            h1::write_response_head(&resp, &mut out);
            let big = Limits {
                max_head: 1 << 20,
                max_headers: 1000,
            };
            match h1::parse_response_head(&out, &big) {
                Ok(Some((again, _))) => assert_eq!(again.status, resp.status),
                other => panic!("forwarded head does not parse: {other:?}"),
            }
        }
    }
});
