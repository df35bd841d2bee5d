//! The CPUs this process may run on (its affinity mask), without the suite: the host
//! description (cache topology read from sysfs) needs it in light builds too.

/// CPUs this process may run on, in order (the pinning targets).
pub fn allowed_cpus() -> Vec<usize> {
    match nix::sched::sched_getaffinity(nix::unistd::Pid::from_raw(0)) {
        Ok(set) => (0..nix::sched::CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)).collect(),
    }
}
