//! `kill-service`: take the whole lock service away for a while, then
//! bring it back with its data.
//!
//! It waits until a worker holds the lock (workloads that take one), so
//! the outage begins inside a critical section, then SIGKILLs enough data
//! nodes that no client can be served: every node, or, where the nodes
//! form a quorum among themselves (peers that elect a leader with no
//! outside monitor: etcd, ZooKeeper), a majority. They stay down for the
//! fault's length (default 2 leases) and are started again on their data
//! directories, as `kill-node` does ([`super::node`]), and the fault ends
//! when they answer.
//!
//! On attached servers (`--attach`) the kill and the restart are
//! `kill-node`'s: an `AttachedDown` entry before each kill, the start
//! command at the fault's end (never without `--allow-majority`).
//!
//! Undo: as for `kill-node`, the cluster's own undo entry stops whatever
//! runs (restarted nodes included, which the cluster's state file
//! records) if lockjaw dies mid-fault; `stop` is the restart, skipped when
//! the run is ending (teardown stops the cluster anyway).

use super::node::{how_many, kill_all, kill_attached, started};
use super::{Ctx, Fault, Nemesis, NemesisError, Target};
use crate::cluster::Mode;
use crate::workload::step::Phase;
use async_trait::async_trait;
use serde_json::{json, Value};

/// SIGKILL the lock service (every node, or a quorum's majority);
/// restart it with its data at stop.
pub struct KillService;

/// Whether the system's nodes keep the service only while a majority of
/// them is up (peers electing a leader among themselves, with no monitor
/// that promotes a replica instead).
pub fn quorum(ctx: &Ctx) -> bool {
    let f = ctx.system.facts();
    f.partitionable_peers.is_yes() && !f.failover.is_yes()
}

#[async_trait]
impl Nemesis for KillService {
    fn name(&self) -> &'static str {
        "kill-service"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        let fault = self.name();
        let holder = match ctx.workload.map_or(true, |k| k.uses_lock()) {
            true => match ctx.wait_for_phase(Phase::Holding).await {
                Some(ev) => Some(ev),
                None => return Ok(None),
            },
            false => None,
        };
        if ctx.is_stopping() {
            return Ok(None);
        }
        let cluster = ctx.cluster.clone();
        let mut names: Vec<String> = cluster.servers().map(|n| n.name.clone()).collect();
        let quorum = quorum(ctx);
        if quorum {
            let k = how_many(Target::Majority, names.len()).unwrap_or(names.len());
            names.truncate(k);
        }
        super::attached::guard(ctx, fault, &names)?;
        for name in &names {
            started(&cluster, fault, name)?;
        }
        let hold = ctx.spec.duration(ctx.ttl);
        ctx.deadman.hold = Some(hold);
        let invoked_at = ctx.clock.now();
        let mut undo = Vec::new();
        if cluster.mode == Mode::Adopted {
            // Each `AttachedDown` entry first; kill-node's stop restarts them.
            undo = kill_attached(ctx, fault, &names).await?;
        } else {
            kill_all(&cluster, fault, &names).await?;
        }
        let held_by = holder.map(|ev| {
            json!({
                "slot": ev.slot,
                "process": ev.state.process,
                "fence": ev.state.fence,
                "holding_ns": ev.state.time,
            })
        });
        Ok(Some(Fault {
            invoked_at,
            undo,
            hold,
            target: json!({
                "target": if quorum { "majority" } else { "all" },
                "nodes": names,
                "while_held_by": held_by,
            }),
            state: json!({ "nodes": names }),
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        // The same restart as kill-node's (state `nodes`), named as ours.
        super::node::KillNode
            .stop(ctx, fault)
            .await
            .map_err(|e| NemesisError::new(self.name(), e.msg))
    }
}
