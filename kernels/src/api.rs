//! The kernel API: what every suite kernel provides, and the registry.

use crate::types::{Counts, Precision, Variant};

/// One kernel of the suite, at any size and variant.
pub trait Kernel: Send + Sync {
    /// Short name used on the command line: `triad`, `dgemm`, `normalize_fused`, …
    fn name(&self) -> &'static str;
    /// One line for `roofline kernels`.
    fn description(&self) -> &'static str;
    fn precision(&self) -> Precision;
    /// Variants implemented (the runnable ones are those whose `Variant::supported()` holds).
    fn variants(&self) -> &'static [Variant];
    /// Human-readable W/Q formulas (for `roofline kernels`), in terms of the size `n`.
    fn formula(&self, variant: Variant) -> String;
    /// What `n` means: `elements`, `matrix order`, `rows of 512`, …
    fn size_unit(&self) -> &'static str {
        "elements"
    }
    /// Bytes of all arrays touched at size `n` (the working set).
    fn working_set_bytes(&self, n: usize) -> u64;
    /// The largest `n` whose working set is at most `bytes` (at least the smallest valid size).
    fn size_for_bytes(&self, bytes: u64) -> usize;
    /// Analytic W and Q of ONE invocation at size `n` (per thread-slice when run threaded:
    /// the runner sums the instances' counts).
    fn counts(&self, n: usize, variant: Variant) -> Counts;
    /// Bytes that must stay cached between their uses within ONE call for the compulsory
    /// traffic (`Counts::dram_bytes`) to be all a level moves when the closer caches cannot hold
    /// the working set: 0 for single-pass streams, a row or a few rows for row-wise kernels.
    /// `None` where the reuse is not modelled (blocked or irregular access: dgemm, spmv), so no
    /// analytic L2/L3/DRAM figure is claimed for out-of-cache sizes.
    fn reuse_footprint_bytes(&self, _n: usize) -> Option<u64> {
        None
    }
    /// Mask-aware flops of one invocation (lanes masked off excluded), where they differ
    /// from the hardware-counter total and the kernel knows them; `None` = same as total.
    fn effective_flops(&self, _n: usize, _variant: Variant) -> Option<u64> {
        None
    }
    /// Why this CPU cannot run `variant` of the kernel although it has the variant's ISA (a
    /// unit beyond it, such as AMX tiles, is missing): one line, or None when it can.
    fn unavailable(&self, _variant: Variant) -> Option<String> {
        None
    }
    /// One problem of size `n` shared by a team of `threads`: one instance per team thread,
    /// each computing its own part of the one result (their counts sum to the problem's, plus
    /// what each part repeats on its own, such as packing its operands). The parts never wait
    /// for each other, so the runner may call them any number of times. None: the kernel has
    /// no shared mode (a team runs independent instances).
    fn split(&self, _n: usize, _variant: Variant, _seed: u64, _threads: usize) -> Option<Result<Vec<Box<dyn Instance>>, String>> {
        None
    }
    /// Allocate and fill (seeded random) an instance of size `n`. Fails with a one-line cause
    /// for a size 0, a size beyond memory, or an unsupported variant (never a SIGILL).
    fn instance(&self, n: usize, variant: Variant, seed: u64) -> Result<Box<dyn Instance>, String>;
}

/// A ready-to-run kernel invocation with its own data.
pub trait Instance: Send {
    /// Run the kernel once.
    fn run(&mut self);
    /// Check the last run's output against the scalar f64 reference (poisoning outputs
    /// before running is the instance's job in `verify`).
    fn verify(&mut self) -> Result<(), String>;
    /// Analytic counts of one `run()` of this instance.
    fn counts(&self) -> Counts;
}

/// Every kernel of the suite.
pub fn all() -> Vec<Box<dyn Kernel>> {
    let mut v = crate::stream::kernels();
    v.extend(crate::suite::kernels());
    v.extend(crate::gemm_lowp::kernels());
    v
}

/// Find a kernel by name.
pub fn find(name: &str) -> Option<Box<dyn Kernel>> {
    all().into_iter().find(|k| k.name() == name)
}
