//! `roofline measure`: the measured points as text.

use super::Columns;
use crate::schema::Report;
use crate::schema::extras::WorkRow;

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
        for (k, v) in p.extra.counts.iter().flatten() {
            s += &format!("  {k:<24} {}\n", v.map(|x| format!("{x:.0}")).unwrap_or_default());
        }
        if let Some(rows) = &p.extra.by_function
            && show.functions
        {
            s += &work_table(rows, p.flops.total, Attribution::Function);
        }
        if let Some(rows) = &p.extra.by_line
            && show.lines
        {
            s += &work_table(rows, p.flops.total, Attribution::Line);
        }
        if let Some(g) = p.extra.effective_ghz {
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
fn work_table(rows: &[WorkRow], total_flops: f64, what: Attribution) -> String {
    let label = |r: &WorkRow| -> String {
        let f = &r.function;
        match what {
            Attribution::Function => f.to_string(),
            Attribution::Line => format!("{}  {f}", r.line.as_deref().unwrap_or("?")),
        }
    };
    let mut rows: Vec<&WorkRow> = rows.iter().collect();
    rows.sort_by(|a, b| b.flops.cmp(&a.flops).then(b.instructions.cmp(&a.instructions)));
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
    let cols = Columns::new(" ").left(width).right(14).right(14).right(14).right(7);
    let line = |name: String, instructions: u64, flops: u64, core_bytes: u64| {
        let cells = [
            name,
            instructions.to_string(),
            flops.to_string(),
            core_bytes.to_string(),
            share(flops),
        ];
        format!("    {}\n", cols.line(cells))
    };
    let mut s = format!(
        "  {title} (most flops first)\n    {}\n",
        cols.line([head, "instructions", "flops", "core bytes", "share"])
    );
    for r in rows.iter().take(BY_FUNCTION_ROWS) {
        s += &line(label(r), r.instructions, r.flops, r.core_bytes);
    }
    if rows.len() > BY_FUNCTION_ROWS {
        let rest = &rows[BY_FUNCTION_ROWS..];
        let sum = |k: fn(&WorkRow) -> u64| rest.iter().map(|r| k(r)).sum::<u64>();
        let more = format!("({} more, see --json)", rest.len());
        s += &line(more, sum(|r| r.instructions), sum(|r| r.flops), sum(|r| r.core_bytes));
    }
    s
}

#[cfg(all(test, feature = "analysis"))]
mod tests {
    use super::*;
    use crate::report::tables::end_of;
    use crate::report::tables::tests::point;

    /// Attribution rows as the JSON report has them.
    fn typed(rows: Vec<serde_json::Value>) -> Vec<WorkRow> {
        rows.into_iter().map(|r| serde_json::from_value(r).unwrap()).collect()
    }

    #[test]
    fn by_function_table_sorts_by_flops_and_gives_shares() {
        let rows = typed(vec![
            serde_json::json!({"function": "init (a.out)", "instructions": 900, "flops": 0, "core_bytes": 4000}),
            serde_json::json!({"function": "small (a.out)", "instructions": 50, "flops": 25, "core_bytes": 8}),
            serde_json::json!({"function": "big (a.out)", "instructions": 100, "flops": 75, "core_bytes": 16}),
        ]);
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
        let lines = typed(vec![
            serde_json::json!({"line": "src/a.rs:3", "function": "f (a)", "instructions": 4, "flops": 2, "core_bytes": 0}),
            serde_json::json!({"line": "src/a.rs:9", "function": "g (a)", "instructions": 4, "flops": 6, "core_bytes": 8}),
        ]);
        let t = work_table(&lines, 8.0, Attribution::Line);
        let rows: Vec<&str> = t.lines().collect();
        assert!(rows[0].contains("by source line"), "{t}");
        assert_eq!(cols(rows[2]), ["src/a.rs:9", "g", "(a)", "4", "6", "8", "75.0%"]);
    }

    fn row(function: &str, flops: u64) -> WorkRow {
        WorkRow {
            function: function.to_string(),
            line: Some("src/a.rs:1".to_string()),
            instructions: 10 * flops + 1,
            flops,
            core_bytes: 8,
            ..WorkRow::default()
        }
    }

    #[test]
    fn a_name_wider_than_its_header_widens_the_column_for_every_row() {
        let wide = "a_function_name_much_wider_than_the_header::<T> (libfoo.so)";
        let rows = [row("f", 3), row(wide, 2), row("g", 1)];
        let t = work_table(&rows, 6.0, Attribution::Function);
        let lines: Vec<&str> = t.lines().skip(1).collect();
        let width = lines[0].chars().count();
        assert!(lines.iter().all(|l| l.chars().count() == width), "{t}");
        for (l, share) in lines.iter().zip(["share", "50.0%", "33.3%", "16.7%"]) {
            assert!(l.ends_with(share), "{t}");
        }
        assert_eq!(end_of(lines[0], "flops", 0), end_of(lines[2], " 2 ", 10) - 1, "{t}");
        // Wider than 90 characters: the column stops growing and the row is pushed right.
        let huge = "h".repeat(120);
        let t = work_table(&[row(&huge, 1), row("f", 1)], 2.0, Attribution::Function);
        let lines: Vec<&str> = t.lines().skip(1).collect();
        assert_eq!(lines[0].chars().count(), 4 + 90 + 3 * 15 + 8, "{t}");
        assert_eq!(lines[1].chars().count(), 4 + 120 + 3 * 15 + 8, "{t}");
        assert_eq!(lines[2].chars().count(), lines[0].chars().count(), "{t}");
    }

    #[test]
    fn rows_past_the_first_25_are_summed_in_one_line() {
        let rows: Vec<WorkRow> = (1..=30).map(|i| row(&format!("f{i}"), i)).collect();
        let t = work_table(&rows, 465.0, Attribution::Function);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 2 + 25 + 1, "{t}");
        assert!(lines[2].starts_with("    f30 "), "{t}");
        // f1..f5: 15 flops, 155 instructions, 40 bytes, 3.2 % of 465.
        let cols: Vec<&str> = lines[27].split_whitespace().collect();
        assert_eq!(cols, ["(5", "more,", "see", "--json)", "155", "15", "40", "3.2%"], "{t}");
    }

    #[test]
    fn the_point_summary_lists_counts_and_the_tables_asked_for() {
        let mut r = Report::new(serde_json::json!({}), Default::default());
        let mut p = point("triad", 2e6, &[("core", 2.4e7), ("dram", 3.2e7)], vec![1e-3, 1e-3]);
        // A count that is not a number (null: NaN in JSON) prints empty.
        p.extra.counts = Some([("cycles".to_string(), Some(1234567.0)), ("text".to_string(), None)].into());
        p.extra.effective_ghz = Some(3.4567);
        p.extra.by_function = Some(vec![row("f", 1)]);
        p.extra.by_line = Some(vec![row("f", 1)]);
        r.points = vec![p, point("copy", 0.0, &[("l2", 1.0)], vec![0.0])];
        let plain = measure_table(&r, Show::default());
        assert_eq!(
            plain.lines().take(8).collect::<Vec<_>>(),
            [
                "triad: T 0.001000 s (median of 2)",
                "  W 2.0000e6 flop  (2.000 GFLOP/s)",
                "    packed256_double     1.5000e6",
                "    scalar_double        5.0000e5",
                "  Q core  22.9 MiB  (24.000 GB/s, AI 0.083)",
                "  Q dram  30.5 MiB  (32.000 GB/s, AI 0.062)",
                "  cycles                   1234567",
                "  text                     ",
            ]
        );
        assert!(
            plain.contains("  effective clock 3.457 GHz (cycles / task-clock)\n  note: a note\n"),
            "{plain}"
        );
        assert!(
            plain.contains("copy: T 0.000000 s (median of 1)\n  W not counted\n  Q l2    1 B\n"),
            "{plain}"
        );
        assert!(!plain.contains("by function") && !plain.contains("by source line"), "{plain}");
        let both = measure_table(
            &r,
            Show {
                functions: true,
                lines: true,
            },
        );
        assert!(both.find("by function").unwrap() < both.find("by source line").unwrap(), "{both}");
    }
}
