//! The energy roofline drawn from recorded reports: each point where its joules put it.

use super::*;
use crate::schema::energy::{DomainEnergy, EnergyRoofs, PointEnergy};

/// The number in attribute `name` of an SVG element's text.
fn attr(element: &str, name: &str) -> f64 {
    let key = format!(" {name}=\"");
    let i = element.find(&key).unwrap_or_else(|| panic!("no {name} in {element}")) + key.len();
    let end = element[i..].find('"').unwrap() + i;
    element[i..end].parse().unwrap()
}

/// The element of class `class` (and, for points, of `data-name` `name`).
fn element<'a>(svg: &'a str, class: &str, name: Option<&str>) -> &'a str {
    svg.lines()
        .find(|l| l.contains(&format!("class=\"{class}\"")) && name.is_none_or(|n| l.contains(&format!("data-name=\"{n}\""))))
        .unwrap_or_else(|| panic!("no {class} {name:?} in\n{svg}"))
}

/// Pixels per decade of GFLOP/J: the distance between two neighbouring horizontal grid lines.
fn pixels_per_decade(svg: &str) -> f64 {
    let ys: Vec<f64> = svg
        .lines()
        .filter(|l| l.starts_with("<line x1=\"78\"") && l.contains("stroke=\"#eee\""))
        .map(|l| attr(l, "y1"))
        .collect();
    assert!(ys.len() >= 3, "{svg}");
    (ys[0] - ys[1]).abs()
}

/// How far a height read back can be from one computed from the drawing's own lines:
/// coordinates are written to 0.005 px, the point's and the ceiling's, and each decade's
/// pixels come from two grid lines (0.01 px) over `decades` decades.
fn rounding(decades: f64) -> f64 {
    0.01 + 0.01 * decades.abs() + 1e-9
}

/// A point's energy of `joules` per run in domain `domain`, its GFLOP/J from them.
fn energy(domain: &str, joules: f64, flops: f64) -> PointEnergy {
    let mut e = PointEnergy {
        total_domain: domain.into(),
        total_joules: joules,
        gflop_per_joule: Some(flops / 1e9 / joules),
        source: "recorded".into(),
        ..Default::default()
    };
    e.domains.insert(
        domain.into(),
        DomainEnergy {
            joules,
            joules_samples: vec![joules],
            watts: 0.0,
            spread: None,
        },
    );
    e
}

/// The recorded CPU report (tests/fixtures/reports/several.json) with energy roofs and the
/// given joules on its triad and dgemm points.
fn cpu_report(triad_joules: f64, dgemm_joules: f64) -> Report {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/reports/several.json")).unwrap();
    let mut report = Report::from_json(&text, "several.json").unwrap();
    let mut r = EnergyRoofs {
        domain: "pkg".into(),
        constant_watts: 40.0,
        threads: report.ceilings.as_ref().and_then(|c| c.threads),
        ..Default::default()
    };
    r.pj_per_flop.insert("double.avx512".into(), 20.0);
    r.pj_per_byte.insert("dram".into(), 200.0);
    report.energy_roofs.push(r);
    for p in &mut report.points {
        let j = match p.name.as_str() {
            "triad" => triad_joules,
            "dgemm" => dgemm_joules,
            _ => continue,
        };
        p.extra.energy = Some(energy("pkg", j, p.flops.total));
    }
    report
}

#[test]
fn each_point_stands_where_its_joules_put_it() {
    let report = cpu_report(0.8, 0.05);
    let svgs = svgs(&report, "");
    assert_eq!(svgs.len(), 1);
    let svg = &svgs[0];
    let ppd = pixels_per_decade(svg);
    // The flop-only ceiling is 1000 / 20 pJ = 50 GFLOP/J; a point's height below it is the
    // decades between 50 and its flops / joules.
    let ceiling_y = attr(element(svg, "flops-only", None), "y1");
    for (name, joules) in [("triad", 0.8), ("dgemm", 0.05)] {
        let p = report.points.iter().find(|p| p.name == name).unwrap();
        let gflop_per_joule = p.flops.total / 1e9 / joules;
        let c = element(svg, "point", Some(name));
        let decades = 50f64.log10() - gflop_per_joule.log10();
        let want = ceiling_y + decades * ppd;
        assert!(
            (attr(c, "cy") - want).abs() <= rounding(decades),
            "{name}: cy {} want {want}\n{c}",
            attr(c, "cy")
        );
        assert!((attr(c, "data-ai") - p.flops.total / p.bytes["dram"]).abs() < 1e-9 * attr(c, "data-ai"));
    }
    // Intensity: dgemm (2^28 flops over 6 MiB) lies log10(42.67 / 0.0625) decades right of
    // triad, at the same pixels per decade as GFLOP/J (square decades are not assumed: read
    // from the vertical grid instead).
    let tx = attr(element(svg, "point", Some("triad")), "cx");
    let dx = attr(element(svg, "point", Some("dgemm")), "cx");
    let xs: Vec<f64> = svg
        .lines()
        .filter(|l| l.starts_with("<line x1=") && l.contains("y1=\"40\"") && l.contains("stroke=\"#eee\""))
        .map(|l| attr(l, "x1"))
        .collect();
    let xppd = xs[1] - xs[0];
    let decades = ((268435456.0 / 6291456.0) / (33554432.0f64 / 536870912.0)).log10();
    assert!((dx - tx - decades * xppd).abs() < 0.05, "{tx} {dx} {xppd}");
    // The energy balance point: 200 / 20 = 10 flop per byte.
    assert_eq!(attr(element(svg, "energy-balance", None), "data-ai"), 10.0);
    // More joules for the same work: lower on the chart.
    let more = svgs_of(&cpu_report(1.6, 0.05));
    let c2 = attr(element(&more, "point", Some("triad")), "cy");
    assert!((c2 - attr(element(svg, "point", Some("triad")), "cy") - 2f64.log10() * ppd).abs() <= rounding(2f64.log10()));
}

fn svgs_of(r: &Report) -> String {
    svgs(r, "").remove(0)
}

#[test]
fn no_chart_without_energy_roofs_or_placed_points() {
    let mut r = cpu_report(0.8, 0.05);
    for p in &mut r.points {
        p.extra.energy = None;
    }
    assert!(svgs(&r, "").is_empty());
    let mut r = cpu_report(0.8, 0.05);
    r.energy_roofs.clear();
    assert!(svgs(&r, "").is_empty());
}

#[test]
fn the_recorded_gpu_report_draws_its_points_on_the_board_s_roofline() {
    let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/reports/gpu_energy_h200.json")).unwrap();
    let report = Report::from_json(&text, "gpu_energy_h200.json").unwrap();
    let svg = svgs_of(&report);
    assert!(svg.contains("energy roofline (gpu0)"), "{svg}");
    // The time balance of FP64 work: the DMMA roof (64.4 TFLOP/s) over HBM (4.21 TB/s), not
    // the highest tensor roof of another precision.
    let c = report.ceilings.as_ref().unwrap();
    let want = c.compute_gflops["tensor_fp64.gpu.fma"] / c.bandwidth_gbs["dram"];
    assert_eq!(attr(element(&svg, "time-balance", None), "data-ai"), want);
    let ppd = pixels_per_decade(&svg);
    let line = crate::model::energy::rooflines(&report).remove(0).0;
    let ceiling_y = attr(element(&svg, "flops-only", None), "y1");
    for p in report.points.iter().filter(|p| p.extra.energy.is_some()) {
        let e = p.extra.energy.as_ref().unwrap();
        let joules = e.domains["gpu0"].joules;
        let gflop_per_joule = p.flops.total / 1e9 / joules;
        let c = element(&svg, "point", Some(&p.name));
        let decades = (1e3 / line.pj_per_flop).log10() - gflop_per_joule.log10();
        let want = ceiling_y + decades * ppd;
        assert!(
            (attr(c, "cy") - want).abs() <= rounding(decades),
            "{}: cy {} want {want}",
            p.name,
            attr(c, "cy")
        );
    }
}
