//! `roofline report merge`: several reports (one per run, node or rank) into one. Every point
//! names its source report; `sources[]` keeps each source's machine and environment (host,
//! rank). Merging merged reports keeps their sources rather than nesting them.

use crate::schema::report::{Environment, Report, SourceReport};

/// The merged report and warnings (differing ceilings, repeated names).
pub fn merge(inputs: Vec<(String, Report)>, environment: Environment) -> (Report, Vec<String>) {
    let mut warnings = Vec::new();
    let machine = inputs.first().map(|(_, r)| r.machine.clone()).unwrap_or(serde_json::Value::Null);
    let mut out = Report::new(machine, environment);
    let mut seen: Vec<String> = Vec::new();
    for (name, r) in inputs {
        if out.ceilings.is_none() {
            out.ceilings = r.ceilings.clone();
        } else if r.ceilings.is_some() && r.ceilings != out.ceilings {
            warnings.push(format!("{name}: its ceilings differ from the first report's; the first are kept"));
        }
        if r.machine != out.machine {
            warnings.push(format!("{name}: measured on a different machine (kept in sources[])"));
        }
        if r.sources.is_empty() {
            let unique = unique_name(&name, &seen);
            seen.push(unique.clone());
            out.sources.push(SourceReport {
                name: unique.clone(),
                machine: r.machine,
                environment: r.environment,
            });
            for mut p in r.points {
                p.source = Some(unique.clone());
                out.points.push(p);
            }
        } else {
            // A merged report: keep its sources, renaming any that collide.
            let mut renames = Vec::new();
            for mut s in r.sources {
                let unique = unique_name(&s.name, &seen);
                seen.push(unique.clone());
                renames.push((s.name.clone(), unique.clone()));
                s.name = unique;
                out.sources.push(s);
            }
            for mut p in r.points {
                let src = p.source.clone().unwrap_or_else(|| name.clone());
                p.source = Some(renames.iter().find(|(o, _)| *o == src).map(|(_, n)| n.clone()).unwrap_or(src));
                out.points.push(p);
            }
        }
    }
    (out, warnings)
}

fn unique_name(name: &str, seen: &[String]) -> String {
    if !seen.iter().any(|s| s == name) {
        return name.to_string();
    }
    (2..)
        .map(|i| format!("{name}#{i}"))
        .find(|n| !seen.contains(n))
        .expect("an unused name exists")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schema::report::{Bytes, Flops, Point, Provenance};

    fn report(host: &str, rank: u32, names: &[&str]) -> Report {
        let env = Environment {
            host: Some(host.into()),
            rank: Some(rank),
            ..Default::default()
        };
        let mut r = Report::new(serde_json::json!({"brand": host}), env);
        for n in names {
            let mut b = Bytes::new();
            b.insert("core".into(), 8e6);
            r.points.push(Point::new(
                *n,
                Provenance {
                    flops: None,
                    bytes: Default::default(),
                    seconds: None,
                    notes: vec![],
                    untrusted: Vec::new(),
                },
                Flops {
                    total: 1e6,
                    ..Default::default()
                },
                b,
                1,
                vec![1e-3],
            ));
        }
        r
    }

    #[test]
    fn merge_keeps_sources_and_flattens() {
        let (ab, w) = merge(
            vec![
                ("a.json".into(), report("n1", 0, &["x", "y"])),
                ("b.json".into(), report("n2", 1, &["x"])),
            ],
            Environment::default(),
        );
        assert_eq!(ab.points.len(), 3);
        assert_eq!(ab.sources.len(), 2);
        assert_eq!(ab.sources[1].environment.rank, Some(1));
        assert_eq!(ab.sources[1].environment.host.as_deref(), Some("n2"));
        assert_eq!(ab.points[2].source.as_deref(), Some("b.json"));
        assert_eq!(w.len(), 1, "{w:?}");
        // merging a merged report with another a.json: no nesting, names made unique
        let (all, _) = merge(
            vec![("ab.json".into(), ab), ("a.json".into(), report("n3", 2, &["z"]))],
            Environment::default(),
        );
        assert_eq!(all.sources.len(), 3);
        assert_eq!(all.sources[2].name, "a.json#2");
        assert_eq!(all.points[3].source.as_deref(), Some("a.json#2"));
        assert_eq!(all.points[0].source.as_deref(), Some("a.json"));
    }
}
