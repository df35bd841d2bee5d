//! The ground floor: the documents every layer reads and writes, and the units and
//! statistics they are written in. Nothing here imports from the layers above (machine,
//! counters, model, report views, cli).
//!
//! - [`report`]: `roofline.report/1` (Report, Point, Flops, Bytes, Provenance, Roofs);
//! - [`ceilings`]: `roofline.ceilings/1` (Ceilings, the machine summary Host); [`sweep`]: a
//!   sweep against working-set size and its plateaus;
//! - [`documents`]: the sweep, events, validate, validate-perf and compare documents and
//!   the kernel list;
//! - [`extras`]: a point's `extra` figures (PointExtras), typed where they are read back;
//! - [`gpu`]: `roofline.gpu-machine/1` and `roofline.gpu-ceilings/1`;
//! - [`environment`]: where and how a report was produced; [`report::job`]: a rank's place in a job of
//!   ranks, and a merged job's nodes, ranks and balance;
//! - [`energy`]: a point's joules per energy domain and the energy roofs;
//! - [`units`]: number formatting; [`stats`]: median, spread, quantiles;
//! - [`validation`]: the results of `roofline validate` (rows, verdicts per event class).

pub mod ceilings;
pub mod documents;
pub mod energy;
pub mod environment;
pub mod extras;
pub mod gpu;
pub mod report;
pub mod stats;
#[cfg(feature = "analysis")]
pub mod sweep;
pub mod units;
pub mod validation;

pub use extras::PointExtras;
pub use report::{Bound, Bytes, Environment, Flops, Point, Provenance, Report, Roofs, Source};
