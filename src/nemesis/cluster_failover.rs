//! Redis Cluster failovers on the replica of the primary that serves the
//! lock key's slot, each named for how it is done:
//!
//! - `failover` (forced, [`How::Force`]): hold the replica's replication
//!   stream (`CLIENT PAUSE WRITE`, undo `CLIENT UNPAUSE`) until a worker is
//!   granted the lock and the replica does not have the grant, then
//!   `CLUSTER FAILOVER FORCE` on it: it is elected without waiting for its
//!   primary's offset. Once it reports itself primary it is unpaused: the
//!   held writes were dropped with the link, so the new primary never saw
//!   the grant.
//! - `failover-takeover` ([`How::Takeover`]): the same with `CLUSTER
//!   FAILOVER TAKEOVER` (no election: the replica bumps its epoch alone).
//! - `failover-coordinated` ([`How::Coordinated`]): right after a grant,
//!   plain `CLUSTER FAILOVER`: the primary pauses its clients and the
//!   replica takes over only once its offset matches, so no write is lost.
//!
//! The forced two make the loss happen (the pause is lockjaw's, not the
//! server's); their violation rates are not natural frequencies. In each,
//! the old primary learns of the newer epoch and rejoins as a replica of
//! the new one by itself (it resyncs, dropping what the new primary lacks);
//! the stop waits until it streams, caught up (`rejoined` in the history).
//! The cluster keeps the swapped roles.

use super::failover::{grant_missing_replicas, HEAL_WAIT};
use super::node::leader;
use super::{Ctx, Fault, Nemesis, NemesisError};
use crate::auth::Auth;
use crate::client::redis_slots as rs;
use crate::cluster::redis_cluster::in_sync;
use crate::workload::step::Phase;
use async_trait::async_trait;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const T: Duration = Duration::from_secs(2);
/// How long a promotion may take (a coordinated one times out after 5 s).
const PROMOTE_WAIT: Duration = Duration::from_secs(10);

/// How the replica takes over.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum How {
    Force,
    Takeover,
    Coordinated,
}

impl How {
    /// The `CLUSTER FAILOVER` option.
    fn option(self) -> &'static str {
        match self {
            How::Force => "FORCE",
            How::Takeover => "TAKEOVER",
            How::Coordinated => "",
        }
    }

    fn fault(self) -> &'static str {
        match self {
            How::Force => "failover",
            How::Takeover => "failover-takeover",
            How::Coordinated => "failover-coordinated",
        }
    }
}

/// A failover of the key's primary to its replica.
pub struct ClusterFailover(pub How);

/// The key's primary and one replica of it, (name, address) each, once
/// the replica streams from it caught up; `None` when the run ends first.
async fn pair(ctx: &mut Ctx, fault: &str) -> Result<Option<[(String, String); 2]>, NemesisError> {
    let err = |m: String| NemesisError::new(fault, m);
    let deadline = Instant::now() + HEAL_WAIT;
    loop {
        let primary = leader(ctx, fault).await?;
        let cluster = ctx.cluster.clone();
        let p = cluster.node(&primary).map_err(|e| err(e.to_string()))?;
        let auth = &cluster.auth;
        let lines = rs::nodes_as(&p.addr, auth, T).await.unwrap_or_default();
        let me = lines.iter().find(|l| l.myself).map(|l| l.id.clone());
        let replica = lines
            .iter()
            .filter(|l| !l.failing && me.is_some() && l.master == me)
            .find_map(|l| cluster.servers().find(|n| n.addr == l.addr));
        if let Some(r) = replica {
            if in_sync(&r.addr, auth, T).await.is_ok() {
                return Ok(Some([
                    (p.name.clone(), p.addr.clone()),
                    (r.name.clone(), r.addr.clone()),
                ]));
            }
        }
        if Instant::now() >= deadline {
            return Err(err(format!(
                "primary {primary} has no replica streaming from it, caught up, after {HEAL_WAIT:?} (the cluster has not healed from an earlier fault)"
            )));
        }
        if !ctx.sleep(Duration::from_millis(200)).await {
            return Ok(None);
        }
    }
}

async fn role(addr: &str, auth: &Auth) -> Option<String> {
    rs::replication_as(addr, auth, T)
        .await
        .ok()?
        .get("role")
        .cloned()
}

/// Wait until the node at `addr` says it is a primary: the time it took.
async fn promoted(addr: &str, auth: &Auth) -> Option<u64> {
    let began = Instant::now();
    while began.elapsed() < PROMOTE_WAIT {
        if role(addr, auth).await.as_deref() == Some("master") {
            return Some(began.elapsed().as_millis() as u64);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

#[async_trait]
impl Nemesis for ClusterFailover {
    fn name(&self) -> &'static str {
        self.0.fault()
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        if ctx.is_stopping() {
            return Ok(None);
        }
        let fault = self.name();
        let Some([(primary, _), (replica, r_addr)]) = pair(ctx, fault).await? else {
            return Ok(None);
        };
        let invoked_at = ctx.clock.now();
        let (ev, paused, attempts) = if self.0 == How::Coordinated {
            match ctx.wait_for_phase(Phase::Granted).await {
                Some(ev) => (ev, Vec::new(), None),
                None => return Ok(None),
            }
        } else {
            let addrs = [r_addr.clone()];
            match grant_missing_replicas(ctx, fault, &addrs, true).await? {
                Some(m) => (m.ev, m.paused, Some(m.attempts)),
                None => return Ok(None),
            }
        };
        let sent_at = ctx.clock.now();
        let auth = ctx.cluster.auth.clone();
        let reply = rs::failover_as(&r_addr, self.0.option(), &auth, T).await;
        let promoted_ms = match &reply {
            Ok(_) => promoted(&r_addr, &auth).await,
            Err(_) => None,
        };
        // Only now may the replica apply what it held: nothing, as a
        // primary (the link that carried it is gone).
        ctx.revert(fault, &paused).await?;
        let reply = reply.map_err(|e| NemesisError::new(fault, e))?;
        let lease = ctx.lease_of(&ev);
        Ok(Some(Fault {
            invoked_at,
            undo: Vec::new(),
            hold: ctx.spec.duration(lease),
            target: json!({
                "primary": primary,
                "replica": replica,
                "command": format!("CLUSTER FAILOVER {}", self.0.option()).trim_end(),
                "forced": self.0 != How::Coordinated,
                "reply": reply,
                "promoted_ms": promoted_ms,
                "holder": ev.holder_json(),
                "failover_ns": sent_at,
                "attempts": attempts,
                "lease_ms": lease.as_millis() as u64,
            }),
            state: json!({ "primary": primary }),
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        let old = fault.state["primary"].as_str().unwrap_or_default();
        let cluster = ctx.cluster.clone();
        let addr = cluster
            .node(old)
            .map_err(|e| NemesisError::new(self.name(), e.to_string()))?
            .addr
            .clone();
        let began = Instant::now();
        let mut why = String::new();
        while began.elapsed() < HEAL_WAIT && !ctx.is_stopping() {
            why = match (
                role(&addr, &cluster.auth).await,
                in_sync(&addr, &cluster.auth, T).await,
            ) {
                (Some(r), Ok(())) if r == "slave" => {
                    return Ok(json!({
                        "old_primary": old,
                        "rejoined": "replica",
                        "rejoin_ms": began.elapsed().as_millis() as u64,
                    }))
                }
                (r, s) => format!("role {r:?}, {s:?}"),
            };
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        // Not back in time, or the run is ending (the cluster goes anyway).
        Ok(json!({
            "old_primary": old,
            "rejoined": null,
            "run_ending": ctx.is_stopping(),
            "last": why,
        }))
    }
}
