//! The perf backend's parsers of kernel data: group `read()` records and sysfs CPU lists.
//! Neither may panic on any input; a parsed group must be self-consistent.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roofline::__private::perf::{parse_cpu_list, parse_group_read, scale};

fuzz_target!(|data: &[u8]| {
    if let Ok(g) = parse_group_read(data) {
        // nr, enabled, running, then (value, id) pairs: 8 bytes each.
        assert!(24 + 16 * g.values.len() <= data.len());
        for &(_, v) in &g.values {
            if let Some(s) = scale(v, g.time_enabled, g.time_running) {
                assert!(s.value >= v as f64 || g.time_running > g.time_enabled);
                assert!(s.running_ratio > 0.0 && s.running_ratio <= 1.0);
            }
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = parse_cpu_list(text);
    }
});
