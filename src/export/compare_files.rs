//! compare.csv and compare.json: the comparison in machine units (bytes,
//! seconds, fractions), one row per strategy and source.
//!
//! compare.json is the [`Comparison`] as serde writes it (every resource's
//! summary under `rows[].summary.resources`). compare.csv has the strategy's
//! columns (since version 5 with `machine`, the source's `machine` key, so
//! a row is keyed by (machine, strategy)), then one column group per resource of `Comparison::resources`
//! (lead first), each prefixed by the resource key without its colon
//! (`cuda0_…`, `host_…`), then the times once:
//! - `<r>_baseline_bytes`, `_peak_bytes`, `_loaded_bytes`, `_after_unload_bytes`,
//!   `_after_release_bytes`, `_retained_bytes`, `_released_fraction`: the last
//!   cycle of the representative run (column `representative_run`), so
//!   `after_release − baseline = retained` on every line;
//! - `<r>_retained_bytes_{median,min,max}`: over the runs (each at its last cycle);
//! - `<r>_floor_bytes_*` (devices), `<r>_retained_anon_bytes_*` (host),
//!   `<r>_retained_slope_bytes_per_cycle_*`: over the runs;
//!   `<r>_release_latency_s_*`, `<r>_release_t50_s_*`, `<r>_release_t90_s_*`:
//!   over every timed cycle (t50/t90 since version 3);
//!   `<r>_settle_s_*`, `<r>_late_bytes_*`: the release gap, over every
//!   release edge with a window after it (since version 4);
//! - `<r>_cycles_retaining`, `_cycles_total`, `_processes_retaining`, and
//!   `<r>_not_measured` (why the resource has no readings; empty when measured).
//! - `<r>_why_<mechanism>_bytes` (since version 6): what each mechanism
//!   held of the last cycle's retained memory, the median over the runs
//!   (`metrics::why`), one column for each mechanism some row split out of
//!   the resource (none where no run's edges split it).
//!
//! A resource's columns, their order and how each is read are
//! `export::fields`, shared with the tables.
//!
//! Formats a [`Comparison`]; computes nothing. The columns of compare.csv are
//! part of `COMPARE_SCHEMA_VERSION`: change them only together with it.

use anyhow::Result;

use super::fields::{fields, Number, Pick};
use crate::metrics::comparison::Comparison;
use crate::metrics::why::Mechanism;
use crate::metrics::{Resource, Spread, StrategySummary};

/// `cuda:0` → `cuda0`, `host` → `host`.
fn column_prefix(resource: Resource) -> String {
    resource.key().replace(':', "")
}

const PARTS: [&str; 3] = ["median", "min", "max"];

fn resource_header(resource: Resource) -> Vec<String> {
    let prefix = column_prefix(resource);
    let mut out = Vec::new();
    for field in fields(resource) {
        let name = field.csv;
        match field.pick {
            Pick::Spread(_) => out.extend(PARTS.iter().map(|p| format!("{prefix}_{name}_{p}"))),
            Pick::Last(_) | Pick::Count(_) | Pick::Text(_) => out.push(format!("{prefix}_{name}")),
        }
    }
    out
}

/// The cells of `resource`'s group; empty where the row lacks the resource.
fn resource_cells(resource: Resource, s: &StrategySummary) -> Vec<String> {
    let m = s.resource(resource);
    let mut out = Vec::new();
    for field in fields(resource) {
        match field.pick {
            Pick::Last(pick) => out.push(m.and_then(pick).map(Number::csv).unwrap_or_default()),
            Pick::Count(pick) => out.push(m.map(|m| pick(m).to_string()).unwrap_or_default()),
            Pick::Text(pick) => out.push(m.and_then(pick).unwrap_or_default()),
            Pick::Spread(pick) => {
                let spread = m.and_then(pick);
                out.push(number(spread.map(|x| x.median)));
                out.push(number(spread.map(|x| x.min)));
                out.push(number(spread.map(|x| x.max)));
            }
        }
    }
    out
}

fn why_of(why: &[(Resource, Vec<Mechanism>)], r: Resource) -> &[Mechanism] {
    why.iter()
        .find(|(of, _)| *of == r)
        .map_or(&[], |(_, m)| m.as_slice())
}

/// How a time column is read from a summary.
type TimePick = fn(&StrategySummary) -> &Option<Spread>;

/// Time columns (median, min, max over every cycle), written once.
const TIMES: [(&str, TimePick); 4] = [
    ("load_time_s", |s| &s.load_time_s),
    ("forward_time_s", |s| &s.forward_time_s),
    ("release_action_s", |s| &s.release_action_s),
    ("ready_s", |s| &s.ready_s),
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
        "machine",
        "strategy",
        "runs",
        "runs_completed",
        "incomplete",
        "representative_run",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let why = super::why::mechanisms_split(c);
    for &r in &c.resources {
        header.extend(resource_header(r));
        header.extend(
            why_of(&why, r)
                .iter()
                .map(|m| format!("{}_why_{}_bytes", column_prefix(r), m.key())),
        );
    }
    for (name, _) in TIMES {
        header.extend(PARTS.iter().map(|p| format!("{name}_{p}")));
    }
    header.extend(
        [
            "forward_time_relative",
            "cycles_total",
            "cycles_expected",
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
            row.machine.clone(),
            row.strategy.clone(),
            s.runs.to_string(),
            s.runs_completed.to_string(),
            s.incomplete.to_string(),
            s.representative_run
                .map(|r| r.to_string())
                .unwrap_or_default(),
        ];
        for &r in &c.resources {
            record.extend(resource_cells(r, s));
            record.extend(why_of(&why, r).iter().map(|&m| {
                s.why
                    .iter()
                    .find(|h| h.resource == r && h.mechanism == m)
                    .map(|h| h.bytes.to_string())
                    .unwrap_or_default()
            }));
        }
        for (_, pick) in TIMES {
            let spread = pick(s).as_ref();
            record.push(number(spread.map(|x| x.median)));
            record.push(number(spread.map(|x| x.min)));
            record.push(number(spread.map(|x| x.max)));
        }
        record.push(number(row.forward_time_relative));
        record.push(s.cycles_total.to_string());
        record.push(s.cycles_expected.to_string());
        record.push(s.checks_passed.to_string());
        record.push(row.notes.join("; "));
        writer.write_record(&record)?;
    }
    Ok(writer.into_inner()?)
}

#[cfg(test)]
mod tests {
    use super::super::table::tests::comparison_of;
    use super::*;
    use crate::metrics::comparison::{compare, Input};
    use crate::metrics::summarize;
    use crate::record::fixture;

    fn read(c: &Comparison) -> (csv::StringRecord, Vec<csv::StringRecord>) {
        let bytes = comparison_csv(c).unwrap();
        let mut reader = csv::Reader::from_reader(bytes.as_slice());
        let header = reader.headers().unwrap().clone();
        let rows = reader.records().map(|r| r.unwrap()).collect();
        (header, rows)
    }

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
        let (header, rows) = read(&c);
        assert_eq!(rows.len(), 2);
        assert!(rows.iter().all(|r| r.len() == header.len()));
        // A comma in a path is quoted, not a new column.
        assert_eq!(&rows[0][2], "a,b");
        let json: serde_json::Value =
            serde_json::from_slice(&comparison_json(&c).unwrap()).unwrap();
        assert_eq!(json["schema_version"], 6);
        // The fixture predates the machine facts: its machine is unknown.
        assert_eq!(&header[4], "machine");
        assert!(rows.iter().all(|r| &r[4] == "unknown"), "{rows:?}");
        // A cpu comparison has host columns only.
        assert!(header.iter().all(|h| !h.starts_with("cuda")), "{header:?}");
    }

    #[test]
    fn cuda_columns_come_first_and_each_line_agrees_with_itself() {
        let c = comparison_of(&fixture::cuda_record());
        let (header, rows) = read(&c);
        let at = |name: &str| {
            header
                .iter()
                .position(|h| h == name)
                .unwrap_or_else(|| panic!("no {name} in {header:?}"))
        };
        assert!(at("cuda0_baseline_bytes") < at("host_baseline_bytes"));
        assert!(at("host_retained_anon_bytes_median") > 0);
        assert!(!header.iter().any(|h| h == "host_floor_bytes_median"));
        assert_eq!(
            header
                .iter()
                .filter(|h| h.starts_with("load_time_s"))
                .count(),
            3,
            "times once"
        );
        for row in &rows {
            for prefix in ["cuda0", "host"] {
                let int =
                    |name: &str| -> i64 { row[at(&format!("{prefix}_{name}"))].parse().unwrap() };
                assert_eq!(
                    int("after_release_bytes") - int("baseline_bytes"),
                    int("retained_bytes"),
                    "{prefix}: {row:?}"
                );
            }
        }
        let drop = rows.iter().find(|r| &r[5] == "drop").unwrap();
        let mib = |v: &str| v.parse::<f64>().unwrap() / (1u64 << 20) as f64;
        assert_eq!(mib(&drop[at("cuda0_retained_bytes_median")]), 416.0);
        assert_eq!(mib(&drop[at("cuda0_floor_bytes_median")]), 586.0);
        assert_eq!(&drop[at("cuda0_not_measured")], "");
        let context = rows.iter().find(|r| &r[5] == "context-release").unwrap();
        assert_eq!(mib(&context[at("cuda0_retained_bytes")]), -678.0);
        assert_eq!(&context[at("cuda0_after_release_bytes")], "0");
        let json: serde_json::Value =
            serde_json::from_slice(&comparison_json(&c).unwrap()).unwrap();
        assert_eq!(json["resources"][0], "cuda:0");
        assert_eq!(
            json["rows"][0]["summary"]["resources"][1]["resource"],
            "cuda:0"
        );
    }
}
