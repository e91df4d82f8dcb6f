//! Reports: report.html, summary.md and comparison tables, built from a
//! saved run directory (history.jsonl, run.json, results.json) and nothing
//! else: no server, no network, no clock.
//!
//! Public API:
//! - [`write_report`] (what `lockjaw run` calls at the end of a run, and
//!   `lockjaw report DIR`): writes `report.html` and `summary.md`.
//! - [`build_report`]: the same, returned as strings.
//! - [`RunSummary::from_dir`]: the figures of one run (for comparisons).
//! - [`witness`]: the run's witness histories (issue 30): written for an
//!   invalid run ([`witness::ensure`], called by `lockjaw run` and
//!   `lockjaw report`), and shown in both files.
//! - the [`compare`] module: cells (filled from `RunSummary`s, or N/A with a reason)
//!   rendered as compare.md / compare.html / compare.json.
//! - [`ci`]: test cases for CI, a baseline of accepted outcomes, JUnit XML.
//!
//! results.json is read as the checkers' typed `Results`; the page's
//! anomaly and check tables read it through [`RunDir::results_view`]
//! (documented field names in [`anomaly`]).

pub mod advice;
pub mod anomaly;
pub mod ci;
pub mod cli;
pub mod compare;
mod embed;
pub mod holds;
pub mod html;
mod linear;
pub mod markdown;
pub mod nemesis;
mod plots;
pub mod rundir;
pub mod stalls;
pub mod summary;
pub mod svg;
pub mod sweep;
mod sweep_plot;
pub mod timeline;
pub mod trials;
pub mod witness;
mod witnesses;

pub use rundir::{ReportError, RunDir};
pub use summary::RunSummary;
pub use timeline::Timeline;

use std::path::{Path, PathBuf};

/// A built report, as text.
pub struct Report {
    pub summary: RunSummary,
    pub html: String,
    pub markdown: String,
}

/// Build report.html and summary.md for the run directory `dir`.
pub fn build_report(dir: &Path) -> Result<Report, ReportError> {
    let rd = RunDir::open(dir)?;
    let t = Timeline::read(&rd.history_path(), summary::concurrency(&rd))?;
    let summary = RunSummary::compute(&rd, &t);
    // The witness histories (issue 30) the run directory holds.
    let (shown, errors) = witness::load(dir);
    let markdown = markdown::summary_md_with(&summary, &witness::markdown(&shown, &errors));
    let wh = witness::html(&shown, &errors);
    // The page lists every witness (up to a cap), not only results.json's first ones.
    let html = match witnesses::complete(&rd, t.meta.as_ref()) {
        Some((mut view, note)) => {
            if let Some(notes) = view.get_mut("notes").and_then(|n| n.as_array_mut()) {
                notes.push(note.into());
            }
            html::page(&RunSummary::compute_view(&rd, &t, &view), &t, &view, &wh)
        }
        None => html::page(&summary, &t, &rd.results_view(), &wh),
    };
    Ok(Report {
        summary,
        html,
        markdown,
    })
}

/// Where a report was written.
pub struct Written {
    pub html: PathBuf,
    pub markdown: PathBuf,
    pub summary: RunSummary,
    pub html_bytes: usize,
}

/// Build the report of the run in `dir` and write `report.html` and
/// `summary.md` into `out` (default: `dir` itself).
pub fn write_report(dir: &Path, out: Option<&Path>) -> Result<Written, ReportError> {
    let r = build_report(dir)?;
    let out = out.unwrap_or(dir);
    std::fs::create_dir_all(out).map_err(|e| ReportError::io(out, e))?;
    let html = out.join("report.html");
    let markdown = out.join("summary.md");
    std::fs::write(&html, &r.html).map_err(|e| ReportError::io(&html, e))?;
    std::fs::write(&markdown, &r.markdown).map_err(|e| ReportError::io(&markdown, e))?;
    // The pages link the witness files by name: they go beside them.
    if out != dir {
        for f in witness::files(dir) {
            let to = out.join(f.file_name().unwrap_or_default());
            std::fs::copy(&f, &to).map_err(|e| ReportError::io(&to, e))?;
        }
    }
    Ok(Written {
        html,
        markdown,
        html_bytes: r.html.len(),
        summary: r.summary,
    })
}
