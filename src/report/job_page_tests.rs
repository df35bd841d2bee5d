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

#[test]
fn report_show_judges_each_node_and_rank_by_its_own_roofs() {
    for name in ["two-nodes", "heterogeneous"] {
        let view = merged(name);
        let merged_report = &view.reports[0].report;
        let job = merged_report.job.as_ref().unwrap();
        let split = by_own_roofs(&view).unwrap();
        // Every point of the merged report lands in exactly one part.
        let mut seen: Vec<&str> = split
            .reports
            .iter()
            .flat_map(|r| r.report.points.iter().map(|p| p.name.as_str()))
            .collect();
        let mut all: Vec<&str> = merged_report.points.iter().map(|p| p.name.as_str()).collect();
        seen.sort();
        all.sort();
        assert_eq!(seen, all, "{name}");
        for part in &split.reports {
            let (want, tail) = if let Some(host) = part.name.strip_prefix("node ") {
                let n = job.nodes.iter().find(|n| n.host == host).unwrap();
                (n.roofs.as_ref(), format!(" @ node {host}"))
            } else if let Some(rank) = part.name.strip_prefix("rank ") {
                let k = job.ranks.iter().find(|k| k.rank.to_string() == rank).unwrap();
                (k.roofs.as_ref(), format!(" @ rank {rank}"))
            } else {
                assert_eq!(part.name, "job");
                assert!(part.report.points.iter().all(|p| !p.name.contains(" @ ")), "{name}");
                // A job over several microarchitectures: no roofs at all, none of one machine's.
                if job.heterogeneous {
                    assert!(
                        part.roofs.compute.is_empty() && part.roofs.bandwidth.is_empty(),
                        "{name}: {:?}",
                        part.roofs
                    );
                    continue;
                }
                (merged_report.ceilings.as_ref(), String::new())
            };
            assert_eq!(part.report.ceilings.as_ref(), want, "{name}: {}", part.name);
            assert!(part.report.points.iter().all(|p| p.name.ends_with(&tail)), "{name}: {}", part.name);
        }
        // A rank's roofs are its CPUs' share, not its node's: the parts differ where a node
        // has more CPUs than a rank.
        let rank0 = split.reports.iter().find(|r| r.name == "rank 0").unwrap();
        let node0 = split
            .reports
            .iter()
            .find(|r| r.name == format!("node {}", job.ranks[0].node))
            .unwrap();
        let peak = |r: &crate::schema::report::Roofs| r.bandwidth_gbs.get("l1_load").copied().unwrap_or(0.0);
        let (own, node) = (rank0.report.ceilings.as_ref().unwrap(), node0.report.ceilings.as_ref().unwrap());
        assert!(
            peak(own) < peak(node),
            "{name}: rank 0's L1 roof {} against its node's {}",
            peak(own),
            peak(node)
        );
    }
}

#[test]
fn the_job_table_has_a_section_per_node_and_rank_under_its_own_roofs() {
    let view = merged("two-nodes");
    let text = table_by_own_roofs(&view).unwrap();
    let job = view.reports[0].report.job.as_ref().unwrap();
    let heads: Vec<&str> = text.lines().filter(|l| l.starts_with("== ")).collect();
    assert_eq!(heads.len(), job.nodes.len() + job.ranks.len() + 1, "{heads:?}");
    // Each rank's section reads its own roofs line (one rank's CPUs), not its node's.
    for k in &job.ranks {
        let at = text.find(&format!("== rank {} ==\n", k.rank)).unwrap();
        let roofs = text[at..].lines().nth(1).unwrap();
        let want = k.roofs.as_ref().and_then(|r| r.threads).unwrap();
        assert!(roofs.contains(&format!(", {want} thread(s))")), "rank {}: {roofs}", k.rank);
    }
    assert!(table_by_own_roofs(&View::new(Vec::new(), None, PlotKind::All)).is_none());
}

/// A job of `n` ranks, 8 a node, made from the recorded rank 0 of `two-nodes` (each rank's
/// W and T its own), merged, as a view.
pub(super) fn generated(n: u32) -> View {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/jobs/two-nodes/genoa-a-r0.json");
    let base: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let inputs = (0..n)
        .map(|r| {
            let mut d = base.clone();
            let (host, local) = (format!("node{}", r / 8), r % 8);
            let job = &mut d["environment"]["job"];
            job["rank"] = r.into();
            job["size"] = n.into();
            job["local_rank"] = local.into();
            job["node"] = host.clone().into();
            job["dram"] = if local == 0 { "node" } else { "none" }.into();
            for p in d["points"].as_array_mut().unwrap() {
                p["flops"]["total"] = (1000.0 + f64::from(r)).into();
                p["seconds"] = (1e-3 * f64::from(1 + r % 7)).into();
                if local != 0 {
                    p["bytes"].as_object_mut().unwrap().remove("dram");
                }
            }
            let name = format!("{host}-r{r}.json");
            let report = crate::schema::Report::from_json(&d.to_string(), &name).unwrap();
            (name, report)
        })
        .collect();
    let (report, _) = crate::jobs::merge::merge_job(inputs, Environment::default()).unwrap();
    View::new(vec![("job".into(), report)], None, PlotKind::All)
}

#[test]
fn a_large_job_draws_its_rank_dots_on_demand() {
    let ranks = RANK_DOTS as u32 + 6;
    let view = generated(ranks);
    let page = crate::report::html::render(&view, "job").unwrap();
    // Drawn at once: the nodes and the job; the ranks behind a button, their section as text.
    let open = "<script type=\"text/html\" id=\"chart1-markup\">";
    let at = page.find(open).unwrap() + open.len();
    let text = &page[at..at + page[at..].find("</script>").unwrap()];
    let outside = page.replace(text, "");
    assert_eq!(outside.matches("<section class=\"chartbox\"").count(), 2);
    assert_eq!(outside.matches("<section class=\"later\" data-chart=\"chart1\">").count(), 1);
    assert!(outside.contains("<button type=\"button\" class=\"draw\" aria-expanded=\"false\""));
    assert!(!text.contains("</"), "the kept section must not end its script");
    // Read back as the page's script does, it is the section drawn at once for a small job.
    let markup = text.replace("<\\u002f", "</");
    let charts = views(&view);
    let rank_chart = &charts[1];
    assert!(rank_chart.on_demand && !charts[0].on_demand && !charts[2].on_demand);
    let drawn = crate::report::page::chart_section(&rank_chart.view, "chart1", Some(&rank_chart.heading)).unwrap();
    let data_at = drawn.find("<script type=\"application/json\" id=\"chart1-data\">").unwrap();
    assert_eq!(markup, format!("{}</section>", &drawn[..data_at]));
    // Its data in the page beside it (the advice cards read it drawn or not): every rank's
    // two points, and none of them again in the cards' own data.
    let names = chart_names(&page, "chart1");
    assert_eq!(names.len(), 2 * ranks as usize, "{names:?}");
    assert!(names.iter().all(|n| n.contains(" @ rank ")), "{names:?}");
    let cards_at = page.find("id=\"cards-data\">").unwrap();
    assert!(!page[cards_at..].split("</script>").next().unwrap().contains(" @ rank "));
    // A job of RANK_DOTS ranks still draws them at once.
    let small = crate::report::html::render(&generated(RANK_DOTS as u32), "job").unwrap();
    assert_eq!(small.matches("<section class=\"chartbox\"").count(), 3);
    assert!(!small.contains("class=\"later\""));
}
