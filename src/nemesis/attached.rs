//! Process faults on servers lockjaw attached to (`--attach`): each
//! effect's undo entry before it (`AttachedPaused` before SIGSTOP,
//! `AttachedDown` before the kill), the processes signalled only while
//! they carry the pid, start time and cgroup discovery found, and after
//! each pause or kill the identity checked again: a server its service
//! manager restarted meanwhile is recorded as what happened
//! (`"restarted_by_manager": true`, its downtime), and its new identity
//! goes into the undo log (`AttachedFound`) before anything else.
//!
//! Before each strike that signals (pause, kill), the found processes are
//! proven again to be the node's server; a failed proof fails the fault
//! and signals nothing. A resume needs none (the stamps suffice, and a
//! paused server cannot answer).
//!
//! The guard rail: a fault never takes a majority of the servers unless
//! the run allows it (`--allow-majority`), checked at each strike.

use super::{Ctx, NemesisError};
use crate::cluster::{AttachedNode, Cluster, Node};
use crate::process::Signal;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long a restarted server has to answer again.
const ANSWER_WAIT: Duration = Duration::from_secs(60);

/// The attached node `name` (None: lockjaw started it, or it is not one).
pub fn of<'a>(cluster: &'a Cluster, name: &str) -> Option<&'a Arc<AttachedNode>> {
    cluster.node(name).ok().and_then(|n| n.attached.as_ref())
}

/// Whether taking `k` of `n` servers leaves the cluster without them
/// being a guard-rail breach: for a quorum system (etcd, ZooKeeper) when
/// the rest are no majority of `n`; for a system that fails over to a
/// replica, when no server is left (all replicas of the shard).
pub fn is_majority(k: usize, n: usize, quorum: bool) -> bool {
    match quorum {
        true => n > 0 && k > 0 && n - k.min(n) < n / 2 + 1,
        false => n > 0 && k >= n,
    }
}

/// Refuse a strike on a majority of an attached cluster's servers unless
/// `--allow-majority`.
pub fn guard(ctx: &Ctx, fault: &str, names: &[String]) -> Result<(), NemesisError> {
    let c = &ctx.cluster;
    if c.mode != crate::cluster::Mode::Adopted || ctx.allow_majority {
        return Ok(());
    }
    let n = c.servers().count();
    // Servers still down from an earlier fault (their start failed) count.
    let mut taken: Vec<String> = names.to_vec();
    for (_, u) in ctx.undo.pending() {
        if let crate::undo::Undo::Remote {
            effect: crate::undo::RemoteEffect::AttachedDown { node, .. },
            ..
        } = u
        {
            if !taken.contains(&node) {
                taken.push(node);
            }
        }
    }
    if is_majority(taken.len(), n, super::outage::quorum(ctx)) {
        return Err(NemesisError::new(
            fault,
            format!(
                "would take {} of the {n} attached servers ({}{}), and the cluster would lose its quorum (or every replica): refused (hint: --allow-majority if it may)",
                taken.len(),
                names.join(", "),
                match taken.len() > names.len() {
                    true => format!(", with {} still down", taken[names.len()..].join(", ")),
                    false => String::new(),
                }
            ),
        ));
    }
    Ok(())
}

fn nerr(fault: &str, e: impl std::fmt::Display) -> NemesisError {
    NemesisError::new(fault, e.to_string())
}

/// Prove again, right before a strike, that `a`'s recorded processes are
/// its server ([`AttachedNode::prove`]): a failed proof fails the fault
/// with why, and nothing is signalled.
pub async fn prove(ctx: &Ctx, fault: &str, a: &AttachedNode) -> Result<(), NemesisError> {
    let c = &ctx.cluster;
    a.prove(c.system, &c.auth, false)
        .await
        .map(drop)
        .map_err(|e| nerr(fault, format!("node {}: {e}", a.spec.name)))
}

/// SIGSTOP every found process of `a`, its `AttachedPaused` entry first.
pub async fn pause(ctx: &Ctx, fault: &str, a: &AttachedNode) -> Result<u64, NemesisError> {
    prove(ctx, fault, a).await?;
    super::deadman::arm(ctx, fault, &a.spec.name, &[a.paused_entry()]).await?;
    let id = ctx.will(fault, a.paused_entry())?;
    a.signal(Signal::Stop).await.map_err(|e| nerr(fault, e))?;
    Ok(id)
}

/// The identity check after a pause or kill: `Some(new)` when the node
/// now runs other processes than those recorded (its manager restarted
/// it), recorded in the undo log and on the node; `None` when the same
/// server is there, or none is.
async fn restarted(
    ctx: &Ctx,
    fault: &str,
    a: &AttachedNode,
) -> Result<Option<Value>, NemesisError> {
    let Ok(now) = a.rediscover().await else {
        return Ok(None);
    };
    if a.same_as(&now) {
        return Ok(None);
    }
    let pids: Vec<u32> = now.procs.iter().map(|p| p.pid).collect();
    a.set_found(now);
    ctx.will(fault, a.found_entry())?;
    Ok(Some(json!(pids)))
}

/// SIGCONT what `pause` stopped (`id` its entry), after checking who runs.
pub async fn resume(
    ctx: &Ctx,
    fault: &str,
    cluster: &Cluster,
    name: &str,
    id: u64,
) -> Result<Value, NemesisError> {
    let a = of(cluster, name).ok_or_else(|| nerr(fault, format!("{name} is not attached")))?;
    let began = Instant::now();
    let new = restarted(ctx, fault, a).await?;
    let mut d = json!({ "node": name });
    match &new {
        None => {
            let s = a.signal(Signal::Cont).await.map_err(|e| nerr(fault, e))?;
            d["resumed"] = json!(s.sent.len());
            if !s.gone.is_empty() {
                d["gone"] = json!(s.gone.iter().map(|p| p.pid).collect::<Vec<_>>());
            }
        }
        Some(pids) => {
            d["restarted_by_manager"] = json!(true);
            d["pids"] = pids.clone();
        }
    }
    ctx.undo.forget(id);
    d["deadman"] = super::deadman::disarm(ctx, name).await;
    if new.is_some() {
        let down = wait_answer(cluster, name, None)
            .await
            .map_err(|e| nerr(fault, e))?;
        d["downtime_ms"] = json!((began.elapsed() + down).as_millis() as u64);
    }
    Ok(d)
}

/// Kill `a`, its `AttachedDown` entry first; returns the entry's id.
pub async fn kill(ctx: &Ctx, fault: &str, a: &AttachedNode) -> Result<u64, NemesisError> {
    prove(ctx, fault, a).await?;
    let id = ctx.will(fault, a.down_entry())?;
    let armed = super::deadman::arm(ctx, fault, &a.spec.name, &[a.down_entry()]).await;
    armed.inspect_err(|_| ctx.undo.forget(id))?;
    a.kill().await.map_err(|e| nerr(fault, e))?;
    Ok(id)
}

/// Bring a killed node back: unless its manager already restarted it,
/// run its start command; wait until it answers; record its new identity
/// (`AttachedFound`) before its `AttachedDown` entry (`id`) is done.
pub async fn restart(
    ctx: &Ctx,
    fault: &str,
    cluster: &Cluster,
    name: &str,
    id: u64,
    killed_at: Instant,
) -> Result<Value, NemesisError> {
    let a = of(cluster, name).ok_or_else(|| nerr(fault, format!("{name} is not attached")))?;
    let deadman = super::deadman::disarm(ctx, name).await;
    let by_manager = restarted(ctx, fault, a).await?.is_some();
    // A start command that fails is told here, once: its entry stays for
    // `lockjaw heal`, and the run's end does not run it again.
    let failed = |e: String| {
        ctx.undo.give_up(id, &e);
        nerr(fault, e)
    };
    if !by_manager {
        a.start().await.map_err(|e| failed(e.to_string()))?;
    }
    wait_answer(cluster, name, (!by_manager).then_some(&**a))
        .await
        .map_err(failed)?;
    let downtime = killed_at.elapsed();
    if !by_manager {
        let now = found_again(a).await.map_err(|e| nerr(fault, e))?;
        a.set_found(now);
        ctx.will(fault, a.found_entry())?;
    }
    ctx.undo.forget(id);
    Ok(json!({
        "node": name,
        "restarted_by_manager": by_manager,
        "downtime_ms": downtime.as_millis() as u64,
        "pids": a.pids(),
        "deadman": deadman,
    }))
}

/// Discovery after a start (the server may take a moment to appear).
async fn found_again(a: &AttachedNode) -> Result<crate::remote::attach::Found, String> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        match a.rediscover().await {
            Ok(f) => return Ok(f),
            Err(e) if Instant::now() >= deadline => return Err(e.to_string()),
            Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
        }
    }
}

/// Poll node `name`'s health check until it answers (at most 60 s); how
/// long it took. With `start`: every [`RESTART_EVERY`] without an answer
/// and with no process of its description running, its start command
/// again (a start script may have returned early, e.g. while the killed
/// process was not yet reaped).
async fn wait_answer(
    cluster: &Cluster,
    name: &str,
    start: Option<&AttachedNode>,
) -> Result<Duration, String> {
    let n: &Node = cluster.node(name).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let mut last_start = Instant::now();
    loop {
        match cluster.probe(n).await {
            Ok(()) => return Ok(t0.elapsed()),
            Err(why) if t0.elapsed() >= ANSWER_WAIT => {
                return Err(format!(
                    "node {name} does not answer {ANSWER_WAIT:?} after its restart: {why}"
                ))
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(50)).await,
        }
        if let Some(a) = start.filter(|_| last_start.elapsed() >= RESTART_EVERY) {
            last_start = Instant::now();
            if a.running().await.is_ok_and(|r| !r) {
                a.start().await.map_err(|e| e.to_string())?;
            }
        }
    }
}

/// How often an attached node that neither answers nor runs is started
/// again while lockjaw waits for it.
const RESTART_EVERY: Duration = Duration::from_secs(3);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn majorities() {
        let q = |k, n| is_majority(k, n, true);
        assert!(!q(1, 3) && q(2, 3) && q(1, 1) && q(1, 2));
        assert!(!q(2, 5) && q(3, 5) && !q(0, 0) && !q(0, 3));
        let r = |k, n| is_majority(k, n, false);
        assert!(!r(1, 2) && r(2, 2) && r(1, 1) && !r(2, 3));
    }
}
