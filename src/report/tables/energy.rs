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
}
