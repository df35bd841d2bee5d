//! Peak loops (flops/s per ISA, FMA) and the plateau detector.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use roofline::kernels::Precision;
use roofline::kernels::peak::{PeakMode, PeakSpec};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("peak");
    g.sample_size(10)
        .measurement_time(std::time::Duration::from_millis(800))
        .warm_up_time(std::time::Duration::from_millis(200));
    for s in PeakSpec::all()
        .into_iter()
        .filter(|s| s.supported() && s.precision == Precision::F64 && s.mode == PeakMode::Fma)
    {
        let rounds = 100_000;
        g.throughput(Throughput::Elements(s.flops_per_round() * rounds));
        g.bench_function(format!("double/{}/fma", s.isa.name()), |b| b.iter(|| s.run(rounds)));
    }
    g.finish();
    let pts: Vec<(u64, f64)> = (0..60)
        .map(|i| {
            (
                4096u64 << (i / 4),
                if i < 20 {
                    300.0
                } else if i < 40 {
                    120.0
                } else {
                    25.0
                } * (1.0 + 0.01 * (i % 3) as f64),
            )
        })
        .collect();
    c.bench_function("plateau/detect/60", |b| {
        b.iter(|| roofline::__private::detect_plateau(std::hint::black_box(&pts)))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
