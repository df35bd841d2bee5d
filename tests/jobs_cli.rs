//! `roofline report merge JOB/` on recorded job directories (tests/fixtures/jobs/: two nodes of
//! two ranks each, and the same job over two microarchitectures), gates on merged job reports,
//! and the bad input of a rank's `measure -o DIR/`. In the fixtures rank r does W = 2000 (r + 1)
//! in region `work`, T 1 ms (rank 3: 3 ms); local rank 0 of each node counted the node's DRAM
//! (1 MB on genoa-a, 2 MB on the second node).

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jobs").join(name)
}

fn merged(dir: &Path, out: &Path) -> Value {
    let a = roofline().args(["report", "merge"]).arg(dir).arg("-o").arg(out).assert().success();
    let stderr = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(stderr.contains("merged 14 points from 4 sources"), "{stderr}");
    serde_json::from_str(&std::fs::read_to_string(out).unwrap()).unwrap()
}

fn point<'a>(doc: &'a Value, name: &str) -> &'a Value {
    doc["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no point {name}"))
}

fn num(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn two_nodes_merge_into_ranks_nodes_and_the_job() {
    let tmp = tempfile::tempdir().unwrap();
    let doc = merged(&fixture("two-nodes"), &tmp.path().join("job.json"));
    // Nodes: W summed, T the slowest rank's, DRAM the counting rank's once.
    let a = point(&doc, "work @ node genoa-a");
    assert_eq!(
        (num(&a["flops"]["total"]), num(&a["seconds"]), num(&a["bytes"]["dram"])),
        (6000.0, 0.001, 1.0e6)
    );
    let b = point(&doc, "work @ node genoa-b");
    assert_eq!(
        (num(&b["flops"]["total"]), num(&b["seconds"]), num(&b["bytes"]["dram"])),
        (14000.0, 0.003, 2.0e6)
    );
    assert!(
        point(&doc, "work @ rank 2")["bytes"].get("dram").is_none(),
        "the node's DRAM is on the node's point"
    );
    // The job: sums, T the slowest node's; imbalance T 3 / 1.5, W 8000 / 5000.
    let job = point(&doc, "work");
    assert_eq!(
        (num(&job["flops"]["total"]), num(&job["seconds"]), num(&job["bytes"]["dram"])),
        (20000.0, 0.003, 3.0e6)
    );
    assert_eq!(num(&job["extra"]["imbalance"]["seconds"]), 2.0);
    assert_eq!(num(&job["extra"]["imbalance"]["flops"]), 1.6);
    let balance = doc["job"]["regions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["name"] == "work")
        .unwrap();
    assert_eq!(
        (&balance["slowest_rank"], &balance["slowest_node"]),
        (&Value::from(3), &Value::from("genoa-b"))
    );
    let nodes = doc["job"]["nodes"].as_array().unwrap();
    assert_eq!(
        (&nodes[0]["dram"], &nodes[0]["dram_counted_by"]),
        (&Value::from("node"), &Value::from(0))
    );
    assert_eq!(doc["job"]["heterogeneous"], false);
    // The job's roofs: both nodes' (the fixture's Genoa: 16 cores each).
    assert_eq!(doc["ceilings"]["threads"], 32);
    let node_l2 = num(&nodes[0]["roofs"]["bandwidth_gbs"]["l2"]);
    assert!((num(&doc["ceilings"]["bandwidth_gbs"]["l2"]) - 2.0 * node_l2).abs() < 1e-6 * node_l2);
    assert_eq!(doc["job"]["ranks"][0]["roofs"]["threads"], 1, "a rank's roofs: its one CPU");
}

#[test]
fn a_job_over_two_microarchitectures_says_so_instead_of_one_roof() {
    let tmp = tempfile::tempdir().unwrap();
    let doc = merged(&fixture("heterogeneous"), &tmp.path().join("job.json"));
    assert_eq!(doc["job"]["heterogeneous"], true);
    assert_eq!(doc["job"]["microarchitectures"], serde_json::json!(["zen4", "spr"]));
    assert!(doc.get("ceilings").is_none(), "no single roof: {}", doc["ceilings"]);
    let notes = doc["job"]["notes"].to_string();
    assert!(notes.contains("2 microarchitectures (zen4, spr)"), "{notes}");
    let nodes = doc["job"]["nodes"].as_array().unwrap();
    assert_eq!((&nodes[0]["cores"], &nodes[1]["cores"]), (&Value::from(16), &Value::from(36)));
    assert_ne!(nodes[0]["roofs"], nodes[1]["roofs"], "each node its own machine model");
}

/// A job recorded on two real guests, both named `vm`: rank 0 on this project's 2-vCPU Zen 4
/// guest, rank 1 on the device tool's 16-vCPU Emerald Rapids guest (2026-11-29, the trace
/// backend, `tests/fixtures/mpi/ranks_work.c` built without MPI, n = 50000, Slurm's variables
/// set by hand: node ids 0 and 1). One host name, two machines: the merge tells them apart by
/// the launcher's node id and says so; each rank's W is its own exact count.
#[test]
fn two_guests_of_one_host_name_are_two_nodes() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("job.json");
    let a = roofline()
        .args(["report", "merge"])
        .arg(fixture("two-guests"))
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        stderr.contains("host name(s) 'vm' (vm#0, vm#1) shared by ranks of different launcher nodes"),
        "{stderr}"
    );
    let doc: Value = serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap();
    let nodes: Vec<&str> = doc["job"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["host"].as_str().unwrap())
        .collect();
    assert_eq!(nodes, ["vm#0", "vm#1"]);
    assert_eq!(doc["job"]["heterogeneous"], true);
    assert_eq!(doc["job"]["microarchitectures"], serde_json::json!(["zen4", "spr"]));
    let n = 50_000.0;
    for r in 0..2u32 {
        let w = num(&point(&doc, &format!("work @ rank {r}"))["flops"]["total"]);
        assert_eq!(w, 2.0 * f64::from(r + 1) * n, "rank {r}");
        assert_eq!(num(&point(&doc, &format!("work @ node vm#{r}"))["flops"]["total"]), w);
    }
    assert_eq!(num(&point(&doc, "work")["flops"]["total"]), 6.0 * n);
}

/// A copy of the two-node job whose rank 3 does twice the work in `work`.
fn heavier_rank_3(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for e in std::fs::read_dir(fixture("two-nodes")).unwrap() {
        let p = e.unwrap().path();
        let mut doc: Value = serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        if p.file_name().unwrap() == "genoa-b-r3.json" {
            for pt in doc["points"].as_array_mut().unwrap() {
                if pt["name"] == "work" {
                    pt["flops"]["total"] = 16000.0.into();
                    pt["flops"]["effective"] = 16000.0.into();
                    pt["flops"]["by_class"]["scalar_double"] = 16000.0.into();
                }
            }
        }
        std::fs::write(dir.join(p.file_name().unwrap()), doc.to_string()).unwrap();
    }
}

#[test]
fn gates_on_job_reports_judge_w_per_rank_and_job_and_the_imbalance() {
    let tmp = tempfile::tempdir().unwrap();
    let base = tmp.path().join("base.json");
    merged(&fixture("two-nodes"), &base);
    let gate = |current: &Path, rules: Option<&Path>| {
        let mut c = roofline();
        c.args(["gate", "--format", "json", "--baseline"])
            .arg(&base)
            .arg("--current")
            .arg(current);
        if let Some(r) = rules {
            c.arg("--rules").arg(r);
        }
        c.assert()
    };
    gate(&base, None).success();
    let heavy = tmp.path().join("heavy");
    heavier_rank_3(&heavy);
    let cur = tmp.path().join("cur.json");
    merged(&heavy, &cur);
    let a = gate(&cur, None).code(1);
    let out: Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
    let failed: Vec<(String, String)> = out["rows"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["verdict"] == "fail")
        .map(|r| (r["point"].as_str().unwrap().to_string(), r["metric"].as_str().unwrap().to_string()))
        .collect();
    let has = |p: &str, m: &str| failed.iter().any(|(a, b)| a.starts_with(p) && b == m);
    assert!(has("work @ rank 3", "flops.total"), "{failed:?}");
    assert!(has("work @ node genoa-b", "flops.total"), "{failed:?}");
    assert!(has("work (", "flops.total") && has("work (", "imbalance.flops"), "{failed:?}");
    assert!(!has("work @ rank 2", "flops.total"), "rank 2 did not change: {failed:?}");
    // Imbalance with a rule of its own: an absolute ceiling on the job's T imbalance.
    let rules = tmp.path().join("rules.toml");
    std::fs::write(
        &rules,
        "[settings]\ndefaults = false\n[[rule]]\nmetric = \"imbalance.seconds\"\npoints = \"work\"\nmax = 1.5\n",
    )
    .unwrap();
    let a = gate(&base, Some(&rules)).code(1);
    let out: Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
    let row = out["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "imbalance.seconds")
        .unwrap();
    assert_eq!((num(&row["current"]), &row["verdict"]), (2.0, &Value::from("fail")));
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let tmp = tempfile::tempdir().unwrap();
    // A rank whose job directory cannot be created: nothing runs.
    let blocked = tmp.path().join("file");
    std::fs::write(&blocked, "").unwrap();
    let rank = [
        ("OMPI_COMM_WORLD_RANK", "1"),
        ("OMPI_COMM_WORLD_SIZE", "2"),
        ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
    ];
    let dir = format!("{}/job/", blocked.display());
    let a = roofline()
        .envs(rank)
        .args(["measure", "--backend", "trace", "-o", &dir, "--", "true"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("cannot create the job directory") && err.contains("hint:"), "{err}");
    // --repeat: a rank cannot be started again.
    let job = format!("{}/job/", tmp.path().display());
    let a = roofline()
        .envs(rank)
        .args(["measure", "--repeat", "3", "-o", &job, "--", "true"])
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&a.get_output().stderr).contains("cannot be started again"));
    // Outside a launcher `-o DIR/` is what it always was: a file name with no extension.
    let a = roofline()
        .env_remove("OMPI_COMM_WORLD_RANK")
        .args(["measure", "-o", &job, "--", "true"])
        .assert()
        .code(2);
    assert!(String::from_utf8_lossy(&a.get_output().stderr).contains("unsupported extension"));
    // An empty job directory, one file, a directory holding another report.
    let empty = tmp.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let a = roofline().args(["report", "merge"]).arg(&empty).assert().code(2);
    assert!(String::from_utf8_lossy(&a.get_output().stderr).contains("no rank files"));
    let one = fixture("two-nodes").join("genoa-a-r0.json");
    roofline().args(["report", "merge"]).arg(&one).assert().code(2);
    let mixed = tmp.path().join("mixed");
    heavier_rank_3(&mixed);
    let plain = r#"{"schema":"roofline.report/1","machine":null,"environment":{"tool_version":"0","command_line":[]},"points":[]}"#;
    std::fs::write(mixed.join("other.json"), plain).unwrap();
    let a = roofline().args(["report", "merge"]).arg(&mixed).assert().code(2);
    assert!(String::from_utf8_lossy(&a.get_output().stderr).contains("other.json: not a rank's report"));
}

/// `report merge JOB/ -o job.html` writes the job's page: the job's line, the nodes', ranks'
/// and job's charts, the balance with rank 3 (T 3 ms against 1 ms) the straggler.
#[test]
fn a_job_directory_merges_into_its_page() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("job.html");
    let a = roofline()
        .args(["report", "merge"])
        .arg(fixture("two-nodes"))
        .arg("-o")
        .arg(&out)
        .assert()
        .success();
    let stderr = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(stderr.contains("merged 14 points from 4 sources"), "{stderr}");
    let page = std::fs::read_to_string(&out).unwrap();
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(page.contains("job of 4 rank(s) on 2 node(s)"));
    assert_eq!(page.matches("<section class=\"chartbox\"").count(), 3, "nodes, ranks, the job");
    assert!(page.contains("Balance over the ranks"));
    assert!(page.contains("Stragglers (red, ≥ 10 % over the median): rank 3 (3.00 ms, 3.00× the median)"));
}
