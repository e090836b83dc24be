//! Configuration diagnostics: collected (parsing goes on after an error so that one run reports
//! every problem) and rendered the way HAProxy 2.6 prints them.

use std::fmt::Write as _;

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// `.notice`: printed, but not a warning (no "Warnings were found.").
    Notice,
    Warning,
    Alert,
}

/// One message about the configuration. `file` is empty and `line` 0 for messages that concern
/// the configuration as a whole (HAProxy prints those without `parsing [..]`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diag {
    pub file: String,
    pub line: u32,
    pub severity: Severity,
    pub msg: String,
    /// Rendered `parsing [f:l]: ` (no space before the colon), as HAProxy words the messages of
    /// its line reader (`.if`, `.alert`…) unlike those of keyword parsers.
    pub tight: bool,
    /// HAProxy stopped reading the configuration here (`ERR_ABORT`): no later checks ran, and it
    /// exits without its closing "Fatal errors found" line.
    pub abort: bool,
    /// The message carries its own location (`[f:l] : …`, `Parsing [f:l]: …`): `file` only marks
    /// the file as erroneous for the closing `Error(s) found` line.
    pub located: bool,
}

impl Diag {
    pub fn alert(file: &str, line: u32, msg: impl Into<String>) -> Diag {
        Diag {
            file: file.to_string(),
            line,
            severity: Severity::Alert,
            msg: msg.into(),
            tight: false,
            abort: false,
            located: false,
        }
    }

    /// A message of HAProxy's line reader (`parsing [f:l]: msg`).
    pub fn reader(file: &str, line: u32, severity: Severity, msg: impl Into<String>) -> Diag {
        Diag {
            tight: true,
            ..Diag::warning(file, line, msg).with_severity(severity)
        }
    }

    fn with_severity(mut self, severity: Severity) -> Diag {
        self.severity = severity;
        self
    }

    pub fn warning(file: &str, line: u32, msg: impl Into<String>) -> Diag {
        Diag {
            file: file.to_string(),
            line,
            severity: Severity::Warning,
            msg: msg.into(),
            tight: false,
            abort: false,
            located: false,
        }
    }

    /// A message without a location.
    pub fn global(severity: Severity, msg: impl Into<String>) -> Diag {
        Diag {
            file: String::new(),
            line: 0,
            severity,
            msg: msg.into(),
            tight: false,
            abort: false,
            located: false,
        }
    }

    /// An alert about `file` whose text already says where (`[f:l] : msg`).
    pub fn located(file: &str, line: u32, msg: impl Into<String>) -> Diag {
        Diag {
            located: true,
            ..Diag::alert(file, line, msg)
        }
    }

    pub fn is_alert(&self) -> bool {
        self.severity == Severity::Alert
    }

    /// `[ALERT]    (PID) : config : parsing [file:line] : msg` (no trailing newline).
    pub fn render(&self, pid: u32) -> String {
        let tag = match self.severity {
            Severity::Alert => "[ALERT]",
            Severity::Warning => "[WARNING]",
            Severity::Notice => "[NOTICE]",
        };
        let mut out = format!("{tag:<10} ({pid}) : config : ");
        if !self.file.is_empty() && !self.located {
            let sep = if self.tight { "" } else { " " };
            let _ = write!(out, "parsing [{}:{}]{sep}: ", self.file, self.line);
        }
        out.push_str(&self.msg);
        out
    }
}

impl std::fmt::Display for Diag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.file.is_empty() {
            write!(f, "[{}:{}] ", self.file, self.line)?;
        }
        f.write_str(&self.msg)
    }
}

/// The full stderr text of a failed check: every diagnostic in order, then HAProxy's closing
/// lines (`Error(s) found in configuration file : <f>` for each file with an alert, then
/// `Fatal errors found in configuration.`).
pub fn render_failure(diags: &[Diag], pid: u32) -> String {
    let mut out = String::new();
    for d in diags {
        out.push_str(&d.render(pid));
        out.push('\n');
    }
    let mut files: Vec<&str> = Vec::new();
    for d in diags.iter().filter(|d| d.is_alert() && !d.file.is_empty()) {
        if !files.contains(&d.file.as_str()) {
            files.push(&d.file);
        }
    }
    for f in files {
        let _ = writeln!(
            out,
            "{:<10} ({pid}) : config : Error(s) found in configuration file : {f}",
            "[ALERT]"
        );
    }
    if !diags.iter().any(|d| d.abort) {
        let _ = writeln!(
            out,
            "{:<10} ({pid}) : config : Fatal errors found in configuration.",
            "[ALERT]"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_like_haproxy() {
        let d = Diag::alert("bad.cfg", 3, "unknown keyword 'foo' in 'frontend' section");
        assert_eq!(
            d.render(42),
            "[ALERT]    (42) : config : parsing [bad.cfg:3] : unknown keyword 'foo' in 'frontend' section"
        );
        let w = Diag::global(Severity::Warning, "missing timeouts for frontend 'f'.");
        assert_eq!(
            w.render(7),
            "[WARNING]  (7) : config : missing timeouts for frontend 'f'."
        );
        let all = render_failure(&[d, w], 1);
        assert_eq!(
            all.lines().collect::<Vec<_>>()[2..],
            [
                "[ALERT]    (1) : config : Error(s) found in configuration file : bad.cfg",
                "[ALERT]    (1) : config : Fatal errors found in configuration."
            ]
        );
    }
}
