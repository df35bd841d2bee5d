//! The analytic backend: W and Q from the kernel suite's own formulas, T from a native run.
//!
//! [`run_kernel`] is the one entry point `roofline run`, `roofline sweep` and the profile job
//! use: one instance per thread (each its own data), a pinned team timed by
//! `roofline_kernels::runner::time_team`, and a [`Measurement`] whose provenance says
//! flops = analytic, bytes (core, dram) = analytic, seconds = native.

use std::collections::BTreeMap;

use roofline_kernels::runner::{Repeat, time_team_observed};
use roofline_kernels::{Counts, Kernel, Variant};

use crate::counters::Measurement;
use crate::error::{Error, Result};
use crate::report::schema::level;
use crate::report::{Flops, Provenance, Source};

/// What to run: a kernel at a size and variant on a team of threads.
#[derive(Clone, Copy)]
pub struct KernelRun<'a> {
    pub kernel: &'a dyn Kernel,
    /// Size in the kernel's unit (`Kernel::size_unit`).
    pub n: usize,
    pub variant: Variant,
    pub threads: usize,
    pub repeat: Repeat,
    /// Check one instance against the scalar f64 reference before timing.
    pub verify: bool,
}

/// Run `kernel` at size `n` and `variant` on `threads` pinned threads and measure it:
/// W and Q analytic (summed over the threads' instances), T native (every repetition).
pub fn run_kernel(kernel: &dyn Kernel, n: usize, variant: Variant, threads: usize, repeat: Repeat) -> Result<Measurement> {
    run(
        &KernelRun {
            kernel,
            n,
            variant,
            threads,
            repeat,
            verify: false,
        },
        &|_, _| {},
    )
}

/// [`run_kernel`] with options and a per-sample callback (`(count, seconds)`, for progress).
pub fn run(spec: &KernelRun, on_sample: &(dyn Fn(usize, f64) + Sync)) -> Result<Measurement> {
    let k = spec.kernel;
    if spec.threads == 0 {
        return Err(Error::input("0 threads", "use --threads 1 or more"));
    }
    if !k.variants().contains(&spec.variant) {
        return Err(Error::input(
            format!("{} has no {} variant", k.name(), spec.variant),
            "see `roofline kernels` for its variants",
        ));
    }
    if !roofline_kernels::check::runnable(spec.variant) {
        return Err(Error::input(
            format!("this CPU cannot run the {} variant of {}", spec.variant, k.name()),
            "pick a variant `roofline kernels` lists as runnable",
        ));
    }
    let total = k.working_set_bytes(spec.n).saturating_mul(spec.threads as u64);
    roofline_kernels::check::require_memory(total).map_err(|e| {
        Error::input(
            format!("{} at size {}: {e}", k.name(), spec.n),
            "use a smaller --size or --bytes, or fewer threads",
        )
    })?;
    let mut instances = Vec::with_capacity(spec.threads);
    for t in 0..spec.threads {
        let inst = k
            .instance(spec.n, spec.variant, 0x5EED + t as u64)
            .map_err(|e| Error::input(format!("{} at size {}: {e}", k.name(), spec.n), "use a valid --size or --bytes"))?;
        instances.push(inst);
    }
    if spec.verify
        && let Some(first) = instances.first_mut()
        && let Err(e) = first.verify()
    {
        return Err(Error::CheckFailed(format!(
            "{} {} n={}: wrong result ({e}); this is a bug in the kernel suite",
            k.name(),
            spec.variant,
            spec.n
        )));
    }
    let counts: Counts = instances.iter().fold(Counts::default(), |mut acc, i| {
        let c = i.counts();
        for (class, f) in c.flops {
            acc.add_flops(class, f);
        }
        acc.core_load_bytes += c.core_load_bytes;
        acc.core_store_bytes += c.core_store_bytes;
        acc.dram_bytes += c.dram_bytes;
        acc
    });
    let samples = time_team_observed(instances, spec.repeat, on_sample);
    let mut m = measurement(
        &counts,
        k.effective_flops(spec.n, spec.variant).map(|e| e * spec.threads as u64),
        spec.threads,
    );
    m.seconds_samples = samples;
    let extra = &mut m.extra;
    extra.insert("kernel".into(), k.name().into());
    extra.insert("variant".into(), spec.variant.name().into());
    extra.insert("size".into(), spec.n.into());
    extra.insert("size_unit".into(), k.size_unit().into());
    extra.insert("working_set_bytes".into(), k.working_set_bytes(spec.n).into());
    extra.insert("core_load_bytes".into(), counts.core_load_bytes.into());
    extra.insert("core_store_bytes".into(), counts.core_store_bytes.into());
    Ok(m)
}

/// W and Q of `counts` as a measurement (no samples yet), analytic provenance.
pub fn measurement(counts: &Counts, effective: Option<u64>, threads: usize) -> Measurement {
    let by_class: BTreeMap<String, f64> = counts.flops.iter().map(|(c, f)| (c.key().to_string(), *f as f64)).collect();
    let total = counts.flops_total() as f64;
    let mut bytes = BTreeMap::new();
    bytes.insert(level::CORE.to_string(), counts.core_bytes() as f64);
    bytes.insert(level::DRAM.to_string(), counts.dram_bytes as f64);
    let prov = Provenance {
        flops: Some(Source::Analytic),
        bytes: [
            (level::CORE.to_string(), Source::Analytic),
            (level::DRAM.to_string(), Source::Analytic),
        ]
        .into(),
        seconds: Some(Source::Native),
        notes: vec![
            "dram = compulsory traffic of a cold working set (write-allocate included); caches serve it when the working set fits".into(),
        ],
    };
    Measurement {
        flops: Flops {
            total,
            effective: Some(effective.map(|e| e as f64).unwrap_or(total)),
            by_class,
        },
        bytes,
        provenance: Some(prov),
        seconds_samples: Vec::new(),
        threads: threads as u32,
        extra: BTreeMap::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn quick() -> Repeat {
        Repeat {
            min_total: Duration::from_millis(1),
            min_samples: 3,
            max_samples: 5,
            warmup: 1,
        }
    }

    #[test]
    fn measurement_sums_instances_and_says_where_numbers_came_from() {
        let k = roofline_kernels::api::find("stencil2d").unwrap();
        let threads = 2.min(crate::util::available_cpus()).max(1);
        let m = run(
            &KernelRun {
                kernel: k.as_ref(),
                n: 40,
                variant: Variant::Scalar,
                threads,
                repeat: quick(),
                verify: true,
            },
            &|_, _| {},
        )
        .unwrap();
        let one = k.counts(40, Variant::Scalar);
        assert_eq!(m.flops.total, (one.flops_total() * threads as u64) as f64);
        assert_eq!(m.bytes["core"], (one.core_bytes() * threads as u64) as f64);
        assert_eq!(m.bytes["dram"], (one.dram_bytes * threads as u64) as f64);
        assert!((3..=5).contains(&m.seconds_samples.len()));
        assert!(m.seconds_samples.iter().all(|s| *s > 0.0));
        let p = m.provenance.clone().unwrap();
        assert_eq!(p.flops, Some(Source::Analytic));
        assert_eq!(p.seconds, Some(Source::Native));
        assert_eq!(p.bytes["core"], Source::Analytic);
        let point = m.into_point("stencil2d");
        assert_eq!(point.threads, threads as u32);
        assert!(point.gflops.unwrap() > 0.0);
    }

    #[test]
    fn refusals_are_input_errors() {
        let k = roofline_kernels::api::find("spmv").unwrap();
        let e = run_kernel(k.as_ref(), 0, Variant::Scalar, 1, quick()).unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let e = run_kernel(k.as_ref(), usize::MAX / 64, Variant::Scalar, 1, quick()).unwrap_err();
        assert_eq!(e.exit_code(), 2, "{e}");
        assert!(run_kernel(k.as_ref(), 10, Variant::Scalar, 0, quick()).is_err());
    }
}
