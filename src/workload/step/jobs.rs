//! The jobs workload's critical section: read the job ids applied so far
//! (fenced), take the smallest id of 1..=`jobs` not among them, work
//! `hold_ms`, and apply it (fenced; with an idempotency key when the
//! workload says so). The apply's op carries the job id, so the checker
//! counts executions per id from the history alone.

use super::{Env, Phase, Stepper};
use crate::client::Grant;
use crate::storage::record::{apply_op, read_op};
use crate::storage::Reply;
use serde_json::Value;

impl Stepper {
    /// True if the apply was acknowledged.
    pub(super) async fn take_job(&mut self, env: &Env<'_>, grant: &Grant) -> bool {
        let key = self.workload.storage_key.clone();
        let Some(storage) = self.storage.as_mut() else {
            return false;
        };
        let process = self.procs.process();
        let r = read_op(
            storage.as_mut(),
            env.sink,
            &env.clock,
            process,
            &key,
            grant.fence,
        )
        .await;
        let applied = match self.procs.storage_result(r) {
            Some(Reply::Ok { value, .. }) => value,
            _ => return false,
        };
        self.notify(env, Phase::Holding, Some(grant));
        if !self.hold(env, grant).await {
            return self.abandon(env, grant);
        }
        let Some(job) = next_job(&applied, self.workload.jobs) else {
            return false; // every job is done
        };
        self.probe(env, grant).await;
        self.notify(env, Phase::Writing, Some(grant));
        let storage = self.storage.as_mut().expect("checked above");
        let once = self.workload.idempotency_keys;
        let process = self.procs.process();
        let r = apply_op(
            storage.as_mut(),
            env.sink,
            &env.clock,
            process,
            &key,
            job,
            once,
            grant.fence,
        )
        .await;
        matches!(self.procs.storage_result(r), Some(Reply::Ok { .. }))
    }
}

/// The smallest job id of 1..=`jobs` that `applied` (a list of ids; any
/// other value counts as empty) does not hold.
pub(crate) fn next_job(applied: &Value, jobs: u64) -> Option<u64> {
    let mut done = vec![false; jobs as usize + 1];
    for id in applied.as_array().into_iter().flatten() {
        if let Some(i) = id.as_u64().filter(|i| *i <= jobs) {
            done[i as usize] = true;
        }
    }
    (1..=jobs).find(|i| !done[*i as usize])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_next_job_is_the_smallest_id_not_applied() {
        assert_eq!(next_job(&json!([]), 3), Some(1));
        assert_eq!(next_job(&Value::Null, 3), Some(1));
        assert_eq!(next_job(&json!([1, 2, 2, 4]), 5), Some(3));
        assert_eq!(next_job(&json!([1, 2, 3]), 3), None);
    }
}
