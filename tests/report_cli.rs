//! `roofline report` and `roofline plot` from the outside: bad input, exit codes, outputs.

use assert_cmd::Command;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports").join(name)
}

fn roofline() -> Command {
    Command::cargo_bin("roofline").unwrap()
}

fn read_json(p: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// Run with args; return (code, stdout, stderr).
fn run(args: &[&str]) -> (i32, String, String) {
    let out = roofline().args(args).output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_reports_exit_2_naming_file_and_problem() {
    let dir = tempfile::tempdir().unwrap();
    let good = std::fs::read_to_string(fixture("several.json")).unwrap();
    let cases: Vec<(&str, String, &str)> = vec![
        ("notjson.json", "{ this is not json".into(), "not JSON"),
        (
            "future.json",
            good.replace("roofline.report/1", "roofline.report/7"),
            "not supported",
        ),
        (
            "other.json",
            good.replace("roofline.report/1", "roofline.machine/1"),
            "is not roofline.report",
        ),
        (
            "negative.json",
            good.replacen("\"seconds_samples\": [", "\"seconds_samples\": [-1.0, ", 1),
            "impossible time",
        ),
        (
            "nan.json",
            good.replacen("\"seconds\": ", "\"seconds\": NaN, \"x\": ", 1),
            "not JSON",
        ),
    ];
    for (name, text, problem) in cases {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        let ps = p.to_str().unwrap();
        for args in [
            vec!["report", "show", ps],
            vec!["plot", ps, "-o", dir.path().join("x.svg").to_str().unwrap()],
        ] {
            let (code, _, err) = run(&args);
            assert_eq!(code, 2, "{name} {args:?}: {err}");
            assert!(err.contains(name) && err.contains(problem), "{name}: {err}");
            assert!(err.lines().count() <= 3, "one-line cause + hint: {err}");
        }
        // nothing half-written
        assert!(!dir.path().join("x.svg").exists());
    }
    let (code, _, err) = run(&["report", "show", dir.path().join("missing.json").to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("missing.json") && err.contains("cannot read"), "{err}");
}

#[test]
fn unwritable_or_missing_output_dir_exit_2_before_reading() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no/such/dir/plot.svg");
    // the report does not exist either: the output is checked first, so the error names it
    let (code, _, err) = run(&["plot", "nothere.json", "-o", missing.to_str().unwrap()]);
    assert_eq!(code, 2);
    assert!(err.contains("does not exist") && err.contains("plot.svg"), "{err}");
    // a file where a directory should be
    let file = dir.path().join("plain");
    std::fs::write(&file, "x").unwrap();
    let below = file.join("a.csv");
    let (code, _, _) = run(&[
        "report",
        "show",
        fixture("several.json").to_str().unwrap(),
        "-o",
        below.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    // unknown extension
    let (code, _, err) = run(&["report", "show", fixture("several.json").to_str().unwrap(), "-o", "x.doc"]);
    assert_eq!(code, 2);
    assert!(err.contains("unsupported extension"), "{err}");
    // merge into a missing directory writes nothing
    let out = dir.path().join("gone/all.json");
    let (code, _, _) = run(&[
        "report",
        "merge",
        fixture("rank0.json").to_str().unwrap(),
        fixture("rank1.json").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 2);
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
}

#[test]
fn skipped_points_listed_with_reason() {
    let (code, out, _) = run(&["report", "show", fixture("several.json").to_str().unwrap()]);
    assert_eq!(code, 0);
    let line = out
        .lines()
        .find(|l| l.contains("not_timed") && l.contains(':'))
        .expect("skipped point listed");
    assert!(line.contains("zero time"), "{line}");
    // placed points have a bound and advice
    assert!(out.contains("memory (DRAM)"), "{out}");
    assert!(out.contains("overhead"), "{out}");
}

#[test]
fn merge_keeps_sources_machine_env_host_rank() {
    let dir = tempfile::tempdir().unwrap();
    let all = dir.path().join("all.json");
    let (code, _, err) = run(&[
        "report",
        "merge",
        fixture("rank0.json").to_str().unwrap(),
        fixture("rank1.json").to_str().unwrap(),
        "-o",
        all.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let v = read_json(&all);
    let sources = v["sources"].as_array().unwrap();
    assert_eq!(sources.len(), 2);
    for (i, s) in sources.iter().enumerate() {
        let orig = read_json(&fixture(&format!("rank{i}.json")));
        assert_eq!(s["machine"], orig["machine"]);
        assert_eq!(s["environment"]["host"], orig["environment"]["host"]);
        assert_eq!(s["environment"]["rank"], i as u64);
    }
    let points = v["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    for p in points {
        let src = p["source"].as_str().unwrap();
        assert!(sources.iter().any(|s| s["name"] == src), "{src}");
    }
    // merging the merged set with another report: sources flattened, not nested
    let all2 = dir.path().join("all2.json");
    let (code, _, _) = run(&[
        "report",
        "merge",
        fixture("merged.json").to_str().unwrap(),
        fixture("several.json").to_str().unwrap(),
        "-o",
        all2.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let v2 = read_json(&all2);
    assert_eq!(v2["sources"].as_array().unwrap().len(), 3);
    assert_eq!(
        v2["points"].as_array().unwrap().len(),
        2 + read_json(&fixture("several.json"))["points"].as_array().unwrap().len()
    );
    // the merged file is itself a valid report
    let (code, _, _) = run(&["report", "show", all2.to_str().unwrap()]);
    assert_eq!(code, 0);
}

/// Parse RFC 4180 CSV (quotes, doubled quotes, commas inside quotes).
fn parse_csv(text: &str) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    let mut row = Vec::new();
    let mut cell = String::new();
    let mut quoted = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => cell.push(c),
            (false, '"') => quoted = true,
            (false, ',') => row.push(std::mem::take(&mut cell)),
            (false, '\n') => {
                row.push(std::mem::take(&mut cell));
                rows.push(std::mem::take(&mut row));
            }
            (false, c) => cell.push(c),
        }
    }
    rows
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    if n % 2 == 1 { s[n / 2] } else { 0.5 * (s[n / 2 - 1] + s[n / 2]) }
}

#[test]
fn csv_round_trips_the_point_table() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("points.csv");
    let (code, _, err) = run(&[
        "report",
        "show",
        fixture("several.json").to_str().unwrap(),
        "-o",
        csv.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let rows = parse_csv(&std::fs::read_to_string(&csv).unwrap());
    let header = &rows[0];
    let col = |name: &str| header.iter().position(|h| h == name).unwrap_or_else(|| panic!("no column {name}"));
    let src = read_json(&fixture("several.json"));
    let points = src["points"].as_array().unwrap();
    assert_eq!(rows.len() - 1, points.len());
    for (row, p) in rows[1..].iter().zip(points) {
        assert_eq!(row.len(), header.len());
        assert_eq!(row[col("name")], p["name"].as_str().unwrap());
        let f = |name: &str| row[col(name)].parse::<f64>().unwrap();
        let flops = p["flops"]["total"].as_f64().unwrap();
        assert_eq!(f("flops"), flops);
        let samples: Vec<f64> = p["seconds_samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_f64().unwrap())
            .collect();
        let t = median(&samples);
        assert_eq!(f("seconds"), t);
        for (lvl, b) in p["bytes"].as_object().unwrap() {
            assert_eq!(f(&format!("bytes_{lvl}")), b.as_f64().unwrap());
        }
        if t > 0.0 {
            assert!((f("gflops") - flops / t / 1e9).abs() <= 1e-9 * flops / t / 1e9);
            let core = p["bytes"]["core"].as_f64().unwrap() + p["bytes"].get("stack").and_then(|s| s.as_f64()).unwrap_or(0.0);
            assert!((f("ai_core") - flops / core).abs() < 1e-12 * flops / core);
            assert!(!row[col("bound")].is_empty());
            assert!(row[col("skipped")].is_empty());
        } else {
            assert!(row[col("skipped")].contains("zero time"));
        }
    }
}

#[test]
fn json_round_trips_and_fills_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.json");
    let (code, _, _) = run(&[
        "report",
        "show",
        fixture("several.json").to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let back = roofline::read_report(&out).unwrap();
    let orig = roofline::read_report(&fixture("several.json")).unwrap();
    assert_eq!(back.points.len(), orig.points.len());
    for (a, b) in back.points.iter().zip(&orig.points) {
        assert_eq!(a.name, b.name);
        assert_eq!(a.flops, b.flops);
        assert_eq!(a.bytes, b.bytes);
        assert_eq!(a.seconds_samples, b.seconds_samples);
        assert_eq!(a.bound.is_some(), b.seconds > 0.0, "{}", a.name);
    }
    let triad = back.points.iter().find(|p| p.name == "triad").unwrap();
    assert_eq!(triad.bound, Some(roofline::Bound::Memory { level: "dram".into() }));
    // --json prints the same document
    let (code, stdout, _) = run(&["report", "show", fixture("several.json").to_str().unwrap(), "--json"]);
    assert_eq!(code, 0);
    let printed = roofline::Report::from_json(&stdout, "stdout").unwrap();
    assert_eq!(printed, back);
}

#[test]
fn svg_has_every_roof_label_and_one_marker_per_point() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("p.svg");
    let (code, _, err) = run(&[
        "plot",
        fixture("several.json").to_str().unwrap(),
        "--kind",
        "carm",
        "-o",
        svg.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let text = std::fs::read_to_string(&svg).unwrap();
    let src = read_json(&fixture("several.json"));
    for (lvl, g) in src["ceilings"]["bandwidth_gbs"].as_object().unwrap() {
        let label = format!("{} {} GB/s", lvl.to_uppercase(), roofline::__private::sig3(g.as_f64().unwrap()));
        assert!(text.contains(&label), "missing roof label {label}");
    }
    for (key, g) in src["ceilings"]["compute_gflops"].as_object().unwrap() {
        let value = format!("{} GFLOP/s", roofline::__private::sig3(g.as_f64().unwrap()));
        let fma = if key.ends_with(".fma") { "FMA" } else { "no-FMA" };
        assert!(text.contains(&format!("{fma} {value}")), "missing compute roof label for {key}");
    }
    // placeable points with core bytes: all but the untimed one
    let placeable = src["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["seconds"].as_f64().unwrap() > 0.0)
        .count();
    assert_eq!(text.matches("<circle").count(), placeable);
    for p in src["points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["seconds"].as_f64().unwrap() > 0.0)
    {
        // plotters writes each text element's content on its own line
        assert!(
            text.contains(&format!(">\n{}\n</text>", p["name"].as_str().unwrap())),
            "no label for {}",
            p["name"]
        );
    }
}

#[test]
fn png_and_html_outputs() {
    let dir = tempfile::tempdir().unwrap();
    let png = dir.path().join("p.png");
    let (code, _, err) = run(&[
        "plot",
        fixture("before.json").to_str().unwrap(),
        fixture("after.json").to_str().unwrap(),
        "-o",
        png.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let bytes = std::fs::read(&png).unwrap();
    assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR: width of three panels side by side, not a blank few bytes
    let w = u32::from_be_bytes(bytes[16..20].try_into().unwrap());
    assert_eq!(w, roofline::__private::plot::plot_size(roofline::PlotKind::All).0);
    assert!(bytes.len() > 20_000);
    let html = dir.path().join("r.html");
    let (code, _, _) = run(&[
        "plot",
        fixture("before.json").to_str().unwrap(),
        fixture("after.json").to_str().unwrap(),
        "-o",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let page = std::fs::read_to_string(&html).unwrap();
    // Self-contained: its script inline, nothing fetched.
    assert!(!page.contains("<script src") && !page.contains("<link"));
    assert_eq!(
        page.matches("<svg id=\"chart0\" class=\"chart\"").count(),
        1,
        "the interactive chart"
    );
    assert_eq!(page.matches("<svg").count(), 4, "the chart, then one plot per view");
    assert!(page.contains("name=\"viewport\""));
    assert!(page.contains("Example 16-Core Processor") && page.contains("normalize") && page.contains("softmax"));
    // no temp files left beside the outputs
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
}
