//! `explore.md`, `explore.json`, `explore.html`: the findings and the
//! coverage (every learned request kind and phase × fault family:
//! planned, tried, landed, never landed and why, and for points without a
//! finding the smallest rate their landed trials exclude at 95 %).
//!
//! CONTRACT (issue 41): the types are fixed; `write` and `exit` are
//! filled in by the planner work.

use super::finding::{PointOutcome, Tallies};
use super::learn::Learned;
use super::plan::Plan;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One distinct finding (anomaly kind × point), confirmed alone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The catalogue's `expect` word.
    pub kind: String,
    pub point: String,
    /// Landed trials and hits over the search and the confirmation.
    pub landed: u64,
    pub hits: u64,
    /// The witness (a file under a run directory).
    pub witness: Option<PathBuf>,
    /// The point run alone on a fresh cluster with fresh seeds: did it show again.
    pub confirmed: bool,
    pub confirm_dir: Option<PathBuf>,
    /// The same point with lockjaw's own client on this system: did it show.
    pub builtin_shows: Option<bool>,
    /// The `lockjaw shrink` command for its run.
    pub shrink: Option<String>,
    /// A `bugs/*.toml` row file with the buggy side filled in.
    pub row: Option<PathBuf>,
}

/// Everything an explore found, for the three files.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub system: String,
    pub client: Option<String>,
    pub seed: u64,
    pub budget_secs: u64,
    pub spent_secs: f64,
    pub learned: Learned,
    pub plan: Plan,
    pub tallies: Tallies,
    pub findings: Vec<Finding>,
    /// Anomalies judged undecided, for review (never clean, never a finding).
    pub undecided: Vec<PointOutcome>,
}

/// Write `explore.md`, `explore.json`, `explore.html` under `dir`.
pub fn write(dir: &Path, report: &Report) -> Result<(), String> {
    let _ = (dir, report);
    Err("write: not built yet (issue 41 contract)".into())
}

/// 1 with a finding, 0 when none and every planned point landed its
/// minimum, 2 when not.
pub fn exit(report: &Report, min_landed: u64) -> u8 {
    let _ = (report, min_landed);
    2
}
