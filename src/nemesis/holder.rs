//! Process faults on the lock holder: `pause-holder` and `kill-holder`.
//!
//! Both wait for a worker to report `holding` (inside its critical section:
//! after its grant and its read, before its protected write) and strike its
//! process group at once.
//!
//! - `pause-holder`: SIGSTOP for the fault's length (by default 1.5 × the
//!   holder's lease), then SIGCONT. Its `stop` records `landed_inside`: the
//!   worker was still stopped and had reported nothing after `holding`, so
//!   the pause fell between the grant and the protected write; a pause the
//!   run's end cut short of its length records `cut_short` instead and is
//!   not judged.
//! - `kill-holder`: SIGKILL; after the fault's length (default 0) a new
//!   incarnation of the worker starts with fresh process numbers. The time
//!   from the kill to the next grant is measured from the history
//!   (`runner::analysis`).
//!
//! `strike_after_ms` delays either strike that long into the critical
//! section (a crash after the holder's renewals ran), if the holder still
//! holds then.
//!
//! With `target = "waiter"` or `"renewer"` (the names stay) they strike a
//! worker blocked in acquire or one whose renewal is in flight instead
//! ([`super::aim`]); the injection lands when that request had no answer
//! before the strike (`answered_before`: false).

use super::aim::{self, Aimed};
use super::{Ctx, Fault, Nemesis, NemesisError, Target, WorkerEvent};
use crate::workload::step::Phase;
use async_trait::async_trait;
use serde_json::{json, Value};

fn target(ev: &WorkerEvent, pid: Option<i32>, lease_ms: u128) -> Value {
    json!({
        "slot": ev.slot,
        "process": ev.state.process,
        "owner": ev.state.owner,
        "fence": ev.state.fence,
        "lease_ms": lease_ms as u64,
        "pid": pid,
        "holding_ns": ev.state.time,
    })
}

/// Wait for a holder whose worker is running, and, with `strike_after_ms`,
/// still holding that long after it reported `holding` (a holder that moved
/// on meanwhile is let go, and the next one waited for); `None` when the
/// run ends.
async fn next_holder(ctx: &mut Ctx) -> Option<(WorkerEvent, crate::process::ProcId)> {
    loop {
        let ev = ctx.wait_for_phase(Phase::Holding).await?;
        let after = std::time::Duration::from_millis(ctx.spec.strike_after_ms);
        if !after.is_zero() && !ctx.sleep(after).await {
            return None;
        }
        let view = ctx.workers.view(ev.slot);
        if view.incarnation != ev.incarnation || !view.alive {
            continue;
        }
        let same = |s: &crate::workload::step::StateEvent| {
            s.phase == Phase::Holding && s.time == ev.state.time && s.process == ev.state.process
        };
        if !after.is_zero() && !view.last.as_ref().is_some_and(same) {
            continue;
        }
        if let Some(p) = view.proc {
            return Some((ev, p));
        }
    }
}

/// The worker `ctx.spec.target` names, running: a holder ([`next_holder`])
/// or a waiter or renewer ([`aim::next_worker`]); `None` when the run ends.
async fn next_target(
    ctx: &mut Ctx,
    fault: &str,
) -> Result<Option<(Aimed, crate::process::ProcId)>, NemesisError> {
    if ctx.spec.target == Target::Holder {
        return Ok(next_holder(ctx).await.map(|(ev, p)| (Aimed::holder(ev), p)));
    }
    loop {
        let Some(a) = aim::next_worker(ctx, fault).await? else {
            return Ok(None);
        };
        let view = ctx.workers.view(a.ev.slot);
        if view.incarnation != a.ev.incarnation || !view.alive {
            continue;
        }
        if let Some(p) = view.proc {
            return Ok(Some((a, p)));
        }
    }
}

/// The target's record: the holder's as before; a waiter's or renewer's
/// adds its target name and announcement.
fn aimed_target(a: &Aimed, pid: Option<i32>, lease_ms: u128) -> Value {
    let mut v = target(&a.ev, pid, lease_ms);
    if a.target != Target::Holder {
        v["target"] = json!(a.target.name());
        v["announced"] = a.json();
    }
    v
}

/// SIGSTOP the holder past its lease.
pub struct PauseHolder;

#[async_trait]
impl Nemesis for PauseHolder {
    fn name(&self) -> &'static str {
        "pause-holder"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        let Some((mut a, proc)) = next_target(ctx, self.name()).await? else {
            return Ok(None);
        };
        let ev = a.ev.clone();
        let lease = ctx.lease_of(&ev);
        let invoked_at = ctx.clock.now();
        let what = format!("worker {}", ev.slot);
        let undo = ctx.pause_group(self.name(), &what, proc).await?;
        let answered = a.answered().await;
        Ok(Some(Fault {
            invoked_at,
            undo: vec![undo],
            hold: ctx.spec.duration(lease),
            target: aimed_target(&a, Some(proc.pid), lease.as_millis()),
            state: json!({
                "slot": ev.slot,
                "incarnation": ev.incarnation,
                "process": ev.state.process,
                "holding_ns": ev.state.time,
                "pid": proc.pid,
                "start_time": proc.start_time,
                "answered_before": answered,
            }),
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        let slot = fault.state["slot"].as_u64().unwrap_or(0) as usize;
        let view = ctx.workers.view(slot);
        let stopped = view.proc.is_some_and(|p| {
            p.pid as i64 == fault.state["pid"].as_i64().unwrap_or(-1) && p.is_stopped()
        });
        let still_holding = match fault.state["answered_before"].as_bool() {
            // A waiter or renewer: its request unanswered at the strike.
            Some(answered) => !answered,
            None => view.last.as_ref().is_some_and(|s| {
                s.phase == Phase::Holding
                    && Some(s.time) == fault.state["holding_ns"].as_u64()
                    && Some(s.process) == fault.state["process"].as_i64()
            }),
        };
        let paused_ms = ctx.clock.now().saturating_sub(fault.invoked_at) / 1_000_000;
        ctx.revert(self.name(), &fault.undo).await?;
        // The run's end cuts a pause short: it was not the pause the fault
        // asked for (past the lease), so it is not judged.
        if (paused_ms as u128) < fault.hold.as_millis() {
            return Ok(json!({ "cut_short": true, "paused_ms": paused_ms }));
        }
        let mut out = json!({
            "landed_inside": stopped && still_holding,
            "paused_ms": paused_ms,
        });
        if let Some(answered) = fault.state["answered_before"].as_bool() {
            out["answered_before"] = json!(answered);
        }
        Ok(out)
    }
}

/// SIGKILL the holder; respawn its worker after the fault's length.
pub struct KillHolder;

#[async_trait]
impl Nemesis for KillHolder {
    fn name(&self) -> &'static str {
        "kill-holder"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        let Some((mut a, proc)) = next_target(ctx, self.name()).await? else {
            return Ok(None);
        };
        let ev = a.ev.clone();
        let lease = ctx.lease_of(&ev);
        let invoked_at = ctx.clock.now();
        ctx.workers
            .kill(ev.slot)
            .await
            .map_err(|e| NemesisError::new(self.name(), e))?;
        let answered = a.answered().await;
        Ok(Some(Fault {
            invoked_at,
            undo: Vec::new(),
            hold: ctx.spec.duration(lease),
            target: aimed_target(&a, Some(proc.pid), lease.as_millis()),
            state: json!({ "slot": ev.slot, "answered_before": answered }),
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        // A waiter or renewer whose request was answered first: missed.
        let missed = fault.state["answered_before"].as_bool();
        let mut out = match missed {
            Some(answered) => json!({ "answered_before": answered, "landed_inside": !answered }),
            None => json!({}),
        };
        if ctx.is_stopping() {
            out["respawned"] = json!(false);
            return Ok(out);
        }
        let slot = fault.state["slot"].as_u64().unwrap_or(0) as usize;
        ctx.workers
            .respawn(slot)
            .await
            .map_err(|e| NemesisError::new(self.name(), e))?;
        out["respawned"] = json!(true);
        Ok(out)
    }
}
