//! Runs as measurements: each fault injection that landed is a trial, and
//! a trial succeeds (for an anomaly kind) when at least one anomaly of that
//! kind is attributed to it. Rates come with their 95 % Wilson interval.
//!
//! - An injection *landed* when it was applied without error and, when it
//!   reports `landed_inside` (the holder faults), it struck a holder inside
//!   its critical section. A node fault that was applied hit its node.
//! - An anomaly's moment is the latest of its witness ops (invocation or
//!   completion, whichever the witness names). It is attributed to the
//!   latest landed injection that started at or before that moment and
//!   whose window, from its start to its stop plus two leases, holds it.
//!   The final read is not a moment of the run (it witnesses the run as a
//!   whole): anomalies only it witnesses (lost updates), and anomalies
//!   outside every window, count in the totals but in no trial.
//! - An injection the run's end cut short (`cut_short`) did not last its
//!   length: it is no trial.

use super::anomaly::Anomaly;
use super::rundir::RunDir;
use super::summary::RunSummary;
use super::timeline::Timeline;
use crate::check::lock::MAX_WITNESSES;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// z for a two-sided 95 % interval.
pub const Z95: f64 = 1.95996;

/// Any anomaly kind.
pub const ANY: &str = "any";

/// The anomaly kinds a rate can be asked for, as slugs.
pub const KINDS: [&str; 6] = [
    "two-holders",
    "fence-order",
    "stale-writes",
    "lost-updates",
    "duplicate-effects",
    "not-linearizable",
];

/// The 95 % Wilson score interval of `k` successes in `n` trials, without
/// continuity correction; `(0, 1)` when there is no trial.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n) = (k.min(n) as f64, n as f64);
    let p = k / n;
    let z2 = Z95 * Z95;
    let denom = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denom;
    let half = Z95 / denom * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt();
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// `k` of `n` trials, with the 95 % Wilson interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Rate {
    pub k: u64,
    pub n: u64,
    pub lo: f64,
    pub hi: f64,
}

impl Rate {
    pub fn new(k: u64, n: u64) -> Rate {
        let (lo, hi) = wilson(k, n);
        Rate { k, n, lo, hi }
    }

    /// k / n, when there was a trial.
    pub fn rate(&self) -> Option<f64> {
        (self.n > 0).then(|| self.k as f64 / self.n as f64)
    }

    /// The interval lies wholly above or wholly below `p`.
    pub fn excludes(&self, p: f64) -> bool {
        self.n > 0 && (self.lo > p || self.hi < p)
    }

    /// `3 of 10 injections: 30 % [11 %, 60 %]`.
    pub fn text(&self) -> String {
        let inj = if self.n == 1 {
            "injection"
        } else {
            "injections"
        };
        match self.rate() {
            None => format!("0 of 0 {inj}"),
            Some(r) => format!(
                "{} of {} {inj}: {} [{}, {}]",
                self.k,
                self.n,
                pct(r),
                pct(self.lo),
                pct(self.hi)
            ),
        }
    }
}

impl Rate {
    /// `3/10 = 30 % [11 %, 60 %]`.
    pub fn short(&self) -> String {
        match self.rate() {
            None => "0/0".into(),
            Some(r) => format!(
                "{}/{} = {} [{}, {}]",
                self.k,
                self.n,
                pct(r),
                pct(self.lo),
                pct(self.hi)
            ),
        }
    }
}

/// A share as a percentage, with no decimals unless it is small.
pub fn pct(x: f64) -> String {
    let p = x * 100.0;
    if (0.05..1.0).contains(&p) {
        format!("{p:.1} %")
    } else {
        format!("{p:.0} %")
    }
}

/// The slug of a lock check's (or the linearizability check's) anomalies;
/// `None` for information only.
pub fn kind_of(check: &str) -> Option<&'static str> {
    Some(match check {
        "safety" | "mutex" => "two-holders",
        "fence_order" => "fence-order",
        "stale_writes" => "stale-writes",
        "lost_updates" => "lost-updates",
        "duplicate_effects" => "duplicate-effects",
        "linearizable" => "not-linearizable",
        _ => return None,
    })
}

/// What people call a kind.
pub fn kind_label(slug: &str) -> &str {
    match slug {
        ANY => "any anomaly",
        "two-holders" => "two holders",
        "fence-order" => "fence order",
        "stale-writes" => "stale writes",
        "lost-updates" => "lost updates",
        "duplicate-effects" => "duplicate effects",
        "not-linearizable" => "not linearizable",
        other => other,
    }
}

/// Check a `--anomaly` value: `any` or one of [`KINDS`].
pub fn parse_kind(s: &str) -> Result<&'static str, String> {
    std::iter::once(ANY)
        .chain(KINDS)
        .find(|k| *k == s)
        .ok_or_else(|| {
            format!(
                "unknown anomaly kind `{s}` (hint: one of {ANY}, {})",
                KINDS.join(", ")
            )
        })
}

/// One injection of a run and the anomaly kinds attributed to it.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Trial {
    pub id: u64,
    pub fault: String,
    pub landed: bool,
    pub kinds: BTreeSet<String>,
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
}

fn injections(nemesis: &Value, lease_ns: u64, run_end: u64) -> Vec<Injection> {
    let list = nemesis.get("injections").and_then(Value::as_array);
    list.into_iter()
        .flatten()
        .enumerate()
        .map(|(i, v)| {
            let n = |k: &str| v.get(k).and_then(Value::as_u64);
            let start = n("start_ns").or(n("started_ns")).unwrap_or(0);
            let stop = n("stop_ns").unwrap_or(run_end).max(start);
            let error = v.get("error").is_some_and(|e| !e.is_null());
            let inside = v.pointer("/detail/landed_inside").and_then(Value::as_bool);
            let cut_short = v.pointer("/detail/cut_short").and_then(Value::as_bool) == Some(true);
            Injection {
                id: n("id").unwrap_or(i as u64 + 1),
                fault: v
                    .get("fault")
                    .and_then(Value::as_str)
                    .unwrap_or("?")
                    .to_string(),
                start,
                end: stop.saturating_add(2 * lease_ns),
                landed: !error && !cut_short && inside != Some(false),
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
        })
        .collect();
    let times = op_times(t);
    let mut unattributed = 0;
    let mut listed: BTreeMap<&str, u64> = BTreeMap::new();
    for a in anomalies {
        let Some(kind) = kind_of(&a.check) else {
            continue;
        };
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
        let anomalies = super::anomaly::anomalies(view);
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
    match super::witnesses::complete(rd, t.meta.as_ref()) {
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
    if super::anomaly::violation(view).is_some() {
        v.push(("linearizable".into(), 1));
    }
    v
}

/// The runs of one configuration as one measurement.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Tally {
    pub runs: usize,
    /// Runs in which a check found an anomaly of any kind.
    pub runs_with_anomaly: usize,
    /// Injections, landed or not.
    pub injections: u64,
    /// Landed injections: the trials.
    pub landed: u64,
    /// Per kind attributed to at least one landed injection: the landed
    /// injections with an anomaly of that kind attributed.
    pub per_kind: BTreeMap<String, Rate>,
    /// Landed injections with any anomaly attributed.
    pub any: Rate,
    /// Anomalies per kind over all runs.
    pub anomalies: BTreeMap<String, u64>,
    /// Listed anomalies attributed to no landed injection.
    pub unattributed: u64,
    /// False when some run listed fewer witnesses than it counted
    /// anomalies: the rates are lower bounds then.
    pub complete: bool,
}

impl Default for Rate {
    fn default() -> Rate {
        Rate::new(0, 0)
    }
}

impl Tally {
    /// Tally the runs' trials.
    pub fn of(summaries: &[&RunSummary]) -> Tally {
        let mut t = Tally {
            runs: summaries.len(),
            complete: true,
            ..Tally::default()
        };
        let mut hits: BTreeMap<String, u64> = BTreeMap::new();
        let mut any = 0;
        for s in summaries {
            let r = &s.trials;
            if r.anomalies.values().any(|n| *n > 0) {
                t.runs_with_anomaly += 1;
            }
            for (k, n) in &r.anomalies {
                *t.anomalies.entry(k.clone()).or_default() += n;
            }
            t.unattributed += r.unattributed;
            t.complete &= r.complete;
            for tr in &r.trials {
                t.injections += 1;
                if !tr.landed {
                    continue;
                }
                t.landed += 1;
                if !tr.kinds.is_empty() {
                    any += 1;
                }
                for k in &tr.kinds {
                    *hits.entry(k.clone()).or_default() += 1;
                }
            }
        }
        t.per_kind = hits
            .into_iter()
            .map(|(k, n)| (k, Rate::new(n, t.landed)))
            .collect();
        t.any = Rate::new(any, t.landed);
        t
    }

    /// The rate of `kind` (`ANY` or a slug); a kind never seen is 0 of the
    /// landed injections.
    pub fn rate(&self, kind: &str) -> Rate {
        if kind == ANY {
            return self.any;
        }
        self.per_kind
            .get(kind)
            .copied()
            .unwrap_or_else(|| Rate::new(0, self.landed))
    }

    /// The kinds with a rate, in [`KINDS`] order.
    pub fn kinds(&self) -> Vec<&'static str> {
        KINDS
            .into_iter()
            .filter(|k| self.per_kind.contains_key(*k))
            .collect()
    }

    /// Per kind, as one cell of a table: `stale writes 3/10 = 30 % [11 %, 60 %]; ...`,
    /// or `none: 0/10 = 0 % [0 %, 28 %]`; `—` without a landed injection.
    pub fn rates_text(&self) -> String {
        if self.landed == 0 {
            return "—".into();
        }
        let kinds = self.kinds();
        let mut v: Vec<String> = kinds
            .iter()
            .map(|k| format!("{} {}", kind_label(k), self.rate(k).short()))
            .collect();
        if kinds.is_empty() {
            v.push(format!("none: {}", self.any.short()));
        } else if kinds.len() > 1 {
            v.push(format!("{} {}", kind_label(ANY), self.any.short()));
        }
        if !self.complete {
            v.push("(lower bounds)".into());
        }
        v.join("; ")
    }

    /// `2 of 3 runs; 7 anomalies (1 in no fault's window)`.
    pub fn runs_text(&self) -> String {
        let total: u64 = self.anomalies.values().sum();
        let outside = match self.unattributed {
            0 => String::new(),
            n => format!(" ({n} in no fault's window)"),
        };
        format!(
            "{} of {} runs; {total} anomal{}{outside}",
            self.runs_with_anomaly,
            self.runs,
            if total == 1 { "y" } else { "ies" }
        )
    }

    /// One line per kind, e.g. `stale writes: 3 of 10 injections: 30 % [11 %, 60 %]`,
    /// then the totals.
    pub fn lines(&self) -> Vec<String> {
        let mut out = vec![format!(
            "{} of {} injections landed over {} run(s)",
            self.landed, self.injections, self.runs
        )];
        for k in self.kinds() {
            out.push(format!("{}: {}", kind_label(k), self.rate(k).text()));
        }
        if self.landed > 0 {
            out.push(format!("{}: {}", kind_label(ANY), self.any.text()));
        }
        let total: u64 = self.anomalies.values().sum();
        out.push(format!(
            "anomalies: {total} in all ({} in no injection's window); runs with any anomaly: {} of {}",
            self.unattributed, self.runs_with_anomaly, self.runs
        ));
        if !self.complete {
            out.push(
                "some runs list fewer witnesses than they count anomalies: the rates are lower bounds"
                    .into(),
            );
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn close(a: (f64, f64), b: (f64, f64)) -> bool {
        (a.0 - b.0).abs() < 5e-5 && (a.1 - b.1).abs() < 5e-5
    }

    #[test]
    fn wilson_gives_the_issue_values() {
        assert!(close(wilson(0, 10), (0.0, 0.2775)), "{:?}", wilson(0, 10));
        assert!(
            close(wilson(5, 10), (0.2366, 0.7634)),
            "{:?}",
            wilson(5, 10)
        );
        assert!(close(wilson(10, 10), (0.7225, 1.0)), "{:?}", wilson(10, 10));
        assert_eq!(wilson(0, 0), (0.0, 1.0));
        let r = Rate::new(5, 10);
        assert!(!r.excludes(0.5));
        assert!(Rate::new(10, 10).excludes(0.5));
        assert!(Rate::new(0, 10).excludes(0.5));
        assert!(!Rate::new(0, 0).excludes(0.5));
        assert_eq!(Rate::new(0, 25).short(), "0/25 = 0 % [0 %, 13 %]");
        assert_eq!(r.text(), "5 of 10 injections: 50 % [24 %, 76 %]");
    }

    #[test]
    fn kinds_parse_and_read() {
        assert_eq!(parse_kind("stale-writes"), Ok("stale-writes"));
        assert_eq!(parse_kind("any"), Ok(ANY));
        let e = parse_kind("stale").unwrap_err();
        assert!(e.contains("two-holders"), "{e}");
        assert_eq!(kind_of("safety"), Some("two-holders"));
        assert_eq!(kind_of("stale_holders"), None);
        assert_eq!(kind_label("two-holders"), "two holders");
    }

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
            {"id": 2, "fault": "pause-holder", "start_ns": 2000, "stop_ns": 2150, "detail": {"landed_inside": false}},
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

    #[test]
    fn a_tally_counts_trials_over_runs() {
        let trial = |landed, kinds: &[&str]| Trial {
            id: 0,
            fault: "f".into(),
            landed,
            kinds: kinds.iter().map(|k| k.to_string()).collect(),
        };
        let mut a = RunSummary::empty();
        a.trials = RunTrials {
            trials: vec![
                trial(true, &["stale-writes", "two-holders"]),
                trial(true, &[]),
                trial(false, &[]),
            ],
            anomalies: [("stale-writes".to_string(), 3), ("two-holders".into(), 1)].into(),
            unattributed: 1,
            complete: true,
        };
        let mut b = RunSummary::empty();
        b.trials = RunTrials {
            trials: vec![trial(true, &["stale-writes"]), trial(true, &[])],
            anomalies: [("stale-writes".to_string(), 1)].into(),
            unattributed: 0,
            complete: true,
        };
        let c = RunSummary::empty();
        let t = Tally::of(&[&a, &b, &c]);
        assert_eq!((t.runs, t.runs_with_anomaly), (3, 2));
        assert_eq!((t.injections, t.landed), (5, 4));
        assert_eq!(t.rate("stale-writes"), Rate::new(2, 4));
        assert_eq!(t.rate("two-holders"), Rate::new(1, 4));
        assert_eq!(t.rate("lost-updates"), Rate::new(0, 4));
        assert_eq!(t.rate(ANY), Rate::new(2, 4));
        assert_eq!(t.anomalies["stale-writes"], 4);
        assert_eq!(t.kinds(), ["two-holders", "stale-writes"]);
        assert_eq!(t.unattributed, 1);
        let lines = t.lines();
        assert_eq!(lines[0], "4 of 5 injections landed over 3 run(s)");
        assert!(
            lines
                .iter()
                .any(|l| l == "stale writes: 2 of 4 injections: 50 % [15 %, 85 %]"),
            "{lines:?}"
        );
    }
}
