#![no_main]
//! The ncu CSV import must never panic, whatever the bytes.
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data)
        && let Ok(cap) = roofline::__private::gpu::ncu::parse(text, "fuzz")
    {
        let _ = roofline::__private::gpu::ncu::points(&cap, None, "fuzz");
    }
});
