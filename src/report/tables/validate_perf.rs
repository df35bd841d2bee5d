//! `roofline validate --backend perf|simulated`: a verdict per event class, as text.

use crate::schema::Source;
use crate::validate::perf::{PerfValidation, Sample};

/// The table `roofline validate --backend perf` prints.
pub fn table(v: &PerfValidation) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "counters: {} (platform {}){}",
        v.source.name(),
        v.platform,
        if v.source == Source::Simulated {
            " — SIMULATED PMU, a test instrument"
        } else {
            ""
        }
    );
    let _ = writeln!(
        s,
        "{:<28} {:<28} {:>16} {:>16}  verdict",
        "event class", "worst sample", "analytic", "measured"
    );
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
        let _ = writeln!(s, "{:<28} {:<28} {:>16} {:>16}  {}", r.class, what, a, m, r.verdict.describe());
        let _ = writeln!(s, "    events: {}", r.events.join(", "));
        for d in &r.detail {
            let _ = writeln!(s, "    {d}");
        }
    }
    for n in &v.notes {
        let _ = writeln!(s, "note: {n}");
    }
    s
}
