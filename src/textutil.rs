//! Text helpers for people: "did you mean", MiB formatting.

/// The closest candidate by edit distance, if it is close enough to be a typo.
pub fn did_you_mean<'a>(input: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (levenshtein(input, c), *c))
        .filter(|(d, c)| *d <= 3.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

fn levenshtein(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

pub const MIB: f64 = 1024.0 * 1024.0;

/// Bytes as MiB with one decimal, for people.
pub fn mib(bytes: f64) -> String {
    format!("{:.1}", bytes / MIB)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        let names = ["drop", "malloc-trim", "tcache-off"];
        assert_eq!(did_you_mean("malloc_trim", &names), Some("malloc-trim"));
        assert_eq!(did_you_mean("completely-different-thing", &names), None);
    }
}
