//! `why.png`: what holds each strategy's retained memory. The console's
//! "why it stays" lines (`export::why`) as a picture: one panel per resource
//! that any strategy has a split for (in the order reports show resources),
//! and in it one horizontal bar per strategy, its last cycle's retained bytes
//! (median over runs, `StrategySummary::why`) stacked by mechanism, each
//! mechanism in its fixed colour (`palette::mechanism_colour`: live in warm
//! hues, free but kept in blues, floor grey, not split light grey). A
//! mechanism that ended below its baseline is a segment left of the zero
//! line. A black tick marks the strategy's whole retained value of that
//! resource (the median over runs of `ResourceSummary::retained_bytes`), so a
//! reader sees what the segments sum to (medians of parts need not add up to
//! the median of the whole exactly).
//!
//! It takes a neutral input ([`WhyInput`]: labels, strategy names for the
//! colours, their summaries), made from a run's [`Summary`] or from a
//! [`Comparison`]'s rows, so a run's directory and a comparison's draw the
//! same chart. Where no strategy has any split, [`plan`] has no panel and
//! nothing is drawn. Draws only: no metric is computed here (the segments'
//! sums are for the layout).

use std::path::Path;

use anyhow::Result;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::frame::{self, header, Band, GREY_TEXT, MARGIN};
use super::palette::{mechanism_colour, strategy_colour};
use super::png::{
    draw_legend, legend_height, plot_err, text_width, Area, LegendEntry, Swatch, FONT,
};
use crate::metrics::comparison::Comparison;
use crate::metrics::why::{Class, Held, Mechanism};
use crate::metrics::{Resource, ResourceFacts, StrategySummary, Summary};
use crate::textutil::MIB;

/// Height of one strategy's bar lane.
const LANE_HEIGHT: u32 = 46;
/// Room for the panel's title above its lanes.
const TITLE_HEIGHT: u32 = 30;
/// Room for the MiB axis under a panel's lanes.
const AXIS_HEIGHT: u32 = 48;
/// Room left of the bars for the lane labels (strategy, its whole retained).
const LABEL_AREA: u32 = 210;
/// Share of a lane's height a bar takes.
const BAR_SHARE: f64 = 0.56;
/// Segments of this many bytes or more are labelled with their MiB (where
/// the label fits), unless the retention threshold is lower.
const LABEL_MIN_BYTES: u64 = 16 << 20;

/// One bar's source: the row's label, the strategy (its colour) and its summary.
#[derive(Debug, Clone, Copy)]
pub struct Entry<'a> {
    pub label: &'a str,
    pub strategy: &'a str,
    pub summary: &'a StrategySummary,
}

/// What `why.png` is drawn from: a run's summary or a comparison's rows.
#[derive(Debug, Clone)]
pub struct WhyInput<'a> {
    pub scenario: &'a str,
    pub device: &'a str,
    pub retention_threshold_bytes: u64,
    /// The resources in the order panels are drawn (the lead first).
    pub resources: Vec<Resource>,
    pub entries: Vec<Entry<'a>>,
}

impl<'a> WhyInput<'a> {
    /// A run's strategies, each labelled by its name.
    pub fn of_summary(summary: &'a Summary) -> WhyInput<'a> {
        WhyInput {
            scenario: &summary.scenario,
            device: &summary.device,
            retention_threshold_bytes: summary.retention_threshold_bytes,
            resources: summary.shown(),
            entries: summary
                .strategies
                .iter()
                .map(|s| Entry {
                    label: &s.strategy,
                    strategy: &s.strategy,
                    summary: s,
                })
                .collect(),
        }
    }

    /// A comparison's rows, each labelled by its row label.
    pub fn of_comparison(comparison: &'a Comparison) -> WhyInput<'a> {
        WhyInput {
            scenario: &comparison.scenario,
            device: &comparison.device,
            retention_threshold_bytes: comparison.retention_threshold_bytes,
            resources: comparison.resources.clone(),
            entries: comparison
                .rows
                .iter()
                .map(|row| Entry {
                    label: &row.label,
                    strategy: &row.strategy,
                    summary: &row.summary,
                })
                .collect(),
        }
    }
}

/// One mechanism's stretch of a bar, in MiB from `from_mib` to `to_mib`
/// (`from_mib < to_mib`; left of zero for a mechanism below its baseline).
#[derive(Debug, Clone, PartialEq)]
pub struct Segment {
    pub mechanism: Mechanism,
    pub bytes: i64,
    pub from_mib: f64,
    pub to_mib: f64,
}

/// One strategy's bar in a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Lane {
    pub label: String,
    pub strategy: String,
    /// Empty where this strategy has no split of the panel's resource.
    pub segments: Vec<Segment>,
    /// The whole retained value (median over runs), where measured.
    pub whole_mib: Option<f64>,
}

/// One resource's panel: a bar per strategy on one MiB axis.
#[derive(Debug, Clone, PartialEq)]
pub struct Panel {
    pub resource: Resource,
    pub lanes: Vec<Lane>,
    /// The mechanisms drawn in it, in bar order (its legend).
    pub mechanisms: Vec<Mechanism>,
    pub x_min_mib: f64,
    pub x_max_mib: f64,
}

/// Where a class stands in a bar, from zero outwards: live first, then free
/// but kept, the floor, what is not split.
fn class_rank(class: Class) -> u8 {
    match class {
        Class::Live => 0,
        Class::FreeKept => 1,
        Class::Floor => 2,
        Class::Unsplit => 3,
    }
}

/// The fixed order of mechanisms in a bar and in the legend.
fn bar_order(m: Mechanism) -> (u8, Mechanism) {
    (class_rank(m.class()), m)
}

/// One panel per resource of `input.resources` that some entry has a split
/// of, in that order; none where no entry has any.
pub fn plan(input: &WhyInput) -> Vec<Panel> {
    input
        .resources
        .iter()
        .filter_map(|&r| panel_of(input, r))
        .collect()
}

fn panel_of(input: &WhyInput, resource: Resource) -> Option<Panel> {
    let of = |e: &Entry| -> Vec<Held> {
        let mut held: Vec<Held> = e
            .summary
            .why
            .iter()
            .filter(|h| h.resource == resource && h.bytes != 0)
            .copied()
            .collect();
        held.sort_by_key(|h| bar_order(h.mechanism));
        held
    };
    if input.entries.iter().all(|e| of(e).is_empty()) {
        return None;
    }
    let lanes: Vec<Lane> = input
        .entries
        .iter()
        .map(|e| Lane {
            label: e.label.to_string(),
            strategy: e.strategy.to_string(),
            segments: stack(&of(e)),
            whole_mib: e
                .summary
                .resource(resource)
                .filter(|s| s.not_measured.is_none())
                .and_then(|s| s.retained_bytes.as_ref())
                .map(|x| x.median / MIB),
        })
        .collect();
    let mut mechanisms: Vec<Mechanism> = lanes
        .iter()
        .flat_map(|l| l.segments.iter().map(|s| s.mechanism))
        .collect();
    mechanisms.sort_by_key(|m| bar_order(*m));
    mechanisms.dedup();
    let (lo, hi) = lanes
        .iter()
        .flat_map(|l| {
            l.segments
                .iter()
                .flat_map(|s| [s.from_mib, s.to_mib])
                .chain(l.whole_mib)
        })
        .fold((0.0f64, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let pad = ((hi - lo) * 0.06).max(1.0);
    Some(Panel {
        resource,
        lanes,
        mechanisms,
        x_min_mib: if lo < 0.0 { lo - pad } else { 0.0 },
        x_max_mib: hi + pad,
    })
}

/// `held` (in bar order) stacked from zero: bytes above the baseline to the
/// right, below it to the left, each side in the same order.
fn stack(held: &[Held]) -> Vec<Segment> {
    let (mut right, mut left) = (0.0f64, 0.0f64);
    held.iter()
        .map(|h| {
            let mib = h.bytes as f64 / MIB;
            let (from_mib, to_mib) = if mib >= 0.0 {
                right += mib;
                (right - mib, right)
            } else {
                left += mib;
                (left, left - mib)
            };
            Segment {
                mechanism: h.mechanism,
                bytes: h.bytes,
                from_mib,
                to_mib,
            }
        })
        .collect()
}

/// The height of a panel's band: its lanes, or its legend where that is taller.
fn panel_height(panel: &Panel) -> u32 {
    let lanes = TITLE_HEIGHT + LANE_HEIGHT * panel.lanes.len() as u32 + AXIS_HEIGHT;
    lanes.max(legend_height(&legend(panel)) + TITLE_HEIGHT + 8)
}

/// A panel's legend: the tick, then its mechanisms under their class.
fn legend(panel: &Panel) -> Vec<LegendEntry> {
    let mut out = vec![LegendEntry::new(
        Swatch::Line(BLACK, 2),
        "tick: whole retained (median)",
    )];
    let mut class = None;
    for &m in &panel.mechanisms {
        if class != Some(m.class()) {
            class = Some(m.class());
            out.push(LegendEntry::new(Swatch::Heading, class_heading(m.class())));
        }
        out.push(LegendEntry::new(
            Swatch::Fill(mechanism_colour(m)),
            format!("{} — {}", m.label(), m.class().label()),
        ));
    }
    out
}

/// A class's heading in the legend: what it is and who frees it.
fn class_heading(class: Class) -> &'static str {
    match class {
        Class::Live => "live: only the program frees it",
        Class::FreeKept => "free but kept: a knob frees it",
        Class::Floor => "floor: a new process drops it",
        Class::Unsplit => "not split",
    }
}

/// Draws `why.png` for `input` at `path`; `false` (and nothing written)
/// where no strategy has any split.
pub fn write_why_chart(input: &WhyInput, path: &Path) -> Result<bool> {
    let panels = plan(input);
    if panels.is_empty() {
        return Ok(false);
    }
    let label_min_bytes = LABEL_MIN_BYTES.min(input.retention_threshold_bytes.max(1 << 20));
    let mut bands = vec![header(
        format!(
            "memrel retained memory by mechanism · scenario {} · device {}",
            input.scenario, input.device
        ),
        vec![
            "last cycle, median over runs: each bar is a strategy's retained MiB split by the mechanism \
             that holds it (its value after the release less its value at the baseline)"
                .to_string(),
            format!(
                "left of 0: a mechanism below its baseline · tick: the whole retained (median over runs; \
                 the segments, medians of parts, sum to about it) · labelled: segments of {:.0} MiB or more",
                label_min_bytes as f64 / MIB
            ),
        ],
    )];
    for panel in panels {
        bands.push(Band::new(panel_height(&panel), move |plot, side| {
            draw_legend(side, TITLE_HEIGHT as i32, &legend(&panel))?;
            draw_panel(plot, &panel, label_min_bytes)
        }));
    }
    frame::write_chart(path, bands)?;
    Ok(true)
}

/// A panel: its title, a bar per lane, the MiB axis under them.
fn draw_panel(area: &Area, panel: &Panel, label_min_bytes: u64) -> Result<()> {
    let title = format!("{} retained by mechanism (MiB)", panel.resource.label());
    area.draw_text(
        &title,
        &(FONT, 16).into_font().color(&BLACK),
        ((LABEL_AREA + MARGIN) as i32, 6),
    )
    .map_err(plot_err)?;
    let lanes_px = LANE_HEIGHT * panel.lanes.len() as u32;
    let (_, body) = area.split_vertically(TITLE_HEIGHT);
    let (body, _) = body.split_vertically(lanes_px + AXIS_HEIGHT);
    let n = panel.lanes.len() as f64;
    let mut chart = ChartBuilder::on(&body)
        .margin_left(MARGIN)
        .margin_right(MARGIN + 20)
        .x_label_area_size(AXIS_HEIGHT)
        .y_label_area_size(LABEL_AREA)
        .build_cartesian_2d(panel.x_min_mib..panel.x_max_mib, 0.0..n)
        .map_err(plot_err)?;
    chart
        .configure_mesh()
        .disable_y_mesh()
        .y_labels(0)
        .x_labels(10)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("MiB")
        .label_style((FONT, 13))
        .axis_desc_style((FONT, 14))
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(236, 236, 236))
        .draw()
        .map_err(plot_err)?;
    if panel.x_min_mib < 0.0 {
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(0.0, 0.0), (0.0, n)],
                RGBColor(120, 120, 120).stroke_width(1),
            )))
            .map_err(plot_err)?;
    }
    for (i, lane) in panel.lanes.iter().enumerate() {
        // The first lane on top.
        let mid = n - i as f64 - 0.5;
        draw_bar(&mut chart, lane, mid, label_min_bytes)?;
        draw_lane_label(area, &chart, lane, mid)?;
    }
    Ok(())
}

/// One lane's segments, their labels where they fit, and the tick of its whole.
fn draw_bar(chart: &mut frame::Chart, lane: &Lane, mid: f64, label_min_bytes: u64) -> Result<()> {
    let (y0, y1) = (mid - BAR_SHARE / 2.0, mid + BAR_SHARE / 2.0);
    for s in &lane.segments {
        let colour = mechanism_colour(s.mechanism);
        chart
            .draw_series([
                Rectangle::new([(s.from_mib, y0), (s.to_mib, y1)], colour.filled()),
                Rectangle::new([(s.from_mib, y0), (s.to_mib, y1)], WHITE.stroke_width(1)),
            ])
            .map_err(plot_err)?;
        if s.bytes.unsigned_abs() < label_min_bytes {
            continue;
        }
        let text = format!("{:.0}", s.bytes as f64 / MIB);
        let px = |x: f64| chart.backend_coord(&(x, mid)).0;
        let room = px(s.to_mib) - px(s.from_mib);
        if text_width(&text, 12) as i32 + 6 > room {
            continue;
        }
        let style = (FONT, 12)
            .into_font()
            .color(&text_colour(colour))
            .pos(Pos::new(HPos::Center, VPos::Center));
        chart
            .draw_series(std::iter::once(Text::new(
                text,
                ((s.from_mib + s.to_mib) / 2.0, mid),
                style,
            )))
            .map_err(plot_err)?;
    }
    if let Some(whole) = lane.whole_mib {
        let reach = BAR_SHARE / 2.0 + 0.12;
        chart
            .draw_series(std::iter::once(PathElement::new(
                vec![(whole, mid - reach), (whole, mid + reach)],
                BLACK.stroke_width(3),
            )))
            .map_err(plot_err)?;
    }
    if lane.segments.is_empty() {
        let style = (FONT, 12).into_font().color(&GREY_TEXT);
        chart
            .draw_series(std::iter::once(
                EmptyElement::at((0.0, mid)) + Text::new("no split".to_string(), (6, -6), style),
            ))
            .map_err(plot_err)?;
    }
    Ok(())
}

/// Black text on a light segment, white on a dark one.
fn text_colour(fill: RGBColor) -> RGBColor {
    let luma = 0.299 * f64::from(fill.0) + 0.587 * f64::from(fill.1) + 0.114 * f64::from(fill.2);
    if luma > 150.0 {
        BLACK
    } else {
        WHITE
    }
}

/// The lane's label left of its bar: a dot and the label in the strategy's
/// colour, its whole retained value in grey under it.
fn draw_lane_label(area: &Area, chart: &frame::Chart, lane: &Lane, mid: f64) -> Result<()> {
    let (x0, y0) = area.get_base_pixel();
    let (px, py) = chart.backend_coord(&(chart.x_range().start, mid));
    let left = px - x0 - LABEL_AREA as i32 + 4;
    let y = py - y0;
    let colour = strategy_colour(&lane.strategy);
    area.draw(&Circle::new((left + 6, y - 7), 5, colour.filled()))
        .map_err(plot_err)?;
    let room = LABEL_AREA.saturating_sub(30);
    area.draw_text(
        &fit(&lane.label, 14, room),
        &(FONT, 14).into_font().color(&colour),
        (left + 16, y - 15),
    )
    .map_err(plot_err)?;
    let whole = match lane.whole_mib {
        Some(w) => format!("retained {w:.1} MiB"),
        None => "retained not measured".to_string(),
    };
    area.draw_text(
        &whole,
        &(FONT, 12).into_font().color(&GREY_TEXT),
        (left + 16, y + 2),
    )
    .map_err(plot_err)?;
    Ok(())
}

/// `text` cut to fit `max_px` at `size` px, with `…` where cut.
fn fit(text: &str, size: u32, max_px: u32) -> String {
    if text_width(text, size) <= max_px {
        return text.to_string();
    }
    let mut out: String = text.to_string();
    while !out.is_empty() && text_width(&format!("{out}…"), size) > max_px {
        out.pop();
    }
    format!("{out}…")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::export::table::tests::comparison_of;
    use crate::metrics::summarize;
    use crate::record::fixture;

    const M: i64 = 1 << 20;

    fn held(resource: Resource, mechanism: Mechanism, mib: i64) -> Held {
        Held {
            resource,
            mechanism,
            bytes: mib * M,
        }
    }

    /// The CPU fixture's summary (drop, malloc-trim), `drop` given a host
    /// split of 64 MiB live, 32 free chunks and code 8 below its baseline.
    fn split_summary() -> Summary {
        let mut summary = summarize(&fixture::record());
        let drop = summary
            .strategies
            .iter_mut()
            .find(|s| s.strategy == "drop")
            .unwrap();
        drop.why = vec![
            held(Resource::Host, Mechanism::FreeChunks, 32),
            held(Resource::Host, Mechanism::Code, -8),
            held(Resource::Host, Mechanism::LiveHeap, 64),
            held(Resource::Host, Mechanism::OtherAnon, 0),
        ];
        summary
    }

    #[test]
    fn no_split_anywhere_plans_no_panel_and_writes_nothing() {
        let summary = summarize(&fixture::record());
        let input = WhyInput::of_summary(&summary);
        assert!(plan(&input).is_empty());
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("why.png");
        assert!(!write_why_chart(&input, &path).unwrap());
        assert!(!path.exists());
    }

    #[test]
    fn segments_stack_live_first_and_below_zero_to_the_left() {
        let summary = split_summary();
        let panels = plan(&WhyInput::of_summary(&summary));
        assert_eq!(panels.len(), 1);
        let p = &panels[0];
        assert_eq!(p.resource, Resource::Host);
        // Every strategy has a lane, in the summary's order; a zero share is no segment.
        let names: Vec<&str> = p.lanes.iter().map(|l| l.label.as_str()).collect();
        assert_eq!(names, ["drop", "malloc-trim"]);
        let drop = &p.lanes[0];
        let segs: Vec<(Mechanism, f64, f64)> = drop
            .segments
            .iter()
            .map(|s| (s.mechanism, s.from_mib, s.to_mib))
            .collect();
        assert_eq!(
            segs,
            vec![
                (Mechanism::LiveHeap, 0.0, 64.0),
                (Mechanism::FreeChunks, 64.0, 96.0),
                (Mechanism::Code, -8.0, 0.0),
            ]
        );
        assert!(p.lanes[1].segments.is_empty());
        assert_eq!(
            p.mechanisms,
            vec![Mechanism::LiveHeap, Mechanism::FreeChunks, Mechanism::Code]
        );
        // The axis reaches below zero for the code's -8 and past the bar's 96.
        assert!(p.x_min_mib < -8.0, "{p:?}");
        assert!(p.x_max_mib > 96.0, "{p:?}");
        // The tick: the whole retained of the fixture's drop (median of 60, 60).
        assert_eq!(drop.whole_mib, Some(60.0));
    }

    #[test]
    fn panels_follow_the_shown_order_and_skip_resources_without_a_split() {
        let record = fixture::cuda_record();
        let mut summary = summarize(&record);
        let dev = Resource::Device(0);
        assert_eq!(summary.shown()[0], dev);
        for s in &mut summary.strategies {
            s.why = vec![
                held(Resource::Host, Mechanism::Context, 30),
                held(Resource::PageCache, Mechanism::PageCache, 64),
                held(dev, Mechanism::TorchCache, 100),
                held(dev, Mechanism::TorchTensors, 20),
            ];
        }
        summary.resources.push(Resource::PageCache);
        let panels = plan(&WhyInput::of_summary(&summary));
        let order: Vec<Resource> = panels.iter().map(|p| p.resource).collect();
        assert_eq!(order, vec![dev, Resource::Host, Resource::PageCache]);
        let vram = &panels[0];
        assert_eq!(
            vram.mechanisms,
            vec![Mechanism::TorchTensors, Mechanism::TorchCache]
        );
        summary.resources.retain(|r| *r != Resource::PageCache);
        let panels = plan(&WhyInput::of_summary(&summary));
        assert_eq!(panels.len(), 2, "no page cache panel where it is not shown");
    }

    #[test]
    fn a_comparison_draws_the_same_bars_under_its_row_labels() {
        let summary = split_summary();
        let mut c = comparison_of(&fixture::record());
        for row in &mut c.rows {
            row.summary.why = summary
                .strategies
                .iter()
                .find(|s| s.strategy == row.strategy)
                .unwrap()
                .why
                .clone();
        }
        assert_eq!(
            plan(&WhyInput::of_comparison(&c)),
            plan(&WhyInput::of_summary(&summary))
        );
    }

    #[test]
    fn the_legend_names_each_mechanism_with_its_class_under_class_headings() {
        let summary = split_summary();
        let panel = plan(&WhyInput::of_summary(&summary)).remove(0);
        let texts: Vec<String> = legend(&panel).into_iter().map(|e| e.text).collect();
        assert_eq!(
            texts,
            vec![
                "tick: whole retained (median)",
                "live: only the program frees it",
                "malloc in use — live",
                "free but kept: a knob frees it",
                "free malloc chunks — free but kept",
                "floor: a new process drops it",
                "code — floor",
            ]
        );
    }

    #[test]
    fn a_why_chart_renders_at_the_planned_size() {
        let summary = split_summary();
        let input = WhyInput::of_summary(&summary);
        let panels = plan(&input);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("why.png");
        assert!(write_why_chart(&input, &path).unwrap());
        let png = std::fs::read(&path).unwrap();
        assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
        let width = u32::from_be_bytes([png[16], png[17], png[18], png[19]]);
        let height = u32::from_be_bytes([png[20], png[21], png[22], png[23]]);
        assert_eq!(width, frame::WIDTH);
        assert_eq!(height, 44 + 2 * 24 + panel_height(&panels[0]));
    }

    #[test]
    fn long_labels_are_cut_to_fit() {
        let long = "trim-threshold-inside=1234567890 (A) and more";
        let cut = fit(long, 14, 120);
        assert!(cut.ends_with('…'), "{cut}");
        assert!(text_width(&cut, 14) <= 120);
        assert_eq!(fit("drop", 14, 120), "drop");
    }
}
