//! What a stream's rules record for its log line: the last final rule (`last_rule_file`,
//! `last_rule_line`: where the rule that ended a rule set — `accept`, `reject`, `allow`,
//! `deny`, `redirect`… — was written; HAProxy records it per stream in `tcp-request content`,
//! `tcp-response content`, `http-request`, `http-response` and `http-after-response`), and the
//! severity `set-log-level` chose.

use std::cell::{Cell, RefCell};
use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::{Mutex, OnceLock};

/// A rule's place in the configuration. `Copy`: file names are interned once per process (a
/// configuration has a handful), so recording one per stream costs no allocation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RuleLoc {
    pub file: &'static str,
    pub line: u32,
}

impl RuleLoc {
    pub fn new(file: &str, line: u32) -> RuleLoc {
        RuleLoc {
            file: intern(file),
            line,
        }
    }
}

/// The one `&'static str` of a file name.
fn intern(file: &str) -> &'static str {
    static NAMES: OnceLock<Mutex<HashSet<&'static str>>> = OnceLock::new();
    let mut names = NAMES
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    if let Some(n) = names.get(file) {
        return n;
    }
    let n: &'static str = Box::leak(file.to_string().into_boxed_str());
    names.insert(n);
    n
}

/// `set-log-level`'s choice: a syslog severity, or no line at all (`silent`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogLevel {
    Silent,
    Severity(u8),
}

/// One stream's last final rule and log level, the addresses `set-src`/`set-dst` gave the
/// stream (source, destination), and the `early-hint` interim responses still to send; rules
/// record into it while samples (and the log line) read it.
#[derive(Clone, Debug, Default)]
pub struct LastRule(
    Cell<Option<RuleLoc>>,
    Cell<Option<LogLevel>>,
    Cell<(Option<SocketAddr>, Option<SocketAddr>)>,
    RefCell<Vec<(String, String)>>,
);

impl LastRule {
    pub fn set(&self, at: RuleLoc) {
        self.0.set(Some(at));
    }

    pub fn get(&self) -> Option<RuleLoc> {
        self.0.get()
    }

    pub fn set_level(&self, l: LogLevel) {
        self.1.set(Some(l));
    }

    /// The level `set-log-level` chose, if a rule did.
    pub fn level(&self) -> Option<LogLevel> {
        self.1.get()
    }

    /// `set-src` / `set-dst`: the connection's new source (or destination) address.
    pub fn set_addr(&self, dst: bool, a: SocketAddr) {
        let (s, d) = self.2.get();
        self.2.set(if dst { (s, Some(a)) } else { (Some(a), d) });
    }

    /// The addresses rules gave the connection (source, destination), if any.
    pub fn addrs(&self) -> (Option<SocketAddr>, Option<SocketAddr>) {
        self.2.get()
    }

    /// `early-hint <name> <value>`: one more 103 interim response for the client.
    pub fn push_hint(&self, name: &str, value: String) {
        self.3.borrow_mut().push((name.to_string(), value));
    }

    /// The interim responses' headers recorded so far, taken.
    pub fn take_hints(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.3.borrow_mut())
    }

    /// Takes what `other` recorded (a later phase's rules).
    pub fn merge(&self, other: &LastRule) {
        self.3.borrow_mut().extend(other.take_hints());
        if let Some(at) = other.get() {
            self.set(at);
        }
        if let Some(l) = other.level() {
            self.set_level(l);
        }
        let (s, d) = other.addrs();
        if let Some(s) = s {
            self.set_addr(false, s);
        }
        if let Some(d) = d {
            self.set_addr(true, d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_interned_and_the_last_one_wins() {
        let a = RuleLoc::new("/etc/h.cfg", 3);
        let b = RuleLoc::new(&String::from("/etc/h.cfg"), 9);
        assert!(std::ptr::eq(a.file, b.file));
        let l = LastRule::default();
        assert_eq!(l.get(), None);
        l.set(a);
        l.set(b);
        assert_eq!(l.get(), Some(RuleLoc::new("/etc/h.cfg", 9)));
    }
}
