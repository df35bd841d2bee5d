//! GPU tests that need an NVIDIA GPU (the device host): each skips cleanly, with a message,
//! where no driver is present, so they also run (as no-ops) in CI.
//!
//! On a GPU host without cargo, build here with `cargo test --release --no-run --test
//! gpu_device`, copy the test executable and `target/release/roofline`, and run
//! `ROOFLINE_BIN=./roofline ./gpu_device-* --test-threads=1` (scripts/gpu-test.sh does it).

use roofline::__private::gpu::{Suite, ceilings, device, ncu, run};

fn gpu() -> bool {
    if device::driver_present() {
        true
    } else {
        eprintln!("skipped: no NVIDIA driver (libcuda) on this machine");
        false
    }
}

#[test]
fn device_query_and_theoretical_peaks() {
    if !gpu() {
        return;
    }
    let ctx = device::open(0).unwrap();
    let m = device::query(&ctx, None).unwrap();
    assert!(m.sms > 0 && m.memory_bytes > 0, "{m:?}");
    eprintln!(
        "{} cc {} SMs {} clock {:?} GHz peaks {:?}",
        m.name, m.compute_capability, m.sms, m.sm_clock_max_ghz, m.peaks
    );
    if m.compute_capability == "9.0" {
        assert!(m.peaks.fp64_gflops.unwrap() > 20_000.0);
        assert!(m.peaks.dram_gbs.unwrap() > 2_000.0);
    }
}

#[test]
fn suite_compiles_and_runs_with_correct_rates() {
    if !gpu() {
        return;
    }
    let ctx = device::open(0).unwrap();
    let suite = Suite::compile(ctx).unwrap();
    let clock = ceilings::measure_sm_clock(&suite, 4).unwrap();
    assert!(clock > 0.3 && clock < 3.5, "SM clock {clock} GHz");
    for k in run::KERNELS {
        let n = if k.name.starts_with("dgemm") { 1024 } else { 1 << 22 };
        let (_, p) = run::run(k, n, 5, 0, None).unwrap();
        assert!(p.seconds > 0.0, "{}", k.name);
        assert!(p.gflops.unwrap() > 1.0, "{}: {:?}", k.name, p.gflops);
        eprintln!(
            "{:<16} n={n:<9} {:>9.3} ms {:>9.1} GFLOP/s {:>8.1} GB/s",
            k.name,
            p.seconds * 1e3,
            p.gflops.unwrap(),
            p.gbs["dram"]
        );
        // dgemm is cuBLAS's and says so; dgemm_tiled carries cuBLAS's rate at its size.
        if k.name.starts_with("dgemm") {
            assert!(p.extra.to_json()["library_gflops"].as_f64().unwrap() > 1000.0, "{}", k.name);
        }
        if k.name == "dgemm" {
            assert!(p.provenance.notes.iter().any(|n| n.contains("cuBLAS")), "{:?}", p.provenance.notes);
        }
    }
}

#[test]
fn quick_ceilings_are_sane() {
    if !gpu() {
        return;
    }
    let c = ceilings::measure(
        &ceilings::Options {
            quick: true,
            ordinal: 0,
            energy: None,
        },
        &|s| eprintln!("{s}"),
    )
    .unwrap();
    let clock = c.sm_clock_ghz_measured.unwrap();
    assert!(clock > 0.3);
    let fp64 = c.compute.iter().find(|x| x.precision == "fp64").unwrap();
    let pct = fp64.pct_of_peak_at_clock.unwrap();
    assert!(pct > 50.0 && pct < 105.0, "FP64 at {pct}% of the peak at the measured clock");
    let triad = c.bandwidth.iter().find(|b| b.kernel == "triad").unwrap();
    assert!(triad.gbs > 500.0, "{triad:?}");
    for x in &c.compute {
        eprintln!(
            "{:<12} {:>10.0} GFLOP/s {:>6.1} % of peak at {clock:.3} GHz",
            x.precision,
            x.gflops,
            x.pct_of_peak_at_clock.unwrap_or(f64::NAN)
        );
    }
    for b in &c.bandwidth {
        eprintln!("{:<8} {:<12} {:>8.0} GB/s", b.level, b.kernel, b.gbs);
    }
    // FP16 (HFMA2) against the corrected sm_90 table (FP32's flop rate): near 100 %, where
    // the old table (twice FP32) read 49 %.
    let fp16 = c.compute.iter().find(|x| x.precision == "fp16").unwrap();
    let pct16 = fp16.pct_of_peak_at_clock.unwrap();
    if c.machine.compute_capability == "9.0" {
        assert!(pct16 > 80.0 && pct16 < 105.0, "FP16 at {pct16}% of the peak at the measured clock");
    }
    // FFMA unrolled 32-fold: no longer issue-bound by its loop (82-84 % before).
    let fp32 = c.compute.iter().find(|x| x.precision == "fp32").unwrap();
    let pct32 = fp32.pct_of_peak_at_clock.unwrap();
    if c.machine.compute_capability == "9.0" {
        assert!(pct32 > 90.0 && pct32 < 105.0, "FP32 at {pct32}% of the peak at the measured clock");
    }
    // cuBLASLt's bf16 GEMM beside the WMMA loop, above it (H100: ~780 vs ~620 TFLOP/s); the
    // launch floor of an empty kernel between 0.5 and 20 µs.
    if roofline::__private::gpu::blas::present() {
        let rate = |k: &str| {
            c.compute
                .iter()
                .find(|x| x.precision == "tensor_bf16" && x.kernel == k)
                .map(|x| x.gflops)
        };
        let (wmma, lt) = (
            rate("bf16_mma_peak").unwrap(),
            rate("cublaslt_gemm").expect("a cuBLASLt bf16 ceiling"),
        );
        assert!(lt > wmma, "cuBLASLt {lt} vs WMMA {wmma}");
    }
    let floor = c.launch_floor_s.unwrap();
    assert!(floor > 0.5e-6 && floor < 20e-6, "launch floor {floor} s");
    // L2 and shared memory: load, copy and triad each measured, and the L2 rates above HBM's.
    let hbm = triad.gbs;
    for level in ["l2", "shared"] {
        for kernel in ["load", "copy", "triad"] {
            let b = c
                .bandwidth
                .iter()
                .find(|b| b.level == level && b.kernel == kernel)
                .unwrap_or_else(|| panic!("no {level} {kernel} ceiling"));
            assert!(b.gbs > hbm, "{level} {kernel}: {} GB/s not above the HBM triad {hbm}", b.gbs);
        }
    }
    // The sweep rotates buffers while the set fits in L2 (so the launches read DRAM), and
    // the L2-resident passes beat the rotated reads at a set that fits.
    let l2 = c.machine.l2_bytes.unwrap_or(0);
    for s in &c.sweep {
        eprintln!(
            "sweep {:>12} B  rotated x{:<4} {:>8.0} GB/s   L2-resident passes {:>8.0} GB/s",
            s.working_set_bytes,
            s.rotated_buffers,
            s.gbs,
            s.gbs_l2_resident.unwrap_or(f64::NAN)
        );
        if s.working_set_bytes <= l2 {
            assert!(s.rotated_buffers >= 4, "{s:?}");
        }
    }
    let fits = c.sweep.iter().rfind(|s| s.working_set_bytes * 4 <= l2).unwrap();
    assert!(fits.gbs_l2_resident.unwrap() > fits.gbs, "{fits:?}");
}

#[test]
fn ncu_measure_of_our_own_run() {
    if !gpu() {
        return;
    }
    let Ok(bin) = std::env::var("ROOFLINE_BIN") else {
        eprintln!("skipped: set ROOFLINE_BIN to the roofline binary to profile it under ncu");
        return;
    };
    let metrics = ncu::HIERARCHICAL_METRICS.join(",");
    let cmd: Vec<String> = [bin.as_str(), "gpu", "run", "triad", "--size", "4194304", "--repeat", "2"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let cap = match ncu::run(&metrics, Some("triad"), &cmd) {
        Ok(c) => c,
        Err(e) if e.to_string().contains("not on PATH") => {
            eprintln!("skipped: {e}");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let k = cap.kernels().into_iter().find(|k| k.name == "triad").unwrap();
    // 2 warm-up + 2 timed launches, each 2n flops.
    assert_eq!(k.launches, 4);
    assert_eq!(k.to_point(None).flops.total, 4.0 * 2.0 * 4_194_304.0);
}
