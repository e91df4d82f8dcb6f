//! Which worker a fault aimed at one worker strikes, by its `target`
//! (the registry says which faults take which): the process faults
//! (`pause-holder`, `kill-holder`), the client clock faults and
//! `strike-command`.
//!
//! - `holder`: a worker that reported `holding` (inside its critical
//!   section), a fresh report.
//! - `waiter`: a worker blocked in acquire. The workers announce their
//!   next acquire ([`Ctx::next_moment`]); the first to announce is let go
//!   at once (unarmed: nothing waits for it) and is the waiter if its
//!   acquire has no answer [`WAITER_SETTLE`] later. An acquire answered
//!   sooner was not blocked, and the next announced one is tried. On the
//!   systems whose acquire tries once (the Redis systems) an acquire is
//!   blocked only while something slows it (a held request, latency).
//! - `renewer`: the worker whose lease renewal is in flight: the next
//!   renewal a worker announces (lockjaw's own, workload `renew = true`),
//!   let go at once and struck as it is sent. A library that renews by
//!   itself announces nothing: strike its renewals by their command.
//!
//! For a waiter or a renewer, [`Aimed::answered`] says after the strike
//! whether the request was answered before it (then the fault missed it).

use super::ctx::Announced;
use super::scope::Scope;
use super::{Ctx, NemesisError, Target, WorkerEvent};
use crate::workload::step::{Moment, Phase};
use crate::workload::Kind;
use serde_json::{json, Value};
use std::time::Duration;

/// How long an announced acquire must go unanswered to count as blocked.
pub const WAITER_SETTLE: Duration = Duration::from_millis(5);

/// How long an answer sent before a strike may take to reach the
/// controller.
const ANSWER_LAG: Duration = Duration::from_millis(5);

/// The worker a fault is aimed at.
pub struct Aimed {
    /// Its slot, incarnation and the state it reported (for a waiter or a
    /// renewer: its announcement's).
    pub ev: WorkerEvent,
    pub target: Target,
    announced: Option<Announced>,
}

impl Aimed {
    /// A holder's report.
    pub fn holder(ev: WorkerEvent) -> Aimed {
        Aimed {
            ev,
            target: Target::Holder,
            announced: None,
        }
    }

    /// For a waiter or a renewer: whether its announced request was
    /// answered before now (an answer the worker sent before a strike
    /// has [`ANSWER_LAG`] to arrive). `None` for a holder.
    pub async fn answered(&mut self) -> Option<bool> {
        let a = self.announced.as_mut()?;
        Some(a.outcome(ANSWER_LAG).await.is_some())
    }

    /// The worker for the history: the target, slot, process and what
    /// its report says.
    pub fn json(&self) -> Value {
        let s = &self.ev.state;
        let at = match self.target {
            Target::Waiter => "acquire_ns",
            Target::Renewer => "renew_ns",
            _ => "holding_ns",
        };
        json!({
            "target": self.target.name(),
            "slot": self.ev.slot,
            "process": s.process,
            "owner": s.owner,
            at: s.time,
        })
    }
}

/// True for the targets that name one worker.
pub fn is_worker_target(t: Target) -> bool {
    matches!(t, Target::Holder | Target::Waiter | Target::Renewer)
}

/// Wait for the worker `ctx.spec.target` names (see the module comment);
/// `None` when the run ends first.
pub async fn next_worker(ctx: &mut Ctx, fault: &str) -> Result<Option<Aimed>, NemesisError> {
    match ctx.spec.target {
        Target::Waiter => announced(ctx, fault, Moment::Acquire, Some(WAITER_SETTLE)).await,
        Target::Renewer => announced(ctx, fault, Moment::Renew, None).await,
        _ => Ok(ctx.wait_for_phase(Phase::Holding).await.map(Aimed::holder)),
    }
}

/// The next worker to announce `moment`, let go at once; with `settle`,
/// only one whose request is still unanswered that long after.
async fn announced(
    ctx: &mut Ctx,
    fault: &str,
    moment: Moment,
    settle: Option<Duration>,
) -> Result<Option<Aimed>, NemesisError> {
    let target = ctx.spec.target;
    loop {
        let slots: Vec<usize> = (0..ctx.workers.slots()).collect();
        let Some(mut a) = ctx.next_moment(fault, &slots, moment).await? else {
            return Ok(None);
        };
        ctx.go(&mut a, false).await;
        if let Some(d) = settle {
            if a.outcome(d).await.is_some() {
                continue;
            }
        }
        let ev = WorkerEvent {
            slot: a.slot,
            incarnation: a.incarnation,
            state: a.state.clone(),
        };
        return Ok(Some(Aimed {
            ev,
            target,
            announced: Some(a),
        }));
    }
}

/// Where a waiter or a renewer can be found: the workers announce their
/// lock requests (the lock stepper's workload kinds) to a lock service.
/// Other targets: no condition here.
pub fn support(c: &Scope) -> Result<(), String> {
    if !matches!(c.nemesis.target, Target::Waiter | Target::Renewer) {
        return Ok(());
    }
    c.facts().lock.check()?;
    if !c.workload.renews() {
        let kinds: Vec<&str> = Kind::ALL
            .iter()
            .filter(|k| k.renews())
            .map(|k| k.name())
            .collect();
        return Err(format!(
            "target {} is found by the lock requests the workers announce, and the {} workload announces none (use {})",
            c.nemesis.target.name(),
            c.workload.name(),
            kinds.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
#[path = "aim/tests.rs"]
mod tests;
