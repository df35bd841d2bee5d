//! The energy roofline drawn (Choi et al.): GFLOP per joule against DRAM arithmetic
//! intensity, both axes logarithmic. The roofline 1 / (ε_flop + ε_byte / I) with its two
//! asymptotes (flops alone, bytes alone), the energy balance point ε_byte / ε_flop beside the
//! time balance point, and each point with energy at its intensity and measured GFLOP/J.
//!
//! Written as SVG text directly (a few lines and circles): every point's circle carries its
//! name and figures as `data-` attributes, so the page and the tests read where it stands.

use std::fmt::Write;

use crate::model::energy::{EnergyRoofline, place, rooflines};
use crate::report::markup::esc;
use crate::schema::units::sig3;
use crate::schema::{Point, Report};

/// Pixel size of one chart.
pub const SIZE: (f64, f64) = (720.0, 520.0);
/// Margins: left, right, top, bottom.
const MARGIN: (f64, f64, f64, f64) = (78.0, 24.0, 40.0, 56.0);

/// Log-log axes from data ranges to pixels.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Axes {
    /// Intensity range, flop per DRAM byte (whole decades).
    pub x: (f64, f64),
    /// GFLOP per joule range (whole decades).
    pub y: (f64, f64),
}

impl Axes {
    /// The pixel of (intensity, GFLOP/J).
    pub fn px(&self, ai: f64, gflop_per_joule: f64) -> (f64, f64) {
        let (w, h) = (SIZE.0 - MARGIN.0 - MARGIN.1, SIZE.1 - MARGIN.2 - MARGIN.3);
        let fx = (ai.log10() - self.x.0.log10()) / (self.x.1.log10() - self.x.0.log10());
        let fy = (gflop_per_joule.log10() - self.y.0.log10()) / (self.y.1.log10() - self.y.0.log10());
        (MARGIN.0 + fx * w, MARGIN.2 + (1.0 - fy) * h)
    }
}

fn decade_floor(v: f64) -> f64 {
    10f64.powf(v.log10().floor())
}

fn decade_ceil(v: f64) -> f64 {
    10f64.powf(v.log10().ceil())
}

/// Axes holding the balance points (a decade either side), every point, and the flop-only
/// ceiling: whole decades, at least two of each.
pub fn axes(line: &EnergyRoofline, points: &[(f64, f64)]) -> Axes {
    let mut xs = vec![line.energy_balance / 10.0, line.energy_balance * 10.0];
    xs.extend(line.time_balance);
    xs.extend(points.iter().map(|p| p.0));
    let finite = |v: &[f64]| v.iter().copied().filter(|x| x.is_finite() && *x > 0.0).collect::<Vec<_>>();
    let lo_hi = |v: &[f64]| {
        let lo = decade_floor(v.iter().copied().fold(f64::INFINITY, f64::min));
        let hi = decade_ceil(v.iter().copied().fold(0.0, f64::max) * 1.01);
        (lo, hi.max(lo * 100.0))
    };
    let x = lo_hi(&finite(&xs));
    // The roofline whole from the left edge up to the flop-only ceiling.
    let mut ys = vec![1e3 / line.pj_per_flop, line.attainable_gflop_per_joule(x.0)];
    ys.extend(points.iter().map(|p| p.1));
    Axes { x, y: lo_hi(&finite(&ys)) }
}

/// The energy roofline of each energy-roof set of `report` that has at least one point
/// placed on it, as SVG documents (none where the report carries no energy roofs or no point
/// has energy, flops and DRAM bytes).
pub fn svgs(report: &Report, title: &str) -> Vec<String> {
    rooflines(report)
        .into_iter()
        .filter_map(|(line, points)| {
            let placed: Vec<(&Point, crate::model::energy::EnergyPlace)> =
                points.into_iter().filter_map(|p| place(p, &line).map(|at| (p, at))).collect();
            (!placed.is_empty()).then(|| draw(&line, &placed, title))
        })
        .collect()
}

/// The SVG view: the time roofline ([`super::plot::svg`]), and below it the energy roofline
/// of each report that carries energy roofs and points with energy.
pub struct SvgExporter;

impl super::Exporter for SvgExporter {
    fn export(&self, view: &super::View) -> crate::error::Result<Vec<u8>> {
        let main = super::plot::svg(view)?;
        let energy = view_svgs(view);
        if energy.is_empty() {
            return Ok(main.into_bytes());
        }
        let parts: Vec<String> = std::iter::once(main).chain(energy).collect();
        Ok(stack(&parts).into_bytes())
    }
}

/// The view's energy rooflines (each report's, named when there are several).
pub fn view_svgs(view: &super::View) -> Vec<String> {
    let several = view.reports.len() > 1;
    view.reports
        .iter()
        .flat_map(|r| svgs(&r.report, &if several { format!("{}: ", r.name) } else { String::new() }))
        .collect()
}

/// SVG documents stacked into one, top to bottom (the time roofline, then the energy
/// rooflines): each kept whole as a nested `<svg>` at its offset.
pub fn stack(parts: &[String]) -> String {
    let size = |svg: &str| -> (f64, f64) {
        let head = svg
            .find("<svg")
            .map_or("", |i| &svg[i..svg[i..].find('>').map_or(svg.len(), |e| i + e)]);
        let get = |name: &str| {
            let key = format!(" {name}=\"");
            head.find(&key)
                .and_then(|i| head[i + key.len()..].split('"').next()?.trim_end_matches("px").parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        (get("width"), get("height"))
    };
    let sizes: Vec<(f64, f64)> = parts.iter().map(|p| size(p)).collect();
    let w = sizes.iter().map(|s| s.0).fold(0.0, f64::max);
    let h: f64 = sizes.iter().map(|s| s.1).sum();
    let mut o = format!("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\">\n");
    let mut y = 0.0;
    for (p, s) in parts.iter().zip(&sizes) {
        let body = p.find("<svg").map_or(p.as_str(), |i| &p[i..]);
        let _ = writeln!(o, "<svg y=\"{y}\"{}", &body[4..]);
        y += s.1;
    }
    o.push_str("</svg>\n");
    o
}

fn draw(line: &EnergyRoofline, placed: &[(&Point, crate::model::energy::EnergyPlace)], title: &str) -> String {
    let ax = axes(line, &placed.iter().map(|(_, a)| (a.ai, a.gflop_per_joule)).collect::<Vec<_>>());
    let (w, h) = SIZE;
    let mut o = String::new();
    let _ = writeln!(
        o,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{w}\" height=\"{h}\" viewBox=\"0 0 {w} {h}\" font-family=\"{}\" font-size=\"12\" class=\"energy-roofline\">",
        super::plot::FONT_FAMILY
    );
    let _ = writeln!(o, "<rect width=\"{w}\" height=\"{h}\" fill=\"white\"/>");
    let heading = format!(
        "{title}energy roofline ({}): {} pJ/flop ({}), {} pJ/byte DRAM, constant {} W",
        line.domain,
        sig3(line.pj_per_flop),
        line.flop_key,
        sig3(line.pj_per_byte),
        sig3(line.constant_watts)
    );
    let _ = writeln!(o, "<text x=\"{}\" y=\"22\" font-size=\"13\">{}</text>", MARGIN.0, esc(&heading));
    grid(&mut o, &ax);
    // The roofline and its asymptotes.
    let n = 96;
    let pts: Vec<String> = (0..=n)
        .map(|i| {
            let ai = 10f64.powf(ax.x.0.log10() + (ax.x.1.log10() - ax.x.0.log10()) * i as f64 / n as f64);
            let (x, y) = ax.px(ai, line.attainable_gflop_per_joule(ai));
            format!("{x:.2},{y:.2}")
        })
        .collect();
    let _ = writeln!(
        o,
        "<polyline class=\"roof\" points=\"{}\" fill=\"none\" stroke=\"#1f4e79\" stroke-width=\"2.5\"/>",
        pts.join(" ")
    );
    let top = 1e3 / line.pj_per_flop;
    let (x0, yf) = ax.px(ax.x.0, top);
    let (x1, _) = ax.px(ax.x.1, top);
    let _ = writeln!(
        o,
        "<line class=\"flops-only\" x1=\"{x0:.2}\" y1=\"{yf:.2}\" x2=\"{x1:.2}\" y2=\"{yf:.2}\" stroke=\"#1f4e79\" stroke-dasharray=\"3 4\"/>"
    );
    let bytes_only = |ai: f64| ai * 1e3 / line.pj_per_byte;
    let (bx0, by0) = ax.px(ax.x.0, bytes_only(ax.x.0));
    // Up to ten times the balance point, or where it leaves the chart at the top.
    let end = (line.energy_balance * 10.0).min(ax.y.1 * line.pj_per_byte / 1e3);
    let (bx1, by1) = ax.px(end, bytes_only(end));
    let _ = writeln!(
        o,
        "<line class=\"bytes-only\" x1=\"{bx0:.2}\" y1=\"{by0:.2}\" x2=\"{bx1:.2}\" y2=\"{by1:.2}\" stroke=\"#1f4e79\" stroke-dasharray=\"3 4\"/>"
    );
    balance(&mut o, &ax, "energy-balance", line.energy_balance, "#b03a2e", "energy balance");
    if let Some(t) = line.time_balance {
        balance(&mut o, &ax, "time-balance", t, "#7d6608", "time balance");
    }
    for (i, (p, at)) in placed.iter().enumerate() {
        let (x, y) = ax.px(at.ai, at.gflop_per_joule);
        let c = super::plot::PALETTE[i % super::plot::PALETTE.len()];
        let _ = writeln!(
            o,
            "<circle class=\"point\" cx=\"{x:.2}\" cy=\"{y:.2}\" r=\"5\" fill=\"rgb({},{},{})\" data-name=\"{}\" data-ai=\"{:e}\" data-gflop-per-joule=\"{:e}\" data-fraction=\"{:e}\" data-bound=\"{}\"><title>{}</title></circle>",
            c.0,
            c.1,
            c.2,
            esc(&p.name),
            at.ai,
            at.gflop_per_joule,
            at.fraction,
            at.bound,
            esc(&format!(
                "{}: {} GFLOP/J at {} flop/byte, {:.0}% of the energy roofline, energy bound: {}",
                p.name,
                sig3(at.gflop_per_joule),
                sig3(at.ai),
                100.0 * at.fraction,
                at.bound
            ))
        );
        let _ = writeln!(
            o,
            "<text x=\"{:.2}\" y=\"{:.2}\" font-size=\"11\">{}</text>",
            x + 8.0,
            y - 6.0,
            esc(&p.name)
        );
    }
    o.push_str("</svg>\n");
    o
}

/// The plot frame, a line per decade on each axis, and the axis titles.
fn grid(o: &mut String, ax: &Axes) {
    let (w, h) = SIZE;
    let (l, r, t, b) = (MARGIN.0, w - MARGIN.1, MARGIN.2, h - MARGIN.3);
    let _ = writeln!(
        o,
        "<rect x=\"{l}\" y=\"{t}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#888\"/>",
        r - l,
        b - t
    );
    let mut d = ax.x.0;
    while d <= ax.x.1 * 1.0001 {
        let (x, _) = ax.px(d, ax.y.0);
        let _ = writeln!(
            o,
            "<line x1=\"{x:.2}\" y1=\"{t}\" x2=\"{x:.2}\" y2=\"{b}\" stroke=\"#eee\"/><text x=\"{x:.2}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            b + 16.0,
            sig3(d)
        );
        d *= 10.0;
    }
    let mut d = ax.y.0;
    while d <= ax.y.1 * 1.0001 {
        let (_, y) = ax.px(ax.x.0, d);
        let _ = writeln!(
            o,
            "<line x1=\"{l}\" y1=\"{y:.2}\" x2=\"{r}\" y2=\"{y:.2}\" stroke=\"#eee\"/><text x=\"{}\" y=\"{:.2}\" text-anchor=\"end\">{}</text>",
            l - 6.0,
            y + 4.0,
            sig3(d)
        );
        d *= 10.0;
    }
    let _ = writeln!(
        o,
        "<text x=\"{:.2}\" y=\"{}\" text-anchor=\"middle\">arithmetic intensity (flop per DRAM byte)</text>",
        (l + r) / 2.0,
        h - 14.0
    );
    let _ = writeln!(
        o,
        "<text transform=\"translate(18 {:.2}) rotate(-90)\" text-anchor=\"middle\">GFLOP per joule</text>",
        (t + b) / 2.0
    );
}

/// A vertical line at intensity `ai` with its name.
fn balance(o: &mut String, ax: &Axes, class: &str, ai: f64, color: &str, name: &str) {
    if !(ai > ax.x.0 && ai < ax.x.1) {
        return;
    }
    let (x, _) = ax.px(ai, ax.y.0);
    let (t, b) = (MARGIN.2, SIZE.1 - MARGIN.3);
    let _ = writeln!(
        o,
        "<line class=\"{class}\" x1=\"{x:.2}\" y1=\"{t}\" x2=\"{x:.2}\" y2=\"{b}\" stroke=\"{color}\" stroke-dasharray=\"6 4\" data-ai=\"{ai:e}\"/><text x=\"{:.2}\" y=\"{:.2}\" fill=\"{color}\" font-size=\"11\">{name} {}</text>",
        x + 4.0,
        t + 14.0,
        sig3(ai)
    );
}

#[cfg(test)]
#[path = "energy_chart_tests.rs"]
mod tests;
