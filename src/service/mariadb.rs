//! The registry entry of MariaDB: named locks (`GET_LOCK` /
//! `RELEASE_LOCK`) held as long as the holder's session, recorded as a
//! session lease (`lease_ms: 0`: every successful statement on the
//! holding session proves it alive at that moment, and nothing bounds how
//! long it lasts after); a counter row incremented on the holding session
//! as fence. The MySQL-family counterpart of PostgreSQL's advisory locks.

use super::{Can, Facts, Servers, Service, System};
use crate::auth::Auth;
use crate::client::election::ElectionClient;
use crate::client::register::RegisterClient;
use crate::client::{mariadb::MariadbClient, ClientConfig, ClientError, LockClient};
use crate::cluster::{self, ClusterError, Node, NodeRole, Plan};
use async_trait::async_trait;
use std::time::Duration;

pub struct Mariadb;

#[async_trait]
impl Servers for Mariadb {
    fn name(&self) -> &'static str {
        "mariadb"
    }

    fn default_nodes(&self) -> usize {
        1
    }

    fn default_base_port(&self) -> u16 {
        17650
    }

    fn plan(&self, p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
        cluster::mariadb::plan(p)
    }

    async fn probe(&self, addr: &str, _: NodeRole, _: &Auth, t: Duration) -> Result<(), String> {
        crate::client::mariadb_conn::probe(addr, t).await
    }

    async fn version(
        &self,
        addr: &str,
        _: NodeRole,
        _: &Auth,
        t: Duration,
    ) -> Result<String, String> {
        crate::client::mariadb_conn::version(addr, t).await
    }

    fn leader_word(&self) -> Option<&'static str> {
        None
    }
}

#[async_trait]
impl Service for Mariadb {
    fn facts(&self) -> Facts {
        Facts {
            lock: Can::Yes,
            fencing_token: Can::Yes,
            // The session, opened before the acquire, carries the lock.
            lease_starts_at_acquire: false,
            acquire_once: true,
            partitionable_peers: Can::No(
                "a single MariaDB server has no peers to cut it off from (use partition-holder to cut a client off)",
            ),
            clock_faults: Can::No(
                "a MariaDB named lock lives as long as its session: no server clock times it, so a clock fault has nothing to move",
            ),
            libfaketime: false,
            failover: Can::No(super::sentinel::FAILOVER_ELSEWHERE),
            cluster_failover: Can::No(super::redis_cluster::CLUSTER_FAILOVER_ELSEWHERE),
            named_master: false,
            register: Can::No("lockjaw has no MariaDB register client (the named locks are the system under test; a register on InnoDB rows would test the storage engine instead)"),
            election: Can::No("lockjaw has no MariaDB election client (a named lock held by the leader's session would be the lock workload again)"),
            restart_empty: Can::No(
                "MariaDB's named locks die with their sessions at any restart, data or not; \
                 restarted empty it would only lose the fence counter",
            ),
            hosts: Can::No("lockjaw starts MariaDB only on this host (mariadb-install-db and the server run as the mysql user here); use --endpoints for a server on another host"),
            compared_by_default: false,
            wire: super::Wire::Opaque,
            keeps: super::Keeps::Session,
            promises: crate::client::adapter::Promises {
                own_token_release: Some(true),
                validity_check: None,
                renews_itself: None,
            },
        }
    }

    async fn connect(&self, cfg: &ClientConfig) -> Result<Box<dyn LockClient>, ClientError> {
        Ok(Box::new(MariadbClient::connect(cfg).await?))
    }

    async fn connect_register(
        &self,
        _: &ClientConfig,
    ) -> Result<Box<dyn RegisterClient>, ClientError> {
        Err(super::lacks("a register", System::Mariadb, |f| f.register))
    }

    async fn connect_election(
        &self,
        _: &ClientConfig,
    ) -> Result<Box<dyn ElectionClient>, ClientError> {
        Err(super::lacks("leader election", System::Mariadb, |f| {
            f.election
        }))
    }
}
