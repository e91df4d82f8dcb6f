//! The registry entry of etcd: a Raft cluster; locks and leader election
//! through its concurrency API on a lease granted before the acquire; the
//! revision as fence. Its Go servers ignore libfaketime.

use super::{Can, Facts, Servers, Service};
use crate::auth::Auth;
use crate::client::election::{etcd::EtcdElection, ElectionClient};
use crate::client::register::{etcd::EtcdRegister, RegisterClient};
use crate::client::{etcd::EtcdClient, ClientConfig, ClientError, LockClient};
use crate::cluster::{self, Cluster, ClusterError, LeaderPoll, Node, NodeRole, Plan};
use async_trait::async_trait;
use std::time::{Duration, Instant};

pub struct Etcd;

#[async_trait]
impl Servers for Etcd {
    fn name(&self) -> &'static str {
        "etcd"
    }

    fn default_nodes(&self) -> usize {
        3
    }

    fn default_base_port(&self) -> u16 {
        17300
    }

    fn host_base_port(&self) -> u16 {
        2379
    }

    /// Client and peer port per member.
    fn port_span(&self, n: usize) -> usize {
        2 * n
    }

    fn plan(&self, p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
        cluster::etcd::plan(p)
    }

    async fn identity(
        &self,
        addr: &str,
        _: NodeRole,
        auth: &Auth,
        t: Duration,
    ) -> Result<Option<cluster::proof::ServerSays>, String> {
        let (started, member) = cluster::etcd::identity(addr, auth, t).await?;
        Ok(Some(cluster::proof::ServerSays::Etcd { started, member }))
    }

    async fn probe(&self, addr: &str, _: NodeRole, auth: &Auth, t: Duration) -> Result<(), String> {
        cluster::etcd::probe(addr, auth, t).await
    }

    async fn keys_with_prefix(
        &self,
        addr: &str,
        prefix: &str,
        auth: &Auth,
        t: Duration,
    ) -> Result<Option<u64>, String> {
        cluster::etcd::count_prefix(addr, prefix, auth, t)
            .await
            .map(Some)
    }

    fn stop_together(&self) -> bool {
        false
    }

    async fn spawned(&self, c: &Cluster, n: &Node) {
        cluster::etcd::wait_serving(c, n).await
    }

    async fn wait_cluster_ready(
        &self,
        c: &Cluster,
        deadline: Instant,
        waited: Duration,
    ) -> Result<(), ClusterError> {
        cluster::etcd::wait_leader(c, deadline, waited).await
    }

    async fn version(
        &self,
        addr: &str,
        _: NodeRole,
        auth: &Auth,
        t: Duration,
    ) -> Result<String, String> {
        cluster::etcd::version(addr, auth, t).await
    }

    async fn settings(
        &self,
        addr: &str,
        auth: &Auth,
        t: Duration,
    ) -> Result<Vec<(String, String)>, String> {
        if auth.tls.is_some() {
            // /debug/vars is read over plain HTTP: a TLS member records none
            // (a user alone does not guard it).
            return Ok(vec![]);
        }
        cluster::etcd::settings(addr, t).await
    }

    async fn leader_addr(&self, c: &Cluster) -> Result<Option<String>, ClusterError> {
        cluster::etcd::leader_addr(c).await
    }

    async fn poll_leader(&self, c: &Cluster, _key: &str) -> Result<LeaderPoll, ClusterError> {
        Ok(cluster::etcd::poll_leader(c).await)
    }

    async fn lock_keys_left(&self, c: &Cluster, key: &str) -> Result<Option<u64>, String> {
        // The mutex's keys are `KEY/<lease>`, one per holder or waiter.
        let t = Duration::from_secs(2);
        let mut last = String::from("no server");
        for n in c.servers() {
            match cluster::etcd::count_prefix(&n.addr, &format!("{key}/"), &c.auth, t).await {
                Ok(k) => return Ok(Some(k)),
                Err(e) => last = format!("{}: {e}", n.addr),
            }
        }
        Err(last)
    }

    fn leader_word(&self) -> Option<&'static str> {
        Some("leader")
    }
}

#[async_trait]
impl Service for Etcd {
    fn facts(&self) -> Facts {
        Facts {
            lock: Can::Yes,
            fencing_token: Can::Yes,
            lease_starts_at_acquire: false,
            acquire_once: false,
            partitionable_peers: Can::Yes,
            clock_faults: Can::No(
                "etcd ignores libfaketime (Go reads the clock without libc), so its clock cannot be moved",
            ),
            libfaketime: false,
            failover: Can::No(super::sentinel::FAILOVER_ELSEWHERE),
            cluster_failover: Can::No(super::redis_cluster::CLUSTER_FAILOVER_ELSEWHERE),
            named_master: false,
            register: Can::Yes,
            election: Can::Yes,
            restart_empty: Can::No(
                "an etcd member writes every grant to disk before it answers, and one restarted without its Raft log and member id cannot rejoin its cluster: it has no data to lose in a crash (use restart = \"data\")",
            ),
            hosts: Can::Yes,
            compared_by_default: true,
            wire: super::Wire::Opaque,
            keeps: super::Keeps::QuorumLease,
            promises: crate::client::adapter::Promises {
                own_token_release: Some(true),
                validity_check: Some(false),
                renews_itself: Some(true),
            },
        }
    }

    async fn connect(&self, cfg: &ClientConfig) -> Result<Box<dyn LockClient>, ClientError> {
        Ok(Box::new(EtcdClient::connect(cfg).await?))
    }

    async fn connect_register(
        &self,
        cfg: &ClientConfig,
    ) -> Result<Box<dyn RegisterClient>, ClientError> {
        Ok(Box::new(EtcdRegister::connect(cfg).await?))
    }

    async fn connect_election(
        &self,
        cfg: &ClientConfig,
    ) -> Result<Box<dyn ElectionClient>, ClientError> {
        Ok(Box::new(EtcdElection::connect(cfg).await?))
    }
}
