//! `roofline validate`: the suite's counts against the analytic ones, as text.

use super::Columns;
use crate::counters::BackendKind;
use crate::schema::validation::{Row, rel_err};

/// One row per kernel variant: W (its FMA part), core Q net of the harness, DRAM Q, each
/// analytic against measured, and the verdict; a row's detail under it.
pub fn table(rows: &[Row], backend: BackendKind) -> String {
    let b = backend.name();
    let cols = Columns::new(" ")
        .left(18)
        .left(7)
        .right(9)
        .right(14)
        .right(14)
        .right(8)
        .right(14)
        .right(14)
        .right(14)
        .right(14)
        .right(8)
        .right(8)
        .right(12)
        .right(18);
    let head = [
        "kernel".to_string(),
        "variant".into(),
        "n".into(),
        "W analytic".into(),
        format!("W {b}"),
        "err".into(),
        "FMA analytic".into(),
        format!("FMA {b}"),
        "Qcore analytic".into(),
        format!("Qcore {b}"),
        "err".into(),
        "harness".into(),
        "DRAM analytic".into(),
        "DRAM".into(),
    ];
    let mut s = format!("{}  verdict\n", cols.line(head));
    for r in rows {
        let wa: u64 = r.flops_analytic.values().sum();
        let wm: u64 = r.flops_measured.values().sum();
        let class_ok = r.flops_analytic == r.flops_measured;
        let harness = r.core_harness_bytes.unwrap_or(0).max(0) as u64;
        let cells = [
            r.kernel.clone(),
            r.variant.clone(),
            r.n.to_string(),
            wa.to_string(),
            wm.to_string(),
            format!("{:.2}%", 100.0 * rel_err(wa, wm)),
            r.fma_analytic.to_string(),
            r.fma_measured.to_string(),
            r.core_analytic.to_string(),
            r.core_measured.to_string(),
            format!("{:.2}%", 100.0 * rel_err(r.core_analytic, r.core_measured.saturating_sub(harness))),
            r.core_harness_bytes.map(|h| h.to_string()).unwrap_or_else(|| "-".into()),
            r.dram_analytic.to_string(),
            r.dram_measured
                .map(|d| format!("{d} ({:.2}%)", 100.0 * rel_err(r.dram_analytic, d)))
                .unwrap_or_else(|| "n/a".into()),
        ];
        s += &format!(
            "{}  {}{}\n",
            cols.line(cells),
            if r.ok { "ok" } else { "MISMATCH" },
            if !class_ok && wa == wm { " (classes differ)" } else { "" }
        );
        if let Some(d) = &r.detail {
            s += &format!("    {d}\n");
        }
    }
    s
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
