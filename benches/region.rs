//! Start+stop overhead of one region per thread (`Session::begin` + `Session::stop` around
//! nothing). Targets: ≤ 1 µs with read(), < 100 ns with rdpmc.
//!
//! - `analytic`: the floor, clock reads and bookkeeping only;
//! - `software`: the read() path, 1 group of 3 software events (2 read()s per region);
//! - `perf`: the platform's hardware events, rdpmc where the kernel allows
//!   (`/sys/bus/event_source/devices/cpu/rdpmc`), skipped without a hardware PMU.
//!
//! Run: `cargo bench --bench region`.

use criterion::{Criterion, criterion_group, criterion_main};
use roofline::{Backend, Session};

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("region_start_stop");
    let mut sessions: Vec<(&str, Session)> = vec![("analytic", Session::new(Backend::Analytic).unwrap())];
    match Session::software() {
        Ok(s) => sessions.push(("software_read", s)),
        Err(e) => eprintln!("software events unavailable: {e}"),
    }
    match Session::new(Backend::Perf) {
        Ok(s) => {
            let name = if s.uses_rdpmc() { "perf_rdpmc" } else { "perf_read" };
            sessions.push((name, s));
        }
        Err(e) => eprintln!("hardware perf session skipped: {}", e.to_string().lines().next().unwrap_or("")),
    }
    for (name, mut s) in sessions {
        g.bench_function(name, |b| {
            b.iter(|| {
                s.begin("r").unwrap();
                s.stop("r").unwrap()
            })
        });
    }
    // Peer: the same three software events read twice through perf-event2 directly (two
    // group read()s, nothing else): the floor of the read() path.
    if let Ok(mut group) = perf_event::Group::new() {
        use perf_event::{Builder, events::Software};
        let members: Vec<_> = [Software::TASK_CLOCK, Software::PAGE_FAULTS, Software::CONTEXT_SWITCHES]
            .into_iter()
            .filter_map(|e| group.add(Builder::new(e).enabled(true)).ok())
            .collect();
        if members.len() == 3 && group.enable().is_ok() {
            g.bench_function("peer_perf_event2_two_group_reads", |b| {
                b.iter(|| {
                    let a = group.read().unwrap();
                    let z = group.read().unwrap();
                    (a.len(), z.len())
                })
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    // No plots: the bench reports numbers, and plotting needs fonts CI machines lack.
    config = Criterion::default().without_plots();
    targets = bench
}
criterion_main!(benches);
