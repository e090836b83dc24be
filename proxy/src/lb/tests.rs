use super::*;
use std::net::{Ipv4Addr, Ipv6Addr};

/// Live state as the model would expose it.
#[derive(Clone)]
struct View {
    up: Vec<bool>,
    conns: Vec<u32>,
    weight: Vec<u32>,
}

impl View {
    fn of(servers: &[LbServer]) -> View {
        View {
            up: vec![true; servers.len()],
            conns: vec![0; servers.len()],
            weight: servers.iter().map(|s| s.weight).collect(),
        }
    }
}

impl ServerView for View {
    fn usable(&self, idx: usize) -> bool {
        self.up.get(idx).copied().unwrap_or(false)
    }
    fn conns(&self, idx: usize) -> u32 {
        self.conns.get(idx).copied().unwrap_or(0)
    }
    fn weight(&self, idx: usize) -> u32 {
        self.weight.get(idx).copied().unwrap_or(0)
    }
}

fn servers(weights: &[u32]) -> Vec<LbServer> {
    weights
        .iter()
        .enumerate()
        .map(|(i, &weight)| LbServer {
            id: i as u32 + 1,
            weight,
            backup: false,
            maxconn: None,
        })
        .collect()
}

fn picks(lb: &Lb, cursor: &AtomicU64, view: &View, n: usize) -> Vec<usize> {
    (0..n)
        .map(|_| lb.pick(cursor, view, None).unwrap())
        .collect()
}

fn counts(seq: &[usize], n: usize) -> Vec<usize> {
    let mut c = vec![0; n];
    for &i in seq {
        c[i] += 1;
    }
    c
}

/// Largest spread between the given servers' counts over every prefix of `seq`.
fn max_prefix_spread(seq: &[usize], among: &[usize]) -> usize {
    let mut c = vec![0usize; among.iter().max().unwrap() + 1];
    let mut worst = 0;
    for &i in seq {
        c[i] += 1;
        let vals: Vec<usize> = among.iter().map(|&s| c[s]).collect();
        worst = worst.max(vals.iter().max().unwrap() - vals.iter().min().unwrap());
    }
    worst
}

#[test]
fn roundrobin_follows_the_smooth_sequence() {
    let s = servers(&[5, 1, 1]);
    let lb = Lb::new(&Balance::Roundrobin, &s, false);
    let cursor = AtomicU64::new(0);
    let seq = picks(&lb, &cursor, &View::of(&s), 14);
    assert_eq!(seq, [0, 0, 1, 0, 2, 0, 0, 0, 0, 1, 0, 2, 0, 0]);
}

#[test]
fn equal_weights_spread_exactly() {
    let s = servers(&[1, 1, 1, 1]);
    let lb = Lb::new(&Balance::Roundrobin, &s, false);
    let cursor = AtomicU64::new(0);
    let seq = picks(&lb, &cursor, &View::of(&s), 1000);
    assert_eq!(counts(&seq, 4), [250, 250, 250, 250]);
    assert_eq!(max_prefix_spread(&seq, &[0, 1, 2, 3]), 1);
    // Equal non-unit weights behave the same (GCD-reduced).
    let s = servers(&[200, 200, 200]);
    let lb = Lb::new(&Balance::StaticRr, &s, false);
    let seq = picks(&lb, &AtomicU64::new(0), &View::of(&s), 9);
    assert_eq!(seq, [0, 1, 2, 0, 1, 2, 0, 1, 2]);
}

#[test]
fn weights_are_exact_over_whole_cycles() {
    let s = servers(&[5, 1, 1]);
    let lb = Lb::new(&Balance::Roundrobin, &s, false);
    let seq = picks(&lb, &AtomicU64::new(0), &View::of(&s), 700);
    assert_eq!(counts(&seq, 3), [500, 100, 100]);
    let s = servers(&[3, 2]);
    let lb = Lb::new(&Balance::StaticRr, &s, false);
    let seq = picks(&lb, &AtomicU64::new(0), &View::of(&s), 50);
    assert_eq!(counts(&seq, 2), [30, 20]);
}

#[test]
fn interleaved_workers_share_one_cursor_within_one() {
    let s = servers(&[1, 1, 1]);
    let lb = Lb::new(&Balance::Roundrobin, &s, false);
    let view = View::of(&s);
    let cursor = AtomicU64::new(0);
    // Two workers taking uneven turns: A picks 1, B picks 2, A picks 3, ...
    let (mut a, mut b, mut global) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..200 {
        let (worker, n) = if round % 2 == 0 {
            (&mut a, 1 + round % 3)
        } else {
            (&mut b, 2)
        };
        for _ in 0..n {
            let i = lb.pick(&cursor, &view, None).unwrap();
            worker.push(i);
            global.push(i);
        }
    }
    assert_eq!(max_prefix_spread(&global, &[0, 1, 2]), 1);
    assert_eq!(global.len(), 399);
    assert_eq!(counts(&global, 3), [133, 133, 133]);
    assert_eq!(a.len() + b.len(), 399);

    // Real threads: whatever the interleaving, the totals are exact.
    let cursor = AtomicU64::new(0);
    let per_thread: Vec<Vec<usize>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2)
            .map(|_| scope.spawn(|| counts(&picks(&lb, &cursor, &view, 3000), 3)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let total: Vec<usize> = (0..3)
        .map(|i| per_thread[0][i] + per_thread[1][i])
        .collect();
    assert_eq!(total, [2000, 2000, 2000]);
}

#[test]
fn down_server_is_skipped_and_the_rest_stay_balanced() {
    let s = servers(&[1, 1, 1]);
    let lb = Lb::new(&Balance::Roundrobin, &s, false);
    let mut view = View::of(&s);
    view.up[1] = false;
    let seq = picks(&lb, &AtomicU64::new(0), &view, 600);
    assert_eq!(counts(&seq, 3), [300, 0, 300]);
    assert_eq!(max_prefix_spread(&seq, &[0, 2]), 1);

    // Weighted: table a b a c b a without `a` is b c b.
    let s = servers(&[3, 2, 1]);
    let lb = Lb::new(&Balance::StaticRr, &s, false);
    let mut view = View::of(&s);
    view.up[0] = false;
    let seq = picks(&lb, &AtomicU64::new(0), &view, 600);
    assert_eq!(counts(&seq, 3), [0, 400, 200]);
}

#[test]
fn full_and_draining_servers_are_skipped() {
    let mut s = servers(&[1, 1, 1]);
    s[0].maxconn = Some(2);
    let lb = Lb::new(&Balance::Roundrobin, &s, false);
    let mut view = View::of(&s);
    view.conns[0] = 2;
    let seq = picks(&lb, &AtomicU64::new(0), &view, 100);
    assert_eq!(counts(&seq, 3), [0, 50, 50]);
    view.conns[0] = 1;
    let seq = picks(&lb, &AtomicU64::new(0), &view, 99);
    assert_eq!(counts(&seq, 3), [33, 33, 33]);

    // Drain (effective weight 0) before and after a rebuild.
    let mut view = View::of(&s);
    view.weight[2] = 0;
    let seq = picks(&lb, &AtomicU64::new(0), &view, 100);
    assert_eq!(counts(&seq, 3), [50, 50, 0]);
    let rebuilt = lb.rebuild(&view);
    let seq = picks(&rebuilt, &AtomicU64::new(0), &view, 4);
    assert_eq!(seq, [0, 1, 0, 1]);

    // Every server full: nothing to pick, but the backend is not down.
    let mut view = View::of(&s);
    s.iter().enumerate().for_each(|(i, _)| view.conns[i] = 5);
    let mut s2 = s.clone();
    s2.iter_mut().for_each(|x| x.maxconn = Some(5));
    let lb = Lb::new(&Balance::Roundrobin, &s2, false);
    assert_eq!(lb.pick(&AtomicU64::new(0), &view, None), None);
    assert!(lb.has_usable(&view));
}

#[test]
fn rebuild_takes_effective_weights_and_state() {
    let s = servers(&[1, 1]);
    let lb = Lb::new(&Balance::Roundrobin, &s, false);
    let mut view = View::of(&s);
    view.weight[0] = 3;
    let lb = lb.rebuild(&view);
    let seq = picks(&lb, &AtomicU64::new(0), &view, 400);
    assert_eq!(counts(&seq, 2), [300, 100]);
    view.up[0] = false;
    let lb = lb.rebuild(&view);
    assert_eq!(picks(&lb, &AtomicU64::new(0), &view, 3), [1, 1, 1]);
    // Weights above 256 are clamped: 1000 and 256 weigh the same.
    let s = servers(&[1000, 256]);
    let lb = Lb::new(&Balance::Roundrobin, &s, false);
    assert_eq!(
        picks(&lb, &AtomicU64::new(0), &View::of(&s), 4),
        [0, 1, 0, 1]
    );
}

#[test]
fn leastconn_picks_the_lowest_load_per_weight() {
    let s = servers(&[1, 1, 1]);
    let lb = Lb::new(&Balance::Leastconn, &s, false);
    let cursor = AtomicU64::new(0);
    let mut view = View::of(&s);
    view.conns = vec![5, 2, 3];
    assert_eq!(lb.pick(&cursor, &view, None), Some(1));
    view.up[1] = false;
    assert_eq!(lb.pick(&cursor, &view, None), Some(2));

    // conns / weight: 4/4 = 1 beats 3/1; 8/2 = 4 loses to 3/1.
    let s = servers(&[4, 1]);
    let lb = Lb::new(&Balance::Leastconn, &s, false);
    let mut view = View::of(&s);
    view.conns = vec![4, 3];
    assert_eq!(lb.pick(&cursor, &view, None), Some(0));
    view.weight[0] = 2;
    view.conns = vec![8, 3];
    assert_eq!(lb.pick(&cursor, &view, None), Some(1));
    // Draining: never chosen, even idle.
    view.weight[0] = 0;
    view.conns = vec![0, 100];
    assert_eq!(lb.pick(&cursor, &view, None), Some(1));
}

#[test]
fn leastconn_ties_rotate_with_the_cursor() {
    let mut s = servers(&[1, 1, 1, 1]);
    s[3].maxconn = Some(1);
    let lb = Lb::new(&Balance::Leastconn, &s, false);
    let mut view = View::of(&s);
    view.conns = vec![1, 1, 1, 1];
    let seq = picks(&lb, &AtomicU64::new(0), &view, 6);
    // Server 3 is at its maxconn; the three tied ones take turns.
    assert_eq!(seq, [0, 1, 2, 0, 1, 2]);
}

#[test]
fn first_fills_servers_in_id_order() {
    let mut s = servers(&[1, 1, 1]);
    // Configuration order differs from id order: ids 3, 1, 2.
    s[0].id = 3;
    s[1].id = 1;
    s[2].id = 2;
    s.iter_mut().for_each(|x| x.maxconn = Some(2));
    let lb = Lb::new(&Balance::First, &s, false);
    let cursor = AtomicU64::new(0);
    let mut view = View::of(&s);
    assert_eq!(lb.pick(&cursor, &view, None), Some(1));
    view.conns = vec![0, 2, 1];
    assert_eq!(lb.pick(&cursor, &view, None), Some(2));
    view.conns = vec![0, 2, 2];
    assert_eq!(lb.pick(&cursor, &view, None), Some(0));
    view.conns = vec![2, 2, 2];
    assert_eq!(lb.pick(&cursor, &view, None), None);
    assert!(lb.has_usable(&view));
    // Down or draining servers are passed over.
    view.conns = vec![0, 0, 0];
    view.up[1] = false;
    view.weight[2] = 0;
    assert_eq!(lb.pick(&cursor, &view, None), Some(0));
    // Without maxconn the first server takes everything.
    let s = servers(&[1, 1]);
    let lb = Lb::new(&Balance::First, &s, false);
    let mut view = View::of(&s);
    view.conns = vec![1000, 0];
    assert_eq!(lb.pick(&cursor, &view, None), Some(0));
}

/// The key `balance source` hashes (map-based, no avalanche: the default `hash-type`).
fn k(ip: IpAddr) -> Option<u32> {
    Some(source_hash(ip))
}

fn v4(n: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(n))
}

#[test]
fn source_is_stable_per_client() {
    let s = servers(&[1, 1, 1]);
    let lb = Lb::new(&Balance::Source, &s, false);
    let view = View::of(&s);
    let cursor = AtomicU64::new(0);
    let ip: IpAddr = "192.0.2.7".parse().unwrap();
    let first = lb.pick(&cursor, &view, k(ip)).unwrap();
    for _ in 0..20 {
        assert_eq!(lb.pick(&cursor, &view, k(ip)), Some(first));
    }
    // Same answer from a rebuilt Lb.
    let rebuilt = lb.rebuild(&view);
    assert_eq!(rebuilt.pick(&cursor, &view, k(ip)), Some(first));
    // HAProxy's get_server_sh: the address words XORed, a v4-mapped IPv6 address as it is.
    assert_eq!(source_hash(v4(0x0a00_0001)), 0x0a00_0001);
    assert_eq!(
        source_hash("::ffff:10.0.0.1".parse().unwrap()),
        0x0a00_0001 ^ 0xffff
    );
    assert_eq!(
        source_hash("2001:db8::1:2".parse().unwrap()),
        0x2001_0db8 ^ 0x0001_0002
    );
    // No client address: roundrobin.
    assert_eq!(picks(&lb, &AtomicU64::new(0), &view, 4), [0, 1, 2, 0]);
}

#[test]
fn source_spreads_by_weight() {
    let s = servers(&[3, 1]);
    let lb = Lb::new(&Balance::Source, &s, false);
    let view = View::of(&s);
    let cursor = AtomicU64::new(0);
    let mut c = [0u32; 2];
    for n in 0..20_000u32 {
        c[lb.pick(&cursor, &view, k(v4(0x0a00_0000 + n))).unwrap()] += 1;
    }
    assert!((14_400..=15_600).contains(&c[0]), "{c:?}");
    let s = servers(&[1, 1, 1]);
    let lb = Lb::new(&Balance::Source, &s, false);
    let view = View::of(&s);
    let mut c = [0u32; 3];
    for n in 0..30_000u128 {
        let ip = IpAddr::V6(Ipv6Addr::from((0x2001_0db8u128 << 96) | (n << 64) | 1));
        c[lb.pick(&cursor, &view, k(ip)).unwrap()] += 1;
    }
    for x in c {
        assert!((9_400..=10_600).contains(&x), "{c:?}");
    }
}

#[test]
fn source_moves_only_the_clients_of_a_down_server() {
    let s = servers(&[1, 1, 1]);
    let lb = Lb::new(&Balance::Source, &s, false);
    let mut view = View::of(&s);
    let cursor = AtomicU64::new(0);
    let before: Vec<usize> = (0..3000)
        .map(|n| lb.pick(&cursor, &view, k(v4(n))).unwrap())
        .collect();
    view.up[1] = false;
    let mut moved = [0u32; 3];
    for (n, &was) in before.iter().enumerate() {
        let now = lb.pick(&cursor, &view, k(v4(n as u32))).unwrap();
        assert_ne!(now, 1);
        if was != 1 {
            assert_eq!(now, was, "client {n} moved");
        } else {
            moved[now] += 1;
        }
    }
    assert!(moved[0] + moved[2] > 0);
}

fn with_backups(flags: &[bool]) -> Vec<LbServer> {
    let mut s = servers(&vec![1; flags.len()]);
    for (srv, &b) in s.iter_mut().zip(flags) {
        srv.backup = b;
    }
    s
}

#[test]
fn backups_only_when_no_active_is_usable() {
    let s = with_backups(&[false, false, true, true]);
    let lb = Lb::new(&Balance::Roundrobin, &s, false);
    let mut view = View::of(&s);
    let cursor = AtomicU64::new(0);
    assert_eq!(counts(&picks(&lb, &cursor, &view, 10), 4), [5, 5, 0, 0]);
    view.up[0] = false;
    assert_eq!(counts(&picks(&lb, &cursor, &view, 10), 4), [0, 10, 0, 0]);
    // Actives down (or drained): the first usable backup only.
    view.weight[1] = 0;
    assert_eq!(counts(&picks(&lb, &cursor, &view, 10), 4), [0, 0, 10, 0]);
    view.up[2] = false;
    assert_eq!(counts(&picks(&lb, &cursor, &view, 10), 4), [0, 0, 0, 10]);
    view.up[3] = false;
    assert_eq!(lb.pick(&cursor, &view, None), None);
    assert!(!lb.has_usable(&view));

    // An active server that is up but full means "queue", not "use the backups".
    let mut s = with_backups(&[false, true]);
    s[0].maxconn = Some(1);
    let lb = Lb::new(&Balance::Leastconn, &s, false);
    let mut view = View::of(&s);
    view.conns[0] = 1;
    assert_eq!(lb.pick(&cursor, &view, None), None);
}

#[test]
fn allbackups_balances_every_usable_backup() {
    let s = with_backups(&[false, true, true, true]);
    let lb = Lb::new(&Balance::Roundrobin, &s, true);
    let mut view = View::of(&s);
    view.up[0] = false;
    view.up[2] = false;
    let cursor = AtomicU64::new(0);
    assert_eq!(counts(&picks(&lb, &cursor, &view, 100), 4), [0, 50, 0, 50]);
    let lb = Lb::new(&Balance::Leastconn, &s, true);
    view.conns = vec![0, 3, 0, 1];
    assert_eq!(lb.pick(&cursor, &view, None), Some(3));
    let lb = Lb::new(&Balance::First, &s, false);
    assert_eq!(lb.pick(&cursor, &view, None), Some(1));
    // Once the active server is back, backups get nothing.
    view.up[0] = true;
    let lb = Lb::new(&Balance::Roundrobin, &s, true);
    assert_eq!(counts(&picks(&lb, &cursor, &view, 10), 4), [10, 0, 0, 0]);
}

#[test]
fn redispatch_avoids_the_failed_server() {
    let s = servers(&[1, 1, 1]);
    let view = View::of(&s);
    let cursor = AtomicU64::new(0);
    let rr = Lb::new(&Balance::Roundrobin, &s, false);
    let seq: Vec<usize> = (0..300)
        .map(|_| rr.pick_excluding(&cursor, &view, None, Some(0)).unwrap())
        .collect();
    assert_eq!(counts(&seq, 3), [0, 150, 150]);

    let lc = Lb::new(&Balance::Leastconn, &s, false);
    let mut busy = view.clone();
    busy.conns = vec![0, 2, 1];
    assert_eq!(lc.pick_excluding(&cursor, &busy, None, Some(0)), Some(2));

    let first = Lb::new(&Balance::First, &s, false);
    assert_eq!(first.pick_excluding(&cursor, &view, None, Some(0)), Some(1));

    let src = Lb::new(&Balance::Source, &s, false);
    let ip = v4(0xc000_0207);
    let usual = src.pick(&cursor, &view, k(ip)).unwrap();
    let other = src.pick_excluding(&cursor, &view, k(ip), Some(usual));
    assert!(other.is_some() && other != Some(usual));
    assert_eq!(
        src.pick_excluding(&cursor, &view, k(ip), Some(usual)),
        other
    );

    // The failed server is the only one left: it is retried.
    let mut alone = view.clone();
    alone.up = vec![true, false, false];
    for lb in [&rr, &lc, &first, &src] {
        assert_eq!(lb.pick_excluding(&cursor, &alone, k(ip), Some(0)), Some(0));
    }
}

#[test]
fn nothing_to_pick_never_panics() {
    let cursor = AtomicU64::new(u64::MAX);
    let algos = [
        Balance::Roundrobin,
        Balance::StaticRr,
        Balance::Leastconn,
        Balance::First,
        Balance::Source,
    ];
    let ip = k(v4(1));
    for algo in &algos {
        let empty = Lb::new(algo, &[], true);
        let view = View::of(&[]);
        assert_eq!(empty.pick(&cursor, &view, ip), None);
        assert_eq!(empty.pick_excluding(&cursor, &view, None, Some(3)), None);
        assert!(!empty.has_usable(&view));

        let zero = servers(&[0, 0]);
        let lb = Lb::new(algo, &zero, false);
        let view = View::of(&zero);
        assert_eq!(lb.pick(&cursor, &view, ip), None);
        assert_eq!(lb.rebuild(&view).pick(&cursor, &view, None), None);

        // A view that knows fewer servers than the Lb: those count as unusable.
        let s = servers(&[1, 1]);
        let lb = Lb::new(algo, &s, false);
        let short = View::of(&s[..1]);
        assert_eq!(lb.pick(&cursor, &short, ip), Some(0));
    }
}

#[test]
fn from_config_copies_the_balancing_fields() {
    use crate::config::model::{Loc, ServerOpts};
    let server = Server {
        name: "s1".into(),
        addr: "127.0.0.1:80".parse().unwrap(),
        fqdn: None,
        unix: None,
        unresolved: false,
        id: 7,
        opts: ServerOpts {
            weight: 20,
            maxconn: Some(30),
            backup: true,
            ..ServerOpts::default()
        },
        loc: Loc {
            file: "t.cfg".into(),
            line: 1,
        },
    };
    assert_eq!(
        LbServer::from_config(&server),
        LbServer {
            id: 7,
            weight: 20,
            backup: true,
            maxconn: Some(30)
        }
    );
}

/// HAProxy's `recalc_server_map` order (worked by hand from lb_map.c; the differential test
/// `lb_hash` checks it against HAProxy): the first server leads, ties go to the earlier one.
#[test]
fn haproxy_map_matches_recalc_server_map() {
    assert_eq!(haproxy_map(&[(0, 1), (1, 1), (2, 1)], 3), [0, 1, 2]);
    assert_eq!(
        haproxy_map(&[(0, 1), (1, 2), (2, 3), (3, 1)], 7),
        [0, 1, 2, 1, 2, 2, 3]
    );
    assert_eq!(haproxy_map(&[(0, 3), (1, 1)], 4), [0, 0, 0, 1]);
    assert_eq!(haproxy_map(&[(4, 2)], 1), [4]);
    assert!(haproxy_map(&[], 0).is_empty());
    // Map weights are the configured ones divided by their GCD (2, 4, 6, 2 → 1, 2, 3, 1).
    let s = servers(&[2, 4, 6, 2]);
    let lb = Lb::with_hash(
        &Balance::Uri {
            len: 0,
            depth: 0,
            whole: false,
            path_only: false,
        },
        HashType::default(),
        &s,
        false,
    );
    assert_eq!(&*lb.active.map, [0, 1, 2, 1, 2, 2, 3]);
    // ... and keep that divisor when a server goes down.
    let mut view = View::of(&s);
    view.up[2] = false;
    assert_eq!(&*lb.rebuild(&view).active.map, [0, 1, 1, 3]);
}

#[test]
fn hash_keys_as_haproxy_cuts_them() {
    assert_eq!(uri_key(b"/a/b/c?x=1", 0, 0, false), b"/a/b/c");
    assert_eq!(uri_key(b"/a/b/c?x=1", 0, 0, true), b"/a/b/c?x=1");
    assert_eq!(uri_key(b"/a/b/c?x=1", 0, 2, false), b"/a/b");
    assert_eq!(uri_key(b"/a/b/c?x=1", 4, 0, false), b"/a/b");
    assert_eq!(uri_path("http://h:8/p?q"), "/p?q");
    assert_eq!(uri_path("http://h"), "");
    assert_eq!(uri_path("*"), "");
    assert_eq!(url_param(b"/p?a=1&k=v&k=w", b"k"), Some(&b"v"[..]));
    assert_eq!(url_param(b"/p?kk=1&k=", b"k"), Some(&b""[..]));
    assert_eq!(url_param(b"/p?a=1", b"k"), None);
    assert_eq!(url_param(b"/p", b"k"), None);
    assert_eq!(main_domain(b"www.example.com"), b"example");
    assert_eq!(main_domain(b"example.com"), b"example");
    assert_eq!(main_domain(b"localhost"), b"localhost");
    let mut req = RequestHead {
        method: "GET".into(),
        target: "/".into(),
        version: crate::http::head::Version::Http11,
        headers: Default::default(),
    };
    req.headers.append("x-k", "  a b , c");
    assert_eq!(header_value(&req, "x-k"), Some(&b"a b"[..]));
    req.headers.append("x-e", " ,c");
    assert_eq!(header_value(&req, "x-e"), None);
}

/// HAProxy's ring: `weight × 16` points per server at `full_hash(id × 4096 + n)`; a hash goes to
/// the nearest point and the clients of a removed server are the only ones to move.
#[test]
fn consistent_ring_is_haproxy_s() {
    let s = servers(&[1, 2]);
    let algo = Balance::Hdr {
        name: "x".into(),
        domain_only: false,
    };
    let consistent = HashType {
        consistent: true,
        avalanche: true,
        ..HashType::default()
    };
    let lb = Lb::with_hash(&algo, consistent, &s, false);
    assert_eq!(lb.active.ring.len(), 48);
    let first = full_hash(4096);
    assert!(lb.active.ring.contains(&(first, 0)));
    assert!(lb.active.ring.contains(&(full_hash(2 * 4096 + 31), 1)));
    let view = View::of(&s);
    let cursor = AtomicU64::new(0);
    // Exactly on a point: that point's server.
    assert_eq!(lb.pick(&cursor, &view, Some(first)), Some(0));
    let mut three = servers(&[1, 1, 1]);
    three[2].id = 9;
    let lb3 = Lb::with_hash(&algo, consistent, &three, false);
    let mut down = View::of(&three);
    let before: Vec<usize> = (0..2000u32)
        .map(|n| lb3.pick(&cursor, &down, Some(full_hash(n))).unwrap())
        .collect();
    down.up[1] = false;
    let after = lb3.rebuild(&down);
    for (n, &was) in before.iter().enumerate() {
        let now = after
            .pick(&cursor, &down, Some(full_hash(n as u32)))
            .unwrap();
        if was != 1 {
            assert_eq!(now, was);
        }
    }
}

#[test]
fn random_prefers_the_less_loaded_draw() {
    let s = servers(&[1, 1]);
    let lb = Lb::new(&Balance::Random { draws: 2 }, &s, false);
    let mut view = View::of(&s);
    view.conns = vec![50, 0];
    let cursor = AtomicU64::new(0);
    let mut c = [0u32; 2];
    for _ in 0..2000 {
        c[lb.pick(&cursor, &view, None).unwrap()] += 1;
    }
    // Server 0 wins only when both draws land on it (about a quarter of the time).
    assert!(c[1] > 1300, "{c:?}");
    let one = Lb::new(&Balance::Random { draws: 1 }, &s, false);
    view.conns = vec![0, 0];
    let mut c = [0u32; 2];
    for _ in 0..2000 {
        c[one.pick(&cursor, &view, None).unwrap()] += 1;
    }
    assert!(c[0] > 700 && c[1] > 700, "{c:?}");
}

/// `hash-balance-factor` as chash_server_is_eligible: with 125, two equal servers and 10
/// streams on the first, its share is 7 slots, so every key goes to the second.
#[test]
fn balance_factor_bounds_loads_on_the_ring() {
    let s = servers(&[1, 1]);
    let algo = Balance::Uri {
        len: 0,
        depth: 0,
        whole: false,
        path_only: false,
    };
    let consistent = HashType {
        consistent: true,
        avalanche: true,
        ..HashType::default()
    };
    let mut view = View::of(&s);
    view.conns = vec![10, 0];
    let cursor = AtomicU64::new(0);
    let free = Lb::with_hash(&algo, consistent, &s, false);
    let bounded = free.clone().with_balance_factor(125);
    let keys: Vec<u32> = (0..200u32).map(full_hash).collect();
    assert!(
        keys.iter()
            .any(|&k| free.pick(&cursor, &view, Some(k)) == Some(0))
    );
    assert!(
        keys.iter()
            .all(|&k| bounded.pick(&cursor, &view, Some(k)) == Some(1))
    );
    // Both past their share: the plain choice.
    view.conns = vec![10, 10];
    assert!(
        keys.iter()
            .all(|&k| bounded.pick(&cursor, &view, Some(k)) == free.pick(&cursor, &view, Some(k)))
    );
}

/// `get_server_ph_post`'s reading of a form body: the named parameter wherever it is, an empty
/// value after a blank, none behind a first byte that is no token (nor when absent).
#[test]
fn post_parameter_as_haproxy_reads_it() {
    assert_eq!(post_param(b"a=1&k=abc&z=2", b"k"), Some(&b"abc"[..]));
    assert_eq!(post_param(b"k=a%20b", b"k"), Some(&b"a%20b"[..]));
    assert_eq!(post_param(b"kk=1&k=", b"k"), Some(&b""[..]));
    assert_eq!(post_param(b"k=\tabc", b"k"), Some(&b""[..]));
    assert_eq!(post_param(b"k=%41", b"k"), Some(&b"%41"[..]));
    assert_eq!(post_param(b"k=(x)", b"k"), None);
    assert_eq!(post_param(b"x=1&y=2", b"k"), None);
    assert_eq!(post_param(b"k", b"k"), None);
    let lb = Lb::new(
        &Balance::UrlParam {
            name: "k".into(),
            check_post: true,
        },
        &servers(&[1, 1]),
        false,
    );
    assert_eq!(lb.post_key(b"k=abc"), Some(gen_hash(HashFn::Sdbm, b"abc")));
    assert_eq!(lb.post_key(b"x=abc"), None);
}
