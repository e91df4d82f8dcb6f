//! Facts about a finished run read back from its history, for `run.json`
//! and `nemesis.json`: the leases the service actually granted, and for
//! each `kill-holder` injection the time until the next grant (and whether
//! it came only after the dead holder's lease had run out).
//!
//! This is bookkeeping for reports, not a verdict: the lock checker decides
//! safety. The counts of grants and applied writes feed the run's verdict
//! ([`super::verdict`]: a run that tested nothing is unknown).

use crate::history::jsonl::JsonlReader;
use crate::history::{Op, OpType, Process};
use crate::nemesis::NemesisSummary;
use serde::Serialize;
use std::collections::HashMap;
use std::path::Path;

/// The smallest and largest lease granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct LeaseRange {
    pub min_ms: u64,
    pub max_ms: u64,
}

/// The time from killing a holder to the next grant of its lock.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct KillGap {
    pub injection: u64,
    pub owner: Option<String>,
    pub killed_ns: u64,
    /// Conservative end of the killed holder's lease (latest refresh
    /// invocation + its lease); `None` if the history does not say.
    pub lease_end_ns: Option<u64>,
    /// First grant to another owner completed after the kill.
    pub next_grant_ns: Option<u64>,
    pub gap_ms: Option<f64>,
    /// The next grant completed after the lease end.
    pub after_lease: Option<bool>,
}

/// What [`analyse`] found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Facts {
    pub lease: Option<LeaseRange>,
    pub kill_gaps: Vec<KillGap>,
    /// Successful acquires and won campaigns of the workers.
    pub grants: u64,
    /// Writes the storage or the register applied (`write`, `cas`,
    /// `apply` ok) for the workers; not the final read.
    pub writes: u64,
}

/// Read the history once. `acquire_sets_ttl`: an acquire starts the lease.
pub fn analyse(
    history: &Path,
    acquire_sets_ttl: bool,
    nemesis: &NemesisSummary,
) -> Result<Facts, String> {
    let reader = JsonlReader::open(history).map_err(|e| e.to_string())?;
    let mut invoked: HashMap<Process, u64> = HashMap::new();
    // owner → latest (refresh invocation + lease)
    let mut lease_end: HashMap<String, Vec<(u64, u64)>> = HashMap::new();
    let mut grants: Vec<(u64, String)> = Vec::new();
    let mut range: Option<LeaseRange> = None;
    let (mut grants_n, mut writes_n) = (0u64, 0u64);
    for op in reader {
        let op = op.map_err(|e| e.to_string())?;
        if op.kind == OpType::Invoke {
            invoked.insert(op.process.clone(), op.time);
            continue;
        }
        let start = invoked.remove(&op.process);
        if op.kind != OpType::Ok {
            continue;
        }
        if matches!(op.process, Process::Num(_)) {
            match op.f.as_str() {
                "acquire" | "campaign" => grants_n += 1,
                "write" | "cas" | "apply" => writes_n += 1,
                _ => {}
            }
        }
        note(
            &op,
            start,
            acquire_sets_ttl,
            &mut lease_end,
            &mut grants,
            &mut range,
        );
    }
    grants.sort();
    let kill_gaps = nemesis
        .injections
        .iter()
        .filter(|i| i.fault == "kill-holder")
        .map(|i| {
            let owner = i.target["owner"].as_str().map(str::to_string);
            let killed_ns = i.start_ns;
            let lease_end_ns = owner.as_ref().and_then(|o| {
                lease_end
                    .get(o)?
                    .iter()
                    .filter(|(refreshed, _)| *refreshed <= killed_ns)
                    .map(|(_, end)| *end)
                    .max()
            });
            let next = grants
                .iter()
                .find(|(t, o)| *t > killed_ns && Some(o) != owner.as_ref())
                .map(|(t, _)| *t);
            KillGap {
                injection: i.id,
                gap_ms: next.map(|t| (t - killed_ns) as f64 / 1e6),
                after_lease: next.zip(lease_end_ns).map(|(n, e)| n >= e),
                owner,
                killed_ns,
                lease_end_ns,
                next_grant_ns: next,
            }
        })
        .collect();
    Ok(Facts {
        lease: range,
        kill_gaps,
        grants: grants_n,
        writes: writes_n,
    })
}

fn note(
    op: &Op,
    start: Option<u64>,
    acquire_sets_ttl: bool,
    lease_end: &mut HashMap<String, Vec<(u64, u64)>>,
    grants: &mut Vec<(u64, String)>,
    range: &mut Option<LeaseRange>,
) {
    let (Some(owner), Some(lease)) = (op.owner.clone(), op.lease_ms) else {
        return;
    };
    let refreshes = match op.f.as_str() {
        // A won campaign (leader election) is a grant too.
        "acquire" | "campaign" => {
            grants.push((op.time, owner.clone()));
            let r = range.get_or_insert(LeaseRange {
                min_ms: lease,
                max_ms: lease,
            });
            r.min_ms = r.min_ms.min(lease);
            r.max_ms = r.max_ms.max(lease);
            acquire_sets_ttl
        }
        "renew" => true,
        _ => false,
    };
    if let (true, Some(t)) = (refreshes, start) {
        lease_end
            .entry(owner)
            .or_default()
            .push((t, t + lease * 1_000_000));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::jsonl::JsonlWriter;
    use crate::history::Meta;
    use crate::nemesis::Injection;
    use serde_json::json;

    fn op(t: u64, p: i64, kind: OpType, f: &str, owner: Option<&str>, lease: Option<u64>) -> Op {
        let mut o = Op::new(t, Process::Num(p), kind, f);
        o.owner = owner.map(str::to_string);
        o.lease_ms = lease;
        o
    }

    #[test]
    fn kill_gap_runs_from_the_kill_to_the_next_grant_to_someone_else() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("h.jsonl");
        let mut w = JsonlWriter::create(&p, &Meta::default()).unwrap();
        let ms = 1_000_000;
        for mut o in [
            op(0, 0, OpType::Invoke, "acquire", None, None),
            op(ms, 0, OpType::Ok, "acquire", Some("a"), Some(2000)),
            op(100 * ms, 1, OpType::Invoke, "acquire", None, None),
            op(2100 * ms, 1, OpType::Ok, "acquire", Some("b"), Some(1500)),
        ] {
            w.write(&mut o).unwrap();
        }
        w.flush().unwrap();
        let sum = NemesisSummary {
            injections: vec![Injection {
                id: 1,
                fault: "kill-holder".into(),
                start_ns: 50 * ms,
                started_ns: 51 * ms,
                stop_ns: Some(52 * ms),
                target: json!({"owner": "a"}),
                detail: json!({}),
                error: None,
            }],
            ..NemesisSummary::default()
        };
        let f = analyse(&p, true, &sum).unwrap();
        assert_eq!(
            f.lease,
            Some(LeaseRange {
                min_ms: 1500,
                max_ms: 2000
            })
        );
        let g = &f.kill_gaps[0];
        assert_eq!(g.lease_end_ns, Some(2000 * ms));
        assert_eq!(g.next_grant_ns, Some(2100 * ms));
        assert_eq!(g.gap_ms, Some(2050.0));
        assert_eq!(g.after_lease, Some(true));
        assert_eq!((f.grants, f.writes), (2, 0));
    }
}
