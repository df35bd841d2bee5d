//! `trace_forked` (what `roofline validate --backend trace` runs each kernel through), and a
//! tracer beside other threads of the same process that have children of their own: it waits
//! only for the children of its own thread.

use roofline::__private::trace::{self, TraceMode};

/// A pinned loop: per iteration one 256-bit FMA with a 32-byte load and one scalar add.
#[inline(never)]
fn work(n: u64, x: &[f64; 4]) {
    for _ in 0..n {
        // SAFETY: reads 32 bytes from `x`, which is 32 bytes long; writes only ymm0/xmm2.
        unsafe {
            std::arch::asm!(
                "vfmadd231pd ymm0, ymm1, [{x}]",
                "addsd xmm2, xmm3",
                x = in(reg) x.as_ptr(),
                out("xmm0") _, out("xmm2") _,
                options(nostack, readonly),
            );
        }
    }
}

#[test]
fn forked_work_is_counted_exactly_and_only_the_work() {
    if !(std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")) {
        eprintln!("skipping: no AVX2/FMA");
        return;
    }
    let n = 1000
        + std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos() as u64
            % 5000;
    eprintln!("n = {n}");
    let x = [1.0f64, 2.0, 3.0, 4.0];
    let mut f = || work(std::hint::black_box(n), &x);
    let r = trace::trace_forked(&mut f, TraceMode::Flops, true).unwrap();
    // The harness around the work (the closure call through `dyn FnMut`) loads a few bytes
    // of its own, the same at any n: a second size isolates the loop's bytes exactly.
    let n0 = n / 2;
    let mut half = || work(std::hint::black_box(n0), &x);
    let base = trace::trace_forked(&mut half, TraceMode::Flops, false).unwrap().total;
    assert!(base.core_load - 32 * n0 < 128, "harness overhead {}", base.core_load - 32 * n0);
    let t = &r.total;
    let by: std::collections::BTreeMap<&str, u64> = t
        .flops
        .iter()
        .enumerate()
        .filter(|(_, v)| **v > 0)
        .map(|(i, v)| (trace::class_key(i), *v))
        .collect();
    assert_eq!(by.get("packed256_double"), Some(&(8 * n)));
    assert_eq!(by.get("scalar_double"), Some(&n));
    assert_eq!(t.core_load - base.core_load, 32 * (n - n0));
    assert_eq!(t.core_store, base.core_store);
    assert!(r.stats.stops < 64, "the loop runs natively: {} stops", r.stats.stops);
}

/// A tracer in one thread while another thread of the process spawns and waits for children
/// of its own (as a test harness, a doctor probe or the traced program's host does): the
/// tracer must not take those children's stops or exits, nor they the tracer's. Before the
/// tracer waited only for its own thread's children, both sides could hang, or the other
/// thread's wait failed with ECHILD.
#[test]
fn a_tracer_takes_no_other_threads_children() {
    let rounds = 8;
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let tracer_done = done_tx.clone();
    std::thread::spawn(move || {
        let x = [1.0f64, 2.0, 3.0, 4.0];
        for i in 0..rounds {
            let n = 200 + 37 * i as u64;
            let mut f = || work(std::hint::black_box(n), &x);
            let r = trace::trace_forked(&mut f, TraceMode::Flops, false).map(|r| r.total.instructions);
            tracer_done.send(("tracer", r.map(|_| ()).map_err(|e| e.to_string()))).unwrap();
        }
    });
    std::thread::spawn(move || {
        for _ in 0..rounds * 4 {
            let r = std::process::Command::new("true").status();
            let outcome = match r {
                Ok(s) if s.success() => Ok(()),
                Ok(s) => Err(format!("true exited with {s}")),
                Err(e) => Err(format!("waiting for our own child failed: {e}")),
            };
            done_tx.send(("spawner", outcome)).unwrap();
        }
    });
    let mut seen = std::collections::BTreeMap::new();
    for _ in 0..rounds * 5 {
        let (who, outcome) = done_rx
            .recv_timeout(std::time::Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("a side hung: finished so far {seen:?}"));
        outcome.unwrap_or_else(|e| panic!("{who}: {e}"));
        *seen.entry(who).or_insert(0) += 1;
    }
    assert_eq!(seen.get("tracer"), Some(&rounds));
    assert_eq!(seen.get("spawner"), Some(&(rounds * 4)));
}
