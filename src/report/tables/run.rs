//! `roofline run`: the suite kernel's points as text.

use crate::schema::Point;

/// The points as a table: times, rates, bandwidth per level, AI, samples; then where each
/// quantity came from.
pub fn run_table(points: &[Point], size_unit: &str) -> String {
    let mut s = String::new();
    // One GB/s column per level any point has (core first, then outwards).
    let levels: Vec<&str> = ["core", "l2", "l3", "dram"]
        .into_iter()
        .filter(|l| points.iter().any(|p| p.bytes.contains_key(*l)))
        .collect();
    let mut head = format!(
        "{:<30} {:>7} {:>11} {:>11} {:>7} {:>9}",
        "POINT", "THREADS", "MEDIAN s", "MIN s", "SPREAD", "GFLOP/s"
    );
    for l in &levels {
        head.push_str(&format!(" {:>10}", format!("{l} GB/s")));
    }
    head.push_str(&format!(" {:>8} {:>8} {:>7}", "AI core", "AI dram", "SAMPLES"));
    s += &format!("{head}\n");
    for p in points {
        let min = p.seconds_samples.iter().copied().fold(f64::INFINITY, f64::min);
        let f = |x: Option<&f64>| x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
        let mut line = format!(
            "{:<30} {:>7} {:>11.4e} {:>11.4e} {:>6.1}% {:>9}",
            p.name,
            p.threads,
            p.seconds,
            min,
            100.0 * p.spread().unwrap_or(0.0),
            p.gflops.map(|g| format!("{g:.2}")).unwrap_or_else(|| "-".into()),
        );
        for l in &levels {
            line.push_str(&format!(" {:>10}", f(p.gbs.get(*l))));
        }
        line.push_str(&format!(
            " {:>8} {:>8} {:>7}",
            f(p.ai.get("core")),
            f(p.ai.get("dram")),
            p.seconds_samples.len()
        ));
        s += &format!("{line}\n");
    }
    // Where each quantity came from, and the model's or the counters' notes, once.
    if let Some(p) = points.first() {
        let pr = &p.provenance;
        let src = |s: Option<&crate::schema::Source>| s.map(|s| s.name()).unwrap_or("-");
        let levels: Vec<String> = p.bytes.keys().map(|l| format!("{l} {}", src(pr.bytes.get(l)))).collect();
        s += &format!(
            "W {}, Q: {} (per call, {} as the size unit), T native.\n",
            src(pr.flops.as_ref()),
            levels.join(", "),
            size_unit
        );
        for n in &pr.notes {
            s += &format!("  {n}\n");
        }
    }
    s
}
