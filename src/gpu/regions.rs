//! NVTX regions of a GPU capture: the push/pop ranges ncu records per
//! launch with `--nvtx` (`torch.cuda.nvtx.range`, `nvtxRangePush`, `nvtxDomainRangePushEx`)
//! become region points that aggregate their kernels, so a model layer or a training step is
//! one point with its kernels listed under it.
//!
//! A region is a path of open ranges, outermost first (`step`, `step/layer1`,
//! `step/layer1/norm`); every prefix of a launch's stack is a region, so `step` holds the
//! launches of all its sub-ranges (inclusive figures). Repeated ranges of the same path (two
//! training steps) are one region; `instances` counts the separate stretches of consecutive
//! launches it covered. W, Q and T are sums over the region's launches with the kernel
//! rules of [`super::ncu`] (T: the kernels' GPU time, not the range's wall time: gaps between
//! launches are not in it).

use std::collections::BTreeMap;

use super::ncu::{Capture, KernelSummary, Launch, aggregate};
use crate::schema::Point;
use crate::schema::extras::RegionKernel;

/// The separator of a region path.
pub const PATH_SEP: &str = "/";

/// One region: its path and the indices (into `capture.launches`) of its launches.
#[derive(Debug, Clone, PartialEq)]
pub struct Region {
    pub path: String,
    pub depth: usize,
    pub launches: Vec<usize>,
    /// Stretches of consecutive launches (in capture order, per process) inside the region.
    pub instances: usize,
}

/// Every region of the capture, in order of first launch; empty when no launch had a range.
pub fn regions(capture: &Capture) -> Vec<Region> {
    let mut order: Vec<String> = Vec::new();
    let mut by_path: BTreeMap<String, Region> = BTreeMap::new();
    // The previous launch of the same process: a region's instance continues while
    // consecutive launches stay inside it.
    let mut prev_of: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, l) in capture.launches.iter().enumerate() {
        let prev = prev_of.insert(l.process.as_str(), i).map(|j| &capture.launches[j]);
        for d in 1..=l.nvtx.len() {
            let path = l.nvtx[..d].join(PATH_SEP);
            let continued = prev.is_some_and(|p| p.nvtx.len() >= d && p.nvtx[..d] == l.nvtx[..d]);
            let r = by_path.entry(path.clone()).or_insert_with(|| {
                order.push(path.clone());
                Region {
                    path: path.clone(),
                    depth: d,
                    launches: Vec::new(),
                    instances: 0,
                }
            });
            r.launches.push(i);
            if !continued {
                r.instances += 1;
            }
        }
    }
    order.into_iter().filter_map(|p| by_path.remove(&p)).collect()
}

/// Region points: one per region, W/Q/T summed over its launches, the kernels under it
/// (display name, launches, GPU seconds, share of the region's time) in `extra.kernels`,
/// the path in `extra.region`. `display` maps a kernel identity to its display name
/// (`Capture::kernels`).
pub fn region_points(capture: &Capture, display: &BTreeMap<String, String>) -> Vec<Point> {
    let mut out = Vec::new();
    for r in regions(capture) {
        let ls: Vec<&Launch> = r.launches.iter().map(|&i| &capture.launches[i]).collect();
        let summary = KernelSummary {
            name: format!("[{}]", r.path),
            full_name: r.path.clone(),
            demangled: r.path.clone(),
            launches: ls.len(),
            metrics: aggregate(&ls),
            launch_seconds: ls.iter().filter_map(|l| l.metrics.get("gpu__time_duration.sum").copied()).collect(),
        };
        let mut p = summary.to_point(None);
        p.extra.kernel = None; // not a kernel: `compare` must not pair it with one
        p.extra.other.remove("launch_seconds");
        p.extra.region = Some(r.path.clone());
        p.extra.insert("region_depth", r.depth as u64);
        p.extra.instances = Some(r.instances as u64);
        // Kernels under the region, by time, each once.
        let mut kernels: Vec<(String, usize, f64)> = Vec::new();
        for l in &ls {
            let name = display.get(&l.kernel).cloned().unwrap_or_else(|| l.kernel.clone());
            let t = l.metrics.get("gpu__time_duration.sum").copied().unwrap_or(0.0);
            match kernels.iter_mut().find(|k| k.0 == name) {
                Some(k) => {
                    k.1 += 1;
                    k.2 += t;
                }
                None => kernels.push((name, 1, t)),
            }
        }
        kernels.sort_by(|a, b| b.2.total_cmp(&a.2));
        let total: f64 = kernels.iter().map(|k| k.2).sum();
        p.extra.kernels = Some(
            kernels
                .iter()
                .map(|(n, c, t)| RegionKernel {
                    name: n.clone(),
                    launches: *c as u64,
                    seconds: *t,
                    time_share: (total > 0.0).then(|| t / total),
                    ..RegionKernel::default()
                })
                .collect(),
        );
        p.provenance.notes.push(format!(
            "NVTX region {}: {} launches of {} kernels in {} instance(s); T is the kernels' GPU time, not the range's wall time",
            r.path,
            ls.len(),
            kernels.len(),
            r.instances
        ));
        out.push(p);
    }
    out
}

/// Whether a point is an NVTX region point.
pub fn is_region(p: &Point) -> bool {
    p.extra.region.is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(id: u64, nvtx: &[&str]) -> Launch {
        Launch {
            id,
            process: "1".into(),
            kernel: format!("k{}", id % 2),
            block: String::new(),
            grid: String::new(),
            device: "0".into(),
            cc: "9.0".into(),
            stream: "7".into(),
            nvtx: nvtx.iter().map(|s| s.to_string()).collect(),
            metrics: [("gpu__time_duration.sum".to_string(), 1e-6 * (id + 1) as f64)]
                .into_iter()
                .collect(),
            text: BTreeMap::new(),
        }
    }

    #[test]
    fn prefixes_are_regions_and_repeats_count_instances() {
        // step{a, a/b}, nothing, step{a}: `step` has two instances and three launches.
        let cap = Capture {
            launches: vec![
                launch(0, &["step", "a"]),
                launch(1, &["step", "a", "b"]),
                launch(2, &[]),
                launch(3, &["step", "a"]),
            ],
            rules: vec![],
            other_lines: vec![],
        };
        let rs = regions(&cap);
        let get = |p: &str| rs.iter().find(|r| r.path == p).unwrap();
        assert_eq!(rs.len(), 3);
        assert_eq!(get("step").launches, [0, 1, 3]);
        assert_eq!(get("step").instances, 2);
        assert_eq!(get("step/a").instances, 2);
        assert_eq!(get("step/a/b").launches, [1]);
        assert_eq!(get("step/a/b").depth, 3);
        let pts = region_points(&cap, &BTreeMap::new());
        // T of `step`: launches 0, 1 and 3 → (1 + 2 + 4) µs.
        assert!((pts[0].seconds - 7e-6).abs() < 1e-12, "{}", pts[0].seconds);
        assert!(is_region(&pts[0]) && pts[0].extra.kernel.is_none());
    }
}
