//! Run a command under the counters, count the idle background, and pass its exit status on.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use super::{CounterSet, CounterSpec, EventCount, Scaled, Scope, Target};
use crate::counters::command::CommandSpec;
use crate::error::Result;

/// The outcome of one counted run.
#[derive(Debug)]
pub struct CommandRun {
    pub counts: Vec<EventCount>,
    pub wall_seconds: f64,
    pub status: ExitStatus,
}

/// Run CMD (argv, never a shell) once under the counters: per-task groups opened on this
/// thread with inherit + enable_on_exec (so they start at the child's exec and follow its
/// threads and children), system-wide groups enabled just before the spawn.
///
/// Must be called from a thread that starts no other children meanwhile (they would be
/// counted too): the CLI's main thread.
pub fn run_command(specs: &[CounterSpec], plan: &[Vec<usize>], cmd: &CommandSpec) -> Result<CommandRun> {
    let mut set = CounterSet::open(specs.to_vec(), plan, Target::InheritOnExec)?;
    let mut command = cmd.command();
    set.enable(true)?;
    let t0 = Instant::now();
    let status = cmd.run_to_end(&mut command)?;
    let wall = t0.elapsed();
    set.disable()?;
    let counts = set.scaled()?;
    Ok(CommandRun {
        counts,
        wall_seconds: wall.as_secs_f64(),
        status,
    })
}

/// Count system-wide groups only, for `duration`, with no command: the background traffic.
pub fn idle_baseline(specs: &[CounterSpec], duration: Duration) -> Result<Vec<EventCount>> {
    let idx: Vec<usize> = (0..specs.len())
        .filter(|&i| matches!(specs[i].scope, Scope::Uncore { .. }))
        .collect();
    let sub: Vec<CounterSpec> = idx.iter().map(|&i| specs[i].clone()).collect();
    let plan: Vec<Vec<usize>> = (0..sub.len()).map(|i| vec![i]).collect();
    let mut set = CounterSet::open(sub, &plan, Target::ThisThread)?;
    set.enable(true)?;
    std::thread::sleep(duration);
    set.disable()?;
    let mut counts = set.scaled()?;
    // Back to the full spec list: per-task events read zero in an idle baseline.
    let mut full: Vec<EventCount> = specs
        .iter()
        .map(|s| EventCount {
            name: s.name.clone(),
            scaled: Some(Scaled {
                raw: 0,
                value: 0.0,
                running_ratio: 1.0,
            }),
        })
        .collect();
    for (k, &i) in idx.iter().enumerate().rev() {
        full[i] = counts.remove(k);
    }
    Ok(full)
}
