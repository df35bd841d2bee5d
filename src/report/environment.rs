//! The run environment of a report (issue 3): host, kernel, governor, VM, clocks, rank.
