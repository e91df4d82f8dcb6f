//! Witnesses: the structured evidence of one anomaly (op indexes, owners,
//! times, so a report can draw it) and the sentence a person reads.

use serde::{Deserialize, Serialize};

/// A lock grant as a witness names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GrantRef {
    pub owner: String,
    pub process: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    /// The `index` of the acquire's completion.
    pub acquire_op: u64,
    pub invoked_ns: u64,
    pub completed_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease_ms: Option<u64>,
}

/// A storage request as a witness names it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RequestRef {
    /// `read` or `write`.
    pub f: String,
    pub process: String,
    /// The owner of the grant that issued its fence, when known; else the
    /// op's own owner (by default its process).
    pub owner: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fence: Option<u64>,
    /// The `index` of the completion.
    pub op: u64,
    pub invoked_ns: u64,
    pub completed_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seq: Option<u64>,
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub value: serde_json::Value,
}

impl RequestRef {
    /// A completed storage op, named by `owner`.
    pub(crate) fn of(d: &super::event::Done, owner: &str) -> RequestRef {
        RequestRef {
            f: if d.fun == super::event::Fun::Write {
                "write"
            } else {
                "read"
            }
            .into(),
            process: d.process.to_string(),
            owner: owner.to_string(),
            fence: d.fence,
            op: d.index,
            invoked_ns: d.inv_time,
            completed_ns: d.time,
            seq: d.seq,
            value: d.value.clone(),
        }
    }
}

/// One anomaly: a sentence and its structured data.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Witness {
    /// The sentence, naming op indexes, owners and times.
    pub text: String,
    #[serde(flatten)]
    pub data: WitnessData,
}

/// The structured part of a witness, tagged by `kind`. (A report holds a
/// few of them, so the variants' sizes do not matter.)
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum WitnessData {
    /// Check 2: `second` was granted while `first`'s lease was valid and
    /// before `first` began releasing.
    SafetyViolation {
        key: String,
        first: GrantRef,
        second: GrantRef,
        /// `first`'s lease certainly lasted until here (ns).
        lease_valid_until_ns: u64,
        /// The op that proves it (the acquire or a renew).
        lease_evidence_op: u64,
    },
    /// Check 7: a lock without lease granted twice without a release.
    MutexViolation {
        key: String,
        first: GrantRef,
        second: GrantRef,
    },
    /// Check 7, exact search: the lock ops of `key` (no leases) admit no
    /// owned-mutex linearization; `violation` is the search's evidence
    /// (longest prefix, state, the ops that could not follow).
    MutexNotLinearizable {
        key: String,
        violation: serde_json::Value,
    },
    /// Check 3: `second` began after `first` was granted but its fence is
    /// not greater.
    FenceOrder {
        key: String,
        first: GrantRef,
        second: GrantRef,
    },
    /// Check 4: the storage accepted `request` after it had seen `seen`,
    /// whose fence is higher.
    StaleWriteAccepted {
        key: String,
        request: RequestRef,
        seen: RequestRef,
        /// `seq` (storage order) or `real-time` (seen completed before
        /// request was invoked).
        order: String,
        /// The grants that issued the two fences, when still known.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stale_grant: Option<GrantRef>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        newer_grant: Option<GrantRef>,
        /// The stale grant's lease had certainly ended here (ns).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stale_lease_over_by_ns: Option<u64>,
    },
    /// Check 5 on a counter.
    LostUpdates {
        key: String,
        initial: i64,
        final_value: i64,
        final_read_op: u64,
        acknowledged: u64,
        indeterminate: u64,
        lost: i64,
        phantom: i64,
    },
    /// Check 5 on a counter, proven locally: two acknowledged writes of
    /// `key`, `second` with the same value as `first` (`same-value`) or
    /// begun after `first` was acknowledged and lower (`overwritten`).
    LostUpdatePair {
        key: String,
        rule: String,
        first: RequestRef,
        second: RequestRef,
        /// Increments lost, at least.
        lost: i64,
    },
    /// The jobs workload: job `job` is `times` times in the final read.
    DuplicateEffect {
        job: u64,
        times: u64,
        final_read_op: u64,
        /// The `index` of each `ok` apply that carried the job.
        applies: Vec<u64>,
    },
    /// Check 5 on a set: acknowledged elements missing from the final read,
    /// or elements no write attempted.
    SetLost {
        key: String,
        final_read_op: u64,
        lost: Vec<serde_json::Value>,
        unexpected: Vec<serde_json::Value>,
    },
}

/// Nanoseconds as seconds with millisecond precision, e.g. `3.201 s`.
pub fn secs(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// Nanoseconds as milliseconds, e.g. `1200.5`.
pub fn ms(ns: u64) -> f64 {
    (ns as f64 / 1e4).round() / 100.0
}

impl GrantRef {
    /// "owner L3 (op 12) acquired fence 33 at 1.200 s"
    pub fn acquired(&self) -> String {
        match self.fence {
            Some(f) => format!(
                "owner {} (op {}) acquired fence {} at {}",
                self.owner,
                self.acquire_op,
                f,
                secs(self.completed_ns)
            ),
            None => format!(
                "owner {} (op {}) acquired the lock at {}",
                self.owner,
                self.acquire_op,
                secs(self.completed_ns)
            ),
        }
    }
}

impl RequestRef {
    /// "L3 wrote counter=7 with fence 33 at 5.020 s (op 40, seq 88)"
    pub fn described(&self, key: &str) -> String {
        let what = if self.f == "write" {
            format!("wrote {key}={}", compact(&self.value))
        } else {
            format!("read {key}")
        };
        let fence = self
            .fence
            .map(|f| format!(" with fence {f}"))
            .unwrap_or_default();
        let seq = self.seq.map(|s| format!(", seq {s}")).unwrap_or_default();
        format!(
            "{} {what}{fence} at {} (op {}{seq})",
            self.owner,
            secs(self.invoked_ns),
            self.op
        )
    }
}

/// A JSON value in one short line (long sets are abbreviated).
pub fn compact(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Array(a) if a.len() > 8 => format!("[{} elements]", a.len()),
        other => other.to_string(),
    }
}
