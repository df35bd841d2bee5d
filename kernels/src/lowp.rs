//! Low-precision units of x86 cores: which ones this CPU has, the permission AMX needs, and
//! the tile configuration — shared by the mixed-precision peak loops (`peak_mixed`) and the
//! bf16/int8 GEMMs (`gemm_lowp`).
//!
//! Detection reads CPUID directly (leaf 7): `is_x86_feature_detected!` does not know the AMX
//! flags on stable Rust. AVX-512 units also need the OS to save ZMM state, which
//! `is_x86_feature_detected!("avx512f")` checks; AMX needs the process to ask the kernel for
//! tile data state first (`arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA)`, Linux 5.16+),
//! else the first tile instruction faults.
//!
//! Rust's AMX intrinsics are not stable: the tile instructions are `asm!` in small functions.

use std::sync::OnceLock;

/// A low-precision unit, as the roofs name it (`precision.isa`: `platform::MIXED_UNITS` of the
/// main crate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Unit {
    /// AMX `tdpbf16ps`.
    AmxBf16,
    /// AMX `tdpbssd` (and the other byte forms).
    AmxInt8,
    /// AVX-512 FP16 `vfmadd231ph` zmm.
    Avx512Fp16,
    /// AVX-512 BF16 `vdpbf16ps` zmm.
    Avx512Bf16,
    /// AVX-512 VNNI `vpdpbusd` zmm.
    Avx512Vnni8,
    /// AVX-512 VNNI `vpdpwssd` zmm.
    Avx512Vnni16,
    /// AVX-VNNI `{vex} vpdpbusd` ymm.
    AvxVnni8,
}

impl Unit {
    pub const ALL: [Unit; 7] = [
        Unit::AmxBf16,
        Unit::AmxInt8,
        Unit::Avx512Fp16,
        Unit::Avx512Bf16,
        Unit::Avx512Vnni8,
        Unit::Avx512Vnni16,
        Unit::AvxVnni8,
    ];

    /// `precision.isa`, the key of its roof (`bf16.amx`).
    pub fn key(self) -> &'static str {
        match self {
            Unit::AmxBf16 => "bf16.amx",
            Unit::AmxInt8 => "int8.amx",
            Unit::Avx512Fp16 => "half.avx512",
            Unit::Avx512Bf16 => "bf16.avx512",
            Unit::Avx512Vnni8 => "int8.avx512",
            Unit::Avx512Vnni16 => "int16.avx512",
            Unit::AvxVnni8 => "int8.avx2",
        }
    }

    pub fn precision(self) -> &'static str {
        self.key().split('.').next().unwrap_or("")
    }

    pub fn isa(self) -> &'static str {
        self.key().split('.').nth(1).unwrap_or("")
    }

    /// The CPUID flag (as `roofline machine` names it) that says a CPU has the unit.
    pub fn flag(self) -> &'static str {
        match self {
            Unit::AmxBf16 => "amx_bf16",
            Unit::AmxInt8 => "amx_int8",
            Unit::Avx512Fp16 => "avx512_fp16",
            Unit::Avx512Bf16 => "avx512_bf16",
            Unit::Avx512Vnni8 | Unit::Avx512Vnni16 => "avx512vnni",
            Unit::AvxVnni8 => "avx_vnni",
        }
    }

    /// Whether this CPU (and OS) can run the unit now: the CPUID flag, the OS's vector or tile
    /// state, and for AMX the permission request granted.
    pub fn available(self) -> bool {
        match self {
            Unit::AmxBf16 | Unit::AmxInt8 => cpuid_flag(self.flag()) && cpuid_flag("amx_tile") && amx_permitted(),
            Unit::AvxVnni8 => cpuid_flag(self.flag()) && avx2(),
            _ => cpuid_flag(self.flag()) && avx512(),
        }
    }

    /// One line for a machine without the unit (or without permission to use it).
    pub fn why_unavailable(self) -> String {
        if !cpuid_flag(self.flag()) {
            format!("no {} unit on this CPU (CPUID flag {} absent)", self.key(), self.flag())
        } else if matches!(self, Unit::AmxBf16 | Unit::AmxInt8) && !amx_permitted() {
            format!(
                "{}: the kernel refused AMX tile data (arch_prctl ARCH_REQ_XCOMP_PERM: Linux 5.16+ and a hypervisor exposing AMX are needed)",
                self.key()
            )
        } else {
            format!("{}: the OS does not enable the vector state it needs", self.key())
        }
    }
}

fn avx512() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx512f") && std::arch::is_x86_feature_detected!("avx512bw")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

fn avx2() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// A CPUID leaf-7 flag by name (the bits of the Intel SDM vol. 2 CPUID table).
pub fn cpuid_flag(name: &str) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::__cpuid_count;
        // CPUID exists on every x86-64 CPU (safe to call); leaf 0 gives the highest leaf.
        let max = __cpuid_count(0, 0).eax;
        if max < 7 {
            return false;
        }
        // Leaf 7 is supported (checked above); sub-leaf 1 reads zeros where absent.
        let (l0, l1) = (__cpuid_count(7, 0), __cpuid_count(7, 1));
        let bit = |r: u32, b: u32| (r >> b) & 1 == 1;
        match name {
            "avx512vnni" => bit(l0.ecx, 11),
            "amx_bf16" => bit(l0.edx, 22),
            "avx512_fp16" => bit(l0.edx, 23),
            "amx_tile" => bit(l0.edx, 24),
            "amx_int8" => bit(l0.edx, 25),
            "avx_vnni" => bit(l1.eax, 4),
            "avx512_bf16" => bit(l1.eax, 5),
            _ => false,
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = name;
        false
    }
}

/// Ask Linux for AMX tile data state, once per process; true when granted (or already).
pub fn amx_permitted() -> bool {
    static GRANTED: OnceLock<bool> = OnceLock::new();
    *GRANTED.get_or_init(|| cpuid_flag("amx_tile") && request_tile_permission())
}

#[cfg(all(target_arch = "x86_64", target_os = "linux"))]
fn request_tile_permission() -> bool {
    const ARCH_REQ_XCOMP_PERM: nix::libc::c_long = 0x1023;
    const XFEATURE_XTILEDATA: nix::libc::c_long = 18;
    // SAFETY: arch_prctl with ARCH_REQ_XCOMP_PERM only changes which XSAVE features this
    // process may use; it reads no memory of ours. An old kernel answers EINVAL.
    let r = unsafe { nix::libc::syscall(nix::libc::SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) };
    r == 0
}

#[cfg(not(all(target_arch = "x86_64", target_os = "linux")))]
fn request_tile_permission() -> bool {
    false
}

/// The 64-byte tile configuration `ldtilecfg` reads (Intel SDM: palette 1, then per tile
/// register `colsb` bytes per row and `rows`).
#[repr(C, align(64))]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TileConfig {
    pub palette: u8,
    pub start_row: u8,
    reserved: [u8; 14],
    pub colsb: [u16; 16],
    pub rows: [u8; 16],
}

impl TileConfig {
    /// Palette 1 with tiles 0..8 all `rows × colsb`.
    pub fn uniform(rows: u8, colsb: u16) -> TileConfig {
        let mut c = TileConfig {
            palette: 1,
            start_row: 0,
            reserved: [0; 14],
            colsb: [0; 16],
            rows: [0; 16],
        };
        for t in 0..8 {
            c.colsb[t] = colsb;
            c.rows[t] = rows;
        }
        c
    }
}

/// Load a tile configuration.
///
/// # Safety
/// The CPU has AMX and [`amx_permitted`] returned true.
#[cfg(target_arch = "x86_64")]
#[inline]
pub unsafe fn load_tile_config(cfg: &TileConfig) {
    // SAFETY: `cfg` is 64 valid bytes (repr(C), size 64); the caller guarantees AMX.
    unsafe { std::arch::asm!("ldtilecfg [{0}]", in(reg) cfg as *const TileConfig, options(nostack, readonly)) };
}

/// Release the tiles (back to the init state: the next context switches save no tile data).
///
/// # Safety
/// As [`load_tile_config`].
#[cfg(target_arch = "x86_64")]
#[inline]
pub unsafe fn release_tiles() {
    // SAFETY: the caller guarantees AMX; tilerelease touches no memory.
    unsafe { std::arch::asm!("tilerelease", options(nostack, nomem)) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tile_config_is_the_64_bytes_ldtilecfg_reads() {
        assert_eq!(std::mem::size_of::<TileConfig>(), 64);
        let c = TileConfig::uniform(16, 64);
        // SAFETY: TileConfig is repr(C), 64 plain bytes.
        let bytes: [u8; 64] = unsafe { std::mem::transmute(c) };
        assert_eq!(bytes[0], 1, "palette");
        assert_eq!(u16::from_le_bytes([bytes[16], bytes[17]]), 64, "colsb of tile 0 at byte 16");
        assert_eq!(u16::from_le_bytes([bytes[30], bytes[31]]), 64, "colsb of tile 7");
        assert_eq!(bytes[32], 0, "tile 8 unused");
        assert_eq!(bytes[48], 16, "rows of tile 0 at byte 48");
        assert_eq!(bytes[55], 16);
        assert_eq!(bytes[56], 0);
    }

    #[test]
    fn unit_keys_and_flags() {
        for u in Unit::ALL {
            assert_eq!(format!("{}.{}", u.precision(), u.isa()), u.key());
            // A unit said available has its flag; one without it says why.
            if !cpuid_flag(u.flag()) {
                assert!(!u.available());
                assert!(u.why_unavailable().contains(u.flag()));
            }
        }
    }
}
