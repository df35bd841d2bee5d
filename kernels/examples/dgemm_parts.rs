//! Where the AVX-512 dgemm (the 8 × 16 micro-kernel with embedded broadcasts) loses against the
//! FMA peak loop, part by part, timed interleaved with the peak loop on one pinned core:
//!
//! - `micro`: the micro-kernel alone, its A and B micro-panels and C tile in L1;
//! - `a-from-l2`: one B micro-panel against every A micro-panel of an A block (mc × kc) in L2,
//!   C a dense mc × 16 block (the B micro-panel's reuse);
//! - `macro`: the macro-kernel over a packed B panel (kc × n) and A block, C rows n apart in an
//!   n × n matrix (C's traffic and the B panel from L2/L3);
//! - `gemm`: the whole product C = A·B, n × n, packing included;
//! - `packing`: the nest's packing of A and B alone (its "GFLOP/s" is 2n³ over its time).
//!
//! Usage: `cargo run --release -p roofline-kernels --example dgemm_parts -- [N] [ROUNDS] [CPU] [KC]`
//! (defaults 1024 9 0 256). Environment: `DP_NC` / `DP_LDC`, the `macro` part's B panel width
//! and C row stride (default n); `DP_PACK`, the `packing` part without B (1), without A (2), B
//! row by row (4); `ROOFLINE_THREAD_CPU_TIME=1` times by the thread's CPU time (a shared build
//! machine). Kernels: `8x16eb` (`Zmm8x16Eb`) and `late16` (Intel's, `Zmm8x16EbLate<16>`).
//! Prints per kernel and part the median GFLOP/s and the median % of
//! the peak loop's figure measured just before and after it.

use roofline_kernels::check::Buf;
use roofline_kernels::gemm::{
    Args, Block, Blocking, Micro, Zmm8x16Eb, Zmm8x16EbLate, macro_kernel, nest, pack_a_8_zmm, pack_b, pack_b_by_rows,
};
use roofline_kernels::peak::{PeakIsa, PeakMode, PeakSpec};
use roofline_kernels::rng::Rng;
use roofline_kernels::runner::{example_seconds, pin_to_cpu, quantile};
use roofline_kernels::{Precision, simd::F64x8};

type MicroFn = unsafe fn(usize, *const f64, *const f64, *mut f64, usize, bool);
type MacroFn = unsafe fn(&Block<f64>, *const f64, *const f64, *mut f64);
type GemmFn = unsafe fn(&Args<f64>);

struct Kernel {
    name: &'static str,
    mr: usize,
    micro: MicroFn,
    macro_: MacroFn,
    gemm: GemmFn,
}

macro_rules! kernel {
    ($name:literal, $m:ty, $mr:literal) => {{
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn micro(kc: usize, ap: *const f64, bp: *const f64, c: *mut f64, ldc: usize, first: bool) {
            // SAFETY: forwarded (AVX-512F checked in main; panels sized by the caller).
            unsafe { <$m as Micro<f64>>::run(kc, ap, bp, c, ldc, first, c) }
        }
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn macro_(b: &Block<f64>, ap: *const f64, bp: *const f64, ct: *mut f64) {
            // SAFETY: forwarded (AVX-512F checked in main; panels sized by the caller).
            unsafe { macro_kernel::<F64x8, $mr, 2, $m>(b, ap, bp, ct) }
        }
        #[target_feature(enable = "avx512f,avx2,fma")]
        unsafe fn gemm(a: &Args<f64>) {
            nest::<F64x8, $mr, 2, $m>(a)
        }
        Kernel {
            name: $name,
            mr: $mr,
            micro,
            macro_,
            gemm,
        }
    }};
}

const PARTS: [&str; 5] = ["micro", "a-from-l2", "macro", "gemm", "packing"];

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, d: usize| args.get(i).and_then(|s| s.parse().ok()).unwrap_or(d);
    let (n, rounds, cpu, kc) = (num(0, 1024), num(1, 9), num(2, 0), num(3, 256));
    if !std::arch::is_x86_feature_detected!("avx512f") {
        eprintln!("dgemm_parts: this CPU has no AVX-512F");
        std::process::exit(2);
    }
    pin_to_cpu(cpu);
    let kernels = [kernel!("8x16eb", Zmm8x16Eb, 8), kernel!("late16", Zmm8x16EbLate<16>, 8)];
    let mut rng = Rng::new(11);
    let mut buf = |len: usize| {
        let mut b = Buf::<f64>::new(len, 0).unwrap();
        b.fill_random(&mut rng, -1.0, 1.0);
        b
    };
    let (a, b) = (buf(n * n), buf(n * n));
    // Knobs of the `macro` part (env): DP_NC columns of its B panel (default n), DP_LDC its C
    // row stride (default n).
    let knob = |k: &str, d: usize| std::env::var(k).ok().and_then(|v| v.parse().ok()).unwrap_or(d);
    let (macro_nc, macro_ldc) = (knob("DP_NC", n).min(n), knob("DP_LDC", n).max(n));
    let mut c = buf(n * macro_ldc);
    // DP_PACK (the `packing` part): 1 leaves B out, 2 leaves A out, 4 packs B row by row.
    let pack_knob = knob("DP_PACK", 0);
    let mut apack = buf(320 * kc);
    let mut bpack = buf(n.div_ceil(16) * 16 * kc);
    let mut csmall = buf(320 * 16);
    let mut ctile = buf(16 * 16);
    let peak = PeakSpec {
        precision: Precision::F64,
        isa: PeakIsa::Avx512,
        mode: PeakMode::Fma,
    };
    let peak_gflops = || {
        let rounds = 2_000_000u64;
        let t = example_seconds();
        std::hint::black_box(peak.run(rounds));
        (peak.flops_per_round() * rounds) as f64 / (example_seconds() - t) / 1e9
    };
    // SAFETY (all parts): AVX-512F checked above; apack holds 320·kc ≥ roundup(mc, MR)·kc,
    // bpack roundup(n, 16)·kc, csmall 320 rows of 16, C n rows of n, ctile 16·16.
    let (ap, bp, cp) = (apack.mut_ptr(), bpack.mut_ptr(), c.mut_ptr());
    let (cs, ct, ar, br) = (csmall.mut_ptr(), ctile.mut_ptr(), a.ptr(), b.ptr());
    let time_part = |k: &Kernel, part: usize| -> f64 {
        let mc = (144 / k.mr).max(1) * k.mr;
        let tile_flops = (2 * k.mr * 16 * kc) as f64;
        let best_of = |f: &mut dyn FnMut() -> f64| (0..4).map(|_| f()).skip(1).fold(0.0, f64::max);
        let mut run = || -> f64 {
            let t = example_seconds();
            let flops = match part {
                0 => {
                    for _ in 0..2000 {
                        unsafe { (k.micro)(kc, ap, bp, cs, 16, false) };
                    }
                    2000.0 * tile_flops
                }
                1 => {
                    for _ in 0..100 {
                        for ir in (0..mc).step_by(k.mr) {
                            unsafe { (k.micro)(kc, ap.add(ir * kc), bp, cs.add(ir * 16), 16, false) };
                        }
                    }
                    100.0 * (mc / k.mr) as f64 * tile_flops
                }
                2 => {
                    let blocks = n / mc;
                    for jc in (0..n).step_by(macro_nc) {
                        for ic in 0..blocks {
                            let blk = Block {
                                mc,
                                kc,
                                nc: macro_nc.min(n - jc),
                                c: unsafe { cp.add(ic * mc * macro_ldc + jc) },
                                ldc: macro_ldc,
                                first: false,
                            };
                            unsafe { (k.macro_)(&blk, ap, bp, ct) };
                        }
                    }
                    (blocks * mc * n * kc * 2) as f64
                }
                4 => {
                    // Only the nest's packing: the rate is 2n³ over its time, so gemm's rate
                    // over this one is the share of the product's time that packing takes.
                    for pc in (0..n).step_by(kc) {
                        if pack_knob & 4 != 0 {
                            unsafe { pack_b_by_rows::<F64x8, 2>(kc.min(n - pc), n, br.add(pc * n), n, bp) };
                        } else if pack_knob & 1 == 0 {
                            unsafe { pack_b::<F64x8, 2>(kc.min(n - pc), n, br.add(pc * n), n, bp) };
                        }
                        if pack_knob & 2 != 0 {
                            continue;
                        }
                        for ic in (0..n).step_by(mc) {
                            let (rows, depth) = (mc.min(n - ic), kc.min(n - pc));
                            unsafe { pack_a_8_zmm(rows, depth, ar.add(ic * n + pc), n, ap) }
                        }
                    }
                    2.0 * (n as f64).powi(3)
                }
                _ => {
                    let args = Args {
                        m: n,
                        n,
                        k: n,
                        a: ar,
                        lda: n,
                        b: br,
                        ldb: n,
                        c: cp,
                        ldc: n,
                        apack: ap,
                        bpack: bp,
                        ctile: ct,
                        blk: Blocking {
                            mc,
                            kc,
                            nc: 4096 / 16 * 16,
                        },
                    };
                    unsafe { (k.gemm)(&args) };
                    2.0 * (n as f64).powi(3)
                }
            };
            flops / (example_seconds() - t) / 1e9
        };
        if part == 2 {
            // The macro-kernel reads packed panels: pack them as the nest would.
            unsafe {
                pack_b::<F64x8, 2>(kc, n, br, n, bp);
                pack_a_8_zmm(mc, kc, ar, n, ap)
            }
        }
        best_of(&mut run)
    };
    // The product must be right: 256 sampled entries against their sums in f64, within
    // 2·γ_n·n (|a|, |b| ≤ 1; twice the bound of any order of n multiply-adds).
    let u = f64::EPSILON / 2.0;
    let tol = 2.0 * (n as f64 * u / (1.0 - n as f64 * u)) * n as f64;
    for k in &kernels {
        time_part(k, 3);
        // SAFETY: A, B and C hold n·n elements and no kernel runs now.
        let (av, bv, cv) = unsafe {
            (
                std::slice::from_raw_parts(ar, n * n),
                std::slice::from_raw_parts(br, n * n),
                std::slice::from_raw_parts(cp, n * n),
            )
        };
        let mut pick = Rng::new(5);
        for _ in 0..256 {
            let (i, j) = (pick.below(n), pick.below(n));
            let want: f64 = (0..n).map(|p| av[i * n + p] * bv[p * n + j]).sum();
            let err = (cv[i * n + j] - want).abs();
            if err.is_nan() || err > tol {
                eprintln!("dgemm_parts: {} C[{i}][{j}] is off by {err:e} (tolerance {tol:e})", k.name);
                std::process::exit(1);
            }
        }
    }
    println!("every kernel's C: 256 sampled entries within {tol:.1e}");
    for _ in 0..3 {
        peak_gflops();
    }
    let cells = kernels.len() * PARTS.len();
    let (mut gf, mut pct, mut peaks) = (vec![Vec::new(); cells], vec![Vec::new(); cells], Vec::new());
    for round in 0..rounds {
        for j in 0..cells {
            let i = (j + round) % cells;
            let p0 = peak_gflops();
            let g = time_part(&kernels[i / PARTS.len()], i % PARTS.len());
            let p = 0.5 * (p0 + peak_gflops());
            peaks.push(p);
            gf[i].push(g);
            pct[i].push(100.0 * g / p);
        }
    }
    println!(
        "n={n} kc={kc} rounds={rounds} cpu={cpu}; AVX-512 FMA peak median {:.1} GFLOP/s ({:.1}-{:.1})",
        quantile(&peaks, 0.5),
        quantile(&peaks, 0.0),
        quantile(&peaks, 1.0)
    );
    println!(
        "{:<8} {:<10} {:>9} {:>8} {:>8} {:>8}",
        "kernel", "part", "GFLOP/s", "%peak", "min", "max"
    );
    for i in 0..cells {
        println!(
            "{:<8} {:<10} {:>9.1} {:>7.1}% {:>7.1}% {:>7.1}%",
            kernels[i / PARTS.len()].name,
            PARTS[i % PARTS.len()],
            quantile(&gf[i], 0.5),
            quantile(&pct[i], 0.5),
            quantile(&pct[i], 0.0),
            quantile(&pct[i], 1.0)
        );
    }
}
