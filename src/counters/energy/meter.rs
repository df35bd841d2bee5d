//! Readings of the energy counters: a [`Source`] gives (seconds, counts per domain); the
//! [`Meter`] turns two readings into joules per domain, wrap-around included, and measures the
//! idle power and the counters' granularity.

use std::time::Instant;

use perf_event::Builder;
use perf_event::events::Raw;

use super::domains::{Domain, PowerPmu, discover};
use crate::error::{Error, Result};
use crate::schema::energy::IdlePower;
use crate::schema::stats;

/// One reading: seconds since the source opened, and each domain's raw count.
#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    /// Seconds since the source opened.
    pub seconds: f64,
    /// Raw counts, one per domain, in the meter's domain order.
    pub counts: Vec<u64>,
}

/// Where readings come from: the perf counters, or a recording (tests).
pub trait Source: Send {
    /// Read every domain once.
    fn read(&mut self) -> Result<Reading>;
    /// Bits of the counts before they wrap: 64 for perf (the kernel widens the hardware's
    /// 32 bits, polling them before they can wrap twice), 32 for raw MSR or powercap values.
    fn counter_bits(&self) -> u32;
    /// Let `seconds` pass (a recording only moves on).
    fn wait(&mut self, seconds: f64);
}

/// The counts from `before` to `after` of a counter `bits` wide: once round past its top
/// counts as the distance through the wrap.
pub fn counts_between(before: u64, after: u64, bits: u32) -> u64 {
    if bits >= 64 {
        after.wrapping_sub(before)
    } else {
        let mask = (1u64 << bits) - 1;
        (after.wrapping_sub(before)) & mask
    }
}

/// The perf `power` PMU's counters, one system-wide fd per domain on the PMU's CPU.
struct PerfSource {
    counters: Vec<perf_event::Counter>,
    opened: Instant,
}

impl PerfSource {
    /// Open every domain of `pmu`. One line naming the cause and the fix when the kernel
    /// refuses (system-wide events need `perf_event_paranoid` ≤ 0, CAP_PERFMON or root).
    pub fn open(pmu: &PowerPmu) -> Result<PerfSource> {
        let level = crate::counters::perf::paranoid();
        refuse_without_permission(level, crate::counters::perf::has_cap_perfmon())?;
        let cpu = pmu.cpus.first().copied().unwrap_or(0);
        let mut counters = Vec::with_capacity(pmu.domains.len());
        for d in &pmu.domains {
            let mut b = Builder::new(Raw::new(d.config));
            b.attrs_mut().type_ = pmu.type_;
            // The power PMU refuses the exclude_* bits and per-task counting: one CPU, any task.
            b.exclude_kernel(false).exclude_hv(false).any_pid().one_cpu(cpu);
            let mut c = b.build().map_err(|e| open_refused(d, pmu, &e))?;
            c.enable().map_err(|e| open_refused(d, pmu, &e))?;
            counters.push(c);
        }
        Ok(PerfSource {
            counters,
            opened: Instant::now(),
        })
    }
}

/// RAPL events are system-wide: without CAP_PERFMON (root has it) the kernel wants
/// `perf_event_paranoid` at 0 or below. Said before anything opens.
pub fn refuse_without_permission(paranoid: Option<i32>, capable: bool) -> Result<()> {
    match paranoid {
        Some(level) if level > 0 && !capable => Err(Error::unavailable(
            format!(
                "perf_event_paranoid is {level} and this process lacks CAP_PERFMON: RAPL energy events are system-wide and need 0 or the capability"
            ),
            "run as root, grant CAP_PERFMON (`sudo setcap cap_perfmon+ep $(which roofline)`), or `sudo sysctl kernel.perf_event_paranoid=0`",
        )),
        _ => Ok(()),
    }
}

fn open_refused(d: &Domain, pmu: &PowerPmu, e: &std::io::Error) -> Error {
    let level = crate::counters::perf::paranoid()
        .map(|l| l.to_string())
        .unwrap_or_else(|| "unknown".into());
    match e.raw_os_error() {
        Some(1 | 13) => Error::unavailable(
            format!(
                "perf_event_open refused power/energy-{}/ ({e}): RAPL events are system-wide and perf_event_paranoid is {level}",
                d.name
            ),
            "run as root, grant CAP_PERFMON (`sudo setcap cap_perfmon+ep $(which roofline)`), or `sudo sysctl kernel.perf_event_paranoid=0`",
        ),
        _ => Error::unavailable(
            format!(
                "the kernel rejected power/energy-{}/ (type {}, config {:#x}): {e}",
                d.name, pmu.type_, d.config
            ),
            "check `perf stat -a -e power/energy-pkg/ sleep 1` on this machine, or leave out --energy",
        ),
    }
}

impl Source for PerfSource {
    fn read(&mut self) -> Result<Reading> {
        let seconds = self.opened.elapsed().as_secs_f64();
        let mut counts = Vec::with_capacity(self.counters.len());
        for c in &mut self.counters {
            counts.push(c.read().map_err(|e| Error::io("reading a power counter", e))?);
        }
        Ok(Reading { seconds, counts })
    }
    fn counter_bits(&self) -> u32 {
        64
    }
    fn wait(&mut self, seconds: f64) {
        std::thread::sleep(std::time::Duration::from_secs_f64(seconds.max(0.0)));
    }
}

/// The idle power per domain and the counters' granularity, from one idle window.
#[derive(Debug, Clone, PartialEq)]
pub struct Idle {
    /// Per domain, in the meter's order.
    pub power: Vec<IdlePower>,
    /// Median seconds between changes of the first domain's count.
    pub granularity_seconds: Option<f64>,
    /// The longest gap between two readings of the idle window, seconds: each change is seen
    /// up to this late, so the counter's update interval is at most the granularity plus it.
    pub longest_read_gap_seconds: f64,
}

/// Energy domains and where their readings come from.
pub struct Meter {
    domains: Vec<Domain>,
    source: Box<dyn Source>,
    description: String,
}

impl Meter {
    /// The perf `power` PMU under `pmus` (`/sys/bus/event_source/devices`), opened.
    pub fn open(pmus: &std::path::Path) -> Result<Meter> {
        let pmu = discover(pmus)?;
        let source = PerfSource::open(&pmu)?;
        Ok(Meter {
            description: pmu.describe(),
            domains: pmu.domains,
            source: Box::new(source),
        })
    }

    /// A meter over any source: the GPU's NVML counter, a recording.
    pub fn from_source(domains: Vec<Domain>, source: Box<dyn Source>, description: String) -> Meter {
        Meter {
            domains,
            source,
            description,
        }
    }

    /// The domains, in reading order.
    pub fn domains(&self) -> &[Domain] {
        &self.domains
    }

    /// Which PMU and domains (for the provenance).
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Read every domain.
    pub fn read(&mut self) -> Result<Reading> {
        self.source.read()
    }

    /// Let time pass on the source's clock.
    pub fn wait(&mut self, seconds: f64) {
        self.source.wait(seconds)
    }

    /// Joules per domain from `a` to `b`.
    pub fn joules(&self, a: &Reading, b: &Reading) -> Vec<f64> {
        let bits = self.source.counter_bits();
        self.domains
            .iter()
            .zip(a.counts.iter().zip(&b.counts))
            .map(|(d, (&x, &y))| counts_between(x, y, bits) as f64 * d.joules_per_count)
            .collect()
    }

    /// Watch the counters for `seconds` with nothing run, reading every `poll` seconds: the
    /// mean power per domain (its spread over `slices` equal slices) and how often the first
    /// domain's count changed.
    pub fn idle(&mut self, seconds: f64, poll: f64, slices: usize) -> Result<Idle> {
        let first = self.read()?;
        let mut readings = vec![first.clone()];
        while readings.last().is_some_and(|r| r.seconds - first.seconds < seconds) {
            self.wait(poll);
            readings.push(self.read()?);
        }
        Ok(self.idle_from(&readings, slices))
    }

    /// [`Meter::idle`] from readings already taken.
    pub fn idle_from(&self, readings: &[Reading], slices: usize) -> Idle {
        let (Some(a), Some(b)) = (readings.first(), readings.last()) else {
            return Idle {
                power: vec![],
                granularity_seconds: None,
                longest_read_gap_seconds: 0.0,
            };
        };
        let span = (b.seconds - a.seconds).max(f64::MIN_POSITIVE);
        let total = self.joules(a, b);
        // Slices cut at the readings nearest each boundary.
        let slices = slices.max(1);
        let mut cuts = vec![0usize];
        for k in 1..slices {
            let t = a.seconds + span * k as f64 / slices as f64;
            let i = readings.iter().position(|r| r.seconds >= t).unwrap_or(readings.len() - 1);
            if i > *cuts.last().unwrap_or(&0) {
                cuts.push(i);
            }
        }
        if *cuts.last().unwrap_or(&0) < readings.len() - 1 {
            cuts.push(readings.len() - 1);
        }
        let slice_watts: Vec<Vec<f64>> = cuts
            .windows(2)
            .map(|w| {
                let (x, y) = (&readings[w[0]], &readings[w[1]]);
                let dt = (y.seconds - x.seconds).max(f64::MIN_POSITIVE);
                self.joules(x, y).into_iter().map(|j| j / dt).collect()
            })
            .collect();
        let power = total
            .iter()
            .enumerate()
            .map(|(d, j)| IdlePower {
                watts: j / span,
                spread: if slice_watts.len() >= 2 {
                    stats::spread(&slice_watts.iter().map(|w| w[d]).collect::<Vec<_>>())
                } else {
                    None
                },
                seconds: span,
            })
            .collect();
        Idle {
            power,
            granularity_seconds: granularity(readings),
            longest_read_gap_seconds: readings.windows(2).map(|w| w[1].seconds - w[0].seconds).fold(0.0, f64::max),
        }
    }
}

/// Median seconds between the instants the first domain's count changed; None with fewer
/// than three changes.
fn granularity(readings: &[Reading]) -> Option<f64> {
    let mut changes = Vec::new();
    for w in readings.windows(2) {
        if w[0].counts.first() != w[1].counts.first() {
            changes.push(w[1].seconds);
        }
    }
    let gaps: Vec<f64> = changes.windows(2).map(|w| w[1] - w[0]).collect();
    if gaps.len() < 2 { None } else { stats::median(&gaps) }
}
