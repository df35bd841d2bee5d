//! Theoretical peak GFLOP/s per ISA: over that width's pipes, lanes × (2 per FMA pipe, 1 per
//! add or mul pipe) × the clock of that ISA. `sse` and `avx` have no FMA instruction, so an
//! FMA pipe counts as one add or mul there; `scalar` uses FMA where the CPU has FMA3.

use std::collections::BTreeMap;

use super::{ByIsa, Peaks, Pipes};

/// Vector width (bits) whose pipes an ISA uses, and whether it has an FMA instruction.
pub fn isa_width(isa: &str) -> u32 {
    match isa {
        "scalar" => 64,
        "sse" => 128,
        "avx" | "avx2" => 256,
        "avx512" => 512,
        _ => 0,
    }
}

/// Double-precision flops per cycle per core for `isa`, or `None` without pipes at that width.
pub fn flops_per_cycle(isa: &str, has_fma: bool, pipes: &BTreeMap<String, Pipes>) -> Option<f64> {
    let w = isa_width(isa);
    let p = pipes.get(&w.max(128).to_string())?;
    let fma_instr = match isa {
        "scalar" => has_fma,
        "avx2" | "avx512" => true,
        _ => false,
    };
    let per_lane = if fma_instr {
        2 * p.fma + p.add + p.mul
    } else {
        p.fma + p.add + p.mul
    };
    let lanes = (w / 64).max(1);
    (per_lane > 0).then_some((lanes * per_lane) as f64)
}

/// Two core types' peaks added per precision and ISA (None where either lacks the ISA).
pub fn sum(a: &Peaks, b: &Peaks) -> Peaks {
    let mut p = Peaks::default();
    for isa in ByIsa::ISAS {
        p.double.set(isa, a.double.get(isa).zip(b.double.get(isa)).map(|(x, y)| x + y));
        p.single.set(isa, a.single.get(isa).zip(b.single.get(isa)).map(|(x, y)| x + y));
    }
    p
}

/// Peaks (GFLOP/s) for ISAs present (`present(isa)`), with the clock of each ISA.
pub fn peaks(
    present: impl Fn(&str) -> bool,
    has_fma: bool,
    pipes: &BTreeMap<String, Pipes>,
    clock: impl Fn(&str) -> Option<f64>,
    cores: u32,
) -> Peaks {
    let mut p = Peaks::default();
    for isa in ByIsa::ISAS {
        let v = if present(isa) {
            flops_per_cycle(isa, has_fma, pipes)
                .zip(clock(isa))
                .map(|(f, ghz)| f * ghz * cores as f64)
        } else {
            None
        };
        p.double.set(isa, v);
        p.single.set(isa, v.map(|x| 2.0 * x));
    }
    p
}

/// The mixed-precision units of a platform table (`mixed_ops_per_cycle`) this CPU has:
/// those whose CPUID flag (`platform::MIXED_UNITS`) `has` reports.
pub fn mixed_units(table: &BTreeMap<String, f64>, has: impl Fn(&str) -> bool) -> BTreeMap<String, f64> {
    table
        .iter()
        .filter(|(unit, ops)| ops.is_finite() && **ops > 0.0 && super::platform::MIXED_UNITS.iter().any(|(u, flag)| u == unit && has(flag)))
        .map(|(u, o)| (u.clone(), *o))
        .collect()
}

/// The units a platform table leaves unrated (`mixed_unrated`, with why) that this CPU has.
pub fn mixed_unrated(table: &BTreeMap<String, String>, has: impl Fn(&str) -> bool) -> BTreeMap<String, String> {
    table
        .iter()
        .filter(|(unit, _)| super::platform::MIXED_UNITS.iter().any(|(u, flag)| u == unit && has(flag)))
        .map(|(u, why)| (u.clone(), why.clone()))
        .collect()
}

/// The ISA whose clock a mixed-precision unit runs at: AMX at the AVX-512 clock (the tile
/// unit sits in the same core and licence as the 512-bit pipes), the others at their own.
pub fn mixed_unit_clock_isa(unit: &str) -> &str {
    match unit.split_once('.').map(|(_, isa)| isa) {
        Some("amx") | Some("avx512") => "avx512",
        Some("avx2") => "avx2",
        _ => "scalar",
    }
}

/// Peaks (GFLOP/s, GOP/s for integer units) of the mixed-precision units on `cores` cores:
/// operations per cycle × the clock of the unit's ISA × cores. Units without a clock are left out.
pub fn mixed_peaks(ops_per_cycle: &BTreeMap<String, f64>, clock: impl Fn(&str) -> Option<f64>, cores: u32) -> BTreeMap<String, f64> {
    ops_per_cycle
        .iter()
        .filter_map(|(unit, ops)| {
            let ghz = clock(mixed_unit_clock_isa(unit)).filter(|g| g.is_finite() && *g > 0.0)?;
            Some((unit.clone(), ops * ghz * f64::from(cores)))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pipes(list: &[(&str, u32, u32, u32)]) -> BTreeMap<String, Pipes> {
        list.iter()
            .map(|&(w, fma, add, mul)| (w.to_string(), Pipes { fma, add, mul }))
            .collect()
    }

    #[test]
    fn formula_per_isa() {
        // Skylake-SP, 2 FMA at every width: AVX-512 = 8 lanes × 2 × 2 = 32 DP flops/cycle.
        let skx = pipes(&[("128", 2, 0, 0), ("256", 2, 0, 0), ("512", 2, 0, 0)]);
        assert_eq!(flops_per_cycle("avx512", true, &skx), Some(32.0));
        assert_eq!(flops_per_cycle("avx2", true, &skx), Some(16.0));
        assert_eq!(flops_per_cycle("avx", true, &skx), Some(8.0), "no FMA instruction in AVX1");
        assert_eq!(flops_per_cycle("sse", true, &skx), Some(4.0));
        assert_eq!(flops_per_cycle("scalar", true, &skx), Some(4.0));
        // Sandy Bridge: one add and one mul pipe, no FMA.
        let snb = pipes(&[("128", 0, 1, 1), ("256", 0, 1, 1)]);
        assert_eq!(flops_per_cycle("avx", false, &snb), Some(8.0));
        assert_eq!(flops_per_cycle("scalar", false, &snb), Some(2.0));
        assert_eq!(flops_per_cycle("avx512", false, &snb), None);
        // Zen 4: 512-bit double-pumped (1 FMA + 1 add), 256-bit 2 FMA + 2 add.
        let zen4 = pipes(&[("128", 2, 2, 0), ("256", 2, 2, 0), ("512", 1, 1, 0)]);
        assert_eq!(flops_per_cycle("avx512", true, &zen4), Some(24.0));
        assert_eq!(flops_per_cycle("avx2", true, &zen4), Some(24.0));
    }

    #[test]
    fn mixed_peaks_need_the_flag_and_a_rate() {
        let spr = crate::machine::Platform::load("spr").unwrap();
        // A CPU with AMX-BF16 and AVX-512 FP16 but no AMX-INT8 and no VNNI (made up: the
        // filter follows each unit's own flag).
        let has = |f: &str| matches!(f, "amx_bf16" | "avx512_fp16" | "avx512_bf16");
        let units = mixed_units(&spr.mixed_ops_per_cycle, has);
        assert_eq!(units.get("bf16.amx"), Some(&1024.0));
        assert_eq!(units.get("half.avx512"), Some(&128.0));
        assert!(!units.contains_key("int8.amx"), "no amx_int8 flag");
        assert!(!units.contains_key("int8.avx512"), "no avx512vnni flag");
        assert_eq!(units.get("bf16.avx512"), Some(&32.0), "vdpbf16ps zmm: one per 2 cycles on SPR");
        // A unit the table does not rate has no peak although the CPU has its flag.
        let gnr = crate::machine::Platform::load("gnr").unwrap();
        assert!(!mixed_units(&gnr.mixed_ops_per_cycle, has).contains_key("bf16.avx512"));
        let ghz = 1.5 + (std::process::id() % 100) as f64 / 100.0;
        let clock = |isa: &str| (isa == "avx512").then_some(ghz);
        let p = mixed_peaks(&units, clock, 4);
        assert!((p["bf16.amx"] - 1024.0 * ghz * 4.0).abs() < 1e-9);
        assert!((p["half.avx512"] - 128.0 * ghz * 4.0).abs() < 1e-9);
        // No clock for the unit's ISA: no peak.
        assert!(mixed_peaks(&units, |_| None, 4).is_empty());
        // Zen 3 (this kind of CPU has none of the units): nothing.
        let zen3 = crate::machine::Platform::load("zen3").unwrap();
        assert!(mixed_units(&zen3.mixed_ops_per_cycle, |_| true).is_empty());
    }

    #[test]
    fn peaks_scale_with_clock_cores_and_precision() {
        let skx = pipes(&[("128", 2, 0, 0), ("256", 2, 0, 0), ("512", 2, 0, 0)]);
        let clock = |isa: &str| Some(if isa == "avx512" { 2.0 } else { 3.0 });
        let p = peaks(|isa| isa != "avx", true, &skx, clock, 4);
        assert_eq!(p.double.avx512, Some(32.0 * 2.0 * 4.0));
        assert_eq!(p.single.avx512, Some(2.0 * 32.0 * 2.0 * 4.0));
        assert_eq!(p.double.avx2, Some(16.0 * 3.0 * 4.0));
        assert_eq!(p.double.avx, None);
        let none = peaks(|_| true, true, &skx, |_| None, 4);
        assert_eq!(none.double.scalar, None);
    }
}
