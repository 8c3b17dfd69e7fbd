//! The cycle axis of the charts drawn per cycle (retained.png): a lane over
//! cycles with its separators, and the cycle axis drawn once under a stack
//! of them. Part of the frame the charts share (`frame.rs`).

use std::ops::Range;

use anyhow::Result;
use plotters::prelude::*;

use super::frame::{Chart, MARGIN, Y_LABEL_AREA};
use super::png::{plot_err, Area, FONT};

/// The x range of a cycle axis: cycle 1 to `last_cycle`, half a cycle either side.
pub fn cycle_range(last_cycle: u32) -> Range<f64> {
    0.5..(f64::from(last_cycle.max(1)) + 0.5)
}

/// A lane over cycles (retained per cycle), its mesh and cycle separators drawn.
pub fn cycle_panel<'a, 'b>(
    area: &'a Area<'b>,
    last_cycle: u32,
    y: Range<f64>,
) -> Result<Chart<'a, 'b>> {
    let (y0, y1) = (y.start, y.end);
    let mut chart = ChartBuilder::on(area)
        .margin_left(MARGIN)
        .margin_right(MARGIN)
        .margin_top(16)
        .margin_bottom(4)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(cycle_range(last_cycle), y)
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
        .draw_series((1..last_cycle).map(|c| {
            let x = f64::from(c) + 0.5;
            PathElement::new(vec![(x, y0), (x, y1)], RGBColor(240, 240, 240))
        }))
        .map_err(plot_err)?;
    Ok(chart)
}

/// The cycle axis drawn once under lanes of cycles, into `area`.
pub fn draw_cycle_axis(area: &Area, last_cycle: u32) -> Result<()> {
    let (_, h) = area.dim_in_pixel();
    let mut chart = ChartBuilder::on(area)
        .margin_left(MARGIN)
        .margin_right(MARGIN)
        .x_label_area_size(h.saturating_sub(6))
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(cycle_range(last_cycle), 0.0..1.0)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .disable_y_axis()
        .x_labels(last_cycle.min(25) as usize + 1)
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
