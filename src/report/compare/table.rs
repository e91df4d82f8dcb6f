//! The full comparison table, one row per cell and a column per figure:
//! compare.md and compare.html (self-contained, with verdict badges).

use super::glance::{glance_html, glance_md};
use super::{
    agg, fencing_word, gaps_text, has_clients, nemesis_label, opt, retries_per_update, side_word,
    updates_per_s, Agg, Cell, CellOutcome,
};
use crate::report::html::{badge, esc};
use crate::report::summary::SideVerdict;
use std::fmt::Write as _;

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
        css = include_str!("../assets/report.css")
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
