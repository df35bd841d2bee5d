//! The ground floor: the documents every layer reads and writes, and the units and
//! statistics they are written in. Nothing here imports from the layers above (machine,
//! counters, model, report views, cli).
//!
//! - [`report`]: `roofline.report/1` (Report, Point, Flops, Bytes, Provenance, Roofs);
//! - [`documents`]: the sweep, events, validate, validate-perf and compare documents and
//!   the kernel list;
//! - [`environment`]: where and how a report was produced;
//! - [`units`]: number formatting; [`stats`]: median, spread, quantiles.

pub mod documents;
pub mod environment;
pub mod report;
pub mod stats;
pub mod units;

pub use report::{Bound, Bytes, Environment, Flops, Point, Provenance, Report, Roofs, Source};
