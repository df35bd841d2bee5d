//! Compute ceilings: peak GFLOP/s per precision × ISA × instruction mix, the clock measured
//! at each ISA, flop/cycle, and the theoretical peak from the platform table.

use std::collections::BTreeMap;

use roofline_kernels::peak::{CLOCK_CYCLES_PER_ROUND, PeakIsa, PeakMode, PeakSpec};
use roofline_kernels::{Instance, Precision};
use serde::{Deserialize, Serialize};

use super::measure::{Budget, ClockInstance, PeakInstance, reps_for, stats, time_instances, time_one};
use crate::machine::Platform;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ComputeCeiling {
    /// `double` or `single`.
    pub precision: String,
    /// `scalar`, `sse`, `avx`, `avx2`, `avx512`.
    pub isa: String,
    /// Whether FMA instructions are used.
    pub fma: bool,
    /// `fma`, `mul+add` or `fma+add`.
    pub mode: String,
    pub threads: u32,
    /// Median over the samples.
    pub gflops: f64,
    /// Best sample.
    pub gflops_best: f64,
    /// (Q3 − Q1) / median of the sample times.
    pub spread: f64,
    pub samples: usize,
    /// Clock measured while running this ISA on `threads` threads (GHz).
    pub ghz: Option<f64>,
    /// Flops per cycle per thread at that clock.
    pub flop_per_cycle: Option<f64>,
    /// Pipes × lanes × flops per instruction × measured clock × threads.
    pub theoretical_gflops: Option<f64>,
    pub percent_of_theoretical: Option<f64>,
}

pub fn precision_name(p: Precision) -> &'static str {
    match p {
        Precision::F64 => "double",
        Precision::F32 => "single",
        Precision::F16 => "half",
    }
}

/// The peak loops to measure: all of them, or for `quick` the FMA loop at every ISA plus
/// the mixes and single precision at the widest.
pub fn specs(quick: bool) -> Vec<PeakSpec> {
    let all: Vec<PeakSpec> = PeakSpec::all().into_iter().filter(|s| s.supported()).collect();
    if !quick {
        return all;
    }
    let widest = all.iter().map(|s| s.isa).max();
    all.into_iter()
        .filter(|s| {
            let at_widest = Some(s.isa) == widest;
            (s.precision == Precision::F64 && (s.mode == PeakMode::Fma || at_widest))
                || (s.precision == Precision::F32 && at_widest && s.mode == PeakMode::Fma)
                || (s.precision == Precision::F64 && s.isa == PeakIsa::Avx && s.mode == PeakMode::MulAdd && !has_fma(widest))
        })
        .collect()
}

fn has_fma(widest: Option<PeakIsa>) -> bool {
    matches!(widest, Some(PeakIsa::Avx2) | Some(PeakIsa::Avx512))
}

/// Flops per cycle per core of `spec`'s instruction mix on `platform`'s pipes.
pub fn theoretical_flop_per_cycle(platform: &Platform, spec: &PeakSpec) -> Option<f64> {
    let p = platform.pipes(spec.isa.width_bits())?;
    let lanes = spec.isa.lanes(spec.precision) as f64;
    let (fma, add, mul) = (p.fma as f64, p.add as f64, p.mul as f64);
    let per_cycle = match spec.mode {
        PeakMode::Fma => 2.0 * fma,
        // k multiplies and k adds per cycle: multiplies run on mul or FMA pipes, adds on add or
        // FMA pipes, and all of them share the pipes' total issue.
        PeakMode::MulAdd => {
            let k = (mul + fma).min(add + fma).min((fma + add + mul) / 2.0);
            2.0 * k
        }
        PeakMode::FmaAdd => 2.0 * fma + add,
    };
    if per_cycle > 0.0 { Some(per_cycle * lanes) } else { None }
}

/// Measured clock (GHz) at `isa` on `threads` pinned threads (the slowest thread's).
pub fn measure_clock(isa: PeakIsa, threads: usize, budget: Budget) -> Option<f64> {
    roofline_kernels::peak::clock_probe(isa, 1)?;
    let mut probe = ClockInstance { isa, rounds: 10_000 };
    let per_round = time_one(&mut probe) / 10_000.0;
    let rounds = reps_for(per_round, budget.sample);
    let team: Vec<Box<dyn Instance>> = (0..threads)
        .map(|_| Box::new(ClockInstance { isa, rounds }) as Box<dyn Instance>)
        .collect();
    let samples = time_instances(team, budget);
    // The fastest sample is the least disturbed by other tenants: the clock itself.
    let s = stats(&samples);
    Some(rounds as f64 * CLOCK_CYCLES_PER_ROUND as f64 / s.min / 1e9)
}

/// Measure one peak loop on `threads` threads.
pub fn measure_peak(spec: PeakSpec, threads: usize, budget: Budget, ghz: Option<f64>, platform: Option<&Platform>) -> ComputeCeiling {
    let mut probe = PeakInstance { spec, rounds: 20_000 };
    let per_round = time_one(&mut probe) / 20_000.0;
    let rounds = reps_for(per_round, budget.sample);
    let team: Vec<Box<dyn Instance>> = (0..threads)
        .map(|_| Box::new(PeakInstance { spec, rounds }) as Box<dyn Instance>)
        .collect();
    let flops = (spec.flops_per_round() * rounds * threads as u64) as f64;
    let samples = time_instances(team, budget);
    let s = stats(&samples);
    let gflops = flops / s.median / 1e9;
    let theoretical = match (platform, ghz) {
        (Some(p), Some(g)) => theoretical_flop_per_cycle(p, &spec).map(|f| f * g * threads as f64),
        _ => None,
    };
    ComputeCeiling {
        precision: precision_name(spec.precision).to_string(),
        isa: spec.isa.name().to_string(),
        fma: spec.mode != PeakMode::MulAdd,
        mode: spec.mode.name().to_string(),
        threads: threads as u32,
        gflops,
        gflops_best: flops / s.min / 1e9,
        spread: s.spread,
        samples: s.samples,
        ghz,
        flop_per_cycle: ghz.map(|g| gflops / g / threads as f64),
        theoretical_gflops: theoretical,
        percent_of_theoretical: theoretical.map(|t| 100.0 * gflops / t),
    }
}

/// Clocks per (ISA, threads), measured once each.
#[derive(Default)]
pub struct Clocks(BTreeMap<(PeakIsa, usize), Option<f64>>);

impl Clocks {
    pub fn get(&mut self, isa: PeakIsa, threads: usize, budget: Budget) -> Option<f64> {
        *self.0.entry((isa, threads)).or_insert_with(|| measure_clock(isa, threads, budget))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn theoretical_mixes_follow_the_pipes() {
        let zen4 = Platform::load("zen4").unwrap();
        let spec = |isa, mode| PeakSpec {
            precision: Precision::F64,
            isa,
            mode,
        };
        // Zen 4: 512-bit FMA double-pumped: 1 pipe × 8 lanes × 2.
        assert_eq!(theoretical_flop_per_cycle(&zen4, &spec(PeakIsa::Avx512, PeakMode::Fma)), Some(16.0));
        // 256-bit: 2 FMA + 2 FADD pipes: FMA+add mix = (2·2 + 2) × 4 lanes.
        assert_eq!(
            theoretical_flop_per_cycle(&zen4, &spec(PeakIsa::Avx2, PeakMode::FmaAdd)),
            Some(24.0)
        );
        // mul on the FMA pipes, add on the adders: 4 instructions per cycle.
        assert_eq!(theoretical_flop_per_cycle(&zen4, &spec(PeakIsa::Avx, PeakMode::MulAdd)), Some(16.0));
        let skx = Platform::load("skx").unwrap();
        if let Some(p) = skx.pipes(256)
            && p.fma > 0
            && p.add == 0
            && p.mul == 0
        {
            // Intel: mul and add share the FMA ports: half the FMA flops.
            let fma = theoretical_flop_per_cycle(&skx, &spec(PeakIsa::Avx2, PeakMode::Fma)).unwrap();
            let ma = theoretical_flop_per_cycle(&skx, &spec(PeakIsa::Avx, PeakMode::MulAdd)).unwrap();
            assert_eq!(ma * 2.0, fma);
        }
    }

    #[test]
    fn quick_is_a_subset_with_the_widest_fma() {
        let q = specs(true);
        let all = specs(false);
        assert!(q.iter().all(|s| all.contains(s)));
        assert!(q.len() <= all.len());
        if let Some(w) = all.iter().map(|s| s.isa).max()
            && has_fma(Some(w))
        {
            assert!(
                q.iter()
                    .any(|s| s.isa == w && s.mode == PeakMode::Fma && s.precision == Precision::F64)
            );
        }
    }
}
