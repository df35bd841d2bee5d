//! Cache simulator speed: accesses per second on a streaming triad and a random walk, through
//! a three-level hierarchy of this kind of machine's geometry (Zen 4: 32 KiB/8, 1 MiB/8, 32 MiB/16).

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use roofline::__private::cachesim::{AccessKind, CacheHierarchy, LevelConfig, Replacement};

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

    // The address stream of tests/cachesim_cachegrind.rs's C program at n = 4 Mi (init loop +
    // triad: 25.2 M data references) through cachegrind's two levels (D1 32 KiB/8, LL 32 MiB/16):
    // compare with `valgrind --tool=cachegrind --cache-sim=yes --D1=32768,8,64
    // --LL=33554432,16,64 ./triad 4194304 8192 1` minus the same under `--tool=none`.
    let mut g = c.benchmark_group("cachesim_vs_cachegrind");
    let n: u64 = 4 << 20;
    g.throughput(Throughput::Elements(6 * n));
    g.sample_size(10);
    g.bench_function("init_and_triad_4Mi", |b| {
        b.iter(|| {
            let mut h = CacheHierarchy::new(vec![LevelConfig::new("L1", 32 << 10, 8), LevelConfig::new("L2", 32 << 20, 16)]).unwrap();
            let (a, bb, cc) = (0x1000_0000u64, 0x3000_0000u64, 0x5000_0000u64);
            for i in 0..n {
                h.access(a + 8 * i, 8, AccessKind::Store);
                h.access(bb + 8 * i, 8, AccessKind::Store);
                h.access(cc + 8 * i, 8, AccessKind::Store);
            }
            for i in 0..n {
                h.access(bb + 8 * i, 8, AccessKind::Load);
                h.access(cc + 8 * i, 8, AccessKind::Load);
                h.access(a + 8 * i, 8, AccessKind::Store);
            }
            h.traffic()
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    // criterion's plotters backend panics without system fonts; the numbers are what matter.
    config = Criterion::default().without_plots();
    targets = bench
}
criterion_main!(benches);
