//! The datasheet table of `platforms/gpu/nvidia.toml`: SMs, boost clock, memory bandwidth and
//! dense per-precision rates of the common data-center GPUs, matched by device name. It serves
//! captures that carry neither ncu's `*.peak_sustained` metrics nor the device attributes.

use serde::Deserialize;
use std::collections::BTreeMap;

use crate::schema::gpu::GpuPeaks;

const NVIDIA_TOML: &str = include_str!("../../../platforms/gpu/nvidia.toml");

/// One GPU of the table (figures at the boost clock, dense).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GpuSpec {
    pub key: String,
    pub name: String,
    #[serde(rename = "match")]
    pub patterns: Vec<String>,
    pub compute_capability: String,
    pub sms: Option<u32>,
    pub boost_clock_mhz: Option<f64>,
    pub memory: String,
    pub dram_gbs: f64,
    pub fp64_tflops: Option<f64>,
    pub fp32_tflops: Option<f64>,
    pub fp16_tflops: Option<f64>,
    pub fp64_tensor_tflops: Option<f64>,
    pub tf32_tensor_tflops: Option<f64>,
    pub bf16_tensor_tflops: Option<f64>,
    pub fp16_tensor_tflops: Option<f64>,
    pub fp8_tensor_tflops: Option<f64>,
    pub int8_tensor_tops: Option<f64>,
}

#[derive(Deserialize)]
struct TableFile {
    gpu: Vec<GpuSpec>,
}

/// Every GPU of the embedded table.
pub fn all() -> Vec<GpuSpec> {
    // The embedded file is parsed by a unit test: a malformed edit fails CI, not a user.
    toml::from_str::<TableFile>(NVIDIA_TOML).map(|t| t.gpu).unwrap_or_default()
}

/// Lower case, "nvidia" dropped, every run of other characters one space: "NVIDIA H100 80GB
/// HBM3" → "h100 80gb hbm3", "A100-SXM4-80GB" → "a100 sxm4 80gb".
fn normalize(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    let words: Vec<&str> = lower
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty() && *w != "nvidia")
        .collect();
    words.join(" ")
}

/// The table's GPU for a device name (`NVIDIA H100 80GB HBM3`, `H200`, `a100-pcie`): the entry
/// whose longest `match` pattern (or key) occurs in the name as whole words.
pub fn find(device_name: &str) -> Option<GpuSpec> {
    let n = format!(" {} ", normalize(device_name));
    all()
        .into_iter()
        .filter_map(|g| {
            let best = g
                .patterns
                .iter()
                .chain(std::iter::once(&g.key))
                .map(|p| normalize(p))
                .filter(|p| !p.is_empty() && n.contains(&format!(" {p} ")))
                .map(|p| p.len())
                .max()?;
            Some((best, g))
        })
        .max_by_key(|(len, _)| *len)
        .map(|(_, g)| g)
}

/// The keys of the table, for hints.
pub fn keys() -> Vec<String> {
    all().into_iter().map(|g| g.key).collect()
}

impl GpuSpec {
    /// The peaks at `sm_ghz` (the boost clock when None): each datasheet rate times
    /// `sm_ghz / boost`; memory bandwidth unscaled. Without a boost clock in the table the rates
    /// stay at the datasheet's clock, and the returned note says so.
    pub fn peaks(&self, sm_ghz: Option<f64>) -> (GpuPeaks, Option<String>) {
        let boost = self.boost_clock_mhz.map(|m| m / 1e3);
        let (scale, at, note) = match (sm_ghz, boost) {
            (Some(c), Some(b)) if c > 0.0 && b > 0.0 => (c / b, Some(c), None),
            (_, Some(b)) => (1.0, Some(b), None),
            (Some(_), None) => (
                1.0,
                None,
                Some(format!(
                    "{}: the table has no boost clock, so its rates are the datasheet's, not rescaled to the capture's SM clock",
                    self.name
                )),
            ),
            (None, None) => (1.0, None, None),
        };
        let g = |t: Option<f64>| t.map(|t| t * 1e3 * scale);
        let mut tensor = BTreeMap::new();
        for (k, v) in [
            ("fp64", self.fp64_tensor_tflops),
            ("tf32", self.tf32_tensor_tflops),
            ("bf16", self.bf16_tensor_tflops),
            ("fp16", self.fp16_tensor_tflops),
            ("fp8", self.fp8_tensor_tflops),
            ("int8", self.int8_tensor_tops),
        ] {
            if let Some(x) = g(v) {
                tensor.insert(k.to_string(), x);
            }
        }
        let p = GpuPeaks {
            fp64_gflops: g(self.fp64_tflops),
            fp32_gflops: g(self.fp32_tflops),
            fp16_gflops: g(self.fp16_tflops),
            tensor_gflops: tensor,
            dram_gbs: Some(self.dram_gbs),
            l2_gbs: None,
            l1_gbs: None,
            at_sm_ghz: at,
        };
        (p, note)
    }

    /// `(major, minor)` of the compute capability.
    pub fn cc(&self) -> Option<(i32, i32)> {
        let (a, b) = self.compute_capability.split_once('.')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_parses_and_agrees_with_the_arch_rates() {
        let t = all();
        let keys: Vec<&str> = t.iter().map(|g| g.key.as_str()).collect();
        for k in ["h100-sxm", "h100-pcie", "h200", "a100-sxm", "a100-pcie", "l40s", "b200"] {
            assert!(keys.contains(&k), "{k} missing from platforms/gpu/nvidia.toml");
        }
        // Where the table gives SMs and a boost clock, its FP64/FP32 rates are the
        // architecture's per-SM rates at that clock (within the datasheet's rounding).
        for g in t.iter().filter(|g| g.sms.is_some() && g.boost_clock_mhz.is_some()) {
            let r = super::super::arch_rates(g.cc().unwrap()).unwrap();
            let at = |per_sm: f64| per_sm * g.sms.unwrap() as f64 * g.boost_clock_mhz.unwrap() / 1e6;
            let fp32 = g.fp32_tflops.unwrap();
            assert!(
                (fp32 / at(r.fp32_flops) - 1.0).abs() < 0.02,
                "{}: FP32 {fp32} vs {}",
                g.key,
                at(r.fp32_flops)
            );
            let fp64 = g.fp64_tflops.unwrap();
            assert!(
                (fp64 / at(r.fp64_flops) - 1.0).abs() < 0.03,
                "{}: FP64 {fp64} vs {}",
                g.key,
                at(r.fp64_flops)
            );
            // Tensor rates: never above the architecture's at the boost clock (the H100
            // datasheets' tensor figures sit 8 % under it: they assume a lower, power-bound clock).
            if let Some(bf16) = g.bf16_tensor_tflops {
                assert!(bf16 <= at(r.tensor_bf16) * 1.02, "{}: bf16 {bf16} vs {}", g.key, at(r.tensor_bf16));
                assert!(bf16 >= at(r.tensor_bf16) * 0.85, "{}: bf16 {bf16} vs {}", g.key, at(r.tensor_bf16));
            }
        }
    }

    #[test]
    fn device_names_find_their_entry() {
        // Names as the driver and ncu's device__attribute_display_name give them.
        assert_eq!(find("NVIDIA H100 80GB HBM3").unwrap().key, "h100-sxm");
        assert_eq!(find("NVIDIA H100 PCIe").unwrap().key, "h100-pcie");
        assert_eq!(find("NVIDIA H200").unwrap().key, "h200");
        assert_eq!(find("H200").unwrap().key, "h200");
        assert_eq!(find("NVIDIA A100-SXM4-80GB").unwrap().key, "a100-sxm");
        assert_eq!(find("NVIDIA A100 80GB PCIe").unwrap().key, "a100-pcie");
        assert_eq!(find("NVIDIA L40S").unwrap().key, "l40s");
        assert_eq!(find("b200").unwrap().key, "b200");
        assert!(find("NVIDIA GeForce RTX 4090").is_none());
        assert!(find("H2000").is_none(), "whole words only");
    }

    #[test]
    fn peaks_scale_with_the_clock() {
        let h200 = find("H200").unwrap();
        let (at_boost, note) = h200.peaks(None);
        assert!(note.is_none());
        assert_eq!(at_boost.fp64_gflops, Some(33_500.0));
        assert_eq!(at_boost.dram_gbs, Some(4800.0));
        let (slow, _) = h200.peaks(Some(1.485));
        // 1485 / 1980 = 0.75 of every compute rate; bandwidth unchanged.
        assert!((slow.tensor_gflops["bf16"] - 0.75 * 989_400.0).abs() < 1e-6);
        assert_eq!(slow.dram_gbs, Some(4800.0));
        // B200: no boost clock in the table, so nothing to rescale by: said so.
        let (b, note) = find("B200").unwrap().peaks(Some(1.5));
        assert_eq!(b.fp64_gflops, Some(37_000.0));
        assert!(note.unwrap().contains("not rescaled"));
    }
}
