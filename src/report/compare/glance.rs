//! The "At a glance" table of a comparison with `--contention` cells, for
//! compare.md and compare.html: one row per system, client and fencing;
//! a column per nemesis (the verdict and what broke) and per contention
//! level (updates/s, retries per update).

use super::{
    agg, fencing_word, has_clients, merge_side, retries_per_update, updates_per_s, Agg, Cell,
    CellOutcome, CellSpec,
};
use crate::report::html::esc;
use std::fmt::Write as _;

/// A fault cell in the glance table: the verdict and what broke.
pub(super) fn glance_fault(a: &Agg) -> String {
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
pub(super) fn glance_html(cells: &[Cell]) -> Option<String> {
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
