//! `release.png`: when memory comes back after an unload. One panel per
//! measured resource (the comparison's lead first: on CUDA, VRAM above host
//! RSS); in each, one line per strategy in its fixed colour: the last cycle of
//! its representative run (the run whose last cycle is the tables' row), from
//! the begin of the cycle's first unload (x = 0) to the end of its settle (the
//! release, settle, idle or busy steps after the unload: where `after_release`
//! is read), as MiB above the run's baseline (before the first load).
//!
//! On each line: the end of the release step (a tick), t50 (hollow circle)
//! and t90 (triangle) where half and 90 % of what came back had come back, and
//! the released value (a dot where the line ends). A line that falls at x ≈ 0
//! released at once; one that falls later released after a delay (or, next to
//! the same scenario with a `busy` step, only when the program allocated
//! again); one that stays up never released. The settle phase of the first
//! line's cycle is shaded and named, so "idle" and "busy" read at once.
//!
//! Draws only: the curve is the run's samples, the edges bound it as
//! `metrics::memory::cycle_edges` says, t50/t90 come from the summary row.
//! x is the program's own time, as the metrics count it: the time it
//! waited for memrel's readings at the edges is left out
//! (`RunRecord::own_span_s`), so t50 and t90 sit where the line crosses.

use crate::metrics::ResourceFacts;
use std::ops::Range;
use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::decimate::min_max_columns;
use super::frame::{
    self, draw_level, header, Band, Chart, LEVEL_GREY, MARGIN, PLOT_WIDTH, Y_LABEL_AREA,
};
use super::palette::{lighten, phase_colour, strategy_colour};
use super::png::{draw_legend, legend_height, non_overlapping, plot_err, Area, LegendEntry};
use super::png::{Swatch, FONT};
use super::{dashed_sources, drawn_run, resources};
use crate::metrics::comparison::{Comparison, Row};
use crate::metrics::memory::cycle_edges;
use crate::metrics::{LastCycle, Resource};
use crate::protocol::{Edge, Phase};
use crate::record::{Record, RunRecord};
use crate::textutil::MIB;

const PANEL_HEIGHT: u32 = 460;
/// x axis description of every panel.
const UNLOAD_X_DESC: &str =
    "time since the cycle's first unload began (log scale above 10 ms: each step right is 10× longer)";
/// Where the time axis turns from linear to logarithmic: a release within a
/// few ms and one after 10 s must both be readable on one axis.
const KNEE_S: f64 = 0.01;
/// Tick marks of the time axis, in seconds.
const TICKS_S: [f64; 12] = [
    0.0, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0, 300.0, 1000.0,
];

/// Labels on each panel's y axis (at most; plotters' own default).
const Y_LABELS: usize = 11;

/// Seconds to the x axis: linear up to [`KNEE_S`], logarithmic above.
fn to_x(t_s: f64) -> f64 {
    (1.0 + t_s.max(0.0) / KNEE_S).log10()
}

/// One strategy's release curve of one resource, in chart units.
#[derive(Debug, Clone, PartialEq)]
pub struct Curve {
    /// (s since the unload began, MiB above the baseline): the worker's reading
    /// at the unload's begin, every sample up to the released edge, its reading.
    pub points: Vec<(f64, f64)>,
    /// The end of the cycle's release step, if it has one.
    pub release_end_s: Option<f64>,
    pub t50_s: Option<f64>,
    pub t90_s: Option<f64>,
    /// The cycle's settle phases after the release: (phase, from s, to s).
    pub settle: Vec<(Phase, f64, f64)>,
}

impl Curve {
    /// The curve's value at `t_s` as the line is drawn: between the points
    /// around it, linearly (a mark sits on the line).
    fn at(&self, t_s: f64) -> Option<f64> {
        let after = self.points.iter().position(|p| p.0 >= t_s)?;
        let (t1, v1) = self.points[after];
        let Some(&(t0, v0)) = after.checked_sub(1).map(|i| &self.points[i]) else {
            return Some(v1);
        };
        if t1 - t0 <= 0.0 {
            return Some(v1);
        }
        Some(v0 + (v1 - v0) * (t_s - t0) / (t1 - t0))
    }

    fn end_s(&self) -> f64 {
        self.points.last().map(|p| p.0).unwrap_or(0.0)
    }
}

/// The release curve of `r` in `run` for the cycle of `row` (its last cycle).
pub fn curve(run: &RunRecord, r: Resource, row: &LastCycle) -> Option<Curve> {
    let (loaded, _, released) = cycle_edges(run, row.cycle)?;
    let (t0, t1) = (loaded.t_s, released.t_s);
    let x = |t_s: f64| run.own_span_s(t0, t_s);
    let base = row.baseline_bytes as f64;
    let mib = |bytes: u64| (bytes as f64 - base) / MIB;
    let mut points = vec![(0.0, mib(r.at_event(loaded)?))];
    points.extend(
        run.samples
            .iter()
            .filter(|s| s.t_s >= t0 && s.t_s <= t1)
            .filter_map(|s| r.in_sample(s).map(|v| (x(s.t_s), mib(v)))),
    );
    points.push((x(t1), mib(r.at_event(released)?)));
    let release_end_s = run
        .events
        .iter()
        .filter(|e| e.edge.cycle == row.cycle && e.edge.phase == Phase::Release)
        .rfind(|e| e.edge.edge == Edge::End && e.t_s >= t0 && e.t_s <= t1)
        .map(|e| x(e.t_s));
    let settle = run
        .phase_spans()
        .into_iter()
        .filter(|s| s.cycle == row.cycle && s.start_s >= t0 && s.end_s <= t1 + 1e-9)
        .filter(|s| matches!(s.phase, Phase::Settle | Phase::Idle | Phase::Busy))
        .map(|s| (s.phase, x(s.start_s), x(s.end_s)))
        .collect();
    Some(Curve {
        points,
        release_end_s,
        t50_s: row.release_t50_s,
        t90_s: row.release_t90_s,
        settle,
    })
}

/// One drawn strategy.
struct Line<'a> {
    row: &'a Row,
    colour: RGBColor,
    dashed: bool,
    /// Per resource of the chart, in panel order (`None`: no curve).
    curves: Vec<Option<Curve>>,
    /// Its summary row per resource, in panel order.
    last: Vec<Option<&'a LastCycle>>,
}

/// Draws `release.png` for `comparison` at `path`; `records[i]` is source `i`.
pub fn write_release_chart(
    comparison: &Comparison,
    records: &[&Record],
    path: &Path,
) -> Result<()> {
    let (missing, measured) = resources(comparison);
    let lines: Vec<Line> = comparison
        .rows
        .iter()
        .map(|row| line_of(row, records, &measured))
        .collect();
    let end_s = lines
        .iter()
        .flat_map(|l| l.curves.iter().flatten())
        .map(Curve::end_s)
        .fold(0.0, f64::max)
        .max(0.001);
    let sources: Vec<String> = comparison.sources.iter().map(|s| s.label.clone()).collect();
    let (lines, sources) = (&lines, &sources);
    let mut bands = vec![header_band(comparison, lines)];
    for (_, why) in missing {
        bands.push(frame::not_measured(why));
    }
    for (i, &r) in measured.iter().enumerate() {
        let legend = panel_legend(lines, i, r);
        let height = PANEL_HEIGHT.max(legend_height(&legend) + 40);
        bands.push(Band::new(height, move |plot, side| {
            draw_panel(plot, lines, sources, end_s, i, r)?;
            draw_legend(side, 24, &legend)
        }));
    }
    frame::write_chart(path, bands)
}

fn line_of<'a>(row: &'a Row, records: &[&'a Record], measured: &[Resource]) -> Line<'a> {
    let record = records.get(row.source);
    let run =
        record.and_then(|record| drawn_run(record, &row.strategy, row.summary.representative_run));
    let last: Vec<Option<&LastCycle>> = measured
        .iter()
        .map(|&r| {
            row.summary
                .resource(r)
                .filter(|s| s.not_measured.is_none())
                .and_then(|s| s.row.as_ref())
        })
        .collect();
    let curves = measured
        .iter()
        .zip(&last)
        .map(|(&r, last)| {
            // A GPU as the metrics read it (`gpu_view`): runs spread over
            // GPUs, programs on several.
            let run = crate::metrics::gpu_view::of(&record?.header, run?, r);
            curve(&run, r, (*last)?)
        })
        .collect();
    Line {
        row,
        colour: strategy_colour(&row.strategy),
        dashed: row.source % 2 == 1,
        curves,
        last,
    }
}

/// What followed the release in the first drawn cycle of `source`: `idle 12.0 s`.
fn settle_of(lines: &[Line], source: usize) -> Option<String> {
    let c = lines
        .iter()
        .filter(|l| l.row.source == source)
        .flat_map(|l| l.curves.iter().flatten())
        .find(|c| !c.settle.is_empty())?;
    let parts: Vec<String> = c
        .settle
        .iter()
        .map(|(p, a, b)| format!("{} {:.1} s", p.as_str(), b - a))
        .collect();
    Some(parts.join(", "))
}

fn header_band<'a>(c: &Comparison, lines: &[Line]) -> Band<'a> {
    let settle = if c.sources.len() > 1 {
        let parts: Vec<String> = c
            .sources
            .iter()
            .enumerate()
            .map(|(i, s)| format!("{}: {}", s.label, settle_of(lines, i).unwrap_or("–".into())))
            .collect();
        format!("after the release: {}", parts.join("; "))
    } else {
        settle_of(lines, 0)
            .map(|s| format!("after the release: {s}"))
            .unwrap_or_else(|| "no settle, idle or busy step after the release".to_string())
    };
    let many = dashed_sources(c);
    let cycle = lines
        .iter()
        .flat_map(|l| l.last.iter().flatten())
        .map(|last| last.cycle)
        .max()
        .map(|n| format!(" (cycle {n})"))
        .unwrap_or_default();
    let threshold_mib = c.retention_threshold_bytes as f64 / MIB;
    header(
        format!(
            "memrel release curve: when memory comes back · scenario {} · device {}",
            c.scenario, c.device
        ),
        vec![
            format!(
                "each line: a strategy's last cycle{cycle} in its representative run (the run of \
                 the table's row), from the begin of its unload (0 s) to the end of its settle, \
                 above the run's baseline (before its first load)"
            ),
            format!(
                "{settle}{many} · t50/t90 need ≥ {threshold_mib:.0} MiB to come back (the \
                 retention threshold)"
            ),
            "falls at once: released at the unload or the release step · falls later: after a \
             delay (a timer, or the program allocating again) · stays up: not released in this \
             cycle"
                .to_string(),
        ],
    )
}

/// The y range of panel `i`: 0 (the baseline) and every curve, with headroom.
fn y_range(lines: &[Line], i: usize) -> (f64, f64) {
    let (lo, hi) = lines
        .iter()
        .filter_map(|l| l.curves.get(i).and_then(Option::as_ref))
        .flat_map(|c| c.points.iter().map(|p| p.1))
        .fold((0.0f64, 1.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let pad = (hi - lo) * 0.08;
    (if lo < 0.0 { lo - pad } else { 0.0 }, hi + pad)
}

/// A panel over 0 … `end_s` on the time axis and `y` MiB, its mesh and time ticks drawn.
fn curve_panel<'a, 'b>(
    area: &'a Area<'b>,
    end_s: f64,
    y: Range<f64>,
    y_desc: &str,
) -> Result<Chart<'a, 'b>> {
    let (y0, y1) = (y.start, y.end);
    let decimals = y_decimals(&y);
    let mut chart = ChartBuilder::on(area)
        .margin_left(MARGIN)
        .margin_right(MARGIN)
        .margin_top(MARGIN)
        .margin_bottom(4)
        .x_label_area_size(48)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(0.0..to_x(end_s), y)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_labels(Y_LABELS)
        .y_label_formatter(&|y| format!("{y:.decimals$}"))
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(232, 232, 232))
        .y_desc(y_desc)
        .x_desc(UNLOAD_X_DESC)
        .draw()
        .map_err(plot_err)?;
    let ticks: Vec<f64> = TICKS_S.into_iter().filter(|t| *t <= end_s).collect();
    chart
        .draw_series(ticks.iter().map(|&t| {
            PathElement::new(vec![(to_x(t), y0), (to_x(t), y1)], RGBColor(228, 228, 228))
        }))
        .map_err(plot_err)?;
    let font = (FONT, 15).into_font().color(&BLACK);
    chart
        .draw_series(ticks.iter().map(|&t| {
            let text = tick_label(t);
            let width = 8 * text.chars().count() as i32;
            EmptyElement::at((to_x(t), y0))
                + PathElement::new(vec![(0, 0), (0, 5)], BLACK)
                + Text::new(text, (-width / 2, 8), font.clone())
        }))
        .map_err(plot_err)?;
    Ok(chart)
}

/// The decimals the y labels over `y` (MiB) need so that no two read the
/// same: none on a panel of hundreds of MiB, one where nothing moved (a
/// flat line's 0 … 1 MiB: ticks 0.1 apart, which whole numbers would print
/// as "0 0 0 0 0 1 1 1 1 1").
fn y_decimals(y: &Range<f64>) -> usize {
    let ticks = plotters::coord::types::RangedCoordf64::from(y.clone()).key_points(Y_LABELS);
    (0..3)
        .find(|&decimals| {
            let labels: Vec<String> = ticks.iter().map(|t| format!("{t:.decimals$}")).collect();
            labels.windows(2).all(|w| w[0] != w[1])
        })
        .unwrap_or(3)
}

/// `0`, `10 ms`, `1 s`.
fn tick_label(t_s: f64) -> String {
    if t_s == 0.0 {
        "0".to_string()
    } else if t_s < 1.0 {
        format!("{:.0} ms", t_s * 1e3)
    } else {
        format!("{t_s:.0} s")
    }
}

/// Panel `i` (resource `r`); `sources` are the comparison's source labels.
fn draw_panel(
    area: &Area,
    lines: &[Line],
    sources: &[String],
    end_s: f64,
    i: usize,
    r: Resource,
) -> Result<()> {
    let (y0, y1) = y_range(lines, i);
    let y_desc = format!("{} above the baseline (MiB)", r.label());
    let mut chart = curve_panel(area, end_s, y0..y1, &y_desc)?;
    if let Some(first) = lines
        .iter()
        .filter_map(|l| l.curves.get(i).and_then(Option::as_ref))
        .next()
    {
        let source = lines
            .iter()
            .find(|l| l.curves.get(i).is_some_and(Option::is_some))
            .and_then(|l| sources.get(l.row.source))
            .filter(|_| sources.len() > 1);
        draw_settle(&mut chart, first, y1, source.map(String::as_str))?;
    }
    draw_level(&mut chart, 0.0, None, LEVEL_GREY)?;
    // The first row (usually `drop`, the problem) is drawn last, on top.
    for l in lines.iter().rev() {
        if let Some(c) = l.curves.get(i).and_then(Option::as_ref) {
            draw_curve(&mut chart, l, c)?;
        }
    }
    Ok(())
}

/// Shades the settle phases of `c` (busy in its phase colour, idle and settle
/// light grey) and names each at the top of the plot (with the source's
/// letter, `source`, when several are drawn).
fn draw_settle(chart: &mut Chart, c: &Curve, y_top: f64, source: Option<&str>) -> Result<()> {
    let whose = source
        .map(|label| format!("source {label}: "))
        .unwrap_or_default();
    let spans = c.settle.iter().map(|&(p, a, b)| {
        let colour = phase_colour(p).unwrap_or(RGBColor(246, 246, 246));
        (to_x(a), to_x(b), lighten(colour, 0.3))
    });
    frame::shade(chart, spans, None)?;
    let labels: Vec<(i32, String, f64)> = c
        .settle
        .iter()
        .map(|&(p, a, _)| {
            let text = match p {
                Phase::Busy => "busy: allocating 64 small blocks every 1 ms",
                Phase::Idle => "idle: the process sleeps",
                _ => "settle: the process sleeps",
            };
            let x = to_x(a);
            (
                chart.backend_coord(&(x, 0.0)).0 + 6,
                format!("{whose}{text}"),
                x,
            )
        })
        .collect();
    let at: Vec<(i32, String)> = labels.iter().map(|(x, t, _)| (*x, t.clone())).collect();
    let font = (FONT, 14).into_font().color(&RGBColor(70, 70, 70));
    chart
        .draw_series(non_overlapping(&at, 8, 6).into_iter().map(|k| {
            EmptyElement::at((labels[k].2, y_top))
                + Text::new(labels[k].1.clone(), (6, 6), font.clone())
        }))
        .map_err(plot_err)?;
    Ok(())
}

/// One strategy's curve with its marks: release-step end, t50, t90, released value.
fn draw_curve(chart: &mut Chart, l: &Line, c: &Curve) -> Result<()> {
    let points = min_max_columns(
        c.points.iter().map(|&(t, v)| (to_x(t), v)),
        0.0,
        to_x(c.end_s()),
        PLOT_WIDTH as usize,
    );
    let style = l.colour.stroke_width(3);
    if l.dashed {
        chart
            .draw_series(DashedLineSeries::new(points, 10, 6, style))
            .map_err(plot_err)?;
    } else {
        chart
            .draw_series(LineSeries::new(points, style))
            .map_err(plot_err)?;
    }
    let colour = l.colour;
    let mark = |t: Option<f64>| t.and_then(|t| Some((to_x(t), c.at(t)?)));
    if let Some((x, y)) = mark(c.release_end_s) {
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((x, y))
                    + PathElement::new(vec![(0, -14), (0, 14)], colour.stroke_width(3)),
            ))
            .map_err(plot_err)?;
    }
    if let Some((x, y)) = mark(c.t50_s) {
        chart
            .draw_series([
                Circle::new((x, y), 7, WHITE.filled()),
                Circle::new((x, y), 7, colour.stroke_width(3)),
            ])
            .map_err(plot_err)?;
    }
    if let Some((x, y)) = mark(c.t90_s) {
        chart
            .draw_series(std::iter::once(TriangleMarker::new(
                (x, y),
                9,
                colour.filled(),
            )))
            .map_err(plot_err)?;
    }
    if let Some(&(t, v)) = c.points.last() {
        chart
            .draw_series(std::iter::once(Circle::new(
                (to_x(t), v),
                6,
                colour.filled(),
            )))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// `1.25 s`, `45 ms`, `1.3 ms`: seconds for people.
fn seconds(s: f64) -> String {
    if s < 0.01 {
        format!("{:.1} ms", s * 1e3)
    } else if s < 1.0 {
        format!("{:.0} ms", s * 1e3)
    } else {
        format!("{s:.2} s")
    }
}

/// Per strategy: t50, t90 and what stayed; then what the marks mean.
fn panel_legend(lines: &[Line], i: usize, r: Resource) -> Vec<LegendEntry> {
    let mut entries = vec![LegendEntry::new(Swatch::Heading, r.label())];
    for l in lines {
        let swatch = if l.dashed {
            Swatch::Dashed(l.colour, 4)
        } else {
            Swatch::Line(l.colour, 4)
        };
        let detail = match (l.curves.get(i).and_then(Option::as_ref), l.last.get(i)) {
            (Some(c), Some(Some(last))) => curve_detail(c, last),
            _ => format!("{} not measured, or no complete cycle", r.quantity()),
        };
        entries.push(LegendEntry::new(swatch, l.row.label.clone()).with_detail(detail));
    }
    entries.push(LegendEntry::new(Swatch::Heading, "marks on each line"));
    entries.push(LegendEntry::new(
        Swatch::Dashed(LEVEL_GREY, 1),
        "0: the baseline (all came back)",
    ));
    for text in [
        "○ t50: half of what came back",
        "▲ t90: 90 % of what came back",
        "| end of the release step",
        "● end of the settle (released)",
    ] {
        entries.push(LegendEntry::new(Swatch::Text, text));
    }
    entries
}

/// Two short lines: when it came back (or why that has no answer), where it ended.
fn curve_detail(c: &Curve, last: &LastCycle) -> String {
    let ended = format!(
        "ends {:.1} MiB above the baseline",
        last.retained_bytes as f64 / MIB
    );
    match (c.t50_s, c.t90_s) {
        (Some(t50), Some(t90)) => format!("t50 {} · t90 {}\n{ended}", seconds(t50), seconds(t90)),
        _ => format!(
            "{:.1} MiB came back: no t50/t90\n{ended}",
            (last.loaded_bytes as f64 - last.after_release_bytes as f64).max(0.0) / MIB
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::table::tests::comparison_of;
    use crate::record::fixture;

    #[test]
    fn a_curve_runs_from_the_unload_to_the_released_edge_above_the_baseline() {
        let record = fixture::record();
        let c = comparison_of(&record);
        let row = c.rows[0].summary.host().row.clone().unwrap();
        let run = drawn_run(&record, "drop", c.rows[0].summary.representative_run).unwrap();
        let curve = curve(run, Resource::Host, &row).unwrap();
        // Loaded at 110 MiB over a 10 MiB baseline; ends at the settle's end
        // (0.6 s after the unload began), 60 MiB over it (cycle 3 kept 60).
        assert_eq!(curve.points.first(), Some(&(0.0, 100.0)));
        let (end_s, end_mib) = *curve.points.last().unwrap();
        assert!((end_s - 0.6).abs() < 1e-6 && end_mib == 60.0, "{curve:?}");
        assert!((curve.release_end_s.unwrap() - 0.2).abs() < 1e-6);
        assert_eq!(curve.settle.len(), 1);
        assert_eq!(curve.settle[0].0, Phase::Settle);
        assert_eq!(
            (curve.t50_s, curve.t90_s),
            (row.release_t50_s, row.release_t90_s)
        );
        assert_eq!(curve.at(0.0), Some(100.0));
        assert_eq!(curve.at(0.5), Some(60.0));
        // Between two samples the mark sits on the drawn line.
        let (a, b) = (curve.points[1], curve.points[2]);
        let mid = curve.at((a.0 + b.0) / 2.0).unwrap();
        assert!((mid - (a.1 + b.1) / 2.0).abs() < 1e-9);
    }

    /// The y labels of a panel over `y`, as the chart prints them.
    fn y_labels(y: Range<f64>) -> Vec<String> {
        let decimals = y_decimals(&y);
        plotters::coord::types::RangedCoordf64::from(y)
            .key_points(Y_LABELS)
            .iter()
            .map(|t| format!("{t:.decimals$}"))
            .collect()
    }

    /// Issue 47: a panel where nothing moved (the page cache full from the
    /// first reading) printed "1 1 1 1 1 0 0 0 0 0" on its y axis.
    #[test]
    fn a_panel_where_nothing_moved_labels_each_tick_apart() {
        let (y0, y1) = y_range(&[], 0);
        // What whole numbers (the labels' old format) print there.
        let whole: Vec<String> = plotters::coord::types::RangedCoordf64::from(y0..y1)
            .key_points(Y_LABELS)
            .iter()
            .map(|t| format!("{t:.0}"))
            .collect();
        assert!(whole.windows(2).any(|w| w[0] == w[1]), "{whole:?}");
        let flat = y_labels(y0..y1);
        assert!(flat.len() >= 3, "{flat:?}");
        assert!(flat.windows(2).all(|w| w[0] != w[1]), "{flat:?}");
        assert_eq!(flat.first().map(String::as_str), Some("0.0"), "{flat:?}");
        // A panel of hundreds of MiB keeps whole numbers.
        assert_eq!(y_labels(0.0..460.0)[..3], ["0", "50", "100"]);
        // And one of a few MiB below the baseline as well as above.
        let small = y_labels(-0.4..0.3);
        assert!(small.windows(2).all(|w| w[0] != w[1]), "{small:?}");
    }

    #[test]
    fn times_read_in_ms_below_a_second() {
        assert_eq!(seconds(0.0013), "1.3 ms");
        assert_eq!(seconds(0.045), "45 ms");
        assert_eq!(seconds(12.5), "12.50 s");
    }

    #[test]
    fn release_charts_render_for_cpu_and_cuda() {
        let dir = tempfile::tempdir().unwrap();
        for record in [fixture::record(), fixture::cuda_record()] {
            let c = comparison_of(&record);
            let path = dir.path().join("release.png");
            write_release_chart(&c, &[&record], &path).unwrap();
            let png = std::fs::read(&path).unwrap();
            let height = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
            let panels = c.resources.len() as u32;
            assert_eq!(height, 44 + 3 * 24 + panels * PANEL_HEIGHT, "{}", c.device);
        }
    }
}
