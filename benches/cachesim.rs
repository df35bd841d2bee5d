//! Cache simulator speed: accesses per second on a streaming triad and a random walk, through
//! a three-level hierarchy of this kind of machine's geometry (Zen 4: 32 KiB/8, 1 MiB/8, 32 MiB/16).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use roofline::counters::cachesim::{AccessKind, CacheHierarchy, LevelConfig, Replacement};

fn hierarchy(repl: Replacement) -> CacheHierarchy {
    CacheHierarchy::new(vec![
        LevelConfig::new("L1", 32 << 10, 8).with_replacement(repl),
        LevelConfig::new("L2", 1 << 20, 8).with_replacement(repl),
        LevelConfig::new("L3", 32 << 20, 16).with_replacement(repl),
    ])
    .unwrap()
}

const N: u64 = 1 << 20;

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("cachesim");
    g.throughput(Throughput::Elements(3 * N));
    for (name, repl) in [("lru", Replacement::Lru), ("plru", Replacement::TreePlru)] {
        let mut h = hierarchy(repl);
        g.bench_function(format!("triad_{name}"), |b| {
            b.iter(|| {
                for i in 0..N {
                    h.access(0x1000_0000 + 8 * i, 8, AccessKind::Load);
                    h.access(0x2000_0000 + 8 * i, 8, AccessKind::Load);
                    h.access(0x3000_0000 + 8 * i, 8, AccessKind::Store);
                }
            })
        });
        let mut h = hierarchy(repl);
        g.bench_function(format!("random_walk_{name}"), |b| {
            let mut state = 1u64;
            b.iter(|| {
                for _ in 0..3 * N {
                    state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                    h.access((state >> 20) & ((64 << 20) - 8), 8, AccessKind::Load);
                }
            })
        });
    }
    g.finish();
}

criterion_group! {
    name = benches;
    // criterion's plotters backend panics without system fonts; the numbers are what matter.
    config = Criterion::default().without_plots();
    targets = bench
}
criterion_main!(benches);
