//! Redis Cluster: `n` (at least 6) Redis servers with `cluster-enabled
//! yes`, made one cluster of n / 2 primaries with a replica each by
//! `redis-cli --cluster create --cluster-replicas 1 --cluster-yes`.
//!
//! Every node's cluster bus port is set (`cluster-port`) next to its
//! client port (locally: client `base + 2i`, bus `base + 2i + 1`; on a
//! host: its base port and the next), so a cluster stays inside the run's
//! port block. `cluster-node-timeout` is [`NODE_TIMEOUT_MS`]: a primary
//! unreachable that long is failed over. Each node's cluster state file
//! (`cluster-config-file`) lies beside its data directory, not in it: a
//! node restarted on an emptied data directory (`restart = "empty"`)
//! forgets its keys but stays the same member of the cluster.
//!
//! The cluster is ready when every node sees every slot served
//! (`cluster_state:ok`) by a cluster of all `n` nodes, and every replica's
//! link to its primary is up with its offset caught up.

use super::node::{Node, Ports};
use super::{redis, Cluster, ClusterError, Plan};
use crate::auth::Auth;
use crate::client::redis_slots as rs;
use crate::process::Spec;
use std::time::{Duration, Instant};

/// `cluster-node-timeout` in ms.
pub const NODE_TIMEOUT_MS: u64 = 1000;
/// The fewest nodes: three primaries, a replica each.
pub const MIN_NODES: usize = 6;

/// The nodes, with their bus ports.
pub(crate) fn plan(p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
    let (spec, _, n, _, cg) = p.parts();
    if n < MIN_NODES {
        return Err(ClusterError::Usage(format!(
            "--nodes {n}: a Redis Cluster here has at least {MIN_NODES} nodes (3 primaries with a replica each) (hint: drop --nodes, or give {MIN_NODES} or more)"
        )));
    }
    let prefix = spec.system.name();
    Ok((0..n)
        .map(|i| {
            let dir = p.dir_of(i);
            let at = redis::Where {
                ip: &p.ip(i),
                dir: &dir,
                remote: p.at.is_some(),
            };
            let name = format!("{prefix}{}", i + 1);
            let (port, bus) = (p.port(i, 2, 0), p.port(i, 2, 1));
            let mut node = redis::server(spec, at, &name, port, None, cg);
            let conf = dir.join(format!("{name}.nodes.conf"));
            node.launch = node.launch.map(|l: Spec| {
                l.args([
                    "--cluster-enabled".to_string(),
                    "yes".into(),
                    "--cluster-port".into(),
                    bus.to_string(),
                    "--cluster-node-timeout".into(),
                    NODE_TIMEOUT_MS.to_string(),
                    "--cluster-config-file".into(),
                    conf.display().to_string(),
                ])
            });
            node.ports = Ports {
                client: port,
                bus: Some(bus),
                ..Ports::default()
            };
            node
        })
        .collect())
}

/// Create the cluster once every node answers, then wait until it is
/// whole: every slot served, every replica in sync.
pub(crate) async fn wait_ready(
    c: &Cluster,
    deadline: Instant,
    waited: Duration,
) -> Result<(), ClusterError> {
    let servers: Vec<&Node> = c.servers().collect();
    let t = Duration::from_secs(1);
    if fresh(&servers, &c.auth, t).await {
        create(c, &servers, deadline).await?;
    }
    loop {
        let why = match whole(&servers, &c.auth, t).await {
            Ok(()) => return Ok(()),
            Err(why) => why,
        };
        if Instant::now() >= deadline {
            let (i, msg) = why;
            return Err(servers[i].unhealthy(waited, msg));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Whether no node has joined a cluster yet (each knows only itself).
async fn fresh(servers: &[&Node], auth: &Auth, t: Duration) -> bool {
    for n in servers {
        match rs::info_as(&n.addr, auth, t).await {
            Ok(i) if i.get("cluster_known_nodes").map(String::as_str) == Some("1") => {}
            _ => return false,
        }
    }
    true
}

/// `redis-cli --cluster create`, as a child that dies with lockjaw; its
/// output goes to `logs/cluster-create.log`.
async fn create(c: &Cluster, servers: &[&Node], deadline: Instant) -> Result<(), ClusterError> {
    let dir = c.dir.clone().unwrap_or_default();
    let log = dir.join("logs").join("cluster-create.log");
    let mut spec = Spec::new("redis-cli").args(["--cluster", "create"]);
    spec = spec.args(servers.iter().map(|n| n.addr.clone()));
    spec = spec.args(["--cluster-replicas", "1", "--cluster-yes"]);
    spec.log = Some(log.clone());
    spec.die_with_parent = true;
    let child = crate::process::spawn(&spec).map_err(|e| ClusterError::Process {
        node: "redis-cli --cluster create".into(),
        source: e,
    })?;
    let failed = |msg: String| {
        let tail = std::fs::read_to_string(&log).unwrap_or_default();
        let tail: Vec<&str> = tail.lines().rev().take(8).collect();
        ClusterError::Unhealthy {
            node: "redis-cli --cluster create".into(),
            msg: format!(
                "{msg}; see {}:\n{}",
                log.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            ),
        }
    };
    loop {
        if let Some(st) = child.try_wait() {
            return match st.success() {
                true => Ok(()),
                false => Err(failed(format!("exited with {st}"))),
            };
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            return Err(failed("did not finish in time".into()));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Ok when every node sees all `servers` and every slot served, and every
/// replica is streaming from its primary with its offset caught up; else
/// the first node that is not, and why.
pub async fn whole(servers: &[&Node], auth: &Auth, t: Duration) -> Result<(), (usize, String)> {
    let n = servers.len().to_string();
    for (i, s) in servers.iter().enumerate() {
        let info = rs::info_as(&s.addr, auth, t).await.map_err(|e| (i, e))?;
        let get = |k: &str| info.get(k).map(String::as_str).unwrap_or("?");
        if get("cluster_state") != "ok" || get("cluster_known_nodes") != n {
            return Err((
                i,
                format!(
                    "cluster_state {}, {} of {n} nodes known, {} of {} slots served",
                    get("cluster_state"),
                    get("cluster_known_nodes"),
                    get("cluster_slots_ok"),
                    rs::SLOTS
                ),
            ));
        }
    }
    for (i, s) in servers.iter().enumerate() {
        in_sync(&s.addr, auth, t).await.map_err(|e| (i, e))?;
    }
    Ok(())
}

/// Ok for a primary, or a replica whose link is up and whose offset has
/// caught up with its primary's.
pub async fn in_sync(addr: &str, auth: &Auth, t: Duration) -> Result<(), String> {
    let r = rs::replication_as(addr, auth, t).await?;
    if r.get("role").map(String::as_str) != Some("slave") {
        return Ok(());
    }
    let link = r.get("master_link_status").map_or("?", String::as_str);
    if link != "up" {
        return Err(format!("replica link {link}"));
    }
    let primary = format!(
        "{}:{}",
        r.get("master_host").map_or("", String::as_str),
        r.get("master_port").map_or("", String::as_str)
    );
    let mine: u64 = r
        .get("slave_repl_offset")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let theirs: u64 = rs::replication_as(&primary, auth, t)
        .await?
        .get("master_repl_offset")
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX);
    if mine >= theirs {
        Ok(())
    } else {
        Err(format!(
            "replica offset {mine} behind its primary {primary}'s {theirs}"
        ))
    }
}

/// The primary serving `key`'s slot, as the first answering node says.
pub async fn primary_of(c: &Cluster, key: &str) -> Result<Option<String>, ClusterError> {
    let slot = rs::key_slot(&rs::cluster_lock_key(key));
    let t = Duration::from_millis(800);
    let mut last = String::from("no node");
    for n in c.servers() {
        match rs::slot_owner_as(&n.addr, slot, &c.auth, t).await {
            Ok(a) => return Ok(a),
            Err(e) => last = e,
        }
    }
    Err(ClusterError::Query {
        endpoint: c.client_endpoints().join(","),
        msg: last,
    })
}

/// With `--endpoints`: every other node of the cluster (`CLUSTER NODES`
/// at the first endpoint that answers), as (name, address).
pub async fn servers_behind(
    endpoints: &[String],
    auth: &Auth,
    t: Duration,
) -> Result<Vec<(String, String)>, String> {
    let mut last = String::new();
    for e in endpoints {
        match rs::nodes_as(e, auth, t).await {
            Ok(ns) => {
                return Ok(ns
                    .into_iter()
                    .filter(|n| !endpoints.contains(&n.addr))
                    .enumerate()
                    .map(|(i, n)| (format!("node{}", i + 1), n.addr))
                    .collect())
            }
            Err(err) => last = err,
        }
    }
    Err(format!(
        "no endpoint answered CLUSTER NODES ({last}) (hint: --endpoints lists nodes of a Redis Cluster)"
    ))
}
