//! Blockings of the AMX GEMMs (`bf16_gemm`, `int8_gemm`), timed interleaved on one pinned core:
//! per round each blocking once (best of `reps` calls), in rotating order. Prints per blocking
//! the median GOP/s over rounds and its spread (IQR/median); each blocking's C is checked
//! against the f64 reference first (`Instance::verify`).
//!
//! Usage: `cargo run --release -p roofline-kernels --example amx_shapes -- bf16|int8 N ROUNDS REPS CPU KC/NC...`

use std::time::Instant;

use roofline_kernels::Instance;
use roofline_kernels::gemm_lowp::{AmxBlocking, Lowp, LowpMats, Path};
use roofline_kernels::runner::{pin_to_cpu, quantile};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!("usage: amx_shapes bf16|int8 N ROUNDS REPS CPU KC/NC...");
        std::process::exit(2)
    };
    if args.len() < 6 {
        usage()
    }
    let kind = match args[0].as_str() {
        "bf16" => Lowp::Bf16,
        "int8" => Lowp::Int8,
        _ => usage(),
    };
    let num = |s: &str| s.parse::<usize>().unwrap_or_else(|_| usage());
    let (n, rounds, reps, cpu) = (num(&args[1]), num(&args[2]), num(&args[3]), num(&args[4]));
    pin_to_cpu(cpu);
    let mut cases: Vec<(String, LowpMats)> = Vec::new();
    for spec in &args[5..] {
        let (kc, nc) = spec.split_once('/').unwrap_or_else(|| usage());
        let mut m = LowpMats::new(kind, n, 11, Path::Amx).unwrap_or_else(|e| {
            eprintln!("amx_shapes: {e}");
            std::process::exit(2)
        });
        if let Err(e) = m.set_amx_blocking(AmxBlocking { kc: num(kc), nc: num(nc) }) {
            eprintln!("amx_shapes: {spec}: {e}");
            std::process::exit(2);
        }
        if let Err(e) = m.verify() {
            eprintln!("amx_shapes: {spec}: {e}");
            std::process::exit(1);
        }
        cases.push((spec.clone(), m));
    }
    let mut got = vec![Vec::new(); cases.len()];
    for round in 0..rounds {
        for k in 0..cases.len() {
            let i = (k + round) % cases.len();
            let m = &mut cases[i].1;
            let mut best = f64::INFINITY;
            for r in 0..=reps {
                let t = Instant::now();
                m.run();
                if r > 0 {
                    best = best.min(t.elapsed().as_secs_f64());
                }
            }
            got[i].push(2.0 * (n as f64).powi(3) / best / 1e9);
        }
    }
    println!("{kind:?} n={n} rounds={rounds} reps={reps} cpu={cpu}; every blocking verified");
    println!("{:<12} {:>9} {:>8} {:>9} {:>9}", "kc/nc", "GOP/s", "spread", "min", "max");
    for (i, (name, _)) in cases.iter().enumerate() {
        let med = quantile(&got[i], 0.5);
        println!(
            "{name:<12} {med:>9.0} {:>7.1}% {:>9.0} {:>9.0}",
            100.0 * (quantile(&got[i], 0.75) - quantile(&got[i], 0.25)) / med,
            quantile(&got[i], 0.0),
            quantile(&got[i], 1.0)
        );
    }
}
