//! When a server's first HTTP/2 frame (its SETTINGS) has been handed to the `h2` crate, which
//! RFC 8441's extended CONNECT has to wait for: a tap on the connection's poll-based I/O
//! ([`PollIo`](crate::engine::pollio::PollIo)).

use std::cell::Cell;

/// How far the server's first frame has come.
#[derive(Default)]
pub struct Preface {
    /// The first frame's length field (its first 3 bytes), as they came.
    head: Cell<[u8; 3]>,
    /// Bytes handed to the crate so far (counted up to the first frame's end).
    seen: Cell<usize>,
    /// The whole first frame has been handed over.
    pub done: Cell<bool>,
    pub notify: tokio::sync::Notify,
}

impl Preface {
    fn delivered(&self, bytes: &[u8]) {
        if self.done.get() {
            return;
        }
        let before = self.seen.get();
        let mut head = self.head.get();
        for (i, b) in bytes.iter().enumerate().take(3usize.saturating_sub(before)) {
            head[before + i] = *b;
        }
        self.head.set(head);
        let seen = before + bytes.len();
        self.seen.set(seen);
        // A frame is its 9-byte header and the payload length the first 3 bytes give.
        let len = usize::from(head[0]) << 16 | usize::from(head[1]) << 8 | usize::from(head[2]);
        if seen >= 3 && seen >= 9 + len {
            self.done.set(true);
            self.notify.notify_waiters();
        }
    }

    /// The connection ended before the first frame: nobody waits any longer.
    pub fn give_up(&self) {
        self.done.set(true);
        self.notify.notify_waiters();
    }
}

impl crate::engine::pollio::ReadTap for Preface {
    fn delivered(&self, bytes: &[u8]) {
        Preface::delivered(self, bytes);
    }
}
