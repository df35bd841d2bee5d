//! The AIDA64 CPUID dump parser, and everything built on a parsed dump, must never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roofline::__private::dump;
use roofline::DetectOptions;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(d) = dump::parse(&text, "fuzz") {
        let _ = roofline::__private::machine::from_dump(&d, &DetectOptions::default());
    }
});
