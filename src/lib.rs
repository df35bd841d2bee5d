//! `roofline`: work W, traffic Q and time T of a kernel or a command, the machine's roofs,
//! and reports that say how close it is to them and why.
//!
//! The data path is machine → counters → model → report:
//! - [`machine`]: CPUID, topology, caches, clocks, theoretical peaks, `platforms/` data;
//! - [`counters`]: backends producing W/Q/T (perf, trace, analytic), [`gpu`] for ncu;
//! - [`ceilings`]: empirical roofs; [`model`]: AI per level, attainable performance, bounds;
//! - [`report`]: the one `roofline.report/1` schema and its views; [`gate`]: CI checks.

//!
//! Cargo features (all on by default; docs/region-api.md, "A light dependency"): `cli` (the
//! binaries' `cli` module), `trace` (the ptrace backend, the simulated PMU, `validate`,
//! `criterion_support`), `plot` (SVG, PNG and HTML views), `gpu` (CUDA device query and
//! ceilings), `analysis` (the kernel suite and what is built on it, the machine model,
//! reading reports back). Without them the library is the region API, the perf and
//! time-only backends, CPU identification and the report schema.

#[cfg(feature = "analysis")]
pub mod ceilings;
#[cfg(feature = "cli")]
pub mod cli;
pub mod counters;
#[cfg(feature = "trace")]
pub mod criterion_support;
#[cfg(feature = "cli")]
pub mod doctor;
pub mod error;
#[cfg(feature = "analysis")]
pub mod gate;
#[cfg(feature = "analysis")]
pub mod gpu;
pub mod machine;
pub mod model;
pub mod region;
pub mod report;
pub mod schema;
pub mod util;
#[cfg(feature = "trace")]
pub mod validate;

pub use error::{Error, Result};
pub use region::{Backend, Session};
pub use roofline_kernels as kernels;
