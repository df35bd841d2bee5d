//! Backend module `perf` (filled by its issue).
