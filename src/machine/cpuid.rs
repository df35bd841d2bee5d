//! Reading CPUID: the live CPU or a recorded dump, behind one small trait, so identification,
//! topology and cache decoding run the same code on both. Decoding of standard leaves is
//! raw-cpuid's; the feature-flag table here names the bits platform files refer to (raw-cpuid
//! lacks some, e.g. AMX-FP16 and AVX10's version leaf).

use raw_cpuid::{CpuId, CpuIdReader, CpuIdResult};
use std::collections::BTreeSet;

/// A source of CPUID results for one logical CPU.
pub trait CpuidSource {
    /// `[eax, ebx, ecx, edx]` of leaf `leaf`, subleaf `subleaf`; zeros where the source has none.
    fn cpuid(&self, leaf: u32, subleaf: u32) -> [u32; 4];
}

/// The CPU this thread runs on.
#[derive(Debug, Clone, Copy, Default)]
pub struct LiveCpuid;

impl CpuidSource for LiveCpuid {
    fn cpuid(&self, leaf: u32, subleaf: u32) -> [u32; 4] {
        let r = raw_cpuid::CpuIdReaderNative.cpuid2(leaf, subleaf);
        [r.eax, r.ebx, r.ecx, r.edx]
    }
}

/// Adapts any [`CpuidSource`] to raw-cpuid's reader.
#[derive(Clone, Copy)]
pub struct Reader<'a>(pub &'a dyn CpuidSource);

impl CpuIdReader for Reader<'_> {
    fn cpuid2(&self, eax: u32, ecx: u32) -> CpuIdResult {
        let [a, b, c, d] = self.0.cpuid(eax, ecx);
        CpuIdResult {
            eax: a,
            ebx: b,
            ecx: c,
            edx: d,
        }
    }
}

pub fn raw(src: &dyn CpuidSource) -> CpuId<Reader<'_>> {
    CpuId::with_cpuid_reader(Reader(src))
}

#[derive(Debug, Clone, Copy)]
enum Reg {
    Eax = 0,
    Ebx = 1,
    Ecx = 2,
    Edx = 3,
}

/// (name, leaf, subleaf, register, bit) of every flag a platform file may name.
const FLAGS: &[(&str, u32, u32, Reg, u32)] = &[
    ("sse", 1, 0, Reg::Edx, 25),
    ("sse2", 1, 0, Reg::Edx, 26),
    ("sse3", 1, 0, Reg::Ecx, 0),
    ("ssse3", 1, 0, Reg::Ecx, 9),
    ("fma", 1, 0, Reg::Ecx, 12),
    ("sse4_1", 1, 0, Reg::Ecx, 19),
    ("sse4_2", 1, 0, Reg::Ecx, 20),
    ("popcnt", 1, 0, Reg::Ecx, 23),
    ("avx", 1, 0, Reg::Ecx, 28),
    ("f16c", 1, 0, Reg::Ecx, 29),
    ("hypervisor", 1, 0, Reg::Ecx, 31),
    ("sgx", 7, 0, Reg::Ebx, 2),
    ("bmi1", 7, 0, Reg::Ebx, 3),
    ("avx2", 7, 0, Reg::Ebx, 5),
    ("bmi2", 7, 0, Reg::Ebx, 8),
    ("invpcid", 7, 0, Reg::Ebx, 10),
    ("avx512f", 7, 0, Reg::Ebx, 16),
    ("avx512dq", 7, 0, Reg::Ebx, 17),
    ("rdseed", 7, 0, Reg::Ebx, 18),
    ("adx", 7, 0, Reg::Ebx, 19),
    ("avx512ifma", 7, 0, Reg::Ebx, 21),
    ("clflushopt", 7, 0, Reg::Ebx, 23),
    ("clwb", 7, 0, Reg::Ebx, 24),
    ("avx512cd", 7, 0, Reg::Ebx, 28),
    ("sha", 7, 0, Reg::Ebx, 29),
    ("avx512bw", 7, 0, Reg::Ebx, 30),
    ("avx512vl", 7, 0, Reg::Ebx, 31),
    ("avx512vbmi", 7, 0, Reg::Ecx, 1),
    ("pku", 7, 0, Reg::Ecx, 3),
    ("avx512vbmi2", 7, 0, Reg::Ecx, 6),
    ("gfni", 7, 0, Reg::Ecx, 8),
    ("vaes", 7, 0, Reg::Ecx, 9),
    ("vpclmulqdq", 7, 0, Reg::Ecx, 10),
    ("avx512vnni", 7, 0, Reg::Ecx, 11),
    ("avx512bitalg", 7, 0, Reg::Ecx, 12),
    ("avx512vpopcntdq", 7, 0, Reg::Ecx, 14),
    ("la57", 7, 0, Reg::Ecx, 16),
    ("rdpid", 7, 0, Reg::Ecx, 22),
    ("movdiri", 7, 0, Reg::Ecx, 27),
    ("movdir64b", 7, 0, Reg::Ecx, 28),
    ("fsrm", 7, 0, Reg::Edx, 4),
    ("avx512_vp2intersect", 7, 0, Reg::Edx, 8),
    ("serialize", 7, 0, Reg::Edx, 14),
    ("hybrid", 7, 0, Reg::Edx, 15),
    ("amx_bf16", 7, 0, Reg::Edx, 22),
    ("avx512_fp16", 7, 0, Reg::Edx, 23),
    ("amx_tile", 7, 0, Reg::Edx, 24),
    ("amx_int8", 7, 0, Reg::Edx, 25),
    ("avx_vnni", 7, 1, Reg::Eax, 4),
    ("avx512_bf16", 7, 1, Reg::Eax, 5),
    ("amx_fp16", 7, 1, Reg::Eax, 21),
    ("avx_ifma", 7, 1, Reg::Eax, 23),
    ("avx_vnni_int8", 7, 1, Reg::Edx, 4),
    ("avx_ne_convert", 7, 1, Reg::Edx, 5),
    ("avx10", 7, 1, Reg::Edx, 19),
    ("lzcnt", 0x8000_0001, 0, Reg::Ecx, 5),
    ("sse4a", 0x8000_0001, 0, Reg::Ecx, 6),
    ("xop", 0x8000_0001, 0, Reg::Ecx, 11),
    ("fma4", 0x8000_0001, 0, Reg::Ecx, 16),
    ("clzero", 0x8000_0008, 0, Reg::Ebx, 0),
    ("wbnoinvd", 0x8000_0008, 0, Reg::Ebx, 9),
];

/// Flags computed from more than one bit: `avx10_1` (AVX10 bit and leaf 0x24 version ≥ 1).
const DERIVED_FLAGS: &[&str] = &["avx10_1"];

/// Every flag name a platform file may use in `requires` / `lacks`.
pub fn known_flag(name: &str) -> bool {
    FLAGS.iter().any(|f| f.0 == name) || DERIVED_FLAGS.contains(&name)
}

/// What identification needs from CPUID, decoded once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuidFacts {
    /// CPUID vendor string.
    pub vendor: String,
    /// Display family.
    pub family: u32,
    /// Display model.
    pub model: u32,
    /// Stepping.
    pub stepping: u32,
    /// Brand string, trimmed.
    pub brand: String,
    /// The feature flags present, by the names platform files use (`sse4_2`, `avx512f`, …).
    pub flags: BTreeSet<String>,
    /// Hypervisor vendor string (leaf 0x4000_0000) when the hypervisor bit is set.
    pub hypervisor: Option<String>,
    /// CPUID 0x16 base frequency, MHz (Intel Skylake and later; 0 or absent elsewhere).
    pub base_mhz: Option<u32>,
}

impl CpuidFacts {
    /// Decode what identification needs from `src` (this CPU, or a dump).
    pub fn read(src: &dyn CpuidSource) -> CpuidFacts {
        let id = raw(src);
        let vendor = id.get_vendor_info().map(|v| v.as_str().to_string()).unwrap_or_default();
        let (family, model, stepping) = id
            .get_feature_info()
            .map(|f| (f.family_id() as u32, f.model_id() as u32, f.stepping_id() as u32))
            .unwrap_or_default();
        let brand = id
            .get_processor_brand_string()
            .map(|b| b.as_str().trim().to_string())
            .unwrap_or_default();
        let max_basic = src.cpuid(0, 0)[0];
        let max_ext = src.cpuid(0x8000_0000, 0)[0];
        let max_sub7 = if max_basic >= 7 { src.cpuid(7, 0)[0] } else { 0 };
        let mut flags = BTreeSet::new();
        for &(name, leaf, sub, reg, bit) in FLAGS {
            let present = if leaf >= 0x8000_0000 {
                leaf <= max_ext && max_ext < 0x8000_1000
            } else {
                leaf <= max_basic
            };
            // Unsupported leaves return the highest leaf's data on Intel: never trust them.
            if !present || (leaf == 7 && sub > max_sub7) {
                continue;
            }
            if src.cpuid(leaf, sub)[reg as usize] >> bit & 1 == 1 {
                flags.insert(name.to_string());
            }
        }
        if flags.contains("avx10") && max_basic >= 0x24 && src.cpuid(0x24, 0)[1] & 0xff >= 1 {
            flags.insert("avx10_1".to_string());
        }
        let hypervisor = flags.contains("hypervisor").then(|| {
            let [_, b, c, d] = src.cpuid(0x4000_0000, 0);
            let bytes: Vec<u8> = [b, c, d].iter().flat_map(|r| r.to_le_bytes()).collect();
            hypervisor_name(String::from_utf8_lossy(&bytes).trim_matches(char::from(0)).trim())
        });
        let base_mhz = (max_basic >= 0x16 && vendor == "GenuineIntel")
            .then(|| src.cpuid(0x16, 0)[0] & 0xffff)
            .filter(|&m| m > 0);
        CpuidFacts {
            vendor,
            family,
            model,
            stepping,
            brand,
            flags,
            hypervisor,
            base_mhz,
        }
    }

    /// Whether the CPU has feature `flag`.
    pub fn has(&self, flag: &str) -> bool {
        self.flags.contains(flag)
    }

    /// SIMD ISAs present, in the names the peaks use (plus the notable extensions).
    pub fn isa(&self) -> Vec<String> {
        let mut v: Vec<String> = Vec::new();
        for (name, flag) in [
            ("sse", "sse"),
            ("sse2", "sse2"),
            ("sse3", "sse3"),
            ("ssse3", "ssse3"),
            ("sse4.1", "sse4_1"),
            ("sse4.2", "sse4_2"),
            ("avx", "avx"),
            ("fma", "fma"),
            ("avx2", "avx2"),
            ("avx512f", "avx512f"),
            ("avx512dq", "avx512dq"),
            ("avx512bw", "avx512bw"),
            ("avx512vl", "avx512vl"),
            ("avx512vnni", "avx512vnni"),
            ("avx512_bf16", "avx512_bf16"),
            ("avx512_fp16", "avx512_fp16"),
            ("avx_vnni", "avx_vnni"),
            ("avx10.1", "avx10_1"),
            ("amx_tile", "amx_tile"),
            ("amx_bf16", "amx_bf16"),
            ("amx_fp16", "amx_fp16"),
        ] {
            if self.has(flag) {
                v.push(name.to_string());
            }
        }
        v
    }

    /// Whether the peak ISA `isa` (`scalar`, `sse`, `avx`, `avx2`, `avx512`) is usable.
    pub fn has_isa(&self, isa: &str) -> bool {
        match isa {
            "scalar" | "sse" => self.has("sse2"),
            "avx" => self.has("avx"),
            "avx2" => self.has("avx2") && self.has("fma"),
            "avx512" => self.has("avx512f"),
            _ => false,
        }
    }
}

/// The hypervisor's name from its 12-byte CPUID signature (leaf 0x4000_0000): `KVMKVMKVM` is
/// KVM, said once. Names as raw-cpuid's `Hypervisor` gives them for the live CPU; an unknown
/// signature is kept as it is, "unknown" when empty.
pub fn hypervisor_name(signature: &str) -> String {
    let known = [
        ("KVMKVMKVM", "KVM"),
        ("Linux KVM Hv", "KVM (Hyper-V enlightenments)"),
        ("Microsoft Hv", "HyperV"),
        ("VMwareVMware", "VMware"),
        ("XenVMMXenVMM", "Xen"),
        ("TCGTCGTCGTCG", "QEMU"),
        ("bhyve bhyve", "Bhyve"),
        ("ACRNACRNACRN", "ACRN"),
        ("QNXQVMBSQG", "QNX"),
        ("lrpepyh  vr", "Parallels"),
        ("VBoxVBoxVBox", "VirtualBox"),
    ];
    let sig = signature.trim_matches(char::from(0)).trim();
    match known.iter().find(|(s, _)| *s == sig) {
        Some((_, name)) => (*name).to_string(),
        None if sig.is_empty() => "unknown".to_string(),
        None => sig.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hypervisors_are_named_once() {
        assert_eq!(hypervisor_name("KVMKVMKVM"), "KVM");
        assert_eq!(hypervisor_name("Microsoft Hv"), "HyperV");
        assert_eq!(hypervisor_name(""), "unknown");
        assert_eq!(hypervisor_name("NewHV"), "NewHV");
    }
    use std::collections::BTreeMap;

    struct Fake(BTreeMap<(u32, u32), [u32; 4]>);
    impl CpuidSource for Fake {
        fn cpuid(&self, leaf: u32, sub: u32) -> [u32; 4] {
            self.0.get(&(leaf, sub)).copied().unwrap_or([0; 4])
        }
    }

    #[test]
    fn flags_beyond_max_leaf_are_ignored() {
        // Max basic leaf 1: leaf 7 data (as Intel would return for an out-of-range leaf) must not count.
        let mut m = BTreeMap::new();
        m.insert((0, 0), [1, 0x756E6547, 0x6C65746E, 0x49656E69]);
        m.insert((1, 0), [0x306A9, 0, 1 << 28, 1 << 26]);
        m.insert((7, 0), [0, 1 << 16, 0, 0]);
        let f = CpuidFacts::read(&Fake(m.clone()));
        assert_eq!(f.vendor, "GenuineIntel");
        assert!(f.has("avx") && f.has("sse2"));
        assert!(!f.has("avx512f"));
        m.insert((0, 0), [7, 0x756E6547, 0x6C65746E, 0x49656E69]);
        let f = CpuidFacts::read(&Fake(m));
        assert!(f.has("avx512f"));
        assert_eq!((f.family, f.model, f.stepping), (6, 0x3a, 9));
    }

    #[test]
    fn avx10_1_needs_the_version_leaf() {
        let mut m = BTreeMap::new();
        m.insert((0, 0), [0x24, 0x756E6547, 0x6C65746E, 0x49656E69]);
        m.insert((7, 0), [1, 0, 0, 0]);
        m.insert((7, 1), [1 << 21, 0, 0, 1 << 19]);
        let f = CpuidFacts::read(&Fake(m.clone()));
        assert!(f.has("amx_fp16") && f.has("avx10") && !f.has("avx10_1"));
        m.insert((0x24, 0), [0, 0x70001, 0, 0]);
        assert!(CpuidFacts::read(&Fake(m)).has("avx10_1"));
    }
}
