//! The machine's speed while each suite point of the main job ran: the double FMA peak loop,
//! run for a few milliseconds beside the point at its thread count, against the FMA roof the
//! point is read under.
//!
//! A shared guest's vCPUs run in phases: on the Emerald Rapids guest the suite's dgemm read
//! 73 GFLOP/s for seconds, then 42, on the same vCPU, and the FMA loop and L1 bandwidth moved
//! with it. A point measured in a slow phase against roofs measured in a fast one reads far
//! below its roof for a reason that is not the kernel's; the check says so on the point.

use crate::ceilings::compute::{measure_peak_here, precision_name};
use crate::ceilings::measure::Budget;
use crate::kernels::Precision;
use crate::kernels::peak::{PeakMode, PeakSpec};
use crate::model::RoofSet;
use crate::report::Point;

/// The key of a point's `extra` the check is kept under.
pub const KEY: &str = "machine_check";

/// Below this fraction of its roof, the loop beside a point says the machine was slower.
pub const SLOW: f64 = 0.85;
/// Above this fraction, it says the machine was faster than when the roofs were measured.
pub const FAST: f64 = 1.15;

/// The loop the check runs: the widest double FMA loop this CPU has.
pub fn probe_spec() -> Option<PeakSpec> {
    PeakSpec::all()
        .into_iter()
        .filter(|s| s.supported() && s.mode == PeakMode::Fma && s.precision == Precision::F64)
        .max_by_key(|s| s.isa)
}

/// Run the loop at `threads` for the quick budget (about 30 ms, with its clock probe) and keep
/// its GFLOP/s on the point, with the key of the roof it is to be read against.
pub fn record(point: &mut Point, spec: PeakSpec, threads: usize) {
    // Read as the roof is: a team's rate is the sum of its threads' (a slow vCPU in the team
    // is the team note's to name, not a slower machine).
    let gflops = measure_peak_here(spec, threads, Budget::quick()).gflops;
    if gflops.is_finite() && gflops > 0.0 {
        let roof = format!("{}.{}.fma", precision_name(spec.precision), spec.isa.name());
        point.extra.insert(KEY, serde_json::json!({ "roof": roof, "gflops": gflops }));
    }
}

/// Read every recorded check against `roofs` (the final ones of the points' thread count):
/// the fraction is added to the check, and a point outside [`SLOW`, `FAST`] gets a note. The
/// names of the points that got one are returned.
pub fn judge(points: &mut [Point], roofs: &RoofSet) -> Vec<String> {
    let mut noted = Vec::new();
    for p in points.iter_mut() {
        let Some(check) = p.extra.other.get_mut(KEY) else { continue };
        let (Some(key), Some(gflops)) = (check["roof"].as_str().map(str::to_string), check["gflops"].as_f64()) else {
            continue;
        };
        let Some(roof) = roofs.compute.iter().find(|r| r.empirical && r.key() == key) else {
            continue;
        };
        if roof.gflops.is_nan() || roof.gflops <= 0.0 {
            continue;
        }
        let fraction = gflops / roof.gflops;
        check["roof_gflops"] = roof.gflops.into();
        check["fraction"] = fraction.into();
        let isa = key.split('.').nth(1).unwrap_or("the").to_uppercase().replace("AVX512", "AVX-512");
        let loop_read = format!(
            "the {isa} FMA loop run beside it read {gflops:.3} GFLOP/s, {:.0} % of the roof's {:.3}",
            100.0 * fraction,
            roof.gflops
        );
        let note = if fraction < SLOW {
            format!(
                "the machine was slower while this point ran than when its roofs were measured: {loop_read} (a neighbour on the core or a lower clock then); its roof % reads low by about as much"
            )
        } else if fraction > FAST {
            format!(
                "the machine was faster while this point ran than when its roofs were measured: {loop_read}; the point may read above its roof by about as much"
            )
        } else {
            continue;
        };
        p.provenance.notes.push(note);
        noted.push(p.name.clone());
    }
    noted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::rng::Rng;
    use crate::model::ComputeRoof;

    fn roofs(gflops: f64) -> RoofSet {
        RoofSet {
            compute: vec![ComputeRoof {
                precision: "double".into(),
                isa: "avx512".into(),
                fma: true,
                mix: false,
                gflops,
                empirical: true,
                spread: 0.02,
            }],
            bandwidth: Vec::new(),
            threads: Some(1),
            notes: Vec::new(),
        }
    }

    fn point(name: &str, check: Option<f64>) -> Point {
        let mut p = Point::new(name, Default::default(), Default::default(), Default::default(), 1, vec![1.0]);
        if let Some(g) = check {
            p.extra.insert(KEY, serde_json::json!({ "roof": "double.avx512.fma", "gflops": g }));
        }
        p
    }

    /// Random roofs and loop readings: the fraction kept is the reading over the roof, and a
    /// point is noted exactly when the fraction is outside [SLOW, FAST], slower or faster as it is.
    #[test]
    fn a_point_is_noted_when_the_loop_beside_it_left_the_band() {
        let mut rng = Rng::new(0x3a11);
        for _ in 0..200 {
            let roof = rng.range(10.0, 210.0);
            let fraction = rng.range(0.3, 1.5);
            let mut points = vec![point("a", Some(roof * fraction)), point("b", None)];
            let noted = judge(&mut points, &roofs(roof));
            let kept = points[0].extra.other[KEY]["fraction"].as_f64().unwrap();
            assert!((kept - fraction).abs() < 1e-9 * fraction.max(1.0), "{kept} vs {fraction}");
            let outside = !(SLOW..=FAST).contains(&fraction);
            assert_eq!(
                noted,
                if outside { vec!["a".to_string()] } else { Vec::new() },
                "fraction {fraction}"
            );
            assert_eq!(points[0].provenance.notes.len(), usize::from(outside));
            if outside {
                let n = &points[0].provenance.notes[0];
                assert!(n.contains(if fraction < SLOW { "slower" } else { "faster" }), "{n}");
                assert!(n.contains(&format!("{:.0} %", 100.0 * fraction)), "{n}");
            }
            assert!(points[1].provenance.notes.is_empty());
            assert!(!points[1].extra.other.contains_key(KEY));
        }
    }

    /// A check whose roof is not among the roofs (theoretical only, another ISA) says nothing.
    #[test]
    fn no_measured_roof_no_judgement() {
        let mut r = roofs(100.0);
        r.compute[0].empirical = false;
        let mut points = vec![point("a", Some(10.0))];
        assert!(judge(&mut points, &r).is_empty());
        assert!(points[0].provenance.notes.is_empty());
        let mut r = roofs(100.0);
        r.compute[0].isa = "avx2".into();
        assert!(judge(&mut points, &r).is_empty());
    }
}
