//! The model: arithmetic intensity per level, attainable performance under three roofline
//! models, bound classification and one line of advice per regime.
//!
//! - **Classic (DRAM) model**: `min(peak, BW_dram · AI_dram)`, AI over the bytes DRAM serves.
//! - **Cache-aware model** (CARM, Ilić, Pratas & Sousa 2014): one AI, the core-side one
//!   (flops over every byte the core loads and stores, stack included), read against each
//!   level's roof `BW_l · AI_core`; the attainable figure is the top of them (the L1 roof,
//!   else the highest bandwidth roof known), capped by the peak.
//! - **Hierarchical model**: `min(peak, min_l BW_l · AI_l)`, each level's own AI against its
//!   own roof (`core` bytes against the `l1` roof). The tightest of the three when per-level
//!   bytes are known, so it drives `roof_fraction` and the bound; the others are reported
//!   beside it, each tagged with its [`ModelKind`].
//!
//! Bound classification ([`classify`]), in order:
//! 1. **overhead** when a fixed cost dominates T: either the point carries a sweep fit
//!    `T(n) = a + b·n` (`extra.fixed_seconds = a`) with `a ≥ OVERHEAD_FIXED_SHARE · T`, or T is
//!    below [`OVERHEAD_SECONDS`] while reaching less than [`OVERHEAD_ROOF_FRACTION`] of the roof;
//! 2. otherwise the lowest roof at the point's intensities: a memory level (`memory at l2`), or
//!    compute. Compute is named by the ISA the point's flops run at (its widest flop class),
//!    and that ISA's own roof counts too: scalar code tops out at the scalar roof long before
//!    an L1 roof, and "compute-bound at scalar" is the useful diagnosis (advice: wider SIMD).
//!
//! Roofs come from a report's `ceilings` ([`Roofs`](crate::schema::Roofs)), from a
//! `roofline.ceilings/1` file ([`RoofSet::from_ceilings_json`]) or from the machine model's
//! theoretical peaks ([`RoofSet::theoretical`]).

mod advice;
mod analysis;
pub mod energy;
#[cfg(feature = "analysis")]
pub mod gpu;
mod labels;
mod mix;
mod point;
mod roofs;
mod walls;

pub use advice::unit_advice;
pub use analysis::{Analysis, Attainable, Limiter, ModelKind, above_roof, analyse, annotate, annotate_by_threads, attainable_cache_aware};
pub use labels::{is_integer_precision, isa_label, level_label, level_rank, precision_family, precision_label, rate_unit};
pub use mix::ComputeRoofUsed;
pub use point::{point_isa, point_precision, point_rate, point_work};
pub use roofs::{BandwidthRoof, ComputeRoof, RoofSet};
pub use walls::{GLOBAL_WALLS, SHARED_WALLS, wall_position};

#[cfg(test)]
mod tests;
