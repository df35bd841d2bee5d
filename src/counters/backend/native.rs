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

/// `repeat` native runs of `argv` for `--energy`, each between two readings of the energy
/// counters (apart from the counted or traced runs, whose counting would add its own power):
/// the readings, or the status to pass on when a run failed (said on stderr).
pub(crate) fn energy_runs(
    energy: &crate::counters::energy::Energy,
    argv: &[String],
    repeat: u32,
) -> Result<std::result::Result<Vec<(crate::counters::energy::Reading, crate::counters::energy::Reading)>, i32>> {
    let cmd = CommandSpec::resolve(argv)?;
    let mut runs = Vec::with_capacity(repeat as usize);
    for rep in 0..repeat {
        let before = energy.read()?;
        match native_run(&cmd, None)? {
            Ok(_) => runs.push((before, energy.read()?)),
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
