//! The registry entry of ZooKeeper: a ZAB ensemble; locks and leader
//! election by the ephemeral-sequential recipes on a session established
//! before the acquire; the znode's sequence number as fence.

use super::{Can, Facts, Servers, Service};
use crate::auth::Auth;
use crate::client::election::{zookeeper::ZkElection, ElectionClient};
use crate::client::register::{zookeeper::ZkRegister, RegisterClient};
use crate::client::{zookeeper::ZkClient, ClientConfig, ClientError, LockClient};
use crate::cluster::{self, Cluster, ClusterError, LeaderPoll, Node, NodeRole, Plan};
use async_trait::async_trait;
use std::time::Duration;

pub struct Zookeeper;

#[async_trait]
impl Servers for Zookeeper {
    fn name(&self) -> &'static str {
        "zookeeper"
    }

    fn default_nodes(&self) -> usize {
        3
    }

    fn default_base_port(&self) -> u16 {
        17400
    }

    fn host_base_port(&self) -> u16 {
        2181
    }

    /// Client, quorum and election port per server.
    fn port_span(&self, n: usize) -> usize {
        3 * n
    }

    fn plan(&self, p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
        cluster::zookeeper::plan(p)
    }

    async fn identity(
        &self,
        addr: &str,
        _: NodeRole,
        auth: &Auth,
        t: Duration,
    ) -> Result<Option<cluster::proof::ServerSays>, String> {
        let (id, data_dir) = cluster::zookeeper::identity_as(addr, auth, t).await?;
        Ok(Some(cluster::proof::ServerSays::Zk { id, data_dir }))
    }

    async fn probe(&self, addr: &str, _: NodeRole, auth: &Auth, t: Duration) -> Result<(), String> {
        cluster::zookeeper::probe_as(addr, auth, t)
            .await
            .map(|_| ())
    }

    async fn version(
        &self,
        addr: &str,
        _: NodeRole,
        auth: &Auth,
        t: Duration,
    ) -> Result<String, String> {
        cluster::zookeeper::version(addr, auth, t).await
    }

    async fn settings(
        &self,
        addr: &str,
        auth: &Auth,
        t: Duration,
    ) -> Result<Vec<(String, String)>, String> {
        cluster::zookeeper::settings(addr, auth, t).await
    }

    async fn leader_addr(&self, c: &Cluster) -> Result<Option<String>, ClusterError> {
        cluster::zookeeper::leader_addr(c).await
    }

    async fn poll_leader(&self, c: &Cluster, _key: &str) -> Result<LeaderPoll, ClusterError> {
        Ok(cluster::zookeeper::poll_leader(c).await)
    }

    async fn lock_keys_left(&self, c: &Cluster, key: &str) -> Result<Option<u64>, String> {
        // One sequential node per holder or waiter, ephemeral: a session
        // still open (or not yet expired) keeps its node.
        let t = Duration::from_secs(2);
        let connect = c.client_endpoints().join(",");
        let (zk, _bridge) =
            crate::client::zookeeper::open_session(&connect, Duration::from_secs(4), t, &c.auth)
                .await
                .map_err(|e| e.to_string())?;
        let dir = crate::client::zookeeper::lock_dir(key);
        let r = tokio::time::timeout(t, zk.list_children(&dir))
            .await
            .map_err(|_| format!("{connect}: no answer to a list of {dir} within {t:?}"))?;
        match r {
            Ok(children) => Ok(Some(children.len() as u64)),
            Err(zookeeper_client::Error::NoNode) => Ok(Some(0)),
            Err(e) => Err(format!("{connect}: listing {dir}: {e}")),
        }
    }

    fn leader_word(&self) -> Option<&'static str> {
        Some("leader")
    }
}

#[async_trait]
impl Service for Zookeeper {
    fn facts(&self) -> Facts {
        Facts {
            lock: Can::Yes,
            fencing_token: Can::Yes,
            lease_starts_at_acquire: false,
            acquire_once: false,
            partitionable_peers: Can::Yes,
            clock_faults: Can::No(
                "clock faults under libfaketime are not validated on ZooKeeper's JVM",
            ),
            libfaketime: false,
            failover: Can::No(super::sentinel::FAILOVER_ELSEWHERE),
            cluster_failover: Can::No(super::redis_cluster::CLUSTER_FAILOVER_ELSEWHERE),
            named_master: false,
            register: Can::Yes,
            election: Can::Yes,
            restart_empty: Can::No(
                "a ZooKeeper member writes every grant to disk before it answers, and one restarted without its transaction log and myid cannot rejoin its cluster: it has no data to lose in a crash (use restart = \"data\")",
            ),
            hosts: Can::Yes,
            compared_by_default: true,
            wire: super::Wire::ZooKeeper,
            keeps: super::Keeps::QuorumLease,
            promises: crate::client::adapter::Promises {
                own_token_release: Some(true),
                validity_check: Some(false),
                renews_itself: Some(true),
            },
        }
    }

    async fn connect(&self, cfg: &ClientConfig) -> Result<Box<dyn LockClient>, ClientError> {
        Ok(Box::new(ZkClient::connect(cfg).await?))
    }

    async fn connect_register(
        &self,
        cfg: &ClientConfig,
    ) -> Result<Box<dyn RegisterClient>, ClientError> {
        Ok(Box::new(ZkRegister::connect(cfg).await?))
    }

    async fn connect_election(
        &self,
        cfg: &ClientConfig,
    ) -> Result<Box<dyn ElectionClient>, ClientError> {
        Ok(Box::new(ZkElection::connect(cfg).await?))
    }
}
