//! Empirical ceilings: compute and bandwidth microbenchmarks, sweeps, the one
//! plateau detector, and the per-machine cache file (`roofline.ceilings/1`).
//!
//! - [`compute`]: peak GFLOP/s per precision × ISA × instruction mix, clock per ISA;
//! - [`bandwidth`]: load/copy/triad/store/NT-store per memory level and thread count;
//! - [`sweep`]: performance against working-set size, levels marked by [`plateau`];
//!
//! The document itself (`Ceilings`, the machine summary `Host`) is `schema::ceilings`; the host's
//! identification, fingerprint and cache hierarchy, used to size everything, `machine::host`.

pub mod bandwidth;
pub mod compute;
pub mod energy;
pub mod measure;
pub mod plateau;
pub mod sweep;

use std::path::PathBuf;

use crate::error::{Error, Result};
use crate::schema::ceilings::{BandwidthCeiling, CEILINGS_SCHEMA, Ceilings, Host};
use measure::Budget;
use roofline_kernels::stream::Op;

/// What to measure.
#[derive(Debug, Clone)]
pub struct Options {
    pub quick: bool,
    pub threads: Vec<usize>,
    pub sweep: bool,
    /// Show a progress bar on stderr.
    pub progress: bool,
}

/// What the ceilings module adds to the document: the order check of its bandwidth roofs and
/// whether a cached one answers a request.
impl Ceilings {
    /// Bandwidth roofs out of order: per measured thread count, each cache level that is not
    /// faster than the next outer level (`out_of_order`). A level measured at a working set it
    /// does not serve (a guest given a slice of a large L3) reads as the level beyond it; such
    /// a roof is never used silently.
    pub fn disorder(&self) -> Vec<String> {
        let mut out = Vec::new();
        for &t in &self.threads {
            let mut levels: Vec<&str> = self.bandwidth.iter().filter(|b| b.threads == t).map(|b| b.level.as_str()).collect();
            levels.sort_by_key(|l| level_rank(l));
            levels.dedup();
            for w in levels.windows(2) {
                out.extend(out_of_order(&self.bandwidth, t, w[0], w[1]));
            }
        }
        out
    }

    /// Whether these ceilings answer `opts` (same machine checked separately).
    fn covers(&self, opts: &Options) -> bool {
        (!self.quick || opts.quick)
            && opts.threads.iter().all(|t| self.threads.contains(&(*t as u32)))
            && (!opts.sweep || self.sweep.is_some())
    }
}

/// A level is told from the next outer one when it is at least this much faster. (Measured
/// twice at 150 MiB on the Emerald Rapids guest, L3 read 0.99–1.16× DRAM kernel by kernel: noise
/// around 1.0; where it serves, at 37.5 MiB, 1.7–1.8×.)
const DISTINCT_LEVEL: f64 = 1.1;

/// Whether `inner` is not faster than `outer` at `threads`: its roof (the best kernel with
/// ordinary stores) is not `DISTINCT_LEVEL` × the outer one's, or most kernels measured at both
/// levels are not that much faster at the inner level than at the outer. (The second catches a level
/// measured beyond where it serves even when one kernel's roofs happen to differ: on the
/// Emerald Rapids guest, L3 at 150 MiB read daxpy 23.4 against DRAM's 23.0 GB/s, but load,
/// copy, triad and store were all slower than at DRAM sizes.) Why, or None.
fn out_of_order(bw: &[BandwidthCeiling], threads: u32, inner: &str, outer: &str) -> Option<String> {
    fn at<'a>(bw: &'a [BandwidthCeiling], threads: u32, level: &'a str) -> impl Iterator<Item = &'a BandwidthCeiling> {
        bw.iter()
            .filter(move |b| b.threads == threads && b.level == level && !b.kernel.contains("_nt"))
    }
    let at = |level| at(bw, threads, level);
    let roof = |level| at(level).map(|b| b.gbs).fold(0.0f64, f64::max);
    let (a, b) = (roof(inner), roof(outer));
    let pairs: Vec<(f64, f64)> = at(inner)
        .filter_map(|i| at(outer).find(|o| o.kernel == i.kernel).map(|o| (i.gbs, o.gbs)))
        .collect();
    let slower = pairs.iter().filter(|(i, o)| *i <= DISTINCT_LEVEL * o).count();
    if a > DISTINCT_LEVEL * b && 2 * slower <= pairs.len() {
        return None;
    }
    let ws = at(inner).map(|c| c.working_set_per_thread_bytes).max().unwrap_or(0);
    Some(format!(
        "{inner} roof {a:.1} GB/s is not 10 % above {outer}'s {b:.1} GB/s (×{threads}, measured at {} per thread; {slower} of \
         {} kernels not 10 % faster than at {outer}): that level does not serve this working set here; re-measure with \
         `roofline ceilings --refresh`",
        crate::schema::units::fmt_bytes(ws as f64),
        pairs.len()
    ))
}

/// Order of memory levels from the core out: `l1` < `l2` < `l3` < … < `dram`.
fn level_rank(level: &str) -> u32 {
    let l = level.to_ascii_lowercase();
    if l == "dram" {
        return u32::MAX;
    }
    l.strip_prefix('l').and_then(|n| n.parse().ok()).unwrap_or(u32::MAX - 1)
}

/// `$XDG_CACHE_HOME/roofline/ceilings.json`, else `~/.cache/roofline/ceilings.json`.
pub fn cache_path() -> Option<PathBuf> {
    Some(crate::util::cache_dir()?.join("ceilings.json"))
}

/// Why a cache file cannot be used.
#[derive(Debug, PartialEq)]
pub enum CacheState {
    Missing,
    Corrupt(String),
    OtherMachine { cached: String, here: String },
    Insufficient,
    Usable,
}

/// Read the cache file and decide whether it answers `opts` on `host`.
pub fn read_cache(path: &std::path::Path, host: &Host, opts: &Options) -> (CacheState, Option<Ceilings>) {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (CacheState::Missing, None),
        Err(e) => return (CacheState::Corrupt(e.to_string()), None),
    };
    match Ceilings::from_json(&text, &path.display().to_string()) {
        Err(e) => (CacheState::Corrupt(e.to_string().lines().next().unwrap_or("").to_string()), None),
        // The reader takes files without a machine summary; a cache cannot be told to be ours.
        Ok(c) if c.machine.fingerprint.is_empty() => (CacheState::Corrupt("no machine summary".to_string()), None),
        Ok(c) if c.machine.fingerprint != host.fingerprint || c.machine.compute_fingerprint() != c.machine.fingerprint => (
            CacheState::OtherMachine {
                cached: format!("{} ({})", c.machine.brand, c.machine.fingerprint),
                here: format!("{} ({})", host.brand, host.fingerprint),
            },
            None,
        ),
        Ok(c) if !c.covers(opts) => (CacheState::Insufficient, Some(c)),
        Ok(c) => (CacheState::Usable, Some(c)),
    }
}

/// Cached ceilings when they fit this machine and `quick`/`threads`, else measure (and cache).
/// A cache from another machine or a corrupt one is reported on stderr, then replaced.
pub fn load_or_measure(quick: bool, threads: &[usize], refresh: bool) -> Result<Ceilings> {
    load_or_measure_with(
        &Options {
            quick,
            threads: threads.to_vec(),
            sweep: false,
            progress: true,
        },
        refresh,
    )
}

pub fn load_or_measure_with(opts: &Options, refresh: bool) -> Result<Ceilings> {
    let host = Host::detect();
    let path = cache_path();
    if let (Some(p), false) = (&path, refresh) {
        match read_cache(p, &host, opts) {
            (CacheState::Usable, Some(c)) if c.disorder().is_empty() => return Ok(c),
            (CacheState::Usable, Some(c)) => {
                for d in c.disorder() {
                    eprintln!("roofline: cached ceilings {}: {d}; re-measuring", p.display());
                }
            }
            (CacheState::Corrupt(why), _) => eprintln!("roofline: ignoring corrupt ceilings cache {} ({why}); re-measuring", p.display()),
            (CacheState::OtherMachine { cached, here }, _) => {
                eprintln!(
                    "roofline: ceilings cache {} is from another machine ({cached}, this is {here}); re-measuring",
                    p.display()
                )
            }
            (CacheState::Insufficient, _) => eprintln!("roofline: ceilings cache lacks what was asked for; measuring"),
            _ => {}
        }
    }
    let c = measure(&host, opts)?;
    // Still out of order after the re-measure: said on every command that uses them.
    for d in c.disorder() {
        eprintln!("roofline: warning: {d}");
    }
    write_cache(&c);
    Ok(c)
}

/// Measure the ceilings of `threads` again and put them in place of `c`'s figures at that
/// thread count (those of other counts stay), with a note saying `why`; the cache is
/// rewritten. For figures read from the cache that something measured now contradicts: a
/// shared host's bandwidth moves by a quarter within minutes, and a roof from one moment
/// under a point from another says nothing about the point.
pub fn remeasure_threads(c: &mut Ceilings, threads: usize, why: &str) -> Result<()> {
    let opts = Options {
        quick: c.quick,
        threads: vec![threads],
        sweep: false,
        progress: true,
    };
    let fresh = measure(&Host::detect(), &opts)?;
    replace_threads(c, fresh, threads as u32, why);
    for d in c.disorder() {
        eprintln!("roofline: warning: {d}");
    }
    write_cache(c);
    Ok(())
}

/// A suite point above the roof of a bandwidth level: the level (`l2`, `dram`) and the point's
/// kernel (`dot`, `daxpy`; any name, only the stream kernels among them are measured).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PointAbove {
    /// The roof level the point is bound by, as the roofs name it (`l2`, `dram`).
    pub level: String,
    /// The point's suite kernel.
    pub kernel: String,
}

/// The bandwidth ceilings of the levels that points above them are bound by, measured once
/// more at `threads`, for roofs of this run that a point measured since contradicts. Per
/// level: the kernel of the highest core-side figure and the one of the highest traffic figure
/// (those two make the level's roofs; all six kernels at a DRAM working set would cost the
/// main job its time limit on 2 vCPUs), and the points' own kernels where they are stream
/// kernels (a roof is the best any kernel reaches there: with two read streams per thread,
/// `dot@dram×16` read 110 % of a DRAM roof set by `load` and `store_nt`); each at the level's
/// working set, a kernel measured before keeping the higher of its two figures, one new to the
/// level added. A note says why and what rose. A shared host's bandwidth (or, on a guest,
/// which vCPUs share a host core) moves within seconds: on the Emerald Rapids guest the main
/// job's 16-thread L2 roof read 959 GB/s in one run and 1461 in the next, and the suite's
/// `triad@256.0KiB×16` 151 % of the lower one. The cache is left to the caller.
pub fn remeasure_levels(c: &mut Ceilings, threads: usize, above: &[PointAbove], why: &str) -> Result<()> {
    let _reuse = roofline_kernels::stream::ReusedArrays::open();
    let budget = if c.quick { Budget::quick() } else { Budget::full() };
    let variant = bandwidth::widest_variant();
    let s0 = seed();
    let levels = levels_of(above);
    // (the index of a ceiling measured before, or none; the level as the ceilings name it; the
    // working set per thread; the kernel)
    let mut plan: Vec<(Option<usize>, String, u64, Op)> = Vec::new();
    for &level in &levels {
        let at: Vec<usize> = (0..c.bandwidth.len())
            .filter(|&i| c.bandwidth[i].threads == threads as u32 && level.eq_ignore_ascii_case(&c.bandwidth[i].level))
            .collect();
        let Some(&first) = at.first() else { continue };
        let best = |key: &dyn Fn(usize) -> f64| at.iter().copied().max_by(|&i, &j| key(i).total_cmp(&key(j)));
        let core = best(&|i| {
            if c.bandwidth[i].kernel.contains("_nt") {
                f64::MIN
            } else {
                c.bandwidth[i].gbs
            }
        });
        let traffic = best(&|i| c.bandwidth[i].traffic_gbs());
        let mut steps: Vec<(Option<usize>, Op)> = core
            .into_iter()
            .chain(traffic)
            .filter_map(|i| Some((Some(i), stream_op(&c.bandwidth[i].kernel)?)))
            .collect();
        for a in above.iter().filter(|a| a.level == level) {
            if let Some(op) = stream_op(&a.kernel) {
                steps.push((at.iter().copied().find(|&i| c.bandwidth[i].kernel == a.kernel), op));
            }
        }
        let name = &c.bandwidth[first].level;
        for (known, op) in steps {
            let ws = c.bandwidth[known.unwrap_or(first)].working_set_per_thread_bytes;
            if !plan.iter().any(|p| p.0 == known && p.1 == *name && p.3 == op) {
                plan.push((known, name.clone(), ws, op));
            }
        }
    }
    let mut raised = Vec::new();
    for (known, level, ws, op) in plan {
        let fresh =
            bandwidth::measure(op, variant, &level, ws, threads, budget, s0).map_err(|e| Error::unavailable(e, "try fewer threads"))?;
        match known {
            // (The two figures of a kernel move together: its traffic is a fixed multiple of
            // its core-side bytes.)
            Some(i) => {
                let b = &mut c.bandwidth[i];
                if fresh.gbs > b.gbs && fresh.traffic_gbs() >= b.traffic_gbs() {
                    raised.push(format!("{} {} {:.1} → {:.1} GB/s", b.level, b.kernel, b.gbs, fresh.gbs));
                    *b = fresh;
                }
            }
            None => {
                raised.push(format!("{} {} {:.1} GB/s (new)", fresh.level, fresh.kernel, fresh.gbs));
                c.bandwidth.push(fresh);
            }
        }
    }
    c.notes.push(format!(
        "×{threads}: {} measured again in the same run ({why}); each kernel keeps the higher figure: {}",
        levels.join(", "),
        if raised.is_empty() {
            "none rose".to_string()
        } else {
            raised.join(", ")
        }
    ));
    Ok(())
}

/// The points of `above` whose kernel is a stream kernel that `c` has not measured at their
/// level and `threads`, where it has measured that level (what [`remeasure_levels`] would add).
pub fn kernels_new_to_levels(c: &Ceilings, threads: usize, above: &[PointAbove]) -> Vec<PointAbove> {
    let measured = |a: &PointAbove, kernel: Option<&str>| {
        c.bandwidth
            .iter()
            .any(|b| b.threads == threads as u32 && a.level.eq_ignore_ascii_case(&b.level) && kernel.is_none_or(|k| k == b.kernel))
    };
    above
        .iter()
        .filter(|a| stream_op(&a.kernel).is_some() && measured(a, None) && !measured(a, Some(&a.kernel)))
        .cloned()
        .collect()
}

/// The levels of `above`, each once, in their order.
pub fn levels_of(above: &[PointAbove]) -> Vec<&str> {
    let mut levels: Vec<&str> = Vec::new();
    for a in above {
        if !levels.contains(&a.level.as_str()) {
            levels.push(&a.level);
        }
    }
    levels
}

/// The stream kernel of that name, if it is one.
fn stream_op(name: &str) -> Option<Op> {
    Op::ALL.into_iter().find(|o| o.name() == name)
}

/// `c`'s figures at `threads` replaced by `fresh`'s (measured at that count only); its notes
/// and warnings kept once, and a note saying when and why.
fn replace_threads(c: &mut Ceilings, fresh: Ceilings, threads: u32, why: &str) {
    c.compute.retain(|x| x.threads != threads);
    c.compute.extend(fresh.compute.into_iter().filter(|x| x.threads == threads));
    c.bandwidth.retain(|x| x.threads != threads);
    c.bandwidth.extend(fresh.bandwidth.into_iter().filter(|x| x.threads == threads));
    if !c.threads.contains(&threads) {
        c.threads.push(threads);
    }
    let said = fresh.warnings.iter().map(|w| format!("×{threads}: {w}"));
    for n in fresh.notes.into_iter().chain(said) {
        if !c.notes.contains(&n) {
            c.notes.push(n);
        }
    }
    c.notes
        .push(format!("×{threads}: re-measured at {} (Unix time): {why}", fresh.measured_at_unix));
}

/// Write `c` to the cache file (a failure is said on stderr: the figures are still good).
pub fn write_cache(c: &Ceilings) {
    if let Some(p) = &cache_path() {
        let written =
            p.parent().map(std::fs::create_dir_all).transpose().is_ok() && crate::util::write_atomic(p, c.to_json().as_bytes()).is_ok();
        if !written {
            eprintln!("roofline: could not write the ceilings cache {}", p.display());
        }
    }
}

/// The energy roofs of every thread count of `opts`: the cached ones where `c` has them all
/// (and `refresh` is off), else measured with `energy` and written into the cache beside the
/// time roofs.
pub fn energy_roofs(c: &mut Ceilings, energy: &crate::counters::energy::Energy, opts: &Options, refresh: bool) -> Result<()> {
    let have = |t: usize| c.energy.iter().any(|e| e.threads == Some(t as u32));
    if !refresh && opts.threads.iter().all(|&t| have(t)) {
        return Ok(());
    }
    let measured = energy::measure(energy, &c.machine, opts, 3)?;
    c.energy.retain(|e| !measured.iter().any(|m| m.threads == e.threads));
    c.energy.extend(measured);
    write_cache(c);
    Ok(())
}

/// A cache level whose roof came out no higher than the next outer level's was measured where
/// it does not serve (CPUID's size is the socket's, the guest gets a slice; or the level's far
/// part is slower): measure it again at a quarter of the working set, down to twice the inner
/// level's share, until it is above the outer roof. Its ceilings are replaced and a note says
/// at what size it served.
fn remeasure_disordered(
    bw: &mut Vec<BandwidthCeiling>,
    plan: &[(usize, Vec<(String, u64)>)],
    variant: roofline_kernels::Variant,
    budget: Budget,
    seed: u64,
    notes: &mut Vec<String>,
) {
    for (t, sizes) in plan {
        let t32 = *t as u32;
        for (k, (level, nominal)) in sizes.iter().enumerate() {
            let (Some((outer, _)), true) = (sizes.get(k + 1), level != "DRAM") else {
                continue;
            };
            let Some(why) = out_of_order(bw, t32, level, outer) else { continue };
            let floor = if k == 0 { 4096 } else { 2 * sizes[k - 1].1 };
            let mut size = *nominal;
            for _ in 0..3 {
                size /= 4;
                if size <= floor {
                    break;
                }
                let again: Vec<_> = bandwidth::LEVEL_KERNELS
                    .iter()
                    .filter_map(|op| bandwidth::measure(*op, variant, level, size, *t, budget, seed).ok())
                    .collect();
                let mut trial: Vec<_> = bw.iter().filter(|b| !(b.threads == t32 && b.level == *level)).cloned().collect();
                trial.extend(again);
                if out_of_order(&trial, t32, level, outer).is_none() {
                    *bw = trial;
                    notes.push(format!(
                        "{level} ×{t}: measured at {} per thread, where it serves; at the nominal {} (between the inner level's share and CPUID's): {why}",
                        crate::schema::units::fmt_bytes(size as f64),
                        crate::schema::units::fmt_bytes(*nominal as f64)
                    ));
                    break;
                }
            }
        }
    }
}

fn seed() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0x5eed)
}

/// Measure everything `opts` asks for on `host`.
pub fn measure(host: &Host, opts: &Options) -> Result<Ceilings> {
    // The kernels' large arrays reused between them (their first touch is most of a DRAM
    // ceiling's cost).
    let _reuse = roofline_kernels::stream::ReusedArrays::open();
    let budget = if opts.quick { Budget::quick() } else { Budget::full() };
    let variant = bandwidth::widest_variant();
    let specs = compute::specs(opts.quick);
    let platform = host.platform();
    let mut notes = Vec::new();
    let mut warnings = Vec::new();
    if host.caches_source != "sysfs" {
        warnings.push("cache sizes not readable from sysfs: working sets use default sizes (32 KiB / 1 MiB / 32 MiB)".to_string());
    }
    if platform.is_none() {
        notes.push("no platform table matches this CPU: theoretical peaks are null".to_string());
    }
    let plan: Vec<(usize, Vec<(String, u64)>)> = opts
        .threads
        .iter()
        .map(|&t| {
            let (sizes, n) = bandwidth::level_sizes(host, t);
            for x in n {
                if !notes.contains(&x) {
                    notes.push(x);
                }
            }
            (t, sizes)
        })
        .collect();
    let bw_count: usize = plan
        .iter()
        .map(|(_, s)| s.len() * bandwidth::LEVEL_KERNELS.len() + bandwidth::DRAM_ONLY_KERNELS.len())
        .sum();
    let sweep_sizes = if opts.sweep {
        sweep::sizes(
            4096,
            plan.first().and_then(|(_, s)| s.last()).map(|(_, b)| *b).unwrap_or(128 << 20),
            1.25,
        )
    } else {
        vec![]
    };
    // Low-precision units: measured where the CPU has them; a missing unit is said, not faked.
    let units: Vec<roofline_kernels::lowp::Unit> = roofline_kernels::lowp::Unit::ALL
        .into_iter()
        .filter(|u| {
            let ok = u.available();
            if !ok {
                notes.push(format!("{}: not measured ({})", u.key(), u.why_unavailable()));
            } else if platform.as_ref().and_then(|p| compute::theoretical_ops_per_cycle(p, *u)).is_none() {
                let why = platform
                    .as_ref()
                    .and_then(|p| p.mixed_unrated.get(u.key()))
                    .map(|w| format!(" ({w})"))
                    .unwrap_or_default();
                notes.push(format!(
                    "{}: measured; the platform table has no rate for it{why}, so no % of a theoretical peak",
                    u.key()
                ));
            }
            ok
        })
        .collect();
    let total = (specs.len() + units.len()) * opts.threads.len() + bw_count + sweep_sizes.len();
    let bar = crate::util::Progress::new(opts.progress, total as u64, "ceilings {bar:30} {pos}/{len} {msg}");
    let mut compute_out = Vec::new();
    for &t in &opts.threads {
        for s in &specs {
            bar.set_message(format!(
                "{} {} {} ×{t}",
                compute::precision_name(s.precision),
                s.isa.name(),
                s.mode.name()
            ));
            let c = compute::measure_peak(*s, t, budget, platform.as_ref());
            if c.spread > measure::SPREAD_WARNING {
                warnings.push(format!(
                    "{} {} {} ×{t}: spread {:.1} %",
                    c.precision,
                    c.isa,
                    c.mode,
                    100.0 * c.spread
                ));
            }
            compute_out.push(c);
            bar.inc(1);
        }
        for u in &units {
            bar.set_message(format!("{} ×{t}", u.key()));
            if let Some(c) = compute::measure_mixed(*u, t, budget, platform.as_ref()) {
                if c.spread > measure::SPREAD_WARNING {
                    warnings.push(format!("{}.{} ×{t}: spread {:.1} %", c.precision, c.isa, 100.0 * c.spread));
                }
                compute_out.push(c);
            }
            bar.inc(1);
        }
    }
    let mut bw_out = Vec::new();
    let s0 = seed();
    for (t, sizes) in &plan {
        for (level, per_thread) in sizes {
            let mut ops: Vec<_> = bandwidth::LEVEL_KERNELS.to_vec();
            if level == "DRAM" {
                ops.extend(bandwidth::DRAM_ONLY_KERNELS);
            }
            for op in ops {
                bar.set_message(format!("{level} {} ×{t}", op.name()));
                let b = bandwidth::measure(op, variant, level, *per_thread, *t, budget, s0)
                    .map_err(|e| Error::unavailable(e, "try fewer threads"))?;
                if b.spread > measure::SPREAD_WARNING {
                    warnings.push(format!("{} {} ×{t}: spread {:.1} %", b.level, b.kernel, 100.0 * b.spread));
                }
                bw_out.push(b);
                bar.inc(1);
            }
        }
    }
    remeasure_disordered(&mut bw_out, &plan, variant, budget, s0, &mut notes);
    let sweep = if opts.sweep {
        let t = opts.threads.first().copied().unwrap_or(1);
        let k = roofline_kernels::stream::StreamKernel {
            op: roofline_kernels::stream::Op::Load,
            precision: roofline_kernels::Precision::F64,
        };
        bar.set_message("sweep");
        let mut sw =
            sweep::run(host, &k, variant, &sweep_sizes, t, Budget::quick(), s0, || bar.inc(1)).map_err(|e| Error::unavailable(e, ""))?;
        sw.factor = 1.25;
        Some(sw)
    } else {
        None
    };
    bar.finish_and_clear();
    Ok(Ceilings {
        schema: CEILINGS_SCHEMA.to_string(),
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        measured_at_unix: crate::util::unix_seconds(),
        quick: opts.quick,
        threads: opts.threads.iter().map(|t| *t as u32).collect(),
        machine: host.clone(),
        compute: compute_out,
        bandwidth: bw_out,
        sweep,
        energy: Vec::new(),
        notes,
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ceilings::ComputeCeiling;

    fn sample(host: &Host) -> Ceilings {
        let bw = |level: &str, kernel: &str, gbs: f64| BandwidthCeiling {
            level: level.into(),
            kernel: kernel.into(),
            isa: "avx2".into(),
            threads: 1,
            working_set_bytes: 1 << 14,
            working_set_per_thread_bytes: 1 << 14,
            gbs,
            bytes_convention: bandwidth::CORE.into(),
            gbs_write_allocate: gbs,
            gbs_best: gbs,
            spread: 0.01,
            samples: 5,
        };
        let cp = |isa: &str, mode: &str, gflops: f64| ComputeCeiling {
            precision: "double".into(),
            isa: isa.into(),
            fma: mode != "mul+add",
            mode: mode.into(),
            threads: 1,
            gflops,
            gflops_best: gflops,
            spread: 0.0,
            samples: 5,
            ghz: Some(3.0),
            flop_per_cycle: Some(gflops / 3.0),
            theoretical_gflops: None,
            percent_of_theoretical: None,
            cpu: None,
            set_aside: Vec::new(),
            unequal_threads: None,
        };
        Ceilings {
            schema: CEILINGS_SCHEMA.into(),
            tool_version: "test".into(),
            measured_at_unix: 1,
            quick: true,
            threads: vec![1],
            machine: host.clone(),
            compute: vec![cp("avx512", "fma", 40.0), cp("avx512", "mul+add", 20.0)],
            bandwidth: vec![
                bw("L1", "load", 150.0),
                bw("L1", "copy", 170.0),
                bw("DRAM", "triad", 20.0),
                bw("DRAM", "store_nt", 30.0),
            ],
            sweep: None,
            energy: Vec::new(),
            notes: vec![],
            warnings: vec![],
        }
    }

    /// Levels measured again: the kernels that set a level's roofs (highest core-side and
    /// highest traffic figure) are measured at the working set they had and keep the higher
    /// figure: one far under what any machine's L1 does is replaced, one far over it stays.
    /// The point's own kernel, drawn: a stream kernel new to the level is measured there and
    /// added; one the level has (`store`, its figure far under any L1's) keeps the higher
    /// figure; another kernel (`stencil2d`) is not measured. The level's other kernels, other
    /// levels and other thread counts are untouched; a note says which rose.
    #[test]
    fn levels_measured_again_keep_each_kernels_higher_figure() {
        let host = Host::detect();
        let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
        let (low, lower, high) = (1e-3 * (1.0 + rng.unit()), 1e-4, 1e9 * (1.0 + rng.unit()));
        let ws = 4096 * (2 + rng.below(4) as u64);
        let mut c = sample(&host);
        // L1 load sets the core-side roof (low, yet above copy's lower core figure); L1 copy
        // sets the traffic roof (its write-allocate figure far over anything).
        for b in &mut c.bandwidth {
            (b.gbs, b.gbs_write_allocate) = match b.kernel.as_str() {
                "load" => (low, low),
                "copy" => (lower, high),
                _ => (low, low),
            };
            b.working_set_bytes = ws;
            b.working_set_per_thread_bytes = ws;
        }
        let mut store = c.bandwidth[0].clone();
        (store.kernel, store.gbs, store.gbs_write_allocate) = ("store".into(), lower, lower);
        let mut two = c.bandwidth[0].clone();
        two.threads = 2;
        c.bandwidth.push(store);
        c.bandwidth.push(two);
        let before = c.bandwidth.clone();
        let kernel = ["dot", "store", "stencil2d"][rng.below(3)];
        let above = [PointAbove {
            level: "l1".into(),
            kernel: kernel.into(),
        }];
        let why = format!("{kernel}@16.0KiB above the roofs");
        remeasure_levels(&mut c, 1, &above, &why).unwrap();
        let load = &c.bandwidth[0];
        assert_eq!((load.level.as_str(), load.kernel.as_str(), load.threads), ("L1", "load", 1));
        assert!(load.gbs.is_finite() && load.gbs > low, "{load:?}");
        assert_eq!(load.working_set_per_thread_bytes, ws);
        // Copy: measured again, its figures far under its recorded traffic: all kept.
        assert_eq!(c.bandwidth[1], before[1]);
        let note = c.notes.last().unwrap();
        assert!(
            note.starts_with(&format!("×1: l1 measured again in the same run ({why})")),
            "{note}"
        );
        assert!(
            note.contains(&format!("L1 load {low:.1} → {:.1} GB/s", load.gbs)) && !note.contains("copy"),
            "{note}"
        );
        // DRAM (another level) and L1 at 2 threads stay; L1 store where it was not the point's.
        let store = c.bandwidth.iter().position(|b| b.kernel == "store").unwrap();
        for (i, b) in before.iter().enumerate().skip(2) {
            if !(i == store && kernel == "store") {
                assert_eq!(&c.bandwidth[i], b);
            }
        }
        match kernel {
            "dot" => {
                assert_eq!(c.bandwidth.len(), before.len() + 1);
                let dot = c.bandwidth.last().unwrap();
                assert_eq!((dot.level.as_str(), dot.kernel.as_str(), dot.threads), ("L1", "dot", 1));
                assert_eq!(dot.working_set_per_thread_bytes, ws);
                assert!(dot.gbs.is_finite() && dot.gbs > low && dot.traffic_gbs() == dot.gbs, "{dot:?}");
                assert!(note.contains(&format!("L1 dot {:.1} GB/s (new)", dot.gbs)), "{note}");
            }
            "store" => {
                assert_eq!(c.bandwidth.len(), before.len());
                let s = &c.bandwidth[store];
                assert!(s.gbs > lower && s.working_set_per_thread_bytes == ws, "{s:?}");
                assert!(note.contains(&format!("L1 store {lower:.1} → {:.1} GB/s", s.gbs)), "{note}");
            }
            _ => {
                assert_eq!(c.bandwidth.len(), before.len());
                let rose = note.split_once("higher figure: ").map(|x| x.1).unwrap_or_default();
                assert!(
                    rose.starts_with("L1 load") && !rose.contains("store") && !rose.contains("stencil"),
                    "{note}"
                );
            }
        }
    }

    /// Kernels new to their levels: a stream kernel the level lacks at that thread count;
    /// not one it has, not a kernel outside the stream set, not a level never measured, not
    /// another thread count's.
    #[test]
    fn kernels_new_to_levels_are_stream_kernels_a_measured_level_lacks() {
        let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
        let c = sample(&Host::detect());
        let at = |level: &str, kernel: &str| PointAbove {
            level: level.into(),
            kernel: kernel.into(),
        };
        let candidates = [
            (at("dram", "dot"), true),
            (at("l1", "daxpy"), true),
            (at("dram", "triad"), false),
            (at("l1", "load"), false),
            (at("dram", "stencil2d"), false),
            (at("l2", "dot"), false),
        ];
        for _ in 0..20 {
            let drawn: Vec<&(PointAbove, bool)> = candidates.iter().filter(|_| rng.below(2) == 1).collect();
            let above: Vec<PointAbove> = drawn.iter().map(|(a, _)| a.clone()).collect();
            let new: Vec<PointAbove> = drawn.iter().filter(|(_, n)| *n).map(|(a, _)| a.clone()).collect();
            assert_eq!(kernels_new_to_levels(&c, 1, &above), new);
            assert!(kernels_new_to_levels(&c, 2, &above).is_empty());
        }
    }

    /// A thread count measured again replaces that count's figures only: the other counts'
    /// stay as cached, and a note says when and why.
    #[test]
    fn remeasured_threads_replace_only_their_own_figures() {
        let host = Host::detect();
        let mut cached = sample(&host);
        let mut two = sample(&host);
        for c in &mut two.compute {
            c.threads = 2;
        }
        for b in &mut two.bandwidth {
            b.threads = 2;
        }
        cached.compute.extend(two.compute.clone());
        cached.bandwidth.extend(two.bandwidth.clone());
        cached.threads = vec![1, 2];
        let mut fresh = sample(&host);
        fresh.measured_at_unix = 1_800_000_000;
        for c in &mut fresh.compute {
            c.gflops *= 1.25;
        }
        for b in &mut fresh.bandwidth {
            b.gbs *= 1.5;
        }
        fresh.warnings = vec!["L1 load ×1: spread 6.0 %".into()];
        replace_threads(&mut cached, fresh, 1, "triad@dram above the roofs");
        let one: Vec<f64> = cached.bandwidth.iter().filter(|b| b.threads == 1).map(|b| b.gbs).collect();
        assert_eq!(one, vec![225.0, 255.0, 30.0, 45.0]);
        let fma1: Vec<f64> = cached.compute.iter().filter(|c| c.threads == 1).map(|c| c.gflops).collect();
        assert_eq!(fma1, vec![50.0, 25.0]);
        assert_eq!(
            cached.bandwidth.iter().filter(|b| b.threads == 2).cloned().collect::<Vec<_>>(),
            two.bandwidth
        );
        assert_eq!(cached.compute.iter().filter(|c| c.threads == 2).count(), 2);
        assert!(
            cached.notes.contains(&"×1: L1 load ×1: spread 6.0 %".to_string()),
            "{:?}",
            cached.notes
        );
        assert!(
            cached
                .notes
                .iter()
                .any(|n| n == "×1: re-measured at 1800000000 (Unix time): triad@dram above the roofs"),
            "{:?}",
            cached.notes
        );
        assert_eq!(cached.threads, vec![1, 2]);
    }

    fn opts(quick: bool, threads: Vec<usize>) -> Options {
        Options {
            quick,
            threads,
            sweep: false,
            progress: false,
        }
    }

    /// The Emerald Rapids guest: L3 measured at 150 MiB (half of CPUID's 300 MiB)
    /// read 20.0 GB/s against DRAM's 21.9. Random ordered roofs pass; any one level pushed to
    /// or below its outer neighbour is named, and only it.
    #[test]
    fn an_l3_roof_below_dram_is_named() {
        let h = Host::detect();
        let mut c = sample(&h);
        let template = c.bandwidth[0].clone();
        let bw = |level: &str, gbs: f64| BandwidthCeiling {
            level: level.into(),
            kernel: "daxpy".into(),
            working_set_per_thread_bytes: 150 << 20,
            gbs,
            gbs_write_allocate: gbs,
            gbs_best: gbs,
            ..template.clone()
        };
        c.bandwidth = vec![bw("L1", 300.0), bw("L2", 130.0), bw("L3", 20.0), bw("DRAM", 21.9)];
        let d = c.disorder();
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].starts_with("L3 roof 20.0 GB/s is not 10 % above DRAM's 21.9 GB/s") && d[0].contains("150.0 MiB"),
            "{d:?}"
        );
        // The same guest's quick ceilings (2026-11-28): L3's roof 23.4 (daxpy) just above
        // DRAM's 23.0, but load, copy, triad and store all slower at 150 MiB than at 1.2 GiB.
        let kernel = |level: &str, kernel: &str, gbs: f64| BandwidthCeiling {
            kernel: kernel.into(),
            ..bw(level, gbs)
        };
        c.bandwidth = vec![kernel("L2", "load", 146.9), kernel("L2", "daxpy", 121.3)];
        for (k, l3, dram) in [
            ("load", 13.4, 16.6),
            ("copy", 11.7, 13.3),
            ("triad", 12.7, 14.0),
            ("daxpy", 23.4, 23.0),
            ("store", 7.7, 8.2),
        ] {
            c.bandwidth.push(kernel("L3", k, l3));
            c.bandwidth.push(kernel("DRAM", k, dram));
        }
        c.bandwidth.push(kernel("DRAM", "store_nt", 21.7));
        let d = c.disorder();
        assert_eq!(d.len(), 1, "{d:?}");
        assert!(
            d[0].starts_with("L3 roof 23.4 GB/s is not 10 % above DRAM's 23.0") && d[0].contains("5 of 5 kernels"),
            "{d:?}"
        );
        // Its second run: L3 0.99–1.16× DRAM kernel by kernel (load 14.6 vs 14.4): 3 of 5 not
        // 10 % faster.
        c.bandwidth.retain(|b| b.level == "L2");
        for (k, l3, dram) in [
            ("load", 14.6, 14.4),
            ("copy", 11.3, 11.4),
            ("triad", 12.6, 12.3),
            ("daxpy", 21.5, 18.8),
            ("store", 8.7, 7.5),
        ] {
            c.bandwidth.push(kernel("L3", k, l3));
            c.bandwidth.push(kernel("DRAM", k, dram));
        }
        let d = c.disorder();
        assert!(d.len() == 1 && d[0].contains("3 of 5 kernels"), "{d:?}");
        let mut rng = roofline_kernels::stream::SplitMix(seed());
        for _ in 0..200 {
            // Ordered: each level 1.11× to 3× the next.
            let dram = 5.0 + 50.0 * rng.next_f64().abs();
            let l3 = dram * (1.11 + 1.9 * rng.next_f64().abs());
            let l2 = l3 * (1.11 + 1.9 * rng.next_f64().abs());
            let l1 = l2 * (1.11 + 1.9 * rng.next_f64().abs());
            let mut v = [l1, l2, l3, dram];
            c.bandwidth = ["L1", "L2", "L3", "DRAM"].iter().zip(v).map(|(l, g)| bw(l, g)).collect();
            assert!(c.disorder().is_empty(), "{v:?}: {:?}", c.disorder());
            let k = (rng.next_f64().abs() * 3.0) as usize % 3;
            // Pushed to at most 1.1× its outer neighbour (slower ones included).
            v[k] = v[k + 1] * (0.5 + 0.6 * rng.next_f64().abs());
            c.bandwidth = ["L1", "L2", "L3", "DRAM"].iter().zip(v).map(|(l, g)| bw(l, g)).collect();
            let d = c.disorder();
            assert!(
                !d.is_empty() && d.iter().all(|m| m.starts_with(&format!("L{} roof", k + 1))),
                "{k} {v:?}: {d:?}"
            );
        }
    }

    #[test]
    fn json_round_trip_and_schema_check() {
        let h = Host::detect();
        let c = sample(&h);
        let back = Ceilings::from_json(&c.to_json(), "x").unwrap();
        assert_eq!(back, c);
        let wrong = c.to_json().replace("roofline.ceilings/1", "roofline.ceilings/2");
        assert!(Ceilings::from_json(&wrong, "x").is_err());
        assert!(Ceilings::from_json("{", "x").is_err());
    }

    #[test]
    fn roofs_take_the_best_kernel_per_level_and_skip_nt() {
        let r = sample(&Host::detect()).roofs(1);
        assert_eq!(r.bandwidth_gbs.get("l1"), Some(&170.0));
        assert_eq!(r.bandwidth_gbs.get("dram"), Some(&20.0));
        assert_eq!(r.compute_gflops.get("double.avx512.fma"), Some(&40.0));
        assert_eq!(r.compute_gflops.get("double.avx512.mul_add"), Some(&20.0));
    }

    #[test]
    fn cache_is_used_only_for_this_machine_and_what_it_covers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("ceilings.json");
        let h = Host::detect();
        assert_eq!(read_cache(&p, &h, &opts(true, vec![1])).0, CacheState::Missing);
        std::fs::write(&p, "{ not json").unwrap();
        assert!(matches!(read_cache(&p, &h, &opts(true, vec![1])).0, CacheState::Corrupt(_)));
        std::fs::write(&p, include_str!("../../tests/fixtures/reports/ceilings.json")).unwrap();
        assert_eq!(
            read_cache(&p, &h, &opts(true, vec![1])).0,
            CacheState::Corrupt("no machine summary".into())
        );
        let c = sample(&h);
        std::fs::write(&p, c.to_json()).unwrap();
        assert_eq!(read_cache(&p, &h, &opts(true, vec![1])).0, CacheState::Usable);
        // A quick cache does not answer a full request, nor other thread counts.
        assert_eq!(read_cache(&p, &h, &opts(false, vec![1])).0, CacheState::Insufficient);
        assert_eq!(read_cache(&p, &h, &opts(true, vec![1, 2])).0, CacheState::Insufficient);
        // Another machine's cache (or one whose machine summary was edited) is refused.
        let mut other = c.clone();
        other.machine.brand = "Some Other CPU".into();
        std::fs::write(&p, other.to_json()).unwrap();
        assert!(matches!(
            read_cache(&p, &h, &opts(true, vec![1])).0,
            CacheState::OtherMachine { .. }
        ));
        let mut other = c.clone();
        other.machine.fingerprint = "0123456789abcdef".into();
        std::fs::write(&p, other.to_json()).unwrap();
        assert!(matches!(
            read_cache(&p, &h, &opts(true, vec![1])).0,
            CacheState::OtherMachine { .. }
        ));
    }

    #[test]
    fn cache_path_follows_xdg() {
        // Only checks the shape: the environment is shared by the test threads.
        if let Some(p) = cache_path() {
            assert!(p.ends_with("roofline/ceilings.json"));
        }
    }
}
