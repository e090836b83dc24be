//! One name being resolved for its servers, stepped as HAProxy 2.6's `process_resolvers` and
//! `resolv_process_responses` step it: every `timeout resolve` a query of the preferred type
//! goes to every nameserver; an error answer from all of them falls back once to the other
//! address family at once; no answer within `timeout retry` resends (after the fallback, or
//! on silence, one try is spent); out of tries the resolution fails with its last status.
//! The first valid answer from any nameserver wins. Pure: the caller owns sockets and time.

use super::answer::Answers;
use super::wire::{Qtype, Verdict};

/// HAProxy's `RSLV_STATUS_*`: what the last resolution ended with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    None,
    Valid,
    Invalid,
    Nx,
    Refused,
    Timeout,
    Other,
}

/// The timing of a `resolvers` section, in ms.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub resolve: u64,
    pub retry: u64,
    pub retries: u32,
}

/// What the caller does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    Nothing,
    /// Send the query of this type (to every nameserver), then call [`Resolution::sent`].
    Send(Qtype),
    /// A valid answer: hand it to the servers (the first one with the nameserver's name).
    Success(super::wire::Answer),
    /// Tries exhausted or errors from all: the servers judge `status` against their holds.
    Failure,
}

#[derive(Debug)]
pub struct Resolution {
    /// Normalized (lower case, no final dot).
    pub name: String,
    pub prefer: Qtype,
    pub query_type: Qtype,
    pub status: Status,
    pub last_valid: Option<u64>,
    pub last_resolution: Option<u64>,
    last_query: u64,
    running: bool,
    tries: u32,
    nb_queries: u32,
    nb_responses: u32,
    pub qid: u16,
    pub answers: Answers,
}

impl Resolution {
    pub fn new(name: String, prefer: Qtype) -> Self {
        Resolution {
            name,
            prefer,
            query_type: prefer,
            status: Status::None,
            last_valid: None,
            last_resolution: None,
            last_query: 0,
            running: false,
            tries: 0,
            nb_queries: 0,
            nb_responses: 0,
            qid: 0,
            answers: Answers::default(),
        }
    }

    pub fn running(&self) -> bool {
        self.running
    }

    /// Waiting and due for a new query at `now`.
    pub fn due(&self, now: u64, t: &Timing) -> bool {
        !self.running
            && self
                .last_resolution
                .is_none_or(|l| l.saturating_add(t.resolve) <= now)
    }

    /// Starts a resolution with query id `qid`: the caller sends the preferred type.
    pub fn start(&mut self, qid: u16, t: &Timing) -> Qtype {
        self.running = true;
        self.qid = qid;
        self.query_type = self.prefer;
        self.tries = t.retries.saturating_sub(1);
        self.prefer
    }

    /// A query went to `n` nameservers at `now`.
    pub fn sent(&mut self, n: u32, now: u64) {
        self.nb_queries = n;
        self.nb_responses = 0;
        self.last_query = now;
    }

    /// Time passed while running: resend, fail, or wait.
    pub fn tick(&mut self, now: u64, t: &Timing) -> Step {
        if !self.running || self.last_query.saturating_add(t.retry) > now {
            return Step::Nothing;
        }
        if self.tries == 0 {
            if self.nb_responses == 0 {
                self.status = Status::Timeout;
            }
            self.reset(now);
            return Step::Failure;
        }
        if self.nb_responses == 0 || self.prefer != self.query_type {
            self.query_type = self.prefer;
            self.tries -= 1;
        } else {
            self.query_type = other(self.prefer);
            if self.query_type == self.prefer {
                self.tries -= 1;
            }
        }
        Step::Send(self.query_type)
    }

    /// A response carrying this resolution's query id, judged by [`super::wire::validate`].
    pub fn on_response(&mut self, v: Verdict, now: u64) -> Step {
        self.nb_responses += 1;
        let ok = match v {
            Verdict::Valid(a) => Some(a),
            Verdict::Invalid | Verdict::QueryCountError | Verdict::WrongName => {
                self.status = Status::Invalid;
                None
            }
            Verdict::NxDomain => {
                self.status = Status::Nx;
                None
            }
            Verdict::Refused => {
                self.status = Status::Refused;
                None
            }
            Verdict::AncountZero
            | Verdict::CnameError
            | Verdict::Truncated
            | Verdict::NoExpectedRecord
            | Verdict::Error => {
                self.status = Status::Other;
                None
            }
        };
        let Some(answer) = ok else {
            // Every nameserver must have answered before an error counts.
            if self.nb_responses < self.nb_queries {
                return Step::Nothing;
            }
            if self.prefer != self.query_type {
                if self.tries == 0 {
                    self.reset(now);
                    return Step::Failure;
                }
                return Step::Nothing;
            }
            self.query_type = other(self.prefer);
            if self.query_type == self.prefer {
                return Step::Nothing;
            }
            return Step::Send(self.query_type);
        };
        self.status = Status::Valid;
        self.last_valid = Some(now);
        self.reset(now);
        Step::Success(answer)
    }

    fn reset(&mut self, now: u64) {
        self.running = false;
        self.tries = 0;
        self.last_resolution = Some(now);
        self.nb_queries = 0;
        self.nb_responses = 0;
        self.query_type = self.prefer;
        self.qid = 0;
    }

    /// When this resolution next needs [`Resolution::tick`] or a new start.
    pub fn next_wake(&self, t: &Timing) -> Option<u64> {
        if self.running {
            Some(self.last_query.saturating_add(t.retry))
        } else {
            self.last_resolution.map(|l| l.saturating_add(t.resolve))
        }
    }

    /// Whether a failure with the current status has lasted past its hold.
    pub fn hold_expired(&self, now: u64, h: &Holds) -> bool {
        let hold = match self.status {
            Status::Nx => h.nx,
            Status::Timeout => h.timeout,
            Status::Refused => h.refused,
            _ => h.other,
        };
        self.last_valid
            .is_none_or(|v| v.saturating_add(hold) <= now)
    }
}

/// `hold nx|timeout|refused|other` of a section, in ms.
#[derive(Clone, Copy, Debug)]
pub struct Holds {
    pub nx: u64,
    pub timeout: u64,
    pub refused: u64,
    pub other: u64,
}

fn other(q: Qtype) -> Qtype {
    match q {
        Qtype::A => Qtype::Aaaa,
        Qtype::Aaaa => Qtype::A,
        Qtype::Srv => Qtype::Srv,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resolve::wire::Answer;

    const T: Timing = Timing {
        resolve: 1000,
        retry: 500,
        retries: 3,
    };

    fn valid() -> Verdict {
        Verdict::Valid(Answer {
            addrs: vec!["10.0.0.1".parse().unwrap()],
            srv: vec![],
        })
    }

    #[test]
    fn valid_answer_then_next_query_after_timeout_resolve() {
        let mut r = Resolution::new("web".into(), Qtype::Aaaa);
        assert!(r.due(0, &T));
        assert_eq!(r.start(7, &T), Qtype::Aaaa);
        r.sent(2, 0);
        assert!(!r.due(5000, &T));
        assert!(matches!(r.on_response(valid(), 10), Step::Success(_)));
        assert_eq!(r.status, Status::Valid);
        assert_eq!(r.last_valid, Some(10));
        assert!(!r.due(1009, &T));
        assert!(r.due(1010, &T));
        assert_eq!(r.next_wake(&T), Some(1010));
    }

    #[test]
    fn errors_from_all_nameservers_fall_back_to_the_other_family_once() {
        let mut r = Resolution::new("web".into(), Qtype::Aaaa);
        r.start(1, &T);
        r.sent(2, 0);
        // One nameserver's error waits for the other.
        assert_eq!(r.on_response(Verdict::AncountZero, 1), Step::Nothing);
        assert_eq!(r.on_response(Verdict::AncountZero, 2), Step::Send(Qtype::A));
        r.sent(2, 2);
        // Errors again on the fallback: wait for the retry timer.
        assert_eq!(r.on_response(Verdict::NxDomain, 3), Step::Nothing);
        assert_eq!(r.on_response(Verdict::NxDomain, 3), Step::Nothing);
        assert_eq!(r.tick(400, &T), Step::Nothing);
        // The retry goes back to the preferred type and spends a try.
        assert_eq!(r.tick(502, &T), Step::Send(Qtype::Aaaa));
        r.sent(2, 502);
        assert_eq!(r.on_response(Verdict::NxDomain, 503), Step::Nothing);
        assert_eq!(r.on_response(Verdict::NxDomain, 503), Step::Send(Qtype::A));
        r.sent(2, 503);
        assert_eq!(r.on_response(Verdict::NxDomain, 504), Step::Nothing);
        assert_eq!(r.on_response(Verdict::NxDomain, 504), Step::Nothing);
        // The last try: preferred type, its fallback, then the failure.
        assert_eq!(r.tick(1003, &T), Step::Send(Qtype::Aaaa));
        r.sent(2, 1003);
        assert_eq!(r.on_response(Verdict::NxDomain, 1004), Step::Nothing);
        assert_eq!(r.on_response(Verdict::NxDomain, 1004), Step::Send(Qtype::A));
        r.sent(2, 1004);
        assert_eq!(r.on_response(Verdict::NxDomain, 1005), Step::Nothing);
        assert_eq!(r.on_response(Verdict::NxDomain, 1005), Step::Failure);
        assert_eq!(r.status, Status::Nx);
        assert!(!r.running());
    }

    #[test]
    fn silence_is_a_timeout_after_the_retries() {
        let mut r = Resolution::new("web".into(), Qtype::A);
        r.start(1, &T);
        r.sent(1, 0);
        assert_eq!(r.tick(500, &T), Step::Send(Qtype::A));
        r.sent(1, 500);
        assert_eq!(r.tick(1000, &T), Step::Send(Qtype::A));
        r.sent(1, 1000);
        assert_eq!(r.tick(1500, &T), Step::Failure);
        assert_eq!(r.status, Status::Timeout);
        let h = Holds {
            nx: 30_000,
            timeout: 30_000,
            refused: 30_000,
            other: 30_000,
        };
        // Never valid: the hold is over at once.
        assert!(r.hold_expired(1500, &h));
        r.last_valid = Some(1000);
        assert!(!r.hold_expired(30_999, &h));
        assert!(r.hold_expired(31_000, &h));
    }
}
