//! The registry entry of Redis under Sentinel: a primary with replicas and
//! three sentinels that fail over; clients ask the sentinels for the primary
//! and lock on it as on a single Redis.

use super::{Can, Facts, Servers, Service};
use crate::auth::Auth;
use crate::client::election::{redis::RedisElection, ElectionClient};
use crate::client::register::{redis::RedisRegister, RegisterClient};
use crate::client::{redis::RedisClient, ClientConfig, ClientError, LockClient, SENTINEL_MASTER};
use crate::cluster::{self, Cluster, ClusterError, Node, NodeRole, Plan};
use async_trait::async_trait;
use std::time::{Duration, Instant};

pub struct Sentinel;

/// The master name the sentinels monitor: lockjaw's own, or
/// `--sentinel-master` (`given`) for the user's own sentinels
/// (`--endpoints`, `endpoints`). The error says when the flag does not apply.
pub fn master_name(
    system: super::System,
    given: Option<&str>,
    endpoints: bool,
) -> Result<String, String> {
    match (given, system.facts().named_master, endpoints) {
        (None, _, _) => Ok(SENTINEL_MASTER.to_string()),
        (Some(m), true, true) => Ok(m.to_string()),
        (Some(_), true, false) => Err(format!(
            "--sentinel-master names the master of your own sentinels: give them with --endpoints (a local cluster's master is {SENTINEL_MASTER:?})"
        )),
        (Some(_), false, _) => Err(format!(
            "--sentinel-master applies to --system sentinel only, not {system}"
        )),
    }
}

/// The failover fact of every system but Sentinel.
pub(super) const FAILOVER_ELSEWHERE: &str =
    "failover promotes a replica over a primary that holds a fresh grant, on Redis under Sentinel or Redis Cluster (use --system sentinel or redis-cluster; for other systems, kill-node)";

#[async_trait]
impl Servers for Sentinel {
    fn name(&self) -> &'static str {
        "sentinel"
    }

    fn default_nodes(&self) -> usize {
        3
    }

    fn default_base_port(&self) -> u16 {
        17200
    }

    /// One per server, then the sentinels.
    fn port_span(&self, n: usize) -> usize {
        n + cluster::sentinel::SENTINELS
    }

    fn plan(&self, p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
        cluster::sentinel::plan(p)
    }

    async fn identity(
        &self,
        addr: &str,
        _: NodeRole,
        auth: &Auth,
        t: Duration,
    ) -> Result<Option<cluster::proof::ServerSays>, String> {
        cluster::redis::says_pid(addr, auth, t).await
    }

    async fn probe(&self, addr: &str, _: NodeRole, auth: &Auth, t: Duration) -> Result<(), String> {
        crate::client::redis_query::ping_as(addr, auth, t).await
    }

    async fn spawned(&self, c: &Cluster, n: &Node) {
        cluster::sentinel::servers_spawned(c, n).await
    }

    async fn wait_cluster_ready(
        &self,
        c: &Cluster,
        deadline: Instant,
        waited: Duration,
    ) -> Result<(), ClusterError> {
        cluster::sentinel::wait_ready(c, deadline, waited).await
    }

    async fn version(
        &self,
        addr: &str,
        _: NodeRole,
        auth: &Auth,
        t: Duration,
    ) -> Result<String, String> {
        crate::client::redis_query::version_as(addr, auth, t).await
    }

    async fn settings(
        &self,
        addr: &str,
        auth: &Auth,
        t: Duration,
    ) -> Result<Vec<(String, String)>, String> {
        crate::client::redis_query::settings(addr, auth, t).await
    }

    async fn leader_addr(&self, c: &Cluster) -> Result<Option<String>, ClusterError> {
        cluster::sentinel::primary_addr(c).await
    }

    fn client_role(&self) -> NodeRole {
        NodeRole::Sentinel
    }

    async fn servers_behind(
        &self,
        endpoints: &[String],
        master: &str,
        auth: &Auth,
        t: Duration,
    ) -> Result<Vec<(String, String)>, String> {
        crate::client::redis_query::servers_behind(endpoints, master, auth, t).await
    }

    async fn lock_keys_left(&self, c: &Cluster, key: &str) -> Result<Option<u64>, String> {
        super::redis::keys_left_on_servers(c, key).await
    }

    fn leader_word(&self) -> Option<&'static str> {
        Some("primary")
    }
}

#[async_trait]
impl Service for Sentinel {
    fn facts(&self) -> Facts {
        Facts {
            lock: Can::Yes,
            fencing_token: Can::Yes,
            lease_starts_at_acquire: true,
            acquire_once: true,
            partitionable_peers: Can::Yes,
            clock_faults: super::redis::REDIS_CLOCK,
            libfaketime: true,
            failover: Can::Yes,
            cluster_failover: Can::No(super::redis_cluster::CLUSTER_FAILOVER_ELSEWHERE),
            named_master: true,
            register: Can::Yes,
            election: Can::No(
                "leader election runs on etcd (election API), zookeeper (leader-election recipe) and redis (a lease key), not on Sentinel",
            ),
            restart_empty: super::redis::REDIS_RESTART_EMPTY,
            hosts: Can::No("the sentinels announce addresses of this host; lockjaw does not start Sentinel on hosts yet (for a Sentinel deployment you run: --endpoints, or --hosts with [node.attach] tables and --attach)"),
            compared_by_default: false,
            wire: super::Wire::Resp,
            keeps: super::Keeps::KeyOnPrimary,
            promises: crate::client::adapter::Promises {
                own_token_release: Some(true),
                validity_check: Some(false),
                renews_itself: Some(false),
            },
        }
    }

    async fn connect(&self, cfg: &ClientConfig) -> Result<Box<dyn LockClient>, ClientError> {
        Ok(Box::new(RedisClient::connect_sentinel(cfg).await?))
    }

    async fn connect_register(
        &self,
        cfg: &ClientConfig,
    ) -> Result<Box<dyn RegisterClient>, ClientError> {
        Ok(Box::new(RedisRegister::connect_sentinel(cfg).await?))
    }

    /// The client exists (a lease key on the Sentinel-named primary); the
    /// `election` fact keeps `run` from choosing it.
    async fn connect_election(
        &self,
        cfg: &ClientConfig,
    ) -> Result<Box<dyn ElectionClient>, ClientError> {
        Ok(Box::new(RedisElection::connect_sentinel(cfg).await?))
    }
}
