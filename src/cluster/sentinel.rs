//! Redis with replicas under Sentinel: one primary and `n - 1` replicas
//! (started with `repl-diskless-sync-delay 0`), three sentinels with
//! `down-after-milliseconds 1000` so a failover takes a second or two, and
//! primary discovery by asking the sentinels.
//!
//! Each sentinel's config names its own id, the replicas and the other
//! sentinels (`known-replica`, `known-sentinel`): left to discover them, a
//! sentinel learns the replicas from the primary's INFO, asked every 10 s
//! (a cluster took ~10 s to be ready when the replicas had not connected
//! at the first one), and the other sentinels from their hellos. Ready is
//! then when every sentinel has a live link to the primary, each replica
//! (whose INFO says its link to the primary is up) and the other sentinels.

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
    let replicas: Vec<u16> = (1..n).map(|i| base + i as u16).collect();
    let sentinels: Vec<u16> = (0..SENTINELS).map(|j| base + (n + j) as u16).collect();
    for (j, &port) in sentinels.iter().enumerate() {
        let name = format!("sentinel{}", j + 1);
        let data = dir.join(&name);
        let conf = data.join("sentinel.conf");
        // Sentinel rewrites its config file: keep it on a restart.
        if !conf.exists() {
            write_file(&conf, &config(port, &data, base, &replicas, &sentinels))?;
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

/// A sentinel's id: 40 hex digits, from its port (unique on the host).
fn sentinel_id(port: u16) -> String {
    format!("{port:040x}")
}

fn config(port: u16, data: &Path, primary: u16, replicas: &[u16], sentinels: &[u16]) -> String {
    let quorum = SENTINELS / 2 + 1;
    let m = SENTINEL_MASTER;
    let mut c = format!(
        "port {port}\nbind 127.0.0.1\nprotected-mode no\ndaemonize no\nlogfile \"\"\n\
         dir {data}\nsentinel resolve-hostnames no\n\
         sentinel myid {id}\n\
         sentinel monitor {m} 127.0.0.1 {primary} {quorum}\n\
         sentinel down-after-milliseconds {m} {DOWN_AFTER_MS}\n\
         sentinel failover-timeout {m} 10000\n\
         sentinel parallel-syncs {m} 1\n",
        data = data.display(),
        id = sentinel_id(port),
    );
    for r in replicas {
        c.push_str(&format!("sentinel known-replica {m} 127.0.0.1 {r}\n"));
    }
    for &s in sentinels.iter().filter(|&&s| s != port) {
        let id = sentinel_id(s);
        c.push_str(&format!("sentinel known-sentinel {m} 127.0.0.1 {s} {id}\n"));
    }
    c
}

/// After the last server's spawn, before the sentinels': wait (up to 3 s)
/// until the primary streams to every replica, so the sentinels' first
/// INFO of each replica finds its link up (else they ask again a second
/// later). Without it in time it goes on: the readiness wait reports.
pub(crate) async fn servers_spawned(c: &Cluster, n: &Node) {
    let servers: Vec<&Node> = c.servers().collect();
    if servers.last().map(|s| s.name.as_str()) != Some(n.name.as_str()) {
        return;
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    let want = servers.len() - 1;
    let t = Duration::from_millis(500);
    while Instant::now() < deadline && n.exited().is_none() {
        match rq::role_as(&servers[0].addr, &c.auth, t).await {
            Ok((r, k)) if r == "master" && k == want => return,
            _ => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    }
}

/// Wait until the primary streams to every replica and every sentinel
/// has a live link to the primary, to each replica (whose INFO it has
/// read, its link to the primary up) and to the other sentinels (else a
/// failover could not happen yet).
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
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

type Entry = HashMap<String, String>;

/// Whether an instance as a sentinel lists it is linked and seen up.
fn linked(e: &Entry) -> bool {
    let flags = e.get("flags").map(String::as_str).unwrap_or("");
    !flags
        .split(',')
        .any(|f| matches!(f, "disconnected" | "s_down" | "o_down"))
}

/// What a sentinel lacks to fail over, if anything.
fn lacks(master: &Entry, replicas: &[Entry], sentinels: &[Entry], want: usize) -> Option<String> {
    if !linked(master) {
        return Some(format!("sees the primary {:?}", master.get("flags")));
    }
    // INFO read (its refresh time counts from 0 until then), link up.
    let ready = |r: &&Entry| {
        let refreshed = r.get("info-refresh").and_then(|v| v.parse::<u64>().ok());
        linked(r)
            && refreshed.is_some_and(|ms| ms < 60_000)
            && r.get("master-link-status").map(String::as_str) == Some("ok")
    };
    let r = replicas.iter().filter(ready).count();
    let s = sentinels.iter().filter(|s| linked(s)).count();
    (r < want || s < SENTINELS - 1).then(|| {
        format!(
            "has live links to {r} of {want} replicas and {s} of {} other sentinels",
            SENTINELS - 1
        )
    })
}

async fn sentinel_ready(
    addr: &str,
    auth: &crate::auth::Auth,
    replicas: usize,
    t: Duration,
) -> Result<(), String> {
    let mut c = rq::connect_as(addr, auth, t).await?;
    let ask = |what: &'static str| {
        let mut cmd = ::redis::cmd("SENTINEL");
        cmd.arg(what).arg(SENTINEL_MASTER);
        cmd
    };
    let e = |e: ::redis::RedisError| e.to_string();
    let master: Entry = ask("MASTER").query_async(&mut c).await.map_err(e)?;
    let reps: Vec<Entry> = ask("REPLICAS").query_async(&mut c).await.map_err(e)?;
    let sens: Vec<Entry> = ask("SENTINELS").query_async(&mut c).await.map_err(e)?;
    match lacks(&master, &reps, &sens, replicas) {
        None => Ok(()),
        Some(why) => Err(why),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentinel_config_names_its_id_the_replicas_and_the_other_sentinels() {
        let c = config(
            7203,
            Path::new("/d"),
            7200,
            &[7201, 7202],
            &[7203, 7204, 7205],
        );
        let m = SENTINEL_MASTER;
        assert!(c.contains(&format!("sentinel myid {}\n", sentinel_id(7203))));
        assert!(c.contains(&format!("sentinel known-replica {m} 127.0.0.1 7201\n")));
        assert!(c.contains(&format!("sentinel known-replica {m} 127.0.0.1 7202\n")));
        let id = sentinel_id(7204);
        assert!(c.contains(&format!(
            "sentinel known-sentinel {m} 127.0.0.1 7204 {id}\n"
        )));
        assert!(!c.contains("127.0.0.1 7203 "), "not itself: {c}");
        // `monitor` before the lines that name its master.
        assert!(c.find("monitor").unwrap() < c.find("known-replica").unwrap());
        assert_eq!(sentinel_id(7204).len(), 40);
        assert_ne!(sentinel_id(7204), sentinel_id(7205));
    }

    fn entry(pairs: &[(&str, &str)]) -> Entry {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_sentinel_is_ready_once_linked_to_every_replica_and_sentinel() {
        let master = entry(&[("flags", "master")]);
        let replica = entry(&[
            ("flags", "slave"),
            ("info-refresh", "120"),
            ("master-link-status", "ok"),
        ]);
        let sentinel = entry(&[("flags", "sentinel")]);
        let two = [replica.clone(), replica.clone()];
        let others = [sentinel.clone(), sentinel.clone()];
        assert_eq!(lacks(&master, &two, &others, 2), None);
        // Known from the config but not linked yet, or its INFO not read.
        let unlinked = entry(&[("flags", "sentinel,disconnected")]);
        assert!(lacks(&master, &two, &[sentinel.clone(), unlinked], 2).is_some());
        let unread = entry(&[
            ("flags", "slave"),
            ("info-refresh", "1733600000000"),
            ("master-link-status", "err"),
        ]);
        let why = lacks(&master, &[replica.clone(), unread], &others, 2).unwrap();
        assert!(why.contains("1 of 2 replicas"), "{why}");
        let down = entry(&[("flags", "s_down,master,disconnected")]);
        assert!(lacks(&down, &two, &others, 2).is_some());
    }
}
