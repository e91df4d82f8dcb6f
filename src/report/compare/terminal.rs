//! The comparison as the terminal shows it: a narrow view (system, fault,
//! fencing, verdict, the rate of anomalies per landed fault with its
//! interval, a numbered report link) that fits 80–120 columns, with the
//! report paths listed under it. It absorbs the "At a glance" table:
//! the verdict column says what broke, and `--contention` cells get a
//! second narrow table (updates/s, retries per update). The full table
//! stays in compare.md and compare.html ([`super::table`]).

use super::glance::glance_fault;
use super::{
    agg, fencing_word, has_clients, retries_per_update, updates_per_s, Agg, Cell, CellOutcome,
    CellSpec,
};
use std::fmt::Write as _;
use std::path::Path;

/// What the rate column counts.
const RATE: &str =
    "\nanomaly rate: the landed faults with an anomaly in their window, of all landed faults\n";

/// One line of a narrow table: its cells, and whether the last one is free
/// text that may run past the columns (an N/A reason, an error).
struct Line {
    cells: Vec<String>,
    free_tail: bool,
}

/// Columns padded to their widest cell, two spaces apart; a free tail is
/// neither measured nor padded.
fn aligned(head: &[&str], lines: &[Line]) -> String {
    let mut widths: Vec<usize> = head.iter().map(|h| h.chars().count()).collect();
    for l in lines {
        let measured = l.cells.len() - usize::from(l.free_tail);
        for (w, c) in widths.iter_mut().zip(&l.cells[..measured]) {
            *w = (*w).max(c.chars().count());
        }
    }
    let row = |cells: &mut dyn Iterator<Item = &str>| {
        let mut o = String::new();
        for (i, c) in cells.enumerate() {
            if i > 0 {
                o.push_str("  ");
            }
            let pad = widths.get(i).copied().unwrap_or(0);
            let _ = write!(o, "{c:<pad$}");
        }
        o.trim_end().to_string() + "\n"
    };
    let mut out = row(&mut head.iter().copied());
    for l in lines {
        out.push_str(&row(&mut l.cells.iter().map(String::as_str)));
    }
    out
}

/// The rate column of a fault cell: any anomaly per landed fault, with
/// `*` when some anomalies count in no fault's rate (said under its
/// report link).
fn rate_cell(a: &Agg) -> String {
    let t = &a.tally;
    let rate = match (t.injections, t.landed) {
        (0, _) => "—".to_string(),
        (n, 0) => format!("none of {n} faults landed"),
        _ => t.any.short(),
    };
    match t.outside_text() {
        Some(_) => format!("{rate} *"),
        None => rate,
    }
}

/// The report link of a cell, `[3]`, numbering its entry in `reports`:
/// the path of its first run's report and, on the next line, what its
/// `*` means (anomalies that count in no fault's rate).
fn link(reports: &mut Vec<String>, runs: &[super::CellRun], a: &Agg) -> String {
    let Some(first) = runs.first() else {
        return String::new();
    };
    let mut entry = first.report.clone();
    if runs.len() > 1 {
        let _ = write!(entry, " and {} more run(s) beside it", runs.len() - 1);
    }
    if let Some(outside) = a.tally.outside_text() {
        let _ = write!(entry, "\n    * {outside}");
    }
    reports.push(entry);
    format!("[{}]", reports.len())
}

/// A cell that did not run: `N/A` or `error`, with its reason as free text.
fn not_run(row: &mut Vec<String>, outcome: &CellOutcome) -> bool {
    match outcome {
        CellOutcome::NotApplicable { reason } => row.push(format!("N/A: {reason}")),
        CellOutcome::Failed { error } => row.push(format!("error: {error}")),
        CellOutcome::Runs { .. } => return false,
    }
    true
}

/// A row's first cells: the system, and the client when clients are
/// compared.
fn head(s: &CellSpec, clients: bool) -> Vec<String> {
    let mut row = vec![s.system.clone()];
    if clients {
        row.push(s.client.clone());
    }
    row
}

/// The narrow table of the fault cells (no `--contention` level).
fn fault_lines(cells: &[&Cell], clients: bool, reports: &mut Vec<String>) -> Vec<Line> {
    let mut lines = vec![];
    for c in cells {
        let s = &c.spec;
        let mut row = head(s, clients);
        row.extend([s.nemesis.clone(), fencing_word(s.fencing).to_string()]);
        let free_tail = not_run(&mut row, &c.outcome);
        if let CellOutcome::Runs { runs } = &c.outcome {
            let a = agg(runs);
            row.extend([glance_fault(&a), rate_cell(&a), link(reports, runs, &a)]);
        }
        lines.push(Line {
            cells: row,
            free_tail,
        });
    }
    lines
}

/// The narrow table of the `--contention` cells: no faults, so
/// throughput instead of rates.
fn contention_lines(cells: &[&Cell], clients: bool, reports: &mut Vec<String>) -> Vec<Line> {
    let mut lines = vec![];
    for c in cells {
        let s = &c.spec;
        let mut row = head(s, clients);
        row.extend([
            fencing_word(s.fencing).to_string(),
            s.concurrency.map_or("—".into(), |n| n.to_string()),
        ]);
        let free_tail = not_run(&mut row, &c.outcome);
        if let CellOutcome::Runs { runs } = &c.outcome {
            let a = agg(runs);
            let verdict = glance_fault(&a);
            row.extend([verdict, updates_per_s(&a), retries_per_update(&a)]);
            row.push(link(reports, runs, &a));
        }
        lines.push(Line {
            cells: row,
            free_tail,
        });
    }
    lines
}

/// The terminal view of a comparison written to `out`: the narrow
/// tables, the notes, then the reports they number and where the full
/// tables are.
pub fn compare_terminal(title: &str, cells: &[Cell], out: &Path) -> String {
    let clients = has_clients(cells);
    let (faults, levels): (Vec<&Cell>, Vec<&Cell>) =
        cells.iter().partition(|c| c.spec.concurrency.is_none());
    let mut reports = vec![];
    let mut o = format!("{title}\n\n");
    let with_client = |head: &[&'static str]| -> Vec<&'static str> {
        let mut h = head.to_vec();
        if clients {
            h.insert(1, "client");
        }
        h
    };
    if !faults.is_empty() {
        let head = with_client(&[
            "system",
            "fault",
            "fencing",
            "verdict",
            "anomaly rate [95 % CI]",
            "report",
        ]);
        o.push_str(&aligned(
            &head,
            &fault_lines(&faults, clients, &mut reports),
        ));
    }
    if !levels.is_empty() {
        let head = with_client(&[
            "system",
            "fencing",
            "workers",
            "verdict (no faults)",
            "updates/s",
            "retries per update",
            "report",
        ]);
        if !faults.is_empty() {
            o.push('\n');
        }
        o.push_str(&aligned(
            &head,
            &contention_lines(&levels, clients, &mut reports),
        ));
    }
    if !faults.is_empty() {
        o.push_str(RATE);
    }
    if !reports.is_empty() {
        let _ = writeln!(o, "\nreports, under {}:", out.display());
        for (i, r) in reports.iter().enumerate() {
            let _ = writeln!(o, "[{}] {r}", i + 1);
        }
    }
    let _ = write!(
        o,
        "\nevery figure of every cell: {} and {}\n",
        out.join("compare.md").display(),
        out.join("compare.html").display()
    );
    o
}
