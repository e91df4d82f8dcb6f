//! The schedule: run one nemesis for the length of a run and keep a record
//! of every injection.
//!
//! Quiet `first_delay_ms`, then repeatedly: start a fault (the nemesis may
//! wait for its target), leave it for the fault's length, stop it, stay
//! quiet `interval_ms`. When the run begins ending, the fault in place is
//! stopped at once and the loop returns. Each start and stop goes into the
//! history as an `invoke` + `info` pair of process `"nemesis"`. With
//! `max_injections = N` the loop returns once N injections landed
//! ([`Injection::landed`]); the run goes on quiet to its end.
//!
//! Each injection's target names its point (`"point"`: the nemesis file's
//! `name`, or for `mixed` the drawn file's), so `lockjaw explore` can tell
//! the faults of one run apart.
//!
//! A start that fails once the run has begun ending (a leader lookup the
//! end cut off, a wait for a target that outlasted the run) is recorded
//! as not started ([`NotStarted`]), not as an error: only a fault that
//! was due within the run and failed is one ([`NemesisSummary::errors`]).

use super::{Ctx, Fault, Nemesis};
use crate::history::OpType;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};

/// One fault as it happened.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Injection {
    pub id: u64,
    pub fault: String,
    /// Run-clock ns just before the fault was applied.
    pub start_ns: u64,
    /// When it was in place.
    pub started_ns: u64,
    /// When it was taken back (absent if taking it back failed).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stop_ns: Option<u64>,
    pub target: Value,
    /// What `stop` reported (e.g. `landed_inside`).
    pub detail: Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl Injection {
    /// Applied without error, not cut short by the run's end, and inside
    /// a critical section when the fault reports `landed_inside` (the
    /// rule of `report::trials`).
    pub fn landed(&self) -> bool {
        landed(&self.detail, self.error.is_some())
    }
}

/// The landing rule on an injection's record (its `stop` detail, and
/// whether it ended in an error), as nemesis.json keeps it.
pub fn landed(detail: &Value, error: bool) -> bool {
    let flag = |k: &str| detail.get(k).and_then(Value::as_bool);
    !error && flag("cut_short") != Some(true) && flag("landed_inside") != Some(false)
}

/// Whether `max` injections have landed among `done`.
pub fn enough(done: &[Injection], max: Option<u64>) -> bool {
    max.is_some_and(|m| done.iter().filter(|i| i.landed()).count() as u64 >= m)
}

/// A fault whose start the run's end cut off: nothing was applied.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NotStarted {
    /// Run-clock ns when the start gave up.
    pub at_ns: u64,
    /// What the start said.
    pub reason: String,
}

/// Every injection of a run, for `nemesis.json` and reports.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NemesisSummary {
    pub name: String,
    pub fault: String,
    pub injections: Vec<Injection>,
    /// Faults that were due within the run and could not be started.
    pub errors: Vec<String>,
    /// Starts the run's end cut off (not errors).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_started: Vec<NotStarted>,
    /// The nemesis's `max_injections` (None: no limit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_injections: Option<u64>,
}

impl NemesisSummary {
    /// (landed inside, judged) over injections that report `landed_inside`.
    pub fn landed_inside(&self) -> Option<(usize, usize)> {
        let judged: Vec<bool> = self
            .injections
            .iter()
            .filter_map(|i| i.detail.get("landed_inside").and_then(Value::as_bool))
            .collect();
        (!judged.is_empty()).then(|| (judged.iter().filter(|b| **b).count(), judged.len()))
    }
}

fn with(mut base: Value, extra: &Value) -> Value {
    if let (Some(b), Some(e)) = (base.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            b.insert(k.clone(), v.clone());
        }
    }
    base
}

/// Name the injection's point in its target (kept when the fault named
/// one already: `mixed` names the drawn file).
fn name_point(target: &mut Value, name: &str) {
    if !target.is_object() {
        *target = match target.take() {
            Value::Null => json!({}),
            t => json!({ "target": t }),
        };
    }
    if let Some(o) = target.as_object_mut() {
        o.entry("point").or_insert_with(|| json!(name));
    }
}

/// Run `nemesis` until the run ends. `faults` counts injections (progress).
pub async fn run(
    mut nemesis: Box<dyn Nemesis>,
    ctx: &mut Ctx,
    faults: &AtomicU64,
) -> NemesisSummary {
    let mut sum = NemesisSummary {
        name: ctx.spec.name.clone(),
        fault: nemesis.name().to_string(),
        max_injections: ctx.spec.max_injections,
        ..NemesisSummary::default()
    };
    let first = std::time::Duration::from_millis(ctx.spec.first_delay_ms);
    if !ctx.sleep(first).await {
        return sum;
    }
    let interval = std::time::Duration::from_millis(ctx.spec.interval_ms);
    loop {
        // Each fault sets its own planned length before it arms a switch.
        ctx.deadman.hold = None;
        let fault = match nemesis.start(ctx).await {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(e) if ctx.is_stopping() => {
                tracing::info!("not started (the run was ending): {e}");
                sum.not_started.push(NotStarted {
                    at_ns: ctx.clock.now(),
                    reason: format!("the run ended while it was starting: {e}"),
                });
                break;
            }
            Err(e) => {
                tracing::warn!("{e}");
                sum.errors.push(e.to_string());
                if !ctx.sleep(interval).await {
                    break;
                }
                continue;
            }
        };
        let id = sum.injections.len() as u64 + 1;
        faults.fetch_add(1, Ordering::Relaxed);
        let mut fault = fault;
        name_point(&mut fault.target, &ctx.spec.name);
        let inj = stop_after_hold(nemesis.as_mut(), ctx, id, fault).await;
        sum.injections.push(inj);
        if enough(&sum.injections, ctx.spec.max_injections) {
            break;
        }
        if ctx.is_stopping() || !ctx.sleep(interval).await {
            break;
        }
    }
    sum
}

async fn stop_after_hold(
    nemesis: &mut dyn Nemesis,
    ctx: &mut Ctx,
    id: u64,
    fault: Fault,
) -> Injection {
    let name = nemesis.name();
    let mut base = Map::new();
    base.insert("fault".into(), json!(name));
    base.insert("id".into(), json!(id));
    let base = with(Value::Object(base), &fault.target);
    let started = ctx.clock.now();
    ctx.record(OpType::Invoke, "start", fault.invoked_at, base.clone());
    ctx.record(OpType::Info, "start", started, base.clone());
    ctx.sleep(fault.hold).await;
    ctx.record(OpType::Invoke, "stop", ctx.clock.now(), base.clone());
    let (detail, error, stop_ns) = match nemesis.stop(ctx, &fault).await {
        Ok(d) => (d, None, Some(ctx.clock.now())),
        Err(e) => {
            tracing::warn!("{e}");
            (Value::Null, Some(e.to_string()), None)
        }
    };
    let mut done = with(base, &detail);
    if let (Some(e), Some(o)) = (&error, done.as_object_mut()) {
        o.insert("error".into(), json!(e));
    }
    ctx.record(OpType::Info, "stop", ctx.clock.now(), done);
    Injection {
        id,
        fault: name.to_string(),
        start_ns: fault.invoked_at,
        started_ns: started,
        stop_ns,
        target: fault.target,
        detail,
        error,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn inj(detail: Value, error: Option<&str>) -> Injection {
        Injection {
            id: 1,
            fault: "pause-holder".into(),
            start_ns: 0,
            started_ns: 0,
            stop_ns: Some(1),
            target: Value::Null,
            detail,
            error: error.map(String::from),
        }
    }

    #[test]
    fn an_injection_names_its_point_unless_the_fault_did() {
        let mut t = json!({"slot": 2});
        name_point(&mut t, "pause-holder");
        assert_eq!(t, json!({"slot": 2, "point": "pause-holder"}));
        let mut drawn = json!({"mixed": true, "point": "kill-holder"});
        name_point(&mut drawn, "mixed");
        assert_eq!(drawn["point"], "kill-holder");
        let mut null = Value::Null;
        name_point(&mut null, "none");
        assert_eq!(null, json!({"point": "none"}));
    }

    #[test]
    fn only_landed_injections_count_toward_max_injections() {
        let missed = inj(json!({"landed_inside": false}), None);
        let failed = inj(Value::Null, Some("no holder"));
        let cut = inj(json!({"cut_short": true}), None);
        let hit = inj(json!({"landed_inside": true}), None);
        let node = inj(json!({}), None);
        assert!(!missed.landed() && !failed.landed() && !cut.landed());
        assert!(hit.landed() && node.landed());
        let done = [missed, failed, cut, hit.clone()];
        assert!(enough(&done, Some(1)));
        assert!(!enough(&done, Some(2)));
        assert!(!enough(&done, None), "no limit");
        assert!(enough(&[hit, node], Some(2)));
    }
}
