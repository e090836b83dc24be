//! The short form of `cargo xtask drill` (seed 000, S3) against portcullis: one pod of the
//! seed's 443 backend replaced under fixed-rate HTTPS load, once with each preStop script.
//!
//! - `current` (the pod exits 1 s after flipping its health check, inside the 4 s detection
//!   window): requests routed to the gone pod before the balancer marks it DOWN are refused,
//!   and with the seed's `retries 3` without `option redispatch` they surface as 503 `SC--`.
//! - `improved` (the pod serves through the window, drains, then exits): no 5xx and no client
//!   connection error among the fixed-rate requests.
//!
//! The addresses are moved off the seed's (127.0.0.1:1xxxx, 127.0.1.12–14) onto a 127.B range
//! of their own, so this can run beside the golden test that uses the seed's.

#[path = "support/drill.rs"]
mod drill;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/shared.rs"]
mod shared;

use drill::{Mode, Net, RunResult, Spec};
use std::process::Command;
use std::time::Duration;

fn run(mode: Mode, b: u8) -> RunResult {
    let dir = proxy::TempDir::new(&format!("drill-{}", mode.name()));
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".to_string()]).expect("cert");
    let cert = dir.0.join("drill.pem");
    std::fs::write(
        &cert,
        format!("{}{}", ck.cert.pem(), ck.key_pair.serialize_pem()),
    )
    .expect("cert");
    let seed = std::fs::read_to_string(shared::shared_path("configs/seed-loopback.cfg"))
        .expect("seed-loopback.cfg");
    let spec = Spec {
        mode,
        redispatch: false,
        duration: Duration::from_secs(6),
        // Low enough that a request caught in flight at the DOWN instant (killed by
        // shutdown-sessions whatever the pod does) stays unlikely in `improved`.
        rate: 15,
        restarts: 1,
        streams: 1,
        stream_secs: 3,
        warmup: Duration::from_secs(2),
        replace_after: Duration::from_secs(5),
        net: Net::parse(&format!("127.{b}")).expect("net"),
    };
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_portcullis"));
    cmd.args(["--io", &proxy::io_engine(), "-db"]);
    let r = drill::run(cmd, &seed, &cert, &dir.0, &spec).expect("drill run");
    eprintln!(
        "{} load={:?}\nlog={:?}\ntimeline={:#?}",
        mode.name(),
        r.load.statuses,
        r.log,
        r.timeline
    );
    r
}

/// A 127.B of this process, away from the seed's 127.0.
fn net_byte(offset: u8) -> u8 {
    150 + ((std::process::id() % 50) as u8) * 2 + offset
}

#[test]
fn current_prestop_shows_the_disruption() {
    let r = run(Mode::Current, net_byte(0));
    assert_eq!(r.log.downs, 1, "master1 went DOWN once: {:?}", r.log);
    assert_eq!(r.log.ups, 1, "its replacement came UP: {:?}", r.log);
    // The seed's §4: without redispatch the retries go to the refusing node and end in 503.
    let fivexx = r.load.fivexx();
    assert!(fivexx > 0, "{:?}", r.load.statuses);
    // The assertion: connection errors or `D`-coded sessions. Both balancers turn
    // refusals into 5xx on an intact client connection; the D-coded ones are the requests still
    // retrying the pod when it is marked DOWN (`DC--`, as HAProxy 2.6 logs them).
    assert!(
        r.load.conn_err() + r.log.d_coded > 0,
        "{:?} {:?}",
        r.load,
        r.log
    );
    // Each of them is in the balancer's log with a termination state other than `----`.
    let abnormal: u64 = r.log.states.values().sum();
    assert!(abnormal >= fivexx, "{:?} vs {fivexx}", r.log.states);
    assert_eq!(r.load.statuses.get(&503).copied(), Some(fivexx));
}

#[test]
fn improved_prestop_hides_nothing_and_loses_nothing() {
    let r = run(Mode::Improved, net_byte(1));
    assert_eq!(r.log.downs, 1, "master1 went DOWN once: {:?}", r.log);
    assert_eq!(r.log.ups, 1, "its replacement came UP: {:?}", r.log);
    assert_eq!(r.load.conn_err(), 0, "{:?}", r.load.conn_errs);
    // The only 5xx allowed are the requests in flight at the DOWN instant, which the seed's
    // `on-marked-down shutdown-sessions` kills whatever the pod does (`D`-coded, as HAProxy
    // logs them); at 15 req/s a loaded machine can catch one.
    let fivexx = r.load.fivexx();
    assert!(
        fivexx <= r.log.d_coded && r.log.d_coded <= 2,
        "{:?} {:?}",
        r.load.statuses,
        r.log
    );
    assert!(r.load.sent >= 15 * 12, "{} requests", r.load.sent);
}
