//! `perf stat -x,` import: any bytes give a report or an input error, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use roofline::__private::perf_stat::{self, ImportOptions};
use roofline::Platform;
use std::sync::OnceLock;

static PLATFORMS: OnceLock<Vec<Platform>> = OnceLock::new();

fuzz_target!(|data: &[u8]| {
    let platforms = PLATFORMS.get_or_init(Platform::embedded);
    let Some((&pick, rest)) = data.split_first() else { return };
    let platform = &platforms[pick as usize % platforms.len()];
    let text = String::from_utf8_lossy(rest);
    let _ = perf_stat::parse(&text, "fuzz");
    let opts = ImportOptions {
        seconds: None,
        name: "fuzz".into(),
        platform_source: "fuzz".into(),
    };
    if let Ok((report, _)) = perf_stat::import(&text, "fuzz", platform, &opts) {
        assert!(report.validate("fuzz").is_ok());
    }
});
