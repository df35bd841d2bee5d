//! The energy beside the time (`--energy`): joules per run and domain, the run's power, the
//! idle power, GFLOP/J and the spread, for every point that has `extra.energy`.

use super::{Columns, or_dash};
use crate::schema::Point;
use crate::schema::units::sig3;

/// One row per point and domain; empty when no point has energy. Then where the joules came
/// from, the idle power and the caveats, once per distinct line.
pub fn energy_table(points: &[Point]) -> String {
    let with: Vec<(&Point, &crate::schema::energy::PointEnergy)> =
        points.iter().filter_map(|p| p.extra.energy.as_ref().map(|e| (p, e))).collect();
    if with.is_empty() {
        return String::new();
    }
    let cols = Columns::new(" ").left(30).left(8).right(11).right(8).right(9).right(9).right(10);
    let mut s = String::from("\n");
    s += &(cols.line(["POINT", "DOMAIN", "J/RUN", "SPREAD", "W", "IDLE W", "GFLOP/J"]) + "\n");
    let mut notes: Vec<String> = Vec::new();
    for (p, e) in &with {
        for (name, d) in &e.domains {
            let gflop_j = (p.flops.total > 0.0 && d.joules > 0.0).then(|| p.flops.total / 1e9 / d.joules);
            s += &(cols.line([
                p.name.clone(),
                name.clone(),
                format!("{:.4e}", d.joules),
                d.spread.map_or("-".into(), |x| format!("{:.1}%", 100.0 * x)),
                sig3(d.watts),
                e.idle.get(name).map_or("-".into(), |i| sig3(i.watts)),
                or_dash(gflop_j, 3),
            ]) + "\n");
        }
        let mut head = format!(
            "energy: {}; idle power {}",
            e.source,
            if e.idle_subtracted { "subtracted" } else { "not subtracted" }
        );
        if let Some(g) = e.granularity_seconds {
            head += &format!("; counters update every {} ms", sig3(g * 1e3));
        }
        for n in std::iter::once(&head).chain(&e.notes) {
            if !notes.contains(n) {
                notes.push(n.clone());
            }
        }
    }
    for n in notes {
        s += &format!("  {n}\n");
    }
    s
}

/// The energy of the whole command (`gpu measure --energy`), where the points carry none:
/// what was measured, how the counter was read, the caveats; empty without it.
pub fn command_energy_lines(report: &crate::schema::Report) -> String {
    let Some(c) = &report.command_energy else {
        return String::new();
    };
    let mut s = format!("\nenergy: {}\n  {}\n", c.measured, c.energy.source);
    for n in &c.energy.notes {
        s += &format!("  {n}\n");
    }
    s
}

/// The energy roofs per thread count: pJ per flop by precision and ISA, pJ per byte by
/// level, the constant power, each with its spread; then the notes once.
pub fn energy_roofs_table(roofs: &[crate::schema::energy::EnergyRoofs]) -> String {
    if roofs.is_empty() {
        return String::new();
    }
    let cols = Columns::new(" ").left(8).left(22).right(12).right(8);
    let mut s = String::from("\n");
    s += &(cols.line(["THREADS", "ENERGY ROOF", "VALUE", "SPREAD"]) + "\n");
    let mut notes: Vec<&String> = Vec::new();
    for r in roofs {
        let t = r.threads.map_or("-".into(), |t| t.to_string());
        let spread = |k: &str| r.spread.get(k).map_or("-".into(), |x| format!("{:.1}%", 100.0 * x));
        for (k, v) in &r.pj_per_flop {
            s += &(cols.line([t.clone(), format!("{k} pJ/flop"), sig3(*v), spread(&format!("flop.{k}"))]) + "\n");
        }
        for (k, v) in &r.pj_per_byte {
            s += &(cols.line([t.clone(), format!("{k} pJ/byte"), sig3(*v), spread(&format!("byte.{k}"))]) + "\n");
        }
        s += &(cols.line([
            t.clone(),
            format!("constant W ({})", r.domain),
            sig3(r.constant_watts),
            spread("constant"),
        ]) + "\n");
        for n in &r.notes {
            if !notes.contains(&n) {
                notes.push(n);
            }
        }
    }
    for n in notes {
        s += &format!("  {n}\n");
    }
    s
}

/// The energy roofline of each thread count a report has energy roofs for: ε_flop, ε_byte,
/// π₀, the energy balance point beside the time balance point, then each point of that thread
/// count with its intensity, GFLOP/J against the roofline's, and its energy bound.
pub fn energy_roofline_table(report: &crate::schema::Report) -> String {
    use crate::model::energy::{place, rooflines};
    let mut s = String::new();
    for (line, points) in rooflines(report) {
        s += &format!(
            "\nenergy roofline ({} threads, {}): {} pJ/flop ({}), {} pJ/byte (DRAM), constant {} W; energy balance {} flop/byte, time balance {}\n",
            line.threads.map_or("-".into(), |t| t.to_string()),
            line.domain,
            sig3(line.pj_per_flop),
            line.flop_key,
            sig3(line.pj_per_byte),
            sig3(line.constant_watts),
            sig3(line.energy_balance),
            line.time_balance.map_or("unknown".into(), |b| format!("{} flop/byte", sig3(b)))
        );
        let cols = Columns::new(" ").left(30).right(9).right(10).right(12).right(8).right(9);
        s += &(cols.line(["POINT", "AI dram", "GFLOP/J", "ROOF GFLOP/J", "OF ROOF", "BOUND"]) + "\n");
        for p in points {
            if let Some(at) = place(p, &line) {
                s += &(cols.line([
                    p.name.clone(),
                    sig3(at.ai),
                    sig3(at.gflop_per_joule),
                    sig3(at.attainable),
                    format!("{:.0}%", 100.0 * at.fraction),
                    at.bound.to_string(),
                ]) + "\n");
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::energy::{DomainEnergy, IdlePower, PointEnergy};

    #[test]
    fn a_row_per_domain_and_the_source_once() {
        let mut p = super::super::tests::point("triad", 2e6, &[("core", 24e6)], vec![1e-3, 1.1e-3]);
        let mut e = PointEnergy {
            source: "perf power PMU (type 23, CPU 0): psys".into(),
            granularity_seconds: Some(1e-3),
            ..Default::default()
        };
        e.domains.insert(
            "psys".into(),
            DomainEnergy {
                joules: 0.5,
                joules_samples: vec![0.5, 0.6],
                watts: 200.0,
                spread: Some(0.1),
            },
        );
        e.idle.insert(
            "psys".into(),
            IdlePower {
                watts: 150.0,
                spread: None,
                seconds: 1.0,
            },
        );
        p.extra.energy = Some(e);
        let q = p.clone();
        let t = energy_table(&[p, q]);
        let row = t.lines().find(|l| l.starts_with("triad")).unwrap();
        assert!(row.contains("psys") && row.contains("5.0000e-1") && row.contains("10.0%"), "{t}");
        // 2e6 flops over 0.5 J: 0.004 GFLOP/J.
        assert!(row.trim_end().ends_with("0.004") && row.contains("150"), "{t}");
        assert_eq!(t.matches("perf power PMU").count(), 1, "{t}");
        assert!(t.contains("not subtracted") && t.contains("every 1.00 ms"), "{t}");
        assert_eq!(energy_table(&[super::super::tests::point("x", 1.0, &[], vec![1.0])]), "");
    }

    #[test]
    #[cfg(feature = "analysis")]
    fn the_energy_roofline_of_a_recorded_report() {
        let text = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/reports/several.json")).unwrap();
        let mut report = crate::schema::Report::from_json(&text, "several.json").unwrap();
        let threads = report.ceilings.as_ref().and_then(|c| c.threads);
        let mut r = crate::schema::energy::EnergyRoofs {
            domain: "pkg".into(),
            constant_watts: 40.0,
            threads,
            ..Default::default()
        };
        r.pj_per_flop.insert("double.avx512".into(), 20.0);
        r.pj_per_byte.insert("dram".into(), 200.0);
        report.energy_roofs.push(r);
        let p = report
            .points
            .iter_mut()
            .find(|p| p.bytes.get("dram").is_some_and(|q| *q > 0.0))
            .unwrap();
        p.threads = threads.unwrap_or(1);
        p.extra.energy = Some(PointEnergy {
            gflop_per_joule: Some(1.0),
            ..Default::default()
        });
        let name = p.name.clone();
        let t = energy_roofline_table(&report);
        assert!(t.contains("energy balance 10.0 flop/byte"), "{t}");
        let peak = report
            .ceilings
            .as_ref()
            .unwrap()
            .compute_gflops
            .values()
            .copied()
            .fold(0.0, f64::max);
        let balance = peak / report.ceilings.as_ref().unwrap().bandwidth_gbs["dram"];
        assert!(t.contains(&format!("time balance {} flop/byte", sig3(balance))), "{t}");
        assert!(t.lines().any(|l| l.starts_with(&name)), "{t}");
        report.energy_roofs[0].pj_per_byte.clear();
        assert_eq!(energy_roofline_table(&report), "");
    }

    #[test]
    fn energy_roofs_one_row_per_figure_with_spread() {
        let mut r = crate::schema::energy::EnergyRoofs {
            domain: "psys".into(),
            constant_watts: 180.0,
            threads: Some(16),
            notes: vec!["how".into()],
            ..Default::default()
        };
        r.pj_per_flop.insert("double.avx512".into(), 12.5);
        r.pj_per_byte.insert("dram".into(), 140.0);
        r.spread.insert("byte.dram".into(), 0.05);
        let t = energy_roofs_table(&[r.clone(), r]);
        let dram = t.lines().find(|l| l.contains("dram pJ/byte")).unwrap();
        assert!(dram.starts_with("16") && dram.contains("140") && dram.contains("5.0%"), "{t}");
        let flop = t.lines().find(|l| l.contains("double.avx512 pJ/flop")).unwrap();
        assert!(flop.contains("12.5") && flop.trim_end().ends_with('-'), "{t}");
        assert!(t.contains("constant W (psys)") && t.matches("how").count() == 1, "{t}");
        assert_eq!(energy_roofs_table(&[]), "");
    }
}
