//! Gate rules: which metric of which points may change how much.
//!
//! A rules file (TOML):
//! ```toml
//! [settings]
//! alpha = 0.05              # significance of the statistical time checks
//! new_points = "warn"       # a point only in the current report: "warn" or "fail"
//! vanished_points = "fail"  # a point only in the baseline
//! defaults = true           # start from the default rule set (false: only the rules below)
//!
//! [[rule]]
//! metric = "bytes.dram"     # a metric path; `*` and `?` allowed
//! points = "stream_*"       # glob on point names (default "*")
//! max_increase = 0.02       # or: exact = true, max_decrease, min, max, ignore = true
//! severity = "fail"         # or "warn"
//! ```
//! For one point and metric, a later rule replaces an earlier one of the same kind (so a file's
//! rules override the defaults), and `ignore = true` drops every earlier rule on that metric.

use serde::Deserialize;

use crate::error::{Error, Result};

use super::glob::glob_match;
use super::metrics::is_known_pattern;

/// What a rule demands of a metric.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Check {
    /// Current equals baseline.
    Exact,
    /// Current ≤ baseline × (1 + x); statistical for time-based metrics.
    MaxIncrease(f64),
    /// Current ≥ baseline × (1 − x); statistical for time-based metrics.
    MaxDecrease(f64),
    /// Current ≥ x (absolute).
    Min(f64),
    /// Current ≤ x (absolute).
    Max(f64),
    /// No check (removes earlier rules on the metric).
    Ignore,
}

impl Check {
    fn kind(&self) -> u8 {
        match self {
            Check::Exact => 0,
            Check::MaxIncrease(_) => 1,
            Check::MaxDecrease(_) => 2,
            Check::Min(_) => 3,
            Check::Max(_) => 4,
            Check::Ignore => 5,
        }
    }

    pub fn describe(&self) -> String {
        match self {
            Check::Exact => "exact".into(),
            Check::MaxIncrease(x) => format!("≤ +{}%", pct(*x)),
            Check::MaxDecrease(x) => format!("≥ -{}%", pct(*x)),
            Check::Min(x) => format!("≥ {x}"),
            Check::Max(x) => format!("≤ {x}"),
            Check::Ignore => "ignored".into(),
        }
    }
}

fn pct(x: f64) -> String {
    let s = format!("{:.3}", x * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Fail,
    Warn,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    pub metric: String,
    pub points: String,
    pub check: Check,
    pub severity: Severity,
}

/// A gate's rules (a rules file's `[settings]` and `[[rule]]`s, over the defaults unless they are turned off).
#[derive(Debug, Clone, PartialEq)]
pub struct RuleSet {
    /// Significance level of the statistical time checks.
    pub alpha: f64,
    /// What a point only in the current report is.
    pub new_points: Severity,
    /// What a point only in the baseline is.
    pub vanished_points: Severity,
    /// The rules, in order: for one point and metric a later rule replaces an earlier one of its kind.
    pub rules: Vec<Rule>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RulesFile {
    #[serde(default)]
    settings: Option<SettingsFile>,
    #[serde(default)]
    rule: Vec<RuleFile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SettingsFile {
    alpha: Option<f64>,
    new_points: Option<Severity>,
    vanished_points: Option<Severity>,
    defaults: Option<bool>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleFile {
    metric: String,
    #[serde(default)]
    points: Option<String>,
    #[serde(default)]
    exact: Option<bool>,
    #[serde(default)]
    max_increase: Option<f64>,
    #[serde(default)]
    max_decrease: Option<f64>,
    #[serde(default)]
    min: Option<f64>,
    #[serde(default)]
    max: Option<f64>,
    #[serde(default)]
    ignore: Option<bool>,
    #[serde(default)]
    severity: Option<Severity>,
}

pub const DEFAULT_ALPHA: f64 = 0.05;

impl Default for RuleSet {
    /// Exact W, tolerant Q, statistical time.
    fn default() -> RuleSet {
        let r = |metric: &str, check: Check| Rule {
            metric: metric.into(),
            points: "*".into(),
            check,
            severity: Severity::Fail,
        };
        RuleSet {
            alpha: DEFAULT_ALPHA,
            new_points: Severity::Warn,
            vanished_points: Severity::Fail,
            rules: vec![
                r("flops.total", Check::Exact),
                r("flops.effective", Check::Exact),
                r("flops.fma", Check::Exact),
                r("flops.by_class.*", Check::Exact),
                r("bytes.core", Check::MaxIncrease(0.01)),
                r("bytes.stack", Check::MaxIncrease(0.01)),
                r("bytes.l2", Check::MaxIncrease(0.02)),
                r("bytes.l3", Check::MaxIncrease(0.02)),
                r("bytes.dram", Check::MaxIncrease(0.02)),
                r("seconds", Check::MaxIncrease(0.05)),
                r("gflops", Check::MaxDecrease(0.05)),
                // A merged job's points: the balance of W is as exact as W; that of T is one
                // ratio of times (no repetitions to test), judged as a threshold.
                r("imbalance.flops", Check::Exact),
                r("imbalance.seconds", Check::MaxIncrease(0.10)),
            ],
        }
    }
}

impl RuleSet {
    /// Parse a rules file; `origin` names it in errors (exit 2 with the file and the problem).
    pub fn parse(text: &str, origin: &str) -> Result<RuleSet> {
        let hint = "see `roofline gate --help` and examples/ci-gate/rules.toml for the format";
        let file: RulesFile = toml::from_str(text).map_err(|e| {
            let line = e.span().map(|s| text[..s.start.min(text.len())].lines().count().max(1));
            let loc = line.map(|l| format!(":{l}")).unwrap_or_default();
            Error::input(format!("{origin}{loc}: {}", e.message().trim()), hint)
        })?;
        let settings = file.settings.unwrap_or(SettingsFile {
            alpha: None,
            new_points: None,
            vanished_points: None,
            defaults: None,
        });
        let mut set = if settings.defaults.unwrap_or(true) {
            RuleSet::default()
        } else {
            RuleSet {
                rules: Vec::new(),
                ..RuleSet::default()
            }
        };
        if let Some(a) = settings.alpha {
            if !(a > 0.0 && a < 0.5) {
                return Err(Error::input(
                    format!("{origin}: alpha = {a} is not between 0 and 0.5"),
                    "use e.g. alpha = 0.05",
                ));
            }
            set.alpha = a;
        }
        set.new_points = settings.new_points.unwrap_or(set.new_points);
        set.vanished_points = settings.vanished_points.unwrap_or(set.vanished_points);
        for (i, r) in file.rule.into_iter().enumerate() {
            let at = format!("{origin}: rule {} (metric \"{}\")", i + 1, r.metric);
            if !is_known_pattern(&r.metric) {
                return Err(Error::input(
                    format!("{at}: unknown metric"),
                    "metrics: flops.total, flops.effective, flops.fma, flops.by_class.<class>, bytes.<level>, ai.<level>, gbs.<level>, seconds, gflops, roof_fraction, threads",
                ));
            }
            let mut checks = Vec::new();
            if r.exact == Some(true) {
                checks.push(Check::Exact);
            }
            if r.ignore == Some(true) {
                checks.push(Check::Ignore);
            }
            let finite = |name: &str, v: f64, nonneg: bool| -> Result<f64> {
                if !v.is_finite() || (nonneg && v < 0.0) {
                    return Err(Error::input(
                        format!("{at}: {name} = {v} is not a {}number", if nonneg { "non-negative " } else { "" }),
                        hint,
                    ));
                }
                Ok(v)
            };
            if let Some(x) = r.max_increase {
                checks.push(Check::MaxIncrease(finite("max_increase", x, true)?));
            }
            if let Some(x) = r.max_decrease {
                let x = finite("max_decrease", x, true)?;
                if x > 1.0 {
                    return Err(Error::input(
                        format!("{at}: max_decrease = {x} is more than 100%"),
                        "a fraction: 0.05 is 5%",
                    ));
                }
                checks.push(Check::MaxDecrease(x));
            }
            if let Some(x) = r.min {
                checks.push(Check::Min(finite("min", x, false)?));
            }
            if let Some(x) = r.max {
                checks.push(Check::Max(finite("max", x, false)?));
            }
            if checks.len() != 1 {
                return Err(Error::input(
                    format!(
                        "{at}: needs exactly one of exact, max_increase, max_decrease, min, max, ignore (has {})",
                        checks.len()
                    ),
                    hint,
                ));
            }
            set.rules.push(Rule {
                metric: r.metric,
                points: r.points.unwrap_or_else(|| "*".into()),
                check: checks[0],
                severity: r.severity.unwrap_or(Severity::Fail),
            });
        }
        Ok(set)
    }

    /// Read and parse a rules file.
    pub fn load(path: &std::path::Path) -> Result<RuleSet> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            Error::input(
                format!("--rules {}: cannot read ({e})", path.display()),
                "pass a readable TOML rules file",
            )
        })?;
        RuleSet::parse(&text, &path.display().to_string())
    }

    /// The rules that apply to `metric` of point `point`, after overrides.
    pub fn applicable(&self, point: &str, metric: &str) -> Vec<&Rule> {
        let mut out: Vec<&Rule> = Vec::new();
        for r in &self.rules {
            if !glob_match(&r.points, point) || !glob_match(&r.metric, metric) {
                continue;
            }
            if r.check == Check::Ignore {
                out.clear();
                continue;
            }
            out.retain(|o| o.check.kind() != r.check.kind());
            out.push(r);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_overrides_defaults() {
        let text = r#"
[settings]
alpha = 0.01
new_points = "fail"

[[rule]]
metric = "bytes.dram"
points = "stream_*"
max_increase = 0.1

[[rule]]
metric = "gflops"
points = "noisy*"
ignore = true

[[rule]]
metric = "roof_fraction"
points = "dgemm"
min = 0.8
severity = "warn"
"#;
        let set = RuleSet::parse(text, "r.toml").unwrap();
        assert_eq!(set.alpha, 0.01);
        assert_eq!(set.new_points, Severity::Fail);
        assert_eq!(set.vanished_points, Severity::Fail);
        let dram = set.applicable("stream_triad", "bytes.dram");
        assert_eq!(dram.len(), 1);
        assert_eq!(dram[0].check, Check::MaxIncrease(0.1));
        assert_eq!(set.applicable("dgemm", "bytes.dram")[0].check, Check::MaxIncrease(0.02));
        assert!(set.applicable("noisy_one", "gflops").is_empty());
        assert_eq!(set.applicable("quiet", "gflops")[0].check, Check::MaxDecrease(0.05));
        assert_eq!(set.applicable("x", "flops.by_class.packed512_double")[0].check, Check::Exact);
        let roof = set.applicable("dgemm", "roof_fraction");
        assert_eq!((roof[0].check, roof[0].severity), (Check::Min(0.8), Severity::Warn));
        assert!(set.applicable("x", "roof_fraction").is_empty());

        let only = RuleSet::parse(
            "[settings]\ndefaults = false\n[[rule]]\nmetric = \"seconds\"\nmax = 2.0\n",
            "r.toml",
        )
        .unwrap();
        assert_eq!(only.rules.len(), 1);
    }

    #[test]
    fn bad_files_name_the_file_and_problem() {
        for (text, what) in [
            ("[[rule]]\nmetric = \"flops.totl\"\nexact = true\n", "unknown metric"),
            ("[[rule]]\nmetric = \"bytes.dram\"\n", "exactly one"),
            ("[[rule]]\nmetric = \"bytes.dram\"\nmin = 1\nmax = 2\n", "exactly one"),
            ("[[rule]]\nmetric = \"bytes.dram\"\nmax_increse = 0.1\n", "unknown field"),
            ("[settings]\nalpha = 2\n", "alpha"),
            ("[[rule]]\nmetric = \"gflops\"\nmax_decrease = 5\n", "100%"),
            ("[[rule]]\nmetric = \"gflops\"\nmax_increase = -1\n", "non-negative"),
            ("[[rule]]\nmetric = \"gflops\"\nmax_increase = nan\n", "number"),
            ("this is not toml", "r.toml"),
            ("[[rule]]\nmetric = \"gflops\"\nmin = 1\nseverity = \"loud\"\n", "r.toml"),
        ] {
            let e = RuleSet::parse(text, "r.toml").unwrap_err();
            assert_eq!(e.exit_code(), 2);
            let msg = e.to_string();
            assert!(msg.starts_with("r.toml"), "{msg}");
            assert!(msg.contains(what), "{text}: {msg}");
        }
    }
}
