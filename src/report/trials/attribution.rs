//! Attribution: a run's injections (nemesis.json) as trials, and each
//! anomaly its checks list attributed to the latest landed injection whose
//! window holds the anomaly's moment (the rules are in [`super`]).

use super::kinds::kind_of;
use crate::check::lock::MAX_WITNESSES;
use crate::report::anomaly::Anomaly;
use crate::report::rundir::RunDir;
use crate::report::timeline::Timeline;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// One injection of a run and the anomaly kinds attributed to it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Trial {
    pub id: u64,
    pub fault: String,
    pub landed: bool,
    pub kinds: BTreeSet<String>,
    /// The injection's fault point (its target's `point`: the nemesis
    /// file's name, or the file `mixed` drew); `None` in runs recorded
    /// before injections named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub point: Option<String>,
}

#[cfg(test)]
impl Trial {
    /// Injection 1 of `fault`, landed or not, with the anomaly kinds
    /// attributed to it.
    pub(crate) fn sample(fault: &str, landed: bool, kinds: &[&str]) -> Trial {
        Trial {
            id: 1,
            fault: fault.into(),
            landed,
            kinds: kinds.iter().map(|k| k.to_string()).collect(),
            point: None,
        }
    }
}

/// A run's injections as trials, and its anomalies by kind.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct RunTrials {
    pub trials: Vec<Trial>,
    /// Anomalies per kind, as the checks count them (all of them, listed as
    /// witnesses or not).
    pub anomalies: BTreeMap<String, u64>,
    /// Listed anomalies attributed to no landed injection.
    pub unattributed: u64,
    /// False when a check listed as many witnesses as it may (its cap) and
    /// counted more, so some could not be attributed: the rates are then
    /// lower bounds.
    pub complete: bool,
}

/// An injection as nemesis.json records it (the fields a trial needs).
struct Injection {
    id: u64,
    fault: String,
    start: u64,
    end: u64,
    landed: bool,
    point: Option<String>,
}

/// An injection's window, from nemesis.json: its id, start, and stop
/// plus two leases (the attribution window).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    pub id: u64,
    pub start: u64,
    pub end: u64,
}

/// The window of injection `v`, the `i`-th (its id when it records none).
fn window(i: usize, v: &Value, lease_ns: u64, run_end: u64) -> Window {
    let n = |k: &str| v.get(k).and_then(Value::as_u64);
    let start = n("start_ns").or(n("started_ns")).unwrap_or(0);
    let stop = n("stop_ns").unwrap_or(run_end).max(start);
    Window {
        id: n("id").unwrap_or(i as u64 + 1),
        start,
        end: stop.saturating_add(2 * lease_ns),
    }
}

fn listed(nemesis: &Value) -> impl Iterator<Item = (usize, &Value)> {
    let list = nemesis.get("injections").and_then(Value::as_array);
    list.into_iter().flatten().enumerate()
}

/// The windows of nemesis.json's injections, ids as the report gives them.
pub fn windows(nemesis: &Value, lease_ns: u64, run_end: u64) -> Vec<Window> {
    listed(nemesis)
        .map(|(i, v)| window(i, v, lease_ns, run_end))
        .collect()
}

fn injections(nemesis: &Value, lease_ns: u64, run_end: u64) -> Vec<Injection> {
    listed(nemesis)
        .map(|(i, v)| {
            let w = window(i, v, lease_ns, run_end);
            let error = v.get("error").is_some_and(|e| !e.is_null());
            let inside = v.pointer("/detail/landed_inside").and_then(Value::as_bool);
            let cut_short = v.pointer("/detail/cut_short").and_then(Value::as_bool) == Some(true);
            Injection {
                id: w.id,
                fault: v
                    .get("fault")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
                start: w.start,
                end: w.end,
                landed: !error && !cut_short && inside != Some(false),
                point: v
                    .pointer("/target/point")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            }
        })
        .collect()
}

/// The time of each history index that starts or ends an op, except the
/// final reads (they witness what the run did as a whole, at its end).
fn op_times(t: &Timeline) -> HashMap<u64, u64> {
    let mut m = HashMap::with_capacity(t.intervals.len() * 2);
    let final_read = |p: u32| t.procs.get(p as usize).is_some_and(|n| n == "final");
    for iv in t.intervals.iter().filter(|iv| !final_read(iv.process)) {
        m.insert(iv.invoke_index, iv.start);
        if let (Some(c), Some(e)) = (iv.complete_index, iv.end) {
            m.insert(c, e);
        }
    }
    m
}

/// The trials of one run: its injections (nemesis.json), the anomalies its
/// checks list (`anomalies`, with their counts from `counts`: check name →
/// count) and the history's op times.
pub fn run_trials(
    nemesis: &Value,
    lease_ns: u64,
    t: &Timeline,
    anomalies: &[Anomaly],
    counts: &[(String, u64)],
) -> RunTrials {
    let inj = injections(nemesis, lease_ns, t.end_ns);
    let mut trials: Vec<Trial> = inj
        .iter()
        .map(|i| Trial {
            id: i.id,
            fault: i.fault.clone(),
            landed: i.landed,
            kinds: BTreeSet::new(),
            point: i.point.clone(),
        })
        .collect();
    let times = op_times(t);
    let mut unattributed = 0;
    let mut listed: BTreeMap<&str, u64> = BTreeMap::new();
    for a in anomalies {
        let Some(kind) = kind_of(&a.check) else {
            continue;
        };
        // A lost update's local proof (two writes) is the same loss its
        // key's total lists: attributed once, by the total.
        if a.kind.as_deref() == Some("lost-update-pair") {
            continue;
        }
        *listed.entry(kind).or_default() += 1;
        let at = a.ops.iter().filter_map(|o| times.get(o)).max();
        let hit = at.and_then(|&at| {
            inj.iter()
                .enumerate()
                .filter(|(_, i)| i.landed && i.start <= at && at <= i.end)
                .max_by_key(|(_, i)| i.start)
                .map(|(n, _)| n)
        });
        match hit {
            Some(n) => {
                trials[n].kinds.insert(kind.to_string());
            }
            None => unattributed += 1,
        }
    }
    let mut totals: BTreeMap<String, u64> = BTreeMap::new();
    for (check, count) in counts {
        if let Some(kind) = kind_of(check) {
            *totals.entry(kind.to_string()).or_default() += count;
        }
    }
    // A check lists fewer witnesses than it counts when one witness covers
    // several (lost updates) or when it reached its cap.
    let complete = totals.iter().all(|(k, n)| {
        let l = listed.get(k.as_str()).copied().unwrap_or(0);
        l >= *n || l < MAX_WITNESSES as u64
    });
    RunTrials {
        trials,
        anomalies: totals,
        unattributed,
        complete,
    }
}

/// The trials of an opened run directory, from the anomalies `view`
/// lists (results.json as the report reads it), completed from the
/// history when a check counted more anomalies than it lists.
pub fn of_run(rd: &RunDir, t: &Timeline, view: &Value) -> RunTrials {
    let lease_ms = rd
        .run
        .ttl_ms
        .or_else(|| rd.run.workload.as_ref().and_then(|w| w.ttl_ms))
        .unwrap_or(0);
    let trials = |view: &Value| {
        let anomalies = crate::report::anomaly::anomalies(view);
        run_trials(
            &rd.nemesis,
            lease_ms * 1_000_000,
            t,
            &anomalies,
            &checks_counts(view),
        )
    };
    let first = trials(view);
    if first.complete {
        return first;
    }
    // results.json keeps the first witnesses of each check: find them all
    // again from the history to attribute each.
    match crate::report::witnesses::complete(rd, t.meta.as_ref()) {
        Some((all, _)) => trials(&all),
        None => first,
    }
}

/// (check, count) of every check in `view`, with the linearizability
/// check counted as one anomaly when it found a violation.
fn checks_counts(view: &Value) -> Vec<(String, u64)> {
    let mut v: Vec<(String, u64)> = view
        .get("checks")
        .and_then(Value::as_object)
        .into_iter()
        .flatten()
        .map(|(k, c)| {
            (
                k.clone(),
                c.get("count").and_then(Value::as_u64).unwrap_or(0),
            )
        })
        .collect();
    if crate::report::anomaly::violation(view).is_some() {
        v.push(("linearizable".into(), 1));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn timeline(ops: &[(u64, u64)]) -> Timeline {
        timeline_of(ops.iter().map(|&(a, b)| (a, b, json!(0))).collect())
    }

    /// One op per (invoke time, complete time, process): indexes 2i and 2i + 1.
    fn timeline_of(ops: Vec<(u64, u64, Value)>) -> Timeline {
        use std::io::Write;
        let lines: Vec<String> = ops
            .iter()
            .enumerate()
            .flat_map(|(i, (a, b, p))| {
                [
                    json!({"index": 2 * i, "time": a, "process": p, "type": "invoke", "f": "write", "value": i}),
                    json!({"index": 2 * i + 1, "time": b, "process": p, "type": "ok", "f": "write", "value": i}),
                ]
            })
            .map(|v| v.to_string())
            .collect();
        let mut f = tempfile::NamedTempFile::new().unwrap();
        writeln!(f, "{}", lines.join("\n")).unwrap();
        Timeline::read(f.path(), None).unwrap()
    }

    fn anomaly(check: &str, ops: &[u64]) -> Anomaly {
        Anomaly {
            side: "resource".into(),
            check: check.into(),
            kind: None,
            text: String::new(),
            ops: ops.to_vec(),
        }
    }

    #[test]
    fn anomalies_go_to_the_latest_landed_injection_whose_window_holds_them() {
        // Lease 100: windows are [start, stop + 200].
        let nemesis = json!({"injections": [
            {"id": 1, "fault": "pause-holder", "start_ns": 1000, "stop_ns": 1150, "detail": {"landed_inside": true}},
            {"id": 2, "fault": "pause-holder", "start_ns": 2000, "stop_ns": 2150, "detail": {"landed_inside": false}, "target": {"point": "p2"}},
            {"id": 3, "fault": "pause-holder", "start_ns": 3000, "stop_ns": 3150, "detail": {"landed_inside": true}},
            {"id": 4, "fault": "pause-holder", "start_ns": 3100, "error": "no"},
            {"id": 5, "fault": "pause-holder", "start_ns": 4900, "stop_ns": 4950, "detail": {"cut_short": true}}
        ]});
        let t = timeline(&[
            (900, 950),
            (1100, 1300),
            (2100, 2120),
            (3300, 3340),
            (5000, 5001),
        ]);
        let a = [
            anomaly("stale_writes", &[0, 3]), // latest op at 1300: injection 1
            anomaly("safety", &[4, 5]), // 2120: injection 2 did not land, 1's window ended at 1350
            anomaly("stale_writes", &[6]), // 3300: injection 3 (4 failed)
            anomaly("lost_updates", &[8, 9]), // 5001: no window
            anomaly("stale_holders", &[6]), // information: not a kind
        ];
        let counts = [
            ("stale_writes".to_string(), 2),
            ("safety".to_string(), 1),
            ("lost_updates".to_string(), 1),
        ];
        let r = run_trials(&nemesis, 100, &t, &a, &counts);
        let kinds: Vec<Vec<&str>> = r
            .trials
            .iter()
            .map(|t| t.kinds.iter().map(String::as_str).collect())
            .collect();
        assert_eq!(
            kinds,
            [
                vec!["stale-writes"],
                vec![],
                vec!["stale-writes"],
                vec![],
                vec![]
            ]
        );
        let points: Vec<Option<&str>> = r.trials.iter().map(|t| t.point.as_deref()).collect();
        assert_eq!(points, [None, Some("p2"), None, None, None]);
        let landed: Vec<bool> = r.trials.iter().map(|t| t.landed).collect();
        assert_eq!(
            landed,
            [true, false, true, false, false],
            "4 failed, 5 was cut short"
        );
        assert_eq!(r.unattributed, 2);
        assert!(r.complete);
        assert_eq!(r.anomalies["stale-writes"], 2);

        let more = [("stale_writes".to_string(), 40)];
        assert!(
            run_trials(&nemesis, 100, &t, &a, &more).complete,
            "2 listed: below the cap, so one witness covers several"
        );
        let capped: Vec<Anomaly> = (0..MAX_WITNESSES)
            .map(|_| anomaly("stale_writes", &[3]))
            .collect();
        assert!(!run_trials(&nemesis, 100, &t, &capped, &more).complete);
    }

    #[test]
    fn the_final_read_is_no_moment_of_an_injection() {
        let nemesis = json!({"injections": [
            {"id": 1, "fault": "pause-holder", "start_ns": 1000, "stop_ns": 1150}
        ]});
        let t = timeline_of(vec![(1100, 1120, json!(0)), (1200, 1210, json!("final"))]);
        let a = [
            anomaly("lost_updates", &[2, 3]),
            anomaly("stale_writes", &[1, 3]),
        ];
        let counts = [("lost_updates".to_string(), 1), ("stale_writes".into(), 1)];
        let r = run_trials(&nemesis, 100, &t, &a, &counts);
        assert_eq!(
            r.unattributed, 1,
            "the lost update only the final read shows"
        );
        let kinds: Vec<&String> = r.trials[0].kinds.iter().collect();
        assert_eq!(
            kinds,
            ["stale-writes"],
            "the write at 1120, not the read at 1210"
        );
    }
}
