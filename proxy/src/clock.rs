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

/// The time a session's poll started at, read once per poll. A request reads the clock a dozen
/// times (activity stamps, log timings, deadlines) within a few polls; in a VM each precise read
/// costs tens of nanoseconds (perf: 3–4 % of the user-space time of one request per
/// connection). HAProxy reads it once per polling loop (`now_ms`); this is finer: once per poll
/// of a session, lazily. Outside a [`PollScope`] every read is a real one.
#[derive(Clone, Copy)]
enum Cached {
    Off,
    Due,
    At(tokio::time::Instant),
}

thread_local! {
    static NOW: std::cell::Cell<Cached> = const { std::cell::Cell::new(Cached::Off) };
}

/// Now, as [`tokio::time::Instant::now`] (a paused test clock included), but read at most once
/// per session poll.
pub fn now() -> tokio::time::Instant {
    NOW.with(|c| match c.get() {
        Cached::At(t) => t,
        Cached::Off => tokio::time::Instant::now(),
        Cached::Due => {
            let t = tokio::time::Instant::now();
            c.set(Cached::At(t));
            t
        }
    })
}

/// Time since `t` on [`now`]'s clock (zero if `t` is later).
pub fn since(t: tokio::time::Instant) -> std::time::Duration {
    now().saturating_duration_since(t)
}

/// While alive, [`now`] reads the clock once and answers that reading: held across one poll of
/// a session's future, so nothing waits on the clock moving inside it. Nests (a scope restores
/// what it found).
pub struct PollScope(Cached);

impl PollScope {
    pub fn enter() -> Self {
        PollScope(NOW.with(|c| c.replace(Cached::Due)))
    }
}

impl Drop for PollScope {
    fn drop(&mut self) {
        NOW.with(|c| c.set(self.0));
    }
}

pin_project_lite::pin_project! {
    /// A future polled within a [`PollScope`] (a task that is not a tracked session's).
    pub struct Scoped<F> {
        #[pin]
        f: F,
    }
}

impl<F> Scoped<F> {
    pub fn new(f: F) -> Self {
        Scoped { f }
    }
}

impl<F: std::future::Future> std::future::Future for Scoped<F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let _scope = PollScope::enter();
        self.project().f.poll(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scope_reads_the_clock_once_and_restores_what_it_found() {
        let outside = now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(now() > outside, "outside a scope every read is a real one");
        {
            let _s = PollScope::enter();
            let first = now();
            assert!(first > outside);
            std::thread::sleep(std::time::Duration::from_millis(2));
            assert_eq!(now(), first, "one reading per scope");
            {
                let _inner = PollScope::enter();
                std::thread::sleep(std::time::Duration::from_millis(2));
                assert!(now() > first, "a nested scope reads anew");
            }
            assert_eq!(now(), first, "the outer scope's reading is back");
            assert_eq!(since(first), std::time::Duration::ZERO);
        }
        let after = now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(now() > after, "real reads again once the scope is gone");
        assert!(since(after) >= std::time::Duration::from_millis(2));
    }
}
