//! What the ceilings need to know about this machine: identity (for the cache fingerprint),
//! the data-cache hierarchy (to size working sets) and the platform table (theoretical peaks).

use crate::machine::Platform;
use crate::schema::ceilings::{CacheLevel, Host};

/// Identification and fingerprint of the machine summary (`schema::ceilings::Host`).
impl Host {
    pub fn detect() -> Host {
        let (vendor, brand, family, model, stepping, hypervisor) = cpuid_identity();
        let logical_cpus = crate::util::available_cpus() as u32;
        let (caches, caches_source) = match sysfs_caches() {
            Some(c) if !c.is_empty() => (c, "sysfs".to_string()),
            _ => (
                vec![
                    CacheLevel {
                        level: 1,
                        size_bytes: 32 << 10,
                        shared_by_threads: 1,
                    },
                    CacheLevel {
                        level: 2,
                        size_bytes: 1 << 20,
                        shared_by_threads: 1,
                    },
                    CacheLevel {
                        level: 3,
                        size_bytes: 32 << 20,
                        shared_by_threads: logical_cpus,
                    },
                ],
                "default".to_string(),
            ),
        };
        let microarchitecture = crate::machine::this_platform().map(|p| p.key);
        let mut h = Host {
            fingerprint: String::new(),
            vendor,
            brand,
            family,
            model,
            stepping,
            logical_cpus,
            caches,
            microarchitecture,
            hypervisor,
            caches_source,
        };
        h.fingerprint = h.compute_fingerprint();
        h
    }

    /// A stable hash of what makes measured ceilings valid on this machine.
    pub fn compute_fingerprint(&self) -> String {
        let mut text = format!(
            "{}|{}|{:x}|{:x}|{:x}|{}",
            self.vendor, self.brand, self.family, self.model, self.stepping, self.logical_cpus
        );
        for c in &self.caches {
            text.push_str(&format!("|L{}:{}:{}", c.level, c.size_bytes, c.shared_by_threads));
        }
        // FNV-1a, 64 bits: no dependency for a fingerprint.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in text.bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }

    pub fn cache(&self, level: u32) -> Option<&CacheLevel> {
        self.caches.iter().find(|c| c.level == level)
    }

    /// The last-level cache's total size on this machine (one instance per sharing group).
    #[cfg(feature = "analysis")]
    pub fn llc_total_bytes(&self) -> u64 {
        match self.caches.iter().max_by_key(|c| c.level) {
            Some(c) => {
                let instances = (self.logical_cpus as u64).div_ceil(c.shared_by_threads.max(1) as u64).max(1);
                c.size_bytes * instances
            }
            None => 32 << 20,
        }
    }

    /// The platform table of this host (identified once, in [`Host::detect`]).
    pub fn platform(&self) -> Option<Platform> {
        let key = self.microarchitecture.as_deref()?;
        Platform::embedded().into_iter().find(|p| p.key == key)
    }
}

#[cfg(target_arch = "x86_64")]
fn cpuid_identity() -> (String, String, u32, u32, u32, Option<String>) {
    let c = raw_cpuid::CpuId::new();
    let vendor = c.get_vendor_info().map(|v| v.as_str().to_string()).unwrap_or_default();
    let brand = c
        .get_processor_brand_string()
        .map(|b| b.as_str().trim().to_string())
        .unwrap_or_default();
    let (f, m, s) = c
        .get_feature_info()
        .map(|fi| (fi.family_id() as u32, fi.model_id() as u32, fi.stepping_id() as u32))
        .unwrap_or((0, 0, 0));
    let hv = c.get_hypervisor_info().map(|h| format!("{:?}", h.identify()));
    (vendor, brand, f, m, s, hv)
}

#[cfg(not(target_arch = "x86_64"))]
fn cpuid_identity() -> (String, String, u32, u32, u32, Option<String>) {
    (String::new(), String::new(), 0, 0, 0, None)
}

/// Parse sysfs cache sizes like `32K`, `1024K`, `32M`.
pub fn parse_sysfs_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' | 'k' => (&s[..s.len() - 1], 1024),
        'M' | 'm' => (&s[..s.len() - 1], 1024 * 1024),
        'G' | 'g' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    num.parse::<u64>().ok().and_then(|n| n.checked_mul(mult))
}

/// Number of CPUs in a sysfs CPU list like `0-3,8-11`.
pub fn count_cpu_list(s: &str) -> Option<u32> {
    let mut n = 0u32;
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.parse().ok()?, b.parse().ok()?);
                n = n.checked_add(b.checked_sub(a)?.checked_add(1)?)?;
            }
            None => {
                part.parse::<u32>().ok()?;
                n = n.checked_add(1)?;
            }
        }
    }
    Some(n)
}

fn sysfs_caches() -> Option<Vec<CacheLevel>> {
    let cpu = roofline_kernels::cpus::allowed_cpus().first().copied().unwrap_or(0);
    let base = format!("/sys/devices/system/cpu/cpu{cpu}/cache");
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&base).ok()?.flatten() {
        let p = entry.path();
        if !p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("index")) {
            continue;
        }
        let read = |f: &str| std::fs::read_to_string(p.join(f)).ok();
        let kind = read("type").unwrap_or_default();
        if kind.trim() == "Instruction" {
            continue;
        }
        let level: u32 = read("level").and_then(|l| l.trim().parse().ok())?;
        let size = read("size").and_then(|s| parse_sysfs_size(&s))?;
        let shared = read("shared_cpu_list").and_then(|s| count_cpu_list(&s)).unwrap_or(1);
        out.push(CacheLevel {
            level,
            size_bytes: size,
            shared_by_threads: shared.max(1),
        });
    }
    crate::util::sort_by_key(&mut out, |c| c.level);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_formats() {
        assert_eq!(parse_sysfs_size("32K\n"), Some(32768));
        assert_eq!(parse_sysfs_size("32M"), Some(32 << 20));
        assert_eq!(parse_sysfs_size("x"), None);
        assert_eq!(parse_sysfs_size("99999999999999999G"), None);
        assert_eq!(count_cpu_list("0-3,8-11\n"), Some(8));
        assert_eq!(count_cpu_list("5"), Some(1));
        assert_eq!(count_cpu_list("3-1"), None);
        assert_eq!(count_cpu_list("0-4294967295"), None);
    }

    #[test]
    fn fingerprint_changes_with_the_machine() {
        let h = Host::detect();
        assert_eq!(h.fingerprint, h.compute_fingerprint());
        let mut other = h.clone();
        other.caches[0].size_bytes += 1024;
        assert_ne!(other.compute_fingerprint(), h.fingerprint);
        let mut other = h.clone();
        other.brand.push('X');
        assert_ne!(other.compute_fingerprint(), h.fingerprint);
    }
}
