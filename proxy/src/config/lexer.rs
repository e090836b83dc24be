//! Splits one configuration line into words with HAProxy 2.6's rules: `#` starts a comment outside
//! quotes, `'…'` is literal, `"…"` allows `\` escapes and `$VAR` / `${VAR}` / `${VAR[*]}`
//! expansion, and outside quotes `\` escapes a space, `#`, `\`, a quote, `t`, `n`, `r` or `xNN`
//! (any other `\` stays as written). Pure: the environment comes from the caller.

/// A line that cannot be split. `pos` is the byte offset in the line of the offending character.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexError {
    pub msg: &'static str,
    pub pos: usize,
}

impl LexError {
    /// HAProxy's rendering: the message, the line (from its first non-blank) and a caret.
    pub fn describe(&self, line: &str) -> String {
        let lead = line.len() - line.trim_start_matches([' ', '\t']).len();
        let shown = line
            .get(lead..)
            .unwrap_or("")
            .trim_end_matches(['\r', '\n']);
        let caret = line
            .get(lead..self.pos.max(lead))
            .map(|s| s.chars().count())
            .unwrap_or(0);
        format!(
            "{} at position {}:\n  {}\n  {}^",
            self.msg,
            self.pos + 1,
            shown,
            " ".repeat(caret)
        )
    }
}

enum State {
    Bare,
    Single,
    Double,
}

struct Words {
    done: Vec<String>,
    cur: Vec<u8>,
    open: bool,
}

impl Words {
    fn push(&mut self, b: &[u8]) {
        self.cur.extend_from_slice(b);
        self.open = true;
    }
    fn end(&mut self) {
        if self.open {
            self.done
                .push(String::from_utf8_lossy(&self.cur).into_owned());
            self.cur.clear();
            self.open = false;
        }
    }
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// Splits `line` (without its newline). An empty result means a blank or comment line.
pub fn split_line(
    line: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, LexError> {
    let b = line.as_bytes();
    let mut w = Words {
        done: Vec::new(),
        cur: Vec::new(),
        open: false,
    };
    let mut state = State::Bare;
    let mut quote_at = 0;
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        match state {
            State::Single => {
                if c == b'\'' {
                    state = State::Bare;
                } else {
                    w.push(&[c]);
                }
                i += 1;
            }
            State::Bare | State::Double => {
                let dq = matches!(state, State::Double);
                match c {
                    b' ' | b'\t' | b'\r' | b'\n' if !dq => {
                        w.end();
                        i += 1;
                    }
                    b'#' if !dq => break,
                    b'\'' if !dq => {
                        state = State::Single;
                        quote_at = i;
                        w.open = true;
                        i += 1;
                    }
                    b'"' => {
                        if dq {
                            state = State::Bare;
                        } else {
                            state = State::Double;
                            quote_at = i;
                            w.open = true;
                        }
                        i += 1;
                    }
                    b'\\' => i = escape(b, i, dq, &mut w)?,
                    b'$' if dq => i = expand(b, i, env, &mut w)?,
                    _ => {
                        w.push(&[c]);
                        i += 1;
                    }
                }
            }
        }
    }
    if !matches!(state, State::Bare) {
        return Err(LexError {
            msg: "unmatched quote",
            pos: quote_at,
        });
    }
    w.end();
    Ok(w.done)
}

/// `b[i]` is a backslash; returns the index after the sequence.
fn escape(b: &[u8], i: usize, dq: bool, w: &mut Words) -> Result<usize, LexError> {
    let next = b.get(i + 1).copied();
    match next {
        Some(c @ (b' ' | b'#' | b'\\' | b'"' | b'\'')) => w.push(&[c]),
        Some(b'$') if dq => w.push(b"$"),
        Some(b't') => w.push(b"\t"),
        Some(b'n') => w.push(b"\n"),
        Some(b'r') => w.push(b"\r"),
        Some(b'x') => {
            let v = match (
                b.get(i + 2).copied().and_then(hex),
                b.get(i + 3).copied().and_then(hex),
            ) {
                (Some(h), Some(l)) => h * 16 + l,
                _ => {
                    return Err(LexError {
                        msg: "truncated or invalid hexadecimal sequence",
                        pos: i,
                    });
                }
            };
            w.push(&[v]);
            return Ok(i + 4);
        }
        _ => {
            w.push(b"\\");
            return Ok(i + 1);
        }
    }
    Ok(i + 2)
}

fn is_name_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_name(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

/// `b[i]` is a `$` inside double quotes; returns the index after the reference.
fn expand(
    b: &[u8],
    i: usize,
    env: &dyn Fn(&str) -> Option<String>,
    w: &mut Words,
) -> Result<usize, LexError> {
    let braced = b.get(i + 1) == Some(&b'{');
    let start = if braced { i + 2 } else { i + 1 };
    if !b.get(start).is_some_and(|&c| is_name_start(c)) {
        return Err(LexError {
            msg: "forbidden first char in environment variable name",
            pos: start,
        });
    }
    let mut end = start;
    while b.get(end).is_some_and(|&c| is_name(c)) {
        end += 1;
    }
    let name = String::from_utf8_lossy(b.get(start..end).unwrap_or_default()).into_owned();
    let mut split = false;
    let mut default = None;
    let mut next = end;
    if braced {
        if b.get(end) == Some(&b'[') {
            if b.get(end..end + 3) != Some(b"[*]") {
                return Err(LexError {
                    msg: "truncated or invalid word expansion sequence",
                    pos: end,
                });
            }
            split = true;
            next = end + 3;
        }
        // `${NAME-default}`: the text up to the brace stands in for an unset variable.
        if b.get(next) == Some(&b'-') {
            let from = next + 1;
            let Some(len) = b
                .get(from..)
                .and_then(|r| r.iter().position(|&c| c == b'}'))
            else {
                return Err(LexError {
                    msg: "unmatched brace in environment variable name",
                    pos: i + 1,
                });
            };
            default = b.get(from..from + len);
            next = from + len;
        }
        if b.get(next) != Some(&b'}') {
            return Err(LexError {
                msg: "unmatched brace in environment variable name",
                pos: i + 1,
            });
        }
        next += 1;
    }
    let value = match (env(&name), default) {
        (Some(v), _) => v,
        (None, Some(d)) => String::from_utf8_lossy(d).into_owned(),
        (None, None) => String::new(),
    };
    if split {
        // `${VAR[*]}`: the value's spaces separate words.
        let mut first = true;
        for part in value.split(' ').filter(|p| !p.is_empty()) {
            if !first {
                w.end();
            }
            w.push(part.as_bytes());
            first = false;
        }
    } else {
        w.push(value.as_bytes());
    }
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        match k {
            "FOO" => Some("foo".into()),
            "BAR" => Some("a b".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    fn s(line: &str) -> Vec<String> {
        split_line(line, &env).unwrap()
    }

    fn err(line: &str) -> LexError {
        split_line(line, &env).unwrap_err()
    }

    #[test]
    fn words_and_comments() {
        assert_eq!(s("  bind  *:80\tssl # comment"), ["bind", "*:80", "ssl"]);
        assert!(s("   # only a comment").is_empty());
        assert!(s("").is_empty());
        assert_eq!(s("a#b"), ["a"]);
        assert_eq!(s("a\\#b"), ["a#b"]);
        assert_eq!(s("x\r"), ["x"]);
    }

    #[test]
    fn quotes() {
        assert_eq!(
            s("\"a b\"\\ c'd e'\\#x #c"),
            ["a b cd e#x"],
            "as HAProxy 2.6 splits it"
        );
        assert_eq!(s("a\"b\"c"), ["abc"]);
        assert_eq!(s("x \"\" y"), ["x", "", "y"]);
        assert_eq!(s("'a\"b'"), ["a\"b"]);
        assert_eq!(s("\"a'b\""), ["a'b"]);
        assert_eq!(s("'$FOO \\t'"), ["$FOO \\t"]);
        assert_eq!(s("\"a # b\""), ["a # b"]);
    }

    #[test]
    fn escapes() {
        assert_eq!(s("a\\x41b"), ["aAb"]);
        assert_eq!(s("\"\\x41\""), ["A"]);
        assert_eq!(s("a\\tb a\\nb a\\rb"), ["a\tb", "a\nb", "a\rb"]);
        assert_eq!(s("\"a\\tb\""), ["a\tb"]);
        assert_eq!(s("a\\ b"), ["a b"]);
        assert_eq!(s("a\\\\b"), ["a\\b"]);
        assert_eq!(s("a\\\"b"), ["a\"b"]);
        assert_eq!(s("a\\'b"), ["a'b"]);
        assert_eq!(s("a\\qb"), ["a\\qb"]);
        assert_eq!(s("\"a\\qb\""), ["a\\qb"]);
        assert_eq!(s("a\\$b"), ["a\\$b"]);
        assert_eq!(s("\"\\$FOO\""), ["$FOO"]);
        assert_eq!(s("a\\"), ["a\\"]);
    }

    #[test]
    fn environment() {
        assert_eq!(s("$FOO"), ["$FOO"], "no expansion outside quotes");
        assert_eq!(s("\"$FOO\""), ["foo"]);
        assert_eq!(s("\"$FOO.x\""), ["foo.x"]);
        assert_eq!(s("x\"${FOO}\"y"), ["xfooy"]);
        assert_eq!(s("\"${FOO}x\""), ["foox"]);
        assert_eq!(s("\"$BAR\"x"), ["a bx"]);
        assert_eq!(s("\"${NOPE}\"x"), ["x"]);
        assert_eq!(s("\"$_X\"y"), ["y"]);
        assert_eq!(s("\"$EMPTY\""), [""]);
        assert_eq!(s("x\"${BAR[*]}\""), ["xa", "b"]);
        assert_eq!(
            s("\"${NOPE-127.0.0.1:80}\""),
            ["127.0.0.1:80"],
            "default of an unset one"
        );
        assert_eq!(s("\"${FOO-x}\""), ["foo"], "a set variable wins");
        assert_eq!(s("\"${EMPTY-x}\""), [""], "set but empty is still set");
        assert_eq!(s("\"${NOPE-}\"y"), ["y"]);
        assert_eq!(s("\"${NOPE-a b}\""), ["a b"]);
        assert_eq!(
            err("\"${NOPE-abc\"").msg,
            "unmatched brace in environment variable name"
        );
        assert_eq!(
            s("stats socket \"${FOO}/admin.sock\" mode 600"),
            ["stats", "socket", "foo/admin.sock", "mode", "600"]
        );
    }

    #[test]
    fn errors_point_where_haproxy_does() {
        assert_eq!(
            err("  \"unterminated"),
            LexError {
                msg: "unmatched quote",
                pos: 2
            }
        );
        assert_eq!(err("x'a\\'b'").pos, 6);
        assert_eq!(
            err("\"${FOO\"").msg,
            "unmatched brace in environment variable name"
        );
        assert_eq!(err("\"${FOO\"").pos, 2);
        assert_eq!(
            err("q\"${FOO[x]}\""),
            LexError {
                msg: "truncated or invalid word expansion sequence",
                pos: 7
            }
        );
        assert_eq!(
            err("\\xzz"),
            LexError {
                msg: "truncated or invalid hexadecimal sequence",
                pos: 0
            }
        );
        assert_eq!(err("\\x4").pos, 0);
        assert_eq!(
            err("\"a$\""),
            LexError {
                msg: "forbidden first char in environment variable name",
                pos: 3
            }
        );
        assert_eq!(err("\"${}\"x").pos, 3);
        assert_eq!(err("\"$1\"x").pos, 2);
    }

    #[test]
    fn describe_matches_haproxy() {
        let line = "  \"unterminated";
        assert_eq!(
            err(line).describe(line),
            "unmatched quote at position 3:\n  \"unterminated\n  ^"
        );
        let line = "q\"${FOO[x]}\"";
        assert_eq!(
            err(line).describe(line),
            "truncated or invalid word expansion sequence at position 8:\n  q\"${FOO[x]}\"\n         ^"
        );
    }
}
