//! What every suite kernel shares around its loops: run-time variant checks, aligned (or
//! deliberately misaligned) buffers, poisoning, size checks, and output comparison.

use crate::simd::Elem;
use crate::types::Variant;

/// Whether this CPU runs `v` of the suite kernels. AVX-512 code is compiled with AVX2 and FMA
/// as well (scalar tails use VEX FMA), so all three must be present.
pub fn runnable(v: Variant) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        match v {
            Variant::Avx512 | Variant::Amx => {
                v.supported() && std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
            }
            _ => v.supported(),
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        v == Variant::Scalar
    }
}

/// One-line refusal for a variant this CPU lacks (never a SIGILL).
pub fn require(v: Variant) -> Result<(), String> {
    if runnable(v) {
        Ok(())
    } else {
        Err(format!(
            "this CPU cannot run the {v} variant (try `roofline kernels` for the runnable ones)"
        ))
    }
}

/// Refuse a working set this machine cannot hold (MemAvailable, else MemTotal, from
/// /proc/meminfo; no limit when unreadable: the allocation itself then decides).
pub fn require_memory(bytes: u64) -> Result<(), String> {
    if let Some(avail) = available_memory()
        && bytes > avail
    {
        return Err(format!(
            "the working set ({:.1} GiB) exceeds the available memory ({:.1} GiB)",
            bytes as f64 / (1u64 << 30) as f64,
            avail as f64 / (1u64 << 30) as f64
        ));
    }
    Ok(())
}

/// Bytes of memory available to a new allocation, where /proc/meminfo says.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let field = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map(|kib| kib * 1024)
    };
    field("MemAvailable:").or_else(|| field("MemTotal:"))
}

/// Ask for transparent huge pages on the 2 MiB-aligned part of a large allocation (only
/// buffers of 4 MiB and more: smaller ones stay on 4 KiB pages as most programs' do). With
/// THP in `madvise` mode (the common default), 4 KiB pages cost a TLB miss every 4 KiB of a
/// DRAM-sized stream: 2-10 % of single-thread triad bandwidth on the CI VM. Best effort: a
/// kernel without THP refuses and nothing changes.
pub(crate) fn advise_huge_pages(addr: usize, bytes: usize) {
    const HUGE: usize = 2 << 20;
    if bytes < 2 * HUGE {
        return;
    }
    let start = addr.div_ceil(HUGE) * HUGE;
    let end = (addr + bytes) / HUGE * HUGE;
    if end <= start {
        return;
    }
    let Some(ptr) = std::ptr::NonNull::new(start as *mut std::ffi::c_void) else {
        return;
    };
    // SAFETY: [start, end) lies inside the caller's live allocation (rounded inwards to 2 MiB
    // boundaries); MADV_HUGEPAGE only changes how future faults are served, never the
    // contents or the mapping's validity.
    let _ = unsafe { nix::sys::mman::madvise(ptr, end - start, nix::sys::mman::MmapAdvise::MADV_HUGEPAGE) };
}

/// A buffer of `len` elements starting `misalign` elements past a 64-byte boundary.
#[derive(Debug, Clone)]
pub struct Buf<E: Elem> {
    store: Vec<E>,
    start: usize,
    len: usize,
}

impl<E: Elem> Buf<E> {
    /// Zero-filled. Fails (one line) when the allocation does not fit.
    pub fn new(len: usize, misalign: usize) -> Result<Buf<E>, String> {
        let per_line = 64 / size_of::<E>();
        let total = len.checked_add(per_line + misalign).ok_or("size overflows")?;
        let mut store = Vec::new();
        store
            .try_reserve_exact(total)
            .map_err(|_| format!("cannot allocate {} bytes", total * size_of::<E>()))?;
        // Before the first touch (the zero fill below faults the pages in).
        advise_huge_pages(store.as_ptr() as usize, store.capacity() * size_of::<E>());
        store.resize(total, E::default());
        let addr = store.as_ptr() as usize;
        let to_line = (64 - addr % 64) % 64 / size_of::<E>();
        Ok(Buf {
            store,
            start: to_line + misalign,
            len,
        })
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn as_slice(&self) -> &[E] {
        &self.store[self.start..self.start + self.len]
    }

    pub fn as_mut_slice(&mut self) -> &mut [E] {
        &mut self.store[self.start..self.start + self.len]
    }

    pub fn ptr(&self) -> *const E {
        self.as_slice().as_ptr()
    }

    pub fn mut_ptr(&mut self) -> *mut E {
        self.as_mut_slice().as_mut_ptr()
    }

    /// Fill with uniform values in [lo, hi).
    pub fn fill_random(&mut self, rng: &mut crate::rng::Rng, lo: f64, hi: f64) {
        for x in self.as_mut_slice() {
            *x = E::from_f64(rng.range(lo, hi));
        }
    }

    /// Overwrite with NaN, so an element the kernel forgets to write fails the comparison.
    pub fn poison(&mut self) {
        for x in self.as_mut_slice() {
            *x = E::from_f64(f64::NAN);
        }
    }
}

/// Compare `got` against the reference `want`: |got − want| ≤ atol + rtol·|want| everywhere
/// (NaN never passes). The error names the first bad index.
pub fn compare<E: Elem>(what: &str, got: &[E], want: &[f64], rtol: f64, atol: f64) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!("{what}: {} values, expected {}", got.len(), want.len()));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let g = g.to_f64();
        let ok = (g - w).abs() <= atol + rtol * w.abs();
        if !ok {
            return Err(format!("{what}[{i}] = {g:e}, reference {w:e}"));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_aligned_then_misaligned_as_asked() {
        for mis in 0..3 {
            let b = Buf::<f64>::new(17, mis).unwrap();
            assert_eq!(b.len(), 17);
            assert_eq!((b.ptr() as usize % 64) / 8, mis);
        }
        assert!(Buf::<f64>::new(usize::MAX - 3, 0).is_err());
    }

    #[test]
    fn compare_rejects_nan_and_far_values() {
        assert!(compare("y", &[1.0f64, 2.0], &[1.0, 2.0 + 1e-15], 1e-12, 0.0).is_ok());
        assert!(compare("y", &[1.0f64, f64::NAN], &[1.0, 2.0], 1e-12, 1e-12).is_err());
        let e = compare("y", &[1.0f64, 2.5], &[1.0, 2.0], 1e-3, 0.0).unwrap_err();
        assert!(e.contains("y[1]"), "{e}");
    }

    #[test]
    fn scalar_is_always_runnable_and_memory_limit_bites() {
        assert!(runnable(Variant::Scalar));
        assert!(require_memory(u64::MAX).is_err() || available_memory().is_none());
    }

    /// The VmFlags of the mapping holding `addr` (from /proc/self/smaps).
    fn vm_flags(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let mut inside = false;
        for line in smaps.lines() {
            if let Some((range, _)) = line.split_once(' ')
                && let Some((a, b)) = range.split_once('-')
                && let (Ok(a), Ok(b)) = (usize::from_str_radix(a, 16), usize::from_str_radix(b, 16))
            {
                inside = (a..b).contains(&addr);
            } else if inside && let Some(f) = line.strip_prefix("VmFlags:") {
                return Some(f.trim().to_string());
            }
        }
        None
    }

    /// Large buffers carry the huge-page advice (VmFlags `hg`) on their 2 MiB-aligned part;
    /// small ones do not. (The flag, not AnonHugePages: whether the kernel finds free huge
    /// pages depends on the host's memory, the advice does not.)
    #[test]
    fn large_buffers_ask_for_huge_pages() {
        if !std::path::Path::new("/sys/kernel/mm/transparent_hugepage/enabled").exists() {
            eprintln!("skip: no transparent huge pages in this kernel");
            return;
        }
        let big = Buf::<f64>::new((16 << 20) / 8 + 12345, 3).unwrap();
        let aligned = (big.ptr() as usize).div_ceil(2 << 20) * (2 << 20);
        let flags = vm_flags(aligned).expect("mapping of the buffer");
        assert!(flags.split(' ').any(|f| f == "hg"), "no huge-page advice: {flags}");
        let small = Buf::<f64>::new(1000, 0).unwrap();
        if let Some(flags) = vm_flags(small.ptr() as usize) {
            assert!(!flags.split(' ').any(|f| f == "hg"), "small buffer advised: {flags}");
        }
    }
}
