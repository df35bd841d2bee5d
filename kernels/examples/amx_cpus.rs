//! Does the AMX tile unit's rate follow the vCPU? Per round, on each allowed CPU in turn (a
//! fresh thread pinned there): the clock (the AVX-512 clock probe), `SAMPLES` samples of the AMX
//! bf16 peak loop (`roofline ceilings`' loop, about `MS` ms each) as bf16 flop per cycle at that
//! clock, and one sample of the AVX-512 FMA peak loop as flop per cycle. Then, on the first CPU,
//! a long series of the AMX loop (`LONG` samples) to show whether slow samples come in phases.
//!
//! Usage: `cargo run --release -p roofline-kernels --example amx_cpus -- [ROUNDS] [SAMPLES] [MS] [LONG]`
//! (defaults 3 5 2 200), or `-- ramp MS [all]`: on each CPU in turn (`all`: on every CPU at
//! once, one thread each) the AMX loop for MS ms without a pause from a cold start, in 2 ms
//! samples, printing when each CPU's rate first reached 90 % of its best sample and stayed
//! there, then on the first CPU that rate again after 10 ms, 100 ms and 1 s idle. Prints per CPU and round the AMX flop/cycle min/median/max of its
//! samples (platform: 1024) and the FMA flop/cycle (platform: 32 on two 512-bit FMA pipes).

use std::time::Instant;

use roofline_kernels::lowp::Unit;
use roofline_kernels::peak::{CLOCK_CYCLES_PER_ROUND, PeakIsa, PeakMode, PeakSpec, clock_probe};
use roofline_kernels::peak_mixed;
use roofline_kernels::runner::{allowed_cpus, pin_to_cpu, quantile};

/// GHz from the AVX-512 clock probe (about 0.5 ms).
fn ghz() -> f64 {
    let rounds = 80_000u64;
    let t = Instant::now();
    clock_probe(PeakIsa::Avx512, rounds);
    (rounds * CLOCK_CYCLES_PER_ROUND) as f64 / t.elapsed().as_secs_f64() / 1e9
}

/// AMX bf16 flop per cycle of `rounds` rounds at `ghz`.
fn amx_fpc(rounds: u64, ghz: f64) -> f64 {
    let t = Instant::now();
    peak_mixed::run(Unit::AmxBf16, rounds);
    (peak_mixed::ops_per_round(Unit::AmxBf16) * rounds) as f64 / t.elapsed().as_secs_f64() / (ghz * 1e9)
}

/// (seconds since the start, flop/cycle) of each 2 ms sample.
type Series = Vec<(f64, f64)>;

/// One CPU's ramp: the samples of `ms` ms.
fn ramp(cpu: usize, ms: usize) -> Option<Series> {
    if !pin_to_cpu(cpu) {
        return None;
    }
    let g = ghz();
    let rounds = (2e-3 * g * 1e9 / 64.0) as u64;
    let t0 = Instant::now();
    let mut v = Vec::new();
    while t0.elapsed().as_secs_f64() < ms as f64 * 1e-3 {
        let t = t0.elapsed().as_secs_f64();
        v.push((t, amx_fpc(rounds, g)));
    }
    Some(v)
}

/// When a ramp first reached 90 % of its best sample for good (seconds), its first and last
/// samples' rates.
fn settled(v: &[(f64, f64)]) -> (f64, f64, f64) {
    let best = v.iter().map(|x| x.1).fold(0.0, f64::max);
    let last_slow = v.iter().rposition(|x| x.1 < 0.9 * best);
    let t = match last_slow {
        None => 0.0,
        Some(i) if i + 1 < v.len() => v[i + 1].0,
        Some(i) => v[i].0,
    };
    (t, v.first().map_or(0.0, |x| x.1), v.last().map_or(0.0, |x| x.1))
}

fn ramps(ms: usize, all: bool) {
    let cpus = allowed_cpus();
    println!(
        "AMX ramp from cold, {ms} ms per cpu ({}): cpu, settled after (ms), first, last, best flop/cycle; 20 ms medians",
        if all { "all cpus at once" } else { "one cpu at a time" }
    );
    let results: Vec<(usize, Option<Series>)> = if all {
        std::thread::scope(|s| {
            let hs: Vec<_> = cpus.iter().map(|&c| (c, s.spawn(move || ramp(c, ms)))).collect();
            hs.into_iter().map(|(c, h)| (c, h.join().ok().flatten())).collect()
        })
    } else {
        cpus.iter()
            .map(|&c| (c, std::thread::scope(|s| s.spawn(move || ramp(c, ms)).join().ok().flatten())))
            .collect()
    };
    for (cpu, v) in results {
        let Some(v) = v else { continue };
        let (t, first, last) = settled(&v);
        let best = v.iter().map(|x| x.1).fold(0.0, f64::max);
        let meds: Vec<String> = v
            .chunks(10)
            .map(|c| format!("{:.0}", quantile(&c.iter().map(|x| x.1).collect::<Vec<_>>(), 0.5)))
            .collect();
        println!(
            "cpu {cpu:>3}: {:>6.1} ms {first:>6.0} {last:>6.0} {best:>6.0} | {}",
            t * 1e3,
            meds.join(" ")
        );
    }
    let cpu = cpus[0];
    pin_to_cpu(cpu);
    let g = ghz();
    let rounds = (2e-3 * g * 1e9 / 64.0) as u64;
    for idle_ms in [10u64, 100, 1000] {
        std::thread::sleep(std::time::Duration::from_millis(idle_ms));
        let v: Vec<f64> = (0..5).map(|_| amx_fpc(rounds, g)).collect();
        println!(
            "cpu {cpu} after {idle_ms} ms idle: 5 samples {:?}",
            v.iter().map(|x| x.round() as i64).collect::<Vec<_>>()
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if !Unit::AmxBf16.available() {
        eprintln!("amx_cpus: {}", Unit::AmxBf16.why_unavailable());
        std::process::exit(2);
    }
    if args.first().is_some_and(|a| a == "ramp") {
        let ms = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(300);
        ramps(ms, args.get(2).is_some_and(|a| a == "all"));
        return;
    }
    let num = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (rounds, samples, ms, long) = (num(0, 3), num(1, 5).max(1), num(2, 2).max(1), num(3, 200));
    if !Unit::AmxBf16.available() {
        eprintln!("amx_cpus: {}", Unit::AmxBf16.why_unavailable());
        std::process::exit(2);
    }
    let fma = PeakSpec {
        precision: roofline_kernels::Precision::F64,
        isa: PeakIsa::Avx512,
        mode: PeakMode::Fma,
    };
    // Rounds of the AMX loop per sample: 64 cycles a round at about 2.5 GHz.
    let amx_rounds = (ms as f64 * 1e-3 * 2.5e9 / 64.0) as u64;
    let fma_rounds = 200_000u64;
    let cpus = allowed_cpus();
    println!("cpus {cpus:?}; {samples} AMX samples of {amx_rounds} rounds (~{ms} ms) per cpu and round");
    println!(
        "{:>5} {:>4} {:>6} {:>8} {:>8} {:>8} {:>8}",
        "round", "cpu", "GHz", "amx min", "amx med", "amx max", "fma fpc"
    );
    let mut per_cpu: Vec<Vec<f64>> = vec![Vec::new(); cpus.len()];
    for round in 0..rounds {
        for (i, &cpu) in cpus.iter().enumerate() {
            let row = std::thread::scope(|s| {
                s.spawn(|| {
                    if !pin_to_cpu(cpu) {
                        return None;
                    }
                    // First use in this thread (tile state allocated by the kernel), untimed.
                    peak_mixed::run(Unit::AmxBf16, amx_rounds / 4 + 1);
                    let g = ghz();
                    let amx: Vec<f64> = (0..samples).map(|_| amx_fpc(amx_rounds, g)).collect();
                    let t = Instant::now();
                    std::hint::black_box(fma.run(fma_rounds));
                    let f = (fma.flops_per_round() * fma_rounds) as f64 / t.elapsed().as_secs_f64() / (g * 1e9);
                    Some((g, amx, f))
                })
                .join()
                .ok()
                .flatten()
            });
            if let Some((g, amx, f)) = row {
                println!(
                    "{round:>5} {cpu:>4} {g:>6.3} {:>8.0} {:>8.0} {:>8.0} {f:>8.1}",
                    quantile(&amx, 0.0),
                    quantile(&amx, 0.5),
                    quantile(&amx, 1.0)
                );
                per_cpu[i].extend(amx);
            }
        }
    }
    println!("per cpu over all rounds (AMX bf16 flop/cycle): min / median / max");
    for (i, &cpu) in cpus.iter().enumerate() {
        if !per_cpu[i].is_empty() {
            let v = &per_cpu[i];
            println!(
                "cpu {cpu:>3}: {:>6.0} {:>6.0} {:>6.0}",
                quantile(v, 0.0),
                quantile(v, 0.5),
                quantile(v, 1.0)
            );
        }
    }
    if long > 0 {
        let cpu = cpus[0];
        pin_to_cpu(cpu);
        peak_mixed::run(Unit::AmxBf16, amx_rounds);
        let t0 = Instant::now();
        let series: Vec<(f64, f64)> = (0..long)
            .map(|_| {
                let g = ghz();
                (t0.elapsed().as_secs_f64(), amx_fpc(amx_rounds, g))
            })
            .collect();
        println!("cpu {cpu}: {long} AMX samples in a row, medians of 10 (time s: flop/cycle)");
        let line: Vec<String> = series
            .chunks(10)
            .map(|c| {
                let v: Vec<f64> = c.iter().map(|x| x.1).collect();
                format!("{:.2}:{:.0}", c[0].0, quantile(&v, 0.5))
            })
            .collect();
        println!("{}", line.join(" "));
        let all: Vec<f64> = series.iter().map(|x| x.1).collect();
        println!(
            "long series: min {:.0}, q1 {:.0}, median {:.0}, q3 {:.0}, max {:.0}",
            quantile(&all, 0.0),
            quantile(&all, 0.25),
            quantile(&all, 0.5),
            quantile(&all, 0.75),
            quantile(&all, 1.0)
        );
    }
}
