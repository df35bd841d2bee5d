//! Any bytes as a report: parsing either fails with an error or yields a report whose every
//! view (model, table, CSV, JSON, SVG) renders without panicking.
#![no_main]
use libfuzzer_sys::fuzz_target;
use roofline::__private::{plot, views};
use roofline::{PlotKind, Report, View};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let Ok(report) = Report::from_json(text, "fuzz.json") else { return };
    if report.points.len() > 64 {
        return;
    }
    let view = View::new(vec![("fuzz".into(), report)], None, PlotKind::All);
    let _ = views::render(&view);
    let _ = views::to_csv(&view);
    let _ = views::document(&view).to_json();
    let _ = plot::svg(&view);
});
