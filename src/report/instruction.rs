//! The instruction roofline (Ding & Williams) of GPU points that carry
//! `extra.instruction_roofline` (`roofline gpu measure --set instruction|all`, or `gpu import`
//! of a capture with the instruction metrics): a text section for the terminal summary and a
//! log-log chart, GIPS (warp instructions per second) against instruction intensity (warp
//! instructions per transaction), with the warp-GIPS ceiling, one transaction ceiling per
//! level (global L1 sectors, shared wavefronts, L2 and DRAM sectors), the global-memory walls
//! at 1, 4, 8 and 32 sectors per global instruction and the shared-memory walls at 1 and 32
//! wavefronts per shared instruction.
//!
//! Every figure is read from the point's JSON; what a capture lacked is null there and shown
//! as `-` (text) or left out (chart), never invented.

use std::fmt::Write;

#[cfg(feature = "plot")]
use plotters::prelude::*;
use serde_json::Value;

#[cfg(feature = "plot")]
use super::plot::{FONT_FAMILY, FONT_SIZE, register_font, report_color};
use crate::error::{Error, Result};
use crate::model::{GLOBAL_WALLS, SHARED_WALLS};
use crate::schema::report::Point;
use crate::schema::units::{si, sig3};

/// The levels in drawing order, with their labels.
pub const LEVELS: [(&str, &str); 4] = [
    ("global_l1", "L1 (global sectors)"),
    ("shared", "shared (wavefronts)"),
    ("l2", "L2 sectors"),
    ("dram", "DRAM sectors"),
];

/// The instruction-roofline block of a point, if it has one.
pub fn block(p: &Point) -> Option<&Value> {
    p.extra.instruction_roofline.as_ref().filter(|v| v.is_object())
}

fn num(v: &Value, path: &[&str]) -> Option<f64> {
    let mut cur = v;
    for k in path {
        cur = cur.get(*k)?;
    }
    cur.as_f64()
}

fn opt(v: Option<f64>) -> String {
    v.map(sig3).unwrap_or_else(|| "-".into())
}

fn level_label(key: &str) -> &str {
    LEVELS.iter().find(|(k, _)| *k == key).map(|(_, l)| *l).unwrap_or(key)
}

/// The text section for every point with an instruction roofline; empty when none has one.
pub fn text_section<'a>(points: impl IntoIterator<Item = &'a Point>) -> String {
    let mut o = String::new();
    for p in points {
        let Some(ir) = block(p) else { continue };
        let _ = writeln!(o, "\ninstruction roofline (Ding & Williams): {}", p.name);
        let gips = num(ir, &["warp_gips"]);
        let ceiling = num(ir, &["ceilings", "warp_gips"]);
        let _ = writeln!(
            o,
            "  {} warp instructions, {} warp GIPS; warp-GIPS ceiling {}{}",
            num(ir, &["warp_instructions"]).map(si).unwrap_or_else(|| "-".into()),
            opt(gips),
            opt(ceiling),
            match (gips, ceiling) {
                (Some(g), Some(c)) if c > 0.0 => format!(" ({:.1}% of it)", 100.0 * g / c),
                _ => String::new(),
            }
        );
        let _ = writeln!(
            o,
            "  {:<20} {:>12} {:>11} {:>13} {:>11} {:>11}  binds",
            "level", "transactions", "Gtxn/s", "ceiling Gtxn/s", "inst/txn", "attainable"
        );
        for (key, label) in LEVELS {
            let Some(n) = num(ir, &["transactions", key]) else { continue };
            let binds = match ir.get("binding").and_then(|b| b.get(key)).and_then(|v| v.as_str()) {
                Some("warp_gips") => "warp GIPS",
                Some("transactions") => "transactions",
                _ => "-",
            };
            let _ = writeln!(
                o,
                "  {:<20} {:>12} {:>11} {:>13} {:>11} {:>11}  {}",
                label,
                si(n),
                opt(num(ir, &["transactions_gtxn_per_s", key])),
                opt(num(ir, &["ceilings", "transactions_gtxn_per_s", key])),
                opt(num(ir, &["instruction_intensity", key])),
                opt(num(ir, &["attainable_gips", key])),
                binds
            );
        }
        match (ir.get("bound_by").and_then(|v| v.as_str()), num(ir, &["attainable_gips_min"])) {
            (Some(b), Some(a)) => {
                let what = if b == "warp_gips" {
                    "the warp-GIPS ceiling".to_string()
                } else {
                    format!("{} transactions", level_label(b))
                };
                let _ = writeln!(
                    o,
                    "  bound by {what}: attainable {} GIPS, measured {}",
                    sig3(a),
                    num(ir, &["fraction_of_attainable"])
                        .map(|f| format!("{:.1}% of it", f * 100.0))
                        .unwrap_or_else(|| "-".into())
                );
            }
            _ => o.push_str("  bound: unknown (ceilings missing from the capture)\n"),
        }
        if let Some(g) = ir.get("global_memory").filter(|v| v.is_object()) {
            let _ = writeln!(
                o,
                "  global memory: {} sectors per instruction ({}; walls 1/4/8/32), {} GIPS",
                opt(num(g, &["sectors_per_instruction"])),
                g.pointer("/position/text").and_then(|v| v.as_str()).unwrap_or("no global accesses"),
                opt(num(g, &["gips"]))
            );
        }
        if let Some(s) = ir.get("shared_memory").filter(|v| v.is_object()) {
            let _ = writeln!(
                o,
                "  shared memory: {} wavefronts per instruction ({}; walls 1/32, 8-byte accesses need 2), {} GIPS, {} bank conflicts",
                opt(num(s, &["wavefronts_per_instruction"])),
                s.pointer("/position/text").and_then(|v| v.as_str()).unwrap_or("no shared accesses"),
                opt(num(s, &["gips"])),
                num(s, &["bank_conflicts"]).map(si).unwrap_or_else(|| "-".into())
            );
        }
        if let Some(notes) = ir.get("notes").and_then(|v| v.as_array()) {
            for n in notes.iter().filter_map(|n| n.as_str()) {
                let _ = writeln!(o, "  note: {n}");
            }
        }
    }
    o
}

/// A straight line of the chart in data coordinates.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub label: String,
    pub from: (f64, f64),
    pub to: (f64, f64),
    /// `warp`, `transactions`, `global_wall`, `shared_wall`.
    pub kind: &'static str,
    /// Level key for transaction ceilings.
    pub level: Option<&'static str>,
}

/// A marker: one kernel at one level (or its global/shared access pattern).
#[derive(Debug, Clone, PartialEq)]
pub struct ChartPoint {
    pub kernel: String,
    /// A level key, or `global_pattern` / `shared_pattern`.
    pub what: String,
    pub x: f64,
    pub y: f64,
    pub series: usize,
}

/// The chart in data coordinates: ranges, lines and markers.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    pub x: (f64, f64),
    pub y: (f64, f64),
    pub lines: Vec<Line>,
    pub points: Vec<ChartPoint>,
}

fn decade_floor(v: f64) -> f64 {
    10f64.powf(v.log10().floor())
}

fn decade_ceil(v: f64) -> f64 {
    10f64.powf(v.log10().ceil())
}

/// Lay the chart out from the points' instruction-roofline blocks (the ceilings of the first
/// point that has them). Error when no point has an instruction roofline.
pub fn layout(points: &[Point]) -> Result<Chart> {
    let blocks: Vec<(&Point, &Value)> = points.iter().filter_map(|p| block(p).map(|b| (p, b))).collect();
    if blocks.is_empty() {
        return Err(Error::input(
            "no point carries an instruction roofline (extra.instruction_roofline)",
            "measure with `roofline gpu measure --set instruction` (or `--set all`), or import a capture with the instruction metrics",
        ));
    }
    let warp = blocks.iter().find_map(|(_, b)| num(b, &["ceilings", "warp_gips"]));
    let tx_ceiling = |key: &str| {
        blocks
            .iter()
            .find_map(|(_, b)| num(b, &["ceilings", "transactions_gtxn_per_s", key]))
    };
    let mut pts = Vec::new();
    for (i, (p, b)) in blocks.iter().enumerate() {
        let y = num(b, &["warp_gips"]);
        for (key, _) in LEVELS {
            if let (Some(x), Some(y)) = (num(b, &["instruction_intensity", key]), y)
                && x > 0.0
                && y > 0.0
            {
                pts.push(ChartPoint {
                    kernel: p.name.clone(),
                    what: key.into(),
                    x,
                    y,
                    series: i,
                });
            }
        }
        for (key, what) in [("global_memory", "global_pattern"), ("shared_memory", "shared_pattern")] {
            if let (Some(x), Some(y)) = (num(b, &[key, "instruction_intensity"]), num(b, &[key, "gips"]))
                && x > 0.0
                && y > 0.0
            {
                pts.push(ChartPoint {
                    kernel: p.name.clone(),
                    what: what.into(),
                    x,
                    y,
                    series: i,
                });
            }
        }
    }
    // Ranges: every marker and wall, and the ceilings, with room around them.
    let mut xs: Vec<f64> = pts.iter().map(|p| p.x).collect();
    xs.extend([1.0 / 32.0, 1.0]);
    let mut ys: Vec<f64> = pts.iter().map(|p| p.y).collect();
    ys.extend(warp);
    let xmin = decade_floor(xs.iter().cloned().fold(f64::INFINITY, f64::min) / 2.0);
    let xmax = decade_ceil(xs.iter().cloned().fold(0.0, f64::max) * 2.0);
    let ymax = decade_ceil(ys.iter().cloned().fold(0.0, f64::max) * 2.0);
    let ymin = decade_floor((ys.iter().cloned().fold(f64::INFINITY, f64::min) / 10.0).max(ymax * 1e-7));
    let mut lines = Vec::new();
    if let Some(w) = warp {
        lines.push(Line {
            label: format!("warp GIPS {}", sig3(w)),
            from: (xmin, w),
            to: (xmax, w),
            kind: "warp",
            level: None,
        });
    }
    for (key, label) in LEVELS {
        let Some(t) = tx_ceiling(key) else { continue };
        // y = x · t up to the warp-GIPS ceiling (or the chart's top).
        let top = warp.unwrap_or(ymax).min(ymax);
        let x_start = (ymin / t).max(xmin);
        let x_end = (top / t).min(xmax);
        if x_end <= x_start {
            continue;
        }
        lines.push(Line {
            label: format!("{label} {} G/s", sig3(t)),
            from: (x_start, x_start * t),
            to: (x_end, x_end * t),
            kind: "transactions",
            level: Some(key),
        });
    }
    // Walls: vertical at 1/(transactions per instruction), up to the level's ceiling there.
    for (kind, walls, key) in [
        ("global_wall", &GLOBAL_WALLS[..], "global_l1"),
        ("shared_wall", &SHARED_WALLS[..], "shared"),
    ] {
        for w in walls {
            let x = 1.0 / w;
            let top = match (tx_ceiling(key), warp) {
                (Some(t), Some(g)) => (x * t).min(g),
                (Some(t), None) => x * t,
                (None, Some(g)) => g,
                (None, None) => ymax,
            }
            .min(ymax);
            lines.push(Line {
                label: format!("{} {w}", if kind == "global_wall" { "global" } else { "shared" }),
                from: (x, ymin),
                to: (x, top),
                kind,
                level: None,
            });
        }
    }
    Ok(Chart {
        x: (xmin, xmax),
        y: (ymin, ymax),
        lines,
        points: pts,
    })
}

#[cfg(feature = "plot")]
fn level_color(key: &str) -> RGBColor {
    match key {
        "global_l1" => RGBColor(31, 119, 180),
        "shared" => RGBColor(44, 160, 44),
        "l2" => RGBColor(255, 127, 14),
        "dram" => RGBColor(214, 39, 40),
        _ => RGBColor(90, 90, 90),
    }
}

#[cfg(feature = "plot")]
fn derr<E: std::fmt::Debug>(e: E) -> Error {
    Error::input(format!("drawing the instruction roofline failed: {e:?}"), "report this as a bug")
}

/// The instruction roofline as an SVG document (the `plot` feature).
#[cfg(feature = "plot")]
pub fn svg(points: &[Point]) -> Result<String> {
    let chart = layout(points)?;
    register_font();
    let size = (900u32, 640u32);
    let mut s = String::new();
    {
        let root = SVGBackend::with_string(&mut s, size).into_drawing_area();
        root.fill(&WHITE).map_err(derr)?;
        let font = |sz: f64| (FONT_FAMILY, sz).into_font();
        let (band, area) = root.split_vertically(58);
        band.draw(&Text::new(
            "Instruction roofline (Ding & Williams): warp GIPS vs warp instructions per transaction",
            (10, 6),
            font(FONT_SIZE + 2.0).color(&BLACK),
        ))
        .map_err(derr)?;
        // Legend: levels' colours and marker meaning.
        let mut x = 10;
        for (key, label) in LEVELS {
            band.draw(&Rectangle::new([(x, 32), (x + 10, 42)], level_color(key).filled()))
                .map_err(derr)?;
            band.draw(&Text::new(label.to_string(), (x + 14, 30), font(11.0).color(&BLACK)))
                .map_err(derr)?;
            x += 30 + super::plot::text_size(label, 11.0).0 as i32;
        }
        band.draw(&Text::new(
            "circle: kernel at a level; triangle: global LD/ST only; cross: shared LD/ST only; dashed: walls",
            (x, 30),
            font(11.0).color(&RGBColor(70, 70, 70)),
        ))
        .map_err(derr)?;
        let mut c = ChartBuilder::on(&area)
            .margin_left(8)
            .margin_right(18)
            .margin_top(4)
            .margin_bottom(6)
            .x_label_area_size(42)
            .y_label_area_size(62)
            .build_cartesian_2d((chart.x.0..chart.x.1).log_scale(), (chart.y.0..chart.y.1).log_scale())
            .map_err(derr)?;
        c.configure_mesh()
            .x_desc("instruction intensity (warp instructions per transaction)")
            .y_desc("performance (warp GIPS)")
            .x_label_formatter(&|v| sig3(*v))
            .y_label_formatter(&|v| sig3(*v))
            .label_style(font(11.0))
            .axis_desc_style(font(FONT_SIZE))
            .light_line_style(RGBColor(238, 238, 238))
            .bold_line_style(RGBColor(215, 215, 215))
            .draw()
            .map_err(derr)?;
        for l in &chart.lines {
            let (color, width) = match l.kind {
                "warp" => (BLACK, 2),
                "transactions" => (level_color(l.level.unwrap_or("")), 2),
                "global_wall" => (level_color("global_l1"), 1),
                _ => (level_color("shared"), 1),
            };
            let style = color.stroke_width(width);
            if l.kind.ends_with("wall") {
                c.draw_series(DashedLineSeries::new(vec![l.from, l.to], 6, 4, style))
                    .map_err(derr)?;
                // Wall labels at the foot of the wall, global ones a line above the shared ones.
                let dy = if l.kind == "global_wall" { 3.0 } else { 1.3 };
                c.draw_series(std::iter::once(Text::new(
                    l.label.clone(),
                    (l.from.0 * 1.05, l.from.1 * dy),
                    font(10.0).color(&color),
                )))
                .map_err(derr)?;
            } else {
                c.draw_series(LineSeries::new(vec![l.from, l.to], style)).map_err(derr)?;
                let at = if l.kind == "warp" {
                    (l.to.0 / 8.0, l.to.1 * 1.15)
                } else {
                    (l.from.0 * 1.2, l.from.1 * 1.6)
                };
                c.draw_series(std::iter::once(Text::new(l.label.clone(), at, font(11.0).color(&color))))
                    .map_err(derr)?;
            }
        }
        for p in &chart.points {
            let color = match p.what.as_str() {
                "global_pattern" => level_color("global_l1"),
                "shared_pattern" => level_color("shared"),
                k => level_color(k),
            };
            let outline = report_color(p.series);
            let at = (p.x, p.y);
            match p.what.as_str() {
                "global_pattern" => c
                    .draw_series(std::iter::once(TriangleMarker::new(at, 6, color.filled())))
                    .map(|_| ())
                    .map_err(derr)?,
                "shared_pattern" => c
                    .draw_series(std::iter::once(Cross::new(at, 5, color.stroke_width(2))))
                    .map(|_| ())
                    .map_err(derr)?,
                _ => c
                    .draw_series(std::iter::once(Circle::new(at, 5, color.filled())))
                    .map(|_| ())
                    .map_err(derr)?,
            }
            c.draw_series(std::iter::once(Circle::new(at, 7, outline.stroke_width(1))))
                .map_err(derr)?;
            if p.what == "global_l1" || (p.what == "shared" && !chart.points.iter().any(|q| q.kernel == p.kernel && q.what == "global_l1"))
            {
                c.draw_series(std::iter::once(Text::new(
                    p.kernel.clone(),
                    (p.x * 0.8, p.y / 1.35),
                    font(11.0).color(&outline),
                )))
                .map_err(derr)?;
            }
        }
        root.present().map_err(derr)?;
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::{Bytes, Flops, Provenance};

    fn prov() -> Provenance {
        Provenance {
            flops: None,
            bytes: Default::default(),
            seconds: None,
            notes: vec![],
            untrusted: Vec::new(),
        }
    }

    fn point(name: &str, ir: Value) -> Point {
        let mut p = Point::new(name, prov(), Flops::default(), Bytes::new(), 1, vec![1e-3]);
        p.extra.instruction_roofline = Some(ir);
        p
    }

    #[test]
    fn layout_lines_and_markers() {
        // A kernel of 1e9 warp instructions in 1 ms (1000 GIPS measured... against a
        // 2000-GIPS ceiling), 1e8 L1 sectors (intensity 10) with a 100 G/s L1 ceiling: the
        // L1 line meets the warp ceiling at x = 2000 / 100 = 20.
        let ir = serde_json::json!({
            "warp_instructions": 1e9, "warp_gips": 1000.0,
            "instruction_intensity": {"global_l1": 10.0},
            "ceilings": {"warp_gips": 2000.0, "transactions_gtxn_per_s": {"global_l1": 100.0, "dram": null}},
            "global_memory": {"instruction_intensity": 0.125, "gips": 4.0},
        });
        let c = layout(&[point("k", ir)]).unwrap();
        let l1 = c.lines.iter().find(|l| l.level == Some("global_l1")).unwrap();
        assert!((l1.to.0 - 20.0).abs() < 1e-9 && (l1.to.1 - 2000.0).abs() < 1e-9, "{l1:?}");
        // No DRAM ceiling in the block: no DRAM line (never invented).
        assert!(!c.lines.iter().any(|l| l.level == Some("dram")));
        // Global walls at x = 1/32, 1/8, 1/4, 1, each topped at min(x·100, 2000): the 1 wall at 100.
        let walls: Vec<&Line> = c.lines.iter().filter(|l| l.kind == "global_wall").collect();
        assert_eq!(walls.len(), 4);
        let one = walls.iter().find(|l| l.from.0 == 1.0).unwrap();
        assert_eq!(one.to.1, 100.0);
        assert_eq!(c.lines.iter().filter(|l| l.kind == "shared_wall").count(), 2);
        // Markers: the L1 level and the global pattern.
        assert_eq!(c.points.len(), 2);
        assert!(c.points.iter().any(|p| p.what == "global_pattern" && p.x == 0.125 && p.y == 4.0));
        // Ranges cover the 1/32 wall and the ceiling.
        assert!(c.x.0 <= 1.0 / 32.0 && c.y.1 >= 2000.0);
    }

    #[test]
    fn no_instruction_roofline_is_an_input_error() {
        let p = Point::new("k", prov(), Flops::default(), Bytes::new(), 1, vec![1e-3]);
        assert!(layout(&[p]).is_err());
        assert_eq!(text_section([].iter()), "");
    }
}
