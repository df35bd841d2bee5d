#![no_main]
//! Gate rules files: parsing never panics, whatever the bytes.

use libfuzzer_sys::fuzz_target;
use roofline::__private::RuleSet;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let _ = RuleSet::parse(text, "fuzz.toml");
});
