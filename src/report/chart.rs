//! The report page's chart: one roofline (cache-aware where the points have core-side bytes,
//! else classic), laid out in Rust and written as SVG that the page's script makes
//! interactive. Only the roofs the points can use are shown at first (their precisions and
//! ISAs, the machine's peak for them, the memory levels); the others are drawn hidden, behind
//! the legend's toggles. Dots are sized by their share of the run time and coloured by bound.
//!
//! Two frames are laid out: zoomed to the dots' range (shown first) and the full range of
//! every roof. In each, labels are placed by [`super::labels::place`] in priority order:
//! shown roofs, dots (largest first), ridge points, then the hidden roofs; a label without a
//! free spot near its anchor is dropped, never overlapped, so any set of roofs toggled on
//! keeps the labels apart (the page's script re-checks with the browser's own text boxes and
//! hides a label that would still touch another).

use std::fmt::Write;

use super::labels::{self, Label, Rect};
use super::plot::{FONT_FAMILY, Mapper, SPARE_COLORS, error_bar, families_of, isa_color, level_color, text_size};
use super::{PlotKind, View};
use crate::model::{
    Analysis, ComputeRoof, RoofSet, level_label, point_isa, point_precision, point_rate, precision_family, precision_label,
};
use crate::schema::report::{Bound, Point};
use crate::schema::units::sig3;

/// The chart's size in SVG units (it scales to the page).
pub const WIDTH: f64 = 900.0;
/// The chart's height in SVG units.
pub const HEIGHT: f64 = 520.0;
/// The plotting area inside the chart: axes' labels to the left and below.
pub const AREA: Rect = Rect {
    x: 66.0,
    y: 8.0,
    w: WIDTH - 66.0 - 12.0,
    h: HEIGHT - 8.0 - 46.0,
};
/// Font size of roof and dot labels (px).
pub const LABEL_SIZE: f64 = 11.0;
/// Font size of the axes' tick labels (px).
const TICK_SIZE: f64 = 11.0;
/// Radius of the dot that takes the largest share of the time (px); the others scale by area.
pub const MAX_R: f64 = 15.0;
/// The smallest dot's radius (px), however small its share.
pub const MIN_R: f64 = 3.5;
/// Dots labelled at most (the largest first); the others are told by hovering.
pub const MAX_DOT_LABELS: usize = 60;

/// One roof of the chart.
#[derive(Debug, Clone)]
pub struct ChartRoof {
    /// Its key in the page (`c-double-avx512-fma`, `m-l2`): what the legend toggles.
    pub key: String,
    /// Its name without the figure (`AVX-512 FMA`, `L2`).
    pub name: String,
    /// GFLOP/s (compute) or GB/s (memory).
    pub value: f64,
    /// Unit of `value`.
    pub unit: &'static str,
    /// Compute (horizontal) or memory (slanted).
    pub compute: bool,
    /// Shown when the page opens (a roof the points can use, or the peak).
    pub shown: bool,
    /// Theoretical (dashed) rather than measured.
    pub dashed: bool,
    /// A no-FMA compute roof (thinner).
    pub thin: bool,
    /// Stroke colour, `#rrggbb`.
    pub color: String,
    /// The machine it belongs to: 0 for the first report's, 1… for reports from another kind
    /// of machine (a GPU report beside a CPU one in `roofline compare`).
    pub machine: usize,
}

impl ChartRoof {
    /// The label drawn at the roof: its name and figure.
    pub fn label(&self) -> String {
        format!("{} {} {}", self.name, sig3(self.value), self.unit)
    }
}

/// One dot: a point of the chart.
#[derive(Debug, Clone)]
pub struct ChartDot {
    /// Index into the page's data of this chart's points.
    pub index: usize,
    /// The report it comes from (several reports: before and after).
    pub report: usize,
    /// Its name as shown.
    pub name: String,
    /// AI (flop/byte) and GFLOP/s.
    pub x: f64,
    /// GFLOP/s (GOP/s for integer work).
    pub y: f64,
    /// GFLOP/s at the repetitions' interquartile range of times.
    pub err: Option<(f64, f64)>,
    /// Radius in px: area by share of the run time.
    pub r: f64,
    /// Its share of the chart's time, 0–1.
    pub share: f64,
    /// `compute`, `memory`, `overhead` or `unknown`: its colour.
    pub bound: &'static str,
}

/// What a placed label names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    /// A roof (index into [`Chart::roofs`]).
    Roof(usize),
    /// A dot (index into [`Chart::dots`]).
    Dot(usize),
    /// The ridge point of a memory roof (index into [`Chart::roofs`]).
    Ridge(usize),
}

/// A placed label.
#[derive(Debug, Clone)]
pub struct ChartLabel {
    /// Its text.
    pub text: String,
    /// Its box (px).
    pub rect: Rect,
    /// What it names.
    pub owner: Owner,
}

/// A roof's segment in a frame: (roof index, from, to) in data coordinates.
pub type Segment = (usize, (f64, f64), (f64, f64));

/// An axis tick: its value, its label's box and text.
pub type Tick = (f64, Rect, String);

/// One frame of the chart: its ranges and what it draws at them.
#[derive(Debug, Clone)]
pub struct Frame {
    /// `zoom` (the dots' range) or `full` (every roof).
    pub name: &'static str,
    /// Data to pixels.
    pub map: Mapper,
    /// Each roof's segment inside the frame (data coordinates), by roof index.
    pub segments: Vec<Segment>,
    /// Ridge points inside the frame: (memory roof index, x, y).
    pub ridges: Vec<(usize, f64, f64)>,
    /// The labels placed, in priority order.
    pub labels: Vec<ChartLabel>,
}

/// The chart of one view.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Cache-aware or classic.
    pub kind: PlotKind,
    /// Every roof, shown and hidden.
    pub roofs: Vec<ChartRoof>,
    /// Every dot.
    pub dots: Vec<ChartDot>,
    /// Before → after: (dot of report i−1, dot of report i) of one name.
    pub arrows: Vec<(usize, usize)>,
    /// Zoomed to the dots, then the full range.
    pub frames: Vec<Frame>,
}

/// The view the chart shows: the one that places the most points, cache-aware on a tie
/// (GPU points have DRAM bytes but no core-side ones: a CPU/GPU comparison is classic); None
/// when no point can be placed.
pub fn chosen_kind(view: &View) -> Option<PlotKind> {
    let placed = |k: PlotKind| view.points().filter(|(_, p, a)| dot_position(p, a, k).is_some()).count();
    let (carm, dram) = (placed(PlotKind::Carm), placed(PlotKind::Dram));
    match (carm, dram) {
        (0, 0) => None,
        (c, d) if c >= d => Some(PlotKind::Carm),
        _ => Some(PlotKind::Dram),
    }
}

/// (AI, GFLOP/s) of a point in a view, when it can be placed.
pub fn dot_position(p: &Point, a: &Analysis, kind: PlotKind) -> Option<(f64, f64)> {
    if a.skipped.is_some() {
        return None;
    }
    let level = if kind == PlotKind::Dram { "dram" } else { "core" };
    let x = *a.ai.get(level)?;
    let y = point_rate(p)?;
    (x.is_finite() && x > 0.0 && y.is_finite() && y > 0.0).then_some((x, y))
}

/// `#rrggbb` of an RGB triple.
fn hex(c: (u8, u8, u8)) -> String {
    format!("#{:02x}{:02x}{:02x}", c.0, c.1, c.2)
}

/// A key usable in HTML attributes and CSS selectors.
fn key_part(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '_' })
        .collect()
}

/// A compute roof's name, its precision said once: `AVX-512 FMA`, with several precisions on
/// the chart `FP64 AVX-512 FMA`; other precisions always name theirs (`BF16 AVX-512 dot`).
pub fn roof_name(c: &ComputeRoof, several: bool) -> String {
    let l = c.label();
    if several && matches!(c.precision.as_str(), "double" | "single") {
        format!("{} {l}", precision_label(&c.precision))
    } else {
        l
    }
}

/// The bound's class (the dot's colour).
pub fn bound_class(b: &Bound) -> &'static str {
    match b {
        Bound::Compute { .. } => "compute",
        Bound::Memory { .. } => "memory",
        Bound::Overhead => "overhead",
        Bound::Unknown => "unknown",
    }
}

/// Dot fill per bound class (Advisor's reading: compute warm, memory cool).
pub const BOUND_COLORS: [(&str, &str, &str); 4] = [
    ("compute", "#d62728", "compute-bound"),
    ("memory", "#1f77b4", "memory-bound"),
    ("overhead", "#e08a00", "overhead-bound"),
    ("unknown", "#888888", "unknown"),
];

/// One machine's roofs on a view's chart, each marked shown or hidden, read for the points
/// of the reports `ours` accepts (by index), keyed and named for machine `machine` (`GPU L2`
/// beside `L2`). Shown: for each point, the
/// compute roof it is read against (the roof of its ISA and precision that its analysis
/// names, else the highest at its ISA), the peak of each precision family the points use,
/// and the memory levels `l1`, `l2`, `l3`, `dram` (others, e.g. `l1_load`, hidden). Compute
/// roofs of other precisions and ISAs are hidden.
fn machine_roofs(view: &View, roofs: &RoofSet, kind: PlotKind, machine: usize, ours: &dyn Fn(usize) -> bool) -> Vec<ChartRoof> {
    let families = families_of(view);
    let several = families.len() > 1;
    let mut wanted: Vec<(String, String)> = Vec::new(); // (precision, isa) of the points
    let mut exact: Vec<f64> = Vec::new(); // roofs the analyses name
    let prefix = machine_prefix(view, machine);
    let points = view
        .reports
        .iter()
        .enumerate()
        .filter(|(i, _)| ours(*i))
        .flat_map(|(_, r)| r.report.points.iter().zip(&r.analyses));
    for (p, a) in points {
        if dot_position(p, a, kind).is_none() {
            continue;
        }
        let prec = point_precision(p).to_string();
        let isa = match &a.bound {
            Bound::Compute { isa } => Some(isa.clone()),
            _ => point_isa(p).map(str::to_string),
        };
        if let Some(isa) = isa
            && !wanted.contains(&(prec.clone(), isa.clone()))
        {
            wanted.push((prec, isa));
        }
        if let Some(c) = &a.compute_roof {
            exact.push(c.gflops);
        }
    }
    let mut shown_keys: Vec<String> = Vec::new();
    for (prec, isa) in &wanted {
        let at: Vec<&ComputeRoof> = roofs.compute.iter().filter(|c| &c.precision == prec && &c.isa == isa).collect();
        let named: Vec<&&ComputeRoof> = at
            .iter()
            .filter(|c| exact.iter().any(|g| (g - c.gflops).abs() <= 1e-6 * c.gflops))
            .collect();
        if named.is_empty() {
            shown_keys.extend(at.iter().max_by(|a, b| a.gflops.total_cmp(&b.gflops)).map(|c| c.key()));
        }
        shown_keys.extend(named.iter().map(|c| c.key()));
    }
    for f in &families {
        let peak = roofs
            .compute
            .iter()
            .filter(|c| precision_family(&c.precision) == *f)
            .max_by(|a, b| a.gflops.total_cmp(&b.gflops))
            .or_else(|| roofs.peak(f));
        if let Some(c) = peak {
            shown_keys.push(c.key());
        }
    }
    let mut out: Vec<ChartRoof> = Vec::new();
    let mut compute: Vec<&ComputeRoof> = roofs.compute.iter().collect();
    compute.sort_by(|a, b| b.gflops.total_cmp(&a.gflops));
    for (i, c) in compute.iter().enumerate() {
        let own = isa_color(&c.isa).filter(|_| machine == 0).map(|c| (c.0, c.1, c.2));
        let color = own.unwrap_or(SPARE_COLORS[(i + machine) % SPARE_COLORS.len()]);
        out.push(ChartRoof {
            key: format!("{}c-{}", key_prefix(machine), key_part(&c.key())),
            name: with_machine(
                &prefix,
                roof_name(c, several || !families.contains(&precision_family(&c.precision))),
            ),
            value: c.gflops,
            unit: c.unit(),
            compute: true,
            shown: shown_keys.contains(&c.key()),
            dashed: !c.empirical,
            thin: !c.fma,
            color: hex(color),
            machine,
        });
    }
    for (i, b) in roofs.bandwidth.iter().enumerate() {
        if kind == PlotKind::Dram && b.level != "dram" {
            continue;
        }
        let gbs = if kind == PlotKind::Carm || b.level == "l1" {
            b.gbs
        } else {
            b.traffic_gbs
        };
        let own = level_color(&b.level).filter(|_| machine == 0).map(|c| (c.0, c.1, c.2));
        let color = own.unwrap_or(SPARE_COLORS[(i + 3 + machine) % SPARE_COLORS.len()]);
        out.push(ChartRoof {
            key: format!("{}m-{}", key_prefix(machine), key_part(&b.level)),
            name: with_machine(&prefix, level_label(&b.level)),
            value: gbs,
            unit: "GB/s",
            compute: false,
            shown: matches!(b.level.as_str(), "l1" | "l2" | "l3" | "dram"),
            dashed: !b.empirical,
            thin: false,
            color: hex(color),
            machine,
        });
    }
    out
}

/// A roof's name with its machine's said once (`GPU FP64 tensor` stays as it is).
fn with_machine(prefix: &str, name: String) -> String {
    if prefix.is_empty() || name.starts_with(prefix) {
        name
    } else {
        format!("{prefix}{name}")
    }
}

fn key_prefix(machine: usize) -> String {
    if machine == 0 { String::new() } else { format!("x{machine}") }
}

/// The kind of machine of a report (`cpu`, `gpu`), from its machine model.
fn machine_kind(view: &View, report: usize) -> Option<String> {
    view.reports[report]
        .report
        .machine
        .get("kind")
        .and_then(|k| k.as_str())
        .map(str::to_string)
}

/// `GPU ` before the roofs of a machine other than the first.
fn machine_prefix(view: &View, machine: usize) -> String {
    if machine == 0 {
        return String::new();
    }
    let other = (1..view.reports.len()).filter(|&i| is_other_machine(view, i)).nth(machine - 1);
    other
        .and_then(|i| machine_kind(view, i))
        .map(|k| format!("{} ", k.to_ascii_uppercase()))
        .unwrap_or_default()
}

/// Is report `i` from another kind of machine than the first, with roofs of its own?
fn is_other_machine(view: &View, i: usize) -> bool {
    let first = machine_kind(view, 0);
    let k = machine_kind(view, i);
    i > 0 && k.is_some() && k != first && !view.reports[i].roofs.is_empty()
}

/// The roofs of every machine of the view: the first report's set, read for the points of
/// reports of its kind, then the set of each report from another kind of machine (`roofline
/// compare`'s GPU report), read for its own points.
pub fn view_roofs(view: &View, kind: PlotKind) -> Vec<ChartRoof> {
    let others: Vec<usize> = (1..view.reports.len()).filter(|&i| is_other_machine(view, i)).collect();
    let mut out = machine_roofs(view, &view.roofs, kind, 0, &|i| !others.contains(&i));
    for (m, &i) in others.iter().enumerate() {
        out.extend(machine_roofs(view, &view.reports[i].roofs, kind, m + 1, &|j| j == i));
    }
    out
}

/// Where a machine's memory roofs end: its highest shown compute roof (the peak of the
/// points' precisions), else its highest.
fn ridge_top(roofs: &[ChartRoof], machine: usize) -> Option<f64> {
    let top = |shown_only: bool| {
        roofs
            .iter()
            .filter(|r| r.machine == machine && r.compute && (r.shown || !shown_only))
            .map(|r| r.value)
            .fold(None, |m: Option<f64>, v| Some(m.map_or(v, |m| m.max(v))))
    };
    top(true).or_else(|| top(false))
}

/// The chart of a view: its roofs, dots, arrows and both frames laid out. None when no point
/// can be placed.
pub fn layout(view: &View) -> Option<Chart> {
    let kind = chosen_kind(view)?;
    let roofs = view_roofs(view, kind);
    let mut dots = Vec::new();
    let mut index = 0;
    for (ri, r) in view.reports.iter().enumerate() {
        for (p, a) in r.report.points.iter().zip(&r.analyses) {
            if let Some((x, y)) = dot_position(p, a, kind) {
                dots.push(ChartDot {
                    index,
                    report: ri,
                    name: view.point_label(r, p),
                    x,
                    y,
                    err: error_bar(p),
                    r: 0.0,
                    share: p.extra.time_share.unwrap_or(p.seconds).max(0.0),
                    bound: bound_class(&a.bound),
                });
                index += 1;
            }
        }
    }
    size_dots(&mut dots);
    let arrows = arrows_of(&dots);
    let (full, zoom) = frame_ranges(&roofs, &dots);
    let frames = vec![
        lay_frame("zoom", zoom, &roofs, &dots, &arrows),
        lay_frame("full", full, &roofs, &dots, &arrows),
    ];
    Some(Chart {
        kind,
        roofs,
        dots,
        arrows,
        frames,
    })
}

/// Shares of the time (normalised to sum 1) and radii: area proportional to the share, the
/// largest `MAX_R`, none below `MIN_R`.
pub fn size_dots(dots: &mut [ChartDot]) {
    let total: f64 = dots.iter().map(|d| d.share).sum();
    let largest = dots.iter().map(|d| d.share).fold(0.0, f64::max);
    for d in dots.iter_mut() {
        d.r = if largest > 0.0 {
            (MAX_R * (d.share / largest).sqrt()).max(MIN_R)
        } else {
            MIN_R
        };
        d.share = if total > 0.0 { d.share / total } else { 0.0 };
    }
}

fn arrows_of(dots: &[ChartDot]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    for (j, d) in dots.iter().enumerate() {
        if d.report == 0 {
            continue;
        }
        if let Some(i) = dots.iter().position(|b| b.report + 1 == d.report && b.name == d.name) {
            out.push((i, j));
        }
    }
    out
}

fn decade_floor(v: f64) -> f64 {
    10f64.powf(v.log10().floor())
}
fn decade_ceil(v: f64) -> f64 {
    10f64.powf(v.log10().ceil())
}

type Range = ((f64, f64), (f64, f64));

fn min_max(v: &[f64]) -> Option<(f64, f64)> {
    let v: Vec<f64> = v.iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect();
    (!v.is_empty()).then(|| {
        (
            v.iter().copied().fold(f64::INFINITY, f64::min),
            v.iter().copied().fold(0.0, f64::max),
        )
    })
}

/// Widen `(lo, hi)` about its geometric centre to at least `ratio`.
fn at_least(r: (f64, f64), ratio: f64) -> (f64, f64) {
    if r.1 / r.0 >= ratio {
        return r;
    }
    let c = (r.0 * r.1).sqrt();
    (c / ratio.sqrt(), c * ratio.sqrt())
}

/// `r` moved inside `full` (which is wider), then cut to it.
fn within(r: (f64, f64), full: (f64, f64)) -> (f64, f64) {
    let shift = if r.0 < full.0 {
        full.0 / r.0
    } else if r.1 > full.1 {
        full.1 / r.1
    } else {
        1.0
    };
    ((r.0 * shift).max(full.0), (r.1 * shift).min(full.1))
}

/// The full range (every roof and ridge, every dot, whole decades, at least three of each)
/// and the zoomed one (the dots and the shown compute roofs, padded, at least one decade).
pub fn frame_ranges(roofs: &[ChartRoof], dots: &[ChartDot]) -> (Range, Range) {
    let dx: Vec<f64> = dots.iter().map(|d| d.x).collect();
    let mut dy: Vec<f64> = dots.iter().map(|d| d.y).collect();
    for d in dots {
        if let Some((lo, hi)) = d.err {
            dy.extend([lo, hi]);
        }
    }
    let mut fx = dx.clone();
    let mut fy = dy.clone();
    for r in roofs {
        let peak_all = roofs
            .iter()
            .filter(|c| c.compute && c.machine == r.machine)
            .map(|c| c.value)
            .fold(0.0, f64::max);
        if r.compute {
            fy.push(r.value);
        } else if let Some(t) = ridge_top(roofs, r.machine) {
            fx.push(t / r.value);
            fx.push(peak_all / r.value);
        }
    }
    let full = match (min_max(&fx), min_max(&fy)) {
        (Some(x), Some(y)) => {
            let mut x = (decade_floor(x.0 / 2.0), decade_ceil(x.1 * 2.0));
            let mut y = (decade_floor(y.0 / 3.0), decade_ceil(y.1 * 1.5));
            while x.1 / x.0 < 999.0 {
                x.0 /= 10.0;
                if x.1 / x.0 < 999.0 {
                    x.1 *= 10.0;
                }
            }
            while y.1 / y.0 < 999.0 {
                y.0 /= 10.0;
            }
            (x, y)
        }
        _ => ((0.01, 100.0), (0.1, 1000.0)),
    };
    for r in roofs.iter().filter(|r| r.compute && r.shown) {
        dy.push(r.value);
    }
    let zoom = match (min_max(&dx), min_max(&dy)) {
        (Some(x), Some(y)) => {
            let x = at_least((x.0 / 2.0, x.1 * 2.0), 10.0);
            let y = at_least((y.0 / 2.0, y.1 * 1.6), 10.0);
            (within(x, full.0), within(y, full.1))
        }
        _ => full,
    };
    (full, zoom)
}

/// A roof's segment inside the ranges: compute roofs from where the highest memory roof
/// meets them; memory roofs up to their ridge with the peak.
fn segment(r: &ChartRoof, roofs: &[ChartRoof], xr: (f64, f64), yr: (f64, f64)) -> Option<((f64, f64), (f64, f64))> {
    if r.compute {
        let top_bw = roofs
            .iter()
            .filter(|m| !m.compute && m.machine == r.machine)
            .map(|m| m.value)
            .fold(0.0, f64::max);
        let start = if top_bw > 0.0 { (r.value / top_bw).max(xr.0) } else { xr.0 };
        (r.value >= yr.0 && r.value <= yr.1 && start < xr.1).then_some(((start, r.value), (xr.1, r.value)))
    } else {
        let end = ridge_top(roofs, r.machine).map(|t| t / r.value).unwrap_or(xr.1);
        let a = xr.0.max(yr.0 / r.value);
        let b = end.min(xr.1).min(yr.1 / r.value);
        (a < b).then_some(((a, r.value * a), (b, r.value * b)))
    }
}

/// Points every few pixels along a segment (px).
fn samples(map: &Mapper, a: (f64, f64), b: (f64, f64)) -> Vec<(f64, f64)> {
    let (a, b) = (map.px(a.0, a.1), map.px(b.0, b.1));
    let n = ((b.0 - a.0).hypot(b.1 - a.1) / 6.0).ceil().clamp(1.0, 300.0) as usize;
    (0..=n)
        .map(|k| {
            let t = k as f64 / n as f64;
            (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t)
        })
        .collect()
}

/// A label's box size: the bundled font's advance widths and its line height (ascent plus
/// descent), as the browser's text box measures it.
pub fn label_size(text: &str, size: f64) -> (f64, f64) {
    (text_size(text, size).0 + 1.0, (size * 1.17).ceil())
}

fn roof_label(r: &ChartRoof, seg: ((f64, f64), (f64, f64)), map: &Mapper, rivals: Vec<(f64, f64)>) -> Label {
    let text = r.label();
    let size = label_size(&text, LABEL_SIZE);
    let (a, b) = (map.px(seg.0.0, seg.0.1), map.px(seg.1.0, seg.1.1));
    let mut cands = Vec::new();
    if r.compute {
        // Right end, above the line, else below; then further left along it.
        let span = (b.0 - a.0 - size.0 - 6.0).max(0.0);
        for k in 0..6 {
            let dx = -size.0 - 4.0 - span * f64::from(k) / 5.0;
            cands.push((dx, -size.1 - 1.0));
            cands.push((dx, 2.0));
        }
        Label::free(text, b, size, cands)
            .with_owns(samples(map, seg.0, seg.1))
            .with_rivals(rivals)
    } else {
        for t in [0.1, 0.25, 0.4, 0.55, 0.7, 0.03, 0.85] {
            let (px, py) = (a.0 + (b.0 - a.0) * t, a.1 + (b.1 - a.1) * t);
            cands.push((px - a.0 - size.0 + 3.0, py - a.1 - size.1 - 1.0));
            cands.push((px - a.0 + 3.0, py - a.1 + 2.0));
        }
        Label::free(text, a, size, cands)
            .with_owns(samples(map, seg.0, seg.1))
            .with_rivals(rivals)
    }
}

fn dot_label(d: &ChartDot, map: &Mapper, dots: &[ChartDot]) -> Label {
    let text = d.name.clone();
    let size = label_size(&text, LABEL_SIZE);
    let anchor = map.px(d.x, d.y);
    let max_nudge = d.r + 10.0;
    // A dot nearer than the anchor to a box within `max_nudge` of the anchor lies within
    // `max_nudge` of the box, so within twice that plus the box's width and height of the
    // anchor: the others cannot compete, and leaving them out keeps 1,000 dots fast.
    let reach = 2.0 * max_nudge + size.0 + size.1 + 1.0;
    let rivals = dots
        .iter()
        .filter(|o| o.index != d.index)
        .map(|o| map.px(o.x, o.y))
        .filter(|p| (p.0 - anchor.0).hypot(p.1 - anchor.1) < reach)
        .collect();
    let mut l = Label::for_marker(text, anchor, size, d.r);
    // Near its dot or not at all (hovering names every dot): no leader lines across the chart.
    l.leader = false;
    l.max_nudge = max_nudge;
    l.with_rivals(rivals)
}

/// Lay out one frame: segments, ridges and labels.
pub fn lay_frame(name: &'static str, (xr, yr): Range, roofs: &[ChartRoof], dots: &[ChartDot], arrows: &[(usize, usize)]) -> Frame {
    let map = Mapper { x: xr, y: yr, area: AREA };
    let segments: Vec<Segment> = roofs
        .iter()
        .enumerate()
        .filter_map(|(i, r)| segment(r, roofs, xr, yr).map(|(a, b)| (i, a, b)))
        .collect();
    let ridges: Vec<(usize, f64, f64)> = segments
        .iter()
        .filter(|(i, _, b)| {
            let r = &roofs[*i];
            !r.compute && ridge_top(roofs, r.machine).is_some_and(|t| (b.1 - t).abs() <= 1e-9 * t)
        })
        .map(|(i, _, b)| (*i, b.0, b.1))
        .collect();
    // Requests in priority order, each with its owner.
    let mut reqs: Vec<(Label, Owner)> = Vec::new();
    let roof_req = |i: usize, a: (f64, f64), b: (f64, f64)| {
        let rivals: Vec<(f64, f64)> = segments
            .iter()
            .filter(|(j, _, _)| *j != i && (roofs[*j].shown || !roofs[i].shown))
            .flat_map(|(_, a, b)| samples(&map, *a, *b))
            .collect();
        (roof_label(&roofs[i], (a, b), &map, rivals), Owner::Roof(i))
    };
    for &(i, a, b) in segments.iter().filter(|(i, _, _)| roofs[*i].shown) {
        reqs.push(roof_req(i, a, b));
    }
    let mut by_share: Vec<&ChartDot> = dots.iter().filter(|d| inside(&map, d.x, d.y)).collect();
    by_share.sort_by(|a, b| b.share.total_cmp(&a.share).then(a.index.cmp(&b.index)));
    for d in by_share.into_iter().take(MAX_DOT_LABELS) {
        let k = dots.iter().position(|o| o.index == d.index).unwrap_or(0);
        reqs.push((dot_label(d, &map, dots), Owner::Dot(k)));
    }
    let ridge_req = |i: usize, x: f64, y: f64| {
        let text = format!("ridge {}", sig3(x));
        let size = label_size(&text, LABEL_SIZE - 1.0);
        let anchor = map.px(x, y);
        let cands = vec![
            (4.0, 4.0),
            (-size.0 / 2.0, 6.0),
            (-size.0 - 4.0, 4.0),
            (4.0, 16.0),
            (-size.0 - 4.0, 16.0),
        ];
        let mut l = Label::free(text, anchor, size, cands);
        l.max_nudge = 24.0;
        l.ambiguous_ok = false;
        (l, Owner::Ridge(i))
    };
    for &(i, x, y) in ridges.iter().filter(|(i, _, _)| roofs[*i].shown) {
        reqs.push(ridge_req(i, x, y));
    }
    for &(i, a, b) in segments.iter().filter(|(i, _, _)| !roofs[*i].shown) {
        reqs.push(roof_req(i, a, b));
    }
    for &(i, x, y) in ridges.iter().filter(|(i, _, _)| !roofs[*i].shown) {
        reqs.push(ridge_req(i, x, y));
    }
    let obstacles = obstacles(&map, dots, arrows);
    let labels_only: Vec<Label> = reqs.iter().map(|(l, _)| l.clone()).collect();
    let placed = labels::place(&labels_only, &obstacles, AREA);
    let labels = reqs
        .into_iter()
        .zip(placed)
        .filter_map(|((l, owner), p)| {
            // A leader line is never drawn here: a label that needs one is dropped.
            p.filter(|p| !p.leader).map(|p| ChartLabel {
                text: l.text,
                rect: p.rect,
                owner,
            })
        })
        .collect();
    Frame {
        name,
        map,
        segments,
        ridges,
        labels,
    }
}

fn inside(map: &Mapper, x: f64, y: f64) -> bool {
    x >= map.x.0 && x <= map.x.1 && y >= map.y.0 && y <= map.y.1
}

/// Dots, their error bars and the arrows' shafts: labels keep off them.
fn obstacles(map: &Mapper, dots: &[ChartDot], arrows: &[(usize, usize)]) -> Vec<Rect> {
    let mut out = Vec::new();
    for d in dots.iter().filter(|d| inside(map, d.x, d.y)) {
        let (x, y) = map.px(d.x, d.y);
        out.push(Rect::around(x, y, d.r + 1.0));
        if let Some((lo, hi)) = d.err {
            let (_, ylo) = map.px(d.x, lo.max(map.y.0));
            let (_, yhi) = map.px(d.x, hi.min(map.y.1));
            out.push(Rect::new(x - 1.5, yhi - 1.0, 3.0, (ylo - yhi).max(0.0) + 2.0));
        }
    }
    for &(i, j) in arrows {
        let (a, b) = (map.px(dots[i].x, dots[i].y), map.px(dots[j].x, dots[j].y));
        out.extend(labels::segment_boxes(a, b, 1.5));
    }
    out
}

/// Tick values of a log axis: decades, with 2 and 5 between them when it spans less than
/// three decades.
pub fn ticks(r: (f64, f64)) -> Vec<f64> {
    let fine = r.1 / r.0 < 999.0;
    let mut out = Vec::new();
    let mut d = decade_floor(r.0);
    while d <= r.1 * (1.0 + 1e-9) {
        for m in if fine { &[1.0, 2.0, 5.0][..] } else { &[1.0][..] } {
            let v = d * m;
            if v >= r.0 * (1.0 - 1e-9) && v <= r.1 * (1.0 + 1e-9) {
                out.push(v);
            }
        }
        d *= 10.0;
    }
    out
}

/// Axis tick labels of a frame, each with its box; a tick whose label would touch the
/// previous one keeps its grid line but not its label.
pub fn tick_labels(map: &Mapper) -> (Vec<Tick>, Vec<Tick>) {
    let mut xs: Vec<Tick> = Vec::new();
    for v in ticks(map.x) {
        let t = sig3(v);
        let (w, h) = label_size(&t, TICK_SIZE);
        let (px, _) = map.px(v, map.y.0);
        let r = Rect::new(px - w / 2.0, AREA.y + AREA.h + 4.0, w, h);
        if xs.last().is_none_or(|l| l.1.x + l.1.w + 4.0 <= r.x) && r.x >= 0.0 && r.x + r.w <= WIDTH {
            xs.push((v, r, t));
        }
    }
    let mut ys: Vec<Tick> = Vec::new();
    for v in ticks(map.y) {
        let t = sig3(v);
        let (w, h) = label_size(&t, TICK_SIZE);
        let (_, py) = map.px(map.x.0, v);
        let r = Rect::new(AREA.x - 5.0 - w, py - h / 2.0, w, h);
        let clear = ys.last().is_none_or(|l| r.y + r.h + 2.0 <= l.1.y) && !xs.iter().any(|x| x.1.overlaps(&r));
        if clear && r.y >= 0.0 {
            ys.push((v, r, t));
        }
    }
    (xs, ys)
}

fn text_el(o: &mut String, r: &Rect, size: f64, text: &str, attrs: &str) {
    // Baseline at the box top plus the font's ascent (DejaVu Sans: 0.93 em).
    let _ = write!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"{size}\"{attrs}>{}</text>",
        r.x + 0.5,
        r.y + size * 0.93,
        super::markup::esc(text)
    );
}

/// The chart as inline SVG; `id` names it in the page (the script finds its data by it).
pub fn svg(chart: &Chart, id: &str, integer: bool) -> String {
    let mut o = String::new();
    let _ = write!(
        o,
        "<svg id=\"{id}\" class=\"chart\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"group\" tabindex=\"0\" aria-label=\"{}\" aria-describedby=\"{id}-keys\" font-family=\"{FONT_FAMILY}\">",
        if chart.kind == PlotKind::Dram {
            "classic roofline"
        } else {
            "cache-aware roofline"
        }
    );
    o.push_str("<defs><marker id=\"");
    let _ = write!(
        o,
        "{id}-head\" viewBox=\"0 0 10 10\" refX=\"9\" refY=\"5\" markerWidth=\"7\" markerHeight=\"7\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\" fill=\"#444\"/></marker></defs>"
    );
    let mut later = String::new();
    for (fi, f) in chart.frames.iter().enumerate() {
        // The frames after the first are kept as text until asked for (the zoom button):
        // the browser reads a string much faster than it builds a thousand hidden dots.
        let out = if fi == 0 { &mut o } else { &mut later };
        let _ = write!(
            out,
            "<g class=\"frame\" data-frame=\"{}\"{}>",
            f.name,
            if fi == 0 { "" } else { " style=\"display:none\"" }
        );
        frame_svg(out, chart, f, id, integer);
        out.push_str("</g>");
    }
    o.push_str("</svg>");
    if !later.is_empty() {
        let _ = write!(
            o,
            "<script type=\"text/html\" id=\"{id}-frames\">{}</script>",
            later.replace("</", "<\\/")
        );
    }
    o
}

/// One frame: its plotting area, grid, axes, then its marks.
fn frame_svg(o: &mut String, chart: &Chart, f: &Frame, id: &str, integer: bool) {
    let m = &f.map;
    let (xt, yt) = tick_labels(m);
    let _ = write!(
        o,
        "<rect class=\"bg\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#fff\" stroke=\"#bbb\"/>",
        AREA.x, AREA.y, AREA.w, AREA.h
    );
    o.push_str("<g class=\"grid\" stroke=\"#e6e6e6\">");
    for v in ticks(m.x) {
        let (px, _) = m.px(v, m.y.0);
        let _ = write!(
            o,
            "<line x1=\"{px:.1}\" y1=\"{}\" x2=\"{px:.1}\" y2=\"{}\"/>",
            AREA.y,
            AREA.y + AREA.h
        );
    }
    for v in ticks(m.y) {
        let (_, py) = m.px(m.x.0, v);
        let _ = write!(
            o,
            "<line x1=\"{}\" y1=\"{py:.1}\" x2=\"{}\" y2=\"{py:.1}\"/>",
            AREA.x,
            AREA.x + AREA.w
        );
    }
    o.push_str("</g><g class=\"ticks\" fill=\"#444\">");
    for (_, r, t) in xt.iter().chain(&yt) {
        text_el(o, r, TICK_SIZE, t, "");
    }
    let (xd, yd) = if integer {
        ("arithmetic intensity (flop or op / byte)", "GFLOP/s (GOP/s for integer work)")
    } else if chart.kind == PlotKind::Dram {
        ("arithmetic intensity (flop / DRAM byte)", "performance (GFLOP/s)")
    } else {
        ("arithmetic intensity (flop / byte, core side)", "performance (GFLOP/s)")
    };
    let _ = write!(
        o,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\">{xd}</text>",
        AREA.x + AREA.w / 2.0,
        HEIGHT - 6.0
    );
    let _ = write!(
        o,
        "<text transform=\"translate(14 {:.1}) rotate(-90)\" font-size=\"12\" text-anchor=\"middle\">{yd}</text></g>",
        AREA.y + AREA.h / 2.0
    );
    marks_svg(o, chart, f, id);
}

/// A frame's roofs, ridges, arrows, error bars, dots and labels.
fn marks_svg(o: &mut String, chart: &Chart, f: &Frame, id: &str) {
    let m = &f.map;
    // Roofs
    for &(i, a, b) in &f.segments {
        let r = &chart.roofs[i];
        let (pa, pb) = (m.px(a.0, a.1), m.px(b.0, b.1));
        let _ = write!(
            o,
            "<line class=\"roof\" data-roof=\"{}\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"{}\" stroke-width=\"{}\"{}{}/>",
            r.key,
            pa.0,
            pa.1,
            pb.0,
            pb.1,
            r.color,
            if r.thin { "1.2" } else { "2" },
            if r.dashed { " stroke-dasharray=\"7 5\"" } else { "" },
            if r.shown { "" } else { " style=\"display:none\"" }
        );
    }
    for &(i, x, y) in &f.ridges {
        let (px, py) = m.px(x, y);
        let _ = write!(
            o,
            "<rect class=\"ridge\" data-roof=\"{}\" x=\"{:.1}\" y=\"{:.1}\" width=\"7\" height=\"7\" fill=\"none\" stroke=\"#333\"{}/>",
            chart.roofs[i].key,
            px - 3.5,
            py - 3.5,
            if chart.roofs[i].shown { "" } else { " style=\"display:none\"" }
        );
    }
    // Arrows before → after, then error bars, then dots (largest first: small ones on top).
    for &(i, j) in &chart.arrows {
        let (a, b) = (&chart.dots[i], &chart.dots[j]);
        if !inside(m, a.x, a.y) || !inside(m, b.x, b.y) {
            continue;
        }
        let (pa, pb) = (m.px(a.x, a.y), m.px(b.x, b.y));
        let len = (pb.0 - pa.0).hypot(pb.1 - pa.1);
        if len <= a.r + b.r + 4.0 {
            continue;
        }
        let (ux, uy) = ((pb.0 - pa.0) / len, (pb.1 - pa.1) / len);
        let _ = write!(
            o,
            "<line class=\"arrow\" x1=\"{:.1}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#444\" stroke-width=\"1.5\" marker-end=\"url(#{id}-head)\"/>",
            pa.0 + ux * a.r,
            pa.1 + uy * a.r,
            pb.0 - ux * (b.r + 1.0),
            pb.1 - uy * (b.r + 1.0)
        );
    }
    o.push_str("<g class=\"err\" stroke=\"#555\">");
    for d in chart.dots.iter().filter(|d| inside(m, d.x, d.y)) {
        if let Some((lo, hi)) = d.err {
            let (x, ylo) = m.px(d.x, lo.max(m.y.0));
            let (_, yhi) = m.px(d.x, hi.min(m.y.1));
            let _ = write!(o, "<line x1=\"{x:.1}\" y1=\"{ylo:.1}\" x2=\"{x:.1}\" y2=\"{yhi:.1}\"/>");
        }
    }
    o.push_str("</g><g class=\"dots\">");
    let mut order: Vec<&ChartDot> = chart.dots.iter().filter(|d| inside(m, d.x, d.y)).collect();
    order.sort_by(|a, b| b.r.total_cmp(&a.r));
    for d in order {
        let (x, y) = m.px(d.x, d.y);
        let _ = write!(
            o,
            "<circle class=\"dot {}{}\" data-i=\"{}\" cx=\"{x:.1}\" cy=\"{y:.1}\" r=\"{:.1}\"/>",
            d.bound,
            if d.report + 1 < report_count(chart) { " old" } else { "" },
            d.index,
            d.r
        );
    }
    o.push_str("</g><g class=\"labels\">");
    for (k, l) in f.labels.iter().enumerate() {
        let (attr, color, size) = match l.owner {
            Owner::Roof(i) => (
                format!(" data-roof=\"{}\"{}", chart.roofs[i].key, hidden(chart.roofs[i].shown)),
                chart.roofs[i].color.clone(),
                LABEL_SIZE,
            ),
            Owner::Ridge(i) => (
                format!(" data-roof=\"{}\"{}", chart.roofs[i].key, hidden(chart.roofs[i].shown)),
                "#555".to_string(),
                LABEL_SIZE - 1.0,
            ),
            Owner::Dot(i) => (format!(" data-i=\"{}\"", chart.dots[i].index), "#111".to_string(), LABEL_SIZE),
        };
        text_el(
            o,
            &l.rect,
            size,
            &l.text,
            &format!(" class=\"lbl\" data-prio=\"{k}\" fill=\"{color}\"{attr}"),
        );
    }
    o.push_str("</g>");
}

fn hidden(shown: bool) -> &'static str {
    if shown { "" } else { " style=\"display:none\"" }
}

fn report_count(chart: &Chart) -> usize {
    chart.dots.iter().map(|d| d.report + 1).max().unwrap_or(1)
}

/// Does the view hold integer work (ops, not flops)?
pub fn integer_work(view: &View) -> bool {
    families_of(view).iter().any(|f| crate::model::is_integer_precision(f))
}

#[cfg(test)]
#[path = "chart_tests.rs"]
mod tests;
