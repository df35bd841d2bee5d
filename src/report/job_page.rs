//! The page of a merged job (`report merge JOB/`): the same page as a report's, with the
//! job's own parts. Above the charts, one line on the job (ranks, nodes, launchers,
//! microarchitectures); the charts are the nodes' points against one node's roofs (one chart
//! per microarchitecture), the ranks' points against one rank's roofs (drawn when
//! the page opens up to [`RANK_DOTS`] ranks, when asked above) and the job's points against the job's
//! roofs (nodes × a node's; none for a job over several microarchitectures, said instead);
//! below them, the balance: per region the imbalance of T and W over the ranks, the slowest
//! rank and node named, T per rank as bars with the stragglers marked, then the nodes with
//! their roofs and the ranks.

use std::fmt::Write;

use super::markup::esc;
use super::{NamedReport, PlotKind, View};
use crate::schema::report::job::Job;
use crate::schema::report::{Point, Report, Roofs};
use crate::schema::units::{seconds, si, sig3};

/// Ranks drawn as dots when the page opens at most; a larger job's rank dots are drawn when
/// asked (a button between the nodes' chart and the job's); its ranks are in the table as
/// ever.
pub const RANK_DOTS: usize = 64;

/// One of a job's charts: its heading, its points and roofs, and whether it is drawn only
/// when asked.
pub struct JobChart {
    pub heading: String,
    pub view: View,
    pub on_demand: bool,
}

/// A rank at least this much slower than the median rank is a straggler.
pub const STRAGGLER: f64 = 1.10;

/// The job of a view of one merged job report.
pub fn job_of(view: &View) -> Option<(&NamedReport, &Job)> {
    match view.reports.as_slice() {
        [r] => r.report.job.as_deref().map(|j| (r, j)),
        _ => None,
    }
}

/// The line above the charts: ranks, nodes, launchers, microarchitectures.
pub fn summary_line(job: &Job) -> String {
    let mut parts = vec![
        format!("job of {} rank(s) on {} node(s)", job.ranks.len(), job.nodes.len()),
        format!("launcher {}", job.launchers.join(", ")),
    ];
    if !job.microarchitectures.is_empty() {
        parts.push(job.microarchitectures.join(" + "));
    }
    if !job.missing_ranks.is_empty() {
        parts.push(format!("{} rank(s) missing", job.missing_ranks.len()));
    }
    parts.join(" · ")
}

/// `NAME @ rank R`, `NAME @ node HOST` or the job's `NAME`.
enum Kind {
    Rank,
    Node,
    Job,
}

fn kind(p: &Point) -> Kind {
    if p.name.contains(" @ rank ") {
        Kind::Rank
    } else if p.name.contains(" @ node ") {
        Kind::Node
    } else {
        Kind::Job
    }
}

/// A view of some of the job's points against the given roofs, on the machine of a rank's
/// source (its model fills what the roofs lack).
fn sub_view(r: &NamedReport, keep: impl Fn(&Point) -> bool, roofs: Option<&Roofs>, source: Option<&str>) -> View {
    let mut report = Report::new(serde_json::Value::Null, r.report.environment.clone());
    report.points = r.report.points.iter().filter(|p| keep(p)).cloned().collect();
    report.ceilings = roofs.cloned();
    if let Some(s) = source.and_then(|s| r.report.sources.iter().find(|x| x.name == s)) {
        report.machine = s.machine.clone();
    }
    View::new(vec![(r.name.clone(), report)], None, PlotKind::All)
}

/// The merged job of `view` as one report per node, one per rank and one for the job, each
/// against its own roofs (a node's against the node's, a rank's against its CPUs' share):
/// what `report show` prints for a job, so that no rank is judged against the whole job's
/// roofs. None for a view that is not one merged job.
pub fn by_own_roofs(view: &View) -> Option<View> {
    let (r, job) = job_of(view)?;
    let source_on = |host: &str| job.ranks.iter().find(|k| k.node == host).map(|k| k.source.as_str());
    let part = |name: String, keep: &dyn Fn(&Point) -> bool, roofs: Option<&Roofs>, source: Option<&str>| {
        let v = sub_view(r, keep, roofs, source);
        v.reports.into_iter().next().map(|n| (name, n.report))
    };
    let mut parts = Vec::new();
    for n in &job.nodes {
        let tail = format!(" @ node {}", n.host);
        parts.extend(part(
            format!("node {}", n.host),
            &|p: &Point| p.name.ends_with(&tail),
            n.roofs.as_ref(),
            source_on(&n.host),
        ));
    }
    for k in &job.ranks {
        let tail = format!(" @ rank {}", k.rank);
        parts.extend(part(
            format!("rank {}", k.rank),
            &|p: &Point| p.name.ends_with(&tail),
            k.roofs.as_ref(),
            Some(&k.source),
        ));
    }
    parts.extend(part(
        "job".into(),
        &|p: &Point| matches!(kind(p), Kind::Job),
        r.report.ceilings.as_ref(),
        // Over several microarchitectures no one machine's roofs hold for the job.
        job.ranks.first().filter(|_| !job.heterogeneous).map(|k| k.source.as_str()),
    ));
    parts.retain(|(_, report)| !report.points.is_empty());
    Some(View::new(parts, None, PlotKind::All))
}

/// The text table of a merged job: a section per node, per rank and for the job, each under
/// its own roofs ([`by_own_roofs`]). None for a view that is not one merged job.
pub fn table_by_own_roofs(view: &View) -> Option<String> {
    let split = by_own_roofs(view)?;
    let sections: Vec<String> = split
        .reports
        .iter()
        .map(|r| {
            let one = View::new(vec![(r.name.clone(), r.report.clone())], None, PlotKind::All);
            format!("== {} ==\n{}", r.name, super::table::render(&one))
        })
        .collect();
    Some(sections.join("\n"))
}

/// The job's charts, each with its heading: nodes (per microarchitecture), ranks (drawn when
/// asked above [`RANK_DOTS`] ranks), the job.
pub fn views(view: &View) -> Vec<JobChart> {
    let Some((r, job)) = job_of(view) else { return Vec::new() };
    let source_on = |host: &str| job.ranks.iter().find(|k| k.node == host).map(|k| k.source.as_str());
    let mut out = Vec::new();
    // Nodes, one chart per microarchitecture, against its first node's roofs.
    let mut groups: Vec<(Option<String>, Vec<&str>)> = Vec::new();
    for n in &job.nodes {
        match groups.iter_mut().find(|(u, _)| *u == n.microarchitecture) {
            Some((_, hosts)) => hosts.push(&n.host),
            None => groups.push((n.microarchitecture.clone(), vec![&n.host])),
        }
    }
    for (uarch, hosts) in &groups {
        let first = job.nodes.iter().find(|n| n.host == hosts[0]);
        let in_group = |p: &Point| hosts.iter().any(|h| p.name.ends_with(&format!(" @ node {h}")));
        let v = sub_view(r, in_group, first.and_then(|n| n.roofs.as_ref()), source_on(hosts[0]));
        out.push(JobChart {
            heading: format!(
                "Nodes{} · roofs of one node ({}{})",
                uarch.as_deref().map(|u| format!(" ({u})")).unwrap_or_default(),
                hosts[0],
                first.and_then(|n| n.cores).map(|c| format!(", {c} cores")).unwrap_or_default()
            ),
            view: v,
            on_demand: false,
        });
    }
    // Ranks, against the first rank's roofs (its CPUs' share of its node); a large job's
    // drawn when asked.
    if let Some(first) = job.ranks.first() {
        let v = sub_view(r, |p| matches!(kind(p), Kind::Rank), first.roofs.as_ref(), Some(&first.source));
        out.push(JobChart {
            heading: format!("Ranks · roofs of one rank ({} CPU(s) of {})", first.cpus.len().max(1), first.node),
            view: v,
            on_demand: job.ranks.len() > RANK_DOTS,
        });
    }
    // The job, against nodes × a node's roofs; none over several microarchitectures.
    if !job.heterogeneous {
        let v = sub_view(
            r,
            |p| matches!(kind(p), Kind::Job),
            r.report.ceilings.as_ref(),
            job.ranks.first().map(|k| k.source.as_str()),
        );
        out.push(JobChart {
            heading: format!("Job (the nodes summed) · roofs of {} node(s)", job.nodes.len()),
            view: v,
            on_demand: false,
        });
    }
    out
}

/// The balance section (open) and the nodes and ranks (folded), below the charts.
pub fn sections(o: &mut String, view: &View) {
    let Some((r, job)) = job_of(view) else { return };
    o.push_str("<section class=\"balance\"><h2>Balance over the ranks</h2>");
    if job.heterogeneous {
        let _ = write!(
            o,
            "<p class=\"warn\">This job ran on {}: no one roof holds for it; each node is drawn against its own machine's roofs.</p>",
            esc(&job.microarchitectures.join(" and "))
        );
    }
    o.push_str(
        "<div class=\"scroll\"><table><tr><th>region</th><th>ranks</th><th>T max/mean</th><th>W max/mean</th><th>slowest rank</th><th>slowest node</th></tr>",
    );
    let ratio = |x: Option<f64>| x.map(|v| format!("{v:.2}")).unwrap_or_else(|| "-".into());
    for b in &job.regions {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&b.name),
            b.ranks,
            ratio(b.seconds_imbalance),
            ratio(b.flops_imbalance),
            b.slowest_rank.map(|k| k.to_string()).unwrap_or_else(|| "-".into()),
            esc(b.slowest_node_by_time.as_deref().or(b.slowest_node.as_deref()).unwrap_or("-"))
        );
    }
    o.push_str("</table></div><div class=\"plots\">");
    for b in &job.regions {
        let times: Vec<(u32, f64)> = job
            .ranks
            .iter()
            .filter_map(|k| {
                let name = format!("{} @ rank {}", b.name, k.rank);
                r.report.points.iter().find(|p| p.name == name).map(|p| (k.rank, p.seconds))
            })
            .collect();
        if !times.is_empty() {
            o.push_str(&rank_bars(&b.name, &times));
        }
    }
    o.push_str("</div></section>");
    // Nodes, with their roofs.
    o.push_str(
        "<details><summary><h2>Nodes</h2></summary><div class=\"scroll\"><table><tr><th>node</th><th>ranks</th><th>microarchitecture</th><th>cores</th><th>DRAM counted by</th><th>peak FP64 GFLOP/s</th><th>DRAM GB/s</th><th>L1 GB/s</th></tr>",
    );
    for n in &job.nodes {
        let roof = |f: &dyn Fn(&Roofs) -> Option<f64>| n.roofs.as_ref().and_then(f).map(sig3).unwrap_or_else(|| "-".into());
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&n.host),
            esc(&compact_list(&n.ranks)),
            esc(n.microarchitecture.as_deref().unwrap_or("-")),
            n.cores.map(|c| c.to_string()).unwrap_or_else(|| "-".into()),
            n.dram_counted_by.map(|k| format!("rank {k}")).unwrap_or_else(|| "-".into()),
            roof(&|r| {
                r.compute_gflops
                    .iter()
                    .filter(|(k, _)| k.starts_with("double"))
                    .map(|(_, v)| *v)
                    .reduce(f64::max)
            }),
            roof(&|r| r.bandwidth_traffic_gbs.get("dram").or(r.bandwidth_gbs.get("dram")).copied()),
            roof(&|r| r.bandwidth_gbs.get("l1").or(r.bandwidth_gbs.get("l1_load")).copied()),
        );
    }
    o.push_str("</table></div></details>");
    // Ranks: where each ran and its T per region.
    let _ = write!(
        o,
        "<details><summary><h2>Ranks ({})</h2></summary><div class=\"scroll\"><table><tr><th>rank</th><th>node</th><th>CPUs</th><th>DRAM</th>",
        job.ranks.len()
    );
    for b in &job.regions {
        let _ = write!(o, "<th>T {}</th><th>W {}</th>", esc(&b.name), esc(&b.name));
    }
    o.push_str("</tr>");
    for k in &job.ranks {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            k.rank,
            esc(&k.node),
            esc(&compact_list(&k.cpus)),
            esc(&format!("{:?}", k.dram).to_lowercase())
        );
        for b in &job.regions {
            let name = format!("{} @ rank {}", b.name, k.rank);
            match r.report.points.iter().find(|p| p.name == name) {
                Some(p) => {
                    let slow = b.slowest_rank == Some(k.rank);
                    let _ = write!(
                        o,
                        "<td{}>{}</td><td>{}</td>",
                        if slow { " class=\"straggler\"" } else { "" },
                        seconds(p.seconds),
                        si(p.flops.total)
                    );
                }
                None => o.push_str("<td>-</td><td>-</td>"),
            }
        }
        o.push_str("</tr>");
    }
    o.push_str("</table></div></details>");
}

/// `0-3,8` from `[0, 1, 2, 3, 8]`.
fn compact_list(xs: &[u32]) -> String {
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while i < xs.len() {
        let mut j = i;
        while j + 1 < xs.len() && xs[j + 1] == xs[j] + 1 {
            j += 1;
        }
        out.push(if j > i { format!("{}-{}", xs[i], xs[j]) } else { xs[i].to_string() });
        i = j + 1;
    }
    out.join(",")
}

/// T per rank of one region as bars, in rank order: the median dashed, the stragglers (at
/// least [`STRAGGLER`] × the median) red and named.
fn rank_bars(region: &str, times: &[(u32, f64)]) -> String {
    const W: f64 = 620.0;
    const H: f64 = 150.0;
    let (left, top, bottom) = (44.0, 22.0, 18.0);
    let mut sorted: Vec<f64> = times.iter().map(|t| t.1).collect();
    sorted.sort_by(f64::total_cmp);
    let median = sorted[sorted.len() / 2];
    let max = sorted.last().copied().unwrap_or(0.0).max(f64::MIN_POSITIVE);
    let width = (W - left - 6.0) / times.len() as f64;
    let y = |t: f64| H - bottom - (H - top - bottom) * t / max;
    let (mut normal, mut slow) = (String::new(), String::new());
    let mut stragglers: Vec<(u32, f64)> = Vec::new();
    for (k, &(rank, t)) in times.iter().enumerate() {
        let x = left + width * (k as f64 + 0.5);
        let is_slow = t >= STRAGGLER * median && t > median;
        let _ = write!(
            if is_slow { &mut slow } else { &mut normal },
            "M{x:.1} {:.1}V{:.1}",
            H - bottom,
            y(t)
        );
        if is_slow {
            stragglers.push((rank, t));
        }
    }
    stragglers.sort_by(|a, b| b.1.total_cmp(&a.1));
    let bar = (width * 0.8).clamp(0.5, 24.0);
    let mut o = String::new();
    let _ = write!(
        o,
        "<figure class=\"ranks\" data-region=\"{}\"><svg viewBox=\"0 0 {W} {H}\" role=\"img\" aria-label=\"T per rank of {}\" style=\"width:100%;min-width:520px;height:auto\" font-family=\"DejaVu Sans, sans-serif\" font-size=\"11\">",
        esc(region),
        esc(region)
    );
    let _ = write!(
        o,
        "<text x=\"{left}\" y=\"14\">{}: T per rank (max {}, median {})</text>",
        esc(region),
        esc(&seconds(max)),
        esc(&seconds(median))
    );
    let _ = write!(
        o,
        "<path d=\"{normal}\" stroke=\"#1f77b4\" stroke-width=\"{bar:.2}\"/><path class=\"straggler\" d=\"{slow}\" stroke=\"#d62728\" stroke-width=\"{bar:.2}\"/>"
    );
    let _ = write!(
        o,
        "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{m:.1}\" y2=\"{m:.1}\" stroke=\"#333\" stroke-dasharray=\"4 3\"/><line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#999\"/>",
        W - 6.0,
        W - 6.0,
        H - bottom,
        H - bottom,
        m = y(median)
    );
    let _ = write!(
        o,
        "<text x=\"{left}\" y=\"{:.1}\" fill=\"#555\">rank {} … {}</text></svg>",
        H - 4.0,
        times[0].0,
        times[times.len() - 1].0
    );
    let named: Vec<String> = stragglers
        .iter()
        .take(8)
        .map(|(k, t)| format!("rank {k} ({}, {:.2}× the median)", seconds(*t), t / median))
        .collect();
    let _ = write!(
        o,
        "<figcaption class=\"muted\">{}</figcaption></figure>",
        if named.is_empty() {
            format!("No straggler: every rank within {:.0} % of the median.", (STRAGGLER - 1.0) * 100.0)
        } else {
            format!(
                "Stragglers (red, ≥ {:.0} % over the median): {}{}",
                (STRAGGLER - 1.0) * 100.0,
                esc(&named.join(", ")),
                if stragglers.len() > named.len() {
                    format!(" and {} more", stragglers.len() - named.len())
                } else {
                    String::new()
                }
            )
        }
    );
    o
}

#[cfg(test)]
#[path = "job_page_tests.rs"]
mod tests;
