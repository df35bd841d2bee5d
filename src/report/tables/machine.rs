//! The human-readable form of the machine model (the default output of `roofline machine`).

use std::fmt::Write;

use super::Columns;
use crate::machine::{ByIsa, IdentifiedBy, MachineModel};
use crate::schema::units::fmt_bytes;

fn opt(v: Option<f64>, prec: usize) -> String {
    v.map(|x| format!("{x:.prec$}")).unwrap_or_else(|| "—".into())
}

pub fn render(m: &MachineModel) -> String {
    let mut s = String::new();
    let by = match m.identified_by {
        IdentifiedBy::CpuidModel => "cpuid model",
        IdentifiedBy::FeatureFlags => "feature flags",
        IdentifiedBy::PlatformOption => "platform option",
        IdentifiedBy::Generic => "generic",
    };
    let _ = writeln!(s, "CPU            {} ({})", m.brand, m.vendor);
    let _ = writeln!(
        s,
        "signature      family {:#x} model {:#x} stepping {}",
        m.family, m.model, m.stepping
    );
    let _ = writeln!(
        s,
        "micro-arch     {} [{}], identified by {by}",
        m.microarchitecture_name, m.microarchitecture
    );
    if !m.candidates.is_empty() {
        let _ = writeln!(s, "               other candidates: {}", m.candidates.join(", "));
    }
    if let Some(h) = &m.hypervisor {
        let _ = writeln!(s, "hypervisor     {h}");
    }
    let _ = writeln!(
        s,
        "topology       {} socket(s), {} core(s), {} thread(s), SMT {}",
        m.sockets,
        m.cores,
        m.threads,
        if m.smt { "on" } else { "off" }
    );
    for ct in &m.core_types {
        let _ = writeln!(s, "               {}-cores: {} CPUs", ct.kind, ct.cpus.len());
    }
    let _ = writeln!(s, "caches");
    for c in &m.caches {
        let _ = writeln!(
            s,
            "  L{} {:<8} {:>10}  {:>2}-way  {:>6} sets  {} B line  shared by {} thread(s) ({})",
            c.level,
            c.kind,
            fmt_bytes(c.size_bytes as f64),
            c.ways,
            c.sets,
            c.line_bytes,
            c.shared_by_threads,
            c.shared_by_source
        );
    }
    let _ = writeln!(s, "ISA            {}", m.isa.join(" "));
    let _ = writeln!(s, "FP pipes/core  ({})", m.fp_pipes_source);
    for (w, p) in &m.fp_pipes {
        let measured = m
            .fp_ops_per_cycle_measured
            .get(w)
            .map(|v| format!("   measured {v:.2} FP ops/cycle"))
            .unwrap_or_default();
        let _ = writeln!(s, "  {w:>3}-bit      fma {}  add {}  mul {}{measured}", p.fma, p.add, p.mul);
    }
    let f = &m.frequency_ghz;
    let _ = writeln!(
        s,
        "clock (GHz)    nominal {} ({})",
        opt(f.nominal, 3),
        f.nominal_source.as_deref().unwrap_or("unknown")
    );
    if m.measured {
        let chains: Vec<String> = f.chains.iter().map(|(k, v)| format!("{k}: {v:.3}")).collect();
        let _ = writeln!(s, "               measured {} ({})", opt(f.measured, 3), chains.join(", "));
    }
    if let Some(o) = f.override_ghz {
        let _ = writeln!(s, "               --frequency {o} (used for the peaks)");
    }
    // One column per ISA, in ByIsa::ISAS order.
    let cols = ByIsa::ISAS.iter().fold(Columns::new("").left(15), |c, _| c.right(9));
    let _ = writeln!(s, "{}", cols.line(std::iter::once("").chain(ByIsa::ISAS)));
    let row = |s: &mut String, name: &str, b: &ByIsa, prec: usize| {
        let cells = std::iter::once(name.to_string()).chain(ByIsa::ISAS.iter().map(|isa| opt(b.get(isa), prec)));
        let _ = writeln!(s, "{}", cols.line(cells));
    };
    if m.measured {
        row(&mut s, "clock 1 thread", &f.by_isa, 3);
        row(&mut s, "clock all thr.", &f.by_isa_all_threads, 3);
    }
    row(&mut s, "GF/s/core DP", &m.peak_gflops_per_core.double, 1);
    row(&mut s, "GF/s/core SP", &m.peak_gflops_per_core.single, 1);
    row(&mut s, "GF/s all DP", &m.peak_gflops.double, 1);
    row(&mut s, "GF/s all SP", &m.peak_gflops.single, 1);
    if !m.mixed_ops_per_cycle.is_empty() {
        let _ = writeln!(s, "mixed-precision peaks (platform table x clock; GOP/s for int8/int16)");
        // A rated unit without a clock (a CPUID dump of a CPU whose brand string and CPUID give
        // none, no --frequency) still shows its rate: "—" for the peaks, never "none".
        for (unit, ops) in &m.mixed_ops_per_cycle {
            let _ = writeln!(
                s,
                "  {unit:<14} {ops:>6} ops/cycle  {:>9} per core  {:>10} all cores",
                opt(m.peak_mixed_per_core.get(unit).copied(), 1),
                opt(m.peak_mixed.get(unit).copied(), 1)
            );
        }
    } else {
        let _ = writeln!(
            s,
            "mixed-precision peaks: none (no AMX, AVX-512 FP16/BF16 or VNNI unit rated for this CPU)"
        );
    }
    for (unit, why) in &m.mixed_unrated {
        let _ = writeln!(s, "  {unit:<14} no rated peak: {why}");
    }
    if !m.thread_scaling.is_empty() {
        let _ = writeln!(s, "FMA scaling    (widest ISA, double)");
        for t in &m.thread_scaling {
            let _ = writeln!(
                s,
                "  {:>4} thread(s) {:>10.1} GFLOP/s  efficiency {:.2}",
                t.threads, t.gflops, t.efficiency
            );
        }
    }
    if !m.bytes_per_cycle.is_empty() {
        let b: Vec<String> = m.bytes_per_cycle.iter().map(|(k, v)| format!("{k} {v}")).collect();
        let _ = writeln!(s, "bytes/cycle    {}", b.join(", "));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::tables::end_of;

    #[test]
    fn the_peaks_per_isa_sit_under_their_isa() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/cpuid/bdw_client.txt");
        let dump = crate::machine::dump::CpuidDump::load(std::path::Path::new(path)).unwrap();
        let m = crate::machine::from_dump(&dump, &Default::default()).unwrap();
        let t = render(&m);
        let lines: Vec<&str> = t.lines().collect();
        let head = lines.iter().position(|l| l.trim_start().starts_with("scalar")).unwrap();
        assert_eq!(
            lines[head],
            format!("{:<15}{:>9}{:>9}{:>9}{:>9}{:>9}", "", "scalar", "sse", "avx", "avx2", "avx512")
        );
        let dp = lines[head + 1];
        assert!(dp.starts_with("GF/s/core DP   "), "{t}");
        assert_eq!(dp.chars().count(), lines[head].chars().count(), "{t}");
        // Broadwell has no AVX-512: a dash under it.
        assert_eq!(end_of(lines[head], "avx512", 0), end_of(dp, "—", 20), "{t}");
        assert_eq!(end_of(lines[head], "avx2", 0), end_of(dp, "52.8", 30), "{t}");
    }
}
