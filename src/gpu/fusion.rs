//! Fusion estimates for chains of memory-bound GPU kernels: eager
//! frameworks launch one kernel per operation, and a chain of elementwise and reduction
//! kernels each reads its inputs from DRAM and writes its result back. One fused kernel
//! would read each input once and write each final output once.
//!
//! **Chains.** Consecutive launches of one process on one stream, inside the same NVTX
//! ranges, whose kernels are bandwidth- or overhead-bound ([`crate::model::gpu::regime`]) and
//! do no tensor work; two launches or more. A compute-bound kernel, another stream, or a
//! range boundary ends a chain. ncu's CSV carries no kernel arguments, so whether
//! consecutive kernels really pass a tensor is not checked: the chain is the candidate a
//! programmer would look at (the per-row normalization of `torch_app`, five kernels).
//!
//! **Estimate** (per launch, ncu's DRAM bytes read R and written W, captured with caches
//! flushed between kernels, as ncu does by default): now X = Σ (R + W); fused at least
//! Y = R₁ + W_N (the first kernel's inputs, the last one's outputs); at most
//! Y_hi = Y + Σₖ₌₂..N max(0, Rₖ − Wₖ₋₁) (what a later kernel reads beyond its predecessor's
//! output: another input, or the same input read again). Y is a lower bound — it misses
//! inputs only later kernels read (the triad's `b` in `b + 3·c`) and intermediates used
//! after the chain — so the time at the HBM roof, Y / HBM, is the best a fused kernel can do.

use std::collections::BTreeMap;

use super::ncu::Capture;
use crate::schema::Point;
use crate::schema::report::FusionChain;

/// Chains moving less DRAM traffic than this are left out: there are no bytes to save (a
/// run of tiny launches is overhead-bound, which its regime already says).
pub const MIN_CHAIN_BYTES: f64 = 1e6;

/// Chains of the capture and their fusion estimates. `points` are the capture's kernel
/// points with `extra.regime` set; `hbm_gbs` the HBM roof.
pub fn chains(capture: &Capture, points: &[Point], hbm_gbs: Option<f64>) -> Vec<FusionChain> {
    // Kernel identity → (display name, memory-side regime).
    let mut kind: BTreeMap<&str, (&str, bool)> = BTreeMap::new();
    for p in points {
        if let Some(id) = p.extra.kernel.as_deref() {
            let regime = p.extra.regime.as_deref();
            let tensor = p.extra.tensor_used.unwrap_or(false);
            kind.insert(id, (p.name.as_str(), matches!(regime, Some("bandwidth" | "overhead")) && !tensor));
        }
    }
    let mut open: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    let mut done: Vec<Vec<usize>> = Vec::new();
    for (i, l) in capture.launches.iter().enumerate() {
        let key = (l.process.as_str(), l.stream.as_str());
        let member = kind.get(l.kernel.as_str()).is_some_and(|k| k.1);
        let cur = open.entry(key).or_default();
        let continues = cur.last().is_some_and(|&j| capture.launches[j].nvtx == l.nvtx);
        if !(member && continues) {
            done.push(std::mem::take(cur));
        }
        if member {
            cur.push(i);
        }
    }
    done.extend(open.into_values());
    let mut out: Vec<FusionChain> = done
        .into_iter()
        .filter(|c| c.len() >= 2)
        .map(|c| {
            let m = |i: usize, k: &str| capture.launches[i].metrics.get(k).copied().unwrap_or(0.0);
            let r = |i| m(i, "dram__bytes_read.sum");
            let w = |i| m(i, "dram__bytes_write.sum");
            let x: f64 = c.iter().map(|&i| r(i) + w(i)).sum();
            let t: f64 = c.iter().map(|&i| m(i, "gpu__time_duration.sum")).sum();
            let (first, last) = (c[0], c[c.len() - 1]);
            let y = r(first) + w(last);
            let y_hi = y + c.windows(2).map(|p| (r(p[1]) - w(p[0])).max(0.0)).sum::<f64>();
            let fused_seconds = hbm_gbs.filter(|h| *h > 0.0).map(|h| y / (h * 1e9));
            let l_first = &capture.launches[first];
            let region = l_first.nvtx.join(super::regions::PATH_SEP);
            let summary = format!(
                "{} kernels (launches {}–{}) move {:.3} GB in {:.3} ms; fused ≈ {:.3} GB{}{}",
                c.len(),
                l_first.id,
                capture.launches[last].id,
                x / 1e9,
                t * 1e3,
                y / 1e9,
                if y_hi > y * 1.005 {
                    format!(" (up to {:.3} GB if later kernels read other tensors)", y_hi / 1e9)
                } else {
                    String::new()
                },
                fused_seconds
                    .map(|s| format!(", ≈ {:.3} ms at the HBM roof", s * 1e3))
                    .unwrap_or_else(|| ", no HBM roof to time it".into()),
            );
            FusionChain {
                region,
                kernels: c
                    .iter()
                    .map(|&i| {
                        kind.get(capture.launches[i].kernel.as_str())
                            .map(|k| k.0.to_string())
                            .unwrap_or_default()
                    })
                    .collect(),
                launch_ids: c.iter().map(|&i| capture.launches[i].id).collect(),
                dram_bytes: x,
                seconds: t,
                fused_bytes: y,
                fused_bytes_high: y_hi,
                fused_seconds,
                hbm_gbs,
                summary,
            }
        })
        .filter(|c| c.dram_bytes >= MIN_CHAIN_BYTES)
        .collect();
    out.sort_by_key(|c| c.launch_ids.first().copied());
    out
}
