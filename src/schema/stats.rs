//! The statistics reports are written in: median, robust spread, quantiles.

/// Median of the finite samples; None without any.
pub fn median(xs: &[f64]) -> Option<f64> {
    let v = sorted_finite(xs);
    (!v.is_empty()).then(|| quantile(&v, 0.5))
}

/// (Q3 − Q1) / median of the finite samples; None without samples or a positive median.
pub fn spread(xs: &[f64]) -> Option<f64> {
    let v = sorted_finite(xs);
    if v.is_empty() {
        return None;
    }
    let m = quantile(&v, 0.5);
    (m > 0.0).then(|| (quantile(&v, 0.75) - quantile(&v, 0.25)) / m)
}

fn sorted_finite(xs: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    crate::util::sort_by(&mut v, f64::total_cmp);
    v
}

/// Linearly interpolated quantile of sorted values (NaN when empty).
pub fn quantile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}
