//! `roofline`: work W, traffic Q and time T of a kernel or a command, the machine's roofs,
//! and reports that say how close it is to them and why.
//!
//! The data path is machine → counters → model → report, and the library's surface follows it:
//! - **Regions**: [`Session`] marks regions of a program and counts their W, Q and T with a
//!   [`Backend`] (perf counters, the tracer outside the process, or time only); the C ABI
//!   (`include/roofline.h`) does the same for C, C++ and Fortran.
//! - **Reports**: [`Report`] is the one `roofline.report/1` document: the machine, its roofs
//!   ([`Roofs`]) and the measured [`Point`]s, each with its [`Flops`], [`Bytes`] and
//!   [`Provenance`]. [`Report::write`] renders it by extension (JSON, CSV, text, SVG, PNG,
//!   HTML); a [`View`] renders several together.
//! - **Roofs and the model**: a [`RoofSet`] of [`ComputeRoof`]s and [`BandwidthRoof`]s, and
//!   [`analyse`], which places a point against them ([`Analysis`]: attainable performance
//!   per model, the [`Bound`], advice).
//! - **The machine**: [`MachineModel`] (CPUID, topology, caches, clocks, theoretical peaks)
//!   and the [`Platform`] tables of `platforms/`; [`Ceilings`] are the measured roofs.
//! - [`criterion_support`] turns criterion's samples into a report; [`kernels`] is the kernel
//!   suite with its analytic counts.
//!
//! ```no_run
//! use roofline::{Backend, Session};
//! let mut session = Session::new(Backend::Auto)?;
//! let v = vec![1.0f64; 1 << 20];
//! let sum: f64 = session.region("sum", || v.iter().sum())?;
//! println!("{sum}");
//! session.report().write(std::path::Path::new("regions.json"))?;
//! # Ok::<(), roofline::Error>(())
//! ```
//!
//! Cargo features (all on by default; docs/region-api.md, "A light dependency"): `cli` (the
//! `roofline` and `cargo-roofline` binaries), `trace` (the ptrace backend, the simulated PMU,
//! `validate`, `criterion_support`), `plot` (SVG, PNG and HTML views), `gpu` (CUDA device
//! query and ceilings), `analysis` (the kernel suite and what is built on it, the machine
//! model, reading reports back). Without them the library is the region API, the perf and
//! time-only backends, CPU identification and the report schema.

#![deny(missing_docs)]
// Modules are private and shared by the features: what only a left-out feature uses (the CLI's
// tables, the analysis' environment probes) is dead in a reduced build. Dead code is checked in
// the full build (every feature).
#![cfg_attr(
    not(all(feature = "cli", feature = "gpu", feature = "plot", feature = "trace", feature = "analysis")),
    allow(dead_code, unused_imports)
)]

#[cfg(feature = "analysis")]
mod ceilings;
#[cfg(feature = "cli")]
mod cli;
mod counters;
#[cfg(feature = "trace")]
pub mod criterion_support;
#[cfg(feature = "cli")]
mod doctor;
mod error;
#[cfg(feature = "analysis")]
mod gate;
#[cfg(feature = "analysis")]
mod gpu;
#[cfg(feature = "analysis")]
mod jobs;
mod machine;
mod model;
mod region;
mod report;
mod schema;
mod util;
#[cfg(feature = "trace")]
mod validate;

pub use error::{Error, Result};

// The region API. The C ABI (`include/roofline.h`) is the `#[no_mangle]` functions of
// `region.rs` and the marker symbols; they are exported from the cdylib and staticlib whatever
// the module's visibility.
pub use counters::Measurement;
pub use counters::perf::CounterSpec;
#[cfg(feature = "trace")]
pub use counters::simulated::{Faults, SimulatedPmu};
pub use region::{
    Backend, Counting, MAX_SAMPLES, Mode, RegionTotals, Session, marker_calls, roofline_region_begin, roofline_region_end, software_events,
};

// Reports: the one document every backend produces and every view reads.
pub use report::{NamedReport, PlotKind, View};
#[cfg(feature = "analysis")]
pub use report::{read_ceilings, read_report};
pub use schema::extras::{RegionKernel, WorkRow};
pub use schema::report::{FusionChain, NotRun, REPORT_SCHEMA, SourceReport, level};
pub use schema::{Bound, Bytes, Environment, Flops, Point, PointExtras, Provenance, Report, Roofs, Source};

// Roofs and the model read against them.
pub use model::{Analysis, Attainable, BandwidthRoof, ComputeRoof, ComputeRoofUsed, Limiter, ModelKind, RoofSet, analyse, annotate};

// The machine.
pub use machine::platform::{Identify, Latency};
pub use machine::{
    ByIsa, Cache, CoreType, EventSpec, Frequency, IdentifiedBy, MACHINE_SCHEMA, MachineModel, Peaks, Pipes, Platform, ThreadScaling,
    set_platform, this_platform,
};
#[cfg(feature = "analysis")]
pub use machine::{DetectOptions, detect, detect_static};

// Empirical roofs.
#[cfg(feature = "analysis")]
pub use ceilings::load_or_measure;
#[cfg(feature = "analysis")]
pub use schema::ceilings::{CEILINGS_SCHEMA, Ceilings};

/// The kernel suite (its own crate, `roofline-kernels`): each kernel's variants and analytic
/// counts.
pub use roofline_kernels as kernels;

// The binaries' entry points (src/main.rs, src/bin/cargo-roofline.rs); not a library API.
#[cfg(feature = "cli")]
#[doc(hidden)]
pub use cli::{cargo_roofline::main as cargo_roofline_main, main as cli_main};

/// Internals that the integration tests, benches and fuzz targets drive directly (parsers,
/// planners, the tracer's entry points, plot geometry). Not a library API: nothing here is
/// stable, and rustdoc hides it.
#[doc(hidden)]
pub mod __private {
    pub use crate::util::available_cpus;

    /// CPUID dumps (`roofline machine --dump-cpuid`).
    #[cfg(feature = "analysis")]
    pub mod dump {
        pub use crate::machine::dump::{CpuidDump, parse};
    }

    /// perf_event: sysfs discovery, counter planning and reading, command runs.
    pub mod perf {
        #[cfg(feature = "analysis")]
        pub use crate::counters::perf::parse_group_read;
        pub use crate::counters::perf::{
            CounterSet, EventCount, SYSFS_PMUS, Scope, Target, core_counters_for, core_pmu, counters_for_platform, identify_platform,
            parse_cpu_list, plan_groups, scale, software_events,
        };
        #[cfg(feature = "trace")]
        pub use crate::counters::{command::CommandSpec, perf::run_command};
    }

    /// The platform a backend counts with (a `--platform` name or this machine's).
    pub use crate::counters::platform;

    /// The region-times files a traced or timed program leaves.
    #[cfg(feature = "trace")]
    pub use crate::counters::region_times::TakenRun;

    /// Report formatting and statistics.
    pub use crate::schema::{stats::median, units::sig3};

    /// The machine's identification.
    pub mod machine {
        pub use crate::machine::platform::MIXED_UNITS;
        #[cfg(feature = "analysis")]
        pub use crate::machine::{
            cpuid::CpuidFacts,
            dump::CpuidDump,
            from_dump,
            host::{count_cpu_list, parse_sysfs_size},
        };
    }

    /// `perf stat` import and the events `roofline events` lists.
    #[cfg(feature = "analysis")]
    pub mod perf_stat {
        pub use crate::counters::events::{perf_event_syntax, selected};
        pub use crate::counters::perf_stat::{ImportOptions, Resolved, import, parse, resolve};
    }

    /// The cache simulator.
    #[cfg(feature = "analysis")]
    pub mod cachesim {
        pub use crate::counters::cachesim::{
            AccessKind, CacheHierarchy, LevelConfig, Replacement, Sharing, Traffic, parse_cache_hierarchy, parse_cache_spec,
        };
    }

    /// The ptrace backend's entry points and its ELF readers.
    #[cfg(feature = "trace")]
    pub mod trace {
        pub use crate::counters::trace::{
            AccessSink, CountingSink, TraceMode, TraceOptions, tally::class_key, trace_command, trace_forked, trace_forked_with_sink,
        };

        /// The instruction classifier.
        pub mod classify {
            pub use crate::counters::trace::classify::classify;
        }

        /// ELF symbols and process maps.
        pub mod symbols {
            pub use crate::counters::trace::symbols::{demangle, parse_elf, parse_maps};
        }
    }

    /// CI gates.
    #[cfg(feature = "analysis")]
    pub use crate::gate::RuleSet;

    /// Jobs of ranks: the merge of a job directory, and the plain merge beside it.
    #[cfg(feature = "analysis")]
    pub mod jobs {
        pub use crate::jobs::merge::merge_job;
        pub use crate::report::merge::merge as merge_plain;
    }

    /// Plateau detection over a sweep.
    #[cfg(feature = "analysis")]
    pub use crate::ceilings::plateau::detect as detect_plateau;

    /// The report views' plot geometry.
    #[cfg(feature = "plot")]
    pub mod plot {
        pub use crate::report::labels::{MARKER_NUDGE, any_overlap};
        pub use crate::report::plot::{COMPACT, MIN_COLOR_DISTANCE, Panel, color_distance, plot_size, svg, svg_sized, text_pixels};
    }

    /// The report views' serializers.
    pub mod views {
        pub use crate::report::{csv::to_csv, json::document, table::render};
    }

    /// The GPU side: device, kernels, ceilings, Nsight Compute captures.
    #[cfg(feature = "analysis")]
    pub mod gpu {
        pub use crate::model::gpu::{arch_rates, roofs_from_gpu_ceilings};
        pub use crate::schema::gpu::GpuCeilings;

        /// Nsight Compute captures.
        pub mod ncu {
            #[cfg(feature = "gpu")]
            pub use crate::gpu::ncu::run;
            pub use crate::gpu::ncu::{
                Capture, HFMA2_MOVE_MAX_SHARE, HIERARCHICAL_METRICS, KernelSummary, fp16_may_be_register_moves, parse, parse_value, points,
            };
        }

        /// NVTX regions of a capture.
        pub mod regions {
            pub use crate::gpu::regions::{region_points, regions};
        }

        #[cfg(feature = "gpu")]
        pub use crate::gpu::kernels::Suite;

        /// The CUDA device.
        #[cfg(feature = "gpu")]
        pub mod device {
            pub use crate::gpu::device::{driver_present, open, query};
        }

        /// cuBLASLt.
        #[cfg(feature = "gpu")]
        pub mod blas {
            pub use crate::gpu::blas::present;
        }

        /// GPU ceilings.
        #[cfg(feature = "gpu")]
        pub mod ceilings {
            pub use crate::gpu::ceilings::{Options, measure, measure_sm_clock};
        }

        /// The GPU kernel runs.
        #[cfg(feature = "gpu")]
        pub mod run {
            pub use crate::gpu::run::{KERNELS, run};
        }
    }
}
