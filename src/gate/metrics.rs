//! Metric paths of a point: `flops.total`, `flops.effective`, `flops.fma`, `flops.by_class.<class>`,
//! `bytes.<level>`, `ai.<level>`, `gbs.<level>`, `seconds`, `gflops`, `roof_fraction`, `threads`,
//! and on a merged job's points `imbalance.seconds` and `imbalance.flops` (the slowest rank's
//! T, the largest W, over the mean: 1 is perfect balance).

use crate::schema::Point;
use crate::schema::report::level;

use super::glob::glob_match;

/// Paths with no key part.
pub const FIXED: [&str; 7] = [
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

/// Whether the metric is derived from the measured time (judged statistically).
pub fn is_time_based(path: &str) -> bool {
    path == "seconds" || path == "gflops" || path.starts_with("gbs.")
}

/// One value per repetition for a time-based metric: seconds, or W (Q) over each repetition's
/// time. Empty when the point has no samples or the metric cannot be derived per sample.
pub fn samples(p: &Point, path: &str) -> Vec<f64> {
    let per_second = |amount: f64| -> Vec<f64> { p.seconds_samples.iter().filter(|s| **s > 0.0).map(|s| amount / s / 1e9).collect() };
    match path {
        "seconds" => p.seconds_samples.clone(),
        "gflops" => per_second(p.flops.total),
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
