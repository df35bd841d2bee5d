//! Region wall times from the native runs of a measured command.
//!
//! `roofline measure --backend trace` counts each region's W and Q in one traced run, where
//! time means nothing (the tracer slows the program by orders of magnitude). T comes from the
//! native runs after it: `measure` sets [`ENV`] to a fresh directory for each run, and every
//! [`crate::region::Session`] of the program writes its regions' calls and summed wall times
//! there when it is dropped (one small JSON file per session, written atomically). `measure`
//! then reads them back per run.
//!
//! A session is per thread. When several threads mark the same region name in one run (each
//! its share, as the C marker API allows), the region's time in that run is the longest
//! thread's: their windows overlap, and the region lasts as long as its slowest share.
//!
//! A region's calls in a run are every begin of every thread (the files' calls summed), as
//! the tracer counts them. The C marker API's per-thread sessions write nothing themselves
//! (an OpenMP pool's threads never exit, so their sessions are never dropped): the API writes
//! its totals merged over threads in one file per process ([`write_process`]), at
//! `roofline_marker_close` and again at exit.

#[cfg(feature = "trace")]
use std::collections::BTreeMap;
#[cfg(feature = "trace")]
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::schema::Point;

/// The directory a session writes its region times into, when set.
pub const ENV: &str = "ROOFLINE_REGION_TIMES";

/// One region of one session: how often it ran and its summed wall time.
#[derive(Debug, Clone, Serialize, PartialEq)]
#[cfg_attr(feature = "trace", derive(serde::Deserialize))]
pub struct RegionTime {
    pub name: String,
    pub calls: u64,
    pub seconds: f64,
}

/// One session's file, as `roofline_marker::region_times_json` writes it.
#[cfg(feature = "trace")]
#[derive(Debug, serde::Deserialize)]
struct SessionTimes {
    #[allow(dead_code)] // names the file's thread; the merge does not need it
    thread: i64,
    regions: Vec<RegionTime>,
}

/// Whether the program runs under `roofline measure` (sessions then keep time and never
/// fail for want of counters).
pub fn under_measure() -> bool {
    std::env::var_os(ENV).is_some_and(|d| !d.is_empty())
}

/// Write a session's region times into the directory [`ENV`] names (nothing when unset or
/// when there is nothing to say), through `roofline-marker`'s writer: one writer of the format
/// [`Collector`] reads, whichever crate marked the regions. Errors are the caller's to ignore:
/// a session being dropped has no one to report to.
pub fn write_session(regions: Vec<RegionTime>) -> Result<()> {
    roofline_marker::write_region_times(&marker_totals(&regions)).map_err(|e| Error::io("writing region times", e))
}

/// Write the region times of the whole process (the C marker API's totals merged over its
/// threads: calls summed, seconds the longest thread's) into the directory [`ENV`] names, as
/// one file per process that each call rewrites: written at close and again at exit, it is
/// counted once. Nothing when unset or empty.
pub fn write_process(regions: &[RegionTime]) -> Result<()> {
    let Some(dir) = std::env::var_os(ENV).filter(|d| !d.is_empty()) else {
        return Ok(());
    };
    let pid = std::process::id();
    let path = std::path::Path::new(&dir).join(format!("session-{pid}-process.json"));
    if regions.is_empty() {
        // Every region reset since the last write: none left to time.
        let _ = std::fs::remove_file(&path);
        return Ok(());
    }
    let doc = roofline_marker::region_times_json(i64::from(pid), &marker_totals(regions));
    crate::util::write_atomic(&path, doc.as_bytes())
}

/// The regions one session counted with its own counters (`roofline::Session` with perf
/// counters, in a program run by `measure --backend perf`): their report points.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "trace", derive(serde::Deserialize))]
struct SessionPoints {
    thread: i64,
    /// `process` (every thread while a region is open) or `thread` (the session's own).
    counting: String,
    points: Vec<Point>,
}

/// Prefix of the files [`write_session_points`] writes (the times' files start `session-`).
const POINTS_PREFIX: &str = "points-";

/// Write a counting session's region points into the directory [`ENV`] names, beside its
/// times: `measure --backend perf` makes them the command's region points (the counters
/// outside the program count the whole run only). Nothing when unset or empty.
pub fn write_session_points(counting: &str, points: Vec<Point>) -> Result<()> {
    let Some(dir) = std::env::var_os(ENV).filter(|d| !d.is_empty()) else {
        return Ok(());
    };
    if points.is_empty() {
        return Ok(());
    }
    let thread = i64::from(nix::unistd::gettid().as_raw());
    let doc = SessionPoints {
        thread,
        counting: counting.to_string(),
        points,
    };
    let data = serde_json::to_vec(&doc).map_err(|e| Error::io("region points", std::io::Error::other(e)))?;
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::path::Path::new(&dir).join(format!("{POINTS_PREFIX}{}-{thread}-{seq}.json", std::process::id()));
    crate::util::write_atomic(&path, &data)
}

/// What the sessions of one run handed back.
#[cfg(feature = "trace")]
#[derive(Debug, Default)]
pub struct TakenRun {
    /// Calls and wall time per region name (calls summed over sessions, seconds the longest).
    pub times: BTreeMap<String, RegionTime>,
    /// Region points counted by the program's own sessions, per name: the first session's,
    /// and how many sessions counted that name.
    pub counted: BTreeMap<String, (Point, usize, String)>,
    /// When each region ran (`measure --energy`'s runs): per name, the segments of the
    /// thread (of any process) that spent the longest in it, as the times take the longest
    /// thread's.
    pub energy: crate::counters::energy::RunSegments,
    /// Files that did not parse.
    pub bad: usize,
}

/// Prefix of the files `roofline_marker::write_region_energy` writes.
#[cfg(feature = "trace")]
const ENERGY_PREFIX: &str = "energy-";

/// One process's log of when its regions ran.
#[cfg(feature = "trace")]
#[derive(Debug, serde::Deserialize)]
struct EnergyLog {
    regions: Vec<NamedSegments>,
}

#[cfg(feature = "trace")]
#[derive(Debug, serde::Deserialize)]
struct NamedSegments {
    name: String,
    #[serde(flatten)]
    segments: crate::counters::energy::RegionSegments,
}

#[cfg(feature = "trace")]
impl TakenRun {
    /// Add one file a session wrote (`name` tells points from times); what does not parse
    /// is counted in `bad` (a temporary file of a write cut short, or not ours). Any bytes.
    pub fn add_file(&mut self, name: &str, data: &[u8]) {
        if name.starts_with(ENERGY_PREFIX) {
            let Ok(doc) = serde_json::from_slice::<EnergyLog>(data) else {
                self.bad += 1;
                return;
            };
            for r in doc.regions {
                let longer = self.energy.get(&r.name).is_none_or(|had| r.segments.busy_ns() > had.busy_ns());
                if longer {
                    self.energy.insert(r.name, r.segments);
                }
            }
            return;
        }
        if name.starts_with(POINTS_PREFIX) {
            let Ok(doc) = serde_json::from_slice::<SessionPoints>(data) else {
                self.bad += 1;
                return;
            };
            for p in doc.points {
                match self.counted.get_mut(&p.name) {
                    Some(c) => c.1 += 1,
                    None => {
                        self.counted.insert(p.name.clone(), (p, 1, doc.counting.clone()));
                    }
                }
            }
            return;
        }
        let Ok(doc) = serde_json::from_slice::<SessionTimes>(data) else {
            self.bad += 1;
            return;
        };
        for r in doc.regions {
            match self.times.get_mut(&r.name) {
                Some(t) => {
                    t.calls = t.calls.saturating_add(r.calls);
                    t.seconds = t.seconds.max(r.seconds);
                }
                None => {
                    self.times.insert(r.name.clone(), r);
                }
            }
        }
    }
}

/// The marker crate's view of region times.
fn marker_totals(regions: &[RegionTime]) -> Vec<(&str, roofline_marker::Totals)> {
    let totals = |r: &RegionTime| roofline_marker::Totals {
        calls: r.calls,
        seconds: r.seconds,
    };
    regions.iter().map(|r| (r.name.as_str(), totals(r))).collect()
}

/// The directory one native run writes into, read back and emptied after the run (by
/// `measure`, which comes with `trace`).
#[cfg(feature = "trace")]
pub struct Collector {
    dir: PathBuf,
}

#[cfg(feature = "trace")]
impl Collector {
    /// A fresh directory under the system's temporary directory.
    pub fn new() -> Result<Collector> {
        let base = std::env::temp_dir();
        for attempt in 0..100u32 {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0);
            let dir = base.join(format!("roofline-regions-{}-{nanos}-{attempt}", std::process::id()));
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(Collector { dir }),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(Error::io(format!("creating {}", dir.display()), e)),
            }
        }
        Err(Error::io(
            "creating a region-times directory",
            std::io::Error::other("no free name"),
        ))
    }

    /// The environment variable a run gets: (name, value).
    pub fn env(&self) -> (&'static str, &Path) {
        (ENV, &self.dir)
    }

    /// What the sessions of the last run wrote: region times per name (calls summed over
    /// sessions; seconds the longest session's) and counted region points; the directory
    /// emptied for the next run. Files that do not parse are skipped and counted.
    pub fn take_run(&self) -> TakenRun {
        let mut out = TakenRun::default();
        let Ok(entries) = std::fs::read_dir(&self.dir) else {
            return out;
        };
        let mut paths: Vec<PathBuf> = entries.flatten().map(|e| e.path()).collect();
        // A fixed order (file names: kind, pid, thread, sequence): the "first" session of a
        // name is the same whoever reads the directory.
        paths.sort();
        for path in paths {
            let data = std::fs::read(&path).ok();
            let _ = std::fs::remove_file(&path);
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            match data {
                Some(d) => out.add_file(name, &d),
                None => out.bad += 1,
            }
        }
        out
    }
}

#[cfg(feature = "trace")]
impl Drop for Collector {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(all(test, feature = "trace"))]
mod tests {
    use super::*;

    #[test]
    fn sessions_of_one_run_merge_calls_and_take_the_longest_thread() {
        let c = Collector::new().unwrap();
        let write = |thread: i64, regions: Vec<RegionTime>| {
            let data = roofline_marker::region_times_json(thread, &marker_totals(&regions));
            std::fs::write(c.dir.join(format!("session-1-{thread}-0.json")), data).unwrap();
        };
        let rt = |name: &str, calls, seconds| RegionTime {
            name: name.into(),
            calls,
            seconds,
        };
        write(11, vec![rt("dot", 3, 0.25), rt("daxpy", 2, 0.5)]);
        write(12, vec![rt("dot", 5, 0.75)]);
        std::fs::write(c.dir.join("garbage.json"), b"{not json").unwrap();
        let taken = c.take_run();
        assert_eq!(taken.bad, 1);
        let run = taken.times;
        assert_eq!(run["dot"], rt("dot", 8, 0.75));
        assert_eq!(run["daxpy"], rt("daxpy", 2, 0.5));
        // Emptied for the next run.
        assert!(c.take_run().times.is_empty());
        let dir = c.dir.clone();
        drop(c);
        assert!(!dir.exists());
    }

    /// What roofline-marker writes (its own JSON, no serde) is what the collector reads,
    /// names with quotes, backslashes, control characters and any code point included.
    #[test]
    fn the_marker_crates_files_read_back_exactly() {
        let mut next = crate::util::xorshift(0x5eed);
        let pool = ['"', '\\', '\n', '\t', '\u{1}', '\u{7f}', 'é', '€', '𝄞', 'a', ' ', '/', '{', ','];
        let mut regions = Vec::new();
        for i in 0..(1 + next() % 6) {
            let name: String = (0..(1 + next() % 20))
                .map(|_| pool[(next() % pool.len() as u64) as usize])
                .collect();
            regions.push(RegionTime {
                name: format!("{name}{i}"),
                calls: 1 + next() % 1_000_000,
                seconds: (next() % (1 << 52)) as f64 * 2f64.powi(-((next() % 80) as i32)),
            });
        }
        let c = Collector::new().unwrap();
        roofline_marker::write_region_times_to(&c.dir, &marker_totals(&regions)).unwrap();
        let taken = c.take_run();
        let (run, bad) = (taken.times, taken.bad);
        assert_eq!(bad, 0);
        assert_eq!(run.len(), regions.len());
        for r in &regions {
            // Exactly: serde_json's float_roundtrip parser reads back the shortest
            // round-trip form the marker writes.
            assert_eq!(run[&r.name], *r);
        }
    }

    /// Counted points of several sessions: the first session's per name, how many counted
    /// it, its counting; a points file cut short is counted as bad; times are unaffected.
    #[test]
    fn counted_points_keep_the_first_session_and_count_the_others() {
        let mut next = crate::util::xorshift(0x9017);
        let c = Collector::new().unwrap();
        let point = |name: &str, secs: f64| {
            let m = crate::counters::Measurement {
                seconds_samples: vec![secs],
                threads: 1,
                ..Default::default()
            };
            m.into_point(name)
        };
        let (a, b) = ((1 + next() % 1000) as f64 * 1e-3, (1 + next() % 1000) as f64 * 1e-3);
        let write = |file: &str, counting: &str, points: Vec<Point>| {
            let doc = SessionPoints {
                thread: 7,
                counting: counting.into(),
                points,
            };
            std::fs::write(c.dir.join(file), serde_json::to_vec(&doc).unwrap()).unwrap();
        };
        write("points-1-7-0.json", "process", vec![point("dot", a), point("axpy", b)]);
        write("points-1-8-0.json", "thread", vec![point("dot", b)]);
        std::fs::write(c.dir.join("points-1-9-0.json"), b"{\"thread\":9,\"count").unwrap();
        let taken = c.take_run();
        assert_eq!(taken.bad, 1);
        assert!(taken.times.is_empty());
        let (dot, sessions, counting) = &taken.counted["dot"];
        assert_eq!(
            (dot.seconds_samples.as_slice(), *sessions, counting.as_str()),
            (&[a][..], 2, "process")
        );
        assert_eq!(taken.counted["axpy"].1, 1);
        assert!(c.take_run().counted.is_empty());
    }

    /// Files cut short, bytes flipped, random bytes: counted as bad or read, never a panic
    /// (fuzz/fuzz_targets/region_files.rs does the same with a fuzzer).
    #[test]
    fn damaged_files_are_counted_never_a_panic() {
        let mut next = crate::util::xorshift(0xbad);
        let times = roofline_marker::region_times_json(
            3,
            &[(
                "a\"b",
                roofline_marker::Totals {
                    calls: u64::MAX,
                    seconds: 0.5,
                },
            )],
        );
        let m = crate::counters::Measurement {
            seconds_samples: vec![0.25],
            threads: 2,
            ..Default::default()
        };
        let points = serde_json::to_vec(&SessionPoints {
            thread: 3,
            counting: "process".into(),
            points: vec![m.into_point("r")],
        })
        .unwrap();
        let mut run = TakenRun::default();
        // Two sessions of u64::MAX calls saturate rather than wrap.
        run.add_file("session-1", times.as_bytes());
        run.add_file("session-2", times.as_bytes());
        assert_eq!(run.times["a\"b"].calls, u64::MAX);
        for i in 0..2000 {
            let (name, good) = if i % 2 == 0 {
                ("points-x", &points[..])
            } else {
                ("session-x", times.as_bytes())
            };
            let mut d = good.to_vec();
            match next() % 3 {
                0 => d.truncate((next() % d.len() as u64) as usize),
                1 => {
                    let at = (next() % d.len() as u64) as usize;
                    d[at] = next() as u8;
                }
                _ => d = (0..next() % 64).map(|_| next() as u8).collect(),
            }
            let mut r = TakenRun::default();
            r.add_file(name, &d);
            assert!(r.bad <= 1);
            assert!(r.bad == 0 || (r.times.is_empty() && r.counted.is_empty()));
        }
    }
}
