//! Empirical ceilings (issue 4): compute and bandwidth microbenchmarks, sweeps, plateau detection, cache file.
