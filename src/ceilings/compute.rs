//! Compute ceilings: peak GFLOP/s per precision × ISA × instruction mix, the clock measured
//! at each ISA, flop/cycle, and the theoretical peak from the platform table.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use roofline_kernels::lowp::Unit;
use roofline_kernels::peak::{CLOCK_CYCLES_PER_ROUND, PeakIsa, PeakMode, PeakSpec};
use roofline_kernels::peak_mixed;
use roofline_kernels::{Counts, Instance, Precision};

use super::measure::{Budget, ClockInstance, PeakInstance, reps_for, stats, time_instances, time_one};
use crate::machine::Platform;
use crate::schema::ceilings::{ComputeCeiling, UnequalThreads};

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

/// One peak sample with its own clock: the clock probe of the same ISA runs right before the
/// peak loop on the same thread, each timed. A sample's flop/cycle is then the ratio of two
/// figures taken under the same conditions: a hypervisor's steal, another tenant's time
/// slice or a frequency change lowers both, and cancels. (A clock measured once, apart from
/// the peak samples, let a busy host's slow samples read as a loop that misses its pipes.)
/// (clock seconds, peak seconds) of every run of one thread's [`PairedInstance`].
type PairLog = Arc<Mutex<Vec<(f64, f64)>>>;

struct PairedInstance {
    spec: PeakSpec,
    peak_rounds: u64,
    clock_rounds: u64,
    log: PairLog,
}

impl Instance for PairedInstance {
    fn run(&mut self) {
        let t0 = Instant::now();
        roofline_kernels::peak::clock_probe(self.spec.isa, self.clock_rounds);
        let t1 = Instant::now();
        std::hint::black_box(self.spec.run(self.peak_rounds));
        let t2 = Instant::now();
        if let Ok(mut log) = self.log.lock() {
            log.push(((t1 - t0).as_secs_f64(), (t2 - t1).as_secs_f64()));
        }
    }
    fn verify(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn counts(&self) -> Counts {
        Counts::default()
    }
}

/// The last `timed` entries of every thread's log: its timed samples, one run each (samples
/// of these loops last about 1 ms, so a sample is one call). The warm-up runs (as many as the
/// runner's warm-up time takes, not one) and the calibration run come before them.
fn timed_tails(logs: &[PairLog], timed: usize) -> Vec<Vec<(f64, f64)>> {
    logs.iter()
        .map(|l| l.lock().map(|v| tail(&v, timed).to_vec()).unwrap_or_default())
        .collect()
}

/// The last `n` elements of `v` (all of it when shorter).
fn tail<T>(v: &[T], n: usize) -> &[T] {
    &v[v.len().saturating_sub(n)..]
}

/// Figures of a paired measurement, from every thread's (clock seconds, peak seconds) log.
#[derive(Debug, Clone, PartialEq)]
pub struct PairedFigures {
    /// Team GFLOP/s per sample (the sum of every thread's own flops over its own peak time):
    /// median…
    pub gflops: f64,
    /// …and best.
    pub gflops_best: f64,
    /// (Q3 − Q1) / median of the team's sample times (threads over the sum of the threads'
    /// inverse peak times: the time in which the team's rate does one sample per thread).
    pub spread: f64,
    pub samples: usize,
    /// Median over samples of the threads' mean clock (GHz).
    pub ghz: f64,
    /// Flops per cycle per thread, each sample at its own clock: the mean over the threads of
    /// each thread's median (a team's rate is the sum of its threads': the median thread of a
    /// team half of whose threads share cores would read as all fast or all slow).
    pub flop_per_cycle: f64,
    /// Each thread's GFLOP/s, the median over its samples.
    pub thread_gflops: Vec<f64>,
}

/// Reduce per-thread logs (`logs[thread][run]`, warm-up runs already dropped) of pairs
/// (clock seconds for `clock_cycles` cycles, peak seconds for `flops` flops per thread).
///
/// A team's rate is the sum of its threads' rates, not its flops over the slowest thread's
/// time: each core's units work on their own, so what the machine can do at once is what each
/// does, and a kernel that balances its work dynamically reaches it. On a fresh 16-vCPU
/// Emerald Rapids guest (`kernels/examples/cpu_pairs.rs`) the slowest of 16 threads ran the FMA
/// loop at 0.50 of its rate alone and the median one at 0.99: the slowest thread's time reads
/// that as a machine of 16 half cores. A kernel split statically waits for the slowest thread;
/// the report says so where the CPUs are unequal (`environment.cpu_choice`).
pub fn paired_figures(logs: &[Vec<(f64, f64)>], clock_cycles: f64, flops: f64) -> Option<PairedFigures> {
    let n = logs.iter().map(Vec::len).min()?;
    if n == 0 {
        return None;
    }
    let threads = logs.len() as f64;
    let mut team_time = Vec::with_capacity(n);
    let mut team_ghz = Vec::with_capacity(n);
    let mut fpc: Vec<Vec<f64>> = vec![Vec::with_capacity(n); logs.len()];
    let mut rate: Vec<Vec<f64>> = vec![Vec::with_capacity(n); logs.len()];
    for j in 0..n {
        let (mut inverse_times, mut ghz_sum, mut counted) = (0.0f64, 0.0f64, 0usize);
        for (i, log) in logs.iter().enumerate() {
            let (tc, tp) = log[j];
            if !(tc > 0.0 && tp > 0.0) {
                continue;
            }
            let ghz = clock_cycles / tc / 1e9;
            inverse_times += 1.0 / tp;
            ghz_sum += ghz;
            counted += 1;
            fpc[i].push(flops / tp / (ghz * 1e9));
            rate[i].push(flops / tp / 1e9);
        }
        // A sample with a thread missing is no team sample.
        if counted == logs.len() && inverse_times > 0.0 {
            team_time.push(threads / inverse_times);
            team_ghz.push(ghz_sum / counted as f64);
        }
    }
    if team_time.is_empty() {
        return None;
    }
    let s = stats(&team_time);
    let median = |mut v: Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        crate::schema::stats::quantile(&v, 0.5)
    };
    let thread_fpc: Vec<f64> = fpc.into_iter().filter(|v| !v.is_empty()).map(median).collect();
    Some(PairedFigures {
        gflops: flops * threads / s.median / 1e9,
        gflops_best: flops * threads / s.min / 1e9,
        spread: s.spread,
        samples: s.samples,
        ghz: median(team_ghz),
        flop_per_cycle: thread_fpc.iter().sum::<f64>() / thread_fpc.len().max(1) as f64,
        thread_gflops: rate.into_iter().filter(|v| !v.is_empty()).map(median).collect(),
    })
}

/// Measure one peak loop on `threads` threads, each sample paired with a clock sample of the
/// same ISA (see [`PairedInstance`]). `percent_of_theoretical` is the measured flop/cycle
/// against the platform's, so it does not depend on how busy the host was.
///
/// The FMA loops are measured again while slow, as the AMX tile unit is ([`measure_mixed`]), up
/// to [`PEAK_ATTEMPTS`] times: on the Emerald Rapids guest the main job's one-thread AVX-512
/// FMA ceiling once read 52 GFLOP/s (a neighbour on the chosen vCPU's core for those 25 ms)
/// while the suite's dgemm ran at 55 on the same vCPU a few seconds later (71 in that call's
/// quick ceilings, 79-88 for its FMA peak loop).
pub fn measure_peak(spec: PeakSpec, threads: usize, budget: Budget, platform: Option<&Platform>) -> ComputeCeiling {
    let attempts = if spec.mode == PeakMode::Fma { PEAK_ATTEMPTS } else { 1 };
    match measured_again_while_slow(threads, attempts, || Some(measure_peak_once(spec, threads, budget, platform))) {
        Some(c) => c,
        None => measure_peak_once(spec, threads, budget, platform),
    }
}

/// One measurement of a peak loop where it runs now, read as its ceiling is (a team's figure
/// is the sum of its threads' rates), without measuring again elsewhere while slow: how fast
/// the machine is at this moment, beside something else measured here (the main job's check
/// beside each suite point).
pub fn measure_peak_here(spec: PeakSpec, threads: usize, budget: Budget) -> ComputeCeiling {
    measure_peak_once(spec, threads, budget, None)
}

/// Measurements of an FMA peak ceiling at most (see [`measure_peak`]).
pub const PEAK_ATTEMPTS: usize = 3;

/// One measurement of [`measure_peak`].
fn measure_peak_once(spec: PeakSpec, threads: usize, budget: Budget, platform: Option<&Platform>) -> ComputeCeiling {
    let mut probe = PeakInstance { spec, rounds: 20_000 };
    let per_round = time_one(&mut probe) / 20_000.0;
    let peak_rounds = reps_for(per_round, budget.sample);
    // A quarter of the sample for the clock: enough for a 0.1 % reading of a 1-cycle chain.
    let clock_rounds = roofline_kernels::peak::clock_probe(spec.isa, 1).map(|_| {
        let mut c = ClockInstance {
            isa: spec.isa,
            rounds: 10_000,
        };
        let per = time_one(&mut c) / 10_000.0;
        reps_for(per, budget.sample / 4)
    });
    let Some(clock_rounds) = clock_rounds else {
        return unpaired(spec, threads, budget, peak_rounds);
    };
    let logs: Vec<PairLog> = (0..threads).map(|_| Arc::default()).collect();
    let team: Vec<Box<dyn Instance>> = logs
        .iter()
        .map(|log| {
            Box::new(PairedInstance {
                spec,
                peak_rounds,
                clock_rounds,
                log: log.clone(),
            }) as Box<dyn Instance>
        })
        .collect();
    let timed = time_instances(team, budget).len();
    let logs = timed_tails(&logs, timed);
    let flops = (spec.flops_per_round() * peak_rounds) as f64;
    let Some(f) = paired_figures(&logs, (clock_rounds * CLOCK_CYCLES_PER_ROUND) as f64, flops) else {
        return unpaired(spec, threads, budget, peak_rounds);
    };
    let per_cycle = platform.and_then(|p| theoretical_flop_per_cycle(p, &spec));
    ComputeCeiling {
        precision: precision_name(spec.precision).to_string(),
        isa: spec.isa.name().to_string(),
        fma: spec.mode != PeakMode::MulAdd,
        mode: spec.mode.name().to_string(),
        threads: threads as u32,
        gflops: f.gflops,
        gflops_best: f.gflops_best,
        spread: f.spread,
        samples: f.samples,
        ghz: Some(f.ghz),
        flop_per_cycle: Some(f.flop_per_cycle),
        theoretical_gflops: per_cycle.map(|t| t * f.ghz * threads as f64),
        percent_of_theoretical: per_cycle.map(|t| 100.0 * f.flop_per_cycle / t),
        cpu: None,
        set_aside: Vec::new(),
        unequal_threads: UnequalThreads::from_rates(&f.thread_gflops),
    }
}

/// One sample of a low-precision unit's loop with its own clock (as [`PairedInstance`]).
struct MixedPairedInstance {
    unit: Unit,
    peak_rounds: u64,
    clock_rounds: u64,
    log: PairLog,
}

impl Instance for MixedPairedInstance {
    fn run(&mut self) {
        let t0 = Instant::now();
        roofline_kernels::peak::clock_probe(peak_mixed::clock_isa(self.unit), self.clock_rounds);
        let t1 = Instant::now();
        peak_mixed::run(self.unit, self.peak_rounds);
        let t2 = Instant::now();
        if let Ok(mut log) = self.log.lock() {
            log.push(((t1 - t0).as_secs_f64(), (t2 - t1).as_secs_f64()));
        }
    }
    fn verify(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn counts(&self) -> Counts {
        Counts::default()
    }
}

/// The platform table's rate of a unit (operations per cycle per core), if it has one.
pub fn theoretical_ops_per_cycle(platform: &Platform, unit: Unit) -> Option<f64> {
    platform
        .mixed_ops_per_cycle
        .get(unit.key())
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
}

/// Rounds of a low-precision unit's loop that fill one sample of `budget`, from a timed probe
/// of 2,000 rounds. None when this CPU lacks the unit.
fn mixed_rounds(unit: Unit, budget: Budget) -> Option<u64> {
    if !unit.available() {
        return None;
    }
    let probe_rounds = 2_000u64;
    let t0 = Instant::now();
    peak_mixed::run(unit, probe_rounds)?;
    let per_round = (t0.elapsed().as_secs_f64() / probe_rounds as f64).max(1e-10);
    Some(reps_for(per_round, budget.sample))
}

/// Measurements of an AMX ceiling at most: the first, and more while the best so far is
/// [`slow_attempt`].
pub const AMX_ATTEMPTS: usize = 8;

/// Below this % of the platform's rate a measurement of the AMX tile unit or of an FMA peak loop
/// is taken again.
pub const SLOW_PERCENT: f64 = 90.0;

/// Whether a ceiling reads as measured during a slow phase of its unit: below
/// [`SLOW_PERCENT`] of the platform's rate, or, without a platform rate, disturbed (its
/// samples spread more than [`crate::schema::ceilings::NOISY_COMPUTE_CEILING`]).
pub fn slow_attempt(c: &ComputeCeiling) -> bool {
    match c.percent_of_theoretical {
        Some(p) => p < SLOW_PERCENT,
        None => c.spread > crate::schema::ceilings::NOISY_COMPUTE_CEILING,
    }
}

/// Whether measurement `b` of a ceiling is the better one against `a`: more flop per cycle at
/// its own clock (else GFLOP/s), so a slow phase of the unit on the host does not become its
/// roof.
fn faster_attempt(b: &ComputeCeiling, a: &ComputeCeiling) -> bool {
    let rate = |c: &ComputeCeiling| c.flop_per_cycle.unwrap_or(c.gflops);
    rate(b) > rate(a)
}

/// The CPU of a one-thread attempt: the first allowed CPU (the preferred one), then each next
/// one in turn, so a slow phase of one vCPU's unit is not measured `attempts` times over.
pub fn attempt_cpu(allowed: &[usize], attempt: usize) -> Option<usize> {
    (!allowed.is_empty()).then(|| allowed[attempt % allowed.len()])
}

/// Measure up to `attempts` times while the best so far is [`slow_attempt`]: the best is
/// kept, with the others in its `set_aside`. `measure(i)` is attempt `i`; `cpu(i)` where it
/// ran (one thread), recorded on the kept figure and on those set aside.
pub fn best_of_attempts(
    attempts: usize,
    cpu: impl Fn(usize) -> Option<usize>,
    mut measure: impl FnMut(usize) -> Option<ComputeCeiling>,
) -> Option<ComputeCeiling> {
    let with_cpu = |mut c: ComputeCeiling, i: usize| {
        c.cpu = cpu(i).map(|c| c as u32);
        c
    };
    let mut kept = with_cpu(measure(0)?, 0);
    let mut set_aside = Vec::new();
    for i in 1..attempts {
        if !slow_attempt(&kept) {
            break;
        }
        let Some(again) = measure(i) else {
            break;
        };
        let again = with_cpu(again, i);
        let (best, other) = if faster_attempt(&again, &kept) {
            (again, kept)
        } else {
            (kept, again)
        };
        set_aside.push(crate::schema::ceilings::SetAsideAttempt {
            cpu: other.cpu,
            gflops: other.gflops,
            percent_of_theoretical: other.percent_of_theoretical,
        });
        kept = best;
    }
    if set_aside.is_empty() {
        kept.cpu = None;
    }
    kept.set_aside = set_aside;
    Some(kept)
}

/// Measure a low-precision unit (AMX bf16/int8 tiles, AVX-512 FP16 FMA, `vdpbf16ps`, VNNI) on
/// `threads` threads, each sample paired with a clock sample as [`measure_peak`] does: a
/// ceiling `precision.isa.fma` (GOP/s for int8/int16) with its % of the platform table's rate
/// at the measured clock. None when this CPU lacks the unit (the caller says so).
///
/// The AMX tile unit of the Emerald Rapids guest (2026-11-29, `examples/amx_cpus.rs`) runs at
/// 95-100 % of its rate on a vCPU, then at 40-46 % for 20-400 ms, then fast again, on one vCPU
/// after another, with the clock unchanged (a neighbour's AMX work on the core's other
/// hyperthread is the likely cause; a cold start is not: most vCPUs start fast). A 25 ms
/// measurement that falls in such a phase is slow throughout, with a small spread: an AMX
/// ceiling is measured again, up to [`AMX_ATTEMPTS`] times, while the best so far is below
/// [`SLOW_PERCENT`], and the best attempt is kept with its own spread. At one thread each
/// attempt runs on the next allowed CPU ([`attempt_cpu`]): the slow phases of one vCPU last up
/// to 0.4 s, while other vCPUs are fast meanwhile.
pub fn measure_mixed(unit: Unit, threads: usize, budget: Budget, platform: Option<&Platform>) -> Option<ComputeCeiling> {
    if !matches!(unit, Unit::AmxBf16 | Unit::AmxInt8) {
        return measure_mixed_once(unit, threads, budget, platform);
    }
    measured_again_while_slow(threads, AMX_ATTEMPTS, || measure_mixed_once(unit, threads, budget, platform))
}

/// [`best_of_attempts`] of `measure_once` on `threads` threads, one thread hopping to the next
/// allowed CPU for each new attempt (the preferred CPU restored after).
fn measured_again_while_slow(
    threads: usize,
    attempts: usize,
    mut measure_once: impl FnMut() -> Option<ComputeCeiling>,
) -> Option<ComputeCeiling> {
    let allowed = roofline_kernels::cpus::allowed_cpus();
    let hop = threads == 1 && allowed.len() > 1 && attempts > 1;
    let cpu = |i: usize| if hop { attempt_cpu(&allowed, i) } else { None };
    let preferred = roofline_kernels::cpus::preferred_cpu();
    let kept = best_of_attempts(attempts, cpu, |i| {
        if hop {
            roofline_kernels::cpus::prefer_cpu(cpu(i));
        }
        measure_once()
    });
    roofline_kernels::cpus::prefer_cpu(preferred);
    kept
}

/// One measurement of [`measure_mixed`].
fn measure_mixed_once(unit: Unit, threads: usize, budget: Budget, platform: Option<&Platform>) -> Option<ComputeCeiling> {
    let peak_rounds = mixed_rounds(unit, budget)?;
    let clock_isa = peak_mixed::clock_isa(unit);
    roofline_kernels::peak::clock_probe(clock_isa, 1)?;
    let mut c = ClockInstance {
        isa: clock_isa,
        rounds: 10_000,
    };
    let clock_rounds = reps_for(time_one(&mut c) / 10_000.0, budget.sample / 4);
    let logs: Vec<PairLog> = (0..threads).map(|_| Arc::default()).collect();
    let team: Vec<Box<dyn Instance>> = logs
        .iter()
        .map(|log| {
            Box::new(MixedPairedInstance {
                unit,
                peak_rounds,
                clock_rounds,
                log: log.clone(),
            }) as Box<dyn Instance>
        })
        .collect();
    let timed = time_instances(team, budget).len();
    let logs = timed_tails(&logs, timed);
    let ops = (peak_mixed::ops_per_round(unit) * peak_rounds) as f64;
    let f = paired_figures(&logs, (clock_rounds * CLOCK_CYCLES_PER_ROUND) as f64, ops)?;
    let per_cycle = platform.and_then(|p| theoretical_ops_per_cycle(p, unit));
    Some(ComputeCeiling {
        precision: unit.precision().to_string(),
        isa: unit.isa().to_string(),
        fma: true,
        mode: "fma".to_string(),
        threads: threads as u32,
        gflops: f.gflops,
        gflops_best: f.gflops_best,
        spread: f.spread,
        samples: f.samples,
        ghz: Some(f.ghz),
        flop_per_cycle: Some(f.flop_per_cycle),
        theoretical_gflops: per_cycle.map(|t| t * f.ghz * threads as f64),
        percent_of_theoretical: per_cycle.map(|t| 100.0 * f.flop_per_cycle / t),
        cpu: None,
        set_aside: Vec::new(),
        unequal_threads: UnequalThreads::from_rates(&f.thread_gflops),
    })
}

/// The peak loop alone on `threads` threads, for the energy roofs: no clock probe between
/// samples (its dependency chain draws less power than the loop and would dilute the
/// window's power). GFLOP/s only.
pub fn measure_peak_alone(spec: PeakSpec, threads: usize, budget: Budget) -> ComputeCeiling {
    let mut probe = PeakInstance { spec, rounds: 20_000 };
    let per_round = time_one(&mut probe) / 20_000.0;
    unpaired(spec, threads, budget, reps_for(per_round, budget.sample))
}

/// A low-precision unit's loop alone on `threads` threads (as [`measure_peak_alone`]): its
/// GOP/s (median over the samples) and the samples' spread. None when this CPU lacks it.
pub fn measure_mixed_alone(unit: Unit, threads: usize, budget: Budget) -> Option<(f64, f64)> {
    let rounds = mixed_rounds(unit, budget)?;
    let team: Vec<Box<dyn Instance>> = (0..threads)
        .map(|_| Box::new(MixedAlone { unit, rounds }) as Box<dyn Instance>)
        .collect();
    let s = stats(&time_instances(team, budget));
    let ops = (peak_mixed::ops_per_round(unit) * rounds * threads as u64) as f64;
    Some((ops / s.median / 1e9, s.spread))
}

struct MixedAlone {
    unit: Unit,
    rounds: u64,
}

impl Instance for MixedAlone {
    fn run(&mut self) {
        peak_mixed::run(self.unit, self.rounds);
    }
    fn verify(&mut self) -> Result<(), String> {
        Ok(())
    }
    fn counts(&self) -> roofline_kernels::Counts {
        roofline_kernels::Counts::default()
    }
}

/// The peak loop alone (no clock probe for its ISA): GFLOP/s only.
fn unpaired(spec: PeakSpec, threads: usize, budget: Budget, rounds: u64) -> ComputeCeiling {
    let team: Vec<Box<dyn Instance>> = (0..threads)
        .map(|_| Box::new(PeakInstance { spec, rounds }) as Box<dyn Instance>)
        .collect();
    let flops = (spec.flops_per_round() * rounds * threads as u64) as f64;
    let s = stats(&time_instances(team, budget));
    ComputeCeiling {
        precision: precision_name(spec.precision).to_string(),
        isa: spec.isa.name().to_string(),
        fma: spec.mode != PeakMode::MulAdd,
        mode: spec.mode.name().to_string(),
        threads: threads as u32,
        gflops: flops / s.median / 1e9,
        gflops_best: flops / s.min / 1e9,
        spread: s.spread,
        samples: s.samples,
        ghz: None,
        flop_per_cycle: None,
        theoretical_gflops: None,
        percent_of_theoretical: None,
        cpu: None,
        set_aside: Vec::new(),
        unequal_threads: None,
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

    /// A slow attempt (below 90 % of the platform's rate, or disturbed where there is no
    /// rate) is taken again; of two attempts the one of more flop per cycle is kept, whole.
    #[test]
    fn slow_amx_attempts_are_repeated_and_the_best_kept() {
        let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
        let ceiling = |fpc: f64, pct: Option<f64>, spread: f64| ComputeCeiling {
            precision: "bf16".into(),
            isa: "amx".into(),
            fma: true,
            mode: "fma".into(),
            threads: 1,
            gflops: fpc * 3.0,
            gflops_best: fpc * 3.0,
            spread,
            samples: 7,
            ghz: Some(3.0),
            flop_per_cycle: Some(fpc),
            theoretical_gflops: None,
            percent_of_theoretical: pct,
            cpu: None,
            set_aside: Vec::new(),
            unequal_threads: None,
        };
        for _ in 0..200 {
            let (fa, fb) = (100.0 + 1000.0 * rng.unit(), 100.0 + 1000.0 * rng.unit());
            let (pa, sa) = (100.0 * fa / 1024.0, 0.2 * rng.unit());
            let a = ceiling(fa, Some(pa), sa);
            assert_eq!(slow_attempt(&a), pa < SLOW_PERCENT, "{a:?}");
            let no_rate = ceiling(fa, None, sa);
            assert_eq!(slow_attempt(&no_rate), sa > crate::schema::ceilings::NOISY_COMPUTE_CEILING);
            let b = ceiling(fb, Some(100.0 * fb / 1024.0), 0.01);
            assert_eq!(faster_attempt(&b, &a), fb > fa);
        }
    }

    /// Attempts go on while the best so far is slow, each on its own CPU; the fastest is kept
    /// with the CPU it ran on, every other one is set aside with its CPU and figure.
    #[test]
    fn amx_attempts_hop_cpus_until_one_is_fast_and_set_the_rest_aside() {
        let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
        for _ in 0..300 {
            let allowed: Vec<usize> = (0..1 + rng.below(16)).map(|i| 2 * i + rng.below(2)).collect();
            let attempts = 1 + rng.below(6);
            // Each attempt's flop per cycle: a slow phase (380-480) or a fast unit (930-1030).
            let rates: Vec<f64> = (0..attempts)
                .map(|_| {
                    if rng.unit() < 0.6 {
                        380.0 + 100.0 * rng.unit()
                    } else {
                        930.0 + 100.0 * rng.unit()
                    }
                })
                .collect();
            let mut calls = Vec::new();
            let kept = best_of_attempts(
                attempts,
                |i| attempt_cpu(&allowed, i),
                |i| {
                    calls.push(i);
                    let fpc = rates[i];
                    Some(ComputeCeiling {
                        precision: "bf16".into(),
                        isa: "amx".into(),
                        fma: true,
                        mode: "fma".into(),
                        threads: 1,
                        gflops: 2.5 * fpc,
                        gflops_best: 2.5 * fpc,
                        spread: 0.01,
                        samples: 7,
                        ghz: Some(2.5),
                        flop_per_cycle: Some(fpc),
                        theoretical_gflops: Some(2.5 * 1024.0),
                        percent_of_theoretical: Some(100.0 * fpc / 1024.0),
                        cpu: None,
                        set_aside: Vec::new(),
                        unequal_threads: None,
                    })
                },
            )
            .unwrap();
            // Calls stop at the first fast attempt (all are slow: every attempt).
            let expected = rates.iter().position(|&r| r >= 921.6).map_or(attempts, |p| p + 1);
            assert_eq!(calls, (0..expected).collect::<Vec<_>>(), "{rates:?}");
            let best = (0..expected).max_by(|&a, &b| rates[a].total_cmp(&rates[b])).unwrap();
            assert_eq!(kept.flop_per_cycle, Some(rates[best]));
            assert_eq!(kept.set_aside.len(), expected - 1);
            if expected == 1 {
                assert_eq!(kept.cpu, None, "measured once: no CPU to name");
            } else {
                assert_eq!(kept.cpu, Some(allowed[best % allowed.len()] as u32));
                let mut aside: Vec<(Option<u32>, f64)> = kept.set_aside.iter().map(|a| (a.cpu, a.gflops)).collect();
                let mut others: Vec<(Option<u32>, f64)> = (0..expected)
                    .filter(|&i| i != best)
                    .map(|i| (Some(allowed[i % allowed.len()] as u32), 2.5 * rates[i]))
                    .collect();
                aside.sort_by(|a, b| a.1.total_cmp(&b.1));
                others.sort_by(|a, b| a.1.total_cmp(&b.1));
                assert_eq!(aside, others);
            }
        }
        assert_eq!(attempt_cpu(&[], 3), None);
    }

    /// However many warm-up runs a thread logged before its timed samples (slow ones: a cold
    /// core, a neighbour), the figures come from the timed ones.
    #[test]
    fn figures_come_from_the_timed_samples_after_any_warm_up() {
        let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
        for _ in 0..50 {
            let (threads, timed) = (1 + rng.below(16), 1 + rng.below(30));
            // 1 ms of clock probe at 2.5 GHz, the loop at 1000 flop/cycle when warm and at
            // 400 during the warm-up; each thread's warm-up count differs.
            let (cycles, flops) = (2.5e6, 1000.0 * 2.5e6);
            let logs: Vec<PairLog> = (0..threads)
                .map(|_| {
                    let warm = rng.below(400);
                    let mut v = vec![(1e-3, 2.5e-3); warm];
                    v.push((1e-3, 2.5e-3)); // calibration, slow too
                    v.extend(std::iter::repeat_n((1e-3, 1e-3), timed));
                    Arc::new(Mutex::new(v))
                })
                .collect();
            let tails = timed_tails(&logs, timed);
            assert!(tails.iter().all(|t| t.len() == timed));
            let f = paired_figures(&tails, cycles, flops).unwrap();
            assert!((f.flop_per_cycle - 1000.0).abs() < 1e-6, "{f:?}");
            assert!((f.spread).abs() < 1e-9, "{f:?}");
        }
        assert_eq!(tail(&[1, 2, 3], 5), &[1, 2, 3]);
        assert_eq!(tail(&[1, 2, 3], 2), &[2, 3]);
    }

    /// Steal and slow samples lower a pair's clock and its peak together: flop/cycle stays
    /// at the loop's true rate, while the GFLOP/s median shows the disturbance.
    #[test]
    fn paired_flop_per_cycle_cancels_disturbances() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64 ^ std::process::id() as u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        };
        let (ghz, fpc) = (2.0 + rnd(), 12.0 + 8.0 * rnd());
        let (cycles, flops) = (250_000.0, 16.0e6);
        let threads = 1 + (rnd() * 4.0) as usize;
        let logs: Vec<Vec<(f64, f64)>> = (0..threads)
            .map(|_| {
                (0..31)
                    .map(|j| {
                        // Most samples run on a slowed core (steal, a frequency dip).
                        let slow = if j < 20 { 1.05 + rnd() } else { 1.0 };
                        let hz = ghz * 1e9 / slow;
                        (cycles / hz, flops / fpc / hz)
                    })
                    .collect()
            })
            .collect();
        let f = paired_figures(&logs, cycles, flops).unwrap();
        assert!((f.flop_per_cycle - fpc).abs() < 1e-9 * fpc, "{f:?} vs {fpc}");
        assert!(f.ghz <= ghz * (1.0 + 1e-12));
        assert!(f.gflops_best <= fpc * ghz * threads as f64 * (1.0 + 1e-9));
        assert!(f.gflops < f.gflops_best, "{f:?}");
        assert_eq!(f.samples, 31);
        // A log without pairs gives nothing rather than NaN figures.
        assert!(paired_figures(&[vec![]], cycles, flops).is_none());
        assert!(paired_figures(&[], cycles, flops).is_none());
    }

    /// A team's rate is the sum of its threads' own rates: one thread at a fraction of the rate
    /// beside full-rate ones lowers the team by its own loss only, not to team × its rate; every
    /// thread at its own clock still gives each thread's flop/cycle.
    #[test]
    fn a_team_is_the_sum_of_its_threads_not_its_slowest_times_its_size() {
        let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
        for _ in 0..200 {
            let threads = 1 + rng.below(32);
            let (ghz, fpc, samples) = (2.0 + rng.unit(), 8.0 + 24.0 * rng.unit(), 1 + rng.below(20));
            let (cycles, flops) = (1e6, 1e8);
            // Each thread's share of its unit, the same in every sample: most at 1, some at 0.4-0.6.
            let share: Vec<f64> = (0..threads)
                .map(|_| if rng.unit() < 0.2 { 0.4 + 0.2 * rng.unit() } else { 1.0 })
                .collect();
            let logs: Vec<Vec<(f64, f64)>> = share
                .iter()
                .map(|s| vec![(cycles / (ghz * 1e9), flops / (s * fpc * ghz * 1e9)); samples])
                .collect();
            let f = paired_figures(&logs, cycles, flops).unwrap();
            let sum: f64 = share.iter().map(|s| s * fpc * ghz).sum();
            assert!((f.gflops - sum).abs() < 1e-9 * sum, "{f:?} against {sum} from {share:?}");
            assert!((f.gflops_best - sum).abs() < 1e-9 * sum && f.spread.abs() < 1e-12);
            let slowest = share.iter().cloned().fold(1.0, f64::min);
            if slowest < 1.0 && threads > 1 {
                assert!(f.gflops > threads as f64 * slowest * fpc * ghz * (1.0 + 1e-9));
            }
            assert!((f.ghz - ghz).abs() < 1e-9 * ghz);
            assert_eq!(f.samples, samples);
            // Flop/cycle per thread is the threads' mean: the team's sum over its size.
            let expected = share.iter().map(|s| s * fpc).sum::<f64>() / threads as f64;
            assert!((f.flop_per_cycle - expected).abs() < 1e-9 * expected, "{f:?} against {expected}");
            // Each thread's own rate, and the slow ones (0.4-0.6 of the fastest, the rest at 1)
            // counted, at their median share, with the team worth the sum of the shares.
            assert_eq!(f.thread_gflops.len(), threads);
            for (g, s) in f.thread_gflops.iter().zip(&share) {
                assert!((g - s * fpc * ghz).abs() < 1e-9 * g, "{g} against share {s}");
            }
            // (Where every thread is slow, the fastest of them is the reference.)
            let fastest = share.iter().copied().fold(0.0, f64::max);
            let mut slow: Vec<f64> = share
                .iter()
                .map(|s| s / fastest)
                .filter(|r| *r < crate::schema::ceilings::SLOW_THREAD_SHARE)
                .collect();
            match UnequalThreads::from_rates(&f.thread_gflops) {
                None => assert!(threads == 1 || slow.is_empty(), "{share:?}"),
                Some(u) => {
                    assert!(threads > 1);
                    slow.sort_by(f64::total_cmp);
                    assert_eq!(u.slow as usize, slow.len(), "{share:?}");
                    let m = crate::schema::stats::quantile(&slow, 0.5);
                    assert!((u.slow_share - m).abs() < 1e-9, "{u:?} against {m}");
                    let worth: f64 = share.iter().map(|s| s / fastest).sum();
                    assert!((u.fastest_threads_worth - worth).abs() < 1e-9 * worth, "{u:?} against {worth}");
                }
            }
            // A sample that lacks one thread's pair is dropped, not counted as a smaller team.
            let mut gap = logs.clone();
            gap[0][0] = (0.0, 0.0);
            match paired_figures(&gap, cycles, flops) {
                Some(g) => assert_eq!(g.samples, samples - 1),
                None => assert_eq!(samples, 1),
            }
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
