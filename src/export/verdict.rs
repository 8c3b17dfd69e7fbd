//! `verdict.json` and `verdict.md` of `memrel check`: formats a
//! [`VerdictReport`], computes nothing.

use std::fmt::Write;

use anyhow::Result;

use crate::gate::{MetricVerdict, VerdictReport};
use crate::textutil::MIB;

pub fn verdict_json(report: &VerdictReport) -> Result<Vec<u8>> {
    let mut bytes = serde_json::to_vec_pretty(report)?;
    bytes.push(b'\n');
    Ok(bytes)
}

fn value(metric: &str, v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if metric.starts_with("release_latency") => format!("{:.1} ms", v * 1e3),
        Some(v) if metric.starts_with("retained_slope") => format!("{:.1} MiB/cycle", v / MIB),
        Some(v) => format!("{:.1} MiB", v / MIB),
    }
}

fn icon(v: &MetricVerdict) -> &'static str {
    match v.verdict.as_str() {
        "regressed" | "over-budget" => "❌",
        "improved" => "✅",
        "no-change" => "➖",
        _ => "❔",
    }
}

/// GitHub-flavoured Markdown, ready for `$GITHUB_STEP_SUMMARY`.
pub fn verdict_markdown(report: &VerdictReport) -> String {
    let mut out = String::new();
    let headline = if report.regressed {
        "❌ memory regression"
    } else {
        "✅ no memory regression"
    };
    let _ = writeln!(
        out,
        "### memrel check: {headline} (baseline `{}`)\n",
        report.baseline
    );
    let _ = writeln!(out, "| scenario | strategy | metric | baseline | new | change | 95% interval | noise band | verdict |");
    let _ = writeln!(out, "|---|---|---|---:|---:|---:|---:|---:|---|");
    for v in &report.verdicts {
        let interval = v
            .interval
            .map(|(lo, hi)| {
                format!(
                    "{} … {}",
                    value(&v.metric, Some(lo)),
                    value(&v.metric, Some(hi))
                )
            })
            .unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} {}{} |",
            v.scenario,
            v.strategy,
            v.metric,
            value(&v.metric, v.baseline_median),
            value(&v.metric, v.new_median),
            value(&v.metric, v.change),
            interval,
            v.noise_band
                .map(|b| format!("±{}", value(&v.metric, Some(b))))
                .unwrap_or_else(|| "-".into()),
            icon(v),
            v.verdict.as_str(),
            if v.note.is_empty() {
                String::new()
            } else {
                format!(" ({})", v.note)
            }
        );
    }
    if !report.warnings.is_empty() {
        let _ = writeln!(out, "\n**warnings**\n");
        for w in &report.warnings {
            let _ = writeln!(out, "- {w}");
        }
    }
    let _ = writeln!(
        out,
        "\nMedians over repetitions. A verdict needs the whole 95% interval of the change beyond the noise band (max of the relative and absolute parts); otherwise it is no-change (inside the band) or inconclusive."
    );
    out
}
