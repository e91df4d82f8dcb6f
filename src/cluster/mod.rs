//! Local clusters of real lock-service servers, one file per system (a
//! [`Servers`] value, which the service registry supplies, says which), and the
//! node handle nemeses use (pause, resume, kill, restart, leader discovery).
//!
//! [`Cluster::start`] starts the Debian binaries as plain processes on
//! loopback (own process group, own cgroup v2 leaf where the host has
//! one, optionally tied to lockjaw's lifetime). It writes the state file
//! `DIR/cluster.json` with every node and its cgroup before the first
//! spawn, records each process right after it is spawned, and waits until
//! the cluster is healthy. [`Cluster::from_endpoints`] wraps a cluster lockjaw
//! did not start (clients work; process faults are an error).
//! [`Cluster::attach`] reopens a cluster `lockjaw cluster up` left running.

mod as_user;
pub mod attached;
pub mod etcd;
pub mod hosts;
pub mod mariadb;
mod node;
pub mod ops;
mod plan;
pub mod postgres;
pub mod proof;
pub mod redis;
pub mod redis_cluster;
pub mod redlock;
pub mod sentinel;
mod servers;
pub mod state;
pub mod tmpdata;
pub mod zookeeper;

pub use node::{attach_plan, AttachedNode, Node, NodeRole, Ports, RemoteNode};
pub use plan::{At, Plan, RemoteFiles};
pub use servers::{FindServers, LeaderPoll, Servers};

use crate::process::{cgroup, Cgroup, Owner, ProcessError};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// What to start.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// The system's servers (its registry entry).
    pub system: &'static dyn Servers,
    /// Data nodes; `None` = the system's default.
    pub nodes: Option<usize>,
    /// First port; `None` = the system's default.
    pub base_port: Option<u16>,
    /// Data dirs, logs (`DIR/logs`) and the state file (`DIR/cluster.json`).
    pub dir: PathBuf,
    /// Start Redis nodes under libfaketime with a per-node control file.
    pub faketime: bool,
    /// Redis nodes: `appendfsync` of their append-only file (`None`:
    /// `everysec`, Redis' default).
    pub appendfsync: Option<redis::Fsync>,
    /// Leave the servers running when the `Cluster` value is dropped or
    /// lockjaw exits (`cluster up`); otherwise they die with lockjaw.
    pub detached: bool,
    /// Put each node in its own cgroup v2 (needed by partition nemeses).
    pub cgroups: bool,
    /// How long to wait for the cluster to become healthy.
    pub health_timeout: Duration,
    /// The cgroup group the nodes go in (`lockjaw/GROUP/NODE`): a run's id,
    /// so two runs never share one; `None` = `SYSTEM-BASEPORT`.
    pub group: Option<String>,
    /// `--auth`: what its health checks present (servers lockjaw starts
    /// itself take none; see `Cluster::auth`).
    pub auth: std::sync::Arc<crate::auth::Auth>,
}

impl ClusterSpec {
    pub fn new(system: &'static dyn Servers, dir: impl Into<PathBuf>) -> ClusterSpec {
        ClusterSpec {
            system,
            nodes: None,
            base_port: None,
            dir: dir.into(),
            faketime: false,
            appendfsync: None,
            detached: false,
            cgroups: true,
            health_timeout: Duration::from_secs(30),
            group: None,
            auth: Default::default(),
        }
    }

    pub fn node_count(&self) -> usize {
        self.nodes.unwrap_or(self.system.default_nodes())
    }

    pub fn base(&self) -> u16 {
        self.base_port.unwrap_or(self.system.default_base_port())
    }

    /// How many consecutive ports from the base port the plan uses.
    pub fn port_span(&self) -> usize {
        self.system.port_span(self.node_count())
    }
}

/// Why a cluster operation failed. Messages name the node and its log.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    #[error("{0}")]
    Usage(String),
    #[error("port {port} on 127.0.0.1 is in use (hint: pick other ports with --base-port, or stop what holds it)")]
    PortInUse { port: u16 },
    #[error("node {node}: {source}")]
    Process {
        node: String,
        #[source]
        source: ProcessError,
    },
    /// A node exited during start-up or never became healthy; the message
    /// names the node, its address, the reason and its log (with its tail).
    #[error("node {node}: {msg}")]
    Unhealthy { node: String, msg: String },
    #[error("{0}")]
    Io(String),
    #[error("node {node}: {what} is unavailable: lockjaw did not start this cluster (--endpoints) (hint: let lockjaw start a local cluster, or choose a fault that needs no process handle)")]
    NoProcess { node: String, what: String },
    #[error("node {node} was not started under libfaketime (hint: start the cluster with --faketime; only Redis nodes support it)")]
    NoFaketime { node: String },
    #[error("no node named {0}")]
    NoSuchNode(String),
    #[error("{endpoint}: {msg}")]
    Query { endpoint: String, msg: String },
}

/// How lockjaw relates to a cluster's processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Started by this lockjaw; die with it unless detached.
    Owned,
    /// Started by an earlier `cluster up`, reopened from its state file.
    Attached,
    /// Not started by lockjaw (`--endpoints`): no process faults.
    Endpoints,
    /// Not started by lockjaw, attached to on their hosts (`--attach`):
    /// faults through each node's found processes; never stopped.
    Adopted,
}

/// A running cluster.
#[derive(Debug)]
pub struct Cluster {
    pub system: &'static dyn Servers,
    pub mode: Mode,
    /// The directory with data, logs and the state file (`None` for `--endpoints`).
    pub dir: Option<PathBuf>,
    pub base_port: u16,
    pub faketime: bool,
    pub detached: bool,
    /// The cgroup group of the nodes (`lockjaw/NAME`), owned by `dir`.
    pub group: Option<String>,
    /// `--auth`: the credentials its probes and queries use (none by
    /// default; the runner sets them before the first query).
    pub auth: std::sync::Arc<crate::auth::Auth>,
    nodes: Vec<Node>,
    closed: std::sync::Mutex<bool>,
    /// A cluster lockjaw started: how long its processes took to spawn
    /// (the rest of its start was the wait for health).
    pub spawned_in: Option<Duration>,
}

impl Cluster {
    /// Start a cluster as `spec` says and wait until it is healthy. On any
    /// error every process already started is stopped again.
    pub async fn start(spec: &ClusterSpec) -> Result<Cluster, ClusterError> {
        if spec.node_count() == 0 {
            return Err(ClusterError::Usage("--nodes must be at least 1".into()));
        }
        let dir = absolute(&spec.dir)?;
        std::fs::create_dir_all(dir.join("logs")).map_err(|e| io_err(&dir, e))?;
        let plans = plan(spec, &dir)?;
        for p in &plans {
            for port in p.ports.all() {
                check_port_free(port)?;
            }
        }
        let group = plans
            .iter()
            .find_map(|n| n.cgroup.as_ref())
            .and_then(|c| cgroup::split_leaf(&c.iptables_path))
            .map(|(g, _)| g);
        let cluster = Cluster {
            system: spec.system,
            mode: Mode::Owned,
            dir: Some(dir.clone()),
            base_port: spec.base(),
            faketime: spec.faketime,
            detached: spec.detached,
            group,
            auth: spec.auth.clone(),
            nodes: plans,
            closed: std::sync::Mutex::new(false),
            spawned_in: None,
        };
        // The intent first: every node and its cgroup, before anything
        // exists that would need stopping or removing.
        cluster.write_state()?;
        if let Some(g) = &cluster.group {
            let owner = Owner::of_dir(&dir).map_err(|e| io_err(&dir, e))?;
            Cgroup::create_group(g, owner.tag()).map_err(ClusterError::Io)?;
        }
        cluster.spawn_or_close(spec).await
    }

    /// Start every node and wait until the cluster is healthy; a failed
    /// start leaves nothing running, detached or not.
    pub(crate) async fn spawn_or_close(
        mut self,
        spec: &ClusterSpec,
    ) -> Result<Cluster, ClusterError> {
        match self.spawn_all_and_wait(spec).await {
            Ok(spawned) => {
                self.spawned_in = Some(spawned);
                Ok(self)
            }
            Err(e) => {
                if let Err(ce) = self.close() {
                    tracing::warn!("cleaning up after a failed start: {ce}");
                }
                Err(e)
            }
        }
    }

    /// How long the spawns took (the rest was the wait for health).
    async fn spawn_all_and_wait(&self, spec: &ClusterSpec) -> Result<Duration, ClusterError> {
        let start = Instant::now();
        for n in &self.nodes {
            // Record each process right after its spawn. A lockjaw killed
            // in between leaves it in its node's cgroup, which the intent
            // written before lists: `cluster down` and `heal` empty it.
            n.spawn(spec.detached)?;
            self.write_state()?;
            self.system.spawned(self, n).await;
        }
        let spawned = start.elapsed();
        self.wait_healthy(spec.health_timeout).await?;
        Ok(spawned)
    }

    /// A cluster lockjaw did not start: client endpoints only.
    pub fn from_endpoints(
        system: &'static dyn Servers,
        endpoints: &[String],
    ) -> Result<Cluster, ClusterError> {
        if endpoints.is_empty() {
            return Err(ClusterError::Usage(
                "--endpoints needs at least one host:port".into(),
            ));
        }
        let nodes = endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| Node::external(system.name(), i, e))
            .collect();
        let mut c = Cluster::empty(system);
        c.nodes = nodes;
        Ok(c)
    }

    /// The cluster of a system without servers (`cas`): no nodes, nothing
    /// to start, stop or fault. (Also the base of an `--endpoints` one.)
    pub fn empty(system: &'static dyn Servers) -> Cluster {
        Cluster {
            system,
            mode: Mode::Endpoints,
            dir: None,
            base_port: 0,
            faketime: false,
            detached: true,
            group: None,
            auth: Default::default(),
            nodes: vec![],
            closed: std::sync::Mutex::new(true),
            spawned_in: None,
        }
    }

    /// Reopen a cluster that `lockjaw cluster up` left running in `dir`;
    /// `find` names the system's servers by the name its state file records.
    pub fn attach(dir: &Path, find: FindServers) -> Result<Cluster, ClusterError> {
        let st = state::read(dir)?;
        let system = find(&st.system).ok_or_else(|| {
            ClusterError::Io(format!(
                "{}: unknown system {:?}",
                state::path(dir).display(),
                st.system
            ))
        })?;
        Ok(Cluster {
            system,
            mode: Mode::Attached,
            dir: Some(dir.to_path_buf()),
            base_port: st.base_port,
            faketime: st.faketime,
            detached: true,
            group: st.group,
            auth: Default::default(),
            nodes: st.nodes.into_iter().map(Node::from_info).collect(),
            closed: std::sync::Mutex::new(false),
            spawned_in: None,
        })
    }

    /// Whether its nodes run on other hosts (`--hosts`).
    pub fn on_hosts(&self) -> bool {
        self.nodes.iter().any(|n| n.remote.is_some())
    }

    /// Every node, servers and sentinels.
    pub fn nodes(&self) -> &[Node] {
        &self.nodes
    }

    /// The node called `name`.
    pub fn node(&self, name: &str) -> Result<&Node, ClusterError> {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .ok_or_else(|| ClusterError::NoSuchNode(name.to_string()))
    }

    /// The data nodes (not sentinels).
    pub fn servers(&self) -> impl Iterator<Item = &Node> {
        self.nodes.iter().filter(|n| n.role != NodeRole::Sentinel)
    }

    /// What a lock client connects to: every server, or for Sentinel the
    /// sentinels (the client asks them for the primary).
    pub fn client_endpoints(&self) -> Vec<String> {
        let role = self.system.client_role();
        self.nodes
            .iter()
            .filter(|n| n.role == role)
            .map(|n| n.addr.clone())
            .collect()
    }

    /// The current leader (etcd, ZooKeeper) or primary (Sentinel; for the
    /// plain Redis systems every node is its own primary: the first one).
    /// `None` when no node claims leadership right now.
    pub async fn leader(&self) -> Result<Option<&Node>, ClusterError> {
        let addr = self.system.leader_addr(self).await?;
        Ok(addr.and_then(|a| self.nodes.iter().find(|n| n.addr == a)))
    }

    /// The node that serves lock key `key`: the leader, or for a system
    /// that shards keys (Redis Cluster) the primary of the key's slot.
    pub async fn leader_of(&self, key: &str) -> Result<Option<&Node>, ClusterError> {
        let addr = self.system.key_primary_addr(self, key).await?;
        Ok(addr.and_then(|a| self.nodes.iter().find(|n| n.addr == a)))
    }

    /// The server software's version, from the first server that answers
    /// (Redis `INFO server`, etcd status, ZooKeeper `srvr`); works for
    /// `--endpoints` clusters too.
    pub async fn version(&self) -> Result<String, ClusterError> {
        let t = Duration::from_secs(2);
        let mut last = String::from("no server");
        for n in self.servers() {
            match self.system.version(&n.addr, n.role, &self.auth, t).await {
                Ok(v) => return Ok(v),
                Err(e) => last = e,
            }
        }
        Err(ClusterError::Query {
            endpoint: self.client_endpoints().join(","),
            msg: last,
        })
    }

    /// `Servers::settings` of the first server that answers (else none).
    pub async fn settings(&self) -> std::collections::BTreeMap<String, String> {
        let t = Duration::from_secs(2);
        for n in self.servers() {
            if let Ok(s) = self.system.settings(&n.addr, &self.auth, t).await {
                return s.into_iter().collect();
            }
        }
        Default::default()
    }

    /// Stop and start a node again on its data dir; waits until it answers.
    pub async fn restart(&self, node: &Node, timeout: Duration) -> Result<(), ClusterError> {
        node.kill()?;
        node.spawn(self.detached)?;
        self.write_state()?;
        let deadline = Instant::now() + timeout;
        self.wait_node(node, deadline, timeout).await
    }

    async fn wait_healthy(&self, timeout: Duration) -> Result<(), ClusterError> {
        let deadline = Instant::now() + timeout;
        let waits = self
            .nodes
            .iter()
            .map(|n| self.wait_node(n, deadline, timeout));
        for r in futures::future::join_all(waits).await {
            r?;
        }
        self.system
            .wait_cluster_ready(self, deadline, timeout)
            .await
    }

    /// Poll one node's health check until it passes, the node exits, or
    /// the deadline passes.
    async fn wait_node(
        &self,
        n: &Node,
        deadline: Instant,
        timeout: Duration,
    ) -> Result<(), ClusterError> {
        loop {
            let why = match self.probe(n).await {
                Ok(()) => return Ok(()),
                Err(why) => why,
            };
            if let Some(status) = n.exited() {
                return Err(ClusterError::Unhealthy {
                    node: n.name.clone(),
                    msg: format!(
                        "exited during start-up ({status}); see its log {}{}",
                        n.log.display(),
                        n.log_tail()
                    ),
                });
            }
            if Instant::now() >= deadline {
                return Err(n.unhealthy(timeout, why));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// One health check of one node.
    pub async fn probe(&self, n: &Node) -> Result<(), String> {
        let t = Duration::from_secs(1);
        self.system.probe(&n.addr, n.role, &self.auth, t).await
    }

    /// Write the state file (after each spawn, restart and stop); none
    /// for attached servers (nothing of theirs is lockjaw's to stop).
    pub fn write_state(&self) -> Result<(), ClusterError> {
        let Some(dir) = self.dir.as_ref().filter(|_| self.mode != Mode::Adopted) else {
            return Ok(());
        };
        state::write(
            dir,
            &state::State {
                version: 1,
                system: self.system.name().to_string(),
                base_port: self.base_port,
                faketime: self.faketime,
                detached: self.detached,
                group: self.group.clone(),
                nodes: self.nodes.iter().map(Node::info).collect(),
                stop_together: self.system.stop_together(),
            },
        )
    }

    /// Stop every node (SIGCONT, SIGTERM, grace, SIGKILL) and remove their
    /// cgroups. Idempotent. Works in attached mode too; a no-op for
    /// `--endpoints`.
    pub fn close(&self) -> Result<(), ClusterError> {
        let mut closed = self.closed.lock().unwrap_or_else(|e| e.into_inner());
        if *closed {
            return Ok(());
        }
        let mut first_err = None;
        self.fetch_remote_logs();
        // Sentinels first, so they do not fail over while servers stop.
        for n in self.nodes.iter().rev() {
            if let Err(e) = n.stop() {
                first_err.get_or_insert(e);
            }
        }
        // The group goes once its leaves are gone (a run's workers may
        // still be in it: the run's own undo entry removes it then).
        if let Some(g) = self.group.as_ref().and_then(|g| Cgroup::under_root(g)) {
            Cgroup::remove_if_empty(&g.dir);
        }
        let _ = self.write_state();
        *closed = true;
        first_err.map_or(Ok(()), Err)
    }

    /// Leave the servers running (tracked by the state file) and forget them.
    pub fn detach(self) {
        *self.closed.lock().unwrap_or_else(|e| e.into_inner()) = true;
        for n in &self.nodes {
            n.detach();
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.detached {
            return;
        }
        if let Err(e) = self.close() {
            tracing::warn!("closing the {} cluster: {e}", self.system);
        }
    }
}

fn plan(spec: &ClusterSpec, dir: &Path) -> Result<Vec<Node>, ClusterError> {
    let base = spec.base();
    let n = spec.node_count();
    let top = base as usize + spec.port_span();
    if top > u16::MAX as usize + 1 {
        return Err(ClusterError::Usage(format!(
            "--base-port {base} is too high for {n} nodes"
        )));
    }
    let group = spec
        .group
        .clone()
        .unwrap_or_else(|| format!("{}-{base}", spec.system));
    let cg = |name: &str| {
        spec.cgroups
            .then(|| Cgroup::under_root(&format!("lockjaw/{group}/{name}")))
            .flatten()
    };
    spec.system.plan(&Plan {
        spec,
        dir,
        n,
        base,
        cg: &cg,
        at: None,
        files: None,
    })
}

fn check_port_free(port: u16) -> Result<(), ClusterError> {
    std::net::TcpListener::bind(("127.0.0.1", port))
        .map(drop)
        .map_err(|_| ClusterError::PortInUse { port })
}

fn absolute(p: &Path) -> Result<PathBuf, ClusterError> {
    std::path::absolute(p).map_err(|e| io_err(p, e))
}

pub(crate) fn io_err(p: &Path, e: std::io::Error) -> ClusterError {
    ClusterError::Io(format!("{}: {e}", p.display()))
}

pub(crate) fn write_file(p: &Path, text: &str) -> Result<(), ClusterError> {
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d).map_err(|e| io_err(d, e))?;
    }
    std::fs::write(p, text).map_err(|e| io_err(p, e))
}
