//! Energy readings replayed from text, in place of the counters: one reading a line, its
//! seconds then one raw count per domain in the meter's order (`#` starts a comment). The
//! GPU's NVML counter (`seconds millijoules`) and RAPL's perf counters (`seconds count…`, in
//! the order of the recorded sysfs tree's domains) are replayed so, and the arithmetic on them
//! is tested where there is no such counter.

use super::domains::Domain;
use super::meter::{Meter, Reading, Source};
use crate::error::{Error, Result};

/// Readings replayed in order; `wait` only moves on to the next.
#[derive(Debug, Clone)]
pub struct Recording {
    readings: Vec<Reading>,
    next: usize,
}

impl Recording {
    /// Parse a recording; one line naming the bad line where one is not a time and counts
    /// (as many as on the first line), or where time goes backwards.
    pub fn parse(text: &str, origin: &str) -> Result<Recording> {
        let mut readings: Vec<Reading> = Vec::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let bad = || {
                Error::input(
                    format!("{origin}:{}: not `seconds count…`: {line:?}", i + 1),
                    "one reading per line: its seconds, then one count per domain",
                )
            };
            let mut it = line.split_whitespace();
            let seconds: f64 = it.next().and_then(|s| s.parse().ok()).ok_or_else(bad)?;
            let counts = it
                .map(|c| c.parse::<u64>())
                .collect::<std::result::Result<Vec<u64>, _>>()
                .map_err(|_| bad())?;
            let width = readings.first().map_or(counts.len(), |r| r.counts.len());
            if counts.is_empty() || counts.len() != width || !seconds.is_finite() || readings.last().is_some_and(|r| r.seconds > seconds) {
                return Err(bad());
            }
            readings.push(Reading { seconds, counts });
        }
        Ok(Recording { readings, next: 0 })
    }

    /// The readings, in order.
    #[cfg(test)]
    pub fn readings(&self) -> &[Reading] {
        &self.readings
    }

    /// A meter of `domains` replaying this recording; one line and exit 2 where its readings
    /// hold another number of counts.
    pub fn into_meter(self, domains: Vec<Domain>, description: String) -> Result<Meter> {
        if let Some(r) = self.readings.first()
            && r.counts.len() != domains.len()
        {
            let names: Vec<&str> = domains.iter().map(|d| d.name.as_str()).collect();
            return Err(Error::input(
                format!(
                    "the recording holds {} counts a reading, the meter has {} domains ({})",
                    r.counts.len(),
                    domains.len(),
                    names.join(", ")
                ),
                "record one count per domain, in the domains' order",
            ));
        }
        Ok(Meter::from_source(domains, Box::new(self), description))
    }
}

impl Source for Recording {
    fn read(&mut self) -> Result<Reading> {
        let r = self.readings.get(self.next).cloned();
        self.next += 1;
        r.ok_or_else(|| Error::unavailable("the recording of energy readings ran out", "record a longer window"))
    }
    fn counter_bits(&self) -> u32 {
        64
    }
    fn wait(&mut self, _seconds: f64) {}
}
