//! HAProxy's `freq_ctr` over an arbitrary period (`conn_rate(10s)`): events of the current
//! period plus the previous period's share still inside the sliding window. Plain data: the
//! table's shard lock guards it.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FreqCtr {
    /// Start of the current period (ms).
    curr_tick: u64,
    curr: u32,
    prev: u32,
}

impl FreqCtr {
    pub fn new(now: u64) -> FreqCtr {
        FreqCtr {
            curr_tick: now,
            curr: 0,
            prev: 0,
        }
    }

    /// (start of the current period in ms, events in it, events of the previous one): what
    /// the peers protocol carries.
    pub fn parts(&self) -> (u64, u32, u32) {
        (self.curr_tick, self.curr, self.prev)
    }

    pub fn from_parts(curr_tick: u64, curr: u32, prev: u32) -> FreqCtr {
        FreqCtr {
            curr_tick,
            curr,
            prev,
        }
    }

    fn rotate(&mut self, now: u64, period: u64) {
        let elapsed = now.saturating_sub(self.curr_tick);
        if elapsed < period {
            return;
        }
        if elapsed < 2 * period {
            self.prev = self.curr;
            self.curr_tick += period;
        } else {
            // Two periods or more without an event: nothing of the past is left in the window.
            self.prev = 0;
            self.curr_tick = now;
        }
        self.curr = 0;
    }

    /// Counts one event at `now`; returns the events of the current period.
    pub fn hit(&mut self, now: u64, period: u64) -> u32 {
        self.hit_n(now, period, 1)
    }

    /// Counts `n` events at `now` (`bytes_in_rate` counts bytes).
    pub fn hit_n(&mut self, now: u64, period: u64, n: u32) -> u32 {
        self.rotate(now, period.max(1));
        self.curr = self.curr.saturating_add(n);
        self.curr
    }

    /// The rate over the last `period` at `now`.
    pub fn read(&self, now: u64, period: u64) -> u32 {
        let period = period.max(1);
        let elapsed = now.saturating_sub(self.curr_tick);
        let (curr, prev, into) = if elapsed < period {
            (self.curr, self.prev, elapsed)
        } else if elapsed < 2 * period {
            (0, self.curr, elapsed - period)
        } else {
            return 0;
        };
        let remain = period - into;
        let share = u64::from(prev) * remain / period;
        curr.saturating_add(u32::try_from(share).unwrap_or(u32::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_within_the_period() {
        let mut f = FreqCtr::new(1000);
        for t in 0..5 {
            f.hit(1000 + t * 100, 10_000);
        }
        assert_eq!(f.read(1500, 10_000), 5);
        assert_eq!(f.read(10_999, 10_000), 5);
    }

    #[test]
    fn previous_period_fades_out() {
        let mut f = FreqCtr::new(0);
        for _ in 0..10 {
            f.hit(100, 1000);
        }
        // A quarter into the next period, three quarters of the previous one still count.
        assert_eq!(f.read(1250, 1000), 7);
        f.hit(1250, 1000);
        assert_eq!(f.read(1250, 1000), 8);
        assert_eq!(f.read(1999, 1000), 1);
        assert_eq!(f.read(2000, 1000), 1);
        assert_eq!(f.read(3000, 1000), 0);
    }

    #[test]
    fn a_long_gap_forgets_everything() {
        let mut f = FreqCtr::new(0);
        f.hit(10, 1000);
        assert_eq!(f.hit(5000, 1000), 1);
        assert_eq!(f.read(5000, 1000), 1);
    }
}
