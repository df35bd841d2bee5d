//! CI performance gates: compare a report against a baseline, point by point and
//! metric by metric, under rules; exact checks for W and Q, statistical ones for time.
//!
//! Time-based metrics (`seconds`, `gflops`, `gbs.*`) with a relative rule are judged from every
//! repetition (`seconds_samples`, and W or Q over each repetition's time) with a one-sided
//! Mann-Whitney U test ([`stats`]) against the baseline's samples scaled by the tolerance: a
//! `seconds ≤ +5 %` rule fails only when the current times are significantly (p < α) larger
//! than 1.05 × the baseline's. The confidence reported is 1 − p. When either side has too few
//! repetitions for the test ever to reach α (one repetition, or e.g. 3 vs 3 at α = 0.05), the
//! rule is judged as a threshold on the medians, and the row says so.

pub mod format;
pub mod glob;
pub mod metrics;
pub mod rules;
pub mod stats;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::schema::stats::median;
use crate::schema::{Point, Report};

pub use format::{Format, render};
pub use rules::{Check, Rule, RuleSet, Severity};

pub const GATE_SCHEMA: &str = "roofline.gate/1";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    Pass,
    Fail,
    Warn,
}

/// How a row was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    Exact,
    Threshold,
    /// Relative rule on a time-based metric, judged on medians for lack of samples.
    MedianThreshold,
    MannWhitney,
    /// A point or metric present on one side only.
    Presence,
}

/// One metric of one point under one rule.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Row {
    pub point: String,
    pub metric: String,
    pub rule: String,
    pub baseline: Option<f64>,
    pub current: Option<f64>,
    /// Relative change, current / baseline − 1.
    pub change: Option<f64>,
    pub verdict: Verdict,
    pub method: Method,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// 1 − p of the statistical test.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub confidence: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub rows: usize,
    pub passed: usize,
    pub failed: usize,
    pub warnings: usize,
    pub new_points: Vec<String>,
    pub vanished_points: Vec<String>,
}

/// `roofline.gate/1`: the outcome of a gate.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateOutcome {
    pub schema: String,
    pub baseline: String,
    pub current: String,
    pub alpha: f64,
    pub passed: bool,
    pub summary: Summary,
    pub rows: Vec<Row>,
}

/// A point's key: its name, with the thread count when above 1 (sweeps repeat names).
fn key(p: &Point) -> String {
    if p.threads > 1 {
        format!("{} ({} threads)", p.name, p.threads)
    } else {
        p.name.clone()
    }
}

fn index<'a>(r: &'a Report, origin: &str) -> Result<Vec<(String, &'a Point)>> {
    let mut v: Vec<(String, &Point)> = r.points.iter().map(|p| (key(p), p)).collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    if let Some(w) = v.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(Error::input(
            format!("{origin}: point '{}' appears twice", w[0].0),
            "give points unique names (and thread counts)",
        ));
    }
    Ok(v)
}

/// Compare `current` against `baseline` under `rules`. The names label the reports in the
/// output and in errors (reports of different schema versions are refused).
pub fn compare(baseline: &Report, base_name: &str, current: &Report, cur_name: &str, rules: &RuleSet) -> Result<GateOutcome> {
    if baseline.schema != current.schema {
        return Err(Error::input(
            format!(
                "{cur_name}: schema '{}' differs from the baseline's '{}' ({base_name})",
                current.schema, baseline.schema
            ),
            "re-create both reports with the same roofline version (or --update-baseline)",
        ));
    }
    let base = index(baseline, base_name)?;
    let cur = index(current, cur_name)?;
    let mut rows = Vec::new();
    let mut new_points = Vec::new();
    let mut vanished_points = Vec::new();
    let mut names: Vec<&String> = base.iter().map(|(n, _)| n).chain(cur.iter().map(|(n, _)| n)).collect();
    names.sort();
    names.dedup();
    for name in names {
        let b = base.iter().find(|(n, _)| n == name).map(|(_, p)| *p);
        let c = cur.iter().find(|(n, _)| n == name).map(|(_, p)| *p);
        match (b, c) {
            (Some(b), Some(c)) => rows.extend(compare_points(name, b, c, rules)),
            (Some(_), None) => {
                // A point the current run says it could not run here (an ISA this CPU
                // lacks) is a warning with that reason, never a silent pass or a regression.
                match current.not_run.iter().find(|n| &n.name == name) {
                    Some(n) => rows.push(presence_row(name, Severity::Warn, &format!("not run here: {}", n.reason))),
                    None => {
                        vanished_points.push(name.clone());
                        rows.push(presence_row(
                            name,
                            rules.vanished_points,
                            "vanished: in the baseline, not in the current report",
                        ));
                    }
                }
            }
            (None, Some(_)) => {
                new_points.push(name.clone());
                rows.push(presence_row(name, rules.new_points, "new: not in the baseline"));
            }
            (None, None) => {}
        }
    }
    let count = |v: Verdict| rows.iter().filter(|r| r.verdict == v).count();
    let summary = Summary {
        rows: rows.len(),
        passed: count(Verdict::Pass),
        failed: count(Verdict::Fail),
        warnings: count(Verdict::Warn),
        new_points,
        vanished_points,
    };
    Ok(GateOutcome {
        schema: GATE_SCHEMA.into(),
        baseline: base_name.into(),
        current: cur_name.into(),
        alpha: rules.alpha,
        passed: summary.failed == 0,
        summary,
        rows,
    })
}

fn presence_row(name: &str, severity: Severity, note: &str) -> Row {
    Row {
        point: name.into(),
        metric: "-".into(),
        rule: "point present".into(),
        baseline: None,
        current: None,
        change: None,
        verdict: if severity == Severity::Fail { Verdict::Fail } else { Verdict::Warn },
        method: Method::Presence,
        p_value: None,
        confidence: None,
        note: Some(note.into()),
    }
}

fn failing(severity: Severity) -> Verdict {
    match severity {
        Severity::Fail => Verdict::Fail,
        Severity::Warn => Verdict::Warn,
    }
}

fn compare_points(name: &str, b: &Point, c: &Point, rules: &RuleSet) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for rule in &rules.rules {
        if rule.check == Check::Ignore || !glob::glob_match(&rule.points, &b.name) {
            continue;
        }
        for metric in metrics::matching(&rule.metric, Some(b), Some(c)) {
            if !seen.insert(metric.clone()) {
                continue;
            }
            for r in rules.applicable(&b.name, &metric) {
                rows.push(judge(name, &metric, b, c, r, rules.alpha));
            }
        }
    }
    rows
}

/// Judge one rule on one metric of a point present on both sides.
pub fn judge(name: &str, metric: &str, b: &Point, c: &Point, rule: &Rule, alpha: f64) -> Row {
    let bv = metrics::value(b, metric);
    let cv = metrics::value(c, metric);
    let mut row = Row {
        point: name.into(),
        metric: metric.into(),
        rule: rule.check.describe(),
        baseline: bv,
        current: cv,
        change: match (bv, cv) {
            (Some(b), Some(c)) if b != 0.0 => Some(c / b - 1.0),
            (Some(b), Some(c)) if b == c => Some(0.0),
            _ => None,
        },
        verdict: Verdict::Pass,
        method: Method::Threshold,
        p_value: None,
        confidence: None,
        note: None,
    };
    let bad = failing(rule.severity);
    // Absolute thresholds need only the current value.
    if let Check::Min(x) | Check::Max(x) = rule.check {
        row.method = Method::Threshold;
        match cv {
            None => {
                row.verdict = bad;
                row.note = Some("missing in the current report".into());
            }
            Some(v) => {
                let ok = if matches!(rule.check, Check::Min(_)) { v >= x } else { v <= x };
                if !ok {
                    row.verdict = bad;
                }
            }
        }
        return row;
    }
    let (Some(bval), Some(cval)) = (bv, cv) else {
        row.method = Method::Presence;
        if cv.is_none() {
            row.verdict = bad;
            row.note = Some("missing in the current report".into());
        } else {
            row.verdict = Verdict::Warn;
            row.note = Some("not in the baseline".into());
        }
        return row;
    };
    match rule.check {
        Check::Exact => {
            row.method = Method::Exact;
            if bval != cval {
                row.verdict = bad;
            }
        }
        Check::MaxIncrease(t) | Check::MaxDecrease(t) => {
            let increase = matches!(rule.check, Check::MaxIncrease(_));
            let factor = if increase { 1.0 + t } else { 1.0 - t };
            let threshold = |bv: f64, cv: f64| if increase { cv <= bv * factor } else { cv >= bv * factor };
            if !metrics::is_time_based(metric) {
                if !threshold(bval, cval) {
                    row.verdict = bad;
                }
                return row;
            }
            let bs = metrics::samples(b, metric);
            let cs = metrics::samples(c, metric);
            // A report with no timing (a trace-only measurement): a time rule cannot judge
            // it, and the output must say so rather than pass 0 against 0.
            let untimed = |p: &Point| p.seconds_samples.is_empty() && (p.seconds.is_nan() || p.seconds <= 0.0);
            if untimed(b) || untimed(c) {
                row.verdict = Verdict::Warn;
                row.note = Some(format!(
                    "not timed in the {}: time rules need native repetitions (measure --repeat R)",
                    match (untimed(b), untimed(c)) {
                        (true, true) => "baseline and the current report",
                        (true, false) => "baseline",
                        _ => "current report",
                    }
                ));
                return row;
            }
            let scaled: Vec<f64> = bs.iter().map(|v| v * factor).collect();
            // H1: current worse than the scaled baseline.
            let test = if increase {
                stats::mann_whitney_greater(&cs, &scaled)
            } else {
                stats::mann_whitney_greater(&scaled, &cs)
            };
            match test {
                Some(t) if t.min_p_value < alpha => {
                    row.method = Method::MannWhitney;
                    row.p_value = Some(t.p_value);
                    row.confidence = Some(1.0 - t.p_value);
                    if t.p_value < alpha {
                        row.verdict = bad;
                    }
                    row.note = Some(format!(
                        "baseline {} vs current {} repetitions, {}",
                        bs.len(),
                        cs.len(),
                        if t.exact { "exact p" } else { "normal approximation" }
                    ));
                }
                _ => {
                    row.method = Method::MedianThreshold;
                    let (bm, cm) = (median(&bs).unwrap_or(bval), median(&cs).unwrap_or(cval));
                    if !threshold(bm, cm) {
                        row.verdict = bad;
                    }
                    row.note = Some(format!(
                        "baseline {} vs current {} repetitions: too few for a statistical test at α = {alpha}; threshold on the medians",
                        bs.len().max(1),
                        cs.len().max(1)
                    ));
                }
            }
        }
        Check::Min(_) | Check::Max(_) | Check::Ignore => {}
    }
    row
}

#[cfg(test)]
mod tests;
