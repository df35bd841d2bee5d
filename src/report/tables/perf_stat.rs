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
