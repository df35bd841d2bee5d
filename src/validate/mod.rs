//! Validation of a backend against the kernel suite's analytic counts: the paper's
//! validation table, shared by `roofline validate` and the profile's trace check.
//!
//! With the trace backend each kernel instance is prepared in this process, then run once in
//! a forked child under the tracer, between two marker functions whose breakpoints bound the
//! count (see `counters::trace::trace_forked`): only the kernel call is counted. The call path
//! itself (closure, virtual call, the instance's fields) loads a few bytes the analytic counts
//! leave out, the same at every size: each variant is traced at n and n/2, the difference must
//! equal the analytic difference exactly, and the constant part must stay under 1 KiB.

pub mod perf;

use crate::schema::validation::{Row, rel_err};
use std::collections::BTreeMap;

use crate::counters::BackendKind;
use crate::counters::cachesim::CacheHierarchy;
use crate::counters::trace::{self, TraceMode};
use crate::error::{Error, Result};
use crate::kernels::{Counts, Variant, api};

fn flops_map(c: &Counts) -> BTreeMap<String, u64> {
    c.flops
        .iter()
        .filter(|(_, v)| **v > 0)
        .map(|(k, v)| (k.key().to_string(), *v))
        .collect()
}

/// The simulated hierarchy `--trace memory` uses without `--cache`: small, so the streaming
/// kernels at 4× its last level stay quick to single-step (128 KiB) while the harness's few
/// lines (stack, the instance's fields: under 1 KiB) stay far below the 2 % tolerance.
pub const DEFAULT_VALIDATE_CACHE: &str = "L1=4KiB:4,L2=32KiB:8";

/// Tolerance of the DRAM Q check (relative to the compulsory traffic).
pub const DRAM_TOLERANCE: f64 = 0.02;

/// The traced counts of one `run()`, and the simulated DRAM bytes when `sim` is given (memory mode).
fn run_traced(
    inst: &mut Box<dyn api::Instance>,
    mode: TraceMode,
    sim: Option<&CacheHierarchy>,
) -> Result<(trace::tally::Tally, Option<f64>)> {
    let mut work = || inst.run();
    match sim {
        Some(h) if mode == TraceMode::Memory => {
            let mut h = h.clone();
            let r = trace::trace_forked_with_sink(&mut work, mode, false, Some(&mut h))?;
            let dram = r.levels.iter().find(|(k, _)| k == "dram").map(|(_, v)| *v);
            Ok((r.total, dram))
        }
        _ => Ok((trace::trace_forked(&mut work, mode, false)?.total, None)),
    }
}

/// The streaming kernels of the suite (single-pass streams, non-temporal ones included): the
/// kernels whose DRAM Q at 4× the last level is their compulsory traffic.
pub fn is_streaming(name: &str) -> bool {
    crate::kernels::stream::kernels().iter().any(|k| k.name() == name)
}

/// Bytes the harness itself may load or store around a kernel run (the closure, the virtual
/// call, the instance's fields): the same at every size, reported, and bounded by this.
const HARNESS_BYTES_MAX: u64 = 1024;

pub fn validate_one(k: &dyn api::Kernel, v: Variant, n: usize, backend: BackendKind, seed: u64, mode: TraceMode) -> Result<Row> {
    validate_one_with(k, v, n, backend, seed, mode, None)
}

/// [`validate_one`] with a simulated hierarchy for `--trace memory`: DRAM Q is then measured
/// (for every kernel) and, for the streaming kernels, checked against the compulsory traffic
/// within [`DRAM_TOLERANCE`].
pub fn validate_one_with(
    k: &dyn api::Kernel,
    v: Variant,
    n: usize,
    backend: BackendKind,
    seed: u64,
    mode: TraceMode,
    sim: Option<&CacheHierarchy>,
) -> Result<Row> {
    let mut inst = k
        .instance(n, v, seed)
        .map_err(|e| Error::input(format!("{} {}: {e}", k.name(), v), "try another --working-set"))?;
    let analytic = inst.counts();
    let measured = match backend {
        BackendKind::Auto | BackendKind::Perf | BackendKind::Simulated => {
            return Err(Error::input(
                format!(
                    "validating with {} counts events group by group, not per kernel run here",
                    backend.name()
                ),
                "use validate::perf for the perf backend and the simulated PMU; this validates trace and analytic",
            ));
        }
        BackendKind::Analytic => {
            // The kernel-level formula against the instance's own: two derivations of one count.
            let c = k.counts(n, v);
            Measured {
                flops: flops_map(&c),
                fma: c.fma_flops,
                core: c.core_bytes(),
                detail: None,
                dram: None,
                harness_bytes: None,
                core_ok: None,
                stepped_ok: None,
                stepped_detail: None,
            }
        }
        BackendKind::Trace => {
            let case = Case {
                kernel: k,
                variant: v,
                n,
                seed,
            };
            measure_traced(case, &mut inst, &analytic, mode, sim)?
        }
    };
    Ok(judge_row(k, v, n, &analytic, measured))
}

/// A kernel variant at one size, and the seed of its inputs.
#[derive(Clone, Copy)]
struct Case<'a> {
    kernel: &'a dyn api::Kernel,
    variant: Variant,
    n: usize,
    seed: u64,
}

/// What a backend measured of one kernel instance, and the checks only the trace backend makes.
struct Measured {
    /// W by class.
    flops: BTreeMap<String, u64>,
    fma: u64,
    core: u64,
    detail: Option<String>,
    /// Simulated DRAM bytes (`--trace memory`).
    dram: Option<u64>,
    /// Bytes of the call path around the kernel (trace(n) - analytic(n)).
    harness_bytes: Option<i64>,
    /// Whether the traces at n and n/2 differ by exactly the analytic difference, with the
    /// harness bytes within [`HARNESS_BYTES_MAX`].
    core_ok: Option<bool>,
    /// Whether memory mode gave the same bytes per level as single-stepping.
    stepped_ok: Option<bool>,
    stepped_detail: Option<String>,
}

/// The trace backend's counts of `inst` (the case at n), with its checks: memory mode against
/// single-stepping (`--trace memory`), and the harness bytes from a second trace at n/2.
fn measure_traced(
    case: Case,
    inst: &mut Box<dyn api::Instance>,
    analytic: &Counts,
    mode: TraceMode,
    sim: Option<&CacheHierarchy>,
) -> Result<Measured> {
    let Case {
        kernel: k,
        variant: v,
        n,
        seed,
    } = case;
    let (t, dram) = run_traced(inst, mode, sim)?;
    let t = &t;
    let (stepped_ok, stepped_detail) = if mode == TraceMode::Memory
        && let Some(h) = sim
    {
        memory_mode_against_stepping(case, h)?
    } else {
        (None, None)
    };
    let dram = dram.map(|d| d.round() as u64);
    // A second, smaller size: the difference of the two traces is the kernel's own
    // traffic, which must equal the difference of the analytic counts exactly.
    let n2 = (n / 2).max(1);
    let second = match k.instance(n2, v, seed ^ 0x9e37) {
        Ok(mut i2) => Some((i2.counts(), run_traced(&mut i2, mode, None)?.0)),
        Err(_) => None,
    };
    let by: BTreeMap<String, u64> = t
        .flops
        .iter()
        .enumerate()
        .filter(|(_, v)| **v > 0)
        .map(|(i, v)| (trace::tally::class_key(i).to_string(), *v))
        .collect();
    let detail = (t.unclassified > 0).then(|| format!("{} unclassified instructions", t.unclassified));
    let core = t.core_load + t.core_store;
    let mut measured = Measured {
        flops: by,
        fma: t.fma_flops,
        core,
        detail,
        dram,
        harness_bytes: None,
        core_ok: None,
        stepped_ok,
        stepped_detail,
    };
    if let Some((c2, t2)) = second {
        let dm = core as i128 - (t2.core_load + t2.core_store) as i128;
        let da = analytic.core_bytes() as i128 - c2.core_bytes() as i128;
        let harness = core as i128 - analytic.core_bytes() as i128;
        measured.harness_bytes = Some(harness as i64);
        let good = dm == da && harness >= 0 && harness as u64 <= HARNESS_BYTES_MAX;
        measured.core_ok = Some(good);
        if !good {
            measured.detail = Some(format!(
                "core bytes: trace(n)-trace(n/2) = {dm}, analytic difference {da}, harness bytes {harness}"
            ));
        }
    }
    Ok(measured)
}

/// The fast memory mode against single-stepping, on a small instance (the same process
/// layout: both trace a fork of this one): whether the bytes per level are the same, and
/// both where they are not. `(None, None)` where no small instance could be made.
fn memory_mode_against_stepping(case: Case, h: &CacheHierarchy) -> Result<(Option<bool>, Option<String>)> {
    let Case {
        kernel: k,
        variant: v,
        n,
        seed,
    } = case;
    // Small enough to single-step quickly (at most ~150 k instructions, measured by a
    // flops-mode trace of the candidate size).
    let mut ns = (n / 16).max(1);
    while ns > 1
        && let Ok(mut c) = k.instance(ns, v, seed ^ 0x51)
        && run_traced(&mut c, TraceMode::Flops, None)?.0.instructions > 150_000
    {
        ns /= 4;
    }
    let Ok(mut small) = k.instance(ns, v, seed ^ 0x51) else {
        return Ok((None, None));
    };
    let mut levels = Vec::new();
    for m in [TraceMode::Memory, TraceMode::Reference] {
        let mut hc = h.clone();
        let mut work = || small.run();
        levels.push(trace::trace_forked_with_sink(&mut work, m, false, Some(&mut hc))?.levels);
    }
    let same = levels[0] == levels[1];
    let detail = (!same).then(|| format!("memory mode at n={ns}: {:?}, single-stepped: {:?}", levels[0], levels[1]));
    Ok((Some(same), detail))
}

/// `detail` with `msg` added after what it already says.
fn add_detail(detail: Option<String>, msg: String) -> Option<String> {
    Some(match detail {
        Some(x) => format!("{x}; {msg}"),
        None => msg,
    })
}

/// DRAM Q: checked for the streaming kernels (their compulsory traffic is what a cold,
/// too-small hierarchy must move); the others' figure is shown, not judged. Whether it
/// passed, and why not.
fn judge_dram(kernel: &str, analytic: &Counts, dram_measured: Option<u64>) -> (bool, Option<String>) {
    match dram_measured {
        Some(d) if is_streaming(kernel) => {
            let e = rel_err(analytic.dram_bytes, d);
            let good = e <= DRAM_TOLERANCE;
            let why = (!good).then(|| {
                format!(
                    "DRAM bytes: simulated {d}, compulsory {} ({:+.2} %, tolerance {:.0} %)",
                    analytic.dram_bytes,
                    100.0 * (d as f64 - analytic.dram_bytes as f64) / analytic.dram_bytes.max(1) as f64,
                    100.0 * DRAM_TOLERANCE
                )
            });
            (good, why)
        }
        _ => (true, None),
    }
}

/// The row of one kernel variant at `n`: what was measured against the analytic counts.
fn judge_row(k: &dyn api::Kernel, v: Variant, n: usize, analytic: &Counts, measured: Measured) -> Row {
    let Measured {
        flops: flops_measured,
        fma: fma_measured,
        core: core_measured,
        mut detail,
        dram: dram_measured,
        harness_bytes,
        core_ok,
        stepped_ok,
        stepped_detail,
    } = measured;
    let flops_analytic = flops_map(analytic);
    let fma_ok = analytic.fma_flops == fma_measured;
    if !fma_ok {
        let msg = format!("FMA flops: analytic {}, measured {fma_measured}", analytic.fma_flops);
        detail = add_detail(detail, msg);
    }
    let (dram_ok, dram_why) = judge_dram(k.name(), analytic, dram_measured);
    if let Some(msg) = dram_why {
        detail = add_detail(detail, msg);
    }
    if let Some(m) = stepped_detail {
        detail = add_detail(detail, m);
    }
    let ok = flops_analytic == flops_measured
        && fma_ok
        && core_ok.unwrap_or(analytic.core_bytes() == core_measured)
        && dram_ok
        && stepped_ok.unwrap_or(true);
    Row {
        kernel: k.name().to_string(),
        variant: v.name().to_string(),
        n,
        flops_analytic,
        flops_measured,
        fma_analytic: analytic.fma_flops,
        fma_measured,
        core_analytic: analytic.core_bytes(),
        core_measured,
        dram_analytic: analytic.dram_bytes,
        dram_measured,
        core_harness_bytes: harness_bytes,
        memory_matches_stepping: stepped_ok,
        ok,
        detail,
    }
}

/// Every runnable variant of the selected suite kernels (`kernels` empty: all) against the
/// analytic counts: the rows, and the variants this CPU cannot run (with the reason). With
/// `sim` (trace memory mode) the streaming kernels run at 4x its last level.
pub fn validate_suite(
    kernels: &[String],
    working_set: u64,
    backend: BackendKind,
    seed: u64,
    mode: TraceMode,
    sim: Option<&CacheHierarchy>,
) -> Result<(Vec<Row>, Vec<crate::schema::report::NotRun>)> {
    let suite = api::all();
    for name in kernels {
        if !suite.iter().any(|k| k.name() == name) {
            return Err(Error::input(format!("no kernel named {name}"), "see `roofline kernels`"));
        }
    }
    let llc = sim.and_then(|h| h.levels().last().map(|l| l.size_bytes)).unwrap_or(0);
    let mut rows = Vec::new();
    let mut not_run = Vec::new();
    for k in suite.iter().filter(|k| kernels.is_empty() || kernels.iter().any(|n| n == k.name())) {
        let n = match sim {
            Some(_) if is_streaming(k.name()) => k.size_for_bytes(4 * llc),
            _ => k.size_for_bytes(working_set),
        };
        for &v in k.variants() {
            if !v.supported() {
                not_run.push(crate::schema::report::NotRun {
                    name: format!("{}/{}", k.name(), v.name()),
                    reason: format!("this CPU lacks the {} instructions", v.name()),
                });
                continue;
            }
            if let Some(why) = k.unavailable(v) {
                not_run.push(crate::schema::report::NotRun {
                    name: format!("{}/{}", k.name(), v.name()),
                    reason: why,
                });
                continue;
            }
            rows.push(validate_one_with(k.as_ref(), v, n, backend, seed, mode, sim)?);
        }
    }
    Ok((rows, not_run))
}

/// The validation rows as a `roofline.report/1`: W as measured by the backend, core Q as
/// measured less the constant harness bytes (zero time: for exact-count gates, not plots).
pub fn rows_report(rows: &[Row], backend: BackendKind) -> crate::schema::Report {
    use crate::schema::{Bytes, Flops, Point, Provenance, Report, Source};
    let src = match backend {
        BackendKind::Trace => Source::Trace,
        BackendKind::Perf => Source::Perf,
        BackendKind::Simulated => Source::Simulated,
        BackendKind::Analytic | BackendKind::Auto => Source::Analytic,
    };
    let machine = crate::machine::detect_static(&Default::default())
        .ok()
        .and_then(|m| serde_json::to_value(m).ok())
        .unwrap_or_default();
    let mut r = Report::new(machine, crate::schema::environment::collect(&std::env::args().collect::<Vec<_>>()));
    for row in rows {
        let by_class: BTreeMap<String, f64> = row.flops_measured.iter().map(|(k, v)| (k.clone(), *v as f64)).collect();
        let core = row.core_measured as i64 - row.core_harness_bytes.unwrap_or(0);
        let mut bytes = Bytes::new();
        bytes.insert("core".into(), core.max(0) as f64);
        let prov = Provenance {
            flops: Some(src),
            bytes: [("core".to_string(), src)].into_iter().collect(),
            seconds: None,
            notes: vec![format!(
                "roofline validate at n = {}; core Q less the {} harness bytes",
                row.n,
                row.core_harness_bytes.unwrap_or(0)
            )],
            untrusted: Vec::new(),
        };
        let mut flops = Flops::of_classes(by_class);
        flops.fma = Some(row.fma_measured as f64);
        let mut p = Point::new(format!("{}/{}", row.kernel, row.variant), prov, flops, bytes, 1, vec![]);
        p.extra.insert("n".into(), (row.n as u64).into());
        r.points.push(p);
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::{Precision, api::Instance};

    /// A kernel whose formula claims every flop of `inner` as an FMA: the counts of its
    /// instances (the truth) then differ from it in the FMA flops only.
    struct ClaimsFma(Box<dyn api::Kernel>);

    impl api::Kernel for ClaimsFma {
        fn name(&self) -> &'static str {
            self.0.name()
        }
        fn description(&self) -> &'static str {
            self.0.description()
        }
        fn precision(&self) -> Precision {
            self.0.precision()
        }
        fn variants(&self) -> &'static [Variant] {
            self.0.variants()
        }
        fn formula(&self, v: Variant) -> String {
            self.0.formula(v)
        }
        fn working_set_bytes(&self, n: usize) -> u64 {
            self.0.working_set_bytes(n)
        }
        fn size_for_bytes(&self, bytes: u64) -> usize {
            self.0.size_for_bytes(bytes)
        }
        fn counts(&self, n: usize, v: Variant) -> Counts {
            let mut c = self.0.counts(n, v);
            c.fma_flops = c.flops_total();
            c
        }
        fn instance(&self, n: usize, v: Variant, seed: u64) -> std::result::Result<Box<dyn Instance>, String> {
            self.0.instance(n, v, seed)
        }
    }

    #[test]
    fn fma_flops_are_compared_like_the_classes_of_w() {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        let n = 17 + (seed % 1000) as usize;
        // The scalar triad multiplies then adds: 2n flops, none of them an FMA.
        let triad = || api::find("triad").unwrap();
        let row = validate_one(triad().as_ref(), Variant::Scalar, n, BackendKind::Analytic, seed, TraceMode::Flops).unwrap();
        assert!(row.ok, "n={n}: {row:?}");
        assert_eq!((row.fma_analytic, row.fma_measured), (0, 0));
        let lying = ClaimsFma(triad());
        let row = validate_one(&lying, Variant::Scalar, n, BackendKind::Analytic, seed, TraceMode::Flops).unwrap();
        assert_eq!(row.flops_analytic, row.flops_measured, "the classes of W agree");
        assert_eq!((row.fma_analytic, row.fma_measured), (0, 2 * n as u64));
        assert!(!row.ok, "n={n}: an FMA mismatch must fail the row");
        assert!(row.detail.as_deref().is_some_and(|d| d.contains("FMA flops")), "{:?}", row.detail);
    }
}
