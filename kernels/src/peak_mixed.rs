//! Peak loops of the low-precision units: AMX bf16 and int8 tile dot products, AVX-512 FP16
//! FMA, AVX-512 BF16 `vdpbf16ps`, AVX-512 VNNI and AVX-VNNI dot products. The empirical roofs
//! of `roofline ceilings` per precision class, each read against the platform table's rate.
//!
//! - AMX: four independent 16 × 16 fp32/int32 accumulators (tmm0–3) from two A tiles and two
//!   B tiles (tmm4–7), all 16 rows × 64 bytes: one round is four `tdpbf16ps` (4 × 16,384
//!   flops) or four `tdpbssd` (4 × 32,768 ops). The tiles hold zeros: the work does not depend
//!   on the values.
//! - SIMD: 12 independent accumulators (zmm0–11, or ymm0–11 for AVX-VNNI), enough for 2 ports
//!   × a latency up to 6; sources zmm12/zmm13 are zero, so every value stays 0.
//!
//! The instructions are `asm!` (AMX and AVX-512 FP16 intrinsics are not stable in Rust); each
//! loop counts its rounds down in a register.

use crate::lowp::Unit;
use crate::peak::PeakIsa;
use crate::types::FlopClass;

/// Operations of one round of the unit's loop (a multiply and its accumulation are two).
pub fn ops_per_round(u: Unit) -> u64 {
    match u {
        Unit::AmxBf16 => 4 * 16 * 16 * 32 * 2,
        Unit::AmxInt8 => 4 * 16 * 16 * 64 * 2,
        Unit::Avx512Fp16 => 12 * 32 * 2,
        Unit::Avx512Bf16 => 12 * 16 * 4,
        Unit::Avx512Vnni8 => 12 * 16 * 8,
        Unit::Avx512Vnni16 => 12 * 16 * 4,
        Unit::AvxVnni8 => 12 * 8 * 8,
    }
}

/// The work class of the unit's instructions (`docs/mixed-precision.md`).
pub fn class(u: Unit) -> FlopClass {
    match u {
        Unit::AmxBf16 => FlopClass::TileBf16,
        Unit::AmxInt8 => FlopClass::TileInt8,
        Unit::Avx512Fp16 => FlopClass::Packed512Half,
        Unit::Avx512Bf16 => FlopClass::Packed512Bf16,
        Unit::Avx512Vnni8 => FlopClass::Packed512Int8,
        Unit::Avx512Vnni16 => FlopClass::Packed512Int16,
        Unit::AvxVnni8 => FlopClass::Packed256Int8,
    }
}

/// The clock probe that runs beside the unit (the same core's clock at that vector width; AMX
/// runs under the AVX-512 licence).
pub fn clock_isa(u: Unit) -> PeakIsa {
    match u {
        Unit::AvxVnni8 => PeakIsa::Avx2,
        _ => PeakIsa::Avx512,
    }
}

/// Run `rounds` rounds of the unit's loop. None (nothing run) where the unit is not
/// available ([`Unit::available`]): never a SIGILL.
pub fn run(u: Unit, rounds: u64) -> Option<()> {
    if !u.available() {
        return None;
    }
    if rounds == 0 {
        return Some(());
    }
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the unit is available (CPUID flag, OS state, AMX permission: checked above) and
    // rounds ≥ 1 (the loops count down to zero).
    unsafe {
        match u {
            Unit::AmxBf16 => imp::amx(rounds, false),
            Unit::AmxInt8 => imp::amx(rounds, true),
            Unit::Avx512Fp16 => imp::fp16(rounds),
            Unit::Avx512Bf16 => imp::bf16(rounds),
            Unit::Avx512Vnni8 => imp::vnni8(rounds),
            Unit::Avx512Vnni16 => imp::vnni16(rounds),
            Unit::AvxVnni8 => imp::avx_vnni8(rounds),
        }
    }
    Some(())
}

#[cfg(target_arch = "x86_64")]
mod imp {
    use crate::lowp::{TileConfig, load_tile_config, release_tiles};
    use std::arch::asm;

    /// Zeros for the A and B tiles (16 rows × 64 bytes, stride 64).
    #[repr(C, align(64))]
    struct Zeros([u8; 1024]);
    static ZEROS: Zeros = Zeros([0; 1024]);

    /// AMX: four accumulators, four tile dot products per round.
    ///
    /// # Safety
    /// AMX-BF16 (or AMX-INT8 for `int8`) available and permitted; rounds ≥ 1.
    pub unsafe fn amx(rounds: u64, int8: bool) {
        let cfg = TileConfig::uniform(16, 64);
        let z = ZEROS.0.as_ptr();
        // SAFETY: the caller guarantees AMX; the tile loads read 16 rows of 64 bytes at stride
        // 64 from the 1 KiB `ZEROS`; the loop runs `rounds` ≥ 1 times.
        unsafe {
            load_tile_config(&cfg);
            if int8 {
                asm!(
                    "tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3",
                    "tileloadd tmm4, [{z} + {s}*1]", "tileloadd tmm5, [{z} + {s}*1]",
                    "tileloadd tmm6, [{z} + {s}*1]", "tileloadd tmm7, [{z} + {s}*1]",
                    "2:",
                    "tdpbssd tmm0, tmm4, tmm6", "tdpbssd tmm1, tmm4, tmm7",
                    "tdpbssd tmm2, tmm5, tmm6", "tdpbssd tmm3, tmm5, tmm7",
                    "dec {n}", "jnz 2b",
                    z = in(reg) z, s = in(reg) 64usize, n = inout(reg) rounds => _,
                    options(nostack, readonly)
                );
            } else {
                asm!(
                    "tilezero tmm0", "tilezero tmm1", "tilezero tmm2", "tilezero tmm3",
                    "tileloadd tmm4, [{z} + {s}*1]", "tileloadd tmm5, [{z} + {s}*1]",
                    "tileloadd tmm6, [{z} + {s}*1]", "tileloadd tmm7, [{z} + {s}*1]",
                    "2:",
                    "tdpbf16ps tmm0, tmm4, tmm6", "tdpbf16ps tmm1, tmm4, tmm7",
                    "tdpbf16ps tmm2, tmm5, tmm6", "tdpbf16ps tmm3, tmm5, tmm7",
                    "dec {n}", "jnz 2b",
                    z = in(reg) z, s = in(reg) 64usize, n = inout(reg) rounds => _,
                    options(nostack, readonly)
                );
            }
            release_tiles();
        }
    }

    /// 12 zmm chains of one instruction `$op zmmI, zmm12, zmm13`, sources zeroed.
    macro_rules! zmm_chains {
        ($name:ident, $op:literal) => {
            /// # Safety
            /// The unit is available; rounds ≥ 1.
            #[target_feature(enable = "avx512f")]
            pub unsafe fn $name(rounds: u64) {
                // SAFETY: register-only instructions the caller checked the CPU has.
                unsafe {
                    asm!(
                        "vpxord zmm12, zmm12, zmm12", "vpxord zmm13, zmm13, zmm13",
                        "vpxord zmm0, zmm0, zmm0", "vpxord zmm1, zmm1, zmm1", "vpxord zmm2, zmm2, zmm2",
                        "vpxord zmm3, zmm3, zmm3", "vpxord zmm4, zmm4, zmm4", "vpxord zmm5, zmm5, zmm5",
                        "vpxord zmm6, zmm6, zmm6", "vpxord zmm7, zmm7, zmm7", "vpxord zmm8, zmm8, zmm8",
                        "vpxord zmm9, zmm9, zmm9", "vpxord zmm10, zmm10, zmm10", "vpxord zmm11, zmm11, zmm11",
                        "2:",
                        concat!($op, " zmm0, zmm12, zmm13"), concat!($op, " zmm1, zmm12, zmm13"),
                        concat!($op, " zmm2, zmm12, zmm13"), concat!($op, " zmm3, zmm12, zmm13"),
                        concat!($op, " zmm4, zmm12, zmm13"), concat!($op, " zmm5, zmm12, zmm13"),
                        concat!($op, " zmm6, zmm12, zmm13"), concat!($op, " zmm7, zmm12, zmm13"),
                        concat!($op, " zmm8, zmm12, zmm13"), concat!($op, " zmm9, zmm12, zmm13"),
                        concat!($op, " zmm10, zmm12, zmm13"), concat!($op, " zmm11, zmm12, zmm13"),
                        "dec {n}", "jnz 2b",
                        n = inout(reg) rounds => _,
                        out("zmm0") _, out("zmm1") _, out("zmm2") _, out("zmm3") _, out("zmm4") _,
                        out("zmm5") _, out("zmm6") _, out("zmm7") _, out("zmm8") _, out("zmm9") _,
                        out("zmm10") _, out("zmm11") _, out("zmm12") _, out("zmm13") _,
                        options(nostack, nomem)
                    );
                }
            }
        };
    }

    zmm_chains!(fp16, "vfmadd231ph");
    zmm_chains!(bf16, "vdpbf16ps");
    zmm_chains!(vnni8, "vpdpbusd");
    zmm_chains!(vnni16, "vpdpwssd");

    /// AVX-VNNI: 12 ymm chains of the VEX-encoded `vpdpbusd`.
    ///
    /// # Safety
    /// AVX-VNNI available; rounds ≥ 1.
    #[target_feature(enable = "avx2")]
    pub unsafe fn avx_vnni8(rounds: u64) {
        // SAFETY: register-only instructions the caller checked the CPU has.
        unsafe {
            asm!(
                "vpxor ymm12, ymm12, ymm12", "vpxor ymm13, ymm13, ymm13",
                "vpxor ymm0, ymm0, ymm0", "vpxor ymm1, ymm1, ymm1", "vpxor ymm2, ymm2, ymm2",
                "vpxor ymm3, ymm3, ymm3", "vpxor ymm4, ymm4, ymm4", "vpxor ymm5, ymm5, ymm5",
                "vpxor ymm6, ymm6, ymm6", "vpxor ymm7, ymm7, ymm7", "vpxor ymm8, ymm8, ymm8",
                "vpxor ymm9, ymm9, ymm9", "vpxor ymm10, ymm10, ymm10", "vpxor ymm11, ymm11, ymm11",
                "2:",
                "{{vex}} vpdpbusd ymm0, ymm12, ymm13", "{{vex}} vpdpbusd ymm1, ymm12, ymm13",
                "{{vex}} vpdpbusd ymm2, ymm12, ymm13", "{{vex}} vpdpbusd ymm3, ymm12, ymm13",
                "{{vex}} vpdpbusd ymm4, ymm12, ymm13", "{{vex}} vpdpbusd ymm5, ymm12, ymm13",
                "{{vex}} vpdpbusd ymm6, ymm12, ymm13", "{{vex}} vpdpbusd ymm7, ymm12, ymm13",
                "{{vex}} vpdpbusd ymm8, ymm12, ymm13", "{{vex}} vpdpbusd ymm9, ymm12, ymm13",
                "{{vex}} vpdpbusd ymm10, ymm12, ymm13", "{{vex}} vpdpbusd ymm11, ymm12, ymm13",
                "dec {n}", "jnz 2b",
                n = inout(reg) rounds => _,
                out("ymm0") _, out("ymm1") _, out("ymm2") _, out("ymm3") _, out("ymm4") _,
                out("ymm5") _, out("ymm6") _, out("ymm7") _, out("ymm8") _, out("ymm9") _,
                out("ymm10") _, out("ymm11") _, out("ymm12") _, out("ymm13") _,
                options(nostack, nomem)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_count_the_unit_semantics() {
        // AMX full tiles: M = 16 rows, N = 64 B / 4 = 16 columns, K = 64 B / 4 = 16 dword
        // pairs (bf16: ×4 per dword) or quads (int8: ×8): docs/mixed-precision.md.
        assert_eq!(ops_per_round(Unit::AmxBf16), 4 * 16 * 16 * 16 * 4);
        assert_eq!(ops_per_round(Unit::AmxInt8), 4 * 16 * 16 * 16 * 8);
        // SIMD: 12 instructions per round, each one product and one accumulation per narrow
        // element of its register (FlopClass::lanes): vdpbf16ps zmm = 32 bf16 = 16 dwords × 4.
        for u in [
            Unit::Avx512Fp16,
            Unit::Avx512Bf16,
            Unit::Avx512Vnni8,
            Unit::Avx512Vnni16,
            Unit::AvxVnni8,
        ] {
            let lanes = u64::from(class(u).lanes().unwrap());
            assert_eq!(ops_per_round(u), 12 * lanes * 2, "{u:?}");
        }
        assert_eq!(ops_per_round(Unit::Avx512Vnni8), 12 * 16 * 8);
    }

    #[test]
    fn loops_run_where_the_unit_is_and_refuse_elsewhere() {
        for u in Unit::ALL {
            match run(u, 1000) {
                Some(()) => assert!(u.available()),
                None => {
                    assert!(!u.available());
                    eprintln!("skipped {}: {}", u.key(), u.why_unavailable());
                }
            }
        }
    }
}
