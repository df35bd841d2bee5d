//! The rayon program of `rayon_regions`, marked with the dependency-free `roofline-marker`
//! crate instead of `roofline`'s `Session`: what a program profiled only from outside needs
//! (the marker symbols the tracer breakpoints, the region times for the native runs).
//!
//! ```text
//! cargo build --release --example marker_regions
//! roofline measure --backend trace -o regions.json -- target/release/examples/marker_regions 65536 4
//! ```
//! gives the same three points as `rayon_regions`: the whole run, `daxpy` and `dot`, each
//! region 2·n flops per call.

use rayon::prelude::*;
use roofline_marker::Markers;

/// Elements per partial sum of `dot`.
const CHUNK: usize = 4096;

fn daxpy(a: f64, x: &[f64], y: &mut [f64]) {
    y.par_iter_mut().zip(x.par_iter()).for_each(|(y, x)| *y += a * x);
}

/// The dot product's partial sums, one per chunk.
fn dot_partials(x: &[f64], y: &[f64]) -> Vec<f64> {
    x.par_chunks(CHUNK)
        .zip(y.par_chunks(CHUNK))
        .map(|(a, b)| a.iter().zip(b).fold(0.0, |s, (a, b)| s + a * b))
        .collect()
}

fn main() -> Result<(), roofline_marker::Error> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1 << 16);
    let calls: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let mut y: Vec<f64> = (0..n).map(|i| (i as f64 * 0.11).cos()).collect();
    let mut markers = Markers::new();
    let mut check = 0.0;
    for _ in 0..calls {
        markers.region("daxpy", || daxpy(0.5, &x, &mut y))?;
        let partials = markers.region("dot", || dot_partials(&x, &y))?;
        check += partials.iter().sum::<f64>();
    }
    println!("n {n} calls {calls} checksum {check:.6e}");
    for (name, t) in markers.regions() {
        println!("{name:>6}: {} call(s), {:.3} ms", t.calls, t.seconds * 1e3);
    }
    Ok(())
}
