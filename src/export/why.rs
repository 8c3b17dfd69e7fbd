//! The console's "why it stays" lines: for each strategy, the retained
//! memory of each resource split by the mechanism that holds it
//! (`metrics::why`), where a mechanism holds the retention threshold or
//! more. It exists so that the run's answer names a cause, not only a layer.

use std::fmt::Write;

use super::markdown::{escape, Table};
use crate::metrics::comparison::Comparison;
use crate::metrics::knob::{MechanismAdvice, Priced};
use crate::metrics::why::{Held, Mechanism};
use crate::metrics::{ResourceFacts, Summary};
use crate::record::allocations::Site;
use crate::record::Resource;
use crate::textutil::mib;

/// The lines (empty where no mechanism of any strategy holds `threshold`).
pub fn lines(summary: &Summary) -> Vec<String> {
    let threshold = summary.retention_threshold_bytes as i64;
    let mut out = Vec::new();
    for s in &summary.strategies {
        for resource in summary.shown() {
            out.extend(resource_lines(&s.strategy, resource, &s.why, threshold));
        }
    }
    if !out.is_empty() {
        out.insert(
            0,
            format!(
                "why it stays (last cycle, median over runs; mechanisms holding {} MiB or more):",
                mib(threshold as f64)
            ),
        );
    }
    out
}

/// `  drop: host RSS retained 130.0 MiB`, then one line per mechanism:
/// `     64.0 MiB  heap: free malloc chunks (free but kept)`.
fn resource_lines(strategy: &str, resource: Resource, why: &[Held], threshold: i64) -> Vec<String> {
    let rows: Vec<&Held> = why
        .iter()
        .filter(|h| h.resource == resource && h.bytes >= threshold)
        .collect();
    // A resource of one mechanism (the page cache) is split into nothing.
    let mechanisms = why.iter().filter(|h| h.resource == resource).count();
    if rows.is_empty() || mechanisms < 2 {
        return Vec::new();
    }
    let total: i64 = why
        .iter()
        .filter(|h| h.resource == resource)
        .map(|h| h.bytes)
        .sum();
    let mut out = vec![format!(
        "  {strategy}: {} retained {} MiB",
        resource.label(),
        mib(total as f64)
    )];
    for h in rows {
        out.push(format!(
            "    {:>8} MiB  {} ({})",
            mib(h.bytes as f64),
            name(h.mechanism),
            h.mechanism.class().label()
        ));
    }
    out
}

/// Per resource of `c`, the mechanisms some row split out of it
/// (`StrategySummary::why`), in `Mechanism::ALL`'s order: compare.csv's
/// `<r>_why_<mechanism>_bytes` columns and compare.md's tables.
pub fn mechanisms_split(c: &Comparison) -> Vec<(Resource, Vec<Mechanism>)> {
    c.resources
        .iter()
        .map(|&r| {
            let held = |m: Mechanism| {
                c.rows.iter().any(|row| {
                    row.summary
                        .why
                        .iter()
                        .any(|h| h.resource == r && h.mechanism == m)
                })
            };
            (r, Mechanism::ALL.into_iter().filter(|&m| held(m)).collect())
        })
        .collect()
}

/// compare.md's "why it stays" tables: per resource split into two
/// mechanisms or more, a row per strategy with its retained memory and
/// each mechanism's share (MiB, last cycle, median over runs).
pub fn markdown(c: &Comparison) -> String {
    let mut out = String::new();
    for (resource, mechanisms) in mechanisms_split(c) {
        if mechanisms.len() < 2 {
            continue;
        }
        // A column of zeros says nothing: a mechanism is shown where some
        // strategy's share of it reaches 1 MiB either way.
        let shown = |m: &Mechanism| {
            c.rows.iter().any(|row| {
                row.summary.why.iter().any(|h| {
                    h.resource == resource && h.mechanism == *m && h.bytes.abs() >= 1 << 20
                })
            })
        };
        let mechanisms: Vec<Mechanism> = mechanisms.into_iter().filter(shown).collect();
        if mechanisms.is_empty() {
            continue;
        }
        let mut table = Table::new(
            ["strategy".to_string(), "retained MiB".to_string()]
                .into_iter()
                .chain(
                    mechanisms
                        .iter()
                        .map(|&m| format!("{} ({})", name(m), m.class().label())),
                ),
        )
        .numeric();
        for row in &c.rows {
            let retained = row
                .summary
                .resource(resource)
                .and_then(|m| m.retained_bytes.as_ref())
                .map(|s| mib(s.median));
            let cell = |m: Mechanism| {
                row.summary
                    .why
                    .iter()
                    .find(|h| h.resource == resource && h.mechanism == m)
                    .map_or(String::new(), |h| mib_signed(h.bytes))
            };
            table.row(
                [escape(&row.label), retained.unwrap_or_default()]
                    .into_iter()
                    .chain(mechanisms.iter().map(|&m| cell(m))),
            );
        }
        let _ = write!(
            out,
            "\n**Why it stays: {}** (last cycle, median over runs; docs/metrics.md, \"Why it stays\")\n\n{}",
            resource.label(),
            table.markdown()
        );
    }
    out
}

/// MiB with one decimal, never `-0.0`.
fn mib_signed(bytes: i64) -> String {
    let v = bytes as f64 / (1u64 << 20) as f64;
    if v.abs() < 0.05 {
        "0.0".to_string()
    } else {
        format!("{v:.1}")
    }
}

/// A mechanism's name with the mapping it is a share of: `heap: free malloc chunks`.
fn name(mechanism: Mechanism) -> String {
    match mechanism.mapping() {
        Some(kind) if kind.key() != mechanism.label() => {
            format!("{}: {}", kind.key(), mechanism.label())
        }
        _ => mechanism.label().to_string(),
    }
}

/// `memrel advise`'s mechanism lines, each ending in a newline: per
/// mechanism, what holds it, its class and its knob, priced where a run of
/// the knob's strategy exists, else the command that would price it
/// (`rerun`: the measured command with the knob's strategy in place of its).
/// Live bytes on the host end with `top`'s sites (`--trace-allocations`:
/// the last snapshot of a run of the strategy), where there are any.
pub fn advice_text(
    advice: &[MechanismAdvice],
    rerun: &dyn Fn(&str) -> String,
    top: &[&Site],
) -> String {
    let mut out = String::new();
    for a in advice {
        let _ = write!(
            out,
            "{} {} MiB under {} is {} ({}): ",
            a.resource,
            mib(a.bytes as f64),
            a.strategy,
            name(a.mechanism),
            a.mechanism.class().label()
        );
        let _ = match (a.knob.strategy, &a.priced) {
            (None, _) if a.live() && a.resource == Resource::Host && !top.is_empty() => {
                writeln!(
                    out,
                    "{}; where it was allocated (--trace-allocations): {}",
                    a.knob.what,
                    sites(top)
                )
            }
            (None, _) => writeln!(out, "{}", a.knob.what),
            (Some(s), Some(p)) => writeln!(
                out,
                "{s} frees it: {} (measured: {} in {} run{}; {})",
                a.knob.what,
                match p.kept_bytes {
                    Some(b) => format!("{} MiB of it left", mib(b.max(0) as f64)),
                    None => "not split under it".to_string(),
                },
                p.runs,
                if p.runs == 1 { "" } else { "s" },
                price(p)
            ),
            (Some(s), None) => writeln!(
                out,
                "{s} frees it: {} (not measured here: run `{}` to price it)",
                a.knob.what,
                rerun(s)
            ),
        };
    }
    out
}

/// The three largest sites: `prog.py:12 48.0 MiB in 48 blocks, …`.
fn sites(top: &[&Site]) -> String {
    top.iter()
        .take(3)
        .map(|s| {
            format!(
                "{}:{} {} MiB in {} blocks",
                s.file,
                s.line,
                mib(s.bytes as f64),
                s.count
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn price(p: &Priced) -> String {
    let release = match p.release_action_s {
        Some(s) => format!("release {}", crate::export::advice::seconds(s)),
        None => "no release step".to_string(),
    };
    match p.ready_s {
        Some(s) => format!(
            "{release}, ready again after {}",
            crate::export::advice::seconds(s)
        ),
        None => release,
    }
}

/// The memrel command line of a record with `strategy` in place of its
/// strategies (`--strategy`/`-s` and their values, `--strategy=…`).
pub fn rerun_with(command: &[String], strategy: &str) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut skip = false;
    let mut placed = false;
    for (i, arg) in command.iter().enumerate() {
        if skip {
            skip = false;
            continue;
        }
        let program_starts = arg == "--";
        if program_starts && !placed {
            out.push(format!("--strategy {strategy}"));
            placed = true;
            out.extend(command[i..].iter().cloned());
            break;
        }
        if arg == "--strategy" || arg == "-s" {
            skip = true;
            continue;
        }
        if arg.starts_with("--strategy=") {
            continue;
        }
        out.push(if i == 0 {
            "memrel".to_string()
        } else {
            arg.clone()
        });
    }
    if !placed {
        out.push(format!("--strategy {strategy}"));
    }
    out.join(" ")
}
