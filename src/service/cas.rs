//! The registry entry of `cas`, the lock-free alternative: no lock service
//! at all. Each worker reads the protected value and its version, then
//! writes with a conditional update on that version (the storage's
//! compare-and-set; `UPDATE ... WHERE version = $v` in PostgreSQL) and
//! retries on a conflict. There are no servers to start, probe or fault,
//! and no lock client: the worker runs [`crate::workload::cas`] instead.

use super::{lacks, Can, Facts, Servers, Service, System};
use crate::auth::Auth;
use crate::client::election::ElectionClient;
use crate::client::register::RegisterClient;
use crate::client::{ClientConfig, ClientError, LockClient};
use crate::cluster::{Cluster, ClusterError, Node, NodeRole, Plan};
use async_trait::async_trait;
use std::time::Duration;

pub struct Cas;

/// Why cas has no lock, no servers and no lock client.
pub(super) const NO_LOCK: &str = "cas takes no lock: the workers update the storage by conditional writes, and there is no lock service with servers or a lock client to start or fault";

#[async_trait]
impl Servers for Cas {
    fn name(&self) -> &'static str {
        "cas"
    }

    fn default_nodes(&self) -> usize {
        0
    }

    /// Never bound (no servers); distinct from the others all the same.
    fn default_base_port(&self) -> u16 {
        17600
    }

    fn port_span(&self, _: usize) -> usize {
        0
    }

    fn plan(&self, _: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
        Err(no_servers())
    }

    async fn probe(&self, _: &str, _: NodeRole, _: &Auth, _: Duration) -> Result<(), String> {
        Err(NO_LOCK.into())
    }

    async fn version(&self, _: &str, _: NodeRole, _: &Auth, _: Duration) -> Result<String, String> {
        Err(NO_LOCK.into())
    }

    async fn leader_addr(&self, _: &Cluster) -> Result<Option<String>, ClusterError> {
        Ok(None)
    }

    fn leader_word(&self) -> Option<&'static str> {
        None
    }
}

#[async_trait]
impl Service for Cas {
    fn facts(&self) -> Facts {
        Facts {
            lock: Can::No(NO_LOCK),
            fencing_token: Can::No(
                "cas takes no lock, so there is no fencing token: the version of each conditional write does its work",
            ),
            lease_starts_at_acquire: false,
            acquire_once: false,
            partitionable_peers: Can::No(NO_LOCK),
            clock_faults: Can::No(NO_LOCK),
            libfaketime: false,
            failover: Can::No(NO_LOCK),
            cluster_failover: Can::No(super::redis_cluster::CLUSTER_FAILOVER_ELSEWHERE),
            named_master: false,
            register: Can::No(NO_LOCK),
            election: Can::No(NO_LOCK),
            restart_empty: Can::No(NO_LOCK),
            hosts: Can::No(NO_LOCK),
            compared_by_default: false,
            wire: super::Wire::Opaque,
            keeps: super::Keeps::Nothing,
            promises: crate::client::adapter::Promises {
                own_token_release: None,
                validity_check: None,
                renews_itself: None,
            },
        }
    }

    async fn connect(&self, _: &ClientConfig) -> Result<Box<dyn LockClient>, ClientError> {
        Err(lacks("a lock client", System::Cas, |f| f.lock))
    }

    async fn connect_register(
        &self,
        _: &ClientConfig,
    ) -> Result<Box<dyn RegisterClient>, ClientError> {
        Err(lacks("the register", System::Cas, |f| f.register))
    }

    async fn connect_election(
        &self,
        _: &ClientConfig,
    ) -> Result<Box<dyn ElectionClient>, ClientError> {
        Err(lacks("leader election", System::Cas, |f| f.election))
    }
}

fn no_servers() -> ClusterError {
    ClusterError::Usage(format!(
        "--system cas: {NO_LOCK} (hint: use lockjaw run --system cas; cluster commands need a lock service: {})",
        super::having(|f| f.lock)
    ))
}
