//! The registry entry of PostgreSQL: session-level advisory locks
//! (`pg_try_advisory_lock` / `pg_advisory_unlock`) held as long as the
//! holder's session, recorded as a session lease (`lease_ms: 0`: every
//! successful statement on the holding session proves it alive at that
//! moment, and nothing bounds how long it lasts after); a counter row
//! incremented on the holding session as fence. Also [`Server`], one
//! server started for a run beside another system (`--storage postgres`).

use super::{Can, Facts, Servers, Service, System};
use crate::auth::Auth;
use crate::client::election::ElectionClient;
use crate::client::register::RegisterClient;
use crate::client::{postgres::PostgresClient, ClientConfig, ClientError, LockClient};
use crate::cluster::{self, Cluster, ClusterError, Node, NodeRole, Plan};
use async_trait::async_trait;
use std::path::{Path, PathBuf};
use std::time::Duration;

pub struct Postgres;

/// The `--system` name.
pub const NAME: &str = "postgres";

#[async_trait]
impl Servers for Postgres {
    fn name(&self) -> &'static str {
        NAME
    }

    fn default_nodes(&self) -> usize {
        1
    }

    fn default_base_port(&self) -> u16 {
        17500
    }

    fn plan(&self, p: &Plan<'_>) -> Result<Vec<Node>, ClusterError> {
        cluster::postgres::plan(p)
    }

    async fn probe(&self, addr: &str, _: NodeRole, auth: &Auth, t: Duration) -> Result<(), String> {
        crate::client::postgres_conn::probe(addr, auth, t).await
    }

    async fn version(
        &self,
        addr: &str,
        _: NodeRole,
        auth: &Auth,
        t: Duration,
    ) -> Result<String, String> {
        crate::client::postgres_conn::version(addr, auth, t).await
    }

    async fn settings(
        &self,
        addr: &str,
        auth: &Auth,
        t: Duration,
    ) -> Result<Vec<(String, String)>, String> {
        crate::client::postgres_conn::settings(addr, auth, t).await
    }

    fn leader_word(&self) -> Option<&'static str> {
        None
    }
}

#[async_trait]
impl Service for Postgres {
    fn facts(&self) -> Facts {
        Facts {
            lock: Can::Yes,
            fencing_token: Can::Yes,
            // The session, opened before the acquire, carries the lock.
            lease_starts_at_acquire: false,
            acquire_once: true,
            partitionable_peers: Can::No(
                "a single PostgreSQL server has no peers to cut it off from (use partition-holder to cut a client off)",
            ),
            clock_faults: Can::No(
                "a PostgreSQL advisory lock lives as long as its session: no server clock times it, so a clock fault has nothing to move",
            ),
            libfaketime: false,
            failover: Can::No(super::sentinel::FAILOVER_ELSEWHERE),
            cluster_failover: Can::No(super::redis_cluster::CLUSTER_FAILOVER_ELSEWHERE),
            named_master: false,
            register: Can::No("lockjaw has no PostgreSQL register client"),
            election: Can::No("lockjaw has no PostgreSQL election client"),
            restart_empty: Can::No(
                "PostgreSQL's advisory locks die with their sessions at any restart, data or not; \
                 restarted empty it would only lose the fence counter",
            ),
            hosts: Can::No("lockjaw starts PostgreSQL only on this host (initdb and the server run as the postgres user here); use --endpoints for a server on another host"),
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
        Ok(Box::new(PostgresClient::connect(cfg).await?))
    }

    async fn connect_register(
        &self,
        _: &ClientConfig,
    ) -> Result<Box<dyn RegisterClient>, ClientError> {
        Err(super::lacks("a register", System::Postgres, |f| f.register))
    }

    async fn connect_election(
        &self,
        _: &ClientConfig,
    ) -> Result<Box<dyn ElectionClient>, ClientError> {
        Err(super::lacks("leader election", System::Postgres, |f| {
            f.election
        }))
    }
}

/// One PostgreSQL server lockjaw started for a run, next to whatever else
/// the run starts (e.g. `--storage postgres` beside a Redis lock service):
/// a one-node cluster of its own in `DIR/postgres`, in the cgroup group
/// `lockjaw/<run-id>-pg`, its data in the temporary directory. [`Server::close`] (or
/// dropping it) stops it and removes its data directory; so does the undo
/// entry `Undo::Cluster { dir: Server::dir(run_dir) }` in `heal`, which
/// the caller pushes before [`Server::start`].
pub struct Server {
    pub cluster: Cluster,
}

impl Server {
    /// The cluster directory of a run's server (beneath the run directory).
    pub fn dir(run_dir: &Path) -> PathBuf {
        run_dir.join("postgres")
    }

    /// Start one server on `port` (127.0.0.1) for run `run_id`; waits until
    /// it answers. Errors name the missing program or the server's log.
    pub async fn start(run_dir: &Path, run_id: &str, port: u16) -> Result<Server, ClusterError> {
        let group = cluster::postgres::storage_group(run_id);
        Ok(Server {
            cluster: start_one(System::Postgres, Server::dir(run_dir), group, port).await?,
        })
    }

    /// `127.0.0.1:PORT`.
    pub fn addr(&self) -> String {
        self.cluster.nodes()[0].addr.clone()
    }

    /// `postgres://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> String {
        crate::client::postgres_conn::url_for(&self.addr())
    }

    /// Stop it and remove its data directory. Idempotent.
    pub fn close(&self) -> Result<(), ClusterError> {
        self.cluster.close()
    }
}

/// Start a one-node cluster of `system` in `dir` on `port` (127.0.0.1),
/// its nodes in the cgroup group `group` (beside the run's own, which
/// belongs to the run directory: this one's to `dir` beneath it); waits
/// until it answers. The storage servers of `--storage postgres|mariadb`.
pub(crate) async fn start_one(
    system: System,
    dir: PathBuf,
    group: String,
    port: u16,
) -> Result<Cluster, ClusterError> {
    let mut spec = cluster::ClusterSpec::new(system.servers(), dir);
    spec.nodes = Some(1);
    spec.base_port = Some(port);
    spec.group = Some(group);
    Cluster::start(&spec).await
}
