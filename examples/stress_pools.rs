//! The thread patterns the trace backend must survive, one per mode, for the stress harness
//! (`tests/trace_stress.rs`, `scripts/trace-stress.sh`):
//!
//! ```text
//! stress_pools MODE N CALLS      MODE: global | inside | join | blocked
//! ```
//!
//! - `global`: rayon's global pool, made before the first region, runs each region's loop;
//! - `inside`: a pool built inside each region (its threads start and end in the region);
//! - `join`: nested `rayon::join` down to chunks of 1024 elements;
//! - `blocked`: scoped threads asleep in system calls while regions begin and end around them
//!   (a channel receive (futex), a pipe read, a sleep), woken between regions.
//!
//! Every mode does the same work in region `work`: per call, a multiply and an add per element
//! (2·N flops; partial sums are written out, never added inside the region), so W of `work` is
//! exactly 2·N·CALLS whichever threads ran it. Prints a checksum.

use rayon::prelude::*;
use roofline::{Backend, Session};
use std::io::{Read, Write};

const CHUNK: usize = 1024;

/// y += a·x on the pool in scope: 2 flops per element.
fn daxpy(a: f64, x: &[f64], y: &mut [f64]) {
    y.par_iter_mut().zip(x.par_iter()).for_each(|(y, x)| *y += a * x);
}

/// Each chunk's dot product into its slot of `out`, splitting with nested `join`.
fn dot_join(x: &[f64], y: &[f64], out: &mut [f64]) {
    if x.len() <= CHUNK {
        out[0] = x.iter().zip(y).fold(0.0, |s, (a, b)| s + a * b);
        return;
    }
    let half = x.len().div_ceil(CHUNK) / 2 * CHUNK;
    let (xl, xr) = x.split_at(half);
    let (yl, yr) = y.split_at(half);
    let (ol, or) = out.split_at_mut(half / CHUNK);
    rayon::join(|| dot_join(xl, yl, ol), || dot_join(xr, yr, or));
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "global".to_string());
    let n: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(1 << 15);
    let calls: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(4);
    let threads = std::env::var("RAYON_NUM_THREADS").ok().and_then(|t| t.parse().ok()).unwrap_or(2);
    let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
    let mut y: Vec<f64> = (0..n).map(|i| (i as f64 * 0.11).cos()).collect();
    // Time only where no backend counts (run natively to compare exit status and output).
    let mut session = Session::new(Backend::Auto).or_else(|_| Session::new(Backend::Analytic))?;
    let mut check = 0.0;
    match mode.as_str() {
        "global" => {
            for _ in 0..calls {
                session.region("work", || daxpy(0.5, &x, &mut y))?;
            }
        }
        "inside" => {
            for _ in 0..calls {
                session.region("work", || -> Result<(), rayon::ThreadPoolBuildError> {
                    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build()?;
                    pool.install(|| daxpy(0.5, &x, &mut y));
                    Ok(())
                })??;
            }
        }
        "join" => {
            let mut partials = vec![0.0; n.div_ceil(CHUNK)];
            for _ in 0..calls {
                session.region("work", || dot_join(&x, &y, &mut partials))?;
                check += partials.iter().sum::<f64>();
            }
        }
        "blocked" => {
            let (tx, rx) = std::sync::mpsc::channel::<usize>();
            let (mut pipe_r, mut pipe_w) = std::io::pipe()?;
            std::thread::scope(|s| -> Result<(), Box<dyn std::error::Error>> {
                s.spawn(move || rx.iter().count());
                s.spawn(move || {
                    let mut b = [0u8; 1];
                    let mut got = 0;
                    while pipe_r.read(&mut b).is_ok_and(|k| k == 1) {
                        got += 1;
                    }
                    got
                });
                s.spawn(|| {
                    for _ in 0..calls {
                        std::thread::sleep(std::time::Duration::from_micros(300));
                    }
                });
                for i in 0..calls {
                    session.region("work", || {
                        for (y, x) in y.iter_mut().zip(&x) {
                            *y += 0.5 * x;
                        }
                    })?;
                    tx.send(i)?;
                    pipe_w.write_all(b"x")?;
                    std::thread::sleep(std::time::Duration::from_micros(200));
                }
                drop(tx);
                drop(pipe_w);
                Ok(())
            })?;
        }
        other => {
            eprintln!("stress_pools: unknown mode '{other}' (global, inside, join or blocked)");
            std::process::exit(2);
        }
    }
    check += y.iter().sum::<f64>();
    println!("{mode} n {n} calls {calls} checksum {check:.6e}");
    Ok(())
}
