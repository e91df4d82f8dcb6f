//! `lockjaw explore --shard K/N`: an adaptive plan, so the split is by
//! name: each shard learns for itself, plans, and keeps the fault points
//! whose name hashes to K ([`crate::runner::shard::Shard::owns_key`]),
//! searching, pairing and confirming only those. When it is done it
//! writes its manifest (the settings' hash, the seed, its points).
//!
//! For `lockjaw merge`: the shards' reports joined into one: the union
//! of their points, tallies, findings (one per kind and point) and
//! undecided outcomes, their learn runs side by side, budgets and time
//! summed, every path moved to where the merge put the shard, and a line
//! that says the search was split and what that leaves out.

use super::output::Report;
use super::state::Settings;
use crate::runner::shard::{Manifest, Shard};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The manifest of a finished explore shard.
pub fn manifest(settings: &Settings, sh: Shard, report: &Report) -> Manifest {
    // What decides the search; not the budget or --jobs (a resume may
    // change them) nor the shard.
    let mut s = settings.clone();
    s.shard = None;
    s.jobs = 0;
    s.budget_secs = 0;
    let text = vec![
        "explore".to_string(),
        serde_json::to_string(&s).unwrap_or_default(),
    ];
    let mut m = Manifest::new(
        "explore",
        &text,
        sh,
        settings.seed,
        vec![],
        report.learned.runs.iter().map(PathBuf::as_path),
    );
    let points: Vec<&str> = report.plan.points.iter().map(|p| p.id.as_str()).collect();
    m.data = serde_json::json!({ "points": points });
    m
}

/// `v` with every string that starts with `from` starting with `to`.
fn moved(v: Value, from: &str, to: &str) -> Value {
    match v {
        Value::String(s) => match s.strip_prefix(from) {
            Some(rest) => Value::String(format!("{to}{rest}")),
            None => Value::String(s),
        },
        Value::Array(a) => Value::Array(a.into_iter().map(|x| moved(x, from, to)).collect()),
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, x)| (k, moved(x, from, to)))
                .collect(),
        ),
        x => x,
    }
}

/// A shard's report (its explore.json), its paths moved from the shard's
/// directory to `now` (where the merge put it).
fn read(dir: &Path, now: &Path) -> Result<Report, String> {
    let path = dir.join("explore.json");
    let text = std::fs::read_to_string(&path).map_err(|e| {
        format!("{}: {e} (hint: an explore shard writes it when its search is done; resume it with `lockjaw explore {}`)", path.display(), dir.display())
    })?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let abs = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let v = moved(v, &abs.display().to_string(), &now.display().to_string());
    serde_json::from_value(v).map_err(|e| format!("{}: {e}", path.display()))
}

/// The shards' reports joined; `place(shard's directory, name)` makes a
/// shard's whole directory available under the merged output as `name`
/// and returns its path there.
pub fn join<P>(shards: &[(PathBuf, Manifest)], mut place: P) -> Result<Report, String>
where
    P: FnMut(&Path, &str) -> Result<PathBuf, String>,
{
    let mut order: Vec<&(PathBuf, Manifest)> = shards.iter().collect();
    order.sort_by_key(|(_, m)| m.shard.k);
    let mut reports = vec![];
    for (dir, m) in order {
        let now = place(dir, &format!("shard-{}", m.shard.k))?;
        reports.push(read(dir, &now)?);
    }
    let n = reports.len();
    let mut it = reports.into_iter();
    let mut r = it.next().ok_or("no shard given")?;
    for o in it {
        union(&mut r, o);
    }
    r.split = Some(format!(
        "The search was split over {n} shards (`lockjaw merge`): each learned for itself and \
         searched the fault points whose name hashes to it, so a point that only another \
         shard's learn runs showed was searched by no shard; pairs of points were tried \
         within a shard only. Budgets and time spent are summed; each shard's runs are under \
         shard-K/."
    ));
    Ok(r)
}

/// Add `o` (another shard's report) into `r`.
fn union(r: &mut Report, o: Report) {
    r.budget_secs += o.budget_secs;
    r.spent_secs += o.spent_secs;
    r.learned.runs.extend(o.learned.runs);
    r.learned.anomalies.extend(o.learned.anomalies);
    r.learned.renewal_checks.extend(o.learned.renewal_checks);
    for p in o.plan.points {
        if r.plan.get(&p.id).is_none() {
            r.plan.points.push(p);
        }
    }
    for x in o.plan.refused {
        let same = |y: &super::plan::Refused| {
            serde_json::to_value(y).ok() == serde_json::to_value(&x).ok()
        };
        if !r.plan.refused.iter().any(same) {
            r.plan.refused.push(x);
        }
    }
    for (point, outcomes) in o.tallies {
        r.tallies.entry(point).or_default().extend(outcomes);
    }
    for f in o.findings {
        match r
            .findings
            .iter_mut()
            .find(|g| g.kind == f.kind && g.point == f.point)
        {
            // Point `none` (a learn run's anomaly) may show in several.
            Some(g) if !g.confirmed && f.confirmed => *g = f,
            Some(_) => {}
            None => r.findings.push(f),
        }
    }
    r.undecided.extend(o.undecided);
    r.renewals.extend(o.renewals);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::output::Finding;
    use crate::explore::plan::{Family, Point};

    fn report(points: &[&str], finding: Option<(&str, &str)>, dir: &str) -> Report {
        let mut r = Report {
            system: "redis".into(),
            seed: 7,
            budget_secs: 60,
            spent_secs: 50.0,
            ..Report::default()
        };
        r.plan.points = points
            .iter()
            .map(|p| Point::sample(p, Family::Process, true, 100))
            .collect();
        r.learned.runs = vec![PathBuf::from(format!("{dir}/learn/lock-1"))];
        if let Some((kind, point)) = finding {
            r.findings.push(Finding {
                kind: kind.into(),
                point: point.into(),
                landed: 3,
                hits: 2,
                witness: Some(PathBuf::from(format!("{dir}/runs/r-1/witness.jsonl"))),
                confirmed: true,
                confirm_dir: None,
                builtin_shows: None,
                shrink: None,
                row: None,
            });
        }
        r
    }

    #[test]
    fn reports_join_into_the_union_and_say_the_search_was_split() {
        let t = tempfile::tempdir().unwrap();
        let mut shards = vec![];
        for (k, points, finding) in [
            (2, vec!["b"], Some(("stuck-lock", "none"))),
            (1, vec!["a", "c"], Some(("stuck-lock", "none"))),
        ] {
            let dir = t.path().join(format!("s{k}"));
            std::fs::create_dir_all(&dir).unwrap();
            let abs = std::fs::canonicalize(&dir).unwrap();
            let r = report(&points, finding, &abs.display().to_string());
            std::fs::write(dir.join("explore.json"), serde_json::to_string(&r).unwrap()).unwrap();
            let mut m = manifest(&crate::explore::state::settings(), Shard { k, n: 2 }, &r);
            m.shard = Shard { k, n: 2 };
            shards.push((dir, m));
        }
        let out = t.path().join("all");
        let j = join(&shards, |_, name| Ok(out.join(name))).unwrap();
        let ids: Vec<&str> = j.plan.points.iter().map(|p| p.id.as_str()).collect();
        assert_eq!(ids, ["a", "c", "b"], "shard 1 first");
        assert_eq!(j.findings.len(), 1, "one finding per kind and point");
        assert_eq!(j.budget_secs, 120);
        assert_eq!(
            j.learned.runs,
            [
                out.join("shard-1/learn/lock-1"),
                out.join("shard-2/learn/lock-1")
            ],
            "paths moved to where the merge put each shard"
        );
        assert!(j
            .split
            .as_deref()
            .unwrap()
            .starts_with("The search was split over 2 shards"));
    }
}
