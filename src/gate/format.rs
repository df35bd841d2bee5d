//! Gate outputs: a text table, JSON (`roofline.gate/1`), JUnit XML, GitHub Actions annotations
//! and a markdown job summary.

use std::fmt::Write as _;

use super::{GateOutcome, Method, Row, Verdict};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Text,
    Json,
    Junit,
    Github,
    Markdown,
}

impl Format {
    /// The format an output file's extension selects.
    pub fn from_extension(ext: &str) -> Option<Format> {
        match ext {
            "txt" => Some(Format::Text),
            "json" => Some(Format::Json),
            "xml" => Some(Format::Junit),
            "md" => Some(Format::Markdown),
            _ => None,
        }
    }
    pub const EXTENSIONS: [&'static str; 4] = ["txt", "json", "xml", "md"];
}

pub fn render(o: &GateOutcome, f: Format) -> String {
    match f {
        Format::Text => text(o),
        Format::Json => serde_json::to_string_pretty(o).expect("a gate outcome always serializes") + "\n",
        Format::Junit => junit(o),
        Format::Github => github(o),
        Format::Markdown => markdown(o),
    }
}

/// A number for people: integers in full (flop and byte counts must show a change of 1),
/// others to 4 significant digits.
pub fn num(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(x) if x.fract() == 0.0 && x.abs() < 1e16 => format!("{x:.0}"),
        Some(x) if x.abs() >= 1e16 || !x.is_finite() => format!("{x:.4e}"),
        Some(x) if x.abs() >= 1e6 => format!("{x:.1}"),
        Some(x) if x != 0.0 && x.abs() < 1e-3 => format!("{x:.4e}"),
        Some(x) => {
            let digits = (3 - x.abs().log10().floor() as i32).clamp(0, 8) as usize;
            format!("{x:.digits$}")
        }
    }
}

fn change(r: &Row) -> String {
    match r.change {
        // a change of a few flops in millions must not print as +0.00 %
        Some(c) if c != 0.0 && c.abs() < 5e-5 => format!("{:+.1e}%", c * 100.0),
        Some(c) => format!("{:+.2}%", c * 100.0),
        None => "-".into(),
    }
}

fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Pass => "pass",
        Verdict::Fail => "FAIL",
        Verdict::Warn => "warn",
    }
}

fn details(r: &Row) -> String {
    let mut s = String::new();
    if let (Method::MannWhitney, Some(p), Some(c)) = (r.method, r.p_value, r.confidence) {
        let p = if p < 1e-3 { format!("{p:.1e}") } else { format!("{p:.3}") };
        let _ = write!(s, "Mann-Whitney p={p} (regression confidence {:.1}%)", c * 100.0);
    }
    if let Some(n) = &r.note {
        if !s.is_empty() {
            s.push_str("; ");
        }
        s.push_str(n);
    }
    s
}

fn headline(o: &GateOutcome) -> String {
    let s = &o.summary;
    format!(
        "roofline gate: {} — {} checks, {} failed, {} warnings ({} new, {} vanished points)",
        if o.passed { "PASS" } else { "FAIL" },
        s.rows,
        s.failed,
        s.warnings,
        s.new_points.len(),
        s.vanished_points.len()
    )
}

fn cells(r: &Row) -> [String; 8] {
    [
        r.point.clone(),
        r.metric.clone(),
        r.rule.clone(),
        num(r.baseline),
        num(r.current),
        change(r),
        verdict(r.verdict).into(),
        details(r),
    ]
}

const HEADER: [&str; 8] = ["point", "metric", "rule", "baseline", "current", "change", "verdict", "details"];

fn text(o: &GateOutcome) -> String {
    let rows: Vec<[String; 8]> = o.rows.iter().map(cells).collect();
    let mut width = HEADER.map(|h| h.chars().count());
    for r in &rows {
        for (w, c) in width.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |c: &[String]| {
        let mut s = String::new();
        for (i, cell) in c.iter().enumerate() {
            let pad = width[i].saturating_sub(cell.chars().count());
            if (3..=5).contains(&i) {
                s.push_str(&" ".repeat(pad));
                s.push_str(cell);
            } else {
                s.push_str(cell);
                if i + 1 < c.len() {
                    s.push_str(&" ".repeat(pad));
                }
            }
            if i + 1 < c.len() {
                s.push_str("  ");
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(&HEADER.map(String::from));
    for r in &rows {
        out.push_str(&line(r));
    }
    out.push_str(&headline(o));
    out.push('\n');
    out
}

fn markdown(o: &GateOutcome) -> String {
    let esc = |s: &str| s.replace('|', "\\|");
    let mut out = format!("### {}\n\n", headline(o));
    out.push_str("| point | metric | rule | baseline | current | change | verdict | details |\n");
    out.push_str("|---|---|---|--:|--:|--:|---|---|\n");
    // Failures and warnings first: they are what a reviewer looks for.
    let mut rows: Vec<&Row> = o.rows.iter().collect();
    rows.sort_by_key(|r| match r.verdict {
        Verdict::Fail => 0,
        Verdict::Warn => 1,
        Verdict::Pass => 2,
    });
    for r in rows {
        let c = cells(r);
        let mark = match r.verdict {
            Verdict::Pass => "✅ pass",
            Verdict::Fail => "❌ **FAIL**",
            Verdict::Warn => "⚠️ warn",
        };
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} | {} | {} | {} |",
            esc(&c[0]),
            esc(&c[1]),
            esc(&c[2]),
            c[3],
            c[4],
            c[5],
            mark,
            esc(&c[7])
        );
    }
    out
}

/// GitHub Actions workflow commands: one annotation per failure or warning, then a notice.
fn github(o: &GateOutcome) -> String {
    // Workflow-command data: %, CR and LF are escaped; properties also escape : and ,.
    let data = |s: &str| s.replace('%', "%25").replace('\r', "%0D").replace('\n', "%0A");
    let prop = |s: &str| data(s).replace(':', "%3A").replace(',', "%2C");
    let mut out = String::new();
    for r in &o.rows {
        let level = match r.verdict {
            Verdict::Pass => continue,
            Verdict::Fail => "error",
            Verdict::Warn => "warning",
        };
        let title = format!("roofline gate: {} {}", r.point, r.metric);
        let msg = format!(
            "{} {}: baseline {}, current {} ({}), rule {}{}",
            r.point,
            r.metric,
            num(r.baseline),
            num(r.current),
            change(r),
            r.rule,
            match details(r) {
                d if d.is_empty() => String::new(),
                d => format!("; {d}"),
            }
        );
        let _ = writeln!(out, "::{level} title={}::{}", prop(&title), data(&msg));
    }
    let _ = writeln!(out, "::notice title=roofline gate::{}", data(&headline(o)));
    out
}

fn xml(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&apos;"),
            // characters XML 1.0 cannot carry at all
            c if (c as u32) < 0x20 && !matches!(c, '\t' | '\n' | '\r') => o.push('?'),
            c => o.push(c),
        }
    }
    o
}

/// JUnit XML: one test case per checked metric of a point (class = point), failures as
/// `<failure>`, warnings as passing cases with `<system-out>`.
fn junit(o: &GateOutcome) -> String {
    let s = &o.summary;
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"roofline gate\" tests=\"{}\" failures=\"{}\">\n  <testsuite name=\"roofline gate\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"0\">",
        s.rows, s.failed, s.rows, s.failed
    );
    for r in &o.rows {
        let summary = format!(
            "{}: baseline {}, current {} ({}), rule {}",
            r.metric,
            num(r.baseline),
            num(r.current),
            change(r),
            r.rule
        );
        let _ = write!(
            out,
            "    <testcase classname=\"{}\" name=\"{}\"",
            xml(&r.point),
            xml(&format!("{} {}", r.metric, r.rule))
        );
        let d = details(r);
        match r.verdict {
            Verdict::Pass => out.push_str("/>\n"),
            Verdict::Fail => {
                let _ = writeln!(
                    out,
                    ">\n      <failure message=\"{}\" type=\"regression\">{}</failure>\n    </testcase>",
                    xml(&summary),
                    xml(&d)
                );
            }
            Verdict::Warn => {
                let _ = writeln!(
                    out,
                    ">\n      <system-out>warning: {}; {}</system-out>\n    </testcase>",
                    xml(&summary),
                    xml(&d)
                );
            }
        }
    }
    out.push_str("  </testsuite>\n</testsuites>\n");
    out
}
