//! Any bytes as a `roofline.ceilings/1` file: an error or a roof set, never a panic; a roof
//! set holds only finite positive roofs.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roofline::model::RoofSet;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for threads in [None, Some(1), Some(2)] {
        if let Ok(s) = RoofSet::from_ceilings_json(text, "fuzz.json", threads) {
            assert!(s.compute.iter().all(|c| c.gflops.is_finite() && c.gflops > 0.0));
            assert!(s.bandwidth.iter().all(|b| b.gbs.is_finite() && b.gbs > 0.0));
        }
    }
});
