//! `retained.png`: retained MiB after each cycle, one lane per strategy in its
//! fixed colour, all lanes on the same cycle and MiB axes: the median over
//! repetitions as dots on a line, the min–max over repetitions as a bar. A
//! growing leak is a rising line, a flat one-time cost a level line, an
//! occasional retention a tall bar over a low dot; lanes keep strategies from
//! hiding each other.
//!
//! One column per measured resource, side by side on the same cycle axis (the
//! comparison's lead first: on CUDA, VRAM beside host RSS), each on its own
//! MiB axis. Retained can be negative (`context-release` ends below its
//! baseline): the axis reaches below zero then, and zero is drawn. A resource
//! no run measured is a note, never a line at zero.
//!
//! Draws [`Comparison`] values only (`ResourceSummary::retained_by_cycle`).

use crate::metrics::ResourceFacts;
use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::cycles::{cycle_panel, cycle_range, draw_cycle_axis};
use super::frame::{self, draw_lane_label, draw_not_measured, header, Band, Chart, LEVEL_GREY};
use super::palette::{lighten, strategy_colour};
use super::png::{plot_err, Area, FONT};
use super::{measured_in, notes_first};
use crate::metrics::comparison::{Comparison, Row};
use crate::metrics::{Resource, ResourceSummary};
use crate::textutil::MIB;

const LANE_HEIGHT: u32 = 112;
const TITLES_HEIGHT: u32 = 26;
const AXIS_HEIGHT: u32 = 60;

/// One panel of the chart, top-down.
#[derive(Debug, Clone, PartialEq)]
pub enum Panel {
    /// A resource no run measured: the reason, in place of its column.
    NotMeasured(Resource, String),
    /// Lanes of retained per cycle, a column per resource.
    Columns(Vec<Resource>),
}

/// Notes for resources nobody measured, then the columns of the measured ones.
pub fn plan(comparison: &Comparison) -> Vec<Panel> {
    notes_first(comparison, Panel::NotMeasured, |measured| {
        vec![Panel::Columns(measured)]
    })
}

/// The axes every lane of one resource shares.
#[derive(Debug, Clone, PartialEq)]
struct Axes {
    resource: Resource,
    last_cycle: u32,
    y_min_mib: f64,
    y_max_mib: f64,
    threshold_mib: f64,
}

fn axes_of(comparison: &Comparison, r: Resource, last_cycle: u32) -> Axes {
    let threshold_mib = comparison.retention_threshold_bytes as f64 / MIB;
    let (lo, hi) = comparison
        .rows
        .iter()
        .filter_map(|row| measured_in(row, r))
        .flat_map(|s| s.retained_by_cycle.iter())
        .flat_map(|c| [c.spread.min / MIB, c.spread.max / MIB])
        .fold((0.0f64, threshold_mib), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    let pad = ((hi - lo) * 0.12).max(1.0);
    Axes {
        resource: r,
        last_cycle,
        y_min_mib: if lo < 0.0 { lo - pad } else { 0.0 },
        y_max_mib: hi + pad,
        threshold_mib,
    }
}

/// Draws `retained.png` for `comparison` at `path`.
pub fn write_retained_chart(comparison: &Comparison, path: &Path) -> Result<()> {
    let rows = &comparison.rows;
    let last_cycle = rows
        .iter()
        .flat_map(|r| r.summary.resources.iter())
        .flat_map(|s| s.retained_by_cycle.iter().map(|c| c.cycle))
        .max()
        .unwrap_or(1)
        .max(1);
    let repetitions = comparison
        .sources
        .iter()
        .map(|s| s.repetitions)
        .max()
        .unwrap_or(0);
    let threshold_mib = comparison.retention_threshold_bytes as f64 / MIB;
    let panels = plan(comparison);
    let columns: Vec<Resource> = panels
        .iter()
        .find_map(|p| match p {
            Panel::Columns(c) => Some(c.clone()),
            Panel::NotMeasured(..) => None,
        })
        .unwrap_or_default();
    let what = if columns.len() > 1 {
        "memory"
    } else {
        columns.first().map(|r| r.quantity()).unwrap_or("RSS")
    };
    let axes: Vec<Axes> = columns
        .iter()
        .map(|&r| axes_of(comparison, r, last_cycle))
        .collect();
    let axes = &axes;
    let mut bands = vec![header(
        format!(
            "memrel retained after each cycle · scenario {} · device {}",
            comparison.scenario, comparison.device
        ),
        vec![format!(
            "retained = {what} after the release and settle − {what} before the first load · dot: median over \
             {repetitions} repetition(s), bar: min–max · dashed: retention threshold {threshold_mib:.0} MiB · \
             rising = leak, level = one-time cost"
        )],
    )];
    for panel in &panels {
        if let Panel::NotMeasured(_, why) = panel {
            bands.push(frame::not_measured(why.clone()));
        }
    }
    if axes.len() > 1 {
        bands.push(Band::new(TITLES_HEIGHT, move |plot, _| {
            draw_column_titles(plot, axes)
        }));
    }
    for row in rows {
        bands.push(Band::new(LANE_HEIGHT, move |plot, label| {
            for (cell, a) in split_columns(plot, axes.len()).iter().zip(axes) {
                match measured_in(row, a.resource) {
                    Some(s) => draw_lane(cell, row, s, a)?,
                    None => {
                        draw_not_measured(cell, &format!("{} not measured", a.resource.quantity()))?
                    }
                }
            }
            draw_lane_label(
                label,
                strategy_colour(&row.strategy),
                &row.label,
                &label_lines(row, axes),
                true,
            )
        }));
    }
    bands.push(Band::new(AXIS_HEIGHT, move |plot, _| {
        for cell in split_columns(plot, axes.len().max(1)) {
            draw_cycle_axis(&cell, last_cycle)?;
        }
        Ok(())
    }));
    frame::write_chart(path, bands)
}

/// `area` split into `n` columns of equal width.
fn split_columns<'a>(area: &Area<'a>, n: usize) -> Vec<Area<'a>> {
    if n <= 1 {
        return vec![area.clone()];
    }
    area.split_evenly((1, n))
}

fn draw_column_titles(area: &Area, axes: &[Axes]) -> Result<()> {
    let font = (FONT, 16).into_font().color(&BLACK);
    for (cell, a) in split_columns(area, axes.len()).iter().zip(axes) {
        cell.draw_text(
            &format!("{} retained (MiB)", a.resource.label()),
            &font,
            (frame::Y_LABEL_AREA as i32 + frame::MARGIN as i32, 4),
        )
        .map_err(plot_err)?;
    }
    Ok(())
}

fn draw_lane(area: &Area, row: &Row, s: &ResourceSummary, axes: &Axes) -> Result<()> {
    let colour = strategy_colour(&row.strategy);
    let mut chart = cycle_panel(area, axes.last_cycle, axes.y_min_mib..axes.y_max_mib)?;
    let range = cycle_range(axes.last_cycle);
    if axes.y_min_mib < 0.0 {
        // Below the line: memory ended below where it started.
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(range.start, 0.0), (range.end, 0.0)],
                RGBColor(170, 170, 170).stroke_width(1),
            )))
            .map_err(plot_err)?;
    }
    chart
        .draw_series(DashedLineSeries::new(
            vec![
                (range.start, axes.threshold_mib),
                (range.end, axes.threshold_mib),
            ],
            6,
            5,
            LEVEL_GREY.stroke_width(1),
        ))
        .map_err(plot_err)?;
    draw_cycles(&mut chart, row, s, colour)
}

fn draw_cycles(chart: &mut Chart, row: &Row, s: &ResourceSummary, colour: RGBColor) -> Result<()> {
    let cycles = &s.retained_by_cycle;
    let bar = lighten(colour, 0.3);
    let cap = 0.12;
    chart
        .draw_series(
            cycles
                .iter()
                .filter(|c| c.spread.max > c.spread.min)
                .flat_map(|c| {
                    let x = f64::from(c.cycle);
                    let (y0, y1) = (c.spread.min / MIB, c.spread.max / MIB);
                    [
                        PathElement::new(vec![(x, y0), (x, y1)], bar.stroke_width(3)),
                        PathElement::new(vec![(x - cap, y0), (x + cap, y0)], bar.stroke_width(2)),
                        PathElement::new(vec![(x - cap, y1), (x + cap, y1)], bar.stroke_width(2)),
                    ]
                }),
        )
        .map_err(plot_err)?;
    let medians: Vec<(f64, f64)> = cycles
        .iter()
        .map(|c| (f64::from(c.cycle), c.spread.median / MIB))
        .collect();
    let line = colour.stroke_width(2);
    if row.source % 2 == 1 {
        chart
            .draw_series(DashedLineSeries::new(medians.clone(), 8, 5, line))
            .map_err(plot_err)?;
    } else {
        chart
            .draw_series(LineSeries::new(medians.clone(), line))
            .map_err(plot_err)?;
    }
    chart
        .draw_series(medians.iter().map(|p| Circle::new(*p, 5, colour.filled())))
        .map_err(plot_err)?;
    Ok(())
}

/// Per resource: the last retained value and its growth, and how often it retained.
fn label_lines(row: &Row, axes: &[Axes]) -> Vec<String> {
    let many = axes.len() > 1;
    let mut lines = Vec::new();
    for a in axes {
        let Some(s) = measured_in(row, a.resource) else {
            lines.push(format!("{} not measured", a.resource.quantity()));
            continue;
        };
        let last = s
            .retained_bytes
            .as_ref()
            .map(|x| format!("{:.1} MiB", x.median / MIB))
            .unwrap_or_else(|| "–".into());
        let growth = s
            .retained_slope_bytes_per_cycle
            .as_ref()
            .map(|x| format!("{} MiB/cycle", signed(x.median / MIB)))
            .unwrap_or_else(|| "–".into());
        let counts = format!(
            "retained in {}/{} cycles, {}/{} processes",
            s.cycles_retaining, s.cycles_total, s.processes_retaining, row.summary.runs
        );
        if many {
            lines.push(format!("{}: last {last} · {growth}", a.resource.quantity()));
            lines.push(format!("    {counts}"));
        } else {
            lines.push(format!("last {last} · growth {growth}"));
            lines.push(counts);
        }
    }
    lines
}

/// `+1.2`, `-3.4`, and `0.0` rather than `-0.0` or `+0.0`.
fn signed(v: f64) -> String {
    let text = format!("{v:+.1}");
    if text == "-0.0" || text == "+0.0" {
        "0.0".to_string()
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::table::tests::comparison_of;
    use crate::record::fixture;

    #[test]
    fn growth_has_a_sign_but_zero_has_none() {
        assert_eq!(signed(1.25), "+1.2");
        assert_eq!(signed(-22.8), "-22.8");
        assert_eq!(signed(-0.01), "0.0");
    }

    #[test]
    fn a_cuda_comparison_puts_vram_beside_rss_and_reaches_below_zero() {
        let c = comparison_of(&fixture::cuda_record());
        let dev = Resource::Device(0);
        assert_eq!(plan(&c), vec![Panel::Columns(vec![dev, Resource::Host])]);
        let vram = axes_of(&c, dev, 3);
        // context-release ends 678 MiB below its baseline; drop keeps 416.
        assert!(vram.y_min_mib < -678.0, "{vram:?}");
        assert!(vram.y_max_mib > 416.0, "{vram:?}");
        let rss = axes_of(&c, Resource::Host, 3);
        assert_eq!(rss.y_min_mib, 0.0);
        let drop = c.rows.iter().find(|r| r.strategy == "drop").unwrap();
        let lines = label_lines(drop, &[vram, rss]);
        assert_eq!(lines[0], "VRAM: last 416.0 MiB · 0.0 MiB/cycle");
        assert!(lines[2].starts_with("RSS: last 1.0 MiB"), "{lines:?}");
    }

    #[test]
    fn a_cpu_comparison_has_one_rss_column() {
        let c = comparison_of(&fixture::record());
        assert_eq!(plan(&c), vec![Panel::Columns(vec![Resource::Host])]);
    }

    #[test]
    fn a_cuda_record_without_vram_says_so_in_place_of_its_column() {
        let mut record = fixture::record();
        record.header.device = "cuda:0".into();
        let c = comparison_of(&record);
        assert_eq!(
            plan(&c),
            vec![
                Panel::NotMeasured(
                    Resource::Device(0),
                    "VRAM not measured: the run has no readings of it".into()
                ),
                Panel::Columns(vec![Resource::Host]),
            ]
        );
    }

    #[test]
    fn a_cuda_retained_chart_renders_at_the_planned_size() {
        let c = comparison_of(&fixture::cuda_record());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("retained.png");
        write_retained_chart(&c, &path).unwrap();
        let png = std::fs::read(&path).unwrap();
        let height = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
        assert_eq!(height, 68 + TITLES_HEIGHT + 3 * LANE_HEIGHT + AXIS_HEIGHT);
    }
}
