//! One side's runs (buggy or fixed) as one measurement: runs, landed
//! injections, anomalies of the expected kind, the rate with its 95 %
//! Wilson interval (`report::trials::wilson`), the runs' verdicts, and
//! whether the side met its expectation.
//!
//! The rate: for `per = "injection"`, landed injections with at least one
//! anomaly of the kind attributed, over landed injections; for `per =
//! "run"`, runs with at least one anomaly of the kind, over runs. Runs
//! that failed, or whose figure for the kind is unknown, are no trial.
//!
//! Met: the buggy side when the interval excludes 0 (at least one hit);
//! the fixed side when its runs show 0 anomalies of the kind in all (in a
//! fault's window or not) over at least `required` trials. Fewer trials
//! than `required` without a hit is "not enough evidence", never met.

use super::catalogue::{Per, Role};
use super::expect::Observed;
use crate::exit::Exit;
use crate::report::trials::Rate;

/// One finished run of a side.
#[derive(Clone, Debug, PartialEq)]
pub struct RunResult {
    pub dir: Option<std::path::PathBuf>,
    pub exit: Exit,
    /// What it showed; `Err` when it failed or could not be read.
    pub observed: Result<Observed, String>,
}

/// A side's runs, summed.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Side {
    pub runs: usize,
    /// Runs that failed (exit 3 or unreadable), with the first error.
    pub failed: usize,
    pub first_error: Option<String>,
    /// Runs whose figure for the kind is unknown, with the first reason.
    pub undecided: usize,
    pub first_undecided: Option<String>,
    /// Runs counted (neither failed nor undecided).
    pub counted: u64,
    pub landed: u64,
    pub anomalies: u64,
    pub runs_with: u64,
    pub hits: u64,
    /// False when some hits could not be attributed (lower bound).
    pub complete: bool,
    /// Verdicts of the counted runs: valid, invalid, unknown.
    pub verdicts: [usize; 3],
}

/// Whether a side met its expectation.
#[derive(Clone, Debug, PartialEq)]
pub enum Met {
    Met,
    /// The side shows the opposite of its expectation.
    Contradicts(String),
    NotEnough(String),
}

impl Met {
    pub fn word(&self) -> &'static str {
        match self {
            Met::Met => "met",
            Met::Contradicts(_) => "NOT met",
            Met::NotEnough(_) => "not enough evidence",
        }
    }

    pub fn text(&self) -> String {
        match self {
            Met::Met => "met".into(),
            Met::Contradicts(w) => format!("NOT met: {w}"),
            Met::NotEnough(w) => format!("not enough evidence: {w}"),
        }
    }

    pub fn exit(&self) -> Exit {
        match self {
            Met::Met => Exit::Valid,
            Met::Contradicts(_) => Exit::Invalid,
            Met::NotEnough(_) => Exit::Unknown,
        }
    }
}

impl Side {
    /// Sum the runs.
    pub fn of(results: &[RunResult]) -> Side {
        let mut s = Side {
            runs: results.len(),
            complete: true,
            ..Side::default()
        };
        for r in results {
            let o = match &r.observed {
                Err(e) => {
                    s.failed += 1;
                    s.first_error.get_or_insert_with(|| e.clone());
                    continue;
                }
                Ok(o) => o,
            };
            let Some(n) = o.anomalies else {
                s.undecided += 1;
                s.first_undecided = s.first_undecided.clone().or(o.why.clone());
                continue;
            };
            s.counted += 1;
            s.landed += o.landed;
            s.anomalies += n;
            s.runs_with += u64::from(n > 0);
            s.hits += o.hits;
            s.complete &= o.complete;
            let v = match r.exit {
                Exit::Valid => 0,
                Exit::Invalid => 1,
                _ => 2,
            };
            s.verdicts[v] += 1;
        }
        s
    }

    /// The rate of the kind per trial.
    pub fn rate(&self, per: Per) -> Rate {
        match per {
            Per::Injection => Rate::new(self.hits, self.landed),
            Per::Run => Rate::new(self.runs_with, self.counted),
        }
    }

    /// Whether the side met what its role expects of it; `required` is the
    /// number of trials a fixed side's 0 needs. A reference is held to
    /// what a fixed release is: none of the kind.
    pub fn met(&self, role: Role, per: Per, required: u64) -> Met {
        let r = self.rate(per);
        let unit = match per {
            Per::Injection => "landed injections",
            Per::Run => "runs counted",
        };
        match role {
            Role::Buggy if r.excludes(0.0) => Met::Met,
            Role::Buggy if r.n == 0 => Met::NotEnough(format!("0 {unit}")),
            Role::Buggy if r.n < required => {
                Met::NotEnough(format!("0 of {} {unit}, fewer than {required}", r.n))
            }
            Role::Buggy => {
                Met::Contradicts(format!("the buggy release showed none in {} {unit}", r.n))
            }
            Role::Fixed | Role::Reference if self.anomalies > 0 => Met::Contradicts(format!(
                "the {} showed {} of the kind",
                match role {
                    Role::Fixed => "fixed release",
                    _ => "reference",
                },
                self.anomalies
            )),
            Role::Fixed | Role::Reference if r.n < required => {
                Met::NotEnough(format!("0 in {} {unit}, fewer than {required}", r.n))
            }
            Role::Fixed | Role::Reference => Met::Met,
        }
    }

    /// The side's exit: its expectation's, or 3 when a run failed.
    pub fn exit(&self, met: &Met) -> Exit {
        let e = met.exit();
        if self.failed > 0 {
            e.merge(Exit::Error)
        } else {
            e
        }
    }

    /// `8/10` landed of runs, or runs counted of runs.
    pub fn trials_text(&self, per: Per) -> String {
        match per {
            Per::Injection => format!("{} landed / {} runs", self.landed, self.runs),
            Per::Run => format!("{} / {} runs", self.counted, self.runs),
        }
    }

    /// The rate as a table cell or a line: `3/10 = 30 % [11 %, 60 %]`,
    /// marked when it is a lower bound.
    pub fn rate_text(&self, per: Per) -> String {
        let lower = if self.complete { "" } else { " (lower bound)" };
        format!("{}{lower}", self.rate(per).short())
    }

    /// The lines `bugs run` prints for the side (after its header).
    pub fn lines(&self, per: Per, kind: &str, met: &Met) -> Vec<String> {
        let mut v = vec![format!(
            "runs: {} ({} counted, {} failed, {} undecided); verdicts: {} valid, {} invalid, {} unknown",
            self.runs,
            self.counted,
            self.failed,
            self.undecided,
            self.verdicts[0],
            self.verdicts[1],
            self.verdicts[2]
        )];
        if let Some(e) = &self.first_error {
            v.push(format!("first failure: {e}"));
        }
        if let Some(w) = &self.first_undecided {
            v.push(format!("undecided: {w}"));
        }
        v.push(format!("landed injections: {}", self.landed));
        v.push(format!(
            "{kind}: {} anomal{} in {} run(s)",
            self.anomalies,
            if self.anomalies == 1 { "y" } else { "ies" },
            self.runs_with
        ));
        let unit = match per {
            Per::Injection => "per landed injection",
            Per::Run => "per run",
        };
        v.push(format!(
            "rate {unit}: {} (95 % Wilson)",
            self.rate_text(per)
        ));
        v.push(format!("expectation: {}", met.text()));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(exit: Exit, anomalies: Option<u64>, landed: u64, hits: u64) -> RunResult {
        RunResult {
            dir: None,
            exit,
            observed: Ok(Observed {
                anomalies,
                landed,
                hits,
                complete: true,
                why: anomalies.is_none().then(|| "unknown figure".into()),
            }),
        }
    }

    #[test]
    fn a_side_sums_its_runs_and_leaves_out_failed_and_undecided_ones() {
        let failed = RunResult {
            dir: None,
            exit: Exit::Error,
            observed: Err("redis did not start".into()),
        };
        let s = Side::of(&[
            run(Exit::Invalid, Some(3), 2, 1),
            run(Exit::Valid, Some(0), 3, 0),
            run(Exit::Unknown, None, 5, 0),
            failed,
        ]);
        assert_eq!((s.runs, s.counted, s.failed, s.undecided), (4, 2, 1, 1));
        assert_eq!((s.landed, s.anomalies, s.runs_with, s.hits), (5, 3, 1, 1));
        assert_eq!(s.verdicts, [1, 1, 0]);
        assert_eq!(s.rate(Per::Injection), Rate::new(1, 5));
        assert_eq!(s.rate(Per::Run), Rate::new(1, 2));
        assert_eq!(s.first_error.as_deref(), Some("redis did not start"));
        assert_eq!(s.exit(&Met::Met), Exit::Error, "a failed run is exit 3");
    }

    #[test]
    fn the_buggy_side_is_met_when_its_interval_excludes_zero() {
        let s = |hits, landed| Side::of(&[run(Exit::Invalid, Some(hits), landed, hits)]);
        assert_eq!(s(1, 10).met(Role::Buggy, Per::Injection, 10), Met::Met);
        assert!(Rate::new(1, 10).lo > 0.0);
        assert!(matches!(
            s(0, 10).met(Role::Buggy, Per::Injection, 10),
            Met::Contradicts(_)
        ));
        assert!(matches!(
            s(0, 3).met(Role::Buggy, Per::Injection, 10),
            Met::NotEnough(_)
        ));
        assert!(matches!(
            s(0, 0).met(Role::Buggy, Per::Injection, 1),
            Met::NotEnough(_)
        ));
    }

    #[test]
    fn the_fixed_side_needs_zero_in_enough_trials() {
        let runs = |n: usize, anomalies: u64| -> Vec<RunResult> {
            (0..n)
                .map(|i| run(Exit::Valid, Some(if i == 0 { anomalies } else { 0 }), 1, 0))
                .collect()
        };
        let met = |r: &[RunResult], per| Side::of(r).met(Role::Fixed, per, 10);
        assert_eq!(met(&runs(10, 0), Per::Run), Met::Met);
        assert_eq!(met(&runs(10, 0), Per::Injection), Met::Met);
        assert!(matches!(met(&runs(9, 0), Per::Run), Met::NotEnough(_)));
        // An anomaly outside every window still counts against the fixed
        // side: hits 0, anomalies 1.
        let m = met(&runs(10, 1), Per::Injection);
        assert!(
            matches!(&m, Met::Contradicts(w) if w.contains("showed 1")),
            "{m:?}"
        );
        assert_eq!(m.exit(), Exit::Invalid);
        assert_eq!(Met::NotEnough(String::new()).exit(), Exit::Unknown);
    }

    #[test]
    fn the_rate_text_gives_the_wilson_interval() {
        let s = Side::of(&[run(Exit::Invalid, Some(4), 10, 5)]);
        assert_eq!(s.rate_text(Per::Injection), "5/10 = 50 % [24 %, 76 %]");
        let lines = s.lines(Per::Injection, "two-holders", &Met::Met);
        assert!(
            lines.contains(&"landed injections: 10".to_string()),
            "{lines:?}"
        );
        assert!(lines.last().unwrap().ends_with("met"));
    }
}
