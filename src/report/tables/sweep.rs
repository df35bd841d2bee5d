//! `roofline sweep`: a kernel against working-set size, as text.

use crate::ceilings::sweep;

/// Per size: T per call, rates, the CPUID level, the plateau and the bound; then the fit of
/// T(n) and where each cache level ends.
pub fn sweep_table(s: &sweep::Sweep) -> String {
    let mut t = format!("{} ({}) ×{} threads\n", s.kernel, s.variant, s.threads);
    t += &format!(
        "{:>11} {:>10} {:>11} {:>9} {:>9} {:>6} {:>4} {:<14}\n",
        "working set", "n", "T/call", "GFLOP/s", "GB/s", "level", "plat", "bound"
    );
    for p in &s.points {
        t += &format!(
            "{:>11} {:>10} {:>9.3}µs {:>9.2} {:>9.2} {:>6} {:>4} {:<14}\n",
            crate::schema::units::fmt_bytes(p.working_set_bytes as f64),
            p.n,
            p.seconds * 1e6,
            p.gflops,
            p.gbs,
            p.cpuid_level,
            p.plateau.map(|x| x.to_string()).unwrap_or_else(|| "-".into()),
            p.bound.as_deref().unwrap_or("-")
        );
    }
    if let Some(f) = s.fit {
        t += &format!(
            "fit T(n) = a + b·n: a = {:.3} µs fixed overhead, b = {:.4} ns per unit, R² = {:.3}\n",
            f.a * 1e6,
            f.b * 1e9,
            f.r2
        );
    }
    for b in &s.boundaries {
        t += &format!(
            "{} ends near {}; CPUID {}\n",
            b.level,
            crate::schema::units::fmt_bytes(b.detected.estimate_bytes as f64),
            b.cpuid_bytes
                .map(|x| crate::schema::units::fmt_bytes(x as f64))
                .unwrap_or_else(|| "-".into())
        );
    }
    t
}
