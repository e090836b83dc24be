//! HTTP/1 request head + framing + chunked decoder, whole and split at every byte, the decoder
//! compared with a plain model of the grammar.
#![no_main]

use libfuzzer_sys::fuzz_target;
use portcullis::http::h1::{self, BodyDecoder, BodyFraming, Limits};
use portcullis_fuzz::chunked_model::{self, Verdict};

/// Feeds `input` to a fresh decoder in the pieces `cuts` delimit.
fn feed(framing: BodyFraming, input: &[u8], cuts: &[usize]) -> Result<(usize, bool), h1::H1Error> {
    let mut dec = BodyDecoder::new(framing);
    let mut at = 0;
    for &end in cuts.iter().chain(std::iter::once(&input.len())) {
        let p = dec.advance(&input[at..end])?;
        at += p.consumed;
        if p.done {
            return Ok((at, true));
        }
        // Until done, the decoder takes every byte it is given (it never buffers).
        assert_eq!(at, end, "decoder left bytes before the end of its body");
    }
    Ok((at, false))
}

fn check_chunked(body: &[u8]) {
    let whole = feed(BodyFraming::Chunked, body, &[]);
    match (chunked_model::judge(body), whole) {
        (Verdict::Done(n), Ok((m, true))) => assert_eq!(n, m, "body length"),
        (Verdict::More, Ok((_, false))) => {}
        (Verdict::Bad, Err(_)) => {}
        (v, d) => panic!(
            "model {v:?}, decoder {d:?} on {:?}",
            String::from_utf8_lossy(body)
        ),
    }
    // Split at every byte: the same answer, error kind included.
    let step = (body.len() / 256).max(1);
    for k in (1..body.len()).step_by(step) {
        assert_eq!(
            feed(BodyFraming::Chunked, body, &[k]),
            whole,
            "split at {k}"
        );
    }
    if body.len() <= 512 {
        let cuts: Vec<usize> = (1..body.len()).collect();
        assert_eq!(feed(BodyFraming::Chunked, body, &cuts), whole, "bytewise");
    }
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks a mode so one corpus covers both the head path and raw bodies.
    let Some((&mode, data)) = data.split_first() else {
        return;
    };
    if mode & 1 == 1 {
        check_chunked(data);
        return;
    }
    let limits = Limits {
        max_head: 4096,
        max_headers: 32,
    };
    let whole = h1::parse_request_head(data, &limits);
    // A prefix of a head is never refused where the whole is accepted, and never accepted.
    if let Ok(Some((_, n))) = &whole {
        let step = (*n / 128).max(1);
        for k in (0..*n).step_by(step) {
            match h1::parse_request_head(&data[..k], &limits) {
                Ok(None) => {}
                other => panic!("prefix {k} of a {n}-byte head: {other:?}"),
            }
        }
    }
    let Ok(Some((mut req, n))) = whole else {
        return;
    };
    assert!(n <= data.len());
    let Ok(framing) = h1::request_framing(&req) else {
        return;
    };
    let upgrade = h1::is_upgrade(&req);
    let _ = h1::wants_close(req.version, &req.headers);
    h1::normalize_request(&mut req, &framing);
    h1::remove_hop_by_hop(&mut req.headers);
    let _ = upgrade;
    // What portcullis forwards parses back with the same framing.
    let mut out = Vec::new();
    h1::write_request_head(&req, &mut out);
    let big = Limits {
        max_head: 1 << 20,
        max_headers: 1000,
    };
    match h1::parse_request_head(&out, &big) {
        Ok(Some((again, m))) => {
            assert_eq!(m, out.len());
            assert_eq!(again.method, req.method);
            assert_eq!(again.target, req.target);
            assert_eq!(
                h1::request_framing(&again).ok(),
                Some(framing),
                "framing changed"
            );
        }
        other => panic!(
            "forwarded head does not parse: {other:?} {:?}",
            String::from_utf8_lossy(&out)
        ),
    }
    let body = &data[n..];
    if framing == BodyFraming::Chunked {
        check_chunked(body);
    } else {
        let _ = feed(framing, body, &[body.len() / 2]);
    }
});
