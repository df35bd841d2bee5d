//! A rayon program with two regions, as a Rust author writes one: each region wraps a
//! parallel loop, and the region means the loop, whichever pool threads run it.
//!
//! ```text
//! cargo build --release --example rayon_regions
//! roofline measure --backend trace -o regions.json -- target/release/examples/rayon_regions 65536 4
//! ```
//! gives three points: the whole run (what ran inside any region), `daxpy` and `dot`.
//! W per call: `daxpy` 2·n (a multiply and an add per element), `dot` 2·n (per chunk of
//! CHUNK elements, a multiply and an add per element; the partial sums are added up outside
//! the region, so W does not depend on how rayon splits the work).
//! Under `roofline measure` the session keeps time (`Backend::Auto` never fails there); the
//! native runs give each region its T.

use rayon::prelude::*;
use roofline::{Backend, Session};

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

fn main() -> Result<(), roofline::Error> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1 << 16);
    let calls: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let mut y: Vec<f64> = (0..n).map(|i| (i as f64 * 0.11).cos()).collect();
    let mut session = Session::new(Backend::Auto)?;
    let mut check = 0.0;
    for _ in 0..calls {
        session.region("daxpy", || daxpy(0.5, &x, &mut y))?;
        let partials = session.region("dot", || dot_partials(&x, &y))?;
        check += partials.iter().sum::<f64>();
    }
    println!("n {n} calls {calls} checksum {check:.6e}");
    for t in session.regions() {
        println!("{:>6}: {} call(s), {:.3} ms", t.name, t.calls, t.seconds * 1e3);
    }
    Ok(())
}
