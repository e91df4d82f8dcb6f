//! Redis servers (single Redis and Redlock's independent nodes; Sentinel's
//! primary and replicas reuse [`server`]): command lines, the optional
//! libfaketime preload, and the PING / ROLE queries.

use super::node::{Node, NodeInfo, NodeRole, Ports};
use super::{ClusterError, ClusterSpec, Plan};
use crate::process::faketime::FAKETIME_PRELOAD;
use crate::process::{Cgroup, Spec};
use std::path::Path;
use std::time::Duration;

pub(crate) type CgroupFor<'a> = &'a dyn Fn(&str) -> Option<Cgroup>;

/// `n` independent Redis servers on `base`, `base + 1`, ...
pub(crate) fn plan(p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
    let (spec, _, n, _, cg) = p.parts();
    let prefix = spec.system.name();
    Ok((0..n)
        .map(|i| {
            let at = Where {
                ip: &p.ip(i),
                dir: &p.dir_of(i),
                remote: p.at.is_some(),
            };
            server(
                spec,
                at,
                &format!("{prefix}{}", i + 1),
                p.port(i, 1, 0),
                None,
                cg,
            )
        })
        .collect())
}

/// Where a Redis server runs: the address it binds, the directory its
/// data and log go under, and whether that is on a remote host (whose
/// directories lockjaw makes there, not here).
#[derive(Clone, Copy)]
pub(crate) struct Where<'a> {
    pub ip: &'a str,
    pub dir: &'a Path,
    pub remote: bool,
}

impl<'a> Where<'a> {
    /// On this host's loopback, under `dir`.
    pub fn local(dir: &'a Path) -> Where<'a> {
        Where {
            ip: "127.0.0.1",
            dir,
            remote: false,
        }
    }
}

/// One Redis server; `replica_of` makes it a replica of that port.
pub(crate) fn server(
    spec: &ClusterSpec,
    at: Where<'_>,
    name: &str,
    port: u16,
    replica_of: Option<u16>,
    cg: CgroupFor<'_>,
) -> Node {
    let (ip, dir) = (at.ip, at.dir);
    let data = dir.join(name);
    if !at.remote {
        let _ = std::fs::create_dir_all(&data);
    }
    let mut launch = Spec::new("redis-server").args([
        "--port".to_string(),
        port.to_string(),
        "--bind".into(),
        ip.to_string(),
        "--protected-mode".into(),
        "no".into(),
        "--dir".into(),
        data.display().to_string(),
        "--save".into(),
        String::new(),
        // Restart with its data: the AOF, fsynced every second (Redis'
        // default) unless the nemesis asks for another policy.
        "--appendonly".into(),
        "yes".into(),
        "--appendfsync".into(),
        spec.appendfsync.unwrap_or_default().name().into(),
        "--daemonize".into(),
        "no".into(),
        "--logfile".into(),
        String::new(),
        // Replicas sync at once instead of after 5 s.
        "--repl-diskless-sync".into(),
        "yes".into(),
        "--repl-diskless-sync-delay".into(),
        "0".into(),
    ]);
    if at.remote {
        // Keep its environment readable in /proc: on a host its processes
        // are found by the LOCKJAW_TAG there, which a process title
        // written over the environment's memory would erase.
        launch = launch.args(["--set-proc-title", "no"]);
    }
    if let Some(p) = replica_of {
        launch = launch.args(["--replicaof".to_string(), ip.to_string(), p.to_string()]);
    }
    let faketime_file = spec
        .faketime
        .then(|| dir.join("faketime").join(format!("{name}.offset")));
    if let Some(f) = &faketime_file {
        launch = launch
            .env("LD_PRELOAD", FAKETIME_PRELOAD)
            .env("FAKETIME_TIMESTAMP_FILE", f.display().to_string())
            .env("FAKETIME_NO_CACHE", "1")
            // Only the wall clock steps (as NTP would); Redis' timers run on.
            .env("FAKETIME_DONT_FAKE_MONOTONIC", "1");
    }
    launch.log = Some(dir.join("logs").join(format!("{name}.log")));
    Node::planned(NodeInfo {
        name: name.to_string(),
        role: NodeRole::Server,
        addr: format!("{ip}:{port}"),
        ports: Ports {
            client: port,
            ..Ports::default()
        },
        log: launch.log.clone().unwrap_or_default(),
        data_dir: data,
        cgroup: cg(name),
        faketime_file,
        launch: Some(launch),
        proc: None,
        remote: None,
    })
}

/// A multiplexed connection with connect and response timeouts.
pub async fn connect(addr: &str, t: Duration) -> Result<redis::aio::MultiplexedConnection, String> {
    let client = redis::Client::open(format!("redis://{addr}/")).map_err(|e| e.to_string())?;
    let cfg = redis::AsyncConnectionConfig::new()
        .set_connection_timeout(Some(t))
        .set_response_timeout(Some(t));
    client
        .get_multiplexed_async_connection_with_config(&cfg)
        .await
        .map_err(|e| e.to_string())
}

/// PING: Ok when the server (or sentinel) answers PONG.
pub async fn ping(addr: &str, t: Duration) -> Result<(), String> {
    let mut c = connect(addr, t).await?;
    let pong: String = redis::cmd("PING")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    if pong == "PONG" {
        Ok(())
    } else {
        Err(format!("PING answered {pong:?}"))
    }
}

/// `ROLE`: "master", "slave" or "sentinel", and for a master the number of
/// replicas it streams to.
pub async fn role(addr: &str, t: Duration) -> Result<(String, usize), String> {
    let mut c = connect(addr, t).await?;
    let v: redis::Value = redis::cmd("ROLE")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    let redis::Value::Array(items) = v else {
        return Err(format!("ROLE answered {v:?}"));
    };
    let name: String = items
        .first()
        .and_then(|x| redis::from_redis_value_ref(x).ok())
        .ok_or("ROLE answered no role")?;
    let replicas = match items.get(2) {
        Some(redis::Value::Array(r)) if name == "master" => r.len(),
        _ => 0,
    };
    Ok((name, replicas))
}

/// `redis_version` from `INFO server`, e.g. `redis 7.0.15`.
pub async fn version(addr: &str, t: Duration) -> Result<String, String> {
    let mut c = connect(addr, t).await?;
    let info: String = redis::cmd("INFO")
        .arg("server")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    info.lines()
        .find_map(|l| l.strip_prefix("redis_version:"))
        .map(|v| format!("redis {}", v.trim()))
        .ok_or_else(|| "INFO server has no redis_version".to_string())
}
