//! Bandwidth ceilings: streaming kernels of the suite (widest ISA) at working sets sized per
//! memory level, on pinned threads, in two byte conventions.

use roofline_kernels::api::Kernel;
use roofline_kernels::stream::{Op, StreamKernel};
use roofline_kernels::{Precision, Variant};

use super::measure::{Budget, repeated_team, stats, time_instances};
use crate::schema::ceilings::{BandwidthCeiling, Host};

/// What `gbs` counts: the bytes the kernel's load and store instructions move.
pub const CORE: &str = "core";

/// The widest variant this CPU runs.
pub fn widest_variant() -> Variant {
    Variant::ALL.into_iter().rev().find(|v| v.supported()).unwrap_or(Variant::Scalar)
}

/// `daxpy` (y = s·x + y) is the in-place update ERT measures with: it stores only lines it has
/// just read, so no write-allocate, and on one core it moves more DRAM traffic than copy or
/// triad (SPR: 20.4 vs 16.2 / 16.5 GB/s). Without it the suite's daxpy sat above the DRAM roof.
pub const LEVEL_KERNELS: [Op; 5] = [Op::Load, Op::Copy, Op::Triad, Op::Daxpy, Op::Store];
/// Non-temporal stores bypass the caches: measured at DRAM sizes only.
pub const DRAM_ONLY_KERNELS: [Op; 1] = [Op::StoreNt];

/// Working set per thread for each level, plus a note when a cap applied.
///
/// L1 at half its per-thread share. An outer cache at the geometric middle of the inner
/// level's share and its own, `√(inner · own)`: deep inside the range only it serves, on a
/// logarithmic scale as far from the inner level's edge as from CPUID's size, which a guest or
/// a non-inclusive hierarchy may not give (Emerald Rapids guest: L3 serves 3–73 MiB of CPUID's
/// 300; at 150 MiB it read as DRAM. L2 serves to 1.3 MiB of 2: at 1 MiB it read 104 GB/s, in
/// its plateau 142). Where that is not above twice the inner share, half of its own share.
pub fn level_sizes(host: &Host, threads: usize) -> (Vec<(String, u64)>, Vec<String>) {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let t = threads.max(1) as u64;
    let share = |size: u64, shared_by: u32| size / t.min(shared_by.max(1) as u64);
    let levels: Vec<_> = host.caches.iter().filter(|c| c.level >= 1).collect();
    for c in &levels {
        let own = share(c.size_bytes, c.shared_by_threads);
        let inner = levels
            .iter()
            .filter(|p| p.level < c.level)
            .map(|p| share(p.size_bytes, p.shared_by_threads))
            .max()
            .unwrap_or(0);
        // Above the previous level's capacity, or the level measures nothing new.
        let floor = 2 * inner;
        let middle = ((inner as f64) * (own as f64)).sqrt() as u64;
        let per_thread = if inner > 0 && middle > floor { middle } else { own / 2 };
        if c.level > 1 && per_thread <= floor {
            notes.push(format!(
                "L{}: per-thread share too small against L{} ({} B): skipped",
                c.level,
                c.level - 1,
                per_thread
            ));
            continue;
        }
        out.push((format!("L{}", c.level), per_thread.max(4096)));
    }
    let want = 4 * host.llc_total_bytes();
    let mut dram = want;
    if let Some(avail) = roofline_kernels::stream::available_memory_bytes()
        && dram > avail / 2
    {
        dram = avail / 2;
        notes.push(format!(
            "DRAM working set capped at {} (half of available memory) instead of 4× LLC = {}",
            crate::schema::units::fmt_bytes(dram as f64),
            crate::schema::units::fmt_bytes(want as f64)
        ));
    }
    out.push(("DRAM".to_string(), (dram / t).max(4096)));
    (out, notes)
}

/// Measure `op` (f64, `variant`) with `per_thread` bytes per thread on `threads` threads.
pub fn measure(
    op: Op,
    variant: Variant,
    level: &str,
    per_thread: u64,
    threads: usize,
    budget: Budget,
    seed: u64,
) -> Result<BandwidthCeiling, String> {
    let k = StreamKernel {
        op,
        precision: Precision::F64,
    };
    let n = k.size_for_bytes(per_thread);
    let member_seed = |i: usize| seed.wrapping_add(i as u64);
    let (mut team, times) = repeated_team(threads, budget.sample, |i| k.instance(n, variant, member_seed(i)))?;
    if op == Op::Load && times > 1 {
        // `load` repeats inside the kernel (one reduction per sample, no per-call epilogue
        // between passes); remade, cheaply: a pass shorter than a sample is a small array.
        team = (0..threads)
            .map(|i| k.load_instance(n, variant, member_seed(i), times as usize))
            .collect::<Result<_, _>>()?;
    }
    let counts: Vec<_> = team.iter().map(|i| i.counts()).collect();
    let core: u64 = counts.iter().map(|c| c.core_bytes()).sum();
    // The kernel's own traffic formula: a write-allocate read per stored line it did not read
    // first (copy, triad, store), none for daxpy's in-place update or streamed NT vectors.
    let wa: u64 = counts.iter().map(|c| c.dram_bytes).sum();
    let samples = time_instances(team, budget);
    let s = stats(&samples);
    Ok(BandwidthCeiling {
        level: level.to_string(),
        kernel: k.name().to_string(),
        isa: variant.name().to_string(),
        threads: threads as u32,
        working_set_bytes: k.working_set_bytes(n) * threads as u64,
        working_set_per_thread_bytes: k.working_set_bytes(n),
        gbs: core as f64 / s.median / 1e9,
        bytes_convention: CORE.to_string(),
        gbs_write_allocate: wa as f64 / s.median / 1e9,
        gbs_best: core as f64 / s.min / 1e9,
        spread: s.spread,
        samples: s.samples,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::ceilings::CacheLevel;

    fn host(caches: Vec<CacheLevel>, cpus: u32) -> Host {
        let mut h = Host::detect();
        h.caches = caches;
        h.logical_cpus = cpus;
        h
    }

    #[test]
    fn sizes_follow_the_hierarchy_and_thread_share() {
        let h = host(
            vec![
                CacheLevel {
                    level: 1,
                    size_bytes: 48 << 10,
                    shared_by_threads: 2,
                },
                CacheLevel {
                    level: 2,
                    size_bytes: 2 << 20,
                    shared_by_threads: 2,
                },
                CacheLevel {
                    level: 3,
                    size_bytes: 64 << 20,
                    shared_by_threads: 16,
                },
            ],
            16,
        );
        let middle = |inner: u64, own: u64| ((inner as f64) * (own as f64)).sqrt() as u64;
        let (s1, _) = level_sizes(&h, 1);
        assert_eq!(s1[0], ("L1".to_string(), 24 << 10));
        // √(48 KiB · 2 MiB) ≈ 313.5 KiB; √(2 MiB · 64 MiB) ≈ 11.3 MiB.
        assert_eq!(s1[1], ("L2".to_string(), middle(48 << 10, 2 << 20)));
        assert_eq!(s1[1].1, 321_059);
        assert_eq!(s1[2], ("L3".to_string(), middle(2 << 20, 64 << 20)));
        assert_eq!(s1[3].0, "DRAM");
        let (s8, _) = level_sizes(&h, 8);
        // L1/L2 shared by 2 threads at most; L3 by all 8: its 8 MiB share against L2's 1 MiB.
        assert_eq!(s8[0].1, 12 << 10);
        assert_eq!(s8[2].1, middle(1 << 20, 8 << 20));
        // Every cache level's set lies above twice the inner level's share and below its own.
        for (sizes, t) in [(&s1, 1u64), (&s8, 8)] {
            let shares = [(48u64 << 10) / t.min(2), (2 << 20) / t.min(2), (64 << 20) / t.min(16)];
            for k in 1..3 {
                assert!(sizes[k].1 > 2 * shares[k - 1] && sizes[k].1 < shares[k], "{t} threads: {sizes:?}");
            }
        }
        // DRAM: 4× LLC in all, split over the threads (unless capped by free memory).
        if s1[3].1 == 4 * (64 << 20) {
            assert_eq!(s8[3].1, 4 * (64 << 20) / 8);
        }
    }

    #[test]
    fn traffic_convention_follows_each_kernels_stores() {
        // A random working set (not a multiple of any vector width): the write-allocate figure
        // over the core figure is the kernel's traffic per core byte: a line read for each
        // stored line the kernel did not read first (copy 3/2, triad 4/3, store 2), none for
        // load, daxpy's in-place update and streamed stores (up to the NT peel).
        let bytes = 96_000 + 8 * (super::super::seed() % 997);
        let budget = Budget {
            sample: std::time::Duration::from_micros(100),
            min_total: std::time::Duration::from_millis(1),
            min_samples: 3,
        };
        let variant = widest_variant();
        for (op, want) in [
            (Op::Load, 1.0),
            (Op::Copy, 1.5),
            (Op::Triad, 4.0 / 3.0),
            (Op::Daxpy, 1.0),
            (Op::Store, 2.0),
            (Op::StoreNt, 1.0),
        ] {
            let b = measure(op, variant, "L2", bytes, 1, budget, 7).unwrap();
            let ratio = b.gbs_write_allocate / b.gbs;
            assert!((ratio - want).abs() < 1e-3, "{}: {ratio} (want {want})", b.kernel);
        }
        assert!(LEVEL_KERNELS.contains(&Op::Daxpy), "the in-place update bounds what daxpy reaches");
    }
}
