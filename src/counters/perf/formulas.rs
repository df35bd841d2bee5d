//! W, Q and T from the scaled counts of a measurement.

use std::collections::BTreeMap;

use serde_json::json;

use super::{CounterSpec, ECORE_CYCLES, EventCount, Scope};
use crate::counters::Measurement;
use crate::schema::{Bytes, Flops, PointExtras, Provenance, Source};

/// W, Q and T from counts: each count times its event's weight, summed per quantity, then
/// what the sums say together: the classes this CPU cannot count, flops moved between classes,
/// the FMA share of W, Q at L2 from L1 fills, the clock and the E-cores' share of the cycles.
pub fn to_measurement(specs: &[CounterSpec], counts: &[EventCount], seconds_samples: Vec<f64>) -> Measurement {
    let mut notes =
        vec!["bytes.core is not counted by hardware: use `--backend trace` or analytic counts for core-side traffic".to_string()];
    let mut extra = PointExtras::default();
    let Tally {
        mut flops,
        mut bytes,
        have_flops,
        fma,
        slack,
        parts,
        l1_fill,
        mut levels,
        counts: counts_json,
        multiplex,
        not_counted,
    } = tally(specs, counts, &mut notes);
    if have_flops {
        note_classes_not_countable(specs, &mut extra, &mut notes);
    }
    if !parts.is_empty() {
        let mut by_class = std::mem::take(&mut flops.by_class);
        crate::counters::events::move_parts(&mut by_class, &parts);
        flops = Flops::of_classes(by_class);
    }
    // The FMA share where MAC events counted beside the W they are a part of.
    if let Some(f) = fma {
        extra.fma_flops_counted = Some(f);
        if have_flops {
            match crate::counters::events::fma_share_of(f, flops.total, slack) {
                Ok(f) => flops.fma = Some(f),
                Err(why) => notes.push(why),
            }
        }
    }
    // L1 fills are the lines L2 delivers to L1: Q at the L2 level when nothing better counts it.
    if let Some(f) = l1_fill {
        extra.insert("bytes_l1_fill", json!(f));
        if !bytes.contains_key("l2") {
            bytes.insert("l2".into(), f);
            levels.insert("l2".into(), Source::Perf);
        }
    }
    if specs.iter().any(|s| matches!(s.scope, Scope::Uncore { .. })) {
        notes.push("uncore (memory) counts are system-wide: other processes' traffic is included (see --idle-baseline)".into());
    }
    note_clock_and_ecores(specs, counts, &mut extra, &mut notes);
    extra.counts = Some(counts_json);
    extra.multiplex_running_ratio = (!multiplex.is_empty()).then_some(multiplex);
    extra.not_counted = (!not_counted.is_empty()).then_some(not_counted);
    Measurement {
        flops,
        bytes,
        provenance: Some(Provenance {
            flops: have_flops.then_some(Source::Perf),
            bytes: levels,
            seconds: Some(Source::Native),
            notes,
            untrusted: Vec::new(),
        }),
        seconds_samples,
        threads: 1,
        extra,
        regions: Vec::new(),
    }
}

/// The counts of a measurement summed per quantity, with what each event said on the way.
#[derive(Default)]
struct Tally {
    flops: Flops,
    bytes: Bytes,
    have_flops: bool,
    /// The MAC events' flops (`flops.fma`: a part of W, never added to it).
    fma: Option<f64>,
    /// The most that scaling for multiplexing may have added to the flops counts.
    slack: f64,
    /// Flops of events counted inside another class (`part_of`), to move out of it.
    parts: Vec<(String, f64)>,
    l1_fill: Option<f64>,
    levels: BTreeMap<String, Source>,
    /// Every counted event's scaled value, by name.
    counts: BTreeMap<String, Option<f64>>,
    /// The running ratio of every multiplexed event.
    multiplex: BTreeMap<String, f64>,
    /// Events that never had a counter.
    not_counted: Vec<String>,
}

/// Sum `count × weight` per quantity: flops by class (integer classes apart), bytes per level
/// (DRAM reads and writes together), the MAC events' flops and L1 fills for later; the
/// caveats of unreliable events go to `notes`.
fn tally(specs: &[CounterSpec], counts: &[EventCount], notes: &mut Vec<String>) -> Tally {
    let mut t = Tally::default();
    for (s, c) in specs.iter().zip(counts) {
        let Some(sc) = c.scaled else {
            t.not_counted.push(s.name.clone());
            continue;
        };
        t.counts.insert(s.name.clone(), Some(sc.value));
        if sc.running_ratio < 1.0 {
            t.multiplex.insert(s.name.clone(), sc.running_ratio);
        }
        let v = sc.value * s.weight;
        if s.quantity.starts_with("flops") {
            t.slack += 0.5 * s.weight / sc.running_ratio.max(1e-9);
        }
        match s.quantity.as_str() {
            "flops.fma" => *t.fma.get_or_insert(0.0) += v,
            "flops" => {
                t.have_flops = true;
                let class = s.class.clone().unwrap_or_else(|| "unknown".into());
                if crate::kernels::FlopClass::key_is_integer(&class) {
                    *t.flops.int_ops.get_or_insert(0.0) += v;
                } else {
                    t.flops.total += v;
                }
                if let Some(parent) = &s.part_of {
                    t.parts.push((parent.clone(), v));
                }
                *t.flops.by_class.entry(class).or_insert(0.0) += v;
            }
            "bytes.l1_fill" => *t.l1_fill.get_or_insert(0.0) += v,
            q if q.starts_with("bytes.") => {
                let lvl = match &q[6..] {
                    "dram_read" | "dram_write" => "dram",
                    other => other,
                };
                *t.bytes.entry(lvl.to_string()).or_insert(0.0) += v;
                t.levels.insert(lvl.to_string(), Source::Perf);
            }
            _ => {}
        }
        if s.unreliable
            && let Some(cv) = &s.caveat
        {
            notes.push(format!("{}: {cv}", s.name));
        }
    }
    t
}

/// The flop classes counted here that this CPU's events cannot see (from its CPUID features):
/// listed in `extra` and said in `notes`.
fn note_classes_not_countable(specs: &[CounterSpec], extra: &mut PointExtras, notes: &mut Vec<String>) {
    let classes: Vec<&str> = specs
        .iter()
        .filter(|s| s.quantity == "flops")
        .filter_map(|s| s.class.as_deref())
        .collect();
    let facts = crate::machine::cpuid::CpuidFacts::read(&crate::machine::cpuid::LiveCpuid);
    let missing = crate::counters::events::not_countable(&|f| facts.has(f), &classes);
    if !missing.is_empty() {
        extra.insert("not_countable", json!(missing.iter().map(|(f, _)| *f).collect::<Vec<_>>()));
        notes.extend(missing.into_iter().map(|(_, n)| n));
    }
}

/// task-clock, cycles and the effective clock (cycles over task-clock) in `extra`; on hybrid
/// parts the E-cores' cycles, and in `notes` whether W is partial for them.
fn note_clock_and_ecores(specs: &[CounterSpec], counts: &[EventCount], extra: &mut PointExtras, notes: &mut Vec<String>) {
    let value_of = |quantity: &str| {
        specs
            .iter()
            .zip(counts)
            .find(|(s, _)| s.quantity == quantity)
            .and_then(|(_, c)| c.scaled.map(|x| x.value))
    };
    let task_s: Option<f64> = value_of("seconds.task").map(|ns| ns * 1e-9);
    let cycles: Option<f64> = value_of("cycles");
    if let Some(t) = task_s {
        extra.insert("task_clock_seconds", json!(t));
    }
    if let Some(e) = value_of(ECORE_CYCLES) {
        extra.insert("ecore_cycles", json!(e));
        let p = cycles.unwrap_or(0.0);
        if e > 0.0 {
            let share = if p + e > 0.0 { 100.0 * e / (p + e) } else { 100.0 };
            notes.push(format!(
                "W partial: {share:.1} % of the cycles ran on E-cores, which count no FP operations (pin with taskset -c to P-cores, or use --backend trace)"
            ));
        } else {
            notes.push("no cycle ran on an E-core: W is complete".into());
        }
    }
    if let Some(c) = cycles {
        extra.insert("cycles", json!(c));
        if let Some(t) = task_s.filter(|t| *t > 0.0) {
            // cycles / task-clock, not / wall time: inherited cycles add up over threads.
            extra.effective_ghz = Some(c / t / 1e9);
        }
    }
}

/// Multiplexing, printed: one stderr line per event that did not run all the time.
#[cfg(feature = "trace")]
pub fn multiplex_warnings(counts: &[EventCount]) -> Vec<String> {
    counts
        .iter()
        .filter_map(|c| match c.scaled {
            None => Some(format!("{}: never scheduled on a counter (not counted)", c.name)),
            Some(s) if s.running_ratio < 1.0 => Some(format!(
                "{}: multiplexed, counted {:.1}% of the time, scaled ×{:.2}",
                c.name,
                s.running_ratio * 100.0,
                1.0 / s.running_ratio
            )),
            _ => None,
        })
        .collect()
}
