//! The smooth weighted round-robin sequence (nginx's "smooth weighted" rule).
//!
//! Each step adds every member's weight to its credit and picks the member with the most credit
//! (ties: the earliest member), which then pays the total weight back. After `total` steps every
//! credit is zero again, so the sequence is periodic and one period is the table. Every prefix
//! gives each member its share within ±1, hence any window of the repeating table (what a shared
//! cursor hands out) within ±2, and equal weights come out as a plain rotation.

/// Upper bound on `table length × members`, the cost of one build. Past it the weights are scaled
/// down (never below 1), which only happens with hundreds of servers at large, coprime weights.
const BUILD_BUDGET: u64 = 1 << 25;

/// One period of the smooth sequence for `members` = `(server index, weight)`, weights already
/// clamped to 1..=256. Weights are reduced by their GCD first, so equal weights give a table of
/// one entry per member.
pub(super) fn smooth(members: &[(usize, u32)]) -> Vec<usize> {
    let weights = reduced_weights(members);
    let total: i64 = weights.iter().map(|&w| i64::from(w)).sum();
    let Ok(len) = usize::try_from(total) else {
        return Vec::new();
    };
    let mut credit = vec![0i64; weights.len()];
    let mut table = Vec::with_capacity(len);
    for _ in 0..len {
        for (c, &w) in credit.iter_mut().zip(&weights) {
            *c += i64::from(w);
        }
        let Some(best) = argmax(&credit) else { break };
        if let (Some(c), Some(&(idx, _))) = (credit.get_mut(best), members.get(best)) {
            *c -= total;
            table.push(idx);
        }
    }
    table
}

/// First index of the largest credit.
fn argmax(credit: &[i64]) -> Option<usize> {
    let mut best: Option<(usize, i64)> = None;
    for (i, &c) in credit.iter().enumerate() {
        if best.is_none_or(|(_, b)| c > b) {
            best = Some((i, c));
        }
    }
    best.map(|(i, _)| i)
}

/// Weights divided by their GCD, then scaled down if the build would exceed `BUILD_BUDGET`.
fn reduced_weights(members: &[(usize, u32)]) -> Vec<u32> {
    let g = members.iter().fold(0, |g, &(_, w)| gcd(g, w));
    if g == 0 {
        return vec![0; members.len()];
    }
    let mut weights: Vec<u32> = members.iter().map(|&(_, w)| w / g).collect();
    let n = weights.len() as u64;
    let total: u64 = weights.iter().map(|&w| u64::from(w)).sum();
    if total.saturating_mul(n) > BUILD_BUDGET {
        let max_total = (BUILD_BUDGET / n.max(1)).max(n);
        for w in &mut weights {
            *w = u32::try_from(u64::from(*w) * max_total / total)
                .unwrap_or(1)
                .max(1);
        }
    }
    weights
}

fn gcd(mut a: u32, mut b: u32) -> u32 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seq(weights: &[u32]) -> String {
        let members: Vec<(usize, u32)> = weights.iter().copied().enumerate().collect();
        smooth(&members)
            .into_iter()
            .map(|i| char::from(b'a' + i as u8))
            .collect()
    }

    /// Longest run of one server, the table being repeated.
    fn max_cyclic_run(s: &str) -> usize {
        let twice: Vec<char> = s.chars().chain(s.chars()).collect();
        let mut best = 0;
        let mut run = 0;
        for (i, c) in twice.iter().enumerate() {
            run = if i > 0 && twice[i - 1] == *c {
                run + 1
            } else {
                1
            };
            best = best.max(run);
        }
        best.min(s.len())
    }

    #[test]
    fn smooth_sequences() {
        assert_eq!(seq(&[5, 1, 1]), "aabacaa");
        assert_eq!(seq(&[1, 1, 1]), "abc");
        assert_eq!(seq(&[3, 1]), "aaba");
        assert_eq!(seq(&[4, 2, 1]), "abacaba");
        assert_eq!(seq(&[7, 3, 2, 1]), "abacadabacaba");
        assert_eq!(seq(&[2, 1]), "aba");
        assert_eq!(seq(&[3, 2, 1]), "abacba");
    }

    #[test]
    fn gcd_reduces_the_table() {
        assert_eq!(seq(&[256, 256, 256]), "abc");
        assert_eq!(seq(&[10, 5]), "aba");
        assert_eq!(seq(&[200, 100, 100]), "abca");
    }

    #[test]
    fn never_five_in_a_row() {
        assert_eq!(max_cyclic_run(&seq(&[5, 1, 1])), 4);
        assert_eq!(max_cyclic_run(&seq(&[4, 2, 1])), 2);
        assert_eq!(max_cyclic_run(&seq(&[1, 1, 1, 1])), 1);
    }

    #[test]
    fn table_holds_each_weight_and_prefixes_stay_within_one() {
        // Deterministic pseudo-random weight sets (xorshift), no external crate.
        let mut x: u32 = 0x9e37_79b9;
        let mut next = || {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        };
        for _ in 0..300 {
            let n = (next() % 6 + 1) as usize;
            let weights: Vec<u32> = (0..n).map(|_| next() % 256 + 1).collect();
            let members: Vec<(usize, u32)> = weights.iter().copied().enumerate().collect();
            let table = smooth(&members);
            let g = weights.iter().fold(0, |g, &w| gcd(g, w));
            let total: u32 = weights.iter().map(|w| w / g).sum();
            assert_eq!(table.len(), total as usize, "{weights:?}");
            let mut count = vec![0u64; n];
            for (step, &i) in table.iter().enumerate() {
                count[i] += 1;
                for s in 0..n {
                    let ideal = (step as u64 + 1) * u64::from(weights[s] / g);
                    let have = count[s] * u64::from(total);
                    assert!(
                        have.abs_diff(ideal) < u64::from(total),
                        "{weights:?} step {step}"
                    );
                }
            }
            for s in 0..n {
                assert_eq!(count[s], u64::from(weights[s] / g), "{weights:?}");
            }
        }
    }

    #[test]
    fn large_server_counts_stay_within_budget() {
        // 600 servers at coprime-ish weights: scaled, but every server keeps at least one slot.
        let members: Vec<(usize, u32)> = (0..600).map(|i| (i, 200 + (i as u32 % 57))).collect();
        let table = smooth(&members);
        assert!(table.len() as u64 * 600 <= BUILD_BUDGET + 600 * 600);
        let mut seen = vec![false; 600];
        for &i in &table {
            seen[i] = true;
        }
        assert!(seen.iter().all(|&s| s));
    }

    #[test]
    fn empty_and_zero_weights() {
        assert!(smooth(&[]).is_empty());
        assert!(smooth(&[(0, 0), (1, 0)]).is_empty());
    }
}
