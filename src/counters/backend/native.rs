//! Native runs of a command: timed from spawn to exit, no shell, stdio inherited; the
//! region times its sessions hand back.

use std::collections::BTreeMap;
use std::path::Path;

use crate::counters::command::{self, CommandSpec};
use crate::counters::{RegionMeasurement, region_times};
use crate::error::Result;

/// Region times of one native run, per name.
pub(super) type RunRegions = BTreeMap<String, region_times::RegionTime>;

/// The runs' times and region times, or the status to pass on.
pub(super) type TimedRuns = std::result::Result<(Vec<f64>, Vec<RunRegions>), i32>;

/// `repeat` native runs of `cmd`, timed (the samples, or the status to pass on when one
/// failed, said on stderr), each run also handing its region times back through `collector`.
pub(super) fn native_runs_with_regions(
    cmd: &CommandSpec,
    repeat: u32,
    after: &str,
    collector: Option<&region_times::Collector>,
) -> Result<TimedRuns> {
    let mut samples = Vec::with_capacity(repeat as usize);
    let mut regions = Vec::new();
    for rep in 0..repeat {
        match native_run(cmd, collector.map(|c| c.env()))? {
            Ok(secs) => {
                samples.push(secs);
                if let Some(c) = collector {
                    regions.push(c.take_run().times);
                }
            }
            Err((code, what)) => {
                eprintln!(
                    "roofline: {} {what} in its native run {} of {} ({after}); no report written",
                    cmd.argv[0],
                    rep + 1,
                    repeat
                );
                return Ok(Err(code));
            }
        }
    }
    Ok(Ok((samples, regions)))
}

/// The regions the native runs reported and the traced run did not see, said in a note: the
/// tracer found no markers in the program (say, a stripped binary whose markers are not in
/// sections of their own), so those regions have no W or Q.
pub(super) fn regions_not_traced(traced: &[RegionMeasurement], runs: &[RunRegions]) -> Option<String> {
    let unseen: std::collections::BTreeSet<&str> = runs
        .iter()
        .flat_map(|run| run.keys())
        .filter(|name| !traced.iter().any(|r| &r.name == *name))
        .map(String::as_str)
        .collect();
    if unseen.is_empty() {
        return None;
    }
    let names: Vec<String> = unseen.iter().map(|n| format!("'{n}'")).collect();
    Some(format!(
        "region(s) {} ran in the native runs but the tracer saw no marker of them: no W or Q for them (were the markers found? a stripped program keeps them only in their own sections, `roofline.region_begin` and `roofline.region_end`)",
        names.join(", ")
    ))
}

/// Each traced region's T: its wall time in every native run that reported it (its
/// calls there should be the traced run's; a mismatch is said).
pub(super) fn regions_timed(regions: &mut [RegionMeasurement], runs: &[RunRegions]) {
    for r in regions {
        let times: Vec<&region_times::RegionTime> = runs.iter().filter_map(|run| run.get(&r.name)).collect();
        let m = &mut r.measurement;
        let notes = &mut m.provenance.get_or_insert_with(Default::default).notes;
        if times.len() < runs.len() || runs.is_empty() {
            notes.push(format!(
                "no wall time for region '{}' from {} of {} native run(s): its session was not dropped there (process::exit?), or the region ran only under the tracer",
                r.name,
                runs.len() - times.len(),
                runs.len()
            ));
        }
        if times.is_empty() {
            continue;
        }
        if let Some(t) = times.iter().find(|t| t.calls != r.calls) {
            notes.push(format!(
                "region '{}' began {} time(s) in a native run but {} in the traced one: its W and T may describe different work",
                r.name, t.calls, r.calls
            ));
        }
        m.seconds_samples = times.iter().map(|t| t.seconds).collect();
        if let Some(p) = m.provenance.as_mut() {
            p.seconds = Some(crate::schema::Source::Native);
        }
        m.extra.insert("repeats", serde_json::json!(times.len()));
    }
}

/// One native run of `cmd` (no shell, stdio inherited), `env` added to its variables, timed
/// from spawn to exit: `Ok(Ok(seconds))`, or `Ok(Err((exit code to pass on, what
/// happened)))` when it failed.
pub(super) fn native_run(cmd: &CommandSpec, env: Option<(&str, &Path)>) -> Result<std::result::Result<f64, (i32, String)>> {
    let mut command = cmd.command();
    if let Some((k, v)) = env {
        command.env(k, v);
    }
    let t0 = std::time::Instant::now();
    let status = cmd.run_to_end(&mut command)?;
    let secs = t0.elapsed().as_secs_f64();
    let (code, signal) = command::exit_code(&status);
    Ok(match signal {
        Some(sig) => Err((code, format!("was killed by {}", signal_name(sig)))),
        None if code != 0 => Err((code, format!("exited with status {code}"))),
        None => Ok(secs),
    })
}

pub(super) fn signal_name(sig: i32) -> String {
    nix::sys::signal::Signal::try_from(sig)
        .map(|s| s.as_str().to_string())
        .unwrap_or_else(|_| format!("signal {sig}"))
}

/// One energy run of a command: the readings just before and after it and, where its regions
/// were asked for, each region's joules.
pub(crate) struct EnergyRun {
    pub before: crate::counters::energy::Reading,
    pub after: crate::counters::energy::Reading,
    /// Per region name (empty unless asked).
    pub regions: BTreeMap<String, crate::counters::energy::RegionRun>,
}

/// `repeat` native runs of `argv` for `--energy`, each between two readings of the energy
/// counters (apart from the counted or traced runs, whose counting would add its own power):
/// the runs, or the status to pass on when a run failed (said on stderr). With `regions`
/// the program logs when its marker regions run (`roofline_marker::energy`) while the
/// counters are read all along on a thread of their own, from an update seen before it starts
/// to one seen after it exits, and each region gets its joules of the run.
pub(crate) fn energy_runs(
    energy: &crate::counters::energy::Energy,
    argv: &[String],
    repeat: u32,
    regions: bool,
) -> Result<std::result::Result<Vec<EnergyRun>, i32>> {
    let cmd = CommandSpec::resolve(argv)?;
    // The directory is set either way: a session keeps time there rather than fail for want
    // of counters.
    let collector = region_times::Collector::new()?;
    let mut runs = Vec::with_capacity(repeat as usize);
    for rep in 0..repeat {
        let run = if regions {
            energy_run_with_regions(energy, &cmd, &collector)?
        } else {
            let before = energy.read()?;
            let ran = native_run(&cmd, Some(collector.env()))?.map(|_| (before, BTreeMap::new()));
            collector.take_run();
            ran
        };
        match run {
            Ok((before, regions)) => runs.push(EnergyRun {
                before,
                after: energy.read()?,
                regions,
            }),
            Err((code, what)) => {
                eprintln!(
                    "roofline: {} {what} in its energy run {} of {}; no report written",
                    cmd.argv[0],
                    rep + 1,
                    repeat
                );
                return Ok(Err(code));
            }
        }
    }
    Ok(Ok(runs))
}

type RegionsRun = std::result::Result<
    (
        crate::counters::energy::Reading,
        BTreeMap<String, crate::counters::energy::RegionRun>,
    ),
    (i32, String),
>;

/// One energy run with the counters read all along and the regions logged: the reading
/// before it and each region's joules.
fn energy_run_with_regions(
    energy: &crate::counters::energy::Energy,
    cmd: &CommandSpec,
    collector: &region_times::Collector,
) -> Result<RegionsRun> {
    use std::sync::atomic::{AtomicBool, Ordering};
    let zero_ns = energy.clock_zero_ns()?;
    let patience = (3.0 * energy.granularity_seconds().unwrap_or(0.01)).max(0.005);
    let poll = energy.poll_seconds();
    let window = energy.window()?;
    let stop = AtomicBool::new(false);
    let (ran, polled) = std::thread::scope(|scope| {
        let poller = scope.spawn(|| -> Result<()> {
            while !stop.load(Ordering::Relaxed) {
                energy.mark(&window)?;
                std::thread::sleep(std::time::Duration::from_secs_f64(poll));
            }
            Ok(())
        });
        let ran = (|| -> Result<std::result::Result<crate::counters::energy::Reading, (i32, String)>> {
            let first = energy.mark(&window)?;
            wait_for_update(&window, &first, patience, poll);
            let before = energy.mark(&window)?;
            let mut command = cmd.command();
            let (k, v) = collector.env();
            command.env(k, v).env(roofline_marker::REGION_ENERGY_ENV, "1");
            let status = cmd.run_to_end(&mut command)?;
            let after = energy.mark(&window)?;
            let (code, signal) = command::exit_code(&status);
            if let Some(sig) = signal {
                return Ok(Err((code, format!("was killed by {}", signal_name(sig)))));
            }
            if code != 0 {
                return Ok(Err((code, format!("exited with status {code}"))));
            }
            wait_for_update(&window, &after, patience, poll);
            Ok(Ok(before))
        })();
        stop.store(true, Ordering::Relaxed);
        (ran, poller.join())
    });
    polled.map_err(|_| crate::error::Error::unavailable("the energy counters' reading thread panicked", "run again"))??;
    let before = match ran? {
        Ok(b) => b,
        Err(e) => return Ok(Err(e)),
    };
    let readings = window.readings();
    let mut regions = BTreeMap::new();
    for (name, segs) in collector.take_run().energy {
        regions.insert(name, energy.region_run(&readings, zero_ns, &segs)?);
    }
    Ok(Ok((before, regions)))
}

/// Wait (at most `patience` seconds) until a reading after `since` shows the counter changed.
fn wait_for_update(window: &crate::counters::energy::Window, since: &crate::counters::energy::Reading, patience: f64, poll: f64) {
    let t0 = std::time::Instant::now();
    while !window.changed_since(since) && t0.elapsed().as_secs_f64() < patience {
        std::thread::sleep(std::time::Duration::from_secs_f64(poll));
    }
}
