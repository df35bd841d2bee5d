//! Vocabulary shared by the kernel suite and every backend of the `roofline` crate.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// One class of work, with hardware-counter semantics: an instruction of class
/// `Packed256Double` counts 4 flops (8 if it is an FMA), whatever its mask says.
///
/// The split follows Intel's FP_ARITH_INST_RETIRED umasks; the `*Any*` classes exist for
/// counters that cannot split width or precision (AMD Zen 2–4 event 0x03). The bf16 and
/// integer (int8, int16) classes and the AMX tile classes are the mixed-precision work of
/// `docs/mixed-precision.md`: a multiply and its accumulation are two operations. Integer
/// classes ([`FlopClass::is_integer`]) are operations, not flops: they are kept out of
/// flop totals (`Counts::flops_total`, `flops.total`) and summed apart (`int_ops`).
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
    /// Tensor-core work (GPU; ncu's tensor pipe ops).
    Tensor,
    /// AVX-512 BF16 `vdpbf16ps`: two bf16 products and their accumulation per 32-bit lane.
    Packed128Bf16,
    Packed256Bf16,
    Packed512Bf16,
    /// VNNI byte dot products (`vpdpbusd`…): four int8 products and their sums per 32-bit lane.
    Packed128Int8,
    Packed256Int8,
    Packed512Int8,
    /// VNNI word dot products (`vpdpwssd`…): two int16 products and their sums per 32-bit lane.
    Packed128Int16,
    Packed256Int16,
    Packed512Int16,
    /// AMX `tdpbf16ps`: M × N × K × 2 with K the bf16 elements of a row of the A tile.
    TileBf16,
    /// AMX `tdpfp16ps` (and the AMX-COMPLEX fp16 forms).
    TileFp16,
    /// AMX `tdpb[su]d`: M × N × K × 2 with K the bytes of a row of the A tile.
    TileInt8,
    /// bf16 work, width unknown (AMD Zen 4/5 bfloat16 umasks of event 0x03).
    Bf16AnyWidth,
}

impl FlopClass {
    pub const ALL: [FlopClass; 32] = [
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
        FlopClass::Packed128Bf16,
        FlopClass::Packed256Bf16,
        FlopClass::Packed512Bf16,
        FlopClass::Packed128Int8,
        FlopClass::Packed256Int8,
        FlopClass::Packed512Int8,
        FlopClass::Packed128Int16,
        FlopClass::Packed256Int16,
        FlopClass::Packed512Int16,
        FlopClass::TileBf16,
        FlopClass::TileFp16,
        FlopClass::TileInt8,
        FlopClass::Bf16AnyWidth,
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
            FlopClass::Packed128Bf16 => "packed128_bf16",
            FlopClass::Packed256Bf16 => "packed256_bf16",
            FlopClass::Packed512Bf16 => "packed512_bf16",
            FlopClass::Packed128Int8 => "packed128_int8",
            FlopClass::Packed256Int8 => "packed256_int8",
            FlopClass::Packed512Int8 => "packed512_int8",
            FlopClass::Packed128Int16 => "packed128_int16",
            FlopClass::Packed256Int16 => "packed256_int16",
            FlopClass::Packed512Int16 => "packed512_int16",
            FlopClass::TileBf16 => "tile_bf16",
            FlopClass::TileFp16 => "tile_fp16",
            FlopClass::TileInt8 => "tile_int8",
            FlopClass::Bf16AnyWidth => "bf16_any_width",
        }
    }

    /// Integer operations (VNNI, AMX int8): not flops, never in a flop total.
    pub fn is_integer(self) -> bool {
        matches!(
            self,
            FlopClass::Packed128Int8
                | FlopClass::Packed256Int8
                | FlopClass::Packed512Int8
                | FlopClass::Packed128Int16
                | FlopClass::Packed256Int16
                | FlopClass::Packed512Int16
                | FlopClass::TileInt8
        )
    }

    /// Whether a `flops.by_class` key names integer work (see [`FlopClass::is_integer`]); keys
    /// this version does not know are taken as floating point.
    pub fn key_is_integer(key: &str) -> bool {
        FlopClass::from_key(key).is_some_and(FlopClass::is_integer)
    }

    /// The number format the work of this class is done in (`double`, `single`, `half`,
    /// `bf16`, `int8`, `int16`), where one is known: the family of roofs it is read against.
    pub fn format(self) -> Option<&'static str> {
        use FlopClass::*;
        Some(match self {
            ScalarDouble | Packed128Double | Packed256Double | Packed512Double | DoubleAnyWidth => "double",
            ScalarSingle | Packed128Single | Packed256Single | Packed512Single | SingleAnyWidth => "single",
            ScalarHalf | Packed128Half | Packed256Half | Packed512Half | HalfAnyWidth | TileFp16 => "half",
            Packed128Bf16 | Packed256Bf16 | Packed512Bf16 | TileBf16 | Bf16AnyWidth => "bf16",
            Packed128Int8 | Packed256Int8 | Packed512Int8 | TileInt8 => "int8",
            Packed128Int16 | Packed256Int16 | Packed512Int16 => "int16",
            ScalarAnyPrecision | PackedAnyPrecision | AnyPrecision | Tensor => return None,
        })
    }

    pub fn from_key(key: &str) -> Option<FlopClass> {
        FlopClass::ALL.into_iter().find(|c| c.key() == key)
    }

    /// Lanes of one instruction of this class (flops per non-FMA instruction), where known: for
    /// the bf16 and integer classes, the elements of the narrow type in one register.
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
            FlopClass::Packed128Bf16 | FlopClass::Packed128Int16 => 8,
            FlopClass::Packed256Bf16 | FlopClass::Packed256Int16 => 16,
            FlopClass::Packed512Bf16 | FlopClass::Packed512Int16 => 32,
            FlopClass::Packed128Int8 => 16,
            FlopClass::Packed256Int8 => 32,
            FlopClass::Packed512Int8 => 64,
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
    /// AMX tiles (Sapphire Rapids and later): only the low-precision GEMMs have it. Not in
    /// [`Variant::ALL`], the ladder of SIMD widths every other kernel and ceiling climbs.
    Amx,
}

impl Variant {
    /// The SIMD variants, narrowest first.
    pub const ALL: [Variant; 4] = [Variant::Scalar, Variant::Sse, Variant::Avx2, Variant::Avx512];
    /// Every variant a kernel may have, by name.
    pub const NAMED: [Variant; 5] = [Variant::Scalar, Variant::Sse, Variant::Avx2, Variant::Avx512, Variant::Amx];

    pub fn name(self) -> &'static str {
        match self {
            Variant::Scalar => "scalar",
            Variant::Sse => "sse",
            Variant::Avx2 => "avx2",
            Variant::Avx512 => "avx512",
            Variant::Amx => "amx",
        }
    }

    pub fn from_name(s: &str) -> Option<Variant> {
        Variant::NAMED.into_iter().find(|v| v.name() == s)
    }

    /// Vector width in bits (64 for scalar double code).
    pub fn width_bits(self) -> u32 {
        match self {
            Variant::Scalar => 64,
            Variant::Sse => 128,
            Variant::Avx2 => 256,
            // Tiles run under the AVX-512 licence; their work has classes of its own.
            Variant::Avx512 | Variant::Amx => 512,
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
                // The tile unit, granted by the kernel (`lowp::amx_permitted`). Without the
                // suite nothing here runs tile code, so nothing asks the kernel for it.
                Variant::Amx => {
                    #[cfg(feature = "suite")]
                    {
                        std::arch::is_x86_feature_detected!("avx512f")
                            && crate::lowp::cpuid_flag("amx_tile")
                            && crate::lowp::amx_permitted()
                    }
                    #[cfg(not(feature = "suite"))]
                    {
                        false
                    }
                }
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
/// `flops` uses hardware-counter semantics (full vector width, FMA = 2 per lane); its integer
/// classes are operations, summed by [`Counts::int_ops_total`], not by `flops_total`.
/// `core_load_bytes`/`core_store_bytes` are what the kernel's explicit load/store operands
/// move (stack traffic excluded). `dram_bytes` is the compulsory DRAM traffic for a cold
/// working set far larger than the LLC, write-allocate included for ordinary stores.
/// `fma_flops` is the part of the floating-point flops executed by fused multiply-add
/// instructions (2 per lane, full width like `flops`): what the trace backend's FMA count and
/// `flops.fma` of a report hold. A multiply then an add (scalar and SSE code) is not an FMA;
/// integer and bf16 dot products (VNNI, AMX, `vdpbf16ps`) are not FP FMAs either.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Counts {
    pub flops: BTreeMap<FlopClass, u64>,
    /// Flops of FMA instructions: a part of [`Counts::flops_total`], never added to it.
    #[serde(default)]
    pub fma_flops: u64,
    pub core_load_bytes: u64,
    pub core_store_bytes: u64,
    pub dram_bytes: u64,
}

impl Counts {
    /// Floating-point work: every class but the integer ones.
    pub fn flops_total(&self) -> u64 {
        self.flops.iter().filter(|(c, _)| !c.is_integer()).map(|(_, v)| v).sum()
    }
    /// Integer operations (int8/int16 dot products, AMX int8).
    pub fn int_ops_total(&self) -> u64 {
        self.flops.iter().filter(|(c, _)| c.is_integer()).map(|(_, v)| v).sum()
    }
    pub fn core_bytes(&self) -> u64 {
        self.core_load_bytes + self.core_store_bytes
    }
    pub fn add_flops(&mut self, class: FlopClass, n: u64) {
        if n > 0 {
            *self.flops.entry(class).or_insert(0) += n;
        }
    }
    /// Add `n` flops of `class` done by FMA instructions: they count in the class (like any
    /// flop) and in `fma_flops`.
    pub fn add_fma_flops(&mut self, class: FlopClass, n: u64) {
        debug_assert!(!class.is_integer(), "integer dot products are not FP FMAs");
        self.add_flops(class, n);
        self.fma_flops += n;
    }
    /// Add everything `o` counts (every field, DRAM bytes included).
    pub fn add(&mut self, o: &Counts) {
        for (class, f) in &o.flops {
            self.add_flops(*class, *f);
        }
        self.fma_flops += o.fma_flops;
        self.core_load_bytes += o.core_load_bytes;
        self.core_store_bytes += o.core_store_bytes;
        self.dram_bytes += o.dram_bytes;
    }
    /// Counts of `times` invocations.
    pub fn scaled(&self, times: u64) -> Counts {
        Counts {
            flops: self.flops.iter().map(|(k, v)| (*k, v * times)).collect(),
            fma_flops: self.fma_flops * times,
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
        assert_eq!(FlopClass::Packed512Int8.lanes(), Some(64));
        assert_eq!(FlopClass::Packed256Bf16.lanes(), Some(16));
    }

    #[test]
    fn integer_classes_stay_out_of_flop_totals() {
        let integer: Vec<FlopClass> = FlopClass::ALL.into_iter().filter(|c| c.is_integer()).collect();
        assert_eq!(integer.len(), 7);
        for c in &integer {
            assert!(matches!(c.format(), Some("int8" | "int16")), "{c}");
            assert!(FlopClass::key_is_integer(c.key()));
        }
        assert!(!FlopClass::key_is_integer("packed512_bf16"));
        assert!(!FlopClass::key_is_integer("some_future_class"));
        let mut c = Counts::default();
        c.add_flops(FlopClass::Packed512Int8, 128);
        c.add_flops(FlopClass::TileInt8, 1 << 15);
        c.add_flops(FlopClass::Packed512Bf16, 64);
        c.add_flops(FlopClass::TileBf16, 1 << 14);
        c.add_flops(FlopClass::ScalarDouble, 3);
        assert_eq!(c.flops_total(), 64 + (1 << 14) + 3);
        assert_eq!(c.int_ops_total(), 128 + (1 << 15));
        assert_eq!(c.scaled(3).int_ops_total(), 3 * (128 + (1 << 15)));
    }

    #[test]
    fn fma_flops_are_part_of_the_flops_and_follow_them() {
        let mut c = Counts::default();
        c.add_fma_flops(FlopClass::Packed256Double, 40);
        c.add_flops(FlopClass::Packed256Double, 12);
        c.add_fma_flops(FlopClass::ScalarDouble, 6);
        c.add_fma_flops(FlopClass::Packed512Single, 0);
        assert_eq!(c.flops.get(&FlopClass::Packed256Double), Some(&52));
        assert_eq!(c.flops.get(&FlopClass::Packed512Single), None);
        assert_eq!((c.flops_total(), c.fma_flops), (58, 46));
        let s = c.scaled(7);
        assert_eq!((s.flops_total(), s.fma_flops), (7 * 58, 7 * 46));
        let mut sum = c.clone();
        sum.core_load_bytes = 8;
        sum.add(&s);
        assert_eq!((sum.flops_total(), sum.fma_flops, sum.core_load_bytes), (8 * 58, 8 * 46, 8));
    }
}
