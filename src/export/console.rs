//! The console of `memrel run`, `exec` and `attach`, one screen by default:
//! the table (one row per strategy with the columns of `table`, the lead
//! resource first: VRAM on CUDA), one line per resource saying what each
//! strategy does with it, and the notes, each once (see `glance`). A
//! program without phase markers gets its one-phase table instead of a
//! table of dashes.
//!
//! `--verbose` adds each resource's verdict per run ("retains in k of n
//! runs" with the retained spread, see `table::retention`), its retained
//! after every cycle, and every note in full.
//!
//! Compact by default (fits 100 columns); `--wide` shows every column. The
//! aggregation is the one of every table (see `table`): memory at the last
//! cycle of the median run, so a row agrees with itself.
//!
//! Formats a [`Summary`]; computes nothing.

use crate::metrics::ResourceFacts;
use std::fmt::Write;

use super::glance::{self, Notes};
use super::table::{
    caption, console_lines, not_measured_notes, sig, too_few_runs_note, verdict_heading,
    verdict_lines, Layout, Line, COMPACT_MAX_CHARS,
};
use crate::metrics::{Resource, Summary};
use crate::textutil::MIB;

/// Cycles shown at each end of the retained-by-cycle line.
const CYCLES_SHOWN: usize = 10;

/// What a console shows: the table's layout, and whether each run's
/// verdict, the retained per cycle and every note follow (`--verbose`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    pub layout: Layout,
    pub verbose: bool,
}

impl View {
    /// The default console: the compact table and the answer at a glance.
    pub const DEFAULT: View = View {
        layout: Layout::Compact,
        verbose: false,
    };

    /// As `--wide` and `--verbose` ask.
    pub fn console(wide: bool, verbose: bool) -> View {
        View {
            layout: Layout::console(wide),
            verbose,
        }
    }

    /// At most this many notes (`None`: every one).
    pub fn notes_shown(self) -> Option<usize> {
        (!self.verbose).then_some(glance::NOTES_SHOWN)
    }
}

/// The default console (the compact table and the answer at a glance).
pub fn summary_table(summary: &Summary) -> String {
    summary_table_as(summary, View::DEFAULT)
}

/// The console of a run in `view`: the table (none where no strategy has a
/// cycle: a program without phase markers gets its one-phase table
/// instead), one line per resource, the notes; `--verbose` adds each run's
/// verdict and the retained per cycle.
pub fn summary_table_as(summary: &Summary, view: View) -> String {
    let layout = view.layout;
    let resources = summary.shown();
    let lines: Vec<Line> = summary
        .strategies
        .iter()
        .map(|s| Line {
            label: if s.incomplete {
                format!("{} ⚠", s.strategy)
            } else {
                s.strategy.clone()
            },
            summary: s,
            relative: None,
            machine: None,
        })
        .collect();
    let mut out = String::new();
    let _ = writeln!(
        out,
        "memrel run: {} on {}",
        summary.scenario, summary.device
    );
    let cycles = summary.strategies.iter().any(|s| s.cycles_total > 0);
    if cycles {
        let (table, fit) = console_lines(layout, &resources, &lines, false);
        for line in caption(layout, fit).iter().chain(&table) {
            let _ = writeln!(out, "{line}");
        }
    }
    let answers = glance::answers(&resources, &lines, summary.retention_threshold_bytes);
    if !answers.is_empty() {
        out.push('\n');
    }
    for line in answers {
        let _ = writeln!(out, "{line}");
    }
    let why = super::why::lines(summary);
    if !why.is_empty() {
        out.push('\n');
    }
    for line in why {
        let _ = writeln!(out, "{line}");
    }
    if view.verbose {
        out.push_str(&per_run_and_cycle(summary, &resources, &lines));
    }
    out.push_str(&whole_runs(summary));
    let mut notes = Notes::default();
    if cycles {
        if let Some(few) = too_few_runs_note(&lines) {
            notes.add(few, "");
        }
    }
    for n in not_measured_notes(&resources, &lines) {
        notes.add(n, "");
    }
    for r in &summary.runs {
        let said = [&r.error, &r.envelope, &r.baseline_note, &r.unmarked];
        for text in said.into_iter().flatten() {
            notes.add(text.clone(), format!("run {} ({})", r.run, r.strategy));
        }
    }
    let first = first_loads(summary);
    if !view.verbose && !first.is_empty() {
        notes.add(FIRST_LOAD_NOTE, first_load_whom(&first));
    }
    let notes = notes.lines(view.notes_shown());
    if !notes.is_empty() {
        out.push('\n');
    }
    for n in notes {
        let _ = writeln!(out, "{n}");
    }
    if view.verbose && !first.is_empty() {
        let _ = writeln!(out, "\n{FIRST_LOAD_NOTE}:");
        for f in &first {
            let _ = writeln!(out, "  {}, {}: {}", f.resource, f.strategy, f.numbers);
        }
    }
    out
}

/// `--verbose`: each resource's verdict per run, then its retained after
/// each cycle (median over runs).
fn per_run_and_cycle(summary: &Summary, resources: &[Resource], lines: &[Line]) -> String {
    let mut out = String::new();
    for &r in resources {
        let verdicts = verdict_lines(lines, r);
        if verdicts.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "\n{}",
            verdict_heading(r, summary.retention_threshold_bytes)
        );
        for v in verdicts {
            let _ = writeln!(out, "{v}");
        }
    }
    let name_width = summary
        .strategies
        .iter()
        .map(|s| s.strategy.chars().count())
        .max()
        .unwrap_or(0);
    for &r in resources {
        let measured: Vec<_> = summary
            .strategies
            .iter()
            .filter_map(|s| s.resource(r).map(|m| (s, m)))
            .filter(|(_, m)| m.not_measured.is_none() && !m.retained_by_cycle.is_empty())
            .collect();
        if measured.is_empty() {
            continue;
        }
        let heading = format!("{} retained MiB after each cycle", r.label());
        let legend = format!(
            "(median over runs; retaining = above {:.0} MiB):",
            summary.retention_threshold_bytes as f64 / MIB
        );
        // On two lines where one would pass 100 characters (the container's long name).
        let gap = if heading.chars().count() + 1 + legend.chars().count() <= COMPACT_MAX_CHARS {
            " "
        } else {
            "\n"
        };
        let _ = writeln!(out, "\n{heading}{gap}{legend}");
        for (s, m) in measured {
            let cell = |c: &crate::metrics::memory::CycleSpread| {
                format!("{:>7}", sig(c.spread.median / MIB))
            };
            let all = &m.retained_by_cycle;
            // A soak has thousands of cycles: the first and the last ten
            // (summary.json and compare.csv have every one).
            let cycles: Vec<String> = if all.len() <= 2 * CYCLES_SHOWN + 1 {
                all.iter().map(cell).collect()
            } else {
                all[..CYCLES_SHOWN]
                    .iter()
                    .map(cell)
                    .chain(std::iter::once(format!(
                        "  … {} cycles …",
                        all.len() - 2 * CYCLES_SHOWN
                    )))
                    .chain(all[all.len() - CYCLES_SHOWN..].iter().map(cell))
                    .collect()
            };
            let _ = writeln!(out, "  {:<name_width$}  {}", s.strategy, cycles.join(" "));
        }
    }
    out
}

/// The runs measured as one phase (no cycle marked): per run and resource,
/// baseline (first sample, or the implied one), peak, end of run, held and
/// the kernel's peak; empty when every run had cycles.
fn whole_runs(summary: &Summary) -> String {
    use crate::export::markdown::{Align, Table};
    use crate::metrics::catalogue::MemoryMetric as M;
    // A strategy with cycles is in the table; its runs that have none
    // (one that failed early) are in the notes.
    let no_cycles = |strategy: &str| {
        summary
            .strategies
            .iter()
            .any(|s| s.strategy == strategy && s.cycles_total == 0)
    };
    let one_phase: Vec<_> = summary
        .runs
        .iter()
        .filter(|r| {
            no_cycles(&r.strategy)
                && r.resources
                    .iter()
                    .any(|m| m.end_bytes.is_some() && m.not_measured.is_none())
        })
        .collect();
    if one_phase.is_empty() {
        return String::new();
    }
    let mib = |v: Option<f64>| v.map_or_else(|| "–".to_string(), |b| format!("{:.1}", b / MIB));
    let header = |m: M| format!("{} {}", m.info().header, m.unit().suffix());
    let mut table = Table::columns(
        [
            ("run".to_string(), Align::Left),
            ("strategy".to_string(), Align::Left),
            ("memory".to_string(), Align::Left),
        ]
        .into_iter()
        .chain(
            [M::Baseline, M::Peak, M::EndOfRun, M::Held]
                .into_iter()
                .map(|m| (header(m), Align::Right)),
        )
        .chain(std::iter::once(("VmHWM MiB".to_string(), Align::Right))),
    );
    for r in &one_phase {
        let shown = r.resources.iter().filter(|m| m.not_measured.is_none());
        for m in shown {
            table.row([
                r.run.to_string(),
                r.strategy.clone(),
                m.resource.label(),
                mib(m.baseline_bytes.map(|v| v as f64)),
                mib(m.peak_bytes.map(|v| v as f64)),
                mib(m.end_bytes.map(|v| v as f64)),
                mib(m.held_bytes.map(|v| v as f64)),
                if m.resource.is_device() {
                    "".to_string()
                } else {
                    mib(r.vm_hwm_bytes.map(|v| v as f64))
                },
            ]);
        }
    }
    // What marking phases would add is the run's `unmarked` note.
    let mut out =
        String::from("\nmeasured as one phase (no cycle marked; held = end of run − baseline):\n");
    for line in table.aligned_lines() {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// What the first-load note says, once for every strategy and resource.
const FIRST_LOAD_NOTE: &str = "retained mostly at the first load (imports, caches, a pool reused \
     later), not retention that repeats; a warm-up before memrel.baseline() leaves it out";

/// "host RSS: offload, reload; VRAM cuda:0: drop": the resources and
/// strategies of `first`, in its order.
fn first_load_whom(first: &[FirstLoadOf]) -> String {
    let mut by_resource: Vec<(&str, Vec<&str>)> = Vec::new();
    for f in first {
        match by_resource.iter_mut().find(|(r, _)| *r == f.resource) {
            Some((_, who)) => who.push(&f.strategy),
            None => by_resource.push((&f.resource, vec![&f.strategy])),
        }
    }
    by_resource
        .iter()
        .map(|(r, who)| format!("{r}: {}", who.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// A strategy and resource whose retention is mostly its first cycle's.
struct FirstLoadOf {
    resource: String,
    strategy: String,
    /// "cycle 1 retained …, cycles 2–5 … per cycle".
    numbers: String,
}

/// Each strategy and resource whose retention is mostly its first cycle's
/// (a one-time cost of the first load, not retention that repeats).
fn first_loads(summary: &Summary) -> Vec<FirstLoadOf> {
    let mut out = Vec::new();
    for s in &summary.strategies {
        // The page cache is filled by the first load and kept by design: no
        // one-time cost to explain there.
        let shown = s
            .resources
            .iter()
            .filter(|m| m.not_measured.is_none() && !m.resource.look().cache);
        for m in shown {
            let Some(first) = crate::metrics::FirstLoad::of(&m.retained_by_cycle) else {
                continue;
            };
            if !first.is_most_of_it(summary.retention_threshold_bytes) {
                continue;
            }
            out.push(FirstLoadOf {
                resource: m.resource.label(),
                strategy: s.strategy.clone(),
                numbers: format!(
                    "cycle 1 retained {:.1} MiB, cycles 2–{} {:+.1} MiB per cycle",
                    first.first_bytes / MIB,
                    first.cycles,
                    first.steady_bytes_per_cycle / MIB
                ),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::super::table::tests::assert_rows_agree;
    use super::super::table::COMPACT_MAX_CHARS;
    use super::*;
    use crate::metrics::summarize;
    use crate::record::fixture;

    /// The header and rows of the table in a console text: cells are apart by
    /// two spaces or more, and never hold two spaces themselves.
    fn parse(text: &str) -> (Vec<String>, Vec<Vec<String>>) {
        let split = |l: &str| -> Vec<String> {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(|c| c.trim_end_matches(" ⚠").to_string())
                .collect()
        };
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("strategy"))
            .unwrap();
        let header = split(lines[at]);
        let rows = lines[at + 2..]
            .iter()
            .take_while(|l| !l.is_empty())
            .map(|l| split(l))
            .collect();
        (header, rows)
    }

    #[test]
    fn the_compact_table_fits_100_columns_on_cpu_and_cuda() {
        for record in [fixture::record(), fixture::cuda_record()] {
            let text = summary_table(&summarize(&record));
            // A note stays on one line (a path in it stays whole for grep).
            for line in text.lines().filter(|l| !l.starts_with("note: ")) {
                assert!(
                    line.chars().count() <= COMPACT_MAX_CHARS,
                    "{} chars: {line}\n{text}",
                    line.chars().count()
                );
            }
            let (header, rows) = parse(&text);
            assert_eq!(
                header,
                [
                    "strategy",
                    "runs",
                    "baseline",
                    "after release",
                    "retained",
                    "released",
                    "retaining"
                ]
                .into_iter()
                .chain(if record.header.device == "cpu" {
                    vec![]
                } else {
                    vec!["retained"]
                })
                .chain(["checks"])
                .collect::<Vec<_>>()
            );
            assert_eq!(rows.len(), record.runs.len() / 2);
            assert!(rows.iter().all(|r| r.len() == header.len()), "{text}");
        }
    }

    #[test]
    fn rows_agree_with_themselves_compact_and_wide() {
        // Regression: `drop` read baseline 4.9, after release 340.4, retained
        // 424.7 MiB: after release was a median over cycles, retained the last cycle's.
        let mut record = fixture::record();
        // Drop's runs end at 60 and 40 MiB: a median over runs (or cycles)
        // of after release is not the median run's.
        record.runs[0] = fixture::run(1, "drop", 1, &[90, 30, 60]);
        record.runs[2] = fixture::run(3, "drop", 2, &[2, 2, 40]);
        for record in [record, fixture::cuda_record()] {
            let summary = summarize(&record);
            let (header, rows) = parse(&summary_table(&summary));
            assert_eq!(assert_rows_agree(&header, &rows, &[("", "")]), rows.len());
            let wide = summary_table_as(&summary, View::console(true, true));
            let (header, rows) = parse(&wide);
            // The wide header repeats the names per resource, lead first: check each group.
            let groups = header.iter().filter(|h| *h == "baseline").count();
            assert_eq!(groups, summary.resources.len(), "{wide}");
            let starts: Vec<usize> = header
                .iter()
                .enumerate()
                .filter(|(_, h)| *h == "baseline")
                .map(|(i, _)| i)
                .collect();
            for (n, &start) in starts.iter().enumerate() {
                let end = starts.get(n + 1).copied().unwrap_or(header.len());
                let sub = |r: &Vec<String>| r[start..end].to_vec();
                assert_eq!(
                    assert_rows_agree(
                        &sub(&header),
                        &rows.iter().map(sub).collect::<Vec<_>>(),
                        &[("", "")]
                    ),
                    rows.len()
                );
            }
        }
    }

    #[test]
    fn on_cuda_vram_leads_and_each_resource_has_its_cycles() {
        let summary = summarize(&fixture::cuda_record());
        let text = summary_table(&summary);
        let lines: Vec<&str> = text.lines().collect();
        let header = lines
            .iter()
            .position(|l| l.starts_with("strategy"))
            .unwrap();
        let group_line = lines[header - 1];
        let vram = group_line.find("VRAM cuda:0").unwrap();
        let host = group_line.find("host RSS").unwrap();
        assert!(vram < host, "{text}");
        let (header, rows) = parse(&text);
        let drop = rows.iter().find(|r| r[0] == "drop").unwrap();
        let at = |name: &str| header.iter().position(|h| h == name).unwrap();
        assert_eq!(drop[at("baseline")], "678");
        assert_eq!(drop[at("after release")], "1094");
        assert_eq!(drop[at("retained")], "416");
        assert_eq!(drop[at("released")], "0.0 %");
        // The cycles are --verbose's; the default has one line per resource.
        assert!(!text.contains("after each cycle"), "{text}");
        assert!(
            text.contains("\nVRAM cuda:0: drop retains 416 MiB in 2 of 2 runs;\n"),
            "{text}"
        );
        let text = summary_table_as(&summary, View::console(false, true));
        assert!(
            text.contains("VRAM cuda:0 retained MiB after each cycle"),
            "{text}"
        );
        assert!(
            text.contains("host RSS retained MiB after each cycle"),
            "{text}"
        );
        assert!(
            text.contains("  context-release     -678    -678    -678"),
            "{text}"
        );
    }

    #[test]
    fn wide_has_every_column() {
        let summary = summarize(&fixture::cuda_record());
        let wide = summary_table_as(&summary, View::console(true, true));
        let (header, rows) = parse(&wide);
        for name in [
            "baseline",
            "floor",
            "peak",
            "loaded",
            "after unload",
            "after release",
            "retained",
            "released",
            "growth/cycle",
            "latency ms",
            "t50 ms",
            "t90 ms",
            "settle ms",
            "late",
            "retaining",
            "processes",
            "load ms",
            "forward ms",
            "release ms",
            "ready ms",
            "checks",
        ] {
            assert!(header.iter().any(|h| h == name), "no {name}: {wide}");
        }
        // Two resources: 16 VRAM and 15 host columns, strategy, runs, 4 times, checks.
        assert_eq!(header.len(), 2 + 16 + 15 + 5, "{header:?}");
        let drop = rows.iter().find(|r| r[0] == "drop").unwrap();
        assert_eq!(
            drop[header.iter().position(|h| h == "floor").unwrap()],
            "586"
        );
    }

    /// The run console table as people see it, compact and `--wide` (pinned
    /// before the table writer moved to `markdown`: the bytes must not move).
    #[test]
    fn the_run_console_table_as_it_reads() {
        let cpu = summarize(&fixture::record());
        insta::assert_snapshot!(summary_table(&cpu), @r#"
memrel run: fixture on cpu
memory in MiB, at the last cycle of each strategy's median run; (min–max) over runs
--wide shows every column, --verbose each run and cycle
                   host RSS
strategy     runs  baseline  after release  retained  released  retaining  checks
---------------------------------------------------------------------------------
drop          2/2      10.0           70.0      60.0    40.0 %        3/6      ok
malloc-trim   2/2      10.0           11.0      1.00    99.0 %        0/6      ok

host RSS: drop retains 60.0 MiB in 2 of 2 runs; malloc-trim gives back 99.0 % in 2 of 2 runs

note: too few runs to conclude: 2 completed runs of a strategy; retention varies by run (--repeat 5)
"#);
        let cuda = summarize(&fixture::cuda_record());
        insta::assert_snapshot!(summary_table(&cuda), @r#"
memrel run: cuda-fixture on cuda:0
memory in MiB, at the last cycle of each strategy's median run; (min–max) over runs
--wide shows every column, --verbose each run and cycle
                       VRAM cuda:0                                             host RSS
strategy         runs  baseline  after release  retained  released  retaining  retained  checks
-----------------------------------------------------------------------------------------------
drop              2/2       678           1094       416     0.0 %        6/6      1.00      ok
sync              2/2       678            678      0.00   100.0 %        0/6      1.00      ok
context-release   2/2       678           0.00      -678   263.0 %        0/6      1.00      ok

VRAM cuda:0: drop retains 416 MiB in 2 of 2 runs;
             sync and context-release give back 100.0–263.0 % in 2 of 2 runs
host RSS: drop, sync and context-release give back 99.0 % in 2 of 2 runs

note: too few runs to conclude: 2 completed runs of a strategy; retention varies by run (--repeat 5)
note: retained mostly at the first load (imports, caches, a pool reused later), not retention that repeats; a warm-up before memrel.baseline() leaves it out (VRAM cuda:0: drop)
"#);
        insta::assert_snapshot!(summary_table_as(&cuda, View::console(true, true)), @r#"
memrel run: cuda-fixture on cuda:0
memory in MiB, at the last cycle of each strategy's median run; (min–max) over runs
growth: median over runs; latency, t50, t90, settle, late, times: median (min–max) over every cycle
                       VRAM cuda:0                                                                                                                                                      host RSS
strategy         runs  baseline  floor  peak  loaded  after unload  after release  retained  released  growth/cycle  latency ms  t50 ms  t90 ms  settle ms  late  retaining  processes  baseline  peak  loaded  after unload  after release  retained  released  growth/cycle  latency ms  t50 ms  t90 ms  settle ms  late  retaining  processes  load ms  forward ms  release ms  ready ms  checks
---------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------------
drop              2/2       678    586  1094    1094          1094           1094       416     0.0 %          0.00           –       –       –       0.00  0.00        6/6        2/2      10.0   110     110          11.0           11.0      1.00    99.0 %          0.00        0.00     100     100       0.00  0.00        0/6        0/2      300           –         300       600      ok
sync              2/2       678    586  1094    1094           678            678      0.00   100.0 %          0.00        0.00     100     100       0.00  0.00        0/6        0/2      10.0   110     110          11.0           11.0      1.00    99.0 %          0.00        0.00     100     100       0.00  0.00        0/6        0/2      300           –         300       600      ok
context-release   2/2       678    586  1094    1094          0.00           0.00      -678   263.0 %          0.00        0.00     100     100       0.00  0.00        0/6        0/2      10.0   110     110          11.0           11.0      1.00    99.0 %          0.00        0.00     100     100       0.00  0.00        0/6        0/2      300           –         300       600      ok

VRAM cuda:0: drop retains 416 MiB in 2 of 2 runs;
             sync and context-release give back 100.0–263.0 % in 2 of 2 runs
host RSS: drop, sync and context-release give back 99.0 % in 2 of 2 runs

VRAM cuda:0 per run (retaining = a cycle above 16 MiB; retained: last cycle, median (min–max)):
  drop             retains in 2 of 2 runs    retained 416 MiB
  sync             gives back in all 2 runs  retained 0.00 MiB
  context-release  gives back in all 2 runs  retained -678 MiB

host RSS per run (retaining = a cycle above 16 MiB; retained: last cycle, median (min–max)):
  drop             gives back in all 2 runs  retained 1.00 MiB
  sync             gives back in all 2 runs  retained 1.00 MiB
  context-release  gives back in all 2 runs  retained 1.00 MiB

VRAM cuda:0 retained MiB after each cycle (median over runs; retaining = above 16 MiB):
  drop                 416     416     416
  sync                0.00    0.00    0.00
  context-release     -678    -678    -678

host RSS retained MiB after each cycle (median over runs; retaining = above 16 MiB):
  drop                1.00    1.00    1.00
  sync                1.00    1.00    1.00
  context-release     1.00    1.00    1.00

note: too few runs to conclude: 2 completed runs of a strategy; retention varies by run (--repeat 5)

retained mostly at the first load (imports, caches, a pool reused later), not retention that repeats; a warm-up before memrel.baseline() leaves it out:
  VRAM cuda:0, drop: cycle 1 retained 416.0 MiB, cycles 2–3 +0.0 MiB per cycle
"#);
    }

    /// Four strategies, five runs each, on CUDA with a page cache that
    /// stays full: VRAM, host memory and the page cache.
    fn four_strategies() -> crate::record::Record {
        use crate::record::{PageCacheInfo, Record};
        const MIB: u64 = 1024 * 1024;
        let mut header = fixture::header("four-strategies", 5);
        header.device = "cuda:0".into();
        header.page_cache = Some(PageCacheInfo {
            method: "mincore".into(),
            files: Vec::new(),
            evicted_before_runs: false,
            warmed_before_runs: false,
        });
        let plans: [(&str, i64); 4] = [
            ("drop", 416),
            ("cache-flush", 0),
            ("context-release", -678),
            ("device-drop", -68),
        ];
        let mut runs = Vec::new();
        for rep in 1..=5 {
            for (strategy, kept) in plans {
                let n = runs.len() as u32 + 1;
                let host = if strategy == "drop" && rep < 5 {
                    [2, 40, 40, 40, 40]
                } else {
                    [2, 2, 2, 2, 2]
                };
                let mut run = fixture::with_vram(
                    fixture::run(n, strategy, rep, &host),
                    678,
                    1094,
                    &[kept; 5],
                    586,
                );
                for e in &mut run.events {
                    e.readings.set(Resource::PageCache, 415 * MIB);
                }
                for s in &mut run.samples {
                    s.readings.set(Resource::PageCache, 415 * MIB);
                }
                runs.push(run);
            }
        }
        Record { header, runs }
    }

    /// The default console of four strategies and three resources, with the
    /// advice and where the results went, fits one screen of 25 lines.
    #[test]
    fn four_strategies_fit_one_screen() {
        let summary = summarize(&four_strategies());
        let console = summary_table(&summary);
        let advice = crate::export::advice::text(&crate::metrics::advice::advise(&[&summary]));
        // Lines as a 100-column terminal shows them (a long note takes two);
        // `output::finish_run` adds a blank line and the advice, a blank
        // line and `results: DIR`.
        let screen = |t: &str| {
            t.lines()
                .map(|l| l.chars().count().max(1).div_ceil(COMPACT_MAX_CHARS))
                .sum::<usize>()
        };
        let lines = screen(&console) + 1 + screen(&advice) + 2;
        assert!(lines <= 25, "{lines} lines:\n{console}\n{advice}");
        assert!(
            console.contains(
                "\npage cache: 415 MiB stay cached from start to end; no strategy frees them\n"
            ),
            "{console}"
        );
        assert!(!console.contains("after each cycle"), "{console}");
        assert!(!console.contains("per run ("), "{console}");
        insta::assert_snapshot!(console, @r#"
memrel run: four-strategies on cuda:0
memory in MiB, at the last cycle of each strategy's median run; (min–max) over runs
ranges and after release (= baseline + retained) left out to fit 100 columns (--wide)
                       VRAM cuda:0                              host RSS  page cache
strategy         runs  baseline  retained  released  retaining  retained  after unload  checks
----------------------------------------------------------------------------------------------
drop              5/5       678       416     0.0 %      25/25      40.0           415      ok
cache-flush       5/5       678      0.00   100.0 %       0/25      2.00           415      ok
context-release   5/5       678      -678   263.0 %       0/25      2.00           415      ok
device-drop       5/5       678     -68.0   116.3 %       0/25      2.00           415      ok

VRAM cuda:0: drop retains 416 MiB in 5 of 5 runs;
             cache-flush, context-release and device-drop give back 100.0–263.0 % in 5 of 5 runs
host RSS: drop retains 40.0 MiB in 4 of 5 runs;
          cache-flush, context-release and device-drop give back 98.0 % in 5 of 5 runs
page cache: 415 MiB stay cached from start to end; no strategy frees them

note: retained mostly at the first load (imports, caches, a pool reused later), not retention that repeats; a warm-up before memrel.baseline() leaves it out (VRAM cuda:0: drop)
"#);
        let verbose = summary_table_as(&summary, View::console(false, true));
        assert!(
            verbose.contains("host RSS retained MiB after each cycle"),
            "{verbose}"
        );
        assert!(verbose.contains("host RSS per run ("), "{verbose}");
    }

    /// A program without phase markers (`exec`, `attach` of an unmarked
    /// program): its one-phase table, no table of dashes, the hint once.
    #[test]
    fn an_unmarked_program_gets_its_one_phase_table_only() {
        let mut record = fixture::record();
        record.header.scenario = "exec".into();
        record.runs.truncate(1);
        record.runs[0].events.clear();
        let summary = summarize(&record);
        let console = summary_table(&summary);
        assert!(!console.contains("strategy     runs"), "{console}");
        assert!(!console.contains(" – "), "{console}");
        insta::assert_snapshot!(console, @r#"
memrel run: exec on cpu

measured as one phase (no cycle marked; held = end of run − baseline):
run  strategy  memory    baseline MiB  peak MiB  end of run MiB  held MiB  VmHWM MiB
------------------------------------------------------------------------------------
1    drop      host RSS          10.0     110.0            70.0      60.0      120.0

note: the program marked no phases, so the run is one phase: baseline (the first reading after the program's exec, or after memrel attached), peak, end of run and held (end − baseline) are measured; loaded, retained, released and the release times need markers (import memrel; with memrel.phase("load"): …; memrel.release(): docs/guide.md, Phase markers) (run 1 (drop))
"#);
        let verbose = summary_table_as(&summary, View::console(false, true));
        assert!(
            verbose.contains("note: the program marked no phases"),
            "{verbose}"
        );
    }

    /// `attach` to a log-marked server: one run with cycles; no one-phase
    /// table, the baseline note once.
    #[test]
    fn an_attached_program_with_cycles_has_no_one_phase_table() {
        let mut record = fixture::record();
        record.header.scenario = "attach".into();
        record.runs.truncate(1);
        let summary = summarize(&record);
        let console = summary_table(&summary);
        assert!(!console.contains("measured as one phase"), "{console}");
        insta::assert_snapshot!(console, @r#"
memrel run: attach on cpu
memory in MiB, at the last cycle of each strategy's median run; (min–max) over runs
--wide shows every column, --verbose each run and cycle
                host RSS
strategy  runs  baseline  after release  retained  released  retaining  checks
------------------------------------------------------------------------------
drop       1/1      10.0           70.0      60.0    40.0 %        2/3      ok

host RSS: drop retains 60.0 MiB in its one run

note: too few runs to conclude: 1 completed run of a strategy; retention varies by run (--repeat 5)
"#);
    }
}
