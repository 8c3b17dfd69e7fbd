//! `compare.png`: every strategy's timeline on one time axis (time since its
//! worker started), each in its fixed colour.
//!
//! On top, all strategies overlaid: total RSS as a faint line, and bold where
//! the strategy has released and settled, so the level each one comes back to
//! after every cycle stands out even when the load/forward sawtooths (which
//! run at different speeds) cross. Below, one lane per strategy on the same
//! axes: RssAnon filled, RssFile as a lighter band on top of it, and the
//! strategy's phases as a ribbon under it, so the anon/file split and which
//! phases took longer are read lane by lane.
//!
//! Draws the for each strategy its run with the median retained memory (the spread over
//! repetitions is in retained.png and the tables). Draws only: samples go
//! through min/max decimation, values for the legend come from the summary.

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;

use super::chart::{drawn_run, phase_spans, run_end_s};
use super::decimate::{anon_and_rss_mib, area_to_zero, min_max_columns};
use super::palette::{lighten, phase_ribbon_colour, strategy_colour};
use super::png::{draw_legend, plot_err, write_png, Area, LegendEntry, Swatch, FONT, LEGEND_WIDTH};
use crate::metrics::comparison::{Comparison, Row};
use crate::protocol::{Edge, Phase};
use crate::record::{Record, RunRecord};
use crate::textutil::MIB;

const WIDTH: u32 = 1600;
const HEADER_HEIGHT: u32 = 70;
const OVERLAY_HEIGHT: u32 = 500;
const LANE_HEIGHT: u32 = 104;
const AXIS_HEIGHT: u32 = 64;
const FOOTER_HEIGHT: u32 = 36;
const Y_LABEL_AREA: u32 = 80;
const MARGIN: u32 = 12;
/// Share of a lane's height below zero that holds its phase ribbon.
const RIBBON_SHARE: f64 = 0.2;
/// One drawn line: a row of the comparison and its representative run.
struct Line<'a> {
    row: &'a Row,
    run: &'a RunRecord,
    colour: RGBColor,
    dashed: bool,
}

/// Draws `compare.png` at `path`; `records[i]` is source `i` of `comparison`.
pub fn write_compare_chart(
    comparison: &Comparison,
    records: &[&Record],
    path: &Path,
) -> Result<()> {
    let lines: Vec<Line> = comparison
        .rows
        .iter()
        .filter_map(|row| {
            let record = records.get(row.source)?;
            let run = drawn_run(record, &row.strategy, row.summary.representative_run)?;
            Some(Line {
                row,
                run,
                colour: strategy_colour(&row.strategy),
                dashed: row.source % 2 == 1,
            })
        })
        .collect();
    let lanes_height = LANE_HEIGHT * lines.len().max(1) as u32;
    let height = HEADER_HEIGHT + OVERLAY_HEIGHT + lanes_height + AXIS_HEIGHT + FOOTER_HEIGHT;
    let t_end = lines.iter().map(|l| run_end_s(l.run)).fold(0.001, f64::max);
    let y_max = lines
        .iter()
        .flat_map(|l| l.run.samples.iter().map(|s| s.rss_bytes))
        .max()
        .unwrap_or(1) as f64
        / MIB
        * 1.06;
    let y_max = y_max.max(1.0);
    write_png(path, WIDTH, height, |root| {
        let (header, rest) = root.split_vertically(HEADER_HEIGHT);
        draw_header(&header, comparison, records)?;
        let (overlay, rest) = rest.split_vertically(OVERLAY_HEIGHT);
        let (lanes, rest) = rest.split_vertically(lanes_height);
        let (axis, footer) = rest.split_vertically(AXIS_HEIGHT);

        let (plot, legend) = overlay.split_horizontally(WIDTH - LEGEND_WIDTH);
        draw_overlay(&plot, &lines, t_end, y_max)?;
        draw_legend(&legend, 24, &overlay_legend(&lines))?;

        let lane_areas = lanes.split_evenly((lines.len().max(1), 1));
        for (area, line) in lane_areas.iter().zip(&lines) {
            let (plot, label) = area.split_horizontally(WIDTH - LEGEND_WIDTH);
            draw_lane(&plot, line, t_end, y_max)?;
            draw_lane_label(&label, line)?;
        }
        let (axis_plot, _) = axis.split_horizontally(WIDTH - LEGEND_WIDTH);
        draw_time_axis(&axis_plot, t_end)?;
        draw_key(&footer, &lines)
    })
}

fn draw_header(area: &Area, c: &Comparison, records: &[&Record]) -> Result<()> {
    area.draw_text(
        &format!(
            "memrel compare · scenario {} · device {}",
            c.scenario, c.device
        ),
        &(FONT, 24).into_font().color(&BLACK),
        (16, 10),
    )
    .map_err(plot_err)?;
    let host = c
        .sources
        .first()
        .map(|s| {
            format!(
                "{} ({}, {}, {} CPUs)",
                s.host.hostname, s.host.os, s.host.libc, s.host.cpus
            )
        })
        .unwrap_or_default();
    let interval_ms = records
        .first()
        .map(|r| r.header.interval_s * 1e3)
        .unwrap_or(0.0);
    let many = if c.sources.len() > 1 {
        " · dashed: source B (and D, …)"
    } else {
        ""
    };
    area.draw_text(
        &format!(
            "{host} · for each strategy its run with the median retained memory · sampled every {interval_ms:.0} ms · \
             every worker's clock starts at 0{many}"
        ),
        &(FONT, 15).into_font().color(&RGBColor(80, 80, 80)),
        (16, 42),
    )
    .map_err(plot_err)?;
    Ok(())
}

fn overlay_legend(lines: &[Line]) -> Vec<LegendEntry> {
    let mut entries = vec![LegendEntry::new(Swatch::Heading, "strategy")];
    for l in lines {
        let s = &l.row.summary;
        let median = |v: &Option<crate::metrics::Spread>| {
            v.as_ref()
                .map(|x| format!("{:.0}", x.median / MIB))
                .unwrap_or_else(|| "–".into())
        };
        let swatch = if l.dashed {
            Swatch::Dashed(l.colour, 4)
        } else {
            Swatch::Line(l.colour, 4)
        };
        entries.push(
            LegendEntry::new(swatch, l.row.label.clone()).with_detail(format!(
                "retained {} MiB · peak {} MiB (medians)",
                median(&s.host().retained_bytes),
                median(&s.host().peak_bytes)
            )),
        );
    }
    entries.push(LegendEntry::new(Swatch::Heading, ""));
    entries.push(LegendEntry::new(
        Swatch::Text,
        "dots: RSS at the end of each cycle",
    ));
    entries.push(LegendEntry::new(
        Swatch::Text,
        "(after the release and settle)",
    ));
    entries.push(LegendEntry::new(Swatch::Text, "faint: RSS all the time"));
    entries
}

/// All strategies on one plot: faint full RSS, bold while settled.
fn draw_overlay(area: &Area, lines: &[Line], t_end: f64, y_max: f64) -> Result<()> {
    let mut chart = ChartBuilder::on(area)
        .margin(MARGIN)
        .x_label_area_size(34)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(0.0..t_end, 0.0..y_max)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .y_desc("RSS total (MiB)")
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .light_line_style(RGBColor(242, 242, 242))
        .draw()
        .map_err(plot_err)?;
    let columns = (WIDTH - LEGEND_WIDTH) as usize;
    for l in lines.iter().rev() {
        let points = min_max_columns(
            l.run
                .samples
                .iter()
                .map(|s| (s.t_s, s.rss_bytes as f64 / MIB)),
            0.0,
            t_end,
            columns,
        );
        let faint = l.colour.mix(0.3).stroke_width(1);
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
    // The first row (usually `drop`, the problem) is drawn last, on top.
    for l in lines.iter().rev() {
        let points = after_release_points(l.run);
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
    Ok(())
}

/// (time, RSS MiB) where each cycle ended: the worker's own reading at the end
/// of its settle phase, or of its last release when it has no settle.
fn after_release_points(run: &RunRecord) -> Vec<(f64, f64)> {
    let ends = |phase: Phase| -> Vec<(f64, f64)> {
        run.events
            .iter()
            .filter(|e| e.edge.phase == phase && e.edge.edge == Edge::End && e.edge.cycle > 0)
            .map(|e| (e.t_s, e.edge.memory.rss_bytes as f64 / MIB))
            .collect()
    };
    let settled = ends(Phase::Settle);
    if settled.is_empty() {
        ends(Phase::Release)
    } else {
        settled
    }
}

/// One strategy's lane: anon filled, file on top of it, phases under zero.
fn draw_lane(area: &Area, l: &Line, t_end: f64, y_max: f64) -> Result<()> {
    let y_min = -y_max * RIBBON_SHARE;
    let mut chart = ChartBuilder::on(area)
        .margin_left(MARGIN)
        .margin_right(MARGIN)
        .margin_top(4)
        .margin_bottom(4)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(0.0..t_end, y_min..y_max)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .disable_x_axis()
        .y_labels(4)
        .y_label_formatter(&|y| {
            if *y < 0.0 {
                String::new()
            } else {
                format!("{y:.0}")
            }
        })
        .label_style((FONT, 12))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(235, 235, 235))
        .draw()
        .map_err(plot_err)?;
    let columns = (WIDTH - LEGEND_WIDTH) as usize;
    let (anon, rss) = anon_and_rss_mib(l.run, t_end, columns);
    let anon_poly = area_to_zero(&anon);
    chart
        .draw_series(std::iter::once(Polygon::new(
            anon_poly,
            lighten(l.colour, 0.25).filled(),
        )))
        .map_err(plot_err)?;
    let mut file_poly: Vec<(f64, f64)> = rss.clone();
    file_poly.extend(anon.iter().rev().copied());
    chart
        .draw_series(std::iter::once(Polygon::new(
            file_poly,
            lighten(l.colour, 0.7).filled(),
        )))
        .map_err(plot_err)?;
    chart
        .draw_series(LineSeries::new(rss, l.colour.stroke_width(1)))
        .map_err(plot_err)?;
    let (top, bottom) = (y_min * 0.15, y_min * 0.9);
    chart
        .draw_series(std::iter::once(Rectangle::new(
            [(0.0, bottom), (run_end_s(l.run), top)],
            RGBColor(246, 246, 246).filled(),
        )))
        .map_err(plot_err)?;
    chart
        .draw_series(phase_spans(l.run).iter().filter_map(|s| {
            let shade = phase_ribbon_colour(s.phase)?;
            Some(Rectangle::new(
                [(s.start_s, bottom), (s.end_s.max(s.start_s), top)],
                shade.filled(),
            ))
        }))
        .map_err(plot_err)?;
    Ok(())
}

fn draw_lane_label(area: &Area, l: &Line) -> Result<()> {
    let (_, h) = area.dim_in_pixel();
    let y = h as i32 / 2 - 18;
    area.draw(&Rectangle::new(
        [(10, y + 4), (32, y + 14)],
        l.colour.filled(),
    ))
    .map_err(plot_err)?;
    area.draw_text(
        &l.row.label,
        &(FONT, 15).into_font().color(&l.colour),
        (42, y),
    )
    .map_err(plot_err)?;
    let s = &l.row.summary;
    let retained = s
        .host()
        .retained_bytes
        .as_ref()
        .map(|x| format!("{:.0}", x.median / MIB))
        .unwrap_or_else(|| "–".into());
    let anon = s
        .host()
        .retained_anon_bytes
        .as_ref()
        .map(|x| format!("{:.0}", x.median / MIB))
        .unwrap_or_else(|| "–".into());
    area.draw_text(
        &format!("retained {retained} MiB, of it anon {anon} MiB"),
        &(FONT, 12).into_font().color(&RGBColor(90, 90, 90)),
        (42, y + 20),
    )
    .map_err(plot_err)?;
    Ok(())
}

/// The shared time axis under the lanes.
fn draw_time_axis(area: &Area, t_end: f64) -> Result<()> {
    let mut chart = ChartBuilder::on(area)
        .margin_left(MARGIN)
        .margin_right(MARGIN)
        .x_label_area_size(AXIS_HEIGHT - 6)
        .y_label_area_size(Y_LABEL_AREA)
        .build_cartesian_2d(0.0..t_end, 0.0..1.0)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_mesh()
        .disable_y_axis()
        .x_desc("time since worker start (s)")
        .label_style((FONT, 15))
        .axis_desc_style((FONT, 16))
        .draw()
        .map_err(plot_err)?;
    Ok(())
}

/// The lane key and phase colours, in one row at the bottom.
fn draw_key(area: &Area, lines: &[Line]) -> Result<()> {
    let font = (FONT, 15).into_font().color(&BLACK);
    let mut x = Y_LABEL_AREA as i32 + MARGIN as i32;
    let grey = RGBColor(120, 120, 120);
    for (swatch, text) in [
        (lighten(grey, 0.25), "RssAnon (heap, copied tensors)"),
        (lighten(grey, 0.7), "RssFile (mapped files)"),
    ] {
        area.draw(&Rectangle::new([(x, 8), (x + 22, 24)], swatch.filled()))
            .map_err(plot_err)?;
        area.draw_text(text, &font, (x + 28, 8)).map_err(plot_err)?;
        x += 50 + 8 * text.len() as i32;
    }
    area.draw_text("phases:", &font, (x, 8)).map_err(plot_err)?;
    x += 66;
    for phase in Phase::ALL {
        let Some(shade) = phase_ribbon_colour(phase) else {
            continue;
        };
        let present = lines
            .iter()
            .any(|l| l.run.events.iter().any(|e| e.edge.phase == phase));
        if !present {
            continue;
        }
        area.draw(&Rectangle::new([(x, 8), (x + 22, 24)], shade.filled()))
            .map_err(plot_err)?;
        area.draw_text(phase.as_str(), &font, (x + 28, 8))
            .map_err(plot_err)?;
        x += 40 + 9 * phase.as_str().len() as i32;
    }
    Ok(())
}
