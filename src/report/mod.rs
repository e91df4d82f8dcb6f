//! Reports: results.json, report.html, summary.md and comparisons.

pub mod cli;
