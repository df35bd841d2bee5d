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
        // The rows' names by index into the shared `keys`.
        let keys: Vec<&str> = d["tip"]
            .as_array()
            .unwrap()
            .iter()
            .map(|kv| v["keys"][kv[0].as_u64().unwrap() as usize].as_str().unwrap())
            .collect();
        for want in ["GFLOP/s", "AI (flop/B)", "T", "roof", "of roof", "bound", "share of time"] {
            assert!(keys.contains(&want), "{}: no {want} in {keys:?}", c.name);
        }
        assert_eq!(d["bc"], c.bound);
        assert!(!d["adv"].as_array().unwrap().is_empty());
    }
}

/// The main job's one-thread points repeated to `n` (names, work and time varied so no two
/// are alike, the dots spread over the chart) with every roof of its machine.
fn many_points(n: usize) -> View {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports/main-job.json");
    let mut report = crate::report::read_report(&path).unwrap();
    let base: Vec<Point> = report
        .points
        .iter()
        .filter(|p| p.threads == 1 && p.flops.total > 0.0)
        .cloned()
        .collect();
    report.ceilings_by_threads.clear();
    report.points = (0..n)
        .map(|k| {
            let mut p = base[k % base.len()].clone();
            p.name = format!("{}#{k}", p.name);
            let t = 1.0 + (k % 97) as f64 / 50.0;
            p.seconds *= t;
            for s in &mut p.seconds_samples {
                *s *= t;
            }
            p.flops.total *= 1.0 + (k % 89) as f64 / 40.0;
            for v in p.flops.by_class.values_mut() {
                *v *= 1.0 + (k % 89) as f64 / 40.0;
            }
            p.derive();
            p
        })
        .collect();
    View::new(vec![("many".into(), report)], None, PlotKind::All)
}

/// One file, no network, under 1 MB for 100 points.
#[test]
fn a_page_of_100_points_is_self_contained_and_under_a_megabyte() {
    let view = many_points(100);
    let page = crate::report::html::render(&view, "Roofline report").unwrap();
    assert!(page.len() < 1_000_000, "{} bytes for 100 points", page.len());
    assert_eq!(page.matches("class=\"dot ").count(), 200, "100 dots in each of the two frames");
    for external in ["<script src", "<link", "src=\"http", "href=\"http", "url(http", "@import"] {
        assert!(!page.contains(external), "the page fetches something: {external}");
    }
}

/// The text of a page's `<script type="application/json" id="ID">`, parsed.
fn script_json(page: &str, id: &str) -> Value {
    let open = format!("id=\"{id}\">");
    let at = page.find(&open).unwrap_or_else(|| panic!("no {id}")) + open.len();
    let end = at + page[at..].find("</script>").unwrap();
    serde_json::from_str(&page[at..end].replace("<\\/", "</")).unwrap()
}

fn text_bytes(v: &Value) -> usize {
    match v {
        Value::String(s) => s.len(),
        Value::Array(a) => a.iter().map(text_bytes).sum(),
        Value::Object(m) => m.values().map(text_bytes).sum(),
        _ => 0,
    }
}

/// A page grows by what a point needs: each point more costs at most a quarter more than its
/// own text as the page shows it (name, hover and panel figures, advice, its table row) and
/// 48 bytes for each mark drawn for it (a dot and an error bar in each of the chart's two
/// frames; in each of the other views' plots a marker per memory level and an error bar).
/// Markup repeated per point (cards, table rows, plotters' attributes) would break it.
#[test]
fn a_page_grows_by_what_a_point_needs() {
    let (small, large) = (200, 1000);
    let page_small = crate::report::html::render(&many_points(small), "Roofline report").unwrap();
    let view = many_points(large);
    let page = crate::report::html::render(&view, "Roofline report").unwrap();
    let per_point = (page.len() - page_small.len()) as f64 / (large - small) as f64;
    let data = script_json(&page, "chart0-data");
    let table = script_json(&page, "points-data");
    let dots = data["dots"].as_array().unwrap();
    assert_eq!(dots.len(), large);
    let figures = page.matches("<figure>").count();
    let mut need = 0usize;
    for (d, (_, p, a)) in dots.iter().zip(view.points()) {
        let text = text_bytes(&d["n"])
            + d["tip"].as_array().unwrap().iter().map(|kv| text_bytes(&kv[1])).sum::<usize>()
            + d["more"].as_array().unwrap().iter().map(|kv| text_bytes(&kv[1])).sum::<usize>()
            + text_bytes(&d["adv"]);
        assert_eq!(d["n"], p.name.as_str());
        let marks = 2 * 2 + figures * (1 + a.ai.len());
        need += text + 48 * marks;
    }
    let rows = table["r"].as_array().unwrap();
    assert_eq!(rows.len(), large);
    need += rows.iter().map(text_bytes).sum::<usize>();
    let need = need as f64 / large as f64;
    eprintln!(
        "{per_point:.0} bytes per point, {need:.0} needed ({} bytes for {large})",
        page.len()
    );
    assert!(per_point <= 1.25 * need, "{per_point:.0} bytes per point; it needs {need:.0}");
}
