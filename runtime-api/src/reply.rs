//! One command's reply and HAProxy's severity prefixes (`set severity-output`).
//!
//! HAProxy tags the texts a command returns as a *message* (`cli_msg`, `cli_err`: usage lists,
//! errors, `show cli level`…) with a syslog severity; a session with `severity-output number` or
//! `string` sees `[<n>]: ` or `[<name>]: ` before such a message. Dumps written by an I/O handler
//! (`show stat`, `get weight`, `show servers state`) carry no severity and are never prefixed.

use std::ops::{Deref, DerefMut};

/// `set severity-output none|number|string` (also a `stats socket` bind option in HAProxy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SeverityOutput {
    #[default]
    None,
    Number,
    String,
}

impl SeverityOutput {
    /// The argument of `set severity-output` (case-sensitive, as HAProxy).
    pub fn parse(s: &str) -> Option<SeverityOutput> {
        match s {
            "none" => Some(SeverityOutput::None),
            "number" => Some(SeverityOutput::Number),
            "string" => Some(SeverityOutput::String),
            _ => None,
        }
    }
}

/// The syslog severities HAProxy's CLI messages use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sev {
    Err = 3,
    Warning = 4,
    Notice = 5,
    Info = 6,
}

impl Sev {
    fn name(self) -> &'static str {
        match self {
            Sev::Err => "err",
            Sev::Warning => "warning",
            Sev::Notice => "notice",
            Sev::Info => "info",
        }
    }
}

/// A command's output: the text, and the severity when it is a message rather than a dump.
/// Derefs to the text, so dumps are written as into a `String`.
#[derive(Debug, Default)]
pub struct Reply {
    pub text: String,
    pub sev: Option<Sev>,
}

impl Reply {
    /// Appends a message; the first severity given is the reply's.
    pub fn msg(&mut self, sev: Sev, text: &str) {
        self.sev.get_or_insert(sev);
        self.text.push_str(text);
    }
    pub fn err(&mut self, text: &str) {
        self.msg(Sev::Err, text);
    }
    pub fn warn(&mut self, text: &str) {
        self.msg(Sev::Warning, text);
    }
    pub fn notice(&mut self, text: &str) {
        self.msg(Sev::Notice, text);
    }
    pub fn info(&mut self, text: &str) {
        self.msg(Sev::Info, text);
    }

    /// Writes the reply as a session with `mode` sees it.
    pub fn render(&self, mode: SeverityOutput, out: &mut String) {
        if let Some(sev) = self.sev.filter(|_| !self.text.is_empty()) {
            match mode {
                SeverityOutput::None => {}
                SeverityOutput::Number => {
                    out.push('[');
                    out.push(char::from(b'0' + sev as u8));
                    out.push_str("]: ");
                }
                SeverityOutput::String => {
                    out.push('[');
                    out.push_str(sev.name());
                    out.push_str("]: ");
                }
            }
        }
        out.push_str(&self.text);
    }
}

impl Deref for Reply {
    type Target = String;
    fn deref(&self) -> &String {
        &self.text
    }
}

impl DerefMut for Reply {
    fn deref_mut(&mut self) -> &mut String {
        &mut self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_messages_only() {
        let mut r = Reply::default();
        r.err("No such backend.\n");
        let mut out = String::new();
        r.render(SeverityOutput::Number, &mut out);
        r.render(SeverityOutput::String, &mut out);
        r.render(SeverityOutput::None, &mut out);
        assert_eq!(
            out,
            "[3]: No such backend.\n[err]: No such backend.\nNo such backend.\n"
        );
        let mut dump = Reply::default();
        dump.push_str("1 (initial 1)\n");
        let mut out = String::new();
        dump.render(SeverityOutput::Number, &mut out);
        assert_eq!(out, "1 (initial 1)\n");
        // An empty message (a command that succeeded silently) gets no prefix.
        let mut empty = Reply::default();
        empty.info("");
        let mut out = String::new();
        empty.render(SeverityOutput::String, &mut out);
        assert_eq!(out, "");
    }
}
