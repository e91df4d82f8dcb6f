//! The lock checks' parameters, read from the history's meta record (and
//! the command line's meta fields, which fill in what the file lacks), with
//! their defaults and validation.

use super::report::EffectiveParams;
use crate::history::{HistoryError, Meta};
use serde_json::Value;

/// Default clock-drift allowance ρ.
pub const DEFAULT_DRIFT: f64 = 1e-3;
/// Default extra allowance ε (ms).
pub const DEFAULT_EPSILON_MS: f64 = 2.0;
/// Default out-of-order window (ms) when putting ops in time order.
pub const DEFAULT_WINDOW_MS: u64 = 10_000;

/// What the storage holds, which decides how lost updates are counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StoreKind {
    Counter,
    Set,
    /// Decided per storage key from the first value seen.
    Infer,
}

/// Validated parameters.
#[derive(Clone, Debug)]
pub struct LockParams {
    pub workload: Option<String>,
    pub acquire_sets_ttl: bool,
    pub drift: f64,
    pub epsilon_ns: u64,
    pub initial: Option<Value>,
    pub store: StoreKind,
    pub window_ns: u64,
    /// False when a client adapter reports only some of its library's
    /// background renewals (meta `client.renewals` = `some`): then the
    /// figures that assume every refresh is recorded are unknown.
    pub all_renewals_recorded: bool,
    /// The workers' op timeout (meta `op_timeout_ms`), the ε of the
    /// stuck-lock figure; `None` in histories that lack it.
    pub op_timeout_ns: Option<u64>,
}

impl LockParams {
    /// Combine the file's meta record with the override; the file's own
    /// fields win, the override fills what it lacks.
    pub fn new(
        file: &str,
        meta: Option<&Meta>,
        over: Option<&Meta>,
        window_ms: u64,
    ) -> Result<LockParams, HistoryError> {
        let line = if meta.is_some() { 1 } else { 0 };
        let err = |msg: String| HistoryError {
            file: file.to_string(),
            line,
            msg,
        };
        let get = |name: &str| -> Option<&Value> {
            meta.and_then(|m| m.params.get(name))
                .filter(|v| !v.is_null())
                .or_else(|| {
                    over.and_then(|m| m.params.get(name))
                        .filter(|v| !v.is_null())
                })
        };
        let workload = workload_field(get("workload"), &err)?;
        let acquire_sets_ttl = acquire_sets_ttl_field(get("acquire_sets_ttl"), &err)?;
        let drift = number(get("drift"), "drift", DEFAULT_DRIFT, &err)?;
        if !(0.0..1.0).contains(&drift) {
            return Err(err(format!(
                "meta field `drift` must be in [0, 1), got {drift} (hint: 0.001 allows 1 ms per second)"
            )));
        }
        let eps = number(get("epsilon_ms"), "epsilon_ms", DEFAULT_EPSILON_MS, &err)?;
        if eps < 0.0 {
            return Err(err(format!(
                "meta field `epsilon_ms` must be ≥ 0, got {eps}"
            )));
        }
        let initial = get("initial").cloned();
        if let Some(v) = &initial {
            if !(v.is_i64() || v.is_array()) {
                return Err(err(format!(
                    "meta field `initial` must be an integer (counter) or an array (set), got {v}"
                )));
            }
        }
        let store = match workload.as_deref() {
            Some("fenced-counter") | Some("counter") => StoreKind::Counter,
            Some("lock-set") | Some("set") => StoreKind::Set,
            _ => match &initial {
                Some(Value::Array(_)) => StoreKind::Set,
                Some(_) => StoreKind::Counter,
                None => StoreKind::Infer,
            },
        };
        let renewals = renewals_field(get("client"), &err)?;
        let op_timeout_ns = op_timeout_field(get("op_timeout_ms"), &err)?;
        Ok(LockParams {
            workload,
            acquire_sets_ttl,
            all_renewals_recorded: renewals != "some",
            op_timeout_ns,
            drift,
            epsilon_ns: (eps * 1e6).round() as u64,
            initial,
            store,
            window_ns: window_ms.saturating_mul(1_000_000),
        })
    }

    /// The lower bound of a lease's end: it certainly lasted this long
    /// after `start` (the invocation of the op that started or refreshed it).
    pub fn lease_lower(&self, start: u64, lease_ms: u64) -> u64 {
        let d = lease_ms.saturating_mul(1_000_000);
        let slack = self.drift_ns(d).saturating_add(self.epsilon_ns);
        start.saturating_add(d.saturating_sub(slack))
    }

    /// ρ × `d`, rounded up (the allowance errs on the side of soundness).
    fn drift_ns(&self, d: u64) -> u64 {
        (d as f64 * self.drift).ceil() as u64
    }

    /// The upper bound: the lease had certainly ended this long after
    /// `done` (the completion of the op that last proved it alive),
    /// assuming honest clocks and every refresh recorded.
    pub fn lease_upper(&self, done: u64, lease_ms: u64) -> u64 {
        self.lease_upper_eps(done, lease_ms, self.epsilon_ns)
    }

    /// [`LockParams::lease_upper`] with another ε (`eps_ns`).
    pub fn lease_upper_eps(&self, done: u64, lease_ms: u64, eps_ns: u64) -> u64 {
        let d = lease_ms.saturating_mul(1_000_000);
        done.saturating_add(d)
            .saturating_add(self.drift_ns(d))
            .saturating_add(eps_ns)
    }

    pub fn effective(&self) -> EffectiveParams {
        EffectiveParams {
            workload: self.workload.clone(),
            acquire_sets_ttl: self.acquire_sets_ttl,
            drift: self.drift,
            epsilon_ms: self.epsilon_ns as f64 / 1e6,
            initial: self.initial.clone().unwrap_or(Value::Null),
            reorder_window_ms: self.window_ns as f64 / 1e6,
        }
    }
}

/// How the meta record's fields fail: with the file and line.
type FieldErr<'a> = &'a dyn Fn(String) -> HistoryError;

/// `workload`: required, a string.
fn workload_field(v: Option<&Value>, err: FieldErr) -> Result<Option<String>, HistoryError> {
    Ok(match v {
        None => {
            return Err(err(
                "the meta record lacks `workload`, which the lock checks need to know \
                 what the storage holds (hint: add \"workload\": \"lock\", \
                 \"fenced-counter\", \"lock-set\" or \"leader\" to the meta record, or give \
                 --workload on the command line)"
                    .to_string(),
            ))
        }
        Some(Value::String(s)) => Some(s.clone()),
        Some(v) => {
            return Err(err(format!(
                "meta field `workload` must be a string, got {v}"
            )))
        }
    })
}

/// `acquire_sets_ttl`: required, true or false.
fn acquire_sets_ttl_field(v: Option<&Value>, err: FieldErr) -> Result<bool, HistoryError> {
    Ok(match v {
        Some(Value::Bool(b)) => *b,
        Some(v) => {
            return Err(err(format!(
                "meta field `acquire_sets_ttl` must be true or false, got {v}"
            )))
        }
        None => {
            return Err(err(
                "the meta record lacks `acquire_sets_ttl`, which the lock checks need: true \
                 when an acquire itself starts the lease (Redis SET ... PX), false when the \
                 lease starts at its grant or keep-alive (etcd, ZooKeeper) (hint: add \
                 \"acquire_sets_ttl\": true|false to the meta record, or give it on the \
                 command line)"
                    .to_string(),
            ))
        }
    })
}

/// `client.renewals`: "none", "all" (the default) or "some".
fn renewals_field<'v>(v: Option<&'v Value>, err: FieldErr) -> Result<&'v str, HistoryError> {
    Ok(match v.map(|c| c.get("renewals")) {
        None | Some(None) => "all",
        Some(Some(Value::String(r))) if ["none", "all", "some"].contains(&r.as_str()) => r.as_str(),
        Some(Some(v)) => {
            return Err(err(format!(
                "meta field `client.renewals` must be \"none\", \"all\" or \"some\", got {v}"
            )))
        }
    })
}

/// `op_timeout_ms`: a number ≥ 0, in ns; `None` when absent.
fn op_timeout_field(v: Option<&Value>, err: FieldErr) -> Result<Option<u64>, HistoryError> {
    Ok(match v {
        None => None,
        Some(v) => match v.as_f64() {
            Some(t) if t >= 0.0 => Some((t * 1e6).round() as u64),
            _ => {
                return Err(err(format!(
                    "meta field `op_timeout_ms` must be a number ≥ 0, got {v} (hint: the \
                     workers' op timeout in ms, e.g. 2000)"
                )))
            }
        },
    })
}

fn number(
    v: Option<&Value>,
    name: &str,
    default: f64,
    err: &dyn Fn(String) -> HistoryError,
) -> Result<f64, HistoryError> {
    match v {
        None => Ok(default),
        Some(Value::Number(n)) => Ok(n.as_f64().unwrap_or(default)),
        Some(v) => Err(err(format!(
            "meta field `{name}` must be a number, got {v}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn meta(v: Value) -> Meta {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn file_wins_and_override_fills() {
        let m = meta(json!({"acquire_sets_ttl": true, "drift": 0.01}));
        let o = meta(json!({"acquire_sets_ttl": false, "epsilon_ms": 5, "workload": "lock-set"}));
        let p = LockParams::new("h", Some(&m), Some(&o), 1000).unwrap();
        assert!(p.acquire_sets_ttl);
        assert_eq!(p.drift, 0.01);
        assert_eq!(p.epsilon_ns, 5_000_000);
        assert_eq!(p.store, StoreKind::Set);
    }

    #[test]
    fn missing_acquire_sets_ttl_names_the_field_and_hints() {
        let m = meta(json!({"workload": "lock"}));
        let e = LockParams::new("h.jsonl", Some(&m), None, 1000).unwrap_err();
        let s = e.to_string();
        assert!(s.starts_with("h.jsonl:1: "), "{s}");
        assert!(s.contains("acquire_sets_ttl") && s.contains("hint"), "{s}");
    }

    #[test]
    fn missing_workload_names_the_field_unless_the_override_gives_it() {
        let m = meta(json!({"acquire_sets_ttl": true}));
        let s = LockParams::new("h.jsonl", Some(&m), None, 1000)
            .unwrap_err()
            .to_string();
        assert!(s.starts_with("h.jsonl:1: "), "{s}");
        assert!(s.contains("`workload`") && s.contains("--workload"), "{s}");
        let o = meta(json!({"workload": "fenced-counter"}));
        let p = LockParams::new("h", Some(&m), Some(&o), 1000).unwrap();
        assert_eq!(p.store, StoreKind::Counter);
    }

    #[test]
    fn lease_bounds_use_drift_and_epsilon() {
        let m = meta(json!({"acquire_sets_ttl": true, "workload": "lock"}));
        let p = LockParams::new("h", Some(&m), None, 1000).unwrap();
        // 2000 ms × 0.999 − 2 ms = 1996 ms after the start.
        assert_eq!(p.lease_lower(1_000_000_000, 2000), 2_996_000_000);
        assert_eq!(p.lease_upper(0, 2000), 2_004_000_000);
    }
}
