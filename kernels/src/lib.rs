//! The roofline kernel suite: the toolkit's known answers.
//!
//! Every kernel comes in variants (`scalar`, `sse`, `avx2`, `avx512`) written with
//! `std::arch` intrinsics, and declares its **analytic** work and traffic as a function of
//! size and variant ([`Counts`]). The trace backend must reproduce W and explicit-operand
//! bytes exactly, so the formulas are derived from the loops as written, remainders included.

pub mod api;
pub mod check;
pub mod cos_chain;
pub mod gemm;
pub mod normalize;
pub mod peak;
pub mod rng;
pub mod runner;
pub mod simd;
pub mod spmv;
pub mod stencil;
pub mod stream;
pub mod suite;
pub mod types;

pub use api::{Instance, Kernel};
pub use types::{Counts, FlopClass, Precision, Variant};
