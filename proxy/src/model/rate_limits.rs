//! `set rate-limit connections|sessions|http-compression global <n>` (HAProxy's `maxconnrate`,
//! `maxsessrate`, `maxcomprate`): process-wide limits the accept loops honour — while the
//! process' connection or session rate over the last second has reached its limit, listeners
//! stop accepting (the kernel queues), as HAProxy's listeners do; while the bytes given to the
//! HTTP compressor over the last second exceed the compression limit, responses are not
//! compressed. 0 means no limit.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

#[derive(Default)]
pub struct RateLimits {
    pub conn: AtomicU32,
    pub sess: AtomicU32,
    /// Bytes per second (`set rate-limit http-compression` takes kB/s), `CompressBpsRateLim`.
    pub comp_bps: AtomicU32,
    /// The bytes into and out of the compressor per second (`CompressBpsIn`/`Out`).
    pub comp_in: super::stats::Freq,
    pub comp_out: super::stats::Freq,
}

impl RateLimits {
    /// No connection or session limit; `comp_bps`: `maxcomprate`.
    pub fn new(comp_bps: u32) -> Self {
        RateLimits {
            comp_bps: AtomicU32::new(comp_bps),
            ..Default::default()
        }
    }

    /// The compression rate is over its limit: responses go uncompressed (HAProxy's check).
    pub fn comp_over(&self, now_ms: u64) -> bool {
        let lim = self.comp_bps.load(Ordering::Relaxed);
        lim > 0 && self.comp_in.read(now_ms) > lim
    }
}

/// How long an accept loop waits before looking at the rates again.
const RECHECK: Duration = Duration::from_millis(20);

impl RateLimits {
    /// Waits while a connection or session rate limit is reached.
    pub async fn wait(&self, totals: &super::Counters, now_ms: impl Fn() -> u64) {
        loop {
            let now = now_ms();
            let over = |lim: &AtomicU32, r: &super::stats::Freq| {
                let lim = lim.load(Ordering::Relaxed);
                lim > 0 && r.read(now) >= lim
            };
            if !over(&self.conn, &totals.conn_rate) && !over(&self.sess, &totals.sess_rate) {
                return;
            }
            tokio::time::sleep(RECHECK).await;
        }
    }
}
