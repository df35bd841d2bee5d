//! Open, enable, disable and read event groups: the `perf_event_open` calls per task or CPU,
//! the group `read()` layout, rdpmc reads of mapped counters, and scaling for multiplexing.

#[cfg(any(test, feature = "analysis"))]
use perf_event::Builder;
use perf_event::Counter;
#[cfg(any(test, feature = "analysis"))]
use perf_event::events::Software;

#[cfg(any(test, feature = "analysis"))]
use super::group_read_format;
use super::{CounterSpec, Scope, open_error};
use crate::error::{Error, Result};

/// One group's reading, as [`parse_group_read`] gives it: the times shared by the group, then
/// `(id, value)` per member in the order the kernel wrote them.
#[cfg(any(test, feature = "analysis"))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupReading {
    pub time_enabled: u64,
    pub time_running: u64,
    pub values: Vec<(u64, u64)>,
}

/// Parse the bytes of a `read()` of a group leader opened with `group_read_format`
/// (`nr, time_enabled, time_running, (value, id) × nr`, native endian) with the parser
/// perf-event2 uses on live counters. Any bytes give a reading or an error, never a panic;
/// trailing bytes past the `nr` entries are ignored.
///
/// Live counters are read through [`CounterSet`], which does not need this; it is what the
/// unit tests and the `perf_group_read` fuzz target (`fuzz/`) check the layout with, so the
/// light build (no `analysis`) leaves it out.
#[cfg(any(test, feature = "analysis"))]
pub fn parse_group_read(bytes: &[u8]) -> Result<GroupReading> {
    use perf_event::data::ReadGroup;
    use perf_event::data::endian::Native;
    use perf_event::data::parse::{ParseConfig, Parser};

    let mut b = Builder::new(Software::DUMMY);
    b.read_format(group_read_format());
    let config: ParseConfig<Native> = ParseConfig::from(*b.attrs());
    let mut parser = Parser::new(bytes, config);
    let group: ReadGroup = parser.parse().map_err(|e| {
        Error::unavailable(
            format!("malformed perf group read ({} bytes): {e}", bytes.len()),
            "the kernel returned an unexpected read_format layout; report this",
        )
    })?;
    Ok(GroupReading {
        time_enabled: group.time_enabled().unwrap_or(0),
        time_running: group.time_running().unwrap_or(0),
        values: group.entries().map(|e| (e.id().unwrap_or(0), e.value())).collect(),
    })
}

/// A count scaled for multiplexing: `raw × enabled / running`, and `running / enabled`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scaled {
    pub raw: u64,
    pub value: f64,
    /// Fraction of the enabled time the event was on a counter (1.0: not multiplexed).
    pub running_ratio: f64,
}

/// `None` when the event never ran (time_running 0 while enabled): not counted.
pub fn scale(raw: u64, time_enabled: u64, time_running: u64) -> Option<Scaled> {
    if time_enabled == 0 {
        // Never enabled (e.g. the command did not exec): a true zero.
        return Some(Scaled {
            raw,
            value: raw as f64,
            running_ratio: 1.0,
        });
    }
    if time_running == 0 {
        return None;
    }
    let ratio = (time_running as f64 / time_enabled as f64).min(1.0);
    Some(Scaled {
        raw,
        value: if time_running >= time_enabled {
            raw as f64
        } else {
            raw as f64 * time_enabled as f64 / time_running as f64
        },
        running_ratio: ratio,
    })
}

/// The final count of one event.
#[derive(Debug, Clone, PartialEq)]
pub struct EventCount {
    /// The counter's display name ([`CounterSpec::name`]).
    pub name: String,
    /// `None`: never scheduled (multiplexed out the whole time).
    pub scaled: Option<Scaled>,
}

/// What the counters observe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// This thread and every thread/process it creates afterwards, enabled at exec
    /// (`inherit` + `enable_on_exec`; command mode).
    InheritOnExec,
    /// Only the calling thread (region mode: no inherit, so rdpmc can read it).
    ThisThread,
    /// The whole process from now on (region mode, the default): the calling thread with
    /// `inherit` (threads it creates later are counted, and `read()` includes live ones,
    /// Linux ≥ 4.13 for groups), and every other thread that exists now, each with a group
    /// of its own (also inherited: a pool started before the session is covered, and what
    /// its threads start). Read with `read()` only: inherited counters cannot be mapped.
    Process,
}

/// One event group of `members` for a task (`tid`, None: the calling thread) or a CPU, as
/// `target` asks; on failure, the member that failed and the kernel's error.
fn open_task_group(
    specs: &[CounterSpec],
    members: &[usize],
    cpu: Option<usize>,
    tid: Option<i32>,
    target: Target,
) -> std::result::Result<Vec<Counter>, (usize, std::io::Error)> {
    let mut counters: Vec<Counter> = Vec::with_capacity(members.len());
    for &i in members {
        let mut b = specs[i].builder();
        match cpu {
            Some(c) => {
                b.any_pid().one_cpu(c);
            }
            None => {
                match tid {
                    Some(t) => b.observe_pid(t),
                    None => b.observe_self(),
                };
                b.any_cpu();
                match target {
                    Target::InheritOnExec => {
                        b.inherit(true).enable_on_exec(true);
                    }
                    Target::Process => {
                        b.inherit(true);
                    }
                    Target::ThisThread => {}
                }
            }
        }
        let built = match counters.first_mut() {
            None => b.build(),
            // Members are created enabled: they count whenever their leader does, so enabling
            // (or exec-enabling) the leader starts the group.
            Some(leader) => b.enabled(true).enable_on_exec(false).build_with_group(leader),
        };
        counters.push(built.map_err(|e| (i, e))?);
    }
    Ok(counters)
}

/// How many times another thread's group is opened before its failure is the session's.
const OPEN_ATTEMPTS: u32 = 32;

/// Whether thread `tid` of this process has exited or is exiting: its `/proc/self/task/TID/stat`
/// is gone, says zombie or dead, or its flags hold `PF_EXITING` (0x4, kernel `sched.h`).
fn thread_gone_or_exiting(tid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")) else {
        return true;
    };
    // After the command's closing parenthesis: state, ppid, pgrp, session, tty_nr, tpgid, flags.
    let Some((_, rest)) = stat.rsplit_once(')') else { return false };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let state = fields.first().copied().unwrap_or("");
    let flags: u64 = fields.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
    matches!(state, "Z" | "X" | "x") || flags & 0x4 != 0
}

/// The other threads of this process now (from `/proc/self/task`), without the caller.
pub fn other_threads() -> Vec<i32> {
    let me = nix::unistd::gettid().as_raw();
    let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|t| *t != me)
        .collect()
}

/// A group member: a plain fd, or an fd whose control page is mapped for rdpmc.
enum Member {
    Plain(Counter),
    Mapped(perf_event::Sampler),
}

impl Member {
    fn counter(&mut self) -> &mut Counter {
        match self {
            Member::Plain(c) => c,
            Member::Mapped(s) => s,
        }
    }
}

struct OpenGroup {
    /// Members in order (leader first), and the index of each one's spec.
    members: Vec<Member>,
    specs: Vec<usize>,
    /// The CPU of a system-wide (uncore) group; `None` for per-task groups.
    cpu: Option<usize>,
}

/// Open counter groups, enabled and disabled together, read into [`EventCount`]s.
pub struct CounterSet {
    /// The counters, in the order their counts are read.
    pub specs: Vec<CounterSpec>,
    groups: Vec<OpenGroup>,
}

impl CounterSet {
    /// Open every group of `plan`. Groups are opened disabled; per-task groups with
    /// `InheritOnExec` start at exec by themselves, the rest start with [`enable`](Self::enable).
    pub fn open(specs: Vec<CounterSpec>, plan: &[Vec<usize>], target: Target) -> Result<CounterSet> {
        if target == Target::ThisThread {
            // Mapping pages for rdpmc can fail (perf_event_mlock_kb exhausted by many
            // threads): then count with read() only.
            match Self::open_with(specs.clone(), plan, target, true) {
                Err(OpenError::Map) => {}
                Err(OpenError::Open(e)) => return Err(e),
                Ok(set) => return Ok(set),
            }
        }
        match Self::open_with(specs, plan, target, false) {
            Ok(set) => Ok(set),
            Err(OpenError::Open(e)) => Err(e),
            Err(OpenError::Map) => unreachable!("no mapping requested"),
        }
    }

    fn open_with(specs: Vec<CounterSpec>, plan: &[Vec<usize>], target: Target, map: bool) -> Result<CounterSet, OpenError> {
        let mut groups = Vec::new();
        for members in plan {
            let Some(&first) = members.first() else { continue };
            let cpus: Vec<Option<usize>> = match &specs[first].scope {
                Scope::Uncore { cpus } => cpus.iter().map(|&c| Some(c)).collect(),
                _ => vec![None],
            };
            // Per-task groups: this thread, and with `Process` every other thread too.
            let mut tasks: Vec<(Option<usize>, Option<i32>)> = cpus.iter().map(|c| (*c, None)).collect();
            if target == Target::Process && cpus == [None] {
                tasks.extend(other_threads().into_iter().map(|t| (None, Some(t))));
            }
            for (cpu, tid) in tasks {
                // Another thread's group is tried again when a member fails while the thread
                // lives on: its counting context can be swapped or torn down under the open
                // (threads starting and exiting beside it; 1 lib test run in 30 failed on it).
                // On a loaded machine the state lasts until the thread runs again, so the
                // tries are spaced out (at most about 50 ms in all).
                let mut attempts = 0;
                let counters: Vec<Counter> = loop {
                    attempts += 1;
                    match open_task_group(&specs, members, cpu, tid, target) {
                        Ok(c) => break c,
                        // A thread that exited since the task list was read (ESRCH once gone;
                        // ENODEV or EINVAL while its context is torn down): nothing of it is
                        // left to count.
                        Err(_) if tid.is_some_and(thread_gone_or_exiting) => break Vec::new(),
                        Err(_) if tid.is_some() && attempts < OPEN_ATTEMPTS => {
                            std::thread::sleep(std::time::Duration::from_micros(50 * attempts.min(40) as u64));
                            continue;
                        }
                        Err((spec, e)) => return Err(OpenError::Open(open_error(&specs[spec], &e))),
                    }
                };
                if counters.is_empty() {
                    continue; // the thread is gone
                }
                let members: Vec<Member> = counters
                    .into_iter()
                    .zip(members)
                    .map(|(c, &i)| {
                        // Only hardware counters of this thread can be read with rdpmc;
                        // inherited counters cannot be mmapped at all.
                        if map && cpu.is_none() && specs[i].is_hardware_counter() {
                            c.sampled(0).map(Member::Mapped).map_err(|_| OpenError::Map)
                        } else {
                            Ok(Member::Plain(c))
                        }
                    })
                    .collect::<Result<_, _>>()?;
                groups.push(OpenGroup {
                    members,
                    specs: members_of(plan, first),
                    cpu,
                });
            }
        }
        Ok(CounterSet { specs, groups })
    }

    /// Enable the groups that exec does not start (system-wide ones), or all of them.
    pub fn enable(&mut self, only_system_wide: bool) -> Result<()> {
        for g in &mut self.groups {
            if only_system_wide && g.cpu.is_none() {
                continue;
            }
            let spec = &self.specs[g.specs[0]];
            g.members[0].counter().enable_group().map_err(|e| open_error(spec, &e))?;
        }
        Ok(())
    }

    /// Stop every group counting.
    pub fn disable(&mut self) -> Result<()> {
        for g in &mut self.groups {
            let spec = &self.specs[g.specs[0]];
            g.members[0].counter().disable_group().map_err(|e| open_error(spec, &e))?;
        }
        Ok(())
    }

    /// Whether hardware counters have their pages mapped for user-space (rdpmc) reads.
    pub fn user_reads_mapped(&self) -> bool {
        self.groups
            .iter()
            .flat_map(|g| g.members.iter())
            .any(|m| matches!(m, Member::Mapped(_)))
    }

    /// Read every counter: per-spec raw readings, summed over the CPUs of uncore events.
    pub fn read_raw(&mut self) -> Result<Vec<RawCount>> {
        let mut out = Vec::new();
        self.read_raw_into(&mut out)?;
        Ok(out)
    }

    /// [`read_raw`](Self::read_raw) into `out` (resized to the specs; no allocation once it
    /// has that size: the region API reads twice per region). A group whose members are
    /// all mapped and currently on a counter is read with rdpmc (no system call); any other
    /// group with one `read()`.
    pub fn read_raw_into(&mut self, out: &mut Vec<RawCount>) -> Result<()> {
        out.clear();
        out.resize(self.specs.len(), RawCount::default());
        for g in &mut self.groups {
            if read_group_user(&g.members, &g.specs, out) {
                continue;
            }
            let leader_name = &self.specs[g.specs[0]].name;
            let data = g.members[0].counter().read_group().map_err(|e| {
                Error::unavailable(
                    format!("reading the perf group led by {leader_name}: {e}"),
                    "the kernel could not schedule the group; try fewer events",
                )
            })?;
            let te = data.time_enabled().map(|d| d.as_nanos() as u64).unwrap_or(0);
            let tr = data.time_running().map(|d| d.as_nanos() as u64).unwrap_or(0);
            for (m, &si) in g.members.iter_mut().zip(&g.specs) {
                let value = data.get(m.counter()).map(|e| e.value()).unwrap_or(0);
                out[si].add(&RawCount {
                    value,
                    time_enabled: te,
                    time_running: tr,
                });
            }
        }
        Ok(())
    }

    /// Final scaled counts.
    pub fn scaled(&mut self) -> Result<Vec<EventCount>> {
        let raw = self.read_raw()?;
        Ok(self
            .specs
            .iter()
            .zip(raw)
            .map(|(s, r)| EventCount {
                name: s.name.clone(),
                scaled: scale(r.value, r.time_enabled, r.time_running),
            })
            .collect())
    }
}

/// What a measurement reads its counters through: the perf_event groups ([`CounterSet`]), or
/// the simulated PMU (`counters::simulated`), which stands in for them in tests. Readings are
/// raw (value, time enabled, time running) per spec; scaling and the event formulas
/// ([`scale`], [`to_measurement`](super::to_measurement)) are the callers', the same for both.
pub trait CounterSource {
    fn specs(&self) -> &[CounterSpec];
    /// Start counting (`only_system_wide`: the groups exec does not start).
    fn enable(&mut self, only_system_wide: bool) -> Result<()>;
    /// Raw readings per spec into `out` (resized to the specs).
    fn read_raw_into(&mut self, out: &mut Vec<RawCount>) -> Result<()>;
    /// Whether reads go through rdpmc (no system call).
    fn user_reads_mapped(&self) -> bool {
        false
    }
    /// Final scaled counts.
    fn scaled(&mut self) -> Result<Vec<EventCount>> {
        let mut raw = Vec::new();
        self.read_raw_into(&mut raw)?;
        Ok(self
            .specs()
            .iter()
            .zip(raw)
            .map(|(s, r)| EventCount {
                name: s.name.clone(),
                scaled: scale(r.value, r.time_enabled, r.time_running),
            })
            .collect())
    }
}

impl CounterSource for CounterSet {
    fn specs(&self) -> &[CounterSpec] {
        &self.specs
    }
    fn enable(&mut self, only_system_wide: bool) -> Result<()> {
        CounterSet::enable(self, only_system_wide)
    }
    fn read_raw_into(&mut self, out: &mut Vec<RawCount>) -> Result<()> {
        CounterSet::read_raw_into(self, out)
    }
    fn user_reads_mapped(&self) -> bool {
        CounterSet::user_reads_mapped(self)
    }
    fn scaled(&mut self) -> Result<Vec<EventCount>> {
        CounterSet::scaled(self)
    }
}

fn members_of(plan: &[Vec<usize>], first: usize) -> Vec<usize> {
    plan.iter().find(|g| g.first() == Some(&first)).cloned().unwrap_or_default()
}

enum OpenError {
    Open(Error),
    Map,
}

/// All members' counts through rdpmc, when every member is mapped and on a counter now.
/// Read a group with rdpmc into `out` (added to each member's spec) when every member is
/// mapped and on a counter; otherwise leave `out` as it was and return false.
fn read_group_user(members: &[Member], specs: &[usize], out: &mut [RawCount]) -> bool {
    // All or nothing, without allocating: the readings wait on the stack (a group holds at
    // most the core's counters, far fewer than this; a larger one takes the read() path).
    let mut got = [RawCount::default(); 32];
    if members.len() > got.len() {
        return false;
    }
    for (m, g) in members.iter().zip(got.iter_mut()) {
        let Member::Mapped(s) = m else { return false };
        let d = s.read_user();
        let Some(value) = d.count() else { return false };
        *g = RawCount {
            value,
            time_enabled: d.time_enabled().as_nanos() as u64,
            time_running: d.time_running().as_nanos() as u64,
        };
    }
    for (g, &si) in got.iter().zip(specs) {
        out[si].add(g);
    }
    true
}

/// Sum of readings of one spec over its fds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RawCount {
    pub value: u64,
    pub time_enabled: u64,
    pub time_running: u64,
}

impl RawCount {
    fn add(&mut self, r: &RawCount) {
        self.value += r.value;
        self.time_enabled += r.time_enabled;
        self.time_running += r.time_running;
    }

    /// `self - earlier`, for region deltas (saturating: a counter never runs backwards).
    pub fn since(&self, earlier: &RawCount) -> RawCount {
        RawCount {
            value: self.value.saturating_sub(earlier.value),
            time_enabled: self.time_enabled.saturating_sub(earlier.time_enabled),
            time_running: self.time_running.saturating_sub(earlier.time_running),
        }
    }
}
