//! The registry entry of Redlock: N independent Redis nodes and the
//! client-side quorum algorithm. No fencing token, no single store, no
//! election; the nodes talk to no peer.

use super::{lacks, Can, Facts, Servers, Service, System};
use crate::auth::Auth;
use crate::client::election::ElectionClient;
use crate::client::register::RegisterClient;
use crate::client::{redlock::RedlockClient, ClientConfig, ClientError, LockClient};
use crate::cluster::{self, Cluster, ClusterError, Node, NodeRole, Plan};
use async_trait::async_trait;
use std::time::Duration;

pub struct Redlock;

#[async_trait]
impl Servers for Redlock {
    fn name(&self) -> &'static str {
        "redlock"
    }

    fn default_nodes(&self) -> usize {
        cluster::redlock::DEFAULT_NODES
    }

    fn default_base_port(&self) -> u16 {
        17100
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

    async fn lock_keys_left(&self, c: &Cluster, key: &str) -> Result<Option<u64>, String> {
        super::redis::keys_left_on_servers(c, key).await
    }

    fn leader_word(&self) -> Option<&'static str> {
        None
    }
}

#[async_trait]
impl Service for Redlock {
    fn facts(&self) -> Facts {
        Facts {
            lock: Can::Yes,
            fencing_token: Can::No("Redlock has no fencing token, so there is no fence to check"),
            lease_starts_at_acquire: true,
            acquire_once: true,
            partitionable_peers: Can::No(
                "Redlock's nodes are independent and talk to no peer (use partition-holder to cut a client off)",
            ),
            clock_faults: super::redis::REDIS_CLOCK,
            libfaketime: true,
            failover: Can::No(super::sentinel::FAILOVER_ELSEWHERE),
            cluster_failover: Can::No(super::redis_cluster::CLUSTER_FAILOVER_ELSEWHERE),
            named_master: false,
            register: Can::No(
                "Redlock has no single store to hold a register: its nodes are independent",
            ),
            election: Can::No("Redlock has no fence and no single lease key to elect a leader with"),
            restart_empty: super::redis::REDIS_RESTART_EMPTY,
            hosts: Can::Yes,
            compared_by_default: true,
            wire: super::Wire::Resp,
            keeps: super::Keeps::KeyOnMajority,
            promises: crate::client::adapter::Promises {
                own_token_release: Some(true),
                validity_check: Some(true),
                renews_itself: Some(false),
            },
        }
    }

    async fn connect(&self, cfg: &ClientConfig) -> Result<Box<dyn LockClient>, ClientError> {
        Ok(Box::new(RedlockClient::connect(cfg).await?))
    }

    async fn connect_register(
        &self,
        _: &ClientConfig,
    ) -> Result<Box<dyn RegisterClient>, ClientError> {
        Err(lacks("the register workload", System::Redlock, |f| {
            f.register
        }))
    }

    async fn connect_election(
        &self,
        _: &ClientConfig,
    ) -> Result<Box<dyn ElectionClient>, ClientError> {
        Err(lacks("leader election", System::Redlock, |f| f.election))
    }
}
