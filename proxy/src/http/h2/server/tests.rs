//! The connection core driven by hand-made client frames; its output read back as frames.

use super::*;

const LIMITS: Limits = Limits {
    max_concurrent_streams: 100,
    max_header_list: 64 * 1024,
    connect_protocol: true,
};

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::new();
    frame::put_head(&mut f, payload.len(), kind, flags, stream);
    f.extend_from_slice(payload);
    f
}

fn block(fields: &[(&str, &str)]) -> Vec<u8> {
    let mut e = loona_hpack::Encoder::new();
    e.encode(fields.iter().map(|(n, v)| (n.as_bytes(), v.as_bytes())))
}

fn get(path: &str) -> Vec<u8> {
    block(&[
        (":method", "GET"),
        (":scheme", "https"),
        (":path", path),
        (":authority", "a.example"),
    ])
}

fn post(len: Option<usize>) -> Vec<u8> {
    let l = len.map(|l| l.to_string());
    let mut f = vec![(":method", "POST"), (":scheme", "https"), (":path", "/p")];
    if let Some(l) = &l {
        f.push(("content-length", l.as_str()));
    }
    block(&f)
}

/// A frame the server sent: (kind, flags, stream, payload).
type Out = (u8, u8, u32, Vec<u8>);

fn frames(b: &[u8]) -> Vec<Out> {
    let mut v = Vec::new();
    let mut rest = b;
    while let Some(h) = Head::parse(rest) {
        let p = rest[frame::HEADER_LEN..frame::HEADER_LEN + h.len].to_vec();
        v.push((h.kind, h.flags, h.stream, p));
        rest = &rest[frame::HEADER_LEN + h.len..];
    }
    assert!(rest.is_empty(), "a partial frame in the output");
    v
}

struct T {
    s: Server,
}

impl T {
    /// Preface and an empty SETTINGS; the server's SETTINGS and ack are read off.
    fn new() -> T {
        let mut t = T {
            s: Server::new(LIMITS),
        };
        let mut hello = frame::PREFACE.to_vec();
        hello.extend(frame(frame::SETTINGS, 0, 0, &[]));
        t.feed(&hello).expect("handshake");
        let out = t.out();
        assert_eq!(out[0].0, frame::SETTINGS);
        assert_eq!((out[1].0, out[1].1), (frame::SETTINGS, frame::ACK));
        assert!(t.s.ready());
        t
    }

    fn feed(&mut self, b: &[u8]) -> Result<(), ConnError> {
        let mut input = BytesMut::from(b);
        let r = self.s.recv(&mut input);
        assert!(input.is_empty() || r.is_ok());
        r
    }

    fn out(&mut self) -> Vec<Out> {
        frames(&self.s.take_output(Vec::new()))
    }

    fn changed(&mut self) -> Vec<u32> {
        let mut v = Vec::new();
        self.s.take_changed(&mut v);
        v
    }
}

#[test]
fn a_request_and_its_response() {
    let mut t = T::new();
    t.feed(&frame(
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        1,
        &get("/x"),
    ))
    .unwrap();
    assert_eq!(t.s.accept(), Some(1));
    let r = t.s.take_request(1).expect("request");
    assert_eq!(
        (r.method.as_slice(), r.path.as_deref()),
        (&b"GET"[..], Some(&b"/x"[..]))
    );
    assert!(r.end_stream);
    assert_eq!(t.s.recv_body(1), Body::End);
    let fields = [("content-type", &b"text/plain"[..])];
    t.s.send_head(1, 200, fields.iter().map(|(n, v)| (*n, *v)), false)
        .unwrap();
    assert_eq!(t.s.send_data(1, b"hello", true), Ok(5));
    let out = t.out();
    assert_eq!(out.len(), 2);
    assert_eq!(
        (out[0].0, out[0].1, out[0].2),
        (frame::HEADERS, frame::END_HEADERS, 1)
    );
    let mut d = loona_hpack::Decoder::new();
    let h = d.decode(&out[0].3).unwrap();
    assert_eq!(h[0], (b":status".to_vec(), b"200".to_vec()));
    assert_eq!(h[1], (b"content-type".to_vec(), b"text/plain".to_vec()));
    assert_eq!(
        out[1],
        (frame::DATA, frame::END_STREAM, 1, b"hello".to_vec())
    );
    assert_eq!(t.s.open_streams(), 0);
    assert_eq!(t.s.send_data(1, b"more", false), Err(Gone::Closed));
    t.s.release(1);
    assert!(t.out().is_empty(), "a finished stream needs no reset");
}

#[test]
fn every_data_frame_taken_is_acknowledged() {
    let mut t = T::new();
    t.feed(&frame(frame::HEADERS, frame::END_HEADERS, 5, &post(None)))
        .unwrap();
    assert_eq!(t.s.accept(), Some(5));
    let body = b"this must be delivered, like it or not";
    t.feed(&frame(frame::DATA, 0, 5, body)).unwrap();
    assert_eq!(t.changed(), [5]);
    assert_eq!(t.s.recv_body(5), Body::Data(Bytes::from_static(body)));
    let out = t.out();
    let inc = (body.len() as u32).to_be_bytes().to_vec();
    assert!(
        out.contains(&(frame::WINDOW_UPDATE, 0, 5, inc.clone())),
        "{out:?}"
    );
    assert!(out.contains(&(frame::WINDOW_UPDATE, 0, 0, inc)), "{out:?}");
    assert_eq!(t.s.recv_body(5), Body::Pending);
    // The stream's last frame too, as HAProxy (stream first).
    t.feed(&frame(frame::DATA, frame::END_STREAM, 5, b"!"))
        .unwrap();
    assert_eq!(t.s.recv_body(5), Body::Data(Bytes::from_static(b"!")));
    assert_eq!(t.s.recv_body(5), Body::End);
    let one = 1u32.to_be_bytes().to_vec();
    assert_eq!(
        t.out(),
        [
            (frame::WINDOW_UPDATE, 0, 5, one.clone()),
            (frame::WINDOW_UPDATE, 0, 0, one)
        ]
    );
}

#[test]
fn a_body_longer_than_its_content_length_resets_the_stream() {
    let mut t = T::new();
    t.feed(&frame(
        frame::HEADERS,
        frame::END_HEADERS,
        7,
        &post(Some(2)),
    ))
    .unwrap();
    assert_eq!(t.s.accept(), Some(7));
    t.feed(&frame(frame::DATA, 0, 7, b"this is sent and ignored"))
        .unwrap();
    let out = t.out();
    assert!(out.contains(&(
        frame::RST_STREAM,
        0,
        7,
        code::PROTOCOL_ERROR.to_be_bytes().to_vec()
    )));
    assert_eq!(t.s.recv_body(7), Body::Reset(code::PROTOCOL_ERROR));
    // The connection's window got the bytes back.
    assert!(out.iter().any(|f| f.0 == frame::WINDOW_UPDATE && f.2 == 0));
    // Shorter than announced at the end: reset too.
    t.feed(&frame(
        frame::HEADERS,
        frame::END_HEADERS,
        9,
        &post(Some(5)),
    ))
    .unwrap();
    t.feed(&frame(frame::DATA, frame::END_STREAM, 9, b"abc"))
        .unwrap();
    assert_eq!(t.s.recv_body(9), Body::Reset(code::PROTOCOL_ERROR));
    // Announced but absent.
    t.out();
    t.feed(&frame(
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        11,
        &post(Some(5)),
    ))
    .unwrap();
    assert_eq!(t.s.accept(), Some(9));
    assert_eq!(t.s.accept(), None);
    assert_eq!(
        t.out(),
        [(
            frame::RST_STREAM,
            0,
            11,
            code::PROTOCOL_ERROR.to_be_bytes().to_vec()
        )]
    );
}

#[test]
fn malformed_requests_are_reset_not_accepted() {
    let mut t = T::new();
    t.feed(&frame(
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        1,
        &get("hello-world"),
    ))
    .unwrap();
    assert_eq!(t.s.accept(), None);
    assert_eq!(
        t.out(),
        [(
            frame::RST_STREAM,
            0,
            1,
            code::PROTOCOL_ERROR.to_be_bytes().to_vec()
        )]
    );
    // The connection goes on.
    t.feed(&frame(
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        3,
        &get("/"),
    ))
    .unwrap();
    assert_eq!(t.s.accept(), Some(3));
}

#[test]
fn flow_control_holds_data_until_the_window_opens() {
    let mut t = T::new();
    let mut small = Vec::new();
    small.extend_from_slice(&setting::INITIAL_WINDOW_SIZE.to_be_bytes());
    small.extend_from_slice(&10u32.to_be_bytes());
    t.feed(&frame(frame::SETTINGS, 0, 0, &small)).unwrap();
    t.feed(&frame(
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        1,
        &get("/"),
    ))
    .unwrap();
    t.s.send_head(1, 200, std::iter::empty(), false).unwrap();
    assert_eq!(t.s.send_data(1, &[b'x'; 25], true), Ok(10));
    assert_eq!(t.s.send_data(1, &[b'x'; 15], true), Ok(0));
    t.out();
    assert!(t.changed().is_empty());
    t.feed(&frame(frame::WINDOW_UPDATE, 0, 1, &100u32.to_be_bytes()))
        .unwrap();
    assert_eq!(t.changed(), [1]);
    assert_eq!(t.s.send_data(1, &[b'x'; 15], true), Ok(15));
    let out = t.out();
    assert_eq!(out, [(frame::DATA, frame::END_STREAM, 1, vec![b'x'; 15])]);
    // The connection window bounds every stream together.
    let mut t = T::new();
    for id in [1u32, 3] {
        t.feed(&frame(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            id,
            &get("/"),
        ))
        .unwrap();
        t.s.send_head(id, 200, std::iter::empty(), false).unwrap();
    }
    let big = vec![0u8; 70_000];
    assert_eq!(t.s.send_data(1, &big, false), Ok(65_535));
    assert_eq!(t.s.send_data(3, &big, false), Ok(0));
    t.feed(&frame(frame::WINDOW_UPDATE, 0, 0, &1000u32.to_be_bytes()))
        .unwrap();
    let mut woken = t.changed();
    woken.sort_unstable();
    assert_eq!(woken, [1, 3]);
    let sizes: Vec<usize> = t
        .out()
        .iter()
        .filter(|f| f.0 == frame::DATA)
        .map(|f| f.3.len())
        .collect();
    assert_eq!(sizes.iter().sum::<usize>(), 65_535);
    assert!(sizes.iter().all(|&n| n <= 16_384));
}

#[test]
fn rapid_reset_ends_the_connection() {
    let mut t = T::new();
    let mut burst = Vec::new();
    for i in 0..200u32 {
        let id = 1 + 2 * i;
        burst.extend(frame(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            id,
            &get("/"),
        ));
        burst.extend(frame(frame::RST_STREAM, 0, id, &code::CANCEL.to_be_bytes()));
    }
    let e = t.feed(&burst).expect_err("cut off");
    assert_eq!(e.code, code::ENHANCE_YOUR_CALM);
    let out = t.out();
    let last = out.last().expect("a GOAWAY");
    assert_eq!(last.0, frame::GOAWAY);
    assert_eq!(&last.3[4..], code::ENHANCE_YOUR_CALM.to_be_bytes());
    assert!(t.s.closing());
    // Completed responses earn the allowance back.
    let mut t = T::new();
    for i in 0..300u32 {
        let id = 1 + 2 * i;
        t.feed(&frame(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            id,
            &get("/"),
        ))
        .unwrap();
        if i % 2 == 0 {
            t.s.send_head(id, 200, std::iter::empty(), true).unwrap();
        } else {
            t.feed(&frame(
                frame::RST_STREAM,
                0,
                id,
                &code::CANCEL.to_be_bytes(),
            ))
            .unwrap();
        }
        t.s.release(id);
    }
    assert!(t.s.failed().is_none());
}

#[test]
fn continuation_flood_ends_the_connection() {
    let mut t = T::new();
    t.feed(&frame(frame::HEADERS, 0, 1, &get("/"))).unwrap();
    let filler = block(&[("x-filler", &"a".repeat(1000))]);
    let mut r = Ok(());
    for _ in 0..100 {
        r = t.feed(&frame(frame::CONTINUATION, 0, 1, &filler));
        if r.is_err() {
            break;
        }
    }
    assert_eq!(r.map_err(|e| e.code), Err(code::ENHANCE_YOUR_CALM));
    // Empty CONTINUATIONs are bounded too.
    let mut t = T::new();
    t.feed(&frame(frame::HEADERS, 0, 1, &get("/"))).unwrap();
    let empties: Vec<u8> = (0..300)
        .flat_map(|_| frame(frame::CONTINUATION, 0, 1, &[]))
        .collect();
    assert_eq!(
        t.feed(&empties).map_err(|e| e.code),
        Err(code::ENHANCE_YOUR_CALM)
    );
    // A block split over CONTINUATIONs is one request.
    let mut t = T::new();
    let b = get("/split");
    let (a, rest) = b.split_at(3);
    t.feed(&frame(frame::HEADERS, frame::END_STREAM, 1, a))
        .unwrap();
    assert_eq!(t.s.accept(), None);
    t.feed(&frame(frame::CONTINUATION, frame::END_HEADERS, 1, rest))
        .unwrap();
    assert_eq!(t.s.accept(), Some(1));
    assert_eq!(
        t.s.take_request(1).and_then(|r| r.path).as_deref(),
        Some(&b"/split"[..])
    );
    // Anything else in between is a connection error.
    let mut t = T::new();
    t.feed(&frame(frame::HEADERS, frame::END_STREAM, 1, a))
        .unwrap();
    let e = t
        .feed(&frame(frame::PING, 0, 0, &[0; 8]))
        .expect_err("interleaved");
    assert_eq!(e.code, code::PROTOCOL_ERROR);
}

#[test]
fn streams_beyond_the_limit_are_refused() {
    let mut t = T::new();
    for i in 0..101u32 {
        t.feed(&frame(
            frame::HEADERS,
            frame::END_HEADERS | frame::END_STREAM,
            1 + 2 * i,
            &get("/"),
        ))
        .unwrap();
    }
    assert_eq!(t.s.open_streams(), 100);
    let out = t.out();
    assert_eq!(
        out,
        [(
            frame::RST_STREAM,
            0,
            201,
            code::REFUSED_STREAM.to_be_bytes().to_vec()
        )]
    );
}

#[test]
fn input_split_anywhere_gives_the_same_result() {
    let mut all = frame::PREFACE.to_vec();
    all.extend(frame(frame::SETTINGS, 0, 0, &[]));
    all.extend(frame(
        frame::HEADERS,
        frame::END_HEADERS | frame::PADDED,
        1,
        &{
            let mut p = vec![3u8];
            p.extend(post(Some(4)));
            p.extend([0, 0, 0]);
            p
        },
    ));
    all.extend(frame(frame::DATA, frame::PADDED, 1, &[2, b'a', b'b', 0, 0]));
    all.extend(frame(frame::DATA, 0, 1, b"cd"));
    all.extend(frame(
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        1,
        &block(&[("x-t", "1")]),
    ));
    all.extend(frame(frame::PING, 0, 0, b"12345678"));
    for cut in 0..all.len() {
        let mut s = Server::new(LIMITS);
        let mut input = BytesMut::new();
        for part in [&all[..cut], &all[cut..]] {
            input.extend_from_slice(part);
            s.recv(&mut input).expect("valid input");
        }
        assert!(input.is_empty());
        assert_eq!(s.accept(), Some(1));
        let mut body = Vec::new();
        while let Body::Data(d) = s.recv_body(1) {
            body.extend_from_slice(&d);
        }
        assert_eq!(body, b"abcd", "cut at {cut}");
        assert_eq!(s.recv_body(1), Body::End);
        assert_eq!(s.take_trailers(1), Some(vec![Header::new("x-t", "1")]));
        let out = frames(&s.take_output(Vec::new()));
        assert!(out.iter().any(|f| f.0 == frame::PING && f.1 == frame::ACK));
    }
}

#[test]
fn protocol_errors_end_the_connection() {
    let cases: Vec<(Vec<u8>, u32)> = vec![
        (frame(frame::DATA, 0, 0, b"x"), code::PROTOCOL_ERROR),
        (frame(frame::DATA, 0, 9, b"x"), code::PROTOCOL_ERROR),
        (
            frame(frame::HEADERS, frame::END_HEADERS, 2, &get("/")),
            code::PROTOCOL_ERROR,
        ),
        // Found by the h2_core fuzz target: a bad PRIORITY on an even, idle stream once made a
        // RST_STREAM there.
        (
            frame(frame::PRIORITY, 0, 0x3a70_6174, &[0; 44]),
            code::FRAME_SIZE_ERROR,
        ),
        // Trailers on an even stream below the last one.
        (
            [
                frame(frame::HEADERS, frame::END_HEADERS, 5, &get("/")),
                frame(
                    frame::HEADERS,
                    frame::END_HEADERS | frame::END_STREAM,
                    2,
                    &[],
                ),
            ]
            .concat(),
            code::PROTOCOL_ERROR,
        ),
        (frame(frame::PING, 0, 0, b"123"), code::FRAME_SIZE_ERROR),
        (
            frame(frame::SETTINGS, 0, 0, &[0; 5]),
            code::FRAME_SIZE_ERROR,
        ),
        (
            frame(frame::WINDOW_UPDATE, 0, 0, &0u32.to_be_bytes()),
            code::PROTOCOL_ERROR,
        ),
        (
            frame(frame::WINDOW_UPDATE, 0, 0, &0x7fff_ffffu32.to_be_bytes()),
            code::FLOW_CONTROL_ERROR,
        ),
        (
            frame(frame::PUSH_PROMISE, 0, 1, &[0; 4]),
            code::PROTOCOL_ERROR,
        ),
        (
            frame(frame::CONTINUATION, frame::END_HEADERS, 1, &[]),
            code::PROTOCOL_ERROR,
        ),
        (
            frame(frame::HEADERS, frame::END_HEADERS, 1, &[0xff, 0xff, 0xff]),
            code::COMPRESSION_ERROR,
        ),
        (
            frame(frame::DATA, 0, 1, &vec![0; 20_000]),
            code::FRAME_SIZE_ERROR,
        ),
    ];
    for (i, (f, want)) in cases.into_iter().enumerate() {
        let mut t = T::new();
        let e = t.feed(&f).expect_err("a connection error");
        assert_eq!(e.code, want, "case {i}: {}", e.why);
        let out = t.out();
        assert_eq!(out.last().map(|f| f.0), Some(frame::GOAWAY), "case {i}");
        assert_eq!(t.feed(&frame(frame::PING, 0, 0, &[0; 8])), Err(e));
    }
    let mut s = Server::new(LIMITS);
    let mut bad = BytesMut::from(&b"GET / HTTP/1.1\r\n\r\n"[..]);
    assert_eq!(
        s.recv(&mut bad).map_err(|e| e.code),
        Err(code::PROTOCOL_ERROR)
    );
}

#[test]
fn released_streams_are_reset_as_their_state_says() {
    let mut t = T::new();
    // No response yet: CANCEL.
    t.feed(&frame(
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        1,
        &get("/"),
    ))
    .unwrap();
    t.s.release(1);
    assert_eq!(
        t.out(),
        [(frame::RST_STREAM, 0, 1, code::CANCEL.to_be_bytes().to_vec())]
    );
    // Response done, request body still coming: NO_ERROR; later DATA only feeds the window.
    t.feed(&frame(frame::HEADERS, frame::END_HEADERS, 3, &post(None)))
        .unwrap();
    t.s.send_head(3, 200, std::iter::empty(), true).unwrap();
    t.s.release(3);
    let out = t.out();
    assert_eq!(
        out[1],
        (
            frame::RST_STREAM,
            0,
            3,
            code::NO_ERROR.to_be_bytes().to_vec()
        )
    );
    t.feed(&frame(frame::DATA, 0, 3, b"late")).unwrap();
    assert_eq!(
        t.out(),
        [(frame::WINDOW_UPDATE, 0, 0, 4u32.to_be_bytes().to_vec())]
    );
    // Graceful stop: GOAWAY with the last stream, new streams refused.
    t.s.go_away();
    let out = t.out();
    assert_eq!(out[0].0, frame::GOAWAY);
    assert_eq!(&out[0].3[..4], 3u32.to_be_bytes());
    t.feed(&frame(
        frame::HEADERS,
        frame::END_HEADERS | frame::END_STREAM,
        5,
        &get("/"),
    ))
    .unwrap();
    let accepted: Vec<u32> = std::iter::from_fn(|| t.s.accept()).collect();
    assert_eq!(accepted, [1, 3]);
    assert_eq!(
        t.out(),
        [(
            frame::RST_STREAM,
            0,
            5,
            code::REFUSED_STREAM.to_be_bytes().to_vec()
        )]
    );
}
