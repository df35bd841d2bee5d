//! `roofline measure -o DIR/ -- CMD` inside a launcher (`mpirun`, `srun`, `mpiexec.hydra`):
//! this instance is one rank of a job; it measures its own rank's command and writes
//! `DIR/HOST-rRANK.json` atomically, recording the launcher, the rank, its node, the CPUs it
//! was bound to and who counted the node's memory traffic.

use std::path::{Path, PathBuf};

use crate::counters::backend::{self, CommandOptions, CommandOutcome};
use crate::error::Error;
use crate::jobs::launcher::{self, LauncherRank};
use crate::schema::Source;
use crate::schema::report::job::DramScope;
use crate::schema::report::level;

/// Whether `-o PATH` names a job directory: a trailing slash, or a directory that exists.
pub fn is_directory_output(path: &Path) -> bool {
    path.as_os_str().to_string_lossy().ends_with('/') || path.is_dir()
}

/// The rank this instance is, when `-o` names a directory and a launcher started it.
pub fn rank_for(output: Option<&Path>) -> Option<(LauncherRank, PathBuf)> {
    let dir = output.filter(|p| is_directory_output(p))?;
    let rank = launcher::detect(&|name| std::env::var(name).ok())?;
    Some((rank, dir.to_path_buf()))
}

/// Measure this rank's command and write its report into `dir`. The command's own failure
/// passes its status on (no file: the merge names the rank as missing).
/// What `roofline measure` was asked for, as this rank needs it.
pub struct RankMeasure<'a> {
    pub backend: crate::counters::BackendKind,
    pub command: &'a [String],
    pub options: CommandOptions,
    pub repeat: u32,
    pub no_uncore: bool,
}

pub fn run(args: RankMeasure<'_>, rank: LauncherRank, dir: &Path) -> anyhow::Result<i32> {
    // Every check before anything runs: a rank cannot be started again, nor its file half-written.
    std::fs::create_dir_all(dir).map_err(|e| {
        Error::input(
            format!("-o {}: cannot create the job directory ({e})", dir.display()),
            "name a directory every rank can write (on a file system all nodes share)",
        )
    })?;
    if args.repeat > 1 {
        return Err(Error::input(
            format!(
                "--repeat {} under {}: a rank cannot be started again inside its job",
                args.repeat, rank.launcher
            ),
            "drop --repeat (run the job several times instead)",
        )
        .into());
    }
    let host = crate::schema::environment::collect(&[])
        .host
        .unwrap_or_else(|| "localhost".to_string());
    let (counts_dram, chosen_by) = if args.no_uncore {
        (false, "--no-uncore".to_string())
    } else {
        launcher::counts_node_dram(&rank, dir, &host)
    };
    let mut opts = args.options;
    opts.uncore = counts_dram;
    // The traced run is the rank's one run: the launcher's ranks meet once (MPI_Init).
    opts.single_run = true;
    let cpus = launcher::bound_cpus();
    let failed = |status: i32, how: &str| {
        eprintln!(
            "roofline: rank {} on {host}: the command failed ({how}); no report written for it",
            rank.rank
        );
        status
    };
    let measurement = match backend::measure_command(args.backend, args.command, &opts) {
        Ok(CommandOutcome::Measured(m)) => *m,
        Ok(CommandOutcome::Failed { status }) => return Ok(failed(status, &format!("status {status}"))),
        Err(Error::Child { cause, status }) => return Ok(failed(status, &cause)),
        Err(e) => return Err(e.into()),
    };
    let mut report = backend::command_report(args.command, measurement);
    if let Ok(model) = crate::machine::detect_static(&Default::default())
        && let Ok(v) = serde_json::to_value(&model)
    {
        // The whole machine model: the merge gives each node and rank its own roofs.
        report.machine = v;
    }
    let (dram, why) = dram_scope(&report, counts_dram, chosen_by);
    let simulated_node_dram = dram == DramScope::Node
        && report
            .points
            .first()
            .and_then(|p| p.provenance.bytes.get(level::DRAM))
            .is_some_and(|s| *s == Source::Simulated);
    for p in &mut report.points {
        let said = p.provenance.notes.iter().any(|n| n.starts_with("no T:"));
        if p.provenance.seconds.is_none() && p.seconds_samples.is_empty() && !said {
            p.provenance.notes.push(format!(
                "no T: the trace backend's one run is traced (a rank of a {} job cannot be run again natively)",
                rank.launcher
            ));
        }
        if simulated_node_dram && p.bytes.contains_key(level::DRAM) {
            // The stand-in counts what it simulated: this process's misses, not the node's.
            p.provenance.notes.push(
                "bytes.dram: the simulated PMU's memory-controller events count this rank's own simulated traffic (real ones count every process of the node)".into(),
            );
        }
    }
    report.environment.rank = Some(rank.rank);
    report.environment.job = Some(rank.record(&host, cpus, dram, why));
    let name = rank.file_name(&host);
    let path = launcher::write_atomically(dir, &name, (report.to_json() + "\n").as_bytes()).map_err(|e| Error::Io {
        context: format!("writing {}", dir.join(&name).display()),
        source: e,
    })?;
    eprintln!("roofline: rank {} on {host} wrote {}", rank.rank, path.display());
    Ok(0)
}

/// What this rank's `bytes.dram` means: the node's (perf's system-wide uncore events, counted
/// by this rank alone on its node), its own process's (the trace backend's cache simulator,
/// the simulated PMU), or nothing counted.
fn dram_scope(report: &crate::schema::Report, counted_node: bool, chosen_by: String) -> (DramScope, String) {
    let source = report
        .points
        .first()
        .filter(|p| p.bytes.contains_key(level::DRAM))
        .and_then(|p| p.provenance.bytes.get(level::DRAM).copied());
    match source {
        // The simulated PMU stands in for perf's path, uncore events included.
        Some(Source::Perf | Source::Simulated) if counted_node => (DramScope::Node, chosen_by),
        Some(Source::Perf | Source::Simulated) => (DramScope::None, format!("not this rank: {chosen_by} counts the node's")),
        Some(_) => (DramScope::Process, "per process (the trace backend's cache simulator)".to_string()),
        None if counted_node => (
            DramScope::None,
            format!("this rank ({chosen_by}) was to count the node's, but the backend counted no memory traffic"),
        ),
        None if chosen_by == "--no-uncore" => (DramScope::None, chosen_by),
        None => (DramScope::None, format!("not this rank: {chosen_by} counts the node's")),
    }
}
