//! Speed of the trace backend:
//! - `kernel_loop`: a suite-style SIMD loop traced in flops mode: ≥ 1 M instructions/s;
//! - `binary/{flops,memory,single_step}`: an ordinary dynamically linked program (`sort` of 8
//!   lines) traced in flops mode (block breakpoints), in memory mode (addresses per block from
//!   the emulator) and single-stepped with every address fed (reference mode, the baseline):
//!   flops mode must be ≥ 5× faster than single-stepping, memory mode ≥ 2 M instructions/s.
//!
//! - `threads/*`: the same work traced in flops mode in a multi-threaded program and in a
//!   single-threaded one (every thread at block speed): OpenBLAS dgemm n=96 with 1 and
//!   2 threads, an OpenMP triad with 1 and 2 threads, a daxpy run by main or by one worker while
//!   main waits. Target: the threaded form at most 10× the single-threaded one, W identical.
//!   The fixtures are compiled with `cc` (skipped without it, or without OpenBLAS/OpenMP).
//!
//! Run: `cargo bench --bench trace -- --noplot`. Throughput is reported in traced instructions per second.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use roofline::__private::perf::CommandSpec;
use roofline::__private::trace::{self, CountingSink, TraceMode, TraceOptions};

/// A suite-style streaming loop: one block per iteration (load, multiply, add, advance).
#[inline(never)]
fn kernel_loop(n: u64, x: &[f64]) {
    let mut i = 0u64;
    let mask = (x.len() as u64 - 2) * 8;
    // SAFETY: reads 16 bytes at x + (i*16 & mask), inside `x` (mask keeps the offset below
    // len-2 elements); writes only xmm0/xmm1 and the named registers.
    unsafe {
        std::arch::asm!(
            "2:",
            "mov {o}, {i}",
            "shl {o}, 4",
            "and {o}, {m}",
            "movupd xmm0, [{x} + {o}]",
            "mulpd xmm0, xmm0",
            "addpd xmm1, xmm0",
            "add {i}, 1",
            "cmp {i}, {n}",
            "jb 2b",
            i = inout(reg) i,
            o = out(reg) _,
            m = in(reg) mask,
            x = in(reg) x.as_ptr(),
            n = in(reg) n,
            out("xmm0") _, out("xmm1") _,
            options(nostack, readonly),
        );
    }
    std::hint::black_box(i);
}

fn bench(c: &mut Criterion) {
    let x: Vec<f64> = (0..4096).map(|i| i as f64).collect();
    let n = 1_000_000u64;
    let mut run = || kernel_loop(std::hint::black_box(n), &x);
    let probe = trace::trace_forked(&mut run, TraceMode::Flops, false).expect("trace");
    let mut g = c.benchmark_group("trace");
    g.sample_size(10);
    g.throughput(Throughput::Elements(probe.total.instructions));
    g.bench_function("kernel_loop", |b| {
        b.iter(|| {
            let mut run = || kernel_loop(std::hint::black_box(n), &x);
            trace::trace_forked(&mut run, TraceMode::Flops, false).unwrap()
        })
    });

    let dir = std::env::temp_dir().join(format!("roofline-trace-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let input = dir.join("lines.txt");
    let lines: String = (0..8u64).map(|i| format!("{}\n", (i * 7919) % 1000)).collect();
    std::fs::write(&input, lines).unwrap();
    let argv = vec![
        "sort".to_string(),
        "-o".to_string(),
        "/dev/null".to_string(),
        input.display().to_string(),
    ];
    let sort = CommandSpec::resolve(&argv).expect("sort in PATH");
    let mut o = TraceOptions::default();
    let probe = trace::trace_command(&sort, &mut o).expect("trace sort");
    g.throughput(Throughput::Elements(probe.total.instructions));
    g.bench_function("binary/flops", |b| {
        b.iter(|| {
            let mut o = TraceOptions::default();
            trace::trace_command(&sort, &mut o).unwrap()
        })
    });
    g.bench_function("binary/single_step", |b| {
        b.iter(|| {
            let mut o = TraceOptions {
                mode: TraceMode::Reference,
                by_function: false,
                sink: Some(Box::new(CountingSink::default())),
            };
            trace::trace_command(&sort, &mut o).unwrap()
        })
    });
    g.bench_function("binary/memory", |b| {
        b.iter(|| {
            let mut o = TraceOptions {
                mode: TraceMode::Memory,
                by_function: false,
                sink: Some(Box::new(CountingSink::default())),
            };
            trace::trace_command(&sort, &mut o).unwrap()
        })
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

/// Compile a C fixture of tests/fixtures/trace into `dir`; None when cc or a library is missing.
fn build(dir: &std::path::Path, src: &str, flags: &[&str]) -> Option<String> {
    let exe = dir.join(src.trim_end_matches(".c"));
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/trace")
        .join(src);
    let ok = std::process::Command::new("cc")
        .arg("-O2")
        .arg("-o")
        .arg(&exe)
        .arg(&fixture)
        .args(flags)
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        eprintln!("skipping {src}: cc failed");
    }
    ok.then(|| exe.display().to_string())
}

/// A bench case: its name, the command, and the environment it runs with.
type Case = (String, Vec<String>, Vec<(&'static str, &'static str)>);

/// Threaded and single-threaded forms of the same work, traced in flops mode.
fn bench_threads(c: &mut Criterion) {
    let dir = std::env::temp_dir().join(format!("roofline-trace-threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut g = c.benchmark_group("threads");
    g.sample_size(10);
    let mut cases: Vec<Case> = Vec::new();
    if let Some(exe) = build(&dir, "blas_once.c", &["-lopenblas"]) {
        for t in ["1", "2"] {
            cases.push((
                format!("dgemm96/{t}"),
                vec![exe.clone(), "96".into()],
                vec![("OPENBLAS_NUM_THREADS", t)],
            ));
        }
    }
    if let Some(exe) = build(&dir, "omp_triad.c", &["-fopenmp"]) {
        for t in ["1", "2"] {
            cases.push((
                format!("omp_triad/{t}"),
                vec![exe.clone(), "200000".into(), "5".into()],
                vec![("OMP_NUM_THREADS", t), ("OMP_WAIT_POLICY", "passive")],
            ));
        }
    }
    if let Some(exe) = build(&dir, "worker_daxpy.c", &["-pthread"]) {
        cases.push(("daxpy/main".into(), vec![exe.clone(), "100000".into(), "20".into()], vec![]));
        cases.push((
            "daxpy/worker".into(),
            vec![exe.clone(), "100000".into(), "20".into(), "thread".into()],
            vec![],
        ));
    }
    // Memory mode on affine loops (addresses replayed from the loops' entry registers) with a
    // real three-level hierarchy: target ≥ 50 M traced instructions/s.
    if let Some(exe) = build(&dir, "worker_daxpy.c", &["-pthread"]) {
        for (name, extra) in [("memory/daxpy_main", None), ("memory/daxpy_worker", Some("thread"))] {
            let mut argv = vec![exe.clone(), "1000000".to_string(), "4".to_string()];
            argv.extend(extra.map(String::from));
            let sim = || {
                Box::new(roofline::__private::cachesim::parse_cache_hierarchy("L1=32KiB:8,L2=1MiB:16,L3=8MiB:16").unwrap())
                    as Box<dyn trace::AccessSink>
            };
            let mut o = TraceOptions {
                mode: TraceMode::Memory,
                by_function: false,
                sink: Some(sim()),
            };
            let cmd = CommandSpec::resolve(&argv).expect("the fixture built");
            let probe = trace::trace_command(&cmd, &mut o).expect("trace");
            eprintln!("{name}: {} instructions, levels {:?}", probe.total.instructions, probe.levels);
            g.throughput(Throughput::Elements(probe.total.instructions));
            g.bench_function(name, |b| {
                b.iter(|| {
                    let mut o = TraceOptions {
                        mode: TraceMode::Memory,
                        by_function: false,
                        sink: Some(sim()),
                    };
                    trace::trace_command(&cmd, &mut o).unwrap()
                })
            });
        }
    }
    for (name, argv, env) in &cases {
        for (k, v) in env {
            // SAFETY: set before the traced child is spawned; no other thread of this bench
            // reads the environment concurrently.
            unsafe { std::env::set_var(k, v) };
        }
        let cmd = CommandSpec::resolve(argv).expect("the fixture built");
        let mut o = TraceOptions::default();
        let probe = trace::trace_command(&cmd, &mut o).expect("trace");
        eprintln!(
            "{name}: W {} flops, {} instructions, {} threads",
            probe.total.flops_total(),
            probe.total.instructions,
            probe.stats.threads
        );
        g.throughput(Throughput::Elements(probe.total.instructions));
        g.bench_function(name.as_str(), |b| {
            b.iter(|| {
                let mut o = TraceOptions::default();
                trace::trace_command(&cmd, &mut o).unwrap()
            })
        });
        for (k, _) in env {
            // SAFETY: as above.
            unsafe { std::env::remove_var(k) };
        }
    }
    g.finish();
}

criterion_group!(benches, bench, bench_threads);
criterion_main!(benches);
