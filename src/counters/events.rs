//! What counter events mean, shared by the perf backend (`perf/`) and the perf-stat import
//! (`perf/stat_import.rs`): event → W (flops by class) and Q (bytes per level) formulas and
//! perf's event syntax. Scaling for multiplexing and counter-constrained grouping are perf's
//! (`perf::scale`, `perf::schedulable`).
//!
//! Quantities (see [`EventSpec::quantity`]): `flops` adds `count × weight` to its class;
//! `flops.fma` counts the fused multiply-add flops (2 per lane) within the work of the `flops`
//! events of its class: summed into `flops.fma` ([`fma_share_of`]), never into W (AMD Zen 1–4's
//! MAC umasks of event 0x03; Intel's FP_ARITH counts an FMA twice in its class and cannot tell
//! it apart, and Zen 5 documents no MAC umask restricted to the FP types: `flops.fma` is absent
//! there); `bytes.l2` are lines moved between L1 and L2 (LIKWID's L2 data volume), `bytes.l3` between
//! L2 and L3, `bytes.dram*` CAS commands at the memory controller; each ×64 B by its weight.
//! Hardware cannot count core-side (load/store operand) bytes: `bytes.core` is left to the trace
//! and analytic backends, and the notes say so.

use std::collections::{BTreeMap, BTreeSet};

#[cfg(feature = "analysis")]
use crate::error::{Error, Result};
use crate::machine::{EventSpec, Platform};
use crate::schema::{Bytes, Flops};

/// What perf reported for one event: a count (apply the event's weight), or bytes already
/// (perf applied the sysfs scale and unit, e.g. `uncore_imc/cas_count_read/` in MiB).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Amount {
    Count(f64),
    Bytes(f64),
}

/// One event's (scaled) value.
#[derive(Debug, Clone, PartialEq)]
pub struct EventValue {
    pub spec: EventSpec,
    pub amount: Amount,
    /// time_running / time_enabled, where known; below 1 means multiplexed (already scaled).
    pub running_fraction: Option<f64>,
}

/// W, Q and the clock counters derived from a set of event values, with the caveats.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Derived {
    /// `None` when no FP event was counted.
    pub flops: Option<Flops>,
    pub bytes: Bytes,
    pub dram_read_bytes: Option<f64>,
    pub dram_write_bytes: Option<f64>,
    pub cycles: Option<f64>,
    pub instructions: Option<f64>,
    pub ref_cycles: Option<f64>,
    /// Events that ran part of the time (name → running fraction), already scaled.
    pub multiplexed: BTreeMap<String, f64>,
    /// Whether W comes from approximate events (executed not retired, AVX_INSTS, …).
    pub flops_approximate: bool,
    /// Byte levels measured by uncore (socket-wide) counters.
    pub system_wide_levels: BTreeSet<String>,
    pub notes: Vec<String>,
}

fn level_of(quantity: &str) -> Option<&'static str> {
    Some(match quantity {
        "bytes.l2" => crate::schema::report::level::L2,
        "bytes.l3" => crate::schema::report::level::L3,
        "bytes.dram" | "bytes.dram_read" | "bytes.dram_write" => crate::schema::report::level::DRAM,
        _ => return None,
    })
}

/// Whether an event is counted by a core PMU (follows the task) rather than an uncore one.
pub fn is_core_pmu(pmu: &str) -> bool {
    matches!(pmu, "cpu" | "cpu_core" | "cpu_atom")
}

/// Mixed-precision work that none of the counted flop classes covers on a CPU whose CPUID
/// flags `has`: AMX tile work (no event counts it: `AMX_OPS_RETIRED` is not in the SPR, EMR or
/// GNR tables, `EXE.AMX_BUSY` counts cycles), VNNI integer dot products (no FP event counts
/// them), bf16 and fp16 work where no counted class covers that format. One
/// `(family, note)` each, for the report's notes and `extra.not_countable`: W then lacks that
/// work, which is never reported as zero (`docs/mixed-precision.md`).
pub fn not_countable(has: &dyn Fn(&str) -> bool, counted_classes: &[&str]) -> Vec<(&'static str, String)> {
    let covered = |traced: &str| counted_classes.iter().any(|c| class_covers(c, traced));
    let mut out = Vec::new();
    let mut say = |family: &'static str, what: &str| {
        out.push((
            family,
            format!("{what}: not countable by perf on this CPU (no event counts it), not in W: use --backend trace to count it"),
        ))
    };
    if has("amx_tile") {
        say("amx", "AMX tile work (tile_bf16, tile_fp16, tile_int8)");
    }
    if has("avx512vnni") || has("avx_vnni") || has("avx_vnni_int8") {
        say("vnni", "VNNI integer dot products (packed*_int8, packed*_int16)");
    }
    if has("avx512_bf16") && !covered("packed512_bf16") {
        say("bf16", "AVX-512 BF16 dot products (packed*_bf16)");
    }
    if has("avx512_fp16") && !covered("packed512_half") {
        say("fp16", "AVX-512 FP16 arithmetic (*_half)");
    }
    out
}

/// Move the amounts of events whose work another counted event's class holds too
/// (`EventSpec::part_of`: `(that class, amount)`) out of that class, so the work is counted
/// once, in the finer class. Nothing moves where that class was not counted.
pub fn move_parts(by_class: &mut BTreeMap<String, f64>, parts: &[(String, f64)]) {
    for (parent, v) in parts {
        if let Some(p) = by_class.get_mut(parent) {
            *p = (*p - v).max(0.0);
        }
    }
}

/// `flops.fma` of a measurement from the summed MAC events' flops `fma` and the W they are a
/// part of (`total`): None, with the reason, when a count that must be a part of W exceeds it
/// by more than the rounding of multiplex scaling allows (`slack`, flops): such a share would
/// be false, and is not reported.
pub fn fma_share_of(fma: f64, total: f64, slack: f64) -> std::result::Result<f64, String> {
    if fma.is_finite() && fma >= 0.0 && fma <= total + slack.max(0.0) {
        Ok(fma.min(total))
    } else {
        Err(format!(
            "flops.fma not reported: the FMA events counted {fma:.6e} flops, more than the {total:.6e} of W they are a part of (multiplexed or misbehaving counters)"
        ))
    }
}

/// The most scaled counts can exceed their truth by rounding: half a count per event, scaled
/// by its running fraction, times its weight.
fn rounding_slack(values: &[EventValue]) -> f64 {
    values
        .iter()
        .filter(|v| v.spec.quantity.starts_with("flops"))
        .map(|v| 0.5 * v.spec.weight / v.running_fraction.unwrap_or(1.0).max(1e-9))
        .sum()
}

/// W and Q from event values. `platform`, when known, adds what it lacks to the notes
/// (e.g. Zen 1 has no DRAM event).
pub fn derive(values: &[EventValue], platform: Option<&Platform>) -> Derived {
    let mut d = Derived::default();
    let mut by_class: BTreeMap<String, f64> = BTreeMap::new();
    let mut caveats: BTreeSet<String> = BTreeSet::new();
    let mut any_flops = false;
    let mut fma: Option<f64> = None;
    let mut parts: Vec<(String, f64)> = Vec::new();
    for v in values {
        let s = &v.spec;
        // `weighted`: flops or bytes; `count`: the raw (scaled) count where perf gave one.
        let (count, weighted) = match v.amount {
            Amount::Count(c) => (Some(c), c * s.weight),
            Amount::Bytes(b) => (None, b),
        };
        if let Some(f) = v.running_fraction
            && f < 0.999
        {
            d.multiplexed.insert(s.name.clone(), f);
        }
        match s.quantity.as_str() {
            "flops" => {
                any_flops = true;
                let class = s.class.clone().unwrap_or_else(|| "any_precision".into());
                *by_class.entry(class).or_insert(0.0) += weighted;
                if let Some(parent) = &s.part_of {
                    parts.push((parent.clone(), weighted));
                }
                if s.unreliable {
                    d.flops_approximate = true;
                    if let Some(c) = &s.caveat {
                        caveats.insert(format!("W is approximate: {c}"));
                    }
                } else if let Some(c) = &s.caveat
                    && (c.contains("E-cores") || c.contains("split neither") || c.contains("width"))
                {
                    caveats.insert(c.clone());
                }
            }
            // A part of what the `flops` events count: never added to W.
            "flops.fma" => *fma.get_or_insert(0.0) += weighted,
            "cycles" => *d.cycles.get_or_insert(0.0) += count.unwrap_or(weighted),
            "instructions" => *d.instructions.get_or_insert(0.0) += count.unwrap_or(weighted),
            "ref_cycles" => *d.ref_cycles.get_or_insert(0.0) += count.unwrap_or(weighted),
            q => match level_of(q) {
                Some(level) => {
                    *d.bytes.entry(level.to_string()).or_insert(0.0) += weighted;
                    if q == "bytes.dram_read" {
                        *d.dram_read_bytes.get_or_insert(0.0) += weighted;
                    }
                    if q == "bytes.dram_write" {
                        *d.dram_write_bytes.get_or_insert(0.0) += weighted;
                    }
                    if !is_core_pmu(&s.pmu) {
                        d.system_wide_levels.insert(level.to_string());
                    }
                    if s.unreliable
                        && let Some(c) = &s.caveat
                    {
                        caveats.insert(format!("Q_{level} is approximate: {c}"));
                    }
                }
                None => d
                    .notes
                    .push(format!("event {} measures '{q}', which no formula uses: ignored", s.name)),
            },
        }
    }
    if any_flops {
        move_parts(&mut by_class, &parts);
        let mut flops = Flops::of_classes(by_class);
        if let Some(f) = fma {
            match fma_share_of(f, flops.total, rounding_slack(values)) {
                Ok(f) => flops.fma = Some(f),
                Err(why) => d.notes.push(why),
            }
        }
        d.flops = Some(flops);
    } else {
        d.notes
            .push("no FP event was counted: W unavailable (use --backend trace or analytic)".into());
    }
    d.notes.extend(caveats);
    for (name, f) in &d.multiplexed {
        d.notes.push(format!(
            "multiplexed: {name} counted {:.1}% of the time, scaled to the full run",
            f * 100.0
        ));
    }
    if !d.system_wide_levels.is_empty() {
        let lv: Vec<&str> = d.system_wide_levels.iter().map(String::as_str).collect();
        d.notes.push(format!(
            "Q_{} from uncore counters: system-wide (the whole socket), not only the measured command",
            lv.join(", Q_")
        ));
    }
    if let Some(p) = platform {
        d.notes.extend(platform_notes(p));
    }
    d.notes
        .push("bytes.core (load/store operand bytes) cannot be counted by hardware: use the trace or analytic backend".into());
    d
}

/// What a platform's event table cannot give, said once per measurement (e.g. Zen 1 has no
/// DRAM event: Q_dram unavailable). Shared by `derive`, `roofline measure` and regions.
pub fn platform_notes(p: &Platform) -> Vec<String> {
    let mut notes = Vec::new();
    if !p.events.iter().any(|e| e.quantity.starts_with("bytes.dram")) {
        notes.push(format!("Q_dram unavailable: {} has no usable DRAM counter event", p.name));
    }
    notes
}

/// A generous ceiling on a whole system's DRAM bandwidth (GB/s) per platform: channels ×
/// transfer rate of the fastest supported memory × the most sockets the part scales to. Used
/// only to reject impossible counts (10× margin), never as a roof.
#[cfg(feature = "analysis")]
pub fn dram_ceiling_gbs(platform_key: &str) -> f64 {
    match platform_key {
        "snb" | "ivb" => 60.0 * 4.0,
        "hsw" | "bdw" | "skl" => 60.0,
        "hsx" | "bdx" => 120.0 * 8.0,
        "skx" => 150.0 * 8.0,
        "icl" | "tgl" => 80.0,
        "icx" => 210.0 * 2.0,
        "adl" => 110.0,
        // SPR Max's HBM included.
        "spr" => 1700.0 * 8.0,
        "gnr" => 900.0 * 8.0,
        "zen1" => 180.0 * 2.0,
        "zen2" | "zen3" => 210.0 * 2.0,
        "zen4" => 470.0 * 2.0,
        "zen5" => 620.0 * 2.0,
        _ => 2000.0 * 8.0,
    }
}

/// Reject DRAM traffic no machine of this platform can move in `seconds` (more than 10× its
/// ceiling), like LIKWID's phantom-channel 1.88e19 bytes.
#[cfg(feature = "analysis")]
pub fn check_dram_plausible(dram_bytes: f64, seconds: f64, platform_key: &str) -> Result<()> {
    if !(seconds > 0.0 && seconds.is_finite()) {
        return Ok(());
    }
    let limit = 10.0 * dram_ceiling_gbs(platform_key) * 1e9 * seconds;
    if !dram_bytes.is_finite() || dram_bytes > limit {
        return Err(Error::input(
            format!(
                "{dram_bytes:.3e} DRAM bytes in {seconds} s is {:.3e} GB/s, over 10x the {} GB/s any {platform_key} system can move: the counts cannot be true",
                dram_bytes / seconds / 1e9,
                dram_ceiling_gbs(platform_key)
            ),
            "check the platform (--platform), the time (--seconds) and the uncore events (a phantom memory channel?)",
        ));
    }
    Ok(())
}

/// Raw `config` of a core-PMU event (the `rNNNN` perf syntax). AMD puts event-select bits
/// 8–11 at config bits 32–35. The round-trip test of [`decode_core_config`] builds configs with it.
#[cfg(test)]
fn core_config(spec: &EventSpec, amd: bool) -> u64 {
    let mut c = (spec.event & 0xff) | ((spec.umask & 0xff) << 8) | ((spec.cmask & 0xff) << 24);
    if spec.edge {
        c |= 1 << 18;
    }
    if spec.inv {
        c |= 1 << 23;
    }
    if amd {
        c |= ((spec.event >> 8) & 0xf) << 32;
    }
    c
}

/// Inverse of [`core_config`]: (event, umask, cmask, inv, edge).
#[cfg(feature = "analysis")]
pub fn decode_core_config(c: u64, amd: bool) -> (u64, u64, u64, bool, bool) {
    let mut event = c & 0xff;
    if amd {
        event |= ((c >> 32) & 0xf) << 8;
    }
    (event, (c >> 8) & 0xff, (c >> 24) & 0xff, c & (1 << 23) != 0, c & (1 << 18) != 0)
}

/// General-purpose core counters per logical CPU: the platform's figure, else what the
/// architecture has (Intel before Ice Lake: 4 with SMT on, 8 off; Ice Lake and later: 8;
/// AMD Zen: 6). A small table until every platform file carries `core_counters`.
pub fn gp_counters(p: &Platform, smt: bool) -> u32 {
    let given = if smt {
        p.core_counters
    } else {
        p.core_counters_smt_off.or(p.core_counters)
    };
    if let Some(n) = given {
        return n;
    }
    match p.key.as_str() {
        "snb" | "ivb" | "hsw" | "hsx" | "bdw" | "bdx" | "skl" | "skx" if smt => 4,
        k if k.starts_with("zen") => 6,
        _ => 8,
    }
}

/// The event as perf's `-e` takes it: its `perf_name`, else `pmu/event=0x..,umask=0x../`.
#[cfg(feature = "cli")]
pub fn perf_event_syntax(spec: &EventSpec) -> String {
    if let Some(n) = &spec.perf_name {
        return n.clone();
    }
    let mut terms = vec![format!("event={:#04x}", spec.event)];
    if spec.umask != 0 {
        terms.push(format!("umask={:#04x}", spec.umask));
    }
    if spec.cmask != 0 {
        terms.push(format!("cmask={:#x}", spec.cmask));
    }
    if spec.inv {
        terms.push("inv".into());
    }
    if spec.edge {
        terms.push("edge".into());
    }
    if spec.rdwrmask != 0 {
        terms.push(format!("rdwrmask={:#x}", spec.rdwrmask));
    }
    format!("{}/{}/", spec.pmu, terms.join(","))
}

/// The events of a platform to collect: defaults, plus opt-in ones when asked.
pub fn selected(p: &Platform, optional: bool, uncore: bool) -> Vec<&EventSpec> {
    p.events
        .iter()
        .filter(|e| optional || !e.optional)
        .filter(|e| uncore || is_core_pmu(&e.pmu))
        .collect()
}

/// Whether an event of flop class `event_class` counts the traced class `traced` (a
/// platform's merged classes, e.g. Zen's `any_precision`, cover several traced ones).
pub fn class_covers(event_class: &str, traced: &str) -> bool {
    let integer = crate::kernels::FlopClass::key_is_integer(traced);
    match event_class {
        // The FP-op events count no integer dot product and no AMX tile work.
        "any_precision" => !integer && !traced.starts_with("tile_"),
        "bf16_any_width" => traced.ends_with("_bf16"),
        "double_any_width" => traced.ends_with("_double"),
        "single_any_width" => traced.ends_with("_single"),
        "half_any_width" => traced.ends_with("_half"),
        "scalar_any_precision" => traced.starts_with("scalar_"),
        "packed_any_precision" => traced.starts_with("packed") && !integer,
        c => c == traced,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(name: &str, quantity: &str, class: Option<&str>, weight: f64) -> EventSpec {
        EventSpec {
            name: name.into(),
            pmu: "cpu".into(),
            event: 0xc7,
            umask: 1,
            cmask: 0,
            inv: false,
            edge: false,
            config1: 0,
            counters: None,
            quantity: quantity.into(),
            class: class.map(String::from),
            weight,
            paired: false,
            unreliable: false,
            caveat: None,
            optional: false,
            rdwrmask: 0,
            perf_name: None,
            aliases: vec![],
            unchecked: None,
            part_of: None,
        }
    }

    /// A small seeded generator (fresh seed per run from the clock; printed on failure).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }
    }
    fn seed() -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64
            | 1
    }

    #[test]
    fn a_finer_event_is_moved_out_of_the_class_that_also_counts_it() {
        let mut rng = Rng(seed());
        for _ in 0..50 {
            let bf16 = (rng.next() % 10_000) as f64;
            let all = bf16 + (rng.next() % 1_000_000) as f64;
            let mut part = spec("bfloat_mac", "flops", Some("bf16_any_width"), 1.0);
            part.part_of = Some("any_precision".into());
            let vals = vec![
                EventValue {
                    spec: spec("all", "flops", Some("any_precision"), 1.0),
                    amount: Amount::Count(all),
                    running_fraction: Some(1.0),
                },
                EventValue {
                    spec: part.clone(),
                    amount: Amount::Count(bf16),
                    running_fraction: Some(1.0),
                },
            ];
            let f = derive(&vals, None).flops.unwrap();
            // Counted once: the total is what `.all` counted, bf16 split out of it.
            assert_eq!(
                (f.total, f.by_class["any_precision"], f.by_class["bf16_any_width"]),
                (all, all - bf16, bf16)
            );
            // Without the covering event nothing is moved.
            let alone = derive(&vals[1..], None).flops.unwrap();
            assert_eq!((alone.total, alone.by_class.get("any_precision")), (bf16, None));
        }
    }

    #[test]
    fn mac_events_give_the_fma_share_never_more_work() {
        let mut rng = Rng(seed());
        for _ in 0..50 {
            let all = (rng.next() % 1_000_000_000 + 1) as f64;
            let mac = (rng.next() % (all as u64 + 1)) as f64;
            let bf16 = (rng.next() % 10_000) as f64;
            let mut part = spec("bfloat_mac", "flops", Some("bf16_any_width"), 1.0);
            part.part_of = Some("any_precision".into());
            let value = |s: EventSpec, v: f64| EventValue {
                spec: s,
                amount: Amount::Count(v),
                running_fraction: Some(1.0),
            };
            let w = value(spec("all", "flops", Some("any_precision"), 1.0), all + bf16);
            let m = value(spec("mac_flops", "flops.fma", Some("any_precision"), 1.0), mac);
            let with = derive(&[w.clone(), value(part.clone(), bf16), m.clone()], None).flops.unwrap();
            // W is what the flops events count (bf16 moved, not added): the MAC flops are a
            // part of it, not more of it.
            assert_eq!((with.total, with.fma), (all + bf16, Some(mac)), "seed {}", rng.0);
            assert!(!with.by_class.keys().any(|k| k.contains("fma")), "{with:?}");
            // Without the MAC event: no share.
            let without = derive(&[w.clone(), value(part, bf16)], None).flops.unwrap();
            assert_eq!((without.total, without.fma), (all + bf16, None));
            // The MAC event alone is no W, and no share of one.
            let alone = derive(&[m], None);
            assert_eq!(alone.flops, None);
            // More MAC flops than W beyond rounding: not a share, and said.
            let over = value(spec("mac_flops", "flops.fma", Some("any_precision"), 1.0), all + bf16 + 2.0);
            let d = derive(&[w.clone(), over], None);
            assert_eq!(d.flops.as_ref().unwrap().fma, None);
            assert!(d.notes.iter().any(|n| n.starts_with("flops.fma not reported")), "{:?}", d.notes);
            // Within half a count of W (a scaled count's rounding): kept, at most W.
            let edge = value(spec("mac_flops", "flops.fma", Some("any_precision"), 1.0), all + bf16 + 0.5);
            assert_eq!(derive(&[w, edge], None).flops.unwrap().fma, Some(all + bf16));
        }
    }

    /// Only AMD Zen 1–4 document MAC umasks of event 0x03 that mean FP FMA flops: every
    /// `flops.fma` event is one of theirs, opt-in and paired, within the work of a W event of
    /// the table; Intel's FP_ARITH and Zen 5 have none.
    #[test]
    fn fma_events_are_zen1_to_zen4_mac_umasks() {
        for p in Platform::embedded() {
            let fma: Vec<&EventSpec> = p.events.iter().filter(|e| e.quantity == "flops.fma").collect();
            match p.key.as_str() {
                "zen1" => assert_eq!(
                    fma.iter().map(|e| (e.umask, e.class.as_deref().unwrap())).collect::<Vec<_>>(),
                    vec![(0x80, "double_any_width"), (0x08, "single_any_width")]
                ),
                "zen2" | "zen3" | "zen4" => assert_eq!(
                    fma.iter().map(|e| (e.umask, e.class.as_deref().unwrap())).collect::<Vec<_>>(),
                    vec![(0x08, "any_precision")],
                    "{}",
                    p.key
                ),
                k => assert!(fma.is_empty(), "{k}: {fma:?}"),
            }
            for e in fma {
                assert!(e.event == 0x03 && e.paired && e.optional && e.weight == 1.0, "{}: {e:?}", p.key);
                let class = e.class.as_deref().unwrap();
                // Some W event of the table counts all of that work (MAC umask bits are part of it).
                assert!(
                    p.events.iter().any(|w| w.quantity == "flops"
                        && w.event == e.event
                        && w.umask & e.umask == e.umask
                        && w.class.as_deref() == Some(class)),
                    "{}: {} is a part of no W event",
                    p.key,
                    e.name
                );
            }
        }
    }

    #[test]
    fn work_no_counted_event_covers_is_named_not_zeroed() {
        let spr_flags = [
            "amx_tile",
            "amx_bf16",
            "amx_int8",
            "avx512vnni",
            "avx_vnni",
            "avx512_bf16",
            "avx512_fp16",
        ];
        let spr_classes = [
            "scalar_double",
            "packed512_double",
            "packed512_single",
            "scalar_half",
            "packed512_half",
        ];
        let has = |f: &str| spr_flags.contains(&f);
        let families: Vec<&str> = not_countable(&has, &spr_classes).into_iter().map(|(f, _)| f).collect();
        assert_eq!(families, ["amx", "vnni", "bf16"]);
        assert!(not_countable(&has, &spr_classes)[0].1.contains("not countable by perf on this CPU"));
        // Without the optional FP16 events, fp16 is not covered either.
        assert!(not_countable(&has, &["packed512_double"]).iter().any(|(f, _)| *f == "fp16"));
        // Zen 4: event 0x03 (any_precision) covers bf16 and fp32/fp64, not VNNI.
        let zen4 = |f: &str| ["avx512vnni", "avx512_bf16"].contains(&f);
        let families: Vec<&str> = not_countable(&zen4, &["any_precision"]).into_iter().map(|(f, _)| f).collect();
        assert_eq!(families, ["vnni"]);
        // A CPU without these units: nothing to say.
        assert!(not_countable(&|_| false, &["any_precision"]).is_empty());
    }

    #[test]
    fn flops_are_weighted_by_class_and_summed() {
        let vals = vec![
            EventValue {
                spec: spec("SD", "flops", Some("scalar_double"), 1.0),
                amount: Amount::Count(1000.0),
                running_fraction: Some(1.0),
            },
            EventValue {
                spec: spec("P512D", "flops", Some("packed512_double"), 8.0),
                amount: Amount::Count(250.0),
                running_fraction: Some(0.5),
            },
            EventValue {
                spec: spec("P256S", "flops", Some("packed256_single"), 8.0),
                amount: Amount::Count(3.0),
                running_fraction: None,
            },
        ];
        let d = derive(&vals, None);
        let f = d.flops.unwrap();
        assert_eq!(f.by_class["scalar_double"], 1000.0);
        assert_eq!(f.by_class["packed512_double"], 2000.0);
        assert_eq!(f.by_class["packed256_single"], 24.0);
        assert_eq!(f.total, 3024.0);
        assert_eq!(d.multiplexed.get("P512D"), Some(&0.5));
        assert!(d.notes.iter().any(|n| n.contains("P512D counted 50.0%")), "{:?}", d.notes);
        assert!(!d.flops_approximate);
    }

    #[test]
    fn bytes_per_level_and_dram_split() {
        let mut rd = spec("CAS.RD", "bytes.dram_read", None, 64.0);
        rd.pmu = "uncore_imc".into();
        let mut wr = spec("CAS.WR", "bytes.dram_write", None, 64.0);
        wr.pmu = "uncore_imc".into();
        let vals = vec![
            EventValue {
                spec: spec("L1D.REPLACEMENT", "bytes.l2", None, 64.0),
                amount: Amount::Count(10.0),
                running_fraction: None,
            },
            EventValue {
                spec: spec("L2_LINES_IN", "bytes.l3", None, 64.0),
                amount: Amount::Count(3.0),
                running_fraction: None,
            },
            EventValue {
                spec: spec("L2_LINES_OUT", "bytes.l3", None, 64.0),
                amount: Amount::Count(2.0),
                running_fraction: None,
            },
            EventValue {
                spec: rd,
                amount: Amount::Count(100.0),
                running_fraction: None,
            },
            // perf already applied the MiB scale: no weight.
            EventValue {
                spec: wr,
                amount: Amount::Bytes(1_048_576.0),
                running_fraction: None,
            },
        ];
        let d = derive(&vals, None);
        assert_eq!(d.bytes["l2"], 640.0);
        assert_eq!(d.bytes["l3"], 320.0);
        assert_eq!(d.bytes["dram"], 6400.0 + 1_048_576.0);
        assert_eq!(d.dram_read_bytes, Some(6400.0));
        assert_eq!(d.dram_write_bytes, Some(1_048_576.0));
        assert!(d.system_wide_levels.contains("dram") && !d.system_wide_levels.contains("l2"));
        assert!(d.flops.is_none());
        assert!(d.notes.iter().any(|n| n.contains("W unavailable")));
        assert!(d.notes.iter().any(|n| n.contains("system-wide")));
    }

    #[test]
    fn approximate_events_are_flagged_and_missing_dram_is_said() {
        let mut avx = spec("AVX_INSTS.ALL", "flops", Some("packed_any_precision"), 4.0);
        avx.unreliable = true;
        avx.caveat = Some("counts every AVX instruction".into());
        let d = derive(
            &[EventValue {
                spec: avx,
                amount: Amount::Count(5.0),
                running_fraction: None,
            }],
            Some(&Platform::load("zen1").unwrap()),
        );
        assert_eq!(d.flops.as_ref().unwrap().total, 20.0);
        assert!(d.flops_approximate);
        assert!(d.notes.iter().any(|n| n.starts_with("W is approximate")));
        assert!(d.notes.iter().any(|n| n.contains("Q_dram unavailable")), "{:?}", d.notes);
        let d4 = derive(&[], Some(&Platform::load("zen4").unwrap()));
        assert!(!d4.notes.iter().any(|n| n.contains("Q_dram unavailable")));
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn phantom_dram_traffic_is_rejected() {
        // LIKWID's phantom channel: 1.88e19 bytes.
        let e = check_dram_plausible(1.88e19, 10.0, "zen3").unwrap_err();
        assert!(e.to_string().contains("cannot be true"), "{e}");
        assert_eq!(e.exit_code(), 2);
        // A plausible full-bandwidth run passes.
        assert!(check_dram_plausible(400e9 * 10.0, 10.0, "zen3").is_ok());
        assert!(check_dram_plausible(f64::INFINITY, 1.0, "skx").is_err());
    }

    #[cfg(feature = "analysis")]
    #[test]
    fn raw_config_round_trips() {
        let mut r = Rng(seed());
        for _ in 0..500 {
            let mut s = spec("x", "flops", None, 1.0);
            let amd = r.next().is_multiple_of(2);
            s.event = r.next() % if amd { 0x1000 } else { 0x100 };
            s.umask = r.next() % 0x100;
            s.cmask = r.next() % 0x100;
            s.inv = r.next().is_multiple_of(2);
            s.edge = r.next().is_multiple_of(2);
            let (e, u, c, i, g) = decode_core_config(core_config(&s, amd), amd);
            assert_eq!((e, u, c, i, g), (s.event, s.umask, s.cmask, s.inv, s.edge), "seed {}", r.0);
        }
        let mut fp = spec("FP", "flops", None, 1.0);
        fp.event = 0xc7;
        fp.umask = 0x40;
        assert_eq!(core_config(&fp, false), 0x40c7);
    }
}
