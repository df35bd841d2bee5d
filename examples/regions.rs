//! The smallest program with regions: one thread, a triad and a dot product, each in a region.
//!
//! ```text
//! cargo build --release --example regions
//! roofline measure -o regions.json -- target/release/examples/regions 100000 8
//! roofline report show regions.json
//! ```
//! gives three points: the whole run (what ran inside any region), `triad` and `dot`.
//! W per call: 2·n for each (a multiply and an add per element); core Q per call: triad 24·n
//! bytes (two loads, one store of 8 bytes), dot 16·n. With one thread its counts repeat exactly
//! from run to run, which makes it the stand-in program of the documentation's tests.
//! (`examples/rayon_regions.rs` is the same idea on a rayon pool.)

use roofline::{Backend, Session};
use std::hint::black_box;

fn triad(a: &mut [f64], b: &[f64], c: &[f64], s: f64) {
    for ((a, b), c) in a.iter_mut().zip(b).zip(c) {
        *a = b + s * c;
    }
}

fn dot(x: &[f64], y: &[f64]) -> f64 {
    x.iter().zip(y).map(|(a, b)| a * b).sum()
}

fn main() -> Result<(), roofline::Error> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1 << 16);
    let calls: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let b: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let c: Vec<f64> = (0..n).map(|i| (i as f64 * 0.11).cos()).collect();
    let mut a = vec![0.0; n];
    let mut session = Session::new(Backend::Auto)?;
    let mut check = 0.0;
    for _ in 0..calls {
        session.region("triad", || triad(black_box(&mut a), black_box(&b), black_box(&c), 3.0))?;
        check += session.region("dot", || dot(black_box(&a), black_box(&c)))?;
    }
    println!("n {n} calls {calls} checksum {check:.6e}");
    for t in session.regions() {
        println!("{:>6}: {} call(s), {:.3} ms", t.name, t.calls, t.seconds * 1e3);
    }
    Ok(())
}
