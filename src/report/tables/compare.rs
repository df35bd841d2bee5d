//! `roofline compare`: the same kernels on a CPU and a GPU, as text.

use crate::model::ComputeRoof;
use crate::schema::documents::CompareRow;

/// One line naming the precision and roof of each side of a pair, their ratio, and a warning
/// when the two sides ran different precisions (different families of roofs).
pub fn precision_line(cpu: (&str, Option<&ComputeRoof>), gpu: (&str, Option<&ComputeRoof>)) -> String {
    let side = |(prec, roof): (&str, Option<&ComputeRoof>)| match roof {
        Some(r) => format!(
            "{} (roof {} {} {}{})",
            crate::model::precision_label(prec),
            r.label(),
            crate::schema::units::sig3(r.gflops),
            r.unit(),
            if r.empirical { "" } else { ", theoretical" }
        ),
        None => format!(
            "{} (no roof of this precision on that machine)",
            crate::model::precision_label(prec)
        ),
    };
    let mut line = format!("precision: CPU {} vs GPU {}", side(cpu), side(gpu));
    if let (Some(c), Some(g)) = (cpu.1, gpu.1) {
        line += &format!("; GPU/CPU roof {:.1}x", g.gflops / c.gflops);
    }
    if crate::model::precision_family(cpu.0) != crate::model::precision_family(gpu.0) {
        line += "; the two sides ran different precisions: the speedup compares unequal work";
    }
    line
}

/// The compute roofs the two sides of a compared row were read against, CPU then GPU.
pub type RowRoofs<'a> = (Option<&'a ComputeRoof>, Option<&'a ComputeRoof>);

/// Energy per unit of work beside the speedup: each side's GFLOP/J and pJ per flop, and how
/// many times less energy one side spends on the same work, with what each side counted.
pub fn energy_line(e: &crate::schema::documents::CompareEnergy) -> String {
    use crate::schema::units::sig3;
    let less = if e.ratio >= 1.0 {
        format!("the GPU spends {}x less energy per flop", sig3(e.ratio))
    } else {
        format!("the CPU spends {}x less energy per flop", sig3(1.0 / e.ratio))
    };
    let mut s = format!(
        "energy: CPU {} GFLOP/J ({} pJ/flop, {}), GPU {} GFLOP/J ({} pJ/flop, {}): {less}",
        sig3(e.cpu_gflop_per_joule),
        sig3(1e3 / e.cpu_gflop_per_joule),
        e.cpu_domain,
        sig3(e.gpu_gflop_per_joule),
        sig3(1e3 / e.gpu_gflop_per_joule),
        e.gpu_domain
    );
    if e.gpu_domain.starts_with("gpu") && e.cpu_domain != e.gpu_domain {
        s += " (the GPU's figure is its board alone: the host that drives it is not counted)";
    }
    s
}

/// Per kernel: times, rates, roof fractions and the speedup, then the precision line and the
/// caveats. `roofs` holds each row's roofs, in the rows' order.
pub fn compare_table(rows: &[CompareRow], roofs: &[RowRoofs]) -> String {
    let mut table =
        String::from("kernel            CPU ms     GPU ms   CPU GFLOP/s   GPU GFLOP/s  CPU roof%  GPU roof%  GPU/CPU speedup\n");
    for (r, (cpu_roof, gpu_roof)) in rows.iter().zip(roofs) {
        // Unknown values print as "-", never as 0.0 or NaN.
        let num = |x: Option<f64>, scale: f64, prec: usize| {
            x.filter(|v| v.is_finite())
                .map(|v| format!("{:.*}", prec, v * scale))
                .unwrap_or_else(|| "-".into())
        };
        let times = |x: Option<f64>| x.map(|v| format!("{v:.1}x")).unwrap_or_else(|| "-".into());
        let time = |t: f64| (t > 0.0).then_some(t);
        table += &format!(
            "{:<16} {:>8} {:>10} {:>13} {:>13} {:>10} {:>10} {:>10} (rate {})\n",
            r.kernel,
            num(time(r.cpu_seconds), 1e3, 3),
            num(time(r.gpu_seconds), 1e3, 3),
            num(r.cpu_gflops, 1.0, 1),
            num(r.gpu_gflops, 1.0, 1),
            num(r.cpu_roof_fraction, 100.0, 1),
            num(r.gpu_roof_fraction, 100.0, 1),
            times(r.speedup_time),
            times(r.speedup_rate)
        );
        table += &format!(
            "  {}\n",
            precision_line((&r.cpu_precision, *cpu_roof), (&r.gpu_precision, *gpu_roof))
        );
        if let Some(e) = &r.energy {
            table += &format!("  {}\n", energy_line(e));
        }
        for w in &r.caveats {
            table += &format!("  note: {w}\n");
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roof(precision: &str, isa: &str, gflops: f64, empirical: bool) -> ComputeRoof {
        ComputeRoof {
            precision: precision.into(),
            isa: isa.into(),
            fma: true,
            mix: false,
            gflops,
            empirical,
            spread: 0.0,
        }
    }

    fn row(kernel: &str) -> CompareRow {
        CompareRow {
            kernel: kernel.into(),
            cpu: format!("{kernel}@dram"),
            gpu: kernel.into(),
            cpu_seconds: 0.5,
            gpu_seconds: 0.002,
            cpu_gflops: Some(100.0),
            gpu_gflops: Some(25000.0),
            cpu_roof_fraction: Some(0.25),
            gpu_roof_fraction: Some(0.5),
            speedup_time: Some(250.0),
            speedup_rate: Some(250.0),
            caveats: Vec::new(),
            cpu_precision: "double".into(),
            gpu_precision: "double".into(),
            cpu_roof: None,
            gpu_roof: None,
            same_precision: true,
            energy: None,
        }
    }

    #[test]
    fn rows_with_their_precision_line_and_caveats() {
        let (c, g) = (roof("double", "avx512", 400.0, true), roof("double", "gpu", 50000.0, false));
        let mut unknown = row("a_kernel_name_wider_than_16");
        unknown.gpu_seconds = 0.0;
        unknown.gpu_gflops = None;
        unknown.gpu_roof_fraction = None;
        unknown.speedup_time = None;
        unknown.speedup_rate = None;
        unknown.gpu_precision = "tensor_bf16".into();
        unknown.caveats = vec!["GPU a: compute-bound at 5% of its roof".into()];
        let t = compare_table(&[row("dgemm"), unknown], &[(Some(&c), Some(&g)), (Some(&c), None)]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 6, "{t}");
        assert_eq!(
            lines[1],
            "dgemm             500.000      2.000         100.0       25000.0       25.0       50.0     250.0x (rate 250.0x)"
        );
        assert_eq!(
            lines[2],
            "  precision: CPU FP64 (roof AVX-512 FMA 400 GFLOP/s) vs GPU FP64 (roof GPU FMA 50000 GFLOP/s, theoretical); \
             GPU/CPU roof 125.0x"
        );
        // Unknown values are dashes, never 0 or NaN; a wide kernel name pushes its row.
        assert_eq!(
            lines[3],
            "a_kernel_name_wider_than_16  500.000          -         100.0             -       25.0          -          - (rate -)"
        );
        assert_eq!(
            lines[4],
            "  precision: CPU FP64 (roof AVX-512 FMA 400 GFLOP/s) vs GPU BF16 tensor (no roof of this precision on that \
             machine); the two sides ran different precisions: the speedup compares unequal work"
        );
        assert_eq!(lines[5], "  note: GPU a: compute-bound at 5% of its roof");
    }

    #[test]
    fn energy_per_flop_beside_the_speedup_when_both_sides_have_it() {
        let mut r = row("dgemm");
        r.energy = Some(crate::schema::documents::CompareEnergy {
            cpu_gflop_per_joule: 2.0,
            gpu_gflop_per_joule: 50.0,
            cpu_domain: "psys".into(),
            gpu_domain: "gpu0".into(),
            ratio: 25.0,
        });
        let t = compare_table(&[r.clone()], &[(None, None)]);
        let line = t.lines().find(|l| l.starts_with("  energy:")).unwrap();
        assert_eq!(
            line,
            "  energy: CPU 2.00 GFLOP/J (500 pJ/flop, psys), GPU 50.0 GFLOP/J (20.0 pJ/flop, gpu0): the GPU spends 25.0x less \
             energy per flop (the GPU's figure is its board alone: the host that drives it is not counted)"
        );
        let e = r.energy.as_mut().unwrap();
        (e.ratio, e.gpu_domain) = (0.5, "psys".into());
        let t = compare_table(&[r], &[(None, None)]);
        assert!(
            t.contains("the CPU spends 2.00x less energy per flop") && !t.contains("board alone"),
            "{t}"
        );
        assert!(!compare_table(&[row("x")], &[(None, None)]).contains("energy:"));
    }
}
