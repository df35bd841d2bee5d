use super::*;
use crate::report::labels::any_overlap;

/// A small deterministic generator (xorshift), so every draw can be replayed from its seed.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
    /// Log-uniform in [lo, hi].
    fn log(&mut self, lo: f64, hi: f64) -> f64 {
        (lo.ln() + (hi.ln() - lo.ln()) * self.next()).exp()
    }
}

fn roof(key: &str, name: &str, value: f64, compute: bool, shown: bool) -> ChartRoof {
    ChartRoof {
        key: key.into(),
        name: name.into(),
        value,
        unit: if compute { "GFLOP/s" } else { "GB/s" },
        compute,
        shown,
        dashed: false,
        thin: false,
        color: "#000000".into(),
        machine: 0,
    }
}

/// A random machine: 2–12 compute roofs below one peak, 2–6 memory roofs, some hidden.
fn random_roofs(rng: &mut Rng) -> Vec<ChartRoof> {
    let peak = rng.log(10.0, 5000.0);
    let mut out = vec![roof("c-peak", "peak FMA", peak, true, true)];
    for k in 0..(1 + (rng.next() * 11.0) as usize) {
        let v = peak * rng.log(0.05, 0.99);
        out.push(roof(&format!("c-{k}"), &format!("ISA{k} FMA"), v, true, rng.next() < 0.3));
    }
    let mut bw = rng.log(50.0, 2000.0);
    for (k, name) in ["L1", "L2", "L3", "DRAM", "L1_LOAD", "HBM"]
        .iter()
        .enumerate()
        .take(2 + (rng.next() * 4.0) as usize)
    {
        out.push(roof(&format!("m-{k}"), name, bw, false, k < 4));
        bw *= rng.log(0.2, 0.9);
    }
    out
}

/// 1–120 dots, bunched or spread, with shares, some with error bars, in one or two reports.
fn random_dots(rng: &mut Rng, roofs: &[ChartRoof]) -> Vec<ChartDot> {
    let peak = roofs.iter().filter(|r| r.compute).map(|r| r.value).fold(0.0, f64::max);
    let n = 1 + (rng.next() * 120.0) as usize;
    let bunched = rng.next() < 0.4;
    let reports = if rng.next() < 0.3 { 2 } else { 1 };
    let (cx, cy) = (rng.log(0.01, 10.0), peak * rng.log(0.001, 0.5));
    let mut dots: Vec<ChartDot> = (0..n)
        .map(|i| {
            let (x, y) = if bunched {
                (cx * rng.log(0.7, 1.4), cy * rng.log(0.7, 1.4))
            } else {
                (rng.log(0.005, 100.0), peak * rng.log(0.0005, 0.9))
            };
            ChartDot {
                index: i,
                report: i % reports,
                name: format!("kernel_{}@{}KiB", i / reports, (rng.next() * 4096.0) as u32),
                x,
                y,
                err: (rng.next() < 0.3).then(|| (y * rng.log(0.5, 0.95), y * rng.log(1.05, 2.0))),
                r: 0.0,
                share: rng.log(1e-4, 1.0),
                bound: "memory",
            }
        })
        .collect();
    size_dots(&mut dots);
    dots
}

/// Every frame of a random chart: labels inside the plotting area and apart from each other
/// (shown and hidden roofs' together, so any toggle keeps them apart), every dot label near
/// its own dot and nearer to it than to any other dot, tick labels apart and off the area.
fn check_frame(f: &Frame, roofs: &[ChartRoof], dots: &[ChartDot], seed: u64) {
    let rects: Vec<Rect> = f.labels.iter().map(|l| l.rect).collect();
    if let Some((i, j)) = any_overlap(&rects) {
        panic!("seed {seed} {}: '{}' overlaps '{}'", f.name, f.labels[i].text, f.labels[j].text);
    }
    for l in &f.labels {
        assert!(
            l.rect.inside(&AREA),
            "seed {seed} {}: '{}' leaves the area: {:?}",
            f.name,
            l.text,
            l.rect
        );
        if let Owner::Dot(k) = l.owner {
            let d = &dots[k];
            let own = l.rect.dist(f.map.px(d.x, d.y));
            assert!(own <= d.r + 10.0 + 1e-9, "seed {seed}: '{}' is {own:.1} px from its dot", l.text);
            for o in dots.iter().filter(|o| o.index != d.index) {
                let other = l.rect.dist(f.map.px(o.x, o.y));
                assert!(
                    own < other,
                    "seed {seed}: '{}' reads as {}'s ({own:.1} ≥ {other:.1} px)",
                    l.text,
                    o.name
                );
            }
        }
        if let Owner::Roof(i) | Owner::Ridge(i) = l.owner {
            assert!(
                f.segments.iter().any(|s| s.0 == i),
                "seed {seed}: a label for roof {} not drawn",
                roofs[i].key
            );
        }
    }
    let (xs, ys) = tick_labels(&f.map);
    let ticks: Vec<Rect> = xs.iter().chain(&ys).map(|t| t.1).collect();
    assert!(any_overlap(&ticks).is_none(), "seed {seed}: tick labels overlap");
    for t in &ticks {
        assert!(!t.overlaps(&AREA), "seed {seed}: a tick label inside the plotting area");
        assert!(rects.iter().all(|r| !r.overlaps(t)), "seed {seed}: a label on a tick label");
    }
    // Priority: every shown roof's label comes before any hidden roof's (hiding one never
    // takes a spot a shown one wanted).
    let last_shown = f.labels.iter().rposition(|l| matches!(l.owner, Owner::Roof(i) if roofs[i].shown));
    let first_hidden = f.labels.iter().position(|l| matches!(l.owner, Owner::Roof(i) if !roofs[i].shown));
    if let (Some(a), Some(b)) = (last_shown, first_hidden) {
        assert!(a < b, "seed {seed}: a hidden roof's label placed before a shown one's");
    }
}

#[test]
fn labels_never_overlap_and_stay_with_their_dots_on_random_charts() {
    for seed in 1..=60u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let roofs = random_roofs(&mut rng);
        let dots = random_dots(&mut rng, &roofs);
        let arrows = arrows_of(&dots);
        let (full, zoom) = frame_ranges(&roofs, &dots);
        for (name, range) in [("zoom", zoom), ("full", full)] {
            let f = lay_frame(name, range, &roofs, &dots, &arrows);
            check_frame(&f, &roofs, &dots, seed);
        }
    }
}

#[test]
fn zoom_holds_every_dot_and_the_shown_compute_roofs_inside_the_full_range() {
    for seed in 1..=200u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let roofs = random_roofs(&mut rng);
        let dots = random_dots(&mut rng, &roofs);
        let (full, zoom) = frame_ranges(&roofs, &dots);
        let within = |v: f64, r: (f64, f64)| v >= r.0 * (1.0 - 1e-9) && v <= r.1 * (1.0 + 1e-9);
        assert!(full.0.0 <= zoom.0.0 && zoom.0.1 <= full.0.1 && full.1.0 <= zoom.1.0 && zoom.1.1 <= full.1.1);
        assert!(
            zoom.0.1 / zoom.0.0 >= 10.0 - 1e-9 || zoom.0 == full.0,
            "seed {seed}: zoomed AI range under a decade"
        );
        for d in &dots {
            assert!(
                within(d.x, zoom.0) && within(d.y, zoom.1),
                "seed {seed}: {} outside the zoom",
                d.name
            );
        }
        for r in roofs.iter().filter(|r| r.compute) {
            assert!(within(r.value, full.1), "seed {seed}: {} outside the full range", r.key);
            if r.shown {
                assert!(within(r.value, zoom.1), "seed {seed}: shown {} outside the zoom", r.key);
            }
        }
    }
}

#[test]
fn dot_area_follows_the_share_of_time() {
    let mut rng = Rng(7);
    for _ in 0..50 {
        let roofs = random_roofs(&mut rng);
        let dots = random_dots(&mut rng, &roofs);
        let total: f64 = dots.iter().map(|d| d.share).sum();
        assert!((total - 1.0).abs() < 1e-9, "shares sum to {total}");
        let big = dots.iter().max_by(|a, b| a.share.total_cmp(&b.share)).unwrap();
        assert!((big.r - MAX_R).abs() < 1e-9);
        for d in &dots {
            let want = (MAX_R * (d.share / big.share).sqrt()).max(MIN_R);
            assert!((d.r - want).abs() < 1e-9 && d.r >= MIN_R && d.r <= MAX_R);
            if d.r > MIN_R {
                // Areas in the ratio of the shares.
                let ratio = (d.r / big.r).powi(2) / (d.share / big.share);
                assert!((ratio - 1.0).abs() < 1e-9, "area ratio {ratio}");
            }
        }
    }
}

#[test]
fn ticks_are_decades_or_one_two_five_and_labels_never_touch() {
    assert_eq!(ticks((0.01, 1000.0)), vec![0.01, 0.1, 1.0, 10.0, 100.0, 1000.0]);
    let fine = ticks((0.04, 5.0));
    assert_eq!(fine.len(), 7, "{fine:?}"); // 0.05 0.1 0.2 0.5 1 2 5
    assert!((fine[0] - 0.05).abs() < 1e-12 && (fine[6] - 5.0).abs() < 1e-9);
    let mut rng = Rng(99);
    for _ in 0..200 {
        let lo = rng.log(1e-4, 1e4);
        let map = Mapper {
            x: (lo, lo * rng.log(3.0, 1e6)),
            y: (lo, lo * rng.log(3.0, 1e6)),
            area: AREA,
        };
        let (xs, ys) = tick_labels(&map);
        let all: Vec<Rect> = xs.iter().chain(&ys).map(|t| t.1).collect();
        assert!(any_overlap(&all).is_none());
        assert!(!xs.is_empty() || ticks(map.x).is_empty());
    }
}

#[test]
fn a_roof_names_its_precision_once() {
    let c = |precision: &str, isa: &str| ComputeRoof {
        precision: precision.into(),
        isa: isa.into(),
        fma: true,
        mix: false,
        gflops: 100.0,
        empirical: true,
        spread: 0.0,
    };
    assert_eq!(roof_name(&c("bf16", "avx512"), true), "BF16 AVX-512 dot");
    assert_eq!(roof_name(&c("int16", "avx512"), true), "INT16 AVX-512 VNNI");
    assert_eq!(roof_name(&c("double", "avx512"), true), "FP64 AVX-512 FMA");
    assert_eq!(roof_name(&c("double", "avx512"), false), "AVX-512 FMA");
    for (p, isa, word) in [
        ("bf16", "avx512", "bf16"),
        ("int8", "avx512", "int8"),
        ("half", "avx512", "fp16"),
        ("single", "avx2", "fp32"),
    ] {
        let name = roof_name(&c(p, isa), true).to_ascii_lowercase();
        assert_eq!(
            name.matches(word).count(),
            1,
            "{name}: the precision said {} times",
            name.matches(word).count()
        );
    }
}

fn main_job() -> View {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/reports/main-job.json");
    let report = crate::report::read_report(&path).unwrap();
    View::new(vec![("main-job".into(), report)], None, PlotKind::All)
}

/// The main job's report: 13 compute roofs (FP64 at five ISAs with and without FMA, BF16,
/// INT8, INT16) and six memory roofs; its points are FP64 at AVX2 or AVX-512 (scalar: none).
#[test]
fn by_default_only_the_roofs_the_points_can_use_are_shown() {
    let view = main_job();
    for set in view.by_threads() {
        let chart = layout(&set).expect("the main job's points can be placed");
        assert_eq!(chart.kind, PlotKind::Carm);
        let shown: Vec<&ChartRoof> = chart.roofs.iter().filter(|r| r.shown).collect();
        let compute: Vec<&&ChartRoof> = shown.iter().filter(|r| r.compute).collect();
        assert!(
            !compute.is_empty() && compute.len() <= 4,
            "{:?}",
            compute.iter().map(|r| r.label()).collect::<Vec<_>>()
        );
        // The peak of the points' precision is shown; no other precision is.
        let peak = chart
            .roofs
            .iter()
            .filter(|r| r.compute && r.key.starts_with("c-double"))
            .map(|r| r.value)
            .fold(0.0, f64::max);
        assert!(compute.iter().any(|r| r.value == peak));
        assert!(compute.iter().all(|r| r.key.starts_with("c-double")), "another precision shown");
        assert!(
            chart.roofs.iter().any(|r| !r.shown && r.key.starts_with("c-bf16")),
            "BF16 is behind the toggle"
        );
        // Memory: the levels shown, the load/store split hidden.
        let levels: Vec<&str> = shown.iter().filter(|r| !r.compute).map(|r| r.name.as_str()).collect();
        assert_eq!(levels, ["L1", "L2", "L3", "DRAM"]);
        // Scalar and SSE roofs are no point's: hidden.
        assert!(
            chart
                .roofs
                .iter()
                .filter(|r| r.key.contains("scalar") || r.key.contains("_sse_"))
                .all(|r| !r.shown)
        );
        // Every frame keeps its labels apart, every shown roof that is drawn is labelled.
        for f in &chart.frames {
            check_frame(f, &chart.roofs, &chart.dots, 0);
        }
        let zoom = &chart.frames[0];
        for &(i, _, _) in zoom.segments.iter().filter(|(i, _, _)| chart.roofs[*i].shown) {
            assert!(
                zoom.labels.iter().any(|l| l.owner == Owner::Roof(i)),
                "shown roof {} has no label",
                chart.roofs[i].label()
            );
        }
    }
}

#[test]
fn the_svg_marks_dots_roofs_and_labels_for_the_script() {
    let view = main_job();
    let set = &view.by_threads()[0];
    let chart = layout(set).unwrap();
    let svg = svg(&chart, "c0", false);
    assert_eq!(svg.matches("<g class=\"frame\"").count(), 2);
    assert_eq!(svg.matches("class=\"dot ").count(), 2 * chart.dots.len());
    for r in chart.roofs.iter().filter(|r| !r.shown) {
        let hidden = format!("data-roof=\"{}\" ", r.key);
        // Every element of a hidden roof starts hidden.
        for (at, _) in svg.match_indices(&hidden) {
            let end = svg[at..].find('>').unwrap() + at;
            assert!(svg[at..end].contains("display:none"), "{} drawn visible", r.key);
        }
    }
    assert!(!svg.contains("NaN") && !svg.contains("inf"));
}
