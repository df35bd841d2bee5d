//! Vocabulary shared by the kernel suite and every backend of the `roofline` crate.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// One class of floating-point work, with hardware-counter semantics: an instruction of
/// class `Packed256Double` counts 4 flops (8 if it is an FMA), whatever its mask says.
///
/// The split follows Intel's FP_ARITH_INST_RETIRED umasks; the `*Any*` classes exist for
/// counters that cannot split width or precision (AMD Zen 2–4 event 0x03).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlopClass {
    ScalarDouble,
    Packed128Double,
    Packed256Double,
    Packed512Double,
    ScalarSingle,
    Packed128Single,
    Packed256Single,
    Packed512Single,
    ScalarHalf,
    Packed128Half,
    Packed256Half,
    Packed512Half,
    /// Double precision, width unknown (a counter that splits precision only).
    DoubleAnyWidth,
    /// Single precision, width unknown.
    SingleAnyWidth,
    /// Half precision, width unknown (GPU FP16 work: ncu cannot tell packed from scalar).
    HalfAnyWidth,
    /// Scalar, precision unknown (AMD Zen 5 splits scalar/packed only in some umasks).
    ScalarAnyPrecision,
    /// Packed, precision and width unknown.
    PackedAnyPrecision,
    /// Neither width nor precision known (AMD Zen 2–4: all FP ops retired).
    AnyPrecision,
    /// Tensor-core / matrix-engine work (GPU, AMX).
    Tensor,
}

impl FlopClass {
    pub const ALL: [FlopClass; 19] = [
        FlopClass::ScalarDouble,
        FlopClass::Packed128Double,
        FlopClass::Packed256Double,
        FlopClass::Packed512Double,
        FlopClass::ScalarSingle,
        FlopClass::Packed128Single,
        FlopClass::Packed256Single,
        FlopClass::Packed512Single,
        FlopClass::ScalarHalf,
        FlopClass::Packed128Half,
        FlopClass::Packed256Half,
        FlopClass::Packed512Half,
        FlopClass::DoubleAnyWidth,
        FlopClass::SingleAnyWidth,
        FlopClass::HalfAnyWidth,
        FlopClass::ScalarAnyPrecision,
        FlopClass::PackedAnyPrecision,
        FlopClass::AnyPrecision,
        FlopClass::Tensor,
    ];

    /// The key used in `flops.by_class` of `roofline.report/1`.
    pub fn key(self) -> &'static str {
        match self {
            FlopClass::ScalarDouble => "scalar_double",
            FlopClass::Packed128Double => "packed128_double",
            FlopClass::Packed256Double => "packed256_double",
            FlopClass::Packed512Double => "packed512_double",
            FlopClass::ScalarSingle => "scalar_single",
            FlopClass::Packed128Single => "packed128_single",
            FlopClass::Packed256Single => "packed256_single",
            FlopClass::Packed512Single => "packed512_single",
            FlopClass::ScalarHalf => "scalar_half",
            FlopClass::Packed128Half => "packed128_half",
            FlopClass::Packed256Half => "packed256_half",
            FlopClass::Packed512Half => "packed512_half",
            FlopClass::DoubleAnyWidth => "double_any_width",
            FlopClass::SingleAnyWidth => "single_any_width",
            FlopClass::HalfAnyWidth => "half_any_width",
            FlopClass::ScalarAnyPrecision => "scalar_any_precision",
            FlopClass::PackedAnyPrecision => "packed_any_precision",
            FlopClass::AnyPrecision => "any_precision",
            FlopClass::Tensor => "tensor",
        }
    }

    pub fn from_key(key: &str) -> Option<FlopClass> {
        FlopClass::ALL.into_iter().find(|c| c.key() == key)
    }

    /// Lanes of one instruction of this class (flops per non-FMA instruction), where known.
    pub fn lanes(self) -> Option<u32> {
        Some(match self {
            FlopClass::ScalarDouble | FlopClass::ScalarSingle | FlopClass::ScalarHalf => 1,
            FlopClass::Packed128Double => 2,
            FlopClass::Packed256Double => 4,
            FlopClass::Packed512Double => 8,
            FlopClass::Packed128Single => 4,
            FlopClass::Packed256Single => 8,
            FlopClass::Packed512Single => 16,
            FlopClass::Packed128Half => 8,
            FlopClass::Packed256Half => 16,
            FlopClass::Packed512Half => 32,
            _ => return None,
        })
    }

    /// The class of an instruction of `width_bits` (64/32/16 for scalar, else 128/256/512)
    /// operating on `precision`.
    pub fn of(precision: Precision, width_bits: u32, scalar: bool) -> FlopClass {
        use FlopClass::*;
        match (precision, scalar, width_bits) {
            (Precision::F64, true, _) => ScalarDouble,
            (Precision::F64, false, 128) => Packed128Double,
            (Precision::F64, false, 256) => Packed256Double,
            (Precision::F64, false, _) => Packed512Double,
            (Precision::F32, true, _) => ScalarSingle,
            (Precision::F32, false, 128) => Packed128Single,
            (Precision::F32, false, 256) => Packed256Single,
            (Precision::F32, false, _) => Packed512Single,
            (Precision::F16, true, _) => ScalarHalf,
            (Precision::F16, false, 128) => Packed128Half,
            (Precision::F16, false, 256) => Packed256Half,
            (Precision::F16, false, _) => Packed512Half,
        }
    }
}

impl fmt::Display for FlopClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.key())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Precision {
    F64,
    F32,
    F16,
}

impl Precision {
    pub fn bytes(self) -> u64 {
        match self {
            Precision::F64 => 8,
            Precision::F32 => 4,
            Precision::F16 => 2,
        }
    }
}

/// The instruction-set variant of a kernel (and of a compute/bandwidth ceiling).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Variant {
    Scalar,
    Sse,
    Avx2,
    Avx512,
}

impl Variant {
    pub const ALL: [Variant; 4] = [Variant::Scalar, Variant::Sse, Variant::Avx2, Variant::Avx512];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Scalar => "scalar",
            Variant::Sse => "sse",
            Variant::Avx2 => "avx2",
            Variant::Avx512 => "avx512",
        }
    }

    pub fn from_name(s: &str) -> Option<Variant> {
        Variant::ALL.into_iter().find(|v| v.name() == s)
    }

    /// Vector width in bits (64 for scalar double code).
    pub fn width_bits(self) -> u32 {
        match self {
            Variant::Scalar => 64,
            Variant::Sse => 128,
            Variant::Avx2 => 256,
            Variant::Avx512 => 512,
        }
    }

    /// Whether this CPU can run the variant (checked at run time: never a SIGILL).
    pub fn supported(self) -> bool {
        #[cfg(target_arch = "x86_64")]
        {
            match self {
                Variant::Scalar => true,
                Variant::Sse => std::arch::is_x86_feature_detected!("sse2"),
                Variant::Avx2 => std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma"),
                Variant::Avx512 => std::arch::is_x86_feature_detected!("avx512f"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            matches!(self, Variant::Scalar)
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Analytic work and traffic of one kernel invocation.
///
/// `flops` uses hardware-counter semantics (full vector width, FMA = 2 per lane).
/// `core_load_bytes`/`core_store_bytes` are what the kernel's explicit load/store operands
/// move (stack traffic excluded). `dram_bytes` is the compulsory DRAM traffic for a cold
/// working set far larger than the LLC, write-allocate included for ordinary stores.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub flops: BTreeMap<FlopClass, u64>,
    pub core_load_bytes: u64,
    pub core_store_bytes: u64,
    pub dram_bytes: u64,
}

impl Counts {
    pub fn flops_total(&self) -> u64 {
        self.flops.values().sum()
    }
    pub fn core_bytes(&self) -> u64 {
        self.core_load_bytes + self.core_store_bytes
    }
    pub fn add_flops(&mut self, class: FlopClass, n: u64) {
        if n > 0 {
            *self.flops.entry(class).or_insert(0) += n;
        }
    }
    /// Counts of `times` invocations.
    pub fn scaled(&self, times: u64) -> Counts {
        Counts {
            flops: self.flops.iter().map(|(k, v)| (*k, v * times)).collect(),
            core_load_bytes: self.core_load_bytes * times,
            core_store_bytes: self.core_store_bytes * times,
            dram_bytes: self.dram_bytes * times,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn class_keys_round_trip() {
        for c in FlopClass::ALL {
            assert_eq!(FlopClass::from_key(c.key()), Some(c));
        }
        assert_eq!(FlopClass::from_key("packed1024_double"), None);
    }

    #[test]
    fn class_of_width_and_precision() {
        assert_eq!(FlopClass::of(Precision::F64, 512, false), FlopClass::Packed512Double);
        assert_eq!(FlopClass::of(Precision::F32, 128, false), FlopClass::Packed128Single);
        assert_eq!(FlopClass::of(Precision::F64, 64, true), FlopClass::ScalarDouble);
        assert_eq!(FlopClass::Packed256Single.lanes(), Some(8));
    }
}
