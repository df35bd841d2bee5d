//! `roofline.report/1`: the one document every measuring command writes and every view
//! reads. Documented field by field in `docs/report-schema.md`.
//!
//! Schema changes bump the version; readers reject unknown major versions.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

use crate::error::Error;

pub mod job;
use crate::schema::extras::PointExtras;
use crate::schema::stats::{median, spread};

/// The schema name and major version every report carries in its `schema` field.
pub const REPORT_SCHEMA: &str = "roofline.report/1";
/// The major version of [`REPORT_SCHEMA`] this library reads.
pub const REPORT_MAJOR: u32 = 1;

/// Which backend produced a quantity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Source {
    /// The kernel suite's own formulas.
    Analytic,
    /// The ptrace backend (instructions decoded, addresses simulated).
    Trace,
    /// perf_event hardware counters.
    Perf,
    /// A `perf stat -x,` file imported.
    PerfStat,
    /// An Nsight Compute capture imported.
    Ncu,
    /// Measured by our own clock around a native run (wall time of the kernel).
    Native,
    /// The simulated PMU (`counters::simulated`): a test instrument, never hardware.
    Simulated,
}

impl Source {
    /// The name in reports (`analytic`, `perf-stat`, …).
    pub fn name(self) -> &'static str {
        match self {
            Source::Analytic => "analytic",
            Source::Trace => "trace",
            Source::Perf => "perf",
            Source::PerfStat => "perf-stat",
            Source::Ncu => "ncu",
            Source::Native => "native",
            Source::Simulated => "simulated",
        }
    }
}

/// Provenance of each quantity of a point, separately: a point may mix traced W with
/// native T, and says so.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Provenance {
    /// Which backend produced the flop counts.
    pub flops: Option<Source>,
    /// Per byte level (`core`, `l2`, …): which backend produced it.
    #[serde(default)]
    pub bytes: BTreeMap<String, Source>,
    /// Which backend produced the time.
    pub seconds: Option<Source>,
    /// Free-form caveats ("uncore counts are system-wide", "prefetchers not modelled").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Quantities (`flops.<class>`, `bytes.<level>`) that come from a counter event which
    /// failed `roofline validate --backend perf` on this machine (the notes say how).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub untrusted: Vec<String>,
}

/// Floating-point work W of a point (and its integer operations beside it).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Flops {
    /// Hardware-counter semantics: full vector width, FMA = 2 per lane.
    pub total: f64,
    /// Mask-aware count (AVX-512 lanes masked off excluded), when known.
    pub effective: Option<f64>,
    /// Open-ended: keys from `FlopClass::key` (`scalar_double`, `packed512_double`, …),
    /// integer classes (`packed512_int8`, `tile_int8`, …) included: those are in `int_ops`,
    /// not in `total`.
    #[serde(default)]
    pub by_class: BTreeMap<String, f64>,
    /// Integer operations (VNNI int8/int16 dot products, AMX int8; a multiply and its
    /// accumulation are two), hardware semantics like `total`; absent when there are none.
    /// Not flops: never in `total`, `gflops` or a GFLOP/s roof.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int_ops: Option<f64>,
    /// Mask-aware `int_ops`, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub int_ops_effective: Option<f64>,
    /// The part of `total` done by fused multiply-adds (2 per lane, hardware semantics), when
    /// the backend tells them from adds and multiplies (trace: always; AMD's event 0x03 MAC
    /// umask; not Intel's FP_ARITH). It decides the compute roof the point can reach: an FMA
    /// runs only on the FMA pipes (docs/reports.md, "The compute roof of a point's mix").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fma: Option<f64>,
}

impl Flops {
    /// W of a split by class: `total` sums the floating-point classes, `int_ops` the integer
    /// ones (`FlopClass::key_is_integer`; absent when there are none).
    pub fn of_classes(by_class: BTreeMap<String, f64>) -> Flops {
        let (mut total, mut int_ops) = (0.0, None::<f64>);
        for (k, v) in &by_class {
            if crate::kernels::FlopClass::key_is_integer(k) {
                *int_ops.get_or_insert(0.0) += v;
            } else {
                total += v;
            }
        }
        Flops {
            total,
            by_class,
            int_ops,
            ..Default::default()
        }
    }
}

/// Bytes keyed by the level that serves them: `core`, `l2`, `l3`, `dram` on CPUs;
/// `l1`, `l2`, `dram` on GPUs; plus `stack` where the backend can tell.
pub type Bytes = BTreeMap<String, f64>;

/// Well-known byte levels.
pub mod level {
    /// What the core's load and store instructions move (the cache-aware model's bytes).
    pub const CORE: &str = "core";
    /// The part of the core's traffic that is stack (spills, locals), where told apart.
    pub const STACK: &str = "stack";
    /// Traffic L1 serves (GPUs; on CPUs the core-side traffic is [`CORE`]).
    pub const L1: &str = "l1";
    /// Traffic between L2 and L1 (the lines L2 serves).
    pub const L2: &str = "l2";
    /// Traffic between L3 and L2.
    pub const L3: &str = "l3";
    /// Traffic to and from memory.
    pub const DRAM: &str = "dram";
}

/// What bounds a point, as classified by the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Bound {
    /// The compute roof of an ISA.
    Compute {
        /// The ISA the point's flops run at (`scalar`, `avx2`, `avx512`, …).
        isa: String,
    },
    /// The bandwidth of a memory level.
    Memory {
        /// The level (`l1`, `l2`, `l3`, `dram`).
        level: String,
    },
    /// A fixed cost dominates the time (launch, setup, a short run).
    Overhead,
    /// Not classified: no roofs, or a point that cannot be placed.
    Unknown,
}

/// One measured thing (a kernel, a region, a command): its W, Q and T with their provenance,
/// and what follows from them (rates, intensities, bound).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Point {
    /// The point's name (kernel and size, region, command).
    pub name: String,
    /// The source report (file name or label) when this point came from a merge.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    /// Which backend produced each quantity.
    pub provenance: Provenance,
    /// Work W.
    pub flops: Flops,
    /// Traffic Q per level, bytes.
    pub bytes: Bytes,
    /// Threads that ran it.
    pub threads: u32,
    /// Median over repetitions.
    pub seconds: f64,
    /// Every repetition, in order.
    #[serde(default)]
    pub seconds_samples: Vec<f64>,
    /// `flops.total` over `seconds`, GFLOP/s; None without a time.
    pub gflops: Option<f64>,
    /// GB/s per level.
    #[serde(default)]
    pub gbs: BTreeMap<String, f64>,
    /// Arithmetic intensity (flop/byte) per level; `core` uses core + stack bytes.
    #[serde(default)]
    pub ai: BTreeMap<String, f64>,
    /// What limits it, once read against roofs.
    pub bound: Option<Bound>,
    /// Achieved over attainable performance (1.0: at the roof), once read against roofs.
    pub roof_fraction: Option<f64>,
    /// Backend-specific figures: launch counts, multiplexing ratios, coalescing, … (typed
    /// where this program reads them back, the rest kept as they came).
    #[serde(default)]
    pub extra: PointExtras,
}

impl Point {
    /// A point with W, Q and T filled; derived figures (gflops, gbs, ai) computed.
    pub fn new(
        name: impl Into<String>,
        provenance: Provenance,
        flops: Flops,
        bytes: Bytes,
        threads: u32,
        seconds_samples: Vec<f64>,
    ) -> Point {
        let seconds = median(&seconds_samples).unwrap_or(0.0);
        let mut p = Point {
            name: name.into(),
            source: None,
            provenance,
            flops,
            bytes,
            threads,
            seconds,
            seconds_samples,
            gflops: None,
            gbs: BTreeMap::new(),
            ai: BTreeMap::new(),
            bound: None,
            roof_fraction: None,
            extra: PointExtras::default(),
        };
        p.derive();
        p
    }

    /// Bytes the cache-aware AI divides by: core + stack.
    pub fn core_side_bytes(&self) -> Option<f64> {
        let core = self.bytes.get(level::CORE)?;
        Some(core + self.bytes.get(level::STACK).copied().unwrap_or(0.0))
    }

    /// Recompute gflops, gbs and ai from W, Q and T.
    pub fn derive(&mut self) {
        self.gbs.clear();
        self.ai.clear();
        let t = self.seconds;
        if t > 0.0 && t.is_finite() {
            self.gflops = Some(self.flops.total / t / 1e9);
        } else {
            self.gflops = None;
        }
        for (lvl, b) in &self.bytes {
            if lvl == level::STACK {
                continue;
            }
            let bytes = if lvl == level::CORE {
                self.core_side_bytes().unwrap_or(*b)
            } else {
                *b
            };
            if t > 0.0 && t.is_finite() {
                self.gbs.insert(lvl.clone(), bytes / t / 1e9);
            }
            if bytes > 0.0 {
                self.ai.insert(lvl.clone(), self.flops.total / bytes);
            }
        }
    }

    /// Relative spread of the samples: interquartile range over the median (robust: one
    /// repetition cut by another task's time slice does not make a tight kernel look noisy).
    pub fn spread(&self) -> Option<f64> {
        spread(&self.seconds_samples)
    }
}

/// Where and how a report was produced.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Environment {
    /// Host name.
    pub host: Option<String>,
    /// Kernel release (`uname -r`).
    pub kernel: Option<String>,
    /// CPU frequency governor of CPU 0.
    pub governor: Option<String>,
    /// Whether turbo (boost) was enabled.
    pub turbo: Option<bool>,
    /// Whether SMT was on.
    pub smt: Option<bool>,
    /// Hypervisor name when running in a VM (CPUID hypervisor bit / leaf 0x4000_0000).
    pub hypervisor: Option<String>,
    /// Steal time (fraction of the run) where /proc/stat tells.
    pub steal_fraction: Option<f64>,
    /// Effective core clock measured during the run.
    pub measured_ghz: Option<f64>,
    /// This library's version.
    pub tool_version: String,
    /// The commit this library was built from, where known.
    pub git_sha: Option<String>,
    /// Compiler and flags of the measured program where known.
    pub compiler: Option<String>,
    /// The command line that produced the report.
    pub command_line: Vec<String>,
    /// MPI/Slurm rank when one of their variables is set.
    pub rank: Option<u32>,
    /// The rank's place in its job (launcher, size, node, CPUs, who counted the node's
    /// memory traffic): written by `roofline measure -o DIR/` under a launcher.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<job::JobRank>,
    /// The CPU one-thread runs were pinned to, chosen by a probe of every allowed CPU (the main
    /// job: a shared guest's vCPUs are not equal).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_choice: Option<CpuChoice>,
    /// When the report was written, RFC 3339 UTC.
    pub timestamp: Option<String>,
}

/// How the CPU of one-thread runs was chosen: a short dgemm on every allowed CPU, the first
/// within a few percent of the fastest taken.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct CpuChoice {
    /// The chosen CPU.
    pub cpu: usize,
    /// What the probe ran, e.g. `dgemm n=160 (avx512), best of 2 × 20 ms`.
    pub probe: String,
    /// Each CPU's probe rate (GFLOP/s), in CPU order.
    pub rates: Vec<CpuGflops>,
}

/// One CPU's probe rate.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct CpuGflops {
    /// The CPU.
    pub cpu: usize,
    /// The probe's GFLOP/s on it.
    pub gflops: f64,
}

impl CpuChoice {
    /// The slowest CPU and its rate as a fraction of the fastest's.
    pub fn slowest(&self) -> Option<(usize, f64)> {
        let fastest = self.rates.iter().map(|r| r.gflops).fold(f64::NAN, f64::max);
        let slow = self.rates.iter().min_by(|a, b| a.gflops.total_cmp(&b.gflops))?;
        (fastest > 0.0).then(|| (slow.cpu, slow.gflops / fastest))
    }
}

/// The roofs used for a report (a summary of `roofline.ceilings/1` or theoretical peaks).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Roofs {
    /// `empirical` or `theoretical`.
    pub kind: String,
    /// Compute roofs, GFLOP/s, keyed like `double.avx512.fma`.
    pub compute_gflops: BTreeMap<String, f64>,
    /// Bandwidth roofs, GB/s, keyed by level (`l1`, `l2`, `l3`, `dram`), core-side bytes
    /// (load/store instructions, no write-allocate): the roofs of the cache-aware model.
    pub bandwidth_gbs: BTreeMap<String, f64>,
    /// The same levels counting the traffic the level serves (write-allocate reads
    /// included): the roofs for bytes counted at a level (`bytes.l2`, `bytes.dram`, …).
    /// Absent in older reports: then `bandwidth_gbs` stands for both.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub bandwidth_traffic_gbs: BTreeMap<String, f64>,
    /// In a `mixed` set: the roofs (compute keys and bandwidth levels) that are theoretical,
    /// so a re-read report draws them dashed as the first rendering did.
    #[serde(default, skip_serializing_if = "std::collections::BTreeSet::is_empty")]
    pub theoretical: std::collections::BTreeSet<String>,
    /// The relative spread (interquartile range over median) of each measured roof, keyed
    /// like the roofs (compute keys, levels): a point within it of its roof is not above it.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spread: BTreeMap<String, f64>,
    /// The thread count the roofs are for; None: not known.
    pub threads: Option<u32>,
    /// What a reader of these roofs should know about how they were measured (a team whose
    /// threads ran unequally, say).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// A merged report keeps every source's machine and environment.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct SourceReport {
    /// The source's name (file name or label).
    pub name: String,
    /// Its machine model.
    pub machine: serde_json::Value,
    /// Its environment.
    pub environment: Environment,
}

/// A `roofline.report/1` document: the machine, its roofs and the measured points. What every
/// backend produces and every view reads.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Report {
    /// [`REPORT_SCHEMA`].
    pub schema: String,
    /// The machine model (`roofline.machine/1` document).
    pub machine: serde_json::Value,
    /// Where and how it was produced.
    pub environment: Environment,
    /// The roofs the points are read against.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceilings: Option<Roofs>,
    /// Roof sets at other thread counts than `ceilings`' (the main job measures one thread
    /// and every core): each point is read against the set of its own thread count.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ceilings_by_threads: Vec<Roofs>,
    /// Energy roofs per thread count (`--energy`): pJ per flop and per byte, the constant
    /// power (docs/energy.md).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub energy_roofs: Vec<crate::schema::energy::EnergyRoofs>,
    /// The measured points.
    pub points: Vec<Point>,
    /// Present in merged reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sources: Vec<SourceReport>,
    /// Points the producer could not run here, with the reason (a kernel variant whose ISA
    /// this CPU lacks): a gate reports them as not run instead of vanished.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_run: Vec<NotRun>,
    /// GPU captures: chains of consecutive memory-bound kernels and what fusing each would
    /// save (`gpu::fusion`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fusion: Vec<FusionChain>,
    /// A merged job (`report merge DIR/` of a job's rank files): nodes, ranks, balance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub job: Option<Box<job::Job>>,
    /// The energy of one whole run of the measured command (`gpu measure --energy`), where
    /// the points carry no joules of their own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command_energy: Option<crate::schema::energy::CommandEnergy>,
}

/// A chain of consecutive memory- or overhead-bound GPU kernels (same process and stream,
/// same NVTX ranges, no tensor work) and the estimate of one fused kernel: "N kernels move
/// X GB in T ms; fused ≈ Y GB, ≈ t ms at the HBM roof". `fused_bytes` is a lower bound
/// (the first kernel's DRAM reads and the last one's DRAM writes), `fused_bytes_high` adds
/// every later kernel's reads beyond what its predecessor wrote (other inputs, or the same
/// input read again): the fused kernel's traffic lies between them.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct FusionChain {
    /// The NVTX ranges the chain ran in (`step/layer1/norm`), empty outside any.
    pub region: String,
    /// Display names of the kernels, in launch order (one per launch).
    pub kernels: Vec<String>,
    /// ncu launch IDs, in order.
    pub launch_ids: Vec<u64>,
    /// DRAM bytes the kernels move together.
    pub dram_bytes: f64,
    /// Their time together, seconds.
    pub seconds: f64,
    /// DRAM bytes of the fused kernel, lower bound.
    pub fused_bytes: f64,
    /// DRAM bytes of the fused kernel, upper bound.
    pub fused_bytes_high: f64,
    /// `fused_bytes` at the HBM roof.
    pub fused_seconds: Option<f64>,
    /// The HBM roof used, GB/s.
    pub hbm_gbs: Option<f64>,
    /// The one-line summary.
    pub summary: String,
}

/// A point that was not measured, and why.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct NotRun {
    /// The point's name.
    pub name: String,
    /// Why it was not run.
    pub reason: String,
}

impl Report {
    /// An empty report (no roofs, no points) of `machine` in `environment`.
    pub fn new(machine: serde_json::Value, environment: Environment) -> Report {
        Report {
            schema: REPORT_SCHEMA.to_string(),
            machine,
            environment,
            ceilings: None,
            ceilings_by_threads: Vec::new(),
            energy_roofs: Vec::new(),
            points: Vec::new(),
            sources: Vec::new(),
            not_run: Vec::new(),
            fusion: Vec::new(),
            job: None,
            command_energy: None,
        }
    }

    /// Parse and validate a report document. `origin` names the file in errors. (Reading
    /// reports back comes with the `analysis` feature.)
    #[cfg(feature = "analysis")]
    pub fn from_json(text: &str, origin: &str) -> Result<Report, Error> {
        let v: serde_json::Value = serde_json::from_str(text).map_err(|e| {
            Error::input(
                format!("{origin}: not JSON ({e})"),
                "pass a file written by `roofline … -o report.json`",
            )
        })?;
        let schema = v.get("schema").and_then(|s| s.as_str()).unwrap_or("");
        check_schema(schema, "roofline.report", REPORT_MAJOR, origin)?;
        let r: Report = serde_json::from_value(v).map_err(|e| {
            Error::input(
                format!("{origin}: not a valid roofline.report/1 document ({e})"),
                "see docs/report-schema.md",
            )
        })?;
        r.validate(origin)?;
        Ok(r)
    }

    /// Reject impossible values: negative or NaN times and counts.
    pub fn validate(&self, origin: &str) -> Result<(), Error> {
        for p in &self.points {
            let bad = |what: &str| {
                Error::input(
                    format!("{origin}: point '{}' has an impossible {what}", p.name),
                    "the report was edited or produced by a broken backend",
                )
            };
            if !(p.seconds.is_finite() && p.seconds >= 0.0) || p.seconds_samples.iter().any(|s| !(s.is_finite() && *s >= 0.0)) {
                return Err(bad("time"));
            }
            let finite = |v: f64| v.is_finite() && v >= 0.0;
            if !finite(p.flops.total)
                || p.flops.by_class.values().any(|v| !finite(*v))
                || [p.flops.int_ops, p.flops.int_ops_effective, p.flops.fma]
                    .into_iter()
                    .flatten()
                    .any(|v| !finite(v))
                || p.flops.fma.is_some_and(|f| f > p.flops.total * (1.0 + 1e-9))
            {
                return Err(bad("flop count"));
            }
            if p.bytes.values().any(|v| !(v.is_finite() && *v >= 0.0)) {
                return Err(bad("byte count"));
            }
        }
        Ok(())
    }

    /// The report as pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serializes")
    }
}

/// Check a `"schema": "name/MAJOR"` string.
pub fn check_schema(schema: &str, name: &str, major: u32, origin: &str) -> Result<(), Error> {
    let Some((n, ver)) = schema.split_once('/') else {
        return Err(Error::input(
            format!("{origin}: no \"schema\" field naming {name}/{major}"),
            "is this a roofline document?",
        ));
    };
    if n != name {
        return Err(Error::input(
            format!("{origin}: schema '{schema}' is not {name}"),
            "pass the right kind of document",
        ));
    }
    let maj: u32 = ver.split('.').next().and_then(|m| m.parse().ok()).unwrap_or(u32::MAX);
    if maj != major {
        return Err(Error::input(
            format!("{origin}: schema version '{ver}' is not supported (this roofline reads {name}/{major})"),
            "re-create the document with this roofline version",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Report {
        let mut bytes = Bytes::new();
        bytes.insert("core".into(), 3.0e9);
        bytes.insert("stack".into(), 1.0e9);
        bytes.insert("dram".into(), 2.0e9);
        let mut by_class = BTreeMap::new();
        by_class.insert("packed512_double".into(), 8.0e9);
        let prov = Provenance {
            flops: Some(Source::Analytic),
            bytes: BTreeMap::new(),
            seconds: Some(Source::Native),
            notes: vec![],
            untrusted: Vec::new(),
        };
        let p = Point::new(
            "triad",
            prov,
            Flops {
                total: 8.0e9,
                effective: None,
                by_class,
                ..Default::default()
            },
            bytes,
            1,
            vec![2.0, 1.0, 4.0],
        );
        let mut r = Report::new(serde_json::json!({"vendor": "test"}), Environment::default());
        r.points.push(p);
        r
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn integer_operations_are_kept_out_of_the_flop_total() {
        let by_class: BTreeMap<String, f64> = [
            ("packed512_bf16".to_string(), 64.0),
            ("tile_bf16".to_string(), 16384.0),
            ("packed512_int8".to_string(), 128.0),
            ("tile_int8".to_string(), 32768.0),
            ("packed256_int16".to_string(), 32.0),
            ("scalar_double".to_string(), 3.0),
        ]
        .into();
        let f = Flops::of_classes(by_class.clone());
        assert_eq!((f.total, f.int_ops), (64.0 + 16384.0 + 3.0, Some(128.0 + 32768.0 + 32.0)));
        assert_eq!(f.by_class, by_class);
        let plain = Flops::of_classes([("packed256_double".to_string(), 8.0)].into());
        assert_eq!(plain.int_ops, None);
        // Absent in JSON when there are none; read back when there are.
        assert!(!serde_json::to_string(&plain).unwrap().contains("int_ops"));
        let back: Flops = serde_json::from_str(&serde_json::to_string(&f).unwrap()).unwrap();
        assert_eq!(back, f);
        let old: Flops = serde_json::from_str(r#"{"total": 2.0, "effective": null, "by_class": {}}"#).unwrap();
        assert_eq!((old.int_ops, old.int_ops_effective), (None, None));
    }

    #[test]
    fn derived_figures_follow_w_q_t() {
        let r = sample();
        let p = &r.points[0];
        assert_eq!(p.seconds, 2.0);
        assert!((p.gflops.unwrap() - 4.0).abs() < 1e-12);
        // core AI uses core + stack
        assert!((p.ai["core"] - 2.0).abs() < 1e-12);
        assert!((p.ai["dram"] - 4.0).abs() < 1e-12);
        assert!(!p.ai.contains_key("stack"));
        // samples 2, 1, 4: Q1 1.5, Q3 3, median 2 → 0.75
        assert!((p.spread().unwrap() - 0.75).abs() < 1e-12);
    }

    #[test]
    fn spread_is_interquartile_so_one_preempted_repetition_does_not_dominate() {
        let mut xs: Vec<f64> = (0..199).map(|i| 1e-6 * (1.0 + 0.0001 * ((i * 37) % 101) as f64)).collect();
        xs.push(7e-5); // one repetition cut by another task's time slice
        assert!(spread(&xs).unwrap() < 0.01, "{:?}", spread(&xs));
        assert!(spread(&[1.0, 1.2, 1.4, 1.6, 1.8]).unwrap() > 0.28);
        assert_eq!(spread(&[]), None);
        assert_eq!(median(&[f64::NAN, 3.0, 1.0]), Some(2.0));
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn round_trip_and_version_check() {
        let r = sample();
        let back = Report::from_json(&r.to_json(), "x.json").unwrap();
        assert_eq!(back, r);
        let future = r.to_json().replace("roofline.report/1", "roofline.report/2");
        let e = Report::from_json(&future, "x.json").unwrap_err();
        assert!(e.to_string().contains("not supported"), "{e}");
        assert!(Report::from_json("{", "x.json").is_err());
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn impossible_values_rejected() {
        let mut r = sample();
        r.points[0].seconds_samples.push(-1.0);
        let text = r.to_json();
        assert!(
            Report::from_json(&text, "x.json")
                .unwrap_err()
                .to_string()
                .contains("impossible time")
        );
    }
}
