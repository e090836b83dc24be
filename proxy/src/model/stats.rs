//! HAProxy's counter arithmetic for `show stat`/`show info`: event rates over a sliding second
//! (`freq_ctr`), running maxima, and response-time averages over the last requests (`swrate`).
//! Lock-free (Relaxed atomics: a lost race costs one event in a rate, never a wrong order of
//! magnitude) and clock-free: callers pass the time in milliseconds since the process started.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

const PERIOD_MS: u64 = 1000;

/// Events per second over a sliding one-second window, as HAProxy's `freq_ctr`: the count of the
/// current period plus the previous period's count weighted by the part of it still in the
/// window.
#[derive(Default)]
pub struct Freq {
    /// Period number (seconds) in the high half, events in it in the low half.
    cur: AtomicU64,
    /// Events in the period before `cur`'s (0 when that was not the previous second).
    prev: AtomicU32,
}

impl Freq {
    /// Counts one event at `now_ms`; returns the events of the current period so far (what
    /// HAProxy compares to the max).
    pub fn hit(&self, now_ms: u64) -> u32 {
        self.add(1, now_ms)
    }

    /// Counts `n` events at `now_ms` (bytes, for a byte rate); returns the current period's.
    pub fn add(&self, add: u32, now_ms: u64) -> u32 {
        let period = now_ms / PERIOD_MS;
        let mut old = self.cur.load(Ordering::Relaxed);
        loop {
            let (p, n) = (old >> 32, old as u32);
            let next = if p == period {
                (period << 32) | u64::from(n.saturating_add(add))
            } else {
                (period << 32) | u64::from(add)
            };
            match self
                .cur
                .compare_exchange_weak(old, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => {
                    if p != period {
                        let carried = if p + 1 == period { n } else { 0 };
                        self.prev.store(carried, Ordering::Relaxed);
                    }
                    return next as u32;
                }
                Err(o) => old = o,
            }
        }
    }

    /// The rate at `now_ms`.
    pub fn read(&self, now_ms: u64) -> u32 {
        let period = now_ms / PERIOD_MS;
        let cur = self.cur.load(Ordering::Relaxed);
        let (p, n) = (cur >> 32, cur as u32);
        let (curr, prev) = if p == period {
            (n, self.prev.load(Ordering::Relaxed))
        } else if p + 1 == period {
            (0, n)
        } else {
            (0, 0)
        };
        let left = PERIOD_MS - now_ms % PERIOD_MS;
        curr.saturating_add((u64::from(prev) * left / PERIOD_MS) as u32)
    }
}

/// A running maximum (`smax`, `qmax`, `rate_max`, `*time_max`).
#[derive(Default)]
pub struct Max(AtomicU32);

impl Max {
    pub fn update(&self, v: u32) {
        // Cheap when the max is not beaten, which is the common case.
        if v > self.0.load(Ordering::Relaxed) {
            self.0.fetch_max(v, Ordering::Relaxed);
        }
    }
    pub fn get(&self) -> u32 {
        self.0.load(Ordering::Relaxed)
    }
    pub fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
}

/// HAProxy's `TIME_STATS_SAMPLES`: averages run over this many samples (documented as "the last
/// 1024 requests": a sliding window of 512 is about as accurate over 1k).
pub const TIME_SAMPLES: u64 = 512;

/// A sliding-window average (`swrate`): until `TIME_SAMPLES` samples the sum is exact; then each
/// sample replaces one window-average's worth of the sum. `count` is the object's request (HTTP)
/// or LB-pick (TCP) total, as HAProxy sizes the window with those, not with the samples taken.
#[derive(Default)]
pub struct SwRate(AtomicU32);

impl SwRate {
    /// Adds `v`; `count` is the total the window is sized with, already including this event.
    pub fn add(&self, count: u64, v: u32) {
        let n = if count > TIME_SAMPLES {
            TIME_SAMPLES as u32
        } else {
            0
        };
        let mut old = self.0.load(Ordering::Relaxed);
        loop {
            let drop = if n == 0 { 0 } else { old.div_ceil(n) };
            let next = old.wrapping_sub(drop).wrapping_add(v);
            match self
                .0
                .compare_exchange_weak(old, next, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(o) => old = o,
            }
        }
    }

    pub fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }

    /// The average for an object whose total is `count`.
    pub fn avg(&self, count: u64) -> u32 {
        let n = count.min(TIME_SAMPLES);
        if n == 0 {
            return 0;
        }
        (u64::from(self.0.load(Ordering::Relaxed)).div_ceil(n)) as u32
    }
}

/// Queue, connect, response and total times of one backend or server (`qtime`…`ttime` and their
/// `_max`), in milliseconds.
#[derive(Default)]
pub struct Timings {
    pub q: SwRate,
    pub c: SwRate,
    pub r: SwRate,
    pub t: SwRate,
    pub q_max: Max,
    pub c_max: Max,
    pub r_max: Max,
    pub t_max: Max,
}

/// One finished stream's times, in milliseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sample {
    pub queue: u32,
    pub connect: u32,
    pub response: u32,
    pub total: u32,
}

impl Timings {
    pub fn record(&self, count: u64, s: Sample) {
        self.q.add(count, s.queue);
        self.c.add(count, s.connect);
        self.r.add(count, s.response);
        self.t.add(count, s.total);
        self.q_max.update(s.queue);
        self.c_max.update(s.connect);
        self.r_max.update(s.response);
        self.t_max.update(s.total);
    }
    /// `clear counters`: the maxima only; `all`: the averages too.
    pub fn clear(&self, all: bool) {
        for m in [&self.q_max, &self.c_max, &self.r_max, &self.t_max] {
            m.reset();
        }
        if all {
            for s in [&self.q, &self.c, &self.r, &self.t] {
                s.reset();
            }
        }
    }
    /// Averages for an object whose total is `count`: (q, c, r, t).
    pub fn averages(&self, count: u64) -> Sample {
        Sample {
            queue: self.q.avg(count),
            connect: self.c.avg(count),
            response: self.r.avg(count),
            total: self.t.avg(count),
        }
    }
}

/// Milliseconds as the u32 the stats carry.
pub fn ms(d: std::time::Duration) -> u32 {
    u32::try_from(d.as_millis()).unwrap_or(u32::MAX)
}

/// `lastsess`: seconds since start of the last session plus one, 0 for never.
#[derive(Default)]
pub struct LastSess(AtomicU64);

impl LastSess {
    pub fn reset(&self) {
        self.0.store(0, Ordering::Relaxed);
    }
    pub fn touch(&self, now_ms: u64) {
        self.0.store(now_ms / 1000 + 1, Ordering::Relaxed);
    }
    /// Seconds since the last session at `now_ms`, None if there was none.
    pub fn ago(&self, now_ms: u64) -> Option<u32> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            t => Some((now_ms / 1000).saturating_sub(t - 1) as u32),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn freq_counts_the_current_second() {
        let f = Freq::default();
        assert_eq!(f.read(5_000), 0);
        assert_eq!(f.hit(5_000), 1);
        assert_eq!(f.hit(5_100), 2);
        assert_eq!(f.hit(5_999), 3);
        assert_eq!(f.read(5_999), 3);
    }

    #[test]
    fn freq_slides_the_previous_second_out() {
        let f = Freq::default();
        for _ in 0..10 {
            f.hit(7_900);
        }
        // 250 ms into the next second, three quarters of the last one still count.
        assert_eq!(f.read(8_250), 7);
        assert_eq!(f.hit(8_250), 1);
        assert_eq!(f.read(8_250), 1 + 7);
        assert_eq!(f.read(8_999), 1);
        // Once a whole period passed with no event, the old count is gone.
        assert_eq!(f.read(9_500), 0);
        assert_eq!(f.hit(10_000), 1);
        assert_eq!(f.read(10_000), 1);
    }

    #[test]
    fn freq_forgets_a_gap_of_more_than_one_second() {
        let f = Freq::default();
        for _ in 0..4 {
            f.hit(1_000);
        }
        assert_eq!(f.hit(3_000), 1);
        assert_eq!(f.read(3_000), 1);
    }

    #[test]
    fn max_keeps_the_largest() {
        let m = Max::default();
        m.update(3);
        m.update(1);
        assert_eq!(m.get(), 3);
        m.update(9);
        assert_eq!(m.get(), 9);
    }

    #[test]
    fn swrate_is_exact_below_the_window() {
        let s = SwRate::default();
        assert_eq!(s.avg(0), 0);
        s.add(1, 10);
        s.add(2, 20);
        s.add(3, 31);
        // (61 + 2) / 3
        assert_eq!(s.avg(3), 21);
        // The window is sized by the object's total even when fewer samples were taken (streams
        // that failed to connect give none), as in HAProxy: (61 + 4) / 5.
        assert_eq!(s.avg(5), 13);
    }

    #[test]
    fn swrate_slides_past_the_window() {
        let s = SwRate::default();
        let mut n = 0;
        for _ in 0..TIME_SAMPLES {
            n += 1;
            s.add(n, 100);
        }
        assert_eq!(s.avg(n), 100);
        // Each new sample drops one average's worth: the mean moves towards the new values.
        for _ in 0..TIME_SAMPLES {
            n += 1;
            s.add(n, 0);
        }
        let a = s.avg(n);
        assert!((30..=40).contains(&a), "{a}");
        for _ in 0..10 * TIME_SAMPLES {
            n += 1;
            s.add(n, 50);
        }
        assert_eq!(s.avg(n), 50);
    }

    #[test]
    fn timings_record_averages_and_maxima() {
        let t = Timings::default();
        t.record(
            1,
            Sample {
                queue: 0,
                connect: 2,
                response: 10,
                total: 12,
            },
        );
        t.record(
            2,
            Sample {
                queue: 4,
                connect: 0,
                response: 30,
                total: 40,
            },
        );
        assert_eq!(
            t.averages(2),
            Sample {
                queue: 2,
                connect: 1,
                response: 20,
                total: 26,
            }
        );
        assert_eq!(
            (t.q_max.get(), t.c_max.get(), t.r_max.get(), t.t_max.get()),
            (4, 2, 30, 40)
        );
    }

    #[test]
    fn lastsess_counts_seconds_and_never() {
        let l = LastSess::default();
        assert_eq!(l.ago(10_000), None);
        l.touch(2_500);
        assert_eq!(l.ago(2_900), Some(0));
        assert_eq!(l.ago(12_000), Some(10));
    }
}
