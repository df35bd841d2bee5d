//! Roofline plots with plotters: SVG and PNG (through the bundled DejaVu Sans, no fontconfig).
//!
//! A plot is one panel per view (`carm`, `dram`, `hierarchical`; `all` puts them side by side).
//! Each panel is laid out first in pixels ([`layout_panel`]: roof lines, ridge points, markers,
//! error bars, before→after arrows, and labels placed without overlap by [`super::labels`]),
//! then drawn: axes and grid by plotters' chart, the rest in pixel space on the same mapping.
//! Empirical roofs are solid, theoretical ones dashed; no-FMA compute roofs are thinner.

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;
use std::sync::Once;

use super::labels::{self, Label, Rect};
use super::{Exporter, PlotKind, View};
use crate::error::{Error, Result};
use crate::model::{ComputeRoof, RoofSet, level_label, level_rank, point_precision, point_rate, precision_family, precision_label};
use crate::schema::units::sig3;

/// DejaVu Sans (Bitstream Vera license, assets/DejaVuSans-LICENSE.txt).
static FONT: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");
/// The family SVG text names: the bundled font first, then the font it was drawn after (same
/// widths within a few %), then any sans-serif. Layout is measured with the bundled font.
pub const FONT_FAMILY: &str = "DejaVu Sans, Verdana, sans-serif";
pub const FONT_SIZE: f64 = 13.0;
const SMALL: f64 = 11.0;
const MARKER_R: f64 = 4.5;

/// Register the bundled font with plotters once (PNG text and text measurement).
pub fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(FONT_FAMILY, FontStyle::Normal, FONT);
    });
}

/// Text box size in pixels under the bundled font at font size `size` px (the CSS/SVG
/// font-size: the em square is `size` px tall), as [`text_pixels`] draws it.
pub fn text_size(text: &str, size: f64) -> (f64, f64) {
    register_font();
    match png_text::layout(text, size) {
        Some((_, width, height, _)) => (f64::from(width) + 2.0, f64::from(height).max(size) + 1.0),
        None => (text.chars().count() as f64 * size * 0.62 + 2.0, size + 2.0),
    }
}

/// Distinct colours for overlaid reports (Tableau 10).
pub const PALETTE: [(u8, u8, u8); 10] = [
    (31, 119, 180),
    (255, 127, 14),
    (44, 160, 44),
    (214, 39, 40),
    (148, 103, 189),
    (140, 86, 75),
    (227, 119, 194),
    (127, 127, 127),
    (188, 189, 34),
    (23, 190, 207),
];

pub fn report_color(i: usize) -> RGBColor {
    let (r, g, b) = PALETTE[i % PALETTE.len()];
    RGBColor(r, g, b)
}

/// Preferred roof colour per ISA (compute roofs: warm hues and grey).
pub fn isa_color(isa: &str) -> Option<RGBColor> {
    Some(match isa {
        "scalar" => RGBColor(105, 105, 105),
        "sse" => RGBColor(166, 98, 28),
        "avx" => RGBColor(140, 70, 190),
        "avx2" => RGBColor(215, 40, 140),
        "avx512" => RGBColor(200, 20, 20),
        "amx" => RGBColor(120, 0, 160),
        "gpu" => RGBColor(110, 60, 30),
        _ => return None,
    })
}

/// Preferred roof colour per memory level (memory roofs: blues and greens).
pub fn level_color(level: &str) -> Option<RGBColor> {
    Some(match level {
        "l1" => RGBColor(0, 140, 140),
        "l1_load" => RGBColor(0, 165, 230),
        "l1_store" => RGBColor(100, 200, 100),
        "l2" => RGBColor(30, 120, 30),
        "l3" => RGBColor(185, 155, 0),
        "dram" => RGBColor(20, 40, 130),
        "shared" => RGBColor(240, 120, 0),
        _ => return None,
    })
}

/// Colours for roofs without a preferred one, or whose preferred one another kind of roof
/// in the same plot already took.
pub(super) const SPARE_COLORS: [(u8, u8, u8); 10] = [
    (0, 0, 0),
    (255, 127, 14),
    (23, 190, 207),
    (188, 189, 34),
    (227, 119, 194),
    (90, 90, 200),
    (140, 86, 75),
    (0, 90, 90),
    (150, 150, 255),
    (120, 0, 60),
];

/// How far apart two roof colours must be (Euclidean RGB) to count as distinct.
pub const MIN_COLOR_DISTANCE: f64 = 60.0;

/// Euclidean distance of two colours in RGB.
pub fn color_distance(a: RGBColor, b: RGBColor) -> f64 {
    let d = |x: u8, y: u8| f64::from(x) - f64::from(y);
    (d(a.0, b.0).powi(2) + d(a.1, b.1).powi(2) + d(a.2, b.2).powi(2)).sqrt()
}

/// One colour per kind of roof (`RoofLine::key`): its preferred colour where that is clearly
/// distinct from every colour already given, else the first spare colour that is.
fn assign_roof_colors(roofs: &mut [RoofLine]) {
    let mut given: Vec<(String, RGBColor)> = Vec::new();
    for r in roofs.iter_mut() {
        if let Some((_, c)) = given.iter().find(|(k, _)| *k == r.key) {
            r.color = *c;
            continue;
        }
        let distinct = |c: RGBColor| given.iter().all(|(_, g)| color_distance(*g, c) >= MIN_COLOR_DISTANCE);
        let preferred = if r.compute {
            isa_color(&r.kind_name)
        } else {
            level_color(&r.kind_name)
        };
        let c = preferred
            .filter(|c| distinct(*c))
            .or_else(|| SPARE_COLORS.iter().map(|&(r, g, b)| RGBColor(r, g, b)).find(|c| distinct(*c)))
            .unwrap_or(RGBColor(60, 60, 60));
        r.color = c;
        given.push((r.key.clone(), c));
    }
}

/// Marker shape per memory level in the hierarchical view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Circle,
    Triangle,
    Square,
    Diamond,
}

fn level_shape(level: &str) -> Shape {
    match level {
        "core" | "l1" => Shape::Circle,
        "l2" => Shape::Triangle,
        "l3" => Shape::Square,
        _ => Shape::Diamond,
    }
}

/// Log-log mapping from data to absolute pixels.
#[derive(Debug, Clone, Copy)]
pub struct Mapper {
    pub x: (f64, f64),
    pub y: (f64, f64),
    pub area: Rect,
}

impl Mapper {
    pub fn px(&self, x: f64, y: f64) -> (f64, f64) {
        let fx = (x.ln() - self.x.0.ln()) / (self.x.1.ln() - self.x.0.ln());
        let fy = (y.ln() - self.y.0.ln()) / (self.y.1.ln() - self.y.0.ln());
        (self.area.x + fx * self.area.w, self.area.y + self.area.h - fy * self.area.h)
    }
}

/// A roof line in data coordinates, already clipped to the panel's ranges.
#[derive(Debug, Clone)]
pub struct RoofLine {
    pub label: String,
    pub from: (f64, f64),
    pub to: (f64, f64),
    pub dashed: bool,
    pub thin: bool,
    pub color: RGBColor,
    pub compute: bool,
    /// The ISA (compute) or memory level.
    pub kind_name: String,
    /// The kind of roof: machine (roof set), compute or memory, ISA or level. Roofs of one
    /// kind (FMA and no-FMA of an ISA) share a colour; roofs of different kinds never do.
    pub key: String,
}

#[derive(Debug, Clone)]
pub struct Marker {
    pub report: usize,
    pub point: usize,
    pub level: Option<String>,
    pub x: f64,
    pub y: f64,
    /// GFLOP/s at the interquartile range of the repetitions' times (Q3 time, Q1 time): the
    /// same spread the table reports.
    pub err: Option<(f64, f64)>,
    pub shape: Shape,
}

#[derive(Debug, Clone)]
pub struct PlacedLabel {
    pub text: String,
    pub rect: Rect,
    pub color: RGBColor,
    pub size: f64,
    /// The point a point label names (report, point index).
    pub owner: Option<(usize, usize)>,
    /// A thin line from the marker (pixels) to the label, where the label could not sit
    /// unambiguously next to its marker.
    pub leader: Option<((f64, f64), (f64, f64))>,
}

/// Everything one panel draws, in data and pixel coordinates.
#[derive(Debug, Clone)]
pub struct Panel {
    /// Which panel (classic, cache-aware, hierarchical, …).
    pub kind: PlotKind,
    /// Its title.
    pub title: String,
    /// Data to pixel coordinates.
    pub map: Mapper,
    /// The roofs drawn.
    pub roofs: Vec<RoofLine>,
    /// Ridge points: where a memory roof meets the top compute roof.
    pub ridges: Vec<(f64, f64)>,
    /// The points' markers.
    pub markers: Vec<Marker>,
    /// Hierarchical view: the markers of one point joined, per report colour.
    pub joins: Vec<(usize, Vec<(f64, f64)>)>,
    /// Before → after, in data coordinates.
    pub arrows: Vec<((f64, f64), (f64, f64))>,
    /// The labels placed.
    pub labels: Vec<PlacedLabel>,
    /// Labels that found no free spot (listed under the plot).
    pub hidden: Vec<String>,
    /// Points not drawn in this view, with why.
    pub not_shown: Vec<String>,
}

fn title(kind: PlotKind) -> &'static str {
    match kind {
        PlotKind::Carm => "Cache-aware roofline (core-side AI)",
        PlotKind::Dram => "Classic roofline (DRAM AI)",
        PlotKind::Hierarchical | PlotKind::All => "Hierarchical roofline (AI per level)",
    }
}

/// The precisions of a view's points, most points first (double when there are none). Each
/// one is a family of compute roofs ([`precision_family`]): a CPU bf16 point and a GPU
/// `tensor_bf16` point are one family, `bf16`.
fn precisions_of(view: &View) -> Vec<&'static str> {
    let mut count: Vec<(&'static str, usize)> = Vec::new();
    for (_, p, _) in view.points() {
        let prec = point_precision(p);
        match count.iter_mut().find(|(q, _)| *q == prec) {
            Some(c) => c.1 += 1,
            None => count.push((prec, 1)),
        }
    }
    // Most points first; ties in a fixed order, wide formats first.
    let rank = |p: &str| {
        ["double", "single", "half", "bf16", "int16", "int8"]
            .iter()
            .position(|x| *x == p)
            .unwrap_or(6)
    };
    count.sort_by(|a, b| b.1.cmp(&a.1).then(rank(a.0).cmp(&rank(b.0))).then(a.0.cmp(b.0)));
    if count.is_empty() {
        return vec!["double"];
    }
    count.into_iter().map(|(p, _)| p).collect()
}

/// The families of roofs a view draws (one per precision family of its points, in order).
pub fn families_of(view: &View) -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    for p in precisions_of(view) {
        let f = precision_family(p);
        if !v.contains(&f) {
            v.push(f);
        }
    }
    v
}

/// The compute roofs a roof set draws for `families`, and its top roof (where memory roofs
/// end): the highest of those, else (double and single points against a set that has only the
/// other) the set's peak for the first precision.
fn drawn_compute<'a>(roofs: &'a RoofSet, view: &View, families: &[&str]) -> (Vec<&'a ComputeRoof>, Option<&'a ComputeRoof>) {
    let drawn: Vec<&ComputeRoof> = roofs
        .compute
        .iter()
        .filter(|c| families.contains(&precision_family(&c.precision)))
        .collect();
    let top = drawn
        .iter()
        .copied()
        .max_by(|a, b| a.gflops.total_cmp(&b.gflops))
        .or_else(|| precisions_of(view).into_iter().find_map(|p| roofs.peak(p)));
    (drawn, top)
}

/// A roof's label in a plot: with several families drawn, double and single roofs name
/// their precision too (the others always do).
fn roof_label(c: &ComputeRoof, several: bool) -> String {
    let l = c.label();
    if several && matches!(c.precision.as_str(), "double" | "single") {
        format!("{} {l}", precision_label(&c.precision))
    } else {
        l
    }
}

/// The roof sets a view draws: the view's own, then those of reports from another kind of
/// machine (`machine.kind`, e.g. a GPU report beside a CPU one in `roofline compare`), each
/// labelled with that kind; reports of the same kind keep the first report's roofs.
fn roof_sets(view: &View) -> Vec<(Option<String>, &RoofSet)> {
    let kind = |r: &super::NamedReport| r.report.machine.get("kind").and_then(|k| k.as_str()).map(str::to_string);
    let first = view.reports.first().and_then(kind);
    let mut sets = vec![(None, &view.roofs)];
    for r in view.reports.iter().skip(1) {
        let k = kind(r);
        if k.is_some() && k != first && !r.roofs.is_empty() && !sets.iter().any(|(_, s)| **s == r.roofs) {
            sets.push((k.map(|k| k.to_ascii_uppercase()), &r.roofs));
        }
    }
    sets
}

/// The levels whose roofs a view draws.
fn drawn_levels(roofs: &RoofSet, kind: PlotKind) -> Vec<(String, f64, bool)> {
    roofs
        .bandwidth
        .iter()
        .filter(|b| kind != PlotKind::Dram || b.level == "dram")
        .map(|b| {
            // CARM reads core-side AI against core-side roofs; the classic and hierarchical
            // views place bytes counted at a level against that level's traffic roof.
            let gbs = if kind == PlotKind::Carm || b.level == "l1" {
                b.gbs
            } else {
                b.traffic_gbs
            };
            (b.level.clone(), gbs, b.empirical)
        })
        .collect()
}

/// The (x, y) positions of one point in a view: one for carm/dram, one per level for
/// hierarchical. Empty with a reason when the point has no figure for this view.
fn positions(a: &crate::model::Analysis, kind: PlotKind) -> std::result::Result<Vec<(Option<String>, f64)>, String> {
    if let Some(why) = &a.skipped {
        return Err(why.clone());
    }
    match kind {
        PlotKind::Carm => {
            a.ai.get("core")
                .map(|x| vec![(None, *x)])
                .ok_or_else(|| "no core bytes".to_string())
        }
        PlotKind::Dram => {
            a.ai.get("dram")
                .map(|x| vec![(None, *x)])
                .ok_or_else(|| "no DRAM bytes".to_string())
        }
        _ => {
            let mut v: Vec<(Option<String>, f64)> = a.ai.iter().map(|(l, x)| (Some(l.clone()), *x)).collect();
            v.sort_by_key(|(l, _)| level_rank(l.as_deref().unwrap_or("")));
            if v.is_empty() { Err("no bytes".into()) } else { Ok(v) }
        }
    }
}

fn decade_floor(v: f64) -> f64 {
    10f64.powf(v.log10().floor())
}
fn decade_ceil(v: f64) -> f64 {
    10f64.powf(v.log10().ceil())
}

/// Axis ranges of a panel: every marker, error bar, ridge and compute roof inside, padded to
/// whole decades, at least three decades of AI and of GFLOP/s.
pub fn ranges(view: &View, kind: PlotKind) -> ((f64, f64), (f64, f64)) {
    let families = families_of(view);
    let mut xs: Vec<f64> = Vec::new();
    let mut ys: Vec<f64> = Vec::new();
    for (_, p, a) in view.points() {
        if let (Ok(pos), Some(g)) = (positions(a, kind), point_rate(p)) {
            xs.extend(pos.iter().map(|(_, x)| *x));
            ys.push(g);
            if let Some((lo, hi)) = error_bar(p) {
                ys.push(lo);
                ys.push(hi);
            }
        }
    }
    for (_, roofs) in roof_sets(view) {
        let (drawn, top) = drawn_compute(roofs, view, &families);
        let peak = top.map(|c| c.gflops);
        for c in drawn {
            ys.push(c.gflops);
        }
        if let Some(pk) = peak {
            for (_, bw, _) in drawn_levels(roofs, kind) {
                xs.push(pk / bw);
            }
        }
    }
    let finite = |v: &Vec<f64>| v.iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect::<Vec<_>>();
    let (xs, ys) = (finite(&xs), finite(&ys));
    let lo = |v: &[f64], d: f64| v.iter().copied().fold(f64::INFINITY, f64::min).min(d);
    let hi = |v: &[f64], d: f64| v.iter().copied().fold(f64::NEG_INFINITY, f64::max).max(d);
    let (mut x0, mut x1) = if xs.is_empty() {
        (0.01, 100.0)
    } else {
        (decade_floor(lo(&xs, f64::INFINITY) / 2.0), decade_ceil(hi(&xs, 0.0) * 2.0))
    };
    let (mut y0, y1) = if ys.is_empty() {
        (0.1, 1000.0)
    } else {
        (decade_floor(lo(&ys, f64::INFINITY) / 3.0), decade_ceil(hi(&ys, 0.0) * 3.0))
    };
    while x1 / x0 < 999.0 {
        x0 /= 10.0;
        if x1 / x0 < 999.0 {
            x1 *= 10.0;
        }
    }
    while y1 / y0 < 999.0 {
        y0 /= 10.0;
    }
    ((x0, x1), (y0, y1))
}

/// GFLOP/s at the interquartile range of the repetitions: (at the Q3 time, at the Q1 time),
/// the spread the table reports (one preempted repetition does not stretch the bar).
pub fn error_bar(p: &crate::report::Point) -> Option<(f64, f64)> {
    let mut t: Vec<f64> = p.seconds_samples.iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect();
    if t.len() < 2 {
        return None;
    }
    t.sort_by(f64::total_cmp);
    let (q1, q3) = (crate::schema::stats::quantile(&t, 0.25), crate::schema::stats::quantile(&t, 0.75));
    let w = crate::model::point_work(p);
    (q1 > 0.0).then(|| (w / q3 / 1e9, w / q1 / 1e9))
}

/// Clip the segment y = bw·x (memory roof) to the ranges, between x0 and x_end.
fn memory_segment(bw: f64, x_end: f64, xr: (f64, f64), yr: (f64, f64)) -> Option<((f64, f64), (f64, f64))> {
    let a = xr.0.max(yr.0 / bw);
    let b = x_end.min(xr.1).min(yr.1 / bw);
    (a < b).then_some(((a, bw * a), (b, bw * b)))
}

/// Lay a panel out: roofs, markers, arrows, labels, in the plotting `area` (absolute pixels).
pub fn layout_panel(view: &View, kind: PlotKind, xr: (f64, f64), yr: (f64, f64), area: Rect) -> Panel {
    let map = Mapper { x: xr, y: yr, area };
    let families = families_of(view);
    let several = families.len() > 1;
    let mut panel = Panel {
        kind,
        title: title(kind).to_string(),
        map,
        roofs: vec![],
        ridges: vec![],
        markers: vec![],
        joins: vec![],
        arrows: vec![],
        labels: vec![],
        hidden: vec![],
        not_shown: vec![],
    };
    // Roofs: compute roofs from where they meet the highest memory roof drawn; memory roofs
    // up to the top compute roof (their ridge point); per roof set (machine).
    for (machine, roofs) in roof_sets(view) {
        let named = |l: String| match &machine {
            Some(m) if !l.starts_with(m.as_str()) => format!("{m} {l}"),
            _ => l,
        };
        let (mut compute, peak) = drawn_compute(roofs, view, &families);
        let peak = peak.cloned();
        let levels = drawn_levels(roofs, kind);
        let top_bw = levels.iter().map(|l| l.1).fold(0.0, f64::max);
        compute.sort_by(|a, b| b.gflops.total_cmp(&a.gflops));
        for c in &compute {
            let start = if top_bw > 0.0 { (c.gflops / top_bw).max(xr.0) } else { xr.0 };
            if c.gflops < yr.0 || c.gflops > yr.1 || start >= xr.1 {
                continue;
            }
            panel.roofs.push(RoofLine {
                label: named(format!("{} {} {}", roof_label(c, several), sig3(c.gflops), c.unit())),
                from: (start, c.gflops),
                to: (xr.1, c.gflops),
                dashed: !c.empirical,
                thin: !c.fma,
                color: RGBColor(0, 0, 0),
                compute: true,
                kind_name: c.isa.clone(),
                // One colour per ISA, and per precision family beyond double and single: a
                // family's lines read together, apart from the FP64/FP32 ones.
                key: match precision_family(&c.precision) {
                    "double" | "single" => format!("{}compute:{}", machine.as_deref().unwrap_or(""), c.isa),
                    f => format!("{}compute:{f}:{}", machine.as_deref().unwrap_or(""), c.isa),
                },
            });
        }
        for (lvl, bw, empirical) in &levels {
            let x_end = peak.as_ref().map(|p| p.gflops / bw).unwrap_or(xr.1);
            if let Some((a, b)) = memory_segment(*bw, x_end, xr, yr) {
                panel.roofs.push(RoofLine {
                    label: named(format!("{} {} GB/s", level_label(lvl), sig3(*bw))),
                    from: a,
                    to: b,
                    dashed: !empirical,
                    thin: false,
                    color: RGBColor(0, 0, 0),
                    compute: false,
                    kind_name: lvl.clone(),
                    key: format!("{}memory:{lvl}", machine.as_deref().unwrap_or("")),
                });
                if peak.is_some() && b.0 < xr.1 && (x_end - b.0).abs() <= x_end * 1e-9 {
                    panel.ridges.push(b);
                }
            }
        }
    }
    assign_roof_colors(&mut panel.roofs);
    // Markers
    for (ri, r) in view.reports.iter().enumerate() {
        for (pi, (p, a)) in r.report.points.iter().zip(&r.analyses).enumerate() {
            let label = view.point_label(r, p);
            let pos = match positions(a, kind) {
                Ok(v) => v,
                Err(why) => {
                    // Skipped points are listed once, elsewhere; here only view-specific gaps.
                    if a.skipped.is_none() {
                        panel.not_shown.push(format!("{label}: {why}"));
                    }
                    continue;
                }
            };
            let Some(g) = point_rate(p) else { continue };
            let mut join = Vec::new();
            for (lvl, x) in pos {
                let shape = lvl.as_deref().map(level_shape).unwrap_or(Shape::Circle);
                panel.markers.push(Marker {
                    report: ri,
                    point: pi,
                    level: lvl,
                    x,
                    y: g,
                    err: error_bar(p),
                    shape,
                });
                join.push((x, g));
            }
            if join.len() > 1 {
                panel.joins.push((ri, join));
            }
        }
    }
    // Arrows: a point of report i-1 to the same-named point of report i (first marker each).
    for ri in 1..view.reports.len() {
        for m in panel.markers.iter().filter(|m| m.report == ri) {
            let name = &view.reports[ri].report.points[m.point].name;
            let before = panel
                .markers
                .iter()
                .find(|b| b.report == ri - 1 && &view.reports[ri - 1].report.points[b.point].name == name && b.level == m.level);
            if let Some(b) = before
                && (m.level.is_none() || m.level.as_deref() == first_level(&panel, m))
            {
                panel.arrows.push(((b.x, b.y), (m.x, m.y)));
            }
        }
    }
    panel.labels = place_labels(view, &panel);
    let placed: Vec<String> = panel.labels.iter().map(|l| l.text.clone()).collect();
    panel.hidden = label_requests(view, &panel)
        .0
        .into_iter()
        .map(|l| l.text)
        .filter(|t| !placed.contains(t))
        .collect();
    panel
}

fn first_level<'a>(panel: &'a Panel, m: &Marker) -> Option<&'a str> {
    panel
        .markers
        .iter()
        .find(|o| o.report == m.report && o.point == m.point)
        .and_then(|o| o.level.as_deref())
}

/// Points every few pixels along a roof line.
fn roof_samples(map: &Mapper, r: &RoofLine) -> Vec<(f64, f64)> {
    let a = map.px(r.from.0, r.from.1);
    let b = map.px(r.to.0, r.to.1);
    let n = ((b.0 - a.0).hypot(b.1 - a.1) / 5.0).ceil().clamp(1.0, 400.0) as usize;
    (0..=n)
        .map(|k| {
            let t = k as f64 / n as f64;
            (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t)
        })
        .collect()
}

/// Colour, font size and owning point (report, point) of a label.
type LabelStyle = (RGBColor, f64, Option<(usize, usize)>);

/// The labels to place, in priority order, with their colours, sizes and owners.
fn label_requests(view: &View, panel: &Panel) -> (Vec<Label>, Vec<LabelStyle>) {
    let map = &panel.map;
    let area = map.area;
    let mut out = Vec::new();
    let mut style = Vec::new();
    // A roof label should read as its own line's: nearer to it than to any other roof line
    // (L1_STORE's label just under the L1_LOAD line reads as L1_LOAD's).
    let other_roofs = |own: &RoofLine| -> Vec<(f64, f64)> {
        panel
            .roofs
            .iter()
            .filter(|o| o.label != own.label)
            .flat_map(|o| roof_samples(map, o))
            .collect()
    };
    // Compute roofs: right end, above the line, else below.
    for r in panel.roofs.iter().filter(|r| r.compute) {
        let size = text_size(&r.label, SMALL);
        let (ax, ay) = map.px(r.to.0, r.to.1);
        let (sx, _) = map.px(r.from.0, r.from.1);
        let mut cands = Vec::new();
        let span = (ax - sx - size.0 - 6.0).max(0.0);
        for k in 0..6 {
            let dx = -size.0 - 4.0 - span * f64::from(k) / 5.0;
            cands.push((dx, -size.1 - 1.0));
            cands.push((dx, 2.0));
        }
        out.push(
            Label::free(r.label.clone(), (ax, ay), size, cands)
                .with_owns(roof_samples(map, r))
                .with_rivals(other_roofs(r)),
        );
        style.push((r.color, SMALL, None));
    }
    // Memory roofs: along the line, above-left of it, else below-right.
    for r in panel.roofs.iter().filter(|r| !r.compute) {
        let size = text_size(&r.label, SMALL);
        let (x0, y0) = map.px(r.from.0, r.from.1);
        let (x1, y1) = map.px(r.to.0, r.to.1);
        let anchor = (x0, y0);
        let mut cands = Vec::new();
        for t in [0.08, 0.2, 0.35, 0.5, 0.65, 0.02] {
            let (px, py) = (x0 + (x1 - x0) * t, y0 + (y1 - y0) * t);
            cands.push((px - anchor.0 - size.0 + 4.0, py - anchor.1 - size.1 - 2.0));
            cands.push((px - anchor.0 + 3.0, py - anchor.1 + 3.0));
        }
        out.push(
            Label::free(r.label.clone(), anchor, size, cands)
                .with_owns(roof_samples(map, r))
                .with_rivals(other_roofs(r)),
        );
        style.push((r.color, SMALL, None));
    }
    // Points: one label per point (its first marker).
    let mut seen: Vec<(usize, usize)> = Vec::new();
    for m in &panel.markers {
        if seen.contains(&(m.report, m.point)) {
            continue;
        }
        seen.push((m.report, m.point));
        let r = &view.reports[m.report];
        let text = view.point_label(r, &r.report.points[m.point]);
        let size = text_size(&text, FONT_SIZE);
        // Every marker of another point is a rival: the label must not read as theirs.
        let rivals = panel
            .markers
            .iter()
            .filter(|o| (o.report, o.point) != (m.report, m.point))
            .map(|o| map.px(o.x, o.y))
            .collect();
        out.push(Label::for_marker(text, map.px(m.x, m.y), size, MARKER_R).with_rivals(rivals));
        style.push((report_color(m.report), FONT_SIZE, Some((m.report, m.point))));
    }
    // Ridge points: their AI, lowest priority.
    for &(x, y) in &panel.ridges {
        let text = format!("ridge {}", sig3(x));
        let size = text_size(&text, SMALL - 1.0);
        let (ax, ay) = map.px(x, y);
        out.push(Label::free(
            text,
            (ax, ay),
            size,
            vec![(-size.0 / 2.0, 5.0), (4.0, 4.0), (-size.0 - 4.0, 4.0)],
        ));
        style.push((RGBColor(90, 90, 90), SMALL - 1.0, None));
    }
    let _ = area;
    (out, style)
}

fn place_labels(view: &View, panel: &Panel) -> Vec<PlacedLabel> {
    let (reqs, styles) = label_requests(view, panel);
    let mut obstacles: Vec<Rect> = panel
        .markers
        .iter()
        .map(|m| {
            let (x, y) = panel.map.px(m.x, m.y);
            Rect::around(x, y, MARKER_R + 1.0)
        })
        .collect();
    // Error bars are obstacles: their shaft and caps.
    for m in &panel.markers {
        if let Some((lo, hi)) = m.err {
            let (x, ylo) = panel.map.px(m.x, lo.max(panel.map.y.0));
            let (_, yhi) = panel.map.px(m.x, hi.min(panel.map.y.1));
            obstacles.push(Rect::new(x - 1.5, yhi - 1.0, 3.0, (ylo - yhi).max(0.0) + 2.0));
            for y in [ylo, yhi] {
                obstacles.push(Rect::new(x - 4.0, y - 1.0, 8.0, 2.0));
            }
        }
    }
    // Arrows are obstacles too: small boxes every few pixels along each shaft.
    for &(a, b) in &panel.arrows {
        let (ax, ay) = panel.map.px(a.0, a.1);
        let (bx, by) = panel.map.px(b.0, b.1);
        let steps = ((bx - ax).hypot(by - ay) / 5.0).ceil().max(1.0) as usize;
        for k in 1..steps {
            let t = k as f64 / steps as f64;
            obstacles.push(Rect::around(ax + (bx - ax) * t, ay + (by - ay) * t, 1.5));
        }
    }
    let placed = labels::place(&reqs, &obstacles, panel.map.area);
    reqs.into_iter()
        .zip(styles)
        .zip(placed)
        .filter_map(|((l, (color, size, owner)), r)| {
            r.map(|p| PlacedLabel {
                leader: p.leader.then(|| labels::leader_line(l.anchor, &p.rect, MARKER_R + 1.0)),
                text: l.text,
                rect: p.rect,
                color,
                size,
                owner,
            })
        })
        .collect()
}

/// Legend lines of a plot (under the titles): reports, line styles, level shapes, notes.
fn legend_items(view: &View, kind: PlotKind) -> Vec<(Option<usize>, String)> {
    let mut items: Vec<(Option<usize>, String)> = view.reports.iter().enumerate().map(|(i, r)| (Some(i), r.name.clone())).collect();
    let empirical = view.roofs.compute.iter().any(|c| c.empirical) || view.roofs.bandwidth.iter().any(|b| b.empirical);
    let theoretical = view.roofs.compute.iter().any(|c| !c.empirical) || view.roofs.bandwidth.iter().any(|b| !b.empirical);
    let style = match (empirical, theoretical) {
        (true, true) => "roofs: solid measured, dashed theoretical; thin = no FMA",
        (true, false) => "roofs: measured; thin = no FMA",
        (false, true) => "roofs: theoretical (dashed); thin = no FMA",
        (false, false) => "no roofs known",
    };
    items.push((None, style.to_string()));
    let families = families_of(view);
    if families.len() > 1 || families.iter().any(|f| !matches!(*f, "double" | "single")) {
        let names: Vec<String> = families.iter().map(|f| precision_label(f)).collect();
        items.push((
            None,
            format!(
                "compute roofs per precision: {} (each roof's label names its precision)",
                names.join(", ")
            ),
        ));
    }
    if kind == PlotKind::Hierarchical {
        items.push((None, "● core/L1  ▲ L2  ■ L3  ◆ DRAM".into()));
    }
    if view.reports.len() > 1 {
        items.push((None, "arrows: before → after".into()));
    }
    items
}

const PANEL_W_SINGLE: u32 = 960;
const PANEL_H: u32 = 680;
const PANEL_W_ALL: u32 = 760;
const TITLE_H: i32 = 26;

/// Pixel size of a plot of this kind (all its panels drawn).
pub fn plot_size(kind: PlotKind) -> (u32, u32) {
    match kind {
        PlotKind::All => (PANEL_W_ALL * 3, PANEL_H),
        _ => (PANEL_W_SINGLE, PANEL_H),
    }
}

/// Pixel size of a view's plot: one wide panel, or the panels [`drawn_panels`] keeps side by side.
pub fn view_size(view: &View) -> (u32, u32) {
    match drawn_panels(view).0.len() {
        1 if view.kind != PlotKind::All => (PANEL_W_SINGLE, PANEL_H),
        n => (PANEL_W_ALL * n.max(1) as u32, PANEL_H),
    }
}

/// The panels a view draws, and one line for each panel left out: of several panels, one where
/// no point can be placed (GPU points have per-level bytes but no core-side bytes, so the
/// cache-aware panel would be empty) is left out, never drawn empty. A single panel asked for
/// is always drawn (its points' reasons are listed as not shown).
pub fn drawn_panels(view: &View) -> (Vec<PlotKind>, Vec<String>) {
    let all = view.kind.panels();
    if all.len() < 2 {
        return (all, Vec::new());
    }
    let (mut keep, mut left_out) = (Vec::new(), Vec::new());
    for k in &all {
        let placed = view.points().any(|(_, _, a)| positions(a, *k).is_ok_and(|v| !v.is_empty()));
        if placed {
            keep.push(*k);
        } else {
            // The reason of a placeable point (one with W, T and bytes) when there is one.
            let why = view
                .points()
                .filter(|(_, _, a)| a.skipped.is_none())
                .chain(view.points())
                .find_map(|(_, _, a)| positions(a, *k).err())
                .unwrap_or_else(|| "no points".into());
            left_out.push(format!("{} left out: no point can be placed in it ({why})", title(*k)));
        }
    }
    if keep.is_empty() {
        return (all, Vec::new());
    }
    (keep, left_out)
}

fn legend_height(view: &View, kind: PlotKind, width: u32) -> i32 {
    let mut rows = 1;
    let mut x = 10.0;
    for (_, t) in legend_items(view, kind) {
        let w = text_size(&t, SMALL).0 + 24.0;
        if x + w > f64::from(width) - 10.0 {
            rows += 1;
            x = 10.0;
        }
        x += w;
    }
    rows * 17 + 6
}

type DrawResult<T> = std::result::Result<T, String>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("{e:?}")
}

fn draw_panel<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    area: &DrawingArea<DB, Shift>,
    view: &View,
    kind: PlotKind,
) -> DrawResult<Panel> {
    let (w, _h) = area.dim_in_pixel();
    let base = area.get_base_pixel();
    let font = |s: f64| (FONT_FAMILY, s).into_font();
    // Title and legend band
    let legend_h = legend_height(view, kind, w);
    let (band, chart_area) = area.split_vertically(TITLE_H + legend_h);
    band.draw(&Text::new(title(kind).to_string(), (10, 6), font(FONT_SIZE + 3.0).color(&BLACK)))
        .map_err(err)?;
    let mut x = 10;
    let mut y = TITLE_H + 2;
    for (color, text) in legend_items(view, kind) {
        let tw = text_size(&text, SMALL).0 as i32 + 24;
        if x + tw > w as i32 - 10 {
            x = 10;
            y += 17;
        }
        match color {
            Some(i) => {
                // A square swatch: circles are reserved for point markers (tests count them).
                band.draw(&Rectangle::new([(x + 1, y + 2), (x + 11, y + 12)], report_color(i).filled()))
                    .map_err(err)?;
                band.draw(&Text::new(text, (x + 15, y), font(SMALL).color(&BLACK))).map_err(err)?;
            }
            None => band
                .draw(&Text::new(text, (x, y), font(SMALL).color(&RGBColor(70, 70, 70))))
                .map_err(err)?,
        }
        x += tw;
    }
    // Axes: integer work (int8/int16 points) is in operations, not flops.
    let integer = families_of(view).iter().any(|f| crate::model::is_integer_precision(f));
    let (x_desc, y_desc) = if integer {
        (
            "arithmetic intensity (flop or op/byte)",
            "performance (GFLOP/s; GOP/s for INT8/INT16)",
        )
    } else {
        ("arithmetic intensity (flop/byte)", "performance (GFLOP/s)")
    };
    let (xr, yr) = ranges(view, kind);
    let mut chart = ChartBuilder::on(&chart_area)
        .margin_left(8)
        .margin_right(18)
        .margin_top(4)
        .margin_bottom(6)
        .x_label_area_size(42)
        .y_label_area_size(62)
        .build_cartesian_2d((xr.0..xr.1).log_scale(), (yr.0..yr.1).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|v| sig3(*v))
        .y_label_formatter(&|v| sig3(*v))
        .label_style(font(SMALL))
        .axis_desc_style(font(FONT_SIZE))
        .light_line_style(RGBColor(238, 238, 238))
        .bold_line_style(RGBColor(215, 215, 215))
        .draw()
        .map_err(err)?;
    let (p0x, p0y) = chart.backend_coord(&(xr.0, yr.1));
    let (p1x, p1y) = chart.backend_coord(&(xr.1, yr.0));
    let plot_area = Rect::new(f64::from(p0x), f64::from(p0y), f64::from(p1x - p0x), f64::from(p1y - p0y));
    let _ = base;
    let panel = layout_panel(view, kind, xr, yr, plot_area);
    draw_layout(root, &panel)?;
    Ok(panel)
}

fn pt(p: (f64, f64)) -> (i32, i32) {
    (p.0.round() as i32, p.1.round() as i32)
}

fn dashed(a: (f64, f64), b: (f64, f64), dash: f64, gap: f64) -> Vec<[(i32, i32); 2]> {
    let len = ((b.0 - a.0).powi(2) + (b.1 - a.1).powi(2)).sqrt();
    if len <= 0.0 {
        return vec![];
    }
    let (ux, uy) = ((b.0 - a.0) / len, (b.1 - a.1) / len);
    let mut out = Vec::new();
    let mut s = 0.0;
    while s < len {
        let e = (s + dash).min(len);
        out.push([pt((a.0 + ux * s, a.1 + uy * s)), pt((a.0 + ux * e, a.1 + uy * e))]);
        s += dash + gap;
    }
    out
}

fn draw_layout<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, panel: &Panel) -> DrawResult<()> {
    let map = &panel.map;
    for r in &panel.roofs {
        let a = map.px(r.from.0, r.from.1);
        let b = map.px(r.to.0, r.to.1);
        let width = if r.thin { 1 } else { 2 };
        let style = if r.thin {
            r.color.mix(0.75).stroke_width(width)
        } else {
            r.color.stroke_width(width)
        };
        if r.dashed {
            for seg in dashed(a, b, 7.0, 5.0) {
                root.draw(&PathElement::new(seg.to_vec(), style)).map_err(err)?;
            }
        } else {
            root.draw(&PathElement::new(vec![pt(a), pt(b)], style)).map_err(err)?;
        }
    }
    for &(x, y) in &panel.ridges {
        let (px, py) = pt(map.px(x, y));
        root.draw(&Rectangle::new([(px - 4, py - 4), (px + 4, py + 4)], BLACK.stroke_width(1)))
            .map_err(err)?;
    }
    for (ri, path) in &panel.joins {
        let pts: Vec<(i32, i32)> = path.iter().map(|p| pt(map.px(p.0, p.1))).collect();
        root.draw(&PathElement::new(pts, report_color(*ri).mix(0.6).stroke_width(1)))
            .map_err(err)?;
    }
    for m in &panel.markers {
        let c = report_color(m.report);
        let (px, py) = map.px(m.x, m.y);
        if let Some((lo, hi)) = m.err {
            let (_, ylo) = map.px(m.x, lo.max(map.y.0));
            let (_, yhi) = map.px(m.x, hi.min(map.y.1));
            let x = px.round() as i32;
            let style = c.stroke_width(1);
            root.draw(&PathElement::new(vec![(x, ylo.round() as i32), (x, yhi.round() as i32)], style))
                .map_err(err)?;
            for yy in [ylo, yhi] {
                root.draw(&PathElement::new(
                    vec![(x - 3, yy.round() as i32), (x + 3, yy.round() as i32)],
                    style,
                ))
                .map_err(err)?;
            }
        }
        let (x, y) = pt((px, py));
        let r = MARKER_R as i32;
        match m.shape {
            Shape::Circle => root.draw(&Circle::new((x, y), r, c.filled())).map_err(err)?,
            Shape::Triangle => root
                .draw(&Polygon::new(
                    vec![(x, y - r - 1), (x - r - 1, y + r), (x + r + 1, y + r)],
                    c.filled(),
                ))
                .map_err(err)?,
            Shape::Square => root
                .draw(&Rectangle::new([(x - r, y - r), (x + r, y + r)], c.filled()))
                .map_err(err)?,
            Shape::Diamond => root
                .draw(&Polygon::new(
                    vec![(x, y - r - 1), (x + r + 1, y), (x, y + r + 1), (x - r - 1, y)],
                    c.filled(),
                ))
                .map_err(err)?,
        }
    }
    for &(a, b) in &panel.arrows {
        let (ax, ay) = map.px(a.0, a.1);
        let (bx, by) = map.px(b.0, b.1);
        let len = ((bx - ax).powi(2) + (by - ay).powi(2)).sqrt();
        let shrink = MARKER_R + 3.0;
        if len <= 2.0 * shrink {
            continue;
        }
        let (ux, uy) = ((bx - ax) / len, (by - ay) / len);
        let s = (ax + ux * shrink, ay + uy * shrink);
        let e = (bx - ux * shrink, by - uy * shrink);
        let style = RGBColor(60, 60, 60).stroke_width(2);
        root.draw(&PathElement::new(vec![pt(s), pt(e)], style)).map_err(err)?;
        let head = 10.0;
        let (c, sn) = (0.5f64.cos(), 0.5f64.sin());
        let l = (e.0 - head * (ux * c - uy * sn), e.1 - head * (uy * c + ux * sn));
        let r = (e.0 - head * (ux * c + uy * sn), e.1 - head * (uy * c - ux * sn));
        root.draw(&Polygon::new(vec![pt(e), pt(l), pt(r)], RGBColor(60, 60, 60).filled()))
            .map_err(err)?;
    }
    for l in &panel.labels {
        if let Some((a, b)) = l.leader {
            root.draw(&PathElement::new(vec![pt(a), pt(b)], l.color.mix(0.8).stroke_width(1)))
                .map_err(err)?;
        }
    }
    for l in &panel.labels {
        let r = l.rect;
        root.draw(&Rectangle::new(
            [pt((r.x, r.y)), pt((r.x + r.w, r.y + r.h))],
            WHITE.mix(0.8).filled(),
        ))
        .map_err(err)?;
        root.draw(&Text::new(
            l.text.clone(),
            pt((r.x + 1.0, r.y)),
            (FONT_FAMILY, l.size).into_font().color(&l.color),
        ))
        .map_err(err)?;
    }
    Ok(())
}

fn draw_all<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, view: &View) -> DrawResult<Vec<Panel>> {
    root.fill(&WHITE).map_err(err)?;
    let panels = drawn_panels(view).0;
    let areas = root.split_evenly((1, panels.len()));
    let mut out = Vec::new();
    for (area, kind) in areas.iter().zip(panels) {
        out.push(draw_panel(root, area, view, kind)?);
    }
    root.present().map_err(err)?;
    Ok(out)
}

/// The plot as an SVG document, with the panels' layouts.
pub fn svg_with_layout(view: &View) -> Result<(String, Vec<Panel>)> {
    svg_sized(view, view_size(view))
}

/// Compact size of one panel for pages (HTML): readable when shown at its own width.
pub const COMPACT: (u32, u32) = (620, 540);

/// The plot as SVG at a given pixel size.
pub fn svg_sized(view: &View, size: (u32, u32)) -> Result<(String, Vec<Panel>)> {
    register_font();
    let mut s = String::new();
    let panels = {
        let root = SVGBackend::with_string(&mut s, size).into_drawing_area();
        draw_all(&root, view).map_err(|e| Error::input(format!("drawing the plot failed: {e}"), "report this as a bug"))?
    };
    Ok((s, panels))
}

/// The view drawn as SVG, at its kind's size.
pub fn svg(view: &View) -> Result<String> {
    Ok(svg_with_layout(view)?.0)
}

pub use png_text::{PngBackend, text_pixels};

/// PNG text with the font's own metrics (a backend of its own: plotters' backend traits
/// clash with its prelude's `Color` methods).
mod png_text {
    use super::FONT;
    use plotters::prelude::{BitMapBackend, DrawingBackend};
    use plotters::style::text_anchor::{HPos, VPos};
    use plotters_backend::{BackendColor, BackendCoord, BackendStyle, BackendTextStyle, DrawingErrorKind};

    /// ab_glyph's scale for a font size of `size` px. ab_glyph scales the font's height
    /// (ascent − descent) to the given pixels, while SVG/CSS `font-size` is the em square:
    /// DejaVu Sans is 1.164 em tall, so ab_glyph at `size` drew and measured text 14 % smaller
    /// than a browser renders the SVG (labels overran their layout boxes).
    pub fn em_scale(font: &ab_glyph::FontRef, size: f64) -> ab_glyph::PxScale {
        use ab_glyph::Font;
        let upem = font.units_per_em().unwrap_or(2048.0);
        ab_glyph::PxScale::from(size as f32 * font.height_unscaled() / upem)
    }

    /// One line of text laid out: (glyph, pen x) pairs, the width, the height (ascent −
    /// descent) and the ascent, in pixels.
    pub type Line = (Vec<(ab_glyph::GlyphId, f32)>, f32, f32, f32);

    /// `text` at font size `size` px laid out on one line.
    pub fn layout(text: &str, size: f64) -> Option<Line> {
        use ab_glyph::{Font, FontRef, ScaleFont};
        let font = FontRef::try_from_slice(FONT).ok()?;
        let sf = font.as_scaled(em_scale(&font, size));
        let mut pens = Vec::new();
        let mut x = 0f32;
        let mut prev = None;
        for c in text.chars() {
            let id = sf.glyph_id(c);
            if let Some(p) = prev {
                x += sf.kern(p, id);
            }
            pens.push((id, x));
            x += sf.h_advance(id);
            prev = Some(id);
        }
        Some((pens, x, sf.ascent() - sf.descent(), sf.ascent()))
    }

    /// Pixels of `text` in the bundled font at font size `size` px (see `em_scale`),
    /// relative to the anchor: (x, y, coverage). Glyphs are placed on one baseline at the
    /// font's ascent below the box's top, each at its pen position plus its own left bearing,
    /// advancing by the font's advance and kerning. (plotters' own ab_glyph path drops the left
    /// bearing and rounds each glyph's vertical offset separately: uneven spacing, and '.' off
    /// the baseline.)
    pub fn text_pixels(text: &str, size: f64, h: HPos, v: VPos) -> Vec<(i32, i32, f32)> {
        use ab_glyph::{Font, FontRef, point};
        let (Ok(font), Some((pens, width, height, ascent))) = (FontRef::try_from_slice(FONT), layout(text, size)) else {
            return vec![];
        };
        let scale = em_scale(&font, size);
        let dx = match h {
            HPos::Left => 0.0,
            HPos::Right => -width,
            HPos::Center => -width / 2.0,
        };
        let dy = match v {
            VPos::Top => 0.0,
            VPos::Center => -height / 2.0,
            VPos::Bottom => -height,
        };
        // Snap the baseline and the start to whole pixels: every glyph shares the same rows.
        let (ox, baseline) = (dx.round(), (dy + ascent).round());
        let mut out = Vec::new();
        for (id, pen) in pens {
            let g = id.with_scale_and_position(scale, point(ox + pen, baseline));
            if let Some(o) = font.outline_glyph(g) {
                let b = o.px_bounds();
                let (bx, by) = (b.min.x as i32, b.min.y as i32);
                o.draw(|gx, gy, cov| {
                    if cov > 0.0 {
                        out.push((bx + gx as i32, by + gy as i32, cov.min(1.0)));
                    }
                });
            }
        }
        out
    }

    /// The bitmap backend with text drawn by [`text_pixels`]; everything else passes through.
    pub struct PngBackend<'a> {
        inner: BitMapBackend<'a>,
    }

    impl<'a> PngBackend<'a> {
        pub fn new(inner: BitMapBackend<'a>) -> PngBackend<'a> {
            PngBackend { inner }
        }
    }

    impl DrawingBackend for PngBackend<'_> {
        type ErrorType = <BitMapBackend<'static> as DrawingBackend>::ErrorType;
        fn get_size(&self) -> (u32, u32) {
            self.inner.get_size()
        }
        fn ensure_prepared(&mut self) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.ensure_prepared()
        }
        fn present(&mut self) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.present()
        }
        fn draw_pixel(&mut self, p: BackendCoord, c: BackendColor) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_pixel(p, c)
        }
        fn draw_line<S: BackendStyle>(
            &mut self,
            a: BackendCoord,
            b: BackendCoord,
            s: &S,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_line(a, b, s)
        }
        fn draw_rect<S: BackendStyle>(
            &mut self,
            a: BackendCoord,
            b: BackendCoord,
            s: &S,
            fill: bool,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_rect(a, b, s, fill)
        }
        fn draw_path<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
            &mut self,
            path: I,
            s: &S,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_path(path, s)
        }
        fn draw_circle<S: BackendStyle>(
            &mut self,
            c: BackendCoord,
            r: u32,
            s: &S,
            fill: bool,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.draw_circle(c, r, s, fill)
        }
        fn fill_polygon<S: BackendStyle, I: IntoIterator<Item = BackendCoord>>(
            &mut self,
            vert: I,
            s: &S,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.fill_polygon(vert, s)
        }
        fn blit_bitmap(
            &mut self,
            pos: BackendCoord,
            size: (u32, u32),
            src: &[u8],
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            self.inner.blit_bitmap(pos, size, src)
        }
        fn draw_text<S: BackendTextStyle>(
            &mut self,
            text: &str,
            style: &S,
            pos: BackendCoord,
        ) -> std::result::Result<(), DrawingErrorKind<Self::ErrorType>> {
            let color = style.color();
            if color.alpha == 0.0 {
                return Ok(());
            }
            let anchor = style.anchor();
            let trans = style.transform();
            for (x, y, cov) in text_pixels(text, style.size(), anchor.h_pos, anchor.v_pos) {
                let (x, y) = trans.transform(x, y);
                self.inner.draw_pixel(
                    (pos.0 + x, pos.1 + y),
                    BackendColor {
                        alpha: color.alpha * f64::from(cov),
                        rgb: color.rgb,
                    },
                )?;
            }
            Ok(())
        }
    }
}

/// The plot as PNG bytes (rendered with the bundled font).
pub fn png(view: &View) -> Result<Vec<u8>> {
    register_font();
    let (w, h) = view_size(view);
    // plotters encodes PNG only to a file; render into a private temp file, read it back.
    let dir = std::env::temp_dir();
    let tmp = dir.join(format!("roofline-plot-{}-{:?}.png", std::process::id(), std::thread::current().id()).replace(['(', ')'], ""));
    let res = (|| {
        {
            let root = PngBackend::new(BitMapBackend::new(&tmp, (w, h))).into_drawing_area();
            draw_all(&root, view).map_err(|e| Error::input(format!("drawing the plot failed: {e}"), "report this as a bug"))?;
        }
        std::fs::read(&tmp).map_err(|e| Error::io(format!("reading back {}", tmp.display()), e))
    })();
    let _ = std::fs::remove_file(&tmp);
    res
}

pub struct PngExporter;

impl Exporter for PngExporter {
    fn export(&self, view: &View) -> Result<Vec<u8>> {
        png(view)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use plotters::style::text_anchor::{HPos, VPos};

    /// Text is measured at the em size a browser uses for `font-size`: DejaVu Sans digits are
    /// 1303/2048 em wide each (its hmtx table), so ten digits at 20 px span 127.2 px. (Scaled by
    /// the font's height instead, as ab_glyph's PxScale does, they measured 109.3 px.)
    #[test]
    fn text_is_measured_at_the_css_font_size() {
        for size in [11.0, 13.0, 20.0] {
            let (w, h) = text_size("0123456789", size);
            let digits = 10.0 * 1303.0 / 2048.0 * size;
            assert!((w - 2.0 - digits).abs() < 0.5, "{size} px: {w} vs {digits}");
            // height: ascent + descent of DejaVu Sans = 2384/2048 em
            assert!((h - 1.0 - 2384.0 / 2048.0 * size).abs() < 0.5, "{size} px: height {h}");
        }
        // the PNG glyphs cover what was measured: right edge within the box
        let px = text_pixels("0123456789", 20.0, HPos::Left, VPos::Top);
        let right = px.iter().map(|p| p.0).max().unwrap() as f64;
        assert!(right > 120.0 && right <= text_size("0123456789", 20.0).0, "right edge {right}");
    }
}
