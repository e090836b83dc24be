//! A transaction's captured values (`capture request|response header`, `capture` actions),
//! in the frontend's slots. Read by `%hr`/`%hs`/`%hrl`/`%hsl` and `capture.req|res.hdr(<n>)`.

use std::cell::RefCell;
use std::rc::Rc;

use crate::config::model::{CaptureSlot, Captures};
use crate::http::head::Headers;

/// One transaction's captures; `RefCell`s because rules fill them while samples read them.
#[derive(Debug, Default)]
pub struct Captured {
    pub req: RefCell<Vec<Option<String>>>,
    pub res: RefCell<Vec<Option<String>>>,
    /// Each slot's length, for rules that name a slot by `id`.
    lens: (Vec<usize>, Vec<usize>),
}

impl Captured {
    /// Empty slots for a frontend's captures; `None` when it declares none (nothing to carry).
    pub fn start(caps: &Captures) -> Option<Rc<Captured>> {
        if caps.req.is_empty() && caps.res.is_empty() {
            return None;
        }
        Some(Rc::new(Captured {
            req: RefCell::new(vec![None; caps.req.len()]),
            res: RefCell::new(vec![None; caps.res.len()]),
            lens: (
                caps.req.iter().map(|s| s.len).collect(),
                caps.res.iter().map(|s| s.len).collect(),
            ),
        }))
    }

    /// Stores `value` cut to `len` bytes (0: the slot's length) into request (or response)
    /// slot `slot`; a slot the frontend does not have is ignored, as HAProxy does.
    pub fn store(&self, response: bool, slot: usize, len: usize, value: &str) {
        let lens = if response { &self.lens.1 } else { &self.lens.0 };
        let len = match len {
            0 => lens.get(slot).copied().unwrap_or(0),
            n => n,
        };
        let mut v = if response {
            self.res.borrow_mut()
        } else {
            self.req.borrow_mut()
        };
        if let Some(s) = v.get_mut(slot) {
            *s = Some(cut(value, len).to_string());
        }
    }

    /// `capture request|response header`: each slot takes the last value of its header.
    pub fn headers(&self, response: bool, slots: &[CaptureSlot], headers: &Headers) {
        for (i, slot) in slots.iter().enumerate() {
            let Some(name) = &slot.header else { continue };
            if let Some(v) = headers
                .0
                .iter()
                .rev()
                .find(|h| h.name.eq_ignore_ascii_case(name))
            {
                self.store(response, i, slot.len, &v.value_str());
            }
        }
    }

    pub fn get(&self, response: bool, slot: usize) -> Option<String> {
        let v = if response {
            self.res.borrow()
        } else {
            self.req.borrow()
        };
        v.get(slot).cloned().flatten()
    }
}

/// The first `len` bytes of `s`, backed off to a character boundary.
fn cut(s: &str, len: usize) -> &str {
    let mut end = len.min(s.len());
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slot(h: Option<&str>, len: usize) -> CaptureSlot {
        CaptureSlot {
            header: h.map(str::to_string),
            len,
        }
    }

    #[test]
    fn header_slots_take_the_last_value_cut_to_len() {
        let caps = Captures {
            req: vec![slot(Some("host"), 4), slot(None, 10), slot(Some("X-A"), 20)],
            res: vec![],
        };
        let c = Captured::start(&caps).unwrap();
        let mut h = Headers::default();
        h.append("Host", "example.com");
        h.append("x-a", "one");
        h.append("X-A", "two, three");
        c.headers(false, &caps.req, &h);
        assert_eq!(
            *c.req.borrow(),
            [Some("exam".into()), None, Some("two, three".into())]
        );
        c.store(false, 1, 3, "héllo");
        assert_eq!(c.get(false, 1).as_deref(), Some("hé"));
        // A slot the frontend lacks is ignored.
        c.store(false, 7, 3, "x");
        assert_eq!(c.req.borrow().len(), 3);
        assert!(Captured::start(&Captures::default()).is_none());
    }
}
