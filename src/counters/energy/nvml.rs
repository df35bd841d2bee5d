//! The GPU board's own energy counter: NVML's `nvmlDeviceGetTotalEnergyConsumption`
//! (millijoules since the driver loaded, Volta and later), read through `nvml-wrapper`, which
//! loads `libnvidia-ml.so.1` at run time (the binary runs where there is no NVIDIA driver). One
//! domain, `gpu<ordinal>`, of 1 mJ per count.
//!
//! Beside it a [`Recording`] of it: the same readings replayed from text (`seconds millijoules`
//! per line), so the arithmetic on them is tested where there is no GPU.

use std::sync::OnceLock;
use std::time::Instant;

use nvml_wrapper::Nvml;
use nvml_wrapper::error::NvmlError;

use super::domains::Domain;
use super::meter::{Meter, Reading, Source};
pub use super::recording::Recording;
use crate::error::{Error, Result};

#[cfg(test)]
#[path = "nvml_tests.rs"]
mod tests;

/// Joules per count of the NVML energy counter (it counts millijoules).
pub const NVML_JOULES_PER_COUNT: f64 = 1e-3;

/// The library, loaded and initialised once per process: devices borrow it for as long as
/// the process runs (a meter may be opened by several commands of one test binary).
static NVML: OnceLock<std::result::Result<Nvml, String>> = OnceLock::new();

fn nvml() -> Result<&'static Nvml> {
    NVML.get_or_init(|| Nvml::init().map_err(|e| e.to_string())).as_ref().map_err(|e| {
        Error::unavailable(
            format!("no GPU energy counter: NVML (libnvidia-ml.so.1) could not be loaded or initialised ({e})"),
            "run on a machine with an NVIDIA GPU and its driver (nvidia-smi works there), or leave out --energy",
        )
    })
}

/// The name of the energy domain of the GPU of CUDA ordinal `ordinal`.
pub fn gpu_domain_name(ordinal: usize) -> String {
    format!("gpu{ordinal}")
}

/// Where every NVML reading is also written, as a [`Recording`] (to record fixtures on a GPU
/// host).
pub const RECORD_TO_ENV: &str = "ROOFLINE_NVML_RECORD_TO";

/// One GPU's energy counter.
struct NvmlSource {
    device: nvml_wrapper::Device<'static>,
    opened: Instant,
    record: Option<std::io::BufWriter<std::fs::File>>,
}

impl Source for NvmlSource {
    fn read(&mut self) -> Result<Reading> {
        let seconds = self.opened.elapsed().as_secs_f64();
        let mj = self.device.total_energy_consumption().map_err(|e| unsupported(&e))?;
        if let Some(w) = &mut self.record {
            use std::io::Write;
            // A recording that cannot be written loses fixtures, not the measurement.
            let _ = writeln!(w, "{seconds:.6} {mj}");
        }
        Ok(Reading { seconds, counts: vec![mj] })
    }
    fn counter_bits(&self) -> u32 {
        64
    }
    fn wait(&mut self, seconds: f64) {
        std::thread::sleep(std::time::Duration::from_secs_f64(seconds.max(0.0)));
    }
}

fn unsupported(e: &NvmlError) -> Error {
    match e {
        NvmlError::NotSupported => Error::unavailable(
            "this GPU has no total-energy counter (NVML: not supported; it needs Volta or later, and a whole GPU rather than a vGPU)",
            "measure energy on a Volta-or-later GPU passed through whole, or leave out --energy",
        ),
        NvmlError::NoPermission => Error::unavailable(
            format!("NVML refused the energy counter ({e})"),
            "run as a user the driver lets read the GPU's counters (root), or leave out --energy",
        ),
        other => Error::unavailable(
            format!("reading the GPU's energy counter through NVML failed: {other}"),
            "check `nvidia-smi -q -d POWER` on this machine, or leave out --energy",
        ),
    }
}

/// The energy meter of the GPU at PCI address `pci_bus_id` (`0000:65:00.0`, as the CUDA
/// driver gives it: CUDA ordinals and NVML indices differ under `CUDA_VISIBLE_DEVICES`), its
/// domain named for CUDA ordinal `ordinal`. One line and exit 2 without NVML, without that
/// GPU, or without the counter.
pub fn open_gpu(pci_bus_id: &str, ordinal: usize) -> Result<Meter> {
    let lib = nvml()?;
    let device = lib.device_by_pci_bus_id(pci_bus_id).map_err(|e| {
        Error::unavailable(
            format!("NVML does not list the GPU at {pci_bus_id} (CUDA device {ordinal}): {e}"),
            "check `nvidia-smi -q | grep Bus` on this machine, or leave out --energy",
        )
    })?;
    let name = device.name().unwrap_or_else(|_| "NVIDIA GPU".into());
    let record = match std::env::var_os(RECORD_TO_ENV) {
        Some(path) => Some(std::io::BufWriter::new(std::fs::File::create(&path).map_err(|e| {
            Error::input(
                format!("{RECORD_TO_ENV}={}: cannot create ({e})", std::path::Path::new(&path).display()),
                "point it at a writable file",
            )
        })?)),
        None => None,
    };
    let mut source = NvmlSource {
        device,
        opened: Instant::now(),
        record,
    };
    source.read()?;
    let domain = Domain {
        name: gpu_domain_name(ordinal),
        config: 0,
        joules_per_count: NVML_JOULES_PER_COUNT,
    };
    Ok(Meter::from_source(
        vec![domain],
        Box::new(source),
        format!("NVML total-energy counter of {name} ({pci_bus_id}, 1 mJ per count): the whole board"),
    ))
}

/// Every board NVML lists: (PCI address, name). The boards a command cannot use (hidden from
/// CUDA by `CUDA_VISIBLE_DEVICES`) are among them.
pub fn boards() -> Result<Vec<(String, String)>> {
    let lib = nvml()?;
    let n = lib.device_count().map_err(|e| unsupported(&e))?;
    let mut out = Vec::with_capacity(n as usize);
    for i in 0..n {
        let d = lib.device_by_index(i).map_err(|e| unsupported(&e))?;
        let id = d.pci_info().map(|p| p.bus_id).unwrap_or_else(|_| format!("NVML index {i}"));
        out.push((id, d.name().unwrap_or_else(|_| "NVIDIA GPU".into())));
    }
    Ok(out)
}

/// Whether two PCI addresses name the same board (NVML writes hex in capitals, the CUDA
/// driver's attributes give numbers; the domain may be 4 or 8 digits).
pub fn same_bus_id(a: &str, b: &str) -> bool {
    let norm = |s: &str| {
        let s = s.trim().to_ascii_lowercase();
        match s.split_once(':') {
            Some((dom, rest)) => format!("{:0>8}:{rest}", dom.trim_start_matches('0')),
            None => s,
        }
    };
    norm(a) == norm(b)
}

/// A recording of NVML readings (`seconds millijoules` a line) as the meter of GPU `ordinal`;
/// one line and exit 2 where a line holds other than one count.
pub fn recorded_meter(recording: Recording, ordinal: usize) -> Result<Meter> {
    let domain = Domain {
        name: gpu_domain_name(ordinal),
        config: 0,
        joules_per_count: NVML_JOULES_PER_COUNT,
    };
    recording.into_meter(vec![domain], "a recording of NVML energy readings (1 mJ per count)".into())
}
