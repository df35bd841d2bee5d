//! Building the machine model: the static part (CPUID, topology, caches, platform, nominal
//! clock) from any `CpuidSource`, and the measured part (clocks, FP throughput, thread
//! scaling) on the live machine.

use std::collections::BTreeMap;
use std::path::Path;

use super::clock::{self, Kernel};
use super::cpuid::{CpuidFacts, CpuidSource, LiveCpuid};
use super::dump::CpuidDump;
use super::identify::{PLATFORM_OVERRIDE, flag_conflict, identify, platform_override_key};
pub use super::identify::{set_platform, this_platform};
use super::topology::{self, CpuidTopology, OsTopology};
use super::{ByIsa, Frequency, IdentifiedBy, MACHINE_SCHEMA, MachineModel, Pipes, Platform, ThreadScaling, peaks};
use crate::error::{Error, Result};

/// Timed runs per figure; the fastest counts (short runs, many tries: robust on a shared host).
pub const REPS: u32 = 7;

/// What `detect` should do.
#[derive(Debug, Clone, Default)]
pub struct DetectOptions {
    /// `--platform NAME|FILE`: skip identification.
    pub platform: Option<String>,
    /// `--frequency GHZ`: the clock the peaks use (measurements are still reported).
    pub frequency_ghz: Option<f64>,
    /// Seconds per timed run (default 2 ms; every figure is the best of [`REPS`] runs, so that a
    /// run the scheduler interrupted does not count).
    pub run_secs: Option<f64>,
    /// Show a progress bar on stderr while measuring (hidden when stderr is not a terminal).
    pub progress: bool,
}

/// `--frequency` must be in (0, 10] GHz.
pub fn check_frequency(f: Option<f64>) -> Result<()> {
    match f {
        Some(g) if !(g.is_finite() && g > 0.0 && g <= 10.0) => Err(Error::input(
            format!("--frequency {g}: not a clock in (0, 10] GHz"),
            "give GHz, e.g. --frequency 2.6",
        )),
        _ => Ok(()),
    }
}

/// The full model of this machine, clocks measured (about a second).
pub fn detect(opts: &DetectOptions) -> Result<MachineModel> {
    check_frequency(opts.frequency_ghz)?;
    let mut m = detect_static(opts)?;
    measure(&mut m, opts);
    Ok(m)
}

/// The model without any clock measurement (milliseconds): peaks use `--frequency` or the
/// nominal clock.
pub fn detect_static(opts: &DetectOptions) -> Result<MachineModel> {
    check_frequency(opts.frequency_ghz)?;
    let mut os = OsTopology::from_sysfs(Path::new("/sys/devices/system/cpu")).unwrap_or_else(topology::fallback_topology);
    let facts = CpuidFacts::read(&LiveCpuid);
    if facts.has("hybrid") && os.cpus.iter().all(|c| c.core_type.is_none()) {
        // No cpu_core/cpu_atom PMUs in sysfs: ask each CPU (leaf 0x1A) on a pinned thread.
        let cpus: Vec<usize> = os.cpus.iter().map(|c| c.cpu as usize).collect();
        let types = clock::on_cpus(&cpus, || (LiveCpuid.cpuid(0x1A, 0)[0] >> 24) as u8);
        for (c, t) in os.cpus.iter_mut().zip(types) {
            c.core_type = (t != 0).then_some(t);
        }
    }
    let mut m = build(&LiveCpuid, &os, opts)?;
    if m.frequency_ghz.nominal.is_none() {
        if let Some(mhz) = cpuinfo_mhz() {
            m.frequency_ghz.nominal = Some(mhz / 1000.0);
            m.frequency_ghz.nominal_source = Some("/proc/cpuinfo".into());
        } else if let Some(ghz) = tsc_ghz() {
            m.frequency_ghz.nominal = Some(ghz);
            m.frequency_ghz.nominal_source = Some("tsc calibration".into());
        }
    }
    set_peaks(&mut m);
    Ok(m)
}

/// The static model of a recorded CPU (its first logical CPU's CPUID; topology from the dump).
pub fn from_dump(d: &CpuidDump, opts: &DetectOptions) -> Result<MachineModel> {
    check_frequency(opts.frequency_ghz)?;
    let first = d
        .cpus
        .first()
        .ok_or_else(|| Error::input("empty CPUID dump", "pass a dump with at least one CPU"))?;
    let os = OsTopology::from_dump(d);
    let mut m = build(first, &os, opts)?;
    set_peaks(&mut m);
    Ok(m)
}

fn build(src: &dyn CpuidSource, os: &OsTopology, opts: &DetectOptions) -> Result<MachineModel> {
    let facts = CpuidFacts::read(src);
    let counts = topology::counts(os, &CpuidTopology::read(src));
    let caches = topology::caches(src, os);
    let mut warnings = Vec::new();
    let spec = opts.platform.clone().or_else(platform_override_key);
    let (platform, identified_by, candidates) = match &spec {
        Some(spec) => {
            let p = match PLATFORM_OVERRIDE.get().filter(|p| opts.platform.is_none() && &p.key == spec) {
                Some(p) => p.clone(),
                None => Platform::load(spec)?,
            };
            if let Some(why) = flag_conflict(&p, &facts) {
                warnings.push(format!("--platform {}: this CPU {why}", p.key));
            }
            (Some(p), IdentifiedBy::PlatformOption, Vec::new())
        }
        None => {
            let id = identify(&facts, &caches, &Platform::embedded());
            warnings.extend(id.warnings);
            (id.platform, id.identified_by, id.candidates)
        }
    };
    warnings.extend(counts.warnings.iter().cloned());
    if caches.is_empty() {
        warnings.push("CPUID describes no caches (leaf 4 / 0x8000_001D absent)".into());
    }
    let (fp_pipes, fp_pipes_source) = match &platform {
        Some(p) => (pipes_for(&p.fp_pipes, &facts), "platform table".to_string()),
        None => (generic_pipes(&facts), "generic guess".to_string()),
    };
    let core_types = topology::core_types(os);
    let fp_pipes_e_core = match &platform {
        Some(p) if !core_types.is_empty() => pipes_for(&p.fp_pipes_e, &facts),
        _ => BTreeMap::new(),
    };
    if !core_types.is_empty() {
        warnings.push(if fp_pipes_e_core.is_empty() {
            "hybrid CPU: FP pipes and peaks are those of the P-cores; the platform table has no E-core pipes, so all-core peaks overstate the E-cores".into()
        } else {
            "hybrid CPU: per-core peaks are a P-core's; all-core peaks add each E-core at its own pipes (at the P-cores' clock: an upper bound)".into()
        });
    }
    let (nominal, nominal_source) = match (facts.base_mhz, brand_ghz(&facts.brand)) {
        (Some(mhz), _) => (Some(mhz as f64 / 1000.0), Some("cpuid 0x16".to_string())),
        (None, Some(g)) => (Some(g), Some("brand string".to_string())),
        _ => (None, None),
    };
    Ok(MachineModel {
        schema: MACHINE_SCHEMA.into(),
        vendor: facts.vendor.clone(),
        family: facts.family,
        model: facts.model,
        stepping: facts.stepping,
        brand: facts.brand.clone(),
        microarchitecture: platform.as_ref().map(|p| p.key.clone()).unwrap_or_else(|| "generic".into()),
        microarchitecture_name: platform
            .as_ref()
            .map(|p| p.name.clone())
            .unwrap_or_else(|| "generic (CPUID only)".into()),
        identified_by,
        candidates,
        warnings,
        hypervisor: facts.hypervisor.clone(),
        sockets: counts.sockets,
        cores: counts.cores,
        threads: counts.threads,
        smt: counts.smt,
        core_types,
        fp_pipes_e_core,
        caches,
        isa: facts.isa(),
        fp_pipes,
        fp_pipes_source,
        frequency_ghz: Frequency {
            nominal,
            nominal_source,
            override_ghz: opts.frequency_ghz,
            ..Default::default()
        },
        peak_gflops: Default::default(),
        peak_gflops_per_core: Default::default(),
        thread_scaling: Vec::new(),
        bytes_per_cycle: platform.as_ref().map(|p| p.bytes_per_cycle.clone()).unwrap_or_default(),
        mixed_ops_per_cycle: platform
            .as_ref()
            .map(|p| peaks::mixed_units(&p.mixed_ops_per_cycle, |flag| facts.has(flag)))
            .unwrap_or_default(),
        mixed_unrated: platform
            .as_ref()
            .map(|p| peaks::mixed_unrated(&p.mixed_unrated, |flag| facts.has(flag)))
            .unwrap_or_default(),
        peak_mixed_per_core: BTreeMap::new(),
        peak_mixed: BTreeMap::new(),
        fp_ops_per_cycle_measured: BTreeMap::new(),
        measured: false,
    })
}

/// The platform's pipes, without widths this CPU cannot use (no 512 without AVX-512F).
fn pipes_for(table: &BTreeMap<String, Pipes>, f: &CpuidFacts) -> BTreeMap<String, Pipes> {
    table
        .iter()
        .filter(|(w, _)| match w.as_str() {
            "256" => f.has("avx"),
            "512" => f.has("avx512f"),
            _ => true,
        })
        .map(|(w, p)| (w.clone(), *p))
        .collect()
}

/// Unknown CPU: two FMA pipes per width present, or one add and one mul without FMA.
fn generic_pipes(f: &CpuidFacts) -> BTreeMap<String, Pipes> {
    let p = if f.has("fma") {
        Pipes { fma: 2, add: 0, mul: 0 }
    } else {
        Pipes { fma: 0, add: 1, mul: 1 }
    };
    let mut m = BTreeMap::new();
    m.insert("128".to_string(), p);
    if f.has("avx") {
        m.insert("256".to_string(), p);
    }
    if f.has("avx512f") {
        m.insert("512".to_string(), p);
    }
    m
}

/// `... @ 3.20GHz` in the brand string.
pub fn brand_ghz(brand: &str) -> Option<f64> {
    let lower = brand.to_ascii_lowercase();
    let at = lower.rfind("ghz")?;
    let num: String = lower[..at]
        .trim_end()
        .chars()
        .rev()
        .take_while(|c| c.is_ascii_digit() || *c == '.')
        .collect();
    let num: String = num.chars().rev().collect();
    num.parse::<f64>().ok().filter(|g| *g > 0.0 && *g <= 10.0)
}

fn cpuinfo_mhz() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    text.lines()
        .find(|l| l.starts_with("cpu MHz"))
        .and_then(|l| l.split(':').nth(1))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|m| *m > 0.0)
}

/// TSC ticks per nanosecond over 20 ms.
fn tsc_ghz() -> Option<f64> {
    // SAFETY: rdtsc has no preconditions on x86-64.
    let t0 = unsafe { std::arch::x86_64::_rdtsc() };
    let w0 = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(20));
    // SAFETY: as above.
    let t1 = unsafe { std::arch::x86_64::_rdtsc() };
    let ns = w0.elapsed().as_nanos() as f64;
    (t1 > t0 && ns > 0.0).then(|| (t1 - t0) as f64 / ns)
}

/// Clock for peaks: the override, else the measured clock of that ISA (all threads for the
/// all-cores figure), else the measured scalar clock, else nominal.
fn set_peaks(m: &mut MachineModel) {
    let f = &m.frequency_ghz;
    let has = |isa: &str| has_isa(&m.isa, isa);
    let has_fma = m.isa.iter().any(|i| i == "fma");
    let per_core_clock = |isa: &str| f.override_ghz.or(f.by_isa.get(isa)).or(f.measured).or(f.nominal);
    // All cores never run faster than one: a higher all-threads reading is noise, and the
    // all-core peak must not exceed cores × the per-core peak.
    let all_clock = |isa: &str| {
        let one = per_core_clock(isa);
        match (f.override_ghz, f.by_isa_all_threads.get(isa), one) {
            (Some(g), _, _) => Some(g),
            (None, Some(all), Some(one)) => Some(all.min(one)),
            (None, all, one) => all.or(one),
        }
    };
    m.peak_gflops_per_core = peaks::peaks(has, has_fma, &m.fp_pipes, per_core_clock, 1);
    let e_cores = m
        .core_types
        .iter()
        .filter(|t| t.kind == "E")
        .map(|t| t.cpus.len() as u32)
        .sum::<u32>()
        .min(m.cores);
    m.peak_mixed_per_core = peaks::mixed_peaks(&m.mixed_ops_per_cycle, per_core_clock, 1);
    m.peak_mixed = peaks::mixed_peaks(&m.mixed_ops_per_cycle, all_clock, m.cores);
    m.peak_gflops = if e_cores > 0 && !m.fp_pipes_e_core.is_empty() {
        let p = peaks::peaks(has, has_fma, &m.fp_pipes, all_clock, m.cores - e_cores);
        let e = peaks::peaks(has, has_fma, &m.fp_pipes_e_core, all_clock, e_cores);
        peaks::sum(&p, &e)
    } else {
        peaks::peaks(has, has_fma, &m.fp_pipes, all_clock, m.cores)
    };
}

fn has_isa(isa: &[String], name: &str) -> bool {
    let h = |s: &str| isa.iter().any(|i| i == s);
    match name {
        "scalar" | "sse" => h("sse2"),
        "avx" => h("avx"),
        "avx2" => h("avx2") && h("fma"),
        "avx512" => h("avx512f"),
        _ => false,
    }
}

/// Chain width (bits) measured for each ISA.
fn chain_width(isa: &str) -> u32 {
    peaks::isa_width(isa)
}

/// The measured part: clocks, FP throughput, thread scaling. Mutates `m` and recomputes peaks.
fn measure(m: &mut MachineModel, opts: &DetectOptions) {
    let secs = opts.run_secs.unwrap_or(0.002).clamp(0.001, 1.0);
    let platform = measurement_platform(m, opts);
    let has_fma = m.isa.iter().any(|i| i == "fma");
    let fp_lat = fp_chain_latency(m, platform.as_ref(), has_fma);
    let cpus = clock::allowed_cpus();
    let first = [cpus.first().copied().unwrap_or(0)];
    let bar = crate::util::Progress::new(opts.progress, 4, "{spinner} {msg} [{bar:20}] {pos}/{len}");
    bar.set_message("measuring clocks");
    let imul = measure_integer_clock(m, &first, secs);
    bar.inc(1);
    let chains = FpChains { secs, has_fma, fp_lat };
    let by_width_one = measure_fp_clocks(m, &first, &cpus, chains, imul);
    bar.inc(1);
    let stream_widths = measure_fp_throughput(m, platform.as_ref(), &first, chains, &by_width_one, imul);
    bar.inc(1);
    // 1 → N thread scaling of the widest stream kernel.
    if let Some(&w) = stream_widths.last() {
        measure_thread_scaling(m, &cpus, w, secs, has_fma);
    }
    bar.finish_and_clear();
    m.measured = true;
    set_peaks(m);
}

/// The platform table the measurements read latencies and unit counts from: `--platform`,
/// else the override, else the identified microarchitecture's.
fn measurement_platform(m: &MachineModel, opts: &DetectOptions) -> Option<Platform> {
    let platform = match m.identified_by {
        IdentifiedBy::Generic => None,
        _ => Platform::embedded().into_iter().find(|p| p.key == m.microarchitecture),
    };
    match (&opts.platform, platform) {
        (Some(spec), _) => Platform::load(spec).ok(),
        (None, p) => PLATFORM_OVERRIDE.get().cloned().or(p),
    }
}

/// The latency (cycles) of one link of the FP clock chains: the FMA's where the CPU has FMA,
/// else the FP add's, from the platform table (4 where it has none, with a warning).
fn fp_chain_latency(m: &mut MachineModel, platform: Option<&Platform>, has_fma: bool) -> u32 {
    let lat = platform.map(|p| p.latency).unwrap_or_default();
    let fp_lat = if has_fma { lat.fma } else { lat.fadd };
    fp_lat.unwrap_or_else(|| {
        m.warnings.push(format!(
            "no {} latency in the platform table: assuming 4 cycles for the FP clock chains",
            if has_fma { "FMA" } else { "FP add" }
        ));
        4
    })
}

/// The clock (GHz) a dependency chain of `k`, each link `lat` cycles, runs at, calibrated to
/// run about `secs`.
fn chain_clock(k: Kernel, lat: u32, secs: f64) -> Option<f64> {
    let iters = k.calibrate(secs)?;
    clock::chain_ghz(k, lat, iters, REPS)
}

/// The integer clock chains (imul, xor), interleaved, best of two, on the first allowed CPU:
/// the measured clock, with a warning where they disagree. Returns imul's (0: not measured).
fn measure_integer_clock(m: &mut MachineModel, first: &[usize], secs: f64) -> f64 {
    let results = clock::on_cpus(first, || {
        let mut best = [0.0f64; 2];
        for _ in 0..2 {
            for (i, (k, l)) in [(Kernel::Imul, 3), (Kernel::Xor, 1)].into_iter().enumerate() {
                best[i] = best[i].max(chain_clock(k, l, secs).unwrap_or(0.0));
            }
        }
        best
    });
    let [imul, xor] = results[0];
    let f = &mut m.frequency_ghz;
    if imul > 0.0 {
        f.measured = Some(imul);
        f.chains.insert("imul r64 (3 cycles)".into(), imul);
    }
    if xor > 0.0 {
        f.chains.insert("xor r64 (1 cycle)".into(), xor);
    }
    if imul > 0.0 && xor > 0.0 && (imul - xor).abs() / imul.max(xor) > 0.05 {
        m.warnings.push(format!(
            "the clock chains disagree: imul says {imul:.3} GHz, xor {xor:.3} GHz (a busy or oversubscribed machine; rerun)"
        ));
    }
    imul
}

/// How the FP chain and stream kernels run: calibrated to about `secs`, FMA or add, and the
/// chains' link latency.
#[derive(Clone, Copy)]
struct FpChains {
    secs: f64,
    has_fma: bool,
    fp_lat: u32,
}

/// The clocks per ISA, one thread then all threads (the median thread), into
/// `m.frequency_ghz`: the `imul` chain with FP instructions of each width beside it
/// ([`Kernel::ImulBeside`]), so the clock does not rest on an assumed FP latency, and a
/// frequency licence of the width still lowers it. The FP chain alone, timed against that
/// clock, gives the FP latency; a warning where it is not the platform table's. Returns the
/// one-thread clock per chain width.
fn measure_fp_clocks(m: &mut MachineModel, first: &[usize], cpus: &[usize], chains: FpChains, imul: f64) -> BTreeMap<u32, f64> {
    let FpChains { secs, has_fma, fp_lat } = chains;
    let isas: Vec<&str> = ByIsa::ISAS.iter().copied().filter(|i| has_isa(&m.isa, i)).collect();
    let widths: Vec<u32> = {
        let mut w: Vec<u32> = isas.iter().map(|i| chain_width(i)).collect();
        w.dedup();
        w
    };
    let clocks = || -> BTreeMap<u32, f64> {
        widths
            .iter()
            .filter_map(|&w| chain_clock(Kernel::ImulBeside { width: w, fma: has_fma }, 3, secs).map(|g| (w, g)))
            .collect()
    };
    // One thread: each width's clock, then its FP chain at the table's latency right after.
    let (by_width_one, fp_chain_one) = clock::on_cpus(first, || {
        let by_width = clocks();
        let chain: BTreeMap<u32, f64> = widths
            .iter()
            .filter_map(|&w| chain_clock(Kernel::FpChain { width: w, fma: has_fma }, fp_lat, secs).map(|g| (w, g)))
            .collect();
        (by_width, chain)
    })
    .remove(0);
    let by_width_all: BTreeMap<u32, f64> = {
        let per_thread = clock::on_cpus(cpus, clocks);
        widths
            .iter()
            .filter_map(|w| {
                let mut v: Vec<f64> = per_thread.iter().filter_map(|t| t.get(w).copied()).collect();
                v.sort_by(f64::total_cmp);
                (!v.is_empty()).then(|| (*w, v[v.len() / 2]))
            })
            .collect()
    };
    for isa in &isas {
        let w = chain_width(isa);
        m.frequency_ghz.by_isa.set(isa, by_width_one.get(&w).copied());
        m.frequency_ghz.by_isa_all_threads.set(isa, by_width_all.get(&w).copied());
    }
    if imul > 0.0 {
        m.warnings.extend(fp_latency_disagreement(&by_width_one, &fp_chain_one, fp_lat));
    }
    by_width_one
}

/// Throughput: instructions per cycle per width on one core (12 independent streams), at
/// each width's own clock (else the integer clock), checked against the platform table's
/// pipes; where the table says the 512-bit units vary, their count is taken from the
/// measurement. Returns the widths measured.
fn measure_fp_throughput(
    m: &mut MachineModel,
    platform: Option<&Platform>,
    first: &[usize],
    chains: FpChains,
    by_width_one: &BTreeMap<u32, f64>,
    imul: f64,
) -> Vec<u32> {
    let FpChains { secs, has_fma, .. } = chains;
    let stream_widths: Vec<u32> = [128u32, 256, 512]
        .into_iter()
        .filter(|w| m.fp_pipes.contains_key(&w.to_string()))
        .collect();
    let ops: BTreeMap<u32, f64> = clock::on_cpus(first, || {
        stream_widths
            .iter()
            .filter_map(|&w| {
                let k = Kernel::FpStreams { width: w, fma: has_fma };
                let iters = k.calibrate(secs)?;
                let ghz = by_width_one.get(&w).copied().or(if imul > 0.0 { Some(imul) } else { None })?;
                clock::streams_ops_per_sec(k, iters, REPS).map(|r| (w, r / (ghz * 1e9)))
            })
            .collect::<BTreeMap<u32, f64>>()
    })
    .remove(0);
    m.fp_ops_per_cycle_measured = ops.iter().map(|(w, v)| (w.to_string(), (v * 100.0).round() / 100.0)).collect();
    if has_fma && !platform.is_some_and(|p| p.fp512_units_vary) {
        m.warnings.extend(pipe_mismatches(&m.fp_pipes, &m.fp_ops_per_cycle_measured));
    }
    if platform.is_some_and(|p| p.fp512_units_vary)
        && let (Some(v), Some(p)) = (ops.get(&512), m.fp_pipes.get_mut("512"))
    {
        let units = v.round().clamp(1.0, 2.0) as u32;
        if has_fma {
            p.fma = units;
        }
        m.fp_pipes_source = format!("platform table; 512-bit FMA units measured ({v:.2} per cycle → {units})");
    }
    stream_widths
}

/// GFLOP/s of the `width`-bit stream kernel on 1, 2, 4, … and all allowed CPUs, each against
/// the one-thread rate, into `m.thread_scaling`.
fn measure_thread_scaling(m: &mut MachineModel, cpus: &[usize], width: u32, secs: f64, has_fma: bool) {
    let k = Kernel::FpStreams { width, fma: has_fma };
    let Some(iters) = k.calibrate(secs) else {
        return;
    };
    let mut counts: Vec<usize> = Vec::new();
    let mut n = 1;
    while n < cpus.len() {
        counts.push(n);
        n *= 2;
    }
    counts.push(cpus.len().max(1));
    let mut base = None;
    for n in counts {
        let rates = clock::on_cpus(&cpus[..n.min(cpus.len()).max(1)], || {
            clock::streams_ops_per_sec(k, iters, REPS).unwrap_or(0.0)
        });
        let gflops = rates.iter().sum::<f64>() * k.flops_per_op() / 1e9;
        let b = *base.get_or_insert(gflops);
        m.thread_scaling.push(ThreadScaling {
            threads: n as u32,
            gflops,
            efficiency: if b > 0.0 { gflops / (b * n as f64) } else { 0.0 },
        });
    }
}

/// Where the measured FMA throughput (instructions per cycle at that width's own clock)
/// disagrees with the platform table's FMA pipes by more than [`PIPE_TOLERANCE`]: a table
/// that is wrong for this CPU, a hypervisor that hides a unit, or a machine too busy to
/// measure. Either way the theoretical peaks rest on the table, so the user must hear it.
pub fn pipe_mismatches(pipes: &BTreeMap<String, Pipes>, measured: &BTreeMap<String, f64>) -> Vec<String> {
    let mut out = Vec::new();
    for (width, p) in pipes {
        let Some(&got) = measured.get(width) else { continue };
        if p.fma == 0 || !got.is_finite() {
            continue;
        }
        let want = f64::from(p.fma);
        if (got - want).abs() / want > PIPE_TOLERANCE {
            out.push(format!(
                "{width}-bit FMA throughput measured {got:.2} per cycle, the platform table says {} FMA pipe(s): \
                 theoretical peaks follow the table (a busy host lowers the figure; rerun, or pass a corrected --platform file)",
                p.fma
            ));
        }
    }
    out
}

/// Where the FP chain of a width, timed at the platform table's latency, reads a clock other
/// than that width's own (`clock`: the imul chain beside the width's FP work) by more than
/// [`CLOCK_TOLERANCE`]: the FP latency here is not the table's. Before the clocks came from
/// the imul chain beside, they came from these FP chains, and such a latency moved every
/// per-ISA clock and theoretical peak with it. On 2026-11-26 a KVM guest reporting a Cascade
/// Lake ran its FMA chains at 4 or 5 cycles, varying from run to run, against 4 in the table:
/// scalar clock 2.46 GHz, integer 3.08. One line for all the widths that disagree.
pub fn fp_latency_disagreement(clock: &BTreeMap<u32, f64>, fp_chain: &BTreeMap<u32, f64>, table_latency: u32) -> Option<String> {
    let off: Vec<String> = fp_chain
        .iter()
        .filter_map(|(w, &fp)| {
            let ratio = fp / clock.get(w)?;
            (ratio.is_finite() && ratio > 0.0 && (ratio - 1.0).abs() > CLOCK_TOLERANCE).then(|| {
                let what = if *w == 64 { "scalar".to_string() } else { format!("{w}-bit") };
                format!("{what} {:.1}", f64::from(table_latency) / ratio)
            })
        })
        .collect();
    (!off.is_empty()).then(|| {
        format!(
            "the FP chains take more or fewer cycles here than the platform table's {table_latency}: {} cycles \
             (timed against each width's clock); the clocks per ISA come from an integer chain beside each width's FP work \
             and do not rest on this latency",
            off.join(", ")
        )
    })
}

/// Relative disagreement between an FP chain's clock at the table's latency and its width's clock that is reported.
pub const CLOCK_TOLERANCE: f64 = 0.07;

/// Relative disagreement between measured and tabled FMA pipes that is reported.
pub const PIPE_TOLERANCE: f64 = 0.15;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn measured_fma_throughput_is_checked_against_the_table() {
        let pipes: BTreeMap<String, Pipes> = [
            ("128".to_string(), Pipes { fma: 2, add: 2, mul: 0 }),
            ("256".to_string(), Pipes { fma: 2, add: 2, mul: 0 }),
            ("512".to_string(), Pipes { fma: 1, add: 1, mul: 0 }),
        ]
        .into();
        let m = |v: [f64; 3]| -> BTreeMap<String, f64> { ["128", "256", "512"].iter().map(|w| w.to_string()).zip(v).collect() };
        assert!(pipe_mismatches(&pipes, &m([1.98, 2.02, 0.99])).is_empty());
        let w = pipe_mismatches(&pipes, &m([1.35, 2.0, 1.0]));
        assert_eq!(w.len(), 1, "{w:?}");
        assert!(
            w[0].starts_with("128-bit") && w[0].contains("1.35") && w[0].contains("2 FMA"),
            "{w:?}"
        );
        // A second 512-bit unit that the table lacks is reported too.
        assert_eq!(pipe_mismatches(&pipes, &m([2.0, 2.0, 1.9])).len(), 1);
        // Widths not measured are not judged.
        assert!(pipe_mismatches(&pipes, &BTreeMap::new()).is_empty());
    }

    #[test]
    fn an_fp_chain_off_its_widths_clock_is_reported_with_its_latency() {
        let mut next = crate::util::xorshift(0xc10c);
        for _ in 0..200 {
            let ghz = 1.0 + (next() % 4000) as f64 * 1e-3;
            // A licence lowers the 512-bit clock by up to a third: the chain follows it.
            let zmm = ghz * (1.0 - (next() % 333) as f64 * 1e-3);
            let clock: BTreeMap<u32, f64> = [(64, ghz), (128, ghz), (256, ghz), (512, zmm)].into();
            let lat = 3 + (next() % 3) as u32;
            // Chains at the table's latency, within the tolerance: nothing to say.
            let jitter = |g: f64, n: u64| g * (1.0 + ((n % 121) as f64 - 60.0) * 1e-3);
            let agree: BTreeMap<u32, f64> = clock.iter().map(|(w, g)| (*w, jitter(*g, next()))).collect();
            assert_eq!(fp_latency_disagreement(&clock, &agree, lat), None, "{clock:?} {agree:?}");
            // The scalar and 128-bit FMAs a cycle slower than the table says: both named with
            // their latency; the wide ones (at their own, licensed, clock) not.
            let slow = |g: f64| g * f64::from(lat) / f64::from(lat + 1);
            let chain: BTreeMap<u32, f64> = [(64, slow(ghz)), (128, slow(ghz)), (256, ghz), (512, zmm)].into();
            let w = fp_latency_disagreement(&clock, &chain, lat).unwrap();
            let want = format!("scalar {}.0, 128-bit {}.0 cycles", lat + 1, lat + 1);
            assert!(w.contains(&want) && !w.contains("512-bit") && !w.contains("256-bit"), "{w}");
        }
        // A width without a clock is not judged.
        let w = fp_latency_disagreement(&[(64, 3.0)].into(), &[(64, 3.0), (512, 1.0)].into(), 4);
        assert_eq!(w, None);
    }

    #[test]
    fn brand_string_clock() {
        assert_eq!(brand_ghz("Intel(R) Core(TM) i7-3930K CPU @ 3.20GHz"), Some(3.2));
        assert_eq!(brand_ghz("AMD EPYC 9124 16-Core Processor"), None);
        assert_eq!(brand_ghz("weird @ 99GHz"), None);
    }

    #[test]
    fn frequency_bounds() {
        assert!(check_frequency(Some(2.5)).is_ok());
        assert!(check_frequency(None).is_ok());
        for bad in [0.0, -1.0, 10.5, f64::NAN, f64::INFINITY] {
            assert_eq!(check_frequency(Some(bad)).unwrap_err().exit_code(), 2, "{bad}");
        }
    }
}
