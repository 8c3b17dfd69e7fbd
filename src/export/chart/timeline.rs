//! `timeline.png`: one panel per strategy (its representative run, the one
//! whose retained value of the lead resource is the median), every run on one
//! real-time axis with t = 0 at the start of its cycle 1 (the warm-up before
//! it squeezed into a stub when long, see `frame::TimeAxis`).
//!
//! A panel is a list of sub-panels ([`panel_plan`]), one per resource on its
//! own scale: on CUDA, the process's VRAM with its context floor and baseline
//! labelled, above host RSS; RssAnon and RssFile stacked, total RSS as a line.
//! Every phase shaded, cycles numbered and the first cycle's phases labelled
//! (labels that would overlap are left out), the baseline dashed. A resource
//! the run did not measure is a note ("VRAM not measured: …"), never a line at
//! zero. The legend sits in a strip beside each panel, never over the data.
//!
//! Draws only: every sample goes through min/max decimation, so a run of a
//! million samples costs no more to draw than one of a few thousand.

use crate::metrics::ResourceFacts;
use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::decimate::{area_to_zero, band, series_mib, stacked_mib};
use super::drawn_runs;
use super::frame::{
    self, draw_level, draw_not_measured, header, label_stub, shade, stub_lines, time_panel, Band,
    Chart, LabelAt, PanelStyle, RunClock, TimeAxis, LEVEL_GREY, WIDTH,
};
use super::palette::{lighten, phase_colour, strategy_colour};
use super::png::{draw_legend, non_overlapping, plot_err, Area, LegendEntry, Swatch, FONT};
use crate::metrics::resource::{Draw, Look};
use crate::metrics::{Resource, ResourceRun, RunSummary, Summary};
use crate::protocol::Phase;
use crate::record::{Part, PhaseSpan, Record, RunRecord, RunStatus, Sample};
use crate::textutil::MIB;

pub use super::frame::run_end_s;
pub use super::png::register_font;

const PANEL_HEIGHT: u32 = 420;
const CAPTION_HEIGHT: u32 = 42;
/// Heights of a panel's sub-panels when it has a device: VRAM above, RSS below.
const VRAM_HEIGHT: u32 = 220;
const RSS_HEIGHT: u32 = 310;
/// A sub-panel note inside a run's panel (lower than a chart's own
/// not-measured band, `frame::NOTE_HEIGHT`).
const SUB_NOTE_HEIGHT: u32 = 44;

/// One sub-panel of a strategy's panel, top-down.
#[derive(Debug, Clone, PartialEq)]
pub enum SubPanel {
    /// A resource this run has no readings of: the reason, never a line at zero.
    NotMeasured(Resource, String),
    /// The run's memory of one resource over time, on its own scale.
    Memory(Resource),
}

/// The sub-panels of `run`'s panel: notes for resources it did not measure
/// first, then a panel per measured resource, the summary's lead first (on
/// CUDA: VRAM above host RSS, each on its own axis).
pub fn panel_plan(summary: &Summary, run: &RunRecord) -> Vec<SubPanel> {
    let of_run = summary.runs.iter().find(|r| r.run == run.meta.run);
    let mut notes = Vec::new();
    let mut memory = Vec::new();
    for r in summary.shown() {
        let why = match of_run.and_then(|s| s.resource(r)) {
            Some(m) => m.not_measured.clone(),
            None if run.samples.iter().any(|s| r.in_sample(s).is_some()) => None,
            None => Some(format!("{} not measured", r.quantity())),
        };
        match why {
            Some(why) => notes.push(SubPanel::NotMeasured(r, why)),
            None => memory.push(SubPanel::Memory(r)),
        }
    }
    notes.extend(memory);
    notes
}

fn sub_panel_height(panels: &[SubPanel], panel: &SubPanel) -> u32 {
    match panel {
        SubPanel::NotMeasured(..) => SUB_NOTE_HEIGHT,
        SubPanel::Memory(r) if !r.look().primary => VRAM_HEIGHT,
        SubPanel::Memory(_) => {
            if panels.len() > 1 {
                RSS_HEIGHT
            } else {
                PANEL_HEIGHT - CAPTION_HEIGHT
            }
        }
    }
}

/// Draws `timeline.png` for `record` at `path`, one panel per strategy of
/// `summary`, every run on one time axis aligned on its cycle 1.
pub fn write_timeline(record: &Record, summary: &Summary, path: &Path) -> Result<()> {
    let runs = drawn_runs(record, summary);
    if runs.is_empty() {
        return Ok(());
    }
    let axis = TimeAxis::for_plots(&runs);
    let axis = &axis;
    let mut bands = vec![header(
        format!(
            "memrel timeline · scenario {} · device {} · {} · sampled every {:.0} ms ({})",
            record.header.scenario,
            record.header.device,
            record.header.host.hostname,
            record.header.interval_s * 1e3,
            record.header.sampler
        ),
        Vec::new(),
    )];
    for run in runs {
        let panels = panel_plan(summary, run);
        let height = CAPTION_HEIGHT
            + panels
                .iter()
                .map(|p| sub_panel_height(&panels, p))
                .sum::<u32>();
        let of_run = summary.runs.iter().find(|r| r.run == run.meta.run);
        bands.push(Band::new(height, move |plot, legend| {
            let entries = draw_run_panel(plot, run, of_run, &panels, axis, &record.header.sampler)?;
            draw_legend(legend, 44, &entries)
        }));
    }
    frame::write_chart(path, bands)
}

/// Draws one run's panel (its caption, then its sub-panels) and returns its legend entries.
fn draw_run_panel(
    area: &Area,
    run: &RunRecord,
    of_run: Option<&RunSummary>,
    panels: &[SubPanel],
    axis: &TimeAxis,
    sampler: &str,
) -> Result<Vec<LegendEntry>> {
    let colour = strategy_colour(&run.meta.strategy);
    let (caption_area, mut rest) = area.split_vertically(CAPTION_HEIGHT);
    draw_caption(&caption_area, run, colour)?;

    let spans = run.phase_spans();
    let mut legend = vec![LegendEntry::new(Swatch::Heading, "memory")];
    let measured: Vec<Resource> = panels
        .iter()
        .filter_map(|p| match p {
            SubPanel::Memory(r) => Some(*r),
            SubPanel::NotMeasured(..) => None,
        })
        .collect();
    let drawn = Drawn {
        run,
        clock: axis.clock(run),
        axis,
        colour,
        several: measured.len() > 1,
        sampler,
    };
    for (i, panel) in panels.iter().enumerate() {
        let last = i + 1 == panels.len();
        let height = sub_panel_height(panels, panel);
        let (this, below) = if last {
            (rest.clone(), rest.clone())
        } else {
            rest.split_vertically(height)
        };
        match panel {
            SubPanel::NotMeasured(_, why) => draw_not_measured(&this, why)?,
            SubPanel::Memory(r) => {
                let at = SubPanelAt {
                    first: measured.first() == Some(r),
                    last,
                    spans: &spans,
                };
                let resource = of_run.and_then(|s| s.resource(*r));
                legend.extend(draw_memory_panel(&this, &drawn, &at, *r, resource)?);
            }
        }
        rest = below;
    }
    legend.push(LegendEntry::new(Swatch::Heading, "phases"));
    for phase in Phase::ALL {
        let Some(shade) = phase_colour(phase) else {
            continue;
        };
        if spans.iter().any(|s| s.phase == phase) {
            legend.push(LegendEntry::new(Swatch::Fill(shade), phase.as_str()));
        }
    }
    Ok(legend)
}

/// A run's caption, centred above its panel: strategy, run, repetition, how it ended.
fn draw_caption(area: &Area, run: &RunRecord, colour: RGBColor) -> Result<()> {
    let status = match run.meta.status {
        RunStatus::Completed => String::new(),
        RunStatus::Failed => " · FAILED".to_string(),
        RunStatus::TimedOut => " · TIMED OUT".to_string(),
        RunStatus::Killed => " · KILLED".to_string(),
        RunStatus::OomKilled => " · OOM-KILLED".to_string(),
        RunStatus::AllocFailed => " · ALLOCATION FAILED".to_string(),
    };
    let caption = format!(
        "strategy {} · run {} (repetition {}){status}",
        run.meta.strategy, run.meta.run, run.meta.repetition
    );
    let font = (FONT, 20).into_font().color(&colour);
    let (w, _) = area.dim_in_pixel();
    let (text_w, _) = area.estimate_text_size(&caption, &font).map_err(plot_err)?;
    area.draw_text(&caption, &font, ((w as i32 - text_w as i32) / 2, 14))
        .map_err(plot_err)?;
    Ok(())
}

/// Where a memory sub-panel sits in its run's panel.
struct SubPanelAt<'a> {
    /// The first measured one: the phase labels go on it.
    first: bool,
    /// The last one: the time axis and the stub's label go under it.
    last: bool,
    spans: &'a [PhaseSpan],
}

/// One resource's sub-panel: its axes on its own scale, the phases shaded,
/// then its series ([`draw_memory`]); returns its legend entries.
fn draw_memory_panel(
    area: &Area,
    drawn: &Drawn,
    at: &SubPanelAt,
    r: Resource,
    resource: Option<&ResourceRun>,
) -> Result<Vec<LegendEntry>> {
    let (run, clock, axis) = (drawn.run, drawn.clock, drawn.axis);
    let look = r.look();
    // Headroom above the highest sample for the two rows of labels.
    let headroom = if at.first { 1.16 } else { 1.06 };
    // A line drawn above the whole (its ceiling) sets the top.
    let ceiling = match (look.draw, look.parts.first()) {
        (Draw::Lines, Some(p)) => Some(p.part),
        _ => None,
    };
    let top_bytes = run
        .samples
        .iter()
        .filter_map(|s| match ceiling {
            Some(part) => s.readings.part(r, part),
            None => r.in_sample(s),
        })
        .max()
        .unwrap_or(1) as f64;
    let y_max = (top_bytes / MIB * headroom).max(1.0);
    let y_desc = format!("{} (MiB)", r.quantity());
    let style = PanelStyle {
        y_desc: Some(&y_desc),
        x_axis: at.last.then_some(frame::X_DESC),
        lane: false,
        margin_top: 4,
    };
    let mut chart = time_panel(area, axis, 0.0..y_max, style)?;
    shade(
        &mut chart,
        at.spans.iter().filter_map(|s| {
            let c = phase_colour(s.phase)?;
            Some((clock.x(s.start_s), clock.x(s.end_s), c))
        }),
        None,
    )?;
    if at.first {
        draw_phase_labels(&mut chart, at.spans, &clock, y_max)?;
    }
    if at.last {
        label_stub(&mut chart, axis, &stub_lines(run))?;
    }
    draw_memory(&mut chart, drawn, r, resource)
}

/// The run a panel draws, where it lies on the axis, and how.
struct Drawn<'a> {
    run: &'a RunRecord,
    clock: RunClock,
    axis: &'a TimeAxis,
    colour: RGBColor,
    /// The panel shows more than one resource (labels then name theirs).
    several: bool,
    /// How the samples were read (`header.sampler`): one process or a tree.
    sampler: &'a str,
}

/// Samples per pixel column above which the memory line is drawn 1 px wide.
const DENSE_SAMPLES_PER_COLUMN: usize = 8;

/// One resource's series on its sub-panel, as its look says, with its
/// baseline (and its floor, where it has one) as labelled levels; returns
/// its legend entries.
fn draw_memory(
    chart: &mut Chart,
    drawn: &Drawn,
    r: Resource,
    resource: Option<&ResourceRun>,
) -> Result<Vec<LegendEntry>> {
    let look = r.look();
    let d = Drawing {
        colour: drawn.colour,
        sampler: drawn.sampler,
        series: Series::of(drawn),
        r,
        look: &look,
    };
    let mut legend = match look.draw {
        Draw::Stacked => draw_stacked(chart, &d)?,
        Draw::Area => draw_area(chart, &d, resource)?,
        Draw::Lines => draw_lines(chart, &d)?,
    };
    // The baseline: the resource just before the first load (from the summary).
    if let Some(base) = resource.and_then(|m| m.baseline_bytes) {
        let grey = RGBColor(60, 60, 60);
        let y = base as f64 / MIB;
        let text = if look.primary && !drawn.several {
            format!("baseline {y:.1} MiB")
        } else {
            format!("{} baseline {y:.1} MiB", r.quantity())
        };
        let label = look
            .baseline_on_chart
            .then_some((text.as_str(), LabelAt::Right));
        draw_level(chart, y, label, grey)?;
        legend.push(LegendEntry::new(Swatch::Dashed(grey, 1), text));
    }
    Ok(legend)
}

/// One resource's series as its sub-panel draws them.
struct Drawing<'a> {
    colour: RGBColor,
    /// How the samples were read (`header.sampler`).
    sampler: &'a str,
    series: Series<'a>,
    r: Resource,
    look: &'a Look,
}

/// How a run's samples become points of a sub-panel: its x, the axis's
/// range, a column per pixel, and the line's width.
struct Series<'a> {
    run: &'a RunRecord,
    clock: RunClock,
    range: (f64, f64),
    columns: usize,
    line_px: u32,
}

impl<'a> Series<'a> {
    fn of(drawn: &Drawn<'a>) -> Series<'a> {
        let columns = WIDTH as usize;
        // Many samples per pixel column (a soak): the min/max line turns back on
        // itself in every column, and a 2-px line's mitred joins would shoot
        // spikes far outside the chart; 1 px has no joins.
        let line_px = if drawn.run.samples.len() > DENSE_SAMPLES_PER_COLUMN * columns {
            1
        } else {
            2
        };
        Series {
            run: drawn.run,
            clock: drawn.clock,
            range: (-drawn.axis.lead_in, drawn.axis.end_s),
            columns,
            line_px,
        }
    }

    /// The points of `value` in MiB, min/max decimated.
    fn mib(&self, value: impl Fn(&Sample) -> Option<u64>) -> Vec<(f64, f64)> {
        let c = self.clock;
        series_mib(self.run, move |t| c.x(t), self.range, self.columns, value)
    }
}

/// A `Stacked` resource: its parts filled from zero, one above the other
/// (the last up to the whole), the whole a line over them.
fn draw_stacked(chart: &mut Chart, d: &Drawing) -> Result<Vec<LegendEntry>> {
    let (colour, series, r, look) = (d.colour, &d.series, d.r, d.look);
    let mut legend = Vec::new();
    let parts: Vec<Part> = look.parts.iter().map(|p| p.part).collect();
    let c = series.clock;
    let tops = stacked_mib(
        series.run,
        r,
        &parts,
        move |t| c.x(t),
        series.range,
        series.columns,
    );
    let mut below: Option<&Vec<(f64, f64)>> = None;
    for (i, (p, top)) in look.parts.iter().zip(&tops).enumerate() {
        let (fill, mix) = if i == 0 { (0.35, 0.85) } else { (0.75, 0.9) };
        let fill = lighten(colour, fill);
        chart
            .draw_series(std::iter::once(Polygon::new(
                band(top, below),
                fill.mix(mix).filled(),
            )))
            .map_err(plot_err)?;
        legend.push(LegendEntry::new(Swatch::Fill(fill), p.legend));
        below = Some(top);
    }
    if let Some(whole) = tops.last() {
        chart
            .draw_series(LineSeries::new(
                whole.clone(),
                colour.stroke_width(series.line_px),
            ))
            .map_err(plot_err)?;
        legend.push(LegendEntry::new(Swatch::Line(colour, 2), look.name.clone()));
    }
    Ok(legend)
}

/// An `Area` resource: filled light enough that the phases show through,
/// its line over it, and its floor (a device's context) dashed.
fn draw_area(
    chart: &mut Chart,
    d: &Drawing,
    resource: Option<&ResourceRun>,
) -> Result<Vec<LegendEntry>> {
    let (colour, series, r, look) = (d.colour, &d.series, d.r, d.look);
    let mut legend = Vec::new();
    let line = series.mib(|s| r.in_sample(s));
    let fill = lighten(colour, 0.45);
    chart
        .draw_series(std::iter::once(Polygon::new(
            area_to_zero(&line),
            fill.mix(0.45).filled(),
        )))
        .map_err(plot_err)?;
    chart
        .draw_series(LineSeries::new(line, colour.stroke_width(series.line_px)))
        .map_err(plot_err)?;
    legend.push(LegendEntry::new(
        Swatch::Line(colour, 2),
        scoped_name(look, d.sampler),
    ));
    if let Some(floor) = resource.and_then(|m| m.floor_bytes) {
        let mib = floor as f64 / MIB;
        let text = format!("context floor {mib:.0} MiB");
        draw_level(chart, mib, Some((&text, LabelAt::BelowLeft)), LEVEL_GREY)?;
        legend.push(LegendEntry::new(Swatch::Dashed(LEVEL_GREY, 1), text));
    }
    Ok(legend)
}

/// A resource's name with how VRAM was read, where its look says so.
fn scoped_name(look: &Look, sampler: &str) -> String {
    if look.scoped {
        let scope = crate::sampler::vram_scope(crate::sampler::is_tree(sampler));
        format!("{} ({scope})", look.name)
    } else {
        look.name.clone()
    }
}

/// A `Lines` resource: its parts light and thin, the whole strong.
fn draw_lines(chart: &mut Chart, d: &Drawing) -> Result<Vec<LegendEntry>> {
    let (colour, series, r, look) = (d.colour, &d.series, d.r, d.look);
    let mut legend = Vec::new();
    let light = lighten(colour, 0.55);
    for p in &look.parts {
        let line = series.mib(|s| s.readings.part(r, p.part));
        chart
            .draw_series(LineSeries::new(line, light.stroke_width(1)))
            .map_err(plot_err)?;
        legend.push(LegendEntry::new(Swatch::Line(light, 1), p.legend));
    }
    let whole = series.mib(|s| r.in_sample(s));
    chart
        .draw_series(LineSeries::new(whole, colour.stroke_width(series.line_px)))
        .map_err(plot_err)?;
    legend.push(LegendEntry::new(
        Swatch::Line(colour, 2),
        scoped_name(look, d.sampler),
    ));
    Ok(legend)
}

/// Cycle numbers on the top row, the first cycle's phase names on the second;
/// a label that would run into the one before it is left out.
fn draw_phase_labels(
    chart: &mut Chart,
    spans: &[PhaseSpan],
    clock: &RunClock,
    y_max: f64,
) -> Result<()> {
    let font = (FONT, 13).into_font().color(&RGBColor(70, 70, 70));
    let mut cycles: Vec<(i32, String, f64)> = Vec::new();
    let mut seen_cycle = 0;
    for s in spans {
        if s.cycle > seen_cycle {
            seen_cycle = s.cycle;
            let x = clock.x(s.start_s);
            cycles.push((
                chart.backend_coord(&(x, 0.0)).0,
                format!("cycle {}", s.cycle),
                x,
            ));
        }
    }
    let phases: Vec<(i32, String, f64)> = spans
        .iter()
        .filter(|s| s.cycle == 1)
        .map(|s| {
            let x = clock.x(s.start_s);
            (chart.backend_coord(&(x, 0.0)).0, s.label(), x)
        })
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
        let spans = run.phase_spans();
        let load = spans.iter().find(|s| s.phase == Phase::Load).unwrap();
        assert_eq!(load.end_s, run.samples.last().unwrap().t_s);
        assert_eq!(load.label(), "load m");
    }

    #[test]
    fn a_run_without_markers_is_one_phase_on_a_real_time_axis() {
        let mut run = fixture::run(1, "drop", 1, &[2]);
        run.events.clear();
        let end_s = run.samples.last().unwrap().t_s;
        let axis = TimeAxis::for_plots(&[&run]);
        // The whole run is to scale from t = 0, not squeezed into a stub.
        assert!(!axis.squeezed, "{axis:?}");
        assert_eq!(axis.lead_in, 0.0);
        assert!((axis.end_s - end_s).abs() < 1e-9, "{axis:?} vs {end_s}");
        assert_eq!(axis.clock(&run).x(end_s), end_s);
        let labels: Vec<String> = [0.0, end_s / 2.0, end_s]
            .iter()
            .map(|&x| axis.tick_label(x))
            .collect();
        assert!(
            labels
                .iter()
                .filter(|l| *l != "0.00" && *l != "0.0")
                .count()
                == 2,
            "{labels:?}"
        );
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
    fn a_cuda_run_draws_vram_above_rss_and_a_cpu_run_rss_only() {
        let record = fixture::cuda_record();
        let summary = summarize(&record);
        assert_eq!(
            panel_plan(&summary, &record.runs[0]),
            vec![
                SubPanel::Memory(Resource::Device(0)),
                SubPanel::Memory(Resource::Host)
            ]
        );
        let cpu = fixture::record();
        assert_eq!(
            panel_plan(&summarize(&cpu), &cpu.runs[0]),
            vec![SubPanel::Memory(Resource::Host)]
        );
    }

    #[test]
    fn a_cuda_run_without_vram_gets_a_note_not_a_vram_panel() {
        let record = fixture::cuda_unmeasured();
        let summary = summarize(&record);
        assert_eq!(
            panel_plan(&summary, &record.runs[0]),
            vec![
                SubPanel::NotMeasured(
                    Resource::Device(0),
                    "VRAM not measured: nvml: driver not loaded".into()
                ),
                SubPanel::Memory(Resource::Host)
            ]
        );
    }

    #[test]
    fn a_cuda_timeline_renders_at_the_planned_size() {
        let record = fixture::cuda_record();
        let summary = summarize(&record);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("timeline.png");
        write_timeline(&record, &summary, &path).unwrap();
        let png = std::fs::read(&path).unwrap();
        let size = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
        assert_eq!(size(16), WIDTH);
        // Header, then three strategies of caption + VRAM + RSS.
        assert_eq!(
            size(20),
            44 + 3 * (CAPTION_HEIGHT + VRAM_HEIGHT + RSS_HEIGHT)
        );
        // A CPU record keeps its one-panel-per-strategy height.
        let cpu = fixture::record();
        write_timeline(&cpu, &summarize(&cpu), &path).unwrap();
        let png = std::fs::read(&path).unwrap();
        let height = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
        assert_eq!(height, 44 + 2 * PANEL_HEIGHT);
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
                Sample::of_host(i as f64 * 3.2e-6, mib << 20, mib << 19, mib << 19, None)
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
