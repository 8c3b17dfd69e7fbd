//! Min/max decimation for drawing: one column of pixels keeps the lowest and
//! highest value that fell in it, in time order, so no peak or dip is lost
//! however many samples a run has.

use crate::record::{Part, Resource, RunRecord, Sample};
use crate::textutil::MIB;

type Point = (f64, f64);

/// The pixel column being filled: (column, first point, min point, max point, last point).
type Column = (usize, Point, Point, Point, Point);

/// Reduces (t, value) points to at most ~2 per column over `[t0, t1]`.
pub fn min_max_columns(
    points: impl Iterator<Item = (f64, f64)>,
    t0: f64,
    t1: f64,
    columns: usize,
) -> Vec<(f64, f64)> {
    let columns = columns.max(1);
    let width = (t1 - t0).max(f64::EPSILON);
    let mut out: Vec<(f64, f64)> = Vec::new();
    let mut current: Option<Column> = None;
    let flush = |c: &Column, out: &mut Vec<(f64, f64)>| {
        let (_, first, lo, hi, last) = *c;
        let mut pts = vec![first, lo, hi, last];
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        pts.dedup();
        out.extend(pts);
    };
    for (t, v) in points {
        let col = (((t - t0) / width) * columns as f64)
            .floor()
            .clamp(0.0, (columns - 1) as f64) as usize;
        match &mut current {
            Some(c) if c.0 == col => {
                if v < c.2 .1 {
                    c.2 = (t, v);
                }
                if v > c.3 .1 {
                    c.3 = (t, v);
                }
                c.4 = (t, v);
            }
            _ => {
                if let Some(c) = &current {
                    flush(c, &mut out);
                }
                current = Some((col, (t, v), (t, v), (t, v), (t, v)));
            }
        }
    }
    if let Some(c) = &current {
        flush(c, &mut out);
    }
    out
}

/// A run's `value` of each sample in MiB, at `x(t_s)` on a chart's axis,
/// decimated to `columns` over `x_range`. Samples without a value (a resource
/// not read at that instant) are left out: never drawn as zero.
pub fn series_mib(
    run: &RunRecord,
    x: impl Fn(f64) -> f64,
    x_range: (f64, f64),
    columns: usize,
    value: impl Fn(&Sample) -> Option<u64>,
) -> Vec<Point> {
    min_max_columns(
        run.samples
            .iter()
            .filter_map(|s| value(s).map(|v| (x(s.t_s), v as f64 / MIB))),
        x_range.0,
        x_range.1,
        columns,
    )
}

/// The tops of a stacked resource's parts in MiB, bottom up (see
/// [`series_mib`]): each part's top is its bytes and those of the parts
/// below it, the last part's the resource's whole; an unread reading is 0.
pub fn stacked_mib(
    run: &RunRecord,
    r: Resource,
    parts: &[Part],
    x: impl Fn(f64) -> f64 + Copy,
    x_range: (f64, f64),
    columns: usize,
) -> Vec<Vec<Point>> {
    (0..parts.len())
        .map(|i| {
            let below = &parts[..=i];
            let last = i + 1 == parts.len();
            series_mib(run, x, x_range, columns, |s| {
                Some(if last {
                    s.readings.get(r).unwrap_or(0)
                } else {
                    below
                        .iter()
                        .map(|p| s.readings.part(r, *p).unwrap_or(0))
                        .sum()
                })
            })
        })
        .collect()
}

/// The polygon between `top` and `below` (down to zero where nothing is below).
pub fn band(top: &[Point], below: Option<&Vec<Point>>) -> Vec<Point> {
    match below {
        None => area_to_zero(top),
        Some(below) => {
            let mut poly = top.to_vec();
            poly.extend(below.iter().rev().copied());
            poly
        }
    }
}

/// The polygon under `line`, closed down to zero at both ends.
pub fn area_to_zero(line: &[Point]) -> Vec<Point> {
    let mut poly = Vec::with_capacity(line.len() + 2);
    poly.push((line.first().map(|p| p.0).unwrap_or(0.0), 0.0));
    poly.extend_from_slice(line);
    poly.push((line.last().map(|p| p.0).unwrap_or(0.0), 0.0));
    poly
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_a_one_sample_spike_among_a_million() {
        let n = 1_000_000;
        let points = (0..n).map(|i| (i as f64, if i == 777_777 { 900.0 } else { 100.0 }));
        let out = min_max_columns(points, 0.0, n as f64, 1000);
        assert!(out.len() <= 4 * 1000);
        assert!(out.iter().any(|p| p.1 == 900.0));
        assert!(out.windows(2).all(|w| w[0].0 <= w[1].0));
    }

    #[test]
    fn samples_without_a_reading_are_left_out_not_drawn_at_zero() {
        let mut run = crate::record::fixture::run(1, "drop", 1, &[2]);
        assert!(series_mib(&run, |t| t, (0.0, 2.0), 100, |s| s.vram_bytes()).is_empty());
        run.samples[3].readings.set_one_device(0, Some(5 << 20));
        let points = series_mib(&run, |t| t - 1.0, (-1.0, 1.0), 100, |s| s.vram_bytes());
        assert_eq!(points, vec![(run.samples[3].t_s - 1.0, 5.0)]);
    }
}
