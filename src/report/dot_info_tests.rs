use super::*;
use crate::report::PlotKind;

fn fixture(name: &str) -> View {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/reports")
        .join(name);
    let report = crate::report::read_report(&path).unwrap();
    View::new(vec![(name.into(), report)], None, PlotKind::All)
}

/// Every placed point of the main job (streams, stencil, SpMV, dgemm, normalizations, cos
/// chains at one and two threads) gets advice, and no paragraph is said of two points.
#[test]
fn advice_is_about_each_dot_and_never_repeated() {
    for name in ["main-job.json", "several.json"] {
        let view = fixture(name);
        let mut seen: Vec<(String, String)> = Vec::new();
        for (r, p, a) in view.points() {
            let adv = dot_advice(p, a, r.roofs_for(p.threads));
            if a.skipped.is_some() {
                assert!(adv.is_empty());
                continue;
            }
            if matches!(a.bound, Bound::Unknown) {
                continue;
            }
            assert!(!adv.is_empty(), "{name}: {} has no advice", p.name);
            for line in adv {
                if let Some((other, _)) = seen.iter().find(|(_, l)| *l == line) {
                    panic!("{name}: '{line}' said of both {other} and {}", p.name);
                }
                seen.push((p.name.clone(), line));
            }
        }
        assert!(seen.len() >= 6, "{name}: {} lines", seen.len());
    }
}

/// The first line names the roof and the point's fraction of it as the analysis computed,
/// and what helps at that distance.
#[test]
fn advice_reads_the_roof_and_the_distance_from_the_numbers() {
    let view = fixture("main-job.json");
    let mut kinds = (0, 0);
    for (r, p, a) in view.points() {
        let adv = dot_advice(p, a, r.roofs_for(p.threads));
        let Some(first) = adv.first() else { continue };
        match &a.bound {
            Bound::Memory { level } => {
                kinds.0 += 1;
                let name = level_label(level);
                assert!(first.contains(&format!("of the {name} roof")), "{}: {first}", p.name);
                let f = point_rate(p).unwrap() / a.get(a.primary.unwrap()).unwrap().gflops;
                assert!(first.starts_with(&format!("At {}", pct(f))), "{}: {first} (fraction {f})", p.name);
                if f >= AT_ROOF {
                    assert!(first.contains("only fewer"), "{first}");
                } else {
                    assert!(first.contains("unused"), "{first}");
                }
                assert!(adv.iter().any(|l| l.contains("AI must grow from")), "{}: {adv:?}", p.name);
            }
            Bound::Compute { .. } => {
                kinds.1 += 1;
                let roof = a.compute_roof.as_ref().unwrap();
                assert!(first.contains(&roof.label), "{}: {first} vs {}", p.name, roof.label);
                let f = point_rate(p).unwrap() / roof.gflops;
                if f >= AT_ROOF {
                    assert!(first.contains("only fewer flops or a lower precision"), "{first}");
                } else {
                    assert!(first.contains("is left at this ISA"), "{first}");
                }
            }
            _ => {}
        }
    }
    assert!(kinds.0 >= 4 && kinds.1 >= 2, "memory {} compute {}", kinds.0, kinds.1);
}

#[test]
fn dot_data_holds_the_hover_rows_and_is_safe_inside_a_script() {
    let view = fixture("main-job.json");
    let set = &view.by_threads()[0];
    let chart = super::super::chart::layout(set).unwrap();
    let text = chart_data(set, &chart);
    assert!(!text.contains("</"));
    let v: Value = serde_json::from_str(&text).unwrap();
    let dots = v["dots"].as_array().unwrap();
    let notes = v["notes"].as_array().unwrap();
    assert_eq!(dots.len(), chart.dots.len());
    // Each note once in the file, each point's notes by index, in its order.
    let mut unique: Vec<&Value> = notes.iter().collect();
    unique.dedup();
    assert_eq!(unique.len(), notes.len());
    let placed: Vec<&Point> = set
        .points()
        .filter(|(_, p, a)| super::super::chart::dot_position(p, a, chart.kind).is_some())
        .map(|(_, p, _)| p)
        .collect();
    for (d, p) in dots.iter().zip(&placed) {
        let told: Vec<&str> = d["notes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| notes[i.as_u64().unwrap() as usize].as_str().unwrap())
            .collect();
        assert_eq!(told, p.provenance.notes.iter().map(String::as_str).collect::<Vec<_>>());
    }
    assert!(
        notes.len() < placed.iter().map(|p| p.provenance.notes.len()).sum::<usize>(),
        "no note shared"
    );
    for (d, c) in dots.iter().zip(&chart.dots) {
        assert_eq!(d["n"], c.name.as_str());
        let keys: Vec<&str> = d["tip"].as_array().unwrap().iter().map(|kv| kv[0].as_str().unwrap()).collect();
        for want in ["GFLOP/s", "AI (flop/B)", "T", "roof", "of roof", "bound", "share of time"] {
            assert!(keys.contains(&want), "{}: no {want} in {keys:?}", c.name);
        }
        assert_eq!(d["bc"], c.bound);
        assert!(!d["adv"].as_array().unwrap().is_empty());
    }
}

/// One file, no network, under 1 MB for 100 points: the main job's one-thread points repeated
/// to 100 (names, work and time varied so no two are alike) with every roof of its machine.
#[test]
fn a_page_of_100_points_is_self_contained_and_under_a_megabyte() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports/main-job.json");
    let mut report = crate::report::read_report(&path).unwrap();
    let base: Vec<Point> = report
        .points
        .iter()
        .filter(|p| p.threads == 1 && p.flops.total > 0.0)
        .cloned()
        .collect();
    report.ceilings_by_threads.clear();
    report.points = (0..100)
        .map(|k| {
            let mut p = base[k % base.len()].clone();
            p.name = format!("{}#{k}", p.name);
            p.seconds *= 1.0 + k as f64 / 50.0;
            for s in &mut p.seconds_samples {
                *s *= 1.0 + k as f64 / 50.0;
            }
            p.derive();
            p
        })
        .collect();
    let view = View::new(vec![("hundred".into(), report)], None, PlotKind::All);
    let page = crate::report::html::render(&view, "Roofline report").unwrap();
    assert!(page.len() < 1_000_000, "{} bytes for 100 points", page.len());
    assert_eq!(page.matches("class=\"dot ").count(), 200, "100 dots in each of the two frames");
    for external in ["<script src", "<link", "src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!page.contains(external), "the page fetches something: {external}");
    }
}
