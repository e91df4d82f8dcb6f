//! The lease guard (workload `lease_guard = "on"`), and the sink that
//! stamps storage ops with the owner of the grant they are made under.
//!
//! The guard is the client half of "when the lease is in doubt, do not
//! write" (fail-closed). It counts the lease from its last proof, the
//! invocation of the op that last started or refreshed it: the grant's
//! acquire when the acquire starts the lease (Redis `SET .. PX`), else
//! (an etcd lease, a ZooKeeper session started before the acquire) only a
//! renew or probe this worker made itself. The lease certainly lasts until
//! `proof + lease × (1 − ρ) − ε` on the worker's clock (the same lower
//! bound the checker uses); a write may go only if a whole op timeout still
//! fits before that moment. Otherwise the worker renews once and checks
//! again, and if the renew fails or still leaves too little, it abandons
//! the write. A renew that answers "the lease is gone" abandons every
//! later write of the grant.
//!
//! With renewals (`renew = true`) the guard also watches the hold: a
//! renewal that fails, times out (`info`) or leaves the lease unproven
//! past the moment it certainly lasted ends the critical section at once
//! ([`Guard::holds`]), and its remaining protected writes are abandoned.
//!
//! Off, the worker writes as if it held the lock (fail-open).

use crate::check::lock::{DEFAULT_DRIFT, DEFAULT_EPSILON_MS};
use crate::client::Grant;
use crate::history::{Op, Sink};
use std::time::Duration;

/// What the guard says about a write about to be sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The lease outlasts the write.
    Write,
    /// Not proven long enough: renew, then ask again.
    Renew,
    /// A renew said the lease is gone.
    Abandon,
}

/// One worker's guard state for its current grant.
#[derive(Clone, Debug)]
pub struct Guard {
    pub on: bool,
    op_timeout_ns: u64,
    lease_ns: u64,
    /// Invocation time (run-clock ns) of the last op that proved the lease.
    proof: Option<u64>,
    gone: bool,
}

impl Guard {
    pub fn new(on: bool, op_timeout: Duration) -> Guard {
        Guard {
            on,
            op_timeout_ns: op_timeout.as_nanos() as u64,
            lease_ns: 0,
            proof: None,
            gone: false,
        }
    }

    /// A new grant, whose acquire was invoked at `acquire_inv`.
    pub fn granted(&mut self, g: &Grant, acquire_inv: u64) {
        self.lease_ns = g.lease.as_nanos() as u64;
        self.proof = g.acquire_sets_ttl.then_some(acquire_inv);
        self.gone = false;
    }

    /// A renew or probe invoked at `inv` succeeded.
    pub fn renewed(&mut self, inv: u64) {
        self.proof = Some(self.proof.map_or(inv, |p| p.max(inv)));
    }

    /// A renew or probe said the lease is gone.
    pub fn lost(&mut self) {
        self.gone = true;
    }

    /// The moment (run-clock ns) until which the lease is certainly valid.
    pub fn valid_until(&self) -> Option<u64> {
        let p = self.proof?;
        let keep = self.lease_ns as f64 * (1.0 - DEFAULT_DRIFT) - DEFAULT_EPSILON_MS * 1e6;
        Some(p.saturating_add(keep.max(0.0) as u64))
    }

    /// During a renewing hold: may the critical section go on at `now`?
    /// Not once a renew said the lease is gone, nor once the last proof
    /// is older than the lease certainly lasts. A lease not proven yet (an
    /// etcd lease before the worker's first renew) goes on until a renew
    /// decides.
    pub fn holds(&self, now: u64) -> bool {
        !self.gone && !matches!(self.valid_until(), Some(v) if v <= now)
    }

    /// May a write be sent at `now`?
    pub fn decide(&self, now: u64) -> Decision {
        if self.gone {
            return Decision::Abandon;
        }
        match self.valid_until() {
            Some(v) if v > now.saturating_add(self.op_timeout_ns) => Decision::Write,
            _ => Decision::Renew,
        }
    }
}

/// A sink that gives storage ops the owner of their grant.
pub struct Owned<'a> {
    pub sink: &'a dyn Sink,
    pub owner: &'a str,
}

impl Sink for Owned<'_> {
    fn record(&self, mut op: Op) {
        if op.owner.is_none() {
            op.owner = Some(self.owner.to_string());
        }
        self.sink.record(op);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn grant(sets_ttl: bool) -> Grant {
        Grant {
            key: "k".into(),
            owner: "o".into(),
            fence: Some(1),
            lease: Duration::from_millis(1000),
            acquire_sets_ttl: sets_ttl,
        }
    }

    #[test]
    fn a_write_goes_only_while_a_whole_op_timeout_fits_in_the_lease() {
        let mut g = Guard::new(true, Duration::from_millis(200));
        g.granted(&grant(true), 100 * MS);
        // 1000 ms × (1 − 0.001) − 2 ms = 997 ms after the acquire's invocation.
        assert_eq!(g.valid_until(), Some(1097 * MS));
        assert_eq!(g.decide(800 * MS), Decision::Write);
        assert_eq!(g.decide(897 * MS), Decision::Renew);
        g.renewed(850 * MS);
        assert_eq!(g.decide(897 * MS), Decision::Write);
        g.lost();
        assert_eq!(g.decide(897 * MS), Decision::Abandon);
    }

    #[test]
    fn a_lease_started_before_the_acquire_needs_a_renew_first() {
        let mut g = Guard::new(true, Duration::from_millis(200));
        g.granted(&grant(false), 100 * MS);
        assert_eq!(g.valid_until(), None);
        assert_eq!(g.decide(101 * MS), Decision::Renew);
        g.renewed(120 * MS);
        assert_eq!(g.decide(130 * MS), Decision::Write);
        // A new grant forgets the old proof and the old loss.
        g.lost();
        g.granted(&grant(true), 2000 * MS);
        assert_eq!(g.decide(2001 * MS), Decision::Write);
    }

    #[test]
    fn a_hold_goes_on_only_while_the_lease_is_proven() {
        let mut g = Guard::new(true, Duration::from_millis(200));
        g.granted(&grant(false), 100 * MS);
        assert!(
            g.holds(5000 * MS),
            "not proven yet: the first renew decides"
        );
        g.renewed(1000 * MS);
        // Certain until 1000 + 997 ms.
        assert!(g.holds(1996 * MS));
        assert!(!g.holds(1997 * MS));
        g.renewed(1500 * MS);
        assert!(g.holds(1997 * MS));
        g.lost();
        assert!(!g.holds(1501 * MS));
    }
}
