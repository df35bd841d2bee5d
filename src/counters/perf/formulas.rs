//! W, Q and T from the scaled counts of a measurement.

use std::collections::BTreeMap;

use super::{CounterSpec, ECORE_CYCLES, EventCount, Scope};
use crate::counters::Measurement;
use crate::report::{Bytes, Flops, Provenance, Source};

/// W, Q and T from counts. (The event → W/Q formulas belong to `counters::events`, written
/// alongside; until it lands this private version sums `count × weight` per quantity.)
pub fn to_measurement(specs: &[CounterSpec], counts: &[EventCount], seconds_samples: Vec<f64>) -> Measurement {
    let mut flops = Flops::default();
    let mut bytes = Bytes::new();
    let mut extra = BTreeMap::new();
    let mut multiplex = serde_json::Map::new();
    let mut not_counted = Vec::new();
    let mut l1_fill = None;
    let mut have_flops = false;
    // The MAC events' flops (`flops.fma`: a part of W) and the most scaling may add to counts.
    let mut fma: Option<f64> = None;
    let mut slack = 0.0;
    let mut parts: Vec<(String, f64)> = Vec::new();
    let mut levels: BTreeMap<String, Source> = BTreeMap::new();
    let mut counts_json = serde_json::Map::new();
    let mut notes =
        vec!["bytes.core is not counted by hardware: use `--backend trace` or analytic counts for core-side traffic".to_string()];
    for (s, c) in specs.iter().zip(counts) {
        let Some(sc) = c.scaled else {
            not_counted.push(serde_json::Value::from(s.name.clone()));
            continue;
        };
        counts_json.insert(s.name.clone(), serde_json::json!(sc.value));
        if sc.running_ratio < 1.0 {
            multiplex.insert(s.name.clone(), serde_json::json!(sc.running_ratio));
        }
        let v = sc.value * s.weight;
        if s.quantity.starts_with("flops") {
            slack += 0.5 * s.weight / sc.running_ratio.max(1e-9);
        }
        match s.quantity.as_str() {
            "flops.fma" => *fma.get_or_insert(0.0) += v,
            "flops" => {
                have_flops = true;
                let class = s.class.clone().unwrap_or_else(|| "unknown".into());
                if crate::kernels::FlopClass::key_is_integer(&class) {
                    *flops.int_ops.get_or_insert(0.0) += v;
                } else {
                    flops.total += v;
                }
                if let Some(parent) = &s.part_of {
                    parts.push((parent.clone(), v));
                }
                *flops.by_class.entry(class).or_insert(0.0) += v;
            }
            "bytes.l1_fill" => *l1_fill.get_or_insert(0.0) += v,
            q if q.starts_with("bytes.") => {
                let lvl = match &q[6..] {
                    "dram_read" | "dram_write" => "dram",
                    other => other,
                };
                *bytes.entry(lvl.to_string()).or_insert(0.0) += v;
                levels.insert(lvl.to_string(), Source::Perf);
            }
            _ => {}
        }
        if s.unreliable
            && let Some(cv) = &s.caveat
        {
            notes.push(format!("{}: {cv}", s.name));
        }
    }
    if have_flops {
        let classes: Vec<&str> = specs
            .iter()
            .filter(|s| s.quantity == "flops")
            .filter_map(|s| s.class.as_deref())
            .collect();
        let facts = crate::machine::cpuid::CpuidFacts::read(&crate::machine::cpuid::LiveCpuid);
        let missing = crate::counters::events::not_countable(&|f| facts.has(f), &classes);
        if !missing.is_empty() {
            extra.insert(
                "not_countable".into(),
                serde_json::json!(missing.iter().map(|(f, _)| *f).collect::<Vec<_>>()),
            );
            notes.extend(missing.into_iter().map(|(_, n)| n));
        }
    }
    if !parts.is_empty() {
        let mut by_class = std::mem::take(&mut flops.by_class);
        crate::counters::events::move_parts(&mut by_class, &parts);
        flops = Flops::of_classes(by_class);
    }
    // The FMA share where MAC events counted beside the W they are a part of.
    if let Some(f) = fma {
        extra.insert("fma_flops_counted".into(), serde_json::json!(f));
        if have_flops {
            match crate::counters::events::fma_share_of(f, flops.total, slack) {
                Ok(f) => flops.fma = Some(f),
                Err(why) => notes.push(why),
            }
        }
    }
    // L1 fills are the lines L2 delivers to L1: Q at the L2 level when nothing better counts it.
    if let Some(f) = l1_fill {
        extra.insert("bytes_l1_fill".into(), serde_json::json!(f));
        if !bytes.contains_key("l2") {
            bytes.insert("l2".into(), f);
            levels.insert("l2".into(), Source::Perf);
        }
    }
    if specs.iter().any(|s| matches!(s.scope, Scope::Uncore { .. })) {
        notes.push("uncore (memory) counts are system-wide: other processes' traffic is included (see --idle-baseline)".into());
    }
    let task_s: Option<f64> = specs
        .iter()
        .zip(counts)
        .find(|(s, _)| s.quantity == "seconds.task")
        .and_then(|(_, c)| c.scaled.map(|x| x.value * 1e-9));
    let cycles: Option<f64> = specs
        .iter()
        .zip(counts)
        .find(|(s, _)| s.quantity == "cycles")
        .and_then(|(_, c)| c.scaled.map(|x| x.value));
    if let Some(t) = task_s {
        extra.insert("task_clock_seconds".into(), serde_json::json!(t));
    }
    let ecore: Option<f64> = specs
        .iter()
        .zip(counts)
        .find(|(s, _)| s.quantity == ECORE_CYCLES)
        .and_then(|(_, c)| c.scaled.map(|x| x.value));
    if let Some(e) = ecore {
        extra.insert("ecore_cycles".into(), serde_json::json!(e));
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
        extra.insert("cycles".into(), serde_json::json!(c));
        if let Some(t) = task_s.filter(|t| *t > 0.0) {
            // cycles / task-clock, not / wall time: inherited cycles add up over threads.
            extra.insert("effective_ghz".into(), serde_json::json!(c / t / 1e9));
        }
    }
    extra.insert("counts".into(), serde_json::Value::Object(counts_json));
    if !multiplex.is_empty() {
        extra.insert("multiplex_running_ratio".into(), serde_json::Value::Object(multiplex));
    }
    if !not_counted.is_empty() {
        extra.insert("not_counted".into(), serde_json::Value::Array(not_counted));
    }
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
