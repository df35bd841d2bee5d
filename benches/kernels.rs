//! Criterion benches: every suite kernel at an L1-, an L2- and a DRAM-sized working set,
//! with the widest variant this CPU runs, throughput in analytic flops (or bytes for kernels
//! without flops). Run: `cargo bench --bench kernels` (filter: `-- dgemm`).
//!
//! Sizes: 16 KiB (L1), 512 KiB (L2), 256 MiB (DRAM) of working set, converted per kernel by
//! `Kernel::size_for_bytes`; dgemm/sgemm use orders 32, 128 and 1024 instead (their DRAM-size
//! run is the n=1024 OpenBLAS comparison point; a 256 MiB gemm would take minutes).

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use roofline::kernels::{api, check, suite::ALL_VARIANTS};

fn sizes(name: &str) -> [(&'static str, Option<usize>, u64); 3] {
    if name.ends_with("gemm") {
        [("l1", Some(32), 0), ("l2", Some(128), 0), ("dram", Some(1024), 0)]
    } else {
        [("l1", None, 16 << 10), ("l2", None, 512 << 10), ("dram", None, 256 << 20)]
    }
}

fn bench_suite(c: &mut Criterion) {
    for k in api::all() {
        let Some(v) = ALL_VARIANTS
            .iter()
            .copied()
            .filter(|v| k.variants().contains(v) && check::runnable(*v))
            .max()
        else {
            continue;
        };
        let mut group = c.benchmark_group(k.name());
        for (label, fixed, bytes) in sizes(k.name()) {
            let n = fixed.unwrap_or_else(|| k.size_for_bytes(bytes));
            let counts = k.counts(n, v);
            if counts.flops_total() > 0 {
                group.throughput(Throughput::Elements(counts.flops_total()));
            } else {
                group.throughput(Throughput::Bytes(counts.core_bytes()));
            }
            if label == "dram" {
                group.sample_size(10);
            }
            // A kernel whose unit this CPU lacks (the AMX GEMMs) says why and is skipped.
            let mut inst = match k.instance(n, v, 1) {
                Ok(i) => i,
                Err(e) => {
                    eprintln!("skipping {}: {e}", k.name());
                    continue;
                }
            };
            group.bench_with_input(BenchmarkId::new(format!("{v}/{label}"), n), &n, |b, _| b.iter(|| inst.run()));
        }
        group.finish();
    }
}

criterion_group!(benches, bench_suite);
criterion_main!(benches);
