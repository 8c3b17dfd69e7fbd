//! `compare.png`: every strategy on one real-time axis (t = 0 at the start of
//! each run's cycle 1, the warm-up before it squeezed into a stub when long),
//! each in its fixed colour; a chart planned as a list of panels ([`plan`]),
//! one per resource, the comparison's lead resource first.
//!
//! - An overlay per measured resource: every strategy's memory as a faint
//!   line, and bold where the strategy has released and settled, so the level
//!   each one comes back to after every cycle stands out even where the
//!   load/forward sawtooths (which run at different speeds) cross. On a CUDA
//!   comparison VRAM leads: its overlay carries the context floor as a
//!   labelled level, and under it one phase ribbon per strategy; host RSS
//!   follows as its own overlay.
//! - Small multiples: one lane per strategy on the same axes, with a sub-lane
//!   per resource on its own scale (VRAM filled; RssAnon filled and RssFile
//!   as a lighter band on top), and the strategy's phases as a ribbon.
//! - A resource no run measured ("VRAM not measured: …") is a note in place
//!   of its panel, never a line at zero.
//! - Sources from several machines (`Comparison::machines`): each overlay
//!   becomes one panel per machine, titled with its `machine` key, holding
//!   that machine's strategies, every panel on the same time axis and the
//!   same memory scale so the machines read against each other.
//!
//! Draws for each strategy its representative run (`StrategySummary::
//! representative_run`, the median retained value of the lead resource; the
//! spread over repetitions is in retained.png and the tables). Draws only:
//! samples go through min/max decimation, values for labels come from the summary.

mod key;
mod lanes;

use crate::metrics::ResourceFacts;
use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::decimate::{area_to_zero, band, series_mib, stacked_mib};
use super::frame::{
    self, draw_lane_label, draw_lane_tag, draw_level, draw_not_measured, header, label_stub,
    run_end_s, shade, stub_lines_of, time_panel, time_strip, Band, LabelAt, PanelStyle, RunClock,
    TimeAxis, TimeStrip, LEVEL_GREY, MARGIN, PLOT_WIDTH, Y_LABEL_AREA,
};
use super::palette::{lighten, phase_ribbon_colour, strategy_colour};
use super::png::{
    draw_legend, legend_height, plot_err, text_width, Area, LegendEntry, Swatch, FONT,
};
use super::{dashed_sources, drawn_run, notes_first};
use crate::metrics::comparison::{Comparison, Row};
use crate::metrics::memory::cycle_edges;
use crate::metrics::{Resource, Spread};
use crate::protocol::Phase;
use crate::record::{Header, Record, RunRecord};
use crate::textutil::MIB;
use key::{draw_key, key_height, key_items};
use lanes::{draw_lane, lane_lines};

const LEAD_OVERLAY_HEIGHT: u32 = 500;
const OVERLAY_HEIGHT: u32 = 330;
/// Height of a lane with one resource; a lane with more gets [`SUB_LANE_HEIGHT`] per resource.
const LANE_HEIGHT: u32 = 104;
const SUB_LANE_HEIGHT: u32 = 74;
const KEY_HEIGHT: u32 = 36;
/// The most the lanes of all strategies together are given before each is
/// made lower: up to 6 strategies of 2 resources (or 9 of one) keep their
/// full height; 8 strategies of 2 resources get 125 px a lane (58 px a
/// sub-lane, still a readable curve over its ribbon) instead of 156.
const LANES_MAX_PX: u32 = 1000;
/// The lowest a sub-lane is made to keep the lanes within [`LANES_MAX_PX`].
const MIN_SUB_LANE_HEIGHT: u32 = 36;
/// Height of one strategy's ribbon under the device overlay.
const RIBBON_PX: u32 = 11;
/// Share of a lane's last sub-lane below zero that holds its phase ribbon.
const RIBBON_SHARE: f64 = 0.2;

/// One panel of the chart, top-down.
#[derive(Debug, Clone, PartialEq)]
pub enum Panel {
    /// A resource no run measured: the reason, in place of its panels.
    NotMeasured(Resource, String),
    /// Every strategy's memory of one resource on one axis.
    Overlay(Resource),
    /// One phase ribbon per strategy, under the overlay before it.
    Phases,
    /// One lane per strategy, a sub-lane per resource, each on its own scale.
    Lanes(Vec<Resource>),
}

/// The panels `comparison` is drawn as: notes for resources nobody measured
/// first (a GPU user must see at once that VRAM is missing), then an overlay
/// per measured resource in the comparison's order (the lead first; a device
/// overlay followed by the phase ribbons), then the lanes with every measured
/// resource.
pub fn plan(comparison: &Comparison) -> Vec<Panel> {
    notes_first(comparison, Panel::NotMeasured, |measured| {
        let mut panels = Vec::new();
        for &r in &measured {
            panels.push(Panel::Overlay(r));
            if r.is_device() {
                panels.push(Panel::Phases);
            }
        }
        panels.push(Panel::Lanes(measured));
        panels
    })
}

/// One drawn strategy: a row of the comparison and its representative run.
struct Line<'a> {
    row: &'a Row,
    run: &'a RunRecord,
    /// The header of the record the run is from (how its GPUs are read).
    header: &'a Header,
    clock: RunClock,
    colour: RGBColor,
    dashed: bool,
}

impl Line<'_> {
    /// The run's `r` in MiB on the shared axis, decimated to the plot's width.
    fn series(&self, r: Resource, axis: &TimeAxis) -> Vec<(f64, f64)> {
        let clock = self.clock;
        series_mib(
            self.run,
            move |t| clock.x(t),
            (-axis.lead_in, axis.end_s),
            PLOT_WIDTH as usize,
            |s| r.in_sample(s),
        )
    }
}

/// Draws `compare.png` at `path`; `records[i]` is source `i` of `comparison`.
pub fn write_compare_chart(
    comparison: &Comparison,
    records: &[&Record],
    path: &Path,
) -> Result<()> {
    let runs: Vec<(&Row, &RunRecord, &Header)> = comparison
        .rows
        .iter()
        .filter_map(|row| {
            let record = records.get(row.source)?;
            let run = drawn_run(record, &row.strategy, row.summary.representative_run)?;
            Some((row, run, &record.header))
        })
        .collect();
    let axis = TimeAxis::for_plots(&runs.iter().map(|(_, r, _)| *r).collect::<Vec<_>>());
    let line_of = |(row, run, header)| line_on(&axis, row, run, header);
    let lines: Vec<Line> = runs.iter().copied().map(line_of).collect();
    // One overlay panel per machine when the sources span several.
    let facets: Vec<(Option<&str>, Vec<Line>)> = if comparison.machines.len() > 1 {
        comparison
            .machines
            .iter()
            .map(|m| {
                let of_machine = runs
                    .iter()
                    .copied()
                    .filter(|(row, _, _)| row.machine == *m)
                    .map(line_of)
                    .collect();
                (Some(m.as_str()), of_machine)
            })
            .collect()
    } else {
        vec![(None, runs.iter().copied().map(line_of).collect())]
    };
    let lines = &lines;
    let facets = &facets;
    let axis = &axis;
    let mut bands = vec![header_band(comparison, records)];
    let mut first_overlay = true;
    let panels = plan(comparison);
    let phases_follow = |i: usize| panels.get(i + 1) == Some(&Panel::Phases);
    for (i, panel) in panels.iter().enumerate() {
        match panel {
            Panel::NotMeasured(_, why) => bands.push(frame::not_measured(why.clone())),
            Panel::Overlay(r) => {
                let r = *r;
                let height = if first_overlay {
                    LEAD_OVERLAY_HEIGHT
                } else {
                    OVERLAY_HEIGHT
                };
                let lead = first_overlay;
                let x_labels = !phases_follow(i);
                first_overlay = false;
                // Every facet on the scale of all the drawn runs.
                let y_max = y_max_mib(lines, r, 1.06);
                for (machine, facet) in facets {
                    let machine = *machine;
                    // Room for the legend, however many strategies there are.
                    let legend = overlay_legend(facet, r, lead, machine);
                    let height = height.max(legend_height(&legend) + 40);
                    bands.push(Band::new(height, move |plot, legend_area| {
                        draw_overlay(plot, facet, axis, r, x_labels, y_max)?;
                        if let Some(m) = machine {
                            draw_facet_title(plot, m)?;
                        }
                        draw_legend(legend_area, 24, &overlay_legend(facet, r, lead, machine))
                    }));
                }
            }
            Panel::Phases => {
                let height = RIBBON_PX * lines.len().max(1) as u32 + 8 + 30;
                bands.push(Band::new(height, move |plot, _| {
                    draw_phase_ribbons(plot, lines, axis)
                }));
            }
            Panel::Lanes(resources) => bands.extend(lane_bands(lines, axis, resources)),
        }
    }
    frame::write_chart(path, bands)
}

/// The lanes' bands: one lane per strategy (a sub-lane per resource, its
/// text beside it), then the time axis under them and the key.
fn lane_bands<'a>(lines: &'a [Line], axis: &'a TimeAxis, resources: &[Resource]) -> Vec<Band<'a>> {
    let lane_height = lane_height(lines.len(), resources.len());
    let mut bands = Vec::new();
    for line in lines {
        let resources = resources.to_vec();
        bands.push(Band::new(lane_height, move |plot, label| {
            draw_lane(plot, line, axis, &resources, lines)?;
            draw_lane_label(
                label,
                line.colour,
                &line.row.label,
                &lane_lines(line, &resources, axis),
                false,
            )
        }));
    }
    let stub = stub_lines_of(&runs_of(lines));
    bands.push(frame::time_axis_band(axis.clone(), x_desc(axis), stub));
    let items = key_items(lines, resources);
    bands.push(Band::whole(key_height(&items), move |area| {
        draw_key(area, &items)
    }));
    bands
}

/// The height of one strategy's lane: [`LANE_HEIGHT`] for one resource,
/// [`SUB_LANE_HEIGHT`] a resource for more, until the lanes of all
/// `strategies` would pass [`LANES_MAX_PX`]; then shared out evenly, never
/// below [`MIN_SUB_LANE_HEIGHT`] a resource (a sub-lane still shows its
/// curve and the phase ribbon under it).
fn lane_height(strategies: usize, resources: usize) -> u32 {
    let (n, k) = (strategies.max(1) as u32, resources.max(1) as u32);
    let full = if k > 1 {
        SUB_LANE_HEIGHT * k + 8
    } else {
        LANE_HEIGHT
    };
    if full * n <= LANES_MAX_PX {
        return full;
    }
    let share = LANES_MAX_PX / n;
    let floor = if k > 1 {
        MIN_SUB_LANE_HEIGHT * k + 8
    } else {
        MIN_SUB_LANE_HEIGHT
    };
    share.max(floor)
}

/// `row`'s representative `run` as drawn on `axis`.
fn line_on<'a>(axis: &TimeAxis, row: &'a Row, run: &'a RunRecord, header: &'a Header) -> Line<'a> {
    Line {
        row,
        run,
        header,
        clock: axis.clock(run),
        colour: strategy_colour(&row.strategy),
        dashed: row.source % 2 == 1,
    }
}

fn x_desc(axis: &TimeAxis) -> String {
    if axis.squeezed {
        format!(
            "{} · left of the dashed line: worker start to cycle 1, squeezed",
            frame::X_DESC
        )
    } else {
        frame::X_DESC.to_string()
    }
}

fn header_band<'a>(c: &Comparison, records: &[&Record]) -> Band<'a> {
    let host = if c.machines.len() > 1 {
        format!(
            "{} machines, an overlay panel each on one scale",
            c.machines.len()
        )
    } else {
        c.sources
            .first()
            .map(|s| {
                format!(
                    "{} ({}, {}, {} CPUs)",
                    s.host.hostname, s.host.os, s.host.libc, s.host.cpus
                )
            })
            .unwrap_or_default()
    };
    let interval_ms = records
        .first()
        .map(|r| r.header.interval_s * 1e3)
        .unwrap_or(0.0);
    let many = dashed_sources(c);
    let what = if c.lead.look().primary {
        "memory".to_string()
    } else {
        c.lead.quantity().to_string()
    };
    header(
        format!(
            "memrel compare · scenario {} · device {}",
            c.scenario, c.device
        ),
        vec![format!(
            "{host} · for each strategy its run with the median retained {what} · sampled every \
             {interval_ms:.0} ms · runs aligned on the start of cycle 1{many}"
        )],
    )
}

fn median_mib(v: &Option<Spread>) -> String {
    v.as_ref()
        .map(|x| format!("{:.0}", x.median / MIB))
        .unwrap_or_else(|| "–".into())
}

/// The machine's key at the top left of its facet's plot, on a white box
/// so the lines under it do not hide it.
fn draw_facet_title(area: &Area, machine: &str) -> Result<()> {
    let text = format!("machine {machine}");
    let font = (FONT, 16).into_font().color(&RGBColor(30, 30, 30));
    let (w, h) = area.estimate_text_size(&text, &font).map_err(plot_err)?;
    let (x, y) = (Y_LABEL_AREA as i32 + 40, MARGIN as i32 + 8);
    area.draw(&Rectangle::new(
        [(x - 6, y - 4), (x + w as i32 + 6, y + h as i32 + 4)],
        WHITE.mix(0.9).filled(),
    ))
    .map_err(plot_err)?;
    area.draw_text(&text, &font, (x, y)).map_err(plot_err)?;
    Ok(())
}

fn overlay_legend(
    lines: &[Line],
    r: Resource,
    lead: bool,
    machine: Option<&str>,
) -> Vec<LegendEntry> {
    let quantity = r.quantity();
    let heading = match (machine, lead) {
        (Some(_), true) => "strategy (this machine)".to_string(),
        (Some(_), false) => format!("{} (this machine)", r.label()),
        (None, true) => "strategy".to_string(),
        (None, false) => r.label(),
    };
    let mut entries = vec![LegendEntry::new(Swatch::Heading, heading)];
    for l in lines {
        let swatch = if l.dashed {
            Swatch::Dashed(l.colour, 4)
        } else {
            Swatch::Line(l.colour, 4)
        };
        let detail = match l.row.summary.resource(r) {
            Some(s) if s.not_measured.is_none() => format!(
                "retained {} MiB · peak {} MiB",
                median_mib(&s.retained_bytes),
                median_mib(&s.peak_bytes)
            ),
            _ => format!("{quantity} not measured"),
        };
        entries.push(LegendEntry::new(swatch, l.row.label.clone()).with_detail(detail));
    }
    entries.push(LegendEntry::new(Swatch::Heading, ""));
    for text in [
        format!("dots: {quantity} at the end of each cycle"),
        "(after the release and settle)".to_string(),
        format!("faint: {quantity} all the time"),
        "retained, peak: medians over runs".to_string(),
    ] {
        entries.push(LegendEntry::new(Swatch::Text, text));
    }
    if r.is_device() && !floors(lines, r).is_empty() {
        entries.push(LegendEntry::new(
            Swatch::Dashed(LEVEL_GREY, 1),
            "context floor (bare device)",
        ));
    }
    entries
}

/// The context floors of the drawn strategies (medians over runs, whole MiB),
/// each once, with the strategies that have it.
fn floors(lines: &[Line], r: Resource) -> Vec<(f64, Vec<String>)> {
    let mut out: Vec<(f64, Vec<String>)> = Vec::new();
    for l in lines {
        let Some(floor) = l
            .row
            .summary
            .resource(r)
            .and_then(|s| s.floor_bytes.as_ref())
        else {
            continue;
        };
        let mib = (floor.median / MIB).round();
        match out.iter_mut().find(|(v, _)| *v == mib) {
            Some((_, names)) => names.push(l.row.label.clone()),
            None => out.push((mib, vec![l.row.label.clone()])),
        }
    }
    out
}

/// The top of a y axis in MiB: the highest sample of `r` in any drawn run, with headroom.
fn y_max_mib(lines: &[Line], r: Resource, headroom: f64) -> f64 {
    let top = lines
        .iter()
        .flat_map(|l| l.run.samples.iter().filter_map(|s| r.in_sample(s)))
        .max()
        .unwrap_or(1) as f64
        / MIB;
    (top * headroom).max(1.0)
}

/// All strategies' `r` on one plot: faint all the time, bold while settled.
fn draw_overlay(
    area: &Area,
    lines: &[Line],
    axis: &TimeAxis,
    r: Resource,
    x_labels: bool,
    y_max: f64,
) -> Result<()> {
    let y_desc = format!("{} (MiB)", r.label());
    let style = PanelStyle::main(&y_desc, x_labels.then_some(""));
    let mut chart = time_panel(area, axis, 0.0..y_max, style)?;
    for l in lines.iter().rev() {
        let points = l.series(r, axis);
        let faint = l
            .colour
            .mix(if r.is_device() { 0.45 } else { 0.3 })
            .stroke_width(1);
        if l.dashed {
            chart
                .draw_series(DashedLineSeries::new(points, 8, 5, faint))
                .map_err(plot_err)?;
        } else {
            chart
                .draw_series(LineSeries::new(points, faint))
                .map_err(plot_err)?;
        }
    }
    let floors = floors(lines, r);
    let many = floors.len() > 1;
    for (mib, names) in &floors {
        let label = if many {
            format!("context floor {mib:.0} MiB ({})", names.join(", "))
        } else {
            format!("context floor {mib:.0} MiB")
        };
        draw_level(
            &mut chart,
            *mib,
            Some((&label, LabelAt::BelowRight)),
            LEVEL_GREY,
        )?;
    }
    // The first row (usually `drop`, the problem) is drawn last, on top.
    for l in lines.iter().rev() {
        let points = after_release_points(l, r);
        let bold = l.colour.stroke_width(3);
        if l.dashed {
            chart
                .draw_series(DashedLineSeries::new(points.clone(), 10, 6, bold))
                .map_err(plot_err)?;
        } else {
            chart
                .draw_series(LineSeries::new(points.clone(), bold))
                .map_err(plot_err)?;
        }
        chart
            .draw_series(points.iter().map(|p| Circle::new(*p, 5, l.colour.filled())))
            .map_err(plot_err)?;
    }
    if x_labels {
        label_stub(&mut chart, axis, &stub_lines_of(&runs_of(lines)))?;
    }
    Ok(())
}

fn runs_of<'a>(lines: &[Line<'a>]) -> Vec<&'a RunRecord> {
    lines.iter().map(|l| l.run).collect()
}

/// (x, MiB of `r`) where each cycle ended: the worker's own reading at the
/// edge its `after_release` value is read at (the end of its last release,
/// settle, idle or busy step after the unload; see `metrics::memory::cycle_edges`).
fn after_release_points(l: &Line, r: Resource) -> Vec<(f64, f64)> {
    // A GPU as the metrics read it (`gpu_view`): runs spread over GPUs,
    // programs on several.
    let run = crate::metrics::gpu_view::of(l.header, l.run, r);
    let last_cycle = run.events.iter().map(|e| e.edge.cycle).max().unwrap_or(0);
    (1..=last_cycle)
        .filter_map(|c| cycle_edges(&run, c))
        .map(|(_, _, released)| released)
        .filter(|e| e.edge.phase != Phase::Unload)
        .filter_map(|e| r.at_event(e).map(|v| (l.clock.x(e.t_s), v as f64 / MIB)))
        .collect()
}

/// A run's phases as `(x0, x1, ribbon colour)` on the shared axis.
fn ribbon_spans(l: &Line) -> Vec<(f64, f64, RGBColor)> {
    l.run
        .phase_spans()
        .iter()
        .filter_map(|s| {
            let shade = phase_ribbon_colour(s.phase)?;
            Some((l.clock.x(s.start_s), l.clock.x(s.end_s), shade))
        })
        .collect()
}

/// One thin phase ribbon per strategy, in legend order, under the overlay.
fn draw_phase_ribbons(area: &Area, lines: &[Line], axis: &TimeAxis) -> Result<()> {
    let rows = lines.len().max(1) as f64;
    let strip = TimeStrip {
        x_label_px: 28,
        margin_px: 4,
        rows,
        desc: None,
    };
    let mut chart = time_strip(area, axis, &strip)?;
    let (origin_x, origin_y) = area.get_base_pixel();
    for (i, l) in lines.iter().enumerate() {
        let top = rows - i as f64 - 0.12;
        let bottom = rows - i as f64 - 0.88;
        let end = l.clock.x(run_end_s(l.run));
        let start = l.clock.x(0.0);
        shade(
            &mut chart,
            [(start, end, RGBColor(246, 246, 246))],
            Some((bottom, top)),
        )?;
        shade(&mut chart, ribbon_spans(l), Some((bottom, top)))?;
        // The strategy's colour left of the axis names the ribbon.
        let (x_px, y_top) = chart.backend_coord(&(-axis.lead_in, top));
        let (_, y_bottom) = chart.backend_coord(&(-axis.lead_in, bottom));
        let x = x_px - origin_x - 22;
        area.draw(&Rectangle::new(
            [(x, y_top - origin_y), (x + 14, y_bottom - origin_y)],
            l.colour.filled(),
        ))
        .map_err(plot_err)?;
    }
    label_stub(&mut chart, axis, &stub_lines_of(&runs_of(lines)))?;
    area.draw_text(
        "phases",
        &(FONT, 12).into_font().color(&RGBColor(110, 110, 110)),
        (4, 4),
    )
    .map_err(plot_err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::key::{key_item_width, key_layout};
    use super::*;
    use crate::export::chart::png::{legend_right_edge, LEGEND_WIDTH};
    use crate::export::table::tests::comparison_of;
    use crate::record::fixture;

    #[test]
    fn a_cuda_comparison_leads_with_vram_then_rss_and_lanes_show_both() {
        let c = comparison_of(&fixture::cuda_record());
        let dev = Resource::Device(0);
        assert_eq!(
            plan(&c),
            vec![
                Panel::Overlay(dev),
                Panel::Phases,
                Panel::Overlay(Resource::Host),
                Panel::Lanes(vec![dev, Resource::Host]),
            ]
        );
    }

    /// Runs spread over GPUs: a run's end-of-cycle dots are drawn on its own
    /// GPU's panel only (the worker read only its own GPU at its edges).
    #[test]
    fn a_run_on_one_gpu_has_no_dots_on_the_other() {
        let mut record = fixture::cuda_record();
        record.header.device = "cuda:0,1".into();
        for run in &mut record.runs {
            run.meta.device = Some(format!("cuda:{}", (run.meta.run + 1) % 2));
        }
        let c = comparison_of(&record);
        let run = &record.runs[0];
        assert_eq!(run.meta.device.as_deref(), Some("cuda:0"));
        let axis = TimeAxis::for_plots(&[run]);
        let line = line_on(&axis, &c.rows[0], run, &record.header);
        assert_eq!(after_release_points(&line, Resource::Device(0)).len(), 3);
        assert!(after_release_points(&line, Resource::Device(1)).is_empty());
    }

    #[test]
    fn a_cpu_comparison_plans_only_rss_panels() {
        let c = comparison_of(&fixture::record());
        assert_eq!(
            plan(&c),
            vec![
                Panel::Overlay(Resource::Host),
                Panel::Lanes(vec![Resource::Host])
            ]
        );
    }

    #[test]
    fn a_cuda_record_without_vram_plans_a_note_and_no_vram_line() {
        let record = fixture::cuda_unmeasured();
        let c = comparison_of(&record);
        let panels = plan(&c);
        assert_eq!(
            panels,
            vec![
                Panel::NotMeasured(
                    Resource::Device(0),
                    "VRAM not measured: nvml: driver not loaded".into()
                ),
                Panel::Overlay(Resource::Host),
                Panel::Lanes(vec![Resource::Host]),
            ]
        );
        // And the legend says so rather than giving numbers of zero.
        let run = &record.runs[0];
        let axis = TimeAxis::for_plots(&[run]);
        let line = Line {
            row: &c.rows[0],
            run,
            header: &record.header,
            clock: axis.clock(run),
            colour: BLACK,
            dashed: false,
        };
        assert!(line.series(Resource::Device(0), &axis).is_empty());
        let legend = overlay_legend(std::slice::from_ref(&line), Resource::Device(0), true, None);
        assert_eq!(legend[1].detail.as_deref(), Some("VRAM not measured"));
        let dir = tempfile::tempdir().unwrap();
        write_compare_chart(&c, &[&record], &dir.path().join("c.png")).unwrap();
    }

    #[test]
    fn the_context_floor_is_one_labelled_level() {
        let record = fixture::cuda_record();
        let c = comparison_of(&record);
        let axis = TimeAxis::for_plots(&[&record.runs[0]]);
        let lines: Vec<Line> = c
            .rows
            .iter()
            .map(|row| Line {
                row,
                run: &record.runs[0],
                header: &record.header,
                clock: axis.clock(&record.runs[0]),
                colour: BLACK,
                dashed: false,
            })
            .collect();
        let levels = floors(&lines, Resource::Device(0));
        assert_eq!(levels.len(), 1);
        assert_eq!(levels[0].0, 586.0);
        assert!(floors(&lines, Resource::Host).is_empty());
    }

    /// The height of `c`'s compare.png, whose width must be the frame's.
    fn rendered_height(c: &Comparison, record: &Record) -> u32 {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("compare.png");
        write_compare_chart(c, &[record], &path).unwrap();
        let png = std::fs::read(&path).unwrap();
        let size = |at: usize| u32::from_be_bytes([png[at], png[at + 1], png[at + 2], png[at + 3]]);
        assert_eq!(size(16), frame::WIDTH);
        size(20)
    }

    #[test]
    fn a_cuda_comparison_renders_at_the_planned_size() {
        let record = fixture::cuda_record();
        let c = comparison_of(&record);
        let height = rendered_height(&c, &record);
        let strategies = 3;
        let expected = 68
            + LEAD_OVERLAY_HEIGHT
            + (RIBBON_PX * strategies + 38)
            + OVERLAY_HEIGHT
            + strategies * (2 * SUB_LANE_HEIGHT + 8)
            + 64
            + KEY_HEIGHT;
        assert_eq!(height, expected);
    }

    /// Eight strategies on a CUDA comparison (VRAM and RSS: two overlays,
    /// the phase ribbons and a lane of two sub-lanes each): the image stays
    /// at most 2400 px tall (1.5 times its width: a page a reader scrolls
    /// once; without the lane cap it was about 2530 px here and grew 156 px
    /// a strategy), and no legend text, lane label
    /// or key item runs past the image's right edge, measured with the font
    /// the drawing uses.
    #[test]
    fn eight_strategies_stay_readable_and_no_legend_is_clipped() {
        let mut header = fixture::header("eight", 3);
        header.device = "cuda:0".into();
        let names = [
            "drop",
            "malloc-trim",
            "trim-threshold-env",
            "mmap-threshold-env",
            "arena-max-1",
            "jemalloc",
            "tcmalloc",
            "mimalloc",
        ];
        let runs = names
            .iter()
            .enumerate()
            .map(|(i, name)| {
                let run = fixture::run(i as u32 + 1, name, 1, &[1, 1, 1]);
                fixture::with_vram(run, 678, 1094, &[416, 0, 0], 586)
            })
            .collect();
        let record = Record { header, runs };
        let c = comparison_of(&record);
        assert_eq!(c.rows.len(), 8);
        let height = rendered_height(&c, &record);
        assert!(height <= 2400, "compare.png is {height} px tall");

        // The overlays' legends, in their strip right of the plots.
        let axis = TimeAxis::for_plots(&record.runs.iter().collect::<Vec<_>>());
        let lines: Vec<Line> = c
            .rows
            .iter()
            .zip(&record.runs)
            .map(|(row, run)| line_on(&axis, row, run, &record.header))
            .collect();
        let resources = [Resource::Device(0), Resource::Host];
        for (r, lead) in [(resources[0], true), (resources[1], false)] {
            for machine in [None, Some("a-much-longer-machine-key-than-usual")] {
                let legend = overlay_legend(&lines, r, lead, machine);
                let right = frame::PLOT_WIDTH + legend_right_edge(&legend);
                assert!(right <= frame::WIDTH, "{r:?}'s legend ends at {right} px");
            }
        }
        // A legend entry longer than the strip is wrapped, not cut.
        let long = [LegendEntry::new(
            Swatch::Line(BLACK, 4),
            "a strategy whose name is far longer than any legend strip is wide",
        )
        .with_detail("retained 123456 MiB · peak 123456 MiB · and some more words to wrap")];
        assert!(frame::PLOT_WIDTH + legend_right_edge(&long) <= frame::WIDTH);
        assert!(
            legend_height(&long)
                > legend_height(&[LegendEntry::new(Swatch::Line(BLACK, 4), "x").with_detail("y")])
        );
        // The key at the bottom, in rows that fit the width.
        let items = key_items(&lines, &resources);
        for ((swatch, text), (x, _)) in items.iter().zip(key_layout(&items)) {
            let right = x + key_item_width(swatch.is_some(), text);
            assert!(
                right <= frame::WIDTH,
                "key item {text:?} ends at {right} px"
            );
        }
        // The lanes' labels: every grey line within the strip once wrapped.
        for line in &lines {
            for text in lane_lines(line, &resources, &axis) {
                for part in crate::export::chart::png::wrap_text(&text, 12, LEGEND_WIDTH - 48) {
                    let right = frame::PLOT_WIDTH + 42 + text_width(&part, 12);
                    assert!(
                        right <= frame::WIDTH,
                        "lane label {part:?} ends at {right} px"
                    );
                }
            }
        }
    }

    #[test]
    fn lanes_keep_their_height_until_eight_strategies_would_pass_the_cap() {
        assert_eq!(lane_height(3, 2), 2 * SUB_LANE_HEIGHT + 8);
        assert_eq!(lane_height(7, 1), LANE_HEIGHT);
        assert_eq!(lane_height(6, 2), 2 * SUB_LANE_HEIGHT + 8);
        assert_eq!(lane_height(8, 1), LANE_HEIGHT);
        // Eight strategies of two resources: shared out within the cap.
        assert_eq!(lane_height(8, 2), LANES_MAX_PX / 8);
        // Four resources: never below the smallest readable sub-lane.
        assert_eq!(lane_height(8, 4), 4 * MIN_SUB_LANE_HEIGHT + 8);
    }
}
