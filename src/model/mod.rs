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
//! Roofs come from a report's `ceilings` ([`Roofs`]), from a `roofline.ceilings/1` file
//! ([`RoofSet::from_ceilings_json`]) or from the machine model's theoretical peaks
//! ([`RoofSet::theoretical`]).

use serde::Serialize;
use std::collections::BTreeMap;

#[cfg(feature = "analysis")]
use crate::error::Error;
use crate::machine::MachineModel;
#[cfg(feature = "analysis")]
use crate::schema::ceilings::Ceilings;
use crate::schema::report::{Bound, Point, Report, Roofs, Source, level};
use crate::util::map_of;

/// T below this is suspicious of call overhead (timer, launch, page faults).
pub const OVERHEAD_SECONDS: f64 = 20e-6;
/// ...when the point also reaches less than this fraction of its roof.
pub const OVERHEAD_ROOF_FRACTION: f64 = 0.10;
/// A sweep's fitted fixed cost `a` at or above this share of T means overhead-bound.
pub const OVERHEAD_FIXED_SHARE: f64 = 0.5;

/// Which roofline model a number comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
#[serde(rename_all = "kebab-case")]
pub enum ModelKind {
    /// Classic: DRAM roof against DRAM AI.
    Dram,
    /// Cache-aware (CARM): core-side AI against each level's roof.
    CacheAware,
    /// Each level's AI against its own roof, minimum over levels.
    Hierarchical,
}

impl ModelKind {
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Dram => "classic (DRAM)",
            ModelKind::CacheAware => "cache-aware",
            ModelKind::Hierarchical => "hierarchical",
        }
    }
    pub fn key(self) -> &'static str {
        match self {
            ModelKind::Dram => "dram",
            ModelKind::CacheAware => "cache-aware",
            ModelKind::Hierarchical => "hierarchical",
        }
    }
}

/// One compute roof: GFLOP/s of a precision at an ISA, with or without FMA.
#[derive(Debug, Clone, PartialEq)]
pub struct ComputeRoof {
    pub precision: String,
    pub isa: String,
    pub fma: bool,
    /// FMA issued together with separate adds (Zen's FADD pipes beside its FMA pipes): the
    /// highest figure such a core reaches, only for code that mixes the two.
    pub mix: bool,
    pub gflops: f64,
    /// Measured (solid in plots) or theoretical (dashed).
    pub empirical: bool,
    /// The relative spread of its measurement (interquartile range over median; 0 when
    /// theoretical or unknown): a point within it of the roof is at the roof, not above.
    pub spread: f64,
}

impl ComputeRoof {
    /// `double.avx512.fma` / `double.avx512.fma_add` / `double.avx512.nofma`.
    pub fn key(&self) -> String {
        format!("{}.{}.{}", self.precision, self.isa, self.mode_key())
    }
    fn mode_key(&self) -> &'static str {
        match (self.fma, self.mix) {
            (true, true) => "fma_add",
            (true, false) => "fma",
            (false, _) => "nofma",
        }
    }
    /// `AVX-512 FMA` / `AVX2 FMA+add` / `scalar no-FMA`; other precisions than double and
    /// single name theirs and their unit: `BF16 AMX tiles`, `INT8 AVX-512 VNNI`, `FP16 AVX-512
    /// FMA`, `BF16 tensor GPU` (the legend's family).
    pub fn label(&self) -> String {
        let mode = match (self.fma, self.mix) {
            (true, true) => "FMA+add",
            (true, false) => "FMA",
            (false, _) => "no-FMA",
        };
        if matches!(self.precision.as_str(), "double" | "single") {
            return format!("{} {}", isa_label(&self.isa), mode);
        }
        let unit = match (self.isa.as_str(), precision_family(&self.precision)) {
            ("amx", _) => "tiles".to_string(),
            ("gpu", _) => return format!("GPU {}", precision_label(&self.precision)),
            (isa, "bf16") => format!("{} dot", isa_label(isa)),
            (isa, "int8" | "int16") => format!("{} VNNI", isa_label(isa)),
            (isa, _) => format!("{} {mode}", isa_label(isa)),
        };
        format!(
            "{} {}",
            precision_label(&self.precision),
            if self.isa == "amx" { format!("AMX {unit}") } else { unit }
        )
    }
    /// GOP/s (integer operations) or GFLOP/s: the unit of this roof's figure.
    pub fn unit(&self) -> &'static str {
        rate_unit(&self.precision)
    }
    fn same_kind(&self, other: &ComputeRoof) -> bool {
        self.precision == other.precision && self.isa == other.isa && self.fma == other.fma && self.mix == other.mix
    }
}

/// One bandwidth roof: GB/s of a memory level, in the two byte conventions a point's bytes
/// come in.
#[derive(Debug, Clone, PartialEq)]
pub struct BandwidthRoof {
    pub level: String,
    /// Core-side bytes (what load/store instructions move while the level serves them, no
    /// write-allocate): the roof for core-side AI (cache-aware model).
    pub gbs: f64,
    /// The traffic the level itself serves (write-allocate reads included): the roof for
    /// bytes counted at the level (perf's fills and CAS counts, the cache simulator, the
    /// analytic compulsory DRAM bytes), i.e. the classic and hierarchical models. A triad with
    /// ordinary stores moves 4/3 of its core bytes through DRAM; read against the core-side
    /// roof it would sit above 100 %.
    pub traffic_gbs: f64,
    pub empirical: bool,
    /// The relative spread of its measurement (0 when theoretical or unknown).
    pub spread: f64,
}

impl BandwidthRoof {
    /// The roof for bytes of `convention` (`core` bytes or a level's own traffic).
    fn for_bytes(&self, counted_at_level: bool) -> f64 {
        if counted_at_level { self.traffic_gbs } else { self.gbs }
    }
}

/// All roofs known for a report.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RoofSet {
    pub compute: Vec<ComputeRoof>,
    pub bandwidth: Vec<BandwidthRoof>,
    pub threads: Option<u32>,
}

/// ISA display name.
pub fn isa_label(isa: &str) -> String {
    match isa {
        "scalar" => "scalar".into(),
        "sse" => "SSE".into(),
        "avx" => "AVX".into(),
        "avx2" => "AVX2".into(),
        "avx512" => "AVX-512".into(),
        other => other.to_ascii_uppercase(),
    }
}

/// Order of ISAs from narrow to wide, AMX tiles above AVX-512 (unknown ones last).
pub fn isa_rank(isa: &str) -> usize {
    ["scalar", "sse", "avx", "avx2", "avx512", "amx"]
        .iter()
        .position(|i| *i == isa)
        .unwrap_or(6)
}

/// The number format a precision key's roofs belong to, so that work of one format on two
/// machines is read against comparable roofs: a GPU's tensor cores (`tensor_bf16`) and a
/// CPU's AMX tiles or dot products (`bf16`) are both `bf16`; `tensor_fp64` is `double`,
/// `tensor_fp16` `half`. Other keys are their own family.
pub fn precision_family(precision: &str) -> &str {
    match precision.strip_prefix("tensor_") {
        Some("fp64") => "double",
        Some("fp16") => "half",
        Some(t) => t,
        None => precision,
    }
}

/// Display name of a precision: `FP64`, `FP32`, `FP16`, `BF16`, `INT8`, `INT16`, and for a
/// GPU's tensor cores `BF16 tensor`.
pub fn precision_label(precision: &str) -> String {
    let base = |p: &str| match p {
        "double" | "fp64" => "FP64".to_string(),
        "single" | "fp32" => "FP32".to_string(),
        "half" | "fp16" => "FP16".to_string(),
        other => other.to_ascii_uppercase(),
    };
    match precision.strip_prefix("tensor_") {
        Some(t) => format!("{} tensor", base(t)),
        None if precision == "tensor" => "tensor".into(),
        None => base(precision),
    }
}

/// Whether a precision's work is integer operations (CPU int8/int16: `flops.int_ops`), whose
/// rates are GOP/s, never GFLOP/s. (A GPU's `tensor_int8` ops are ncu's tensor ops, in W.)
pub fn is_integer_precision(precision: &str) -> bool {
    matches!(precision, "int8" | "int16")
}

/// `GOP/s` for integer precisions, else `GFLOP/s`.
pub fn rate_unit(precision: &str) -> &'static str {
    if is_integer_precision(precision) || precision == "tensor_int8" {
        "GOP/s"
    } else {
        "GFLOP/s"
    }
}

/// Order of memory levels from the core outwards.
pub fn level_rank(level: &str) -> usize {
    ["core", "l1", "l2", "l3", "dram"].iter().position(|l| *l == level).unwrap_or(5)
}

/// Display name of a level: `L1`, `DRAM`, `core`.
pub fn level_label(level: &str) -> String {
    match level {
        "core" | "stack" => level.to_string(),
        other => other.to_ascii_uppercase(),
    }
}

/// The bandwidth roof a level's bytes are read against: `core` bytes against `l1`.
fn roof_level_for(level: &str) -> &str {
    if level == level::CORE { level::L1 } else { level }
}

impl RoofSet {
    /// The roofs stored in a report (`Report.ceilings`). Keys are `precision.isa[.fma|.nofma]`.
    pub fn from_roofs(r: &Roofs) -> RoofSet {
        let empirical_kind = r.kind != "theoretical";
        let mut compute = Vec::new();
        for (key, &g) in &r.compute_gflops {
            let mut parts = key.split('.');
            let (Some(precision), Some(isa)) = (parts.next(), parts.next()) else {
                continue;
            };
            let mode = parts.next();
            let fma = matches!(mode, Some("fma") | Some("fma_add"));
            let mix = mode == Some("fma_add");
            if g.is_finite() && g > 0.0 {
                compute.push(ComputeRoof {
                    precision: precision.to_string(),
                    isa: isa.to_string(),
                    fma,
                    mix,
                    gflops: g,
                    empirical: empirical_kind && !r.theoretical.contains(key),
                    spread: r.spread.get(key).copied().filter(|x| x.is_finite() && *x >= 0.0).unwrap_or(0.0),
                });
            }
        }
        let bandwidth = r
            .bandwidth_gbs
            .iter()
            .filter(|(_, g)| g.is_finite() && **g > 0.0)
            .map(|(l, &g)| BandwidthRoof {
                level: l.clone(),
                gbs: g,
                traffic_gbs: r
                    .bandwidth_traffic_gbs
                    .get(l)
                    .copied()
                    .filter(|t| t.is_finite() && *t > 0.0)
                    .unwrap_or(g),
                empirical: empirical_kind && !r.theoretical.contains(l),
                spread: r.spread.get(l).copied().filter(|x| x.is_finite() && *x >= 0.0).unwrap_or(0.0),
            })
            .collect();
        let mut s = RoofSet {
            compute,
            bandwidth,
            threads: r.threads,
        };
        s.sort();
        s
    }

    /// The summary stored in a report's `ceilings` field.
    pub fn to_roofs(&self) -> Roofs {
        let all = self.compute.iter().all(|c| c.empirical) && self.bandwidth.iter().all(|b| b.empirical);
        let none = !self.compute.iter().any(|c| c.empirical) && !self.bandwidth.iter().any(|b| b.empirical);
        Roofs {
            // `mixed`: measured roofs completed by theoretical ones (read back as measured).
            kind: if all {
                "empirical"
            } else if none {
                "theoretical"
            } else {
                "mixed"
            }
            .to_string(),
            compute_gflops: map_of(self.compute.iter().map(|c| (c.key(), c.gflops))),
            bandwidth_gbs: map_of(self.bandwidth.iter().map(|b| (b.level.clone(), b.gbs))),
            bandwidth_traffic_gbs: map_of(self.bandwidth.iter().map(|b| (b.level.clone(), b.traffic_gbs))),
            spread: map_of(
                self.compute.iter().filter(|c| c.spread > 0.0).map(|c| (c.key(), c.spread)).chain(
                    self.bandwidth
                        .iter()
                        .filter(|b| b.spread > 0.0)
                        .map(|b| (b.level.clone(), b.spread)),
                ),
            ),
            theoretical: if all || none {
                Default::default()
            } else {
                let mut keys = std::collections::BTreeSet::new();
                keys.extend(
                    self.compute
                        .iter()
                        .filter(|c| !c.empirical)
                        .map(|c| c.key())
                        .chain(self.bandwidth.iter().filter(|b| !b.empirical).map(|b| b.level.clone())),
                );
                keys
            },
            threads: self.threads,
        }
    }

    /// Read a `roofline.ceilings/1` file (through its one reader, `Ceilings::from_json`) into
    /// the roofs of work at `threads`: those measured at the nearest measured thread count
    /// (`schema::ceilings::nearest_threads`; no count given: the largest measured); where
    /// several kernels measured one level, the fastest one is that level's roof.
    #[cfg(feature = "analysis")]
    pub fn from_ceilings_json(text: &str, origin: &str, threads: Option<u32>) -> Result<RoofSet, Error> {
        let doc = Ceilings::from_json(text, origin)?;
        let bad = |what: String| Error::input(format!("{origin}: {what}"), "re-create it with `roofline ceilings`");
        for c in &doc.compute {
            if !(c.gflops.is_finite() && c.gflops > 0.0) {
                return Err(bad(format!(
                    "compute roof {}.{} has an impossible value {}",
                    c.precision, c.isa, c.gflops
                )));
            }
        }
        for b in &doc.bandwidth {
            if !(b.gbs.is_finite() && b.gbs > 0.0) {
                return Err(bad(format!("bandwidth roof {} has an impossible value {}", b.level, b.gbs)));
            }
        }
        let s = RoofSet::from_roofs(&doc.roofs(threads.unwrap_or(u32::MAX)));
        if s.is_empty() {
            return Err(bad("holds no roofs".into()));
        }
        Ok(s)
    }

    /// Theoretical roofs of `threads` cores from the machine model: per-core peaks times
    /// threads (FMA; no-FMA taken as half, one add or multiply per FMA slot), and per-core
    /// bytes/cycle times the clock times threads for each level the platform knows.
    pub fn theoretical(m: &MachineModel, threads: u32) -> RoofSet {
        let t = f64::from(threads.clamp(1, m.cores.max(1)));
        let mut compute = Vec::new();
        for (precision, by) in [
            ("double", &m.peak_gflops_per_core.double),
            ("single", &m.peak_gflops_per_core.single),
        ] {
            for isa in crate::machine::ByIsa::ISAS {
                if let Some(g) = by.get(isa).filter(|g| g.is_finite() && *g > 0.0) {
                    for fma in [true, false] {
                        compute.push(ComputeRoof {
                            precision: precision.into(),
                            isa: isa.to_string(),
                            fma,
                            mix: false,
                            gflops: if fma { g * t } else { g * t / 2.0 },
                            empirical: false,
                            spread: 0.0,
                        });
                    }
                }
            }
        }
        // Mixed-precision units (AMX tiles, AVX-512 FP16/BF16, VNNI): one roof each, as
        // multiply-accumulate (`bf16.amx.fma`); GOP/s for int8/int16.
        for (unit, g) in &m.peak_mixed_per_core {
            let Some((precision, isa)) = unit.split_once('.') else { continue };
            if g.is_finite() && *g > 0.0 {
                compute.push(ComputeRoof {
                    precision: precision.into(),
                    isa: isa.into(),
                    fma: true,
                    mix: false,
                    gflops: g * t,
                    empirical: false,
                    spread: 0.0,
                });
            }
        }
        let f = &m.frequency_ghz;
        let ghz = f.override_ghz.or(f.measured).or(f.nominal).filter(|g| *g > 0.0);
        let mut bandwidth = Vec::new();
        if let Some(ghz) = ghz {
            for (lvl, bpc) in &m.bytes_per_cycle {
                if bpc.is_finite() && *bpc > 0.0 {
                    // Bytes/cycle of the platform table: what the level can move, either way.
                    bandwidth.push(BandwidthRoof {
                        level: lvl.to_ascii_lowercase(),
                        gbs: bpc * ghz * t,
                        traffic_gbs: bpc * ghz * t,
                        empirical: false,
                        spread: 0.0,
                    });
                }
            }
        }
        let mut s = RoofSet {
            compute,
            bandwidth,
            threads: Some(t as u32),
        };
        s.sort();
        s
    }

    /// Theoretical roofs from a report's `machine` JSON, when it is a `roofline.machine/1`.
    #[cfg(feature = "analysis")]
    pub fn theoretical_from_json(machine: &serde_json::Value, threads: u32) -> Option<RoofSet> {
        let m: MachineModel = serde_json::from_value(machine.clone()).ok()?;
        let s = RoofSet::theoretical(&m, threads);
        (!s.is_empty()).then_some(s)
    }

    /// The roofs to use for a report: `--ceilings` first, then the report's own, then theoretical
    /// from its machine model. Where an empirical set lacks a level or ISA that the theory knows,
    /// the theoretical roof is added (dashed in plots).
    pub fn for_report(report: &Report, ceilings: Option<&RoofSet>) -> RoofSet {
        let mut s = match (ceilings, &report.ceilings) {
            (Some(c), _) => c.clone(),
            (None, Some(r)) => RoofSet::from_roofs(r),
            (None, None) => RoofSet::default(),
        };
        s.fill_theoretical(report);
        s
    }

    /// A roof set of the report's at another thread count (`Report::ceilings_by_threads`),
    /// completed by the machine's theoretical roofs at that count.
    pub fn for_threads(report: &Report, roofs: &Roofs) -> RoofSet {
        let mut s = RoofSet::from_roofs(roofs);
        s.fill_theoretical(report);
        s
    }

    /// Add the theoretical roofs of the report's machine model where this set lacks them.
    #[cfg(feature = "analysis")]
    fn fill_theoretical(&mut self, report: &Report) {
        let threads = report.points.iter().map(|p| p.threads).max().unwrap_or(1);
        if let Some(theory) = RoofSet::theoretical_from_json(&report.machine, self.threads.unwrap_or(threads)) {
            self.fill_from(&theory);
        }
    }

    /// A machine model is read back with `analysis`; the light build's reports (regions)
    /// carry only the microarchitecture's name, which has no theoretical roofs.
    #[cfg(not(feature = "analysis"))]
    fn fill_theoretical(&mut self, _report: &Report) {}

    /// Add the roofs of `other` this set lacks (same level, or same precision+ISA+FMA).
    pub fn fill_from(&mut self, other: &RoofSet) {
        for c in &other.compute {
            if !self.compute.iter().any(|r| r.same_kind(c)) {
                self.compute.push(c.clone());
            }
        }
        for b in &other.bandwidth {
            if !self.bandwidth.iter().any(|r| r.level == b.level) {
                self.bandwidth.push(b.clone());
            }
        }
        if self.threads.is_none() {
            self.threads = other.threads;
        }
        self.sort();
    }

    pub fn is_empty(&self) -> bool {
        self.compute.is_empty() && self.bandwidth.is_empty()
    }

    fn sort(&mut self) {
        crate::util::sort_by(&mut self.compute, |a, b| {
            (a.precision.as_str(), isa_rank(&a.isa), a.fma, a.mix, a.isa.as_str()).cmp(&(
                b.precision.as_str(),
                isa_rank(&b.isa),
                b.fma,
                b.mix,
                b.isa.as_str(),
            ))
        });
        crate::util::sort_by(&mut self.bandwidth, |a, b| {
            (level_rank(&a.level), &a.level).cmp(&(level_rank(&b.level), &b.level))
        });
    }

    /// The highest compute roof of a precision (any ISA). Double and single fall back to the
    /// highest roof of either (a roof set that knows one of them); other precisions (half,
    /// bf16, int8, tensor types) have only their own roofs: a machine without the unit has no
    /// roof for them, never another precision's.
    pub fn peak(&self, precision: &str) -> Option<&ComputeRoof> {
        let by_gflops = |a: &&ComputeRoof, b: &&ComputeRoof| a.gflops.total_cmp(&b.gflops);
        let own = self.compute.iter().filter(|c| c.precision == precision).max_by(by_gflops);
        if own.is_some() || !matches!(precision, "double" | "single") {
            return own;
        }
        self.compute
            .iter()
            .filter(|c| matches!(c.precision.as_str(), "double" | "single"))
            .max_by(by_gflops)
    }

    /// The precisions this set has compute roofs for, in key order.
    pub fn precisions(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.compute.iter().map(|c| c.precision.as_str()).collect();
        crate::util::sort_by(&mut v, Ord::cmp);
        v.dedup();
        v
    }

    /// The roofs of one family ([`precision_family`]): `bf16` gives a CPU's `bf16` roofs and a
    /// GPU's `tensor_bf16` roof.
    pub fn of_family<'a>(&'a self, family: &'a str) -> impl Iterator<Item = &'a ComputeRoof> + 'a {
        self.compute.iter().filter(move |c| precision_family(&c.precision) == family)
    }

    /// The best roof for code running at `isa` (FMA if measured, else without).
    pub fn at_isa(&self, precision: &str, isa: &str) -> Option<&ComputeRoof> {
        self.compute
            .iter()
            .filter(|c| c.precision == precision && c.isa == isa)
            .max_by(|a, b| a.gflops.total_cmp(&b.gflops))
    }

    /// The roof code of `precision` at `isa` reaches when a share `fma` (0–1) of its flops
    /// comes from FMAs and the rest from adds and multiplies. An FMA issues only to the FMA
    /// pipes; any other operation to any FP pipe (the same ones on Intel; on Zen also the FADD
    /// pipes). Per flop, FMAs take `fma / R_fma` of the time on the FMA pipes, and all
    /// operations together `(fma / 2 + (1 − fma)) / R_nofma` of every pipe, where `R_fma` is
    /// the all-FMA roof and `R_nofma` the multiply-and-add one: the roof is the inverse of the
    /// larger, capped by the FMA+add roof where measured. (An upper bound: adds and multiplies
    /// are taken as balanced over the pipes, which the counts cannot tell.) None without both
    /// an FMA and a no-FMA roof there.
    pub fn mix_roof(&self, precision: &str, isa: &str, fma: f64) -> Option<f64> {
        let best = |fma_mode: bool, mix: bool| {
            self.compute
                .iter()
                .filter(|c| c.precision == precision && c.isa == isa && c.fma == fma_mode && (!fma_mode || c.mix == mix))
                .map(|c| c.gflops)
                .filter(|g| g.is_finite() && *g > 0.0)
                .max_by(f64::total_cmp)
        };
        let (all_fma, no_fma, fma_add) = (best(true, false), best(false, false), best(true, true));
        let s = fma.clamp(0.0, 1.0);
        let g = match (all_fma, no_fma) {
            (Some(f), Some(n)) => 1.0 / (s / f).max((s / 2.0 + (1.0 - s)) / n),
            (Some(f), None) if s >= 1.0 => f,
            (None, Some(n)) if s <= 0.0 => n,
            _ => return None,
        };
        Some(fma_add.map_or(g, |b| g.min(b.max(all_fma.unwrap_or(0.0)))))
    }

    /// The widest ISA with a compute roof (None without compute roofs).
    pub fn widest_isa(&self) -> Option<&str> {
        self.compute.iter().map(|c| c.isa.as_str()).max_by_key(|i| isa_rank(i))
    }

    /// The core-side roof of a level (for core-side AI).
    pub fn bandwidth(&self, level: &str) -> Option<f64> {
        self.bandwidth.iter().find(|b| b.level == level).map(|b| b.gbs)
    }

    /// The roof for bytes keyed by `bytes_level` in a point: `core` bytes against the L1
    /// core-side roof, a level's own bytes against that level's traffic roof.
    pub fn roof_for_bytes(&self, bytes_level: &str) -> Option<(String, f64)> {
        let lvl = roof_level_for(bytes_level);
        self.bandwidth
            .iter()
            .find(|b| b.level == lvl)
            .map(|b| (lvl.to_string(), b.for_bytes(bytes_level != level::CORE)))
    }

    /// The roof the core-side AI is read against: L1, else the highest bandwidth known.
    pub fn top_bandwidth(&self) -> Option<&BandwidthRoof> {
        self.bandwidth
            .iter()
            .find(|b| b.level == level::L1)
            .or_else(|| self.bandwidth.iter().max_by(|a, b| a.gbs.total_cmp(&b.gbs)))
    }
}

/// The precision of a point's work: the number format with the most work among its classes
/// (`FlopClass::format`: `double`, `single`, `half`, `bf16`, `int8`, `int16`; AMX tile classes
/// are their format too: `tile_bf16` is `bf16`), double when none is known. GPU points (ncu's
/// classes) may also be `tensor_<type>` (tensor-core ops dominate; the type with most ops in
/// `extra.tensor_ops_by_type`: `tensor_bf16`, `tensor_fp64`, …), matching the GPU roofs' keys
/// (`gpu_model::roofs_from_machine`). The roofs a point is read against are those of this
/// precision ([`RoofSet::peak`]).
pub fn point_precision(p: &Point) -> &'static str {
    // Work per format of `FORMATS` (the only ones a point's precision can be), most work
    // winning; ties go to the wider format (double, then single, …).
    const FORMATS: [&str; 6] = ["double", "single", "half", "bf16", "int16", "int8"];
    let mut by_format = [0.0f64; FORMATS.len()];
    let mut tensor = 0.0;
    for (k, v) in &p.flops.by_class {
        if k == "tensor" {
            tensor += v;
            continue;
        }
        let format = crate::kernels::FlopClass::from_key(k).and_then(|c| c.format()).or_else(|| {
            // Keys this version does not know: by their names.
            if k.starts_with("half") {
                Some("half")
            } else if k.contains("single") || k.contains("float") {
                Some("single")
            } else if k.contains("double") {
                Some("double")
            } else {
                None
            }
        });
        if let Some(i) = format.and_then(|f| FORMATS.iter().position(|&known| known == f)) {
            by_format[i] += v;
        }
    }
    let (top, top_work) = FORMATS
        .into_iter()
        .zip(by_format)
        .fold(("double", 0.0), |best, x| if x.1 > best.1 { x } else { best });
    if tensor > 0.0 && tensor > top_work {
        let by_type = p.extra.get("tensor_ops_by_type").and_then(|v| v.as_object());
        let top = by_type.and_then(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k, v.as_f64()?)))
                .max_by(|a, b| a.1.total_cmp(&b.1))
                .map(|(k, _)| k.split('_').next().unwrap_or(k).to_string())
        });
        return match top.as_deref() {
            Some("bf16") => "tensor_bf16",
            Some("fp16") => "tensor_fp16",
            Some("tf32") => "tensor_tf32",
            Some("fp64") => "tensor_fp64",
            Some("fp8") => "tensor_fp8",
            Some("int8") => "tensor_int8",
            _ => "tensor",
        };
    }
    top
}

/// W of a point in the unit of its precision's roofs: integer operations (`flops.int_ops`)
/// for an integer precision, else flops (`flops.total`).
pub fn point_work(p: &Point) -> f64 {
    if is_integer_precision(point_precision(p)) {
        p.flops.int_ops.unwrap_or(0.0)
    } else {
        p.flops.total
    }
}

/// The point's rate in its roofs' unit: GOP/s for integer work, else `gflops` (GFLOP/s).
pub fn point_rate(p: &Point) -> Option<f64> {
    if is_integer_precision(point_precision(p)) {
        (p.seconds > 0.0 && p.seconds.is_finite()).then(|| point_work(p) / p.seconds / 1e9)
    } else {
        p.gflops
    }
}

/// The widest ISA the point's work runs at, from its classes (`scalar_double` → scalar,
/// `packed128_*` → sse, `packed256_*` → avx2, `packed512_*` → avx512, `tile_*` → amx). None
/// when unknown.
pub fn point_isa(p: &Point) -> Option<&'static str> {
    p.flops
        .by_class
        .iter()
        .filter(|(_, v)| **v > 0.0)
        .filter_map(|(k, _)| {
            if k.starts_with("scalar") {
                Some("scalar")
            } else if k.starts_with("tile_") {
                Some("amx")
            } else if k.contains("512") {
                Some("avx512")
            } else if k.contains("256") {
                Some("avx2")
            } else if k.contains("128") {
                Some("sse")
            } else {
                None
            }
        })
        .max_by_key(|i| isa_rank(i))
}

/// What limits an attainable figure.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Limiter {
    Compute { isa: String, fma: bool },
    Memory { level: String },
}

/// An attainable performance and the model it comes from.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Attainable {
    pub model: ModelKind,
    pub gflops: f64,
    pub limiter: Limiter,
}

/// Everything the model says about one point.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Analysis {
    /// AI per level (core uses core + stack bytes).
    pub ai: BTreeMap<String, f64>,
    /// One entry per model the roofs and bytes allow.
    pub attainable: Vec<Attainable>,
    /// The model `roof_fraction` and the bound are read from (the tightest available).
    pub primary: Option<ModelKind>,
    pub roof_fraction: Option<f64>,
    pub bound: Bound,
    pub advice: String,
    /// The compute roof the point is judged against and why that one (its FMA share, or why
    /// the highest roof was taken); None for a point that cannot be placed or has no roof.
    #[cfg_attr(feature = "analysis", serde(default))]
    pub compute_roof: Option<ComputeRoofUsed>,
    /// Why the point cannot be placed on a roofline (zero time, zero flops, no bytes).
    pub skipped: Option<String>,
}

/// The compute roof a point is judged against (docs/reports.md, "The compute roof of a
/// point's mix").
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct ComputeRoofUsed {
    /// `AVX-512 FMA`, `AVX-512 at 62 % FMA`, `AVX-512 FMA+add`.
    pub label: String,
    /// GFLOP/s (GOP/s for integer work).
    pub gflops: f64,
    /// The share of the point's flops done by FMAs, when its counts tell (`flops.fma`).
    pub fma_share: Option<f64>,
    /// Why this roof.
    pub why: String,
}

impl Analysis {
    pub fn get(&self, model: ModelKind) -> Option<&Attainable> {
        self.attainable.iter().find(|a| a.model == model)
    }
}

/// AI per level, core-side AI over core + stack bytes (as [`Point::derive`] stores them), in
/// the unit of the point's work ([`point_work`]: ops per byte for integer work).
pub fn ai_per_level(p: &Point) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    for (lvl, b) in &p.bytes {
        if lvl == level::STACK {
            continue;
        }
        let bytes = if lvl == level::CORE {
            p.core_side_bytes().unwrap_or(*b)
        } else {
            *b
        };
        let work = point_work(p);
        if bytes > 0.0 && work > 0.0 {
            out.insert(lvl.clone(), work / bytes);
        }
    }
    out
}

/// Why a point cannot be placed, if it cannot.
pub fn unplaceable(p: &Point) -> Option<String> {
    if !(p.seconds > 0.0 && p.seconds.is_finite()) {
        return Some("zero time: T was not measured or rounded to 0".into());
    }
    let work = point_work(p);
    if work.is_nan() || work <= 0.0 {
        return Some("zero flops: W is 0, a roofline needs flops (use GB/s views)".into());
    }
    if !p.bytes.iter().any(|(l, b)| l != level::STACK && *b > 0.0) {
        return Some("zero bytes: no level has traffic, AI is undefined".into());
    }
    None
}

fn compute_limiter(c: &ComputeRoof) -> Limiter {
    Limiter::Compute {
        isa: c.isa.clone(),
        fma: c.fma,
    }
}

/// The share of a point's floating-point work done by FMAs (0–1), when its counts tell
/// (`flops.fma`).
pub fn fma_share(p: &Point) -> Option<f64> {
    let f = p.flops.fma.filter(|f| f.is_finite() && *f >= 0.0)?;
    (p.flops.total > 0.0).then(|| (f / p.flops.total).clamp(0.0, 1.0))
}

/// Whether a precision's roofs come in FMA and no-FMA modes (the SIMD formats; the
/// mixed-precision units have one multiply-accumulate roof each).
fn has_fma_modes(precision: &str) -> bool {
    matches!(precision, "double" | "single" | "half")
}

/// The compute roof of a point at `isa` (None: the machine's highest for the point's
/// precision): for its mix of FMAs and other operations where its counts tell
/// ([`RoofSet::mix_roof`]), else the highest roof there; with why that one.
pub fn point_compute_roof(p: &Point, roofs: &RoofSet, isa: Option<&str>) -> Option<(ComputeRoof, ComputeRoofUsed)> {
    let prec = point_precision(p);
    let highest = match isa {
        Some(isa) => roofs.at_isa(prec, isa)?,
        None => roofs.peak(prec)?,
    };
    let share = fma_share(p).filter(|_| has_fma_modes(&highest.precision) && highest.precision == prec);
    let mixed = share.and_then(|s| Some((s, roofs.mix_roof(prec, &highest.isa, s)?)));
    let isa_name = isa_label(&highest.isa);
    let Some((s, g)) = mixed else {
        let why = match share {
            _ if !has_fma_modes(&highest.precision) => format!("the {} roof of this precision", highest.label()),
            Some(_) => {
                format!("the highest at {isa_name}: this roof set has no FMA and no-FMA roofs there to weigh the point's mix with")
            }
            None => format!(
                "the highest at {isa_name}: this point's counts{} do not tell FMAs from adds and multiplies, so it may not reach it{}",
                p.provenance.flops.map(|s| format!(" ({})", s.name())).unwrap_or_default(),
                if matches!(p.provenance.flops, Some(Source::Perf | Source::PerfStat)) {
                    " (Intel's FP_ARITH events count an FMA as two flops of its class)"
                } else {
                    ""
                }
            ),
        };
        let used = ComputeRoofUsed {
            label: highest.label(),
            gflops: highest.gflops,
            fma_share: share,
            why,
        };
        return Some((highest.clone(), used));
    };
    let pct = s * 100.0;
    let label = if s >= 0.995 {
        format!("{isa_name} FMA")
    } else if s <= 0.005 {
        format!("{isa_name} no-FMA")
    } else {
        format!("{isa_name} at {pct:.0} % FMA")
    };
    let empirical = roofs
        .compute
        .iter()
        .filter(|c| c.precision == prec && c.isa == highest.isa && !c.mix)
        .all(|c| c.empirical);
    let spread = roofs
        .compute
        .iter()
        .filter(|c| c.precision == prec && c.isa == highest.isa)
        .map(|c| c.spread)
        .fold(0.0, f64::max);
    let roof = ComputeRoof {
        precision: prec.to_string(),
        isa: highest.isa.clone(),
        fma: s > 0.0,
        mix: false,
        gflops: g,
        empirical,
        spread,
    };
    let used = ComputeRoofUsed {
        label,
        gflops: g,
        fma_share: Some(s),
        why: format!(
            "{pct:.0} % of the flops are FMAs: an FMA runs only on the FMA pipes, other operations on any FP pipe (docs/reports.md, \"The compute roof of a point's mix\")"
        ),
    };
    Some((roof, used))
}

/// Classic model: `min(peak, BW_dram · AI_dram)`.
pub fn attainable_dram(p: &Point, roofs: &RoofSet) -> Option<Attainable> {
    let (peak, _) = point_compute_roof(p, roofs, None)?;
    let peak = &peak;
    let ai = *ai_per_level(p).get(level::DRAM)?;
    let (lvl, bw) = roofs.roof_for_bytes(level::DRAM)?;
    Some(min_of(ModelKind::Dram, peak, [(lvl, bw * ai)]))
}

/// Cache-aware model: the core-side AI against each level's roof; the attainable figure is
/// the top one (L1, else the highest bandwidth), capped by the peak. Returns that and the
/// per-level roofs at the point's core AI.
pub fn attainable_cache_aware(p: &Point, roofs: &RoofSet) -> Option<(Attainable, BTreeMap<String, f64>)> {
    let (peak, _) = point_compute_roof(p, roofs, None)?;
    let peak = &peak;
    let ai = *ai_per_level(p).get(level::CORE)?;
    let per_level = map_of(roofs.bandwidth.iter().map(|b| (b.level.clone(), (b.gbs * ai).min(peak.gflops))));
    let top = roofs.top_bandwidth()?;
    Some((min_of(ModelKind::CacheAware, peak, [(top.level.clone(), top.gbs * ai)]), per_level))
}

/// Hierarchical model: `min(peak, min_l BW_l · AI_l)` over levels with both bytes and a roof.
pub fn attainable_hierarchical(p: &Point, roofs: &RoofSet) -> Option<Attainable> {
    let (peak, _) = point_compute_roof(p, roofs, None)?;
    let peak = &peak;
    let candidates: Vec<(String, f64)> = ai_per_level(p)
        .iter()
        .filter_map(|(lvl, ai)| roofs.roof_for_bytes(lvl).map(|(roof, bw)| (roof, bw * ai)))
        .collect();
    if candidates.is_empty() {
        return None;
    }
    Some(min_of(ModelKind::Hierarchical, peak, candidates))
}

fn min_of(model: ModelKind, peak: &ComputeRoof, memory: impl IntoIterator<Item = (String, f64)>) -> Attainable {
    let mut best = Attainable {
        model,
        gflops: peak.gflops,
        limiter: compute_limiter(peak),
    };
    for (lvl, g) in memory {
        if g < best.gflops {
            best = Attainable {
                model,
                gflops: g,
                limiter: Limiter::Memory { level: lvl },
            };
        }
    }
    best
}

/// One line of advice per regime (the classic table), for a machine whose widest compute roof
/// is `widest_isa` (None: unknown): "wider SIMD" only where a wider ISA exists, "a closer
/// cache level" only below L1.
pub fn advice(bound: &Bound, widest_isa: Option<&str>) -> String {
    mix_advice(bound, widest_isa, None, None)
}

/// [`advice`] for a point whose FMA share is `fma_share` (None: unknown), where an all-FMA mix
/// would raise its compute roof by `fma_gain` (all-FMA roof over its mix's roof; None:
/// unknown): no "use FMA" for code made of FMAs, nor where more FMAs would not raise the roof
/// (Zen's add pipes run the rest), the share named where they would.
pub fn mix_advice(bound: &Bound, widest_isa: Option<&str>, fma_share: Option<f64>, fma_gain: Option<f64>) -> String {
    match bound {
        Bound::Overhead => "overhead-bound: a fixed cost dominates — bigger batches, fewer calls/launches, fuse small kernels".into(),
        Bound::Memory { level } if level == level::L1 || level == level::CORE => format!(
            "memory-bound at {}: fewer loads and stores per flop — fuse passes, keep values in registers (register blocking), narrower types",
            level_label(level)
        ),
        Bound::Memory { level } => format!(
            "memory-bound at {}: fuse passes, block/tile for a closer cache level, fewer passes over the data, narrower types",
            level_label(level)
        ),
        Bound::Compute { isa } if isa == "amx" => "compute-bound at AMX tiles: keep the tile unit fed — more accumulator tiles per A and B tile load, B packed in the tile (VNNI) layout, blocks sized for L1/L2".into(),
        Bound::Compute { isa } => {
            let wider = widest_isa.is_none_or(|w| isa_rank(w) > isa_rank(isa)) && isa_rank(isa) < isa_rank("avx512");
            let fma = match (fma_share, fma_gain) {
                (Some(s), _) if s >= 0.95 => "its flops are FMAs already: ".to_string(),
                (Some(s), Some(g)) if g <= 1.05 => format!(
                    "{:.0} % of its flops are FMAs and more would not raise its roof (the other operations run beside them): ",
                    s * 100.0
                ),
                (Some(s), _) => format!("use FMA (only {:.0} % of the flops are FMAs), ", s * 100.0),
                (None, _) => "use FMA, ".to_string(),
            };
            if wider {
                format!(
                    "compute-bound at {}: wider SIMD (vectorize to a wider ISA), {fma}more independent accumulators",
                    isa_label(isa)
                )
            } else {
                format!(
                    "compute-bound at {} (the widest this machine has): {fma}more independent accumulators to hide latency",
                    isa_label(isa)
                )
            }
        }
        Bound::Unknown => "unknown: no roofs or no placeable figures for this point".into(),
    }
}

/// Advice beyond the regime's, for compute-bound points on a machine with faster units: a tile
/// unit (AMX) of the point's own precision above its SIMD roof, or a lower precision (fp16,
/// bf16, int8) whose roof is well above the point's precision's peak. Only roofs the set
/// holds (measured or from the platform table) are named; None otherwise.
pub fn unit_advice(p: &Point, bound: &Bound, roofs: &RoofSet) -> Option<String> {
    let Bound::Compute { isa } = bound else { return None };
    let prec = point_precision(p);
    let own = roofs.at_isa(prec, isa).or_else(|| roofs.peak(prec)).map(|r| r.gflops);
    // 1. A tile unit of the same precision.
    if isa != "amx"
        && let Some(tile) = roofs.at_isa(prec, "amx")
        && own.is_none_or(|o| tile.gflops > 1.5 * o)
    {
        return Some(format!(
            "a tile unit exists: {} reaches {} {} here{} — use AMX tiles (oneDNN, _tile_dp* intrinsics)",
            tile.label(),
            crate::schema::units::sig3(tile.gflops),
            tile.unit(),
            own.map(|o| format!(" ({:.1}x this code's roof)", tile.gflops / o))
                .unwrap_or_default()
        ));
    }
    // 2. A lower precision: the fastest roof of a narrower format than the point's.
    let rank = |f: &str| ["double", "single", "half", "bf16", "int16", "int8"].iter().position(|x| *x == f);
    let own_rank = rank(precision_family(prec))?;
    let lower = roofs
        .compute
        .iter()
        .filter(|c| rank(precision_family(&c.precision)).is_some_and(|r| r > own_rank && r <= 3))
        .max_by(|a, b| a.gflops.total_cmp(&b.gflops))?;
    let peak = roofs.peak(prec).map(|r| r.gflops).or(own)?;
    (lower.gflops > 1.5 * peak).then(|| {
        format!(
            "a lower precision is faster here: {} reaches {} {} ({:.1}x the {} peak) — where accuracy allows (e.g. {} inputs, fp32 accumulation)",
            lower.label(),
            crate::schema::units::sig3(lower.gflops),
            lower.unit(),
            lower.gflops / peak,
            precision_label(prec),
            precision_label(&lower.precision)
        )
    })
}

/// Analyse a point against a set of roofs.
pub fn analyse(p: &Point, roofs: &RoofSet) -> Analysis {
    let ai = ai_per_level(p);
    if let Some(why) = unplaceable(p) {
        let bound = Bound::Unknown;
        return Analysis {
            ai,
            attainable: vec![],
            primary: None,
            roof_fraction: None,
            advice: advice(&bound, roofs.widest_isa()),
            bound,
            compute_roof: None,
            skipped: Some(why),
        };
    }
    let mut attainable = Vec::new();
    attainable.extend(attainable_dram(p, roofs));
    attainable.extend(attainable_cache_aware(p, roofs).map(|(a, _)| a));
    attainable.extend(attainable_hierarchical(p, roofs));
    // The tightest model available: hierarchical, then classic, then cache-aware.
    let primary = [ModelKind::Hierarchical, ModelKind::Dram, ModelKind::CacheAware]
        .into_iter()
        .find(|m| attainable.iter().any(|a| a.model == *m));
    let achieved = point_rate(p).unwrap_or(0.0);
    let prim = primary.and_then(|m| attainable.iter().find(|a| a.model == m));
    let roof_fraction = prim.filter(|a| a.gflops > 0.0).map(|a| achieved / a.gflops);
    let bound = classify(p, roofs, prim, roof_fraction);
    let share = fma_share(p);
    let gain = match (&bound, share) {
        (Bound::Compute { isa }, Some(s)) => {
            let prec = point_precision(p);
            roofs
                .mix_roof(prec, isa, 1.0)
                .zip(roofs.mix_roof(prec, isa, s))
                .map(|(all, mix)| all / mix)
        }
        _ => None,
    };
    let mut text = mix_advice(&bound, roofs.widest_isa(), share, gain);
    // The roof the bound is judged at: the point's own ISA where it has one, else the peak.
    let compute_roof = point_isa(p)
        .and_then(|isa| point_compute_roof(p, roofs, Some(isa)))
        .or_else(|| point_compute_roof(p, roofs, None))
        .map(|(_, used)| used);
    if let Some(more) = unit_advice(p, &bound, roofs) {
        text = format!("{text}; {more}");
    }
    Analysis {
        ai,
        attainable,
        primary,
        roof_fraction,
        advice: text,
        bound,
        compute_roof,
        skipped: None,
    }
}

/// The bound of a placeable point given its primary attainable figure.
pub fn classify(p: &Point, roofs: &RoofSet, primary: Option<&Attainable>, roof_fraction: Option<f64>) -> Bound {
    let fixed_share = p
        .extra
        .get("fixed_seconds")
        .and_then(|v| v.as_f64())
        .filter(|a| a.is_finite() && *a >= 0.0)
        .map(|a| a / p.seconds);
    if fixed_share.is_some_and(|s| s >= OVERHEAD_FIXED_SHARE) {
        return Bound::Overhead;
    }
    if p.seconds < OVERHEAD_SECONDS && roof_fraction.is_some_and(|f| f < OVERHEAD_ROOF_FRACTION) {
        return Bound::Overhead;
    }
    let Some(prim) = primary else { return Bound::Unknown };
    let own_isa = point_isa(p);
    // The point's own ISA roof caps it before the memory roof does: compute-bound at that ISA.
    if let Some(isa) = own_isa
        && let Some((r, _)) = point_compute_roof(p, roofs, Some(isa))
        && r.gflops < prim.gflops
    {
        return Bound::Compute { isa: isa.to_string() };
    }
    match &prim.limiter {
        Limiter::Memory { level } => Bound::Memory { level: level.clone() },
        Limiter::Compute { isa, .. } => Bound::Compute {
            isa: own_isa.map(str::to_string).unwrap_or_else(|| isa.clone()),
        },
    }
}

/// Fit `T(n) = a + b·n` by least squares over a sweep; returns `(a, b)`. None with fewer than
/// two distinct sizes. The fixed cost `a` (clamped at 0) goes in `extra.fixed_seconds` of
/// each swept point so [`classify`] can call it overhead.
pub fn fixed_cost_fit(sizes: &[f64], seconds: &[f64]) -> Option<(f64, f64)> {
    let n = sizes.len().min(seconds.len());
    if n < 2 {
        return None;
    }
    let (xs, ys) = (&sizes[..n], &seconds[..n]);
    let mx = xs.iter().sum::<f64>() / n as f64;
    let my = ys.iter().sum::<f64>() / n as f64;
    let sxx: f64 = xs.iter().map(|x| (x - mx).powi(2)).sum();
    if sxx.is_nan() || sxx <= 0.0 {
        return None;
    }
    let sxy: f64 = xs.iter().zip(ys).map(|(x, y)| (x - mx) * (y - my)).sum();
    let b = sxy / sxx;
    let a = my - b * mx;
    (a.is_finite() && b.is_finite()).then_some((a.max(0.0), b))
}

/// A point above its roof (achieved GFLOP/s over what the primary model allows): a roof set too
/// low (an empirical ceiling under what a library reaches, a peak at the wrong clock) or a
/// count that is wrong. The warning names both numbers; None when the point is at or under.
///
/// Both figures are measured: a point over its roof by less than the two spreads together
/// (the point's timing spread and the roof's measurement spread, each interquartile range
/// over median) is at its roof, not above it (cuBLAS's dgemm reads 100.0 % of the FP64
/// tensor ceiling it set itself).
pub fn above_roof(p: &Point, a: &Analysis, roofs: &RoofSet) -> Option<String> {
    let f = a.roof_fraction.filter(|f| f.is_finite() && *f > 1.0)?;
    let prim = a.primary.and_then(|m| a.attainable.iter().find(|x| x.model == m))?;
    let roof_spread = match &prim.limiter {
        Limiter::Compute { isa, .. } => point_compute_roof(p, roofs, Some(isa))
            .or_else(|| point_compute_roof(p, roofs, None))
            .map_or(0.0, |(r, _)| r.spread),
        Limiter::Memory { level } => roofs.bandwidth.iter().find(|b| &b.level == level).map_or(0.0, |b| b.spread),
    };
    let point_spread = p.spread().filter(|s| s.is_finite()).unwrap_or(0.0);
    if f <= 1.0 + point_spread + roof_spread {
        return None;
    }
    let achieved = point_rate(p)?;
    let roof = match &prim.limiter {
        Limiter::Compute { isa, .. } => format!("the {} {} compute roof", point_precision(p), isa_label(isa)),
        Limiter::Memory { level } => format!("the {} bandwidth roof at its AI", level_label(level)),
    };
    let unit = rate_unit(point_precision(p));
    Some(format!(
        "above its roof: {} reaches {:.4} {unit}, {:.1}% of {roof} ({:.4} {unit}, {} model), beyond the spreads of both (point {:.1} %, roof {:.1} %): the roof is too low (a ceiling under what this code reaches, a peak at another clock) or a count is wrong",
        p.name,
        achieved,
        f * 100.0,
        prim.gflops,
        prim.model.name(),
        point_spread * 100.0,
        roof_spread * 100.0
    ))
}

/// Fill each point's `bound` and `roof_fraction` and record the model's figures in
/// `extra.model` (attainable per model, primary model, advice, skip reason). A point above its
/// roof gets the [`above_roof`] warning in its provenance notes and `extra.model.above_roof`.
pub fn annotate(report: &mut Report, roofs: &RoofSet) -> Vec<Analysis> {
    annotate_by_threads(report, roofs, &[])
}

/// [`annotate`] with roof sets at other thread counts: a point whose thread count has a set in
/// `by_threads` is read against that one, any other against `roofs`.
pub fn annotate_by_threads(report: &mut Report, roofs: &RoofSet, by_threads: &[RoofSet]) -> Vec<Analysis> {
    let mut out = Vec::with_capacity(report.points.len());
    for p in &mut report.points {
        p.derive();
        let roofs = by_threads.iter().find(|s| s.threads == Some(p.threads)).unwrap_or(roofs);
        let a = analyse(p, roofs);
        let above = above_roof(p, &a, roofs);
        if let Some(w) = &above {
            // Re-annotating (a report read back) keeps one copy.
            p.provenance.notes.retain(|n| !n.starts_with("above its roof:"));
            p.provenance.notes.push(w.clone());
        }
        p.bound = (a.skipped.is_none()).then(|| a.bound.clone());
        p.roof_fraction = a.roof_fraction;
        let mut attainable = serde_json::Map::new();
        attainable.extend(
            a.attainable
                .iter()
                .map(|x| (x.model.key().to_string(), serde_json::json!(x.gflops))),
        );
        p.extra.insert(
            "model".into(),
            serde_json::json!({
                "attainable_gflops": attainable,
                "roof_fraction_model": a.primary.map(|m| m.key()),
                "advice": a.advice,
                "compute_roof": a.compute_roof,
                "skipped": a.skipped,
                "above_roof": above,
            }),
        );
        out.push(a);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::report::{Bytes, Flops, Provenance};

    fn roofs() -> RoofSet {
        let mut r = Roofs {
            kind: "empirical".into(),
            threads: Some(1),
            ..Default::default()
        };
        r.compute_gflops.insert("double.avx512.fma".into(), 100.0);
        r.compute_gflops.insert("double.avx512.nofma".into(), 50.0);
        r.compute_gflops.insert("double.scalar.fma".into(), 10.0);
        r.bandwidth_gbs.insert("l1".into(), 400.0);
        r.bandwidth_gbs.insert("l2".into(), 200.0);
        r.bandwidth_gbs.insert("l3".into(), 100.0);
        r.bandwidth_gbs.insert("dram".into(), 20.0);
        RoofSet::from_roofs(&r)
    }

    fn point(flops: f64, class: &str, bytes: &[(&str, f64)], secs: f64) -> Point {
        let mut by_class = BTreeMap::new();
        by_class.insert(class.to_string(), flops);
        let b: Bytes = bytes.iter().map(|(k, v)| (k.to_string(), *v)).collect();
        Point::new(
            "p",
            Provenance {
                flops: None,
                bytes: BTreeMap::new(),
                seconds: None,
                notes: vec![],
                untrusted: Vec::new(),
            },
            Flops {
                total: flops,
                effective: None,
                by_class,
                ..Default::default()
            },
            b,
            1,
            vec![secs],
        )
    }

    #[test]
    fn three_models_by_hand() {
        // W = 1e9 flop, core 2e9 + stack 2e9 B → AI_core 0.25; L2 1e9 → 1; L3 5e8 → 2; DRAM 1e8 → 10.
        let p = point(
            1e9,
            "packed512_double",
            &[("core", 2e9), ("stack", 2e9), ("l2", 1e9), ("l3", 5e8), ("dram", 1e8)],
            0.1,
        );
        let r = roofs();
        let ai = ai_per_level(&p);
        assert_eq!(ai["core"], 0.25);
        assert_eq!(ai["dram"], 10.0);
        // classic: min(100, 20·10=200) = 100, compute
        let d = attainable_dram(&p, &r).unwrap();
        assert_eq!(d.gflops, 100.0);
        assert!(matches!(d.limiter, Limiter::Compute { .. }));
        // CARM: L1 roof 400·0.25 = 100 → equal to peak: compute (ties keep the peak)
        let (c, per) = attainable_cache_aware(&p, &r).unwrap();
        assert_eq!(c.gflops, 100.0);
        assert_eq!(per["l2"], 50.0);
        assert_eq!(per["dram"], 5.0);
        // hierarchical: core 400·.25=100, l2 200·1=200, l3 100·2=200, dram 200 → 100 (peak tie)
        let h = attainable_hierarchical(&p, &r).unwrap();
        assert_eq!(h.gflops, 100.0);
        // Now make L2 traffic heavier: l2 4e9 → AI .25 → 50 GFLOP/s, memory at L2.
        let p2 = point(1e9, "packed512_double", &[("core", 2e9), ("l2", 4e9), ("dram", 1e8)], 0.1);
        let h2 = attainable_hierarchical(&p2, &r).unwrap();
        assert_eq!(h2.gflops, 50.0);
        assert_eq!(h2.limiter, Limiter::Memory { level: "l2".into() });
        let a = analyse(&p2, &r);
        assert_eq!(a.primary, Some(ModelKind::Hierarchical));
        // achieved 1e9/0.1 = 10 GFLOP/s → 20 % of 50
        assert!((a.roof_fraction.unwrap() - 0.2).abs() < 1e-12);
        assert_eq!(a.bound, Bound::Memory { level: "l2".into() });
        assert!(a.advice.contains("L2"), "{}", a.advice);
    }

    /// Uniform draws in [0, 1) from a clock-seeded xorshift (a new draw every run).
    fn uniform_draws() -> impl FnMut() -> f64 {
        let mut seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1;
        move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed >> 11) as f64 / (1u64 << 53) as f64
        }
    }

    /// Roofs of a core with `a` FMA pipes and `b` add-only pipes (Zen: 2 + 2; Intel: 2 + 0) of
    /// `lanes` doubles at `ghz`, as the peak kernels measure them: all FMA, multiply + add, and
    /// FMA + add (the best mix).
    fn pipe_roofs(a: f64, b: f64, lanes: f64, ghz: f64) -> (RoofSet, f64, f64) {
        let (fma, nofma) = (2.0 * a * lanes * ghz, (a + b) * lanes * ghz);
        // FMA + add at its best: the FMA pipes on FMAs, the add pipes on adds.
        let fma_add = (2.0 * a + b) * lanes * ghz;
        let mut r = Roofs {
            kind: "empirical".into(),
            threads: Some(1),
            ..Default::default()
        };
        r.compute_gflops.insert("double.avx512.fma".into(), fma);
        r.compute_gflops.insert("double.avx512.nofma".into(), nofma);
        r.compute_gflops.insert("double.avx512.fma_add".into(), fma_add.max(fma));
        r.bandwidth_gbs.insert("l1".into(), 1e6);
        r.bandwidth_gbs.insert("dram".into(), 1e5);
        (RoofSet::from_roofs(&r), fma, nofma)
    }

    #[test]
    fn a_points_compute_roof_is_the_one_its_fma_share_can_reach() {
        let mut next = uniform_draws();
        for round in 0..200 {
            let zen = round % 2 == 0;
            let (a, b) = if zen { (2.0, 2.0) } else { (2.0, 0.0) };
            let lanes = [2.0, 4.0, 8.0][(next() * 3.0) as usize % 3];
            let ghz = 1.5 + 2.5 * next();
            let (r, fma_roof, _) = pipe_roofs(a, b, lanes, ghz);
            let share = match round % 5 {
                0 => 1.0,
                1 => 0.0,
                _ => next(),
            };
            // The pipe model itself: FMA ops (share/2 per flop) only on the `a` pipes; all ops
            // (FMAs and the rest, 1 − share per flop) on the a + b pipes.
            let cycles_per_flop = ((share / 2.0) / a).max((share / 2.0 + 1.0 - share) / (a + b)) / (lanes * ghz);
            let want = 1.0 / cycles_per_flop;
            let got = r.mix_roof("double", "avx512", share).unwrap();
            // (Roofs and the model are computed in a different order: a few ulps apart.)
            assert!(
                (got - want).abs() <= 1e-12 * want,
                "round {round} zen {zen} share {share}: {got} vs {want}"
            );
            // A point of that share, compute-bound (AI far above the ridge), at 90 % of it.
            let w = 1e9 * (1.0 + next());
            let mut p = point(
                w,
                "packed512_double",
                &[("core", w / 1e3), ("dram", w / 1e4)],
                w / (0.9 * want * 1e9),
            );
            p.flops.fma = Some(share * w);
            let an = analyse(&p, &r);
            let used = an.compute_roof.clone().unwrap();
            assert!((used.gflops - want).abs() <= 1e-12 * want, "{used:?} vs {want}");
            assert_eq!(an.bound, Bound::Compute { isa: "avx512".into() });
            // (0.9 of the roof, up to the rounding of w / T and back.)
            assert!((an.roof_fraction.unwrap() - 0.9).abs() < 1e-9, "{:?}", an.roof_fraction);
            if share == 1.0 {
                // All FMA: the FMA roof (never the FMA+add one), and no "use FMA".
                assert!((used.gflops - fma_roof).abs() <= 1e-12 * fma_roof);
                assert_eq!(used.label, "AVX-512 FMA");
                assert!(!an.advice.contains("use FMA"), "{}", an.advice);
                assert!(an.advice.contains("FMAs already"), "{}", an.advice);
            } else if share < 0.95 {
                // "Use FMA" only where an all-FMA mix has a higher roof: on Intel always (the
                // FMA roof is twice the other operations'), on Zen only below 2/3 FMA-free work.
                let all_fma = r.mix_roof("double", "avx512", 1.0).unwrap();
                let raises = all_fma > 1.05 * want;
                assert_eq!(
                    an.advice.contains("use FMA (only"),
                    raises,
                    "zen {zen} share {share}: {}",
                    an.advice
                );
                assert_eq!(an.advice.contains("more would not raise its roof"), !raises, "{}", an.advice);
            }
            // The same point from a backend that cannot tell FMAs apart (Intel FP_ARITH): the
            // highest roof, said so.
            p.flops.fma = None;
            let an = analyse(&p, &r);
            let used = an.compute_roof.unwrap();
            let highest = r.peak("double").unwrap().gflops;
            assert_eq!(used.gflops, highest);
            assert!(used.fma_share.is_none() && used.why.contains("do not tell FMAs"), "{used:?}");
        }
    }

    #[test]
    fn a_point_over_its_roof_by_less_than_both_spreads_is_at_it() {
        let mut next = uniform_draws();
        for round in 0..300 {
            let roof_spread = 0.05 * next();
            let mut r = Roofs {
                kind: "empirical".into(),
                threads: Some(1),
                ..Default::default()
            };
            r.compute_gflops.insert("double.avx512.fma".into(), 100.0);
            r.compute_gflops.insert("double.avx512.nofma".into(), 50.0);
            r.spread.insert("double.avx512.fma".into(), roof_spread);
            r.spread.insert("double.avx512.nofma".into(), roof_spread);
            r.bandwidth_gbs.insert("l1".into(), 1e6);
            r.bandwidth_gbs.insert("dram".into(), 1e5);
            let roofs = RoofSet::from_roofs(&r);
            // Compute-bound all-FMA point; its samples spread by `d` around the median.
            let over = 1.0 + 0.12 * next();
            let d = 0.04 * next();
            let median = 1e9 / (over * 100.0 * 1e9);
            let samples: Vec<f64> = [1.0 - d, 1.0 - d / 2.0, 1.0, 1.0 + d / 2.0, 1.0 + d]
                .iter()
                .map(|k| k * median)
                .collect();
            let mut p = point(1e9, "packed512_double", &[("core", 1e6), ("dram", 1e5)], median);
            p.seconds_samples = samples;
            p.flops.fma = Some(1e9);
            p.derive();
            let a = analyse(&p, &roofs);
            let f = a.roof_fraction.unwrap();
            let tolerance = p.spread().unwrap() + roof_spread;
            let warned = above_roof(&p, &a, &roofs);
            // (Decided on the fraction the model computed; the draw only places it near the edge.)
            assert_eq!(
                warned.is_some(),
                f > 1.0 + tolerance,
                "round {round}: fraction {f}, tolerance {tolerance}: {warned:?}"
            );
        }
    }

    #[test]
    fn compute_bound_at_own_isa() {
        // scalar code with high AI: scalar roof 10 < peak 100 → compute at scalar
        let p = point(1e9, "scalar_double", &[("core", 1e8), ("dram", 1e7)], 0.2);
        let a = analyse(&p, &roofs());
        assert_eq!(a.bound, Bound::Compute { isa: "scalar".into() });
        assert!(a.advice.contains("wider SIMD"));
        // avx512 code with high AI: compute at avx512, no "wider SIMD"
        let p = point(1e9, "packed512_double", &[("core", 1e8), ("dram", 1e7)], 0.02);
        let a = analyse(&p, &roofs());
        assert_eq!(a.bound, Bound::Compute { isa: "avx512".into() });
        assert!(!a.advice.contains("wider SIMD"));
        assert!((a.roof_fraction.unwrap() - 0.5).abs() < 1e-12);
    }

    #[test]
    fn overhead_rules() {
        // tiny T (10 µs) and a low roof fraction: 0.1 GFLOP/s against a DRAM roof of 20·0.1 = 2
        let p = point(1e3, "packed512_double", &[("core", 1e4), ("dram", 1e4)], 1e-5);
        assert_eq!(analyse(&p, &roofs()).bound, Bound::Overhead);
        // tiny T but at the roof: not overhead
        let p = point(1e3, "packed512_double", &[("core", 1e4), ("dram", 1e4)], 5e-7);
        // 2 GFLOP/s at dram roof 20·0.1 = 2 → fraction 1
        assert_eq!(analyse(&p, &roofs()).bound, Bound::Memory { level: "dram".into() });
        // a fitted fixed cost above half of T
        let mut p = point(1e9, "packed512_double", &[("core", 1e9), ("dram", 1e9)], 1.0);
        p.extra.insert("fixed_seconds".into(), serde_json::json!(0.6));
        assert_eq!(analyse(&p, &roofs()).bound, Bound::Overhead);
        assert!(advice(&Bound::Overhead, None).contains("bigger batches"));
        // "Wider SIMD" only where the machine has a wider ISA than the point's.
        let avx2 = Bound::Compute { isa: "avx2".into() };
        assert!(advice(&avx2, Some("avx512")).contains("wider SIMD"));
        assert!(!advice(&avx2, Some("avx2")).contains("wider SIMD"));
        assert!(advice(&avx2, Some("avx2")).contains("widest this machine has"));
        // L1-bound code cannot move to a closer cache level.
        let l1 = Bound::Memory { level: "l1".into() };
        assert!(!advice(&l1, None).contains("closer cache level"));
        assert!(advice(&Bound::Memory { level: "l3".into() }, None).contains("closer cache level"));
    }

    #[test]
    fn fit_recovers_fixed_cost() {
        // T = 3e-6 + 2e-9·n exactly
        let ns = [1e3, 1e4, 1e5, 1e6];
        let ts: Vec<f64> = ns.iter().map(|n| 3e-6 + 2e-9 * n).collect();
        let (a, b) = fixed_cost_fit(&ns, &ts).unwrap();
        assert!((a - 3e-6).abs() < 1e-12, "{a}");
        assert!((b - 2e-9).abs() < 1e-15, "{b}");
        assert!(fixed_cost_fit(&[1.0, 1.0], &[1.0, 2.0]).is_none());
    }

    #[test]
    fn unplaceable_points_say_why() {
        let p = point(1e9, "packed512_double", &[("core", 1e9)], 0.0);
        assert!(analyse(&p, &roofs()).skipped.unwrap().contains("zero time"));
        let p = point(1e9, "packed512_double", &[("core", 0.0)], 1.0);
        assert!(analyse(&p, &roofs()).skipped.unwrap().contains("zero bytes"));
        let p = point(0.0, "packed512_double", &[("core", 1.0)], 1.0);
        assert!(analyse(&p, &roofs()).skipped.unwrap().contains("zero flops"));
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn level_bytes_read_against_traffic_roofs_core_bytes_against_core_roofs() {
        // A triad's DRAM traffic is 4/3 of its core bytes (write-allocate): 32 B/element at
        // the level vs 24 B core-side. The machine's DRAM roof: 21 GB/s core-side, 28 GB/s
        // of traffic (the same run counted both ways), plus a non-temporal copy at 25 GB/s.
        let mut rng = 0x9e37_79b9_u64;
        for _ in 0..50 {
            rng = rng.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let n = 1e6 + (rng >> 40) as f64; // elements
            let gbs_traffic = 20.0 + (rng >> 58) as f64; // what the kernel reached, ≤ 35
            let secs = 32.0 * n / (gbs_traffic * 1e9);
            let p = point(2.0 * n, "packed256_double", &[("core", 24.0 * n), ("dram", 32.0 * n)], secs);
            let doc = serde_json::json!({
                "schema": "roofline.ceilings/1",
                "compute": [{"precision": "double", "isa": "avx2", "fma": true, "mode": "fma", "gflops": 50.0}],
                "bandwidth": [
                    {"level": "L1", "kernel": "load", "gbs": 150.0, "gbs_write_allocate": 150.0},
                    {"level": "DRAM", "kernel": "triad", "gbs": 21.0 + gbs_traffic / 2.0, "gbs_write_allocate": (21.0 + gbs_traffic / 2.0) * 4.0 / 3.0},
                    {"level": "DRAM", "kernel": "copy_nt", "gbs": 25.0, "gbs_write_allocate": 25.0}
                ]
            });
            let r = RoofSet::from_ceilings_json(&doc.to_string(), "t", None).unwrap();
            let roof_core = 21.0 + gbs_traffic / 2.0;
            assert_eq!(r.bandwidth("dram"), Some(roof_core), "the NT kernel is not a core-side roof");
            let traffic = r.roof_for_bytes("dram").unwrap().1;
            assert!((traffic - roof_core * 4.0 / 3.0).abs() < 1e-9);
            // Classic model: DRAM bytes against the traffic roof, so reaching a fraction
            // f of that roof reads as f, never above 1 for a physical run.
            let d = attainable_dram(&p, &r).unwrap();
            let achieved = 2.0 * n / secs / 1e9;
            assert!((achieved / d.gflops - gbs_traffic / traffic).abs() < 1e-9);
            assert!(achieved / d.gflops <= 1.0 + 1e-12);
            // CARM: the same point by core AI against the core-side L1 roof.
            let (c, per) = attainable_cache_aware(&p, &r).unwrap();
            assert!((c.gflops - 150.0 * 2.0 / 24.0).abs() < 1e-9);
            assert!((per["dram"] - roof_core * 2.0 / 24.0).abs() < 1e-9);
        }
        // Round trip through a report's roofs keeps both conventions.
        let r = RoofSet::from_roofs(
            &RoofSet::from_ceilings_json(
                &serde_json::json!({"schema": "roofline.ceilings/1", "bandwidth": [
                {"level": "dram", "kernel": "triad", "gbs": 18.0, "gbs_write_allocate": 24.0}]})
                .to_string(),
                "t",
                None,
            )
            .unwrap()
            .to_roofs(),
        );
        assert_eq!(r.bandwidth("dram"), Some(18.0));
        assert_eq!(r.roof_for_bytes("dram").unwrap().1, 24.0);
        assert_eq!(r.roof_for_bytes("core"), None, "core bytes read against L1, absent here");
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn a_mixed_roof_set_keeps_which_roofs_are_theoretical_through_a_report() {
        let mut measured = Roofs {
            kind: "empirical".into(),
            threads: Some(1),
            ..Default::default()
        };
        measured.compute_gflops.insert("double.avx2.fma".into(), 50.0);
        measured.bandwidth_gbs.insert("l1".into(), 140.0);
        let mut s = RoofSet::from_roofs(&measured);
        let mut theory = Roofs {
            kind: "theoretical".into(),
            threads: Some(1),
            ..Default::default()
        };
        theory.compute_gflops.insert("double.avx2.fma".into(), 52.0);
        theory.compute_gflops.insert("double.avx2.nofma".into(), 26.0);
        theory.bandwidth_gbs.insert("l1_load".into(), 207.0);
        s.fill_from(&RoofSet::from_roofs(&theory));
        let saved = s.to_roofs();
        assert_eq!(saved.kind, "mixed");
        let json = serde_json::to_string(&saved).unwrap();
        let back = RoofSet::from_roofs(&serde_json::from_str(&json).unwrap());
        let style = |r: &RoofSet| -> Vec<(String, bool)> {
            r.compute
                .iter()
                .map(|c| (c.key(), c.empirical))
                .chain(r.bandwidth.iter().map(|b| (b.level.clone(), b.empirical)))
                .collect()
        };
        assert_eq!(style(&back), style(&s));
        assert!(
            back.compute
                .iter()
                .any(|c| c.key() == "double.avx2.fma" && c.empirical && c.gflops == 50.0)
        );
        assert!(back.compute.iter().any(|c| c.key() == "double.avx2.nofma" && !c.empirical));
        assert!(back.bandwidth.iter().any(|b| b.level == "l1_load" && !b.empirical));
    }

    #[test]
    fn fma_add_mix_keeps_its_own_label() {
        let mut r = Roofs::default();
        r.compute_gflops.insert("double.avx2.fma".into(), 50.0);
        r.compute_gflops.insert("double.avx2.fma_add".into(), 73.0);
        r.compute_gflops.insert("double.avx2.mul_add".into(), 49.0);
        let s = RoofSet::from_roofs(&r);
        let labels: Vec<String> = s.compute.iter().map(|c| c.label()).collect();
        assert!(labels.contains(&"AVX2 FMA+add".to_string()), "{labels:?}");
        assert!(labels.contains(&"AVX2 no-FMA".to_string()), "{labels:?}");
        assert_eq!(s.peak("double").unwrap().label(), "AVX2 FMA+add");
        let back = s.to_roofs();
        assert_eq!(
            back.compute_gflops.keys().collect::<Vec<_>>(),
            vec!["double.avx2.fma", "double.avx2.fma_add", "double.avx2.nofma"]
        );
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn ceilings_file_reader() {
        let doc = serde_json::json!({
            "schema": "roofline.ceilings/1",
            "compute": [
                {"precision": "double", "isa": "avx512", "fma": true, "threads": 1, "gflops": 80.0, "ghz": 3.0},
                {"precision": "double", "isa": "avx512", "fma": true, "threads": 2, "gflops": 150.0, "ghz": 3.0},
                {"precision": "double", "isa": "scalar", "fma": false, "threads": 2, "gflops": 6.0, "ghz": 3.0}
            ],
            "bandwidth": [
                {"level": "L1", "kernel": "load", "threads": 2, "working_set_bytes": 16384, "gbs": 500.0, "bytes_convention": "core"},
                {"level": "l1", "kernel": "copy", "threads": 2, "working_set_bytes": 16384, "gbs": 450.0, "bytes_convention": "core"},
                {"level": "dram", "kernel": "triad", "threads": 2, "working_set_bytes": 1e9, "gbs": 30.0, "bytes_convention": "core"}
            ]
        });
        let s = RoofSet::from_ceilings_json(&doc.to_string(), "c.json", None).unwrap();
        assert_eq!(s.threads, Some(2));
        assert_eq!(s.peak("double").unwrap().gflops, 150.0);
        assert_eq!(s.bandwidth("l1"), Some(500.0));
        assert_eq!(s.compute.len(), 2);
        let s1 = RoofSet::from_ceilings_json(&doc.to_string(), "c.json", Some(1)).unwrap();
        assert_eq!(s1.peak("double").unwrap().gflops, 80.0);
        // Not measured at 3 or 16 threads: the nearest measured count, 2.
        for t in [3, 16] {
            let s = RoofSet::from_ceilings_json(&doc.to_string(), "c.json", Some(t)).unwrap();
            assert_eq!((s.threads, s.peak("double").unwrap().gflops), (Some(2), 150.0));
        }
        // round trip through the report's summary
        let back = RoofSet::from_roofs(&s.to_roofs());
        assert_eq!(back, s);
        for bad in ["{", "{\"schema\":\"roofline.report/1\"}", "{\"schema\":\"roofline.ceilings/2\"}"] {
            assert!(RoofSet::from_ceilings_json(bad, "c.json", None).is_err(), "{bad}");
        }
        let neg = doc.to_string().replace("30.0", "-30.0");
        assert!(RoofSet::from_ceilings_json(&neg, "c.json", None).is_err());
    }

    /// A point of one class whose W is split as the report schema splits it (integer classes
    /// in `int_ops`, not in `total`).
    fn class_point(class: &str, work: f64, bytes: f64, secs: f64) -> Point {
        let mut p = point(work, class, &[("core", bytes), ("dram", bytes / 4.0)], secs);
        p.flops = Flops::of_classes([(class.to_string(), work)].into_iter().collect());
        p.derive();
        p
    }

    fn mixed_roofs() -> RoofSet {
        let mut r = Roofs {
            kind: "empirical".into(),
            threads: Some(1),
            ..Default::default()
        };
        r.compute_gflops.insert("double.avx512.fma".into(), 100.0);
        r.compute_gflops.insert("bf16.avx512.fma".into(), 80.0);
        r.compute_gflops.insert("bf16.amx.fma".into(), 2800.0);
        r.compute_gflops.insert("int8.amx.fma".into(), 5600.0);
        r.bandwidth_gbs.insert("l1".into(), 4000.0);
        r.bandwidth_gbs.insert("dram".into(), 200.0);
        RoofSet::from_roofs(&r)
    }

    #[test]
    fn mixed_precision_points_read_against_their_own_family() {
        let mut rng = 0x2545_f491_4f6c_dd1d_u64 ^ u64::from(std::process::id());
        let mut next = || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            (rng >> 11) as f64 / (1u64 << 53) as f64
        };
        let r = mixed_roofs();
        for _ in 0..20 {
            // High AI (compute-bound): W/bytes in 50..100.
            let work = 1e9 * (1.0 + next());
            let bytes = work / (50.0 + 50.0 * next());
            let frac = 0.2 + 0.7 * next();
            // AMX bf16 at `frac` of its roof.
            let p = class_point("tile_bf16", work, bytes, work / (frac * 2800.0e9));
            assert_eq!(point_precision(&p), "bf16");
            assert_eq!(point_isa(&p), Some("amx"));
            let a = analyse(&p, &r);
            assert_eq!(a.bound, Bound::Compute { isa: "amx".into() });
            assert!((a.roof_fraction.unwrap() - frac).abs() < 1e-9, "{a:?}");
            // AMX int8: W is integer operations (not in flops.total), read against GOP/s roofs.
            let p = class_point("tile_int8", work, bytes, work / (frac * 5600.0e9));
            assert_eq!(p.flops.total, 0.0);
            assert_eq!(point_precision(&p), "int8");
            assert_eq!(point_work(&p), work);
            assert!((point_rate(&p).unwrap() - frac * 5600.0).abs() < 1e-6 * 5600.0);
            let a = analyse(&p, &r);
            assert!(a.skipped.is_none(), "{a:?}");
            assert!((a.roof_fraction.unwrap() - frac).abs() < 1e-9, "{a:?}");
            assert!((a.ai["core"] - work / bytes).abs() < 1e-9 * work / bytes);
            // vdpbf16ps code: compute-bound at AVX-512's bf16 roof, and told of the tile unit.
            let p = class_point("packed512_bf16", work, bytes, work / (frac * 80.0e9));
            let a = analyse(&p, &r);
            assert_eq!(a.bound, Bound::Compute { isa: "avx512".into() });
            // The fraction is of the precision's peak (any unit), as for FP64 code.
            assert!((a.roof_fraction.unwrap() - frac * 80.0 / 2800.0).abs() < 1e-9);
            assert!(
                a.advice.contains("a tile unit exists") && a.advice.contains("35.0x"),
                "{}",
                a.advice
            );
            // Double-precision code: told of the lower precision's roof.
            let p = class_point("packed512_double", work, bytes, work / (frac * 100.0e9));
            let a = analyse(&p, &r);
            assert!(a.advice.contains("a lower precision is faster here"), "{}", a.advice);
            assert!(a.advice.contains("BF16 AMX tiles"), "{}", a.advice);
        }
        // Memory-bound bf16 code gets no unit advice.
        let p = class_point("tile_bf16", 1e9, 1e10, 1.0);
        assert!(!analyse(&p, &r).advice.contains("tile unit"));
    }

    #[test]
    fn a_machine_without_the_unit_has_no_roof_for_its_precision() {
        // Only FP64 roofs (a Zen 3): bf16 and int8 points get no roof, never the FP64 one.
        let r = roofs();
        for class in ["tile_bf16", "packed512_bf16", "tile_int8", "packed256_int8", "packed512_half"] {
            let p = class_point(class, 1e9, 1e7, 0.01);
            assert!(r.peak(point_precision(&p)).is_none(), "{class}");
            let a = analyse(&p, &r);
            assert_eq!(a.roof_fraction, None, "{class}");
            assert!(a.attainable.is_empty(), "{class}");
        }
        // Double and single still fall back to each other.
        assert_eq!(r.peak("single").unwrap().precision, "double");
    }

    #[test]
    fn precision_of_mixed_points_and_families() {
        let mut p = class_point("tile_bf16", 1e9, 1e6, 1.0);
        p.flops.by_class.insert("packed512_single".into(), 2e8);
        assert_eq!(point_precision(&p), "bf16");
        p.flops.by_class.insert("packed512_single".into(), 2e9);
        assert_eq!(point_precision(&p), "single");
        let p = class_point("packed256_half", 1e9, 1e6, 1.0);
        assert_eq!(point_precision(&p), "half");
        assert_eq!(point_isa(&p), Some("avx2"));
        let p = class_point("packed512_int16", 1e9, 1e6, 1.0);
        assert_eq!(point_precision(&p), "int16");
        assert_eq!(precision_family("tensor_bf16"), precision_family("bf16"));
        assert_eq!(precision_family("tensor_fp16"), "half");
        assert_eq!(precision_family("tensor_fp64"), "double");
        assert_ne!(precision_family("tensor_tf32"), precision_family("single"));
        assert!(isa_rank("amx") > isa_rank("avx512"));
        let r = mixed_roofs();
        let bf16: Vec<String> = r.of_family("bf16").map(|c| c.label()).collect();
        assert_eq!(bf16, vec!["BF16 AVX-512 dot", "BF16 AMX tiles"]);
        assert_eq!(r.at_isa("int8", "amx").unwrap().unit(), "GOP/s");
        assert_eq!(r.precisions(), vec!["bf16", "double", "int8"]);
        // The keys survive a report round trip.
        assert_eq!(RoofSet::from_roofs(&r.to_roofs()), r);
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn theoretical_roofs_include_the_mixed_units_of_the_machine_model() {
        let doc = serde_json::json!({
            "schema": "roofline.machine/1", "vendor": "GenuineIntel", "family": 6, "model": 143, "stepping": 8,
            "brand": "Test SPR", "microarchitecture": "spr", "microarchitecture_name": "Sapphire Rapids",
            "identified_by": "cpuid model", "hypervisor": null, "sockets": 1, "cores": 8, "threads": 16, "smt": true,
            "caches": [], "isa": ["avx512f", "amx_bf16"], "fp_pipes": {}, "fp_pipes_source": "platform table",
            "frequency_ghz": {"nominal": 2.0, "nominal_source": "test", "measured": 2.5, "by_isa": {}, "by_isa_all_threads": {}, "override_ghz": null},
            "peak_gflops": {"double": {"avx512": 1280.0}, "single": {}},
            "peak_gflops_per_core": {"double": {"avx512": 80.0}, "single": {}},
            "mixed_ops_per_cycle": {"bf16.amx": 1024.0, "int8.amx": 2048.0},
            "peak_mixed_per_core": {"bf16.amx": 2560.0, "int8.amx": 5120.0},
            "peak_mixed": {"bf16.amx": 20480.0, "int8.amx": 40960.0}
        });
        let m: MachineModel = serde_json::from_value(doc).unwrap();
        let t = 3;
        let r = RoofSet::theoretical(&m, t);
        let amx = r.at_isa("bf16", "amx").unwrap();
        assert_eq!(amx.gflops, 2560.0 * f64::from(t));
        assert!(!amx.empirical);
        assert_eq!(r.at_isa("int8", "amx").unwrap().gflops, 5120.0 * f64::from(t));
        assert_eq!(r.peak("double").unwrap().gflops, 80.0 * f64::from(t));
        // A measured bf16 roof keeps its place; the theory fills the int8 one.
        let mut measured = mixed_roofs();
        measured.compute.retain(|c| c.precision != "int8");
        measured.fill_from(&r);
        assert_eq!(measured.at_isa("bf16", "amx").unwrap().gflops, 2800.0);
        assert!(!measured.at_isa("int8", "amx").unwrap().empirical);
    }
}
