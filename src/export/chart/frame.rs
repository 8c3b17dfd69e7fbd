//! The frame the three charts share, so that a chart is a list of panels and
//! a resource (host RSS, device VRAM) is one more panel, not a copy of a chart:
//!
//! - [`Band`]: one horizontal strip of a chart (a plot with its legend strip
//!   beside it, or a header, or a note); [`write_chart`] stacks them into a PNG.
//! - [`TimeAxis`] and [`RunClock`]: one real-time axis for every run, with
//!   t = 0 at the start of each run's cycle 1. What comes before (worker
//!   start, warm-up, baseline) sits left of 0, at real scale while it is
//!   short and squeezed into a stub of at most [`STUB_PX`] pixels when it
//!   is long (a first CUDA worker spends ~20 s in candle's PTX JIT), so the
//!   cycles of every strategy line up and fill the width.
//! - panel builders for a time panel ([`time_panel`], main or lane style)
//!   (a cycle panel, retained per cycle, is `cycles.rs`'s), the axes drawn
//!   once under a stack of lanes, a labelled level line (baseline, context floor), phase shading,
//!   a lane label, and the "not measured" note drawn in place of a panel.
//!
//! Nothing here knows about metrics; it draws what it is given. Drawing that
//! plotters has no equivalent for (the stub, labelled levels, lane labels)
//! is written by hand here, once.

use std::ops::Range;

use anyhow::Result;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

/// The time axis's description, shared by every chart on the aligned clock.
pub const X_DESC: &str = "time since cycle 1 began (s)";
/// Height of the band that stands for a resource no run measured (a note in
/// place of its panels, see [`not_measured`]).
pub const NOTE_HEIGHT: u32 = 56;

use super::png::{plot_err, write_png, Area, FONT, LEGEND_WIDTH};
use crate::protocol::{Edge, Phase};
use crate::record::RunRecord;

/// Width of every chart.
pub const WIDTH: u32 = 1600;
/// Width of the plots, left of the legend strip.
pub const PLOT_WIDTH: u32 = WIDTH - LEGEND_WIDTH;
/// Room for the y labels left of every plot (the same everywhere, so plots align).
pub const Y_LABEL_AREA: u32 = 80;
pub const MARGIN: u32 = 12;
/// The most pixels the time before cycle 1 may take; longer, it is squeezed.
pub const STUB_PX: u32 = 96;

/// Grey for secondary text.
pub const GREY_TEXT: RGBColor = RGBColor(80, 80, 80);
/// Grey for level lines (baseline, floor, threshold).
pub const LEVEL_GREY: RGBColor = RGBColor(90, 90, 90);

pub type Xy = Cartesian2d<RangedCoordf64, RangedCoordf64>;
pub type Chart<'a, 'b> = ChartContext<'a, BitMapBackend<'b>, Xy>;

type DrawBand<'a> = Box<dyn FnOnce(&Area, &Area) -> Result<()> + 'a>;

/// One horizontal strip of a chart: its height and how to draw it, given the
/// plot area on the left and the legend strip on the right (or, for a band
/// made with [`Band::whole`], the whole width as the first area).
pub struct Band<'a> {
    pub height_px: u32,
    split: bool,
    draw: DrawBand<'a>,
}

impl<'a> Band<'a> {
    /// A plot on the left and its legend strip beside it.
    pub fn new(height_px: u32, draw: impl FnOnce(&Area, &Area) -> Result<()> + 'a) -> Band<'a> {
        Band {
            height_px,
            split: true,
            draw: Box::new(draw),
        }
    }

    /// A strip drawn across the whole width (a header, a key).
    pub fn whole(height_px: u32, draw: impl FnOnce(&Area) -> Result<()> + 'a) -> Band<'a> {
        Band {
            height_px,
            split: false,
            draw: Box::new(move |area, _| draw(area)),
        }
    }
}

/// Height of a stack of bands.
pub fn stack_height(bands: &[Band]) -> u32 {
    bands.iter().map(|b| b.height_px).sum::<u32>().max(1)
}

/// Draws `bands` top-down into `root`.
pub fn draw_stack(root: &Area, bands: Vec<Band>) -> Result<()> {
    let mut rest = root.clone();
    for band in bands {
        let (this, below) = rest.split_vertically(band.height_px);
        if band.split {
            let (plot, side) = this.split_horizontally(PLOT_WIDTH);
            (band.draw)(&plot, &side)?;
        } else {
            (band.draw)(&this, &this)?;
        }
        rest = below;
    }
    Ok(())
}

/// Writes a chart made of `bands` to `path`, [`WIDTH`] wide and as tall as they are.
pub fn write_chart(path: &std::path::Path, bands: Vec<Band>) -> Result<()> {
    let height = stack_height(&bands);
    write_png(path, WIDTH, height, |root| draw_stack(root, bands))
}

/// The title line and grey lines under it.
pub fn header<'a>(title: String, lines: Vec<String>) -> Band<'a> {
    let height = 44 + 24 * lines.len() as u32;
    Band::whole(height, move |area| {
        area.draw_text(&title, &(FONT, 24).into_font().color(&BLACK), (16, 10))
            .map_err(plot_err)?;
        let grey = (FONT, 15).into_font().color(&GREY_TEXT);
        for (i, line) in lines.iter().enumerate() {
            area.draw_text(line, &grey, (16, 42 + 24 * i as i32))
                .map_err(plot_err)?;
        }
        Ok(())
    })
}

/// The band of a `Panel::NotMeasured`: a note in place of the panels of a
/// resource no run measured ("VRAM not measured: …"), never a line at zero.
pub fn not_measured<'a>(text: String) -> Band<'a> {
    Band::new(NOTE_HEIGHT, move |plot, _| draw_not_measured(plot, &text))
}

/// Draws `text` in a light box filling `area` (inside the plot margins).
pub fn draw_not_measured(area: &Area, text: &str) -> Result<()> {
    let (w, h) = area.dim_in_pixel();
    let (x0, x1) = ((Y_LABEL_AREA + MARGIN) as i32, w as i32 - MARGIN as i32);
    let (y0, y1) = (4, h as i32 - 4);
    area.draw(&Rectangle::new(
        [(x0, y0), (x1, y1)],
        RGBColor(250, 244, 236).filled(),
    ))
    .map_err(plot_err)?;
    area.draw(&Rectangle::new(
        [(x0, y0), (x1, y1)],
        RGBColor(215, 160, 90).stroke_width(1),
    ))
    .map_err(plot_err)?;
    let size = if h >= 40 { 16 } else { 13 };
    area.draw_text(
        text,
        &(FONT, size).into_font().color(&RGBColor(140, 70, 0)),
        (x0 + 14, (y0 + y1) / 2 - size / 2 - 1),
    )
    .map_err(plot_err)?;
    Ok(())
}

/// The start of cycle 1 on a run's own clock: its first `load` begin with a
/// cycle ≥ 1 (else its first edge of a cycle ≥ 1); `None` when it never got there.
pub fn cycle_one_s(run: &RunRecord) -> Option<f64> {
    let in_cycles = || run.events.iter().filter(|e| e.edge.cycle >= 1);
    in_cycles()
        .find(|e| e.edge.phase == Phase::Load && e.edge.edge == Edge::Begin)
        .or_else(|| in_cycles().next())
        .map(|e| e.t_s)
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

/// One shared time axis: x = 0 is the start of cycle 1 of every run; x < 0
/// is the time before it, squeezed into a stub when it is long.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeAxis {
    /// How far the axis reaches left of 0, in axis units (seconds when not squeezed).
    pub lead_in: f64,
    /// Seconds from the start of cycle 1 to the end of the longest run.
    pub end_s: f64,
    /// The time before cycle 1 is squeezed into the stub (not to scale).
    pub squeezed: bool,
}

/// Maps one run's clock onto a [`TimeAxis`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RunClock {
    /// The start of cycle 1 on the run's clock (its end when it never got there).
    pub cycle_one_s: f64,
    /// Axis units per second before cycle 1 (1 at real scale).
    pub lead_in_scale: f64,
}

impl RunClock {
    /// Where the run's time `t_s` lies on the axis.
    pub fn x(&self, t_s: f64) -> f64 {
        let from_cycle_one = t_s - self.cycle_one_s;
        if from_cycle_one >= 0.0 {
            from_cycle_one
        } else {
            from_cycle_one * self.lead_in_scale
        }
    }
}

impl TimeAxis {
    /// The axis for `runs`, drawn `plot_px` pixels wide.
    pub fn new(runs: &[&RunRecord], plot_px: u32) -> TimeAxis {
        let lead_in_s = runs.iter().map(|r| lead_in_s(r)).fold(0.0, f64::max);
        let end_s = runs
            .iter()
            .map(|r| run_end_s(r) - lead_in_s_of(r))
            .fold(0.001, f64::max);
        let plot_px = f64::from(plot_px.max(STUB_PX * 2));
        let stub_px = f64::from(STUB_PX);
        let real_px = lead_in_s / (lead_in_s + end_s) * plot_px;
        if real_px <= stub_px {
            TimeAxis {
                lead_in: lead_in_s,
                end_s,
                squeezed: false,
            }
        } else {
            TimeAxis {
                lead_in: end_s * stub_px / (plot_px - stub_px),
                end_s,
                squeezed: true,
            }
        }
    }

    /// The axis of a plot as wide as the charts' plots ([`PLOT_WIDTH`] less the labels).
    pub fn for_plots(runs: &[&RunRecord]) -> TimeAxis {
        TimeAxis::new(runs, PLOT_WIDTH - Y_LABEL_AREA - 2 * MARGIN)
    }

    pub fn range(&self) -> Range<f64> {
        -self.lead_in..self.end_s
    }

    /// How `run` maps onto this axis: its time before cycle 1 is squeezed only
    /// as much as it must be to fit the stub.
    pub fn clock(&self, run: &RunRecord) -> RunClock {
        let before = lead_in_s_of(run);
        let lead_in_scale = if before > self.lead_in && before > 0.0 {
            self.lead_in / before
        } else {
            1.0
        };
        RunClock {
            cycle_one_s: before,
            lead_in_scale,
        }
    }

    /// An axis label: blank inside a squeezed stub (it is not to scale there).
    pub fn tick_label(&self, x: f64) -> String {
        if self.squeezed && x < -1e-9 {
            return String::new();
        }
        let span = self.end_s + self.lead_in;
        let x = if x.abs() < 1e-9 { 0.0 } else { x };
        if span < 0.5 {
            format!("{x:.2}")
        } else if span <= 60.0 {
            format!("{x:.1}")
        } else {
            format!("{x:.0}")
        }
    }
}

/// Seconds before cycle 1 (the whole run when it never got there; none for
/// a program that marked no phases: its whole run is one phase from t = 0).
fn lead_in_s_of(run: &RunRecord) -> f64 {
    cycle_one_s(run).unwrap_or_else(|| {
        if run.events.is_empty() {
            0.0
        } else {
            run_end_s(run)
        }
    })
}

/// Seconds from the worker's start to its cycle 1, for the stub's label.
pub fn lead_in_s(run: &RunRecord) -> f64 {
    lead_in_s_of(run)
}

/// What the time before cycle 1 held: `warm-up` when the worker warmed up,
/// else `start`.
pub fn lead_in_name(run: &RunRecord) -> &'static str {
    if run.events.iter().any(|e| e.edge.phase == Phase::Warmup) {
        "warm-up"
    } else {
        "start"
    }
}

/// How a time panel looks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PanelStyle<'s> {
    pub y_desc: Option<&'s str>,
    /// Draw the x axis with its labels (and this description).
    pub x_axis: Option<&'s str>,
    /// A compact lane: four y labels, small text, no labels below 0.
    pub lane: bool,
    pub margin_top: u32,
}

impl<'s> PanelStyle<'s> {
    /// A full panel with a y description (and an x axis when `x_desc` is given).
    pub fn main(y_desc: &'s str, x_desc: Option<&'s str>) -> PanelStyle<'s> {
        PanelStyle {
            y_desc: Some(y_desc),
            x_axis: x_desc,
            lane: false,
            margin_top: MARGIN,
        }
    }

    /// A compact lane of a stack of lanes.
    pub fn lane() -> PanelStyle<'static> {
        PanelStyle {
            y_desc: None,
            x_axis: None,
            lane: true,
            margin_top: 4,
        }
    }
}

/// A time panel on `area` over `axis` and the y range `y` (MiB), its mesh drawn.
pub fn time_panel<'a, 'b>(
    area: &'a Area<'b>,
    axis: &TimeAxis,
    y: Range<f64>,
    style: PanelStyle,
) -> Result<Chart<'a, 'b>> {
    let x_label_area = match style.x_axis {
        Some("") => 28,
        Some(_) => 42,
        None => 0,
    };
    let mut chart = ChartBuilder::on(area)
        .margin_left(MARGIN)
        .margin_right(MARGIN)
        .margin_top(style.margin_top)
        .margin_bottom(4)
        .x_label_area_size(x_label_area)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(axis.range(), y)
        .map_err(plot_err)?;
    let x_label = |x: &f64| axis.tick_label(*x);
    let lane_label = |y: &f64| {
        if *y < 0.0 {
            String::new()
        } else {
            format!("{y:.0}")
        }
    };
    let main_label = |y: &f64| format!("{y:.1}");
    let mut mesh = chart.configure_mesh();
    mesh.x_label_formatter(&x_label);
    if style.lane {
        mesh.disable_x_mesh()
            .y_labels(4)
            .y_label_formatter(&lane_label)
            .label_style((FONT, 12))
            .light_line_style(WHITE)
            .bold_line_style(RGBColor(235, 235, 235));
    } else {
        mesh.y_label_formatter(&main_label)
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 16))
            .light_line_style(RGBColor(242, 242, 242));
    }
    if let Some(desc) = style.y_desc {
        mesh.y_desc(desc);
    }
    match style.x_axis {
        None => {
            mesh.disable_x_axis();
        }
        Some("") => {}
        Some(desc) => {
            mesh.x_desc(desc);
        }
    }
    mesh.draw().map_err(plot_err)?;
    if axis.squeezed {
        draw_stub_edge(&mut chart, axis)?;
    }
    Ok(chart)
}

/// Marks where the squeezed stub ends and real time begins: a thin line at 0.
fn draw_stub_edge(chart: &mut Chart, axis: &TimeAxis) -> Result<()> {
    let (y0, y1) = {
        let r = chart.y_range();
        (r.start, r.end)
    };
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(-axis.lead_in, y0), (0.0, y1)],
            RGBColor(248, 246, 252).filled(),
        )))
        .map_err(plot_err)?;
    chart
        .draw_series(DashedLineSeries::new(
            vec![(0.0, y0), (0.0, y1)],
            4,
            4,
            RGBColor(150, 150, 150).stroke_width(1),
        ))
        .map_err(plot_err)?;
    Ok(())
}

/// Text under the squeezed stub of a panel with an x axis, where its tick
/// labels would be (it has none: it is not to scale), one line per item;
/// nothing when the axis is not squeezed. Never over the data.
pub fn label_stub(chart: &mut Chart, axis: &TimeAxis, lines: &[String]) -> Result<()> {
    if !axis.squeezed || lines.is_empty() {
        return Ok(());
    }
    let bottom = chart.y_range().start;
    let font = (FONT, 12).into_font().color(&RGBColor(95, 80, 130));
    chart
        .draw_series(lines.iter().enumerate().map(|(i, line)| {
            EmptyElement::at((-axis.lead_in, bottom))
                + Text::new(line.clone(), (2, 4 + 13 * i as i32), font.clone())
        }))
        .map_err(plot_err)?;
    Ok(())
}

/// The stub's lines for one run: `warm-up` and its real duration.
pub fn stub_lines(run: &RunRecord) -> Vec<String> {
    vec![
        lead_in_name(run).to_string(),
        format!("{:.1} s", lead_in_s(run)),
    ]
}

/// The stub's lines for several runs: what came before cycle 1 and the longest.
pub fn stub_lines_of(runs: &[&RunRecord]) -> Vec<String> {
    let longest = runs.iter().map(|r| lead_in_s(r)).fold(0.0, f64::max);
    let warmed = runs.iter().any(|r| lead_in_name(r) == "warm-up");
    vec![
        if warmed { "warm-up" } else { "start" }.to_string(),
        format!("≤ {longest:.1} s"),
    ]
}

/// Shades spans `(x0, x1, colour)` over the full height of `chart`, or over
/// `y` when given (a ribbon).
pub fn shade(
    chart: &mut Chart,
    spans: impl IntoIterator<Item = (f64, f64, RGBColor)>,
    y: Option<(f64, f64)>,
) -> Result<()> {
    let (y0, y1) = y.unwrap_or_else(|| {
        let r = chart.y_range();
        (r.start, r.end)
    });
    chart
        .draw_series(
            spans
                .into_iter()
                .map(|(x0, x1, c)| Rectangle::new([(x0, y0), (x1.max(x0), y1)], c.filled())),
        )
        .map_err(plot_err)?;
    Ok(())
}

/// Where a level's label sits: above or under its right end, or under its
/// left end (just right of the stub, at the start of cycle 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabelAt {
    Right,
    /// Under the right end (where the space above is taken).
    BelowRight,
    /// Under the left end.
    BelowLeft,
}

/// A dashed horizontal level across the whole panel, its label above one end
/// (baseline, context floor, threshold).
pub fn draw_level(
    chart: &mut Chart,
    y: f64,
    label: Option<(&str, LabelAt)>,
    colour: RGBColor,
) -> Result<()> {
    let x = chart.x_range();
    chart
        .draw_series(DashedLineSeries::new(
            vec![(x.start, y), (x.end, y)],
            8,
            6,
            colour.stroke_width(1),
        ))
        .map_err(plot_err)?;
    if let Some((text, at)) = label {
        let font = (FONT, 13).into_font().color(&colour);
        let width = 7 * text.chars().count() as i32;
        let (anchor, dx, dy) = match at {
            LabelAt::Right => ((x.end, y), -width - 6, -16),
            LabelAt::BelowRight => ((x.end, y), -width - 6, 4),
            LabelAt::BelowLeft => ((x.start.max(0.0), y), 6, 4),
        };
        chart
            .draw_series(std::iter::once(
                EmptyElement::at(anchor) + Text::new(text.to_string(), (dx, dy), font),
            ))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// A lane's label in its strip: a swatch, the name in its colour, grey lines under it.
pub fn draw_lane_label(
    area: &Area,
    colour: RGBColor,
    name: &str,
    lines: &[String],
    marker: bool,
) -> Result<()> {
    let (w, h) = area.dim_in_pixel();
    // Wrapped to the strip's width: a label is never clipped.
    let room = w.saturating_sub(42 + 6).max(1);
    let lines: Vec<String> = lines
        .iter()
        .flat_map(|l| super::png::wrap_text(l, 12, room))
        .collect();
    let block = 21 + 16 * lines.len() as i32;
    let y = (h as i32 - block) / 2;
    if marker {
        area.draw(&Circle::new((21, y + 8), 5, colour.filled()))
            .map_err(plot_err)?;
    } else {
        area.draw(&Rectangle::new(
            [(10, y + 4), (32, y + 14)],
            colour.filled(),
        ))
        .map_err(plot_err)?;
    }
    area.draw_text(name, &(FONT, 15).into_font().color(&colour), (42, y))
        .map_err(plot_err)?;
    let detail = (FONT, 12).into_font().color(&RGBColor(90, 90, 90));
    for (i, text) in lines.iter().enumerate() {
        area.draw_text(text, &detail, (42, y + 21 + 16 * i as i32))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// A small grey tag at the left edge of a lane's label area ("VRAM", "RSS").
pub fn draw_lane_tag(area: &Area, tag: &str) -> Result<()> {
    let (_, h) = area.dim_in_pixel();
    area.draw_text(
        tag,
        &(FONT, 11).into_font().color(&RGBColor(120, 120, 120)),
        (4, h as i32 / 2 - 6),
    )
    .map_err(plot_err)?;
    Ok(())
}

/// The shared time axis drawn once under a stack of lanes.
pub fn time_axis_band<'a>(axis: TimeAxis, desc: String, stub: Vec<String>) -> Band<'a> {
    Band::new(64, move |plot, _| {
        let strip = TimeStrip {
            x_label_px: 58,
            margin_px: 0,
            rows: 1.0,
            desc: Some(&desc),
        };
        let mut chart = time_strip(plot, &axis, &strip)?;
        label_stub(&mut chart, &axis, &stub)
    })
}

/// The shape of a [`time_strip`].
pub struct TimeStrip<'s> {
    /// Room for the time labels (and `desc`) under the strip.
    pub x_label_px: u32,
    /// Margin above and below the strip.
    pub margin_px: u32,
    /// The y range is `0.0..rows`.
    pub rows: f64,
    /// The x axis description, if any.
    pub desc: Option<&'s str>,
}

/// A strip on the shared time axis with no y axis and no mesh (the time axis
/// band, the phase ribbons): its time labels drawn.
pub fn time_strip<'a, 'b>(
    area: &'a Area<'b>,
    axis: &TimeAxis,
    strip: &TimeStrip,
) -> Result<Chart<'a, 'b>> {
    let mut chart = ChartBuilder::on(area)
        .margin_left(MARGIN)
        .margin_right(MARGIN)
        .margin_top(strip.margin_px)
        .margin_bottom(strip.margin_px)
        .x_label_area_size(strip.x_label_px)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(axis.range(), 0.0..strip.rows)
        .map_err(plot_err)?;
    let label = |x: &f64| axis.tick_label(*x);
    let mut mesh = chart.configure_mesh();
    mesh.disable_mesh()
        .disable_y_axis()
        .x_label_formatter(&label)
        .label_style((FONT, 15));
    if let Some(desc) = strip.desc {
        mesh.x_desc(desc).axis_desc_style((FONT, 16));
    }
    mesh.draw().map_err(plot_err)?;
    Ok(chart)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixture;

    /// A fixture run whose cycle 1 starts `lead_in_s` after the worker started.
    fn run_starting_at(lead_in_s: f64) -> RunRecord {
        let mut run = fixture::run(1, "sync", 1, &[0, 0, 0]);
        let shift = lead_in_s - cycle_one_s(&run).unwrap();
        for e in run.events.iter_mut().filter(|e| e.edge.cycle >= 1) {
            e.t_s += shift;
        }
        for s in run.samples.iter_mut().filter(|s| s.t_s > 0.1) {
            s.t_s += shift;
        }
        run
    }

    #[test]
    fn cycle_one_starts_at_the_first_load_of_cycle_one() {
        let run = fixture::run(1, "drop", 1, &[2, 2]);
        // The fixture's baseline ends at 0.1 s and cycle 1 loads 0.1 µs later.
        assert_eq!(cycle_one_s(&run), Some(0.1 + 0.0000001));
        let mut warm_only = run.clone();
        warm_only.events.retain(|e| e.edge.cycle == 0);
        assert_eq!(cycle_one_s(&warm_only), None);
        // Never reached cycle 1: all of it lies before 0.
        let axis = TimeAxis::for_plots(&[&warm_only]);
        assert_eq!(axis.clock(&warm_only).x(run_end_s(&warm_only)), 0.0);
    }

    #[test]
    fn a_long_warm_up_is_squeezed_and_cycles_start_at_zero() {
        let jit = run_starting_at(21.3);
        let quick = run_starting_at(0.4);
        let axis = TimeAxis::new(&[&jit, &quick], 1200);
        assert!(axis.squeezed);
        // Cycles take ~3.05 s after cycle 1 starts, whatever came before.
        assert!((axis.end_s - 3.05).abs() < 0.01, "{axis:?}");
        // The stub is STUB_PX of 1200 px: lead_in / (lead_in + end) = 96 / 1200.
        let share = axis.lead_in / (axis.lead_in + axis.end_s);
        assert!((share - 96.0 / 1200.0).abs() < 1e-9, "{share}");
        for run in [&jit, &quick] {
            let clock = axis.clock(run);
            assert!((clock.x(cycle_one_s(run).unwrap())).abs() < 1e-12);
            // The worker's start lands on the stub's left edge or inside it.
            let start = clock.x(0.0);
            assert!(start >= -axis.lead_in - 1e-9 && start < 0.0, "{start}");
            // After cycle 1, real seconds.
            assert!((clock.x(cycle_one_s(run).unwrap() + 2.0) - 2.0).abs() < 1e-9);
        }
        assert!((axis.clock(&jit).x(0.0) + axis.lead_in).abs() < 1e-9);
        assert_eq!(axis.tick_label(-0.1), "");
        assert_eq!(axis.tick_label(1.0), "1.0");
    }

    #[test]
    fn a_short_start_stays_at_real_scale() {
        let run = run_starting_at(0.2);
        let axis = TimeAxis::new(&[&run], 1200);
        assert!(!axis.squeezed);
        assert!((axis.lead_in - 0.2).abs() < 1e-6);
        let clock = axis.clock(&run);
        assert_eq!(clock.lead_in_scale, 1.0);
        assert!((clock.x(0.05) + 0.15).abs() < 1e-6);
        assert_eq!(axis.tick_label(-0.1), "-0.1");
    }

    #[test]
    fn the_stub_names_the_warm_up_and_its_real_length() {
        let mut run = run_starting_at(21.3);
        assert_eq!(stub_lines(&run), vec!["start".to_string(), "21.3 s".into()]);
        run.events[0].edge.phase = Phase::Warmup;
        assert_eq!(lead_in_name(&run), "warm-up");
    }

    #[test]
    fn bands_stack_to_their_total_height() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("c.png");
        let bands = vec![
            header("t".into(), vec!["a".into()]),
            not_measured("VRAM not measured: no nvml".into()),
            Band::new(30, |_, _| Ok(())),
        ];
        assert_eq!(stack_height(&bands), 68 + NOTE_HEIGHT + 30);
        write_chart(&path, bands).unwrap();
        let png = std::fs::read(&path).unwrap();
        let height = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
        assert_eq!(height, 68 + NOTE_HEIGHT + 30);
    }
}
