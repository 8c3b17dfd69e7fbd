//! The strategy tables people read: `compare.md` (GitHub Markdown, for a PR
//! comment or `$GITHUB_STEP_SUMMARY`) and the aligned plain-text tables of the
//! console (`memrel compare` here, `memrel run` through `console`).
//!
//! Every table has one aggregation, said in its caption: the memory columns of
//! a row are the last cycle of the strategy's representative run
//! (`ResourceSummary::row`), so a row agrees with itself (after release −
//! baseline = retained, released from the same numbers); retained adds its
//! range over the runs; growth is per run (median and range over runs); times
//! and release latency are per cycle (median and range over every cycle).
//!
//! Columns are per resource, in the order the summary shows them (the lead
//! first: on CUDA the VRAM columns come first), never a hard-coded field.
//! Three layouts: `Compact` (the console default, fits 100 columns),
//! `Markdown` (compare.md: the lead resource in full, the others' peak and
//! retained, the times) and `Wide` (`--wide`: every column of every resource).
//!
//! Formats a [`Comparison`] or a summary's strategies; computes nothing.
//! Numbers for machines (bytes, seconds) go to compare.csv and compare.json.

use std::fmt::Write;

use crate::fsutil::utc_stamp;
use crate::metrics::comparison::{Comparison, Row};
use crate::metrics::{Resource, ResourceSummary, Spread, StrategySummary};
use crate::textutil::MIB;

/// The width the compact console layout must fit in.
pub const COMPACT_MAX_CHARS: usize = 100;

/// Which columns a table has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// The console default, at most [`COMPACT_MAX_CHARS`] wide: strategy, runs;
    /// the lead resource's baseline, after release, retained (range over
    /// runs), released and retaining cycles; every other resource's retained;
    /// checks.
    Compact,
    /// compare.md: every column of the lead resource, the others' peak and
    /// retained, and the times (load, forward, forward vs ref).
    Markdown,
    /// `--wide`: every column of every resource, the times and the checks.
    Wide,
}

impl Layout {
    /// The console layout `--wide` asks for.
    pub fn console(wide: bool) -> Layout {
        if wide {
            Layout::Wide
        } else {
            Layout::Compact
        }
    }
}

/// A memory metric of one resource.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Metric {
    Baseline,
    Floor,
    Peak,
    Loaded,
    AfterUnload,
    AfterRelease,
    /// With its range over the runs when `range` and there are several.
    Retained {
        range: bool,
    },
    Released,
    Growth,
    Latency,
    /// The release curve: time to half, and to 90 %, of what came back.
    T50,
    T90,
    CyclesRetaining,
    ProcessesRetaining,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Column {
    Strategy,
    Runs,
    Memory(Resource, Metric),
    LoadTime,
    ForwardTime,
    ForwardVsRef,
    ReleaseAction,
    /// The release step plus the next cycle's first load and forward.
    Ready,
    Checks,
}

/// Every metric of a resource, in table order (the floor only for a device).
fn all_metrics(resource: Resource) -> Vec<Metric> {
    let mut out = vec![Metric::Baseline];
    if resource.is_device() {
        out.push(Metric::Floor);
    }
    out.extend([
        Metric::Peak,
        Metric::Loaded,
        Metric::AfterUnload,
        Metric::AfterRelease,
        Metric::Retained { range: true },
        Metric::Released,
        Metric::Growth,
        Metric::Latency,
        Metric::T50,
        Metric::T90,
        Metric::CyclesRetaining,
        Metric::ProcessesRetaining,
    ]);
    out
}

/// The columns of `layout`; `resources` lead first. `ranges: false` leaves
/// the retained ranges out (the compact layout's fallback to fit its width).
fn columns(layout: Layout, resources: &[Resource], relative: bool, ranges: bool) -> Vec<Column> {
    let mut out = vec![Column::Strategy, Column::Runs];
    let Some((&lead, others)) = resources.split_first() else {
        return out;
    };
    let memory = |r: Resource, metrics: &[Metric]| -> Vec<Column> {
        metrics.iter().map(|&m| Column::Memory(r, m)).collect()
    };
    match layout {
        Layout::Compact => {
            out.extend(memory(
                lead,
                &[
                    Metric::Baseline,
                    Metric::AfterRelease,
                    Metric::Retained { range: ranges },
                    Metric::Released,
                    Metric::CyclesRetaining,
                ],
            ));
            for &r in others {
                out.extend(memory(r, &[Metric::Retained { range: false }]));
            }
            out.push(Column::Checks);
        }
        Layout::Markdown => {
            let lead_metrics: Vec<Metric> = all_metrics(lead)
                .into_iter()
                .filter(|m| *m != Metric::AfterUnload)
                .collect();
            out.extend(memory(lead, &lead_metrics));
            for &r in others {
                out.extend(memory(r, &[Metric::Peak, Metric::Retained { range: true }]));
            }
            out.extend([Column::LoadTime, Column::ForwardTime]);
            if relative {
                out.push(Column::ForwardVsRef);
            }
            out.extend([Column::ReleaseAction, Column::Ready]);
        }
        Layout::Wide => {
            for &r in resources {
                out.extend(memory(r, &all_metrics(r)));
            }
            out.extend([Column::LoadTime, Column::ForwardTime]);
            if relative {
                out.push(Column::ForwardVsRef);
            }
            out.extend([Column::ReleaseAction, Column::Ready, Column::Checks]);
        }
    }
    out
}

/// (console header, Markdown header without the resource, unit).
fn names(column: Column) -> (&'static str, &'static str, &'static str) {
    match column {
        Column::Strategy => ("strategy", "strategy", ""),
        Column::Runs => ("runs", "runs", ""),
        Column::LoadTime => ("load ms", "load", "ms"),
        Column::ForwardTime => ("forward ms", "forward", "ms"),
        Column::ForwardVsRef => ("vs ref", "forward vs ref", ""),
        Column::ReleaseAction => ("release ms", "release action", "ms"),
        Column::Ready => ("ready ms", "release → next ready", "ms"),
        Column::Checks => ("checks", "checks", ""),
        Column::Memory(_, metric) => match metric {
            Metric::Baseline => ("baseline", "baseline", "MiB"),
            Metric::Floor => ("floor", "floor", "MiB"),
            Metric::Peak => ("peak", "peak", "MiB"),
            Metric::Loaded => ("loaded", "loaded", "MiB"),
            Metric::AfterUnload => ("after unload", "after unload", "MiB"),
            Metric::AfterRelease => ("after release", "after release", "MiB"),
            Metric::Retained { .. } => ("retained", "retained", "MiB"),
            Metric::Released => ("released", "released", ""),
            Metric::Growth => ("growth/cycle", "growth", "MiB/cycle"),
            Metric::Latency => ("latency ms", "release latency", "ms"),
            Metric::T50 => ("t50 ms", "release t50", "ms"),
            Metric::T90 => ("t90 ms", "release t90", "ms"),
            Metric::CyclesRetaining => ("retaining", "retaining cycles", ""),
            Metric::ProcessesRetaining => ("processes", "retaining processes", ""),
        },
    }
}

/// How Markdown headers name a resource: `VRAM` / `RSS`, or the full label
/// (`VRAM cuda:1`) when several devices would otherwise share a name.
fn prefix(resource: Resource, resources: &[Resource]) -> String {
    if resources.iter().filter(|r| r.is_device()).count() > 1 {
        resource.label()
    } else {
        resource.quantity().to_string()
    }
}

/// One row of a table: a strategy's summary under a label.
pub(super) struct Line<'a> {
    /// The strategy (and source), with ` ⚠` when incomplete.
    pub label: String,
    pub summary: &'a StrategySummary,
    /// The `forward vs ref` cell, for tables that have that column.
    pub relative: Option<String>,
}

/// A table's cells before layout: headers and rows, one cell per column.
pub(super) struct Table {
    /// The resource each column belongs to, for the console's group line.
    groups: Vec<Option<String>>,
    /// Console headers (short, unit in the caption).
    short: Vec<String>,
    /// Markdown headers (resource, name and unit).
    long: Vec<String>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// The cells of `lines` in `layout`; `resources` lead first.
    pub(super) fn new(
        layout: Layout,
        resources: &[Resource],
        lines: &[Line],
        relative: bool,
        ranges: bool,
    ) -> Table {
        let columns = columns(layout, resources, relative, ranges);
        let mut groups = Vec::new();
        let mut short = Vec::new();
        let mut long = Vec::new();
        for &column in &columns {
            let (console, markdown, unit) = names(column);
            short.push(console.to_string());
            let resource = match column {
                Column::Memory(r, _) => Some(r),
                _ => None,
            };
            groups.push(resource.map(|r| r.label()));
            let words: Vec<String> = [
                resource.map(|r| prefix(r, resources)).unwrap_or_default(),
                markdown.to_string(),
                unit.to_string(),
            ]
            .into_iter()
            .filter(|w| !w.is_empty())
            .collect();
            long.push(words.join(" "));
        }
        let rows = lines
            .iter()
            .map(|line| columns.iter().map(|&c| cell(c, line)).collect())
            .collect();
        Table {
            groups,
            short,
            long,
            rows,
        }
    }

    /// The table as aligned plain text: a line naming each resource above its
    /// columns, the headers, a rule, the rows.
    pub(super) fn plain_lines(&self) -> Vec<String> {
        let widths: Vec<usize> = (0..self.short.len())
            .map(|i| {
                self.rows
                    .iter()
                    .map(|r| r[i].chars().count())
                    .chain([self.short[i].chars().count()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let total = widths.iter().sum::<usize>() + 2 * widths.len().saturating_sub(1);
        let mut out = Vec::new();
        let mut group_line = String::new();
        let mut previous: Option<&String> = None;
        let mut offset = 0;
        for (i, group) in self.groups.iter().enumerate() {
            if let Some(g) = group {
                if previous != Some(g) {
                    let at = offset.max(group_line.chars().count() + usize::from(i > 0));
                    let pad = at.saturating_sub(group_line.chars().count());
                    group_line.push_str(&" ".repeat(pad));
                    group_line.push_str(g);
                }
            }
            previous = group.as_ref();
            offset += widths[i] + 2;
        }
        if !group_line.is_empty() {
            out.push(group_line.trim_end().to_string());
        }
        let align = |row: &[String]| -> String {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, cell)| {
                    let pad = " ".repeat(widths[i].saturating_sub(cell.chars().count()));
                    if i == 0 {
                        format!("{cell}{pad}")
                    } else {
                        format!("{pad}{cell}")
                    }
                })
                .collect();
            cells.join("  ").trim_end().to_string()
        };
        out.push(align(&self.short));
        out.push("-".repeat(total));
        out.extend(self.rows.iter().map(|r| align(r)));
        out
    }

    /// The table as GitHub Markdown: strategy names as code, numbers right-aligned.
    fn markdown_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        let header: Vec<String> = self.long.iter().map(|h| md_escape(h)).collect();
        out.push(format!("| {} |", header.join(" | ")));
        let rule: Vec<&str> = (0..self.long.len())
            .map(|i| if i == 0 { ":--" } else { "--:" })
            .collect();
        out.push(format!("|{}|", rule.join("|")));
        for row in &self.rows {
            let cells: Vec<String> = row
                .iter()
                .enumerate()
                .map(|(i, cell)| {
                    if i == 0 {
                        format!("`{}`", md_escape(cell))
                    } else {
                        md_escape(cell)
                    }
                })
                .collect();
            out.push(format!("| {} |", cells.join(" | ")));
        }
        out
    }
}

/// The console table of `lines`: in the compact layout, the retained range is
/// left out when the table would not fit [`COMPACT_MAX_CHARS`] with it (the
/// second value says so).
pub(super) fn console_lines(
    layout: Layout,
    resources: &[Resource],
    lines: &[Line],
    relative: bool,
) -> (Vec<String>, bool) {
    let full = Table::new(layout, resources, lines, relative, true).plain_lines();
    let fits = full.iter().all(|l| l.chars().count() <= COMPACT_MAX_CHARS);
    if layout != Layout::Compact || fits {
        return (full, false);
    }
    (
        Table::new(layout, resources, lines, relative, false).plain_lines(),
        true,
    )
}

const NONE: &str = "–";

fn mib_cell(bytes: Option<f64>) -> String {
    bytes
        .map(|b| sig(b / MIB))
        .unwrap_or_else(|| NONE.to_string())
}

fn cell(column: Column, line: &Line) -> String {
    let s = line.summary;
    match column {
        Column::Strategy => line.label.clone(),
        Column::Runs => format!("{}/{}", s.runs_completed, s.runs),
        Column::LoadTime => spread_cell(s.load_time_s.as_ref(), 1e3, ""),
        Column::ForwardTime => spread_cell(s.forward_time_s.as_ref(), 1e3, ""),
        Column::ReleaseAction => spread_cell(s.release_action_s.as_ref(), 1e3, ""),
        Column::Ready => spread_cell(s.ready_s.as_ref(), 1e3, ""),
        Column::ForwardVsRef => line.relative.clone().unwrap_or_else(|| NONE.to_string()),
        Column::Checks => if s.checks_passed { "ok" } else { "FAILED" }.to_string(),
        Column::Memory(resource, metric) => match s.resource(resource) {
            Some(m) if m.not_measured.is_none() => memory_cell(m, metric, s.runs),
            _ => NONE.to_string(),
        },
    }
}

fn memory_cell(m: &ResourceSummary, metric: Metric, runs: u32) -> String {
    let row = m.row.as_ref();
    match metric {
        Metric::Baseline => mib_cell(row.map(|r| r.baseline_bytes as f64)),
        Metric::Floor => spread_cell(m.floor_bytes.as_ref(), 1.0 / MIB, ""),
        Metric::Peak => mib_cell(row.and_then(|r| r.peak_bytes).map(|b| b as f64)),
        Metric::Loaded => mib_cell(row.map(|r| r.loaded_bytes as f64)),
        Metric::AfterUnload => mib_cell(row.map(|r| r.after_unload_bytes as f64)),
        Metric::AfterRelease => mib_cell(row.map(|r| r.after_release_bytes as f64)),
        Metric::Retained { range } => {
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
        Metric::Released => row
            .and_then(|r| r.released_fraction)
            .map(|f| format!("{} %", percent(f * 100.0)))
            .unwrap_or_else(|| NONE.to_string()),
        Metric::Growth => spread_cell(m.retained_slope_bytes_per_cycle.as_ref(), 1.0 / MIB, ""),
        Metric::Latency => spread_cell(m.release_latency_s.as_ref(), 1e3, ""),
        Metric::T50 => spread_cell(m.release_t50_s.as_ref(), 1e3, ""),
        Metric::T90 => spread_cell(m.release_t90_s.as_ref(), 1e3, ""),
        Metric::CyclesRetaining => format!("{}/{}", m.cycles_retaining, m.cycles_total),
        Metric::ProcessesRetaining => format!("{}/{}", m.processes_retaining, runs),
    }
}

/// One line per resource that some strategies did not measure, saying why
/// and which ("VRAM not measured: … (cuda:0: drop, sync)"), instead of a 0.
pub(super) fn not_measured_notes(resources: &[Resource], lines: &[Line]) -> Vec<String> {
    let mut out: Vec<(String, Vec<&str>)> = Vec::new();
    for &r in resources {
        for line in lines {
            let Some(why) = line
                .summary
                .resource(r)
                .and_then(|m| m.not_measured.as_deref())
            else {
                continue;
            };
            let text = format!("{why} ({}", r.key());
            match out.iter_mut().find(|(t, _)| *t == text) {
                Some((_, who)) => who.push(&line.summary.strategy),
                None => out.push((text, vec![&line.summary.strategy])),
            }
        }
    }
    out.into_iter()
        .map(|(text, who)| format!("{text}: {})", who.join(", ")))
        .collect()
}

/// A number with about three significant digits: 1234, 12.3, 1.23.
pub(super) fn sig(v: f64) -> String {
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
pub(super) fn percent(v: f64) -> String {
    let text = format!("{v:.1}");
    if text == "-0.0" {
        "0.0".to_string()
    } else {
        text
    }
}

/// `median (min–max)`, or just the median when the range is one value.
fn spread_cell(s: Option<&Spread>, scale: f64, unit: &str) -> String {
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
        None => NONE.to_string(),
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

/// The rows of a comparison, in its order.
fn comparison_lines(c: &Comparison) -> Vec<Line<'_>> {
    c.rows
        .iter()
        .map(|row| {
            let reference = c
                .sources
                .get(row.source)
                .and_then(|src| src.reference_strategy.as_deref());
            let mut label = row.label.clone();
            if row.summary.incomplete || !row.notes.is_empty() {
                label.push_str(" ⚠");
            }
            Line {
                label,
                summary: &row.summary,
                relative: Some(relative_cell(row, reference)),
            }
        })
        .collect()
}

/// The cells of compare.md's table, header first (for tests and other formats).
pub fn cells(c: &Comparison) -> Vec<Vec<String>> {
    let lines = comparison_lines(c);
    let table = Table::new(Layout::Markdown, &c.resources, &lines, true, true);
    let mut out = vec![table.long.clone()];
    out.extend(table.rows);
    out
}

/// What the console caption says about the aggregation (each line ≤ 100 chars).
pub(super) fn caption(layout: Layout, ranges_left_out: bool) -> Vec<String> {
    let mut out = vec![
        "memory in MiB, at the last cycle of each strategy's median run; (min–max) over runs"
            .to_string(),
    ];
    match layout {
        Layout::Compact => out.push(if ranges_left_out {
            "ranges left out to fit 100 columns; --wide shows every column".to_string()
        } else {
            "--wide shows every column".to_string()
        }),
        Layout::Markdown | Layout::Wide => out.push(
            "growth: median over runs; latency, t50, t90, times: median (min–max) over every cycle"
                .to_string(),
        ),
    }
    out
}

/// What the numbers mean, in one paragraph (compare.md).
fn legend_text(c: &Comparison) -> String {
    let reference = reference_names(c);
    let device = c.resources.iter().any(|r| r.is_device());
    let why_slower = if device {
        ""
    } else {
        " (freezing glibc's mmap threshold slows inference)"
    };
    let floor = if device {
        "Floor = VRAM of a bare CUDA device as each run's worker calibrated it (median (min–max) \
         over runs): VRAM cannot go below it while a device is open, and ends below it where the \
         context is released. Every GPU strategy starts its cycles from the same baseline (after \
         the warm-up, a dropped device is reopened and warmed, and the memory pool trimmed). "
    } else {
        ""
    };
    format!(
        "Memory in MiB, at the last cycle of each strategy's median run (the completed run whose \
         {lead} retained is nearest the median over runs), so a row agrees with itself: \
         retained = after release − baseline (negative: below the baseline), released = \
         (loaded − after release) / (loaded − baseline); retained adds its (min–max) over the runs. \
         Baseline = just before the first load (after the warm-up). {floor}Growth = slope of \
         retained over cycles, median (min–max) over runs (a leak grows, a one-time cost stays \
         flat). Release t50 / t90 = from the begin of the unload until half / 90 % of what came \
         back by the end of the cycle (its release, settle, idle or busy steps) had come back. \
         Release action = the strategy's release step; release → next ready = that step plus the \
         next cycle's first load and first forward (for respawn: the old process's exit and the \
         new one's start, then a load and forward in a cold process). \
         Release latency, t50, t90, load, forward, release and ready: median (min–max) over every \
         cycle of every run. \
         Retaining cycles: cycles whose retained is above {threshold:.0} MiB, of those measured; \
         retaining processes: runs with at least one. Forward vs ref = median forward time \
         relative to {reference}{why_slower}. \
         ⚠ = incomplete, see the notes.",
        lead = c.lead.label(),
        threshold = c.retention_threshold_bytes as f64 / MIB
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
    let lines = comparison_lines(c);
    let table = Table::new(Layout::Markdown, &c.resources, &lines, true, true);
    for line in table.markdown_lines() {
        let _ = writeln!(out, "{line}");
    }
    let _ = writeln!(out, "\n{}", legend_text(c));
    let notes = notes(c, &lines);
    if !notes.is_empty() {
        let _ = writeln!(out, "\n**Notes**\n");
        for n in notes {
            let _ = writeln!(out, "- {}", md_escape(&n));
        }
    }
    out
}

/// The console's comparison table, compact (fits 100 columns).
pub fn plain(c: &Comparison) -> String {
    plain_as(c, Layout::Compact)
}

/// The console's comparison table in `layout` (`Layout::console(wide)`).
pub fn plain_as(c: &Comparison, layout: Layout) -> String {
    let lines = comparison_lines(c);
    let (table, ranges_left_out) = console_lines(layout, &c.resources, &lines, true);
    let mut out = String::new();
    let _ = writeln!(out, "memrel compare: {} on {}", c.scenario, c.device);
    for w in &c.warnings {
        let _ = writeln!(out, "warning: {w}");
    }
    for line in caption(layout, ranges_left_out).iter().chain(&table) {
        let _ = writeln!(out, "{line}");
    }
    for n in notes(c, &lines) {
        let _ = writeln!(out, "note: {n}");
    }
    out
}

/// One line per incomplete row and per resource not measured.
fn notes(c: &Comparison, lines: &[Line]) -> Vec<String> {
    let mut out: Vec<String> = c
        .rows
        .iter()
        .flat_map(|row| row.notes.iter().map(move |n| format!("{}: {n}", row.label)))
        .collect();
    out.extend(not_measured_notes(&c.resources, lines));
    out
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::metrics::comparison::{compare, Input};
    use crate::metrics::summarize;
    use crate::record::{fixture, Record};

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

    pub(in crate::export) fn comparison_of(record: &Record) -> Comparison {
        let summary = summarize(record);
        compare(&[Input {
            dir: "fixture".into(),
            header: &record.header,
            summary: &summary,
            damage: Vec::new(),
        }])
    }

    /// The number a cell starts with and half its last digit (its rounding).
    pub(in crate::export) fn number(cell: &str) -> (f64, f64) {
        let text = cell.split_whitespace().next().unwrap();
        let decimals = text.split('.').nth(1).map(str::len).unwrap_or(0);
        let value: f64 = text
            .parse()
            .unwrap_or_else(|_| panic!("not a number: {cell:?}"));
        (value, 0.5 * 10f64.powi(-(decimals as i32)))
    }

    /// after release − baseline = retained within rounding, for every row and
    /// every `prefix` group of the header (`header` names the columns).
    pub(in crate::export) fn assert_rows_agree(
        header: &[String],
        rows: &[Vec<String>],
        groups: &[(&str, &str)],
    ) -> usize {
        let mut checked = 0;
        for (prefix, suffix) in groups {
            let at = |name: &str| {
                let wanted = format!("{prefix}{name}{suffix}");
                header
                    .iter()
                    .position(|h| *h == wanted)
                    .unwrap_or_else(|| panic!("no column {wanted:?} in {header:?}"))
            };
            let (b, a, r) = (at("baseline"), at("after release"), at("retained"));
            for row in rows {
                let (baseline, eb) = number(&row[b]);
                let (after, ea) = number(&row[a]);
                let (retained, er) = number(&row[r]);
                assert!(
                    (after - baseline - retained).abs() <= eb + ea + er + 1e-9,
                    "{prefix}: {after} − {baseline} ≠ {retained} in {row:?}"
                );
                checked += 1;
            }
        }
        checked
    }

    fn markdown_table(md: &str) -> (Vec<String>, Vec<Vec<String>>) {
        let split = |l: &str| -> Vec<String> {
            l.trim_matches('|')
                .split(" | ")
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect()
        };
        let mut lines = md.lines().filter(|l| l.starts_with("| "));
        let header = split(lines.next().unwrap());
        (header, lines.map(split).collect())
    }

    #[test]
    fn markdown_rows_agree_with_themselves_on_cpu_and_cuda() {
        let cpu = markdown(&comparison_of(&fixture::record()));
        let (header, rows) = markdown_table(&cpu);
        assert_eq!(rows.len(), 2);
        assert_eq!(
            assert_rows_agree(&header, &rows, &[("RSS ", " MiB")]),
            2,
            "{cpu}"
        );
        // drop's median run retains 60 MiB (both runs end at 60): no range.
        assert_eq!(
            rows[0][header.iter().position(|h| h == "RSS retained MiB").unwrap()],
            "60.0"
        );

        let cuda = markdown(&comparison_of(&fixture::cuda_record()));
        let (header, rows) = markdown_table(&cuda);
        assert_eq!(rows.len(), 3);
        assert_rows_agree(&header, &rows, &[("VRAM ", " MiB")]);
        let column = |name: &str| header.iter().position(|h| h == name).unwrap();
        let of = |strategy: &str, name: &str| {
            rows.iter().find(|r| r[0] == strategy).unwrap()[column(name)].clone()
        };
        // The VRAM story leads; host RSS follows.
        assert!(
            column("VRAM baseline MiB") < column("RSS retained MiB"),
            "{header:?}"
        );
        assert_eq!(of("drop", "VRAM retained MiB"), "416");
        assert_eq!(of("sync", "VRAM after release MiB"), "678");
        assert_eq!(of("context-release", "VRAM after release MiB"), "0.00");
        assert_eq!(of("context-release", "VRAM retained MiB"), "-678");
        assert_eq!(of("context-release", "VRAM floor MiB"), "586");
        assert_eq!(of("drop", "VRAM released"), "0.0 %");
        assert_eq!(of("sync", "VRAM released"), "100.0 %");
        assert_eq!(of("drop", "RSS retained MiB"), "1.00");
        assert!(
            cuda.contains("Floor = VRAM of a bare CUDA device"),
            "{cuda}"
        );
    }

    #[test]
    fn the_retained_range_over_runs_follows_the_median_run() {
        let mut record = fixture::record();
        // Three drop runs ending at 60, 2 and 30 MiB: the median run retains 30.
        record.runs.push(fixture::run(5, "drop", 3, &[2, 2, 30]));
        record.runs[2] = fixture::run(3, "drop", 2, &[2, 2, 2]);
        let md = markdown(&comparison_of(&record));
        let (header, rows) = markdown_table(&md);
        let retained = header.iter().position(|h| h == "RSS retained MiB").unwrap();
        assert_eq!(rows[0][retained], "30.0 (2.00–60.0)", "{md}");
        assert_rows_agree(&header, &rows, &[("RSS ", " MiB")]);
    }

    #[test]
    fn the_compact_console_table_fits_100_columns_and_wide_has_every_column() {
        for record in [fixture::record(), fixture::cuda_record()] {
            let c = comparison_of(&record);
            let compact = plain(&c);
            for line in compact.lines() {
                assert!(
                    line.chars().count() <= COMPACT_MAX_CHARS,
                    "{}: {line}",
                    line.len()
                );
            }
            let wide = plain_as(&c, Layout::Wide);
            let columns = columns(Layout::Wide, &c.resources, true, true);
            // Strategy, runs, 13 host metrics (+ 14 device ones), 6 time and check columns.
            let device = usize::from(c.lead.is_device());
            assert_eq!(columns.len(), 2 + 13 + device * 14 + 6);
            let header = wide.lines().find(|l| l.starts_with("strategy")).unwrap();
            for name in [
                "after unload",
                "loaded",
                "peak",
                "growth/cycle",
                "latency ms",
                "t50 ms",
                "t90 ms",
                "load ms",
                "release ms",
                "vs ref",
                "checks",
            ] {
                assert!(header.contains(name), "no {name} in {header}");
            }
            assert!(
                wide.lines()
                    .any(|l| l.starts_with("host RSS") || l.contains("  host RSS")),
                "{wide}"
            );
        }
    }

    #[test]
    fn the_compact_table_drops_its_ranges_rather_than_overflow() {
        // Two sources (labels grow by " (A)") and context-release runs that
        // end apart (-678 and -600 MiB): with its range the table is too wide.
        let mut record = fixture::cuda_record();
        let last = record.runs.len() - 1;
        let meta = record.runs[last].meta.clone();
        record.runs[last] = fixture::with_vram(
            fixture::run(meta.run, &meta.strategy, meta.repetition, &[1, 1, 1]),
            678,
            1094,
            &[-678, -678, -600],
            586,
        );
        let summary = summarize(&record);
        let input = |dir: &str| Input {
            dir: dir.into(),
            header: &record.header,
            summary: &summary,
            damage: Vec::new(),
        };
        let c = compare(&[input("a"), input("b")]);
        let compact = plain(&c);
        assert!(
            compact
                .lines()
                .all(|l| l.chars().count() <= COMPACT_MAX_CHARS),
            "{compact}"
        );
        assert!(
            compact.contains("ranges left out to fit 100 columns"),
            "{compact}"
        );
        assert!(!compact.contains("(-678–-600)"), "{compact}");
        let wide = plain_as(&c, Layout::Wide);
        assert!(wide.contains("-678 (-678–-600)"), "{wide}");
    }

    #[test]
    fn a_resource_not_measured_says_why_instead_of_a_zero() {
        let mut record = fixture::cuda_record();
        for run in &mut record.runs {
            for e in &mut run.events {
                e.edge.memory.vram_bytes = None;
            }
            for s in &mut run.samples {
                s.vram_bytes = None;
            }
            run.meta.error = Some("nvml: library not found".into());
        }
        let c = comparison_of(&record);
        let text = plain_as(&c, Layout::Wide);
        assert!(
            text.contains("note: VRAM not measured: nvml: library not found (cuda:0: drop, sync, context-release)"),
            "{text}"
        );
        let md = markdown(&c);
        let (header, rows) = markdown_table(&md);
        for (i, h) in header
            .iter()
            .enumerate()
            .filter(|(_, h)| h.starts_with("VRAM"))
        {
            assert!(rows.iter().all(|r| r[i] == "–"), "{h}: {md}");
        }
    }
}
