//! The HTTP/2 server core (`http::h2::server`), sans I/O: the client preface, then the input as
//! the client's bytes, fed in pieces whose sizes come from the input itself; after each piece
//! the streams are served the way the shell serves them (requests taken, bodies read,
//! responses written within the windows, some streams reset or released early). Oracles: never
//! a panic; the output is always whole frames on odd streams or stream 0, DATA frames never
//! larger than the peer may take; once the connection failed, it stays failed and says nothing
//! more after its GOAWAY.
#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use portcullis::http::h2::frame::{self, Head};
use portcullis::http::h2::server::{Body, Limits, Server};

const LIMITS: Limits = Limits {
    max_concurrent_streams: 100,
    max_header_list: 64 * 1024,
    connect_protocol: true,
};

/// Checks the server's output: whole frames, on stream 0 or a client (odd) stream.
fn check_output(out: &[u8], goaways: &mut u32) {
    let mut rest = out;
    while !rest.is_empty() {
        let h = Head::parse(rest).expect("a whole frame header in the output");
        assert!(
            rest.len() >= frame::HEADER_LEN + h.len,
            "a whole frame in the output"
        );
        assert!(
            h.stream == 0 || h.stream % 2 == 1,
            "a frame on a server stream"
        );
        if h.kind == frame::DATA {
            assert!(h.len <= frame::MAX_FRAME_SIZE_LIMIT as usize);
        }
        if h.kind == frame::GOAWAY {
            *goaways += 1;
        }
        rest = &rest[frame::HEADER_LEN + h.len..];
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&ops, data)) = data.split_first() else {
        return;
    };
    let mut s = Server::new(LIMITS);
    let mut input = BytesMut::from(frame::PREFACE);
    let mut goaways = 0u32;
    let mut live: Vec<u32> = Vec::new();
    let mut rest = data;
    let mut step = 0usize;
    while !rest.is_empty() {
        // Piece sizes from 1 to 64 bytes, varied by the first byte and the step.
        let n = (usize::from(ops.rotate_left(step as u32 % 8)) % 64 + 1).min(rest.len());
        input.extend_from_slice(&rest[..n]);
        rest = &rest[n..];
        step += 1;
        let failed_before = s.failed();
        let r = s.recv(&mut input);
        if let Some(e) = failed_before {
            assert_eq!(r, Err(e), "a failed connection stays failed");
        }
        while let Some(id) = s.accept() {
            if s.take_request(id).is_some() {
                live.push(id);
            }
        }
        let mut changed = Vec::new();
        s.take_changed(&mut changed);
        let before = goaways;
        for (i, &id) in live.clone().iter().enumerate() {
            let pick = (usize::from(ops) + i + step) % 5;
            while let Body::Data(_) = s.recv_body(id) {}
            let _ = s.take_trailers(id);
            match pick {
                0 => {
                    let _ = s.send_head(id, 200, [("x-a", &b"1"[..])].into_iter(), false);
                    let _ = s.send_data(id, &[b'x'; 300], pick == 0 && step % 2 == 0);
                }
                1 => {
                    let _ = s.send_head(id, 103, std::iter::empty(), false);
                }
                2 => {
                    let _ = s.send_trailers(id, [("grpc-status", &b"0"[..])].into_iter());
                }
                3 => s.reset(id, frame::code::CANCEL),
                _ => {
                    s.release(id);
                    live.retain(|x| *x != id);
                }
            }
        }
        if step % 7 == 0 {
            s.go_away();
        }
        let out = s.take_output(Vec::new());
        check_output(&out, &mut goaways);
        if failed_before.is_some() {
            assert_eq!(
                goaways, before,
                "nothing after the GOAWAY of a failed connection"
            );
        }
    }
    for id in live {
        s.release(id);
    }
    let out = s.take_output(Vec::new());
    check_output(&out, &mut goaways);
});
