//! Every streaming kernel and variant against the scalar f64 reference, through the public
//! registry: random inputs with a fresh seed (printed), sizes that are not multiples of any
//! vector width, misaligned starts, outputs poisoned by `verify`, and several threads.

use roofline::kernels::stream::{Op, SplitMix, StreamKernel};
use roofline::kernels::{Instance, Kernel, Variant};

fn fresh_seed() -> u64 {
    let s = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64;
    eprintln!("seed {s}");
    s
}

#[test]
fn all_kernels_all_variants_random_sizes_and_offsets() {
    let mut rng = SplitMix(fresh_seed());
    for k in roofline::kernels::api::all()
        .into_iter()
        .filter(|k| roofline::kernels::stream::kernels().iter().any(|s| s.name() == k.name()))
    {
        let op = *Op::ALL.iter().find(|o| o.name() == k.name().trim_end_matches("_f32")).unwrap();
        let sk = StreamKernel {
            op,
            precision: k.precision(),
        };
        for &v in k.variants() {
            if !v.supported() {
                assert!(
                    k.instance(64, v, 1).is_err(),
                    "{} {v}: unsupported variant must be refused",
                    k.name()
                );
                continue;
            }
            for _ in 0..6 {
                let n = 1 + (rng.next_u64() % 3000) as usize;
                let mis = (rng.next_u64() % 16) as usize;
                let mut inst = sk.instance_misaligned(n, v, rng.next_u64(), mis).unwrap();
                inst.verify().unwrap_or_else(|e| panic!("n={n} misalign={mis}: {e}"));
                // Running again (timing loops do) keeps the output valid for non-accumulating kernels.
                if op != Op::Daxpy {
                    inst.run();
                    inst.verify().unwrap();
                }
            }
        }
    }
}

#[test]
fn threaded_team_runs_every_instance() {
    let k = StreamKernel {
        op: Op::Triad,
        precision: roofline::kernels::Precision::F64,
    };
    let v = Variant::ALL.into_iter().rev().find(|v| v.supported()).unwrap();
    let team: Vec<Box<dyn Instance>> = (0..2).map(|i| k.instance(4099, v, i).unwrap()).collect();
    let samples = roofline::kernels::runner::time_team(
        team,
        roofline::kernels::runner::Repeat {
            min_total: std::time::Duration::from_millis(1),
            min_samples: 3,
            max_samples: 5,
            warmup: 1,
        },
    );
    assert!((3..=5).contains(&samples.len()));
    assert!(samples.iter().all(|s| *s > 0.0));
}
