//! The text of one table cell: numbers for people (MiB with about three
//! significant digits, milliseconds, percentages, `median (min–max)`), and
//! `–` where there is no value, never a 0.
//!
//! Formats values the summary already holds; computes nothing.

use super::super::fields::{field, Number, Pick};
use super::columns::{names, Column};
use super::Line;
use crate::metrics::catalogue::MemoryMetric;
use crate::metrics::comparison::Row;
use crate::metrics::{ResourceSummary, Spread};
use crate::textutil::MIB;

/// What a cell without a value shows.
pub(super) const NONE: &str = "–";

/// The cell of `column` in `line`'s row.
pub(super) fn cell(column: Column, line: &Line) -> String {
    let s = line.summary;
    match column {
        Column::Strategy => line.label.clone(),
        Column::Machine => line.machine.clone().unwrap_or_else(|| NONE.to_string()),
        Column::Runs => format!("{}/{}", s.runs_completed, s.runs),
        Column::LoadTime => spread_cell(s.load_time_s.as_ref(), 1e3, ""),
        Column::ForwardTime => spread_cell(s.forward_time_s.as_ref(), 1e3, ""),
        Column::ReleaseAction => spread_cell(s.release_action_s.as_ref(), 1e3, ""),
        Column::Ready => spread_cell(s.ready_s.as_ref(), 1e3, ""),
        Column::ForwardVsRef => line.relative.clone().unwrap_or_else(|| NONE.to_string()),
        Column::Checks => if s.checks_passed { "ok" } else { "FAILED" }.to_string(),
        Column::Memory {
            resource,
            metric,
            range,
        } => match s.resource(resource) {
            Some(m) if m.not_measured.is_none() => memory_cell(m, column, metric, range, s.runs),
            _ => NONE.to_string(),
        },
    }
}

fn mib_cell(bytes: Option<f64>) -> String {
    bytes
        .map(|b| sig(b / MIB))
        .unwrap_or_else(|| NONE.to_string())
}

/// A memory cell: the field's value in the column's unit; retained with
/// its range over the runs, the retaining counts out of their totals.
fn memory_cell(
    m: &ResourceSummary,
    column: Column,
    metric: MemoryMetric,
    range: bool,
    runs: u32,
) -> String {
    match metric {
        MemoryMetric::Retained => {
            let row = m.row.as_ref();
            let value = mib_cell(row.map(|r| r.retained_bytes as f64));
            match m.retained_bytes.as_ref().filter(|s| range && s.n > 1) {
                Some(s) if row.is_some() => {
                    let (lo, hi) = (sig(s.min / MIB), sig(s.max / MIB));
                    if lo == hi {
                        value
                    } else {
                        format!("{value} ({lo}–{hi})")
                    }
                }
                _ => value,
            }
        }
        MemoryMetric::RetainingCycles => format!("{}/{}", m.cycles_retaining, m.cycles_total),
        MemoryMetric::RetainingProcesses => format!("{}/{}", m.processes_retaining, runs),
        _ => match field(metric).map(|f| f.pick) {
            Some(Pick::Last(pick)) => match pick(m) {
                Some(Number::Bytes(b)) => mib_cell(Some(b as f64)),
                Some(Number::Fraction(f)) => format!("{} %", percent(f * 100.0)),
                None => NONE.to_string(),
            },
            Some(Pick::Spread(pick)) => spread_cell(pick(m), names(column).scale, ""),
            Some(Pick::Count(pick)) => pick(m).to_string(),
            Some(Pick::Text(pick)) => pick(m).unwrap_or_else(|| NONE.to_string()),
            // No column shows it: never asked for by the tables.
            None => NONE.to_string(),
        },
    }
}

/// From the summary's unit (bytes, seconds) to the column's.
/// A number with about three significant digits: 1234, 12.3, 1.23.
pub(in crate::export) fn sig(v: f64) -> String {
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
pub(in crate::export) fn percent(v: f64) -> String {
    let text = format!("{v:.1}");
    if text == "-0.0" {
        "0.0".to_string()
    } else {
        text
    }
}

/// `median (min–max)`, or just the median when the range is one value.
pub(super) fn spread_cell(s: Option<&Spread>, scale: f64, unit: &str) -> String {
    let Some(s) = s else {
        return NONE.to_string();
    };
    let format = if unit == " %" { percent } else { sig };
    let median = format(s.median * scale);
    let (lo, hi) = (format(s.min * scale), format(s.max * scale));
    if s.n > 1 && lo != hi {
        format!("{median}{unit} ({lo}–{hi}{unit})")
    } else {
        format!("{median}{unit}")
    }
}

/// The `forward vs ref` cell of a comparison row.
pub(super) fn relative_cell(row: &Row, reference: Option<&str>) -> String {
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
        None => NONE.to_string(),
    }
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
