//! The CPUs this process may run on (its affinity mask), without the suite: the host
//! description (cache topology read from sysfs) needs it in light builds too.

use std::sync::atomic::{AtomicUsize, Ordering};

/// The CPU [`allowed_cpus`] puts first (`usize::MAX`: none).
static PREFERRED: AtomicUsize = AtomicUsize::new(usize::MAX);

/// CPUs this process may run on, in order (the pinning targets): the preferred CPU first (see
/// [`prefer_cpu`]), then the others in ascending order.
pub fn allowed_cpus() -> Vec<usize> {
    let mut cpus: Vec<usize> = match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => (0..nix::sched::CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect(),
    };
    let preferred = PREFERRED.load(Ordering::Relaxed);
    if let Some(i) = cpus.iter().position(|&c| c == preferred) {
        cpus[..=i].rotate_right(1);
    }
    cpus
}

/// The CPU [`prefer_cpu`] put first, if any.
pub fn preferred_cpu() -> Option<usize> {
    Some(PREFERRED.load(Ordering::Relaxed)).filter(|&c| c != usize::MAX)
}

/// From now on [`allowed_cpus`] lists `cpu` first, so one-thread runs pin to it and teams
/// start on it; `None` restores the mask's order. A CPU outside the mask is ignored.
pub fn prefer_cpu(cpu: Option<usize>) {
    PREFERRED.store(cpu.unwrap_or(usize::MAX), Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preferred_cpu_comes_first_and_the_rest_keep_their_order() {
        let mask = allowed_cpus();
        let last = *mask.last().unwrap();
        prefer_cpu(Some(last));
        let moved = allowed_cpus();
        let kept = preferred_cpu();
        prefer_cpu(None);
        assert_eq!(kept, Some(last));
        assert_eq!(preferred_cpu(), None);
        assert_eq!(moved[0], last);
        let mut rest = mask.clone();
        rest.retain(|&c| c != last);
        assert_eq!(&moved[1..], &rest[..], "mask {mask:?}");
        prefer_cpu(Some(usize::MAX - 1));
        let unchanged = allowed_cpus();
        prefer_cpu(None);
        assert_eq!(unchanged, mask, "a CPU outside the mask changes nothing");
    }
}
