//! The region API shared by every backend: mark a region of a program and get
//! its W, Q and T, accumulated per name over calls like LIKWID's marker API.
//!
//! ```no_run
//! use roofline::{Backend, Session};
//! let mut s = Session::new(Backend::Auto)?;
//! let (a, b) = (vec![1.0f64; 1 << 20], vec![2.0f64; 1 << 20]);
//! let mut c = vec![0.0f64; 1 << 20];
//! let ((), m) = s.measure("triad", || {
//!     for i in 0..c.len() {
//!         c[i] = a[i] + 3.0 * b[i];
//!     }
//! })?;
//! println!("{} flop in {:?} s", m.flops.total, m.seconds_samples);
//! // `region` returns the closure's value; the call still counts in the totals.
//! let sum: f64 = s.region("sum", || c.iter().sum())?;
//! println!("sum {sum}");
//! assert_eq!(s.totals("sum").map(|t| t.calls), Some(1));
//! s.report().write(std::path::Path::new("regions.html"))?;
//! # Ok::<(), roofline::Error>(())
//! ```
//!
//! - **perf**: counter groups opened when the session is created and left running; a region
//!   reads them at begin and end and keeps the difference. By default they count the whole
//!   process ([`Counting::Process`]: inherited groups on this thread, groups on every thread
//!   that already exists; `read()`); [`Session::this_thread`] counts this thread only (no
//!   inherit, rdpmc where the kernel allows user-space reads).
//! - **trace**: the process runs under `roofline measure --backend trace`; the tracer
//!   breakpoints the exported [`roofline_region_begin`] / [`roofline_region_end`] markers
//!   and attributes what it counts in between. In-process the session only keeps time.
//! - **analytic**: wall time only; W and Q come from the kernel's own formulas elsewhere.
//!
//! A session belongs to the thread that created it (it is neither `Send` nor `Sync`). The C
//! ABI (`include/roofline.h`) keeps a per-thread session per thread and merges their totals
//! per region name.

use std::collections::{BTreeMap, HashMap};
use std::ffi::{CStr, CString, c_char, c_double, c_int, c_void};
use std::marker::PhantomData;
use std::path::Path;
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

pub use crate::counters::BackendKind as Backend;
#[cfg(feature = "trace")]
use crate::counters::cachesim::CacheHierarchy;
use crate::counters::perf::{self, CounterSet, CounterSource, CounterSpec, EventCount, RawCount, SYSFS_PMUS, Target};
#[cfg(feature = "trace")]
use crate::counters::simulated::{self, SimulatedCounterSet, SimulatedPmu};
use crate::counters::{Measurement, region_times};
use crate::error::{Error, Result};
use crate::schema::{Environment, Provenance, Report, Source};

// The two marker symbols the trace backend breakpoints, and the per-thread count of their
// calls, live in the dependency-free `roofline-marker` crate: one definition whether a program
// links that crate, this one, or both.
pub use roofline_marker::{marker_calls, roofline_region_begin, roofline_region_end};

/// Whose work a session's counters count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Counting {
    /// Every thread of the process while a region is open (the default): what a rayon or
    /// OpenMP author means by "this loop". Counters are read with `read()`.
    Process,
    /// Only the thread that created the session (rdpmc where allowed: the lowest cost).
    ThisThread,
}

/// What a session counts with, once `Auto` is resolved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// perf_event counters (hardware or software events).
    Counters,
    /// Time only; a tracer outside the process counts W and Q at the markers.
    Traced,
    /// Time only.
    TimeOnly,
    /// The simulated PMU (a test instrument): each [`Session::region`] closure is traced once
    /// in a forked child for the counts, then run here for the time.
    Simulated,
}

/// The counters a session reads: the perf_event groups or the simulated PMU, both through
/// [`CounterSource`].
enum Counters {
    Perf(CounterSet),
    #[cfg(feature = "trace")]
    Simulated(Box<SimulatedCounterSet>),
}

impl Counters {
    fn source(&self) -> &dyn CounterSource {
        match self {
            Counters::Perf(c) => c,
            #[cfg(feature = "trace")]
            Counters::Simulated(c) => c.as_ref(),
        }
    }
    fn source_mut(&mut self) -> &mut dyn CounterSource {
        match self {
            Counters::Perf(c) => c,
            #[cfg(feature = "trace")]
            Counters::Simulated(c) => c.as_mut(),
        }
    }
}

/// Sums over the calls of one region.
#[derive(Debug, Clone, Default)]
struct Accum {
    calls: u64,
    seconds_sum: f64,
    /// Per-call times, the first [`MAX_SAMPLES`] calls (a hot loop of regions must not grow
    /// memory without bound).
    seconds: Vec<f64>,
    raw: Vec<RawCount>,
}

/// Per-call times kept per region.
pub const MAX_SAMPLES: usize = 4096;

/// Up to this many region names, a name is found by comparing it with each (a few short
/// compares beat hashing it); beyond, by the hash index.
const SCAN_NAMES: usize = 8;

impl Accum {
    fn add(&mut self, seconds: f64, raw: &[RawCount]) {
        self.calls += 1;
        self.seconds_sum += seconds;
        if self.seconds.len() < MAX_SAMPLES {
            self.seconds.push(seconds);
        }
        if self.raw.len() < raw.len() {
            self.raw.resize(raw.len(), RawCount::default());
        }
        for (a, r) in self.raw.iter_mut().zip(raw) {
            *a = RawCount {
                value: a.value + r.value,
                time_enabled: a.time_enabled + r.time_enabled,
                time_running: a.time_running + r.time_running,
            };
        }
    }
}

/// One call of a region: its time and counter deltas.
#[derive(Debug, Clone)]
struct Call {
    seconds: f64,
    raw: Vec<RawCount>,
}

struct Open {
    /// Index into `Session::names`.
    idx: usize,
    start: Instant,
    raw: Vec<RawCount>,
}

/// A measuring session for the calling thread.
///
/// The begin/end path allocates nothing and hashes nothing in the common case (a few
/// region names, ended in LIFO order): names are interned once, found by a short scan,
/// totals kept by name index, counter readings written into reused buffers. Its cost
/// beside the counter reads themselves is what `cargo bench --bench region` calls
/// `analytic` (the rdpmc target, < 100 ns per region, leaves little room).
pub struct Session {
    mode: Mode,
    /// Whose work the counters count.
    counting: Counting,
    counters: Option<Counters>,
    /// The simulated PMU and the cache hierarchy its traces feed (`Mode::Simulated`).
    #[cfg(feature = "trace")]
    simulated: Option<Box<(SimulatedPmu, CacheHierarchy)>>,
    /// Inside [`Session::region`] of a simulated session (begin/end alone cannot be traced).
    simulating: bool,
    open: Vec<Open>,
    /// Per interned name (index into `names`): the region's sums, once it has ended once.
    totals: Vec<Option<Accum>>,
    /// Region names seen, as C strings for the markers (interned: no allocation per call).
    names: Vec<CString>,
    /// Name → index, consulted beyond [`SCAN_NAMES`] names.
    index: HashMap<String, usize>,
    /// Reading buffers of ended regions, reused by the next begin.
    spare: Vec<Vec<RawCount>>,
    /// The reading at an end.
    now: Vec<RawCount>,
    notes: Vec<String>,
    /// Under `measure`, write the regions' times and counted points when dropped. Off for
    /// the C ABI's per-thread sessions: each holds one thread's share, which `measure` would
    /// report as the region's, and an OpenMP pool's threads never drop theirs; the C ABI
    /// writes the totals merged over threads itself (`write_c_times`, at close and at exit;
    /// they also go to ROOFLINE_OUTPUT at close).
    hands_back: bool,
    /// Counters opened on this thread count this thread only.
    _this_thread: PhantomData<*const ()>,
}

impl Session {
    /// A session for `backend`: `Perf` opens the identified platform's core events (and
    /// uncore ones where perf_event_paranoid allows) on this thread; `Auto` picks perf when
    /// a core PMU exists, trace when a tracer is attached, and fails otherwise; `Trace` and
    /// `Analytic` keep time only.
    pub fn new(backend: Backend) -> Result<Session> {
        let pmus = Path::new(SYSFS_PMUS);
        match backend {
            Backend::Perf => {
                let (specs, notes) = platform_counters(pmus)?;
                Session::with_events_and_notes(specs, notes)
            }
            Backend::Auto => match crate::counters::choose(Backend::Auto, crate::counters::Target::Region, pmus)?.0 {
                Backend::Perf => Session::new(Backend::Perf),
                Backend::Trace => Ok(Session::time_only(Mode::Traced)),
                _ => Ok(Session::time_only(Mode::TimeOnly)),
            },
            Backend::Trace => Ok(Session::time_only(Mode::Traced)),
            Backend::Analytic => Ok(Session::time_only(Mode::TimeOnly)),
            #[cfg(feature = "trace")]
            Backend::Simulated => Session::simulated(SimulatedPmu::from_env(None)?),
            #[cfg(not(feature = "trace"))]
            Backend::Simulated => Err(Error::unavailable(
                "the simulated PMU traces its regions: this build of roofline leaves the `trace` feature out",
                "enable it (`roofline = { features = [\"trace\"] }`, on by default), or use Backend::Analytic",
            )),
        }
    }

    /// A session counting exactly `specs` in the whole process (e.g. [`software_events`]).
    pub fn with_events(specs: Vec<CounterSpec>) -> Result<Session> {
        Session::with_events_and_notes(specs, Vec::new())
    }

    /// [`with_events`](Self::with_events), with notes every region's provenance carries
    /// (what the events cannot count, e.g. from [`perf::counters_for_platform`]).
    pub fn with_events_and_notes(specs: Vec<CounterSpec>, notes: Vec<String>) -> Result<Session> {
        Session::counting(specs, notes, Counting::Process)
    }

    /// A perf session (`Backend::Perf`'s events) that counts only the calling thread: the
    /// lowest cost (rdpmc reads where the kernel allows them), for single-threaded code or
    /// one session per thread (as the C marker API keeps them).
    pub fn this_thread() -> Result<Session> {
        let (specs, notes) = platform_counters(Path::new(SYSFS_PMUS))?;
        Session::counting(specs, notes, Counting::ThisThread)
    }

    /// [`Session::software`], counting only the calling thread.
    pub fn software_this_thread() -> Result<Session> {
        Session::counting(software_events(), Vec::new(), Counting::ThisThread)
    }

    /// A session counting `specs` as `counting` says.
    pub fn counting(specs: Vec<CounterSpec>, notes: Vec<String>, counting: Counting) -> Result<Session> {
        let counters = perf::identify_platform().map(|p| perf::core_counters(&p)).unwrap_or(4);
        let plan = perf::plan_groups(&specs, counters);
        let target = match counting {
            Counting::Process => Target::Process,
            Counting::ThisThread => Target::ThisThread,
        };
        let mut set = CounterSet::open(specs, &plan, target)?;
        set.enable(false)?;
        Ok(Session {
            counting,
            mode: Mode::Counters,
            counters: Some(Counters::Perf(set)),
            #[cfg(feature = "trace")]
            simulated: None,
            simulating: false,
            open: Vec::new(),
            totals: Vec::new(),
            names: Vec::new(),
            index: HashMap::new(),
            spare: Vec::new(),
            now: Vec::new(),
            notes,
            hands_back: true,
            _this_thread: PhantomData,
        })
    }

    /// A session on the simulated PMU `pmu` (its platform's events, its faults): every
    /// [`region`](Self::region) closure is traced once in a forked child (memory mode, this
    /// machine's caches simulated) and its exact counts become the simulated counters' counts
    /// while it then runs here. The closure must not allocate (see
    /// [`crate::counters::trace::trace_forked`]). Every region says "simulated".
    #[cfg(feature = "trace")]
    pub fn simulated(pmu: SimulatedPmu) -> Result<Session> {
        let (specs, counters, notes) = pmu.counters(false, true)?;
        let plan = perf::plan_groups(&specs, counters);
        let mut set = pmu.open(specs, &plan)?;
        set.enable(false)?;
        let hierarchy = crate::counters::backend::cache_hierarchy(None)?;
        let mut s = Session::time_only(Mode::Simulated);
        s.counters = Some(Counters::Simulated(Box::new(set)));
        s.simulated = Some(Box::new((pmu, hierarchy)));
        s.notes = notes;
        Ok(s)
    }

    /// A session counting the kernel's software events (task-clock, page-faults,
    /// context-switches): the perf path on any machine, PMU or not.
    pub fn software() -> Result<Session> {
        Session::with_events(software_events())
    }

    fn time_only(mode: Mode) -> Session {
        Session {
            counting: Counting::Process,
            mode,
            counters: None,
            #[cfg(feature = "trace")]
            simulated: None,
            simulating: false,
            open: Vec::new(),
            totals: Vec::new(),
            names: Vec::new(),
            index: HashMap::new(),
            spare: Vec::new(),
            now: Vec::new(),
            notes: Vec::new(),
            hands_back: true,
            _this_thread: PhantomData,
        }
    }

    /// What the session counts with.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// What the session's events cannot count (every region's provenance carries these).
    pub fn notes(&self) -> &[String] {
        &self.notes
    }

    /// The counted events, in the order of [`RegionTotals::counts`].
    pub fn events(&self) -> Vec<String> {
        self.counters
            .as_ref()
            .map(|c| c.source().specs().iter().map(|s| s.name.clone()).collect())
            .unwrap_or_default()
    }

    /// Whether region reads use rdpmc (no system call) rather than `read()`.
    pub fn uses_rdpmc(&self) -> bool {
        self.counters.as_ref().is_some_and(|c| c.source().user_reads_mapped())
    }

    /// Run `f` as the region `name` and return what it returns (as `tracing`'s `in_scope`
    /// does): `let d = s.region("dot", || dot(&x, &y))?;`. The call is added to the region's
    /// totals ([`totals`](Self::totals), [`report`](Self::report)); its own W, Q and T are
    /// what [`measure`](Self::measure) returns.
    pub fn region<R>(&mut self, name: &str, f: impl FnOnce() -> R) -> Result<R> {
        let (r, call) = self.region_call(name, f)?;
        self.spare.push(call.raw);
        Ok(r)
    }

    /// [`region`](Self::region), also returning this call's W, Q and T (also added to the
    /// totals): `let (d, m) = s.measure("dot", || dot(&x, &y))?;`.
    pub fn measure<R>(&mut self, name: &str, f: impl FnOnce() -> R) -> Result<(R, Measurement)> {
        let (r, call) = self.region_call(name, f)?;
        Ok((r, self.measurement(std::slice::from_ref(&call.seconds), &call.raw, 1)))
    }

    /// One region call: `f`'s value and the raw call, without building its measurement (the
    /// C ABI merges raw calls over threads).
    fn region_call<R>(&mut self, name: &str, f: impl FnOnce() -> R) -> Result<(R, Call)> {
        #[cfg(feature = "trace")]
        if self.mode == Mode::Simulated {
            return self.simulated_region(name, f);
        }
        self.begin(name)?;
        // Opaque to the optimiser: work whose value the caller drops still runs in the region.
        let r = std::hint::black_box(f());
        let call = self.end_call(name)?;
        Ok((r, call))
    }

    /// A region of a simulated session: `f` traced once in a forked child (the fork has its
    /// own copy of everything `f` captures, and its call consumes that copy), then run here
    /// between begin and end, where the simulated counters count the traced truth.
    #[cfg(feature = "trace")]
    fn simulated_region<R>(&mut self, name: &str, f: impl FnOnce() -> R) -> Result<(R, Call)> {
        let Some(sim) = self.simulated.as_ref() else {
            return Err(Error::unavailable("a simulated session without its PMU", "report this"));
        };
        let hierarchy = sim.1.clone();
        let mut once = Some(f);
        let mut work = || {
            if let Some(f) = once.take() {
                // Nothing of the child's result is freed: the child only exits afterwards.
                std::mem::forget(std::hint::black_box(f()));
            }
        };
        let mut truth = simulated::trace_work_truth(&mut work, &hierarchy, 0.0)?;
        // Only the forked child called `work`: this process's closure is still here.
        let f = once
            .take()
            .ok_or_else(|| Error::unavailable("the region closure ran in the tracing process", "report this"))?;
        self.simulating = true;
        let begun = self.begin(name);
        self.simulating = false;
        begun?;
        let t0 = Instant::now();
        let r = std::hint::black_box(f());
        truth.seconds = t0.elapsed().as_secs_f64();
        if let Some(Counters::Simulated(set)) = self.counters.as_mut() {
            set.count(&truth);
        }
        self.simulating = true;
        let call = self.end_call(name);
        self.simulating = false;
        Ok((r, call?))
    }

    /// Start the region `name` (regions nest; the same name may not be open twice).
    pub fn begin(&mut self, name: &str) -> Result<()> {
        if self.mode == Mode::Simulated && !self.simulating {
            return Err(Error::input(
                format!("region '{name}': the simulated PMU counts regions given as closures only"),
                "use Session::region(name, || work()), from C roofline_marker_region(name, fn, arg) (the work is traced once for the simulated counts)",
            ));
        }
        let idx = self.intern(name)?;
        if self.open.iter().any(|o| o.idx == idx) {
            return Err(Error::input(
                format!("region '{name}' begun twice without an end"),
                "end a region before beginning it again",
            ));
        }
        let mut raw = self.spare.pop().unwrap_or_default();
        if let Some(c) = self.counters.as_mut() {
            c.source_mut().read_raw_into(&mut raw)?;
        }
        // Time starts after our own read; the marker is the last thing before the region.
        roofline_marker::energy::log_begin(name.as_bytes());
        self.open.push(Open {
            idx,
            start: Instant::now(),
            raw,
        });
        roofline_region_begin(self.names[idx].as_ptr());
        Ok(())
    }

    /// The index of an interned name: a scan while there are few (cheaper than hashing).
    fn find(&self, name: &str) -> Option<usize> {
        if self.names.len() <= SCAN_NAMES {
            self.names.iter().position(|n| n.as_bytes() == name.as_bytes())
        } else {
            self.index.get(name).copied()
        }
    }

    fn intern(&mut self, name: &str) -> Result<usize> {
        if let Some(i) = self.find(name) {
            return Ok(i);
        }
        let c = CString::new(name).map_err(|_| Error::input(format!("region name {name:?} contains a NUL byte"), "use a plain name"))?;
        self.names.push(c);
        self.totals.push(None);
        self.index.insert(name.to_string(), self.names.len() - 1);
        Ok(self.names.len() - 1)
    }

    /// End the region `name` and add the call to its totals (the cheap path: no
    /// per-call measurement is built).
    pub fn stop(&mut self, name: &str) -> Result<()> {
        let call = self.end_call(name)?;
        self.spare.push(call.raw);
        Ok(())
    }

    /// End the region `name`: this call's W, Q and T (also added to the totals).
    pub fn end(&mut self, name: &str) -> Result<Measurement> {
        let call = self.end_call(name)?;
        Ok(self.measurement(std::slice::from_ref(&call.seconds), &call.raw, 1))
    }

    fn end_call(&mut self, name: &str) -> Result<Call> {
        // Regions end in LIFO order almost always: try the innermost first.
        let pos = match self.open.last() {
            Some(o) if self.names[o.idx].as_bytes() == name.as_bytes() => Some(self.open.len() - 1),
            _ => self.find(name).and_then(|idx| self.open.iter().rposition(|o| o.idx == idx)),
        }
        .ok_or_else(|| Error::input(format!("region '{name}' ended but never begun"), "call begin before end"))?;
        roofline_region_end(self.names[self.open[pos].idx].as_ptr());
        let seconds = self.open[pos].start.elapsed().as_secs_f64();
        roofline_marker::energy::log_end(self.names[self.open[pos].idx].as_bytes());
        if let Some(c) = self.counters.as_mut() {
            c.source_mut().read_raw_into(&mut self.now)?;
        }
        let mut open = self.open.remove(pos);
        for (b, n) in open.raw.iter_mut().zip(&self.now) {
            *b = n.since(b);
        }
        self.totals[open.idx].get_or_insert_with(Accum::default).add(seconds, &open.raw);
        Ok(Call { seconds, raw: open.raw })
    }

    /// Forget the totals of `name` (LIKWID_MARKER_RESET).
    pub fn reset(&mut self, name: &str) {
        if let Some(i) = self.find(name) {
            self.totals[i] = None;
        }
    }

    /// Totals of one region over all its calls.
    pub fn totals(&self, name: &str) -> Option<RegionTotals> {
        let a = self.totals.get(self.find(name)?)?.as_ref()?;
        Some(self.region_totals(name, a))
    }

    /// Every region's totals, by name.
    pub fn regions(&self) -> Vec<RegionTotals> {
        let mut ended: Vec<(&str, &Accum)> = self
            .names
            .iter()
            .zip(&self.totals)
            .filter_map(|(n, a)| Some((n.to_str().ok()?, a.as_ref()?)))
            .collect();
        crate::util::sort_by_key(&mut ended, |(n, _)| *n);
        ended.into_iter().map(|(n, a)| self.region_totals(n, a)).collect()
    }

    fn region_totals(&self, name: &str, a: &Accum) -> RegionTotals {
        RegionTotals {
            name: name.to_string(),
            calls: a.calls,
            seconds: a.seconds_sum,
            counts: self.scaled(&a.raw).into_iter().map(|c| c.scaled.map(|s| s.value)).collect(),
            measurement: self.measurement(&a.seconds, &a.raw, a.calls),
        }
    }

    fn scaled(&self, raw: &[RawCount]) -> Vec<EventCount> {
        let Some(c) = &self.counters else { return Vec::new() };
        c.source()
            .specs()
            .iter()
            .zip(raw)
            .map(|(s, r)| EventCount {
                name: s.name.clone(),
                scaled: perf::scale(r.value, r.time_enabled, r.time_running),
            })
            .collect()
    }

    fn measurement(&self, seconds: &[f64], raw: &[RawCount], calls: u64) -> Measurement {
        let mut m = match &self.counters {
            Some(c) => {
                let counts = self.scaled(raw);
                let mut m = perf::to_measurement(c.source().specs(), &counts, seconds.to_vec());
                let source = if self.mode == Mode::Simulated {
                    Source::Simulated
                } else {
                    Source::Perf
                };
                crate::counters::trust::mark(&mut m, c.source().specs(), &counts, source);
                m
            }
            None => Measurement {
                provenance: Some(Provenance {
                    flops: None,
                    bytes: BTreeMap::new(),
                    seconds: Some(Source::Native),
                    notes: vec![match self.mode {
                        Mode::Traced => "W and Q are counted by the tracer at the region markers".into(),
                        _ => "time only: W and Q come from analytic counts".into(),
                    }],
                    untrusted: Vec::new(),
                }),
                seconds_samples: seconds.to_vec(),
                threads: 1,
                ..Measurement::default()
            },
        };
        if let Some(p) = m.provenance.as_mut() {
            p.notes.extend(self.notes.iter().cloned());
        }
        #[cfg(feature = "trace")]
        if let Some(sim) = &self.simulated {
            simulated::mark_simulated(&mut m, &sim.0);
        }
        if self.counting == Counting::Process && self.mode == Mode::Counters {
            // The threads there are when the measurement is taken (a region's end): the
            // counters cannot tell which of them ran in it.
            m.threads = std::fs::read_dir("/proc/self/task").map(|d| d.count()).unwrap_or(1).max(1) as u32;
            if let Some(p) = m.provenance.as_mut() {
                p.notes.push(format!(
                    "every thread of the process counted while the region was open ({} at the end)",
                    m.threads
                ));
            }
        }
        m.extra.calls = Some(calls);
        m
    }

    /// A `roofline.report/1` with one point per region.
    pub fn report(&self) -> Report {
        let mut r = Report::new(
            serde_json::json!({ "microarchitecture": perf::identify_platform().map(|p| p.key) }),
            Environment {
                tool_version: env!("CARGO_PKG_VERSION").to_string(),
                command_line: std::env::args().collect(),
                ..Environment::default()
            },
        );
        r.points = self.regions().into_iter().map(|t| t.measurement.into_point(t.name)).collect();
        r
    }
}

/// Under `roofline measure`, a session hands its regions' wall times to it when dropped
/// (`counters::region_times`): the native runs give each traced region its T.
impl Drop for Session {
    fn drop(&mut self) {
        // Regions still open end here, innermost first, as if `end` had been called: a
        // tracer outside the process sees balanced markers (otherwise it would count
        // everything the program does after the drop into them), and their calls count.
        // Nobody can be returned an error at drop, so it is said on stderr.
        while let Some(o) = self.open.last() {
            let name = self.names[o.idx].to_string_lossy().into_owned();
            eprintln!("roofline: region '{name}' was still open when its session was dropped: ended there");
            if self.end_call(&name).is_err() {
                // Reading the counters failed: close the marker anyway, count nothing.
                if let Some(o) = self.open.pop() {
                    roofline_region_end(self.names[o.idx].as_ptr());
                }
            }
        }
        if !region_times::under_measure() || !self.hands_back {
            return;
        }
        let times = self
            .names
            .iter()
            .zip(&self.totals)
            .filter_map(|(n, a)| {
                let a = a.as_ref()?;
                Some(region_times::RegionTime {
                    name: n.to_str().ok()?.to_string(),
                    calls: a.calls,
                    seconds: a.seconds_sum,
                })
            })
            .collect();
        // Nobody to tell at drop: a time that could not be written is missing in the report,
        // which says so.
        let _ = region_times::write_session(times);
        let _ = roofline_marker::write_region_energy();
        // Counted regions go to `measure --backend perf` too: its counters outside the
        // program count the whole run, this session's count each region.
        if self.mode == Mode::Counters {
            let counting = match self.counting {
                Counting::Process => "process",
                Counting::ThisThread => "thread",
            };
            let _ = region_times::write_session_points(counting, self.report().points);
        }
    }
}

/// Totals of one region over its calls.
#[derive(Debug, Clone)]
pub struct RegionTotals {
    /// The region's name.
    pub name: String,
    /// How many times it was measured (begin/end pairs, `region` and `measure` calls).
    pub calls: u64,
    /// Sum of the calls' wall time (all calls).
    pub seconds: f64,
    /// Scaled counts per event (order of [`Session::events`]); `None`: never scheduled.
    pub counts: Vec<Option<f64>>,
    /// W, Q and T summed over the calls (`seconds_samples`: one per call, the first
    /// [`MAX_SAMPLES`]).
    pub measurement: Measurement,
}

/// The software events a [`Session::software`] counts.
pub fn software_events() -> Vec<CounterSpec> {
    perf::software_events(Path::new(SYSFS_PMUS), false)
}

/// The platform's core events plus cycles and task-clock; uncore events when paranoid
/// allows. The notes (PMUs missing, what the platform cannot count) go into every region's
/// provenance.
fn platform_counters(pmus: &Path) -> Result<(Vec<CounterSpec>, Vec<String>)> {
    perf::core_pmu(pmus)?;
    perf::check_paranoid(perf::paranoid(), false)?;
    let plat = perf::identify_platform().ok_or_else(|| {
        Error::unavailable(
            "unknown microarchitecture: no platform file matches this CPU",
            "use Session::with_events with explicit events, or Backend::Analytic",
        )
    })?;
    let uncore = perf::check_paranoid(perf::paranoid(), true).is_ok();
    let (specs, mut notes) = perf::counters_for_platform(&plat, pmus, false, uncore, perf::nmi_watchdog_on())?;
    if !uncore {
        notes.push("perf_event_paranoid forbids system-wide events: no uncore (DRAM) counts in regions".into());
    }
    Ok((specs, notes))
}

// ---- C ABI (include/roofline.h) -------------------------------------------------------

/// Process-wide state of the C ABI: what each thread counts, and totals merged over threads.
struct Global {
    /// How threads open their sessions (fixed at init).
    backend: CBackend,
    /// Event names, in the order of `roofline_marker_get`'s array.
    events: Vec<String>,
    /// The initialising session's notes, for the report CLOSE writes.
    notes: Vec<String>,
    /// Sorted by name (a vector, not a map: each map type is its own copy of the B-tree code
    /// in a regions-only build, and a program marks few names).
    totals: Vec<(String, Merged)>,
    warned: bool,
    /// The process that initialised the API: only it writes region times at exit (a forked
    /// child inherits the totals and the exit handler).
    pid: u32,
}

impl Global {
    /// Where `name`'s totals are, or would be inserted.
    fn find(&self, name: &str) -> std::result::Result<usize, usize> {
        self.totals.binary_search_by(|(n, _)| n.as_str().cmp(name))
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum CBackend {
    Perf,
    Software,
    Traced,
    TimeOnly,
    /// The simulated PMU (a test instrument): regions given as functions only
    /// (`roofline_marker_region`).
    Simulated,
}

#[derive(Default, Clone)]
struct Merged {
    calls: u64,
    seconds: f64,
    counts: Vec<f64>,
    /// Thread ids that ran it, sorted.
    threads: Vec<u64>,
    /// Each of those threads' summed seconds (same order).
    thread_seconds: Vec<f64>,
}

fn global() -> &'static Mutex<Option<Global>> {
    static G: OnceLock<Mutex<Option<Global>>> = OnceLock::new();
    G.get_or_init(|| Mutex::new(None))
}

thread_local! {
    static THREAD: std::cell::RefCell<Option<Session>> = const { std::cell::RefCell::new(None) };
}

fn thread_id() -> u64 {
    nix::unistd::gettid().as_raw() as u64
}

/// Read a region name from C.
fn name_from_c(name: *const c_char) -> Option<String> {
    if name.is_null() {
        return None;
    }
    // SAFETY: the C caller passes a NUL-terminated string that stays valid for the call
    // (the contract documented in roofline.h); null was excluded above.
    let s = unsafe { CStr::from_ptr(name) };
    Some(s.to_string_lossy().into_owned())
}

fn open_session(b: CBackend) -> Result<Session> {
    let mut s = open_backend_session(b)?;
    s.hands_back = false;
    Ok(s)
}

fn open_backend_session(b: CBackend) -> Result<Session> {
    match b {
        // One session per thread, totals merged per name: each counts its own thread.
        CBackend::Perf => Session::this_thread(),
        CBackend::Software => Session::software_this_thread(),
        CBackend::Traced => Session::new(Backend::Trace),
        CBackend::TimeOnly => Session::new(Backend::Analytic),
        // The C ABI's --platform: the simulated PMU's table (else CPUID's).
        #[cfg(feature = "trace")]
        CBackend::Simulated => Session::simulated(SimulatedPmu::from_env(
            std::env::var("ROOFLINE_PLATFORM").ok().filter(|p| !p.is_empty()).as_deref(),
        )?),
        #[cfg(not(feature = "trace"))]
        CBackend::Simulated => Err(Error::unavailable(
            "the simulated PMU traces its regions: this build has no `trace` feature",
            "build roofline with its default features",
        )),
    }
}

fn warn_once(g: &mut Global, msg: &str) {
    if !g.warned {
        eprintln!("roofline: {msg}");
        g.warned = true;
    }
}

/// `ROOFLINE_BACKEND`: auto (default), perf, software, trace, analytic, simulated (never auto).
fn backend_from_env() -> std::result::Result<CBackend, String> {
    let v = std::env::var("ROOFLINE_BACKEND").unwrap_or_else(|_| "auto".into());
    Ok(match v.as_str() {
        "perf" => CBackend::Perf,
        "software" => CBackend::Software,
        "trace" => CBackend::Traced,
        "analytic" => CBackend::TimeOnly,
        "simulated" => CBackend::Simulated,
        // No counters and no tracer outside a native run of `roofline measure`: regions keep
        // time only here (the C marker API never fails the program for want of counters).
        "auto" | "" => match crate::counters::choose(Backend::Auto, crate::counters::Target::Region, Path::new(SYSFS_PMUS)) {
            Ok((Backend::Perf, _)) => CBackend::Perf,
            Ok((Backend::Trace, _)) => CBackend::Traced,
            _ => CBackend::TimeOnly,
        },
        other => {
            return Err(format!(
                "ROOFLINE_BACKEND={other} is not one of auto, perf, software, trace, analytic, simulated"
            ));
        }
    })
}

/// Initialise the marker API (LIKWID_MARKER_INIT). Returns 0, or -1 when the chosen backend
/// cannot count here (a one-line reason on stderr; regions then keep time only).
#[unsafe(no_mangle)]
pub extern "C" fn roofline_marker_init() -> c_int {
    let mut g = global().lock().unwrap_or_else(|e| e.into_inner());
    if g.is_some() {
        return 0;
    }
    let (backend, failure) = match backend_from_env() {
        Err(msg) => (CBackend::TimeOnly, Some(msg)),
        Ok(b) => match open_session(b) {
            Ok(s) => {
                let events = s.events();
                let notes = s.notes().to_vec();
                THREAD.with(|t| *t.borrow_mut() = Some(s));
                *g = Some(Global {
                    backend: b,
                    events,
                    notes,
                    totals: Vec::new(),
                    warned: false,
                    pid: std::process::id(),
                });
                drop(g);
                write_c_times_at_exit();
                return 0;
            }
            Err(e) => (CBackend::TimeOnly, Some(e.to_string().replace('\n', ";"))),
        },
    };
    let mut st = Global {
        backend,
        events: Vec::new(),
        notes: Vec::new(),
        totals: Vec::new(),
        warned: false,
        pid: std::process::id(),
    };
    if let Some(msg) = failure {
        warn_once(&mut st, &format!("{msg} (regions keep wall time only)"));
    }
    *g = Some(st);
    drop(g);
    write_c_times_at_exit();
    -1
}

/// The backend threads open their sessions with, initialising the API on first use.
fn backend_or_init() -> CBackend {
    if let Some(g) = global().lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        return g.backend;
    }
    roofline_marker_init();
    global()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
        .map(|g| g.backend)
        .unwrap_or(CBackend::TimeOnly)
}

fn warn(msg: &str) {
    if let Some(g) = global().lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
        warn_once(g, msg);
    }
}

/// Run `f` on this thread's session, opening it on first use. Takes no process-wide lock
/// once the thread's session exists: threads start and stop regions independently.
fn with_thread_session<T>(f: impl FnOnce(&mut Session) -> Result<T>) -> Option<T> {
    if THREAD.with(|t| t.borrow().is_none()) {
        // Outside the borrow: init may store the initialising thread's session itself.
        let backend = backend_or_init();
        THREAD.with(|t| {
            let mut slot = t.borrow_mut();
            if slot.is_none() {
                *slot = Some(open_session(backend).unwrap_or_else(|e| {
                    warn(&format!("thread session: {}", e.to_string().replace('\n', ";")));
                    Session::time_only(Mode::TimeOnly)
                }));
            }
        });
    }
    THREAD.with(|t| {
        let mut slot = t.borrow_mut();
        match f(slot.as_mut()?) {
            Ok(v) => Some(v),
            Err(e) => {
                warn(&e.to_string().replace('\n', ";"));
                None
            }
        }
    })
}

/// Start a region on this thread (LIKWID_MARKER_START). 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn roofline_marker_start(name: *const c_char) -> c_int {
    let Some(name) = name_from_c(name) else { return -1 };
    // The session's begin calls the roofline_region_begin marker as its last step.
    match with_thread_session(|s| s.begin(&name)) {
        Some(()) => 0,
        None => -1,
    }
}

/// Stop a region on this thread (LIKWID_MARKER_STOP) and add the call to the process totals.
#[unsafe(no_mangle)]
pub extern "C" fn roofline_marker_stop(name: *const c_char) -> c_int {
    let Some(name) = name_from_c(name) else { return -1 };
    let done = with_thread_session(|s| {
        let call = s.end_call(&name)?;
        let counts: Vec<f64> = s
            .scaled(&call.raw)
            .iter()
            .map(|c| c.scaled.map(|x| x.value).unwrap_or(0.0))
            .collect();
        Ok((call.seconds, counts))
    });
    let Some((seconds, counts)) = done else { return -1 };
    merge_call(name, seconds, counts)
}

/// Run `work(arg)` as the region `name` on this thread: start, the call, stop. The one form
/// the simulated PMU (`ROOFLINE_BACKEND=simulated`) counts: the call is traced once in a
/// forked child, then run here (so `work` must not allocate or lock). 0 or -1.
#[unsafe(no_mangle)]
pub extern "C" fn roofline_marker_region(name: *const c_char, work: Option<extern "C" fn(*mut c_void)>, arg: *mut c_void) -> c_int {
    let (Some(name), Some(work)) = (name_from_c(name), work) else {
        return -1;
    };
    let done = with_thread_session(|s| {
        // The C caller vouches for `work` taking `arg` (roofline.h's contract).
        let (_, call) = s.region_call(&name, || work(arg))?;
        let counts: Vec<f64> = s
            .scaled(&call.raw)
            .iter()
            .map(|c| c.scaled.map(|x| x.value).unwrap_or(0.0))
            .collect();
        Ok((call.seconds, counts))
    });
    let Some((seconds, counts)) = done else { return -1 };
    merge_call(name, seconds, counts)
}

/// Add one call of region `name` on this thread to the process totals. 0 or -1.
fn merge_call(name: String, seconds: f64, counts: Vec<f64>) -> c_int {
    let tid = thread_id();
    let mut g = global().lock().unwrap_or_else(|e| e.into_inner());
    let Some(g) = g.as_mut() else { return -1 };
    let i = g.find(&name).unwrap_or_else(|i| {
        g.totals.insert(i, (name, Merged::default()));
        i
    });
    let m = &mut g.totals[i].1;
    m.calls += 1;
    m.seconds += seconds;
    match m.threads.binary_search(&tid) {
        Ok(at) => m.thread_seconds[at] += seconds,
        Err(at) => {
            m.threads.insert(at, tid);
            m.thread_seconds.insert(at, seconds);
        }
    }
    if m.counts.len() < counts.len() {
        m.counts.resize(counts.len(), 0.0);
    }
    for (a, c) in m.counts.iter_mut().zip(counts) {
        *a += c;
    }
    0
}

/// Under `roofline measure`, the region times of the whole process, merged over threads
/// (`region_times::write_process`): a region's calls are every begin of every thread, as the
/// tracer counts them, and its seconds the longest thread's.
fn write_c_times(g: &Global) {
    if g.pid != std::process::id() {
        return;
    }
    let times: Vec<region_times::RegionTime> = g
        .totals
        .iter()
        .map(|(name, m)| region_times::RegionTime {
            name: name.clone(),
            calls: m.calls,
            seconds: m.thread_seconds.iter().copied().fold(0.0, f64::max),
        })
        .collect();
    // Nobody to tell (at exit): a time not written is missing in the report, which says so.
    let _ = region_times::write_process(&times);
    // When each thread's regions ran, for `measure --energy` (nothing unless it asked).
    let _ = roofline_marker::write_region_energy();
}

/// Under `roofline measure`, write the merged region times again when the process exits
/// (a program that never calls `roofline_marker_close`, or marks regions after it).
fn write_c_times_at_exit() {
    extern "C" fn at_exit() {
        // Another thread may hold the lock while the process exits: skip rather than wait.
        if let Ok(g) = global().try_lock()
            && let Some(g) = g.as_ref()
        {
            write_c_times(g);
        }
    }
    if region_times::under_measure() {
        // SAFETY: registers a plain function of this library; glibc runs it at exit (or when
        // the library is unloaded, `atexit` being bound to the calling object's handle).
        unsafe { nix::libc::atexit(at_exit) };
    }
}

/// Forget a region's totals (LIKWID_MARKER_RESET).
#[unsafe(no_mangle)]
pub extern "C" fn roofline_marker_reset(name: *const c_char) -> c_int {
    let Some(name) = name_from_c(name) else { return -1 };
    let mut g = global().lock().unwrap_or_else(|e| e.into_inner());
    if let Some(g) = g.as_mut()
        && let Ok(i) = g.find(&name)
    {
        g.totals.remove(i);
    }
    THREAD.with(|t| {
        if let Some(s) = t.borrow_mut().as_mut() {
            s.reset(&name);
        }
    });
    0
}

/// Number of counted events (the length `roofline_marker_get` fills).
#[unsafe(no_mangle)]
pub extern "C" fn roofline_marker_event_count() -> c_int {
    let g = global().lock().unwrap_or_else(|e| e.into_inner());
    g.as_ref().map(|g| g.events.len() as c_int).unwrap_or(0)
}

/// Copy the name of event `index` into `buf` (NUL-terminated, truncated to `len`).
/// Returns the full name's length, or -1 for a bad index or buffer.
#[unsafe(no_mangle)]
pub extern "C" fn roofline_marker_event_name(index: c_int, buf: *mut c_char, len: usize) -> c_int {
    let g = global().lock().unwrap_or_else(|e| e.into_inner());
    let Some(name) = g.as_ref().and_then(|g| g.events.get(usize::try_from(index).ok()?)) else {
        return -1;
    };
    if buf.is_null() || len == 0 {
        return -1;
    }
    copy_to_c(name.as_bytes(), buf, len);
    name.len() as c_int
}

/// Copy bytes plus a NUL into a C buffer of `len` bytes, truncating.
fn copy_to_c(bytes: &[u8], buf: *mut c_char, len: usize) {
    let n = bytes.len().min(len - 1);
    // SAFETY: the caller guarantees `buf` points to `len` writable bytes (roofline.h's
    // contract), `len >= 1` was checked, and `n + 1 <= len`.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr().cast::<c_char>(), buf, n);
        *buf.add(n) = 0;
    }
}

/// A region's totals over all threads (LIKWID_MARKER_GET): on input `*nevents` is the
/// capacity of `events`, on output the number filled; `*time` the summed seconds, `*count`
/// the calls. Returns 0, or -1 for an unknown region or null pointers.
#[unsafe(no_mangle)]
pub extern "C" fn roofline_marker_get(
    name: *const c_char,
    nevents: *mut c_int,
    events: *mut c_double,
    time: *mut c_double,
    count: *mut c_int,
) -> c_int {
    let Some(name) = name_from_c(name) else { return -1 };
    if nevents.is_null() || time.is_null() || count.is_null() {
        return -1;
    }
    let g = global().lock().unwrap_or_else(|e| e.into_inner());
    let Some(m) = g.as_ref().and_then(|g| Some(&g.totals[g.find(&name).ok()?].1)) else {
        return -1;
    };
    write_region(m, nevents, events, time, count);
    0
}

fn write_region(m: &Merged, nevents: *mut c_int, events: *mut c_double, time: *mut c_double, count: *mut c_int) {
    // SAFETY: non-null checked by the caller; `events` holds `*nevents` doubles (or is null
    // with *nevents 0), as roofline.h documents.
    unsafe {
        let cap = usize::try_from(*nevents).unwrap_or(0);
        let n = if events.is_null() { 0 } else { cap.min(m.counts.len()) };
        for (i, v) in m.counts.iter().take(n).enumerate() {
            *events.add(i) = *v;
        }
        *nevents = n as c_int;
        *time = m.seconds;
        *count = c_int::try_from(m.calls).unwrap_or(c_int::MAX);
    }
}

/// Finish (LIKWID_MARKER_CLOSE): print every region's totals on stderr, and write them as a
/// `roofline.report/1` to `$ROOFLINE_OUTPUT` when set. Returns 0, or -1 if writing failed.
#[unsafe(no_mangle)]
pub extern "C" fn roofline_marker_close() -> c_int {
    let g = global().lock().unwrap_or_else(|e| e.into_inner());
    let Some(g) = g.as_ref() else { return 0 };
    write_c_times(g);
    // The report (and the CPU identification it names) only when it is asked for: under the
    // trace backend everything the program runs is counted, this too.
    let output = std::env::var("ROOFLINE_OUTPUT").ok().filter(|p| !p.is_empty());
    let mut report = output.as_ref().map(|_| {
        Report::new(
            serde_json::json!({ "microarchitecture": perf::identify_platform().map(|p| p.key) }),
            Environment {
                tool_version: env!("CARGO_PKG_VERSION").to_string(),
                command_line: std::env::args().collect(),
                ..Environment::default()
            },
        )
    });
    for (name, m) in &g.totals {
        let mut line = format!(
            "roofline region {name}: {} calls on {} threads, {:.6} s",
            m.calls,
            m.threads.len(),
            m.seconds
        );
        let mut counts = std::collections::BTreeMap::new();
        for (e, v) in g.events.iter().zip(&m.counts) {
            line += &format!(", {e} {v:.0}");
            counts.insert(e.clone(), Some(*v));
        }
        if g.backend == CBackend::Simulated {
            line += " (SIMULATED PMU, a test instrument)";
        }
        eprintln!("{line}");
        let Some(report) = report.as_mut() else { continue };
        let mut meas = Measurement {
            provenance: Some(Provenance {
                flops: None,
                bytes: BTreeMap::new(),
                seconds: Some(Source::Native),
                notes: std::iter::once(format!(
                    "C marker API, backend {:?}; seconds summed over calls and threads",
                    g.backend
                ))
                .chain(g.notes.iter().cloned())
                .collect(),
                untrusted: Vec::new(),
            }),
            seconds_samples: vec![m.seconds],
            threads: m.threads.len() as u32,
            ..Measurement::default()
        };
        meas.extra.calls = Some(m.calls);
        meas.extra.counts = Some(counts);
        report.points.push(meas.into_point(name.clone()));
    }
    if let (Some(path), Some(report)) = (output, report)
        && let Err(e) = crate::util::write_atomic(Path::new(&path), report.to_json().as_bytes())
    {
        eprintln!("roofline: ROOFLINE_OUTPUT={path}: {e}");
        return -1;
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn analytic_session_times_and_accumulates() {
        let mut s = Session::new(Backend::Analytic).unwrap();
        for _ in 0..3 {
            let ((), m) = s
                .measure("spin", || std::thread::sleep(std::time::Duration::from_millis(2)))
                .unwrap();
            assert!(m.seconds_samples[0] >= 0.002);
        }
        let t = s.totals("spin").unwrap();
        assert_eq!(t.calls, 3);
        assert!(t.seconds >= 0.006);
        assert_eq!(t.measurement.seconds_samples.len(), 3);
        assert!(s.totals("other").is_none());
    }

    #[test]
    fn region_returns_the_closure_value_and_measure_the_call() {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64)
            .unwrap_or(7);
        let xs: Vec<u64> = (0..1000u64).map(|i| (i * 2654435761 + seed) % 1009).collect();
        let want: u64 = xs.iter().sum();
        let mut s = Session::new(Backend::Analytic).unwrap();
        // A non-Copy value, moved out of the closure.
        let got: Vec<u64> = s.region("collect", || xs.iter().map(|x| x + 1).collect()).unwrap();
        assert_eq!(got.iter().sum::<u64>(), want + 1000);
        let (sum, m) = s
            .measure("sum", || {
                std::thread::sleep(std::time::Duration::from_millis(1));
                xs.iter().sum::<u64>()
            })
            .unwrap();
        assert_eq!(sum, want);
        assert!(m.seconds_samples[0] >= 0.001, "{:?}", m.seconds_samples);
        assert_eq!(m.extra.calls, Some(1));
        // Both count in the totals; a failed region gives no value and no call.
        assert_eq!(s.totals("collect").map(|t| t.calls), Some(1));
        assert_eq!(s.region("sum", || 3).unwrap(), 3);
        assert_eq!(s.totals("sum").map(|t| t.calls), Some(2));
        assert!(s.region("bad\0name", || 1).is_err());
        assert!(s.totals("bad\0name").is_none());
        assert_eq!(s.report().points.len(), 2);
    }

    #[test]
    fn unbalanced_regions_are_errors() {
        let mut s = Session::new(Backend::Analytic).unwrap();
        assert!(s.end("x").is_err());
        s.begin("x").unwrap();
        assert!(s.begin("x").is_err());
        s.begin("y").unwrap();
        s.end("x").unwrap();
        s.end("y").unwrap();
        assert!(s.begin("a\0b").is_err());
    }

    #[test]
    fn a_session_dropped_with_regions_open_ends_them() {
        let (b0, e0) = marker_calls();
        {
            let mut s = Session::new(Backend::Analytic).unwrap();
            s.begin("outer").unwrap();
            s.begin("inner").unwrap();
            s.region("done", || ()).unwrap();
        }
        let (b1, e1) = marker_calls();
        assert_eq!((b1 - b0, e1 - e0), (3, 3), "every begin has its end");
    }

    #[test]
    fn markers_run_once_per_region_call() {
        let (b0, e0) = marker_calls();
        let mut s = Session::new(Backend::Analytic).unwrap();
        s.region("m", || ()).unwrap();
        s.region("m", || ()).unwrap();
        let (b1, e1) = marker_calls();
        assert_eq!((b1 - b0, e1 - e0), (2, 2));
        // Another thread's markers are its own.
        std::thread::spawn(|| {
            let mut s = Session::new(Backend::Analytic).unwrap();
            s.region("t", || ()).unwrap();
        })
        .join()
        .unwrap();
        assert_eq!(marker_calls(), (b1, e1));
    }

    #[test]
    fn session_notes_reach_every_region() {
        let note = "Q_dram unavailable: Zen / Zen+ has no usable DRAM counter event".to_string();
        let mut s = Session::with_events_and_notes(software_events(), vec![note.clone()]).unwrap();
        assert_eq!(s.notes(), std::slice::from_ref(&note));
        let ((), m) = s.measure("r", || ()).unwrap();
        assert!(m.provenance.unwrap().notes.contains(&note));
        let t = s.totals("r").unwrap();
        assert!(t.measurement.provenance.unwrap().notes.contains(&note));
        let r = s.report();
        assert!(r.points[0].provenance.notes.contains(&note));
        // Without notes, none appear.
        let mut plain = Session::software().unwrap();
        let ((), m) = plain.measure("r", || ()).unwrap();
        assert!(!m.provenance.unwrap().notes.iter().any(|n| n.contains("Q_dram")));
    }
}
