//! `retained.png`: retained MiB after each cycle, one lane per strategy in its
//! fixed colour, all lanes on the same cycle and MiB axes: the median over
//! repetitions as dots on a line, the min–max over repetitions as a bar. A
//! growing leak is a rising line, a flat one-time cost a level line, an
//! occasional retention a tall bar over a low dot; lanes keep strategies from
//! hiding each other.
//!
//! Draws [`Comparison`] values only (`StrategySummary::retained_by_cycle`).

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::palette::{lighten, strategy_colour};
use super::png::{plot_err, write_png, Area, FONT, LEGEND_WIDTH};
use crate::metrics::comparison::{Comparison, Row};
use crate::textutil::MIB;

const WIDTH: u32 = 1600;
const HEADER_HEIGHT: u32 = 76;
const LANE_HEIGHT: u32 = 112;
const AXIS_HEIGHT: u32 = 60;
const Y_LABEL_AREA: u32 = 80;
const MARGIN: u32 = 12;

/// The axes every lane shares.
struct Axes {
    last_cycle: u32,
    y_min_mib: f64,
    y_max_mib: f64,
    threshold_mib: f64,
}

/// Draws `retained.png` for `comparison` at `path`.
pub fn write_retained_chart(comparison: &Comparison, path: &Path) -> Result<()> {
    let rows = &comparison.rows;
    let last_cycle = rows
        .iter()
        .flat_map(|r| r.summary.host().retained_by_cycle.iter().map(|c| c.cycle))
        .max()
        .unwrap_or(1)
        .max(1);
    let threshold_mib = comparison.retention_threshold_bytes as f64 / MIB;
    let (lo, hi) = rows
        .iter()
        .flat_map(|r| r.summary.host().retained_by_cycle.iter())
        .flat_map(|c| [c.spread.min / MIB, c.spread.max / MIB])
        .fold((0.0f64, threshold_mib), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    let pad = ((hi - lo) * 0.12).max(1.0);
    let axes = Axes {
        last_cycle,
        y_min_mib: if lo < 0.0 { lo - pad } else { 0.0 },
        y_max_mib: hi + pad,
        threshold_mib,
    };
    let repetitions = comparison
        .sources
        .iter()
        .map(|s| s.repetitions)
        .max()
        .unwrap_or(0);
    let lanes_height = LANE_HEIGHT * rows.len().max(1) as u32;
    let height = HEADER_HEIGHT + lanes_height + AXIS_HEIGHT;

    write_png(path, WIDTH, height, |root| {
        let (header, rest) = root.split_vertically(HEADER_HEIGHT);
        let (lanes, axis) = rest.split_vertically(lanes_height);
        header
            .draw_text(
                &format!(
                    "memrel retained after each cycle · scenario {} · device {}",
                    comparison.scenario, comparison.device
                ),
                &(FONT, 24).into_font().color(&BLACK),
                (16, 10),
            )
            .map_err(plot_err)?;
        header
            .draw_text(
                &format!(
                    "retained = RSS after the release and settle − RSS before the first load · dot: median over \
                     {repetitions} repetition(s), bar: min–max · dashed: retention threshold {threshold_mib:.0} MiB · \
                     rising = leak, level = one-time cost"
                ),
                &(FONT, 15).into_font().color(&RGBColor(80, 80, 80)),
                (16, 44),
            )
            .map_err(plot_err)?;
        for (area, row) in lanes.split_evenly((rows.len().max(1), 1)).iter().zip(rows) {
            let (plot, label) = area.split_horizontally(WIDTH - LEGEND_WIDTH);
            draw_lane(&plot, row, &axes)?;
            draw_label(&label, row)?;
        }
        let (axis_plot, _) = axis.split_horizontally(WIDTH - LEGEND_WIDTH);
        draw_cycle_axis(&axis_plot, &axes)
    })
}

fn x_range(axes: &Axes) -> std::ops::Range<f64> {
    0.5..(f64::from(axes.last_cycle) + 0.5)
}

fn draw_lane(area: &Area, row: &Row, axes: &Axes) -> Result<()> {
    let colour = strategy_colour(&row.strategy);
    let mut chart = ChartBuilder::on(area)
        .margin_left(MARGIN)
        .margin_right(MARGIN)
        .margin_top(16)
        .margin_bottom(4)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(x_range(axes), axes.y_min_mib..axes.y_max_mib)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_x_axis()
        .y_labels(3)
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style((FONT, 12))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(232, 232, 232))
        .draw()
        .map_err(plot_err)?;
    // Cycle separators, so a dot reads against its cycle.
    chart
        .draw_series((1..axes.last_cycle).map(|c| {
            let x = f64::from(c) + 0.5;
            PathElement::new(
                vec![(x, axes.y_min_mib), (x, axes.y_max_mib)],
                RGBColor(240, 240, 240),
            )
        }))
        .map_err(plot_err)?;
    let grey = RGBColor(110, 110, 110);
    let (x0, x1) = (x_range(axes).start, x_range(axes).end);
    chart
        .draw_series(DashedLineSeries::new(
            vec![(x0, axes.threshold_mib), (x1, axes.threshold_mib)],
            6,
            5,
            grey.stroke_width(1),
        ))
        .map_err(plot_err)?;
    let cycles = &row.summary.host().retained_by_cycle;
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

fn draw_label(area: &Area, row: &Row) -> Result<()> {
    let colour = strategy_colour(&row.strategy);
    let s = &row.summary;
    let (_, h) = area.dim_in_pixel();
    let y = h as i32 / 2 - 28;
    area.draw(&Circle::new((21, y + 8), 5, colour.filled()))
        .map_err(plot_err)?;
    area.draw_text(&row.label, &(FONT, 15).into_font().color(&colour), (42, y))
        .map_err(plot_err)?;
    let h = s.host();
    let last = h
        .retained_bytes
        .as_ref()
        .map(|x| format!("{:.1} MiB", x.median / MIB))
        .unwrap_or_else(|| "–".into());
    let growth = h
        .retained_slope_bytes_per_cycle
        .as_ref()
        .map(|x| format!("{} MiB/cycle", signed(x.median / MIB)))
        .unwrap_or_else(|| "–".into());
    let detail = (FONT, 12).into_font().color(&RGBColor(90, 90, 90));
    let lines = [
        format!("last {last} · growth {growth}"),
        format!(
            "retained in {}/{} cycles, {}/{} processes",
            h.cycles_retaining, h.cycles_total, h.processes_retaining, s.runs
        ),
    ];
    for (i, text) in lines.iter().enumerate() {
        area.draw_text(text, &detail, (42, y + 21 + 16 * i as i32))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// The shared cycle axis under the lanes.
fn draw_cycle_axis(area: &Area, axes: &Axes) -> Result<()> {
    let mut chart = ChartBuilder::on(area)
        .margin_left(MARGIN)
        .margin_right(MARGIN)
        .x_label_area_size(AXIS_HEIGHT - 6)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(x_range(axes), 0.0..1.0)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .disable_y_axis()
        .x_labels(axes.last_cycle.min(25) as usize + 1)
        .x_label_formatter(&|x| {
            if (x - x.round()).abs() < 1e-6 && *x >= 1.0 {
                format!("{:.0}", x)
            } else {
                String::new()
            }
        })
        .x_desc("cycle")
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(plot_err)?;
    Ok(())
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

    #[test]
    fn growth_has_a_sign_but_zero_has_none() {
        assert_eq!(signed(1.25), "+1.2");
        assert_eq!(signed(-22.8), "-22.8");
        assert_eq!(signed(-0.01), "0.0");
    }
}
