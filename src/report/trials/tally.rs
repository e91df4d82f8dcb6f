//! [`Tally`]: the runs of one configuration as one measurement (trials,
//! landed faults, rates per kind, anomalies in no trial), and the text a
//! table cell or a summary shows of it.

use super::kinds::{kind_label, ANY, KINDS};
use super::wilson::Rate;
use crate::report::summary::RunSummary;
use serde::Serialize;
use std::collections::BTreeMap;

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

    /// The kinds found in the runs but attributed to no landed fault at
    /// all, with their counts, in [`KINDS`] order.
    fn outside(&self) -> Vec<(&'static str, u64)> {
        KINDS
            .into_iter()
            .filter(|k| !self.per_kind.contains_key(*k))
            .filter_map(|k| Some((k, self.anomalies.get(k).copied().filter(|&n| n > 0)?)))
            .collect()
    }

    /// What was found outside every fault's rate, and where it counts:
    /// `lost updates (5) found at the final read: in the runs' anomaly
    /// count, in no fault's rate`; `None` when nothing was.
    pub fn outside_text(&self) -> Option<String> {
        let found: Vec<String> = self
            .outside()
            .into_iter()
            .map(|(k, n)| {
                let at = match k {
                    "lost-updates" => "found at the final read",
                    _ => "outside every fault's window",
                };
                format!("{} ({n}) {at}", kind_label(k))
            })
            .collect();
        (!found.is_empty()).then(|| {
            format!(
                "{}: in the runs' anomaly count, in no fault's rate",
                found.join(", ")
            )
        })
    }

    /// Per kind, as one cell of a table: `stale writes 3/10 = 30 % [11 %, 60 %]; ...`,
    /// or `none: 0/10 = 0 % [0 %, 28 %]`, then what no fault's rate
    /// counts ([`Tally::outside_text`]); `—` without a landed injection.
    pub fn rates_text(&self) -> String {
        if self.landed == 0 {
            return "—".into();
        }
        let kinds = self.kinds();
        let mut v: Vec<String> = kinds
            .iter()
            .map(|k| format!("{} {}", kind_label(k), self.rate(k).short()))
            .collect();
        let outside = self.outside_text();
        match (kinds.len(), &outside) {
            (0, None) => v.push(format!("none: {}", self.any.short())),
            (0, Some(_)) => v.push(format!("none in a fault's window: {}", self.any.short())),
            (1, _) => {}
            _ => v.push(format!("{} {}", kind_label(ANY), self.any.short())),
        }
        v.extend(outside);
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
    use crate::report::trials::{RunTrials, Trial};

    #[test]
    fn a_tally_counts_trials_over_runs() {
        let trial = |landed, kinds: &[&str]| Trial {
            id: 0,
            fault: "f".into(),
            landed,
            kinds: kinds.iter().map(|k| k.to_string()).collect(),
            point: None,
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
