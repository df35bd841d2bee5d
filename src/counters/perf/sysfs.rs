//! Where the kernel describes its PMUs: `/sys/bus/event_source/devices/<pmu>/` with `type`
//! (the `perf_event_attr.type` of a dynamic PMU), `cpumask` (the CPUs an uncore PMU counts on),
//! `format/<term>` (where a term's bits go in `config`, `config1`, `config2`) and
//! `events/<alias>` (named encodings, as `perf list` shows them).

use std::path::Path;

use crate::error::{Error, Result};

/// Where the kernel lists PMUs.
pub const SYSFS_PMUS: &str = "/sys/bus/event_source/devices";

/// A `perf_name` split into its PMU and event term: `cpu_core/cycles/` → (`cpu_core`,
/// `cycles`), `instructions` → (none, `instructions`), `uncore_imc/data_reads/` →
/// (`uncore_imc`, `data_reads`). `None` for anything with modifiers or terms.
pub fn split_perf_name(name: &str) -> Option<(Option<&str>, &str)> {
    let plain = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
    match name.strip_suffix('/').and_then(|n| n.split_once('/')) {
        Some((pmu, term)) if plain(pmu) && plain(term) => Some((Some(pmu), term)),
        Some(_) => None,
        None if plain(name) => Some((None, name)),
        None => None,
    }
}

/// Which `perf_event_attr` field a sysfs format names, and the bit ranges (low, high) that
/// hold a term's value, lowest bits first: `config:0-7,32-35` → (0, [(0, 7), (32, 35)]).
pub fn parse_format(text: &str) -> Option<(usize, Vec<(u32, u32)>)> {
    let (field, bits) = text.trim().split_once(':')?;
    let field = match field {
        "config" => 0,
        "config1" => 1,
        "config2" => 2,
        _ => return None,
    };
    let mut ranges = Vec::new();
    for r in bits.split(',') {
        let (lo, hi) = match r.split_once('-') {
            Some((a, b)) => (a.trim().parse().ok()?, b.trim().parse().ok()?),
            None => {
                let b = r.trim().parse().ok()?;
                (b, b)
            }
        };
        if hi < lo || hi > 63 {
            return None;
        }
        ranges.push((lo, hi));
    }
    Some((field, ranges))
}

/// Scatter `value` over `ranges` (lowest bits into the first range), as perf does with a
/// format term. `None` when the value does not fit.
fn place_bits(value: u64, ranges: &[(u32, u32)]) -> Option<u64> {
    let (mut out, mut v) = (0u64, value);
    for &(lo, hi) in ranges {
        let width = hi - lo + 1;
        let mask = if width == 64 { u64::MAX } else { (1u64 << width) - 1 };
        out |= (v & mask) << lo;
        v = if width == 64 { 0 } else { v >> width };
    }
    (v == 0).then_some(out)
}

/// Encode a PMU's sysfs event alias the way perf does: `<pmu_dir>/events/<alias>` holds terms
/// (`event=0xff,umask=0x20`), each placed by `<pmu_dir>/format/<term>` (`config:0-7`).
/// Returns `[config, config1, config2]`.
pub fn sysfs_alias_config(pmu_dir: &Path, alias: &str) -> Result<[u64; 3]> {
    let file = pmu_dir.join("events").join(alias);
    let text = std::fs::read_to_string(&file).map_err(|e| Error::io(format!("reading {}", file.display()), e))?;
    let bad = |why: String| {
        Error::unavailable(
            format!("{}: {why} (in {:?})", file.display(), text.trim()),
            "this kernel's event alias is not a fixed encoding; report this with `perf list -v`",
        )
    };
    let mut config = [0u64; 3];
    for term in text.trim().split(',').map(str::trim).filter(|t| !t.is_empty()) {
        let (name, value) = term.split_once('=').unwrap_or((term, "1"));
        let value = value.trim();
        let parsed = match value.strip_prefix("0x").or_else(|| value.strip_prefix("0X")) {
            Some(hex) => u64::from_str_radix(hex, 16).ok(),
            None => value.parse().ok(),
        };
        let Some(value) = parsed else {
            return Err(bad(format!("term {name} has no fixed value ({value})")));
        };
        // perf's built-in terms set the fields directly.
        if let Some(i) = ["config", "config1", "config2"].iter().position(|f| *f == name) {
            config[i] |= value;
            continue;
        }
        let fmt_file = pmu_dir.join("format").join(name);
        let fmt = std::fs::read_to_string(&fmt_file).map_err(|e| Error::io(format!("reading {}", fmt_file.display()), e))?;
        let (field, ranges) = parse_format(&fmt).ok_or_else(|| bad(format!("format {name} is {:?}", fmt.trim())))?;
        let bits = place_bits(value, &ranges).ok_or_else(|| bad(format!("{name}={value:#x} does not fit {}", fmt.trim())))?;
        config[field] |= bits;
    }
    Ok(config)
}

/// `/sys/bus/event_source/devices/<pmu>/type`.
pub fn pmu_type(pmus: &Path, pmu: &str) -> Result<u32> {
    let path = pmus.join(pmu).join("type");
    let text = std::fs::read_to_string(&path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    text.trim().parse().map_err(|_| {
        Error::unavailable(
            format!("{}: not a PMU type number ({:?})", path.display(), text.trim()),
            "the kernel's perf sysfs is unusual; report this",
        )
    })
}

/// Parse a sysfs CPU list (`0`, `0,64`, `0-3,8`).
pub fn parse_cpu_list(s: &str) -> Option<Vec<usize>> {
    let mut out = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        if let Some((a, b)) = part.split_once('-') {
            let (a, b): (usize, usize) = (a.trim().parse().ok()?, b.trim().parse().ok()?);
            if b < a || b - a > 1 << 16 {
                return None;
            }
            out.extend(a..=b);
        } else {
            out.push(part.trim().parse().ok()?);
        }
    }
    Some(out)
}

/// PMU instances for a PMU name: `uncore_imc` → `uncore_imc_0`, `uncore_imc_1`, …;
/// an exact directory name matches itself.
pub fn pmu_instances(pmus: &Path, pmu: &str) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(pmus) else { return vec![] };
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok().and_then(|e| e.file_name().into_string().ok()))
        .filter(|n| {
            n == pmu
                || n.strip_prefix(pmu)
                    .and_then(|rest| rest.strip_prefix('_'))
                    .is_some_and(|s| s.chars().all(|c| c.is_ascii_digit()) && !s.is_empty())
        })
        .collect();
    crate::util::sort_by(&mut names, |a, b| (a.len(), a).cmp(&(b.len(), b)));
    names
}

/// The core PMU: `cpu` (Intel, AMD) or `cpu_core` (hybrid parts' P-cores).
/// A VM without PMU passthrough has neither; say so and point at the trace backend.
pub fn core_pmu(pmus: &Path) -> Result<String> {
    for name in ["cpu", "cpu_core"] {
        if pmus.join(name).join("type").is_file() {
            return Ok(name.to_string());
        }
    }
    let mut present: Vec<String> = std::fs::read_dir(pmus)
        .map(|d| d.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default();
    crate::util::sort_by(&mut present, Ord::cmp);
    Err(Error::unavailable(
        format!(
            "no hardware core PMU: {} has only [{}] (a VM without PMU passthrough?)",
            pmus.display(),
            present.join(", ")
        ),
        "use `--backend trace` (exact W and core-side Q by tracing), or run on bare metal / a VM with the vPMU enabled",
    ))
}
