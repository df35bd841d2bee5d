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
    let rates = roofline::gpu::device::arch_rates((9, 0)).unwrap();
    assert_eq!(
        2.0 * m["sm__sass_thread_inst_executed_op_dfma_pred_on.sum.peak_sustained"],
        132.0 * rates.fp64_flops
    );
}
