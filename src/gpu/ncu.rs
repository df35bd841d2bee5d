//! Nsight Compute: run `ncu --csv` with an explicit metric list, parse its output (either the
//! default "details" page — one row per metric — or `--page raw` — one row per launch), and
//! turn each kernel's launches into one `roofline.report/1` point.
//!
//! W by precision follows ncu's own roofline: FP64 = dadd + dmul + 2·dfma, FP32 likewise,
//! FP16 = 2·hadd + 2·hmul + 4·hfma (ncu counts packed HFMA2 instructions; compilers also emit
//! HFMA2 with zero operands as register moves, which shows up as FP16 work in kernels that do
//! none), tensor work from `sm__ops_path_tensor_src_*` (exact ops; `512 × inst_executed_pipe_tensor`
//! is wrong on sm_90). Q: `dram` = DRAM bytes read + written, `l2` = `lts__t_bytes`, `l1` =
//! `l1tex__t_bytes` (requested bytes: writes that stay in L2 never reach DRAM).
//!
//! The SASS instruction counters come under two prefixes, `sm__sass_thread_inst_executed_op_*`
//! (our metric lists) and `smsp__sass_thread_inst_executed_op_*` (ncu's own roofline sections):
//! both are sums over the whole device, so either is read, `sm__` first.

use std::collections::BTreeMap;

use super::{csv, kernel_name};
use crate::error::{Error, Result};
use crate::schema::{Bytes, Flops, Point, Provenance, Source};

/// Metrics for the hierarchical roofline (W by precision, tensor ops, bytes per level, T).
pub const HIERARCHICAL_METRICS: &[&str] = &[
    "gpu__time_duration.sum",
    "sm__cycles_elapsed.avg.per_second",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_bytes.sum",
    "l1tex__t_bytes.sum",
    "sm__sass_thread_inst_executed_op_dadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_dfma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_fmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hadd_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hmul_pred_on.sum",
    "sm__sass_thread_inst_executed_op_hfma_pred_on.sum",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp16.sum",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum",
    "sm__ops_path_tensor_src_fp64.sum",
    "sm__ops_path_tensor_src_fp8.sum",
    "sm__ops_path_tensor_src_int8.sum",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
];

/// Metrics for the instruction roofline (Ding & Williams) and the coalescing diagnostics.
pub const INSTRUCTION_METRICS: &[&str] = &[
    "gpu__time_duration.sum",
    "smsp__inst_executed.sum",
    "smsp__thread_inst_executed.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "smsp__inst_executed_op_global_ld.sum",
    "smsp__inst_executed_op_global_st.sum",
    "smsp__inst_executed_op_shared_ld.sum",
    "smsp__inst_executed_op_shared_st.sum",
    "lts__t_sectors.sum",
    "dram__sectors_read.sum",
    "dram__sectors_write.sum",
    // Ceilings: peak warp instructions and transactions per cycle, each unit's clock.
    "sm__inst_executed.sum.peak_sustained",
    "sm__cycles_elapsed.avg.per_second",
    "l1tex__t_sectors.sum.peak_sustained",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.peak_sustained",
    "l1tex__cycles_elapsed.avg.per_second",
    "lts__t_sectors.sum.peak_sustained",
    "lts__cycles_elapsed.avg.per_second",
    "dram__sectors.sum.peak_sustained",
    "dram__cycles_elapsed.avg.per_second",
];

/// The GPU's roofs and identity, recorded by `gpu measure` so its report carries them: ncu's
/// per-cycle peaks (FP64/FP32 FMA, tensor by type — sparse rates for bf16/fp16/tf32/fp8 —,
/// DRAM/L2/L1 bytes), the DRAM clock, and the device attributes (name, SMs, clocks, bus).
pub const ROOF_METRICS: &[&str] = &[
    "sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained",
    "sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained",
    "sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained",
    "sm__ops_path_tensor_src_fp16.sum.peak_sustained",
    "sm__ops_path_tensor_src_tf32_dst_fp32.sum.peak_sustained",
    "sm__ops_path_tensor_src_fp64.sum.peak_sustained",
    "sm__ops_path_tensor_src_fp8.sum.peak_sustained",
    "dram__bytes.sum.peak_sustained",
    "lts__t_bytes.sum.peak_sustained",
    "l1tex__t_bytes.sum.peak_sustained",
    "dram__cycles_elapsed.avg.per_second",
    "sm__cycles_elapsed.avg.per_second",
    "device__attribute_display_name",
    "device__attribute_multiprocessor_count",
    "device__attribute_max_gpu_frequency_khz",
    "device__attribute_max_mem_frequency_khz",
    "device__attribute_global_memory_bus_width",
];

/// The instruction roofline's memory levels: (key, what counts as one transaction, the
/// `*.peak_sustained` metric of its ceiling, the unit's clock metric).
pub const INSTRUCTION_LEVELS: [(&str, &str, &str, &str); 4] = [
    (
        "global_l1",
        "global load/store sectors at L1",
        "l1tex__t_sectors.sum.peak_sustained",
        "l1tex__cycles_elapsed.avg.per_second",
    ),
    (
        "shared",
        "shared-memory wavefronts",
        "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum.peak_sustained",
        "l1tex__cycles_elapsed.avg.per_second",
    ),
    (
        "l2",
        "L2 sectors",
        "lts__t_sectors.sum.peak_sustained",
        "lts__cycles_elapsed.avg.per_second",
    ),
    (
        "dram",
        "DRAM sectors",
        "dram__sectors.sum.peak_sustained",
        "dram__cycles_elapsed.avg.per_second",
    ),
];

pub use crate::model::{GLOBAL_WALLS, SHARED_WALLS, wall_position};

/// The two prefixes ncu gives the SASS instruction counters (device-wide sums either way).
pub const SASS_PREFIXES: [&str; 2] = ["sm__sass", "smsp__sass"];

/// Below this share of a kernel's FP work, FP16 "work" beside FP32/FP64 work is flagged as
/// possibly the compiler's HFMA2 register moves (the `ffma_peak` capture: 1,000 HFMA2 per
/// thread beside 32,000 FFMA, 5.9 % of the flops). A genuine FP16 kernel (`hfma2_peak`:
/// FP16 ≈ 100 %) is not flagged.
pub const HFMA2_MOVE_MAX_SHARE: f64 = 0.10;

/// Whether a point's FP16 flops may be HFMA2 register moves rather than FP16 work: some FP16
/// beside FP32/FP64 work, and under [`HFMA2_MOVE_MAX_SHARE`] of the FP flops.
pub fn fp16_may_be_register_moves(by_class: &BTreeMap<String, f64>) -> bool {
    let get = |k: &str| by_class.get(k).copied().unwrap_or(0.0);
    let (half, other) = (get("half_any_width"), get("double_any_width") + get("single_any_width"));
    half > 0.0 && other > 0.0 && half / (half + other) < HFMA2_MOVE_MAX_SHARE
}

/// One kernel launch with its metrics in base units (bytes, seconds, hertz, counts, %).
#[derive(Debug, Clone, PartialEq)]
pub struct Launch {
    pub id: u64,
    pub process: String,
    /// The kernel name as ncu prints it: the kernel's identity (mangled with
    /// `--print-kernel-base mangled`, else the whole demangled signature).
    pub kernel: String,
    pub block: String,
    pub grid: String,
    pub device: String,
    pub cc: String,
    /// ncu's stream id (`Stream` column; empty where absent).
    pub stream: String,
    /// The NVTX push/pop ranges open on the launching thread (`ncu --nvtx`), outermost
    /// first: `range` for the default domain, `domain:range` for others ([`nvtx_stack`]).
    pub nvtx: Vec<String>,
    pub metrics: BTreeMap<String, f64>,
    /// Metrics whose value is text (`device__attribute_display_name`).
    pub text: BTreeMap<String, String>,
}

/// A parsed capture: every launch, the rule results of ncu's sections (when `--section` was
/// used), and the lines that were not CSV (program output, ncu).
#[derive(Debug, Clone, PartialEq)]
pub struct Capture {
    /// Every kernel launch, in capture order.
    pub launches: Vec<Launch>,
    /// The rule results of ncu's sections.
    pub rules: Vec<RuleResult>,
    /// Lines that were not CSV (the program's output, ncu's messages).
    pub other_lines: Vec<String>,
}

/// One rule result of an ncu section (`Rule Name`, `Rule Description` columns), e.g.
/// `SOLFPRoofline`: "… achieved 0% of this device's FP32 peak performance and 14% of its FP64
/// peak performance."
#[derive(Debug, Clone, PartialEq)]
pub struct RuleResult {
    pub launch_id: u64,
    pub kernel: String,
    pub section: String,
    pub name: String,
    pub description: String,
}

impl RuleResult {
    /// The "N% of … FPxx peak performance" figures of the description, by precision
    /// (`FP32`, `FP64`, …), in percent.
    pub fn peak_percentages(&self) -> BTreeMap<String, f64> {
        peak_percentages(&self.description)
    }
}

/// Parse "achieved 0% of this device's FP32 peak performance and 14% of its FP64 peak
/// performance" into {FP32: 0, FP64: 14}.
pub fn peak_percentages(text: &str) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let pieces: Vec<&str> = text.split("% of ").collect();
    for w in pieces.windows(2) {
        let Some(num) = w[0].rsplit(|c: char| c.is_whitespace()).next() else {
            continue;
        };
        let Ok(pct) = num.parse::<f64>() else { continue };
        let rest = w[1].trim_start_matches("this device's ").trim_start_matches("its ");
        let mut words = rest.split_whitespace();
        if let (Some(prec), Some("peak")) = (words.next(), words.next())
            && prec.starts_with("FP")
        {
            out.insert(prec.to_string(), pct);
        }
    }
    out
}

fn not_ncu(origin: &str, why: &str) -> Error {
    Error::input(
        format!("{origin}: not an ncu --csv capture ({why})"),
        "capture with `ncu --csv --metrics … CMD > file.csv`",
    )
}

/// Parse ncu's CSV output (details or raw page, any unit scaling).
pub fn parse(text: &str, origin: &str) -> Result<Capture> {
    let (records, other_lines) = csv::records(text);
    if other_lines.iter().any(|l| l.contains("ERR_NVGPUCTRPERM")) {
        return Err(Error::unavailable(
            format!("{origin}: ncu had no permission to read the GPU performance counters (ERR_NVGPUCTRPERM)"),
            "run as root, or load nvidia with NVreg_RestrictProfilingToAdminUsers=0",
        ));
    }
    let Some(hpos) = records.iter().position(|r| r.fields.iter().any(|f| f == "Kernel Name")) else {
        if other_lines.iter().any(|l| l.contains("No kernels were profiled")) {
            return Err(Error::input(
                format!("{origin}: ncu profiled no kernel (the kernel filter matched nothing)"),
                "check -k KERNEL_REGEX against the kernel names ncu lists",
            ));
        }
        return Err(not_ncu(origin, "no header row with \"Kernel Name\""));
    };
    let header = &records[hpos].fields;
    let col = |name: &str| header.iter().position(|h| h == name);
    let (Some(c_id), Some(c_kernel)) = (col("ID"), col("Kernel Name")) else {
        return Err(not_ncu(origin, "no ID / Kernel Name columns"));
    };
    let c_pid = col("Process ID");
    let c_block = col("Block Size");
    let c_grid = col("Grid Size");
    let c_dev = col("Device");
    let c_cc = col("CC");
    let c_stream = col("Stream");
    // `ncu --nvtx`: "thread Domain:Push/Pop_Range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg".
    let c_nvtx = header.iter().position(|h| h.starts_with("thread Domain:Push/Pop_Range"));
    let details = (col("Metric Name"), col("Metric Unit"), col("Metric Value"));
    let (c_section, c_rule, c_rule_desc) = (col("Section Name"), col("Rule Name"), col("Rule Description"));
    let mut rules: Vec<RuleResult> = Vec::new();
    let get = |r: &csv::Record, c: Option<usize>| c.and_then(|c| r.fields.get(c)).cloned().unwrap_or_default();

    let mut launches: Vec<Launch> = Vec::new();
    let mut index: BTreeMap<(String, u64), usize> = BTreeMap::new();
    let mut launch_for = |r: &csv::Record, launches: &mut Vec<Launch>| -> Result<usize> {
        let id_text = get(r, Some(c_id));
        let id: u64 = id_text
            .replace(',', "")
            .parse()
            .map_err(|_| not_ncu(origin, &format!("line {}: launch ID '{id_text}' is not a number", r.line)))?;
        let key = (get(r, c_pid), id);
        if let Some(&i) = index.get(&key) {
            return Ok(i);
        }
        launches.push(Launch {
            id,
            process: key.0.clone(),
            kernel: get(r, Some(c_kernel)),
            block: get(r, c_block),
            grid: get(r, c_grid),
            device: get(r, c_dev),
            cc: get(r, c_cc),
            stream: get(r, c_stream),
            nvtx: nvtx_stack(&get(r, c_nvtx)),
            metrics: BTreeMap::new(),
            text: BTreeMap::new(),
        });
        index.insert(key, launches.len() - 1);
        Ok(launches.len() - 1)
    };

    match details {
        (Some(c_name), Some(c_unit), Some(c_value)) => {
            for r in &records[hpos + 1..] {
                if r.fields.len() != header.len() {
                    continue; // a later table (e.g. rule descriptions of a section)
                }
                let i = launch_for(r, &mut launches)?;
                let description = get(r, c_rule_desc);
                if !description.is_empty() {
                    rules.push(RuleResult {
                        launch_id: launches[i].id,
                        kernel: launches[i].kernel.clone(),
                        section: get(r, c_section),
                        name: get(r, c_rule),
                        description,
                    });
                }
                let name = get(r, Some(c_name));
                let value = get(r, Some(c_value));
                if let Some(v) = parse_value(&value, &get(r, Some(c_unit))) {
                    launches[i].metrics.insert(name, v);
                } else if name.starts_with("device__attribute") && !value.trim().is_empty() {
                    launches[i].text.insert(name, value.trim().to_string());
                }
            }
        }
        _ => {
            // Raw page: metrics are columns; an optional units row (empty ID) follows the header.
            let first_metric = c_cc.map(|c| c + 1).unwrap_or(header.len());
            let mut units: Vec<String> = vec![String::new(); header.len()];
            for r in &records[hpos + 1..] {
                if r.fields.len() != header.len() {
                    continue;
                }
                if get(r, Some(c_id)).is_empty() {
                    units = r.fields.clone();
                    continue;
                }
                let i = launch_for(r, &mut launches)?;
                for c in first_metric..header.len() {
                    if let Some(v) = parse_value(&r.fields[c], &units[c]) {
                        launches[i].metrics.insert(header[c].clone(), v);
                    } else if header[c].starts_with("device__attribute") && !r.fields[c].trim().is_empty() {
                        launches[i].text.insert(header[c].clone(), r.fields[c].trim().to_string());
                    }
                }
            }
        }
    }
    if launches.is_empty() {
        return Err(not_ncu(origin, "a header but no launch rows"));
    }
    Ok(Capture {
        launches,
        rules,
        other_lines,
    })
}

/// The push/pop NVTX stack of one launch from ncu's `--nvtx` CSV cell: the thread id, then
/// one quoted `domain:range:PL_Type:PL_Value:CLR_Type:Color:Msg_Type:Msg` per open range,
/// outermost first (`731  "<default domain>:run:none:…:none"  "<default domain>:triad:…"`;
/// `app:solver:none:none:none:none:ASCII:solver` for `nvtxDomainRangePushEx` in domain
/// `app`; CUB's `CCCL:cub::DeviceRadixSort:…:REGISTERED:cub::DeviceRadixSort`). Range names
/// may hold `:`; the domain is taken up to the first `:`, the last six fields are the
/// payload, colour and message (the message repeating the name, or `none`). Returns `range`
/// for the default domain, `domain:range` otherwise; empty when no range was open.
pub fn nvtx_stack(cell: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, part) in cell.split('"').enumerate() {
        if i % 2 == 0 || part.is_empty() {
            continue; // outside quotes: the thread id and spaces
        }
        let Some((domain, rest)) = part.split_once(':') else { continue };
        let f: Vec<&str> = rest.split(':').collect();
        if f.len() < 7 {
            continue;
        }
        // The name has k+1 fields; the message either repeats it (2k+8 fields after the
        // domain... i.e. f.len() = 2(k+1) + 5) or is a single field (f.len() = k+1 + 6).
        let name_fields = if (f.len() - 5).is_multiple_of(2) && f[..(f.len() - 5) / 2] == f[f.len() - (f.len() - 5) / 2..] {
            (f.len() - 5) / 2
        } else {
            f.len() - 6
        };
        let name = f[..name_fields].join(":");
        if name.is_empty() {
            continue;
        }
        out.push(if domain == "<default domain>" {
            name
        } else {
            format!("{domain}:{name}")
        });
    }
    out
}

/// A metric value in ncu's formatting (thousand separators, `n/a`) scaled to base units.
pub fn parse_value(value: &str, unit: &str) -> Option<f64> {
    let v: f64 = value.trim().replace(',', "").parse().ok()?;
    if !v.is_finite() {
        return None;
    }
    Some(v * unit_scale(unit.trim()))
}

/// Factor from ncu's (possibly auto-scaled) unit to the base unit: bytes, seconds, hertz,
/// bytes/second; counts, %, per-cycle figures unchanged. ncu scales with SI prefixes.
pub fn unit_scale(unit: &str) -> f64 {
    let (num, den) = unit.split_once('/').unwrap_or((unit, ""));
    let prefix = |u: &str, base: &str| -> Option<f64> {
        let p = u.strip_suffix(base)?;
        Some(match p {
            "" => 1.0,
            "K" | "k" => 1e3,
            "M" => 1e6,
            "G" => 1e9,
            "T" => 1e12,
            "P" => 1e15,
            "m" => 1e-3,
            "u" => 1e-6,
            "n" => 1e-9,
            _ => return None,
        })
    };
    let scale_of = |u: &str| -> f64 {
        if let Some(f) = prefix(u, "byte") {
            return f;
        }
        if let Some(f) = prefix(u, "second") {
            return f;
        }
        if let Some(f) = prefix(&u.to_ascii_lowercase(), "hz").or_else(|| prefix(u, "hz")) {
            return f;
        }
        match u {
            "ns" => 1e-9,
            "us" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            _ => 1.0,
        }
    };
    let mut f = scale_of(num);
    if !den.is_empty() {
        f /= scale_of(den);
    }
    // Durations are stored in seconds whatever ncu printed: `ns` → 1e-9 above.
    f
}

/// All launches of one kernel, aggregated.
#[derive(Debug, Clone, PartialEq)]
pub struct KernelSummary {
    /// Display name (`native::vectorized_elementwise_kernel<…MulFunctor<double>…>`).
    pub name: String,
    /// The identity: the name exactly as ncu printed it.
    pub full_name: String,
    /// `full_name` demangled (the same text where ncu printed it demangled).
    pub demangled: String,
    /// Launches summed.
    pub launches: usize,
    /// Counters (`*.sum`, durations) summed over launches; rates and percentages averaged.
    pub metrics: BTreeMap<String, f64>,
    /// Per-launch durations in seconds.
    pub launch_seconds: Vec<f64>,
}

fn is_summed(metric: &str) -> bool {
    metric.ends_with(".sum") && !metric.contains("peak_sustained") && !metric.starts_with("device__attribute")
}

/// Metrics of several launches as one: counters (`*.sum`, durations) summed, rates and
/// percentages averaged over the launches that have them.
pub fn aggregate(launches: &[&Launch]) -> BTreeMap<String, f64> {
    let mut metrics: BTreeMap<String, f64> = BTreeMap::new();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for l in launches {
        for (k, v) in &l.metrics {
            *metrics.entry(k.clone()).or_insert(0.0) += v;
            *counts.entry(k.clone()).or_insert(0) += 1;
        }
    }
    for (k, v) in metrics.iter_mut() {
        if !is_summed(k) {
            *v /= counts[k] as f64;
        }
    }
    metrics
}

impl Capture {
    /// What the capture says about its GPU: the device attributes and `*.peak_sustained`
    /// metrics where captured (first launch that has each), the CC column, and the median SM
    /// clock over the launches.
    pub fn device(&self) -> crate::model::gpu::CaptureDevice {
        let first = |k: &str| self.launches.iter().find_map(|l| l.metrics.get(k).copied());
        let mut clocks: Vec<f64> = self
            .launches
            .iter()
            .filter_map(|l| l.metrics.get("sm__cycles_elapsed.avg.per_second").copied())
            .filter(|v| *v > 0.0)
            .collect();
        clocks.sort_by(f64::total_cmp);
        let mut peaks = BTreeMap::new();
        for l in &self.launches {
            for (k, v) in &l.metrics {
                if k.contains("peak_sustained") || k.ends_with("cycles_elapsed.avg.per_second") {
                    peaks.entry(k.clone()).or_insert(*v);
                }
            }
        }
        let cc = self.launches.iter().find_map(|l| {
            let (a, b) = l.cc.trim().split_once('.')?;
            Some((a.parse().ok()?, b.parse().ok()?))
        });
        crate::model::gpu::CaptureDevice {
            name: self
                .launches
                .iter()
                .find_map(|l| l.text.get("device__attribute_display_name").cloned()),
            cc,
            sms: first("device__attribute_multiprocessor_count").map(|v| v as u32),
            max_sm_ghz: first("device__attribute_max_gpu_frequency_khz").map(|k| k / 1e6),
            max_mem_ghz: first("device__attribute_max_mem_frequency_khz").map(|k| k / 1e6),
            bus_bits: first("device__attribute_global_memory_bus_width").map(|v| v as u32),
            sm_ghz: clocks.get(clocks.len() / 2).map(|h| h / 1e9),
            peaks,
        }
    }

    /// Kernels in order of first launch, each aggregated over its launches. Launches are
    /// grouped by the kernel's whole name (its identity, [`kernel_name`]); each kernel's
    /// display name is unique among them.
    pub fn kernels(&self) -> Vec<KernelSummary> {
        let mut order: Vec<String> = Vec::new();
        let mut groups: BTreeMap<String, Vec<&Launch>> = BTreeMap::new();
        for l in &self.launches {
            if !groups.contains_key(&l.kernel) {
                order.push(l.kernel.clone());
            }
            groups.entry(l.kernel.clone()).or_default().push(l);
        }
        let names = kernel_name::display_names(&order);
        order
            .into_iter()
            .zip(names)
            .map(|(identity, name)| {
                let ls = &groups[&identity];
                KernelSummary {
                    demangled: kernel_name::demangle(&identity),
                    name,
                    full_name: identity,
                    launches: ls.len(),
                    metrics: aggregate(ls),
                    launch_seconds: ls.iter().filter_map(|l| l.metrics.get("gpu__time_duration.sum").copied()).collect(),
                }
            })
            .collect()
    }

    /// Kernels whose display, full or demangled name contains `filter` (plain text).
    pub fn select(&self, filter: Option<&str>) -> Vec<KernelSummary> {
        self.kernels()
            .into_iter()
            .filter(|k| filter.is_none_or(|f| k.name.contains(f) || k.full_name.contains(f) || k.demangled.contains(f)))
            .collect()
    }
}

impl KernelSummary {
    fn m(&self, name: &str) -> Option<f64> {
        self.metrics.get(name).copied()
    }

    /// A SASS thread-instruction counter (`dfma`, `hadd`, …) under either prefix:
    /// `sm__sass_thread_inst_executed_op_{op}_pred_on.sum`, else the `smsp__sass_…` one.
    pub fn sass(&self, op: &str) -> Option<f64> {
        SASS_PREFIXES
            .iter()
            .find_map(|p| self.m(&format!("{p}_thread_inst_executed_op_{op}_pred_on.sum")))
    }

    /// FP work per precision with ncu's factors; `None` where none of its metrics was captured.
    pub fn flops_by_precision(&self) -> BTreeMap<&'static str, f64> {
        let mut out = BTreeMap::new();
        let any = |ops: &[&str]| ops.iter().any(|o| self.sass(o).is_some());
        let s0 = |o: &str| self.sass(o).unwrap_or(0.0);
        if any(&["dadd", "dmul", "dfma"]) {
            out.insert("double_any_width", s0("dadd") + s0("dmul") + 2.0 * s0("dfma"));
        }
        if any(&["fadd", "fmul", "ffma"]) {
            out.insert("single_any_width", s0("fadd") + s0("fmul") + 2.0 * s0("ffma"));
        }
        if any(&["hadd", "hmul", "hfma"]) {
            out.insert("half_any_width", 2.0 * s0("hadd") + 2.0 * s0("hmul") + 4.0 * s0("hfma"));
        }
        let tensor = self.tensor_ops_by_type();
        if !tensor.is_empty() {
            out.insert("tensor", tensor.values().sum());
        }
        out
    }

    /// Tensor-core ops per source type (`bf16_dst_fp32`, `fp16`, `fp64`, …), sparsity splits
    /// and per-instruction (`_op_`) subsets left out so nothing is counted twice.
    pub fn tensor_ops_by_type(&self) -> BTreeMap<String, f64> {
        self.metrics
            .iter()
            .filter_map(|(k, v)| {
                let t = k.strip_prefix("sm__ops_path_tensor_src_")?.strip_suffix(".sum")?;
                if t.contains("sparsity") || t.contains('.') {
                    return None;
                }
                Some((t.to_string(), *v))
            })
            .collect()
    }

    /// Time of all its launches together, seconds (`gpu__time_duration.sum`).
    pub fn seconds(&self) -> Option<f64> {
        self.m("gpu__time_duration.sum")
    }

    /// Bytes per level: `dram`, `l2`, `l1`.
    pub fn bytes(&self) -> Bytes {
        let mut b = Bytes::new();
        let dram = match (
            self.m("dram__bytes_read.sum"),
            self.m("dram__bytes_write.sum"),
            self.m("dram__bytes.sum"),
        ) {
            (Some(r), Some(w), _) => Some(r + w),
            (_, _, Some(t)) => Some(t),
            (Some(r), None, None) => Some(r),
            _ => None,
        };
        if let Some(d) = dram {
            b.insert("dram".into(), d);
        }
        if let Some(v) = self.m("lts__t_bytes.sum") {
            b.insert("l2".into(), v);
        }
        if let Some(v) = self.m("l1tex__t_bytes.sum") {
            b.insert("l1".into(), v);
        }
        b
    }

    /// Instruction-roofline figures (Ding & Williams) where the metrics were captured:
    /// warp instructions and GIPS; per level (global L1 sectors, shared wavefronts, L2 and
    /// DRAM sectors) the transactions, the instruction intensity (warp instructions per
    /// transaction), the transaction ceiling (`*.peak_sustained` per cycle × that unit's
    /// clock), the attainable GIPS min(warp-GIPS ceiling, intensity × transaction ceiling)
    /// and which of the two binds; the warp-GIPS ceiling (`sm__inst_executed.sum.peak_sustained`,
    /// or `.avg.peak_sustained` × SM count, × the SM clock); the global-memory walls (1, 4,
    /// 8, 32 sectors per global instruction) and shared bank-conflict walls (1, 32 wavefronts
    /// per shared instruction) with the kernel's position against them. A figure whose
    /// metrics the capture lacks is null, with a note saying which metric is missing.
    pub fn instruction_roofline(&self) -> Option<serde_json::Value> {
        use serde_json::json;
        let inst = self.m("smsp__inst_executed.sum")?;
        let t = self.seconds().filter(|t| *t > 0.0)?;
        let mut notes: Vec<String> = Vec::new();
        let sm_hz = self.m("sm__cycles_elapsed.avg.per_second");
        let warp_gips_peak = self.warp_gips_ceiling(sm_hz, &mut notes);
        let counts = [
            self.sum2(
                "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
            ),
            self.sum2(
                "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
            ),
            self.m("lts__t_sectors.sum"),
            self.sum2("dram__sectors_read.sum", "dram__sectors_write.sum"),
        ];
        let levels = self.level_figures(inst, t, sm_hz, warp_gips_peak, counts, &mut notes);
        let gips = inst / t / 1e9;
        let global_inst = self.sum2("smsp__inst_executed_op_global_ld.sum", "smsp__inst_executed_op_global_st.sum");
        let shared_inst = self.sum2("smsp__inst_executed_op_shared_ld.sum", "smsp__inst_executed_op_shared_st.sum");
        let global_spi = ratio(counts[0], global_inst);
        let shared_wpi = ratio(counts[1], shared_inst);
        if global_inst.is_none() {
            notes.push("global walls: the capture lacks smsp__inst_executed_op_global_ld/st".into());
        }
        if shared_inst.is_none() {
            notes.push("shared walls: the capture lacks smsp__inst_executed_op_shared_ld/st".into());
        }
        let mut shared = memory_pattern(t, shared_inst, shared_wpi, &SHARED_WALLS, "wavefronts");
        if let (Some(obj), Some(c)) = (
            shared.as_object_mut(),
            self.sum2(
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
            ),
        ) {
            obj.insert("bank_conflicts".into(), c.into());
        }
        Some(json!({
            "warp_instructions": inst,
            "warp_gips": gips,
            "sm_clock_ghz": sm_hz.map(|h| h / 1e9),
            "transactions": levels.tx,
            "instruction_intensity": levels.ii,
            "transactions_gtxn_per_s": levels.rate,
            "ceilings": {
                "warp_gips": warp_gips_peak,
                "transactions_gtxn_per_s": levels.tx_peak,
            },
            "attainable_gips": levels.att,
            "binding": levels.binding,
            "bound_by": levels.bound.as_ref().map(|b| b.0.clone()),
            "attainable_gips_min": levels.bound.as_ref().map(|b| b.1),
            "fraction_of_attainable": levels.bound.as_ref().filter(|b| b.1 > 0.0).map(|b| gips / b.1),
            "fraction_of_warp_gips": warp_gips_peak.filter(|w| *w > 0.0).map(|w| gips / w),
            "global_sectors_per_instruction": global_spi,
            "shared_wavefronts_per_instruction": shared_wpi,
            "global_memory": memory_pattern(t, global_inst, global_spi, &GLOBAL_WALLS, "sectors"),
            "shared_memory": shared,
            "global_walls_sectors_per_instruction": GLOBAL_WALLS,
            "shared_walls_wavefronts_per_instruction": SHARED_WALLS,
            "notes": notes,
        }))
    }

    /// The sum of two metrics, where the capture has both.
    fn sum2(&self, a: &str, b: &str) -> Option<f64> {
        Some(self.m(a)? + self.m(b)?)
    }

    /// The warp-GIPS ceiling: `sm__inst_executed.sum.peak_sustained` (or `.avg.peak_sustained`
    /// × SM count) × the SM clock `sm_hz`; where a metric is missing, None and a note.
    fn warp_gips_ceiling(&self, sm_hz: Option<f64>, notes: &mut Vec<String>) -> Option<f64> {
        let inst_peak = self
            .m("sm__inst_executed.sum.peak_sustained")
            .or_else(|| Some(self.m("sm__inst_executed.avg.peak_sustained")? * self.m("device__attribute_multiprocessor_count")?));
        match (inst_peak, sm_hz) {
            (Some(p), Some(hz)) => Some(p * hz / 1e9),
            (None, _) => {
                notes.push("no warp-GIPS ceiling: the capture lacks sm__inst_executed.sum.peak_sustained (or .avg.peak_sustained with device__attribute_multiprocessor_count)".into());
                None
            }
            (_, None) => {
                notes.push("no warp-GIPS ceiling: the capture lacks the SM clock sm__cycles_elapsed.avg.per_second".into());
                None
            }
        }
    }

    /// The figures per memory level of [`INSTRUCTION_LEVELS`], from `counts` (its transactions,
    /// in that order): `inst` warp instructions in `t` seconds against each level's
    /// transaction ceiling and the warp-GIPS ceiling. A level whose metrics the capture lacks
    /// is left out or null, with a note.
    fn level_figures(
        &self,
        inst: f64,
        t: f64,
        sm_hz: Option<f64>,
        warp_gips_peak: Option<f64>,
        counts: [Option<f64>; 4],
        notes: &mut Vec<String>,
    ) -> LevelFigures {
        let mut f = LevelFigures::default();
        for ((lvl, what, peak_metric, clock_metric), n) in INSTRUCTION_LEVELS.iter().zip(counts) {
            let Some(n) = n else {
                notes.push(format!("{lvl}: the capture lacks the {what} counters"));
                continue;
            };
            f.tx.insert((*lvl).into(), n.into());
            f.rate.insert((*lvl).into(), (n / t / 1e9).into());
            let intensity = (n > 0.0).then(|| inst / n);
            if let Some(x) = intensity {
                f.ii.insert((*lvl).into(), x.into());
            }
            let peak = self.transaction_ceiling(lvl, peak_metric, clock_metric, sm_hz, notes);
            f.tx_peak.insert((*lvl).into(), peak.into());
            let (a, b) = attainable(intensity, peak, warp_gips_peak, n);
            f.att.insert((*lvl).into(), a.into());
            f.binding.insert((*lvl).into(), b.into());
            if let (Some(a), Some(b)) = (a, b)
                && f.bound.as_ref().is_none_or(|(_, g)| a < *g)
            {
                f.bound = Some((if b == "warp_gips" { b.to_string() } else { (*lvl).to_string() }, a));
            }
        }
        f
    }

    /// A level's transaction ceiling (G transactions/s): its `*.peak_sustained` per cycle ×
    /// its unit's clock; where a metric is missing, None and a note.
    fn transaction_ceiling(
        &self,
        lvl: &str,
        peak_metric: &str,
        clock_metric: &str,
        sm_hz: Option<f64>,
        notes: &mut Vec<String>,
    ) -> Option<f64> {
        // L1 runs on the SM clock: where l1tex's own clock is missing, the SM's stands in.
        let clock = self.m(clock_metric).or_else(|| {
            if lvl.starts_with("global") || lvl == "shared" {
                sm_hz
            } else {
                None
            }
        });
        match (self.m(peak_metric), clock) {
            (Some(p), Some(hz)) => Some(p * hz / 1e9),
            (None, _) => {
                notes.push(format!("{lvl}: no transaction ceiling (the capture lacks {peak_metric})"));
                None
            }
            (_, None) => {
                notes.push(format!("{lvl}: no transaction ceiling (the capture lacks {clock_metric})"));
                None
            }
        }
    }

    /// Sectors per request for global loads and stores (4 ideal for 4-byte, 8 for 8-byte
    /// unit-stride accesses; 32 when every thread touches its own sector).
    pub fn coalescing(&self) -> BTreeMap<&'static str, f64> {
        let mut out = BTreeMap::new();
        for (op, key) in [("ld", "load_sectors_per_request"), ("st", "store_sectors_per_request")] {
            let s = self.m(&format!("l1tex__t_sectors_pipe_lsu_mem_global_op_{op}.sum"));
            let r = self.m(&format!("l1tex__t_requests_pipe_lsu_mem_global_op_{op}.sum"));
            if let (Some(s), Some(r)) = (s, r)
                && r > 0.0
            {
                out.insert(key, s / r);
            }
        }
        out
    }

    /// Whether tensor cores did work: decided by the op counts, not by the pipe-active
    /// percentage (which reads 0–3 % on kernels without tensor work).
    pub fn tensor_used(&self) -> Option<bool> {
        let t = self.tensor_ops_by_type();
        if t.is_empty() { None } else { Some(t.values().any(|v| *v > 0.0)) }
    }

    /// The kernel as a report point (provenance ncu). `time_share` is its share of the
    /// capture's total kernel time.
    pub fn to_point(&self, time_share: Option<f64>) -> Point {
        let by_prec = self.flops_by_precision();
        let total: f64 = by_prec.values().fold(0.0, |a, b| a + b);
        let flops = Flops {
            total,
            effective: None,
            by_class: by_prec.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Default::default()
        };
        let bytes = self.bytes();
        let prov = Provenance {
            flops: if by_prec.is_empty() { None } else { Some(Source::Ncu) },
            bytes: bytes.keys().map(|k| (k.clone(), Source::Ncu)).collect(),
            seconds: self.seconds().map(|_| Source::Ncu),
            notes: vec![
                "T is gpu__time_duration summed over launches (profiled runs; ncu serializes launches)".into(),
                "bytes.l1 counts requested L1 bytes; writes that stay in L2 never reach DRAM".into(),
            ],
            untrusted: Vec::new(),
        };
        let seconds = self.seconds().map(|s| vec![s]).unwrap_or_default();
        let mut p = Point::new(self.name.clone(), prov, flops, bytes, 1, seconds);
        p.threads = 0; // not a CPU thread count
        p.extra.launches = Some(self.launches as u64);
        p.extra.kernel = Some(self.full_name.clone());
        if self.demangled != self.full_name {
            p.extra.kernel_demangled = Some(self.demangled.clone());
        }
        p.extra.insert("launch_seconds", serde_json::json!(self.launch_seconds));
        if let Some(ghz) = self.m("sm__cycles_elapsed.avg.per_second") {
            p.extra.insert("sm_clock_ghz", ghz / 1e9);
        }
        let tensor = self.tensor_ops_by_type();
        if !tensor.is_empty() {
            p.extra.tensor_ops_by_type = Some(tensor);
        }
        p.extra.tensor_used = self.tensor_used();
        if let Some(pct) = self.m("sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active") {
            p.extra.insert("tensor_pipe_active_pct", pct);
        }
        p.extra.instruction_roofline = self.instruction_roofline();
        let co = self.coalescing();
        if !co.is_empty() {
            p.extra.coalescing = Some(co.into_iter().map(|(k, v)| (k.to_string(), v)).collect());
        }
        p.extra.time_share = time_share;
        p
    }
}

/// The instruction roofline's figures per memory level, each map keyed by level, and the
/// lowest attainable GIPS of them all with what binds it (`warp_gips` or the level).
#[derive(Default)]
struct LevelFigures {
    tx: serde_json::Map<String, serde_json::Value>,
    ii: serde_json::Map<String, serde_json::Value>,
    rate: serde_json::Map<String, serde_json::Value>,
    tx_peak: serde_json::Map<String, serde_json::Value>,
    att: serde_json::Map<String, serde_json::Value>,
    binding: serde_json::Map<String, serde_json::Value>,
    bound: Option<(String, f64)>,
}

/// `a / b`, where both are there and `b` is positive.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// A level's attainable GIPS, min(warp-GIPS ceiling, intensity × transaction ceiling), and
/// which of the two binds (`warp_gips` or `transactions`); a level with no transactions (`n`
/// zero) is bound by the warp-GIPS ceiling alone.
fn attainable(intensity: Option<f64>, peak: Option<f64>, warp_gips_peak: Option<f64>, n: f64) -> (Option<f64>, Option<&'static str>) {
    match (intensity, peak, warp_gips_peak) {
        (Some(x), Some(p), Some(w)) => {
            if x * p < w {
                (Some(x * p), Some("transactions"))
            } else {
                (Some(w), Some("warp_gips"))
            }
        }
        (Some(x), Some(p), None) => (Some(x * p), Some("transactions")),
        (None, _, Some(w)) if n == 0.0 => (Some(w), Some("warp_gips")),
        _ => (None, None),
    }
}

/// A memory access pattern against its walls: `inst` instructions in `t` seconds, `per`
/// transactions (`unit`) per instruction, and its position against `walls` (null where the
/// instructions were not captured).
fn memory_pattern(t: f64, inst: Option<f64>, per: Option<f64>, walls: &[f64], unit: &str) -> serde_json::Value {
    use serde_json::{Value, json};
    match (inst, per) {
        (Some(i), Some(p)) => json!({
            "instructions": i,
            "gips": i / t / 1e9,
            "instruction_intensity": 1.0 / p,
            format!("{unit}_per_instruction"): p,
            "position": wall_position(p, walls),
        }),
        (Some(i), None) => json!({"instructions": i, "gips": i / t / 1e9}),
        _ => Value::Null,
    }
}

/// Points for every kernel of a capture (optionally filtered), ranked by time share
/// (the critical kernels first).
pub fn points(capture: &Capture, filter: Option<&str>, origin: &str) -> Result<Vec<Point>> {
    let kernels = capture.select(filter);
    if kernels.is_empty() {
        return Err(Error::input(
            format!("{origin}: no kernel matches '{}'", filter.unwrap_or("")),
            format!(
                "kernels in the capture: {}",
                capture.kernels().iter().map(|k| k.name.clone()).collect::<Vec<_>>().join(", ")
            ),
        ));
    }
    let total: f64 = kernels.iter().filter_map(|k| k.seconds()).sum();
    let mut pts: Vec<Point> = kernels
        .iter()
        .map(|k| k.to_point(k.seconds().filter(|_| total > 0.0).map(|s| s / total)))
        .collect();
    pts.sort_by(|a, b| b.seconds.total_cmp(&a.seconds));
    for (rank, p) in pts.iter_mut().enumerate() {
        p.extra.insert("critical_rank", rank as u64 + 1);
    }
    if pts.iter().all(|p| p.flops.total == 0.0 && p.bytes.is_empty() && p.seconds == 0.0) {
        return Err(Error::input(
            format!("{origin}: the capture holds none of the metrics roofline needs"),
            "capture with `roofline gpu measure` or the metric list in docs/gpu.md",
        ));
    }
    Ok(pts)
}

/// One line and exit 2 where ncu is not on PATH (checked before anything else runs).
pub fn require() -> Result<()> {
    match which("ncu") {
        Some(_) => Ok(()),
        None => Err(Error::unavailable(
            "ncu (Nsight Compute) is not on PATH",
            "install Nsight Compute or add its folder (e.g. /usr/local/cuda/bin) to PATH",
        )),
    }
}

/// Run ncu on `cmd` (argv, no shell) with an explicit metric list and parse its CSV.
pub fn run(metrics: &str, kernel: Option<&str>, cmd: &[String]) -> Result<Capture> {
    require()?;
    // Without the `gpu` feature ncu itself reports a missing driver.
    #[cfg(feature = "gpu")]
    if !super::device::driver_present() {
        return Err(super::device::no_driver());
    }
    let mut c = std::process::Command::new("ncu");
    // --nvtx: each launch's NVTX push/pop ranges, for region points (`regions`).
    c.args(["--csv", "--nvtx", "--clock-control", "none", "--metrics", metrics]);
    if let Some(k) = kernel {
        c.args(["-k", &format!("regex:{k}")]);
    }
    c.args(cmd);
    let o = c
        .output()
        .map_err(|e| Error::unavailable(format!("cannot start ncu: {e}"), "check the Nsight Compute installation"))?;
    let text = String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr);
    let cap = parse(&text, "ncu output")?;
    if !o.status.success() {
        eprintln!("roofline: warning: ncu exited with {}", o.status);
    }
    Ok(cap)
}

fn which(prog: &str) -> Option<std::path::PathBuf> {
    std::env::var_os("PATH").and_then(|p| std::env::split_paths(&p).map(|d| d.join(prog)).find(|f| f.is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const HEADER: &str = "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";

    fn row(id: u32, metric: &str, unit: &str, value: &str) -> String {
        format!(
            "\"{id}\",\"1\",\"a.out\",\"h\",\"k(double *)\",\"1\",\"7\",\"(256, 1, 1)\",\"(4, 1, 1)\",\"0\",\"9.0\",\"Command line profiler metrics\",\"{metric}\",\"{unit}\",\"{value}\"\n"
        )
    }

    #[test]
    fn smsp_and_sm_sass_prefixes_are_both_read() {
        // 1,024 threads × (3 DFMA + 1 DADD + 2 DMUL): W = 1024 × (2·3 + 1 + 2) = 9,216.
        let smsp = HEADER.to_string()
            + &row(0, "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum", "inst", "3,072")
            + &row(0, "smsp__sass_thread_inst_executed_op_dadd_pred_on.sum", "inst", "1,024")
            + &row(0, "smsp__sass_thread_inst_executed_op_dmul_pred_on.sum", "inst", "2,048")
            + &row(0, "smsp__sass_thread_inst_executed_op_ffma_pred_on.sum", "inst", "512")
            + &row(0, "gpu__time_duration.sum", "usecond", "2");
        let k = &parse(&smsp, "smsp").unwrap().kernels()[0];
        assert_eq!(k.sass("dfma"), Some(3072.0));
        let w = k.flops_by_precision();
        assert_eq!(w["double_any_width"], 9216.0);
        // 512 FFMA × 2; no FP16 counters captured, so no FP16 class.
        assert_eq!(w["single_any_width"], 1024.0);
        assert!(!w.contains_key("half_any_width"));
        // The same counts under sm__sass_ give the same W; with both present, sm__ wins.
        let sm = smsp.replace("smsp__sass", "sm__sass");
        assert_eq!(
            parse(&sm, "sm").unwrap().kernels()[0].flops_by_precision()["double_any_width"],
            9216.0
        );
        let both = sm + &row(0, "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum", "inst", "1");
        assert_eq!(parse(&both, "both").unwrap().kernels()[0].sass("dfma"), Some(3072.0));
    }

    #[test]
    fn nvtx_stacks_from_ncu_cells() {
        // Cells as ncu 2025.3 writes them (tests/fixtures/ncu/nvtx_app.csv, torch_app_mangled.csv).
        let nested =
            "731  \"<default domain>:run:none:none:none:none:none:none\"  \"<default domain>:triad:none:none:none:none:none:none\" ";
        assert_eq!(nvtx_stack(nested), ["run", "triad"]);
        assert_eq!(nvtx_stack("731  \"app:solver:none:none:none:none:ASCII:solver\" "), ["app:solver"]);
        let cub = "716  \"<default domain>:sort:none:none:none:none:none:none\"  \"CCCL:cub::DeviceRadixSort:none:none:none:none:REGISTERED:cub::DeviceRadixSort\" ";
        assert_eq!(nvtx_stack(cub), ["sort", "CCCL:cub::DeviceRadixSort"]);
        // A name with a colon and no message; no range open.
        assert_eq!(nvtx_stack("1 \"<default domain>:a:b:none:none:none:none:none:none\""), ["a:b"]);
        assert!(nvtx_stack("").is_empty() && nvtx_stack("716 ").is_empty());
    }

    #[test]
    fn rule_peak_percentages() {
        let d = "The ratio of peak float (FP32) to double (FP64) performance on this device is 2:1. The workload achieved 0% of this device's FP32 peak performance and 14% of its FP64 peak performance. See the Profiling Guide";
        let p = peak_percentages(d);
        assert_eq!(p.len(), 2);
        assert_eq!(p["FP32"], 0.0);
        assert_eq!(p["FP64"], 14.0);
        assert!(peak_percentages("no figures here, 5% of nothing").is_empty());
    }

    #[test]
    fn hfma2_move_note_only_for_a_small_fp16_share() {
        let m = |h: f64, s: f64| -> BTreeMap<String, f64> {
            [("half_any_width".to_string(), h), ("single_any_width".to_string(), s)]
                .into_iter()
                .collect()
        };
        // ffma_peak per thread: 1,000 HFMA2 (4 flops) beside 32,000 FFMA + 14 FADD.
        assert!(fp16_may_be_register_moves(&m(4000.0, 64014.0)));
        // hfma2_peak per thread: 17,001 HFMA2 + 5 HADD2 beside one FMUL.
        assert!(!fp16_may_be_register_moves(&m(4.0 * 17001.0 + 10.0, 1.0)));
        // No FP16, or only FP16: nothing to flag.
        assert!(!fp16_may_be_register_moves(&m(0.0, 64014.0)));
        assert!(!fp16_may_be_register_moves(&m(4000.0, 0.0)));
    }
}
