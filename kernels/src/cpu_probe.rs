//! Which CPU of this process's set runs a short dgemm fastest. On a shared guest the vCPUs are
//! not equal: a neighbour on a vCPU's sibling hyperthread can halve it, another's memory
//! traffic slows the loads of a third, while the rest run as the machine can. Roofs and points
//! of one thread measured on such a vCPU judge the machine by its worst core.

use std::time::Instant;

use crate::api::Instance;
use crate::gemm::{Blocking, GemmElem, Mats};
use crate::runner::pin_to_cpu;
use crate::suite::ALL_VARIANTS;
use crate::types::Variant;

/// One CPU's probe rate.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuRate {
    pub cpu: usize,
    /// The probe's GFLOP/s on that CPU: the best of its rounds.
    pub gflops: f64,
}

/// The probe's matrix order: A, B and C take 600 KiB, in L2 on every x86 server core, so the
/// probe loads from L1 and L2 as fast as the FMA units allow.
pub const PROBE_ORDER: usize = 160;

/// The widest dgemm variant this CPU runs (the probe's).
pub fn widest_variant() -> Variant {
    ALL_VARIANTS
        .iter()
        .rev()
        .copied()
        .find(|&v| crate::check::runnable(v))
        .unwrap_or(Variant::Scalar)
}

/// Run the dgemm probe on each CPU of `cpus` for `seconds`, `rounds` times over the list (each
/// CPU's rate is its best round, so a moment's interruption does not mark a CPU slow), from a
/// thread pinned to the CPU. A CPU that refuses the pinning is left out.
pub fn probe(cpus: &[usize], seconds: f64, rounds: usize) -> Vec<CpuRate> {
    let v = widest_variant();
    let (mr, nr) = <f64 as GemmElem>::tile(v);
    let blk = Blocking::for_tile(mr, nr, 8);
    let flops = 2.0 * (PROBE_ORDER as f64).powi(3);
    let mut best: Vec<Option<f64>> = vec![None; cpus.len()];
    for _ in 0..rounds.max(1) {
        for (i, &cpu) in cpus.iter().enumerate() {
            let rate = std::thread::scope(|s| {
                s.spawn(|| {
                    if !pin_to_cpu(cpu) {
                        return None;
                    }
                    let mut m = Mats::<f64>::new(PROBE_ORDER, v, 1, 0, blk).ok()?;
                    m.run();
                    let (t, mut calls) = (Instant::now(), 0u32);
                    while calls == 0 || t.elapsed().as_secs_f64() < seconds {
                        m.run();
                        calls += 1;
                    }
                    Some(f64::from(calls) * flops / t.elapsed().as_secs_f64() / 1e9)
                })
                .join()
                .ok()
                .flatten()
            });
            if let Some(r) = rate {
                best[i] = Some(best[i].map_or(r, |b: f64| b.max(r)));
            }
        }
    }
    cpus.iter()
        .zip(best)
        .filter_map(|(&cpu, g)| g.map(|gflops| CpuRate { cpu, gflops }))
        .collect()
}

/// The CPU to run one thread on: the first (lowest in `rates`' order) whose rate is within
/// `tolerance` (a fraction, e.g. 0.03) of the fastest, so that a machine of equal CPUs keeps its
/// first CPU and only a clearly slower one is passed over. None for no rates.
pub fn choose(rates: &[CpuRate], tolerance: f64) -> Option<usize> {
    let fastest = rates.iter().map(|r| r.gflops).fold(f64::NAN, f64::max);
    rates.iter().find(|r| r.gflops >= fastest * (1.0 - tolerance)).map(|r| r.cpu)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::Rng;

    #[test]
    fn choose_keeps_the_first_cpu_unless_another_is_clearly_faster() {
        let mut rng = Rng::new(crate::rng::fresh_seed());
        for _ in 0..200 {
            let n = 1 + rng.below(16);
            let tol = 0.01 + 0.1 * rng.unit();
            let rates: Vec<CpuRate> = (0..n)
                .map(|cpu| CpuRate {
                    cpu: cpu * 2,
                    gflops: 1.0 + 99.0 * rng.unit(),
                })
                .collect();
            let chosen = choose(&rates, tol).unwrap();
            let fastest = rates.iter().map(|r| r.gflops).fold(0.0, f64::max);
            let pos = rates.iter().position(|r| r.cpu == chosen).unwrap();
            assert!(rates[pos].gflops >= fastest * (1.0 - tol), "{rates:?} tol {tol}: chose {chosen}");
            assert!(
                rates[..pos].iter().all(|r| r.gflops < fastest * (1.0 - tol)),
                "an earlier CPU was within tolerance: {rates:?} tol {tol}, chose {chosen}"
            );
        }
        assert_eq!(choose(&[], 0.03), None);
    }

    #[test]
    fn the_probe_rates_every_allowed_cpu() {
        let cpus = crate::cpus::allowed_cpus();
        let rates = probe(&cpus, 0.002, 1);
        assert_eq!(rates.iter().map(|r| r.cpu).collect::<Vec<_>>(), cpus);
        assert!(rates.iter().all(|r| r.gflops.is_finite() && r.gflops > 0.0), "{rates:?}");
    }
}
