//! Microarchitecture data (`platforms/*.toml`): identification, FP pipes per vector width,
//! bytes per cycle per cache level, and the counter events the perf backend needs.
//! Knowledge as data, like LIKWID's groups. Every file is embedded in the binary.

use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;

use crate::error::{Error, Result};

include!(concat!(env!("OUT_DIR"), "/embedded_platforms.rs"));

/// FP pipes of one vector width: how many can start an FMA, an add, a mul each cycle.
/// The levels `[bytes_per_cycle]` may name, per core: L1 loads and stores, and the L2, L3
/// and DRAM fill paths. Anything else is a typo that would silently draw a roof.
pub const BYTES_PER_CYCLE_KEYS: [&str; 5] = ["l1_load", "l1_store", "l2", "l3", "dram"];

/// The mixed-precision units a platform table may rate (`[mixed_ops_per_cycle]`), keyed
/// `precision.isa` like the compute roofs, each with the CPUID flag that says a CPU has it:
/// AMX tiles (`tdpbf16ps`, `tdpfp16ps`, `tdpb*d`), AVX-512 FP16 FMA, AVX-512 BF16
/// `vdpbf16ps`, AVX-512 VNNI and AVX-VNNI dot products. Operations per cycle per core as
/// `docs/mixed-precision.md` counts them (a multiply and its accumulation are two).
pub const MIXED_UNITS: [(&str, &str); 9] = [
    ("bf16.amx", "amx_bf16"),
    ("half.amx", "amx_fp16"),
    ("int8.amx", "amx_int8"),
    ("half.avx512", "avx512_fp16"),
    ("bf16.avx512", "avx512_bf16"),
    ("int8.avx512", "avx512vnni"),
    ("int16.avx512", "avx512vnni"),
    ("int8.avx2", "avx_vnni"),
    ("int16.avx2", "avx_vnni"),
];

/// FP pipes of one vector width, per core.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
#[serde(deny_unknown_fields)]
pub struct Pipes {
    /// Pipes that execute FMA.
    #[serde(default)]
    pub fma: u32,
    /// Pipes that execute adds.
    #[serde(default)]
    pub add: u32,
    /// Pipes that execute multiplies.
    #[serde(default)]
    pub mul: u32,
}

/// How a CPU is matched to a platform table.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
#[serde(deny_unknown_fields)]
pub struct Identify {
    /// `GenuineIntel` or `AuthenticAMD`.
    pub vendor: String,
    /// Display families (family + extended family), e.g. 6 or 0x19.
    pub families: Vec<u32>,
    /// Display models (model + extended model << 4).
    #[serde(default)]
    pub models: Vec<u32>,
    /// Feature flags (named as CPUID facts name them) that must be present.
    #[serde(default)]
    pub requires: Vec<String>,
    /// Feature flags that must be absent.
    #[serde(default)]
    pub lacks: Vec<String>,
    /// Tie-breaking preference among candidates matched by flags (higher wins).
    #[serde(default)]
    pub priority: i32,
    /// L2 size per core, KiB, `[min, max]`: separates client from server parts when
    /// identifying by flags (e.g. Skylake 256 KiB vs Skylake-SP 1 MiB).
    #[serde(default)]
    pub l2_kib: Option<[u32; 2]>,
    /// Total L3 (all instances of one package as CPUID describes one instance), KiB, `[min, max]`.
    #[serde(default)]
    pub l3_kib: Option<[u32; 2]>,
}

/// Dependent-chain latencies (cycles) the clock measurement needs, where they vary by core.
/// `imul r64` (3) and `xor r64, r64` (1) are the same on every supported core and are not here.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
#[serde(deny_unknown_fields)]
pub struct Latency {
    /// Dependent `vfmadd231pd` (any width, this core's FMA latency).
    #[serde(default)]
    pub fma: Option<u32>,
    /// Dependent `addpd`/`vaddpd` (used where there is no FMA: Sandy/Ivy Bridge).
    #[serde(default)]
    pub fadd: Option<u32>,
}

/// One hardware event, exactly as the kernel ABI takes it, plus what it measures.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
#[serde(deny_unknown_fields)]
pub struct EventSpec {
    /// Vendor name, e.g. `FP_ARITH_INST_RETIRED.SCALAR_DOUBLE`.
    pub name: String,
    /// PMU in /sys/bus/event_source/devices: `cpu`, `cpu_core`, `uncore_imc`, `amd_umc`,
    /// `amd_df`, … (uncore PMUs name the prefix of their instances).
    #[serde(default = "default_pmu")]
    pub pmu: String,
    /// Event select code.
    pub event: u64,
    /// Unit mask.
    #[serde(default)]
    pub umask: u64,
    /// Counter mask (count cycles with at least this many events; 0: count events).
    #[serde(default)]
    pub cmask: u64,
    /// Invert the counter mask comparison.
    #[serde(default)]
    pub inv: bool,
    /// Count edges (transitions into the condition) instead of cycles in it.
    #[serde(default)]
    pub edge: bool,
    /// Extra raw config bits (e.g. AMD's extended event select, uncore `config1`).
    #[serde(default)]
    pub config1: u64,
    /// General-purpose counters it may run on (`None`: any).
    #[serde(default)]
    pub counters: Option<Vec<u32>>,
    /// What it measures: `flops`; `bytes.l2` (lines moved between L1 and L2), `bytes.l3`
    /// (between L2 and L3), `bytes.dram`, `bytes.dram_read`, `bytes.dram_write`; `cycles`,
    /// `instructions`, `ref_cycles`. See `crate::counters::events` for the formulas.
    pub quantity: String,
    /// For `flops`: the `FlopClass` key it counts.
    #[serde(default)]
    pub class: Option<String>,
    /// Multiplier from count to flops or bytes (weight 8 for packed512 double, 64 for CAS).
    #[serde(default = "one")]
    pub weight: f64,
    /// Must be scheduled on a pair of counters (AMD merged events).
    #[serde(default)]
    pub paired: bool,
    /// Counts executed rather than retired operations, or otherwise approximate.
    #[serde(default)]
    pub unreliable: bool,
    /// What the event misses or overcounts, said in the notes when it is used.
    #[serde(default)]
    pub caveat: Option<String>,
    /// Opt-in events (single precision, FP16) are collected only when asked.
    #[serde(default)]
    pub optional: bool,
    /// AMD UMC read/write filter (`amd_umc` format `rdwrmask`): 1 reads, 2 writes, 0 both.
    #[serde(default)]
    pub rdwrmask: u64,
    /// How perf names it instead of the encoding: a generic event (`cycles`, `cpu_core/cycles/`)
    /// or a kernel sysfs alias (`uncore_imc/data_reads/`) whose encoding is the kernel's own.
    #[serde(default)]
    pub perf_name: Option<String>,
    /// Other names perf may print for it (symbolic JSON names, sysfs aliases), lower case.
    #[serde(default)]
    pub aliases: Vec<String>,
    /// Why perfmon cannot confirm this encoding (generic and kernel-alias events only);
    /// every other event is cross-checked by tests/platforms_perfmon.rs.
    #[serde(default)]
    pub unchecked: Option<String>,
    /// For `flops`: the class of another event of the table that counts this event's work
    /// too (Zen 4's `fp_ret_sse_avx_ops.all` includes its bfloat16 MACs): when both are
    /// counted, this event's amount is moved out of that class into its own, not added twice.
    #[serde(default)]
    pub part_of: Option<String>,
}

/// 1-based line of byte offset `off` in `text`.
#[cfg(feature = "analysis")]
fn line_of(text: &str, off: usize) -> usize {
    let mut end = off.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].matches('\n').count() + 1
}

#[cfg(feature = "analysis")]
fn default_pmu() -> String {
    "cpu".into()
}
#[cfg(feature = "analysis")]
fn one() -> f64 {
    1.0
}

/// One microarchitecture's table (`platforms/*.toml`): how to identify it, its pipes and bandwidths, its counters and events.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
#[serde(deny_unknown_fields)]
pub struct Platform {
    /// Short key: file stem, e.g. `gnr`, `zen4`.
    pub key: String,
    /// Display name, e.g. `Granite Rapids`.
    pub name: String,
    /// How a CPU is matched to this table (vendor, family, models, flags).
    pub identify: Identify,
    /// FP pipes per core per vector width: keys `"128"`, `"256"`, `"512"` (scalar uses 128).
    pub fp_pipes: BTreeMap<String, Pipes>,
    /// Hybrid parts: the E-cores' FP pipes per width (the P-cores' are `fp_pipes`).
    #[serde(default)]
    pub fp_pipes_e: BTreeMap<String, Pipes>,
    /// Whether the 512-bit pipe count varies by SKU (Skylake-SP) and must be measured.
    #[serde(default)]
    pub fp512_units_vary: bool,
    /// Theoretical bytes per cycle per core: `l1_load`, `l1_store`, `l2`, `l3`.
    #[serde(default)]
    pub bytes_per_cycle: BTreeMap<String, f64>,
    /// Operations per cycle per core of the mixed-precision units the table knows (keys of
    /// [`MIXED_UNITS`]): the theoretical peaks per precision class. A unit absent here has no
    /// theoretical roof, even on a CPU that has it (its rate is not published or not known).
    #[serde(default)]
    pub mixed_ops_per_cycle: BTreeMap<String, f64>,
    /// Units of [`MIXED_UNITS`] that CPUs of this table have but the table deliberately does
    /// not rate, each with why (no published or measured throughput, or a rate that varies by
    /// SKU or core type). A CPU with such a unit has a ceiling but no rated peak for it, and
    /// the reports say why; a unit neither rated nor named here is an omission
    /// (`tests/identify_dumps.rs` checks the recorded CPUs).
    #[serde(default)]
    pub mixed_unrated: BTreeMap<String, String>,
    /// General-purpose core counters per logical CPU (SMT on / off).
    #[serde(default)]
    pub core_counters: Option<u32>,
    /// General-purpose core counters per logical CPU with SMT off, where it differs.
    #[serde(default)]
    pub core_counters_smt_off: Option<u32>,
    /// Whether the LLC is inclusive of L2 (for the cache simulator).
    #[serde(default)]
    pub llc_inclusive: Option<bool>,
    /// FP instruction latencies, cycles: the clock probes divide by them.
    #[serde(default)]
    pub latency: Latency,
    /// The PMU events it counts W and Q with.
    #[serde(default)]
    pub events: Vec<EventSpec>,
    /// Caveats of the platform, said in reports.
    #[serde(default)]
    pub notes: Vec<String>,
}

/// One platform table as static data (`machine::platform_tables`, written by build.rs): the
/// fields of [`Platform`] with borrowed strings and slices, maps as sorted `(key, value)` pairs.
pub(crate) struct TableData {
    pub key: &'static str,
    pub name: &'static str,
    pub identify: IdentifyData,
    pub fp_pipes: &'static [(&'static str, Pipes)],
    pub fp_pipes_e: &'static [(&'static str, Pipes)],
    pub fp512_units_vary: bool,
    pub bytes_per_cycle: &'static [(&'static str, f64)],
    pub mixed_ops_per_cycle: &'static [(&'static str, f64)],
    pub mixed_unrated: &'static [(&'static str, &'static str)],
    pub core_counters: Option<u32>,
    pub core_counters_smt_off: Option<u32>,
    pub llc_inclusive: Option<bool>,
    pub latency: Latency,
    pub events: &'static [EventData],
    pub notes: &'static [&'static str],
}

/// [`Identify`] as static data.
pub(crate) struct IdentifyData {
    pub vendor: &'static str,
    pub families: &'static [u32],
    pub models: &'static [u32],
    pub requires: &'static [&'static str],
    pub lacks: &'static [&'static str],
    pub priority: i32,
    pub l2_kib: Option<[u32; 2]>,
    pub l3_kib: Option<[u32; 2]>,
}

/// [`EventSpec`] as static data; [`EventData::DEFAULT`] holds the TOML's defaults.
pub(crate) struct EventData {
    pub name: &'static str,
    pub pmu: &'static str,
    pub event: u64,
    pub umask: u64,
    pub cmask: u64,
    pub inv: bool,
    pub edge: bool,
    pub config1: u64,
    pub counters: Option<&'static [u32]>,
    pub quantity: &'static str,
    pub class: Option<&'static str>,
    pub weight: f64,
    pub paired: bool,
    pub unreliable: bool,
    pub caveat: Option<&'static str>,
    pub optional: bool,
    pub rdwrmask: u64,
    pub perf_name: Option<&'static str>,
    pub aliases: &'static [&'static str],
    pub unchecked: Option<&'static str>,
    pub part_of: Option<&'static str>,
}

impl EventData {
    /// What a TOML event leaves out (`#[serde(default)]` of [`EventSpec`]).
    pub const DEFAULT: EventData = EventData {
        name: "",
        pmu: "cpu",
        event: 0,
        umask: 0,
        cmask: 0,
        inv: false,
        edge: false,
        config1: 0,
        counters: None,
        quantity: "",
        class: None,
        weight: 1.0,
        paired: false,
        unreliable: false,
        caveat: None,
        optional: false,
        rdwrmask: 0,
        perf_name: None,
        aliases: &[],
        unchecked: None,
        part_of: None,
    };

    fn to_spec(&self) -> EventSpec {
        let s = |v: &str| v.to_string();
        EventSpec {
            name: s(self.name),
            pmu: s(self.pmu),
            event: self.event,
            umask: self.umask,
            cmask: self.cmask,
            inv: self.inv,
            edge: self.edge,
            config1: self.config1,
            counters: self.counters.map(<[u32]>::to_vec),
            quantity: s(self.quantity),
            class: self.class.map(s),
            weight: self.weight,
            paired: self.paired,
            unreliable: self.unreliable,
            caveat: self.caveat.map(s),
            optional: self.optional,
            rdwrmask: self.rdwrmask,
            perf_name: self.perf_name.map(s),
            aliases: strings(self.aliases),
            unchecked: self.unchecked.map(s),
            part_of: self.part_of.map(s),
        }
    }
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn map<V: Copy>(pairs: &[(&str, V)]) -> BTreeMap<String, V> {
    crate::util::map_of(pairs.iter().map(|(k, v)| (k.to_string(), *v)))
}

impl TableData {
    fn to_platform(&self) -> Platform {
        let i = &self.identify;
        Platform {
            key: self.key.to_string(),
            name: self.name.to_string(),
            identify: Identify {
                vendor: i.vendor.to_string(),
                families: i.families.to_vec(),
                models: i.models.to_vec(),
                requires: strings(i.requires),
                lacks: strings(i.lacks),
                priority: i.priority,
                l2_kib: i.l2_kib,
                l3_kib: i.l3_kib,
            },
            fp_pipes: map(self.fp_pipes),
            fp_pipes_e: map(self.fp_pipes_e),
            fp512_units_vary: self.fp512_units_vary,
            bytes_per_cycle: map(self.bytes_per_cycle),
            mixed_ops_per_cycle: map(self.mixed_ops_per_cycle),
            mixed_unrated: crate::util::map_of(self.mixed_unrated.iter().map(|(k, v)| (k.to_string(), v.to_string()))),
            core_counters: self.core_counters,
            core_counters_smt_off: self.core_counters_smt_off,
            llc_inclusive: self.llc_inclusive,
            latency: self.latency,
            events: self.events.iter().map(EventData::to_spec).collect(),
            notes: strings(self.notes),
        }
    }
}

impl Platform {
    /// Parse a platform TOML; errors carry the origin, line and what is wrong. (With the
    /// `analysis` feature: the light build reads only the embedded tables, as Rust data.)
    #[cfg(feature = "analysis")]
    pub fn parse(text: &str, origin: &str) -> Result<Platform> {
        let p = toml::from_str::<Platform>(text).map_err(|e| {
            let line = e.span().map(|s| line_of(text, s.start));
            let loc = line.map(|l| format!(":{l}")).unwrap_or_default();
            Error::input(format!("{origin}{loc}: {}", e.message()), "see platforms/README.md for the format")
        })?;
        p.check(text, origin)?;
        Ok(p)
    }

    /// What serde cannot check: flag names, pipe counts, latencies.
    #[cfg(feature = "analysis")]
    fn check(&self, text: &str, origin: &str) -> Result<()> {
        let at = |needle: &str| text.find(needle).map(|o| format!(":{}", line_of(text, o))).unwrap_or_default();
        let hint = "see platforms/README.md for the format";
        let alternatives = self.identify.requires.iter().flat_map(|r| r.split('|'));
        for f in alternatives.chain(self.identify.lacks.iter().map(String::as_str)) {
            if !super::cpuid::known_flag(f) {
                return Err(Error::input(
                    format!("{origin}{}: unknown feature flag '{f}'", at(&format!("\"{f}\""))),
                    "flags are named as in src/machine/cpuid.rs (e.g. avx512f, amx_fp16, avx10_1)",
                ));
            }
        }
        for (table, pipes) in [("fp_pipes", &self.fp_pipes), ("fp_pipes_e", &self.fp_pipes_e)] {
            for (w, p) in pipes {
                if !["128", "256", "512"].contains(&w.as_str()) {
                    return Err(Error::input(
                        format!(
                            "{origin}{}: {table} width '{w}' is not 128, 256 or 512",
                            at(&format!("{table}.{w}"))
                        ),
                        hint,
                    ));
                }
                if p.fma > 8 || p.add > 8 || p.mul > 8 {
                    return Err(Error::input(
                        format!("{origin}{}: more than 8 pipes at width {w}", at(&format!("{table}.{w}"))),
                        hint,
                    ));
                }
            }
        }
        for (name, v) in [("fma", self.latency.fma), ("fadd", self.latency.fadd)] {
            if let Some(l) = v
                && !(1..=20).contains(&l)
            {
                return Err(Error::input(
                    format!("{origin}{}: latency.{name} = {l} is not 1..20 cycles", at("[latency]")),
                    hint,
                ));
            }
        }
        for (k, v) in &self.mixed_ops_per_cycle {
            if !MIXED_UNITS.iter().any(|(u, _)| u == k) {
                let known: Vec<&str> = MIXED_UNITS.iter().map(|(u, _)| *u).collect();
                return Err(Error::input(
                    format!(
                        "{origin}{}: mixed_ops_per_cycle.{k} is not a known unit (one of {})",
                        at(k),
                        known.join(", ")
                    ),
                    hint,
                ));
            }
            if !(v.is_finite() && *v > 0.0 && *v <= 65536.0) {
                return Err(Error::input(
                    format!("{origin}{}: mixed_ops_per_cycle.{k} = {v} is not in (0, 65536]", at(k)),
                    hint,
                ));
            }
        }
        for (k, why) in &self.mixed_unrated {
            if !MIXED_UNITS.iter().any(|(u, _)| u == k) {
                let known: Vec<&str> = MIXED_UNITS.iter().map(|(u, _)| *u).collect();
                return Err(Error::input(
                    format!(
                        "{origin}{}: mixed_unrated.{k} is not a known unit (one of {})",
                        at(k),
                        known.join(", ")
                    ),
                    hint,
                ));
            }
            if self.mixed_ops_per_cycle.contains_key(k) {
                return Err(Error::input(
                    format!(
                        "{origin}{}: {k} is both rated (mixed_ops_per_cycle) and unrated (mixed_unrated)",
                        at("[mixed_unrated]")
                    ),
                    "keep one of the two",
                ));
            }
            if why.trim().is_empty() {
                return Err(Error::input(
                    format!("{origin}{}: mixed_unrated.{k} gives no reason", at("[mixed_unrated]")),
                    "say why the unit has no rate (no published throughput, varies by SKU, ...)",
                ));
            }
        }
        for (k, v) in &self.bytes_per_cycle {
            if !BYTES_PER_CYCLE_KEYS.contains(&k.as_str()) {
                return Err(Error::input(
                    format!(
                        "{origin}{}: bytes_per_cycle.{k} is not a known level (one of {})",
                        at(k),
                        BYTES_PER_CYCLE_KEYS.join(", ")
                    ),
                    hint,
                ));
            }
            if !(v.is_finite() && *v > 0.0 && *v <= 4096.0) {
                return Err(Error::input(
                    format!("{origin}{}: bytes_per_cycle.{k} = {v} is not in (0, 4096]", at(k)),
                    hint,
                ));
            }
        }
        Ok(())
    }

    /// The version of the embedded tables: how many and a digest of their text, e.g.
    /// `19 tables, digest 3f…`.
    pub fn embedded_version() -> String {
        format!("{} tables, digest {}", EMBEDDED_PLATFORMS.len(), EMBEDDED_PLATFORMS_DIGEST)
    }

    /// All embedded platforms: `platforms/*.toml` as Rust data (`machine::platform_tables`,
    /// written from the TOML by build.rs; a unit test fails when the two disagree), so a
    /// program that only marks regions parses nothing at run time and compiles no
    /// deserializer for them.
    pub fn embedded() -> Vec<Platform> {
        super::platform_tables::TABLES.iter().map(TableData::to_platform).collect()
    }

    /// `--platform NAME|FILE`: an embedded key, or a path to a TOML file.
    pub fn load(spec: &str) -> Result<Platform> {
        let p = Path::new(spec);
        if spec.ends_with(".toml") || p.exists() {
            #[cfg(not(feature = "analysis"))]
            return Err(Error::unavailable(
                format!("--platform {spec}: platform files are read by the `analysis` feature, which this build of roofline leaves out"),
                "enable it (on by default), or name an embedded platform",
            ));
            #[cfg(feature = "analysis")]
            {
                let text = std::fs::read_to_string(p).map_err(|e| {
                    Error::input(
                        format!("--platform {spec}: cannot read ({e})"),
                        "pass a platform name or a readable TOML file",
                    )
                })?;
                return Platform::parse(&text, spec);
            }
        }
        Platform::embedded()
            .into_iter()
            .find(|pl| pl.key.eq_ignore_ascii_case(spec))
            .ok_or_else(|| {
                let keys: Vec<&str> = EMBEDDED_PLATFORMS.iter().map(|(k, _)| *k).collect();
                Error::input(
                    format!("--platform {spec}: no such platform"),
                    format!("known: {}", keys.join(", ")),
                )
            })
    }

    /// Pipes at a vector width in bits (64-bit scalar uses the 128-bit pipes).
    pub fn pipes(&self, width_bits: u32) -> Option<Pipes> {
        let w = width_bits.max(128);
        self.fp_pipes.get(&w.to_string()).copied()
    }
}

// Every test here reads the TOML (`analysis`).
#[cfg(all(test, feature = "analysis"))]
mod tests {
    use super::*;

    #[test]
    fn every_embedded_platform_parses_and_has_a_matching_key() {
        for (stem, text) in EMBEDDED_PLATFORMS {
            let p = Platform::parse(text, stem).unwrap();
            assert_eq!(&p.key, stem, "key must equal file stem");
        }
    }

    #[test]
    fn the_tables_digest_covers_every_embedded_file_in_order() {
        let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
        for (stem, text) in EMBEDDED_PLATFORMS {
            for b in stem.bytes().chain([0]).chain(text.bytes()).chain([0]) {
                hash = (hash ^ b as u64).wrapping_mul(0x0100_0000_01b3);
            }
        }
        assert_eq!(EMBEDDED_PLATFORMS_DIGEST, format!("{hash:016x}"));
        assert!(EMBEDDED_PLATFORMS.len() > 10);
        assert!(Platform::embedded_version().starts_with(&format!("{} tables, digest ", EMBEDDED_PLATFORMS.len())));
    }

    #[test]
    fn mixed_units_are_known_keys_with_sane_rates() {
        let spr = EMBEDDED_PLATFORMS.iter().find(|(k, _)| *k == "spr").unwrap().1;
        let p = Platform::parse(spr, "spr").unwrap();
        assert_eq!(p.mixed_ops_per_cycle.get("bf16.amx"), Some(&1024.0));
        // Every embedded table uses only known unit keys (parse checks them).
        for (stem, text) in EMBEDDED_PLATFORMS {
            let p = Platform::parse(text, stem).unwrap();
            assert!(p.mixed_ops_per_cycle.keys().all(|k| MIXED_UNITS.iter().any(|(u, _)| u == k)));
        }
        // An unknown unit or an impossible rate: one line naming the file, line and key.
        for (bad, what) in [("\"bf32.amx\" = 1024", "bf32.amx"), ("\"int8.amx\" = -2", "int8.amx")] {
            let text = spr.replace("\"int8.amx\" = 2048", bad);
            let e = Platform::parse(&text, "spr.toml").unwrap_err().to_string();
            assert!(e.starts_with("spr.toml:") && e.contains(what), "{e}");
            assert!(!e.lines().next().unwrap().is_empty());
        }
    }

    #[test]
    fn mixed_rates_are_whole_instructions_per_cycle() {
        // One full-width instruction of each unit, counted as docs/mixed-precision.md counts
        // it: vdpbf16ps zmm 16 lanes x 4, vfmadd...ph zmm 32 x 2, vpdpbusd zmm 16 dwords x 8,
        // vpdpwssd zmm 16 x 4 (ymm half), AMX on full 16 x 64-byte tiles 16 x 16 x 16 x 4 (x 8
        // for int8). A rate is a number of such instructions per cycle: a power of two from one
        // per 16 cycles (AMX) to four; anything else is a counting slip (lanes, or 2 vs 4 per lane).
        let per_instruction = |unit: &str| match unit {
            "bf16.avx512" | "half.avx512" | "int16.avx512" => 64.0,
            "int8.avx512" => 128.0,
            "int8.avx2" => 64.0,
            "int16.avx2" => 32.0,
            "bf16.amx" | "half.amx" => 16384.0,
            "int8.amx" => 32768.0,
            other => panic!("{other}: a unit of MIXED_UNITS without its operations per instruction here"),
        };
        let mut n = 0;
        for (stem, text) in EMBEDDED_PLATFORMS {
            let p = Platform::parse(text, stem).unwrap();
            for (unit, ops) in &p.mixed_ops_per_cycle {
                let ipc = ops / per_instruction(unit);
                assert!(
                    (-4..=2).any(|e| ipc == 2f64.powi(e)),
                    "{stem}: {unit} = {ops} is {ipc} instructions per cycle"
                );
                n += 1;
            }
            for unit in p.mixed_unrated.keys() {
                per_instruction(unit);
            }
        }
        assert!(n >= 20, "{n} rated units in all tables");
    }

    #[test]
    fn unrated_units_are_known_alone_and_explained() {
        let gnr = EMBEDDED_PLATFORMS.iter().find(|(k, _)| *k == "gnr").unwrap().1;
        let p = Platform::parse(gnr, "gnr").unwrap();
        assert!(p.mixed_unrated.contains_key("half.amx") && !p.mixed_ops_per_cycle.contains_key("half.amx"));
        let line = p.mixed_unrated["half.amx"].clone();
        let needle = format!("\"half.amx\" = {:?}", line);
        assert!(gnr.contains(&needle), "{needle}");
        for (bad, what) in [
            ("\"half.amk\" = \"why\"", "half.amk"),
            ("\"int8.amx\" = \"why\"", "both rated"),
            ("\"half.amx\" = \"  \"", "no reason"),
        ] {
            let text = gnr.replace(&needle, bad);
            let e = Platform::parse(&text, "gnr.toml").unwrap_err().to_string();
            assert!(e.starts_with("gnr.toml:") && e.contains(what), "{e}");
        }
    }

    /// What the library embeds (build.rs's tables, read by its own TOML reader) is what the
    /// `toml` crate reads from the same files, table by table and field by field.
    #[test]
    fn the_embedded_tables_are_the_toml() {
        let from_toml: Vec<Platform> = EMBEDDED_PLATFORMS
            .iter()
            .map(|(stem, text)| Platform::parse(text, stem).unwrap())
            .collect();
        let embedded = Platform::embedded();
        assert_eq!(embedded.len(), from_toml.len());
        for (a, b) in embedded.iter().zip(&from_toml) {
            assert_eq!(a, b, "{}: the embedded table differs from platforms/{}.toml", b.key, b.key);
        }
        assert!(embedded.iter().map(|p| p.events.len()).sum::<usize>() > 200);
    }

    /// The comparison above can fail: a table whose data differs from its TOML in one default
    /// field (the pmu, the weight) or one event is not equal.
    #[test]
    fn a_table_that_differs_from_its_toml_is_told_apart() {
        let (stem, text) = EMBEDDED_PLATFORMS.iter().find(|(k, _)| *k == "zen4").unwrap();
        let toml = Platform::parse(text, stem).unwrap();
        let data = super::super::platform_tables::TABLES.iter().find(|t| t.key == "zen4").unwrap();
        assert_eq!(data.to_platform(), toml);
        let mut pmu = toml.clone();
        pmu.events[0].pmu = "amd_df".into();
        assert_ne!(data.to_platform(), pmu);
        let mut weight = toml.clone();
        weight.events.last_mut().unwrap().weight *= 2.0;
        assert_ne!(data.to_platform(), weight);
        let mut fewer = toml;
        fewer.events.pop();
        assert_ne!(data.to_platform(), fewer);
    }

    #[test]
    fn malformed_file_names_line() {
        let text = "key = \"x\"\nname = \"X\"\nbogus = 3\n";
        let e = Platform::parse(text, "my.toml").unwrap_err().to_string();
        assert!(e.starts_with("my.toml:"), "{e}");
    }
}
