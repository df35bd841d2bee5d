//! Is an AMX peak below the platform rate a lower clock under AMX, or fewer tile operations per
//! cycle? Times on one pinned core, interleaved over rounds:
//!
//! - `imul`: a chain of 96 dependent `imul` (288 cycles) per iteration: the clock alone;
//! - `imul+amx`: the same chain with 4 independent `tdpbf16ps` beside it (64 cycles at the
//!   rate of one per 16 cycles): while the tile unit keeps up, the chain is the critical path,
//!   so this is the clock under AMX;
//! - `amx`: the 4 tile products alone (the peak loop of `roofline ceilings`): bf16 flops per
//!   cycle at the clock under AMX, against the platform's 1024.
//!
//! `knee`: the same chain with k `imul` after each of the 4 tile products, for k from 0 to 32.
//! The loop's time per product is max(16/r, 3k) cycles, r the tile unit's share of its rate: flat
//! while the tile unit is the critical path, then 3k/f once the chain is. Just past the knee the
//! tile unit is busy nearly all the time and the chain still times the clock, so the clock under
//! full tile load (f) and the unit's rate per cycle (r) come apart, which the chain at 22 % tile
//! duty above cannot do.
//!
//! `hog S`: the tile loop alone for S seconds (to load other vCPUs while one is timed).
//!
//! `variants`: the tile products in other issue patterns (sources reloaded, a fence per round,
//! `imul` spacing), interleaved over rounds.
//!
//! Usage: `cargo run --release -p roofline-kernels --example amx_clock -- [ROUNDS] [CPU] [knee | variants | hog S]`

use std::arch::asm;
use std::time::Instant;

use roofline_kernels::lowp::{TileConfig, Unit, load_tile_config, release_tiles};
use roofline_kernels::runner::pin_to_cpu;

#[repr(C, align(64))]
struct Zeros([u8; 1024]);
static ZEROS: Zeros = Zeros([0; 1024]);

/// Configure 16 × 64-byte tiles: accumulators tmm0–3 zeroed, sources tmm4–7 loaded from
/// `ZEROS`.
///
/// # Safety
/// AMX available and permitted (checked in main).
unsafe fn prepare_tiles() {
    let cfg = TileConfig::uniform(16, 64);
    let z = ZEROS.0.as_ptr();
    // SAFETY: the caller checked AMX; the tile loads read the 1 KiB ZEROS at stride 64.
    unsafe {
        load_tile_config(&cfg);
        asm!(
            "tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3",
            "tileloadd tmm4, [{z} + {s}*1]", "tileloadd tmm5, [{z} + {s}*1]",
            "tileloadd tmm6, [{z} + {s}*1]", "tileloadd tmm7, [{z} + {s}*1]",
            z = in(reg) z, s = in(reg) 64usize, options(nostack, readonly)
        );
    }
}

/// Seconds for `iters` iterations of the loop chosen by `what` (0 imul, 1 imul+amx, 2 amx).
fn time(what: u32, iters: u64) -> f64 {
    let t = Instant::now();
    // SAFETY: AMX available and permitted (checked in main); tile loads read the 1 KiB ZEROS
    // at stride 64; register-only otherwise; iters ≥ 1.
    unsafe {
        prepare_tiles();
        match what {
            0 => asm!("2:", ".rept 96", "imul {x}, {x}", ".endr", "dec {n}", "jnz 2b",
                x = inout(reg) 3u64 => _, n = inout(reg) iters => _, options(nostack, nomem)),
            1 => asm!("2:",
                "tdpbf16ps tmm0, tmm4, tmm6", ".rept 24", "imul {x}, {x}", ".endr",
                "tdpbf16ps tmm1, tmm4, tmm7", ".rept 24", "imul {x}, {x}", ".endr",
                "tdpbf16ps tmm2, tmm5, tmm6", ".rept 24", "imul {x}, {x}", ".endr",
                "tdpbf16ps tmm3, tmm5, tmm7", ".rept 24", "imul {x}, {x}", ".endr",
                "dec {n}", "jnz 2b",
                x = inout(reg) 3u64 => _, n = inout(reg) iters => _, options(nostack, nomem)),
            _ => asm!("2:",
                "tdpbf16ps tmm0, tmm4, tmm6", "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6", "tdpbf16ps tmm3, tmm5, tmm7",
                "dec {n}", "jnz 2b",
                n = inout(reg) iters => _, options(nostack, nomem)),
        }
        release_tiles();
    }
    t.elapsed().as_secs_f64()
}

/// Seconds for `iters` iterations of 4 tile products, each followed by `K` dependent `imul`.
fn time_knee<const K: usize>(iters: u64) -> f64 {
    let t = Instant::now();
    // SAFETY: as in `time`: AMX available and permitted (checked in main); tile loads read the
    // 1 KiB ZEROS at stride 64; register-only otherwise; iters ≥ 1.
    unsafe {
        prepare_tiles();
        asm!("2:",
            "tdpbf16ps tmm0, tmm4, tmm6", ".rept {k}", "imul {x}, {x}", ".endr",
            "tdpbf16ps tmm1, tmm4, tmm7", ".rept {k}", "imul {x}, {x}", ".endr",
            "tdpbf16ps tmm2, tmm5, tmm6", ".rept {k}", "imul {x}, {x}", ".endr",
            "tdpbf16ps tmm3, tmm5, tmm7", ".rept {k}", "imul {x}, {x}", ".endr",
            "dec {n}", "jnz 2b",
            k = const K, x = inout(reg) 3u64 => _, n = inout(reg) iters => _,
            options(nostack, nomem));
        release_tiles();
    }
    t.elapsed().as_secs_f64()
}

const KNEE_KS: [usize; 15] = [0, 2, 4, 6, 8, 9, 10, 11, 12, 13, 14, 16, 20, 24, 32];

fn time_knee_k(k: usize, iters: u64) -> f64 {
    match k {
        0 => time_knee::<0>(iters),
        2 => time_knee::<2>(iters),
        4 => time_knee::<4>(iters),
        6 => time_knee::<6>(iters),
        8 => time_knee::<8>(iters),
        9 => time_knee::<9>(iters),
        10 => time_knee::<10>(iters),
        11 => time_knee::<11>(iters),
        12 => time_knee::<12>(iters),
        13 => time_knee::<13>(iters),
        14 => time_knee::<14>(iters),
        16 => time_knee::<16>(iters),
        20 => time_knee::<20>(iters),
        24 => time_knee::<24>(iters),
        _ => time_knee::<32>(iters),
    }
}

/// The knee sweep on the pinned CPU: per k, the median ns per tile product, the clock the chain
/// implies (3k cycles per product over that time; below the knee it under-reads) and the bf16
/// flop per cycle of the imul-alone clock (the unit's rate if the clock held).
fn knee(rounds: usize, cpu: usize) {
    let iters = 400_000u64;
    for &k in &KNEE_KS {
        time_knee_k(k, iters / 10);
    }
    let mut ns: Vec<Vec<f64>> = vec![vec![]; KNEE_KS.len()];
    let mut int_ghz = vec![];
    for _ in 0..rounds {
        int_ghz.push((iters * 288) as f64 / time(0, iters) / 1e9);
        for (i, &k) in KNEE_KS.iter().enumerate() {
            ns[i].push(time_knee_k(k, iters) / (iters * 4) as f64 * 1e9);
        }
    }
    let f_int = median(&mut int_ghz);
    let mut line = format!("cpu {cpu} knee: imul alone {f_int:.3} GHz;");
    for (i, &k) in KNEE_KS.iter().enumerate() {
        let t = median(&mut ns[i]);
        let f = 3.0 * k as f64 / t;
        let fpc = 16384.0 / (t * f_int);
        line += &format!(" k{k} {t:.2}ns {f:.2}GHz {fpc:.0}f/c;");
    }
    println!("{line}");
}

/// The tile loop alone for `seconds`: load for other measurements.
fn hog(seconds: f64) {
    let t = Instant::now();
    while t.elapsed().as_secs_f64() < seconds {
        time(2, 100_000);
    }
}

/// Seconds for `iters` rounds of four tile products in the issue pattern `v`: 1 the sources
/// reloaded from L1 before each product (as a GEMM's inner loop), 2 the four sources reloaded
/// once per round, else back to back with an `lfence` per round (back to back alone: `time`).
fn time_variant(v: u32, iters: u64) -> f64 {
    let z = ZEROS.0.as_ptr();
    let t = Instant::now();
    // SAFETY: as in `time`; the tile loads read the 1 KiB ZEROS at stride 64.
    unsafe {
        prepare_tiles();
        match v {
            1 => asm!("2:",
                "tileloadd tmm4, [{z} + {s}*1]", "tdpbf16ps tmm0, tmm4, tmm6",
                "tileloadd tmm7, [{z} + {s}*1]", "tdpbf16ps tmm1, tmm4, tmm7",
                "tileloadd tmm5, [{z} + {s}*1]", "tdpbf16ps tmm2, tmm5, tmm6",
                "tileloadd tmm6, [{z} + {s}*1]", "tdpbf16ps tmm3, tmm5, tmm7",
                "dec {n}", "jnz 2b",
                z = in(reg) z, s = in(reg) 64usize, n = inout(reg) iters => _, options(nostack, readonly)),
            2 => asm!("2:",
                "tileloadd tmm4, [{z} + {s}*1]", "tileloadd tmm5, [{z} + {s}*1]",
                "tileloadd tmm6, [{z} + {s}*1]", "tileloadd tmm7, [{z} + {s}*1]",
                "tdpbf16ps tmm0, tmm4, tmm6", "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6", "tdpbf16ps tmm3, tmm5, tmm7",
                "dec {n}", "jnz 2b",
                z = in(reg) z, s = in(reg) 64usize, n = inout(reg) iters => _, options(nostack, readonly)),
            _ => asm!("2:",
                "tdpbf16ps tmm0, tmm4, tmm6", "tdpbf16ps tmm1, tmm4, tmm7",
                "tdpbf16ps tmm2, tmm5, tmm6", "tdpbf16ps tmm3, tmm5, tmm7",
                "lfence", "dec {n}", "jnz 2b",
                n = inout(reg) iters => _, options(nostack, nomem)),
        }
        release_tiles();
    }
    t.elapsed().as_secs_f64()
}

/// Issue patterns interleaved over rounds: median bf16 flop per cycle of the imul-alone clock.
fn variants(rounds: usize, cpu: usize) {
    let iters = 400_000u64;
    let names = ["back-to-back", "load+tdp", "4load,4tdp", "lfence/round", "imul5", "imul6"];
    let mut fpc: Vec<Vec<f64>> = vec![vec![]; names.len()];
    let mut int_ghz = vec![];
    for _ in 0..rounds {
        int_ghz.push((iters * 288) as f64 / time(0, iters) / 1e9);
        for (i, row) in fpc.iter_mut().enumerate() {
            let t = match i {
                0 => time(2, iters),
                1..=3 => time_variant(i as u32, iters),
                4 => time_knee::<5>(iters),
                _ => time_knee::<6>(iters),
            };
            row.push(t);
        }
    }
    let f = median(&mut int_ghz);
    let mut line = format!("cpu {cpu} variants: imul alone {f:.3} GHz;");
    for (name, row) in names.iter().zip(fpc.iter_mut()) {
        let t = median(row);
        line += &format!(" {name} {:.0}", (iters * 4 * 16384) as f64 / t / (f * 1e9));
    }
    println!("{line} (bf16 flop/cycle)");
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let rounds: usize = args.first().and_then(|s| s.parse().ok()).unwrap_or(15);
    let cpu: usize = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    if !Unit::AmxBf16.available() {
        eprintln!("amx_clock: {}", Unit::AmxBf16.why_unavailable());
        std::process::exit(2);
    }
    pin_to_cpu(cpu);
    match args.get(2).map(String::as_str) {
        Some("knee") => return knee(rounds, cpu),
        Some("variants") => return variants(rounds, cpu),
        Some("hog") => return hog(args.get(3).and_then(|s| s.parse().ok()).unwrap_or(10.0)),
        _ => {}
    }
    let iters = 200_000u64;
    for w in 0..3 {
        time(w, iters / 10);
    }
    let (mut f_int, mut f_amx, mut fpc, mut beside_fpc) = (vec![], vec![], vec![], vec![]);
    for _ in 0..rounds {
        let t_int = time(0, iters);
        let t_beside = time(1, iters);
        let t_amx = time(2, iters);
        let ghz_int = (iters * 288) as f64 / t_int / 1e9;
        let ghz_amx = (iters * 288) as f64 / t_beside / 1e9;
        f_int.push(ghz_int);
        f_amx.push(ghz_amx);
        let flops = (iters * 4 * 16 * 16 * 32 * 2) as f64;
        fpc.push(flops / t_amx / (ghz_amx * 1e9));
        beside_fpc.push(flops / t_beside / (ghz_amx * 1e9));
    }
    let (lo, hi) = (
        fpc.iter().copied().fold(f64::INFINITY, f64::min),
        fpc.iter().copied().fold(0.0, f64::max),
    );
    println!(
        "cpu {cpu}, {rounds} rounds: clock {:.3} GHz (imul alone), {:.3} GHz (imul beside 4 tdpbf16ps); \
         tile loop alone {:.0} bf16 flop/cycle at the clock under AMX (min {lo:.0}, max {hi:.0}; platform 1024); \
         the loop with imul beside {:.0} flop/cycle (a value near 65536/288 = 228 means the imul chain was the critical path)",
        median(&mut f_int),
        median(&mut f_amx),
        median(&mut fpc),
        median(&mut beside_fpc)
    );
}
