//! Backend module `cachesim` (filled by its issue).
