//! `roofline gpu …`: the GPU machine, its ceilings, and the per-kernel points as text.

use crate::gpu::ncu;
use crate::schema::Point;
use crate::schema::gpu::{GpuCeilings, GpuMachine};

fn opt(v: Option<f64>, scale: f64, prec: usize) -> String {
    v.map(|x| format!("{:.*}", prec, x / scale)).unwrap_or_else(|| "-".into())
}

pub fn machine_table(m: &GpuMachine) -> String {
    let mut s = String::new();
    s += &format!("GPU {}: {} (compute capability {})\n", m.ordinal, m.name, m.compute_capability);
    s += &format!(
        "  SMs {}   SM clock max {} GHz   memory {} at {} GHz x {} bits   L2 {}\n",
        m.sms,
        opt(m.sm_clock_max_ghz, 1.0, 3),
        crate::schema::units::fmt_bytes(m.memory_bytes as f64),
        opt(m.memory_clock_ghz, 1.0, 3),
        m.memory_bus_bits.map(|b| b.to_string()).unwrap_or("-".into()),
        m.l2_bytes.map(|b| crate::schema::units::fmt_bytes(b as f64)).unwrap_or("-".into())
    );
    let p = &m.peaks;
    s += &format!(
        "  peaks (dense, at {} GHz): FP64 {} TFLOP/s  FP32 {}  FP16 {}\n",
        opt(p.at_sm_ghz, 1.0, 3),
        opt(p.fp64_gflops, 1e3, 1),
        opt(p.fp32_gflops, 1e3, 1),
        opt(p.fp16_gflops, 1e3, 1)
    );
    for (k, v) in &p.tensor_gflops {
        s += &format!("    tensor {k:<5} {:>8.1} TFLOP/s\n", v / 1e3);
    }
    s += &format!(
        "  bandwidth: HBM {} GB/s  L2 {}  L1 {}\n",
        opt(p.dram_gbs, 1.0, 0),
        opt(p.l2_gbs, 1.0, 0),
        opt(p.l1_gbs, 1.0, 0)
    );
    for w in &m.warnings {
        s += &format!("  warning: {w}\n");
    }
    s
}

pub fn ceilings_table(c: &GpuCeilings) -> String {
    let mut s = format!(
        "GPU ceilings on {} (SM clock measured {} GHz)\n",
        c.machine.name,
        opt(c.sm_clock_ghz_measured, 1.0, 3)
    );
    s += "  compute        kernel           GFLOP/s    peak@clock   %\n";
    for x in &c.compute {
        s += &format!(
            "  {:<14} {:<14} {:>10.0} {:>12} {:>6}  {}\n",
            x.precision,
            x.kernel,
            x.gflops,
            opt(x.peak_at_clock_gflops, 1.0, 0),
            opt(x.pct_of_peak_at_clock, 1.0, 1),
            x.detail.as_deref().unwrap_or("")
        );
    }
    if let Some(f) = c.launch_floor_s {
        s += &format!("  launch floor   empty_kernel   {:.2} us per launch (CUDA events)\n", f * 1e6);
    }
    for n in &c.notes {
        s += &format!("  note: {n}\n");
    }
    s += "  bandwidth      kernel        working set      GB/s\n";
    for b in &c.bandwidth {
        s += &format!(
            "  {:<14} {:<12} {:>12} {:>10.0}\n",
            b.level,
            b.kernel,
            crate::schema::units::fmt_bytes(b.working_set_bytes as f64),
            b.gbs
        );
    }
    if !c.sweep.is_empty() {
        s += "  sweep (load)   working set   rotated   GB/s (rotated)   GB/s (L2-resident passes)\n";
        for p in &c.sweep {
            s += &format!(
                "  {:<14} {:>11} {:>9} {:>16.0} {:>27}\n",
                "",
                crate::schema::units::fmt_bytes(p.working_set_bytes as f64),
                format!("x{}", p.rotated_buffers),
                p.gbs,
                opt(p.gbs_l2_resident, 1.0, 0)
            );
        }
    }
    s
}

/// Fusion candidates, one line each ("N kernels move X GB in T ms; fused ≈ Y GB, ≈ t ms at
/// the HBM roof"), with the region and the kernels.
pub fn fusion_table(chains: &[crate::schema::report::FusionChain]) -> String {
    let mut s = String::new();
    if chains.is_empty() {
        return s;
    }
    s += "\nfusion candidates (consecutive memory-bound kernels, same stream and NVTX range):\n";
    for c in chains {
        s += &format!(
            "  {}{}\n    {}\n",
            if c.region.is_empty() {
                String::new()
            } else {
                format!("[{}] ", c.region)
            },
            c.summary,
            c.kernels.join(" -> ")
        );
    }
    s
}

/// The per-kernel table: W by precision, Q per level, T, rates, diagnostics; NVTX region
/// points below the kernels, each with its kernels listed.
pub fn points_table(points: &[Point]) -> String {
    let (regions, kernels): (Vec<&Point>, Vec<&Point>) = points.iter().partition(|p| crate::gpu::regions::is_region(p));
    let mut s = rows_table("kernel", &kernels);
    if !regions.is_empty() {
        s += "\nNVTX regions (each holds its sub-ranges' kernels; T is GPU time, not wall time):\n";
        s += &rows_table("region", &regions);
        for p in &regions {
            s += &format!(
                "  {} ({} instance(s)):\n",
                p.name,
                p.extra.get("instances").and_then(|v| v.as_u64()).unwrap_or(0)
            );
            for k in p.extra.get("kernels").and_then(|v| v.as_array()).into_iter().flatten() {
                s += &format!(
                    "      {:>5.1}%  {:>3} x  {}\n",
                    k.get("time_share").and_then(|v| v.as_f64()).unwrap_or(0.0) * 100.0,
                    k.get("launches").and_then(|v| v.as_u64()).unwrap_or(0),
                    k.get("name").and_then(|v| v.as_str()).unwrap_or("")
                );
            }
        }
    }
    // Points above their roof (model::annotate's note), each with both numbers.
    for p in points {
        for n in p.provenance.notes.iter().filter(|n| n.starts_with("above its roof:")) {
            s += &format!("warning: {n}\n");
        }
    }
    s
}

fn rows_table(what: &str, points: &[&Point]) -> String {
    let mut s = format!(
        "{what:<20}launches   GFLOP  (fp64/fp32/fp16/tensor)         DRAM GB    L2 GB    L1 GB       T ms   GFLOP/s  DRAM GB/s  AI_dram  notes\n",
    );
    for p in points {
        let c = |k: &str| p.flops.by_class.get(k).map(|v| format!("{:.3}", v / 1e9)).unwrap_or("-".into());
        let b = |k: &str| p.bytes.get(k).map(|v| format!("{:.3}", v / 1e9)).unwrap_or("-".into());
        let mut notes = Vec::new();
        if let Some(sh) = p.extra.get("time_share").and_then(|v| v.as_f64()) {
            notes.push(format!("{:.0}% of time", sh * 100.0));
        }
        if let Some(t) = p.extra.get("tensor_used").and_then(|v| v.as_bool()) {
            notes.push(if t {
                "tensor cores used".into()
            } else {
                "no tensor work".to_string()
            });
        }
        if let Some(co) = p.extra.get("coalescing").and_then(|v| v.as_object()) {
            for (k, v) in co {
                if let Some(x) = v.as_f64() {
                    notes.push(format!("{} {:.1}", k.replace('_', " "), x));
                }
            }
        }
        if ncu::fp16_may_be_register_moves(&p.flops.by_class) {
            notes.push("FP16 count may be HFMA2 register moves".into());
        }
        if let Some(r) = p.extra.get("regime").and_then(|v| v.as_str()) {
            notes.push(format!("{r}-bound"));
        }
        if let Some(l) = p.extra.get("library_gflops").and_then(|v| v.as_f64())
            && p.extra.contains_key("library")
            && let Some(g) = p.gflops
        {
            notes.push(format!("{:.2}x of cuBLAS", g / l));
        }
        s += &format!(
            "{:<20}{:>8} {:>7.3}  ({}/{}/{}/{}) {:>10} {:>8} {:>8} {:>10.3} {:>9} {:>10} {:>8}  {}\n",
            p.name,
            p.extra
                .get("launches")
                .and_then(|v| v.as_u64())
                .map(|v| v.to_string())
                .unwrap_or("-".into()),
            p.flops.total / 1e9,
            c("double_any_width"),
            c("single_any_width"),
            c("half_any_width"),
            c("tensor"),
            b("dram"),
            b("l2"),
            b("l1"),
            p.seconds * 1e3,
            opt(p.gflops, 1.0, 1),
            opt(p.gbs.get("dram").copied(), 1.0, 1),
            opt(p.ai.get("dram").copied(), 1.0, 2),
            notes.join("; ")
        );
    }
    s
}

#[cfg(test)]
#[path = "gpu_tests.rs"]
mod tests;
