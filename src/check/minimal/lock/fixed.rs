//! The units a lock witness never drops: those holding the proof ops; the
//! named owners' ops (every op that names the owner — grants, renewals,
//! releases, lost events, for a session or etcd lease its whole life —
//! and, in each hold involved, every op of the holder's processes from the
//! grant to the op that ends the hold); for a whole-history total every
//! write to the key (or apply of the job, or lock op of the key); then
//! their dependencies (rule b).
//!
//! Anomalies whose proof reads no lease (stale writes accepted, fence
//! order, a lost update proven by two writes) keep only the holds that
//! hold a proof op: an owner's other ops (a ZooKeeper session's renewals
//! and earlier grants) cannot change the proof, so the search may drop
//! them like any op.

use super::target::{Target, Total};
use super::units::{is_lock_f, is_release_f, Units};

/// The fixed units of `t`, closed under dependencies.
pub fn fixed(h: &Units, t: &Target) -> Vec<bool> {
    let mut keep = vec![false; h.units.len()];
    for u in h.units_with_index(&t.proof) {
        keep[u] = true;
    }
    let whole = reads_leases(t);
    for o in &t.owners {
        owner_units(h, o, &t.proof, whole, &mut keep);
    }
    for (u, k) in keep.iter_mut().enumerate() {
        if h.is_nemesis(u) {
            continue;
        }
        *k |= match &t.total {
            Total::None => false,
            Total::EveryWrite(key) => h.f(u) == "write" && h.key(u) == Some(key),
            Total::EveryApply(job) => {
                h.f(u) == "apply" && h.value(u).get("job").and_then(|j| j.as_u64()) == Some(*job)
            }
            Total::EveryLockOp(key) => is_lock_f(h.f(u)) && h.key(u) == Some(key),
        };
    }
    h.close(&mut keep);
    keep
}

/// The processes that act for `owner`: those with a unit of that owner,
/// and those sharing their default owner (a worker's lease process).
fn family(h: &Units, owner: &str) -> Vec<bool> {
    let mut fam = vec![false; h.procs.len()];
    for (u, unit) in h.units.iter().enumerate() {
        if !h.is_nemesis(u) && h.owner(u).as_deref() == Some(owner) {
            fam[unit.proc] = true;
        }
    }
    let defaults: Vec<String> = (0..h.procs.len())
        .filter(|&p| fam[p])
        .filter_map(|p| h.procs[p].default_owner())
        .collect();
    for (p, f) in fam.iter_mut().enumerate() {
        let d = h.procs[p].default_owner();
        *f |= d.is_some_and(|d| defaults.contains(&d));
    }
    fam
}

/// Whether the anomaly's proof may read an owner's leases and holds
/// beyond the proof ops (two holders, a lock that is no mutex): then every
/// op naming the owner stays.
fn reads_leases(t: &Target) -> bool {
    !matches!(
        t.kind,
        "stale-write-accepted" | "fence-order" | "lost-updates"
    )
}

/// Mark the units of `owner`: with `whole`, every unit naming it
/// explicitly and every hold whose span names it explicitly; always the
/// holds whose span holds a proof op.
fn owner_units(h: &Units, owner: &str, proof: &[u64], whole: bool, keep: &mut [bool]) {
    let fam = family(h, owner);
    // Family units in file order.
    let mut units: Vec<usize> = (0..h.units.len())
        .filter(|&u| fam[h.units[u].proc])
        .collect();
    units.sort_by_key(|&u| h.first(u));
    for &u in &units {
        if whole && h.explicit_owner(u) == Some(owner) {
            keep[u] = true;
        }
    }
    for (i, &g) in units.iter().enumerate() {
        if !(h.is_grant(g) && h.owner(g).as_deref() == Some(owner)) {
            continue;
        }
        let span = hold(h, owner, &units[i..]);
        let involved = span.iter().any(|&u| {
            (whole && h.explicit_owner(u) == Some(owner))
                || h.units[u]
                    .ops
                    .iter()
                    .any(|&p| proof.contains(&h.ops[p].index))
        });
        if involved {
            for u in span {
                keep[u] = true;
            }
        }
    }
}

/// The units of the hold that `units[0]` (a grant of `owner`) begins: up
/// to the first release-like op of the owner, or to the next grant to
/// another owner in the same processes (not included), or to the end.
fn hold(h: &Units, owner: &str, units: &[usize]) -> Vec<usize> {
    let mut out = vec![units[0]];
    for &u in &units[1..] {
        let other = h.owner(u).as_deref() != Some(owner);
        if h.is_grant(u) && other {
            break;
        }
        out.push(u);
        if is_release_f(h.f(u)) && !other {
            break;
        }
    }
    out
}
