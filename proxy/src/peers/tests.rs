use super::wire::*;

/// The size boundaries of `doc/peers-v2.0.txt` section I, both ways.
#[test]
fn varint_boundaries_of_the_doc() {
    let cases: &[(u64, &[u8])] = &[
        (0, &[0x00]),
        (239, &[0xEF]),
        (240, &[0xF0, 0x00]),
        (2287, &[0xFF, 0x7F]),
        (2288, &[0xF0, 0x80, 0x00]),
        (264431, &[0xFF, 0xFF, 0x7F]),
        (264432, &[0xF0, 0x80, 0x80, 0x00]),
        (33818863, &[0xFF, 0xFF, 0xFF, 0x7F]),
        (33818864, &[0xF0, 0x80, 0x80, 0x80, 0x00]),
    ];
    for (v, bytes) in cases {
        let mut out = Vec::new();
        encode_varint(*v, &mut out);
        assert_eq!(out, *bytes, "encode {v}");
        assert_eq!(decode_varint(bytes), Some((*v, bytes.len())), "decode {v}");
        // One byte short is not a number yet.
        assert_eq!(decode_varint(&bytes[..bytes.len() - 1]), None);
    }
    for v in [u64::MAX, 1 << 40, 4328786160, 1234567] {
        let mut out = Vec::new();
        encode_varint(v, &mut out);
        assert_eq!(decode_varint(&out), Some((v, out.len())));
    }
}

#[test]
fn hello_and_status_lines() {
    assert_eq!(hello("lb2", "lb1", 42), "HAProxyS 2.1\nlb2\nlb1 42 1\n");
    assert_eq!(Status::Success.line(), "200\n");
    assert_eq!(Status::ErrPeer.line(), "504\n");
    let known = ["lb2", "lb3"];
    let ok = |l: [&str; 3]| check_hello(l, "lb1", &known);
    assert_eq!(
        ok(["HAProxyS 2.1", "lb1", "lb2 123 1"]),
        HelloCheck::Ok {
            peer: "lb2".into(),
            minor: 1
        }
    );
    assert_eq!(
        ok(["HAProxyS 2.0", "lb1", "lb3 1 1"]),
        HelloCheck::Ok {
            peer: "lb3".into(),
            minor: 0
        }
    );
    assert_eq!(
        ok(["HAProxy 2.1", "lb1", "lb2 1 1"]),
        HelloCheck::Refuse(Status::ErrProto)
    );
    assert_eq!(
        ok(["HAProxyS 3.0", "lb1", "lb2 1 1"]),
        HelloCheck::Refuse(Status::ErrVersion)
    );
    assert_eq!(
        ok(["HAProxyS 2.2", "lb1", "lb2 1 1"]),
        HelloCheck::Refuse(Status::ErrVersion)
    );
    assert_eq!(
        ok(["HAProxyS 2.x", "lb1", "lb2 1 1"]),
        HelloCheck::Refuse(Status::ErrVersion)
    );
    assert_eq!(
        ok(["HAProxyS 2.1", "lbX", "lb2 1 1"]),
        HelloCheck::Refuse(Status::ErrHost)
    );
    assert_eq!(
        ok(["HAProxyS 2.1", "lb1", "lb9 1 1"]),
        HelloCheck::Refuse(Status::ErrPeer)
    );
    assert_eq!(
        ok(["HAProxyS 2.1", "lb1", "lb2"]),
        HelloCheck::Refuse(Status::ErrProto)
    );
}

fn roundtrip(m: Msg) -> Vec<u8> {
    let mut out = Vec::new();
    m.encode(&mut out);
    assert_eq!(Msg::decode(&out), Ok(Some((m.clone(), out.len()))), "{m:?}");
    // Every strict prefix asks for more bytes.
    for n in 0..out.len() {
        assert_eq!(Msg::decode(&out[..n]), Ok(None), "{m:?} cut at {n}");
    }
    out
}

/// Control and error messages are two bytes: class, type.
#[test]
fn control_messages() {
    assert_eq!(roundtrip(Msg::ResyncRequest), [0, 0]);
    assert_eq!(roundtrip(Msg::ResyncFinished), [0, 1]);
    assert_eq!(roundtrip(Msg::ResyncPartial), [0, 2]);
    assert_eq!(roundtrip(Msg::ResyncConfirm), [0, 3]);
    assert_eq!(roundtrip(Msg::Heartbeat), [0, 4]);
    assert_eq!(roundtrip(Msg::ErrProtocol), [1, 0]);
    assert_eq!(roundtrip(Msg::ErrSizeLimit), [1, 1]);
    assert_eq!(Msg::decode(&[255, 0]), Err(WireError::Reserved));
    assert_eq!(
        Msg::decode(&[0, 9, 0, 4]),
        Ok(Some((Msg::Other { class: 0, kind: 9 }, 2)))
    );
}

/// `table t type ip size 1k expire 30s store conn_cnt,http_req_rate(10s)` as HAProxy 2.6
/// defines it: id, name, type 4 (IPv4), key length 4, bits 4 and 10, the expiry, then the
/// rate's period prefixed by its type number.
#[test]
fn table_definition() {
    let def = TableDef {
        id: 1,
        name: "t".into(),
        key_type: KEY_IPV4,
        key_len: 4,
        data: (1 << 4) | (1 << 10),
        expire: Some(30000),
        params: vec![(10, vec![10000])],
    };
    let bytes = roundtrip(Msg::Define(def.clone()));
    let mut want = vec![10, 0x82];
    let mut body = vec![1, 1, b't', 4, 4];
    encode_varint((1 << 4) | (1 << 10), &mut body);
    encode_varint(30000, &mut body);
    body.push(10);
    encode_varint(10000, &mut body);
    encode_varint(body.len() as u64, &mut want);
    want.extend_from_slice(&body);
    assert_eq!(bytes, want);
    // Without the expiry (HAProxy before 1.9) the parameters are absent too.
    let old = TableDef {
        expire: None,
        params: vec![],
        ..def
    };
    roundtrip(Msg::Define(old));
}

#[test]
fn updates_acks_and_switches() {
    let def = TableDef {
        id: 3,
        name: "be".into(),
        key_type: KEY_IPV4,
        key_len: 4,
        data: (1 << 4) | (1 << 6) | (1 << 10),
        expire: Some(60000),
        params: vec![(10, vec![10000])],
    };
    let e = EntryData {
        key: vec![127, 0, 0, 1],
        values: vec![
            (4, Value::Int(7)),
            (6, Value::Int(1)),
            (
                10,
                Value::Freq {
                    age_ms: 1500,
                    curr: 3,
                    prev: 250,
                },
            ),
        ],
    };
    let mut body = Vec::new();
    encode_entry(def.key_type, &e, &mut body);
    let mut want_body = vec![127, 0, 0, 1, 7, 1];
    encode_varint(1500, &mut want_body);
    want_body.extend_from_slice(&[3]);
    encode_varint(250, &mut want_body);
    assert_eq!(body, want_body);
    assert_eq!(decode_entry(&def, &body), Ok(e));
    // Absolute id (0x80), incremental (0x81), and the timed kinds (0x85, 0x86).
    let abs = roundtrip(Msg::Update {
        id: Some(0x0102_0304),
        expire: None,
        body: body.clone(),
    });
    assert_eq!(&abs[..7], &[10, 0x80, (4 + body.len()) as u8, 1, 2, 3, 4]);
    let inc = roundtrip(Msg::Update {
        id: None,
        expire: None,
        body: body.clone(),
    });
    assert_eq!(&inc[..2], &[10, 0x81]);
    let timed = roundtrip(Msg::Update {
        id: Some(9),
        expire: Some(30000),
        body: body.clone(),
    });
    assert_eq!(
        &timed[..11],
        &[
            10,
            0x85,
            (8 + body.len()) as u8,
            0,
            0,
            0,
            9,
            0,
            0,
            0x75,
            0x30
        ]
    );
    let inct = roundtrip(Msg::Update {
        id: None,
        expire: Some(1),
        body,
    });
    assert_eq!(&inct[..2], &[10, 0x86]);
    assert_eq!(
        roundtrip(Msg::Ack {
            table: 3,
            update: 258
        }),
        [10, 0x84, 5, 3, 0, 0, 1, 2]
    );
    assert_eq!(roundtrip(Msg::Switch { table: 3 }), [10, 0x83, 1, 3]);
    // A truncated body is an error once the length says it is all there.
    assert_eq!(Msg::decode(&[10, 0x84, 2, 3, 0]), Err(WireError::Malformed));
    assert_eq!(decode_entry(&def, &[127, 0, 0]), Err(WireError::Malformed));
    let mut big = vec![10, 0x80];
    encode_varint(MAX_BODY + 1, &mut big);
    assert_eq!(Msg::decode(&big), Err(WireError::TooLarge));
}

/// Arrays travel element by element under their type; the `server_key` dictionary portcullis
/// does not store is read past.
#[test]
fn arrays_are_decoded_and_the_dictionary_skipped() {
    let def = TableDef {
        id: 1,
        name: "t".into(),
        key_type: KEY_IPV4,
        key_len: 4,
        data: (1 << 2) | (1 << 19) | (1 << 23),
        expire: Some(1000),
        params: vec![(23, vec![2])],
    };
    roundtrip(Msg::Define(def.clone()));
    // gpc0 = 5, server_key: 3 bytes (id 1, len 1, "s"), gpc[2] = 8, 9.
    let body = [10, 0, 0, 1, 5, 3, 1, 1, b's', 8, 9];
    let e = decode_entry(&def, &body).unwrap();
    assert_eq!(e.key, [10, 0, 0, 1]);
    assert_eq!(
        e.values,
        [(2, Value::Int(5)), (23, Value::Int(8)), (23, Value::Int(9))]
    );
    let idx: Vec<_> = indexed(&e.values).map(|(d, i, _)| (d, i)).collect();
    assert_eq!(idx, [(2, 0), (23, 0), (23, 1)]);
    assert_eq!(data_type_id("http_req_rate"), Some(10));
    assert_eq!(data_type_id("gpc_rate"), Some(24));
}

/// A reload under load: the new process counts requests on an entry while the previous one
/// still sends what it counted; nothing is lost, nothing counted twice, and a plain peer's
/// update (not the previous process) replaces the values.
#[test]
fn handover_updates_add_to_what_the_new_process_counted() {
    use crate::config::model::{Loc, StickKey, StickStore, StickTable};
    use crate::stick::{StickData, Table};
    use std::collections::HashMap;
    use std::time::Duration;
    let cfg = StickTable {
        key: StickKey::Ip,
        size: 10,
        expire: Some(Duration::from_secs(60)),
        store: vec![
            StickStore::Gpt0,
            StickStore::ConnCnt,
            StickStore::HttpReqRate(Duration::from_secs(60)),
        ],
        peers: None,
        loc: Loc {
            file: "t.cfg".into(),
            line: 1,
        },
    };
    fn clock() -> u64 {
        1000
    }
    let (old, new) = (
        Table::with_clock("f", &cfg, clock),
        std::sync::Arc::new(Table::with_clock("f", &cfg, clock)),
    );
    let ip = crate::stick::Key::Ip("10.0.0.1".parse().unwrap());
    let now = 1000;
    // The old process counted 3 requests; the new one 2 meanwhile.
    let t_old = std::sync::Arc::new(old);
    for _ in 0..3 {
        let t = t_old.track(ip.clone(), now).unwrap();
        t.count_http_req(now);
    }
    for _ in 0..2 {
        let t = new.track(ip.clone(), now).unwrap();
        t.count_http_req(now);
    }
    let send = |t: &Table| {
        let e = t.entries(now).into_iter().next().unwrap();
        super::task::entry_data(t, &e.0, &e.1, now)
    };
    let mut last = HashMap::new();
    super::task::apply_handover(&new, &send(&t_old), None, now, &mut last);
    let read = |d| new.peek(Some(&ip), d, now).unwrap();
    assert_eq!(read(StickData::ConnCnt), 5);
    assert_eq!(read(StickData::HttpReqRate), 5);
    // One more on the old process (a draining session), then its update again.
    t_old.track(ip.clone(), now).unwrap().count_http_req(now);
    t_old.update(ip.clone(), now, |e, st| e.set(st, StickData::Gpt0, 7));
    super::task::apply_handover(&new, &send(&t_old), None, now, &mut last);
    assert_eq!(read(StickData::ConnCnt), 6);
    assert_eq!(read(StickData::HttpReqRate), 6);
    assert_eq!(read(StickData::Gpt0), 7);
    // The same update twice adds nothing.
    super::task::apply_handover(&new, &send(&t_old), None, now, &mut last);
    assert_eq!(read(StickData::ConnCnt), 6);
    // A remote peer's update is the peer's truth.
    super::task::apply(&new, &send(&t_old), None, now);
    assert_eq!(read(StickData::ConnCnt), 4);
}
