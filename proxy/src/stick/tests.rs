use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use super::show::{clear_table, show_table};
use super::*;
use crate::config::model::{Loc, StickKey, StickStore, StickTable};

static NOW: AtomicU64 = AtomicU64::new(0);
fn now() -> u64 {
    NOW.load(Ordering::Relaxed)
}

fn cfg(key: StickKey, size: u32, store: Vec<StickStore>) -> StickTable {
    StickTable {
        key,
        size,
        expire: Some(Duration::from_secs(60)),
        store,
        peers: None,
        loc: Loc {
            file: "t.cfg".into(),
            line: 1,
        },
    }
}

fn table(name: &str, key: StickKey, size: u32) -> Arc<Table> {
    Arc::new(Table::with_clock(
        name,
        &cfg(
            key,
            size,
            vec![
                StickStore::ConnCnt,
                StickStore::ConnRate(Duration::from_secs(10)),
                StickStore::ConnCur,
                StickStore::HttpReqCnt,
                StickStore::HttpReqRate(Duration::from_secs(60)),
            ],
        ),
        now,
    ))
}

fn ip(s: &str) -> Key {
    Key::Ip(s.parse().unwrap())
}

fn addr(s: &str) -> IpAddr {
    s.parse().unwrap()
}

#[test]
fn tracking_counts_connections_and_releases() {
    let t = table("f", StickKey::Ip, 100);
    let a = t.track(ip("10.0.0.1"), 1000).unwrap();
    let b = t.track(ip("10.0.0.1"), 1100).unwrap();
    assert_eq!(a.read(StickData::ConnCur, 1200), Some(2));
    assert_eq!(a.read(StickData::ConnRate, 1200), Some(2));
    assert_eq!(a.read(StickData::SessCnt, 1200), None, "not stored");
    a.count_http_req(1200);
    assert_eq!(b.read(StickData::HttpReqRate, 1300), Some(1));
    NOW.store(2000, Ordering::Relaxed);
    drop(a);
    drop(b);
    assert_eq!(
        t.peek(Some(&ip("10.0.0.1")), StickData::ConnCur, 2000),
        Some(0)
    );
    assert_eq!(
        t.peek(Some(&ip("10.0.0.1")), StickData::ConnCnt, 2000),
        Some(2)
    );
    assert_eq!(
        t.peek(Some(&ip("10.9.9.9")), StickData::ConnCnt, 2000),
        Some(0)
    );
    // Expired 60 s after its release.
    assert_eq!(
        t.peek(Some(&ip("10.0.0.1")), StickData::ConnCnt, 62_000),
        Some(0)
    );
    assert_eq!(t.entries(62_000).len(), 0);
    assert_eq!(t.used(), 0);
}

#[test]
fn keys_follow_the_table_type() {
    let v4 = table("a", StickKey::Ip, 10);
    let v6 = table("b", StickKey::Ipv6, 10);
    assert_eq!(v4.key_of(addr("::ffff:1.2.3.4")), Some(ip("1.2.3.4")));
    assert_eq!(v4.key_of(addr("2001:db8::1")), None);
    assert_eq!(v6.key_of(addr("1.2.3.4")), Some(ip("::ffff:1.2.3.4")));
}

#[test]
fn a_full_table_evicts_the_oldest_unused_entry_and_refuses_when_all_are_held() {
    let t = table("f", StickKey::Ip, 2);
    let a = t.track(ip("10.0.0.1"), 0).unwrap();
    let b = t.track(ip("10.0.0.2"), 10).unwrap();
    assert!(t.track(ip("10.0.0.3"), 20).is_none(), "both held");
    drop(a);
    let c = t.track(ip("10.0.0.3"), 30).unwrap();
    assert_eq!(t.used(), 2);
    let keys: Vec<_> = t.entries(40).into_iter().map(|(k, _)| k).collect();
    assert_eq!(keys, vec![ip("10.0.0.2"), ip("10.0.0.3")]);
    drop((b, c));
}

#[test]
fn stick_counters_track_once() {
    let t = table("f", StickKey::Ip, 10);
    let s = StkCtrs::default();
    assert!(s.track(0, &t, ip("10.0.0.1"), 0));
    assert!(!s.track(0, &t, ip("10.0.0.1"), 0));
    assert!(s.track(1, &t, ip("10.0.0.1"), 0));
    assert!(!s.track(3, &t, ip("10.0.0.1"), 0));
    assert_eq!(s.get(0).unwrap().read(StickData::ConnCur, 0), Some(2));
}

#[test]
fn show_table_format_and_filters() {
    NOW.store(0, Ordering::Relaxed);
    let f = table("f", StickKey::Ip, 102_400);
    let g = Arc::new(Table::with_clock(
        "g",
        &cfg(
            StickKey::Ipv6,
            10,
            vec![
                StickStore::ConnRate(Duration::from_secs(10)),
                StickStore::ConnCur,
            ],
        ),
        now,
    ));
    let tables = Tables::from_tables(vec![Arc::clone(&f), Arc::clone(&g)]);
    for _ in 0..3 {
        let t = f.track(ip("127.0.0.1"), 0).unwrap();
        t.count_http_req(0);
    }
    let held = g.track(ip("::ffff:127.0.0.1"), 0).unwrap();
    let id_f = f.entries(6).first().unwrap().1.id;
    let id_g = g.entries(6).first().unwrap().1.id;
    assert_eq!(
        show_table(&tables, &[], true, 6),
        "# table: g, type: ipv6, size:10, used:1\n# table: f, type: ip, size:102400, used:1\n"
    );
    let line_f = format!(
        "{id_f:#x}: key=127.0.0.1 use=0 exp=59994 conn_cnt=3 conn_rate(10000)=3 conn_cur=0 http_req_cnt=3 http_req_rate(60000)=3\n"
    );
    assert_eq!(
        show_table(&tables, &["f"], true, 6),
        format!("# table: f, type: ip, size:102400, used:1\n{line_f}")
    );
    assert_eq!(
        show_table(&tables, &["g"], true, 268),
        format!(
            "# table: g, type: ipv6, size:10, used:1\n{id_g:#x}: key=::ffff:127.0.0.1 use=1 exp=59732 conn_rate(10000)=1 conn_cur=1\n"
        )
    );
    assert_eq!(
        show_table(&tables, &["f"], false, 6),
        "# table: f, type: ip, size:102400, used:1\n# contents not dumped due to insufficient privileges\n"
    );
    assert_eq!(show_table(&tables, &["nope"], true, 6), "No such table\n");
    assert_eq!(
        show_table(&tables, &["f", "key", "127.0.0.1"], true, 6),
        format!("# table: f, type: ip, size:102400, used:1\n{line_f}")
    );
    assert_eq!(show_table(&tables, &["f", "key", "127.0.0.2"], true, 6), "");
    assert_eq!(show_table(&tables, &["f", "key", "nope"], true, 6), "");
    assert_eq!(
        show_table(&tables, &["g", "key", "127.0.0.1"], true, 6),
        "Invalid key\n"
    );
    assert_eq!(
        show_table(&tables, &["f", "key"], true, 6),
        "Key value expected\n"
    );
    assert_eq!(
        show_table(&tables, &["f", "data.conn_cnt", "gt", "5"], true, 6),
        "# table: f, type: ip, size:102400, used:1\n"
    );
    assert_eq!(
        show_table(
            &tables,
            &["f", "data.conn_rate", "gt", "0", "data.conn_cnt", "lt", "5"],
            true,
            6
        ),
        format!("# table: f, type: ip, size:102400, used:1\n{line_f}")
    );
    assert_eq!(
        show_table(&tables, &["f", "bogus"], true, 6),
        "Optional argument only supports \"data.<store_data_type>\" <operator> <value> and key <key>\n"
    );
    assert_eq!(
        show_table(&tables, &["f", "data.foo", "gt", "1"], true, 6),
        "Filter entry #1: Unknown data type\n"
    );
    assert_eq!(
        show_table(&tables, &["f", "data.conn_cnt", "foo", "1"], true, 6),
        "Filter entry #1: Require and operator among \"eq\", \"ne\", \"le\", \"ge\", \"lt\", \"gt\"\n"
    );
    assert_eq!(
        show_table(&tables, &["f", "data.conn_cnt", "gt", "x"], true, 6),
        "Filter entry #1: Require a valid integer value to compare against\n"
    );
    assert_eq!(
        show_table(&tables, &["g", "data.http_req_rate", "gt", "0"], true, 6),
        "Filter entry #1: Data type not stored in this table\n"
    );
    // clear table: entries in use stay; below operator nothing happens.
    let usage = "Required arguments: <table> \"data.<store_data_type>\" <operator> <value> or <table> key <key>\n";
    assert_eq!(clear_table(&tables, &[], true, 6), usage);
    assert_eq!(clear_table(&tables, &["f", "bogus"], true, 6), usage);
    assert_eq!(clear_table(&tables, &["nope"], true, 6), "No such table\n");
    assert_eq!(clear_table(&tables, &["g"], true, 6), "");
    assert_eq!(g.used(), 1);
    assert_eq!(clear_table(&tables, &["f"], false, 6), "");
    assert_eq!(f.used(), 1);
    assert_eq!(
        clear_table(&tables, &["f", "key", "127.0.0.1"], true, 6),
        ""
    );
    assert_eq!(f.used(), 0);
    drop(held);
}

/// What the peers task pushes: entries changed locally since a change number, in change
/// order; what it applies from a peer is not a local change.
#[test]
fn change_numbers_and_remote_updates() {
    let t = table("f", StickKey::Ip, 100);
    assert_eq!(t.seq(), 0);
    let a = t.track(ip("10.0.0.1"), 1000).unwrap();
    let b = t.track(ip("10.0.0.2"), 1000).unwrap();
    let mark = t.seq();
    a.count_http_req(1100);
    let changed: Vec<Key> = t
        .changed_since(mark, 1100)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(changed, [ip("10.0.0.1")]);
    let all: Vec<Key> = t
        .changed_since(0, 1100)
        .into_iter()
        .map(|(k, _)| k)
        .collect();
    assert_eq!(all, [ip("10.0.0.2"), ip("10.0.0.1")]);
    drop((a, b));
    let mark = t.seq();
    let st = t.store;
    t.apply_remote(ip("10.0.0.9"), Some(5000), 2000, |e| {
        e.set_raw(&st, StickData::HttpReqCnt, Val::Int(7));
        e.set_raw(
            &st,
            StickData::ConnRate,
            Val::Freq(FreqCtr::from_parts(1500, 3, 1)),
        );
    });
    assert!(t.changed_since(mark, 2000).is_empty());
    assert_eq!(
        t.peek(Some(&ip("10.0.0.9")), StickData::HttpReqCnt, 2000),
        Some(7)
    );
    assert_eq!(
        t.peek(Some(&ip("10.0.0.9")), StickData::ConnRate, 2000),
        Some(3)
    );
    // The remote lifetime, not the table's 60 s.
    assert_eq!(
        t.peek(Some(&ip("10.0.0.9")), StickData::HttpReqCnt, 7001),
        Some(0)
    );
}

fn gp_table() -> Arc<Table> {
    Arc::new(Table::with_clock(
        "g",
        &cfg(
            StickKey::Ip,
            100,
            vec![
                StickStore::Gpt0,
                StickStore::Gpc0,
                StickStore::Gpc0Rate(Duration::from_secs(10)),
                StickStore::HttpErrCnt,
                StickStore::BytesOutCnt,
                StickStore::BytesOutRate(Duration::from_secs(10)),
                StickStore::HttpFailCnt,
            ],
        ),
        now,
    ))
}

/// `sc0_inc_gpc0` returns the new counter, `sc0_clr_gpc0` the previous one; a transaction's
/// end counts a 4xx, a 5xx except 501/505, and its bytes; `show table` in HAProxy's order.
#[test]
fn general_purpose_counters_errors_and_bytes() {
    let t = gp_table();
    let a = t.track(ip("10.0.0.1"), 1000).unwrap();
    assert_eq!(a.inc_gpc(StickData::Gpc0, 0, 1000), 1);
    assert_eq!(a.inc_gpc(StickData::Gpc0, 0, 1100), 2);
    // gpc1 is not stored: 0, nothing changes.
    assert_eq!(a.inc_gpc(StickData::Gpc1, 0, 1100), 0);
    assert_eq!(a.read(StickData::Gpc0Rate, 1200), Some(2));
    assert_eq!(a.clr_gpc(StickData::Gpc0, 0), Some(2));
    assert_eq!(a.clr_gpc(StickData::Gpc1, 0), None);
    assert_eq!(a.read(StickData::Gpc0, 1200), Some(0));
    assert!(a.set_gpt(StickData::Gpt0, 0, 7));
    a.count_end(Some(404), 10, 2000, 1200);
    a.count_end(Some(501), 10, 1000, 1200);
    a.count_end(Some(503), 10, 1000, 1200);
    a.count_end(None, 0, 0, 1200);
    assert_eq!(a.read(StickData::HttpErrCnt, 1200), Some(1));
    assert_eq!(a.read(StickData::HttpFailCnt, 1200), Some(1));
    assert_eq!(a.read(StickData::BytesOutCnt, 1200), Some(4000));
    assert_eq!(a.read(StickData::BytesOutRate, 1200), Some(4000));
    drop(a);
    let mut out = String::new();
    let entries = t.entries(1200);
    show::entry_line(&t, &entries[0].0, &entries[0].1, 1200, &mut out);
    assert!(
        out.ends_with(
            "key=10.0.0.1 use=0 exp=58800 gpt0=7 gpc0=0 gpc0_rate(10000)=2 http_err_cnt=1 bytes_out_cnt=4000 bytes_out_rate(10000)=4000 http_fail_cnt=1\n"
        ),
        "{out}"
    );
}

/// `set table`: values wrap as HAProxy's C casts do, a rate gets `v` events now.
#[test]
fn set_table_stores_values() {
    let t = gp_table();
    let tables = Tables::from_tables(vec![Arc::clone(&t)]);
    let r = show::set_table(
        &tables,
        &[
            "g",
            "key",
            "10.0.0.2",
            "data.gpt0",
            "-1",
            "data.gpc0_rate",
            "5",
        ],
        true,
        1000,
    );
    assert_eq!(r, "");
    assert_eq!(
        t.peek(Some(&ip("10.0.0.2")), StickData::Gpt0, 1000),
        Some(4294967295)
    );
    assert_eq!(
        t.peek(Some(&ip("10.0.0.2")), StickData::Gpc0Rate, 1500),
        Some(5)
    );
    assert_eq!(
        show::set_table(
            &tables,
            &["g", "key", "10.0.0.2", "data.conn_cnt", "1"],
            true,
            1000
        ),
        "Data type not stored in this table\n"
    );
    // Below level operator: nothing changes.
    show::set_table(
        &tables,
        &["g", "key", "10.0.0.3", "data.gpc0", "1"],
        false,
        1000,
    );
    assert_eq!(
        t.peek(Some(&ip("10.0.0.3")), StickData::Gpc0, 1000),
        Some(0)
    );
    assert_eq!(t.used(), 1);
}

/// Keys of the other types, cast and printed as HAProxy 2.6 does (checked against it:
/// `tests/stick_tables.rs`).
#[test]
fn string_integer_and_binary_keys() {
    use crate::ana::sample::SampleValue as S;
    use crate::ana::stkey::from_sample;
    use std::borrow::Cow;
    let s = |v: &str| S::Str(Cow::Owned(v.to_string()));
    let str8 = StickKey::String(8);
    let k = from_sample(str8, &s("hello.example.com")).unwrap();
    assert_eq!(key::text(str8, &k), "hello.ex");
    let k = from_sample(str8, &s("a b=c\\\u{e9}")).unwrap();
    assert_eq!(key::text(str8, &k), "a\\ b\\=c\\\\\\xC3\\xA9");
    let int = StickKey::Integer;
    assert_eq!(from_sample(int, &s("-3")), Some(Key::Int(4_294_967_293)));
    assert_eq!(from_sample(int, &s("foo")), Some(Key::Int(0)));
    assert_eq!(from_sample(int, &s("4294967297")), Some(Key::Int(1)));
    assert_eq!(from_sample(int, &s("")), None);
    assert_eq!(
        from_sample(int, &S::Ip(addr("1.0.0.2"))),
        Some(Key::Int(0x0100_0002))
    );
    let bin = StickKey::Binary(6);
    let k = from_sample(bin, &s("ab")).unwrap();
    assert_eq!(key::text(bin, &k), "616200000000");
    let k = from_sample(bin, &s("abcdefghij")).unwrap();
    assert_eq!(key::text(bin, &k), "616263646566");
    assert_eq!(
        key::parse_cli(int, "12abc", "Showing keys from"),
        Ok(Some(Key::Int(12)))
    );
    assert_eq!(
        key::parse_cli(int, "-1", "Showing keys from"),
        Err("Invalid key\n".into())
    );
    assert_eq!(
        key::parse_cli(int, "4294967296", "Showing keys from"),
        Err("Invalid key\n".into())
    );
    assert!(key::parse_cli(bin, "00", "Removing keys from").is_err());
    // Peers carry an integer in network order.
    assert_eq!(key::from_wire(int, &[0, 0, 1, 2]), Some(Key::Int(258)));
    assert_eq!(Key::Int(258).wire(), [0, 0, 1, 2]);
}

/// An array's elements sit in a row between the other types; `gpc0`/`gpc1` and `gpt0` fall
/// back on the arrays' elements 0 and 1 when the table stores those instead (as HAProxy).
#[test]
fn arrays_and_their_fallbacks() {
    let t = Arc::new(Table::with_clock(
        "a",
        &cfg(
            StickKey::Ip,
            10,
            vec![
                StickStore::Gpt(2),
                StickStore::Gpc(3),
                StickStore::GpcRate(2, Duration::from_secs(10)),
                StickStore::HttpReqCnt,
            ],
        ),
        now,
    ));
    let a = t.track(ip("10.0.0.1"), 1000).unwrap();
    assert_eq!(a.inc_gpc(StickData::Gpc, 2, 1000), 1);
    assert_eq!(a.inc_gpc(StickData::Gpc1, 0, 1000), 1, "gpc[1]");
    assert_eq!(a.inc_gpc(StickData::Gpc, 1, 1000), 2);
    assert_eq!(a.inc_gpc(StickData::Gpc, 3, 1000), 0, "past the array");
    assert!(a.set_gpt(StickData::Gpt0, 0, 5));
    assert!(a.set_gpt(StickData::Gpt, 1, 6));
    assert!(!a.set_gpt(StickData::Gpt, 2, 7));
    assert_eq!(a.read_at(StickData::GpcRate, 1, 1000), Some(2));
    assert_eq!(a.read_at(StickData::Gpc1Rate, 0, 1000), Some(2));
    assert_eq!(a.clr_gpc(StickData::Gpc, 1), Some(2));
    let mut out = String::new();
    let (k, e) = &t.entries(1000)[0];
    show::entry_line(&t, k, e, 1000, &mut out);
    assert!(
        out.ends_with(
            " http_req_cnt=0 gpt0=5 gpt1=6 gpc0=0 gpc1=0 gpc2=1 gpc0_rate(10000)=0 gpc1_rate(10000)=2\n"
        ),
        "{out}"
    );
}
