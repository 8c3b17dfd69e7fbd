//! compare.csv and compare.json: the comparison in machine units (bytes,
//! seconds, fractions), one row per strategy and source.
//!
//! Formats a [`Comparison`]; computes nothing. The columns of compare.csv are
//! part of `COMPARE_SCHEMA_VERSION`: change them only together with it.

use anyhow::Result;

use crate::metrics::comparison::Comparison;
use crate::metrics::{Spread, StrategySummary};

/// How a spread-valued column is read from a summary.
type Pick = fn(&StrategySummary) -> &Option<Spread>;

/// Spread-valued columns: name prefix and how to read it from a summary.
const SPREADS: [(&str, Pick); 9] = [
    ("peak_bytes", |s| &s.host().peak_bytes),
    ("retained_bytes", |s| &s.host().retained_bytes),
    ("retained_anon_bytes", |s| &s.host().retained_anon_bytes),
    ("retained_slope_bytes_per_cycle", |s| {
        &s.host().retained_slope_bytes_per_cycle
    }),
    ("released_fraction", |s| &s.host().released_fraction),
    ("release_latency_s", |s| &s.host().release_latency_s),
    ("load_time_s", |s| &s.load_time_s),
    ("forward_time_s", |s| &s.forward_time_s),
    ("release_action_s", |s| &s.release_action_s),
];

/// `compare.json`, pretty-printed.
pub fn comparison_json(c: &Comparison) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(c)?;
    bytes.push(b'\n');
    Ok(bytes)
}

fn number(v: Option<f64>) -> String {
    v.map(|v| v.to_string()).unwrap_or_default()
}

/// `compare.csv`: one header line, one line per row; empty cells for unknown values.
pub fn comparison_csv(c: &Comparison) -> Result<Vec<u8>> {
    let mut writer = csv::Writer::from_writer(Vec::new());
    let mut header: Vec<String> = [
        "schema_version",
        "source",
        "dir",
        "scenario",
        "strategy",
        "runs",
        "runs_completed",
        "incomplete",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (name, _) in SPREADS {
        for part in ["median", "min", "max"] {
            header.push(format!("{name}_{part}"));
        }
    }
    header.extend(
        [
            "forward_time_relative",
            "cycles_retaining",
            "cycles_total",
            "cycles_expected",
            "processes_retaining",
            "checks_passed",
            "notes",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    writer.write_record(&header)?;
    for row in &c.rows {
        let s = &row.summary;
        let source = c.sources.get(row.source);
        let mut record = vec![
            c.schema_version.to_string(),
            source.map(|x| x.label.clone()).unwrap_or_default(),
            source.map(|x| x.dir.clone()).unwrap_or_default(),
            source.map(|x| x.scenario.clone()).unwrap_or_default(),
            row.strategy.clone(),
            s.runs.to_string(),
            s.runs_completed.to_string(),
            s.incomplete.to_string(),
        ];
        for (_, pick) in SPREADS {
            let spread = pick(s).as_ref();
            record.push(number(spread.map(|x| x.median)));
            record.push(number(spread.map(|x| x.min)));
            record.push(number(spread.map(|x| x.max)));
        }
        record.push(number(row.forward_time_relative));
        record.push(s.host().cycles_retaining.to_string());
        record.push(s.cycles_total.to_string());
        record.push(s.cycles_expected.to_string());
        record.push(s.host().processes_retaining.to_string());
        record.push(s.checks_passed.to_string());
        record.push(row.notes.join("; "));
        writer.write_record(&record)?;
    }
    Ok(writer.into_inner()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::comparison::{compare, Input};
    use crate::metrics::summarize;
    use crate::record::fixture;

    #[test]
    fn every_csv_row_has_as_many_cells_as_the_header() {
        let record = fixture::record();
        let summary = summarize(&record);
        let c = compare(&[Input {
            dir: "a,b".into(),
            header: &record.header,
            summary: &summary,
            damage: Vec::new(),
        }]);
        let bytes = comparison_csv(&c).unwrap();
        let mut reader = csv::Reader::from_reader(bytes.as_slice());
        let columns = reader.headers().unwrap().len();
        let rows: Vec<csv::StringRecord> = reader.records().map(|r| r.unwrap()).collect();
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.len() == columns));
        // A comma in a path is quoted, not a new column.
        assert_eq!(&rows[0][2], "a,b");
        let json: serde_json::Value =
            serde_json::from_slice(&comparison_json(&c).unwrap()).unwrap();
        assert_eq!(json["schema_version"], 2);
    }
}
