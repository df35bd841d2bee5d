//! Streaming kernels (copy, scale, add, triad, daxpy, dot, sum, load, store), f64 and f32.

use crate::api::Kernel;

/// The streaming kernels of the suite.
pub fn kernels() -> Vec<Box<dyn Kernel>> {
    Vec::new()
}
