//! Backend module `perf_stat` (filled by its issue).
