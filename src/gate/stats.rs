//! The one-sided Mann-Whitney U test the gate judges time-based metrics with.
//!
//! Why Mann-Whitney: repetition times on shared CI machines are skewed and heavy-tailed (a
//! preempted run is 2× slower); a rank test needs no normality and a few outliers cannot move it.
//! The p-value is exact (the U distribution by the q-binomial generating function, in integer
//! arithmetic) when there are no ties and m + n ≤ 100; otherwise it uses the normal
//! approximation with tie and continuity corrections.

/// The outcome of a one-sided test of "x is stochastically greater than y".
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UTest {
    /// Pairs (xᵢ, yⱼ) with xᵢ > yⱼ, ties counting ½.
    pub u: f64,
    /// P(U ≥ u) under the null hypothesis (same distribution).
    pub p_value: f64,
    /// Whether `p_value` is exact (else the normal approximation).
    pub exact: bool,
    /// The smallest p-value these sample sizes can give: when above α, the test cannot reject.
    pub min_p_value: f64,
}

const EXACT_MAX_TOTAL: usize = 100;

/// One-sided Mann-Whitney U test, H1: `x` tends to be greater than `y`.
/// Returns `None` when either sample is empty or holds a non-finite value.
pub fn mann_whitney_greater(x: &[f64], y: &[f64]) -> Option<UTest> {
    let (m, n) = (x.len(), y.len());
    if m == 0 || n == 0 || x.iter().chain(y).any(|v| !v.is_finite()) {
        return None;
    }
    let mut u = 0.0;
    let mut ties = false;
    for a in x {
        for b in y {
            if a > b {
                u += 1.0;
            } else if a == b {
                u += 0.5;
                ties = true;
            }
        }
    }
    let counts = (m + n <= EXACT_MAX_TOTAL).then(|| u_distribution(m, n));
    let total: f64 = counts.as_ref().map(|c| c.iter().map(|v| *v as f64).sum()).unwrap_or(f64::INFINITY);
    let min_p = 1.0 / total;
    if let (false, Some(counts)) = (ties, &counts) {
        let tail: f64 = counts[u as usize..].iter().map(|c| *c as f64).sum();
        return Some(UTest {
            u,
            p_value: (tail / total).min(1.0),
            exact: true,
            min_p_value: min_p,
        });
    }
    // Normal approximation with tie correction.
    let (mf, nf) = (m as f64, n as f64);
    let mut all: Vec<f64> = x.iter().chain(y).copied().collect();
    all.sort_by(|a, b| a.total_cmp(b));
    let mut tie_term = 0.0;
    let mut i = 0;
    while i < all.len() {
        let mut j = i;
        while j + 1 < all.len() && all[j + 1] == all[i] {
            j += 1;
        }
        let t = (j - i + 1) as f64;
        tie_term += t * t * t - t;
        i = j + 1;
    }
    let p = normal_p_value(u, mf, nf, tie_term);
    Some(UTest {
        u,
        p_value: p.clamp(0.0, 1.0),
        exact: false,
        min_p_value: min_p,
    })
}

/// P(U ≥ u) by the normal approximation; `tie_term` = Σ (t³ − t) over tie groups.
fn normal_p_value(u: f64, m: f64, n: f64, tie_term: f64) -> f64 {
    let total = m + n;
    let var = m * n / 12.0 * ((total + 1.0) - tie_term / (total * (total - 1.0)));
    if var <= 0.0 {
        return 1.0; // every value equal: no evidence either way
    }
    let z = (u - m * n / 2.0 - 0.5) / var.sqrt();
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// Number of arrangements giving each U = 0..=m·n for sample sizes m and n: the coefficients
/// of the Gaussian binomial [m+n choose m]_q = ∏ₖ₌₁..ₘ (1 − q^(n+k)) / (1 − q^k).
fn u_distribution(m: usize, n: usize) -> Vec<i128> {
    let deg = m * n;
    let mut c = vec![0i128; deg + 1];
    c[0] = 1;
    for k in 1..=m {
        // multiply by (1 − q^(n+k)), from the top so each term uses the old values
        let s = n + k;
        for u in (s..=deg).rev() {
            c[u] -= c[u - s];
        }
        // divide by (1 − q^k): the quotient's coefficients are running sums with stride k
        for u in k..=deg {
            c[u] += c[u - k];
        }
    }
    c
}

/// Complementary error function (Numerical Recipes `erfcc`, relative error < 1.2e-7).
fn erfc(x: f64) -> f64 {
    let z = x.abs();
    let t = 1.0 / (1.0 + 0.5 * z);
    let r = t
        * (-z * z - 1.265_512_23
            + t * (1.000_023_68
                + t * (0.374_091_96
                    + t * (0.096_784_18
                        + t * (-0.186_288_06
                            + t * (0.278_868_07 + t * (-1.135_203_98 + t * (1.488_515_87 + t * (-0.822_152_23 + t * 0.170_872_77)))))))))
            .exp();
    if x >= 0.0 { r } else { 2.0 - r }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn choose(n: u64, k: u64) -> f64 {
        (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
    }

    #[test]
    fn exact_distribution_is_symmetric_and_sums_to_the_binomial() {
        for (m, n) in [(1, 1), (3, 4), (5, 5), (10, 7), (50, 50)] {
            let c = u_distribution(m, n);
            assert_eq!(c.len(), m * n + 1);
            assert!(c.iter().all(|v| *v > 0), "{m},{n}");
            let total: f64 = c.iter().map(|v| *v as f64).sum();
            assert!((total / choose((m + n) as u64, m as u64) - 1.0).abs() < 1e-12, "{m},{n}");
            for u in 0..=m * n {
                assert_eq!(c[u], c[m * n - u]);
            }
        }
        // m = n = 2: U ∈ {0,1,2,2,3,4} → counts 1,1,2,1,1
        assert_eq!(u_distribution(2, 2), vec![1, 1, 2, 1, 1]);
    }

    #[test]
    fn known_p_values() {
        // x all above y, 4 vs 4: p = 1 / C(8,4) = 1/70
        let t = mann_whitney_greater(&[5.0, 6.0, 7.0, 8.0], &[1.0, 2.0, 3.0, 4.0]).unwrap();
        assert_eq!(t.u, 16.0);
        assert!(t.exact);
        assert!((t.p_value - 1.0 / 70.0).abs() < 1e-15);
        assert!((t.min_p_value - 1.0 / 70.0).abs() < 1e-15);
        // the other way round: p = 1
        let t = mann_whitney_greater(&[1.0, 2.0, 3.0, 4.0], &[5.0, 6.0, 7.0, 8.0]).unwrap();
        assert_eq!(t.p_value, 1.0);
        // ties: normal approximation, identical samples give no evidence
        let t = mann_whitney_greater(&[1.0, 1.0, 1.0], &[1.0, 1.0]).unwrap();
        assert!(!t.exact && t.p_value >= 0.5);
        assert!(mann_whitney_greater(&[], &[1.0]).is_none());
        assert!(mann_whitney_greater(&[f64::NAN], &[1.0]).is_none());
    }

    #[test]
    fn normal_approximation_is_close_to_exact() {
        let c = u_distribution(40, 40);
        let total: f64 = c.iter().map(|v| *v as f64).sum();
        for u in [400usize, 800, 1000, 1100, 1200] {
            let exact: f64 = c[u..].iter().map(|v| *v as f64).sum::<f64>() / total;
            let approx = normal_p_value(u as f64, 40.0, 40.0, 0.0);
            assert!((exact - approx).abs() < 0.003, "U={u}: exact {exact}, normal {approx}");
        }
        // more than 100 values: the approximation is used
        let x: Vec<f64> = (0..60).map(|i| i as f64 + 0.5).collect();
        let y: Vec<f64> = (0..60).map(|i| i as f64).collect();
        let t = mann_whitney_greater(&x, &y).unwrap();
        assert!(!t.exact && t.p_value > 0.3 && t.p_value < 0.5, "{t:?}");
        assert!((erfc(0.0) - 1.0).abs() < 1e-7);
        assert!((erfc(1.0) - 0.157_299_207).abs() < 1e-7);
        assert!((erfc(-1.0) - 1.842_700_793).abs() < 1e-7);
    }
}
