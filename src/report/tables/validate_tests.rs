use super::*;
use crate::report::tables::end_of;
use std::collections::BTreeMap;

fn classes(v: &[(&str, u64)]) -> BTreeMap<String, u64> {
    v.iter().map(|(k, n)| (k.to_string(), *n)).collect()
}

fn row(kernel: &str, analytic: &[(&str, u64)], measured: &[(&str, u64)]) -> Row {
    Row {
        kernel: kernel.into(),
        variant: "avx512".into(),
        n: 2048,
        flops_analytic: classes(analytic),
        flops_measured: classes(measured),
        fma_analytic: 4096,
        fma_measured: 4096,
        core_analytic: 49152,
        core_measured: 49325,
        dram_analytic: 65536,
        dram_measured: None,
        core_harness_bytes: Some(173),
        memory_matches_stepping: None,
        ok: true,
        detail: None,
    }
}

#[test]
fn every_count_under_its_header_with_the_backend_named() {
    let mut dram = row("triad", &[("packed512_double", 4096)], &[("packed512_double", 4096)]);
    dram.dram_measured = Some(65600);
    let t = table(&[dram], BackendKind::Trace);
    let lines: Vec<&str> = t.lines().collect();
    let (head, r) = (lines[0], lines[1]);
    assert!(
        head.contains("    W trace ") && head.contains(" Qcore trace ") && head.ends_with("  verdict"),
        "{t}"
    );
    // `DRAM analytic` is 13 characters in a 12-wide column: the header's last two cells sit
    // one to the right of their rows' (as the output has always been).
    for (h, cell, shift) in [
        ("W trace", "4096", 0),
        ("FMA trace", "4096", 0),
        ("Qcore analytic", "49152", 0),
        ("harness", "173", 0),
        ("DRAM analytic", "65536", 1),
        ("DRAM", "65600 (0.10%)", 1),
    ] {
        let from = head.rfind(h).unwrap().saturating_sub(cell.len());
        assert_eq!(end_of(head, h, from), end_of(r, cell, from) + shift, "{h} in {t}");
    }
    // Core Q net of the harness bytes: 49325 - 173 = 49152, no error.
    assert_eq!(end_of(head, "err", 80), end_of(r, "0.00%", 80), "{t}");
    assert_eq!(head.chars().count(), r.chars().count() + 1 + "verdict".len() - "ok".len(), "{t}");
    assert!(r.ends_with("  ok"), "{t}");
}

#[test]
fn mismatches_say_why_and_wide_cells_push_only_their_row() {
    let mut classes_differ = row("a_kernel_name_longer_than_18", &[("a", 10)], &[("b", 10)]);
    classes_differ.ok = false;
    classes_differ.core_harness_bytes = Some(-5);
    classes_differ.detail = Some("trace counted b where the kernel does a".into());
    let mut off = row("x", &[("a", 10)], &[("a", 5)]);
    off.ok = false;
    off.core_harness_bytes = None;
    off.dram_analytic = 0;
    off.dram_measured = Some(7);
    let t = table(&[classes_differ, off], BackendKind::Analytic);
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines.len(), 4, "{t}");
    // A row of cells that fit, without its verdict (the header's DRAM analytic overflows by one).
    let base = lines[0].chars().count() - "  verdict".len() - 1;
    assert!(lines[1].starts_with("a_kernel_name_longer_than_18 avx512 "), "{t}");
    assert!(lines[1].ends_with("n/a  MISMATCH (classes differ)"), "{t}");
    assert_eq!(lines[1].chars().count(), base + 10 + "  MISMATCH (classes differ)".len(), "{t}");
    assert_eq!(lines[2], "    trace counted b where the kernel does a");
    // A negative harness is shown but not subtracted; no DRAM analytic: an infinite error.
    assert!(lines[1].contains("       -5 "), "{t}");
    assert!(lines[3].contains(" 50.00% ") && lines[3].ends_with("7 (inf%)  MISMATCH"), "{t}");
    assert_eq!(lines[3].chars().count(), base + "  MISMATCH".len(), "{t}");
}
