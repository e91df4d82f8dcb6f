//! A comparison's cells as CI cases: one per cell, named as its run
//! directories are; failed when a run of it is invalid (the kinds of all
//! its runs, the first invalid run's verdict and witness), an error when
//! it could not run, N/A with its reason, unknown when a run could not be
//! decided and none was invalid.

use crate::report::ci::{run_outcome, Case, Outcome};
use crate::report::compare::{Cell, CellOutcome};
use std::path::Path;

/// The cases of `cells`.
pub fn cases(cells: &[Cell]) -> Vec<Case> {
    cells.iter().map(case).collect()
}

fn case(c: &Cell) -> Case {
    let s = &c.spec;
    let mut keys: std::collections::BTreeMap<String, String> = [
        ("system", s.system.clone()),
        ("client", s.client.clone()),
        ("nemesis", s.nemesis.clone()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    let fencing = match &c.outcome {
        CellOutcome::Runs { runs } => s.fencing.or(runs.iter().find_map(|r| r.summary.fencing)),
        _ => s.fencing,
    };
    if let Some(f) = fencing {
        keys.insert("fencing".into(), if f { "on" } else { "off" }.into());
    }
    let outcome = match &c.outcome {
        CellOutcome::NotApplicable { reason } => Outcome::NotApplicable {
            reason: reason.clone(),
        },
        CellOutcome::Failed { error } => Outcome::Error {
            message: error.clone(),
        },
        CellOutcome::Runs { runs } => {
            let each: Vec<Outcome> = runs
                .iter()
                .map(|r| {
                    let p = Path::new(&r.report);
                    let dir = p.parent().unwrap_or(p).display().to_string();
                    run_outcome(&r.summary, &dir)
                })
                .collect();
            pooled(each)
        }
    };
    Case {
        suite: "compare".into(),
        name: super::sharded::unit(s),
        keys,
        outcome,
    }
}

/// A cell's outcome from its runs': failed when one is (all runs' kinds,
/// the first failure's line and witness, how many failed), else unknown
/// when one is, else passed.
fn pooled(each: Vec<Outcome>) -> Outcome {
    let n = each.len();
    let failed: Vec<&Outcome> = each
        .iter()
        .filter(|o| matches!(o, Outcome::Failed { .. }))
        .collect();
    if let Some(Outcome::Failed {
        message, witness, ..
    }) = failed.first()
    {
        let mut kinds: Vec<String> = failed
            .iter()
            .flat_map(|o| match o {
                Outcome::Failed { kinds, .. } => kinds.clone(),
                _ => vec![],
            })
            .collect();
        kinds.sort();
        kinds.dedup();
        return Outcome::Failed {
            kinds,
            message: format!(
                "{} of {n} run(s) invalid; the first {message}",
                failed.len()
            ),
            witness: witness.clone(),
        };
    }
    each.into_iter()
        .find(|o| matches!(o, Outcome::Unknown { .. }))
        .unwrap_or(Outcome::Passed)
}
