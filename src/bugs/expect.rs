//! The anomaly kinds a bug row expects, and how each is counted in one
//! finished run: from the checks' anomalies as the report attributes them
//! to landed injections (`report::trials`), or from the lock check's
//! liveness figures (`liveness.stuck_lock`, `liveness.orphaned_renewals`),
//! whose witnesses are attributed by the same window rule.
//!
//! | expect | counted from |
//! |---|---|
//! | `two-holders` | the `safety` and `mutex` checks (witness kinds safety-violation, mutex-violation) |
//! | `stale-write-accepted` | the `stale_writes` check (witness kind stale-write-accepted) |
//! | `lost-updates` | the `lost_updates` check |
//! | `stuck-lock` | `liveness.stuck_lock`: its stretches (a holder's end followed by refused acquires) |
//! | `orphaned-renewal` | `liveness.orphaned_renewals`: renewals that succeeded after their owner's release |

use crate::check::lock::{Figure, Liveness};
pub use crate::report::trials::attribution::{windows, Window};
use crate::report::trials::RunTrials;
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;

/// An anomaly kind a bug's buggy side shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expect {
    TwoHolders,
    StaleWriteAccepted,
    LostUpdates,
    StuckLock,
    OrphanedRenewal,
}

impl Expect {
    pub const ALL: [Expect; 5] = [
        Expect::TwoHolders,
        Expect::StaleWriteAccepted,
        Expect::LostUpdates,
        Expect::StuckLock,
        Expect::OrphanedRenewal,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Expect::TwoHolders => "two-holders",
            Expect::StaleWriteAccepted => "stale-write-accepted",
            Expect::LostUpdates => "lost-updates",
            Expect::StuckLock => "stuck-lock",
            Expect::OrphanedRenewal => "orphaned-renewal",
        }
    }

    /// The `report::trials` kind slug, for the kinds the checks find.
    fn trial_kind(self) -> Option<&'static str> {
        match self {
            Expect::TwoHolders => Some("two-holders"),
            Expect::StaleWriteAccepted => Some("stale-writes"),
            Expect::LostUpdates => Some("lost-updates"),
            Expect::StuckLock | Expect::OrphanedRenewal => None,
        }
    }
}

/// What one run showed of the expected kind.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Observed {
    /// Anomalies of the kind in the run (all of them, in a fault's window
    /// or not); `None` when the run cannot tell (the figure is unknown or
    /// not applicable to the history, `why` says why).
    pub anomalies: Option<u64>,
    /// Landed injections.
    pub landed: u64,
    /// Landed injections with at least one anomaly of the kind attributed.
    pub hits: u64,
    /// False when some anomalies could not be attributed because a check
    /// listed fewer witnesses than it counted: `hits` is a lower bound.
    pub complete: bool,
    pub why: Option<String>,
}

/// Count `kind` in a run: its trials (the report's attribution), its
/// liveness figures, and its injections' windows.
pub fn observe(
    kind: Expect,
    trials: &RunTrials,
    liveness: Option<&Liveness>,
    windows: &[Window],
) -> Observed {
    let landed_ids: Vec<u64> = trials
        .trials
        .iter()
        .filter(|t| t.landed)
        .map(|t| t.id)
        .collect();
    let landed = landed_ids.len() as u64;
    if let Some(slug) = kind.trial_kind() {
        return Observed {
            anomalies: Some(trials.anomalies.get(slug).copied().unwrap_or(0)),
            landed,
            hits: trials
                .trials
                .iter()
                .filter(|t| t.landed && t.kinds.contains(slug))
                .count() as u64,
            complete: trials.complete,
            why: None,
        };
    }
    let unknown = |why: String| Observed {
        anomalies: None,
        landed,
        hits: 0,
        complete: true,
        why: Some(why),
    };
    let Some(l) = liveness else {
        return unknown("the run has no lock check's liveness figures".into());
    };
    // Each anomaly's moment: a stuck stretch from its holder's end (the
    // moment the lock was left stuck), an orphaned renewal at its invocation.
    let (count, moments, listed_all) = match (kind, &l.stuck_lock, &l.orphaned_renewals) {
        (Expect::StuckLock, Figure::Value(s), _) => (
            s.stretches,
            s.witnesses.iter().map(|w| w.end_ns).collect::<Vec<_>>(),
            s.witnesses.len() as u64 >= s.stretches,
        ),
        (Expect::OrphanedRenewal, _, Figure::Value(o)) => (
            o.count,
            o.witnesses.iter().map(|w| w.renew_invoked_ns).collect(),
            o.witnesses.len() as u64 >= o.count,
        ),
        (Expect::StuckLock, f, _) => return unknown(format!("stuck lock: {}", reason(f))),
        (_, _, f) => return unknown(format!("orphaned renewals: {}", reason(f))),
    };
    Observed {
        anomalies: Some(count),
        landed,
        hits: hits(&moments, windows, &landed_ids),
        complete: listed_all,
        why: None,
    }
}

/// How many landed injections (`landed_ids`) have at least one of the
/// anomalies at `moments` in their window (each anomaly goes to the latest
/// such window, as the report attributes it).
fn hits(moments: &[u64], windows: &[Window], landed_ids: &[u64]) -> u64 {
    attributed(moments, windows, landed_ids).len() as u64
}

/// The landed injections (`landed_ids`) with at least one of the
/// anomalies at `moments` attributed (each to the latest landed window
/// holding it).
fn attributed(moments: &[u64], windows: &[Window], landed_ids: &[u64]) -> BTreeSet<u64> {
    moments
        .iter()
        .filter_map(|&at| {
            windows
                .iter()
                .filter(|w| landed_ids.contains(&w.id) && w.start <= at && at <= w.end)
                .max_by_key(|w| w.start)
                .map(|w| w.id)
        })
        .collect()
}

/// The ids of the landed injections with at least one anomaly of `kind`
/// attributed, as [`observe`] counts them (so a run's injections can be
/// told apart by point); `Err(why)` when the run cannot tell (the liveness
/// figure is unknown or not applicable).
pub fn hit_ids(
    kind: Expect,
    trials: &RunTrials,
    liveness: Option<&Liveness>,
    windows: &[Window],
) -> Result<BTreeSet<u64>, String> {
    let landed = || trials.trials.iter().filter(|t| t.landed);
    if let Some(slug) = kind.trial_kind() {
        return Ok(landed()
            .filter(|t| t.kinds.contains(slug))
            .map(|t| t.id)
            .collect());
    }
    let l = liveness.ok_or("the run has no lock check's liveness figures")?;
    let moments: Vec<u64> = match (kind, &l.stuck_lock, &l.orphaned_renewals) {
        (Expect::StuckLock, Figure::Value(s), _) => s.witnesses.iter().map(|w| w.end_ns).collect(),
        (Expect::OrphanedRenewal, _, Figure::Value(o)) => {
            o.witnesses.iter().map(|w| w.renew_invoked_ns).collect()
        }
        (Expect::StuckLock, f, _) => return Err(format!("stuck lock: {}", reason(f))),
        (_, _, f) => return Err(format!("orphaned renewals: {}", reason(f))),
    };
    let ids: Vec<u64> = landed().map(|t| t.id).collect();
    Ok(attributed(&moments, windows, &ids))
}

fn reason<T>(f: &Figure<T>) -> String {
    match f {
        Figure::Value(_) => "measured".into(),
        Figure::Unknown { reason } => format!("unknown ({reason})"),
        Figure::NotApplicable { reason } => format!("not applicable ({reason})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::lock::{OrphanRenewal, OrphanedRenewals, StuckLock, StuckStretch};
    use crate::report::trials::Trial;
    use serde_json::json;

    fn trials(list: Vec<Trial>, anomalies: &[(&str, u64)]) -> RunTrials {
        RunTrials {
            trials: list,
            anomalies: anomalies.iter().map(|(k, n)| (k.to_string(), *n)).collect(),
            unattributed: 0,
            complete: true,
        }
    }

    fn trial(id: u64, landed: bool, kinds: &[&str]) -> Trial {
        Trial {
            id,
            ..Trial::sample("pause-holder", landed, kinds)
        }
    }

    #[test]
    fn check_kinds_come_from_the_reports_attribution() {
        let t = trials(
            vec![
                trial(1, true, &["stale-writes", "two-holders"]),
                trial(2, true, &["lost-updates"]),
                trial(3, false, &["stale-writes"]),
                trial(4, true, &[]),
            ],
            &[("stale-writes", 5), ("two-holders", 1), ("lost-updates", 2)],
        );
        let o = observe(Expect::StaleWriteAccepted, &t, None, &[]);
        assert_eq!((o.anomalies, o.landed, o.hits), (Some(5), 3, 1));
        let o = observe(Expect::TwoHolders, &t, None, &[]);
        assert_eq!((o.anomalies, o.hits), (Some(1), 1));
        let o = observe(Expect::LostUpdates, &t, None, &[]);
        assert_eq!((o.anomalies, o.hits), (Some(2), 1));
        let none = trials(vec![trial(1, true, &[])], &[]);
        let o = observe(Expect::TwoHolders, &none, None, &[]);
        assert_eq!((o.anomalies, o.landed, o.hits), (Some(0), 1, 0));
    }

    fn liveness(stuck: Figure<StuckLock>, orphans: Figure<OrphanedRenewals>) -> Liveness {
        Liveness {
            stuck_lock: stuck,
            zombie_time: Figure::NotApplicable {
                reason: "test".into(),
            },
            orphaned_renewals: orphans,
        }
    }

    fn stretch(end_ns: u64) -> StuckStretch {
        StuckStretch {
            key: "lockjaw".into(),
            holder: "w1".into(),
            after: "death".into(),
            end_op: None,
            end_ns,
            lease_ms: 1,
            acquires: 3,
            first_acquire_op: 10,
            last_acquire_op: 12,
            last_acquire_invoked_ns: end_ns + 5_000_000,
            gap_ms: 5.0,
            text: String::new(),
        }
    }

    #[test]
    fn a_stuck_lock_counts_for_the_injection_whose_window_holds_the_holders_end() {
        // Lease 1 ms: windows [start, stop + 2 ms].
        let nemesis = json!({"injections": [
            {"id": 1, "fault": "kill-holder", "start_ns": 1_000_000, "stop_ns": 1_100_000},
            {"id": 2, "fault": "kill-holder", "start_ns": 50_000_000, "stop_ns": 50_100_000},
            {"id": 3, "fault": "kill-holder", "start_ns": 90_000_000, "stop_ns": 90_100_000}
        ]});
        let w = windows(&nemesis, 1_000_000, 100_000_000);
        assert_eq!(
            w[0],
            Window {
                id: 1,
                start: 1_000_000,
                end: 3_100_000
            }
        );
        let t = trials(
            vec![
                trial(1, true, &[]),
                trial(2, true, &[]),
                trial(3, false, &[]),
            ],
            &[],
        );
        let stuck = StuckLock {
            count: 9,
            stretches: 3,
            witnesses: vec![stretch(1_050_000), stretch(2_000_000), stretch(90_050_000)],
            ..StuckLock::default()
        };
        let na = Figure::NotApplicable { reason: "x".into() };
        let l = liveness(Figure::Value(stuck), na.clone());
        let o = observe(Expect::StuckLock, &t, Some(&l), &w);
        // Stretches 1 and 2 both in injection 1's window; 3 in injection
        // 3's, which did not land.
        assert_eq!(
            (o.anomalies, o.landed, o.hits, o.complete),
            (Some(3), 2, 1, true)
        );
        let unknown = liveness(
            Figure::Unknown {
                reason: "session leases".into(),
            },
            na,
        );
        let o = observe(Expect::StuckLock, &t, Some(&unknown), &w);
        assert_eq!(o.anomalies, None, "an unknown figure is no zero");
        assert!(o.why.unwrap().contains("session leases"));
        assert_eq!(observe(Expect::StuckLock, &t, None, &w).anomalies, None);
        assert_eq!(
            hit_ids(Expect::StuckLock, &t, Some(&l), &w).unwrap(),
            BTreeSet::from([1]),
            "the ids behind the count"
        );
        assert!(hit_ids(Expect::StuckLock, &t, Some(&unknown), &w)
            .unwrap_err()
            .contains("session leases"));
    }

    #[test]
    fn an_orphaned_renewal_counts_at_its_invocation() {
        let nemesis = json!({"injections": [
            {"id": 7, "fault": "delay-release", "start_ns": 1_000, "stop_ns": 2_000}
        ]});
        let w = windows(&nemesis, 0, 10_000);
        let t = trials(vec![trial(7, true, &[])], &[]);
        let orphan = |at| OrphanRenewal {
            owner: "w2".into(),
            key: "lockjaw".into(),
            renew_op: 4,
            renew_invoked_ns: at,
            release_op: 3,
            release_completed_ns: 900,
            after_release_ms: 0.1,
            text: String::new(),
        };
        let o = OrphanedRenewals {
            count: 3,
            witnesses: vec![orphan(1_500), orphan(5_000)],
        };
        let l = liveness(
            Figure::NotApplicable { reason: "x".into() },
            Figure::Value(o),
        );
        let got = observe(Expect::OrphanedRenewal, &t, Some(&l), &w);
        assert_eq!(
            (got.anomalies, got.hits, got.complete),
            (Some(3), 1, false),
            "3 counted, 2 listed: the hits are a lower bound"
        );
    }
}
