//! When each region ran, for `roofline measure --energy`: its energy runs set
//! [`REGION_ENERGY_ENV`], and every begin and end of a region (of [`crate::Markers`],
//! `roofline::Session` or the C marker API) is then logged against the system's monotonic
//! clock, the clock `roofline` reads its energy counters against. `roofline` reads the counters
//! all along outside the process and gives each region the joules of the times it ran.
//!
//! A region called millions of times must not log millions of entries: calls of one region on
//! one thread are folded into [`Segment`]s, each from the first call that begins at least
//! [`SEGMENT_NS`] after the segment before began to the end of the last call that begins
//! within it, with the seconds spent inside the region summed. A region called back to back
//! gives one segment per 100 µs (ten a RAPL counter update), a long call one segment of its
//! own. `roofline` takes each segment's share of the energy as its summed in-region time × the
//! mean power over the segment.
//!
//! Nothing is logged unless the variable is set; the log goes with the region times, one file
//! per process (`energy-PID.json`) rewritten at each write.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

/// Set (to anything but empty) by `roofline measure --energy` for its energy runs: log when
/// regions run.
pub const REGION_ENERGY_ENV: &str = "ROOFLINE_REGION_ENERGY";

/// Calls of a region beginning within this many nanoseconds of a segment's start fold into it.
pub const SEGMENT_NS: u64 = 100_000;

/// Segments kept per region and thread (100 s of back-to-back calls); calls after them are
/// counted in [`Segments::dropped_calls`] and [`Segments::dropped_ns`] only.
pub const MAX_SEGMENTS: usize = 1 << 20;

/// Calls of one region on one thread folded over a stretch of time (monotonic nanoseconds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Segment {
    /// The first call's begin.
    pub start_ns: u64,
    /// The last call's end.
    pub end_ns: u64,
    /// Nanoseconds inside the region between them (the calls' lengths summed).
    pub busy_ns: u64,
}

/// One region's segments on one thread.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Segments {
    /// In time order.
    pub list: Vec<Segment>,
    /// Calls (begin–end pairs) logged.
    pub calls: u64,
    /// Calls beyond [`MAX_SEGMENTS`] segments, not placed in time.
    pub dropped_calls: u64,
    /// Their summed nanoseconds.
    pub dropped_ns: u64,
}

impl Segments {
    /// Add a call from `begin` to `end` (monotonic nanoseconds; calls of one region on one
    /// thread come in time order and never overlap).
    pub fn add(&mut self, begin: u64, end: u64) {
        let end = end.max(begin);
        self.calls += 1;
        let full = self.list.len() >= MAX_SEGMENTS;
        match self.list.last_mut() {
            Some(s) if begin >= s.start_ns && begin - s.start_ns < SEGMENT_NS => {
                s.end_ns = s.end_ns.max(end);
                s.busy_ns += end - begin;
            }
            _ if full => {
                self.dropped_calls += 1;
                self.dropped_ns += end - begin;
            }
            _ => self.list.push(Segment {
                start_ns: begin,
                end_ns: end,
                busy_ns: end - begin,
            }),
        }
    }
}

/// Open regions (begin instants) and segments, per thread and name.
#[derive(Default)]
struct Log {
    open: HashMap<(i64, String), u64>,
    done: HashMap<(i64, String), Segments>,
}

fn log() -> Option<&'static Mutex<Log>> {
    static ON: OnceLock<Option<Mutex<Log>>> = OnceLock::new();
    ON.get_or_init(|| {
        let set = std::env::var_os(REGION_ENERGY_ENV).is_some_and(|v| !v.is_empty());
        set.then(|| Mutex::new(Log::default()))
    })
    .as_ref()
}

/// Whether this process logs when its regions run.
pub fn logging() -> bool {
    log().is_some()
}

thread_local! {
    static TID: i64 = crate::this_thread_id();
}

/// The region `name` begins now on this thread (nothing unless logging). Called before the
/// begin marker, so a tracer never counts it into the region.
pub fn log_begin(name: &[u8]) {
    if let Some(l) = log() {
        let now = monotonic_ns();
        let key = (TID.with(|t| *t), String::from_utf8_lossy(name).into_owned());
        if let Ok(mut l) = l.lock() {
            l.open.insert(key, now);
        }
    }
}

/// The region `name` ended now on this thread (nothing unless logging, or not open). Called
/// after the end marker.
pub fn log_end(name: &[u8]) {
    if let Some(l) = log() {
        let now = monotonic_ns();
        let key = (TID.with(|t| *t), String::from_utf8_lossy(name).into_owned());
        if let Ok(mut l) = l.lock()
            && let Some(begin) = l.open.remove(&key)
        {
            l.done.entry(key).or_default().add(begin, now);
        }
    }
}

/// Write the process's log into the directory [`crate::REGION_TIMES_ENV`] names (nothing
/// unless logging and set): `energy-PID.json`, written to a temporary name and renamed.
pub fn write_region_energy() -> std::io::Result<()> {
    let (Some(l), Some(dir)) = (log(), std::env::var_os(crate::REGION_TIMES_ENV).filter(|d| !d.is_empty())) else {
        return Ok(());
    };
    let doc = match l.lock() {
        Ok(l) => energy_json(std::process::id(), l.done.iter().map(|((t, n), s)| (*t, n.as_str(), s))),
        Err(_) => return Ok(()),
    };
    let name = format!("energy-{}.json", std::process::id());
    crate::write_whole(Path::new(&dir), &name, &doc)
}

/// The document [`write_region_energy`] writes: `{"pid":…,"regions":[{"thread":…,"name":…,
/// "calls":…,"dropped_calls":…,"dropped_ns":…,"segments":[[start,end,busy],…]}]}`.
pub fn energy_json<'a>(pid: u32, regions: impl Iterator<Item = (i64, &'a str, &'a Segments)>) -> String {
    let mut s = format!("{{\"pid\":{pid},\"regions\":[");
    for (i, (thread, name, segs)) in regions.enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&format!("{{\"thread\":{thread},\"name\":"));
        crate::json_string(&mut s, name);
        s.push_str(&format!(
            ",\"calls\":{},\"dropped_calls\":{},\"dropped_ns\":{},\"segments\":[",
            segs.calls, segs.dropped_calls, segs.dropped_ns
        ));
        for (k, g) in segs.list.iter().enumerate() {
            if k > 0 {
                s.push(',');
            }
            s.push_str(&format!("[{},{},{}]", g.start_ns, g.end_ns, g.busy_ns));
        }
        s.push_str("]}");
    }
    s.push_str("]}");
    s
}

/// Nanoseconds of the system's monotonic clock (`CLOCK_MONOTONIC`, the clock of
/// `std::time::Instant` on Linux), comparable between processes; 0 where it cannot be read.
#[cfg(target_os = "linux")]
pub fn monotonic_ns() -> u64 {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }
    unsafe extern "C" {
        fn clock_gettime(clock: i32, tp: *mut Timespec) -> i32;
    }
    const CLOCK_MONOTONIC: i32 = 1;
    let mut ts = Timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime (libc, linked by std on Linux) writes one timespec, whose layout
    // on 64-bit Linux is two i64s, through a pointer to a live local of that layout.
    let rc = unsafe { clock_gettime(CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    (ts.tv_sec as u64).saturating_mul(1_000_000_000).saturating_add(ts.tv_nsec as u64)
}

/// Elsewhere: no clock shared with `roofline`'s meter (nothing is logged against it).
#[cfg(not(target_os = "linux"))]
pub fn monotonic_ns() -> u64 {
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn calls_fold_into_segments_with_their_time_summed() {
        let mut s = Segments::default();
        // Three short calls within one segment; a long call far later; a short call and a
        // long one beginning within its window: one segment to the long one's end.
        s.add(1_000, 2_000);
        s.add(30_000, 31_000);
        s.add(90_000, 99_000);
        s.add(1_000_000, 5_000_000);
        s.add(10_000_000, 10_001_000);
        s.add(10_050_000, 12_000_000);
        let seg = |start_ns, end_ns, busy_ns| Segment { start_ns, end_ns, busy_ns };
        assert_eq!(
            s.list,
            vec![
                seg(1_000, 99_000, 11_000),
                seg(1_000_000, 5_000_000, 4_000_000),
                seg(10_000_000, 12_000_000, 1_951_000)
            ]
        );
        assert_eq!(s.calls, 6);
        // A call beginning exactly SEGMENT_NS after a segment's start opens a new one.
        s.add(10_000_000 + SEGMENT_NS + 2_000_000, 10_000_000 + SEGMENT_NS + 2_000_010);
        assert_eq!(s.list.len(), 4);
    }

    #[test]
    fn the_clock_moves_forward() {
        let a = monotonic_ns();
        let t = std::time::Instant::now();
        while t.elapsed().as_micros() < 200 {}
        let b = monotonic_ns();
        assert!(a > 0 && b >= a + 200_000, "{a} {b}");
    }

    #[test]
    fn the_document_is_json_with_every_segment() {
        let mut s = Segments::default();
        s.add(5, 9);
        s.add(1_000_000, 1_500_000);
        let doc = energy_json(7, [(3i64, "a\"b", &s)].into_iter());
        assert_eq!(
            doc,
            "{\"pid\":7,\"regions\":[{\"thread\":3,\"name\":\"a\\\"b\",\"calls\":2,\"dropped_calls\":0,\"dropped_ns\":0,\"segments\":[[5,9,4],[1000000,1500000,500000]]}]}"
        );
    }
}
