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

use super::{Ctx, Fault, Nemesis, NemesisError, WorkerEvent};
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

/// SIGSTOP the holder past its lease.
pub struct PauseHolder;

#[async_trait]
impl Nemesis for PauseHolder {
    fn name(&self) -> &'static str {
        "pause-holder"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        let Some((ev, proc)) = next_holder(ctx).await else {
            return Ok(None);
        };
        let lease = ctx.lease_of(&ev);
        let invoked_at = ctx.clock.now();
        let what = format!("worker {}", ev.slot);
        let undo = ctx.pause_group(self.name(), &what, proc).await?;
        Ok(Some(Fault {
            invoked_at,
            undo: vec![undo],
            hold: ctx.spec.duration(lease),
            target: target(&ev, Some(proc.pid), lease.as_millis()),
            state: json!({
                "slot": ev.slot,
                "incarnation": ev.incarnation,
                "process": ev.state.process,
                "holding_ns": ev.state.time,
                "pid": proc.pid,
                "start_time": proc.start_time,
            }),
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        let slot = fault.state["slot"].as_u64().unwrap_or(0) as usize;
        let view = ctx.workers.view(slot);
        let stopped = view.proc.is_some_and(|p| {
            p.pid as i64 == fault.state["pid"].as_i64().unwrap_or(-1) && p.is_stopped()
        });
        let still_holding = view.last.as_ref().is_some_and(|s| {
            s.phase == Phase::Holding
                && Some(s.time) == fault.state["holding_ns"].as_u64()
                && Some(s.process) == fault.state["process"].as_i64()
        });
        let paused_ms = ctx.clock.now().saturating_sub(fault.invoked_at) / 1_000_000;
        ctx.revert(self.name(), &fault.undo).await?;
        // The run's end cuts a pause short: it was not the pause the fault
        // asked for (past the lease), so it is not judged.
        if (paused_ms as u128) < fault.hold.as_millis() {
            return Ok(json!({ "cut_short": true, "paused_ms": paused_ms }));
        }
        Ok(json!({
            "landed_inside": stopped && still_holding,
            "paused_ms": paused_ms,
        }))
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
        let Some((ev, proc)) = next_holder(ctx).await else {
            return Ok(None);
        };
        let lease = ctx.lease_of(&ev);
        let invoked_at = ctx.clock.now();
        ctx.workers
            .kill(ev.slot)
            .await
            .map_err(|e| NemesisError::new(self.name(), e))?;
        Ok(Some(Fault {
            invoked_at,
            undo: Vec::new(),
            hold: ctx.spec.duration(lease),
            target: target(&ev, Some(proc.pid), lease.as_millis()),
            state: json!({ "slot": ev.slot }),
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        if ctx.is_stopping() {
            return Ok(json!({ "respawned": false }));
        }
        let slot = fault.state["slot"].as_u64().unwrap_or(0) as usize;
        ctx.workers
            .respawn(slot)
            .await
            .map_err(|e| NemesisError::new(self.name(), e))?;
        Ok(json!({ "respawned": true }))
    }
}
