//! `failover` on Redis Cluster is [`super::cluster_failover`]'s forced one.
//!
//! `failover`: the Redis primary under Sentinel is killed while a lock
//! grant it gave has not reached any replica, so the promoted replica has
//! never heard of the lock and grants it again.
//!
//! The recipe (Redis/Sentinel 7.0):
//! 1. wait until the primary streams to every replica (an earlier fault
//!    has healed);
//! 2. just before a holder's release goes out (the next grant follows
//!    it), `CLIENT PAUSE <ms> WRITE` on every replica (undo: `CLIENT
//!    UNPAUSE`), so they stop applying the replication stream: the workers
//!    announce their next release, as for the faults timed by the protocol
//!    ([`Ctx::next_moment`]), and the first to announce one sends it only
//!    once the replicas are paused (their connections and undo entries are
//!    ready beforehand, so it waits a round trip per replica). Then wait up
//!    to 600 ms for a worker's grant made after the pause which no replica
//!    has the key of; none: unpause and try again (a paused replica's
//!    PUBLISH hangs, so Sentinel would soon think it down and refuse to
//!    promote it). Pausing when a holder *reported* releasing raced its
//!    release: the next grant came 0-15 ms after the pause on a quiet
//!    machine, and before it whenever the pause (two fsyncs, two connects)
//!    took longer, so a run could end without one failover;
//! 3. SIGKILL the primary;
//! 4. once every replica reports `master_link_status:down`, `CLIENT
//!    UNPAUSE` them: the writes they held died with the link;
//! 5. with `force_failover` (the default) ask a sentinel for `SENTINEL
//!    FAILOVER`, as an operator or a watchdog would: the promoted replica
//!    serves about 1 s after the kill instead of 2 s (Sentinel's own
//!    detection, down-after 1000 ms, plus the election; and Sentinel will
//!    not fail the same master over again by itself within 20 s). The
//!    lease must outlast that, and for two holders at once the first
//!    holder's critical section too (e.g. `--ttl-ms 6000 --hold-ms 3000`);
//!    with a shorter hold the new primary hands out fences again that were
//!    already given (a fence-order violation).
//!
//! At stop, once the sentinels name another primary, the old primary is
//! started again on its data and made a replica of the new one (`REPLICAOF`,
//! as an operator would; it resyncs and drops its stale data), and the stop
//! waits until its link is up. When the run is ending it stays down.
//! Workers reach every server through their own proxies (the runner puts
//! one per worker in front of every node, sentinels included, and maps each
//! announced address to it), so they follow the failover through Toxiproxy.

use super::cluster_failover::{ClusterFailover, How};
use super::node::{kill, leader, restart};
use super::{Ctx, Fault, Nemesis, NemesisError, WorkerEvent};
use crate::auth::Auth;
use crate::client::redis_query as rds;
use crate::client::SENTINEL_MASTER;
use crate::cluster::NodeRole;
use crate::undo::Undo;
use crate::workload::step::{Moment, Phase};
use async_trait::async_trait;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tokio::sync::broadcast;

/// How long a replica's `CLIENT PAUSE` lasts at most (the nemesis unpauses
/// it long before, and the undo log does after a crash).
const PAUSE_MS: u64 = 5_000;
/// How long one attempt keeps the replicas paused waiting for a grant:
/// short, because a paused replica stops answering Sentinel (its PUBLISH
/// hangs) and looks down after `down-after-milliseconds` (1000).
const ATTEMPT: Duration = Duration::from_millis(600);
/// How long to keep trying for a grant that missed the replicas.
const GRANT_WAIT: Duration = Duration::from_secs(20);
/// How long to wait for the cluster to be whole again (every replica
/// streaming from the primary) before a failover, and after a restart.
pub(super) const HEAL_WAIT: Duration = Duration::from_secs(20);
/// How long a killed primary's replicas may take to see their link down.
const LINK_WAIT: Duration = Duration::from_secs(10);

/// The planned length a failover's dead man's switch waits for, for a
/// fault of length `len`: the old primary stays down through the wait for
/// the replicas' links, the fault, and the wait for a new primary.
pub fn switch_hold(len: Duration) -> Duration {
    LINK_WAIT + len + HEAL_WAIT
}
const T: Duration = Duration::from_secs(2);

/// `cmd` at `addr` as the run's user (`--auth`), if any.
async fn query<V: redis::FromRedisValue>(
    addr: &str,
    auth: &Auth,
    cmd: &redis::Cmd,
) -> Result<V, String> {
    let mut c = rds::connect_as(addr, auth, T).await?;
    cmd.query_async(&mut c)
        .await
        .map_err(|e| format!("{addr}: {}", rds::said(&e)))
}

async fn link_status(addr: &str, auth: &Auth) -> Option<String> {
    let info: String = query(addr, auth, redis::cmd("INFO").arg("replication"))
        .await
        .ok()?;
    info.lines()
        .find_map(|l| l.trim().strip_prefix("master_link_status:"))
        .map(str::to_string)
}

/// Why `primary` is not a master streaming to every one of `replicas`
/// (`None`: it is).
async fn not_whole(primary: &str, replicas: &[String], auth: &Auth) -> Option<String> {
    match rds::role_as(primary, auth, T).await {
        Ok((r, k)) if r == "master" && k == replicas.len() => {}
        Ok((r, k)) => return Some(format!("{primary} is a {r} with {k} replicas")),
        Err(e) => return Some(e),
    }
    for r in replicas {
        match link_status(r, auth).await {
            Some(s) if s == "up" => {}
            s => return Some(format!("{r}'s link to the primary is {s:?}")),
        }
    }
    None
}

/// Which replica already holds `owner`'s lock key, or cannot tell (`None`:
/// none has it). A Redis Cluster replica (`cluster`) keeps it under
/// `{key}` and answers reads after `READONLY`.
async fn replicated(
    replicas: &[String],
    key: &str,
    owner: &str,
    cluster: bool,
    auth: &Auth,
) -> Option<String> {
    for addr in replicas {
        let v: Result<Option<String>, String> = if cluster {
            let mut p = redis::pipe();
            p.cmd("READONLY")
                .ignore()
                .cmd("GET")
                .arg(crate::client::redis_slots::cluster_lock_key(key));
            match rds::connect_as(addr, auth, T).await {
                Ok(mut c) => p
                    .query_async::<(Option<String>,)>(&mut c)
                    .await
                    .map(|(v,)| v)
                    .map_err(|e| e.to_string()),
                Err(e) => Err(e),
            }
        } else {
            query(addr, auth, redis::cmd("GET").arg(key)).await
        };
        match v {
            Ok(v) if v.as_deref() == Some(owner) => return Some(format!("{addr} had it")),
            Ok(_) => {}
            Err(e) => return Some(format!("{addr} could not be asked: {e}")),
        }
    }
    None
}

/// The primary's name and the other servers (name, address), once the
/// primary streams to all of them; `None` when the run ends first.
async fn whole_cluster(
    ctx: &mut Ctx,
    fault: &str,
) -> Result<Option<(String, Vec<(String, String)>)>, NemesisError> {
    let deadline = Instant::now() + HEAL_WAIT;
    loop {
        let primary = leader(ctx, fault).await?;
        let cluster = ctx.cluster.clone();
        let p_addr = cluster
            .node(&primary)
            .map_err(|e| NemesisError::new(fault, e.to_string()))?
            .addr
            .clone();
        let replicas: Vec<(String, String)> = cluster
            .servers()
            .filter(|n| n.name != primary)
            .map(|n| (n.name.clone(), n.addr.clone()))
            .collect();
        let addrs: Vec<String> = replicas.iter().map(|(_, a)| a.clone()).collect();
        let Some(why) = not_whole(&p_addr, &addrs, &cluster.auth).await else {
            return Ok(Some((primary, replicas)));
        };
        if Instant::now() >= deadline {
            return Err(NemesisError::new(
                fault,
                format!("primary {primary} does not stream to all {} replicas after {HEAL_WAIT:?} (the cluster has not healed from an earlier fault): {why}", addrs.len()),
            ));
        }
        if !ctx.sleep(Duration::from_millis(200)).await {
            // Said, so that a run without a fault tells why.
            return Err(NemesisError::new(
                fault,
                format!("the run ended while primary {primary} did not stream to all its replicas: {why}"),
            ));
        }
    }
}

/// `CLIENT PAUSE WRITE` on every replica, over connections already open
/// (their undo entries are on disk already).
async fn pause(
    addrs: &[String],
    conns: &mut [redis::aio::MultiplexedConnection],
) -> Result<(), String> {
    let cmd = redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg(PAUSE_MS)
        .arg("WRITE")
        .clone();
    for (addr, c) in addrs.iter().zip(conns) {
        cmd.query_async::<()>(c)
            .await
            .map_err(|e| format!("{addr}: {e}"))?;
    }
    Ok(())
}

/// The next `granted` report on `rx` before `until`; `None` at `until` or
/// when the run ends.
async fn next_grant(
    ctx: &Ctx,
    rx: &mut broadcast::Receiver<WorkerEvent>,
    until: tokio::time::Instant,
) -> Option<WorkerEvent> {
    let mut stop = ctx.stopping.clone();
    loop {
        if ctx.is_stopping() {
            return None;
        }
        let ev = tokio::select! {
            ev = tokio::time::timeout_at(until, rx.recv()) => ev.ok()?,
            _ = async { while stop.changed().await.is_ok() && !*stop.borrow() {} } => return None,
        };
        match ev {
            Ok(ev) if ev.state.phase == Phase::Granted => return Some(ev),
            Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
            Err(broadcast::error::RecvError::Closed) => return None,
        }
    }
}

/// A grant no replica applied, as [`grant_missing_replicas`] found it.
pub(super) struct Missed {
    pub ev: WorkerEvent,
    /// The undo ids of the replicas' pause (they are still paused).
    pub paused: Vec<u64>,
    /// The attempts it took, this one included.
    pub attempts: u32,
    /// The release before it waited for the pause (false: no release was
    /// announced within a lease and a hold, or its worker had stopped
    /// waiting).
    pub release_held: bool,
}

/// Pause the replicas just before a holder releases and wait a short
/// while for the grant that follows, which they do not apply; unpause and
/// try again until one comes (recipe step 2). Returns it with the replicas
/// still paused; `None` when the run ends first, or an error saying what
/// the attempts met when it ends after one did not find it. `cluster`:
/// the replicas are Redis Cluster nodes.
pub(super) async fn grant_missing_replicas(
    ctx: &mut Ctx,
    fault: &str,
    addrs: &[String],
    cluster: bool,
) -> Result<Option<Missed>, NemesisError> {
    let deadline = Instant::now() + GRANT_WAIT;
    let slots: Vec<usize> = (0..ctx.workers.slots()).collect();
    let mut attempts = 0;
    // What each attempt that found no such grant met, for the error.
    let mut met: Vec<String> = Vec::new();
    let ended = |met: &[String]| match met {
        [] => Ok(None),
        _ => Err(NemesisError::new(
            fault,
            format!(
                "the run ended after {} attempts, none with a grant that missed the replicas: {}",
                met.len(),
                met.join("; ")
            ),
        )),
    };
    while Instant::now() < deadline {
        attempts += 1;
        // Everything but the pause itself before the moment: the holder
        // waits for it (at most ARM_WAIT, 100 ms).
        let mut conns = Vec::new();
        let auth = ctx.cluster.auth.clone();
        for addr in addrs {
            conns.push(
                rds::connect_as(addr, &auth, T)
                    .await
                    .map_err(|e| NemesisError::new(fault, e))?,
            );
        }
        let mut ids = Vec::new();
        for addr in addrs {
            ids.push(ctx.will(fault, Undo::RedisClientPause { addr: addr.clone() })?);
        }
        // No release within a lease and a hold (a holder gone): pause
        // anyway, for a grant after an expiry.
        let until = tokio::time::Instant::now() + ctx.ttl + ctx.hold;
        let mut ann = match ctx
            .next_moment_until(fault, &slots, Moment::Release, Some(until))
            .await
        {
            Ok(a) => a,
            Err(e) => {
                let _ = ctx.revert(fault, &ids).await;
                return Err(e);
            }
        };
        if ctx.is_stopping() {
            ctx.revert(fault, &ids).await?;
            return ended(&met);
        }
        let mut rx = ctx.workers.subscribe();
        if let Err(e) = pause(addrs, &mut conns).await {
            if let Some(a) = ann.as_mut() {
                ctx.go(a, false).await;
            }
            let _ = ctx.revert(fault, &ids).await;
            return Err(NemesisError::new(fault, e));
        }
        let since = ctx.clock.now();
        let release_held = match ann.as_mut() {
            Some(a) => ctx.go(a, true).await,
            None => false,
        };
        let until = tokio::time::Instant::now() + ATTEMPT;
        let mut seen = format!("no grant within {ATTEMPT:?} of the pause");
        while let Some(ev) = next_grant(ctx, &mut rx, until).await {
            let (Some(key), Some(owner)) = (&ev.state.key, &ev.state.owner) else {
                continue;
            };
            if ev.state.time <= since {
                continue;
            }
            let Some(why) = replicated(addrs, key, owner, cluster, &auth).await else {
                tracing::debug!(fault, attempts, release_held, "a grant missed the replicas");
                return Ok(Some(Missed {
                    ev,
                    paused: ids,
                    attempts,
                    release_held,
                }));
            };
            seen = format!("a grant reached a replica ({why})");
        }
        if ctx.is_stopping() {
            ctx.revert(fault, &ids).await?;
            return ended(&met);
        }
        if !release_held {
            seen.insert_str(0, "no release held for the pause, ");
        }
        tracing::debug!(fault, attempts, seen, "no grant missed the replicas");
        met.push(seen);
        ctx.revert(fault, &ids).await?;
        // Let the sentinels see the replicas answer again.
        if !ctx.sleep(Duration::from_millis(300)).await {
            return ended(&met);
        }
    }
    Err(NemesisError::new(
        fault,
        format!(
            "no grant that missed the replicas within {GRANT_WAIT:?} ({attempts} attempts: {})",
            met.join("; ")
        ),
    ))
}

/// Kill the primary under Sentinel with a grant only it knew.
pub struct Failover;

impl Failover {
    /// Steps 3–5 of the recipe; returns details for the history.
    async fn kill_and_promote(
        ctx: &mut Ctx,
        primary: &str,
        replicas: &[String],
        paused: &[u64],
    ) -> Result<Value, NemesisError> {
        let fault = "failover";
        let cluster = ctx.cluster.clone();
        // An attached primary: its AttachedDown entry first, kept in the
        // detail so `stop` starts it again through its start command.
        let mut down = None;
        match super::attached::of(&cluster, primary) {
            Some(a) => down = Some(super::attached::kill(ctx, fault, a).await?),
            None => kill(&cluster, fault, primary).await?,
        }
        let killed = Instant::now();
        while Instant::now() < killed + LINK_WAIT {
            let mut down = true;
            for r in replicas {
                down &= link_status(r, &cluster.auth).await.as_deref() == Some("down");
            }
            if down {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let link_down_ms = killed.elapsed().as_millis() as u64;
        ctx.revert(fault, paused).await?;
        let mut forced = Value::Null;
        if ctx.spec.force_failover.unwrap_or(true) {
            let sentinels: Vec<String> = cluster
                .nodes()
                .iter()
                .filter(|n| n.role == NodeRole::Sentinel)
                .map(|n| n.addr.clone())
                .collect();
            for s in &sentinels {
                let r: Result<String, String> = query(
                    s,
                    &cluster.auth,
                    redis::cmd("SENTINEL").arg("FAILOVER").arg(SENTINEL_MASTER),
                )
                .await;
                forced = match r {
                    Ok(ok) => json!({ "sentinel": s, "reply": ok }),
                    Err(e) => json!({ "sentinel": s, "error": e }),
                };
                if forced.get("reply").is_some() {
                    break;
                }
            }
        }
        Ok(json!({ "link_down_ms": link_down_ms, "sentinel_failover": forced, "down_id": down }))
    }
}

#[async_trait]
impl Nemesis for Failover {
    fn name(&self) -> &'static str {
        "failover"
    }

    async fn start(&mut self, ctx: &mut Ctx) -> Result<Option<Fault>, NemesisError> {
        if ctx.system.facts().cluster_failover.is_yes() {
            return ClusterFailover(How::Force).start(ctx).await;
        }
        if ctx.is_stopping() {
            return Ok(None);
        }
        let fault = self.name();
        let Some((primary, replicas)) = whole_cluster(ctx, fault).await? else {
            return Ok(None);
        };
        let addrs: Vec<String> = replicas.iter().map(|(_, a)| a.clone()).collect();
        let invoked_at = ctx.clock.now();
        let Some(m) = grant_missing_replicas(ctx, fault, &addrs, false).await? else {
            return Ok(None);
        };
        let ev = m.ev;
        let lease = ctx.lease_of(&ev);
        // An attached primary stays down through the wait for its link to
        // drop, the fault's length and the wait for a new primary.
        ctx.deadman.hold = Some(switch_hold(ctx.spec.duration(lease)));
        let killed_at = ctx.clock.now();
        let detail = Self::kill_and_promote(ctx, &primary, &addrs, &m.paused).await?;
        Ok(Some(Fault {
            invoked_at,
            undo: Vec::new(),
            hold: ctx.spec.duration(lease),
            target: json!({
                "primary": primary,
                "replicas": replicas.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>(),
                "holder": ev.holder_json(),
                "killed_ns": killed_at,
                "lease_ms": lease.as_millis() as u64,
                "attempts": m.attempts,
                "release_held": m.release_held,
                "detail": detail,
            }),
            state: json!({ "primary": primary, "down_id": detail["down_id"] }),
        }))
    }

    async fn stop(&mut self, ctx: &mut Ctx, fault: &Fault) -> Result<Value, NemesisError> {
        if ctx.system.facts().cluster_failover.is_yes() {
            return ClusterFailover(How::Force).stop(ctx, fault).await;
        }
        let name = self.name();
        let old = fault.state["primary"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        let cluster = ctx.cluster.clone();
        let deadline = Instant::now() + HEAL_WAIT;
        let mut new_primary = None;
        while new_primary.is_none() && Instant::now() < deadline && !ctx.is_stopping() {
            match cluster.leader().await {
                Ok(Some(n)) if n.name != old => new_primary = Some(n.addr.clone()),
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        let Some(primary) = new_primary.filter(|_| !ctx.is_stopping()) else {
            // Left down until the run's end, by lockjaw, not by its switch.
            let deadman = super::deadman::disarm_all(ctx, std::slice::from_ref(&old)).await;
            let left = json!({ "new_primary": null, "restarted": false });
            return Ok(super::deadman::merged(left, deadman));
        };
        // Back as a replica of the new primary (as an operator would), so
        // it never serves its stale data as a master Sentinel forgot.
        let mut attached = Value::Null;
        match fault.state["down_id"].as_u64() {
            Some(id) => {
                let killed = fault.target["killed_ns"]
                    .as_u64()
                    .unwrap_or(fault.invoked_at);
                let ago = Duration::from_nanos(ctx.clock.now().saturating_sub(killed));
                let at = Instant::now() - ago;
                attached = super::attached::restart(ctx, name, &cluster, &old, id, at).await?;
            }
            None => restart(&cluster, name, &old).await?,
        }
        let addr = cluster
            .node(&old)
            .map_err(|e| NemesisError::new(name, e.to_string()))?
            .addr
            .clone();
        let (host, port) = primary.rsplit_once(':').unwrap_or((&primary, ""));
        query::<()>(
            &addr,
            &cluster.auth,
            redis::cmd("REPLICAOF").arg(host).arg(port),
        )
        .await
        .map_err(|e| NemesisError::new(name, e))?;
        let began = Instant::now();
        while link_status(&addr, &cluster.auth).await.as_deref() != Some("up")
            && began.elapsed() < HEAL_WAIT
            && !ctx.is_stopping()
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(json!({
            "new_primary": primary,
            "restarted": true,
            "rejoined": link_status(&addr, &cluster.auth).await.as_deref() == Some("up"),
            "attached": attached,
        }))
    }
}
