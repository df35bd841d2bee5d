//! `roofline sweep`: a kernel against working-set size, as text.

use super::Columns;
use crate::schema::sweep;

/// Per size: T per call, rates, the CPUID level, the plateau and the bound; then the fit of
/// T(n) and where each cache level ends.
pub fn sweep_table(s: &sweep::Sweep) -> String {
    let mut t = format!("{} ({}) ×{} threads\n", s.kernel, s.variant, s.threads);
    let cols = Columns::new(" ")
        .right(11)
        .right(10)
        .right(11)
        .right(9)
        .right(9)
        .right(6)
        .right(4)
        .left(14);
    t += &(cols.line(["working set", "n", "T/call", "GFLOP/s", "GB/s", "level", "plat", "bound"]) + "\n");
    for p in &s.points {
        let cells = [
            crate::schema::units::fmt_bytes(p.working_set_bytes as f64),
            p.n.to_string(),
            format!("{:.3}µs", p.seconds * 1e6),
            format!("{:.2}", p.gflops),
            format!("{:.2}", p.gbs),
            p.cpuid_level.clone(),
            p.plateau.map(|x| x.to_string()).unwrap_or_else(|| "-".into()),
            p.bound.clone().unwrap_or_else(|| "-".into()),
        ];
        t += &(cols.line(cells) + "\n");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tables::end_of;

    fn sweep() -> sweep::Sweep {
        serde_json::from_value(serde_json::json!({
            "kernel": "load", "variant": "avx512", "threads": 1, "factor": 1.25,
            "points": [
                {"working_set_bytes": 4096, "n": 512, "seconds": 1.2e-7, "spread": 0.01, "gflops": 0.0, "gbs": 145.3,
                 "ai": null, "cpuid_level": "L1", "plateau": 0, "bound": "memory (L1)"},
                {"working_set_bytes": 65536, "n": 8192, "seconds": 12.5, "spread": 0.0, "gflops": 1.0, "gbs": 100000.0,
                 "ai": null, "cpuid_level": "L2", "plateau": 12345, "bound": "a bound wider than fourteen"},
                {"working_set_bytes": 1073741824, "n": 134217728, "seconds": 0.0025, "spread": 0.2, "gflops": 12.5,
                 "gbs": 9.87, "ai": 0.5, "cpuid_level": "DRAM", "plateau": null, "bound": null}
            ],
            "plateaus": [],
            "boundaries": [
                {"level": "L1", "last_inside_bytes": 40000, "first_outside_bytes": 50000, "estimate_bytes": 45000,
                 "cpuid_bytes": 49152, "ratio": 0.92},
                {"level": "L2", "last_inside_bytes": 2000000, "first_outside_bytes": 2500000, "estimate_bytes": 2200000,
                 "cpuid_bytes": null, "ratio": null}
            ],
            "fit": {"a": 1.5e-6, "b": 2.5e-10, "r2": 0.9987}
        }))
        .unwrap()
    }

    #[test]
    fn sizes_under_their_headers_then_the_fit_and_the_levels() {
        let t = sweep_table(&sweep());
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "load (avx512) ×1 threads");
        let head = lines[1];
        // The bound column is left-aligned and padded: every line as long as the header when
        // its cells fit.
        assert_eq!(lines[2].chars().count(), head.chars().count(), "{t}");
        assert_eq!(end_of(head, "T/call", 0), end_of(lines[2], "0.120µs", 0), "{t}");
        assert_eq!(end_of(head, "GB/s", 0), end_of(lines[2], "145.30", 0), "{t}");
        // Left-aligned: the bound starts under its header.
        assert_eq!(end_of(head, "bound", 0) - 5, end_of(lines[2], "memory (L1)", 0) - 11, "{t}");
        // Cells wider than their columns push the rest of their row only.
        assert!(lines[3].contains(" 12500000.000µs ") && lines[3].contains(" 100000.00 "), "{t}");
        assert!(lines[3].ends_with(" 12345 a bound wider than fourteen"), "{t}");
        assert_eq!(end_of(head, "plat", 0), end_of(lines[4], " - ", 0) - 1, "{t}");
        assert!(
            lines[4].ends_with(&format!(
                " 2500.000µs {:>9} {:>9} {:>6} {:>4} {:<14}",
                "12.50", "9.87", "DRAM", "-", "-"
            )),
            "{t}"
        );
        assert_eq!(
            lines[5..],
            [
                "fit T(n) = a + b·n: a = 1.500 µs fixed overhead, b = 0.2500 ns per unit, R² = 0.999",
                "L1 ends near 43.9 KiB; CPUID 48.0 KiB",
                "L2 ends near 2.1 MiB; CPUID -",
            ]
        );
    }
}
