//! Jobs of ranks under the launchers users have: `mpirun` (Open MPI) and `mpiexec.hydra`
//! (MPICH) start `roofline measure --backend trace -o JOB/ -- ranks_work N`, each rank traced by
//! its own roofline with the MPI transports working (shared memory and single copy between
//! the ranks), then `roofline report merge JOB/`. Rank r of the fixture does 2 (r + 1) n
//! scalar flops in region `work`; n is random per run (printed), every expected figure is
//! worked out from that. Slurm's `srun` is checked on a one-node cluster the test starts and
//! stops itself (a generated slurm.conf, `AuthType=auth/none`), with the fixture built without
//! MPI (its tasks are ranks by Slurm's variables). The perf path under a launcher is checked
//! on the simulated PMU (`--backend simulated`: the platform's perf events, groups and
//! formulas counting a memory-mode trace of each rank), under mpirun and srun: W exact per
//! rank and region, the node's DRAM counted by local rank 0 alone and never summed. Each test
//! skips, saying why, where its MPI (or Slurm) is not installed.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Output;

mod support;

/// An MPI implementation: its compiler wrapper and its launcher's command line.
struct Mpi {
    name: &'static str,
    cc: &'static str,
    /// Compiler options beyond `-O1`.
    cflags: &'static [&'static str],
    launcher: &'static [&'static str],
    /// The launcher's option for the number of ranks.
    np: &'static str,
    /// Environment the launcher passes on to the ranks.
    env: &'static [(&'static str, &'static str)],
    /// `environment.job.launcher` of its ranks.
    recorded: &'static str,
}

const OPEN_MPI: Mpi = Mpi {
    name: "Open MPI",
    cc: "mpicc.openmpi",
    cflags: &[],
    // Waiting ranks yield their CPU: the traced ones are slow, and the CI machine has two.
    launcher: &[
        "mpirun.openmpi",
        "--oversubscribe",
        "--allow-run-as-root",
        "--mca",
        "mpi_yield_when_idle",
        "1",
        // The 1 MiB message by cross-memory attach between the traced ranks (an error, not a
        // fallback, where it does not work).
        "--mca",
        "btl_vader_single_copy_mechanism",
        "cma",
    ],
    np: "-np",
    env: &[],
    recorded: "open-mpi",
};

const MPICH: Mpi = Mpi {
    name: "MPICH",
    cc: "mpicc.mpich",
    cflags: &[],
    launcher: &["mpiexec.hydra"],
    np: "-np",
    env: &[],
    recorded: "mpich-hydra",
};

/// Tasks started by Open MPI's mpirun, the fixture built without MPI (rank and size from Open
/// MPI's variables): the perf path on the simulated PMU traces each rank in memory mode, where
/// Open MPI's own start-up alone takes about a minute on 2 vCPUs.
const OPEN_MPI_TASKS: Mpi = Mpi {
    name: "Open MPI (tasks without MPI)",
    cc: "cc",
    cflags: &["-DWITHOUT_MPI"],
    launcher: OPEN_MPI.launcher,
    np: "-np",
    env: &[],
    recorded: "open-mpi",
};

/// Tasks started by Slurm's srun: the fixture built without MPI (rank and size from Slurm's
/// variables; the MPI transports under tracing are the other tests'), so the job is quick.
const SLURM: Mpi = Mpi {
    name: "Slurm",
    cc: "cc",
    cflags: &["-DWITHOUT_MPI"],
    launcher: &["srun"],
    np: "-n",
    env: &[],
    recorded: "slurm",
};

/// One job at a time: every traced rank wants a CPU, and ranks waiting for a slow one poll, so
/// jobs side by side on a small machine take longer together than one after the other.
fn one_job_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static JOBS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    JOBS.lock().unwrap_or_else(|e| e.into_inner())
}

fn on_path(cmd: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|p| std::env::split_paths(&p).any(|d| d.join(cmd).is_file()))
}

/// The fixture built with `mpi`'s compiler in `dir`; None (said) where the MPI is missing.
fn build(mpi: &Mpi, dir: &Path) -> Option<PathBuf> {
    if !on_path(mpi.cc) || !on_path(mpi.launcher[0]) {
        eprintln!("skipping: {} not installed ({} or {} missing)", mpi.name, mpi.cc, mpi.launcher[0]);
        return None;
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/mpi/ranks_work.c");
    let exe = dir.join("ranks_work");
    let out = std::process::Command::new(mpi.cc)
        .args(mpi.cflags)
        .args(["-O1", "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    Some(exe)
}

/// What each rank's roofline counts with: the trace backend (exact W, core Q).
const TRACE: &[&str] = &["--backend", "trace"];

/// The perf path on the simulated PMU with Zen 3's events (they fit its counters: no
/// multiplexing, so the counts are the trace's exactly, whatever machine runs the test).
const SIMULATED_ZEN3: &[&str] = &["--backend", "simulated", "--platform", "zen3"];

/// `LAUNCHER EXTRA -np N roofline measure BACKEND -o JOB/ -- ranks_work ARGS`.
#[allow(clippy::too_many_arguments)]
fn run_job(
    mpi: &Mpi,
    extra: &[&str],
    env: &[(&str, String)],
    backend: &[&str],
    np: u32,
    job: &Path,
    exe: &Path,
    args: &[String],
) -> Output {
    let roofline = assert_cmd::cargo::cargo_bin("roofline");
    let mut dir = job.to_string_lossy().into_owned();
    dir.push('/');
    let out = std::process::Command::new(mpi.launcher[0])
        .args(&mpi.launcher[1..])
        .args(extra)
        .args([mpi.np, &np.to_string()])
        .envs(mpi.env.iter().copied())
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .arg(roofline)
        .arg("measure")
        .args(backend)
        .args(["-o", &dir, "--"])
        .arg(exe)
        .args(args)
        .output()
        .unwrap();
    eprintln!("{}", String::from_utf8_lossy(&out.stderr));
    out
}

fn merge(job: &Path, out: &Path) -> (Value, String) {
    let a = Command::cargo_bin("roofline")
        .unwrap()
        .args(["report", "merge"])
        .arg(job)
        .arg("-o")
        .arg(out)
        .assert();
    let o = a.get_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc = serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap();
    (doc, String::from_utf8_lossy(&o.stderr).into_owned())
}

fn point<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no point {name} in {}", names(doc)))
}

fn names(doc: &Value) -> String {
    doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn w(p: &Value) -> u64 {
    p["flops"]["total"].as_f64().unwrap() as u64
}

fn host() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string()
}

/// Every rank of `np` ran: each rank's file and place in the job, W exact per rank, the node's
/// and the job's W their sum, the imbalance of W from the arithmetic (2 np / (np + 1)).
fn every_rank_measured(mpi: &Mpi, np: u32, env: &[(&str, String)]) {
    let _one = one_job_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = build(mpi, tmp.path()) else { return };
    let n = support::random(2_000, 20_000, u64::from(np));
    let job = tmp.path().join("job");
    let out = run_job(mpi, &[], env, TRACE, np, &job, &exe, &[n.to_string()]);
    assert!(out.status.success(), "{} job failed", mpi.name);
    let host = host();
    for r in 0..np {
        let file = job.join(format!("{host}-r{r}.json"));
        let doc: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
        let place = &doc["environment"]["job"];
        assert_eq!(place["launcher"], mpi.recorded, "{place:#}");
        assert_eq!(
            (place["rank"].as_u64(), place["size"].as_u64()),
            (Some(u64::from(r)), Some(u64::from(np)))
        );
        assert_eq!(place["local_rank"].as_u64(), Some(u64::from(r)), "one node: local rank = rank");
        assert_eq!(place["node"], host.as_str());
        assert!(!place["cpus"].as_array().unwrap().is_empty(), "{place:#}");
        // One rank per node is to count the node's memory traffic: local rank 0.
        let chosen = place["dram_chosen_by"].as_str().unwrap();
        assert_eq!(chosen.contains("not this rank"), r != 0, "rank {r}: {chosen}");
        assert_eq!(
            doc["machine"]["schema"], "roofline.machine/1",
            "the node's machine model, for its roofs"
        );
    }
    let (doc, _) = merge(&job, &tmp.path().join("job.json"));
    let mut total = 0;
    for r in 0..u64::from(np) {
        let p = point(&doc, &format!("work @ rank {r}"));
        assert_eq!(w(p), 2 * (r + 1) * n, "rank {r}: {p:#}");
        assert_eq!(p["flops"]["by_class"]["scalar_double"].as_f64(), Some((2 * (r + 1) * n) as f64));
        let core = p["bytes"]["core"].as_f64().unwrap();
        let loop_bytes = (24 * (r + 1) * n) as f64;
        // A region is a window of every thread of the rank: Open MPI's own threads (its
        // progress and PMIx threads) wake during it, about 800 B of integer code each time
        // (a rank traced alone, with and without the code cache: 270–1,616 B above the loop).
        assert!(
            core >= loop_bytes && core < loop_bytes + 8192.0,
            "rank {r}: core Q {core}, loop {loop_bytes}"
        );
        total += 2 * (r + 1) * n;
    }
    assert_eq!(w(point(&doc, &format!("work @ node {host}"))), total);
    let job_point = point(&doc, "work");
    assert_eq!(w(job_point), total);
    let want = 2.0 * f64::from(np) / f64::from(np + 1);
    let got = job_point["extra"]["imbalance"]["flops"].as_f64().unwrap();
    assert!((got - want).abs() < 1e-12, "imbalance of W {got}, want {want}");
    let balance = doc["job"]["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "work")
        .unwrap();
    assert_eq!(balance["slowest_rank"].as_u64(), Some(u64::from(np - 1)), "{balance:#}");
    assert_eq!(balance["slowest_node"], host.as_str());
    assert_eq!(doc["job"]["nodes"].as_array().unwrap().len(), 1);
    assert_eq!(doc["job"]["heterogeneous"], false);
}

#[test]
fn open_mpi_two_ranks() {
    every_rank_measured(&OPEN_MPI, 2, &[]);
}

#[test]
fn mpich_hydra_two_ranks() {
    every_rank_measured(&MPICH, 2, &[]);
}

/// Three ranks, rank 1 exiting with status 3 at the end: the others' files are written and
/// kept, the merge names rank 1, and the balance is over ranks 0 and 2 (W 2n and 6n: 1.5).
#[test]
fn open_mpi_three_ranks_one_dies() {
    let _one = one_job_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = build(&OPEN_MPI, tmp.path()) else { return };
    let n = support::random(2_000, 20_000, 3);
    let job = tmp.path().join("job");
    // Open MPI aborts the job when a rank fails; told not to, the others finish and write
    // (and mpirun's own status is then 0).
    let keep_going = ["--mca", "orte_abort_on_non_zero_status", "0"];
    let out = run_job(&OPEN_MPI, &keep_going, &[], TRACE, 3, &job, &exe, &[n.to_string(), "1".into()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let host = host();
    assert!(
        stderr.contains(&format!("rank 1 on {host}: the command failed (")) && stderr.contains("status 3"),
        "the dying rank is named: {stderr}"
    );
    assert!(!job.join(format!("{host}-r1.json")).exists());
    let (doc, warnings) = merge(&job, &tmp.path().join("job.json"));
    assert!(warnings.contains("rank(s) 1 of 3 wrote no file"), "{warnings}");
    assert_eq!(doc["job"]["missing_ranks"], serde_json::json!([1]));
    assert_eq!(w(point(&doc, "work @ rank 0")), 2 * n);
    assert_eq!(w(point(&doc, "work @ rank 2")), 6 * n);
    let job_point = point(&doc, "work");
    assert_eq!(w(job_point), 8 * n);
    assert_eq!(job_point["extra"]["imbalance"]["flops"].as_f64(), Some(1.5));
}

/// The perf path under a launcher, on the simulated PMU (the platform's perf events, groups
/// and formulas counting a memory-mode trace of each rank): per-rank W exact for the whole
/// run and region `work` (2 (r + 1) n), the node's and the job's W their sum (6n); the
/// system-wide (uncore) DRAM events opened by local rank 0 alone, so rank 1 has no DRAM
/// figure, and the node's and the job's DRAM are rank 0's count, once, with the merge naming
/// rank 0 as the one that counted it, for the whole run and the region.
fn perf_path_on_the_simulated_pmu(mpi: &Mpi, env: &[(&str, String)]) {
    let _one = one_job_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = build(mpi, tmp.path()) else { return };
    // calloc maps arrays of 128 KiB and more afresh: region `work` then reads x and y from
    // DRAM (cold lines), so its DRAM figure is no zero.
    let n = support::random(16_384, 24_000, 5);
    let job = tmp.path().join("job");
    let out = run_job(mpi, &[], env, SIMULATED_ZEN3, 2, &job, &exe, &[n.to_string()]);
    assert!(out.status.success(), "{} job failed", mpi.name);
    let host = host();
    let rank_file =
        |r: u32| -> Value { serde_json::from_str(&std::fs::read_to_string(job.join(format!("{host}-r{r}.json"))).unwrap()).unwrap() };
    let (r0, r1) = (rank_file(0), rank_file(1));
    assert_eq!(r0["environment"]["job"]["dram"], "node", "{:#}", r0["environment"]["job"]);
    assert_eq!(r1["environment"]["job"]["dram"], "none", "{:#}", r1["environment"]["job"]);
    assert!(
        r1["points"].as_array().unwrap().iter().all(|p| p["bytes"]["dram"].is_null()),
        "rank 1 opened no memory-controller event: {}",
        names(&r1)
    );
    let dram_of = |doc: &Value, name: &str| point(doc, name)["bytes"]["dram"].as_f64();
    let whole = r0["points"][0]["name"].as_str().unwrap().to_string();
    let rank0_dram = dram_of(&r0, &whole).expect("rank 0 counted the node's DRAM");
    let rank0_region_dram = dram_of(&r0, "work");
    assert!(
        rank0_dram > 0.0 && rank0_region_dram > Some(0.0),
        "{rank0_dram} {rank0_region_dram:?}"
    );
    let (doc, _) = merge(&job, &tmp.path().join("job.json"));
    for r in 0..2u64 {
        for name in [format!("work @ rank {r}"), format!("{whole} @ rank {r}")] {
            let p = point(&doc, &name);
            assert_eq!(p["provenance"]["flops"], "simulated", "{name}: {p:#}");
            assert!(
                p["bytes"]["dram"].is_null(),
                "{name}: the node's DRAM is on the node's point: {p:#}"
            );
        }
        let p = point(&doc, &format!("work @ rank {r}"));
        assert_eq!(w(p), 2 * (r + 1) * n, "rank {r}: {p:#}");
        assert_eq!(p["flops"]["by_class"]["any_precision"].as_f64(), Some((2 * (r + 1) * n) as f64));
        assert_eq!(p["extra"]["calls"], 1, "{p:#}");
    }
    assert!(w(point(&doc, &format!("{whole} @ rank 1"))) >= 4 * n);
    let moved = point(&doc, &format!("{whole} @ rank 0"))["provenance"]["notes"].to_string();
    assert!(moved.contains(&format!("it is on '{whole} @ node {host}'")), "{moved}");
    for (name, dram) in [(whole.as_str(), Some(rank0_dram)), ("work", rank0_region_dram)] {
        let node = point(&doc, &format!("{name} @ node {host}"));
        let job_point = point(&doc, name);
        assert_eq!(node["bytes"]["dram"].as_f64(), dram, "{name}: the node's DRAM is rank 0's, once");
        assert_eq!(job_point["bytes"]["dram"].as_f64(), dram, "{name}: the job's DRAM is the node's");
        let said = node["provenance"]["notes"].to_string();
        assert!(
            said.contains("rank 0 counted the node's memory traffic system-wide (once, never summed)"),
            "{name}: {said}"
        );
    }
    assert_eq!(w(point(&doc, &format!("work @ node {host}"))), 6 * n);
    assert_eq!(w(point(&doc, "work")), 6 * n);
    let imbalance = point(&doc, "work")["extra"]["imbalance"]["flops"].as_f64().unwrap();
    assert!((imbalance - 4.0 / 3.0).abs() < 1e-12, "imbalance of W {imbalance}, want 4/3");
    let node = &doc["job"]["nodes"][0];
    assert_eq!(
        (node["dram"].as_str(), node["dram_counted_by"].as_u64()),
        (Some("node"), Some(0)),
        "{node:#}"
    );
}

#[test]
fn open_mpi_perf_path_on_the_simulated_pmu() {
    perf_path_on_the_simulated_pmu(&OPEN_MPI_TASKS, &[]);
}

/// The same with the MPI program: every rank's Open MPI start-up and transports traced in
/// memory mode. Ignored in CI (about 60 s on 2 vCPUs): `cargo test --release --test mpi_jobs
/// -- --ignored`.
#[test]
#[ignore = "about 60 s on 2 vCPUs; run with --ignored"]
fn open_mpi_program_perf_path_on_the_simulated_pmu() {
    perf_path_on_the_simulated_pmu(&OPEN_MPI, &[]);
}

/// `roofline measure` around the launcher: `roofline measure --backend trace -o R.json --
/// mpirun -np 2 ranks_work n` counts the whole node as one process tree (the launcher, its
/// daemon, both ranks); the outer roofline is no rank (no `environment.job`), region `work`
/// holds both ranks' calls with their exact sum (6n), and the whole run holds at least that.
/// Ignored in CI (tracing Open MPI's runtime takes about 40 s on 2 vCPUs): `cargo test
/// --release --test mpi_jobs -- --ignored`.
#[test]
#[ignore = "about 40 s on 2 vCPUs; run with --ignored"]
fn measure_around_mpirun_counts_the_whole_node() {
    let _one = one_job_at_a_time();
    let tmp = tempfile::tempdir().unwrap();
    let Some(exe) = build(&OPEN_MPI, tmp.path()) else { return };
    let n = support::random(2_000, 20_000, 2);
    let report = tmp.path().join("node.json");
    let a = Command::cargo_bin("roofline")
        .unwrap()
        .args(["measure", "--backend", "trace", "-o"])
        .arg(&report)
        .arg("--")
        .args(OPEN_MPI.launcher)
        .args([OPEN_MPI.np, "2"])
        .arg(&exe)
        .arg(n.to_string())
        .assert();
    let o = a.get_output();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert!(
        doc["environment"]["job"].is_null(),
        "the outer roofline is no rank: {:#}",
        doc["environment"]
    );
    let region = point(&doc, "work");
    assert_eq!(w(region), 6 * n, "{region:#}");
    assert_eq!(region["flops"]["by_class"]["scalar_double"].as_f64(), Some((6 * n) as f64));
    let whole = &doc["points"][0];
    assert_ne!(whole["name"], "work", "the whole run's point comes first: {}", names(&doc));
    assert!(w(whole) >= 6 * n, "whole {} < region {}", w(whole), 6 * n);
    let (core_whole, core_region) = (whole["bytes"]["core"].as_f64().unwrap(), region["bytes"]["core"].as_f64().unwrap());
    assert!(
        core_whole >= core_region && core_region >= (72 * n) as f64,
        "{core_whole} {core_region}"
    );
}

/// A one-node Slurm cluster in a temporary directory (slurmctld and slurmd in the foreground,
/// `AuthType=auth/none`), stopped when dropped.
struct Cluster {
    dir: tempfile::TempDir,
    daemons: Vec<std::process::Child>,
}

impl Cluster {
    /// None (said) where Slurm is missing or this is not root (slurmd starts the tasks as
    /// their users).
    fn start() -> Option<Cluster> {
        if let Some(missing) = ["slurmctld", "slurmd", "srun", "sinfo"].into_iter().find(|c| !on_path(c)) {
            eprintln!("skipping: Slurm not installed ({missing} missing)");
            return None;
        }
        if !is_root() {
            eprintln!("skipping: a Slurm cluster of one's own needs root (slurmd)");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().display().to_string();
        let host = host();
        // Ports of this process's own, beside any cluster the machine runs.
        let port = 20_000 + (std::process::id() % 10_000) * 2;
        let conf = format!(
            "ClusterName=roofline-test\nSlurmctldHost={host}\nSlurmctldPort={port}\nSlurmdPort={}\n\
             AuthType=auth/none\nCredType=cred/none\nSlurmUser=root\nSlurmdUser=root\n\
             StateSaveLocation={d}/state\nSlurmdSpoolDir={d}/spool\nSlurmctldPidFile={d}/ctld.pid\n\
             SlurmdPidFile={d}/d.pid\nSlurmctldLogFile={d}/ctld.log\nSlurmdLogFile={d}/d.log\n\
             ProctrackType=proctrack/pgid\nTaskPlugin=task/none\nMpiDefault=none\n\
             SchedulerType=sched/builtin\nSelectType=select/cons_tres\nSelectTypeParameters=CR_Core\n\
             ReturnToService=2\nJobCompType=jobcomp/none\nAccountingStorageType=accounting_storage/none\n\
             NodeName={host} CPUs={} State=UNKNOWN\n\
             PartitionName=test Nodes={host} Default=YES MaxTime=INFINITE State=UP OverSubscribe=YES\n",
            port + 1,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        );
        for sub in ["state", "spool"] {
            std::fs::create_dir(dir.path().join(sub)).unwrap();
        }
        let conf_path = dir.path().join("slurm.conf");
        std::fs::write(&conf_path, conf).unwrap();
        let daemon = |name: &str, extra: &[&str]| {
            std::process::Command::new(name)
                .args(["-D", "-f"])
                .arg(&conf_path)
                .args(extra)
                .spawn()
                .unwrap()
        };
        let mut cluster = Cluster {
            daemons: vec![daemon("slurmctld", &["-i"])],
            dir,
        };
        cluster.daemons.push(daemon("slurmd", &[]));
        for _ in 0..100 {
            let o = std::process::Command::new("sinfo")
                .args(["-h", "-o", "%t"])
                .env("SLURM_CONF", &conf_path)
                .output()
                .unwrap();
            if String::from_utf8_lossy(&o.stdout).trim() == "idle" {
                return Some(cluster);
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
        let log = std::fs::read_to_string(cluster.dir.path().join("ctld.log")).unwrap_or_default();
        panic!("the test's Slurm node never became idle; slurmctld's log:\n{log}");
    }

    fn conf(&self) -> PathBuf {
        self.dir.path().join("slurm.conf")
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        // Our own daemons, by their process ids: SIGTERM, then wait for them.
        for c in &mut self.daemons {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(c.id() as i32), nix::sys::signal::Signal::SIGTERM);
        }
        for c in &mut self.daemons {
            let _ = c.wait();
        }
    }
}

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// `srun -n 2 roofline measure …` on the test's own cluster: the same checks as under mpirun,
/// with the trace backend and with the simulated PMU.
#[test]
fn slurm_srun_two_ranks() {
    if !on_path(SLURM.cc) {
        eprintln!("skipping: no C compiler ({} missing)", SLURM.cc);
        return;
    }
    let Some(cluster) = Cluster::start() else { return };
    let conf = [("SLURM_CONF", cluster.conf().display().to_string())];
    every_rank_measured(&SLURM, 2, &conf);
    // The perf path too, on the simulated PMU, on the same cluster.
    perf_path_on_the_simulated_pmu(&SLURM, &conf);
}
