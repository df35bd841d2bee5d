//! Which platform file describes this CPU. A family/model match counts only when the feature
//! flags agree with the platform's `requires`/`lacks` (hypervisors often report a wrong model);
//! otherwise identify by flags and cache sizes, and say which candidates remain. `--platform`
//! overrides it for the whole process ([`set_platform`]).

use std::path::Path;

use super::cpuid::{CpuidFacts, LiveCpuid};
use super::topology::{self, OsTopology};
use super::{Cache, IdentifiedBy, Platform};
use crate::error::Result;

/// `--platform` of the running command, for every command that measures this machine: the
/// machine model, the perf events and the ceilings' theoretical peaks all follow it.
pub(crate) static PLATFORM_OVERRIDE: std::sync::OnceLock<Platform> = std::sync::OnceLock::new();

/// Take `--platform NAME|FILE` for the rest of the process (a bad spec: exit-2 error).
pub fn set_platform(spec: &str) -> Result<()> {
    let p = Platform::load(spec)?;
    let _ = PLATFORM_OVERRIDE.set(p);
    Ok(())
}

/// The spec a `DetectOptions` without its own `--platform` falls back to.
#[cfg(feature = "analysis")]
#[cfg(feature = "analysis")]
pub(crate) fn platform_override_key() -> Option<String> {
    PLATFORM_OVERRIDE.get().map(|p| p.key.clone())
}

/// This CPU's platform, identified the one way `roofline machine` does it (model checked
/// against feature flags, then flags and cache sizes), for commands that need only the
/// platform table (events, perf, ceilings). None for a CPU no platform file describes.
pub fn this_platform() -> Option<Platform> {
    if let Some(p) = PLATFORM_OVERRIDE.get() {
        return Some(p.clone());
    }
    let os = OsTopology::from_sysfs(Path::new("/sys/devices/system/cpu")).unwrap_or_else(topology::fallback_topology);
    let facts = CpuidFacts::read(&LiveCpuid);
    let caches = topology::caches(&LiveCpuid, &os);
    identify(&facts, &caches, &Platform::embedded()).platform
}

#[derive(Debug, Clone, PartialEq)]
pub struct Identification {
    /// The chosen platform; `None`: generic model from CPUID alone.
    pub platform: Option<Platform>,
    pub identified_by: IdentifiedBy,
    /// Platforms the flags and caches could not rule out, besides the chosen one.
    pub candidates: Vec<String>,
    pub warnings: Vec<String>,
}

/// Why a platform's flags disagree with the CPU, or `None` when they agree.
pub fn flag_conflict(p: &Platform, f: &CpuidFacts) -> Option<String> {
    // A required entry `a|b` is met by either flag (a hypervisor may hide one of two flags that
    // each tell the generation apart).
    let missing: Vec<&str> = p
        .identify
        .requires
        .iter()
        .filter(|r| !r.split('|').any(|a| f.has(a)))
        .map(String::as_str)
        .collect();
    let extra: Vec<&str> = p.identify.lacks.iter().filter(|l| f.has(l)).map(String::as_str).collect();
    let mut why = Vec::new();
    if !missing.is_empty() {
        why.push(format!("lacks {} which {} has", missing.join(", "), p.name));
    }
    if !extra.is_empty() {
        why.push(format!("has {} which {} lacks", extra.join(", "), p.name));
    }
    (!why.is_empty()).then(|| why.join("; "))
}

fn in_range(r: Option<[u32; 2]>, kib: Option<u64>) -> bool {
    match (r, kib) {
        (Some([lo, hi]), Some(k)) => (lo as u64..=hi as u64).contains(&k),
        _ => true,
    }
}

fn cache_kib(caches: &[Cache], level: u32) -> Option<u64> {
    caches.iter().find(|c| c.level == level).map(|c| c.size_bytes / 1024)
}

/// Identify `facts` among `platforms` (the embedded ones, normally).
pub fn identify(facts: &CpuidFacts, caches: &[Cache], platforms: &[Platform]) -> Identification {
    let mut warnings = Vec::new();
    let same_family = |p: &&Platform| p.identify.vendor == facts.vendor && p.identify.families.contains(&facts.family);
    // 1. Family/model, confirmed by flags.
    for p in platforms
        .iter()
        .filter(same_family)
        .filter(|p| p.identify.models.contains(&facts.model))
    {
        match flag_conflict(p, facts) {
            None => {
                return Identification {
                    platform: Some(p.clone()),
                    identified_by: IdentifiedBy::CpuidModel,
                    candidates: Vec::new(),
                    warnings,
                };
            }
            Some(why) => warnings.push(format!(
                "CPUID says family {:#x} model {:#x} ({}), but this CPU {why}: the model is not trusted (a hypervisor may report a wrong one); identifying by feature flags",
                facts.family, facts.model, p.name
            )),
        }
    }
    // 2. Flags, then cache sizes.
    let by_flags: Vec<&Platform> = platforms
        .iter()
        .filter(same_family)
        .filter(|p| flag_conflict(p, facts).is_none())
        .collect();
    let (l2, l3) = (cache_kib(caches, 2), cache_kib(caches, 3));
    let by_caches: Vec<&Platform> = by_flags
        .iter()
        .copied()
        .filter(|p| in_range(p.identify.l2_kib, l2) && in_range(p.identify.l3_kib, l3))
        .collect();
    let mut pool = if by_caches.is_empty() { by_flags } else { by_caches };
    if pool.is_empty() {
        warnings.push(format!(
            "unknown CPU ({} family {:#x} model {:#x}, '{}'): no platform file matches; using a generic model from CPUID alone \
             (FP pipes guessed; pass --platform NAME|FILE to choose one)",
            facts.vendor, facts.family, facts.model, facts.brand
        ));
        return Identification {
            platform: None,
            identified_by: IdentifiedBy::Generic,
            candidates: Vec::new(),
            warnings,
        };
    }
    // Highest priority first; stable on file order for ties.
    crate::util::sort_by_key(&mut pool, |p| std::cmp::Reverse(p.identify.priority));
    let chosen = pool[0].clone();
    let candidates: Vec<String> = pool[1..].iter().map(|p| p.key.clone()).collect();
    if !candidates.is_empty() {
        warnings.push(format!(
            "feature flags and cache sizes cannot separate {} from {}: assuming {} (pass --platform to choose)",
            chosen.key,
            candidates.join(", "),
            chosen.key
        ));
    }
    Identification {
        platform: Some(chosen),
        identified_by: IdentifiedBy::FeatureFlags,
        candidates,
        warnings,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(vendor: &str, family: u32, model: u32, flags: &[&str]) -> CpuidFacts {
        CpuidFacts {
            vendor: vendor.into(),
            family,
            model,
            flags: flags.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    fn cache(level: u32, kib: u64) -> Cache {
        Cache {
            level,
            kind: "unified".into(),
            size_bytes: kib * 1024,
            line_bytes: 64,
            ways: 8,
            sets: (kib * 1024 / 512) as u32,
            shared_by_threads: 1,
            shared_by_source: "cpuid".into(),
            instances: None,
        }
    }

    #[test]
    fn model_counts_only_when_flags_agree() {
        let all = Platform::embedded();
        let rkl = facts("GenuineIntel", 6, 0xA7, &["avx2", "avx512f", "avx512vbmi2", "gfni"]);
        let id = identify(&rkl, &[cache(2, 512)], &all);
        assert_eq!(
            (id.platform.unwrap().key.as_str(), id.identified_by),
            ("tgl", IdentifiedBy::CpuidModel)
        );
        // The same model with SPR's flags (AMX, FP16, no AMX-FP16): SPR by flags, model rejected.
        let spr_flags = ["avx2", "avx512f", "avx512vbmi2", "gfni", "amx_tile", "avx512_fp16"];
        let id = identify(&facts("GenuineIntel", 6, 0xA7, &spr_flags), &[cache(2, 2048)], &all);
        assert_eq!(
            (id.platform.unwrap().key.as_str(), id.identified_by),
            ("spr", IdentifiedBy::FeatureFlags)
        );
        assert!(id.warnings[0].contains("model 0xa7"), "{:?}", id.warnings);
    }

    #[test]
    fn caches_narrow_and_ambiguity_is_reported() {
        let all = Platform::embedded();
        let hsw_flags = ["avx", "avx2", "fma", "f16c"];
        let id = identify(
            &facts("GenuineIntel", 6, 0xFE, &hsw_flags),
            &[cache(2, 256), cache(3, 30 * 1024)],
            &all,
        );
        assert_eq!(id.platform.unwrap().key, "hsx");
        assert!(id.candidates.is_empty());
        // No cache information: both Haswells remain; the client part (priority 1) is assumed.
        let id = identify(&facts("GenuineIntel", 6, 0xFE, &hsw_flags), &[], &all);
        assert_eq!(id.platform.unwrap().key, "hsw");
        assert_eq!(id.candidates, vec!["hsx".to_string()]);
        assert!(id.warnings.iter().any(|w| w.contains("cannot separate")));
    }

    #[test]
    fn unknown_vendor_is_generic_with_a_warning() {
        let id = identify(&facts("HygonGenuine", 0x18, 1, &["avx2", "fma"]), &[], &Platform::embedded());
        assert!(id.platform.is_none());
        assert_eq!(id.identified_by, IdentifiedBy::Generic);
        assert!(id.warnings[0].contains("unknown CPU"));
    }

    #[test]
    fn granite_rapids_with_amx_fp16_hidden_is_known_by_avx10() {
        // A KVM guest seen here: model 0xa7 (Rocket Lake), AMX and AVX10.1 shown, AMX-FP16 hidden,
        // 480 MiB L3. Either GNR-only flag identifies GNR; SPR (which lacks AVX10.1) does not fit.
        let all = Platform::embedded();
        let base = ["avx2", "avx512f", "avx512_fp16", "amx_tile", "amx_bf16"];
        for extra in [&["avx10", "avx10_1"][..], &["amx_fp16"][..]] {
            let flags: Vec<&str> = base.iter().chain(extra).copied().collect();
            let id = identify(
                &facts("GenuineIntel", 6, 0xA7, &flags),
                &[cache(2, 2048), cache(3, 480 * 1024)],
                &all,
            );
            assert_eq!(
                (id.platform.map(|p| p.key), id.identified_by),
                (Some("gnr".to_string()), IdentifiedBy::FeatureFlags),
                "{extra:?}"
            );
        }
        // Neither: SPR/EMR by flags, never GNR.
        let id = identify(&facts("GenuineIntel", 6, 0xA7, &base), &[cache(2, 2048)], &all);
        assert_ne!(id.platform.map(|p| p.key).as_deref(), Some("gnr"));
    }
}
