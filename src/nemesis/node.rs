//! Process faults on the lock service's own nodes: `pause-node` and
//! `kill-node`; and the choice of target nodes that the partition, clock and
//! failover families share ([`pick`], [`leader`]).
//!
//! Targets are data nodes, never sentinels: `leader` / `primary` (the etcd
//! or ZooKeeper leader, Sentinel's primary, Redis Cluster's primary of the
//! lock key's slot; for Redis and Redlock the first node), `random` (one node), `minority` ((n − 1) / 2 nodes), `majority`
//! (n / 2 + 1 nodes), `all`. Random choices come from the run's seeded rng.
//!
//! - `pause-node`: SIGSTOP each target's process group (undo: SIGCONT, in
//!   the undo log before the signal) for the fault's length (default 1.5 ×
//!   the requested lease), then SIGCONT. A node whose processes leave its
//!   process group (PostgreSQL's backends) is frozen through its cgroup
//!   instead (`cgroup.freeze`; undo: thaw). `kill-node` reaches such a
//!   node's whole cgroup through [`crate::cluster::Node::kill`].
//! - `kill-node`: SIGKILL each target, leave it down for the fault's length
//!   (default 2 s), then start it again on its data directory and wait until
//!   it answers. A kill needs no undo entry of its own: the cluster's entry
//!   stops whatever runs (the restarted process included, which the cluster's
//!   state file records); when the run is ending the node is not restarted.
//!   `restart = "empty"` empties each data directory before the restart (a
//!   Redis node forgets every key, the lock's included); `"empty-delayed"`
//!   also keeps the nodes down for at least [`delayed_restart`] (ttl × (1 +
//!   ρ) + ε from the kill), the remedy Redlock's author proposes.
//!   `while_holding = true` strikes only while a worker holds the lock.
//!
//! On a node on another host, a dead man's switch is armed there before
//! the pause (and before an attached node's kill), and disarmed after
//! lockjaw's own undo ([`super::deadman`]).

use super::{attached, deadman, Ctx, Fault, Nemesis, NemesisError, Restart, Target};
use crate::check::lock::{DEFAULT_DRIFT, DEFAULT_EPSILON_MS};
use crate::cluster::{Cluster, LeaderPoll, Mode, Node, RemoteNode};
use crate::process::ProcId;
use crate::undo::RemoteEffect;
use crate::workload::step::Phase;
use async_trait::async_trait;
use rand::seq::SliceRandom;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long to wait for a node to answer after a restart.
pub const RESTART_TIMEOUT: Duration = Duration::from_secs(60);
/// How long to wait for the cluster to name a leader.
const LEADER_WAIT: Duration = Duration::from_secs(15);

/// The names of the data nodes `target` picks now.
pub async fn pick(ctx: &mut Ctx, fault: &str, target: Target) -> Result<Vec<String>, NemesisError> {
    if matches!(target, Target::Leader | Target::Primary) {
        return Ok(vec![leader(ctx, fault).await?]);
    }
    let mut servers: Vec<String> = ctx.cluster.servers().map(|n| n.name.clone()).collect();
    let n = servers.len();
    let Some(k) = how_many(target, n) else {
        return Err(NemesisError::new(
            fault,
            format!("cannot aim at {} (a node fault)", target.name()),
        ));
    };
    if k == 0 || k > n {
        return Err(NemesisError::new(
            fault,
            format!(
                "a cluster of {n} data node(s) has no {} (hint: start more nodes with --nodes, or target random)",
                target.name()
            ),
        ));
    }
    servers.shuffle(&mut ctx.rng);
    servers.truncate(k);
    servers.sort();
    Ok(servers)
}

/// How many of `n` nodes a target takes (`None`: not a node target).
pub fn how_many(target: Target, n: usize) -> Option<usize> {
    match target {
        Target::Leader | Target::Primary | Target::Random => Some(1),
        Target::Minority => Some(n.saturating_sub(1) / 2),
        Target::Majority => Some(n / 2 + 1),
        Target::All => Some(n),
        Target::Holder | Target::Waiter | Target::Renewer | Target::AllClients => None,
    }
}

/// The current leader's (or primary's) name; on Redis Cluster the primary
/// serving the lock key's slot. Polls while an election is going on, up
/// to 15 s; the error names each node asked and what it answered last.
/// When the run ends first, the error says so (the schedule records such
/// a start as not started, not as a failure).
pub async fn leader(ctx: &mut Ctx, fault: &str) -> Result<String, NemesisError> {
    let cluster = ctx.cluster.clone();
    let key = ctx.lock_key.clone();
    let began = Instant::now();
    loop {
        let why = match cluster.system.poll_leader(&cluster, &key).await {
            Ok(p) => {
                let claimed = (p.leader.as_deref())
                    .and_then(|a| cluster.nodes().iter().find(|n| n.addr == a));
                match claimed {
                    Some(n) => return Ok(n.name.clone()),
                    None => asked(&cluster, &p),
                }
            }
            Err(e) => e.to_string(),
        };
        if began.elapsed() >= LEADER_WAIT {
            return Err(NemesisError::new(
                fault,
                format!("no leader after {LEADER_WAIT:?}: {why}"),
            ));
        }
        if !ctx.sleep(Duration::from_millis(100)).await {
            return Err(NemesisError::new(
                fault,
                format!(
                    "the run ended before a leader was found ({:.1} s of looking): {why}",
                    began.elapsed().as_secs_f64()
                ),
            ));
        }
    }
}

/// What a lookup that found no leader heard: each node asked, its
/// address and its answer (`e1 (10.213.0.11:2379): follower of 8e9e05c52164694d, term 4`).
pub fn asked(c: &Cluster, p: &LeaderPoll) -> String {
    if p.answers.is_empty() {
        return "no node claims to lead".into();
    }
    let each: Vec<String> = p
        .answers
        .iter()
        .map(|(addr, r)| {
            let name = (c.nodes().iter())
                .find(|n| n.addr == *addr)
                .map_or(addr.as_str(), |n| n.name.as_str());
            let said = match r {
                Ok(a) | Err(a) => a,
            };
            format!("{name} ({addr}): {said}")
        })
        .collect();
    let heard = if p.answers.iter().any(|(_, r)| r.is_ok()) {
        "no node claims to lead"
    } else {
        "no node answered"
    };
    format!("{heard}; asked {}", each.join("; "))
}

/// The running process of node `name`; an error for a cluster lockjaw did
/// not start.
pub fn node_proc(cluster: &Cluster, fault: &str, name: &str) -> Result<ProcId, NemesisError> {
    let node = started(cluster, fault, name)?;
    node.proc_id()
        .ok_or_else(|| NemesisError::new(fault, format!("node {name} was never started")))
}

/// Node `name`, if lockjaw started it (here or on a host); an error for a
/// cluster lockjaw did not start.
pub fn started<'a>(
    cluster: &'a Cluster,
    fault: &str,
    name: &str,
) -> Result<&'a Node, NemesisError> {
    let node = cluster
        .node(name)
        .map_err(|e| NemesisError::new(fault, e.to_string()))?;
    if cluster.mode == Mode::Endpoints || !node.signallable() {
        return Err(NemesisError::new(
            fault,
            format!("node {name}: lockjaw did not start it, so it cannot be signalled (hint: drop --endpoints)"),
        ));
    }
    Ok(node)
}

/// Keep `r`'s undo id; on an error take back what `ids` holds and fail.
pub(crate) async fn keep_or_revert(
    ctx: &mut Ctx,
    fault: &str,
    ids: &mut Vec<u64>,
    r: Result<u64, NemesisError>,
) -> Result<(), NemesisError> {
    match r {
        Ok(id) => {
            ids.push(id);
            Ok(())
        }
        Err(e) => {
            let _ = ctx.revert(fault, ids).await;
            Err(e)
        }
    }
}

/// SIGKILL node `name` and wait until it is gone (off the async threads).
pub async fn kill(cluster: &Arc<Cluster>, fault: &str, name: &str) -> Result<(), NemesisError> {
    let c = cluster.clone();
    let n = name.to_string();
    tokio::task::spawn_blocking(move || c.node(&n).and_then(|node| node.kill()))
        .await
        .map_err(|e| NemesisError::new(fault, e.to_string()))?
        .map_err(|e| NemesisError::new(fault, e.to_string()))
}

/// SIGKILL every node of `names`; if one fails, start again those already
/// killed and fail.
pub async fn kill_all(
    cluster: &Arc<Cluster>,
    fault: &str,
    names: &[String],
) -> Result<(), NemesisError> {
    for (i, name) in names.iter().enumerate() {
        if let Err(e) = kill(cluster, fault, name).await {
            for k in &names[..i] {
                let _ = restart(cluster, fault, k).await;
            }
            return Err(e);
        }
    }
    Ok(())
}

/// Start node `name` again on its data and wait until it answers.
pub async fn restart(cluster: &Arc<Cluster>, fault: &str, name: &str) -> Result<(), NemesisError> {
    let node = cluster
        .node(name)
        .map_err(|e| NemesisError::new(fault, e.to_string()))?;
    cluster
        .restart(node, RESTART_TIMEOUT)
        .await
        .map_err(|e| NemesisError::new(fault, e.to_string()))
}

/// How long `restart = "empty-delayed"` keeps a node down after its kill:
/// ttl × (1 + ρ) + ε, with the ttl each acquire sent (`PX`) and the
/// checker's ρ and ε. Every key a killed node held had expired by then.
pub fn delayed_restart(ttl: Duration) -> Duration {
    ttl.mul_f64(1.0 + DEFAULT_DRIFT) + Duration::from_secs_f64(DEFAULT_EPSILON_MS / 1e3)
}

/// Empty the data directory of node `name` (killed, so nothing writes to
/// it). Only a directory inside the cluster's own directory is touched.
pub fn empty_data(cluster: &Cluster, fault: &str, name: &str) -> Result<(), NemesisError> {
    let node = cluster
        .node(name)
        .map_err(|e| NemesisError::new(fault, e.to_string()))?;
    let dir = &node.data_dir;
    let inside = cluster
        .dir
        .as_ref()
        .is_some_and(|c| dir.starts_with(c) && dir != c);
    if !inside {
        return Err(NemesisError::new(
            fault,
            format!(
                "node {name}: its data directory {} is not inside the cluster's directory, so lockjaw does not empty it",
                dir.display()
            ),
        ));
    }
    let io =
        |e: std::io::Error| NemesisError::new(fault, format!("emptying {}: {e}", dir.display()));
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(io(e)),
    }
    std::fs::create_dir_all(dir).map_err(io)
}

fn target_value(ctx: &Ctx, names: &[String]) -> Value {
    json!({ "target": ctx.spec.target.name(), "nodes": names })
}

/// SIGSTOP nodes for a while.
pub struct PauseNode;

#[async_trait]
impl Nemesis for PauseNode {
    fn name(&self) -> &'static str {
        "pause-node"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        if ctx.is_stopping() {
            return Ok(None);
        }
        let fault = self.name();
        let names = pick(ctx, fault, ctx.spec.target).await?;
        attached::guard(ctx, fault, &names)?;
        let cluster = ctx.cluster.clone();
        for name in &names {
            started(&cluster, fault, name)?;
        }
        let hold = ctx.spec.duration(ctx.ttl);
        ctx.deadman.hold = Some(hold);
        let invoked_at = ctx.clock.now();
        let mut ids = Vec::new();
        for name in &names {
            let node = started(&cluster, fault, name)?;
            let r = match (&node.attached, &node.remote, node.whole_cgroup()) {
                (Some(a), _, _) => attached::pause(ctx, fault, a).await,
                (None, Some(r), _) => pause_remote(ctx, name, r).await,
                (None, None, Some(cg)) => {
                    freeze(ctx, &cluster, name, cg.iptables_path.clone()).await
                }
                (None, None, None) => match node_proc(&cluster, fault, name) {
                    Ok(p) => ctx.pause_group(fault, &format!("node {name}"), p).await,
                    Err(e) => Err(e),
                },
            };
            if let Err(e) = keep_or_revert(ctx, fault, &mut ids, r).await {
                deadman::disarm_all(ctx, &names).await;
                return Err(e);
            }
        }
        Ok(Some(Fault {
            invoked_at,
            undo: ids,
            hold,
            target: target_value(ctx, &names),
            state: json!({ "nodes": names }),
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        if ctx.cluster.mode == Mode::Adopted {
            // One entry per node, in the order of the names.
            let names = state_names(self.name(), fault)?;
            let cluster = ctx.cluster.clone();
            let mut detail = Vec::new();
            for (name, id) in names.iter().zip(&fault.undo) {
                detail.push(attached::resume(ctx, self.name(), &cluster, name, *id).await?);
            }
            return Ok(json!({ "resumed": fault.state["nodes"], "attached": detail }));
        }
        ctx.revert(self.name(), &fault.undo).await?;
        let switches = deadman::disarm_all(ctx, &state_names(self.name(), fault)?).await;
        Ok(deadman::merged(
            json!({ "resumed": fault.state["nodes"] }),
            switches,
        ))
    }
}

/// SIGSTOP node `name` on another host (every process of its tag): its
/// dead man's switch armed, then the undo entry (SIGCONT there) first.
async fn pause_remote(ctx: &Ctx, name: &str, r: &RemoteNode) -> Result<u64, NemesisError> {
    let fault = "pause-node";
    let entry = r.undo(RemoteEffect::Paused { tag: r.tag.clone() });
    deadman::arm(ctx, fault, name, std::slice::from_ref(&entry)).await?;
    let id = ctx.will(fault, entry)?;
    crate::remote::signal(&r.host, &r.tag, crate::process::Signal::Stop)
        .await
        .map_err(|e| NemesisError::new(fault, e.to_string()))?;
    Ok(id)
}

/// Freeze a node's whole cgroup (its processes left its process group),
/// the undo entry (thaw) first.
async fn freeze(
    ctx: &Ctx,
    cluster: &Arc<Cluster>,
    name: &str,
    cgroup: String,
) -> Result<u64, NemesisError> {
    let fault = "pause-node";
    let id = ctx.will(
        fault,
        crate::undo::Undo::Frozen {
            what: format!("node {name}"),
            cgroup,
        },
    )?;
    let (c, n) = (cluster.clone(), name.to_string());
    tokio::task::spawn_blocking(move || c.node(&n).and_then(|node| node.pause()))
        .await
        .map_err(|e| NemesisError::new(fault, e.to_string()))?
        .map_err(|e| NemesisError::new(fault, e.to_string()))?;
    Ok(id)
}

/// The node names a fault's state holds.
fn state_names(fault: &str, f: &Fault) -> Result<Vec<String>, NemesisError> {
    serde_json::from_value(f.state["nodes"].clone())
        .map_err(|e| NemesisError::new(fault, e.to_string()))
}

/// Kill attached nodes (each `AttachedDown` entry first); if one fails,
/// start those already killed again and fail. The entries' ids, in order.
pub(super) async fn kill_attached(
    ctx: &mut Ctx,
    fault: &str,
    names: &[String],
) -> Result<Vec<u64>, NemesisError> {
    let cluster = ctx.cluster.clone();
    let mut ids = Vec::new();
    for name in names {
        let a = attached::of(&cluster, name)
            .ok_or_else(|| NemesisError::new(fault, format!("{name} is not attached")))?;
        match attached::kill(ctx, fault, a).await {
            Ok(id) => ids.push(id),
            Err(e) => {
                // Switches off first, then the killed ones started again.
                deadman::disarm_all(ctx, names).await;
                let _ = ctx.revert(fault, &ids).await;
                return Err(e);
            }
        }
    }
    Ok(ids)
}

/// SIGKILL nodes; restart them at stop, with their data or without.
pub struct KillNode;

#[async_trait]
impl Nemesis for KillNode {
    fn name(&self) -> &'static str {
        "kill-node"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        if ctx.is_stopping() {
            return Ok(None);
        }
        let fault = self.name();
        if ctx.spec.while_holding && ctx.wait_for_phase(Phase::Holding).await.is_none() {
            return Ok(None); // the run is ending
        }
        let names = pick(ctx, fault, ctx.spec.target).await?;
        attached::guard(ctx, fault, &names)?;
        let cluster = ctx.cluster.clone();
        for name in &names {
            started(&cluster, fault, name)?;
        }
        let mut hold = ctx.spec.duration(ctx.ttl);
        if ctx.spec.restart == Restart::EmptyDelayed {
            hold = hold.max(delayed_restart(ctx.ttl));
        }
        ctx.deadman.hold = Some(hold);
        let invoked_at = ctx.clock.now();
        let mut undo = Vec::new();
        if cluster.mode == Mode::Adopted {
            undo = kill_attached(ctx, fault, &names).await?;
        } else {
            kill_all(&cluster, fault, &names).await?;
        }
        Ok(Some(Fault {
            invoked_at,
            undo,
            hold,
            target: target_value(ctx, &names),
            state: json!({ "nodes": names }),
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        if ctx.cluster.mode == Mode::Adopted {
            // Attached servers come back even when the run is ending.
            let names = state_names(self.name(), fault)?;
            let cluster = ctx.cluster.clone();
            let ago = Duration::from_nanos(ctx.clock.now().saturating_sub(fault.invoked_at));
            let killed_at = Instant::now() - ago;
            // Every switch off before the first start: a slow start must
            // not let another node's switch start that node meanwhile.
            let mut switches = Vec::new();
            for name in &names {
                switches.push(deadman::disarm(ctx, name).await);
            }
            let mut detail = Vec::new();
            for ((name, id), dm) in names.iter().zip(&fault.undo).zip(switches) {
                let d = attached::restart(ctx, self.name(), &cluster, name, *id, killed_at);
                let mut d = d.await?;
                if d["deadman"].is_null() {
                    d["deadman"] = dm;
                }
                detail.push(d);
            }
            return Ok(json!({ "restarted": true, "attached": detail }));
        }
        if ctx.is_stopping() {
            return Ok(json!({ "restarted": false }));
        }
        let cluster = ctx.cluster.clone();
        let names: Vec<String> = serde_json::from_value(fault.state["nodes"].clone())
            .map_err(|e| NemesisError::new(self.name(), e.to_string()))?;
        let how = ctx.spec.restart;
        let began = Instant::now();
        let mut errs = Vec::new();
        for name in &names {
            let mut r = Ok(());
            if how.is_empty() {
                r = empty_data(&cluster, self.name(), name);
            }
            if r.is_ok() {
                r = restart(&cluster, self.name(), name).await;
            }
            if let Err(e) = r {
                errs.push(e.msg);
            }
        }
        if !errs.is_empty() {
            return Err(NemesisError::new(self.name(), errs.join("; ")));
        }
        Ok(json!({
            "restarted": true,
            "restart": how.name(),
            "restart_ms": began.elapsed().as_millis() as u64,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn minorities_and_majorities_of_common_sizes() {
        let sizes = |t| [1, 3, 5].map(|n| how_many(t, n));
        assert_eq!(sizes(Target::Majority), [Some(1), Some(2), Some(3)]);
        assert_eq!(sizes(Target::Minority), [Some(0), Some(1), Some(2)]);
        assert_eq!(sizes(Target::All), [Some(1), Some(3), Some(5)]);
        assert_eq!(sizes(Target::Random), [Some(1); 3]);
        assert_eq!(how_many(Target::Holder, 3), None);
    }

    #[test]
    fn a_delayed_restart_outlasts_the_lease_with_drift_and_epsilon() {
        let d = delayed_restart(Duration::from_secs(5));
        assert_eq!(d, Duration::from_millis(5007));
    }
}
