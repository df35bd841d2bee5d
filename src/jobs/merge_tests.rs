use super::*;
use crate::schema::report::job::JobRank;
use crate::schema::report::{Bytes, Provenance, Source};

fn machine(uarch: &str) -> serde_json::Value {
    let mut v = serde_json::to_value(crate::machine::detect_static(&Default::default()).unwrap()).unwrap();
    v["microarchitecture"] = uarch.into();
    v
}

/// A point of W flops, core bytes 8 W, `dram` bytes where given, T seconds.
fn point(name: &str, w: f64, t: f64, dram: Option<f64>) -> Point {
    let mut bytes = Bytes::new();
    bytes.insert("core".into(), 8.0 * w);
    let mut prov = Provenance {
        flops: Some(Source::Trace),
        seconds: Some(Source::Native),
        ..Default::default()
    };
    if let Some(d) = dram {
        bytes.insert("dram".into(), d);
        prov.bytes.insert("dram".into(), Source::Perf);
    }
    let mut by_class = BTreeMap::new();
    by_class.insert("scalar_double".to_string(), w);
    let flops = Flops {
        fma: Some(0.0),
        ..Flops::of_classes(by_class)
    };
    Point::new(name, prov, flops, bytes, 1, if t > 0.0 { vec![t] } else { vec![] })
}

fn rank(host: &str, r: u32, size: u32, local: u32, dram: DramScope, uarch: &str, points: Vec<Point>) -> (String, Report) {
    let env = Environment {
        host: Some(host.into()),
        rank: Some(r),
        job: Some(JobRank {
            launcher: "slurm".into(),
            rank: r,
            size: Some(size),
            local_rank: Some(local),
            node: host.into(),
            node_id: None,
            cpus: vec![local],
            dram,
            dram_chosen_by: "local rank 0".into(),
        }),
        ..Default::default()
    };
    let mut rep = Report::new(machine(uarch), env);
    rep.points = points;
    (format!("{host}-r{r}.json"), rep)
}

fn find<'a>(r: &'a Report, name: &str) -> &'a Point {
    r.points
        .iter()
        .find(|p| p.name == name)
        .unwrap_or_else(|| panic!("no point {name}"))
}

/// Two nodes of two ranks, the node's DRAM counted by local rank 0 (100 and 50 bytes), work
/// 1, 2, 3, 6 and times 1, 2, 3, 6 in region `r`.
fn two_nodes() -> Vec<(String, Report)> {
    let ranks = [("n1", 0, 0, 1.0), ("n1", 1, 1, 2.0), ("n2", 2, 0, 3.0), ("n2", 3, 1, 6.0)];
    ranks
        .iter()
        .map(|&(h, r, local, x)| {
            let counts = local == 0;
            let dram = counts.then_some(if h == "n1" { 100.0 } else { 50.0 });
            let scope = if counts { DramScope::Node } else { DramScope::None };
            rank(
                h,
                r,
                4,
                local,
                scope,
                "zen4",
                vec![point("app", 10.0 * x, x + 1.0, dram), point("r", x, x, dram)],
            )
        })
        .collect()
}

#[test]
fn ranks_nodes_and_the_job_with_each_nodes_dram_once() {
    let (out, warnings) = merge_job(two_nodes(), Environment::default()).unwrap();
    assert!(warnings.is_empty(), "{warnings:?}");
    // Rank points: their own W and T; the counting rank's DRAM moved to its node's point.
    let r0 = find(&out, "r @ rank 0");
    assert_eq!((r0.flops.total, r0.seconds), (1.0, 1.0));
    assert!(!r0.bytes.contains_key("dram") && r0.provenance.notes.iter().any(|n| n.contains("r @ node n1")));
    assert_eq!(r0.source.as_deref(), Some("n1-r0.json"));
    // Node points: W and Q summed, T the slowest rank's, DRAM the counting rank's alone.
    let n2 = find(&out, "r @ node n2");
    assert_eq!(
        (n2.flops.total, n2.bytes["core"], n2.seconds, n2.bytes["dram"]),
        (9.0, 72.0, 6.0, 50.0)
    );
    assert_eq!(n2.flops.by_class["scalar_double"], 9.0);
    assert_eq!(find(&out, "r @ node n1").bytes["dram"], 100.0);
    // The job: nodes summed, T the slowest node's.
    let job = find(&out, "r");
    assert_eq!(
        (job.flops.total, job.bytes["dram"], job.seconds, job.threads),
        (12.0, 150.0, 6.0, 4)
    );
    assert_eq!(find(&out, "app").flops.total, 120.0);
    // Imbalance over ranks: T 1, 2, 3, 6 (max 6, mean 3), W the same.
    let im = job.extra.imbalance.as_ref().unwrap();
    assert_eq!((im["seconds"], im["flops"]), (2.0, 2.0));
    let j = out.job.as_ref().unwrap();
    let b = j.regions.iter().find(|b| b.name == "r").unwrap();
    assert_eq!(
        (b.slowest_rank, b.slowest_node.as_deref(), b.slowest_node_by_time.as_deref()),
        (Some(3), Some("n2"), Some("n2"))
    );
    assert_eq!(j.nodes[0].dram_counted_by, Some(0));
    assert_eq!(j.nodes[1].ranks, vec![2, 3]);
    assert!(j.missing_ranks.is_empty() && !j.heterogeneous);
    // Roofs: a rank its CPU, a node its cores, the job both nodes.
    let node = j.nodes[0].roofs.as_ref().unwrap();
    let ceil = out.ceilings.as_ref().unwrap();
    for (k, v) in &node.compute_gflops {
        assert!((ceil.compute_gflops[k] - 2.0 * v).abs() < 1e-9 * v, "{k}");
    }
    let rank_roofs = j.ranks[0].roofs.as_ref().unwrap();
    assert_eq!(rank_roofs.threads, Some(1));
    assert_eq!(ceil.threads, node.threads.map(|t| 2 * t));
    assert_eq!(out.sources.len(), 4);
}

#[test]
fn a_node_whose_dram_two_ranks_counted_keeps_one_count() {
    let mut inputs = two_nodes();
    // Rank 1 of n1 counted too (a launcher without local ranks, a lock file lost): 70 bytes.
    let (_, r1) = &mut inputs[1];
    r1.environment.job.as_mut().unwrap().dram = DramScope::Node;
    for p in &mut r1.points {
        p.bytes.insert("dram".into(), 70.0);
    }
    let (out, warnings) = merge_job(inputs, Environment::default()).unwrap();
    assert!(warnings.iter().any(|w| w.contains("node n1: ranks 0, 1")), "{warnings:?}");
    assert_eq!(find(&out, "r @ node n1").bytes["dram"], 100.0);
    assert_eq!(find(&out, "r").bytes["dram"], 150.0);
}

#[test]
fn each_process_own_dram_is_summed() {
    let inputs: Vec<_> = (0..3)
        .map(|r| {
            rank(
                "n1",
                r,
                3,
                r,
                DramScope::Process,
                "zen4",
                vec![point("app", 1.0, 0.0, Some(10.0 * f64::from(r + 1)))],
            )
        })
        .collect();
    let (out, _) = merge_job(inputs, Environment::default()).unwrap();
    assert_eq!(
        find(&out, "app @ rank 1").bytes["dram"],
        20.0,
        "a process's own DRAM stays on its point"
    );
    assert_eq!(find(&out, "app @ node n1").bytes["dram"], 60.0);
    assert_eq!(find(&out, "app").bytes["dram"], 60.0);
    // No times (a traced job): no T imbalance, the W balance still named.
    let b = &out.job.as_ref().unwrap().regions[0];
    assert_eq!((b.seconds_imbalance, b.flops_imbalance, b.slowest_rank), (None, Some(1.0), Some(0)));
}

#[test]
fn missing_ranks_duplicates_and_other_reports() {
    let mut inputs = two_nodes();
    inputs.remove(2);
    let (out, warnings) = merge_job(inputs.clone(), Environment::default()).unwrap();
    assert_eq!(out.job.as_ref().unwrap().missing_ranks, vec![2]);
    assert!(
        warnings.iter().any(|w| w.starts_with("rank(s) 2 of 4 wrote no file")),
        "{warnings:?}"
    );
    let mut dup = inputs.clone();
    dup.push(("again.json".into(), inputs[0].1.clone()));
    let e = merge_job(dup, Environment::default()).unwrap_err();
    assert!(e.to_string().contains("rank 0 has two files"), "{e}");
    assert_eq!(e.exit_code(), 2);
    let mut plain = inputs;
    plain[0].1.environment.job = None;
    assert!(!all_ranks(&plain));
    assert_eq!(merge_job(plain, Environment::default()).unwrap_err().exit_code(), 2);
}

#[test]
fn a_job_over_two_microarchitectures_has_no_single_roof() {
    let mut inputs = two_nodes();
    for (_, r) in inputs.iter_mut().skip(2) {
        r.machine["microarchitecture"] = "spr".into();
    }
    let (out, _) = merge_job(inputs, Environment::default()).unwrap();
    let j = out.job.as_ref().unwrap();
    assert!(j.heterogeneous);
    assert_eq!(j.microarchitectures, vec!["zen4", "spr"]);
    assert!(out.ceilings.is_none());
    assert!(j.notes.iter().any(|n| n.contains("no single roof")), "{:?}", j.notes);
    assert!(j.nodes.iter().all(|n| n.roofs.is_some()), "each node keeps its own roofs");
}
