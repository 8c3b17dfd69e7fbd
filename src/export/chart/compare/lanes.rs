//! The lanes of `compare.png`: one per strategy, a sub-lane per resource
//! on its own scale, the strategy's phases as a ribbon, and the text beside
//! each lane. Draws only, as the rest of the chart.

use super::*;
use crate::metrics::resource::Draw;
use crate::metrics::ResourceFacts;
use crate::record::Part;

/// One strategy's lane: a sub-lane per resource, the phases under the last one.
pub(super) fn draw_lane(
    area: &Area,
    l: &Line,
    axis: &TimeAxis,
    resources: &[Resource],
    lines: &[Line],
) -> Result<()> {
    if resources.is_empty() {
        return Ok(());
    }
    let n = resources.len() as u32;
    let (_, h) = area.dim_in_pixel();
    let sub = h / n;
    let mut rest = area.clone();
    for (i, &r) in resources.iter().enumerate() {
        let last = i + 1 == resources.len();
        let (this, below) = if last {
            (rest.clone(), rest.clone())
        } else {
            rest.split_vertically(sub)
        };
        if n > 1 {
            draw_lane_tag(&this, r.quantity())?;
        }
        match l.row.summary.resource(r) {
            Some(s) if s.not_measured.is_none() => {
                draw_sub_lane(&this, l, axis, r, lines, last)?;
            }
            other => {
                let why = other
                    .and_then(|s| s.not_measured.clone())
                    .unwrap_or_else(|| format!("{} not measured in this source", r.quantity()));
                draw_not_measured(&this, &why)?;
            }
        }
        rest = below;
    }
    Ok(())
}

/// One resource of one lane: host RSS as anon + file, a device as a filled
/// line over its floor; with the phase ribbon under zero when it is the last.
pub(super) fn draw_sub_lane(
    area: &Area,
    l: &Line,
    axis: &TimeAxis,
    r: Resource,
    lines: &[Line],
    ribbon: bool,
) -> Result<()> {
    let y_max = y_max_mib(lines, r, 1.06);
    let y_min = if ribbon { -y_max * RIBBON_SHARE } else { 0.0 };
    let mut chart = time_panel(area, axis, y_min..y_max, PanelStyle::lane())?;
    let clock = l.clock;
    let x = move |t: f64| clock.x(t);
    let range = (-axis.lead_in, axis.end_s);
    let columns = PLOT_WIDTH as usize;
    let look = r.look();
    if look.draw == Draw::Stacked {
        let parts: Vec<Part> = look.parts.iter().map(|p| p.part).collect();
        let tops = stacked_mib(l.run, r, &parts, x, range, columns);
        let mut below = None;
        for (i, top) in tops.iter().enumerate() {
            let fill = if i == 0 { 0.25 } else { 0.7 };
            chart
                .draw_series(std::iter::once(Polygon::new(
                    band(top, below),
                    lighten(l.colour, fill).filled(),
                )))
                .map_err(plot_err)?;
            below = Some(top);
        }
        if let Some(whole) = tops.last() {
            chart
                .draw_series(LineSeries::new(whole.clone(), l.colour.stroke_width(1)))
                .map_err(plot_err)?;
        }
    } else {
        // Too low for lines: every other look is an area over its floor.
        let line = l.series(r, axis);
        chart
            .draw_series(std::iter::once(Polygon::new(
                area_to_zero(&line),
                lighten(l.colour, 0.45).filled(),
            )))
            .map_err(plot_err)?;
        chart
            .draw_series(LineSeries::new(line, l.colour.stroke_width(1)))
            .map_err(plot_err)?;
        if let Some(floor) = l
            .row
            .summary
            .resource(r)
            .and_then(|s| s.floor_bytes.as_ref())
        {
            draw_level(&mut chart, floor.median / MIB, None, LEVEL_GREY)?;
        }
    }
    if ribbon {
        let (top, bottom) = (y_min * 0.15, y_min * 0.9);
        shade(
            &mut chart,
            [(
                l.clock.x(0.0),
                l.clock.x(run_end_s(l.run)),
                RGBColor(246, 246, 246),
            )],
            Some((bottom, top)),
        )?;
        shade(&mut chart, ribbon_spans(l), Some((bottom, top)))?;
    }
    Ok(())
}

/// The grey lines of a lane's label: per resource, what it retained.
pub(super) fn lane_lines(line: &Line, resources: &[Resource], axis: &TimeAxis) -> Vec<String> {
    let row = line.row;
    let many = resources.len() > 1;
    let mut lines: Vec<String> = resources
        .iter()
        .map(|&r| {
            let prefix = if many {
                format!("{} ", r.quantity())
            } else {
                String::new()
            };
            match row.summary.resource(r) {
                Some(s) if s.not_measured.is_none() => {
                    let look = r.look();
                    if look.cache {
                        format!(
                            "{prefix}after unload {} MiB · after release {} MiB",
                            median_mib(&s.after_unload_bytes),
                            median_mib(&s.after_release_bytes)
                        )
                    } else if look.primary {
                        format!(
                            "{prefix}retained {} MiB, of it anon {} MiB",
                            median_mib(&s.retained_bytes),
                            median_mib(&s.retained_anon_bytes)
                        )
                    } else {
                        format!(
                            "{prefix}retained {} MiB · peak {} MiB",
                            median_mib(&s.retained_bytes),
                            median_mib(&s.peak_bytes)
                        )
                    }
                }
                _ => format!("{} not measured", r.quantity()),
            }
        })
        .collect();
    if axis.squeezed {
        // The stub is not to scale: say how long this run took to reach cycle 1.
        lines.push(format!(
            "{} {:.1} s before cycle 1 (squeezed)",
            frame::lead_in_name(line.run),
            frame::lead_in_s(line.run)
        ));
    }
    lines
}
