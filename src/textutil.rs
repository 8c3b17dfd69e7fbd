//! Text helpers for people: "did you mean", MiB formatting, the last lines
//! of a program's stderr.

/// The closest candidate by edit distance (strsim's Levenshtein), if it is
/// close enough to be a typo.
pub fn did_you_mean<'a>(input: &str, candidates: &[&'a str]) -> Option<&'a str> {
    candidates
        .iter()
        .map(|c| (strsim::levenshtein(input, c), *c))
        .filter(|(d, c)| *d <= 3.max(c.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Bytes in a MiB: the one constant people's units are reckoned in
/// (machine formats keep bytes).
pub const MIB: f64 = 1024.0 * 1024.0;

/// Bytes as MiB with one decimal, for people, without the unit: `416.0`.
pub fn mib(bytes: f64) -> String {
    format!("{:.1}", bytes / MIB)
}

/// Bytes as MiB with one decimal and the unit: `416.0 MiB`.
pub fn format_mib(bytes: u64) -> String {
    format!("{} MiB", mib(bytes as f64))
}

/// Whole MiB, for columns that count in MiB (drive's console): `416`.
pub fn whole_mib(bytes: u64) -> String {
    format!("{:.0}", bytes as f64 / MIB)
}

/// Whole MiB with its sign: `+12`, `-3`.
pub fn signed_whole_mib(bytes: i64) -> String {
    format!("{:+.0}", bytes as f64 / MIB)
}

/// Lines of a failing program's stderr shown to people (on the terminal and
/// in the verdict; runs.json keeps its whole tail).
pub const STDERR_LINES: usize = 20;

/// The last [`STDERR_LINES`] lines of `text`.
pub fn last_stderr_lines(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(STDERR_LINES)..].to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mib_has_one_decimal() {
        assert_eq!(mib(416.0 * MIB), "416.0");
        assert_eq!(mib(1.25 * MIB), "1.2");
        assert_eq!(format_mib(3 << 19), "1.5 MiB");
    }

    #[test]
    fn suggests_close_names_only() {
        let names = ["drop", "malloc-trim", "tcache-off"];
        assert_eq!(did_you_mean("malloc_trim", &names), Some("malloc-trim"));
        assert_eq!(did_you_mean("completely-different-thing", &names), None);
    }
}
