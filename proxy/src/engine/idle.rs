//! Inactivity timeouts without cancelling reads: an io_uring read that is dropped may still
//! complete and its bytes would be lost, so a timer only ends the session; it never abandons a read
//! that the session keeps using.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// Last time any byte moved in either direction of a session.
#[derive(Clone, Debug)]
pub struct Activity(std::rc::Rc<Cell<Instant>>);

impl Default for Activity {
    fn default() -> Self {
        Activity(std::rc::Rc::new(Cell::new(crate::clock::now())))
    }
}

impl Activity {
    pub fn touch(&self) {
        self.0.set(crate::clock::now());
    }
    pub fn last(&self) -> Instant {
        self.0.get()
    }
}

/// A session's timer, kept across its operations: a fresh timer per read or write costs a timer
/// wheel insertion and removal each time, while the deadlines of a busy session only move
/// forward. This one is re-armed only when it fires (early: the deadline moved on meanwhile) or
/// must fire earlier than it is set to.
#[derive(Default)]
pub struct Timer {
    sleep: Option<Pin<Box<Sleep>>>,
    /// `sleep` has fired (it must be reset before its next use). Its deadline is the one it is
    /// armed for otherwise (a flag, not a copy of the instant: a session holds two timers).
    fired: bool,
}

impl Timer {
    /// Awaits `fut` unless the instant `due()` gives passes first (`None` then; no deadline
    /// when `due()` gives none). `due` is read again whenever the timer fires, so a deadline
    /// pushed back by activity meanwhile is honoured.
    pub fn limit<F: Future, D: Fn() -> Option<Instant>>(
        &mut self,
        fut: F,
        due: D,
    ) -> Limit<'_, F, D> {
        Limit {
            fut,
            due,
            timer: self,
        }
    }

    /// [`Timer::limit`] for an inactivity timeout: `timeout` after the session's last activity.
    pub fn idle<'a, F: Future>(
        &'a mut self,
        fut: F,
        timeout: Option<Duration>,
        activity: &'a Activity,
    ) -> Limit<'a, F, impl Fn() -> Option<Instant> + 'a> {
        self.limit(fut, move || timeout.map(|t| activity.last() + t))
    }

    /// Like [`Timer::idle`], with a timeout that may change while `fut` is pending (e.g. to
    /// `timeout client-fin` once the other direction has closed): it is read again at least
    /// every second, `recheck` holding the next time (one per timer; it moves by steps of a
    /// second, so a busy session re-arms the timer at most once a second).
    pub fn idle_by<'a, F: Future>(
        &'a mut self,
        fut: F,
        timeout: &'a Cell<Option<Duration>>,
        activity: &'a Activity,
        recheck: &'a Cell<Instant>,
    ) -> Limit<'a, F, impl Fn() -> Option<Instant> + 'a> {
        const RECHECK: Duration = Duration::from_secs(1);
        self.limit(fut, move || {
            let now = crate::clock::now();
            if recheck.get() <= now {
                recheck.set(now + RECHECK);
            }
            let r = recheck.get();
            Some(timeout.get().map_or(r, |t| (activity.last() + t).min(r)))
        })
    }

    /// Frees the timer while the session does not need it (an idle keep-alive connection's
    /// server side); the next use arms a new one.
    pub fn release(&mut self) {
        self.sleep = None;
        self.fired = false;
    }

    /// Polls the timer towards `d`: Ready once it has fired (it then needs re-arming).
    fn poll_until(&mut self, d: Instant, cx: &mut Context<'_>) -> Poll<()> {
        let sleep = match self.sleep.as_mut() {
            Some(s) => {
                if self.fired || s.deadline() > d {
                    s.as_mut().reset(d);
                    self.fired = false;
                }
                s
            }
            None => {
                self.fired = false;
                self.sleep.insert(Box::pin(tokio::time::sleep_until(d)))
            }
        };
        let fired = sleep.as_mut().poll(cx);
        if fired.is_ready() {
            self.fired = true;
        }
        fired
    }
}

pin_project_lite::pin_project! {
    /// The future of [`Timer::limit`]: written by hand, since an `async fn` would hold `fut`
    /// twice (the argument and its pinned copy) in every session's state.
    pub struct Limit<'a, F, D> {
        #[pin]
        fut: F,
        due: D,
        timer: &'a mut Timer,
    }
}

impl<F: Future, D: Fn() -> Option<Instant>> Future for Limit<'_, F, D> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        // An operation that completes at once (data already there) touches no timer.
        if let Poll::Ready(out) = this.fut.poll(cx) {
            return Poll::Ready(Some(out));
        }
        loop {
            let Some(d) = (this.due)() else {
                return Poll::Pending;
            };
            if this.timer.poll_until(d, cx).is_pending() {
                return Poll::Pending;
            }
            // Fired: expired, or set for an earlier deadline that activity has moved since. The
            // clock is read before `due()`, whose own reads (`idle_by`'s recheck) come later.
            let now = crate::clock::now();
            if (this.due)().is_some_and(|d| d <= now) {
                return Poll::Ready(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .unwrap()
    }

    #[test]
    fn timer_expires_at_the_deadline_and_not_before() {
        rt().block_on(async {
            let mut t = Timer::default();
            let start = Instant::now();
            let due = start + Duration::from_secs(5);
            let out = t.limit(std::future::pending::<()>(), || Some(due)).await;
            assert_eq!(out, None);
            assert_eq!(Instant::now(), due);
            // Reused: an operation finishing before its deadline returns its output.
            let out = t
                .limit(tokio::time::sleep(Duration::from_secs(1)), || {
                    Some(Instant::now() + Duration::from_secs(60))
                })
                .await;
            assert_eq!(out, Some(()));
        });
    }

    #[test]
    fn timer_follows_activity_and_earlier_deadlines() {
        rt().block_on(async {
            let mut t = Timer::default();
            let activity = Activity::default();
            let idle = Some(Duration::from_secs(10));
            // Armed for 10 s; activity at 8 s pushes the deadline to 18 s.
            let a = activity.clone();
            let op = async move {
                tokio::time::sleep(Duration::from_secs(8)).await;
                a.touch();
                tokio::time::sleep(Duration::from_secs(9)).await;
            };
            let start = Instant::now();
            assert_eq!(t.idle(op, idle, &activity).await, Some(()));
            assert_eq!(Instant::now() - start, Duration::from_secs(17));
            // Still armed for 27 s (last activity + 10 s): a shorter deadline must win.
            let start = Instant::now();
            let due = start + Duration::from_secs(2);
            assert_eq!(
                t.limit(std::future::pending::<()>(), || Some(due)).await,
                None
            );
            assert_eq!(Instant::now(), due);
            // Idle with no activity at all: expires 10 s after the last touch.
            activity.touch();
            let start = Instant::now();
            assert_eq!(
                t.idle(std::future::pending::<()>(), idle, &activity).await,
                None
            );
            assert_eq!(Instant::now() - start, Duration::from_secs(10));
        });
    }

    #[test]
    fn a_changed_timeout_is_seen_within_a_second() {
        rt().block_on(async {
            let mut t = Timer::default();
            let activity = Activity::default();
            let timeout = Cell::new(Some(Duration::from_secs(60)));
            let recheck = Cell::new(Instant::now());
            let start = Instant::now();
            let op = t.idle_by(std::future::pending::<()>(), &timeout, &activity, &recheck);
            // Shortened from outside at 2.5 s (as `timeout client-fin` is): already expired.
            let shorten = async {
                tokio::time::sleep(Duration::from_millis(2500)).await;
                timeout.set(Some(Duration::from_secs(2)));
                std::future::pending::<()>().await
            };
            let out = tokio::select! {
                out = op => out,
                _ = shorten => None::<()>,
            };
            assert_eq!(out, None);
            // At the next poll (here at once when `select!` polls it beside the change, else at
            // the third recheck; timer deadlines round up to the millisecond).
            let took = Instant::now() - start;
            assert!(
                took >= Duration::from_millis(2500) && took < Duration::from_millis(3010),
                "{took:?}"
            );
            // Unchanged, a long timeout is not cut by the rechecks.
            let timeout = Cell::new(Some(Duration::from_secs(5)));
            activity.touch();
            let start = Instant::now();
            let op = t.idle_by(std::future::pending::<()>(), &timeout, &activity, &recheck);
            assert_eq!(op.await, None);
            let took = Instant::now() - start;
            assert!(
                took >= Duration::from_secs(5) && took < Duration::from_millis(5010),
                "{took:?}"
            );
        });
    }
}
