//! The comparison table people read: the same cells rendered as GitHub
//! Markdown (`compare.md`, for a PR comment or `$GITHUB_STEP_SUMMARY`) and as
//! aligned plain text (the console).
//!
//! Formats a [`Comparison`]; computes nothing. Numbers for machines (bytes,
//! seconds) go to compare.csv and compare.json instead.

use std::fmt::Write;

use crate::fsutil::utc_stamp;
use crate::metrics::comparison::{Comparison, Row};
use crate::metrics::Spread;
use crate::textutil::MIB;

const HEADERS: [&str; 12] = [
    "strategy",
    "runs",
    "peak MiB",
    "retained MiB",
    "growth MiB/cycle",
    "released",
    "release latency ms",
    "load ms",
    "forward ms",
    "forward vs ref",
    "retained in cycles",
    "in processes",
];

/// Appended when any run has VRAM samples (CUDA): the worker's own device memory.
const VRAM_HEADERS: [&str; 2] = ["peak VRAM MiB", "VRAM after release MiB"];

/// Columns right-aligned in Markdown (all but the strategy).
const RIGHT_ALIGNED_FROM: usize = 1;

/// A number with about three significant digits: 1234, 12.3, 1.23.
fn sig(v: f64) -> String {
    let a = v.abs();
    let text = if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    // "-0" and "-0.00" read as noise.
    if text
        .trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        text.trim_start_matches('-').to_string()
    } else {
        text
    }
}

/// A percentage with one decimal: 99.6 and 99.5 must stay apart.
fn percent(v: f64) -> String {
    let text = format!("{v:.1}");
    if text == "-0.0" {
        "0.0".to_string()
    } else {
        text
    }
}

/// `median (min–max)`, or just the median when the range is one value.
fn spread_cell(s: Option<&Spread>, scale: f64, unit: &str) -> String {
    let Some(s) = s else { return "–".to_string() };
    let format = if unit == " %" { percent } else { sig };
    let median = format(s.median * scale);
    let (lo, hi) = (format(s.min * scale), format(s.max * scale));
    if s.n > 1 && lo != hi {
        format!("{median}{unit} ({lo}–{hi}{unit})")
    } else {
        format!("{median}{unit}")
    }
}

fn relative_cell(row: &Row, reference: Option<&str>) -> String {
    if reference == Some(row.strategy.as_str()) {
        return "reference".to_string();
    }
    match row.forward_time_relative {
        Some(r) => {
            let pct = (r - 1.0) * 100.0;
            let text = format!("{pct:+.0} %");
            if text == "-0 %" || text == "+0 %" {
                "±0 %".to_string()
            } else {
                text
            }
        }
        None => "–".to_string(),
    }
}

/// `2026-11-22 04:27` from Unix seconds.
fn readable_utc(unix_s: u64) -> String {
    let stamp = utc_stamp(unix_s);
    let c: Vec<char> = stamp.chars().collect();
    if c.len() != 15 {
        return stamp;
    }
    let part = |from: usize, to: usize| c[from..to].iter().collect::<String>();
    format!(
        "{}-{}-{} {}:{}",
        part(0, 4),
        part(4, 6),
        part(6, 8),
        part(9, 11),
        part(11, 13)
    )
}

/// The cells of the table, one row per strategy and source, header first.
pub fn cells(c: &Comparison) -> Vec<Vec<String>> {
    // On CUDA the story is in VRAM: its columns appear when any run sampled it.
    let has_vram = c.rows.iter().any(|r| {
        r.summary.peak_vram_bytes.is_some() || r.summary.vram_after_release_bytes.is_some()
    });
    let mut header: Vec<String> = HEADERS.iter().map(|h| h.to_string()).collect();
    if has_vram {
        header.extend(VRAM_HEADERS.iter().map(|h| h.to_string()));
    }
    let mut rows = vec![header];
    for row in &c.rows {
        let s = &row.summary;
        let reference = c
            .sources
            .get(row.source)
            .and_then(|src| src.reference_strategy.as_deref());
        let mut name = row.label.clone();
        if s.incomplete || !row.notes.is_empty() {
            name.push_str(" ⚠");
        }
        rows.push(vec![
            name,
            format!("{}/{}", s.runs_completed, s.runs),
            spread_cell(s.peak_bytes.as_ref(), 1.0 / MIB, ""),
            spread_cell(s.retained_bytes.as_ref(), 1.0 / MIB, ""),
            spread_cell(s.retained_slope_bytes_per_cycle.as_ref(), 1.0 / MIB, ""),
            spread_cell(s.released_fraction.as_ref(), 100.0, " %"),
            spread_cell(s.release_latency_s.as_ref(), 1e3, ""),
            spread_cell(s.load_time_s.as_ref(), 1e3, ""),
            spread_cell(s.forward_time_s.as_ref(), 1e3, ""),
            relative_cell(row, reference),
            format!("{}/{}", s.cycles_retaining, s.cycles_total),
            format!("{}/{}", s.processes_retaining, s.runs),
        ]);
        if has_vram {
            if let Some(cells) = rows.last_mut() {
                cells.push(spread_cell(s.peak_vram_bytes.as_ref(), 1.0 / MIB, ""));
                cells.push(spread_cell(
                    s.vram_after_release_bytes.as_ref(),
                    1.0 / MIB,
                    "",
                ));
            }
        }
    }
    rows
}

/// What the numbers mean, in one paragraph (shared by Markdown and console).
fn legend_text(c: &Comparison) -> String {
    let reference = reference_names(c);
    format!(
        "Median (min–max). Peak, retained and growth: over the repetitions (processes); \
         released, latency, load and forward: over every cycle of every repetition. \
         Retained = RSS after the release and settle − RSS before the first load; a cycle \
         retains when that is above {:.0} MiB. Growth = slope of retained over cycles \
         (a leak grows, a one-time cost stays flat). Forward vs ref = median forward time \
         relative to {reference} (freezing glibc's mmap threshold slows inference). \
         ⚠ = incomplete, see the notes.",
        c.retention_threshold_bytes as f64 / MIB
    )
}

fn reference_names(c: &Comparison) -> String {
    let mut names: Vec<&str> = Vec::new();
    for s in &c.sources {
        if let Some(r) = s.reference_strategy.as_deref() {
            if !names.contains(&r) {
                names.push(r);
            }
        }
    }
    if names.is_empty() {
        "the first strategy".to_string()
    } else {
        names
            .iter()
            .map(|n| format!("`{n}`"))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn md_escape(text: &str) -> String {
    text.replace('|', "\\|")
}

/// `compare.md`: GitHub-flavoured Markdown.
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "### memrel compare: {} on {}\n", c.scenario, c.device);
    for s in &c.sources {
        let _ = writeln!(
            out,
            "- {}`{}`: {} repetition(s) × {} cycle(s) per strategy; models {}; {} ({}, {}, {} CPUs); {} UTC; memrel {}",
            if c.sources.len() > 1 { format!("**{}** ", s.label) } else { String::new() },
            md_escape(&s.dir),
            s.repetitions,
            s.cycles,
            md_escape(&s.models.join(", ")),
            md_escape(&s.host.hostname),
            md_escape(&s.host.os),
            md_escape(&s.host.libc),
            s.host.cpus,
            readable_utc(s.created_unix_s),
            md_escape(&s.memrel_version),
        );
    }
    out.push('\n');
    for w in &c.warnings {
        let _ = writeln!(out, "> **warning:** {}\n", md_escape(w));
    }
    let rows = cells(c);
    for (i, row) in rows.iter().enumerate() {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(col, cell)| {
                if i > 0 && col == 0 {
                    format!("`{}`", md_escape(cell))
                } else {
                    md_escape(cell)
                }
            })
            .collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
        if i == 0 {
            let rule: Vec<&str> = (0..row.len())
                .map(|col| {
                    if col >= RIGHT_ALIGNED_FROM {
                        "--:"
                    } else {
                        ":--"
                    }
                })
                .collect();
            let _ = writeln!(out, "|{}|", rule.join("|"));
        }
    }
    let _ = writeln!(out, "\n{}", legend_text(c));
    let notes = notes(c);
    if !notes.is_empty() {
        let _ = writeln!(out, "\n**Notes**\n");
        for n in notes {
            let _ = writeln!(out, "- {}", md_escape(&n));
        }
    }
    out
}

/// The console's version of the same table.
pub fn plain(c: &Comparison) -> String {
    let rows = cells(c);
    let columns = rows.first().map(|r| r.len()).unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|i| rows.iter().map(|r| r[i].chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    let _ = writeln!(out, "memrel compare: {} on {}", c.scenario, c.device);
    for w in &c.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    for (n, row) in rows.iter().enumerate() {
        let line: Vec<String> = row
            .iter()
            .enumerate()
            .map(|(i, cell)| {
                let pad = widths[i].saturating_sub(cell.chars().count());
                if i == 0 {
                    format!("{cell}{}", " ".repeat(pad))
                } else {
                    format!("{}{cell}", " ".repeat(pad))
                }
            })
            .collect();
        let _ = writeln!(out, "{}", line.join("  ").trim_end());
        if n == 0 {
            let _ = writeln!(
                out,
                "{}",
                "-".repeat(widths.iter().sum::<usize>() + 2 * columns.saturating_sub(1))
            );
        }
    }
    for n in notes(c) {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// One line per incomplete row and per source note.
fn notes(c: &Comparison) -> Vec<String> {
    c.rows
        .iter()
        .flat_map(|row| row.notes.iter().map(move |n| format!("{}: {n}", row.label)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_significant_digits_and_no_negative_zero() {
        assert_eq!(sig(1234.56), "1235");
        assert_eq!(sig(12.345), "12.3");
        assert_eq!(sig(1.2345), "1.23");
        assert_eq!(sig(-0.001), "0.00");
        assert_eq!(sig(-3.0), "-3.00");
    }

    #[test]
    fn dates_read_like_dates() {
        assert_eq!(readable_utc(1_795_000_000), "2026-11-18 11:06");
    }

    #[test]
    fn a_range_is_shown_only_when_it_is_one() {
        let s = |median, min, max, n| Spread {
            median,
            min,
            max,
            n,
        };
        assert_eq!(
            spread_cell(Some(&s(2.0, 1.0, 3.0, 3)), 1.0, ""),
            "2.00 (1.00–3.00)"
        );
        assert_eq!(spread_cell(Some(&s(2.0, 2.0, 2.0, 3)), 1.0, ""), "2.00");
        assert_eq!(
            spread_cell(Some(&s(0.5, 0.25, 0.75, 1)), 100.0, " %"),
            "50.0 %"
        );
        assert_eq!(
            spread_cell(Some(&s(0.0, 0.0, 0.803, 3)), 100.0, " %"),
            "0.0 % (0.0–80.3 %)"
        );
        assert_eq!(spread_cell(None, 1.0, ""), "–");
    }
}
