//! The GPU model on real PyTorch captures (tests/fixtures/ncu/torch_*.csv, gemm_set_*.csv, made by
//! scripts/gpu-capture-torch.sh on an H100): kernel identity and display names, the GPU's roofs
//! in every imported report, and the warning for a point above its roof.

use assert_cmd::Command;
use std::collections::BTreeSet;

use roofline::__private::gpu::ncu;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/ncu/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn capture(name: &str) -> ncu::Capture {
    let path = fixture(name);
    ncu::parse(&std::fs::read_to_string(&path).unwrap(), &path).unwrap()
}

/// The Kernel Name column, launch by launch, as ncu printed it.
fn launch_names(c: &ncu::Capture) -> Vec<String> {
    c.launches.iter().map(|l| l.kernel.clone()).collect()
}

#[test]
fn each_distinct_kernel_is_listed_once_with_a_distinct_readable_name() {
    for file in [
        "torch_app_mangled.csv",
        "torch_app_demangled.csv",
        "gemm_set_mangled.csv",
        "gemm_set_demangled.csv",
    ] {
        let c = capture(file);
        let distinct: BTreeSet<String> = launch_names(&c).into_iter().collect();
        let ks = c.kernels();
        // One row per distinct kernel name, every launch in exactly one row.
        assert_eq!(ks.len(), distinct.len(), "{file}");
        assert_eq!(ks.iter().map(|k| k.launches).sum::<usize>(), c.launches.len(), "{file}");
        for k in &ks {
            let n = c.launches.iter().filter(|l| l.kernel == k.full_name).count();
            assert_eq!(k.launches, n, "{file}: {}", k.name);
        }
        // Display names: distinct, shortened, never mangled, never a bare `*>` tail.
        let names: BTreeSet<&str> = ks.iter().map(|k| k.name.as_str()).collect();
        assert_eq!(names.len(), ks.len(), "{file}: {names:?}");
        for k in &ks {
            assert!(!k.name.starts_with("_Z"), "{file}: {}", k.name);
            assert!(k.name.chars().next().unwrap().is_ascii_alphabetic(), "{file}: {}", k.name);
            assert!(k.name.len() <= 130, "{file}: {}", k.name);
        }
    }
}

#[test]
fn the_same_program_mangled_and_demangled_groups_alike() {
    // app.py ran twice under ncu, once per --print-kernel-base: launch N is the same kernel.
    let (m, d) = (capture("torch_app_mangled.csv"), capture("torch_app_demangled.csv"));
    assert_eq!(m.launches.len(), 37);
    assert_eq!(d.launches.len(), m.launches.len());
    let group = |c: &ncu::Capture| -> Vec<usize> {
        let names = launch_names(c);
        names.iter().map(|n| names.iter().position(|x| x == n).unwrap()).collect()
    };
    assert_eq!(group(&m), group(&d));
    // ATen kernels that a shortened name would merge under `*>`: each its own row, named by what differs.
    let names: Vec<String> = m.kernels().into_iter().map(|k| k.name).collect();
    for want in [
        "native::vectorized_elementwise_kernel<…MulFunctor<double>…>",
        "native::reduce_kernel<…MeanOps<…>…>",
        "native::reduce_kernel<…NormTwoOps<…>…>",
        "native::elementwise_kernel<…DivFunctor<…>…>",
        "native::distribution_elementwise_grid_stride_kernel<…double…>",
        "native::distribution_elementwise_grid_stride_kernel<…uniform_and_transform<…>…>",
        "radix_sort::DeviceRadixSortOnesweepKernel<…>",
        "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT",
    ] {
        assert!(names.iter().any(|n| n == want), "{want} not in {names:#?}");
    }
    // FP64 and FP32 work never share a row: every kernel's W is one precision or none.
    for k in m.kernels() {
        let w = k.flops_by_precision();
        let d = w.get("double_any_width").copied().unwrap_or(0.0);
        let s = w.get("single_any_width").copied().unwrap_or(0.0);
        assert!(d == 0.0 || s == 0.0, "{}: fp64 {d} and fp32 {s} mixed", k.name);
    }
}

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

/// `gpu import … --json` with an empty cache (no `gpu ceilings` of this GPU).
fn import(file: &str, extra: &[&str], cache: &std::path::Path) -> (serde_json::Value, String) {
    let o = roofline()
        .args(["gpu", "import", &fixture(file), "--json"])
        .args(extra)
        .env("XDG_CACHE_HOME", cache)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    (
        serde_json::from_slice(&o.stdout).unwrap(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

#[test]
fn an_import_carries_the_gpus_roofs_from_the_capture() {
    let cache = tempfile::tempdir().unwrap();
    let (r, err) = import("torch_app_mangled.csv", &[], cache.path());
    assert_eq!(r["machine"]["name"], "NVIDIA H100 80GB HBM3");
    assert_eq!(r["machine"]["sms"], 132);
    let c = &r["ceilings"];
    // DRAM: dram__bytes.sum.peak_sustained (1,280 B/cycle) × the DRAM clock (~2.61 GHz).
    let dram = c["bandwidth_gbs"]["dram"].as_f64().unwrap();
    assert!((dram / (1280.0 * 2.6117) - 1.0).abs() < 0.01, "dram {dram}");
    // FP64 from 8,448 DFMA/cycle × 2 × the captured SM clock (1.9–2.0 GHz).
    let fp64 = c["compute_gflops"]["double.gpu.fma"].as_f64().unwrap();
    assert!((fp64 / (2.0 * 8448.0) - 1.94).abs() < 0.06, "fp64 {fp64}");
    // Tensor bf16: dense, half ncu's sparse 1,081,344 ops/cycle; FP64 DMMA as captured.
    let bf16 = c["compute_gflops"]["tensor_bf16.gpu.fma"].as_f64().unwrap();
    assert!((bf16 / fp64 - 1_081_344.0 / 2.0 / (2.0 * 8448.0)).abs() < 1e-6);
    let dmma = c["compute_gflops"]["tensor_fp64.gpu.fma"].as_f64().unwrap();
    assert!((dmma / fp64 - 33_792.0 / (2.0 * 8448.0)).abs() < 1e-6);
    assert!(c["bandwidth_gbs"]["l2"].as_f64().unwrap() > dram);
    let prov = r["machine"]["provenance"].to_string();
    assert!(prov.contains("peak_sustained"), "{prov}");
    assert!(!err.contains("roofs missing"), "{err}");
    // Each point was read against them: a bound, and the bf16 GEMM against the bf16 roof.
    let gemm = r["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_NNT")
        .unwrap();
    let f = gemm["roof_fraction"].as_f64().unwrap();
    let by_hand = gemm["gflops"].as_f64().unwrap() / bf16;
    assert!((f - by_hand).abs() < 1e-9 && f < 1.0, "{f} vs {by_hand}");
}

#[test]
fn a_capture_without_roofs_says_what_is_missing_and_gpu_names_it() {
    let cache = tempfile::tempdir().unwrap();
    // An older capture: no peak metrics, no device attributes.
    let (r, err) = import("triad_hier_details.csv", &[], cache.path());
    assert!(err.contains("roofs missing: FP64, FP32, tensor, HBM/DRAM, L2, L1"), "{err}");
    assert!(err.contains("--gpu NAME"), "{err}");
    assert!(r["ceilings"].is_null());
    // --gpu H200: the datasheet table, rescaled to the captured SM clock; HBM as printed.
    let (r, _) = import("triad_hier_details.csv", &["--gpu", "H200"], cache.path());
    let c = &r["ceilings"];
    assert_eq!(c["bandwidth_gbs"]["dram"], 4800.0);
    let clock = r["machine"]["peaks"]["at_sm_ghz"].as_f64().unwrap();
    let fp64 = c["compute_gflops"]["double.gpu.fma"].as_f64().unwrap();
    // The capture has no SM count: the table's 132 SMs with the sm_90 rates at that clock.
    assert!((fp64 - 132.0 * 128.0 * clock).abs() < 1e-6, "{fp64} at {clock}");
    assert!(r["machine"]["provenance"].to_string().contains("named by --gpu"));
    // An unknown name: exit 2 with the known ones.
    let o = roofline()
        .args(["gpu", "import", &fixture("triad_hier_details.csv"), "--gpu", "Voodoo5"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("h200"));
}

#[test]
fn a_point_above_its_roof_is_flagged_in_terminal_json_and_html() {
    // An H200 run where `gpu ceilings` measured bf16 tensor 616 TFLOP/s while cuBLAS reached
    // more. A cached ceiling that low for this GPU puts the bf16 GEMM above its roof.
    let cache = tempfile::tempdir().unwrap();
    let dir = cache.path().join("roofline");
    std::fs::create_dir_all(&dir).unwrap();
    // A recorded H100 document (the cache is what `gpu ceilings` writes), its rows cut to a
    // bf16 tensor ceiling of 61.6 TFLOP/s and a DRAM one.
    let mut ceilings: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("gpu_ceilings_h100.json")).unwrap()).unwrap();
    assert_eq!(ceilings["machine"]["name"], "NVIDIA H100 80GB HBM3");
    let mut bf16 = ceilings["compute"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["precision"] == "tensor_bf16")
        .unwrap()
        .clone();
    bf16["gflops"] = 61_600.0.into();
    let mut dram = ceilings["bandwidth"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["level"] == "dram")
        .unwrap()
        .clone();
    dram["gbs"] = 3000.0.into();
    ceilings["compute"] = serde_json::json!([bf16]);
    ceilings["bandwidth"] = serde_json::json!([dram]);
    std::fs::write(dir.join("gpu-ceilings-nvidia-h100-80gb-hbm3.json"), ceilings.to_string()).unwrap();
    let run = |json: bool| {
        let mut c = roofline();
        c.args(["gpu", "import", &fixture("gemm_set_mangled.csv")])
            .env("XDG_CACHE_HOME", cache.path());
        if json {
            c.arg("--json");
        }
        c.output().unwrap()
    };
    let o = run(false);
    let text = String::from_utf8_lossy(&o.stdout);
    let warn: Vec<&str> = text.lines().filter(|l| l.starts_with("warning: above its roof")).collect();
    // bf16 (nvjet tst) and fp16 (nvjet hsh) GEMMs run above 61.6 TFLOP/s; fp16 has no
    // ceiling, so it is read against its theoretical roof and stays under it. The bf16
    // GEMM's NVTX region (`gemm_bf16`, that kernel alone) is above the same roof.
    assert_eq!(warn.len(), 2, "{text}");
    assert!(warn[1].contains("[gemm_bf16]"), "{}", warn[1]);
    assert!(
        warn[0].contains("nvjet_sm90_tst") && warn[0].contains("61600.0000 GFLOP/s"),
        "{}",
        warn[0]
    );
    let r: serde_json::Value = serde_json::from_slice(&run(true).stdout).unwrap();
    assert_eq!(r["ceilings"]["kind"], "mixed");
    let p = r["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"].as_str().unwrap().starts_with("nvjet_sm90_tst"))
        .unwrap();
    let achieved = p["gflops"].as_f64().unwrap();
    let note = p["provenance"]["notes"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|n| n.as_str().filter(|n| n.starts_with("above its roof")))
        .unwrap();
    assert!(note.contains(&format!("{achieved:.4} GFLOP/s")), "{note}");
    assert!(p["roof_fraction"].as_f64().unwrap() > 1.0);
    assert_eq!(p["extra"]["model"]["above_roof"], note);
    // HTML: the warning in the point's card data (the page builds the card from it, as a
    // `warn` paragraph), both numbers in it.
    let out = tempfile::tempdir().unwrap();
    let json = out.path().join("g.json");
    std::fs::write(&json, serde_json::to_vec(&r).unwrap()).unwrap();
    let html = out.path().join("g.html");
    let o = roofline()
        .args(["plot", json.to_str().unwrap(), "-o", html.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let h = std::fs::read_to_string(&html).unwrap();
    let w = h.split("\"warn\":\"").nth(1).expect("a warning in the HTML's card data");
    let w = &w[..w.find('"').unwrap_or(w.len())];
    assert!(
        w.contains("61600.0000 GFLOP/s") && w.contains(&format!("{achieved:.4}")),
        "{}",
        &w[..300.min(w.len())]
    );
}

#[test]
fn a_gpu_reports_plot_leaves_out_the_empty_cache_aware_panel() {
    // GPU points count bytes per level (L1, L2, DRAM), none core-side: the cache-aware panel
    // would be empty. It is left out with one line; the classic and hierarchical panels stay.
    let cache = tempfile::tempdir().unwrap();
    let (r, _) = import("torch_app_mangled.csv", &[], cache.path());
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    std::fs::write(&json, serde_json::to_vec(&r).unwrap()).unwrap();
    let svg = dir.path().join("t.svg");
    let o = roofline()
        .args(["plot", json.to_str().unwrap(), "-o", svg.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    let left: Vec<&str> = err.lines().filter(|l| l.contains("left out")).collect();
    assert_eq!(
        left,
        ["roofline: Cache-aware roofline (core-side AI) left out: no point can be placed in it (no core bytes)"]
    );
    let s = std::fs::read_to_string(&svg).unwrap();
    assert!(s.contains("width=\"1520\""), "two panels of 760 px");
    assert!(s.contains("Hierarchical roofline") && s.contains("Classic roofline") && !s.contains("Cache-aware roofline"));
    // The hierarchical panel draws the GPU's L1, L2 and HBM roofs.
    for roof in ["L1", "L2", "DRAM"] {
        assert!(s.contains(&format!("{roof} ")), "{roof} roof missing");
    }
}
