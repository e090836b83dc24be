//! Inactivity timeouts without cancelling reads: an io_uring read that is dropped may still
//! complete and its bytes would be lost, so a timer only ends the session; it never abandons a read
//! that the session keeps using.

use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use tokio::time::Instant;

/// Last time any byte moved in either direction of a session.
#[derive(Clone, Debug)]
pub struct Activity(std::rc::Rc<Cell<Instant>>);

impl Default for Activity {
    fn default() -> Self {
        Activity(std::rc::Rc::new(Cell::new(Instant::now())))
    }
}

impl Activity {
    pub fn touch(&self) {
        self.0.set(Instant::now());
    }
    pub fn last(&self) -> Instant {
        self.0.get()
    }
}

/// Awaits `fut` unless nothing moved on the session (`activity`) for `timeout`; `None` on
/// expiry (the caller then closes the session, dropping the operation with it).
pub async fn idle_limited<F: Future>(
    fut: F,
    timeout: Option<Duration>,
    activity: &Activity,
) -> Option<F::Output> {
    let Some(timeout) = timeout else {
        return Some(fut.await);
    };
    let mut fut = pin!(fut);
    // Fast path: an operation that completes at once (data already there) needs no timer.
    if let Poll::Ready(out) = std::future::poll_fn(|cx| Poll::Ready(fut.as_mut().poll(cx))).await {
        return Some(out);
    }
    loop {
        let deadline = activity.last() + timeout;
        tokio::select! {
            biased;
            out = &mut fut => return Some(out),
            _ = tokio::time::sleep_until(deadline) => {
                if activity.last() + timeout <= Instant::now() {
                    return None;
                }
            }
        }
    }
}

/// Like [`idle_limited`], with a timeout that may change while `fut` is pending (e.g. to
/// `timeout client-fin` once the other direction has closed). Re-read at least every second.
pub async fn idle_limited_by<F: Future>(
    fut: F,
    timeout: &Cell<Option<Duration>>,
    activity: &Activity,
) -> Option<F::Output> {
    const RECHECK: Duration = Duration::from_secs(1);
    let mut fut = pin!(fut);
    loop {
        let t = timeout.get();
        let wake = match t {
            Some(t) => (activity.last() + t).min(Instant::now() + RECHECK),
            None => Instant::now() + RECHECK,
        };
        tokio::select! {
            biased;
            out = &mut fut => return Some(out),
            _ = tokio::time::sleep_until(wake) => {
                if let Some(t) = timeout.get()
                    && activity.last() + t <= Instant::now()
                {
                    return None;
                }
            }
        }
    }
}

/// Awaits `fut` for at most `timeout` from now (a plain deadline, e.g. `timeout http-request`).
pub async fn deadline_limited<F: Future>(fut: F, deadline: Option<Instant>) -> Option<F::Output> {
    match deadline {
        None => Some(fut.await),
        Some(d) => tokio::time::timeout_at(d, fut).await.ok(),
    }
}
