//! The measured catalogue as CI cases: one per row side (`ID/buggy`,
//! `ID/fixed` or `ID/reference`). Met: passed. Contradicted: failed, its
//! kind the row's expected kind, its message the side's verdict, its
//! witness the side's run directories. Not enough evidence or not run:
//! unknown. Could not run: an error. A not-reproduced row: one N/A case
//! with its reason.

use super::catalogue::Role;
use super::side::Met;
use super::table::Measured;
use crate::report::ci::{Case, Outcome};
use std::collections::BTreeMap;

/// The cases of `rows`; `runs_of(id, side)` says where a side's runs are.
pub fn cases(rows: &[Measured], runs_of: impl Fn(&str, Role) -> String) -> Vec<Case> {
    let mut v = vec![];
    for m in rows {
        let b = &m.bug;
        let clean = b.clean_role().unwrap_or(Role::Fixed);
        let keys = |role: Role| -> BTreeMap<String, String> {
            let mut k: BTreeMap<String, String> = [
                ("bug", b.id.clone()),
                ("side", role.name().to_string()),
                ("system", b.system.clone()),
            ]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
            if let Some(c) = b.client(role) {
                k.insert("client".into(), c.to_string());
            }
            k
        };
        if let Some(r) = &b.not_reproduced {
            v.push(Case {
                suite: "bugs".into(),
                name: b.id.clone(),
                keys: keys(Role::Buggy),
                outcome: Outcome::NotApplicable {
                    reason: format!("not reproduced: {r}"),
                },
            });
            continue;
        }
        for (role, side) in [(Role::Buggy, &m.buggy), (clean, &m.fixed)] {
            if b.client(role).is_none() {
                continue;
            }
            let error = m.errors.iter().find(|(r, _)| *r == role);
            let outcome = match (error, side) {
                (Some((_, e)), _) => Outcome::Error { message: e.clone() },
                (None, None) => Outcome::Unknown {
                    reason: "not run".into(),
                },
                (None, Some((_, Met::Met))) => Outcome::Passed,
                (None, Some((_, Met::NotEnough(w)))) => Outcome::Unknown {
                    reason: format!("not enough evidence: {w}"),
                },
                (None, Some((_, met @ Met::Contradicts(_)))) => Outcome::Failed {
                    kinds: vec![b.expect.name().to_string()],
                    message: format!("{} {}: {}", b.id, role.name(), met.text()),
                    witness: Some(runs_of(&b.id, role)),
                },
            };
            v.push(Case {
                suite: "bugs".into(),
                name: format!("{}/{}", b.id, role.name()),
                keys: keys(role),
                outcome,
            });
        }
    }
    v
}
