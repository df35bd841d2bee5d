//! Jobs bigger than one process: ranks started by the user's launcher (`mpirun`, `srun`,
//! `mpiexec.hydra`, `flux run`), each measured by its own `roofline measure -o DIR/`, and
//! their files merged into one job.
//!
//! - [`launcher`]: a rank's place in its job from the launcher's environment, the CPUs it is
//!   bound to, who counts its node's memory traffic, its file written atomically;
//! - [`merge`]: a job directory into per-rank, per-node and job points, imbalance per
//!   region, roofs scaled to what each point ran on.

pub mod launcher;
pub mod merge;
