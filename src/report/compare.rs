//! Comparison tables: cells of a matrix (system × client × nemesis ×
//! fencing), each
//! filled from its runs' [`RunSummary`]s or marked N/A with the reason,
//! rendered as compare.md and compare.html (self-contained).
//!
//! Which cells apply and running them is the runner's job
//! (`crate::runner::compare`); this module only renders.

use super::html::{badge, esc};
use super::summary::{RunSummary, SideVerdict};
use crate::check::Validity;
use serde::Serialize;
use std::fmt::Write as _;
use std::path::Path;

/// One cell of the matrix.
#[derive(Clone, Debug, Serialize)]
pub struct CellSpec {
    pub system: String,
    /// `builtin` or a client adapter's name or path.
    pub client: String,
    pub workload: String,
    pub nemesis: String,
    /// `None`: the system's default.
    pub fencing: Option<bool>,
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
    }
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

/// The columns every filled cell shows, as text.
fn columns(a: &Agg) -> Vec<String> {
    vec![
        format!("{} ({} invalid)", a.runs, a.invalid),
        a.acquisitions.to_string(),
        format!(
            "{} / {}",
            opt(a.p50.map(|x| format!("{x:.1}"))),
            opt(a.p99.map(|x| format!("{x:.1}")))
        ),
        side_word(a.service),
        opt(a.safety),
        opt(a.fence),
        side_word(a.resource),
        format!("{} / {}", opt(a.accepted), a.rejected),
        opt(a.lost),
        opt(a.stale),
        gaps_text(&a.gaps),
    ]
}

const HEAD: [&str; 11] = [
    "runs",
    "acquisitions",
    "acquire p50 / p99 (ms)",
    "service",
    "safety violations",
    "fence-order errors",
    "resource",
    "stale writes accepted / rejected",
    "lost updates",
    "stale holders",
    "re-acquire after holder crash",
];

fn has_gaps(cells: &[Cell]) -> bool {
    cells.iter().any(|c| matches!(&c.outcome, CellOutcome::Runs { runs } if runs.iter().any(|r| !r.summary.reacquire_after_kill_ms.is_empty())))
}

/// Whether any cell runs a client adapter (then the tables show a
/// client column).
fn has_clients(cells: &[Cell]) -> bool {
    cells.iter().any(|c| c.spec.client != "builtin")
}

/// compare.md: one row per cell.
pub fn compare_md(title: &str, cells: &[Cell]) -> String {
    let cols = if has_gaps(cells) {
        HEAD.len()
    } else {
        HEAD.len() - 1
    };
    let clients = has_clients(cells);
    let mut o = format!(
        "# {title}\n\n| system | {}nemesis | fencing | {} | report |\n",
        if clients { "client | " } else { "" },
        HEAD[..cols].join(" | ")
    );
    let _ = writeln!(
        o,
        "|---|{}---|---|{}---|",
        if clients { "---|" } else { "" },
        "---:|".repeat(cols)
    );
    for c in cells {
        let s = &c.spec;
        let client = if clients {
            format!("{} | ", s.client)
        } else {
            String::new()
        };
        let _ = write!(
            o,
            "| {} | {client}{} | {} | ",
            s.system,
            s.nemesis,
            fencing_word(s.fencing)
        );
        let (vals, link) = match &c.outcome {
            CellOutcome::Runs { runs } => {
                let mut v = columns(&agg(runs));
                v.truncate(cols);
                let links: Vec<String> = runs
                    .iter()
                    .enumerate()
                    .map(|(i, r)| format!("[{}]({})", i + 1, r.report))
                    .collect();
                (v, links.join(" "))
            }
            CellOutcome::NotApplicable { reason } => (
                na_row(cols, "N/A"),
                format!("N/A: {}", reason.replace('|', "\\|")),
            ),
            CellOutcome::Failed { error } => (
                na_row(cols, "error"),
                format!("error: {}", error.replace('|', "\\|")),
            ),
        };
        let _ = writeln!(o, "{} | {link} |", vals.join(" | "));
    }
    o
}

fn na_row(cols: usize, word: &str) -> Vec<String> {
    let mut v = vec![word.to_string()];
    v.resize(cols, "—".into());
    v
}

fn html_cells(a: &Agg, cols: usize) -> String {
    let mut v: Vec<String> = columns(a).iter().map(|x| esc(x)).collect();
    let b = |s: Option<SideVerdict>| s.map_or("—".into(), |s| badge(s.valid, s.applicable));
    v[3] = b(a.service);
    v[6] = b(a.resource);
    v.truncate(cols);
    v.iter()
        .map(|x| format!(r#"<td class="num">{x}</td>"#))
        .collect()
}

/// compare.html: the same table, self-contained, with verdict badges and
/// links to each run's report.
pub fn compare_html(title: &str, cells: &[Cell]) -> String {
    let cols = if has_gaps(cells) {
        HEAD.len()
    } else {
        HEAD.len() - 1
    };
    let clients = has_clients(cells);
    let mut h = format!(
        r#"<!doctype html><html lang="en"><head><meta charset="utf-8"><title>{t}</title><style>{css}
td.na {{ color: #667085; font-style: italic; }}</style></head><body><h1>{t}</h1><table class="t" id="compare"><tr><th>system</th>{client}<th>nemesis</th><th>fencing</th>"#,
        t = esc(title),
        client = if clients { "<th>client</th>" } else { "" },
        css = include_str!("assets/report.css")
    );
    for head in &HEAD[..cols] {
        let _ = write!(h, "<th>{}</th>", esc(head));
    }
    h.push_str("<th>report</th></tr>");
    for c in cells {
        let s = &c.spec;
        let client = if clients {
            format!("<td>{}</td>", esc(&s.client))
        } else {
            String::new()
        };
        let _ = write!(
            h,
            r#"<tr data-system="{}" data-nemesis="{}"><td>{}</td>{client}<td>{}</td><td>{}</td>"#,
            esc(&s.system),
            esc(&s.nemesis),
            esc(&s.system),
            esc(&s.nemesis),
            fencing_word(s.fencing)
        );
        match &c.outcome {
            CellOutcome::Runs { runs } => {
                h.push_str(&html_cells(&agg(runs), cols));
                let links: Vec<String> = runs
                    .iter()
                    .enumerate()
                    .map(|(i, r)| format!(r#"<a href="{}">{}</a>"#, esc(&r.report), i + 1))
                    .collect();
                let _ = write!(h, "<td>{}</td></tr>", links.join(" "));
            }
            CellOutcome::NotApplicable { reason } => {
                let _ = write!(
                    h,
                    r#"<td class="na" colspan="{}">N/A: {}</td></tr>"#,
                    cols + 1,
                    esc(reason)
                );
            }
            CellOutcome::Failed { error } => {
                let _ = write!(
                    h,
                    r#"<td class="na" colspan="{}">error: {}</td></tr>"#,
                    cols + 1,
                    esc(error)
                );
            }
        }
    }
    h.push_str("</table><p class=\"note\">Counts are summed over a cell's runs; latencies are the mean of the runs' percentiles. Service: the lock service's own guarantees; resource: damage to the protected storage.</p></body></html>");
    h
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

/// Write compare.md, compare.html and compare.json into `out`.
pub fn write_compare(out: &Path, title: &str, cells: &[Cell]) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    std::fs::write(out.join("compare.md"), compare_md(title, cells))?;
    std::fs::write(out.join("compare.html"), compare_html(title, cells))?;
    let json = serde_json::to_string_pretty(cells).map_err(std::io::Error::other)?;
    std::fs::write(out.join("compare.json"), json)
}
