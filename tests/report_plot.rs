//! Plot layout: labels never overlap, every roof is labelled, each point label reads as its
//! own marker's (or has a leader line), roofs of different kinds have distinct colours, error
//! bars span the interquartile range, one marker per point (per level in the hierarchical
//! view), arrows between same-named points of consecutive reports; PNG glyphs share a
//! baseline and keep the font's spacing.

use std::path::Path;

use roofline::__private::plot::{COMPACT, MIN_COLOR_DISTANCE, Panel, color_distance, plot_size, svg_sized, text_pixels};
use roofline::__private::plot::{MARKER_NUDGE, any_overlap};
use roofline::{PlotKind, Report, View, read_report};

fn fixture(name: &str) -> Report {
    read_report(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports").join(name)).unwrap()
}

/// Each point label either has a leader line to its marker, or sits near its own marker
/// and nearer to one of its own markers than to any other point's marker.
fn check_label_ownership(panel: &Panel, context: &str) {
    for l in &panel.labels {
        let Some(owner) = l.owner else { continue };
        if let Some((a, b)) = l.leader {
            // the leader line ends on the label and starts at the owner's marker
            assert!(l.rect.dist(b) < 0.5, "{context}: leader of '{}' does not reach it", l.text);
            assert!(
                panel.markers.iter().any(|m| (m.report, m.point) == owner && {
                    let (x, y) = panel.map.px(m.x, m.y);
                    (x - a.0).hypot(y - a.1) < 8.0
                }),
                "{context}: leader of '{}' does not start at its marker",
                l.text
            );
            continue;
        }
        let own = panel
            .markers
            .iter()
            .filter(|m| (m.report, m.point) == owner)
            .map(|m| l.rect.dist(panel.map.px(m.x, m.y)))
            .fold(f64::INFINITY, f64::min);
        let other = panel
            .markers
            .iter()
            .filter(|m| (m.report, m.point) != owner)
            .map(|m| l.rect.dist(panel.map.px(m.x, m.y)))
            .fold(f64::INFINITY, f64::min);
        assert!(
            own < other,
            "{context} {:?}: label '{}' is {own:.1} px from its marker but {other:.1} px from another",
            panel.kind,
            l.text
        );
        assert!(
            own <= MARKER_NUDGE + 1e-9,
            "{context}: label '{}' nudged {own:.0} px away without a leader",
            l.text
        );
    }
}

/// Roofs of one kind share a colour; roofs of different kinds are clearly distinct.
fn check_roof_colors(panel: &Panel, context: &str) {
    for (i, a) in panel.roofs.iter().enumerate() {
        for b in &panel.roofs[i + 1..] {
            if a.key == b.key {
                assert_eq!(a.color, b.color, "{context}: {} and {} differ", a.label, b.label);
            } else {
                assert!(
                    color_distance(a.color, b.color) >= MIN_COLOR_DISTANCE,
                    "{context}: '{}' and '{}' look alike ({:?} {:?})",
                    a.label,
                    b.label,
                    a.color,
                    b.color
                );
            }
        }
    }
}

fn check_layout(view: &View, size: (u32, u32)) {
    let (_, panels) = svg_sized(view, size).unwrap();
    for panel in &panels {
        check_label_ownership(panel, "fixture");
        check_roof_colors(panel, "fixture");
        let rects: Vec<_> = panel.labels.iter().map(|l| l.rect).collect();
        assert_eq!(any_overlap(&rects), None, "{:?}: labels overlap", panel.kind);
        for r in &rects {
            assert!(r.inside(&panel.map.area), "{:?}: label outside the plot", panel.kind);
        }
        // every roof drawn carries its label
        for roof in &panel.roofs {
            assert!(
                panel.labels.iter().any(|l| l.text == roof.label),
                "{:?}: roof '{}' unlabelled",
                panel.kind,
                roof.label
            );
        }
    }
}

#[test]
fn fixtures_lay_out_without_overlap() {
    for kind in [PlotKind::Carm, PlotKind::Dram, PlotKind::Hierarchical, PlotKind::All] {
        let v = View::new(vec![("several".into(), fixture("several.json"))], None, kind);
        check_layout(&v, plot_size(kind));
        let ba = View::new(
            vec![("before".into(), fixture("before.json")), ("after".into(), fixture("after.json"))],
            None,
            kind,
        );
        check_layout(&ba, plot_size(kind));
        if kind != PlotKind::All {
            check_layout(&ba, COMPACT);
        }
    }
}

#[test]
fn markers_and_arrows() {
    let ba = View::new(
        vec![("before".into(), fixture("before.json")), ("after".into(), fixture("after.json"))],
        None,
        PlotKind::Carm,
    );
    let (_, panels) = svg_sized(&ba, plot_size(PlotKind::Carm)).unwrap();
    let p = &panels[0];
    assert_eq!(p.markers.len(), 4);
    // normalize and softmax exist in both: one arrow each, from before to after
    assert_eq!(p.arrows.len(), 2);
    for (from, to) in &p.arrows {
        let b = p
            .markers
            .iter()
            .find(|m| m.report == 0 && (m.x, m.y) == *from)
            .expect("arrow starts at a before marker");
        let a = p
            .markers
            .iter()
            .find(|m| m.report == 1 && (m.x, m.y) == *to)
            .expect("arrow ends at an after marker");
        assert_eq!(ba.reports[0].report.points[b.point].name, ba.reports[1].report.points[a.point].name);
    }
    // hierarchical: one marker per level with bytes, joined
    let h = View::new(vec![("several".into(), fixture("several.json"))], None, PlotKind::Hierarchical);
    let (_, panels) = svg_sized(&h, plot_size(PlotKind::Hierarchical)).unwrap();
    let expected: usize = h.reports[0]
        .analyses
        .iter()
        .filter(|a| a.skipped.is_none())
        .map(|a| a.ai.len())
        .sum();
    assert_eq!(panels[0].markers.len(), expected);
    assert!(panels[0].joins.iter().all(|(_, path)| path.len() >= 2));
    // error bars span the repetitions: lo ≤ median ≤ hi
    for m in &panels[0].markers {
        if let Some((lo, hi)) = m.err {
            assert!(lo <= m.y * (1.0 + 1e-12) && m.y <= hi * (1.0 + 1e-12), "{lo} {} {hi}", m.y);
        }
    }
}

/// xorshift64*, fresh seed per run (printed for reproduction).
struct Rng(u64);
impl Rng {
    fn f(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    }
}

#[test]
fn random_reports_lay_out_without_overlap() {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
        | 1;
    eprintln!("seed {seed}");
    let mut rng = Rng(seed);
    let base = fixture("several.json");
    let template = base.points[0].clone();
    for _ in 0..4 {
        let mut r = base.clone();
        r.points.clear();
        let n = 4 + (rng.f() * 14.0) as usize;
        for i in 0..n {
            let mut p = template.clone();
            p.name = format!("kernel_{i}_{}", "x".repeat((rng.f() * 10.0) as usize));
            let flops = 10f64.powf(6.0 + rng.f() * 4.0);
            p.flops.total = flops;
            p.flops.by_class.clear();
            p.flops.by_class.insert("packed512_double".into(), flops);
            let ai = 10f64.powf(-2.0 + rng.f() * 3.5);
            p.bytes.clear();
            p.bytes.insert("core".into(), flops / ai);
            p.bytes.insert("dram".into(), flops / ai / (1.0 + rng.f() * 50.0));
            let gflops = 10f64.powf(-0.5 + rng.f() * 2.5);
            let t = flops / gflops / 1e9;
            p.seconds_samples = (0..3).map(|_| t * (1.0 + 0.1 * rng.f())).collect();
            p.seconds = roofline::__private::median(&p.seconds_samples).unwrap();
            r.points.push(p);
        }
        for kind in [PlotKind::Carm, PlotKind::Dram, PlotKind::Hierarchical] {
            let v = View::new(vec![("random".into(), r.clone())], None, kind);
            let (_, panels) = svg_sized(&v, plot_size(kind)).unwrap();
            let rects: Vec<_> = panels[0].labels.iter().map(|l| l.rect).collect();
            assert_eq!(any_overlap(&rects), None, "seed {seed}");
            check_label_ownership(&panels[0], &format!("seed {seed}"));
            check_roof_colors(&panels[0], &format!("seed {seed}"));
            // roofs always labelled; nearly every point too
            for roof in &panels[0].roofs {
                assert!(panels[0].labels.iter().any(|l| l.text == roof.label), "seed {seed}: {}", roof.label);
            }
            assert!(
                panels[0].hidden.len() * 5 <= n,
                "seed {seed}: {} of {n} hidden",
                panels[0].hidden.len()
            );
        }
    }
}

/// The profile's roof set: L1 load and store roofs beside L1, L2, L3 and DRAM; AVX and AVX2
/// compute roofs (the audit found L1_LOAD/L1_STORE both grey and DRAM/AVX2 both navy).
fn profile_like() -> Report {
    let mut r = fixture("several.json");
    let c = r.ceilings.as_mut().unwrap();
    for (k, v) in [("l1_load", 206.7), ("l1_store", 103.3)] {
        c.bandwidth_gbs.insert(k.into(), v);
        c.bandwidth_traffic_gbs.insert(k.into(), v);
    }
    for (k, v) in [("double.avx.fma", 51.9), ("double.avx.nofma", 25.9)] {
        c.compute_gflops.insert(k.into(), v);
    }
    r
}

#[test]
fn roofs_of_different_kinds_have_distinct_colours() {
    for kind in [PlotKind::Carm, PlotKind::Hierarchical, PlotKind::All] {
        let v = View::new(vec![("profile".into(), profile_like())], None, kind);
        let (_, panels) = svg_sized(&v, plot_size(kind)).unwrap();
        for p in &panels {
            let keys: std::collections::BTreeSet<_> = p.roofs.iter().map(|r| r.key.as_str()).collect();
            for want in ["memory:l1_load", "memory:l1_store", "memory:dram", "compute:avx2", "compute:avx"] {
                assert!(
                    keys.contains(want) || p.kind == PlotKind::Dram,
                    "{:?}: no {want} roof in {keys:?}",
                    p.kind
                );
            }
            check_roof_colors(p, "profile-like");
            check_label_ownership(p, "profile-like");
        }
    }
}

#[test]
fn error_bars_span_the_interquartile_range() {
    let mut r = fixture("several.json");
    let p = &mut r.points[0];
    let t = p.seconds;
    // one repetition preempted (10x slower): the IQR ignores it, min-max would not
    p.seconds_samples = vec![t * 0.98, t, t, t * 1.02, t * 10.0];
    p.seconds = t;
    let name = p.name.clone();
    let v = View::new(vec![("x".into(), r)], None, PlotKind::Carm);
    let (_, panels) = svg_sized(&v, plot_size(PlotKind::Carm)).unwrap();
    let m = panels[0]
        .markers
        .iter()
        .find(|m| v.reports[0].report.points[m.point].name == name)
        .unwrap();
    let (lo, hi) = m.err.expect("error bar");
    // Q1 = t, Q3 = 1.02 t: the bar spans m.y/1.02 .. m.y
    assert!((lo - m.y / 1.02).abs() <= m.y * 1e-9, "lo {lo} vs {}", m.y / 1.02);
    assert!((hi - m.y).abs() <= m.y * 1e-9, "hi {hi} vs {}", m.y);
}

/// Ink columns (coverage > 0.4) of rendered text, as runs [first, last].
fn ink_runs(px: &[(i32, i32, f32)]) -> Vec<(i32, i32)> {
    let mut cols: Vec<i32> = px.iter().filter(|p| p.2 > 0.4).map(|p| p.0).collect();
    cols.sort_unstable();
    cols.dedup();
    let mut runs: Vec<(i32, i32)> = Vec::new();
    for c in cols {
        match runs.last_mut() {
            Some(r) if c == r.1 + 1 => r.1 = c,
            _ => runs.push((c, c)),
        }
    }
    runs
}

fn ink_bottom(px: &[(i32, i32, f32)], cols: (i32, i32)) -> i32 {
    px.iter()
        .filter(|p| p.2 > 0.4 && p.0 >= cols.0 && p.0 <= cols.1)
        .map(|p| p.1)
        .max()
        .unwrap()
}

#[test]
fn png_text_sits_on_one_baseline_with_even_spacing() {
    use plotters::style::text_anchor::{HPos, VPos};
    for size in [11.0, 13.0, 16.0, 26.0] {
        let px = text_pixels("0.0", size, HPos::Left, VPos::Top);
        let runs = ink_runs(&px);
        assert_eq!(runs.len(), 3, "size {size}: {runs:?}");
        // the point sits on the baseline with the digits (a digit's round bottom may
        // overshoot it by a pixel), not at mid-height
        let (d0, dot, d1) = (ink_bottom(&px, runs[0]), ink_bottom(&px, runs[1]), ink_bottom(&px, runs[2]));
        assert_eq!(d0, d1, "size {size}");
        assert!((d0 - dot).abs() <= 1, "size {size}: digit bottom {d0}, point bottom {dot}");
        // DejaVu Sans spaces '0.0' symmetrically: the gaps either side of the point match
        let (left, right) = (runs[1].0 - runs[0].1, runs[2].0 - runs[1].1);
        assert!((left - right).abs() <= 1, "size {size}: gaps {left} and {right}");
        // text laid out from the top of its box: ink within [0, size]
        assert!(px.iter().all(|p| p.1 >= 0 && f64::from(p.1) <= size), "size {size}");
    }
}
