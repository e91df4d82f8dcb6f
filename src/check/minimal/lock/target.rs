//! What a lock witness must show: one anomaly of the full history (the
//! first of its kind), by its kind, its proof ops and its owners; and the
//! full history's anomalies, which bound what a candidate may show.

use crate::check::lock::{CheckResult, LockReport, WitnessData};
use std::collections::HashSet;

/// An anomaly's identity: its kind and the op indexes it names as proof.
pub type Sig = (&'static str, Vec<u64>);

/// Which whole-history total an anomaly is (rule c), and so what stays.
#[derive(Clone, Debug, PartialEq)]
pub enum Total {
    /// Not a total: the holds of the named owners stay.
    None,
    /// Lost updates, phantoms, lost set elements: every write to the key.
    EveryWrite(String),
    /// A duplicate effect: every apply of the job.
    EveryApply(u64),
    /// A lock without leases that is no owned mutex: every lock op of the
    /// key (dropping a release or an acquire can break a good history).
    EveryLockOp(String),
}

/// The anomaly a witness is searched for.
#[derive(Clone, Debug)]
pub struct Target {
    pub kind: &'static str,
    /// The results.json check that found it.
    pub check: &'static str,
    pub text: String,
    pub proof: Vec<u64>,
    pub owners: Vec<String>,
    pub total: Total,
    pub data: WitnessData,
}

/// The `kind` tag of a lock witness.
pub fn kind(d: &WitnessData) -> &'static str {
    match d {
        WitnessData::SafetyViolation { .. } => "safety-violation",
        WitnessData::MutexViolation { .. } => "mutex-violation",
        WitnessData::MutexNotLinearizable { .. } => "mutex-not-linearizable",
        WitnessData::FenceOrder { .. } => "fence-order",
        WitnessData::StaleWriteAccepted { .. } => "stale-write-accepted",
        WitnessData::LostUpdates { .. } | WitnessData::LostUpdatePair { .. } => "lost-updates",
        WitnessData::DuplicateEffect { .. } => "duplicate-effect",
        WitnessData::SetLost { .. } => "set-lost",
    }
}

/// Every op index the anomaly names, sorted.
pub fn proof(d: &WitnessData) -> Vec<u64> {
    let mut v = match d {
        WitnessData::SafetyViolation {
            first,
            second,
            lease_evidence_op,
            ..
        } => vec![first.acquire_op, second.acquire_op, *lease_evidence_op],
        WitnessData::MutexViolation { first, second, .. }
        | WitnessData::FenceOrder { first, second, .. } => {
            vec![first.acquire_op, second.acquire_op]
        }
        WitnessData::MutexNotLinearizable { violation, .. } => search_ops(violation),
        WitnessData::StaleWriteAccepted {
            request,
            seen,
            stale_grant,
            newer_grant,
            ..
        } => {
            let grants = [stale_grant, newer_grant];
            let mut v = vec![request.op, seen.op];
            v.extend(
                grants
                    .iter()
                    .filter_map(|g| g.as_ref().map(|g| g.acquire_op)),
            );
            v
        }
        WitnessData::LostUpdates { final_read_op, .. }
        | WitnessData::SetLost { final_read_op, .. } => vec![*final_read_op],
        WitnessData::LostUpdatePair { first, second, .. } => vec![first.op, second.op],
        WitnessData::DuplicateEffect {
            final_read_op,
            applies,
            ..
        } => {
            let mut v = applies.clone();
            v.push(*final_read_op);
            v
        }
    };
    v.sort_unstable();
    v.dedup();
    v
}

/// The op indexes of the owned-mutex search's evidence (its prefix and
/// the ops that could not follow).
fn search_ops(v: &serde_json::Value) -> Vec<u64> {
    let mut out = Vec::new();
    for part in ["prefix", "stuck"] {
        for op in v.get(part).and_then(|p| p.as_array()).into_iter().flatten() {
            for f in ["index", "complete_index"] {
                out.extend(op.get(f).and_then(|x| x.as_u64()));
            }
        }
    }
    out
}

/// The owners the anomaly names, first named first (A, B, ...).
pub fn owners(d: &WitnessData) -> Vec<String> {
    let mut v: Vec<String> = match d {
        WitnessData::SafetyViolation { first, second, .. }
        | WitnessData::MutexViolation { first, second, .. }
        | WitnessData::FenceOrder { first, second, .. } => {
            vec![first.owner.clone(), second.owner.clone()]
        }
        WitnessData::StaleWriteAccepted {
            request,
            seen,
            stale_grant,
            newer_grant,
            ..
        } => {
            let a = stale_grant.as_ref().map_or(&request.owner, |g| &g.owner);
            let b = newer_grant.as_ref().map_or(&seen.owner, |g| &g.owner);
            vec![a.clone(), b.clone()]
        }
        WitnessData::LostUpdatePair { first, second, .. } => {
            vec![first.owner.clone(), second.owner.clone()]
        }
        _ => Vec::new(),
    };
    let mut seen = HashSet::new();
    v.retain(|o| seen.insert(o.clone()));
    v
}

fn total(d: &WitnessData) -> Total {
    match d {
        WitnessData::LostUpdates { key, .. } | WitnessData::SetLost { key, .. } => {
            Total::EveryWrite(key.clone())
        }
        WitnessData::DuplicateEffect { job, .. } => Total::EveryApply(*job),
        WitnessData::MutexNotLinearizable { key, .. } => Total::EveryLockOp(key.clone()),
        _ => Total::None,
    }
}

/// The report's checks by their results.json names.
pub fn checks(r: &LockReport) -> [(&'static str, &CheckResult); 6] {
    let c = &r.checks;
    [
        ("safety", &c.safety),
        ("mutex", &c.mutex),
        ("fence_order", &c.fence_order),
        ("stale_writes", &c.stale_writes),
        ("lost_updates", &c.lost_updates),
        ("duplicate_effects", &c.duplicate_effects),
    ]
}

/// Whether the anomaly is a fact of two requests alone, so a sub-history
/// showing it shows an anomaly of the full history even where the full
/// history's list names another (a lost update proven by two writes,
/// `check::lock::overwrite`; a stale write accepted after a request with
/// a higher fence, in storage or real-time order, which the full history
/// lists with the highest fence seen, not every one).
pub fn is_fact(d: &WitnessData) -> bool {
    matches!(
        d,
        WitnessData::LostUpdatePair { .. } | WitnessData::StaleWriteAccepted { .. }
    )
}

/// One target per anomaly kind: the first anomaly of that kind, except
/// that a local proof of a lost update goes before the whole-history
/// total (its witness is a few ops, the total's every write).
pub fn targets(r: &LockReport) -> Vec<Target> {
    let local = |d: &WitnessData| matches!(d, WitnessData::LostUpdatePair { .. });
    let mut out: Vec<Target> = Vec::new();
    for (check, c) in checks(r) {
        for w in &c.witnesses {
            let k = kind(&w.data);
            if let Some(i) = out.iter().position(|t| t.kind == k) {
                if local(&w.data) && !local(&out[i].data) {
                    out.remove(i);
                } else {
                    continue;
                }
            }
            out.push(target(check, w));
        }
    }
    out
}

/// The anomaly of kind `kind` whose proof is `proof`, as a target (what a
/// witness file claims to show); else the kind's target.
pub fn target_for(r: &LockReport, kind: &str, proof: &[u64]) -> Option<Target> {
    checks(r)
        .iter()
        .flat_map(|(check, c)| c.witnesses.iter().map(move |w| (*check, w)))
        .find(|(_, w)| self::kind(&w.data) == kind && self::proof(&w.data) == proof)
        .map(|(check, w)| target(check, w))
        .or_else(|| targets(r).into_iter().find(|t| t.kind == kind))
}

fn target(check: &'static str, w: &crate::check::lock::Witness) -> Target {
    Target {
        kind: kind(&w.data),
        check,
        text: w.text.clone(),
        proof: proof(&w.data),
        owners: owners(&w.data),
        total: total(&w.data),
        data: w.data.clone(),
    }
}

/// The anomalies a report lists.
pub fn sigs(r: &LockReport) -> HashSet<Sig> {
    checks(r)
        .iter()
        .flat_map(|(_, c)| c.witnesses.iter())
        .map(|w| (kind(&w.data), proof(&w.data)))
        .collect()
}

/// Whether some check listed as many anomalies as it may (`cap`): more
/// may exist than the report lists.
pub fn capped(r: &LockReport, cap: usize) -> bool {
    checks(r).iter().any(|(_, c)| c.witnesses.len() >= cap)
}

/// The oracle's test on a candidate's report: it shows the target (same
/// kind, proof ops and owners) and nothing the full history lacks.
pub fn accepts(r: &LockReport, t: &Target, full: &HashSet<Sig>, cap: usize) -> bool {
    if capped(r, cap) {
        return false;
    }
    let mut hit = false;
    for (_, c) in checks(r) {
        for w in &c.witnesses {
            let s = (kind(&w.data), proof(&w.data));
            if !full.contains(&s) && !is_fact(&w.data) {
                return false;
            }
            hit |=
                s.0 == t.kind && s.1 == t.proof && owners(&w.data) == t.owners && same_total(t, w);
        }
    }
    hit
}

/// A whole-history total must come out the same (the same lost and
/// phantom counts, the same lost elements, as often in the final read),
/// not merely name the same final read.
fn same_total(t: &Target, w: &crate::check::lock::Witness) -> bool {
    t.total == Total::None
        || serde_json::to_value(&w.data).ok() == serde_json::to_value(&t.data).ok()
}

/// The candidate's anomaly matching the target, as JSON.
pub fn matching(r: &LockReport, t: &Target) -> Option<serde_json::Value> {
    checks(r)
        .iter()
        .flat_map(|(_, c)| c.witnesses.iter())
        .find(|w| kind(&w.data) == t.kind && proof(&w.data) == t.proof)
        .and_then(|w| serde_json::to_value(w).ok())
}
