use super::*;
use crate::schema::report::Environment;

/// A recorded job directory (tests/fixtures/jobs/NAME) merged, as a view.
fn merged(name: &str) -> View {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/jobs")
        .join(name);
    let mut files: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    files.sort();
    let inputs = files
        .iter()
        .map(|f| {
            let name = f.file_name().unwrap().to_string_lossy().into_owned();
            (name, crate::report::read_report(f).unwrap())
        })
        .collect();
    let (report, _) = crate::jobs::merge::merge_job(inputs, Environment::default()).unwrap();
    View::new(vec![("job".into(), report)], None, PlotKind::All)
}

fn chart_names(page: &str, id: &str) -> Vec<String> {
    let open = format!("id=\"{id}-data\">");
    let at = page.find(&open).unwrap() + open.len();
    let end = at + page[at..].find("</script>").unwrap();
    let v: serde_json::Value = serde_json::from_str(&page[at..end].replace("<\\/", "</")).unwrap();
    v["dots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["n"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn a_job_page_draws_nodes_ranks_and_the_job_and_names_the_slowest() {
    let view = merged("two-nodes");
    let page = crate::report::html::render(&view, "job").unwrap();
    assert!(
        page.contains("job of 4 rank(s) on 2 node(s) · launcher slurm · zen4"),
        "the job's line"
    );
    // Three charts: the nodes against a node's roofs, the ranks against a rank's, the job.
    assert_eq!(page.matches("<section class=\"chartbox\"").count(), 3);
    let nodes = chart_names(&page, "chart0");
    assert_eq!(nodes.len(), 4, "{nodes:?}");
    assert!(nodes.iter().all(|n| n.contains(" @ node genoa-")), "{nodes:?}");
    let ranks = chart_names(&page, "chart1");
    assert_eq!(ranks.len(), 8, "{ranks:?}");
    assert!(ranks.iter().all(|n| n.contains(" @ rank ")), "{ranks:?}");
    let job = chart_names(&page, "chart2");
    assert_eq!(job, ["rw_ompi", "work"]);
    assert!(page.contains("roofs of one node (genoa-a, 16 cores)") && page.contains("roofs of 2 node(s)"));
    // The balance: each region's imbalance with the slowest rank and node, as the merge
    // computed them; rank 3, the slowest, named as a straggler.
    let b = view.reports[0].report.job.as_ref().unwrap();
    for r in &b.regions {
        let row = format!(
            "<tr><td>{}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{}</td><td>{}</td></tr>",
            r.name,
            r.ranks,
            r.seconds_imbalance.unwrap(),
            r.flops_imbalance.unwrap(),
            r.slowest_rank.unwrap(),
            r.slowest_node_by_time.as_deref().unwrap()
        );
        assert!(page.contains(&row), "no balance row {row}");
    }
    assert_eq!(
        page.matches("<figure class=\"ranks\"").count(),
        b.regions.len(),
        "T per rank, per region"
    );
    assert!(
        page.contains("Stragglers (red, ≥ 10 % over the median): rank 3"),
        "the straggler named"
    );
    // Nodes with their roofs; ranks with where they ran.
    assert!(page.contains("<td>genoa-b</td><td>2-3</td><td>zen4</td><td>16</td><td>rank 2</td>"));
    assert!(page.contains("<h2>Ranks (4)</h2>") && page.contains("class=\"straggler\""));
}

#[test]
fn a_job_over_two_microarchitectures_draws_each_against_its_own_roofs() {
    let view = merged("heterogeneous");
    let page = crate::report::html::render(&view, "job").unwrap();
    assert!(page.contains("no one roof holds for it"), "the page says the job has no one roof");
    // One nodes chart per microarchitecture and the ranks; no job chart.
    assert_eq!(page.matches("<section class=\"chartbox\"").count(), 3);
    let a = chart_names(&page, "chart0");
    let b = chart_names(&page, "chart1");
    assert!(a.iter().all(|n| n.contains("@ node genoa-a")) && !a.is_empty(), "{a:?}");
    assert!(b.iter().all(|n| n.contains("@ node spr-b")) && !b.is_empty(), "{b:?}");
    assert!(chart_names(&page, "chart2").iter().all(|n| n.contains(" @ rank ")));
}

#[test]
fn rank_lists_and_bars() {
    assert_eq!(compact_list(&[0, 1, 2, 3, 8, 10, 11]), "0-3,8,10-11");
    assert_eq!(compact_list(&[]), "");
    // Rank 2 at 1.5x the median is marked; rank 1, 5 % over it, is not.
    let bars = rank_bars("r", &[(0, 1.0), (1, 1.05), (2, 1.5), (3, 1.0), (4, 1.0)]);
    let slow = bars.split("class=\"straggler\" d=\"").nth(1).unwrap();
    assert_eq!(slow.split('"').next().unwrap().matches('M').count(), 1);
    assert!(bars.contains("rank 2 (1.50 s, 1.50× the median)"), "{bars}");
}
