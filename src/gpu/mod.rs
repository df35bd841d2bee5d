//! NVIDIA GPUs: device query and theoretical peaks (`device`), our kernels compiled at run
//! time (`kernels`), cuBLASLt GEMMs (`blas`), empirical ceilings (`ceilings`), suite runs (`run`) and Nsight Compute
//! captures (`ncu`, parsed with the small `csv` reader).
//!
//! The driver is loaded at run time (cudarc's dynamic loading): the same binary runs, and
//! its CPU commands work, where no NVIDIA driver is installed; GPU commands then exit 2.

//!
//! `ncu` and `csv` read files and need no driver: they are always built. The rest uses
//! cudarc, behind the `gpu` feature.

#[cfg(feature = "gpu")]
pub mod blas;
#[cfg(feature = "gpu")]
pub mod ceilings;
pub mod csv;
#[cfg(feature = "gpu")]
pub mod device;
#[cfg(feature = "gpu")]
pub mod energy;
pub mod fusion;
pub mod kernel_name;
#[cfg(feature = "gpu")]
pub mod kernels;
pub mod ncu;
pub mod peer;
pub mod regions;
#[cfg(feature = "gpu")]
pub mod run;
