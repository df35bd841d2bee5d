//! `roofline validate`: the suite's counts against the analytic ones, as text.

use crate::counters::BackendKind;
use crate::validate::{Row, rel_err};

pub fn table(rows: &[Row], backend: BackendKind) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let b = backend.name();
    let _ = writeln!(
        s,
        "{:<18} {:<7} {:>9} {:>14} {:>14} {:>8} {:>14} {:>14} {:>14} {:>14} {:>8} {:>8} {:>12} {:>18}  verdict",
        "kernel",
        "variant",
        "n",
        "W analytic",
        format!("W {b}"),
        "err",
        "FMA analytic",
        format!("FMA {b}"),
        "Qcore analytic",
        format!("Qcore {b}"),
        "err",
        "harness",
        "DRAM analytic",
        "DRAM"
    );
    for r in rows {
        let wa: u64 = r.flops_analytic.values().sum();
        let wm: u64 = r.flops_measured.values().sum();
        let class_ok = r.flops_analytic == r.flops_measured;
        let _ = writeln!(
            s,
            "{:<18} {:<7} {:>9} {:>14} {:>14} {:>7.2}% {:>14} {:>14} {:>14} {:>14} {:>7.2}% {:>8} {:>12} {:>18}  {}{}",
            r.kernel,
            r.variant,
            r.n,
            wa,
            wm,
            100.0 * rel_err(wa, wm),
            r.fma_analytic,
            r.fma_measured,
            r.core_analytic,
            r.core_measured,
            100.0
                * rel_err(
                    r.core_analytic,
                    r.core_measured.saturating_sub(r.core_harness_bytes.unwrap_or(0).max(0) as u64)
                ),
            r.core_harness_bytes.map(|h| h.to_string()).unwrap_or_else(|| "-".into()),
            r.dram_analytic,
            r.dram_measured
                .map(|d| format!("{d} ({:.2}%)", 100.0 * rel_err(r.dram_analytic, d)))
                .unwrap_or_else(|| "n/a".into()),
            if r.ok { "ok" } else { "MISMATCH" },
            if !class_ok && wa == wm { " (classes differ)" } else { "" }
        );
        if let Some(d) = &r.detail {
            let _ = writeln!(s, "    {d}");
        }
    }
    s
}
