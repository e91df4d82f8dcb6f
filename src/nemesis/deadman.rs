//! The dead man's switch of a fault on another host ([`crate::remote::deadman`]):
//! before a fault acts on a node's host, a timer there that takes it
//! back by itself at the fault's planned end plus a margin, unless
//! lockjaw has taken it back first and disarmed it.
//!
//! The order in the undo log: the switch's `DeadMan` entry, the switch
//! armed, then the fault's own entries and effects (a kill: its
//! `AttachedDown` entry first, so that draining the log disarms the
//! switch before the start command runs, never both at once). At the
//! fault's end lockjaw takes the fault back, then disarms ([`disarm`];
//! a kill disarms before it starts the server itself), and the result
//! goes into the injection's detail (`deadman`).
//!
//! Armed on every fault on a node that runs on another host (`--hosts`,
//! `--attach`): pause-node, kill-node (attached: kill-service and
//! failover too), partition-node's rules, clock faults' files. A run on
//! this machine arms none ([`Plan::margin`] is `None`).

use super::{Ctx, NemesisError};
use crate::remote::deadman as switch;
use crate::undo::{RemoteEffect, Undo};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The default margin after a fault's planned end (`--dead-man-margin-ms`).
pub const DEFAULT_MARGIN: Duration = Duration::from_secs(10);

/// The smallest margin a run accepts.
pub const MIN_MARGIN: Duration = Duration::from_secs(1);

/// When a run's switches fire.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// After a fault's planned end; `None`: no switch (a run on this
    /// machine, the tests of the nemeses).
    pub margin: Option<Duration>,
    /// The planned length of the fault being struck, set by its nemesis
    /// before it acts (reset before each strike, so a switch never takes
    /// another fault's length).
    pub hold: Option<Duration>,
}

/// Numbers the switches of this process (their tags are unique in a run).
static SEQ: AtomicU64 = AtomicU64::new(1);

fn nerr(fault: &str, e: impl std::fmt::Display) -> NemesisError {
    NemesisError::new(fault, e.to_string())
}

/// Before `undos` (each an effect on node `node`'s host, in the undo log
/// next) are made: write the switch's `DeadMan` entry, then arm it on the
/// host to run their undo at the fault's planned end plus the margin.
/// Nothing for a node on this machine, or in a run without switches.
pub async fn arm(ctx: &Ctx, fault: &str, node: &str, undos: &[Undo]) -> Result<(), NemesisError> {
    let Some(margin) = ctx.deadman.margin else {
        return Ok(());
    };
    let n = ctx.cluster.node(node).map_err(|e| nerr(fault, e))?;
    let Some(r) = &n.remote else {
        return Ok(());
    };
    let hold = ctx.deadman.hold.ok_or_else(|| {
        nerr(fault, format!("node {node}: the fault's planned length is not set, so its dead man's switch cannot be armed"))
    })?;
    let start = n.attached.as_ref().map(|a| &a.attach);
    let mut action = Vec::new();
    for u in undos {
        let Undo::Remote { effect, .. } = u else {
            return Err(nerr(fault, format!("{} is not on a host", u.describe())));
        };
        action.push(switch::undo_script(effect, start).map_err(|e| nerr(fault, e))?);
    }
    let after = hold + margin;
    let tag = switch::tag(&ctx.run_id, node, SEQ.fetch_add(1, Ordering::Relaxed));
    ctx.will(
        fault,
        r.undo(RemoteEffect::DeadMan {
            node: node.to_string(),
            tag: tag.clone(),
            after_ms: after.as_millis() as u64,
        }),
    )?;
    // Armed or not, the entry stays until disarmed: a timer that started
    // although its script failed is ended then.
    switch::arm(&r.host, &tag, after, &action)
        .await
        .map(drop)
        .map_err(|e| nerr(fault, format!("arming the dead man's switch: {e}")))
}

/// Disarm every switch still armed on node `node`'s host (its `DeadMan`
/// entries pending in the undo log), after lockjaw took the fault back
/// (before it starts a killed server itself). One switch: `{"tag",
/// "result"}` with `result` `disarmed` or `fired or gone`, or `not
/// disarmed` with the `error` (its entry stays, for the run's end or
/// heal); several: a list; none: null.
pub async fn disarm(ctx: &Ctx, node: &str) -> Value {
    let mut out = Vec::new();
    for (id, u) in ctx.undo.pending() {
        let Undo::Remote {
            effect: RemoteEffect::DeadMan { node: n, tag, .. },
            ..
        } = &u
        else {
            continue;
        };
        if n != node {
            continue;
        }
        let host = ctx.cluster.node(node).ok().and_then(|n| n.remote.as_ref());
        let r = match host {
            Some(r) => switch::disarm(&r.host, tag)
                .await
                .map_err(|e| e.to_string()),
            None => Err(format!("node {node} is not on a host")),
        };
        out.push(match r {
            Ok(d) => {
                ctx.undo.forget(id);
                json!({ "tag": tag, "result": d.as_str() })
            }
            Err(e) => json!({ "tag": tag, "result": "not disarmed", "error": e }),
        });
    }
    match out.len() {
        0 => Value::Null,
        1 => out.remove(0),
        _ => Value::Array(out),
    }
}

/// [`disarm`] on each of `nodes`: `{"deadman": {node: result}}` for the
/// nodes that had a switch, else null (to merge into a fault's detail).
pub async fn disarm_all(ctx: &Ctx, nodes: &[String]) -> Value {
    let mut m = serde_json::Map::new();
    for n in nodes {
        let d = disarm(ctx, n).await;
        if !d.is_null() {
            m.insert(n.clone(), d);
        }
    }
    match m.is_empty() {
        true => Value::Null,
        false => json!({ "deadman": m }),
    }
}

/// Merge `extra` (an object, or null) into the object `detail`.
pub fn merged(mut detail: Value, extra: Value) -> Value {
    if let (Some(d), Value::Object(e)) = (detail.as_object_mut(), extra) {
        d.extend(e);
    }
    detail
}

/// One sentence for `--plan`: what the switch of `fault` does on a node's
/// host and when, for a fault of planned length `hold`; `None` for a
/// fault that arms none.
pub fn describe(fault: &str, hold: Duration, margin: Duration) -> Option<String> {
    let what = match fault {
        "pause-node" => "continues the processes the pause stopped",
        "kill-node" | "kill-service" | "failover" => {
            "runs the node's start command, unless a process of its description runs"
        }
        "partition-node" => "deletes the run's iptables rules on the cut node's host",
        "clock-jump" | "clock-strobe" => "writes the node's previous clock offset back",
        _ => return None,
    };
    Some(format!(
        "dead man's switch: {} s after the fault begins (its {:.1} s plus a {:.1} s margin), unless lockjaw has taken the fault back and disarmed it, a timer on the host ({}=lockjaw-RUN_ID-NODE-dmN) {what}",
        switch::seconds(hold + margin),
        hold.as_secs_f64(),
        margin.as_secs_f64(),
        switch::VAR,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_says_what_each_switch_does_and_when() {
        let s = describe("pause-node", Duration::from_secs(9), DEFAULT_MARGIN).unwrap();
        assert!(
            s.contains("continues the processes") && s.contains(": 19 s after"),
            "{s}"
        );
        let s = describe(
            "partition-node",
            Duration::from_millis(1500),
            DEFAULT_MARGIN,
        )
        .unwrap();
        assert!(
            s.contains("iptables rules") && s.contains(": 12 s after"),
            "{s}"
        );
        assert!(describe("kill-node", Duration::ZERO, DEFAULT_MARGIN)
            .unwrap()
            .contains("start command"));
        assert_eq!(
            describe("pause-holder", Duration::ZERO, DEFAULT_MARGIN),
            None
        );
    }

    #[test]
    fn details_merge_into_objects_only() {
        let d = merged(json!({"resumed": ["e1"]}), json!({"deadman": {"e1": "x"}}));
        assert_eq!(d, json!({"resumed": ["e1"], "deadman": {"e1": "x"}}));
        assert_eq!(merged(json!({"a": 1}), Value::Null), json!({"a": 1}));
    }
}
