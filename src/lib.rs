//! `roofline`: work W, traffic Q and time T of a kernel or a command, the machine's roofs,
//! and reports that say how close it is to them and why.
//!
//! The data path is machine → counters → model → report:
//! - [`machine`]: CPUID, topology, caches, clocks, theoretical peaks, `platforms/` data;
//! - `counters`: backends producing W/Q/T (perf, trace, analytic, ncu);
//! - `model`: AI per level, attainable performance, bound classification;
//! - [`report`]: the one `roofline.report/1` schema and its views.

pub mod cli;
pub mod error;
pub mod machine;
pub mod report;
pub mod util;

pub use error::{Error, Result};
pub use roofline_kernels as kernels;
