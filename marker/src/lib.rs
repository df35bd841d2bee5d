//! Region markers for a program that `roofline` profiles from outside, with no dependencies.
//!
//! ```no_run
//! let mut m = roofline_marker::Markers::new();
//! let x = vec![1.5f64; 1 << 16];
//! let mut y = vec![0.5f64; 1 << 16];
//! m.region("daxpy", || y.iter_mut().zip(&x).for_each(|(y, x)| *y += 2.0 * x))?;
//! let dot: f64 = m.region("dot", || x.iter().zip(&y).map(|(a, b)| a * b).sum())?;
//! println!("{dot}");
//! # Ok::<(), roofline_marker::Error>(())
//! ```
//!
//! Run it under `roofline measure --backend trace -- ./app` or `cargo roofline --bin app`:
//!
//! - the tracer breakpoints [`roofline_region_begin`] and [`roofline_region_end`] and counts
//!   each region's work W and traffic Q, by name, from what every thread of the process does
//!   between them;
//! - the native runs that follow give each region its wall time T: under `roofline measure`
//!   (`ROOFLINE_REGION_TIMES` set) a [`Markers`] writes its regions' calls and summed seconds
//!   there when it is dropped.
//!
//! - under `roofline measure --energy` (`ROOFLINE_REGION_ENERGY` set) the calls are also logged
//!   against the monotonic clock ([`energy`]), so each region gets its joules.
//!
//! Outside `roofline` the markers only keep time ([`Markers::totals`]). Counting in-process
//! (hardware counters on a machine with a PMU, software events, the report schema) is the
//! `roofline` crate's `Session`, which calls these same markers: a program can start with
//! this crate and move to `roofline = { default-features = false }` without touching what the
//! tracer sees. This crate is the part that builds in about a second.

use std::ffi::{CString, c_char};
use std::fmt;
use std::io::Write;
use std::marker::PhantomData;
use std::path::Path;
use std::time::Instant;

pub mod energy;
pub use energy::{REGION_ENERGY_ENV, monotonic_ns, write_region_energy};

thread_local! {
    /// Marker calls seen on this thread, begin and end (also keeps the two markers' bodies
    /// distinct, so no linker folds them into one address the tracer could not tell apart).
    /// Per thread, not a shared atomic: a locked increment per marker cost ~10 ns of the
    /// < 100 ns a region may cost with rdpmc.
    static MARKS: std::cell::Cell<(u64, u64)> = const { std::cell::Cell::new((0, 0)) };
}

/// Marker the trace backend breakpoints: a region named by the NUL-terminated `name`
/// (first argument register) starts when this returns. Counting nothing itself.
///
/// Each marker is alone in a section named after it (`roofline.region_begin`,
/// `roofline.region_end`): `strip` (and `strip = true` in a Cargo profile) removes the symbol
/// table but keeps the section headers, so the tracer still finds the markers of a stripped
/// program.
#[unsafe(no_mangle)]
#[unsafe(link_section = "roofline.region_begin")]
#[inline(never)]
pub extern "C" fn roofline_region_begin(name: *const c_char) {
    std::hint::black_box(name);
    MARKS.with(|m| m.set((m.get().0 + 1, m.get().1)));
}

/// Marker the trace backend breakpoints: the region named by `name` ends when this is called.
#[unsafe(no_mangle)]
#[unsafe(link_section = "roofline.region_end")]
#[inline(never)]
pub extern "C" fn roofline_region_end(name: *const c_char) {
    std::hint::black_box(name);
    MARKS.with(|m| m.set((m.get().0, m.get().1 + 1)));
}

/// How many times the begin and end markers have run on this thread.
pub fn marker_calls() -> (u64, u64) {
    MARKS.with(|m| m.get())
}

/// The environment variable `roofline measure` sets for its native runs: the directory
/// region times are written into.
pub const REGION_TIMES_ENV: &str = "ROOFLINE_REGION_TIMES";

/// What a marker call refuses: a one-line cause and what to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// The name holds a NUL byte: the tracer reads names as C strings.
    NulInName(String),
    /// `begin` of a region already open on this thread.
    AlreadyOpen(String),
    /// `end` of a region that is not open on this thread.
    NotOpen(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NulInName(n) => write!(f, "region name {n:?} contains a NUL byte (hint: use a plain name)"),
            Error::AlreadyOpen(n) => write!(
                f,
                "region '{n}' begun twice without an end (hint: end a region before beginning it again)"
            ),
            Error::NotOpen(n) => write!(f, "region '{n}' ended but never begun (hint: call begin before end)"),
        }
    }
}

impl std::error::Error for Error {}

/// A region's calls and their summed wall time.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Totals {
    pub calls: u64,
    pub seconds: f64,
}

/// One thread's regions: marks them for a tracer outside the process and keeps their wall
/// times. Like `roofline::Session`, it belongs to the thread that created it (neither `Send`
/// nor `Sync`): each thread that marks regions makes its own.
pub struct Markers {
    names: Vec<CString>,
    totals: Vec<Totals>,
    /// Open regions, innermost last: (name index, start).
    open: Vec<(usize, Instant)>,
    _per_thread: PhantomData<*const ()>,
}

impl Default for Markers {
    fn default() -> Self {
        Markers::new()
    }
}

impl Markers {
    pub fn new() -> Markers {
        Markers {
            names: Vec::new(),
            totals: Vec::new(),
            open: Vec::new(),
            _per_thread: PhantomData,
        }
    }

    /// Run `f` as the region `name` and return what it returns.
    pub fn region<R>(&mut self, name: &str, f: impl FnOnce() -> R) -> Result<R, Error> {
        self.begin(name)?;
        // Opaque to the optimiser: work whose value the caller drops still runs in the region.
        let r = std::hint::black_box(f());
        self.end(name)?;
        Ok(r)
    }

    /// Start the region `name` (regions nest; the same name may not be open twice).
    pub fn begin(&mut self, name: &str) -> Result<(), Error> {
        let idx = self.intern(name)?;
        if self.open.iter().any(|&(i, _)| i == idx) {
            return Err(Error::AlreadyOpen(name.to_string()));
        }
        energy::log_begin(name.as_bytes());
        self.open.push((idx, Instant::now()));
        roofline_region_begin(self.names[idx].as_ptr());
        Ok(())
    }

    /// End the region `name` (the innermost open one of that name) and add the call to its
    /// totals.
    pub fn end(&mut self, name: &str) -> Result<(), Error> {
        let pos = match self.open.last() {
            Some(&(i, _)) if self.names[i].as_bytes() == name.as_bytes() => Some(self.open.len() - 1),
            _ => self.find(name).and_then(|idx| self.open.iter().rposition(|&(i, _)| i == idx)),
        }
        .ok_or_else(|| Error::NotOpen(name.to_string()))?;
        let (idx, start) = self.open[pos];
        roofline_region_end(self.names[idx].as_ptr());
        let seconds = start.elapsed().as_secs_f64();
        energy::log_end(self.names[idx].as_bytes());
        self.open.remove(pos);
        let t = &mut self.totals[idx];
        t.calls += 1;
        t.seconds += seconds;
        Ok(())
    }

    /// A region's totals so far (`None`: never begun).
    pub fn totals(&self, name: &str) -> Option<Totals> {
        self.find(name).map(|i| self.totals[i])
    }

    /// Every region begun so far, in the order first begun, with its totals.
    pub fn regions(&self) -> impl Iterator<Item = (&str, Totals)> {
        self.names
            .iter()
            .zip(&self.totals)
            .filter_map(|(n, t)| Some((n.to_str().ok()?, *t)))
    }

    fn find(&self, name: &str) -> Option<usize> {
        self.names.iter().position(|n| n.as_bytes() == name.as_bytes())
    }

    fn intern(&mut self, name: &str) -> Result<usize, Error> {
        if let Some(i) = self.find(name) {
            return Ok(i);
        }
        let c = CString::new(name).map_err(|_| Error::NulInName(name.to_string()))?;
        self.names.push(c);
        self.totals.push(Totals::default());
        Ok(self.names.len() - 1)
    }
}

/// Under `roofline measure`, the regions' times go to it when the markers are dropped.
impl Drop for Markers {
    fn drop(&mut self) {
        // Regions still open end here, innermost first: a tracer outside the process sees
        // balanced markers (otherwise it would count everything after the drop into them).
        while let Some(&(idx, _)) = self.open.last() {
            let name = self.names[idx].to_string_lossy().into_owned();
            eprintln!("roofline: region '{name}' was still open when its markers were dropped: ended there");
            let _ = self.end(&name);
        }
        let regions: Vec<(&str, Totals)> = self.regions().filter(|(_, t)| t.calls > 0).collect();
        // Nobody to tell at drop: a time that could not be written is missing in the
        // report, which says so.
        let _ = write_region_times(&regions);
        let _ = write_region_energy();
    }
}

/// Write one session's region times into the directory [`REGION_TIMES_ENV`] names: one JSON
/// file per session, `{"thread":TID,"regions":[{"name":…,"calls":…,"seconds":…}]}`, written
/// to a temporary name and renamed (a reader sees the whole file or none). Nothing when the
/// variable is unset or there is nothing to say. `roofline`'s sessions write through this too,
/// so there is one writer of the format its reader (`counters::region_times`) reads.
pub fn write_region_times(regions: &[(&str, Totals)]) -> std::io::Result<()> {
    match std::env::var_os(REGION_TIMES_ENV).filter(|d| !d.is_empty()) {
        Some(dir) => write_region_times_to(Path::new(&dir), regions),
        None => Ok(()),
    }
}

/// [`write_region_times`] into `dir` (nothing when `regions` is empty).
pub fn write_region_times_to(dir: &Path, regions: &[(&str, Totals)]) -> std::io::Result<()> {
    if regions.is_empty() {
        return Ok(());
    }
    let thread = this_thread_id();
    let doc = region_times_json(thread, regions);
    // Unique per session: a thread may drop several.
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let name = format!("session-{}-{thread}-{seq}.json", std::process::id());
    write_whole(dir, &name, &doc)
}

/// Write `doc` to `dir/name` whole or not at all: into a hidden temporary file first, renamed
/// over `name` (a reader listing `dir` never sees half a document).
pub(crate) fn write_whole(dir: &Path, name: &str, doc: &str) -> std::io::Result<()> {
    let tmp = dir.join(format!(".{name}.tmp"));
    let res = std::fs::File::create(&tmp).and_then(|mut f| f.write_all(doc.as_bytes()));
    match res.and_then(|()| std::fs::rename(&tmp, dir.join(name))) {
        Ok(()) => Ok(()),
        Err(e) => {
            let _ = std::fs::remove_file(&tmp);
            Err(e)
        }
    }
}

/// The document [`write_region_times`] writes.
pub fn region_times_json(thread: i64, regions: &[(&str, Totals)]) -> String {
    let mut s = format!("{{\"thread\":{thread},\"regions\":[");
    for (i, (name, t)) in regions.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str("{\"name\":");
        json_string(&mut s, name);
        // Rust prints an f64 in its shortest round-trip form without an exponent: valid
        // JSON. A wall time is never NaN or infinite; 0 stands for one if it ever were.
        let seconds = if t.seconds.is_finite() { t.seconds } else { 0.0 };
        s.push_str(&format!(",\"calls\":{},\"seconds\":{seconds:?}}}", t.calls));
    }
    s.push_str("]}");
    s
}

/// `v` as a JSON string literal (RFC 8259: quote, backslash and control characters escaped).
fn json_string(out: &mut String, v: &str) {
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// This thread's kernel id (from `/proc/thread-self`, std having no gettid): names the file;
/// the process id when it cannot be read.
fn this_thread_id() -> i64 {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .and_then(|p| p.file_name()?.to_str()?.parse().ok())
        .unwrap_or(std::process::id() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random per process (time and pid mixed): the inputs are not zeros or constants.
    fn rng() -> impl FnMut() -> u64 {
        let mut x = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1)
            ^ ((std::process::id() as u64) << 32)
            | 1;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn nested_regions_count_calls_and_markers_balance() {
        let mut next = rng();
        let outer_calls = 1 + next() % 7;
        let inner_per = 1 + next() % 5;
        let before = marker_calls();
        let mut m = Markers::new();
        let mut sum = 0u64;
        for i in 0..outer_calls {
            let v = m
                .region("outer", || {
                    let mut s = 0;
                    for j in 0..inner_per {
                        s += m_inner(j + i);
                    }
                    s
                })
                .unwrap();
            sum += v;
        }
        fn m_inner(x: u64) -> u64 {
            x * 3
        }
        assert!(sum > 0 || outer_calls * inner_per == 1);
        // begin/end by hand, nested and ended out of order.
        m.begin("a").unwrap();
        m.begin("b").unwrap();
        m.end("a").unwrap();
        m.end("b").unwrap();
        assert_eq!(m.totals("outer").unwrap().calls, outer_calls);
        assert_eq!(m.totals("a").unwrap().calls, 1);
        assert_eq!(m.totals("b").unwrap().calls, 1);
        assert!(m.totals("outer").unwrap().seconds >= 0.0);
        assert_eq!(m.totals("never"), None);
        let after = marker_calls();
        let n = outer_calls + 2;
        assert_eq!((after.0 - before.0, after.1 - before.1), (n, n));
        let names: Vec<&str> = m.regions().map(|(n, _)| n).collect();
        assert_eq!(names, ["outer", "a", "b"]);
    }

    #[test]
    fn bad_calls_are_errors_and_leave_the_markers_balanced() {
        let mut m = Markers::new();
        let before = marker_calls();
        assert_eq!(m.begin("x\0y"), Err(Error::NulInName("x\0y".into())));
        assert_eq!(m.end("never"), Err(Error::NotOpen("never".into())));
        m.begin("r").unwrap();
        assert_eq!(m.begin("r"), Err(Error::AlreadyOpen("r".into())));
        assert!(m.region("z\0", || 1).is_err());
        m.end("r").unwrap();
        assert_eq!(m.end("r"), Err(Error::NotOpen("r".into())));
        // A region left open ends at drop, so the tracer sees it closed.
        m.begin("left open").unwrap();
        drop(m);
        let after = marker_calls();
        assert_eq!(after.0 - before.0, after.1 - before.1);
        assert_eq!(after.0 - before.0, 2);
        for e in [
            Error::NulInName("a".into()),
            Error::AlreadyOpen("a".into()),
            Error::NotOpen("a".into()),
        ] {
            let s = e.to_string();
            assert!(s.contains("hint:") && !s.contains('\n'), "{s}");
        }
    }

    #[test]
    fn region_times_are_json_whatever_the_name() {
        let mut next = rng();
        // Names from random code points, control characters, quotes and backslashes included.
        let pool = ['"', '\\', '\n', '\t', '\u{1}', '\u{1f}', 'é', '€', '𝄞', 'a', ' ', '/'];
        let name: String = (0..(1 + next() % 24))
            .map(|_| pool[(next() % pool.len() as u64) as usize])
            .collect();
        let calls = next() % 1_000_000;
        let seconds = (next() % 1_000_000_007) as f64 * 1e-9 / 3.0;
        let doc = region_times_json(
            42,
            &[(&name, Totals { calls, seconds }), ("b", Totals { calls: 1, seconds: 1e-300 })],
        );
        // No raw control character survives, and the number reads back exactly.
        assert!(!doc.chars().any(|c| (c as u32) < 0x20), "{doc:?}");
        let s = doc.split("\"seconds\":").nth(1).unwrap();
        let num: String = s.chars().take_while(|c| !matches!(c, '}' | ',')).collect();
        assert_eq!(num.parse::<f64>().unwrap(), seconds);
    }
}
