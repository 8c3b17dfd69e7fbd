//! Descriptive statistics in one place: medians, ranges and slopes that the
//! metrics and the gate share, so a "median" means the same thing everywhere.
//!
//! Pure functions on slices of `f64`; non-finite values are ignored where the
//! docs say so and never make a result up.

use serde::{Deserialize, Serialize};

/// Median and range of a set of values.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub n: usize,
}

/// Median and range of the finite values, `None` when there are none.
pub fn spread(mut values: Vec<f64>) -> Option<Spread> {
    values.retain(|v| v.is_finite());
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(Spread {
        median: sorted_median(&values),
        min: values[0],
        max: values[n - 1],
        n,
    })
}

/// The median of the finite values, `None` when there are none.
pub fn median(values: &[f64]) -> Option<f64> {
    spread(values.to_vec()).map(|s| s.median)
}

fn sorted_median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Least-squares slope of `values` against their index; `None` for fewer than two.
pub fn slope(values: &[f64]) -> Option<f64> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let mean_x = (n - 1) as f64 / 2.0;
    let mean_y = values.iter().sum::<f64>() / n as f64;
    let (mut num, mut den) = (0.0, 0.0);
    for (i, y) in values.iter().enumerate() {
        let dx = i as f64 - mean_x;
        num += dx * (y - mean_y);
        den += dx * dx;
    }
    Some(num / den)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slope_of_a_line_is_its_gradient() {
        assert_eq!(slope(&[1.0, 3.0, 5.0, 7.0]), Some(2.0));
        assert_eq!(slope(&[4.0, 4.0, 4.0]), Some(0.0));
        assert_eq!(slope(&[4.0]), None);
    }

    #[test]
    fn spread_takes_median_of_even_count() {
        let s = spread(vec![4.0, 1.0, 3.0, 2.0]).unwrap();
        assert_eq!((s.median, s.min, s.max, s.n), (2.5, 1.0, 4.0, 4));
        assert!(spread(vec![]).is_none());
    }

    #[test]
    fn non_finite_values_are_ignored() {
        assert_eq!(median(&[f64::NAN, 3.0, f64::INFINITY]), Some(3.0));
        assert_eq!(median(&[f64::NEG_INFINITY]), None);
    }
}
