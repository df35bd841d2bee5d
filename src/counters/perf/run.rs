//! Run a command under the counters, count the idle background, and pass its exit status on.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::time::{Duration, Instant};

use super::{CounterSet, CounterSpec, EventCount, Scaled, Scope, Target};
use crate::error::{Error, Result};

/// A command line to run under counters.
#[cfg(feature = "trace")]
#[derive(Debug, Clone)]
pub struct CommandSpec {
    pub argv: Vec<String>,
    /// Variables added to the command's environment.
    pub env: Vec<(String, String)>,
}

/// The outcome of one counted run.
#[cfg(feature = "trace")]
#[derive(Debug)]
pub struct CommandRun {
    pub counts: Vec<EventCount>,
    pub wall_seconds: f64,
    pub status: ExitStatus,
}

/// Find CMD like execvp would: a path with a slash as is, else the first executable in PATH.
#[cfg(feature = "trace")]
pub fn resolve_program(cmd: &str) -> Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let not_found = || {
        Error::input(
            format!("command not found: {cmd}"),
            "give the program's path or make sure it is in PATH (commands run without a shell)",
        )
    };
    let executable = |p: &Path| {
        p.metadata()
            .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            .unwrap_or(false)
    };
    if cmd.is_empty() {
        return Err(not_found());
    }
    if cmd.contains('/') {
        let p = PathBuf::from(cmd);
        return if executable(&p) { Ok(p) } else { Err(not_found()) };
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(cmd))
        .find(|p| executable(p))
        .ok_or_else(not_found)
}

/// Run CMD (argv, never a shell) once under the counters: per-task groups opened on this
/// thread with inherit + enable_on_exec (so they start at the child's exec and follow its
/// threads and children), system-wide groups enabled just before the spawn.
///
/// Must be called from a thread that starts no other children meanwhile (they would be
/// counted too): the CLI's main thread.
#[cfg(feature = "trace")]
pub fn run_command(specs: &[CounterSpec], plan: &[Vec<usize>], cmd: &CommandSpec) -> Result<CommandRun> {
    let program = resolve_program(cmd.argv.first().map(String::as_str).unwrap_or(""))?;
    let mut set = CounterSet::open(specs.to_vec(), plan, Target::InheritOnExec)?;
    let mut command = Command::new(&program);
    command.args(&cmd.argv[1..]).envs(cmd.env.iter().map(|(k, v)| (k, v)));
    set.enable(true)?;
    let t0 = Instant::now();
    let mut child = command.spawn().map_err(|e| {
        Error::input(
            format!("cannot run {}: {e}", program.display()),
            "check the command and its permissions",
        )
    })?;
    let status = child.wait().map_err(|e| Error::io("waiting for the command", e))?;
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
#[cfg(feature = "trace")]
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

/// The exit code to pass through for a finished command: its status, or 128 + signal.
#[cfg(feature = "trace")]
pub fn exit_code(status: &ExitStatus) -> (i32, Option<i32>) {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(c), _) => (c, None),
        (None, Some(sig)) => (128 + sig, Some(sig)),
        _ => (1, None),
    }
}
