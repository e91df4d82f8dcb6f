//! Unprotected writes (information): storage writes their writer invoked
//! outside the lease of the grant they were made under.
//!
//! A write names its grant by `owner` (the stepper stamps every storage op
//! with its grant's owner; histories without it fall back to the process's
//! default owner). Its lease is the owner's lease when acquires do not set
//! the TTL, else the owner's latest grant completed before the write was
//! invoked. The write waits on that lease and is judged when the lease is
//! forgotten or the history ends, with every later refresh counted (a
//! write past the proven lower bound keeps its lease: a later renew of the
//! owner could still prove the lease held then):
//!
//! - *after the lease had certainly ended*: invoked after the lease's upper
//!   bound, the end the stale-holder rule uses (honest clocks, every
//!   refresh recorded; unknown where some are not);
//! - *past the lower bound*: invoked after the lower bound of the lease's
//!   end, so nothing in the history proves the lease still held (this
//!   includes the first kind).
//!
//! Neither changes a verdict: a write outside its lease is damage only if
//! it lands on a resource another holder guards, and that damage is what
//! the resource checks (stale writes accepted, lost updates) judge.

use super::event::{Done, Name, Outcome};
use super::lease::{Lease, LeaseId};
use super::report::{UnprotectedWrite, UnprotectedWrites, MAX_STALE_LISTED};
use super::service::Service;
use super::witness::{ms, secs, RequestRef};

/// A write waiting on its lease.
#[derive(Clone, Debug)]
pub struct PendingWrite {
    pub key: String,
    pub r: RequestRef,
    pub accepted: bool,
}

impl Service {
    /// A write completed (any outcome): attach it to its grant's lease.
    pub(crate) fn write_done(&mut self, d: &Done, key: &str) {
        let id = self.request_lease(&d.owner, d.inv_time);
        let Some(l) = id.and_then(|id| self.leases.get_mut(&id)) else {
            self.unprotected.unattributed += 1;
            return;
        };
        l.writes.push(PendingWrite {
            key: key.to_string(),
            r: RequestRef::of(d, &d.owner),
            accepted: d.outcome == Outcome::Ok,
        });
    }
}

impl Service {
    /// The lease a storage request of `owner` invoked at `inv` was made
    /// under: the owner's lease when acquires do not set the TTL, else its
    /// latest grant completed before `inv`.
    pub(crate) fn request_lease(&self, owner: &Name, inv: u64) -> Option<LeaseId> {
        let ids = self.by_owner.get(owner);
        if !self.p.acquire_sets_ttl {
            return ids.and_then(|v| v.first().copied());
        }
        let leases = &self.leases;
        ids.into_iter()
            .flatten()
            .filter_map(|id| leases.get(id).and_then(|l| l.acquire).map(|a| (*id, a)))
            .filter(|(_, (_, _, done))| *done <= inv)
            .max_by_key(|(_, (_, _, done))| *done)
            .map(|(id, _)| id)
    }
}

/// Judge the writes of `l` that no later proof can change (those not past
/// its proven lower bound: bounds only grow); returns whether writes past
/// it remain, which a later renew of the owner could still clear, so the
/// lease must stay.
pub(crate) fn judge_settled(u: &mut UnprotectedWrites, l: &mut Lease) -> bool {
    let Some(lower) = l.best.map(|b| b.end) else {
        return false;
    };
    if l.is_leaseless() || l.lease_ms == Some(0) {
        return false;
    }
    let before = l.writes.len();
    l.writes.retain(|w| w.r.invoked_ns > lower);
    u.writes += (before - l.writes.len()) as u64;
    !l.writes.is_empty()
}

/// Judge the writes waiting on `l` (it is being forgotten, or the history
/// ended).
pub(crate) fn judge(u: &mut UnprotectedWrites, l: &mut Lease) {
    let writes = std::mem::take(&mut l.writes);
    let lower = l.best.map(|b| b.end);
    // A session lease (length 0) is proven only at each statement, so
    // every write would be "past" its last proof: not judged.
    if l.is_leaseless() || lower.is_none() || l.lease_ms == Some(0) {
        u.unattributed += writes.len() as u64;
        return;
    }
    for w in writes {
        u.writes += 1;
        let t = w.r.invoked_ns;
        let after_end = l.upper.is_some_and(|up| t > up);
        let past_lower = lower.is_some_and(|b| t > b);
        if after_end {
            *u.after_lease_end.get_or_insert(0) += 1;
        }
        if !past_lower {
            continue;
        }
        u.past_lower_bound += 1;
        u.past_lower_bound_accepted += w.accepted as u64;
        if u.list.len() >= MAX_STALE_LISTED {
            continue;
        }
        u.list.push(witness(w, lower, l.upper, after_end));
    }
}

fn witness(
    w: PendingWrite,
    lower: Option<u64>,
    upper: Option<u64>,
    after_end: bool,
) -> UnprotectedWrite {
    let t = w.r.invoked_ns;
    let bound = if after_end { upper } else { lower };
    let late_ms = bound.map(|b| ms(t.saturating_sub(b))).unwrap_or(0.0);
    let fate = if w.accepted {
        "the storage accepted it"
    } else {
        "the storage did not accept it"
    };
    let when = match (after_end, upper) {
        (true, Some(u)) => format!("after its lease had certainly ended (by {})", secs(u)),
        _ => format!(
            "after the last moment its lease was proven valid ({}), before it had certainly ended",
            lower.map(secs).unwrap_or_default()
        ),
    };
    let text = format!(
        "{} invoked write op {} of '{}' at {}, {when}, {late_ms} ms late; {fate}",
        w.r.owner,
        w.r.op,
        w.key,
        secs(t)
    );
    UnprotectedWrite {
        kind: if after_end {
            "after-lease-end"
        } else {
            "past-lower-bound"
        }
        .into(),
        key: w.key,
        write: w.r,
        accepted: w.accepted,
        lease_valid_until_ns: lower,
        lease_over_by_ns: upper,
        late_ms,
        text,
    }
}
