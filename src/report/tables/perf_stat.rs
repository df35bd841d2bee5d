//! `roofline import perf-stat`: the imported point as text.

use crate::schema::units::fmt_bytes;

/// The imported point: T, W by class, Q per level with GB/s and AI, the clock, the notes.
pub fn perf_stat_table(p: &crate::schema::Point, platform_name: &str, platform_key: &str) -> String {
    let mut s = format!("{} (perf-stat), {platform_name} ({platform_key})\n", p.name);
    s += &format!("  T      {:.6} s\n", p.seconds);
    match (&p.provenance.flops, p.gflops) {
        (Some(_), Some(g)) => {
            s += &format!("  W      {:.4e} flop   {:.3} GFLOP/s\n", p.flops.total, g);
            for (c, v) in &p.flops.by_class {
                s += &format!("         {c:<22} {v:.4e}\n");
            }
        }
        _ => s += "  W      unavailable\n",
    }
    for (lvl, b) in &p.bytes {
        s += &format!(
            "  Q_{lvl:<5}{:>12}   {:.3} GB/s   AI {}\n",
            fmt_bytes(*b),
            p.gbs.get(lvl).copied().unwrap_or(0.0),
            p.ai.get(lvl).map(|x| format!("{x:.3} flop/B")).unwrap_or_else(|| "-".into())
        );
    }
    if let Some(g) = p.extra.get("effective_ghz").and_then(|v| v.as_f64()) {
        s += &format!("  clock  {g:.3} GHz (cycles / task-clock)\n");
    }
    for n in &p.provenance.notes {
        s += &format!("  note: {n}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tables::tests::point;

    #[test]
    fn the_point_with_its_rates_clock_and_notes() {
        let mut p = point("triad.csv", 2e9, &[("core", 1.6e10), ("dram", 0.0)], vec![0.5]);
        p.extra.insert("effective_ghz".into(), serde_json::json!(2.95));
        assert_eq!(
            perf_stat_table(&p, "Skylake server", "skx"),
            "triad.csv (perf-stat), Skylake server (skx)\n  T      0.500000 s\n  W      2.0000e9 flop   4.000 GFLOP/s\n         \
             packed256_double       1.5000e9\n         scalar_double          5.0000e8\n  Q_core     14.9 GiB   32.000 GB/s   AI 0.125 \
             flop/B\n  Q_dram          0 B   0.000 GB/s   AI -\n  clock  2.950 GHz (cycles / task-clock)\n  note: a note\n"
        );
        let w = perf_stat_table(&point("idle", 0.0, &[], vec![1.0]), "Zen 4", "zen4");
        assert_eq!(
            w,
            "idle (perf-stat), Zen 4 (zen4)\n  T      1.000000 s\n  W      unavailable\n  note: a note\n"
        );
    }
}
