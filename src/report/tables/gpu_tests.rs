use super::*;
use crate::report::tables::tests::point;

fn h200() -> GpuMachine {
    let r: serde_json::Value = serde_json::from_str(include_str!("../../../tests/fixtures/ncu/gpu_run_dgemm.json")).unwrap();
    serde_json::from_value(r["machine"].clone()).unwrap()
}

#[test]
fn the_machine_with_unknown_figures_as_dashes() {
    let t = machine_table(&h200());
    assert!(
        t.starts_with("GPU 0: NVIDIA H200 (compute capability 9.0)\n  SMs 132   SM clock max 1.980 GHz"),
        "{t}"
    );
    assert!(
        t.contains("  peaks (dense, at 1.980 GHz): FP64 33.5 TFLOP/s  FP32 66.9  FP16 133.8\n"),
        "{t}"
    );
    assert!(t.contains("    tensor bf16    1070.5 TFLOP/s\n    tensor fp16 "), "{t}");
    assert!(t.ends_with("  bandwidth: HBM 4814 GB/s  L2 -  L1 -\n"), "{t}");
    let mut m = h200();
    m.sm_clock_max_ghz = None;
    m.memory_bus_bits = None;
    m.l2_bytes = None;
    m.peaks.fp64_gflops = None;
    m.peaks.tensor_gflops = [("a_long_key".to_string(), 123456789.0)].into();
    m.warnings = vec!["no ncu peaks".into()];
    let t = machine_table(&m);
    assert!(
        t.contains("SM clock max - GHz") && t.contains("x - bits   L2 -\n") && t.contains("FP64 - TFLOP/s"),
        "{t}"
    );
    // A key wider than its five columns pushes its figure right.
    assert!(t.contains("    tensor a_long_key 123456.8 TFLOP/s\n"), "{t}");
    assert!(t.ends_with("  warning: no ncu peaks\n"), "{t}");
}

#[test]
fn ceilings_list_compute_bandwidth_and_the_sweep() {
    let c: GpuCeilings = serde_json::from_str(include_str!("../../../tests/fixtures/ncu/gpu_ceilings_h100.json")).unwrap();
    let t = ceilings_table(&c);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], "GPU ceilings on NVIDIA H100 80GB HBM3 (SM clock measured 2.031 GHz)");
    assert_eq!(lines[2], "  fp64           dfma_peak           32155        34318   93.7  ");
    assert_eq!(lines.len(), 2 + c.compute.len() + 1 + c.bandwidth.len() + 1 + c.sweep.len(), "{t}");
    assert!(t.contains("\n  dram           triad             3.0 GiB       3053\n"), "{t}");
    assert!(
        t.contains("\n                     1.0 MiB      x200              137                        9530\n"),
        "{t}"
    );
    let mut c = c;
    c.sweep.clear();
    c.compute.truncate(1);
    c.compute[0].peak_at_clock_gflops = None;
    c.compute[0].pct_of_peak_at_clock = None;
    c.compute[0].detail = Some("FMA per SM per clock".into());
    c.launch_floor_s = Some(2.5e-6);
    c.notes = vec!["clocks locked".into()];
    let t = ceilings_table(&c);
    assert!(
        t.contains("  fp64           dfma_peak           32155            -      -  FMA per SM per clock\n"),
        "{t}"
    );
    assert!(
        t.contains("  launch floor   empty_kernel   2.50 us per launch (CUDA events)\n  note: clocks locked\n  bandwidth "),
        "{t}"
    );
    assert!(!t.contains("sweep (load)"), "{t}");
}

#[test]
fn kernels_then_regions_with_their_kernels_then_the_warnings() {
    let mut k = point("gemm_kernel", 2e9, &[("dram", 1e8), ("l2", 2e8)], vec![1e-3]);
    k.flops.by_class = [("double_any_width".to_string(), 1.9e9), ("half_any_width".to_string(), 1e8)].into();
    for (key, v) in [
        ("launches", serde_json::json!(3)),
        ("time_share", serde_json::json!(0.456)),
        ("tensor_used", serde_json::json!(false)),
        ("coalescing", serde_json::json!({"sectors_per_request": 4.25, "ignored": "text"})),
        ("regime", serde_json::json!("memory")),
        ("library", serde_json::json!("cuBLAS")),
        ("library_gflops", serde_json::json!(1000.0)),
    ] {
        k.extra.insert(key.into(), v);
    }
    k.provenance.notes.push("above its roof: 2000 GFLOP/s > 1800".into());
    let mut r = point("step", 2e9, &[("dram", 1e8)], vec![2e-3]);
    r.extra.insert("region".into(), serde_json::json!("step"));
    r.extra.insert("instances".into(), serde_json::json!(2));
    r.extra.insert(
        "kernels".into(),
        serde_json::json!([{"name": "gemm_kernel", "launches": 3, "time_share": 0.75}]),
    );
    let t = points_table(&[r, k]);
    let lines: Vec<&str> = t.lines().collect();
    assert!(lines[0].starts_with("kernel              launches   GFLOP"), "{t}");
    assert_eq!(
        lines[1],
        "gemm_kernel                3   2.000  (1.900/-/0.100/-)      0.100    0.200        -      1.000    2000.0      100.0    20.00  \
         46% of time; no tensor work; sectors per request 4.2; FP16 count may be HFMA2 register moves; memory-bound; 2.00x of cuBLAS"
    );
    assert_eq!(lines[2], "");
    assert!(lines[3].starts_with("NVTX regions"), "{t}");
    assert!(lines[4].starts_with("region              launches"), "{t}");
    assert!(
        lines[5].starts_with("step                       -   2.000  (-/-/-/-)      0.100 "),
        "{t}"
    );
    assert_eq!(
        lines[6..],
        [
            "  step (2 instance(s)):",
            "       75.0%    3 x  gemm_kernel",
            "warning: above its roof: 2000 GFLOP/s > 1800"
        ]
    );
}

#[test]
fn fusion_candidates_name_their_region() {
    assert_eq!(fusion_table(&[]), "");
    let chain = |region: &str, kernels: &[&str]| crate::schema::report::FusionChain {
        region: region.into(),
        kernels: kernels.iter().map(|k| k.to_string()).collect(),
        launch_ids: Vec::new(),
        dram_bytes: 0.0,
        seconds: 0.0,
        fused_bytes: 0.0,
        fused_bytes_high: 0.0,
        fused_seconds: None,
        hbm_gbs: None,
        summary: "2 kernels move 1 GB".into(),
    };
    assert_eq!(
        fusion_table(&[chain("", &["a", "b"]), chain("step", &["c"])]),
        "\nfusion candidates (consecutive memory-bound kernels, same stream and NVTX range):\n  \
         2 kernels move 1 GB\n    a -> b\n  [step] 2 kernels move 1 GB\n    c\n"
    );
}
