//! Energy beside time: a point's joules per energy domain (`extra.energy` of a
//! `roofline.report/1` point) and the energy roofs built from the ceilings' kernels.
//!
//! A RAPL domain counts what its part of the machine drew, whatever ran there: a package or
//! platform domain counts every core of the socket (other processes, other tenants of a
//! shared guest). Each figure therefore comes with the idle power measured just before, the
//! spread over repeats, and whether the idle power was subtracted.

use serde::Serialize;
use std::collections::BTreeMap;

/// Energy of one domain over a point's runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct DomainEnergy {
    /// Joules per run of the point (the median over `joules_samples`); the idle power's
    /// share taken off when the report's `idle_subtracted` is true.
    pub joules: f64,
    /// Joules of each run (or each stretch of repetitions), as `joules` is.
    pub joules_samples: Vec<f64>,
    /// Mean power while the point ran, watts (idle not subtracted).
    pub watts: f64,
    /// (Q3 − Q1) / median of `joules_samples`; absent with fewer than two samples.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
}

/// The idle power of one domain, measured before the points ran.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct IdlePower {
    /// Mean power over the idle window, watts.
    pub watts: f64,
    /// (Q3 − Q1) / median of the idle window's slices' powers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<f64>,
    /// Length of the idle window, seconds.
    pub seconds: f64,
}

/// `extra.energy` of a point: joules per domain and where they came from.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct PointEnergy {
    /// Per domain (`pkg`, `cores`, `ram`, `psys`, `gpu`, a GPU board `gpu0`, …).
    pub domains: BTreeMap<String, DomainEnergy>,
    /// The domain whose joules give the point's GFLOP/J: `psys` where the platform domain
    /// exists (it holds the others), else `pkg` (with `ram` added, where it exists, as
    /// `pkg+ram`).
    pub total_domain: String,
    /// Joules per run of `total_domain`.
    pub total_joules: f64,
    /// GFLOP per joule of `total_domain` (absent without flops).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gflop_per_joule: Option<f64>,
    /// Whether the idle power × the run's time was taken off each domain's joules.
    pub idle_subtracted: bool,
    /// The idle power per domain, measured before the runs.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub idle: BTreeMap<String, IdlePower>,
    /// How often the counters changed while idle (median seconds between changes): figures of
    /// runs not much longer than this are noise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub granularity_seconds: Option<f64>,
    /// How the joules were read (`perf power PMU type 23 on CPU 0: psys`), and how runs were
    /// cut from the window.
    pub source: String,
    /// Caveats: a domain that also counts other work, runs shorter than the granularity, an
    /// idle power that swamps the run's.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Where the point sits on its report's energy roofline (filled by the views from the
    /// report's `energy_roofs`; absent without them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roofline: Option<EnergyRooflinePlace>,
}

/// `command_energy` of a report: the energy of one whole run of the measured command, where
/// no joules belong to one kernel (`gpu measure --energy`: Nsight Compute replays each kernel
/// many times, so the board's counter is read around a run of the command of its own).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct CommandEnergy {
    /// What was measured, in one line (the table and the page print it).
    pub measured: String,
    /// Seconds the run lasted, from just before the command started to just after it exited.
    pub seconds: f64,
    /// The run's joules per domain (one sample: `joules_samples` holds it, no spread), the
    /// idle power measured before, how the counter was read and the caveats.
    pub energy: PointEnergy,
    /// Half-width of the bound on `energy.total_joules`' error, joules: the counter's update
    /// instants known to a read gap, the idle power's own error over the time it is taken off
    /// for, and the counter's unit at each end.
    pub uncertainty_joules: f64,
}

/// A point's place on the energy roofline (`extra.energy.roofline`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct EnergyRooflinePlace {
    /// Flop per DRAM byte.
    pub ai: f64,
    /// The roofline's GFLOP per joule at `ai` (the constant power left out).
    pub attainable_gflop_per_joule: f64,
    /// Measured GFLOP/J over `attainable_gflop_per_joule`.
    pub fraction: f64,
    /// The largest term of the modelled energy: `flops`, `dram` or `constant`.
    pub bound: String,
    /// The energy balance point of the roofline, flop per byte.
    pub energy_balance: f64,
}

impl PointEnergy {
    /// The domain that stands for the whole: `psys` where it exists, else `pkg` plus `ram`
    /// where both exist, else `pkg`, else the first domain. Returns its name and joules per run.
    pub fn pick_total(domains: &BTreeMap<String, DomainEnergy>) -> Option<(String, f64)> {
        total_of(&domains.iter().map(|(k, d)| (k.clone(), d.joules)).collect())
    }
}

/// The whole of per-domain figures (joules or watts): `psys` where it exists, else `pkg`
/// plus `ram`, else `pkg`; several GPU boards (`gpu0`, `gpu1`, … and nothing else) summed, as
/// `gpu0+gpu1`; else the first domain.
pub fn total_of(values: &BTreeMap<String, f64>) -> Option<(String, f64)> {
    if let Some(v) = values.get("psys") {
        return Some(("psys".into(), *v));
    }
    let board = |k: &str| {
        k.strip_prefix("gpu")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    if values.len() >= 2 && values.keys().all(|k| board(k)) {
        let names: Vec<&str> = values.keys().map(String::as_str).collect();
        return Some((names.join("+"), values.values().sum()));
    }
    match (values.get("pkg"), values.get("ram")) {
        (Some(p), Some(r)) => Some(("pkg+ram".into(), p + r)),
        (Some(p), None) => Some(("pkg".into(), *p)),
        _ => values.iter().next().map(|(k, v)| (k.clone(), *v)),
    }
}

/// Energy roofs of one thread count: what a flop and a byte cost, and the constant power
/// (Choi et al.'s energy roofline: E = W·ε_flop + Q·ε_byte + π₀·T). Read back in every build:
/// the GPU ceilings document, which the light build reads too, holds them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, serde::Deserialize)]
pub struct EnergyRoofs {
    /// The domain the figures are of (`psys`, `pkg+ram`, …).
    pub domain: String,
    /// Picojoules per flop by ISA (the peak kernels'), the constant power's share taken off.
    pub pj_per_flop: BTreeMap<String, f64>,
    /// Picojoules per byte by memory level (the bandwidth kernels'), the constant power's
    /// share taken off.
    pub pj_per_byte: BTreeMap<String, f64>,
    /// The constant power π₀, watts: the idle power measured before the kernels.
    pub constant_watts: f64,
    /// Spread ((Q3 − Q1) / median over repeats) of each figure, keyed `flop.<isa>`,
    /// `byte.<level>`, `constant`.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub spread: BTreeMap<String, f64>,
    /// Each figure's samples (one per stretch or repetition), keyed as `spread`: the median
    /// and spread come from them, and how many there were can be read back.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub samples: BTreeMap<String, Vec<f64>>,
    /// Threads the kernels ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub threads: Option<u32>,
    /// How the figures were read, and their caveats.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl EnergyRoofs {
    /// A pJ-per-flop figure of `key` measured over `samples`: see [`EnergyRoofs::keep`].
    pub fn keep_flop(&mut self, key: &str, samples: &[f64]) {
        Self::keep(
            &mut self.pj_per_flop,
            &mut self.spread,
            &mut self.samples,
            key,
            format!("flop.{key}"),
            samples,
        );
    }

    /// A pJ-per-byte figure of `key` measured over `samples`: see [`EnergyRoofs::keep`].
    pub fn keep_byte(&mut self, key: &str, samples: &[f64]) {
        Self::keep(
            &mut self.pj_per_byte,
            &mut self.spread,
            &mut self.samples,
            key,
            format!("byte.{key}"),
            samples,
        );
    }

    /// The median of `xs` under `key`, their spread (two or more) and themselves under
    /// `tagged`; nothing without samples.
    fn keep(
        figures: &mut BTreeMap<String, f64>,
        spread: &mut BTreeMap<String, f64>,
        samples: &mut BTreeMap<String, Vec<f64>>,
        key: &str,
        tagged: String,
        xs: &[f64],
    ) {
        let Some(m) = crate::schema::stats::median(xs) else {
            return;
        };
        figures.insert(key.to_string(), m);
        if let Some(s) = crate::schema::stats::spread(xs).filter(|_| xs.len() >= 2) {
            spread.insert(tagged.clone(), s);
        }
        samples.insert(tagged, xs.to_vec());
    }
}
