//! The roofline kernel suite: the toolkit's known answers.
//!
//! Every kernel comes in variants (`scalar`, `sse`, `avx2`, `avx512`) written with
//! `std::arch` intrinsics, and declares its **analytic** work and traffic as a function of
//! size and variant ([`Counts`]). The trace backend must reproduce W and explicit-operand
//! bytes exactly, so the formulas are derived from the loops as written, remainders included.
//!
//! Without the `suite` feature (on by default) only the vocabulary is built: [`FlopClass`],
//! [`Counts`], [`Variant`] and the CPU list, what a program that only marks regions needs.

#[cfg(feature = "suite")]
pub mod api;
#[cfg(feature = "suite")]
pub mod buffer_pool;
#[cfg(feature = "suite")]
pub mod check;
#[cfg(feature = "suite")]
pub mod cos_chain;
#[cfg(feature = "suite")]
pub mod cpu_probe;
pub mod cpus;
#[cfg(feature = "suite")]
pub mod gemm;
#[cfg(feature = "suite")]
pub mod gemm_lowp;
#[cfg(feature = "suite")]
pub mod lowp;
#[cfg(feature = "suite")]
pub mod normalize;
#[cfg(feature = "suite")]
pub mod peak;
#[cfg(feature = "suite")]
pub mod peak_mixed;
pub mod rng;
#[cfg(feature = "suite")]
pub mod runner;
#[cfg(feature = "suite")]
pub mod simd;
#[cfg(feature = "suite")]
pub mod spmv;
#[cfg(feature = "suite")]
pub mod stencil;
#[cfg(feature = "suite")]
pub mod stream;
#[cfg(feature = "suite")]
pub mod suite;
pub mod types;

#[cfg(feature = "suite")]
pub use api::{Instance, Kernel};
pub use types::{Counts, FlopClass, Precision, Variant};
