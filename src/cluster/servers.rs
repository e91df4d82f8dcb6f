//! [`Servers`]: what the cluster layer needs to know of one system's
//! servers (how to plan a local cluster, probe a node, read its version,
//! find its leader). Each service registry entry implements it; a
//! [`super::ClusterSpec`] and a [`super::Cluster`] carry one, so this
//! layer never asks the registry.
//!
//! Every query takes the credentials of `--auth` (`Auth::default()`, none,
//! without it): a [`Cluster`] carries them in `Cluster::auth`, so its
//! probes, version, settings and leader queries use what the clients use,
//! whether lockjaw started the cluster, was given `--endpoints`, or
//! attaches to servers that run already.

use super::{Cluster, ClusterError, Node, NodeRole, Plan};
use crate::auth::Auth;
use async_trait::async_trait;
use std::time::{Duration, Instant};

/// One leader lookup ([`Servers::poll_leader`]): the address of the
/// server that leads, if one claims it, and what each server asked
/// answered (its address; its view of the leadership, or why it gave
/// none). Systems whose leader is not asked of each server (the Redis
/// family, where it is the first node or the primary a sentinel names)
/// leave `answers` empty.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LeaderPoll {
    pub leader: Option<String>,
    pub answers: Vec<(String, Result<String, String>)>,
}

impl LeaderPoll {
    /// The leader; `Ok(None)` when servers answered but none leads; an
    /// error naming the last failure when no server answered at all.
    pub fn leader_or_error(self) -> Result<Option<String>, ClusterError> {
        if self.leader.is_some() || self.answers.iter().any(|(_, r)| r.is_ok()) {
            return Ok(self.leader);
        }
        let endpoint: Vec<&str> = self.answers.iter().map(|(a, _)| a.as_str()).collect();
        let msg = (self.answers.iter().rev())
            .find_map(|(a, r)| r.as_ref().err().map(|e| format!("{a}: {e}")))
            .unwrap_or_else(|| "no server to ask".into());
        Err(ClusterError::Query {
            endpoint: endpoint.join(","),
            msg,
        })
    }
}

/// One system's servers, as the cluster layer starts, probes and queries
/// them.
#[async_trait]
pub trait Servers: Sync {
    /// The `--system` name (also the name in `cluster.json`).
    fn name(&self) -> &'static str;
    /// Default number of data nodes of a local cluster.
    fn default_nodes(&self) -> usize;
    /// Default first port of a local cluster.
    fn default_base_port(&self) -> u16;
    /// The client port of a node on a host (`--hosts`) whose entry names
    /// no `base_port`: the system's usual one; its peer ports follow it.
    fn host_base_port(&self) -> u16 {
        self.default_base_port()
    }
    /// Consecutive ports a local cluster of `n` data nodes takes from its
    /// base port (default: one per server).
    fn port_span(&self, n: usize) -> usize {
        n
    }
    /// What `lockjaw cluster status` calls the node that leads, if any.
    fn leader_word(&self) -> Option<&'static str>;
    /// The nodes of a local cluster: their names, ports, data dirs and
    /// command lines.
    fn plan(&self, p: &Plan<'_>) -> Result<Vec<Node>, ClusterError>;
    /// One health check of the node at `addr`.
    async fn probe(
        &self,
        addr: &str,
        role: NodeRole,
        auth: &Auth,
        t: Duration,
    ) -> Result<(), String>;
    /// Whether the servers may be stopped all at once (default yes). No
    /// for etcd: a leader that stops hands its leadership to a member and
    /// waits for it to be taken, which members stopping too never do.
    fn stop_together(&self) -> bool {
        true
    }
    /// Right after node `n` of a starting cluster is spawned, before the
    /// next one is: wait until it is far enough along for the next to
    /// start (default: no wait).
    async fn spawned(&self, _c: &Cluster, _n: &Node) {}
    /// After every node answers: wait until the cluster as a whole is ready
    /// (a leader elected, replicas known). Default: it is once every node
    /// answers.
    async fn wait_cluster_ready(
        &self,
        _c: &Cluster,
        _deadline: Instant,
        _waited: Duration,
    ) -> Result<(), ClusterError> {
        Ok(())
    }
    /// The server software's version, as the node at `addr` reports it.
    async fn version(
        &self,
        addr: &str,
        role: NodeRole,
        auth: &Auth,
        t: Duration,
    ) -> Result<String, String>;
    /// Settings the verdicts depend on, as the node at `addr` reports them
    /// (for `run.json`); default: none.
    async fn settings(
        &self,
        _addr: &str,
        _auth: &Auth,
        _t: Duration,
    ) -> Result<Vec<(String, String)>, String> {
        Ok(vec![])
    }
    /// The address of the current leader or primary, if any node claims it
    /// (default: the first server, for systems without a leader).
    async fn leader_addr(&self, c: &Cluster) -> Result<Option<String>, ClusterError> {
        Ok(c.servers().next().map(|n| n.addr.clone()))
    }
    /// The address of the primary that serves lock key `key` (Redis
    /// Cluster: the primary of the key's slot); default: the leader.
    async fn key_primary_addr(
        &self,
        c: &Cluster,
        _key: &str,
    ) -> Result<Option<String>, ClusterError> {
        self.leader_addr(c).await
    }
    /// One lookup of the server that serves lock key `key`, with each
    /// server's answer where the system asks each (etcd, ZooKeeper).
    /// Default: [`Servers::key_primary_addr`], no answers.
    async fn poll_leader(&self, c: &Cluster, key: &str) -> Result<LeaderPoll, ClusterError> {
        Ok(LeaderPoll {
            leader: self.key_primary_addr(c, key).await?,
            answers: Vec::new(),
        })
    }
    /// How many keys whose name starts with `prefix` the server at
    /// `addr` holds (`--attach` refuses to start over a run's own keys),
    /// asked with the run's credentials `auth`; `None` where the system
    /// cannot say. Default: `None`.
    async fn keys_with_prefix(
        &self,
        _addr: &str,
        _prefix: &str,
        _auth: &Auth,
        _t: Duration,
    ) -> Result<Option<u64>, String> {
        Ok(None)
    }
    /// How many entries of lock key `key` the cluster `c` still holds:
    /// the key itself, or the lock nodes beneath it where the system's
    /// lock lives under the key (etcd's lease keys, ZooKeeper's
    /// sequential nodes). After a run, anything here is what it left (a
    /// holder's lease not yet run out, an orphan still renewing), and a
    /// campaign does not give the cluster to another run. `None` where
    /// lockjaw cannot say (default).
    async fn lock_keys_left(&self, _c: &Cluster, _key: &str) -> Result<Option<u64>, String> {
        Ok(None)
    }
    /// What the server at `addr` says of its own process, for the proof
    /// that an attached node's found process is it ([`super::proof`]);
    /// default: `None`, the system says nothing of the kind.
    async fn identity(
        &self,
        _addr: &str,
        _role: NodeRole,
        _auth: &Auth,
        _t: Duration,
    ) -> Result<Option<super::proof::ServerSays>, String> {
        Ok(None)
    }
    /// Which nodes lock clients connect to (default: the servers).
    fn client_role(&self) -> NodeRole {
        NodeRole::Server
    }
    /// With `--endpoints`: servers the clients will be sent to that the
    /// endpoints do not list (Sentinel's primary and replicas), as
    /// (name, address). Default: none.
    async fn servers_behind(
        &self,
        _endpoints: &[String],
        _master: &str,
        _auth: &Auth,
        _t: Duration,
    ) -> Result<Vec<(String, String)>, String> {
        Ok(vec![])
    }
}

impl std::fmt::Display for dyn Servers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::fmt::Debug for dyn Servers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl PartialEq for dyn Servers {
    fn eq(&self, other: &Self) -> bool {
        self.name() == other.name()
    }
}

/// Finds a system's servers by the name a state file records (the
/// registry supplies it: this layer does not know the systems).
pub type FindServers = fn(&str) -> Option<&'static dyn Servers>;
