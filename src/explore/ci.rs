//! An explore as CI cases: one per fault family planned (and `learn` for
//! the fault-free learn runs' anomalies). Failed when a finding confirmed
//! alone lies in it (its kinds, each finding and point in the message, the
//! first witness); unknown when a point of it landed fewer than the
//! minimum, or a finding awaits confirmation; else passed. A baseline
//! accepts a finding by its `kind` and `family`.

use super::coverage;
use super::output::Report;
use crate::report::ci::{Case, Outcome};
use std::collections::BTreeMap;

fn family_name(f: Option<super::plan::Family>) -> String {
    f.and_then(|f| serde_json::to_value(f).ok())
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_else(|| "learn".into())
}

/// The cases of an explore's report.
pub fn cases(r: &Report) -> Vec<Case> {
    let cov = coverage::coverage(r, r.min_landed.max(1));
    let family_of = |point: &str| family_name(r.plan.get(point).map(|p| p.family));
    let mut families: Vec<String> = r
        .plan
        .points
        .iter()
        .map(|p| family_name(Some(p.family)))
        .collect();
    families.extend(r.findings.iter().map(|f| family_of(&f.point)));
    families.sort();
    families.dedup();
    let mut v = vec![];
    for fam in families {
        let found: Vec<_> = r
            .findings
            .iter()
            .filter(|f| f.confirmed && family_of(&f.point) == fam)
            .collect();
        let pending = r
            .findings
            .iter()
            .any(|f| f.pending() && family_of(&f.point) == fam);
        let short = cov
            .short
            .iter()
            .filter(|(p, _)| family_of(p) == fam)
            .count();
        let outcome = if let Some(first) = found.first() {
            let mut kinds: Vec<String> = found.iter().map(|f| f.kind.clone()).collect();
            kinds.sort();
            kinds.dedup();
            let each: Vec<String> = found
                .iter()
                .map(|f| {
                    format!(
                        "{} at {} ({} of {} landed)",
                        f.kind, f.point, f.hits, f.landed
                    )
                })
                .collect();
            Outcome::Failed {
                kinds,
                message: format!("{} finding(s): {}", found.len(), each.join("; ")),
                witness: first.witness.as_ref().map(|w| w.display().to_string()),
            }
        } else if pending {
            Outcome::Unknown {
                reason: "a candidate finding was not yet run alone".into(),
            }
        } else if short > 0 {
            Outcome::Unknown {
                reason: format!(
                    "{short} point(s) landed fewer than {} time(s)",
                    r.min_landed.max(1)
                ),
            }
        } else {
            Outcome::Passed
        };
        let mut keys = BTreeMap::from([
            ("family".to_string(), fam.clone()),
            ("system".to_string(), r.system.clone()),
        ]);
        keys.insert(
            "client".into(),
            r.client.clone().unwrap_or_else(|| "builtin".into()),
        );
        v.push(Case {
            suite: "explore".into(),
            name: format!("{} {fam}", r.client.as_deref().unwrap_or(&r.system)),
            keys,
            outcome,
        });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explore::output::Finding;
    use crate::explore::plan::{Family, Point};

    #[test]
    fn a_family_with_a_confirmed_finding_fails_and_the_others_pass_or_wait() {
        let mut r = Report {
            system: "redis".into(),
            min_landed: 1,
            ..Report::default()
        };
        r.plan.points = vec![
            Point::sample("p1", Family::Process, true, 100),
            Point::sample("n1", Family::Network, true, 100),
        ];
        r.findings.push(Finding {
            kind: "stuck-lock".into(),
            point: "p1".into(),
            landed: 4,
            hits: 2,
            witness: Some("runs/run-3/witness-stuck-lock.jsonl".into()),
            confirmed: true,
            confirm_dir: Some("runs/run-4".into()),
            builtin_shows: None,
            shrink: None,
            row: None,
        });
        let c = cases(&r);
        assert_eq!(c.len(), 2, "{c:?}");
        let net = c.iter().find(|c| c.keys["family"] == "network").unwrap();
        // Nothing landed at n1: not enough evidence, never a pass.
        assert!(matches!(net.outcome, Outcome::Unknown { .. }), "{net:?}");
        let proc = c.iter().find(|c| c.keys["family"] == "process").unwrap();
        match &proc.outcome {
            Outcome::Failed {
                kinds,
                message,
                witness,
            } => {
                assert_eq!(kinds, &["stuck-lock"]);
                assert_eq!(message, "1 finding(s): stuck-lock at p1 (2 of 4 landed)");
                assert_eq!(
                    witness.as_deref(),
                    Some("runs/run-3/witness-stuck-lock.jsonl")
                );
            }
            o => panic!("{o:?}"),
        }
    }
}
