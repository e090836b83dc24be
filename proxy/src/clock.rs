//! The process clock the counters, rates and stick tables run on: milliseconds since the first
//! read (the first model built), readable anywhere without a model at hand. A leaf: it imports
//! nothing of the crate.

static CLOCK: std::sync::OnceLock<u64> = std::sync::OnceLock::new();

/// Milliseconds since the first model was built: the clock every counter runs on (rates,
/// `lastsess`, stick-table expiry), readable where no model is at hand. Read on the coarse
/// clock (a kernel tick, 1–4 ms): several times per request, where a precise read costs more
/// and HAProxy's own `now_ms` only moves once per polling loop.
pub fn clock_ms() -> u64 {
    let base = *CLOCK.get_or_init(coarse_ms);
    coarse_ms().saturating_sub(base)
}

/// Milliseconds on the kernel's coarse monotonic clock (updated every tick, a few ms): for
/// judging ages where a tick's precision is enough, at a fraction of a precise read's cost.
pub fn coarse_ms() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes into the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_COARSE, &mut ts) };
    (ts.tv_sec as u64) * 1000 + (ts.tv_nsec as u64) / 1_000_000
}
