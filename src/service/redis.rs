//! The registry entry of a single Redis server: `SET key token NX PX ttl`
//! with an INCR fence, one store for the register, a lease key for leader
//! election; started under libfaketime when clock faults need it.

use super::{Can, Facts, Servers, Service};
use crate::auth::Auth;
use crate::client::election::{redis::RedisElection, ElectionClient};
use crate::client::register::{redis::RedisRegister, RegisterClient};
use crate::client::{redis::RedisClient, ClientConfig, ClientError, LockClient};
use crate::cluster::{self, Cluster, ClusterError, Node, NodeRole, Plan};
use async_trait::async_trait;
use std::time::Duration;

pub struct Redis;

/// `EXISTS key` on every server of `c` (a replica holds its primary's
/// copy), summed: what a run left of its lock key on the Redis systems
/// whose clients take the key by its name.
pub(super) async fn keys_left_on_servers(c: &Cluster, key: &str) -> Result<Option<u64>, String> {
    use crate::client::redis_query;
    let t = Duration::from_secs(2);
    let mut n = 0;
    for s in c.servers() {
        let mut conn = redis_query::connect_as(&s.addr, &c.auth, t).await?;
        let found: u64 =
            tokio::time::timeout(t, redis::cmd("EXISTS").arg(key).query_async(&mut conn))
                .await
                .map_err(|_| format!("{}: no answer to EXISTS within {t:?}", s.addr))?
                .map_err(|e| format!("{}: {}", s.addr, redis_query::said(&e)))?;
        n += found;
    }
    Ok(Some(n))
}

/// The clock fact of the Redis-based systems (servers started by lockjaw).
pub(super) const REDIS_CLOCK: Can = Can::Yes;

/// The Redis-based systems keep the lock key in memory and, for a restart,
/// in the append-only file: a node restarted without it forgets the key.
pub(super) const REDIS_RESTART_EMPTY: Can = Can::Yes;

#[async_trait]
impl Servers for Redis {
    fn name(&self) -> &'static str {
        "redis"
    }

    fn default_nodes(&self) -> usize {
        1
    }

    fn default_base_port(&self) -> u16 {
        17000
    }

    fn host_base_port(&self) -> u16 {
        6379
    }

    fn plan(&self, p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
        cluster::redis::plan(p)
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

    fn leader_word(&self) -> Option<&'static str> {
        None
    }

    async fn lock_keys_left(&self, c: &Cluster, key: &str) -> Result<Option<u64>, String> {
        keys_left_on_servers(c, key).await
    }
}

#[async_trait]
impl Service for Redis {
    fn facts(&self) -> Facts {
        Facts {
            lock: Can::Yes,
            fencing_token: Can::Yes,
            lease_starts_at_acquire: true,
            acquire_once: true,
            partitionable_peers: Can::No(
                "a single Redis has no peers to cut it off from (use partition-holder to cut a client off)",
            ),
            clock_faults: REDIS_CLOCK,
            libfaketime: true,
            failover: Can::No(super::sentinel::FAILOVER_ELSEWHERE),
            cluster_failover: Can::No(super::redis_cluster::CLUSTER_FAILOVER_ELSEWHERE),
            named_master: false,
            register: Can::Yes,
            election: Can::Yes,
            restart_empty: REDIS_RESTART_EMPTY,
            hosts: Can::Yes,
            compared_by_default: true,
            wire: super::Wire::Resp,
            keeps: super::Keeps::KeyOnOneNode,
            promises: crate::client::adapter::Promises {
                own_token_release: Some(true),
                validity_check: Some(false),
                renews_itself: Some(false),
            },
        }
    }

    async fn connect(&self, cfg: &ClientConfig) -> Result<Box<dyn LockClient>, ClientError> {
        Ok(Box::new(RedisClient::connect(cfg).await?))
    }

    async fn connect_register(
        &self,
        cfg: &ClientConfig,
    ) -> Result<Box<dyn RegisterClient>, ClientError> {
        Ok(Box::new(RedisRegister::connect(cfg).await?))
    }

    async fn connect_election(
        &self,
        cfg: &ClientConfig,
    ) -> Result<Box<dyn ElectionClient>, ClientError> {
        Ok(Box::new(RedisElection::connect(cfg).await?))
    }
}
