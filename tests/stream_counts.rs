//! The streaming kernels' closed-form counts against an instrumented model that steps
//! through the loops as written (main loop, single vectors, remainder, reduction, NT peel)
//! and tallies every instruction's flops and bytes.

use roofline::kernels::stream::{Op, StreamKernel, stream_counts};
use roofline::kernels::{FlopClass, Kernel, Precision, Variant};
use std::collections::BTreeMap;

struct Tally {
    flops: BTreeMap<FlopClass, u64>,
    /// Flops of FMA instructions.
    fma: u64,
    load: u64,
    store: u64,
}

/// Step the loop structure of `op` for `n` elements, `peel` of them before alignment.
fn model(op: Op, prec: Precision, v: Variant, n: u64, peel: u64) -> Tally {
    let size = prec.bytes();
    let w = if v == Variant::Scalar {
        1
    } else {
        v.width_bits() as u64 / 8 / size
    };
    let sc = FlopClass::of(prec, 64, true);
    let vc = FlopClass::of(prec, v.width_bits(), v == Variant::Scalar);
    let mut t = Tally {
        flops: BTreeMap::new(),
        fma: 0,
        load: 0,
        store: 0,
    };
    // The vector loops' multiply-adds are FMA instructions on AVX2 and AVX-512 (the scalar
    // peels and remainders multiply then add, as the scalar and SSE variants do throughout).
    let fused = matches!(op, Op::Triad | Op::Daxpy | Op::Dot | Op::TriadNt) && matches!(v, Variant::Avx2 | Variant::Avx512);
    let mut add = |t: &mut Tally, c: FlopClass, f: u64| {
        if f > 0 {
            *t.flops.entry(c).or_insert(0) += f
        }
    };
    let fpe = op.flops_per_element();
    // One element-wise step over `k` active lanes of an instruction of width `lanes`.
    let step = |t: &mut Tally, class: FlopClass, active: u64, lanes: u64, add: &mut dyn FnMut(&mut Tally, FlopClass, u64)| {
        add(t, class, fpe * lanes);
        if fused && class == vc {
            t.fma += fpe * lanes;
        }
        t.load += op.reads() * active * size;
        t.store += op.writes() * active * size;
    };
    let mut i = 0;
    if op.non_temporal() {
        while i < peel.min(n) {
            step(&mut t, sc, 1, 1, &mut add);
            i += 1;
        }
    }
    let block = if matches!(op, Op::Dot | Op::Sum | Op::Load) { 8 } else { 4 };
    if v == Variant::Scalar {
        while i < n {
            step(&mut t, sc, 1, 1, &mut add);
            i += 1;
        }
    } else {
        while i + block * w <= n {
            for _ in 0..block {
                step(&mut t, vc, w, w, &mut add);
            }
            i += block * w;
        }
        while i + w <= n {
            step(&mut t, vc, w, w, &mut add);
            i += w;
        }
        if i < n {
            if v == Variant::Avx512 {
                step(&mut t, vc, n - i, w, &mut add);
            } else {
                while i < n {
                    step(&mut t, sc, 1, 1, &mut add);
                    i += 1;
                }
            }
        }
    }
    if matches!(op, Op::Dot | Op::Sum) {
        // 8 accumulators combined by 7 vector adds, then the lanes by w − 1 scalar adds.
        for _ in 0..7 {
            add(&mut t, vc, w);
        }
        for _ in 1..w {
            add(&mut t, sc, 1);
        }
    }
    t
}

#[test]
fn closed_form_counts_match_the_loop_model() {
    for prec in [Precision::F64, Precision::F32] {
        for op in Op::ALL {
            for v in Variant::ALL {
                if op.non_temporal() && v == Variant::Scalar {
                    continue;
                }
                for n in 1..150u64 {
                    for peel in [0u64, 1, 3] {
                        let c = stream_counts(op, prec, v, n as usize, peel as usize);
                        let m = model(op, prec, v, n, if op.non_temporal() { peel } else { 0 });
                        assert_eq!(c.flops, m.flops, "{op:?} {prec:?} {v} n={n} peel={peel}");
                        assert_eq!(c.fma_flops, m.fma, "{op:?} {prec:?} {v} n={n} peel={peel}");
                        assert_eq!(c.core_load_bytes, m.load, "{op:?} {prec:?} {v} n={n}");
                        assert_eq!(c.core_store_bytes, m.store, "{op:?} {prec:?} {v} n={n}");
                    }
                }
            }
        }
    }
}

#[test]
fn kernel_and_instance_counts_agree_for_aligned_arrays() {
    for k in roofline::kernels::stream::kernels() {
        for &v in k.variants().iter().filter(|v| v.supported()) {
            let inst = k.instance(1001, v, 7).unwrap();
            assert_eq!(inst.counts(), k.counts(1001, v), "{} {v}", k.name());
            assert!(k.working_set_bytes(k.size_for_bytes(1 << 20)) <= 1 << 20);
        }
    }
}

#[test]
fn misaligned_nt_instances_count_their_peel() {
    if !Variant::Avx512.supported() {
        return;
    }
    let k = StreamKernel {
        op: Op::StoreNt,
        precision: Precision::F64,
    };
    let mut inst = k.instance_misaligned(100, Variant::Avx512, 3, 3).unwrap();
    // 3 elements past a 64-byte boundary: 5 scalar stores reach the next one.
    let c = inst.counts();
    let aligned = k.counts(100, Variant::Avx512);
    assert_eq!(c.core_store_bytes, aligned.core_store_bytes);
    assert!(c.dram_bytes > aligned.dram_bytes, "peeled stores are ordinary: write-allocate");
    inst.verify().unwrap();
}
