//! The trust table: the verdicts `roofline validate --backend perf` gave each event
//! on this machine, kept beside the cached ceilings (`$XDG_CACHE_HOME/roofline/trust.json`;
//! the simulated PMU's in `trust-simulated.json`, so a test's injected faults never mark real
//! counts). Afterwards every perf measurement — `measure`, `run`, the region API, the profile —
//! whose numbers come from an event that failed validation says so: a note, and the quantity in
//! `provenance.untrusted`. Never silently.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::OnceLock;

use crate::counters::Measurement;
use crate::counters::perf::{CounterSpec, EventCount};
#[cfg(feature = "trace")]
use crate::error::{Error, Result};
use crate::schema::Source;
use crate::schema::validation::Verdict;

const SCHEMA: &str = "roofline.trust/1";

/// One event's verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrustEntry {
    /// The event class it was judged in (`flops.packed256_double`, `bytes.dram`).
    pub class: String,
    pub verdict: Verdict,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// The verdicts of one validation of one machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrustTable {
    pub schema: String,
    /// The machine (the ceilings cache's fingerprint): another machine's table is ignored.
    pub fingerprint: String,
    pub platform: String,
    pub source: Source,
    /// Seconds since the epoch of the validation.
    pub validated_at: u64,
    pub events: BTreeMap<String, TrustEntry>,
}

impl TrustTable {
    pub fn new(fingerprint: &str, platform: &str, source: Source, events: BTreeMap<String, TrustEntry>) -> TrustTable {
        TrustTable {
            schema: SCHEMA.into(),
            fingerprint: fingerprint.into(),
            platform: platform.into(),
            source,
            validated_at: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
            events,
        }
    }

    /// Write it beside the ceilings cache (atomically); returns the path.
    #[cfg(feature = "trace")]
    pub fn save(&self) -> Result<PathBuf> {
        let path = path_for(self.source).ok_or_else(|| {
            Error::unavailable(
                "no cache directory for the trust table (neither XDG_CACHE_HOME nor HOME is set)",
                "set XDG_CACHE_HOME",
            )
        })?;
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        }
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::io("serializing the trust table", std::io::Error::other(e)))?;
        crate::util::write_atomic(&path, text.as_bytes())?;
        Ok(path)
    }

    /// This machine's table for `source`, if one was saved (another machine's, or a corrupt
    /// file, reads as none).
    pub fn load(source: Source) -> Option<TrustTable> {
        let text = std::fs::read_to_string(path_for(source)?).ok()?;
        let t: TrustTable = serde_json::from_str(&text).ok()?;
        (t.schema == SCHEMA && t.source == source && t.fingerprint == this_machine()).then_some(t)
    }

    /// The failed entries among `specs` that counted something: (event, entry).
    fn failed<'a>(&'a self, specs: &'a [CounterSpec], counts: &'a [EventCount]) -> impl Iterator<Item = (&'a str, &'a TrustEntry)> {
        specs.iter().zip(counts).filter_map(|(s, c)| {
            c.scaled?;
            let e = self.events.get(&s.name)?;
            (!e.verdict.passed()).then_some((s.name.as_str(), e))
        })
    }
}

/// Where the table of `source` lives: beside `ceilings.json`.
pub fn path_for(source: Source) -> Option<PathBuf> {
    let dir = crate::util::cache_dir()?;
    Some(dir.join(if source == Source::Simulated {
        "trust-simulated.json"
    } else {
        "trust.json"
    }))
}

/// This machine's fingerprint (the ceilings cache's).
pub fn this_machine() -> String {
    static FP: OnceLock<String> = OnceLock::new();
    FP.get_or_init(|| crate::schema::ceilings::Host::detect().fingerprint).clone()
}

/// The quantity of a measurement an event feeds (`flops.<class>`, `flops.fma`, `bytes.<level>`).
fn quantity_of(spec: &CounterSpec) -> Option<String> {
    match spec.quantity.as_str() {
        "flops" => Some(format!("flops.{}", spec.class.as_deref().unwrap_or("any_precision"))),
        "flops.fma" => Some("flops.fma".into()),
        q => {
            let level = q.strip_prefix("bytes.")?;
            let level = level.split('_').next().unwrap_or(level);
            Some(format!("bytes.{level}"))
        }
    }
}

/// Mark what in `m` comes from events that failed validation on this machine (`source`:
/// perf or simulated, each its own table): a note per event and the quantity in
/// `provenance.untrusted`. No table, nothing marked.
pub fn mark(m: &mut Measurement, specs: &[CounterSpec], counts: &[EventCount], source: Source) {
    // Read once per process (the region API measures at every region end).
    static PERF: OnceLock<Option<TrustTable>> = OnceLock::new();
    static SIMULATED: OnceLock<Option<TrustTable>> = OnceLock::new();
    let cell = if source == Source::Simulated { &SIMULATED } else { &PERF };
    if let Some(table) = cell.get_or_init(|| TrustTable::load(source)) {
        mark_with(m, specs, counts, table);
    }
}

/// [`mark`] with a given table.
pub fn mark_with(m: &mut Measurement, specs: &[CounterSpec], counts: &[EventCount], table: &TrustTable) {
    let failed: Vec<(String, TrustEntry, Option<String>)> = table
        .failed(specs, counts)
        .map(|(name, e)| {
            let q = specs.iter().find(|s| s.name == name).and_then(quantity_of);
            (name.to_string(), e.clone(), q)
        })
        .collect();
    if failed.is_empty() {
        return;
    }
    let prov = m.provenance.get_or_insert_with(Default::default);
    for (name, e, q) in failed {
        let q = q.unwrap_or_else(|| e.class.clone());
        prov.notes.push(format!(
            "UNTRUSTED: {q} comes from {name}, which failed `roofline validate --backend {}` on this machine ({}{})",
            table.source.name(),
            e.verdict.describe(),
            e.detail.as_deref().map(|d| format!("; {d}")).unwrap_or_default()
        ));
        if !prov.untrusted.contains(&q) {
            prov.untrusted.push(q);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::perf::Scaled;

    fn spec(name: &str, quantity: &str, class: Option<&str>) -> CounterSpec {
        let mut s = CounterSpec::cycles();
        s.name = name.into();
        s.quantity = quantity.into();
        s.class = class.map(String::from);
        s
    }

    fn counted(name: &str) -> EventCount {
        EventCount {
            name: name.into(),
            scaled: Some(Scaled {
                raw: 10,
                value: 10.0,
                running_ratio: 1.0,
            }),
        }
    }

    #[test]
    fn failed_events_mark_their_quantity_and_passed_ones_do_not() {
        let events = BTreeMap::from([
            (
                "FP.256D".to_string(),
                TrustEntry {
                    class: "flops.packed256_double".into(),
                    verdict: Verdict::Off(-0.5),
                    detail: None,
                },
            ),
            (
                "FP.SD".to_string(),
                TrustEntry {
                    class: "flops.scalar_double".into(),
                    verdict: Verdict::Exact,
                    detail: None,
                },
            ),
            (
                "imc/CAS.RD".to_string(),
                TrustEntry {
                    class: "bytes.dram".into(),
                    verdict: Verdict::NotCounted,
                    detail: Some("ENOENT".into()),
                },
            ),
        ]);
        let table = TrustTable::new("fp", "skx", Source::Perf, events);
        let specs = vec![
            spec("FP.256D", "flops", Some("packed256_double")),
            spec("FP.SD", "flops", Some("scalar_double")),
            spec("imc/CAS.RD", "bytes.dram_read", None),
        ];
        let counts = vec![counted("FP.256D"), counted("FP.SD"), counted("imc/CAS.RD")];
        let mut m = Measurement::default();
        mark_with(&mut m, &specs, &counts, &table);
        let p = m.provenance.unwrap();
        assert_eq!(p.untrusted, vec!["flops.packed256_double".to_string(), "bytes.dram".to_string()]);
        assert!(
            p.notes.iter().any(|n| n.contains("UNTRUSTED") && n.contains("off by -50.0 %")),
            "{:?}",
            p.notes
        );
        assert!(!p.notes.iter().any(|n| n.contains("FP.SD")));
        // An event that counted nothing here marks nothing.
        let mut m = Measurement::default();
        let none = vec![EventCount {
            name: "FP.256D".into(),
            scaled: None,
        }];
        mark_with(&mut m, &specs[..1], &none, &table);
        assert!(m.provenance.is_none());
        // The table round-trips through its JSON.
        let back: TrustTable = serde_json::from_str(&serde_json::to_string(&table).unwrap()).unwrap();
        assert_eq!(back, table);
    }
}
