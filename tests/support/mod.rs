//! Helpers shared by integration tests (`mod support;` in a test file).
#![allow(dead_code)] // each test binary uses its own subset

use std::path::PathBuf;

/// A number in [lo, hi), different per run and per `salt`, printed so a failure can be replayed.
pub fn random(lo: u64, hi: u64, salt: u64) -> u64 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    let mut x = t ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    let v = lo + x % (hi - lo);
    eprintln!("random {v} in [{lo}, {hi}) (salt {salt})");
    v
}

/// An example built beside the running test (`cargo test` builds examples); `None`, said on
/// stderr, where it is not there.
pub fn example(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let p = exe.parent()?.parent()?.join("examples").join(name);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipping: {} not built (cargo test builds examples)", p.display());
        None
    }
}
