//! `timeline.png`: one panel per strategy (its representative run, the one
//! whose retained value is the median):
//! RssAnon and RssFile stacked, total RSS as a line, VRAM when there is any,
//! every phase shaded, cycles numbered and the first cycle's phases labelled
//! (labels that would overlap are left out), the baseline dashed, on a real
//! time axis in seconds. The legend sits in a strip beside each panel, never
//! over the data.
//!
//! Draws only: every sample goes through min/max decimation, so a run of a
//! million samples costs no more to draw than one of a few thousand.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::decimate::{anon_and_rss_mib, area_to_zero, min_max_columns};
use super::palette::{lighten, phase_colour, strategy_colour};
use super::png::{
    draw_legend, non_overlapping, plot_err, write_png, Area, LegendEntry, Swatch, FONT,
    LEGEND_WIDTH,
};
use crate::metrics::Summary;
use crate::protocol::{Edge, Phase};
use crate::record::{Record, RunRecord, RunStatus};
use crate::textutil::MIB;

pub use super::png::register_font;

/// A phase's time span within a run.
#[derive(Debug, Clone, PartialEq)]
pub struct PhaseSpan {
    pub phase: Phase,
    pub cycle: u32,
    /// The model the phase worked on, if any (from its begin edge).
    pub model: Option<String>,
    pub start_s: f64,
    pub end_s: f64,
}

impl PhaseSpan {
    /// `load bert`, `release`, …
    pub fn label(&self) -> String {
        match &self.model {
            Some(m) => format!("{} {m}", self.phase.as_str()),
            None => self.phase.as_str().to_string(),
        }
    }
}

/// Phase spans from begin/end pairs; a phase cut short by a crash ends at the last sample.
pub fn phase_spans(run: &RunRecord) -> Vec<PhaseSpan> {
    let end_of_run = run.samples.last().map(|s| s.t_s).unwrap_or(0.0);
    let mut open: Vec<(Phase, u32, Option<String>, f64)> = Vec::new();
    let mut spans = Vec::new();
    for e in &run.events {
        match e.edge.edge {
            Edge::Begin => open.push((e.edge.phase, e.edge.cycle, e.edge.model.clone(), e.t_s)),
            Edge::End => {
                if let Some(pos) = open.iter().rposition(|(p, ..)| *p == e.edge.phase) {
                    let (phase, cycle, model, start_s) = open.remove(pos);
                    spans.push(PhaseSpan {
                        phase,
                        cycle,
                        model,
                        start_s,
                        end_s: e.t_s,
                    });
                }
            }
        }
    }
    for (phase, cycle, model, start_s) in open {
        spans.push(PhaseSpan {
            phase,
            cycle,
            model,
            start_s,
            end_s: end_of_run.max(start_s),
        });
    }
    spans.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    spans
}

/// The run drawn for each strategy of `summary`: its representative run (see
/// `StrategySummary::representative_run`), else its first completed run, else its first.
pub fn drawn_runs<'a>(record: &'a Record, summary: &Summary) -> Vec<&'a RunRecord> {
    summary
        .strategies
        .iter()
        .filter_map(|s| drawn_run(record, &s.strategy, s.representative_run))
        .collect()
}

/// The run drawn for one strategy (see [`drawn_runs`]).
pub fn drawn_run<'a>(
    record: &'a Record,
    strategy: &str,
    representative: Option<u32>,
) -> Option<&'a RunRecord> {
    let of = || {
        record
            .runs
            .iter()
            .filter(move |r| r.meta.strategy == strategy)
    };
    representative
        .and_then(|n| of().find(|r| r.meta.run == n))
        .or_else(|| of().find(|r| r.meta.status == RunStatus::Completed))
        .or_else(|| of().next())
}

/// The last time anything happened in a run (sample or event), at least 1 ms.
pub fn run_end_s(run: &RunRecord) -> f64 {
    run.samples
        .last()
        .map(|s| s.t_s)
        .unwrap_or(0.0)
        .max(run.events.last().map(|e| e.t_s).unwrap_or(0.0))
        .max(0.001)
}

const WIDTH: u32 = 1600;
const PANEL_HEIGHT: u32 = 420;
const HEADER_HEIGHT: u32 = 44;

/// Draws `timeline.png` for `record` at `path`, one panel per strategy of `summary`.
pub fn write_timeline(record: &Record, summary: &Summary, path: &Path) -> Result<()> {
    let runs = drawn_runs(record, summary);
    if runs.is_empty() {
        return Ok(());
    }
    let height = PANEL_HEIGHT * runs.len() as u32 + HEADER_HEIGHT;
    write_png(path, WIDTH, height, |root| {
        let (header, body) = root.split_vertically(HEADER_HEIGHT);
        header
            .draw_text(
                &format!(
                    "memrel timeline · scenario {} · device {} · {} · sampled every {:.0} ms ({})",
                    record.header.scenario,
                    record.header.device,
                    record.header.host.hostname,
                    record.header.interval_s * 1e3,
                    record.header.sampler
                ),
                &(FONT, 22).into_font().color(&BLACK),
                (16, 12),
            )
            .map_err(plot_err)?;
        let panels = body.split_evenly((runs.len(), 1));
        for (panel, run) in panels.iter().zip(runs) {
            let (plot, legend) = panel.split_horizontally(WIDTH - LEGEND_WIDTH);
            let entries = draw_run_panel(&plot, run)?;
            draw_legend(&legend, 44, &entries)?;
        }
        Ok(())
    })
}

/// Draws one run's panel and returns its legend entries.
fn draw_run_panel(area: &Area, run: &RunRecord) -> Result<Vec<LegendEntry>> {
    let colour = strategy_colour(&run.meta.strategy);
    let t_end = run_end_s(run);
    let has_vram = run.samples.iter().any(|s| s.vram_bytes.is_some());
    let top_bytes = run
        .samples
        .iter()
        .map(|s| s.rss_bytes.max(s.vram_bytes.unwrap_or(0)))
        .max()
        .unwrap_or(1) as f64;
    // Headroom above the highest sample for the two rows of labels.
    let y_max = (top_bytes / MIB * 1.16).max(1.0);
    let status = match run.meta.status {
        RunStatus::Completed => String::new(),
        RunStatus::Failed => " · FAILED".to_string(),
        RunStatus::TimedOut => " · TIMED OUT".to_string(),
    };
    let caption = format!(
        "strategy {} · run {} (repetition {}){status}",
        run.meta.strategy, run.meta.run, run.meta.repetition
    );
    let mut chart = ChartBuilder::on(area)
        .caption(caption, (FONT, 20).into_font().color(&colour))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..t_end, 0.0..y_max)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .x_desc("time since worker start (s)")
        .y_desc(if has_vram {
            "MiB (RSS; VRAM)"
        } else {
            "RSS (MiB)"
        })
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(plot_err)?;

    let mut legend = vec![LegendEntry::new(Swatch::Heading, "memory")];
    // Phases: shaded spans.
    let spans = phase_spans(run);
    let mut phase_entries = vec![LegendEntry::new(Swatch::Heading, "phases")];
    for phase in Phase::ALL {
        let Some(shade) = phase_colour(phase) else {
            continue;
        };
        let of: Vec<&PhaseSpan> = spans.iter().filter(|s| s.phase == phase).collect();
        if of.is_empty() {
            continue;
        }
        chart
            .draw_series(of.iter().map(|s| {
                Rectangle::new(
                    [(s.start_s, 0.0), (s.end_s.max(s.start_s), y_max)],
                    shade.filled(),
                )
            }))
            .map_err(plot_err)?;
        phase_entries.push(LegendEntry::new(Swatch::Fill(shade), phase.as_str()));
    }
    draw_phase_labels(&mut chart, &spans, y_max)?;

    let columns = WIDTH as usize;
    let (anon, rss) = anon_and_rss_mib(run, t_end, columns);
    // Anon filled from zero; file as the band between anon and total RSS.
    let anon_poly = area_to_zero(&anon);
    let anon_fill = lighten(colour, 0.35);
    chart
        .draw_series(std::iter::once(Polygon::new(
            anon_poly,
            anon_fill.mix(0.85).filled(),
        )))
        .map_err(plot_err)?;
    legend.push(LegendEntry::new(
        Swatch::Fill(anon_fill),
        "RssAnon (tensors, heap)",
    ));
    let mut file_poly: Vec<(f64, f64)> = rss.clone();
    file_poly.extend(anon.iter().rev().copied());
    let file_fill = lighten(colour, 0.75);
    chart
        .draw_series(std::iter::once(Polygon::new(
            file_poly,
            file_fill.mix(0.9).filled(),
        )))
        .map_err(plot_err)?;
    legend.push(LegendEntry::new(
        Swatch::Fill(file_fill),
        "RssFile (mapped files)",
    ));
    chart
        .draw_series(LineSeries::new(rss, colour.stroke_width(2)))
        .map_err(plot_err)?;
    legend.push(LegendEntry::new(Swatch::Line(colour, 2), "RSS total"));
    if has_vram {
        let vram = min_max_columns(
            run.samples
                .iter()
                .filter_map(|s| s.vram_bytes.map(|v| (s.t_s, v as f64 / MIB))),
            0.0,
            t_end,
            columns,
        );
        let dark = RGBColor(20, 20, 20);
        chart
            .draw_series(DashedLineSeries::new(vram, 6, 4, dark.stroke_width(2)))
            .map_err(plot_err)?;
        legend.push(LegendEntry::new(
            Swatch::Dashed(dark, 2),
            "VRAM (this process)",
        ));
    }
    // The baseline, dashed, from the worker's own reading before the first load.
    if let Some(base) = run
        .events
        .iter()
        .find(|e| e.edge.phase == Phase::Baseline && e.edge.edge == Edge::End)
    {
        let y = base.edge.memory.rss_bytes as f64 / MIB;
        let grey = RGBColor(60, 60, 60);
        chart
            .draw_series(DashedLineSeries::new(
                vec![(0.0, y), (t_end, y)],
                8,
                6,
                grey.stroke_width(1),
            ))
            .map_err(plot_err)?;
        legend.push(LegendEntry::new(
            Swatch::Dashed(grey, 1),
            format!("baseline {y:.1} MiB"),
        ));
    }
    legend.extend(phase_entries);
    Ok(legend)
}

/// Cycle numbers on the top row, the first cycle's phase names on the second;
/// a label that would run into the one before it is left out.
fn draw_phase_labels<DB: DrawingBackend>(
    chart: &mut ChartContext<
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    spans: &[PhaseSpan],
    y_max: f64,
) -> Result<()> {
    let font = (FONT, 13).into_font().color(&RGBColor(70, 70, 70));
    let px = |t: f64| chart.backend_coord(&(t, 0.0)).0;
    let mut cycles: Vec<(i32, String, f64)> = Vec::new();
    let mut seen_cycle = 0;
    for s in spans {
        if s.cycle > seen_cycle {
            seen_cycle = s.cycle;
            cycles.push((px(s.start_s), format!("cycle {}", s.cycle), s.start_s));
        }
    }
    let phases: Vec<(i32, String, f64)> = spans
        .iter()
        .filter(|s| s.cycle == 1)
        .map(|s| (px(s.start_s), s.label(), s.start_s))
        .collect();
    for (row, y) in [(cycles, y_max * 0.985), (phases, y_max * 0.935)] {
        let at: Vec<(i32, String)> = row.iter().map(|(x, text, _)| (*x, text.clone())).collect();
        let kept = non_overlapping(&at, 8, 6);
        chart
            .draw_series(
                kept.into_iter()
                    .map(|i| Text::new(row[i].1.clone(), (row[i].2, y), font.clone())),
            )
            .map_err(plot_err)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::summarize;
    use crate::record::{fixture, Sample};

    #[test]
    fn a_phase_cut_short_by_a_crash_ends_at_the_last_sample() {
        let mut run = fixture::run(1, "drop", 1, &[2]);
        run.events.truncate(3); // baseline, then load begins and never ends
        let spans = phase_spans(&run);
        let load = spans.iter().find(|s| s.phase == Phase::Load).unwrap();
        assert_eq!(load.end_s, run.samples.last().unwrap().t_s);
        assert_eq!(load.label(), "load m");
    }

    #[test]
    fn runs_without_samples_or_events_still_draw() {
        let mut record = fixture::record();
        record.runs[1].samples.clear();
        record.runs[1].events.clear();
        record.runs[1].meta.status = RunStatus::Failed;
        record.runs[3].samples.clear();
        let dir = tempfile::tempdir().unwrap();
        let summary = summarize(&record);
        write_timeline(&record, &summary, &dir.path().join("t.png")).unwrap();
        assert!(dir.path().join("t.png").is_file());
    }

    #[test]
    fn a_million_samples_draw_in_well_under_a_second_of_work() {
        let mut record = fixture::record();
        record.runs.truncate(1);
        let run = &mut record.runs[0];
        run.samples = (0..1_000_000)
            .map(|i| {
                let spike = if i == 777_777 { 900 } else { 0 };
                let mib = 10 + (i % 1000) / 10 + spike;
                Sample {
                    t_s: i as f64 * 3.2e-6,
                    rss_bytes: mib << 20,
                    anon_bytes: mib << 19,
                    file_bytes: mib << 19,
                    vram_bytes: None,
                }
            })
            .collect();
        let dir = tempfile::tempdir().unwrap();
        let summary = summarize(&record);
        let started = std::time::Instant::now();
        write_timeline(&record, &summary, &dir.path().join("t.png")).unwrap();
        // The bench (benches/render.rs) measures ~30 ms; 5 s only guards against
        // drawing every sample on a busy test machine.
        assert!(
            started.elapsed().as_secs_f64() < 5.0,
            "{:?}",
            started.elapsed()
        );
    }
}
