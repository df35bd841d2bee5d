//! `roofline validate --backend perf|simulated`: a verdict per event class, as text.

use super::Columns;
use crate::schema::Source;
use crate::schema::validation::{PerfValidation, Sample};

/// The table `roofline validate --backend perf` prints.
pub fn table(v: &PerfValidation) -> String {
    let simulated = if v.source == Source::Simulated {
        " — SIMULATED PMU, a test instrument"
    } else {
        ""
    };
    let mut s = format!("counters: {} (platform {}){simulated}\n", v.source.name(), v.platform);
    let cols = Columns::new(" ").left(28).left(28).right(16).right(16);
    s += &format!("{}  verdict\n", cols.line(["event class", "worst sample", "analytic", "measured"]));
    for r in &v.rows {
        let worst = r.samples.iter().fold(None::<&Sample>, |w, x| match w {
            Some(w) if w.verdict.worse(x.verdict) == w.verdict => Some(w),
            _ => Some(x),
        });
        let (what, a, m) = match worst {
            Some(x) => (
                format!("{}/{}", x.kernel, x.variant),
                format!("{:.0}", x.analytic),
                x.measured.map(|m| format!("{m:.0}")).unwrap_or_else(|| "-".into()),
            ),
            None => ("-".into(), "-".into(), "-".into()),
        };
        s += &format!("{}  {}\n", cols.line([&r.class, &what, &a, &m]), r.verdict.describe());
        s += &format!("    events: {}\n", r.events.join(", "));
        for d in &r.detail {
            s += &format!("    {d}\n");
        }
    }
    for n in &v.notes {
        s += &format!("note: {n}\n");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tables::end_of;
    use crate::schema::validation::ClassRow;
    use crate::schema::validation::Verdict;

    fn sample(kernel: &str, measured: Option<f64>, verdict: Verdict) -> Sample {
        Sample {
            kernel: kernel.into(),
            variant: "avx512".into(),
            n: 2048,
            analytic: 4096.0,
            measured,
            verdict,
        }
    }

    #[test]
    fn each_class_shows_its_worst_sample_under_the_headers() {
        let v = PerfValidation {
            source: Source::Simulated,
            platform: "skx".into(),
            rows: vec![
                ClassRow {
                    class: "flops.packed512_double".into(),
                    events: vec!["FP_ARITH_INST_RETIRED.512B_PACKED_DOUBLE".into()],
                    samples: vec![
                        sample("triad", Some(4096.0), Verdict::Exact),
                        sample("daxpy", Some(4100.0), Verdict::WithinTolerance(0.001)),
                        sample("dot", Some(4097.0), Verdict::Exact),
                    ],
                    verdict: Verdict::WithinTolerance(0.001),
                    detail: Vec::new(),
                },
                ClassRow {
                    class: "bytes.dram_with_a_class_name_wider_than_28".into(),
                    events: vec!["a".into(), "b".into()],
                    samples: vec![sample("load", None, Verdict::NotCounted)],
                    verdict: Verdict::NotCounted,
                    detail: vec!["uncore_imc: permission denied".into()],
                },
                ClassRow {
                    class: "flops.scalar_double".into(),
                    events: Vec::new(),
                    samples: Vec::new(),
                    verdict: Verdict::Off(-0.5),
                    detail: Vec::new(),
                },
            ],
            failed_to_open: Default::default(),
            idle_dram_bytes_per_second: None,
            notes: vec!["simulated".into()],
        };
        let t = table(&v);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines[0], "counters: simulated (platform skx) — SIMULATED PMU, a test instrument");
        let head = lines[1];
        let row = lines[2];
        assert!(row.starts_with("flops.packed512_double       daxpy/avx512 "), "{t}");
        assert_eq!(end_of(head, "analytic", 0), end_of(row, "4096", 0), "{t}");
        assert_eq!(end_of(head, "measured", 0), end_of(row, "4100", 0), "{t}");
        assert!(row.ends_with("4100  within tolerance (+0.10 %)"), "{t}");
        assert_eq!(lines[3], "    events: FP_ARITH_INST_RETIRED.512B_PACKED_DOUBLE");
        // A wide class pushes its own row; a class not counted shows `-`.
        assert!(
            lines[4].starts_with("bytes.dram_with_a_class_name_wider_than_28 load/avx512 "),
            "{t}"
        );
        assert!(lines[4].ends_with("               -  not counted"), "{t}");
        assert_eq!(lines[5..7], ["    events: a, b", "    uncore_imc: permission denied"]);
        // No samples: dashes throughout.
        assert_eq!(
            lines[7],
            format!("{:<28} {:<28} {:>16} {:>16}  off by -50.0 %", "flops.scalar_double", "-", "-", "-")
        );
        assert_eq!(lines[8..], ["    events: ", "note: simulated"]);
    }
}
