//! Request-line and header rewrites (`set-path`, `replace-uri`, `replace-header`, …) as HAProxy
//! 2.6 applies them: pure edits of a `RequestHead`, given the rendered format strings.

use crate::config::model::LinePart;
use crate::http::head::{Header, RequestHead};
use regex::bytes::{Captures, Regex};

/// Byte range of the path (`with_query`: up to the end) inside an origin- or absolute-form target.
fn path_span(target: &str, with_query: bool) -> (usize, usize) {
    let start = match target.find("://") {
        Some(i) => target[i + 3..]
            .find('/')
            .map_or(target.len(), |j| i + 3 + j),
        None => 0,
    };
    let end = if with_query {
        target.len()
    } else {
        target[start..]
            .find('?')
            .map_or(target.len(), |q| start + q)
    };
    (start, end)
}

/// What a `replace-*` rule matches against.
fn part_of(req: &RequestHead, part: LinePart) -> &str {
    match part {
        LinePart::Method => &req.method,
        LinePart::Path | LinePart::PathQ => {
            let (a, b) = path_span(&req.target, part == LinePart::PathQ);
            &req.target[a..b]
        }
        LinePart::Query => req.query().unwrap_or(""),
        LinePart::Uri => &req.target,
    }
}

/// `set-method|set-path|set-pathq|set-query|set-uri`: the part becomes `value`.
pub fn set_part(req: &mut RequestHead, part: LinePart, value: &str) {
    match part {
        LinePart::Method => req.method = value.to_string(),
        LinePart::Uri => req.target = value.to_string(),
        LinePart::Path | LinePart::PathQ => {
            let (a, b) = path_span(&req.target, part == LinePart::PathQ);
            req.target.replace_range(a..b, value);
        }
        // A `?` that was there stays even when the new query is empty; none is added for an
        // empty one.
        LinePart::Query => match req.target.find('?') {
            Some(q) => req.target.replace_range(q + 1.., value),
            None if !value.is_empty() => {
                req.target.push('?');
                req.target.push_str(value);
            }
            None => {}
        },
    }
}

/// `replace-path|replace-pathq|replace-uri`: when `re` matches the part, the whole part is
/// replaced by `replace` with its `\N` references filled (HAProxy's `exp_replace`).
pub fn replace_part(req: &mut RequestHead, part: LinePart, re: &Regex, replace: &str) {
    let subject = part_of(req, part).as_bytes();
    let Some(caps) = re.captures(subject) else {
        return;
    };
    let out = exp_replace(&caps, replace);
    // Non-UTF-8 results cannot be a target; HAProxy would send them, we keep the request as is.
    let Ok(out) = String::from_utf8(out) else {
        return;
    };
    set_part(req, part, &out);
}

/// `replace-header` (whole values) and `replace-value` (each comma-separated value). A replaced
/// value loses the spaces around it, as in HAProxy; values that do not match are left alone.
pub fn replace_header(headers: &mut [Header], name: &str, re: &Regex, replace: &str, values: bool) {
    for h in headers
        .iter_mut()
        .filter(|h| h.name.eq_ignore_ascii_case(name))
    {
        if !values {
            if let Some(caps) = re.captures(&h.value) {
                h.value = exp_replace(&caps, replace).into();
            }
            continue;
        }
        let mut out = Vec::with_capacity(h.value.len());
        let mut changed = false;
        for (n, raw) in h.value.split(|&b| b == b',').enumerate() {
            if n > 0 {
                out.push(b',');
            }
            let v = raw.trim_ascii();
            match re.captures(v) {
                Some(caps) => {
                    out.extend_from_slice(&exp_replace(&caps, replace));
                    changed = true;
                }
                None => out.extend_from_slice(raw),
            }
        }
        if changed {
            h.value = out.into();
        }
    }
}

/// HAProxy's `exp_replace`: `\0`–`\9` insert a capture (nothing if it did not take part), `\xHH`
/// a byte, `\c` the character `c`; a trailing `\` or a short `\x` ends the output there.
pub fn exp_replace(caps: &Captures<'_>, replace: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(replace.len());
    let mut it = replace.bytes();
    while let Some(b) = it.next() {
        if b != b'\\' {
            out.push(b);
            continue;
        }
        match it.next() {
            None => break,
            Some(d @ b'0'..=b'9') => {
                if let Some(m) = caps.get(usize::from(d - b'0')) {
                    out.extend_from_slice(m.as_bytes());
                }
            }
            Some(b'x') => {
                let (Some(h1), Some(h2)) = (it.next(), it.next()) else {
                    break;
                };
                out.push((hex_nibble(h1) << 4).wrapping_add(hex_nibble(h2)));
            }
            Some(c) => out.push(c),
        }
    }
    out
}

/// HAProxy's lenient hex digit (no validation: `toupper(c) - '0'`, letters shifted down).
fn hex_nibble(c: u8) -> u8 {
    let v = c.to_ascii_uppercase().wrapping_sub(b'0');
    if v > 9 {
        v.wrapping_sub(b'A' - b'9' - 1)
    } else {
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::head::{Headers, Version};

    fn req(target: &str) -> RequestHead {
        RequestHead {
            method: "GET".into(),
            target: target.into(),
            version: Version::Http11,
            headers: Headers(vec![
                Header::new("X-A", "abc"),
                Header::new("x-a", "zbq"),
                Header::new("X-V", "a, b c ,d,  bb"),
                Header::new("X-W", "a, c ,  d"),
            ]),
        }
    }

    fn re(s: &str) -> Regex {
        Regex::new(s).expect("regex")
    }

    // Expected values captured from HAProxy 2.6.12 with the same rules.
    #[test]
    fn set_parts_as_haproxy() {
        let mut r = req("/setpath/z?k=v");
        set_part(&mut r, LinePart::Path, "/sp/setpath/z");
        assert_eq!(r.target, "/sp/setpath/z?k=v");
        let mut r = req("/setq/a");
        set_part(&mut r, LinePart::Query, "q=1&");
        assert_eq!(r.target, "/setq/a?q=1&");
        let mut r = req("/setq/a");
        set_part(&mut r, LinePart::Query, "");
        assert_eq!(r.target, "/setq/a");
        let mut r = req("/a?x");
        set_part(&mut r, LinePart::Query, "");
        assert_eq!(r.target, "/a?");
        let mut r = req("/setpq/a?b");
        set_part(&mut r, LinePart::PathQ, "/pq");
        assert_eq!(r.target, "/pq");
        let mut r = req("http://h.example/p/q?z");
        set_part(&mut r, LinePart::Path, "/n");
        assert_eq!(r.target, "http://h.example/n?z");
        let mut r = req("/m");
        set_part(&mut r, LinePart::Method, "PUT");
        assert_eq!(r.method, "PUT");
    }

    #[test]
    fn replace_parts_replace_the_whole_part() {
        let mut r = req("/x/foo/bar");
        replace_part(&mut r, LinePart::Path, &re("/foo/(.*)"), "/\\1");
        assert_eq!(r.target, "/bar");
        let mut r = req("/foo/bar?a=b");
        replace_part(&mut r, LinePart::Path, &re("/foo/(.*)"), "/\\1");
        assert_eq!(r.target, "/bar?a=b");
        let mut r = req("/ru/a?b");
        replace_part(&mut r, LinePart::Uri, &re("^/ru(.*)"), "/RU\\1");
        assert_eq!(r.target, "/RU/a?b");
        let mut r = req("/rpq/a?b");
        replace_part(&mut r, LinePart::PathQ, &re("^/rpq(.*)"), "/RPQ\\1");
        assert_eq!(r.target, "/RPQ/a?b");
        let mut r = req("/nomatch");
        replace_part(&mut r, LinePart::Path, &re("^/zz"), "/x");
        assert_eq!(r.target, "/nomatch");
    }

    #[test]
    fn replace_header_and_value_as_haproxy() {
        let mut r = req("/");
        replace_header(&mut r.headers.0, "x-a", &re("(b)(.*)"), "<\\1|\\2>", false);
        assert_eq!(r.headers.0[0].value, b"<b|c>");
        assert_eq!(r.headers.0[1].value, b"<b|q>");
        replace_header(
            &mut r.headers.0,
            "X-V",
            &re("^b(.*)"),
            "[\\1\\x41\\z]",
            true,
        );
        assert_eq!(r.headers.0[2].value, b"a,[ cAz],d,[bAz]");
        replace_header(&mut r.headers.0, "X-W", &re("^b(.*)"), "[\\1]", true);
        assert_eq!(r.headers.0[3].value, b"a, c ,  d");
    }

    #[test]
    fn exp_replace_edge_cases() {
        let r = re("(a)(x)?");
        let caps = r.captures(b"a").expect("match");
        assert_eq!(exp_replace(&caps, "\\1\\2\\9-"), b"a-");
        assert_eq!(exp_replace(&caps, "z\\"), b"z");
        assert_eq!(exp_replace(&caps, "\\x4"), b"");
        assert_eq!(exp_replace(&caps, "\\x6a\\\\"), b"j\\");
    }
}
