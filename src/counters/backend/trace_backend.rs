//! `--backend trace`: the command traced once for W and Q, then timed natively; a suite
//! kernel's instances traced for W and core Q.

use std::collections::BTreeMap;

use roofline_kernels::{Kernel, Variant};

use super::*;
use crate::counters::analytic::{self, KernelRun};
use crate::counters::command::CommandSpec;
use crate::counters::trace::{self, TraceMode, tally::Tally};
use crate::counters::{BackendKind, Measurement, region_times};
use crate::error::{Error, Result};

/// The trace backend: ptrace and decoding count W and core Q exactly; with `--trace memory`
/// the cache simulator gives Q per level.
#[derive(Default)]
pub struct TraceBackend {
    /// W and core Q of one traced `run()` per team thread's instance of the suite kernel
    /// being counted (traced by [`Backend::prepare_kernel`]).
    tallies: Vec<Tally>,
}

impl Backend for TraceBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Trace
    }

    fn measure_command(&self, program: &Path, argv: &[String], opts: &CommandOptions) -> Result<CommandOutcome> {
        let cmd = CommandSpec {
            program: program.to_path_buf(),
            argv: argv.to_vec(),
            env: Vec::new(),
        };
        trace_command(&cmd, opts)
    }

    fn prepare_kernel(&mut self, kernel: &dyn Kernel, n: usize, variant: Variant, most_threads: usize) -> Result<()> {
        eprintln!(
            "roofline: tracing {} {} n={} ({} instance(s)) for W and core Q",
            kernel.name(),
            variant,
            n,
            most_threads
        );
        self.tallies.clear();
        for t in 0..most_threads {
            self.tallies.push(trace_instance(kernel, n, variant, ANALYTIC_SEED + t as u64)?);
        }
        Ok(())
    }

    /// T native and the rest analytic, W and core Q from the traced instances.
    fn count_kernel(&self, spec: &KernelRun, on_sample: &OnSample<'_>) -> Result<Measurement> {
        let mut m = analytic::run(spec, on_sample)?;
        use_traced_counts(&mut m, &self.tallies[..spec.threads.min(self.tallies.len())]);
        Ok(m)
    }
}

/// `--backend trace`: W and core Q by tracing the command once; with `--trace memory`, Q per
/// level from the cache simulator. T from `--repeat` native runs of the command afterwards
/// (argv, no shell, stdin/stdout/stderr inherited as in the perf path). The command's own
/// failure is passed through as its status.
pub(super) fn trace_command(cmd: &CommandSpec, opts: &CommandOptions) -> Result<CommandOutcome> {
    let sink: Option<Box<dyn trace::AccessSink>> =
        if opts.trace == TraceMode::Memory || (opts.trace == TraceMode::Reference && opts.cache.is_some()) {
            Some(Box::new(cache_hierarchy(opts.cache.as_deref())?))
        } else {
            None
        };
    let mut o = trace::TraceOptions {
        mode: opts.trace,
        by_function: opts.by_function,
        sink,
    };
    // With the simulator, the levels' bytes and its note are in `m` already (trace_command).
    let mut m = trace::measure_command(cmd, &mut o)?;
    if !opts.trace_timing || opts.single_run {
        return Ok(CommandOutcome::Measured(Box::new(m)));
    }
    // Always: a session in a native run keeps time where it finds the directory, and fails
    // for want of counters where it does not (a program whose markers the tracer missed).
    let collector = region_times::Collector::new()?;
    let (samples, runs) = match native_runs_with_regions(cmd, opts.repeat, "after the trace", Some(&collector))? {
        Ok(x) => x,
        Err(status) => return Ok(CommandOutcome::Failed { status }),
    };
    m.seconds_samples = samples;
    regions_timed(&mut m.regions, &runs);
    if let Some(note) = regions_not_traced(&m.regions, &runs) {
        eprintln!("roofline: {note}");
        m.provenance.get_or_insert_with(Default::default).notes.push(note);
    }
    m.extra.insert("repeats", serde_json::json!(opts.repeat));
    if let Some(p) = m.provenance.as_mut() {
        p.seconds = Some(crate::schema::Source::Native);
        p.notes.push(format!(
            "W and Q from one traced run; T from {} native run(s) after it",
            opts.repeat
        ));
    }
    Ok(CommandOutcome::Measured(Box::new(m)))
}

/// The seed `counters::analytic::run` gives thread `t`'s instance: `ANALYTIC_SEED + t`.
pub(super) const ANALYTIC_SEED: u64 = 0x5EED;

/// W and core Q of one `run()` of a fresh instance, traced in a forked child (as `roofline
/// validate` does). The count includes the few bytes of the call path around `run()`.
pub(super) fn trace_instance(kernel: &dyn Kernel, n: usize, variant: Variant, seed: u64) -> Result<Tally> {
    let mut inst = kernel
        .instance(n, variant, seed)
        .map_err(|e| Error::input(format!("{} at size {n}: {e}", kernel.name()), "use a valid --size or --bytes"))?;
    let mut work = || inst.run();
    Ok(trace::trace_forked(&mut work, TraceMode::Flops, false)?.total)
}

/// Replace the analytic W and core Q of `m` by the traced ones, summed over the team's
/// instances; DRAM Q stays analytic (the trace backend has no cache model in flops mode).
pub(super) fn use_traced_counts(m: &mut Measurement, tallies: &[Tally]) {
    use crate::schema::Source;
    use crate::schema::report::level;
    let mut sum = Tally::default();
    for t in tallies {
        sum.add_scaled(t, 1);
    }
    let by_class: BTreeMap<String, f64> = sum
        .flops
        .iter()
        .enumerate()
        .filter(|(_, v)| **v > 0)
        .map(|(i, v)| (trace::tally::class_key(i).to_string(), *v as f64))
        .collect();
    m.flops = crate::schema::Flops::of_classes(by_class);
    m.flops.effective = (sum.effective_unknown == 0).then_some(sum.effective as f64);
    m.flops.fma = Some(sum.fma_flops as f64);
    if m.flops.int_ops.is_some() {
        m.flops.int_ops_effective = (sum.effective_unknown == 0).then_some(sum.effective_int as f64);
    }
    m.bytes.insert(level::CORE.to_string(), (sum.core_load + sum.core_store) as f64);
    m.extra.insert("core_load_bytes", sum.core_load);
    m.extra.insert("core_store_bytes", sum.core_store);
    m.extra.insert("traced_instructions", sum.instructions);
    if let Some(p) = m.provenance.as_mut() {
        p.flops = Some(Source::Trace);
        p.bytes.insert(level::CORE.to_string(), Source::Trace);
        p.notes.push(
            "W and core Q traced (one run() per thread's instance; core Q includes the call path's few bytes around run(), under 1 KiB per instance, see `roofline validate`); dram analytic; T native"
                .into(),
        );
    }
}
