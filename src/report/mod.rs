//! Reports: the one schema and its views, one file per output format behind one trait
//! ([`Exporter`], like hyperfine's `export/`): `table`, `json`, `csv`, `plot` (SVG, PNG),
//! `html`. A [`View`] is what every exporter reads: the reports, their roofs and the model's
//! analysis of every point, computed once.

#[cfg(feature = "plot")]
pub mod bundle;
#[cfg(feature = "plot")]
pub mod chart;
pub mod csv;
#[cfg(feature = "plot")]
pub mod dot_info;
#[cfg(feature = "plot")]
pub mod energy_chart;
#[cfg(feature = "plot")]
pub mod html;
#[cfg(any(feature = "analysis", feature = "plot"))]
pub mod instruction;
#[cfg(feature = "plot")]
pub mod job_page;
pub mod json;
#[cfg(feature = "plot")]
pub mod labels;
#[cfg(feature = "plot")]
pub mod markup;
pub mod merge;
#[cfg(feature = "plot")]
pub mod page;
#[cfg(feature = "plot")]
pub mod plot;
pub mod table;
pub mod tables;

pub use crate::schema::{Bound, Environment, Point, Report};

use std::path::Path;

use crate::error::{Error, Result};
use crate::model::{self, Analysis, RoofSet};

/// Which roofline view(s) a plot draws.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlotKind {
    /// Cache-aware: core-side AI against every level's roof.
    Carm,
    /// Classic: DRAM AI against the DRAM roof.
    Dram,
    /// One marker per level (each level's own AI), joined by a line.
    Hierarchical,
    /// The three panels side by side.
    All,
}

impl PlotKind {
    /// The single panels this kind draws.
    pub fn panels(self) -> Vec<PlotKind> {
        match self {
            PlotKind::All => vec![PlotKind::Carm, PlotKind::Dram, PlotKind::Hierarchical],
            k => vec![k],
        }
    }
}

/// One report with the name its points are shown under (file name or merge source).
#[derive(Debug, Clone)]
pub struct NamedReport {
    /// The name its points are shown under.
    pub name: String,
    /// The report.
    pub report: Report,
    /// The roofs its points were analysed against.
    pub roofs: RoofSet,
    /// Roofs at other thread counts (`Report::ceilings_by_threads`): the points of that
    /// thread count were analysed against these.
    pub roofs_by_threads: Vec<RoofSet>,
    /// One analysis per point, in order.
    pub analyses: Vec<Analysis>,
}

impl NamedReport {
    /// The roofs a point of `threads` threads was analysed against.
    pub fn roofs_for(&self, threads: u32) -> &RoofSet {
        self.roofs_by_threads
            .iter()
            .find(|s| s.threads == Some(threads))
            .unwrap_or(&self.roofs)
    }
}

/// What every exporter reads.
#[derive(Debug, Clone)]
pub struct View {
    /// The reports, each with its name and its points' analyses.
    pub reports: Vec<NamedReport>,
    /// The roofs drawn (the first report's, or `--ceilings`).
    pub roofs: RoofSet,
    /// Which panels a plot draws.
    pub kind: PlotKind,
}

impl View {
    /// Analyse every point of every report. `ceilings` (from `--ceilings FILE`) overrides the
    /// reports' own roofs; theoretical roofs fill what neither has.
    pub fn new(reports: Vec<(String, Report)>, ceilings: Option<&RoofSet>, kind: PlotKind) -> View {
        let reports: Vec<NamedReport> = reports
            .into_iter()
            .map(|(name, mut report)| {
                let roofs = RoofSet::for_report(&report, ceilings);
                // (`--ceilings` replaces every set: it holds one thread count.)
                let roofs_by_threads: Vec<RoofSet> = match ceilings {
                    Some(_) => Vec::new(),
                    None => report
                        .ceilings_by_threads
                        .iter()
                        .map(|r| RoofSet::for_threads(&report, r))
                        .collect(),
                };
                let analyses = model::annotate_by_threads(&mut report, &roofs, &roofs_by_threads);
                report.ceilings = (!roofs.is_empty()).then(|| roofs.to_roofs());
                report.ceilings_by_threads = roofs_by_threads.iter().map(RoofSet::to_roofs).collect();
                NamedReport {
                    name,
                    report,
                    roofs,
                    roofs_by_threads,
                    analyses,
                }
            })
            .collect();
        let roofs = reports.first().map(|r| r.roofs.clone()).unwrap_or_default();
        View { reports, roofs, kind }
    }

    /// One view per roof set of a report with several thread counts (the main job's one thread
    /// and every core): the points of that thread count against its roofs; this view alone
    /// when it has one set.
    pub fn by_threads(&self) -> Vec<View> {
        let mut counts: Vec<Option<u32>> = vec![self.roofs.threads];
        for r in &self.reports {
            for s in &r.roofs_by_threads {
                if !counts.contains(&s.threads) {
                    counts.push(s.threads);
                }
            }
        }
        if counts.len() < 2 {
            return vec![self.clone()];
        }
        counts
            .into_iter()
            .map(|t| {
                let reports: Vec<NamedReport> = self
                    .reports
                    .iter()
                    .map(|r| {
                        let own = r.roofs_by_threads.iter().find(|s| s.threads == t);
                        // The report's main set takes the points no other set claims.
                        let claimed = |p: &Point| r.roofs_by_threads.iter().any(|s| s.threads == Some(p.threads));
                        let keep = |p: &Point| match own {
                            Some(_) => Some(p.threads) == t,
                            None => !claimed(p),
                        };
                        let (points, analyses): (Vec<Point>, Vec<Analysis>) = r
                            .report
                            .points
                            .iter()
                            .zip(&r.analyses)
                            .filter(|(p, _)| keep(p))
                            .map(|(p, a)| (p.clone(), a.clone()))
                            .unzip();
                        let mut report = r.report.clone();
                        report.points = points;
                        NamedReport {
                            name: r.name.clone(),
                            report,
                            roofs: own.cloned().unwrap_or_else(|| r.roofs.clone()),
                            roofs_by_threads: Vec::new(),
                            analyses,
                        }
                    })
                    .collect();
                let roofs = reports.first().map(|r| r.roofs.clone()).unwrap_or_default();
                View {
                    reports,
                    roofs,
                    kind: self.kind,
                }
            })
            .collect()
    }

    /// Every point with its report and analysis.
    pub fn points(&self) -> impl Iterator<Item = (&NamedReport, &Point, &Analysis)> {
        self.reports
            .iter()
            .flat_map(|r| r.report.points.iter().zip(&r.analyses).map(move |(p, a)| (r, p, a)))
    }

    /// Points that cannot be placed, with the reason: `(report, point, why)`.
    pub fn skipped(&self) -> Vec<(&str, &str, &str)> {
        self.points()
            .filter_map(|(r, p, a)| a.skipped.as_deref().map(|why| (r.name.as_str(), p.name.as_str(), why)))
            .collect()
    }

    /// The name a point is shown under: its merge source when it has one and several
    /// reports or sources are shown, else its own name.
    pub fn point_label(&self, r: &NamedReport, p: &Point) -> String {
        let sources = r.report.sources.len();
        match &p.source {
            Some(s) if sources > 1 => format!("{} [{}]", p.name, short_source(s)),
            _ => p.name.clone(),
        }
    }
}

fn short_source(s: &str) -> &str {
    let file = s.rsplit('/').next().unwrap_or(s);
    file.strip_suffix(".json").unwrap_or(file)
}

/// One output format.
pub trait Exporter {
    /// The whole file's bytes (written atomically by the caller).
    fn export(&self, view: &View) -> Result<Vec<u8>>;
}

/// The extensions [`write_view`] and [`Report::write`] know (`htm` too, as `html`).
pub const WRITE_EXTENSIONS: &[&str] = &["json", "csv", "txt", "svg", "png", "html"];

/// The exporter for a file extension (`svg`, `png`, `html`, `csv`, `json`, `txt`, lower
/// case); an unknown one is an error naming the known ones.
pub fn exporter_for(ext: &str) -> Result<Box<dyn Exporter>> {
    match ext {
        #[cfg(feature = "plot")]
        "svg" => Ok(Box::new(energy_chart::SvgExporter)),
        #[cfg(feature = "plot")]
        "png" => Ok(Box::new(plot::PngExporter)),
        #[cfg(feature = "plot")]
        "html" | "htm" => Ok(Box::new(html::HtmlExporter)),
        #[cfg(not(feature = "plot"))]
        "svg" | "png" | "html" | "htm" => Err(Error::unavailable(
            format!(".{ext} reports are drawn by the `plot` feature, which this build of roofline leaves out"),
            "enable it (`roofline = { features = [\"plot\"] }`, on by default), or write .json, .csv or .txt",
        )),
        "csv" => Ok(Box::new(csv::CsvExporter)),
        "json" => Ok(Box::new(json::JsonExporter)),
        "txt" => Ok(Box::new(table::TableExporter)),
        _ => Err(Error::input(
            format!("unknown report extension '.{ext}'"),
            format!(
                "name the file with one of {}",
                WRITE_EXTENSIONS.iter().map(|e| format!(".{e}")).collect::<Vec<_>>().join(", ")
            ),
        )),
    }
}

/// The lower-case extension of `path` ("" when it has none).
fn extension(path: &Path) -> String {
    path.extension()
        .and_then(|e| e.to_str())
        .map(|e| e.to_ascii_lowercase())
        .unwrap_or_default()
}

/// Write `view` to `path` in the format its extension names, atomically (nothing
/// half-written on failure): what every `-o FILE` of the CLI does.
pub fn write_view(view: &View, path: &Path) -> Result<()> {
    let exporter = exporter_for(&extension(path)).map_err(|e| with_path(e, path))?;
    let data = exporter.export(view)?;
    crate::util::write_atomic(path, &data)
}

fn with_path(e: Error, path: &Path) -> Error {
    match e {
        Error::Input { cause, hint } => Error::input(format!("{}: {cause}", path.display()), hint),
        Error::Unavailable { cause, hint } => Error::unavailable(format!("{}: {cause}", path.display()), hint),
        e => e,
    }
}

impl Report {
    /// Write this report to `path`, the format chosen by its extension as the CLI's `-o`
    /// does (`.json`, `.csv`, `.txt`, `.svg`, `.png`, `.html`), atomically. The report is
    /// analysed against its own roofs (theoretical ones where it has none), as
    /// `roofline report show` does.
    pub fn write(&self, path: &Path) -> Result<()> {
        let name = path.file_stem().and_then(|s| s.to_str()).unwrap_or("report").to_string();
        let view = View::new(vec![(name, self.clone())], None, PlotKind::All);
        write_view(&view, path)
    }
}

/// Read and validate a report file; errors name the file and the problem.
#[cfg(feature = "analysis")]
pub fn read_report(path: &Path) -> Result<Report> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::input(
            format!("{origin}: cannot read ({})", e.kind()),
            "pass a report written by `roofline … -o report.json`",
        )
    })?;
    Report::from_json(&text, &origin)
}

/// Read a `roofline.ceilings/1` file.
#[cfg(feature = "analysis")]
pub fn read_ceilings(path: &Path, threads: Option<u32>) -> Result<RoofSet> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| {
        Error::input(
            format!("{origin}: cannot read ({})", e.kind()),
            "pass a file written by `roofline ceilings -o ceilings.json`",
        )
    })?;
    RoofSet::from_ceilings_json(&text, &origin, threads)
}
