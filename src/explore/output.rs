//! `explore.md`, `explore.json`, `explore.html`: the findings and the
//! coverage (every learned request kind and phase × fault family:
//! planned, tried, landed, never landed and why, and for points without a
//! finding the smallest rate their landed trials exclude at 95 %).
//!
//! Findings come first (kind × point, landed k of n with the 95 % Wilson
//! interval, witness, shrink command, row file), then what the rule left
//! undecided (for review: never a finding, never clean), the anomalies of
//! the fault-free learn runs (point `none`), the points short of their
//! minimum, and the coverage ([`super::coverage`]).

use super::coverage::{self, Coverage};
use super::finding::{Judged, PointOutcome, Tallies};
use super::learn::Learned;
use super::plan::Plan;
use crate::report::html::esc;
use crate::report::trials::{pct, Rate};
use crate::runner::renewal_check::RenewalCheck;
use serde::{Deserialize, Serialize};
use std::fmt::Write as _;
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

impl Finding {
    /// Run alone and not shown again: not reported as a finding.
    pub fn refuted(&self) -> bool {
        !self.confirmed && self.confirm_dir.is_some()
    }

    /// Not run alone yet.
    pub fn pending(&self) -> bool {
        !self.confirmed && self.confirm_dir.is_none()
    }
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
    /// Landed injections each planned point needs (added after the
    /// contract; 0 reads as 1).
    #[serde(default)]
    pub min_landed: u64,
    /// The search runs' renewal cross-checks where the wire was the lease
    /// source (`renewals.json`; added after the contract).
    #[serde(default)]
    pub renewals: Vec<(PathBuf, crate::runner::renewal_check::RenewalCheck)>,
    /// `lockjaw merge` of `--shard` explores: how the search was split
    /// (added after the contract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub split: Option<String>,
}

impl Report {
    fn min(&self) -> u64 {
        self.min_landed.max(1)
    }

    /// Undecided outcomes: the tallies' and the driver's, once each.
    fn all_undecided(&self) -> Vec<&PointOutcome> {
        let mut v = coverage::undecided(&self.tallies);
        for o in &self.undecided {
            if !v.iter().any(|x| x.point == o.point && x.dir == o.dir) {
                v.push(o);
            }
        }
        v
    }

    /// The learn runs' anomalies not already a finding at point `none`.
    fn learn_anomalies(&self) -> Vec<&(PathBuf, String, u64)> {
        let listed = |k: &str| {
            self.findings
                .iter()
                .any(|f| f.point == "none" && f.kind == k)
        };
        self.learned
            .anomalies
            .iter()
            .filter(|(_, k, n)| *n > 0 && !listed(k))
            .collect()
    }
}

/// Write `explore.md`, `explore.json`, `explore.html` under `dir`.
pub fn write(dir: &Path, report: &Report) -> Result<(), String> {
    let cov = coverage::coverage(report, report.min());
    let mut json = serde_json::to_value(report).map_err(|e| e.to_string())?;
    json["coverage"] = serde_json::to_value(&cov).map_err(|e| e.to_string())?;
    json["exit"] = exit(report, report.min()).into();
    let json = serde_json::to_string_pretty(&json).map_err(|e| e.to_string())?;
    for (name, text) in [
        ("explore.md", markdown(report, &cov)),
        ("explore.json", json + "\n"),
        ("explore.html", html(report, &cov)),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text)
            .map_err(|e| format!("{}: cannot write: {e}", path.display()))?;
    }
    Ok(())
}

/// 1 with a finding (confirmed alone, or an anomaly of a fault-free learn
/// run), 0 when none and every planned point landed its minimum with
/// nothing undecided or awaiting confirmation, 2 when not.
pub fn exit(report: &Report, min_landed: u64) -> u8 {
    if report.findings.iter().any(|f| f.confirmed) || !report.learn_anomalies().is_empty() {
        return 1;
    }
    let cov = coverage::coverage(report, min_landed.max(1));
    let pending = report.findings.iter().any(Finding::pending);
    if cov.short.is_empty() && report.all_undecided().is_empty() && !pending {
        0
    } else {
        2
    }
}

/// `3 of 7 landed injections: 43 % [16 %, 75 %]`.
fn rate(hits: u64, landed: u64) -> String {
    let r = Rate::new(hits, landed);
    format!(
        "{hits} of {landed} landed injections: {} [{}, {}] (95 % Wilson)",
        pct(r.rate().unwrap_or(0.0)),
        pct(r.lo),
        pct(r.hi)
    )
}

fn path_or(p: &Option<PathBuf>, none: &str) -> String {
    p.as_ref()
        .map_or(none.to_string(), |p| format!("`{}`", p.display()))
}

fn finding_md(s: &mut String, f: &Finding) {
    let _ = writeln!(s, "### {} at `{}`\n", f.kind, f.point);
    let _ = writeln!(s, "- {}", rate(f.hits, f.landed));
    let alone = match (&f.confirm_dir, f.confirmed) {
        (Some(d), true) => format!("shown again alone (`{}`)", d.display()),
        (None, true) => "shown again alone".into(),
        (Some(d), false) => format!("not shown again alone (`{}`)", d.display()),
        (None, false) => "not run alone yet".into(),
    };
    let _ = writeln!(s, "- confirmation: {alone}");
    let builtin = match f.builtin_shows {
        Some(true) => "shows it too",
        Some(false) => "does not show it",
        None => "undecided: not run, or the point did not land with it (its client may not send that request)",
    };
    let _ = writeln!(s, "- lockjaw's own client on this system: {builtin}");
    let _ = writeln!(s, "- witness: {}", path_or(&f.witness, "none kept"));
    let shrink = f
        .shrink
        .as_ref()
        .map_or("not made".into(), |c| format!("`{c}`"));
    let _ = writeln!(s, "- shrink: {shrink}");
    let _ = writeln!(s, "- row file: {}\n", path_or(&f.row, "not written"));
}

fn markdown(r: &Report, cov: &Coverage) -> String {
    let mut s = format!(
        "# lockjaw explore: {} with {}\n\n",
        r.system,
        r.client.as_deref().unwrap_or("lockjaw's own client")
    );
    let tried = cov.points.iter().filter(|l| l.injections > 0).count();
    let landed = cov.points.iter().filter(|l| l.landed > 0).count();
    let _ = writeln!(
        s,
        "Seed {}, budget {}, spent {}. {} points planned, {tried} tried, {landed} landed; {} learn run(s), lease {} ms. Exit {}.\n",
        r.seed,
        super::budget::duration(r.budget_secs as f64),
        super::budget::duration(r.spent_secs),
        r.plan.points.len(),
        r.learned.runs.len(),
        r.learned.lease_ms,
        exit(r, r.min()),
    );
    if let Some(split) = &r.split {
        let _ = writeln!(s, "{split}\n");
    }
    s += "## Findings\n\n";
    let shown: Vec<&Finding> = r.findings.iter().filter(|f| f.confirmed).collect();
    if shown.is_empty() {
        s += "No finding.\n\n";
    }
    for f in shown {
        finding_md(&mut s, f);
    }
    let learn = r.learn_anomalies();
    if !learn.is_empty() {
        s += "### In the fault-free learn runs (point `none`)\n\n";
        for (dir, kind, n) in learn {
            let _ = writeln!(s, "- {kind}: {n} in `{}`", dir.display());
        }
        s += "\n";
    }
    renewals_md(&mut s, &r.learned, &r.renewals);
    let pending: Vec<&Finding> = r.findings.iter().filter(|f| f.pending()).collect();
    if !pending.is_empty() {
        s += "### Awaiting confirmation alone (not findings yet)\n\n";
        for f in pending {
            finding_md(&mut s, f);
        }
    }
    let refuted: Vec<&Finding> = r.findings.iter().filter(|f| f.refuted()).collect();
    if !refuted.is_empty() {
        s += "### Not shown again alone (not findings)\n\n";
        for f in refuted {
            let _ = writeln!(
                s,
                "- {} at `{}`: {}",
                f.kind,
                f.point,
                rate(f.hits, f.landed)
            );
        }
        s += "\n";
    }
    s += "## Undecided: review\n\nAnomalies the fault's rule does not decide: neither a finding nor clean.\n\n";
    let und = r.all_undecided();
    if und.is_empty() {
        s += "None.\n\n";
    }
    for o in und {
        for h in &o.hits {
            if let Judged::Undecided(why) = &h.judged {
                let _ = writeln!(
                    s,
                    "- {} at `{}`: {} — {why} (`{}`)",
                    h.kind,
                    o.point,
                    rate(h.hits, o.landed),
                    o.dir.display()
                );
            }
        }
    }
    s += "\n";
    if !cov.short.is_empty() {
        let _ = writeln!(s, "## Short of {} landed injection(s)\n", cov.min_landed);
        for (id, n) in &cov.short {
            let _ = writeln!(s, "- `{id}`: {n} landed");
        }
        s += "\n";
    }
    coverage_md(&mut s, cov);
    s
}

fn coverage_md(s: &mut String, cov: &Coverage) {
    *s += "## Coverage\n\n";
    for o in &cov.opaque {
        let _ = writeln!(s, "- {o}");
    }
    if !cov.opaque.is_empty() {
        *s += "\n";
    }
    *s += "| request | phases | family | planned | tried | landed | never landed | not planned | finding rates excluded above |\n|---|---|---|---|---|---|---|---|---|\n";
    for r in &cov.rows {
        let phases: Vec<&str> = r.phases.iter().map(|p| p.name()).collect();
        let list = |v: &[(String, String)]| {
            v.iter()
                .map(|(id, why)| format!("`{id}`: {why}"))
                .collect::<Vec<_>>()
                .join("; ")
        };
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            r.what.replace('|', "\\|"),
            phases.join(", "),
            r.family.name(),
            r.planned,
            r.tried,
            r.landed,
            list(&r.never_landed),
            list(&r.not_planned),
            r.excluded_above.map_or("—".into(), pct)
        );
    }
    *s += "\n### Points\n\n";
    let _ = writeln!(s, "{}\n", sending_line(cov));
    *s += "| point | family | injections | landed | status | changed what the client sent |\n|---|---|---|---|---|---|\n";
    for l in &cov.points {
        let _ = writeln!(
            s,
            "| `{}` | {} | {} | {} | {} | {} |",
            l.id,
            l.family.map_or("—", |f| f.name()),
            l.injections,
            l.landed,
            l.status.replace('|', "\\|"),
            l.changed_text().replace('|', "\\|")
        );
    }
}

/// How many landed points changed what the client sent (the wire tap
/// against the learn runs).
fn sending_line(cov: &Coverage) -> String {
    format!(
        "{} of the {} landed point(s) whose wire was read changed what the client sent (a request, a phase or a transition the learn runs never showed); the search tries the untried points of their groups first.",
        cov.sending_changed, cov.sending_read
    )
}

fn html(r: &Report, cov: &Coverage) -> String {
    let mut h = format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>lockjaw explore: {}</title><style>{CSS}</style></head><body>",
        esc(&r.system)
    );
    let _ = write!(
        h,
        "<h1>lockjaw explore: {} with {}</h1><p>Seed {}, exit {}.</p><h2>Findings</h2>",
        esc(&r.system),
        esc(r.client.as_deref().unwrap_or("lockjaw's own client")),
        r.seed,
        exit(r, r.min())
    );
    if let Some(split) = &r.split {
        let _ = write!(h, "<p class=\"split\">{}</p>", esc(split));
    }
    let shown: Vec<&Finding> = r.findings.iter().filter(|f| f.confirmed).collect();
    if shown.is_empty() {
        h += "<p>No finding.</p>";
    } else {
        h += "<table><tr><th>kind</th><th>point</th><th>landed</th><th>witness</th><th>shrink</th><th>row</th></tr>";
        for f in shown {
            let p = |p: &Option<PathBuf>| {
                p.as_ref()
                    .map_or(String::new(), |p| esc(&p.display().to_string()))
            };
            let _ = write!(
                h,
                "<tr class=\"finding\"><td>{}</td><td><code>{}</code></td><td>{}</td><td>{}</td><td><code>{}</code></td><td>{}</td></tr>",
                esc(&f.kind),
                esc(&f.point),
                esc(&rate(f.hits, f.landed)),
                p(&f.witness),
                esc(f.shrink.as_deref().unwrap_or("")),
                p(&f.row)
            );
        }
        h += "</table>";
    }
    h += "<h2>Undecided: review</h2><ul>";
    for o in r.all_undecided() {
        for hit in &o.hits {
            if let Judged::Undecided(why) = &hit.judged {
                let _ = write!(
                    h,
                    "<li class=\"undecided\">{} at <code>{}</code>: {} — {}</li>",
                    esc(&hit.kind),
                    esc(&o.point),
                    esc(&rate(hit.hits, o.landed)),
                    esc(why)
                );
            }
        }
    }
    h += "</ul><h2>Coverage</h2>";
    for o in &cov.opaque {
        let _ = write!(h, "<p>{}</p>", esc(o));
    }
    let _ = write!(h, "<p>{}</p>", esc(&sending_line(cov)));
    h += "<table><tr><th>point</th><th>family</th><th>injections</th><th>landed</th><th>status</th><th>changed what the client sent</th></tr>";
    for l in &cov.points {
        let _ = write!(
            h,
            "<tr><td><code>{}</code></td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&l.id),
            l.family.map_or("—", |f| f.name()),
            l.injections,
            l.landed,
            esc(&l.status),
            esc(&l.changed_text())
        );
    }
    h += "</table></body></html>\n";
    h
}

const CSS: &str = "body{font-family:system-ui,sans-serif;margin:2em;max-width:70em}table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em;text-align:left}tr.finding td{background:#fde2e2}li.undecided{color:#8a5a00}code{font-size:.9em}";

/// The library's own renewals in the learn runs: the wire's against the
/// adapter's `renewed` events, and each disagreement; then the search
/// runs' (where the wire extended the leases), the disagreeing ones named.
fn renewals_md(s: &mut String, l: &Learned, search: &[(PathBuf, RenewalCheck)]) {
    if l.renewal_checks.is_empty() && search.is_empty() {
        return;
    }
    *s += "### The library's renewals: the wire against the adapter's events

";
    for (dir, c) in &l.renewal_checks {
        let verdict = if c.disagrees() {
            format!(
                "**disagree**: {} event(s) with no successful renewal on the wire inside them, {} wire renewal(s) no event reports",
                c.events_unseen.len(),
                c.wire_unreported.len()
            )
        } else {
            "agree".into()
        };
        let _ = writeln!(
            s,
            "- `{}`: {} on the wire, {} event(s): {verdict}",
            dir.display(),
            c.wire,
            c.events
        );
    }
    if !search.is_empty() {
        let (wire, events) = search
            .iter()
            .fold((0, 0), |(w, e), (_, c)| (w + c.wire, e + c.events));
        let odd: Vec<&(PathBuf, RenewalCheck)> =
            search.iter().filter(|(_, c)| c.disagrees()).collect();
        let _ = writeln!(
            s,
            "- search runs (the wire's renewals extended the leases): {wire} on the wire, {events} event(s); {} of {} run(s) disagree{}",
            odd.len(),
            search.len(),
            if odd.is_empty() { "" } else { " (under faults an adapter may die, or be cut off, between a renewal and its report):" }
        );
        for (dir, c) in odd {
            let _ = writeln!(
                s,
                "  - `{}`: {} event(s) unseen on the wire, {} wire renewal(s) unreported",
                dir.display(),
                c.events_unseen.len(),
                c.wire_unreported.len()
            );
        }
    }
    *s += "
";
}

#[cfg(test)]
#[path = "output_tests.rs"]
mod tests;
