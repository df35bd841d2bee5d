//! Cross-check of the cache simulator against Valgrind's cachegrind: a C triad runs under
//! cachegrind with a given D1/LL geometry; the same loop's addresses (computed here from the
//! array addresses the program prints) go through a two-level `CacheHierarchy` of that geometry,
//! and the D1 and LL miss counts of the triad function must agree.
//!
//! Cachegrind models no write-backs and only D1 + LL, so the hierarchy is L1 = D1, L2 = LL;
//! our write-backs into the last level touch its LRU state, so LL misses may differ slightly.
//! Skips (passing) when cc or valgrind is missing.

use std::path::Path;
use std::process::Command;

use roofline::counters::cachesim::{AccessKind, CacheHierarchy, LevelConfig, Sharing};

/// The random walk: 64 KiB (2× D1, ¼ LL), 200 000 updates.
const WALK_ELEMS: u64 = 8192;
const WALK_STEPS: u64 = 200_000;

const PROGRAM: &str = r#"
#include <stdio.h>
#include <stdlib.h>
__attribute__((noinline)) void triad(double *restrict a, const double *restrict b, const double *restrict c, long n) {
    for (long i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
}
/* Random updates of a buffer twice the D1: D1 hits and misses depend on its geometry and LRU. */
__attribute__((noinline)) void lcg_walk(double *x, unsigned long mask, long steps) {
    unsigned long state = 1;
    for (long s = 0; s < steps; s++) {
        state = state * 6364136223846793005UL + 1442695040888963407UL;
        x[(state >> 33) & mask] += 1.0;
    }
}
int main(int argc, char **argv) {
    long n = atol(argv[1]);
    double *a = aligned_alloc(4096, n * 8), *b = aligned_alloc(4096, n * 8), *c = aligned_alloc(4096, n * 8);
    if (!a || !b || !c) return 3;
    for (long i = 0; i < n; i++) { a[i] = 0.0; b[i] = (double)i; c[i] = 1.0; }
    long walk_elems = atol(argv[2]), steps = atol(argv[3]);
    double *w = aligned_alloc(4096, walk_elems * 8);
    if (!w) return 3;
    for (long i = 0; i < walk_elems; i++) w[i] = 0.0;
    printf("%lu %lu %lu %lu\n", (unsigned long)a, (unsigned long)b, (unsigned long)c, (unsigned long)w);
    fflush(stdout);
    triad(a, b, c, n);
    lcg_walk(w, (unsigned long)(walk_elems - 1), steps);
    volatile double sink = a[n / 2];
    (void)sink;
    return 0;
}
"#;

fn have(cmd: &str) -> bool {
    Command::new(cmd)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false)
}

/// D1 and LL misses (read + write) of function `func` in a cachegrind.out file.
fn misses_of(out_file: &Path, func: &str) -> (u64, u64) {
    let text = std::fs::read_to_string(out_file).unwrap();
    let events: Vec<&str> = text
        .lines()
        .find_map(|l| l.strip_prefix("events: "))
        .expect("events line")
        .split_whitespace()
        .collect();
    let col = |name: &str| {
        events
            .iter()
            .position(|e| *e == name)
            .unwrap_or_else(|| panic!("no {name} in {events:?}"))
    };
    let (d1r, d1w, dlr, dlw) = (col("D1mr"), col("D1mw"), col("DLmr"), col("DLmw"));
    let (mut d1, mut ll) = (0u64, 0u64);
    let mut inside = false;
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("fn=") {
            inside = name == func;
            continue;
        }
        if line.starts_with("fl=") || line.starts_with("fi=") || line.starts_with("fe=") {
            continue;
        }
        if inside && line.starts_with(|c: char| c.is_ascii_digit()) {
            // "<line> <counts…>": counts may be omitted at the end (zero)
            let v: Vec<u64> = line.split_whitespace().skip(1).map(|x| x.parse().unwrap_or(0)).collect();
            let at = |i: usize| v.get(i).copied().unwrap_or(0);
            d1 += at(d1r) + at(d1w);
            ll += at(dlr) + at(dlw);
        }
    }
    (d1, ll)
}

#[test]
fn miss_counts_agree_with_cachegrind() {
    if !have("cc") || !have("valgrind") {
        eprintln!("skipped: cc or valgrind not installed");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("triad.c");
    let exe = dir.path().join("triad");
    std::fs::write(&src, PROGRAM).unwrap();
    // -O1 without vectorisation: one 8-byte access per array element, as simulated below.
    let cc = Command::new("cc")
        .args(["-O1", "-fno-tree-vectorize", "-o"])
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(cc.success());

    let (d1_size, d1_ways, ll_size, ll_ways) = (32u64 << 10, 8u32, 256u64 << 10, 8u32);
    let n = 4 * ll_size / 8; // each array 4× the LL
    let out_file = dir.path().join("cachegrind.out");
    let run = Command::new("valgrind")
        .arg("--tool=cachegrind")
        .arg("--cache-sim=yes")
        .arg(format!("--D1={d1_size},{d1_ways},64"))
        .arg(format!("--LL={ll_size},{ll_ways},64"))
        .arg(format!("--cachegrind-out-file={}", out_file.display()))
        .arg(&exe)
        .arg(n.to_string())
        .arg(WALK_ELEMS.to_string())
        .arg(WALK_STEPS.to_string())
        .output()
        .unwrap();
    if !run.status.success() {
        let err = String::from_utf8_lossy(&run.stderr);
        // Valgrind refuses on some kernels/CPUs it does not know: that is a skip, not a failure.
        if err.contains("valgrind: ") && !out_file.exists() {
            eprintln!("skipped: valgrind could not run here: {}", err.lines().last().unwrap_or(""));
            return;
        }
        panic!("cachegrind run failed: {err}");
    }
    let stdout = String::from_utf8_lossy(&run.stdout);
    let addrs: Vec<u64> = stdout.split_whitespace().map(|x| x.parse().unwrap()).collect();
    let (a, b, c, w) = (addrs[0], addrs[1], addrs[2], addrs[3]);
    let levels = vec![
        LevelConfig::new("L1", d1_size, d1_ways),
        LevelConfig::new("L2", ll_size, ll_ways).with_sharing(Sharing::Shared),
    ];
    let rel = |x: u64, y: u64| (x as f64 / y as f64 - 1.0).abs();

    // The triad from a cold cache (its arrays are 4× LL: nothing of them survives the init loop).
    let mut sim = CacheHierarchy::new(levels.clone()).unwrap();
    for i in 0..n {
        sim.access(b + 8 * i, 8, AccessKind::Load);
        sim.access(c + 8 * i, 8, AccessKind::Load);
        sim.access(a + 8 * i, 8, AccessKind::Store);
    }
    let t = sim.traffic();
    let (ours_d1, ours_ll) = (t.level("L1").unwrap().misses, t.level("L2").unwrap().misses);
    let (cg_d1, cg_ll) = misses_of(&out_file, "triad");
    let compulsory = 3 * n * 8 / 64;
    assert!(
        cg_d1 as f64 > 0.9 * compulsory as f64,
        "cachegrind D1 misses {cg_d1} (is this the triad?)"
    );
    assert!(rel(ours_d1, cg_d1) < 0.01, "triad D1 misses: ours {ours_d1}, cachegrind {cg_d1}");
    assert!(rel(ours_ll, cg_ll) < 0.01, "triad LL misses: ours {ours_ll}, cachegrind {cg_ll}");

    // The random walk from a cold cache (the triad in between streamed 3 MiB through LL).
    let mut sim = CacheHierarchy::new(levels).unwrap();
    let mut state: u64 = 1;
    for _ in 0..WALK_STEPS {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let addr = w + 8 * ((state >> 33) & (WALK_ELEMS - 1));
        sim.access(addr, 8, AccessKind::Load);
        sim.access(addr, 8, AccessKind::Store);
    }
    let t = sim.traffic();
    let (ours_d1, ours_ll) = (t.level("L1").unwrap().misses, t.level("L2").unwrap().misses);
    let (cg_d1, cg_ll) = misses_of(&out_file, "lcg_walk");
    // About half the updates miss a D1 half the buffer's size: geometry matters here.
    assert!(
        cg_d1 > WALK_STEPS / 4 && cg_d1 < 3 * WALK_STEPS / 4,
        "cachegrind walk D1 misses {cg_d1}"
    );
    eprintln!("walk D1 misses: ours {ours_d1}, cachegrind {cg_d1}");
    assert!(rel(ours_d1, cg_d1) < 0.002, "walk D1 misses: ours {ours_d1}, cachegrind {cg_d1}");
    // The buffer fits in LL: its 1024 compulsory misses (cachegrind adds the code's own lines).
    assert_eq!(ours_ll, WALK_ELEMS * 8 / 64);
    assert!(
        cg_ll >= ours_ll && cg_ll <= ours_ll + 8,
        "walk LL misses: ours {ours_ll}, cachegrind {cg_ll}"
    );
}
