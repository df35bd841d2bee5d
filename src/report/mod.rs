//! Reports: the one schema and its views (one file per output format).

pub mod environment;
pub mod schema;

pub use schema::{Bound, Bytes, Environment, Flops, Point, Provenance, Report, Roofs, Source};
