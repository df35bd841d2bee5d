//! The GPU machine model: what the driver says (through cudarc, loaded at run time so the
//! binary runs where CUDA is absent) and theoretical peaks from a per-architecture table.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::error::{Error, Result};
use cudarc::driver::{CudaContext, sys::CUdevice_attribute as Attr};

use crate::model::gpu::{arch_rates, theoretical_peaks};
use crate::schema::gpu::{GPU_MACHINE_SCHEMA, GpuMachine, GpuPeaks};

/// Whether the CUDA driver library can be loaded (cudarc panics on first use otherwise).
pub fn driver_present() -> bool {
    // SAFETY: is_culib_present only tries to dlopen the driver library and reports success;
    // it does not call into the library.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

pub fn no_driver() -> Error {
    Error::unavailable(
        "no NVIDIA driver: libcuda.so could not be loaded",
        "run on a machine with an NVIDIA GPU and its driver (CPU reports need no GPU)",
    )
}

/// Open device `ordinal`, checking for the driver first.
pub fn open(ordinal: usize) -> Result<Arc<CudaContext>> {
    if !driver_present() {
        return Err(no_driver());
    }
    CudaContext::new(ordinal).map_err(|e| {
        Error::unavailable(
            format!("cannot open GPU {ordinal}: {e}"),
            "check nvidia-smi; is the device visible (CUDA_VISIBLE_DEVICES)?",
        )
    })
}

/// Query the driver and compute theoretical peaks at `sm_ghz` (default: the maximum clock).
pub fn query(ctx: &Arc<CudaContext>, sm_ghz: Option<f64>) -> Result<GpuMachine> {
    let attr = |a: Attr| ctx.attribute(a).ok().filter(|v| *v > 0);
    let name = ctx.name().unwrap_or_else(|_| "unknown NVIDIA GPU".into());
    let cc = ctx
        .compute_capability()
        .map_err(|e| Error::unavailable(format!("GPU query failed: {e}"), "check the driver"))?;
    let sms = attr(Attr::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT).unwrap_or(0) as u32;
    let sm_clock_max_ghz = attr(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE).map(|khz| khz as f64 / 1e6);
    let memory_clock_ghz = attr(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE).map(|khz| khz as f64 / 1e6);
    let memory_bus_bits = attr(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH).map(|b| b as u32);
    let mut m = GpuMachine {
        schema: GPU_MACHINE_SCHEMA.into(),
        kind: "gpu".into(),
        ordinal: ctx.ordinal(),
        name,
        compute_capability: format!("{}.{}", cc.0, cc.1),
        sms,
        sm_clock_max_ghz,
        memory_clock_ghz,
        memory_bus_bits,
        memory_bytes: ctx.total_mem().unwrap_or(0) as u64,
        l2_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE).map(|b| b as u64),
        shared_per_sm_bytes: attr(Attr::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR).map(|b| b as u64),
        peaks: GpuPeaks::default(),
        ncu_peaks: BTreeMap::new(),
        warnings: Vec::new(),
        provenance: vec!["the CUDA driver's device attributes; peaks from the architecture table".into()],
    };
    m.peaks = theoretical_peaks(cc, sms, sm_ghz.or(sm_clock_max_ghz), memory_clock_ghz, memory_bus_bits);
    if arch_rates(cc).is_none() {
        m.warnings.push(format!(
            "compute capability {}.{} is not in the peak table: compute peaks unknown",
            cc.0, cc.1
        ));
    }
    Ok(m)
}
