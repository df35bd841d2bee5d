//! `roofline events`: the perf-stat line and the events it counts, as text.

use super::Columns;
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
    let cols = Columns::new(" ").left(44).left(10).left(17).left(20).right(6);
    s += &format!("{}  counters\n", cols.line(["event", "pmu", "quantity", "class", "weight"]));
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
        let flags = if flags.is_empty() {
            String::new()
        } else {
            format!("  [{}]", flags.join(", "))
        };
        let class = e.class.as_deref().unwrap_or("-");
        let cells = [&e.name as &dyn std::fmt::Display, &e.pmu, &e.quantity, &class, &e.weight];
        s += &format!("{}  {ctr}{flags}\n", cols.line(cells));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tables::end_of;
    use crate::schema::documents::{EVENTS_SCHEMA, EventEntry};

    fn event(name: &str, counters: Option<Vec<u32>>, flags: [bool; 3]) -> EventEntry {
        EventEntry {
            name: name.into(),
            perf: format!("cpu/{name}/"),
            pmu: "cpu".into(),
            quantity: "flops".into(),
            class: flags[0].then(|| "packed512_double".to_string()),
            weight: if flags[1] { 16.0 } else { 0.5 },
            counters,
            paired: flags[0],
            unreliable: flags[1],
            optional: flags[2],
            caveat: None,
        }
    }

    #[test]
    fn events_with_their_counters_and_flags_under_the_perf_line() {
        let doc = EventsDocument {
            schema: EVENTS_SCHEMA.into(),
            platform: "icx".into(),
            platform_name: "Ice Lake server".into(),
            platform_from: "platform option".into(),
            smt: true,
            gp_counters: 4,
            perf_command: "perf stat -x, -e '{a,b}' -- ./triad".into(),
            event_args: Vec::new(),
            system_wide: false,
            events: vec![
                event(
                    "FP_ARITH_INST_RETIRED.512B_PACKED_DOUBLE_AND_A_NAME_WIDER_THAN_44",
                    Some(vec![0, 1, 2, 3]),
                    [true, true, true],
                ),
                event("INST_RETIRED.ANY", Some(vec![32]), [false, false, false]),
                event("UNC_M_CAS_COUNT.RD", None, [false, false, true]),
            ],
            notes: vec!["goes to stderr".into()],
        };
        let t = events_table(&doc);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[..3],
            [
                "# Ice Lake server (icx, from platform option); import with: roofline import perf-stat perf-stat.csv --platform icx",
                "perf stat -x, -e '{a,b}' -- ./triad",
                "",
            ]
        );
        let head = lines[3];
        assert!(lines[4].ends_with("    16  0,1,2,3  [paired, approximate, opt-in]"), "{t}");
        assert!(lines[4].contains(" packed512_double "), "{t}");
        // The wide name pushes its own row only.
        assert_eq!(end_of(head, "weight", 0), end_of(lines[5], "0.5", 0), "{t}");
        assert_eq!(end_of(head, "weight", 0) + 2 + "fixed".len(), lines[5].chars().count(), "{t}");
        assert_eq!(lines[5].find(" - "), Some(head.find("class").unwrap() - 1), "{t}");
        assert!(lines[6].ends_with("   0.5  any  [opt-in]"), "{t}");
        assert!(!t.contains("goes to stderr"), "{t}");
    }
}
