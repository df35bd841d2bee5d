//! `roofline report merge DIR/`: a job directory of rank files (`HOST-rRANK.json`, each with
//! `environment.job`) into one report: the points of every rank (`NAME @ rank R`), of every
//! node (`NAME @ node HOST`: W and Q summed over its ranks, T its slowest rank's) and of the
//! job (`NAME`: the nodes summed, T the slowest node's), for the whole run and every region;
//! the balance of each over the ranks; roofs for what each ran on.
//!
//! A node's memory traffic counted system-wide by one of its ranks (`dram: node`) is that
//! rank's count alone, never summed with another's; the rank's own point leaves it out (it
//! holds every rank's traffic of the node). Counts of each process's own (`dram: process`,
//! the trace backend's cache simulator) are summed.

use std::collections::BTreeMap;

use crate::error::{Error, Result};
use crate::machine::MachineModel;
use crate::model::RoofSet;
use crate::schema::report::job::{Balance, DramScope, Job, JobNode, JobRank, JobRankRow};
use crate::schema::report::{Environment, Flops, Point, Report, Roofs, SourceReport, level};

/// One rank's file, read.
struct RankFile {
    source: String,
    job: JobRank,
    report: Report,
}

/// Whether every report is a rank of a job (`environment.job`).
pub fn all_ranks(inputs: &[(String, Report)]) -> bool {
    !inputs.is_empty() && inputs.iter().all(|(_, r)| r.environment.job.is_some())
}

/// Merge a job's rank reports. Errors: a report that is no rank's, two files of one rank.
/// Warnings: missing ranks, a node whose memory traffic two ranks counted.
pub fn merge_job(inputs: Vec<(String, Report)>, environment: Environment) -> Result<(Report, Vec<String>)> {
    let mut warnings = Vec::new();
    let mut ranks: Vec<RankFile> = Vec::with_capacity(inputs.len());
    for (source, mut report) in inputs {
        let Some(job) = report.environment.job.take() else {
            return Err(Error::input(
                format!("{source}: not a rank's report (no environment.job)"),
                "a job directory holds only the files `roofline measure -o DIR/` wrote under a launcher",
            ));
        };
        report.environment.job = Some(job.clone());
        ranks.push(RankFile { source, job, report });
    }
    ranks.sort_by_key(|r| r.job.rank);
    if let Some(w) = ranks.windows(2).find(|w| w[0].job.rank == w[1].job.rank) {
        return Err(Error::input(
            format!("rank {} has two files: {} and {}", w[0].job.rank, w[0].source, w[1].source),
            "merge one job's directory (give each job its own -o DIR/)",
        ));
    }
    let size = ranks.iter().filter_map(|r| r.job.size).max();
    let present: std::collections::BTreeSet<u32> = ranks.iter().map(|r| r.job.rank).collect();
    let missing: Vec<u32> = (0..size.unwrap_or(0)).filter(|r| !present.contains(r)).collect();
    if !missing.is_empty() {
        warnings.push(format!(
            "rank(s) {} of {} wrote no file (the command failed or the rank died); the job's sums leave them out",
            list(&missing),
            size.unwrap_or(0)
        ));
    }
    warnings.extend(tell_apart_shared_host_names(&mut ranks));
    let nodes = node_groups(&ranks);
    let models: Vec<Option<MachineModel>> = nodes
        .iter()
        .map(|(_, idx)| serde_json::from_value(ranks[idx[0]].report.machine.clone()).ok())
        .collect();
    let mut out = Report::new(serde_json::Value::Null, environment);
    let mut job = Job {
        launchers: dedup(ranks.iter().map(|r| r.job.launcher.clone())),
        size,
        missing_ranks: missing,
        microarchitectures: Vec::new(),
        heterogeneous: false,
        nodes: Vec::new(),
        ranks: Vec::new(),
        regions: Vec::new(),
        notes: Vec::new(),
    };
    let names = point_names(&ranks);
    rank_points(&mut out, &mut job, &ranks, &nodes, &models);
    let node_points = node_points(&mut out, &mut job, &ranks, &nodes, &models, &names, &mut warnings);
    job_points(&mut out, &mut job, &ranks, &names, &node_points);
    roofs_of_the_job(&mut out, &mut job, &nodes, &models, &ranks);
    job.notes.push("rank points: each rank's own; node points: W and Q summed over its ranks, T the slowest rank's; job points: the nodes summed, T the slowest node's".into());
    out.job = Some(Box::new(job));
    Ok((out, warnings))
}

/// Every rank's points (`NAME @ rank R`), its row and its source; a node's DRAM counted by
/// this rank moved off its own point (it is on the node's).
fn rank_points(out: &mut Report, job: &mut Job, ranks: &[RankFile], nodes: &[(String, Vec<usize>)], models: &[Option<MachineModel>]) {
    for r in ranks {
        let model = nodes.iter().position(|(h, _)| *h == r.job.node).and_then(|n| models[n].as_ref());
        job.ranks.push(JobRankRow {
            rank: r.job.rank,
            node: r.job.node.clone(),
            source: r.source.clone(),
            cpus: r.job.cpus.clone(),
            dram: r.job.dram,
            roofs: model.map(|m| RoofSet::theoretical(m, (r.job.cpus.len() as u32).max(1)).to_roofs()),
        });
        out.sources.push(SourceReport {
            name: r.source.clone(),
            machine: r.report.machine.clone(),
            environment: r.report.environment.clone(),
        });
        for p in &r.report.points {
            let mut q = p.clone();
            q.name = format!("{} @ rank {}", p.name, r.job.rank);
            q.source = Some(r.source.clone());
            if r.job.dram == DramScope::Node && q.bytes.remove(level::DRAM).is_some() {
                q.provenance.bytes.remove(level::DRAM);
                q.provenance.notes.push(format!(
                    "bytes.dram: this rank counted its node's memory traffic system-wide; it is on '{} @ node {}'",
                    p.name, r.job.node
                ));
                q.derive();
            }
            out.points.push(q);
        }
    }
}

/// Every node's points (`NAME @ node HOST`) and row: W and Q summed, T the slowest rank's,
/// DRAM once where a rank counted it system-wide. The points of each node, for the job's.
fn node_points(
    out: &mut Report,
    job: &mut Job,
    ranks: &[RankFile],
    nodes: &[(String, Vec<usize>)],
    models: &[Option<MachineModel>],
    names: &[String],
    warnings: &mut Vec<String>,
) -> Vec<Vec<Point>> {
    let mut node_points: Vec<Vec<Point>> = Vec::new();
    for ((host, idx), model) in nodes.iter().zip(models) {
        let counters: Vec<u32> = idx
            .iter()
            .filter(|&&i| ranks[i].job.dram == DramScope::Node)
            .map(|&i| ranks[i].job.rank)
            .collect();
        if counters.len() > 1 {
            warnings.push(format!(
                "node {host}: ranks {} each counted the node's memory traffic; rank {}'s is kept, never their sum",
                list(&counters),
                counters[0]
            ));
        }
        let scope = if !counters.is_empty() {
            DramScope::Node
        } else if idx.iter().any(|&i| ranks[i].job.dram == DramScope::Process) {
            DramScope::Process
        } else {
            DramScope::None
        };
        let mut points = Vec::new();
        for name in names {
            let members: Vec<(&RankFile, &Point)> = idx
                .iter()
                .filter_map(|&i| ranks[i].report.points.iter().find(|p| &p.name == name).map(|p| (&ranks[i], p)))
                .collect();
            if members.is_empty() {
                continue;
            }
            let dram_of = |r: &RankFile, p: &Point| match (scope, r.job.dram) {
                (DramScope::Node, DramScope::Node) => (Some(r.job.rank) == counters.first().copied())
                    .then(|| p.bytes.get(level::DRAM).copied())
                    .flatten(),
                (DramScope::Node, _) => None,
                _ => p.bytes.get(level::DRAM).copied(),
            };
            let mut q = sum_points(
                &members.iter().map(|(r, p)| (*p, dram_of(r, p))).collect::<Vec<_>>(),
                &format!("{name} @ node {host}"),
            );
            q.provenance.notes.push(match scope {
                DramScope::Node => format!(
                    "bytes.dram: rank {} counted the node's memory traffic system-wide (once, never summed)",
                    counters[0]
                ),
                DramScope::Process => "bytes.dram: the sum of the ranks' own (each process's simulated traffic)".to_string(),
                DramScope::None => "bytes.dram: not counted on this node".to_string(),
            });
            points.push(q);
        }
        out.points.extend(points.iter().cloned());
        node_points.push(points);
        job.nodes.push(JobNode {
            host: host.clone(),
            ranks: idx.iter().map(|&i| ranks[i].job.rank).collect(),
            microarchitecture: model.as_ref().map(|m| m.microarchitecture.clone()).filter(|m| !m.is_empty()),
            cores: model.as_ref().map(|m| m.cores),
            dram: scope,
            dram_counted_by: counters.first().copied(),
            roofs: model.as_ref().map(|m| RoofSet::theoretical(m, m.cores.max(1)).to_roofs()),
        });
    }
    node_points
}

/// The job's points (`NAME`: the nodes summed, T the slowest node's) with the balance of each
/// over the ranks.
fn job_points(out: &mut Report, job: &mut Job, ranks: &[RankFile], names: &[String], node_points: &[Vec<Point>]) {
    for name in names {
        let members: Vec<(&Point, Option<f64>)> = node_points
            .iter()
            .flatten()
            .filter(|p| p.name.rsplit_once(" @ node ").is_some_and(|(n, _)| n == name))
            .map(|p| (p, p.bytes.get(level::DRAM).copied()))
            .collect();
        let mut q = sum_points(&members, name);
        q.provenance
            .notes
            .push(format!("the job: {} node(s) summed, T the slowest node's", members.len()));
        let balance = balance(name, ranks);
        let mut imbalance = BTreeMap::new();
        imbalance.extend(balance.seconds_imbalance.map(|v| ("seconds".to_string(), v)));
        imbalance.extend(balance.flops_imbalance.map(|v| ("flops".to_string(), v)));
        q.extra.imbalance = (!imbalance.is_empty()).then_some(imbalance);
        job.regions.push(balance);
        out.points.push(q);
    }
}

/// The job's machine and roofs: one node's model and the nodes' roofs summed where every node
/// has the same microarchitecture; none (and said) where they differ.
fn roofs_of_the_job(out: &mut Report, job: &mut Job, nodes: &[(String, Vec<usize>)], models: &[Option<MachineModel>], ranks: &[RankFile]) {
    job.microarchitectures = dedup(
        job.nodes
            .iter()
            .map(|n| n.microarchitecture.clone().unwrap_or_else(|| "unknown".into())),
    );
    job.heterogeneous = job.microarchitectures.len() > 1 || models.iter().any(Option::is_none);
    if job.heterogeneous {
        out.machine = serde_json::json!({ "microarchitectures": job.microarchitectures, "heterogeneous": true });
        job.notes.push(format!(
            "nodes of {} microarchitectures ({}): no single roof for the job; each node's and rank's roofs are its own (job.nodes, job.ranks)",
            job.microarchitectures.len(),
            job.microarchitectures.join(", ")
        ));
        return;
    }
    out.machine = ranks[nodes[0].1[0]].report.machine.clone();
    let mut sum: Option<Roofs> = None;
    for n in &job.nodes {
        let Some(r) = &n.roofs else { continue };
        match sum.as_mut() {
            None => sum = Some(r.clone()),
            Some(s) => add_roofs(s, r),
        }
    }
    if let Some(s) = &sum {
        job.notes.push(format!(
            "the job's roofs: {} node(s) × the node's roofs ({} cores)",
            job.nodes.len(),
            s.threads.unwrap_or(0)
        ));
    }
    out.ceilings = sum;
}

/// Roofs of two machines side by side: every rate added, cores added.
fn add_roofs(a: &mut Roofs, b: &Roofs) {
    for (k, v) in &b.compute_gflops {
        *a.compute_gflops.entry(k.clone()).or_default() += v;
    }
    for (k, v) in &b.bandwidth_gbs {
        *a.bandwidth_gbs.entry(k.clone()).or_default() += v;
    }
    for (k, v) in &b.bandwidth_traffic_gbs {
        *a.bandwidth_traffic_gbs.entry(k.clone()).or_default() += v;
    }
    a.threads = match (a.threads, b.threads) {
        (Some(x), Some(y)) => Some(x + y),
        _ => None,
    };
}

/// Ranks of different launcher nodes (`node_id`) under one host name (cloned guests and
/// containers are often all `vm` or `localhost`) are on different machines: each such node is
/// named `HOST#ID` from here on, and a warning says so.
fn tell_apart_shared_host_names(ranks: &mut [RankFile]) -> Option<String> {
    let mut ids: BTreeMap<String, std::collections::BTreeSet<Option<u32>>> = BTreeMap::new();
    for r in ranks.iter() {
        ids.entry(r.job.node.clone()).or_default().insert(r.job.node_id);
    }
    let shared: Vec<(String, Vec<Option<u32>>)> = ids
        .into_iter()
        .filter(|(_, set)| set.len() > 1)
        .map(|(host, set)| (host, set.into_iter().collect()))
        .collect();
    if shared.is_empty() {
        return None;
    }
    let name = |host: &str, id: Option<u32>| match id {
        Some(i) => format!("{host}#{i}"),
        None => format!("{host}#?"),
    };
    for r in ranks.iter_mut() {
        if shared.iter().any(|(h, _)| *h == r.job.node) {
            r.job.node = name(&r.job.node, r.job.node_id);
            if let Some(j) = r.report.environment.job.as_mut() {
                j.node = r.job.node.clone();
            }
        }
    }
    let said: Vec<String> = shared
        .iter()
        .map(|(h, set)| format!("'{h}' ({})", set.iter().map(|&i| name(h, i)).collect::<Vec<_>>().join(", ")))
        .collect();
    Some(format!(
        "host name(s) {} shared by ranks of different launcher nodes: each node named HOST#NODE_ID",
        said.join(", ")
    ))
}

/// Nodes by host name, in order of their first rank, with the indices of their ranks.
fn node_groups(ranks: &[RankFile]) -> Vec<(String, Vec<usize>)> {
    let mut nodes: Vec<(String, Vec<usize>)> = Vec::new();
    let mut at: BTreeMap<&str, usize> = BTreeMap::new();
    for (i, r) in ranks.iter().enumerate() {
        match at.get(r.job.node.as_str()) {
            Some(&n) => nodes[n].1.push(i),
            None => {
                at.insert(&r.job.node, nodes.len());
                nodes.push((r.job.node.clone(), vec![i]));
            }
        }
    }
    nodes
}

/// Point names in order of first appearance (the whole run first: each rank's first point).
fn point_names(ranks: &[RankFile]) -> Vec<String> {
    dedup(ranks.iter().flat_map(|r| r.report.points.iter().map(|p| p.name.clone())))
}

fn dedup(items: impl Iterator<Item = String>) -> Vec<String> {
    let mut seen = std::collections::HashSet::new();
    items.filter(|s| seen.insert(s.clone())).collect()
}

fn list(xs: &[u32]) -> String {
    xs.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

/// Points run side by side as one: W and Q summed (`bytes.dram` as given beside each point,
/// absent where none has one), T the slowest one's, threads summed.
fn sum_points(members: &[(&Point, Option<f64>)], name: &str) -> Point {
    let mut flops = Flops::default();
    let mut bytes = BTreeMap::new();
    let mut dram: Option<f64> = None;
    for (i, (p, d)) in members.iter().enumerate() {
        add_flops(&mut flops, &p.flops, i == 0);
        for (lvl, b) in &p.bytes {
            if lvl != level::DRAM {
                *bytes.entry(lvl.clone()).or_insert(0.0) += b;
            }
        }
        if let Some(d) = d {
            *dram.get_or_insert(0.0) += d;
        }
    }
    if let Some(d) = dram {
        bytes.insert(level::DRAM.to_string(), d);
    }
    let slowest = members.iter().map(|(p, _)| p.seconds).fold(0.0, f64::max);
    let mut provenance = members[0].0.provenance.clone();
    provenance.notes.clear();
    if dram.is_none() {
        provenance.bytes.remove(level::DRAM);
    }
    let threads = members.iter().map(|(p, _)| p.threads).sum();
    let samples = if slowest > 0.0 { vec![slowest] } else { Vec::new() };
    let mut q = Point::new(name, provenance, flops, bytes, threads, samples);
    if members.iter().all(|(p, _)| p.gflops.is_none()) {
        q.gflops = None;
    }
    q
}

/// `b` added into `a` (`first`: `a` is still empty). A figure some member lacks stays unknown.
fn add_flops(a: &mut Flops, b: &Flops, first: bool) {
    let add = |x: Option<f64>, y: Option<f64>| if first { y } else { Some(x? + y?) };
    a.effective = add(a.effective, b.effective);
    a.fma = add(a.fma, b.fma);
    a.int_ops_effective = add(a.int_ops_effective, b.int_ops_effective);
    a.total += b.total;
    a.int_ops = match (a.int_ops, b.int_ops) {
        (None, None) => None,
        (x, y) => Some(x.unwrap_or(0.0) + y.unwrap_or(0.0)),
    };
    for (k, v) in &b.by_class {
        *a.by_class.entry(k.clone()).or_insert(0.0) += v;
    }
}

/// The balance of point `name` over the ranks that have it.
fn balance(name: &str, ranks: &[RankFile]) -> Balance {
    let rows: Vec<(&RankFile, &Point)> = ranks
        .iter()
        .filter_map(|r| r.report.points.iter().find(|p| p.name == name).map(|p| (r, p)))
        .collect();
    let n = rows.len() as f64;
    let ratio = |v: &dyn Fn(&Point) -> f64| {
        let max = rows.iter().map(|(_, p)| v(p)).fold(0.0, f64::max);
        let mean = rows.iter().map(|(_, p)| v(p)).sum::<f64>() / n;
        (mean > 0.0).then(|| max / mean)
    };
    let seconds_imbalance = ratio(&|p| p.seconds);
    let flops_imbalance = ratio(&|p| p.flops.total);
    let by_time = seconds_imbalance.is_some();
    let slowest = rows
        .iter()
        .max_by(|a, b| {
            let key = |p: &Point| if by_time { p.seconds } else { p.flops.total };
            // Ties go to the lower rank.
            key(a.1).total_cmp(&key(b.1)).then(b.0.job.rank.cmp(&a.0.job.rank))
        })
        .filter(|(_, p)| if by_time { p.seconds > 0.0 } else { p.flops.total > 0.0 });
    let slowest_node_by_time = by_time.then(|| {
        let mut by_node: BTreeMap<&str, f64> = BTreeMap::new();
        for (r, p) in &rows {
            let t = by_node.entry(&r.job.node).or_insert(0.0);
            *t = t.max(p.seconds);
        }
        by_node
            .into_iter()
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(a.0)))
            .map(|(h, _)| h.to_string())
    });
    Balance {
        name: name.to_string(),
        ranks: rows.len() as u32,
        seconds_imbalance,
        flops_imbalance,
        slowest_rank: slowest.map(|(r, _)| r.job.rank),
        slowest_node: slowest.map(|(r, _)| r.job.node.clone()),
        slowest_node_by_time: slowest_node_by_time.flatten(),
    }
}

#[cfg(test)]
#[path = "merge_tests.rs"]
mod tests;
