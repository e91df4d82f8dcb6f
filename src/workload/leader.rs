//! The `leader` workload: every worker campaigns in one election; the
//! leader writes a stream of fenced read-modify-writes of a counter to the
//! storage (fence = its term's fence) while its election client renews the
//! lease in the background; followers observe and record whom they
//! believe leads.
//!
//! One [`LeaderStepper::step`] is one short unit, so a worker told to stop
//! finishes within a step:
//!
//! - not leading: `campaign` (waiting up to `acquire_wait_ms`; Redis tries
//!   once, as for locks); if not elected, one `observe`, then `think_ms`;
//! - leading: if the term ended (the client's [`LossWatch`] says so),
//!   record `lost-leadership` and become a follower; else read the counter
//!   with the term's fence (`holding`), work `hold_ms`, write counter+1
//!   with the fence (`writing`), then `think_ms`. Leadership is checked
//!   between writes, never between the read and the write: a leader
//!   paused there wakes and writes at once, as a real one would.
//!
//! [`LeaderStepper::finish`] resigns a term still held. The phases reported
//! to the controller are the lock workloads' ([`Phase`]), so the
//! holder-targeted nemeses strike the current leader.

use super::step::{Env, Phase, Procs, StateEvent, StepOutcome};
use super::Workload;
use crate::client::election::record::{self, Rec};
use crate::client::election::{ElectionClient, LossWatch, Term};
use crate::storage::record::{read_op, write_op};
use crate::storage::{Reply, Resource};
use serde_json::Value;
use std::time::Duration;

/// One worker of the leader workload.
pub struct LeaderStepper {
    pub workload: Workload,
    pub election: Box<dyn ElectionClient>,
    pub storage: Box<dyn Resource>,
    pub procs: Procs,
    /// Campaign once and retry after `think_ms` (Redis, whose campaign
    /// starts the lease), rather than waiting inside the client.
    pub try_once: bool,
    term: Option<(Term, Option<LossWatch>)>,
}

impl LeaderStepper {
    pub fn new(
        workload: Workload,
        election: Box<dyn ElectionClient>,
        storage: Box<dyn Resource>,
        procs: Procs,
        try_once: bool,
    ) -> LeaderStepper {
        LeaderStepper {
            workload,
            election,
            storage,
            procs,
            try_once,
            term: None,
        }
    }

    /// The term this worker leads in, if any.
    pub fn term(&self) -> Option<&Term> {
        self.term.as_ref().map(|(t, _)| t)
    }

    fn rec<'a>(&self, env: &'a Env<'_>) -> Rec<'a> {
        Rec {
            sink: env.sink,
            clock: &env.clock,
            process: self.procs.process(),
        }
    }

    fn notify(&self, env: &Env, phase: Phase, term: Option<&Term>) {
        env.notify.state(StateEvent {
            phase,
            process: self.procs.current,
            time: env.clock.now(),
            key: term.map(|g| g.key.clone()),
            owner: term.map(|g| g.owner.clone()),
            fence: term.and_then(|g| g.fence),
            lease_ms: term.map(|g| g.lease.as_millis() as u64),
        });
    }

    /// One unit of work (see the module doc), then the think time.
    pub async fn step(&mut self, env: &Env<'_>) -> StepOutcome {
        let mut out = StepOutcome::default();
        match self.term.clone() {
            None => out.acquired = self.campaign(env).await,
            Some((term, watch)) => {
                if let Some(loss) = watch.as_ref().and_then(LossWatch::lost) {
                    record::record_lost(&self.rec(env), &term, &loss);
                    self.term = None;
                    self.notify(env, Phase::Idle, None);
                    return out;
                }
                out.wrote = self.write(env, &term).await;
            }
        }
        sleep_ms(self.workload.think_ms).await;
        out
    }

    /// Campaign; if not elected, observe. True if elected.
    async fn campaign(&mut self, env: &Env<'_>) -> bool {
        let w = &self.workload;
        let wait = if self.try_once {
            Duration::ZERO
        } else {
            Duration::from_millis(w.acquire_wait_ms)
        };
        let ttl = Duration::from_millis(w.ttl_ms);
        let key = w.lock_key.clone();
        let rec = self.rec(env);
        crate::client::pace::pace().await;
        let r = record::campaign_op(self.election.as_mut(), &rec, &key, ttl, wait).await;
        match r {
            Ok(Some(term)) => {
                let watch = self.election.loss_watch(&term);
                self.notify(env, Phase::Granted, Some(&term));
                self.term = Some((term, watch));
                true
            }
            Ok(None) => {
                crate::client::pace::pace().await;
                let _ = record::observe_op(self.election.as_mut(), &rec, &key).await;
                false
            }
            Err(e) => {
                if !e.is_definite() {
                    self.procs.bump();
                }
                false
            }
        }
    }

    /// One fenced read-modify-write of the counter; true if acknowledged.
    async fn write(&mut self, env: &Env<'_>, term: &Term) -> bool {
        let key = self.workload.storage_key.clone();
        let p = self.procs.process();
        let r = read_op(
            self.storage.as_mut(),
            env.sink,
            &env.clock,
            p,
            &key,
            term.fence,
        )
        .await;
        let current = match self.procs.storage_result(r) {
            Some(Reply::Ok { value, .. }) => value,
            _ => return false,
        };
        self.notify(env, Phase::Holding, Some(term));
        sleep_ms(self.workload.hold_ms).await;
        self.notify(env, Phase::Writing, Some(term));
        let next = Value::from(current.as_i64().unwrap_or(0) + 1);
        let p = self.procs.process();
        let r = write_op(
            self.storage.as_mut(),
            env.sink,
            &env.clock,
            p,
            &key,
            next,
            term.fence,
        )
        .await;
        matches!(self.procs.storage_result(r), Some(Reply::Ok { .. }))
    }

    /// Resign a term still held (the worker is stopping).
    pub async fn finish(&mut self, env: &Env<'_>) {
        let Some((term, watch)) = self.term.take() else {
            return;
        };
        if let Some(loss) = watch.as_ref().and_then(LossWatch::lost) {
            record::record_lost(&self.rec(env), &term, &loss);
            return;
        }
        self.notify(env, Phase::Releasing, Some(&term));
        let rec = Rec {
            sink: env.sink,
            clock: &env.clock,
            process: self.procs.process(),
        };
        crate::client::pace::pace().await;
        if let Err(e) = record::resign_op(self.election.as_mut(), &rec, &term).await {
            if !e.is_definite() {
                self.procs.bump();
            }
        }
        self.notify(env, Phase::Idle, None);
    }
}

async fn sleep_ms(ms: u64) {
    if ms > 0 {
        tokio::time::sleep(Duration::from_millis(ms)).await;
    }
}
