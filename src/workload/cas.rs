//! The worker of `--system cas`: no lock. Each step reads the protected
//! value and its version (unfenced), works `hold_ms`, then writes the next
//! value conditionally on that version (the storage's compare-and-set). A
//! conflict means another worker's write landed in between: nothing was
//! written, and the next step retries at once (no think time); an applied
//! write or any other outcome waits `think_ms` as the lock workloads do.
//!
//! Both requests are recorded like the lock workloads' storage ops (the
//! conditional write with the `version` it expects; a conflict is `fail`
//! with `error: "version-conflict"`), so the lost-update check judges the
//! writes that were applied. The worker reports the same phases as a lock
//! holder (`granted` and `holding` after the read, `writing` before the
//! write, `idle` after it), without a grant, so holder faults strike
//! between the read and the conditional write.

use super::step::{next_value, sleep_ms, Env, Phase, Procs, StateEvent, StepOutcome};
use super::Workload;
use crate::storage::protocol::Request;
use crate::storage::record::{call_op, read_op};
use crate::storage::{Reply, Resource};

/// One worker of `--system cas`.
pub struct CasStepper {
    pub workload: Workload,
    pub storage: Box<dyn Resource>,
    pub procs: Procs,
    steps: u64,
}

impl CasStepper {
    pub fn new(workload: Workload, storage: Box<dyn Resource>, procs: Procs) -> CasStepper {
        CasStepper {
            workload,
            storage,
            procs,
            steps: 0,
        }
    }

    fn notify(&self, env: &Env<'_>, phase: Phase) {
        env.notify.state(StateEvent {
            phase,
            process: self.procs.current,
            time: env.clock.now(),
            key: None,
            owner: None,
            fence: None,
            lease_ms: None,
        });
    }

    /// One read and conditional write; `wrote` when the write was applied.
    pub async fn step(&mut self, env: &Env<'_>) -> StepOutcome {
        self.steps += 1;
        let mut out = StepOutcome::default();
        let key = self.workload.storage_key.clone();
        let p = self.procs.process();
        crate::client::pace::pace().await;
        let r = read_op(self.storage.as_mut(), env.sink, &env.clock, p, &key, None).await;
        let (current, version) = match self.procs.storage_result(r) {
            Some(Reply::Ok { value, version, .. }) => (value, version),
            _ => {
                sleep_ms(self.workload.think_ms).await;
                return out;
            }
        };
        self.notify(env, Phase::Granted);
        self.notify(env, Phase::Holding);
        sleep_ms(self.workload.hold_ms).await;
        let next = next_value(self.workload.kind, &current, &self.procs, self.steps);
        self.notify(env, Phase::Writing);
        let req = Request::write_if(key, next, None, version);
        let p = self.procs.process();
        crate::client::pace::pace().await;
        let r = call_op(self.storage.as_mut(), env.sink, &env.clock, p, req).await;
        self.notify(env, Phase::Idle);
        match self.procs.storage_result(r) {
            Some(Reply::Ok { .. }) => out.wrote = true,
            // Retry at once: the conflict is the whole cost of going lock-free.
            Some(Reply::Conflict { .. }) => return out,
            _ => {}
        }
        sleep_ms(self.workload.think_ms).await;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Op, OpType};
    use crate::storage::record::VERSION_CONFLICT;
    use crate::storage::{spawn, Fencing, StorageClient, StorageConfig};
    use crate::workload::step::tests::{Phases, VecSink};
    use crate::workload::Kind;
    use serde_json::json;

    /// Another client's write lands while the stepper holds between its
    /// read and its conditional write: the write conflicts (recorded
    /// `fail`, `version-conflict`, with the version then), nothing is
    /// written, and the next step, run at once, lands; the phases are a
    /// holder's.
    #[tokio::test]
    async fn a_write_between_read_and_write_makes_a_recorded_conflict() {
        let sc = StorageConfig::new(Fencing::Off).with_initial("counter", json!(0));
        let h = spawn("127.0.0.1:0".parse().unwrap(), sc).unwrap();
        let mut w = crate::workload::load("fenced-counter", &Default::default()).unwrap();
        assert_eq!(w.kind, Kind::FencedCounter);
        (w.hold_ms, w.think_ms) = (300, 0);
        let ops = VecSink::default();
        let phases = Phases::default();
        let env = Env {
            clock: crate::history::clock::RunClock::start(),
            sink: &ops,
            notify: &phases,
        };
        let a = StorageClient::connect(h.addr()).await.unwrap();
        let procs = Procs {
            current: 0,
            stride: 2,
        };
        let mut stepper = CasStepper::new(w, Box::new(a), procs);
        let addr = h.addr();
        let other = tokio::spawn(async move {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            let mut b = StorageClient::connect(addr).await.unwrap();
            b.write("counter", json!(10), None).await.unwrap()
        });
        assert!(!stepper.step(&env).await.wrote, "the write conflicted");
        assert!(matches!(other.await.unwrap(), Reply::Ok { version: 1, .. }));
        assert!(stepper.step(&env).await.wrote, "the retry lands");
        let recorded = ops.0.lock().unwrap();
        let done: Vec<&Op> = recorded
            .iter()
            .filter(|o| o.f == "write" && o.kind != OpType::Invoke)
            .collect();
        assert_eq!(done.len(), 2);
        assert_eq!(done[0].kind, OpType::Fail);
        assert_eq!(done[0].error.as_deref(), Some(VERSION_CONFLICT));
        assert_eq!(done[0].version, Some(1), "the key's version then");
        assert_eq!((done[1].kind, done[1].version), (OpType::Ok, Some(1)));
        assert_eq!(done[1].value, json!(11));
        assert_eq!(h.snapshot().values["counter"], json!(11));
        use Phase::*;
        let seen = phases.0.lock().unwrap().clone();
        assert_eq!(&seen[..4], &[Granted, Holding, Writing, Idle]);
    }
}
