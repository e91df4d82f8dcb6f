//! Faults timed by the lock protocol: `delay-grant`, `delay-release`,
//! `renew-race`, `drop-release`.
//!
//! Each asks the workers to announce their next request of one kind
//! ([`Ctx::next_moment`]: acquire, renew or release); the first worker to
//! announce waits while a one-shot toxic of the embedded Toxiproxy (a
//! lockjaw extension: `hold_next`, `reset_next`, see `docs/toxiproxy.md`)
//! is added to each of its own proxies to the lock service, then sends the
//! request, which meets the toxic. A proxy holds a TCP stream, not a
//! message: what the client sends or receives behind the held chunk on
//! that connection waits with it (`docs/faults.md`, "Faults timed by the
//! protocol", says what that means per system).
//!
//! - `delay-grant`: once a holder is releasing, the next acquire announced
//!   by another worker waits (at most half of [`ARM_WAIT`]) until that
//!   release is done, then gets its reply held downstream for the fault's
//!   length (default half a lease): a granted acquire comes back with half
//!   its lease gone.
//! - `delay-release`: the next release is held upstream until another
//!   worker has been granted the lock (or the fault's length, default 3
//!   leases, ran out), then delivered: a late unlock that must not remove
//!   the new holder's lock.
//! - `renew-race`: the same for the next renewal: delivered after the
//!   lease expired and another worker holds the lock; it must not revive
//!   the expired lease.
//! - `drop-release`: the connection carrying the next release is reset,
//!   before the release is forwarded (`reset = "before-forward"`, the
//!   default: not applied) or after it was and before the reply
//!   (`"after-forward"`: applied); the client cannot tell which (`info`).
//!
//! Every injection's `stop` records `fired`, `struck` (the request the
//! toxic struck, where the link is framed: a Redis command, a ZooKeeper
//! op; `struck_all` when several of the worker's proxies fired) and
//! `landed_inside`: a toxic struck the announced request and (for the held
//! ones) what the fault waits for happened while it was held. A client
//! library also sends requests of its own (pings, session keep-alives, a
//! connection's handshake: [`HOUSEKEEPING`]); pings pass over one-shots on
//! framed links, and a shot that struck only housekeeping or another kind
//! of request (a ZooKeeper `getData` for a release) is `struck_other` and
//! did not land. `armed` is false when the worker had given up waiting for
//! the toxic (it is then taken back unjudged).

use super::ctx::Announced;
use super::spec::ResetAt;
use super::{Ctx, Fault, Nemesis, NemesisError, WorkerEvent};
use crate::service::System;
use crate::toxiproxy::{Stream, Toxic, ToxicKind};
use crate::workload::moment::ARM_WAIT;
use crate::workload::step::{Moment, Phase};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::broadcast;

/// What the fault does to the announced request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Strike {
    /// Hold the reply downstream for the fault's length.
    HoldReply,
    /// Hold the request upstream until another worker is granted.
    HoldUntilRegranted,
    /// Reset the connection (before or after forwarding the request).
    Reset(ResetAt),
}

/// One of the four protocol-timed faults.
pub struct Timed {
    name: &'static str,
    moment: Moment,
    strike: Strike,
    events: Option<broadcast::Receiver<WorkerEvent>>,
    armed: Option<Armed>,
}

/// The announced request and the toxics armed for it.
struct Armed {
    /// Who announced the request, when, for which grant.
    ann: Announced,
    /// (proxy, toxic name).
    toxics: Vec<(String, String)>,
}

impl Armed {
    /// How the announced request ended, as recorded with the injection.
    async fn outcome(&mut self, limit: Duration) -> Value {
        match self.ann.outcome(limit).await {
            Some((kind, error)) => json!({ "type": kind, "error": error }),
            None => Value::Null,
        }
    }
}

impl Timed {
    fn new(name: &'static str, moment: Moment, strike: Strike) -> Timed {
        Timed {
            name,
            moment,
            strike,
            events: None,
            armed: None,
        }
    }

    pub fn delay_grant() -> Timed {
        Timed::new("delay-grant", Moment::Acquire, Strike::HoldReply)
    }

    pub fn delay_release() -> Timed {
        Timed::new("delay-release", Moment::Release, Strike::HoldUntilRegranted)
    }

    pub fn renew_race() -> Timed {
        Timed::new("renew-race", Moment::Renew, Strike::HoldUntilRegranted)
    }

    pub fn drop_release(at: ResetAt) -> Timed {
        Timed::new("drop-release", Moment::Release, Strike::Reset(at))
    }

    fn toxic(&self, hold: Duration) -> Toxic {
        match self.strike {
            Strike::HoldReply => Toxic::new(
                "",
                Stream::Downstream,
                ToxicKind::HoldNext {
                    hold: hold.as_millis() as i64,
                },
            ),
            Strike::HoldUntilRegranted => {
                Toxic::new("", Stream::Upstream, ToxicKind::HoldNext { hold: 0 })
            }
            Strike::Reset(ResetAt::BeforeForward) => {
                Toxic::new("", Stream::Upstream, ToxicKind::ResetNext)
            }
            Strike::Reset(ResetAt::AfterForward) => {
                Toxic::new("", Stream::Downstream, ToxicKind::ResetNext)
            }
        }
    }

    /// Whether any of the armed toxics struck.
    async fn fired(&self, ctx: &Ctx, a: &Armed) -> bool {
        for (proxy, name) in &a.toxics {
            if ctx.toxic_fired(proxy, name).await {
                return true;
            }
        }
        false
    }

    /// Record what the toxics struck (`struck`; `struck_other` when none
    /// struck the announced kind of request, then false). Each of the
    /// worker's proxies has its toxic: one may strike the release while
    /// another strikes something else.
    async fn fits(&self, ctx: &Ctx, a: &Armed, out: &mut Value) -> bool {
        let mut all = Vec::new();
        for (proxy, name) in &a.toxics {
            if ctx.toxic_fired(proxy, name).await {
                all.push(ctx.toxic_struck(proxy, name).await);
            }
        }
        let fitting = all
            .iter()
            .find(|s| struck_fits(ctx.system, self.moment, s.as_deref()));
        out["struck"] = json!(fitting.or(all.first()).cloned().flatten());
        if all.len() > 1 {
            out["struck_all"] = json!(all);
        }
        if fitting.is_none() {
            out["struck_other"] = json!(true);
        }
        fitting.is_some()
    }

    /// Wait until one of the toxics struck, at most `limit`.
    async fn wait_fired(&self, ctx: &mut Ctx, a: &Armed, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if self.fired(ctx, a).await {
                return true;
            }
            if tokio::time::Instant::now() >= deadline || !ctx.sleep(ms(2)).await {
                return self.fired(ctx, a).await;
            }
        }
    }

    /// Wait until a worker other than the announcing one reports a grant
    /// after the announcement, at most `limit`; its slot and owner.
    async fn wait_regrant(&mut self, ctx: &mut Ctx, a: &Armed, limit: Duration) -> Option<Value> {
        let rx = self.events.as_mut()?;
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if ctx.is_stopping() {
                return None;
            }
            let ev = match tokio::time::timeout_at(deadline, rx.recv()).await {
                Err(_) => return None,
                Ok(Err(broadcast::error::RecvError::Lagged(_))) => continue,
                Ok(Err(_)) => return None,
                Ok(Ok(ev)) => ev,
            };
            let other = ev.slot != a.ann.slot || ev.incarnation != a.ann.incarnation;
            if other && ev.state.phase == Phase::Granted && ev.state.time > a.ann.state.time {
                return Some(json!({
                    "slot": ev.slot,
                    "process": ev.state.process,
                    "owner": ev.state.owner,
                    "granted_ns": ev.state.time,
                }));
            }
        }
    }

    /// Whether the announcing worker was granted after it announced (the
    /// held reply was a grant).
    fn granted_after(&mut self, a: &Armed) -> Option<u64> {
        let rx = self.events.as_mut()?;
        let mut at = None;
        loop {
            match rx.try_recv() {
                Ok(ev) => {
                    if ev.slot == a.ann.slot
                        && ev.incarnation == a.ann.incarnation
                        && ev.state.phase == Phase::Granted
                        && ev.state.time > a.ann.state.time
                        && at.is_none()
                    {
                        at = Some(ev.state.time);
                    }
                }
                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(_) => return at,
            }
        }
    }

    /// Which worker to watch: for a delayed grant, every worker once a
    /// holder is releasing (the lock is about to be free, so the next
    /// acquire is likely granted); otherwise every worker at once.
    async fn announce(&mut self, ctx: &mut Ctx) -> Result<Option<Announced>, NemesisError> {
        let slots: Vec<usize> = (0..ctx.workers.slots()).collect();
        if self.moment == Moment::Acquire {
            let Some(releasing) = ctx.wait_for_phase(Phase::Releasing).await else {
                return Ok(None);
            };
            let others: Vec<usize> = slots
                .iter()
                .copied()
                .filter(|s| *s != releasing.slot || slots.len() == 1)
                .collect();
            let mut rx = ctx.workers.subscribe();
            let ann = ctx.next_moment(self.name, &others, self.moment).await?;
            if ann.is_some() && slots.len() > 1 {
                released(&mut rx, &releasing, ARM_WAIT / 2).await;
            }
            return Ok(ann);
        }
        ctx.next_moment(self.name, &slots, self.moment).await
    }
}

/// Wait (at most `limit`) until the worker of `releasing` reports its
/// release done (`idle`): an acquire announced while a holder releases
/// waits for it, so it meets a free lock (a library's release can take
/// longer than the announcement: several nodes, a thread pool).
async fn released(
    rx: &mut broadcast::Receiver<WorkerEvent>,
    releasing: &WorkerEvent,
    limit: Duration,
) {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Err(_) | Ok(Err(broadcast::error::RecvError::Closed)) => return,
            Ok(Err(broadcast::error::RecvError::Lagged(_))) => {}
            Ok(Ok(ev)) => {
                if ev.slot == releasing.slot
                    && ev.incarnation == releasing.incarnation
                    && ev.state.phase == Phase::Idle
                {
                    return;
                }
            }
        }
    }
}

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// Requests a client library sends on its own rather than for lockjaw's
/// acquire, renew or release: Redis commands of a connection's handshake
/// and health checks, ZooKeeper session traffic. Compared ignoring case.
pub const HOUSEKEEPING: &[&str] = &[
    "PING",
    "HELLO",
    "AUTH",
    "CLIENT",
    "SELECT",
    "READONLY",
    "ECHO",
    "COMMAND",
    "QUIT",
    "setWatches",
    "setWatches2",
    "connect",
    "whoAmI",
];

/// Whether a struck request can be the announced one. Unknown (an
/// unframed link: etcd, TLS) is taken as it; a library's own housekeeping
/// ([`HOUSEKEEPING`]: pings, keep-alives, a connection's handshake) never
/// is; on ZooKeeper a release is a `delete` (or a `multi`), a renewal is
/// never a request of its own (a session lives by its pings).
pub(crate) fn struck_fits(system: System, moment: Moment, struck: Option<&str>) -> bool {
    let Some(s) = struck else { return true };
    if HOUSEKEEPING.iter().any(|h| h.eq_ignore_ascii_case(s)) {
        return false;
    }
    match (moment, system.facts().wire.release_ops()) {
        (Moment::Release, Some(ops)) => ops.contains(&s),
        _ => true,
    }
}

#[async_trait]
impl Nemesis for Timed {
    fn name(&self) -> &'static str {
        self.name
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        self.events = Some(ctx.workers.subscribe());
        let Some(mut ann) = self.announce(ctx).await? else {
            return Ok(None);
        };
        let lease = ann
            .state
            .lease_ms
            .map(Duration::from_millis)
            .unwrap_or(ctx.ttl)
            .max(ctx.ttl);
        let length = ctx.spec.duration(lease);
        let proxies = ctx.links.node_proxies(ann.slot);
        let invoked_at = ctx.clock.now();
        let mut undo = Vec::new();
        let mut toxics = Vec::new();
        for p in &proxies {
            let r = ctx.add_named_toxic(self.name, p, self.toxic(length)).await;
            match r {
                Ok((id, name)) => {
                    undo.push(id);
                    toxics.push((p.clone(), name));
                }
                Err(e) => {
                    ctx.go(&mut ann, false).await;
                    let _ = ctx.revert(self.name, &undo).await;
                    return Err(e);
                }
            }
        }
        let in_time = ctx.go(&mut ann, true).await;
        let mut target = json!({
            "slot": ann.slot,
            "moment": self.moment.as_str(),
            "process": ann.state.process,
            "owner": ann.state.owner,
            "fence": ann.state.fence,
            "lease_ms": lease.as_millis() as u64,
            "announced_ns": ann.state.time,
            "proxies": proxies,
        });
        match self.strike {
            Strike::HoldReply => target["hold_ms"] = json!(length.as_millis() as u64),
            Strike::HoldUntilRegranted => target["max_hold_ms"] = json!(length.as_millis() as u64),
            Strike::Reset(at) => target["reset"] = json!(at.name()),
        }
        self.armed = Some(Armed { ann, toxics });
        let hold = if !in_time {
            Duration::ZERO
        } else {
            match self.strike {
                // Removing the toxic delivers a held reply at once: keep it
                // until the reply went out by itself.
                Strike::HoldReply => length + ms(50),
                // `stop` waits for the regrant, up to the fault's length.
                Strike::HoldUntilRegranted | Strike::Reset(_) => Duration::ZERO,
            }
        };
        Ok(Some(Fault {
            invoked_at,
            undo,
            hold,
            target,
            state: json!({ "armed": in_time, "length_ms": length.as_millis() as u64 }),
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        let armed_in_time = fault.state["armed"].as_bool().unwrap_or(false);
        let length = ms(fault.state["length_ms"].as_u64().unwrap_or(0));
        let Some(mut a) = self.armed.take() else {
            ctx.revert(self.name, &fault.undo).await?;
            return Ok(json!({ "armed": false }));
        };
        if !armed_in_time {
            ctx.revert(self.name, &fault.undo).await?;
            return Ok(json!({ "armed": false, "landed_inside": false }));
        }
        let mut out = json!({ "armed": true });
        let landed = match self.strike {
            Strike::HoldReply => {
                let fired = self.fired(ctx, &a).await;
                let hit = fired && self.fits(ctx, &a, &mut out).await;
                ctx.revert(self.name, &fault.undo).await?;
                let outcome = a.outcome(ctx.ttl + ms(1000)).await;
                let granted = self.granted_after(&a);
                out["fired"] = json!(fired);
                if let Some(t) = granted {
                    out["granted_after_ms"] = json!(t.saturating_sub(a.ann.state.time) / 1_000_000);
                }
                // Landed: the held reply belonged to an acquire the lock
                // was free for (granted late, or refused by a client that
                // saw how late it was), not one that found it held.
                let held = outcome["type"] == "fail" && outcome["error"] == "held";
                out["outcome"] = outcome;
                hit && !held
            }
            Strike::HoldUntilRegranted => {
                let started = tokio::time::Instant::now();
                let fired = self.wait_fired(ctx, &a, ms(1000)).await;
                let hit = fired && self.fits(ctx, &a, &mut out).await;
                let regrant = if hit {
                    let left = length.saturating_sub(started.elapsed());
                    self.wait_regrant(ctx, &a, left).await
                } else {
                    None
                };
                let held = started.elapsed();
                ctx.revert(self.name, &fault.undo).await?;
                out["outcome"] = a.outcome(ctx.ttl + ms(1000)).await;
                out["fired"] = json!(fired);
                out["held_ms"] = json!(held.as_millis() as u64);
                if ctx.is_stopping() && regrant.is_none() && fired {
                    out["cut_short"] = json!(true);
                }
                out["regranted"] = regrant.clone().unwrap_or(Value::Null);
                hit && regrant.is_some()
            }
            Strike::Reset(_) => {
                let fired = self.wait_fired(ctx, &a, ms(1000)).await;
                let hit = fired && self.fits(ctx, &a, &mut out).await;
                ctx.revert(self.name, &fault.undo).await?;
                out["outcome"] = a.outcome(ctx.ttl + ms(1000)).await;
                out["fired"] = json!(fired);
                hit
            }
        };
        out["landed_inside"] = json!(landed);
        out["process"] = json!(a.ann.state.process);
        out["owner"] = json!(a.ann.state.owner);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ZooKeeper flake: a `reset_next` that struck a ping of the
    /// client's session counted as a landed lost release.
    #[test]
    fn a_struck_ping_or_another_op_is_not_the_announced_release() {
        let zk = System::Zookeeper;
        assert!(struck_fits(zk, Moment::Release, Some("delete")));
        assert!(!struck_fits(zk, Moment::Release, Some("ping")));
        assert!(!struck_fits(zk, Moment::Release, Some("getData")));
        assert!(struck_fits(zk, Moment::Acquire, Some("create")));
        assert!(!struck_fits(System::Redis, Moment::Release, Some("PING")));
        assert!(struck_fits(System::Redis, Moment::Release, Some("EVALSHA")));
        // A library's own handshake is not the announced acquire.
        assert!(!struck_fits(System::Redis, Moment::Acquire, Some("client")));
        assert!(!struck_fits(zk, Moment::Acquire, Some("setWatches")));
        assert!(
            struck_fits(System::Etcd, Moment::Release, None),
            "unframed: by time"
        );
    }
}
