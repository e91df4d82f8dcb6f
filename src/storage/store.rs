//! The storage's state machine: values per key, the fence rule, and the
//! global request sequence. Pure (no I/O); the server calls [`Store::apply`]
//! under one lock, so sequence order is exactly the order requests took
//! effect.

use super::protocol::{OpKind, Request};
use super::Fencing;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};

/// What one request did.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// Applied. `value` is what a read returned (`null` for a write);
    /// `version` the key's version after the request.
    Ok {
        seq: u64,
        value: Value,
        version: u64,
    },
    /// Refused: the key has seen fence `highest`, above the request's.
    StaleFence { seq: u64, highest: u64 },
    /// Refused: a conditional write expected another version than the
    /// key's `version`.
    VersionConflict { seq: u64, version: u64 },
}

impl Outcome {
    pub fn seq(&self) -> u64 {
        match self {
            Outcome::Ok { seq, .. }
            | Outcome::StaleFence { seq, .. }
            | Outcome::VersionConflict { seq, .. } => *seq,
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Entry {
    value: Value,
    /// Highest fence seen on any request for this key, reads included.
    highest: Option<u64>,
    /// Writes applied to this key so far.
    version: u64,
}

/// Every key's value and highest fence, and the request counters.
#[derive(Debug)]
pub struct Store {
    fencing: Fencing,
    last_seq: u64,
    accepted: u64,
    rejected: u64,
    conflicts: u64,
    keys: HashMap<String, Entry>,
}

/// A copy of the whole state, for tests, debugging and the runner's logs.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StorageSnapshot {
    pub fencing: Fencing,
    /// Current value of every key that was configured or written.
    pub values: BTreeMap<String, Value>,
    /// Highest fence seen per key (keys never fenced are absent).
    pub highest_fence: BTreeMap<String, u64>,
    /// The last sequence number handed out (0 = no request yet).
    pub last_seq: u64,
    /// Requests applied.
    pub accepted: u64,
    /// Requests refused with `stale-fence`.
    pub rejected: u64,
    /// Conditional writes refused with `version-conflict`.
    pub conflicts: u64,
}

impl Store {
    /// A store whose keys start at `initial` (any other key starts absent).
    pub fn new(fencing: Fencing, initial: &BTreeMap<String, Value>) -> Store {
        let keys = initial
            .iter()
            .map(|(k, v)| {
                let entry = Entry {
                    value: v.clone(),
                    highest: None,
                    version: 0,
                };
                (k.clone(), entry)
            })
            .collect();
        Store {
            fencing,
            last_seq: 0,
            accepted: 0,
            rejected: 0,
            conflicts: 0,
            keys,
        }
    }

    /// Number the request, apply the fence rule, and apply it or refuse it.
    ///
    /// Fence rule (fencing on): a request carrying fence `f` for a key whose
    /// highest seen fence is `h > f` is refused; otherwise it is applied and
    /// the key's highest fence becomes `max(h, f)`. Unfenced requests are
    /// always applied and change nothing about fences. With fencing off every
    /// request is applied (highest fences are still tracked, for snapshots).
    ///
    /// Then a conditional write (with `version`) whose version is not the
    /// key's is refused with a version conflict; it has passed the fence
    /// rule, so like a read it has raised the key's highest fence. Every
    /// applied write adds one to the key's version.
    pub fn apply(&mut self, req: &Request) -> Outcome {
        self.last_seq += 1;
        let seq = self.last_seq;
        let entry = self.keys.entry(req.key.clone()).or_default();
        if let (Some(f), Some(h)) = (req.fence, entry.highest) {
            if f < h && self.fencing == Fencing::On {
                self.rejected += 1;
                return Outcome::StaleFence { seq, highest: h };
            }
        }
        if let Some(f) = req.fence {
            entry.highest = Some(entry.highest.map_or(f, |h| h.max(f)));
        }
        if let Some(v) = req.version {
            if v != entry.version {
                self.conflicts += 1;
                let version = entry.version;
                return Outcome::VersionConflict { seq, version };
            }
        }
        self.accepted += 1;
        let value = match req.op {
            OpKind::Read => entry.value.clone(),
            OpKind::Write => {
                entry.value = req.value.clone().unwrap_or(Value::Null);
                entry.version += 1;
                Value::Null
            }
            OpKind::Apply => Value::Bool(apply_job(&mut entry.value, req)),
        };
        let version = entry.version;
        Outcome::Ok {
            seq,
            value,
            version,
        }
    }

    /// The current value of `key` (`null` when absent).
    pub fn value(&self, key: &str) -> Value {
        self.keys.get(key).map_or(Value::Null, |e| e.value.clone())
    }

    pub fn snapshot(&self) -> StorageSnapshot {
        let mut values = BTreeMap::new();
        let mut highest_fence = BTreeMap::new();
        for (k, e) in &self.keys {
            if !e.value.is_null() {
                values.insert(k.clone(), e.value.clone());
            }
            if let Some(h) = e.highest {
                highest_fence.insert(k.clone(), h);
            }
        }
        StorageSnapshot {
            fencing: self.fencing,
            values,
            highest_fence,
            last_seq: self.last_seq,
            accepted: self.accepted,
            rejected: self.rejected,
            conflicts: self.conflicts,
        }
    }
}

/// Append an apply's job id to the list in `value` (absent = empty; a
/// value that is no list starts a new one); false when the request is
/// idempotent and the list already holds the id. The server parsed the
/// request, so its job is valid.
fn apply_job(value: &mut Value, req: &Request) -> bool {
    let Ok((job, idempotent)) = req.job() else {
        return false;
    };
    if !value.is_array() {
        *value = Value::Array(Vec::new());
    }
    let list = value.as_array_mut().expect("made a list above");
    if idempotent && list.iter().any(|v| v.as_u64() == Some(job)) {
        return false;
    }
    list.push(Value::from(job));
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn store(fencing: Fencing) -> Store {
        let initial = BTreeMap::from([("c".to_string(), json!(7))]);
        Store::new(fencing, &initial)
    }

    fn ok_value(o: Outcome) -> Value {
        match o {
            Outcome::Ok { value, .. } => value,
            other => panic!("expected ok, got {other:?}"),
        }
    }

    #[test]
    fn fencing_on_rejects_lower_fences_on_reads_and_writes() {
        let mut s = store(Fencing::On);
        assert_eq!(ok_value(s.apply(&Request::read("c", Some(34)))), json!(7));
        let r = s.apply(&Request::read("c", Some(33)));
        assert_eq!(
            r,
            Outcome::StaleFence {
                seq: 2,
                highest: 34
            }
        );
        let w = s.apply(&Request::write("c", json!(8), Some(33)));
        assert_eq!(
            w,
            Outcome::StaleFence {
                seq: 3,
                highest: 34
            }
        );
        assert_eq!(s.value("c"), json!(7));
        // Equal, higher and unfenced requests pass.
        ok_value(s.apply(&Request::write("c", json!(8), Some(34))));
        ok_value(s.apply(&Request::read("c", Some(35))));
        ok_value(s.apply(&Request::write("c", json!(9), None)));
        let snap = s.snapshot();
        assert_eq!(snap.highest_fence["c"], 35);
        assert_eq!((snap.accepted, snap.rejected, snap.last_seq), (4, 2, 6));
        assert_eq!(snap.values["c"], json!(9));
    }

    #[test]
    fn applies_append_unless_an_idempotency_key_saw_the_job() {
        let mut s = store(Fencing::On);
        let once = |job| Request::apply("jobs", job, true, Some(5));
        let blind = |job| Request::apply("jobs", job, false, Some(5));
        assert_eq!(ok_value(s.apply(&once(1))), json!(true));
        assert_eq!(ok_value(s.apply(&once(1))), json!(false));
        assert_eq!(ok_value(s.apply(&blind(2))), json!(true));
        assert_eq!(ok_value(s.apply(&blind(2))), json!(true));
        assert_eq!(s.value("jobs"), json!([1, 2, 2]));
        let stale = s.apply(&Request::apply("jobs", 3, true, Some(4)));
        assert!(matches!(stale, Outcome::StaleFence { highest: 5, .. }));
        assert_eq!(s.value("jobs"), json!([1, 2, 2]));
    }

    #[test]
    fn fences_are_per_key() {
        let mut s = store(Fencing::On);
        ok_value(s.apply(&Request::write("a", json!(1), Some(50))));
        ok_value(s.apply(&Request::write("b", json!(1), Some(3))));
        assert_eq!(s.value("b"), json!(1));
        assert_eq!(s.value("nobody"), Value::Null);
    }

    #[test]
    fn fencing_off_accepts_everything_and_still_numbers() {
        let mut s = store(Fencing::Off);
        ok_value(s.apply(&Request::read("c", Some(34))));
        ok_value(s.apply(&Request::write("c", json!(8), Some(33))));
        assert_eq!(s.value("c"), json!(8));
        let snap = s.snapshot();
        assert_eq!((snap.accepted, snap.rejected, snap.last_seq), (2, 0, 2));
    }

    #[test]
    fn conditional_writes_apply_only_at_the_expected_version() {
        let mut s = store(Fencing::Off);
        let read = s.apply(&Request::read("c", None));
        assert_eq!(
            read,
            Outcome::Ok {
                seq: 1,
                value: json!(7),
                version: 0
            }
        );
        let w = s.apply(&Request::write_if("c", json!(8), None, 0));
        assert!(matches!(w, Outcome::Ok { version: 1, .. }), "{w:?}");
        // A second writer that read version 0 too is refused.
        let late = s.apply(&Request::write_if("c", json!(8), None, 0));
        assert_eq!(late, Outcome::VersionConflict { seq: 3, version: 1 });
        assert_eq!(s.value("c"), json!(8));
        // Unconditional writes move the version too.
        ok_value(s.apply(&Request::write("c", json!(20), None)));
        let stale = s.apply(&Request::write_if("c", json!(9), None, 1));
        assert_eq!(stale, Outcome::VersionConflict { seq: 5, version: 2 });
        let snap = s.snapshot();
        assert_eq!((snap.accepted, snap.conflicts, snap.rejected), (3, 2, 0));
    }

    #[test]
    fn the_fence_rule_comes_before_the_version() {
        let mut s = store(Fencing::On);
        ok_value(s.apply(&Request::read("c", Some(5))));
        // A stale fence is refused as such, whatever the version.
        let r = s.apply(&Request::write_if("c", json!(1), Some(4), 9));
        assert_eq!(r, Outcome::StaleFence { seq: 2, highest: 5 });
        // A conflicting write with a higher fence still raises the fence.
        let r = s.apply(&Request::write_if("c", json!(1), Some(6), 9));
        assert_eq!(r, Outcome::VersionConflict { seq: 3, version: 0 });
        assert_eq!(s.snapshot().highest_fence["c"], 6);
    }

    #[test]
    fn seq_strictly_increases_across_keys_and_outcomes() {
        let mut s = store(Fencing::On);
        let mut last = 0;
        for i in 0..100u64 {
            let key = format!("k{}", i % 3);
            let fence = Some(100 - i % 7);
            let o = if i % 2 == 0 {
                s.apply(&Request::read(key, fence))
            } else {
                s.apply(&Request::write(key, json!(i), fence))
            };
            assert!(o.seq() > last);
            last = o.seq();
        }
    }
}
