//! `roofline`: work W, traffic Q and time T of a kernel or a command, the machine's roofs,
//! and reports that say how close it is to them and why.
//!
//! The data path is machine → counters → model → report:
//! - [`machine`]: CPUID, topology, caches, clocks, theoretical peaks, `platforms/` data;
//! - [`counters`]: backends producing W/Q/T (perf, trace, analytic), [`gpu`] for ncu;
//! - [`ceilings`]: empirical roofs; [`model`]: AI per level, attainable performance, bounds;
//! - [`report`]: the one `roofline.report/1` schema and its views; [`gate`]: CI checks.

pub mod ceilings;
pub mod cli;
pub mod counters;
pub mod criterion_support;
pub mod error;
pub mod gate;
pub mod gpu;
pub mod machine;
pub mod model;
pub mod region;
pub mod report;
pub mod util;
pub mod validate;

pub use error::{Error, Result};
pub use region::{Backend, Session};
pub use roofline_kernels as kernels;
