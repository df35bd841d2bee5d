//! Roof sets: the compute and bandwidth roofs a report is read against, from a report's
//! `ceilings`, a `roofline.ceilings/1` file or the machine model's theoretical peaks.

#[cfg(feature = "analysis")]
use crate::error::Error;
use crate::machine::MachineModel;
#[cfg(feature = "analysis")]
use crate::schema::ceilings::Ceilings;
use crate::schema::report::{Report, Roofs, level};
use crate::util::map_of;

use super::labels::{isa_label, isa_rank, level_rank, precision_family, precision_label, rate_unit};

/// One compute roof: GFLOP/s of a precision at an ISA, with or without FMA.
#[derive(Debug, Clone, PartialEq)]
pub struct ComputeRoof {
    /// `double`, `single`, `half`, `bf16`, `int8`, … (a flop class's precision).
    pub precision: String,
    /// `scalar`, `sse`, `avx`, `avx2`, `avx512`, `amx`, `gpu`.
    pub isa: String,
    /// Whether FMA counts as two operations (the FMA roof) or the roof is of adds and multiplies.
    pub fma: bool,
    /// FMA issued together with separate adds (Zen's FADD pipes beside its FMA pipes): the
    /// highest figure such a core reaches, only for code that mixes the two.
    pub mix: bool,
    /// GFLOP/s (GOP/s for integer precisions).
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
    /// `l1`, `l2`, `l3`, `dram` (or a GPU level).
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
    /// Measured (solid in plots) or theoretical (dashed).
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
    /// Compute roofs, by precision, then ISA from the narrowest.
    pub compute: Vec<ComputeRoof>,
    /// Bandwidth roofs, closest level first.
    pub bandwidth: Vec<BandwidthRoof>,
    /// The thread count the roofs were measured or computed for; None: not known.
    pub threads: Option<u32>,
    /// Notes on how they were measured (`Roofs.notes`).
    pub notes: Vec<String>,
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
            notes: r.notes.clone(),
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
            notes: self.notes.clone(),
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
    /// bytes/cycle times the clock times threads for each level the platform knows. On every
    /// core the per-core peak runs at the all-core clock of its ISA (the model's all-core peak
    /// over cores, where lower): one core's turbo is no roof for sixteen.
    pub fn theoretical(m: &MachineModel, threads: u32) -> RoofSet {
        let cores = m.cores.max(1);
        let t = f64::from(threads.clamp(1, cores));
        // The all-core clock's share of the one-core clock, from the model's two peaks.
        let all_core_share = |per_core: f64, all_cores: Option<f64>| match all_cores {
            Some(all) if threads >= cores && cores > 1 && all.is_finite() && all > 0.0 => (all / (per_core * f64::from(cores))).min(1.0),
            _ => 1.0,
        };
        let mut compute = Vec::new();
        for (precision, by, all) in [
            ("double", &m.peak_gflops_per_core.double, &m.peak_gflops.double),
            ("single", &m.peak_gflops_per_core.single, &m.peak_gflops.single),
        ] {
            for isa in crate::machine::ByIsa::ISAS {
                if let Some(g) = by.get(isa).filter(|g| g.is_finite() && *g > 0.0) {
                    let g = g * all_core_share(g, all.get(isa));
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
                    gflops: g * all_core_share(*g, m.peak_mixed.get(unit).copied()) * t,
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
            notes: Vec::new(),
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
        if let Some(mut theory) = RoofSet::theoretical_from_json(&report.machine, self.threads.unwrap_or(threads)) {
            theory.cap_below_wider_measured(self);
            self.fill_from(&theory);
        }
    }

    /// Hold each compute roof of this (theoretical) set at or below every measured roof in
    /// `measured` that bounds it: of the same precision and mode at a wider vector ISA (up to
    /// AVX-512; tiles and GPUs are other units), and, for a roof without FMA, of FMA at the same
    /// or a wider ISA. A narrower vector, or a multiply and an add in place of an FMA, runs on
    /// the same pipes at no higher rate, so a paper peak above what was measured (a clock read
    /// while the host was quiet, the peaks measured while it was busy) is a roof no code
    /// reaches. The roof stays theoretical (dashed).
    pub fn cap_below_wider_measured(&mut self, measured: &RoofSet) {
        for c in &mut self.compute {
            let lowest_bound = measured
                .compute
                .iter()
                .filter(|m| {
                    let (wider, at_least) = (isa_rank(&m.isa) > isa_rank(&c.isa), isa_rank(&m.isa) >= isa_rank(&c.isa));
                    m.empirical
                        && !m.mix
                        && m.precision == c.precision
                        && isa_rank(&m.isa) <= isa_rank("avx512")
                        && ((m.fma == c.fma && wider) || (m.fma && !c.fma && at_least))
                        && m.gflops.is_finite()
                        && m.gflops > 0.0
                })
                .map(|m| m.gflops)
                .fold(None, |a: Option<f64>, g| Some(a.map_or(g, |a| a.min(g))));
            if let Some(g) = lowest_bound {
                c.gflops = c.gflops.min(g);
            }
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

    /// Whether there is no roof at all.
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

    /// The roofs of one family (`precision_family`): `bf16` gives a CPU's `bf16` roofs and a
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
