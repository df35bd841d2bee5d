//! JSON export: the `roofline.report/1` document with the model's figures filled in
//! (`bound`, `roof_fraction`, `extra.model`, `ceilings`). Several reports are merged.

use super::{Exporter, View, merge};
use crate::error::Result;

pub struct JsonExporter;

/// The document for a view: the report itself, or the merge of several.
pub fn document(view: &View) -> super::Report {
    match view.reports.as_slice() {
        [one] => one.report.clone(),
        many => {
            let env = many.first().map(|r| r.report.environment.clone()).unwrap_or_default();
            merge::merge(many.iter().map(|r| (r.name.clone(), r.report.clone())).collect(), env).0
        }
    }
}

impl Exporter for JsonExporter {
    fn export(&self, view: &View) -> Result<Vec<u8>> {
        let mut s = document(view).to_json();
        s.push('\n');
        Ok(s.into_bytes())
    }
}
