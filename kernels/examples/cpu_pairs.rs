//! Which vCPUs share a physical core? A guest may present hyperthreads as cores (the Emerald
//! Rapids guest: 16 "cores", no SMT, while its 16-thread FMA ceiling is 7.9x one thread's).
//! For every pair of allowed CPUs, two threads pinned there run the same peak loop at once; each
//! thread's rate over its rate alone (measured in the same round) is its share. Two CPUs on one
//! core's two hyperthreads share its pipes: both near 0.5 in every round. Per pair the best
//! round's smaller share is printed where below 0.75, then the pairs per CPU.
//!
//! Usage: `cargo run --release -p roofline-kernels --example cpu_pairs -- [fma|amx] [ROUNDS] [MS]
//! [scale]` (defaults fma 3 3); `scale`: instead of pairs, the first k CPUs at once for k = 1, 2,
//! 4, … all, each thread's rate against its own alone.

use std::sync::Barrier;
use std::time::Instant;

use roofline_kernels::lowp::Unit;
use roofline_kernels::peak::{PeakIsa, PeakMode, PeakSpec};
use roofline_kernels::peak_mixed;
use roofline_kernels::runner::{allowed_cpus, pin_to_cpu};
use roofline_kernels::types::Precision;

#[derive(Clone, Copy)]
enum Loop {
    Fma(PeakSpec),
    Amx,
}

impl Loop {
    /// Operations per second of `rounds` rounds.
    fn rate(self, rounds: u64) -> f64 {
        let t = Instant::now();
        let ops = match self {
            Loop::Fma(s) => {
                s.run(rounds);
                s.flops_per_round() * rounds
            }
            Loop::Amx => {
                peak_mixed::run(Unit::AmxBf16, rounds);
                peak_mixed::ops_per_round(Unit::AmxBf16) * rounds
            }
        };
        ops as f64 / t.elapsed().as_secs_f64()
    }
}

/// Rate on `cpu` alone.
fn alone(l: Loop, cpu: usize, rounds: u64) -> f64 {
    std::thread::scope(|s| {
        s.spawn(move || {
            pin_to_cpu(cpu);
            l.rate(rounds / 4);
            l.rate(rounds)
        })
        .join()
        .unwrap_or(0.0)
    })
}

/// Rates on `a` and `b` at once.
fn together(l: Loop, a: usize, b: usize, rounds: u64) -> (f64, f64) {
    let bar = Barrier::new(2);
    std::thread::scope(|s| {
        let run = |cpu: usize| {
            let bar = &bar;
            move || {
                pin_to_cpu(cpu);
                l.rate(rounds / 4);
                bar.wait();
                l.rate(rounds)
            }
        };
        let ha = s.spawn(run(a));
        let hb = s.spawn(run(b));
        (ha.join().unwrap_or(0.0), hb.join().unwrap_or(0.0))
    })
}

/// Rates on each of `cpus` at once.
fn team(l: Loop, cpus: &[usize], rounds: u64) -> Vec<f64> {
    let bar = Barrier::new(cpus.len());
    std::thread::scope(|s| {
        let hs: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                let bar = &bar;
                s.spawn(move || {
                    pin_to_cpu(cpu);
                    l.rate(rounds / 4);
                    bar.wait();
                    l.rate(rounds)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or(0.0)).collect()
    })
}

/// The first k CPUs at once, k = 1, 2, 4, … all: the team's rate over k times the median rate
/// alone, and the team's slowest and median thread over their own rate alone.
fn scaling(l: Loop, cpus: &[usize], rounds: u64, rounds_n: usize) {
    println!("k  team/(k x alone)  slowest share  median share   (best of {rounds_n} rounds)");
    let mut ks: Vec<usize> = std::iter::successors(Some(1usize), |k| Some(k * 2))
        .take_while(|&k| k < cpus.len())
        .collect();
    ks.push(cpus.len());
    for k in ks {
        let mut best = (0.0f64, 0.0f64, 0.0f64);
        for _ in 0..rounds_n {
            let solo: Vec<f64> = cpus[..k].iter().map(|&c| alone(l, c, rounds)).collect();
            let t = team(l, &cpus[..k], rounds);
            let mut shares: Vec<f64> = t.iter().zip(&solo).map(|(a, b)| a / b).collect();
            shares.sort_by(f64::total_cmp);
            let mut s = solo.clone();
            s.sort_by(f64::total_cmp);
            let whole = t.iter().sum::<f64>() / (k as f64 * s[k / 2]);
            if whole > best.0 {
                best = (whole, shares[0], shares[k / 2]);
            }
        }
        println!("{k:<3}{:>10.2}{:>15.2}{:>14.2}", best.0, best.1, best.2);
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let kind = args.first().map(String::as_str).unwrap_or("fma");
    let rounds_n: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(3);
    let ms: f64 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3.0);
    let l = match kind {
        "amx" if Unit::AmxBf16.available() => Loop::Amx,
        "amx" => {
            eprintln!("no AMX on this CPU");
            std::process::exit(2);
        }
        _ => Loop::Fma(
            PeakSpec::all()
                .into_iter()
                .filter(|s| s.supported() && s.mode == PeakMode::Fma && s.precision == Precision::F64)
                .max_by_key(|s| s.isa)
                .unwrap_or(PeakSpec {
                    precision: Precision::F64,
                    isa: PeakIsa::Scalar,
                    mode: PeakMode::Fma,
                }),
        ),
    };
    let cpus = allowed_cpus();
    // Rounds for about `ms` ms alone on the first CPU.
    let probe = 10_000u64;
    let per_round = probe as f64 / alone(l, cpus[0], probe).max(1.0)
        * match l {
            Loop::Fma(s) => s.flops_per_round() as f64,
            Loop::Amx => peak_mixed::ops_per_round(Unit::AmxBf16) as f64,
        };
    let rounds = ((ms * 1e-3 / (per_round / probe as f64)) as u64).max(100);
    if args.get(3).map(String::as_str) == Some("scale") {
        scaling(l, &cpus, rounds, rounds_n);
        return;
    }
    println!("{kind} loop, {} cpus, {rounds_n} rounds of ~{ms} ms per pair", cpus.len());
    let n = cpus.len();
    let mut best = vec![vec![0.0f64; n]; n];
    for round in 0..rounds_n {
        let solo: Vec<f64> = cpus.iter().map(|&c| alone(l, c, rounds)).collect();
        for i in 0..n {
            for j in i + 1..n {
                let (a, b) = together(l, cpus[i], cpus[j], rounds);
                let share = (a / solo[i]).min(b / solo[j]);
                if round == 0 || share > best[i][j] {
                    best[i][j] = share;
                    best[j][i] = share;
                }
            }
        }
        let median_solo = {
            let mut s = solo.clone();
            s.sort_by(f64::total_cmp);
            s[s.len() / 2]
        };
        println!("round {round}: alone, median {:.1} G/s; slowest cpu {:?}", median_solo / 1e9, {
            let k = (0..n).min_by(|&a, &b| solo[a].total_cmp(&solo[b])).unwrap_or(0);
            (cpus[k], format!("{:.2}", solo[k] / median_solo))
        });
    }
    println!("pairs whose best round's smaller share is below 0.75 (cpu a, cpu b: share):");
    for i in 0..n {
        for j in i + 1..n {
            if best[i][j] < 0.75 {
                println!("  {:>3} {:>3}: {:.2}", cpus[i], cpus[j], best[i][j]);
            }
        }
    }
    let mut all: Vec<f64> = (0..n)
        .flat_map(|i| (i + 1..n).map(move |j| (i, j)))
        .map(|(i, j)| best[i][j])
        .collect();
    all.sort_by(f64::total_cmp);
    if !all.is_empty() {
        println!(
            "all {} pairs: min {:.2}, q1 {:.2}, median {:.2}, max {:.2}",
            all.len(),
            all[0],
            all[all.len() / 4],
            all[all.len() / 2],
            all[all.len() - 1]
        );
    }
}
