//! The non-streaming suite through its public API: every kernel × every runnable variant
//! verifies against its scalar f64 reference at awkward sizes; sizes and refusals behave.

use roofline::kernels::{Variant, api, check, rng::fresh_seed, suite};

/// Small sizes that are not multiples of any vector width, per kernel.
fn small_sizes(name: &str) -> &'static [usize] {
    match name {
        "stencil2d" => &[3, 11, 30],
        "dgemm" | "sgemm" => &[1, 9, 23],
        "normalize_naive" | "normalize_fused" => &[1, 3],
        _ => &[1, 7, 61],
    }
}

#[test]
fn every_kernel_and_runnable_variant_verifies() {
    let seed = fresh_seed();
    for k in suite::kernels() {
        for &v in k.variants() {
            if !check::runnable(v) {
                continue;
            }
            for &n in small_sizes(k.name()) {
                let mut inst = k
                    .instance(n, v, seed ^ n as u64)
                    .unwrap_or_else(|e| panic!("{} {v} n={n}: {e}", k.name()));
                inst.verify().unwrap_or_else(|e| panic!("seed {seed}: {} {v} n={n}: {e}", k.name()));
                assert_eq!(
                    inst.counts(),
                    k.counts(n, v),
                    "{} {v} n={n}: instance and kernel counts differ",
                    k.name()
                );
            }
        }
    }
}

#[test]
fn counts_have_work_and_traffic_and_widths_shift_the_classes() {
    for k in suite::kernels() {
        let n = *small_sizes(k.name()).last().unwrap();
        let scalar = k.counts(n, Variant::Scalar);
        assert!(
            scalar.flops_total() > 0 && scalar.core_load_bytes > 0 && scalar.core_store_bytes > 0 && scalar.dram_bytes > 0,
            "{}",
            k.name()
        );
        assert!(
            scalar.flops.keys().all(|c| c.key().starts_with("scalar")),
            "{}: {:?}",
            k.name(),
            scalar.flops
        );
        let wide = k.counts(n, Variant::Avx512);
        assert!(
            wide.flops.keys().any(|c| c.key().starts_with("packed512")),
            "{}: {:?}",
            k.name(),
            wide.flops
        );
        // The width does not change what is stored (gemm excepted: its tiles and their edge
        // copies differ by variant).
        if !k.name().ends_with("gemm") {
            assert_eq!(wide.core_store_bytes, scalar.core_store_bytes, "{}", k.name());
        }
    }
}

#[test]
fn size_for_bytes_fits_and_bad_sizes_are_refused() {
    for k in suite::kernels() {
        for bytes in [16u64 << 10, 1 << 20, 64 << 20] {
            let n = k.size_for_bytes(bytes);
            assert!(n >= 1, "{}", k.name());
            assert!(k.working_set_bytes(n) <= bytes, "{}: n={n} for {bytes} B", k.name());
        }
        let v = Variant::Scalar;
        let e = k.instance(0, v, 1).err().unwrap_or_else(|| panic!("{} accepted size 0", k.name()));
        assert!(!e.contains('\n'), "{e}");
        assert!(
            k.instance(usize::MAX / 2, v, 1).is_err(),
            "{} accepted an impossible size",
            k.name()
        );
    }
}

#[test]
fn registry_lists_every_suite_kernel_once() {
    let names: Vec<&str> = api::all().iter().map(|k| k.name()).collect();
    for k in suite::kernels() {
        assert_eq!(names.iter().filter(|n| **n == k.name()).count(), 1, "{}", k.name());
        assert!(api::find(k.name()).is_some());
    }
    assert!(api::find("no-such-kernel").is_none());
}
