//! Comparison tables: cells of a matrix (system × client × nemesis ×
//! fencing), each filled from its runs' [`RunSummary`]s or marked N/A
//! with the reason. Here: the cells, their figures over their runs, and
//! writing compare.md, compare.html and compare.json; rendered by
//! [`table`] (the full table), [`glance`] ("At a glance", with
//! `--contention`) and [`terminal`] (the narrow view `compare` prints).
//!
//! Which cells apply and running them is the runner's job
//! (`crate::runner::compare`); this module only renders.

use super::summary::{RunSummary, SideVerdict};
use super::trials::Tally;
use crate::check::Validity;
use serde::{Deserialize, Serialize};
use std::path::Path;

mod glance;
mod table;
mod terminal;

pub use glance::glance_md;
pub use table::{compare_html, compare_md};
pub use terminal::compare_terminal;

/// One cell of the matrix.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CellSpec {
    pub system: String,
    /// `builtin` or a client adapter's name or path.
    pub client: String,
    pub workload: String,
    pub nemesis: String,
    /// `None`: the system's default.
    pub fencing: Option<bool>,
    /// A contention cell's workers (`--contention`); `None`: the run's
    /// `--concurrency`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<usize>,
}

/// One run of a cell, with the path of its report relative to the table.
#[derive(Clone, Debug, Serialize)]
pub struct CellRun {
    pub summary: RunSummary,
    pub report: String,
}

#[derive(Clone, Debug, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum CellOutcome {
    Runs {
        runs: Vec<CellRun>,
    },
    NotApplicable {
        reason: String,
    },
    /// The cell should have run but could not (setup failed): shown, never
    /// dropped or zeroed.
    Failed {
        error: String,
    },
}

#[derive(Clone, Debug, Serialize)]
pub struct Cell {
    #[serde(flatten)]
    pub spec: CellSpec,
    pub outcome: CellOutcome,
}

fn fencing_word(f: Option<bool>) -> &'static str {
    match f {
        Some(true) => "on",
        Some(false) => "off",
        None => "default",
    }
}

/// Figures of a cell over its runs: sums of counts, mean latencies.
struct Agg {
    runs: usize,
    invalid: usize,
    acquisitions: u64,
    updates: u64,
    retries: u64,
    seconds: f64,
    p50: Option<f64>,
    p99: Option<f64>,
    service: Option<SideVerdict>,
    resource: Option<SideVerdict>,
    safety: Option<u64>,
    fence: Option<u64>,
    accepted: Option<u64>,
    rejected: u64,
    lost: Option<i64>,
    stale: Option<u64>,
    gaps: Vec<f64>,
    tally: Tally,
}

fn sum<T: std::iter::Sum<T>>(it: impl Iterator<Item = Option<T>>) -> Option<T> {
    let v: Vec<T> = it.flatten().collect();
    (!v.is_empty()).then(|| v.into_iter().sum())
}

fn mean(it: impl Iterator<Item = Option<f64>>) -> Option<f64> {
    let v: Vec<f64> = it.flatten().collect();
    (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64)
}

fn merge_side(it: impl Iterator<Item = Option<SideVerdict>>) -> Option<SideVerdict> {
    it.flatten().reduce(|a, b| SideVerdict {
        valid: a.valid.merge(b.valid),
        applicable: a.applicable || b.applicable,
    })
}

fn agg(runs: &[CellRun]) -> Agg {
    let s = || runs.iter().map(|r| &r.summary);
    Agg {
        runs: runs.len(),
        invalid: s().filter(|x| x.overall == Validity::False).count(),
        acquisitions: s().map(|x| x.acquisitions).sum(),
        updates: s().map(|x| x.updates).sum(),
        retries: s().map(|x| x.retries).sum(),
        seconds: s().map(|x| x.duration_ns as f64 / 1e9).sum(),
        p50: mean(s().map(|x| x.acquire_p50_ms)),
        p99: mean(s().map(|x| x.acquire_p99_ms)),
        service: merge_side(s().map(|x| x.service)),
        resource: merge_side(s().map(|x| x.resource)),
        safety: sum(s().map(|x| x.safety_violations)),
        fence: sum(s().map(|x| x.fence_order_errors)),
        accepted: sum(s().map(|x| x.stale_writes_accepted)),
        rejected: s().map(|x| x.stale_writes_rejected).sum(),
        lost: sum(s().map(|x| x.lost_updates)),
        stale: sum(s().map(|x| x.stale_holders)),
        gaps: s()
            .flat_map(|x| x.reacquire_after_kill_ms.iter().copied())
            .collect(),
        tally: tally(runs),
    }
}

/// Whether any cell runs a client adapter (then the tables show a
/// client column).
fn has_clients(cells: &[Cell]) -> bool {
    cells.iter().any(|c| c.spec.client != "builtin")
}

/// The cell's runs as one measurement: rates per landed injection.
pub fn tally(runs: &[CellRun]) -> Tally {
    let s: Vec<&RunSummary> = runs.iter().map(|r| &r.summary).collect();
    Tally::of(&s)
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("—".into(), |x| x.to_string())
}

fn side_word(s: Option<SideVerdict>) -> String {
    match s {
        None => "—".into(),
        Some(SideVerdict {
            valid: Validity::True,
            applicable: false,
        }) => "valid (n/a)".into(),
        Some(s) => s.valid.as_str().into(),
    }
}

fn gaps_text(g: &[f64]) -> String {
    if g.is_empty() {
        return "—".into();
    }
    let max = g.iter().cloned().fold(0.0, f64::max);
    let mean = g.iter().sum::<f64>() / g.len() as f64;
    format!("mean {mean:.0} ms, max {max:.0} ms ({} crash(es))", g.len())
}

/// The nemesis column: a contention cell names its workers too.
fn nemesis_label(s: &CellSpec) -> String {
    match s.concurrency {
        Some(c) => format!("{}, {c} workers", s.nemesis),
        None => s.nemesis.clone(),
    }
}

/// Updates per second over the cell's runs (their summed histories).
fn updates_per_s(a: &Agg) -> String {
    if a.seconds > 0.0 {
        format!("{:.1}", a.updates as f64 / a.seconds)
    } else {
        "—".into()
    }
}

/// Retries per update: refused acquires and version conflicts.
fn retries_per_update(a: &Agg) -> String {
    match a.updates {
        0 if a.retries == 0 => "—".into(),
        0 => format!("{} (no update)", a.retries),
        u => format!("{:.2}", a.retries as f64 / u as f64),
    }
}

/// The run's summary, writing its report.html and summary.md first when
/// the run did not.
pub fn ensure_report(dir: &Path) -> Result<RunSummary, String> {
    if dir.join("report.html").is_file() {
        RunSummary::from_dir(dir).map_err(|e| e.to_string())
    } else {
        super::write_report(dir, None)
            .map(|w| w.summary)
            .map_err(|e| e.to_string())
    }
}

/// The cells as compare.json holds them: each run cell with its `tally`
/// (the rates per landed injection over its runs).
pub fn cells_json(cells: &[Cell]) -> serde_json::Value {
    let mut v = serde_json::to_value(cells).unwrap_or_default();
    if let Some(list) = v.as_array_mut() {
        for (j, c) in list.iter_mut().zip(cells) {
            if let (CellOutcome::Runs { runs }, Some(o)) = (&c.outcome, j.as_object_mut()) {
                o.insert(
                    "tally".into(),
                    serde_json::to_value(tally(runs)).unwrap_or_default(),
                );
            }
        }
    }
    v
}

/// Write compare.md, compare.html and compare.json into `out`.
pub fn write_compare(out: &Path, title: &str, cells: &[Cell]) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("compare.md"), compare_md(title, cells))?;
    std::fs::write(out.join("compare.html"), compare_html(title, cells))?;
    let json = serde_json::to_string_pretty(&cells_json(cells)).map_err(std::io::Error::other)?;
    std::fs::write(out.join("compare.json"), json)
}

#[cfg(test)]
mod tests;
