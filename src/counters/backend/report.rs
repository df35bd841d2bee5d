//! The report of a measured command: this machine's summary, the environment, its points.

use std::path::Path;

use crate::counters::Measurement;
use crate::counters::perf::{self};
use crate::schema::{Environment, Report};

/// The report of a measured command: this machine's summary, the environment, one point
/// named after the program. A point whose W was not counted has no rate either.
pub fn command_report(argv: &[String], measurement: Measurement) -> Report {
    let name = Path::new(&argv[0])
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| argv[0].clone());
    let mut env = environment();
    env.measured_ghz = measurement.extra.effective_ghz;
    let mut report = Report::new(machine_summary(), env);
    let mut measurement = measurement;
    let measurement_regions = std::mem::take(&mut measurement.regions);
    let mut point = measurement.into_point(name);
    if point.provenance.flops.is_none() {
        point.gflops = None; // W was not counted: no rate either.
    }
    report.points.push(point);
    // One point per region of the region API's markers, after the whole run's.
    for r in measurement_regions {
        let mut p = r.measurement.into_point(r.name);
        if p.provenance.flops.is_none() {
            p.gflops = None;
        }
        report.points.push(p);
    }
    report
}

pub(super) fn machine_summary() -> serde_json::Value {
    let cpuid = raw_cpuid::CpuId::new();
    serde_json::json!({
        "vendor": cpuid.get_vendor_info().map(|v| v.as_str().to_string()),
        "brand": cpuid.get_processor_brand_string().map(|b| b.as_str().trim().to_string()),
        "microarchitecture": perf::identify_platform().map(|p| p.key),
    })
}

pub(super) fn environment() -> Environment {
    let cpuid = raw_cpuid::CpuId::new();
    Environment {
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        // roofline's own argv, which holds the measured command after `--`.
        command_line: std::env::args().collect(),
        hypervisor: cpuid.get_hypervisor_info().map(|h| format!("{:?}", h.identify())),
        kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .ok()
            .map(|s| s.trim().to_string()),
        host: std::fs::read_to_string("/proc/sys/kernel/hostname")
            .ok()
            .map(|s| s.trim().to_string()),
        ..Environment::default()
    }
}
