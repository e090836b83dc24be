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

/// A word's `SLOTS × SLOTS` pair-count matrix (HAProxy's row 0 marks which classes occur), with
/// the cells written so far listed: a candidate is compared with the word, and its matrix cleared
/// for the next one, in the time of its length, not of the 841 cells, and without sorting.
struct Signature {
    cells: [u8; SLOTS * SLOTS],
    /// Cells that went from 0 to non-zero (counts saturate, so each is listed once).
    touched: Vec<usize>,
}

impl Signature {
    fn new() -> Self {
        Signature {
            cells: [0; SLOTS * SLOTS],
            touched: Vec::new(),
        }
    }

    fn of(word: &str) -> Self {
        let mut s = Signature::new();
        s.add(word);
        s
    }

    fn add(&mut self, word: &str) {
        let mut from = START;
        for c in word.chars() {
            let to = class(c);
            // A mark, not a count, however often the class occurs.
            self.set(to, |_| 1);
            self.set(from * SLOTS + to, |v| v.saturating_add(1));
            from = to;
        }
        self.set(from * SLOTS + START, |v| v.saturating_add(1));
    }

    fn set(&mut self, i: usize, f: impl Fn(u8) -> u8) {
        if let Some(slot) = self.cells.get_mut(i) {
            if *slot == 0 {
                self.touched.push(i);
            }
            *slot = f(*slot);
        }
    }

    fn total(&self) -> usize {
        self.touched
            .iter()
            .filter_map(|&i| self.cells.get(i))
            .map(|&v| usize::from(v))
            .sum()
    }

    /// The sum of the cells' differences between `word` (whose [`Self::total`] is `word_total`)
    /// and this signature, which is left empty.
    fn take_distance(&mut self, word: &Signature, word_total: usize) -> usize {
        // Σ|a−b| = Σa + Σ over b's non-zero cells of (|a−b| − a).
        let mut d = word_total;
        for &i in &self.touched {
            if let (Some(slot), Some(&a)) = (self.cells.get_mut(i), word.cells.get(i)) {
                d = d + usize::from(a.abs_diff(*slot)) - usize::from(a);
                *slot = 0;
            }
        }
        self.touched.clear();
        d
    }
}

/// The closest candidate, if it is close enough to be a plausible typo.
pub fn best_match<'a>(
    word: &str,
    candidates: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let fp = Signature::of(word);
    let total = fp.total();
    let mut scratch = Signature::new();
    let len = word.chars().count();
    let mut best: Option<(&str, usize)> = None;
    for c in candidates {
        // A word of n characters has n + 1 pair counts: the distance is at least the length
        // difference, so a candidate that cannot beat the best so far is not fingerprinted.
        if best.is_some_and(|(_, bd)| len.abs_diff(c.chars().count()) >= bd) {
            continue;
        }
        scratch.add(c);
        let d = scratch.take_distance(&fp, total);
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
    let fp = Signature::of(word);
    let total = fp.total();
    let mut scratch = Signature::new();
    let mut best: Option<(&str, bool, usize)> = None;
    for (c, prefix) in candidates {
        scratch.add(c);
        let d = scratch.take_distance(&fp, total);
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
                let fa = Signature::of(a);
                let mut fb = Signature::of(b);
                assert_eq!(fb.take_distance(&fa, fa.total()), d, "{a:?} {b:?}");
                assert!(fb.cells.iter().all(|&c| c == 0) && fb.touched.is_empty());
                // The bound `best_match` prunes with.
                let (la, lb) = (a.chars().count(), b.chars().count());
                assert!(d >= la.abs_diff(lb), "{a:?} {b:?}");
            }
        }
    }
}
