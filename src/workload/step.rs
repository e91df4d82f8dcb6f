//! One worker's steps: the lock workloads as recorded history ops.
//!
//! A [`Stepper`] owns one worker's lock client and storage client and runs
//! one step at a time ([`Stepper::step`]). Every request is recorded through
//! a [`Sink`] as an invocation (time taken before the request is written)
//! and a completion (after the reply is read): `ok`, `fail` (certainly no
//! effect) or `info` (maybe). After an `info` the worker moves to its next
//! process number (current + stride), Jepsen's rule: a process whose op
//! ended in `info` never invokes again.
//!
//! Besides the history, the stepper tells the controller where it is in its
//! critical section ([`StateEvent`]), so holder-targeted nemeses can strike
//! between the grant and the protected write: `granted` (acquire ok),
//! `holding` (the read is done, the worker works `hold_ms`), `writing` (the
//! protected write is about to be sent), `releasing`, `idle`.
//!
//! A fault timed by the protocol ([`moment`]) can ask to strike the next
//! acquire, renew or release: before sending it the stepper announces it
//! ([`Notify::moment`]), waits until the fault is armed (at most 100 ms),
//! invokes and sends it, and reports how it ended ([`Notify::outcome`]).
//!
//! Lease renewals (workload `renew = true`) happen during the hold, every
//! third of the lease, under the logical process `"<p>-lease"`. With the
//! lease guard on, a renewal that fails, times out or leaves the lease
//! unproven past its certain end cancels the critical section: the hold
//! ends at once and its protected write is abandoned.
//!
//! The lease during the hold (renewals, probes, the guard) is in `lease`,
//! the jobs workload's critical section in `jobs`, the guard itself in
//! [`guard`].

pub use super::notify::{NoNotify, Notify, Phase, StateEvent};
use super::{Kind, Workload};
use crate::client::{ClientError, Grant, LockClient};
use crate::history::clock::RunClock;
use crate::history::{Op, OpType, Process, Sink};
use crate::storage::record::{read_op, write_op};
use crate::storage::{CallError, Reply, Resource};
use serde_json::Value;
use std::time::Duration;

/// Process numbers of one worker: `current`, then `current + stride`, ...
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Procs {
    pub current: i64,
    pub stride: i64,
}

impl Procs {
    pub fn process(&self) -> Process {
        Process::Num(self.current)
    }

    /// Move on after an `info`.
    pub fn bump(&mut self) {
        self.current += self.stride;
    }

    /// A storage call's reply; after an indeterminate failure (recorded
    /// as `info`) the process moves on.
    pub fn storage_result(&mut self, r: Result<Reply, CallError>) -> Option<Reply> {
        match r {
            Ok(reply) => Some(reply),
            Err(e) => {
                if e.is_indeterminate() {
                    self.bump();
                }
                None
            }
        }
    }
}

/// What the step achieved (for counters and tests).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StepOutcome {
    pub acquired: bool,
    pub wrote: bool,
}

/// How the stepper records and reports.
pub struct Env<'a> {
    pub clock: RunClock,
    pub sink: &'a dyn Sink,
    pub notify: &'a dyn Notify,
}

/// One worker's lock workload.
pub struct Stepper {
    pub workload: Workload,
    pub lock: Box<dyn LockClient>,
    /// The protected resource (lockjaw's storage service or another
    /// backend), for the workloads that write one.
    pub storage: Option<Box<dyn Resource>>,
    pub procs: Procs,
    /// Acquire once and retry after `think_ms` (Redis systems, whose acquire
    /// starts the lease: a long wait would blur the lease start), rather than
    /// waiting `acquire_wait_ms` inside the client.
    pub try_once: bool,
    steps: u64,
    /// The lease guard of the current grant.
    pub guard: guard::Guard,
    /// Protected writes the lease guard abandoned.
    pub abandoned: u64,
}

impl Stepper {
    pub fn new(
        workload: Workload,
        lock: Box<dyn LockClient>,
        storage: Option<Box<dyn Resource>>,
        procs: Procs,
        try_once: bool,
    ) -> Stepper {
        let guard = guard::Guard::new(
            workload.lease_guard.is_on(),
            Duration::from_millis(workload.op_timeout_ms),
        );
        Stepper {
            guard,
            abandoned: 0,
            workload,
            lock,
            storage,
            procs,
            try_once,
            steps: 0,
        }
    }

    fn notify(&self, env: &Env, phase: Phase, grant: Option<&Grant>) {
        env.notify.state(self.event(env, phase, grant));
    }

    fn event(&self, env: &Env, phase: Phase, grant: Option<&Grant>) -> StateEvent {
        StateEvent {
            phase,
            process: self.procs.current,
            time: env.clock.now(),
            key: grant.map(|g| g.key.clone()),
            owner: grant.map(|g| g.owner.clone()),
            fence: grant.and_then(|g| g.fence),
            lease_ms: grant.map(|g| g.lease.as_millis() as u64),
        }
    }

    /// Before the request of moment `m`: announce it if a fault asked for
    /// it, and wait (at most [`moment::ARM_WAIT`]) until it is armed.
    /// Returns the announced moment's id, to report its outcome with
    /// [`Notify::outcome`].
    async fn at_moment(&self, env: &Env<'_>, m: Moment, grant: Option<&Grant>) -> Option<u64> {
        let phase = match m {
            Moment::Acquire => Phase::Idle,
            Moment::Renew => Phase::Holding,
            Moment::Release => Phase::Releasing,
        };
        let wait = env.notify.moment(m, self.event(env, phase, grant))?;
        let id = wait.id;
        let armed = wait.armed().await;
        env.notify.passed(id, armed);
        Some(id)
    }

    /// One step of the workload, then the think time.
    pub async fn step(&mut self, env: &Env<'_>) -> StepOutcome {
        self.steps += 1;
        let mut out = StepOutcome::default();
        if let Some(grant) = self.acquire(env).await {
            out.acquired = true;
            self.probe(env, &grant).await;
            self.notify(env, Phase::Granted, Some(&grant));
            out.wrote = self.critical(env, &grant).await;
            self.notify(env, Phase::Releasing, Some(&grant));
            self.release(env, &grant).await;
            self.notify(env, Phase::Idle, None);
        }
        sleep_ms(self.workload.think_ms).await;
        out
    }

    /// Record one acquire attempt.
    async fn acquire(&mut self, env: &Env<'_>) -> Option<Grant> {
        let moment = self.at_moment(env, Moment::Acquire, None).await;
        crate::client::pace::pace().await;
        let w = &self.workload;
        let mut inv = Op::new(
            env.clock.now(),
            self.procs.process(),
            OpType::Invoke,
            "acquire",
        );
        inv.key = Some(w.lock_key.clone());
        env.sink.record(inv.clone());
        let invoked = inv.time;
        let wait = if self.try_once {
            Duration::ZERO
        } else {
            Duration::from_millis(w.acquire_wait_ms)
        };
        let ttl = Duration::from_millis(w.ttl_ms);
        let r = self.lock.acquire(&w.lock_key, ttl, wait).await;
        let mut done = inv;
        done.time = env.clock.now();
        let grant = match r {
            Ok(Some(g)) => {
                done.kind = OpType::Ok;
                done.fence = g.fence;
                done.owner = Some(g.owner.clone());
                done.lease_ms = Some(g.lease.as_millis() as u64);
                self.guard.granted(&g, invoked);
                Some(g)
            }
            Ok(None) => {
                done.kind = OpType::Fail;
                done.error = Some("held".into());
                None
            }
            Err(e) => {
                self.complete_err(&mut done, &e);
                None
            }
        };
        if let Some(id) = moment {
            env.notify.outcome(id, &done);
        }
        env.sink.record(done);
        if grant.is_none() && self.try_once {
            // Do not hammer the service, and do not retry in lockstep with
            // the other workers: a random delay, as Redlock prescribes.
            let max = Duration::from_millis(self.workload.think_ms.max(5));
            tokio::time::sleep(crate::client::redlock::retry_delay(max)).await;
        }
        grant
    }

    fn complete_err(&mut self, done: &mut Op, e: &ClientError) {
        done.error = Some(e.to_string());
        if e.is_definite() {
            done.kind = OpType::Fail;
        } else {
            done.kind = OpType::Info;
            self.procs.bump();
        }
    }

    /// The critical section; true if the protected write was acknowledged.
    async fn critical(&mut self, env: &Env<'_>, grant: &Grant) -> bool {
        match self.workload.kind {
            Kind::Lock | Kind::Register | Kind::Leader => {
                self.notify(env, Phase::Holding, Some(grant));
                // A cancelled hold has no write to abandon.
                self.hold(env, grant).await;
                false
            }
            Kind::FencedCounter | Kind::LockSet => self.read_modify_write(env, grant).await,
            Kind::Jobs => self.take_job(env, grant).await,
        }
    }

    async fn read_modify_write(&mut self, env: &Env<'_>, grant: &Grant) -> bool {
        let key = self.workload.storage_key.clone();
        let Some(storage) = self.storage.as_mut() else {
            return false;
        };
        let sink = guard::Owned {
            sink: env.sink,
            owner: &grant.owner,
        };
        let r = read_op(
            storage.as_mut(),
            &sink,
            &env.clock,
            self.procs.process(),
            &key,
            grant.fence,
        )
        .await;
        let current = match self.procs.storage_result(r) {
            Some(Reply::Ok { value, .. }) => value,
            _ => return false,
        };
        self.notify(env, Phase::Holding, Some(grant));
        if !self.hold(env, grant).await {
            return self.abandon(env, grant);
        }
        let next = next_value(self.workload.kind, &current, &self.procs, self.steps);
        self.probe(env, grant).await;
        if !self.guard_allows(env, grant).await {
            return self.abandon(env, grant);
        }
        self.notify(env, Phase::Writing, Some(grant));
        let storage = self.storage.as_mut().expect("checked above");
        let r = write_op(
            storage.as_mut(),
            &sink,
            &env.clock,
            self.procs.process(),
            &key,
            next,
            grant.fence,
        )
        .await;
        matches!(self.procs.storage_result(r), Some(Reply::Ok { .. }))
    }

    /// Give up the critical section's protected write (the lease guard):
    /// counted and reported, never sent. Returns false (nothing written).
    fn abandon(&mut self, env: &Env<'_>, grant: &Grant) -> bool {
        self.abandoned += 1;
        env.notify
            .abandoned(self.event(env, Phase::Writing, Some(grant)));
        false
    }

    async fn release(&mut self, env: &Env<'_>, grant: &Grant) {
        let moment = self.at_moment(env, Moment::Release, Some(grant)).await;
        crate::client::pace::pace().await;
        let mut inv = Op::new(
            env.clock.now(),
            self.procs.process(),
            OpType::Invoke,
            "release",
        );
        inv.key = Some(grant.key.clone());
        inv.owner = Some(grant.owner.clone());
        inv.fence = grant.fence;
        env.sink.record(inv.clone());
        let r = self.lock.release(grant).await;
        let mut done = inv;
        done.time = env.clock.now();
        match r {
            Ok(true) => done.kind = OpType::Ok,
            Ok(false) => {
                done.kind = OpType::Fail;
                done.error = Some("not-held".into());
            }
            Err(e) => self.complete_err(&mut done, &e),
        }
        if let Some(id) = moment {
            env.notify.outcome(id, &done);
        }
        env.sink.record(done);
    }
}

/// The value a read-modify-write step writes after reading `current`: the
/// counter + 1, or the set with this step's own element added.
pub fn next_value(kind: Kind, current: &Value, procs: &Procs, steps: u64) -> Value {
    match kind {
        Kind::LockSet => {
            let element = procs.current * 1_000_000 + steps as i64;
            let mut set = current.as_array().cloned().unwrap_or_default();
            set.push(Value::from(element));
            Value::Array(set)
        }
        _ => Value::from(current.as_i64().unwrap_or(0) + 1),
    }
}

pub(super) async fn sleep_ms(ms: u64) {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}

pub mod guard;
mod jobs;
mod lease;
pub use super::moment::{self, Moment, MomentWait};
#[cfg(test)]
mod library_renews_tests;
#[cfg(test)]
pub(crate) mod tests;
