//! The GPU model beside the CPU one, below `report/`: what a GPU can do, independent of how it
//! was measured. Per-architecture rates ([`arch_rates`]), the `roofline.gpu-machine/1` block
//! ([`GpuMachine`], [`GpuPeaks`]), theoretical peaks at a given SM clock, the peaks a capture's
//! ncu `*.peak_sustained` metrics and device attributes give, the datasheet table of
//! `platforms/gpu/nvidia.toml` ([`table`]), the roofs a report carries ([`roofs_from_machine`],
//! [`roofs_from_gpu_ceilings`]). The instruction roofline's memory walls are the model's
//! (`model::GLOBAL_WALLS`, `model::SHARED_WALLS`).
//!
//! `gpu/` (device query, ncu, our kernels) builds on it; `report/` reads it; it reads neither
//! (only the schema's `Roofs` and `Point`, as the rest of `model/` does). No cudarc here: `gpu import` of a
//! capture works without the `gpu` feature or a driver.

use std::collections::BTreeMap;

use crate::schema::gpu::{GPU_CEILINGS_SCHEMA, GPU_MACHINE_SCHEMA, GpuCeilings, GpuMachine, GpuPeaks};

pub mod regime;
pub mod table;

/// Per-SM, per-cycle throughput of one architecture (dense, not sparse: ncu's generic tensor
/// peak metrics are the sparse ones, twice these).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArchRates {
    pub fp64_flops: f64,
    pub fp32_flops: f64,
    /// Packed HFMA2: 2 halves × FMA.
    pub fp16_flops: f64,
    pub tensor_bf16: f64,
    pub tensor_fp16: f64,
    pub tensor_tf32: f64,
    pub tensor_fp8: Option<f64>,
    pub tensor_int8: f64,
    pub tensor_fp64: f64,
}

/// Dense per-SM-per-cycle rates by compute capability (from NVIDIA's architecture
/// whitepapers; H100: 64 FP64 and 128 FP32 lanes per SM, 1024 dense bf16 FMA/cycle/SM).
pub fn arch_rates(cc: (i32, i32)) -> Option<ArchRates> {
    Some(match cc {
        (9, 0) => ArchRates {
            fp64_flops: 128.0,
            fp32_flops: 256.0,
            // Non-tensor FP16 (HFMA2) at the FP32 flop rate, not twice it: on GH100 "FP16x2
            // operations are dual-issued to both FMAheavy and FMAlite pipe" (NVIDIA, Nsight
            // Compute team, https://forums.developer.nvidia.com/t/separate-cuda-core-pipeline-for-fp16-and-fp32/302018/7),
            // so one HFMA2 warp instruction takes both FP32 pipes: 64 HFMA2 × 4 flops per SM
            // and cycle. NVIDIA's H100 tables print 2 × FP32 (133.8 TFLOP/s for the SXM5), which
            // no HFMA2 kernel reaches: ours measured 49 % of that on the H200, with the FMA
            // pipes saturated (tests/fixtures/ncu/fp16_pipes.csv: both pipes count every HFMA2).
            fp16_flops: 256.0,
            tensor_bf16: 4096.0,
            tensor_fp16: 4096.0,
            tensor_tf32: 2048.0,
            tensor_fp8: Some(8192.0),
            tensor_int8: 8192.0,
            tensor_fp64: 256.0,
        },
        (8, 0) => ArchRates {
            fp64_flops: 64.0,
            fp32_flops: 128.0,
            fp16_flops: 512.0,
            tensor_bf16: 2048.0,
            tensor_fp16: 2048.0,
            tensor_tf32: 1024.0,
            tensor_fp8: None,
            tensor_int8: 4096.0,
            tensor_fp64: 128.0,
        },
        (8, 6) | (8, 9) => ArchRates {
            fp64_flops: 4.0,
            fp32_flops: 256.0,
            fp16_flops: 256.0,
            tensor_bf16: 1024.0,
            tensor_fp16: 1024.0,
            tensor_tf32: 512.0,
            tensor_fp8: if cc.1 == 9 { Some(2048.0) } else { None },
            tensor_int8: 2048.0,
            tensor_fp64: 0.0,
        },
        (10, 0) => ArchRates {
            fp64_flops: 128.0,
            fp32_flops: 256.0,
            fp16_flops: 512.0,
            tensor_bf16: 8192.0,
            tensor_fp16: 8192.0,
            tensor_tf32: 4096.0,
            tensor_fp8: Some(16384.0),
            tensor_int8: 16384.0,
            tensor_fp64: 256.0,
        },
        _ => return None,
    })
}

/// Theoretical peaks (GFLOP/s, GB/s) from the architecture table.
pub fn theoretical_peaks(cc: (i32, i32), sms: u32, sm_ghz: Option<f64>, mem_ghz: Option<f64>, bus_bits: Option<u32>) -> GpuPeaks {
    let mut p = GpuPeaks {
        at_sm_ghz: sm_ghz,
        ..Default::default()
    };
    if let (Some(r), Some(ghz)) = (arch_rates(cc), sm_ghz) {
        let f = |per_sm: f64| per_sm * sms as f64 * ghz;
        p.fp64_gflops = Some(f(r.fp64_flops));
        p.fp32_gflops = Some(f(r.fp32_flops));
        p.fp16_gflops = Some(f(r.fp16_flops));
        p.tensor_gflops.insert("bf16".into(), f(r.tensor_bf16));
        p.tensor_gflops.insert("fp16".into(), f(r.tensor_fp16));
        p.tensor_gflops.insert("tf32".into(), f(r.tensor_tf32));
        if let Some(fp8) = r.tensor_fp8 {
            p.tensor_gflops.insert("fp8".into(), f(fp8));
        }
        p.tensor_gflops.insert("int8".into(), f(r.tensor_int8));
        if r.tensor_fp64 > 0.0 {
            p.tensor_gflops.insert("fp64".into(), f(r.tensor_fp64));
        }
    }
    if let (Some(mem), Some(bits)) = (mem_ghz, bus_bits) {
        p.dram_gbs = Some(mem * 2.0 * bits as f64 / 8.0);
    }
    p
}

/// Theoretical roofs (a report's `ceilings`) from a `roofline.gpu-machine/1` block: FP64 and
/// FP32 FMA peaks (no-FMA: half, one add or multiply per FMA slot), HBM bandwidth as the `dram`
/// roof, and the L2/L1 bandwidths when `gpu machine --ncu` measured them. None for any other
/// machine block, or one without peaks.
pub fn roofs_from_machine(machine: &serde_json::Value) -> Option<crate::schema::report::Roofs> {
    if machine.get("schema").and_then(|s| s.as_str()) != Some(GPU_MACHINE_SCHEMA) {
        return None;
    }
    let peaks: GpuPeaks = serde_json::from_value(machine.get("peaks")?.clone()).ok()?;
    roofs_from_peaks(&peaks)
}

/// Theoretical roofs from a GPU's peaks: FP64 and FP32 FMA (and no-FMA at half), FP16, one
/// roof per tensor input type, DRAM/L2/L1 bandwidth. None when it holds none.
pub fn roofs_from_peaks(p: &GpuPeaks) -> Option<crate::schema::report::Roofs> {
    let ok = |v: Option<f64>| v.filter(|x| x.is_finite() && *x > 0.0);
    let mut compute = BTreeMap::new();
    for (precision, peak) in [("double", p.fp64_gflops), ("single", p.fp32_gflops)] {
        if let Some(g) = ok(peak) {
            compute.insert(format!("{precision}.gpu.fma"), g);
            compute.insert(format!("{precision}.gpu.nofma"), g / 2.0);
        }
    }
    if let Some(g) = ok(p.fp16_gflops) {
        compute.insert("half.gpu.fma".into(), g);
    }
    // Tensor cores, one roof per input type (`tensor_bf16.gpu.fma`): the precision a point
    // with tensor work is read against (`model::point_precision`).
    for (t, g) in &p.tensor_gflops {
        if let Some(g) = ok(Some(*g)) {
            compute.insert(format!("tensor_{t}.gpu.fma"), g);
        }
    }
    let bandwidth: BTreeMap<String, f64> = [("dram", p.dram_gbs), ("l2", p.l2_gbs), ("l1", p.l1_gbs)]
        .into_iter()
        .filter_map(|(l, g)| ok(g).map(|g| (l.to_string(), g)))
        .collect();
    if compute.is_empty() && bandwidth.is_empty() {
        return None;
    }
    Some(crate::schema::report::Roofs {
        kind: "theoretical".into(),
        compute_gflops: compute,
        bandwidth_traffic_gbs: bandwidth.clone(),
        bandwidth_gbs: bandwidth,
        threads: None,
        ..Default::default()
    })
}

/// What an ncu capture says about the GPU it ran on (any of it may be missing).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CaptureDevice {
    /// `device__attribute_display_name`.
    pub name: Option<String>,
    /// The `CC` column.
    pub cc: Option<(i32, i32)>,
    pub sms: Option<u32>,
    pub max_sm_ghz: Option<f64>,
    pub max_mem_ghz: Option<f64>,
    pub bus_bits: Option<u32>,
    /// The SM clock during the profiled launches (`sm__cycles_elapsed.avg.per_second`).
    pub sm_ghz: Option<f64>,
    /// `*.peak_sustained` metrics and unit clocks (per cycle, hertz).
    pub peaks: BTreeMap<String, f64>,
}

/// ncu's per-cycle peak metrics whose rate is the sparse one (2:4 sparsity doubles it): the
/// dense roof is half. FP64 DMMA has no sparse mode (33,792 ops/cycle on 132 SMs = 256 per SM,
/// the dense table rate).
const NCU_TENSOR_PEAKS: [(&str, &str, f64); 5] = [
    ("bf16", "sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained", 0.5),
    ("fp16", "sm__ops_path_tensor_src_fp16.sum.peak_sustained", 0.5),
    ("tf32", "sm__ops_path_tensor_src_tf32_dst_fp32.sum.peak_sustained", 0.5),
    ("fp8", "sm__ops_path_tensor_src_fp8.sum.peak_sustained", 0.5),
    ("fp64", "sm__ops_path_tensor_src_fp64.sum.peak_sustained", 1.0),
];

/// The GPU a capture ran on, with its peaks: from the capture's `*.peak_sustained` metrics at
/// the captured SM clock where present, else the architecture table (compute capability × SMs)
/// at that clock, else the datasheet table entry of `gpu_name` (`gpu import --gpu NAME`) or of
/// the captured device name. `provenance` says which gave each figure; `warnings` name the
/// roofs still missing and how to add them.
pub fn machine_for_capture(dev: &CaptureDevice, gpu_name: Option<&str>) -> GpuMachine {
    let name = gpu_name.map(str::to_string).or_else(|| dev.name.clone());
    let spec = name.as_deref().and_then(table::find);
    let cc = dev.cc.or_else(|| spec.as_ref().and_then(|s| s.cc()));
    let sms = dev.sms.or_else(|| spec.as_ref().and_then(|s| s.sms));
    let max_ghz = dev
        .max_sm_ghz
        .or_else(|| spec.as_ref().and_then(|s| s.boost_clock_mhz.map(|m| m / 1e3)));
    let clock = dev.sm_ghz.or(max_ghz);
    let clock_text = match (dev.sm_ghz, clock) {
        (Some(c), _) => format!("the capture's SM clock {c:.3} GHz"),
        (None, Some(c)) => format!("the maximum SM clock {c:.3} GHz (the capture has no sm__cycles_elapsed.avg.per_second)"),
        (None, None) => "no known clock".into(),
    };
    let mut m = GpuMachine {
        schema: GPU_MACHINE_SCHEMA.into(),
        kind: "gpu".into(),
        ordinal: 0,
        name: name.clone().unwrap_or_else(|| "unknown NVIDIA GPU".into()),
        compute_capability: cc.map(|(a, b)| format!("{a}.{b}")).unwrap_or_default(),
        sms: sms.unwrap_or(0),
        sm_clock_max_ghz: max_ghz,
        memory_clock_ghz: dev.max_mem_ghz,
        memory_bus_bits: dev.bus_bits,
        memory_bytes: 0,
        l2_bytes: None,
        shared_per_sm_bytes: None,
        peaks: GpuPeaks::default(),
        ncu_peaks: dev.peaks.clone(),
        warnings: Vec::new(),
        provenance: Vec::new(),
    };
    if let Some(n) = &name {
        m.provenance.push(format!(
            "device: {n} ({})",
            if gpu_name.is_some() {
                "named by --gpu"
            } else {
                "the capture's device__attribute_display_name"
            }
        ));
    }
    // 1. Architecture table at the capture's clock (compute), memory clock × bus (DRAM).
    table_peaks(&mut m, dev, spec.as_ref(), (cc, sms), clock, &clock_text);
    // 2. ncu's own per-cycle peaks, where captured, override the tables.
    captured_peaks(&mut m, dev, clock, &clock_text);
    // 3. Gaps filled from the datasheet table.
    if let Some(s) = &spec {
        fill_from_datasheet(&mut m, s, clock, &clock_text);
    }
    warn_of_missing_roofs(&mut m);
    m
}

/// The peaks of the architecture table (compute capability × SMs at `clock`; DRAM from the
/// memory clock × bus) where the capture tells the architecture, else the datasheet entry's.
fn table_peaks(
    m: &mut GpuMachine,
    dev: &CaptureDevice,
    spec: Option<&table::GpuSpec>,
    (cc, sms): (Option<(i32, i32)>, Option<u32>),
    clock: Option<f64>,
    clock_text: &str,
) {
    if let (Some(cc), Some(sms)) = (cc, sms)
        && arch_rates(cc).is_some()
    {
        m.peaks = theoretical_peaks(cc, sms, clock, dev.max_mem_ghz, dev.bus_bits);
        m.provenance.push(format!(
            "compute peaks: architecture rates of compute capability {}.{} × {sms} SMs at {clock_text}",
            cc.0, cc.1
        ));
        if m.peaks.dram_gbs.is_some() {
            m.provenance.push("dram: the capture's maximum memory clock × 2 × bus width".into());
        }
    } else if let Some(s) = spec {
        let (p, note) = s.peaks(clock);
        m.peaks = p;
        m.provenance.push(format!(
            "compute peaks: datasheet table platforms/gpu/nvidia.toml ({}) at {clock_text}",
            s.key
        ));
        m.warnings.extend(note);
    }
}

/// The capture's own `*.peak_sustained` figures at `clock`, over the tables' where present.
fn captured_peaks(m: &mut GpuMachine, dev: &CaptureDevice, clock: Option<f64>, clock_text: &str) {
    let get = |k: &str| dev.peaks.get(k).copied().filter(|v| v.is_finite() && *v > 0.0);
    if let Some(ghz) = clock {
        let mut from_ncu: Vec<String> = Vec::new();
        if let Some(v) = get("sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained") {
            m.peaks.fp64_gflops = Some(2.0 * v * ghz);
            from_ncu.push("fp64".into());
        }
        if let Some(v) = get("sm__sass_thread_inst_executed_op_ffma_pred_on.sum.peak_sustained") {
            m.peaks.fp32_gflops = Some(2.0 * v * ghz);
            from_ncu.push("fp32".into());
        }
        for (t, metric, dense) in NCU_TENSOR_PEAKS {
            if let Some(v) = get(metric) {
                m.peaks.tensor_gflops.insert(t.into(), v * dense * ghz);
                from_ncu.push(format!("tensor {t}"));
            }
        }
        if let Some(v) = get("lts__t_bytes.sum.peak_sustained") {
            m.peaks.l2_gbs = Some(v * ghz);
            from_ncu.push("l2".into());
        }
        if let Some(v) = get("l1tex__t_bytes.sum.peak_sustained") {
            m.peaks.l1_gbs = Some(v * ghz);
            from_ncu.push("l1".into());
        }
        if !from_ncu.is_empty() {
            m.peaks.at_sm_ghz = Some(ghz);
            m.provenance.push(format!(
                "{}: the capture's *.peak_sustained per cycle × {clock_text} (tensor: dense, half ncu's sparse rate; fp64 DMMA as is)",
                from_ncu.join(", ")
            ));
        }
    }
    if let (Some(b), Some(hz)) = (get("dram__bytes.sum.peak_sustained"), get("dram__cycles_elapsed.avg.per_second")) {
        m.peaks.dram_gbs = Some(b * hz / 1e9);
        m.provenance
            .push("dram: the capture's dram__bytes.sum.peak_sustained × DRAM clock".into());
    }
}

/// The datasheet entry's figures for the peaks still unknown.
fn fill_from_datasheet(m: &mut GpuMachine, s: &table::GpuSpec, clock: Option<f64>, clock_text: &str) {
    let (t, _) = s.peaks(clock);
    let mut filled: Vec<String> = Vec::new();
    let mut fill = |dst: &mut Option<f64>, src: Option<f64>, what: &str| {
        if dst.is_none() && src.is_some() {
            *dst = src;
            filled.push(what.to_string());
        }
    };
    fill(&mut m.peaks.fp64_gflops, t.fp64_gflops, "fp64");
    fill(&mut m.peaks.fp32_gflops, t.fp32_gflops, "fp32");
    fill(&mut m.peaks.fp16_gflops, t.fp16_gflops, "fp16");
    fill(&mut m.peaks.dram_gbs, t.dram_gbs, "dram");
    for (k, v) in t.tensor_gflops {
        if let std::collections::btree_map::Entry::Vacant(e) = m.peaks.tensor_gflops.entry(k.clone()) {
            e.insert(v);
            filled.push(format!("tensor {k}"));
        }
    }
    if !filled.is_empty() && !m.provenance.iter().any(|p| p.contains("datasheet table")) {
        m.provenance.push(format!(
            "{}: datasheet table platforms/gpu/nvidia.toml ({}) at {clock_text}",
            filled.join(", "),
            s.key
        ));
    }
    if m.peaks.at_sm_ghz.is_none() {
        m.peaks.at_sm_ghz = t.at_sm_ghz;
    }
}

/// A warning naming the roofs still missing and how to add them.
fn warn_of_missing_roofs(m: &mut GpuMachine) {
    let mut missing: Vec<&str> = Vec::new();
    if m.peaks.fp64_gflops.is_none() {
        missing.push("FP64");
    }
    if m.peaks.fp32_gflops.is_none() {
        missing.push("FP32");
    }
    if m.peaks.tensor_gflops.is_empty() {
        missing.push("tensor");
    }
    if m.peaks.dram_gbs.is_none() {
        missing.push("HBM/DRAM");
    }
    if m.peaks.l2_gbs.is_none() {
        missing.push("L2");
    }
    if m.peaks.l1_gbs.is_none() {
        missing.push("L1");
    }
    if !missing.is_empty() {
        m.warnings.push(format!(
            "roofs missing: {}; add them with `--gpu NAME` (known: {}) or capture with `roofline gpu measure` (it records the *.peak_sustained metrics and device attributes)",
            missing.join(", "),
            table::keys().join(", ")
        ));
    }
}

/// Empirical roofs from a `roofline.gpu-ceilings/1` document (`gpu ceilings`): FP64/FP32/FP16
/// FMA and tensor (bf16) kernels, HBM/L2/shared bandwidth (best kernel per level; shared as
/// `l1`). None when it holds none.
pub fn roofs_from_gpu_ceilings(doc: &GpuCeilings) -> Option<crate::schema::report::Roofs> {
    if doc.schema != GPU_CEILINGS_SCHEMA {
        return None;
    }
    let mut compute: BTreeMap<String, f64> = BTreeMap::new();
    for c in &doc.compute {
        let g = c.gflops;
        let key = match c.precision.as_str() {
            "fp64" => "double.gpu.fma".to_string(),
            "fp32" => "single.gpu.fma".to_string(),
            "fp16" => "half.gpu.fma".to_string(),
            t if t.starts_with("tensor_") => format!("{t}.gpu.fma"),
            _ => continue,
        };
        if g.is_finite() && g > 0.0 {
            let e = compute.entry(key).or_insert(0.0);
            *e = e.max(g);
        }
    }
    let mut bandwidth: BTreeMap<String, f64> = BTreeMap::new();
    for b in &doc.bandwidth {
        let g = b.gbs;
        let level = if b.level == "shared" { "l1" } else { b.level.as_str() };
        if g.is_finite() && g > 0.0 {
            let e = bandwidth.entry(level.to_string()).or_insert(0.0);
            *e = e.max(g);
        }
    }
    if compute.is_empty() && bandwidth.is_empty() {
        return None;
    }
    Some(crate::schema::report::Roofs {
        kind: "empirical".into(),
        compute_gflops: compute,
        bandwidth_traffic_gbs: bandwidth.clone(),
        bandwidth_gbs: bandwidth,
        threads: None,
        ..Default::default()
    })
}

/// `$XDG_CACHE_HOME/roofline/gpu-ceilings-<device>.json`: where `gpu ceilings` keeps its
/// result for the GPU of that name, and where run/measure/import look for empirical roofs.
pub fn ceilings_cache_path(device_name: &str) -> Option<std::path::PathBuf> {
    let slug: String = device_name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c.to_ascii_lowercase() } else { '-' })
        .collect();
    Some(crate::util::cache_dir()?.join(format!("gpu-ceilings-{}.json", slug.trim_matches('-'))))
}

/// The roofs a GPU report carries: the empirical ceilings cached for this GPU (when `gpu
/// ceilings` ran on it), the theoretical peaks of `machine` beside them for what they lack.
/// Returns the roofs and one line saying where they came from.
/// The energy roofs of the cached `gpu ceilings --energy` of this GPU, where there are some.
pub fn cached_energy_roofs(machine: &GpuMachine) -> Option<crate::schema::energy::EnergyRoofs> {
    let text = std::fs::read_to_string(ceilings_cache_path(&machine.name)?).ok()?;
    let doc: GpuCeilings = serde_json::from_str(&text).ok()?;
    (doc.machine.name == machine.name).then_some(doc.energy)?
}

pub fn report_roofs(machine: &GpuMachine) -> (Option<crate::schema::report::Roofs>, Option<String>) {
    let theory = roofs_from_peaks(&machine.peaks);
    let cached = ceilings_cache_path(&machine.name).and_then(|p| {
        let text = std::fs::read_to_string(&p).ok()?;
        let doc: GpuCeilings = serde_json::from_str(&text).ok()?;
        (doc.machine.name == machine.name).then_some(())?;
        roofs_from_gpu_ceilings(&doc).map(|r| (r, p))
    });
    match (cached, theory) {
        (Some((mut emp, path)), theory) => {
            if let Some(t) = theory {
                for (k, v) in t.compute_gflops {
                    if !emp.compute_gflops.contains_key(&k) {
                        emp.theoretical.insert(k.clone());
                        emp.compute_gflops.insert(k, v);
                    }
                }
                for (k, v) in t.bandwidth_gbs {
                    if !emp.bandwidth_gbs.contains_key(&k) {
                        emp.theoretical.insert(k.clone());
                        emp.bandwidth_traffic_gbs.insert(k.clone(), v);
                        emp.bandwidth_gbs.insert(k, v);
                    }
                }
                if !emp.theoretical.is_empty() {
                    emp.kind = "mixed".into();
                }
            }
            (
                Some(emp),
                Some(format!(
                    "roofs: empirical ceilings of `gpu ceilings` on this GPU ({}), theoretical peaks for the rest",
                    path.display()
                )),
            )
        }
        (None, Some(t)) => (
            Some(t),
            Some("roofs: theoretical peaks (no `gpu ceilings` cache for this GPU)".into()),
        ),
        (None, None) => (None, None),
    }
}

/// The launch floor for GPU `name` (seconds per launch of an empty kernel) and where it came
/// from: `gpu ceilings`' figure cached for that GPU, else [`regime::DEFAULT_LAUNCH_FLOOR_S`].
pub fn launch_floor(name: &str) -> (f64, String) {
    let cached = ceilings_cache_path(name).and_then(|p| {
        let doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&p).ok()?).ok()?;
        (doc.pointer("/machine/name").and_then(|n| n.as_str()) == Some(name)).then_some(())?;
        doc.get("launch_floor_s").and_then(|v| v.as_f64()).filter(|f| *f > 0.0)
    });
    match cached {
        Some(f) => (f, format!("launch floor {:.2} us: `gpu ceilings` on this GPU", f * 1e6)),
        None => (
            regime::DEFAULT_LAUNCH_FLOOR_S,
            format!(
                "launch floor {:.1} us assumed (an empty kernel under ncu on an H100; run `gpu ceilings` on this GPU to measure it)",
                regime::DEFAULT_LAUNCH_FLOOR_S * 1e6
            ),
        ),
    }
}

/// Set `extra.regime` ("compute", "bandwidth", "overhead") and `extra.regime_reason` of every
/// point that can be classed, against `roofs` and the launch floor.
pub fn set_regimes(points: &mut [crate::schema::Point], roofs: Option<&crate::schema::Roofs>, launch_floor_s: f64) {
    for p in points {
        if let Some((r, why)) = regime::classify(p, roofs, launch_floor_s) {
            p.extra.regime = Some(r.key().to_string());
            p.extra.regime_reason = Some(why);
        }
    }
}

/// Fold ncu's `*.peak_sustained` figures (per cycle) into the peaks at the SM clock.
pub fn apply_ncu_peaks(m: &mut GpuMachine, ncu: &BTreeMap<String, f64>) {
    let ghz = m.peaks.at_sm_ghz.or(m.sm_clock_max_ghz);
    let get = |k: &str| ncu.get(k).copied();
    if let Some(ghz) = ghz {
        if let Some(b) = get("lts__t_bytes.sum.peak_sustained") {
            m.peaks.l2_gbs = Some(b * ghz);
        }
        if let Some(b) = get("l1tex__t_bytes.sum.peak_sustained") {
            m.peaks.l1_gbs = Some(b * ghz);
        }
    }
    // DRAM bytes/cycle are per DRAM cycle.
    if let (Some(b), Some(hz)) = (get("dram__bytes.sum.peak_sustained"), get("dram__cycles_elapsed.avg.per_second")) {
        m.peaks.dram_gbs = Some(b * hz / 1e9);
    }
    m.ncu_peaks = ncu.clone();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h100_h200_peaks_from_the_table() {
        // H200: 132 SMs at 1.98 GHz: FP64 = 132·128·1.98 = 33,454 GFLOP/s; bf16 dense 1,070 TFLOP/s;
        // HBM3e: 3.201 GHz × 2 × 6144 bits / 8 = 4,917 GB/s.
        let p = theoretical_peaks((9, 0), 132, Some(1.98), Some(3.201), Some(6144));
        assert!((p.fp64_gflops.unwrap() - 33454.08).abs() < 0.1);
        assert!((p.fp32_gflops.unwrap() - 66908.16).abs() < 0.1);
        assert!((p.tensor_gflops["bf16"] - 1_070_530.56).abs() < 1.0);
        assert!((p.dram_gbs.unwrap() - 4917.0).abs() < 1.0);
        // FP16 (HFMA2, non-tensor) on sm_90 at FP32's flop rate: 132 · 256 · 1.98.
        assert_eq!(p.fp16_gflops, p.fp32_gflops);
        let unknown = theoretical_peaks((3, 0), 10, Some(1.0), None, None);
        assert!(unknown.fp64_gflops.is_none() && unknown.dram_gbs.is_none());
    }

    #[test]
    fn roofs_from_a_gpu_ceilings_document_take_the_best_kernel_per_roof() {
        let text = include_str!("../../../tests/fixtures/ncu/gpu_ceilings_h100.json");
        let raw: serde_json::Value = serde_json::from_str(text).unwrap();
        let doc: GpuCeilings = serde_json::from_str(text).unwrap();
        let r = roofs_from_gpu_ceilings(&doc).unwrap();
        // The expected roofs read from the raw document: the largest rate per precision and
        // per level, shared memory as l1.
        let best = |list: &str, key: &str, want: &str, field: &str| {
            raw[list]
                .as_array()
                .unwrap()
                .iter()
                .filter(|x| x[key] == want)
                .filter_map(|x| x[field].as_f64())
                .reduce(f64::max)
                .unwrap()
        };
        assert_eq!(r.compute_gflops["double.gpu.fma"], best("compute", "precision", "fp64", "gflops"));
        assert_eq!(
            r.compute_gflops["tensor_bf16.gpu.fma"],
            best("compute", "precision", "tensor_bf16", "gflops")
        );
        assert_eq!(r.bandwidth_gbs["dram"], best("bandwidth", "level", "dram", "gbs"));
        assert_eq!(r.bandwidth_gbs["l1"], best("bandwidth", "level", "shared", "gbs"));
        assert_eq!(r.bandwidth_traffic_gbs, r.bandwidth_gbs);
        assert_eq!(r.kind, "empirical");
        // Another schema: no roofs.
        let other = GpuCeilings {
            schema: "roofline.gpu-ceilings/0".into(),
            ..doc
        };
        assert!(roofs_from_gpu_ceilings(&other).is_none());
    }

    #[test]
    fn roofs_from_a_gpu_machine_block() {
        let peaks = theoretical_peaks((9, 0), 132, Some(1.98), Some(3.201), Some(6144));
        let m = serde_json::json!({"schema": GPU_MACHINE_SCHEMA, "kind": "gpu", "peaks": peaks});
        let r = roofs_from_machine(&m).unwrap();
        // 132 SMs × 128 FP64 flops/cycle × 1.98 GHz; FP32 twice that; HBM 3.201 × 2 × 6144 / 8.
        assert!((r.compute_gflops["double.gpu.fma"] - 33454.08).abs() < 1e-6);
        assert!((r.compute_gflops["double.gpu.nofma"] - 16727.04).abs() < 1e-6);
        assert!((r.compute_gflops["single.gpu.fma"] - 66908.16).abs() < 1e-6);
        assert!((r.bandwidth_gbs["dram"] - 4916.736).abs() < 1e-6);
        assert_eq!(r.bandwidth_traffic_gbs["dram"], r.bandwidth_gbs["dram"]);
        assert!(!r.bandwidth_gbs.contains_key("l2"));
        assert_eq!(r.kind, "theoretical");
        // Not a GPU machine block, or no peaks: no roofs.
        assert!(roofs_from_machine(&serde_json::json!({"kind": "gpu", "device": "H200"})).is_none());
        assert!(roofs_from_machine(&serde_json::json!({"schema": GPU_MACHINE_SCHEMA, "peaks": {}})).is_none());
    }

    #[test]
    fn sparse_ncu_tensor_peak_is_twice_the_dense_table() {
        // peaks.csv (H200): sm__ops_path_tensor_src_bf16_dst_fp32.sum.peak_sustained = 1,081,344
        // ops/cycle for the whole device, i.e. 8192 per SM: the sparse rate.
        let dense = arch_rates((9, 0)).unwrap().tensor_bf16;
        assert_eq!(1_081_344.0 / 132.0, 2.0 * dense);
    }
}
