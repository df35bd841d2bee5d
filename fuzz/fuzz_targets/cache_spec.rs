#![no_main]
//! `--cache` specs: parsing never panics; whatever parses builds a hierarchy that takes accesses.

use libfuzzer_sys::fuzz_target;
use roofline::__private::cachesim::{AccessKind, CacheHierarchy, parse_cache_spec};

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = std::str::from_utf8(data) else { return };
    if let Ok(levels) = parse_cache_spec(spec) {
        // Keep the fuzzer fast: only build small hierarchies.
        if levels.iter().map(|l| l.size_bytes).sum::<u64>() <= 1 << 20 {
            let mut h = CacheHierarchy::new(levels).expect("a parsed spec builds");
            for i in 0..64u64 {
                h.access_on(
                    (i % 3) as usize,
                    i.wrapping_mul(0x9E37_79B9) % (1 << 22),
                    1 + (i % 100) as u32,
                    AccessKind::Store,
                );
            }
            let _ = h.traffic();
        }
    }
});
