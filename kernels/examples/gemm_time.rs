use roofline_kernels::{api, Variant};
use std::time::Instant;
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).map(|s| s.as_str()).unwrap_or("dgemm");
    let n: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1024);
    let v = Variant::from_name(args.get(3).map(|s| s.as_str()).unwrap_or("avx512")).unwrap();
    let k = api::find(name).unwrap();
    let mut inst = k.instance(n, v, 1).unwrap();
    let flops = k.counts(n, v).flops_total() as f64;
    inst.run();
    let mut best = f64::MAX;
    for _ in 0..5 { let t = Instant::now(); inst.run(); best = best.min(t.elapsed().as_secs_f64()); }
    println!("{name} n={n} {v}: {:.4} s  {:.2} GFLOP/s", best, flops / best / 1e9);
}
