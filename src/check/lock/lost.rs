//! Check 5, lost updates, per storage key.
//!
//! "Final" is the last ok read invoked after every write had completed (ok,
//! fail or info); without one the check is unknown. Counter: lost =
//! acknowledged writes − (final − initial) when positive; phantom = (final −
//! initial) − (acknowledged + indeterminate writes) when positive. Set
//! (writes carry the whole set): every element of an acknowledged write
//! must be in the final read (else lost); elements of the final read that
//! no ok or info write carried are unexpected; elements missing from some
//! read invoked after their write was acknowledged, yet present at the end,
//! are stale; acknowledged elements no read began after are never-read
//! (Jepsen's set-full terms). Memory: the set's size, not the history's;
//! for a counter, one entry per acknowledged write, for the local proofs of
//! [`super::overwrite`], which need no final read.

use super::event::{Done, Fun, Invoke, Outcome};
use super::overwrite::{Acked, Pair};
use super::params::StoreKind;
use super::witness::RequestRef;
use foldhash::{HashMap, HashSet};
use serde_json::Value;

#[derive(Debug)]
struct Elem {
    value: Value,
    acked_at: u64,
    missed: bool,
}

#[derive(Default)]
struct KeyLost {
    kind: Option<StoreKind>,
    ok_writes: u64,
    info_writes: u64,
    running_writes: HashSet<u64>,
    last_write_end: u64,
    /// The ok read with the latest invocation: (invocation, op index, value).
    last_read: Option<(u64, u64, Value)>,
    acked: HashMap<String, Elem>,
    attempted: HashSet<String>,
    writes: u64,
    reads: u64,
    /// Acknowledged writes of a counter value.
    counter_writes: Vec<Acked>,
}

/// The outcome for one key.
#[derive(Debug)]
pub enum KeyOutcome {
    /// No final read: unknown. `never_read`: acknowledged set elements
    /// that no ok read began after.
    NoFinal {
        key: u32,
        why: String,
        never_read: u64,
    },
    Counter(CounterOutcome),
    Set(SetOutcome),
}

impl KeyOutcome {
    pub fn key(&self) -> u32 {
        match self {
            KeyOutcome::NoFinal { key, .. } => *key,
            KeyOutcome::Counter(c) => c.key,
            KeyOutcome::Set(s) => s.key,
        }
    }
}

/// A counter with a final read.
#[derive(Debug)]
pub struct CounterOutcome {
    pub key: u32,
    pub initial: i64,
    pub final_value: i64,
    pub final_op: u64,
    pub acknowledged: u64,
    pub indeterminate: u64,
}

/// A set with a final read.
#[derive(Debug)]
pub struct SetOutcome {
    pub key: u32,
    pub final_op: u64,
    pub lost: Vec<Value>,
    pub unexpected: Vec<Value>,
    pub stale: u64,
    pub acknowledged: u64,
}

/// Check 5 over every storage key.
pub struct Lost {
    store: StoreKind,
    initial: Option<Value>,
    keys: HashMap<u32, KeyLost>,
}

fn elem_key(v: &Value) -> String {
    v.to_string()
}

impl Lost {
    pub fn new(store: StoreKind, initial: Option<Value>) -> Lost {
        Lost {
            store,
            initial,
            keys: HashMap::default(),
        }
    }

    pub fn applicable(&self) -> bool {
        self.keys.values().any(|k| k.writes + k.reads > 0)
    }

    pub fn on_invoke(&mut self, i: &Invoke) {
        if i.fun == Fun::Write {
            let k = self.keys.entry(i.key).or_default();
            k.running_writes.insert(i.call);
        }
    }

    /// Take a completed storage op into account; `owner` names it in a
    /// local proof (the owner of the grant behind its fence, where known).
    /// Errors describe a value of the wrong type.
    pub fn on_done(&mut self, d: &Done, owner: &str) -> Result<(), String> {
        let store = self.store;
        let k = self.keys.entry(d.key).or_default();
        if !d.value.is_null() && k.kind.is_none() {
            k.kind = Some(match (store, &d.value) {
                (StoreKind::Infer, Value::Array(_)) => StoreKind::Set,
                (StoreKind::Infer, Value::Number(_)) => StoreKind::Counter,
                (StoreKind::Infer, v) => {
                    return Err(format!(
                        "field `value` must be an integer (counter) or an array (set), got {v}"
                    ))
                }
                (s, _) => s,
            });
        }
        check_type(k.kind, &d.value)?;
        match d.fun {
            Fun::Write => {
                k.writes += 1;
                k.running_writes.remove(&d.call);
                k.last_write_end = k.last_write_end.max(d.time);
                match d.outcome {
                    Outcome::Ok => {
                        k.ok_writes += 1;
                        if let Some(value) = d.value.as_i64() {
                            k.counter_writes.push(Acked {
                                req: RequestRef::of(d, owner),
                                value,
                            });
                        }
                        if let Value::Array(items) = &d.value {
                            for v in items {
                                k.acked.entry(elem_key(v)).or_insert(Elem {
                                    value: v.clone(),
                                    acked_at: d.time,
                                    missed: false,
                                });
                            }
                        }
                    }
                    Outcome::Info => {
                        k.info_writes += 1;
                        if let Value::Array(items) = &d.value {
                            k.attempted.extend(items.iter().map(elem_key));
                        }
                    }
                    Outcome::Fail => {}
                }
            }
            Fun::Read if d.outcome == Outcome::Ok => {
                k.reads += 1;
                if let Value::Array(items) = &d.value {
                    let seen: HashSet<String> = items.iter().map(elem_key).collect();
                    for (name, e) in k.acked.iter_mut() {
                        if e.acked_at < d.inv_time && !seen.contains(name) {
                            e.missed = true;
                        }
                    }
                }
                if k.last_read
                    .as_ref()
                    .map_or(true, |(inv, _, _)| d.inv_time >= *inv)
                {
                    k.last_read = Some((d.inv_time, d.index, d.value.clone()));
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// The outcome for every key that has storage ops, with the key's
    /// local proofs of lost updates.
    pub fn finish(self) -> Result<Vec<(KeyOutcome, Vec<Pair>)>, String> {
        let mut out = Vec::new();
        let mut keys: Vec<(u32, KeyLost)> = self.keys.into_iter().collect();
        keys.sort_by_key(|(k, _)| *k);
        for (key, mut k) in keys {
            if k.writes + k.reads == 0 && k.running_writes.is_empty() {
                continue;
            }
            let pairs = super::overwrite::pairs(std::mem::take(&mut k.counter_writes));
            out.push((outcome(key, k, self.store, self.initial.as_ref())?, pairs));
        }
        Ok(out)
    }
}

fn check_type(kind: Option<StoreKind>, v: &Value) -> Result<(), String> {
    match (kind, v) {
        (_, Value::Null) => Ok(()),
        (Some(StoreKind::Counter), v) if !v.is_i64() => Err(format!(
            "field `value` of a counter must be an integer, got {v} (hint: set the meta \
             field `workload` to `lock-set` for a set)"
        )),
        (Some(StoreKind::Set), v) if !v.is_array() => Err(format!(
            "field `value` of a set must be an array, got {v} (hint: set the meta field \
             `workload` to `fenced-counter` for a counter)"
        )),
        _ => Ok(()),
    }
}

fn outcome(
    key: u32,
    k: KeyLost,
    store: StoreKind,
    initial: Option<&Value>,
) -> Result<KeyOutcome, String> {
    let last_inv = k.last_read.as_ref().map(|(inv, _, _)| *inv);
    let never_read = k
        .acked
        .values()
        .filter(|e| last_inv.map_or(true, |i| e.acked_at >= i))
        .count() as u64;
    let no_final = |why: &str| {
        Ok(KeyOutcome::NoFinal {
            key,
            why: why.to_string(),
            never_read,
        })
    };
    if !k.running_writes.is_empty() {
        return no_final("a write never completed, so no read is known to follow every write");
    }
    let Some((inv, op, value)) = k.last_read else {
        return no_final("no ok read of it");
    };
    if inv <= k.last_write_end {
        return no_final("no ok read was invoked after every write had completed");
    }
    let kind = k.kind.unwrap_or(if store == StoreKind::Set {
        StoreKind::Set
    } else {
        StoreKind::Counter
    });
    if kind == StoreKind::Set {
        return Ok(set_outcome(key, k.acked, k.attempted, op, &value, initial));
    }
    let init = initial.and_then(Value::as_i64).unwrap_or(0);
    Ok(KeyOutcome::Counter(CounterOutcome {
        key,
        initial: init,
        final_value: value.as_i64().unwrap_or(init),
        final_op: op,
        acknowledged: k.ok_writes,
        indeterminate: k.info_writes,
    }))
}

fn set_outcome(
    key: u32,
    acked: HashMap<String, Elem>,
    attempted: HashSet<String>,
    final_op: u64,
    value: &Value,
    initial: Option<&Value>,
) -> KeyOutcome {
    let items: Vec<Value> = value.as_array().cloned().unwrap_or_default();
    let fin: HashSet<String> = items.iter().map(elem_key).collect();
    let init: HashSet<String> = initial
        .and_then(Value::as_array)
        .map(|a| a.iter().map(elem_key).collect())
        .unwrap_or_default();
    let mut lost: Vec<Value> = Vec::new();
    let mut stale = 0;
    for (name, e) in &acked {
        if !fin.contains(name) {
            lost.push(e.value.clone());
        } else if e.missed {
            stale += 1;
        }
    }
    lost.sort_by_key(elem_key);
    let unexpected: Vec<Value> = items
        .iter()
        .filter(|v| {
            let n = elem_key(v);
            !acked.contains_key(&n) && !attempted.contains(&n) && !init.contains(&n)
        })
        .cloned()
        .collect();
    KeyOutcome::Set(SetOutcome {
        key,
        final_op,
        lost,
        unexpected,
        stale,
        acknowledged: acked.len() as u64,
    })
}
