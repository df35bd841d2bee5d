use std::collections::BTreeMap;

use super::*;
use crate::schema::{Bytes, Environment, Flops, Provenance, Source};

/// splitmix64 and Box-Muller: seeded samples with a known answer.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn uniform(&mut self) -> f64 {
        ((self.next() >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    }
    fn normal(&mut self) -> f64 {
        (-2.0 * self.uniform().ln()).sqrt() * (2.0 * std::f64::consts::PI * self.uniform()).cos()
    }
    /// Run times of a noisy machine: median `t`, 3 % Gaussian jitter, and now and then a
    /// preempted run up to 2× slower.
    fn times(&mut self, t: f64, n: usize) -> Vec<f64> {
        self.times_with(t, n, 0.1)
    }
    fn times_with(&mut self, t: f64, n: usize, preempted: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let slow = if self.uniform() < preempted { 1.0 + self.uniform() } else { 1.0 };
                t * (1.0 + 0.03 * self.normal()).max(0.5) * slow
            })
            .collect()
    }
}

fn point(name: &str, flops: f64, dram: f64, samples: Vec<f64>) -> Point {
    let mut by_class = BTreeMap::new();
    by_class.insert("packed256_double".to_string(), flops);
    let mut bytes = Bytes::new();
    bytes.insert("core".into(), 3.0 * flops);
    bytes.insert("dram".into(), dram);
    let prov = Provenance {
        flops: Some(Source::Trace),
        bytes: BTreeMap::new(),
        seconds: Some(Source::Native),
        notes: vec![],
        untrusted: Vec::new(),
    };
    Point::new(
        name,
        prov,
        Flops {
            total: flops,
            effective: None,
            by_class,
            ..Default::default()
        },
        bytes,
        1,
        samples,
    )
}

fn report(points: Vec<Point>) -> Report {
    let mut r = Report::new(serde_json::json!({}), Environment::default());
    r.points = points;
    r
}

fn gate(base: Vec<Point>, cur: Vec<Point>, rules: &RuleSet) -> GateOutcome {
    compare(&report(base), "base.json", &report(cur), "cur.json", rules).unwrap()
}

fn row<'a>(o: &'a GateOutcome, point: &str, metric: &str) -> &'a Row {
    o.rows
        .iter()
        .find(|r| r.point == point && r.metric == metric)
        .unwrap_or_else(|| panic!("no row {point} {metric}: {o:#?}"))
}

#[test]
fn exact_work_and_tolerant_traffic() {
    let mut rng = Rng(7);
    let base = vec![point("triad", 2e6, 24e6, rng.times(1e-3, 10))];
    let same = gate(
        base.clone(),
        vec![point("triad", 2e6, 24.4e6, rng.times(1e-3, 10))],
        &RuleSet::default(),
    );
    assert!(same.passed, "{}", render(&same, Format::Text));
    assert_eq!(row(&same, "triad", "bytes.dram").verdict, Verdict::Pass); // +1.7 % ≤ 2 %

    // One flop more is a regression of W; 3 % more DRAM bytes is one of Q.
    let o = gate(
        base.clone(),
        vec![point("triad", 2e6 + 1.0, 24.72e6, rng.times(1e-3, 10))],
        &RuleSet::default(),
    );
    assert!(!o.passed);
    assert_eq!(row(&o, "triad", "flops.total").verdict, Verdict::Fail);
    assert_eq!(row(&o, "triad", "flops.by_class.packed256_double").verdict, Verdict::Fail);
    assert_eq!(row(&o, "triad", "bytes.dram").verdict, Verdict::Fail);
    assert!((row(&o, "triad", "bytes.dram").change.unwrap() - 0.03).abs() < 1e-9);
    // core bytes follow flops here: +0.00005 % is within 1 %
    assert_eq!(row(&o, "triad", "bytes.core").verdict, Verdict::Pass);
    // A flop class that disappears counts as 0 flops of that class.
    let mut moved = point("triad", 2e6, 24e6, rng.times(1e-3, 10));
    moved.flops.by_class = BTreeMap::from([("packed512_double".to_string(), 2e6)]);
    let o = gate(base, vec![moved], &RuleSet::default());
    assert_eq!(row(&o, "triad", "flops.by_class.packed256_double").current, Some(0.0));
    assert_eq!(row(&o, "triad", "flops.by_class.packed512_double").baseline, Some(0.0));
    assert_eq!(row(&o, "triad", "flops.total").verdict, Verdict::Pass);
    assert!(!o.passed);
}

#[test]
fn fma_flops_are_exact_work_too() {
    let mut rng = Rng(11);
    let with_fma = |fma: Option<f64>, rng: &mut Rng| {
        let mut p = point("dgemm", 2e6, 24e6, rng.times(1e-3, 10));
        p.flops.fma = fma;
        p
    };
    let base = vec![with_fma(Some(2e6), &mut rng)];
    let same = gate(base.clone(), vec![with_fma(Some(2e6), &mut rng)], &RuleSet::default());
    assert_eq!(row(&same, "dgemm", "flops.fma").verdict, Verdict::Pass);
    // The same flops, fewer of them fused (an FMA became a multiply and an add): a regression
    // of the mix that flops.total cannot see.
    let o = gate(base.clone(), vec![with_fma(Some(2e6 - 8.0), &mut rng)], &RuleSet::default());
    assert_eq!(row(&o, "dgemm", "flops.total").verdict, Verdict::Pass);
    assert_eq!(row(&o, "dgemm", "flops.fma").verdict, Verdict::Fail);
    assert!(!o.passed);
    // A current report whose counts do not tell FMAs apart lacks the metric: it fails, and a
    // baseline without it only warns.
    let o = gate(base, vec![with_fma(None, &mut rng)], &RuleSet::default());
    assert_eq!(row(&o, "dgemm", "flops.fma").verdict, Verdict::Fail);
    let o = gate(
        vec![with_fma(None, &mut rng)],
        vec![with_fma(Some(2e6), &mut rng)],
        &RuleSet::default(),
    );
    assert_eq!(row(&o, "dgemm", "flops.fma").verdict, Verdict::Warn);
}

#[test]
fn clearly_slower_is_a_regression_with_high_confidence() {
    // 30 % slower against a 5 % tolerance, 3 % jitter, 10 repetitions each: caught every time.
    for seed in 0..50 {
        let mut rng = Rng(1000 + seed);
        let base = vec![point("k", 1e9, 1e9, rng.times_with(1e-2, 10, 0.0))];
        let cur = vec![point("k", 1e9, 1e9, rng.times_with(1.3e-2, 10, 0.0))];
        let o = gate(base, cur, &RuleSet::default());
        for metric in ["seconds", "gflops"] {
            let r = row(&o, "k", metric);
            assert_eq!(r.method, Method::MannWhitney);
            assert_eq!(r.verdict, Verdict::Fail, "seed {seed} {metric}: {r:?}");
            assert!(r.confidence.unwrap() > 0.95 && r.p_value.unwrap() < 0.05);
        }
        assert!(!o.passed);
    }
    // 20 % slower, with preempted-run outliers on both sides (10 % of runs up to 2× slower):
    // the test's power stays high.
    let caught = (0..200u64)
        .filter(|seed| {
            let mut rng = Rng(5000 + seed);
            let base = vec![point("k", 1e9, 1e9, rng.times(1e-2, 10))];
            let cur = vec![point("k", 1e9, 1e9, rng.times(1.2e-2, 10))];
            row(&gate(base, cur, &RuleSet::default()), "k", "seconds").verdict == Verdict::Fail
        })
        .count();
    assert!(caught >= 180, "20 % slowdowns caught in {caught} of 200");
}

#[test]
fn same_distribution_false_positive_rate_is_below_alpha() {
    let trials = 2000;
    let alpha = DEFAULT_ALPHA_FOR_TESTS;
    let mut strict = RuleSet::default();
    // Zero tolerance: the test alone decides; the nominal level bounds its false positives.
    for r in &mut strict.rules {
        match r.check {
            Check::MaxIncrease(_) if r.metric == "seconds" => r.check = Check::MaxIncrease(0.0),
            Check::MaxDecrease(_) => r.check = Check::MaxDecrease(0.0),
            _ => {}
        }
    }
    let (mut fp_strict, mut fp_default) = (0, 0);
    for seed in 0..trials {
        let mut rng = Rng(seed);
        let base = vec![point("k", 1e9, 1e9, rng.times(1e-2, 8))];
        let cur = vec![point("k", 1e9, 1e9, rng.times(1e-2, 8))];
        if row(&gate(base.clone(), cur.clone(), &strict), "k", "seconds").verdict == Verdict::Fail {
            fp_strict += 1;
        }
        if !gate(base, cur, &RuleSet::default()).passed {
            fp_default += 1;
        }
    }
    let rate = fp_strict as f64 / trials as f64;
    // The exact test's size is at most α; allow 2 binomial standard deviations of sampling noise.
    let sd = (alpha * (1.0 - alpha) / trials as f64).sqrt();
    assert!(rate <= alpha + 2.0 * sd, "false positives at zero tolerance: {rate}");
    assert!(rate > 0.0, "the test is not vacuous: {rate}");
    // With the default 5 % tolerance a noisy but unchanged kernel essentially never fails.
    assert!(
        (fp_default as f64 / trials as f64) < alpha / 5.0,
        "default rules: {fp_default} of {trials}"
    );
}

const DEFAULT_ALPHA_FOR_TESTS: f64 = rules::DEFAULT_ALPHA;

#[test]
fn few_repetitions_fall_back_to_thresholds_and_say_so() {
    let base = vec![point("k", 1e9, 1e9, vec![1.0])];
    let o = gate(base.clone(), vec![point("k", 1e9, 1e9, vec![1.04])], &RuleSet::default());
    let r = row(&o, "k", "seconds");
    assert_eq!((r.method, r.verdict), (Method::MedianThreshold, Verdict::Pass));
    assert!(r.note.as_deref().unwrap().contains("too few"), "{r:?}");
    assert!(r.p_value.is_none());
    let o = gate(base, vec![point("k", 1e9, 1e9, vec![1.06])], &RuleSet::default());
    assert_eq!(row(&o, "k", "seconds").verdict, Verdict::Fail);
    assert_eq!(row(&o, "k", "gflops").verdict, Verdict::Fail);
    // 3 vs 3 cannot reach p < 0.05 (min p = 1/20): thresholds too.
    let o = gate(
        vec![point("k", 1e9, 1e9, vec![1.0, 1.01, 0.99])],
        vec![point("k", 1e9, 1e9, vec![2.0, 2.01, 1.99])],
        &RuleSet::default(),
    );
    assert_eq!(row(&o, "k", "seconds").method, Method::MedianThreshold);
    assert_eq!(row(&o, "k", "seconds").verdict, Verdict::Fail);
}

#[test]
fn new_and_vanished_points_follow_the_settings() {
    let p = |n: &str| point(n, 1.0, 1.0, vec![1.0]);
    let o = gate(vec![p("a"), p("b")], vec![p("a"), p("c")], &RuleSet::default());
    assert_eq!(o.summary.new_points, ["c"]);
    assert_eq!(o.summary.vanished_points, ["b"]);
    assert_eq!(row(&o, "c", "-").verdict, Verdict::Warn);
    assert_eq!(row(&o, "b", "-").verdict, Verdict::Fail);
    assert!(!o.passed);
    let lenient = RuleSet::parse("[settings]\nvanished_points = \"warn\"\n", "r.toml").unwrap();
    assert!(gate(vec![p("a"), p("b")], vec![p("a"), p("c")], &lenient).passed);
    let strict = RuleSet::parse("[settings]\nnew_points = \"fail\"\nvanished_points = \"warn\"\n", "r.toml").unwrap();
    assert!(!gate(vec![p("a")], vec![p("a"), p("c")], &strict).passed);
}

#[test]
fn a_point_the_current_run_could_not_run_warns_with_the_reason() {
    let p = |n: &str| point(n, 1.0, 1.0, vec![1.0]);
    let mut cur = report(vec![p("dot/avx2")]);
    cur.not_run.push(crate::schema::report::NotRun {
        name: "dot/avx512".into(),
        reason: "this CPU lacks the avx512 instructions".into(),
    });
    let base = report(vec![p("dot/avx2"), p("dot/avx512"), p("sum/avx512")]);
    let o = compare(&base, "b", &cur, "c", &RuleSet::default()).unwrap();
    let r = row(&o, "dot/avx512", "-");
    assert_eq!(r.verdict, Verdict::Warn);
    assert!(r.note.as_deref().unwrap().contains("lacks the avx512"), "{r:?}");
    // A point not named as not-run still vanishes, and fails.
    assert_eq!(o.summary.vanished_points, ["sum/avx512"]);
    assert_eq!(row(&o, "sum/avx512", "-").verdict, Verdict::Fail);
    assert!(!o.passed);
    // The list survives a report's JSON round trip.
    let back = Report::from_json(&cur.to_json(), "c").unwrap();
    assert_eq!(back.not_run, cur.not_run);
}

#[test]
fn time_rules_on_an_untimed_report_warn_instead_of_passing_zero_against_zero() {
    let timed = point("k", 1e9, 1e9, vec![1.0, 1.01, 0.99]);
    let mut untimed = point("k", 1e9, 1e9, vec![]);
    untimed.seconds = 0.0;
    for (b, c, who) in [
        (timed.clone(), untimed.clone(), "current report"),
        (untimed.clone(), timed.clone(), "baseline"),
    ] {
        let o = gate(vec![b], vec![c], &RuleSet::default());
        let r = row(&o, "k", "seconds");
        assert_eq!(r.verdict, Verdict::Warn, "{r:?}");
        assert!(r.note.as_deref().unwrap().contains(who), "{r:?}");
        // Work is still judged exactly.
        assert_eq!(row(&o, "k", "flops.total").verdict, Verdict::Pass);
    }
}

#[test]
fn thresholds_and_roof_fraction() {
    let rules = RuleSet::parse(
        "[[rule]]\nmetric = \"roof_fraction\"\npoints = \"dgemm*\"\nmin = 0.8\n[[rule]]\nmetric = \"ai.dram\"\nmax_decrease = 0.0\n",
        "r.toml",
    )
    .unwrap();
    let mut good = point("dgemm_big", 1e9, 1e8, vec![1.0]);
    good.roof_fraction = Some(0.85);
    let mut bad = good.clone();
    bad.roof_fraction = Some(0.75);
    assert!(gate(vec![good.clone()], vec![good.clone()], &rules).passed);
    let o = gate(vec![good.clone()], vec![bad], &rules);
    assert_eq!(row(&o, "dgemm_big", "roof_fraction").verdict, Verdict::Fail);
    // ai.dram must not drop: more DRAM bytes for the same flops lowers it
    let worse = point("dgemm_big", 1e9, 1.01e8, vec![1.0]);
    let o = gate(vec![good], vec![worse], &rules);
    assert_eq!(row(&o, "dgemm_big", "ai.dram").verdict, Verdict::Fail);
}

#[test]
fn schema_mismatch_and_duplicates_are_input_errors() {
    let mut b = report(vec![point("a", 1.0, 1.0, vec![1.0])]);
    let c = b.clone();
    b.schema = "roofline.report/1.1".into();
    let e = compare(&b, "base.json", &c, "cur.json", &RuleSet::default()).unwrap_err();
    assert_eq!(e.exit_code(), 2);
    assert!(e.to_string().contains("cur.json") && e.to_string().contains("base.json"), "{e}");
    let dup = report(vec![point("a", 1.0, 1.0, vec![1.0]), point("a", 1.0, 1.0, vec![1.0])]);
    let e = compare(&dup, "base.json", &c, "cur.json", &RuleSet::default()).unwrap_err();
    assert!(e.to_string().contains("base.json: point 'a' appears twice"), "{e}");
}

#[test]
fn formats_carry_the_verdicts() {
    let mut rng = Rng(3);
    let base = vec![point("tri<ad>", 2e6, 24e6, rng.times(1e-3, 10)), point("gone", 1.0, 1.0, vec![1.0])];
    let cur = vec![point("tri<ad>", 2e6 + 2.0, 24e6, rng.times(1e-3, 10))];
    let o = gate(base, cur, &RuleSet::default());
    let text = render(&o, Format::Text);
    assert!(
        text.lines()
            .any(|l| l.starts_with("tri<ad>") && l.contains("flops.total") && l.contains("FAIL") && l.contains("2000002"))
    );
    assert!(text.trim_end().ends_with("(0 new, 1 vanished points)"), "{text}");

    let json: serde_json::Value = serde_json::from_str(&render(&o, Format::Json)).unwrap();
    assert_eq!(json["schema"], GATE_SCHEMA);
    assert_eq!(json["passed"], false);
    assert_eq!(json["summary"]["failed"].as_u64().unwrap() as usize, o.summary.failed);

    let xml = render(&o, Format::Junit);
    assert!(xml.contains(&format!("failures=\"{}\"", o.summary.failed)));
    assert_eq!(xml.matches("<failure ").count(), o.summary.failed);
    assert_eq!(xml.matches("<testcase ").count(), o.rows.len());
    assert!(xml.contains("classname=\"tri&lt;ad&gt;\"") && !xml.contains("tri<ad>"));

    let gh = render(&o, Format::Github);
    assert_eq!(gh.lines().filter(|l| l.starts_with("::error title=")).count(), o.summary.failed);
    assert!(
        gh.lines()
            .last()
            .unwrap()
            .starts_with("::notice title=roofline gate::roofline gate: FAIL")
    );
    let md = render(&o, Format::Markdown);
    assert!(md.starts_with("### roofline gate: FAIL"));
    assert!(md.lines().nth(4).unwrap().contains("FAIL"), "failures first:\n{md}");
}

#[test]
fn numbers_for_people() {
    use format::num;
    assert_eq!(num(Some(2000002.0)), "2000002");
    assert_eq!(num(Some(0.8512)), "0.8512");
    assert_eq!(num(Some(12.3456)), "12.35");
    assert_eq!(num(Some(1.5e-5)), "1.5000e-5");
    assert_eq!(num(None), "-");
}
