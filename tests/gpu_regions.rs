//! NVTX regions, regimes, fusion and tensor ceilings on real H100 captures (no GPU needed): NVTX region points
//! (`tests/fixtures/ncu/nvtx_app.csv`: a CUDA program with nested nvtxRangePush ranges and a
//! domain of its own; `torch_nvtx_nested.csv`: eager PyTorch with nested
//! torch.cuda.nvtx ranges, two iterations), compute/bandwidth/overhead regimes, fusion
//! chains, cuBLASLt tensor ceilings against cuBLAS rates measured in the same run, and the
//! `compare` caveat. Made by `scripts/gpu-capture-nvtx.sh`.

use assert_cmd::Command;
use roofline::__private::gpu::ncu;
use roofline::__private::gpu::regions;
use std::collections::BTreeMap;

fn fixture(name: &str) -> String {
    format!("{}/tests/fixtures/ncu/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn capture(name: &str) -> ncu::Capture {
    ncu::parse(&std::fs::read_to_string(fixture(name)).unwrap(), name).unwrap()
}

fn display(cap: &ncu::Capture) -> BTreeMap<String, String> {
    cap.kernels().into_iter().map(|k| (k.full_name, k.name)).collect()
}

/// `roofline gpu import FILE --gpu H100 --json` with no ceilings cache (theoretical roofs,
/// the default launch floor).
fn import_json(name: &str) -> serde_json::Value {
    let cache = tempfile::tempdir().unwrap();
    let o = Command::cargo_bin("roofline")
        .unwrap()
        .env("XDG_CACHE_HOME", cache.path())
        .args(["gpu", "import", &fixture(name), "--gpu", "H100 SXM", "--json"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    serde_json::from_slice(&o.stdout).unwrap()
}

fn point<'a>(r: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    r["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no point {name}"))
}

#[test]
fn c_program_ranges_become_region_points() {
    let cap = capture("nvtx_app.csv");
    // nvtx_app.cu: run{triad ×2, cos_chain: cos_pass ×2, tiny: triad ×8}, app:solver{dgemm},
    // then 10 empty launches outside any range.
    let rs = regions::regions(&cap);
    let paths: Vec<&str> = rs.iter().map(|r| r.path.as_str()).collect();
    assert_eq!(paths, ["run", "run/triad", "run/cos_chain", "run/tiny", "app:solver"]);
    let len = |p: &str| rs.iter().find(|r| r.path == p).unwrap().launches.len();
    assert_eq!((len("run"), len("run/triad"), len("run/cos_chain"), len("run/tiny")), (12, 2, 2, 8));
    assert!(cap.launches.iter().filter(|l| l.nvtx.is_empty()).all(|l| l.kernel == "empty_probe"));
    let pts = regions::region_points(&cap, &display(&cap));
    let w = |p: &str| pts.iter().find(|x| x.extra.to_json()["region"] == p).unwrap().flops.total;
    // Inclusive: `run` holds exactly the work of its three sub-ranges.
    let parts = w("run/triad") + w("run/cos_chain") + w("run/tiny");
    assert!((w("run") - parts).abs() <= 1e-9 * parts, "{} vs {parts}", w("run"));
    // triad: one DFMA per element, n = 2^24, two launches; the domain range holds dgemm 1024: 2n³.
    assert_eq!(w("run/triad"), 2.0 * 2.0 * (1u64 << 24) as f64);
    assert_eq!(w("app:solver"), 2.0 * 1024f64.powi(3));
    // The kernels under `run`, each once with its launch count.
    let extra = pts[0].extra.to_json();
    let ks = extra["kernels"].as_array().unwrap();
    let launches: BTreeMap<&str, u64> = ks
        .iter()
        .map(|k| (k["name"].as_str().unwrap(), k["launches"].as_u64().unwrap()))
        .collect();
    assert_eq!(launches, BTreeMap::from([("triad", 10), ("cos_pass", 2)]));
    let share: f64 = ks.iter().map(|k| k["time_share"].as_f64().unwrap()).sum();
    assert!((share - 1.0).abs() < 1e-9);
}

#[test]
fn torch_nested_ranges_two_iterations() {
    let cap = capture("torch_nvtx_nested.csv");
    let rs = regions::regions(&cap);
    let get = |p: &str| rs.iter().find(|r| r.path == p).unwrap_or_else(|| panic!("no region {p}"));
    for layer in ["layer1", "layer2"] {
        // Two steps: each layer range ran twice, with the loss or the other layer between.
        assert_eq!(get(&format!("step/{layer}")).instances, 2);
        let norm = get(&format!("step/{layer}/norm"));
        // mean, sub, norm, div, mul: five kernels per iteration.
        assert_eq!(norm.launches.len(), 10);
    }
    let pts = regions::region_points(&cap, &display(&cap));
    let p = |path: &str| pts.iter().find(|x| x.extra.to_json()["region"] == path).unwrap();
    // The linear range: x0 (4096×1024) @ W1 (1024×1024) in bf16 on the tensor cores, twice:
    // 2 · 2·4096·1024·1024 tensor ops.
    let lin = p("step/layer1/linear");
    assert_eq!(lin.flops.by_class["tensor"], 2.0 * 2.0 * 4096.0 * 1024.0 * 1024.0);
    let norm = p("step/layer1/norm");
    assert_eq!(norm.extra.to_json()["kernels"].as_array().unwrap().len(), 5);
    assert!(!norm.flops.by_class.get("tensor").is_some_and(|t| *t > 0.0));
    // `step` holds every launch that has a range, and their GPU time.
    let ranged: f64 = cap
        .launches
        .iter()
        .filter(|l| !l.nvtx.is_empty())
        .map(|l| l.metrics["gpu__time_duration.sum"])
        .sum();
    assert!((p("step").seconds - ranged).abs() < 1e-12);
}

#[test]
fn regions_regimes_and_fusion_in_the_imported_report() {
    let r = import_json("nvtx_app.csv");
    let regime = |name: &str| point(&r, name)["extra"]["regime"].as_str().unwrap().to_string();
    assert_eq!(regime("dgemm"), "compute");
    assert_eq!(regime("cos_pass"), "bandwidth");
    assert_eq!(regime("empty_probe"), "overhead");
    // Eight 256-element triads: 2.6 µs per launch against the 2.1 µs floor.
    assert_eq!(regime("[run/tiny]"), "overhead");
    assert_eq!(regime("[run/triad]"), "bandwidth");
    // Fusion: the cos chain (x → t → y) is a candidate; no chain holds the compute-bound dgemm,
    // and the tiny launches (no bytes to save) are not listed.
    let chains = r["fusion"].as_array().unwrap();
    let cos = chains.iter().find(|c| c["region"] == "run/cos_chain").unwrap();
    assert_eq!(cos["kernels"], serde_json::json!(["cos_pass", "cos_pass"]));
    assert!(chains.iter().all(|c| c["region"] != "run/tiny" && c["region"] != "app:solver"));
    let (x, y, hi) = (
        cos["dram_bytes"].as_f64().unwrap(),
        cos["fused_bytes"].as_f64().unwrap(),
        cos["fused_bytes_high"].as_f64().unwrap(),
    );
    // n = 2^24 doubles: each pass reads and writes 128 MiB; fused: x read once, y written once.
    assert!(y <= hi && hi <= x, "{y} {hi} {x}");
    assert!(y > 0.9 * 2.0 * 8.0 * (1u64 << 24) as f64 * 0.5, "{y}");
    let hbm = cos["hbm_gbs"].as_f64().unwrap();
    assert!((cos["fused_seconds"].as_f64().unwrap() - y / (hbm * 1e9)).abs() < 1e-15);
    let summary = cos["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("2 kernels (launches 2–3) move ") && summary.contains("at the HBM roof"),
        "{summary}"
    );
}

#[test]
fn torch_normalization_chain_is_one_fusion_candidate() {
    // The eager PyTorch workload: the per-row normalization is five kernels in the
    // `normalize` range; the GEMM range holds no chain with the GEMM in it.
    let r = import_json("torch_app_mangled.csv");
    let chains = r["fusion"].as_array().unwrap();
    let norm: Vec<&serde_json::Value> = chains.iter().filter(|c| c["region"] == "normalize").collect();
    assert_eq!(norm.len(), 1, "{chains:?}");
    assert_eq!(norm[0]["kernels"].as_array().unwrap().len(), 5);
    let ids: Vec<u64> = norm[0]["launch_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_u64().unwrap())
        .collect();
    assert!(ids.windows(2).all(|w| w[1] == w[0] + 1), "{ids:?}");
    for c in chains {
        assert!(
            c["kernels"]
                .as_array()
                .unwrap()
                .iter()
                .all(|k| !k.as_str().unwrap().starts_with("nvjet"))
        );
        assert!(c["fused_bytes"].as_f64().unwrap() <= c["dram_bytes"].as_f64().unwrap());
    }
    // Every kernel and region point has a regime; the cuBLAS GEMM is compute-bound.
    for p in r["points"].as_array().unwrap() {
        assert!(p["extra"]["regime"].is_string(), "{}", p["name"]);
    }
    let gemm = r["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"].as_str().unwrap().starts_with("nvjet"))
        .unwrap();
    assert_eq!(gemm["extra"]["regime"], "compute");
}

#[test]
fn cublaslt_tensor_ceilings_bound_the_same_runs_cublas_rates() {
    // `gpu ceilings` and `gemms.py 8192 20 time` (torch → cuBLAS) in one run on the same GPU.
    let c: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture("gpu_ceilings_h100_cublaslt.json")).unwrap()).unwrap();
    let native = std::fs::read_to_string(fixture("torch_gemm_native_session2.txt")).unwrap();
    let mut checked = 0;
    for line in native.lines().filter(|l| l.starts_with("gemm ")) {
        let ty = line.split_whitespace().nth(1).unwrap();
        let tflops: f64 = line.rsplit("tflops=").next().unwrap().parse().unwrap();
        let Some(ceiling) = c["compute"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|x| x["precision"] == format!("tensor_{ty}"))
            .filter_map(|x| x["gflops"].as_f64())
            .reduce(f64::max)
        else {
            continue; // fp32 (no tensor cores)
        };
        assert!(
            ceiling >= tflops * 1e3,
            "{ty}: ceiling {ceiling} GFLOP/s under cuBLAS {tflops} TFLOP/s"
        );
        checked += 1;
    }
    assert_eq!(checked, 4, "bf16, fp16, tf32, fp64");
    // The roofs a report takes from it: the better of WMMA and cuBLASLt per type.
    let typed: roofline::__private::gpu::GpuCeilings = serde_json::from_value(c.clone()).expect("gpu ceilings read back typed");
    let roofs = roofline::__private::gpu::roofs_from_gpu_ceilings(&typed).unwrap();
    let wmma = c["compute"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["kernel"] == "bf16_mma_peak")
        .unwrap()["gflops"]
        .as_f64()
        .unwrap();
    assert!(roofs.compute_gflops["tensor_bf16.gpu.fma"] > wmma);
    assert!(roofs.compute_gflops.contains_key("tensor_fp8.gpu.fma"));
}

#[test]
fn compare_says_when_the_gpu_side_is_not_near_cublas() {
    // `gpu run dgemm_tiled` (our tiled kernel, cuBLASLt beside it at the same size) renamed
    // to the CPU suite's dgemm; `gpu run dgemm` is cuBLAS itself and gets no caveat.
    let dir = tempfile::tempdir().unwrap();
    let cpu = format!("{}/tests/fixtures/reports/several.json", env!("CARGO_MANIFEST_DIR"));
    for (name, caveat) in [("gpu_run_dgemm_tiled.json", true), ("gpu_run_dgemm_cublas.json", false)] {
        let mut r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(fixture(name)).unwrap()).unwrap();
        r["points"][0]["name"] = "dgemm".into();
        let path = dir.path().join(name);
        std::fs::write(&path, r.to_string()).unwrap();
        let o = Command::cargo_bin("roofline")
            .unwrap()
            .args(["compare", &cpu])
            .arg(&path)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let out = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            out.contains("note: GPU dgemm") && out.contains("of cuBLASLt"),
            caveat,
            "{name}: {out}"
        );
    }
}

#[test]
fn html_lists_region_kernels_and_fusion_candidates() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    std::fs::write(&json, import_json("torch_nvtx_nested.csv").to_string()).unwrap();
    let html = dir.path().join("t.html");
    let o = Command::cargo_bin("roofline")
        .unwrap()
        .args(["plot", json.to_str().unwrap(), "-o", html.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let h = std::fs::read_to_string(&html).unwrap();
    // The cards are built in the page from each dot's data: its kernels and its regime.
    assert!(h.contains("\"kern\":[[\""), "no region kernel list");
    assert!(h.contains("\"reg\":[\"compute\","), "no GPU regime");
    // The five-kernel normalization chain of each layer, in each of the two steps.
    assert_eq!(h.matches("[step/layer1/norm] 5 kernels (launches").count(), 2);
}
