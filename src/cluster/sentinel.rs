//! Redis with replicas under Sentinel: one primary and `n - 1` replicas
//! (started with `repl-diskless-sync-delay 0`), three sentinels with
//! `down-after-milliseconds 1000` so a failover takes a second or two, and
//! primary discovery by asking the sentinels.

use super::node::{Node, NodeInfo, NodeRole, Ports};
use super::redis;
use super::{write_file, Cluster, ClusterError, Plan};
use crate::client::redis_query as rq;
use crate::client::SENTINEL_MASTER;
use crate::process::Spec;
use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

/// Sentinels per cluster (quorum 2).
pub const SENTINELS: usize = 3;
/// Sentinel's `down-after-milliseconds`.
pub const DOWN_AFTER_MS: u64 = 1000;

pub(crate) fn plan(p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
    let (spec, dir, n, base, cg) = p.parts();
    let mut nodes: Vec<Node> = (0..n)
        .map(|i| {
            let replica_of = (i > 0).then_some(base);
            redis::server(
                spec,
                redis::Where::local(dir),
                &format!("redis{}", i + 1),
                base + i as u16,
                replica_of,
                cg,
            )
        })
        .collect();
    for j in 0..SENTINELS {
        let name = format!("sentinel{}", j + 1);
        let port = base + (n + j) as u16;
        let data = dir.join(&name);
        let conf = data.join("sentinel.conf");
        // Sentinel rewrites its config file: keep it on a restart.
        if !conf.exists() {
            write_file(&conf, &config(port, &data, base))?;
        }
        let mut launch = Spec::new("redis-sentinel").arg(conf.display().to_string());
        launch.log = Some(dir.join("logs").join(format!("{name}.log")));
        nodes.push(Node::planned(NodeInfo {
            name: name.clone(),
            role: NodeRole::Sentinel,
            addr: format!("127.0.0.1:{port}"),
            ports: Ports {
                client: port,
                ..Ports::default()
            },
            log: launch.log.clone().unwrap_or_default(),
            data_dir: data,
            cgroup: cg(&name),
            faketime_file: None,
            launch: Some(launch),
            proc: None,
            remote: None,
        }));
    }
    Ok(nodes)
}

fn config(port: u16, data: &Path, primary: u16) -> String {
    let quorum = SENTINELS / 2 + 1;
    format!(
        "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\nlogfile \"\"\n\
         dir {data}\nsentinel resolve-hostnames no\n\
         sentinel monitor {m} 127.0.0.1 {primary} {quorum}\n\
         sentinel down-after-milliseconds {m} {DOWN_AFTER_MS}\n\
         sentinel failover-timeout {m} 10000\n\
         sentinel parallel-syncs {m} 1\n",
        data = data.display(),
        m = SENTINEL_MASTER,
    )
}

/// Wait until the primary streams to every replica and every sentinel
/// knows all replicas and the other sentinels (else a failover could not
/// happen yet).
pub(crate) async fn wait_ready(
    c: &Cluster,
    deadline: Instant,
    waited: Duration,
) -> Result<(), ClusterError> {
    let servers: Vec<&Node> = c.servers().collect();
    let want_replicas = servers.len() - 1;
    let t = Duration::from_secs(1);
    loop {
        let mut why = None;
        match rq::role_as(&servers[0].addr, &c.auth, t).await {
            Ok((r, k)) if r == "master" && k == want_replicas => {}
            Ok((r, k)) => {
                why = Some((
                    servers[0],
                    format!("role {r} with {k} of {want_replicas} replicas"),
                ))
            }
            Err(e) => why = Some((servers[0], e)),
        }
        if why.is_none() {
            for s in c.nodes().iter().filter(|n| n.role == NodeRole::Sentinel) {
                if let Err(e) = sentinel_ready(&s.addr, &c.auth, want_replicas, t).await {
                    why = Some((s, e));
                    break;
                }
            }
        }
        let Some((node, why)) = why else {
            return Ok(());
        };
        if Instant::now() >= deadline {
            return Err(node.unhealthy(waited, why));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn sentinel_ready(
    addr: &str,
    auth: &crate::auth::Auth,
    replicas: usize,
    t: Duration,
) -> Result<(), String> {
    let mut c = rq::connect_as(addr, auth, t).await?;
    let m: HashMap<String, String> = ::redis::cmd("SENTINEL")
        .arg("MASTER")
        .arg(SENTINEL_MASTER)
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    let num = |k: &str| m.get(k).and_then(|v| v.parse::<usize>().ok()).unwrap_or(0);
    let (r, s) = (num("num-slaves"), num("num-other-sentinels"));
    if r >= replicas && s >= SENTINELS - 1 {
        Ok(())
    } else {
        Err(format!(
            "knows {r} of {replicas} replicas and {s} of {} other sentinels",
            SENTINELS - 1
        ))
    }
}

/// The primary most sentinels name (announced address).
pub(crate) async fn primary_addr(c: &Cluster) -> Result<Option<String>, ClusterError> {
    let sentinels = c.client_endpoints();
    let t = Duration::from_millis(800);
    let answers = futures::future::join_all(
        sentinels
            .iter()
            .map(|s| rq::ask_primary_as(s, SENTINEL_MASTER, &c.auth, t)),
    )
    .await;
    let mut votes: HashMap<String, usize> = HashMap::new();
    let mut last_err = None;
    for a in answers {
        match a {
            Ok(addr) => *votes.entry(addr).or_default() += 1,
            Err(e) => last_err = Some(e),
        }
    }
    if votes.is_empty() {
        return Err(ClusterError::Query {
            endpoint: sentinels.join(","),
            msg: last_err.unwrap_or_else(|| "no sentinel answered".into()),
        });
    }
    Ok(votes.into_iter().max_by_key(|(_, v)| *v).map(|(a, _)| a))
}
