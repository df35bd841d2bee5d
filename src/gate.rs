//! CI performance gates (issue 8): rules, statistics, verdicts.
