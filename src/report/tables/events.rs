//! `roofline events`: the perf-stat line and the events it counts, as text.

use crate::schema::documents::EventsDocument;

/// The perf line under a comment naming the platform, then the events: PMU, quantity, class,
/// weight, the counters each can use and its flags.
pub fn events_table(doc: &EventsDocument) -> String {
    let mut s = format!(
        "# {} ({}, from {}); import with: roofline import perf-stat perf-stat.csv --platform {}\n",
        doc.platform_name, doc.platform, doc.platform_from, doc.platform
    );
    s += &format!("{}\n", doc.perf_command);
    s += "\n";
    s += &format!(
        "{:<44} {:<10} {:<17} {:<20} {:>6}  counters\n",
        "event", "pmu", "quantity", "class", "weight"
    );
    for e in &doc.events {
        let ctr = match &e.counters {
            Some(c) if c.iter().all(|&c| c >= 32) => "fixed".to_string(),
            Some(c) => c.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
            None => "any".into(),
        };
        let mut flags = Vec::new();
        if e.paired {
            flags.push("paired");
        }
        if e.unreliable {
            flags.push("approximate");
        }
        if e.optional {
            flags.push("opt-in");
        }
        s += &format!(
            "{:<44} {:<10} {:<17} {:<20} {:>6}  {ctr}{}\n",
            e.name,
            e.pmu,
            e.quantity,
            e.class.as_deref().unwrap_or("-"),
            e.weight,
            if flags.is_empty() {
                String::new()
            } else {
                format!("  [{}]", flags.join(", "))
            }
        );
    }
    s
}
