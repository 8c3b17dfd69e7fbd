//! PNG charts drawn with plotters on an embedded font (no system fonts needed).
//!
//! `timeline.png`: one panel per strategy (its first repetition): RssAnon and
//! RssFile stacked, total RSS as a line, VRAM when there is any, every phase
//! shaded and the first cycle's phases labelled, cycles numbered, the
//! baseline dashed, on a real time axis in seconds.

use std::path::Path;
use std::sync::Once;

use anyhow::{anyhow, Context, Result};
use plotters::coord::Shift;
use plotters::prelude::*;

use super::decimate::min_max_columns;
use super::palette::{lighten, phase_colour, strategy_colour};
use crate::protocol::{Edge, Phase};
use crate::record::{Record, RunRecord, RunStatus};
use crate::textutil::MIB;

pub const FONT: &str = "sans-serif";
static FONT_ONCE: Once = Once::new();

/// Registers the embedded DejaVu Sans as plotters' sans-serif font.
pub fn register_font() {
    FONT_ONCE.call_once(|| {
        let bytes: &'static [u8] = include_bytes!("../../assets/DejaVuSans.ttf");
        // The embedded font is valid; a failure here would only lose text.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, bytes);
        let _ = plotters::style::register_font(FONT, FontStyle::Bold, bytes);
    });
}

/// A phase's time span within a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PhaseSpan {
    pub phase: Phase,
    pub cycle: u32,
    pub start_s: f64,
    pub end_s: f64,
}

/// Phase spans from begin/end pairs; a phase cut short by a crash ends at the last sample.
pub fn phase_spans(run: &RunRecord) -> Vec<PhaseSpan> {
    let end_of_run = run.samples.last().map(|s| s.t_s).unwrap_or(0.0);
    let mut open: Vec<(Phase, u32, f64)> = Vec::new();
    let mut spans = Vec::new();
    for e in &run.events {
        match e.edge.edge {
            Edge::Begin => open.push((e.edge.phase, e.edge.cycle, e.t_s)),
            Edge::End => {
                if let Some(pos) = open.iter().rposition(|(p, _, _)| *p == e.edge.phase) {
                    let (phase, cycle, start_s) = open.remove(pos);
                    spans.push(PhaseSpan {
                        phase,
                        cycle,
                        start_s,
                        end_s: e.t_s,
                    });
                }
            }
        }
    }
    for (phase, cycle, start_s) in open {
        spans.push(PhaseSpan {
            phase,
            cycle,
            start_s,
            end_s: end_of_run.max(start_s),
        });
    }
    spans.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    spans
}

/// The run drawn for each strategy: its first completed repetition, else its first.
pub fn representative_runs(record: &Record) -> Vec<&RunRecord> {
    let mut out: Vec<&RunRecord> = Vec::new();
    for run in &record.runs {
        match out.iter().position(|r| r.meta.strategy == run.meta.strategy) {
            None => out.push(run),
            Some(i) if out[i].meta.status != RunStatus::Completed && run.meta.status == RunStatus::Completed => {
                out[i] = run
            }
            Some(_) => {}
        }
    }
    out
}

const WIDTH: u32 = 1600;
const PANEL_HEIGHT: u32 = 420;

/// Draws `timeline.png` for `record` at `path` (written via a temporary file).
pub fn write_timeline(record: &Record, path: &Path) -> Result<()> {
    register_font();
    let runs = representative_runs(record);
    if runs.is_empty() {
        return Ok(());
    }
    let height = PANEL_HEIGHT * runs.len() as u32 + 40;
    let tmp = path.with_extension("png.tmp.png");
    {
        let root = BitMapBackend::new(&tmp, (WIDTH, height)).into_drawing_area();
        root.fill(&WHITE).map_err(plot_err)?;
        let (header, body) = root.split_vertically(40);
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
                (16, 10),
            )
            .map_err(plot_err)?;
        let panels = body.split_evenly((runs.len(), 1));
        for (panel, run) in panels.iter().zip(runs) {
            draw_run_panel(panel, record, run)?;
        }
        root.present().map_err(plot_err)?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("cannot move {} into place", path.display()))?;
    Ok(())
}

fn draw_run_panel(area: &DrawingArea<BitMapBackend, Shift>, record: &Record, run: &RunRecord) -> Result<()> {
    let colour = strategy_colour(&run.meta.strategy);
    let t_end = run
        .samples
        .last()
        .map(|s| s.t_s)
        .unwrap_or(1.0)
        .max(run.events.last().map(|e| e.t_s).unwrap_or(0.0))
        .max(0.001);
    let has_vram = run.samples.iter().any(|s| s.vram_bytes.is_some());
    let top_bytes = run
        .samples
        .iter()
        .map(|s| s.rss_bytes.max(s.vram_bytes.unwrap_or(0)))
        .max()
        .unwrap_or(1) as f64;
    let y_max = (top_bytes / MIB * 1.12).max(1.0);
    let status = match run.meta.status {
        RunStatus::Completed => String::new(),
        RunStatus::Failed => " · FAILED".to_string(),
        RunStatus::TimedOut => " · TIMED OUT".to_string(),
    };
    let caption = format!(
        "{} · strategy {} · {} · run {} (repetition {}){status}",
        record.header.scenario, run.meta.strategy, record.header.device, run.meta.run, run.meta.repetition
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
        .y_desc(if has_vram { "MiB (RSS; VRAM)" } else { "RSS (MiB)" })
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .light_line_style(RGBColor(240, 240, 240))
        .draw()
        .map_err(plot_err)?;

    // Phases: shaded spans, one legend entry per phase kind present.
    let spans = phase_spans(run);
    for phase in Phase::ALL {
        let Some(shade) = phase_colour(phase) else { continue };
        let of: Vec<&PhaseSpan> = spans.iter().filter(|s| s.phase == phase).collect();
        if of.is_empty() {
            continue;
        }
        chart
            .draw_series(of.iter().map(|s| {
                Rectangle::new([(s.start_s, 0.0), (s.end_s.max(s.start_s), y_max)], shade.filled())
            }))
            .map_err(plot_err)?
            .label(phase.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], shade.filled()));
    }
    // Cycle numbers above each cycle's first phase; phase names on cycle 1.
    let label_font = (FONT, 13).into_font().color(&RGBColor(90, 90, 90));
    let mut seen_cycle = 0;
    for s in &spans {
        if s.cycle > seen_cycle {
            seen_cycle = s.cycle;
            chart
                .draw_series(std::iter::once(Text::new(
                    format!("cycle {}", s.cycle),
                    (s.start_s, y_max * 0.985),
                    label_font.clone(),
                )))
                .map_err(plot_err)?;
        }
        if s.cycle == 1 && s.end_s - s.start_s > t_end * 0.012 {
            chart
                .draw_series(std::iter::once(Text::new(
                    s.phase.as_str().to_string(),
                    (s.start_s, y_max * 0.93),
                    label_font.clone(),
                )))
                .map_err(plot_err)?;
        }
    }

    let columns = WIDTH as usize;
    let anon = min_max_columns(run.samples.iter().map(|s| (s.t_s, s.anon_bytes as f64 / MIB)), 0.0, t_end, columns);
    let rss = min_max_columns(run.samples.iter().map(|s| (s.t_s, s.rss_bytes as f64 / MIB)), 0.0, t_end, columns);
    // Anon filled from zero; file as the band between anon and total RSS.
    let mut anon_poly = vec![(0.0, 0.0)];
    anon_poly.extend(anon.iter().copied());
    anon_poly.push((anon.last().map(|p| p.0).unwrap_or(0.0), 0.0));
    let anon_fill = lighten(colour, 0.35);
    chart
        .draw_series(std::iter::once(Polygon::new(anon_poly, anon_fill.mix(0.85).filled())))
        .map_err(plot_err)?
        .label("RssAnon (tensors, heap)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], anon_fill.filled()));
    let mut file_poly: Vec<(f64, f64)> = rss.clone();
    file_poly.extend(anon.iter().rev().copied());
    let file_fill = lighten(colour, 0.75);
    chart
        .draw_series(std::iter::once(Polygon::new(file_poly, file_fill.mix(0.9).filled())))
        .map_err(plot_err)?
        .label("RssFile (mapped files)")
        .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], file_fill.filled()));
    chart
        .draw_series(LineSeries::new(rss, colour.stroke_width(2)))
        .map_err(plot_err)?
        .label("RSS total")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], colour.stroke_width(2)));
    if has_vram {
        let vram = min_max_columns(
            run.samples.iter().filter_map(|s| s.vram_bytes.map(|v| (s.t_s, v as f64 / MIB))),
            0.0,
            t_end,
            columns,
        );
        let dark = RGBColor(20, 20, 20);
        chart
            .draw_series(DashedLineSeries::new(vram, 6, 4, dark.stroke_width(2)))
            .map_err(plot_err)?
            .label("VRAM (this process)")
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], dark.stroke_width(2)));
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
            .draw_series(DashedLineSeries::new(vec![(0.0, y), (t_end, y)], 8, 6, grey.stroke_width(1)))
            .map_err(plot_err)?
            .label(format!("baseline {y:.0} MiB"))
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], grey.stroke_width(1)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(180, 180, 180))
        .label_font((FONT, 14))
        .draw()
        .map_err(plot_err)?;
    Ok(())
}

pub fn plot_err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("cannot draw the chart: {e:?}")
}
