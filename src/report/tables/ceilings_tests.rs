use super::*;
use crate::report::tables::end_of;

fn compute(isa: &str, mode: &str, threads: u32, gflops: f64, ghz: Option<f64>) -> serde_json::Value {
    serde_json::json!({
        "precision": "double", "isa": isa, "fma": mode == "fma", "mode": mode, "threads": threads,
        "gflops": gflops, "gflops_best": gflops, "spread": 0.0191, "samples": 10, "ghz": ghz,
        "flop_per_cycle": ghz.map(|g| gflops / g), "theoretical_gflops": null, "percent_of_theoretical": null
    })
}

fn bandwidth(level: &str, kernel: &str, threads: u32, ws: u64, gbs: f64) -> serde_json::Value {
    serde_json::json!({
        "level": level, "kernel": kernel, "isa": "avx512", "threads": threads, "working_set_bytes": ws,
        "working_set_per_thread_bytes": ws, "gbs": gbs, "bytes_convention": "core", "gbs_write_allocate": 1.5 * gbs,
        "gbs_best": gbs, "spread": 2.065, "samples": 12
    })
}

fn ceilings() -> Ceilings {
    serde_json::from_value(serde_json::json!({
        "schema": "roofline.ceilings/1", "tool_version": "test", "measured_at_unix": 1, "quick": true, "threads": [1, 2],
        "machine": {
            "fingerprint": "f", "vendor": "AuthenticAMD", "brand": "AMD EPYC", "family": 25, "model": 17, "stepping": 1,
            "logical_cpus": 2, "caches": [{"level": 1, "size_bytes": 32768, "shared_by_threads": 1},
            {"level": 3, "size_bytes": 33554432, "shared_by_threads": 2}],
            "microarchitecture": null, "hypervisor": "KVM", "caches_source": "sysfs"
        },
        "compute": [
            compute("scalar", "fma", 1, 14.62, Some(3.677)),
            compute("avx512", "mul+add", 2, 123456789.0, None),
        ],
        "bandwidth": [
            bandwidth("L1", "load", 1, 16384, 221.37),
            bandwidth("DRAM", "a_long_kernel", 2, 1 << 30, 12.5),
        ],
        "notes": ["measured on a guest"],
        "warnings": ["goes to stderr"]
    }))
    .unwrap()
}

fn options(threads: Vec<usize>) -> Options {
    Options {
        quick: true,
        threads,
        sweep: false,
        progress: false,
    }
}

#[test]
fn only_the_thread_counts_asked_for_each_cell_under_its_header() {
    let t = table(&ceilings(), &options(vec![1]));
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], "AMD EPYC (unknown microarchitecture), 2 CPUs, hypervisor KVM, quick");
    assert_eq!(lines[1], "caches: L1 32.0 KiB /1, L3 32.0 MiB /2");
    let (head, row) = (lines[4], lines[5]);
    assert!(head.starts_with("prec    isa     mode     thr"), "{t}");
    for (h, cell) in [
        ("GFLOP/s", "14.6"),
        ("GHz", "3.68"),
        ("flop/cyc", "3.98"),
        ("% peak", "-"),
        ("spread", "1.9%"),
    ] {
        assert_eq!(end_of(head, h, 0), end_of(row, cell, 30), "{h} in {t}");
    }
    assert_eq!(head.chars().count(), row.chars().count(), "{t}");
    let (head, row) = (lines[8], lines[9]);
    for (h, cell) in [
        ("working set", "16.0 KiB"),
        ("core", "221.4"),
        ("+WA", "332.1"),
        ("spread", "206.5%"),
    ] {
        assert_eq!(end_of(head, h, 0), end_of(row, cell, 0), "{h} in {t}");
    }
    assert_eq!(lines.len(), 11, "{t}");
    assert_eq!(lines[10], "note: measured on a guest");
    assert!(
        !t.contains("123456789") && !t.contains("a_long_kernel") && !t.contains("stderr"),
        "{t}"
    );
}

#[test]
fn wide_cells_push_only_their_row() {
    let t = table(&ceilings(), &options(vec![2]));
    let lines: Vec<&str> = t.lines().collect();
    // 123456789.0 GFLOP/s is 11 characters in a 10-wide column.
    assert!(
        lines[5].starts_with("double  avx512  mul+add    2 123456789.0      -          -        -    1.9%"),
        "{t}"
    );
    assert_eq!(lines[5].chars().count(), lines[4].chars().count() + 1, "{t}");
    // a_long_kernel is 13 characters in a 9-wide column.
    assert_eq!(lines[9].chars().count(), lines[8].chars().count() + 4, "{t}");
    assert!(lines[9].starts_with("DRAM  a_long_kernel avx512    2     1.0 GiB "), "{t}");
}

#[test]
fn the_sweep_section_lists_plateaus_and_levels() {
    let mut c = ceilings();
    c.sweep = Some(
        serde_json::from_value(serde_json::json!({
            "kernel": "load", "variant": "avx512", "threads": 1, "factor": 1.25, "points": [],
            "plateaus": [{"index": 0, "from_bytes": 4096, "to_bytes": 32768, "value": 145.3, "points": 7}],
            "boundaries": [{"level": "L1", "last_inside_bytes": 30512, "first_outside_bytes": 116408,
                "estimate_bytes": 59597, "cpuid_bytes": null, "ratio": null}],
            "fit": null
        }))
        .unwrap(),
    );
    let t = table(&c, &options(vec![]));
    assert!(
        t.ends_with(
            "\nsweep: load (avx512) ×1 threads, 0 sizes\n  plateau 0: 4.0 KiB … 32.0 KiB: 145.3 GB/s (7 points)\n  \
             L1 ends near 58.2 KiB (between 29.8 KiB and 113.7 KiB); CPUID: - (×-)\nnote: measured on a guest\n"
        ),
        "{t}"
    );
}

/// An AMX ceiling measured on several CPUs says under the compute table where its kept figure
/// ran and each figure set aside; one measured once adds no line, and older files (without the
/// fields) read as measured once.
#[test]
fn a_ceiling_measured_again_names_its_cpu_and_the_attempts_set_aside() {
    let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
    for _ in 0..20 {
        let mut c = ceilings();
        assert!(c.compute.iter().all(|x| x.cpu.is_none() && x.set_aside.is_empty()));
        let plain = table(&c, &options(vec![1]));
        let kept_cpu = rng.below(64) as u32;
        let aside: Vec<(u32, f64)> = (0..1 + rng.below(4))
            .map(|_| (rng.below(64) as u32, 30.0 + 59.0 * rng.unit()))
            .collect();
        c.compute[0].cpu = Some(kept_cpu);
        c.compute[0].set_aside = aside
            .iter()
            .map(|&(cpu, p)| crate::schema::ceilings::SetAsideAttempt {
                cpu: Some(cpu),
                gflops: p,
                percent_of_theoretical: Some(p),
            })
            .collect();
        let t = table(&c, &options(vec![1]));
        let extra: Vec<&str> = t.lines().filter(|l| !plain.lines().any(|p| p == *l)).collect();
        assert_eq!(extra.len(), 1, "{t}");
        let line = extra[0];
        assert!(
            line.contains(&format!("fastest of {} measurements on CPU {kept_cpu};", aside.len() + 1)),
            "{line}"
        );
        for (cpu, p) in &aside {
            assert!(line.contains(&format!("{p:.0} % of the unit's rate on CPU {cpu}")), "{line}");
        }
        // The table's row for the ceiling comes before the line, the bandwidth header after.
        let at = t.find(line).unwrap();
        assert!(t.find("14.6").unwrap() < at && at < t.find("bandwidth").unwrap(), "{t}");
        // Round trip through JSON keeps the fields; a ceiling measured once writes neither.
        let json = serde_json::to_value(&c).unwrap();
        assert!(json["compute"][1].get("cpu").is_none() && json["compute"][1].get("set_aside").is_none());
        let back: Ceilings = serde_json::from_value(json).unwrap();
        assert_eq!(back.compute, c.compute);
        // Asked only for 2 threads: the 1-thread ceiling's line is not shown.
        assert!(!table(&c, &options(vec![2])).contains("set aside"));
    }
}

/// A team ceiling whose threads ran unequally gets a line under the compute table (how many,
/// how slow, what the team is worth) and a note on the roofs of its thread count, which the
/// report's table prints under its roofs; even teams and one thread get neither.
#[test]
fn a_team_whose_threads_ran_unequally_is_said_under_the_table_and_on_its_roofs() {
    let mut rng = roofline_kernels::rng::Rng::new(roofline_kernels::rng::fresh_seed());
    for _ in 0..20 {
        let threads = 2 + rng.below(31);
        // Each thread's rate: a share of the fastest, slow ones at 0.3-0.65, the others 0.75-1.
        let mut rates: Vec<f64> = (0..threads)
            .map(|_| {
                if rng.unit() < 0.4 {
                    0.3 + 0.35 * rng.unit()
                } else {
                    0.75 + 0.25 * rng.unit()
                }
            })
            .collect();
        rates[0] = 1.0;
        let slow: Vec<f64> = rates.iter().copied().filter(|r| *r < 0.7).collect();
        let mut c = ceilings();
        c.compute[1].threads = threads as u32;
        c.compute[1].unequal_threads = crate::schema::ceilings::UnequalThreads::from_rates(&rates);
        // A slower ceiling of the same precision and thread count, its threads unequal too:
        // listed in the table, not in the roofs' note (said of each precision's peak only).
        let mut slower = c.compute[1].clone();
        slower.isa = "avx2".into();
        slower.gflops /= 2.0;
        slower.unequal_threads = crate::schema::ceilings::UnequalThreads::from_rates(&[1.0, 0.1]);
        c.compute.push(slower);
        let opts = options(vec![1, threads]);
        let t = table(&c, &opts);
        let roofs = c.roofs(threads as u32);
        if slow.is_empty() {
            assert!(c.compute[1].unequal_threads.is_none());
            assert!(!t.contains("avx512 mul+add ×") && roofs.notes.is_empty(), "{t} {:?}", roofs.notes);
            continue;
        }
        let mut sorted = slow.clone();
        sorted.sort_by(f64::total_cmp);
        let median = crate::schema::stats::quantile(&sorted, 0.5);
        let worth: f64 = rates.iter().sum();
        assert!(
            t.contains(&format!("  double avx2 mul+add ×{threads}: 1 of {threads} threads ran at 10 %")),
            "{t}"
        );
        let line = t
            .lines()
            .find(|l| l.contains("avx512") && l.contains("ran at"))
            .unwrap_or_else(|| panic!("{t}"));
        assert!(
            line.starts_with(&format!(
                "  double avx512 mul+add ×{threads}: {} of {threads} threads ran at {:.0} % of the fastest one",
                slow.len(),
                100.0 * median
            )),
            "{line}"
        );
        assert!(line.ends_with(&format!("worth {worth:.1} of its fastest thread")), "{line}");
        assert!(line.contains("hyperthreads"), "{line}");
        // The roofs of that thread count carry the note; the one-thread roofs do not.
        assert_eq!(roofs.notes.len(), 1, "{:?}", roofs.notes);
        assert!(!roofs.notes[0].contains("avx2"), "{:?}", roofs.notes);
        assert!(
            roofs.notes[0].contains(&format!(
                "double avx512 mul+add: {} of {threads} at {:.0} %",
                slow.len(),
                100.0 * median
            )),
            "{:?}",
            roofs.notes
        );
        assert!(c.roofs(1).notes.is_empty());
        // Through a report: the note sits under the roofs line of its thread count.
        let mut report = crate::schema::Report::new(serde_json::Value::Null, Default::default());
        report.ceilings = Some(roofs.clone());
        let view = crate::report::View::new(vec![("r".into(), report)], None, crate::report::PlotKind::Carm);
        let text = crate::report::table::render(&view);
        let lines: Vec<&str> = text.lines().collect();
        let at = lines
            .iter()
            .position(|l| l.starts_with("roofs ("))
            .unwrap_or_else(|| panic!("{text}"));
        assert_eq!(
            lines.get(at + 1).copied(),
            Some(format!("  note: {}", roofs.notes[0]).as_str()),
            "{text}"
        );
        // The page prints it under its roof table, escaped (the note holds an apostrophe).
        let page = crate::report::html::render(&view, "r").unwrap();
        let escaped = crate::report::markup::esc(&roofs.notes[0]);
        assert!(escaped != roofs.notes[0] && page.contains(&format!("<p class=\"muted\">{escaped}</p>")));
        // JSON round trip of the ceilings and of the report's roofs keeps both.
        let back: Ceilings = serde_json::from_value(serde_json::to_value(&c).unwrap()).unwrap();
        assert_eq!(back.compute, c.compute);
        let r: crate::schema::Roofs = serde_json::from_value(serde_json::to_value(&roofs).unwrap()).unwrap();
        assert_eq!(r.notes, roofs.notes);
    }
}
