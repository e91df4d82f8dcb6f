//! A run's injections per point: each anomaly attributed to its injection
//! (as the report and `lockjaw bugs` attribute them) and judged by the
//! fault registry's allows-rule ([`crate::nemesis::allows`]): a finding,
//! allowed by this fault, or undecided.
//!
//! CONTRACT (issue 41): the types are fixed; `classify` is filled in by
//! the planner work.

use super::plan::Point;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// How one anomaly kind at one point is judged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "judged", content = "why")]
pub enum Judged {
    Finding,
    Allowed(String),
    Undecided(String),
}

/// One anomaly kind at one point in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// The catalogue's `expect` word (`two-holders`, `stuck-lock`, ...).
    pub kind: String,
    /// Landed injections of the point with at least one of the kind.
    pub hits: u64,
    pub judged: Judged,
}

/// One point's injections in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointOutcome {
    pub point: String,
    pub injections: u64,
    pub landed: u64,
    pub hits: Vec<Hit>,
    /// The run directory (the witness lives there).
    pub dir: PathBuf,
}

/// What the judge is told about the run beside its directory.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Judge {
    pub system: String,
    pub fencing: bool,
    pub promises: crate::nemesis::allows::Promises,
}

/// Read a finished run whose injections carry point ids and judge each.
pub fn classify(dir: &Path, points: &[Point], judge: &Judge) -> Result<Vec<PointOutcome>, String> {
    let _ = (dir, points, judge);
    Err("classify: not built yet (issue 41 contract)".into())
}

/// Per point id: outcomes summed over runs.
pub type Tallies = BTreeMap<String, Vec<PointOutcome>>;
