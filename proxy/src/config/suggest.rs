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

/// The non-zero cells of a word's `SLOTS × SLOTS` pair-count matrix, by cell index: a word
/// has at most one cell per character plus its class marks, so the comparison with each
/// candidate costs the words' lengths, not the matrix' 841 cells.
fn fingerprint(word: &str) -> Vec<(usize, u8)> {
    let mut cells: Vec<(usize, u8)> = Vec::with_capacity(2 * word.len() + 1);
    let mut from = START;
    for c in word.chars() {
        let to = class(c);
        // HAProxy also marks which classes occur at all (its row 0): a mark, not a count.
        cells.push((to, 0));
        cells.push((from * SLOTS + to, 1));
        from = to;
    }
    cells.push((from * SLOTS + START, 1));
    cells.sort_unstable_by_key(|&(i, _)| i);
    let mut out: Vec<(usize, u8)> = Vec::with_capacity(cells.len());
    for (i, n) in cells {
        match out.last_mut() {
            Some((j, m)) if *j == i => *m = m.saturating_add(n),
            _ => out.push((i, n)),
        }
    }
    // Row 0's marks read 1 however often the class occurs.
    for (i, m) in &mut out {
        if *i < SLOTS {
            *m = 1;
        }
    }
    out
}

/// The sum of the cells' differences (cells absent from one side count as 0 there).
fn distance(a: &[(usize, u8)], b: &[(usize, u8)]) -> usize {
    let (mut i, mut j, mut d) = (0, 0, 0usize);
    while i < a.len() || j < b.len() {
        match (a.get(i), b.get(j)) {
            (Some(&(x, n)), Some(&(y, m))) if x == y => {
                d += usize::from(n.abs_diff(m));
                i += 1;
                j += 1;
            }
            (Some(&(x, n)), Some(&(y, _))) if x < y => {
                d += usize::from(n);
                i += 1;
            }
            (Some(&(_, n)), None) => {
                d += usize::from(n);
                i += 1;
            }
            (_, Some(&(_, m))) => {
                d += usize::from(m);
                j += 1;
            }
            (None, None) => break,
        }
    }
    d
}

/// The closest candidate, if it is close enough to be a plausible typo.
pub fn best_match<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let fp = fingerprint(word);
    let len = word.chars().count();
    let mut best: Option<(&str, usize)> = None;
    for c in candidates {
        // A word of n characters has n + 1 pair counts: the distance is at least the length
        // difference, so a candidate that cannot beat the best so far is not fingerprinted.
        if best.is_some_and(|(_, bd)| len.abs_diff(c.chars().count()) >= bd) {
            continue;
        }
        let d = distance(&fp, &fingerprint(c));
        if best.is_none_or(|(_, bd)| d < bd) {
            best = Some((c, d));
        }
    }
    let (c, d) = best?;
    // HAProxy's bound: at most twice the length of either word.
    (d <= 2 * word.len() && d <= 2 * c.len()).then_some(c)
}

/// HAProxy's `action_suggest`: the first closest of `candidates` (a word, and whether it is a
/// prefix keyword such as `set-var(*)`), if within twice the length of both words (three times
/// for a prefix keyword).
pub fn best_action<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = (&'a str, bool)>,
) -> Option<&'a str> {
    if word.is_empty() {
        return None;
    }
    let fp = fingerprint(word);
    let mut best: Option<(&str, bool, usize)> = None;
    for (c, prefix) in candidates {
        let d = distance(&fp, &fingerprint(c));
        if best.is_none_or(|(_, _, bd)| d < bd) {
            best = Some((c, prefix, d));
        }
    }
    let (c, prefix, d) = best?;
    let k = if prefix { 3 } else { 2 };
    (d <= k * word.len() && d <= k * c.len()).then_some(c)
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

    /// The dense matrix of HAProxy's `cfg_find_best_match`, as the reference.
    fn dense(word: &str) -> Vec<u8> {
        let mut fp = vec![0u8; SLOTS * SLOTS];
        let mut from = START;
        for c in word.chars() {
            let to = class(c);
            fp[to] = 1;
            fp[from * SLOTS + to] = fp[from * SLOTS + to].saturating_add(1);
            from = to;
        }
        fp[from * SLOTS + START] = fp[from * SLOTS + START].saturating_add(1);
        fp
    }

    #[test]
    fn sparse_distance_is_the_dense_one() {
        let words = [
            "",
            "a",
            "bind",
            "bindd",
            "default_backend",
            "default-backend",
            "tune.ssl.x",
            "aaaaaaaa",
            "http-request",
            "9x9",
            "ÿé",
            "timeout",
            "frobnicate",
            "zz-top",
        ];
        for a in words {
            for b in words {
                let d: usize = dense(a)
                    .iter()
                    .zip(dense(b))
                    .map(|(x, y)| usize::from(x.abs_diff(y)))
                    .sum();
                assert_eq!(distance(&fingerprint(a), &fingerprint(b)), d, "{a:?} {b:?}");
                // The bound `best_match` prunes with.
                let (la, lb) = (a.chars().count(), b.chars().count());
                assert!(d >= la.abs_diff(lb), "{a:?} {b:?}");
            }
        }
    }
}
