//! A rank's place in its job, read from the launcher's environment: no wrapper and no
//! communication between ranks. Each launcher's variables, the most specific first (an
//! `mpirun` inside a Slurm allocation leaves Slurm's variables of the allocation beside its own):
//!
//! | launcher      | rank                   | size                    | local rank                    | node          |
//! |---------------|------------------------|-------------------------|-------------------------------|---------------|
//! | Open MPI      | `OMPI_COMM_WORLD_RANK` | `OMPI_COMM_WORLD_SIZE`  | `OMPI_COMM_WORLD_LOCAL_RANK`  |               |
//! | MPICH (Hydra) | `PMI_RANK`             | `PMI_SIZE`              | `MPI_LOCALRANKID`             |               |
//! | Cray PALS     | `PALS_RANKID`          | `PMI_SIZE`              | `PALS_LOCAL_RANKID`           | `PALS_NODEID` |
//! | Flux          | `FLUX_TASK_RANK`       | `FLUX_JOB_SIZE`         | `FLUX_TASK_LOCAL_ID`          |               |
//! | Slurm (srun)  | `SLURM_PROCID`         | `SLURM_STEP_NUM_TASKS`  | `SLURM_LOCALID`               | `SLURM_NODEID`|
//! | PMIx          | `PMIX_RANK`            |                         |                               |               |
//! | PMI (srun --mpi=pmi2, others) | `PMI_RANK` | `PMI_SIZE`          |                               |               |
//!
//! Slurm's size is the job step's (`SLURM_STEP_NUM_TASKS`): a batch script has `SLURM_PROCID`
//! and `SLURM_NTASKS` of its allocation but is no task of a step. A job of one task (a
//! single-task `srun`) is not a job of ranks.

use crate::schema::report::job::{DramScope, JobRank};

/// Where a rank runs, before it is decided who counts its node's memory traffic.
#[derive(Debug, Clone, PartialEq)]
pub struct LauncherRank {
    pub launcher: &'static str,
    pub rank: u32,
    pub size: Option<u32>,
    pub local_rank: Option<u32>,
    pub node_id: Option<u32>,
}

/// The rank this process is in its launcher's job; None outside a launcher or in a job of one
/// task. `var` reads an environment variable.
pub fn detect(var: &dyn Fn(&str) -> Option<String>) -> Option<LauncherRank> {
    let num = |name: &str| var(name).and_then(|v| v.trim().parse::<u32>().ok());
    let of = |launcher: &'static str, rank: &str, size: Option<&str>, local: Option<&str>, node: Option<&str>| {
        Some(LauncherRank {
            launcher,
            rank: num(rank)?,
            size: size.and_then(num),
            local_rank: local.and_then(num),
            node_id: node.and_then(num),
        })
    };
    let found = of(
        "open-mpi",
        "OMPI_COMM_WORLD_RANK",
        Some("OMPI_COMM_WORLD_SIZE"),
        Some("OMPI_COMM_WORLD_LOCAL_RANK"),
        None,
    )
    .or_else(|| {
        // Hydra's own variable beside PMI's: srun's PMI-2 sets PMI_RANK without it.
        var("MPI_LOCALRANKID").and_then(|_| of("mpich-hydra", "PMI_RANK", Some("PMI_SIZE"), Some("MPI_LOCALRANKID"), None))
    })
    .or_else(|| {
        of(
            "pals",
            "PALS_RANKID",
            Some("PMI_SIZE"),
            Some("PALS_LOCAL_RANKID"),
            Some("PALS_NODEID"),
        )
    })
    .or_else(|| of("flux", "FLUX_TASK_RANK", Some("FLUX_JOB_SIZE"), Some("FLUX_TASK_LOCAL_ID"), None))
    .or_else(|| {
        // Only a task of a job step: a batch script has SLURM_PROCID but no step size.
        var("SLURM_STEP_NUM_TASKS").and_then(|_| {
            of(
                "slurm",
                "SLURM_PROCID",
                Some("SLURM_STEP_NUM_TASKS"),
                Some("SLURM_LOCALID"),
                Some("SLURM_NODEID"),
            )
        })
    })
    .or_else(|| of("pmix", "PMIX_RANK", None, None, None))
    .or_else(|| of("pmi", "PMI_RANK", Some("PMI_SIZE"), None, None))?;
    // A job of one task is a single run, measured as one.
    (found.size != Some(1)).then_some(found)
}

/// The CPUs this process may run on (its affinity, inherited by the command it starts).
pub fn bound_cpus() -> Vec<u32> {
    let Ok(set) = nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) else {
        return Vec::new();
    };
    (0..nix::sched::CpuSet::count())
        .filter(|&c| set.is_set(c).unwrap_or(false))
        .map(|c| c as u32)
        .collect()
}

/// Who counts the node's memory traffic (system-wide uncore events), chosen without
/// communication: the rank of local rank 0; where the launcher gives no local rank, the
/// first rank of the node to create `DIR/.dram-HOST` (created exclusively; the file stays
/// as the record). (Counts system-wide, how it was chosen.)
pub fn counts_node_dram(rank: &LauncherRank, dir: &std::path::Path, host: &str) -> (bool, String) {
    match rank.local_rank {
        Some(local) => (local == 0, "local rank 0".to_string()),
        None => {
            let lock = dir.join(format!(".dram-{host}"));
            let created = std::fs::OpenOptions::new().write(true).create_new(true).open(&lock).is_ok();
            (created, format!("first rank of the node to create {}", lock.display()))
        }
    }
}

impl LauncherRank {
    /// The report's record of this rank.
    pub fn record(&self, node: &str, cpus: Vec<u32>, dram: DramScope, dram_chosen_by: String) -> JobRank {
        JobRank {
            launcher: self.launcher.to_string(),
            rank: self.rank,
            size: self.size,
            local_rank: self.local_rank,
            node: node.to_string(),
            node_id: self.node_id,
            cpus,
            dram,
            dram_chosen_by,
        }
    }

    /// The rank's file name in the job directory: `HOST-rRANK.json`.
    pub fn file_name(&self, host: &str) -> String {
        format!("{}-r{}.json", sanitize(host), self.rank)
    }
}

/// A host name as a file-name part: anything but letters, digits, `.`, `-` and `_` as `_`.
fn sanitize(host: &str) -> String {
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Write `bytes` to `dir/name` atomically: a temporary file in the same directory, renamed
/// over the name (readers of a shared directory never see half a report).
pub fn write_atomically(dir: &std::path::Path, name: &str, bytes: &[u8]) -> std::io::Result<std::path::PathBuf> {
    use std::io::Write;
    let path = dir.join(name);
    let tmp = dir.join(format!(".{name}.{}.tmp", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result.map(|_| path)
}

#[cfg(test)]
#[path = "launcher_tests.rs"]
mod tests;
