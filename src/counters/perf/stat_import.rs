//! Import `perf stat -x,` output measured on another machine: parse the CSV rows, resolve each
//! event against a platform's table (raw `rUUEE`, `pmu/event=…,umask=…/`, symbolic names, sysfs
//! aliases), and turn the counts into a `roofline.report/1` point through the same formulas as
//! the perf backend ([`crate::counters::events`]).
//!
//! perf's printed counts are already scaled for multiplexing and its unit column already applies
//! the sysfs scale (CAS counts in MiB): the import flags multiplexed events and never rescales.

use std::collections::BTreeMap;

use serde_json::json;

use crate::counters::events::{self, Amount, EventValue};
use crate::error::{Error, Result};
use crate::machine::{EventSpec, Platform};
use crate::schema::{Environment, Point, PointExtras, Provenance, Report, Source};

/// Whether perf counted the event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Counted,
    NotCounted,
    NotSupported,
}

/// One `perf stat -x,` row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// 1-based line in the file.
    pub line: usize,
    pub status: Status,
    /// The printed (already scaled) value; 0 when not counted.
    pub value: f64,
    pub unit: String,
    pub event: String,
    /// Percentage of the enabled time the event was counting (100 = not multiplexed).
    pub running_pct: Option<f64>,
    /// Fields before the value: an interval timestamp (`-I`), a CPU, a socket and its CPU count.
    pub prefix: Vec<String>,
}

impl Row {
    /// The `-I` timestamp, when the row is one interval of several.
    pub fn interval(&self) -> Option<f64> {
        self.prefix.first().and_then(|p| p.trim().parse::<f64>().ok())
    }
}

/// Rows plus what was not a row.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Parsed {
    pub rows: Vec<Row>,
    /// Lines that are neither comments nor rows (e.g. the command's own output).
    pub skipped_lines: Vec<usize>,
    /// `# started on …`, when present.
    pub started: Option<String>,
}

fn value_like(s: &str) -> bool {
    let t = s.trim();
    t.starts_with("<not counted>") || t.starts_with("<not supported>") || (t.parse::<f64>().is_ok_and(|v| v.is_finite()))
}

fn numeric(s: &str) -> bool {
    s.trim().parse::<f64>().is_ok()
}

/// Split on commas, re-joining the commas inside a `pmu/term,term/` event (perf prints
/// `cpu/event=0xc7,umask=0x01/` with its commas even in CSV mode).
fn split_fields(line: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut open = false;
    for part in line.split(',') {
        if open && let Some(last) = out.last_mut() {
            last.push(',');
            last.push_str(part);
            if part.matches('/').count() % 2 == 1 {
                open = false;
            }
            continue;
        }
        out.push(part.to_string());
        // An odd number of slashes opens a term list that a later field closes.
        if part.matches('/').count() % 2 == 1 && part.contains('/') {
            open = true;
        }
    }
    out
}

/// Parse the text of a `perf stat -x,` output file. Errors only when nothing in it is a row.
pub fn parse(text: &str, origin: &str) -> Result<Parsed> {
    let mut p = Parsed::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_end_matches('\r');
        let ln = i + 1;
        let t = line.trim();
        if t.is_empty() {
            continue;
        }
        if let Some(c) = t.strip_prefix('#') {
            if let Some(s) = c.trim().strip_prefix("started on") {
                p.started = Some(s.trim().to_string());
            }
            continue;
        }
        match parse_row(line, ln) {
            Some(r) => p.rows.push(r),
            None => p.skipped_lines.push(ln),
        }
    }
    if p.rows.is_empty() {
        let why = if text.trim().is_empty() {
            "is empty".to_string()
        } else {
            format!(
                "has no `perf stat -x,` rows (line {} is not one)",
                p.skipped_lines.first().copied().unwrap_or(1)
            )
        };
        return Err(Error::input(
            format!("{origin}: {why}"),
            "collect with `perf stat -x, -o FILE -e … -- CMD` (see `roofline events`)",
        ));
    }
    Ok(p)
}

/// One row: `[prefix…,]value,unit,event[,variance],run-time,pct[,metric,metric-unit]`, where
/// the prefix is an interval timestamp (`-I`), a CPU (`-A`), or a socket/die/core and its CPU
/// count (`--per-socket` …). The value is the first field followed by a non-numeric unit and
/// a non-empty, non-numeric event name.
fn parse_row(line: &str, ln: usize) -> Option<Row> {
    let f = split_fields(line);
    let start = (0..f.len().min(4)).find(|&i| {
        i + 2 < f.len()
            && value_like(&f[i])
            && !numeric(&f[i + 1])
            && !value_like(&f[i + 1])
            && !f[i + 2].trim().is_empty()
            && !numeric(&f[i + 2])
            && !value_like(&f[i + 2])
    })?;
    let v = f[start].trim();
    let (status, value) = if v.starts_with("<not counted>") {
        (Status::NotCounted, 0.0)
    } else if v.starts_with("<not supported>") {
        (Status::NotSupported, 0.0)
    } else {
        let x: f64 = v.parse().ok()?;
        if !(x.is_finite() && x >= 0.0) {
            return None;
        }
        (Status::Counted, x)
    };
    let unit = f[start + 1].trim().to_string();
    let event = f[start + 2].trim().to_string();
    // After the event: an optional variance ("0.52%"), the run time, then the percentage.
    let mut rest = f[start + 3..].iter().map(|s| s.trim());
    let mut next = rest.next();
    if next.is_some_and(|s| s.ends_with('%')) {
        next = rest.next();
    }
    let running_pct = match (next, rest.next()) {
        (Some(rt), Some(pct)) if numeric(rt) => pct.parse::<f64>().ok().filter(|p| p.is_finite() && (0.0..=100.5).contains(p)),
        _ => None,
    };
    Some(Row {
        line: ln,
        status,
        value,
        unit,
        event,
        running_pct,
        prefix: f[..start].iter().map(|p| p.trim().to_string()).collect(),
    })
}

/// Bytes per unit for the byte units perf's sysfs scale can print.
fn byte_unit(unit: &str) -> Option<f64> {
    Some(match unit {
        "B" | "Bytes" | "bytes" => 1.0,
        "KiB" => 1024.0,
        "MiB" => 1024.0 * 1024.0,
        "GiB" => 1024.0 * 1024.0 * 1024.0,
        "kB" | "KB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        _ => return None,
    })
}

fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else {
        s.parse().ok()
    }
}

/// Strip an instance suffix: `uncore_imc_3` → `uncore_imc`, `amd_umc_0` → `amd_umc`.
fn pmu_base(pmu: &str) -> &str {
    match pmu.rsplit_once('_') {
        Some((base, n)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => pmu,
    }
}

fn same_pmu(spec_pmu: &str, row_pmu: &str) -> bool {
    let row = pmu_base(row_pmu);
    if spec_pmu == row {
        return true;
    }
    // `cpu` and `cpu_core` name the same core events; E-core rows never match P-core events.
    events::is_core_pmu(spec_pmu) && events::is_core_pmu(row) && row != "cpu_atom" && spec_pmu != "cpu_atom"
}

/// How one perf event name resolved.
#[derive(Debug, Clone, PartialEq)]
pub enum Resolved {
    /// An event of this platform's table.
    Event(EventSpec),
    /// Found in another platform's table (the name is unambiguous); says which.
    Borrowed(EventSpec, String),
    /// perf's `duration_time` (wall time).
    DurationTime,
    /// perf's `task-clock` (CPU time of the task).
    TaskClock,
    /// In no table: not counted, listed among the unknown events.
    Unknown,
}

fn matches_name(spec: &EventSpec, name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    spec.name.eq_ignore_ascii_case(&n)
        || spec.aliases.iter().any(|a| a.eq_ignore_ascii_case(&n))
        || spec.perf_name.as_deref().is_some_and(|p| p.eq_ignore_ascii_case(&n))
}

/// Resolve a perf event name against a platform's events.
pub fn resolve(event: &str, platform: &Platform) -> Resolved {
    let amd = platform.identify.vendor == "AuthenticAMD";
    let name = event.trim();
    let plain = name.split(':').next().unwrap_or(name);
    match plain {
        "duration_time" => return Resolved::DurationTime,
        "task-clock" | "cpu-clock" => return Resolved::TaskClock,
        _ => {}
    }
    // Raw `rNNNN` (core PMU).
    if let Some(hex) = plain.strip_prefix('r')
        && !hex.is_empty()
        && hex.len() <= 16
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
        && let Ok(cfg) = u64::from_str_radix(hex, 16)
    {
        let (ev, um, cm, inv, edge) = events::decode_core_config(cfg, amd);
        return platform
            .events
            .iter()
            .find(|s| {
                events::is_core_pmu(&s.pmu)
                    && s.perf_name.is_none()
                    && (s.event, s.umask, s.cmask, s.inv, s.edge) == (ev, um, cm, inv, edge)
            })
            .map(|s| Resolved::Event(s.clone()))
            .unwrap_or(Resolved::Unknown);
    }
    // `pmu/terms/modifiers`.
    if let Some((pmu, rest)) = name.split_once('/') {
        let terms = rest.rsplit_once('/').map(|(t, _)| t).unwrap_or(rest);
        if let Some(r) = resolve_terms(pmu, terms, platform, amd, name) {
            return r;
        }
        return Resolved::Unknown;
    }
    if let Some(s) = platform.events.iter().find(|s| matches_name(s, plain)) {
        return Resolved::Event(s.clone());
    }
    borrow(plain, platform, None)
}

fn resolve_terms(pmu: &str, terms: &str, platform: &Platform, amd: bool, full: &str) -> Option<Resolved> {
    let mut enc: BTreeMap<&str, u64> = BTreeMap::new();
    let mut symbolic: Option<&str> = None;
    for t in terms.split(',').map(str::trim).filter(|t| !t.is_empty()) {
        match t.split_once('=') {
            Some(("name", _)) => {}
            Some((k, v)) => {
                enc.insert(k.trim(), parse_num(v)?);
            }
            None if matches!(t, "inv" | "edge") => {
                enc.insert(t, 1);
            }
            None => symbolic = Some(t),
        }
    }
    if let Some(sym) = symbolic {
        // `uncore_imc/cas_count_read/`, `cpu_core/fp_arith_inst_retired.scalar_double/`
        let slashed = format!("{}/{}/", pmu_base(pmu), sym);
        let found = platform
            .events
            .iter()
            .find(|s| same_pmu(&s.pmu, pmu) && (matches_name(s, sym) || matches_name(s, &slashed) || matches_name(s, full)));
        return Some(match found {
            Some(s) => Resolved::Event(s.clone()),
            None => borrow(sym, platform, Some(pmu)),
        });
    }
    let (ev, um, cm, inv, edge) = match enc.get("config") {
        Some(cfg) => events::decode_core_config(*cfg, amd),
        None => (
            *enc.get("event")?,
            enc.get("umask").copied().unwrap_or(0),
            enc.get("cmask").copied().unwrap_or(0),
            enc.get("inv").copied().unwrap_or(0) != 0,
            enc.get("edge").copied().unwrap_or(0) != 0,
        ),
    };
    let rdwr = enc.get("rdwrmask").copied().unwrap_or(0);
    platform
        .events
        .iter()
        .find(|s| {
            same_pmu(&s.pmu, pmu)
                && s.perf_name.is_none()
                && (s.event, s.umask, s.cmask, s.inv, s.edge, s.rdwrmask) == (ev, um, cm, inv, edge, rdwr)
        })
        .map(|s| Resolved::Event(s.clone()))
}

/// A symbolic name this platform lacks but another platform's table has (e.g.
/// `fp_ret_sse_avx_ops.all` on Zen 1): same vendor only, first match.
fn borrow(name: &str, platform: &Platform, row_pmu: Option<&str>) -> Resolved {
    // Parsed once per process: a file may hold many unknown names.
    static EMBEDDED: std::sync::OnceLock<Vec<Platform>> = std::sync::OnceLock::new();
    for p in EMBEDDED.get_or_init(Platform::embedded) {
        if p.identify.vendor != platform.identify.vendor || p.key == platform.key {
            continue;
        }
        if let Some(s) = p
            .events
            .iter()
            .find(|s| matches_name(s, name) && row_pmu.is_none_or(|r| same_pmu(&s.pmu, r)))
        {
            return Resolved::Borrowed(s.clone(), p.key.clone());
        }
    }
    Resolved::Unknown
}

/// The platform a file of named events was most likely measured on, when no `--platform` was
/// given and this machine's table knows fewer of its events than another table does (e.g.
/// `fp_arith_inst_retired.*` and `uncore_imc_*/cas_count_*/` read on an AMD machine, or
/// `amd_umc_N/…/` rows, which exist from Zen 4 on, read on a Zen 3): the embedded platform that
/// resolves the most distinct events (ties: the first in table order), and how many it knows.
/// None when this machine's table does as well, or the file holds only raw `rUUEE` codes
/// (they name no family: `--platform` is then needed).
pub fn infer_platform(text: &str, origin: &str, this: Option<&Platform>) -> Option<(Platform, usize, usize)> {
    let parsed = parse(text, origin).ok()?;
    let mut events: Vec<&str> = parsed.rows.iter().map(|r| r.event.as_str()).collect();
    events.sort_unstable();
    events.dedup();
    let symbolic: Vec<&str> = events
        .into_iter()
        .filter(|e| {
            let plain = e.trim().trim_end_matches(":u").trim_end_matches(":k");
            !(plain.starts_with('r') && plain.len() > 1 && plain[1..].chars().all(|c| c.is_ascii_hexdigit()))
        })
        .collect();
    if symbolic.is_empty() {
        return None;
    }
    let known = |p: &Platform| symbolic.iter().filter(|e| matches!(resolve(e, p), Resolved::Event(_))).count();
    let here = this.map_or(0, known);
    let best = Platform::embedded()
        .into_iter()
        .map(|p| (known(&p), p))
        .fold(None, |acc: Option<(usize, Platform)>, (k, p)| match acc {
            Some((bk, bp)) if bk >= k => Some((bk, bp)),
            _ => Some((k, p)),
        })?;
    (best.0 > here).then_some((best.1, best.0, symbolic.len()))
}

/// Per resolved event: (spec, summed value, value is bytes, lowest running fraction).
type Sums = BTreeMap<String, (EventSpec, f64, bool, Option<f64>)>;

/// Add one counted row to its event's sum (rows per CPU, socket, instance or interval).
fn add(spec: EventSpec, r: &Row, sums: &mut Sums, warnings: &mut Vec<String>) {
    let bytes_unit = byte_unit(&r.unit);
    if bytes_unit.is_none() && !r.unit.is_empty() {
        warnings.push(format!(
            "line {}: unit '{}' of {} is not a byte unit: taken as a count",
            r.line, r.unit, r.event
        ));
    }
    let (amount, is_bytes) = match bytes_unit {
        Some(m) => (r.value * m, true),
        None => (r.value, false),
    };
    let e = sums.entry(spec.name.clone()).or_insert((spec, 0.0, is_bytes, None));
    e.1 += amount;
    e.2 = is_bytes;
    if let Some(p) = r.running_pct {
        let f = (p / 100.0).min(1.0);
        e.3 = Some(e.3.map_or(f, |o: f64| o.min(f)));
    }
}

/// What the caller knows beyond the file.
#[derive(Debug, Clone, Default)]
pub struct ImportOptions {
    /// Wall time of the measured run; overrides `duration_time`.
    pub seconds: Option<f64>,
    /// Point name.
    pub name: String,
    /// How the platform was chosen (`platform option`, `this machine (cpuid model)`).
    pub platform_source: String,
}

/// Parse, resolve and derive W/Q/T: a one-point `roofline.report/1` plus warnings for stderr.
pub fn import(text: &str, origin: &str, platform: &Platform, opts: &ImportOptions) -> Result<(Report, Vec<String>)> {
    let parsed = parse(text, origin)?;
    let mut warnings = Vec::new();
    if !parsed.skipped_lines.is_empty() {
        warnings.push(format!(
            "{origin}: skipped {} line(s) that are not perf stat rows (first: line {})",
            parsed.skipped_lines.len(),
            parsed.skipped_lines[0]
        ));
    }
    let mut rows = tally_rows(&parsed.rows, platform, &mut warnings);
    let values = event_values(std::mem::take(&mut rows.sums));
    require_w_or_q(&values, &rows.unknown, origin, platform)?;
    let seconds = wall_seconds(opts, rows.duration_ns, rows.interval_ns, origin)?;
    let d = events::derive(&values, Some(platform));
    if let Some(dram) = d.bytes.get(crate::schema::report::level::DRAM) {
        events::check_dram_plausible(*dram, seconds, &platform.key).map_err(|e| match e {
            Error::Input { cause, hint } => Error::input(format!("{origin}: {cause}"), hint),
            other => other,
        })?;
    }
    let prov = Provenance {
        flops: d.flops.as_ref().map(|_| Source::PerfStat),
        bytes: d.bytes.keys().map(|k| (k.clone(), Source::PerfStat)).collect(),
        seconds: Some(Source::PerfStat),
        notes: import_notes(&d, &rows, platform, opts),
        untrusted: Vec::new(),
    };
    let mut point = Point::new(
        opts.name.clone(),
        prov,
        d.flops.clone().unwrap_or_default(),
        d.bytes.clone(),
        1,
        vec![seconds],
    );
    if d.flops.is_none() {
        point.gflops = None;
    }
    point.extra = point_extra(&d, platform, rows.task_clock_s, std::mem::take(&mut rows.rows_json));
    let report = imported_report(point, platform, opts, parsed.started.clone(), origin)?;
    Ok((report, warnings))
}

/// What the rows add up to: the sums per resolved event, the run's wall and CPU time, and what
/// was not counted or has no meaning here.
#[derive(Default)]
struct RowTally {
    sums: Sums,
    /// The run's `duration_time`: per-socket or per-CPU copies of it are the one run (the
    /// largest is kept).
    duration_ns: Option<f64>,
    /// `duration_time` of `-I` intervals, which add up.
    interval_ns: f64,
    task_clock_s: Option<f64>,
    /// Events that no platform table gives a meaning, once each.
    unknown: Vec<String>,
    /// What a row perf did not count leaves out, once each.
    not_counted: Vec<String>,
    /// Events read through another platform's table: event → that platform.
    borrowed: BTreeMap<String, String>,
    /// Every row as read and as resolved (the point's `perf_stat_rows`).
    rows_json: Vec<serde_json::Value>,
}

/// Resolve each row and add it up (rows per CPU, socket, instance or interval).
fn tally_rows(rows: &[Row], platform: &Platform, warnings: &mut Vec<String>) -> RowTally {
    let mut t = RowTally::default();
    for r in rows {
        let res = resolve(&r.event, platform);
        t.rows_json.push(row_json(r, &res));
        if r.status != Status::Counted {
            let n = not_counted_note(r, &res);
            if !t.not_counted.contains(&n) {
                t.not_counted.push(n);
            }
            continue;
        }
        match res {
            Resolved::DurationTime => {
                let ns = duration_ns(r);
                // Intervals (-I) add up; per-socket or per-CPU copies of the one run do not.
                if r.interval().is_some() {
                    t.interval_ns += ns;
                } else {
                    t.duration_ns = Some(t.duration_ns.unwrap_or(0.0).max(ns));
                }
            }
            Resolved::TaskClock => *t.task_clock_s.get_or_insert(0.0) += task_clock_seconds(r),
            Resolved::Unknown => {
                if !t.unknown.contains(&r.event) {
                    t.unknown.push(r.event.clone());
                }
            }
            Resolved::Event(spec) => add(spec, r, &mut t.sums, warnings),
            Resolved::Borrowed(spec, from) => {
                t.borrowed.insert(r.event.clone(), from);
                add(spec, r, &mut t.sums, warnings);
            }
        }
    }
    t
}

/// A row as read and the event it resolved to, for the point's `perf_stat_rows`.
fn row_json(r: &Row, res: &Resolved) -> serde_json::Value {
    let resolved_name = match res {
        Resolved::Event(s) | Resolved::Borrowed(s, _) => s.name.clone(),
        Resolved::DurationTime => "duration_time".into(),
        Resolved::TaskClock => "task-clock".into(),
        Resolved::Unknown => String::new(),
    };
    json!({
        "line": r.line, "event": r.event, "value": r.value, "unit": r.unit,
        "status": match r.status { Status::Counted => "counted", Status::NotCounted => "not counted", Status::NotSupported => "not supported" },
        "running_pct": r.running_pct, "resolved": if resolved_name.is_empty() { None } else { Some(&resolved_name) },
    })
}

/// The note for a row perf did not count: which event, and what W or Q lacks for it.
fn not_counted_note(r: &Row, res: &Resolved) -> String {
    let missing = match res {
        Resolved::Event(s) | Resolved::Borrowed(s, _) if s.quantity == "flops" => ": W is missing its share",
        Resolved::Event(s) | Resolved::Borrowed(s, _) if s.quantity == "flops.fma" => ": flops.fma (the FMA share) is not reported",
        Resolved::Event(s) | Resolved::Borrowed(s, _) if s.quantity.starts_with("bytes.") => ": Q is missing its share",
        _ => "",
    };
    let what = if r.status == Status::NotSupported {
        "not supported"
    } else {
        "not counted"
    };
    format!("{} was {what}{missing}", r.event)
}

/// A `duration_time` row in nanoseconds (perf prints ns; other units are converted).
fn duration_ns(r: &Row) -> f64 {
    match r.unit.as_str() {
        "" | "ns" => r.value,
        "us" | "usec" => r.value * 1e3,
        "ms" | "msec" => r.value * 1e6,
        "s" | "sec" => r.value * 1e9,
        _ => r.value,
    }
}

/// A `task-clock` row in seconds (perf prints msec).
fn task_clock_seconds(r: &Row) -> f64 {
    match r.unit.as_str() {
        "msec" | "ms" => r.value / 1e3,
        "ns" => r.value / 1e9,
        "usec" | "us" => r.value / 1e6,
        _ => r.value / 1e3,
    }
}

/// The summed events as the event formulas take them: bytes where the unit was a byte unit.
fn event_values(sums: Sums) -> Vec<EventValue> {
    sums.into_values()
        .map(|(spec, v, is_bytes, frac)| EventValue {
            spec,
            amount: if is_bytes { Amount::Bytes(v) } else { Amount::Count(v) },
            running_fraction: frac,
        })
        .collect()
}

/// Refuse a file in which no event counts W or Q on `platform`: the wrong platform, or the
/// wrong events collected.
fn require_w_or_q(values: &[EventValue], unknown: &[String], origin: &str, platform: &Platform) -> Result<()> {
    if values
        .iter()
        .any(|v| v.spec.quantity == "flops" || v.spec.quantity.starts_with("bytes."))
    {
        return Ok(());
    }
    Err(Error::input(
        format!(
            "{origin}: no event in it is a {} FP or memory-traffic event (unresolved: {})",
            platform.name,
            if unknown.is_empty() {
                "none".to_string()
            } else {
                unknown.join(", ")
            }
        ),
        "pass the platform the file was measured on (--platform) and collect the events `roofline events` prints",
    ))
}

/// T: `--seconds` when given, else perf's `duration_time` (the run's, or its intervals' sum
/// when larger).
fn wall_seconds(opts: &ImportOptions, duration_ns: Option<f64>, interval_ns: f64, origin: &str) -> Result<f64> {
    let mut duration_ns = duration_ns;
    if interval_ns > 0.0 {
        duration_ns = Some(duration_ns.unwrap_or(0.0).max(interval_ns));
    }
    let seconds = match (opts.seconds, duration_ns) {
        (Some(s), _) => s,
        (None, Some(ns)) if ns > 0.0 => ns / 1e9,
        _ => {
            return Err(Error::input(
                format!("{origin}: no wall time (no duration_time row)"),
                "pass --seconds S, or collect with -e duration_time",
            ));
        }
    };
    if !(seconds > 0.0 && seconds.is_finite()) {
        return Err(Error::input(
            format!("--seconds {seconds}: must be a positive time"),
            "e.g. --seconds 1.5",
        ));
    }
    Ok(seconds)
}

/// The point's notes: the formulas' own, then multiplexing, rows not counted, events borrowed
/// from another table, events ignored, and where T came from.
fn import_notes(d: &events::Derived, rows: &RowTally, platform: &Platform, opts: &ImportOptions) -> Vec<String> {
    let mut notes = d.notes.clone();
    if !d.multiplexed.is_empty() {
        notes.push("perf-stat counts are printed already scaled for multiplexing: imported as printed, not rescaled".into());
    }
    notes.extend(rows.not_counted.iter().cloned());
    for (ev, from) in &rows.borrowed {
        notes.push(format!(
            "{ev} is not in the {} table: its meaning was taken from platform {from}",
            platform.key
        ));
    }
    if !rows.unknown.is_empty() {
        notes.push(format!("ignored events with no W/Q formula: {}", rows.unknown.join(", ")));
    }
    notes.push(match opts.seconds {
        Some(_) => "T from --seconds".to_string(),
        None => "T from perf's duration_time".to_string(),
    });
    notes
}

/// The point's extras: the platform, multiplexing, the DRAM split, cycles, instructions, the
/// clock, and every row as read.
fn point_extra(d: &events::Derived, platform: &Platform, task_clock_s: Option<f64>, rows_json: Vec<serde_json::Value>) -> PointExtras {
    let mut extra = PointExtras {
        instructions: d.instructions.and_then(serde_json::Number::from_f64),
        ..PointExtras::default()
    };
    extra.insert("platform", json!(platform.key));
    extra.insert("multiplexing", json!(d.multiplexed));
    extra.insert("flops_approximate", json!(d.flops_approximate));
    if let Some(v) = d.dram_read_bytes {
        extra.insert("dram_read_bytes", json!(v));
    }
    if let Some(v) = d.dram_write_bytes {
        extra.insert("dram_write_bytes", json!(v));
    }
    for (k, v) in [
        ("cycles", d.cycles),
        ("ref_cycles", d.ref_cycles),
        ("task_clock_seconds", task_clock_s),
    ] {
        if let Some(v) = v {
            extra.insert(k, json!(v));
        }
    }
    // Effective clock: cycles over task-clock (CPU time), not wall time — inherited and
    // system-wide cycles add up over threads and CPUs just like task-clock does.
    if let (Some(c), Some(t)) = (d.cycles, task_clock_s)
        && t > 0.0
    {
        extra.effective_ghz = Some(c / t / 1e9);
    }
    extra.insert("perf_stat_rows", json!(rows_json));
    extra
}

/// The one-point report, its machine named by the platform (the measuring machine was not
/// probed), validated.
fn imported_report(point: Point, platform: &Platform, opts: &ImportOptions, started: Option<String>, origin: &str) -> Result<Report> {
    let machine = json!({
        "microarchitecture": platform.key,
        "microarchitecture_name": platform.name,
        "identified_by": opts.platform_source,
        "note": "imported from perf stat output: the measuring machine's model was not probed",
    });
    let env = Environment {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        git_sha: option_env!("ROOFLINE_GIT_SHA").map(String::from),
        command_line: std::env::args().collect(),
        timestamp: started,
        ..Environment::default()
    };
    let mut report = Report::new(machine, env);
    report.points.push(point);
    report.validate(origin)?;
    Ok(report)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_keep_pmu_term_commas() {
        let f = split_fields("123,,cpu/event=0xc7,umask=0x01/,1000,100.00,,");
        assert_eq!(f[2], "cpu/event=0xc7,umask=0x01/");
        assert_eq!(f[3], "1000");
        let f = split_fields("5,,cpu/event=0x03,umask=0xff,name=x/u,7,50.00,,");
        assert_eq!(f[2], "cpu/event=0x03,umask=0xff,name=x/u");
    }

    #[test]
    fn rows_with_prefixes_variance_and_not_counted() {
        let r = parse_row("12345,,cycles,1000,100.00,,", 1).unwrap();
        assert_eq!((r.value, r.event.as_str(), r.running_pct), (12345.0, "cycles", Some(100.0)));
        // interval mode
        let r = parse_row("1.001234,5000,,instructions,1000,49.90,,", 1).unwrap();
        assert_eq!((r.value, r.running_pct), (5000.0, Some(49.9)));
        let r = parse_row("     0.043900260,<not counted>,msec,task-clock,0,100.00,,", 1).unwrap();
        assert_eq!(
            (r.status, r.unit.as_str(), r.event.as_str()),
            (Status::NotCounted, "msec", "task-clock")
        );
        // per-CPU and per-socket prefixes
        assert_eq!(parse_row("CPU3,77,,cycles,10,100.00,,", 1).unwrap().value, 77.0);
        let r = parse_row("S0,8,1234.56,MiB,uncore_imc/cas_count_read/,100,100.00,,", 1).unwrap();
        assert_eq!((r.value, r.unit.as_str()), (1234.56, "MiB"));
        // -r: variance field before the run time
        assert_eq!(parse_row("100,,cycles,0.52%,1000,75.00,,", 1).unwrap().running_pct, Some(75.0));
        let r = parse_row("<not counted>,,cpu/event=0xc7,umask=0x40/,0,0.00,,", 1).unwrap();
        assert_eq!(r.status, Status::NotCounted);
        assert_eq!(
            parse_row("<not supported>,,ref-cycles,0,100.00,,", 1).unwrap().status,
            Status::NotSupported
        );
        for bad in [
            "hello world",
            "1,2,3",
            ",,,",
            "-5,,cycles,1,100,,",
            "NaN,,cycles,1,100.00",
            "12,,",
            "",
        ] {
            assert!(parse_row(bad, 1).is_none(), "{bad}");
        }
    }

    #[test]
    fn resolution_by_raw_terms_and_names() {
        let skx = Platform::load("skx").unwrap();
        let name = |r: Resolved| match r {
            Resolved::Event(s) => s.name,
            other => format!("{other:?}"),
        };
        assert_eq!(name(resolve("r40c7", &skx)), "FP_ARITH_INST_RETIRED.512B_PACKED_DOUBLE");
        assert_eq!(
            name(resolve("cpu/event=0xc7,umask=0x10/u", &skx)),
            "FP_ARITH_INST_RETIRED.256B_PACKED_DOUBLE"
        );
        assert_eq!(name(resolve("cpu/config=0x01c7/", &skx)), "FP_ARITH_INST_RETIRED.SCALAR_DOUBLE");
        assert_eq!(
            name(resolve("fp_arith_inst_retired.scalar_double:u", &skx)),
            "FP_ARITH_INST_RETIRED.SCALAR_DOUBLE"
        );
        assert_eq!(name(resolve("uncore_imc/cas_count_read/", &skx)), "UNC_M_CAS_COUNT.RD");
        assert_eq!(name(resolve("uncore_imc_3/event=0x4,umask=0xc/", &skx)), "UNC_M_CAS_COUNT.WR");
        assert_eq!(name(resolve("unc_m_cas_count.wr", &skx)), "UNC_M_CAS_COUNT.WR");
        assert_eq!(name(resolve("cycles", &skx)), "CPU_CLK_UNHALTED.THREAD");
        assert_eq!(resolve("duration_time", &skx), Resolved::DurationTime);
        assert_eq!(resolve("task-clock", &skx), Resolved::TaskClock);
        assert_eq!(resolve("page-faults", &skx), Resolved::Unknown);
        assert_eq!(resolve("cpu/event=0xc7,umask=0x99/", &skx), Resolved::Unknown);
        let gnr = Platform::load("gnr").unwrap();
        assert_eq!(name(resolve("unc_m_cas_count_sch1.rd", &gnr)), "UNC_M_CAS_COUNT_SCH1.RD");
        let zen4 = Platform::load("zen4").unwrap();
        assert_eq!(name(resolve("fp_ret_sse_avx_ops.all", &zen4)), "fp_ret_sse_avx_ops.all");
        assert_eq!(name(resolve("amd_umc_2/event=0x0a,rdwrmask=0x2/", &zen4)), "umc_cas_cmd.wr");
        // Zen 1 has no `.all` event in its table: borrowed from a later Zen, said so.
        let zen1 = Platform::load("zen1").unwrap();
        assert!(matches!(resolve("fp_ret_sse_avx_ops.all", &zen1), Resolved::Borrowed(_, _)));
        // AMD raw codes carry event-select bits 8-11 at config bit 32.
        let zen3 = Platform::load("zen3").unwrap();
        assert_eq!(
            name(resolve("amd_df/event=0x107,umask=0x38/", &zen3)),
            "dram_channel_data_controller_4"
        );
        let adl = Platform::load("adl").unwrap();
        assert_eq!(
            name(resolve("cpu_core/event=0xc7,umask=0x04/", &adl)),
            "FP_ARITH_INST_RETIRED.128B_PACKED_DOUBLE"
        );
        assert_eq!(
            resolve("cpu_atom/cycles/", &adl),
            Resolved::Unknown,
            "E-core rows never count as P-core events"
        );
    }

    #[test]
    fn parse_rejects_text_without_rows() {
        let e = parse("hello\nworld\n", "x.csv").unwrap_err();
        assert!(e.to_string().contains("line 1"), "{e}");
        assert!(parse("", "x.csv").is_err());
        assert!(parse("# started on Mon\n\n", "x.csv").is_err());
    }

    #[test]
    fn intervals_add_up_and_socket_copies_do_not() {
        let zen4 = Platform::load("zen4").unwrap();
        let opts = ImportOptions {
            name: "t".into(),
            ..ImportOptions::default()
        };
        let interval = "     1.000100000,1000000000,ns,duration_time,1000000000,100.00,,\n\
                        \x20    1.000100000,1000000000,,fp_ret_sse_avx_ops.all,1000000000,100.00,,\n\
                        \x20    2.000200000,1000000000,ns,duration_time,1000000000,100.00,,\n\
                        \x20    2.000200000,3000000000,,fp_ret_sse_avx_ops.all,1000000000,100.00,,\n";
        let (r, _) = import(interval, "i.csv", &zen4, &opts).unwrap();
        assert_eq!(r.points[0].seconds, 2.0);
        assert_eq!(r.points[0].flops.total, 4e9);
        let sockets = "S0,96,2000000000,ns,duration_time,2000000000,100.00,,\n\
                       S1,96,2000000000,ns,duration_time,2000000000,100.00,,\n\
                       S0,96,1000,,fp_ret_sse_avx_ops.all,1,100.00,,\n\
                       S1,96,3000,,fp_ret_sse_avx_ops.all,1,100.00,,\n";
        let (r, _) = import(sockets, "s.csv", &zen4, &opts).unwrap();
        assert_eq!(r.points[0].seconds, 2.0);
        assert_eq!(r.points[0].flops.total, 4000.0);
    }
}
