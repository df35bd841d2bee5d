//! Metric paths of a point: `flops.total`, `flops.effective`, `flops.fma`, `flops.by_class.<class>`,
//! `bytes.<level>`, `ai.<level>`, `gbs.<level>`, `seconds`, `gflops`, `roof_fraction`, `threads`,
//! and on a merged job's points `imbalance.seconds` and `imbalance.flops` (the slowest rank's
//! T, the largest W, over the mean: 1 is perfect balance); with `--energy`, `energy.joules`
//! (joules per run of the whole domain) and `energy.gflop_per_joule`, judged like the times,
//! from their samples.

use crate::schema::Point;
use crate::schema::report::level;

use super::glob::glob_match;

/// Paths with no key part.
pub const FIXED: [&str; 9] = [
    "energy.joules",
    "energy.gflop_per_joule",
    "flops.total",
    "flops.effective",
    "flops.fma",
    "seconds",
    "gflops",
    "roof_fraction",
    "threads",
];
/// Paths followed by a key (a class or a level).
pub const KEYED: [&str; 5] = ["flops.by_class.", "bytes.", "ai.", "gbs.", "imbalance."];

/// Whether a metric pattern (a path, possibly with `*`/`?`) can name any metric at all.
pub fn is_known_pattern(pattern: &str) -> bool {
    let literal = match pattern.find(['*', '?']) {
        Some(i) => &pattern[..i],
        None => {
            return FIXED.contains(&pattern) || KEYED.iter().any(|k| pattern.len() > k.len() && pattern.starts_with(k));
        }
    };
    FIXED.iter().any(|f| f.starts_with(literal)) || KEYED.iter().any(|k| k.starts_with(literal) || literal.starts_with(k))
}

/// Every metric path a point has a value for.
pub fn paths(p: &Point) -> Vec<String> {
    let mut v = vec!["flops.total".to_string(), "seconds".to_string(), "threads".to_string()];
    if p.flops.effective.is_some() {
        v.push("flops.effective".into());
    }
    if p.flops.fma.is_some() {
        v.push("flops.fma".into());
    }
    if p.gflops.is_some() {
        v.push("gflops".into());
    }
    if p.roof_fraction.is_some() {
        v.push("roof_fraction".into());
    }
    v.extend(p.flops.by_class.keys().map(|k| format!("flops.by_class.{k}")));
    v.extend(p.bytes.keys().map(|k| format!("bytes.{k}")));
    v.extend(p.ai.keys().map(|k| format!("ai.{k}")));
    v.extend(p.gbs.keys().map(|k| format!("gbs.{k}")));
    if let Some(im) = &p.extra.imbalance {
        v.extend(im.keys().map(|k| format!("imbalance.{k}")));
    }
    if let Some(e) = &p.extra.energy {
        v.push("energy.joules".into());
        if e.gflop_per_joule.is_some() {
            v.push("energy.gflop_per_joule".into());
        }
    }
    v
}

/// Paths of either point matching `pattern`, sorted, without duplicates.
pub fn matching(pattern: &str, a: Option<&Point>, b: Option<&Point>) -> Vec<String> {
    let mut out: Vec<String> = a.into_iter().chain(b).flat_map(paths).filter(|m| glob_match(pattern, m)).collect();
    out.sort();
    out.dedup();
    out
}

/// The value of `path` in `p`; a flop class the point lacks counts 0 flops.
pub fn value(p: &Point, path: &str) -> Option<f64> {
    match path {
        "flops.total" => Some(p.flops.total),
        "flops.effective" => p.flops.effective,
        "flops.fma" => p.flops.fma,
        "seconds" => Some(p.seconds),
        "gflops" => p.gflops,
        "roof_fraction" => p.roof_fraction,
        "threads" => Some(f64::from(p.threads)),
        "energy.joules" => p.extra.energy.as_ref().map(|e| e.total_joules),
        "energy.gflop_per_joule" => p.extra.energy.as_ref().and_then(|e| e.gflop_per_joule),
        _ => {
            if let Some(k) = path.strip_prefix("flops.by_class.") {
                Some(p.flops.by_class.get(k).copied().unwrap_or(0.0))
            } else if let Some(k) = path.strip_prefix("bytes.") {
                p.bytes.get(k).copied()
            } else if let Some(k) = path.strip_prefix("ai.") {
                p.ai.get(k).copied()
            } else if let Some(k) = path.strip_prefix("gbs.") {
                p.gbs.get(k).copied()
            } else if let Some(k) = path.strip_prefix("imbalance.") {
                p.extra.imbalance.as_ref().and_then(|im| im.get(k).copied())
            } else {
                None
            }
        }
    }
}

/// Whether the metric is derived from the measured time or energy (judged statistically, from
/// its samples).
pub fn is_time_based(path: &str) -> bool {
    path == "seconds" || path == "gflops" || path.starts_with("gbs.") || path.starts_with("energy.")
}

/// Joules per sample of the point's whole domain (`psys`, or `pkg` and `ram` sample by sample).
fn energy_samples(p: &Point) -> Vec<f64> {
    let Some(e) = &p.extra.energy else { return Vec::new() };
    let of = |d: &str| e.domains.get(d).map(|x| x.joules_samples.clone()).unwrap_or_default();
    match e.total_domain.as_str() {
        "pkg+ram" => of("pkg").iter().zip(of("ram")).map(|(a, b)| a + b).collect(),
        d => of(d),
    }
}

/// One value per repetition for a time-based metric: seconds, or W (Q) over each repetition's
/// time. Empty when the point has no samples or the metric cannot be derived per sample.
pub fn samples(p: &Point, path: &str) -> Vec<f64> {
    let per_second = |amount: f64| -> Vec<f64> { p.seconds_samples.iter().filter(|s| **s > 0.0).map(|s| amount / s / 1e9).collect() };
    match path {
        "seconds" => p.seconds_samples.clone(),
        "gflops" => per_second(p.flops.total),
        "energy.joules" => energy_samples(p),
        "energy.gflop_per_joule" => energy_samples(p)
            .into_iter()
            .filter(|j| *j > 0.0)
            .map(|j| p.flops.total / 1e9 / j)
            .collect(),
        _ => match path.strip_prefix("gbs.") {
            Some(lvl) if lvl == level::CORE => p.core_side_bytes().map(per_second).unwrap_or_default(),
            Some(lvl) => p.bytes.get(lvl).map(|b| per_second(*b)).unwrap_or_default(),
            None => Vec::new(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn energy_metrics_and_their_samples() {
        use crate::schema::energy::{DomainEnergy, PointEnergy};
        let mut p = Point::new("k", Default::default(), Default::default(), Default::default(), 1, vec![1.0]);
        p.flops.total = 4e9;
        assert!(!paths(&p).iter().any(|m| m.starts_with("energy.")));
        let d = |xs: &[f64]| DomainEnergy {
            joules: xs[1],
            joules_samples: xs.to_vec(),
            ..Default::default()
        };
        let mut e = PointEnergy {
            total_domain: "pkg+ram".into(),
            total_joules: 3.0,
            gflop_per_joule: Some(4.0 / 3.0),
            ..Default::default()
        };
        e.domains.insert("pkg".into(), d(&[1.5, 2.0, 2.5]));
        e.domains.insert("ram".into(), d(&[0.5, 1.0, 1.5]));
        p.extra.energy = Some(e);
        assert!(paths(&p).contains(&"energy.gflop_per_joule".to_string()));
        assert_eq!(value(&p, "energy.joules"), Some(3.0));
        assert_eq!(samples(&p, "energy.joules"), [2.0, 3.0, 4.0]);
        assert_eq!(samples(&p, "energy.gflop_per_joule"), [2.0, 4.0 / 3.0, 1.0]);
        assert!(is_time_based("energy.joules") && is_known_pattern("energy.*") && is_known_pattern("energy.joules"));
    }

    #[test]
    fn patterns() {
        for ok in [
            "flops.total",
            "flops.fma",
            "flops.by_class.packed512_double",
            "bytes.dram",
            "ai.dram",
            "gbs.l2",
            "seconds",
            "gflops",
            "imbalance.seconds",
            "imbalance.flops",
        ] {
            assert!(is_known_pattern(ok), "{ok}");
        }
        for ok in ["bytes.*", "flops.*", "*", "flops.by_class.*", "gbs.?2"] {
            assert!(is_known_pattern(ok), "{ok}");
        }
        for bad in ["flops", "flops.totl", "bytes.", "byte.dram", "time", "foo*", "gflop"] {
            assert!(!is_known_pattern(bad), "{bad}");
        }
    }
}
