//! `roofline report merge JOB/` of 1,000 ranks (125 nodes of 8, two points each: the whole run
//! and a region), generated from a recorded rank file (tests/fixtures/jobs/): every file read
//! and the job merged (rank, node and job points, balance, roofs per node and rank). Target:
//! under 10 s. Peer: the plain merge of the same reports (points concatenated), read the same way.
//!
//! Run: `cargo bench --bench job_merge`.

use criterion::{Criterion, criterion_group, criterion_main};
use roofline::__private::jobs::{merge_job, merge_plain};
use roofline::{Environment, Report};
use std::path::{Path, PathBuf};

const RANKS: u32 = 1000;
const PER_NODE: u32 = 8;

/// The job directory: rank r on node `node{r / 8}`, local rank r % 8, work growing with r.
fn generate(dir: &Path) -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jobs/two-nodes/genoa-a-r0.json");
    let base: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(src).unwrap()).unwrap();
    (0..RANKS)
        .map(|r| {
            let mut doc = base.clone();
            let (host, local) = (format!("node{}", r / PER_NODE), r % PER_NODE);
            let job = &mut doc["environment"]["job"];
            job["rank"] = r.into();
            job["size"] = RANKS.into();
            job["local_rank"] = local.into();
            job["node"] = host.clone().into();
            job["dram"] = if local == 0 { "node" } else { "none" }.into();
            for p in doc["points"].as_array_mut().unwrap() {
                p["flops"]["total"] = (1000.0 + f64::from(r)).into();
                p["seconds"] = (1e-3 * (1.0 + f64::from(r % 7))).into();
                if local != 0 {
                    p["bytes"].as_object_mut().unwrap().remove("dram");
                }
            }
            let path = dir.join(format!("{host}-r{r}.json"));
            std::fs::write(&path, doc.to_string()).unwrap();
            path
        })
        .collect()
}

fn read_all(files: &[PathBuf]) -> Vec<(String, Report)> {
    files
        .iter()
        .map(|p| {
            (
                p.file_name().unwrap().to_string_lossy().into_owned(),
                roofline::read_report(p).unwrap(),
            )
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let files = generate(dir.path());
    let mut g = c.benchmark_group("merge_1000_ranks");
    g.sample_size(10);
    g.bench_function("job", |b| {
        b.iter(|| {
            let (r, _) = merge_job(read_all(&files), Environment::default()).unwrap();
            assert_eq!(r.points.len(), 2 * (RANKS as usize + 125 + 1));
        })
    });
    g.bench_function("plain_peer", |b| {
        b.iter(|| {
            let (r, _) = merge_plain(read_all(&files), Environment::default());
            assert_eq!(r.points.len(), 2 * RANKS as usize);
        })
    });
    g.finish();
}

criterion_group! {
    name = benches;
    // The plots need fonts a CI machine may lack; the figures are on stdout.
    config = Criterion::default().without_plots();
    targets = bench
}
criterion_main!(benches);
