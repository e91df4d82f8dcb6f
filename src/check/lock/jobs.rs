//! The jobs workload's counts (issue 16): how often a job ran twice, and
//! how often its effect landed twice.
//!
//! An `apply` op carries its job id (`value.job`); its `ok` completion says
//! whether the storage `applied` it or, with an idempotency key, ignored a
//! job it had already applied. A *duplicate execution* is an `ok` apply of
//! a job id an earlier `ok` apply already carried (a worker did that job
//! again, whatever the storage then made of it). A *duplicate effect* is an
//! extra occurrence of a job id in the final read of the jobs key (the
//! job's effect counted twice). The final read is the `ok` read invoked
//! last, provided it began after every apply had completed; without one
//! the effects are unknown. Duplicate effects are damage to the protected
//! resource (the `duplicate_effects` check, resource side); duplicate
//! executions are information beside them. Memory: one entry per job id.

use super::event::{Done, Fun, Invoke, Outcome};
use super::report::CheckResult;
use super::witness::{Witness, WitnessData};
use crate::check::Validity;
use foldhash::{HashMap, HashSet};
use serde_json::Value;

/// What one job id saw.
#[derive(Default)]
struct Job {
    /// The `index` of each `ok` apply that carried it.
    applies: Vec<u64>,
}

/// The counts, fed storage events in time order.
#[derive(Default)]
pub struct Jobs {
    jobs: HashMap<u64, Job>,
    running: HashSet<u64>,
    last_apply_end: u64,
    ok: u64,
    ignored: u64,
    indeterminate: u64,
    refused: u64,
    /// The `ok` read invoked last: (invocation, op index, value).
    last_read: Option<(u64, u64, Value)>,
}

/// An apply's job id, from its `value`.
fn job_of(v: &Value) -> Option<u64> {
    v.get("job").and_then(Value::as_u64)
}

impl Jobs {
    pub fn on_invoke(&mut self, i: &Invoke) {
        if i.fun == Fun::Write {
            self.running.insert(i.call);
        }
    }

    /// Count one completed storage op; an apply without a job id is an
    /// error naming the field.
    pub fn on_done(&mut self, d: &Done) -> Result<(), String> {
        match d.fun {
            Fun::Write => {
                self.running.remove(&d.call);
                self.last_apply_end = self.last_apply_end.max(d.time);
                let Some(job) = job_of(&d.value) else {
                    return Err(format!(
                        "field `value` of an apply must be {{\"job\": <id>, ...}}, got {}",
                        d.value
                    ));
                };
                match d.outcome {
                    Outcome::Ok => {
                        self.ok += 1;
                        if d.value.get("applied") == Some(&Value::Bool(false)) {
                            self.ignored += 1;
                        }
                        self.jobs.entry(job).or_default().applies.push(d.index);
                    }
                    Outcome::Info => self.indeterminate += 1,
                    Outcome::Fail => self.refused += 1,
                }
            }
            Fun::Read
                if d.outcome == Outcome::Ok
                    && self
                        .last_read
                        .as_ref()
                        .map_or(true, |(inv, _, _)| d.inv_time >= *inv) =>
            {
                self.last_read = Some((d.inv_time, d.index, d.value.clone()));
            }
            _ => {}
        }
        Ok(())
    }

    /// The `duplicate_effects` check, with the execution counts beside it.
    pub fn finish(self, limit: usize) -> CheckResult {
        let mut r = CheckResult {
            limit,
            applicable: self.ok + self.indeterminate + self.refused > 0,
            ..CheckResult::default()
        };
        let mut twice: Vec<(u64, &Vec<u64>)> = self
            .jobs
            .iter()
            .filter(|(_, j)| j.applies.len() > 1)
            .map(|(id, j)| (*id, &j.applies))
            .collect();
        twice.sort();
        let executions: usize = twice.iter().map(|(_, a)| a.len() - 1).sum();
        r.bump("applies", self.ok as i64);
        r.bump("jobs_executed", self.jobs.len() as i64);
        r.bump("duplicate_executions", executions as i64);
        r.bump("ignored_by_idempotency_key", self.ignored as i64);
        r.bump("indeterminate", self.indeterminate as i64);
        r.bump("refused", self.refused as i64);
        let mut notes = Vec::new();
        if !twice.is_empty() {
            let listed: Vec<String> = twice
                .iter()
                .take(5)
                .map(|(id, a)| format!("job {id} by ops {a:?}"))
                .collect();
            notes.push(format!(
                "{} job(s) executed more than once (information): {}",
                twice.len(),
                listed.join("; ")
            ));
        }
        match self.final_read() {
            Err(why) => {
                r.valid = Validity::Unknown;
                notes.push(format!("duplicate effects unknown: {why}"));
            }
            Ok((op, ids)) => self.effects(&mut r, op, &ids),
        }
        if !notes.is_empty() {
            r.note = Some(notes.join("; "));
        }
        r
    }

    /// The final read's op index and job ids.
    fn final_read(&self) -> Result<(u64, Vec<u64>), String> {
        let Some((inv, op, value)) = &self.last_read else {
            return Err("no ok read of the jobs key".into());
        };
        if !self.running.is_empty() || *inv <= self.last_apply_end {
            return Err(format!(
                "the last read (op {op}) did not begin after every apply had completed"
            ));
        }
        let Some(items) = value.as_array() else {
            return Err(format!(
                "the final read (op {op}) is no list of job ids: {value}"
            ));
        };
        Ok((*op, items.iter().filter_map(Value::as_u64).collect()))
    }

    fn effects(&self, r: &mut CheckResult, op: u64, ids: &[u64]) {
        let mut seen: HashMap<u64, u64> = HashMap::default();
        for id in ids {
            *seen.entry(*id).or_insert(0) += 1;
        }
        let mut dup: Vec<(u64, u64)> = seen.into_iter().filter(|(_, n)| *n > 1).collect();
        dup.sort();
        r.bump("effects", ids.len() as i64);
        for (job, times) in dup {
            let applies = self
                .jobs
                .get(&job)
                .map(|j| j.applies.clone())
                .unwrap_or_default();
            let text = format!(
                "job {job} is in the final read (op {op}) {times} times: its effect counted \
                 {} extra time(s); ok applies of it: ops {applies:?}",
                times - 1
            );
            let data = WitnessData::DuplicateEffect {
                job,
                times,
                final_read_op: op,
                applies,
            };
            r.add_many(times - 1, Witness { text, data });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::check::lock::event::Name;
    use serde_json::json;

    fn done(call: u64, time: u64, fun: Fun, outcome: Outcome, value: Value) -> Done {
        let n: Name = "1".into();
        Done {
            call,
            inv_time: time - 1,
            time,
            index: call * 10,
            outcome,
            fun,
            key: 0,
            owner: n.clone(),
            process: n,
            fence: None,
            lease_ms: None,
            seq: None,
            value,
            held: false,
        }
    }

    fn apply(call: u64, time: u64, job: u64, applied: bool) -> Done {
        let v = json!({"job": job, "idempotent": !applied, "applied": applied});
        done(call, time, Fun::Write, Outcome::Ok, v)
    }

    fn run(ds: Vec<Done>) -> CheckResult {
        let mut j = Jobs::default();
        for d in ds {
            j.on_done(&d).unwrap();
        }
        j.finish(10)
    }

    #[test]
    fn counts_duplicate_executions_and_effects() {
        // Without keys: job 2 applied twice, in the final state twice.
        let r = run(vec![
            apply(1, 10, 1, true),
            apply(2, 20, 2, true),
            apply(3, 30, 2, true),
            done(4, 50, Fun::Read, Outcome::Ok, json!([1, 2, 2])),
        ]);
        assert_eq!((r.valid, r.count), (Validity::False, 1));
        assert_eq!(r.counts["duplicate_executions"], 1);
        assert_eq!(r.counts["jobs_executed"], 2);
        assert!(
            r.witnesses[0].text.contains("job 2"),
            "{}",
            r.witnesses[0].text
        );
        // With keys: executed twice, the second ignored, one effect.
        let r = run(vec![
            apply(1, 10, 2, true),
            apply(2, 20, 2, false),
            done(3, 50, Fun::Read, Outcome::Ok, json!([2])),
        ]);
        assert_eq!((r.valid, r.count), (Validity::True, 0));
        assert_eq!(r.counts["duplicate_executions"], 1);
        assert_eq!(r.counts["ignored_by_idempotency_key"], 1);
        assert!(r.note.unwrap().contains("job 2 by ops [10, 20]"));
    }

    #[test]
    fn refused_applies_are_no_executions_and_a_late_read_is_needed() {
        let refused = done(2, 20, Fun::Write, Outcome::Fail, json!({"job": 1}));
        let r = run(vec![
            apply(1, 10, 1, true),
            refused,
            done(3, 50, Fun::Read, Outcome::Ok, json!([1])),
        ]);
        assert_eq!(r.counts.get("duplicate_executions"), Some(&0));
        assert_eq!((r.valid, r.counts["refused"]), (Validity::True, 1));
        // A read that began before the last apply ended proves nothing.
        let r = run(vec![
            done(2, 15, Fun::Read, Outcome::Ok, json!([1])),
            apply(1, 20, 1, true),
        ]);
        assert_eq!(r.valid, Validity::Unknown);
    }
}
