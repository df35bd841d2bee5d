//! Speed of the trace backend (issue 6 targets):
//! - `kernel_loop`: a suite-style SIMD loop traced in flops mode: ≥ 1 M instructions/s;
//! - `binary/{flops,single_step}`: an ordinary dynamically linked program (`sort` of 8 lines)
//!   traced in flops mode (block breakpoints) and single-stepped (memory mode, the
//!   baseline): flops mode must be ≥ 5× faster.
//!
//! Run: `cargo bench --bench trace -- --noplot`. Throughput is reported in traced instructions per second.

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use roofline::counters::trace::{self, CountingSink, TraceMode, TraceOptions};

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
    let mut o = TraceOptions::default();
    let probe = trace::trace_command(&argv, &mut o).expect("trace sort");
    g.throughput(Throughput::Elements(probe.total.instructions));
    g.bench_function("binary/flops", |b| {
        b.iter(|| {
            let mut o = TraceOptions::default();
            trace::trace_command(&argv, &mut o).unwrap()
        })
    });
    g.bench_function("binary/single_step", |b| {
        b.iter(|| {
            let mut o = TraceOptions {
                mode: TraceMode::Memory,
                by_function: false,
                sink: Some(Box::new(CountingSink::default())),
            };
            trace::trace_command(&argv, &mut o).unwrap()
        })
    });
    g.finish();
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
