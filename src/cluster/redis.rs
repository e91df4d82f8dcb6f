//! Redis servers (single Redis and Redlock's independent nodes; Sentinel's
//! primary and replicas reuse [`server`]): command lines, the optional
//! libfaketime preload, and the PING / ROLE queries.

use super::node::{Node, NodeInfo, NodeRole, Ports};
use super::{ClusterError, ClusterSpec, Plan};
use crate::process::faketime::FAKETIME_PRELOAD;
use crate::process::{Cgroup, Spec};
use serde::{Deserialize, Serialize};
use std::path::Path;

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

/// The `appendfsync` policy lockjaw starts Redis nodes with.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Fsync {
    /// Write and fsync the AOF before replying.
    Always,
    /// Write before replying unless a background fsync is still running
    /// (then the write waits up to 2 s); fsync every second.
    #[default]
    Everysec,
    /// Write, and let the kernel flush it.
    No,
}

impl Fsync {
    pub fn name(self) -> &'static str {
        match self {
            Fsync::Always => "always",
            Fsync::Everysec => "everysec",
            Fsync::No => "no",
        }
    }
}

/// `process_id` from `INFO server`: the pid the server (or sentinel)
/// says it runs as (the proof of an attached node, [`super::proof`]).
pub async fn process_id(
    addr: &str,
    auth: &crate::auth::Auth,
    t: std::time::Duration,
) -> Result<u32, String> {
    let mut c = crate::client::redis_query::connect_as(addr, auth, t).await?;
    let info: String = ::redis::cmd("INFO")
        .arg("server")
        .query_async(&mut c)
        .await
        .map_err(|e| e.to_string())?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| "INFO server has no process_id".to_string())
}

/// [`process_id`] as what the server says of itself: the `identity` of
/// every Redis system's servers (and sentinels).
pub async fn says_pid(
    addr: &str,
    auth: &crate::auth::Auth,
    t: std::time::Duration,
) -> Result<Option<super::proof::ServerSays>, String> {
    process_id(addr, auth, t)
        .await
        .map(|p| Some(super::proof::ServerSays::Pid(p)))
}
