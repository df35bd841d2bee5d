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
        for w in &r.caveats {
            table += &format!("  note: {w}\n");
        }
    }
    table
}
