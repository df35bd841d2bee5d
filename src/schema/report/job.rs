//! Jobs of ranks in `roofline.report/1`: where one rank ran ([`JobRank`], in a rank's
//! `environment.job`) and what the merge of a job's rank files found ([`Job`], a merged job
//! report's `job`). Documented in `docs/report-schema.md` and `docs/mpi.md`.

use serde::Serialize;

use super::Roofs;

/// What a rank's `bytes.dram` means: who counted the node's memory traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
#[serde(rename_all = "kebab-case")]
pub enum DramScope {
    /// This rank counted the node's memory traffic system-wide (uncore events, one rank per
    /// node): its `bytes.dram` is the whole node's while it ran, every rank's traffic in it.
    Node,
    /// This rank's `bytes.dram` is its own process's (the trace backend's cache simulator).
    Process,
    /// This rank counted no memory traffic (another rank of its node counted the node's, or
    /// uncore events were left out).
    None,
}

/// One rank of a job, as its launcher's environment and the system told it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct JobRank {
    /// The launcher whose variables gave the rank: `open-mpi`, `mpich-hydra`, `slurm`,
    /// `pals`, `flux`, `pmix`, `pmi`.
    pub launcher: String,
    /// The rank in the job (0-based).
    pub rank: u32,
    /// Ranks in the job; None where the launcher does not say (PMIx alone).
    pub size: Option<u32>,
    /// The rank among its node's ranks, where the launcher says.
    pub local_rank: Option<u32>,
    /// The node: its host name.
    pub node: String,
    /// The launcher's index of the node (`SLURM_NODEID`), where it gives one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_id: Option<u32>,
    /// The CPUs the rank was bound to (`sched_getaffinity` of the measuring process, which
    /// the measured program inherits).
    pub cpus: Vec<u32>,
    /// Who counted the node's memory traffic, from this rank's side.
    pub dram: DramScope,
    /// How this rank came to count the node's memory traffic or not (`local rank 0`, `lock
    /// file`, `--no-uncore`, `per process`).
    pub dram_chosen_by: String,
}

/// A merged job report's summary: its nodes and ranks, where each node's memory traffic was
/// counted, and the balance of every region over the ranks.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Job {
    /// The launchers the ranks named (one in a normal job).
    pub launchers: Vec<String>,
    /// Ranks the job said it had (the largest `size` a rank gave).
    pub size: Option<u32>,
    /// Ranks below `size` with no file in the directory (a rank that died before writing).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub missing_ranks: Vec<u32>,
    /// The distinct microarchitectures of the nodes; more than one: the job has no single
    /// roof (its `ceilings` are left out and `heterogeneous` says so).
    pub microarchitectures: Vec<String>,
    /// The nodes are of different microarchitectures (or some unknown).
    pub heterogeneous: bool,
    /// Each node, in order of its first rank.
    pub nodes: Vec<JobNode>,
    /// Each rank, by rank.
    pub ranks: Vec<JobRankRow>,
    /// The balance of the whole run and of every region over the ranks.
    pub regions: Vec<Balance>,
    /// How the sums were formed (the memory traffic of each node, times).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

/// One node of a merged job.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct JobNode {
    /// Its host name.
    pub host: String,
    /// Its ranks.
    pub ranks: Vec<u32>,
    /// Its microarchitecture, where its machine model names one.
    pub microarchitecture: Option<String>,
    /// Its cores, where its machine model says.
    pub cores: Option<u32>,
    /// How its `bytes.dram` was formed: `node` (one rank's system-wide count, never summed),
    /// `process` (the sum of its ranks' own), `none`.
    pub dram: DramScope,
    /// The rank that counted the node's memory traffic system-wide, where one did.
    pub dram_counted_by: Option<u32>,
    /// The node's roofs (its machine model at all its cores); None without a machine model.
    pub roofs: Option<Roofs>,
}

/// One rank of a merged job.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct JobRankRow {
    /// The rank.
    pub rank: u32,
    /// Its node's host name.
    pub node: String,
    /// The source (rank file) its points came from.
    pub source: String,
    /// The CPUs it was bound to.
    pub cpus: Vec<u32>,
    /// What its `bytes.dram` meant.
    pub dram: DramScope,
    /// The rank's roofs (its node's machine model at the rank's CPUs).
    pub roofs: Option<Roofs>,
}

/// The balance of one region (or the whole run) over the ranks that ran it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[cfg_attr(feature = "analysis", derive(serde::Deserialize))]
pub struct Balance {
    /// The region (the whole run: the program's name).
    pub name: String,
    /// Ranks that ran it.
    pub ranks: u32,
    /// Slowest rank's T over the mean T; None where no rank has a time.
    pub seconds_imbalance: Option<f64>,
    /// Largest W over the mean W; None where no rank did any work.
    pub flops_imbalance: Option<f64>,
    /// The slowest rank (largest T; the largest W where no rank has a time).
    pub slowest_rank: Option<u32>,
    /// The slowest rank's node.
    pub slowest_node: Option<String>,
    /// The slowest node (largest T of its slowest rank).
    pub slowest_node_by_time: Option<String>,
}
