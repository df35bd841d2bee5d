use super::*;

fn env<'a>(pairs: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
    move |name| pairs.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
}

#[test]
fn each_launchers_variables() {
    let ompi = detect(&env(&[
        ("OMPI_COMM_WORLD_RANK", "3"),
        ("OMPI_COMM_WORLD_SIZE", "4"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
        // Slurm's variables of the allocation beside them: Open MPI's win.
        ("SLURM_PROCID", "0"),
        ("SLURM_STEP_NUM_TASKS", "2"),
    ]))
    .unwrap();
    assert_eq!(
        (ompi.launcher, ompi.rank, ompi.size, ompi.local_rank),
        ("open-mpi", 3, Some(4), Some(1))
    );
    let hydra = detect(&env(&[("PMI_RANK", "2"), ("PMI_SIZE", "3"), ("MPI_LOCALRANKID", "0")])).unwrap();
    assert_eq!(
        (hydra.launcher, hydra.rank, hydra.size, hydra.local_rank),
        ("mpich-hydra", 2, Some(3), Some(0))
    );
    let srun = detect(&env(&[
        ("SLURM_PROCID", "5"),
        ("SLURM_STEP_NUM_TASKS", "8"),
        ("SLURM_NTASKS", "8"),
        ("SLURM_LOCALID", "1"),
        ("SLURM_NODEID", "2"),
        // srun --mpi=pmi2 sets PMI_RANK without Hydra's MPI_LOCALRANKID.
        ("PMI_RANK", "5"),
    ]))
    .unwrap();
    assert_eq!(
        (srun.launcher, srun.rank, srun.size, srun.local_rank, srun.node_id),
        ("slurm", 5, Some(8), Some(1), Some(2))
    );
    let flux = detect(&env(&[
        ("FLUX_TASK_RANK", "1"),
        ("FLUX_JOB_SIZE", "2"),
        ("FLUX_TASK_LOCAL_ID", "1"),
    ]))
    .unwrap();
    assert_eq!((flux.launcher, flux.local_rank), ("flux", Some(1)));
    let pals = detect(&env(&[
        ("PALS_RANKID", "7"),
        ("PALS_LOCAL_RANKID", "3"),
        ("PMI_SIZE", "16"),
        ("PALS_NODEID", "1"),
    ]))
    .unwrap();
    assert_eq!((pals.launcher, pals.rank, pals.size, pals.node_id), ("pals", 7, Some(16), Some(1)));
    let pmix = detect(&env(&[("PMIX_RANK", "4")])).unwrap();
    assert_eq!((pmix.launcher, pmix.size, pmix.local_rank), ("pmix", None, None));
}

#[test]
fn no_launcher_a_single_task_and_a_batch_script_are_no_job() {
    assert_eq!(detect(&env(&[])), None);
    assert_eq!(detect(&env(&[("SLURM_PROCID", "0"), ("SLURM_STEP_NUM_TASKS", "1")])), None);
    assert_eq!(detect(&env(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "1")])), None);
    // A batch script: the allocation's task count, but no step.
    assert_eq!(detect(&env(&[("SLURM_PROCID", "0"), ("SLURM_NTASKS", "4")])), None);
    // Not a number: not a rank.
    assert_eq!(detect(&env(&[("OMPI_COMM_WORLD_RANK", "x"), ("OMPI_COMM_WORLD_SIZE", "2")])), None);
}

#[test]
fn one_rank_per_node_counts_the_node_dram() {
    let dir = tempfile::tempdir().unwrap();
    let rank = |local| LauncherRank {
        launcher: "pmix",
        rank: 0,
        size: None,
        local_rank: local,
        node_id: None,
    };
    assert!(counts_node_dram(&rank(Some(0)), dir.path(), "n1").0);
    assert!(!counts_node_dram(&rank(Some(1)), dir.path(), "n1").0);
    // No local rank: the first to create the node's lock file, once per node.
    assert!(counts_node_dram(&rank(None), dir.path(), "n1").0);
    assert!(!counts_node_dram(&rank(None), dir.path(), "n1").0);
    assert!(counts_node_dram(&rank(None), dir.path(), "n2").0);
}

#[test]
fn file_names_and_atomic_writes() {
    let r = LauncherRank {
        launcher: "slurm",
        rank: 12,
        size: Some(16),
        local_rank: None,
        node_id: None,
    };
    assert_eq!(r.file_name("node-7.cluster"), "node-7.cluster-r12.json");
    assert_eq!(r.file_name("a/b c"), "a_b_c-r12.json");
    let dir = tempfile::tempdir().unwrap();
    let p = write_atomically(dir.path(), "h-r0.json", b"{}").unwrap();
    assert_eq!(std::fs::read(&p).unwrap(), b"{}");
    let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(names.len(), 1, "no temporary file left: {names:?}");
    assert!(!bound_cpus().is_empty());
}
