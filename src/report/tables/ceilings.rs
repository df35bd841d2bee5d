//! `roofline ceilings`: the empirical roofs as text.

use super::{Columns, or_dash};
use crate::ceilings::Options;
use crate::schema::ceilings::Ceilings;

/// The human-readable table (only the thread counts asked for).
pub fn table(c: &Ceilings, opts: &Options) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let m = &c.machine;
    let _ = writeln!(
        s,
        "{} ({}), {} CPUs{}{}",
        m.brand,
        m.microarchitecture.as_deref().unwrap_or("unknown microarchitecture"),
        m.logical_cpus,
        m.hypervisor.as_ref().map(|h| format!(", hypervisor {h}")).unwrap_or_default(),
        if c.quick { ", quick" } else { "" }
    );
    let caches: Vec<String> = m
        .caches
        .iter()
        .map(|x| {
            format!(
                "L{} {} /{}",
                x.level,
                crate::schema::units::fmt_bytes(x.size_bytes as f64),
                x.shared_by_threads
            )
        })
        .collect();
    let _ = writeln!(s, "caches: {}", caches.join(", "));
    let want = |t: u32| opts.threads.iter().any(|x| *x as u32 == t);
    let _ = writeln!(
        s,
        "\ncompute (GFLOP/s median, GOP/s for int8/int16; flop/cycle per thread at the clock measured at that ISA; isa amx = tiles)"
    );
    let cols = Columns::new(" ")
        .left(7)
        .left(7)
        .left(8)
        .right(3)
        .right(10)
        .right(6)
        .right(10)
        .right(8)
        .right(7);
    let _ = writeln!(
        s,
        "{}",
        cols.line(["prec", "isa", "mode", "thr", "GFLOP/s", "GHz", "flop/cyc", "% peak", "spread"])
    );
    for x in c.compute.iter().filter(|x| want(x.threads)) {
        let cells = [
            x.precision.clone(),
            x.isa.clone(),
            x.mode.clone(),
            x.threads.to_string(),
            format!("{:.1}", x.gflops),
            or_dash(x.ghz, 2),
            or_dash(x.flop_per_cycle, 2),
            or_dash(x.percent_of_theoretical, 1),
            format!("{:.1}%", 100.0 * x.spread),
        ];
        let _ = writeln!(s, "{}", cols.line(cells));
    }
    for x in c.compute.iter().filter(|x| want(x.threads) && !x.set_aside.is_empty()) {
        let _ = writeln!(s, "{}", set_aside_line(x));
    }
    for x in c.compute.iter().filter(|x| want(x.threads)) {
        if let Some(line) = unequal_threads_line(x) {
            let _ = writeln!(s, "{line}");
        }
    }
    let _ = writeln!(
        s,
        "\nbandwidth (GB/s = 1e9 B/s; `core` = load+store instructions, `+WA` adds write-allocate reads)"
    );
    let cols = Columns::new(" ")
        .left(5)
        .left(9)
        .left(7)
        .right(3)
        .right(11)
        .right(10)
        .right(10)
        .right(7);
    let _ = writeln!(
        s,
        "{}",
        cols.line(["level", "kernel", "isa", "thr", "working set", "core", "+WA", "spread"])
    );
    for x in c.bandwidth.iter().filter(|x| want(x.threads)) {
        let cells = [
            x.level.clone(),
            x.kernel.clone(),
            x.isa.clone(),
            x.threads.to_string(),
            crate::schema::units::fmt_bytes(x.working_set_bytes as f64),
            format!("{:.1}", x.gbs),
            format!("{:.1}", x.gbs_write_allocate),
            format!("{:.1}%", 100.0 * x.spread),
        ];
        let _ = writeln!(s, "{}", cols.line(cells));
    }
    if let Some(sw) = &c.sweep {
        let _ = writeln!(
            s,
            "\nsweep: {} ({}) ×{} threads, {} sizes",
            sw.kernel,
            sw.variant,
            sw.threads,
            sw.points.len()
        );
        for p in &sw.plateaus {
            let _ = writeln!(
                s,
                "  plateau {}: {} … {}: {:.1} GB/s ({} points)",
                p.index,
                crate::schema::units::fmt_bytes(p.from_bytes as f64),
                crate::schema::units::fmt_bytes(p.to_bytes as f64),
                p.value,
                p.points
            );
        }
        for b in &sw.boundaries {
            let _ = writeln!(
                s,
                "  {} ends near {} (between {} and {}); CPUID: {} (×{})",
                b.level,
                crate::schema::units::fmt_bytes(b.detected.estimate_bytes as f64),
                crate::schema::units::fmt_bytes(b.detected.last_inside_bytes as f64),
                crate::schema::units::fmt_bytes(b.detected.first_outside_bytes as f64),
                b.cpuid_bytes
                    .map(|x| crate::schema::units::fmt_bytes(x as f64))
                    .unwrap_or_else(|| "-".into()),
                or_dash(b.ratio, 2)
            );
        }
    }
    for n in &c.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}

/// A ceiling measured more than once: where the kept figure ran and what was set aside.
pub fn set_aside_line(x: &crate::schema::ceilings::ComputeCeiling) -> String {
    let on = |cpu: Option<u32>| cpu.map(|c| format!(" on CPU {c}")).unwrap_or_default();
    let aside: Vec<String> = x
        .set_aside
        .iter()
        .map(|a| match a.percent_of_theoretical {
            Some(p) => format!("{:.0} % of the unit's rate{}", p, on(a.cpu)),
            None => format!("{:.1}{}", a.gflops, on(a.cpu)),
        })
        .collect();
    format!(
        "  {} {} ×{}: kept the fastest of {} measurements{}; set aside as slow: {}",
        x.precision,
        x.isa,
        x.threads,
        x.set_aside.len() + 1,
        on(x.cpu),
        aside.join(", ")
    )
}

/// A team ceiling whose threads ran unequally: how many were slow, how slow, what the team
/// is worth, and the likely cause.
pub fn unequal_threads_line(x: &crate::schema::ceilings::ComputeCeiling) -> Option<String> {
    let u = x.unequal_threads.as_ref()?;
    Some(format!(
        "  {} {} {} ×{}: {} of {} threads ran at {:.0} % of the fastest one while all ran ({}); the team is worth {:.1} of its fastest thread",
        x.precision,
        x.isa,
        x.mode,
        x.threads,
        u.slow,
        x.threads,
        100.0 * u.slow_share,
        crate::schema::ceilings::UNEQUAL_THREADS_WHY,
        u.fastest_threads_worth
    ))
}

#[cfg(test)]
#[path = "ceilings_tests.rs"]
mod tests;
