//! The registry entry of Redis Cluster: three primaries with a replica
//! each (`redis-cli --cluster create`); the lock is single Redis' script on
//! the primary of the key's slot, the fence counter in the same slot, and
//! the client follows `MOVED` / `ASK` / `TRYAGAIN` within one op.

use super::{Can, Facts, Servers, Service};
use crate::auth::Auth;
use crate::client::election::ElectionClient;
use crate::client::redis_cluster::RedisClusterClient;
use crate::client::register::RegisterClient;
use crate::client::{ClientConfig, ClientError, LockClient};
use crate::cluster::{self, Cluster, ClusterError, Node, NodeRole, Plan};
use async_trait::async_trait;
use std::time::{Duration, Instant};

pub struct RedisCluster;

/// The `cluster_failover` fact of every system but Redis Cluster.
pub(super) const CLUSTER_FAILOVER_ELSEWHERE: &str =
    "CLUSTER FAILOVER is a Redis Cluster command (use --system redis-cluster; Sentinel has failover)";

/// The lock key lockjaw's workloads use unless they name another: which
/// primary `cluster status` marks.
const DEFAULT_KEY: &str = "lockjaw";

#[async_trait]
impl Servers for RedisCluster {
    fn name(&self) -> &'static str {
        "redis-cluster"
    }

    fn default_nodes(&self) -> usize {
        cluster::redis_cluster::MIN_NODES
    }

    fn default_base_port(&self) -> u16 {
        17800
    }

    fn host_base_port(&self) -> u16 {
        6379
    }

    /// A client port and a bus port per node.
    fn port_span(&self, n: usize) -> usize {
        2 * n
    }

    fn plan(&self, p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
        cluster::redis_cluster::plan(p)
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

    async fn wait_cluster_ready(
        &self,
        c: &Cluster,
        deadline: Instant,
        waited: Duration,
    ) -> Result<(), ClusterError> {
        cluster::redis_cluster::wait_ready(c, deadline, waited).await
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
        crate::client::redis_slots::settings_as(addr, auth, t).await
    }

    /// The primary of the default lock key's slot.
    async fn leader_addr(&self, c: &Cluster) -> Result<Option<String>, ClusterError> {
        cluster::redis_cluster::primary_of(c, DEFAULT_KEY).await
    }

    async fn key_primary_addr(
        &self,
        c: &Cluster,
        key: &str,
    ) -> Result<Option<String>, ClusterError> {
        cluster::redis_cluster::primary_of(c, key).await
    }

    async fn servers_behind(
        &self,
        endpoints: &[String],
        _master: &str,
        auth: &Auth,
        t: Duration,
    ) -> Result<Vec<(String, String)>, String> {
        cluster::redis_cluster::servers_behind(endpoints, auth, t).await
    }

    fn leader_word(&self) -> Option<&'static str> {
        Some("primary")
    }
}

#[async_trait]
impl Service for RedisCluster {
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
            cluster_failover: Can::Yes,
            named_master: false,
            register: Can::No(
                "the register runs on a single Redis or the Sentinel-named primary; lockjaw has no Redis Cluster register client yet (the lock client's redirections are its own)",
            ),
            election: Can::No(
                "leader election runs on etcd (election API), zookeeper (leader-election recipe) and redis (a lease key), not on Redis Cluster",
            ),
            restart_empty: super::redis::REDIS_RESTART_EMPTY,
            hosts: Can::Yes,
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
        Ok(Box::new(RedisClusterClient::connect(cfg).await?))
    }

    async fn connect_register(
        &self,
        _cfg: &ClientConfig,
    ) -> Result<Box<dyn RegisterClient>, ClientError> {
        Err(super::lacks(
            "the register",
            super::System::RedisCluster,
            |f| f.register,
        ))
    }

    async fn connect_election(
        &self,
        _cfg: &ClientConfig,
    ) -> Result<Box<dyn ElectionClient>, ClientError> {
        Err(super::lacks(
            "leader election",
            super::System::RedisCluster,
            |f| f.election,
        ))
    }
}
