//! HAProxy 2.6's condition language for `.if`/`.elif` and `-cc` (configuration.txt 2.4): terms
//! (`0`/`1`/any integer, predicates, `( expr )`, `!term`), `&&` binding tighter than `||`.
//!
//! The whole expression is parsed before anything is evaluated, so a syntax error anywhere is
//! reported even where `&&`/`||` would short-circuit, with HAProxy's message and the byte offset
//! HAProxy's caret points at.

/// The HAProxy release portcullis answers `version_atleast()`/`version_before()` for: the one
/// its behaviour is compared with (reply bytes, log lines, reg-tests).
pub const HAPROXY_VERSION: &str = "2.6.12";

/// HAProxy's `-vv` "Feature list" for what portcullis has: `feature(X)` is true for `+X`.
/// OPENSSL stands for TLS (rustls), PCRE2 for regex matching, PROMEX for the exporter, LUA for
/// the built-in Lua 5.3 (`crate::lua`).
pub const FEATURES: &str = "+ACCEPT4 +EPOLL +GETADDRINFO +LINUX_SPLICE +LUA +OPENSSL +PCRE2 \
+PROMEX +THREAD -51DEGREES -DEVICEATLAS -OT -PCRE -QUIC -SLZ -WURFL -ZLIB";

/// HAProxy's recursion bound for nested terms.
const MAX_DEPTH: u32 = 1024;

/// A condition that does not parse (or cannot be evaluated): HAProxy's message and the byte
/// offset in the expression of the first bad character.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CondError {
    pub msg: String,
    pub pos: usize,
}

/// Evaluates `expr` (words already re-joined with single spaces, as HAProxy does); `env`
/// answers `defined()`. An empty expression is false.
pub fn eval(expr: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<bool, String> {
    eval_at(expr, env).map_err(|e| e.msg)
}

/// [`eval`] with the error position.
pub fn eval_at(expr: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<bool, CondError> {
    let b = expr.as_bytes();
    if b.is_empty() {
        return Ok(false);
    }
    let mut p = P { b };
    let mut at = 0;
    match p.expr(&mut at, MAX_DEPTH)? {
        Some(e) => {
            let end = skip_blanks(b, at);
            if let Some(&c) = b.get(end) {
                return Err(CondError {
                    msg: format!(
                        "unexpected character '{}' at the end of conditional expression '{expr}'",
                        char::from(c)
                    ),
                    pos: end,
                });
            }
            e.eval(env)
        }
        None => Err(CondError {
            msg: format!("unparsable conditional expression '{expr}'"),
            pos: at,
        }),
    }
}

/// `a || b || …` of `x && y && …` chains.
struct Or(Vec<And>);
struct And(Vec<Term>);

struct Term {
    neg: bool,
    kind: Kind,
}

enum Kind {
    Const(bool),
    Paren(Or),
    Pred(Pred, Vec<String>),
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pred {
    Defined,
    Feature,
    Streq,
    Strneq,
    VersionAtleast,
    VersionBefore,
    OpensslVersionAtleast,
    OpensslVersionBefore,
    SsllibNameStartswith,
}

const PREDICATES: &[(&str, Pred, usize)] = &[
    ("defined", Pred::Defined, 1),
    ("feature", Pred::Feature, 1),
    ("streq", Pred::Streq, 2),
    ("strneq", Pred::Strneq, 2),
    ("version_atleast", Pred::VersionAtleast, 1),
    ("version_before", Pred::VersionBefore, 1),
    ("openssl_version_atleast", Pred::OpensslVersionAtleast, 1),
    ("openssl_version_before", Pred::OpensslVersionBefore, 1),
    ("ssllib_name_startswith", Pred::SsllibNameStartswith, 1),
];

fn skip_blanks(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t')) {
        i += 1;
    }
    i
}

fn rest(b: &[u8], i: usize) -> String {
    String::from_utf8_lossy(b.get(i..).unwrap_or_default()).into_owned()
}

fn err(msg: String, pos: usize) -> CondError {
    CondError { msg, pos }
}

struct P<'a> {
    b: &'a [u8],
}

/// The parsers follow HAProxy's three-way result: `Ok(Some)` parsed (and `at` moved past it),
/// `Ok(None)` nothing there (the caller words the error), `Err` a reported error.
impl P<'_> {
    fn expr(&mut self, at: &mut usize, depth: u32) -> Result<Option<Or>, CondError> {
        let b = self.b;
        let mut in_ = *at;
        if in_ >= b.len() {
            return Ok(None);
        }
        if depth == 0 {
            return Err(err(
                format!("unparsable conditional expression '{}'", rest(b, in_)),
                in_,
            ));
        }
        let Some(left) = self.and(&mut in_, depth - 1)? else {
            return Err(err(
                format!("unparsable conditional expression '{}'", rest(b, in_)),
                in_,
            ));
        };
        in_ = skip_blanks(b, in_);
        *at = in_;
        let mut out = vec![left];
        if b.get(in_..in_ + 2) != Some(b"||") {
            return Ok(Some(Or(out)));
        }
        in_ = skip_blanks(b, in_ + 2);
        match self.expr(&mut in_, depth - 1)? {
            Some(Or(more)) => {
                *at = in_;
                out.extend(more);
                Ok(Some(Or(out)))
            }
            None => Ok(None),
        }
    }

    fn and(&mut self, at: &mut usize, depth: u32) -> Result<Option<And>, CondError> {
        let b = self.b;
        let mut in_ = *at;
        if in_ >= b.len() {
            return Ok(None);
        }
        let sub = |i: usize| {
            err(
                format!("unparsable conditional sub-expression '{}'", rest(b, i)),
                i,
            )
        };
        if depth == 0 {
            return Err(sub(in_));
        }
        let Some(left) = self.term(&mut in_, depth - 1)? else {
            return Err(sub(in_));
        };
        in_ = skip_blanks(b, in_);
        *at = in_;
        let mut out = vec![left];
        if b.get(in_..in_ + 2) != Some(b"&&") {
            return Ok(Some(And(out)));
        }
        in_ = skip_blanks(b, in_ + 2);
        match self.and(&mut in_, depth - 1)? {
            Some(And(more)) => {
                *at = in_;
                out.extend(more);
                Ok(Some(And(out)))
            }
            None => Ok(None),
        }
    }

    fn term(&mut self, at: &mut usize, depth: u32) -> Result<Option<Term>, CondError> {
        let b = self.b;
        let start = *at;
        let mut in_ = skip_blanks(b, start);
        if in_ >= b.len() {
            return Ok(None);
        }
        let unparsable = || {
            err(
                format!("unparsable conditional expression '{}'", rest(b, start)),
                start,
            )
        };
        if depth == 0 {
            return Err(unparsable());
        }
        let mut neg = false;
        while b.get(in_) == Some(&b'!') {
            neg = !neg;
            in_ = skip_blanks(b, in_ + 1);
        }
        if let Some((nonzero, end)) = strtol0(b, in_) {
            *at = end;
            return Ok(Some(Term {
                neg,
                kind: Kind::Const(nonzero),
            }));
        }
        if b.get(in_) == Some(&b'(') {
            in_ = skip_blanks(b, in_ + 1);
            let Some(e) = self.expr(&mut in_, depth - 1)? else {
                return Err(unparsable());
            };
            in_ = skip_blanks(b, in_);
            if b.get(in_) != Some(&b')') {
                return Err(err(
                    format!(
                        "expected ')' after conditional expression '{}'",
                        rest(b, start)
                    ),
                    start,
                ));
            }
            *at = skip_blanks(b, in_ + 1);
            return Ok(Some(Term {
                neg,
                kind: Kind::Paren(e),
            }));
        }
        // The predicate's name runs up to a space or '(' (HAProxy's strcspn(" (")).
        let tail = b.get(in_..).unwrap_or_default();
        let len = tail
            .iter()
            .position(|&c| c == b' ' || c == b'(')
            .unwrap_or(tail.len());
        let word = tail.get(..len).unwrap_or_default();
        let Some(&(name, pred, nargs)) = PREDICATES.iter().find(|p| p.0.as_bytes() == word) else {
            return Err(unparsable());
        };
        match arg_list(b, in_ + len, nargs) {
            Ok((args, end)) => {
                *at = end;
                Ok(Some(Term {
                    neg,
                    kind: Kind::Pred(pred, args),
                }))
            }
            Err((msg, arg_no, end)) => Err(err(
                format!(
                    "{msg} in argument {arg_no} of predicate '{name}' used in conditional expression"
                ),
                end,
            )),
        }
    }
}

/// C's `strtol(s, &end, 0)` as far as the outcome matters here: whether a number was read,
/// whether it is non-zero, and where it ends.
fn strtol0(b: &[u8], start: usize) -> Option<(bool, usize)> {
    let mut i = start;
    if matches!(b.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let hex = b.get(i) == Some(&b'0')
        && matches!(b.get(i + 1), Some(b'x' | b'X'))
        && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
    let (radix_ok, first): (fn(&u8) -> bool, usize) = if hex {
        (u8::is_ascii_hexdigit, i + 2)
    } else if b.get(i) == Some(&b'0') {
        (|c| (b'0'..=b'7').contains(c), i)
    } else {
        (u8::is_ascii_digit, i)
    };
    let mut j = first;
    let mut nonzero = false;
    while let Some(c) = b.get(j).filter(|c| radix_ok(c)) {
        nonzero |= *c != b'0';
        j += 1;
    }
    (j > first).then_some((nonzero, j))
}

/// HAProxy's `make_arg_list` for string arguments: `(a,b)` with `'…'`/`"…"` quoting and `\`
/// escapes. Without a `(` every mandatory argument is empty. `Err` is (message, argument
/// number HAProxy reports, offset).
fn arg_list(
    b: &[u8],
    mut i: usize,
    nbarg: usize,
) -> Result<(Vec<String>, usize), (String, usize, usize)> {
    let empty = b.get(i) != Some(&b'(');
    if !empty {
        i += 1;
    }
    let mut args: Vec<String> = Vec::new();
    let mut pos = 0;
    while pos < nbarg {
        let mut out: Vec<u8> = Vec::new();
        let (mut sq, mut dq) = (false, false);
        while !empty && let Some(&c) = b.get(i) {
            match c {
                b'"' if !sq => {
                    dq = !dq;
                    i += 1;
                }
                b'\'' if !dq => {
                    sq = !sq;
                    i += 1;
                }
                b'\\' if !sq => {
                    let Some(&n) = b.get(i + 1) else {
                        return Err((
                            format!(
                                "failed to parse '{}' after '{}' as type 'string' at position {}",
                                rest(b, i),
                                String::from_utf8_lossy(&out),
                                pos + 1
                            ),
                            pos,
                            i,
                        ));
                    };
                    match n {
                        b'\\' | b' ' | b'"' | b'\'' => {
                            out.push(n);
                            i += 2;
                        }
                        b'r' | b'n' | b't' => {
                            out.push(match n {
                                b'r' => b'\r',
                                b'n' => b'\n',
                                _ => b'\t',
                            });
                            i += 2;
                        }
                        // A lone '\' is kept and the next byte read normally.
                        _ => {
                            out.push(c);
                            i += 1;
                        }
                    }
                }
                b',' | b')' if !sq && !dq => break,
                _ => {
                    out.push(c);
                    i += 1;
                }
            }
        }
        args.push(String::from_utf8_lossy(&out).into_owned());
        pos += 1;
        if empty || matches!(b.get(i), None | Some(b')')) || pos >= nbarg {
            break;
        }
        i += 1; // the comma
    }
    if pos < nbarg {
        return Err((
            format!("missing arguments (got {pos}/{nbarg}), type 'string' expected"),
            pos,
            i,
        ));
    }
    if !empty {
        if b.get(i) == Some(&b')') {
            i += 1;
        } else {
            let word = rest(b, i);
            let msg = if word.is_empty() {
                "expected ')'".to_string()
            } else {
                format!("expected ')' before '{word}'")
            };
            // HAProxy counts the argument the missing ')' follows, not a new empty one.
            return Err((msg, if pos > 1 { pos - 1 } else { pos }, i));
        }
    }
    Ok((args, i))
}

impl Or {
    fn eval(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<bool, CondError> {
        for a in &self.0 {
            if a.eval(env)? {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

impl And {
    fn eval(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<bool, CondError> {
        for t in &self.0 {
            if !t.eval(env)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

impl Term {
    fn eval(&self, env: &dyn Fn(&str) -> Option<String>) -> Result<bool, CondError> {
        let v = match &self.kind {
            Kind::Const(v) => *v,
            Kind::Paren(e) => e.eval(env)?,
            Kind::Pred(p, args) => {
                let a = |i: usize| args.get(i).map_or("", String::as_str);
                match p {
                    Pred::Defined => env(a(0)).is_some(),
                    Pred::Feature => has_feature(a(0)),
                    Pred::Streq => a(0) == a(1),
                    Pred::Strneq => a(0) != a(1),
                    // An unparsable argument compares as "older" (HAProxy's -3 <= 0).
                    Pred::VersionAtleast => compare_version(a(0)) <= 0,
                    Pred::VersionBefore => compare_version(a(0)) > 0,
                    Pred::OpensslVersionAtleast | Pred::OpensslVersionBefore => {
                        return Err(err(
                            format!(
                                "'{}' cannot be evaluated: portcullis uses rustls, not OpenSSL",
                                PREDICATES.iter().find(|x| x.1 == *p).map_or("", |x| x.0)
                            ),
                            0,
                        ));
                    }
                    Pred::SsllibNameStartswith => "rustls".starts_with(a(0)) && !a(0).is_empty(),
                }
            }
        };
        Ok(v != self.neg)
    }
}

fn has_feature(name: &str) -> bool {
    !name.is_empty()
        && FEATURES
            .split(' ')
            .any(|w| w.strip_prefix('+') == Some(name))
}

/// `strtol(p, &end, 10)` truncated to `unsigned int` as HAProxy stores it.
fn strtol10(b: &[u8], start: usize) -> (u32, usize) {
    let mut i = start;
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)) {
        i += 1;
    }
    let neg = b.get(i) == Some(&b'-');
    if matches!(b.get(i), Some(b'+' | b'-')) {
        i += 1;
    }
    let first = i;
    let mut v: i64 = 0;
    while let Some(c) = b.get(i).filter(|c| c.is_ascii_digit()) {
        v = v.saturating_mul(10).saturating_add(i64::from(c - b'0'));
        i += 1;
    }
    if i == first {
        return (0, start);
    }
    let v = if neg { -v } else { v };
    // C's conversion of a long to unsigned int keeps the low 32 bits.
    (v as u32, i)
}

/// HAProxy's `split_version`: a.b.c.d, a `-devN`/`-rcN`/`-preN` tag, a commit count.
fn split_version(s: &str) -> Option<[u32; 7]> {
    let b = s.as_bytes();
    let mut v = [0u32, 0, 0, 0, 3, 0, 0];
    if b.is_empty() {
        return None;
    }
    let mut p = 0;
    let mut tag = false;
    for (k, slot) in v.iter_mut().take(4).enumerate() {
        let (n, e) = strtol10(b, p);
        *slot = n;
        p = e + 1;
        match b.get(e) {
            None => return Some(v),
            Some(b'-') => {
                tag = true;
                break;
            }
            Some(b'.') if k < 3 => {}
            _ => return None,
        }
    }
    if !tag {
        return None;
    }
    let commit_from = if b.get(p).is_some_and(u8::is_ascii_digit) {
        p
    } else {
        let t = b.get(p..).unwrap_or_default();
        let skip = if t.starts_with(b"dev") {
            v[4] = 1;
            Some(3)
        } else if t.starts_with(b"rc") {
            v[4] = 2;
            Some(2)
        } else if t.starts_with(b"pre") {
            v[4] = 2;
            Some(3)
        } else {
            None
        };
        match skip {
            Some(n) => {
                p += n;
                let (num, e) = strtol10(b, p);
                v[5] = num;
                match b.get(e) {
                    None => return Some(v),
                    Some(b'-') => e + 1,
                    _ => return None,
                }
            }
            None => p,
        }
    };
    let t = b.get(commit_from..).unwrap_or_default();
    let from = match t.iter().rposition(|&c| c == b'-') {
        Some(d) if d + 1 == t.len() => return None,
        Some(d) => commit_from + d + 1,
        None => commit_from,
    };
    let (n, e) = strtol10(b, from);
    v[6] = if e == b.len() { n } else { 0 };
    Some(v)
}

/// HAProxy's `compare_current_version`: -1 when `version` is older than ours, 0 equal, 1
/// newer, -3 when it does not parse.
fn compare_version(version: &str) -> i32 {
    let (Some(loc), Some(m)) = (split_version(HAPROXY_VERSION), split_version(version)) else {
        return -3;
    };
    for (a, b) in m.iter().zip(loc.iter()) {
        if a < b {
            return -1;
        }
        if a > b {
            return 1;
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(k: &str) -> Option<String> {
        (k == "SET").then(|| "x".to_string())
    }

    fn ok(e: &str) -> bool {
        match eval(e, &env) {
            Ok(v) => v,
            Err(m) => panic!("{e}: {m}"),
        }
    }

    fn bad(e: &str) -> (String, usize) {
        match eval_at(e, &env) {
            Ok(v) => panic!("{e}: {v}"),
            Err(x) => (x.msg, x.pos),
        }
    }

    #[test]
    fn constants_and_operators() {
        assert!(!ok(""));
        assert!(ok("1") && ok("-1") && ok("0x10") && !ok("0") && !ok("000"));
        assert!(ok("!0") && !ok("!!0") && ok("! 0"));
        assert!(ok("!(0) && !!1"));
        assert!(ok("0 || 1") && !ok("1 && 0") && ok("0 && 0 || 1"));
        assert!(ok("(0 || 1) && (1)") && !ok("!(0 || 1)"));
    }

    #[test]
    fn predicates() {
        assert!(ok("defined(SET)") && !ok("defined(UNSET)"));
        assert!(ok("streq(a,a)") && !ok("streq(a,b)") && ok("strneq(a,b)"));
        assert!(ok("streq('a b',\"a b\")") && ok("streq(a\\ b,'a b')"));
        // `\,` is a lone backslash then a separator: two arguments, "a\" and "b".
        assert!(!ok("streq(a\\,b)"));
        assert!(ok("feature(OPENSSL)") && ok("feature(LUA)") && !ok("feature(OPENSS)"));
        assert!(!ok("feature(QUIC)"));
        assert!(!ok("feature(NOPE)") && !ok("feature()"));
        // Without parentheses the argument is empty; what follows is trailing garbage.
        assert!(!ok("defined"));
    }

    #[test]
    fn versions() {
        assert!(ok("version_atleast(2.5-dev0)") && ok("version_atleast(2.6-dev0)"));
        assert!(ok("version_atleast(2.6)") && ok("version_atleast(2.6.12)"));
        assert!(!ok("version_atleast(2.6.13)") && !ok("version_atleast(2.7-dev0)"));
        assert!(ok("version_before(2.6.13)") && !ok("version_before(2.6.12)"));
        assert!(ok("version_before(3.0)") && !ok("version_before(2.4)"));
        // An unparsable version counts as older than ours (HAProxy's return code -3).
        assert!(ok("version_atleast(abc)") && !ok("version_before(abc)"));
        assert_eq!(split_version("1.5-dev18-43"), Some([1, 5, 0, 0, 1, 18, 43]));
        assert_eq!(split_version("1.3.16-rc1"), Some([1, 3, 16, 0, 2, 1, 0]));
        assert_eq!(
            split_version("2.4-dev18-f6818d-20"),
            Some([2, 4, 0, 0, 1, 18, 20])
        );
        assert_eq!(split_version("1.2.10.1"), Some([1, 2, 10, 1, 3, 0, 0]));
        assert_eq!(split_version("1,2"), None);
    }

    /// Messages and positions as HAProxy 2.6.12 prints them (`haproxy -cc` / `.if`).
    #[test]
    fn errors_in_haproxys_words() {
        let cases: &[(&str, &str, usize)] = &[
            ("1 &&", "unparsable conditional expression '&&'", 2),
            ("1 || ", "unparsable conditional expression '1 || '", 2),
            ("(1", "expected ')' after conditional expression '(1'", 0),
            ("( )", "unparsable conditional expression ')'", 2),
            ("foo", "unparsable conditional expression 'foo'", 0),
            (
                "0x",
                "unexpected character 'x' at the end of conditional expression '0x'",
                1,
            ),
            (
                "1 2",
                "unexpected character '2' at the end of conditional expression '1 2'",
                2,
            ),
            (
                "defined FOO",
                "unexpected character 'F' at the end of conditional expression 'defined FOO'",
                8,
            ),
            (
                "defined(HOME) && bad(1)",
                "unparsable conditional expression 'bad(1)'",
                17,
            ),
            (
                "streq(a)",
                "missing arguments (got 1/2), type 'string' expected in argument 1 of predicate 'streq' used in conditional expression",
                7,
            ),
            (
                "streq(a,b",
                "expected ')' in argument 1 of predicate 'streq' used in conditional expression",
                9,
            ),
            (
                "streq(a,b,c)",
                "expected ')' before ',c)' in argument 1 of predicate 'streq' used in conditional expression",
                9,
            ),
            (
                "defined(",
                "expected ')' in argument 1 of predicate 'defined' used in conditional expression",
                8,
            ),
        ];
        for (e, msg, pos) in cases {
            assert_eq!(bad(e), (msg.to_string(), *pos), "{e}");
        }
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_crash() {
        let e = format!("{}1{}", "(".repeat(5000), ")".repeat(5000));
        assert!(eval(&e, &env).is_err());
        assert!(ok(&format!("{}1{}", "(".repeat(50), ")".repeat(50))));
    }
}
