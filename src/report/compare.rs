//! Comparison tables: cells of a matrix (system × client × nemesis ×
//! fencing), each
//! filled from its runs' [`RunSummary`]s or marked N/A with the reason,
//! rendered as compare.md and compare.html (self-contained).
//!
//! Which cells apply and running them is the runner's job
//! (`crate::runner::compare`); this module only renders.

use super::html::{badge, esc};
use super::summary::{RunSummary, SideVerdict};
use super::trials::Tally;
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

/// A fault cell in the glance table: the verdict and what broke.
fn glance_fault(a: &Agg) -> String {
    let mut broke = vec![];
    let mut add = |n: Option<u64>, what: &str| {
        if let Some(n) = n.filter(|&n| n > 0) {
            broke.push(format!("{n} {what}"));
        }
    };
    add(a.safety, "mutex");
    add(a.accepted, "stale accepted");
    add(a.lost.map(|l| l.max(0) as u64), "lost");
    let overall = merge_side([a.service, a.resource].into_iter());
    let word = overall.map_or("—".to_string(), |v| v.valid.as_str().to_string());
    if broke.is_empty() {
        word
    } else {
        format!("{word}: {}", broke.join(", "))
    }
}

/// "At a glance" (with `--contention`): one row per system, client and
/// fencing; a column per nemesis (the verdict and what broke) and per
/// contention level (updates/s, retries per update). `None` without
/// contention cells. (header, rows) as text.
fn glance(cells: &[Cell]) -> Option<(Vec<String>, Vec<Vec<String>>)> {
    if cells.iter().all(|c| c.spec.concurrency.is_none()) {
        return None;
    }
    let mut nemeses: Vec<&str> = vec![];
    let mut levels: Vec<usize> = vec![];
    let mut rows: Vec<(&str, &str, Option<bool>)> = vec![];
    for c in cells {
        let s = &c.spec;
        match s.concurrency {
            Some(n) if !levels.contains(&n) => levels.push(n),
            None if !nemeses.contains(&s.nemesis.as_str()) => nemeses.push(&s.nemesis),
            _ => {}
        }
        let row = (s.system.as_str(), s.client.as_str(), s.fencing);
        if !rows.contains(&row) {
            rows.push(row);
        }
    }
    let clients = has_clients(cells);
    let mut head = vec!["system".to_string()];
    if clients {
        head.push("client".into());
    }
    head.push("fencing".into());
    head.extend(nemeses.iter().map(|n| n.to_string()));
    head.extend(
        levels
            .iter()
            .map(|l| format!("{l} workers: updates/s, retries per update")),
    );
    let text = |cell: Option<&Cell>, f: &dyn Fn(&Agg) -> String| match cell.map(|c| &c.outcome) {
        Some(CellOutcome::Runs { runs }) if !runs.is_empty() => f(&agg(runs)),
        Some(CellOutcome::NotApplicable { .. }) => "N/A".into(),
        Some(CellOutcome::Failed { .. }) => "error".into(),
        _ => "—".into(),
    };
    let body = rows
        .into_iter()
        .map(|(system, client, fencing)| {
            let find = |pick: &dyn Fn(&CellSpec) -> bool| {
                cells.iter().find(|c| {
                    let s = &c.spec;
                    s.system == system && s.client == client && s.fencing == fencing && pick(s)
                })
            };
            let mut row = vec![system.to_string()];
            if clients {
                row.push(client.to_string());
            }
            row.push(fencing_word(fencing).into());
            for n in &nemeses {
                let cell = find(&|s| s.concurrency.is_none() && s.nemesis == *n);
                row.push(text(cell, &glance_fault));
            }
            for l in &levels {
                let cell = find(&|s| s.concurrency == Some(*l));
                row.push(text(cell, &|a| {
                    format!("{}, {}", updates_per_s(a), retries_per_update(a))
                }));
            }
            row
        })
        .collect();
    Some((head, body))
}

/// The "At a glance" table as markdown (see [`glance`]).
pub fn glance_md(cells: &[Cell]) -> Option<String> {
    let (head, rows) = glance(cells)?;
    let mut o = format!("## At a glance\n\n| {} |\n|", head.join(" | "));
    o.push_str(&"---|".repeat(head.len()));
    o.push('\n');
    for r in rows {
        let _ = writeln!(o, "| {} |", r.join(" | "));
    }
    Some(o)
}

/// The "At a glance" table as HTML (see [`glance`]).
fn glance_html(cells: &[Cell]) -> Option<String> {
    let (head, rows) = glance(cells)?;
    let mut h = String::from(r#"<h2>At a glance</h2><table class="t" id="glance"><tr>"#);
    for x in &head {
        let _ = write!(h, "<th>{}</th>", esc(x));
    }
    h.push_str("</tr>");
    for r in rows {
        h.push_str("<tr>");
        for x in &r {
            let _ = write!(h, "<td>{}</td>", esc(x));
        }
        h.push_str("</tr>");
    }
    h.push_str("</table>");
    Some(h)
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

/// The columns every filled cell shows, as text.
fn columns(a: &Agg) -> Vec<String> {
    let landed = match a.tally.injections {
        0 => "—".to_string(),
        n => format!("{} of {n}", a.tally.landed),
    };
    vec![
        format!("{} ({} invalid)", a.runs, a.invalid),
        landed,
        a.tally.rates_text(),
        a.tally.runs_text(),
        a.acquisitions.to_string(),
        updates_per_s(a),
        retries_per_update(a),
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

const HEAD: [&str; 16] = [
    "runs",
    "faults landed",
    "anomalies per landed fault: k/n = rate [95 % CI]",
    "runs with an anomaly",
    "acquisitions",
    "updates/s",
    "retries per update",
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
            nemesis_label(s),
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
    if let Some(g) = glance_md(cells) {
        o.push('\n');
        o.push_str(&g);
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
    let at = |name: &str| HEAD.iter().position(|h| *h == name).expect("a column");
    v[at("service")] = b(a.service);
    v[at("resource")] = b(a.resource);
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
            esc(&nemesis_label(s)),
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
    h.push_str("</table>");
    if let Some(g) = glance_html(cells) {
        h.push_str(&g);
    }
    h.push_str("<p class=\"note\">A fault landed when it was applied and, for the holder faults, struck a holder inside its critical section; an anomaly counts for the latest landed fault whose window (its start to its end plus two leases) holds the anomaly's last witness op. Rates are per landed fault, with the 95 % Wilson interval. Counts are summed over a cell's runs; latencies are the mean of the runs' percentiles. Service: the lock service's own guarantees; resource: damage to the protected storage. Updates/s: applied protected writes per second of history; retries per update: acquires refused because the lock was held and conditional writes refused by a version conflict, per applied write.</p></body></html>");
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
