//! Energy roofs (Choi, Bedard, Fowler and Vuduc's energy roofline: E = W·ε_flop + Q·ε_byte +
//! π₀·T): picojoules per flop from the peak loops, per byte from a streaming load at each
//! memory level, the constant power π₀ from the idle window. Each figure is the power above
//! π₀ while the loop ran, over its rate; repeated, with the spread kept.

use std::collections::BTreeMap;

use crate::ceilings::{Options, bandwidth, compute, measure::Budget};
use crate::counters::energy::Energy;
use crate::error::{Error, Result};
use crate::schema::ceilings::Host;
use crate::schema::energy::{EnergyRoofs, total_of};

/// Picojoules per unit of work: the power above the constant power, over the work's rate.
/// None where the rate is not positive.
pub fn pj_per_unit(watts: f64, constant_watts: f64, units_per_second: f64) -> Option<f64> {
    (units_per_second > 0.0 && units_per_second.is_finite()).then(|| (watts - constant_watts) / units_per_second * 1e12)
}

/// Each loop runs this long per repetition: ten times a second's hundredth, so RAPL's ~1 ms
/// updates are a small part of the window.
fn budget(quick: bool) -> Budget {
    Budget {
        sample: std::time::Duration::from_millis(10),
        min_total: std::time::Duration::from_millis(if quick { 150 } else { 400 }),
        min_samples: 5,
    }
}

/// The whole's power (psys, else pkg+ram, else pkg) while `f` runs, and what `f` returned.
fn whole_watts<T>(energy: &Energy, f: impl FnOnce() -> T) -> Result<(f64, T)> {
    let w = energy.window()?;
    let out = f();
    energy.mark(&w)?;
    let watts = total_of(&energy.window_watts(&w)?).map(|(_, v)| v).unwrap_or(0.0);
    Ok((watts, out))
}

/// Energy roofs at each thread count of `opts`, each figure measured `repeats` times.
pub fn measure(energy: &Energy, host: &Host, opts: &Options, repeats: usize) -> Result<Vec<EnergyRoofs>> {
    let idle = energy.idle_watts()?;
    let idle_w: BTreeMap<String, f64> = idle.iter().map(|(k, v)| (k.clone(), v.watts)).collect();
    let (domain, constant) = total_of(&idle_w).ok_or_else(|| Error::unavailable("no energy domain", "see --energy"))?;
    let b = budget(opts.quick);
    let variant = bandwidth::widest_variant();
    let mut out = Vec::new();
    for &t in &opts.threads {
        let mut roofs = EnergyRoofs {
            domain: domain.clone(),
            constant_watts: constant,
            threads: Some(t as u32),
            ..Default::default()
        };
        if let Some(s) = idle.get(&domain).and_then(|i| i.spread) {
            roofs.spread.insert("constant".into(), s);
        }
        // The FMA loop of each precision × ISA.
        for spec in compute::specs(true)
            .into_iter()
            .filter(|s| s.mode == roofline_kernels::peak::PeakMode::Fma)
        {
            let mut xs = Vec::new();
            let mut key = String::new();
            for _ in 0..repeats.max(1) {
                let (watts, c) = whole_watts(energy, || compute::measure_peak_alone(spec, t, b))?;
                key = format!("{}.{}", c.precision, c.isa);
                xs.extend(pj_per_unit(watts, constant, c.gflops * 1e9));
            }
            roofs.keep_flop(&key, &xs);
        }
        for u in roofline_kernels::lowp::Unit::ALL.into_iter().filter(|u| u.available()) {
            let key = format!("{}.{}", u.precision(), u.isa());
            let mut xs = Vec::new();
            for _ in 0..repeats.max(1) {
                let (watts, r) = whole_watts(energy, || compute::measure_mixed_alone(u, t, b))?;
                if let Some((gops, _)) = r {
                    xs.extend(pj_per_unit(watts, constant, gops * 1e9));
                }
            }
            roofs.keep_flop(&key, &xs);
        }
        // A streaming load at each level's working set.
        let (sizes, _) = bandwidth::level_sizes(host, t);
        for (level, per_thread) in sizes {
            let mut xs = Vec::new();
            for r in 0..repeats.max(1) {
                let (watts, bw) = whole_watts(energy, || {
                    bandwidth::measure(
                        roofline_kernels::stream::Op::Load,
                        variant,
                        &level,
                        per_thread,
                        t,
                        b,
                        0x5eed + r as u64,
                    )
                })?;
                let bw = bw.map_err(|e| Error::unavailable(e, "try fewer threads"))?;
                xs.extend(pj_per_unit(watts, constant, bw.gbs * 1e9));
            }
            let key = level.to_lowercase();
            roofs.keep_byte(&key, &xs);
        }
        roofs.notes.push(format!(
            "{}; the constant power is the idle power of {domain} measured first; each figure is the power above it over the loop's rate (median of {} repetitions), flops or bytes alone: a streaming loop's own flops and a peak loop's register traffic are not taken apart",
            energy.description()?,
            repeats.max(1)
        ));
        out.push(roofs);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn picojoules_are_the_power_above_constant_over_the_rate() {
        // 250 W with 100 W constant at 1 TFLOP/s: 150 pJ per flop.
        assert!((pj_per_unit(250.0, 100.0, 1e12).unwrap() - 150.0).abs() < 1e-9);
        // 130 W with 100 W constant at 200 GB/s: 150 pJ per byte.
        assert!((pj_per_unit(130.0, 100.0, 200e9).unwrap() - 150.0).abs() < 1e-9);
        assert_eq!(pj_per_unit(1.0, 0.0, 0.0), None);
    }

    #[test]
    fn median_and_spread_are_kept_under_their_keys() {
        let mut r = EnergyRoofs::default();
        r.keep_flop("double.avx512", &[10.0, 12.0, 11.0]);
        assert_eq!(r.pj_per_flop["double.avx512"], 11.0);
        assert!((r.spread["flop.double.avx512"] - 1.0 / 11.0).abs() < 1e-12);
        assert_eq!(r.samples["flop.double.avx512"], [10.0, 12.0, 11.0]);
        r.keep_byte("dram", &[5.0]);
        assert_eq!(r.pj_per_byte["dram"], 5.0);
        assert!(!r.spread.contains_key("byte.dram"));
        assert_eq!(r.samples["byte.dram"], [5.0]);
        r.keep_byte("l1", &[]);
        assert!(!r.pj_per_byte.contains_key("l1") && !r.samples.contains_key("byte.l1"));
    }
}
