//! JSON export: the `roofline.report/1` document with the model's figures filled in
//! (`bound`, `roof_fraction`, `extra.model`, `ceilings`). Several reports are merged.

use super::{Exporter, View, merge};
use crate::error::Result;

pub struct JsonExporter;

/// The document for a view: the report itself, or the merge of several; each point with
/// energy placed on its report's energy roofline (`extra.energy.roofline`).
pub fn document(view: &View) -> super::Report {
    match view.reports.as_slice() {
        [one] => with_energy_places(one.report.clone()),
        many => {
            let env = many.first().map(|r| r.report.environment.clone()).unwrap_or_default();
            merge::merge(many.iter().map(|r| (r.name.clone(), r.report.clone())).collect(), env).0
        }
    }
}

/// `report` with `extra.energy.roofline` set on every point its energy roofs place.
pub fn with_energy_places(mut report: super::Report) -> super::Report {
    let places: Vec<Option<crate::schema::energy::EnergyRooflinePlace>> = report
        .points
        .iter()
        .map(|p| {
            crate::model::energy::place_in(&report, p).map(|(line, at)| crate::schema::energy::EnergyRooflinePlace {
                ai: at.ai,
                attainable_gflop_per_joule: at.attainable,
                fraction: at.fraction,
                bound: at.bound.to_string(),
                energy_balance: line.energy_balance,
            })
        })
        .collect();
    for (p, place) in report.points.iter_mut().zip(places) {
        if let (Some(e), Some(place)) = (&mut p.extra.energy, place) {
            e.roofline = Some(place);
        }
    }
    report
}

impl Exporter for JsonExporter {
    fn export(&self, view: &View) -> Result<Vec<u8>> {
        let mut s = document(view).to_json();
        s.push('\n');
        Ok(s.into_bytes())
    }
}
