//! Lease ends (check 1): what the history proves about how long a lease
//! lasted, and the overlaps that wait for such proof.
//!
//! A lease is identified by its owner when acquires do not set the TTL
//! (etcd lease, ZooKeeper session: one lease per owner, refreshed by renews
//! before or after any acquire), and by the grant itself when they do
//! (Redis `SET ... PX`: each grant's key has its own TTL, refreshed only by
//! renews of that owner and key made after the grant completed).
//!
//! The lower bound of a lease's end is the largest `invoke time +
//! lease_ms × (1 − ρ) − ε` over the ops crediting it. A lease never comes
//! back once ended (a renew of an ended lease fails), so a renew that
//! succeeds at any later time proves the lease was valid all along until
//! its own bound. The upper bound, `completion + lease_ms × (1 + ρ) + ε`
//! over the same ops, is when the lease had certainly ended if every
//! refresh is recorded; it is used only for information and to forget
//! leases, never for a verdict.
//!
//! `lease_ms: 0` is a session lease (PostgreSQL's session-level advisory
//! locks): each successful statement on the holding session proves the
//! lock held when it was invoked (the lower bound is the invocation), and
//! there is no upper bound: an idle session keeps its lock.

use super::event::Name;
use super::params::LockParams;
use super::witness::GrantRef;
use std::collections::VecDeque;
use std::sync::Arc;

pub type LeaseId = u64;

/// The op proving a lease's lower bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// The lease certainly lasted until here (ns).
    pub end: u64,
    /// The `index` of the proving op.
    pub op: u64,
}

/// A later grant that overlapped an earlier holder whose lease was not
/// (yet) proven valid at that moment.
#[derive(Clone, Debug)]
pub struct Pending {
    /// The later grant's completion: the earlier lease must have lasted
    /// past this for a violation.
    pub t: u64,
    pub key: u32,
    pub first: Arc<GrantRef>,
    pub second: Arc<GrantRef>,
    /// When the earlier holder began releasing, once known.
    pub first_release: Option<u64>,
}

/// One lease.
#[derive(Debug)]
pub struct Lease {
    pub owner: Name,
    /// For a per-grant lease (acquire sets the TTL): its lock key.
    pub key: Option<u32>,
    pub lease_ms: Option<u64>,
    pub best: Option<Evidence>,
    /// A renew without `lease_ms`, before the lease length was known:
    /// (invocation, completion, op index).
    unsized_renew: Option<(u64, u64, u64)>,
    pub upper: Option<u64>,
    /// Renews in flight: (call, invocation time).
    pub inflight: Vec<(u64, u64)>,
    pub pending: VecDeque<Pending>,
    /// Open grants that use this lease.
    pub grants: u32,
    /// For a per-grant lease: its acquire (call, invocation, completion).
    pub acquire: Option<(u64, u64, u64)>,
    /// Whether any op proved this lease (with or without a length).
    renewed: bool,
    /// Writes made under this lease, judged when it is forgotten.
    pub writes: Vec<super::unprotected::PendingWrite>,
    /// The latest storage request made under this lease (zombie time).
    pub last_request: Option<super::zombie::LastRequest>,
    /// A `kill-holder` fault named its owner: no later op of the owner
    /// can refresh it (a renew in flight may still complete).
    pub dead: bool,
    /// Past its horizon with no later op able to prove more: its bounds
    /// are final, and an overlap with one of its grants is judged at once.
    pub closed: bool,
}

impl Lease {
    pub fn new(owner: Name, key: Option<u32>) -> Lease {
        Lease {
            owner,
            key,
            lease_ms: None,
            best: None,
            unsized_renew: None,
            upper: None,
            inflight: Vec::new(),
            pending: VecDeque::new(),
            grants: 0,
            acquire: None,
            renewed: false,
            writes: Vec::new(),
            last_request: None,
            dead: false,
            closed: false,
        }
    }

    /// A grant with no lease length and no refresh: a lock without lease.
    pub fn is_leaseless(&self) -> bool {
        self.lease_ms.is_none() && !self.renewed
    }

    /// Learn the lease length (from a grant or a renew that states it).
    pub fn set_lease_ms(&mut self, p: &LockParams, ms: u64) {
        if self.lease_ms.is_some() {
            return;
        }
        self.lease_ms = Some(ms);
        if let Some((inv, done, op)) = self.unsized_renew.take() {
            self.prove(p, inv, done, Some(ms), op);
        }
    }

    /// A successful op that started or refreshed the lease: invoked at
    /// `inv`, completed at `done`.
    pub fn prove(&mut self, p: &LockParams, inv: u64, done: u64, ms: Option<u64>, op: u64) {
        self.renewed = true;
        let Some(ms) = ms.or(self.lease_ms) else {
            if self.unsized_renew.map_or(true, |(i, _, _)| inv > i) {
                self.unsized_renew = Some((inv, done, op));
            }
            return;
        };
        if self.lease_ms.is_none() {
            self.lease_ms = Some(ms);
        }
        let end = p.lease_lower(inv, ms);
        if self.best.map_or(true, |b| end > b.end) {
            self.best = Some(Evidence { end, op });
        }
        self.alive_at(p, done, ms);
    }

    /// The lease was valid at some moment up to `done` (e.g. an acquire
    /// that used it succeeded): it cannot have ended before `done`'s upper bound.
    ///
    /// A lease of length 0 is a session lease (a PostgreSQL advisory lock
    /// lives as long as its session): a proof says it was alive at that
    /// moment and nothing about how long after, since an idle session
    /// keeps its lock, so it has no upper bound at all.
    pub fn alive_at(&mut self, p: &LockParams, done: u64, ms: u64) {
        if ms == 0 {
            return;
        }
        let up = p.lease_upper(done, ms);
        self.upper = Some(self.upper.map_or(up, |u| u.max(up)));
    }

    /// Pending overlaps the current lower bound now proves: two valid
    /// leases at once. Removed from the queue, oldest first.
    pub fn resolve(&mut self) -> Vec<(Pending, Evidence)> {
        let mut out = Vec::new();
        let Some(best) = self.best else {
            return out;
        };
        while self.pending.front().is_some_and(|q| q.t < best.end) {
            out.push((self.pending.pop_front().unwrap(), best));
        }
        out
    }

    /// Whether no later op can matter any more: past its upper bound with
    /// no renew in flight that began before it (or waited past `window`).
    pub fn beyond_horizon(&self, now: u64, window: u64) -> bool {
        match self.upper {
            None => false,
            Some(u) => {
                now > u
                    && (now > u.saturating_add(window)
                        || self.inflight.iter().all(|&(_, inv)| inv > u))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::Meta;

    fn params() -> LockParams {
        let m: Meta =
            serde_json::from_str(r#"{"acquire_sets_ttl": false, "workload": "lock"}"#).unwrap();
        LockParams::new("h", Some(&m), None, 1000).unwrap()
    }

    #[test]
    fn a_renew_before_the_length_is_known_counts_once_it_is() {
        let p = params();
        let mut l = Lease::new("7".into(), None);
        l.prove(&p, 1_000_000_000, 1_100_000_000, None, 3);
        assert_eq!(l.best, None);
        l.set_lease_ms(&p, 1000);
        assert_eq!(
            l.best,
            Some(Evidence {
                end: 1_997_000_000,
                op: 3
            })
        );
    }

    #[test]
    fn a_session_lease_is_proven_at_each_statement_and_never_certainly_over() {
        let p = params();
        let mut l = Lease::new("7".into(), None);
        l.set_lease_ms(&p, 0);
        l.alive_at(&p, 1_000_000_000, 0);
        assert_eq!(l.upper, None);
        l.prove(&p, 3_000_000_000, 3_100_000_000, Some(0), 5);
        assert_eq!(l.best.map(|b| b.end), Some(3_000_000_000));
        assert_eq!(l.upper, None);
        assert!(!l.beyond_horizon(u64::MAX / 2, 1));
    }

    #[test]
    fn resolve_pops_only_overlaps_before_the_bound() {
        let p = params();
        let mut l = Lease::new("7".into(), None);
        let g = Arc::new(GrantRef {
            owner: "7".into(),
            process: "1".into(),
            fence: None,
            acquire_op: 0,
            invoked_ns: 0,
            completed_ns: 1,
            lease_ms: Some(1000),
        });
        for t in [500_000_000, 2_500_000_000] {
            l.pending.push_back(Pending {
                t,
                key: 0,
                first: g.clone(),
                second: g.clone(),
                first_release: None,
            });
        }
        l.prove(&p, 1_000_000_000, 1_000_000_000, Some(1000), 9);
        let r = l.resolve();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0.t, 500_000_000);
        assert_eq!(l.pending.len(), 1);
    }
}
