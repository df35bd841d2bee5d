//! `roofline run`: the suite kernel's points as text.

use super::{Columns, or_dash};
use crate::schema::Point;

/// The points as a table: times, rates, bandwidth per level, AI, samples; then where each
/// quantity came from.
pub fn run_table(points: &[Point], size_unit: &str) -> String {
    // One GB/s column per level any point has (core first, then outwards).
    let levels: Vec<&str> = ["core", "l2", "l3", "dram"]
        .into_iter()
        .filter(|l| points.iter().any(|p| p.bytes.contains_key(*l)))
        .collect();
    let mut cols = Columns::new(" ").left(30).right(7).right(11).right(11).right(7).right(9);
    for _ in &levels {
        cols = cols.right(10);
    }
    let cols = cols.right(8).right(8).right(7);
    let mut head: Vec<String> = ["POINT", "THREADS", "MEDIAN s", "MIN s", "SPREAD", "GFLOP/s"]
        .map(String::from)
        .into();
    head.extend(levels.iter().map(|l| format!("{l} GB/s")));
    head.extend(["AI core", "AI dram", "SAMPLES"].map(String::from));
    let mut s = cols.line(head) + "\n";
    for p in points {
        let min = p.seconds_samples.iter().copied().fold(f64::INFINITY, f64::min);
        let f = |x: Option<&f64>| or_dash(x.copied(), 2);
        let mut cells = vec![
            p.name.clone(),
            p.threads.to_string(),
            format!("{:.4e}", p.seconds),
            format!("{min:.4e}"),
            format!("{:.1}%", 100.0 * p.spread().unwrap_or(0.0)),
            or_dash(p.gflops, 2),
        ];
        cells.extend(levels.iter().map(|l| f(p.gbs.get(*l))));
        cells.extend([f(p.ai.get("core")), f(p.ai.get("dram")), p.seconds_samples.len().to_string()]);
        s += &(cols.line(cells) + "\n");
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tables::end_of;
    use crate::report::tables::tests::point;

    #[test]
    fn one_bandwidth_column_per_level_any_point_has_and_cells_under_their_headers() {
        let a = point("triad", 2e6, &[("core", 2.4e7), ("dram", 3.2e7)], vec![1e-3, 1.2e-3, 0.9e-3]);
        let b = point("copy", 0.0, &[("l2", 1.6e7)], vec![2e-3]);
        let t = run_table(&[a, b], "elements");
        let lines: Vec<&str> = t.lines().collect();
        let head = lines[0];
        assert!(
            head.contains("core GB/s") && head.contains("l2 GB/s") && head.contains("dram GB/s"),
            "{t}"
        );
        assert!(!head.contains("l3 GB/s"), "{t}");
        // Every cell ends where its header ends.
        assert_eq!(end_of(head, "GFLOP/s", 0), end_of(lines[1], "2.00", 0), "{t}");
        assert_eq!(end_of(head, "core GB/s", 0), end_of(lines[1], "24.00", 0), "{t}");
        assert_eq!(end_of(head, "SAMPLES", 0), lines[1].chars().count(), "{t}");
        assert_eq!(lines[1].chars().count(), head.chars().count(), "{t}");
        // Unknown figures are dashes in their columns.
        assert_eq!(end_of(head, "core GB/s", 0), end_of(lines[2], "-", 80), "{t}");
        assert!(lines[2].contains("    0.0%"), "{t}");
        assert_eq!(
            lines[3],
            "W trace, Q: core trace, dram analytic (per call, elements as the size unit), T native."
        );
        assert_eq!(lines[4], "  a note");
    }

    #[test]
    fn a_name_wider_than_its_column_pushes_its_row_but_not_the_others() {
        let long = "x".repeat(41);
        let a = point(&long, 1e6, &[("core", 1e6)], vec![1e-3]);
        let b = point("short", 1e6, &[("core", 1e6)], vec![1e-3]);
        let t = run_table(&[a, b], "elements");
        let lines: Vec<&str> = t.lines().collect();
        assert!(lines[1].starts_with(&format!("{long} ")), "{t}");
        assert_eq!(lines[1].chars().count(), lines[0].chars().count() + 11, "{t}");
        assert_eq!(lines[2].chars().count(), lines[0].chars().count(), "{t}");
    }

    #[test]
    fn no_points_no_provenance_line() {
        assert_eq!(run_table(&[], "rows").lines().count(), 1);
    }
}
