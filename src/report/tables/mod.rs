//! The tables commands print besides a report's own summary (`report::table`): one file
//! per command, each a function from the command's typed data to the text it prints.

#[cfg(feature = "analysis")]
pub mod ceilings;
pub mod compare;
pub mod events;
#[cfg(feature = "gpu")]
pub mod gpu;
pub mod kernels;
pub mod measure;
pub mod perf_stat;
pub mod run;
#[cfg(feature = "analysis")]
pub mod sweep;
#[cfg(feature = "trace")]
pub mod validate;
