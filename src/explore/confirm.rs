//! From the runs to the report: which candidate findings showed again
//! when their point ran alone, each confirmed finding's witness, its
//! `lockjaw shrink` command and its row file (`DIR/rows/<id>.toml`, the
//! buggy side filled in, no fixed side yet, as `lockjaw bugs run`
//! accepts it), and the [`Report`] the output is written from.

use super::finding::{Judged, PointOutcome, Tallies};
use super::output::{Finding, Report};
use super::search;
use super::state::{Outcome, RunRec, Stage, State};
use std::path::{Path, PathBuf};

/// The report's slug of an expect word (what `lockjaw shrink --anomaly`
/// takes); `None` for the liveness kinds shrink cannot follow.
pub fn shrink_slug(kind: &str) -> Option<&'static str> {
    match kind {
        "two-holders" => Some("two-holders"),
        "stale-write-accepted" | "stale-writes" => Some("stale-writes"),
        "lost-updates" => Some("lost-updates"),
        _ => None,
    }
}

/// The catalogue's expect word of a report slug.
fn expect_word(slug: &str) -> String {
    match slug {
        "stale-writes" => "stale-write-accepted".into(),
        s => s.to_string(),
    }
}

fn has_finding(o: &PointOutcome, kind: &str) -> bool {
    o.hits
        .iter()
        .any(|h| h.kind == kind && h.hits > 0 && h.judged == Judged::Finding)
}

/// The finished confirmation run (or the builtin one) of `point`.
fn alone<'a>(s: &'a State, point: &str, stage: Stage) -> Option<&'a RunRec> {
    s.runs
        .iter()
        .find(|r| r.stage == stage && r.finished() && r.points == [point.to_string()])
}

fn outcome_of<'a>(r: &'a RunRec, point: &str) -> Option<&'a PointOutcome> {
    r.outcome
        .as_ref()
        .and_then(|o| o.outcomes().iter().find(|o| o.point == point))
}

/// The first run of `point` alone that showed `kind` again.
fn shows<'a>(s: &'a State, point: &str, kind: &str) -> Option<&'a RunRec> {
    search::alone_runs(s, point, Stage::Confirm)
        .into_iter()
        .find(|r| outcome_of(r, point).is_some_and(|o| has_finding(o, kind)))
}

/// The (point, kind)s the search runs judged findings, in the order found.
fn candidates(s: &State) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = vec![];
    for o in s.search_outcomes() {
        for h in o
            .hits
            .iter()
            .filter(|h| h.hits > 0 && h.judged == Judged::Finding)
        {
            let key = (o.point.clone(), h.kind.clone());
            if !out.contains(&key) {
                out.push(key);
            }
        }
    }
    out
}

/// Every (point, kind) a search run found and a run of its point alone
/// showed again, in the order found.
pub fn confirmed(s: &State) -> Vec<(String, String)> {
    candidates(s)
        .into_iter()
        .filter(|(p, k)| shows(s, p, k).is_some())
        .collect()
}

/// Candidates that no run alone showed again (said, not reported).
pub fn not_again(s: &State) -> Vec<(String, String)> {
    candidates(s)
        .into_iter()
        .filter(|(p, k)| {
            !search::alone_runs(s, p, Stage::Confirm).is_empty() && shows(s, p, k).is_none()
        })
        .collect()
}

/// The witness file of `kind` in a run directory.
pub fn witness(dir: &Path, kind: &str) -> Option<PathBuf> {
    let names: &[&str] = match kind {
        "two-holders" => &["safety-violation", "mutex-violation", "two-holders"],
        k => &[k],
    };
    names
        .iter()
        .map(|n| dir.join(crate::check::minimal::file_name(n)))
        .find(|p| p.is_file())
}

/// One confirmed finding, its row written.
fn finding(dir: &Path, s: &State, point: &str, kind: &str) -> Result<Finding, String> {
    let conf = shows(s, point, kind);
    let mut outs: Vec<&PointOutcome> = s.search_outcomes().filter(|o| o.point == point).collect();
    let runs = search::alone_runs(s, point, Stage::Confirm);
    outs.extend(runs.iter().filter_map(|r| outcome_of(r, point)));
    let hits = |o: &PointOutcome| {
        o.hits
            .iter()
            .filter(|h| h.kind == kind)
            .map(|h| h.hits)
            .sum::<u64>()
    };
    let builtin_shows = match &s.settings.client {
        None => None,
        Some(_) => alone(s, point, Stage::Builtin)
            .and_then(|r| outcome_of(r, point))
            // Nothing landed: it cannot tell.
            .filter(|o| o.landed > 0)
            .map(|o| hits(o) > 0),
    };
    let confirm_dir = conf.map(|r| r.dir.clone());
    let workload = conf
        .map(|r| r.workload.clone())
        .unwrap_or_else(|| "lock".into());
    let row = super::rows::write(dir, s, point, kind, &workload)?;
    Ok(Finding {
        kind: kind.to_string(),
        point: point.to_string(),
        landed: outs.iter().map(|o| o.landed).sum(),
        hits: outs.iter().map(|o| hits(o)).sum(),
        witness: confirm_dir.as_deref().and_then(|d| witness(d, kind)),
        confirmed: true,
        shrink: confirm_dir
            .as_ref()
            .zip(shrink_slug(kind))
            .map(|(d, k)| format!("lockjaw shrink {} --anomaly {k}", d.display())),
        confirm_dir,
        builtin_shows,
        row: Some(row),
    })
}

/// The anomalies of the fault-free learn runs: findings at point `none`
/// (landed: the learn runs; hits: those that showed the kind).
fn learn_findings(dir: &Path, s: &State) -> Result<Vec<Finding>, String> {
    let Some(l) = &s.learned else {
        return Ok(vec![]);
    };
    let mut out: Vec<Finding> = vec![];
    for (run, slug, n) in l.anomalies.iter().filter(|a| a.2 > 0) {
        let kind = expect_word(slug);
        if let Some(f) = out.iter_mut().find(|f| f.kind == kind) {
            f.hits += 1;
            continue;
        }
        let workload = s
            .runs
            .iter()
            .find(|r| &r.dir == run)
            .map(|r| r.workload.clone())
            .unwrap_or_else(|| "lock".into());
        let row = super::rows::write(dir, s, "none", &kind, &workload)?;
        let _ = n;
        out.push(Finding {
            kind,
            point: "none".into(),
            landed: l.runs.len() as u64,
            hits: 1,
            witness: witness(run, slug),
            confirmed: true,
            confirm_dir: Some(run.clone()),
            builtin_shows: None,
            shrink: None,
            row: Some(row),
        });
    }
    Ok(out)
}

/// The report of a finished explore: every confirmed finding (its row
/// file written), the tallies of the search runs, the undecided ones.
pub fn report(dir: &Path, s: &State) -> Result<Report, String> {
    let mut findings = learn_findings(dir, s)?;
    for (point, kind) in confirmed(s) {
        findings.push(finding(dir, s, &point, &kind)?);
    }
    let mut tallies = Tallies::new();
    for o in s.search_outcomes() {
        tallies.entry(o.point.clone()).or_default().push(o.clone());
    }
    let undecided: Vec<PointOutcome> = s
        .search_outcomes()
        .filter(|o| {
            o.hits
                .iter()
                .any(|h| h.hits > 0 && matches!(h.judged, Judged::Undecided(_)))
        })
        .cloned()
        .collect();
    let mut plan = s.plan.clone().unwrap_or_default();
    plan.points.extend(s.pairs.iter().flatten().cloned());
    Ok(Report {
        system: s.settings.system.clone(),
        client: s.settings.client.clone(),
        seed: s.settings.seed,
        budget_secs: s.settings.budget_secs,
        spent_secs: s.spent_secs,
        learned: s.learned.clone().unwrap_or_default(),
        plan,
        tallies,
        findings,
        undecided,
        min_landed: s.settings.min_landed,
        renewals: s
            .runs
            .iter()
            .filter(|r| r.stage.searches())
            .filter_map(|r| super::finding::renewal_check(&r.dir).map(|c| (r.dir.clone(), c)))
            .collect(),
        split: None,
    })
}

/// Seconds of every finished run (for the summary line).
pub fn run_seconds(s: &State) -> f64 {
    s.runs
        .iter()
        .filter_map(|r| r.outcome.as_ref())
        .map(Outcome::secs)
        .sum()
}
