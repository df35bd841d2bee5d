//! Plot layout: labels never overlap, every roof is labelled, one marker per point (per level
//! in the hierarchical view), arrows between same-named points of consecutive reports.

use std::path::Path;

use roofline::report::labels::any_overlap;
use roofline::report::plot::{COMPACT, plot_size, svg_sized};
use roofline::report::{PlotKind, Report, View, read_report};

fn fixture(name: &str) -> Report {
    read_report(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports").join(name)).unwrap()
}

fn check_layout(view: &View, size: (u32, u32)) {
    let (_, panels) = svg_sized(view, size).unwrap();
    for panel in &panels {
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
            p.seconds = roofline::report::schema::median(&p.seconds_samples).unwrap();
            r.points.push(p);
        }
        for kind in [PlotKind::Carm, PlotKind::Dram, PlotKind::Hierarchical] {
            let v = View::new(vec![("random".into(), r.clone())], None, kind);
            let (_, panels) = svg_sized(&v, plot_size(kind)).unwrap();
            let rects: Vec<_> = panels[0].labels.iter().map(|l| l.rect).collect();
            assert_eq!(any_overlap(&rects), None, "seed {seed}");
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
