//! `peaks.csv`: host memory's peak in every phase of every run, the highest
//! sample beside the kernel's exact peak (`metrics::peaks`), and where the
//! kernel's could not be read, "not available: <why>" in its place.
//!
//! Formats the [`Summary`]; computes nothing.

use anyhow::Result;

use crate::metrics::Summary;

pub const PEAKS_CSV_FILE: &str = "peaks.csv";

/// The columns of peaks.csv.
const COLUMNS: [&str; 10] = [
    "run",
    "strategy",
    "cycle",
    "phase",
    "model",
    "begin_s",
    "end_s",
    "sampled_peak_bytes",
    "kernel_peak_bytes",
    "missed_bytes",
];

/// One row per phase of every run whose kernel peaks were read, one row
/// (phase empty) per run where they were not available; `None` when no run
/// has either (records made before memrel read them).
pub fn csv(summary: &Summary) -> Result<Option<Vec<u8>>> {
    let any = !summary
        .runs
        .iter()
        .all(|r| r.phase_peaks.is_empty() && r.kernel_peak.is_none());
    super::optional_csv(any, &COLUMNS, |w| {
        let opt = |v: Option<u64>| v.map(|v| v.to_string()).unwrap_or_default();
        for run in &summary.runs {
            if let Some(why) = &run.kernel_peak {
                w.write_record([
                    run.run.to_string(),
                    run.strategy.clone(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    why.clone(),
                    String::new(),
                ])?;
            }
            for p in &run.phase_peaks {
                w.write_record([
                    run.run.to_string(),
                    run.strategy.clone(),
                    p.cycle.to_string(),
                    p.phase.as_str().to_string(),
                    p.model.clone().unwrap_or_default(),
                    format!("{:.6}", p.begin_s),
                    format!("{:.6}", p.end_s),
                    opt(p.sampled_peak_bytes),
                    opt(p.kernel_peak_bytes),
                    opt(p.missed_bytes()),
                ])?;
            }
        }
        Ok(())
    })
}
