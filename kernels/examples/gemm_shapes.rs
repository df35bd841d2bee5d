//! dgemm (AVX-512) micro-tile and cache-blocking shapes, timed interleaved on one pinned core
//! beside the AVX-512 FMA peak loop: each round times every shape once (best of `reps` calls)
//! and the peak loop between them, so a shape's "% of peak" is a ratio of figures taken
//! seconds apart on the same core (a noisy guest moves both). Prints per shape the median
//! GFLOP/s over rounds, its spread (IQR/median) and the median % of the round's peak.
//!
//! Usage: `cargo run --release -p roofline-kernels --example gemm_shapes -- [N] [ROUNDS] [REPS] [CPU] [SHAPE...]`
//! with SHAPE = `MRxNR/kc/mc[/PF][@NC]` (NC: columns of B per packed panel, default 4096;
//! MR×NR one of 8x16, 8x24, 12x16, 14x16, 6x32, 10x16, 4x32;
//! PF, software prefetch in the micro-kernel: `a8`, `a16` (A panel 8 or 16 updates ahead),
//! `b8` (B panel), `a8b8`; for 8x16, and `a8` for 12x16; `eb`: 8x16 written out with embedded
//! broadcasts, `micro_zmm_8x16_eb`; `late4`, `late8`, `late16`: the same asking for the next C
//! tile in L1 4, 8 or 16 loop trips before the end, and B packed row by row (`Zmm8x16EbLate`,
//! Intel's production kernel at 16); `u4`: 4 rank-1 updates per loop trip, 8x16 and 12x16).
//! Defaults: 1024 9 3 0 and a grid around the production shape.

use roofline_kernels::check::Buf;
use roofline_kernels::gemm::{Args, Blocking, Generic, Zmm8x16Eb, Zmm8x16EbLate, gemm_pf, nest};
use roofline_kernels::peak::{PeakIsa, PeakMode, PeakSpec};
use roofline_kernels::rng::Rng;
use roofline_kernels::runner::{example_seconds, pin_to_cpu, quantile};
use roofline_kernels::{Precision, simd::F64x8};

type Run = unsafe fn(&Args<f64>);

macro_rules! shape_fn {
    ($name:ident, $mr:literal, $nb:literal) => {
        shape_fn!($name, $mr, $nb, 0, 0);
    };
    ($name:ident, $mr:literal, $nb:literal, $pfa:literal, $pfb:literal) => {
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn $name(a: &Args<f64>) {
            gemm_pf::<F64x8, $mr, $nb, $pfa, $pfb>(a)
        }
    };
}
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn t8x16eb(a: &Args<f64>) {
    // SAFETY: AVX-512F (this function's features); the nest passes 8·kc and 16·kc panels and
    // an 8 × 16 tile.
    nest::<F64x8, 8, 2, Zmm8x16Eb>(a)
}
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn t8x16late4(a: &Args<f64>) {
    nest::<F64x8, 8, 2, Zmm8x16EbLate<4>>(a)
}
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn t8x16late8(a: &Args<f64>) {
    nest::<F64x8, 8, 2, Zmm8x16EbLate<8>>(a)
}
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn t8x16late16(a: &Args<f64>) {
    nest::<F64x8, 8, 2, Zmm8x16EbLate<16>>(a)
}
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn t8x16u4(a: &Args<f64>) {
    nest::<F64x8, 8, 2, Generic<F64x8, 8, 2, 0, 0, 4>>(a)
}
#[target_feature(enable = "avx512f,avx2,fma")]
unsafe fn t12x16u4(a: &Args<f64>) {
    nest::<F64x8, 12, 2, Generic<F64x8, 12, 2, 0, 0, 4>>(a)
}
shape_fn!(t8x16a8, 8, 2, 8, 0);
shape_fn!(t8x16a16, 8, 2, 16, 0);
shape_fn!(t8x16b8, 8, 2, 0, 8);
shape_fn!(t8x16a8b8, 8, 2, 8, 8);
shape_fn!(t12x16a8, 12, 2, 8, 0);
shape_fn!(t8x16, 8, 2);
shape_fn!(t8x24, 8, 3);
shape_fn!(t12x16, 12, 2);
shape_fn!(t14x16, 14, 2);
shape_fn!(t10x16, 10, 2);
shape_fn!(t6x32, 6, 4);
shape_fn!(t4x32, 4, 4);

fn tile_fn(mr: usize, nr: usize, pf: &str) -> Option<Run> {
    Some(match (mr, nr, pf) {
        (8, 16, "a8") => t8x16a8,
        (8, 16, "eb") => t8x16eb,
        (8, 16, "late4") => t8x16late4,
        (8, 16, "late8") => t8x16late8,
        (8, 16, "late16") => t8x16late16,
        (8, 16, "u4") => t8x16u4,
        (12, 16, "u4") => t12x16u4,
        (8, 16, "a16") => t8x16a16,
        (8, 16, "b8") => t8x16b8,
        (8, 16, "a8b8") => t8x16a8b8,
        (12, 16, "a8") => t12x16a8,
        (_, _, "") => return tile_fn_plain(mr, nr),
        _ => return None,
    })
}

fn tile_fn_plain(mr: usize, nr: usize) -> Option<Run> {
    Some(match (mr, nr) {
        (8, 16) => t8x16,
        (8, 24) => t8x24,
        (12, 16) => t12x16,
        (14, 16) => t14x16,
        (10, 16) => t10x16,
        (6, 32) => t6x32,
        (4, 32) => t4x32,
        _ => return None,
    })
}

struct Shape {
    name: String,
    mr: usize,
    nr: usize,
    blk: Blocking,
    run: Run,
}

fn parse(s: &str) -> Shape {
    let bad = || -> ! {
        eprintln!("gemm_shapes: shape '{s}' is not MRxNR/kc/mc with a known tile");
        std::process::exit(2)
    };
    // `@NC`: columns of B per packed panel (default 4096, rounded to a multiple of NR).
    let (body, nc) = match s.split_once('@') {
        Some((b, nc)) => (b, nc.parse::<usize>().unwrap_or_else(|_| bad())),
        None => (s, 4096),
    };
    let parts: Vec<&str> = body.split('/').collect();
    if parts.len() != 3 && parts.len() != 4 {
        bad()
    }
    let pf = parts.get(3).copied().unwrap_or("");
    let (mr, nr) = parts[0].split_once('x').unwrap_or_else(|| bad());
    let num = |x: &str| x.parse::<usize>().unwrap_or_else(|_| bad());
    let (mr, nr, kc, mc) = (num(mr), num(nr), num(parts[1]), num(parts[2]));
    let run = tile_fn(mr, nr, pf).unwrap_or_else(|| bad());
    Shape {
        name: s.to_string(),
        mr,
        nr,
        blk: Blocking {
            mc: mc.div_ceil(mr) * mr,
            kc,
            nc: (nc / nr).max(1) * nr,
        },
        run,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (n, rounds, reps, cpu) = (num(0, 1024), num(1, 9), num(2, 3), num(3, 0));
    if !std::arch::is_x86_feature_detected!("avx512f") {
        eprintln!("gemm_shapes: this CPU has no AVX-512F");
        std::process::exit(2);
    }
    let default = [
        "8x16/256/144",
        "8x16/192/144",
        "8x16/128/144",
        "8x16/192/288",
        "8x24/128/144",
        "8x24/192/144",
        "12x16/192/144",
        "12x16/256/144",
        "12x16/128/192",
        "14x16/192/140",
        "10x16/192/140",
        "6x32/128/144",
        "4x32/192/144",
    ];
    let shapes: Vec<Shape> = if args.len() > 4 {
        args[4..].iter().map(|s| parse(s)).collect()
    } else {
        default.iter().map(|s| parse(s)).collect()
    };
    pin_to_cpu(cpu);
    let mut rng = Rng::new(7);
    let mut a = Buf::<f64>::new(n * n, 0).unwrap();
    a.fill_random(&mut rng, -1.0, 1.0);
    let mut b = Buf::<f64>::new(n * n, 0).unwrap();
    b.fill_random(&mut rng, -1.0, 1.0);
    let mut c = Buf::<f64>::new(n * n, 0).unwrap();
    let peak = PeakSpec {
        precision: Precision::F64,
        isa: PeakIsa::Avx512,
        mode: PeakMode::Fma,
    };
    let peak_rounds = 2_000_000u64;
    let peak_gflops = || {
        let t = example_seconds();
        std::hint::black_box(peak.run(peak_rounds));
        (peak.flops_per_round() * peak_rounds) as f64 / (example_seconds() - t) / 1e9
    };
    let (aptr, bptr, cptr) = (a.ptr(), b.ptr(), c.mut_ptr());
    let time_shape = |s: &Shape| -> f64 {
        let mut apack = Buf::<f64>::new(s.blk.mc.div_ceil(s.mr) * s.mr * s.blk.kc, 0).unwrap();
        let mut bpack = Buf::<f64>::new(s.blk.nc.div_ceil(s.nr) * s.nr * s.blk.kc, 0).unwrap();
        let mut ctile = Buf::<f64>::new(s.mr * s.nr, 0).unwrap();
        let args = Args {
            m: n,
            n,
            k: n,
            a: aptr,
            lda: n,
            b: bptr,
            ldb: n,
            c: cptr,
            ldc: n,
            apack: apack.mut_ptr(),
            bpack: bpack.mut_ptr(),
            ctile: ctile.mut_ptr(),
            blk: s.blk,
        };
        let mut best = f64::INFINITY;
        for r in 0..=reps {
            let t = example_seconds();
            // SAFETY: AVX-512F checked at start; the buffers are sized for the shape.
            unsafe { (s.run)(&args) };
            if r > 0 {
                best = best.min(example_seconds() - t);
            }
        }
        2.0 * (n as f64).powi(3) / best / 1e9
    };
    // Every shape must compute the product: against the first shape's C, within twice the
    // bound of any order of n multiply-adds, 2·γ_n·Σ|a·b| ≤ 2·γ_n·n (|a|, |b| ≤ 1).
    let u = f64::EPSILON / 2.0;
    let tol = 2.0 * (n as f64 * u / (1.0 - n as f64 * u)) * n as f64;
    let mut reference: Option<Vec<f64>> = None;
    for s in &shapes {
        time_shape(s);
        let got = c.as_slice().to_vec();
        match &reference {
            None => reference = Some(got),
            Some(r) => {
                let worst = r
                    .iter()
                    .zip(&got)
                    .map(|(x, y)| (x - y).abs())
                    .fold(0.0, |m, d| if d.is_nan() || d > m { d } else { m });
                if worst.is_nan() || worst > tol {
                    eprintln!(
                        "gemm_shapes: {} differs from {} by {worst:e} (tolerance {tol:e})",
                        s.name, shapes[0].name
                    );
                    std::process::exit(1);
                }
            }
        }
    }
    println!("every shape's C agrees with {}'s within {tol:.1e}", shapes[0].name);
    // Warm the core up before the first round.
    for _ in 0..3 {
        peak_gflops();
    }
    let mut gf = vec![Vec::new(); shapes.len()];
    let mut pct = vec![Vec::new(); shapes.len()];
    let mut peaks = Vec::new();
    for round in 0..rounds {
        // Rotate the order so no shape always follows the same one.
        for k in 0..shapes.len() {
            let i = (k + round) % shapes.len();
            let p0 = peak_gflops();
            let g = time_shape(&shapes[i]);
            let p1 = peak_gflops();
            let p = 0.5 * (p0 + p1);
            peaks.push(p);
            gf[i].push(g);
            pct[i].push(100.0 * g / p);
        }
    }
    println!(
        "n={n} rounds={rounds} reps={reps} cpu={cpu}; AVX-512 FMA peak median {:.1} GFLOP/s (min {:.1}, max {:.1})",
        quantile(&peaks, 0.5),
        quantile(&peaks, 0.0),
        quantile(&peaks, 1.0)
    );
    println!(
        "{:<16} {:>9} {:>8} {:>9} {:>9} {:>9}",
        "shape", "GFLOP/s", "spread", "%peak", "%pk min", "%pk max"
    );
    for (i, s) in shapes.iter().enumerate() {
        let med = quantile(&gf[i], 0.5);
        println!(
            "{:<16} {:>9.1} {:>7.1}% {:>8.1}% {:>8.1}% {:>8.1}%",
            s.name,
            med,
            100.0 * (quantile(&gf[i], 0.75) - quantile(&gf[i], 0.25)) / med,
            quantile(&pct[i], 0.5),
            quantile(&pct[i], 0.0),
            quantile(&pct[i], 1.0)
        );
    }
}
