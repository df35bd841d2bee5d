//! Does the AMX tile unit's rate follow the vCPU? Per round, on each allowed CPU in turn (a
//! fresh thread pinned there): the clock (the AVX-512 clock probe), `SAMPLES` samples of the AMX
//! bf16 peak loop (`roofline ceilings`' loop, about `MS` ms each) as bf16 flop per cycle at that
//! clock, and one sample of the AVX-512 FMA peak loop as flop per cycle. Then, on the first CPU,
//! a long series of the AMX loop (`LONG` samples) to show whether slow samples come in phases.
//!
//! Usage: `cargo run --release -p roofline-kernels --example amx_cpus -- [ROUNDS] [SAMPLES] [MS] [LONG]`
//! (defaults 3 5 2 200). Prints per CPU and round the AMX flop/cycle min/median/max of its
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
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
