//! Statistics in one place: medians, ranges and slopes that the metrics and
//! the gate share (so a "median" means the same thing everywhere), and the
//! tests the gate decides with: Welch's interval for a difference of means
//! with exact Student-t quantiles, Fisher's exact test and Newcombe's interval
//! for a difference of two proportions.
//!
//! Pure functions on slices of `f64`; non-finite values are ignored where the
//! docs say so and never make a result up.
//!
//! The special functions (log-gamma, the regularized incomplete beta and
//! gamma functions) are written here rather than taken from `statrs`: the
//! gate needs four short, textbook routines (Lanczos; Lentz's continued
//! fractions as in Numerical Recipes §6.1–6.4), and the tests below pin every
//! function to published values. `statrs` (with `default-features = false`
//! it leaves nalgebra out) would do the same job; switching is an option, not
//! a need.

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

/// The upper of the two middle values for an even count (the middle one
/// for an odd count), `None` when there are none: unlike [`median`], always
/// one of `values`. Calibration compares readings with exact byte counts
/// (calibrate.md), where the average of two readings is a level no sample
/// held; kept so that its committed tables stay as they were made.
pub fn upper_median(mut values: Vec<u64>) -> Option<u64> {
    values.sort_unstable();
    values.get(values.len() / 2).copied()
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

/// The mean of the finite values, `None` when there are none.
pub fn mean(values: &[f64]) -> Option<f64> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    (!finite.is_empty()).then(|| finite.iter().sum::<f64>() / finite.len() as f64)
}

/// Mean and unbiased sample variance of the finite values; `None` for fewer than two.
fn mean_var(values: &[f64]) -> Option<(f64, f64, f64)> {
    let finite: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let n = finite.len() as f64;
    if finite.len() < 2 {
        return None;
    }
    let mean = finite.iter().sum::<f64>() / n;
    let var = finite.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((mean, var, n))
}

/// A difference `new − baseline` with its two-sided interval.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Difference {
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
}

/// Welch's interval for mean(new) − mean(baseline) at `confidence` (e.g.
/// 0.95), with the Welch–Satterthwaite degrees of freedom and an exact
/// Student-t quantile. `None` with fewer than two finite values on a side.
/// Both sides without spread give the difference itself as the interval.
pub fn welch_interval(baseline: &[f64], new: &[f64], confidence: f64) -> Option<Difference> {
    let (mb, vb, nb) = mean_var(baseline)?;
    let (mn, vn, nn) = mean_var(new)?;
    let (sb, sn) = (vb / nb, vn / nn);
    let se2 = sb + sn;
    let df = if se2 > 0.0 {
        se2 * se2 / (sb * sb / (nb - 1.0) + sn * sn / (nn - 1.0))
    } else {
        f64::INFINITY
    };
    let t = student_t_quantile(0.5 + confidence / 2.0, df);
    let d = mn - mb;
    let half = t * se2.sqrt();
    Some(Difference {
        estimate: d,
        lo: d - half,
        hi: d + half,
    })
}

/// ln Γ(x) for x > 0 (Lanczos, g = 7, nine terms: about 15 significant digits).
pub fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection: Γ(x) Γ(1 − x) = π / sin(πx).
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).abs().ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    let t = x + G + 0.5;
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

const EPS: f64 = 1e-15;
const TINY: f64 = 1e-300;
const MAX_ITERATIONS: usize = 100_000;

/// The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 ≤ x ≤ 1.
pub fn incomplete_beta(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    // The continued fraction converges fast below (a + 1) / (a + b + 2);
    // above it, use I_x(a, b) = 1 − I_{1−x}(b, a).
    if x < (a + 1.0) / (a + b + 2.0) {
        ln_front.exp() * beta_fraction(a, b, x) / a
    } else {
        1.0 - ln_front.exp() * beta_fraction(b, a, 1.0 - x) / b
    }
}

/// The continued fraction of the incomplete beta function (modified Lentz).
fn beta_fraction(a: f64, b: f64, x: f64) -> f64 {
    let clamp = |v: f64| if v.abs() < TINY { TINY } else { v };
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 / clamp(1.0 - qab * x / qap);
    let mut h = d;
    for m in 1..MAX_ITERATIONS {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 / clamp(1.0 + aa * d);
        c = clamp(1.0 + aa / c);
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 / clamp(1.0 + aa * d);
        c = clamp(1.0 + aa / c);
        let delta = d * c;
        h *= delta;
        if (delta - 1.0).abs() < EPS {
            break;
        }
    }
    h
}

/// The regularized lower incomplete gamma function P(a, x), for a > 0, x ≥ 0.
pub fn incomplete_gamma(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    let ln_front = a * x.ln() - x - ln_gamma(a);
    if x < a + 1.0 {
        // The series Σ x^n / (a (a+1) … (a+n)).
        let (mut term, mut sum, mut ap) = (1.0 / a, 1.0 / a, a);
        for _ in 0..MAX_ITERATIONS {
            ap += 1.0;
            term *= x / ap;
            sum += term;
            if term.abs() < sum.abs() * EPS {
                break;
            }
        }
        sum * ln_front.exp()
    } else {
        // The continued fraction of Q(a, x) (modified Lentz).
        let clamp = |v: f64| if v.abs() < TINY { TINY } else { v };
        let mut b = x + 1.0 - a;
        let mut c = 1.0 / TINY;
        let mut d = 1.0 / b;
        let mut h = d;
        for i in 1..MAX_ITERATIONS {
            let an = -(i as f64) * (i as f64 - a);
            b += 2.0;
            d = 1.0 / clamp(an * d + b);
            c = clamp(b + an / c);
            let delta = d * c;
            h *= delta;
            if (delta - 1.0).abs() < EPS {
                break;
            }
        }
        1.0 - ln_front.exp() * h
    }
}

/// The standard normal distribution function Φ(z).
pub fn normal_cdf(z: f64) -> f64 {
    let half = 0.5 * incomplete_gamma(0.5, z * z / 2.0);
    if z >= 0.0 {
        0.5 + half
    } else {
        0.5 - half
    }
}

/// Student's t distribution function with `df` > 0 degrees of freedom
/// (fractional allowed; infinite: the normal).
pub fn student_t_cdf(t: f64, df: f64) -> f64 {
    if df.is_infinite() {
        return normal_cdf(t);
    }
    let tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t));
    if t >= 0.0 {
        1.0 - tail
    } else {
        tail
    }
}

/// The `p` quantile (0 < p < 1) of a distribution function that rises from
/// 0.5 at zero, found by bracketing and bisection to full precision.
fn symmetric_quantile(p: f64, cdf: impl Fn(f64) -> f64) -> f64 {
    if !(p > 0.0 && p < 1.0) {
        return f64::NAN;
    }
    if p < 0.5 {
        return -symmetric_quantile(1.0 - p, cdf);
    }
    let (mut lo, mut hi) = (0.0_f64, 1.0_f64);
    while cdf(hi) < p && hi < 1e300 {
        lo = hi;
        hi *= 2.0;
    }
    for _ in 0..2000 {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            break;
        }
        if cdf(mid) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    0.5 * (lo + hi)
}

/// The `p` quantile of the standard normal distribution.
pub fn normal_quantile(p: f64) -> f64 {
    symmetric_quantile(p, normal_cdf)
}

/// Above this many degrees of freedom the t quantile comes from the
/// Cornish–Fisher expansion around the normal (error far below 1e-12 here),
/// where the continued fraction of the exact distribution converges slowly.
const EXPANSION_DF: f64 = 1e5;

/// The `p` quantile of Student's t with `df` > 0 degrees of freedom
/// (fractional allowed, as Welch's interval needs; infinite: the normal).
pub fn student_t_quantile(p: f64, df: f64) -> f64 {
    if df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if df.is_infinite() {
        return normal_quantile(p);
    }
    if df > EXPANSION_DF {
        // Abramowitz & Stegun 26.7.5.
        let z = normal_quantile(p);
        let z2 = z * z;
        let g1 = z * (z2 + 1.0) / 4.0;
        let g2 = z * ((5.0 * z2 + 16.0) * z2 + 3.0) / 96.0;
        let g3 = z * (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) / 384.0;
        return z + g1 / df + g2 / df.powi(2) + g3 / df.powi(3);
    }
    symmetric_quantile(p, |t| student_t_cdf(t, df))
}

fn ln_choose(n: u64, k: u64) -> f64 {
    ln_gamma(n as f64 + 1.0) - ln_gamma(k as f64 + 1.0) - ln_gamma((n - k) as f64 + 1.0)
}

/// Fisher's exact test of the 2 × 2 table (`hits_a` of `n_a`, `hits_b` of
/// `n_b`): the two-sided p-value, summing every table with the same margins
/// that is no more likely than the one observed. `None` when a side is empty
/// or a count exceeds its total.
pub fn fisher_exact(hits_a: u64, n_a: u64, hits_b: u64, n_b: u64) -> Option<f64> {
    if n_a == 0 || n_b == 0 || hits_a > n_a || hits_b > n_b {
        return None;
    }
    let (n, hits) = (n_a + n_b, hits_a + hits_b);
    let ln_total = ln_choose(n, n_a);
    let ln_p = |x: u64| ln_choose(hits, x) + ln_choose(n - hits, n_a - x) - ln_total;
    let observed = ln_p(hits_a);
    let low = hits.saturating_sub(n_b);
    let high = hits.min(n_a);
    // Tables as likely as the observed one up to rounding count as "no more likely".
    let p: f64 = (low..=high)
        .map(ln_p)
        .filter(|&l| l <= observed + 1e-7)
        .map(f64::exp)
        .sum();
    Some(p.min(1.0))
}

/// Wilson's score interval for a proportion `hits / n` (`None` for n = 0).
pub fn wilson_interval(hits: u64, n: u64, confidence: f64) -> Option<(f64, f64)> {
    if n == 0 || hits > n {
        return None;
    }
    let z = normal_quantile(0.5 + confidence / 2.0);
    let (n, p) = (n as f64, hits as f64 / n as f64);
    let z2n = z * z / n;
    let centre = (p + z2n / 2.0) / (1.0 + z2n);
    let half = z / (1.0 + z2n) * (p * (1.0 - p) / n + z2n / (4.0 * n)).sqrt();
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

/// Newcombe's hybrid score interval (his method 10) for the difference of
/// two proportions, `hits_new / n_new − hits_base / n_base`.
pub fn proportion_difference(
    hits_base: u64,
    n_base: u64,
    hits_new: u64,
    n_new: u64,
    confidence: f64,
) -> Option<Difference> {
    let (l1, u1) = wilson_interval(hits_new, n_new, confidence)?;
    let (l2, u2) = wilson_interval(hits_base, n_base, confidence)?;
    let (p1, p2) = (
        hits_new as f64 / n_new as f64,
        hits_base as f64 / n_base as f64,
    );
    let d = p1 - p2;
    Some(Difference {
        estimate: d,
        lo: d - ((p1 - l1).powi(2) + (u2 - p2).powi(2)).sqrt(),
        hi: d + ((u1 - p1).powi(2) + (p2 - l2).powi(2)).sqrt(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tolerance: f64) -> bool {
        (a - b).abs() <= tolerance
    }

    #[test]
    fn the_upper_median_is_always_a_reading() {
        assert_eq!(upper_median(vec![]), None);
        assert_eq!(upper_median(vec![3, 1, 2]), Some(2));
        assert_eq!(upper_median(vec![4, 1, 3, 2]), Some(3));
        assert_eq!(median(&[4.0, 1.0, 3.0, 2.0]), Some(2.5));
    }

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
        assert_eq!(mean(&[f64::NAN, 1.0, 2.0]), Some(1.5));
        assert_eq!(mean(&[]), None);
    }

    #[test]
    fn ln_gamma_matches_factorials_and_the_half() {
        assert!(close(ln_gamma(1.0), 0.0, 1e-14));
        assert!(close(ln_gamma(5.0), 24f64.ln(), 1e-13));
        assert!(close(ln_gamma(171.0), 706.573_062_245_787_4, 1e-9));
        assert!(close(
            ln_gamma(0.5),
            std::f64::consts::PI.sqrt().ln(),
            1e-14
        ));
    }

    #[test]
    fn t_quantiles_match_the_published_table() {
        // t_{0.975} (two-sided 95 %) for 1, 2, 3, 10 and 30 degrees of freedom.
        for (df, published) in [
            (1.0, 12.706),
            (2.0, 4.303),
            (3.0, 3.182),
            (10.0, 2.228),
            (30.0, 2.042),
        ] {
            let t = student_t_quantile(0.975, df);
            assert!(close(t, published, 5e-4), "df {df}: {t} vs {published}");
        }
        // More digits (df 1: tan(0.475 π); df 2: closed form).
        let exact_1 = (0.475 * std::f64::consts::PI).tan();
        assert!(close(student_t_quantile(0.975, 1.0), exact_1, 1e-9));
        let exact_2 = (2.0 * 0.95f64 * 0.95 / (1.0 - 0.95 * 0.95)).sqrt();
        assert!(close(student_t_quantile(0.975, 2.0), exact_2, 1e-9));
        // Other levels and the tails.
        assert!(close(student_t_quantile(0.995, 5.0), 4.032, 5e-4));
        assert!(close(student_t_quantile(0.95, 120.0), 1.658, 5e-4));
        assert!(close(student_t_quantile(0.025, 10.0), -2.228, 5e-4));
        assert_eq!(student_t_quantile(0.5, 7.0), 0.0);
    }

    #[test]
    fn t_quantiles_between_rows_and_far_out_are_exact() {
        // Welch gives fractional df: the quantile must fall between its
        // neighbours, not on a line between table rows (the old table gave
        // 7.10 at df 1.5, 18 % too wide).
        let t = student_t_quantile(0.975, 1.5);
        assert!(close(student_t_cdf(t, 1.5), 0.975, 1e-12), "{t}");
        assert!(t > 4.303 && t < 6.1, "{t}");
        // Large df: the expansion and the exact distribution agree at the seam,
        // and both tend to the normal.
        let below = symmetric_quantile(0.975, |t| student_t_cdf(t, EXPANSION_DF));
        let above = student_t_quantile(0.975, EXPANSION_DF * (1.0 + 1e-12));
        assert!(close(below, above, 1e-9), "{below} vs {above}");
        assert!(close(student_t_quantile(0.975, 1e9), 1.959_964, 1e-6));
        assert!(close(
            student_t_quantile(0.975, f64::INFINITY),
            1.959_963_984_540_054,
            1e-12
        ));
        assert!(student_t_quantile(0.975, 0.0).is_nan());
    }

    #[test]
    fn normal_and_incomplete_functions_match_published_values() {
        assert!(close(normal_cdf(1.0), 0.841_344_746_068_543, 1e-13));
        assert!(close(normal_cdf(-1.959_963_984_540_054), 0.025, 1e-13));
        assert!(close(normal_quantile(0.995), 2.575_829_303_548_901, 1e-12));
        // I_x(a, 1) = x^a and I_x(1, b) = 1 − (1 − x)^b.
        assert!(close(incomplete_beta(3.0, 1.0, 0.4), 0.064, 1e-14));
        assert!(close(
            incomplete_beta(1.0, 4.0, 0.3),
            1.0 - 0.7f64.powi(4),
            1e-14
        ));
        // P(1, x) = 1 − e^−x.
        assert!(close(
            incomplete_gamma(1.0, 2.5),
            1.0 - (-2.5f64).exp(),
            1e-14
        ));
    }

    #[test]
    fn welch_interval_uses_the_exact_quantile() {
        // 2 a side, equal spread: df = 2, half width = t_{0.975,2} × se.
        let d = welch_interval(&[1.0, 3.0], &[11.0, 13.0], 0.95).unwrap();
        let se = (2.0f64 / 2.0 + 2.0 / 2.0).sqrt();
        let t = student_t_quantile(0.975, 2.0);
        assert!(close(d.estimate, 10.0, 1e-12));
        assert!(close(d.hi - d.estimate, t * se, 1e-9), "{d:?}");
        assert!(close(d.estimate - d.lo, 4.303 * se, 1e-3), "{d:?}");
        // No spread on either side: the interval is the difference itself.
        let flat = welch_interval(&[5.0, 5.0], &[7.0, 7.0], 0.95).unwrap();
        assert_eq!((flat.lo, flat.hi), (2.0, 2.0));
        assert!(welch_interval(&[1.0], &[2.0, 3.0], 0.95).is_none());
    }

    #[test]
    fn fisher_matches_published_p_values() {
        // Lady tasting tea: 3 of 4 right vs 1 of 4; two-sided p = 0.4857.
        assert!(close(fisher_exact(3, 4, 1, 4).unwrap(), 0.485_714, 1e-6));
        // Wikipedia's dieting example: 1 of 12 men vs 9 of 12 women: 0.002759.
        assert!(close(fisher_exact(1, 12, 9, 12).unwrap(), 0.002_759, 1e-6));
        // All of 6 vs none of 6: 2 / C(12, 6).
        assert!(close(fisher_exact(6, 6, 0, 6).unwrap(), 2.0 / 924.0, 1e-12));
        assert!(close(fisher_exact(0, 6, 0, 6).unwrap(), 1.0, 1e-12));
        assert_eq!(fisher_exact(1, 0, 0, 6), None);
        assert_eq!(fisher_exact(7, 6, 0, 6), None);
    }

    #[test]
    fn proportion_intervals_match_newcombe() {
        // Newcombe (1998), Wilson's interval for 81 of 263: 0.2553 – 0.3662.
        let (lo, hi) = wilson_interval(81, 263, 0.95).unwrap();
        assert!(
            close(lo, 0.2553, 1e-4) && close(hi, 0.3662, 1e-4),
            "{lo} {hi}"
        );
        // 0 of 10: 0 – 0.2775.
        let (lo, hi) = wilson_interval(0, 10, 0.95).unwrap();
        assert!(
            close(lo, 0.0, 1e-12) && close(hi, 0.2775, 1e-4),
            "{lo} {hi}"
        );
        // Newcombe (1998), difference 56/70 − 48/80, method 10: 0.0524 – 0.3339.
        let d = proportion_difference(48, 80, 56, 70, 0.95).unwrap();
        assert!(close(d.estimate, 0.2, 1e-12));
        assert!(
            close(d.lo, 0.0524, 1e-4) && close(d.hi, 0.3339, 1e-4),
            "{d:?}"
        );
        assert!(proportion_difference(0, 0, 1, 2, 0.95).is_none());
    }
}
