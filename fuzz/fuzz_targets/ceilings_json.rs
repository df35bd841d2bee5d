//! The ceilings cache file and the sysfs cache-size parsers must never panic on any input.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(c) = roofline::Ceilings::from_json(text, "fuzz") {
            // A parsed document round-trips.
            let again = roofline::Ceilings::from_json(&c.to_json(), "fuzz").expect("round trip");
            assert_eq!(again.compute.len(), c.compute.len());
            let _ = c.roofs(1);
        }
        let _ = roofline::__private::machine::parse_sysfs_size(text);
        let _ = roofline::__private::machine::count_cpu_list(text);
    }
});
