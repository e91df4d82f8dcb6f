//! A run's injections per point: each anomaly attributed to its injection
//! (as the report and `lockjaw bugs` attribute them) and judged by the
//! fault registry's allows-rule ([`crate::nemesis::allows`]): a finding,
//! allowed by this fault, or undecided.
//!
//! Every injection names its point (its target's `point`, written by the
//! schedule and by `mixed`); a run recorded before that counts its
//! injections for the nemesis file's `name`. Kinds the checks find
//! (two holders, stale writes, lost updates) come from the report's
//! trials; stuck locks and orphaned renewals from the lock check's
//! liveness figures by the same window rule. Lost updates seen only at the
//! final read of a run that injected one point count once for it.

use super::plan::Point;
use crate::bugs::expect::{hit_ids, Expect, Window};
use crate::check::lock::Liveness;
use crate::nemesis::allows::{allows, Allowance};
use crate::nemesis::spec::NemesisSpec;
use crate::report::trials::RunTrials;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// How one anomaly kind at one point is judged.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "judged", content = "why")]
pub enum Judged {
    Finding,
    Allowed(String),
    Undecided(String),
}

impl From<Allowance> for Judged {
    fn from(a: Allowance) -> Judged {
        match a {
            Allowance::Allowed(why) => Judged::Allowed(why),
            Allowance::Finding => Judged::Finding,
            Allowance::Undecided(why) => Judged::Undecided(why),
        }
    }
}

/// One anomaly kind at one point in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// The catalogue's `expect` word (`two-holders`, `stuck-lock`, ...).
    pub kind: String,
    /// Landed injections of the point with at least one of the kind.
    pub hits: u64,
    pub judged: Judged,
    /// How the hits were counted when not by window (added after the
    /// contract: lost updates seen at the final read of a run of its own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// One point's injections in one run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointOutcome {
    pub point: String,
    pub injections: u64,
    pub landed: u64,
    pub hits: Vec<Hit>,
    /// The run directory (the witness lives there).
    pub dir: PathBuf,
    /// Why injections did not land, with how many (added after the
    /// contract).
    #[serde(default)]
    pub missed: BTreeMap<String, u64>,
    /// Kinds the run could not count, and why (an unknown liveness
    /// figure): neither hits nor clean (added after the contract).
    #[serde(default)]
    pub unmeasured: BTreeMap<String, String>,
    /// What its landed injections changed in what the client sent, as
    /// the wire tap showed against the learn runs ([`super::feedback`]):
    /// empty when nothing; `None` when not read (nothing landed, no tap,
    /// a state from before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub changed: Option<Vec<String>>,
}

/// What the judge is told about the run beside its directory.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Judge {
    pub system: String,
    pub fencing: bool,
    pub promises: crate::nemesis::allows::Promises,
}

/// Per point id: outcomes summed over runs.
pub type Tallies = BTreeMap<String, Vec<PointOutcome>>;

/// A finished run as classification needs it.
pub struct Run {
    pub dir: PathBuf,
    pub trials: RunTrials,
    pub liveness: Option<Liveness>,
    pub windows: Vec<Window>,
    /// nemesis.json.
    pub nemesis: Value,
}

impl Run {
    /// Read a finished run as the report reads it.
    pub fn read(dir: &Path) -> Result<Run, String> {
        let r = crate::bugs::replay::read_run(dir)?;
        Ok(Run {
            dir: dir.to_path_buf(),
            trials: r.trials,
            liveness: r.liveness,
            windows: r.windows,
            nemesis: r.nemesis,
        })
    }
}

/// The renewals cross-check of the run at `dir` (its `renewals.json`)
/// where the wire was the lease source of a library that renews by itself.
pub fn renewal_check(dir: &Path) -> Option<crate::runner::renewal_check::RenewalCheck> {
    let path = dir.join(crate::runner::wire_lease::FILE);
    let v: Value = serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
    if v.get("source")? != "wire" {
        return None;
    }
    serde_json::from_value(v.get("check")?.clone()).ok()
}

/// Read a finished run whose injections carry point ids and judge each.
pub fn classify(dir: &Path, points: &[Point], judge: &Judge) -> Result<Vec<PointOutcome>, String> {
    let run = Run::read(dir)?;
    let rule = |spec: &NemesisSpec, kind: &str| {
        allows(spec, &judge.system, judge.fencing, &judge.promises, kind)
    };
    Ok(outcomes(&run, points, &rule))
}

/// Why an injection (nemesis.json's record) did not land.
fn missed_why(v: &Value) -> String {
    let d = |k: &str| v.pointer(&format!("/detail/{k}"));
    if let Some(e) = v.get("error").and_then(Value::as_str) {
        return format!("failed: {e}");
    }
    if d("cut_short").and_then(Value::as_bool) == Some(true) {
        return "cut short by the run's end".into();
    }
    if d("fired").and_then(Value::as_bool) == Some(false) {
        return "matched no request within its window".into();
    }
    if d("armed").and_then(Value::as_bool) == Some(false) {
        return "the worker gave up waiting for the toxic".into();
    }
    if d("took_key").and_then(Value::as_bool) == Some(false) {
        return "the struck request did not take the lock".into();
    }
    if d("struck_other").is_some_and(|s| !s.is_null()) {
        return "struck another request than the announced one".into();
    }
    "not inside a critical section (or what it waits for did not happen)".into()
}

/// The point of each injection by id: its target's `point`, else the
/// nemesis file's name (a run of one point recorded before points).
fn point_of(run: &Run, id: u64, named: Option<&str>) -> String {
    if let Some(p) = named {
        return p.to_string();
    }
    let top = run.nemesis.get("name").and_then(Value::as_str);
    let record = run
        .nemesis
        .get("injections")
        .and_then(Value::as_array)
        .and_then(|l| {
            l.iter()
                .find(|v| v.get("id").and_then(Value::as_u64) == Some(id))
        });
    let mixed = record.and_then(|v| v.pointer("/target/mixed")).is_some();
    match (top, mixed) {
        (Some(n), false) => n.to_string(),
        _ => "?".into(),
    }
}

/// Judge a finished run's injections per point with `rule` (the
/// allows-rule for the run's system, fencing and promises).
pub fn outcomes(
    run: &Run,
    points: &[Point],
    rule: &dyn Fn(&NemesisSpec, &str) -> Allowance,
) -> Vec<PointOutcome> {
    let records: Vec<&Value> = run
        .nemesis
        .get("injections")
        .and_then(Value::as_array)
        .map(|l| l.iter().collect())
        .unwrap_or_default();
    // Point id → (injection ids, landed ids), in order of first injection.
    let mut order: Vec<String> = vec![];
    let mut by: BTreeMap<String, (Vec<u64>, BTreeSet<u64>)> = BTreeMap::new();
    for t in &run.trials.trials {
        let p = point_of(run, t.id, t.point.as_deref());
        if !by.contains_key(&p) {
            order.push(p.clone());
        }
        let e = by.entry(p).or_default();
        e.0.push(t.id);
        if t.landed {
            e.1.insert(t.id);
        }
    }
    let landed_points = by.values().filter(|(_, l)| !l.is_empty()).count();
    let mut kinds: Vec<(Expect, Result<BTreeSet<u64>, String>)> = Expect::ALL
        .iter()
        .map(|&k| {
            (
                k,
                hit_ids(k, &run.trials, run.liveness.as_ref(), &run.windows),
            )
        })
        .collect();
    kinds.sort_by_key(|(k, _)| Expect::ALL.iter().position(|e| e == k));
    order
        .into_iter()
        .map(|id| {
            let (all, landed) = &by[&id];
            let point = points.iter().find(|p| p.id == id);
            let spec = point.map(Point::spec);
            let mut out = PointOutcome {
                point: id.clone(),
                injections: all.len() as u64,
                landed: landed.len() as u64,
                hits: vec![],
                dir: run.dir.clone(),
                missed: BTreeMap::new(),
                unmeasured: BTreeMap::new(),
                changed: None,
            };
            for v in records.iter().filter(|v| {
                let i = v.get("id").and_then(Value::as_u64).unwrap_or(0);
                all.contains(&i) && !landed.contains(&i)
            }) {
                *out.missed.entry(missed_why(v)).or_default() += 1;
            }
            for (k, got) in &kinds {
                let (hits, note) = match got {
                    Err(why) => {
                        if !landed.is_empty() {
                            out.unmeasured.insert(k.name().into(), why.clone());
                        }
                        continue;
                    }
                    Ok(ids) => (ids.intersection(landed).count() as u64, None),
                };
                let (hits, note) = match (hits, k) {
                    (0, Expect::LostUpdates)
                        if landed_points == 1
                            && !landed.is_empty()
                            && run
                                .trials
                                .anomalies
                                .get("lost-updates")
                                .copied()
                                .unwrap_or(0)
                                > 0 =>
                    {
                        (
                            1,
                            Some("seen at the final read of a run of this point alone".into()),
                        )
                    }
                    other => (other.0, note),
                };
                if hits == 0 {
                    continue;
                }
                let judged = match &spec {
                    Some(Ok(s)) => rule(s, k.name()).into(),
                    Some(Err(e)) => Judged::Undecided(format!("its nemesis does not load: {e}")),
                    None => Judged::Undecided(format!("{id} is not a planned point")),
                };
                out.hits.push(Hit {
                    kind: k.name().into(),
                    hits,
                    judged,
                    note,
                });
            }
            out
        })
        .collect()
}

/// Add a run's outcomes to the tallies.
pub fn add(tallies: &mut Tallies, outcomes: Vec<PointOutcome>) {
    for o in outcomes {
        tallies.entry(o.point.clone()).or_default().push(o);
    }
}

/// Points with at least one landed injection.
pub fn landed_ids(tallies: &Tallies) -> BTreeSet<String> {
    tallies
        .iter()
        .filter(|(_, v)| v.iter().any(|o| o.landed > 0))
        .map(|(k, _)| k.clone())
        .collect()
}

/// Points with an anomaly the rule allowed or left undecided (the pairs'
/// most promising parts).
pub fn promising_ids(tallies: &Tallies) -> BTreeSet<String> {
    tallies
        .iter()
        .filter(|(_, v)| {
            v.iter()
                .flat_map(|o| &o.hits)
                .any(|h| h.judged != Judged::Finding)
        })
        .map(|(k, _)| k.clone())
        .collect()
}

#[cfg(test)]
#[path = "finding_tests.rs"]
mod tests;
