//! `http-request normalize-uri <normalizer>`: HAProxy 2.6's URI normalizers, pure functions on
//! the request-target's path (and query). Each returns the new target, or Err for a `strict`
//! normalizer meeting a malformed percent-encoding (the request is then refused with a 400).

use crate::config::model::UriNorm;

/// A `strict` normalizer met a malformed percent-encoding.
#[derive(Debug, PartialEq, Eq)]
pub struct Malformed;

/// Normalizes `target` (origin-form `path[?query]`; `*` and other forms are left alone).
pub fn normalize(target: &str, n: UriNorm) -> Result<String, Malformed> {
    if !target.starts_with('/') {
        return Ok(target.to_string());
    }
    let (path, query) = match target.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (target, None),
    };
    let join = |p: String| match query {
        Some(q) => format!("{p}?{q}"),
        None => p,
    };
    Ok(match n {
        UriNorm::PathMergeSlashes => join(merge_slashes(path)),
        UriNorm::PathStripDot => join(strip_dot(path)),
        UriNorm::PathStripDotdot { full } => join(strip_dotdot(path, full)),
        UriNorm::PercentDecodeUnreserved { strict } => decode_unreserved(target, strict)?,
        UriNorm::PercentToUppercase { strict } => percent_upper(target, strict)?,
        UriNorm::QuerySortByName => match query {
            Some(q) => format!("{path}?{}", sort_query(q)),
            None => target.to_string(),
        },
        // HTTP/1 requests with a fragment are refused before the rules (as HAProxy's parser).
        UriNorm::FragmentStrip | UriNorm::FragmentEncode => target.to_string(),
    })
}

/// Runs of `/` become one.
fn merge_slashes(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for c in path.chars() {
        if !(c == '/' && out.ends_with('/')) {
            out.push(c);
        }
    }
    out
}

/// `.` segments go (`/a/./b/.` → `/a/b/`).
fn strip_dot(path: &str) -> String {
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    let mut out = String::with_capacity(path.len());
    for (i, s) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        if *s == "." {
            if last {
                out.push('/');
            }
            continue;
        }
        out.push('/');
        out.push_str(s);
    }
    if out.is_empty() { "/".into() } else { out }
}

/// `..` segments remove the segment before them (`/a/b/../../c` → `/c`, `/a/b/..` → `/a/`);
/// a leading `..` stays (`/..` becomes `/../`, as HAProxy), unless `full` drops it.
fn strip_dotdot(path: &str, full: bool) -> String {
    let segs: Vec<&str> = path.split('/').skip(1).collect();
    let mut kept: Vec<&str> = Vec::with_capacity(segs.len());
    // Leading `..` kept (not `full`): they are never popped.
    let mut floor = 0;
    let mut trailing = false;
    for (i, s) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        if *s == ".." {
            if kept.len() > floor {
                kept.pop();
            } else if !full {
                kept.push("..");
                floor = kept.len();
            }
            trailing = last;
            continue;
        }
        kept.push(s);
    }
    let mut out = String::with_capacity(path.len());
    for s in &kept {
        out.push('/');
        out.push_str(s);
    }
    if trailing || out.is_empty() {
        out.push('/');
    }
    out
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

/// `%XX` of an unreserved character (`ALPHA DIGIT - . _ ~`) becomes the character; a malformed
/// escape is kept, or refused when `strict`.
fn decode_unreserved(s: &str, strict: bool) -> Result<String, Malformed> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] != b'%' {
            out.push(b[i]);
            i += 1;
            continue;
        }
        match (
            b.get(i + 1).and_then(|c| hex(*c)),
            b.get(i + 2).and_then(|c| hex(*c)),
        ) {
            (Some(h), Some(l)) => {
                let c = h << 4 | l;
                if c.is_ascii_alphanumeric() || matches!(c, b'-' | b'.' | b'_' | b'~') {
                    out.push(c);
                } else {
                    out.extend_from_slice(&b[i..i + 3]);
                }
                i += 3;
            }
            _ if strict => return Err(Malformed),
            _ => {
                out.push(b'%');
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| Malformed)
}

/// The hex digits of every `%XX` in upper case; a malformed escape is kept, or refused when
/// `strict`.
fn percent_upper(s: &str, strict: bool) -> Result<String, Malformed> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let esc = b[i] == b'%'
            && b.get(i + 1).is_some_and(u8::is_ascii_hexdigit)
            && b.get(i + 2).is_some_and(u8::is_ascii_hexdigit);
        if esc {
            out.push(b'%');
            out.push(b[i + 1].to_ascii_uppercase());
            out.push(b[i + 2].to_ascii_uppercase());
            i += 3;
        } else if b[i] == b'%' && strict {
            return Err(Malformed);
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| Malformed)
}

/// `&`-separated parameters in the order of their names (a stable sort: same names keep
/// their order).
fn sort_query(q: &str) -> String {
    let mut params: Vec<&str> = q.split('&').collect();
    params.sort_by_key(|p| p.split('=').next().unwrap_or(p));
    params.join("&")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// HAProxy 2.6's answers (`http-request return … lf-string "%[url]"` after the rule).
    #[test]
    fn normalizers_as_haproxy() {
        let n = |t: &str, k| normalize(t, k).unwrap_or_else(|_| "400".into());
        let merge = UriNorm::PathMergeSlashes;
        assert_eq!(n("/a//b///c/", merge), "/a/b/c/");
        assert_eq!(n("//x", merge), "/x");
        let dot = UriNorm::PathStripDot;
        assert_eq!(n("/a/./b/.", dot), "/a/b/");
        assert_eq!(n("/./", dot), "/");
        assert_eq!(n("/a/.", dot), "/a/");
        assert_eq!(n("/a/../b", dot), "/a/../b");
        let dd = UriNorm::PathStripDotdot { full: false };
        let ddf = UriNorm::PathStripDotdot { full: true };
        for (t, a, b) in [
            ("/a/../b", "/b", "/b"),
            ("/a/b/../../c", "/c", "/c"),
            ("/../a", "/../a", "/a"),
            ("/a/b/..", "/a/", "/a/"),
            ("/a/..", "/", "/"),
            ("/..", "/../", "/"),
            ("/a/.", "/a/.", "/a/."),
            ("/%2e%2e/a", "/%2e%2e/a", "/%2e%2e/a"),
        ] {
            assert_eq!((n(t, dd), n(t, ddf)), (a.to_string(), b.to_string()), "{t}");
        }
        let dec = UriNorm::PercentDecodeUnreserved { strict: false };
        let decs = UriNorm::PercentDecodeUnreserved { strict: true };
        assert_eq!(n("/%2e%2e/a", dec), "/../a");
        assert_eq!(n("/a/%41%2d%7e%2F%20", dec), "/a/A-~%2F%20");
        assert_eq!(n("/%zz%4", dec), "/%zz%4");
        assert_eq!(n("/%zz%4", decs), "400");
        assert_eq!(n("/a%2fb%41", decs), "/a%2fbA");
        let up = UriNorm::PercentToUppercase { strict: false };
        let ups = UriNorm::PercentToUppercase { strict: true };
        assert_eq!(n("/a/%41%2d%7e%2F%20", up), "/a/%41%2D%7E%2F%20");
        assert_eq!(n("/%zz%4", up), "/%zz%4");
        assert_eq!(n("/%zz%4", ups), "400");
        let q = UriNorm::QuerySortByName;
        assert_eq!(n("/?b=2&a=1&c&a=0", q), "/?a=1&a=0&b=2&c");
        assert_eq!(n("/a?c=3;b=2&a", q), "/a?a&c=3;b=2");
        assert_eq!(n("*", merge), "*");
    }
}
