use super::*;

/// splitmix64: a seeded stream for random address tests.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A fresh seed per run (ROOFLINE_TEST_SEED overrides, to replay a failure).
fn seed() -> u64 {
    std::env::var("ROOFLINE_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos() as u64)
                .unwrap_or(1)
        })
}

/// The tiny reference: one core, LRU, each set a list ordered most recent first; lines are
/// removed from the list rather than marked invalid. Same policy, independent data structure.
struct Reference {
    sets: Vec<u64>,
    ways: Vec<usize>,
    levels: Vec<Vec<Vec<(u64, bool)>>>,
    inclusive: bool,
    hits: Vec<u64>,
    misses: Vec<u64>,
    fills: Vec<u64>,
    wb_out: Vec<u64>,
    dram_fills: u64,
    dram_wb: u64,
    nt_bytes: u64,
}

impl Reference {
    fn new(cfgs: &[LevelConfig], inclusive: bool) -> Reference {
        let n = cfgs.len();
        Reference {
            sets: cfgs.iter().map(|c| c.sets()).collect(),
            ways: cfgs.iter().map(|c| c.ways as usize).collect(),
            levels: cfgs.iter().map(|c| vec![Vec::new(); c.sets() as usize]).collect(),
            inclusive,
            hits: vec![0; n],
            misses: vec![0; n],
            fills: vec![0; n],
            wb_out: vec![0; n],
            dram_fills: 0,
            dram_wb: 0,
            nt_bytes: 0,
        }
    }
    fn set(&mut self, k: usize, line: u64) -> &mut Vec<(u64, bool)> {
        let s = (line % self.sets[k]) as usize;
        &mut self.levels[k][s]
    }
    fn access(&mut self, addr: u64, size: u64, kind: AccessKind) {
        for line in (addr / 64)..=((addr + size - 1) / 64) {
            match kind {
                AccessKind::NtStore => {
                    let lo = addr.max(line * 64);
                    let hi = (addr + size - 1).min(line * 64 + 63);
                    let mut dirty = false;
                    for k in 0..self.levels.len() {
                        let set = self.set(k, line);
                        if let Some(i) = set.iter().position(|e| e.0 == line) {
                            dirty |= set.remove(i).1;
                        }
                    }
                    if dirty {
                        self.dram_wb += 1;
                    }
                    self.nt_bytes += hi - lo + 1;
                }
                _ => self.access_line(line, kind == AccessKind::Store),
            }
        }
    }
    fn access_line(&mut self, line: u64, store: bool) {
        let n = self.levels.len();
        let mut src = n;
        for k in 0..n {
            let set = self.set(k, line);
            if let Some(i) = set.iter().position(|e| e.0 == line) {
                let e = set.remove(i);
                set.insert(0, e);
                self.hits[k] += 1;
                src = k;
                break;
            }
            self.misses[k] += 1;
        }
        if src == n {
            self.dram_fills += 1;
        }
        for k in (0..src).rev() {
            self.fills[k] += 1;
            self.push(k, line, false);
        }
        if store {
            self.set(0, line)[0].1 = true;
        }
    }
    fn push(&mut self, k: usize, line: u64, dirty: bool) {
        let ways = self.ways[k];
        let set = self.set(k, line);
        set.insert(0, (line, dirty));
        if set.len() > ways {
            let (v, d) = set.pop().unwrap();
            self.evict(k, v, d);
        }
    }
    fn evict(&mut self, k: usize, v: u64, mut d: bool) {
        let n = self.levels.len();
        if self.inclusive && k == n - 1 && n > 1 {
            for u in 0..k {
                let set = self.set(u, v);
                if let Some(i) = set.iter().position(|e| e.0 == v) {
                    d |= set.remove(i).1;
                }
            }
        }
        if d {
            self.wb_out[k] += 1;
            if k + 1 == n {
                self.dram_wb += 1;
            } else {
                let set = self.set(k + 1, v);
                if let Some(i) = set.iter().position(|e| e.0 == v) {
                    set.remove(i);
                    set.insert(0, (v, true));
                } else {
                    self.push(k + 1, v, true);
                }
            }
        }
    }
    fn dram_bytes(&self) -> u64 {
        (self.dram_fills + self.dram_wb) * 64 + self.nt_bytes
    }
}

fn small_levels() -> Vec<LevelConfig> {
    vec![
        LevelConfig::new("L1", 1024, 2),
        LevelConfig::new("L2", 4096, 4),
        LevelConfig::new("L3", 3 * 4096, 6),
    ]
}

#[test]
fn random_streams_match_the_reference_model() {
    let seed = seed();
    let mut rng = Rng(seed);
    for round in 0..8 {
        let inclusive = round % 2 == 1;
        let cfgs = if round < 4 { small_levels() } else { small_levels()[..2].to_vec() };
        let mut sim = CacheHierarchy::new(cfgs.clone()).unwrap().with_inclusive_llc(inclusive);
        let mut reference = Reference::new(&cfgs, inclusive);
        // A footprint a few times the last level, with hot spots so every level hits sometimes.
        let span = 8 * cfgs.last().unwrap().size_bytes;
        for _ in 0..20_000 {
            let addr = if rng.below(2) == 0 { rng.below(span) } else { rng.below(2048) };
            let size = [1, 4, 8, 16, 32, 64, 100][rng.below(7) as usize];
            let kind = match rng.below(10) {
                0..=5 => AccessKind::Load,
                6..=8 => AccessKind::Store,
                _ => AccessKind::NtStore,
            };
            sim.access(addr, size as u32, kind);
            reference.access(addr, size, kind);
        }
        let t = sim.traffic();
        for (k, (name, c)) in t.levels.iter().enumerate() {
            assert_eq!(c.hits, reference.hits[k], "seed {seed} round {round} {name} hits");
            assert_eq!(c.misses, reference.misses[k], "seed {seed} round {round} {name} misses");
            assert_eq!(c.fills, reference.fills[k], "seed {seed} round {round} {name} fills");
            assert_eq!(
                c.writebacks_out, reference.wb_out[k],
                "seed {seed} round {round} {name} write-backs"
            );
        }
        assert_eq!(t.bytes["dram"], reference.dram_bytes(), "seed {seed} round {round} dram");
        assert_eq!(
            t.bytes["l2"],
            (reference.fills[0] + reference.wb_out[0]) * 64,
            "seed {seed} round {round} l2"
        );
        assert!(
            t.levels.iter().all(|(_, c)| c.hits > 0 && c.misses > 0),
            "seed {seed}: the stream exercises every level"
        );
    }
}

#[test]
fn two_way_plru_is_lru() {
    let seed = seed();
    let mut rng = Rng(seed);
    let lru = vec![LevelConfig::new("L1", 2048, 2), LevelConfig::new("L2", 8192, 2)];
    let plru: Vec<_> = lru.iter().cloned().map(|l| l.with_replacement(Replacement::TreePlru)).collect();
    let mut a = CacheHierarchy::new(lru).unwrap();
    let mut b = CacheHierarchy::new(plru).unwrap();
    for _ in 0..20_000 {
        let addr = rng.below(32 << 10);
        let kind = if rng.below(3) == 0 { AccessKind::Store } else { AccessKind::Load };
        a.access(addr, 8, kind);
        b.access(addr, 8, kind);
    }
    assert_eq!(a.traffic(), b.traffic(), "seed {seed}");
}

#[test]
fn four_way_plru_differs_from_lru_where_the_tree_says() {
    // One set of 4 ways: A B C D fill ways 0..3; touching A again points the root right and the
    // right node left, so PLRU evicts C where LRU evicts B.
    let lines = |sim: &mut CacheHierarchy, seq: &[u64]| {
        for &l in seq {
            sim.access(l * 64, 8, AccessKind::Load);
        }
    };
    for (repl, evicted, kept) in [(Replacement::TreePlru, 2u64, 1u64), (Replacement::Lru, 1, 2)] {
        let mut sim = CacheHierarchy::new(vec![LevelConfig::new("L1", 256, 4).with_replacement(repl)]).unwrap();
        lines(&mut sim, &[0, 1, 2, 3, 0, 4]);
        let before = sim.traffic().level("L1").unwrap().misses;
        lines(&mut sim, &[kept]);
        assert_eq!(sim.traffic().level("L1").unwrap().misses, before, "{repl:?}: line {kept} stays");
        lines(&mut sim, &[evicted]);
        assert_eq!(
            sim.traffic().level("L1").unwrap().misses,
            before + 1,
            "{repl:?}: line {evicted} was evicted"
        );
    }
}

#[test]
fn twelve_way_plru_uses_exactly_twelve_ways() {
    let mut sim = CacheHierarchy::new(vec![LevelConfig::new("L1", 12 * 64, 12).with_replacement(Replacement::TreePlru)]).unwrap();
    for pass in 0..3 {
        for l in 0..12u64 {
            sim.access(l * 64, 8, AccessKind::Load);
        }
        assert_eq!(sim.traffic().level("L1").unwrap().misses, 12, "pass {pass}: 12 lines fit 12 ways");
    }
    for l in 0..13u64 {
        sim.access(l * 64, 8, AccessKind::Load);
    }
    assert!(sim.traffic().level("L1").unwrap().misses > 12);
}

/// A small hierarchy for the streaming checks: 32 KiB / 256 KiB / 1 MiB.
fn streaming_levels(repl: Replacement) -> Vec<LevelConfig> {
    vec![
        LevelConfig::new("L1", 32 << 10, 8).with_replacement(repl),
        LevelConfig::new("L2", 256 << 10, 8).with_replacement(repl),
        LevelConfig::new("L3", 1 << 20, 16).with_replacement(repl),
    ]
}

/// `a[i] = b[i] + s * c[i]` over doubles; arrays of `n` elements placed back to back.
fn triad(sim: &mut CacheHierarchy, n: u64, store: AccessKind) {
    let (a, b, c) = (0x1000_0000u64, 0x1000_0000 + 8 * n + 4096, 0x1000_0000 + 16 * n + 8192);
    for i in 0..n {
        sim.access(b + 8 * i, 8, AccessKind::Load);
        sim.access(c + 8 * i, 8, AccessKind::Load);
        sim.access(a + 8 * i, 8, store);
    }
}

#[test]
fn streaming_at_four_times_the_llc_moves_the_compulsory_bytes() {
    let n = 4 * (1u64 << 20) / 8; // each array 4× the 1 MiB LLC
    for inclusive in [false, true] {
        for repl in [Replacement::Lru, Replacement::TreePlru] {
            let mut sim = CacheHierarchy::new(streaming_levels(repl)).unwrap().with_inclusive_llc(inclusive);
            triad(&mut sim, n, AccessKind::Store);
            let at_exit = sim.traffic_at_exit();
            assert!(at_exit.bytes["dram"] > sim.traffic().bytes["dram"], "dirty lines were still cached");
            sim.flush();
            assert_eq!(sim.traffic(), at_exit);
            let compulsory = (4 * 8 * n) as f64; // b, c read; a read for ownership and written back
            let dram = sim.traffic().bytes["dram"] as f64;
            assert!(
                (dram / compulsory - 1.0).abs() < 0.02,
                "{repl:?} inclusive={inclusive}: dram {dram} vs {compulsory}"
            );
            // Every level above sees the same stream.
            let l2 = sim.traffic().bytes["l2"] as f64;
            assert!((l2 / compulsory - 1.0).abs() < 0.02, "l2 {l2}");
        }
    }
}

#[test]
fn non_temporal_stores_bypass_the_caches() {
    let n = 4 * (1u64 << 20) / 8;
    let mut sim = CacheHierarchy::new(streaming_levels(Replacement::Lru)).unwrap();
    triad(&mut sim, n, AccessKind::NtStore);
    sim.flush();
    let t = sim.traffic();
    let expected = (3 * 8 * n) as f64; // no read for ownership, no write-back
    assert!((t.bytes["dram"] as f64 / expected - 1.0).abs() < 0.02, "{:?}", t.bytes);
    assert_eq!(t.nt_store_bytes, 8 * n);
    assert_eq!(t.levels.iter().map(|(_, c)| c.writebacks_out).sum::<u64>(), 0);
    // l2 only carries the two read streams
    assert!((t.bytes["l2"] as f64 / (16 * n) as f64 - 1.0).abs() < 0.02);

    // An NT store to a dirty cached line writes it back and drops it.
    let mut sim = CacheHierarchy::new(streaming_levels(Replacement::Lru)).unwrap();
    sim.access(0, 8, AccessKind::Store);
    sim.access(8, 8, AccessKind::NtStore);
    assert_eq!(sim.traffic().bytes["dram"], 64 + 64 + 8);
    sim.access(0, 8, AccessKind::Load);
    assert_eq!(sim.traffic().level("L1").unwrap().misses, 2, "the line left L1");
}

#[test]
fn reuse_within_l1_makes_no_l2_traffic() {
    let mut sim = CacheHierarchy::new(streaming_levels(Replacement::TreePlru)).unwrap();
    let run = |sim: &mut CacheHierarchy| {
        for i in 0..(16u64 << 10) / 8 {
            sim.access(0x4000 + 8 * i, 8, AccessKind::Load);
            sim.access(0x40_0000 + 8 * (i % 512), 8, AccessKind::Store);
        }
    };
    run(&mut sim);
    let cold = sim.traffic();
    assert_eq!(cold.bytes["l2"], (16 << 10) + 4096, "first pass fills 16 KiB + 4 KiB");
    sim.reset_counts();
    for _ in 0..10 {
        run(&mut sim);
    }
    let t = sim.traffic();
    assert_eq!(t.bytes["l2"], 0);
    assert_eq!(t.bytes["dram"], 0);
    assert_eq!(t.level("L1").unwrap().misses, 0);
    assert_eq!(t.level("L1").unwrap().hits, 10 * 2 * 2048);
}

#[test]
fn accesses_spanning_lines_touch_each_line() {
    let mut sim = CacheHierarchy::new(streaming_levels(Replacement::Lru)).unwrap();
    sim.access(60, 8, AccessKind::Load);
    assert_eq!(sim.traffic().level("L1").unwrap().misses, 2);
    sim.access(0, 128, AccessKind::Load);
    assert_eq!(sim.traffic().level("L1").unwrap().hits, 2);
    sim.access(u64::MAX - 3, 64, AccessKind::Store); // saturates at the top of the address space
    sim.access(5, 0, AccessKind::Load);
    assert_eq!(sim.traffic().level("L1").unwrap().misses, 3);
}

#[test]
fn private_levels_per_core_and_coherence() {
    let mut sim = CacheHierarchy::new(streaming_levels(Replacement::Lru)).unwrap();
    // Two cores each reuse their own 16 KiB: after warm-up, no traffic below L1.
    for pass in 0..3 {
        if pass == 1 {
            sim.reset_counts();
        }
        for core in 0..2 {
            for i in 0..2048u64 {
                sim.access_on(core, (core as u64) << 24 | (8 * i), 8, AccessKind::Store);
            }
        }
    }
    assert_eq!(sim.traffic().bytes["l2"], 0);
    // Ping-pong: each store by the other core writes the dirty line back to L3 and refetches.
    sim.reset_counts();
    for i in 0..100 {
        sim.access_on(i % 2, 1 << 30, 8, AccessKind::Store);
    }
    let t = sim.traffic();
    // every store but the first finds the line dirty in the other core's L1
    assert_eq!(t.level("L3").unwrap().writebacks_in, 99, "{t:?}");
    assert_eq!(t.level("L1").unwrap().misses, 100);
    assert_eq!(t.bytes["dram"], 64, "one compulsory miss");
}

#[test]
fn inclusive_llc_back_invalidates() {
    // A private L1 over a shared last-level L2: non-inclusive keeps in L1 what L2 evicted,
    // inclusive drops it.
    let levels = [LevelConfig::new("L1", 1024, 2), LevelConfig::new("L2", 8192, 8)];
    for inclusive in [false, true] {
        let mut sim = CacheHierarchy::new(vec![levels[0].clone(), levels[1].clone().with_sharing(Sharing::Shared)])
            .unwrap()
            .with_inclusive_llc(inclusive);
        // Line 0 stays hot in L1 (touched between every other access) while a stream of lines of
        // the same sets flows through L2 and evicts it there (L2 never sees L1 hits).
        for i in 1..1000u64 {
            sim.access(0, 8, AccessKind::Load);
            sim.access(i * 64 * 16, 8, AccessKind::Load);
        }
        let misses = sim.traffic().level("L1").unwrap().misses;
        if inclusive {
            // every 8 stream lines evict line 0 from the 8-way L2 set, and so from L1
            assert!(misses >= 1000 + 999 / 9, "inclusive: {misses}");
        } else {
            assert_eq!(misses, 1000, "non-inclusive: one compulsory miss of line 0 + the stream");
        }
    }
}

#[test]
fn spec_parsing() {
    let l = parse_cache_spec("L1=48KiB:12,L2=2MiB:16,L3=8MiB:16").unwrap();
    assert_eq!(l.len(), 3);
    assert_eq!((l[0].size_bytes, l[0].ways, l[0].line_bytes, l[0].sets()), (48 << 10, 12, 64, 64));
    assert_eq!(l[1].sharing, Sharing::Private);
    assert_eq!(l[2].sharing, Sharing::Shared);
    let l = parse_cache_spec("l1=32KiB:8:plru, L2=1MiB:8:128:shared:lru").unwrap_err();
    assert!(l.to_string().contains("lines"), "{l}"); // 64 vs 128 line sizes
    let l = parse_cache_spec("L1=32KiB:8:plru,L2=1MiB:8:shared").unwrap();
    assert_eq!(l[0].replacement, Replacement::TreePlru);
    assert_eq!(l[1].sharing, Sharing::Shared);
    for bad in [
        "",
        "L1",
        "L2=32KiB:8",
        "L1=32KiB",
        "L1=32KiB:0",
        "L1=32KiB:65",
        "L1=33000:8",
        "L1=32KiB:8:fast",
        "L1=32KiB:8:48",
        "L1=2GiB:8",
        "L1=32KiB:8,L2=1MiB:8:shared,L3=4MiB:16:private",
        "L1=x:8",
        "L1=32KiB:8,,",
    ] {
        let e = parse_cache_spec(bad).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{bad}");
        assert!(e.to_string().contains("hint"), "{bad}: {e}");
    }
}

#[test]
fn hierarchy_from_a_machine_model() {
    let cache = |level: u32, kind: &str, size: u64, ways: u32, shared: u32| {
        serde_json::json!({"level": level, "kind": kind, "size_bytes": size, "line_bytes": 64, "ways": ways,
            "sets": size / 64 / u64::from(ways), "shared_by_threads": shared, "shared_by_source": "sysfs", "instances": null})
    };
    let doc = serde_json::json!({
        "schema": "roofline.machine/1", "vendor": "GenuineIntel", "family": 6, "model": 0xad, "stepping": 1,
        "brand": "test", "microarchitecture": "no-such-platform", "microarchitecture_name": "test",
        "identified_by": "generic", "hypervisor": null, "sockets": 1, "cores": 4, "threads": 8, "smt": true,
        "caches": [cache(1, "instruction", 32 << 10, 8, 2), cache(2, "unified", 2 << 20, 16, 2),
                   cache(1, "data", 48 << 10, 12, 2), cache(3, "unified", 8 << 20, 16, 8)],
        "isa": [], "fp_pipes": {}, "fp_pipes_source": "generic guess",
        "frequency_ghz": {"nominal": null, "nominal_source": null, "measured": null, "by_isa": {}, "by_isa_all_threads": {}, "override_ghz": null},
        "peak_gflops": {"double": {}, "single": {}}, "peak_gflops_per_core": {"double": {}, "single": {}}
    });
    let model: MachineModel = serde_json::from_value(doc).unwrap();
    let h = CacheHierarchy::from_machine(&model).unwrap();
    let lv: Vec<_> = h.levels().cloned().collect();
    assert_eq!(lv.iter().map(|l| l.name.as_str()).collect::<Vec<_>>(), ["L1", "L2", "L3"]);
    assert_eq!(lv[0].size_bytes, 48 << 10);
    assert_eq!(
        lv.iter().map(|l| l.sharing).collect::<Vec<_>>(),
        [Sharing::Private, Sharing::Private, Sharing::Shared]
    );
    assert!(!h.inclusive_llc());
}

#[test]
fn inclusive_is_a_field_of_the_last_level() {
    let h = parse_cache_hierarchy("L1=1KiB:2,L2=8KiB:8:inclusive").unwrap();
    assert!(h.inclusive_llc());
    assert!(!parse_cache_hierarchy("L1=1KiB:2,L2=8KiB:8").unwrap().inclusive_llc());
    assert!(!parse_cache_hierarchy("L1=1KiB:2,L2=8KiB:8:noninclusive").unwrap().inclusive_llc());
    // Not on an upper level, not without a level above.
    for bad in ["L1=1KiB:2:inclusive,L2=8KiB:8", "L1=1KiB:2:inclusive"] {
        let e = parse_cache_hierarchy(bad).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{bad}");
    }
    // The parsed hierarchy behaves inclusively: the back-invalidation pattern of
    // `inclusive_llc_back_invalidates` (L1 2-way 8 sets, L2 8-way 16 sets, stride of 16 lines)
    // misses line 0 again after every 8 stream lines.
    let mut sim = parse_cache_hierarchy("L1=1KiB:2,L2=8KiB:8:shared:inclusive").unwrap();
    for i in 1..1000u64 {
        sim.access(0, 8, AccessKind::Load);
        sim.access(i * 64 * 16, 8, AccessKind::Load);
    }
    assert!(sim.traffic().level("L1").unwrap().misses > 1000);
}

#[test]
fn the_note_names_each_levels_policy() {
    let sim = parse_cache_hierarchy("L1=32KiB:8:plru,L2=1MiB:16,L3=8MiB:16:inclusive").unwrap();
    let n = sim.note();
    assert!(n.contains("L1 32.0 KiB 8-way tree-PLRU private per thread"), "{n}");
    assert!(n.contains("L2 1.0 MiB 16-way LRU private per thread"), "{n}");
    assert!(n.contains("L3 8.0 MiB 16-way LRU shared"), "{n}");
    assert!(n.contains("inclusive last level") && !n.contains("non-inclusive"), "{n}");
    assert_eq!(n.matches("prefetchers").count(), 1, "{n}");
}

#[test]
#[cfg(feature = "trace")]
fn the_tracer_thread_id_selects_private_levels() {
    use crate::counters::trace::{AccessKind as T, AccessSink};
    // Two threads each read their own 24 KiB twice. As two cores (`access_by`) each 32 KiB
    // private L1 holds its thread's 24 KiB: the second pass hits. As one core (`access`) 48 KiB
    // stream through one 32 KiB 8-way LRU L1 (12 lines per set): every access misses.
    let levels = || parse_cache_hierarchy("L1=32KiB:8,L2=1MiB:16,L3=8MiB:16").unwrap();
    let lines = 24 * 1024 / 64;
    let run = |per_thread: bool| {
        let mut sim = levels();
        for pass in 0..2 {
            if pass == 1 {
                sim.reset_counts();
            }
            for t in 0..2usize {
                for i in 0..lines {
                    let a = ((t as u64) << 24) + 64 * i;
                    if per_thread {
                        sim.access_by(t, a, 8, T::Load);
                    } else {
                        AccessSink::access(&mut sim, a, 8, T::Load);
                    }
                }
            }
        }
        sim.traffic().level("L1").unwrap().misses
    };
    assert_eq!(run(true), 0, "each thread's 24 KiB stays in its own L1");
    assert_eq!(run(false), 2 * lines, "48 KiB through one 32 KiB LRU L1 misses every line");
}

#[test]
#[cfg(feature = "trace")]
fn the_sink_flushes_in_place_to_the_bytes_a_copy_gives() {
    use crate::counters::trace::{AccessKind as T, AccessSink};
    let mut next = crate::util::xorshift(0x853c_49e6_748f_ea9b);
    let mut sim = parse_cache_hierarchy("L1=4KiB:4,L2=16KiB:4,L3=64KiB:8").unwrap();
    for _ in 0..20_000 {
        let r = next();
        let kind = if r.is_multiple_of(3) { T::Store } else { T::Load };
        sim.access_by((r >> 40) as usize % 2, 0x4000_0000 + (r >> 8) % (256 * 1024), 8, kind);
    }
    let copied = CacheHierarchy::bytes_per_level(&sim);
    assert!(
        sim.traffic_at_exit().bytes["dram"] > sim.traffic().bytes["dram"],
        "dirty lines were still cached"
    );
    let in_place = AccessSink::bytes_per_level(&mut sim);
    assert_eq!(in_place, copied);
    // Once more (a caller asking twice): nothing dirty is left to write back.
    assert_eq!(AccessSink::bytes_per_level(&mut sim), copied);
}
