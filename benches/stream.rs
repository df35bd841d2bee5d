//! Streaming kernels at an L1-, an L2- and a DRAM-sized working set, widest variant
//! (criterion reports bytes/s from the kernels' core-side counts).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use roofline::kernels::Variant;

fn bench(c: &mut Criterion) {
    let sizes = [("L1", 16u64 << 10), ("L2", 512 << 10), ("DRAM", 128 << 20)];
    for k in roofline::kernels::stream::kernels() {
        let Some(v) = k.variants().iter().rev().copied().find(|v: &Variant| v.supported()) else {
            continue;
        };
        let mut g = c.benchmark_group(k.name());
        g.sample_size(10)
            .measurement_time(std::time::Duration::from_millis(800))
            .warm_up_time(std::time::Duration::from_millis(200));
        for (level, bytes) in sizes {
            let n = k.size_for_bytes(bytes);
            let Ok(mut inst) = k.instance(n, v, 42) else { continue };
            g.throughput(Throughput::Bytes(inst.counts().core_bytes()));
            g.bench_function(format!("{level}/{v}"), |b| b.iter(|| inst.run()));
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
