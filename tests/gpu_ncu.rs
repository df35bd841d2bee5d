//! The ncu import on real H200 captures (tests/fixtures/ncu, made by scripts/gpu-capture.sh
//! from kernels/gpu/suite.cu), checked against what the kernels must do by construction.

use roofline::gpu::ncu;

fn capture(name: &str) -> ncu::Capture {
    let path = format!("{}/tests/fixtures/ncu/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap();
    ncu::parse(&text, &path).unwrap()
}

fn kernel(c: &ncu::Capture, name: &str) -> ncu::KernelSummary {
    c.kernels()
        .into_iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no kernel {name}"))
}

const TRIAD_N: f64 = 33_554_432.0;

#[test]
fn triad_details_page_w_q_t() {
    // suite.cu's time_launches runs 1 warm-up + LAUNCHES (3) launches.
    let c = capture("triad_hier_details.csv");
    let k = kernel(&c, "triad");
    assert_eq!(k.launches, 4);
    let p = k.to_point(None);
    // One DFMA per element: W = 2n per launch, exactly.
    assert_eq!(p.flops.by_class["double_any_width"], 4.0 * 2.0 * TRIAD_N);
    assert_eq!(p.flops.total, 4.0 * 2.0 * TRIAD_N);
    // L1 requested bytes: 2 loads + 1 store of 8 bytes per element, exactly.
    assert_eq!(p.bytes["l1"], 4.0 * 24.0 * TRIAD_N);
    // DRAM: compulsory 24n per launch within 3 % (write-back timing moves a little).
    let dram = p.bytes["dram"] / (4.0 * 24.0 * TRIAD_N);
    assert!((0.97..1.03).contains(&dram), "dram ratio {dram}");
    // T: four launches of ~0.19 ms each (H200 HBM ~4.2 TB/s).
    assert_eq!(k.launch_seconds.len(), 4);
    let t = p.seconds;
    assert!(t > 4.0 * 0.15e-3 && t < 4.0 * 0.3e-3, "t = {t}");
    assert!((t - k.launch_seconds.iter().sum::<f64>()).abs() < 1e-12);
    assert_eq!(p.provenance.flops, Some(roofline::report::Source::Ncu));
    assert_eq!(p.extra["launches"], 4);
}

#[test]
fn raw_page_and_base_units_agree_with_the_kernel() {
    let c = capture("triad_hier_raw.csv");
    let k = kernel(&c, "triad");
    assert_eq!(k.launches, 4);
    let p = k.to_point(None);
    assert_eq!(p.flops.total, 4.0 * 2.0 * TRIAD_N);
    assert_eq!(p.bytes["l1"], 4.0 * 24.0 * TRIAD_N);
    let c = capture("daxpy_hier_base.csv");
    let k = kernel(&c, "daxpy");
    assert_eq!(k.launches, 3);
    assert_eq!(k.to_point(None).flops.total, 3.0 * 2.0 * TRIAD_N);
}

#[test]
fn dgemm_and_tensor_work() {
    let k = kernel(&capture("dgemm_hier.csv"), "dgemm");
    let n: f64 = 1024.0;
    assert_eq!(k.launches, 3);
    assert_eq!(k.to_point(None).flops.total, 3.0 * 2.0 * n * n * n);
    // bf16 WMMA GEMM n = 2048: tensor ops = 2n^3 per launch, from sm__ops_path_tensor_src_*.
    let k = kernel(&capture("bf16_gemm_hier.csv"), "bf16_wmma_gemm");
    let n: f64 = 2048.0;
    let p = k.to_point(None);
    assert_eq!(p.flops.by_class["tensor"], 3.0 * 2.0 * n * n * n);
    assert_eq!(k.tensor_used(), Some(true));
    // 512 × inst_executed_pipe_tensor would be wrong on sm_90: make sure we did not use it.
    let pipe = k.metrics["sm__inst_executed_pipe_tensor.sum"];
    assert!((512.0 * pipe - p.flops.by_class["tensor"]).abs() > 1e9);
}

#[test]
fn fp32_kernel_without_tensor_work_and_hfma2_moves() {
    // ffma_peak: 1,081,344 threads × 8 chains × 4000 iterations of FFMA per launch.
    let k = kernel(&capture("ffma_peak_hier.csv"), "ffma_peak");
    let threads = 132.0 * 8.0 * 1024.0;
    assert_eq!(
        k.metrics["sm__sass_thread_inst_executed_op_ffma_pred_on.sum"],
        3.0 * threads * 8.0 * 4000.0
    );
    // The tensor pipe reads a few % active, but no tensor ops were done.
    assert!(k.metrics["sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"] > 0.0);
    assert_eq!(k.tensor_used(), Some(false));
    // The compiler's zero-operand HFMA2 moves show up as FP16 work (documented).
    assert!(k.flops_by_precision()["half_any_width"] > 0.0);
}

/// The FMA peak kernels (kernels/gpu/kernels.cu) run on 132 × 8 blocks of 1024 threads.
const PEAK_THREADS: f64 = 132.0 * 8.0 * 1024.0;

#[test]
fn fp32_ffma_peak_w() {
    // ffma_peak 4000 2: warm-up + 2 launches; per thread 8 chains × 4000 FFMA, 7 FADD to seed
    // a1..a7 from a0 and 7 FADD to sum them, and one 4-byte store.
    let k = kernel(&capture("ffma_peak_hier.csv"), "ffma_peak");
    assert_eq!(k.launches, 3);
    let p = k.to_point(None);
    assert_eq!(
        p.flops.by_class["single_any_width"],
        3.0 * PEAK_THREADS * (2.0 * 8.0 * 4000.0 + 14.0)
    );
    assert_eq!(p.flops.by_class["double_any_width"], 0.0);
    assert_eq!(p.bytes["l1"], 3.0 * PEAK_THREADS * 4.0);
    // The HFMA2 register moves (4 flops each) are a small share: the note fires.
    let half = p.flops.by_class["half_any_width"];
    assert!(half > 0.0 && half / p.flops.total < ncu::HFMA2_MOVE_MAX_SHARE);
    assert!(ncu::fp16_may_be_register_moves(&p.flops.by_class));
}

#[test]
fn fp64_dfma_peak_w() {
    // dfma_peak 2000 2: per thread 8 × 2000 DFMA, 14 DADD, one 8-byte store; no FP32/FP16.
    let k = kernel(&capture("dfma_peak_hier.csv"), "dfma_peak");
    assert_eq!(k.launches, 3);
    assert_eq!(k.sass("dfma"), Some(3.0 * PEAK_THREADS * 8.0 * 2000.0));
    let p = k.to_point(None);
    assert_eq!(
        p.flops.by_class["double_any_width"],
        3.0 * PEAK_THREADS * (2.0 * 8.0 * 2000.0 + 14.0)
    );
    assert_eq!(p.flops.total, p.flops.by_class["double_any_width"]);
    assert_eq!(p.bytes["l1"], 3.0 * PEAK_THREADS * 8.0);
    assert!(!ncu::fp16_may_be_register_moves(&p.flops.by_class));
    assert_eq!(k.tensor_used(), Some(false));
}

#[test]
fn fp16_hfma2_peak_w_and_no_register_move_note() {
    // hfma2_peak_hier.csv was captured (commit ecd7442) from the first hfma2_peak, with 4
    // __half2 chains (a0..a3), not the current 8: per thread 4 × 4000 = 16,000 HFMA2, plus the
    // compiler's HFMA2.MMA that reloads the constant m once per 4-iteration unrolled body
    // (1,000, as in ffma_peak) and one HFMA2.MMA doing an add of the final sum: 17,001.
    // HADD2: 3 to seed a1..a3, 2 in the final sum; one FMUL (threadIdx.x · 1e-3).
    let k = kernel(&capture("hfma2_peak_hier.csv"), "hfma2_peak");
    assert_eq!(k.launches, 3);
    let per_thread = 4.0 * 4000.0 + 4000.0 / 4.0 + 1.0;
    assert_eq!(k.sass("hfma"), Some(3.0 * PEAK_THREADS * per_thread));
    assert_eq!(k.sass("hadd"), Some(3.0 * PEAK_THREADS * (3.0 + 2.0)));
    let p = k.to_point(None);
    assert_eq!(
        p.flops.by_class["half_any_width"],
        3.0 * PEAK_THREADS * (4.0 * per_thread + 2.0 * 5.0)
    );
    assert_eq!(p.flops.by_class["single_any_width"], 3.0 * PEAK_THREADS);
    // The store: one __half2 (4 bytes) per thread.
    assert_eq!(p.bytes["l1"], 3.0 * PEAK_THREADS * 4.0);
    // A genuine FP16 kernel: FP16 is ~100 % of the flops, the register-move note stays off
    // although the FMUL makes FP32 non-zero.
    assert!(p.flops.by_class["half_any_width"] / p.flops.total > 0.99);
    assert!(!ncu::fp16_may_be_register_moves(&p.flops.by_class));
}

#[test]
fn fp16_hfma2_peak_8_chains_matches_the_current_source_and_sass() {
    // The current hfma2_peak (8 chains), hfma2_peak 4000 2 (warm-up + 2 launches). Its sm_90 SASS
    // (hfma2_peak_sm90.sass): per 4-iteration body 32 HFMA2 + 1 HFMA2.MMA (the constant m);
    // the final sum of 8 is 3 HFMA2.MMA + 4 HADD2, the seeding 7 HADD2. Per thread:
    // 8 × 4000 + 4000 / 4 + 3 = 33,003 HFMA2 and 7 + 4 = 11 HADD2.
    let sass = std::fs::read_to_string(format!("{}/tests/fixtures/ncu/hfma2_peak_sm90.sass", env!("CARGO_MANIFEST_DIR"))).unwrap();
    let count = |op: &str| sass.lines().filter(|l| l.split_whitespace().nth(1) == Some(op)).count();
    assert_eq!((count("HFMA2"), count("HFMA2.MMA"), count("HADD2")), (40, 4, 11));
    let k = kernel(&capture("hfma2_peak8_hier.csv"), "hfma2_peak");
    assert_eq!(k.launches, 3);
    let per_thread = 8.0 * 4000.0 + 4000.0 / 4.0 + 3.0;
    assert_eq!(k.sass("hfma"), Some(3.0 * PEAK_THREADS * per_thread));
    assert_eq!(k.sass("hadd"), Some(3.0 * PEAK_THREADS * 11.0));
    let p = k.to_point(None);
    assert_eq!(
        p.flops.by_class["half_any_width"],
        3.0 * PEAK_THREADS * (4.0 * per_thread + 2.0 * 11.0)
    );
    assert!(!ncu::fp16_may_be_register_moves(&p.flops.by_class));
}

#[test]
fn cross_check_against_ncus_own_roofline_section() {
    // ncu's SOLFPRoofline rule on dgemm n = 1024 (its own run of the same kernel and size)
    // says "0% of this device's FP32 peak … and 14% of its FP64 peak".
    let sections = capture("dgemm_ncu_roofline_sections.csv");
    let rule = sections
        .rules
        .iter()
        .find(|r| r.name == "SOLFPRoofline")
        .expect("SOLFPRoofline rule");
    assert_eq!(rule.section, "SpeedOfLight_RooflineChart");
    let ncu_pct = rule.peak_percentages();
    assert_eq!(ncu_pct["FP32"], 0.0);
    // Ours, from the hierarchical capture: W = 2n³ per launch over T, against the FP64 peak at
    // the SM clock ncu measured (132 SMs × 128 flops/cycle on sm_90, as ncu's dfma peak_sustained).
    let k = kernel(&capture("dgemm_hier.csv"), "dgemm");
    let n: f64 = 1024.0;
    let gflops = k.launches as f64 * 2.0 * n * n * n / k.seconds().unwrap() / 1e9;
    let ghz = k.metrics["sm__cycles_elapsed.avg.per_second"] / 1e9;
    let peak = 132.0 * roofline::model::gpu::arch_rates((9, 0)).unwrap().fp64_flops * ghz;
    let ours = 100.0 * gflops / peak;
    assert!((ours - ncu_pct["FP64"]).abs() <= 1.0, "ours {ours:.2}% vs ncu {}%", ncu_pct["FP64"]);
    assert_eq!(k.to_point(None).flops.by_class["single_any_width"], 0.0);
}

#[test]
fn cross_check_against_ncus_roofline_section_metrics() {
    // The raw page of `--section SpeedOfLight_RooflineChart` with our metric list on dgemm
    // n = 1024 (warm-up + 1 launch): ncu's own achieved FP64 work per cycle,
    // derived__smsp__sass_…_dfma_pred_on_x2 (2 × DFMA per elapsed cycle; no DADD/DMUL here),
    // against ours, W = 2n³ over T × SM clock; ncu prints two decimals.
    let c = capture("dgemm_roofline_section_raw.csv");
    let k = kernel(&c, "dgemm");
    assert_eq!(k.launches, 2);
    let n: f64 = 1024.0;
    assert_eq!(k.to_point(None).flops.by_class["double_any_width"], 2.0 * 2.0 * n * n * n);
    for l in &c.launches {
        let m = |name: &str| l.metrics[name];
        assert_eq!(m("smsp__sass_thread_inst_executed_op_dadd_pred_on.sum.per_cycle_elapsed"), 0.0);
        assert_eq!(m("smsp__sass_thread_inst_executed_op_dmul_pred_on.sum.per_cycle_elapsed"), 0.0);
        let ncu_per_cycle = m("derived__smsp__sass_thread_inst_executed_op_dfma_pred_on_x2");
        let ours = 2.0 * n * n * n / (m("gpu__time_duration.sum") * m("sm__cycles_elapsed.avg.per_second"));
        assert!((ours / ncu_per_cycle - 1.0).abs() < 1e-5, "ours {ours} vs ncu {ncu_per_cycle}");
        // ncu's FP64 peak per cycle is our table's: 132 SMs × 128 flops.
        let rates = roofline::model::gpu::arch_rates((9, 0)).unwrap();
        assert_eq!(
            m("derived__sm__sass_thread_inst_executed_op_dfma_pred_on_x2"),
            132.0 * rates.fp64_flops
        );
    }
}

#[test]
fn smsp_sass_prefix_capture() {
    // triad 1048576 1 (warm-up + 1) captured with smsp__sass_* counters only: one DFMA per
    // element, W = 2n per launch.
    let k = kernel(&capture("triad_smsp_prefix.csv"), "triad");
    assert!(k.metrics.keys().all(|m| !m.starts_with("sm__sass")));
    assert_eq!(k.launches, 2);
    let p = k.to_point(None);
    assert_eq!(p.flops.by_class["double_any_width"], 2.0 * 2.0 * 1_048_576.0);
    assert_eq!(p.flops.by_class["single_any_width"], 0.0);
    assert!(!p.flops.by_class.contains_key("half_any_width"));
}

#[test]
fn two_kernel_process_critical_ranking() {
    // suite two_kernels 16777216 3: per iteration triad, dgemm (m = 2048), triad; with the
    // warm-up, 4 iterations: triad 8 launches of 2n flops, dgemm 4 launches of 2m³.
    let c = capture("two_kernels_hier.csv");
    let n: f64 = 16_777_216.0;
    let m: f64 = 2048.0;
    let ks = c.kernels();
    assert_eq!(
        ks.iter().map(|k| (k.name.as_str(), k.launches)).collect::<Vec<_>>(),
        [("triad", 8), ("dgemm", 4)]
    );
    // Launches alternate in the capture: triad, dgemm, triad, triad, dgemm, ...
    let order: Vec<&str> = c.launches.iter().take(4).map(|l| l.kernel.as_str()).collect();
    assert_eq!(order, ["triad", "dgemm", "triad", "triad"]);
    // Time per kernel summed by hand from the launch rows.
    let t = |name: &str| -> f64 {
        c.launches
            .iter()
            .filter(|l| l.kernel == name)
            .map(|l| l.metrics["gpu__time_duration.sum"])
            .sum()
    };
    let (t_triad, t_dgemm) = (t("triad"), t("dgemm"));
    let pts = ncu::points(&c, None, "two").unwrap();
    // Ranked by time: dgemm (the critical kernel) first.
    let names: Vec<&str> = pts.iter().map(|p| p.name.as_str()).collect();
    let expect = if t_dgemm > t_triad {
        ["dgemm", "triad"]
    } else {
        ["triad", "dgemm"]
    };
    assert_eq!(names, expect);
    assert_eq!(names[0], "dgemm");
    for (rank, p) in pts.iter().enumerate() {
        assert_eq!(p.extra["critical_rank"], rank as u64 + 1);
        let own = if p.name == "dgemm" { t_dgemm } else { t_triad };
        let share = p.extra["time_share"].as_f64().unwrap();
        assert!((share - own / (t_triad + t_dgemm)).abs() < 1e-12, "{}: {share}", p.name);
        assert!((p.seconds - own).abs() < 1e-15);
    }
    let shares: f64 = pts.iter().map(|p| p.extra["time_share"].as_f64().unwrap()).sum();
    assert!((shares - 1.0).abs() < 1e-12);
    let w = |name: &str| pts.iter().find(|p| p.name == name).unwrap().flops.total;
    assert_eq!(w("triad"), 8.0 * 2.0 * n);
    assert_eq!(w("dgemm"), 4.0 * 2.0 * m * m * m);
    // A filter keeps the ranking over the selected kernels only: one kernel, all the time.
    let only = ncu::points(&c, Some("triad"), "two").unwrap();
    assert_eq!(only.len(), 1);
    assert_eq!(only[0].extra["time_share"].as_f64(), Some(1.0));
}

#[test]
fn capture_without_the_needed_metrics_is_an_input_error() {
    // The sections-only capture has launches and rule rows but no metric values.
    let c = capture("dgemm_ncu_roofline_sections.csv");
    assert_eq!(c.launches.len(), 2);
    assert!(c.launches.iter().all(|l| l.metrics.is_empty()));
    let e = ncu::points(&c, None, "sections").unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("none of the metrics roofline needs"), "{e}");
    // A capture of unrelated metrics only.
    let text = "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\
                \"0\",\"k(int)\",\"sm__warps_active.avg.pct_of_peak_sustained_active\",\"%\",\"50\"\n";
    let c = ncu::parse(text, "x").unwrap();
    assert!(ncu::points(&c, None, "x").unwrap_err().to_string().contains("none of the metrics"));
}

#[test]
fn coalescing_sectors_per_request() {
    let unit = kernel(&capture("unit_store_instr.csv"), "strided_store");
    let strided = kernel(&capture("strided_store_instr.csv"), "strided_store");
    // 8-byte unit-stride stores: 32 threads × 8 B = 8 sectors; stride 33 doubles: 32 sectors.
    assert_eq!(unit.coalescing()["store_sectors_per_request"], 8.0);
    assert_eq!(strided.coalescing()["store_sectors_per_request"], 32.0);
    let ir = strided.to_point(None).extra["instruction_roofline"].clone();
    assert!(ir["warp_gips"].as_f64().unwrap() > 0.0);
    assert_eq!(ir["global_sectors_per_instruction"].as_f64().unwrap(), 32.0);
}

#[test]
fn fusion_halves_dram_traffic() {
    let un = kernel(&capture("cos_unfused_hier.csv"), "cos_pass");
    let fu = kernel(&capture("cos_fused_hier.csv"), "cos_cos_fused");
    // Unfused: two passes (x → tmp → y), twice the launches; fused: one pass.
    assert_eq!(un.launches, 2 * fu.launches);
    let per = |k: &ncu::KernelSummary| k.bytes()["dram"] / k.launches as f64;
    let ratio = 2.0 * per(&un) / per(&fu);
    assert!((1.9..2.1).contains(&ratio), "ratio {ratio}");
    // Same flops per element either way: two cosines.
    let fl = |k: &ncu::KernelSummary| k.to_point(None).flops.total;
    assert!((fl(&un) / fl(&fu) - 1.0).abs() < 0.01);
}

#[test]
fn mixed_output_ranking_and_filters() {
    let c = capture("cos_unfused_mixed.csv");
    assert!(
        c.other_lines.iter().any(|l| l.starts_with("cos_unfused 1048576")),
        "program output kept apart"
    );
    assert!(c.other_lines.iter().any(|l| l.starts_with("==PROF==")));
    let k = kernel(&c, "cos_pass");
    assert_eq!(k.launches, 6);
    let pts = ncu::points(&c, None, "mixed").unwrap();
    assert_eq!(pts[0].extra["critical_rank"], 1);
    assert!((pts[0].extra["time_share"].as_f64().unwrap() - 1.0).abs() < 1e-12);
    let e = ncu::points(&c, Some("no_such_kernel"), "mixed").unwrap_err().to_string();
    assert!(e.contains("no kernel matches") && e.contains("cos_pass"), "{e}");
}

#[test]
fn bad_inputs_are_errors_not_panics() {
    let nomatch = std::fs::read_to_string(format!("{}/tests/fixtures/ncu/nomatch.txt", env!("CARGO_MANIFEST_DIR"))).unwrap();
    assert!(ncu::parse(&nomatch, "x").unwrap_err().to_string().contains("matched nothing"));
    assert!(ncu::parse("hello\nworld\n", "x").unwrap_err().to_string().contains("not an ncu"));
    assert!(
        ncu::parse("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission", "x")
            .unwrap_err()
            .to_string()
            .contains("permission")
    );
    let header_only = "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n";
    assert!(ncu::parse(header_only, "x").is_err());
    let bad_id = "\"ID\",\"Kernel Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n\"x\",\"k\",\"m\",\"\",\"1\"\n";
    assert!(ncu::parse(bad_id, "x").is_err());
}

#[test]
fn unit_scaling() {
    assert_eq!(ncu::parse_value("1,234", "byte"), Some(1234.0));
    assert_eq!(ncu::parse_value("1.5", "Kbyte"), Some(1500.0));
    assert_eq!(ncu::parse_value("2", "Mbyte"), Some(2e6));
    assert_eq!(ncu::parse_value("185,312", "ns"), Some(185_312e-9));
    assert_eq!(ncu::parse_value("3", "usecond"), Some(3e-6));
    assert_eq!(ncu::parse_value("1.9", "Ghz"), Some(1.9e9));
    assert_eq!(ncu::parse_value("4", "Tbyte/second"), Some(4e12));
    assert_eq!(ncu::parse_value("n/a", "byte"), None);
    assert_eq!(ncu::parse_value("4.51", "%"), Some(4.51));
}

#[test]
fn peaks_capture_matches_the_architecture_table() {
    let c = capture("peaks.csv");
    let m = &c.launches[0].metrics;
    // 132 SMs × 64 FP64 lanes; 132 × 4 schedulers.
    assert_eq!(m["sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained"], 132.0 * 64.0);
    assert_eq!(m["sm__inst_executed.sum.peak_sustained"], 132.0 * 4.0);
    let rates = roofline::model::gpu::arch_rates((9, 0)).unwrap();
    assert_eq!(
        2.0 * m["sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained"],
        132.0 * rates.fp64_flops
    );
}

// ---- Instruction roofline (Ding & Williams) on captures with the ceilings' metrics ----
// `*_iroof.csv`: roofline's INSTRUCTION_METRICS on an H100 (132 SMs), made by
// scripts/gpu-capture-instr.sh; each suite run is a warm-up plus two timed launches, so three
// launches per kernel. Counters are summed over launches, per-cycle peaks and clocks averaged.

fn iroof(file: &str, name: &str) -> serde_json::Value {
    kernel(&capture(file), name).instruction_roofline().unwrap()
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs()
}

#[test]
fn instruction_roofline_dgemm_ceilings_intensities_and_binding() {
    let ir = iroof("dgemm_iroof.csv", "dgemm");
    let f = |p: &str| ir.pointer(p).and_then(|v| v.as_f64()).unwrap_or_else(|| panic!("{p}: {ir}"));
    // 3 launches × 113,639,424 warp instructions in 465,664 + 464,896 + 464,384 ns.
    let inst = 3.0 * 113_639_424.0;
    let t = (465_664.0 + 464_896.0 + 464_384.0) * 1e-9;
    assert_eq!(f("/warp_instructions"), inst);
    assert!(close(f("/warp_gips"), inst / t / 1e9, 1e-12));
    // Warp-GIPS ceiling: 528 warp instructions/cycle (4 per SM) × the mean SM clock.
    let sm_hz = (1_973_945_741.34 + 1_978_486_390.70 + 1_975_915_243.08) / 3.0;
    let warp = 528.0 * sm_hz / 1e9;
    assert!(close(f("/ceilings/warp_gips"), warp, 1e-12));
    assert!(warp > 1040.0 && warp < 1045.0);
    // Transaction ceilings: L1 2,112 sectors/cycle and shared 132 wavefronts/cycle at the L1
    // clock (here the SM's), L2 240 sectors/cycle at the LTS clock, DRAM 40 at the DRAM clock.
    let lts_hz = (1_701_106_377.13 + 1_701_303_087.14 + 1_701_609_013.23) / 3.0;
    let dram_hz = (2_618_636_613.52 + 2_618_832_599.12 + 2_618_936_052.92) / 3.0;
    assert!(close(f("/ceilings/transactions_gtxn_per_s/global_l1"), 2112.0 * sm_hz / 1e9, 1e-12));
    assert!(close(f("/ceilings/transactions_gtxn_per_s/shared"), 132.0 * sm_hz / 1e9, 1e-12));
    assert!(close(f("/ceilings/transactions_gtxn_per_s/l2"), 240.0 * lts_hz / 1e9, 1e-12));
    assert!(close(f("/ceilings/transactions_gtxn_per_s/dram"), 40.0 * dram_hz / 1e9, 1e-12));
    // Transactions and intensities per level.
    let l1 = 3.0 * (16_777_216.0 + 262_144.0);
    let shared = 100_716_773.0 + 4_647_202.0 + 100_718_560.0 + 4_666_150.0 + 100_725_551.0 + 4_664_891.0;
    let l2 = 13_160_731.0 + 12_810_600.0 + 12_711_063.0;
    let dram = 524_480.0 + 31_784.0 + 524_480.0 + 33_552.0 + 524_472.0 + 31_360.0;
    assert_eq!(f("/transactions/global_l1"), l1);
    assert_eq!(f("/transactions/shared"), shared);
    assert_eq!(f("/transactions/l2"), l2);
    assert_eq!(f("/transactions/dram"), dram);
    assert!(close(f("/instruction_intensity/global_l1"), inst / l1, 1e-12));
    assert!(close(f("/instruction_intensity/shared"), inst / shared, 1e-12));
    assert!(close(f("/instruction_intensity/dram"), inst / dram, 1e-12));
    // Shared: 1.078 instructions per wavefront × 260.9 Gwavefronts/s = 281 GIPS, below the
    // warp ceiling: dgemm's inner loop is bound by shared-memory transactions, at ~87 % of it.
    let att_shared = inst / shared * 132.0 * sm_hz / 1e9;
    assert!(close(f("/attainable_gips/shared"), att_shared, 1e-12));
    assert!(att_shared > 280.0 && att_shared < 283.0);
    assert_eq!(ir["binding"]["shared"], "transactions");
    // L1, L2 and DRAM intensities times their ceilings are above the warp ceiling.
    for lvl in ["global_l1", "l2", "dram"] {
        assert_eq!(ir["binding"][lvl], "warp_gips", "{lvl}");
        assert!(close(f(&format!("/attainable_gips/{lvl}")), warp, 1e-12));
    }
    assert_eq!(ir["bound_by"], "shared");
    let frac = (inst / t / 1e9) / att_shared;
    assert!(close(f("/fraction_of_attainable"), frac, 1e-12));
    assert!(frac > 0.85 && frac < 0.89, "{frac}");
    // Global pattern: 8-byte unit-stride loads and stores, 8 sectors per instruction: on the 8 wall.
    let global_inst = 3.0 * (2_097_152.0 + 32_768.0);
    assert_eq!(f("/global_memory/sectors_per_instruction"), l1 / global_inst);
    assert_eq!(l1 / global_inst, 8.0);
    assert_eq!(f("/global_memory/instruction_intensity"), 0.125);
    assert_eq!(ir["global_memory"]["position"]["on_wall"], 8.0);
    // Shared pattern: double accesses (2 wavefronts per warp at best) plus the store conflicts.
    let shared_inst = 3.0 * (50_331_648.0 + 2_097_152.0);
    assert!(close(f("/shared_memory/wavefronts_per_instruction"), shared / shared_inst, 1e-12));
    assert_eq!(ir["shared_memory"]["position"]["between"], serde_json::json!([1.0, 32.0]));
    let conflicts = 53_477.0 + 452_898.0 + 55_264.0 + 471_846.0 + 62_255.0 + 470_587.0;
    assert_eq!(f("/shared_memory/bank_conflicts"), conflicts);
    assert!(ir["notes"].as_array().unwrap().is_empty(), "{}", ir["notes"]);
}

#[test]
fn instruction_roofline_strided_store_is_dram_bound_on_the_32_wall() {
    let ir = iroof("strided_store_iroof.csv", "strided_store");
    let f = |p: &str| ir.pointer(p).and_then(|v| v.as_f64()).unwrap();
    let inst = 3.0 * 25_165_824.0;
    let t = (1_073_504.0 + 1_077_216.0 + 1_073_408.0) * 1e-9;
    let dram = 16_719_408.0 + 16_718_808.0 + 16_721_680.0 + 16_710_400.0 + 16_725_432.0 + 16_718_968.0;
    let dram_hz = (2_618_946_552.60 + 2_618_910_970.50 + 2_618_900_548.53) / 3.0;
    let att = inst / dram * 40.0 * dram_hz / 1e9;
    // 0.75 instructions per DRAM sector × 104.8 Gsectors/s = 78.8 GIPS: DRAM binds.
    assert!(close(f("/attainable_gips/dram"), att, 1e-12));
    assert!(att > 78.0 && att < 80.0);
    assert_eq!(ir["bound_by"], "dram");
    assert!(close(f("/fraction_of_attainable"), inst / t / 1e9 / att, 1e-12));
    // 16,777,216 store sectors over 524,288 store instructions per launch: 32, the wall of a
    // fully uncoalesced access (stride 33 doubles).
    assert_eq!(f("/global_memory/sectors_per_instruction"), 32.0);
    assert_eq!(ir["global_memory"]["position"]["on_wall"], 32.0);
    // No shared accesses: zero wavefronts, no intensity at that level, no shared pattern.
    assert_eq!(f("/transactions/shared"), 0.0);
    assert!(ir["instruction_intensity"].get("shared").is_none());
    assert!(ir["shared_memory"]["position"].is_null());
}

#[test]
fn instruction_roofline_shared_bank_conflict_walls() {
    // shared_stride: 1,000 loads per thread of buf[(tid · stride) % 1024], plus one store.
    // Stride 32: every thread of a warp in one bank, 32 wavefronts per load instruction.
    let c32 = kernel(&capture("shared_stride32_iroof.csv"), "shared_stride");
    assert_eq!(
        c32.metrics["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"] / c32.metrics["smsp__inst_executed_op_shared_ld.sum"],
        32.0
    );
    let ir = c32.instruction_roofline().unwrap();
    // Loads and the store together: (33,792,000 + 1,056) / (1,056,000 + 1,056) per launch.
    let wpi = (33_792_000.0 + 1_056.0) / (1_056_000.0 + 1_056.0);
    assert!(close(
        ir["shared_memory"]["wavefronts_per_instruction"].as_f64().unwrap(),
        wpi,
        1e-12
    ));
    assert_eq!(ir["shared_memory"]["position"]["on_wall"], 32.0);
    assert_eq!(ir["shared_memory"]["bank_conflicts"], 3.0 * 32_736_000.0);
    // Stride 1: conflict-free, one wavefront per instruction.
    let ir1 = iroof("shared_stride1_iroof.csv", "shared_stride");
    assert_eq!(ir1["shared_memory"]["wavefronts_per_instruction"], 1.0);
    assert_eq!(ir1["shared_memory"]["position"]["on_wall"], 1.0);
    assert_eq!(ir1["shared_memory"]["bank_conflicts"], 0.0);
    // Both bound by shared transactions (the same 5,250,432 instructions per launch; 32× the
    // wavefronts); the conflicted kernel takes 131,808 + 131,680 + 131,680 ns vs 3 × 8,896.
    assert_eq!(ir["bound_by"], "shared");
    assert!(ir["attainable_gips"]["shared"].as_f64().unwrap() < ir1["attainable_gips"]["shared"].as_f64().unwrap() / 20.0);
}

#[test]
fn instruction_roofline_without_ceiling_metrics_is_null_with_notes() {
    // The first instruction captures (dgemm_instr.csv) have no *.peak_sustained metrics and no
    // clocks: ceilings, attainable GIPS and the binding are null, each with a note; the
    // transactions and intensities are still there.
    let ir = iroof("dgemm_instr.csv", "dgemm");
    assert!(ir["ceilings"]["warp_gips"].is_null());
    for lvl in ["global_l1", "shared", "l2", "dram"] {
        assert!(ir["ceilings"]["transactions_gtxn_per_s"][lvl].is_null(), "{lvl}");
        assert!(ir["attainable_gips"][lvl].is_null(), "{lvl}");
        assert!(ir["transactions"][lvl].as_f64().unwrap() > 0.0, "{lvl}");
    }
    assert!(ir["bound_by"].is_null() && ir["fraction_of_attainable"].is_null());
    let notes: Vec<&str> = ir["notes"].as_array().unwrap().iter().filter_map(|n| n.as_str()).collect();
    assert!(
        notes.iter().any(|n| n.contains("sm__inst_executed.sum.peak_sustained")),
        "{notes:?}"
    );
    assert!(notes.iter().any(|n| n.contains("lts__t_sectors.sum.peak_sustained")), "{notes:?}");
    assert!(notes.iter().any(|n| n.contains("dram__sectors.sum.peak_sustained")), "{notes:?}");
    // dgemm_instr.csv's first launch: 100,714,098 + 4,657,492 shared wavefronts.
    assert!(ir["transactions"]["shared"].as_f64().unwrap() > 100_714_098.0 + 4_657_492.0);
}

#[test]
fn hfma2_is_dual_issued_to_both_fma_pipes() {
    // fp16_pipes.csv (H100, hfma2_peak iters 4000, the warm-up launch): every HFMA2
    // warp instruction is counted on FMAheavy and on FMAlite, and both pipes are busy ~99 %
    // of the cycles while the FMA pipe's instruction rate is ~50 % of its peak; FFMA splits
    // between the two pipes (ffma_pipes.csv: heavy + lite = fma, ~85 % busy). Hence the sm_90
    // FP16 table rate = FP32's: 0.5 HFMA2 warp instructions per SMSP and cycle × 32 lanes × 4
    // flops × 4 SMSPs = 256 flops per SM and cycle.
    let h = &capture("fp16_pipes.csv").launches[0];
    let m = |k: &str| h.metrics[k];
    assert!(close(
        m("sm__inst_executed_pipe_fmaheavy.sum"),
        m("sm__inst_executed_pipe_fma.sum"),
        1e-3
    ));
    assert!(close(
        m("sm__inst_executed_pipe_fmalite.sum"),
        m("sm__inst_executed_pipe_fma.sum"),
        1e-3
    ));
    assert!(m("sm__pipe_fmaheavy_cycles_active.avg.pct_of_peak_sustained_active") > 95.0);
    assert!(m("sm__pipe_fmalite_cycles_active.avg.pct_of_peak_sustained_active") > 95.0);
    assert!(m("sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active") < 52.0);
    // 1,081,817,088 FMA-pipe warp instructions over 4,148,592 cycles × 528 SMSPs: 0.494.
    let per_smsp_cycle = m("sm__inst_executed_pipe_fma.sum") / (m("sm__cycles_elapsed.max") * 528.0);
    assert!(per_smsp_cycle > 0.47 && per_smsp_cycle <= 0.5, "{per_smsp_cycle}");
    assert_eq!(0.5 * 32.0 * 4.0 * 4.0, roofline::model::gpu::arch_rates((9, 0)).unwrap().fp16_flops);
    let f = &capture("ffma_pipes.csv").launches[0];
    assert_eq!(
        f.metrics["sm__inst_executed_pipe_fmaheavy.sum"] + f.metrics["sm__inst_executed_pipe_fmalite.sum"],
        f.metrics["sm__inst_executed_pipe_fma.sum"]
    );
}
