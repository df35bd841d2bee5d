//! Measured clocks: dependent chains of known latency timed against the wall clock give
//! cycles per second. Two integer chains of different latency (imul r64: 3 cycles, xor r64,r64:
//! 1 cycle, the same on Intel Sandy Bridge … Granite Rapids and AMD Zen 1 … 5) must agree; FP
//! chains per vector width give the clock while that width runs: the `imul` chain again, with
//! independent FP instructions of the width beside it (the FP unit and any frequency licence it
//! carries busy, the imul chain the critical path), so no FP latency is assumed; the FP chain
//! alone at the platform table's latency gives the FP latency against that clock.
//! `add reg, imm` is avoided: Golden Cove and later can fold it at rename.
//! Independent FMA streams give throughput (FMAs per cycle, 1→N thread scaling).

use std::arch::asm;
use std::sync::Barrier;
use std::time::Instant;

/// Instructions per loop iteration in every kernel below.
pub const BLOCK: u64 = 48;

/// The kernels that can be timed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kernel {
    /// Dependent `imul r64, r64` (3 cycles).
    Imul,
    /// Dependent `xor r64, r64` with a non-zero source (1 cycle).
    Xor,
    /// Dependent FP chain at a width (64 = scalar): FMA where the CPU has it, else add.
    FpChain { width: u32, fma: bool },
    /// 12 independent FP streams at a width (FMA or add): throughput.
    FpStreams { width: u32, fma: bool },
    /// The `imul` chain (3 cycles a link, BLOCK links an iteration) with BLOCK independent FP
    /// instructions of a width (FMA or add, over 12 accumulators) beside it: the clock while
    /// that width runs, whatever the FP latency.
    ImulBeside { width: u32, fma: bool },
}

impl Kernel {
    /// Whether this CPU can run it (checked before any asm runs).
    pub fn supported(self) -> bool {
        match self {
            Kernel::Imul | Kernel::Xor => true,
            Kernel::FpChain { width, fma } | Kernel::FpStreams { width, fma } | Kernel::ImulBeside { width, fma } => {
                let base = match width {
                    64 | 128 => std::arch::is_x86_feature_detected!("sse2"),
                    256 => std::arch::is_x86_feature_detected!("avx"),
                    512 => std::arch::is_x86_feature_detected!("avx512f"),
                    _ => false,
                };
                base && (!fma || std::arch::is_x86_feature_detected!("fma")) && !(matches!(self, Kernel::FpStreams { width: 64, .. }))
            }
        }
    }

    /// Instructions per loop iteration.
    pub fn ops_per_iter(self) -> u64 {
        match self {
            Kernel::Xor => 8 * BLOCK,
            _ => BLOCK,
        }
    }

    /// Flops per instruction (double precision), for throughput kernels.
    pub fn flops_per_op(self) -> f64 {
        match self {
            Kernel::FpStreams { width, fma } | Kernel::FpChain { width, fma } => (width.max(64) / 64) as f64 * if fma { 2.0 } else { 1.0 },
            _ => 0.0,
        }
    }

    /// Run `iters` iterations of `ops_per_iter()` instructions. `false` if unsupported here.
    pub fn run(self, iters: u64) -> bool {
        if !self.supported() || iters == 0 {
            return false;
        }
        // SAFETY: `supported()` checked the CPU features each kernel's instructions need.
        unsafe {
            match self {
                Kernel::Imul => imul_chain(iters),
                Kernel::Xor => xor_chain(iters),
                Kernel::FpChain { width: 64, fma: true } => fma_chain_sd(iters),
                Kernel::FpChain { width: 64, fma: false } => add_chain_sd(iters),
                Kernel::FpChain { width: 128, fma: true } => fma_chain_128(iters),
                Kernel::FpChain { width: 128, fma: false } => add_chain_128(iters),
                Kernel::FpChain { width: 256, fma: true } => fma_chain_256(iters),
                Kernel::FpChain { width: 256, fma: false } => add_chain_256(iters),
                Kernel::FpChain { width: 512, .. } => fma_chain_512(iters),
                Kernel::FpStreams { width: 128, fma: true } => fma_streams_128(iters),
                Kernel::FpStreams { width: 128, fma: false } => add_streams_128(iters),
                Kernel::FpStreams { width: 256, fma: true } => fma_streams_256(iters),
                Kernel::FpStreams { width: 256, fma: false } => add_streams_256(iters),
                Kernel::FpStreams { width: 512, .. } => fma_streams_512(iters),
                Kernel::ImulBeside { width: 64, fma: true } => imul_beside_fma_sd(iters),
                Kernel::ImulBeside { width: 64, fma: false } => imul_beside_add_sd(iters),
                Kernel::ImulBeside { width: 128, fma: true } => imul_beside_fma_128(iters),
                Kernel::ImulBeside { width: 128, fma: false } => imul_beside_add_128(iters),
                Kernel::ImulBeside { width: 256, fma: true } => imul_beside_fma_256(iters),
                Kernel::ImulBeside { width: 256, fma: false } => imul_beside_add_256(iters),
                Kernel::ImulBeside { width: 512, .. } => imul_beside_fma_512(iters),
                _ => return false,
            }
        }
        true
    }

    /// Seconds for `iters` iterations (best of `reps`, the least disturbed).
    pub fn time(self, iters: u64, reps: u32) -> Option<f64> {
        let mut best = f64::INFINITY;
        for _ in 0..reps.max(1) {
            let t0 = Instant::now();
            if !self.run(iters) {
                return None;
            }
            best = best.min(t0.elapsed().as_secs_f64());
        }
        (best.is_finite() && best > 0.0).then_some(best)
    }

    /// Iterations that take about `secs` (a short trial run scales it).
    pub fn calibrate(self, secs: f64) -> Option<u64> {
        let mut iters = 1000u64;
        loop {
            let t = self.time(iters, 3)?;
            if t > 5e-4 || iters > 1 << 34 {
                return Some(((iters as f64 * secs / t).ceil() as u64).max(1));
            }
            iters *= 8;
        }
    }
}

/// GHz of a dependent chain with `latency` cycles per instruction, timed over `iters`.
pub fn chain_ghz(k: Kernel, latency: u32, iters: u64, reps: u32) -> Option<f64> {
    let t = k.time(iters, reps)?;
    Some((iters * k.ops_per_iter() * latency as u64) as f64 / t / 1e9)
}

/// Instructions per second of an independent-stream kernel.
pub fn streams_ops_per_sec(k: Kernel, iters: u64, reps: u32) -> Option<f64> {
    let t = k.time(iters, reps)?;
    Some((iters * k.ops_per_iter()) as f64 / t)
}

/// CPUs this process may run on (sched_getaffinity), the main job's chosen CPU first.
pub fn allowed_cpus() -> Vec<usize> {
    roofline_kernels::cpus::allowed_cpus()
}

/// Pin the calling thread to one CPU (best effort: a failure only makes timings noisier).
pub fn pin_to(cpu: usize) -> bool {
    use nix::sched::{CpuSet, sched_setaffinity};
    use nix::unistd::Pid;
    let mut set = CpuSet::new();
    set.set(cpu).is_ok() && sched_setaffinity(Pid::from_raw(0), &set).is_ok()
}

/// Run `f` on one thread pinned to each CPU in `cpus`, all started together; results in order.
pub fn on_cpus<T: Send>(cpus: &[usize], f: impl Fn() -> T + Sync) -> Vec<T> {
    let barrier = Barrier::new(cpus.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = cpus
            .iter()
            .map(|&cpu| {
                let (f, barrier) = (&f, &barrier);
                s.spawn(move || {
                    pin_to(cpu);
                    barrier.wait();
                    f()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("measurement thread panicked"))
            .collect()
    })
}

// ---- the kernels -------------------------------------------------------------------------
// Each runs `n` iterations of BLOCK (48) instructions. Chains keep one register dependent on
// itself; streams use 12 independent accumulators (enough for 2 pipes × 5 cycles latency).
// FP operands are zero: results stay finite (no denormals) and x86 FP latency does not depend
// on values otherwise.

macro_rules! rep48 {
    ($($i:literal),*) => { concat!(".rept 48\n", $($i, "\n",)* ".endr\n") };
}
/// SAFETY: caller: any x86-64 CPU. Touches only the named registers; no memory, no stack.
unsafe fn imul_chain(n: u64) {
    // SAFETY: register-only loop; operands declared as clobbered outputs.
    unsafe {
        asm!("2:", rep48!("imul {x}, {x}"), "dec {n}", "jnz 2b",
            x = inout(reg) 3u64 => _, n = inout(reg) n => _, options(nomem, nostack));
    }
}

/// SAFETY: caller: any x86-64 CPU. Unrolled 8× further than the others: at one cycle per
/// instruction the loop branch would otherwise show as a few percent.
unsafe fn xor_chain(n: u64) {
    // SAFETY: register-only loop; `y` is non-zero so no zeroing idiom is recognised.
    unsafe {
        asm!("2:", ".rept 8", rep48!("xor {x}, {y}"), ".endr", "dec {n}", "jnz 2b",
            x = inout(reg) 1u64 => _, y = in(reg) 0x5555u64, n = inout(reg) n => _, options(nomem, nostack));
    }
}

/// SAFETY: caller checked FMA.
#[target_feature(enable = "avx,fma")]
unsafe fn fma_chain_sd(n: u64) {
    // SAFETY: register-only loop on xmm0-2, declared clobbered.
    unsafe {
        asm!("vxorpd xmm0, xmm0, xmm0", "vxorpd xmm1, xmm1, xmm1", "vxorpd xmm2, xmm2, xmm2", "2:",
            rep48!("vfmadd231sd xmm0, xmm1, xmm2"), "dec {n}", "jnz 2b",
            n = inout(reg) n => _, out("xmm0") _, out("xmm1") _, out("xmm2") _, options(nomem, nostack));
    }
}

/// SAFETY: caller checked SSE2.
unsafe fn add_chain_sd(n: u64) {
    // SAFETY: register-only loop on xmm0-1, declared clobbered.
    unsafe {
        asm!("xorpd xmm0, xmm0", "xorpd xmm1, xmm1", "2:", rep48!("addsd xmm0, xmm1"), "dec {n}", "jnz 2b",
            n = inout(reg) n => _, out("xmm0") _, out("xmm1") _, options(nomem, nostack));
    }
}

/// SAFETY: caller checked FMA.
#[target_feature(enable = "avx,fma")]
unsafe fn fma_chain_128(n: u64) {
    // SAFETY: register-only loop on xmm0-2, declared clobbered.
    unsafe {
        asm!("vxorpd xmm0, xmm0, xmm0", "vxorpd xmm1, xmm1, xmm1", "vxorpd xmm2, xmm2, xmm2", "2:",
            rep48!("vfmadd231pd xmm0, xmm1, xmm2"), "dec {n}", "jnz 2b",
            n = inout(reg) n => _, out("xmm0") _, out("xmm1") _, out("xmm2") _, options(nomem, nostack));
    }
}

/// SAFETY: caller checked SSE2.
unsafe fn add_chain_128(n: u64) {
    // SAFETY: register-only loop on xmm0-1, declared clobbered.
    unsafe {
        asm!("xorpd xmm0, xmm0", "xorpd xmm1, xmm1", "2:", rep48!("addpd xmm0, xmm1"), "dec {n}", "jnz 2b",
            n = inout(reg) n => _, out("xmm0") _, out("xmm1") _, options(nomem, nostack));
    }
}

/// SAFETY: caller checked AVX and FMA.
#[target_feature(enable = "avx,fma")]
unsafe fn fma_chain_256(n: u64) {
    // SAFETY: register-only loop on ymm0-2, declared clobbered.
    unsafe {
        asm!("vxorpd ymm0, ymm0, ymm0", "vxorpd ymm1, ymm1, ymm1", "vxorpd ymm2, ymm2, ymm2", "2:",
            rep48!("vfmadd231pd ymm0, ymm1, ymm2"), "dec {n}", "jnz 2b", "vzeroupper",
            n = inout(reg) n => _, out("ymm0") _, out("ymm1") _, out("ymm2") _, options(nomem, nostack));
    }
}

/// SAFETY: caller checked AVX.
#[target_feature(enable = "avx")]
unsafe fn add_chain_256(n: u64) {
    // SAFETY: register-only loop on ymm0-1, declared clobbered.
    unsafe {
        asm!("vxorpd ymm0, ymm0, ymm0", "vxorpd ymm1, ymm1, ymm1", "2:", rep48!("vaddpd ymm0, ymm0, ymm1"), "dec {n}", "jnz 2b",
            "vzeroupper", n = inout(reg) n => _, out("ymm0") _, out("ymm1") _, options(nomem, nostack));
    }
}

/// SAFETY: caller checked AVX-512F.
#[target_feature(enable = "avx512f")]
unsafe fn fma_chain_512(n: u64) {
    // SAFETY: register-only loop on zmm0-2, declared clobbered.
    unsafe {
        asm!("vpxorq zmm0, zmm0, zmm0", "vpxorq zmm1, zmm1, zmm1", "vpxorq zmm2, zmm2, zmm2", "2:",
            rep48!("vfmadd231pd zmm0, zmm1, zmm2"), "dec {n}", "jnz 2b", "vzeroupper",
            n = inout(reg) n => _, out("zmm0") _, out("zmm1") _, out("zmm2") _, options(nomem, nostack));
    }
}

/// A register-only loop over 12 FP accumulators (4 deep each: far off the critical path at any
/// FP latency up to 30 cycles), 48 FP instructions an iteration; `$fp` names the accumulator
/// `\i`, its sources the registers 12 and 13. With `[beside, x0]`, the `imul` chain (from x0) runs one link
/// beside each FP instruction (BLOCK links, 3·BLOCK cycles): the clock under that FP work.
macro_rules! fp_loop {
    ($name:ident, $feat:literal, $zero:literal, $fp:literal, $vz:literal, [$($beside:literal, $x:expr)?], $($reg:tt)*) => {
        /// SAFETY: caller checked the features named on the function.
        #[target_feature(enable = $feat)]
        unsafe fn $name(n: u64) {
            // SAFETY: register-only loop: the FP registers 0-13 of the width (and the imul
            // operand), all declared clobbered.
            unsafe {
                asm!(
                    ".irp i,0,1,2,3,4,5,6,7,8,9,10,11,12,13", $zero, ".endr",
                    "2:", ".rept 4", ".irp i,0,1,2,3,4,5,6,7,8,9,10,11", $($beside,)? $fp, ".endr", ".endr",
                    "dec {n}", "jnz 2b", $vz,
                    $(x = inout(reg) $x => _,)? n = inout(reg) n => _,
                    $($reg)*
                    options(nomem, nostack)
                );
            }
        }
    };
}

fp_loop!(fma_streams_128, "avx,fma", "vxorpd xmm\\i, xmm\\i, xmm\\i", "vfmadd231pd xmm\\i, xmm12, xmm13", "vzeroupper", [],
    out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _, out("xmm4") _, out("xmm5") _, out("xmm6") _,
    out("xmm7") _, out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _, out("xmm12") _, out("xmm13") _,);
fp_loop!(add_streams_128, "sse2", "xorpd xmm\\i, xmm\\i", "addpd xmm\\i, xmm12", "", [],
    out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _, out("xmm4") _, out("xmm5") _, out("xmm6") _,
    out("xmm7") _, out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _, out("xmm12") _, out("xmm13") _,);
fp_loop!(fma_streams_256, "avx,fma", "vxorpd ymm\\i, ymm\\i, ymm\\i", "vfmadd231pd ymm\\i, ymm12, ymm13", "vzeroupper", [],
    out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _, out("ymm4") _, out("ymm5") _, out("ymm6") _,
    out("ymm7") _, out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _, out("ymm12") _, out("ymm13") _,);
fp_loop!(add_streams_256, "avx", "vxorpd ymm\\i, ymm\\i, ymm\\i", "vaddpd ymm\\i, ymm\\i, ymm12", "vzeroupper", [],
    out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _, out("ymm4") _, out("ymm5") _, out("ymm6") _,
    out("ymm7") _, out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _, out("ymm12") _, out("ymm13") _,);
fp_loop!(fma_streams_512, "avx512f", "vpxorq zmm\\i, zmm\\i, zmm\\i", "vfmadd231pd zmm\\i, zmm12, zmm13", "vzeroupper", [],
    out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _, out("zmm4") _, out("zmm5") _, out("zmm6") _,
    out("zmm7") _, out("zmm8") _, out("zmm9") _, out("zmm10") _, out("zmm11") _, out("zmm12") _, out("zmm13") _,);
fp_loop!(imul_beside_fma_sd, "avx,fma", "vxorpd xmm\\i, xmm\\i, xmm\\i", "vfmadd231sd xmm\\i, xmm12, xmm13", "", ["imul {x}, {x}", 3u64],
    out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _, out("xmm4") _, out("xmm5") _, out("xmm6") _,
    out("xmm7") _, out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _, out("xmm12") _, out("xmm13") _,);
fp_loop!(imul_beside_add_sd, "sse2", "xorpd xmm\\i, xmm\\i", "addsd xmm\\i, xmm12", "", ["imul {x}, {x}", 3u64],
    out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _, out("xmm4") _, out("xmm5") _, out("xmm6") _,
    out("xmm7") _, out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _, out("xmm12") _, out("xmm13") _,);
fp_loop!(imul_beside_fma_128, "avx,fma", "vxorpd xmm\\i, xmm\\i, xmm\\i", "vfmadd231pd xmm\\i, xmm12, xmm13", "", ["imul {x}, {x}", 3u64],
    out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _, out("xmm4") _, out("xmm5") _, out("xmm6") _,
    out("xmm7") _, out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _, out("xmm12") _, out("xmm13") _,);
fp_loop!(imul_beside_add_128, "sse2", "xorpd xmm\\i, xmm\\i", "addpd xmm\\i, xmm12", "", ["imul {x}, {x}", 3u64],
    out("xmm0") _, out("xmm1") _, out("xmm2") _, out("xmm3") _, out("xmm4") _, out("xmm5") _, out("xmm6") _,
    out("xmm7") _, out("xmm8") _, out("xmm9") _, out("xmm10") _, out("xmm11") _, out("xmm12") _, out("xmm13") _,);
fp_loop!(imul_beside_fma_256, "avx,fma", "vxorpd ymm\\i, ymm\\i, ymm\\i", "vfmadd231pd ymm\\i, ymm12, ymm13", "vzeroupper", ["imul {x}, {x}", 3u64],
    out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _, out("ymm4") _, out("ymm5") _, out("ymm6") _,
    out("ymm7") _, out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _, out("ymm12") _, out("ymm13") _,);
fp_loop!(imul_beside_add_256, "avx", "vxorpd ymm\\i, ymm\\i, ymm\\i", "vaddpd ymm\\i, ymm\\i, ymm12", "vzeroupper", ["imul {x}, {x}", 3u64],
    out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _, out("ymm4") _, out("ymm5") _, out("ymm6") _,
    out("ymm7") _, out("ymm8") _, out("ymm9") _, out("ymm10") _, out("ymm11") _, out("ymm12") _, out("ymm13") _,);
fp_loop!(imul_beside_fma_512, "avx512f", "vpxorq zmm\\i, zmm\\i, zmm\\i", "vfmadd231pd zmm\\i, zmm12, zmm13", "vzeroupper", ["imul {x}, {x}", 3u64],
    out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _, out("zmm4") _, out("zmm5") _, out("zmm6") _,
    out("zmm7") _, out("zmm8") _, out("zmm9") _, out("zmm10") _, out("zmm11") _, out("zmm12") _, out("zmm13") _,);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_run_or_refuse() {
        assert!(Kernel::Imul.run(10));
        assert!(Kernel::Xor.run(10));
        assert!(!Kernel::Imul.run(0));
        // No scalar stream kernel exists: refused, not run.
        assert!(!Kernel::FpStreams { width: 64, fma: false }.run(10));
        assert!(!Kernel::FpChain { width: 96, fma: false }.run(10));
        assert!(Kernel::FpChain { width: 128, fma: false }.run(10), "SSE2 is baseline x86-64");
        assert!(Kernel::ImulBeside { width: 64, fma: false }.run(10), "SSE2 is baseline x86-64");
        assert!(!Kernel::ImulBeside { width: 96, fma: false }.run(10));
        assert_eq!(Kernel::ImulBeside { width: 512, fma: true }.ops_per_iter(), BLOCK);
        assert_eq!(Kernel::Xor.ops_per_iter(), 8 * BLOCK);
        assert_eq!(Kernel::FpStreams { width: 512, fma: true }.flops_per_op(), 16.0);
        assert_eq!(Kernel::FpStreams { width: 256, fma: false }.flops_per_op(), 4.0);
    }

    #[test]
    fn every_supported_width_runs_on_all_allowed_cpus() {
        let cpus = allowed_cpus();
        assert!(!cpus.is_empty());
        let ran = on_cpus(&cpus, || {
            [64, 128, 256, 512]
                .into_iter()
                .filter(|&w| {
                    let fma = std::arch::is_x86_feature_detected!("fma");
                    let (chain, beside) = (Kernel::FpChain { width: w, fma }, Kernel::ImulBeside { width: w, fma });
                    assert_eq!(chain.supported(), beside.supported(), "width {w}");
                    chain.supported() && chain.run(5) && beside.run(5)
                })
                .count()
        });
        assert_eq!(ran.len(), cpus.len());
        assert!(ran.iter().all(|&n| n >= 2), "scalar and 128-bit chains run on any x86-64: {ran:?}");
    }
}
