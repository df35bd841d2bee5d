//! Roofs per precision in reports: a bf16 point is read against its machine's bf16 roofs (the
//! AMX tile roof), the plot draws one family of compute roofs per precision of its points,
//! and `roofline compare` of a CPU and a GPU report of bf16 GEMMs reads the CPU's AMX bf16
//! roof against the GPU's bf16 tensor roof (a real H200 capture of the suite's bf16 GEMM).

use assert_cmd::Command;
use std::path::Path;

use roofline::__private::plot::{plot_size, svg_sized};
use roofline::{PlotKind, Report, View};

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

fn dir() -> &'static str {
    env!("CARGO_MANIFEST_DIR")
}

/// A CPU report (the `several.json` fixture's machine and roofs) with an AMX bf16 roof added
/// as `roofline ceilings` writes it, and two points: a bf16 GEMM (class `tile_bf16`) and a
/// double one, both compute-bound. `bf16_gflops` is the bf16 point's rate.
fn cpu_report(bf16_gflops: f64) -> serde_json::Value {
    let text = std::fs::read_to_string(Path::new(dir()).join("tests/fixtures/reports/several.json")).unwrap();
    let mut r: serde_json::Value = serde_json::from_str(&text).unwrap();
    r["ceilings"]["compute_gflops"]["bf16.amx.fma"] = 2800.0.into();
    let point = |name: &str, class: &str, w: f64, gflops: f64| {
        let t = w / gflops / 1e9;
        serde_json::json!({
            "name": name, "provenance": {"flops": "analytic", "bytes": {"core": "analytic", "dram": "analytic"}, "seconds": "native", "notes": []},
            "flops": {"total": w, "effective": null, "by_class": {class: w}},
            // AI core 17, DRAM 343: far right of every ridge (compute-bound).
            "bytes": {"core": w / 17.0, "dram": w / 343.0},
            "threads": 1, "seconds": t, "seconds_samples": [t, t, t], "gflops": null, "gbs": {}, "ai": {},
            "bound": null, "roof_fraction": null, "extra": {}
        })
    };
    let w = 2.0 * 2048f64.powi(3);
    r["points"] = serde_json::json!([
        point("bf16_gemm", "tile_bf16", w, bf16_gflops),
        point("dgemm", "packed512_double", w, 120.0)
    ]);
    r
}

#[test]
fn plot_draws_one_family_of_roofs_per_precision() {
    let r: Report = serde_json::from_value(cpu_report(1400.0)).unwrap();
    for kind in [PlotKind::Dram, PlotKind::Carm] {
        let v = View::new(vec![("cpu".into(), r.clone())], None, kind);
        // The bf16 point against the AMX roof (50 %), the double one against the FP64 peak.
        let fractions: Vec<f64> = v.reports[0].report.points.iter().map(|p| p.roof_fraction.unwrap()).collect();
        assert!((fractions[0] - 0.5).abs() < 1e-9, "{fractions:?}");
        assert!((fractions[1] - 120.0 / 160.0).abs() < 1e-9, "{fractions:?}");
        let (svg, panels) = svg_sized(&v, plot_size(kind)).unwrap();
        let labels: Vec<&str> = panels[0].roofs.iter().filter(|r| r.compute).map(|r| r.label.as_str()).collect();
        assert!(labels.contains(&"BF16 AMX tiles 2800 GFLOP/s"), "{labels:?}");
        // With two families drawn, the FP64 roofs name their precision too.
        assert!(labels.contains(&"FP64 AVX-512 FMA 160 GFLOP/s"), "{labels:?}");
        assert!(svg.contains("compute roofs per precision: FP64, BF16"), "no legend of the families");
        // The two families never share a colour.
        let colour = |prefix: &str| panels[0].roofs.iter().find(|r| r.label.starts_with(prefix)).unwrap().color;
        assert_ne!(colour("BF16 AMX"), colour("FP64 AVX-512 FMA"));
    }
    // Only the double point: one family, labels as before (no precision prefix, no legend line).
    let mut only: Report = r.clone();
    only.points.remove(0);
    let v = View::new(vec![("cpu".into(), only)], None, PlotKind::Dram);
    let (svg, panels) = svg_sized(&v, plot_size(PlotKind::Dram)).unwrap();
    assert!(panels[0].roofs.iter().any(|r| r.label == "AVX-512 FMA 160 GFLOP/s"));
    assert!(!panels[0].roofs.iter().any(|r| r.label.contains("BF16")));
    assert!(!svg.contains("compute roofs per precision"));
}

#[test]
fn compare_reads_the_amx_bf16_roof_against_the_gpu_bf16_tensor_roof() {
    let tmp = tempfile::tempdir().unwrap();
    let gpu = tmp.path().join("gpu.json");
    let o = roofline()
        .args([
            "gpu",
            "import",
            &format!("{}/tests/fixtures/ncu/bf16_gemm_hier.csv", dir()),
            "--gpu",
            "h200",
            "-o",
        ])
        .arg(&gpu)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let gpu_doc: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&gpu).unwrap()).unwrap();
    let tensor_peak = gpu_doc["machine"]["peaks"]["tensor_gflops"]["bf16"].as_f64().unwrap();
    let bf16_rate = 900.0 + f64::from(std::process::id() % 1000);
    let cpu = tmp.path().join("cpu.json");
    std::fs::write(&cpu, serde_json::to_string(&cpu_report(bf16_rate)).unwrap()).unwrap();
    let svg = tmp.path().join("cmp.svg");
    let o = roofline()
        .arg("compare")
        .arg(&cpu)
        .arg(&gpu)
        .args(["--pair", "bf16_gemm=bf16_wmma_gemm", "--json", "-o"])
        .arg(&svg)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let rows = v["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{v}");
    let row = &rows[0];
    assert_eq!(row["kernel"], "bf16_gemm=bf16_wmma_gemm");
    assert_eq!(row["cpu_precision"], "bf16");
    assert_eq!(row["gpu_precision"], "tensor_bf16");
    assert_eq!(row["same_precision"], true);
    assert_eq!(row["cpu_roof"]["key"], "bf16.amx.fma");
    assert_eq!(row["cpu_roof"]["gflops"], 2800.0);
    assert_eq!(row["gpu_roof"]["key"], "tensor_bf16.gpu.fma");
    assert!((row["gpu_roof"]["gflops"].as_f64().unwrap() - tensor_peak).abs() < 1e-6 * tensor_peak);
    let f = row["cpu_roof_fraction"].as_f64().unwrap();
    assert!((f - bf16_rate / 2800.0).abs() < 1e-9, "{f}");
    // The chart draws the CPU's AMX bf16 roof and the GPU's bf16 tensor roof.
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(text.contains("BF16 AMX tiles 2800 GFLOP/s"), "no CPU AMX roof in the chart");
    assert!(text.contains("GPU BF16 tensor"), "no GPU tensor roof in the chart");
    // The table names both roofs.
    let o = roofline()
        .arg("compare")
        .arg(&cpu)
        .arg(&gpu)
        .args(["--pair", "bf16_gemm=bf16_wmma_gemm"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("precision: CPU BF16 (roof BF16 AMX tiles 2800 GFLOP/s)"), "{table}");
    assert!(table.contains("vs GPU BF16 tensor (roof GPU BF16 tensor"), "{table}");
    assert!(!table.contains("different precisions"), "{table}");
    // Pairing the bf16 GPU GEMM with the CPU's double GEMM says the precisions differ.
    let o = roofline()
        .arg("compare")
        .arg(&cpu)
        .arg(&gpu)
        .args(["--pair", "dgemm=bf16_wmma_gemm"])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&o.stdout);
    assert!(table.contains("the two sides ran different precisions"), "{table}");
    // A malformed --pair is a user error.
    let o = roofline()
        .arg("compare")
        .arg(&cpu)
        .arg(&gpu)
        .args(["--pair", "bf16_gemm"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
}
