//! Sockets, cores, threads, hybrid core types and caches: CPUID's view (leaves 0xB/0x1F, AMD
//! 0x8000_001E/0x8000_0008, cache leaves 4 / 0x8000_001D) cross-checked with the operating
//! system's (sysfs on a live machine; the `allcpu:` lines of a recorded dump).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use raw_cpuid::CacheType;

use super::Cache;
use super::cpuid::{CpuidSource, raw};
#[cfg(feature = "analysis")]
use super::dump::CpuidDump;

/// One logical CPU as the OS numbers it.
#[derive(Debug, Clone, PartialEq)]
pub struct OsCpu {
    pub cpu: u32,
    pub package: u32,
    /// Core id, unique within its package (and die).
    pub core: u32,
    pub die: u32,
    /// CPUID 0x1A core type (0x20 Atom/E, 0x40 Core/P) on hybrid parts.
    pub core_type: Option<u8>,
}

/// The OS's view of the CPUs and of which CPUs share each cache.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct OsTopology {
    pub cpus: Vec<OsCpu>,
    /// `(level, kind)` → the distinct groups of CPUs sharing one instance.
    pub cache_groups: BTreeMap<(u32, String), BTreeSet<Vec<u32>>>,
    /// `sysfs` or `dump`.
    pub source: String,
}

/// Parse a CPU list such as `0-3,8,10-11`. `None` on anything malformed.
pub fn parse_cpu_list(s: &str) -> Option<Vec<u32>> {
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (u32, u32) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
                if b < a || b - a > 1 << 20 {
                    return None;
                }
                v.extend(a..=b);
            }
            None => v.push(part.trim().parse().ok()?),
        }
    }
    Some(v)
}

/// What identification and the model use where sysfs has no topology: every available CPU
/// its own core of one package.
pub fn fallback_topology() -> OsTopology {
    OsTopology {
        cpus: (0..crate::util::available_cpus() as u32)
            .map(|cpu| OsCpu {
                cpu,
                package: 0,
                core: cpu,
                die: 0,
                core_type: None,
            })
            .collect(),
        cache_groups: BTreeMap::new(),
        source: "available_parallelism".into(),
    }
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

impl OsTopology {
    /// From `/sys/devices/system/cpu` (or a copy of it under `root`): online CPUs, their
    /// package/die/core ids, and cache sharing from `cache/index*/shared_cpu_list`.
    pub fn from_sysfs(root: &Path) -> Option<OsTopology> {
        let online = parse_cpu_list(&read_trim(&root.join("online"))?)?;
        let mut t = OsTopology {
            source: "sysfs".into(),
            ..Default::default()
        };
        for &cpu in &online {
            let d = root.join(format!("cpu{cpu}"));
            let num = |f: &str| read_trim(&d.join("topology").join(f)).and_then(|s| s.parse::<i64>().ok());
            t.cpus.push(OsCpu {
                cpu,
                package: num("physical_package_id").unwrap_or(0).max(0) as u32,
                core: num("core_id").unwrap_or(cpu as i64).max(0) as u32,
                die: num("die_id").unwrap_or(0).max(0) as u32,
                core_type: None,
            });
            for idx in 0..16 {
                let c = d.join("cache").join(format!("index{idx}"));
                let Some(level) = read_trim(&c.join("level")).and_then(|s| s.parse::<u32>().ok()) else {
                    break;
                };
                let kind = read_trim(&c.join("type")).unwrap_or_default().to_ascii_lowercase();
                if let Some(list) = read_trim(&c.join("shared_cpu_list")).and_then(|s| parse_cpu_list(&s)) {
                    t.cache_groups.entry((level, kind)).or_default().insert(list);
                }
            }
        }
        // Hybrid parts expose their core PMUs' CPU lists: cpu_core (P) and cpu_atom (E).
        let devices = root.join("../../cpu_core/cpus");
        if let (Some(p), Some(e)) = (
            read_trim(&devices).and_then(|s| parse_cpu_list(&s)),
            read_trim(&root.join("../../cpu_atom/cpus")).and_then(|s| parse_cpu_list(&s)),
        ) {
            for c in &mut t.cpus {
                c.core_type = if p.contains(&c.cpu) {
                    Some(0x40)
                } else if e.contains(&c.cpu) {
                    Some(0x20)
                } else {
                    None
                };
            }
        }
        (!t.cpus.is_empty()).then_some(t)
    }

    /// From a dump's `allcpu:` lines and each CPU's leaf 0x1A. Dumps carry no cache sharing.
    /// (Machine models from dumps come with `analysis`.)
    #[cfg(feature = "analysis")]
    pub fn from_dump(d: &CpuidDump) -> OsTopology {
        let cpus = d
            .cpus
            .iter()
            .map(|c| {
                let hybrid = c.cpuid(7, 0)[3] >> 15 & 1 == 1;
                OsCpu {
                    cpu: c.index,
                    package: c.package.unwrap_or(0),
                    core: c.core.unwrap_or(c.index),
                    die: 0,
                    core_type: hybrid.then(|| (c.cpuid(0x1A, 0)[0] >> 24) as u8).filter(|&t| t != 0),
                }
            })
            .collect();
        OsTopology {
            cpus,
            cache_groups: apic_cache_groups(&d.cpus),
            source: "dump".into(),
        }
    }
}

/// The x2APIC ID of a logical CPU (leaf 0xB EDX), else the initial APIC ID (leaf 1 EBX[31:24]).
fn apic_id(src: &dyn CpuidSource) -> u32 {
    if src.cpuid(0, 0)[0] >= 0xB && src.cpuid(0xB, 0)[1] & 0xffff != 0 {
        src.cpuid(0xB, 0)[3]
    } else {
        src.cpuid(1, 0)[1] >> 24
    }
}

/// Which recorded CPUs share each cache, as the kernel derives `shared_cpu_list`: CPUID's
/// sharing field (leaf 4 / 0x8000_001D EAX[25:14]) is the number of APIC IDs one instance
/// spans, so CPUs whose APIC IDs agree above that many bits share it. The field alone is only
/// a maximum (128 on a 48-thread part); counting the CPUs actually present gives the truth.
/// Empty when the dump lists no CPUs or holds no cache leaves.
pub fn apic_cache_groups(cpus: &[impl CpuidSource]) -> BTreeMap<(u32, String), BTreeSet<Vec<u32>>> {
    let mut groups: BTreeMap<(u32, String), BTreeMap<u32, Vec<u32>>> = BTreeMap::new();
    for (index, c) in cpus.iter().enumerate() {
        let apic = apic_id(c);
        let Some(iter) = raw(c).get_cache_parameters() else { continue };
        for p in iter.take(16) {
            let kind = match p.cache_type() {
                CacheType::Data => "data",
                CacheType::Unified => "unified",
                _ => continue,
            };
            let span = (p.max_cores_for_cache() as u32).max(1);
            let shift = 32 - (span - 1).leading_zeros(); // ceil(log2(span))
            let tag = apic.checked_shr(shift).unwrap_or(0);
            groups
                .entry((p.level() as u32, kind.to_string()))
                .or_default()
                .entry(tag)
                .or_default()
                .push(index as u32);
        }
    }
    groups.into_iter().map(|(k, by_tag)| (k, by_tag.into_values().collect())).collect()
}

/// What CPUID says about one package.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuidTopology {
    pub threads_per_core: Option<u32>,
    pub threads_per_package: Option<u32>,
}

impl CpuidTopology {
    pub fn read(src: &dyn CpuidSource) -> CpuidTopology {
        let max_basic = src.cpuid(0, 0)[0];
        let max_ext = src.cpuid(0x8000_0000, 0)[0];
        let vendor_amd = src.cpuid(0, 0)[1] == 0x6874_7541; // "Auth"
        let mut t = CpuidTopology::default();
        // Leaf 0x1F (preferred) or 0xB: EBX[15:0] = logical CPUs at and below each level.
        for leaf in [0x1F, 0xB] {
            if max_basic < leaf || src.cpuid(leaf, 0)[1] & 0xffff == 0 {
                continue;
            }
            for sub in 0..8 {
                let [_, b, c, _] = src.cpuid(leaf, sub);
                let kind = (c >> 8) & 0xff;
                if kind == 0 {
                    break;
                }
                let n = b & 0xffff;
                if kind == 1 {
                    t.threads_per_core = Some(n.max(1));
                }
                t.threads_per_package = Some(t.threads_per_package.unwrap_or(0).max(n));
            }
            break;
        }
        if vendor_amd && (0x8000_0008..0x8000_1000).contains(&max_ext) {
            // NC: logical CPUs per package minus one.
            let nc = (src.cpuid(0x8000_0008, 0)[2] & 0xff) + 1;
            if t.threads_per_package.is_none() {
                t.threads_per_package = Some(nc);
            }
            if (0x8000_001E..0x8000_1000).contains(&max_ext) && t.threads_per_core.is_none() {
                t.threads_per_core = Some(((src.cpuid(0x8000_001E, 0)[1] >> 8) & 0xff) + 1);
            }
        }
        if t.threads_per_package.is_none() && max_basic >= 1 {
            let [_, b, _, d] = src.cpuid(1, 0);
            if d >> 28 & 1 == 1 {
                t.threads_per_package = Some(((b >> 16) & 0xff).max(1));
            }
        }
        t
    }
}

/// The counts the machine model reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Counts {
    pub sockets: u32,
    pub cores: u32,
    pub threads: u32,
    pub smt: bool,
    pub warnings: Vec<String>,
}

/// Counts from the OS view, cross-checked with CPUID's per-package figures.
pub fn counts(os: &OsTopology, id: &CpuidTopology) -> Counts {
    // Distinct packages and cores: sorted vectors, not sets of yet other key types (each
    // key type is its own copy of the B-tree code in a regions-only build).
    let mut packages: Vec<u32> = os.cpus.iter().map(|c| c.package).collect();
    crate::util::sort_by(&mut packages, Ord::cmp);
    packages.dedup();
    let mut cores: Vec<(u32, u32, u32)> = os.cpus.iter().map(|c| (c.package, c.die, c.core)).collect();
    crate::util::sort_by(&mut cores, Ord::cmp);
    cores.dedup();
    let threads = os.cpus.len() as u32;
    let mut c = Counts {
        sockets: packages.len().max(1) as u32,
        cores: cores.len().max(1) as u32,
        threads,
        smt: threads > cores.len() as u32,
        warnings: Vec::new(),
    };
    if let Some(per_pkg) = id.threads_per_package {
        let seen_per_pkg = threads / c.sockets;
        if per_pkg != seen_per_pkg {
            c.warnings.push(format!(
                "CPUID reports {per_pkg} logical CPUs per package, the {} shows {seen_per_pkg} \
                 (a virtual machine, CPUs offline, or a partial dump); counts follow the {}",
                os.source, os.source
            ));
        }
    }
    if let Some(tpc) = id.threads_per_core
        && tpc > 1
        && !c.smt
    {
        c.warnings.push(format!(
            "CPUID reports {tpc} threads per core but no two visible CPUs share a core (SMT off, or hidden by a hypervisor)"
        ));
    }
    c
}

/// Hybrid core types (`P`/`E`) and their CPUs; empty on non-hybrid parts.
pub fn core_types(os: &OsTopology) -> Vec<super::CoreType> {
    // The kinds in name order, as a map keyed by them would give.
    let mut by: [(&str, Vec<u32>); 3] = [("E", Vec::new()), ("P", Vec::new()), ("other", Vec::new())];
    for c in &os.cpus {
        let kind = match c.core_type {
            Some(0x40) => 1,
            Some(0x20) => 0,
            Some(_) => 2,
            None => continue,
        };
        by[kind].1.push(c.cpu);
    }
    if by.iter().filter(|(_, cpus)| !cpus.is_empty()).count() < 2 {
        return Vec::new();
    }
    by.into_iter()
        .filter(|(_, cpus)| !cpus.is_empty())
        .map(|(k, cpus)| super::CoreType { kind: k.to_string(), cpus })
        .collect()
}

/// Data and unified caches from CPUID leaf 4 (Intel) / 0x8000_001D (AMD); sharing from the OS
/// where it knows (sysfs), else CPUID's maximum addressable IDs (an upper bound).
pub fn caches(src: &dyn CpuidSource, os: &OsTopology) -> Vec<Cache> {
    let id = raw(src);
    let mut out: Vec<Cache> = Vec::new();
    let Some(iter) = id.get_cache_parameters() else { return out };
    for p in iter.take(16) {
        let kind = match p.cache_type() {
            CacheType::Data => "data",
            CacheType::Unified => "unified",
            _ => continue,
        };
        let level = p.level() as u32;
        let line = p.coherency_line_size() as u32;
        let ways = p.associativity() as u32;
        let sets = p.sets() as u32;
        let size = ways as u64 * p.physical_line_partitions() as u64 * line as u64 * sets as u64;
        if size == 0 || out.iter().any(|c| c.level == level) {
            continue;
        }
        let groups = os.cache_groups.get(&(level, kind.to_string()));
        let (shared, source, instances) = match groups.and_then(|g| g.iter().next().map(|f| (f.len(), g.len()))) {
            Some((n, inst)) => (n as u32, if os.source == "dump" { "apic ids" } else { "sysfs" }, Some(inst as u32)),
            None => {
                let max = p.max_cores_for_cache() as u32;
                let threads = os.cpus.len() as u32;
                (max, "cpuid", (max > 0).then(|| threads.div_ceil(max).max(1)))
            }
        };
        out.push(Cache {
            level,
            kind: kind.to_string(),
            size_bytes: size,
            line_bytes: line,
            ways,
            sets,
            shared_by_threads: shared,
            shared_by_source: source.to_string(),
            instances,
        });
    }
    crate::util::sort_by_key(&mut out, |c| c.level);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(parse_cpu_list("0-3,8,10-11").unwrap(), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpu_list("5").unwrap(), vec![5]);
        assert!(parse_cpu_list("3-1").is_none());
        assert!(parse_cpu_list("a").is_none());
    }

    #[test]
    fn sysfs_copy_gives_smt_and_sharing() {
        let dir = tempfile::tempdir().unwrap();
        let r = dir.path();
        std::fs::write(r.join("online"), "0-3\n").unwrap();
        // 2 cores × 2 threads, L2 per core, L3 shared by all.
        for cpu in 0..4u32 {
            let t = r.join(format!("cpu{cpu}/topology"));
            std::fs::create_dir_all(&t).unwrap();
            std::fs::write(t.join("physical_package_id"), "0").unwrap();
            std::fs::write(t.join("core_id"), format!("{}", cpu % 2)).unwrap();
            for (i, (lvl, list)) in [(2, if cpu % 2 == 0 { "0,2" } else { "1,3" }), (3, "0-3")].iter().enumerate() {
                let c = r.join(format!("cpu{cpu}/cache/index{i}"));
                std::fs::create_dir_all(&c).unwrap();
                std::fs::write(c.join("level"), lvl.to_string()).unwrap();
                std::fs::write(c.join("type"), "Unified").unwrap();
                std::fs::write(c.join("shared_cpu_list"), list).unwrap();
            }
        }
        let os = OsTopology::from_sysfs(r).unwrap();
        let c = counts(
            &os,
            &CpuidTopology {
                threads_per_core: Some(2),
                threads_per_package: Some(4),
            },
        );
        assert_eq!((c.sockets, c.cores, c.threads, c.smt), (1, 2, 4, true));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);
        let l2 = &os.cache_groups[&(2, "unified".to_string())];
        assert_eq!(l2.len(), 2);
        assert_eq!(os.cache_groups[&(3, "unified".to_string())].len(), 1);
        // A VM showing fewer CPUs than CPUID claims gets a warning.
        let c = counts(
            &os,
            &CpuidTopology {
                threads_per_core: Some(2),
                threads_per_package: Some(32),
            },
        );
        assert_eq!(c.warnings.len(), 1);
    }
}
