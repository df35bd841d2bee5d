//! The profile's output directory: `index.html`, `roofline.svg` and `report.json`, each
//! written atomically (temp file + rename) after all of them rendered, so a failure leaves
//! the previous bundle (or nothing) rather than half of a new one.

use std::path::{Path, PathBuf};

use super::{PlotKind, Report, View, html, plot};
use crate::error::{Error, Result};
use crate::util::write_atomic;

pub const INDEX: &str = "index.html";
pub const SVG: &str = "roofline.svg";
pub const JSON: &str = "report.json";

/// Check (before measuring) that `dir` exists or can be created in a writable parent.
pub fn check_dir(dir: &Path) -> Result<()> {
    if dir.is_dir() {
        let probe = dir.join(format!(".roofline-probe-{}", std::process::id()));
        return match std::fs::File::create(&probe) {
            Ok(_) => {
                let _ = std::fs::remove_file(&probe);
                Ok(())
            }
            Err(e) => Err(Error::input(
                format!("{}: cannot write there ({})", dir.display(), e.kind()),
                "choose a writable directory with -o DIR",
            )),
        };
    }
    if dir.exists() {
        return Err(Error::input(
            format!("{}: exists and is not a directory", dir.display()),
            "choose another -o DIR",
        ));
    }
    let parent = match dir.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !parent.is_dir() {
        return Err(Error::input(
            format!("{}: parent directory {} does not exist", dir.display(), parent.display()),
            "create it first or choose another -o DIR",
        ));
    }
    let probe = parent.join(format!(".roofline-probe-{}", std::process::id()));
    match std::fs::File::create(&probe) {
        Ok(_) => {
            let _ = std::fs::remove_file(&probe);
            Ok(())
        }
        Err(e) => Err(Error::input(
            format!("{}: cannot create it in {} ({})", dir.display(), parent.display(), e.kind()),
            "choose a writable directory with -o DIR",
        )),
    }
}

/// Render everything, then write the three files into `dir` (created if missing).
/// Returns the view (for the terminal summary) and the paths written.
pub fn write_bundle(report: Report, dir: &Path, name: &str) -> Result<(View, Vec<PathBuf>)> {
    let view = View::new(vec![(name.to_string(), report)], None, PlotKind::Carm);
    let page = html::render(&view, "Roofline profile")?;
    let svg = plot::svg(&View {
        kind: PlotKind::All,
        ..view.clone()
    })?;
    let json = super::json::document(&view).to_json() + "\n";
    std::fs::create_dir_all(dir).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
    let mut written = Vec::new();
    for (file, data) in [(JSON, json.into_bytes()), (SVG, svg.into_bytes()), (INDEX, page.into_bytes())] {
        let p = dir.join(file);
        write_atomic(&p, &data)?;
        written.push(p);
    }
    Ok((view, written))
}
