//! Energy readings replayed from text, in place of the counters: one reading a line, its
//! seconds then one raw count per domain in the meter's order (`#` starts a comment). The
//! GPU's NVML counter (`seconds millijoules`) and RAPL's perf counters (`seconds count…`, in
//! the order of the recorded sysfs tree's domains) are replayed so, and the arithmetic on them
//! is tested where there is no such counter.
//!
//! A recording with a line `# live` is replayed against the clock instead: each read gives
//! the counts of the last line whose seconds have passed since the first read (as a counter
//! that updates at the recorded instants would), `wait` sleeps. The tests measure real
//! programs' regions so, against a counter of known power.

use super::domains::Domain;
use super::meter::{Meter, Reading, Source};
use crate::error::{Error, Result};

/// Readings replayed in order; `wait` only moves on to the next.
#[derive(Debug, Clone)]
pub struct Recording {
    readings: Vec<Reading>,
    next: usize,
    /// Replayed against the clock: the instant of the first read, once read.
    live: Option<Option<std::time::Instant>>,
}

impl Recording {
    /// Parse a recording; one line naming the bad line where one is not a time and counts
    /// (as many as on the first line), or where time goes backwards.
    pub fn parse(text: &str, origin: &str) -> Result<Recording> {
        let mut readings: Vec<Reading> = Vec::new();
        let mut live = None;
        for (i, line) in text.lines().enumerate() {
            if line.trim() == "# live" {
                live = Some(None);
            }
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
        Ok(Recording { readings, next: 0, live })
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
        if let Some(start) = &mut self.live {
            let t0 = *start.get_or_insert_with(std::time::Instant::now);
            let seconds = t0.elapsed().as_secs_f64();
            let passed = self.readings.partition_point(|r| r.seconds <= seconds);
            if passed == self.readings.len() && self.readings.last().is_none_or(|r| r.seconds < seconds) {
                return Err(Error::unavailable(
                    "the recording of energy readings ran out",
                    "record a longer window",
                ));
            }
            let counts = self.readings[passed.saturating_sub(1)].counts.clone();
            return Ok(Reading { seconds, counts });
        }
        let r = self.readings.get(self.next).cloned();
        self.next += 1;
        r.ok_or_else(|| Error::unavailable("the recording of energy readings ran out", "record a longer window"))
    }
    fn counter_bits(&self) -> u32 {
        64
    }
    fn wait(&mut self, seconds: f64) {
        if self.live.is_some() {
            std::thread::sleep(std::time::Duration::from_secs_f64(seconds.max(0.0)));
        }
    }
}
