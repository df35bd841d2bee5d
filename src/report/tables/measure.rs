//! `roofline measure`: the measured points as text.

use crate::schema::Report;

/// Per point: T, W by class, Q per level with GB/s and AI, raw counts, the attribution tables
/// asked for, the effective clock and the notes.
pub fn measure_table(r: &Report, show: Show) -> String {
    let mut s = String::new();
    for p in &r.points {
        s += &format!("{}: T {:.6} s (median of {})\n", p.name, p.seconds, p.seconds_samples.len());
        if p.provenance.flops.is_some() {
            s += &format!("  W {:.4e} flop", p.flops.total);
            if let Some(g) = p.gflops {
                s += &format!("  ({g:.3} GFLOP/s)");
            }
            s += "\n";
            for (c, v) in &p.flops.by_class {
                s += &format!("    {c:<20} {v:.4e}\n");
            }
        } else {
            s += "  W not counted\n";
        }
        for (lvl, b) in &p.bytes {
            s += &format!("  Q {lvl:<5} {}", crate::schema::units::fmt_bytes(*b));
            if let Some(g) = p.gbs.get(lvl) {
                s += &format!("  ({g:.3} GB/s, AI {:.3})", p.ai.get(lvl).copied().unwrap_or(0.0));
            }
            s += "\n";
        }
        if let Some(counts) = p.extra.get("counts").and_then(|c| c.as_object()) {
            for (k, v) in counts {
                s += &format!("  {k:<24} {}\n", v.as_f64().map(|x| format!("{x:.0}")).unwrap_or_default());
            }
        }
        if let Some(rows) = p.extra.get("by_function").and_then(|r| r.as_array())
            && show.functions
        {
            s += &work_table(rows, p.flops.total, Attribution::Function);
        }
        if let Some(rows) = p.extra.get("by_line").and_then(|r| r.as_array())
            && show.lines
        {
            s += &work_table(rows, p.flops.total, Attribution::Line);
        }
        if let Some(g) = p.extra.get("effective_ghz").and_then(|g| g.as_f64()) {
            s += &format!("  effective clock {g:.3} GHz (cycles / task-clock)\n");
        }
        for n in &p.provenance.notes {
            s += &format!("  note: {n}\n");
        }
    }
    s
}

/// Rows of the per-function table printed at most; the rest are summed in one line.
const BY_FUNCTION_ROWS: usize = 25;

/// Which attribution tables the text output shows.
#[derive(Debug, Clone, Copy, Default)]
pub struct Show {
    pub functions: bool,
    pub lines: bool,
}

/// What the rows of a work table are.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Attribution {
    Function,
    Line,
}

/// `--by-function` / `--by-line` as text: function (or `file:line  function`), instructions,
/// flops, core bytes and the row's share of all flops, most flops first (then most
/// instructions). Counts are exact integers.
fn work_table(rows: &[serde_json::Value], total_flops: f64, what: Attribution) -> String {
    let label = |r: &serde_json::Value| -> String {
        let f = r.get("function").and_then(|f| f.as_str()).unwrap_or("?");
        match what {
            Attribution::Function => f.to_string(),
            Attribution::Line => format!("{}  {f}", r.get("line").and_then(|l| l.as_str()).unwrap_or("?")),
        }
    };
    fn num(r: &serde_json::Value, k: &str) -> u64 {
        r.get(k).and_then(|v| v.as_u64()).unwrap_or(0)
    }
    let mut rows: Vec<&serde_json::Value> = rows.iter().collect();
    rows.sort_by(|a, b| {
        num(b, "flops")
            .cmp(&num(a, "flops"))
            .then(num(b, "instructions").cmp(&num(a, "instructions")))
    });
    let share = |f: u64| {
        if total_flops > 0.0 {
            format!("{:.1}%", 100.0 * f as f64 / total_flops)
        } else {
            "-".to_string()
        }
    };
    let width = rows
        .iter()
        .take(BY_FUNCTION_ROWS)
        .map(|r| label(r).chars().count())
        .max()
        .unwrap_or(8)
        .clamp(8, 90);
    let (title, head) = match what {
        Attribution::Function => ("by function", "function"),
        Attribution::Line => ("by source line", "line  function"),
    };
    let mut s = format!(
        "  {title} (most flops first)\n    {head:<width$} {:>14} {:>14} {:>14} {:>7}\n",
        "instructions", "flops", "core bytes", "share"
    );
    for r in rows.iter().take(BY_FUNCTION_ROWS) {
        let name = label(r);
        let f = num(r, "flops");
        s += &format!(
            "    {name:<width$} {:>14} {:>14} {:>14} {:>7}\n",
            num(r, "instructions"),
            f,
            num(r, "core_bytes"),
            share(f)
        );
    }
    if rows.len() > BY_FUNCTION_ROWS {
        let rest = &rows[BY_FUNCTION_ROWS..];
        let sum = |k: &str| rest.iter().map(|r| num(r, k)).sum::<u64>();
        let f = sum("flops");
        s += &format!(
            "    {:<width$} {:>14} {:>14} {:>14} {:>7}\n",
            format!("({} more, see --json)", rest.len()),
            sum("instructions"),
            f,
            sum("core_bytes"),
            share(f)
        );
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn by_function_table_sorts_by_flops_and_gives_shares() {
        let rows = vec![
            serde_json::json!({"function": "init (a.out)", "instructions": 900, "flops": 0, "core_bytes": 4000}),
            serde_json::json!({"function": "small (a.out)", "instructions": 50, "flops": 25, "core_bytes": 8}),
            serde_json::json!({"function": "big (a.out)", "instructions": 100, "flops": 75, "core_bytes": 16}),
        ];
        let t = work_table(&rows, 100.0, Attribution::Function);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 5, "{t}");
        let cols = |l: &str| l.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        assert_eq!(cols(lines[2]), ["big", "(a.out)", "100", "75", "16", "75.0%"]);
        assert_eq!(cols(lines[3]), ["small", "(a.out)", "50", "25", "8", "25.0%"]);
        assert_eq!(cols(lines[4]), ["init", "(a.out)", "900", "0", "4000", "0.0%"]);
        // No flops at all: no share.
        assert!(
            work_table(&rows[..1], 0.0, Attribution::Function)
                .lines()
                .nth(2)
                .unwrap()
                .ends_with(" -")
        );
        // Lines: the row names the line, then the function.
        let lines = vec![
            serde_json::json!({"line": "src/a.rs:3", "function": "f (a)", "instructions": 4, "flops": 2, "core_bytes": 0}),
            serde_json::json!({"line": "src/a.rs:9", "function": "g (a)", "instructions": 4, "flops": 6, "core_bytes": 8}),
        ];
        let t = work_table(&lines, 8.0, Attribution::Line);
        let rows: Vec<&str> = t.lines().collect();
        assert!(rows[0].contains("by source line"), "{t}");
        assert_eq!(cols(rows[2]), ["src/a.rs:9", "g", "(a)", "4", "6", "8", "75.0%"]);
    }
}
