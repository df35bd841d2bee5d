//! `Report::write(path)`: the format follows the extension (the CLI's `-o` path), the file is
//! written atomically, and an unknown extension is an error naming the known ones.

use roofline::{Backend, Session};
use roofline::{Report, read_report};

/// A session report with regions of random names and calls.
fn session_report() -> (Report, Vec<(String, u64)>) {
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos() as u64)
        .unwrap_or(11);
    let mut s = Session::new(Backend::Analytic).unwrap();
    let mut want = Vec::new();
    for k in 0..3u64 {
        let name = format!("region_{}", (seed.wrapping_mul(2654435761).wrapping_add(k * 97)) % 100_000);
        let calls = 1 + (seed >> (k * 3)) % 5;
        for c in 0..calls {
            let v = s.region(&name, || std::hint::black_box(c * 3 + k)).unwrap();
            assert_eq!(v, c * 3 + k);
        }
        want.push((name, calls));
    }
    (s.report(), want)
}

#[test]
fn report_write_follows_the_extension() {
    let dir = tempfile::tempdir().unwrap();
    let (report, want) = session_report();

    let json = dir.path().join("regions.json");
    report.write(&json).unwrap();
    let back = read_report(&json).unwrap();
    assert_eq!(back.points.len(), want.len());
    for (name, calls) in &want {
        let p = back
            .points
            .iter()
            .find(|p| &p.name == name)
            .unwrap_or_else(|| panic!("{name} missing"));
        assert_eq!(p.extra.to_json()["calls"], serde_json::json!(calls), "{name}");
    }

    let csv = dir.path().join("regions.CSV");
    report.write(&csv).unwrap();
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 1 + want.len(), "{text}");
    for (name, _) in &want {
        assert!(text.contains(name.as_str()), "{name} not in the CSV:\n{text}");
    }

    let txt = dir.path().join("regions.txt");
    report.write(&txt).unwrap();
    let table = std::fs::read_to_string(&txt).unwrap();
    assert!(want.iter().all(|(n, _)| table.contains(n.as_str())), "{table}");

    if cfg!(feature = "plot") {
        let svg = dir.path().join("regions.svg");
        report.write(&svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            text.trim_start().starts_with("<svg") || text.starts_with("<?xml"),
            "{}",
            &text[..80.min(text.len())]
        );
        let png = dir.path().join("regions.png");
        report.write(&png).unwrap();
        assert_eq!(&std::fs::read(&png).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
        let html = dir.path().join("regions.html");
        report.write(&html).unwrap();
        let text = std::fs::read_to_string(&html).unwrap();
        assert!(text.contains("<html") && text.contains("<svg"), "{}", &text[..200.min(text.len())]);
        assert!(want.iter().all(|(n, _)| text.contains(n.as_str())));
    }
    // Nothing but the written files: no temporary left behind.
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let expected: &[&str] = if cfg!(feature = "plot") {
        &[
            "regions.CSV",
            "regions.html",
            "regions.json",
            "regions.png",
            "regions.svg",
            "regions.txt",
        ]
    } else {
        &["regions.CSV", "regions.json", "regions.txt"]
    };
    assert_eq!(names, expected);
}

#[test]
fn report_write_refuses_unknown_extensions_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (report, _) = session_report();
    for bad in ["regions.xlsx", "regions"] {
        let path = dir.path().join(bad);
        let e = report.write(&path).unwrap_err();
        let msg = e.to_string();
        assert_eq!(e.exit_code(), 2);
        assert!(msg.contains(bad), "{msg}");
        for known in [".json", ".csv", ".svg", ".png", ".html"] {
            assert!(msg.contains(known), "{msg} does not name {known}");
        }
        assert!(!path.exists());
    }
    // A directory that does not exist: an error, nothing written.
    let missing = dir.path().join("no/such/dir/r.json");
    assert!(report.write(&missing).is_err());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[test]
#[cfg(not(feature = "plot"))]
fn report_write_without_plot_names_the_feature() {
    let dir = tempfile::tempdir().unwrap();
    let (report, _) = session_report();
    for ext in ["svg", "png", "html"] {
        let path = dir.path().join(format!("r.{ext}"));
        let msg = report.write(&path).unwrap_err().to_string();
        assert!(msg.contains("feature") && msg.contains("plot"), "{msg}");
        assert!(!path.exists());
    }
}
