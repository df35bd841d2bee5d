//! The energy roofline (Choi, Bedard, Fowler and Vuduc, IPDPS 2013): E = W·ε_flop + Q·ε_byte +
//! π₀·T. Against arithmetic intensity I = W / Q the best GFLOP per joule the flops and bytes
//! allow is 1 / (ε_flop + ε_byte / I); the energy balance point ε_byte / ε_flop is where the
//! bytes cost as much as the flops, beside the time balance point peak / bandwidth. Per point:
//! which term of E is largest (its energy bound) and how far its GFLOP/J is from the roofline.

use crate::schema::Point;
use crate::schema::energy::EnergyRoofs;

/// The roofs one energy roofline is drawn with.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyRoofline {
    /// Thread count of the roofs.
    pub threads: Option<u32>,
    /// The energy domain the roofs are of (`psys`, `pkg+ram`, `gpu0`).
    pub domain: String,
    /// pJ per flop: the lowest double-precision figure (the most efficient ISA).
    pub pj_per_flop: f64,
    /// Which `precision.isa` gave it.
    pub flop_key: String,
    /// pJ per DRAM byte.
    pub pj_per_byte: f64,
    /// The constant power π₀, watts.
    pub constant_watts: f64,
    /// Energy balance point, flop per byte: ε_byte / ε_flop.
    pub energy_balance: f64,
    /// Time balance point, flop per byte: the peak GFLOP/s of the pJ/flop figure's precision
    /// over DRAM GB/s (where the report has time roofs).
    pub time_balance: Option<f64>,
}

impl EnergyRoofline {
    /// From energy roofs with a positive double-precision pJ/flop and DRAM pJ/byte; the time
    /// balance from `peak_gflops` and `dram_gbs` where both are known.
    pub fn new(r: &EnergyRoofs, peak_gflops: Option<f64>, dram_gbs: Option<f64>) -> Option<EnergyRoofline> {
        let (flop_key, eps_f) = r
            .pj_per_flop
            .iter()
            .filter(|(k, v)| k.starts_with("double.") && **v > 0.0)
            .min_by(|a, b| a.1.total_cmp(b.1))?;
        let eps_b = r.pj_per_byte.get("dram").copied().filter(|v| *v > 0.0)?;
        Some(EnergyRoofline {
            threads: r.threads,
            domain: r.domain.clone(),
            pj_per_flop: *eps_f,
            flop_key: flop_key.clone(),
            pj_per_byte: eps_b,
            constant_watts: r.constant_watts,
            energy_balance: eps_b / eps_f,
            time_balance: match (peak_gflops, dram_gbs) {
                (Some(p), Some(b)) if p > 0.0 && b > 0.0 => Some(p / b),
                _ => None,
            },
        })
    }

    /// The best GFLOP per joule at intensity `ai` (flop per DRAM byte), the constant power
    /// left out.
    pub fn attainable_gflop_per_joule(&self, ai: f64) -> f64 {
        1e3 / (self.pj_per_flop + self.pj_per_byte / ai.max(f64::MIN_POSITIVE))
    }
}

/// Whether the compute roof `key` (`double.avx512.fma`, `tensor_fp64.gpu.fma`) is of
/// `precision` (`double`, `bf16`, …): a GPU's tensor roofs are named by their input type.
fn of_precision(key: &str, precision: &str) -> bool {
    let head = key.split('.').next().unwrap_or("");
    let tensor = match precision {
        "double" => "tensor_fp64",
        "half" => "tensor_fp16",
        "bf16" => "tensor_bf16",
        _ => "",
    };
    head == precision || (!tensor.is_empty() && head == tensor)
}

/// The energy roofline of each set of energy roofs a report carries, with its time balance
/// from the report's time roofs of the same thread count (the highest compute roof of the
/// pJ/flop figure's precision over DRAM: the H200's FP64 DMMA roof, not its int8 tensor one),
/// and the points of that thread count: what every view draws.
pub fn rooflines(report: &crate::schema::Report) -> Vec<(EnergyRoofline, Vec<&Point>)> {
    report
        .energy_roofs
        .iter()
        .filter_map(|r| {
            let time = std::iter::once(&report.ceilings)
                .flatten()
                .chain(&report.ceilings_by_threads)
                .find(|c| c.threads == r.threads || (c.threads.is_none() && report.ceilings_by_threads.is_empty()));
            let dram = time.and_then(|c| c.bandwidth_gbs.get("dram").copied());
            let precision = EnergyRoofline::new(r, None, None)?
                .flop_key
                .split('.')
                .next()
                .unwrap_or("")
                .to_string();
            let peak = time.and_then(|c| {
                c.compute_gflops
                    .iter()
                    .filter(|(k, _)| of_precision(k, &precision))
                    .map(|(_, v)| *v)
                    .reduce(f64::max)
            });
            let line = EnergyRoofline::new(r, peak, dram)?;
            let points = report.points.iter().filter(|p| r.threads.is_none_or(|t| t == p.threads)).collect();
            Some((line, points))
        })
        .collect()
}

/// Where a point sits on the first of its report's energy rooflines whose thread count it
/// has; None without one.
pub fn place_in(report: &crate::schema::Report, p: &Point) -> Option<(EnergyRoofline, EnergyPlace)> {
    rooflines(report)
        .into_iter()
        .filter(|(_, pts)| pts.iter().any(|q| std::ptr::eq(*q, p)))
        .find_map(|(line, _)| place(p, &line).map(|at| (line, at)))
}

/// A point on the energy roofline.
#[derive(Debug, Clone, PartialEq)]
pub struct EnergyPlace {
    /// Flop per DRAM byte.
    pub ai: f64,
    /// Measured GFLOP per joule.
    pub gflop_per_joule: f64,
    /// The roofline's GFLOP per joule at `ai`.
    pub attainable: f64,
    /// Measured over attainable (1: on the roofline).
    pub fraction: f64,
    /// The largest term of the modelled energy: `flops`, `dram` or `constant`.
    pub bound: &'static str,
    /// The three terms, joules per run: flops, DRAM bytes, constant power × T.
    pub terms: [f64; 3],
}

/// Where `p` sits on `roofline`: None without its energy, flops or DRAM bytes.
pub fn place(p: &Point, roofline: &EnergyRoofline) -> Option<EnergyPlace> {
    let e = p.extra.energy.as_ref()?;
    let gflop_per_joule = e.gflop_per_joule?;
    let q = p.bytes.get("dram").copied().filter(|q| *q > 0.0)?;
    let w = p.flops.total;
    let ai = w / q;
    let attainable = roofline.attainable_gflop_per_joule(ai);
    let terms = [
        w * roofline.pj_per_flop * 1e-12,
        q * roofline.pj_per_byte * 1e-12,
        roofline.constant_watts * p.seconds,
    ];
    let names = ["flops", "dram", "constant"];
    let top = (0..3).max_by(|&a, &b| terms[a].total_cmp(&terms[b])).unwrap_or(0);
    Some(EnergyPlace {
        ai,
        gflop_per_joule,
        attainable,
        fraction: gflop_per_joule / attainable,
        bound: names[top],
        terms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::energy::PointEnergy;

    fn roofs() -> EnergyRoofs {
        let mut r = EnergyRoofs {
            domain: "pkg".into(),
            constant_watts: 50.0,
            threads: Some(4),
            ..Default::default()
        };
        r.pj_per_flop.insert("double.avx2".into(), 20.0);
        r.pj_per_flop.insert("double.avx512".into(), 10.0);
        r.pj_per_flop.insert("bf16.amx".into(), 1.0);
        r.pj_per_byte.insert("dram".into(), 100.0);
        r
    }

    #[test]
    fn balance_points_and_the_roofline() {
        let l = EnergyRoofline::new(&roofs(), Some(1000.0), Some(100.0)).unwrap();
        assert_eq!((l.flop_key.as_str(), l.pj_per_flop), ("double.avx512", 10.0));
        assert_eq!(l.energy_balance, 10.0);
        assert_eq!(l.time_balance, Some(10.0));
        // At the balance point flops and bytes cost the same: half the flop-only 100 GFLOP/J.
        assert!((l.attainable_gflop_per_joule(10.0) - 50.0).abs() < 1e-9);
        assert!((l.attainable_gflop_per_joule(1e9) - 100.0).abs() < 1e-4);
        let mut no_dram = roofs();
        no_dram.pj_per_byte.clear();
        assert_eq!(EnergyRoofline::new(&no_dram, None, None), None);
    }

    #[test]
    fn a_point_s_bound_and_distance() {
        let l = EnergyRoofline::new(&roofs(), None, None).unwrap();
        let mut b = crate::schema::Bytes::new();
        b.insert("dram".into(), 1e9);
        let mut p = Point::new(
            "triad",
            Default::default(),
            crate::schema::Flops {
                total: 1e8,
                ..Default::default()
            },
            b,
            1,
            vec![0.01],
        );
        assert_eq!(place(&p, &l), None);
        // 0.1 J of bytes, 0.001 J of flops, 0.5 J of constant power: 0.601 J modelled.
        p.extra.energy = Some(PointEnergy {
            gflop_per_joule: Some(0.1 / 1.2),
            ..Default::default()
        });
        let at = place(&p, &l).unwrap();
        assert!((at.ai - 0.1).abs() < 1e-12);
        assert_eq!(at.bound, "constant");
        assert!((at.attainable - 1e3 / 1010.0).abs() < 1e-9);
        assert!((at.fraction - (0.1 / 1.2) / (1e3 / 1010.0)).abs() < 1e-9);
        assert!((at.terms[1] - 0.1).abs() < 1e-12);
    }
}
