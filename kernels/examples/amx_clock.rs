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
//! Usage: `cargo run --release -p roofline-kernels --example amx_clock -- [ROUNDS] [CPU]`

use std::arch::asm;
use std::time::Instant;

use roofline_kernels::lowp::{TileConfig, Unit, load_tile_config, release_tiles};
use roofline_kernels::runner::pin_to_cpu;

#[repr(C, align(64))]
struct Zeros([u8; 1024]);
static ZEROS: Zeros = Zeros([0; 1024]);

/// Seconds for `iters` iterations of the loop chosen by `what` (0 imul, 1 imul+amx, 2 amx).
fn time(what: u32, iters: u64) -> f64 {
    let cfg = TileConfig::uniform(16, 64);
    let z = ZEROS.0.as_ptr();
    let t = Instant::now();
    // SAFETY: AMX available and permitted (checked in main); tile loads read the 1 KiB ZEROS
    // at stride 64; register-only otherwise; iters ≥ 1.
    unsafe {
        load_tile_config(&cfg);
        asm!(
            "tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3",
            "tileloadd tmm4, [{z} + {s}*1]", "tileloadd tmm5, [{z} + {s}*1]",
            "tileloadd tmm6, [{z} + {s}*1]", "tileloadd tmm7, [{z} + {s}*1]",
            z = in(reg) z, s = in(reg) 64usize, options(nostack, readonly)
        );
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
