//! The lease during a hold: renewals every third of the lease (workload
//! `renew = true`), probes of a lease a client can prove, the lease guard's
//! say before a protected write, and how each is recorded under the
//! worker's `"<p>-lease"` process.

use super::{guard, Env, Moment, Stepper};
#[cfg(doc)]
use crate::client::LockClient;
use crate::client::{ClientError, Grant};
use crate::history::{Op, OpType, Process};
use std::time::Duration;

impl Stepper {
    /// Work `hold_ms`, renewing every third of the lease if asked to
    /// (never when the library renews by itself,
    /// [`LockClient::renews_by_itself`]: its `renewed` events are the
    /// lease's extensions). False if the lease guard cancelled the critical section: a renew
    /// failed or timed out, or the lease went unproven past its certain
    /// end ([`guard::Guard::holds`]).
    pub(super) async fn hold(&mut self, env: &Env<'_>, grant: &Grant) -> bool {
        let total = Duration::from_millis(self.workload.hold_ms);
        if !self.workload.renew || self.lock.renews_by_itself() {
            tokio::time::sleep(total).await;
            return true;
        }
        let every = (grant.lease / 3).max(Duration::from_millis(10));
        let start = tokio::time::Instant::now();
        loop {
            let left = total.saturating_sub(start.elapsed());
            if left.is_zero() {
                return true;
            }
            tokio::time::sleep(left.min(every)).await;
            if self.guard.on && !self.guard.holds(env.clock.now()) {
                return false;
            }
            if start.elapsed() >= total {
                return true;
            }
            let renewed = self.renew(env, grant).await;
            if self.guard.on && !(renewed && self.guard.holds(env.clock.now())) {
                return false;
            }
        }
    }

    /// Renew the grant's lease once; true if the service confirmed it.
    async fn renew(&mut self, env: &Env<'_>, grant: &Grant) -> bool {
        let moment = self.at_moment(env, Moment::Renew, Some(grant)).await;
        crate::client::pace::pace().await;
        let inv = lease_invoke(env, grant, self.lease_process());
        let r = self.lock.renew(grant).await;
        let r = r.map(|held| held.then_some(grant.lease));
        let invoked = inv.time;
        let done = lease_done(env, inv, r);
        if let Some(id) = moment {
            env.notify.outcome(id, &done);
        }
        let ok = done.kind == OpType::Ok;
        self.record_lease(env, invoked, done);
        ok
    }

    /// The lease guard before a protected write: true to send it. Off, it
    /// always is; on, see [`guard`].
    pub(super) async fn guard_allows(&mut self, env: &Env<'_>, grant: &Grant) -> bool {
        if !self.guard.on {
            return true;
        }
        match self.guard.decide(env.clock.now()) {
            guard::Decision::Write => return true,
            guard::Decision::Abandon => return false,
            guard::Decision::Renew => {}
        }
        if self.lock.renews_by_itself() {
            // Its library renews; a probe proves the lease without a
            // renewal of lockjaw's own.
            self.probe(env, grant).await;
        } else {
            self.renew(env, grant).await;
        }
        self.guard.decide(env.clock.now()) == guard::Decision::Write
    }

    /// The logical process of the current process's lease refreshes.
    fn lease_process(&self) -> Process {
        Process::Named(format!("{}-lease", self.procs.current))
    }

    /// Record a renew's completion; after an `info` the `"<p>-lease"`
    /// process may not invoke again, so the worker moves to its next
    /// process number (and lease process).
    fn record_lease(&mut self, env: &Env<'_>, invoked: u64, done: Op) {
        match done.kind {
            OpType::Ok => self.guard.renewed(invoked),
            OpType::Fail if done.error.as_deref() == Some(LEASE_GONE) => self.guard.lost(),
            _ => {}
        }
        let info = done.kind == OpType::Info;
        env.sink.record(done);
        if info {
            self.procs.bump();
        }
    }

    /// A client that proves leases on request (an adapter) proves the
    /// grant's: recorded as a `renew` of its owner under `"<p>-lease"`.
    pub(super) async fn probe(&mut self, env: &Env<'_>, grant: &Grant) {
        if !self.lock.can_probe() {
            return;
        }
        crate::client::pace::pace().await;
        let inv = lease_invoke(env, grant, self.lease_process());
        let r = self.lock.probe(grant).await;
        let invoked = inv.time;
        self.record_lease(env, invoked, lease_done(env, inv, r));
    }
}

/// Record the invocation of a renew (or probe) of `grant`'s lease.
fn lease_invoke(env: &Env<'_>, grant: &Grant, process: Process) -> Op {
    let mut inv = Op::new(env.clock.now(), process, OpType::Invoke, "renew");
    inv.key = Some(grant.key.clone());
    inv.owner = Some(grant.owner.clone());
    env.sink.record(inv.clone());
    inv
}

/// The `error` of a renew that found the lease gone.
const LEASE_GONE: &str = "lease gone";

/// The completion of a renew: `Some(lease)` held, `None` the lease is gone.
fn lease_done(env: &Env<'_>, inv: Op, r: Result<Option<Duration>, ClientError>) -> Op {
    let mut done = inv;
    done.time = env.clock.now();
    match r {
        Ok(Some(lease)) => {
            done.kind = OpType::Ok;
            done.lease_ms = Some(lease.as_millis() as u64);
        }
        Ok(None) => {
            done.kind = OpType::Fail;
            done.error = Some(LEASE_GONE.into());
        }
        Err(e) => {
            done.error = Some(e.to_string());
            done.kind = if e.is_definite() {
                OpType::Fail
            } else {
                OpType::Info
            };
        }
    }
    done
}
