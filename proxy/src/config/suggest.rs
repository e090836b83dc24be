//! "did you mean" for unknown keywords: compares words by the counts of their adjacent character
//! pairs (letters, "digit", "other", word start/end), the same idea as HAProxy's
//! `cfg_find_best_match`, and only suggests a close enough candidate.

const START: usize = 28;
const SLOTS: usize = 29;

fn class(c: char) -> usize {
    match c.to_ascii_lowercase() {
        c @ 'a'..='z' => (c as usize) - ('a' as usize) + 1,
        '0'..='9' => 27,
        _ => START,
    }
}

fn fingerprint(word: &str) -> Vec<u8> {
    let mut fp = vec![0u8; SLOTS * SLOTS];
    let mut from = START;
    for c in word.chars() {
        let to = class(c);
        // HAProxy also marks which classes occur at all (its row 0).
        if let Some(v) = fp.get_mut(to) {
            *v = 1;
        }
        if let Some(v) = fp.get_mut(from * SLOTS + to) {
            *v = v.saturating_add(1);
        }
        from = to;
    }
    if let Some(v) = fp.get_mut(from * SLOTS + START) {
        *v = v.saturating_add(1);
    }
    fp
}

fn distance(a: &[u8], b: &[u8]) -> usize {
    a.iter()
        .zip(b)
        .map(|(x, y)| usize::from(x.abs_diff(*y)))
        .sum()
}

/// The closest candidate, if it is close enough to be a plausible typo.
pub fn best_match<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let fp = fingerprint(word);
    let mut best: Option<(&str, usize)> = None;
    for c in candidates {
        let d = distance(&fp, &fingerprint(c));
        if best.is_none_or(|(_, bd)| d < bd) {
            best = Some((c, d));
        }
    }
    let (c, d) = best?;
    // HAProxy's bound: at most twice the length of either word.
    (d <= 2 * word.len() && d <= 2 * c.len()).then_some(c)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_words_only() {
        let kws = [
            "bind",
            "balance",
            "backlog",
            "server",
            "default_backend",
            "timeout",
        ];
        assert_eq!(best_match("bindd", kws), Some("bind"));
        assert_eq!(best_match("sever", kws), Some("server"));
        assert_eq!(best_match("timout", kws), Some("timeout"));
        assert_eq!(best_match("default-backend", kws), Some("default_backend"));
        assert_eq!(best_match("frobnicate", kws), None);
        assert_eq!(best_match("x", kws), None);
        assert_eq!(best_match("frob", ["fall", "rise"]), None);
    }
}
