//! Repairing the core before searching: when the fixed units alone show an
//! anomaly the full history lacks (say a stale write whose newer request
//! is another op, because the one the full history names was dropped),
//! add the proof ops of the full history's anomalies of that kind that
//! share an op with it, close, and try again. A few oracle calls usually
//! give a small set that passes; the search then starts from it instead of
//! from the whole history (on a 20,000-op run, the difference between
//! checking candidates of dozens of ops and of thousands).

use super::target::{self, Sig, Target};
use super::units::Units;
use crate::check::lock::LockReport;
use std::collections::HashSet;

/// At most this many oracle calls go to repairing.
const MAX_ROUNDS: u64 = 16;

/// A set of units (closed, holding `fixed`) that passes, if repairing
/// found one, and the oracle calls spent.
pub fn grow(
    h: &Units,
    t: &Target,
    fixed: &[bool],
    full: &HashSet<Sig>,
    budget: u64,
    check: &dyn Fn(&[bool]) -> Option<LockReport>,
) -> (Option<Vec<bool>>, u64) {
    let mut cand = fixed.to_vec();
    let mut calls = 0;
    while calls < budget.min(MAX_ROUNDS) {
        calls += 1;
        let Some(r) = check(&cand) else {
            return (None, calls);
        };
        if target::accepts(&r, t, full, super::MAX_LISTED) {
            return (Some(cand), calls);
        }
        let mut add: Vec<u64> = Vec::new();
        for (_, c) in target::checks(&r) {
            for w in &c.witnesses {
                let (k, p) = (target::kind(&w.data), target::proof(&w.data));
                if full.contains(&(k, p.clone())) {
                    continue;
                }
                let near = full
                    .iter()
                    .filter(|(fk, fp)| *fk == k && fp.iter().any(|x| p.contains(x)));
                add.extend(near.flat_map(|(_, fp)| fp.iter().copied()));
            }
        }
        let before = cand.iter().filter(|&&k| k).count();
        for u in h.units_with_index(&add) {
            cand[u] = true;
        }
        h.close(&mut cand);
        if cand.iter().filter(|&&k| k).count() == before {
            return (None, calls);
        }
    }
    (None, calls)
}
